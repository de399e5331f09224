//! The bytes of a large get's reply, in buffers used again: a fresh
//! allocation of megabytes is fresh pages, which the kernel faults in and
//! zeroes at every reply (measured: 4 MiB gets 3x slower with them,
//! docs/performance.md).
//!
//! Rules:
//! - Only replies of at least `FROM` bytes take a kept buffer; smaller ones
//!   are plain copies (the allocator reuses their memory already).
//! - A buffer goes back when the last reference to its reply's bytes is
//!   dropped (the frame acknowledged, or dropped with its link). The
//!   buffers kept stay within `MPIWS_RMA_REPLY_KEEP_MIB`
//!   (`config::rma_reply_keep_bytes`): the smallest are freed first (a
//!   large one saves the most faults, and a program's sizes change).
//! - A buffer is taken for a reply it can hold without growing; the
//!   smallest such one.

use bytes::Bytes;
use parking_lot::Mutex;

use crate::config;

/// Replies from this size use kept buffers.
const FROM: usize = 256 * 1024;

static KEPT: Mutex<Vec<Vec<u8>>> = Mutex::new(Vec::new());

/// A buffer on loan to a reply's bytes.
struct Loan(Vec<u8>);

impl AsRef<[u8]> for Loan {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl Drop for Loan {
    fn drop(&mut self) {
        let buf = std::mem::take(&mut self.0);
        give_back(&mut KEPT.lock(), buf, config::rma_reply_keep_bytes());
    }
}

fn give_back(kept: &mut Vec<Vec<u8>>, buf: Vec<u8>, limit: usize) {
    if buf.capacity() > limit {
        return; // freed, and nothing kept for it
    }
    kept.push(buf);
    kept.sort_unstable_by_key(|b| std::cmp::Reverse(b.capacity()));
    let mut held: usize = kept.iter().map(Vec::capacity).sum();
    while held > limit {
        held -= kept.pop().map_or(0, |b| b.capacity());
    }
}

/// The smallest kept buffer that holds `len` bytes, emptied.
fn take(kept: &mut Vec<Vec<u8>>, len: usize) -> Option<Vec<u8>> {
    let (i, _) = kept.iter().enumerate().filter(|(_, b)| b.capacity() >= len).min_by_key(|(_, b)| b.capacity())?;
    let mut buf = kept.swap_remove(i);
    buf.clear();
    Some(buf)
}

/// A copy of `src` for a reply.
pub fn copy_of(src: &[u8]) -> Bytes {
    if src.len() < FROM {
        return Bytes::copy_from_slice(src);
    }
    let mut buf = take(&mut KEPT.lock(), src.len()).unwrap_or_else(|| Vec::with_capacity(src.len()));
    buf.extend_from_slice(src);
    Bytes::from_owner(Loan(buf))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_smallest_buffer_that_fits_is_taken_and_the_limit_holds() {
        let mut kept = Vec::new();
        give_back(&mut kept, Vec::with_capacity(1 << 20), 5 << 20);
        give_back(&mut kept, Vec::with_capacity(1 << 20), 5 << 20);
        give_back(&mut kept, Vec::with_capacity(4 << 20), 5 << 20); // over the limit: a small one goes
        assert_eq!(kept.len(), 2);
        give_back(&mut kept, Vec::with_capacity(8 << 20), 5 << 20); // larger than the limit: freed alone
        assert_eq!(kept.len(), 2);
        assert_eq!(take(&mut kept, 1000).map(|b| b.capacity()), Some(1 << 20));
        assert!(take(&mut kept, 5 << 20).is_none(), "none holds it");
        assert_eq!(take(&mut kept, 3 << 20).map(|b| b.capacity()), Some(4 << 20));
        assert!(kept.is_empty());
    }

    #[test]
    fn a_large_reply_copies_its_bytes_and_its_buffer_comes_back() {
        let src: Vec<u8> = (0..FROM as u32 + 10).map(|i| (i % 251) as u8).collect();
        let reply = copy_of(&src);
        assert_eq!(&reply[..], &src[..]);
        let at = reply.as_ptr();
        drop(reply);
        let again = copy_of(&src);
        assert_eq!(again.as_ptr(), at, "the same buffer, used again");
        assert_eq!(&again[..], &src[..]);
    }
}
