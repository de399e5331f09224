//! `GET /`: who this endpoint is and what it deploys. The domains it hosts
//! are listed only to a key with `admin`, or, to the holder of a domain's
//! token, that domain.

use http::{Request, StatusCode};

use crate::service::keys::{constant_time_eq, Scope};
use crate::service::reply::{bearer, json, Reply};
use crate::service::Endpoint;

pub fn describe<B>(ep: &Endpoint, req: &Request<B>) -> Reply {
    let given = bearer(req.headers());
    let admin = ep.config.keys.check(given, Scope::Admin).is_ok();
    let token = given.unwrap_or("");
    json(StatusCode::OK, &ep.describe(|i| admin || (!token.is_empty() && constant_time_eq(token.as_bytes(), i.binding.token.as_bytes()))))
}
