//! The stream channel: a persistent TCP stream per (sender, receiver) pair,
//! negotiated with an HTTP upgrade on the endpoint's port, then carrying
//! binary frames (`frame::encode_message` / `encode_ack`).
//!
//! Why: a store is a whole HTTP exchange handled by several tasks on each
//! side; on one machine that costs ~4x the wire latency. On a stream the
//! sender writes from its own thread and the receiver reads in the thread
//! waiting for the message, or in its progress thread (`direct::inbound`),
//! so a small message costs little more than the TCP hop. Everything else is unchanged: same envelope, sequence numbers,
//! mailbox, acknowledgements (stored, and matched for synchronous sends).
//! Where the upgrade is refused (a proxy, an old endpoint), stores are used.
//!
//! Upgrade: `POST /domains/{domain}/ranks/{dest}/stream` with `Upgrade:
//! mpiws-stream/1`, `Connection: upgrade`, the bearer token and
//! `mpiws-source`; the same checks as a store, then `101 Switching Protocols`.

use std::collections::BTreeMap;
use std::io::{BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use parking_lot::{Condvar, Mutex};

use crate::body::Chunks;
use crate::completion::{Completion, Outcome};
use crate::direct::polled::Polled;
use crate::direct::frame::{self, Envelope, ACK_ERROR, ACK_HEADER, ACK_MATCHED, ACK_STORED};
use crate::direct::store::admit;
use crate::direct::transport::error_from_response;
use crate::error::{err, Error, ErrorClass, Result};
use crate::runtime::runtime;
use crate::service::reply::{error, Reply};
use crate::service::Endpoint;

pub const PROTOCOL: &str = "mpiws-stream/1";

/// Messages up to this size are written with their header in one syscall.
const COALESCE_UP_TO: usize = 64 * 1024;
/// Messages above this size are written by a background thread, so that a
/// non-blocking send returns at once.
const BACKGROUND_FROM: usize = 1 << 20;

// ---- receiving side ----------------------------------------------------------

/// Answer an upgrade request; the stream is then read as `direct::inbound` says.
pub async fn accept(ep: &Endpoint, domain: &str, rank: &str, mut req: Request<Incoming>) -> Reply {
    let wants = req
        .headers()
        .get(http::header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case(PROTOCOL));
    if !wants {
        return error(StatusCode::BAD_REQUEST, ErrorClass::Arg, format!("expected 'Upgrade: {PROTOCOL}'"));
    }
    let source = match req.headers().get(frame::H_SOURCE).and_then(|v| v.to_str().ok()).map(|v| v.trim().parse::<u32>()) {
        Some(Ok(s)) => s,
        _ => return error(StatusCode::BAD_REQUEST, ErrorClass::Arg, format!("missing or invalid header {}", frame::H_SOURCE)),
    };
    let instance = match admit(ep, domain, rank, req.headers(), source).await {
        Ok(i) => i,
        Err(reply) => return reply,
    };
    let max = ep.config.max_message;
    let upgrade = hyper::upgrade::on(&mut req);
    tokio::spawn(async move {
        let Ok(upgraded) = upgrade.await else { return };
        let Ok(parts) = hyper_util::server::conn::auto::upgrade::downcast::<TokioIo<tokio::net::TcpStream>>(upgraded) else {
            return;
        };
        let Ok(stream) = parts.io.into_inner().into_std() else { return };
        if let Ok(progress) = instance.progress() {
            let _ = progress.add(&instance, source, stream, parts.read_buf, max);
        }
    });
    Response::builder()
        .status(StatusCode::SWITCHING_PROTOCOLS)
        .header(http::header::CONNECTION, "upgrade")
        .header(http::header::UPGRADE, PROTOCOL)
        .body(Chunks::empty())
        .expect("valid response")
}

// ---- sending side ------------------------------------------------------------

/// Sends still waiting for their acknowledgement, shared with the instance
/// so it can wait for them all before it finishes.
#[derive(Default)]
pub struct InFlight {
    count: Mutex<usize>,
    idle: Condvar,
}

impl InFlight {
    pub fn started(&self) {
        *self.count.lock() += 1;
    }

    pub fn ended(&self) {
        let mut n = self.count.lock();
        *n -= 1;
        if *n == 0 {
            self.idle.notify_all();
        }
    }

    /// Wait until none is left, up to `timeout`; true if none is.
    pub fn wait_idle(&self, timeout: Option<Duration>) -> bool {
        let deadline = timeout.map(|t| std::time::Instant::now() + t);
        let mut n = self.count.lock();
        while *n > 0 {
            match deadline {
                None => self.idle.wait(&mut n),
                Some(d) => {
                    if self.idle.wait_until(&mut n, d).timed_out() {
                        return *n == 0;
                    }
                }
            }
        }
        true
    }
}

/// A message sent and not yet acknowledged.
struct Pending {
    /// Synchronous sends complete on the receiver's "matched"; the others
    /// completed when written (their buffer was free) and are only tracked.
    completion: Option<Arc<Completion>>,
    /// Told when the receiver acknowledges storing the message (when asked
    /// for: the "completed" event of a tracked send).
    stored: Option<Arc<Completion>>,
}

/// Failures of sends that already completed, per peer, waiting to be
/// reported by the next send to that peer or by the instance's flush.
pub type Undelivered = Arc<Mutex<Option<Error>>>;

/// One open stream to a peer instance.
///
/// A standard send completes once its bytes are written (MPI's eager mode:
/// the buffer may be reused); its acknowledgement comes later, batched. A
/// message that then fails is never lost silently: it lands in `undelivered`.
pub struct Link {
    dest: u32,
    writer: Mutex<Polled>,
    pending: Mutex<BTreeMap<u64, Pending>>,
    broken: Mutex<Option<Error>>,
    in_flight: Arc<InFlight>,
    undelivered: Undelivered,
}

fn host_port(base: &str) -> Option<&str> {
    let rest = base.strip_prefix("http://")?;
    Some(rest.split('/').next().unwrap_or(rest))
}

impl Link {
    /// Open a stream to `dest` at `base`. `Ok(None)`: the endpoint does not
    /// speak the stream protocol here; use stores instead.
    pub fn connect(
        base: &str,
        domain: &str,
        dest: u32,
        source: u32,
        token: &str,
        in_flight: Arc<InFlight>,
        undelivered: Undelivered,
    ) -> Result<Option<Arc<Link>>> {
        let Some(addr) = host_port(base) else { return Ok(None) };
        let peer = format!("rank {dest} at {base}");
        let mut s = TcpStream::connect(addr)
            .or_else(|e| err(ErrorClass::ProcFailed, format!("{peer} is unreachable: {e}")))?;
        let _ = s.set_nodelay(true);
        let head = format!(
            "POST /domains/{domain}/ranks/{dest}/stream HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\n\
             {}: {source}\r\nConnection: upgrade\r\nUpgrade: {PROTOCOL}\r\nContent-Length: 0\r\n\r\n",
            frame::H_SOURCE
        );
        let lost = |e: std::io::Error| Error::new(ErrorClass::ProcFailed, format!("{peer}: stream negotiation failed: {e}"));
        s.write_all(head.as_bytes()).map_err(lost)?;
        // Read the answer's head byte by byte: nothing after it may be consumed.
        let mut answer = Vec::new();
        let mut byte = [0u8; 1];
        while !answer.ends_with(b"\r\n\r\n") {
            if answer.len() > 16 * 1024 {
                return Ok(None);
            }
            s.read_exact(&mut byte).map_err(lost)?;
            answer.push(byte[0]);
        }
        let text = String::from_utf8_lossy(&answer).to_string();
        let code: u16 = text.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
        if code != 101 {
            let status = StatusCode::from_u16(code).unwrap_or(StatusCode::BAD_GATEWAY);
            if status.is_client_error() && status != StatusCode::NOT_FOUND && status != StatusCode::METHOD_NOT_ALLOWED {
                // A refusal the store would meet as well (token, rank, ...).
                let len = text
                    .lines()
                    .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse::<usize>().unwrap_or(0)))
                    .unwrap_or(0)
                    .min(64 * 1024);
                let mut body = vec![0u8; len];
                let _ = BufReader::new(&mut s).read_exact(&mut body);
                return Err(error_from_response(status, &body, &peer));
            }
            return Ok(None);
        }
        let reader = s.try_clone().map_err(lost)?;
        let link = Arc::new(Link {
            dest,
            writer: Mutex::new(Polled(s)),
            pending: Mutex::new(BTreeMap::new()),
            broken: Mutex::new(None),
            in_flight,
            undelivered,
        });
        let l = link.clone();
        std::thread::Builder::new()
            .name(format!("mpiws-acks-{dest}"))
            .spawn(move || l.read_acks(reader))
            .map_err(|e| Error::new(ErrorClass::Intern, format!("cannot start a thread: {e}")))?;
        Ok(Some(link))
    }

    /// Close the stream (the instance ended): the peer's reader sees the end.
    pub fn close(&self) {
        let _ = self.writer.lock().0.shutdown(std::net::Shutdown::Both);
    }

    pub fn is_broken(&self) -> bool {
        self.broken.lock().is_some()
    }

    /// Send one message. `completion` completes when the bytes are written,
    /// or for a synchronous send when the receiver matched the message.
    /// A large message is written by a background thread unless `inline`.
    /// `stored` completes when the receiver acknowledges storing it.
    pub fn send(self: &Arc<Self>, env: &Envelope, chunks: Vec<Bytes>, completion: Arc<Completion>, inline: bool, stored: Option<Arc<Completion>>) {
        let seq = env.seq.expect("stream messages are sequenced");
        let sync = env.sync;
        {
            // Under the pending lock, so `fail` cannot slip in between.
            let mut pending = self.pending.lock();
            if let Some(e) = self.broken.lock().clone() {
                drop(pending);
                if let Some(s) = &stored {
                    s.complete(Err(e.clone()));
                }
                completion.complete(Err(e));
                return;
            }
            self.in_flight.started();
            pending.insert(seq, Pending { completion: sync.then(|| completion.clone()), stored });
        }
        let len: usize = chunks.iter().map(|c| c.len()).sum();
        let header = frame::encode_message(env, len as u64);
        let me = self.clone();
        let send = move || match me.write(header, chunks, len) {
            Ok(()) if !sync => {
                completion.complete(Ok(Outcome::Sent));
            }
            Ok(()) => {}
            Err(e) => {
                // Reported here, so not also as undelivered.
                if let Some(p) = me.pending.lock().remove(&seq) {
                    if let Some(s) = p.stored {
                        s.complete(Err(e.clone()));
                    }
                    me.in_flight.ended();
                }
                completion.complete(Err(e.clone()));
                me.fail(e);
            }
        };
        if len >= BACKGROUND_FROM && !inline {
            runtime().spawn_blocking(send);
        } else {
            send();
        }
    }

    fn write(&self, mut header: Vec<u8>, chunks: Vec<Bytes>, len: usize) -> Result<()> {
        let mut w = self.writer.lock();
        let r = if len <= COALESCE_UP_TO {
            for c in &chunks {
                header.extend_from_slice(c);
            }
            w.write_all(&header)
        } else {
            w.write_all(&header).and_then(|_| chunks.iter().try_for_each(|c| w.write_all(c)))
        };
        r.or_else(|e| err(ErrorClass::ProcFailed, format!("stream to rank {} broke: {e}", self.dest)))
    }

    /// Ask the receiver to acknowledge everything it stored (before a flush).
    pub fn request_ack(&self) {
        if self.pending.lock().is_empty() {
            return;
        }
        if let Err(e) = self.writer.lock().write_all(&frame::encode_ack_request()) {
            self.fail(Error::new(ErrorClass::ProcFailed, format!("stream to rank {} broke: {e}", self.dest)));
        }
    }

    fn settle(&self, p: Pending, outcome: Result<Outcome>) {
        if let Some(s) = &p.stored {
            s.complete(match &outcome {
                Ok(_) => Ok(Outcome::Sent),
                Err(e) => Err(e.clone()),
            });
        }
        match (p.completion, outcome) {
            (Some(c), outcome) => {
                c.complete(outcome);
            }
            (None, Err(e)) => {
                self.undelivered.lock().get_or_insert(e);
            }
            (None, Ok(_)) => {}
        }
        self.in_flight.ended();
    }

    fn read_acks(&self, s: TcpStream) {
        let mut r = BufReader::new(s);
        loop {
            let mut h = [0u8; ACK_HEADER];
            if r.read_exact(&mut h).is_err() {
                break;
            }
            let (kind, seq, class, tlen) = frame::decode_ack_header(&h);
            let mut text = vec![0u8; tlen.min(1 << 20) as usize];
            if r.read_exact(&mut text).is_err() {
                break;
            }
            let settled: Vec<(Pending, Result<Outcome>)> = {
                let mut pending = self.pending.lock();
                match kind {
                    ACK_STORED => {
                        // Stored, all of them; synchronous sends wait on for their match.
                        for (_, p) in pending.range_mut(..=seq) {
                            if let Some(s) = p.stored.take() {
                                s.complete(Ok(Outcome::Sent));
                            }
                        }
                        let done: Vec<u64> = pending.range(..=seq).filter(|(_, p)| p.completion.is_none()).map(|(s, _)| *s).collect();
                        done.into_iter().filter_map(|s| pending.remove(&s)).map(|p| (p, Ok(Outcome::Sent))).collect()
                    }
                    ACK_MATCHED => pending.remove(&seq).map(|p| (p, Ok(Outcome::Sent))).into_iter().collect(),
                    ACK_ERROR => {
                        let e = Error::new(ErrorClass::from_code(class as i64), String::from_utf8_lossy(&text).to_string());
                        pending.remove(&seq).map(|p| (p, Err(e))).into_iter().collect()
                    }
                    _ => break,
                }
            };
            for (p, outcome) in settled {
                self.settle(p, outcome);
            }
        }
        self.fail(Error::new(ErrorClass::ProcFailed, format!("stream to rank {} closed", self.dest)));
    }

    /// The stream is unusable: every unacknowledged send fails (none is lost silently).
    fn fail(&self, e: Error) {
        let pending: Vec<(u64, Pending)> = {
            let mut pending = self.pending.lock();
            *self.broken.lock() = Some(e.clone());
            std::mem::take(&mut *pending).into_iter().collect()
        };
        if let Some(w) = self.writer.try_lock() {
            let _ = w.0.shutdown(std::net::Shutdown::Both);
        }
        for (_, p) in pending {
            self.settle(p, Err(e.clone()));
        }
    }
}
