//! The disk quota of an endpoint's work directory (`max_disk`,
//! `mpiws serve --max-disk`): uploads, pulled inputs, staged copies and
//! what jobs write all count. Bytes are claimed before they are written
//! (uploads, pulls, copies) or, for what a program writes, measured while
//! it runs; a claim that does not fit is refused with 507.

use std::sync::atomic::{AtomicU64, Ordering};

pub struct Disk {
    max: u64,
    used: AtomicU64,
}

impl Disk {
    pub fn new(max: u64) -> Disk {
        Disk { max, used: AtomicU64::new(0) }
    }

    /// Count `n` more bytes, if they fit; else say what is full.
    pub fn claim(&self, n: u64) -> Result<(), String> {
        self.used
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |used| used.checked_add(n).filter(|&t| t <= self.max))
            .map(|_| ())
            .map_err(|used| self.full(used, n))
    }

    /// Whether `n` more bytes would fit now (nothing is counted).
    pub fn fits(&self, n: u64) -> Result<(), String> {
        let used = self.used();
        match used.checked_add(n) {
            Some(total) if total <= self.max => Ok(()),
            _ => Err(self.full(used, n)),
        }
    }

    /// Count bytes that are already on disk, whether they fit or not (a
    /// program wrote them): the quota then refuses what comes next.
    pub fn force(&self, n: u64) {
        let _ = self.used.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |used| Some(used.saturating_add(n)));
    }

    /// Bytes removed from disk.
    pub fn release(&self, n: u64) {
        let _ = self.used.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |used| Some(used.saturating_sub(n)));
    }

    pub fn used(&self) -> u64 {
        self.used.load(Ordering::SeqCst)
    }

    fn full(&self, used: u64, n: u64) -> String {
        format!(
            "the work directory's disk quota is full ({used} of {} bytes used, {n} more asked for): \
             remove files (DELETE /files/{{id}}, DELETE /jobs/{{id}}?remove=true) or raise it (mpiws serve --max-disk)",
            self.max
        )
    }
}
