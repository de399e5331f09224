//! A service instance: one rank of one domain on this endpoint. It owns the
//! mailbox for that rank, the send sequence numbers towards every peer, and
//! the state the service interface reports (running, done, failed, ...).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use parking_lot::{Condvar, Mutex};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use crate::completion::{Completion, Outcome, RecvBuffer, Tracking};
use crate::direct::frame::{Envelope, Payload};
use crate::direct::inbound::Progress;
use crate::direct::mailbox::{Arrival, Mailbox, Message, Pattern, RecvId};
use crate::direct::stream::{InFlight, Link, Undelivered};
use crate::direct::transport::Transport;
use crate::domain::{liveness, Binding};
use crate::error::{Error, ErrorClass, Result};
use crate::mpi::collective::schedule::{fault_of, REVOKE_TAG};
use crate::mpi::comm::COLLECTIVE_BIT;
use crate::mpi::window::is_rma;
use crate::runtime::runtime;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum InstanceState {
    /// Created by *run*; the service has not started yet.
    Starting,
    Running,
    Done,
    Failed,
    Cancelled,
}

impl InstanceState {
    pub fn is_final(self) -> bool {
        matches!(self, InstanceState::Done | InstanceState::Failed | InstanceState::Cancelled)
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ErrorReport {
    pub class: i32,
    pub name: String,
    pub message: String,
    pub traceback: String,
}

/// What the status operation reports.
#[derive(Debug, Clone, Serialize)]
pub struct Status {
    pub domain: String,
    pub rank: u32,
    pub service: String,
    pub state: InstanceState,
    pub result: Option<serde_json::Value>,
    pub error: Option<ErrorReport>,
}

/// A posted receive: where its outcome goes, and the caller's buffer if it
/// gave one. Buffers are only dropped with no lock held (they may belong to
/// Python, and releasing one takes the GIL).
struct Waiting {
    completion: Arc<Completion>,
    buffer: Option<Box<dyn RecvBuffer>>,
}

/// A message being read straight into a receive's buffer (`Instance::claim`).
/// Kept track of so that a stream cut off mid-read loses nothing: the sender
/// sends the message again, and the retry goes to the same receive.
enum Claim {
    Reading,
    /// A retry came while the first copy was still being read.
    Retry(Message),
    /// The read was cut off: the receive waits for the retry.
    Cut(Waiting),
}

struct Inbox {
    mailbox: Mailbox,
    waiting: HashMap<RecvId, Waiting>,
    /// By (source, sequence number).
    claims: HashMap<(u32, u64), Claim>,
    /// Set when the instance ended: every later operation fails with it.
    closed: Option<Error>,
    /// Peers found gone (`domain::liveness`), and why.
    gone: HashMap<u32, Error>,
    /// Collective contexts revoked after a failure (`Schedule::revoke`), and why.
    revoked: HashMap<u64, Error>,
}

impl Inbox {
    /// Why a receive with `pattern` can never be satisfied, if it cannot: its
    /// source is gone, or (any source) every other rank is.
    fn hopeless(&self, pattern: &Pattern, size: u32) -> Option<Error> {
        if let Some(e) = self.revoked.get(&pattern.context) {
            return Some(e.clone());
        }
        unsatisfiable(&self.gone, size, pattern).cloned()
    }

    /// Revoke a collective context: its posted receives are withdrawn (to be
    /// failed), and later ones fail at once.
    fn revoke(&mut self, context: u64, why: Error) -> Vec<(Waiting, Error)> {
        if self.revoked.contains_key(&context) {
            return Vec::new();
        }
        let why = Error::new(why.class, format!("collectives on this communicator were revoked after a failure: {}", why.message));
        self.revoked.insert(context, why.clone());
        let ids = self.mailbox.withdraw(|p| p.context == context);
        ids.into_iter().filter_map(|id| self.waiting.remove(&id)).map(|w| (w, why.clone())).collect()
    }
}

/// Why a receive with `pattern` can never be matched, given the peers that
/// are `gone`: its source is gone, or (any source) every other rank is.
fn unsatisfiable<'a>(gone: &'a HashMap<u32, Error>, size: u32, pattern: &Pattern) -> Option<&'a Error> {
    match pattern.source {
        Some(s) => gone.get(&s),
        None if gone.len() + 1 >= size as usize => gone.values().next(),
        None => None,
    }
}

/// Remove the receives whose claimed message was cut off, from the sources
/// `doomed` picks: no retry will come for them.
fn take_cut(claims: &mut HashMap<(u32, u64), Claim>, doomed: impl Fn(u32) -> bool) -> Vec<Waiting> {
    let keys: Vec<(u32, u64)> = claims.iter().filter(|((s, _), c)| doomed(*s) && matches!(c, Claim::Cut(_))).map(|(k, _)| *k).collect();
    keys.into_iter()
        .filter_map(|k| match claims.remove(&k) {
            Some(Claim::Cut(w)) => Some(w),
            _ => None,
        })
        .collect()
}

