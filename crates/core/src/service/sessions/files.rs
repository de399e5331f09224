//! A session's files. `GET /sessions/{id}/files`: its regular files (what
//! its jobs made in subdirectories too), each `{"name", "size", "url"}`;
//! `GET /sessions/{id}/files/{path}`: one file's bytes, streamed; `PUT
//! /sessions/{id}/files/{name}`: write a file from the raw body (streamed,
//! any size up to `--max-upload` and the session's quota), replacing one
//! of that name (**201**); `DELETE /sessions/{id}/files/{name}` (**204**).
//!
//! Names given here are plain names (`session::plain_name`); a file is
//! read only if it is a regular file, never through a symlink (a job may
//! leave one), nor through a directory that is one. A file being written
//! has no name yet: a job never reads half of it.

use std::path::PathBuf;
use std::sync::Arc;

use http::{Request, StatusCode};
use hyper::body::Incoming;
use serde_json::{json, Value};

use crate::error::ErrorClass;
use crate::jobs::new_id;
use crate::jobs::safe_file::{inside, open_beneath};
use crate::jobs::session::{plain_name, Session};
use crate::keys::Key;
use crate::service::jobs::files::{send_open, too_large, write_body};
use crate::service::jobs::insufficient_storage;
use crate::service::reply::{error, json, no_content, HttpError, Reply};
use crate::service::sessions::own;
use crate::service::Endpoint;
use crate::wire::url::decode_path;

/// Most files a listing shows.
const MAX_LISTED: usize = 10_000;

pub fn list(ep: &Endpoint, caller: &Key, id: &str) -> Reply {
    let session = match own(ep, caller, id) {
        Ok(s) => s,
        Err(e) => return e.into(),
    };
    let base = ep.url();
    let files: Vec<Value> = crate::jobs::session::listing(&session.files(), MAX_LISTED)
        .into_iter()
        .map(|(name, size)| json!({"url": session.file_url(&base, &name), "name": name, "size": size}))
        .collect();
    json(StatusCode::OK, &json!({"files": files}))
}

pub async fn get(ep: &Endpoint, caller: &Key, id: &str, segments: &[&str]) -> Reply {
    let session = match own(ep, caller, id) {
        Ok(s) => s,
        Err(e) => return e.into(),
    };
    let shown = segments.join("/");
    let missing = || error(StatusCode::NOT_FOUND, ErrorClass::Arg, format!("session {id} has no file {shown}"));
    let Some(rel) = decode_path(segments) else { return missing() };
    match open_beneath(&session.files(), &rel) {
        Ok(f) => send_open(tokio::fs::File::from_std(f)).await.unwrap_or_else(missing),
        Err(_) => missing(),
    }
}

pub async fn put(ep: &Endpoint, caller: &Key, id: &str, name: &str, req: Request<Incoming>) -> Reply {
    let (session, path) = match named(ep, caller, id, name) {
        Ok(found) => found,
        Err(e) => return e.into(),
    };
    let max = ep.config.jobs.max_upload;
    let announced = req.headers().get(http::header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if announced.is_some_and(|n| n > max) {
        return too_large(max).into();
    }
    // Refused on its announced length too, before any of it is read.
    if let Err(full) = announced.map_or(Ok(()), |n| session.fits(n)) {
        return insufficient_storage(full).into();
    }
    // Written aside under a name no client may give, then renamed over the
    // old one (rename replaces a symlink itself, never what it points to).
    let part = session.files().join(format!(".part-{}", new_id()));
    let mut claimed = 0u64;
    let written = write_body(ep, req.into_body(), &part, max, &|n| session.claim(n), &mut claimed).await;
    let kept = match written {
        Ok(size) => tokio::fs::rename(&part, &path)
            .await
            .map(|()| size)
            .map_err(|e| HttpError::new(StatusCode::CONFLICT, ErrorClass::Arg, format!("cannot name it {name:?} in the session: {e}"))),
        Err(e) => Err(e),
    };
    let reply = match kept {
        Ok(size) => json(StatusCode::CREATED, &json!({"name": name, "size": size, "url": session.file_url(&ep.url(), name)})),
        Err(e) => {
            let _ = tokio::fs::remove_file(&part).await;
            session.release(claimed);
            e.into()
        }
    };
    let _ = session.account(); // a file it replaced is gone
    reply
}

pub async fn remove(ep: &Endpoint, caller: &Key, id: &str, name: &str) -> Reply {
    let (session, path) = match named(ep, caller, id, name) {
        Ok(found) => found,
        Err(e) => return e.into(),
    };
    // remove_file removes a symlink itself, never what it points to; a directory is refused.
    let removed = tokio::fs::remove_file(&path).await;
    let _ = session.account();
    match removed {
        Ok(()) => no_content(),
        Err(_) => error(StatusCode::NOT_FOUND, ErrorClass::Arg, format!("session {id} has no file {name:?}")),
    }
}

/// The caller's session `id` and where its file `segment` (from the path:
/// a name a client may give) is.
fn named(ep: &Endpoint, caller: &Key, id: &str, segment: &str) -> Result<(Arc<Session>, PathBuf), HttpError> {
    let session = own(ep, caller, id)?;
    let bad = |why: String| HttpError::new(StatusCode::BAD_REQUEST, ErrorClass::Arg, why);
    let name = decode_path(&[segment]).ok_or_else(|| bad(format!("{segment:?} is not a file's name")))?;
    plain_name(&name).map_err(bad)?;
    let path = inside(&session.files(), &name).expect("a plain name is one component");
    Ok((session, path))
}
