//! Building answers: JSON bodies and JSON errors (`{"error": {...}}`), and
//! the checks every operation shares (token, rank in the path).

use http::{HeaderMap, Response, StatusCode};
use serde::Serialize;
use serde_json::json;

use crate::body::Chunks;
use crate::domain::Instance;
use crate::error::{Error, ErrorClass};

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

pub fn no_content() -> Reply {
    Response::builder().status(StatusCode::NO_CONTENT).body(Chunks::empty()).expect("valid response")
}

/// The bearer token of a request, if any.
pub fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(http::header::AUTHORIZATION)?
        .to_str()
        .ok()?
        .strip_prefix("Bearer ")
        .map(str::trim)
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

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

pub fn parse_rank(s: &str) -> Result<u32, Reply> {
    s.parse::<u32>()
        .map_err(|_| error(StatusCode::BAD_REQUEST, ErrorClass::Rank, format!("invalid rank {s:?}")))
}
