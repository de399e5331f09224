//! The HTTP body type used by the server and the client: a queue of byte
//! chunks sent as they are (payload buffers are never concatenated), a
//! file read as it is sent (job files of any size, never held in memory),
//! or another connection's body passed on as it arrives (a relay's).

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;
use serde::Serialize;
use tokio::io::{AsyncRead, ReadBuf};

#[derive(Debug, Default)]
pub struct Chunks {
    chunks: VecDeque<Bytes>,
    remaining: u64,
    file: Option<tokio::fs::File>,
    relayed: Option<Incoming>,
}

/// How much of a file one body frame carries.
const FILE_FRAME: u64 = 256 << 10;

impl Chunks {
    pub fn new(chunks: impl IntoIterator<Item = Bytes>) -> Self {
        let chunks: VecDeque<Bytes> = chunks.into_iter().filter(|c| !c.is_empty()).collect();
        let remaining = chunks.iter().map(|c| c.len() as u64).sum();
        Chunks { chunks, remaining, ..Chunks::default() }
    }

    /// The first `len` bytes of `file`, read as they are sent.
    pub fn file(file: tokio::fs::File, len: u64) -> Self {
        Chunks { remaining: len, file: (len > 0).then_some(file), ..Chunks::default() }
    }

    /// Another connection's body, passed on frame by frame; if it breaks,
    /// so does this one (the receiver sees a cut body, never a shorter one).
    pub fn relayed(body: Incoming) -> Self {
        Chunks { relayed: Some(body), ..Chunks::default() }
    }

    pub fn empty() -> Self {
        Chunks::default()
    }

    pub fn json<T: Serialize + ?Sized>(value: &T) -> Self {
        Chunks::new([Bytes::from(serde_json::to_vec(value).expect("JSON encoding"))])
    }
}

impl Body for Chunks {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        if let Some(relayed) = self.relayed.as_mut() {
            return Pin::new(relayed).poll_frame(cx);
        }
        if let Some(c) = self.chunks.pop_front() {
            self.remaining -= c.len() as u64;
            return Poll::Ready(Some(Ok(Frame::data(c))));
        }
        let this = &mut *self;
        let Some(file) = this.file.as_mut() else { return Poll::Ready(None) };
        let mut buf = BytesMut::zeroed(this.remaining.min(FILE_FRAME) as usize);
        let mut read = ReadBuf::new(&mut buf);
        match Pin::new(file).poll_read(cx, &mut read) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Ok(())) if !read.filled().is_empty() => {
                let n = read.filled().len();
                buf.truncate(n);
                this.remaining -= n as u64;
                if this.remaining == 0 {
                    this.file = None;
                }
                Poll::Ready(Some(Ok(Frame::data(buf.freeze()))))
            }
            // Shorter than announced, or unreadable: end early; the peer sees
            // a body cut off (its length was announced), never wrong data.
            Poll::Ready(_) => {
                this.file = None;
                Poll::Ready(None)
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.relayed {
            Some(relayed) => relayed.is_end_stream(),
            None => self.chunks.is_empty() && self.file.is_none(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.relayed {
            Some(relayed) => relayed.size_hint(),
            None => SizeHint::with_exact(self.remaining),
        }
    }
}
