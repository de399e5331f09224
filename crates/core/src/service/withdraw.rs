//! `DELETE /domains/{domain}/ranks/{rank}/messages/{source}/{seq}`: take
//! back a message whose send timed out, unless a receive already took it.
//! Answers 200 `{"withdrawn": true}` (it will never be received: removed if
//! it waits here, dropped if it arrives later) or `{"withdrawn": false}`
//! (a receive took it: the send completes after all). Also asked of an
//! ended instance, which answers from what it had received.

use http::{Request, StatusCode};
use hyper::body::Incoming;
use serde_json::json;

use crate::service::admit::admit_message;
use crate::service::reply::{self, Reply};
use crate::service::Endpoint;

pub async fn withdraw(ep: &Endpoint, domain: &str, rank: &str, source: &str, seq: &str, req: Request<Incoming>) -> Reply {
    let (instance, source, seq) = match admit_message(ep, domain, rank, source, seq, req.headers()).await {
        Ok(m) => m,
        Err(e) => return e.into(),
    };
    reply::json(StatusCode::OK, &json!({"withdrawn": instance.take_back(source, seq)}))
}
