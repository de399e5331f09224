//! The same-host channel: a stream between two ranks on one machine made of
//! two shared-memory rings (`net::ring`, one each way) and a Unix socket
//! that only carries wake-ups and the end. It stands behind `Socket`, so
//! frames, acknowledgements, ordering, flow control and reconnection are the
//! stream channel's, unchanged; only the bytes no longer cross the kernel's
//! network stack. A reader sleeps on the socket, a writer sends a wake-up
//! byte only to a reader that said it sleeps; a writer waiting for room
//! sleeps on a futex in the ring. Polling first is the caller's choice
//! (`net::polled`, where a core is free): the ring is memory, polled with
//! no system call.
//!
//! Negotiated through the stream's HTTP upgrade (`net::link`,
//! `service::stream`): the sender offers `mpiws-local: <host>` (this boot,
//! network namespace and user); an endpoint on the same host that may take
//! it answers `101` with `mpiws-local: 1`. Then, on the upgraded connection
//! (authenticated as any stream: the domain's token), the sender names a
//! Unix socket it listens on (abstract, random) and a secret; the receiver
//! connects, must be the same user (`SO_PEERCRED`) and must send the
//! secret back; only then does the sender pass the rings' memory (a sealed
//! memfd, `SCM_RIGHTS`): nothing on disk, nothing another user can open.
//! The upgraded connection is closed after. Anything that fails on the way
//! fails the attempt, and the link tries again over the network.
//! `MPIWS_NOLOCAL=1` turns it off (as MPICH's `MPIR_CVAR_NOLOCAL`).

use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener, UnixStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use crate::config::{self, spin_budget};
use crate::engine::completion::poll_until;
use crate::keys::{digest_hex, random_hex};
use crate::net::descriptor::{recv_with_fd, send_with_fds};
use crate::net::pull;
use crate::net::ring::{self, Ring};

/// The upgrade header that offers (request) and accepts (answer) the channel.
pub const H_LOCAL: &str = "mpiws-local";
/// The record the sender writes on the upgraded connection: this, the
/// socket's name and the secret (hex), a newline.
const HELLO: &[u8] = b"mpiws-local/2 ";
const NAME_HEX: usize = 32;
const HELLO_LEN: usize = HELLO.len() + NAME_HEX + 1 + NAME_HEX + 1;
/// The receiver's answer once it mapped the rings: and whether it copies
/// payloads by reference from the sender (`net::pull`).
const MAPPED: u8 = 1;
const MAPPED_AND_PULLS: u8 = 2;
/// How long a writer gives a reader that just let go (`wake_reader`) to
/// come back before waking its stand-in. 8 B ping-pong, two ranks on two
/// cores: see docs/performance.md.
const LET_GO_GRACE: Duration = Duration::from_micros(30);
/// How long a sleeping writer waits on the futex before it looks whether
/// the reader is still there.
const WRITER_NAP: Duration = Duration::from_millis(20);

/// Each ring's data area (`MPIWS_LOCAL_RING_KIB`, default 1 MiB, a power
/// of two): two per pair of ranks that talk, touched as they are used.
/// 1 MiB against 256 KiB: 1.5-2x the bandwidth of large messages, one way
/// and both ways (docs/performance.md), for up to 2 MiB of shared memory
/// per pair.
fn ring_capacity() -> usize {
    static CAP: OnceLock<usize> = OnceLock::new();
    *CAP.get_or_init(|| config::local_ring_kib().saturating_mul(1024).next_power_of_two().clamp(ring::MIN_CAPACITY, ring::MAX_CAPACITY))
}

