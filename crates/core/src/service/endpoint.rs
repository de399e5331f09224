//! An endpoint's state: its deployed services, the instances of every domain
//! it hosts (kept apart by domain id), and the queue of *run* orders that the
//! service layer (in Python) picks up to start service code.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Mutex, RwLock};
use serde_json::{json, Value};

use crate::error::{err, Error, ErrorClass, Result};
use crate::jobs::Jobs;
use crate::keys::{KeyId, Keys};
use crate::net::stores::Stores;
use crate::rank::traffic::{Counts, Times};
use crate::rank::{Binding, Instance, InstanceState, Status};
use crate::runtime::runtime;
use crate::service::buffered::Buffered;
use crate::service::config::Config;
use crate::service::dashboard::board::Board;
use crate::service::dashboard::Watchers;
use crate::service::ended::Ended;
use crate::service::metrics::Metrics;
use crate::service::relay::Relay;
use crate::service::rendezvous::Rendezvous;
use crate::service::reverse::ViaRelay;
use crate::service::sandbox::start::Spares;
use crate::service::sandbox::{Sandbox, SandboxSetting};
use crate::service::tls::{ServerTls, TlsSetting};
use crate::service::tunnel::Identity;
use crate::wire::url::{valid_relay_name, MAX_RELAY_NAME, PIN_PREFIX};

/// A key keeps at most this many instances; above it, its oldest ended
/// ones are forgotten when it creates another, down to half (never another
/// key's, never one that ended within `instance_linger`: its client may not
/// have read its status yet).
const KEEP_PER_KEY: usize = 1024;

/// An instance and the key that created it (None: created in-process).
struct Hosted {
    owner: Option<KeyId>,
    held: Held,
    /// When it was created.
    since: Instant,
}

enum Held {
    Live {
        instance: Arc<Instance>,
        /// Where its code runs, if in a child process.
        sandbox: Option<Arc<Sandbox>>,
        /// When it was first seen ended (`summarize`).
        ended_at: Option<Instant>,
    },
    /// Ended, `instance_linger` ago or more: its summary only.
    Ended(Arc<Ended>),
}

impl Hosted {
    fn live(&self) -> Option<&Arc<Instance>> {
        match &self.held {
            Held::Live { instance, .. } => Some(instance),
            Held::Ended(_) => None,
        }
    }

    /// Still running (or starting)?
    fn running(&self) -> bool {
        self.live().is_some_and(|i| !i.state().is_final())
    }

    fn domain(&self) -> &str {
        match &self.held {
            Held::Live { instance, .. } => &instance.binding.domain,
            Held::Ended(e) => &e.status.domain,
        }
    }

    fn status(&self) -> Status {
        match &self.held {
            Held::Live { instance, .. } => instance.status(),
            Held::Ended(e) => e.status.clone(),
        }
    }

    /// What it sent and received, per peer, and how long its receives waited.
    fn counts(&self) -> Counts {
        match &self.held {
            Held::Live { instance, .. } => instance.traffic.counts(),
            Held::Ended(e) => e.traffic.clone(),
        }
    }

    fn found(&self) -> Found {
        match &self.held {
            Held::Live { instance, .. } => Found::Live(instance.clone()),
            Held::Ended(e) => Found::Ended(e.clone()),
        }
    }

    fn token(&self) -> &str {
        match &self.held {
            Held::Live { instance, .. } => &instance.binding.token,
            Held::Ended(e) => &e.token,
        }
    }
}

/// An instance as a request about it finds it.
pub enum Found {
    Live(Arc<Instance>),
    Ended(Arc<Ended>),
}

/// What instances did, in all (`GET /metrics`).
#[derive(Debug, Clone, Default)]
pub struct Activity {
    /// [messages sent, bytes sent, messages received, bytes received].
    pub traffic: [u64; 4],
    /// How long their receives waited, and their messages took to be handled.
    pub waits: Times,
    pub handling: Times,
    /// How many ended, by final state (those still running are not counted).
    pub ended: BTreeMap<&'static str, u64>,
}

impl Activity {
    fn add(&mut self, counts: &Counts, state: InstanceState) {
        for (t, n) in self.traffic.iter_mut().zip(counts.totals()) {
            *t = t.saturating_add(n);
        }
        self.waits.add(&counts.waits);
        self.handling.add(&counts.handling);
        if state.is_final() {
            *self.ended.entry(state.name()).or_default() += 1;
        }
    }
}

