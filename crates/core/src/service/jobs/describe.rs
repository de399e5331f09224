//! `GET /programs`: the programs deployed here; `GET /programs/{name}`: one
//! program's interface (its template and parameters, or its CWL tool's
//! inputs and outputs).

use http::StatusCode;
use serde_json::Value;

use crate::service::jobs::refused;
use crate::service::reply::{json, Reply};
use crate::service::Endpoint;

pub fn list(ep: &Endpoint) -> Reply {
    let all: Vec<Value> = ep.jobs.programs().iter().map(|p| p.describe()).collect();
    json(StatusCode::OK, &all)
}

pub fn describe(ep: &Endpoint, name: &str) -> Reply {
    match ep.jobs.found_program(name).map_err(refused) {
        Ok(p) => json(StatusCode::OK, &p.describe()),
        Err(e) => e.into(),
    }
}
