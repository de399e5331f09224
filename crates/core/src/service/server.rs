//! Accepts connections (HTTP/1.1 with keep-alive, or h2c; inside TLS when
//! the endpoint serves https), within the connection cap and time limits
//! (idle ones end: `idle`),
//! checks each request (`guard`: host, origin, credential) and routes it to
//! its operation.
//!
//! | method | path                                   | operation  |
//! |--------|----------------------------------------|------------|
//! | GET    | `/`                                    | describe   |
//! | POST   | `/run`                                 | run        |
//! | POST, GET | `/rendezvous`                       | rendezvous (a rank says where it is; its state) |
//! | POST   | `/relay/{name}` (upgrade)              | relay: a hidden endpoint's connection turned around |
//! | any    | `/relay/{name}/{path}`                 | relay: passed on to that endpoint as `/{path}` |
//! | GET    | `/domains/{domain}/ranks/{rank}`       | status     |
//! | DELETE | `/domains/{domain}/ranks/{rank}`       | cancel     |
//! | POST   | `/domains/{domain}/ranks/{rank}/messages` | store   |
//! | POST   | `/domains/{domain}/ranks/{rank}/stream` | stream upgrade |
//! | GET    | `/domains/{domain}/ranks/{rank}/messages/{source}/{seq}/matched` | matched |
//! | DELETE | `/domains/{domain}/ranks/{rank}/messages/{source}/{seq}` | withdraw |
//!
//! (for an instance running in a child process, the last four are relayed
//! to it: `sandbox::relay`), and the jobs layer's (`crate::jobs`):
//!
//! | method | path                                   | operation  |
//! |--------|----------------------------------------|------------|
//! | GET    | `/programs`, `/programs/{name}`        | describe   |
//! | POST   | `/programs/{name}/jobs`, `/programs/{name}/call` | spawn |
//! | GET    | `/jobs`                                | list (the caller's own; all to `admin`) |
//! | GET    | `/jobs/{id}`                           | status     |
//! | DELETE | `/jobs/{id}[?remove=true]`             | kill (and remove) |
//! | GET    | `/jobs/{id}/results`                   | results    |
//! | GET    | `/jobs/{id}/files/{name}`, `/jobs/{id}/stdout`, `/jobs/{id}/stderr` | files |
//! | POST   | `/files`; GET, DELETE `/files/{id}`    | files      |

use std::sync::Arc;

use http::{Method, Request, StatusCode};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::{oneshot, Semaphore};

use crate::error::ErrorClass;
use crate::net::socket::keep_alive;
use crate::service::guard::{self, Need};
use crate::service::idle::Idle;
use crate::service::reply::{self, Reply};
use crate::service::{cancel, describe, jobs, matched, relay, rendezvous, run, sandbox, status, store, stream, withdraw, Endpoint};

/// Largest request head (request line and headers) read from a connection.
const MAX_HEAD: usize = 64 << 10;
/// Most headers in one request.
const MAX_HEADERS: usize = 100;

