//! The process's HTTP client: one HTTP/1.1 connection pool, persistent
//! connections, http and https (verified as `net::tls` says), opened by
//! `net::connector` (through the environment's proxy where it names one).
//! JSON calls (the launcher, the jobs client, liveness polls), one-shot
//! posts, and files streamed to and from disk; `net::stores` sends peers
//! their messages over it. A request to a pinned relayed URL goes through
//! a tunnel to that endpoint (`net::tunnel`): sent to the name
//! `tunnel::synthetic` gives it, at the endpoint's own path.

use std::path::Path;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Method, Request, StatusCode};
use http_body_util::BodyExt;
use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde::de::DeserializeOwned;
use tokio::io::AsyncWriteExt;

use crate::body::Chunks;
use crate::config::failure_timeout;
use crate::error::{Error, ErrorClass, Result};
use crate::net::connector::Connector;
use crate::net::{proxy, tls, tunnel};
use crate::wire::url;

type HttpClient = Client<HttpsConnector<Connector>, Chunks>;

/// How often a request answered "not yet" (503 with `Retry-After`) is sent again.
const NOT_YET: Duration = Duration::from_millis(250);

#[derive(Default)]
pub struct Http {
    /// Made at first use, so that `MPIWS_CA_FILE` may be set until then.
    client: OnceLock<Result<HttpClient>>,
}

impl Http {
    pub fn new() -> Self {
        Http::default()
    }

    /// The HTTP client: http and https (verified as `net::tls` says), HTTP/1.1.
    fn client(&self) -> Result<&HttpClient> {
        let made = self.client.get_or_init(|| {
            let https = HttpsConnectorBuilder::new()
                .with_tls_config((*tls::client_config()?).clone())
                .https_or_http()
                .enable_http1()
                .wrap_connector(Connector);
            Ok(Client::builder(TokioExecutor::new()).http1_max_buf_size(4 << 20).build(https))
        });
        made.as_ref().map_err(Clone::clone)
    }

    /// Send a request with a JSON (or empty) body and decode a JSON answer.
    /// An idempotent one (GET, DELETE, and a POST the protocol makes so, such
    /// as *run*: `replayable`) that reaches nobody is sent again for up to the
    /// failure timeout: a proxy or server may close a kept-alive connection
    /// just as a request goes out on it (tinyproxy does), which is no sign
    /// that the peer is gone. So is one answered 503 with `Retry-After`,
    /// every `NOT_YET`.
    pub async fn call_json<T: DeserializeOwned>(
        &self,
        method: Method,
        uri: &str,
        token: Option<&str>,
        body: Option<&serde_json::Value>,
    ) -> Result<T> {
        self.call_json_replayable(method, uri, token, body, false).await
    }

    /// `call_json`, saying whether the request may be sent twice though its method is not idempotent.
    pub async fn call_json_replayable<T: DeserializeOwned>(
        &self,
        method: Method,
        uri: &str,
        token: Option<&str>,
        body: Option<&serde_json::Value>,
        replayable: bool,
    ) -> Result<T> {
        let idempotent = replayable || method.is_idempotent();
        let mut pause = Duration::from_millis(1);
        let mut failing_since: Option<Instant> = None;
        loop {
            let mut req = Request::builder().method(method.clone()).uri(uri);
            if let Some(t) = token {
                req = req.header(http::header::AUTHORIZATION, format!("Bearer {t}"));
            }
            let chunks = match body {
                Some(v) => {
                    req = req.header(http::header::CONTENT_TYPE, "application/json");
                    Chunks::json(v)
                }
                None => Chunks::empty(),
            };
            let req = req.body(chunks).map_err(|e| Error::new(ErrorClass::Arg, format!("bad request to {uri}: {e}")))?;
            match self.exchange(req, uri, uri).await {
                // "Not yet, try again" (503 with Retry-After: a relay whose
                // endpoint is still connecting, say) is tried again like a
                // peer not reached, within the failure timeout.
                Ok(a) if idempotent && a.status == StatusCode::SERVICE_UNAVAILABLE && a.retry_after => {
                    let since = *failing_since.get_or_insert_with(Instant::now);
                    if since.elapsed() + pause > failure_timeout() {
                        return a.json(uri);
                    }
                    tokio::time::sleep(NOT_YET).await;
                }
                Ok(a) => return a.json(uri),
                Err(e) if idempotent && e.class == ErrorClass::ProcFailed => {
                    let since = *failing_since.get_or_insert_with(Instant::now);
                    if since.elapsed() + pause > failure_timeout() {
                        return Err(e);
                    }
                }
                Err(e) => return Err(e),
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(50));
        }
    }

