//! `GET /programs`: the programs deployed here; `GET /programs/{name}`: one
//! program's interface (its template and parameters), generated from its
//! template.

use http::StatusCode;
use serde_json::Value;

use crate::service::reply::{json, Reply};
use crate::service::Endpoint;

pub fn list(ep: &Endpoint) -> Reply {
    let all: Vec<Value> = ep.jobs.programs().iter().map(|p| p.template.describe(&p.name)).collect();
    json(StatusCode::OK, &all)
}

pub fn describe(ep: &Endpoint, name: &str) -> Reply {
    match ep.jobs.program_or_404(name) {
        Ok(p) => json(StatusCode::OK, &p.template.describe(&p.name)),
        Err(reply) => reply,
    }
}
