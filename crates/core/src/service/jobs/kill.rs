//! `DELETE /jobs/{id}`: kill a job (its whole process group, or its
//! staging) and answer its state once it has ended; a job that already
//! ended is left as it is, its files stay, to be fetched.
//!
//! `DELETE /jobs/{id}?remove=true`: kill it if it runs, then remove it and
//! its files (**204**); the job is then unknown (404), and its bytes are
//! given back to the disk quota.
//!
//! Only by the key that spawned the job, or one with `admin`: to any other,
//! the job does not exist (404).

use http::{Request, StatusCode};

use crate::error::ErrorClass;
use crate::keys::Key;
use crate::service::jobs::refused;
use crate::service::reply::{error, json, no_content, query, Reply};
use crate::service::Endpoint;

pub async fn kill<B>(ep: &Endpoint, caller: &Key, id: &str, req: &Request<B>) -> Reply {
    let remove = match query(req, "remove") {
        None | Some("false") => false,
        Some("true") => true,
        Some(other) => {
            return error(StatusCode::BAD_REQUEST, ErrorClass::Arg, format!("remove={other}: it is remove=true or remove=false"))
        }
    };
    let job = match ep.jobs.own_job(id, caller).map_err(refused) {
        Ok(job) => job,
        Err(e) => return e.into(),
    };
    if remove {
        return match ep.jobs.remove_job(id).await {
            true => no_content(),
            false => error(StatusCode::NOT_FOUND, ErrorClass::Arg, format!("no job {id} here")),
        };
    }
    job.end().await;
    json(StatusCode::OK, &job.describe(&ep.url()))
}
