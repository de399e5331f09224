//! The relay role (`mpiws serve --relay`): endpoints that accept no
//! connections (behind NAT, or a firewall that drops inbound packets) are
//! reached here, at `/relay/{name}`, over connections they opened to this
//! endpoint themselves (`service::reverse` is their side).
//!
//! `POST /relay/{name}` with `Upgrade: mpiws-relay/1` and a key with the
//! `relay` scope turns its connection around: this endpoint then sends
//! HTTP/1.1 requests over it and the hidden endpoint answers them. A request
//! to `/relay/{name}/{path}` is passed on over one such connection as
//! `/{path}`, bodies streamed both ways as they come, and a stream upgrade
//! is spliced through (the two upgraded connections copied into each
//! other). The hidden endpoint checks every request's credential itself,
//! as if it were reached directly: the relay passes requests on, and sees
//! them (TLS ends here: trust a relay as the endpoints behind it).
//!
//! A name belongs to the key that registered it while it has connections
//! here; each name keeps at most `--relay-max-connections` (the relay
//! closes idle ones beyond `KEEP_IDLE`). A request for a name with no free
//! connection waits for one (`WAIT`), then is told "not yet" (503,
//! `Retry-After`), as for an endpoint that is starting.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use http::{HeaderValue, Request, Response, StatusCode};
use hyper::body::{Body, Incoming};
use hyper::client::conn::http1::{self, SendRequest};
use hyper_util::rt::TokioIo;
use parking_lot::Mutex;
use tokio::sync::Notify;

use crate::body::Chunks;
use crate::error::ErrorClass;
use crate::keys::{Key, KeyId};
use crate::runtime::runtime;
use crate::service::reply::{error, retry_later, Reply};
use crate::service::{upgrade, Endpoint};
use crate::wire::url::{valid_relay_name, MAX_RELAY_NAME};

pub const PROTOCOL: &str = "mpiws-relay/1";
/// Idle connections a name keeps here; further ones are closed as they come free.
const KEEP_IDLE: usize = 8;
/// How long a request waits for a free connection to its name.
const WAIT: Duration = Duration::from_secs(10);
/// How long a name whose connections all closed is still waited for (its
/// endpoint reconnecting); a name not served here now or then is answered
/// at once, so that no one holds requests here by naming nothing.
const REMEMBER: Duration = Duration::from_secs(30);

/// The names served here and their turned-around connections.
#[derive(Default)]
pub struct Relay {
    names: Mutex<HashMap<String, Name>>,
    /// Names whose last connection closed, and when (see `REMEMBER`).
    gone: Mutex<HashMap<String, Instant>>,
    /// Told when a connection becomes idle (of any name: a request may be
    /// waiting for a name whose first connection is still to come).
    freed: Notify,
}

struct Name {
    owner: KeyId,
    /// Connections ready for a request, the most recent last.
    idle: Vec<SendRequest<Chunks>>,
    /// Connections open (idle, in use, or being turned around).
    open: usize,
}

impl Relay {
    /// Connections open to this relay, of every name.
    pub fn connections(&self) -> usize {
        self.names.lock().values().map(|n| n.open).sum()
    }
}

/// `POST /relay/{name}` asking `Upgrade: mpiws-relay/1` (any other request
/// there is passed on: `routes::find_request`): turn this connection around
/// (see the module's doc).
pub async fn register(ep: &Endpoint, key: &Key, name: &str, mut req: Request<Incoming>) -> Reply {
    if !valid_relay_name(name) {
        return error(StatusCode::BAD_REQUEST, ErrorClass::Arg, format!("a relay name is 1-{MAX_RELAY_NAME} characters of [A-Za-z0-9._-]"));
    }
    if !ep.keys.may_relay(key, name) {
        let why = format!("relay name {name:?} is not this key's: the relay's keys file gives it to another key (KEY relay=NAME), or gives this key other names");
        return error(StatusCode::FORBIDDEN, ErrorClass::Arg, why);
    }
    let owner = key.id;
    let max = ep.config.relay_max_connections;
    {
        let mut names = ep.relay.names.lock();
        let entry = names.entry(name.to_string()).or_insert_with(|| Name { owner, idle: Vec::new(), open: 0 });
        if entry.owner != owner {
            if entry.open > 0 {
                return error(StatusCode::CONFLICT, ErrorClass::Arg, format!("relay name {name:?} is taken by another key"));
            }
            entry.owner = owner;
        }
        if entry.open >= max {
            let message = format!("{name:?} keeps its maximum of {max} connections to this relay (--relay-max-connections)");
            return retry_later(StatusCode::TOO_MANY_REQUESTS, ErrorClass::Other, message, Duration::from_secs(1));
        }
        entry.open += 1;
    }
    let upgrade = hyper::upgrade::on(&mut req);
    let (relay, name) = (ep.relay.clone(), name.to_string());
    runtime().spawn(async move {
        let turned = match upgrade.await {
            Ok(io) => http1::Builder::new().handshake::<_, Chunks>(io).await.ok(),
            Err(_) => None,
        };
        let Some((sender, conn)) = turned else { return relay.closed(&name) };
        relay.put(&name, sender, true);
        // Until the hidden endpoint or this relay closes it (or a stream upgrade takes it over).
        let _ = conn.with_upgrades().await;
        relay.closed(&name);
    });
    upgrade::granted(PROTOCOL)
}

