//! The sender's side of the stream channel: a persistent TCP stream per
//! (sender, receiver) pair, negotiated with an HTTP upgrade on the
//! receiving endpoint's port (`service::stream` answers it), then carrying
//! binary frames (`frame::encode_message` / `encode_ack`); `net::reader`
//! reads them at the other end.
//!
//! Why: a store is a whole HTTP exchange handled by several tasks on each
//! side; on one machine that costs ~4x the wire latency. On a stream the
//! sender writes from its own thread and the receiver reads in the thread
//! waiting for the message, or in its progress thread (`net::reader`), so
//! a small message costs little more than the TCP hop. Everything else is
//! unchanged: same envelope, sequence numbers, mailbox, acknowledgements
//! (stored, and matched for synchronous sends). Where the upgrade is
//! refused (a proxy, an old endpoint), stores are used. To an https peer
//! the stream runs inside the same TLS connection as its upgrade
//! (`net::pump`), on either side; to a pinned endpoint behind a relay,
//! inside its tunnel (`net::tunnel`), upgraded at the endpoint's own path.
//!
//! Upgrade: `POST /domains/{domain}/ranks/{dest}/stream` with `Upgrade:
//! mpiws-stream/1`, `Connection: upgrade`, the bearer token and
//! `mpiws-source`; the same checks as a store, then `101 Switching Protocols`.

use std::borrow::Cow;
use std::collections::{BTreeMap, VecDeque};
use std::io::{BufReader, Read, Write};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::StatusCode;
use parking_lot::{Condvar, Mutex};

use crate::config::{self, failure_timeout, startup_timeout};
use crate::engine::completion::{Completion, Outcome, Tracking};
use crate::error::{err, Error, ErrorClass, Result};
use crate::net::http::error_from_response;
use crate::net::polled::Polled;
use crate::net::pump::pump;
use crate::net::socket::Socket;
use crate::net::{local, proxy, pull, rtt, tls, tls_socket, tunnel};
use crate::runtime::runtime;
use crate::wire::frame::{self, Envelope, ACK_ERROR, ACK_HEADER, ACK_MATCHED, ACK_STORED};
use crate::wire::head::Head;
use crate::wire::url::{self, Tunnel};

pub const PROTOCOL: &str = "mpiws-stream/1";

/// Messages up to this size are written with their header in one syscall.
const COALESCE_UP_TO: usize = 64 * 1024;
/// Messages above this size are written by a background thread, so that a
/// non-blocking send returns at once. On a same-host stream, also every
/// message that might not fit its ring (half its capacity): a send made
/// while this thread holds the stream from its peer (`Sendrecv`) must not
/// wait for room that only this thread's reading would make. Not one that
/// goes by reference (`net::pull`): its frame is small.
const BACKGROUND_FROM: usize = 1 << 20;

/// Sends still waiting for their acknowledgement, shared with the instance
/// so it can wait for them all before it finishes.
#[derive(Default)]
pub struct InFlight {
    count: Mutex<usize>,
    idle: Condvar,
}

impl InFlight {
    pub fn started(&self) {
        *self.count.lock() += 1;
    }

    pub fn ended(&self) {
        let mut n = self.count.lock();
        *n -= 1;
        if *n == 0 {
            self.idle.notify_all();
        }
    }

    /// Wait until none is left, up to `timeout`; true if none is.
    pub fn wait_idle(&self, timeout: Option<Duration>) -> bool {
        let deadline = timeout.map(|t| std::time::Instant::now() + t);
        let mut n = self.count.lock();
        while *n > 0 {
            match deadline {
                None => self.idle.wait(&mut n),
                Some(d) => {
                    if self.idle.wait_until(&mut n, d).timed_out() {
                        return *n == 0;
                    }
                }
            }
        }
        true
    }
}

/// Below this size a standard send completes once its bytes are written
/// (MPI's eager mode); the link keeps the bytes until the receiver stores
/// them, so callers must pass bytes they own, not borrow. Larger sends
/// complete when the receiver acknowledges storing them (asked at once), so
/// a borrowed buffer is never read again after its send completed — and can
/// still be sent again if the stream breaks first. Why 512 KiB: that ack costs a
/// thread wake-up (~40 us here), a copy of 512 KiB about as much.
pub const EAGER_BELOW: usize = 512 * 1024;

