//! The request bodies an endpoint holds in memory at once, across all
//! connections (`max_buffered`, `mpiws serve --max-buffered`): a body read
//! whole (a binding, a spawn's inputs by value, a registration) counts from
//! its first byte until the operation drops it. One more that would pass
//! the bound is refused (503, `Retry-After`): six clients sending a 59 MiB
//! spawn body each do not add 354 MiB to the endpoint at once.

use std::ops::Deref;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;

pub struct Buffered {
    max: u64,
    used: AtomicU64,
}

/// Bytes counted against the bound until this is dropped.
pub struct Claim {
    of: Arc<Buffered>,
    n: u64,
}

impl Buffered {
    pub fn new(max: u64) -> Arc<Buffered> {
        Arc::new(Buffered { max, used: AtomicU64::new(0) })
    }

    /// Bytes held now, and the bound.
    pub fn used(&self) -> (u64, u64) {
        (self.used.load(Ordering::SeqCst), self.max)
    }

    /// An empty claim, to grow as a body arrives.
    pub fn start(self: &Arc<Self>) -> Claim {
        Claim { of: self.clone(), n: 0 }
    }
}

impl Claim {
    /// Count `n` more bytes, if they fit; else the bound.
    pub fn grow(&mut self, n: u64) -> Result<(), u64> {
        let max = self.of.max;
        self.of.used.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |used| used.checked_add(n).filter(|&t| t <= max)).map_err(|_| max)?;
        self.n += n;
        Ok(())
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        self.of.used.fetch_sub(self.n, Ordering::SeqCst);
    }
}

/// A body read whole, counted until dropped.
pub struct Body {
    pub bytes: Bytes,
    _claim: Claim,
}

impl Body {
    pub fn new(bytes: Bytes, claim: Claim) -> Body {
        Body { bytes, _claim: claim }
    }
}

impl Deref for Body {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claims_share_one_bound_and_give_back_when_dropped() {
        let b = Buffered::new(100);
        let mut one = b.start();
        let mut two = b.start();
        one.grow(60).unwrap();
        assert_eq!(two.grow(41), Err(100));
        two.grow(40).unwrap();
        assert_eq!(b.used(), (100, 100));
        drop(one);
        assert_eq!(b.used(), (40, 100));
        two.grow(60).unwrap();
        drop(two);
        assert_eq!(b.used(), (0, 100));
        assert!(b.start().grow(u64::MAX).is_err(), "no overflow");
    }
}
