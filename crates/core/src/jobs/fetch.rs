//! Pulling a job's URL input without becoming a proxy into the deployer's
//! network (server-side request forgery). A client names the URL; the
//! endpoint connects only to addresses the deployer allows:
//!
//! - by default any public address, and none that is loopback, private
//!   (10/8, 172.16/12, 192.168/16, fc00::/7), shared (100.64/10),
//!   link-local, unspecified, multicast, broadcast or reserved, however the
//!   client spells it (`127.1`, `0x7f000001`, `2130706433`,
//!   `[::ffff:127.0.0.1]`: the check is on the resolved address);
//! - plus what `mpiws serve --fetch-allow HOST[:PORT]|CIDR` names.
//!
//! The name is resolved once, each address checked, and the connection
//! made to a checked address (then its peer address checked again): a name
//! that resolves differently the next time (DNS rebinding) gains nothing.
//! Redirects are not followed. Each pull is bounded in size (`max_fetch`)
//! and time (`fetch_timeout`), and its bytes count against the disk quota.
//!
//! Through the environment's proxy (`net::proxy`), the same rules are
//! checked on the addresses the name resolves to here (or the name is
//! allowed by `--fetch-allow HOST`, for hosts only the proxy can resolve);
//! the proxy then connects on its own, under its own rules.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::Request;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use rustls_pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use crate::error::{err, ErrorClass, Result};
use crate::net::proxy::{self, Proxy};
use crate::wire::url::{self, Url};

/// How long a connection outlives its pull's time limit, at most.
const CONNECTION_GRACE: Duration = Duration::from_secs(1);

/// What an error answer of the server may add to the reason, at most.
const ERROR_BODY_MAX: usize = 4096;

pub struct Fetcher {
    allow: Vec<Allow>,
    /// Largest input one pull may bring.
    pub max_size: u64,
    /// Longest one pull may take, connecting included.
    pub timeout: Duration,
    /// Pulls done and failed, and the bytes pulled (the endpoint's metrics).
    pub pulled: [AtomicU64; 3],
}

/// One `--fetch-allow` entry.
#[derive(Debug)]
enum Allow {
    /// An address, or a network (CIDR), optionally on one port only.
    Net { net: IpAddr, prefix: u8, port: Option<u16> },
    /// A host name as URLs spell it, optionally on one port only.
    Name { name: String, port: Option<u16> },
}

impl Fetcher {
    pub fn new(allow: &[String], max_size: u64, timeout: Duration) -> Result<Fetcher> {
        let allow = allow.iter().map(|a| parse_allow(a)).collect::<Result<Vec<_>>>()?;
        Ok(Fetcher { allow, max_size, timeout, pulled: Default::default() })
    }

    /// Whether `url` may be pulled at all (an http:// URL whose host
    /// resolves to at least one allowed address); the reason if not.
    pub async fn check(&self, url: &str) -> std::result::Result<(), String> {
        let target = url::parse(url)?;
        if self.proxy(&target)?.is_some() && self.allows_name(&target) {
            return Ok(());
        }
        match tokio::time::timeout(self.timeout, self.addresses(&target)).await {
            Ok(resolved) => resolved.map(|_| ()),
            Err(_) => Err(format!("{} did not resolve within {} s (mpiws serve --fetch-timeout)", target.host, self.timeout.as_secs_f64())),
        }
    }

    /// Pull `url` into `file`; `claim` counts each piece against the disk
    /// quota before it is written. The size pulled, or why it failed.
    pub async fn fetch(
        &self,
        url: &str,
        file: &mut tokio::fs::File,
        claim: &(dyn Fn(u64) -> std::result::Result<(), String> + Sync),
    ) -> std::result::Result<u64, String> {
        let pulled = match tokio::time::timeout(self.timeout, self.fetch_untimed(url, file, claim)).await {
            Ok(done) => done,
            Err(_) => Err(format!(
                "{url}: not pulled within {} s, the time limit of a URL input (mpiws serve --fetch-timeout raises it)",
                self.timeout.as_secs_f64()
            )),
        };
        match &pulled {
            Ok(n) => {
                self.pulled[0].fetch_add(1, Ordering::Relaxed);
                self.pulled[2].fetch_add(*n, Ordering::Relaxed);
            }
            Err(_) => {
                self.pulled[1].fetch_add(1, Ordering::Relaxed);
            }
        }
        pulled
    }

