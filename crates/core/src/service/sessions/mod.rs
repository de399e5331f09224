//! The sessions' HTTP operations (`crate::jobs::session` is what they act
//! on): [`create`] (`POST /sessions`), [`list`] (`GET /sessions`, `GET
//! /sessions/{id}`), [`delete`] (`DELETE /sessions/{id}`) and [`files`]
//! (a session's files: list, download, upload, remove). Jobs run in a
//! session through `POST /programs/{name}/jobs` with `"session": ID`.
//!
//! Every operation asks a key with `jobs` (or `admin`), and acts only on
//! the caller's own sessions: another key's is answered as one that does
//! not exist (404).
//!
//! The standard faces' requests (OGC API - Processes' execute, SOAP's
//! `call` and `spawn`) have no place for a session of their own: there,
//! the HTTP header `Mpiws-Session: ID` places the job in the caller's
//! session ([`from_header`]).

pub mod create;
pub mod delete;
pub mod files;
pub mod list;

use std::sync::Arc;

use crate::jobs::session::Session;
use crate::keys::Key;
use crate::service::jobs::refused;
use crate::service::reply::HttpError;
use crate::service::Endpoint;

/// The caller's session `id` (used now), or the 404 of one that does not exist.
pub fn own(ep: &Endpoint, caller: &Key, id: &str) -> Result<Arc<Session>, HttpError> {
    ep.jobs.own_session(id, caller).map_err(refused)
}

/// The header that places a job of a standard face in a session.
pub const HEADER: &str = "mpiws-session";

/// The caller's session the request's `Mpiws-Session` header names, if it names one.
pub fn from_header(ep: &Endpoint, caller: &Key, headers: &http::HeaderMap) -> Result<Option<Arc<Session>>, HttpError> {
    let Some(v) = headers.get(HEADER) else { return Ok(None) };
    let bad = || HttpError::new(http::StatusCode::BAD_REQUEST, crate::error::ErrorClass::Arg, "Mpiws-Session is a session's id");
    let id = v.to_str().map_err(|_| bad())?.trim();
    if id.is_empty() {
        return Err(bad());
    }
    own(ep, caller, id).map(Some)
}
