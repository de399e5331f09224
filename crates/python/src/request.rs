//! `Request`: a started operation (`mpiws_core::Request`: waits, the
//! timeout rule, events); `Message`: what a receive produced; `Events`: the
//! handler thread's queue.

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use mpiws_core::wire::frame::Payload;
use mpiws_core::ErrorClass;
use mpiws_core::{Awaited, Completion, Outcome, RecvBuffer, Request as CoreRequest};
use std::os::raw::c_int;

use pyo3::exceptions::PyBufferError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyList};

use crate::buffers::Dest;
use crate::errors::{mpi_err, IntoPy};
use crate::wait::{secs, wait_in_slices};

#[pyclass(module = "mpiws._core", frozen)]
pub struct Request {
    inner: CoreRequest,
    /// Send buffers borrowed from Python: released when the request is.
    _keep: Vec<Bytes>,
}

impl Request {
    pub fn new(inner: CoreRequest, keep: Vec<Bytes>) -> Self {
        Request { inner, _keep: keep }
    }

    /// `wait`, running `first` once, from the first slice, as soon as this
    /// thread reads the peer's stream (`mpiws_core::Request::wait_after`).
    pub fn wait_after(&self, py: Python<'_>, timeout: Option<f64>, first: impl FnOnce() + Send) -> PyResult<bool> {
        let mut first = Some(first);
        wait_in_slices(py, timeout, |slice| {
            let mut go = || {
                if let Some(f) = first.take() {
                    f();
                }
            };
            self.inner.wait_after(Some(slice), &mut go)
        })
    }

    /// Wait for `what` up to `timeout` under the timeout rule
    /// (`mpiws_core::Request::expire`), then take its outcome.
    pub fn finish(&self, py: Python<'_>, what: &str, timeout: Option<f64>) -> PyResult<Option<Message>> {
        if !self.wait(py, timeout)? {
            self.expired(py, what, timeout)?;
        }
        self.take()
    }

    /// The wait for `what` ran out of `timeout`: ERR_TIMEOUT if the
    /// operation was withdrawn, else wait on (it completes after all).
    pub fn expired(&self, py: Python<'_>, what: &str, timeout: Option<f64>) -> PyResult<()> {
        py.detach(|| self.inner.expire(what, secs(timeout))).py_err()?;
        self.wait(py, None).map(drop)
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

    /// The next token, waiting up to `timeout` seconds (None: for ever);
    /// meanwhile reading the stream that the receive `reading` expects its
    /// message on (`mpiws_core::Request::wait_other`).
    #[pyo3(signature = (timeout=None, reading=None))]
    fn next(&self, py: Python<'_>, timeout: Option<f64>, reading: Option<Bound<'_, Request>>) -> PyResult<Option<u64>> {
        if let Some(t) = self.inner.try_next() {
            return Ok(Some(t));
        }
        let q: &mpiws_core::Events = &self.inner;
        match reading.as_ref().map(|r| r.get()) {
            Some(r) => wait_in_slices(py, timeout, |slice| r.inner.wait_other(q, Some(slice)))?,
            None => wait_in_slices(py, timeout, |slice| Awaited::wait(q, Some(slice)))?,
        };
        Ok(self.inner.try_next())
    }

    fn push(&self, token: u64) {
        self.inner.push(token);
    }
}

#[pymethods]
impl Request {
    #[getter]
    fn is_recv(&self) -> bool {
        self.inner.is_recv()
    }

