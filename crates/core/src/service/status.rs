//! `GET /domains/{domain}/ranks/{rank}[?wait=SECONDS]`: an instance's state,
//! and its result or error once it ended. `wait` long-polls until it ends.

use http::{Request, StatusCode};
use hyper::body::Incoming;

use crate::service::endpoint::Found;
use crate::service::reply::{json, wait_param, watched_instance, Reply};
use crate::service::Endpoint;

pub async fn status(ep: &Endpoint, domain: &str, rank: &str, req: Request<Incoming>) -> Reply {
    let instance = match watched_instance(ep, domain, rank, req.headers()) {
        Ok(Found::Live(instance)) => instance,
        Ok(Found::Ended(ended)) => return json(StatusCode::OK, &ended.status),
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
    json(StatusCode::OK, &instance.status())
}
