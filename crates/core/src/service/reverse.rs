//! An endpoint behind a relay (`mpiws serve --via-relay URL`): its host
//! accepts no connections from outside, so it opens them itself. It keeps
//! `SPARE` connections to the relay turned around (`POST /relay/{name}`,
//! `service::relay`) and serves each as if a peer had opened it: every
//! request is routed and checked as usual, a stream upgrade gives the rank
//! its socket as usual. When a connection takes its first request another
//! is opened, so that one is always waiting; the relay closes those it no
//! longer needs. Its URL, for peers, is the relay's for its name.
//!
//! Connections go out as every other (`net::proxy`: through the
//! environment's HTTP proxy if it names one; TLS to an https relay), with
//! TCP keep-alive so that a relay that vanished is noticed, and a NAT keeps
//! the idle ones mapped. A relay that is down or refuses is tried again,
//! less and less often (up to `MAX_PAUSE`); the endpoint says so once on
//! its standard error, and again once it is through.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};

use crate::error::{err, Error, ErrorClass, Result};
use crate::net::socket::keep_alive;
use crate::net::{proxy, tls};
use crate::service::relay::PROTOCOL;
use crate::service::server::serve_turned;
use crate::service::Endpoint;
use crate::wire::head::Head;
use crate::wire::url::{self, Url};

/// Connections kept waiting at the relay for requests.
const SPARE: usize = 4;
/// Longest pause between attempts to reach a relay that fails.
const MAX_PAUSE: Duration = Duration::from_secs(10);
/// Longest answer head the relay may send.
const MAX_HEAD: usize = 16 * 1024;

/// Where and how to reach the relay.
#[derive(Clone)]
pub struct ViaRelay {
    /// `http(s)://HOST:PORT/relay/NAME`: the URL peers reach this endpoint
    /// at, pinned with its tunnel identity (`Endpoint::url`).
    pub url: String,
    /// A pin the URL was given with (it must be this endpoint's own).
    pub pin: Option<String>,
    /// A key of the relay with the `relay` scope.
    pub key: String,
}

impl std::fmt::Debug for ViaRelay {
    // Never print a secret.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ViaRelay({})", self.url)
    }
}

impl ViaRelay {
    pub fn new(url: &str, key: &str) -> Result<ViaRelay> {
        let url = url.trim_end_matches('/').to_string();
        let pin = parse(&url)?.pin;
        let url = crate::wire::url::without_pin(&url).to_string();
        Ok(ViaRelay { url, pin, key: key.to_string() })
    }

    /// The relay's host name (requests relayed to this endpoint carry it in `Host`).
    pub fn host(&self) -> String {
        parse(&self.url).expect("checked in new").host
    }
}

/// A relay URL (`http(s)://HOST:PORT/relay/NAME`), by the one URL parser.
fn parse(text: &str) -> Result<Url> {
    match url::endpoint(text) {
        Ok(u) if u.relay().is_some() => Ok(u),
        _ => err(ErrorClass::Arg, format!("--via-relay {text:?} is not http(s)://HOST:PORT/relay/NAME")),
    }
}

/// What a connection's task tells the keeper.
enum Event {
    /// Turned around: waiting for requests.
    Ready,
    /// Took its first request (or was closed first): another is needed.
    Gone,
    /// Could not be opened.
    Failed(Error),
}

/// Keep `SPARE` connections waiting at the relay, for as long as the endpoint runs.
pub async fn keep(ep: Arc<Endpoint>, via: ViaRelay) {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut waiting = 0usize;
    let mut pause = Duration::from_millis(100);
    let mut failing: Option<String> = None;
    loop {
        while waiting < SPARE {
            waiting += 1;
            // While the relay fails, each new attempt waits (the keeper itself never does).
            let delay = if failing.is_some() { pause } else { Duration::ZERO };
            tokio::spawn(one(ep.clone(), via.clone(), tx.clone(), delay));
        }
        let event = tokio::select! {
            e = rx.recv() => e.expect("the keeper holds a sender"),
            _ = ep.closing() => return,
        };
        match event {
            Event::Ready => {
                pause = Duration::from_millis(100);
                if failing.take().is_some() {
                    eprintln!("mpiws: through to the relay: reached at {}", via.url);
                }
            }
            Event::Gone => waiting -= 1,
            Event::Failed(e) => {
                waiting -= 1;
                if failing.as_deref() != Some(e.message.as_str()) {
                    eprintln!("mpiws: cannot reach the relay: {e}; trying again");
                    failing = Some(e.message);
                }
                pause = (pause * 2).min(MAX_PAUSE);
            }
        }
    }
}

