//! `GET /`: who this endpoint is and what it deploys (`GET /?wsdl`: the
//! service interface's WSDL, `service::soap::wsdl`). The domains it hosts
//! are listed only to a key with `admin`, or, to the holder of a domain's
//! token, that domain; how many jobs it holds (`jobs`), only to `admin`
//! (`GET /jobs` lists them).

use http::{Request, StatusCode};
use serde_json::json;

use crate::keys::{constant_time_eq, Scope};
use crate::service::reply::{bearer, has_flag, json, xml, Reply};
use crate::service::soap::wsdl;
use crate::service::Endpoint;
use crate::wire::url;

pub fn describe<B>(ep: &Endpoint, req: &Request<B>) -> Reply {
    if has_flag(req, "wsdl") {
        return xml(wsdl::services(&ep.services(), url::without_pin(&ep.url())));
    }
    let given = bearer(req.headers());
    let admin = ep.keys.check(given, Scope::Admin).is_ok();
    let token = given.unwrap_or("");
    let mut described = ep.describe(|t| admin || (!token.is_empty() && constant_time_eq(token.as_bytes(), t.as_bytes())));
    if admin {
        described["jobs"] = json!(ep.jobs.count());
    }
    json(StatusCode::OK, &described)
}
