//! The client's side of a tunnel to an endpoint behind a relay, verified
//! by the pin in its URL (`https://R/relay/NAME#sha256=PIN`, `wire::url`).
//!
//! A relay ends TLS: over its plain forwarding it sees every request, keys
//! and tokens included, and a client cannot tell who answers. A pinned URL
//! is reached otherwise: connect to the relay as to any peer (`net::proxy`,
//! TLS to an https relay), ask `GET /relay/NAME/tunnel` with `Upgrade:
//! mpiws-tunnel/1`, which the relay splices through to the endpoint
//! (`service::tunnel` is its side), then run a TLS handshake *inside* that
//! with the endpoint itself, accepting exactly the certificate whose public
//! key (SubjectPublicKeyInfo) has the pinned SHA-256, whatever its names
//! or issuer. Only then is any request (and any credential) written: the
//! relay carries bytes it cannot read or replay, and a relay that puts
//! another endpoint under the name fails the handshake, which names both
//! pins.
//!
//! Both clients use it: the HTTP client (`net::connector`, which gives each
//! pinned endpoint a name of its own so that pooled connections are never
//! shared between them: `synthetic`) and streams (`net::link`).

use std::collections::HashMap;
use std::sync::Arc;

use base64::Engine;
use parking_lot::Mutex;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, SignatureScheme};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

use crate::error::{err, Error, ErrorClass, Result};
use crate::net::{http, proxy, tls};
use crate::wire::head::Head;
use crate::wire::url::{Tunnel, PIN_PREFIX};

/// The upgrade a tunnel asks for.
pub const PROTOCOL: &str = "mpiws-tunnel/1";

/// Longest answer head read from the relay.
const MAX_HEAD: usize = 16 * 1024;
/// Most of an error answer's body read.
const MAX_ERROR_BODY: usize = 64 * 1024;
/// Most distinct pinned endpoints one process reaches (`synthetic`).
pub const MAX_TUNNELS: usize = 65536;
/// The domain of the names `synthetic` makes (`.invalid`: never resolved).
const SYNTHETIC: &str = ".tunnel.mpiws.invalid";

/// What a tunnel runs over: a TCP connection to the relay, or TLS over one.
pub trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// A tunnel: TLS with the pinned endpoint, inside the connection to the relay.
pub type Stream = TlsStream<Box<dyn Io>>;

/// The pin of a certificate: SHA-256 of its SubjectPublicKeyInfo,
/// unpadded base64url. None if the certificate's DER cannot be read.
pub fn pin_of(cert: &[u8]) -> Option<String> {
    Some(pin_of_key(spki(cert)?))
}

/// The pin of a public key (its SubjectPublicKeyInfo DER).
pub fn pin_of_key(spki: &[u8]) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, spki);
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(digest.as_ref())
}

/// One DER element at the start of `der`: (tag, contents, the rest).
/// Every length is checked against what is there.
fn element(der: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = der.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = match first {
        0..=0x7f => (first as usize, rest),
        0x81..=0x84 => {
            let n = (first & 0x7f) as usize;
            let (bytes, rest) = (rest.get(..n)?, rest.get(n..)?);
            (bytes.iter().fold(0usize, |a, &b| (a << 8) | b as usize), rest)
        }
        _ => return None, // indefinite or absurd lengths: not DER
    };
    Some((tag, rest.get(..len)?, rest.get(len..)?))
}

/// The SubjectPublicKeyInfo (whole element, DER) of an X.509 certificate:
/// Certificate = SEQUENCE { tbsCertificate SEQUENCE { [0] version OPTIONAL,
/// serial, signature, issuer, validity, subject, subjectPublicKeyInfo, ... } ... }.
pub fn spki(cert: &[u8]) -> Option<&[u8]> {
    const SEQUENCE: u8 = 0x30;
    let (tag, certificate, _) = element(cert)?;
    let (tbs_tag, tbs, _) = element(certificate)?;
    if tag != SEQUENCE || tbs_tag != SEQUENCE {
        return None;
    }
    let mut rest = tbs;
    if rest.first() == Some(&0xa0) {
        rest = element(rest)?.2; // the explicit version
    }
    for _ in 0..5 {
        rest = element(rest)?.2; // serial, signature, issuer, validity, subject
    }
    let (tag, _, after) = element(rest)?;
    (tag == SEQUENCE).then(|| &rest[..rest.len() - after.len()])
}