    async fn fetch_untimed(
        &self,
        url: &str,
        file: &mut tokio::fs::File,
        claim: &(dyn Fn(u64) -> std::result::Result<(), String> + Sync),
    ) -> std::result::Result<u64, String> {
        let target = url::parse(url)?;
        let (tcp, forward) = self.connect(&target).await?;
        if !target.tls {
            return self.pull(url, &target, tcp, forward.as_ref(), file, claim).await;
        }
        let name = ServerName::try_from(target.host.clone()).map_err(|e| format!("{url}: {e}"))?;
        let config = crate::net::tls::client_config().map_err(|e| e.message)?;
        let tls = TlsConnector::from(config).connect(name, tcp).await.map_err(|e| format!("{url}: TLS handshake failed: {e}"))?;
        self.pull(url, &target, tls, None, file, claim).await
    }

    /// The GET itself, over `stream` (TCP, or TLS over it; or to the
    /// proxy that `forward`s it, in absolute form).
    #[allow(clippy::too_many_arguments)]
    async fn pull<S: AsyncRead + AsyncWrite + Unpin + Send + 'static>(
        &self,
        url: &str,
        target: &Url,
        stream: S,
        forward: Option<&Proxy>,
        file: &mut tokio::fs::File,
        claim: &(dyn Fn(u64) -> std::result::Result<(), String> + Sync),
    ) -> std::result::Result<u64, String> {
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake::<_, Empty<Bytes>>(TokioIo::new(stream)).await.map_err(|e| format!("{url}: {e}"))?;
        // The connection ends with the exchange; at the latest a little after
        // the pull's time limit (which, being first, names the reason).
        tokio::spawn(tokio::time::timeout(self.timeout + CONNECTION_GRACE, conn));
        let mut req = Request::get(if forward.is_some() { url } else { target.path.as_str() })
            .header(http::header::HOST, target.authority())
            .header(http::header::USER_AGENT, concat!("mpiws/", env!("CARGO_PKG_VERSION")))
            .body(Empty::new())
            .map_err(|e| format!("bad URL {url}: {e}"))?;
        if let Some(proxy) = forward {
            proxy.authorize(req.headers_mut());
        }
        let resp = sender.send_request(req).await.map_err(|e| format!("{url}: {e}"))?;
        let status = resp.status();
        if status.is_redirection() {
            let to = resp.headers().get(http::header::LOCATION).and_then(|v| v.to_str().ok()).unwrap_or("?").to_string();
            return Err(format!("{url} answered {status} (to {to}): redirects are not followed; give the final URL"));
        }
        if !status.is_success() {
            return Err(format!("{url} answered {status}: {}", error_text(resp.into_body()).await));
        }
        let announced = resp.headers().get(http::header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
        if announced.is_some_and(|n| n > self.max_size) {
            return Err(self.too_large(url));
        }
        let mut body = resp.into_body();
        let mut size = 0u64;
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| format!("{url}: answer cut off: {e}"))?;
            let Ok(data) = frame.into_data() else { continue };
            let n = data.len() as u64;
            size = size.checked_add(n).filter(|&s| s <= self.max_size).ok_or_else(|| self.too_large(url))?;
            claim(n)?;
            file.write_all(&data).await.map_err(|e| format!("cannot write it: {e}"))?;
        }
        file.flush().await.map_err(|e| format!("cannot write it: {e}"))?;
        Ok(size)
    }

    fn too_large(&self, url: &str) -> String {
        format!("{url} is larger than {} bytes, the size limit of a URL input (mpiws serve --max-fetch raises it)", self.max_size)
    }

    /// The environment's proxy for `target`, if one is named for it.
    fn proxy(&self, target: &Url) -> std::result::Result<Option<Proxy>, String> {
        proxy::for_url(target.scheme(), &target.authority()).map_err(|e| e.message)
    }

    /// Does a `--fetch-allow HOST[:PORT]` name `target`'s host?
    fn allows_name(&self, target: &Url) -> bool {
        self.allow.iter().any(
            |a| matches!(a, Allow::Name { name, port } if name.eq_ignore_ascii_case(&target.host) && port.is_none_or(|p| p == target.port)),
        )
    }

    /// Connect to the first allowed address of `target` that answers, or to
    /// the proxy for it (with the proxy, if requests go to it in absolute form).
    async fn connect(&self, target: &Url) -> std::result::Result<(TcpStream, Option<Proxy>), String> {
        if self.proxy(target)?.is_some() {
            if !self.allows_name(target) {
                self.addresses(target).await?;
            }
            let opened = proxy::open(target.scheme(), &target.authority(), &target.authority(), false).await.map_err(|e| e.message)?;
            return Ok((opened.tcp, opened.forward));
        }
        let mut last = String::new();
        for addr in self.addresses(target).await? {
            match TcpStream::connect(addr).await {
                Ok(stream) => {
                    // The address actually connected to, checked once more.
                    let peer = stream.peer_addr().map_err(|e| format!("{}: {e}", target.authority()))?;
                    self.verdict(&target.host, peer)?;
                    let _ = stream.set_nodelay(true);
                    return Ok((stream, None));
                }
                Err(e) => last = format!("cannot connect to {} ({addr}): {e}", target.authority()),
            }
        }
        Err(last)
    }

    /// The addresses `target` resolves to that the rules allow; if none,
    /// the rule that refused them.
    async fn addresses(&self, target: &Url) -> std::result::Result<Vec<SocketAddr>, String> {
        let found = tokio::net::lookup_host((target.host.as_str(), target.port))
            .await
            .map_err(|e| format!("cannot resolve {}: {e}", target.host))?;
        let mut allowed = Vec::new();
        let mut refused = None;
        for addr in found {
            match self.verdict(&target.host, addr) {
                Ok(()) => allowed.push(addr),
                Err(why) => refused = refused.or(Some(why)),
            }
        }
        match (allowed.is_empty(), refused) {
            (false, _) => Ok(allowed),
            (true, Some(why)) => Err(why),
            (true, None) => Err(format!("{} resolves to no address", target.host)),
        }
    }

    /// May `host`, resolved to `addr`, be connected to?
    fn verdict(&self, host: &str, addr: SocketAddr) -> std::result::Result<(), String> {
        let ip = canonical(addr.ip());
        let port_ok = |port: &Option<u16>| port.is_none_or(|p| p == addr.port());
        let allowed = self.allow.iter().any(|a| match a {
            Allow::Net { net, prefix, port } => port_ok(port) && in_network(ip, *net, *prefix),
            Allow::Name { name, port } => port_ok(port) && name.eq_ignore_ascii_case(host),
        });
        match refused_range(ip) {
            Some(range) if !allowed => Err(format!(
                "{host} is {ip}, a {range} address, and URL inputs are not pulled from loopback, private, shared, \
                 link-local, unspecified, multicast, broadcast or reserved addresses unless the deployer allows them: \
                 mpiws serve --fetch-allow {} (or a network, e.g. --fetch-allow 10.0.0.0/8)",
                SocketAddr::new(ip, addr.port())
            )),
            _ => Ok(()),
        }
    }
}

