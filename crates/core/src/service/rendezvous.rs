//! `POST /rendezvous`: ranks started by someone else (Slurm's `srun`, a
//! Kubernetes Indexed Job, a person with a shell) tell the endpoint that
//! will start their domain where they are: `{"rank": R, "size": N, "url":
//! "http://host:port"}`. That endpoint's owner opens the table for N ranks
//! (`open`) and waits until every rank is in it (`wait`), then starts the
//! domain on those URLs as any launcher does. Registering twice with the
//! same URL is harmless (a retry); a second URL for a rank is a conflict;
//! before the table is open the answer is 503 with `Retry-After` (the
//! ranks may start first). When the domain has ended, the owner closes the
//! table (`close`); ranks that wait to be let go watch `GET /rendezvous`.
//! `register` is the ranks' side.

use std::time::{Duration, Instant};

use http::{Request, StatusCode};
use hyper::body::Incoming;
use parking_lot::{Condvar, Mutex};
use serde::Deserialize;

use crate::error::{Error, ErrorClass, Result};
use crate::net::http::Http;
use crate::service::reply::{error, json, read_body, retry_later, Reply};
use crate::service::Endpoint;
use crate::wire::url;

/// The largest registration body, and the longest URL in it.
const MAX_BODY: usize = 4096;

#[derive(Default)]
pub struct Rendezvous {
    /// The URL of each rank, once registered; empty when none is open.
    urls: Mutex<Vec<Option<String>>>,
    changed: Condvar,
    /// The domain gathered here has ended.
    closed: std::sync::atomic::AtomicBool,
}

#[derive(Debug, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct Registration {
    pub rank: u32,
    pub size: u32,
    pub url: String,
}

impl Rendezvous {
    /// Open the table for a domain of `size` ranks (forgetting any before).
    pub fn open(&self, size: u32) {
        *self.urls.lock() = vec![None; size as usize];
        self.closed.store(false, std::sync::atomic::Ordering::SeqCst);
        self.changed.notify_all();
    }

    /// The domain has ended: ranks waiting to be let go may go.
    pub fn close(&self) {
        self.closed.store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// `GET /rendezvous`: `{"size": N, "registered": K, "closed": bool}`.
    pub fn state(&self) -> serde_json::Value {
        let urls = self.urls.lock();
        serde_json::json!({
            "size": urls.len(),
            "registered": urls.iter().flatten().count(),
            "closed": self.closed.load(std::sync::atomic::Ordering::SeqCst),
        })
    }

    /// Enter one rank; Err: the status and why.
    pub fn register(&self, r: Registration) -> std::result::Result<(), (StatusCode, String)> {
        let mut urls = self.urls.lock();
        let size = urls.len() as u32;
        if size == 0 {
            return Err((StatusCode::SERVICE_UNAVAILABLE, "no rendezvous is open here (yet)".into()));
        }
        if r.size != size {
            return Err((
                StatusCode::CONFLICT,
                format!("this rendezvous is for {size} ranks, not {} (check the size each rank was given)", r.size),
            ));
        }
        if r.rank >= size {
            return Err((StatusCode::BAD_REQUEST, format!("rank {} is not below the size {size}", r.rank)));
        }
        check_url(&r.url).map_err(|why| (StatusCode::BAD_REQUEST, why))?;
        match &urls[r.rank as usize] {
            Some(known) if *known != r.url => Err((
                StatusCode::CONFLICT,
                format!("rank {} is already registered, at {known}; two processes were given the same rank", r.rank),
            )),
            _ => {
                urls[r.rank as usize] = Some(r.url);
                self.changed.notify_all();
                Ok(())
            }
        }
    }

    /// Every rank's URL, once all registered within `timeout`; else the
    /// ranks still missing.
    pub fn wait(&self, timeout: Duration) -> std::result::Result<Vec<String>, Vec<u32>> {
        let deadline = Instant::now() + timeout;
        let mut urls = self.urls.lock();
        loop {
            if !urls.is_empty() && urls.iter().all(Option::is_some) {
                return Ok(urls.iter().flatten().cloned().collect());
            }
            if self.changed.wait_until(&mut urls, deadline).timed_out() {
                return Err(urls.iter().enumerate().filter(|(_, u)| u.is_none()).map(|(r, _)| r as u32).collect());
            }
        }
    }
}

/// An endpoint URL (`wire::url::endpoint`): an origin, or one behind a relay.
fn check_url(text: &str) -> std::result::Result<(), String> {
    url::endpoint(text).map(|_| ())
}

pub fn get(ep: &Endpoint) -> Reply {
    json(StatusCode::OK, &ep.rendezvous.state())
}

pub async fn post(ep: &Endpoint, req: Request<Incoming>) -> Reply {
    if let Err(e) = crate::service::guard::json_body(req.headers()) {
        return e.into();
    }
    let body = match read_body(ep, req.into_body(), MAX_BODY, "a registration").await {
        Ok(b) => b,
        Err(e) => return e.into(),
    };
    let registration: Registration = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => return error(StatusCode::BAD_REQUEST, ErrorClass::Arg, format!("malformed registration: {e}")),
    };
    match ep.rendezvous.register(registration) {
        Ok(()) => json(StatusCode::OK, &serde_json::json!({"registered": true})),
        Err((StatusCode::SERVICE_UNAVAILABLE, why)) => {
            retry_later(StatusCode::SERVICE_UNAVAILABLE, ErrorClass::Arg, why, Duration::from_secs(1))
        }
        Err((status, why)) => error(status, ErrorClass::Arg, why),
    }
}