/// A message sent and not yet acknowledged.
struct Pending {
    completion: Arc<Completion>,
    /// Completes on the receiver's "matched" (else on "stored").
    sync: bool,
    /// Told when the receiver acknowledges storing the message (when asked
    /// for: the "completed" event of a tracked send), and matching it.
    track: Option<Tracking>,
    /// The frame, kept to be sent again if the stream breaks before the
    /// receiver acknowledged it.
    frame: Arc<Vec<Bytes>>,
}

impl Pending {
    /// Whether it is settled by the receiver's "matched", not "stored".
    fn awaits_match(&self) -> bool {
        self.sync || self.track.as_ref().is_some_and(|t| t.matched.is_some())
    }

    /// The receiver stored it: a standard send completes (a synchronous one
    /// waits for "matched"), and a tracked one is told.
    fn stored(&self) {
        if let Some(t) = &self.track {
            t.stored.complete(Ok(Outcome::Sent));
        }
        if !self.sync {
            self.completion.complete(Ok(Outcome::Sent));
        }
    }
}

/// Failures of sends that already completed, per peer, waiting to be
/// reported by the next send to that peer or by the instance's flush.
pub type Undelivered = Arc<Mutex<Option<Error>>>;

/// Where a link connects to, kept to connect again.
struct Target {
    addr: String,
    /// An https peer: the stream goes inside TLS.
    tls: bool,
    /// A pinned endpoint behind a relay: the stream goes inside its tunnel.
    tunnel: Option<Tunnel>,
    peer: String,
    /// The upgrade request's head, but its last empty line.
    head: String,
    /// Offer the same-host channel (`net::local`); off once it failed here.
    local: AtomicBool,
}

/// The link's current stream (None: down); `generation` counts the
/// streams opened; `reconnecting`: a thread is opening the next one.
struct Conn {
    stream: Option<Polled>,
    generation: u64,
    reconnecting: bool,
}

/// Frames to write in the order they were sent: while a background thread
/// writes a large one, later sends queue behind it instead of overtaking it
/// (a receiver takes messages in order: one that overtook waits there, and
/// the link meanwhile idles; a pipelined broadcast lost a third of its rate).
#[derive(Default)]
struct Writes {
    queue: VecDeque<Box<dyn FnOnce() + Send>>,
    busy: bool,
}

/// Told when the link gives up on its peer: unreachable for the failure
/// timeout, or refused for good (the instance marks the peer gone).
pub type OnGone = Box<dyn Fn(Error) + Send + Sync>;

impl Conn {
    /// Take the stream down (its reader thread sees the end).
    fn down(&mut self) {
        if let Some(old) = self.stream.take() {
            let _ = old.0.shutdown(std::net::Shutdown::Both);
        }
    }
}

/// What one attempt to open a stream gave.
enum Attempt {
    Open(Socket),
    /// The endpoint does not speak the stream protocol here.
    Unsupported,
    /// Not now (refused, reset, restarting): try again.
    Retry(Error),
    /// The peer's instance does not exist yet (503 with `Retry-After`):
    /// try again for up to the startup timeout.
    NotYet(Error),
    /// Never (bad token, ended instance, ...).
    Refused(Error),
}

/// One stream to a peer instance, opened again when it breaks.
///
/// A standard send completes as `EAGER_BELOW` says; acknowledgements come
/// later, batched. Every message is kept until acknowledged: if the stream
/// breaks (connection reset, refused while the endpoint restarts, a frame
/// cut off), a background thread connects again and sends what is
/// unacknowledged once more, with the same sequence numbers; the receiver
/// drops the copies it already has. Meanwhile sends queue, so no caller
/// waits for a reconnection. Only when the peer stays unreachable for the
/// failure timeout, or refuses for good, do the unacknowledged sends fail —
/// never silently: completed ones land in `undelivered` — and `gone` is told.
pub struct Link {
    dest: u32,
    target: Target,
    conn: Mutex<Conn>,
    /// Writes waiting for the background writer, in send order.
    writes: Mutex<Writes>,
    pending: Mutex<BTreeMap<u64, Pending>>,
    broken: Mutex<Option<Error>>,
    in_flight: Arc<InFlight>,
    undelivered: Undelivered,
    gone: OnGone,
    /// `BACKGROUND_FROM`, or less on a same-host stream.
    background_from: AtomicUsize,
    /// The stream takes payloads by reference (`net::pull`): a frame that
    /// goes so is small on the stream, written at once whatever its length.
    pulls: AtomicBool,
}

