//! A rank's receive state: its mailbox (`engine::mailbox`, MPI's matching
//! and ordering rules) and what surrounds it — posted receives and the
//! buffers a large message may be read straight into, messages being read
//! so (claims), peers found gone, collective contexts revoked, the end of
//! the rank.

use std::collections::HashMap;
use std::sync::Arc;

use crate::engine::completion::{Completion, RecvBuffer};
use crate::engine::mailbox::{Mailbox, Message, Pattern, RecvId};
use crate::error::Error;

/// A posted receive: where its outcome goes, and the caller's buffer if it
/// gave one. Buffers are only dropped with no lock held (they may belong to
/// Python, and releasing one takes the GIL).
pub struct Waiting {
    pub completion: Arc<Completion>,
    pub buffer: Option<Box<dyn RecvBuffer>>,
}

/// A message being read straight into a receive's buffer (`Instance::claim`).
/// Kept track of so that a stream cut off mid-read loses nothing: the sender
/// sends the message again, and the retry goes to the same receive.
pub enum Claim {
    Reading,
    /// A retry came while the first copy was still being read.
    Retry(Message),
    /// The read was cut off: the receive waits for the retry.
    Cut(Waiting),
}

#[derive(Default)]
pub struct Inbox {
    pub mailbox: Mailbox,
    pub waiting: HashMap<RecvId, Waiting>,
    /// By (source, sequence number).
    pub claims: HashMap<(u32, u64), Claim>,
    /// Set when the instance ended: every later operation fails with it.
    pub closed: Option<Error>,
    /// Peers found gone (`rank::liveness`), and why.
    pub gone: HashMap<u32, Error>,
    /// Collective contexts revoked after a failure (`Schedule::revoke`), and why.
    pub revoked: HashMap<u64, Error>,
}

impl Inbox {
    /// Why a receive with `pattern` can never be satisfied, if it cannot: its
    /// source is gone, or (any source) every other rank is.
    pub fn hopeless(&self, pattern: &Pattern, size: u32) -> Option<Error> {
        if let Some(e) = self.revoked.get(&pattern.context) {
            return Some(e.clone());
        }
        unsatisfiable(&self.gone, size, pattern).cloned()
    }

    /// Revoke a collective context: its posted receives are withdrawn (to be
    /// failed), and later ones fail at once.
    pub fn revoke(&mut self, context: u64, why: Error) -> Vec<(Waiting, Error)> {
        if self.revoked.contains_key(&context) {
            return Vec::new();
        }
        let why = Error::new(why.class, format!("collectives on this communicator were revoked after a failure: {}", why.message));
        self.revoked.insert(context, why.clone());
        let ids = self.mailbox.withdraw(|p| p.context == context);
        ids.into_iter().filter_map(|id| self.waiting.remove(&id)).map(|w| (w, why.clone())).collect()
    }
}

/// Why a receive with `pattern` can never be matched, given the peers that
/// are `gone`: its source is gone, or (any source) every other rank is.
pub fn unsatisfiable<'a>(gone: &'a HashMap<u32, Error>, size: u32, pattern: &Pattern) -> Option<&'a Error> {
    match pattern.source {
        Some(s) => gone.get(&s),
        None if gone.len() + 1 >= size as usize => gone.values().next(),
        None => None,
    }
}

/// Remove the receives whose claimed message was cut off, from the sources
/// `doomed` picks: no retry will come for them.
pub fn take_cut(claims: &mut HashMap<(u32, u64), Claim>, doomed: impl Fn(u32) -> bool) -> Vec<Waiting> {
    let keys: Vec<(u32, u64)> = claims.iter().filter(|((s, _), c)| doomed(*s) && matches!(c, Claim::Cut(_))).map(|(k, _)| *k).collect();
    keys.into_iter()
        .filter_map(|k| match claims.remove(&k) {
            Some(Claim::Cut(w)) => Some(w),
            _ => None,
        })
        .collect()
}
