//! Completions: where an operation's outcome lands, and how threads wait for
//! it without spinning (a condition variable; wait-any uses a shared signal).

use std::io::{Read, Write};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::error::{err, Error, ErrorClass, Result};
use crate::wire::frame::{Envelope, Payload};

/// A receive buffer owned by the caller (a Python buffer), which the
/// payload of a large message can be read into directly from the socket.
pub trait RecvBuffer: Send {
    fn len(&self) -> usize;
    fn as_mut_slice(&mut self) -> &mut [u8];

    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// What a thread waiting in MPI waits for (`net::reader::Progress` reads a
/// peer's stream meanwhile): one operation's [`Completion`], or the next
/// token of a handler thread's [`Events`].
pub trait Awaited {
    fn is_done(&self) -> bool;
    /// Wait up to `timeout` (None: for ever); true once done.
    fn wait(&self, timeout: Option<Duration>) -> bool;
    /// Whether a waiter for it polls before it sleeps (`poll_until`): a
    /// program waiting in MPI has nothing else to do; a handler thread
    /// waits beside a program that computes.
    fn polls(&self) -> bool {
        true
    }

    /// Before a waiter sleeps in poll(2) on a stream: a descriptor that
    /// turns readable once this is done, cleared now (then check
    /// `is_done` before sleeping). None: the waiter looks up from the
    /// stream every slice (a completion is mostly done by that stream).
    fn sleep_fd(&self) -> Option<BorrowedFd<'_>> {
        None
    }
}

/// What a finished operation produced.
pub enum Outcome {
    Sent,
    /// The payload, to be copied where the receiver wants it.
    Received {
        env: Envelope,
        payload: Payload,
    },
    /// The payload was read straight into the receive's buffer, handed back
    /// here so that it is released by the thread that takes the outcome.
    Placed {
        env: Envelope,
        len: usize,
        buffer: Box<dyn RecvBuffer>,
    },
    /// A receive withdrawn before anything matched it.
    Cancelled,
}

impl std::fmt::Debug for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Outcome::Sent => write!(f, "Sent"),
            Outcome::Received { env, payload } => write!(f, "Received({env:?}, {} bytes)", payload.len()),
            Outcome::Placed { env, len, .. } => write!(f, "Placed({env:?}, {len} bytes)"),
            Outcome::Cancelled => write!(f, "Cancelled"),
        }
    }
}

/// Something told when a completion completes (on the completing thread:
/// it must only note the fact and wake someone).
pub trait Watcher: Send + Sync {
    fn fire(&self);
}

/// A one-shot flag several completions can raise (for wait-any / wait-some).
#[derive(Default)]
pub struct Signal {
    fired: Mutex<bool>,
    cv: Condvar,
}

impl Watcher for Signal {
    fn fire(&self) {
        *self.fired.lock() = true;
        self.cv.notify_all();
    }
}

impl Signal {
    pub fn new() -> Arc<Self> {
        Arc::new(Signal::default())
    }

    /// Wait until fired or until `deadline`; true if fired.
    pub fn wait_until(&self, deadline: Option<Instant>) -> bool {
        let mut fired = self.fired.lock();
        while !*fired {
            match deadline {
                None => self.cv.wait(&mut fired),
                Some(d) => {
                    if self.cv.wait_until(&mut fired, d).timed_out() {
                        break;
                    }
                }
            }
        }
        *fired
    }
}

#[derive(Default)]
struct State {
    outcome: Option<Result<Outcome>>,
    /// Set once the outcome was handed out (the request is then inactive).
    taken: bool,
    watchers: Vec<Arc<dyn Watcher>>,
}

#[derive(Default)]
pub struct Completion {
    state: Mutex<State>,
    cv: Condvar,
    /// Mirrors "outcome set or taken", readable without the lock (spinning).
    done: AtomicBool,
}

/// What a tracked send reports besides its completion (its events): when
/// the receiving endpoint stored the message, and, if asked for at the
/// start, when a receive there took it (else `mpi::Comm::ask_match` asks later).
#[derive(Clone)]
pub struct Tracking {
    pub stored: Arc<Completion>,
    pub matched: Option<Arc<Completion>>,
    /// A synchronous send: its own completion is its match.
    pub sync: bool,
    /// The destination's world rank and the message's sequence number,
    /// once it was sent (what the receiver knows it by).
    pub sent: Arc<OnceLock<(u32, u64)>>,
}