impl Relay {
    /// A connection of `name` is idle: kept for the next request; one that
    /// served already is closed (dropped) if the name keeps enough idle ones.
    fn put(&self, name: &str, sender: SendRequest<Chunks>, fresh: bool) {
        let mut names = self.names.lock();
        if let Some(n) = names.get_mut(name) {
            n.idle.retain(|s| !s.is_closed());
            if fresh || n.idle.len() < KEEP_IDLE {
                n.idle.push(sender);
                self.freed.notify_waiters();
            }
        }
    }

    fn closed(&self, name: &str) {
        let mut names = self.names.lock();
        if let Some(n) = names.get_mut(name) {
            n.open = n.open.saturating_sub(1);
            n.idle.retain(|s| !s.is_closed());
            if n.open == 0 {
                names.remove(name);
                let mut gone = self.gone.lock();
                gone.retain(|_, at| at.elapsed() < REMEMBER);
                gone.insert(name.to_string(), Instant::now());
            }
        }
    }

    /// An idle connection of `name`, waiting up to `wait` for one (and for
    /// the name's first: its endpoint may be connecting just now).
    async fn take(&self, name: &str, wait: Duration) -> Option<SendRequest<Chunks>> {
        let known = self.names.lock().contains_key(name) || self.gone.lock().get(name).is_some_and(|at| at.elapsed() < REMEMBER);
        if !known {
            return None;
        }
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            // Listening before looking: a connection freed in between is not missed.
            let freed = self.freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            let found = self.names.lock().get_mut(name).and_then(|n| {
                n.idle.retain(|s| !s.is_closed());
                n.idle.pop()
            });
            match found {
                // Idle connections are ready at once (a new one once its task first runs).
                Some(mut s) => match tokio::time::timeout_at(deadline, s.ready()).await {
                    Ok(Ok(())) => return Some(s),
                    Ok(Err(_)) => continue, // closed meanwhile: the next one
                    Err(_) => return None,
                },
                None => tokio::time::timeout_at(deadline, freed).await.ok()?,
            }
        }
    }

    /// Send `req` over an idle connection of `name` (None: none came within
    /// `wait`), which is idle again once this exchange is over (never, if upgraded).
    async fn pass(self: &Arc<Self>, name: &str, req: Request<Chunks>, wait: Duration) -> Option<hyper::Result<Response<Incoming>>> {
        let mut sender = self.take(name, wait).await?;
        let answer = sender.send_request(req).await;
        let (relay, name) = (self.clone(), name.to_string());
        runtime().spawn(async move {
            if sender.ready().await.is_ok() {
                relay.put(&name, sender, false);
            }
        });
        Some(answer)
    }
}

/// `/relay/{name}/{path}`: pass the request on to `name` as `/{path}`, and its answer back.
pub async fn forward(ep: &Endpoint, name: &str, mut req: Request<Incoming>) -> Reply {
    // A name no endpoint can register is answered at once, not after the wait for one to connect.
    if !valid_relay_name(name) {
        let message = format!("no endpoint can be named {name:?} here: a relay name is 1-{MAX_RELAY_NAME} characters of [A-Za-z0-9._-]");
        return error(StatusCode::NOT_FOUND, ErrorClass::Arg, message);
    }
    let relay = &ep.relay;
    let prefix = format!("/relay/{name}");
    let path = req.uri().path_and_query().map_or("", |p| p.as_str()).strip_prefix(&prefix).unwrap_or("");
    let path = if path.starts_with('/') { path.to_string() } else { format!("/{path}") };
    let Ok(uri) = path.parse() else {
        return error(StatusCode::BAD_REQUEST, ErrorClass::Arg, "request cannot be relayed");
    };
    let upgrade = req.headers().get(http::header::UPGRADE).cloned().filter(|v| upgrade::asks(&req, v.to_str().unwrap_or("")));
    let client_side = upgrade.as_ref().map(|_| hyper::upgrade::on(&mut req));
    let (mut parts, body) = req.into_parts();
    parts.uri = uri;
    strip_hop_by_hop(&mut parts.headers, upgrade.as_ref());
    // Sent again, once, over another connection idle now, if the one it went
    // over closed unanswered (the endpoint behind may close one just as it is
    // taken): only what RFC 9110 lets a proxy repeat, an idempotent request,
    // and only with no body to replay. With no other connection: 502 at once.
    let again = (parts.method.is_idempotent() && body.is_end_stream() && upgrade.is_none()).then(|| head_of(&parts));
    let mut answer = relay.pass(name, Request::from_parts(parts, Chunks::relayed(body)), WAIT).await;
    if let (Some(Err(e)), Some(parts)) = (&answer, again) {
        if e.is_incomplete_message() || e.is_canceled() {
            answer = relay.pass(name, Request::from_parts(parts, Chunks::empty()), Duration::ZERO).await.or(answer);
        }
    }
    let mut answer = match answer {
        Some(Ok(a)) => a,
        None => {
            let message = format!("no endpoint named {name:?} is connected to this relay (yet)");
            return retry_later(StatusCode::SERVICE_UNAVAILABLE, ErrorClass::Comm, message, Duration::from_secs(1));
        }
        Some(Err(e)) if body_broke(&e) => {
            let message = format!("the request's body broke off while it was passed on: {e}");
            return error(StatusCode::BAD_REQUEST, ErrorClass::Arg, message);
        }
        Some(Err(e)) => {
            let message = format!("the endpoint {name:?} behind this relay did not answer: {e}");
            return error(StatusCode::BAD_GATEWAY, ErrorClass::ProcFailed, message);
        }
    };
    let upgraded = answer.status() == StatusCode::SWITCHING_PROTOCOLS;
    if let Some(why) = not_an_answer(answer.status(), client_side.is_some()) {
        let message = format!("the endpoint {name:?} behind this relay answered {why}");
        return error(StatusCode::BAD_GATEWAY, ErrorClass::ProcFailed, message);
    }
    if let (true, Some(client_side)) = (upgraded, client_side) {
        let behind = hyper::upgrade::on(&mut answer);
        runtime().spawn(async move {
            if let (Ok(a), Ok(b)) = (client_side.await, behind.await) {
                let _ = tokio::io::copy_bidirectional(&mut TokioIo::new(a), &mut TokioIo::new(b)).await;
            }
        });
    }
    let (mut parts, body) = answer.into_parts();
    strip_hop_by_hop(&mut parts.headers, upgrade.as_ref().filter(|_| upgraded));
    Response::from_parts(parts, Chunks::relayed(body))
}

