//! `GET /jobs/{id}[?wait=SECONDS]`: a job's state (`staging`, `running`,
//! `done`, `failed`, `killed`), its exit code and error. `wait` long-polls
//! until it ends.

use http::{Request, StatusCode};
use hyper::body::Incoming;

use crate::error::ErrorClass;
use crate::service::reply::{error, json, wait_param, Reply};
use crate::service::Endpoint;

pub async fn status(ep: &Endpoint, id: &str, req: Request<Incoming>) -> Reply {
    let Some(job) = ep.jobs.job(id) else {
        return error(StatusCode::NOT_FOUND, ErrorClass::Arg, format!("no job {id} here"));
    };
    match wait_param(&req) {
        Err(reply) => return reply,
        Ok(Some(wait)) => {
            job.wait(wait).await;
        }
        Ok(None) => {}
    }
    json(StatusCode::OK, &job.describe(&ep.url()))
}
