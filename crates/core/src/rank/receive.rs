//! The receive side of a rank: messages filed as they arrive (from a
//! stream's reader or a store), receives posted, probed, cancelled, and
//! peers found gone. Each is a step of `engine::inbox` under the
//! instance's lock; what it completes is completed after the lock is let
//! go. What a step means for the rest of the rank happens here: window
//! traffic goes to the windows, a broadcast is forwarded down its tree,
//! waiters on `arrived` (probes) wake, parked streams are read again.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::config::max_unexpected;
use crate::engine::completion::{Awaited, Completion, RecvBuffer};
use crate::engine::inbox::{Fires, Waiting};
use crate::engine::mailbox::{Message, Pattern, RecvId};
use crate::error::{Error, Result};
use crate::net::reader::{Delivered, Receiver, ReplyPlace};
use crate::rank::awaiting::Awaiting;
use crate::rank::Instance;
use crate::wire::frame::{Envelope, Payload};

impl Instance {
    /// File a message that arrived for this instance.
    pub fn deliver(self: &Arc<Self>, msg: Message) -> Result<Delivered> {
        let tree = (!msg.env.forward.is_empty()).then(|| (msg.env.clone(), msg.payload.clone()));
        let (source, bytes) = (msg.env.source, msg.payload.len() as u64);
        let arrived = {
            let mut inbox = self.inbox.lock();
            let arrived = inbox.arrive(msg)?;
            if tree.is_some() && !arrived.duplicate {
                // Counted before the message can be taken: the application
                // may take it, run ahead and flush before `forward` is done,
                // and its flush must wait for the forwards.
                self.forwarding.fetch_add(1, Ordering::AcqRel);
            }
            arrived
        };
        if arrived.duplicate {
            self.fire(arrived.fires);
            return Ok(Delivered::Duplicate);
        }
        self.traffic.received(source, bytes);
        self.to_windows(arrived.rma);
        // Forward first: once a receive has the message its application may
        // run ahead and end, and the forwards must already be on their way.
        if let Some((env, payload)) = tree {
            // Forwarding may open a stream to a peer: a store served here, on
            // a runtime worker, must not hold that worker while it does (the
            // connect's own task may be queued behind it).
            crate::runtime::blocking(|| self.forward(env, payload));
            self.forwarding.fetch_sub(1, Ordering::AcqRel);
        }
        self.arrived.notify_all();
        self.fire(arrived.fires);
        Ok(Delivered::Filed)
    }

    /// Do what a step of the inbox left to do (`Fires::fire`), counting
    /// first how long the receives it gives a message waited: the one place
    /// receive waits are measured (`rank::traffic`).
    pub(super) fn fire(&self, fires: Fires) {
        self.traffic.waited(fires.posted());
        fires.fire();
    }

    /// Window traffic taken out of the mailbox, to the windows.
    fn to_windows(self: &Arc<Self>, rma: Vec<Message>) {
        // No window was ever made here: nobody can be waiting for an answer.
        if let Some(windows) = self.window_frames().filter(|_| !rma.is_empty()) {
            // Answering may open a stream to the origin (a store served here,
            // on a runtime worker, waits for that).
            crate::runtime::blocking(|| {
                for m in rma {
                    windows.handle(self, m.env.source, m.env.context, m.payload);
                }
            });
        }
    }

    /// A message from `source` with sequence number `seq` was refused by
    /// this endpoint (and reported to its sender), or taken another way:
    /// later ones go on.
    pub fn skip(self: &Arc<Self>, source: u32, seq: Option<u64>) {
        let Some(seq) = seq else { return };
        let (fires, rma) = self.inbox.lock().skip(source, seq);
        self.to_windows(rma);
        self.arrived.notify_all();
        self.fire(fires);
    }

    /// Wait up to `timeout` for a receive's completion; with the world rank
    /// it expects a message from, read that peer's stream in this thread
    /// while waiting (see `net::reader`). True once done.
    pub fn wait_for(&self, c: &dyn Awaited, source: Option<u32>, timeout: Option<Duration>) -> bool {
        self.wait_for_after(c, source, timeout, &mut || {})
    }