/// `host:port` of an endpoint URL, the path its upgrade goes to (an
/// endpoint behind a relay has one, `/relay/NAME`, unless reached through
/// its tunnel), whether it is https, and its tunnel if pinned.
fn host_port(base: &str) -> Option<(String, String, bool, Option<Tunnel>)> {
    let u = url::parse(base).ok()?;
    let tunnel = u.tunnel();
    let path = if tunnel.is_some() { "" } else { u.path.trim_end_matches('/') };
    Some((u.authority(), path.to_string(), u.tls, tunnel))
}

impl Target {
    /// Connect: TCP, TLS (`net::tls_socket`; a tunnel's pumped through a
    /// local socket, `net::pump`);
    /// through the environment's proxy with `CONNECT` where it names one.
    /// Err of class ProcFailed: transient; any other: final (TLS refused).
    fn connect(&self) -> Result<Socket> {
        // Connecting runs on the runtime; this thread waits for it.
        let (addr, peer, tls, tunnel) = (self.addr.clone(), self.peer.clone(), self.tls, self.tunnel.clone());
        let (tx, rx) = std::sync::mpsc::channel();
        runtime().spawn(async move {
            let local = |e: std::io::Error| Error::new(ErrorClass::Intern, format!("cannot make a local socket: {e}"));
            let socket = if let Some(t) = tunnel {
                match tunnel::open(&t).await {
                    Ok(s) => pump(s).map_err(local),
                    Err(e) => Err(e),
                }
            } else if tls {
                match tls::connect(&addr, &peer).await {
                    Ok(tls) => tls_socket::take_over(tls.into_inner()).map(Socket::Tls).map_err(local),
                    Err(e) => Err(e),
                }
            } else {
                match proxy::open("http", &addr, &peer, true).await {
                    Ok(opened) => opened.tcp.into_std().and_then(|s| s.set_nonblocking(false).map(|()| Socket::Tcp(s))).map_err(local),
                    Err(e) => Err(e),
                }
            };
            let _ = tx.send(socket);
        });
        rx.recv().unwrap_or_else(|_| err(ErrorClass::Intern, "the connection task ended without an answer"))
    }

    /// Try once to open a stream (connect, upgrade).
    fn attempt(&self) -> Attempt {
        self.attempt_within(startup_timeout())
    }

