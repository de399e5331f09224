//! Reading the streams peers opened to an instance: who reads, and how.
//!
//! Each incoming stream has a [`Reader`] (its framing state) behind a lock:
//! whoever holds the lock reads. Normally that is the instance's progress
//! thread, which waits on all of its streams at once (one epoll/kqueue) and
//! files whatever arrives. But a thread waiting for a message from one peer
//! takes that peer's reader and reads the stream itself ([`Progress::wait_for`]),
//! so the message reaches it without first waking the progress thread and
//! then being handed over — two thread wake-ups saved per message, which on
//! a small or shared machine is most of a message's latency.
//!
//! The progress thread is kept off a stream while a waiter reads it: its
//! poller registration is one-shot, and the waiter disarms it on taking the
//! reader and re-arms it after letting go (whoever held a reader re-arms it
//! after releasing, so readiness is never lost). A network stream a waiter
//! lets go is re-armed only after [`LINGER`], by the progress thread, unless
//! a waiter took it again first: a rank between two receives (microseconds
//! apart) then costs no system call to disarm and re-arm, and its next
//! message does not wake the progress thread. A message that comes to a
//! rank that does not wait again is read at most `LINGER` later.

use std::collections::HashMap;
use std::io::{BufReader, Chain, Cursor, Read, Write};
use std::os::fd::{AsRawFd, BorrowedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use bytes::Bytes;
use parking_lot::Mutex;
use polling::{Event, Events, Poller};

use crate::config::spin_budget;
use crate::engine::completion::{poll_until, Awaited, Completion, Outcome, RecvBuffer};
use crate::engine::mailbox::Message;
use crate::error::{Error, ErrorClass, Result};
use crate::net::polled::{readable, readable_or, Polled};
use crate::net::socket::Socket;
use crate::net::{local, pull};
use crate::runtime::runtime;
use crate::wire::frame::{self, Envelope, Frame, Payload, ACK_ERROR, ACK_MATCHED, ACK_STORED};
use crate::wire::reserved::is_rma;

/// What a message did to the receive state: filed, or dropped as a copy
/// of one filed before (a retry).
pub enum Delivered {
    Filed,
    Duplicate,
}

/// Where a reader files what it reads: the receiving rank
/// (`rank::Instance`). Its steps are the receive side's.
pub trait Receiver: Send + Sync {
    /// File a message that arrived (whole).
    fn deliver(self: Arc<Self>, msg: Message) -> Result<Delivered>;
    /// The message with sequence number `seq` from `source` was refused
    /// here (and its sender told): later ones go on.
    fn skip(self: Arc<Self>, source: u32, seq: Option<u64>);
    /// For a message whose payload is still on the wire: the posted receive
    /// it goes to, if that receive has a buffer of at least `len` bytes to
    /// read it into. The reader then reads the payload and completes the
    /// receive (`Outcome::Placed`), then says `placed`, or `cut`. Where no
    /// receive matches yet, one posted within `wait` is taken.
    fn claim(self: Arc<Self>, env: &Envelope, len: usize, wait: Duration) -> Option<(Arc<Completion>, Box<dyn RecvBuffer>)>;
    /// A claimed message was read in full.
    fn placed(&self, source: u32, seq: u64);
    /// A message whose head was read at `since` is now filed, or read into its receive.
    fn handled(&self, since: std::time::Instant);
    /// A claimed message was cut off mid-read (the sender sends it again).
    fn cut(&self, source: u32, seq: u64, completion: Arc<Completion>, buffer: Box<dyn RecvBuffer>);
    /// Whether to stop reading `source`'s stream for now (flow control).
    fn holds_back(&self, source: u32) -> bool;
    /// How many bytes open a one-sided frame (what it is, which operation).
    fn window_head(&self) -> usize;
    /// For a one-sided frame on `key` whose head is `head` and whose body
    /// (`len` bytes) is still on the wire: where an operation here takes that
    /// body (a get's memory), if it is a reply one waits for. The operation
    /// is then the reader's to finish.
    fn place_reply(&self, key: u64, head: &[u8], len: usize) -> Option<ReplyPlace>;
}

/// Where a one-sided reply's body is read to (`Receiver::place_reply`).
pub struct ReplyPlace {
    /// Valid for `len` bytes until `finish` is called.
    pub ptr: usize,
    pub len: usize,
    /// Completes the operation: true once the body was read in full; false
    /// fails it (the read was cut off).
    pub finish: Box<dyn FnOnce(bool) + Send>,
}

/// Read buffer size; small messages are read many at a time.
const BUFFER: usize = 64 * 1024;
/// A receiver acknowledges (cumulatively) after this many messages or bytes.
/// Each acknowledgement wakes the sender's acknowledgement thread, a third
/// thread where two ranks share two cores: 8 B ping-pong, stalls over 100 us
/// per 100,000 round trips, 282-821 at 64, 36-89 at 256, 612-1086 at 1024
/// (docs/performance.md).
const ACK_EVERY: u32 = 256;
const ACK_BYTES: u64 = 256 << 10;
/// Messages from this size are read straight into a waiting receive's buffer.
const PLACE_FROM: usize = 64 * 1024;
/// How long a network stream a waiter let go stays disarmed for the next
/// waiter (module doc). The progress thread looks this often while any does.
const LINGER: Duration = Duration::from_millis(1);
/// A waiter reading a stream looks up from it at least this often (to see a
/// completion that came another way, or its deadline).
const WAITER_SLICE: Duration = Duration::from_millis(10);

fn write_ack(w: &Mutex<Socket>, kind: u8, seq: u64, e: Option<&Error>) -> std::io::Result<()> {
    let (class, text) = e.map_or((0, ""), |e| (e.class.code(), e.message.as_str()));
    w.lock().write_all(&frame::encode_ack(kind, seq, class, text))
}

/// The framing state of one incoming stream.
pub struct Reader {
    instance: Weak<dyn Receiver>,
    source: u32,
    max: u64,
    r: BufReader<Chain<Cursor<Bytes>, Polled>>,
    writer: Arc<Mutex<Socket>>,
    /// The process whose memory payloads by reference are copied from
    /// (`net::pull`), where this same-host stream negotiated them.
    sender: Option<libc::pid_t>,
    stored: u64,
    unacked: u32,
    unacked_bytes: u64,
}

impl Reader {
    /// Whether a frame can be read without waiting for the network.
    /// (Bytes read ahead, or plaintext a TLS session holds: no readiness
    /// event announces either.)
    fn buffered(&self) -> bool {
        let (pre, _) = self.r.get_ref().get_ref();
        !self.r.buffer().is_empty() || (pre.position() as usize) < pre.get_ref().len() || self.socket().pending()
    }

    fn stored(&mut self, seq: u64, len: u64) {
        self.stored = self.stored.max(seq);
        self.unacked += 1;
        self.unacked_bytes += len;
    }

    /// The lazy cumulative acknowledgement, when it is due (or asked for).
    fn ack_if_due(&mut self, now: bool) -> std::io::Result<()> {
        if now || self.unacked >= ACK_EVERY || self.unacked_bytes >= ACK_BYTES {
            (self.unacked, self.unacked_bytes) = (0, 0);
            write_ack(&self.writer, ACK_STORED, self.stored, None)?;
        }
        Ok(())
    }

    /// Read one frame (waiting for it if need be) and file it. False once
    /// the stream is closed or out of step (then only closing is safe).
    /// Acknowledgements are cumulative and lazy: every `ACK_EVERY` messages
    /// or `ACK_BYTES` bytes, or when asked; errors and matches (synchronous
    /// sends) are told at once.
    /// `beside`: read beside the program (the progress thread), which may
    /// then wait briefly for the program to post the receive a payload by
    /// reference goes to (a thread reading for its own receive may not: the
    /// receive it waits for would be its own).
    fn step(&mut self, beside: bool) -> bool {
        let Some(instance) = self.instance.upgrade() else { return false };
        // The header and tables, their lengths checked (`frame::read_frame`).
        let sender = self.sender;
        let head = match frame::read_frame(&mut self.r, self.source, self.max, sender.is_some()) {
            Err(_) => return false,
            Ok(Frame::AckRequest) => {
                (self.unacked, self.unacked_bytes) = (0, 0);
                return write_ack(&self.writer, ACK_STORED, self.stored, None).is_ok();
            }
            Ok(Frame::Refused { env, error }) => {
                if let Some(env) = &env {
                    instance.clone().skip(self.source, env.seq);
                }
                let _ = write_ack(&self.writer, ACK_ERROR, env.and_then(|e| e.seq).unwrap_or(0), Some(&error));
                return false;
            }
            Ok(Frame::Message(head)) => head,
        };
        let since = std::time::Instant::now(); // how long it takes to be handled here (`Receiver::handled`)
        let frame::MessageHeader { env, length: len, ack_now, refs, .. } = head;
        let (seq, sync) = (env.seq.unwrap_or(0), env.sync);
        let size = len as usize; // read_frame made sure it fits

        // By reference, the payload is copied from the sender's memory (`net::pull`).
        let pulled = |dst: *mut u8| match sender {
            // SAFETY: the callers' `dst` holds `size` bytes, the runs' sum (`read_frame` checked).
            Some(pid) => unsafe { pull::copy_from(pid, &refs, dst, size) }.is_ok(),
            None => false,
        };
        if size >= PLACE_FROM && env.forward.is_empty() {
            let wait = if beside && !refs.is_empty() { pull::worth_waiting(size) } else { Duration::ZERO };
            if let Some((completion, mut buffer)) = instance.clone().claim(&env, size, wait) {
                // A receive is waiting with a big enough buffer: read into it.
                let dst = &mut buffer.as_mut_slice()[..size];
                let read = if refs.is_empty() { self.r.read_exact(dst).is_ok() } else { pulled(dst.as_mut_ptr()) };
                if !read {
                    // Cut off: the sender sends it again, to this receive.
                    instance.cut(self.source, seq, completion, buffer);
                    return false;
                }
                completion.complete(Ok(Outcome::Placed { env, len: size, buffer }));
                instance.placed(self.source, seq);
                instance.handled(since);
                self.stored(seq, len);
                let told = if sync { write_ack(&self.writer, ACK_MATCHED, seq, None) } else { self.ack_if_due(ack_now) };
                return told.is_ok();
            }
        }
        // Bytes `skip..` of a payload by reference, into `dst`.
        let pulled_range = |skip: usize, dst: &mut [u8]| match sender {
            Some(pid) => {
                let runs = pull::runs_within(&refs, skip as u64, dst.len() as u64);
                // SAFETY: `dst` holds its length; the runs hold as much (`read_frame` checked their sum, `skip + len <= size`).
                unsafe { pull::copy_from(pid, &runs, dst.as_mut_ptr(), dst.len()) }.is_ok()
            }
            None => false,
        };
        // A one-sided reply an operation here waits for: its body straight into the operation's memory.
        let mut data = Vec::with_capacity(size);
        if size >= PLACE_FROM && env.forward.is_empty() && is_rma(&env) {
            data.resize(instance.window_head().min(size), 0);
            let head = if refs.is_empty() { self.r.read_exact(&mut data).is_ok() } else { pulled_range(0, &mut data) };
            if !head {
                return false; // cut off: the sender sees the connection drop
            }
            if let Some(place) = instance.place_reply(env.context, &data, size - data.len()) {
                let body = size - data.len();
                let n = place.len.min(body);
                // SAFETY: `ReplyPlace`'s contract: `ptr` is valid for `len` bytes until `finish`.
                let dst = unsafe { std::slice::from_raw_parts_mut(place.ptr as *mut u8, n) };
                let rest = (body - n) as u64;
                let read = if refs.is_empty() {
                    self.r.read_exact(dst).is_ok()
                        && std::io::copy(&mut (&mut self.r).take(rest), &mut std::io::sink()).is_ok_and(|c| c == rest)
                } else {
                    pulled_range(data.len(), dst)
                };
                (place.finish)(read);
                if !read {
                    return false;
                }
                // Taken here: its sender's later messages do not wait for it; a retry of it is dropped.
                instance.clone().skip(self.source, env.seq);
                self.stored(seq, len);
                return self.ack_if_due(ack_now).is_ok();
            }
        }
        if !refs.is_empty() {
            // (Over the head a one-sided reply's look may have pulled.)
            if !pulled(data.as_mut_ptr()) {
                return false; // as a cut off stream
            }
            // SAFETY: `pulled` wrote all `size` bytes of the capacity.
            unsafe { data.set_len(size) };
        } else {
            let head = data.len() as u64; // read already (a one-sided frame's head)
            match (&mut self.r).take(len - head).read_to_end(&mut data) {
                Ok(n) if n as u64 == len - head => {}
                _ => return false, // cut off: the sender sees the connection drop
            }
        }
        let mut msg = Message::new(env, Payload::from_chunks(vec![Bytes::from(data)]));
        let matched = msg.await_match();
        let told = match instance.clone().deliver(msg) {
            Err(e) => write_ack(&self.writer, ACK_ERROR, seq, Some(&e)),
            Ok(_) => {
                instance.handled(since);
                // Filed, or a retry of one filed before (whose match is told
                // to this copy too, see `Mailbox::rejoin`): stored either way.
                self.stored(seq, len);
                if let Some(rx) = matched {
                    let writer = self.writer.clone();
                    runtime().spawn(async move {
                        let ended = Error::new(ErrorClass::ProcFailed, "the receiving instance ended before it received the message");
                        let _ = match rx.await {
                            Ok(()) => write_ack(&writer, ACK_MATCHED, seq, None),
                            Err(_) => write_ack(&writer, ACK_ERROR, seq, Some(&ended)),
                        };
                    });
                }
                self.ack_if_due(ack_now)
            }
        };
        told.is_ok()
    }

    fn socket(&self) -> &Socket {
        &self.r.get_ref().get_ref().1 .0
    }

    /// Whether the stream has data (or its end) within `timeout`. A
    /// same-host stream is looked at in its ring, and arms its wake-up
    /// before this says no (so a poller waiting on it is woken).
    /// `wake` ends the wait early (`Awaited::sleep_fd`).
    fn readable(&self, fd: BorrowedFd<'_>, wake: Option<BorrowedFd<'_>>, timeout: Duration) -> bool {
        let Socket::Local(l) = self.socket() else { return readable_or(fd, wake, timeout) };
        if l.ready() {
            return true;
        }
        if !timeout.is_zero() {
            readable_or(fd, wake, timeout);
        }
        l.ready()
    }

    /// A waiter reads now: a same-host peer need not send wake-ups (the
    /// waiter polls the ring; it asks again before it sleeps, `readable`).
    fn reading(&self) {
        if let Socket::Local(l) = self.socket() {
            l.reading();
        }
    }

    /// A waiter lets a same-host stream go: wake-ups are asked for again;
    /// whether data came meanwhile (then the progress thread must look).
    /// Pending wake-up bytes are left: the poller's event drains them.
    fn released(&self) -> bool {
        match self.socket() {
            Socket::Local(l) => l.released(),
            _ => false,
        }
    }

    fn is_local(&self) -> bool {
        matches!(self.socket(), Socket::Local(_))
    }

    /// Whether data came, for a waiter polling: a same-host stream's ring
    /// is memory, read without a system call.
    fn arrived(&self, fd: BorrowedFd<'_>) -> bool {
        match self.socket() {
            Socket::Local(l) => l.has_data(),
            _ => readable(fd, Duration::ZERO),
        }
    }

    /// Whether to stop reading for now (`Receiver::holds_back`).
    fn parks(&self) -> bool {
        self.instance.upgrade().is_some_and(|i| i.holds_back(self.source))
    }

    /// Read frames while they are there without waiting; false once closed.
    /// (The event that called for this may be stale: a waiter may have read
    /// the data since, and a blocking read here would stall every stream.)
    fn drain(&mut self, fd: BorrowedFd<'_>) -> bool {
        loop {
            if self.parks() {
                return true; // parked: read again once receives took some
            }
            if !self.buffered() && !self.readable(fd, None, Duration::ZERO) {
                return true;
            }
            if !self.step(true) {
                return false;
            }
        }
    }
}

/// One incoming stream: its socket (for polling) and its reader, which owns it.
pub struct Inbound {
    key: usize,
    fd: RawFd,
    reader: Mutex<Reader>,
    /// A same-host stream: its poller registration is left armed while a
    /// waiter reads (its peer sends wake-ups only when asked, `net::local`).
    local: bool,
    /// Whether its one-shot registration is armed (no event taken since).
    armed: AtomicBool,
    /// When a waiter let it go, disarmed (`Progress::since` + 1); 0: not
    /// lingering. Changed only by whoever holds the reader.
    let_go: AtomicU64,
}

impl Inbound {
    fn socket(&self) -> BorrowedFd<'_> {
        // SAFETY: the reader owns the socket for as long as this Inbound lives.
        unsafe { BorrowedFd::borrow_raw(self.fd) }
    }
}

