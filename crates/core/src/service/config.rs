//! An endpoint's settings, declared once, here. Each is a keyword of
//! `mpiws._core.Endpoint` and, where a deployer sets it, an option of
//! `mpiws serve` of the same name (`max_message` is `--max-message`), with
//! its default in [`Config::default`] (jobs' own in `jobs::Limits`). The
//! command line shows these defaults as the core reports them
//! (`_core.endpoint_settings`), and tests check that its options and
//! docs/security.md's limits table name exactly these settings with these
//! defaults. Durations are given in seconds.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::config::seconds;
use crate::error::{err, ErrorClass, Result};
use crate::jobs::Limits;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct Config {
    /// Address to bind; loopback unless told otherwise.
    pub host: String,
    /// 0 picks a free port.
    pub port: u16,
    /// The text of a keys file (one key a line, with its scopes): the keys
    /// the service interface accepts. None: it refuses everyone.
    pub keys: Option<String>,
    /// Host names (besides IP literals and `localhost`) requests may be sent to; `*`: any.
    pub allow_hosts: Vec<String>,
    /// Web page origins allowed to call (`*`: any); none by default.
    pub allow_origins: Vec<String>,
    /// Largest message body a store accepts (and stream message).
    pub max_message: u64,
    /// Connections served at once; further ones wait in the listen queue
    /// (the oldest idle one that showed no credential yet is shed first:
    /// `service::conns`).
    pub max_connections: usize,
    /// Connections served at once from one client address.
    /// Bytes of request bodies read whole (bindings, spawn inputs) held at
    /// once across all connections (`service::buffered`).
    pub max_buffered: u64,
    pub max_connections_per_address: usize,
    /// Of `max_connections`, the places connections that showed no
    /// credential yet may not take.
    pub reserved_connections: usize,
    /// A connection that sends no complete request head for this long is closed (idle ones too).
    #[serde(with = "seconds")]
    pub header_timeout: Duration,
    /// A request body that stalls for this long is refused (408).
    #[serde(with = "seconds")]
    pub body_timeout: Duration,
    /// Largest *run* body (the binding).
    pub max_binding: usize,
    /// Most ranks (endpoint URLs) in one binding.
    pub max_ranks: usize,
    /// Instances starting or running at once, on the whole endpoint and per key.
    pub max_instances: usize,
    pub max_instances_per_key: usize,
    /// The jobs layer's limits (work directory, uploads, pulls, disk, jobs).
    #[serde(flatten)]
    pub jobs: Limits,
    /// Largest spawn (or call) request body: inputs sent by value.
    pub max_spawn_body: u64,
    /// Serve https with this certificate chain and private key (PEM files) ...
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    /// ... or with one made at start-up (`service::tls`), written to `tls_cert_out` if given.
    pub tls_self_signed: bool,
    pub tls_cert_out: Option<PathBuf>,
    /// How long a connection may take to complete its TLS handshake.
    #[serde(with = "seconds")]
    pub tls_handshake_timeout: Duration,
    /// Run each instance's code in a child process, started with this
    /// command (`service::sandbox`); None: the service layer runs queued
    /// instances itself (`Endpoint::next_run`).
    pub sandbox: Option<Vec<String>>,
    /// Address space of one instance's process, bytes; 0: unbounded.
    pub max_instance_memory: u64,
    /// Resident memory all instance processes together may hold, and one
    /// key's (`service::sandbox::memory`), bytes; 0: unbounded. By default
    /// half of this machine's memory, and a quarter.
    pub max_instances_memory: u64,
    pub max_instances_memory_per_key: u64,
    /// How long an instance may run before it is ended.
    #[serde(with = "seconds")]
    pub max_instance_time: Duration,
    /// How long an ended instance is kept whole (its peers may still ask
    /// what it received); after that only a summary of it is kept.
    #[serde(with = "seconds")]
    pub instance_linger: Duration,
    /// Instance processes kept started ahead of need.
    pub spare_instances: usize,
    /// Serve as a relay (`service::relay`): endpoints that accept no
    /// connections are reached at `/relay/{name}` over connections they open here.
    pub relay: bool,
    /// Most connections one name keeps open to this relay.
    pub relay_max_connections: usize,
    /// Dashboard pages open at once (`service::dashboard`: each gathers the
    /// endpoint's state every second while it is open).
    pub max_dashboard_streams: usize,
    /// Accept no connections from outside: be reached through the relay at
    /// this URL (`service::reverse`), registering with `relay_key`.
    pub via_relay: Option<String>,
    pub relay_key: Option<String>,
    /// Behind a relay: the private key of this endpoint's identity in
    /// tunnels (`service::tunnel`), kept so that its pin outlives a
    /// restart: read if the file is there, else made and written there
    /// (mode 0600). None: a new key each start (`tls_cert`/`tls_key`, if
    /// given, are the identity instead).
    pub tunnel_key: Option<PathBuf>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            host: "127.0.0.1".into(),
            port: 0,
            keys: None,
            allow_hosts: Vec::new(),
            allow_origins: Vec::new(),
            max_message: 1 << 30,
            max_connections: 1024,
            max_connections_per_address: 512,
            max_buffered: 256 << 20,
            reserved_connections: 128,
            header_timeout: Duration::from_secs(30),
            body_timeout: Duration::from_secs(60),
            max_binding: 1 << 20,
            max_ranks: 16384,
            max_instances: 256,
            max_instances_per_key: 128,
            jobs: Limits::default(),
            max_spawn_body: 64 << 20,
            tls_cert: None,
            tls_key: None,
            tls_self_signed: false,
            tls_cert_out: None,
            tls_handshake_timeout: Duration::from_secs(10),
            sandbox: None,
            max_instance_memory: 4 << 30,
            max_instances_memory: machine_memory() / 2,
            max_instances_memory_per_key: machine_memory() / 4,
            max_instance_time: Duration::from_secs(24 * 3600),
            instance_linger: Duration::from_secs(60),
            spare_instances: 2,
            relay: false,
            relay_max_connections: 256,
            max_dashboard_streams: 8,
            via_relay: None,
            relay_key: None,
            tunnel_key: None,
        }
    }
}

