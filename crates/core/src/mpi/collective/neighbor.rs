//! Neighbourhood collectives: each rank exchanges blocks with its topology
//! neighbours only. Block i goes to out-neighbour i, result block j comes
//! from in-neighbour j, in MPI's order (per Cartesian dimension the
//! negative neighbour, then the positive one; a graph's adjacency list; a
//! distributed graph's sources and destinations). `neighbor_allgather` is
//! the same exchange with one block for every out-neighbour.
//!
//! One message goes to each distinct out-neighbour, with that neighbour's
//! blocks in edge order behind a block of their keys; one is received from
//! each distinct in-neighbour. Two ranks may be neighbours along several
//! edges (a periodic dimension of 1 or 2, a graph's repeated edges): the
//! n-th in-edge from a rank with key k takes the n-th block that rank sent
//! with key k, as point-to-point messages with one tag match in order. A
//! Cartesian topology keys block i by i and expects in-edge j's block
//! under j ^ 1 (what went to the positive neighbour arrives as the negative
//! one's); graphs key every edge alike. A `PROC_NULL` neighbour moves
//! nothing (its result block is empty).

use std::collections::HashMap;

use bytes::Bytes;

use super::Schedule;
use crate::error::{err, Error, ErrorClass, Result};
use crate::mpi::PROC_NULL;

/// One edge of a rank's neighbourhood: the neighbour (a rank of the
/// communicator, or `PROC_NULL`) and the key that pairs the blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Edge {
    pub rank: i64,
    pub key: u32,
}

/// Neighbours among the communicator's `n` ranks, a block per out-edge.
pub fn check(sources: &[Edge], destinations: &[Edge], blocks: &[Bytes], n: u32) -> Result<()> {
    if let Some(e) = sources.iter().chain(destinations).find(|e| e.rank != PROC_NULL && !(0..n as i64).contains(&e.rank)) {
        return err(ErrorClass::Rank, format!("invalid neighbour {} (communicator size {n})", e.rank));
    }
    if blocks.len() != destinations.len() {
        return err(
            ErrorClass::Count,
            format!("a neighbourhood exchange needs one block per out-neighbour ({}), got {}", destinations.len(), blocks.len()),
        );
    }
    Ok(())
}

/// Send block i to `destinations[i]`, receive one from each of `sources`.
pub fn exchange(s: &mut Schedule, sources: &[Edge], destinations: &[Edge], blocks: Vec<Bytes>) -> Result<Vec<Bytes>> {
    for (dest, edges) in by_rank(destinations) {
        let keys: Vec<u32> = edges.iter().map(|&i| destinations[i].key).collect();
        let mut message = vec![encode(&keys)];
        message.extend(edges.iter().map(|&i| blocks[i].clone()));
        s.send(dest, &message)?;
    }
    let mut out = vec![Bytes::new(); sources.len()];
    for (source, edges) in by_rank(sources) {
        let mut got = s.recv(source)?;
        if got.is_empty() {
            continue; // the receive failed: a fault, recorded
        }
        let sent = decode(&got.remove(0));
        let wanted: Vec<u32> = edges.iter().map(|&j| sources[j].key).collect();
        match pair(&wanted, &sent, got.len(), source) {
            Ok(taken) => {
                for (&j, k) in edges.iter().zip(taken) {
                    out[j] = got[k].clone();
                }
            }
            Err(e) => s.fault(e),
        }
    }
    Ok(out)
}

/// The distinct ranks of `edges` (`PROC_NULL` apart), in order of first
/// appearance, each with the indices of its edges.
fn by_rank(edges: &[Edge]) -> Vec<(u32, Vec<usize>)> {
    let mut out: Vec<(u32, Vec<usize>)> = Vec::new();
    let mut at: HashMap<i64, usize> = HashMap::new();
    for (i, e) in edges.iter().enumerate().filter(|(_, e)| e.rank != PROC_NULL) {
        let k = *at.entry(e.rank).or_insert_with(|| {
            out.push((e.rank as u32, Vec::new()));
            out.len() - 1
        });
        out[k].1.push(i);
    }
    out
}