/// The reason an error answer gives: its JSON `error.message`, or its start.
async fn error_text(body: hyper::body::Incoming) -> String {
    let bytes = match http_body_util::Limited::new(body, ERROR_BODY_MAX).collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => return "(an error answer too long to quote)".to_string(),
    };
    match serde_json::from_slice::<serde_json::Value>(&bytes) {
        Ok(v) if v["error"]["message"].is_string() => v["error"]["message"].as_str().unwrap_or_default().to_string(),
        _ => String::from_utf8_lossy(&bytes).chars().take(200).collect(),
    }
}

/// `HOST[:PORT]` (a name or an address, `[v6]:PORT` for IPv6 with a port)
/// or `ADDRESS/PREFIX`.
fn parse_allow(entry: &str) -> Result<Allow> {
    let bad = |why: &str| err(ErrorClass::Arg, format!("--fetch-allow {entry:?}: {why}; give HOST[:PORT] or a CIDR such as 10.0.0.0/8"));
    if let Some((addr, prefix)) = entry.split_once('/') {
        let Ok(net) = addr.parse::<IpAddr>() else { return bad("not an address before '/'") };
        let max = if net.is_ipv4() { 32 } else { 128 };
        return match prefix.parse::<u8>() {
            Ok(prefix) if prefix <= max => Ok(Allow::Net { net: canonical(net), prefix, port: None }),
            _ => bad("the prefix length is out of range"),
        };
    }
    if let Ok(ip) = entry.trim_start_matches('[').trim_end_matches(']').parse::<IpAddr>() {
        let ip = canonical(ip);
        return Ok(Allow::Net { net: ip, prefix: if ip.is_ipv4() { 32 } else { 128 }, port: None });
    }
    if let Ok(sa) = entry.parse::<SocketAddr>() {
        let ip = canonical(sa.ip());
        return Ok(Allow::Net { net: ip, prefix: if ip.is_ipv4() { 32 } else { 128 }, port: Some(sa.port()) });
    }
    let (name, port) = match entry.rsplit_once(':') {
        Some((name, port)) => match port.parse::<u16>() {
            Ok(port) => (name, Some(port)),
            Err(_) => return bad("the port is not a number"),
        },
        None => (entry, None),
    };
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.') {
        return bad("not a host name");
    }
    Ok(Allow::Name { name: name.to_ascii_lowercase(), port })
}