/// A pin that did not match: the error a handshake fails with.
#[derive(Debug)]
pub struct Mismatch {
    pub pinned: String,
    pub presented: String,
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the endpoint presents {PIN_PREFIX}{}, the URL pins {PIN_PREFIX}{}", self.presented, self.pinned)
    }
}

impl std::error::Error for Mismatch {}

/// Accepts exactly the certificate whose public key has the pin (any name,
/// any issuer, any dates: the pin is the identity); the handshake's
/// signatures are checked as usual, so the peer holds that key.
#[derive(Debug)]
pub struct PinVerifier {
    pin: String,
    algorithms: rustls::crypto::WebPkiSupportedAlgorithms,
}

impl PinVerifier {
    pub fn new(pin: &str) -> PinVerifier {
        PinVerifier { pin: pin.to_string(), algorithms: rustls::crypto::ring::default_provider().signature_verification_algorithms }
    }
}

impl ServerCertVerifier for PinVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        let presented = pin_of(end_entity).ok_or(rustls::Error::InvalidCertificate(rustls::CertificateError::BadEncoding))?;
        if presented == self.pin {
            return Ok(ServerCertVerified::assertion());
        }
        let mismatch = Mismatch { pinned: self.pin.clone(), presented };
        Err(rustls::Error::InvalidCertificate(rustls::CertificateError::Other(rustls::OtherError(Arc::new(mismatch)))))
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

/// A client configuration that trusts exactly `pin`, speaking HTTP/1.1.
pub fn client_config(pin: &str) -> Result<Arc<ClientConfig>> {
    let mut config = ClientConfig::builder_with_provider(crate::net::tls::provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::new(ErrorClass::Intern, format!("TLS set-up failed: {e}")))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(PinVerifier::new(pin)))
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// How a tunnel's URL is told in messages.
pub fn describe(t: &Tunnel) -> String {
    format!("{}://{}/relay/{}#{PIN_PREFIX}{}", t.relay.scheme(), t.relay.authority(), t.name, t.pin)
}

/// Open a tunnel to `t`'s endpoint: connect to the relay, upgrade, verify
/// the endpoint by its pin. Err of class ProcFailed: transient (the relay
/// or the endpoint unreachable, busy, not connected yet); Arg: the pin did
/// not match (never tried again); another: refused for good.
pub async fn open(t: &Tunnel) -> Result<Stream> {
    let peer = describe(t);
    let authority = t.relay.authority();
    let mut outer: Box<dyn Io> = if t.relay.tls {
        Box::new(tls::connect(&authority, &peer).await?)
    } else {
        Box::new(proxy::open("http", &authority, &peer, true).await?.tcp)
    };
    match tokio::time::timeout(proxy::CONNECT_TIMEOUT, upgrade(&mut outer, t, &peer)).await {
        Ok(r) => r?,
        Err(_) => {
            return err(
                ErrorClass::ProcFailed,
                format!("{peer}: the relay did not answer the tunnel's upgrade within {:?}", proxy::CONNECT_TIMEOUT),
            )
        }
    }
    let connector = TlsConnector::from(client_config(&t.pin)?);
    let name = ServerName::try_from("mpiws-tunnel").expect("a valid name");
    match tokio::time::timeout(tls::HANDSHAKE_TIMEOUT, connector.connect(name, outer)).await {
        Ok(Ok(s)) => Ok(s),
        Ok(Err(e)) => Err(refused(&peer, &e)),
        Err(_) => err(ErrorClass::ProcFailed, format!("{peer}: no TLS handshake with the endpoint within {:?}", tls::HANDSHAKE_TIMEOUT)),
    }
}