/// Whether `env` is a revocation (`Schedule::revoke`): the reserved tag on a
/// collective context.
fn is_revoke(env: &Envelope) -> bool {
    env.tag == REVOKE_TAG && env.context & COLLECTIVE_BIT != 0
}

/// How this instance reaches one peer.
enum Channel {
    Stream(Arc<Link>),
    Stores,
}

/// Whether to negotiate streams (`MPIWS_STREAMS=0` keeps to HTTP stores).
fn streams_enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var("MPIWS_STREAMS").map_or(true, |v| v != "0"))
}

pub struct Instance {
    pub binding: Binding,
    /// The whole domain runs on this one host, with more ranks than cores:
    /// the same for every rank, so collectives may choose algorithms by it.
    pub crowded: bool,
    inbox: Mutex<Inbox>,
    arrived: Condvar,
    next_recv_id: AtomicU64,
    send_seq: Vec<AtomicU64>,
    status: watch::Sender<Status>,
    in_flight: Arc<InFlight>,
    channels: Vec<Mutex<Option<Channel>>>,
    /// Per peer: a failure of a send that had already completed.
    undelivered: Vec<Undelivered>,
    /// Reads the streams peers open to this instance (started on the first).
    progress: Mutex<Option<Arc<Progress>>>,
    /// Broadcast forwards still being written (checked by `flush`).
    forwards: Mutex<Vec<(u32, Arc<Completion>)>>,
    transport: Arc<Transport>,
    /// Whether any peer is gone (spares sends a lock while none is).
    any_gone: AtomicBool,
    /// Messages filed whose forwards are not registered in `forwards` yet.
    forwarding: AtomicUsize,
    /// This rank's RMA windows: window traffic is applied there as it is
    /// filed, with no call from the application (`mpi::window`).
    pub windows: crate::mpi::window::Registry,
}

/// The bound on an instance's unexpected messages, in bytes
/// (`MPIWS_MAX_UNEXPECTED`, default 256 MiB).
pub fn max_unexpected() -> usize {
    static MAX: OnceLock<usize> = OnceLock::new();
    *MAX.get_or_init(|| std::env::var("MPIWS_MAX_UNEXPECTED").ok().and_then(|v| v.parse().ok()).unwrap_or(256 << 20))
}

/// How often a flush asks its streams again for acknowledgements.
const REASK: Duration = Duration::from_millis(50);

fn undelivered(dest: u32, e: Error) -> Error {
    Error::new(e.class, format!("a message to rank {dest} was not delivered: {}", e.message))
}

pub enum Delivered {
    Filed,
    Duplicate,
}

impl Instance {
    pub fn new(binding: Binding, transport: Arc<Transport>) -> Arc<Self> {
        let status = Status {
            domain: binding.domain.clone(),
            rank: binding.rank,
            service: binding.service.clone(),
            state: InstanceState::Starting,
            result: None,
            error: None,
        };
        let size = binding.size();
        let local = binding.local_ranks();
        let oversubscribed = crate::completion::fit_spin(local);
        let instance = Arc::new(Instance {
            crowded: local == size as usize && oversubscribed,
            send_seq: (0..size).map(|_| AtomicU64::new(0)).collect(),
            binding,
            inbox: Mutex::new(Inbox {
                mailbox: Mailbox::new(),
                waiting: HashMap::new(),
                closed: None,
                gone: HashMap::new(),
                revoked: HashMap::new(),
                claims: HashMap::new(),
            }),
            arrived: Condvar::new(),
            next_recv_id: AtomicU64::new(1),
            status: watch::channel(status).0,
            in_flight: Arc::new(InFlight::default()),
            channels: (0..size).map(|_| Mutex::new(None)).collect(),
            undelivered: (0..size).map(|_| Undelivered::default()).collect(),
            forwards: Mutex::new(Vec::new()),
            progress: Mutex::new(None),
            transport,
            any_gone: AtomicBool::new(false),
            forwarding: AtomicUsize::new(0),
            windows: Default::default(),
        });
        liveness::watch(&instance);
        instance
    }

    pub fn transport(&self) -> &Arc<Transport> {
        &self.transport
    }

    pub fn rank(&self) -> u32 {
        self.binding.rank
    }

    pub fn size(&self) -> u32 {
        self.binding.size()
    }

    // ---- receiving -------------------------------------------------------