/// A rank's side: register `r` at the rendezvous `url` with the endpoint
/// `key`, trying again while it is unreachable, not open yet or busy (the
/// ranks start in any order; a pod's name may not resolve yet), for up to
/// `timeout`. A refusal (wrong key, size, rank) is final at once.
pub async fn register(url: &str, key: &str, r: &Registration, timeout: Duration) -> Result<()> {
    let http = Http::new();
    let uri = url::join(url, "/rendezvous");
    let body = serde_json::to_value(r).expect("a registration is JSON");
    let deadline = Instant::now() + timeout;
    let mut pause = Duration::from_millis(50);
    loop {
        let last = match http.post_once(&uri, Some(key), &body).await {
            Ok(Ok(_)) => return Ok(()),
            Ok(Err((status, e))) if status.is_server_error() || status == StatusCode::TOO_MANY_REQUESTS => e,
            Ok(Err((_, e))) => return Err(e),
            Err(e) if e.class == ErrorClass::ProcFailed => e,
            Err(e) => return Err(e),
        };
        if Instant::now() + pause > deadline {
            return Err(Error::new(
                ErrorClass::ProcFailed,
                format!("no rendezvous at {url} within {} s: {}", timeout.as_secs_f64(), last.message),
            ));
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_secs(2));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reg(rank: u32, size: u32, url: &str) -> Registration {
        Registration { rank, size, url: url.into() }
    }

    #[test]
    fn ranks_register_until_all_are_there() {
        let r = Rendezvous::default();
        assert_eq!(r.register(reg(0, 2, "http://a:1")).unwrap_err().0, StatusCode::SERVICE_UNAVAILABLE);
        r.open(2);
        r.register(reg(1, 2, "http://b:2")).unwrap();
        assert_eq!(r.wait(Duration::from_millis(10)), Err(vec![0]));
        r.register(reg(1, 2, "http://b:2")).unwrap(); // a retry
        assert_eq!(r.register(reg(1, 2, "http://c:3")).unwrap_err().0, StatusCode::CONFLICT);
        assert_eq!(r.register(reg(0, 3, "http://a:1")).unwrap_err().0, StatusCode::CONFLICT);
        assert_eq!(r.register(reg(2, 2, "http://a:1")).unwrap_err().0, StatusCode::BAD_REQUEST);
        r.register(reg(0, 2, "https://[::1]:8443")).unwrap();
        assert_eq!(r.wait(Duration::ZERO), Ok(vec!["https://[::1]:8443".to_string(), "http://b:2".to_string()]));
    }

    #[test]
    fn a_waiter_wakes_when_the_last_rank_arrives() {
        let r = std::sync::Arc::new(Rendezvous::default());
        r.open(1);
        let r2 = r.clone();
        let t = std::thread::spawn(move || r2.wait(Duration::from_secs(30)));
        std::thread::sleep(Duration::from_millis(20));
        r.register(reg(0, 1, "http://a:1")).unwrap();
        assert_eq!(t.join().unwrap(), Ok(vec!["http://a:1".to_string()]));
    }

    #[test]
    fn only_endpoint_urls_are_registered() {
        for bad in [
            "ftp://a:1",
            "http://a:1/path",
            "http://a:1/",
            "http://a:1/relay/",
            "http://a:1/relay/a/b",
            "http://u@a:1",
            "a:1",
            "",
            &format!("http://{}:1", "a".repeat(3000)),
        ] {
            assert!(check_url(bad).is_err(), "{bad}");
        }
        for good in ["http://10.0.0.1:7070", "https://mpiws-0.mpiws-ranks:7070", "http://[fe80::1]:80", "https://relay:443/relay/lab-1"] {
            assert!(check_url(good).is_ok(), "{good}");
        }
    }
}
