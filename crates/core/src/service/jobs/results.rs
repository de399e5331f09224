//! `GET /jobs/{id}/results[?by=value|reference]`: an ended job's outputs,
//! stdout and stderr. By value, an `int`/`float` output is a JSON number, a
//! `string`/`xml` one its text, a `binary` one `{"base64": ...}`; by
//! reference (and, by value, for a file over 16 MiB) `{"url", "size"}`, a
//! URL to download it from (or to pass to another job as its input).
//! Only to the job's own key, or one with `admin` (404 to any other); the
//! URLs themselves are capabilities, to be handed on. A CWL program's
//! outputs are its output object, files as CWL File objects whose
//! `location` is their URL (by value or by reference alike).

use std::path::Path;

use base64::Engine;
use http::{Request, StatusCode};
use hyper::body::Incoming;
use serde_json::{json, Map, Value};

use crate::error::ErrorClass;
use crate::jobs::job::Job;
use crate::jobs::safe_file::{open_regular, size_of};
use crate::jobs::template::Param;
use crate::keys::Key;
use crate::service::jobs::refused;
use crate::service::reply::{error, json, query, HttpError, Reply};
use crate::service::Endpoint;
use crate::wire::url;

/// Larger files are given by reference even when asked by value.
pub(crate) const INLINE_MAX: u64 = 16 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum By {
    Value,
    Reference,
}

pub fn by_param<B>(req: &Request<B>) -> Result<By, HttpError> {
    match query(req, "by") {
        None | Some("value") => Ok(By::Value),
        Some("reference") => Ok(By::Reference),
        Some(other) => Err(HttpError::new(StatusCode::BAD_REQUEST, ErrorClass::Arg, format!("by={other}: it is by=value or by=reference"))),
    }
}

pub async fn results_route(ep: &Endpoint, caller: &Key, id: &str, req: Request<Incoming>) -> Reply {
    let job = match ep.jobs.own_job(id, caller).map_err(refused) {
        Ok(job) => job,
        Err(e) => return e.into(),
    };
    let by = match by_param(&req) {
        Ok(by) => by,
        Err(e) => return e.into(),
    };
    if !job.state().state.ended() {
        return error(StatusCode::CONFLICT, ErrorClass::Arg, format!("job {id} has not ended: wait with GET /jobs/{id}?wait=SECONDS"));
    }
    results(ep, &job, by).await
}

pub async fn results(ep: &Endpoint, job: &Job, by: By) -> Reply {
    let base = job.url(&ep.url());
    let mut outputs = Map::new();
    match job.program.template() {
        Some(template) => {
            for p in template.params.iter().filter(|p| p.is_output()) {
                let url = url::join(&base, &format!("/files/{}", p.name));
                let mut entry = entry(&url, &job.output_path(&p.name), Some(p), by).await;
                if let (Some(o), Some(_)) = (entry.as_object_mut().filter(|o| o.contains_key("url")), &job.session) {
                    o.insert("session".into(), Value::String(job.names.of(&p.name).to_string()));
                    // its name there
                }
                outputs.insert(p.name.clone(), entry);
            }
        }
        // A CWL job's output object (empty unless it ended well): its files are always by reference.
        None => outputs = job.outputs.get().cloned().unwrap_or_default(),
    }
    let s = job.state();
    json(
        StatusCode::OK,
        &json!({
            "id": job.id, "program": job.program.name, "state": s.state, "exit_code": s.exit_code, "error": s.error,
            "outputs": outputs,
            "stdout": entry(&url::join(&base, "/stdout"), &job.stdout_path(), None, by).await,
            "stderr": entry(&url::join(&base, "/stderr"), &job.stderr_path(), None, by).await,
        }),
    )
}

/// One file's result: its value, or where to fetch it; null if the job made none.
async fn entry(url: &str, path: &Path, param: Option<&Param>, by: By) -> Value {
    let Some(size) = size_of(path) else { return Value::Null };
    let reference = json!({"url": url, "size": size});
    if by == By::Reference || size > INLINE_MAX {
        return reference;
    }
    let Some(bytes) = read_inline(path).await else { return reference };
    let Some(p) = param else { return Value::String(String::from_utf8_lossy(&bytes).into_owned()) };
    match p.read_value(&bytes) {
        Ok(Some(v)) => v,
        Ok(None) => json!({"base64": base64::engine::general_purpose::STANDARD.encode(&bytes)}),
        Err(e) => json!({"url": url, "size": size, "error": e.message}),
    }
}

/// A job file's bytes, read as a regular file (never through a symlink),
/// if it is at most INLINE_MAX.
pub(crate) async fn read_inline(path: &Path) -> Option<Vec<u8>> {
    use tokio::io::AsyncReadExt;
    let (file, meta) = open_regular(path).await.ok()?;
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len().min(INLINE_MAX)).ok()?);
    file.take(INLINE_MAX + 1).read_to_end(&mut bytes).await.ok()?;
    (bytes.len() as u64 <= INLINE_MAX).then_some(bytes)
}
