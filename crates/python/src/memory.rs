//! The memory behind `MPI.buffer` (mpi4py's buffer/memory object): bytes at
//! an address, exported through the buffer protocol, either another
//! object's (held locked, `attach`) or raw (`at`: the caller answers for
//! them). The sequence API (`len`, items, slices, `cast`, ...) is Python
//! over a memoryview of this (`python/mpiws/MPI/memory.py`).

use std::os::raw::c_int;
use std::sync::Mutex;

use pyo3::buffer::PyUntypedBuffer;
use pyo3::exceptions::{PyBufferError, PyTypeError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyTuple;

#[derive(Default)]
struct Span {
    address: usize,
    nbytes: usize,
    readonly: bool,
    obj: Option<Py<PyAny>>,
    /// The exporter's buffer, held (locked) while this memory names it:
    /// kept, never read.
    _held: Option<PyUntypedBuffer>,
}

#[derive(Default)]
struct State {
    span: Span,
    /// Buffer views of this memory still open.
    exports: usize,
    /// Memory let go of while views of it were open: held until they close.
    retired: Vec<Span>,
}

#[pyclass(subclass, module = "mpiws._core")]
pub struct Memory {
    state: Mutex<State>,
}

impl Memory {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Name `new` instead; the old memory stays held while views of it are open.
    fn replace(&self, new: Span) -> PyResult<()> {
        let mut s = self.lock();
        let old = std::mem::replace(&mut s.span, new);
        if s.exports > 0 {
            s.retired.push(old);
        }
        Ok(())
    }
}

#[pymethods]
impl Memory {
    /// `buffer()`: empty; `buffer(obj)`: `obj`'s memory, read-only if it is.
    #[new]
    #[pyo3(signature = (*args))]
    fn new(args: &Bound<'_, PyTuple>) -> PyResult<Self> {
        let m = Memory { state: Mutex::new(State::default()) };
        match args.len() {
            0 => {}
            1 => m.attach(&args.get_item(0)?, None)?,
            n => return Err(PyTypeError::new_err(format!("buffer() takes at most 1 argument ({n} given)"))),
        }
        Ok(m)
    }

    /// Name `obj`'s memory (C-contiguous): read-only if asked or if `obj`'s is.
    #[pyo3(signature = (obj, readonly=None))]
    fn attach(&self, obj: &Bound<'_, PyAny>, readonly: Option<bool>) -> PyResult<()> {
        let Ok(held) = PyUntypedBuffer::get(obj) else {
            return Err(PyTypeError::new_err(format!("expected a buffer object, got {}", obj.get_type().name()?)));
        };
        if !held.is_c_contiguous() {
            return Err(PyBufferError::new_err("the buffer is not C-contiguous"));
        }
        if readonly == Some(false) && held.readonly() {
            return Err(PyBufferError::new_err("the object's buffer is read-only"));
        }
        let span = Span {
            address: held.buf_ptr() as usize,
            nbytes: held.len_bytes(),
            readonly: readonly.unwrap_or(held.readonly()),
            obj: Some(obj.clone().unbind()),
            _held: Some(held),
        };
        self.replace(span)
    }

    /// Name `nbytes` at `address`, owned by no object.
    #[pyo3(signature = (address, nbytes, readonly=false))]
    fn at(&self, address: usize, nbytes: isize, readonly: bool) -> PyResult<()> {
        let nbytes = usize::try_from(nbytes).map_err(|_| PyValueError::new_err(format!("negative buffer length {nbytes}")))?;
        if address == 0 && nbytes > 0 {
            return Err(PyValueError::new_err("a buffer at address 0 must be empty"));
        }
        self.replace(Span { address, nbytes, readonly, ..Span::default() })
    }

    /// Forget the memory (and let go of its object): empty again.
    fn release(&self) -> PyResult<()> {
        self.replace(Span::default())
    }

    #[getter]
    fn address(&self) -> usize {
        self.lock().span.address
    }

    #[getter]
    fn nbytes(&self) -> usize {
        self.lock().span.nbytes
    }

    #[getter]
    fn readonly(&self) -> bool {
        self.lock().span.readonly
    }

    #[getter]
    fn obj(&self, py: Python<'_>) -> Option<Py<PyAny>> {
        self.lock().span.obj.as_ref().map(|o| o.clone_ref(py))
    }

    unsafe fn __getbuffer__(slf: Bound<'_, Self>, view: *mut ffi::Py_buffer, flags: c_int) -> PyResult<()> {
        if view.is_null() {
            return Err(PyBufferError::new_err("no view to fill"));
        }
        let me = slf.borrow();
        // Counted under the lock it is read under: no release slips between.
        let (address, nbytes, readonly) = {
            let mut s = me.lock();
            s.exports += 1;
            (s.span.address, s.span.nbytes, s.span.readonly)
        };
        let filled = ffi::Py_ssize_t::try_from(nbytes)
            .map_err(|_| PyBufferError::new_err("buffer too large"))
            // SAFETY: `view` is the caller's; the memory stays valid while the
            // export lasts: `replace` keeps it held until the last view closes.
            .and_then(|len| {
                match unsafe { ffi::PyBuffer_FillInfo(view, slf.as_ptr(), address as *mut _, len, readonly as c_int, flags) } {
                    0 => Ok(()),
                    _ => Err(PyErr::fetch(slf.py())),
                }
            });
        if filled.is_err() {
            me.lock().exports -= 1;
        }
        filled
    }

    unsafe fn __releasebuffer__(&self, _view: *mut ffi::Py_buffer) {
        let mut s = self.lock();
        s.exports = s.exports.saturating_sub(1);
        if s.exports == 0 {
            s.retired.clear();
        }
    }
}
