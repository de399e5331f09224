//! `POST /programs/{name}`: a program's SOAP operations, as its WSDL
//! (`?wsdl`) describes them: `call`, `spawn`, `running`, `results`, `kill`.
//! Each does what the endpoint's JSON route of the same meaning does
//! (`spawn::start`, the job's state, results, kill), under the same key
//! (`jobs`), limits and fetch rules; a refusal is a SOAP fault with that
//! route's HTTP status ([`Fault`]).
//!
//! A request is read as it arrives ([`receive`]): its envelope at most
//! `max_spawn_body` bytes (counted against `max_buffered`), each binary
//! MTOM part written to disk as it comes (at most `max_upload`). Answers
//! give files by value (base64, inline) up to 16 MiB, else by URL;
//! `results` with `byReference` gives URLs. To a client that speaks MTOM
//! (its request was a package, or it accepts `multipart/related`), a
//! template's binary output files are answered as MTOM parts of any size,
//! streamed from disk.
//!
//! [`receive`]: super::receive

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use bytes::Bytes;
use http::{HeaderValue, Request, Response, StatusCode};
use hyper::body::Incoming;
use serde_json::Value;

use super::envelope::{self, Refusal, XOP};
use super::inputs::inputs;
use super::mtom;
use super::receive::receive;
use super::wsdl::{escape, xml_name};
use crate::body::{Chunks, Segment};
use crate::error::ErrorClass;
use crate::jobs::interface::{self, is_bytes};
use crate::jobs::job::Job;
use crate::jobs::safe_file::{open_regular, size_of};
use crate::jobs::session::Session;
use crate::jobs::Program;
use crate::keys::Key;
use crate::service::jobs::outputs::{output, Out, Transmission};
use crate::service::jobs::refused;
use crate::service::jobs::results::read_inline;
use crate::service::jobs::spawn::start;
use crate::service::reply::{HttpError, Reply};
use crate::service::{sessions, Endpoint};
use crate::wire::url;

/// A refusal as SOAP says it: its fault code, reason, HTTP status and error class.
#[derive(Debug)]
pub struct Fault {
    status: StatusCode,
    code: &'static str,
    reason: String,
    class: Option<ErrorClass>,
    /// When the caller may try again (`Retry-After`), as the JSON routes say it.
    retry_after: Option<Duration>,
}

impl From<HttpError> for Fault {
    fn from(e: HttpError) -> Fault {
        let code = if e.status().is_server_error() { "Receiver" } else { "Sender" };
        Fault { status: e.status(), code, reason: e.message().to_string(), class: Some(e.class()), retry_after: e.retry_after() }
    }
}

impl From<Refusal> for Fault {
    fn from(r: Refusal) -> Fault {
        // SOAP 1.2's HTTP binding: Sender 400; VersionMismatch and MustUnderstand 500.
        let status = if r.code == "Sender" { StatusCode::BAD_REQUEST } else { StatusCode::INTERNAL_SERVER_ERROR };
        Fault { status, code: r.code, reason: r.message, class: None, retry_after: None }
    }
}

impl From<Fault> for Reply {
    fn from(f: Fault) -> Reply {
        let class = f.class.map(|c| (c.code(), c.name()));
        let mut r = soap(envelope::fault(f.code, &f.reason, f.status.as_u16(), class));
        *r.status_mut() = f.status;
        if let Some(after) = f.retry_after {
            r.headers_mut().insert(http::header::RETRY_AFTER, HeaderValue::from(after.as_secs().max(1)));
        }
        crate::service::metrics::mark(&mut r, &f.reason);
        r
    }
}

pub fn sender(message: impl Into<String>) -> Fault {
    Fault { status: StatusCode::BAD_REQUEST, code: "Sender", reason: message.into(), class: Some(ErrorClass::Arg), retry_after: None }
}

/// An envelope answered 200.
fn soap(text: String) -> Reply {
    let mut r = Response::new(Chunks::new([bytes::Bytes::from(text)]));
    r.headers_mut().insert(http::header::CONTENT_TYPE, HeaderValue::from_static("application/soap+xml; charset=utf-8"));
    r
}

pub async fn program(ep: &Endpoint, caller: &Key, name: &str, req: Request<Incoming>) -> Reply {
    match operate(ep, caller, name, req).await {
        Ok(Answer { xml, parts }) if parts.is_empty() => answer_envelope(&xml),
        Ok(Answer { xml, parts }) => package(&xml, parts).await,
        Err(f) => f.into(),
    }
}

/// An operation's answer: its element, and the files to send as MTOM parts (Content-ID, path).
struct Answer {
    xml: String,
    parts: Vec<(String, PathBuf)>,
}

impl From<String> for Answer {
    fn from(xml: String) -> Answer {
        Answer { xml, parts: Vec::new() }
    }
}

