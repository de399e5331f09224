//! A started operation of the program face (a send, a receive, a
//! collective), as its caller waits for it, tests it, takes its outcome and
//! gives it up.
//!
//! The timeout rule, here once for every caller ([`Request::expire`]): when
//! a wait for an operation runs out of time, the operation is withdrawn —
//! a receive that nothing matched is cancelled, a send that no receive took
//! is taken back at the receiver (it will never be received) — and the call
//! fails with `ERR_TIMEOUT`. An operation that a receive matched just then
//! is not withdrawn: it completes after all, and the call succeeds. A
//! collective cannot be withdrawn (the other ranks take part in it): it
//! fails with `ERR_TIMEOUT`.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use crate::engine::completion::{Awaited, Completion, Outcome, Tracking};
use crate::engine::mailbox::RecvId;
use crate::error::{Error, ErrorClass, Result};
use crate::mpi::comm::Comm;

enum Kind {
    /// A send to local rank `dest`; `track` is told when the receiver stored
    /// (and matched) the message.
    Send { dest: i64, track: Option<Tracking>, matched: OnceLock<Option<Arc<Completion>>> },
    /// A receive from local rank `source` (or `ANY_SOURCE`); no id: completed
    /// at once (from `PROC_NULL`).
    Recv { id: Option<RecvId>, source: i64 },
    /// A collective, or anything else that runs to its end once started.
    Call,
}

pub struct Request {
    comm: Comm,
    completion: Arc<Completion>,
    kind: Kind,
}

impl Request {
    pub fn send(comm: Comm, completion: Arc<Completion>, dest: i64, track: Option<Tracking>) -> Request {
        Request { comm, completion, kind: Kind::Send { dest, track, matched: OnceLock::new() } }
    }

    pub fn recv(comm: Comm, completion: Arc<Completion>, id: Option<RecvId>, source: i64) -> Request {
        Request { comm, completion, kind: Kind::Recv { id, source } }
    }

    /// A collective's request (or any operation that cannot be withdrawn).
    pub fn call(comm: Comm, completion: Arc<Completion>) -> Request {
        Request { comm, completion, kind: Kind::Call }
    }

    pub fn comm(&self) -> &Comm {
        &self.comm
    }

    pub fn completion(&self) -> &Arc<Completion> {
        &self.completion
    }

    pub fn is_recv(&self) -> bool {
        matches!(self.kind, Kind::Recv { .. })
    }

    /// Wait up to `timeout`; true once done. A receive from a known peer
    /// reads that peer's stream in this thread meanwhile (`rank::receive`).
    pub fn wait(&self, timeout: Option<Duration>) -> bool {
        self.wait_after(timeout, &mut || {})
    }

    /// `wait`, running `first` once this thread reads the peer's stream (a
    /// `Sendrecv` sends from there: `Instance::wait_for_after`).
    pub fn wait_after(&self, timeout: Option<Duration>, first: &mut dyn FnMut()) -> bool {
        match self.kind {
            Kind::Recv { source, .. } => self.comm.wait_recv_after(&*self.completion, source, timeout, first),
            _ => self.comm.instance.wait_for_after(&*self.completion, None, timeout, first),
        }
    }

    /// Wait up to `timeout` for `other` (a handler thread's events), reading
    /// meanwhile the stream this receive expects its message on, as its own
    /// wait would: the message then completes it on this thread, with no
    /// hand-off from the progress thread. True once `other` is done.
    pub fn wait_other(&self, other: &dyn Awaited, timeout: Option<Duration>) -> bool {
        match self.kind {
            Kind::Recv { source, .. } if !self.completion.is_done() => self.comm.wait_recv_after(other, source, timeout, &mut || {}),
            _ => other.wait(timeout),
        }
    }

    /// Give the operation up: a receive nothing matched is cancelled, a
    /// send no receive took is taken back. True if given up; false if it
    /// was taken (or cannot be given up).
    pub fn withdraw(&self) -> bool {
        match &self.kind {
            Kind::Recv { id, .. } => id.is_some_and(|id| self.comm.cancel_recv(id)),
            // Untracked, never sent, or the receiver cannot be asked: it is not sent again from here.
            Kind::Send { track: Some(track), .. } => self.comm.withdraw(track).unwrap_or(true),
            Kind::Send { track: None, .. } => true,
            Kind::Call => false,
        }
    }

    /// The timeout rule (see the module): the wait for `what` ran out of
    /// `timeout`. Err(ERR_TIMEOUT) if the operation was withdrawn or cannot
    /// be; Ok if it is done or completes after all (wait for it).
    pub fn expire(&self, what: &str, timeout: Option<Duration>) -> Result<()> {
        let withdrawable = matches!(self.kind, Kind::Send { .. } | Kind::Recv { id: Some(_), .. });
        if withdrawable && !self.withdraw() {
            return Ok(());
        }
        let after = timeout.map_or(String::new(), |t| format!(" after {} s", t.as_secs_f64()));
        Err(Error::new(ErrorClass::Timeout, format!("{what} timed out{after}")))
    }

    /// The outcome, once (None: not done, or taken already).
    pub fn take(&self) -> Option<Result<Outcome>> {
        self.completion.take()
    }

    /// A tracked send's "stored" event: its completion. None for anything else.
    pub fn stored(&self) -> Option<&Arc<Completion>> {
        let Kind::Send { track: Some(track), .. } = &self.kind else { return None };
        Some(&track.stored)
    }

    /// `stored`, the receiver asked to acknowledge now rather than lazily.
    pub fn ask_stored(&self) -> Option<&Arc<Completion>> {
        let Kind::Send { dest, .. } = &self.kind else { return None };
        let stored = self.stored()?;
        if let Ok(world) = self.comm.world_rank(*dest) {
            self.comm.instance.ask_ack(world);
        }
        Some(stored)
    }

    /// A tracked standard send's "matched" event: its completion (the
    /// receiver asked now, unless asked at the start). None for anything
    /// else, and for a synchronous send (its own completion says it).
    pub fn matched(&self) -> Option<Arc<Completion>> {
        let Kind::Send { track: Some(track), matched, .. } = &self.kind else { return None };
        matched.get_or_init(|| self.comm.ask_match(track)).clone()
    }

    /// The "matched" event's completion, if it was asked for already.
    pub fn matched_asked(&self) -> Option<&Arc<Completion>> {
        let Kind::Send { matched, .. } = &self.kind else { return None };
        matched.get()?.as_ref()
    }
}
