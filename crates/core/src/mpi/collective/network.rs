//! Near or far: whether a communicator's ranks talk across slow links.
//!
//! The algorithm of a collective must be the same on every rank, so this is
//! agreed, once per communicator, at the first collective whose algorithm
//! it would change (`collective::choose`): a dissemination barrier, which opens streams to log2 n peers and
//! times them (`net::rtt`), then an allreduce (recursive doubling) of the
//! largest median round trip any rank has seen. Far (at least `config::wide_rtt`): each round costs a wide-area latency and each
//! tree level a buffer's transfer, so the algorithms with the fewest rounds,
//! and a pipeline for large broadcasts, win over those that suit ranks
//! crowded on one host (fewer messages at once, more rounds).

use std::time::Duration;

use bytes::Bytes;

use super::op::{Dtype, Op, OpKind};
use super::{barrier, reduce, Schedule};
use crate::error::Result;
use crate::mpi::Comm;
use crate::net::rtt;

/// Whether `comm`'s ranks are far apart, measured and agreed now.
pub fn measure(comm: &Comm, timeout: Option<Duration>) -> Result<bool> {
    let mut s = Schedule::new(comm, timeout, "barrier");
    let out = barrier::dissemination(&mut s);
    s.finish(()).and(out)?;
    let local = rtt::median().unwrap_or_default().as_micros() as u64;
    let max = Op { kind: OpKind::Max, dtype: Dtype::U64 };
    let mut s = Schedule::new(comm, timeout, "allreduce");
    let out = reduce::allreduce_recursive_doubling(&mut s, Bytes::copy_from_slice(&local.to_ne_bytes()), &max);
    let agreed = s.finish(()).and(out)?;
    let micros = u64::from_ne_bytes(agreed.get(..8).and_then(|b| b.try_into().ok()).unwrap_or([0; 8]));
    Ok(Duration::from_micros(micros) >= crate::config::wide_rtt())
}
