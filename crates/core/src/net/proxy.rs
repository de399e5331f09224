//! Outbound connections through an HTTP proxy, chosen as curl chooses:
//! `HTTPS_PROXY`/`https_proxy` for https URLs, `HTTP_PROXY`/`http_proxy`
//! for http ones, `ALL_PROXY` for both, and `NO_PROXY` (names, `.domain`
//! suffixes, addresses, CIDR networks, `*`) for what goes direct. Credentials
//! ride in the proxy URL (`http://user:pass@proxy:3128`) and are sent as
//! `Proxy-Authorization: Basic`. Every outbound connection of this crate
//! starts here (`open`): stores and polls (`net::http`), streams
//! (`net::link`, `net::tls`), job URL pulls (`jobs::fetch`).
//!
//! Two ways through a proxy:
//! - **tunnel**: `CONNECT host:port`, then the bytes are ours (TLS end to
//!   end for https; a stream's upgrade for http);
//! - **forward**: plain http requests go to the proxy in absolute form
//!   (`POST http://host:port/path`), which proxies allow on any port where
//!   many refuse `CONNECT` to ports other than 443.
//!
//! Loopback (`localhost`, 127/8, ::1) is never proxied: it means this
//! machine, which a proxy elsewhere cannot reach (Go's net/http does the same).

use std::net::IpAddr;
use std::sync::OnceLock;
use std::time::Duration;

use http::{HeaderValue, Uri};
use hyper_util::client::proxy::matcher::{Intercept, Matcher};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::error::{Error, ErrorClass, Result};
use crate::wire::url;

/// How long a proxy may take to answer a `CONNECT`.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// The longest `CONNECT` answer head read.
const MAX_HEAD: usize = 16 * 1024;

/// The environment's rules, read at first use.
fn rules() -> &'static Matcher {
    static RULES: OnceLock<Matcher> = OnceLock::new();
    RULES.get_or_init(Matcher::from_env)
}

/// The proxy a URL's connection goes through.
#[derive(Clone)]
pub struct Proxy {
    /// `host:port` of the proxy.
    addr: String,
    /// `Proxy-Authorization`, from the proxy URL's user and password.
    auth: Option<HeaderValue>,
}

impl Proxy {
    fn from(intercept: &Intercept) -> Result<Proxy> {
        let uri = intercept.uri();
        if uri.scheme_str() != Some("http") {
            return Err(Error::new(
                ErrorClass::Arg,
                format!("the proxy {uri} is not an http:// proxy; mpiws reaches proxies over plain HTTP (HTTPS inside CONNECT)"),
            ));
        }
        let authority = uri.authority().map(|a| a.as_str()).unwrap_or_default();
        let addr = if uri.port_u16().is_some() { authority.to_string() } else { format!("{authority}:80") };
        Ok(Proxy { addr, auth: intercept.basic_auth().cloned() })
    }

    /// The proxy's URL without credentials, for messages.
    pub fn name(&self) -> String {
        format!("the proxy http://{}", self.addr)
    }

    /// Give a request forwarded to this proxy its credentials, if any.
    pub fn authorize(&self, headers: &mut http::HeaderMap) {
        if let Some(auth) = &self.auth {
            headers.insert(http::header::PROXY_AUTHORIZATION, auth.clone());
        }
    }
}

/// `host:port` of an http(s) URI (the scheme's default port if it names
/// none; an IPv6 host in brackets), read by the one URL parser
/// (`wire::url`): a port out of range is an error, never the default.
pub fn authority(uri: &Uri) -> std::result::Result<String, String> {
    url::parse(&uri.to_string()).map(|u| u.authority())
}

/// The proxy for `scheme://authority`, if the environment names one and the
/// host is not excluded. Err: the proxy URL is unusable.
pub fn for_url(scheme: &str, authority: &str) -> Result<Option<Proxy>> {
    let host = host_of(authority);
    if is_loopback(host) {
        return Ok(None);
    }
    let Ok(uri) = format!("{scheme}://{authority}/").parse::<Uri>() else { return Ok(None) };
    rules().intercept(&uri).map(|i| Proxy::from(&i)).transpose()
}

/// A connection toward a URL's host, and how requests go on it.
pub struct Opened {
    pub tcp: TcpStream,
    /// Requests go to this proxy in absolute form (http, not tunnelled).
    pub forward: Option<Proxy>,
}

