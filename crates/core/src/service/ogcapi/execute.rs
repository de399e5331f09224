//! `POST /ogcapi/processes/{id}/execution`: run a process. The request
//! (read by [`request`]) becomes the inputs of a job started as `POST
//! /programs/{name}/jobs` starts one, owned by the caller's key, under the
//! same limits (`max_spawn_body`, `max_jobs`, the disk quota, the fetch
//! rules).
//!
//! A service runs as a domain of one rank ([`service_runs`]).
//!
//! With `Prefer: respond-async` (or `mode: async`): 201 at once, its
//! status document, `Location` its status URL. Otherwise it waits for the
//! job's end and answers its results as asked ([`results::answer`]), with
//! `Link: <its job>; rel="monitor"`; the job stays listed until dismissed
//! or expired, and its results answer later as this answer did.
//!
//! [`request`]: super::request
//! [`service_runs`]: super::service_runs
//! [`results::answer`]: super::results::answer

use std::time::Duration;

use http::{HeaderMap, HeaderValue, Request, StatusCode};
use hyper::body::Incoming;
use serde_json::Value;

use super::jobs::{info, run_info};
use super::{exception, from_http, process, request, results, service_runs, url_of, Process, NO_SUCH_PROCESS};
use crate::keys::Key;
use crate::service::guard;
use crate::service::jobs::spawn::start;
use crate::service::reply::{json, read_body, Reply};
use crate::service::{sessions, Endpoint};

pub async fn execute(ep: &Endpoint, caller: &Key, id: &str, req: Request<Incoming>) -> Reply {
    if let Err(e) = guard::json_body(req.headers()) {
        return from_http(e);
    }
    let Some(process) = process(ep, id) else {
        return exception(StatusCode::NOT_FOUND, NO_SUCH_PROCESS, format!("no process {id:?} is deployed here"));
    };
    let prefers_async = prefers_async(req.headers());
    let session = match sessions::from_header(ep, caller, req.headers()) {
        Ok(s) => s,
        Err(e) => return from_http(e),
    };
    let limit = format!(
        "the execute request (at most {} bytes: mpiws serve --max-spawn-body raises it; or give large inputs by reference, {{\"href\": URL}})",
        ep.config.max_spawn_body
    );
    let body = match read_body(ep, req.into_body(), usize::try_from(ep.config.max_spawn_body).unwrap_or(usize::MAX), &limit).await {
        Ok(b) => b,
        Err(e) => return from_http(e),
    };
    let bad = |detail: String| exception(StatusCode::BAD_REQUEST, "about:blank", detail);
    let asked = match serde_json::from_slice::<Value>(&body) {
        Ok(v) => match request::read(&process, &v) {
            Ok(asked) => asked,
            Err(why) => return bad(why),
        },
        Err(e) => return bad(format!("malformed JSON: {e}")),
    };
    let run_async = prefers_async || asked.asks_async;
    let started = |status: Value, id: &str| {
        let mut r = json(StatusCode::CREATED, &status);
        if let Ok(at) = HeaderValue::from_str(&url_of(ep, &format!("/jobs/{id}"))) {
            r.headers_mut().insert(http::header::LOCATION, at);
        }
        if prefers_async {
            r.headers_mut().insert("preference-applied", HeaderValue::from_static("respond-async"));
        }
        r
    };
    match process {
        Process::Program(program) => {
            let job = match start(ep, caller, program, asked.inputs, session).await {
                Ok(job) => job,
                Err(e) => return from_http(e),
            };
            let _ = job.results_asked.set(serde_json::to_value(&asked.wanted).expect("JSON"));
            if run_async {
                return started(info(ep, &job), &job.id);
            }
            job.wait(Duration::MAX).await;
            monitored(results::answer(ep, &job, &asked.wanted).await, &url_of(ep, &format!("/jobs/{}", job.id)))
        }
        Process::Service(_) if session.is_some() => {
            exception(StatusCode::BAD_REQUEST, "about:blank", format!("{id} is a service: only programs' jobs run in a session"))
        }
        Process::Service(service) => {
            let instance = match service_runs::start(ep, caller, &service, asked.inputs, asked.wanted.response) {
                Ok(i) => i,
                Err(e) => return e.into(),
            };
            if run_async {
                return started(run_info(ep, &instance.status()), &instance.binding.domain);
            }
            let answer = results::answer_run(&service_runs::ended(&instance).await, &asked.wanted);
            monitored(answer, &url_of(ep, &format!("/jobs/{}", instance.binding.domain)))
        }
    }
}

/// A synchronous execution's results, and where its job is (the standard's
/// `Link: <URL>; rel="monitor"`, on success, before any output's).
fn monitored(mut r: Reply, job: &str) -> Reply {
    if r.status().is_success() {
        if let Ok(v) = HeaderValue::from_str(&format!("<{job}>; rel=\"monitor\"")) {
            let outputs: Vec<HeaderValue> = r.headers().get_all(http::header::LINK).iter().cloned().collect();
            r.headers_mut().remove(http::header::LINK);
            r.headers_mut().append(http::header::LINK, v);
            for o in outputs {
                r.headers_mut().append(http::header::LINK, o);
            }
        }
    }
    r
}

/// Whether a `Prefer` header asks `respond-async` (RFC 7240: tokens
/// separated by commas, parameters after `;`, any spacing).
fn prefers_async(headers: &HeaderMap) -> bool {
    headers
        .get_all("prefer")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|p| p.split(';').next().is_some_and(|t| t.trim().eq_ignore_ascii_case("respond-async")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn respond_async_is_read_from_any_prefer_header() {
        let with = |values: &[&str]| {
            let mut h = HeaderMap::new();
            for v in values {
                h.append("prefer", HeaderValue::from_str(v).unwrap());
            }
            prefers_async(&h)
        };
        assert!(with(&["respond-async "]));
        assert!(with(&["return=minimal, Respond-Async; wait=10"]));
        assert!(with(&["handling=strict", "respond-async"]));
        assert!(!with(&["respond-sync"]) && !with(&[]) && !with(&["respond-asyncx"]));
    }
}
