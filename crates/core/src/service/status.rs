//! `GET /domains/{domain}/ranks/{rank}[?wait=SECONDS]`: an instance's state,
//! and its result or error once it ended. `wait` long-polls until it ends.

use std::time::Duration;

use http::{Request, StatusCode};
use hyper::body::Incoming;

use crate::error::ErrorClass;
use crate::service::reply::{authorize, error, json, parse_rank, Reply};
use crate::service::Endpoint;

/// Longest long-poll a client may ask for.
const MAX_WAIT: f64 = 300.0;

pub async fn status(ep: &Endpoint, domain: &str, rank: &str, req: Request<Incoming>) -> Reply {
    let rank = match parse_rank(rank) {
        Ok(r) => r,
        Err(reply) => return reply,
    };
    let Some(instance) = ep.instance(domain, rank) else {
        return error(StatusCode::NOT_FOUND, ErrorClass::Comm, format!("no instance of domain {domain} rank {rank} here"));
    };
    if let Err(reply) = authorize(req.headers(), &instance) {
        return reply;
    }
    let wait = req
        .uri()
        .query()
        .unwrap_or("")
        .split('&')
        .find_map(|kv| kv.strip_prefix("wait="))
        .map(|v| v.parse::<f64>());
    match wait {
        Some(Err(_)) => return error(StatusCode::BAD_REQUEST, ErrorClass::Arg, "wait= takes a number of seconds"),
        Some(Ok(secs)) if secs > 0.0 => {
            let mut rx = instance.watch_status();
            let secs = secs.min(MAX_WAIT);
            let _ = tokio::time::timeout(Duration::from_secs_f64(secs), rx.wait_for(|s| s.state.is_final())).await;
        }
        _ => {}
    }
    json(StatusCode::OK, &instance.status())
}