    /// File a message that arrived for this instance.
    pub fn deliver(self: &Arc<Self>, msg: Message) -> Result<Delivered> {
        let tree = if msg.env.forward.is_empty() {
            None
        } else {
            let list = &msg.env.forward;
            if list[0] != self.rank() || list.len() > self.size() as usize || list.iter().any(|&w| w >= self.size()) {
                let e = format!("invalid broadcast forward list {list:?} at rank {}", self.rank());
                return Err(Error::new(ErrorClass::Arg, e));
            }
            Some((msg.env.clone(), msg.payload.clone()))
        };
        let revoke = is_revoke(&msg.env).then(|| Pattern { context: msg.env.context, source: Some(msg.env.source), tag: Some(REVOKE_TAG) });
        let (matched, revoked, rma) = {
            let mut inbox = self.inbox.lock();
            if let Some(e) = &inbox.closed {
                return Err(e.clone());
            }
            // Window traffic holds its place in its sender's order, then is
            // taken out for the windows (this one, or one it released).
            let rma = is_rma(&msg.env) || inbox.mailbox.holds_early(msg.env.source);
            let matched = match inbox.mailbox.arrive(msg) {
                Arrival::Duplicate(dup) => {
                    let cut = Self::retried(&mut inbox, dup);
                    drop(inbox);
                    if let Some((w, m)) = cut {
                        Self::hand_over(&w.completion, m);
                    }
                    return Ok(Delivered::Duplicate);
                }
                Arrival::Filed(matched) => Self::take_waiting(&mut inbox, matched),
            };
            if tree.is_some() {
                // Counted before the message can be taken: the application
                // may take it, run ahead and flush before `forward` is done,
                // and its flush must wait for the forwards.
                self.forwarding.fetch_add(1, Ordering::AcqRel);
            }
            // Filed first (it holds a place in its sender's order), then taken back.
            let revoked = match revoke.and_then(|p| inbox.mailbox.take(&p)) {
                Some(m) => {
                    let mut body = vec![0; m.payload.len()];
                    m.payload.copy_to(&mut body);
                    let why = fault_of(&body).unwrap_or_else(|| Error::new(ErrorClass::ProcFailed, "a rank failed"));
                    inbox.revoke(m.env.context, why)
                }
                None => Vec::new(),
            };
            let rma = if rma { inbox.mailbox.take_where(is_rma) } else { Vec::new() };
            (matched, revoked, rma)
        };
        for (w, why) in revoked {
            w.completion.complete(Err(why));
        }
        for m in rma {
            self.windows.handle(self, m.env.source, m.env.context, m.payload);
        }
        // Forward first: once a receive has the message its application may
        // run ahead and end, and the forwards must already be on their way.
        if let Some((env, payload)) = tree {
            self.forward(env, payload);
            self.forwarding.fetch_sub(1, Ordering::AcqRel);
        }
        self.arrived.notify_all();
        for (w, m) in matched {
            Self::hand_over(&w.completion, m);
        }
        Ok(Delivered::Filed)
    }

    /// A retry of a message that arrived before: kept for a receive reading
    /// the first copy in case that read is cut off; handed to the receive
    /// whose read was cut off (returned); else a synchronous sender is told
    /// when the first copy is matched.
    fn retried(inbox: &mut Inbox, mut dup: Message) -> Option<(Waiting, Message)> {
        let key = (dup.env.source, dup.env.seq.unwrap_or(0));
        match inbox.claims.remove(&key) {
            None => {
                inbox.mailbox.rejoin(dup);
                None
            }
            Some(Claim::Cut(w)) => Some((w, dup)),
            Some(Claim::Reading) => {
                inbox.claims.insert(key, Claim::Retry(dup));
                None
            }
            Some(Claim::Retry(mut older)) => {
                dup.on_match.append(&mut older.on_match);
                inbox.claims.insert(key, Claim::Retry(dup));
                None
            }
        }
    }

    /// Pass a broadcast message on down its tree: `env.forward` lists the
    /// world ranks of this rank's binomial subtree, this rank first; the
    /// subtree at offset m (a power of two) is `[m, 2m)`. Largest first.
    fn forward(self: &Arc<Self>, env: Envelope, payload: Payload) {
        let list = &env.forward;
        let n = list.len();
        let mut m = n.next_power_of_two() >> 1;
        while m > 0 {
            if m < n {
                let sub = list[m..(2 * m).min(n)].to_vec();
                let dest = sub[0];
                let fwd = Envelope { source: self.rank(), seq: None, sync: false, forward: sub, ..env.clone() };
                let c = self.send(dest, fwd, payload.chunks.clone(), false, None);
                let mut pending = self.forwards.lock();
                pending.push((dest, c));
                // Settle the finished ones: a failure is reported like any
                // undelivered message, by the next send to that rank or flush.
                pending.retain(|(dest, c)| {
                    if !c.is_done() {
                        return true;
                    }
                    if let Some(Err(e)) = c.take() {
                        self.undelivered[*dest as usize].lock().get_or_insert(e);
                    }
                    false
                });
            }
            m >>= 1;
        }
    }

