//! The disk quota of an endpoint's work directory (`max_disk`,
//! `mpiws serve --max-disk`), and each key's share of it
//! (`max_disk_per_key`): uploads, pulled inputs, staged copies and what
//! jobs write all count, each against the key that caused it. Bytes are
//! claimed before they are written (uploads, pulls, copies) or, for what a
//! program writes, measured while it runs; a claim that does not fit is
//! refused with 507. One key filling its share leaves the rest to others.
//!
//! Bytes with no owner (what a given `--workdir` held at start) count
//! toward the whole quota only.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use crate::keys::KeyId;

pub struct Disk {
    max: u64,
    max_per_key: u64,
    used: Mutex<Used>,
}

#[derive(Default)]
struct Used {
    total: u64,
    by_key: HashMap<KeyId, u64>,
}

impl Used {
    fn of(&self, owner: Option<KeyId>) -> u64 {
        owner.and_then(|k| self.by_key.get(&k).copied()).unwrap_or(0)
    }

    fn add(&mut self, owner: Option<KeyId>, n: u64) {
        self.total = self.total.saturating_add(n);
        if let Some(k) = owner {
            let mine = self.by_key.entry(k).or_default();
            *mine = mine.saturating_add(n);
        }
    }
}

impl Disk {
    pub fn new(max: u64, max_per_key: u64) -> Disk {
        Disk { max, max_per_key, used: Mutex::new(Used::default()) }
    }

    /// Count `n` more bytes of `owner`, if they fit; else say what is full.
    pub fn claim(&self, owner: Option<KeyId>, n: u64) -> Result<(), String> {
        let mut used = self.used.lock();
        self.check(&used, owner, n)?;
        used.add(owner, n);
        Ok(())
    }

    /// Whether `n` more bytes of `owner` would fit now (nothing is counted).
    pub fn fits(&self, owner: Option<KeyId>, n: u64) -> Result<(), String> {
        self.check(&self.used.lock(), owner, n)
    }

    /// Count bytes that are already on disk, whether they fit or not (a
    /// program wrote them): the quota then refuses what comes next.
    pub fn force(&self, owner: Option<KeyId>, n: u64) {
        self.used.lock().add(owner, n);
    }

    /// Bytes of `owner` removed from disk.
    pub fn release(&self, owner: Option<KeyId>, n: u64) {
        let mut used = self.used.lock();
        used.total = used.total.saturating_sub(n);
        if let Some(k) = owner {
            if let Some(mine) = used.by_key.get_mut(&k) {
                *mine = mine.saturating_sub(n);
                if *mine == 0 {
                    used.by_key.remove(&k);
                }
            }
        }
    }

    /// A directory of `owner`'s measured again at `measured` bytes, of
    /// which `counted` (what was counted of it so far) is now set: the
    /// difference is given back or counted, and an error says if it no
    /// longer fits (counted all the same: the quota refuses what comes next).
    pub fn recount(&self, owner: Option<KeyId>, counted: &AtomicU64, measured: u64) -> Result<(), String> {
        let before = counted.swap(measured, Ordering::SeqCst);
        if measured <= before {
            self.release(owner, before - measured);
            return Ok(());
        }
        let more = measured - before;
        self.claim(owner, more).inspect_err(|_| self.force(owner, more))
    }

    /// Bytes counted: in all, and `owner`'s.
    pub fn used(&self, owner: Option<KeyId>) -> (u64, u64) {
        let used = self.used.lock();
        (used.total, used.of(owner))
    }

    fn check(&self, used: &Used, owner: Option<KeyId>, n: u64) -> Result<(), String> {
        let fits = |had: u64, max: u64| had.checked_add(n).is_some_and(|t| t <= max);
        if !fits(used.total, self.max) {
            return Err(format!(
                "the work directory's disk quota is full ({} of {} bytes used, {n} more asked for): \
                 remove files (DELETE /files/{{id}}, DELETE /jobs/{{id}}?remove=true) or raise it (mpiws serve --max-disk)",
                used.total, self.max
            ));
        }
        let mine = used.of(owner);
        if owner.is_some() && !fits(mine, self.max_per_key) {
            return Err(format!(
                "this key's share of the disk quota is full ({mine} of {} bytes used, {n} more asked for): \
                 remove its files (DELETE /files/{{id}}, DELETE /jobs/{{id}}?remove=true) or raise it (mpiws serve --max-disk-per-key)",
                self.max_per_key
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_key_fills_its_share_and_leaves_the_rest_to_others() {
        let (a, b) = (Some(KeyId(1)), Some(KeyId(2)));
        let d = Disk::new(100, 60);
        d.claim(a, 60).unwrap();
        assert!(d.claim(a, 1).unwrap_err().contains("this key's share"));
        assert!(d.fits(a, 1).is_err() && d.fits(b, 40).is_ok());
        d.claim(b, 40).unwrap();
        assert!(d.claim(b, 1).unwrap_err().contains("disk quota is full"));
        d.release(a, 30);
        assert_eq!(d.used(a), (70, 30));
        d.claim(b, 20).unwrap();
        assert_eq!(d.used(b), (90, 60));
    }

    #[test]
    fn forced_and_unowned_bytes_count_toward_the_whole() {
        let d = Disk::new(100, 100);
        d.force(None, 90);
        assert!(d.claim(Some(KeyId(1)), 11).unwrap_err().contains("disk quota is full"));
        d.force(Some(KeyId(1)), 50); // a program wrote past the quota: counted all the same
        assert_eq!(d.used(Some(KeyId(1))), (140, 50));
        assert!(d.claim(Some(KeyId(2)), 1).is_err());
        d.release(None, 90);
        d.release(Some(KeyId(1)), 50);
        assert_eq!(d.used(Some(KeyId(1))), (0, 0));
        assert!(d.claim(None, u64::MAX).is_err(), "no overflow");
    }
}
