//! Building answers: JSON bodies and JSON errors (`{"error": {...}}`), and
//! the checks every operation shares (token, rank in the path).

use std::time::Duration;

use bytes::BytesMut;
use http::{HeaderMap, Request, Response, StatusCode};
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use serde::Serialize;
use serde_json::json;

use crate::body::Chunks;
use crate::error::{Error, ErrorClass};
use crate::keys::{constant_time_eq, Scope};
use crate::service::buffered::Body;
use crate::service::endpoint::Found;
use crate::service::Endpoint;

pub type Reply = Response<Chunks>;

/// A refusal an operation answers with: small, so that it travels as an
/// error (`?`) until the operation's edge makes it its reply (`Reply::from`).
#[derive(Debug)]
pub struct HttpError {
    status: StatusCode,
    class: ErrorClass,
    message: String,
    /// When the caller may try again (`Retry-After`, whole seconds, at least one).
    retry_after: Option<Duration>,
}

impl HttpError {
    pub fn new(status: StatusCode, class: ErrorClass, message: impl Into<String>) -> Self {
        HttpError { status, class, message: message.into(), retry_after: None }
    }

    /// An error the caller may retry, after `after`.
    pub fn retry_later(status: StatusCode, class: ErrorClass, message: impl Into<String>, after: Duration) -> Self {
        HttpError { retry_after: Some(after), ..HttpError::new(status, class, message) }
    }

    pub fn status(&self) -> StatusCode {
        self.status
    }

    pub fn class(&self) -> ErrorClass {
        self.class
    }

    pub fn message(&self) -> &str {
        &self.message
    }

    pub fn retry_after(&self) -> Option<Duration> {
        self.retry_after
    }
}

impl From<HttpError> for Reply {
    fn from(e: HttpError) -> Reply {
        let mut r = error(e.status, e.class, e.message);
        if let Some(after) = e.retry_after {
            r.headers_mut().insert(http::header::RETRY_AFTER, http::HeaderValue::from(after.as_secs().max(1)));
        }
        r
    }
}

/// The HTTP status that fits an error of the core's raised while serving.
impl From<&Error> for HttpError {
    fn from(e: &Error) -> HttpError {
        let status = match e.class {
            ErrorClass::ProcFailed | ErrorClass::Cancelled => StatusCode::GONE,
            ErrorClass::Intern => StatusCode::INTERNAL_SERVER_ERROR,
            _ => StatusCode::BAD_REQUEST,
        };
        HttpError::new(status, e.class, e.message.clone())
    }
}

pub fn json<T: Serialize + ?Sized>(status: StatusCode, value: &T) -> Reply {
    Response::builder()
        .status(status)
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Chunks::json(value))
        .expect("valid response")
}

/// An XML document (a WSDL) answered 200.
pub fn xml(text: String) -> Reply {
    Response::builder()
        .status(StatusCode::OK)
        .header(http::header::CONTENT_TYPE, "text/xml; charset=utf-8")
        .body(Chunks::new([bytes::Bytes::from(text)]))
        .expect("valid response")
}

pub fn error(status: StatusCode, class: ErrorClass, message: impl Into<String>) -> Reply {
    let message = message.into();
    let mut r = json(status, &json!({"error": {"class": class.code(), "name": class.name(), "message": &message}}));
    crate::service::metrics::mark(&mut r, &message);
    r
}

/// The reply to an error of the core's raised while serving.
pub fn from_error(e: &Error) -> Reply {
    HttpError::from(e).into()
}

/// A JSON request's whole body, at most `limit` bytes within `timeout`;
/// else 413 (over the limit), 400 (cut short) or 408, saying what could
/// not be read.
pub async fn read_body(ep: &Endpoint, body: Incoming, limit: usize, what: &str) -> Result<Body, HttpError> {
    let timeout = ep.config.body_timeout;
    let mut claim = ep.buffered.start();
    let read = async {
        let mut body = Limited::new(body, limit);
        let mut whole = BytesMut::new();
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| {
                let status =
                    if e.is::<http_body_util::LengthLimitError>() { StatusCode::PAYLOAD_TOO_LARGE } else { StatusCode::BAD_REQUEST };
                HttpError::new(status, ErrorClass::Arg, format!("cannot read {what}: {e}"))
            })?;
            if let Ok(data) = frame.into_data() {
                claim.grow(data.len() as u64).map_err(|max| {
                    let message =
                        format!("this endpoint holds its maximum of {max} bytes of request bodies now (--max-buffered); try again");
                    HttpError::retry_later(StatusCode::SERVICE_UNAVAILABLE, ErrorClass::Other, message, Duration::from_secs(1))
                })?;
                whole.extend_from_slice(&data);
            }
        }
        Ok(whole.freeze())
    };
    match tokio::time::timeout(timeout, read).await {
        Ok(Ok(bytes)) => Ok(Body::new(bytes, claim)),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(stalled(timeout)),
    }
}

