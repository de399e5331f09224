//! The checks every request passes before its operation runs, in order:
//! the `Host` it was sent to and the `Origin` of the page that sent it
//! (a web page must not drive an endpoint, even one on loopback: CSRF,
//! DNS rebinding), then the credential its route needs ([`need`]):
//! an endpoint key with a scope, a domain's token (checked by the
//! operation, which knows the instance), or nothing.

use http::{HeaderMap, Method, Request, StatusCode};

use crate::error::ErrorClass;
use crate::keys::{Denied, Key, Scope};
use crate::service::reply::{bearer, error, Reply};
use crate::service::Endpoint;

/// What a route asks of the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// Nothing (`GET /`, which shows more to a key or token holder).
    Nothing,
    /// An endpoint key with this scope.
    Key(Scope),
    /// An endpoint key with this scope, or with `admin`: acting on jobs and
    /// uploads that exist (list, watch, read results, kill, remove), which
    /// are their own key's, and every one `admin`'s.
    KeyOrAdmin(Scope),
    /// The domain's token, or a key with `admin` (status and cancel).
    TokenOrAdmin,
    /// The domain's token (what ranks send each other).
    Token,
    /// The URL itself: a file's 128-bit random id is its capability, so
    /// that another endpoint can pull it by reference without a key.
    Capability,
}

/// The credential a route needs, from its path (any method: a wrong
/// method is only answered to a caller who may use the path).
pub fn need(method: &Method, parts: &[&str]) -> Need {
    match parts {
        [""] => Need::Nothing,
        ["run" | "rendezvous"] => Need::Key(Scope::Run),
        // Registering a name at a relay; what goes on under it is checked by the endpoint behind.
        ["relay", _] if method == Method::POST => Need::Key(Scope::Relay),
        ["domains", _, "ranks", _] => Need::TokenOrAdmin,
        ["domains", ..] => Need::Token,
        ["jobs", _, "files", _, ..] | ["jobs", _, "stdout" | "stderr"] | ["files", _] if method == Method::GET => Need::Capability,
        ["programs", ..] => Need::Key(Scope::Jobs),
        ["jobs", ..] => Need::KeyOrAdmin(Scope::Jobs),
        ["files"] => Need::Key(Scope::Files),
        ["files", ..] => Need::KeyOrAdmin(Scope::Files),
        _ => Need::Nothing, // no such route: 404
    }
}

/// The key a `Need::Key` route was called with, or the 401/403 answer.
pub fn key<'a>(ep: &'a Endpoint, headers: &HeaderMap, scope: Scope) -> Result<&'a Key, Reply> {
    ep.keys.check(bearer(headers), scope).map_err(denied)
}

/// The key a `Need::KeyOrAdmin` route was called with: one with `scope`,
/// or with `admin`; else the 401/403 answer (403 names `scope`).
pub fn key_or_admin<'a>(ep: &'a Endpoint, headers: &HeaderMap, scope: Scope) -> Result<&'a Key, Reply> {
    match ep.keys.check(bearer(headers), scope) {
        Err(Denied::Scope(s)) => ep.keys.check(bearer(headers), Scope::Admin).map_err(|_| denied(Denied::Scope(s))),
        found => found.map_err(denied),
    }
}

/// The 401 of a route that needs a key and has none. (`need` asks for one
/// before such a route is reached; a route is never answered by a panic.)
pub fn no_key() -> Reply {
    denied(Denied::Missing)
}

fn denied(d: Denied) -> Reply {
    match d {
        Denied::Missing => error(StatusCode::UNAUTHORIZED, ErrorClass::Arg, "missing 'Authorization: Bearer <endpoint key>'"),
        Denied::Unknown => error(StatusCode::UNAUTHORIZED, ErrorClass::Arg, "not a key of this endpoint"),
        Denied::Scope(s) => error(StatusCode::FORBIDDEN, ErrorClass::Arg, format!("this key does not grant '{}'", s.name())),
    }
}

/// `Host` and `Origin`, checked before anything else.
pub fn origin<B>(ep: &Endpoint, req: &Request<B>) -> Result<(), Reply> {
    let forbidden = |m: String| Err(error(StatusCode::FORBIDDEN, ErrorClass::Arg, m));
    let host = req.uri().authority().map(|a| a.host().to_string()).or_else(|| {
        let h = req.headers().get(http::header::HOST)?.to_str().ok()?;
        Some(host_of(h).to_string())
    });
    if let Some(host) = host {
        if !host_allowed(&host, &ep.config.allow_hosts) {
            return forbidden(format!("Host {host:?} is not served here (add it with --allow-host)"));
        }
    }
    if let Some(origin) = req.headers().get(http::header::ORIGIN) {
        let origin = origin.to_str().unwrap_or("");
        if !ep.config.allow_origins.iter().any(|o| o == "*" || o.eq_ignore_ascii_case(origin)) {
            return forbidden(format!("requests from web pages (Origin {origin:?}) are refused (allow one with --allow-origin)"));
        }
    }
    Ok(())
}

