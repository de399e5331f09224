//! `POST /domains/{domain}/ranks/{rank}`: a running rank's SOAP operations,
//! the direct-communication operations of the systems mpiws descends from:
//! `store` (a message, its payload inline as base64Binary or as an MTOM
//! attachment) and `bStore` (the same, which the rank forwards on to the
//! ranks listed in `forward`, as a broadcast's relay). Each files the
//! message in the same mailbox as `POST .../messages` (`store::file`), by
//! the same rules: the domain's token, checked before the body is read;
//! the same envelope (source, tag, context, sequence number, sync); the
//! same order per sender, duplicates answered as such, the same pushback
//! (429, `Retry-After`), a refusal after admission final (the sequence
//! number skipped).

use bytes::Bytes;
use http::{Request, StatusCode};
use hyper::body::Incoming;

use super::envelope::{self, included, Attachment};
use super::program::{answer_envelope, sender, Fault};
use crate::error::ErrorClass;
use crate::net::reader::Delivered;
use crate::service::admit::{admit, admit_ended};
use crate::service::reply::{read_body, HttpError, Reply};
use crate::service::store::{file, pushback, too_large_error};
use crate::service::Endpoint;
use crate::wire::frame::{Envelope, Payload, TAG_UB, WORLD_CONTEXT};

/// The service interface's namespace: the rank's operations are in its WSDL (`GET /?wsdl`).
pub use super::services::NS;

/// The envelope around the payload: base64 grows it by a third, and the XML around it is small.
const ENVELOPE_ROOM: u64 = 64 << 10;

/// The most a SOAP store's body may be, for messages of at most `max_message` bytes.
pub fn body_limit(max_message: u64) -> u64 {
    max_message.saturating_add(max_message / 3).saturating_add(ENVELOPE_ROOM)
}

pub async fn rank(ep: &Endpoint, domain: &str, rank: &str, req: Request<Incoming>) -> Reply {
    match operate(ep, domain, rank, req).await {
        Ok(body) => answer_envelope(&body),
        Err(f) => f.into(),
    }
}

async fn operate(ep: &Endpoint, domain: &str, rank: &str, req: Request<Incoming>) -> Result<String, Fault> {
    let since = std::time::Instant::now();
    let headers = req.headers().clone();
    // The credential first: the token, before a byte of the body is read.
    admit_ended(ep, domain, rank, &headers, 0).await?;
    let content_type = headers.get(http::header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
    let max = ep.config.max_message;
    let limit = body_limit(max);
    let body = read_body(ep, req.into_body(), usize::try_from(limit).unwrap_or(usize::MAX), "the SOAP store (--max-message)").await?;
    let request = envelope::read_sessionless(&content_type, &body)?;
    let op = &request.operation;
    if op.ns != NS || !matches!(op.name.as_str(), "store" | "bStore") {
        return Err(sender(format!("a rank takes store and bStore of {NS}, not {{{}}}{}", op.ns, op.name)));
    }
    let number = |name: &str| -> Result<Option<u64>, Fault> {
        match op.child(name) {
            None => Ok(None),
            Some(c) => c.text.trim().parse::<u64>().map(Some).map_err(|_| sender(format!("{name} is a whole number"))),
        }
    };
    let source = number("source")?.ok_or_else(|| sender(format!("{} takes a source", op.name)))?;
    let source = u32::try_from(source).map_err(|_| sender("source is a rank"))?;
    let tag = number("tag")?.unwrap_or(0);
    if tag > TAG_UB as u64 {
        return Err(HttpError::new(StatusCode::BAD_REQUEST, ErrorClass::Tag, format!("invalid tag {tag}: must be 0..={TAG_UB}")).into());
    }
    let forward = op
        .children
        .iter()
        .filter(|c| c.name == "forward")
        .map(|c| c.text.trim().parse::<u32>().map_err(|_| sender("forward is a rank")))
        .collect::<Result<Vec<u32>, Fault>>()?;
    if op.name == "bStore" && forward.is_empty() {
        return Err(sender("bStore forwards: it takes at least one forward rank (a store without one is store)"));
    }
    let sync = op.child("sync").is_some_and(|s| matches!(s.text.trim(), "true" | "1"));
    let env = Envelope {
        source,
        context: number("context")?.unwrap_or(WORLD_CONTEXT),
        tag: tag as i32,
        seq: number("seq")?,
        sync,
        parts: Vec::new(),
        forward,
    };
    let instance = admit(ep, domain, rank, &headers, source).await?;
    if instance.holds_back(source) {
        return Err(pushback().into()); // not a refusal: the same message again later
    }
    // Admitted: from here on a refusal is final, and the mailbox moves past its sequence number.
    let refuse = |f: Fault| {
        instance.skip(env.source, env.seq);
        f
    };
    let payload = op.child("payload").ok_or_else(|| refuse(sender(format!("{} takes a payload", op.name))))?;
    let bytes = match included(payload, &request.attachments).map_err(|e| refuse(sender(e)))? {
        Some(Attachment::Bytes(b)) => b.clone(),
        Some(Attachment::Upload(_)) => unreachable!("a store's package is read whole (envelope::read)"),
        None => {
            use base64::Engine;
            let text: Vec<u8> = payload.text.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
            base64::engine::general_purpose::STANDARD.decode(text).map_err(|e| refuse(sender(format!("payload: bad base64: {e}"))))?
        }
    };
    if bytes.len() as u64 > max {
        return Err(refuse(too_large_error(max).into()));
    }
    let delivered = file(&instance, env, Payload::from_chunks(vec![Bytes::from(bytes)]), since).await?;
    let duplicate = matches!(delivered, Delivered::Duplicate);
    Ok(format!(r#"<r:{}Response xmlns:r="{NS}"><r:duplicate>{duplicate}</r:duplicate></r:{}Response>"#, op.name, op.name))
}