/// A failed handshake inside the tunnel, told: a pin that does not match
/// names both pins (class Arg: the URL does not name what answers there).
fn refused(peer: &str, e: &std::io::Error) -> Error {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = e.get_ref().map(|e| e as _);
    while let Some(c) = cause {
        if let Some(rustls::Error::InvalidCertificate(rustls::CertificateError::Other(other))) = c.downcast_ref::<rustls::Error>() {
            if let Some(m) = other.0.downcast_ref::<Mismatch>() {
                return Error::new(
                    ErrorClass::Arg,
                    format!("{peer}: not the endpoint this URL names: {m}; nothing was sent to it (is the relay, or the URL, wrong?)"),
                );
            }
        }
        cause = c.source();
    }
    match e.kind() {
        std::io::ErrorKind::InvalidData => Error::new(ErrorClass::Other, format!("{peer}: TLS handshake with the endpoint failed: {e}")),
        _ => Error::new(ErrorClass::ProcFailed, format!("{peer}: the tunnel broke during its TLS handshake: {e}")),
    }
}

/// Ask the relay for the tunnel; Ok once it is spliced (101).
async fn upgrade(s: &mut Box<dyn Io>, t: &Tunnel, peer: &str) -> Result<()> {
    let head =
        format!("GET {} HTTP/1.1\r\nHost: {}\r\nConnection: upgrade\r\nUpgrade: {PROTOCOL}\r\n\r\n", t.upgrade_path(), t.relay.authority());
    let lost = |e: std::io::Error| Error::new(ErrorClass::ProcFailed, format!("{peer}: the relay broke off the tunnel's upgrade: {e}"));
    s.write_all(head.as_bytes()).await.map_err(lost)?;
    s.flush().await.map_err(lost)?;
    // Byte by byte: what follows the head is the endpoint's TLS.
    let mut answer = Vec::new();
    let mut byte = [0u8; 1];
    while !answer.ends_with(b"\r\n\r\n") {
        if answer.len() >= MAX_HEAD {
            return err(ErrorClass::Other, format!("{peer}: the relay answered with a head over {MAX_HEAD} bytes"));
        }
        s.read_exact(&mut byte).await.map_err(lost)?;
        answer.push(byte[0]);
    }
    let head = Head::parse(&answer, MAX_ERROR_BODY);
    if head.status == ::http::StatusCode::SWITCHING_PROTOCOLS {
        return Ok(());
    }
    let mut body = vec![0u8; head.content_length];
    let _ = s.read_exact(&mut body).await;
    let e = http::error_from_response(head.status, &body, peer);
    let transient = head.status.is_server_error() || head.status == ::http::StatusCode::TOO_MANY_REQUESTS;
    Err(match head.status {
        _ if transient => Error::new(ErrorClass::ProcFailed, e.message),
        ::http::StatusCode::NOT_FOUND => Error::new(
            ErrorClass::Other,
            format!("{}; the relay or the endpoint behind it does not offer tunnels (an older mpiws?)", e.message),
        ),
        _ => e,
    })
}

/// The pinned endpoints this process reached, by the name `synthetic` gave them.
static TUNNELS: Mutex<Option<HashMap<String, Tunnel>>> = Mutex::new(None);

/// A name of its own for `t`'s endpoint (`HASH.tunnel.mpiws.invalid`,
/// from the relay, name and pin), which the HTTP client's requests go to
/// instead, so that its pool keeps the connections of each pinned
/// endpoint apart; `tunnel_of` maps it back.
pub fn synthetic(t: &Tunnel) -> Result<String> {
    let key = format!("{}\n{}\n{}", describe(t), t.name, t.pin);
    let host = format!("{}{SYNTHETIC}", crate::keys::digest_hex(key.as_bytes()));
    let mut tunnels = TUNNELS.lock();
    let tunnels = tunnels.get_or_insert_with(HashMap::new);
    if !tunnels.contains_key(&host) {
        if tunnels.len() >= MAX_TUNNELS {
            return err(
                ErrorClass::Other,
                format!("this process reached {MAX_TUNNELS} pinned endpoints (relayed URLs with #sha256=): no more"),
            );
        }
        tunnels.insert(host.clone(), Tunnel { path: "/".into(), ..t.clone() });
    }
    Ok(host)
}

