//! Python buffers in and out of the core without extra copies: large send
//! buffers are borrowed (the core holds the Python buffer until the bytes are
//! on the wire), received payloads are copied once into their destination.

use std::collections::HashMap;
use std::sync::OnceLock;

use bytes::Bytes;
use mpiws_core::ErrorClass;
use mpiws_core::RecvBuffer;
use pyo3::buffer::PyUntypedBuffer;
use pyo3::prelude::*;
use pyo3::types::{PyInt, PyList, PyTuple};

use crate::errors::mpi_err;

/// Below this, copying is cheaper than holding on to the Python object; and
/// the core keeps such bytes after the send completed (`EAGER_BELOW`).
const BORROW_FROM: usize = mpiws_core::EAGER_BELOW;

struct Borrowed(PyUntypedBuffer);

impl AsRef<[u8]> for Borrowed {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: the buffer is C-contiguous (checked before `bytes_of`) and kept
        // alive, with its exporter, for as long as this value lives.
        unsafe { std::slice::from_raw_parts(self.0.buf_ptr() as *const u8, self.0.len_bytes()) }
    }
}

/// The buffer formats a send or a receive takes as given, with their item
/// sizes. The MPI package's rule decides which (`datatype._plain_type`) and
/// registers them once, at its import: the rule stays in one place, and
/// the common case is decided here without a Python call.
static PLAIN: OnceLock<HashMap<String, usize>> = OnceLock::new();

#[pyfunction]
pub fn set_plain_formats(formats: HashMap<String, usize>) {
    let _ = PLAIN.set(formats);
}

/// `obj`'s buffer when the buffer rules take it as given: an object alone
/// (not a list, tuple or int), C-contiguous, of a registered format and its
/// item size, not empty, writable if `writable`. None: the full rules decide.
pub fn plain(obj: &Bound<'_, PyAny>, writable: bool) -> Option<PyUntypedBuffer> {
    if obj.is_instance_of::<PyList>() || obj.is_instance_of::<PyTuple>() || obj.is_instance_of::<PyInt>() {
        return None;
    }
    let buf = PyUntypedBuffer::get(obj).ok()?;
    let size = *PLAIN.get()?.get(buf.format().to_str().ok()?)?;
    let taken = buf.is_c_contiguous() && buf.item_size() == size && buf.len_bytes() > 0 && !(writable && buf.readonly());
    taken.then_some(buf)
}

/// A contiguous Python buffer as `Bytes`.
pub fn to_bytes(obj: &Bound<'_, PyAny>) -> PyResult<Bytes> {
    let buf = PyUntypedBuffer::get(obj)?;
    if !buf.is_c_contiguous() {
        return Err(mpi_err(ErrorClass::Buffer, "send buffers must be C-contiguous"));
    }
    Ok(bytes_of(buf))
}

/// A C-contiguous buffer's bytes: copied when small, else borrowed.
pub fn bytes_of(buf: PyUntypedBuffer) -> Bytes {
    if buf.len_bytes() < BORROW_FROM {
        // SAFETY: C-contiguous (the callers check), alive for the copy.
        let s = unsafe { std::slice::from_raw_parts(buf.buf_ptr() as *const u8, buf.len_bytes()) };
        return Bytes::copy_from_slice(s);
    }
    Bytes::from_owner(Borrowed(buf))
}

/// A writable contiguous destination, usable with the GIL released.
pub struct Dest {
    _buf: PyUntypedBuffer,
    ptr: *mut u8,
    pub len: usize,
}

// SAFETY: the pointer is only written while the buffer (held here) is alive.
unsafe impl Send for Dest {}

impl Dest {
    pub fn get(obj: &Bound<'_, PyAny>) -> PyResult<Dest> {
        let buf = PyUntypedBuffer::get(obj)?;
        if buf.readonly() {
            return Err(mpi_err(ErrorClass::Buffer, "receive buffer is read-only"));
        }
        if !buf.is_c_contiguous() {
            return Err(mpi_err(ErrorClass::Buffer, "receive buffers must be C-contiguous"));
        }
        Ok(Dest::of(buf))
    }

    /// A buffer checked writable and C-contiguous already (`plain`).
    pub fn of(buf: PyUntypedBuffer) -> Dest {
        let ptr = buf.buf_ptr() as *mut u8;
        let len = buf.len_bytes();
        Dest { _buf: buf, ptr, len }
    }

    pub fn slice(&mut self) -> &mut [u8] {
        // SAFETY: see the Send impl; the exporter guarantees `len` bytes.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl RecvBuffer for Dest {
    fn len(&self) -> usize {
        self.len
    }

    fn as_mut_slice(&mut self) -> &mut [u8] {
        self.slice()
    }
}