    /// `attempt`, waiting up to `limit` for the upgrade's answer.
    fn attempt_within(&self, limit: Duration) -> Attempt {
        let mut s = match self.connect() {
            Ok(s) => s,
            Err(e) if e.class == ErrorClass::ProcFailed => return Attempt::Retry(e),
            // A proxy that will not tunnel to an http peer (many allow CONNECT
            // only to port 443): stores, which it forwards, take over.
            Err(_) if !self.tls && self.tunnel.is_none() && matches!(proxy::for_url("http", &self.addr), Ok(Some(_))) => {
                return Attempt::Unsupported
            }
            Err(e) => return Attempt::Refused(e),
        };
        s.set_nodelay();
        let lost = |e: std::io::Error| {
            Attempt::Retry(Error::new(ErrorClass::ProcFailed, format!("{}: stream negotiation failed: {e}", self.peer)))
        };
        let asked = Instant::now();
        let offer = if self.local.load(Ordering::Relaxed) { format!("{}: {}\r\n", local::H_LOCAL, local::host()) } else { String::new() };
        if let Err(e) = s.write_all(format!("{}{offer}\r\n", self.head).as_bytes()) {
            return lost(e);
        }
        // A peer that took the connection but does not answer within the
        // startup timeout (a link that black-holes) is a transient failure
        // like a refused one, not a wait for ever: the sender, or the
        // reconnecting thread, tries again until the link is given up. Not
        // the failure timeout: an endpoint answers an upgrade once the
        // instance is ready, which may wait for its process to boot.
        if let Err(e) = s.set_read_timeout(Some(limit)) {
            return lost(e);
        }
        // Read the answer's head byte by byte: nothing after it may be consumed.
        let mut answer = Vec::new();
        let mut byte = [0u8; 1];
        while !answer.ends_with(b"\r\n\r\n") {
            if answer.len() > 16 * 1024 {
                return Attempt::Unsupported;
            }
            if let Err(e) = s.read_exact(&mut byte) {
                return lost(e);
            }
            answer.push(byte[0]);
        }
        let head = Head::parse(&answer, 64 * 1024);
        if head.status == StatusCode::SWITCHING_PROTOCOLS {
            if let Err(e) = s.set_read_timeout(None) {
                return lost(e);
            }
            // The server's session tickets came before its answer: the
            // stream's records are its own now.
            if let Socket::Tls(t) = &s {
                if let Err(e) = t.own_records() {
                    return lost(e);
                }
            }
            rtt::record(asked.elapsed());
            if head.local && !offer.is_empty() {
                return match local::offer(&mut s, failure_timeout()) {
                    Ok(l) => Attempt::Open(Socket::Local(l)),
                    Err(e) => {
                        // The next attempt goes over the network.
                        self.local.store(false, Ordering::Relaxed);
                        Attempt::Retry(Error::new(ErrorClass::ProcFailed, format!("{}: same-host channel failed: {e}", self.peer)))
                    }
                };
            }
            return Attempt::Open(s);
        }
        let (status, retry_after) = (head.status, head.retry_after);
        let mut body = || {
            let mut body = vec![0u8; head.content_length];
            let _ = BufReader::new(&mut s).read_exact(&mut body);
            error_from_response(status, &body, &self.peer)
        };
        match status {
            StatusCode::SERVICE_UNAVAILABLE if retry_after => Attempt::NotYet(body()),
            // Busy, restarting, or a proxy between us that lost the peer.
            StatusCode::SERVICE_UNAVAILABLE | StatusCode::TOO_MANY_REQUESTS | StatusCode::BAD_GATEWAY | StatusCode::GATEWAY_TIMEOUT => {
                Attempt::Retry(body())
            }
            StatusCode::NOT_FOUND | StatusCode::METHOD_NOT_ALLOWED => Attempt::Unsupported,
            // A refusal a store would meet as well (token, rank, ended instance).
            s if s.is_client_error() => Attempt::Refused(body()),
            _ => Attempt::Unsupported,
        }
    }

    /// Open a stream, trying again until `deadline` while the failure is
    /// transient, or until `stop` says the link is given up.
    fn open(&self, mut deadline: Instant, stop: impl Fn() -> Option<Error>) -> Result<Option<Socket>> {
        let mut pause = Duration::from_millis(2);
        let mut not_yet_since: Option<Instant> = None;
        loop {
            let e = match self.attempt() {
                Attempt::Open(s) => return Ok(Some(s)),
                Attempt::Unsupported => return Ok(None),
                Attempt::Refused(e) => return Err(e),
                Attempt::Retry(e) => e,
                Attempt::NotYet(e) => {
                    let since = *not_yet_since.get_or_insert_with(Instant::now);
                    deadline = deadline.max(since + startup_timeout());
                    e
                }
            };
            if let Some(e) = stop() {
                return Err(e);
            }
            if Instant::now() + pause > deadline {
                return Err(e);
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(100));
        }
    }
}

