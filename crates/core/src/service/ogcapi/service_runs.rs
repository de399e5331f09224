//! A deployed service as an OGC process: each execution runs it as a
//! domain of one rank on this endpoint, as `POST /run` would (under the
//! same bounds on instances, owned by the caller's key, which needs the
//! `run` scope besides `jobs`). Its inputs are the service's parameters
//! (any JSON), its one output, `result`, what it returns. The job's id is
//! the domain's: `ogc-` and 32 hex digits, and `-raw` if its results
//! were asked raw (so that they are answered as asked, with no state kept). Its status is the instance's,
//! kept as long as the endpoint keeps what ended instances left
//! (`instance_linger`, and a bounded number per key).

use std::sync::Arc;
use std::time::Duration;

use http::StatusCode;
use serde_json::{Map, Value};

use super::request::Response;
use super::{status_info, Exception};
use crate::keys::{random_hex, Key, Scope};
use crate::rank::{Binding, Instance, InstanceState, Status};
use crate::service::endpoint::{Found, Refused};
use crate::service::reply::HttpError;
use crate::service::Endpoint;

pub const PREFIX: &str = "ogc-";

const RAW: &str = "-raw";

/// How run `id`'s results were asked.
pub fn form_of(id: &str) -> Response {
    if id.ends_with(RAW) {
        Response::Raw
    } else {
        Response::Document
    }
}

/// Whether a job id names a service's run: `ogc-`, 32 hex digits, `-raw` or not.
pub fn is_run(id: &str) -> bool {
    let Some(rest) = id.strip_prefix(PREFIX) else { return false };
    let hex = rest.strip_suffix(RAW).unwrap_or(rest);
    hex.len() == 32 && hex.bytes().all(|b| b.is_ascii_hexdigit())
}

/// What the face says of a service.
pub fn about(service: &str) -> String {
    format!(
        "the mpiws service {service}, run as a domain of one rank on this endpoint: its inputs are the service's \
         parameters (any JSON), its output 'result' what it returns (a key with the run scope as well as jobs)"
    )
}

/// Run `service` with `params`, as the caller's key's.
pub fn start(ep: &Endpoint, caller: &Key, service: &str, params: Map<String, Value>, form: Response) -> Result<Arc<Instance>, Exception> {
    if !caller.allows(Scope::Run) {
        let why = format!("running the service {service} takes a key with the run scope (this one has {})", caller.scopes().join(", "));
        return Err(Exception::new(StatusCode::FORBIDDEN, "about:blank", why));
    }
    let url = ep.url();
    let binding = Binding {
        domain: format!("{PREFIX}{}{}", random_hex(), if form == Response::Raw { RAW } else { "" }),
        rank: 0,
        endpoints: vec![url],
        token: random_hex(),
        service: service.to_string(),
        params: Value::Object(params),
    };
    ep.create_instance(binding, true, Some(caller.id)).map_err(|r| match r {
        Refused::Busy { per_key, error } => {
            let status = if per_key { StatusCode::TOO_MANY_REQUESTS } else { StatusCode::SERVICE_UNAVAILABLE };
            HttpError::retry_later(status, error.class, error.message, Duration::from_secs(1)).into()
        }
        Refused::Invalid(e) | Refused::Conflict(e) => HttpError::new(StatusCode::BAD_REQUEST, e.class, e.message).into(),
    })
}

/// Its status once it has ended.
pub async fn ended(instance: &Instance) -> Status {
    let mut rx = instance.watch_status();
    let _ = rx.wait_for(|s| s.state.is_final()).await;
    instance.status()
}

/// The caller's run `id` (every one, to a key with `admin`): its rank 0,
/// the one a run has (a domain of that name started otherwise shows as one).
pub fn find(ep: &Endpoint, caller: &Key, id: &str) -> Option<Found> {
    let found = ep.hosted_where(|domain, owner| domain == id && is_run(domain) && may_see(caller, owner));
    found.into_iter().find(|f| status_of(f).rank == 0)
}

/// The caller's runs, by id.
pub fn list(ep: &Endpoint, caller: &Key) -> Vec<Status> {
    let found = ep.hosted_where(|domain, owner| is_run(domain) && may_see(caller, owner));
    let mut runs: Vec<Status> = found.iter().map(status_of).filter(|s| s.rank == 0).collect();
    runs.sort_by(|a, b| a.domain.cmp(&b.domain));
    runs
}

fn may_see(caller: &Key, owner: Option<crate::keys::KeyId>) -> bool {
    owner == Some(caller.id) || caller.allows(Scope::Admin)
}

pub fn status_of(found: &Found) -> Status {
    match found {
        Found::Live(i) => i.status(),
        Found::Ended(e) => e.status.clone(),
    }
}

/// A run's status document (`href`: its URL on the face).
pub fn info(s: &Status, href: &str) -> Value {
    let (status, message) = match s.state {
        InstanceState::Starting => ("accepted", "the service has not started yet".to_string()),
        InstanceState::Running => ("running", "the service runs".to_string()),
        InstanceState::Done => ("successful", "the service returned".to_string()),
        InstanceState::Failed => ("failed", s.error.as_ref().map_or("the service failed".into(), |e| format!("{}: {}", e.name, e.message))),
        InstanceState::Cancelled => ("dismissed", "dismissed: the service was cancelled".to_string()),
    };
    status_info::document(&s.domain, &s.service, status, &message, None, href)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_runs_id_is_its_prefix_32_hex_digits_and_how_it_was_asked() {
        let hex = "0123456789abcdef0123456789abcdef";
        assert!(is_run(&format!("ogc-{hex}")) && is_run(&format!("ogc-{hex}-raw")));
        assert!(!is_run("ogc-mine") && !is_run(hex) && !is_run(&format!("ogc-{hex}-x")) && !is_run(&format!("ogc-{hex}0")));
        assert_eq!((form_of(&format!("ogc-{hex}-raw")), form_of(&format!("ogc-{hex}"))), (Response::Raw, Response::Document));
    }
}
