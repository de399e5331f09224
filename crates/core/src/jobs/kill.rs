//! `DELETE /jobs/{id}`: kill a job (its process, or its staging) and answer
//! its state once it has ended; a job that already ended is left as it is.
//! Its files stay, to be fetched.

use std::time::Duration;

use http::StatusCode;

use crate::error::ErrorClass;
use crate::service::reply::{error, json, Reply};
use crate::service::Endpoint;

/// A killed process ends at once; this only bounds a stuck file system.
const KILL_WAIT: Duration = Duration::from_secs(10);

pub async fn kill(ep: &Endpoint, id: &str) -> Reply {
    let Some(job) = ep.jobs.job(id) else {
        return error(StatusCode::NOT_FOUND, ErrorClass::Arg, format!("no job {id} here"));
    };
    if !job.state().state.ended() {
        job.kill();
        job.wait(KILL_WAIT).await;
    }
    json(StatusCode::OK, &job.describe(&ep.url()))
}
