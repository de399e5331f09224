//! `GET /ogcapi/` (the landing page), `GET /ogcapi/conformance` (the
//! conformance classes met) and `GET /ogcapi/api` (the face's OpenAPI 3.0
//! definition). None needs a key: they say what the face is, not what is
//! deployed here.

use http::{HeaderValue, StatusCode};
use serde_json::{json, Value};

use super::{link, url_of};
use crate::service::reply::{json, Reply};
use crate::service::Endpoint;
use crate::wire::url;

/// The conformance classes of Part 1 this face meets.
pub const CONFORMS_TO: [&str; 6] = [
    "http://www.opengis.net/spec/ogcapi-processes-1/1.0/conf/core",
    "http://www.opengis.net/spec/ogcapi-processes-1/1.0/conf/json",
    "http://www.opengis.net/spec/ogcapi-processes-1/1.0/conf/oas30",
    "http://www.opengis.net/spec/ogcapi-processes-1/1.0/conf/ogc-process-description",
    "http://www.opengis.net/spec/ogcapi-processes-1/1.0/conf/job-list",
    "http://www.opengis.net/spec/ogcapi-processes-1/1.0/conf/dismiss",
];

const OPENAPI: &str = include_str!("openapi.json");
const OPENAPI_TYPE: &str = "application/vnd.oai.openapi+json;version=3.0";

pub fn landing(ep: &Endpoint) -> Reply {
    let mut api = link(url_of(ep, "/api"), "service-desc", "the API definition (OpenAPI 3.0)");
    api["type"] = json!(OPENAPI_TYPE);
    json(
        StatusCode::OK,
        &json!({
            "title": "mpiws endpoint: OGC API - Processes",
            "description": "The programs deployed on this mpiws endpoint, as OGC API - Processes (Part 1: Core). \
                            Every route but this page, /conformance and /api needs an endpoint key with the jobs scope \
                            (Authorization: Bearer KEY).",
            "links": [
                link(url_of(ep, "/"), "self", "this document"),
                api,
                link(url_of(ep, "/conformance"), "http://www.opengis.net/def/rel/ogc/1.0/conformance", "the conformance classes met"),
                link(url_of(ep, "/processes"), "http://www.opengis.net/def/rel/ogc/1.0/processes", "the processes"),
                link(url_of(ep, "/jobs"), "http://www.opengis.net/def/rel/ogc/1.0/job-list", "the jobs of the caller's key"),
            ],
        }),
    )
}

pub fn conformance() -> Reply {
    json(StatusCode::OK, &json!({"conformsTo": CONFORMS_TO}))
}

/// The definition, its server this endpoint's face.
pub fn api(ep: &Endpoint) -> Reply {
    let mut doc: Value = serde_json::from_str(OPENAPI).expect("the face's OpenAPI definition is JSON");
    doc["servers"] = json!([{"url": url::without_pin(&url_of(ep, ""))}]);
    let mut r = json(StatusCode::OK, &doc);
    r.headers_mut().insert(http::header::CONTENT_TYPE, HeaderValue::from_static(OPENAPI_TYPE));
    r
}
