//! `JobsClient`: the HTTP calls a client of deployed programs makes (JSON
//! requests, file uploads and downloads, streamed), with the GIL released.

use std::path::Path;
use std::sync::Arc;

use http::Method;
use mpiws_core::runtime;
use mpiws_core::Http;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::errors::IntoPy;

#[pyclass(module = "mpiws._core", frozen)]
pub struct JobsClient {
    http: Arc<Http>,
    /// The endpoint key sent with every call (not with downloads: a file's URL is its capability).
    key: Option<String>,
}

#[pymethods]
impl JobsClient {
    #[new]
    #[pyo3(signature = (key=None))]
    fn new(key: Option<String>) -> Self {
        JobsClient { http: Arc::new(Http::new()), key }
    }

    /// `method url` with an optional JSON body (a string); the JSON answer as a string.
    #[pyo3(signature = (method, url, body=None))]
    fn call(&self, py: Python<'_>, method: &str, url: &str, body: Option<&str>) -> PyResult<String> {
        let method = Method::from_bytes(method.as_bytes()).map_err(|e| PyValueError::new_err(format!("method {method:?}: {e}")))?;
        let body: Option<serde_json::Value> =
            body.map(serde_json::from_str).transpose().map_err(|e| PyValueError::new_err(format!("body is not JSON: {e}")))?;
        py.detach(|| runtime().block_on(self.http.call_json::<serde_json::Value>(method, url, self.key.as_deref(), body.as_ref())))
            .py_err()
            .map(|v| v.to_string())
    }

    /// POST the file at `path` to `url` (an endpoint's `/files`), or PUT it
    /// (`put`: a session's file); the JSON answer.
    #[pyo3(signature = (url, path, put=false))]
    fn upload(&self, py: Python<'_>, url: &str, path: &str, put: bool) -> PyResult<String> {
        py.detach(|| runtime().block_on(self.http.upload(url, Path::new(path), self.key.as_deref(), put))).py_err().map(|v| v.to_string())
    }

    /// GET `url` into the file at `path` (with the key if `keyed`: a
    /// session's file; other files' URLs are capabilities); its size.
    #[pyo3(signature = (url, path, keyed=false))]
    fn download(&self, py: Python<'_>, url: &str, path: &str, keyed: bool) -> PyResult<u64> {
        let key = if keyed { self.key.as_deref() } else { None };
        py.detach(|| runtime().block_on(self.http.download(url, Path::new(path), key))).py_err()
    }
}