    /// A message from `source` with sequence number `seq` was refused by
    /// this endpoint (and reported to its sender): later ones go on.
    pub fn skip(&self, source: u32, seq: Option<u64>) {
        let Some(seq) = seq else { return };
        let matched = {
            let mut inbox = self.inbox.lock();
            let matched = inbox.mailbox.skip(source, seq);
            Self::take_waiting(&mut inbox, matched)
        };
        self.arrived.notify_all();
        for (w, m) in matched {
            Self::hand_over(&w.completion, m);
        }
    }

    /// The reader of this instance's incoming streams (started on first use).
    pub fn progress(&self) -> std::io::Result<Arc<Progress>> {
        let mut p = self.progress.lock();
        if let Some(p) = &*p {
            return Ok(p.clone());
        }
        let started = Progress::start()?;
        *p = Some(started.clone());
        Ok(started)
    }

    /// Wait up to `timeout` for a receive's completion; with the world rank
    /// it expects a message from, read that peer's stream in this thread
    /// while waiting (see `direct::inbound`). True once done.
    pub fn wait_for(&self, c: &Completion, source: Option<u32>, timeout: Option<Duration>) -> bool {
        self.wait_for_after(c, source, timeout, &mut || {})
    }

    /// `wait_for`, running `first` once: as soon as this thread reads the
    /// stream, or is about to wait another way (`Progress::wait_for_after`),
    /// or at the end if the wait needed neither.
    pub fn wait_for_after(&self, c: &Completion, source: Option<u32>, timeout: Option<Duration>, first: &mut dyn FnMut()) -> bool {
        let mut ran = false;
        let mut once = || {
            if !std::mem::replace(&mut ran, true) {
                first();
            }
        };
        let progress = self.progress.lock().clone();
        let done = match (source, progress) {
            (Some(s), Some(p)) => p.wait_for_after(c, s, timeout, &mut once),
            _ => {
                once();
                c.wait(timeout)
            }
        };
        once();
        done
    }

    fn take_waiting(inbox: &mut Inbox, matched: Vec<(RecvId, Message)>) -> Vec<(Waiting, Message)> {
        matched.into_iter().filter_map(|(id, m)| inbox.waiting.remove(&id).map(|w| (w, m))).collect()
    }

    fn hand_over(c: &Completion, mut m: Message) {
        m.matched();
        c.complete(Ok(Outcome::Received { env: m.env, payload: m.payload }));
    }

    /// Post a receive. The completion carries the message once one matches.
    /// With a `buffer`, a large message may be read straight into it.
    pub fn post_recv(&self, pattern: Pattern, buffer: Option<Box<dyn RecvBuffer>>) -> (RecvId, Arc<Completion>) {
        let id = self.next_recv_id.fetch_add(1, Ordering::Relaxed);
        let c = Completion::new();
        let found = {
            let mut inbox = self.inbox.lock();
            if let Some(e) = &inbox.closed {
                c.complete(Err(e.clone()));
                return (id, c);
            }
            let found = inbox.mailbox.post(id, pattern);
            if found.is_none() {
                if let Some(e) = inbox.hopeless(&pattern, self.size()) {
                    inbox.mailbox.cancel(id);
                    drop(inbox);
                    c.complete(Err(e));
                    return (id, c);
                }
                inbox.waiting.insert(id, Waiting { completion: c.clone(), buffer });
                return (id, c);
            }
            found
        };
        if let Some(m) = found {
            Self::hand_over(&c, m);
        }
        self.consumed(); // the message taken, or the one awaited, may free a parked stream
        (id, c)
    }

    /// For a message whose payload is still on the wire: the posted receive
    /// it goes to, if that receive has a buffer big enough to read it into.
    /// The caller reads the payload and completes the receive (`Placed`).
    pub fn claim(&self, env: &Envelope, len: usize) -> Option<(Arc<Completion>, Box<dyn RecvBuffer>)> {
        let (w, matched) = {
            let mut inbox = self.inbox.lock();
            if inbox.closed.is_some() {
                return None;
            }
            let Inbox { mailbox, waiting, .. } = &mut *inbox;
            let fits = |id: RecvId| waiting.get(&id).and_then(|w| w.buffer.as_ref()).is_some_and(|b| b.len() >= len);
            let (id, matched) = mailbox.claim(env, fits)?;
            let w = waiting.remove(&id)?;
            inbox.claims.insert((env.source, env.seq?), Claim::Reading);
            (w, Self::take_waiting(&mut inbox, matched))
        };
        for (w, m) in matched {
            Self::hand_over(&w.completion, m);
        }
        Some((w.completion, w.buffer?))
    }

