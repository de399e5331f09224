//! Broadcast: serial (the root sends to each rank), binomial tree,
//! scatter + ring allgather for large buffers of a size every rank knows,
//! and a pipeline of segments down a chain, for large buffers across slow links.

use bytes::{Bytes, BytesMut};

use super::{allgather, gather, Schedule};
use crate::engine::tree;
use crate::error::Result;

pub fn serial(s: &mut Schedule, root: u32, data: Option<Bytes>) -> Result<Bytes> {
    if s.rank != root {
        return s.recv_one(root);
    }
    let d = data.unwrap_or_default();
    for r in (0..s.size).filter(|&r| r != root) {
        s.send(r, std::slice::from_ref(&d))?;
    }
    Ok(d)
}

/// Binomial tree, forwarded by the endpoints: the root sends to its children
/// with their subtrees attached, and each rank's endpoint passes the message
/// on as soon as it arrives, whether or not its application has reached the
/// broadcast yet. Each rank then only receives from its parent.
pub fn binomial(s: &mut Schedule, root: u32, data: Option<Bytes>) -> Result<Bytes> {
    let n = s.size;
    if s.rank == root {
        let d = data.unwrap_or_default();
        let order: Vec<u32> = (0..n).map(|i| (root + i) % n).collect();
        s.send_tree(&order, std::slice::from_ref(&d))?;
        return Ok(d);
    }
    let vr = (s.rank + n - root) % n;
    let parent = (tree::parent(vr) + root) % n;
    s.recv_one(parent)
}

/// Van de Geijn: scatter the buffer in `n` pieces (binomial), then ring
/// allgather; each rank moves ~2x the data once instead of log n times.
pub fn scatter_allgather(s: &mut Schedule, root: u32, data: Option<Bytes>, len: usize) -> Result<Bytes> {
    let n = s.size as usize;
    let piece = len.div_ceil(n).max(1);
    let blocks = data.map(|d| (0..n).map(|i| d.slice((i * piece).min(d.len())..((i + 1) * piece).min(d.len()))).collect());
    let mine = gather::scatter_binomial(s, root, blocks)?;
    let all = allgather::ring(s, mine)?;
    let mut out = BytesMut::with_capacity(len);
    for b in all {
        out.extend_from_slice(&b);
    }
    Ok(out.freeze())
}

/// The segment a pipelined broadcast of `len` bytes over `n` ranks moves at
/// a time: small enough that the chain fills fast (each rank forwards a
/// segment only once it has all of it), large enough that each message's
/// own cost is small beside its transfer. 64 MiB over 8 ranks through
/// 1 Gbit/s links: 1 MiB segments reached 0.67 of the link rate, 128-256
/// KiB 0.70-0.71, 64 KiB 0.69.
fn segment(len: usize, n: u32) -> usize {
    (len / (32 * n as usize).max(1)).clamp(128 << 10, 1 << 20)
}

/// A chain from the root, the buffer in segments: each rank forwards
/// segment k to the next while it receives k + 1 (sends do not wait).
/// The result is the segments as received, in order: joining them here
/// would cost every rank a fresh buffer of `len` bytes and one more copy
/// (the caller copies them where they go anyway).
pub fn pipeline(s: &mut Schedule, root: u32, data: Option<Bytes>, len: usize) -> Result<Vec<Bytes>> {
    let n = s.size;
    let seg = segment(len, n);
    let count = len.div_ceil(seg).max(1);
    let vr = (s.rank + n - root) % n;
    let next = (vr + 1 < n).then(|| (s.rank + 1) % n);
    if vr == 0 {
        let d = data.unwrap_or_default();
        if let Some(next) = next {
            for k in 0..count {
                s.send(next, &[d.slice((k * seg).min(d.len())..((k + 1) * seg).min(d.len()))])?;
            }
        }
        return Ok(vec![d]);
    }
    let prev = (s.rank + n - 1) % n;
    let mut out = Vec::with_capacity(count);
    for _ in 0..count {
        let piece = s.recv_one(prev)?;
        if let Some(next) = next {
            s.send(next, std::slice::from_ref(&piece))?;
        }
        out.push(piece);
    }
    Ok(out)
}
