//! Intercommunicator collectives: every collective MPI defines between two
//! groups, as one schedule over both (`Schedule::send_remote`,
//! `recv_remote`).
//!
//! MPI's rules: a rooted call has its root in one group, which passes
//! `ROOT` there (`PROC_NULL` on its other ranks, which take no part), while
//! the other group passes the root's rank in the remote group ([`Side`]);
//! data goes from one group to the other (`allgather`: each group gets the
//! other's blocks; `allreduce`: the reduction of the other group's
//! contributions; `reduce_scatter`: the other group's reduction, scattered
//! by this group's counts).
//!
//! Each call is the local group's own steps (binomial trees rooted at the
//! leader, local rank 0) and one exchange between the leaders, or between
//! the root and the other group's leader; `alltoall` is direct, each rank to
//! each remote rank. All of it travels under the call's one tag, and faults
//! travel with the data as on an intracommunicator: a rank that fails in one
//! group is an error in both, never a hang.

use bytes::Bytes;

use super::{bcast, gather, reduce, Call, Schedule};
use crate::engine::tree;
use crate::error::{err, Error, ErrorClass, Result};
use crate::mpi::{PROC_NULL, ROOT};

/// Where this rank stands in a rooted intercommunicator call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The root (it passed `ROOT`).
    Root,
    /// The root's group, not the root (`PROC_NULL`): no part in the call.
    Idle,
    /// The other group; the root is this rank of the remote group.
    Remote(u32),
}

impl Side {
    /// The side a `root` argument puts this rank on; ERR_ROOT for anything
    /// but `ROOT`, `PROC_NULL` or a rank of the remote group.
    pub fn of(root: i64, remote_size: u32) -> Result<Side> {
        match root {
            ROOT => Ok(Side::Root),
            PROC_NULL => Ok(Side::Idle),
            r if (0..remote_size as i64).contains(&r) => Ok(Side::Remote(r as u32)),
            r => err(ErrorClass::Root, format!("invalid root {r} (remote group size {remote_size}; or ROOT, PROC_NULL)")),
        }
    }
}

/// The leader of each group: the one that talks to the other group.
const LEADER: u32 = 0;

/// Check what every rank can check alike, before any message: the root,
/// a block per remote rank where the call sends one to each, a count per
/// local rank, and the calls MPI leaves undefined on an intercommunicator.
pub fn check(call: &Call, size: u32, remote_size: u32) -> Result<()> {
    let blocks = |what: &str, have: usize, want: u32| {
        if have == want as usize {
            return Ok(());
        }
        err(
            ErrorClass::Count,
            format!(
                "{} on an intercommunicator needs one {what} per {} ({want}), got {have}",
                call.name(),
                if what == "count" { "local rank" } else { "remote rank" }
            ),
        )
    };
    match call {
        Call::Scan { .. } | Call::Exscan { .. } => err(ErrorClass::Comm, format!("{} is not defined on an intercommunicator", call.name())),
        Call::Neighbor { .. } => err(ErrorClass::Comm, "neighbourhood collectives take a topology (an intracommunicator)"),
        Call::Bcast { root, .. } | Call::Gather { root, .. } | Call::Reduce { root, .. } => Side::of(*root, remote_size).map(|_| ()),
        Call::Scatter { root, blocks: b } => match (Side::of(*root, remote_size)?, b) {
            (Side::Root, Some(b)) => blocks("block", b.len(), remote_size),
            (Side::Root, None) => blocks("block", 0, remote_size),
            _ => Ok(()),
        },
        Call::Alltoall { blocks: b } => blocks("block", b.len(), remote_size),
        Call::ReduceScatter { counts, .. } => blocks("count", counts.len(), size),
        Call::Barrier | Call::Allgather { .. } | Call::Allreduce { .. } => Ok(()),
    }
}

