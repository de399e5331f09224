//! OGC API – Processes, Part 1: Core (1.0), served under `/ogcapi/` beside
//! the endpoint's own routes: its deployed programs (templates and CWL
//! tools) are the processes, and their jobs the standard's jobs. It is a
//! face only: every operation translates and then calls what the endpoint's
//! own routes call (`service::jobs`), under the same keys, scopes, limits
//! and fetch rules. Its `/jobs` are the key's jobs, as `GET /jobs` lists.
//!
//! Its deployed services are processes too: each execution a domain of
//! one rank here ([`service_runs`]).
//!
//! [`landing`] (landing page, conformance, API definition), [`processes`]
//! (list, description: made by [`description`]), [`execute`] (the request
//! read by [`request`]; sync or async), [`jobs`] (list, status: a status
//! document made by [`status_info`]), [`results`], [`dismiss`]. Errors are
//! the standard's exception documents (RFC 7807 in `application/json`):
//! [`exception`] makes them, and the server turns every refusal on these
//! paths into one ([`from_http`]).

pub mod description;
pub mod dismiss;
pub mod execute;
pub mod jobs;
pub mod landing;
pub mod processes;
pub mod request;
pub mod results;
pub mod service_runs;
pub mod status_info;

use std::sync::Arc;
use std::time::Duration;

use http::{HeaderValue, StatusCode};
use serde_json::Value;

use crate::error::ErrorClass;
use crate::jobs::Program;
use crate::service::reply::{json, query, HttpError, Reply};
use crate::service::Endpoint;
use crate::wire::url;

/// Where the face is served.
pub const PREFIX: &str = "/ogcapi";

/// The exception types the standard names.
pub const NO_SUCH_PROCESS: &str = "http://www.opengis.net/def/exceptions/ogcapi-processes-1/1.0/no-such-process";
pub const NO_SUCH_JOB: &str = "http://www.opengis.net/def/exceptions/ogcapi-processes-1/1.0/no-such-job";
pub const RESULT_NOT_READY: &str = "http://www.opengis.net/def/exceptions/ogcapi-processes-1/1.0/result-not-ready";
/// A job that failed has no results: its failure is the answer (the standard leaves the type open).
pub const JOB_FAILED: &str = "https://mpiws.org/ogcapi/exceptions/job-failed";

/// What a process id names: a deployed program, else a deployed service
/// (a service that shares a program's name is not offered here).
pub enum Process {
    Program(Arc<Program>),
    Service(String),
}

impl Process {
    pub fn id(&self) -> &str {
        match self {
            Process::Program(p) => &p.name,
            Process::Service(name) => name,
        }
    }
}

/// The process `id`, if one is deployed.
pub fn process(ep: &Endpoint, id: &str) -> Option<Process> {
    ep.jobs.program(id).map(Process::Program).or_else(|| ep.services().into_iter().find(|s| s == id).map(Process::Service))
}

/// Every process: the programs by name, then the services by name.
pub fn processes(ep: &Endpoint) -> Vec<Process> {
    let programs = ep.jobs.programs();
    let mut services = ep.services();
    services.sort();
    services.retain(|s| !programs.iter().any(|p| &p.name == s));
    programs.into_iter().map(Process::Program).chain(services.into_iter().map(Process::Service)).collect()
}

/// An absolute URL of the face on this endpoint (`path` from the face's root).
pub fn url_of(ep: &Endpoint, path: &str) -> String {
    url::join(&ep.url(), &format!("{PREFIX}{path}"))
}

/// A link object.
pub fn link(href: String, rel: &str, title: &str) -> Value {
    serde_json::json!({"href": href, "rel": rel, "type": "application/json", "title": title})
}

/// A refusal in the standard's terms: small, so that it travels as an
/// error until the operation's edge makes it an exception document
/// (`application/json`, as the standard's clients expect; `about:blank`
/// where no type of the standard's fits: the status says it).
#[derive(Debug)]
pub struct Exception {
    status: StatusCode,
    kind: &'static str,
    detail: String,
    retry_after: Option<Duration>,
}

impl Exception {
    pub fn new(status: StatusCode, kind: &'static str, detail: impl Into<String>) -> Exception {
        Exception { status, kind, detail: detail.into(), retry_after: None }
    }
}

/// The endpoint's refusal, keeping its status and when to retry.
impl From<HttpError> for Exception {
    fn from(e: HttpError) -> Exception {
        Exception { retry_after: e.retry_after(), ..Exception::new(e.status(), "about:blank", e.message()) }
    }
}

impl From<Exception> for Reply {
    fn from(e: Exception) -> Reply {
        let title = e.status.canonical_reason().unwrap_or("Error");
        let mut r = json(e.status, &serde_json::json!({"type": e.kind, "title": title, "status": e.status.as_u16(), "detail": e.detail}));
        if let Some(after) = e.retry_after {
            r.headers_mut().insert(http::header::RETRY_AFTER, HeaderValue::from(after.as_secs().max(1)));
        }
        crate::service::metrics::mark(&mut r, &e.detail);
        r
    }
}

/// An exception document as the answer.
pub fn exception(status: StatusCode, kind: &'static str, detail: impl Into<String>) -> Reply {
    Exception::new(status, kind, detail).into()
}

/// The endpoint's refusal as an exception document.
pub fn from_http(e: HttpError) -> Reply {
    Exception::from(e).into()
}

/// `?limit=N&offset=M` of a list: which slice to answer (all if not given).
pub fn page<B>(req: &http::Request<B>) -> Result<(usize, usize), HttpError> {
    let number = |name: &str| -> Result<Option<usize>, HttpError> {
        match query(req, name) {
            None => Ok(None),
            Some(v) => v
                .parse::<usize>()
                .map(Some)
                .map_err(|_| HttpError::new(StatusCode::BAD_REQUEST, ErrorClass::Arg, format!("{name}={v}: a whole number"))),
        }
    };
    let limit = number("limit")?.unwrap_or(usize::MAX);
    if limit == 0 {
        return Err(HttpError::new(StatusCode::BAD_REQUEST, ErrorClass::Arg, "limit=0: at least 1"));
    }
    Ok((number("offset")?.unwrap_or(0), limit))
}

/// The links of one page of a list at `path`: itself, and the next page if there is more.
pub fn page_links(ep: &Endpoint, path: &str, (offset, limit): (usize, usize), total: usize) -> Vec<Value> {
    let mut links = vec![link(url_of(ep, path), "self", "this document")];
    if limit != usize::MAX && offset.saturating_add(limit) < total {
        links.push(link(url_of(ep, &format!("{path}?offset={}&limit={limit}", offset + limit)), "next", "the next page"));
    }
    links
}
