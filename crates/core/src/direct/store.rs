//! `POST /domains/{domain}/ranks/{rank}/messages`: the store operation. Files
//! the raw body in the destination instance's mailbox; answers once filed
//! (204), or for a synchronous send once a receive matched it.
//!
//! Checks come before the body is read, so a refused store costs nothing and
//! changes nothing: rank, headers, size, token, then the body within the limit.

use http::{Request, StatusCode};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use serde_json::json;
use tokio::sync::oneshot;

use crate::direct::frame::{Envelope, Payload};
use crate::direct::mailbox::Message;
use crate::domain::instance::Delivered;
use crate::error::ErrorClass;
use crate::service::reply::{self, authorize, error, from_error, parse_rank, Reply};
use crate::service::Endpoint;

pub async fn store(ep: &Endpoint, domain: &str, rank: &str, req: Request<Incoming>) -> Reply {
    let rank = match parse_rank(rank) {
        Ok(r) => r,
        Err(reply) => return reply,
    };
    let length = req
        .headers()
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let env = match Envelope::from_headers(req.headers(), length) {
        Ok(e) => e,
        Err(e) => return error(StatusCode::BAD_REQUEST, e.class, e.message),
    };
    let max = ep.config.max_message;
    if length.is_some_and(|l| l > max) {
        return too_large(max);
    }
    if let Some(size) = ep.domain_size(domain) {
        if rank >= size {
            return error(StatusCode::BAD_REQUEST, ErrorClass::Rank, format!("rank {rank} out of range: domain {domain} has {size} ranks"));
        }
    }
    if reply::bearer(req.headers()).is_none() {
        return error(StatusCode::UNAUTHORIZED, ErrorClass::Arg, "missing 'Authorization: Bearer <domain token>'");
    }
    let instance = match ep.wait_instance(domain, rank).await {
        Ok(i) => i,
        Err(e) if e.class == ErrorClass::Comm => return error(StatusCode::NOT_FOUND, e.class, e.message),
        Err(e) => return error(StatusCode::SERVICE_UNAVAILABLE, e.class, e.message),
    };
    if let Err(reply) = authorize(req.headers(), &instance) {
        return reply;
    }
    if env.source >= instance.size() {
        return error(
            StatusCode::BAD_REQUEST,
            ErrorClass::Rank,
            format!("source rank {} out of range: domain {domain} has {} ranks", env.source, instance.size()),
        );
    }

    let mut body = req.into_body();
    let mut chunks = Vec::new();
    let mut total = 0u64;
    while let Some(frame) = body.frame().await {
        let frame = match frame {
            Ok(f) => f,
            Err(e) => return error(StatusCode::BAD_REQUEST, ErrorClass::Other, format!("body cut off: {e}")),
        };
        if let Ok(data) = frame.into_data() {
            total += data.len() as u64;
            if total > max {
                return too_large(max);
            }
            chunks.push(data);
        }
    }
    if !env.parts.is_empty() && env.parts.iter().sum::<u64>() != total {
        return error(StatusCode::BAD_REQUEST, ErrorClass::Arg, "mpiws-parts does not add up to the body length");
    }

    let mut msg = Message::new(env, Payload::from_chunks(chunks));
    let matched = if msg.env.sync {
        let (tx, rx) = oneshot::channel::<()>();
        msg.on_match = Some(tx);
        Some(rx)
    } else {
        None
    };
    match instance.deliver(msg) {
        Err(e) => from_error(&e),
        Ok(Delivered::Duplicate) => reply::json(StatusCode::OK, &json!({"duplicate": true})),
        Ok(Delivered::Filed) => match matched {
            None => reply::no_content(),
            Some(rx) => match rx.await {
                Ok(()) => reply::no_content(),
                Err(_) => error(StatusCode::GONE, ErrorClass::ProcFailed, "the receiving instance ended before it received the message"),
            },
        },
    }
}

fn too_large(max: u64) -> Reply {
    error(StatusCode::PAYLOAD_TOO_LARGE, ErrorClass::Count, format!("message larger than this endpoint's limit of {max} bytes"))
}