impl Link {
    /// Open a stream to `dest` at `base`. `Ok(None)`: the endpoint does not
    /// speak the stream protocol here; use stores instead. If the first
    /// attempt meets a transient failure the link starts down, reconnecting
    /// in the background, and sends queue.
    #[allow(clippy::too_many_arguments)]
    pub fn connect(
        base: &str,
        domain: &str,
        dest: u32,
        source: u32,
        token: &str,
        in_flight: Arc<InFlight>,
        undelivered: Undelivered,
        gone: OnGone,
    ) -> Result<Option<Arc<Link>>> {
        let Some((addr, path, tls, tunnel)) = host_port(base) else { return Ok(None) };
        let head = format!(
            "POST {path}/domains/{domain}/ranks/{dest}/stream HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\n\
             {}: {source}\r\nConnection: upgrade\r\nUpgrade: {PROTOCOL}\r\nContent-Length: 0\r\n",
            frame::H_SOURCE
        );
        // Through a relay's tunnel the peer is elsewhere; else an endpoint on this host may take it.
        let local = AtomicBool::new(tunnel.is_none() && config::local_channel() && !local::host().is_empty());
        let target = Target { addr, tls, tunnel, peer: format!("rank {dest} at {base}"), head, local };
        // The sender waits for the first answer no longer than the failure
        // timeout: an answer slower than that (a booting peer, or a link that
        // black-holes) is waited for in the background while sends queue,
        // and the sender's receives see a dead peer as `rank::liveness` finds it.
        let first = match target.attempt_within(failure_timeout()) {
            Attempt::Open(s) => Some(s),
            Attempt::Unsupported => return Ok(None),
            Attempt::Refused(e) => return Err(e),
            Attempt::Retry(_) | Attempt::NotYet(_) => None,
        };
        let link = Arc::new(Link {
            dest,
            target,
            conn: Mutex::new(Conn { stream: None, generation: 0, reconnecting: false }),
            writes: Mutex::default(),
            pending: Mutex::new(BTreeMap::new()),
            broken: Mutex::new(None),
            in_flight,
            undelivered,
            gone,
            background_from: BACKGROUND_FROM.into(),
            pulls: AtomicBool::new(false),
        });
        let mut conn = link.conn.lock();
        match first {
            Some(s) => link.install(&mut conn, s)?,
            None => link.start_reconnect(&mut conn),
        }
        drop(conn);
        Ok(Some(link))
    }

    /// Make `s` the current stream, with a thread reading its acknowledgements.
    fn install(self: &Arc<Self>, conn: &mut Conn, s: Socket) -> Result<()> {
        let reader = s.try_clone().map_err(|e| Error::new(ErrorClass::Intern, format!("cannot clone a socket: {e}")))?;
        let from = if let Socket::Local(l) = &s { BACKGROUND_FROM.min(l.capacity() / 2) } else { BACKGROUND_FROM };
        self.background_from.store(from, Ordering::Relaxed);
        self.pulls.store(matches!(&s, Socket::Local(l) if l.pulls() == local::Pulls::Sends), Ordering::Relaxed);
        conn.generation += 1;
        conn.stream = Some(Polled(s));
        let (me, generation) = (self.clone(), conn.generation);
        std::thread::Builder::new()
            .name(format!("mpiws-acks-{}", self.dest))
            .spawn(move || me.read_acks(reader, generation))
            .map_err(|e| Error::new(ErrorClass::Intern, format!("cannot start a thread: {e}")))?;
        Ok(())
    }

    /// Close the stream (the instance ended): the peer's reader sees the end.
    pub fn close(&self) {
        self.fail(Error::new(ErrorClass::ProcFailed, format!("the sending instance ended before rank {} acknowledged", self.dest)));
        self.conn.lock().down();
    }

    pub fn is_broken(&self) -> bool {
        self.broken.lock().is_some()
    }

    /// Why the link was given up, if it was.
    pub fn failure(&self) -> Option<Error> {
        self.broken.lock().clone()
    }