pub async fn serve(ep: Arc<Endpoint>, listener: TcpListener) {
    // One permit per connection served: beyond the cap, connections wait in
    // the listen queue instead of taking memory and tasks.
    let slots = Arc::new(Semaphore::new(ep.config.max_connections.max(1)));
    let builder = Arc::new(builder(&ep));
    loop {
        let permit = slots.clone().acquire_owned().await.expect("semaphore never closed");
        let (stream, _) = match listener.accept().await {
            Ok(s) => s,
            Err(_) => {
                // Out of file descriptors and the like: back off, keep serving.
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        keep_alive(&stream);
        let (ep, builder) = (ep.clone(), builder.clone());
        tokio::spawn(async move {
            // A connection that sends nothing is not held: hyper's head
            // timeout only starts once it has seen the protocol's first bytes
            // (under TLS, the handshake's own time limit comes first).
            let first_bytes = if ep.tls.is_some() { ep.config.tls_handshake_timeout } else { ep.config.header_timeout };
            let mut first = [0u8; 1];
            if !matches!(tokio::time::timeout(first_bytes, stream.peek(&mut first)).await, Ok(Ok(1..))) {
                return;
            }
            match &ep.tls {
                None => serve_connection(&builder, ep.clone(), stream, None).await,
                Some(tls) => match tls.handshake(stream, ep.config.tls_handshake_timeout).await {
                    Some(Ok(stream)) => serve_connection(&builder, ep.clone(), stream, None).await,
                    Some(Err(cleartext)) => refuse_cleartext(&ep, cleartext).await,
                    None => {} // no handshake in time, or a failed one: closed
                },
            }
            drop(permit);
        });
    }
}

/// How connections are served: HTTP/1.1 with keep-alive or h2c, within
/// the head limits.
fn builder(ep: &Endpoint) -> auto::Builder<TokioExecutor> {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder.http1().timer(TokioTimer::new()).header_read_timeout(ep.config.header_timeout).max_buf_size(MAX_HEAD).max_headers(MAX_HEADERS);
    builder.http2().timer(TokioTimer::new()).max_header_list_size(MAX_HEAD as u32);
    builder
}

/// Serve a connection this endpoint opened to a relay, which sends its
/// requests over it (`service::reverse`): as any other, except that it
/// waits idle for as long as the relay keeps it, and `used` is told when
/// its first request comes.
pub async fn serve_turned<S: AsyncRead + AsyncWrite + Unpin + Send + 'static>(ep: Arc<Endpoint>, stream: S, used: oneshot::Sender<()>) {
    serve_connection(&builder(&ep), ep, stream, Some(used)).await
}

async fn serve_connection<S: AsyncRead + AsyncWrite + Unpin + Send + 'static>(
    builder: &auto::Builder<TokioExecutor>,
    ep: Arc<Endpoint>,
    stream: S,
    turned: Option<oneshot::Sender<()>>,
) {
    let idle = Idle::new();
    let timeout = ep.config.header_timeout;
    let close_idle = turned.is_none();
    let svc = {
        let idle = idle.clone();
        let used = parking_lot::Mutex::new(turned);
        service_fn(move |req| {
            if let Some(used) = used.lock().take() {
                let _ = used.send(());
            }
            let (ep, busy) = (ep.clone(), idle.busy());
            async move {
                let reply = route(ep, req).await;
                drop(busy);
                Ok::<_, std::convert::Infallible>(reply)
            }
        })
    };
    let conn = builder.serve_connection_with_upgrades(TokioIo::new(stream), svc);
    tokio::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => return,
        _ = idle.expired(timeout), if close_idle => conn.as_mut().graceful_shutdown(),
    }
    // A client that does not take part in the shutdown (HTTP/2 waits for
    // its ping's answer) is cut off after another timeout.
    let _ = tokio::time::timeout(timeout, conn).await;
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
    if let Err(reply) = guard::origin(&ep, &req) {
        return reply;
    }
    let path = req.uri().path().to_string();
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    // An empty segment (`/messages//0`) names nothing: no operation takes it
    // for one of its parameters.
    if parts.len() > 1 && parts.iter().any(|p| p.is_empty()) {
        return reply::error(StatusCode::NOT_FOUND, ErrorClass::Arg, format!("no operation at {path}"));
    }
    // The credential first: a caller without it learns nothing more. The
    // key owns what the request creates (an instance, a job, an upload).
    let owner = match guard::need(req.method(), &parts) {
        Need::Key(scope) => match guard::key(&ep, req.headers(), scope) {
            Ok(key) => Some(key),
            Err(reply) => return reply,
        },
        Need::KeyOrAdmin(scope) => match guard::key_or_admin(&ep, req.headers(), scope) {
            Ok(key) => Some(key),
            Err(reply) => return reply,
        },
        _ => None,
    };
    let method = req.method().clone();
    if ep.config.relay {
        match (&method, parts.as_slice(), owner) {
            (&Method::POST, ["relay", name], Some(key)) => return relay::register(&ep, key.id, name, req).await,
            (_, ["relay", name, ..], _) if parts.len() > 2 || method != Method::POST => return relay::forward(&ep, name, req).await,
            _ => {}
        }
    }
    if ep.config.sandbox.is_some() {
        if let (&Method::POST, ["domains", d, "ranks", r, "messages" | "stream"])
        | (&Method::GET, ["domains", d, "ranks", r, "messages", _, _, "matched"])
        | (&Method::DELETE, ["domains", d, "ranks", r, "messages", _, _]) = (&method, parts.as_slice())
        {
            return sandbox::relay::relay(&ep, d, r, req).await;
        }
    }
    match (&method, parts.as_slice()) {
        (&Method::GET, [""]) => describe::describe(&ep, &req),
        (&Method::POST, ["run"]) => match owner {
            Some(key) => run::run(&ep, req, key.id).await,
            None => guard::no_key(),
        },
        (&Method::POST, ["rendezvous"]) => rendezvous::post(&ep, req).await,
        (&Method::GET, ["rendezvous"]) => rendezvous::get(&ep),
        (&Method::GET, ["domains", d, "ranks", r]) => status::status(&ep, d, r, req).await,
        (&Method::DELETE, ["domains", d, "ranks", r]) => cancel::cancel(&ep, d, r, req),
        (&Method::POST, ["domains", d, "ranks", r, "messages"]) => store::store(&ep, d, r, req).await,
        (&Method::POST, ["domains", d, "ranks", r, "stream"]) => stream::accept(&ep, d, r, req).await,
        (&Method::GET, ["domains", d, "ranks", r, "messages", s, q, "matched"]) => matched::matched(&ep, d, r, s, q, req).await,
        (&Method::DELETE, ["domains", d, "ranks", r, "messages", s, q]) => withdraw::withdraw(&ep, d, r, s, q, req).await,
        (&Method::GET, ["programs"]) => jobs::describe::list(&ep),
        (&Method::GET, ["programs", name]) => jobs::describe::describe(&ep, name),
        (&Method::POST, ["programs", name, verb @ ("jobs" | "call")]) => match (owner, guard::json_body(req.headers())) {
            (Some(key), Ok(())) => jobs::spawn::spawn(&ep, key, name, req, *verb == "call").await,
            (Some(_), Err(reply)) => reply,
            (None, _) => guard::no_key(),
        },
        (&Method::GET, ["jobs"]) => match owner {
            Some(key) => jobs::list::list(&ep, key),
            None => guard::no_key(),
        },
        (&Method::GET, ["jobs", id]) => match owner {
            Some(key) => jobs::status::status(&ep, key, id, req).await,
            None => guard::no_key(),
        },
        (&Method::DELETE, ["jobs", id]) => match owner {
            Some(key) => jobs::kill::kill(&ep, key, id, &req).await,
            None => guard::no_key(),
        },
        (&Method::GET, ["jobs", id, "results"]) => match owner {
            Some(key) => jobs::results::results_route(&ep, key, id, req).await,
            None => guard::no_key(),
        },
        (&Method::GET, ["jobs", id, "files", rest @ ..]) if !rest.is_empty() => jobs::files::get_job_file(&ep, id, rest).await,
        (&Method::GET, ["jobs", id, out @ ("stdout" | "stderr")]) => jobs::files::get_job_stream(&ep, id, out).await,
        (&Method::POST, ["files"]) => match owner {
            Some(key) => jobs::files::upload(&ep, key, req).await,
            None => guard::no_key(),
        },
        (&Method::GET, ["files", id]) => jobs::files::get_upload(&ep, id).await,
        (&Method::DELETE, ["files", id]) => match owner {
            Some(key) => jobs::files::remove_upload(&ep, key, id).await,
            None => guard::no_key(),
        },
        (
            _,
            [""]
            | ["run"]
            | ["rendezvous"]
            | ["domains", _, "ranks", _]
            | ["domains", _, "ranks", _, "messages" | "stream"]
            | ["domains", _, "ranks", _, "messages", _, _]
            | ["domains", _, "ranks", _, "messages", _, _, "matched"]
            | ["programs"]
            | ["programs", _]
            | ["programs", _, "jobs" | "call"]
            | ["jobs"]
            | ["jobs", _]
            | ["jobs", _, "results" | "stdout" | "stderr"]
            | ["jobs", _, "files", _, ..]
            | ["files"]
            | ["files", _],
        ) => reply::error(StatusCode::METHOD_NOT_ALLOWED, ErrorClass::Arg, format!("{method} is not allowed on {path}")),
        _ => reply::error(StatusCode::NOT_FOUND, ErrorClass::Arg, format!("no operation at {path}")),
    }
}
