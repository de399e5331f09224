//! Streams over a TLS session this process's stream threads cannot take
//! over (`net::tls_socket` does where they can): a tunnel's session,
//! inside a connection to the relay, and a session whose stream is handed
//! to an instance's own process (`service::sandbox`). A task pumps bytes
//! between the session and one end of a local socket pair, and the frame
//! code uses the other end (`Socket::Pumped`).

use std::os::unix::net::UnixStream;

use bytes::Bytes;
use futures_util::FutureExt;
use hyper::upgrade::Upgraded;
use hyper_util::rt::TokioIo;
use hyper_util::server::conn::auto::upgrade::downcast;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::net::socket::Socket;
use crate::net::tls::Wire;
use crate::net::tls_socket;
use crate::runtime::runtime;

/// Copy buffer per direction: a large message crosses in fewer turns.
const PUMP_BUFFER: usize = 256 * 1024;

/// Pump `tls` through a new socket pair; the returned end is the stream's socket.
pub fn pump<S>(tls: S) -> std::io::Result<Socket>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (mine, theirs) = UnixStream::pair()?;
    theirs.set_nonblocking(true)?;
    let _in_runtime = runtime().enter();
    let (local_r, local_w) = tokio::net::UnixStream::from_std(theirs)?.into_split();
    let (tls_r, tls_w) = tokio::io::split(tls);
    // Ends when both directions ended, or at once when one broke (all is
    // dropped: the other side sees the end).
    runtime().spawn(async move {
        let _ = tokio::try_join!(forward(tls_r, local_w), forward(local_r, tls_w));
    });
    Ok(Socket::Pumped(mine))
}

/// Copy `from` to `to` until the end, passing on the end. What is ready is
/// gathered before it is written: a TLS read yields one record (16 KiB at
/// most), and a write per record would wake the reading thread per record.
async fn forward<R, W>(mut from: R, mut to: W) -> std::io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut buf = vec![0u8; PUMP_BUFFER];
    loop {
        let mut n = from.read(&mut buf).await?;
        if n == 0 {
            return to.shutdown().await;
        }
        while n < buf.len() {
            match from.read(&mut buf[n..]).now_or_never() {
                Some(Ok(more)) if more > 0 => n += more,
                Some(Err(e)) => return Err(e),
                _ => break, // nothing more now, or the end (seen by the next read)
            }
        }
        to.write_all(&buf[..n]).await?;
        to.flush().await?;
    }
}

/// The socket of a connection the server upgraded, cleartext or TLS, and
/// the bytes read past the HTTP exchange. `direct`: a TLS session is taken
/// over by the stream's threads (`net::tls_socket`), else pumped (the
/// socket is handed to another process).
pub fn upgraded_socket(upgraded: Upgraded, direct: bool) -> Option<(Socket, Bytes)> {
    let upgraded = match downcast::<TokioIo<TcpStream>>(upgraded) {
        Ok(parts) => return Some((Socket::Tcp(parts.io.into_inner().into_std().ok()?), parts.read_buf)),
        Err(other) => other,
    };
    let upgraded = match downcast::<TokioIo<tokio_rustls::server::TlsStream<Wire>>>(upgraded) {
        Ok(parts) => return Some((tls(parts.io.into_inner(), direct, |t| t.into_inner())?, parts.read_buf)),
        Err(other) => other,
    };
    // A connection this endpoint opened to its https relay (`service::reverse`).
    let upgraded = match downcast::<TokioIo<tokio_rustls::client::TlsStream<Wire>>>(upgraded) {
        Ok(parts) => return Some((tls(parts.io.into_inner(), direct, |t| t.into_inner())?, parts.read_buf)),
        Err(other) => other,
    };
    // A tunnel's TLS session, inside a connection to the relay (`service::tunnel`).
    let parts = downcast::<TokioIo<tokio_rustls::server::TlsStream<TokioIo<Upgraded>>>>(upgraded).ok()?;
    Some((pump(parts.io.into_inner()).ok()?, parts.read_buf))
}

/// A server's or a client's TLS stream as the stream's socket: taken over
/// (`direct`), or pumped; `session` parts it into its connection and session.
fn tls<S, C>(stream: S, direct: bool, session: impl FnOnce(S) -> (Wire, C)) -> Option<Socket>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    C: Into<rustls::Connection>,
{
    if direct {
        // The upgrade is answered: the stream's records are its own now.
        let taken = tls_socket::take_over(session(stream)).ok()?;
        taken.own_records().ok()?;
        Some(Socket::Tls(taken))
    } else {
        pump(stream).ok()
    }
}