impl Tracking {
    pub fn new(sync: bool, tell_match: bool) -> Self {
        Tracking { stored: Completion::new(), matched: (tell_match && !sync).then(Completion::new), sync, sent: Arc::default() }
    }

    /// Everything still open ends with `outcome` (the send was matched, or failed).
    pub fn settle(&self, outcome: &Result<()>) {
        for c in std::iter::once(&self.stored).chain(&self.matched) {
            c.complete(outcome.clone().map(|()| Outcome::Sent));
        }
    }
}

/// How long a waiter polls before it sleeps, and how. A reply that lands
/// within the budget is seen without a thread wake-up, which on a virtual
/// machine whose idle cores halt costs tens of microseconds (measured:
/// 8-byte ping-pong 65 us sleeping, 11 us polling). Where this host's ranks
/// each have a core ([`fit_spin`]) the poll spins; where they do not, it
/// yields the core at every turn, since spinning there takes the core from
/// the very rank that would answer (measured, 4 ranks on 2 cores, barrier:
/// sleeping 150 us, spinning 500 us, yielding 100 us). `MPIWS_SPIN_US`
/// sets the budget (0: always sleep at once; `config::spin_budget`).
static YIELD: AtomicBool = AtomicBool::new(false);

/// Choose how to poll for `local_ranks` ranks sharing this host; whether
/// they are more than its cores.
pub fn fit_spin(local_ranks: usize) -> bool {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let oversubscribed = local_ranks > cores;
    YIELD.store(oversubscribed, Ordering::Relaxed);
    oversubscribed
}

/// Poll `ready` until it holds or `budget` is spent, pausing between
/// tries; whether it held. With no budget, `ready` is tried once.
pub fn poll_until(budget: Duration, mut ready: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    loop {
        if ready() {
            return true;
        }
        if start.elapsed() >= budget {
            return false;
        }
        pause();
    }
}

/// One turn of a polling loop.
fn pause() {
    if YIELD.load(Ordering::Relaxed) {
        std::thread::yield_now();
    } else {
        std::hint::spin_loop();
    }
}

impl Completion {
    pub fn new() -> Arc<Self> {
        Arc::new(Completion::default())
    }

    /// Record the outcome; the first one wins. Returns whether this call did.
    pub fn complete(&self, outcome: Result<Outcome>) -> bool {
        let watchers = {
            let mut s = self.state.lock();
            if s.outcome.is_some() || s.taken {
                return false;
            }
            s.outcome = Some(outcome);
            self.done.store(true, Ordering::Release);
            std::mem::take(&mut s.watchers)
        };
        self.cv.notify_all();
        for w in watchers {
            w.fire();
        }
        true
    }

    pub fn is_done(&self) -> bool {
        self.done.load(Ordering::Acquire)
    }

    /// Poll for up to the spin budget (and `timeout`); true if done.
    fn spin(&self, timeout: Option<Duration>) -> bool {
        let budget = timeout.map_or(crate::config::spin_budget(), |t| t.min(crate::config::spin_budget()));
        poll_until(budget, || self.is_done())
    }

    /// Wait for the outcome up to `timeout` (None: forever); true if done.
    pub fn wait(&self, timeout: Option<Duration>) -> bool {
        if self.spin(timeout) {
            return true;
        }
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut s = self.state.lock();
        while s.outcome.is_none() && !s.taken {
            match deadline {
                None => self.cv.wait(&mut s),
                Some(d) => {
                    if self.cv.wait_until(&mut s, d).timed_out() {
                        break;
                    }
                }
            }
        }
        s.outcome.is_some() || s.taken
    }

    /// The error of a failed operation whose outcome was not taken yet.
    pub fn peek_error(&self) -> Option<crate::error::Error> {
        match &self.state.lock().outcome {
            Some(Err(e)) => Some(e.clone()),
            _ => None,
        }
    }

    /// The envelope and size of a received message whose outcome was not
    /// taken yet (a matched probe's message, until it is received).
    pub fn peek_received(&self) -> Option<(Envelope, usize)> {
        match &self.state.lock().outcome {
            Some(Ok(Outcome::Received { env, payload })) => Some((env.clone(), payload.len())),
            Some(Ok(Outcome::Placed { env, len, .. })) => Some((env.clone(), *len)),
            _ => None,
        }
    }

