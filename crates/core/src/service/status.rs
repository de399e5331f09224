//! `GET /domains/{domain}/ranks/{rank}[?wait=SECONDS]`: an instance's state,
//! and its result or error once it ended. `wait` long-polls until it ends.

use http::{Request, StatusCode};
use hyper::body::Incoming;

use crate::error::ErrorClass;
use crate::service::reply::{authorize_or_admin, error, json, parse_rank, wait_param, Reply};
use crate::service::Endpoint;

pub async fn status(ep: &Endpoint, domain: &str, rank: &str, req: Request<Incoming>) -> Reply {
    let rank = match parse_rank(rank) {
        Ok(r) => r,
        Err(e) => return e.into(),
    };
    let Some(instance) = ep.instance(domain, rank) else {
        return error(StatusCode::NOT_FOUND, ErrorClass::Comm, format!("no instance of domain {domain} rank {rank} here"));
    };
    if let Err(e) = authorize_or_admin(ep, req.headers(), &instance) {
        return e.into();
    }
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