    /// Send one message. `completion` completes as `EAGER_BELOW` says, or
    /// for a synchronous send when the receiver matched the message. A large
    /// message is written by a background thread unless `inline`. `track`
    /// is told when the receiver acknowledges storing it, and matching it (a
    /// standard send that asks for that goes as synchronous on the wire).
    pub fn send(self: &Arc<Self>, env: &Envelope, chunks: Vec<Bytes>, completion: Arc<Completion>, inline: bool, track: Option<Tracking>) {
        let seq = env.seq.expect("stream messages are sequenced");
        let len: usize = chunks.iter().map(|c| c.len()).sum();
        let eager = !env.sync && len < EAGER_BELOW;
        let tell_match = !env.sync && track.as_ref().is_some_and(|t| t.matched.is_some());
        // Asked to tell the match, a standard send goes synchronous on the wire.
        let wire = if tell_match { Cow::Owned(Envelope { sync: true, ..env.clone() }) } else { Cow::Borrowed(env) };
        let mut header = frame::encode_message(&wire, len as u64, !eager && !env.sync);
        let frame = if len <= COALESCE_UP_TO {
            for c in &chunks {
                header.extend_from_slice(c);
            }
            vec![Bytes::from(header)]
        } else {
            std::iter::once(Bytes::from(header)).chain(chunks).collect()
        };
        let frame = Arc::new(frame);
        {
            // Under the pending lock, so `fail` cannot slip in between.
            let mut pending = self.pending.lock();
            if let Some(e) = self.broken.lock().clone() {
                drop(pending);
                if let Some(t) = &track {
                    t.settle(&Err(e.clone()));
                }
                completion.complete(Err(e));
                return;
            }
            self.in_flight.started();
            pending.insert(seq, Pending { completion: completion.clone(), sync: env.sync, track, frame: frame.clone() });
        }
        let background = len >= self.background_from.load(Ordering::Relaxed)
            && !inline
            && !(self.pulls.load(Ordering::Relaxed) && pull::goes_by_reference(&frame));
        let me = self.clone();
        let send = move || {
            // A failure here settled the pending message already (`fail`).
            if me.transmit(&frame).is_ok() && eager {
                completion.complete(Ok(Outcome::Sent));
            }
        };
        let mut writes = self.writes.lock();
        if writes.busy || background {
            writes.queue.push_back(Box::new(send));
            if !writes.busy {
                writes.busy = true;
                let me = self.clone();
                runtime().spawn_blocking(move || me.write_queued());
            }
        } else {
            // Still under the lock: no background write starts before this one.
            send();
        }
    }

    /// The background writer: the queued writes, in order, until none is left.
    fn write_queued(&self) {
        loop {
            let next = {
                let mut writes = self.writes.lock();
                let next = writes.queue.pop_front();
                writes.busy = next.is_some();
                next
            };
            match next {
                Some(write) => write(),
                None => return,
            }
        }
    }

    /// Write a frame on the current stream. If that fails, or the link is
    /// down, the frame (already pending) is left to the reconnecting thread,
    /// which sends every unacknowledged frame: Ok either way, unless the
    /// link was given up.
    fn transmit(self: &Arc<Self>, frame: &[Bytes]) -> Result<()> {
        let mut conn = self.conn.lock();
        if let Some(e) = self.broken.lock().clone() {
            return Err(e);
        }
        if let Some(s) = &mut conn.stream {
            // On a same-host stream that takes them, a large payload by reference (`net::pull`).
            let by_reference =
                matches!(&s.0, Socket::Local(l) if l.pulls() == local::Pulls::Sends).then(|| pull::by_reference(frame)).flatten();
            let written = match by_reference {
                Some(header) => s.write_all(&header),
                None => frame.iter().try_for_each(|b| s.write_all(b)),
            };
            if written.is_ok() {
                return Ok(());
            }
        }
        self.start_reconnect(&mut conn);
        Ok(())
    }

    /// Take the stream down and, unless a thread is at it already, open a
    /// new one in the background (`reconnect`).
    fn start_reconnect(self: &Arc<Self>, conn: &mut Conn) {
        conn.down();
        if conn.reconnecting {
            return;
        }
        conn.reconnecting = true;
        let me = self.clone();
        let started = std::thread::Builder::new().name(format!("mpiws-reconnect-{}", self.dest)).spawn(move || me.reconnect());
        if let Err(e) = started {
            conn.reconnecting = false;
            self.fail_soon(Error::new(ErrorClass::Intern, format!("cannot start a thread: {e}")));
        }
    }