    /// Hand out the outcome once; later calls return None.
    pub fn take(&self) -> Option<Result<Outcome>> {
        let mut s = self.state.lock();
        let o = s.outcome.take();
        if o.is_some() {
            s.taken = true;
        }
        o
    }

    /// Tell `watcher` when this completes; false (and no watch) if already done.
    pub fn watch(&self, watcher: Arc<dyn Watcher>) -> bool {
        let mut s = self.state.lock();
        if s.outcome.is_some() || s.taken {
            return false;
        }
        s.watchers.push(watcher);
        true
    }

    pub fn unwatch(&self, watcher: &Arc<dyn Watcher>) {
        self.state.lock().watchers.retain(|w| !std::ptr::addr_eq(Arc::as_ptr(w), Arc::as_ptr(watcher)));
    }
}

impl Awaited for Completion {
    fn is_done(&self) -> bool {
        Completion::is_done(self)
    }

    fn wait(&self, timeout: Option<Duration>) -> bool {
        Completion::wait(self, timeout)
    }
}

/// Block until at least one of `completions` is done or `timeout` passes.
pub fn wait_any(completions: &[Arc<Completion>], timeout: Option<Duration>) -> bool {
    let signal = Signal::new();
    let watcher: Arc<dyn Watcher> = signal.clone();
    let mut watching = Vec::with_capacity(completions.len());
    let mut ready = false;
    for c in completions {
        if c.watch(watcher.clone()) {
            watching.push(c);
        } else {
            ready = true;
            break;
        }
    }
    if !ready {
        ready = signal.wait_until(timeout.map(|t| Instant::now() + t));
    }
    for c in watching {
        c.unwatch(&watcher);
    }
    ready
}

/// Wait for a completion and take its outcome (a timeout is an error).
pub fn wait_outcome(c: &Completion, timeout: Option<Duration>) -> Result<Outcome> {
    waited_outcome(c, c.wait(timeout), timeout)
}

/// The outcome of `c` after a wait of up to `timeout` that ended `done` (or not: a timeout error).
pub fn waited_outcome(c: &Completion, done: bool, timeout: Option<Duration>) -> Result<Outcome> {
    if !done {
        return Err(Error::new(ErrorClass::Timeout, format!("operation did not complete within {timeout:?}")));
    }
    c.take().unwrap_or_else(|| err(ErrorClass::Request, "request already completed"))
}

/// A queue of tokens, one pushed per watched completion as it completes:
/// how a handler thread learns, without polling, which operations finished.
pub struct Events {
    queue: Mutex<std::collections::VecDeque<u64>>,
    cv: Condvar,
    /// A byte per push while a handler thread sleeps in poll(2) on a stream
    /// (`Awaited::sleep_fd`): (written, read). None if no socket pair.
    wake: Option<(UnixStream, UnixStream)>,
    /// Set before such a sleep (then the queue is checked), cleared when a
    /// token is taken: a push that finds it clear is seen by that check.
    sleeping: AtomicBool,
}

impl Default for Events {
    fn default() -> Self {
        let wake = UnixStream::pair().ok().filter(|(w, r)| w.set_nonblocking(true).is_ok() && r.set_nonblocking(true).is_ok());
        Events { queue: Mutex::default(), cv: Condvar::new(), wake, sleeping: AtomicBool::new(false) }
    }
}

struct Notify {
    events: Arc<Events>,
    token: u64,
}

impl Watcher for Notify {
    fn fire(&self) {
        self.events.push(self.token);
    }
}

impl Events {
    pub fn new() -> Arc<Self> {
        Arc::new(Events::default())
    }

    pub fn push(&self, token: u64) {
        self.queue.lock().push_back(token);
        self.cv.notify_one();
        if let Some((w, _)) = self.wake.as_ref().filter(|_| self.sleeping.load(Ordering::SeqCst)) {
            let _ = (&*w).write(&[1]); // full: a wake-up is pending already
        }
    }

