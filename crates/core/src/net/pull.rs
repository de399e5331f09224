//! Large payloads between ranks on one host, copied once: the sender names
//! where the payload lies in its memory (`frame::by_reference`) instead of
//! writing it through the same-host stream's ring, and the receiver copies
//! it from there straight where it goes (`process_vm_readv`), then
//! acknowledges. Through the ring a payload is copied twice (into the ring,
//! out of it); MPICH moves large messages between ranks on one host the
//! same way (its CMA path).
//!
//! The rules:
//! - Only on a same-host stream whose receiver, when it was made, read a
//!   known word of the sender's memory (`probe`): the kernel allows it
//!   between processes of one user that may trace each other (Yama's
//!   `ptrace_scope`, containers' seccomp may forbid it; then the ring is
//!   used, nothing else changes). The sender's process is the one the
//!   kernel names for the stream's Unix socket (`SO_PEERCRED`), never one
//!   a frame names.
//! - Only for a payload of at least `PULL_FROM` bytes (`RMA_PULL_FROM` for
//!   one-sided traffic: a get's reply is read by the origin straight into
//!   its memory) whose sender waits for the acknowledgement before it completes
//!   the send (synchronous, or not eager: `frame::acknowledged_first`): its
//!   memory stays as it is until the receiver has copied it. The receiver
//!   acknowledges only after.
//! - The receiver copies at most the frame's length, which its lengths
//!   checks (`frame::read_frame`) bound like any payload; a run it cannot
//!   read (the sender ended, or named memory it does not have) cuts the
//!   stream off, as a read error would.
//! - `MPIWS_LOCAL_PULL=0` turns it off (`config::local_pull`; both sides then use the ring).

use std::io;

use bytes::Bytes;

use crate::wire::{frame, reserved};

/// Payloads from this size go by reference. Below it two copies through a
/// ring, pipelined on two cores, were as fast or faster (measured 1-3 MiB:
/// the kernel's copy pins and maps each 4 KiB page; numpy puts arrays from
/// 4 MiB on huge pages, where it copies at memory speed).
pub const PULL_FROM: usize = 4 << 20;

/// One-sided frames (a get's reply, a put's data) go by reference from
/// this size (when acknowledged first: from `net::link::EAGER_BELOW`).
/// Through the ring they crossed as large frames written by a background
/// thread, a third thread for two ranks on two cores: docs/performance.md.
pub const RMA_PULL_FROM: usize = 512 * 1024;

/// How fast a copy goes, roughly (bytes per microsecond): what a reader
/// waiting for a payload's receive to be posted may spend (`worth_waiting`).
const COPY_BYTES_PER_US: usize = 8 * 1024;

/// How long a reader that found no receive for a payload by reference may
/// wait for one before it copies the payload aside (then the receive copies
/// it again): as long as that second copy would take, so an unposted
/// receive costs at most twice, and a receive posted a moment later (a
/// program between its send and its receive) saves the copy.
pub fn worth_waiting(len: usize) -> std::time::Duration {
    std::time::Duration::from_micros((len / COPY_BYTES_PER_US) as u64)
}

/// Runs of the sender's memory per `process_vm_readv` (the kernel's `IOV_MAX`).
const RUNS_PER_CALL: usize = 1024;

/// The word a receiver reads from the sender's memory to learn whether it may.
static PROBE: u64 = u64::from_le_bytes(*b"mpiwspul");

/// The address of this process's probe word, sent to a receiver.
pub fn probe_address() -> u64 {
    std::ptr::addr_of!(PROBE) as u64
}

/// Whether this process may copy from process `pid`'s memory: it reads the
/// probe word at `address` there.
pub fn probe(pid: libc::pid_t, address: u64) -> bool {
    let mut word = [0u8; 8];
    // SAFETY: `word` is valid for its 8 bytes during the call.
    let ok = unsafe { copy_from(pid, &[(address, 8)], word.as_mut_ptr(), 8) }.is_ok();
    ok && u64::from_le_bytes(word) == PROBE
}

/// A message frame (`[header and tables, payload chunks...]`, as
/// `net::link` builds it) made to go by reference, if it should.
pub fn by_reference(frame: &[Bytes]) -> Option<Vec<u8>> {
    let (header, payload) = frame.split_first()?;
    if !goes_by_reference(frame) {
        return None;
    }
    let refs: Vec<(u64, u64)> = payload.iter().filter(|c| !c.is_empty()).map(|c| (c.as_ptr() as u64, c.len() as u64)).collect();
    frame::by_reference(header, &refs)
}

/// Whether a message frame should go by reference (on a stream that takes
/// payloads so): large enough, and acknowledged before its sender completes it.
pub fn goes_by_reference(frame: &[Bytes]) -> bool {
    let Some((header, payload)) = frame.split_first() else { return false };
    let total: usize = payload.iter().map(Bytes::len).sum();
    let rma = frame::tag_and_context(header).is_some_and(|(tag, context)| reserved::is_rma_key(tag, context));
    total >= if rma { RMA_PULL_FROM } else { PULL_FROM } && frame::acknowledged_first(header)
}

/// The runs of `refs` that hold bytes `skip..skip + len` of their
/// concatenation (fewer bytes where the runs end first).
pub fn runs_within(refs: &[(u64, u64)], skip: u64, len: u64) -> Vec<(u64, u64)> {
    let (mut skip, mut len) = (skip, len);
    let mut out = Vec::new();
    for &(at, n) in refs {
        if len == 0 {
            break;
        }
        if skip >= n {
            skip -= n;
            continue;
        }
        let take = (n - skip).min(len);
        out.push((at.wrapping_add(skip), take));
        (skip, len) = (0, len - take);
    }
    out
}

