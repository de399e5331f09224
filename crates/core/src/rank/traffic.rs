//! What a rank sent to and received from each peer: messages and their
//! payload bytes, counted as they are sent (sequence numbers given) and
//! filed (duplicates not counted). Two relaxed additions per message: the
//! counting costs a rank nothing it would notice.
//!
//! An instance whose code runs in a child process (`service::sandbox`) is
//! counted there; the child reports its counts to the endpoint now and then
//! and at its end, and the endpoint's record takes them ([`Traffic::take`]).

use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

pub struct Traffic {
    /// Per peer: [messages, bytes].
    sent: Vec<[AtomicU64; 2]>,
    received: Vec<[AtomicU64; 2]>,
}

/// The counts at one moment: per peer (its rank the index), [messages, bytes].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    pub sent: Vec<[u64; 2]>,
    pub received: Vec<[u64; 2]>,
}

impl Counts {
    /// In all: [messages sent, bytes sent, messages received, bytes received].
    pub fn totals(&self) -> [u64; 4] {
        let sum = |v: &[[u64; 2]], i: usize| v.iter().fold(0u64, |t, c| t.saturating_add(c[i]));
        [sum(&self.sent, 0), sum(&self.sent, 1), sum(&self.received, 0), sum(&self.received, 1)]
    }
}

fn zeros(size: u32) -> Vec<[AtomicU64; 2]> {
    (0..size).map(|_| [AtomicU64::new(0), AtomicU64::new(0)]).collect()
}

fn add(counts: &[[AtomicU64; 2]], peer: u32, bytes: u64) {
    if let Some(c) = counts.get(peer as usize) {
        c[0].fetch_add(1, Ordering::Relaxed);
        c[1].fetch_add(bytes, Ordering::Relaxed);
    }
}

fn read(counts: &[[AtomicU64; 2]]) -> Vec<[u64; 2]> {
    counts.iter().map(|c| [c[0].load(Ordering::Relaxed), c[1].load(Ordering::Relaxed)]).collect()
}

impl Traffic {
    /// Nothing yet, with each of `size` peers.
    pub fn new(size: u32) -> Traffic {
        Traffic { sent: zeros(size), received: zeros(size) }
    }

    pub fn sent(&self, dest: u32, bytes: u64) {
        add(&self.sent, dest, bytes);
    }

    pub fn received(&self, source: u32, bytes: u64) {
        add(&self.received, source, bytes);
    }

    pub fn counts(&self) -> Counts {
        Counts { sent: read(&self.sent), received: read(&self.received) }
    }

    /// Take the counts a child reported for the instance this is the record
    /// of: each only ever rises (a late report never lowers a count), and
    /// peers beyond the domain's size are left out.
    pub fn take(&self, reported: &Counts) {
        for (mine, theirs) in [(&self.sent, &reported.sent), (&self.received, &reported.received)] {
            for (c, r) in mine.iter().zip(theirs) {
                c[0].fetch_max(r[0], Ordering::Relaxed);
                c[1].fetch_max(r[1], Ordering::Relaxed);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_peer_is_counted_apart_and_totals_add_them() {
        let t = Traffic::new(3);
        t.sent(1, 8);
        t.sent(1, 8);
        t.sent(2, 100);
        t.received(0, 5);
        t.sent(7, 1); // no such peer: nothing counted, nothing broken
        let c = t.counts();
        assert_eq!(c.sent, vec![[0, 0], [2, 16], [1, 100]]);
        assert_eq!(c.received, vec![[1, 5], [0, 0], [0, 0]]);
        assert_eq!(c.totals(), [3, 116, 1, 5]);
    }

    #[test]
    fn a_record_takes_a_childs_reports_and_never_goes_back() {
        let record = Traffic::new(2);
        record.take(&Counts { sent: vec![[1, 10], [2, 20]], received: vec![[0, 0], [3, 30]] });
        record.take(&Counts { sent: vec![[0, 0], [1, 5]], received: vec![[9, 9], [3, 30], [4, 4]] }); // late, and too long
        let c = record.counts();
        assert_eq!((c.sent, c.received), (vec![[1, 10], [2, 20]], vec![[9, 9], [3, 30]]));
    }
}
