//! `POST /programs/{name}/jobs`: start a job (answers 201 at once with its
//! URL), and `POST /programs/{name}/call`: start one, wait for its end and
//! answer its results, in one request.
//!
//! Body: `{"inputs": {NAME: VALUE, ...}}`. A `val` input is a JSON number or
//! string. A `file` input is sent by value (a string or number: the file's
//! text; `{"base64": "..."}`: its bytes) or by reference (`{"url": "..."}`:
//! the job pulls it, from an allowed address only: see [`fetch`]; a URL of
//! this endpoint's own files is copied from disk, not fetched).
//!
//! A CWL program's inputs are its CWL job object: see [`cwl::inputs`].
//!
//! A request carries at most `max_spawn_body` bytes and exactly the inputs
//! the template names; the job table holds at most `max_jobs` jobs, and
//! at most `max_jobs_per_key` of one key. The job belongs to the caller's
//! key.
//!
//! [`fetch`]: crate::jobs::fetch
//! [`cwl::inputs`]: crate::jobs::cwl::inputs

use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use http::{Request, StatusCode};
use hyper::body::Incoming;
use serde_json::{Map, Value};

use crate::error::ErrorClass;
use crate::jobs::cwl;
use crate::jobs::job::{Job, Plan};
use crate::jobs::safe_file::{make_private_dir, open_beneath};
use crate::jobs::stage::{Input, Source};
use crate::jobs::template::{Placement, Template};
use crate::jobs::{Program, Runs};
use crate::keys::Key;
use crate::service::guard;
use crate::service::jobs::refused;
use crate::service::jobs::results::{by_param, results, By};
use crate::service::reply::{error, json, read_body, HttpError, Reply};
use crate::service::Endpoint;
use crate::wire::url::decode_path;

pub async fn spawn(ep: &Endpoint, caller: &Key, name: &str, req: Request<Incoming>, call: bool) -> Reply {
    if let Err(e) = guard::json_body(req.headers()) {
        return e.into();
    }
    let program = match ep.jobs.found_program(name).map_err(refused) {
        Ok(p) => p,
        Err(e) => return e.into(),
    };
    let by = match by_param(&req) {
        Ok(by) => by,
        Err(e) if call => return e.into(),
        Err(_) => By::Value, // a spawn answers no results
    };
    let limit = format!(
        "the request (at most {} bytes: mpiws serve --max-spawn-body raises it; or upload large inputs with POST /files and pass their URL)",
        ep.config.max_spawn_body
    );
    let body = match read_body(ep, req.into_body(), usize::try_from(ep.config.max_spawn_body).unwrap_or(usize::MAX), &limit).await {
        Ok(b) => b,
        Err(e) => return e.into(),
    };
    let inputs = match serde_json::from_slice::<Value>(&body) {
        Ok(Value::Object(mut o)) => match o.remove("inputs").unwrap_or(Value::Object(Map::new())) {
            Value::Object(inputs) => inputs,
            _ => return error(StatusCode::BAD_REQUEST, ErrorClass::Arg, "'inputs' is an object of name: value"),
        },
        Ok(_) => return error(StatusCode::BAD_REQUEST, ErrorClass::Arg, "the body is {\"inputs\": {...}}"),
        Err(e) => return error(StatusCode::BAD_REQUEST, ErrorClass::Arg, format!("malformed JSON: {e}")),
    };
    let job = match start(ep, caller, program, inputs).await {
        Ok(job) => job,
        Err(e) => return e.into(),
    };
    if call {
        job.wait(Duration::MAX).await;
        return results(ep, &job, by).await;
    }
    json(StatusCode::CREATED, &job.describe(&ep.url()))
}

/// Start a job of `program` with `inputs` (each checked as its template
/// or CWL tool asks, URL inputs against the fetch rules), owned by
/// `caller`'s key; the job runs on in the background.
pub async fn start(ep: &Endpoint, caller: &Key, program: Arc<Program>, inputs: Map<String, Value>) -> Result<Arc<Job>, HttpError> {
    let bad = |message: String| HttpError::new(StatusCode::BAD_REQUEST, ErrorClass::Arg, message);
    let (plan, files) = match &program.runs {
        Runs::Template { template, .. } => check_inputs(ep, &program, template, inputs),
        Runs::Cwl(tool) => check_cwl(ep, cwl::inputs::check(tool, inputs)),
        Runs::CwlRunner { .. } => check_cwl(ep, cwl::delegate::check_job(inputs, ep.config.jobs.cwl_client_requirements)),
    }
    .map_err(bad)?;
    for input in &files {
        if let Source::Url(url) = &input.source {
            ep.jobs.fetcher.check(url).await.map_err(|why| bad(format!("{}: {why}", input.name)))?;
        }
    }
    let no_dir = |why: String| {
        HttpError::new(StatusCode::INTERNAL_SERVER_ERROR, ErrorClass::Other, format!("cannot make the job's directory: {why}"))
    };
    let job = ep.jobs.new_job(program, caller).map_err(|e| no_dir(e.message))?;
    ep.jobs.admit(job.clone()).map_err(refused)?;
    if let Err(e) = make_private_dir(&job.dir) {
        ep.jobs.forget(&job.id); // it never started: nothing to end
        return Err(no_dir(e.to_string()));
    }
    let forks = matches!(job.program.runs, Runs::CwlRunner { .. }).then(|| ep.jobs.cwl_forks()).flatten();
    tokio::spawn(job.clone().run(plan, files, ep.jobs.fetcher.clone(), job.url(&ep.url()), forks));
    Ok(job)
}

