//! What an endpoint keeps of an instance once it ended and its peers had
//! time to ask it about their messages (`instance_linger`, 60 s by
//! default: they may ask what it received, *matched* and *withdraw*, for
//! about that long after it ends): its status for its
//! client, its token to check who asks, why it ended for a late sender, and
//! digests of its binding for a *run* sent again. Not its parameters, its
//! endpoints list or its message state: an ended instance costs a summary,
//! however large its binding was.

use crate::rank::traffic::Counts;
use std::time::Instant;

use crate::error::Error;
use crate::rank::{Binding, Status};

pub struct Ended {
    pub status: Status,
    pub token: String,
    /// Why it ended: what a store that comes late is told.
    pub why: Error,
    binding: [u8; 32],
    endpoints: [u8; 32],
    /// When it was summarized: the oldest summaries are the first forgotten.
    pub at: Instant,
    /// What it sent to and received from each peer.
    pub traffic: Counts,
}

fn digest<T: serde::Serialize>(value: &T) -> [u8; 32] {
    let bytes = serde_json::to_vec(value).expect("a binding serializes");
    ring::digest::digest(&ring::digest::SHA256, &bytes).as_ref().try_into().expect("32 bytes")
}

impl Ended {
    pub fn new(binding: &Binding, status: Status, why: Error, traffic: Counts) -> Ended {
        Ended {
            traffic,
            status,
            token: binding.token.clone(),
            why,
            binding: digest(binding),
            endpoints: digest(&binding.endpoints),
            at: Instant::now(),
        }
    }

    /// Is `binding` the one it was created with (a *run* sent again)?
    pub fn same_binding(&self, binding: &Binding) -> bool {
        self.binding == digest(binding)
    }

    /// Does `binding` name the same endpoints and token (another rank of its domain)?
    pub fn same_domain(&self, binding: &Binding) -> bool {
        self.endpoints == digest(&binding.endpoints) && self.token == binding.token
    }
}