    /// `wait_for`, running `first` once: as soon as this thread reads the
    /// stream, or is about to wait another way (`Progress::wait_for_after`),
    /// or at the end if the wait needed neither.
    pub fn wait_for_after(&self, c: &dyn Awaited, source: Option<u32>, timeout: Option<Duration>, first: &mut dyn FnMut()) -> bool {
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

    /// Post a receive. The completion carries the message once one matches.
    /// With a `buffer`, a large message may be read straight into it.
    pub fn post_recv(&self, pattern: Pattern, buffer: Option<Box<dyn RecvBuffer>>) -> (RecvId, Arc<Completion>) {
        let id = self.next_recv_id.fetch_add(1, Ordering::Relaxed);
        let c = Completion::new();
        let fires = self.inbox.lock().post(id, pattern, Waiting { completion: c.clone(), buffer, posted: Some(Instant::now()) });
        self.fire(fires); // a message already here: no wait
        self.posted.notify_all(); // a reader may wait to place a message in it (`claim`)
        self.consumed(); // the message taken, or the one awaited, may free a parked stream
        (id, c)
    }

    /// For a message whose payload is still on the wire: the posted receive
    /// it goes to, if that receive has a buffer big enough to read it into.
    /// The caller reads the payload and completes the receive (`Placed`).
    /// While no posted receive matches it, one posted within `wait` is taken.
    pub fn claim(self: &Arc<Self>, env: &Envelope, len: usize, wait: Duration) -> Option<(Arc<Completion>, Box<dyn RecvBuffer>)> {
        let deadline = Instant::now() + wait;
        let mut inbox = self.inbox.lock();
        loop {
            if let Some((w, fires, rma)) = inbox.claim(env, len) {
                drop(inbox);
                self.traffic.waited(w.posted); // its message is read into it by the caller
                self.to_windows(rma);
                self.fire(fires);
                return Some((w.completion, w.buffer?));
            }
            if inbox.has_receive_for(env) || self.posted.wait_until(&mut inbox, deadline).timed_out() {
                return None; // it matched one that cannot take it in place, or none came
            }
        }
    }

    /// A claimed message was read in full.
    pub fn placed(&self, source: u32, seq: u64) {
        let fires = self.inbox.lock().placed(source, seq);
        self.fire(fires);
    }

    /// A claimed message was cut off mid-read: its receive takes the retry
    /// (which may have come already), or fails if none can come.
    pub fn cut(&self, source: u32, seq: u64, completion: Arc<Completion>, buffer: Box<dyn RecvBuffer>) {
        let fires = self.inbox.lock().cut(source, seq, Waiting { completion, buffer: Some(buffer), posted: None });
        self.fire(fires);
    }

    /// Withdraw a posted receive; true if it had not matched yet.
    pub fn cancel_recv(&self, id: RecvId) -> bool {
        let cancelled = self.inbox.lock().cancel(id);
        cancelled.map(|fires| self.fire(fires)).is_some()
    }

    /// Envelope and size of the message a receive with `pattern` would take,
    /// waiting up to `timeout` for one (`Some(ZERO)`: do not wait).
    pub fn probe(&self, pattern: Pattern, timeout: Option<Duration>) -> Result<Option<(Envelope, usize)>> {
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut inbox = self.inbox.lock();
        loop {
            if let Some(found) = inbox.probe(&pattern)? {
                return Ok(Some(found));
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
    /// late "matched" watch, `service::matched`): None if one did already;
    /// the receiver errs if the message is refused or this instance ends
    /// first (also asked after it ended: the mailbox still knows).
    pub fn watch_match(&self, source: u32, seq: u64) -> Option<tokio::sync::oneshot::Receiver<()>> {
        self.inbox.lock().watch_match(source, seq)
    }

    /// Take back message `seq` from `source` unless a receive took it (its
    /// send timed out; `service::withdraw`): true if withdrawn.
    pub fn take_back(&self, source: u32, seq: u64) -> bool {
        let (withdrawn, fires) = self.inbox.lock().take_back(source, seq);
        self.fire(fires);
        self.consumed();
        withdrawn
    }

    /// Take a matching message now if there is one (matched probe + receive).
    pub fn take(&self, pattern: Pattern) -> Option<(Envelope, Payload)> {
        let mut m = self.inbox.lock().take(&pattern)?;
        self.consumed();
        m.matched();
        Some((m.env, m.payload))
    }

    /// Peer `rank` is gone (`rank::liveness` found its instance ended or
    /// unreachable): receives that only it could satisfy fail now and from
    /// now on (what it sent before is still received), and sends to it fail.
    pub fn peer_gone(&self, rank: u32, why: Error) {
        let Some(fires) = self.inbox.lock().peer_gone(rank, why) else { return };
        self.any_gone.store(true, Ordering::Release);
        self.arrived.notify_all();
        self.fire(fires);
    }

    /// Why peer `rank` is gone, if it is.
    pub fn gone(&self, rank: u32) -> Option<Error> {
        if !self.any_gone.load(Ordering::Acquire) {
            return None;
        }
        self.inbox.lock().gone(rank)
    }

    /// Why this instance ended, once it has: everything sent to it now fails so.
    pub fn ended(&self) -> Option<Error> {
        self.inbox.lock().ended()
    }

    /// What this rank waits for now (`awaiting`): its posted receives, a
    /// collective's named by its call.
    pub fn awaiting(&self) -> Vec<Awaiting> {
        let patterns = self.inbox.lock().posted_patterns();
        self.collectives.describe(&patterns)
    }

    /// The posted receives (with the source each waits for; None: any).
    pub fn posted_receives(&self) -> Vec<(RecvId, Option<u32>)> {
        self.inbox.lock().posted_receives()
    }

    /// The peers that `receives` wait for (every other rank for an
    /// any-source receive), leaving out those already gone.
    pub fn peers_awaited_by(&self, receives: impl IntoIterator<Item = Option<u32>>) -> Vec<u32> {
        self.inbox.lock().peers_awaited_by(receives)
    }

    pub fn unexpected_bytes(&self) -> usize {
        self.inbox.lock().unexpected_bytes()
    }

    pub fn peak_unexpected_bytes(&self) -> usize {
        self.inbox.lock().peak_unexpected_bytes()
    }

    /// Whether to stop taking messages from `source` for now (the bound is
    /// `MPIWS_MAX_UNEXPECTED`; see `Inbox::holds_back`). Its stream is then
    /// no longer read, so TCP pushes back on the sender; its stores are
    /// answered 429, and the sender tries again.
    pub fn holds_back(&self, source: u32) -> bool {
        self.inbox.lock().holds_back(source, max_unexpected())
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
}

impl Receiver for Instance {
    fn deliver(self: Arc<Self>, msg: Message) -> Result<Delivered> {
        Instance::deliver(&self, msg)
    }

    fn skip(self: Arc<Self>, source: u32, seq: Option<u64>) {
        Instance::skip(&self, source, seq)
    }

    fn claim(self: Arc<Self>, env: &Envelope, len: usize, wait: Duration) -> Option<(Arc<Completion>, Box<dyn RecvBuffer>)> {
        Instance::claim(&self, env, len, wait)
    }

    fn placed(&self, source: u32, seq: u64) {
        Instance::placed(self, source, seq)
    }

    fn handled(&self, since: Instant) {
        self.traffic.handled(since)
    }

    fn cut(&self, source: u32, seq: u64, completion: Arc<Completion>, buffer: Box<dyn RecvBuffer>) {
        Instance::cut(self, source, seq, completion, buffer)
    }

    fn holds_back(&self, source: u32) -> bool {
        Instance::holds_back(self, source)
    }

    fn window_head(&self) -> usize {
        self.window_frames().map_or(0, |w| w.head())
    }

    fn place_reply(&self, key: u64, head: &[u8], len: usize) -> Option<ReplyPlace> {
        self.window_frames()?.place_reply(key, head, len)
    }
}
