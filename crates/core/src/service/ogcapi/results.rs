//! A job's results in the standard's forms: `GET /ogcapi/jobs/{id}/results`
//! (a results document), and what a synchronous execute answers (the
//! document, or raw: the one output's own bytes, or `multipart/related`
//! of several).
//!
//! Rules:
//! - Only a job that succeeded has results (a service's run: its
//!   `result`, a value). Before it ends: 404
//!   `result-not-ready`; failed or lost: 500 `job-failed`, saying why.
//! - A template's output by value is its value (`int`, `float`: a number,
//!   `string`: text), or a qualified value (`xml`: `{"value", "mediaType"}`,
//!   `binary`: `{"value": BASE64, "encoding": "base64", ...}`); by
//!   reference, and by value above 16 MiB (as on the endpoint's own
//!   routes), a link `{"href", "type"}` to the job's file (of a job in a
//!   session: the session's file, where it outlives the job). An output the
//!   program did not write is left out.
//! - A CWL tool's Files are links (their `location`); its other values
//!   are as the tool gave them.
//! - Raw, all by reference: 204 with a `Link` header per output (its rel
//!   the output's id). Raw, one output: its bytes (text as `text/plain`).
//!   Raw, several: one part each, `Content-ID` its id; a reference is a part
//!   with `Content-Location` and no body.

use base64::Engine;
use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode};
use serde_json::{json, Map, Value};

use super::request::{Response as Form, Wanted};
use super::{exception, service_runs, Exception, JOB_FAILED, NO_SUCH_JOB, RESULT_NOT_READY};
use crate::body::Chunks;
use crate::jobs::job::{Job, Phase};
use crate::keys::Key;
use crate::rank::{InstanceState, Status};
use crate::service::jobs::outputs::{output, output_names, Out, Transmission};
use crate::service::reply::{json, Reply};
use crate::service::Endpoint;
use crate::wire::url;

/// `GET /ogcapi/jobs/{id}/results`: every output, by value, as a document.
pub async fn results(ep: &Endpoint, caller: &Key, id: &str) -> Reply {
    if service_runs::is_run(id) {
        return match service_runs::find(ep, caller, id) {
            Some(found) => {
                let wanted = Wanted { outputs: vec![("result".into(), Transmission::Value)], response: service_runs::form_of(id) };
                answer_run(&service_runs::status_of(&found), &wanted)
            }
            None => no_such_job(id).into(),
        };
    }
    let job = match super::jobs::own(ep, caller, id) {
        Ok(job) => job,
        Err(e) => return e.into(),
    };
    // As its execution asked (one that came another way, or before a restart: every output, as a document).
    let asked = job.results_asked.get().and_then(|v| serde_json::from_value::<Wanted>(v.clone()).ok());
    let wanted = asked.unwrap_or_else(|| Wanted {
        outputs: output_names(&job).into_iter().map(|n| (n, Transmission::Value)).collect(),
        response: Form::Document,
    });
    answer(ep, &job, &wanted).await
}

/// The answer for an ended job's outputs, as `wanted`.
pub async fn answer(ep: &Endpoint, job: &Job, wanted: &Wanted) -> Reply {
    let s = job.state();
    match s.state {
        Phase::Done => {}
        p if !p.ended() => return not_ready(&job.id, p.name()),
        _ => {
            let code = s.exit_code.map(|c| format!("the program ended with exit code {c}"));
            let why = s.error.clone().or(code).unwrap_or_else(|| s.state.name().into());
            let stderr = url::join(&job.url(&ep.url()), "/stderr");
            return failed(&job.id, &format!("{}: {why} (its stderr: {stderr})", s.state.name()));
        }
    }
    let mut outs = Vec::new();
    for (name, how) in &wanted.outputs {
        if let Some(out) = output(ep, job, name, *how).await {
            outs.push((name.clone(), out));
        }
    }
    give(outs, wanted.response)
}

