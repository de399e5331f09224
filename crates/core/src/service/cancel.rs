//! `DELETE /domains/{domain}/ranks/{rank}`: cancel an instance. Its pending
//! and later operations fail; its peers' stores to it are refused.

use http::{Request, StatusCode};
use hyper::body::Incoming;

use crate::service::endpoint::Found;
use crate::service::reply::{json, watched_instance, Reply};
use crate::service::Endpoint;

pub fn cancel(ep: &Endpoint, domain: &str, rank: &str, req: Request<Incoming>) -> Reply {
    let instance = match watched_instance(ep, domain, rank, req.headers()) {
        Ok(Found::Live(instance)) => instance,
        // Ended already: nothing to cancel; its status says how it ended.
        Ok(Found::Ended(ended)) => return json(StatusCode::OK, &ended.status),
        Err(e) => return e.into(),
    };
    instance.cancel();
    json(StatusCode::OK, &instance.status())
}
