//! The core's settings from the environment, in one place: every `MPIWS_*`
//! variable but `MPIWS_CA_FILE` (read by `net::tls` when it makes its
//! client) and the sandbox's internal `MPIWS_SANDBOX_TRUST`. Each is read
//! once per process (the forced
//! collective algorithms and the datatype bound excepted, read at each use,
//! so a program may change them as it goes). An endpoint's own limits are
//! its `service::Config`, set by `mpiws serve`'s options.

use std::sync::OnceLock;
use std::time::Duration;

/// A number of seconds from `var`, at least 50 ms; `default` if unset or not a number.
fn seconds(var: &str, default: f64) -> Duration {
    let secs = std::env::var(var).ok().and_then(|v| v.parse::<f64>().ok()).unwrap_or(default);
    Duration::from_secs_f64(secs.max(0.05))
}

fn number<T: std::str::FromStr>(var: &str) -> Option<T> {
    std::env::var(var).ok().and_then(|v| v.parse().ok())
}

/// A yes/no setting: `1`, `true`, `yes` or `0`, `false`, `no`; `default` if unset or another value.
fn switch(var: &str, default: bool) -> bool {
    match std::env::var(var).as_deref() {
        Ok("1" | "true" | "yes") => true,
        Ok("0" | "false" | "no") => false,
        _ => default,
    }
}

/// Threads of the process's tokio runtime (`MPIWS_IO_THREADS`, default 2).
pub fn io_threads() -> usize {
    number("MPIWS_IO_THREADS").unwrap_or(2)
}

/// How long a peer may be unreachable before it is declared gone
/// (`MPIWS_FAILURE_TIMEOUT`, seconds, default 3).
pub fn failure_timeout() -> Duration {
    static T: OnceLock<Duration> = OnceLock::new();
    *T.get_or_init(|| seconds("MPIWS_FAILURE_TIMEOUT", 3.0))
}

/// How long a sender keeps trying a peer whose endpoint says its instance
/// does not exist yet (503 with `Retry-After`: its *run* request is still
/// on its way) — `MPIWS_STARTUP_TIMEOUT`, seconds, default 30.
pub fn startup_timeout() -> Duration {
    static T: OnceLock<Duration> = OnceLock::new();
    *T.get_or_init(|| seconds("MPIWS_STARTUP_TIMEOUT", 30.0))
}

/// Whether to negotiate streams (`MPIWS_STREAMS=0` keeps to HTTP stores).
pub fn streams_enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var("MPIWS_STREAMS").map_or(true, |v| v != "0"))
}

/// Whether ranks on one host use the same-host channel (`net::local`;
/// `MPIWS_NOLOCAL=1`: never, as MPICH's `MPIR_CVAR_NOLOCAL`).
pub fn local_channel() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| !switch("MPIWS_NOLOCAL", false))
}

/// Each same-host ring's data area in KiB (`MPIWS_LOCAL_RING_KIB`, default
/// 1024; `net::local` rounds it to a power of two within the ring's bounds).
pub fn local_ring_kib() -> usize {
    static KIB: OnceLock<usize> = OnceLock::new();
    *KIB.get_or_init(|| number("MPIWS_LOCAL_RING_KIB").unwrap_or(1024))
}

/// The buffers kept for large gets' replies, at most, in bytes
/// (`MPIWS_RMA_REPLY_KEEP_MIB`, default 32; 0 keeps none):
/// `mpi::window::replies`.
pub fn rma_reply_keep_bytes() -> usize {
    static BYTES: OnceLock<usize> = OnceLock::new();
    *BYTES.get_or_init(|| number::<usize>("MPIWS_RMA_REPLY_KEEP_MIB").unwrap_or(32).saturating_mul(1 << 20))
}

/// Whether large payloads between ranks on one host go by reference
/// (`net::pull`; `MPIWS_LOCAL_PULL=0`: never, they cross the rings).
pub fn local_pull() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| switch("MPIWS_LOCAL_PULL", true))
}

/// The bound on an instance's unexpected messages, in bytes
/// (`MPIWS_MAX_UNEXPECTED`, default 256 MiB).
pub fn max_unexpected() -> usize {
    static MAX: OnceLock<usize> = OnceLock::new();
    *MAX.get_or_init(|| number("MPIWS_MAX_UNEXPECTED").unwrap_or(256 << 20))
}

/// How long a waiter polls before it sleeps, and again after each frame it reads (`MPIWS_SPIN_US`, microseconds,
/// default 200; 0: sleep at once). Why: `engine::completion`.
pub fn spin_budget() -> Duration {
    static BUDGET: OnceLock<Duration> = OnceLock::new();
    *BUDGET.get_or_init(|| Duration::from_micros(number("MPIWS_SPIN_US").unwrap_or(200)))
}

/// Round trips from this long on make a network wide (`MPIWS_WIDE_RTT_MS`,
/// milliseconds, default 2): `mpi::collective::network`.
pub fn wide_rtt() -> Duration {
    number::<f64>("MPIWS_WIDE_RTT_MS").map_or(Duration::from_millis(2), |ms| Duration::from_secs_f64(ms / 1e3))
}

/// The algorithm forced for collective `name` (`MPIWS_ALGO_BCAST=binomial`, ...), if any.
pub fn forced_algorithm(name: &str) -> Option<String> {
    std::env::var(format!("MPIWS_ALGO_{}", name.to_uppercase())).ok()
}

/// How many byte runs one item of a datatype may have
/// (`MPIWS_DATATYPE_MAX_BLOCKS`, default 2^24: a vector of a million
/// single elements has a million).
pub fn datatype_max_blocks() -> usize {
    number("MPIWS_DATATYPE_MAX_BLOCKS").unwrap_or(1 << 24)
}

/// The environment variable naming extra trusted certificates (PEM), read
/// when the process's TLS client is made (`net::tls`).
pub const CA_FILE: &str = "MPIWS_CA_FILE";

/// Durations as a number of seconds in settings (`service::Config`,
/// `jobs::Limits`): `#[serde(with = "crate::config::seconds")]`.
pub mod seconds {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let secs = f64::deserialize(d)?;
        Duration::try_from_secs_f64(secs).map_err(|_| serde::de::Error::custom(format!("{secs}: not a number of seconds")))
    }
}
