//! The receive side of a rank: messages filed as they arrive (from a
//! stream's reader or a store), receives posted, probed, cancelled, and
//! peers found gone. The state is `engine::inbox`, under the instance's
//! lock; what a step completes is completed after the lock is let go.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::config::max_unexpected;
use crate::engine::completion::{Completion, Outcome, RecvBuffer};
use crate::engine::inbox::{take_cut, unsatisfiable, Claim, Inbox, Waiting};
use crate::engine::mailbox::{Arrival, Message, Pattern, RecvId};
use crate::error::{Error, ErrorClass, Result};
use crate::net::reader::{Delivered, Receiver};
use crate::rank::Instance;
use crate::wire::frame::{Envelope, Payload};
use crate::wire::reserved::{fault_of, is_revoke, is_rma, REVOKE_TAG};

impl Instance {
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
        // No window was ever made here: nobody can be waiting for an answer.
        if let Some(windows) = self.window_frames().filter(|_| !rma.is_empty()) {
            for m in rma {
                windows.handle(self, m.env.source, m.env.context, m.payload);
            }
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

    /// Wait up to `timeout` for a receive's completion; with the world rank
    /// it expects a message from, read that peer's stream in this thread
    /// while waiting (see `net::reader`). True once done.
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
    /// late "matched" watch, `service::matched`): None if one did already;
    /// the receiver errs if the message is refused or this instance ends
    /// first (also asked after it ended: the mailbox still knows).
    pub fn watch_match(&self, source: u32, seq: u64) -> Option<tokio::sync::oneshot::Receiver<()>> {
        self.inbox.lock().mailbox.watch_match(source, seq)
    }

    /// Take back message `seq` from `source` unless a receive took it (its
    /// send timed out; `service::withdraw`): true if withdrawn.
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

    /// Peer `rank` is gone (`rank::liveness` found its instance ended or
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
}

impl Receiver for Instance {
    fn deliver(self: Arc<Self>, msg: Message) -> Result<Delivered> {
        Instance::deliver(&self, msg)
    }

    fn skip(&self, source: u32, seq: Option<u64>) {
        Instance::skip(self, source, seq)
    }

    fn claim(&self, env: &Envelope, len: usize) -> Option<(Arc<Completion>, Box<dyn RecvBuffer>)> {
        Instance::claim(self, env, len)
    }

    fn placed(&self, source: u32, seq: u64) {
        Instance::placed(self, source, seq)
    }

    fn cut(&self, source: u32, seq: u64, completion: Arc<Completion>, buffer: Box<dyn RecvBuffer>) {
        Instance::cut(self, source, seq, completion, buffer)
    }

    fn holds_back(&self, source: u32) -> bool {
        Instance::holds_back(self, source)
    }
}
