//! `GET /`: who this endpoint is and what it deploys. The domains it hosts
//! are listed only to a key with `admin`, or, to the holder of a domain's
//! token, that domain; how many jobs it holds (`jobs`), only to `admin`
//! (`GET /jobs` lists them).

use http::{Request, StatusCode};
use serde_json::json;

use crate::keys::{constant_time_eq, Scope};
use crate::service::reply::{bearer, json, Reply};
use crate::service::Endpoint;

pub fn describe<B>(ep: &Endpoint, req: &Request<B>) -> Reply {
    let given = bearer(req.headers());
    let admin = ep.keys.check(given, Scope::Admin).is_ok();
    let token = given.unwrap_or("");
    let mut described = ep.describe(|t| admin || (!token.is_empty() && constant_time_eq(token.as_bytes(), t.as_bytes())));
    if admin {
        described["jobs"] = json!(ep.jobs.count());
    }
    json(StatusCode::OK, &described)
}
