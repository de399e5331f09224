//! `DELETE /sessions/{id}`: remove a session whole: its running jobs are
//! killed, its jobs and files removed, its bytes given back to the quota
//! (**204**). Only by its owner (or `admin`); to any other key it does not
//! exist (404).

use http::StatusCode;

use crate::error::ErrorClass;
use crate::keys::Key;
use crate::service::reply::{error, no_content, Reply};
use crate::service::sessions::own;
use crate::service::Endpoint;

pub async fn delete(ep: &Endpoint, caller: &Key, id: &str) -> Reply {
    if let Err(e) = own(ep, caller, id) {
        return e.into();
    }
    match ep.jobs.remove_session(id).await {
        true => no_content(),
        false => error(StatusCode::NOT_FOUND, ErrorClass::Arg, format!("no session {id} here")), // removed meanwhile
    }
}