/// The answer for a service's run: its one output, `result`, is a value
/// (by reference too: it is no file).
pub fn answer_run(s: &Status, wanted: &Wanted) -> Reply {
    match s.state {
        InstanceState::Done => {}
        InstanceState::Starting | InstanceState::Running => return not_ready(&s.domain, "running"),
        InstanceState::Failed => {
            let why = s.error.as_ref().map_or("the service failed".into(), |e| format!("{}: {}", e.name, e.message));
            return failed(&s.domain, &format!("failed: {why}"));
        }
        InstanceState::Cancelled => return failed(&s.domain, "was cancelled"),
    }
    let outs = wanted.outputs.iter().map(|(name, _)| (name.clone(), Out::Value(s.result.clone().unwrap_or(Value::Null)))).collect();
    give(outs, wanted.response)
}

fn give(outs: Vec<(String, Out)>, form: Form) -> Reply {
    match form {
        Form::Document => json(StatusCode::OK, &document(&outs)),
        Form::Raw => raw(outs),
    }
}

fn not_ready(id: &str, state: &str) -> Reply {
    exception(StatusCode::NOT_FOUND, RESULT_NOT_READY, format!("job {id} is {state}: it has no results yet"))
}

fn failed(id: &str, how: &str) -> Reply {
    exception(StatusCode::INTERNAL_SERVER_ERROR, JOB_FAILED, format!("job {id} {how}"))
}

pub fn no_such_job(id: &str) -> Exception {
    Exception::new(StatusCode::NOT_FOUND, NO_SUCH_JOB, format!("no job {id:?} here"))
}

/// The results document.
pub fn document(outs: &[(String, Out)]) -> Value {
    let mut d = Map::new();
    for (name, out) in outs {
        let v = match out {
            Out::Value(v) => v.clone(),
            Out::Bytes { bytes, media, text: true } => json!({"value": String::from_utf8_lossy(bytes), "mediaType": media}),
            Out::Bytes { bytes, media, text: false } => {
                json!({"value": base64::engine::general_purpose::STANDARD.encode(bytes), "encoding": "base64", "mediaType": media})
            }
            Out::Link { href, media } => json!({"href": href, "type": media}),
        };
        d.insert(name.clone(), v);
    }
    Value::Object(d)
}

/// An output's own bytes and their media type (None: a link).
fn own_bytes(out: Out) -> Option<(Vec<u8>, String)> {
    match out {
        Out::Value(Value::String(s)) => Some((s.into_bytes(), "text/plain; charset=utf-8".into())),
        Out::Value(Value::Number(n)) => Some((n.to_string().into_bytes(), "text/plain".into())),
        Out::Value(v) => Some((serde_json::to_vec(&v).expect("JSON"), "application/json".into())),
        Out::Bytes { bytes, media, .. } => Some((bytes, media.to_string())),
        Out::Link { .. } => None,
    }
}