/// The tunnel a `synthetic` name stands for (None: not such a name).
pub fn tunnel_of(host: &str) -> Option<Tunnel> {
    if !host.ends_with(SYNTHETIC) {
        return None;
    }
    TUNNELS.lock().as_ref()?.get(host).cloned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::url;

    fn made() -> rcgen::CertifiedKey {
        rcgen::generate_simple_self_signed(vec!["whatever".to_string()]).unwrap()
    }

    #[test]
    fn the_pin_is_the_hash_of_the_certificates_public_key() {
        let m = made();
        let der = m.cert.der();
        assert_eq!(spki(der).unwrap(), m.key_pair.public_key_der().as_slice());
        let pin = pin_of(der).unwrap();
        assert!(url::valid_pin(&pin), "{pin}");
        // the same key in another certificate: the same pin
        let again = rcgen::CertificateParams::new(vec!["other".to_string()]).unwrap().self_signed(&m.key_pair).unwrap();
        assert_eq!(pin_of(again.der()).unwrap(), pin);
        assert_ne!(pin_of(made().cert.der()).unwrap(), pin);
        // cut anywhere, or lengths that lie: no pin, no panic
        for n in 0..der.len() {
            let _ = pin_of(&der[..n]);
        }
        assert_eq!(pin_of(&[]), None);
        assert_eq!(pin_of(&[0x30, 0x84, 0xff, 0xff, 0xff, 0xff]), None);
        assert_eq!(pin_of(b"not a certificate"), None);
    }

    #[test]
    fn the_verifier_takes_exactly_the_pinned_key() {
        let (m, other) = (made(), made());
        let v = PinVerifier::new(&pin_of(m.cert.der()).unwrap());
        let name = ServerName::try_from("anything.example").unwrap();
        assert!(v.verify_server_cert(m.cert.der(), &[], &name, &[], UnixTime::now()).is_ok());
        let e = v.verify_server_cert(other.cert.der(), &[], &name, &[], UnixTime::now()).unwrap_err();
        let io = std::io::Error::new(std::io::ErrorKind::InvalidData, e);
        let told = refused("https://r/relay/x#sha256=P", &io);
        assert_eq!(told.class, ErrorClass::Arg);
        let (pinned, presented) = (pin_of(m.cert.der()).unwrap(), pin_of(other.cert.der()).unwrap());
        assert!(told.message.contains(&pinned) && told.message.contains(&presented), "{}", told.message);
        assert!(v.verify_server_cert(&CertificateDer::from(vec![1, 2, 3]), &[], &name, &[], UnixTime::now()).is_err());
    }

    #[test]
    fn pinned_endpoints_get_names_of_their_own() {
        let pin = pin_of(made().cert.der()).unwrap();
        let t = |u: &str| url::parse(u).unwrap().tunnel().unwrap();
        let a = t(&format!("http://r:1/relay/a/x#sha256={pin}"));
        let a2 = t(&format!("http://r:1/relay/a/y?z#sha256={pin}"));
        let b = t(&format!("http://r:1/relay/b#sha256={pin}"));
        let other_pin = t(&format!("http://r:1/relay/a#sha256={}", pin_of(made().cert.der()).unwrap()));
        let (ha, hb, hp) = (synthetic(&a).unwrap(), synthetic(&b).unwrap(), synthetic(&other_pin).unwrap());
        assert_eq!(synthetic(&a2).unwrap(), ha);
        assert!(ha != hb && ha != hp && hb != hp);
        assert_eq!(tunnel_of(&ha).unwrap().name, "a");
        assert_eq!(tunnel_of(&hp).unwrap().pin, other_pin.pin);
        assert!(tunnel_of("example.org").is_none() && tunnel_of(&format!("x{SYNTHETIC}")).is_none());
        assert!(format!("http://{ha}:1/").parse::<::http::Uri>().is_ok());
    }
}
