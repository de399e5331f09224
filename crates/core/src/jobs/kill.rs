//! `DELETE /jobs/{id}`: kill a job (its process, or its staging) and answer
//! its state once it has ended; a job that already ended is left as it is.
//! Its files stay, to be fetched.

use std::time::Duration;

use http::StatusCode;

use crate::service::reply::{json, Reply};
use crate::service::Endpoint;

/// A killed process ends at once; this only bounds a stuck file system.
const KILL_WAIT: Duration = Duration::from_secs(10);

pub async fn kill(ep: &Endpoint, id: &str) -> Reply {
    let job = match ep.jobs.job_or_404(id) {
        Ok(job) => job,
        Err(reply) => return reply,
    };
    if !job.state().state.ended() {
        job.kill();
        job.wait(KILL_WAIT).await;
    }
    json(StatusCode::OK, &job.describe(&ep.url()))
}
