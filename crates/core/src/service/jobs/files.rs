//! Files by reference. `POST /files` uploads a file (the raw body, of any
//! size, written to disk as it arrives) and answers its URL, to give a job
//! as an input; `GET /files/{id}` and `DELETE /files/{id}`. A job's own
//! files: `GET /jobs/{id}/files/{name}` (a CWL job's: `/files/{path...}`),
//! `GET /jobs/{id}/stdout|stderr`.
//!
//! An upload belongs to the key that uploaded it: only that key (or one
//! with `admin`) may remove it; to another, it does not exist (404). Its
//! bytes, like a job's files, are read by URL alone (a capability).
//!
//! An upload is at most `max_upload` bytes and counts against the disk
//! quota (507 when full). Files are served only if they are regular files,
//! never through a symlink a job may have put in their place.

use std::path::Path;

use http::{Request, Response, StatusCode};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use serde_json::json;
use tokio::io::AsyncWriteExt;

use crate::body::Chunks;
use crate::error::ErrorClass;
use crate::jobs::new_id;
use crate::jobs::safe_file::{create_new, open_beneath, open_regular};
use crate::keys::{Key, KeyId};
use crate::service::jobs::{insufficient_storage, refused};
use crate::service::reply::{error, json, no_content, stalled, HttpError, Reply};
use crate::service::Endpoint;
use crate::wire::url;
use crate::wire::url::decode_path;

pub async fn upload(ep: &Endpoint, caller: &Key, req: Request<Incoming>) -> Reply {
    let max = ep.config.jobs.max_upload;
    let announced = req.headers().get(http::header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if announced.is_some_and(|n| n > max) {
        return too_large(max).into();
    }
    if let Err(e) = ep.jobs.upload_room(caller).map_err(refused) {
        return e.into();
    }
    let id = new_id();
    let dir = match ep.jobs.uploads_dir() {
        Ok(dir) => dir,
        Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, ErrorClass::Other, format!("cannot store the upload: {}", e.message)),
    };
    let (part, path) = (dir.join(format!("{id}.part")), dir.join(&id));
    // Refused on its announced length too, before any of it is read.
    if let Err(full) = announced.map_or(Ok(()), |n| ep.jobs.disk.fits(Some(caller.id), n)) {
        return insufficient_storage(full).into();
    }
    let written = receive(ep, caller.id, req.into_body(), &part, max).await;
    // Only a whole upload gets its name: a URL never points at half a file.
    // Its owner is known before it has its name (expiry forgets both).
    let size = match written {
        Ok(size) => {
            ep.jobs.record_upload(&id, caller.id);
            match tokio::fs::rename(&part, &path).await {
                Ok(()) => size,
                Err(e) => {
                    ep.jobs.forget_upload(&id);
                    return error(StatusCode::INTERNAL_SERVER_ERROR, ErrorClass::Other, format!("cannot keep the upload: {e}"));
                }
            }
        }
        Err(e) => {
            let _ = tokio::fs::remove_file(&part).await;
            return e.into();
        }
    };
    json(StatusCode::CREATED, &json!({"url": url::join(&ep.url(), &format!("/files/{id}")), "size": size}))
}

pub(crate) fn too_large(max: u64) -> HttpError {
    HttpError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        ErrorClass::Arg,
        format!("an upload is at most {max} bytes (mpiws serve --max-upload raises it)"),
    )
}

/// Write the body to `part`, counting it against the owner's quota; what
/// was counted is given back if the upload fails.
async fn receive(ep: &Endpoint, owner: KeyId, body: Incoming, part: &Path, max: u64) -> Result<u64, HttpError> {
    let mut claimed = 0u64;
    let written = write_body(ep, body, part, max, &|n| ep.jobs.disk.claim(Some(owner), n), &mut claimed).await;
    if written.is_err() {
        ep.jobs.disk.release(Some(owner), claimed);
    }
    written
}

