//! `GET /domains/{domain}/ranks/{rank}[?wait=SECONDS][&traffic=true]`: an
//! instance's state, and its result or error once it ended. `wait`
//! long-polls until it ends; `traffic` adds what it sent to and received
//! from each peer (`rank::traffic`; asked for, since it grows with the
//! domain: a launcher's polls do without) and what it waits for now
//! (`rank::awaiting`; a child process running the instance's code is
//! asked, as only it knows).

use http::{Method, Request, StatusCode};
use hyper::body::Incoming;

use crate::error::ErrorClass;
use crate::rank::awaiting::Awaiting;
use crate::rank::traffic::Counts;
use crate::rank::Status;
use crate::service::endpoint::Found;
use crate::service::reply::{error, json, query, wait_param, watched_instance, Reply};
use crate::service::Endpoint;
use crate::wire::url;

pub async fn status(ep: &Endpoint, domain: &str, rank: &str, req: Request<Incoming>) -> Reply {
    let traffic = match query(&req, "traffic") {
        None | Some("false") => false,
        Some("true") => true,
        Some(other) => {
            return error(StatusCode::BAD_REQUEST, ErrorClass::Arg, format!("traffic={other}: it is traffic=true or traffic=false"))
        }
    };
    let with = |status: &Status, counts: &dyn Fn() -> Counts, awaiting: Vec<Awaiting>| -> Reply {
        let mut v = serde_json::to_value(status).expect("a status encodes");
        if traffic {
            v["traffic"] = serde_json::to_value(counts()).expect("counts encode");
            v["awaiting"] = serde_json::to_value(awaiting).expect("awaiting encodes");
        }
        json(StatusCode::OK, &v)
    };
    let instance = match watched_instance(ep, domain, rank, req.headers()) {
        Ok(Found::Live(instance)) => instance,
        Ok(Found::Ended(ended)) => return with(&ended.status, &|| ended.traffic.clone(), Vec::new()),
        Err(e) => return e.into(),
    };
    let waited = match wait_param(&req) {
        Err(e) => return e.into(),
        Ok(Some(wait)) if !wait.is_zero() => {
            let mut rx = instance.watch_status();
            let _ = tokio::time::timeout(wait, rx.wait_for(|s| s.state.is_final())).await;
            true
        }
        Ok(_) => false,
    };
    let status = instance.status();
    if traffic && !waited && !status.state.is_final() {
        // Its code runs in a child process: what it waits for is known there.
        if let Some(child) = ep.sandbox(domain, instance.rank()).and_then(|s| s.url()) {
            let asked = url::join(&child, req.uri().path_and_query().map_or("", |p| p.as_str()));
            let from_child = ep.stores.http().call_json::<serde_json::Value>(Method::GET, &asked, Some(&instance.binding.token), None);
            if let Ok(Ok(v)) = tokio::time::timeout(CHILD_ANSWERS, from_child).await {
                return json(StatusCode::OK, &v);
            }
        }
    }
    with(&status, &|| instance.traffic.counts(), instance.awaiting())
}

/// How long a child process's own answer is waited for (else the endpoint's record answers).
const CHILD_ANSWERS: std::time::Duration = std::time::Duration::from_secs(2);
