//! The direct-communication requests of an instance whose code runs in a
//! child process. The endpoint checks them as for any instance (domain id,
//! rank, token: `service::admit::admit_ended`), then:
//! - a stream upgrade is accepted here and the socket handed to the child,
//!   which reads and writes it itself from then on;
//! - stores, `matched` and `withdraw` are relayed over HTTP to the child's
//!   loopback endpoint, which checks and answers them as any endpoint
//!   does; a store's body is read here first, within the same limits.
//!
//! A request that comes before the child is ready waits for it (up to
//! `READY_WAIT`); then the answer is "not yet" (503, `Retry-After`), as for
//! an instance whose *run* request has not arrived.

use std::sync::OnceLock;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, LengthLimitError, Limited};
use hyper::body::Incoming;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

use crate::body::Chunks;
use crate::error::ErrorClass;
use crate::service::admit::admit_ended;
use crate::service::reply::{stalled, HttpError, Reply};
use crate::service::sandbox::{handover, Sandbox};
use crate::service::upgrade::HOP_BY_HOP;
use crate::service::Endpoint;
use crate::wire::frame::Envelope;

/// Longest a request waits for the instance's child to be ready before it is told "not yet".
const READY_WAIT: Duration = Duration::from_secs(10);

/// The child's answer; or this endpoint's own refusal, which the server
/// says as the request's face says refusals (a SOAP store's as a fault).
pub async fn relay(ep: &Endpoint, domain: &str, rank: &str, req: Request<Incoming>) -> Result<Reply, HttpError> {
    let instance = admit_ended(ep, domain, rank, req.headers(), 0).await?;
    let question = req.method() != Method::POST; // `matched`, `withdraw`: about messages sent before
    if let Some(e) = instance.ended() {
        // Nothing more goes to an instance that ended, nor anything to one cancelled (its process is ending).
        if !question || e.class == ErrorClass::Cancelled {
            return Err(HttpError::from(&e));
        }
    }
    let sandbox = ep.sandbox(domain, instance.rank());
    let url = match &sandbox {
        // A child takes a moment to start: a request that comes first waits for it (bounded).
        Some(s) if instance.ended().is_none() => s.url_within(READY_WAIT).await,
        // A child that ended its code lingers a moment, answering questions about what it received.
        Some(s) => s.url(),
        None => None,
    };
    let (Some(sandbox), Some(url)) = (sandbox, url) else {
        if let Some(e) = instance.ended() {
            return Err(HttpError::from(&e));
        }
        let message = format!("domain {domain} rank {rank} is starting here; try again");
        return Err(HttpError::retry_later(StatusCode::SERVICE_UNAVAILABLE, ErrorClass::Comm, message, Duration::from_secs(1)));
    };
    if req.method() == Method::POST && req.uri().path().ends_with("/stream") {
        return Ok(crate::service::stream::accept_into(ep, domain, rank, req, false, move |_, source, socket, early| {
            hand_over(&sandbox, source, socket, &early)
        })
        .await);
    }
    forward(ep, &url, domain, rank, req).await
}

fn hand_over(sandbox: &Sandbox, source: u32, socket: crate::net::socket::Socket, early: &[u8]) {
    if let Some(ready) = sandbox.ready.lock().as_ref() {
        // A failed hand-over drops the socket: the peer sees the stream end and opens another.
        let _ = handover::send(&ready.handover, source, &socket, early);
    }
}