/// An instance's incoming streams and the thread that reads them when no
/// waiter does.
pub struct Progress {
    poller: Poller,
    streams: Mutex<HashMap<usize, Arc<Inbound>>>,
    /// The latest stream from each source.
    by_source: Mutex<HashMap<u32, Arc<Inbound>>>,
    next_key: AtomicUsize,
    /// Streams whose first bytes came with the upgrade: buffered, so no
    /// readiness event will announce them.
    buffered: Mutex<Vec<usize>>,
    /// Streams not read for now: the instance's unexpected messages are
    /// over the bound (`Receiver::holds_back`).
    parked: Mutex<Vec<usize>>,
    any_parked: AtomicBool,
    stopped: AtomicBool,
    /// The progress thread wakes every `LINGER` (some stream lingers).
    ticking: AtomicBool,
    /// When a stream last lingered (`since`): while a rank keeps letting
    /// streams go, the thread ticks on rather than be told each time.
    lingered: AtomicU64,
    epoch: Instant,
}

impl Progress {
    /// Start the progress thread of an instance.
    pub fn start() -> std::io::Result<Arc<Progress>> {
        let p = Arc::new(Progress {
            poller: Poller::new()?,
            streams: Mutex::default(),
            by_source: Mutex::default(),
            next_key: AtomicUsize::new(0),
            buffered: Mutex::default(),
            parked: Mutex::default(),
            any_parked: AtomicBool::new(false),
            stopped: AtomicBool::new(false),
            ticking: AtomicBool::new(false),
            lingered: AtomicU64::new(0),
            epoch: Instant::now(),
        });
        let me = p.clone();
        std::thread::Builder::new().name("mpiws-progress".into()).spawn(move || me.run())?;
        Ok(p)
    }