/// A JSON request body must say it is JSON: a browser's form or `text/plain`
/// request, which needs no CORS preflight, is refused (415).
pub fn json_body(headers: &HeaderMap) -> Result<(), Reply> {
    let ct = headers.get(http::header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
    let essence = ct.split(';').next().unwrap_or("").trim();
    if essence.eq_ignore_ascii_case("application/json") {
        Ok(())
    } else {
        Err(error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ErrorClass::Arg,
            format!("the body must be 'Content-Type: application/json', not {ct:?}"),
        ))
    }
}

/// The host part of a `Host` header value (`name`, `name:port`, `[v6]:port`).
fn host_of(value: &str) -> &str {
    if let Some(rest) = value.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    value.rsplit_once(':').map_or(value, |(h, _)| h)
}

/// An IP literal cannot be rebound by DNS; `localhost` names this machine;
/// any other name must be one the deployer allows.
fn host_allowed(host: &str, allowed: &[String]) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.parse::<std::net::IpAddr>().is_ok()
        || host.eq_ignore_ascii_case("localhost")
        || allowed.iter().any(|a| a == "*" || a.eq_ignore_ascii_case(host))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_need_what_they_touch() {
        let p = |s: &'static str| s.trim_matches('/').split('/').collect::<Vec<_>>();
        assert_eq!(need(&Method::GET, &p("/")), Need::Nothing);
        assert_eq!(need(&Method::POST, &p("/run")), Need::Key(Scope::Run));
        assert_eq!(need(&Method::GET, &p("/run")), Need::Key(Scope::Run));
        assert_eq!(need(&Method::POST, &p("/rendezvous")), Need::Key(Scope::Run));
        assert_eq!(need(&Method::DELETE, &p("/domains/d/ranks/0")), Need::TokenOrAdmin);
        assert_eq!(need(&Method::POST, &p("/domains/d/ranks/0/messages")), Need::Token);
        assert_eq!(need(&Method::GET, &p("/programs")), Need::Key(Scope::Jobs));
        assert_eq!(need(&Method::POST, &p("/programs/x/jobs")), Need::Key(Scope::Jobs));
        assert_eq!(need(&Method::DELETE, &p("/jobs/x")), Need::KeyOrAdmin(Scope::Jobs));
        assert_eq!(need(&Method::GET, &p("/jobs")), Need::KeyOrAdmin(Scope::Jobs));
        assert_eq!(need(&Method::GET, &p("/jobs/x/results")), Need::KeyOrAdmin(Scope::Jobs));
        assert_eq!(need(&Method::GET, &p("/jobs/x/files/out")), Need::Capability);
        assert_eq!(need(&Method::DELETE, &p("/files/x")), Need::KeyOrAdmin(Scope::Files));
        assert_eq!(need(&Method::POST, &p("/files")), Need::Key(Scope::Files));
        assert_eq!(need(&Method::GET, &p("/files/x")), Need::Capability);
    }

    #[test]
    fn hosts_are_ip_literals_localhost_or_allowed_names() {
        let allowed = vec!["mpiws.example.org".to_string()];
        for ok in ["127.0.0.1", "10.1.2.3", "::1", "[::1]", "localhost", "LocalHost", "MPIWS.example.org"] {
            assert!(host_allowed(ok, &allowed), "{ok}");
        }
        for bad in ["evil.example.com", "127.0.0.1.nip.io", "localhost.evil", ""] {
            assert!(!host_allowed(bad, &allowed), "{bad}");
        }
        assert!(host_allowed("anything", &["*".to_string()]));
        assert_eq!(host_of("[::1]:80"), "::1");
        assert_eq!(host_of("a.b:8001"), "a.b");
        assert_eq!(host_of("a.b"), "a.b");
    }

    #[test]
    fn json_bodies_say_so() {
        let mut h = HeaderMap::new();
        assert!(json_body(&h).is_err());
        h.insert(http::header::CONTENT_TYPE, "text/plain".parse().unwrap());
        assert!(json_body(&h).is_err());
        h.insert(http::header::CONTENT_TYPE, "application/json; charset=utf-8".parse().unwrap());
        assert!(json_body(&h).is_ok());
    }
}
