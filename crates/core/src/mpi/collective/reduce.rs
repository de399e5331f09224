//! Reductions with a builtin op, computed in the core: reduce (serial,
//! binomial), allreduce (reduce + broadcast, recursive doubling, ring,
//! Rabenseifner), scan and exscan (recursive doubling), reduce-scatter.
//! Builtin ops are commutative; where the order is free it is still fixed,
//! so every rank of an allreduce gets bit-identical results.

use bytes::Bytes;

use super::allgather::pof2;
use super::op::Op;
use super::{bcast, gather, Schedule};
use crate::error::{Error, ErrorClass, Result};

/// `acc = left op acc` (left from lower ranks), or a fault on a size mismatch.
fn combine_left(s: &mut Schedule, op: &Op, left: &[u8], acc: &mut [u8]) {
    if let Err(e) = op.apply(left, acc) {
        s.fault(e);
    }
}

/// `acc = acc op right` (right from higher ranks).
fn combine_right(s: &mut Schedule, op: &Op, acc: &mut Vec<u8>, right: &[u8]) {
    let mut r = right.to_vec();
    match op.apply(acc, &mut r) {
        Ok(()) => *acc = r,
        Err(e) => s.fault(e),
    }
}

pub fn reduce_serial(s: &mut Schedule, root: u32, mine: Bytes, op: &Op) -> Result<Option<Vec<u8>>> {
    if s.rank != root {
        s.send(root, &[mine])?;
        return Ok(None);
    }
    let mut acc: Option<Vec<u8>> = None;
    for r in 0..s.size {
        let b = if r == root { mine.clone() } else { s.recv_one(r)? };
        match acc.as_mut() {
            None => acc = Some(b.to_vec()),
            Some(a) => combine_right(s, op, a, &b),
        }
    }
    Ok(acc)
}

/// Each rank folds in its children's partial results (higher relative
/// ranks) and passes the sum of its subtree up.
pub fn reduce_binomial(s: &mut Schedule, root: u32, mine: Bytes, op: &Op) -> Result<Option<Vec<u8>>> {
    let n = s.size;
    let vr = (s.rank + n - root) % n;
    let mut acc = mine.to_vec();
    let mut mask = 1;
    while mask < n {
        if vr & mask != 0 {
            s.send((vr - mask + root) % n, &[Bytes::from(acc)])?;
            return Ok(None);
        }
        if vr + mask < n {
            let b = s.recv_one((vr + mask + root) % n)?;
            combine_right(s, op, &mut acc, &b);
        }
        mask <<= 1;
    }
    Ok(Some(acc))
}

pub fn allreduce_reduce_bcast(s: &mut Schedule, mine: Bytes, op: &Op) -> Result<Vec<u8>> {
    let acc = reduce_binomial(s, 0, mine, op)?.map(Bytes::from);
    Ok(bcast::binomial(s, 0, acc)?.to_vec())
}

/// The ranks that take part after folding n down to a power of two: ranks
/// below 2*rem pair up (the odd one keeps the pair's sum), the rest stay.
struct Fold {
    p: u32,
    rem: u32,
}

impl Fold {
    fn new(n: u32) -> Fold {
        let p = pof2(n);
        Fold { p, rem: n - p }
    }
    /// This rank's index among the folded ranks, if it takes part.
    fn index(&self, r: u32) -> Option<u32> {
        if r < 2 * self.rem {
            (r % 2 == 1).then_some(r / 2)
        } else {
            Some(r - self.rem)
        }
    }
    fn rank(&self, index: u32) -> u32 {
        if index < self.rem {
            2 * index + 1
        } else {
            index + self.rem
        }
    }
    /// Fold: even ranks below 2*rem hand their data to the odd rank above.
    fn enter(&self, s: &mut Schedule, op: &Op, acc: &mut [u8]) -> Result<()> {
        let r = s.rank;
        if r < 2 * self.rem {
            if r.is_multiple_of(2) {
                s.send(r + 1, &[Bytes::copy_from_slice(acc)])?;
            } else {
                let b = s.recv_one(r - 1)?;
                combine_left(s, op, &b, acc);
            }
        }
        Ok(())
    }
    /// Unfold: the odd ranks give the result back.
    fn leave(&self, s: &mut Schedule, acc: &mut Vec<u8>) -> Result<()> {
        let r = s.rank;
        if r < 2 * self.rem {
            if r.is_multiple_of(2) {
                *acc = s.recv_one(r + 1)?.to_vec();
            } else {
                s.send(r - 1, &[Bytes::from(acc.clone())])?;
            }
        }
        Ok(())
    }
}