/// What two processes on one host, of one user, in one network namespace
/// share (they can then reach each other's abstract Unix sockets): this
/// boot, the namespace, the user. Not a secret.
pub fn host() -> &'static str {
    static HOST: OnceLock<String> = OnceLock::new();
    HOST.get_or_init(|| {
        let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap_or_default();
        let netns = std::fs::read_link("/proc/self/ns/net").map(|p| p.display().to_string()).unwrap_or_default();
        // SAFETY: geteuid cannot fail.
        let uid = unsafe { libc::geteuid() };
        if boot.trim().is_empty() || netns.is_empty() {
            return String::new(); // unknown: never the same host
        }
        // Hashed: a peer elsewhere learns nothing of this host from the offer.
        digest_hex(format!("{}|{netns}|{uid}", boot.trim()).as_bytes())
    })
}

/// Whether an upgrade's offer (`mpiws-local` value) comes from this host.
pub fn same_host(offer: &str) -> bool {
    config::local_channel() && !host().is_empty() && offer.trim() == host()
}

/// The two rings' shared memory, mapped; unmapped when the last view goes.
struct Mapping {
    base: *mut u8,
    len: usize,
    capacity: usize,
}

// SAFETY: the mapping is only reached through `Ring`s, whose rules make
// concurrent use from two threads (one writer, one reader) sound.
unsafe impl Send for Mapping {}
unsafe impl Sync for Mapping {}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: base/len are the mapping made in `map`, unmapped once.
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}

impl Mapping {
    fn ring(&self, i: usize) -> Ring {
        // SAFETY: ring i lies within the mapping (page-aligned base, HEADER a multiple of 64).
        unsafe { Ring::at(self.base.add(i * (ring::HEADER + self.capacity)), self.capacity) }
    }
}

/// Nanoseconds of the clock every process on this host shares.
fn monotonic_ns() -> u64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid timespec for the call; CLOCK_MONOTONIC cannot fail.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    (t.tv_sec as u64).saturating_mul(1_000_000_000).saturating_add(t.tv_nsec as u64)
}

fn os<T>(r: libc::c_int, v: T) -> io::Result<T> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(v)
    }
}

/// Make the rings' memory: a memfd sealed at its size (the peer can
/// neither shrink it under us nor grow it).
fn make_memory(capacity: usize) -> io::Result<(OwnedFd, Arc<Mapping>)> {
    let len = 2 * (ring::HEADER + capacity);
    // SAFETY: a constant NUL-terminated name.
    let raw = unsafe { libc::memfd_create(c"mpiws-local".as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING) };
    let raw = os(raw, raw)?;
    // SAFETY: memfd_create returned a new descriptor, owned from here on.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    // SAFETY: plain calls on our own descriptor.
    unsafe {
        os(libc::ftruncate(raw, len as libc::off_t), ())?;
        os(libc::fcntl(raw, libc::F_ADD_SEALS, libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL), ())?;
    }
    let map = map(&fd)?;
    Ok((fd, map))
}

/// Map memory a peer passed: its size must be two rings' of a valid
/// capacity, and sealed against shrinking (else a peer could truncate it
/// and crash us with SIGBUS).
fn map(fd: &OwnedFd) -> io::Result<Arc<Mapping>> {
    let raw = fd.as_raw_fd();
    // SAFETY: fstat fills a plain struct; F_GET_SEALS reads flags.
    let (size, seals) = unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        os(libc::fstat(raw, &mut st), ())?;
        (st.st_size, libc::fcntl(raw, libc::F_GET_SEALS))
    };
    let bad = |why: &str| io::Error::new(io::ErrorKind::InvalidData, format!("same-host channel: {why}"));
    if seals < 0 || seals & libc::F_SEAL_SHRINK == 0 {
        return Err(bad("the shared memory is not sealed"));
    }
    let len = usize::try_from(size).map_err(|_| bad("bad size"))?;
    let capacity = (len / 2).checked_sub(ring::HEADER).ok_or_else(|| bad("too small"))?;
    if len % 2 != 0 || !capacity.is_power_of_two() || !(ring::MIN_CAPACITY..=ring::MAX_CAPACITY).contains(&capacity) {
        return Err(bad("the rings' size is not one this side accepts"));
    }
    // SAFETY: a fresh shared mapping of the whole file; checked below.
    let base = unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, raw, 0) };
    if base == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    Ok(Arc::new(Mapping { base: base.cast(), len, capacity }))
}

