//! Core errors become instances of the Python layer's `MPI.Exception`
//! (registered at import), carrying the MPI error class and message; before
//! that (a process that never imports the MPI package: `mpiws run`'s own),
//! a `_core.Error`, a RuntimeError whose text names the class.

use mpiws_core::{Error, ErrorClass};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;

static ERROR_TYPE: PyOnceLock<Py<PyType>> = PyOnceLock::new();

pyo3::create_exception!(_core, CoreError, PyRuntimeError, "An mpiws error, raised before the MPI package registered its Exception class.");

/// Called once by `mpiws.MPI` with its Exception class: `cls(error_class, message)`.
#[pyfunction]
pub fn set_error_type(py: Python<'_>, cls: Bound<'_, PyType>) {
    let _ = ERROR_TYPE.set(py, cls.unbind());
}

pub fn to_py(e: Error) -> PyErr {
    Python::attach(|py| match ERROR_TYPE.get(py) {
        Some(t) => PyErr::from_type(t.bind(py).clone(), (e.class.code(), e.message)),
        None => CoreError::new_err(e.to_string()),
    })
}

pub fn mpi_err(class: ErrorClass, message: impl Into<String>) -> PyErr {
    to_py(Error::new(class, message))
}

pub trait IntoPy<T> {
    fn py_err(self) -> PyResult<T>;
}

impl<T> IntoPy<T> for mpiws_core::Result<T> {
    fn py_err(self) -> PyResult<T> {
        self.map_err(to_py)
    }
}