/// Copy the runs `refs` of process `pid`'s memory, `len` bytes in all, to `dst`.
///
/// # Safety
/// `dst` must be valid for writing `len` bytes, and `len` must be the sum of the runs' lengths.
pub unsafe fn copy_from(pid: libc::pid_t, refs: &[(u64, u64)], dst: *mut u8, len: usize) -> io::Result<()> {
    let (mut run, mut within, mut done) = (0usize, 0u64, 0usize);
    while done < len {
        let remote: Vec<libc::iovec> = refs[run..]
            .iter()
            .take(RUNS_PER_CALL)
            .enumerate()
            .map(|(i, &(at, n))| {
                let skip = if i == 0 { within } else { 0 };
                libc::iovec { iov_base: at.wrapping_add(skip) as *mut libc::c_void, iov_len: (n - skip) as usize }
            })
            .collect();
        let local = libc::iovec { iov_base: dst.add(done).cast(), iov_len: len - done };
        // SAFETY: `local` is within `dst` (the caller's promise); the
        // kernel checks `remote` against the other process's mappings.
        let n = libc::process_vm_readv(pid, &local, 1, remote.as_ptr(), remote.len() as libc::c_ulong, 0);
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        if n == 0 {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the sender's memory ended before its payload did"));
        }
        // Step through the runs the call covered (it may stop early).
        let mut left = n as u64;
        done += n as usize;
        while left > 0 {
            let rest = refs[run].1 - within;
            if left < rest {
                within += left;
                left = 0;
            } else {
                left -= rest;
                (run, within) = (run + 1, 0);
            }
        }
        while run < refs.len() && refs[run].1 == within {
            (run, within) = (run + 1, 0); // empty runs
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn me() -> libc::pid_t {
        // SAFETY: getpid cannot fail.
        unsafe { libc::getpid() }
    }

    #[test]
    fn a_process_reads_its_own_probe_and_runs_in_order() {
        assert!(probe(me(), probe_address()));
        let word = 7u64;
        assert!(!probe(me(), std::ptr::addr_of!(word) as u64), "another word is not the probe");
        let (a, b) = (vec![1u8; 5000], (0..=255u8).cycle().take(3000).collect::<Vec<u8>>());
        let refs = [(a.as_ptr() as u64, 5000), (b.as_ptr() as u64 + 1000, 0), (b.as_ptr() as u64, 3000)];
        let mut dst = vec![0u8; 8000];
        // SAFETY: dst holds 8000 bytes, the runs' sum.
        unsafe { copy_from(me(), &refs, dst.as_mut_ptr(), 8000) }.unwrap();
        assert_eq!(&dst[..5000], &a[..]);
        assert_eq!(&dst[5000..], &b[..]);
    }

    #[test]
    fn memory_the_sender_does_not_have_is_an_error_not_a_crash() {
        let mut dst = [0u8; 16];
        // SAFETY: dst holds 16 bytes.
        let r = unsafe { copy_from(me(), &[(8, 16)], dst.as_mut_ptr(), 16) };
        assert!(r.is_err());
    }

    #[test]
    fn runs_within_a_range_of_the_runs() {
        let refs = [(100, 10), (500, 0), (1000, 20)];
        assert_eq!(runs_within(&refs, 0, 30), vec![(100, 10), (1000, 20)]);
        assert_eq!(runs_within(&refs, 4, 8), vec![(104, 6), (1000, 2)]);
        assert_eq!(runs_within(&refs, 10, 5), vec![(1000, 5)]);
        assert_eq!(runs_within(&refs, 25, 100), vec![(1015, 5)], "as far as the runs go");
        assert!(runs_within(&refs, 30, 1).is_empty());
    }

    /// A window's reply goes by reference from a smaller size than a
    /// message: its alternative is a background writer's frame.
    #[test]
    fn a_large_one_sided_reply_goes_by_reference_from_its_own_size() {
        let rma = frame::Envelope {
            source: 0,
            context: 1 | crate::wire::reserved::COLLECTIVE_BIT,
            tag: reserved::RMA_TAG,
            seq: Some(1),
            sync: false,
            parts: vec![],
            forward: vec![],
        };
        let header = Bytes::from(frame::encode_message(&rma, RMA_PULL_FROM as u64, true));
        assert!(goes_by_reference(&[header.clone(), Bytes::from(vec![0u8; RMA_PULL_FROM])]));
        assert!(!goes_by_reference(&[header, Bytes::from(vec![0u8; RMA_PULL_FROM - 1])]));
    }

    #[test]
    fn only_a_large_acknowledged_payload_goes_by_reference() {
        let env = frame::Envelope { source: 0, context: 1, tag: 0, seq: Some(1), sync: false, parts: vec![], forward: vec![] };
        let big = Bytes::from(vec![0u8; PULL_FROM]);
        let acked = Bytes::from(frame::encode_message(&env, PULL_FROM as u64, true));
        let eager = Bytes::from(frame::encode_message(&env, PULL_FROM as u64, false));
        assert!(by_reference(&[acked.clone(), big.clone()]).is_some());
        assert!(by_reference(&[eager, big.clone()]).is_none(), "an eager send completes before the copy");
        let small = Bytes::from(vec![0u8; PULL_FROM - 1]);
        assert!(by_reference(&[acked, small]).is_none());
    }
}