/// An instance hosted here, as a watcher sees it (`service::dashboard`).
pub struct Shown {
    pub found: Found,
    /// How long ago it was created.
    pub age: Duration,
    /// The child process running its code, if one does.
    pub pid: Option<libc::pid_t>,
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
    /// The keys the service interface accepts (`config.keys`, parsed).
    pub keys: Keys,
    /// Reached through a relay (`config.via_relay`), not directly.
    pub via_relay: Option<ViaRelay>,
    /// Its identity in tunnels through that relay (`service::tunnel`).
    pub tunnel: Option<Identity>,
    /// The client its instances send stores (and ask their peers) with.
    pub stores: Arc<Stores>,
    pub jobs: Arc<Jobs>,
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
    /// Request bodies held in memory now, across all connections.
    pub buffered: Arc<Buffered>,
    /// What the endpoint counts (`GET /metrics`).
    pub metrics: Metrics,
    /// What runs show on this endpoint's dashboard, and the pages open on it (`service::dashboard`).
    pub board: Board,
    pub watchers: Watchers,
    /// What the instances whose records are forgotten did (`activity`).
    retired: Mutex<Activity>,
    /// Set once the endpoint is closed (`close`): its listener, connections
    /// and relay connections end.
    closed: tokio::sync::watch::Sender<bool>,
}

impl Endpoint {
    /// Bind and start serving.
    pub fn start(mut config: Config) -> Result<Arc<Endpoint>> {
        let keys = config.keys.as_deref().map(Keys::parse).transpose()?.unwrap_or_default();
        if let Some(bad) = keys.relay_names().find(|n| !valid_relay_name(n)) {
            return err(ErrorClass::Arg, format!("keys: relay name {bad:?} is not 1-{MAX_RELAY_NAME} characters of [A-Za-z0-9._-]"));
        }
        let tls = match (&config.tls_cert, &config.tls_key, config.tls_self_signed) {
            (Some(cert), Some(key), false) => Some(TlsSetting::Files { cert: cert.clone(), key: key.clone() }),
            (None, None, true) => Some(TlsSetting::SelfSigned { cert_out: config.tls_cert_out.clone() }),
            (None, None, false) => None,
            _ => return err(ErrorClass::Arg, "TLS: give both tls_cert and tls_key, or tls_self_signed, not both"),
        };
        let via_relay = match (&config.via_relay, &config.relay_key) {
            (Some(url), Some(key)) => Some(ViaRelay::new(url, key)?),
            (Some(_), None) => return err(ErrorClass::Arg, "via_relay needs relay_key: a key of the relay with the 'relay' scope"),
            (None, _) => None,
        };
        // Behind a relay: the identity its pinned URL names (`service::tunnel`).
        let tunnel = match &via_relay {
            None => None,
            Some(via) => {
                let files = config.tls_cert.as_deref().zip(config.tls_key.as_deref());
                let identity = Identity::start(files, config.tunnel_key.as_deref())?;
                if let Some(given) = via.pin.as_deref().filter(|&p| p != identity.pin) {
                    let why = format!(
                        "--via-relay pins {PIN_PREFIX}{given}, but this endpoint's tunnel identity is {PIN_PREFIX}{}: give the relay's URL without a pin",
                        identity.pin
                    );
                    return err(ErrorClass::Arg, why);
                }
                Some(identity)
            }
        };
        let listener = runtime()
            .block_on(tokio::net::TcpListener::bind((config.host.as_str(), config.port)))
            .or_else(|e| err(ErrorClass::Other, format!("cannot bind {}:{}: {e}", config.host, config.port)))?;
        let addr = listener.local_addr().expect("bound socket has an address");
        let tls = tls.map(|t| ServerTls::start(&t, &config.host)).transpose()?;
        if let Some(via) = &via_relay {
            // Relayed requests carry the relay's name in `Host`.
            config.allow_hosts.push(via.host());
        }
        let sandbox = config.sandbox.clone().map(|command| SandboxSetting {
            command,
            max_memory: Some(config.max_instance_memory).filter(|&m| m > 0),
            max_total_memory: config.max_instances_memory,
            max_key_memory: config.max_instances_memory_per_key,
            max_time: config.max_instance_time,
            spares: config.spare_instances,
            trust: tls.as_ref().and_then(|t| t.certificate_file.clone()),
        });
        let (tx, rx) = mpsc::channel();
        let jobs = Arc::new(Jobs::new(&config.jobs, &keys)?);
        let spares = sandbox.as_ref().map(Spares::new);
        let buffered = Buffered::new(config.max_buffered);
        let ep = Arc::new(Endpoint {
            config,
            addr,
            keys,
            via_relay,
            tunnel,
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
            buffered,
            metrics: Metrics::default(),
            board: Board::default(),
            watchers: Watchers::default(),
            retired: Mutex::new(Activity::default()),
            closed: tokio::sync::watch::channel(false).0,
        });
        runtime().spawn(crate::service::server::serve(ep.clone(), listener));
        if let Some(via) = ep.via_relay.clone() {
            runtime().spawn(crate::service::reverse::keep(ep.clone(), via));
        }
        runtime().spawn(crate::jobs::expiry::expire_forever(Arc::downgrade(&ep.jobs)));
        runtime().spawn(crate::jobs::restore::beat_forever(Arc::downgrade(&ep.jobs)));
        runtime().spawn(summarize_forever(Arc::downgrade(&ep)));
        crate::service::shutdown::register(&ep);
        Ok(ep)
    }