    /// Open a new stream and send everything unacknowledged on it, in order;
    /// when that cannot be done within the failure timeout, give the link up.
    /// Sends go on meanwhile: a frame pending before the new stream is
    /// installed is written here, one after by its sender (both, at worst:
    /// the receiver drops the copy).
    fn reconnect(self: Arc<Self>) {
        let deadline = Instant::now() + failure_timeout();
        let outcome: Result<()> = loop {
            let s = match self.target.open(deadline, || self.broken.lock().clone()) {
                Ok(Some(s)) => s,
                Ok(None) => break err(ErrorClass::ProcFailed, format!("{} no longer accepts streams", self.target.peer)),
                Err(e) => break Err(e),
            };
            let mut conn = self.conn.lock();
            if let Err(e) = self.install(&mut conn, s) {
                break Err(e);
            }
            let frames: Vec<Arc<Vec<Bytes>>> = self.pending.lock().values().map(|p| p.frame.clone()).collect();
            let w = conn.stream.as_mut().expect("just installed");
            if frames.iter().all(|f| f.iter().try_for_each(|b| w.write_all(b)).is_ok()) {
                conn.reconnecting = false;
                return;
            }
            conn.down();
            if Instant::now() >= deadline {
                break err(ErrorClass::ProcFailed, format!("stream to {} keeps breaking", self.target.peer));
            }
        };
        self.conn.lock().reconnecting = false;
        if let Err(e) = outcome {
            let given_up = self.broken.lock().is_some(); // closed meanwhile: not the peer's fault
            self.fail(e.clone());
            if !given_up && e.class == ErrorClass::ProcFailed {
                (self.gone)(e);
            }
        }
    }

    /// `fail`, from a thread that may hold the connection lock.
    fn fail_soon(self: &Arc<Self>, e: Error) {
        let me = self.clone();
        runtime().spawn_blocking(move || me.fail(e));
    }

    /// Message `seq` was withdrawn (its send timed out): never send it again;
    /// its send fails, if it had not completed.
    pub fn forget(&self, seq: u64) {
        if let Some(p) = self.pending.lock().remove(&seq) {
            self.settle(p, err(ErrorClass::Timeout, format!("the message to {} was withdrawn", self.target.peer)));
        }
    }

    /// Ask the receiver to acknowledge everything it stored (before a flush).
    pub fn request_ack(&self) {
        if self.pending.lock().is_empty() {
            return;
        }
        // Not written if the stream is down: it is asked again (`flush`).
        if let Some(s) = &mut self.conn.lock().stream {
            let _ = s.write_all(&frame::encode_ack_request());
        }
    }

    fn settle(&self, p: Pending, outcome: Result<()>) {
        if let Some(t) = &p.track {
            t.settle(&outcome);
        }
        let first = p.completion.complete(outcome.clone().map(|()| Outcome::Sent));
        if let (false, Err(e)) = (first, outcome) {
            // It had completed (written, eager): the failure is told later.
            self.undelivered.lock().get_or_insert(e);
        }
        self.in_flight.ended();
    }