/// The refusal of a request whose body stopped coming.
pub fn stalled(timeout: Duration) -> HttpError {
    HttpError::new(StatusCode::REQUEST_TIMEOUT, ErrorClass::Arg, format!("the request body stalled for {timeout:?} (--body-timeout)"))
}

/// An error the caller may retry: with `Retry-After` (whole seconds, at least one).
pub fn retry_later(status: StatusCode, class: ErrorClass, message: impl Into<String>, after: Duration) -> Reply {
    HttpError::retry_later(status, class, message, after).into()
}

/// Longest long-poll a client may ask for.
pub const MAX_WAIT: Duration = Duration::from_secs(300);

/// The value of `key` in the request's query string, if given.
pub fn query<'a, B>(req: &'a Request<B>, key: &str) -> Option<&'a str> {
    req.uri().query()?.split('&').find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
}

/// Whether the query has `flag` alone (`?wsdl`) or with any value.
pub fn has_flag<B>(req: &Request<B>, flag: &str) -> bool {
    req.uri().query().is_some_and(|q| q.split('&').any(|kv| kv == flag || kv.strip_prefix(flag).is_some_and(|v| v.starts_with('='))))
}

/// A long poll's `?wait=SECONDS` (at most five minutes); None without one.
pub fn wait_param<B>(req: &Request<B>) -> Result<Option<Duration>, HttpError> {
    match query(req, "wait").map(str::parse::<f64>) {
        None => Ok(None),
        Some(Ok(secs)) if secs >= 0.0 => Ok(Some(Duration::from_secs_f64(secs.min(MAX_WAIT.as_secs_f64())))),
        Some(_) => Err(HttpError::new(StatusCode::BAD_REQUEST, ErrorClass::Arg, "wait= takes a number of seconds")),
    }
}

pub fn no_content() -> Reply {
    Response::builder().status(StatusCode::NO_CONTENT).body(Chunks::empty()).expect("valid response")
}

/// The bearer token of a request, if any.
pub fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers.get(http::header::AUTHORIZATION)?.to_str().ok()?.strip_prefix("Bearer ").map(str::trim)
}

/// Check the request's token against a domain's token.
pub fn authorize(headers: &HeaderMap, token: &str) -> Result<(), HttpError> {
    match bearer(headers) {
        None => Err(HttpError::new(StatusCode::UNAUTHORIZED, ErrorClass::Arg, "missing 'Authorization: Bearer <domain token>'")),
        Some(t) if !constant_time_eq(t.as_bytes(), token.as_bytes()) => {
            Err(HttpError::new(StatusCode::FORBIDDEN, ErrorClass::Arg, "wrong domain token"))
        }
        Some(_) => Ok(()),
    }
}

/// `authorize`, or a key with `admin` (which may watch and cancel any instance).
pub fn authorize_or_admin(ep: &Endpoint, headers: &HeaderMap, token: &str) -> Result<(), HttpError> {
    if ep.keys.check(bearer(headers), Scope::Admin).is_ok() {
        return Ok(());
    }
    authorize(headers, token)
}

/// The instance `{domain}/{rank}` of a status or cancel request, whole or
/// as kept once it ended, for the holder of its token or an `admin` key.
pub fn watched_instance(ep: &Endpoint, domain: &str, rank: &str, headers: &HeaderMap) -> Result<Found, HttpError> {
    let rank = parse_rank(rank)?;
    let found = ep.find(domain, rank).ok_or_else(|| {
        HttpError::new(StatusCode::NOT_FOUND, ErrorClass::Comm, format!("no instance of domain {domain} rank {rank} here"))
    })?;
    let token = match &found {
        Found::Live(instance) => &instance.binding.token,
        Found::Ended(ended) => &ended.token,
    };
    authorize_or_admin(ep, headers, token)?;
    Ok(found)
}

pub fn parse_rank(s: &str) -> Result<u32, HttpError> {
    s.parse::<u32>().map_err(|_| HttpError::new(StatusCode::BAD_REQUEST, ErrorClass::Rank, format!("invalid rank {s:?}")))
}
