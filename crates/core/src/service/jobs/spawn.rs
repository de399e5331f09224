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
//! In a session (`"session": ID` beside the inputs, a session of the
//! caller's: see [`session`]), a template's file parameter, input or
//! output, may name a file of the session: `{"session": NAME}`. The job
//! then runs in the session's directory and reads and writes its files
//! there. An input given by value or URL is written there, under the name
//! given beside it (`{"url": ..., "session": NAME}`) or else under its
//! parameter's name. No two parameters may name the same file.
//!
//! A request carries at most `max_spawn_body` bytes and exactly the inputs
//! the template names; the job table holds at most `max_jobs` jobs, and
//! at most `max_jobs_per_key` of one key. The job belongs to the caller's
//! key.
//!
//! [`fetch`]: crate::jobs::fetch
//! [`cwl::inputs`]: crate::jobs::cwl::inputs
//! [`session`]: crate::jobs::session

use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use http::{Request, StatusCode};
use hyper::body::Incoming;
use serde_json::{json, Map, Value};

use crate::error::ErrorClass;
use crate::jobs::cwl;
use crate::jobs::job::{Job, Plan};
use crate::jobs::safe_file::{inside, make_private_dir, open_beneath, size_of};
use crate::jobs::session::{plain_name, Names, Session};
use crate::jobs::stage::{Input, Source};
use crate::jobs::template::{Direction, Placement, Template};
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
    let (inputs, session) = match serde_json::from_slice::<Value>(&body) {
        Ok(Value::Object(mut o)) => match (o.remove("inputs").unwrap_or(Value::Object(Map::new())), o.remove("session")) {
            (Value::Object(inputs), None) => (inputs, None),
            (Value::Object(inputs), Some(Value::String(id))) => match ep.jobs.own_session(&id, caller).map_err(refused) {
                Ok(s) => (inputs, Some(s)),
                Err(e) => return e.into(),
            },
            (Value::Object(_), Some(_)) => return error(StatusCode::BAD_REQUEST, ErrorClass::Arg, "'session' is a session's id"),
            _ => return error(StatusCode::BAD_REQUEST, ErrorClass::Arg, "'inputs' is an object of name: value"),
        },
        Ok(_) => return error(StatusCode::BAD_REQUEST, ErrorClass::Arg, "the body is {\"inputs\": {...}}"),
        Err(e) => return error(StatusCode::BAD_REQUEST, ErrorClass::Arg, format!("malformed JSON: {e}")),
    };
    let job = match start(ep, caller, program, inputs, session).await {
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
/// `caller`'s key, in `session` if given (the caller's own); the job runs
/// on in the background.
pub async fn start(
    ep: &Endpoint,
    caller: &Key,
    program: Arc<Program>,
    inputs: Map<String, Value>,
    session: Option<Arc<Session>>,
) -> Result<Arc<Job>, HttpError> {
    let bad = |message: String| HttpError::new(StatusCode::BAD_REQUEST, ErrorClass::Arg, message);
    let (plan, files, names) = match (&program.runs, &session) {
        (Runs::Template { template, .. }, _) => check_inputs(ep, caller, &program, template, inputs, session.as_deref()),
        (_, Some(_)) => {
            Err(format!("{} is a CWL program: only template programs run in a session (pass a CWL tool's files by URL)", program.name))
        }
        (Runs::Cwl(tool), None) => check_cwl(ep, caller, cwl::inputs::check(tool, inputs)),
        (Runs::CwlRunner { .. }, None) => check_cwl(ep, caller, cwl::delegate::check_job(inputs, ep.config.jobs.cwl_client_requirements)),
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
    let job = ep.jobs.new_job(program, caller, session.map(|s| (s, names))).map_err(|e| no_dir(e.message))?;
    ep.jobs.admit(job.clone()).map_err(refused)?;
    if let Err(e) = make_private_dir(&job.dir) {
        ep.jobs.forget(&job.id); // it never started: nothing to end
        return Err(no_dir(e.to_string()));
    }
    let forks = matches!(job.program.runs, Runs::CwlRunner { .. }).then(|| ep.jobs.cwl_forks()).flatten();
    tokio::spawn(job.clone().run(plan, files, ep.jobs.fetcher.clone(), job.url(&ep.url()), forks));
    Ok(job)
}

/// Every input the template asks for, each checked; nothing else. In a
/// session, a file parameter may name a session file instead (an output
/// too): what each names is the third part.
fn check_inputs(
    ep: &Endpoint,
    caller: &Key,
    program: &Program,
    template: &Template,
    mut inputs: Map<String, Value>,
    session: Option<&Session>,
) -> Result<(Plan, Vec<Input>, Names), String> {
    let mut values = Vec::new();
    let mut staged = Vec::new();
    let mut names = Names::default();
    for p in template.params.iter().filter(|p| p.placement == Placement::File) {
        // An input by the URL of a file of the job's own session is that file, read where it lies.
        if let (Some(s), Some(url), Direction::In) = (session, inputs.get(&p.name).and_then(url_of_input), p.direction) {
            if let Some(name) = session_file_of(ep, s, url) {
                inputs.insert(p.name.clone(), json!({"session": name}));
            }
        }
        let Some(named) = inputs.get_mut(&p.name).and_then(take_session_name) else { continue };
        let alone = inputs.get(&p.name).and_then(Value::as_object).is_some_and(serde_json::Map::is_empty);
        let Some(session) = session else {
            if !alone {
                continue; // a session job's result passed on: its URL is what counts here
            }
            return Err(format!("input '{}' names a session file: spawn the job in a session (\"session\": ID)", p.name));
        };
        let name = named.map_err(|e| format!("input '{}': {e}", p.name))?;
        let path = inside(&session.files(), &name).ok_or_else(|| format!("input '{}': {name:?} is not a plain name", p.name))?;
        // `{"session": NAME}` alone: the file is there already (an output's: it will be).
        if alone {
            if p.is_input() && size_of(&path).is_none() {
                return Err(format!("input '{}': session {} has no file {name:?} (or it is not a regular file)", p.name, session.id));
            }
            inputs.remove(&p.name);
        }
        names.0.insert(p.name.clone(), name);
    }
    // Two inputs may read one file; a file written (an output's) is one parameter's only.
    let files: Vec<(&str, bool)> =
        template.params.iter().filter(|p| p.placement == Placement::File).map(|p| (names.of(&p.name), p.is_output())).collect();
    let shared = |(i, (n, written)): (usize, &(&str, bool))| files[..i].iter().any(|(m, w)| m == n && (*w || *written));
    if let Some((twice, _)) = files.iter().enumerate().find(|&e| shared(e)).map(|(_, f)| f) {
        return Err(format!(
            "an output of {} would write the file {twice:?} another of its parameters names: give each its own",
            program.name
        ));
    }
    for p in template.params.iter().filter(|p| p.is_input()) {
        if names.0.contains_key(&p.name) && !inputs.contains_key(&p.name) {
            continue; // a session file, read where it is
        }
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
                    reference(ep, caller, u).map_err(|e| format!("input '{}': {e}", p.name))?
                }
                _ => return Err(not_a_file()),
            },
            _ => return Err(not_a_file()),
        };
        staged.push(Input { name: format!("input '{}'", p.name), rel: names.of(&p.name).to_string(), source });
    }
    if let Some(extra) = inputs.keys().next() {
        return Err(format!("no input '{extra}' ({})", usage(program, template)));
    }
    Ok((Plan::Template(values), staged, names))
}