    /// Wait up to `timeout` seconds (None: for ever); true once complete.
    #[pyo3(signature = (timeout=None))]
    pub fn wait(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<bool> {
        if self.inner.completion().is_done() {
            return Ok(true);
        }
        wait_in_slices(py, timeout, |slice| self.inner.wait(Some(slice)))
    }

    fn done(&self) -> bool {
        self.inner.completion().is_done()
    }

    /// The outcome, once: None for a send, a Message for a receive. Raises
    /// the operation's error as MPI.Exception.
    pub fn take(&self) -> PyResult<Option<Message>> {
        let comm = self.inner.comm();
        match self.inner.take() {
            None => Err(mpi_err(ErrorClass::Request, "request not complete, or its outcome was already taken")),
            Some(r) => match r.py_err()? {
                Outcome::Sent => Ok(None),
                Outcome::Cancelled => Ok(Some(Message::new(-1, -1, vec![], Payload::default(), true, None))),
                Outcome::Received { env, payload } => {
                    let r = comm.received(env, payload);
                    Ok(Some(Message::new(r.source, r.tag, r.parts, r.payload, false, None)))
                }
                Outcome::Placed { env, len, buffer } => {
                    let r = comm.received(env, Payload::default());
                    Ok(Some(Message::new(r.source, r.tag, r.parts, r.payload, false, Some((len, buffer)))))
                }
            },
        }
    }

    /// (source, tag, nbytes) of a completed receive, its outcome left to
    /// `take`; None if not complete, taken, or failed.
    fn peek(&self) -> Option<(i64, i64, usize)> {
        let (env, len) = self.inner.completion().peek_received()?;
        let r = self.inner.comm().received(env, Payload::default());
        Some((r.source, r.tag, len))
    }

    /// Push `token` to `events` when the operation completes.
    fn watch(&self, events: &Events, token: u64) {
        events.inner.watch(self.inner.completion(), token);
    }

    /// Push `token` to `events` when the receiver has stored the message (a
    /// tracked send; the receiver is asked to say so now). False if untracked.
    fn watch_stored(&self, events: &Events, token: u64) -> bool {
        let Some(stored) = self.inner.ask_stored() else { return false };
        events.inner.watch(stored, token);
        true
    }

    /// Push `token` to `events` when a receive took the message (a
    /// standard send; asked of the receiver now unless asked at the start).
    /// False if not a tracked standard send.
    fn watch_matched(&self, events: &Events, token: u64) -> bool {
        let Some(m) = self.inner.matched() else { return false };
        events.inner.watch(&m, token);
        true
    }

    /// Whether a tracked send was stored: None (not yet), or the error it met.
    fn stored_state(&self) -> Option<(bool, Option<String>, i32)> {
        state_of(self.inner.stored()?)
    }

    /// Whether a watched standard send was matched: as `stored_state`.
    fn matched_state(&self) -> Option<(bool, Option<String>, i32)> {
        state_of(self.inner.matched_asked()?)
    }

    /// Withdraw a send that timed out, unless a receive took it already:
    /// true if withdrawn (it will never be received). For a receive: `cancel`.
    pub fn withdraw(&self, py: Python<'_>) -> bool {
        py.detach(|| self.inner.withdraw())
    }

    /// Withdraw a receive that nothing matched yet; true if withdrawn.
    pub fn cancel(&self) -> bool {
        self.inner.is_recv() && self.inner.withdraw()
    }

    /// The timeout rule (`mpiws_core::Request::expire`): the wait for
    /// `what` ran out; raises ERR_TIMEOUT if the operation was withdrawn
    /// (or cannot be), returns once it completed after all.
    fn expire(&self, py: Python<'_>, what: &str) -> PyResult<()> {
        self.expired(py, what, None)
    }
}

/// Block until any of `requests` completes or `timeout` passes.
#[pyfunction]
#[pyo3(signature = (requests, timeout=None))]
pub fn wait_any(py: Python<'_>, requests: Vec<PyRef<'_, Request>>, timeout: Option<f64>) -> PyResult<bool> {
    let cs: Vec<Arc<Completion>> = requests.iter().map(|r| r.inner.completion().clone()).collect();
    if cs.iter().any(|c| c.is_done()) {
        return Ok(true);
    }
    wait_in_slices(py, timeout, |slice| mpiws_core::wait_any(&cs, Some(slice)))
}

#[pyclass(module = "mpiws._core", frozen)]
pub struct Message {
    #[pyo3(get)]
    pub(crate) source: i64,
    #[pyo3(get)]
    pub(crate) tag: i64,
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
    /// The parts, sliced where each lies in one chunk (`Payload::into_parts`).
    fn pieces(&self) -> Vec<Bytes> {
        self.payload.clone().into_parts(&self.parts)
    }

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

    /// The whole payload, read-only, not copied where it came in one piece
    /// (a pickle stream to load from: unpickling makes the one copy).
    fn view(&self) -> View {
        let mut whole = self.payload.clone().into_parts(&[]);
        View { bytes: whole.pop().unwrap_or_default() }
    }

    /// The payload split at `parts`: the first read-only (`view`), the rest
    /// copied into (writable) bytearrays, ready for `pickle.loads(first,
    /// buffers=rest)`: an array out of band is copied once.
    fn split<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let list = PyList::empty(py);
        for (i, p) in self.pieces().into_iter().enumerate() {
            if i == 0 {
                list.append(View { bytes: p })?;
            } else {
                list.append(PyByteArray::new(py, &p))?;
            }
        }
        Ok(list)
    }

    /// Each part as bytes (a collective's result blocks).
    fn blocks<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        if self.parts.is_empty() {
            return Ok(PyList::empty(py));
        }
        PyList::new(py, self.pieces().iter().map(|p| PyBytes::new(py, p)))
    }

    /// Copy the payload into a writable buffer (the receive's own buffer if
    /// it was read there already); MPI_ERR_TRUNCATE if it does not fit.
    /// With `offsets`, part i goes to byte offset `offsets[i]`.
    #[pyo3(signature = (buffer, offsets=None))]
    pub(crate) fn copy_into(&self, py: Python<'_>, buffer: &Bound<'_, PyAny>, offsets: Option<Vec<usize>>) -> PyResult<usize> {
        if let Some(len) = self.placed {
            return Ok(len);
        }
        let mut dest = Dest::get(buffer)?;
        if let Some(offsets) = offsets {
            let pieces = self.pieces();
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
        if n < DETACH_FROM {
            self.payload.copy_to(&mut dest.slice()[..n]);
        } else {
            py.detach(|| self.payload.copy_to(&mut dest.slice()[..n]));
        }
        Ok(n)
    }
}

/// Copies from this size let other Python threads run meanwhile; a
/// smaller one is over before the GIL would change hands.
const DETACH_FROM: usize = 64 * 1024;

/// Received bytes lent read-only through the buffer protocol, not copied.
#[pyclass(module = "mpiws._core", frozen)]
pub struct View {
    bytes: Bytes,
}

#[pymethods]
impl View {
    fn __len__(&self) -> usize {
        self.bytes.len()
    }

    unsafe fn __getbuffer__(slf: Bound<'_, Self>, view: *mut ffi::Py_buffer, flags: c_int) -> PyResult<()> {
        let bytes = &slf.get().bytes;
        let len = ffi::Py_ssize_t::try_from(bytes.len()).map_err(|_| PyBufferError::new_err("buffer too large"))?;
        // SAFETY: `view` is the caller's. The bytes live as long as this
        // object, which the view holds (PyBuffer_FillInfo takes a reference),
        // and are never written: the view is read-only (a writable request fails).
        match unsafe { ffi::PyBuffer_FillInfo(view, slf.as_ptr(), bytes.as_ptr() as *mut _, len, 1, flags) } {
            0 => Ok(()),
            _ => Err(PyErr::fetch(slf.py())),
        }
    }

    unsafe fn __releasebuffer__(&self, _view: *mut ffi::Py_buffer) {}
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
