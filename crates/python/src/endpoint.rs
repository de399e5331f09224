//! `Endpoint`: an HTTP server hosting services and the instances of any
//! number of domains; and the functions of an endpoint's process (an
//! instance's child, CWL evaluation, signals, the settings' defaults).

use std::sync::Arc;

use mpiws_core::{Binding, Config, Endpoint as CoreEndpoint};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict};

use crate::errors::IntoPy;
use crate::instance::{json_arg, Instance};
use crate::wait::wait_in_slices;

/// A setting's value as JSON: None, bools, numbers, strings, paths
/// (`os.PathLike`) and lists of them.
fn to_json(v: &Bound<'_, PyAny>) -> PyResult<serde_json::Value> {
    use serde_json::Value;
    if v.is_none() {
        return Ok(Value::Null);
    }
    if let Ok(b) = v.cast::<PyBool>() {
        return Ok(Value::Bool(b.is_true()));
    }
    if let Ok(i) = v.extract::<i64>() {
        return Ok(i.into());
    }
    if let Ok(u) = v.extract::<u64>() {
        return Ok(u.into());
    }
    if let Ok(f) = v.extract::<f64>() {
        return Ok(serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number));
    }
    if let Ok(s) = v.extract::<String>() {
        return Ok(Value::String(s));
    }
    if let Ok(p) = v.extract::<std::path::PathBuf>() {
        return Ok(Value::String(p.to_string_lossy().into_owned()));
    }
    if let Ok(items) = v.try_iter() {
        return items.map(|item| to_json(&item?)).collect::<PyResult<Vec<_>>>().map(Value::Array);
    }
    Err(pyo3::exceptions::PyTypeError::new_err(format!("an endpoint setting cannot be a {}", v.get_type().name()?)))
}

/// Every endpoint setting with its default, as JSON text (`mpiws_core::Config`).
#[pyfunction]
pub fn endpoint_settings() -> String {
    Config::defaults().to_string()
}

#[pyclass(module = "mpiws._core", frozen)]
pub struct Endpoint {
    inner: Arc<CoreEndpoint>,
}

#[pymethods]
impl Endpoint {
    /// `host` and `port` to bind, and the endpoint's other settings by
    /// name (`keys`: the text of a keys file; limits; TLS; ...): those of
    /// `mpiws_core::Config`, durations in seconds. A setting given as None
    /// keeps its default.
    #[new]
    #[pyo3(signature = (host="127.0.0.1", port=0, **settings))]
    fn new(host: &str, port: u16, settings: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
        let mut all = serde_json::Map::new();
        all.insert("host".into(), host.into());
        all.insert("port".into(), port.into());
        for (name, value) in settings.into_iter().flatten() {
            if !value.is_none() {
                all.insert(name.extract::<String>()?, to_json(&value)?);
            }
        }
        let config = Config::from_json(&serde_json::Value::Object(all)).py_err()?;
        Ok(Endpoint { inner: CoreEndpoint::start(config).py_err()? })
    }

    #[getter]
    fn url(&self) -> String {
        self.inner.url()
    }

    #[getter]
    fn port(&self) -> u16 {
        self.inner.addr.port()
    }

    /// SHA-256 fingerprint of the served certificate (None over http).
    #[getter]
    fn tls_fingerprint(&self) -> Option<String> {
        self.inner.tls.as_ref().map(|t| t.fingerprint.clone())
    }

    /// Where a self-signed certificate was written (None otherwise).
    #[getter]
    fn tls_certificate_file(&self) -> Option<std::path::PathBuf> {
        self.inner.tls.as_ref().and_then(|t| t.certificate_file.clone())
    }

    /// Deploy a service name: *run* requests for it are accepted.
    fn deploy(&self, name: &str) {
        self.inner.deploy(name)
    }

    /// Where this endpoint keeps jobs and uploads (made now if it was not yet).
    #[getter]
    fn workdir(&self) -> PyResult<std::path::PathBuf> {
        self.inner.jobs.workdir().py_err()
    }

    /// Close the endpoint: no connection is served any more (its port is
    /// free), its jobs and spare instance processes end, and a work
    /// directory or certificate it made is removed.
    fn close(&self, py: Python<'_>) {
        let ep = self.inner.clone();
        py.detach(|| mpiws_core::runtime().block_on(ep.close()))
    }

    /// Deploy a command-line program as a service, described by its one-line template.
    fn deploy_program(&self, name: &str, template: &str) -> PyResult<()> {
        self.inner.jobs.deploy(name, template).py_err()
    }

    /// Deploy a CWL v1.2 CommandLineTool (its document as JSON text) as a program.
    fn deploy_program_cwl(&self, name: &str, document: &str) -> PyResult<()> {
        self.inner.jobs.deploy_cwl(name, document).py_err()
    }