/// Open one connection, turn it around, serve it until it ends.
async fn one(ep: Arc<Endpoint>, via: ViaRelay, events: mpsc::UnboundedSender<Event>, delay: Duration) {
    tokio::time::sleep(delay).await;
    let parts = parse(&via.url).expect("checked in ViaRelay::new");
    let (used, first) = oneshot::channel();
    let peer = format!("the relay at {}", via.url);
    let served = async {
        if parts.tls {
            let s = tls::connect(&parts.authority(), &peer).await?;
            keep_alive(s.get_ref().0.get_ref());
            turn_and_serve(ep, s, &parts, &via.key, &peer, &events, used).await
        } else {
            let s = proxy::open("http", &parts.authority(), &peer, true).await?.tcp;
            keep_alive(&s);
            turn_and_serve(ep, s, &parts, &via.key, &peer, &events, used).await
        }
    };
    // Its first request: the next one opens now, while this one serves on.
    let taken = {
        let events = events.clone();
        tokio::spawn(async move { first.await.is_ok() && events.send(Event::Gone).is_ok() })
    };
    let outcome = served.await;
    if !taken.await.unwrap_or(false) {
        let _ = events.send(match outcome {
            Ok(()) => Event::Gone,
            Err(e) => Event::Failed(e),
        });
    }
}

/// Turn `s` around, say it is ready, and serve it until it ends.
async fn turn_and_serve<S: AsyncRead + AsyncWrite + Unpin + Send + 'static>(
    ep: Arc<Endpoint>,
    mut s: S,
    parts: &Url,
    key: &str,
    peer: &str,
    events: &mpsc::UnboundedSender<Event>,
    used: oneshot::Sender<()>,
) -> Result<()> {
    turn(&mut s, parts, key, peer).await?;
    let _ = events.send(Event::Ready);
    serve_turned(ep, s, used).await;
    Ok(())
}

/// Ask the relay to turn the connection around; Ok once it did (101).
async fn turn<S: AsyncRead + AsyncWrite + Unpin>(s: &mut S, parts: &Url, key: &str, peer: &str) -> Result<()> {
    let head = format!(
        "POST {} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {key}\r\nConnection: upgrade\r\nUpgrade: {PROTOCOL}\r\nContent-Length: 0\r\n\r\n",
        parts.path,
        parts.authority()
    );
    let lost = |e: std::io::Error| Error::new(ErrorClass::ProcFailed, format!("{peer}: {e}"));
    s.write_all(head.as_bytes()).await.map_err(lost)?;
    s.flush().await.map_err(lost)?;
    // The answer's head, byte by byte: what follows it is the relay's first request.
    let mut answer = Vec::new();
    let mut byte = [0u8; 1];
    while !answer.ends_with(b"\r\n\r\n") {
        if answer.len() > MAX_HEAD {
            return err(ErrorClass::Other, format!("{peer} answered with a head over {MAX_HEAD} bytes: is it an mpiws relay?"));
        }
        s.read_exact(&mut byte).await.map_err(lost)?;
        answer.push(byte[0]);
    }
    let head = Head::parse(&answer, 4096);
    if head.status == http::StatusCode::SWITCHING_PROTOCOLS {
        return Ok(());
    }
    let mut body = vec![0u8; head.content_length];
    let _ = s.read_exact(&mut body).await;
    Err(crate::net::http::error_from_response(head.status, &body, peer))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relay_urls_name_a_relay_and_a_name() {
        let p = parse("https://relay.example.org/relay/lab-7").unwrap();
        assert_eq!((p.tls, p.authority().as_str(), p.path.as_str()), (true, "relay.example.org:443", "/relay/lab-7"));
        let v = ViaRelay::new("http://[::1]:7070/relay/x/", "k").unwrap();
        assert_eq!((v.url.as_str(), v.host().as_str()), ("http://[::1]:7070/relay/x", "::1"));
        for bad in [
            "http://h:1",
            "http://h:1/relay/",
            "http://h:1/relay/a/b",
            "http://h:1/other/a",
            "ftp://h/relay/a",
            "http://u:p@h/relay/a",
            "h:1/relay/a",
            "http://h:99999/relay/a",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
        assert!(!format!("{:?}", ViaRelay::new("http://h:1/relay/a", "secret-key").unwrap()).contains("secret"));
    }
}