/// Non-private futex calls: the word is in memory two processes share.
fn futex_wait(word: &std::sync::atomic::AtomicU32, expected: u32, timeout: Duration) {
    let ts = libc::timespec { tv_sec: timeout.as_secs() as libc::time_t, tv_nsec: timeout.subsec_nanos() as libc::c_long };
    // SAFETY: a valid aligned word and timespec for the duration of the call.
    unsafe { libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAIT, expected, &ts as *const libc::timespec, 0usize, 0u32) };
}

fn futex_wake(word: &std::sync::atomic::AtomicU32) {
    // SAFETY: as above; wakes all waiters on the word.
    unsafe { libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE, i32::MAX, 0usize, 0usize, 0u32) };
}

/// Poll one descriptor; its revents (0 on timeout).
fn poll_fd(fd: RawFd, events: libc::c_short, timeout: Option<Duration>) -> i16 {
    let mut p = libc::pollfd { fd, events, revents: 0 };
    let ms = timeout.map_or(-1, |t| t.as_millis().min(i32::MAX as u128) as libc::c_int);
    // SAFETY: one valid pollfd for the duration of the call.
    let n = unsafe { libc::poll(&mut p, 1, ms) };
    if n > 0 {
        p.revents
    } else {
        0
    }
}

/// One end of a same-host stream: it writes `tx`, reads `rx`, and wakes
/// and is woken through `wake`.
pub struct LocalSocket {
    wake: UnixStream,
    memory: Arc<Mapping>,
    tx: Ring,
    rx: Ring,
    /// The peer closed its end of `wake` (shared by this end's clones).
    peer_gone: Arc<AtomicBool>,
    /// How payloads by reference go (`net::pull`): the sender's end knows
    /// whether its receiver takes them, the receiver's end whom it copies from.
    pulls: Pulls,
}

/// Which payloads by reference a same-host stream carries (`net::pull`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pulls {
    None,
    /// This end sends them: its receiver copies from this process.
    Sends,
    /// This end receives them, copying from process `pid` (the kernel's
    /// word for who made the stream, `SO_PEERCRED`).
    From(libc::pid_t),
}

impl LocalSocket {
    fn new(wake: UnixStream, memory: Arc<Mapping>, first: bool, pulls: Pulls) -> LocalSocket {
        // The sender (who made the memory) writes ring 0 and reads ring 1.
        let (tx, rx) = if first { (memory.ring(0), memory.ring(1)) } else { (memory.ring(1), memory.ring(0)) };
        LocalSocket { wake, memory, tx, rx, peer_gone: Arc::default(), pulls }
    }

    /// Which payloads by reference this stream carries.
    pub fn pulls(&self) -> Pulls {
        self.pulls
    }

    pub fn try_clone(&self) -> io::Result<LocalSocket> {
        Ok(LocalSocket {
            wake: self.wake.try_clone()?,
            memory: self.memory.clone(),
            tx: self.tx,
            rx: self.rx,
            peer_gone: self.peer_gone.clone(),
            pulls: self.pulls,
        })
    }

    pub fn shutdown(&self, how: std::net::Shutdown) -> io::Result<()> {
        if how != std::net::Shutdown::Read {
            self.tx.close();
        }
        self.wake.shutdown(how)
    }

    fn corrupt(_: ring::Corrupt) -> io::Error {
        io::Error::new(io::ErrorKind::InvalidData, "same-host channel: the peer broke the ring's rules")
    }

    /// Whether something can be read now without waiting (memory only).
    pub fn has_data(&self) -> bool {
        self.rx.available().map_or(true, |n| n > 0) || self.rx.is_closed() || self.peer_gone.load(Ordering::Acquire)
    }

