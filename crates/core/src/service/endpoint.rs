//! An endpoint's state: its deployed services, the instances of every domain
//! it hosts (kept apart by domain id), and the queue of *run* orders that the
//! service layer (in Python) picks up to start service code.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Mutex, RwLock};
use serde_json::{json, Value};

use crate::error::{err, Error, ErrorClass, Result};
use crate::jobs::Jobs;
use crate::keys::{KeyId, Keys};
use crate::net::stores::Stores;
use crate::rank::{Binding, Instance};
use crate::runtime::runtime;
use crate::service::relay::Relay;
use crate::service::rendezvous::Rendezvous;
use crate::service::reverse::ViaRelay;
use crate::service::sandbox::start::Spares;
use crate::service::sandbox::{Sandbox, SandboxSetting};
use crate::service::tls::{ServerTls, TlsSetting};

#[derive(Debug, Clone)]
pub struct Config {
    /// Address to bind; loopback unless told otherwise.
    pub host: String,
    /// 0 picks a free port.
    pub port: u16,
    /// Largest message body a store accepts.
    pub max_message: u64,
    /// Largest file an upload (`POST /files`) may be.
    pub max_upload: u64,
    /// Where jobs and uploads are kept; a fresh private temporary
    /// directory if None (see `jobs::workdir`).
    pub workdir: Option<std::path::PathBuf>,
    /// The keys the service interface accepts (none: it refuses everyone).
    pub keys: Keys,
    /// Host names (besides IP literals and `localhost`) requests may be sent to; `*`: any.
    pub allow_hosts: Vec<String>,
    /// Web page origins allowed to call (`*`: any); none by default.
    pub allow_origins: Vec<String>,
    /// Connections served at once; further ones wait in the listen queue.
    pub max_connections: usize,
    /// A connection that sends no complete request head for this long is closed (idle ones too).
    pub header_timeout: Duration,
    /// A request body that stalls for this long is refused (408).
    pub body_timeout: Duration,
    /// Largest *run* body (the binding).
    pub max_binding: usize,
    /// Most ranks (endpoint URLs) in one binding.
    pub max_ranks: usize,
    /// Instances starting or running at once, on the whole endpoint and per key.
    pub max_instances: usize,
    pub max_instances_per_key: usize,
    /// Hosts (`HOST[:PORT]`) and networks (CIDR) URL inputs may be pulled
    /// from besides public addresses (`--fetch-allow`; see `jobs::fetch`).
    pub fetch_allow: Vec<String>,
    /// Largest URL input one job may pull; `max_upload` if None.
    pub max_fetch: Option<u64>,
    /// Longest a URL input may take to pull.
    pub fetch_timeout: Duration,
    /// Disk quota of the work directory: uploads, pulls and job files.
    pub max_disk: u64,
    /// Most jobs the endpoint holds (running or ended, until removed), and
    /// most of them one key holds.
    pub max_jobs: usize,
    pub max_jobs_per_key: usize,
    /// Most uploads one key keeps at once (each until deleted or expired).
    pub max_uploads_per_key: usize,
    /// How long an ended job, or an upload, is kept before it is removed.
    pub job_ttl: Duration,
    /// Largest spawn (or call) request body: inputs sent by value.
    pub max_spawn_body: u64,
    /// Serve https with this certificate (`service::tls`); None: http.
    pub tls: Option<TlsSetting>,
    /// How long a connection may take to complete its TLS handshake.
    pub tls_handshake_timeout: Duration,
    /// Run each instance's code in a child process (`service::sandbox`);
    /// None: the service layer runs queued instances itself (`next_run`).
    pub sandbox: Option<SandboxSetting>,
    /// Serve as a relay (`service::relay`): endpoints that accept no
    /// connections are reached at `/relay/{name}` over connections they open here.
    pub relay: bool,
    /// Most connections one name keeps open to this relay.
    pub relay_max_connections: usize,
    /// Accept no connections from outside: be reached through this relay
    /// (`service::reverse`); the endpoint's URL is then the relay's for it.
    pub via_relay: Option<ViaRelay>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            host: "127.0.0.1".into(),
            port: 0,
            max_message: 1 << 30,
            workdir: None,
            keys: Keys::default(),
            allow_hosts: Vec::new(),
            allow_origins: Vec::new(),
            max_connections: 1024,
            header_timeout: Duration::from_secs(30),
            body_timeout: Duration::from_secs(60),
            max_binding: 1 << 20,
            max_ranks: 16384,
            max_instances: 256,
            max_instances_per_key: 128,
            max_upload: 1 << 30,
            fetch_allow: Vec::new(),
            max_fetch: None,
            fetch_timeout: Duration::from_secs(300),
            max_disk: 10 << 30,
            max_jobs: 1000,
            max_jobs_per_key: 500,
            max_uploads_per_key: 1000,
            job_ttl: Duration::from_secs(24 * 3600),
            max_spawn_body: 64 << 20,
            tls: None,
            tls_handshake_timeout: Duration::from_secs(10),
            sandbox: None,
            relay: false,
            relay_max_connections: 256,
            via_relay: None,
        }
    }
}

