//! Gather and scatter of one block per rank (blocks may differ in size):
//! serial (the root talks to each rank) and binomial trees.

use bytes::Bytes;

use super::Schedule;
use crate::error::{Error, ErrorClass, Result};

/// The root gets every rank's block, in rank order; the others get nothing.
pub fn gather_serial(s: &mut Schedule, root: u32, mine: Bytes) -> Result<Vec<Bytes>> {
    if s.rank != root {
        s.send(root, &[mine])?;
        return Ok(Vec::new());
    }
    let mut out = Vec::with_capacity(s.size as usize);
    for r in 0..s.size {
        out.push(if r == root { mine.clone() } else { s.recv_one(r)? });
    }
    Ok(out)
}

/// Each rank collects its subtree's blocks (in relative rank order) and
/// passes them up in one message.
pub fn gather_binomial(s: &mut Schedule, root: u32, mine: Bytes) -> Result<Vec<Bytes>> {
    let n = s.size;
    let vr = (s.rank + n - root) % n;
    let mut held = vec![mine];
    let mut mask = 1;
    while mask < n {
        if vr & mask != 0 {
            s.send((vr - mask + root) % n, &held)?;
            return Ok(Vec::new());
        }
        let child = vr + mask;
        if child < n {
            let mut got = s.recv((child + root) % n)?;
            let expected = mask.min(n - child) as usize;
            if got.len() != expected {
                s.fault(Error::new(ErrorClass::Intern, format!("gather: {} blocks from a subtree of {expected}", got.len())));
                got.resize(expected, Bytes::new());
            }
            held.extend(got);
        }
        mask <<= 1;
    }
    // Relative order -> rank order.
    held.rotate_right(root as usize);
    Ok(held)
}

/// Every rank gets block `rank` of the root's `blocks`.
pub fn scatter_serial(s: &mut Schedule, root: u32, blocks: Option<Vec<Bytes>>) -> Result<Bytes> {
    if s.rank != root {
        return s.recv_one(root);
    }
    let blocks = blocks.unwrap_or_default();
    for r in (0..s.size).filter(|&r| r != root) {
        s.send(r, &[blocks[r as usize].clone()])?;
    }
    Ok(blocks[root as usize].clone())
}

/// Each rank receives its subtree's blocks and passes the children theirs.
pub fn scatter_binomial(s: &mut Schedule, root: u32, blocks: Option<Vec<Bytes>>) -> Result<Bytes> {
    let n = s.size;
    let vr = (s.rank + n - root) % n;
    let mut held = Vec::new();
    let mut mask = 1;
    if vr == 0 {
        held = blocks.unwrap_or_default();
        held.rotate_left(root as usize); // rank order -> relative order
        while mask < n {
            mask <<= 1;
        }
    } else {
        while mask < n {
            if vr & mask != 0 {
                held = s.recv((vr - mask + root) % n)?;
                let expected = mask.min(n - vr) as usize;
                if held.len() != expected {
                    s.fault(Error::new(ErrorClass::Intern, format!("scatter: {} blocks for a subtree of {expected}", held.len())));
                    held.resize(expected, Bytes::new());
                }
                break;
            }
            mask <<= 1;
        }
    }
    mask >>= 1;
    while mask > 0 {
        if vr + mask < n {
            let theirs = held.split_off(mask as usize);
            s.send((vr + mask + root) % n, &theirs)?;
        }
        mask >>= 1;
    }
    Ok(held.into_iter().next().unwrap_or_default())
}
