//! `GET /sessions`: the caller's sessions, oldest first (every one to a
//! key with `admin`); `GET /sessions/{id}`: one, with its quota, bytes
//! used, idle time, when it expires and its jobs. Looking at a session
//! uses it: its idle clock starts again.

use http::StatusCode;
use serde_json::Value;

use crate::keys::Key;
use crate::service::reply::{json, Reply};
use crate::service::sessions::own;
use crate::service::Endpoint;

pub fn list(ep: &Endpoint, caller: &Key) -> Reply {
    let all: Vec<Value> = ep.jobs.sessions_of(caller).iter().map(|s| s.describe(&s.url(&ep.url()))).collect();
    json(StatusCode::OK, &all)
}

pub fn describe(ep: &Endpoint, caller: &Key, id: &str) -> Reply {
    match own(ep, caller, id) {
        Ok(s) => {
            let _ = s.account(); // its bytes as they are now
            json(StatusCode::OK, &s.describe(&s.url(&ep.url())))
        }
        Err(e) => e.into(),
    }
}