/// Run `call` (checked by [`check`]): its result blocks at this rank.
pub fn execute(s: &mut Schedule, call: Call) -> Result<Vec<Bytes>> {
    let m = s.remote_size().unwrap_or(0);
    let lead = s.rank == LEADER;
    Ok(match call {
        Call::Barrier => {
            // Every rank here has entered once the leader hears from all;
            // every rank there, once the leaders swapped word.
            gather::gather_binomial(s, LEADER, Bytes::new())?;
            let theirs = if lead { Some(swap(s, &[])?) } else { None };
            spread(s, theirs)?;
            Vec::new()
        }
        Call::Bcast { root, data, .. } => match Side::of(root, m)? {
            Side::Root => {
                s.send_remote(LEADER, &[data.unwrap_or_default()])?;
                Vec::new()
            }
            Side::Idle => Vec::new(),
            Side::Remote(r) => {
                let got = if lead { Some(s.recv_remote_one(r)?) } else { None };
                vec![bcast::binomial(s, LEADER, got)?]
            }
        },
        Call::Gather { root, data } => match Side::of(root, m)? {
            Side::Root => {
                let got = s.recv_remote(LEADER)?;
                counted(s, got, m, "gather: blocks from the remote group")
            }
            Side::Idle => Vec::new(),
            Side::Remote(r) => {
                let held = gather::gather_binomial(s, LEADER, data)?;
                if lead {
                    s.send_remote(r, &held)?;
                }
                Vec::new()
            }
        },
        Call::Scatter { root, blocks } => match Side::of(root, m)? {
            Side::Root => {
                s.send_remote(LEADER, &blocks.unwrap_or_default())?;
                Vec::new()
            }
            Side::Idle => Vec::new(),
            Side::Remote(r) => {
                let n = s.size;
                let got = if lead { Some(s.recv_remote(r)?) } else { None };
                let got = got.map(|b| counted(s, b, n, "scatter: blocks for the local group"));
                vec![gather::scatter_binomial(s, LEADER, got)?]
            }
        },
        Call::Allgather { data } => {
            let held = gather::gather_binomial(s, LEADER, data)?;
            let theirs = if lead { Some(swap(s, &held)?) } else { None };
            let got = spread(s, theirs)?;
            counted(s, got, m, "allgather: blocks from the remote group")
        }
        Call::Alltoall { blocks } => {
            for (j, b) in blocks.into_iter().enumerate() {
                s.send_remote(j as u32, &[b])?;
            }
            (0..m).map(|j| s.recv_remote_one(j)).collect::<Result<_>>()?
        }
        Call::Reduce { root, data, op } => match Side::of(root, m)? {
            Side::Root => vec![s.recv_remote_one(LEADER)?],
            Side::Idle => Vec::new(),
            Side::Remote(r) => {
                if let Some(acc) = reduce::reduce_binomial(s, LEADER, data, &op)? {
                    s.send_remote(r, &[acc.into()])?;
                }
                Vec::new()
            }
        },
        Call::Allreduce { data, op } => {
            let theirs = match reduce::reduce_binomial(s, LEADER, data, &op)? {
                Some(acc) => Some(swap_one(s, acc.into())?),
                None => None,
            };
            vec![bcast::binomial(s, LEADER, theirs)?]
        }
        Call::ReduceScatter { data, counts, op } => {
            let blocks = match reduce::reduce_binomial(s, LEADER, data, &op)? {
                Some(acc) => {
                    let theirs = swap_one(s, acc.into())?;
                    let (blocks, fault) = cut(theirs, &counts);
                    if let Some(e) = fault {
                        s.fault(e);
                    }
                    Some(blocks)
                }
                None => None,
            };
            vec![gather::scatter_binomial(s, LEADER, blocks)?]
        }
        Call::Scan { .. } | Call::Exscan { .. } | Call::Neighbor { .. } => return err(ErrorClass::Intern, "refused by check"),
    })
}

/// At the leader: send `blocks` to the remote leader, and receive its.
fn swap(s: &mut Schedule, blocks: &[Bytes]) -> Result<Vec<Bytes>> {
    s.send_remote(LEADER, blocks)?;
    s.recv_remote(LEADER)
}

fn swap_one(s: &mut Schedule, block: Bytes) -> Result<Bytes> {
    s.send_remote(LEADER, &[block])?;
    s.recv_remote_one(LEADER)
}

/// The leader's `blocks` on every local rank: a binomial tree from the
/// leader, forwarded by the endpoints (as `bcast::binomial`, any number of
/// blocks).
fn spread(s: &mut Schedule, blocks: Option<Vec<Bytes>>) -> Result<Vec<Bytes>> {
    if s.rank == LEADER {
        let blocks = blocks.unwrap_or_default();
        let order: Vec<u32> = (0..s.size).collect();
        s.send_tree(&order, &blocks)?;
        return Ok(blocks);
    }
    s.recv(tree::parent(s.rank))
}

/// `blocks`, which must be `n`: a fault (and as many empty ones) if not.
fn counted(s: &mut Schedule, mut blocks: Vec<Bytes>, n: u32, what: &str) -> Vec<Bytes> {
    if blocks.len() != n as usize {
        s.fault(Error::new(ErrorClass::Intern, format!("{what}: {} for {n} ranks", blocks.len())));
        blocks.resize(n as usize, Bytes::new());
    }
    blocks
}

