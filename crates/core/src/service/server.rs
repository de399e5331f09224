//! Accepts connections (HTTP/1.1 with keep-alive, or h2c; inside TLS when
//! the endpoint serves https), within the connection cap and time limits
//! (idle ones end: `idle`), checks each request (`guard`: host and origin,
//! then the credential its route needs) and runs the operation its route
//! names (`routes`, the one table of every method, path and operation).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use http::{Method, Request, StatusCode};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use parking_lot::Mutex;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{oneshot, Notify};

use crate::error::ErrorClass;
use crate::net::socket::keep_alive;
use crate::service::conns::{Admit, ConnId, Conns};
use crate::service::guard;
use crate::service::idle::Idle;
use crate::service::reply::HttpError;
use crate::service::reply::{self, Reply};
use crate::service::routes::{self, Face, Lookup, Need, Op};
use crate::service::{
    cancel, dashboard, describe, jobs, matched, metrics, ogcapi, relay, rendezvous, run, sandbox, sessions, soap, status, store, stream,
    tunnel, upgrade, withdraw, Endpoint,
};

/// Largest request head (request line and headers) read from a connection.
const MAX_HEAD: usize = 64 << 10;
/// Most headers in one request.
const MAX_HEADERS: usize = 100;

/// What the server keeps of each connection it serves (`conns`).
#[derive(Clone)]
struct Handle {
    /// Told when the connection is shed.
    shed: Arc<Notify>,
    idle: Arc<Idle>,
}

/// The connections served, shared by the accept loop and each connection's task.
struct Served {
    conns: Mutex<Conns<Handle>>,
    /// Told when a connection ends (there may be room now).
    ended: Notify,
}

/// Who a request's connection is, to mark it proven (`conns`).
#[derive(Clone)]
struct Seen {
    served: Arc<Served>,
    id: ConnId,
    proven: Arc<AtomicBool>,
}

fn busy(h: &Handle) -> bool {
    h.idle.in_progress()
}