    /// Serve a stream from `source` (already upgraded; `pre` holds bytes read
    /// past the HTTP exchange).
    pub fn add<R: Receiver + 'static>(&self, instance: &Arc<R>, source: u32, stream: Socket, pre: Bytes, max: u64) -> std::io::Result<()> {
        stream.set_nonblocking(false)?;
        let writer = Arc::new(Mutex::new(stream.try_clone()?));
        let fd = stream.as_raw_fd();
        let sender = match &stream {
            Socket::Local(l) => match l.pulls() {
                local::Pulls::From(pid) => Some(pid),
                _ => None,
            },
            _ => None,
        };
        let reader = Reader {
            instance: Arc::downgrade(instance) as Weak<dyn Receiver>,
            source,
            max,
            r: BufReader::with_capacity(BUFFER, Cursor::new(pre).chain(Polled(stream))),
            writer,
            sender,
            stored: 0,
            unacked: 0,
            unacked_bytes: 0,
        };
        let key = self.next_key.fetch_add(1, Ordering::Relaxed);
        let local = reader.is_local();
        let inbound =
            Arc::new(Inbound { key, fd, reader: Mutex::new(reader), local, armed: AtomicBool::new(true), let_go: AtomicU64::new(0) });
        self.streams.lock().insert(key, inbound.clone());
        self.by_source.lock().insert(source, inbound.clone());
        // SAFETY: the socket stays open while registered: it is deleted from
        // the poller before the Inbound (whose reader owns it) is dropped.
        // A same-host stream may hold data already, which no wake-up announced.
        let early = {
            let reader = inbound.reader.lock();
            reader.buffered() || reader.is_local() && reader.readable(inbound.socket(), None, Duration::ZERO)
        };
        unsafe { self.poller.add(fd, Event::readable(key))? };
        if early {
            self.buffered.lock().push(key);
            self.poller.notify()?;
        }
        Ok(())
    }

    fn run(self: Arc<Self>) {
        let mut events = Events::new();
        // After the instance ends, streams are still read until their peers
        // close them: what they sent is acknowledged (or refused) properly.
        while !(self.stopped.load(Ordering::Acquire) && self.streams.lock().is_empty()) {
            events.clear();
            let tick = self.ticking.load(Ordering::SeqCst).then_some(LINGER);
            if self.poller.wait(&mut events, tick).is_err() {
                break;
            }
            let mut keys: Vec<usize> = events.iter().map(|e| e.key).collect();
            keys.append(&mut self.buffered.lock());
            for key in keys {
                let Some(inbound) = self.streams.lock().get(&key).cloned() else { continue };
                // Before the reader's lock: a waiter that lets go after this sees it and re-arms.
                inbound.armed.store(false, Ordering::SeqCst);
                // A waiter holds it: it reads, and re-arms when done.
                let Some(mut reader) = inbound.reader.try_lock() else { continue };
                inbound.let_go.store(0, Ordering::SeqCst); // armed or parked below, as any
                let open = reader.drain(inbound.socket());
                let park = (open && reader.parks()).then(|| (reader.instance.clone(), reader.source));
                drop(reader);
                if let Some((instance, source)) = park {
                    self.park(&inbound, &instance, source);
                    continue;
                }
                self.settle(&inbound, open);
            }
            self.tick();
        }
    }

    /// Nanoseconds since this Progress started, plus one (never 0).
    fn since(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64 + 1
    }

    /// A waiter lets a network stream go (its reader still held): it stays
    /// disarmed for `LINGER`, for the next waiter; the progress thread is
    /// made to look after it then.
    fn linger(&self, inbound: &Inbound) {
        let now = self.since();
        self.lingered.store(now, Ordering::Relaxed);
        inbound.let_go.store(now, Ordering::SeqCst);
        // Against `tick` stopping meanwhile: one of the two sees the other.
        if !self.ticking.load(Ordering::SeqCst) {
            let _ = self.poller.notify();
        }
    }

    /// Re-arm the streams let go over `LINGER` ago whose waiter did not come
    /// back; keep waking every `LINGER` while any stream lingers.
    fn tick(&self) {
        self.ticking.store(true, Ordering::SeqCst);
        let lingering: Vec<Arc<Inbound>> = self.streams.lock().values().filter(|i| i.let_go.load(Ordering::SeqCst) != 0).cloned().collect();
        let (now, linger) = (self.since(), LINGER.as_nanos() as u64);
        let mut left = now.saturating_sub(self.lingered.load(Ordering::Relaxed)) < 2 * linger;
        for inbound in lingering {
            // A waiter holds it: it disarms or lets go again itself.
            let Some(_reader) = inbound.reader.try_lock() else {
                left = true;
                continue;
            };
            let at = inbound.let_go.load(Ordering::SeqCst);
            if at == 0 {
                continue;
            }
            if now.saturating_sub(at) < linger {
                left = true;
                continue;
            }
            inbound.let_go.store(0, Ordering::SeqCst);
            inbound.armed.store(true, Ordering::SeqCst);
            // Armed again, readiness is looked at anew: what came meanwhile is an event now.
            let _ = self.poller.modify(inbound.socket(), Event::readable(inbound.key));
        }
        if !left {
            self.ticking.store(false, Ordering::SeqCst);
            if self.streams.lock().values().any(|i| i.let_go.load(Ordering::SeqCst) != 0) {
                self.ticking.store(true, Ordering::SeqCst);
            }
        }
    }

    /// After reading: re-arm the stream, or forget it once closed.
    fn settle(&self, inbound: &Arc<Inbound>, open: bool) {
        if open {
            // A same-host stream a waiter read is still armed unless an event came meanwhile.
            if !(inbound.local && inbound.armed.load(Ordering::SeqCst)) {
                inbound.armed.store(true, Ordering::SeqCst);
                let _ = self.poller.modify(inbound.socket(), Event::readable(inbound.key));
            }
            return;
        }
        let _ = self.poller.delete(inbound.socket());
        self.streams.lock().remove(&inbound.key);
        let mut by = self.by_source.lock();
        if by.values().any(|i| Arc::ptr_eq(i, inbound)) {
            by.retain(|_, i| !Arc::ptr_eq(i, inbound));
        }
    }

    /// Wait for `c` up to `timeout`, reading the stream from `source`
    /// ourselves while we wait if nobody else is reading it. False if
    /// `timeout` passed first. Falls back to a plain wait when there is no
    /// such stream (yet) or another thread is reading it.
    pub fn wait_for(&self, c: &dyn Awaited, source: u32, timeout: Option<Duration>) -> bool {
        self.wait_for_after(c, source, timeout, &mut || {})
    }

    /// `wait_for`, running `first` (once) as soon as this thread reads the
    /// stream, or is about to wait another way. Why: a `Sendrecv` writes its
    /// send from `first`, so the peer's message, which may come at once,
    /// finds this thread reading rather than waking the progress thread
    /// (a third runnable thread when two ranks share two cores).
    pub fn wait_for_after(&self, c: &dyn Awaited, source: u32, timeout: Option<Duration>, first: &mut dyn FnMut()) -> bool {
        let mut first = Some(first);
        let mut go = || {
            if let Some(f) = first.take() {
                f();
            }
        };
        let deadline = timeout.map(|t| Instant::now() + t);
        let left = || deadline.map(|d| d.saturating_duration_since(Instant::now()));
        loop {
            if c.is_done() {
                return true;
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return false;
            }
            let inbound = self.by_source.lock().get(&source).cloned();
            let Some(inbound) = inbound else {
                go();
                return c.wait(left());
            };
            let Some(mut reader) = inbound.reader.try_lock() else {
                // Someone else is reading it and will file what comes.
                go();
                return c.wait(left());
            };
            // A stream let go by the last waiter and not re-armed since is still disarmed.
            if !inbound.local && inbound.let_go.swap(0, Ordering::SeqCst) == 0 {
                inbound.armed.store(false, Ordering::SeqCst);
                let _ = self.poller.modify(inbound.socket(), Event::none(inbound.key));
            }
            reader.reading();
            go();
            let mut open = true;
            // Poll first (see `spin_budget`), then sleep in slices; polled
            // again after each frame read: a peer that just sent is likely to
            // send again (one-sided operations on this rank's window while it
            // waits: each then needs no wake-up).
            let spin = if c.polls() { spin_budget() } else { Duration::ZERO };
            let mut spin_until = Instant::now() + spin;
            while !c.is_done() {
                let window = spin_until.saturating_duration_since(Instant::now()).min(left().unwrap_or(Duration::MAX));
                let ready = reader.buffered() || poll_until(window, || c.is_done() || reader.arrived(inbound.socket()));
                if c.is_done() {
                    break;
                }
                let slice = left().map_or(WAITER_SLICE, |l| l.min(WAITER_SLICE));
                // What ends this wait another way wakes the sleep below (a
                // handler thread's next token), once cleared and checked here.
                let wake = if ready { None } else { c.sleep_fd() };
                if wake.is_some() && c.is_done() {
                    break;
                }
                if !ready && !reader.readable(inbound.socket(), wake, slice) {
                    if deadline.is_some_and(|d| Instant::now() >= d) {
                        break;
                    }
                    continue;
                }
                if !reader.step(false) {
                    open = false;
                    break;
                }
                spin_until = Instant::now() + spin;
            }
            // Frames already in our buffer raise no readiness event: the
            // progress thread files them. Not this thread: reading on while
            // a peer keeps sending (a burst through a slow link) would hold
            // this receive until the peer pauses.
            // A same-host stream is told to wake its poller first (`readable`), else
            // what came after this thread's last look would never be announced.
            let more = open && (reader.buffered() || reader.is_local() && reader.released());
            let lingers = open && !more && !inbound.local;
            if lingers {
                self.linger(&inbound);
            }
            drop(reader);
            if !lingers {
                self.settle(&inbound, open);
            }
            if more {
                self.buffered.lock().push(inbound.key);
                let _ = self.poller.notify();
            }
            if !open {
                continue; // the stream ended: wait another way
            }
            return c.is_done();
        }
    }

    /// Stop reading `inbound` until `unpark` (its poller registration stays
    /// disarmed).
    fn park(&self, inbound: &Arc<Inbound>, instance: &Weak<dyn Receiver>, source: u32) {
        self.parked.lock().push(inbound.key);
        self.any_parked.store(true, Ordering::Release);
        // A receive may have taken messages just before we parked.
        if instance.upgrade().is_some_and(|i| !i.holds_back(source)) {
            self.unpark();
        }
    }

    pub fn has_parked(&self) -> bool {
        self.any_parked.load(Ordering::Acquire)
    }

    /// Read the parked streams again (the progress thread parks them anew
    /// if the bound is still exceeded).
    pub fn unpark(&self) {
        let keys = std::mem::take(&mut *self.parked.lock());
        self.any_parked.store(false, Ordering::Release);
        if !keys.is_empty() {
            self.buffered.lock().extend(keys);
            let _ = self.poller.notify();
        }
    }

    /// The instance ended: acknowledge what it stored now (its process may
    /// end next: see `service::sandbox`), and end the thread once its peers
    /// have closed their streams (the instance refuses what they send until then).
    pub fn stop(&self) {
        let streams: Vec<Arc<Inbound>> = self.streams.lock().values().cloned().collect();
        for inbound in &streams {
            // A reader busy elsewhere is left alone (a waiter reading it sees the end within its slice).
            if let Some(mut reader) = inbound.reader.try_lock_for(Duration::from_millis(100)) {
                if reader.unacked > 0 {
                    let _ = reader.ack_if_due(true);
                }
            }
        }
        // Each is looked at once more: an event that came while the reader
        // was held here was passed over, and its stream (one-shot) would
        // never be read again, nor its end seen, nor this thread end.
        self.buffered.lock().extend(streams.iter().map(|i| i.key));
        self.stopped.store(true, Ordering::Release);
        let _ = self.poller.notify();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A receiver that counts what it files (and keeps nothing).
    struct Counting {
        filed: AtomicUsize,
    }

    impl Receiver for Counting {
        fn deliver(self: Arc<Self>, _: Message) -> Result<Delivered> {
            self.filed.fetch_add(1, Ordering::SeqCst);
            Ok(Delivered::Filed)
        }
        fn skip(self: Arc<Self>, _: u32, _: Option<u64>) {}
        fn claim(self: Arc<Self>, _: &Envelope, _: usize, _: Duration) -> Option<(Arc<Completion>, Box<dyn RecvBuffer>)> {
            None
        }
        fn placed(&self, _: u32, _: u64) {}
        fn handled(&self, _: std::time::Instant) {}
        fn cut(&self, _: u32, _: u64, _: Arc<Completion>, _: Box<dyn RecvBuffer>) {}
        fn holds_back(&self, _: u32) -> bool {
            false
        }
        fn window_head(&self) -> usize {
            0
        }
        fn place_reply(&self, _: u64, _: &[u8], _: usize) -> Option<ReplyPlace> {
            None
        }
    }

    fn message(seq: u64) -> Vec<u8> {
        let env = Envelope { source: 1, context: 0, tag: 5, seq: Some(seq), sync: false, parts: Vec::new(), forward: Vec::new() };
        let mut m = frame::encode_message(&env, 3, false);
        m.extend_from_slice(b"abc");
        m
    }

    /// A network stream a waiter read and let go lingers disarmed (`LINGER`),
    /// but what comes on it after is still read, by the progress thread,
    /// soon after: nobody waits for it.
    #[test]
    fn a_message_after_the_waiter_let_go_is_read_by_the_progress_thread() {
        use std::io::Write as _;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut peer = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (accepted, _) = listener.accept().unwrap();
        let progress = Progress::start().unwrap();
        let receiver = Arc::new(Counting { filed: AtomicUsize::new(0) });
        progress.add(&receiver, 1, Socket::Tcp(accepted), Bytes::new(), 1 << 20).unwrap();
        for round in 0..20u64 {
            let before = receiver.filed.load(Ordering::SeqCst);
            peer.write_all(&message(2 * round + 1)).unwrap();
            // A waiter reads the stream itself until the message is filed, then lets go.
            let filed = || receiver.filed.load(Ordering::SeqCst) > before;
            let deadline = Instant::now() + Duration::from_secs(5);
            while !filed() && Instant::now() < deadline {
                progress.wait_for(&*Completion::new(), 1, Some(Duration::from_millis(1)));
            }
            assert!(filed(), "round {round}: the waiter's message");
            // Then one more, with nobody waiting: the progress thread reads it.
            peer.write_all(&message(2 * round + 2)).unwrap();
            let deadline = Instant::now() + Duration::from_secs(5);
            while receiver.filed.load(Ordering::SeqCst) < before + 2 && Instant::now() < deadline {
                std::thread::sleep(Duration::from_micros(200));
            }
            assert_eq!(receiver.filed.load(Ordering::SeqCst), before + 2, "round {round}: the message after the waiter left");
        }
        progress.stop();
    }

    /// A stream whose end came while its reader was held (by `stop`, say)
    /// is still read to its end once stopped, and the thread ends: its
    /// one-shot event was passed over, and nothing else would look again.
    #[test]
    fn a_stream_that_ended_while_its_reader_was_held_is_read_to_its_end_after_stop() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let peer = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (accepted, _) = listener.accept().unwrap();
        let progress = Progress::start().unwrap();
        let receiver = Arc::new(Counting { filed: AtomicUsize::new(0) });
        progress.add(&receiver, 1, Socket::Tcp(accepted), Bytes::new(), 1 << 20).unwrap();
        let inbound = progress.streams.lock().values().next().unwrap().clone();
        {
            let _held = inbound.reader.lock();
            peer.shutdown(std::net::Shutdown::Both).unwrap();
            std::thread::sleep(Duration::from_millis(300)); // the event comes, and is passed over
        }
        progress.stop();
        let deadline = Instant::now() + Duration::from_secs(5);
        while !progress.streams.lock().is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(progress.streams.lock().is_empty(), "the stream's end was never read");
    }
}
