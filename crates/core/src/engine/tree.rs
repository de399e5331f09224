//! The binomial tree a broadcast travels down, as list arithmetic, for the
//! root that starts it (`mpi::collective::Schedule::send_tree`), the ranks
//! that pass it on as it arrives (`rank::Instance::deliver`) and the ranks
//! that wait for it (`mpi::collective::bcast`).
//!
//! The ranks are listed root first. The subtree of the member at position
//! m, a power of two below the list's length, is positions `[m, 2m)`
//! (clipped to the list): a list of its own, that member first. So each
//! member's parent is its position with the lowest set bit cleared.

use std::ops::Range;

/// The subtrees hanging off the root of a list of `n` ranks, highest offset
/// (farthest) first: the root sends to them first, their subtrees are the
/// deepest. For five ranks: 4..5, then 2..4, then 1..2.
pub fn subtrees(n: usize) -> impl Iterator<Item = Range<usize>> {
    let top = n.next_power_of_two() >> 1;
    std::iter::successors((top > 0).then_some(top), |&m| (m > 1).then_some(m >> 1)).filter(move |&m| m < n).map(move |m| m..(2 * m).min(n))
}

/// The position of the member at `position`'s parent (position 0 is the root).
pub fn parent(position: u32) -> u32 {
    position - (position & position.wrapping_neg())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subtrees_split_the_list_largest_first() {
        assert_eq!(subtrees(0).count(), 0);
        assert_eq!(subtrees(1).count(), 0);
        assert_eq!(subtrees(2).collect::<Vec<_>>(), vec![1..2]);
        assert_eq!(subtrees(5).collect::<Vec<_>>(), vec![4..5, 2..4, 1..2]);
        assert_eq!(subtrees(8).collect::<Vec<_>>(), vec![4..8, 2..4, 1..2]);
    }

    /// Passing the message on down the subtrees, as the endpoints do,
    /// reaches every rank once, each from the parent `parent` names.
    #[test]
    fn forwarding_reaches_every_rank_once_from_its_parent() {
        for n in 1..=70usize {
            let mut reached = vec![0u32; n];
            let mut lists = vec![(0..n).collect::<Vec<usize>>()];
            while let Some(list) = lists.pop() {
                for r in subtrees(list.len()) {
                    let sub: Vec<usize> = list[r].to_vec();
                    reached[sub[0]] += 1;
                    assert_eq!(parent(sub[0] as u32) as usize, list[0], "n={n}: parent of {}", sub[0]);
                    lists.push(sub);
                }
            }
            assert_eq!(reached[0], 0);
            assert!(reached[1..].iter().all(|&c| c == 1), "n={n}: {reached:?}");
        }
    }
}
