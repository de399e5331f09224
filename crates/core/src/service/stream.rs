//! `POST /domains/{domain}/ranks/{rank}/stream` with `Upgrade:
//! mpiws-stream/1`: the receiving side of the stream channel
//! (`net::link` is the sender's). The same checks as a store
//! (`service::admit`), then `101 Switching Protocols`; the socket is then
//! read by the instance's progress thread or its waiters (`net::reader`).

use std::sync::Arc;

use bytes::Bytes;
use http::{Request, StatusCode};
use hyper::body::Incoming;

use crate::config::failure_timeout;
use crate::error::ErrorClass;
use crate::net::link::PROTOCOL;
use crate::net::local;
use crate::net::pump::upgraded_socket;
use crate::net::socket::Socket;
use crate::rank::Instance;
use crate::service::admit::admit;
use crate::service::reply::{error, Reply};
use crate::service::{upgrade, Endpoint};
use crate::wire::frame;

/// Answer an upgrade request; the stream is then read as `net::reader` says.
/// A sender on this host gets the same-host channel (`net::local`) if it offers it.
pub async fn accept(ep: &Endpoint, domain: &str, rank: &str, req: Request<Incoming>) -> Reply {
    let max = ep.config.max_message;
    accept_into(ep, domain, rank, req, true, move |instance, source, stream, early| {
        if let Ok(progress) = instance.progress() {
            let _ = progress.add(&instance, source, stream, early, max);
        }
    })
    .await
}

/// Answer an upgrade request; once upgraded, `take` gets the stream (the
/// instance, the source rank, the socket, the bytes read past the upgrade).
/// `in_process`: whether the stream is read in this process (a TLS session
/// is then taken over by its threads, `net::tls_socket`, and a same-host
/// sender's offer of `net::local` may be taken: `take` then gets the local
/// stream, made on a blocking thread); else it is handed to an instance's
/// own process.
pub async fn accept_into(
    ep: &Endpoint,
    domain: &str,
    rank: &str,
    mut req: Request<Incoming>,
    in_process: bool,
    take: impl FnOnce(Arc<Instance>, u32, Socket, Bytes) + Send + 'static,
) -> Reply {
    // HTTP/1.1 upgrades only with the `upgrade` token in Connection; a proxy strips both headers otherwise.
    if !upgrade::asks(&req, PROTOCOL) {
        return error(StatusCode::BAD_REQUEST, ErrorClass::Arg, format!("expected 'Connection: upgrade' and 'Upgrade: {PROTOCOL}'"));
    }
    let source = match req.headers().get(frame::H_SOURCE).and_then(|v| v.to_str().ok()).map(|v| v.trim().parse::<u32>()) {
        Some(Ok(s)) => s,
        _ => return error(StatusCode::BAD_REQUEST, ErrorClass::Arg, format!("missing or invalid header {}", frame::H_SOURCE)),
    };
    let instance = match admit(ep, domain, rank, req.headers(), source).await {
        Ok(i) => i,
        Err(e) => return e.into(),
    };
    // The same host, and this very endpoint dialed (not a proxy in front of
    // it, such as a link emulator: its traffic must cross the proxy).
    let dialed_here = req.headers().get(http::header::HOST).and_then(|v| v.to_str().ok()?.parse::<http::uri::Authority>().ok()?.port_u16())
        == Some(ep.addr.port());
    let local = in_process && dialed_here && req.headers().get(local::H_LOCAL).and_then(|v| v.to_str().ok()).is_some_and(local::same_host);
    let upgrade = hyper::upgrade::on(&mut req);
    tokio::spawn(async move {
        let Ok(upgraded) = upgrade.await else { return };
        let Some((mut stream, read_past)) = upgraded_socket(upgraded, in_process) else { return };
        if !local {
            return take(instance, source, stream, read_past);
        }
        // The sender's record, a connection, a secret, the rings: a few
        // blocking steps, bounded by the failure timeout.
        tokio::task::spawn_blocking(move || {
            let limit = failure_timeout();
            if stream.set_nonblocking(false).and_then(|()| stream.set_read_timeout(Some(limit))).is_err() {
                return;
            }
            if let Ok((l, rest)) = local::accept(&mut stream, &read_past, limit) {
                take(instance, source, Socket::Local(l), Bytes::from(rest));
            }
        });
    });
    let mut granted = upgrade::granted(PROTOCOL);
    if local {
        granted.headers_mut().insert(local::H_LOCAL, http::HeaderValue::from_static("1"));
    }
    granted
}