    fn read_acks(self: Arc<Self>, s: Socket, generation: u64) {
        let mut r = BufReader::new(s);
        loop {
            let mut h = [0u8; ACK_HEADER];
            if r.read_exact(&mut h).is_err() {
                break;
            }
            let (kind, seq, class, tlen) = frame::decode_ack_header(&h);
            // Keep at most 1 MiB of an error's text, but read all of it: the next ack follows it.
            let mut text = vec![0u8; tlen.min(1 << 20) as usize];
            let rest = tlen as u64 - text.len() as u64;
            if r.read_exact(&mut text).is_err() || std::io::copy(&mut (&mut r).take(rest), &mut std::io::sink()).ok() != Some(rest) {
                break;
            }
            let settled: Vec<(Pending, Result<()>)> = {
                let mut pending = self.pending.lock();
                match kind {
                    ACK_STORED => {
                        // Stored, all of them, taken out at once: sends wait
                        // for this lock, and an acknowledgement settles
                        // hundreds. Those that await a match stay, told
                        // "stored" here, and wait on for it.
                        let rest = match seq.checked_add(1) {
                            Some(next) => pending.split_off(&next),
                            None => BTreeMap::new(),
                        };
                        let mut stored = std::mem::replace(&mut *pending, rest);
                        let waiting: Vec<u64> = stored.iter().filter(|(_, p)| p.awaits_match()).map(|(s, _)| *s).collect();
                        for s in waiting {
                            let p = stored.remove(&s).expect("listed just now");
                            p.stored();
                            pending.insert(s, p);
                        }
                        drop(pending);
                        stored
                            .into_values()
                            .map(|p| {
                                p.stored();
                                (p, Ok(()))
                            })
                            .collect()
                    }
                    ACK_MATCHED => pending.remove(&seq).map(|p| (p, Ok(()))).into_iter().collect(),
                    ACK_ERROR => {
                        let e = Error::new(ErrorClass::from_code(class as i64), String::from_utf8_lossy(&text).to_string());
                        pending.remove(&seq).map(|p| (p, Err(e))).into_iter().collect()
                    }
                    _ => break,
                }
            };
            for (p, outcome) in settled {
                self.settle(p, outcome);
            }
        }
        self.broke(generation);
    }

    /// Stream `generation` ended or broke: connect again if messages are
    /// unacknowledged, else the next send will.
    fn broke(self: &Arc<Self>, generation: u64) {
        let mut conn = self.conn.lock();
        if conn.generation != generation || self.is_broken() {
            return; // already replaced, or given up
        }
        if self.pending.lock().is_empty() {
            conn.down();
            return;
        }
        self.start_reconnect(&mut conn);
    }

    /// Give the link up: every unacknowledged send fails (none is lost silently).
    fn fail(&self, e: Error) {
        let pending: Vec<(u64, Pending)> = {
            let mut pending = self.pending.lock();
            self.broken.lock().get_or_insert(e.clone());
            std::mem::take(&mut *pending).into_iter().collect()
        };
        if let Some(mut c) = self.conn.try_lock() {
            c.down();
        }
        for (_, p) in pending {
            self.settle(p, Err(e.clone()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An endpoint that accepts the stream's connection and never answers
    /// its upgrade: the attempt ends, transient, at its limit (the startup
    /// timeout; it waited for ever, and a blocking send with it).
    #[test]
    fn an_upgrade_nobody_answers_is_a_transient_failure_not_a_hang() {
        let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = silent.local_addr().unwrap().to_string();
        let held = std::thread::spawn(move || {
            let kept = silent.accept().unwrap().0; // accepted, never answered
            std::thread::sleep(Duration::from_secs(30));
            drop(kept);
        });
        let head = format!("POST /domains/d/ranks/1/stream HTTP/1.1\r\nHost: {addr}\r\n");
        let target = Target { addr, tls: false, tunnel: None, peer: "rank 1".into(), head, local: false.into() };
        let started = Instant::now();
        let limit = Duration::from_millis(500);
        match target.attempt_within(limit) {
            Attempt::Retry(e) => assert_eq!(e.class, ErrorClass::ProcFailed, "{}", e.message),
            _ => panic!("not a transient failure"),
        }
        let took = started.elapsed();
        assert!(took >= limit && took < limit * 4, "{took:?}");
        drop(held);
    }

    #[test]
    fn a_base_url_gives_its_address_and_path() {
        let hp = |u: &str| host_port(u).map(|(a, p, tls, t)| (a, p, tls, t.map(|t| t.name)));
        assert_eq!(hp("http://10.0.0.1:80"), Some(("10.0.0.1:80".into(), "".into(), false, None)));
        assert_eq!(hp("https://[::1]:8443/"), Some(("[::1]:8443".into(), "".into(), true, None)));
        assert_eq!(hp("https://relay:443/relay/lab"), Some(("relay:443".into(), "/relay/lab".into(), true, None)));
        // pinned: through the tunnel, at the endpoint's own paths
        let pinned = "https://relay:443/relay/lab#sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU";
        assert_eq!(hp(pinned), Some(("relay:443".into(), "".into(), true, Some("lab".into()))));
        assert_eq!(hp("ftp://x"), None);
    }
}