fn encode(keys: &[u32]) -> Bytes {
    keys.iter().flat_map(|k| k.to_le_bytes()).collect::<Vec<u8>>().into()
}

fn decode(b: &[u8]) -> Vec<u32> {
    b.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

/// Which of the `blocks` sent (their keys: `sent`) each wanted edge takes:
/// the n-th edge wanting key k, the n-th block sent with key k. Every block
/// must be taken, and every edge served.
fn pair(wanted: &[u32], sent: &[u32], blocks: usize, source: u32) -> Result<Vec<usize>> {
    let mismatch =
        || Error::new(ErrorClass::Count, format!("neighbour {source} sent blocks {sent:?} (by key), the topology here expects {wanted:?}"));
    if sent.len() != blocks || wanted.len() != blocks {
        return Err(mismatch());
    }
    let mut queues: HashMap<u32, std::collections::VecDeque<usize>> = HashMap::new();
    for (i, k) in sent.iter().enumerate() {
        queues.entry(*k).or_default().push_back(i);
    }
    wanted.iter().map(|k| queues.get_mut(k).and_then(|q| q.pop_front()).ok_or_else(mismatch)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edges(ranks: &[i64], keys: &[u32]) -> Vec<Edge> {
        ranks.iter().zip(keys).map(|(&rank, &key)| Edge { rank, key }).collect()
    }

    #[test]
    fn one_message_per_neighbour_in_first_appearance_order() {
        let e = edges(&[2, PROC_NULL, 0, 2, 0], &[0; 5]);
        assert_eq!(by_rank(&e), vec![(2, vec![0, 3]), (0, vec![2, 4])]);
        assert!(by_rank(&edges(&[PROC_NULL], &[0])).is_empty());
        assert_eq!(decode(&encode(&[0, 7, u32::MAX])), vec![0, 7, u32::MAX]);
    }

    #[test]
    fn blocks_pair_by_key_then_in_order() {
        // A periodic dimension of 2: the same rank is both neighbours; what
        // it sent to its positive neighbour (key 1) is this rank's negative
        // in-edge (j = 0 expects key 0 ^ 1), and the other way round.
        assert_eq!(pair(&[1, 0], &[0, 1], 2, 3).unwrap(), vec![1, 0]);
        // Graph edges (one key): in order.
        assert_eq!(pair(&[0, 0, 0], &[0, 0, 0], 3, 3).unwrap(), vec![0, 1, 2]);
        // Two dimensions, both periodic of 1: this rank four times over.
        assert_eq!(pair(&[1, 0, 3, 2], &[0, 1, 2, 3], 4, 0).unwrap(), vec![1, 0, 3, 2]);
        // A block too many, one too few, or under a key nobody expects.
        for (wanted, sent) in [(&[0][..], &[0, 0][..]), (&[0, 0][..], &[0][..]), (&[0][..], &[5][..])] {
            assert_eq!(pair(wanted, sent, sent.len(), 1).unwrap_err().class, ErrorClass::Count);
        }
    }

    #[test]
    fn neighbours_are_ranks_of_the_communicator() {
        let b = vec![Bytes::new()];
        assert!(check(&edges(&[PROC_NULL, 3], &[0, 0]), &edges(&[0], &[0]), &b, 4).is_ok());
        assert_eq!(check(&edges(&[4], &[0]), &[], &[], 4).unwrap_err().class, ErrorClass::Rank);
        assert_eq!(check(&[], &edges(&[-2], &[0]), &b, 4).unwrap_err().class, ErrorClass::Rank);
        assert_eq!(check(&[], &edges(&[1, 2], &[0, 0]), &b, 4).unwrap_err().class, ErrorClass::Count);
    }
}
