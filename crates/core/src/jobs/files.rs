//! Files by reference. `POST /files` uploads a file (the raw body, of any
//! size, written to disk as it arrives) and answers its URL, to give a job
//! as an input; `GET /files/{id}` and `DELETE /files/{id}`. A job's own
//! files: `GET /jobs/{id}/files/{name}`, `GET /jobs/{id}/stdout|stderr`.

use std::path::Path;

use http::{Request, Response, StatusCode};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use serde_json::json;
use tokio::io::AsyncWriteExt;

use crate::body::Chunks;
use crate::error::ErrorClass;
use crate::jobs::new_id;
use crate::service::reply::{error, json, no_content, Reply};
use crate::service::Endpoint;

pub async fn upload(ep: &Endpoint, req: Request<Incoming>) -> Reply {
    let max = ep.config.max_upload;
    let announced = req.headers().get(http::header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if announced.is_some_and(|n| n > max) {
        return too_large(max);
    }
    let id = new_id();
    let dir = ep.jobs.uploads_dir();
    let (part, path) = (dir.join(format!("{id}.part")), dir.join(&id));
    let written = receive(req.into_body(), &dir, &part, max).await;
    // Only a whole upload gets its name: a URL never points at half a file.
    let size = match written {
        Ok(size) => match tokio::fs::rename(&part, &path).await {
            Ok(()) => size,
            Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, ErrorClass::Other, format!("cannot keep the upload: {e}")),
        },
        Err(reply) => {
            let _ = tokio::fs::remove_file(&part).await;
            return reply;
        }
    };
    json(StatusCode::CREATED, &json!({"url": format!("{}/files/{id}", ep.url()), "size": size}))
}

fn too_large(max: u64) -> Reply {
    error(StatusCode::PAYLOAD_TOO_LARGE, ErrorClass::Arg, format!("an upload is at most {max} bytes"))
}

async fn receive(mut body: Incoming, dir: &Path, part: &Path, max: u64) -> Result<u64, Reply> {
    let disk = |e: std::io::Error| error(StatusCode::INTERNAL_SERVER_ERROR, ErrorClass::Other, format!("cannot store the upload: {e}"));
    tokio::fs::create_dir_all(dir).await.map_err(disk)?;
    let mut file = tokio::fs::File::create(part).await.map_err(disk)?;
    let mut size = 0u64;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| error(StatusCode::BAD_REQUEST, ErrorClass::Arg, format!("upload cut off: {e}")))?;
        if let Ok(data) = frame.into_data() {
            size += data.len() as u64;
            if size > max {
                return Err(too_large(max));
            }
            file.write_all(&data).await.map_err(disk)?;
        }
    }
    file.flush().await.map_err(disk)?;
    Ok(size)
}

pub async fn get_upload(ep: &Endpoint, id: &str) -> Reply {
    match ep.jobs.upload_path(id) {
        Some(path) => send_file(&path, &format!("no file {id} here")).await,
        None => error(StatusCode::NOT_FOUND, ErrorClass::Arg, format!("no file {id} here")),
    }
}

pub async fn remove_upload(ep: &Endpoint, id: &str) -> Reply {
    match ep.jobs.upload_path(id) {
        Some(path) if tokio::fs::remove_file(&path).await.is_ok() => no_content(),
        _ => error(StatusCode::NOT_FOUND, ErrorClass::Arg, format!("no file {id} here")),
    }
}

/// `name` is a file parameter of the job's program, or (`printed`) its
/// `stdout` or `stderr`.
pub async fn get_job_file(ep: &Endpoint, id: &str, name: &str, printed: bool) -> Reply {
    let job = match ep.jobs.job_or_404(id) {
        Ok(job) => job,
        Err(reply) => return reply,
    };
    let path = match (printed, name) {
        (true, "stdout") => Some(job.stdout_path()),
        (true, _) => Some(job.stderr_path()),
        (false, _) => job.file_path(name),
    };
    match path {
        Some(path) => send_file(&path, &format!("job {id} has no file {name} (yet)")).await,
        None => error(StatusCode::NOT_FOUND, ErrorClass::Arg, format!("{} has no file parameter {name:?}", job.program.name)),
    }
}

async fn send_file(path: &Path, missing: &str) -> Reply {
    let opened = match tokio::fs::File::open(path).await {
        Ok(f) => f.metadata().await.map(|m| (f, m)),
        Err(e) => Err(e),
    };
    match opened {
        Ok((f, m)) if m.is_file() => Response::builder()
            .status(StatusCode::OK)
            .header(http::header::CONTENT_TYPE, "application/octet-stream")
            .body(Chunks::file(f, m.len()))
            .expect("valid response"),
        _ => error(StatusCode::NOT_FOUND, ErrorClass::Arg, missing),
    }
}
