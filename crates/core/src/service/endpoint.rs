//! An endpoint's state: its deployed services, the instances of every domain
//! it hosts (kept apart by domain id), and the queue of *run* orders that the
//! service layer (in Python) picks up to start service code.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Mutex, RwLock};
use serde_json::{json, Value};
use tokio::sync::Notify;

use crate::direct::transport::Transport;
use crate::domain::{Binding, Instance};
use crate::error::{err, ErrorClass, Result};
use crate::jobs::Jobs;
use crate::runtime::runtime;
use crate::service::tls::{ServerTls, TlsSetting};

#[derive(Debug, Clone)]
pub struct Config {
    /// Address to bind; loopback unless told otherwise.
    pub host: String,
    /// 0 picks a free port.
    pub port: u16,
    /// Largest message body a store accepts.
    pub max_message: u64,
    /// How long a store for an instance that does not exist yet is held.
    pub pending_timeout: Duration,
    /// How many such stores may be held at once.
    pub max_pending: usize,
    /// Largest file an upload (`POST /files`) may be.
    pub max_upload: u64,
    /// Where jobs and uploads are kept; a fresh temporary directory if None.
    pub workdir: Option<std::path::PathBuf>,
    /// Serve https with this certificate (`service::tls`); None: http.
    pub tls: Option<TlsSetting>,
    /// How long a connection may take to complete its TLS handshake.
    pub tls_handshake_timeout: Duration,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            host: "127.0.0.1".into(),
            port: 0,
            max_message: 1 << 30,
            pending_timeout: Duration::from_secs(30),
            max_pending: 4096,
            max_upload: 1 << 40,
            workdir: None,
            tls: None,
            tls_handshake_timeout: Duration::from_secs(10),
        }
    }
}

/// Above this many instances, ended ones are forgotten when a new one comes.
const KEEP_INSTANCES: usize = 1024;

pub struct Endpoint {
    pub config: Config,
    pub addr: SocketAddr,
    pub transport: Arc<Transport>,
    pub jobs: Jobs,
    /// Set when serving https.
    pub tls: Option<ServerTls>,
    services: RwLock<Vec<String>>,
    instances: Mutex<HashMap<(String, u32), Arc<Instance>>>,
    appeared: Notify,
    runs_tx: Mutex<mpsc::Sender<Arc<Instance>>>,
    runs_rx: Mutex<mpsc::Receiver<Arc<Instance>>>,
    pending: AtomicUsize,
}

impl Endpoint {
    /// Bind and start serving.
    pub fn start(config: Config) -> Result<Arc<Endpoint>> {
        let listener = runtime()
            .block_on(tokio::net::TcpListener::bind((config.host.as_str(), config.port)))
            .or_else(|e| err(ErrorClass::Other, format!("cannot bind {}:{}: {e}", config.host, config.port)))?;
        let addr = listener.local_addr().expect("bound socket has an address");
        let tls = config.tls.as_ref().map(|t| ServerTls::start(t, &config.host, addr)).transpose()?;
        let (tx, rx) = mpsc::channel();
        let workdir = config.workdir.clone().unwrap_or_else(|| std::env::temp_dir().join(format!("mpiws-{}-{}", std::process::id(), addr.port())));
        let ep = Arc::new(Endpoint {
            config,
            addr,
            transport: Arc::new(Transport::new()),
            jobs: Jobs::new(workdir),
            tls,
            services: RwLock::new(Vec::new()),
            instances: Mutex::new(HashMap::new()),
            appeared: Notify::new(),
            runs_tx: Mutex::new(tx),
            runs_rx: Mutex::new(rx),
            pending: AtomicUsize::new(0),
        });
        runtime().spawn(crate::service::server::serve(ep.clone(), listener));
        Ok(ep)
    }

    /// The URL peers use to reach this endpoint.
    pub fn url(&self) -> String {
        let host = match self.addr.ip() {
            ip if ip.is_unspecified() => "127.0.0.1".to_string(),
            std::net::IpAddr::V6(ip) => format!("[{ip}]"),
            ip => ip.to_string(),
        };
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://{host}:{}", self.addr.port())
    }

    pub fn deploy(&self, service: &str) {
        let mut s = self.services.write();
        if !s.iter().any(|x| x == service) {
            s.push(service.to_string());
        }
    }