pub fn allreduce_recursive_doubling(s: &mut Schedule, mine: Bytes, op: &Op) -> Result<Vec<u8>> {
    let fold = Fold::new(s.size);
    let mut acc = mine.to_vec();
    fold.enter(s, op, &mut acc)?;
    if let Some(me) = fold.index(s.rank) {
        let mut mask = 1;
        while mask < fold.p {
            let partner = fold.rank(me ^ mask);
            let b = s.sendrecv(partner, &[Bytes::from(acc.clone())], partner)?;
            let b = b.into_iter().next().unwrap_or_default();
            if partner < s.rank {
                combine_left(s, op, &b, &mut acc);
            } else {
                combine_right(s, op, &mut acc, &b);
            }
            mask <<= 1;
        }
    }
    fold.leave(s, &mut acc)?;
    Ok(acc)
}

/// Element-aligned byte ranges splitting `len` bytes into `parts` pieces.
fn segments(len: usize, elem: usize, parts: usize) -> Vec<std::ops::Range<usize>> {
    let count = len / elem;
    let (base, extra) = (count / parts, count % parts);
    let mut at = 0;
    (0..parts)
        .map(|i| {
            let n = (base + usize::from(i < extra)) * elem;
            let r = at..at + n;
            at += n;
            r
        })
        .collect()
}

/// Ring: reduce-scatter (n-1 steps, each rank ends with one fully reduced
/// segment) then ring allgather of the segments. Bandwidth-optimal.
pub fn allreduce_ring(s: &mut Schedule, mine: Bytes, op: &Op) -> Result<Vec<u8>> {
    let (n, r) = (s.size, s.rank);
    let mut acc = mine.to_vec();
    if n == 1 {
        return Ok(acc);
    }
    let seg = segments(acc.len(), op.dtype.size(), n as usize);
    let (right, left) = ((r + 1) % n, (r + n - 1) % n);
    for step in 0..n - 1 {
        let send = ((r + n - step) % n) as usize;
        let recv = ((r + 2 * n - step - 1) % n) as usize;
        s.send(right, &[Bytes::copy_from_slice(&acc[seg[send].clone()])])?;
        let b = s.recv_one(left)?;
        let target = &mut acc[seg[recv].clone()];
        // The segment from the left holds the lower ranks' share of the ring
        // order; apply it on the left for a fixed order.
        if let Err(e) = op.apply(&b, target) {
            s.fault(e);
        }
    }
    for step in 0..n - 1 {
        let send = ((r + 1 + n - step) % n) as usize;
        let recv = ((r + n - step) % n) as usize;
        s.send(right, &[Bytes::copy_from_slice(&acc[seg[send].clone()])])?;
        let b = s.recv_one(left)?;
        if b.len() == seg[recv].len() {
            acc[seg[recv].clone()].copy_from_slice(&b);
        } else {
            s.fault(Error::new(ErrorClass::Count, "allreduce: segment sizes differ between ranks"));
        }
    }
    Ok(acc)
}

