//! `GET /jobs/{id}[?wait=SECONDS]`: a job's state (`staging`, `running`,
//! `done`, `failed`, `killed`), its exit code and error. `wait` long-polls
//! until it ends.

use http::{Request, StatusCode};
use hyper::body::Incoming;

use crate::keys::Key;
use crate::service::jobs::refused;
use crate::service::reply::{json, wait_param, Reply};
use crate::service::Endpoint;

/// Only the job's own key, or one with `admin`, is answered; to any other
/// the job does not exist (404).
pub async fn status(ep: &Endpoint, caller: &Key, id: &str, req: Request<Incoming>) -> Reply {
    let job = match ep.jobs.own_job(id, caller).map_err(refused) {
        Ok(job) => job,
        Err(e) => return e.into(),
    };
    match wait_param(&req) {
        Err(e) => return e.into(),
        Ok(Some(wait)) => {
            job.wait(wait).await;
        }
        Ok(None) => {}
    }
    json(StatusCode::OK, &job.describe(&ep.url()))
}