/// An answer as an MTOM package: the envelope, then each file streamed from disk.
async fn package(body: &str, parts: Vec<(String, PathBuf)>) -> Reply {
    let boundary = mtom::boundary_for(&crate::jobs::new_id());
    let mut segments = vec![
        Segment::Bytes(Bytes::from(mtom::part_head(&boundary, XOP_ROOT, "root", true))),
        Segment::Bytes(Bytes::from(envelope::envelope(body))),
    ];
    for (cid, path) in parts {
        // Opened as any job file is; one that went away since is an empty part (its Include then names nothing).
        let Ok((file, meta)) = open_regular(&path).await else { continue };
        segments.push(Segment::Bytes(Bytes::from(mtom::part_head(&boundary, "application/octet-stream", &cid, false))));
        segments.push(Segment::File(file, meta.len()));
    }
    segments.push(Segment::Bytes(Bytes::from(mtom::closing(&boundary))));
    let media = format!(
        r#"multipart/related; type="application/xop+xml"; start="<root>"; start-info="application/soap+xml"; boundary="{boundary}""#
    );
    let mut r = Response::new(Chunks::segments(segments));
    r.headers_mut().insert(http::header::CONTENT_TYPE, HeaderValue::from_str(&media).expect("a valid header"));
    r
}

/// The root part's media type: the envelope, XOP-packaged.
const XOP_ROOT: &str = r#"application/xop+xml; charset=UTF-8; type="application/soap+xml""#;

/// An operation's answer (`body`: its element), in an envelope, 200.
pub fn answer_envelope(body: &str) -> Reply {
    soap(envelope::envelope(body))
}

async fn operate(ep: &Endpoint, caller: &Key, name: &str, req: Request<Incoming>) -> Result<Answer, Fault> {
    let program = ep.jobs.found_program(name).map_err(refused)?;
    let session = sessions::from_header(ep, caller, req.headers())?;
    let header = |h: http::header::HeaderName| req.headers().get(h).and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
    let content_type = header(http::header::CONTENT_TYPE);
    let mtom = envelope::media_type(&content_type).0 == "multipart/related"
        || header(http::header::ACCEPT).split(',').any(|m| envelope::media_type(m).0 == "multipart/related");
    let received = receive(ep, caller.id, &content_type, req.into_body()).await?;
    let answered = match in_session(ep, caller, session, received.request.session.as_deref()) {
        Ok(session) => answer(ep, caller, program, &received.request, session, mtom).await,
        Err(f) => Err(f),
    };
    // The parts' files are the job's inputs until it has its own copies.
    match &answered {
        Ok((_, Some(job))) => received.discard_after(job.clone()),
        _ => received.discard().await,
    }
    answered.map(|(answer, _)| answer)
}

/// The session a job runs in: the one the HTTP header `Mpiws-Session`
/// names (`by_http`) or the envelope's `session` header block, not two.
fn in_session(ep: &Endpoint, caller: &Key, by_http: Option<Arc<Session>>, by_soap: Option<&str>) -> Result<Option<Arc<Session>>, Fault> {
    match (by_http, by_soap) {
        (Some(s), Some(id)) if s.id != id => Err(sender("the Mpiws-Session header and the session header block name two sessions")),
        (Some(s), _) => Ok(Some(s)),
        (None, Some(id)) => Ok(Some(sessions::own(ep, caller, id)?)),
        (None, None) => Ok(None),
    }
}

