//! The HTTP body type used by the server and the client: a queue of byte
//! chunks sent as they are (payload buffers are never concatenated).

use std::collections::VecDeque;
use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use serde::Serialize;

#[derive(Debug, Default)]
pub struct Chunks {
    chunks: VecDeque<Bytes>,
    remaining: u64,
}

impl Chunks {
    pub fn new(chunks: impl IntoIterator<Item = Bytes>) -> Self {
        let chunks: VecDeque<Bytes> = chunks.into_iter().filter(|c| !c.is_empty()).collect();
        let remaining = chunks.iter().map(|c| c.len() as u64).sum();
        Chunks { chunks, remaining }
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
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.chunks.pop_front() {
            Some(c) => {
                self.remaining -= c.len() as u64;
                Poll::Ready(Some(Ok(Frame::data(c))))
            }
            None => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.chunks.is_empty()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.remaining)
    }
}
