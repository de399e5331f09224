//! `GET /ogcapi/processes[?limit=N&offset=M]`: the deployed programs and
//! services as process summaries; `GET /ogcapi/processes/{id}`: one's description.

use http::{Request, StatusCode};
use serde_json::{json, Value};

use super::{description, exception, from_http, page, page_links, url_of, NO_SUCH_PROCESS};
use crate::service::reply::{json, Reply};
use crate::service::Endpoint;

pub fn list<B>(ep: &Endpoint, req: &Request<B>) -> Reply {
    let (offset, limit) = match page(req) {
        Ok(p) => p,
        Err(e) => return from_http(e),
    };
    let base = url_of(ep, "");
    let all = super::processes(ep);
    let processes: Vec<Value> = all.iter().skip(offset).take(limit).map(|p| description::summary(p, &base)).collect();
    json(StatusCode::OK, &json!({"processes": processes, "links": page_links(ep, "/processes", (offset, limit), all.len())}))
}

pub fn describe(ep: &Endpoint, id: &str) -> Reply {
    match super::process(ep, id) {
        Some(p) => json(StatusCode::OK, &description::describe(&p, &url_of(ep, ""))),
        None => exception(StatusCode::NOT_FOUND, NO_SUCH_PROCESS, format!("no process {id:?} is deployed here")),
    }
}