    /// A claimed message was read in full: a retry that came meanwhile was
    /// matched with it.
    pub fn placed(&self, source: u32, seq: u64) {
        let claim = self.inbox.lock().claims.remove(&(source, seq));
        if let Some(Claim::Retry(mut m)) = claim {
            m.matched();
        }
    }

    /// A claimed message was cut off mid-read: its receive takes the retry
    /// (which may have come already), or fails if none can come.
    pub fn cut(&self, source: u32, seq: u64, completion: Arc<Completion>, buffer: Box<dyn RecvBuffer>) {
        let w = Waiting { completion, buffer: Some(buffer) };
        let mut inbox = self.inbox.lock();
        let doomed = inbox.closed.clone().or_else(|| inbox.gone.get(&source).cloned());
        if let Some(Claim::Retry(m)) = inbox.claims.remove(&(source, seq)) {
            drop(inbox);
            Self::hand_over(&w.completion, m);
        } else if let Some(e) = doomed {
            drop(inbox);
            w.completion.complete(Err(e));
        } else {
            inbox.claims.insert((source, seq), Claim::Cut(w));
        }
    }

    /// Withdraw a posted receive; true if it had not matched yet.
    pub fn cancel_recv(&self, id: RecvId) -> bool {
        let w = {
            let mut inbox = self.inbox.lock();
            if !inbox.mailbox.cancel(id) {
                return false;
            }
            inbox.waiting.remove(&id)
        };
        if let Some(w) = w {
            w.completion.complete(Ok(Outcome::Cancelled));
        }
        true
    }

    /// Envelope and size of the message a receive with `pattern` would take,
    /// waiting up to `timeout` for one (`Some(ZERO)`: do not wait).
    pub fn probe(&self, pattern: Pattern, timeout: Option<Duration>) -> Result<Option<(Envelope, usize)>> {
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut inbox = self.inbox.lock();
        loop {
            if let Some(m) = inbox.mailbox.probe(&pattern) {
                return Ok(Some((m.env.clone(), m.payload.len())));
            }
            if let Some(e) = &inbox.closed {
                return Err(e.clone());
            }
            match deadline {
                None => self.arrived.wait(&mut inbox),
                Some(d) => {
                    if Instant::now() >= d || self.arrived.wait_until(&mut inbox, d).timed_out() {
                        return Ok(None);
                    }
                }
            }
        }
    }

    /// Tell when a receive takes message `seq` from `source` (a sender's
    /// late "matched" watch, `direct::matched`): None if one did already;
    /// the receiver errs if the message is refused or this instance ends
    /// first (also asked after it ended: the mailbox still knows).
    pub fn watch_match(&self, source: u32, seq: u64) -> Option<tokio::sync::oneshot::Receiver<()>> {
        self.inbox.lock().mailbox.watch_match(source, seq)
    }

    /// Take back message `seq` from `source` unless a receive took it (its
    /// send timed out; `direct::withdraw`): true if withdrawn.
    pub fn take_back(&self, source: u32, seq: u64) -> bool {
        let (withdrawn, matched) = {
            let mut inbox = self.inbox.lock();
            let (withdrawn, matched) = inbox.mailbox.take_back(source, seq);
            (withdrawn, Self::take_waiting(&mut inbox, matched))
        };
        for (w, m) in matched {
            Self::hand_over(&w.completion, m);
        }
        self.consumed();
        withdrawn
    }

    /// Take a matching message now if there is one (matched probe + receive).
    pub fn take(&self, pattern: Pattern) -> Option<(Envelope, Payload)> {
        let mut m = self.inbox.lock().mailbox.take(&pattern)?;
        self.consumed();
        m.matched();
        Some((m.env, m.payload))
    }

    // ---- peers that are gone -------------------------------------------

    /// Peer `rank` is gone (`domain::liveness` found its instance ended or
    /// unreachable): receives that only it could satisfy fail now and from
    /// now on (what it sent before is still received), and sends to it fail.
    pub fn peer_gone(&self, rank: u32, why: Error) {
        let failed: Vec<Waiting> = {
            let mut inbox = self.inbox.lock();
            if inbox.closed.is_some() || inbox.gone.contains_key(&rank) {
                return;
            }
            inbox.gone.insert(rank, why.clone());
            let size = self.size();
            let Inbox { mailbox, waiting, gone, claims, .. } = &mut *inbox;
            let ids = mailbox.withdraw(|p| unsatisfiable(gone, size, p).is_some());
            let mut failed: Vec<Waiting> = ids.into_iter().filter_map(|id| waiting.remove(&id)).collect();
            failed.extend(take_cut(claims, |source| source == rank));
            failed
        };
        self.any_gone.store(true, Ordering::Release);
        self.arrived.notify_all();
        for w in failed {
            w.completion.complete(Err(why.clone()));
        }
    }