/// The request to the child, its body read first (whole, within the
/// endpoint's limits: a child that answers before reading a body would cut
/// the connection under it); the child's answer.
async fn forward(ep: &Endpoint, url: &str, domain: &str, rank: &str, req: Request<Incoming>) -> Result<Reply, HttpError> {
    static CLIENT: OnceLock<Client<HttpConnector, Chunks>> = OnceLock::new();
    let client = CLIENT.get_or_init(|| {
        let mut http = HttpConnector::new();
        http.set_nodelay(true);
        // A connection per request: none is reused just as the child closes it.
        Client::builder(TokioExecutor::new()).pool_max_idle_per_host(0).build(http)
    });
    let (mut parts, body) = req.into_parts();
    // A SOAP store's envelope holds the message: base64 grows it, the XML around it is small.
    let soap = !parts.uri.path().trim_end_matches('/').ends_with("/messages");
    let limit = if soap { crate::service::soap::rank::body_limit(ep.config.max_message) } else { ep.config.max_message };
    let body = match read_store_body(ep, &parts, body, limit).await {
        Ok(b) => b,
        Err(Refusal::Final(reply, Some((source, seq)))) => {
            // As the child's store would: a message refused for good is skipped,
            // so later ones from its sender are not held back.
            let skip = format!("{url}/domains/{domain}/ranks/{rank}/messages/{source}/{seq}");
            let mut req = Request::delete(skip).body(Chunks::empty()).expect("valid request");
            if let Some(auth) = parts.headers.get(http::header::AUTHORIZATION) {
                req.headers_mut().insert(http::header::AUTHORIZATION, auth.clone());
            }
            let _ = client.request(req).await;
            return Err(reply);
        }
        Err(Refusal::Final(reply, None) | Refusal::Retry(reply)) => return Err(reply),
    };
    let target = format!("{url}{}", parts.uri.path_and_query().map_or("", |p| p.as_str()));
    let Ok(uri) = target.parse() else {
        return Err(HttpError::new(StatusCode::BAD_REQUEST, ErrorClass::Arg, "request cannot be relayed"));
    };
    parts.uri = uri;
    // Not passed on: the connection's own headers, and `Host` (the child's is its own).
    parts.headers.remove(http::header::HOST);
    for name in HOP_BY_HOP {
        parts.headers.remove(name);
    }
    let cut = |e: &dyn std::fmt::Display| {
        // The child is gone or going: its peer tries again, and learns the instance's end from this record.
        HttpError::new(StatusCode::BAD_GATEWAY, ErrorClass::ProcFailed, format!("the instance's process did not answer: {e}"))
    };
    let answer = client.request(Request::from_parts(parts, Chunks::new([body]))).await.map_err(|e| cut(&e))?;
    let (parts, body) = answer.into_parts();
    let b = body.collect().await.map_err(|e| cut(&e))?;
    let mut r = Response::from_parts(parts, Chunks::new([b.to_bytes()]));
    for name in HOP_BY_HOP {
        r.headers_mut().remove(name);
    }
    Ok(r)
}

/// Why a body was not read: a final refusal (with the message's source and
/// sequence number, to be skipped), or one its sender may try again.
enum Refusal {
    Final(HttpError, Option<(u32, u64)>),
    Retry(HttpError),
}

/// The request's body, within `limit` (a store's: `--max-message`) and
/// `--body-timeout`, refused as a store refuses it (413 on the announced
/// length before reading).
async fn read_store_body(ep: &Endpoint, parts: &http::request::Parts, body: Incoming, limit: u64) -> Result<Bytes, Refusal> {
    let max = ep.config.max_message;
    let length = parts.headers.get(http::header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    let message = || Envelope::from_headers(&parts.headers, length).ok().and_then(|e| Some((e.source, e.seq?)));
    let too_large = || {
        HttpError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            ErrorClass::Count,
            format!("message larger than this endpoint's limit of {max} bytes"),
        )
    };
    if length.is_some_and(|l| l > limit) {
        return Err(Refusal::Final(too_large(), message()));
    }
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    match tokio::time::timeout(ep.config.body_timeout, Limited::new(body, limit).collect()).await {
        Ok(Ok(b)) => Ok(b.to_bytes()),
        Ok(Err(e)) if e.is::<LengthLimitError>() => Err(Refusal::Final(too_large(), message())),
        Ok(Err(e)) => Err(Refusal::Retry(HttpError::new(StatusCode::BAD_REQUEST, ErrorClass::Other, format!("body cut off: {e}")))),
        Err(_) => Err(Refusal::Retry(stalled(ep.config.body_timeout))),
    }
}
