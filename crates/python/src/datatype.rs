//! `_core.Layout`: the core's datatype layouts (`mpi::datatype`) for the
//! Python `Datatype` (python/mpiws/MPI/datatype.py), which keeps names,
//! envelopes and contents and asks this for bounds and for packing.

use mpiws_core::ErrorClass;
use mpiws_core::Layout as CoreLayout;
use pyo3::buffer::PyUntypedBuffer;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::buffers::Dest;
use crate::errors::{mpi_err, IntoPy};

#[pyclass(frozen, module = "mpiws._core")]
pub struct Layout(CoreLayout);

/// A readable C-contiguous buffer's bytes, for the duration of a call.
struct Source(PyUntypedBuffer);

impl Source {
    fn get(obj: &Bound<'_, PyAny>) -> PyResult<Source> {
        let buf = PyUntypedBuffer::get(obj)?;
        if !buf.is_c_contiguous() {
            return Err(mpi_err(ErrorClass::Buffer, "buffers must be C-contiguous"));
        }
        Ok(Source(buf))
    }

    fn slice(&self) -> &[u8] {
        // SAFETY: the buffer is C-contiguous and held for as long as `self`.
        unsafe { std::slice::from_raw_parts(self.0.buf_ptr() as *const u8, self.0.len_bytes()) }
    }
}

fn wrap(l: mpiws_core::Result<CoreLayout>) -> PyResult<Layout> {
    l.py_err().map(Layout)
}

#[pymethods]
impl Layout {
    /// A predefined type: `parts` are its basic elements' (displacement, size).
    #[staticmethod]
    fn named(parts: Vec<(i64, u64)>, extent: i64, align: u64) -> PyResult<Layout> {
        wrap(CoreLayout::named(&parts, extent, align))
    }

    fn contiguous(&self, count: i64) -> PyResult<Layout> {
        wrap(self.0.contiguous(count))
    }

    fn vector(&self, count: i64, blocklength: i64, stride: i64) -> PyResult<Layout> {
        wrap(self.0.vector(count, blocklength, stride))
    }

    fn hvector(&self, count: i64, blocklength: i64, stride: i64) -> PyResult<Layout> {
        wrap(self.0.hvector(count, blocklength, stride))
    }

    fn indexed(&self, blocklengths: Vec<i64>, displacements: Vec<i64>) -> PyResult<Layout> {
        wrap(self.0.indexed(&blocklengths, &displacements))
    }

    fn hindexed(&self, blocklengths: Vec<i64>, displacements: Vec<i64>) -> PyResult<Layout> {
        wrap(self.0.hindexed(&blocklengths, &displacements))
    }

    #[staticmethod]
    fn structure(blocklengths: Vec<i64>, displacements: Vec<i64>, types: Vec<PyRef<'_, Layout>>) -> PyResult<Layout> {
        let types: Vec<&CoreLayout> = types.iter().map(|t| &t.0).collect();
        wrap(CoreLayout::structure(&blocklengths, &displacements, &types))
    }

    fn resized(&self, lb: i64, extent: i64) -> PyResult<Layout> {
        wrap(self.0.resized(lb, extent))
    }

    fn subarray(&self, sizes: Vec<i64>, subsizes: Vec<i64>, starts: Vec<i64>, order: i64) -> PyResult<Layout> {
        wrap(self.0.subarray(&sizes, &subsizes, &starts, order))
    }

    #[allow(clippy::too_many_arguments)]
    fn darray(
        &self,
        size: i64,
        rank: i64,
        gsizes: Vec<i64>,
        distribs: Vec<i64>,
        dargs: Vec<i64>,
        psizes: Vec<i64>,
        order: i64,
    ) -> PyResult<Layout> {
        wrap(self.0.darray(size, rank, &gsizes, &distribs, &dargs, &psizes, order))
    }

    #[getter]
    fn size(&self) -> u64 {
        self.0.size
    }

    /// (lb, ub, true_lb, true_ub)
    #[getter]
    fn bounds(&self) -> (i64, i64, i64, i64) {
        (self.0.lb, self.0.ub, self.0.true_lb, self.0.true_ub)
    }

    /// Whether items of this type are their bytes side by side from the
    /// origin (a message of them needs no packing).
    #[getter]
    fn dense(&self) -> bool {
        self.0.lb == 0 && self.0.extent() == self.0.size as i64 && self.0.true_lb == 0 && self.0.true_ub == self.0.size as i64
    }

    /// The bytes `count` items touch, `[lo, hi)` from the origin.
    fn span(&self, count: u64) -> PyResult<(i64, i64)> {
        self.0.span(count).py_err()
    }

    /// `count` items of `src` (its first byte at displacement `origin`), packed.
    fn pack<'py>(&self, py: Python<'py>, count: u64, src: &Bound<'py, PyAny>, origin: i64) -> PyResult<Bound<'py, PyBytes>> {
        let src = Source::get(src)?;
        let len = usize::try_from(self.0.size as u128 * count as u128).map_err(|_| mpi_err(ErrorClass::Count, "message too large"))?;
        let mut failed = None;
        let out = PyBytes::new_with(py, len, |out| {
            failed = self.0.pack(count, src.slice(), origin, out).err();
            Ok(())
        })?;
        match failed {
            Some(e) => Err(crate::errors::to_py(e)),
            None => Ok(out),
        }
    }

    /// Spread `packed` over `count` items of `dst`; the bytes taken.
    fn unpack(&self, count: u64, packed: &Bound<'_, PyAny>, dst: &Bound<'_, PyAny>, origin: i64) -> PyResult<usize> {
        let packed = Source::get(packed)?;
        let mut dst = Dest::get(dst)?;
        self.0.unpack(count, packed.slice(), dst.slice(), origin).py_err()
    }

    /// How many basic elements `nbytes` packed bytes hold (None: they end inside one).
    /// The contiguous pieces of `count` items: (byte offset, length).
    fn pieces(&self, count: u64) -> PyResult<Vec<(i64, u64)>> {
        self.0.span(count).py_err()?; // counts that overflow are refused
        Ok(self.0.pieces(count))
    }

    fn elements_in(&self, nbytes: u64) -> Option<u64> {
        self.0.elements_in(nbytes)
    }
}
