//! Accepts connections (HTTP/1.1 with keep-alive, or h2c; inside TLS when
//! the endpoint serves https) and routes each request to its operation.
//!
//! | method | path                                   | operation  |
//! |--------|----------------------------------------|------------|
//! | GET    | `/`                                    | describe   |
//! | POST   | `/run`                                 | run        |
//! | GET    | `/domains/{domain}/ranks/{rank}`       | status     |
//! | DELETE | `/domains/{domain}/ranks/{rank}`       | cancel     |
//! | POST   | `/domains/{domain}/ranks/{rank}/messages` | store   |
//! | POST   | `/domains/{domain}/ranks/{rank}/stream` | stream upgrade |
//! | GET    | `/domains/{domain}/ranks/{rank}/messages/{source}/{seq}/matched` | matched |
//! | DELETE | `/domains/{domain}/ranks/{rank}/messages/{source}/{seq}` | withdraw |
//!
//! and the jobs layer's (`crate::jobs`):
//!
//! | method | path                                   | operation  |
//! |--------|----------------------------------------|------------|
//! | GET    | `/programs`, `/programs/{name}`        | describe   |
//! | POST   | `/programs/{name}/jobs`, `/programs/{name}/call` | spawn |
//! | GET    | `/jobs/{id}`                           | status     |
//! | DELETE | `/jobs/{id}`                           | kill       |
//! | GET    | `/jobs/{id}/results`                   | results    |
//! | GET    | `/jobs/{id}/files/{name}`, `/jobs/{id}/stdout`, `/jobs/{id}/stderr` | files |
//! | POST   | `/files`; GET, DELETE `/files/{id}`    | files      |

use std::sync::Arc;

use http::{Method, Request, StatusCode};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;

use crate::direct::{matched, store, stream, withdraw};
use crate::error::ErrorClass;
use crate::jobs;
use crate::service::reply::{self, Reply};
use crate::service::{cancel, describe, run, status, Endpoint};

pub async fn serve(ep: Arc<Endpoint>, listener: TcpListener) {
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(s) => s,
            Err(_) => {
                // Out of file descriptors and the like: back off, keep serving.
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let ep = ep.clone();
        tokio::spawn(async move {
            let Some(tls) = &ep.tls else { return serve_connection(ep, stream).await };
            match tls.handshake(stream, ep.config.tls_handshake_timeout).await {
                Some(Ok(stream)) => serve_connection(ep, stream).await,
                Some(Err(cleartext)) => refuse_cleartext(&ep, cleartext).await,
                None => {} // no handshake in time, or a failed one: closed
            }
        });
    }
}

async fn serve_connection<S: AsyncRead + AsyncWrite + Unpin + Send + 'static>(ep: Arc<Endpoint>, stream: S) {
    let svc = service_fn(move |req| {
        let ep = ep.clone();
        async move { Ok::<_, std::convert::Infallible>(route(ep, req).await) }
    });
    let _ = auto::Builder::new(TokioExecutor::new())
        .serve_connection_with_upgrades(TokioIo::new(stream), svc)
        .await;
}

/// A cleartext HTTP request to an https endpoint: answered 400 saying so
/// (not a dropped connection, which a client would retry as transient).
async fn refuse_cleartext(ep: &Endpoint, stream: tokio::net::TcpStream) {
    let message = format!("this endpoint serves https only: use {}", ep.url());
    let svc = service_fn(move |_req| {
        let reply = reply::error(StatusCode::BAD_REQUEST, ErrorClass::Arg, message.clone());
        async move { Ok::<_, std::convert::Infallible>(reply) }
    });
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder.http1().keep_alive(false);
    let _ = tokio::time::timeout(ep.config.tls_handshake_timeout, builder.serve_connection(TokioIo::new(stream), svc)).await;
}

async fn route(ep: Arc<Endpoint>, req: Request<Incoming>) -> Reply {
    let path = req.uri().path().to_string();
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let method = req.method().clone();
    match (&method, parts.as_slice()) {
        (&Method::GET, [""]) => describe::describe(&ep),
        (&Method::POST, ["run"]) => run::run(&ep, req).await,
        (&Method::GET, ["domains", d, "ranks", r]) => status::status(&ep, d, r, req).await,
        (&Method::DELETE, ["domains", d, "ranks", r]) => cancel::cancel(&ep, d, r, req),
        (&Method::POST, ["domains", d, "ranks", r, "messages"]) => store::store(&ep, d, r, req).await,
        (&Method::POST, ["domains", d, "ranks", r, "stream"]) => stream::accept(&ep, d, r, req).await,
        (&Method::GET, ["domains", d, "ranks", r, "messages", s, q, "matched"]) => matched::matched(&ep, d, r, s, q, req).await,
        (&Method::DELETE, ["domains", d, "ranks", r, "messages", s, q]) => withdraw::withdraw(&ep, d, r, s, q, req).await,
        (&Method::GET, ["programs"]) => jobs::describe::list(&ep),
        (&Method::GET, ["programs", name]) => jobs::describe::describe(&ep, name),
        (&Method::POST, ["programs", name, "jobs"]) => jobs::spawn::spawn(&ep, name, req, false).await,
        (&Method::POST, ["programs", name, "call"]) => jobs::spawn::spawn(&ep, name, req, true).await,
        (&Method::GET, ["jobs", id]) => jobs::status::status(&ep, id, req).await,
        (&Method::DELETE, ["jobs", id]) => jobs::kill::kill(&ep, id).await,
        (&Method::GET, ["jobs", id, "results"]) => jobs::results::results_route(&ep, id, req).await,
        (&Method::GET, ["jobs", id, "files", name]) => jobs::files::get_job_file(&ep, id, name, false).await,
        (&Method::GET, ["jobs", id, out @ ("stdout" | "stderr")]) => jobs::files::get_job_file(&ep, id, out, true).await,
        (&Method::POST, ["files"]) => jobs::files::upload(&ep, req).await,
        (&Method::GET, ["files", id]) => jobs::files::get_upload(&ep, id).await,
        (&Method::DELETE, ["files", id]) => jobs::files::remove_upload(&ep, id).await,
        (
            _,
            [""] | ["run"] | ["domains", _, "ranks", _] | ["domains", _, "ranks", _, "messages" | "stream"] | ["domains", _, "ranks", _, "messages", _, _]
            | ["domains", _, "ranks", _, "messages", _, _, "matched"] | ["programs"] | ["programs", _] | ["programs", _, "jobs" | "call"] | ["jobs", _]
            | ["jobs", _, "results" | "stdout" | "stderr"] | ["jobs", _, "files", _] | ["files"] | ["files", _],
        ) => {
            reply::error(StatusCode::METHOD_NOT_ALLOWED, ErrorClass::Arg, format!("{method} is not allowed on {path}"))
        }
        _ => reply::error(StatusCode::NOT_FOUND, ErrorClass::Arg, format!("no operation at {path}")),
    }
}