/// The session file a value names (`"session": NAME`, alone: a file that
/// is there; beside the file's source: where it is written), taken out of
/// it; the name, if it is one a client may give.
fn take_session_name(v: &mut Value) -> Option<Result<String, String>> {
    Some(match v.as_object_mut()?.remove("session")? {
        Value::String(name) => plain_name(&name).map(|()| name),
        _ => Err("{\"session\": NAME} names a session file by its name".to_string()),
    })
}

/// A CWL job object, checked against the tool; its files' URLs checked as a template's are.
fn check_cwl(
    ep: &Endpoint,
    caller: &Key,
    checked: Result<(Map<String, Value>, Vec<cwl::inputs::Stage>), String>,
) -> Result<(Plan, Vec<Input>, Names), String> {
    let (job, stages) = checked?;
    let mut files = Vec::with_capacity(stages.len());
    for s in stages {
        let source = match s.from {
            cwl::inputs::From::Bytes(b) => Source::Bytes(b),
            cwl::inputs::From::Dir => Source::Dir,
            cwl::inputs::From::Location(url) => reference(ep, caller, &url).map_err(|e| format!("{}: {e}", s.what))?,
        };
        files.push(Input { name: s.what, rel: s.rel, source });
    }
    Ok((Plan::Cwl(job), files, Names::default()))
}