/// A key keeps at most this many instances; above it, its ended ones are
/// forgotten when it creates another (never another key's).
const KEEP_PER_KEY: usize = 1024;

/// An instance and the key that created it (None: created in-process).
struct Hosted {
    instance: Arc<Instance>,
    owner: Option<KeyId>,
    /// Where its code runs, if in a child process.
    sandbox: Option<Arc<Sandbox>>,
}

/// Why an instance was not created.
#[derive(Debug)]
pub enum Refused {
    /// A bad binding (400).
    Invalid(Error),
    /// The domain or rank exists here already, or belongs to another key (409).
    Conflict(Error),
    /// Over the endpoint's bound (503) or the key's (429): try again later.
    Busy { per_key: bool, error: Error },
}

impl From<Refused> for Error {
    fn from(r: Refused) -> Error {
        match r {
            Refused::Invalid(e) | Refused::Conflict(e) | Refused::Busy { error: e, .. } => e,
        }
    }
}

pub struct Endpoint {
    pub config: Config,
    pub addr: SocketAddr,
    /// The client its instances send stores (and ask their peers) with.
    pub stores: Arc<Stores>,
    pub jobs: Jobs,
    /// Set when serving https.
    pub tls: Option<ServerTls>,
    services: RwLock<Vec<String>>,
    instances: Mutex<HashMap<(String, u32), Hosted>>,
    /// Children started ahead for instances, when they run in processes.
    spares: Option<Arc<Spares>>,
    runs_tx: Mutex<mpsc::Sender<Arc<Instance>>>,
    runs_rx: Mutex<mpsc::Receiver<Arc<Instance>>>,
    /// Where the ranks of a domain this endpoint's owner starts are (`POST /rendezvous`).
    pub rendezvous: Rendezvous,
    /// The endpoints reached through this one, a relay.
    pub relay: Arc<Relay>,
}

impl Endpoint {
    /// Bind and start serving.
    pub fn start(mut config: Config) -> Result<Arc<Endpoint>> {
        let listener = runtime()
            .block_on(tokio::net::TcpListener::bind((config.host.as_str(), config.port)))
            .or_else(|e| err(ErrorClass::Other, format!("cannot bind {}:{}: {e}", config.host, config.port)))?;
        let addr = listener.local_addr().expect("bound socket has an address");
        let tls = config.tls.as_ref().map(|t| ServerTls::start(t, &config.host, addr)).transpose()?;
        if let Some(via) = &config.via_relay {
            // Relayed requests carry the relay's name in `Host`.
            config.allow_hosts.push(via.host());
        }
        if let Some(sandbox) = &mut config.sandbox {
            sandbox.trust = tls.as_ref().and_then(|t| t.certificate_file.clone());
        }
        let (tx, rx) = mpsc::channel();
        let jobs = Jobs::new(&config)?;
        let spares = config.sandbox.as_ref().map(Spares::new);
        let ep = Arc::new(Endpoint {
            config,
            addr,
            stores: Arc::new(Stores::new()),
            jobs,
            tls,
            services: RwLock::new(Vec::new()),
            instances: Mutex::new(HashMap::new()),
            spares,
            runs_tx: Mutex::new(tx),
            runs_rx: Mutex::new(rx),
            rendezvous: Rendezvous::default(),
            relay: Arc::default(),
        });
        runtime().spawn(crate::service::server::serve(ep.clone(), listener));
        if let Some(via) = ep.config.via_relay.clone() {
            runtime().spawn(crate::service::reverse::keep(ep.clone(), via));
        }
        runtime().spawn(crate::jobs::expiry::expire_forever(Arc::downgrade(&ep)));
        crate::service::shutdown::register(&ep);
        Ok(ep)
    }

