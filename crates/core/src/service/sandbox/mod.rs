//! **Instances in processes of their own.** An endpoint that hosts strangers'
//! domains (`mpiws serve`) runs each instance's service code in a child
//! process, so that one instance that holds the GIL, crashes, leaks memory
//! or never ends cannot stop the others from starting, communicating or
//! being cancelled. The endpoint keeps the instance's record (its owner,
//! its state for `status`, the domain's token) and the child does the
//! work:
//!
//! - [`start`]: keep children started ahead of need (`Spares`: each in its
//!   own process group, with a memory bound, its services imported), give
//!   one the binding, follow its reports, and end it on cancel, on its time
//!   limit, or when it dies (the record says why);
//! - [`forks`]: the fork server children are forked from (an interpreter
//!   with the services imported: a child in milliseconds), and [`process`],
//!   the one handle on a child, forked or started;
//! - [`relay`]: the domain's traffic to the instance: a stream upgrade is
//!   accepted here and its socket handed to the child (then the child reads
//!   and writes it directly: no copy, no extra hop); the other direct
//!   requests (stores, `matched`, `withdraw`) are relayed over HTTP to the
//!   child's loopback endpoint;
//! - [`memory`]: the budget of resident memory the instance processes of
//!   all keys, and of each key, may hold; an instance over it is ended;
//! - [`handover`]: the wire between the two, a socket pair carrying socket
//!   descriptors (`SCM_RIGHTS`) one way and reports the other;
//! - [`child`]: the child's half: create the instance from the binding,
//!   take the streams handed over, report the outcome, and end at once if
//!   the endpoint is gone.

pub mod child;
pub mod handover;
pub mod memory;
pub mod relay;
pub mod start;

use std::os::unix::net::UnixStream;
use std::time::Duration;

use parking_lot::Mutex;

/// How an endpoint starts an instance's child process (`Config::sandbox`).
#[derive(Debug, Clone)]
pub struct SandboxSetting {
    /// The program and arguments of a child (`python -m mpiws.service.sandbox ...`):
    /// it reads the binding on stdin and finds the wire at `handover::CHILD_FDS`.
    pub command: Vec<String>,
    /// Address space of a child (RLIMIT_AS); None: unbounded.
    pub max_memory: Option<u64>,
    /// Resident memory of all children, and of one key's (`memory`); 0: unbounded.
    pub max_total_memory: u64,
    pub max_key_memory: u64,
    /// How long an instance may run before it is ended.
    pub max_time: Duration,
    /// Children kept started ahead of need, waiting for an instance.
    pub spares: usize,
    /// The endpoint's own self-signed certificate, which its children trust
    /// as it does (set by `Endpoint::start`).
    pub trust: Option<std::path::PathBuf>,
}

/// Where a child finds `SandboxSetting::trust`.
const TRUST_ENV: &str = "MPIWS_SANDBOX_TRUST";

/// The endpoint's handle on a child: set once the child is ready.
pub struct Sandbox {
    ready: Mutex<Option<Ready>>,
    /// The child's process id once started (0 before), for who watches its CPU and memory.
    pid: std::sync::atomic::AtomicI32,
    /// Told when the child is ready (or gone), for requests that came first.
    changed: tokio::sync::watch::Sender<()>,
}

impl Default for Sandbox {
    fn default() -> Self {
        Sandbox { ready: Mutex::new(None), pid: Default::default(), changed: tokio::sync::watch::channel(()).0 }
    }
}

struct Ready {
    /// The child's loopback endpoint (http), for relayed requests.
    url: String,
    /// The endpoint's end of the hand-over wire.
    handover: UnixStream,
}

impl Sandbox {
    /// The child's loopback URL, once it is ready and until it ended.
    pub fn url(&self) -> Option<String> {
        self.ready.lock().as_ref().map(|r| r.url.clone())
    }

    /// Wait up to `timeout` for the child to be ready; its URL, if it is.
    pub async fn url_within(&self, timeout: Duration) -> Option<String> {
        let mut changed = self.changed.subscribe();
        let wait = async {
            loop {
                if let Some(url) = self.url() {
                    return Some(url);
                }
                if changed.changed().await.is_err() {
                    return None;
                }
            }
        };
        tokio::time::timeout(timeout, wait).await.ok().flatten()
    }

    /// The child's process id, once it runs the instance's code.
    pub fn pid(&self) -> Option<libc::pid_t> {
        Some(self.pid.load(std::sync::atomic::Ordering::Relaxed)).filter(|&p| p > 1)
    }

    fn set_ready(&self, url: String, handover: UnixStream) {
        *self.ready.lock() = Some(Ready { url, handover });
        self.changed.send_replace(());
    }

    /// The child ended: nothing more goes to it (and closing the wire ends a child still there).
    fn close(&self) {
        self.ready.lock().take();
        self.changed.send_replace(());
    }
}
