//! Collective operations, moved by the core: every algorithm is a sequence
//! of sends and receives on a [`Schedule`], and reductions with builtin ops
//! run here on raw typed buffers ([`op`]).
//!
//! Data is a list of byte blocks: one per rank for gather / scatter /
//! allgather / alltoall (sizes may differ: the `v` variants are the same
//! calls), one buffer for broadcast and reductions. Objects are pickled by
//! the Python layer, so the same calls move them.
//!
//! The same calls run on an intercommunicator, with MPI's rules there
//! ([`inter`]: a rooted call's root passes [`ROOT`](crate::mpi::ROOT), the
//! rest of its group `PROC_NULL`, the other group the root's rank; data
//! goes from one group to the other), and a topology's neighbourhood
//! exchanges are one more call ([`Call::Neighbor`], [`neighbor`]). Every
//! call, whatever its kind, takes the communicator's next sequence number.
//!
//! An algorithm is chosen by name ([`ALGORITHMS`]), forced per call, by the
//! environment (`MPIWS_ALGO_BCAST=binomial`, ...) or picked here by message
//! size, number of ranks and how far apart they are ([`network`]). Ranks
//! must agree on it, so the choice uses only what every rank knows: the
//! communicator size, the agreed size hint and the agreed network.

pub mod allgather;
pub mod barrier;
pub mod bcast;
pub mod gather;
pub mod inter;
pub mod neighbor;
pub mod network;
pub mod op;
pub mod reduce;
pub mod schedule;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use crate::engine::completion::{Completion, Outcome};
use crate::error::{err, ErrorClass, Result};
use crate::mpi::Comm;
use crate::runtime::runtime;
use crate::wire::frame::{Envelope, Payload};
pub use neighbor::Edge;
pub use op::Op;
pub use schedule::Schedule;

/// One collective call and its data. A `root` is a rank of the
/// communicator; on an intercommunicator, `ROOT` at the root, `PROC_NULL`
/// on the rest of its group, the root's rank in the remote group on the
/// other (checked by `prepare`, as every argument every rank can check).
pub enum Call {
    Barrier,
    /// `data` at the root; `len` if every rank knows the size (buffers).
    Bcast {
        root: i64,
        data: Option<Bytes>,
        len: Option<usize>,
    },
    Gather {
        root: i64,
        data: Bytes,
    },
    Scatter {
        root: i64,
        blocks: Option<Vec<Bytes>>,
    },
    Allgather {
        data: Bytes,
    },
    Alltoall {
        blocks: Vec<Bytes>,
    },
    Reduce {
        root: i64,
        data: Bytes,
        op: Op,
    },
    Allreduce {
        data: Bytes,
        op: Op,
    },
    /// `counts[i]`: bytes of the result that go to rank i.
    ReduceScatter {
        data: Bytes,
        counts: Vec<usize>,
        op: Op,
    },
    Scan {
        data: Bytes,
        op: Op,
    },
    Exscan {
        data: Bytes,
        op: Op,
    },
    /// A neighbourhood exchange over a topology: `blocks[i]` to
    /// `destinations[i]`, result block j from `sources[j]` (empty from
    /// `PROC_NULL`); an edge's key tells several edges between two ranks
    /// apart ([`neighbor`]).
    Neighbor {
        sources: Vec<Edge>,
        destinations: Vec<Edge>,
        blocks: Vec<Bytes>,
    },
}

/// Algorithm names per collective; the first is the fallback.
pub const ALGORITHMS: &[(&str, &[&str])] = &[
    ("barrier", &["dissemination", "binomial", "serial"]),
    ("bcast", &["binomial", "serial", "scatter_allgather", "pipeline"]),
    ("gather", &["binomial", "serial"]),
    ("scatter", &["binomial", "serial"]),
    ("allgather", &["recursive_doubling", "ring"]),
    ("alltoall", &["pairwise"]),
    ("reduce", &["binomial", "serial"]),
    ("allreduce", &["recursive_doubling", "reduce_bcast", "ring", "rabenseifner"]),
    ("reduce_scatter", &["reduce_scatter"]),
    ("scan", &["recursive_doubling"]),
    ("exscan", &["recursive_doubling"]),
];