    /// POST a JSON body once, not retried: Ok(Ok(body)) on success,
    /// Ok(Err((status, error))) for an error answer, Err if none came.
    pub async fn post_once(
        &self,
        uri: &str,
        key: Option<&str>,
        body: &serde_json::Value,
    ) -> Result<std::result::Result<Bytes, (StatusCode, Error)>> {
        let mut req = Request::post(uri).header(http::header::CONTENT_TYPE, "application/json");
        if let Some(k) = key {
            req = req.header(http::header::AUTHORIZATION, format!("Bearer {k}"));
        }
        let req = req.body(Chunks::json(body)).map_err(|e| Error::new(ErrorClass::Arg, format!("bad request to {uri}: {e}")))?;
        let a = self.exchange(req, uri, uri).await?;
        Ok(if a.status.is_success() { Ok(a.body) } else { Err((a.status, a.error(uri))) })
    }

    /// GET `uri` into the file `to`, as it arrives; returns its size.
    pub async fn download(&self, uri: &str, to: &Path, key: Option<&str>) -> Result<u64> {
        let mut req = Request::get(uri);
        if let Some(k) = key {
            req = req.header(http::header::AUTHORIZATION, format!("Bearer {k}"));
        }
        let req = req.body(Chunks::empty()).map_err(|e| Error::new(ErrorClass::Arg, format!("bad URL {uri}: {e}")))?;
        let (resp, via) = self.send(req, uri, uri).await?;
        let status = resp.status();
        let mut body = resp.into_body();
        let cut = |e: hyper::Error| Error::new(ErrorClass::Other, format!("{uri}: answer cut off: {e}"));
        if !status.is_success() {
            let bytes = body.collect().await.map_err(cut)?.to_bytes();
            return Err(error_from_response(status, &bytes, &through(uri, via.as_ref())));
        }
        let disk = |e: std::io::Error| Error::new(ErrorClass::Other, format!("cannot write {}: {e}", to.display()));
        let mut file = tokio::fs::File::create(to).await.map_err(disk)?;
        let mut size = 0;
        while let Some(frame) = body.frame().await {
            if let Ok(data) = frame.map_err(cut)?.into_data() {
                file.write_all(&data).await.map_err(disk)?;
                size += data.len() as u64;
            }
        }
        file.flush().await.map_err(disk)?;
        Ok(size)
    }

    /// POST (or PUT: `put`) the file `from` to `uri` with the endpoint `key`, read as it is sent; the JSON answer.
    pub async fn upload(&self, uri: &str, from: &Path, key: Option<&str>, put: bool) -> Result<serde_json::Value> {
        let unreadable = |e: std::io::Error| Error::new(ErrorClass::Arg, format!("cannot read {}: {e}", from.display()));
        let file = tokio::fs::File::open(from).await.map_err(unreadable)?;
        let len = file.metadata().await.map_err(unreadable)?.len();
        let method = if put { http::Method::PUT } else { http::Method::POST };
        let mut req = Request::builder().method(method).uri(uri).header(http::header::CONTENT_TYPE, "application/octet-stream");
        if let Some(k) = key {
            req = req.header(http::header::AUTHORIZATION, format!("Bearer {k}"));
        }
        let req = req.body(Chunks::file(file, len)).map_err(|e| Error::new(ErrorClass::Arg, format!("bad URL {uri}: {e}")))?;
        let a = self.exchange(req, uri, uri).await?;
        a.json(uri)
    }

    /// Send `req` to `target` (its URL as given: `req`'s URI has lost any
    /// pin, which `http::Uri` drops with the fragment); a plain http request
    /// that goes to a proxy in absolute form carries the proxy's
    /// credentials. Also: that proxy.
    async fn send(
        &self,
        mut req: Request<Chunks>,
        target: &str,
        peer: &str,
    ) -> Result<(http::Response<hyper::body::Incoming>, Option<proxy::Proxy>)> {
        // Every URL a request goes to passes the one parser (wire::url) first.
        let target = url::parse(target).map_err(|why| Error::new(ErrorClass::Arg, why))?;
        if let Some(t) = target.tunnel() {
            // Through the tunnel the endpoint is addressed directly; Host
            // is the relay's, as on a relayed request.
            let uri = format!("http://{}{}", tunnel::synthetic(&t)?, t.path);
            *req.uri_mut() = uri.parse().map_err(|e| Error::new(ErrorClass::Arg, format!("bad URL {peer}: {e}")))?;
            let host =
                http::HeaderValue::from_str(&t.relay.authority()).map_err(|e| Error::new(ErrorClass::Arg, format!("{peer}: {e}")))?;
            req.headers_mut().insert(http::header::HOST, host);
            let resp = self.client()?.request(req).await.map_err(|e| unreachable(peer, &e))?;
            return Ok((resp, None));
        }
        if tunnel::tunnel_of(&target.host).is_some() {
            return Err(Error::new(ErrorClass::Arg, format!("{peer}: not a host name (one mpiws makes for a pinned URL)")));
        }
        let via = if target.tls { None } else { proxy::for_url("http", &target.authority())? };
        if let Some(p) = &via {
            p.authorize(req.headers_mut());
        }
        let resp = self.client()?.request(req).await.map_err(|e| unreachable(peer, &e))?;
        Ok((resp, via))
    }

