//! Streams over TLS: a rustls connection cannot be read and written by
//! several blocking threads at once (as `stream` / `inbound` do with a TCP
//! socket), so a task pumps bytes between the TLS connection and one end of
//! a local socket pair, and the frame code uses the other end: every frame
//! code path stays the same, only the socket type differs (`Socket`).

use std::os::unix::net::UnixStream;

use bytes::Bytes;
use hyper::upgrade::Upgraded;
use hyper_util::rt::TokioIo;
use hyper_util::server::conn::auto::upgrade::downcast;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

use crate::direct::socket::Socket;
use crate::runtime::runtime;

/// Copy buffer per direction: a TLS record carries at most 16 KiB, and a
/// large message crosses in fewer turns with a few records per read.
const PUMP_BUFFER: usize = 256 * 1024;

/// Pump `tls` through a new socket pair; the returned end is the stream's socket.
pub fn pump<S>(tls: S) -> std::io::Result<Socket>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (mine, theirs) = UnixStream::pair()?;
    theirs.set_nonblocking(true)?;
    let _in_runtime = runtime().enter();
    let mut theirs = tokio::net::UnixStream::from_std(theirs)?;
    runtime().spawn(async move {
        let mut tls = tls;
        // Ends when both sides closed, or one broke: the other then sees the end.
        let _ = tokio::io::copy_bidirectional_with_sizes(&mut tls, &mut theirs, PUMP_BUFFER, PUMP_BUFFER).await;
    });
    Ok(Socket::Pumped(mine))
}

/// The socket of a connection the server upgraded, cleartext or TLS, and
/// the bytes read past the HTTP exchange.
pub fn upgraded_socket(upgraded: Upgraded) -> Option<(Socket, Bytes)> {
    let upgraded = match downcast::<TokioIo<TcpStream>>(upgraded) {
        Ok(parts) => return Some((Socket::Tcp(parts.io.into_inner().into_std().ok()?), parts.read_buf)),
        Err(other) => other,
    };
    let parts = downcast::<TokioIo<tokio_rustls::server::TlsStream<TcpStream>>>(upgraded).ok()?;
    Some((pump(parts.io.into_inner()).ok()?, parts.read_buf))
}