    pub fn services(&self) -> Vec<String> {
        self.services.read().clone()
    }

    /// Create an instance for `binding`. `queue` hands it to the service
    /// layer to start (a *run* request); without it the caller runs it.
    pub fn create_instance(&self, binding: Binding, queue: bool) -> Result<Arc<Instance>> {
        binding.validate()?;
        let key = (binding.domain.clone(), binding.rank);
        let instance = {
            let mut map = self.instances.lock();
            if let Some(other) = map.values().find(|i| i.binding.domain == binding.domain) {
                if other.binding.endpoints != binding.endpoints || other.binding.token != binding.token {
                    return err(ErrorClass::Comm, format!("domain {} is already bound here with other endpoints or token", binding.domain));
                }
            }
            if map.contains_key(&key) {
                return err(ErrorClass::Comm, format!("domain {} rank {} already exists here", key.0, key.1));
            }
            if map.len() >= KEEP_INSTANCES {
                // Forget ended instances (their status was there to be read).
                map.retain(|_, i| !i.status().state.is_final());
            }
            let instance = Instance::new(binding, self.transport.clone());
            map.insert(key, instance.clone());
            instance
        };
        self.appeared.notify_waiters();
        if queue {
            let _ = self.runs_tx.lock().send(instance.clone());
        }
        Ok(instance)
    }

    pub fn instance(&self, domain: &str, rank: u32) -> Option<Arc<Instance>> {
        self.instances.lock().get(&(domain.to_string(), rank)).cloned()
    }

    /// Size of `domain` if any of its instances lives here.
    pub fn domain_size(&self, domain: &str) -> Option<u32> {
        self.instances.lock().values().find(|i| i.binding.domain == domain).map(|i| i.size())
    }

    /// Wait (bounded) for an instance that may not have been created yet:
    /// messages can overtake the *run* request that creates their receiver.
    pub async fn wait_instance(&self, domain: &str, rank: u32) -> Result<Arc<Instance>> {
        if let Some(i) = self.instance(domain, rank) {
            return Ok(i);
        }
        if self.pending.fetch_add(1, Ordering::SeqCst) >= self.config.max_pending {
            self.pending.fetch_sub(1, Ordering::SeqCst);
            return err(ErrorClass::Other, "too many messages waiting for instances that do not exist yet");
        }
        let deadline = tokio::time::Instant::now() + self.config.pending_timeout;
        let found = loop {
            let notified = self.appeared.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let Some(i) = self.instance(domain, rank) {
                break Some(i);
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                break self.instance(domain, rank);
            }
        };
        self.pending.fetch_sub(1, Ordering::SeqCst);
        found.ok_or_else(|| {
            crate::error::Error::new(
                ErrorClass::Comm,
                format!("no instance of domain {domain} rank {rank} here (waited {:?})", self.config.pending_timeout),
            )
        })
    }

    /// Block until a *run* request arrives (or `timeout`): the next instance to start.
    pub fn next_run(&self, timeout: Option<Duration>) -> Option<Arc<Instance>> {
        let rx = self.runs_rx.lock();
        match timeout {
            None => rx.recv().ok(),
            Some(t) => rx.recv_timeout(t).ok(),
        }
    }

    /// What `GET /` answers: services, and domains with their ranks and states.
    pub fn describe(&self) -> Value {
        let mut domains: HashMap<String, Vec<Value>> = HashMap::new();
        for i in self.instances.lock().values() {
            let s = i.status();
            domains.entry(s.domain.clone()).or_default().push(json!({
                "rank": s.rank, "service": s.service, "state": s.state,
            }));
        }
        let mut domains: Vec<Value> = domains
            .into_iter()
            .map(|(d, mut ranks)| {
                ranks.sort_by_key(|r| r["rank"].as_u64());
                json!({"domain": d, "ranks": ranks})
            })
            .collect();
        domains.sort_by(|a, b| a["domain"].as_str().cmp(&b["domain"].as_str()));
        json!({
            "mpiws": env!("CARGO_PKG_VERSION"),
            "url": self.url(),
            "services": self.services(),
            "programs": self.jobs.programs().iter().map(|p| p.name.clone()).collect::<Vec<_>>(),
            "domains": domains,
        })
    }
}
