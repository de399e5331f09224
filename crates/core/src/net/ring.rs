//! A one-way byte ring in memory two processes share: the same-host
//! channel's data path (`net::local` puts two of them and a wake-up socket
//! behind the `Socket` interface). Pure memory: no system calls here.
//!
//! The rules:
//! - One writer and one reader. `head` counts the bytes ever written, `tail`
//!   the bytes ever read; each is stored only by its owner, with Release,
//!   after the bytes it publishes (or frees) were copied.
//! - `head - tail` is what is there to read, `capacity - (head - tail)` the
//!   room to write. The other side is not trusted (a peer rank that
//!   misbehaves, or a bug): a difference above the capacity is a corrupt
//!   ring, an error, never a read out of bounds; positions are taken modulo
//!   the capacity, a power of two, so no index leaves the data area.
//! - Sleeping: a side that finds nothing to do raises its `waiting` flag,
//!   then looks once more; the other side, after each step, looks at the
//!   flag and, if it was up, takes it down and wakes the sleeper
//!   (`net::local` says how). A SeqCst fence sits between each side's store
//!   and its following load, so one of them sees the other's: either the
//!   sleeper's last look finds the bytes, or the other side finds the flag.
//! - A reader that read while it waited (a rank in a receive) and now lets
//!   go raises its flag as "let go", with the time (a clock both processes
//!   share): it is likely back within microseconds, for its next call. A
//!   writer that finds it so may first give it that moment to come back
//!   (its flag then goes down as it reads) before waking its stand-in; the
//!   flag still ends up taken by one side, as above.
//! - `closed`: the writer will write no more; the reader reads what is
//!   left, then sees the end.

use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};

/// The header in front of each ring's data: counters on cache lines of
/// their own (the two sides write different ones).
pub const HEADER: usize = 512;
const HEAD: usize = 0;
const TAIL: usize = 64;
const READER_WAITING: usize = 128;
const WRITER_WAITING: usize = 192;
const CLOSED: usize = 256;
const LET_GO_AT: usize = 320;

/// The reader's flag: reading (0), asleep, or let go by a waiter.
const ASLEEP: u32 = 1;
const LET_GO: u32 = 2;

/// Smallest and largest data area of a ring.
pub const MIN_CAPACITY: usize = 4096;
pub const MAX_CAPACITY: usize = 64 << 20;

/// The other side broke the ring's rules: the stream is unusable.
#[derive(Debug, PartialEq, Eq)]
pub struct Corrupt;

/// A view of one ring: `HEADER` bytes of counters, then `capacity` bytes of
/// data. The memory belongs to whoever made the view (`net::local` keeps
/// the mapping alive as long as any view of it).
#[derive(Clone, Copy)]
pub struct Ring {
    base: *mut u8,
    capacity: usize,
}

// SAFETY: a Ring is a pointer into a shared mapping whose fields are only
// touched through atomics (counters) or in ranges the counters hand to one
// side at a time (data).
unsafe impl Send for Ring {}
unsafe impl Sync for Ring {}

impl Ring {
    /// The ring at `base`: `HEADER + capacity` bytes, 64-byte aligned,
    /// valid for as long as the view is used; `capacity` a power of two
    /// within `MIN_CAPACITY..=MAX_CAPACITY`. Zeroed memory is an empty ring.
    ///
    /// # Safety
    /// `base` must point at `HEADER + capacity` writable bytes, aligned to
    /// 64, that outlive every use of the view.
    pub unsafe fn at(base: *mut u8, capacity: usize) -> Ring {
        debug_assert!(capacity.is_power_of_two() && (MIN_CAPACITY..=MAX_CAPACITY).contains(&capacity));
        debug_assert_eq!(base as usize % 64, 0);
        Ring { base, capacity }
    }

    fn u64_at(&self, offset: usize) -> &AtomicU64 {
        // SAFETY: offset is within the header, 8-aligned (base is 64-aligned).
        unsafe { &*(self.base.add(offset) as *const AtomicU64) }
    }

    fn u32_at(&self, offset: usize) -> &AtomicU32 {
        // SAFETY: as `u64_at`.
        unsafe { &*(self.base.add(offset) as *const AtomicU32) }
    }

    fn data(&self) -> *mut u8 {
        // SAFETY: the data area follows the header.
        unsafe { self.base.add(HEADER) }
    }

    /// Bytes there to read.
    pub fn available(&self) -> Result<usize, Corrupt> {
        let used = self.u64_at(HEAD).load(Ordering::Acquire).wrapping_sub(self.u64_at(TAIL).load(Ordering::Acquire));
        usize::try_from(used).ok().filter(|&u| u <= self.capacity).ok_or(Corrupt)
    }

    /// Room to write.
    pub fn room(&self) -> Result<usize, Corrupt> {
        Ok(self.capacity - self.available()?)
    }