    /// A reader polls the ring from now on: the writer need not wake it.
    pub fn reading(&self) {
        self.rx.reader_wakes();
    }

    /// The reader stops polling: ask for wake-ups (marked as let go just
    /// now, `wake_reader`); whether data came already.
    pub fn released(&self) -> bool {
        self.rx.reader_lets_go(monotonic_ns());
        self.has_data()
    }

    /// The bytes a ring holds.
    pub fn capacity(&self) -> usize {
        self.memory.capacity
    }

    /// Whether a write would not wait (memory only).
    pub fn has_room(&self) -> bool {
        self.tx.room().map_or(true, |r| r > 0)
    }

    /// Take the wake-up bytes the peer sent; notes the peer's end.
    fn drain_wakeups(&self) {
        let mut buf = [0u8; 64];
        loop {
            // SAFETY: buf is valid for its length during the call.
            let n = unsafe { libc::recv(self.wake.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), libc::MSG_DONTWAIT) };
            match n {
                0 => {
                    self.peer_gone.store(true, Ordering::Release);
                    return;
                }
                n if n < 0 => return, // WouldBlock (or an error the next call sees)
                _ => {}
            }
        }
    }

    /// For a reader about to sleep on `wake` (a poll, or the progress
    /// thread's poller): whether there is something to read after all;
    /// if not, the writer will send a wake-up with its next bytes.
    pub fn ready(&self) -> bool {
        if self.has_data() {
            return true;
        }
        self.drain_wakeups();
        self.rx.reader_sleeps();
        self.has_data()
    }

    fn wake_reader(&self) -> io::Result<()> {
        // A reader that let go within `LET_GO_GRACE` is a rank between two
        // calls: it is given that moment to come back and read, where a
        // wake-up would wake its progress thread (a third thread for two
        // ranks on two cores). Only where polling is allowed at all.
        if let Some(at) = self.tx.reader_let_go_at() {
            let since = Duration::from_nanos(monotonic_ns().saturating_sub(at));
            let grace = LET_GO_GRACE.min(spin_budget()).saturating_sub(since);
            if !grace.is_zero() {
                poll_until(grace, || self.tx.reader_let_go_at().is_none());
            }
        }
        if self.tx.reader_to_wake() {
            // SAFETY: one byte from a valid buffer.
            let n = unsafe { libc::send(self.wake.as_raw_fd(), [1u8].as_ptr().cast(), 1, libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL) };
            if n < 0 {
                let e = io::Error::last_os_error();
                // A full socket holds wake-ups enough already.
                if e.kind() != io::ErrorKind::WouldBlock {
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    /// Whether the peer is gone (its end of `wake` closed).
    fn peer_closed(&self) -> bool {
        if self.peer_gone.load(Ordering::Acquire) {
            return true;
        }
        let r = poll_fd(self.wake.as_raw_fd(), libc::POLLRDHUP, Some(Duration::ZERO));
        r & (libc::POLLHUP | libc::POLLRDHUP | libc::POLLERR) != 0
    }
}

impl LocalSocket {
    /// Always blocking (poll readiness with `ready`).
    pub fn set_nonblocking(&self, on: bool) -> io::Result<()> {
        if on {
            return Err(io::Error::new(io::ErrorKind::Unsupported, "a same-host stream is read blocking"));
        }
        Ok(())
    }

    /// No read time limit (a same-host stream is made after its upgrade).
    pub fn set_read_timeout(&self, limit: Option<Duration>) -> io::Result<()> {
        if limit.is_some() {
            return Err(io::Error::new(io::ErrorKind::Unsupported, "a same-host stream has no read time limit"));
        }
        Ok(())
    }
}

impl AsRawFd for LocalSocket {
    /// What a poller waits on: readable when a wake-up or the end came.
    fn as_raw_fd(&self) -> RawFd {
        self.wake.as_raw_fd()
    }
}

impl Read for LocalSocket {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        loop {
            let n = self.rx.read(buf).map_err(Self::corrupt)?;
            if n > 0 {
                self.rx.reader_wakes();
                if self.rx.writer_to_wake() {
                    futex_wake(self.rx.writer_flag());
                }
                return Ok(n);
            }
            if self.rx.is_closed() || self.peer_gone.load(Ordering::Acquire) {
                // The end, once what came before it is read.
                return self.rx.read(buf).map_err(Self::corrupt);
            }
            if self.ready() {
                continue;
            }
            poll_fd(self.wake.as_raw_fd(), libc::POLLIN, None);
            self.drain_wakeups();
        }
    }
}

impl Write for LocalSocket {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        loop {
            if self.peer_gone.load(Ordering::Acquire) {
                return Err(io::ErrorKind::BrokenPipe.into());
            }
            let n = self.tx.write(buf).map_err(Self::corrupt)?;
            if n > 0 {
                self.wake_reader()?;
                return Ok(n);
            }
            self.tx.writer_sleeps();
            if self.has_room() {
                continue;
            }
            futex_wait(self.tx.writer_flag(), 1, WRITER_NAP);
            if !self.has_room() && self.peer_closed() {
                return Err(io::ErrorKind::BrokenPipe.into());
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The process and user at the other end of a Unix socket.
fn peer(s: &UnixStream) -> io::Result<libc::ucred> {
    let mut cred = libc::ucred { pid: 0, uid: 0, gid: 0 };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: cred and len are valid for the call; the kernel fills cred.
    let r =
        unsafe { libc::getsockopt(s.as_raw_fd(), libc::SOL_SOCKET, libc::SO_PEERCRED, (&mut cred as *mut libc::ucred).cast(), &mut len) };
    os(r, cred)
}

/// The peer's process, once it is known to be this user's.
fn same_user(s: &UnixStream) -> io::Result<libc::pid_t> {
    let cred = peer(s)?;
    // SAFETY: geteuid cannot fail.
    if cred.uid != unsafe { libc::geteuid() } {
        return Err(io::Error::new(io::ErrorKind::PermissionDenied, "same-host channel: the peer is another user"));
    }
    Ok(cred.pid)
}

fn equal_in_constant_time(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The sender's half, on a connection whose upgrade the peer answered with
/// `mpiws-local: 1`: name a socket and a secret on `upgraded`, take the
/// receiver's connection there, pass it the rings. The local stream, or an
/// error (the caller then opens a network stream).
pub fn offer(upgraded: &mut impl Write, limit: Duration) -> io::Result<LocalSocket> {
    let (name, secret) = (random_hex(), random_hex());
    let listener = UnixListener::bind_addr(&SocketAddr::from_abstract_name(format!("mpiws-local-{name}"))?)?;
    listener.set_nonblocking(true)?;
    upgraded.write_all(format!("{}{name} {secret}\n", std::str::from_utf8(HELLO).expect("ascii")).as_bytes())?;
    let deadline = Instant::now() + limit;
    let mut wake = loop {
        match listener.accept() {
            Ok((s, _)) => break s,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(io::Error::new(io::ErrorKind::TimedOut, "same-host channel: the receiver did not connect"));
                }
                poll_fd(listener.as_raw_fd(), libc::POLLIN, Some(left));
            }
            Err(e) => return Err(e),
        }
    };
    drop(listener);
    wake.set_nonblocking(false)?;
    same_user(&wake)?;
    wake.set_read_timeout(Some(deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1))))?;
    let mut told = [0u8; NAME_HEX];
    wake.read_exact(&mut told)?;
    if !equal_in_constant_time(&told, secret.as_bytes()) {
        return Err(io::Error::new(io::ErrorKind::PermissionDenied, "same-host channel: wrong secret"));
    }
    let (fd, memory) = make_memory(ring_capacity())?;
    // With the memory, where the receiver may read the probe word (`net::pull`).
    let mut record = vec![1u8];
    record.extend_from_slice(&(if config::local_pull() { pull::probe_address() } else { 0 }).to_le_bytes());
    send_with_fds(&wake, &record, &[fd.as_raw_fd()])?;
    let mut ok = [0u8; 1];
    wake.read_exact(&mut ok)?;
    wake.set_read_timeout(None)?;
    let pulls = match ok[0] {
        MAPPED => Pulls::None,
        MAPPED_AND_PULLS => Pulls::Sends,
        _ => return Err(io::Error::other("same-host channel: the receiver could not map the rings")),
    };
    Ok(LocalSocket::new(wake, memory, true, pulls))
}

/// The receiver's half: read the sender's record (first from `pre`, the
/// bytes read past the upgrade, then from `upgraded`), connect, prove the
/// secret, map the rings. The local stream and what followed the record.
pub fn accept(upgraded: &mut impl Read, pre: &[u8], limit: Duration) -> io::Result<(LocalSocket, Vec<u8>)> {
    let mut hello = pre.to_vec();
    if hello.len() < HELLO_LEN {
        let mut more = vec![0u8; HELLO_LEN - hello.len()];
        upgraded.read_exact(&mut more)?;
        hello.extend(more);
    }
    let rest = hello.split_off(HELLO_LEN);
    let bad = || io::Error::new(io::ErrorKind::InvalidData, "same-host channel: not the sender's record");
    let body = hello.strip_prefix(HELLO).and_then(|b| b.strip_suffix(b"\n")).ok_or_else(bad)?;
    let (name, secret) = (&body[..NAME_HEX], &body[NAME_HEX + 1..]);
    if body[NAME_HEX] != b' ' || !name.iter().chain(secret).all(u8::is_ascii_hexdigit) {
        return Err(bad());
    }
    let name = std::str::from_utf8(name).map_err(|_| bad())?;
    let mut wake = UnixStream::connect_addr(&SocketAddr::from_abstract_name(format!("mpiws-local-{name}"))?)?;
    let sender = same_user(&wake)?;
    wake.set_read_timeout(Some(limit))?;
    wake.write_all(secret)?;
    let mut record = [0u8; 9];
    let (n, fd) = recv_with_fd(&wake, &mut record)?;
    let fd = fd.filter(|_| n >= 1 && record[0] == 1).ok_or_else(|| io::Error::other("same-host channel: no shared memory came"))?;
    wake.read_exact(&mut record[n..])?;
    let probe = u64::from_le_bytes(record[1..].try_into().expect("8 bytes"));
    let pulls = if config::local_pull() && probe != 0 && pull::probe(sender, probe) { Pulls::From(sender) } else { Pulls::None };
    let memory = match map(&fd) {
        Ok(m) => m,
        Err(e) => {
            let _ = wake.write_all(&[0]);
            return Err(e);
        }
    };
    wake.write_all(&[if pulls == Pulls::None { MAPPED } else { MAPPED_AND_PULLS }])?;
    wake.set_read_timeout(None)?;
    Ok((LocalSocket::new(wake, memory, false, pulls), rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both halves over a socket pair standing in for the upgraded connection.
    fn pair() -> (LocalSocket, LocalSocket) {
        let (mut a, b) = UnixStream::pair().unwrap();
        let receiver = std::thread::spawn(move || {
            let mut b = b;
            accept(&mut b, &[], Duration::from_secs(5)).unwrap()
        });
        let sender = offer(&mut a, Duration::from_secs(5)).unwrap();
        let (receiver, rest) = receiver.join().unwrap();
        assert!(rest.is_empty());
        (sender, receiver)
    }

    #[test]
    fn the_handshake_says_who_copies_from_whom() {
        // Both halves in this process: the receiver probed this process's word.
        let (s, r) = pair();
        // SAFETY: getpid cannot fail.
        let me = unsafe { libc::getpid() };
        assert_eq!((s.pulls(), r.pulls()), (Pulls::Sends, Pulls::From(me)));
        assert_eq!(s.try_clone().unwrap().pulls(), Pulls::Sends);
    }

    #[test]
    fn frames_cross_both_ways_in_order_across_many_ring_turns() {
        let (mut s, mut r) = pair();
        const TOTAL: usize = 8 << 20; // 32 turns of the default ring
        let writer = std::thread::spawn(move || {
            let data: Vec<u8> = (0..TOTAL).map(|i| (i % 241) as u8).collect();
            for chunk in data.chunks(100_000) {
                s.write_all(chunk).unwrap();
            }
            let mut back = [0u8; 3];
            s.read_exact(&mut back).unwrap();
            assert_eq!(&back, b"ack");
        });
        let mut got = vec![0u8; TOTAL];
        r.read_exact(&mut got).unwrap();
        assert!(got.iter().enumerate().all(|(i, &b)| b == (i % 241) as u8));
        r.write_all(b"ack").unwrap();
        writer.join().unwrap();
    }

    #[test]
    fn a_reader_sees_the_end_after_the_last_bytes_when_the_peer_goes() {
        let (mut s, mut r) = pair();
        s.write_all(b"last words").unwrap();
        drop(s); // the process ending closes its socket without a shutdown
        let mut all = Vec::new();
        r.read_to_end(&mut all).unwrap();
        assert_eq!(all, b"last words");
    }

    #[test]
    fn a_writer_with_a_full_ring_and_no_reader_left_gets_an_error_not_a_hang() {
        let (mut s, r) = pair();
        drop(r);
        let big = vec![0u8; 4 * ring_capacity()];
        let e = s.write_all(&big).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::BrokenPipe);
    }

    #[test]
    fn a_sleeping_reader_is_woken_and_polled_readiness_is_never_lost() {
        let (mut s, r) = pair();
        for round in 0..200u32 {
            assert!(!r.ready(), "nothing sent yet in round {round}");
            // What a poller does: wait on the descriptor.
            let writer = std::thread::spawn({
                let mut s = s.try_clone().unwrap();
                move || s.write_all(&round.to_le_bytes()).unwrap()
            });
            assert_ne!(poll_fd(r.as_raw_fd(), libc::POLLIN, Some(Duration::from_secs(5))), 0, "no wake-up in round {round}");
            writer.join().unwrap();
            let mut r2 = r.try_clone().unwrap();
            let mut got = [0u8; 4];
            r2.read_exact(&mut got).unwrap();
            assert_eq!(u32::from_le_bytes(got), round);
        }
        s.flush().unwrap();
    }

    #[test]
    fn a_wrong_secret_or_record_gets_no_memory() {
        // A record that is not the sender's is refused before connecting.
        let (_a, mut b) = UnixStream::pair().unwrap();
        let junk = vec![b'x'; HELLO_LEN];
        let Err(e) = accept(&mut b, &junk, Duration::from_secs(1)) else { panic!("a junk record was taken") };
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        // A connection that does not know the secret is refused.
        let (mut a, mut b) = UnixStream::pair().unwrap();
        let sender = std::thread::spawn(move || offer(&mut a, Duration::from_secs(5)));
        let mut hello = vec![0u8; HELLO_LEN];
        b.read_exact(&mut hello).unwrap();
        let name = std::str::from_utf8(&hello[HELLO.len()..HELLO.len() + NAME_HEX]).unwrap().to_string();
        let mut intruder = UnixStream::connect_addr(&SocketAddr::from_abstract_name(format!("mpiws-local-{name}")).unwrap()).unwrap();
        intruder.write_all(&[b'0'; NAME_HEX]).unwrap();
        let Err(e) = sender.join().unwrap() else { panic!("an intruder was given the rings") };
        assert_eq!(e.kind(), io::ErrorKind::PermissionDenied);
        let mut rest = Vec::new();
        let _ = intruder.read_to_end(&mut rest);
        assert!(rest.is_empty(), "the intruder got bytes");
    }
}
