//! `DomainClient`: start, watch and cancel a domain on running endpoints.

use mpiws_core::runtime;
use mpiws_core::DomainClient as Core;
use pyo3::prelude::*;

use crate::errors::{to_py, IntoPy};

#[pyclass(module = "mpiws._core", frozen)]
pub struct DomainClient {
    inner: Core,
}

#[pymethods]
impl DomainClient {
    /// `key`: the endpoint key that may create instances (*run*) on every endpoint.
    #[new]
    #[pyo3(signature = (domain, token, endpoints, key=None))]
    fn new(domain: String, token: String, endpoints: Vec<String>, key: Option<String>) -> PyResult<Self> {
        Ok(DomainClient { inner: Core::new(domain, token, endpoints, key).py_err()? })
    }

    /// Invoke *run* on every endpoint (or those of `ranks`: the others'
    /// instances their own processes create); `params` is a JSON string.
    #[pyo3(signature = (service, params, ranks=None))]
    fn start(&self, py: Python<'_>, service: &str, params: &str, ranks: Option<Vec<usize>>) -> PyResult<()> {
        let params: serde_json::Value =
            serde_json::from_str(params).map_err(|e| pyo3::exceptions::PyValueError::new_err(format!("params are not JSON: {e}")))?;
        let ranks = ranks.unwrap_or_else(|| (0..self.inner.endpoints.len()).collect());
        py.detach(|| runtime().block_on(self.inner.start_ranks(&ranks, service, &params))).py_err()
    }

    /// *run* on every endpoint, each on its own (`DomainClient::start_each`):
    /// the ranks that could not be started, each with its exception.
    fn start_each(&self, py: Python<'_>, service: &str, params: &str) -> PyResult<Vec<(usize, Py<PyAny>)>> {
        let params: serde_json::Value =
            serde_json::from_str(params).map_err(|e| pyo3::exceptions::PyValueError::new_err(format!("params are not JSON: {e}")))?;
        let ranks: Vec<usize> = (0..self.inner.endpoints.len()).collect();
        let results = py.detach(|| runtime().block_on(self.inner.start_each(&ranks, service, &params))).py_err()?;
        Ok(ranks.into_iter().zip(results).filter_map(|(rank, r)| r.err().map(|e| (rank, to_py(e).into_value(py).into_any()))).collect())
    }

    /// Status of `rank` as a JSON string; `wait` long-polls up to that many seconds.
    #[pyo3(signature = (rank, wait=None))]
    fn status(&self, py: Python<'_>, rank: usize, wait: Option<f64>) -> PyResult<String> {
        py.detach(|| runtime().block_on(self.inner.status(rank, wait))).py_err().map(|v| v.to_string())
    }

    fn cancel(&self, py: Python<'_>, rank: usize) -> PyResult<String> {
        py.detach(|| runtime().block_on(self.inner.cancel(rank))).py_err().map(|v| v.to_string())
    }
}

/// Register this rank's endpoint `url` at the rendezvous `rendezvous`
/// (`service::rendezvous::register`), trying for up to `timeout` seconds.
#[pyfunction]
pub fn rendezvous_register(py: Python<'_>, rendezvous: &str, key: &str, rank: u32, size: u32, url: String, timeout: f64) -> PyResult<()> {
    let timeout =
        std::time::Duration::try_from_secs_f64(timeout).map_err(|e| pyo3::exceptions::PyValueError::new_err(format!("timeout: {e}")))?;
    let registration = mpiws_core::Registration { rank, size, url };
    py.detach(|| runtime().block_on(mpiws_core::rendezvous_register(rendezvous, key, &registration, timeout))).py_err()
}

/// `text` read by the core's one URL parser (`wire::url`): (scheme, host,
/// port, path); `endpoint`: an endpoint's URL (an origin, or one behind a
/// relay). ValueError says what is wrong.
#[pyfunction]
#[pyo3(signature = (text, endpoint=false))]
pub fn parse_url(text: &str, endpoint: bool) -> PyResult<(&'static str, String, u16, String)> {
    use mpiws_core::wire::url;
    let parsed = if endpoint { url::endpoint(text) } else { url::parse(text) };
    let u = parsed.map_err(pyo3::exceptions::PyValueError::new_err)?;
    Ok((u.scheme(), u.host, u.port, u.path))
}

/// A TCP port a user names (1 to 65535), by the same parser; ValueError if not.
#[pyfunction]
pub fn parse_port(text: &str) -> PyResult<u16> {
    mpiws_core::wire::url::port(text).map_err(pyo3::exceptions::PyValueError::new_err)
}
