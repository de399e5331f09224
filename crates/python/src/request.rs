//! `Request`: a started operation; `Message`: what a receive produced.

use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use mpiws_core::wire::frame::Payload;
use mpiws_core::Comm as CoreComm;
use mpiws_core::ErrorClass;
use mpiws_core::RecvId;
use mpiws_core::ANY_SOURCE;
use mpiws_core::{Completion, Outcome, RecvBuffer, Tracking};
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyList};

use crate::buffers::Dest;
use crate::errors::{mpi_err, IntoPy};

/// Wake at least this often while blocked, to let Ctrl-C through.
const SIGNAL_SLICE: Duration = Duration::from_millis(100);

/// Run `step(slice)` with the GIL released until it returns true or
/// `timeout` (seconds) passes, checking for signals between slices.
pub fn wait_in_slices(py: Python<'_>, timeout: Option<f64>, mut step: impl FnMut(Duration) -> bool + Send) -> PyResult<bool> {
    let deadline = crate::comm::secs(timeout).and_then(|d| Instant::now().checked_add(d));
    loop {
        let slice = match deadline {
            None => SIGNAL_SLICE,
            Some(d) => d.saturating_duration_since(Instant::now()).min(SIGNAL_SLICE),
        };
        if py.detach(|| step(slice)) {
            return Ok(true);
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Ok(false);
        }
        py.check_signals()?;
    }
}

#[pyclass(module = "mpiws._core", frozen)]
pub struct Request {
    comm: CoreComm,
    completion: Arc<Completion>,
    recv_id: Option<RecvId>,
    /// For a receive, the local rank it expects a message from (ANY_SOURCE: -2).
    source: i64,
    /// Send buffers borrowed from Python: released when the request is.
    _keep: Vec<Bytes>,
    #[pyo3(get)]
    is_recv: bool,
    /// A tracked send: told when the receiver stored (and matched) the message.
    track: Option<Tracking>,
    /// A send's destination (local rank).
    dest: i64,
    /// A tracked send's "matched", once asked for (`watch_matched`).
    matched: OnceLock<Option<Arc<Completion>>>,
}

impl Request {
    pub fn send(comm: CoreComm, completion: Arc<Completion>, keep: Vec<Bytes>, track: Option<Tracking>, dest: i64) -> Self {
        Request { comm, completion, recv_id: None, source: ANY_SOURCE, _keep: keep, is_recv: false, track, dest, matched: OnceLock::new() }
    }

    pub fn recv(comm: CoreComm, completion: Arc<Completion>, recv_id: Option<RecvId>, source: i64) -> Self {
        Request { comm, completion, recv_id, source, _keep: Vec::new(), is_recv: true, track: None, dest: -1, matched: OnceLock::new() }
    }
}

/// Tokens of completed operations, for the handler thread (`MPI.events`).
#[pyclass(module = "mpiws._core", frozen)]
pub struct Events {
    inner: Arc<mpiws_core::Events>,
}

#[pymethods]
impl Events {
    #[new]
    fn new() -> Self {
        Events { inner: mpiws_core::Events::new() }
    }

    /// The next token, waiting up to `timeout` seconds (None: for ever).
    #[pyo3(signature = (timeout=None))]
    fn next(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Option<u64>> {
        let mut got = None;
        let q = self.inner.clone();
        wait_in_slices(py, timeout, |slice| {
            got = q.next(Some(slice));
            got.is_some()
        })?;
        Ok(got)
    }

    fn push(&self, token: u64) {
        self.inner.push(token);
    }
}

impl Request {
    /// `wait` for a receive, running `first` once, from the first slice,
    /// as soon as this thread reads the peer's stream (`Comm::wait_recv_after`).
    pub fn wait_after(&self, py: Python<'_>, timeout: Option<f64>, first: impl FnOnce() + Send) -> PyResult<bool> {
        let (c, comm, source) = (self.completion.clone(), self.comm.clone(), self.source);
        let mut first = Some(first);
        wait_in_slices(py, timeout, |slice| {
            let mut go = || {
                if let Some(f) = first.take() {
                    f();
                }
            };
            comm.wait_recv_after(&c, source, Some(slice), &mut go)
        })
    }

