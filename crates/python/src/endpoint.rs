//! `Endpoint` (an HTTP server hosting services) and `Instance` (one rank of
//! one domain on it).

use std::sync::Arc;
use std::time::Duration;

use mpiws_core::Binding;
use mpiws_core::Comm as CoreComm;
use mpiws_core::ErrorReport;
use mpiws_core::Instance as CoreInstance;
use mpiws_core::Keys;
use mpiws_core::SandboxSetting;
use mpiws_core::TlsSetting;
use mpiws_core::ViaRelay;
use mpiws_core::{Config, Endpoint as CoreEndpoint};
use pyo3::prelude::*;

use crate::comm::Comm;
use crate::errors::IntoPy;
use crate::request::wait_in_slices;

/// A duration in seconds from Python: finite and not negative.
fn seconds(secs: f64, name: &str) -> PyResult<Duration> {
    Duration::try_from_secs_f64(secs.max(0.0))
        .map_err(|_| pyo3::exceptions::PyValueError::new_err(format!("{name}={secs}: a number of seconds")))
}

fn json_arg(s: &str) -> PyResult<serde_json::Value> {
    serde_json::from_str(s).map_err(|e| pyo3::exceptions::PyValueError::new_err(format!("invalid JSON: {e}")))
}

#[pyclass(module = "mpiws._core", frozen)]
pub struct Endpoint {
    inner: Arc<CoreEndpoint>,
}

