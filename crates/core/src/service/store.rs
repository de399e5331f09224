//! `POST /domains/{domain}/ranks/{rank}/messages`: the store operation. Files
//! the raw body in the destination instance's mailbox; answers once filed
//! (204), or for a synchronous send once a receive matched it.
//!
//! Checks come before the body is read, so a refused store costs little:
//! headers, then rank, token and instance (`admit`), then the size, then the
//! body within the limit. A message refused after `admit` is final: the
//! mailbox skips its sequence number so later messages are not held back.

use std::sync::Arc;
use std::time::Duration;

use http::{Request, StatusCode};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use serde_json::json;

use crate::engine::mailbox::Message;
use crate::error::ErrorClass;
use crate::net::reader::Delivered;
use crate::rank::Instance;
use crate::service::admit::admit;
use crate::service::reply::{self, error, HttpError, Reply};
use crate::service::Endpoint;
use crate::wire::frame::{self, Envelope, Payload};

pub async fn store(ep: &Endpoint, domain: &str, rank: &str, req: Request<Incoming>) -> Reply {
    let since = std::time::Instant::now();
    let length = req.headers().get(http::header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    let env = match Envelope::from_headers(req.headers(), length) {
        Ok(e) => e,
        Err(e) => return error(StatusCode::BAD_REQUEST, e.class, e.message),
    };
    let instance = match admit(ep, domain, rank, req.headers(), env.source).await {
        Ok(i) => i,
        Err(e) => return e.into(),
    };
    // From here on a refusal is final: the sender is told, and the
    // mailbox moves past the message's sequence number.
    let refuse = |reply: Reply| {
        instance.skip(env.source, env.seq);
        reply
    };
    let max = ep.config.max_message;
    if length.is_some_and(|l| l > max) {
        return refuse(too_large(max));
    }
    if instance.holds_back(env.source) {
        // Pushback, not a refusal: the sender tries again later, same sequence
        // number. The body (within the limit) is read and dropped first: an
        // answer sent while the body is still coming can be lost with the
        // connection (reset) at clients that write and read at once, such as
        // an endpoint relaying to an instance's process.
        let mut body = req.into_body();
        let deadline = tokio::time::Instant::now() + ep.config.body_timeout;
        let mut drained = 0u64;
        while let Ok(Some(Ok(frame))) = tokio::time::timeout_at(deadline, body.frame()).await {
            drained += frame.data_ref().map_or(0, |d| d.len() as u64);
            if drained > max {
                break;
            }
        }
        return pushback().into();
    }

    let mut body = req.into_body();
    let mut chunks = Vec::new();
    let mut total = 0u64;
    // A body that stalls is not held: like one cut off, its sender may send it again.
    let timeout = ep.config.body_timeout;
    while let Some(frame) = tokio::time::timeout(timeout, body.frame()).await.map_err(|_| ()).transpose() {
        let frame = match frame {
            Ok(Ok(f)) => f,
            Ok(Err(e)) => return error(StatusCode::BAD_REQUEST, ErrorClass::Other, format!("body cut off: {e}")),
            Err(()) => return reply::stalled(timeout).into(),
        };
        if let Ok(data) = frame.into_data() {
            total += data.len() as u64;
            if total > max {
                return refuse(too_large(max));
            }
            chunks.push(data);
        }
    }
    if !frame::parts_fit(&env.parts, total) {
        return refuse(error(StatusCode::BAD_REQUEST, ErrorClass::Arg, "mpiws-parts does not add up to the body length"));
    }

    match file(&instance, env, Payload::from_chunks(chunks), since).await {
        Ok(Delivered::Duplicate) => reply::json(StatusCode::OK, &json!({"duplicate": true})),
        Ok(Delivered::Filed) => reply::no_content(),
        Err(e) => e.into(),
    }
}

/// File a message admitted for `instance` in its mailbox; a synchronous
/// one is answered once a receive matched it. The one way a store files
/// (the SOAP face's `store` too). A message the mailbox refuses (a bad
/// forward list) is refused for good: its sequence number is skipped.
/// `since`: when its request came (how long handling it took, `rank::traffic`).
pub async fn file(instance: &Arc<Instance>, env: Envelope, payload: Payload, since: std::time::Instant) -> Result<Delivered, HttpError> {
    let (source, seq) = (env.source, env.seq);
    let mut msg = Message::new(env, payload);
    let matched = msg.await_match();
    // A retry of a synchronous message is answered when the first copy is
    // matched (at once if it was already: `Mailbox::rejoin`).
    let delivered = instance.clone().deliver(msg).map_err(|e| {
        instance.skip(source, seq);
        HttpError::from(&e)
    })?;
    instance.traffic.handled(since);
    if let Some(rx) = matched {
        if rx.await.is_err() {
            return Err(HttpError::new(
                StatusCode::GONE,
                ErrorClass::ProcFailed,
                "the receiving instance ended before it received the message",
            ));
        }
    }
    Ok(delivered)
}

fn too_large(max: u64) -> Reply {
    too_large_error(max).into()
}

/// What a pushback says (the endpoint's metrics know it by it).
pub const PUSHBACK_MESSAGE: &str = "the receiver holds too many unreceived messages; try again";

/// Pushback: the receiver holds too many unreceived messages from this
/// sender; it tries again later, with the same sequence number.
pub fn pushback() -> HttpError {
    let message = PUSHBACK_MESSAGE;
    HttpError::retry_later(StatusCode::TOO_MANY_REQUESTS, ErrorClass::Other, message, Duration::from_secs(1))
}

pub fn too_large_error(max: u64) -> HttpError {
    HttpError::new(StatusCode::PAYLOAD_TOO_LARGE, ErrorClass::Count, format!("message larger than this endpoint's limit of {max} bytes"))
}