/// This machine's physical memory, bytes (0 if it cannot be told).
fn machine_memory() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let (pages, size) = unsafe { (libc::sysconf(libc::_SC_PHYS_PAGES), libc::sysconf(libc::_SC_PAGESIZE)) };
    u64::try_from(pages).unwrap_or(0).saturating_mul(u64::try_from(size).unwrap_or(0))
}

impl Config {
    /// Settings from a JSON object of `name: value` (durations in seconds);
    /// those not given keep their defaults. A name that is no setting is an
    /// error that lists the settings.
    pub fn from_json(settings: &serde_json::Value) -> Result<Config> {
        let Some(given) = settings.as_object() else { return err(ErrorClass::Arg, "endpoint settings are an object of name: value") };
        let known = Config::defaults();
        let known = known.as_object().expect("an object");
        if let Some(bad) = given.keys().find(|k| !known.contains_key(*k)) {
            let names: Vec<&str> = known.keys().map(String::as_str).collect();
            return err(ErrorClass::Arg, format!("{bad:?} is not an endpoint setting (they are: {})", names.join(", ")));
        }
        serde_json::from_value(settings.clone()).or_else(|e| {
            // Which setting: each given one alone (serde's message does not name a flattened field).
            let one = |(k, v): (&String, &serde_json::Value)| {
                serde_json::from_value::<Config>(serde_json::json!({k: v})).err().map(|e| (k.clone(), e))
            };
            match given.iter().find_map(one) {
                Some((name, e)) => err(ErrorClass::Arg, format!("endpoint setting {name}: {e}")),
                None => err(ErrorClass::Arg, format!("endpoint settings: {e}")),
            }
        })
    }

    /// Every setting with its default, as JSON (what `from_json` takes).
    pub fn defaults() -> serde_json::Value {
        serde_json::to_value(Config::default()).expect("settings serialize")
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn settings_not_given_keep_their_defaults_and_durations_are_seconds() {
        let c = Config::from_json(&json!({"max_message": 5, "job_ttl": 1.5, "header_timeout": 2})).unwrap();
        assert_eq!((c.max_message, c.jobs.job_ttl, c.header_timeout), (5, Duration::from_millis(1500), Duration::from_secs(2)));
        assert_eq!((c.max_connections, c.jobs.max_jobs), (Config::default().max_connections, Limits::default().max_jobs));
        assert_eq!(Config::defaults()["job_ttl"], json!(86400.0));
        assert_eq!(Config::defaults()["max_fetch"], json!(null));
    }

    #[test]
    fn an_unknown_or_ill_typed_setting_is_an_error_that_says_so() {
        let e = Config::from_json(&json!({"max_mesage": 5})).unwrap_err();
        assert!(e.message.contains("\"max_mesage\" is not an endpoint setting") && e.message.contains("max_message"), "{}", e.message);
        let e = Config::from_json(&json!({"max_message": "big"})).unwrap_err();
        assert!(e.class == ErrorClass::Arg && e.message.starts_with("endpoint setting max_message: invalid type"), "{}", e.message);
        assert!(Config::from_json(&json!({"body_timeout": -1})).is_err());
    }
}
