//! `GET /programs`: the programs deployed here; `GET /programs/{name}`: one
//! program's interface (its template and parameters, or its CWL tool's
//! inputs and outputs); `GET /programs/{name}?wsdl`: its WSDL
//! (`service::soap::wsdl`).

use http::{Request, StatusCode};
use serde_json::Value;

use crate::service::jobs::refused;
use crate::service::reply::{has_flag, json, xml, Reply};
use crate::service::soap::wsdl;
use crate::service::Endpoint;
use crate::wire::url;

pub fn list(ep: &Endpoint) -> Reply {
    let all: Vec<Value> = ep.jobs.programs().iter().map(|p| p.describe()).collect();
    json(StatusCode::OK, &all)
}

pub fn describe<B>(ep: &Endpoint, name: &str, req: &Request<B>) -> Reply {
    let program = match ep.jobs.found_program(name).map_err(refused) {
        Ok(p) => p,
        Err(e) => return e.into(),
    };
    if has_flag(req, "wsdl") {
        let address = url::join(url::without_pin(&ep.url()), &format!("/programs/{name}"));
        return xml(wsdl::program(&program, &address));
    }
    json(StatusCode::OK, &program.describe())
}