    /// Push `token` once `c` completes (at once if it has).
    pub fn watch(self: &Arc<Self>, c: &Completion, token: u64) {
        if !c.watch(Arc::new(Notify { events: self.clone(), token })) {
            self.push(token);
        }
    }

    /// The next token, waiting up to `timeout` (None: for ever).
    pub fn next(&self, timeout: Option<Duration>) -> Option<u64> {
        Awaited::wait(self, timeout);
        self.queue.lock().pop_front()
    }

    /// The next token if one is queued.
    pub fn try_next(&self) -> Option<u64> {
        self.sleeping.store(false, Ordering::SeqCst);
        self.queue.lock().pop_front()
    }
}

/// Done once a token is queued (taken by `next`).
impl Awaited for Events {
    fn is_done(&self) -> bool {
        !self.queue.lock().is_empty()
    }

    fn wait(&self, timeout: Option<Duration>) -> bool {
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut q = self.queue.lock();
        while q.is_empty() {
            match deadline {
                None => self.cv.wait(&mut q),
                Some(d) => {
                    if self.cv.wait_until(&mut q, d).timed_out() {
                        break;
                    }
                }
            }
        }
        !q.is_empty()
    }

    fn polls(&self) -> bool {
        false
    }

    fn sleep_fd(&self) -> Option<BorrowedFd<'_>> {
        let (_, r) = self.wake.as_ref()?;
        let mut bytes = [0u8; 256];
        while matches!((&*r).read(&mut bytes), Ok(n) if n > 0) {}
        self.sleeping.store(true, Ordering::SeqCst);
        Some(r.as_fd())
    }
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsRawFd;

    use super::*;

    #[test]
    fn first_outcome_wins_and_is_taken_once() {
        let c = Completion::new();
        assert!(c.complete(Ok(Outcome::Sent)));
        assert!(!c.complete(Ok(Outcome::Sent)));
        assert!(c.take().is_some());
        assert!(c.take().is_none());
        assert!(c.is_done());
    }

    #[test]
    fn wait_times_out_then_sees_completion_from_another_thread() {
        let c = Completion::new();
        assert!(!c.wait(Some(Duration::from_millis(10))));
        let c2 = c.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            c2.complete(Ok(Outcome::Sent));
        });
        assert!(c.wait(None));
        t.join().unwrap();
    }

    #[test]
    fn events_are_awaited_until_a_token_is_queued_and_taken() {
        let q = Events::new();
        assert!(!Awaited::is_done(&*q) && !q.polls());
        assert!(!Awaited::wait(&*q, Some(Duration::from_millis(5))));
        let q2 = q.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            q2.push(7);
        });
        assert!(Awaited::wait(&*q, Some(Duration::from_secs(5))));
        assert!(Awaited::is_done(&*q), "waiting takes no token");
        assert_eq!(q.try_next(), Some(7));
        assert!(!Awaited::is_done(&*q) && q.try_next().is_none());
        t.join().unwrap();
    }

    #[test]
    fn a_push_wakes_a_sleep_on_the_events_descriptor() {
        let q = Events::new();
        let fd = Awaited::sleep_fd(&*q).expect("a wake-up descriptor").as_raw_fd();
        let q2 = q.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            q2.push(3);
        });
        let readable = |fd: i32, ms: i32| {
            let mut p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
            // SAFETY: one valid pollfd; the descriptor stays open while `q` lives.
            unsafe { libc::poll(&mut p, 1, ms) > 0 }
        };
        assert!(readable(fd, 5000) && Awaited::is_done(&*q));
        assert_eq!(q.try_next(), Some(3));
        // Cleared by the next sleep; pushes while nobody sleeps write nothing.
        q.push(4);
        let fd = Awaited::sleep_fd(&*q).unwrap().as_raw_fd();
        assert!(!readable(fd, 0));
        t.join().unwrap();
    }

    #[test]
    fn wait_any_wakes_on_any() {
        let cs: Vec<_> = (0..3).map(|_| Completion::new()).collect();
        assert!(!wait_any(&cs, Some(Duration::from_millis(5))));
        let c1 = cs[1].clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            c1.complete(Ok(Outcome::Sent));
        });
        assert!(wait_any(&cs, Some(Duration::from_secs(5))));
        assert!(cs[1].is_done() && !cs[0].is_done());
        t.join().unwrap();
    }
}