/// The operation's answer, and the job it started, if it started one.
async fn answer(
    ep: &Endpoint,
    caller: &Key,
    program: Arc<Program>,
    request: &envelope::Request,
    session: Option<Arc<Session>>,
    mtom: bool,
) -> Result<(Answer, Option<Arc<Job>>), Fault> {
    let op = &request.operation;
    let tns = format!("urn:mpiws:program:{}", program.name);
    if op.ns != tns {
        return Err(sender(format!("the operation {{{}}}{} is not of this program's namespace, {tns}", op.ns, op.name)));
    }
    let job_of = |op: &super::xml::Element| -> Result<Arc<Job>, Fault> {
        let id = op.child("jobId").map(|j| j.text.trim().to_string()).ok_or_else(|| sender(format!("{} takes a jobId", op.name)))?;
        Ok(ep.jobs.own_job(&id, caller).map_err(refused)?)
    };
    let answer = |body: String| format!(r#"<p:{}Response xmlns:p="{tns}">{body}</p:{}Response>"#, op.name, op.name);
    match op.name.as_str() {
        "call" | "spawn" => {
            let given = inputs(&program, op, &request.attachments).map_err(sender)?;
            let job = start(ep, caller, program, given, session).await?;
            if op.name == "spawn" {
                let xml = answer(format!("<p:jobId>{}</p:jobId><p:url>{}</p:url>", job.id, escape(&job.url(&ep.url()))));
                return Ok((xml.into(), Some(job)));
            }
            job.wait(Duration::MAX).await;
            let (xml, parts) = results(ep, &job, Transmission::Value, mtom).await;
            Ok((Answer { xml: answer(xml), parts }, Some(job)))
        }
        "running" => Ok((answer(state(job_of(op)?.as_ref(), true)).into(), None)),
        "results" => {
            let job = job_of(op)?;
            if !job.state().state.ended() {
                let message = format!("job {} has not ended: ask running until it has", job.id);
                return Err(HttpError::new(StatusCode::CONFLICT, ErrorClass::Arg, message).into());
            }
            let by_reference = op.child("byReference").is_some_and(|b| matches!(b.text.trim(), "true" | "1"));
            let how = if by_reference { Transmission::Reference } else { Transmission::Value };
            let (xml, parts) = results(ep, &job, how, mtom).await;
            Ok((Answer { xml: answer(xml), parts }, None))
        }
        "kill" => {
            let job = job_of(op)?;
            job.end().await;
            Ok((answer(state(&job, true)).into(), None))
        }
        other => Err(sender(format!("{} has no operation {other} (it has call, spawn, running, results, kill)", program.name))),
    }
}

/// A job's state, as `running` and `kill` answer it (`running`: with that
/// element, which the results have not).
fn state(job: &Job, running: bool) -> String {
    let s = job.state();
    let mut x = format!("<p:jobId>{}</p:jobId><p:state>{}</p:state>", job.id, s.state.name());
    if running {
        x += &format!("<p:running>{}</p:running>", !s.state.ended());
    }
    if let Some(code) = s.exit_code {
        x += &format!("<p:exitCode>{code}</p:exitCode>");
    }
    if let Some(e) = &s.error {
        x += &format!("<p:error>{}</p:error>", escape(e));
    }
    x
}

/// An ended job's results: its state, outputs, stdout and stderr; and
/// (`mtom`: by value, to a client that reads MTOM) the files to send as
/// parts: a template's binary outputs, of any size.
async fn results(ep: &Endpoint, job: &Job, how: Transmission, mtom: bool) -> (String, Vec<(String, PathBuf)>) {
    let mut x = state(job, false);
    let mut parts = Vec::new();
    x += "<p:outputs>";
    let (_, ports) = interface::of(&job.program);
    for port in &ports {
        let path = job.output_path(&port.name);
        if mtom && how == Transmission::Value && job.program.template().is_some() && is_bytes(&port.schema) && size_of(&path).is_some() {
            let cid = format!("{}@{}", url::percent_encode(&port.name), job.id);
            let include = format!(r#"<xop:Include xmlns:xop="{XOP}" href="cid:{cid}"/>"#);
            x += &choice(&xml_name(&port.name), "value", &include);
            parts.push((cid, path));
        } else if let Some(out) = output(ep, job, &port.name, how).await {
            x += &element(&xml_name(&port.name), port.file, out);
        }
    }
    x += "</p:outputs>";
    let base = job.url(&ep.url());
    for (name, path) in [("stdout", job.stdout_path()), ("stderr", job.stderr_path())] {
        let link = || choice(name, "url", &escape(&url::join(&base, &format!("/{name}"))));
        if crate::jobs::safe_file::size_of(&path).is_none() {
            continue;
        }
        x += &match (how, read_inline(&path).await) {
            (Transmission::Value, Some(bytes)) => choice(name, "value", &escape(&String::from_utf8_lossy(&bytes))),
            _ => link(),
        };
    }
    (x, parts)
}

/// A file's element: its `value` or its `url` (`which`), `text` already XML.
fn choice(name: &str, which: &str, text: &str) -> String {
    format!("<p:{name}><p:{which}>{text}</p:{which}></p:{name}>")
}

/// One output's element(s): a file's `value` or `url`, or a value's text; a list repeated.
fn element(name: &str, file: bool, out: Out) -> String {
    let text = |v: &Value| match v {
        Value::String(s) => escape(s),
        other => escape(&other.to_string()),
    };
    match out {
        Out::Link { href, .. } => choice(name, "url", &escape(&href)),
        Out::Bytes { bytes, text: true, .. } => choice(name, "value", &escape(&String::from_utf8_lossy(&bytes))),
        Out::Bytes { bytes, .. } => choice(name, "value", &base64::engine::general_purpose::STANDARD.encode(bytes)),
        Out::Value(Value::Array(items)) => items
            .into_iter()
            .map(|item| match item.get("href").and_then(Value::as_str) {
                Some(href) => element(name, file, Out::Link { href: href.to_string(), media: String::new() }),
                None => element(name, file, Out::Value(item)),
            })
            .collect(),
        Out::Value(v) if file => choice(name, "value", &text(&v)),
        Out::Value(v) => format!("<p:{name}>{}</p:{name}>", text(&v)),
    }
}