/// Rabenseifner: recursive halving reduce-scatter, then recursive doubling
/// allgather, over the folded power-of-two ranks.
pub fn allreduce_rabenseifner(s: &mut Schedule, mine: Bytes, op: &Op) -> Result<Vec<u8>> {
    let fold = Fold::new(s.size);
    let mut acc = mine.to_vec();
    fold.enter(s, op, &mut acc)?;
    if let Some(me) = fold.index(s.rank) {
        let p = fold.p as usize;
        let seg = segments(acc.len(), op.dtype.size(), p);
        let span = |lo: usize, hi: usize| seg[lo].start..seg[hi - 1].end;
        // Halving: keep the half of the current window on my side of the bit.
        let (mut lo, mut hi) = (0usize, p);
        let mut mask = fold.p >> 1;
        let mut steps = Vec::new();
        while mask > 0 {
            let partner_idx = me ^ mask;
            let partner = fold.rank(partner_idx);
            let mid = (lo + hi) / 2;
            let (keep, give) = if me & mask == 0 { ((lo, mid), (mid, hi)) } else { ((mid, hi), (lo, mid)) };
            s.send(partner, &[Bytes::copy_from_slice(&acc[span(give.0, give.1)])])?;
            let b = s.recv_one(partner)?;
            let target = &mut acc[span(keep.0, keep.1)];
            let res = if partner < s.rank { op.apply(&b, target) } else { apply_right(op, target, &b) };
            if let Err(e) = res {
                s.fault(e);
            }
            steps.push((partner, keep, give));
            (lo, hi) = keep;
            mask >>= 1;
        }
        // Doubling: give back what was kept, in reverse order of the steps.
        for (partner, keep, give) in steps.into_iter().rev() {
            s.send(partner, &[Bytes::copy_from_slice(&acc[span(keep.0, keep.1)])])?;
            let b = s.recv_one(partner)?;
            let range = span(give.0, give.1);
            if b.len() == range.len() {
                acc[range].copy_from_slice(&b);
            } else {
                s.fault(Error::new(ErrorClass::Count, "allreduce: segment sizes differ between ranks"));
            }
        }
    }
    fold.leave(s, &mut acc)?;
    Ok(acc)
}

/// `acc = acc op right` in place.
fn apply_right(op: &Op, acc: &mut [u8], right: &[u8]) -> Result<()> {
    let mut r = right.to_vec();
    op.apply(acc, &mut r)?;
    acc.copy_from_slice(&r);
    Ok(())
}

/// Inclusive (or, with `exclusive`, exclusive) prefix reduction by recursive
/// doubling. Rank 0's exclusive result is undefined: None.
pub fn scan(s: &mut Schedule, mine: Bytes, op: &Op, exclusive: bool) -> Result<Option<Vec<u8>>> {
    let (n, r) = (s.size, s.rank);
    let mut partial = mine.to_vec();
    let mut result: Option<Vec<u8>> = if exclusive { None } else { Some(partial.clone()) };
    let mut mask = 1;
    while mask < n {
        let partner = r ^ mask;
        if partner < n {
            let b = s.sendrecv(partner, &[Bytes::from(partial.clone())], partner)?;
            let b = b.into_iter().next().unwrap_or_default();
            if partner < r {
                combine_left(s, op, &b, &mut partial);
                match result.as_mut() {
                    Some(acc) => combine_left(s, op, &b, acc),
                    None => result = Some(b.to_vec()),
                }
            } else {
                combine_right(s, op, &mut partial, &b);
            }
        }
        mask <<= 1;
    }
    Ok(result)
}

/// Reduce to rank 0, then scatter the pieces (`counts[i]` bytes to rank i).
pub fn reduce_scatter(s: &mut Schedule, mine: Bytes, counts: &[usize], op: &Op) -> Result<Vec<u8>> {
    let total: usize = counts.iter().sum();
    if total != mine.len() {
        s.fault(Error::new(ErrorClass::Count, format!("reduce_scatter: counts add up to {total} bytes, buffer holds {}", mine.len())));
    }
    let reduced = reduce_binomial(s, 0, mine, op)?;
    let blocks = reduced.map(|acc| {
        let acc = Bytes::from(acc);
        let mut at = 0;
        counts
            .iter()
            .map(|&c| {
                let b = acc.slice(at.min(acc.len())..(at + c).min(acc.len()));
                at += c;
                b
            })
            .collect()
    });
    Ok(gather::scatter_binomial(s, 0, blocks)?.to_vec())
}
