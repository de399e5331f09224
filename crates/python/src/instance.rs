//! `Instance`: one rank of one domain on an endpoint, as the service
//! layer starts, runs and ends it.

use std::sync::Arc;

use mpiws_core::{Comm as CoreComm, ErrorReport, Instance as CoreInstance};
use pyo3::prelude::*;

use crate::comm::Comm;

/// JSON text as a value.
pub fn json_arg(s: &str) -> PyResult<serde_json::Value> {
    serde_json::from_str(s).map_err(|e| pyo3::exceptions::PyValueError::new_err(format!("invalid JSON: {e}")))
}

#[pyclass(module = "mpiws._core", frozen)]
pub struct Instance {
    pub inner: Arc<CoreInstance>,
}

#[pymethods]
impl Instance {
    #[getter]
    fn domain(&self) -> String {
        self.inner.binding.domain.clone()
    }

    #[getter]
    fn rank(&self) -> u32 {
        self.inner.rank()
    }
    #[getter]
    fn size(&self) -> u32 {
        self.inner.size()
    }
    #[getter]
    fn service(&self) -> String {
        self.inner.binding.service.clone()
    }
    #[getter]
    fn endpoints(&self) -> Vec<String> {
        self.inner.binding.endpoints.clone()
    }
    /// Application parameters as a JSON string.
    #[getter]
    fn params(&self) -> String {
        self.inner.binding.params.to_string()
    }
    #[getter]
    fn state(&self) -> String {
        serde_json::to_value(self.inner.status().state).unwrap().as_str().unwrap_or("").to_string()
    }

    fn world(&self) -> Comm {
        Comm::from(CoreComm::world(self.inner.clone()))
    }

    fn self_comm(&self) -> Comm {
        Comm::from(CoreComm::self_comm(self.inner.clone()))
    }

    fn set_running(&self) {
        self.inner.set_running()
    }

    /// The service returned: `result` is its JSON encoding.
    fn finish(&self, result: &str) -> PyResult<()> {
        self.inner.finish(json_arg(result)?);
        Ok(())
    }

    /// The service raised.
    fn fail(&self, error_class: i32, name: String, message: String, traceback: String) {
        self.inner.fail(ErrorReport { class: error_class, name, message, traceback })
    }

    fn cancel(&self) {
        self.inner.cancel()
    }

    /// Wait until every send is acknowledged or failed; false if `timeout`
    /// passed first. Raises if a completed send was not delivered.
    #[pyo3(signature = (timeout=None))]
    fn flush(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<bool> {
        crate::comm::flush(py, &self.inner, timeout)
    }

    /// Bytes held in the mailbox for which no receive was posted yet.
    fn unexpected_bytes(&self) -> usize {
        self.inner.unexpected_bytes()
    }

    /// The most bytes such messages ever held at once (bounded by MPIWS_MAX_UNEXPECTED).
    fn peak_unexpected_bytes(&self) -> usize {
        self.inner.peak_unexpected_bytes()
    }
}
