//! The checks every request about an instance's messages passes (a store,
//! a stream upgrade, *matched*, *withdraw*), in order: the rank in the
//! path, a token, the instance, the token's value, the instance still
//! running (where it must be), the source rank.

use std::sync::Arc;
use std::time::Duration;

use http::{HeaderMap, StatusCode};

use crate::error::ErrorClass;
use crate::rank::binding::valid_domain_id;
use crate::rank::Instance;
use crate::service::endpoint::Found;
use crate::service::reply::{self, authorize, parse_rank, HttpError};
use crate::service::Endpoint;

/// The checks a store and a stream upgrade share, in order: the rank in the
/// path, a token, the instance, the token's value, the instance still
/// running, the source rank.
pub async fn admit(ep: &Endpoint, domain: &str, rank: &str, headers: &HeaderMap, source: u32) -> Result<Arc<Instance>, HttpError> {
    let instance = admit_ended(ep, domain, rank, headers, source).await?;
    match instance.ended() {
        Some(e) => Err(HttpError::from(&e)),
        None => Ok(instance),
    }
}

/// `admit`, but an instance that ended passes too (a question about what it received).
///
/// An instance that does not exist yet (its *run* request has not arrived)
/// is answered 503 with `Retry-After`, and the sender tries again: nothing
/// is held for a caller whose token cannot be checked yet. Where another
/// rank of the domain lives here, the token is checked against it first.
pub async fn admit_ended(ep: &Endpoint, domain: &str, rank: &str, headers: &HeaderMap, source: u32) -> Result<Arc<Instance>, HttpError> {
    let rank = parse_rank(rank)?;
    if !valid_domain_id(domain) {
        // No instance can ever have it: not "try again".
        return Err(HttpError::new(StatusCode::BAD_REQUEST, ErrorClass::Arg, format!("invalid domain id {domain:?}")));
    }
    if reply::bearer(headers).is_none() {
        return Err(HttpError::new(StatusCode::UNAUTHORIZED, ErrorClass::Arg, "missing 'Authorization: Bearer <domain token>'"));
    }
    let instance = match ep.find(domain, rank) {
        Some(Found::Live(i)) => i,
        // Ended a while ago: only its summary is kept, which answers no question about messages.
        Some(Found::Ended(ended)) => {
            authorize(headers, &ended.token)?;
            return Err(HttpError::from(&ended.why));
        }
        None => {
            if let Some(sibling) = ep.any_instance_of(domain) {
                authorize(headers, &sibling.binding.token)?;
                if rank >= sibling.size() {
                    return Err(HttpError::new(
                        StatusCode::BAD_REQUEST,
                        ErrorClass::Rank,
                        format!("rank {rank} out of range: domain {domain} has {} ranks", sibling.size()),
                    ));
                }
            }
            let message = format!("no instance of domain {domain} rank {rank} here yet; try again");
            return Err(HttpError::retry_later(StatusCode::SERVICE_UNAVAILABLE, ErrorClass::Comm, message, Duration::from_secs(1)));
        }
    };
    authorize(headers, &instance.binding.token)?;
    if source >= instance.size() {
        return Err(HttpError::new(
            StatusCode::BAD_REQUEST,
            ErrorClass::Rank,
            format!("source rank {source} out of range: domain {domain} has {} ranks", instance.size()),
        ));
    }
    Ok(instance)
}

/// For a question about one message (`matched`, `withdraw`): its sender
/// and sequence number from the path, and the instance, ended or not.
pub async fn admit_message(
    ep: &Endpoint,
    domain: &str,
    rank: &str,
    source: &str,
    seq: &str,
    headers: &HeaderMap,
) -> Result<(Arc<Instance>, u32, u64), HttpError> {
    let (Ok(source), Ok(seq)) = (source.parse::<u32>(), seq.parse::<u64>()) else {
        return Err(HttpError::new(
            StatusCode::BAD_REQUEST,
            ErrorClass::Arg,
            format!("invalid source {source:?} or sequence number {seq:?}"),
        ));
    };
    Ok((admit_ended(ep, domain, rank, headers, source).await?, source, seq))
}