/// Connect toward `authority` (`host:port`) of a `scheme` URL: directly, or
/// through the environment's proxy, tunnelled if https or if `tunnel` (a
/// stream). Errors name `peer` and, when there is one, the proxy; class
/// ProcFailed when trying again may help, another when it cannot.
pub async fn open(scheme: &str, authority: &str, peer: &str, tunnel: bool) -> Result<Opened> {
    let Some(proxy) = for_url(scheme, authority)? else {
        let tcp =
            TcpStream::connect(authority).await.map_err(|e| Error::new(ErrorClass::ProcFailed, format!("{peer} is unreachable: {e}")))?;
        let _ = tcp.set_nodelay(true);
        return Ok(Opened { tcp, forward: None });
    };
    let mut tcp = TcpStream::connect(&proxy.addr)
        .await
        .map_err(|e| Error::new(ErrorClass::ProcFailed, format!("{peer}: {} is unreachable: {e}", proxy.name())))?;
    let _ = tcp.set_nodelay(true);
    if scheme == "http" && !tunnel {
        return Ok(Opened { tcp, forward: Some(proxy) });
    }
    match tokio::time::timeout(CONNECT_TIMEOUT, connect_through(&mut tcp, &proxy, authority)).await {
        Ok(Ok(())) => Ok(Opened { tcp, forward: None }),
        Ok(Err(e)) => Err(Error::new(e.class, format!("{peer}: {}", e.message))),
        Err(_) => Err(Error::new(
            ErrorClass::ProcFailed,
            format!("{peer}: {} did not answer CONNECT {authority} within {CONNECT_TIMEOUT:?}", proxy.name()),
        )),
    }
}

/// Ask `proxy` on `tcp` for a tunnel to `authority`; Ok once it is open.
async fn connect_through(tcp: &mut TcpStream, proxy: &Proxy, authority: &str) -> Result<()> {
    let mut head = format!("CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n");
    if let Some(auth) = proxy.auth.as_ref().and_then(|a| a.to_str().ok()) {
        head.push_str(&format!("Proxy-Authorization: {auth}\r\n"));
    }
    head.push_str("\r\n");
    let lost = |e: std::io::Error| Error::new(ErrorClass::ProcFailed, format!("{} broke off CONNECT {authority}: {e}", proxy.name()));
    tcp.write_all(head.as_bytes()).await.map_err(lost)?;
    // Byte by byte: what follows the head is the tunnel's, not ours to consume.
    let mut answer = Vec::new();
    let mut byte = [0u8; 1];
    while !answer.ends_with(b"\r\n\r\n") {
        if answer.len() >= MAX_HEAD {
            return Err(Error::new(ErrorClass::Other, format!("{} answered CONNECT with a head over {MAX_HEAD} bytes", proxy.name())));
        }
        if tcp.read(&mut byte).await.map_err(lost)? == 0 {
            return Err(lost(std::io::ErrorKind::UnexpectedEof.into()));
        }
        answer.push(byte[0]);
    }
    verdict(&answer, &proxy.name(), authority)
}

/// What a proxy's answer head to `CONNECT authority` means.
fn verdict(head: &[u8], proxy: &str, authority: &str) -> Result<()> {
    let text = String::from_utf8_lossy(head);
    let status_line = text.lines().next().unwrap_or_default();
    let code: u16 = status_line.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let said = status_line.split_whitespace().skip(1).collect::<Vec<_>>().join(" ");
    // tinyproxy 1.11 asks with 401 and a Basic challenge instead of 407.
    let basic = text.lines().any(|l| l.to_ascii_lowercase().starts_with("www-authenticate: basic"));
    match code {
        200..=299 => Ok(()),
        401 if basic => Err(credentials_refused(proxy, &format!("CONNECT {authority}"), &said)),
        407 => Err(credentials_refused(proxy, &format!("CONNECT {authority}"), &said)),
        // The proxy could not reach the peer (yet): as if it were unreachable.
        502..=504 => Err(Error::new(ErrorClass::ProcFailed, format!("{proxy} could not reach {authority}: {said}"))),
        _ => Err(Error::new(
            ErrorClass::Other,
            format!(
                "{proxy} refused CONNECT {authority}: {}; many proxies allow CONNECT only to port 443",
                if said.is_empty() { "no HTTP answer" } else { &said }
            ),
        )),
    }
}

