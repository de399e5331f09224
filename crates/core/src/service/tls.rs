//! Serving https: the endpoint's certificate and key (PEM files, or a
//! self-signed pair made at start-up), and each connection's handshake,
//! bounded in time so that a client that connects and says nothing holds
//! nothing for long.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::ServerConfig;
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

use crate::error::{err, Error, ErrorClass, Result};
use crate::jobs::safe_file::make_private_dir;
use crate::net::tls::{wire, Wire};

/// Where the endpoint's certificate comes from (`Config::tls`).
#[derive(Debug, Clone)]
pub enum TlsSetting {
    /// A certificate chain and its private key, PEM files.
    Files { cert: PathBuf, key: PathBuf },
    /// Made at start-up for localhost, 127.0.0.1, ::1 and the bound host;
    /// the certificate (public) is written to `cert_out`, or to a new file
    /// in the temporary directory, for clients to trust.
    SelfSigned { cert_out: Option<PathBuf> },
}

/// An endpoint's TLS state once started.
pub struct ServerTls {
    pub acceptor: TlsAcceptor,
    /// SHA-256 of the (leaf) certificate, as `AA:BB:...`.
    pub fingerprint: String,
    /// Where a self-signed certificate was written.
    pub certificate_file: Option<PathBuf>,
    /// The private directory made for it (no `--tls-cert-out`): removed when
    /// the endpoint ends.
    made_dir: Option<PathBuf>,
}

/// The first byte of every TLS connection (a handshake record).
const TLS_HANDSHAKE_RECORD: u8 = 0x16;

impl ServerTls {
    /// Load (or make) the certificate for an endpoint bound to `host`.
    pub fn start(setting: &TlsSetting, host: &str) -> Result<ServerTls> {
        let (chain, key, certificate_file, made_dir) = match setting {
            TlsSetting::Files { cert, key } => (read_chain(cert)?, read_key(key)?, None, None),
            TlsSetting::SelfSigned { cert_out } => {
                let (chain, key, pem) = self_signed(host)?;
                // Not a name another local user could guess and take first:
                // a new private directory of an unguessable name.
                let (path, made) = match cert_out {
                    Some(p) => (p.clone(), None),
                    None => {
                        let dir = std::env::temp_dir().join(format!("mpiws-tls-{}", crate::jobs::new_id()));
                        make_private_dir(&dir).map_err(|e| {
                            Error::new(ErrorClass::Other, format!("cannot make a directory for the certificate, {}: {e}", dir.display()))
                        })?;
                        (dir.join("cert.pem"), Some(dir))
                    }
                };
                write_new(&path, pem.as_bytes(), cert_out.is_some())?;
                // Its own ranks (and other endpoints in this process) reach it too.
                crate::net::tls::trust_own(chain[0].clone());
                (chain, key, Some(path), made)
            }
        };
        let fingerprint = fingerprint(&chain[0]);
        let mut config = ServerConfig::builder_with_provider(crate::net::tls::provider())
            .with_safe_default_protocol_versions()
            .and_then(|b| b.with_no_client_auth().with_single_cert(chain, key))
            .map_err(|e| Error::new(ErrorClass::Arg, format!("unusable TLS certificate or key: {e}")))?;
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        // A stream takes its session's keys to seal and open its own records
        // (`net::tls_socket`); nothing else reads them.
        config.enable_secret_extraction = true;
        Ok(ServerTls { acceptor: TlsAcceptor::from(Arc::new(config)), fingerprint, certificate_file, made_dir })
    }

    /// Remove the self-signed certificate's directory if this endpoint made it.
    pub fn remove_made_files(&self) {
        if let Some(dir) = &self.made_dir {
            let _ = std::fs::remove_dir_all(dir);
        }
    }

    /// The TLS handshake of a new connection, within `limit`. Err(stream):
    /// the client spoke cleartext HTTP (answer it so); None: no handshake.
    pub async fn handshake(&self, stream: TcpStream, limit: Duration) -> Option<std::result::Result<TlsStream<Wire>, TcpStream>> {
        let deadline = tokio::time::Instant::now() + limit;
        let mut first = [0u8; 1];
        match tokio::time::timeout_at(deadline, stream.peek(&mut first)).await {
            Ok(Ok(1)) if first[0] == TLS_HANDSHAKE_RECORD => {}
            Ok(Ok(1)) => return Some(Err(stream)),
            _ => return None,
        }
        tokio::time::timeout_at(deadline, self.acceptor.accept(wire(stream))).await.ok()?.ok().map(Ok)
    }
}

impl Drop for ServerTls {
    fn drop(&mut self) {
        self.remove_made_files();
    }
}

pub(crate) fn read_chain(path: &Path) -> Result<Vec<CertificateDer<'static>>> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
        .and_then(|certs| certs.collect())
        .map_err(|e| Error::new(ErrorClass::Arg, format!("cannot read the TLS certificate {}: {e}", path.display())))?;
    if chain.is_empty() {
        return err(ErrorClass::Arg, format!("no PEM certificate in {}", path.display()));
    }
    Ok(chain)
}

pub(crate) fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>> {
    PrivateKeyDer::from_pem_file(path)
        .map_err(|e| Error::new(ErrorClass::Arg, format!("cannot read the TLS private key {}: {e}", path.display())))
}

/// A new key and a certificate for it, valid for this machine's loopback
/// names and `host`: (chain, key, certificate as PEM).
fn self_signed(host: &str) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>, String)> {
    let mut names: Vec<String> = ["localhost", "127.0.0.1", "::1"].iter().map(|s| s.to_string()).collect();
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let unspecified = host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_unspecified());
    if !host.is_empty() && !unspecified && !names.iter().any(|n| n == host) {
        names.push(host.to_string());
    }
    let made = rcgen::generate_simple_self_signed(names)
        .map_err(|e| Error::new(ErrorClass::Intern, format!("cannot make a self-signed certificate: {e}")))?;
    let key = PrivateKeyDer::try_from(made.key_pair.serialize_der())
        .map_err(|e| Error::new(ErrorClass::Intern, format!("unusable generated key: {e}")))?;
    Ok((vec![made.cert.der().clone()], key, made.cert.pem()))
}

/// Write the public certificate: a path of our choosing is created fresh
/// (never through a link planted there); a path the user gave is replaced.
fn write_new(path: &Path, bytes: &[u8], given: bool) -> Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true);
    if given {
        options.create(true).truncate(true);
    } else {
        options.create_new(true);
    }
    options
        .open(path)
        .and_then(|mut f| f.write_all(bytes))
        .map_err(|e| Error::new(ErrorClass::Other, format!("cannot write the certificate to {}: {e}", path.display())))
}

fn fingerprint(cert: &CertificateDer<'_>) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, cert.as_ref());
    digest.as_ref().iter().map(|b| format!("{b:02X}")).collect::<Vec<_>>().join(":")
}