impl Call {
    pub fn name(&self) -> &'static str {
        match self {
            Call::Barrier => "barrier",
            Call::Bcast { .. } => "bcast",
            Call::Gather { .. } => "gather",
            Call::Scatter { .. } => "scatter",
            Call::Allgather { .. } => "allgather",
            Call::Alltoall { .. } => "alltoall",
            Call::Reduce { .. } => "reduce",
            Call::Allreduce { .. } => "allreduce",
            Call::ReduceScatter { .. } => "reduce_scatter",
            Call::Scan { .. } => "scan",
            Call::Exscan { .. } => "exscan",
            Call::Neighbor { .. } => "neighbor",
        }
    }

    fn root(&self) -> Option<i64> {
        match self {
            Call::Bcast { root, .. } | Call::Gather { root, .. } | Call::Scatter { root, .. } | Call::Reduce { root, .. } => Some(*root),
            _ => None,
        }
    }

    /// A size every rank agrees on, for choosing the algorithm.
    fn agreed_size(&self, hint: Option<usize>) -> Option<usize> {
        match self {
            Call::Bcast { len, .. } => *len,
            Call::Allreduce { data, .. } | Call::Reduce { data, .. } => Some(data.len()),
            _ => hint,
        }
    }
}

/// The algorithm to run: `forced` (a call's or the environment's choice),
/// else by size and ranks. Unknown names are an MPI_ERR_ARG.
/// `crowded`: the domain runs on one host with more ranks than cores
/// (`Instance::crowded`, the same on every rank, as the choice must be);
/// `wide`: the ranks are far apart (`network`, agreed likewise).
pub fn choose(name: &str, forced: Option<&str>, size: Option<usize>, ranks: u32, crowded: bool, wide: bool) -> Result<&'static str> {
    let known = ALGORITHMS.iter().find(|(c, _)| *c == name).map(|(_, a)| *a).unwrap_or(&[]);
    let env = crate::config::forced_algorithm(name);
    if let Some(f) = forced.or(env.as_deref()).filter(|f| !f.is_empty() && *f != "auto") {
        return match known.iter().find(|a| **a == f) {
            Some(a) => Ok(a),
            None => err(ErrorClass::Arg, format!("unknown {name} algorithm '{f}' (known: {})", known.join(", "))),
        };
    }
    let big = |limit: usize| size.is_some_and(|s| s >= limit);
    Ok(match name {
        // Far apart, a tree level costs a whole buffer's transfer: segments
        // down a chain overlap the levels (about len / rate + (n - 2)
        // segments; 8 ranks, 8 MiB at 100 Mbit/s: 0.94 s against the
        // binomial tree's 2.1 s, benchmarks/wan).
        "bcast" if wide && ranks > 2 && big(1 << 20) => "pipeline",
        // Measured on one host (benchmarks/collectives): the forwarded
        // binomial tree beats scatter+allgather up to 8 ranks at every size.
        "bcast" if ranks > 8 && big(512 << 10) => "scatter_allgather",
        "gather" | "scatter" if big(64 << 10) => "serial",
        "allgather" if big(64 << 10) => "ring",
        "allreduce" if ranks > 2 && big(1 << 20) => "ring",
        "allreduce" if ranks > 2 && big(64 << 10) => "rabenseifner",
        // On one crowded host (4 and 8 ranks on 2 cores) binomial beat
        // dissemination, 107 vs 216 us and 377 vs 602 us: fewer messages in
        // flight at once for ranks that share cores.
        "barrier" if crowded && !wide => "binomial",
        // Likewise small allreduces (4 ranks on 2 cores, 8 B: 155 vs 260 us;
        // 4 KiB: 166 vs 280 us): a reduce up a tree, a forwarded broadcast down.
        "allreduce" if crowded && !wide => "reduce_bcast",
        _ => known.first().copied().unwrap_or("default"),
    })
}

impl Comm {
    /// Run a collective to completion on the calling thread. The result is
    /// a list of blocks (see [`Call`]); ranks that get nothing get none.
    pub fn collective(&self, call: Call, algorithm: Option<&str>, hint: Option<usize>, timeout: Option<Duration>) -> Result<Vec<Bytes>> {
        let out = self.run(call, algorithm, hint, timeout)?;
        if out.chunks.len() == out.parts.len() {
            return Ok(out.chunks);
        }
        Ok(Payload::from_chunks(out.chunks).into_parts(&out.parts))
    }

    /// [`Comm::collective`], its result as a received payload (one part per
    /// block), a block's pieces left apart for the caller to place.
    pub fn collective_outcome(
        &self,
        call: Call,
        algorithm: Option<&str>,
        hint: Option<usize>,
        timeout: Option<Duration>,
    ) -> Result<Outcome> {
        Ok(self.run(call, algorithm, hint, timeout)?.outcome(self.context))
    }

