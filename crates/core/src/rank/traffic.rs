//! What a rank sent to and received from each peer: messages and their
//! payload bytes, counted as they are sent (sequence numbers given) and
//! filed (duplicates not counted). Two relaxed additions per message: the
//! counting costs a rank nothing it would notice.
//!
//! And two times, as histograms ([`Times`]): how long its receives waited
//! for their message, from posted to matched (0 for a message that was
//! there first: the latency the program sees), and how long each message
//! took to be handled where it arrived, from its head read (a stream's
//! frame, a store's request) to filed (`handled`). A clock read or two a
//! message.
//!
//! An instance whose code runs in a child process (`service::sandbox`) is
//! counted there; the child reports its counts to the endpoint now and then
//! and at its end, and the endpoint's record takes them ([`Traffic::take`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// The upper bounds (seconds) of the time histograms' buckets.
pub const TIME_BUCKETS: [f64; 12] = [0.00001, 0.00005, 0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 10.0];

pub struct Traffic {
    /// Per peer: [messages, bytes].
    sent: Vec<[AtomicU64; 2]>,
    received: Vec<[AtomicU64; 2]>,
    waits: Clock,
    handling: Clock,
}

/// A time histogram counted as it goes: per bucket (the last: longer than
/// every bound), and the sum in nanoseconds.
#[derive(Default)]
struct Clock {
    buckets: [AtomicU64; TIME_BUCKETS.len() + 1],
    nanos: AtomicU64,
}

impl Clock {
    fn add(&self, took: Duration) {
        let seconds = took.as_secs_f64();
        let i = TIME_BUCKETS.iter().position(|b| seconds <= *b).unwrap_or(TIME_BUCKETS.len());
        self.buckets[i].fetch_add(1, Ordering::Relaxed);
        self.nanos.fetch_add(u64::try_from(took.as_nanos()).unwrap_or(u64::MAX), Ordering::Relaxed);
    }

    fn read(&self) -> Times {
        Times {
            buckets: self.buckets.iter().map(|n| n.load(Ordering::Relaxed)).collect(),
            seconds: self.nanos.load(Ordering::Relaxed) as f64 / 1e9,
        }
    }

    /// Take a child's report: each count only ever rises.
    fn take(&self, reported: &Times) {
        for (c, r) in self.buckets.iter().zip(&reported.buckets) {
            c.fetch_max(*r, Ordering::Relaxed);
        }
        self.nanos.fetch_max((reported.seconds * 1e9) as u64, Ordering::Relaxed);
    }
}

/// The counts at one moment: per peer (its rank the index), [messages, bytes].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Counts {
    pub sent: Vec<[u64; 2]>,
    pub received: Vec<[u64; 2]>,
    /// How long receives waited (none yet: left out).
    #[serde(default, skip_serializing_if = "Times::is_empty")]
    pub waits: Times,
    /// How long messages took to be handled (none yet: left out).
    #[serde(default, skip_serializing_if = "Times::is_empty")]
    pub handling: Times,
}

/// A time histogram at one moment.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Times {
    /// Per bucket of [`TIME_BUCKETS`] (not cumulative), the last for longer times.
    pub buckets: Vec<u64>,
    pub seconds: f64,
}

impl Times {
    pub fn is_empty(&self) -> bool {
        self.buckets.iter().all(|&n| n == 0)
    }

    pub fn count(&self) -> u64 {
        self.buckets.iter().fold(0u64, |t, &n| t.saturating_add(n))
    }

    /// Add `other`'s to these.
    pub fn add(&mut self, other: &Times) {
        self.buckets.resize(TIME_BUCKETS.len() + 1, 0);
        for (mine, theirs) in self.buckets.iter_mut().zip(&other.buckets) {
            *mine = mine.saturating_add(*theirs);
        }
        self.seconds += other.seconds;
    }
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
        Traffic { sent: zeros(size), received: zeros(size), waits: Clock::default(), handling: Clock::default() }
    }

    pub fn sent(&self, dest: u32, bytes: u64) {
        add(&self.sent, dest, bytes);
    }

    pub fn received(&self, source: u32, bytes: u64) {
        add(&self.received, source, bytes);
    }

    /// Receives posted at `posted` have their message now.
    pub fn waited(&self, posted: impl IntoIterator<Item = Instant>) {
        for at in posted {
            self.waits.add(at.elapsed());
        }
    }

    /// A message whose head was read at `since` is filed (or read into its receive) now.
    pub fn handled(&self, since: Instant) {
        self.handling.add(since.elapsed());
    }

    pub fn counts(&self) -> Counts {
        Counts { sent: read(&self.sent), received: read(&self.received), waits: self.waits.read(), handling: self.handling.read() }
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
        self.waits.take(&reported.waits);
        self.handling.take(&reported.handling);
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
        let v = serde_json::to_value(&c).unwrap();
        assert!(v.get("waits").is_none() && v.get("handling").is_none(), "nothing timed yet: left out");
    }

    #[test]
    fn times_fall_in_their_buckets_and_a_report_only_raises_them() {
        let t = Traffic::new(1);
        let now = Instant::now();
        t.waited([now, now - Duration::from_millis(30), now - Duration::from_secs(20)]);
        t.handled(now);
        let c = t.counts();
        let w = &c.waits;
        assert_eq!((w.count(), c.handling.count()), (3, 1));
        assert_eq!(w.buckets[TIME_BUCKETS.iter().position(|&b| b == 0.05).unwrap()], 1, "30 ms: at most 50 ms");
        assert_eq!(w.buckets[TIME_BUCKETS.len()], 1, "20 s: beyond every bound");
        assert!(w.seconds >= 20.03);
        let mut all = Times::default();
        all.add(w);
        all.add(w);
        assert_eq!((all.count(), all.buckets.len()), (6, TIME_BUCKETS.len() + 1));
        let record = Traffic::new(1);
        record.take(&c);
        record.take(&Counts::default()); // an older report
        assert_eq!(record.counts().waits, c.waits);
    }

    #[test]
    fn a_record_takes_a_childs_reports_and_never_goes_back() {
        let record = Traffic::new(2);
        record.take(&Counts { sent: vec![[1, 10], [2, 20]], received: vec![[0, 0], [3, 30]], ..Counts::default() });
        record.take(&Counts { sent: vec![[0, 0], [1, 5]], received: vec![[9, 9], [3, 30], [4, 4]], ..Counts::default() }); // late, and too long
        let c = record.counts();
        assert_eq!((c.sent, c.received), (vec![[1, 10], [2, 20]], vec![[9, 9], [3, 30]]));
    }
}
