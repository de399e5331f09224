//! What belongs to one HTTP connection rather than to its requests: the
//! hop-by-hop headers a relay of requests removes, and HTTP/1.1 upgrades
//! (a rank's stream, a relay's turned-around connection): whether a request
//! asks for one, and the 101 that grants it.

use http::{Request, Response, StatusCode};

use crate::body::Chunks;
use crate::service::reply::Reply;

/// Headers that belong to one connection, not to the request (RFC 9110 7.6.1).
pub const HOP_BY_HOP: [&str; 8] =
    ["connection", "keep-alive", "proxy-connection", "proxy-authorization", "te", "trailer", "transfer-encoding", "upgrade"];

/// `Connection: upgrade` with `Upgrade: protocol` (HTTP/1.1 upgrades need
/// both; a proxy that does not pass upgrades on strips them).
pub fn asks<B>(req: &Request<B>, protocol: &str) -> bool {
    let wants = req.headers().get(http::header::UPGRADE).and_then(|v| v.to_str().ok()).is_some_and(|v| v.eq_ignore_ascii_case(protocol));
    wants
        && req
            .headers()
            .get_all(http::header::CONNECTION)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .any(|t| t.trim().eq_ignore_ascii_case("upgrade"))
}

/// `101 Switching Protocols` to `protocol`.
pub fn granted(protocol: &'static str) -> Reply {
    Response::builder()
        .status(StatusCode::SWITCHING_PROTOCOLS)
        .header(http::header::CONNECTION, "upgrade")
        .header(http::header::UPGRADE, protocol)
        .body(Chunks::empty())
        .expect("valid response")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_upgrade_needs_both_headers() {
        let req = |headers: &[(&str, &str)]| {
            let mut r = Request::post("/").body(()).unwrap();
            for (k, v) in headers {
                r.headers_mut().append(http::HeaderName::from_bytes(k.as_bytes()).unwrap(), v.parse().unwrap());
            }
            r
        };
        assert!(asks(&req(&[("connection", "keep-alive, Upgrade"), ("upgrade", "MPIWS-STREAM/1")]), "mpiws-stream/1"));
        assert!(!asks(&req(&[("upgrade", "mpiws-stream/1")]), "mpiws-stream/1"));
        assert!(!asks(&req(&[("connection", "upgrade"), ("upgrade", "websocket")]), "mpiws-stream/1"));
        assert_eq!(granted("x/1").status(), StatusCode::SWITCHING_PROTOCOLS);
    }
}
