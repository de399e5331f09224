//! `DELETE /domains/{domain}/ranks/{rank}`: cancel an instance. Its pending
//! and later operations fail; its peers' stores to it are refused.

use http::{Request, StatusCode};
use hyper::body::Incoming;

use crate::error::ErrorClass;
use crate::service::reply::{authorize_or_admin, error, json, parse_rank, Reply};
use crate::service::Endpoint;

pub fn cancel(ep: &Endpoint, domain: &str, rank: &str, req: Request<Incoming>) -> Reply {
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
    instance.cancel();
    json(StatusCode::OK, &instance.status())
}