    /// Write as much of `src` as there is room for; the count written.
    pub fn write(&self, src: &[u8]) -> Result<usize, Corrupt> {
        let n = src.len().min(self.room()?);
        if n == 0 {
            return Ok(0);
        }
        let head = self.u64_at(HEAD).load(Ordering::Relaxed);
        let at = (head as usize) & (self.capacity - 1);
        let first = n.min(self.capacity - at);
        // SAFETY: [at, at+first) and [0, n-first) are within the data area,
        // and free: the reader does not touch them until `head` moves.
        unsafe {
            std::ptr::copy_nonoverlapping(src.as_ptr(), self.data().add(at), first);
            std::ptr::copy_nonoverlapping(src.as_ptr().add(first), self.data(), n - first);
        }
        self.u64_at(HEAD).store(head.wrapping_add(n as u64), Ordering::Release);
        Ok(n)
    }

    /// Read up to `dst.len()` bytes; the count read (0: nothing there).
    pub fn read(&self, dst: &mut [u8]) -> Result<usize, Corrupt> {
        let n = dst.len().min(self.available()?);
        if n == 0 {
            return Ok(0);
        }
        let tail = self.u64_at(TAIL).load(Ordering::Relaxed);
        let at = (tail as usize) & (self.capacity - 1);
        let first = n.min(self.capacity - at);
        // SAFETY: the bytes are within the data area and published (Acquire
        // on `head` in `available`); the writer does not reuse them until `tail` moves.
        unsafe {
            std::ptr::copy_nonoverlapping(self.data().add(at), dst.as_mut_ptr(), first);
            std::ptr::copy_nonoverlapping(self.data(), dst.as_mut_ptr().add(first), n - first);
        }
        self.u64_at(TAIL).store(tail.wrapping_add(n as u64), Ordering::Release);
        Ok(n)
    }

    /// Raise a sleeper's flag; the fence orders it before the caller's
    /// next look at the other side's counter.
    fn raise(&self, flag: usize, how: u32) {
        self.u32_at(flag).store(how, Ordering::SeqCst);
        fence(Ordering::SeqCst);
    }

    /// After a step: whether the sleeper of `flag` was asleep (then it must
    /// be woken; its flag is down again). The fence orders the step's
    /// counter (a Release store) before this look: without it the two may
    /// pass each other (x86 reorders a store with a later load), the
    /// sleeper's last look misses the step, this misses its flag, and
    /// nobody wakes it.
    fn take(&self, flag: usize) -> bool {
        fence(Ordering::SeqCst);
        let f = self.u32_at(flag);
        f.load(Ordering::SeqCst) != 0 && f.swap(0, Ordering::SeqCst) != 0
    }

    /// The reader is about to sleep: raise its flag. The caller then looks
    /// at `available` once more before sleeping.
    pub fn reader_sleeps(&self) {
        self.raise(READER_WAITING, ASLEEP);
    }

    /// A reader that read while it waited lets go at `now` (nanoseconds of
    /// a clock both sides share): as `reader_sleeps`, marked likely back soon.
    pub fn reader_lets_go(&self, now: u64) {
        self.u64_at(LET_GO_AT).store(now, Ordering::Relaxed);
        self.raise(READER_WAITING, LET_GO);
    }

    /// When the reader let go, if it did and has neither read nor slept since.
    pub fn reader_let_go_at(&self) -> Option<u64> {
        (self.u32_at(READER_WAITING).load(Ordering::SeqCst) == LET_GO).then(|| self.u64_at(LET_GO_AT).load(Ordering::Relaxed))
    }

    /// The reader is reading again: a writer need not wake it.
    pub fn reader_wakes(&self) {
        let flag = self.u32_at(READER_WAITING);
        if flag.load(Ordering::Relaxed) != 0 {
            flag.store(0, Ordering::Relaxed);
        }
    }

    /// After a write: whether the reader was asleep (it must be woken).
    pub fn reader_to_wake(&self) -> bool {
        self.take(READER_WAITING)
    }

    /// The writer is about to sleep for room: raise its flag (then look again).
    pub fn writer_sleeps(&self) {
        self.raise(WRITER_WAITING, ASLEEP);
    }

    /// After a read: whether the writer was asleep (it must be woken).
    pub fn writer_to_wake(&self) -> bool {
        self.take(WRITER_WAITING)
    }

    /// The word a sleeping writer waits on (a futex): 1 while it sleeps.
    pub fn writer_flag(&self) -> &AtomicU32 {
        self.u32_at(WRITER_WAITING)
    }

    /// The writer is done: nothing more will come.
    pub fn close(&self) {
        self.u32_at(CLOSED).store(1, Ordering::SeqCst);
    }

