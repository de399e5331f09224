//! `GET /domains/{domain}/ranks/{rank}[?wait=SECONDS][&traffic=true]`: an
//! instance's state, and its result or error once it ended. `wait`
//! long-polls until it ends; `traffic` adds what it sent to and received
//! from each peer (`rank::traffic`; asked for, since it grows with the
//! domain: a launcher's polls do without).

use http::{Request, StatusCode};
use hyper::body::Incoming;

use crate::error::ErrorClass;
use crate::rank::traffic::Counts;
use crate::rank::Status;
use crate::service::endpoint::Found;
use crate::service::reply::{error, json, query, wait_param, watched_instance, Reply};
use crate::service::Endpoint;

pub async fn status(ep: &Endpoint, domain: &str, rank: &str, req: Request<Incoming>) -> Reply {
    let traffic = match query(&req, "traffic") {
        None | Some("false") => false,
        Some("true") => true,
        Some(other) => {
            return error(StatusCode::BAD_REQUEST, ErrorClass::Arg, format!("traffic={other}: it is traffic=true or traffic=false"))
        }
    };
    let with = |status: &Status, counts: &dyn Fn() -> Counts| -> Reply {
        let mut v = serde_json::to_value(status).expect("a status encodes");
        if traffic {
            v["traffic"] = serde_json::to_value(counts()).expect("counts encode");
        }
        json(StatusCode::OK, &v)
    };
    let instance = match watched_instance(ep, domain, rank, req.headers()) {
        Ok(Found::Live(instance)) => instance,
        Ok(Found::Ended(ended)) => return with(&ended.status, &|| ended.traffic.clone()),
        Err(e) => return e.into(),
    };
    match wait_param(&req) {
        Err(e) => return e.into(),
        Ok(Some(wait)) if !wait.is_zero() => {
            let mut rx = instance.watch_status();
            let _ = tokio::time::timeout(wait, rx.wait_for(|s| s.state.is_final())).await;
        }
        Ok(_) => {}
    }
    with(&instance.status(), &|| instance.traffic.counts())
}
