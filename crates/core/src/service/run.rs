//! `POST /run`: create a service instance from its binding (domain id, rank,
//! endpoints, token, service, params), owned by the caller's key, and queue
//! it for the service layer.

use std::time::Duration;

use http::{Request, StatusCode};
use hyper::body::Incoming;

use crate::error::ErrorClass;
use crate::keys::KeyId;
use crate::rank::Binding;
use crate::rank::Instance;
use crate::service::endpoint::Refused;
use crate::service::guard;
use crate::service::reply::{error, json, read_body, HttpError, Reply};
use crate::service::Endpoint;

pub async fn run(ep: &Endpoint, req: Request<Incoming>, owner: KeyId) -> Reply {
    if let Err(e) = guard::json_body(req.headers()) {
        return e.into();
    }
    let body = match read_body(ep, req.into_body(), ep.config.max_binding, "the binding (--max-binding)").await {
        Ok(b) => b,
        Err(e) => return e.into(),
    };
    let binding: Binding = match serde_json::from_slice(&body) {
        Ok(b) => b,
        Err(e) => return error(StatusCode::BAD_REQUEST, ErrorClass::Arg, format!("malformed binding: {e}")),
    };
    match create(ep, binding, owner) {
        Ok(i) => json(StatusCode::CREATED, &i.status()),
        Err(e) => e.into(),
    }
}

/// An instance of `binding`, owned by `owner`: within the endpoint's
/// bounds, of a service deployed here (the SOAP face's `run` too).
pub fn create(ep: &Endpoint, binding: Binding, owner: KeyId) -> Result<std::sync::Arc<Instance>, HttpError> {
    if binding.endpoints.len() > ep.config.max_ranks {
        let max = ep.config.max_ranks;
        return Err(HttpError::new(
            StatusCode::BAD_REQUEST,
            ErrorClass::Arg,
            format!("a domain here has at most {max} ranks (--max-ranks)"),
        ));
    }
    if !ep.services().contains(&binding.service) {
        let message = format!("no service {:?} is deployed here (deployed: {:?})", binding.service, ep.services());
        return Err(HttpError::new(StatusCode::NOT_FOUND, ErrorClass::Arg, message));
    }
    ep.create_instance(binding, true, Some(owner)).map_err(|r| match r {
        Refused::Conflict(e) => HttpError::new(StatusCode::CONFLICT, e.class, e.message),
        Refused::Busy { per_key, error: e } => {
            let status = if per_key { StatusCode::TOO_MANY_REQUESTS } else { StatusCode::SERVICE_UNAVAILABLE };
            HttpError::retry_later(status, e.class, e.message, Duration::from_secs(1))
        }
        Refused::Invalid(e) => HttpError::from(&e),
    })
}
