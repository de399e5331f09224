//! The HTTP client's connector: every connection `net::http` makes
//! is opened by `net::proxy::open` (direct, tunnelled or forwarded); TLS
//! is layered on top by hyper-rustls, end to end with the peer. A name
//! `net::tunnel::synthetic` made for a pinned endpoint behind a relay is
//! opened as its tunnel instead (TLS with the endpoint inside the
//! connection to the relay); the client sends plain HTTP on it.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use http::Uri;
use hyper_util::client::legacy::connect::{Connected, Connection};
use hyper_util::rt::TokioIo;

use crate::error::{Error, ErrorClass};
use crate::net::proxy;
use crate::net::tunnel::{self, Io};

#[derive(Clone, Default)]
pub struct Connector;

/// A connection to a peer, or to the proxy that forwards requests to it.
pub struct Outbound {
    io: TokioIo<Box<dyn Io>>,
    /// Requests on it go in absolute form, to a proxy.
    forwarded: bool,
}

impl tower_service::Service<Uri> for Connector {
    type Response = Outbound;
    type Error = Error;
    type Future = Pin<Box<dyn Future<Output = Result<Outbound, Error>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, dst: Uri) -> Self::Future {
        Box::pin(async move {
            if let Some(t) = dst.host().and_then(tunnel::tunnel_of) {
                let io: Box<dyn Io> = Box::new(tunnel::open(&t).await?);
                return Ok(Outbound { io: TokioIo::new(io), forwarded: false });
            }
            let scheme = dst.scheme_str().unwrap_or("http").to_string();
            let authority = proxy::authority(&dst).map_err(|why| Error::new(ErrorClass::Arg, why))?;
            let peer = format!("{scheme}://{authority}");
            let opened = proxy::open(&scheme, &authority, &peer, false).await?;
            let io: Box<dyn Io> = Box::new(opened.tcp);
            Ok(Outbound { io: TokioIo::new(io), forwarded: opened.forward.is_some() })
        })
    }
}

impl Connection for Outbound {
    fn connected(&self) -> Connected {
        Connected::new().proxy(self.forwarded)
    }
}

impl hyper::rt::Read for Outbound {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: hyper::rt::ReadBufCursor<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl hyper::rt::Write for Outbound {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn poll_write_vectored(mut self: Pin<&mut Self>, cx: &mut Context<'_>, bufs: &[io::IoSlice<'_>]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}
