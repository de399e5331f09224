//! `GET /domains/{domain}/ranks/{rank}/messages/{source}/{seq}/matched`: a
//! long poll that answers once a receive at rank `rank` took message `seq`
//! from rank `source`. How a sender learns that a standard send was matched
//! when it did not ask at the send (over stores, or asked late): a
//! synchronous send learns it from its own answer or acknowledgement.
//!
//! 200 `{"matched": true}` when taken (at once if it was, also after the
//! instance ended); 410 if the instance ends first; 409 if the message was
//! refused, so never will be. A poll is held at most `?wait=` seconds
//! (default and longest: five minutes), then answers `{"matched": false}`
//! and the sender asks again: no request is held for ever.

use http::{Request, StatusCode};
use hyper::body::Incoming;
use serde_json::json;

use crate::error::ErrorClass;
use crate::service::admit::admit_message;
use crate::service::reply::{self, error, from_error, Reply};
use crate::service::Endpoint;

pub async fn matched(ep: &Endpoint, domain: &str, rank: &str, source: &str, seq: &str, req: Request<Incoming>) -> Reply {
    let (instance, source, seq) = match admit_message(ep, domain, rank, source, seq, req.headers()).await {
        Ok(m) => m,
        Err(e) => return e.into(),
    };
    let wait = match reply::wait_param(&req) {
        Ok(w) => w.unwrap_or(reply::MAX_WAIT),
        Err(e) => return e.into(),
    };
    if let Some(rx) = instance.watch_match(source, seq) {
        match tokio::time::timeout(wait, rx).await {
            Err(_) => return reply::json(StatusCode::OK, &json!({"matched": false})),
            Ok(Err(_)) => {
                return match instance.ended() {
                    Some(e) => from_error(&e),
                    None => error(
                        StatusCode::CONFLICT,
                        ErrorClass::Other,
                        format!("message {seq} from rank {source} was refused: no receive will take it"),
                    ),
                }
            }
            Ok(Ok(_)) => {}
        }
    }
    reply::json(StatusCode::OK, &json!({"matched": true}))
}
