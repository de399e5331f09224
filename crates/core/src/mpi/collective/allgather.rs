//! Allgather (ring, recursive doubling) and alltoall (pairwise exchange).

use bytes::Bytes;

use super::Schedule;
use crate::error::{Error, ErrorClass, Result};

/// n-1 steps; in each, pass the block received last to the right.
pub fn ring(s: &mut Schedule, mine: Bytes) -> Result<Vec<Bytes>> {
    let (n, r) = (s.size, s.rank);
    let mut out = vec![Bytes::new(); n as usize];
    out[r as usize] = mine;
    let (right, left) = ((r + 1) % n, (r + n - 1) % n);
    for step in 0..n.saturating_sub(1) {
        let send = ((r + n - step) % n) as usize;
        let recv = ((r + 2 * n - step - 1) % n) as usize;
        s.send(right, &[out[send].clone()])?;
        out[recv] = s.recv_one(left)?;
    }
    Ok(out)
}

/// Largest power of two not above `n`.
pub fn pof2(n: u32) -> u32 {
    1 << (31 - n.leading_zeros())
}

/// log2(n) exchanges of everything known so far with the partner whose
/// rank differs in one bit. With n not a power of two, the ranks above the
/// largest power of two first hand their block to a partner below it and
/// get the whole result back at the end.
pub fn recursive_doubling(s: &mut Schedule, mine: Bytes) -> Result<Vec<Bytes>> {
    let (n, r) = (s.size, s.rank);
    let p = pof2(n);
    let rem = n - p;
    if r >= p {
        s.send(r - p, &[mine])?;
        let mut all = s.recv(r - p)?;
        if all.len() != n as usize {
            s.fault(Error::new(ErrorClass::Intern, "allgather: incomplete result"));
            all.resize(n as usize, Bytes::new());
        }
        return Ok(all);
    }
    let mut out = vec![Bytes::new(); n as usize];
    out[r as usize] = mine;
    if r < rem {
        out[(r + p) as usize] = s.recv_one(r + p)?;
    }
    // The ranks (and their folded partners) of the group `q` leads after
    // the exchanges below `mask`, in the order they are sent.
    let members = |q: u32, mask: u32| -> Vec<usize> {
        let base = q & !(mask - 1);
        (base..base + mask).flat_map(|m| if m < rem { vec![m as usize, (m + p) as usize] } else { vec![m as usize] }).collect()
    };
    let mut mask = 1;
    while mask < p {
        let partner = r ^ mask;
        let mine: Vec<Bytes> = members(r, mask).into_iter().map(|i| out[i].clone()).collect();
        let theirs = s.sendrecv(partner, &mine, partner)?;
        let slots = members(partner, mask);
        if theirs.len() != slots.len() {
            s.fault(Error::new(ErrorClass::Intern, "allgather: unexpected block count"));
        }
        for (i, b) in slots.into_iter().zip(theirs) {
            out[i] = b;
        }
        mask <<= 1;
    }
    if r < rem {
        s.send(r + p, &out)?;
    }
    Ok(out)
}

/// Block `i` of every rank's `blocks` goes to rank `i`; rank `r` gets the
/// blocks addressed to it, in source rank order. Step k exchanges with the
/// ranks k apart, so every pair talks once and no rank is a hot spot.
pub fn alltoall_pairwise(s: &mut Schedule, blocks: Vec<Bytes>) -> Result<Vec<Bytes>> {
    let (n, r) = (s.size, s.rank);
    let mut out = vec![Bytes::new(); n as usize];
    out[r as usize] = blocks[r as usize].clone();
    for step in 1..n {
        let (dest, src) = ((r + step) % n, (r + n - step) % n);
        s.send(dest, &[blocks[dest as usize].clone()])?;
        out[src as usize] = s.recv_one(src)?;
    }
    Ok(out)
}