    /// The URL peers use to reach this endpoint.
    pub fn url(&self) -> String {
        if let Some(via) = &self.config.via_relay {
            return via.url.clone();
        }
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

    /// Create an instance for `binding`, owned by the key `owner`. `queue`
    /// starts it (a *run* request): in a child process if the endpoint
    /// sandboxes instances, else handed to the service layer; without it
    /// the caller runs it. A domain belongs to the key that created its
    /// first instance here: another key can neither join nor take it over.
    /// The same binding again from the same key gives the instance made
    /// the first time (the request is idempotent).
    pub fn create_instance(&self, binding: Binding, queue: bool, owner: Option<KeyId>) -> std::result::Result<Arc<Instance>, Refused> {
        binding.validate().map_err(Refused::Invalid)?;
        let key = (binding.domain.clone(), binding.rank);
        let instance = {
            let mut map = self.instances.lock();
            let conflict = |m: String| Err(Refused::Conflict(Error::new(ErrorClass::Comm, m)));
            if let Some(other) = map.values().find(|h| h.instance.binding.domain == binding.domain) {
                if other.owner != owner {
                    return conflict(format!("domain id {} is taken here by another key", binding.domain));
                }
                let b = &other.instance.binding;
                if b.endpoints != binding.endpoints || b.token != binding.token {
                    return conflict(format!("domain {} is already bound here with other endpoints or token", binding.domain));
                }
            }
            if let Some(same) = map.get(&key) {
                // The same binding from the same key again is the same request
                // (a client's retry after a connection closed under it): it
                // answers as the first did, so *run* can be safely repeated.
                if same.owner == owner && same.instance.binding == binding {
                    return Ok(same.instance.clone());
                }
                return conflict(format!("domain {} rank {} already exists here", key.0, key.1));
            }
            if let Some(owner) = owner {
                self.admit(&mut map, owner)?;
            }
            let instance = Instance::new(binding, self.stores.clone());
            let sandbox = match (&self.spares, queue) {
                (Some(spares), true) => {
                    let sandbox = Arc::new(Sandbox::default());
                    spares.start(instance.clone(), sandbox.clone());
                    Some(sandbox)
                }
                _ => None,
            };
            let queued = queue && sandbox.is_none();
            map.insert(key, Hosted { instance: instance.clone(), owner, sandbox });
            if queued {
                let _ = self.runs_tx.lock().send(instance.clone());
            }
            instance
        };
        Ok(instance)
    }

    /// Room for one more instance of `owner`: within the endpoint's and
    /// the key's bounds on live instances; the key's ended ones forgotten
    /// when it holds too many (their status was there to be read).
    fn admit(&self, map: &mut HashMap<(String, u32), Hosted>, owner: KeyId) -> std::result::Result<(), Refused> {
        let live = |h: &Hosted| !h.instance.status().state.is_final();
        let busy = |per_key: bool, m: String| Err(Refused::Busy { per_key, error: Error::new(ErrorClass::Other, m) });
        let (max, per_key) = (self.config.max_instances, self.config.max_instances_per_key);
        if map.values().filter(|h| live(h)).count() >= max {
            return busy(false, format!("this endpoint runs its maximum of {max} instances (--max-instances); try again later"));
        }
        if map.values().filter(|h| h.owner == Some(owner) && live(h)).count() >= per_key {
            return busy(true, format!("{owner} runs its maximum of {per_key} instances here (--max-instances-per-key); try again later"));
        }
        if map.values().filter(|h| h.owner == Some(owner)).count() >= KEEP_PER_KEY {
            map.retain(|_, h| h.owner != Some(owner) || live(h));
        }
        Ok(())
    }

    pub fn instance(&self, domain: &str, rank: u32) -> Option<Arc<Instance>> {
        self.instances.lock().get(&(domain.to_string(), rank)).map(|h| h.instance.clone())
    }

    /// The child process running `domain` rank `rank`'s code, if it runs in one.
    pub fn sandbox(&self, domain: &str, rank: u32) -> Option<Arc<Sandbox>> {
        self.instances.lock().get(&(domain.to_string(), rank)).and_then(|h| h.sandbox.clone())
    }

    /// Some instance of `domain` here, if any (they share its token and size).
    pub fn any_instance_of(&self, domain: &str) -> Option<Arc<Instance>> {
        self.instances.lock().values().find(|h| h.instance.binding.domain == domain).map(|h| h.instance.clone())
    }

    /// Block until a *run* request arrives (or `timeout`): the next instance to start.
    pub fn next_run(&self, timeout: Option<Duration>) -> Option<Arc<Instance>> {
        let rx = self.runs_rx.lock();
        match timeout {
            None => rx.recv().ok(),
            Some(t) => rx.recv_timeout(t).ok(),
        }
    }

    /// What `GET /` answers: who this endpoint is and what it deploys; the
    /// domains it hosts only to a caller entitled to see them (`visible`).
    pub fn describe(&self, visible: impl Fn(&Instance) -> bool) -> Value {
        let mut domains: HashMap<String, Vec<Value>> = HashMap::new();
        for h in self.instances.lock().values().filter(|h| visible(&h.instance)) {
            let s = h.instance.status();
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