    /// Start a collective in the background; its completion carries the
    /// result as [`Comm::collective_outcome`] gives it.
    pub fn icollective(
        &self,
        call: Call,
        algorithm: Option<&str>,
        hint: Option<usize>,
        timeout: Option<Duration>,
    ) -> Result<Arc<Completion>> {
        let (mut s, algo) = self.prepare(&call, algorithm, hint, timeout)?;
        let c = Completion::new();
        let done = c.clone();
        let context = self.context;
        runtime().spawn_blocking(move || {
            let out = execute(&mut s, call, algo);
            done.complete(settle(s, out).map(|out| out.outcome(context)));
        });
        Ok(c)
    }

    fn run(&self, call: Call, algorithm: Option<&str>, hint: Option<usize>, timeout: Option<Duration>) -> Result<Produced> {
        let (mut s, algo) = self.prepare(&call, algorithm, hint, timeout)?;
        let out = execute(&mut s, call, algo);
        settle(s, out)
    }

    /// Check the arguments every rank can check alike, claim the call's
    /// sequence number and pick the algorithm (an intercommunicator's and a
    /// neighbourhood's calls have one each: nothing to choose).
    fn prepare(
        &self,
        call: &Call,
        algorithm: Option<&str>,
        hint: Option<usize>,
        timeout: Option<Duration>,
    ) -> Result<(Schedule, &'static str)> {
        match self.remote_group() {
            Some(remote) => inter::check(call, self.size(), remote.len() as u32)?,
            None => self.check(call)?,
        }
        if self.is_inter() || matches!(call, Call::Neighbor { .. }) {
            return Ok((Schedule::new(self, timeout, call.name()), call.name()));
        }
        let n = self.size();
        let size = call.agreed_size(hint);
        let pick = |wide| choose(call.name(), algorithm, size, n, self.instance.crowded, wide);
        // Measured only where it changes the choice (the measuring synchronizes the ranks once).
        let (near, far) = (pick(false)?, pick(true)?);
        let algo = if near != far && self.far_apart(timeout)? { far } else { near };
        Ok((Schedule::new(self, timeout, call.name()), algo))
    }

    /// An intracommunicator's arguments: roots among its ranks, a block
    /// per rank where the call sends one to each, neighbours among its ranks.
    fn check(&self, call: &Call) -> Result<()> {
        let n = self.size();
        if let Some(root) = call.root() {
            if !(0..n as i64).contains(&root) {
                return err(ErrorClass::Root, format!("invalid root {root} (communicator size {n})"));
            }
        }
        let blocks_ok = match call {
            Call::Scatter { root, blocks: Some(b) } if *root == self.rank as i64 => b.len() == n as usize,
            Call::Alltoall { blocks } => blocks.len() == n as usize,
            Call::ReduceScatter { counts, .. } => counts.len() == n as usize,
            _ => true,
        };
        if !blocks_ok {
            return err(ErrorClass::Count, format!("{} needs one block per rank ({n})", call.name()));
        }
        if let Call::Neighbor { sources, destinations, blocks } = call {
            neighbor::check(sources, destinations, blocks, n)?;
        }
        Ok(())
    }
}

/// What a collective produced: its result blocks (`parts`: their lengths)
/// over `chunks`. A block may span several chunks: a pipelined broadcast's
/// segments stay apart, since joining them would cost a buffer and a copy
/// that the caller, copying them where they go, does not need.
struct Produced {
    chunks: Vec<Bytes>,
    parts: Vec<u64>,
}

impl Produced {
    /// One block, in pieces.
    fn pieces(chunks: Vec<Bytes>) -> Self {
        let len = chunks.iter().map(|c| c.len() as u64).sum();
        Produced { chunks, parts: vec![len] }
    }

    /// As a receive's outcome (one part per block).
    fn outcome(self, context: u64) -> Outcome {
        let env = Envelope { source: u32::MAX, context, tag: -1, seq: None, sync: false, parts: self.parts, forward: vec![] };
        Outcome::Received { env, payload: Payload::from_chunks(self.chunks) }
    }
}

/// A block per chunk.
impl From<Vec<Bytes>> for Produced {
    fn from(blocks: Vec<Bytes>) -> Self {
        let parts = blocks.iter().map(|b| b.len() as u64).collect();
        Produced { chunks: blocks, parts }
    }
}

