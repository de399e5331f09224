//! `DELETE /ogcapi/jobs/{id}`: dismiss a job: stop it if it runs, then
//! remove it and its files (their bytes go back to the disk quota), and
//! answer its status, `dismissed`. The job is then unknown (404). A
//! service's run is cancelled if it runs, and stays listed as the endpoint
//! keeps ended instances.

use http::StatusCode;

use super::jobs::{info, own, run_info};
use super::results::no_such_job;
use super::service_runs;
use crate::keys::Key;
use crate::service::endpoint::Found;
use crate::service::reply::{json, Reply};
use crate::service::Endpoint;

pub async fn dismiss(ep: &Endpoint, caller: &Key, id: &str) -> Reply {
    if service_runs::is_run(id) {
        let Some(found) = service_runs::find(ep, caller, id) else { return no_such_job(id).into() };
        if let Found::Live(instance) = &found {
            instance.cancel();
        }
        return json(StatusCode::OK, &run_info(ep, &service_runs::status_of(&found)));
    }
    let job = match own(ep, caller, id) {
        Ok(job) => job,
        Err(e) => return e.into(),
    };
    if !ep.jobs.remove_job(id).await {
        return no_such_job(id).into(); // removed meanwhile
    }
    let mut status = info(ep, &job);
    status["status"] = "dismissed".into();
    status["message"] = "dismissed: stopped if it ran, and removed with its files".into();
    status["links"] = serde_json::json!([]); // nothing is left to link to
    json(StatusCode::OK, &status)
}