    /// Close the endpoint: it stops accepting connections and ends those it
    /// serves (its relay connections too), its jobs end (a work directory
    /// it made is removed), its spare instance processes end and a
    /// certificate it wrote is removed. Instances running go on to their
    /// end; nothing reaches them any more.
    pub async fn close(&self) {
        self.closed.send_replace(true);
        self.jobs.close().await;
        if let Some(spares) = &self.spares {
            spares.close();
        }
        if let Some(tls) = &self.tls {
            tls.remove_made_files();
        }
    }

    /// Resolves once the endpoint is closed.
    pub async fn closing(&self) {
        let _ = self.closed.subscribe().wait_for(|&closed| closed).await;
    }

    /// The URL peers use to reach this endpoint.
    pub fn url(&self) -> String {
        if let Some(via) = &self.via_relay {
            // Pinned: clients reach it end to end through the relay (`net::tunnel`).
            return match &self.tunnel {
                Some(t) => format!("{}#{PIN_PREFIX}{}", via.url, t.pin),
                None => via.url.clone(),
            };
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
            if let Some(other) = map.values().find(|h| h.domain() == binding.domain) {
                if other.owner != owner {
                    return conflict(format!("domain id {} is taken here by another key", binding.domain));
                }
                let same_domain = match &other.held {
                    Held::Live { instance, .. } => {
                        instance.binding.endpoints == binding.endpoints && instance.binding.token == binding.token
                    }
                    Held::Ended(e) => e.same_domain(&binding),
                };
                if !same_domain {
                    return conflict(format!("domain {} is already bound here with other endpoints or token", binding.domain));
                }
            }
            if let Some(same) = map.get(&key) {
                // The same binding from the same key again is the same request
                // (a client's retry after a connection closed under it): it
                // answers as the first did, so *run* can be safely repeated.
                match &same.held {
                    Held::Live { instance, .. } if same.owner == owner && instance.binding == binding => return Ok(instance.clone()),
                    Held::Ended(e) if same.owner == owner && e.same_binding(&binding) => {
                        return conflict(format!("domain {} rank {} ran here and ended", key.0, key.1))
                    }
                    _ => return conflict(format!("domain {} rank {} already exists here", key.0, key.1)),
                }
            }
            if let Some(owner) = owner {
                self.admit(&mut map, owner)?;
            }
            let instance = Instance::new(binding, self.stores.clone());
            let sandbox = match (&self.spares, queue) {
                (Some(spares), true) => {
                    let sandbox = Arc::new(Sandbox::default());
                    spares.start(instance.clone(), sandbox.clone(), owner);
                    Some(sandbox)
                }
                _ => None,
            };
            let queued = queue && sandbox.is_none();
            map.insert(
                key,
                Hosted { owner, held: Held::Live { instance: instance.clone(), sandbox, ended_at: None }, since: Instant::now() },
            );
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
        summarize(map, self.config.instance_linger);
        let live = |h: &Hosted| h.running();
        let busy = |per_key: bool, m: String| Err(Refused::Busy { per_key, error: Error::new(ErrorClass::Other, m) });
        let (max, per_key) = (self.config.max_instances, self.config.max_instances_per_key);
        if map.values().filter(|h| live(h)).count() >= max {
            return busy(false, format!("this endpoint runs its maximum of {max} instances (--max-instances); try again later"));
        }
        if map.values().filter(|h| h.owner == Some(owner) && live(h)).count() >= per_key {
            return busy(true, format!("{owner} runs its maximum of {per_key} instances here (--max-instances-per-key); try again later"));
        }
        let held = map.values().filter(|h| h.owner == Some(owner)).count();
        if held >= KEEP_PER_KEY {
            let mut summaries: Vec<(Instant, (String, u32))> = map
                .iter()
                .filter_map(|(k, h)| match &h.held {
                    Held::Ended(e) if h.owner == Some(owner) => Some((e.at, k.clone())),
                    _ => None,
                })
                .collect();
            summaries.sort_unstable();
            for (_, k) in summaries.into_iter().take(held - KEEP_PER_KEY / 2) {
                if let Some(gone) = map.remove(&k) {
                    self.retired.lock().add(&gone.counts(), gone.status().state);
                }
            }
        }
        Ok(())
    }

    /// `domain` rank `rank` here, whole (until `instance_linger` after it ended).
    pub fn instance(&self, domain: &str, rank: u32) -> Option<Arc<Instance>> {
        self.instances.lock().get(&(domain.to_string(), rank)).and_then(|h| h.live().cloned())
    }

    /// `domain` rank `rank` here, whole or as what was kept of it once it ended.
    pub fn find(&self, domain: &str, rank: u32) -> Option<Found> {
        self.instances.lock().get(&(domain.to_string(), rank)).map(Hosted::found)
    }

    /// The instances here whose domain and owner `pick` takes, whole or summarized.
    pub fn hosted_where(&self, pick: impl Fn(&str, Option<KeyId>) -> bool) -> Vec<Found> {
        self.instances.lock().values().filter(|h| pick(h.domain(), h.owner)).map(Hosted::found).collect()
    }

    /// Every instance hosted here, whole or summarized.
    pub fn shown(&self) -> Vec<Shown> {
        let pid = |h: &Hosted| match &h.held {
            Held::Live { sandbox, .. } => sandbox.as_ref().and_then(|s| s.pid()),
            Held::Ended(_) => None,
        };
        self.instances.lock().values().map(|h| Shown { found: h.found(), age: h.since.elapsed(), pid: pid(h) }).collect()
    }

    /// The child process running `domain` rank `rank`'s code, if it runs in one.
    pub fn sandbox(&self, domain: &str, rank: u32) -> Option<Arc<Sandbox>> {
        match &self.instances.lock().get(&(domain.to_string(), rank))?.held {
            Held::Live { sandbox, .. } => sandbox.clone(),
            Held::Ended(_) => None,
        }
    }

    /// Some live instance of `domain` here, if any (they share its token and size).
    pub fn any_instance_of(&self, domain: &str) -> Option<Arc<Instance>> {
        self.instances.lock().values().filter(|h| h.domain() == domain).find_map(|h| h.live().cloned())
    }

    /// Keep only a summary of the instances that ended `instance_linger` ago.
    pub fn summarize(&self) {
        summarize(&mut self.instances.lock(), self.config.instance_linger);
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
    /// What this endpoint's instances did, in all, ever.
    pub fn activity(&self) -> Activity {
        let mut all = self.retired.lock().clone();
        for h in self.instances.lock().values() {
            all.add(&h.counts(), h.status().state);
        }
        all
    }

    /// What the instances of each domain with a live instance here did (the
    /// domains are as many as live instances at most: bounded).
    pub fn live_domains(&self) -> BTreeMap<String, Activity> {
        let mut by = BTreeMap::new();
        for h in self.instances.lock().values().filter(|h| h.running()) {
            by.entry(h.domain().to_string()).or_insert_with(Activity::default).add(&h.counts(), h.status().state);
        }
        by
    }

    /// How many instances are hosted in each state (ended ones as long as they are kept).
    pub fn instance_states(&self) -> std::collections::BTreeMap<&'static str, u64> {
        let mut by = std::collections::BTreeMap::new();
        for h in self.instances.lock().values() {
            *by.entry(h.status().state.name()).or_default() += 1;
        }
        by
    }

    pub fn describe(&self, visible: impl Fn(&str) -> bool) -> Value {
        let mut domains: HashMap<String, Vec<Value>> = HashMap::new();
        for h in self.instances.lock().values().filter(|h| visible(h.token())) {
            let s = h.status();
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

/// Each instance that ended `linger` ago or more becomes its summary
/// (`Ended`); one that has just ended is noted, to be summarized later.
fn summarize(map: &mut HashMap<(String, u32), Hosted>, linger: Duration) {
    for h in map.values_mut() {
        let Held::Live { instance, ended_at, .. } = &mut h.held else { continue };
        if !instance.state().is_final() {
            continue;
        }
        let since = *ended_at.get_or_insert_with(Instant::now);
        if since.elapsed() >= linger {
            let why = instance.ended().unwrap_or_else(|| Error::new(ErrorClass::Comm, "the instance ended"));
            h.held = Held::Ended(Arc::new(Ended::new(&instance.binding, instance.status(), why, instance.traffic.counts())));
        }
    }
}

/// `summarize` now and then, for as long as the endpoint lives.
async fn summarize_forever(ep: std::sync::Weak<Endpoint>) {
    loop {
        let every = ep.upgrade().map_or(Duration::ZERO, |ep| (ep.config.instance_linger / 2).max(Duration::from_millis(100)));
        tokio::time::sleep(every).await;
        match ep.upgrade() {
            Some(ep) => ep.summarize(),
            None => return,
        }
    }
}
