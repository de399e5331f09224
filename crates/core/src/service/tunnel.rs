//! An endpoint behind a relay, reached end to end: `GET /tunnel` with
//! `Upgrade: mpiws-tunnel/1` (which the relay passes on from
//! `/relay/{name}/tunnel`, splicing the upgrade through) is upgraded, a TLS
//! handshake runs on the upgraded connection with this endpoint's tunnel
//! identity, and HTTP is served inside exactly as on the listener (same
//! routes, same checks, the server's own connection code). `net::tunnel`
//! is the client's side: it accepts only the certificate whose public key
//! has the pin in the endpoint's URL (`#sha256=PIN`), so the relay carries
//! bytes it can neither read nor answer itself.
//!
//! The identity: the endpoint's own certificate and key when it serves
//! https with files (`--tls-cert`, `--tls-key`); else a key kept in
//! `tunnel_key` (read if the file is there: a regular file of this user,
//! not a link, that no one else may read; else made and written there,
//! mode 0600), so that the pin, and the URL, outlive a restart; else a new
//! key each start. Its certificate is self-signed: only its key counts.
//!
//! Served only by an endpoint behind a relay (404 elsewhere). A tunnel is
//! one of the name's connections at the relay (`--relay-max-connections`);
//! its handshake has `tls_handshake_timeout`, and an idle tunnel is closed
//! as an idle connection is (`header_timeout`).

use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;
use std::sync::Arc;

use http::{Request, StatusCode};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::ServerConfig;
use tokio_rustls::TlsAcceptor;

use crate::error::{err, Error, ErrorClass, Result};
use crate::net::tunnel::{pin_of, pin_of_key, PROTOCOL};
use crate::service::reply::{error, Reply};
use crate::service::{server, tls, upgrade, Endpoint};

/// The longest tunnel key file read.
const MAX_KEY_FILE: u64 = 64 * 1024;

/// This endpoint's identity in tunnels.
pub struct Identity {
    acceptor: TlsAcceptor,
    /// SHA-256 of its public key (SubjectPublicKeyInfo), unpadded base64url.
    pub pin: String,
}

impl Identity {
    /// From the endpoint's certificate files, or the key in `key_file`
    /// (made if missing), or a new key (see the module's doc).
    pub fn start(files: Option<(&Path, &Path)>, key_file: Option<&Path>) -> Result<Identity> {
        let (chain, key) = match files {
            Some((cert, key)) => (tls::read_chain(cert)?, tls::read_key(key)?),
            None => {
                let pair = match key_file {
                    Some(path) => load_or_make(path)?,
                    None => rcgen::KeyPair::generate().map_err(|e| Error::new(ErrorClass::Intern, format!("cannot make a key: {e}")))?,
                };
                self_signed(&pair)?
            }
        };
        let pin = pin_of(&chain[0]).ok_or_else(|| Error::new(ErrorClass::Arg, "the TLS certificate cannot be read (DER)"))?;
        let mut config = ServerConfig::builder_with_provider(crate::net::tls::provider())
            .with_safe_default_protocol_versions()
            .and_then(|b| b.with_no_client_auth().with_single_cert(chain, key))
            .map_err(|e| Error::new(ErrorClass::Arg, format!("unusable tunnel certificate or key: {e}")))?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Identity { acceptor: TlsAcceptor::from(Arc::new(config)), pin })
    }
}

/// A certificate for `pair`, self-signed (its names do not matter: clients check the pin).
fn self_signed(pair: &rcgen::KeyPair) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)> {
    let made = rcgen::CertificateParams::new(vec!["mpiws-tunnel".to_string()])
        .and_then(|p| p.self_signed(pair))
        .map_err(|e| Error::new(ErrorClass::Intern, format!("cannot make the tunnel certificate: {e}")))?;
    let key =
        PrivateKeyDer::try_from(pair.serialize_der()).map_err(|e| Error::new(ErrorClass::Intern, format!("unusable tunnel key: {e}")))?;
    debug_assert_eq!(pin_of(made.der()), Some(pin_of_key(&pair.public_key_der())));
    Ok((vec![made.der().clone()], key))
}