/// The remote group's reduction cut into this group's blocks by `counts`
/// (bytes per local rank), and a fault if their sum is not its length.
fn cut(data: Bytes, counts: &[usize]) -> (Vec<Bytes>, Option<Error>) {
    let total: usize = counts.iter().sum();
    let fault = (data.len() != total).then(|| {
        let msg = format!("reduce_scatter: the remote group's reduction has {} bytes, the counts here add up to {total}", data.len());
        Error::new(ErrorClass::Truncate, msg)
    });
    let mut at = 0;
    let blocks = counts
        .iter()
        .map(|&k| {
            let b = data.slice(at.min(data.len())..(at + k).min(data.len()));
            at += k;
            b
        })
        .collect();
    (blocks, fault)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mpi::collective::Op;

    #[test]
    fn a_root_argument_places_the_rank() {
        assert_eq!(Side::of(ROOT, 3).unwrap(), Side::Root);
        assert_eq!(Side::of(PROC_NULL, 3).unwrap(), Side::Idle);
        assert_eq!(Side::of(0, 3).unwrap(), Side::Remote(0));
        assert_eq!(Side::of(2, 3).unwrap(), Side::Remote(2));
        for bad in [3, -2, -4, i64::MAX] {
            let e = Side::of(bad, 3).unwrap_err();
            assert_eq!(e.class, ErrorClass::Root, "{bad}");
            assert!(e.message.contains("remote group size 3"), "{}", e.message);
        }
    }

    #[test]
    fn arguments_are_checked_against_the_right_group() {
        let op = || Op::new("sum", "i8").unwrap();
        // Blocks for each remote rank (3), counts for each local rank (2).
        assert!(check(&Call::Alltoall { blocks: vec![Bytes::new(); 3] }, 2, 3).is_ok());
        assert_eq!(check(&Call::Alltoall { blocks: vec![Bytes::new(); 2] }, 2, 3).unwrap_err().class, ErrorClass::Count);
        let scatter = |root, n| Call::Scatter { root, blocks: Some(vec![Bytes::new(); n]) };
        assert!(check(&scatter(ROOT, 3), 2, 3).is_ok());
        assert_eq!(check(&scatter(ROOT, 2), 2, 3).unwrap_err().class, ErrorClass::Count);
        assert!(check(&scatter(1, 0), 2, 3).is_ok()); // only the root's blocks count
        assert_eq!(check(&Call::Scatter { root: ROOT, blocks: None }, 2, 3).unwrap_err().class, ErrorClass::Count);
        let rs = |n| Call::ReduceScatter { data: Bytes::new(), counts: vec![0; n], op: op() };
        assert!(check(&rs(2), 2, 3).is_ok());
        assert_eq!(check(&rs(3), 2, 3).unwrap_err().class, ErrorClass::Count);
        // Roots, and what MPI leaves undefined.
        assert_eq!(check(&Call::Bcast { root: 3, data: None, len: None }, 2, 3).unwrap_err().class, ErrorClass::Root);
        assert!(check(&Call::Reduce { root: PROC_NULL, data: Bytes::new(), op: op() }, 2, 3).is_ok());
        assert_eq!(check(&Call::Scan { data: Bytes::new(), op: op() }, 2, 3).unwrap_err().class, ErrorClass::Comm);
        let ngh = Call::Neighbor { sources: vec![], destinations: vec![], blocks: vec![] };
        assert_eq!(check(&ngh, 2, 3).unwrap_err().class, ErrorClass::Comm);
        assert!(check(&Call::Barrier, 1, 1).is_ok());
    }

    #[test]
    fn a_reduction_is_cut_by_the_local_counts() {
        let (blocks, fault) = cut(Bytes::from_static(b"abcdef"), &[2, 0, 4]);
        assert_eq!(blocks, vec![Bytes::from_static(b"ab"), Bytes::new(), Bytes::from_static(b"cdef")]);
        assert!(fault.is_none());
        // Too long or too short: a fault, and blocks all the same (no rank waits).
        let (blocks, fault) = cut(Bytes::from_static(b"abcdef"), &[2, 2]);
        assert_eq!((blocks.len(), fault.unwrap().class), (2, ErrorClass::Truncate));
        let (blocks, fault) = cut(Bytes::from_static(b"abc"), &[2, 2]);
        assert_eq!(blocks, vec![Bytes::from_static(b"ab"), Bytes::from_static(b"c")]);
        assert!(fault.is_some());
    }
}
