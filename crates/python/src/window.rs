//! `Window`: an RMA window of the core (`mpiws_core::Window`). It holds
//! the Python buffers of its memory (locked, so they stay where they are)
//! for as long as the core may write to them; an operation's origin and
//! result buffers are held by its Request until it completes.

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use mpiws_core::Completion;
use mpiws_core::ErrorClass;
use mpiws_core::{RawDest, Window as CoreWindow};
use pyo3::buffer::PyUntypedBuffer;
use pyo3::prelude::*;

use crate::buffers::to_bytes;
use crate::comm::Comm;
use crate::errors::{mpi_err, IntoPy};
use crate::request::Request;
use crate::wait::{secs, wait_in_slices};

/// A writable contiguous Python buffer, held.
struct Held(PyUntypedBuffer);

impl Held {
    fn get(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Held> {
        let buf = PyUntypedBuffer::get(obj)?;
        if buf.readonly() && buf.len_bytes() > 0 {
            return Err(mpi_err(ErrorClass::Buffer, format!("{what} is read-only")));
        }
        if !buf.is_c_contiguous() {
            return Err(mpi_err(ErrorClass::Buffer, format!("{what} must be C-contiguous")));
        }
        Ok(Held(buf))
    }

    fn span(&self) -> (usize, usize) {
        (self.0.buf_ptr() as usize, self.0.len_bytes())
    }

    fn dest(&self) -> RawDest {
        let (ptr, len) = self.span();
        RawDest { ptr, len }
    }
}

impl AsRef<[u8]> for Held {
    fn as_ref(&self) -> &[u8] {
        let (ptr, len) = self.span();
        if len == 0 {
            return &[];
        }
        // SAFETY: contiguous (checked) and held alive with its exporter.
        unsafe { std::slice::from_raw_parts(ptr as *const u8, len) }
    }
}

/// Keeps `held` with the request until it is released.
fn keep(held: Held) -> Bytes {
    Bytes::from_owner(held)
}

#[pyclass(module = "mpiws._core", frozen)]
pub struct Window {
    /// First: dropping it unregisters the memory before `memory` lets go.
    inner: CoreWindow,
    /// The window's memory, attached spans too, by address.
    memory: Mutex<Vec<Held>>,
}

fn wait(py: Python<'_>, win: &CoreWindow, c: Arc<Completion>, target: Option<u32>) -> PyResult<()> {
    let instance = win.comm.instance.clone();
    let cc = c.clone();
    wait_in_slices(py, None, move |slice| instance.wait_for(&*cc, target, Some(slice)))?;
    match c.take() {
        Some(Err(e)) => Err(e).py_err(),
        _ => Ok(()),
    }
}

#[pymethods]
impl Window {
    /// Create a window over `comm` (collective) on `memory` (None: empty;
    /// `dynamic`: memory is attached later).
    #[staticmethod]
    #[pyo3(signature = (comm, memory, disp_unit, dynamic=false))]
    fn create(comm: &Comm, memory: Option<&Bound<'_, PyAny>>, disp_unit: u64, dynamic: bool) -> PyResult<Window> {
        let held = memory.map(|m| Held::get(m, "window memory")).transpose()?;
        let spans = match (&held, dynamic) {
            (_, true) => Vec::new(),
            (Some(h), false) => vec![h.span()],
            (None, false) => vec![(0, 0)],
        };
        // SAFETY: the spans are `held` below, for as long as `inner` lives.
        let inner = unsafe { CoreWindow::create(&comm.inner, spans, disp_unit, dynamic) }.py_err()?;
        Ok(Window { inner, memory: Mutex::new(held.into_iter().collect()) })
    }

    /// The communicator the window derived (its members, for the group).
    #[getter]
    fn comm(&self) -> Comm {
        Comm::from(self.inner.comm.clone())
    }

    fn put(&self, target: i64, disp: u64, data: &Bound<'_, PyAny>) -> PyResult<Request> {
        let data = to_bytes(data)?;
        let c = self.inner.put(target, disp, data.clone()).py_err()?;
        Ok(self.request(c, vec![data], target))
    }

    fn get(&self, target: i64, disp: u64, dest: &Bound<'_, PyAny>) -> PyResult<Request> {
        let held = Held::get(dest, "get's origin buffer")?;
        // SAFETY: `held` goes with the request, released once it completed.
        let c = unsafe { self.inner.get(target, disp, held.dest()) }.py_err()?;
        Ok(self.request(c, vec![keep(held)], target))
    }