/// Write `body` to the new file `part` as it arrives, at most `max` bytes,
/// each piece counted with `claim` before it is written (into `claimed`:
/// the caller gives it back if the write fails); the bytes written. A body
/// that stalls for `--body-timeout` is refused (408).
pub(crate) async fn write_body(
    ep: &Endpoint,
    mut body: Incoming,
    part: &Path,
    max: u64,
    claim: &(dyn Fn(u64) -> Result<(), String> + Sync),
    claimed: &mut u64,
) -> Result<u64, HttpError> {
    let disk =
        |e: std::io::Error| HttpError::new(StatusCode::INTERNAL_SERVER_ERROR, ErrorClass::Other, format!("cannot store the upload: {e}"));
    let mut file = create_new(part).await.map_err(disk)?;
    let timeout = ep.config.body_timeout;
    loop {
        let frame = match tokio::time::timeout(timeout, body.frame()).await {
            Err(_) => return Err(stalled(timeout)),
            Ok(None) => break,
            Ok(Some(frame)) => frame,
        };
        let frame = frame.map_err(|e| HttpError::new(StatusCode::BAD_REQUEST, ErrorClass::Arg, format!("upload cut off: {e}")))?;
        if let Ok(data) = frame.into_data() {
            let n = data.len() as u64;
            if claimed.checked_add(n).is_none_or(|size| size > max) {
                return Err(too_large(max));
            }
            claim(n).map_err(insufficient_storage)?;
            *claimed += n;
            file.write_all(&data).await.map_err(disk)?;
        }
    }
    file.flush().await.map_err(disk)?;
    Ok(*claimed)
}

pub async fn get_upload(ep: &Endpoint, id: &str) -> Reply {
    match ep.jobs.upload_path(id) {
        Some(path) => send_file(&path, &format!("no file {id} here")).await,
        None => error(StatusCode::NOT_FOUND, ErrorClass::Arg, format!("no file {id} here")),
    }
}

/// Only by the key that uploaded it, or one with `admin`; to any other,
/// the 404 of an upload that does not exist.
pub async fn remove_upload(ep: &Endpoint, caller: &Key, id: &str) -> Reply {
    match ep.jobs.own_upload_path(id, caller) {
        Some(path) if ep.jobs.remove_upload(&path).await => no_content(),
        _ => error(StatusCode::NOT_FOUND, ErrorClass::Arg, format!("no file {id} here")),
    }
}

/// `stdout` or `stderr` of a job.
pub async fn get_job_stream(ep: &Endpoint, id: &str, name: &str) -> Reply {
    let job = match ep.jobs.found_job(id).map_err(refused) {
        Ok(job) => job,
        Err(e) => return e.into(),
    };
    let path = if name == "stdout" { job.stdout_path() } else { job.stderr_path() };
    send_file(&path, &format!("job {id} has no {name} (yet)")).await
}

/// A job's file: a template program's file parameter (`segments` is one
/// name), or a CWL job's output file (its path in the output directory,
/// percent-encoded segments).
pub async fn get_job_file(ep: &Endpoint, id: &str, segments: &[&str]) -> Reply {
    let job = match ep.jobs.found_job(id).map_err(refused) {
        Ok(job) => job,
        Err(e) => return e.into(),
    };
    let shown = segments.join("/");
    let Some((root, rel)) = decode_path(segments).and_then(|rel| job.file_location(&rel)) else {
        return error(StatusCode::NOT_FOUND, ErrorClass::Arg, format!("{} has no file {shown:?}", job.program.name));
    };
    let missing = format!("job {id} has no file {shown} (yet)");
    match open_beneath(&root, &rel) {
        Ok(f) => send_open(tokio::fs::File::from_std(f)).await.unwrap_or_else(|| error(StatusCode::NOT_FOUND, ErrorClass::Arg, missing)),
        Err(_) => error(StatusCode::NOT_FOUND, ErrorClass::Arg, missing),
    }
}

pub(crate) async fn send_open(f: tokio::fs::File) -> Option<Reply> {
    let m = f.metadata().await.ok()?;
    Some(file_reply(f, m.len()))
}

pub(crate) async fn send_file(path: &Path, missing: &str) -> Reply {
    match open_regular(path).await {
        Ok((f, m)) => file_reply(f, m.len()),
        _ => error(StatusCode::NOT_FOUND, ErrorClass::Arg, missing),
    }
}

/// A file's bytes as the answer, streamed from disk.
fn file_reply(f: tokio::fs::File, len: u64) -> Reply {
    Response::builder()
        .status(StatusCode::OK)
        .header(http::header::CONTENT_TYPE, "application/octet-stream")
        .body(Chunks::file(f, len))
        .expect("valid response")
}