    /// The next instance a *run* request created, waiting up to `timeout` seconds.
    #[pyo3(signature = (timeout=None))]
    fn next_run(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Option<Instance>> {
        let ep = self.inner.clone();
        let mut found = None;
        wait_in_slices(py, timeout, |slice| {
            found = ep.next_run(Some(slice));
            found.is_some()
        })?;
        Ok(found.map(|inner| Instance { inner }))
    }

    /// Open this endpoint's rendezvous for a domain of `size` ranks.
    fn open_rendezvous(&self, size: u32) {
        self.inner.rendezvous.open(size);
    }

    /// The domain gathered at the rendezvous has ended: its ranks may go.
    fn close_rendezvous(&self) {
        self.inner.rendezvous.close();
    }

    /// The URLs of every rank of the open rendezvous, once all registered
    /// within `timeout` seconds; TimeoutError naming the missing ranks.
    fn rendezvous_wait(&self, py: Python<'_>, timeout: f64) -> PyResult<Vec<String>> {
        let ep = self.inner.clone();
        let mut outcome = Err(Vec::new());
        // In slices, so that Ctrl-C is seen while ranks are awaited.
        wait_in_slices(py, Some(timeout), |slice| {
            outcome = ep.rendezvous.wait(slice);
            outcome.is_ok()
        })?;
        outcome.map_err(|missing| {
            pyo3::exceptions::PyTimeoutError::new_err(format!("ranks {missing:?} did not register at the rendezvous within {timeout} s"))
        })
    }

    /// Create an instance directly (no *run* request): used for singletons.
    #[pyo3(signature = (domain, rank, endpoints, token, service="", params="null"))]
    fn create_instance(
        &self,
        domain: String,
        rank: u32,
        endpoints: Vec<String>,
        token: String,
        service: &str,
        params: &str,
    ) -> PyResult<Instance> {
        let binding = Binding { domain, rank, endpoints, token, service: service.to_string(), params: json_arg(params)? };
        let inner = self.inner.create_instance(binding, false, None).map_err(mpiws_core::Error::from).py_err()?;
        Ok(Instance { inner })
    }

    /// Show `document` (JSON text) on this endpoint's dashboard as the run
    /// `name` of `kind` ("workflow", "farm"), replacing its last one.
    fn publish(&self, name: &str, kind: &str, document: &str) -> PyResult<()> {
        self.inner.board.publish(name, kind, document).py_err()
    }

    /// Show domain `domain` on this endpoint's dashboard though it hosts
    /// none of it: rank i at `endpoints[i]`, asked with `bearer`.
    fn watch_domain(&self, domain: String, bearer: String, endpoints: Vec<String>) -> PyResult<()> {
        self.inner.board.watch(mpiws_core::Watched { domain, bearer, endpoints }).py_err()
    }

    /// `GET /` as a JSON string, as a key with `admin` sees it.
    fn describe(&self) -> String {
        self.inner.describe(|_| true).to_string()
    }
}

/// In an instance's child process (`mpiws.service.sandbox`): create the
/// instance from the binding the endpoint sends, on this process's own
/// endpoint `endpoint`, and tell the endpoint it is ready.
#[pyfunction]
pub fn sandbox_begin(endpoint: &Endpoint) -> PyResult<Instance> {
    Ok(Instance { inner: mpiws_core::sandbox_begin(&endpoint.inner).py_err()? })
}

/// In an instance's child process: report the instance's final status.
#[pyfunction]
pub fn sandbox_report(instance: &Instance) -> PyResult<()> {
    mpiws_core::sandbox_report(&instance.inner).py_err()
}

/// A CWL parameter reference evaluated (`text` with its `$(...)`) against
/// `context` (JSON: `{"inputs", "self", "runtime"}`); `condition` also allows
/// `!` and one comparison with a literal (a step's `when`). The value as JSON.
#[pyfunction]
#[pyo3(signature = (text, context, condition=false))]
pub fn cwl_eval(text: &str, context: &str, condition: bool) -> PyResult<String> {
    use mpiws_core::{cwl_eval as eval, CwlMode as Mode};
    let ctx: serde_json::Value =
        serde_json::from_str(context).map_err(|e| pyo3::exceptions::PyValueError::new_err(format!("context is not JSON: {e}")))?;
    let mode = if condition { Mode::Condition } else { Mode::Reference };
    eval(text, &ctx, mode).map(|v| v.to_string()).map_err(pyo3::exceptions::PyValueError::new_err)
}

/// End this process on SIGTERM or SIGINT even while service code holds the
/// GIL (call before any other thread starts: the signals are blocked in
/// every thread started afterwards, and a thread of the core waits for them).
#[pyfunction]
pub fn exit_on_signals() -> PyResult<()> {
    mpiws_core::exit_on_signals().py_err()
}
