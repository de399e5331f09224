//! `GET /ogcapi/jobs[?limit=N&offset=M]`: the caller's key's jobs (every
//! job, to a key with `admin`), oldest first, then its services' runs, as
//! status documents;
//! `GET /ogcapi/jobs/{id}`: one's status. A job of another key does not
//! exist (404), as on the endpoint's own routes.

use std::sync::Arc;

use http::{Request, StatusCode};
use serde_json::{json, Value};

use super::results::no_such_job;
use super::status_info::status_info;
use super::{from_http, page, page_links, service_runs, url_of, Exception};
use crate::jobs::job::Job;
use crate::keys::Key;
use crate::rank::Status;
use crate::service::reply::{json, Reply};
use crate::service::Endpoint;

pub fn list<B>(ep: &Endpoint, caller: &Key, req: &Request<B>) -> Reply {
    let (offset, limit) = match page(req) {
        Ok(p) => p,
        Err(e) => return from_http(e),
    };
    let jobs = ep.jobs.jobs_of(caller);
    let runs = service_runs::list(ep, caller);
    let total = jobs.len() + runs.len();
    let infos = jobs.iter().map(|j| info(ep, j)).chain(runs.iter().map(|s| run_info(ep, s)));
    let page: Vec<Value> = infos.skip(offset).take(limit).collect();
    json(StatusCode::OK, &json!({"jobs": page, "links": page_links(ep, "/jobs", (offset, limit), total)}))
}

pub fn status(ep: &Endpoint, caller: &Key, id: &str) -> Reply {
    if service_runs::is_run(id) {
        return match service_runs::find(ep, caller, id) {
            Some(found) => json(StatusCode::OK, &run_info(ep, &service_runs::status_of(&found))),
            None => no_such_job(id).into(),
        };
    }
    match own(ep, caller, id) {
        Ok(job) => json(StatusCode::OK, &info(ep, &job)),
        Err(e) => e.into(),
    }
}

/// The caller's job `id`, or the standard's answer that there is none.
pub fn own(ep: &Endpoint, caller: &Key, id: &str) -> Result<Arc<Job>, Exception> {
    ep.jobs.own_job(id, caller).map_err(|_| no_such_job(id))
}

/// A job's status document.
pub fn info(ep: &Endpoint, job: &Job) -> Value {
    status_info(&job.id, &job.program.name, &job.state(), &url_of(ep, &format!("/jobs/{}", job.id)))
}

/// A service's run's status document.
pub fn run_info(ep: &Endpoint, s: &Status) -> Value {
    service_runs::info(s, &url_of(ep, &format!("/jobs/{}", s.domain)))
}
