//! Round trips measured on this process's links: the time from sending a
//! stream's upgrade request to its `101` answer (one round trip plus the
//! peer's handling), kept for the last `KEPT` streams opened. The
//! collectives read it to learn whether their peers are near or far
//! (`mpi::collective::network`).

use std::collections::VecDeque;
use std::time::Duration;

use parking_lot::Mutex;

const KEPT: usize = 64;

static SAMPLES: Mutex<VecDeque<Duration>> = Mutex::new(VecDeque::new());

/// One stream opened after `rtt`.
pub fn record(rtt: Duration) {
    let mut s = SAMPLES.lock();
    if s.len() == KEPT {
        s.pop_front();
    }
    s.push_back(rtt);
}

/// The median of the round trips kept, if any stream was opened.
pub fn median() -> Option<Duration> {
    let mut v: Vec<Duration> = SAMPLES.lock().iter().copied().collect();
    v.sort();
    v.get(v.len() / 2).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_of_the_last_samples() {
        for ms in [5, 1, 9] {
            record(Duration::from_millis(ms));
        }
        assert_eq!(median(), Some(Duration::from_millis(5)));
        for _ in 0..KEPT {
            record(Duration::from_millis(20));
        }
        assert_eq!(median(), Some(Duration::from_millis(20)));
        assert_eq!(SAMPLES.lock().len(), KEPT);
    }
}