pub async fn serve(ep: Arc<Endpoint>, listener: TcpListener) {
    let c = &ep.config;
    let served = Arc::new(Served {
        conns: Mutex::new(Conns::new(c.max_connections, c.max_connections_per_address, c.reserved_connections)),
        ended: Notify::new(),
    });
    let builder = Arc::new(builder(&ep));
    loop {
        // Rule 1 of `conns`: beyond the cap, connections wait in the listen
        // queue instead of taking memory and tasks (a connection's request
        // ending may make one sheddable: looked at again now and then).
        while !served.conns.lock().room(Instant::now(), busy) {
            let _ = tokio::time::timeout(std::time::Duration::from_millis(100), served.ended.notified()).await;
        }
        let accepted_one = tokio::select! {
            a = listener.accept() => a,
            _ = ep.closing() => return, // the listener closes with it
        };
        let (stream, peer) = match accepted_one {
            Ok(s) => s,
            Err(_) => {
                // Out of file descriptors and the like: back off, keep serving.
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let handle = Handle { shed: Arc::new(Notify::new()), idle: Idle::new() };
        let admitted = served.conns.lock().admit(peer.ip(), Instant::now(), handle.clone(), busy);
        let id = match admitted {
            Admit::TooManyFrom(_) => continue, // closed (dropped) at once
            Admit::Serve { id, shed } => {
                if let Some((_, old)) = shed {
                    old.shed.notify_one();
                }
                id
            }
        };
        let _ = stream.set_nodelay(true);
        keep_alive(&stream);
        let (ep, builder, seen) =
            (ep.clone(), builder.clone(), Seen { served: served.clone(), id, proven: Arc::new(AtomicBool::new(false)) });
        tokio::spawn(async move {
            let closing = ep.clone();
            tokio::select! {
                _ = accepted(&builder, ep, stream, handle.idle.clone(), seen.clone()) => {}
                _ = handle.shed.notified() => {}
                _ = closing.closing() => {}
            }
            seen.served.conns.lock().closed(seen.id);
            seen.served.ended.notify_one();
        });
    }
}

/// Serve an accepted connection: its first bytes, the TLS handshake if
/// https, then its requests.
async fn accepted(builder: &auto::Builder<TokioExecutor>, ep: Arc<Endpoint>, stream: TcpStream, idle: Arc<Idle>, seen: Seen) {
    // A connection that sends nothing is not held: hyper's head timeout
    // only starts once it has seen the protocol's first bytes (under TLS,
    // the handshake's own time limit comes first).
    let first_bytes = if ep.tls.is_some() { ep.config.tls_handshake_timeout } else { ep.config.header_timeout };
    let mut first = [0u8; 1];
    if !matches!(tokio::time::timeout(first_bytes, stream.peek(&mut first)).await, Ok(Ok(1..))) {
        return;
    }
    match &ep.tls {
        None => serve_connection(builder, ep.clone(), stream, idle, None, Some(seen)).await,
        Some(tls) => match tls.handshake(stream, ep.config.tls_handshake_timeout).await {
            Some(Ok(stream)) => {
                ep.metrics.tls_handshake(true);
                serve_connection(builder, ep.clone(), stream, idle, None, Some(seen)).await
            }
            Some(Err(cleartext)) => refuse_cleartext(&ep, cleartext).await,
            None => ep.metrics.tls_handshake(false), // no handshake in time, or a failed one: closed
        },
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
    let (closing, mut builder) = (ep.clone(), builder(&ep));
    // hyper's head timeout also runs while a kept-alive connection waits for
    // its next request: it would close idle turned connections, and the relay
    // could pass a request on over one just as it closes.
    builder.http1().header_read_timeout(None);
    tokio::select! {
        _ = serve_connection(&builder, ep, stream, Idle::new(), Some(used), None) => {}
        _ = closing.closing() => {}
    }
}

/// Serve the TLS session of a tunnel (`service::tunnel`): as a connection
/// accepted on the listener (idle ones end), inside the relay's. Boxed: a
/// tunnel is opened by a request this very code serves.
pub fn serve_tunneled<S: AsyncRead + AsyncWrite + Unpin + Send + 'static>(
    ep: Arc<Endpoint>,
    stream: S,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> {
    Box::pin(async move { serve_connection(&builder(&ep), ep, stream, Idle::new(), None, None).await })
}

async fn serve_connection<S: AsyncRead + AsyncWrite + Unpin + Send + 'static>(
    builder: &auto::Builder<TokioExecutor>,
    ep: Arc<Endpoint>,
    stream: S,
    idle: Arc<Idle>,
    turned: Option<oneshot::Sender<()>>,
    seen: Option<Seen>,
) {
    let timeout = ep.config.header_timeout;
    let close_idle = turned.is_none();
    let svc = {
        let idle = idle.clone();
        let used = parking_lot::Mutex::new(turned);
        service_fn(move |req| {
            if let Some(used) = used.lock().take() {
                let _ = used.send(());
            }
            let (ep, busy, seen) = (ep.clone(), idle.busy(), seen.clone());
            async move {
                let (started, method) = (Instant::now(), metrics::method_name(req.method()));
                let (mut reply, credential, template) = route(ep.clone(), req).await;
                let limit = reply.extensions().get::<metrics::LimitHit>().copied();
                ep.metrics.request(method, template, reply.status().as_u16(), started.elapsed().as_secs_f64(), limit);
                if let Some(seen) = seen.filter(|s| credential && reply.status().as_u16() < 400 && !s.proven.swap(true, Ordering::Relaxed))
                {
                    seen.served.conns.lock().proven(seen.id);
                }
                if reply.body().is_live() {
                    reply.body_mut().hold(busy); // a stream in progress: the connection is not idle
                } else {
                    drop(busy);
                }
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

/// The request's answer, whether its route asked for a credential (an
/// answer below 400 then means the caller showed one), and the route's
/// template (what the endpoint's metrics name it by).
async fn route(ep: Arc<Endpoint>, req: Request<Incoming>) -> (Reply, bool, &'static str) {
    let path = req.uri().path().to_string();
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let face = routes::face(req.method(), &parts);
    if let Err(e) = guard::origin(&ep, &req) {
        return (refusal(face, e), false, metrics::UNROUTED);
    }
    let no_operation = || refusal(face, HttpError::new(StatusCode::NOT_FOUND, ErrorClass::Arg, format!("no operation at {path}")));
    let (found, need, template) = match routes::find_request(req.method(), &parts, upgrade::asks(&req, relay::PROTOCOL)) {
        Lookup::Found(found) => {
            let (need, template) = (found.route.need, found.route.path);
            (Some(found), need, template)
        }
        Lookup::WrongMethod { need, .. } => (None, need, metrics::UNROUTED),
        Lookup::NotFound => return (no_operation(), false, metrics::UNROUTED),
    };
    (operate(ep, req, &path, &parts, found, need).await, need != Need::Nothing, template)
}

async fn operate(
    ep: Arc<Endpoint>,
    req: Request<Incoming>,
    path: &str,
    parts: &[&str],
    found: Option<routes::Found<'_>>,
    need: Need,
) -> Reply {
    let no_operation = || reply::error(StatusCode::NOT_FOUND, ErrorClass::Arg, format!("no operation at {path}"));
    // The credential first: a caller without it learns nothing more. The
    // key owns what the request creates (an instance, a job, an upload).
    let key = match need {
        Need::Key(scope) => guard::key(&ep, req.headers(), scope).map(Some),
        Need::KeyOrAdmin(scope) => guard::key_or_admin(&ep, req.headers(), scope).map(Some),
        _ => Ok(None),
    };
    let key = match key {
        Ok(key) => key,
        Err(e) => return refusal(routes::face(req.method(), parts), e),
    };
    let Some(found) = found else {
        let Lookup::WrongMethod { allow, .. } = routes::find(req.method(), parts) else { unreachable!("found before") };
        let refused = HttpError::new(StatusCode::METHOD_NOT_ALLOWED, ErrorClass::Arg, format!("{} is not allowed on {path}", req.method()));
        let mut r = refusal(routes::face(req.method(), parts), refused);
        let allow: Vec<&str> = allow.iter().map(Method::as_str).collect();
        r.headers_mut().insert(http::header::ALLOW, http::HeaderValue::from_str(&allow.join(", ")).expect("method names"));
        return r;
    };
    if found.route.to_instance && ep.config.sandbox.is_some() {
        let face = routes::face(req.method(), parts);
        return sandbox::relay::relay(&ep, found.params[0], found.params[1], req).await.unwrap_or_else(|e| refusal(face, e));
    }
    let p = &found.params;
    match found.route.op {
        Op::Describe => describe::describe(&ep, &req),
        Op::Run => run::run(&ep, req, key.expect("a key route").id).await,
        Op::RendezvousPost => rendezvous::post(&ep, req).await,
        Op::RendezvousGet => rendezvous::get(&ep),
        Op::Status => status::status(&ep, p[0], p[1], req).await,
        Op::Cancel => cancel::cancel(&ep, p[0], p[1], req),
        Op::Store => store::store(&ep, p[0], p[1], req).await,
        Op::Stream => stream::accept(&ep, p[0], p[1], req).await,
        Op::Matched => matched::matched(&ep, p[0], p[1], p[2], p[3], req).await,
        Op::Withdraw => withdraw::withdraw(&ep, p[0], p[1], p[2], p[3], req).await,
        Op::RelayRegister | Op::RelayForward if !ep.config.relay => no_operation(),
        Op::RelayRegister => relay::register(&ep, key.expect("a key route"), p[0], req).await,
        Op::RelayForward => relay::forward(&ep, p[0], req).await,
        Op::Tunnel => tunnel::accept(ep.clone(), req).await,
        Op::Programs => jobs::describe::list(&ep),
        Op::Program => jobs::describe::describe(&ep, p[0], &req),
        Op::Soap => soap::program::program(&ep, key.expect("a key route"), p[0], req).await,
        Op::SoapServices => soap::services::services(&ep, req).await,
        Op::SoapStore => soap::rank::rank(&ep, p[0], p[1], req).await,
        Op::Spawn | Op::Call => jobs::spawn::spawn(&ep, key.expect("a key route"), p[0], req, found.route.op == Op::Call).await,
        Op::Jobs => jobs::list::list(&ep, key.expect("a key route")),
        Op::Job => jobs::status::status(&ep, key.expect("a key route"), p[0], req).await,
        Op::Kill => jobs::kill::kill(&ep, key.expect("a key route"), p[0], &req).await,
        Op::Results => jobs::results::results_route(&ep, key.expect("a key route"), p[0], req).await,
        Op::JobFile => jobs::files::get_job_file(&ep, p[0], &found.rest).await,
        Op::JobStream => jobs::files::get_job_stream(&ep, p[0], parts[2]).await,
        Op::Upload => jobs::files::upload(&ep, key.expect("a key route"), req).await,
        Op::GetUpload => jobs::files::get_upload(&ep, p[0]).await,
        Op::RemoveUpload => jobs::files::remove_upload(&ep, key.expect("a key route"), p[0]).await,
        Op::Metrics => metrics::answer(&ep),
        Op::Dashboard => dashboard::page(&req, p.first().copied().unwrap_or("")),
        Op::DashboardState => dashboard::state(&ep, key.expect("a key route")).await,
        Op::DashboardEvents => dashboard::events(&ep, key.expect("a key route").clone()),
        Op::SessionNew => sessions::create::create(&ep, key.expect("a key route"), req).await,
        Op::Sessions => sessions::list::list(&ep, key.expect("a key route")),
        Op::Session => sessions::list::describe(&ep, key.expect("a key route"), p[0]),
        Op::SessionDelete => sessions::delete::delete(&ep, key.expect("a key route"), p[0]).await,
        Op::SessionFiles => sessions::files::list(&ep, key.expect("a key route"), p[0]),
        Op::SessionFile => sessions::files::get(&ep, key.expect("a key route"), p[0], &found.rest).await,
        Op::SessionPut => sessions::files::put(&ep, key.expect("a key route"), p[0], p[1], req).await,
        Op::SessionRemoveFile => sessions::files::remove(&ep, key.expect("a key route"), p[0], p[1]).await,
        Op::OgcLanding => ogcapi::landing::landing(&ep),
        Op::OgcConformance => ogcapi::landing::conformance(),
        Op::OgcApi => ogcapi::landing::api(&ep),
        Op::OgcProcesses => ogcapi::processes::list(&ep, &req),
        Op::OgcProcess => ogcapi::processes::describe(&ep, p[0]),
        Op::OgcExecute => ogcapi::execute::execute(&ep, key.expect("a key route"), p[0], req).await,
        Op::OgcJobs => ogcapi::jobs::list(&ep, key.expect("a key route"), &req),
        Op::OgcJob => ogcapi::jobs::status(&ep, key.expect("a key route"), p[0]),
        Op::OgcDismiss => ogcapi::dismiss::dismiss(&ep, key.expect("a key route"), p[0]).await,
        Op::OgcResults => ogcapi::results::results(&ep, key.expect("a key route"), p[0]).await,
    }
}

/// A refusal as the request's face answers it: OGC's exception documents, SOAP's faults.
fn refusal(face: Face, e: HttpError) -> Reply {
    match face {
        Face::Own => e.into(),
        Face::Ogc => ogcapi::from_http(e),
        Face::Soap => soap::program::Fault::from(e).into(),
    }
}
