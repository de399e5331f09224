//! Building answers: JSON bodies and JSON errors (`{"error": {...}}`), and
//! the checks every operation shares (token, rank in the path).

use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Request, Response, StatusCode};
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use serde::Serialize;
use serde_json::json;

use crate::body::Chunks;
use crate::error::{Error, ErrorClass};
use crate::keys::{constant_time_eq, Scope};
use crate::rank::Instance;
use crate::service::Endpoint;

pub type Reply = Response<Chunks>;

pub fn json<T: Serialize + ?Sized>(status: StatusCode, value: &T) -> Reply {
    Response::builder()
        .status(status)
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Chunks::json(value))
        .expect("valid response")
}

pub fn error(status: StatusCode, class: ErrorClass, message: impl Into<String>) -> Reply {
    let message = message.into();
    json(status, &json!({"error": {"class": class.code(), "name": class.name(), "message": message}}))
}

/// The HTTP status that fits an error of `class` raised while serving.
pub fn from_error(e: &Error) -> Reply {
    let status = match e.class {
        ErrorClass::ProcFailed | ErrorClass::Cancelled => StatusCode::GONE,
        ErrorClass::Intern => StatusCode::INTERNAL_SERVER_ERROR,
        _ => StatusCode::BAD_REQUEST,
    };
    error(status, e.class, e.message.clone())
}

/// A JSON request's whole body, at most `limit` bytes within `timeout`;
/// else 413 or 408, saying what could not be read.
pub async fn read_body(body: Incoming, limit: usize, timeout: Duration, what: &str) -> Result<Bytes, Reply> {
    match tokio::time::timeout(timeout, Limited::new(body, limit).collect()).await {
        Ok(Ok(b)) => Ok(b.to_bytes()),
        Ok(Err(e)) => Err(error(StatusCode::PAYLOAD_TOO_LARGE, ErrorClass::Arg, format!("cannot read {what}: {e}"))),
        Err(_) => Err(stalled(timeout)),
    }
}

/// The answer to a request whose body stopped coming.
pub fn stalled(timeout: Duration) -> Reply {
    error(StatusCode::REQUEST_TIMEOUT, ErrorClass::Arg, format!("the request body stalled for {timeout:?} (--body-timeout)"))
}

/// An error the caller may retry: with `Retry-After` (whole seconds, at least one).
pub fn retry_later(status: StatusCode, class: ErrorClass, message: impl Into<String>, after: Duration) -> Reply {
    let mut r = error(status, class, message);
    r.headers_mut().insert(http::header::RETRY_AFTER, http::HeaderValue::from(after.as_secs().max(1)));
    r
}

/// Longest long-poll a client may ask for.
pub const MAX_WAIT: Duration = Duration::from_secs(300);

/// The value of `key` in the request's query string, if given.
pub fn query<'a, B>(req: &'a Request<B>, key: &str) -> Option<&'a str> {
    req.uri().query()?.split('&').find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
}

/// A long poll's `?wait=SECONDS` (at most five minutes); None without one.
pub fn wait_param<B>(req: &Request<B>) -> Result<Option<Duration>, Reply> {
    match query(req, "wait").map(str::parse::<f64>) {
        None => Ok(None),
        Some(Ok(secs)) if secs >= 0.0 => Ok(Some(Duration::from_secs_f64(secs.min(MAX_WAIT.as_secs_f64())))),
        Some(_) => Err(error(StatusCode::BAD_REQUEST, ErrorClass::Arg, "wait= takes a number of seconds")),
    }
}

pub fn no_content() -> Reply {
    Response::builder().status(StatusCode::NO_CONTENT).body(Chunks::empty()).expect("valid response")
}

/// The bearer token of a request, if any.
pub fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers.get(http::header::AUTHORIZATION)?.to_str().ok()?.strip_prefix("Bearer ").map(str::trim)
}

/// Check the request's token against the instance's domain token.
pub fn authorize(headers: &HeaderMap, instance: &Instance) -> Result<(), Reply> {
    match bearer(headers) {
        None => Err(error(StatusCode::UNAUTHORIZED, ErrorClass::Arg, "missing 'Authorization: Bearer <domain token>'")),
        Some(t) if !constant_time_eq(t.as_bytes(), instance.binding.token.as_bytes()) => {
            Err(error(StatusCode::FORBIDDEN, ErrorClass::Arg, "wrong domain token"))
        }
        Some(_) => Ok(()),
    }
}

/// `authorize`, or a key with `admin` (which may watch and cancel any instance).
pub fn authorize_or_admin(ep: &Endpoint, headers: &HeaderMap, instance: &Instance) -> Result<(), Reply> {
    if ep.keys.check(bearer(headers), Scope::Admin).is_ok() {
        return Ok(());
    }
    authorize(headers, instance)
}

pub fn parse_rank(s: &str) -> Result<u32, Reply> {
    s.parse::<u32>().map_err(|_| error(StatusCode::BAD_REQUEST, ErrorClass::Rank, format!("invalid rank {s:?}")))
}
