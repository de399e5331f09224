//! The send side of a rank: per-pair sequence numbers, a stream (or
//! stores) per peer opened on first use, sends to itself, broadcast
//! forwarding, withdrawal of a send that timed out, the "matched" event,
//! and the flush that waits until every send is acknowledged.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::config::streams_enabled;
use crate::engine::completion::{wait_outcome, Completion, Outcome, Tracking};
use crate::engine::mailbox::Message;
use crate::engine::tree;
use crate::error::{Error, ErrorClass, Result};
use crate::net::link::Link;
use crate::rank::instance::{Channel, Instance};
use crate::runtime::runtime;
use crate::wire::frame::{Envelope, Payload};

/// How often a flush asks its streams again for acknowledgements.
const REASK: Duration = Duration::from_millis(50);

fn undelivered(dest: u32, e: Error) -> Error {
    Error::new(e.class, format!("a message to rank {dest} was not delivered: {}", e.message))
}

impl Instance {
    /// Pass a broadcast message on down its tree: `env.forward` lists the
    /// world ranks of this rank's binomial subtree, this rank first
    /// (`engine::tree`); each child gets its own subtree, the farthest first.
    pub(super) fn forward(self: &Arc<Self>, env: Envelope, payload: Payload) {
        for sub in tree::subtrees(env.forward.len()) {
            let sub = env.forward[sub].to_vec();
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
    }

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
            self.inbox.lock().tell(dest);
            fail(undelivered(dest, e));
            return c;
        }
        let seq = self.send_seq[dest as usize].fetch_add(1, Ordering::Relaxed);
        env.seq = Some(seq);
        self.traffic.sent(dest, chunks.iter().map(|c| c.len() as u64).sum());
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
            let r = me.stores.store(b.url_of(dest), &b.domain, dest, &b.token, &env, chunks).await;
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
            runtime().block_on(self.stores.withdraw(b.url_of(dest), &b.domain, dest, self.rank(), seq, &b.token))
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
    /// rank: this mailbox's watch, or the receiver's (`service::matched`).
    async fn matched_at(&self, dest: u32, seq: u64) -> Result<()> {
        if dest != self.rank() {
            let b = &self.binding;
            return self.stores.matched(b.url_of(dest), &b.domain, dest, self.rank(), seq, &b.token).await;
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
            Some(Channel::Stream(link)) => match link.failure() {
                None => return Ok(Some(link.clone())),
                // Given up on its peer (which it marks gone right after
                // failing its sends): a send made meanwhile, say by whoever
                // saw one of those failures, fails at once like later ones,
                // rather than on a new link that queues it.
                Some(e) if e.class == ErrorClass::ProcFailed => return Err(e),
                Some(_) => {}
            },
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
        // A synchronous send completes as the receive takes it, in that
        // thread: sends to self complete in the order they were received.
        let when_taken = msg.complete_when_taken(c.clone());
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
        if !when_taken {
            c.complete(Ok(Outcome::Sent));
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
            if let Err(e) = wait_outcome(&c, timeout) {
                self.report_undelivered(dest, e)?;
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
            let e = u.lock().take();
            if let Some(e) = e {
                self.report_undelivered(dest as u32, e)?;
            }
        }
        Ok(idle)
    }

    /// A flush found a message to `dest` undelivered: an error, unless the
    /// application was told already that `dest` failed (`Inbox::told`): a
    /// survivor that handled a peer's failure ends well.
    fn report_undelivered(&self, dest: u32, e: Error) -> Result<()> {
        let mut inbox = self.inbox.lock();
        if inbox.told(dest) {
            return Ok(());
        }
        inbox.tell(dest);
        Err(undelivered(dest, e))
    }
}