/// The call's own error first, else the fault its schedule saw.
fn settle(s: Schedule, out: Result<Produced>) -> Result<Produced> {
    let finished = s.finish(());
    let out = out?;
    finished.map(|()| out)
}

fn one(b: Vec<u8>) -> Vec<Bytes> {
    vec![Bytes::from(b)]
}

fn execute(s: &mut Schedule, call: Call, algo: &str) -> Result<Produced> {
    if s.remote_size().is_some() {
        return Ok(inter::execute(s, call)?.into());
    }
    // Roots are ranks of the communicator here (`Comm::check`).
    let at = |root: i64| root as u32;
    Ok(match call {
        Call::Barrier => {
            match algo {
                "serial" => barrier::serial(s)?,
                "binomial" => barrier::binomial(s)?,
                _ => barrier::dissemination(s)?,
            }
            Vec::new()
        }
        Call::Bcast { root, data, len } => match (algo, len) {
            ("serial", _) => vec![bcast::serial(s, at(root), data)?],
            ("scatter_allgather", Some(len)) => vec![bcast::scatter_allgather(s, at(root), data, len)?],
            ("pipeline", Some(len)) => return Ok(Produced::pieces(bcast::pipeline(s, at(root), data, len)?)),
            _ => vec![bcast::binomial(s, at(root), data)?],
        },
        Call::Gather { root, data } => match algo {
            "serial" => gather::gather_serial(s, at(root), data)?,
            _ => gather::gather_binomial(s, at(root), data)?,
        },
        Call::Scatter { root, blocks } => vec![match algo {
            "serial" => gather::scatter_serial(s, at(root), blocks)?,
            _ => gather::scatter_binomial(s, at(root), blocks)?,
        }],
        Call::Allgather { data } => match algo {
            "ring" => allgather::ring(s, data)?,
            _ => allgather::recursive_doubling(s, data)?,
        },
        Call::Alltoall { blocks } => allgather::alltoall_pairwise(s, blocks)?,
        Call::Reduce { root, data, op } => match algo {
            "serial" => reduce::reduce_serial(s, at(root), data, &op)?,
            _ => reduce::reduce_binomial(s, at(root), data, &op)?,
        }
        .map_or_else(Vec::new, one),
        Call::Allreduce { data, op } => one(match algo {
            "reduce_bcast" => reduce::allreduce_reduce_bcast(s, data, &op)?,
            "ring" => reduce::allreduce_ring(s, data, &op)?,
            "rabenseifner" => reduce::allreduce_rabenseifner(s, data, &op)?,
            _ => reduce::allreduce_recursive_doubling(s, data, &op)?,
        }),
        Call::ReduceScatter { data, counts, op } => one(reduce::reduce_scatter(s, data, &counts, &op)?),
        Call::Scan { data, op } => reduce::scan(s, data, &op, false)?.map_or_else(Vec::new, one),
        Call::Exscan { data, op } => reduce::scan(s, data, &op, true)?.map_or_else(Vec::new, one),
        Call::Neighbor { sources, destinations, blocks } => neighbor::exchange(s, &sources, &destinations, blocks)?,
    }
    .into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn far_apart_ranks_take_fewer_rounds_and_pipelines() {
        let mib = Some(64 << 20);
        // crowded on one host, near: fewer messages at once
        assert_eq!(choose("barrier", None, None, 8, true, false).unwrap(), "binomial");
        assert_eq!(choose("allreduce", None, Some(8), 8, true, false).unwrap(), "reduce_bcast");
        assert_eq!(choose("bcast", None, mib, 8, true, false).unwrap(), "binomial");
        // far apart: log2 n rounds, and a pipeline for large broadcasts
        assert_eq!(choose("barrier", None, None, 8, true, true).unwrap(), "dissemination");
        assert_eq!(choose("allreduce", None, Some(1024), 8, true, true).unwrap(), "recursive_doubling");
        assert_eq!(choose("bcast", None, mib, 8, false, true).unwrap(), "pipeline");
        assert_eq!(choose("bcast", None, Some(1024), 8, false, true).unwrap(), "binomial");
        assert_eq!(choose("bcast", None, mib, 2, false, true).unwrap(), "binomial");
        // not crowded: the same whether near or far (nothing to measure)
        assert_eq!(choose("barrier", None, None, 8, false, false).unwrap(), choose("barrier", None, None, 8, false, true).unwrap());
        // a forced choice wins
        assert_eq!(choose("bcast", Some("serial"), mib, 8, false, true).unwrap(), "serial");
    }
}