/// A proxy's 407 to `what` (a CONNECT or a forwarded request), told as a final error.
pub fn credentials_refused(proxy: &str, what: &str, said: &str) -> Error {
    Error::new(
        ErrorClass::Other,
        format!("{proxy} refused {what}: {said}: give the proxy's user and password in its URL (http://USER:PASSWORD@HOST:PORT)"),
    )
}

/// The host of `host:port` or `[v6]:port`.
fn host_of(authority: &str) -> &str {
    match authority.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or(rest),
        None => authority.rsplit_once(':').map_or(authority, |(h, _)| h),
    }
}

fn is_loopback(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost") || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connect_answers() {
        let ok = verdict(b"HTTP/1.1 200 Connection established\r\n\r\n", "the proxy http://p:3128", "h:1");
        assert!(ok.is_ok());
        let auth = verdict(b"HTTP/1.0 407 Proxy Authentication Required\r\n\r\n", "the proxy http://p:3128", "h:1").unwrap_err();
        assert_eq!(auth.class, ErrorClass::Other);
        assert!(auth.message.contains("407") && auth.message.contains("USER:PASSWORD"), "{}", auth.message);
        let tinyproxy =
            verdict(b"HTTP/1.0 401 Unauthorized\r\nWWW-Authenticate: Basic realm=\"Tinyproxy\"\r\n\r\n", "p", "h:1").unwrap_err();
        assert!(tinyproxy.message.contains("USER:PASSWORD"), "{}", tinyproxy.message);
        let forbidden = verdict(b"HTTP/1.1 403 Forbidden\r\n\r\n", "the proxy http://p:3128", "h:8000").unwrap_err();
        assert_eq!(forbidden.class, ErrorClass::Other);
        assert!(forbidden.message.contains("403 Forbidden") && forbidden.message.contains("h:8000"), "{}", forbidden.message);
        let down = verdict(b"HTTP/1.1 503 Service Unavailable\r\n\r\n", "the proxy http://p:3128", "h:1").unwrap_err();
        assert_eq!(down.class, ErrorClass::ProcFailed);
        let garbage = verdict(b"\r\n\r\n", "the proxy http://p:3128", "h:1").unwrap_err();
        assert!(garbage.message.contains("no HTTP answer"), "{}", garbage.message);
    }

    #[test]
    fn authorities_carry_the_default_port() {
        let a = |u: &str| authority(&u.parse::<Uri>().unwrap());
        assert_eq!(a("http://peer.example/x").as_deref(), Ok("peer.example:80"));
        assert_eq!(a("https://peer.example/x").as_deref(), Ok("peer.example:443"));
        assert_eq!(a("http://[::1]:8000/").as_deref(), Ok("[::1]:8000"));
        assert!(a("/no/host").is_err());
        assert!(a("http://127.0.0.1:99999/").unwrap_err().contains("1 to 65535"));
    }

    #[test]
    fn hosts_and_loopback() {
        assert_eq!(host_of("example.org:80"), "example.org");
        assert_eq!(host_of("[::1]:8000"), "::1");
        assert!(is_loopback("127.0.0.2") && is_loopback("::1") && is_loopback("LocalHost"));
        assert!(!is_loopback("10.0.0.1") && !is_loopback("example.org"));
    }

    /// A CONNECT through a listener that plays a proxy: the request names
    /// the target and carries the credentials; bytes after the answer's
    /// head belong to the tunnel.
    #[tokio::test]
    async fn a_tunnel_through_a_proxy() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let proxy = Proxy { addr: addr.clone(), auth: Some(HeaderValue::from_static("Basic dTpw")) };
        let server = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") {
                s.read_exact(&mut byte).await.unwrap();
                head.push(byte[0]);
            }
            s.write_all(b"HTTP/1.1 200 OK\r\n\r\ntunnelled").await.unwrap();
            String::from_utf8(head).unwrap()
        });
        let mut tcp = TcpStream::connect(&addr).await.unwrap();
        connect_through(&mut tcp, &proxy, "peer.example:8000").await.unwrap();
        let mut rest = [0u8; 9];
        tcp.read_exact(&mut rest).await.unwrap();
        assert_eq!(&rest, b"tunnelled");
        let head = server.await.unwrap();
        assert!(head.starts_with("CONNECT peer.example:8000 HTTP/1.1\r\n"), "{head}");
        assert!(head.contains("Proxy-Authorization: Basic dTpw\r\n"), "{head}");
    }
}
