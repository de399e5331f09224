//! Sending peers their messages over HTTP (a store, `POST .../messages`),
//! and the two questions a sender asks about one it sent: was it matched
//! (a long poll), and may it be taken back (withdraw). A bound on requests
//! in flight to any one peer: beyond it, sends queue here instead of
//! opening more sockets. Failures are retried as `retrying` says.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Method, Request, StatusCode};
use parking_lot::Mutex;
use tokio::sync::Semaphore;

use crate::body::Chunks;
use crate::config::{failure_timeout, startup_timeout};
use crate::error::{Error, ErrorClass, Result};
use crate::net::http::Http;
use crate::wire::frame::Envelope;
use crate::wire::url;

/// Requests in flight to one peer before further sends wait their turn.
const PER_PEER_IN_FLIGHT: usize = 32;

/// The client of peers' message operations, over one `Http` pool.
#[derive(Default)]
pub struct Stores {
    http: Http,
    peers: Mutex<HashMap<String, Arc<Semaphore>>>,
}

impl Stores {
    pub fn new() -> Self {
        Stores::default()
    }

    /// The HTTP client underneath (liveness polls peers' status on it).
    pub fn http(&self) -> &Http {
        &self.http
    }

    fn limit(&self, base: &str) -> Arc<Semaphore> {
        self.peers.lock().entry(base.to_string()).or_insert_with(|| Arc::new(Semaphore::new(PER_PEER_IN_FLIGHT))).clone()
    }

    /// Store a message in rank `dest`'s mailbox at endpoint `base` (retried
    /// as `retrying` says, with the same envelope, so the receiver drops a
    /// copy it already has).
    pub async fn store(&self, base: &str, domain: &str, dest: u32, token: &str, env: &Envelope, chunks: Vec<Bytes>) -> Result<()> {
        let limit = self.limit(base);
        let _permit = limit.acquire().await.expect("semaphore never closed");
        let uri = url::join(base, &format!("/domains/{domain}/ranks/{dest}/messages"));
        let request = || {
            let mut req = Request::builder()
                .method(Method::POST)
                .uri(&uri)
                .header(http::header::AUTHORIZATION, format!("Bearer {token}"))
                .header(http::header::CONTENT_TYPE, "application/octet-stream");
            for (k, v) in env.to_headers() {
                req = req.header(k, v);
            }
            req.body(Chunks::new(chunks.clone()))
        };
        self.retrying(&format!("rank {dest} at {base}"), &uri, request).await.map(drop)
    }

    /// Wait until a receive at rank `dest` took message `seq` from rank
    /// `source` (`service::matched`, a long poll: outside the in-flight bound).
    pub async fn matched(&self, base: &str, domain: &str, dest: u32, source: u32, seq: u64, token: &str) -> Result<()> {
        #[derive(serde::Deserialize)]
        struct Answer {
            matched: bool,
        }
        let uri = url::join(base, &format!("/domains/{domain}/ranks/{dest}/messages/{source}/{seq}/matched"));
        loop {
            // Each poll is bounded by the receiver; not matched yet: ask again.
            let body = self.ask(Method::GET, &uri, &format!("rank {dest} at {base}"), token).await?;
            match serde_json::from_slice::<Answer>(&body) {
                Ok(a) if a.matched => return Ok(()),
                Ok(_) => continue,
                Err(e) => return Err(Error::new(ErrorClass::Other, format!("{uri} answered invalid JSON: {e}"))),
            }
        }
    }

    /// Take back message `seq` from rank `source` at rank `dest` unless a
    /// receive took it (`service::withdraw`): true if withdrawn.
    pub async fn withdraw(&self, base: &str, domain: &str, dest: u32, source: u32, seq: u64, token: &str) -> Result<bool> {
        #[derive(serde::Deserialize)]
        struct Answer {
            withdrawn: bool,
        }
        let uri = url::join(base, &format!("/domains/{domain}/ranks/{dest}/messages/{source}/{seq}"));
        let body = self.ask(Method::DELETE, &uri, &format!("rank {dest} at {base}"), token).await?;
        serde_json::from_slice::<Answer>(&body)
            .map(|a| a.withdrawn)
            .map_err(|e| Error::new(ErrorClass::Other, format!("{uri} answered invalid JSON: {e}")))
    }

    /// A request without a body about something at `peer`, `retrying`.
    async fn ask(&self, method: Method, uri: &str, peer: &str, token: &str) -> Result<Bytes> {
        let request = || {
            Request::builder()
                .method(method.clone())
                .uri(uri)
                .header(http::header::AUTHORIZATION, format!("Bearer {token}"))
                .body(Chunks::empty())
        };
        self.retrying(peer, uri, request).await
    }

    /// Send `request()` until it gets an answer: a transient failure
    /// (connection refused or reset, an answer cut off, 502/503/504) is
    /// tried again for up to the failure timeout; pushback (429: the
    /// receiver holds too many unreceived messages) for as long as it
    /// lasts, since the receiver is there; "not yet" (503 with
    /// `Retry-After`: the instance's *run* request has not arrived) for up
    /// to the startup timeout. Ok: a success's body.
    async fn retrying(&self, peer: &str, uri: &str, request: impl Fn() -> http::Result<Request<Chunks>>) -> Result<Bytes> {
        let mut pause = Duration::from_millis(1);
        let mut deadline = Instant::now() + failure_timeout();
        let mut not_yet_since: Option<Instant> = None;
        loop {
            let req = request().map_err(|e| Error::new(ErrorClass::Arg, format!("bad request to {uri}: {e}")))?;
            let fault = match self.http.exchange(req, uri, peer).await {
                Ok(a) if a.status.is_success() => return Ok(a.body),
                Ok(a) if a.status == StatusCode::TOO_MANY_REQUESTS => {
                    deadline = Instant::now() + failure_timeout();
                    None
                }
                Ok(a) if a.status == StatusCode::SERVICE_UNAVAILABLE && a.retry_after => {
                    let since = *not_yet_since.get_or_insert_with(Instant::now);
                    deadline = deadline.max(since + startup_timeout());
                    Some(a.error(peer))
                }
                Ok(a) if matches!(a.status, StatusCode::BAD_GATEWAY | StatusCode::SERVICE_UNAVAILABLE | StatusCode::GATEWAY_TIMEOUT) => {
                    Some(a.error(peer))
                }
                Ok(a) => return Err(a.error(peer)),
                // Final: a TLS refusal, an unusable MPIWS_CA_FILE.
                Err(e) if e.class != ErrorClass::ProcFailed => return Err(e),
                Err(e) => Some(e),
            };
            if let Some(e) = fault {
                if Instant::now() + pause > deadline {
                    return Err(e);
                }
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(50));
        }
    }
}
