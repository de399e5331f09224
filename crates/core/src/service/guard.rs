//! The checks every request passes before its operation runs, in order:
//! the `Host` it was sent to and the `Origin` of the page that sent it
//! (a web page must not drive an endpoint, even one on loopback: CSRF,
//! DNS rebinding), then the credential its route needs
//! (`service::routes::Need`): an endpoint key with a scope ([`key`],
//! [`key_or_admin`]), a domain's token (checked by the operation, which
//! knows the instance), or nothing.

use http::{HeaderMap, Request, StatusCode};

use crate::error::ErrorClass;
use crate::keys::{Denied, Key, Scope};
use crate::service::reply::{bearer, HttpError};
use crate::service::Endpoint;

/// The key a `Need::Key` route was called with, or the 401/403 answer.
pub fn key<'a>(ep: &'a Endpoint, headers: &HeaderMap, scope: Scope) -> Result<&'a Key, HttpError> {
    ep.keys.check(bearer(headers), scope).map_err(denied)
}

/// The key a `Need::KeyOrAdmin` route was called with: one with `scope`,
/// or with `admin`; else the 401/403 answer (403 names `scope`).
pub fn key_or_admin<'a>(ep: &'a Endpoint, headers: &HeaderMap, scope: Scope) -> Result<&'a Key, HttpError> {
    match ep.keys.check(bearer(headers), scope) {
        Err(Denied::Scope(s)) => ep.keys.check(bearer(headers), Scope::Admin).map_err(|_| denied(Denied::Scope(s))),
        found => found.map_err(denied),
    }
}

fn denied(d: Denied) -> HttpError {
    match d {
        Denied::Missing => HttpError::new(StatusCode::UNAUTHORIZED, ErrorClass::Arg, "missing 'Authorization: Bearer <endpoint key>'"),
        Denied::Unknown => HttpError::new(StatusCode::UNAUTHORIZED, ErrorClass::Arg, "not a key of this endpoint"),
        Denied::Scope(s) => HttpError::new(StatusCode::FORBIDDEN, ErrorClass::Arg, format!("this key does not grant '{}'", s.name())),
    }
}

/// `Host` and `Origin`, checked before anything else.
pub fn origin<B>(ep: &Endpoint, req: &Request<B>) -> Result<(), HttpError> {
    let forbidden = |m: String| Err(HttpError::new(StatusCode::FORBIDDEN, ErrorClass::Arg, m));
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
        // The endpoint's own pages (`/dashboard/`) are of its own origin: the Host checked above, at its scheme.
        let scheme = if ep.tls.is_some() { "https" } else { "http" };
        let own = req
            .headers()
            .get(http::header::HOST)
            .and_then(|h| h.to_str().ok())
            .is_some_and(|h| origin.eq_ignore_ascii_case(&format!("{scheme}://{h}")));
        if !own && !ep.config.allow_origins.iter().any(|o| o == "*" || o.eq_ignore_ascii_case(origin)) {
            return forbidden(format!("requests from web pages (Origin {origin:?}) are refused (allow one with --allow-origin)"));
        }
    }
    Ok(())
}

/// A JSON request body must say it is JSON: a browser's form or `text/plain`
/// request, which needs no CORS preflight, is refused (415).
pub fn json_body(headers: &HeaderMap) -> Result<(), HttpError> {
    let ct = headers.get(http::header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
    let essence = ct.split(';').next().unwrap_or("").trim();
    if essence.eq_ignore_ascii_case("application/json") {
        Ok(())
    } else {
        Err(HttpError::new(
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
