//! Barrier: dissemination (log n rounds, no root), or an empty gather
//! followed by an empty broadcast (serial or binomial).

use bytes::Bytes;

use super::{bcast, gather, Schedule};
use crate::error::Result;

pub fn dissemination(s: &mut Schedule) -> Result<()> {
    let (n, r) = (s.size, s.rank);
    let mut k = 1;
    while k < n {
        s.send((r + k) % n, &[])?;
        s.recv((r + n - k) % n)?;
        k <<= 1;
    }
    Ok(())
}

pub fn serial(s: &mut Schedule) -> Result<()> {
    gather::gather_serial(s, 0, Bytes::new())?;
    bcast::serial(s, 0, Some(Bytes::new()))?;
    Ok(())
}

pub fn binomial(s: &mut Schedule) -> Result<()> {
    gather::gather_binomial(s, 0, Bytes::new())?;
    bcast::binomial(s, 0, Some(Bytes::new()))?;
    Ok(())
}