/// An IPv4 address written as IPv6 (mapped `::ffff:a.b.c.d`) is the IPv4 one.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

fn in_network(ip: IpAddr, net: IpAddr, prefix: u8) -> bool {
    match (ip, net) {
        (IpAddr::V4(a), IpAddr::V4(n)) => mask32(u32::from(a), prefix) == mask32(u32::from(n), prefix),
        (IpAddr::V6(a), IpAddr::V6(n)) => mask128(u128::from(a), prefix) == mask128(u128::from(n), prefix),
        _ => false,
    }
}

fn mask32(x: u32, prefix: u8) -> u32 {
    x.checked_shr(32 - u32::from(prefix)).unwrap_or(0)
}

fn mask128(x: u128, prefix: u8) -> u128 {
    x.checked_shr(128 - u32::from(prefix)).unwrap_or(0)
}

/// The refused range `ip` falls in, if any.
fn refused_range(ip: IpAddr) -> Option<&'static str> {
    match canonical(ip) {
        IpAddr::V4(v4) => refused_v4(v4),
        IpAddr::V6(v6) => refused_v6(v6),
    }
}

fn refused_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, ..] = ip.octets();
    Some(match () {
        _ if ip.is_loopback() => "loopback",
        _ if a == 0 => "unspecified",
        _ if ip.is_private() => "private",
        _ if a == 100 && (64..128).contains(&b) => "shared (carrier-grade NAT)",
        _ if ip.is_link_local() => "link-local",
        _ if ip.is_broadcast() => "broadcast",
        _ if ip.is_multicast() => "multicast",
        _ if a >= 240 => "reserved",
        _ => return None,
    })
}

