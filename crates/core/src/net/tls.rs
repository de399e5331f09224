//! The client side of TLS: which servers this process trusts, how a stream
//! connects to an https peer, and how a TLS failure is told.
//!
//! Trusted: the system's roots plus every certificate in the PEM bundle
//! named by `MPIWS_CA_FILE` (`--ca FILE` on the command line sets it). Both
//! are read once, when the first HTTP client or https stream is made.

use std::sync::Arc;

use parking_lot::Mutex;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, RootCertStore};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

use crate::config::CA_FILE;
use crate::error::{Error, ErrorClass, Result};
use crate::net::proxy;

/// How long a client waits for a server's TLS handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The TCP connection under a TLS session, read through a buffer: rustls
/// reads 4 KiB at a time, a system call each without it (a 16 MiB message
/// took 4096 of them).
pub type Wire = tokio::io::BufReader<TcpStream>;

pub fn wire(tcp: TcpStream) -> Wire {
    tokio::io::BufReader::with_capacity(64 * 1024, tcp)
}

/// The cryptography of every TLS session this process makes or accepts:
/// ring's, with TLS 1.3's AES-128-GCM first (a stream's bytes are all
/// encrypted once and decrypted once: AES-128 is 15% faster than AES-256
/// here, and as safe for the purpose; a peer's own order is kept where it
/// leads the choice).
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    let mut p = rustls::crypto::ring::default_provider();
    p.cipher_suites.sort_by_key(|s| s.suite() != rustls::CipherSuite::TLS13_AES_128_GCM_SHA256);
    Arc::new(p)
}

type Made = Option<std::result::Result<Arc<ClientConfig>, String>>;

/// The client configuration, made at first use; certificates this process
/// serves with `--tls-self-signed` (trusted by it, so that its own ranks
/// reach it).
static CONFIG: Mutex<Made> = Mutex::new(None);
static OWN: Mutex<Vec<CertificateDer<'static>>> = Mutex::new(Vec::new());

/// The process's client configuration (an error if `MPIWS_CA_FILE` is unusable).
pub fn client_config() -> Result<Arc<ClientConfig>> {
    let mut made = CONFIG.lock();
    made.get_or_insert_with(build_client_config).clone().map_err(|m| Error::new(ErrorClass::Arg, m))
}

/// Trust `cert` too (a self-signed certificate this process serves with):
/// clients made from now on trust it.
pub fn trust_own(cert: CertificateDer<'static>) {
    OWN.lock().push(cert);
    *CONFIG.lock() = None;
}

fn build_client_config() -> std::result::Result<Arc<ClientConfig>, String> {
    let mut roots = RootCertStore::empty();
    for cert in OWN.lock().iter() {
        roots.add(cert.clone()).map_err(|e| format!("unusable own certificate: {e}"))?;
    }
    // Unreadable system roots are not fatal: MPIWS_CA_FILE may be all we need.
    for cert in rustls_native_certs::load_native_certs().certs {
        let _ = roots.add(cert);
    }
    if let Some(path) = std::env::var_os(CA_FILE).filter(|p| !p.is_empty()) {
        let shown = format!("{CA_FILE}={}", path.to_string_lossy());
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&path)
            .and_then(|certs| certs.collect())
            .map_err(|e| format!("{shown}: cannot read certificates: {e}"))?;
        if certs.is_empty() {
            return Err(format!("{shown}: no PEM certificate in it"));
        }
        for cert in certs {
            roots.add(cert).map_err(|e| format!("{shown}: unusable certificate: {e}"))?;
        }
    }
    let mut config = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS set-up failed: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    // A stream takes its session's keys to seal and open its own records
    // (`net::tls_socket`); nothing else reads them.
    config.enable_secret_extraction = true;
    Ok(Arc::new(config))
}

/// The name a certificate must bear for `addr` (`host:port`, `[v6]:port`).
fn server_name(addr: &str) -> Result<ServerName<'static>> {
    let host = match addr.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or(rest),
        None => addr.rsplit_once(':').map_or(addr, |(h, _)| h),
    };
    ServerName::try_from(host.to_string()).map_err(|e| Error::new(ErrorClass::Arg, format!("{host} is not a valid TLS server name: {e}")))
}

/// Connect to `addr` (through the environment's proxy, `net::proxy`) and complete a verified TLS handshake, within
/// `HANDSHAKE_TIMEOUT`. An untrusted certificate is a final error (class
/// Other); an unreachable peer a transient one (ProcFailed).
pub async fn connect(addr: &str, peer: &str) -> Result<TlsStream<Wire>> {
    let connector = TlsConnector::from(client_config()?);
    let name = server_name(addr)?;
    let tcp = proxy::open("https", addr, peer, true).await?.tcp;
    match tokio::time::timeout(HANDSHAKE_TIMEOUT, connector.connect(name, wire(tcp))).await {
        Ok(Ok(tls)) => Ok(tls),
        Ok(Err(e)) => {
            Err(refused(peer, &e).unwrap_or_else(|| Error::new(ErrorClass::ProcFailed, format!("{peer}: TLS handshake failed: {e}"))))
        }
        Err(_) => Err(Error::new(ErrorClass::ProcFailed, format!("{peer}: no TLS handshake within {HANDSHAKE_TIMEOUT:?}"))),
    }
}

/// A TLS failure anywhere in `e`'s chain, told plainly as a final error:
/// trying again cannot make a certificate trusted.
pub fn refused(peer: &str, e: &(dyn std::error::Error + 'static)) -> Option<Error> {
    let mut cause = Some(e);
    while let Some(c) = cause {
        if let Some(tls) = rustls_error(c) {
            let message = match tls {
                rustls::Error::InvalidCertificate(_) => {
                    format!("{peer}: the server's TLS certificate is not trusted ({tls}); give the CA that signed it with --ca FILE or {CA_FILE}")
                }
                _ => format!("{peer}: TLS handshake failed ({tls}); is it an http:// endpoint?"),
            };
            return Some(Error::new(ErrorClass::Other, message));
        }
        cause = c.source();
    }
    None
}

/// `e` itself if a rustls error, or the one an io::Error wraps (maybe
/// twice: io::Error hides what it wraps from `source()`).
fn rustls_error<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a rustls::Error> {
    if let Some(tls) = e.downcast_ref::<rustls::Error>() {
        return Some(tls);
    }
    let inner: &'a (dyn std::error::Error + 'static) = e.downcast_ref::<std::io::Error>()?.get_ref()?;
    rustls_error(inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_names_from_addresses() {
        assert_eq!(server_name("127.0.0.1:8443").unwrap(), ServerName::try_from("127.0.0.1").unwrap());
        assert_eq!(server_name("[::1]:8443").unwrap(), ServerName::try_from("::1").unwrap());
        assert_eq!(server_name("example.org:443").unwrap(), ServerName::try_from("example.org").unwrap());
        assert!(server_name("bad name:1").is_err());
    }

    #[test]
    fn a_rustls_error_is_found_inside_nested_io_errors() {
        let inner = std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer),
        );
        let outer = std::io::Error::other(inner);
        let e = refused("https://x", &outer).expect("a TLS refusal");
        assert_eq!(e.class, ErrorClass::Other);
        assert!(e.message.contains("https://x") && e.message.contains("not trusted") && e.message.contains(CA_FILE), "{}", e.message);
        let plain = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        assert!(refused("https://x", &plain).is_none());
    }
}