    /// Why peer `rank` is gone, if it is.
    pub fn gone(&self, rank: u32) -> Option<Error> {
        if !self.any_gone.load(Ordering::Acquire) {
            return None;
        }
        self.inbox.lock().gone.get(&rank).cloned()
    }

    /// Why this instance ended, once it has: everything sent to it now fails so.
    pub fn ended(&self) -> Option<Error> {
        self.inbox.lock().closed.clone()
    }

    /// The posted receives (with the source each waits for; None: any).
    pub fn posted_receives(&self) -> Vec<(RecvId, Option<u32>)> {
        self.inbox.lock().mailbox.awaited()
    }

    /// The peers that `receives` wait for (every other rank for an
    /// any-source receive), leaving out those already gone.
    pub fn peers_awaited_by(&self, receives: impl IntoIterator<Item = Option<u32>>) -> Vec<u32> {
        let mut peers = Vec::new();
        for source in receives {
            match source {
                Some(s) => peers.push(s),
                None => {
                    peers = (0..self.size()).collect();
                    break;
                }
            }
        }
        peers.sort_unstable();
        peers.dedup();
        let inbox = self.inbox.lock();
        peers.retain(|p| *p != self.rank() && !inbox.gone.contains_key(p));
        peers
    }

    pub fn unexpected_bytes(&self) -> usize {
        self.inbox.lock().mailbox.unexpected_bytes()
    }

    pub fn peak_unexpected_bytes(&self) -> usize {
        self.inbox.lock().mailbox.peak_unexpected_bytes()
    }

    /// Whether to stop taking messages from `source` for now: messages
    /// nobody asked for yet hold more than the bound (`MPIWS_MAX_UNEXPECTED`)
    /// and no posted receive waits for `source` (one that does must get its
    /// message). Its stream is then no longer read, so TCP pushes back on
    /// the sender; its stores are answered 429, and the sender tries again.
    pub fn holds_back(&self, source: u32) -> bool {
        let inbox = self.inbox.lock();
        inbox.mailbox.unexpected_bytes() > max_unexpected() && !inbox.mailbox.awaits(source)
    }

    /// A receive took a message or waits for one: streams parked by the
    /// bound are read again (the progress thread parks anew those still
    /// held back).
    fn consumed(&self) {
        if let Some(p) = &*self.progress.lock() {
            if p.has_parked() {
                p.unpark();
            }
        }
    }

    // ---- sending ---------------------------------------------------------

    /// Send to world rank `dest`. The envelope's sequence number is assigned
    /// here, in call order, which is what makes per-pair ordering hold.
    /// `inline`: write a large message from this thread (a blocking send).
    /// `track` (a tracked send) tells when the receiving endpoint stored
    /// the message and, if asked at the start, when a receive took it.
    pub fn send(
        self: &Arc<Self>,
        dest: u32,
        mut env: Envelope,
        chunks: Vec<Bytes>,
        inline: bool,
        track: Option<Tracking>,
    ) -> Arc<Completion> {
        let c = Completion::new();
        let fail = |e: Error| {
            if let Some(t) = &track {
                t.settle(&Err(e.clone()));
            }
            c.complete(Err(e));
        };
        if let Some(e) = self.undelivered[dest as usize].lock().take().or_else(|| self.gone(dest)) {
            fail(undelivered(dest, e));
            return c;
        }
        let seq = self.send_seq[dest as usize].fetch_add(1, Ordering::Relaxed);
        env.seq = Some(seq);
        if let Some(t) = &track {
            let _ = t.sent.set((dest, seq));
        }
        if dest == self.rank() {
            self.send_to_self(env, chunks, &c, track);
            return c;
        }
        match self.stream_to(dest) {
            Ok(Some(link)) => {
                link.send(&env, chunks, c.clone(), inline, track);
                return c;
            }
            Ok(None) => {}
            Err(e) => {
                fail(e);
                return c;
            }
        }
        self.in_flight.started();
        let me = self.clone();
        let done = c.clone();
        runtime().spawn(async move {
            let b = &me.binding;
            let r = me.transport.store(b.url_of(dest), &b.domain, dest, &b.token, &env, chunks).await;
            if let Some(t) = &track {
                t.stored.complete(r.clone().map(|_| Outcome::Sent));
            }
            done.complete(r.clone().map(|_| Outcome::Sent));
            me.in_flight.ended();
            // Asked at the start to tell the match: over stores, a long poll.
            if let Some(m) = track.and_then(|t| t.matched) {
                let r = match r {
                    Ok(()) => me.matched_at(dest, seq).await,
                    Err(e) => Err(e),
                };
                m.complete(r.map(|_| Outcome::Sent));
            }
        });
        c
    }

