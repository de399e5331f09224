//! The HTTP body type used by the server and the client: a queue of byte
//! chunks sent as they are (payload buffers are never concatenated), a
//! file read as it is sent (job files of any size, never held in memory),
//! or another connection's body passed on as it arrives (a relay's), or
//! chunks made as it goes on, of no length known ahead (an event stream's).

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
    segments: VecDeque<Segment>,
    remaining: u64,
    relayed: Option<Incoming>,
    live: Option<tokio::sync::mpsc::Receiver<Bytes>>,
    held: Option<Held>,
}

/// What a live body keeps until it is dropped (its connection's "busy" mark).
struct Held(#[allow(dead_code)] Box<dyn std::any::Any + Send + Sync>);

impl std::fmt::Debug for Held {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Held")
    }
}

/// A piece of a body: bytes in memory, or the first bytes of a file, read as they are sent.
#[derive(Debug)]
pub enum Segment {
    Bytes(Bytes),
    File(tokio::fs::File, u64),
}

impl Segment {
    fn len(&self) -> u64 {
        match self {
            Segment::Bytes(b) => b.len() as u64,
            Segment::File(_, n) => *n,
        }
    }
}

/// How much of a file one body frame carries.
const FILE_FRAME: u64 = 256 << 10;

impl Chunks {
    pub fn new(chunks: impl IntoIterator<Item = Bytes>) -> Self {
        Chunks::segments(chunks.into_iter().map(Segment::Bytes))
    }

    /// The first `len` bytes of `file`, read as they are sent.
    pub fn file(file: tokio::fs::File, len: u64) -> Self {
        Chunks::segments([Segment::File(file, len)])
    }

    /// Bytes and files, one after the other (an MTOM package's parts).
    pub fn segments(segments: impl IntoIterator<Item = Segment>) -> Self {
        let segments: VecDeque<Segment> = segments.into_iter().filter(|s| s.len() > 0).collect();
        let remaining = segments.iter().map(Segment::len).sum();
        Chunks { segments, remaining, ..Chunks::default() }
    }

    /// Another connection's body, passed on frame by frame; if it breaks,
    /// so does this one (the receiver sees a cut body, never a shorter one).
    pub fn relayed(body: Incoming) -> Self {
        Chunks { relayed: Some(body), ..Chunks::default() }
    }

    /// The chunks `made` gives, as it gives them, until it is dropped.
    pub fn live(made: tokio::sync::mpsc::Receiver<Bytes>) -> Self {
        Chunks { live: Some(made), ..Chunks::default() }
    }

    /// Whether it is made as it goes on (`live`).
    pub fn is_live(&self) -> bool {
        self.live.is_some()
    }

    /// Keep `value` for as long as the body is sent.
    pub fn hold(&mut self, value: impl std::any::Any + Send + Sync) {
        self.held = Some(Held(Box::new(value)));
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
        if let Some(live) = self.live.as_mut() {
            return live.poll_recv(cx).map(|made| made.map(|b| Ok(Frame::data(b))));
        }
        let this = &mut *self;
        match this.segments.front_mut() {
            None => Poll::Ready(None),
            Some(Segment::Bytes(_)) => {
                let Some(Segment::Bytes(c)) = this.segments.pop_front() else { unreachable!("matched above") };
                this.remaining -= c.len() as u64;
                Poll::Ready(Some(Ok(Frame::data(c))))
            }
            Some(Segment::File(file, left)) => {
                let mut buf = BytesMut::zeroed((*left).min(FILE_FRAME) as usize);
                let mut read = ReadBuf::new(&mut buf);
                match Pin::new(file).poll_read(cx, &mut read) {
                    Poll::Pending => Poll::Pending,
                    Poll::Ready(Ok(())) if !read.filled().is_empty() => {
                        let n = read.filled().len();
                        buf.truncate(n);
                        *left -= n as u64;
                        this.remaining -= n as u64;
                        if *left == 0 {
                            this.segments.pop_front();
                        }
                        Poll::Ready(Some(Ok(Frame::data(buf.freeze()))))
                    }
                    // Shorter than announced, or unreadable: end early; the peer sees
                    // a body cut off (its length was announced), never wrong data.
                    Poll::Ready(_) => {
                        this.segments.clear();
                        Poll::Ready(None)
                    }
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.relayed {
            Some(relayed) => relayed.is_end_stream(),
            None => self.live.is_none() && self.segments.is_empty(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.relayed {
            Some(relayed) => relayed.size_hint(),
            None if self.live.is_some() => SizeHint::default(),
            None => SizeHint::with_exact(self.remaining),
        }
    }
}