fn usage(program: &Program, template: &Template) -> String {
    let ins: Vec<&str> = template.params.iter().filter(|p| p.is_input()).map(|p| p.name.as_str()).collect();
    format!("{} takes {}", program.name, if ins.is_empty() { "no inputs".to_string() } else { ins.join(", ") })
}

/// The URL a file input is given by (`{"url"}`, perhaps with its `size`), if it is.
fn url_of_input(v: &Value) -> Option<&str> {
    let o = v.as_object().filter(|o| o.len() == 1 || (o.len() == 2 && o.contains_key("size")))?;
    o.get("url")?.as_str()
}

/// The name of `session`'s file at `url`, if `url` is one: its URL in the
/// session (`{endpoint}/sessions/{id}/files/{name}`), or a job's of the
/// session (`{endpoint}/jobs/{job}/files/{param}`: a result passed on).
fn session_file_of(ep: &Endpoint, session: &Session, url: &str) -> Option<String> {
    let name = match own_path(ep, url)?.trim_start_matches('/').split('/').collect::<Vec<_>>()[..] {
        ["sessions", id, "files", name] if id == session.id => decode_path(&[name])?,
        ["jobs", id, "files", param] => {
            let job = ep.jobs.job(id).filter(|j| j.session.as_ref().is_some_and(|s| s.id == session.id))?;
            job.file_path(&decode_path(&[param])?)?.file_name()?.to_str()?.to_string()
        }
        _ => return None,
    };
    plain_name(&name).is_ok().then_some(name)
}

/// `url`'s path, if it is a URL of this endpoint (with its pin if it has one, or none).
fn own_path<'a>(ep: &Endpoint, url: &'a str) -> Option<&'a str> {
    let own = ep.url();
    let (own_base, own_pin) = own.split_once('#').map_or((own.as_str(), None), |(b, p)| (b, Some(p)));
    let (given, pin) = url.split_once('#').map_or((url, None), |(b, p)| (b, Some(p)));
    let ours = pin.is_none() || pin == own_pin;
    given.strip_prefix(own_base).filter(|p| ours && p.starts_with('/'))
}

/// A URL input: a file of this endpoint is copied from where it lies (a
/// session's only for its owner, whose key its URL asks).
fn reference(ep: &Endpoint, caller: &Key, url: &str) -> Result<Source, String> {
    if !url.starts_with("http://") && !url.starts_with("https://") {
        return Err(format!("{url:?} is not an http:// or https:// URL"));
    }
    let Some(path) = own_path(ep, url) else { return Ok(Source::Url(url.to_string())) };
    let local = match path.trim_start_matches('/').split('/').collect::<Vec<_>>()[..] {
        ["sessions", id, "files", ref rest @ ..] if !rest.is_empty() => {
            decode_path(rest).and_then(|rel| Some((ep.jobs.own_session(id, caller).ok()?.files(), rel)))
        }
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