    /// Send `req` to `target` (as `send`) and read the whole answer (`peer`
    /// names the other side in errors).
    pub(crate) async fn exchange(&self, req: Request<Chunks>, target: &str, peer: &str) -> Result<Answer> {
        let (resp, via) = self.send(req, target, peer).await?;
        let status = resp.status();
        let retry_after = resp.headers().contains_key(http::header::RETRY_AFTER);
        // A forward proxy refusing our credentials: 407, or (tinyproxy 1.11)
        // 401 asking for Basic ones, which an mpiws endpoint never does.
        let basic =
            resp.headers().get(http::header::WWW_AUTHENTICATE).and_then(|v| v.to_str().ok()).is_some_and(|v| v.starts_with("Basic"));
        let proxy_refused =
            via.is_some() && (status == StatusCode::PROXY_AUTHENTICATION_REQUIRED || (status == StatusCode::UNAUTHORIZED && basic));
        let body = match resp.into_body().collect().await {
            Ok(body) => body.to_bytes(),
            // An error answer cut short (a proxy refusing a request before
            // reading its body closes the connection): its status says enough.
            Err(_) if status.is_client_error() || status.is_server_error() => Bytes::new(),
            Err(e) => return Err(Error::new(ErrorClass::ProcFailed, format!("{peer}: answer cut off: {e}"))),
        };
        Ok(Answer { status, retry_after, body, via, proxy_refused })
    }
}

/// An answer read whole.
pub(crate) struct Answer {
    pub status: StatusCode,
    /// The server said when to try again.
    pub retry_after: bool,
    pub body: Bytes,
    /// The proxy that forwarded the request, if one did.
    via: Option<proxy::Proxy>,
    /// That proxy refused the credentials in its URL.
    proxy_refused: bool,
}

impl Answer {
    pub fn error(&self, peer: &str) -> Error {
        match &self.via {
            Some(p) if self.proxy_refused => {
                proxy::credentials_refused(&p.name(), &format!("a request to {peer}"), &self.status.to_string())
            }
            _ => error_from_response(self.status, &self.body, &through(peer, self.via.as_ref())),
        }
    }

    /// A success's JSON body, decoded; an error answer as an Error.
    fn json<T: DeserializeOwned>(&self, uri: &str) -> Result<T> {
        if !self.status.is_success() {
            return Err(self.error(uri));
        }
        if self.status == StatusCode::NO_CONTENT {
            // Nothing to say (a removal): null, to whoever reads it as JSON.
            return serde_json::from_value(serde_json::Value::Null).map_err(|e| Error::new(ErrorClass::Other, format!("{uri}: {e}")));
        }
        serde_json::from_slice(&self.body).map_err(|e| Error::new(ErrorClass::Other, format!("{uri} answered invalid JSON: {e}")))
    }
}

/// `peer`, and the proxy between, for messages: an answer may be the proxy's.
fn through(peer: &str, via: Option<&proxy::Proxy>) -> String {
    match via {
        Some(p) => format!("{peer} (through {})", p.name()),
        None => peer.to_string(),
    }
}

fn unreachable(peer: &str, e: &hyper_util::client::legacy::Error) -> Error {
    if let Some(refused) = tls::refused(peer, e) {
        return refused;
    }
    // `net::proxy::open` said what failed, naming the peer and any proxy.
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(c) = cause {
        if let Some(ours) = c.downcast_ref::<Error>() {
            return ours.clone();
        }
        cause = c.source();
    }
    Error::new(ErrorClass::ProcFailed, format!("{peer} is unreachable: {}", describe(e)))
}

fn describe(e: &hyper_util::client::legacy::Error) -> String {
    use std::error::Error as _;
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(inner) = src {
        s.push_str(": ");
        s.push_str(&inner.to_string());
        src = inner.source();
    }
    s
}

/// Turn an error answer (`{"error": {"class": N, "message": "..."}}`) into an Error.
pub fn error_from_response(status: StatusCode, body: &[u8], peer: &str) -> Error {
    #[derive(serde::Deserialize)]
    struct Wire {
        error: WireError,
    }
    #[derive(serde::Deserialize)]
    struct WireError {
        class: i64,
        message: String,
    }
    match serde_json::from_slice::<Wire>(body) {
        Ok(w) => Error::new(ErrorClass::from_code(w.error.class), format!("{peer}: {}", w.error.message)),
        Err(_) => {
            Error::new(ErrorClass::Other, format!("{peer} answered {status}: {}", String::from_utf8_lossy(&body[..body.len().min(200)])))
        }
    }
}