fn refused_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let s = ip.segments();
    // IPv4 inside IPv6: IPv4-compatible (::a.b.c.d), NAT64 (64:ff9b::/96), 6to4 (2002::/16).
    let embedded = |hi: u16, lo: u16| Ipv4Addr::from((u32::from(hi) << 16) | u32::from(lo));
    Some(match () {
        _ if ip.is_loopback() => "loopback",
        _ if ip.is_unspecified() => "unspecified",
        _ if ip.is_multicast() => "multicast",
        _ if s[0] & 0xfe00 == 0xfc00 => "unique local (private)",
        _ if s[0] & 0xffc0 == 0xfe80 => "link-local",
        _ if s[..6] == [0; 6] => return refused_v4(embedded(s[6], s[7])).or(Some("reserved")),
        _ if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] => return refused_v4(embedded(s[6], s[7])),
        _ if s[0] == 0x2002 => return refused_v4(embedded(s[1], s[2])),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fetcher(allow: &[&str]) -> Fetcher {
        Fetcher::new(&allow.iter().map(|s| s.to_string()).collect::<Vec<_>>(), 1 << 20, Duration::from_secs(5)).unwrap()
    }

    fn at(ip: &str, port: u16) -> SocketAddr {
        SocketAddr::new(ip.parse().unwrap(), port)
    }

    #[test]
    fn special_ranges_are_refused_by_default() {
        let f = fetcher(&[]);
        for ip in [
            "127.0.0.1",
            "127.9.9.9",
            "0.0.0.0",
            "10.1.2.3",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "100.64.0.1",
            "169.254.169.254",
            "224.0.0.1",
            "255.255.255.255",
            "240.0.0.1",
            "::1",
            "::",
            "fc00::1",
            "fd12::1",
            "fe80::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "::127.0.0.1",
            "64:ff9b::7f00:1",
            "2002:7f00:1::",
        ] {
            assert!(f.verdict("h", at(ip, 80)).is_err(), "{ip} allowed");
        }
        for ip in ["93.184.216.34", "8.8.8.8", "172.32.0.1", "100.128.0.1", "2606:4700::1111", "64:ff9b::808:808"] {
            assert!(f.verdict("h", at(ip, 80)).is_ok(), "{ip} refused");
        }
        let why = f.verdict("localhost", at("127.0.0.1", 8080)).unwrap_err();
        assert!(why.contains("loopback") && why.contains("--fetch-allow 127.0.0.1:8080"), "{why}");
    }

    #[test]
    fn allow_entries_open_exactly_what_they_name() {
        let f = fetcher(&["127.0.0.1", "10.0.0.0/8", "[::1]:9000", "files.internal:8080", "192.168.1.5:80"]);
        assert!(f.verdict("x", at("127.0.0.1", 1)).is_ok());
        assert!(f.verdict("x", at("::ffff:127.0.0.1", 1)).is_ok());
        assert!(f.verdict("x", at("127.0.0.2", 1)).is_err());
        assert!(f.verdict("x", at("10.200.0.1", 1)).is_ok());
        assert!(f.verdict("x", at("::1", 9000)).is_ok());
        assert!(f.verdict("x", at("::1", 9001)).is_err());
        assert!(f.verdict("FILES.internal", at("172.16.0.9", 8080)).is_ok());
        assert!(f.verdict("files.internal", at("172.16.0.9", 8081)).is_err());
        assert!(f.verdict("x", at("192.168.1.5", 80)).is_ok());
        assert!(f.verdict("x", at("192.168.1.5", 81)).is_err());
        for bad in ["10.0.0.0/33", "x/8", "host:port", "a b", ""] {
            assert!(Fetcher::new(&[bad.to_string()], 1, Duration::from_secs(1)).is_err(), "{bad}");
        }
    }

    #[test]
    fn urls_are_http_with_a_plain_host() {
        assert!(url::parse("ftp://example.org/x").unwrap_err().contains("not an http:// or https:// URL"));
        assert_eq!(url::parse("https://example.org/x").unwrap().port, 443);
        assert!(url::parse("http://u:p@example.org/x").unwrap_err().contains("no user name"));
        let t = url::parse("http://[::1]:8080/a?b=c").unwrap();
        assert_eq!((t.host.as_str(), t.port, t.path.as_str()), ("::1", 8080, "/a?b=c"));
        assert_eq!(url::parse("http://Example.org").unwrap().port, 80);
    }
}
