//! `POST /sessions`: make a session for the caller's key. Body (optional):
//! `{"disk": BYTES, "idle": SECONDS}`, each at most the endpoint's bound
//! (`--max-session-disk`, `--session-idle`), which is also its default.
//! Answers **201** with the session (`Location`: its URL); 429 when the
//! key keeps `--max-sessions-per-key` already; 415 for a body that is not
//! declared `application/json`.

use http::{Request, StatusCode};
use hyper::body::Incoming;
use serde_json::Value;

use crate::error::ErrorClass;
use crate::keys::Key;
use crate::service::jobs::refused;
use crate::service::reply::{error, json, read_body, Reply};
use crate::service::{guard, Endpoint};

/// A request's body is a few numbers.
const MAX_BODY: usize = 4096;

pub async fn create(ep: &Endpoint, caller: &Key, req: Request<Incoming>) -> Reply {
    // A body, if there is one, is JSON and says so (as every JSON route asks: no form posts a session).
    let no_body = req.headers().get(http::header::CONTENT_LENGTH).is_some_and(|n| n == "0")
        || (req.headers().get(http::header::CONTENT_LENGTH).is_none() && req.headers().get(http::header::TRANSFER_ENCODING).is_none());
    if !no_body {
        if let Err(e) = guard::json_body(req.headers()) {
            return e.into();
        }
    }
    let bad = |message: String| error(StatusCode::BAD_REQUEST, ErrorClass::Arg, message);
    let body = match read_body(ep, req.into_body(), MAX_BODY, &format!("a session's request (at most {MAX_BODY} bytes)")).await {
        Ok(b) => b,
        Err(e) => return e.into(),
    };
    let asked = if body.iter().all(u8::is_ascii_whitespace) {
        serde_json::Map::new()
    } else {
        match serde_json::from_slice::<Value>(&body) {
            Ok(Value::Object(o)) => o,
            Ok(_) => return bad("the body is {\"disk\": BYTES, \"idle\": SECONDS}, both optional".into()),
            Err(e) => return bad(format!("malformed JSON: {e}")),
        }
    };
    if let Some(other) = asked.keys().find(|k| !matches!(k.as_str(), "disk" | "idle")) {
        return bad(format!("a session has no {other:?}: its request is {{\"disk\": BYTES, \"idle\": SECONDS}}"));
    }
    let disk = match asked.get("disk") {
        None => None,
        Some(v) => match v.as_u64() {
            Some(n) => Some(n),
            None => return bad(format!("'disk' is a number of bytes, not {v}")),
        },
    };
    let idle = match asked.get("idle") {
        None => None,
        Some(v) => match v.as_f64() {
            Some(s) => Some(s),
            None => return bad(format!("'idle' is a number of seconds, not {v}")),
        },
    };
    let (disk, idle) = match ep.jobs.session_bounds.grant(disk, idle) {
        Ok(granted) => granted,
        Err(why) => return bad(why),
    };
    let session = match ep.jobs.new_session(caller, disk, idle) {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => return error(StatusCode::INTERNAL_SERVER_ERROR, ErrorClass::Other, e.message),
        Err(r) => return refused(r).into(),
    };
    let url = session.url(&ep.url());
    let mut reply = json(StatusCode::CREATED, &session.describe(&url));
    if let Ok(location) = http::HeaderValue::from_str(&url) {
        reply.headers_mut().insert(http::header::LOCATION, location);
    }
    reply
}