    /// Accumulate `data` with `op` (the core's names of op and element
    /// type) over `len` target bytes; with `fetch`, get them from before.
    #[pyo3(signature = (target, disp, data, len, op, dtype, fetch=None))]
    #[allow(clippy::too_many_arguments)]
    fn accumulate(
        &self,
        target: i64,
        disp: u64,
        data: &Bound<'_, PyAny>,
        len: usize,
        op: &str,
        dtype: &str,
        fetch: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Request> {
        let data = to_bytes(data)?;
        let held = fetch.map(|f| Held::get(f, "result buffer")).transpose()?;
        let dest = held.as_ref().map(|h| h.dest());
        // SAFETY: as in `get`.
        let c = unsafe { self.inner.accumulate(target, disp, data.clone(), len, (op, dtype), dest) }.py_err()?;
        let mut k = vec![data];
        k.extend(held.map(keep));
        Ok(self.request(c, k, target))
    }

    fn compare_and_swap(
        &self,
        target: i64,
        disp: u64,
        origin: &Bound<'_, PyAny>,
        compare: &Bound<'_, PyAny>,
        result: &Bound<'_, PyAny>,
    ) -> PyResult<Request> {
        let (origin, compare) = (to_bytes(origin)?, to_bytes(compare)?);
        let held = Held::get(result, "result buffer")?;
        // SAFETY: as in `get`.
        let c = unsafe { self.inner.compare_and_swap(target, disp, origin.clone(), compare.clone(), held.dest()) }.py_err()?;
        Ok(self.request(c, vec![origin, compare, keep(held)], target))
    }

    /// Passive target: wait until the lock at `target` is granted.
    fn lock(&self, py: Python<'_>, target: i64, exclusive: bool) -> PyResult<()> {
        let c = self.inner.lock(target, exclusive).py_err()?;
        wait(py, &self.inner, c, self.world(target))
    }

    /// Lock every rank (shared): asked of all at once, then waited for.
    fn lock_all(&self, py: Python<'_>) -> PyResult<()> {
        let cs = (0..self.inner.comm.size() as i64).map(|t| self.inner.lock(t, false)).collect::<Result<Vec<_>, _>>().py_err()?;
        for (t, c) in cs.into_iter().enumerate() {
            wait(py, &self.inner, c, self.world(t as i64))?;
        }
        Ok(())
    }

    /// Operations to `target` done there, then the lock let go of.
    fn unlock(&self, py: Python<'_>, target: i64) -> PyResult<()> {
        let flushed = self.flush(py, Some(target));
        let c = self.inner.unlock(target).py_err()?;
        wait(py, &self.inner, c, self.world(target))?;
        flushed
    }

    fn unlock_all(&self, py: Python<'_>) -> PyResult<()> {
        let flushed = self.flush(py, None);
        let cs = (0..self.inner.comm.size() as i64).map(|t| self.inner.unlock(t)).collect::<Result<Vec<_>, _>>().py_err()?;
        for (t, c) in cs.into_iter().enumerate() {
            wait(py, &self.inner, c, self.world(t as i64))?;
        }
        flushed
    }

    /// Wait until the operations to `target` (None: all) are done at their targets.
    #[pyo3(signature = (target=None))]
    fn flush(&self, py: Python<'_>, target: Option<i64>) -> PyResult<()> {
        let win = &self.inner;
        let mut out = Ok(true);
        wait_in_slices(py, None, |slice| {
            out = win.flush(target, Some(slice));
            !matches!(out, Ok(false))
        })?;
        out.map(|_| ()).py_err()
    }

    #[pyo3(signature = (timeout=None))]
    fn fence(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<()> {
        self.flush(py, None)?;
        let win = &self.inner;
        py.detach(|| win.fence(secs(timeout))).py_err()
    }

    fn post(&self, group: Vec<i64>) -> PyResult<()> {
        self.inner.post(&group).py_err()
    }

    fn start(&self, py: Python<'_>, group: Vec<i64>) -> PyResult<()> {
        let win = &self.inner;
        let mut out = Ok(false);
        wait_in_slices(py, None, |slice| {
            out = win.start_epoch(&group, Some(slice));
            !matches!(out, Ok(false))
        })?;
        out.map(|_| ()).py_err()
    }

    fn complete(&self, py: Python<'_>, group: Vec<i64>) -> PyResult<()> {
        self.flush(py, None)?;
        self.inner.complete(&group).py_err()
    }

    /// Every origin in `group` completed; with `timeout` 0, just look.
    #[pyo3(signature = (group, timeout=None))]
    fn wait(&self, py: Python<'_>, group: Vec<i64>, timeout: Option<f64>) -> PyResult<bool> {
        let win = &self.inner;
        if timeout == Some(0.0) {
            return win.wait_epoch(&group, Some(std::time::Duration::ZERO)).py_err();
        }
        let mut out = Ok(false);
        wait_in_slices(py, timeout, |slice| {
            out = win.wait_epoch(&group, Some(slice));
            !matches!(out, Ok(false))
        })?;
        out.py_err()
    }

    fn attach(&self, memory: &Bound<'_, PyAny>) -> PyResult<()> {
        let held = Held::get(memory, "attached memory")?;
        let (address, len) = held.span();
        // SAFETY: held in `memory` until detached or the window is dropped.
        unsafe { self.inner.attach(address, len) }.py_err()?;
        self.memory.lock().unwrap_or_else(|e| e.into_inner()).push(held);
        Ok(())
    }

    fn detach(&self, memory: &Bound<'_, PyAny>) -> PyResult<()> {
        let address = PyUntypedBuffer::get(memory)?.buf_ptr() as usize;
        self.inner.detach(address).py_err()?;
        let mut m = self.memory.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = m.iter().rposition(|h| h.span().0 == address) {
            m.remove(i);
        }
        Ok(())
    }

    /// Collective: own operations done, a barrier, the memory let go of.
    fn free(&self, py: Python<'_>) -> PyResult<()> {
        let win = &self.inner;
        let out = py.detach(|| win.free(None));
        self.memory.lock().unwrap_or_else(|e| e.into_inner()).clear();
        out.py_err()
    }
}

impl Window {
    fn world(&self, target: i64) -> Option<u32> {
        self.inner.comm.world_rank(target).ok()
    }

    fn request(&self, c: Arc<Completion>, keep: Vec<Bytes>, target: i64) -> Request {
        Request::new(mpiws_core::Request::send(self.inner.comm.clone(), c, target, None), keep)
    }
}
