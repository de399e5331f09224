//! `/dashboard/`: a page that shows what this endpoint (or a run's own
//! endpoint: `mpiws run`, `mpiws workflow run`, a pool executor) is
//! doing, live, in a browser.
//!
//! Rules:
//! - The page is three files built into the binary ([`page`]): no data,
//!   no secret, no asset from elsewhere, so they are served to anyone,
//!   each with a Content-Security-Policy that lets it load nothing but
//!   itself and talk to nothing but this endpoint.
//! - What it shows is a document built when asked ([`document`]): the
//!   endpoint ([`view`]), the domains ([`domains`]), the runs' own
//!   documents ([`board`]). It holds every instance, job and output tail
//!   here, so it is served to a key with `admin` only, which the page
//!   sends as `Authorization` (the user pastes it once; it stays in the
//!   browser's session storage and never in a URL).
//! - `GET /dashboard/api/events` sends the document again each time it
//!   changed (server-sent events, looked at every [`EVERY`]). Nothing is
//!   gathered while no page is open; open streams are bounded
//!   (`max_dashboard_streams`, 429 beyond) and end with the endpoint.

pub mod board;
mod domains;
mod view;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderValue, Request, Response, StatusCode};
use serde_json::{json, Value};

use crate::body::Chunks;
use crate::error::ErrorClass;
use crate::keys::Key;
use crate::service::reply::{error, json, Reply};
use crate::service::Endpoint;

/// How often an open stream looks for a change.
const EVERY: Duration = Duration::from_secs(1);
/// A comment sent on a stream that had nothing to say for this long (proxies cut silent connections).
const KEEPALIVE: Duration = Duration::from_secs(15);

/// What only a page may do: load itself, and call this endpoint.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; \
                   base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

const FILES: [(&str, &str, &str); 3] = [
    ("", "text/html; charset=utf-8", include_str!("assets/index.html")),
    ("app.js", "text/javascript; charset=utf-8", include_str!("assets/app.js")),
    ("app.css", "text/css; charset=utf-8", include_str!("assets/app.css")),
];

/// Pages open on the endpoint's event stream now.
#[derive(Default)]
pub struct Watchers(AtomicU64);

impl Watchers {
    pub fn count(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// `GET /dashboard/` and its files (`file`: "" for the page). `/dashboard`
/// is sent on to `/dashboard/`, where the page's relative links work.
pub fn page<B>(req: &Request<B>, file: &str) -> Reply {
    if file.is_empty() && !req.uri().path().ends_with('/') {
        let mut r = Response::new(Chunks::empty());
        *r.status_mut() = StatusCode::PERMANENT_REDIRECT;
        r.headers_mut().insert(http::header::LOCATION, HeaderValue::from_static("/dashboard/"));
        return r;
    }
    let Some((_, kind, text)) = FILES.iter().find(|(name, _, _)| *name == file) else {
        return error(StatusCode::NOT_FOUND, ErrorClass::Arg, format!("no file {file:?} in the dashboard"));
    };
    let mut r = Response::new(Chunks::new([Bytes::from_static(text.as_bytes())]));
    let h = r.headers_mut();
    h.insert(http::header::CONTENT_TYPE, HeaderValue::from_static(kind));
    for (name, value) in [
        ("content-security-policy", CSP),
        ("x-content-type-options", "nosniff"),
        ("referrer-policy", "no-referrer"),
        ("x-frame-options", "DENY"),
        ("cache-control", "no-cache"),
    ] {
        h.insert(name, HeaderValue::from_static(value));
    }
    r
}

/// The dashboard's document now, as `caller` sees it.
pub async fn document(ep: &Endpoint, caller: &Key) -> Value {
    json!({
        "endpoint": view::endpoint(ep, caller, ep.watchers.count()),
        "domains": domains::gather(ep).await,
        "runs": ep.board.runs(),
    })
}

/// `GET /dashboard/api/state`.
pub async fn state(ep: &Endpoint, caller: &Key) -> Reply {
    json(StatusCode::OK, &document(ep, caller).await)
}

/// `GET /dashboard/api/events`: `event: state` with the document, at once and after each change.
pub fn events(ep: &Arc<Endpoint>, caller: Key) -> Reply {
    let bound = ep.config.max_dashboard_streams as u64;
    if ep.watchers.0.fetch_add(1, Ordering::AcqRel) >= bound {
        ep.watchers.0.fetch_sub(1, Ordering::AcqRel);
        let m = format!("this endpoint serves at most {bound} dashboard streams at once (--max-dashboard-streams)");
        let mut r = error(StatusCode::TOO_MANY_REQUESTS, ErrorClass::Other, m.clone());
        crate::service::metrics::mark(&mut r, &m);
        return r;
    }
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(2);
    let weak = Arc::downgrade(ep);
    tokio::spawn(async move {
        let mut last = String::new();
        let mut said = Instant::now();
        loop {
            let Some(ep) = weak.upgrade() else { break };
            let text = serde_json::to_string(&document(&ep, &caller).await).expect("a document encodes");
            let send = if text != last {
                Some(format!("event: state\ndata: {text}\n\n"))
            } else {
                (said.elapsed() >= KEEPALIVE).then(|| ": keepalive\n\n".to_string())
            };
            if let Some(send) = send {
                if tx.send(Bytes::from(send)).await.is_err() {
                    break; // the page went away
                }
                said = Instant::now();
                last = text;
            }
            tokio::select! {
                _ = tokio::time::sleep(EVERY) => {}
                _ = ep.closing() => break,
                _ = tx.closed() => break,
            }
        }
        if let Some(ep) = weak.upgrade() {
            ep.watchers.0.fetch_sub(1, Ordering::AcqRel);
        }
    });
    let mut r = Response::new(Chunks::live(rx));
    let h = r.headers_mut();
    h.insert(http::header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    h.insert(http::header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert("x-accel-buffering", HeaderValue::from_static("no")); // a proxy (nginx) passes each event on at once
    r
}