/// The key in `path`, checked as a key file is; made and written there if there is none.
fn load_or_make(path: &Path) -> Result<rcgen::KeyPair> {
    let shown = path.display();
    let opened = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK).open(path);
    let mut file = match opened {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return make(path),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return err(ErrorClass::Arg, format!("{shown} is a symbolic link: refusing it as the tunnel key"))
        }
        Err(e) => return err(ErrorClass::Arg, format!("cannot read the tunnel key {shown}: {e}")),
    };
    let meta = file.metadata().map_err(|e| Error::new(ErrorClass::Arg, format!("{shown}: {e}")))?;
    if let Some(why) = unsafe_key_file(&meta, meta.uid()) {
        return err(ErrorClass::Arg, format!("{shown} {why}: refusing it as the tunnel key"));
    }
    let mut pem = String::new();
    (&mut file)
        .take(MAX_KEY_FILE)
        .read_to_string(&mut pem)
        .map_err(|e| Error::new(ErrorClass::Arg, format!("cannot read {shown}: {e}")))?;
    rcgen::KeyPair::from_pem(&pem).map_err(|e| Error::new(ErrorClass::Arg, format!("{shown} is not a PEM private key: {e}")))
}

/// Why a key file may not be trusted (None: it may): the rules keys.py has for key files.
fn unsafe_key_file(meta: &std::fs::Metadata, owner: u32) -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    if !meta.file_type().is_file() {
        return Some("is not a regular file".into());
    }
    if owner != me && owner != 0 {
        return Some(format!("belongs to another user (uid {owner})"));
    }
    if meta.mode() & 0o077 != 0 {
        return Some(format!("is readable by others (mode {:o}): chmod 600 it", meta.mode() & 0o777));
    }
    if meta.len() > MAX_KEY_FILE {
        return Some(format!("is over {MAX_KEY_FILE} bytes"));
    }
    None
}

/// A new key, written to `path` (a new file, mode 0600, never through a
/// link); if another process wrote one first, that one.
fn make(path: &Path) -> Result<rcgen::KeyPair> {
    use std::io::Write;
    let pair = rcgen::KeyPair::generate().map_err(|e| Error::new(ErrorClass::Intern, format!("cannot make a key: {e}")))?;
    let created = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).custom_flags(libc::O_NOFOLLOW).open(path);
    match created {
        Ok(mut f) => {
            f.write_all(pair.serialize_pem().as_bytes())
                .and_then(|()| f.sync_all())
                .map_err(|e| Error::new(ErrorClass::Other, format!("cannot write the tunnel key {}: {e}", path.display())))?;
            Ok(pair)
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => load_or_make(path),
        Err(e) => err(ErrorClass::Other, format!("cannot write the tunnel key {}: {e}", path.display())),
    }
}

/// `GET /tunnel`: upgrade, then serve HTTP inside TLS with this endpoint's identity.
pub async fn accept(ep: Arc<Endpoint>, mut req: Request<Incoming>) -> Reply {
    let Some(identity) = ep.tunnel.as_ref() else {
        return error(StatusCode::NOT_FOUND, ErrorClass::Arg, "no operation at /tunnel: this endpoint is not behind a relay");
    };
    if !upgrade::asks(&req, PROTOCOL) {
        return error(StatusCode::BAD_REQUEST, ErrorClass::Arg, format!("expected 'Connection: upgrade' and 'Upgrade: {PROTOCOL}'"));
    }
    let (acceptor, limit) = (identity.acceptor.clone(), ep.config.tls_handshake_timeout);
    let upgrade = hyper::upgrade::on(&mut req);
    tokio::spawn(async move {
        let Ok(upgraded) = upgrade.await else { return };
        if let Ok(Ok(tls)) = tokio::time::timeout(limit, acceptor.accept(TokioIo::new(upgraded))).await {
            server::serve_tunneled(ep, tls).await;
        }
    });
    upgrade::granted(PROTOCOL)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn a_kept_key_keeps_the_pin_and_a_careless_one_is_refused() {
        let dir = std::env::temp_dir().join(format!("mpiws-tunnel-test-{}", crate::jobs::new_id()));
        std::fs::create_dir(&dir).unwrap();
        let path = dir.join("tunnel.key");
        let first = Identity::start(None, Some(&path)).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(Identity::start(None, Some(&path)).unwrap().pin, first.pin);
        assert_ne!(Identity::start(None, None).unwrap().pin, first.pin);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = Identity::start(None, Some(&path)).err().unwrap();
        assert!(e.message.contains("readable by others"), "{}", e.message);
        let link = dir.join("link.key");
        std::os::unix::fs::symlink(&path, &link).unwrap();
        assert!(Identity::start(None, Some(&link)).err().unwrap().message.contains("symbolic link"));
        std::fs::write(dir.join("junk.key"), "junk").unwrap();
        std::fs::set_permissions(dir.join("junk.key"), std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(Identity::start(None, Some(&dir.join("junk.key"))).err().unwrap().message.contains("not a PEM private key"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