/// Every input the template asks for, each checked; nothing else.
fn check_inputs(
    ep: &Endpoint,
    program: &Program,
    template: &Template,
    mut inputs: Map<String, Value>,
) -> Result<(Plan, Vec<Input>), String> {
    let mut values = Vec::new();
    let mut files = Vec::new();
    for p in template.params.iter().filter(|p| p.is_input()) {
        let Some(v) = inputs.remove(&p.name) else {
            return Err(format!("missing input '{}' ({})", p.name, usage(program, template)));
        };
        if p.placement == Placement::Val {
            values.push((p.name.clone(), p.check_value(&v).map_err(|e| e.message)?));
            continue;
        }
        let not_a_file = || format!("input '{}' is a file: give its text, {{\"base64\": ...}} or {{\"url\": ...}}", p.name);
        let source = match v {
            Value::String(s) => Source::Bytes(s.into_bytes()),
            Value::Number(n) => Source::Bytes(n.to_string().into_bytes()),
            Value::Object(o) => match (o.get("base64"), o.get("url"), o.len()) {
                (Some(Value::String(b)), None, 1) => Source::Bytes(
                    base64::engine::general_purpose::STANDARD.decode(b).map_err(|e| format!("input '{}': bad base64: {e}", p.name))?,
                ),
                // A result's `{"url", "size"}` passes as it is: an output becomes an input.
                (None, Some(Value::String(u)), n) if n == 1 || (n == 2 && o.contains_key("size")) => {
                    reference(ep, u).map_err(|e| format!("input '{}': {e}", p.name))?
                }
                _ => return Err(not_a_file()),
            },
            _ => return Err(not_a_file()),
        };
        files.push(Input { name: format!("input '{}'", p.name), rel: p.name.clone(), source });
    }
    if let Some(extra) = inputs.keys().next() {
        return Err(format!("no input '{extra}' ({})", usage(program, template)));
    }
    Ok((Plan::Template(values), files))
}

/// A CWL job object, checked against the tool; its files' URLs checked as a template's are.
fn check_cwl(ep: &Endpoint, checked: Result<(Map<String, Value>, Vec<cwl::inputs::Stage>), String>) -> Result<(Plan, Vec<Input>), String> {
    let (job, stages) = checked?;
    let mut files = Vec::with_capacity(stages.len());
    for s in stages {
        let source = match s.from {
            cwl::inputs::From::Bytes(b) => Source::Bytes(b),
            cwl::inputs::From::Dir => Source::Dir,
            cwl::inputs::From::Location(url) => reference(ep, &url).map_err(|e| format!("{}: {e}", s.what))?,
        };
        files.push(Input { name: s.what, rel: s.rel, source });
    }
    Ok((Plan::Cwl(job), files))
}

fn usage(program: &Program, template: &Template) -> String {
    let ins: Vec<&str> = template.params.iter().filter(|p| p.is_input()).map(|p| p.name.as_str()).collect();
    format!("{} takes {}", program.name, if ins.is_empty() { "no inputs".to_string() } else { ins.join(", ") })
}

/// A URL input: a file of this endpoint is copied from where it lies.
fn reference(ep: &Endpoint, url: &str) -> Result<Source, String> {
    if !url.starts_with("http://") && !url.starts_with("https://") {
        return Err(format!("{url:?} is not an http:// or https:// URL"));
    }
    // Ours: under this endpoint's URL, with its pin if it has one (or none).
    let own = ep.url();
    let (own_base, own_pin) = own.split_once('#').map_or((own.as_str(), None), |(b, p)| (b, Some(p)));
    let (given, pin) = url.split_once('#').map_or((url, None), |(b, p)| (b, Some(p)));
    let ours = pin.is_none() || pin == own_pin;
    let Some(path) = given.strip_prefix(own_base).filter(|p| ours && p.starts_with('/')) else { return Ok(Source::Url(url.to_string())) };
    let local = match path.trim_start_matches('/').split('/').collect::<Vec<_>>()[..] {
        ["files", id] => ep.jobs.upload_path(id).and_then(|p| Some((p.parent()?.to_path_buf(), id.to_string()))),
        ["jobs", id, "files", ref rest @ ..] if !rest.is_empty() => {
            decode_path(rest).and_then(|rel| ep.jobs.job(id).and_then(|j| j.file_location(&rel)))
        }
        _ => None,
    };
    match local {
        Some((root, rel)) if open_beneath(&root, &rel).is_ok() => Ok(Source::Local { root, rel }),
        _ => Err(format!("{url} is not a file of this endpoint")),
    }
}