    /// Withdraw message `seq` sent to world rank `dest`, whose send timed
    /// out, unless a receive there took it already: true if withdrawn (it
    /// will never be received, nor sent again). Blocks for a round trip.
    /// If `dest` cannot be asked, the message is not sent again from here.
    pub fn withdraw(self: &Arc<Self>, dest: u32, seq: u64) -> Result<bool> {
        let withdrawn = if dest == self.rank() {
            Ok(self.take_back(dest, seq))
        } else {
            let b = &self.binding;
            runtime().block_on(self.transport.withdraw(b.url_of(dest), &b.domain, dest, self.rank(), seq, &b.token))
        };
        if !matches!(withdrawn, Ok(false)) {
            if let Some(Channel::Stream(link)) = &*self.channels[dest as usize].lock() {
                link.forget(seq);
            }
        }
        withdrawn
    }

    /// Tell when a receive at world rank `dest` took message `seq` from
    /// this rank: the "matched" event of a standard send, asked for late.
    pub fn ask_match(self: &Arc<Self>, dest: u32, seq: u64) -> Arc<Completion> {
        let c = Completion::new();
        self.report_match(c.clone(), dest, seq);
        c
    }

    /// Complete `into` once a receive at `dest` took message `seq` (`matched_at`).
    fn report_match(self: &Arc<Self>, into: Arc<Completion>, dest: u32, seq: u64) {
        let me = self.clone();
        runtime().spawn(async move {
            into.complete(me.matched_at(dest, seq).await.map(|()| Outcome::Sent));
        });
    }

    /// Until a receive at world rank `dest` took message `seq` from this
    /// rank: this mailbox's watch, or the receiver's (`direct::matched`).
    async fn matched_at(&self, dest: u32, seq: u64) -> Result<()> {
        if dest != self.rank() {
            let b = &self.binding;
            return self.transport.matched(b.url_of(dest), &b.domain, dest, self.rank(), seq, &b.token).await;
        }
        match self.watch_match(dest, seq) {
            Some(rx) => rx.await.map_err(|_| Error::new(ErrorClass::ProcFailed, "the instance ended before the message was received")),
            None => Ok(()),
        }
    }

    /// Ask `dest` to acknowledge what it stored now rather than lazily (a
    /// tracked send's "completed" is awaited).
    pub fn ask_ack(&self, dest: u32) {
        if let Some(Channel::Stream(link)) = &*self.channels[dest as usize].lock() {
            link.request_ack();
        }
    }

    /// The open stream to `dest`, opening it on first use; None: use stores.
    fn stream_to(self: &Arc<Self>, dest: u32) -> Result<Option<Arc<Link>>> {
        if !streams_enabled() {
            return Ok(None);
        }
        let mut ch = self.channels[dest as usize].lock();
        match &*ch {
            Some(Channel::Stream(link)) if !link.is_broken() => return Ok(Some(link.clone())),
            Some(Channel::Stores) => return Ok(None),
            _ => {}
        }
        let b = &self.binding;
        let undelivered = self.undelivered[dest as usize].clone();
        // A link that gives up on its peer marks it gone, as `liveness` would.
        let me = Arc::downgrade(self);
        let gone = Box::new(move |e: Error| {
            if let Some(me) = me.upgrade() {
                me.peer_gone(dest, e);
            }
        });
        let link = match Link::connect(b.url_of(dest), &b.domain, dest, self.rank(), &b.token, self.in_flight.clone(), undelivered, gone) {
            Ok(link) => link,
            Err(e) => {
                drop(ch);
                if e.class == ErrorClass::ProcFailed {
                    // Its instance ended: gone, as `liveness` would find;
                    // later sends fail at once.
                    self.peer_gone(dest, e.clone());
                }
                return Err(e);
            }
        };
        *ch = Some(match &link {
            Some(l) => Channel::Stream(l.clone()),
            None => Channel::Stores,
        });
        Ok(link)
    }