    fn matched_completion(&self) -> Option<Arc<Completion>> {
        self.matched.get_or_init(|| self.comm.ask_match(self.track.as_ref()?)).clone()
    }
}

#[pymethods]
impl Request {
    /// Wait up to `timeout` seconds (None: for ever); true once complete.
    #[pyo3(signature = (timeout=None))]
    pub fn wait(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<bool> {
        if self.completion.is_done() {
            return Ok(true);
        }
        let (c, comm, source) = (self.completion.clone(), self.comm.clone(), self.source);
        wait_in_slices(py, timeout, |slice| comm.wait_recv(&c, source, Some(slice)))
    }

    fn done(&self) -> bool {
        self.completion.is_done()
    }

    /// The outcome, once: None for a send, a Message for a receive. Raises
    /// the operation's error as MPI.Exception.
    pub fn take(&self) -> PyResult<Option<Message>> {
        match self.completion.take() {
            None => Err(mpi_err(ErrorClass::Request, "request not complete, or its outcome was already taken")),
            Some(r) => match r.py_err()? {
                Outcome::Sent => Ok(None),
                Outcome::Cancelled => Ok(Some(Message::new(-1, -1, vec![], Payload::default(), true, None))),
                Outcome::Received { env, payload } => {
                    let r = self.comm.received(env, payload);
                    Ok(Some(Message::new(r.source, r.tag, r.parts, r.payload, false, None)))
                }
                Outcome::Placed { env, len, buffer } => {
                    let r = self.comm.received(env, Payload::default());
                    Ok(Some(Message::new(r.source, r.tag, r.parts, r.payload, false, Some((len, buffer)))))
                }
            },
        }
    }

    /// (source, tag, nbytes) of a completed receive, its outcome left to
    /// `take`; None if not complete, taken, or failed.
    fn peek(&self) -> Option<(i64, i64, usize)> {
        let (env, len) = self.completion.peek_received()?;
        let r = self.comm.received(env, Payload::default());
        Some((r.source, r.tag, len))
    }

    /// Push `token` to `events` when the operation completes.
    fn watch(&self, events: &Events, token: u64) {
        events.inner.watch(&self.completion, token);
    }

    /// Push `token` to `events` when the receiver has stored the message (a
    /// tracked send; the receiver is asked to say so now). False if untracked.
    fn watch_stored(&self, events: &Events, token: u64) -> bool {
        let Some(t) = &self.track else { return false };
        events.inner.watch(&t.stored, token);
        if let Ok(world) = self.comm.world_rank(self.dest) {
            self.comm.instance.ask_ack(world);
        }
        true
    }

    /// Push `token` to `events` when a receive took the message (a
    /// standard send; asked of the receiver now unless asked at the start).
    /// False if not a tracked standard send.
    fn watch_matched(&self, events: &Events, token: u64) -> bool {
        let Some(m) = self.matched_completion() else { return false };
        events.inner.watch(&m, token);
        true
    }

    /// Whether a tracked send was stored: None (not yet), or the error it met.
    fn stored_state(&self) -> Option<(bool, Option<String>, i32)> {
        state_of(&self.track.as_ref()?.stored)
    }

    /// Whether a watched standard send was matched: as `stored_state`.
    fn matched_state(&self) -> Option<(bool, Option<String>, i32)> {
        state_of(self.matched.get()?.as_ref()?)
    }

    /// Withdraw a send that timed out, unless a receive took it already:
    /// true if withdrawn (it will never be received). For a receive: `cancel`.
    pub fn withdraw(&self, py: Python<'_>) -> PyResult<bool> {
        if self.is_recv {
            return Ok(self.cancel());
        }
        let Some(track) = &self.track else { return Ok(true) }; // untracked: cannot be asked
                                                                // Unreachable to ask: the message is not sent again from here either.
        Ok(py.detach(|| self.comm.withdraw(track)).unwrap_or(true))
    }

    /// Withdraw a receive that nothing matched yet; true if withdrawn.
    pub fn cancel(&self) -> bool {
        self.recv_id.is_some_and(|id| self.comm.cancel_recv(id))
    }
}

/// Block until any of `requests` completes or `timeout` passes.
#[pyfunction]
#[pyo3(signature = (requests, timeout=None))]
pub fn wait_any(py: Python<'_>, requests: Vec<PyRef<'_, Request>>, timeout: Option<f64>) -> PyResult<bool> {
    let cs: Vec<Arc<Completion>> = requests.iter().map(|r| r.completion.clone()).collect();
    if cs.iter().any(|c| c.is_done()) {
        return Ok(true);
    }
    wait_in_slices(py, timeout, |slice| mpiws_core::wait_any(&cs, Some(slice)))
}

#[pyclass(module = "mpiws._core", frozen)]
pub struct Message {
    #[pyo3(get)]
    source: i64,
    #[pyo3(get)]
    tag: i64,
    #[pyo3(get)]
    parts: Vec<u64>,
    #[pyo3(get)]
    cancelled: bool,
    payload: Payload,
    /// Already read into the receive's buffer: its length, and the buffer
    /// (released here, where the GIL is held).
    placed: Option<usize>,
    _buffer: Mutex<Option<Box<dyn RecvBuffer>>>,
}

impl Message {
    fn new(
        source: i64,
        tag: i64,
        parts: Vec<u64>,
        payload: Payload,
        cancelled: bool,
        placed: Option<(usize, Box<dyn RecvBuffer>)>,
    ) -> Self {
        let (placed, buffer) = match placed {
            Some((len, b)) => (Some(len), Some(b)),
            None => (None, None),
        };
        Message { source, tag, parts, cancelled, payload, placed, _buffer: Mutex::new(buffer) }
    }
}

#[pymethods]
impl Message {
    #[getter]
    fn nbytes(&self) -> usize {
        self.placed.unwrap_or_else(|| self.payload.len())
    }

