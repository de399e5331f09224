//! The jobs layer's HTTP operations (`crate::jobs` is what they act on),
//! one per file: [`describe`] (`GET /programs[/{name}]`), [`spawn`] (`POST
//! /programs/{name}/jobs`, and `.../call`), [`status`], [`list`],
//! [`results`], [`kill`], [`files`] (uploads, and a job's files and
//! streams). What the register refuses becomes its answer here.

pub mod describe;
pub mod files;
pub mod kill;
pub mod list;
pub mod outputs;
pub mod results;
pub mod spawn;
pub mod status;

use http::StatusCode;

use crate::error::ErrorClass;
use crate::jobs::Refusal;
use crate::service::reply::HttpError;

/// The answer to a refusal of the register: 404, or 503 (the endpoint's
/// table is full) or 429 (the key's share is) with when to try again.
pub fn refused(r: Refusal) -> HttpError {
    match r {
        Refusal::NotFound(message) => HttpError::new(StatusCode::NOT_FOUND, ErrorClass::Arg, message),
        Refusal::Full { per_key, message, retry_after } => {
            let status = if per_key { StatusCode::TOO_MANY_REQUESTS } else { StatusCode::SERVICE_UNAVAILABLE };
            HttpError::retry_later(status, ErrorClass::Other, message, retry_after)
        }
    }
}

/// The answer to a request refused by the disk quota (`jobs::disk`).
pub fn insufficient_storage(message: String) -> HttpError {
    HttpError::new(StatusCode::INSUFFICIENT_STORAGE, ErrorClass::Other, message)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::service::reply::Reply;

    #[test]
    fn refusals_are_answered_404_503_and_429_with_when_to_retry() {
        let r = Reply::from(refused(Refusal::NotFound("no job x here".into())));
        assert_eq!((r.status(), r.headers().get(http::header::RETRY_AFTER)), (StatusCode::NOT_FOUND, None));
        let full = |per_key| Refusal::Full { per_key, message: "full".into(), retry_after: Duration::from_secs(60) };
        let r = Reply::from(refused(full(false)));
        assert_eq!((r.status(), r.headers()[http::header::RETRY_AFTER].to_str().unwrap()), (StatusCode::SERVICE_UNAVAILABLE, "60"));
        assert_eq!(Reply::from(refused(full(true))).status(), StatusCode::TOO_MANY_REQUESTS);
    }
}