    pub fn is_closed(&self) -> bool {
        self.u32_at(CLOSED).load(Ordering::Acquire) != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Zeroed, 64-aligned memory for a ring of `capacity`.
    fn memory(capacity: usize) -> Vec<u64> {
        vec![0u64; (HEADER + capacity) / 8 + 8]
    }

    fn ring(mem: &mut [u64], capacity: usize) -> Ring {
        let base = mem.as_mut_ptr() as *mut u8;
        let aligned = unsafe { base.add(base.align_offset(64)) };
        unsafe { Ring::at(aligned, capacity) }
    }

    #[test]
    fn bytes_come_out_in_order_across_the_wrap() {
        let mut mem = memory(MIN_CAPACITY);
        let r = ring(&mut mem, MIN_CAPACITY);
        let mut out = Vec::new();
        let mut buf = vec![0u8; 1000];
        let mut next = 0u32;
        for _ in 0..50 {
            let chunk: Vec<u8> = (0..3000).map(|i| ((next + i) % 251) as u8).collect();
            assert_eq!(r.write(&chunk), Ok(3000));
            next += 3000;
            assert_eq!(r.room(), Ok(MIN_CAPACITY - 3000));
            loop {
                let n = r.read(&mut buf).unwrap();
                if n == 0 {
                    break;
                }
                out.extend_from_slice(&buf[..n]);
            }
        }
        assert!(out.iter().enumerate().all(|(i, &b)| b == (i % 251) as u8));
        assert_eq!(out.len(), 150_000);
    }

    /// A reader that lets go is seen so, with its time, until it reads
    /// again (then no wake-up is due) or sleeps (then one is, as for any
    /// sleeper); a wake-up is taken once.
    #[test]
    fn a_reader_that_lets_go_is_seen_until_it_reads_or_sleeps() {
        let mut mem = memory(MIN_CAPACITY);
        let r = ring(&mut mem, MIN_CAPACITY);
        assert_eq!(r.reader_let_go_at(), None);
        r.reader_lets_go(42);
        assert_eq!(r.reader_let_go_at(), Some(42));
        r.reader_wakes(); // back, reading
        assert_eq!(r.reader_let_go_at(), None);
        assert!(!r.reader_to_wake(), "a reader that came back needs no wake-up");
        r.reader_lets_go(43);
        r.reader_sleeps();
        assert_eq!(r.reader_let_go_at(), None, "asleep now");
        assert!(r.reader_to_wake());
        r.reader_lets_go(44);
        assert!(r.reader_to_wake(), "a reader let go is woken like a sleeper once the writer stops waiting");
        assert!(!r.reader_to_wake(), "taken once");
    }

    #[test]
    fn a_full_ring_takes_only_what_fits() {
        let mut mem = memory(MIN_CAPACITY);
        let r = ring(&mut mem, MIN_CAPACITY);
        assert_eq!(r.write(&vec![1u8; 5000]), Ok(MIN_CAPACITY));
        assert_eq!(r.write(&[1]), Ok(0));
        let mut buf = [0u8; 10];
        assert_eq!(r.read(&mut buf), Ok(10));
        assert_eq!(r.write(&[2u8; 20]), Ok(10));
    }

    #[test]
    fn counters_a_peer_corrupted_are_an_error_not_an_overrun() {
        let mut mem = memory(MIN_CAPACITY);
        let r = ring(&mut mem, MIN_CAPACITY);
        r.u64_at(HEAD).store(u64::MAX / 2, Ordering::SeqCst); // far ahead of tail
        let mut buf = [0u8; 10];
        assert_eq!(r.read(&mut buf), Err(Corrupt));
        assert_eq!(r.write(&buf), Err(Corrupt));
        // A tail ahead of head wraps to a huge difference: also corrupt.
        r.u64_at(HEAD).store(5, Ordering::SeqCst);
        r.u64_at(TAIL).store(6, Ordering::SeqCst);
        assert_eq!(r.available(), Err(Corrupt));
    }

    #[test]
    fn a_sleeper_is_woken_once_and_only_if_it_said_so() {
        let mut mem = memory(MIN_CAPACITY);
        let r = ring(&mut mem, MIN_CAPACITY);
        assert!(!r.reader_to_wake());
        r.reader_sleeps();
        assert!(r.reader_to_wake());
        assert!(!r.reader_to_wake());
        r.writer_sleeps();
        assert!(r.writer_to_wake());
        assert!(!r.writer_to_wake());
    }

    /// One writer thread, one reader thread, the ring much smaller than the
    /// data: every byte arrives once, in order.
    #[test]
    fn a_writer_and_a_reader_on_two_threads_move_every_byte_in_order() {
        let mut mem = memory(MIN_CAPACITY);
        let r = ring(&mut mem, MIN_CAPACITY);
        const TOTAL: usize = 4 << 20;
        let writer = std::thread::spawn(move || {
            let data: Vec<u8> = (0..TOTAL).map(|i| (i % 253) as u8).collect();
            let mut sent = 0;
            while sent < TOTAL {
                let end = (sent + 7000).min(TOTAL);
                sent += r.write(&data[sent..end]).unwrap();
            }
            r.close();
        });
        let mut got = 0usize;
        let mut buf = vec![0u8; 5000];
        loop {
            let n = r.read(&mut buf).unwrap();
            if n == 0 {
                if r.is_closed() && r.available() == Ok(0) {
                    break;
                }
                std::hint::spin_loop();
                continue;
            }
            assert!(buf[..n].iter().enumerate().all(|(i, &b)| b == ((got + i) % 253) as u8));
            got += n;
        }
        writer.join().unwrap();
        assert_eq!(got, TOTAL);
        drop(mem);
    }
}