    fn send_to_self(self: &Arc<Self>, env: Envelope, chunks: Vec<Bytes>, c: &Arc<Completion>, track: Option<Tracking>) {
        // Copy: the caller's buffers may be borrowed from Python objects, and
        // the mailbox must own what it keeps.
        let owned = chunks.iter().map(|b| Bytes::copy_from_slice(b)).collect();
        let seq = env.seq.expect("sequenced");
        let mut msg = Message::new(env, Payload::from_chunks(owned));
        let matched = msg.await_match();
        if let Err(e) = self.deliver(msg) {
            if let Some(t) = &track {
                t.settle(&Err(e.clone()));
            }
            c.complete(Err(e));
            return;
        }
        if let Some(t) = &track {
            t.stored.complete(Ok(Outcome::Sent));
        }
        match matched {
            None => {
                c.complete(Ok(Outcome::Sent));
            }
            Some(rx) => {
                let c = c.clone();
                runtime().spawn(async move {
                    c.complete(match rx.await {
                        Ok(()) => Ok(Outcome::Sent),
                        Err(_) => Err(Error::new(ErrorClass::ProcFailed, "instance ended before the message was received")),
                    });
                });
            }
        }
        // Asked at the start to tell the match (a standard send): this mailbox's watch.
        if let Some(m) = track.and_then(|t| t.matched) {
            self.report_match(m, self.rank(), seq);
        }
    }

    /// Wait until every send is acknowledged or failed, up to `timeout`:
    /// Ok(false) if it passed first; Err if a completed send was not delivered.
    pub fn flush(&self, timeout: Option<Duration>) -> Result<bool> {
        while self.forwarding.load(Ordering::Acquire) > 0 {
            std::thread::yield_now();
        }
        let forwards = std::mem::take(&mut *self.forwards.lock());
        for (dest, c) in forwards {
            if let Err(e) = crate::mpi::comm::wait_outcome(&c, timeout) {
                return Err(undelivered(dest, e));
            }
        }
        // Ask again now and then: a send may start (a broadcast forward, on a
        // new stream) after an ask went out.
        let deadline = timeout.map(|t| Instant::now() + t);
        let idle = loop {
            for ch in &self.channels {
                if let Some(Channel::Stream(link)) = &*ch.lock() {
                    link.request_ack();
                }
            }
            let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            let slice = left.map_or(REASK, |l| l.min(REASK));
            if self.in_flight.wait_idle(Some(slice)) {
                break true;
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                break false;
            }
        };
        for (dest, u) in self.undelivered.iter().enumerate() {
            if let Some(e) = u.lock().take() {
                return Err(undelivered(dest as u32, e));
            }
        }
        Ok(idle)
    }

    // ---- state -----------------------------------------------------------

    pub fn status(&self) -> Status {
        self.status.borrow().clone()
    }

    pub fn watch_status(&self) -> watch::Receiver<Status> {
        self.status.subscribe()
    }

    pub fn set_running(&self) {
        self.status.send_modify(|s| {
            if s.state == InstanceState::Starting {
                s.state = InstanceState::Running;
            }
        });
    }

    /// The service returned `result`.
    pub fn finish(&self, result: serde_json::Value) {
        self.end(InstanceState::Done, Some(result), None);
    }

    /// The service raised.
    pub fn fail(&self, report: ErrorReport) {
        self.end(InstanceState::Failed, None, Some(report));
    }

    /// Cancelled through the service interface: pending and later operations fail.
    pub fn cancel(&self) {
        self.end(InstanceState::Cancelled, None, None);
    }

    fn end(&self, state: InstanceState, result: Option<serde_json::Value>, error: Option<ErrorReport>) {
        let mut changed = false;
        self.status.send_if_modified(|s| {
            if s.state.is_final() {
                return false;
            }
            s.state = state;
            s.result = result;
            s.error = error;
            changed = true;
            true
        });
        if changed {
            let why = match state {
                InstanceState::Cancelled => {
                    Error::new(ErrorClass::Cancelled, format!("domain {} rank {} was cancelled", self.binding.domain, self.rank()))
                }
                _ => Error::new(ErrorClass::ProcFailed, format!("domain {} rank {} has ended", self.binding.domain, self.rank())),
            };
            self.close(why);
        }
    }

    fn close(&self, why: Error) {
        let waiting = {
            let mut inbox = self.inbox.lock();
            inbox.closed = Some(why.clone());
            inbox.mailbox.close();
            let mut waiting: Vec<Waiting> = std::mem::take(&mut inbox.waiting).into_values().collect();
            waiting.extend(take_cut(&mut inbox.claims, |_| true));
            waiting
        };
        self.arrived.notify_all();
        for w in waiting {
            w.completion.complete(Err(why.clone()));
        }
        for ch in &self.channels {
            if let Some(Channel::Stream(link)) = ch.lock().take() {
                link.close();
            }
        }
        if let Some(p) = self.progress.lock().take() {
            p.stop();
        }
    }
}
