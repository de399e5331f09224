//! `GET /`: what this endpoint serves and which domains it hosts.

use http::StatusCode;

use crate::service::reply::{json, Reply};
use crate::service::Endpoint;

pub fn describe(ep: &Endpoint) -> Reply {
    json(StatusCode::OK, &ep.describe())
}
