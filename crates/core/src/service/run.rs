//! `POST /run`: create a service instance from its binding (domain id, rank,
//! endpoints, token, service, params) and queue it for the service layer.

use http::{Request, StatusCode};
use hyper::body::Incoming;

use crate::domain::Binding;
use crate::error::ErrorClass;
use crate::service::reply::{error, from_error, json, read_body, Reply};
use crate::service::Endpoint;

/// Bindings are small; anything larger is not one.
const MAX_BINDING: usize = 16 << 20;

pub async fn run(ep: &Endpoint, req: Request<Incoming>) -> Reply {
    let body = match read_body(req.into_body(), MAX_BINDING, "the binding").await {
        Ok(b) => b,
        Err(reply) => return reply,
    };
    let binding: Binding = match serde_json::from_slice(&body) {
        Ok(b) => b,
        Err(e) => return error(StatusCode::BAD_REQUEST, ErrorClass::Arg, format!("malformed binding: {e}")),
    };
    if !ep.services().contains(&binding.service) {
        return error(
            StatusCode::NOT_FOUND,
            ErrorClass::Arg,
            format!("no service {:?} is deployed here (deployed: {:?})", binding.service, ep.services()),
        );
    }
    match ep.create_instance(binding, true) {
        Ok(i) => json(StatusCode::CREATED, &i.status()),
        Err(e) if e.class == ErrorClass::Comm => error(StatusCode::CONFLICT, e.class, e.message),
        Err(e) => from_error(&e),
    }
}