#[pymethods]
impl Endpoint {
    /// `keys` is the text of a keys file (one key per line, optionally with
    /// scopes); without it the service interface refuses every request.
    /// Every other argument is a limit of `Config`, as `mpiws serve` sets it.
    #[new]
    #[pyo3(signature = (host="127.0.0.1", port=0, max_message=None, max_upload=None, workdir=None, keys=None,
                        allow_hosts=Vec::new(), allow_origins=Vec::new(), max_connections=None, header_timeout=None,
                        body_timeout=None, max_binding=None, max_ranks=None, max_instances=None, max_instances_per_key=None,
                        fetch_allow=Vec::new(), max_fetch=None, fetch_timeout=None, max_disk=None, max_jobs=None, max_jobs_per_key=None, max_uploads_per_key=None, job_ttl=None,
                        max_spawn_body=None, sandbox=None, max_instance_memory=None, max_instance_time=None, spare_instances=None,
                        tls_cert=None, tls_key=None, tls_self_signed=false, tls_cert_out=None, tls_handshake_timeout=None,
                        relay=false, relay_max_connections=None, via_relay=None, relay_key=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        host: &str,
        port: u16,
        max_message: Option<u64>,
        max_upload: Option<u64>,
        workdir: Option<std::path::PathBuf>,
        keys: Option<&str>,
        allow_hosts: Vec<String>,
        allow_origins: Vec<String>,
        max_connections: Option<usize>,
        header_timeout: Option<f64>,
        body_timeout: Option<f64>,
        max_binding: Option<usize>,
        max_ranks: Option<usize>,
        max_instances: Option<usize>,
        max_instances_per_key: Option<usize>,
        fetch_allow: Vec<String>,
        max_fetch: Option<u64>,
        fetch_timeout: Option<f64>,
        max_disk: Option<u64>,
        max_jobs: Option<usize>,
        max_jobs_per_key: Option<usize>,
        max_uploads_per_key: Option<usize>,
        job_ttl: Option<f64>,
        max_spawn_body: Option<u64>,
        sandbox: Option<Vec<String>>,
        max_instance_memory: Option<u64>,
        max_instance_time: Option<f64>,
        spare_instances: Option<usize>,
        tls_cert: Option<std::path::PathBuf>,
        tls_key: Option<std::path::PathBuf>,
        tls_self_signed: bool,
        tls_cert_out: Option<std::path::PathBuf>,
        tls_handshake_timeout: Option<f64>,
        relay: bool,
        relay_max_connections: Option<usize>,
        via_relay: Option<&str>,
        relay_key: Option<&str>,
    ) -> PyResult<Self> {
        let d = Config::default();
        let secs = |s: Option<f64>, default: Duration, name: &str| s.map_or(Ok(default), |s| seconds(s, name));
        let tls = match (tls_cert, tls_key, tls_self_signed) {
            (Some(cert), Some(key), false) => Some(TlsSetting::Files { cert, key }),
            (None, None, true) => Some(TlsSetting::SelfSigned { cert_out: tls_cert_out }),
            (None, None, false) => None,
            _ => return Err(pyo3::exceptions::PyValueError::new_err("TLS: give both tls_cert and tls_key, or tls_self_signed, not both")),
        };
        let config = Config {
            host: host.to_string(),
            port,
            max_message: max_message.unwrap_or(d.max_message),
            max_upload: max_upload.unwrap_or(d.max_upload),
            workdir,
            keys: keys.map(Keys::parse).transpose().py_err()?.unwrap_or_default(),
            allow_hosts,
            allow_origins,
            max_connections: max_connections.unwrap_or(d.max_connections),
            header_timeout: secs(header_timeout, d.header_timeout, "header_timeout")?,
            body_timeout: secs(body_timeout, d.body_timeout, "body_timeout")?,
            max_binding: max_binding.unwrap_or(d.max_binding),
            max_ranks: max_ranks.unwrap_or(d.max_ranks),
            max_instances: max_instances.unwrap_or(d.max_instances),
            max_instances_per_key: max_instances_per_key.unwrap_or(d.max_instances_per_key),
            fetch_allow,
            max_fetch,
            fetch_timeout: secs(fetch_timeout, d.fetch_timeout, "fetch_timeout")?,
            max_disk: max_disk.unwrap_or(d.max_disk),
            max_jobs: max_jobs.unwrap_or(d.max_jobs),
            max_jobs_per_key: max_jobs_per_key.unwrap_or(d.max_jobs_per_key),
            max_uploads_per_key: max_uploads_per_key.unwrap_or(d.max_uploads_per_key),
            job_ttl: secs(job_ttl, d.job_ttl, "job_ttl")?,
            max_spawn_body: max_spawn_body.unwrap_or(d.max_spawn_body),
            tls,
            tls_handshake_timeout: secs(tls_handshake_timeout, d.tls_handshake_timeout, "tls_handshake_timeout")?,
            sandbox: match sandbox {
                Some(command) => Some(SandboxSetting {
                    command,
                    // 4 GiB unless told; 0: unbounded.
                    max_memory: Some(max_instance_memory.unwrap_or(4 << 30)).filter(|&m| m > 0),
                    max_time: secs(max_instance_time, Duration::from_secs(24 * 3600), "max_instance_time")?,
                    trust: None,
                    spares: spare_instances.unwrap_or(2),
                }),
                None => None,
            },
            relay,
            relay_max_connections: relay_max_connections.unwrap_or(d.relay_max_connections),
            via_relay: match (via_relay, relay_key) {
                (Some(url), Some(key)) => Some(ViaRelay::new(url, key).py_err()?),
                (Some(_), None) => {
                    return Err(pyo3::exceptions::PyValueError::new_err(
                        "via_relay needs relay_key: a key of the relay with the 'relay' scope",
                    ))
                }
                (None, _) => None,
            },
        };
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

    /// Kill every job and remove the work directory if the endpoint made it.
    fn close_jobs(&self, py: Python<'_>) {
        let ep = self.inner.clone();
        py.detach(|| mpiws_core::runtime().block_on(ep.jobs.close()))
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
        let inner = self.inner.clone();
        let mut outcome = Ok(true);
        wait_in_slices(py, timeout, |slice| {
            outcome = inner.flush(Some(slice));
            !matches!(outcome, Ok(false))
        })?;
        outcome.py_err()
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