/// The raw answer: see the module's rules.
pub fn raw(outs: Vec<(String, Out)>) -> Reply {
    if outs.iter().all(|(_, o)| matches!(o, Out::Link { .. })) {
        let mut r = Response::new(Chunks::empty());
        *r.status_mut() = StatusCode::NO_CONTENT;
        for (name, out) in &outs {
            if let Out::Link { href, media } = out {
                if let Ok(h) = HeaderValue::from_str(&format!("<{href}>; rel=\"{name}\"; type=\"{media}\"")) {
                    r.headers_mut().append(http::header::LINK, h);
                }
            }
        }
        return r;
    }
    if outs.len() == 1 {
        let (_, out) = outs.into_iter().next().expect("one");
        let (bytes, media) = own_bytes(out).expect("not a link: all links were answered above");
        return with_type(StatusCode::OK, Chunks::new([Bytes::from(bytes)]), &media);
    }
    let boundary = format!("mpiws-{}", crate::jobs::new_id());
    let mut body = Vec::new();
    let mut root_type = String::new();
    for (name, out) in outs {
        body.extend_from_slice(format!("--{boundary}\r\nContent-ID: <{name}>\r\n").as_bytes());
        let media = match out {
            Out::Link { href, media } => {
                body.extend_from_slice(format!("Content-Type: {media}\r\nContent-Location: {href}\r\n\r\n").as_bytes());
                media
            }
            out => {
                let (bytes, media) = own_bytes(out).expect("not a link");
                body.extend_from_slice(format!("Content-Type: {media}\r\n\r\n").as_bytes());
                body.extend_from_slice(&bytes);
                media
            }
        };
        if root_type.is_empty() {
            root_type = media;
        }
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    // RFC 2387: `type` is the root part's (the first) media type.
    let root = root_type.split(';').next().unwrap_or_default().trim().to_string();
    with_type(StatusCode::OK, Chunks::new([Bytes::from(body)]), &format!("multipart/related; type=\"{root}\"; boundary={boundary}"))
}

fn with_type(status: StatusCode, body: Chunks, media: &str) -> Reply {
    let mut r = Response::new(body);
    *r.status_mut() = status;
    if let Ok(v) = HeaderValue::from_str(media) {
        r.headers_mut().insert(http::header::CONTENT_TYPE, v);
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(r: Reply) -> Vec<u8> {
        use http_body_util::BodyExt;
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        rt.block_on(async { r.into_body().collect().await.unwrap().to_bytes().to_vec() })
    }

    fn outs() -> Vec<(String, Out)> {
        vec![
            ("n".into(), Out::Value(json!(42))),
            ("s".into(), Out::Value(json!("teststring"))),
            ("b".into(), Out::Bytes { bytes: vec![0, 1, 2], media: "application/octet-stream", text: false }),
            ("x".into(), Out::Bytes { bytes: b"<a/>".to_vec(), media: "application/xml", text: true }),
            ("f".into(), Out::Link { href: "http://h/jobs/j/files/f".into(), media: "text/plain".into() }),
        ]
    }

    #[test]
    fn a_document_holds_values_qualified_values_and_links() {
        assert_eq!(
            document(&outs()),
            json!({"n": 42, "s": "teststring", "b": {"value": "AAEC", "encoding": "base64", "mediaType": "application/octet-stream"},
                   "x": {"value": "<a/>", "mediaType": "application/xml"}, "f": {"href": "http://h/jobs/j/files/f", "type": "text/plain"}})
        );
    }

    #[test]
    fn raw_is_one_outputs_bytes_several_parts_or_links_alone() {
        let one = raw(vec![("s".into(), Out::Value(json!("teststring")))]);
        assert_eq!((one.status(), one.headers()["content-type"].to_str().unwrap()), (StatusCode::OK, "text/plain; charset=utf-8"));
        assert_eq!(body(one), b"teststring");
        let several = raw(outs());
        let ct = several.headers()["content-type"].to_str().unwrap().to_string();
        let boundary = ct.strip_prefix("multipart/related; type=\"text/plain\"; boundary=").expect("typed as its first part").to_string();
        let text = String::from_utf8_lossy(&body(several)).into_owned();
        assert_eq!(text.matches(&format!("--{boundary}\r\n")).count(), 5);
        assert!(text.ends_with(&format!("--{boundary}--\r\n")));
        assert!(text.contains("Content-ID: <s>\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nteststring\r\n"), "{text}");
        assert!(text.contains("Content-ID: <f>\r\nContent-Type: text/plain\r\nContent-Location: http://h/jobs/j/files/f\r\n\r\n\r\n"));
        let links = raw(vec![("f".into(), Out::Link { href: "http://h/f".into(), media: "text/plain".into() })]);
        assert_eq!(links.status(), StatusCode::NO_CONTENT);
        assert_eq!(links.headers()["link"], "<http://h/f>; rel=\"f\"; type=\"text/plain\"");
    }
}