    /// The whole payload as bytes.
    fn bytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        PyBytes::new_with(py, self.payload.len(), |dst| {
            self.payload.copy_to(dst);
            Ok(())
        })
    }

    /// The payload split at `parts`: the first as bytes, the rest as
    /// (writable) bytearrays, ready for `pickle.loads(first, buffers=rest)`.
    fn split<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let pieces = py.detach(|| self.payload.split_parts(&self.parts));
        let list = PyList::empty(py);
        for (i, p) in pieces.iter().enumerate() {
            if i == 0 {
                list.append(PyBytes::new(py, p))?;
            } else {
                list.append(PyByteArray::new(py, p))?;
            }
        }
        Ok(list)
    }

    /// Each part as bytes (a collective's result blocks).
    fn blocks<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        if self.parts.is_empty() {
            return Ok(PyList::empty(py));
        }
        let pieces = py.detach(|| self.payload.split_parts(&self.parts));
        PyList::new(py, pieces.iter().map(|p| PyBytes::new(py, p)))
    }

    /// Copy the payload into a writable buffer (the receive's own buffer if
    /// it was read there already); MPI_ERR_TRUNCATE if it does not fit.
    /// With `offsets`, part i goes to byte offset `offsets[i]`.
    #[pyo3(signature = (buffer, offsets=None))]
    fn copy_into(&self, py: Python<'_>, buffer: &Bound<'_, PyAny>, offsets: Option<Vec<usize>>) -> PyResult<usize> {
        if let Some(len) = self.placed {
            return Ok(len);
        }
        let mut dest = Dest::get(buffer)?;
        if let Some(offsets) = offsets {
            let pieces = py.detach(|| self.payload.split_parts(&self.parts));
            let room = dest.len;
            let slice = dest.slice();
            for (p, at) in pieces.iter().zip(offsets) {
                if at + p.len() > room {
                    return Err(mpi_err(
                        ErrorClass::Truncate,
                        format!("a block of {} bytes at offset {at} does not fit a receive buffer of {room} bytes", p.len()),
                    ));
                }
                slice[at..at + p.len()].copy_from_slice(p);
            }
            return Ok(pieces.iter().map(|p| p.len()).sum());
        }
        let n = self.payload.len();
        if n > dest.len {
            return Err(mpi_err(ErrorClass::Truncate, format!("message of {n} bytes truncated: receive buffer holds {} bytes", dest.len)));
        }
        py.detach(|| self.payload.copy_to(&mut dest.slice()[..n]));
        Ok(n)
    }
}

/// None while `c` is open; then (ok, error message, error class).
fn state_of(c: &Completion) -> Option<(bool, Option<String>, i32)> {
    if !c.is_done() {
        return None;
    }
    Some(match c.peek_error() {
        Some(e) => (false, Some(e.message), e.class.code()),
        None => (true, None, 0),
    })
}
