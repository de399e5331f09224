//! The child's half (in `python -m mpiws.service.sandbox`): say warm (its
//! services imported); make the instance from the binding the endpoint
//! writes on stdin, on the child's own loopback endpoint; take the streams
//! the endpoint hands over; say ready; report the instance's traffic now
//! and then (`rank::traffic`: each second it changed, and at the end); at
//! the end report the outcome. When the endpoint goes (the
//! hand-over wire ends), the child ends at once: no orphans.

use std::io::{Read, Write};
use std::os::fd::FromRawFd;
use std::os::unix::net::UnixStream;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use parking_lot::Mutex;
use rustls_pki_types::pem::PemObject;

use crate::error::{Error, ErrorClass, Result};
use crate::rank::traffic::Counts;
use crate::rank::{Binding, Instance};
use crate::service::sandbox::handover::{self, CHILD_FDS};
use crate::service::Endpoint;

/// The reports wire, once the instance exists: one writer at a time, a line in one write.
static REPORTS: OnceLock<Mutex<UnixStream>> = OnceLock::new();

/// How often the instance's traffic is reported, if it changed.
const TRAFFIC_EVERY: Duration = Duration::from_secs(1);

/// Create this child's instance on `ep` and say it is ready.
pub fn begin(ep: &Arc<Endpoint>) -> Result<Arc<Instance>> {
    let broken = |what: &str, e: &dyn std::fmt::Display| Error::new(ErrorClass::Intern, format!("sandbox: {what}: {e}"));
    for fd in [CHILD_FDS.0, CHILD_FDS.1] {
        // SAFETY: F_GETFD only asks whether the descriptor is open.
        if unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
            return Err(broken("not started by an endpoint", &format!("descriptor {fd} is not open")));
        }
    }
    // For this process only: not for the programs its service runs (`os.system`,
    // a subprocess), which would otherwise inherit them, and could take the
    // streams handed over for the instance or report its outcome for it.
    for fd in [CHILD_FDS.0, CHILD_FDS.1] {
        // SAFETY: sets a flag on a descriptor this process owns.
        if unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) } < 0 {
            return Err(broken("cannot keep the wire to itself", &std::io::Error::last_os_error()));
        }
    }
    // SAFETY: the endpoint placed the wire's two ends there (`start::place_wire`), for this process only.
    let (wire, reports) = unsafe { (UnixStream::from_raw_fd(CHILD_FDS.0), UnixStream::from_raw_fd(CHILD_FDS.1)) };
    if let Some(own) = std::env::var_os(super::TRUST_ENV) {
        let pem = std::fs::read(&own).map_err(|e| broken("cannot read the endpoint's certificate", &e))?;
        for cert in rustls_pki_types::CertificateDer::pem_slice_iter(&pem).flatten() {
            crate::net::tls::trust_own(cert);
        }
    }
    // Warm (its services imported): the endpoint may start the next spare.
    writeln!(&reports, "{}", super::start::WARM).or_else(gone_quietly).map_err(|e| broken("cannot report", &e))?;
    let mut text = Vec::new();
    std::io::stdin().read_to_end(&mut text).map_err(|e| broken("cannot read the binding", &e))?;
    if text.is_empty() {
        // A spare whose endpoint ended before giving it an instance: nothing to do.
        // SAFETY: _exit ends the process without running anything else.
        unsafe { libc::_exit(0) }
    }
    let binding: Binding = serde_json::from_slice(&text).map_err(|e| broken("malformed binding", &e))?;
    ep.deploy(&binding.service);
    let instance = ep.create_instance(binding, false, None).map_err(Error::from)?;
    let (taker, max) = (instance.clone(), ep.config.max_message);
    std::thread::Builder::new()
        .name("mpiws-handover".into())
        .spawn(move || take_streams(wire, taker, max))
        .map_err(|e| broken("no thread", &e))?;
    writeln!(&reports, "ready {}", ep.url()).or_else(gone_quietly).map_err(|e| broken("cannot report", &e))?;
    let _ = REPORTS.set(Mutex::new(reports));
    let counted = instance.clone();
    std::thread::Builder::new()
        .name("mpiws-traffic".into())
        .spawn(move || {
            let mut told = Counts::default();
            while !counted.state().is_final() {
                std::thread::sleep(TRAFFIC_EVERY);
                let _ = tell_traffic(&counted, &mut told);
            }
        })
        .map_err(|e| broken("no thread", &e))?;
    Ok(instance)
}

/// Report `instance`'s final status to the endpoint (its traffic first, as it ends).
pub fn report(instance: &Instance) -> Result<()> {
    tell_traffic(instance, &mut Counts::default())?;
    say(&serde_json::to_string(&instance.status()).expect("a status encodes"))
}

/// Report the instance's traffic, if it changed since `told`.
fn tell_traffic(instance: &Instance, told: &mut Counts) -> Result<()> {
    let now = instance.traffic.counts();
    if now == *told {
        return Ok(());
    }
    say(&format!("traffic {}", serde_json::to_string(&now).expect("counts encode")))?;
    *told = now;
    Ok(())
}

/// One line to the endpoint, whole.
fn say(line: &str) -> Result<()> {
    let reports = REPORTS.get().ok_or_else(|| Error::new(ErrorClass::Intern, "sandbox: report before begin"))?;
    let whole = format!("{line}\n");
    reports
        .lock()
        .write_all(whole.as_bytes())
        .or_else(gone_quietly)
        .map_err(|e| Error::new(ErrorClass::Intern, format!("sandbox: cannot report: {e}")))
}

/// A report that finds the endpoint gone (it ended, or was killed) has no
/// one to tell: the process ends at once, with nothing to say (a spare
/// that imported its services for an endpoint that stopped meanwhile).
fn gone_quietly(e: std::io::Error) -> std::io::Result<()> {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        // SAFETY: _exit ends the process without running anything else.
        unsafe { libc::_exit(0) }
    }
    Err(e)
}

fn take_streams(wire: UnixStream, instance: Arc<Instance>, max: u64) {
    while let Ok(Some((source, socket, early))) = handover::receive(&wire) {
        if let Ok(progress) = instance.progress() {
            let _ = progress.add(&instance, source, socket, Bytes::from(early), max);
        }
    }
    // The endpoint is gone, or ended this instance: so does this process, now.
    // SAFETY: _exit ends the process without running anything else.
    unsafe { libc::_exit(70) }
}