/// A copy of a request's head, to send it again.
fn head_of(parts: &http::request::Parts) -> http::request::Parts {
    let (mut head, ()) = Request::new(()).into_parts();
    head.method = parts.method.clone();
    head.uri = parts.uri.clone();
    head.version = parts.version;
    head.headers = parts.headers.clone();
    head
}

/// Whether passing a request on failed because its own body broke (the
/// client's connection: shorter than announced, bad chunks), not the
/// endpoint behind: the client's fault (400), not the endpoint's (502).
fn body_broke(e: &hyper::Error) -> bool {
    e.is_user() && std::error::Error::source(e).is_some_and(|s| s.is::<hyper::Error>())
}

/// Why an answer from behind cannot be passed on as the answer to this request,
/// if it cannot: a status outside 101 and 200-599 (hyper reads any three
/// digits), or a 101 to a request that asked for no upgrade (the client would
/// take its connection as switched to nothing).
fn not_an_answer(status: StatusCode, asked_upgrade: bool) -> Option<String> {
    match status.as_u16() {
        101 if !asked_upgrade => Some("101 Switching Protocols to a request that asked for no upgrade".into()),
        101 | 200..=599 => None,
        s => Some(format!("status {s}, which is no final HTTP status")),
    }
}

/// Remove what belongs to one connection; an upgrade being passed on keeps its two headers.
fn strip_hop_by_hop(headers: &mut http::HeaderMap, upgrade: Option<&HeaderValue>) {
    for name in upgrade::HOP_BY_HOP {
        headers.remove(name);
    }
    if let Some(protocol) = upgrade {
        headers.insert(http::header::CONNECTION, HeaderValue::from_static("upgrade"));
        headers.insert(http::header::UPGRADE, protocol.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_final_answers_and_asked_for_upgrades_are_passed_on() {
        let status = |s| StatusCode::from_u16(s).unwrap();
        assert!(not_an_answer(status(101), false).is_some(), "a 101 nobody asked for");
        assert!(not_an_answer(status(101), true).is_none());
        for s in [100, 102, 103, 600, 999] {
            assert!(not_an_answer(status(s), true).is_some(), "{s}");
        }
        for s in [200, 204, 404, 500, 503, 599] {
            assert!(not_an_answer(status(s), false).is_none(), "{s}");
        }
    }

    #[test]
    fn hop_by_hop_headers_go_and_an_upgrade_keeps_its_own() {
        let mut h = http::HeaderMap::new();
        for (k, v) in [
            ("connection", "close"),
            ("transfer-encoding", "chunked"),
            ("proxy-authorization", "Basic x"),
            ("authorization", "Bearer t"),
            ("upgrade", "x"),
        ] {
            h.insert(k, v.parse().unwrap());
        }
        let mut plain = h.clone();
        strip_hop_by_hop(&mut plain, None);
        assert_eq!(plain.keys().map(|k| k.as_str()).collect::<Vec<_>>(), ["authorization"]);
        strip_hop_by_hop(&mut h, Some(&HeaderValue::from_static("mpiws-stream/1")));
        assert_eq!(h.get("connection").unwrap(), "upgrade");
        assert_eq!(h.get("upgrade").unwrap(), "mpiws-stream/1");
        assert!(h.get("transfer-encoding").is_none());
    }
}
