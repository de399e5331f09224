//! Every collective algorithm on 1..=8 ranks (in-process endpoints, real
//! HTTP and streams), checked against the result computed serially.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use mpiws_core::Binding;
use mpiws_core::Comm;
use mpiws_core::ErrorClass;
use mpiws_core::{Call, Op, ALGORITHMS};
use mpiws_core::{Config, Endpoint};

const T: Option<Duration> = Some(Duration::from_secs(20));

/// Run `f(comm)` on `n` ranks, one thread each; results in rank order.
fn on_ranks<R: Send + 'static>(n: u32, f: impl Fn(Comm) -> R + Send + Sync + 'static) -> Vec<R> {
    on_ranks_ending(n, true, f)
}

/// `on_ranks`; `delivered`: every rank's sends must have been delivered at
/// its end (false where a rank ends early: what others send it may not be).
fn on_ranks_ending<R: Send + 'static>(n: u32, delivered: bool, f: impl Fn(Comm) -> R + Send + Sync + 'static) -> Vec<R> {
    let eps: Vec<Arc<Endpoint>> = (0..n).map(|_| Endpoint::start(Config::default()).unwrap()).collect();
    let urls: Vec<String> = eps.iter().map(|e| e.url()).collect();
    let domain = format!("d{}", rand_id());
    let f = Arc::new(f);
    let threads: Vec<_> = (0..n)
        .map(|r| {
            let b = Binding {
                domain: domain.clone(),
                rank: r,
                endpoints: urls.clone(),
                token: "t".repeat(16),
                service: String::new(),
                params: serde_json::Value::Null,
            };
            let inst = eps[r as usize].create_instance(b, false, None).unwrap();
            let f = f.clone();
            std::thread::spawn(move || {
                let out = f(Comm::world(inst.clone()));
                // End the instance: its streams close, their readers end.
                let flushed = inst.flush(T);
                assert!(flushed.is_ok() || !delivered, "rank {r}: {flushed:?}");
                inst.finish(serde_json::Value::Null);
                out
            })
        })
        .collect();
    let out = threads.into_iter().map(|t| t.join().unwrap()).collect();
    drop(eps);
    out
}

fn rand_id() -> u64 {
    use std::time::{SystemTime, UNIX_EPOCH};
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64
}

fn algos(name: &str) -> Vec<&'static str> {
    ALGORITHMS.iter().find(|(c, _)| *c == name).unwrap().1.to_vec()
}

fn i64s(v: &[i64]) -> Bytes {
    Bytes::from(v.iter().flat_map(|x| x.to_ne_bytes()).collect::<Vec<u8>>())
}

fn to_i64s(b: &[u8]) -> Vec<i64> {
    b.chunks_exact(8).map(|c| i64::from_ne_bytes(c.try_into().unwrap())).collect()
}

/// Rank r's vector: distinct per rank and element, so sums catch mix-ups.
fn vector(r: u32, len: usize) -> Vec<i64> {
    (0..len as i64).map(|i| (r as i64 + 1) * 1000 + i * 7 + (i % 3) * r as i64).collect()
}

#[test]
fn allreduce_every_algorithm_every_size() {
    for n in 1..=8u32 {
        for algo in algos("allreduce") {
            for len in [0usize, 1, 5, 64, 1000] {
                let out = on_ranks(n, move |c| {
                    let op = Op::new("sum", "i8").unwrap();
                    let r = c.collective(Call::Allreduce { data: i64s(&vector(c.rank, len)), op }, Some(algo), None, T);
                    to_i64s(&r.unwrap_or_else(|e| panic!("allreduce {algo} n={n} len={len} rank {}: {e:?}", c.rank))[0])
                });
                let expect: Vec<i64> = (0..len).map(|i| (0..n).map(|r| vector(r, len)[i]).sum()).collect();
                for (r, got) in out.iter().enumerate() {
                    assert_eq!(got, &expect, "allreduce {algo} n={n} len={len} rank {r}");
                }
            }
        }
    }
}

#[test]
fn reduce_scan_and_exscan_every_root() {
    for n in 1..=8u32 {
        for algo in algos("reduce") {
            for root in 0..n {
                let out = on_ranks(n, move |c| {
                    let op = Op::new("max", "i8").unwrap();
                    c.collective(Call::Reduce { root: root.into(), data: i64s(&vector(c.rank, 9)), op }, Some(algo), None, T).unwrap()
                });
                let expect: Vec<i64> = (0..9).map(|i| (0..n).map(|r| vector(r, 9)[i]).max().unwrap()).collect();
                for (r, got) in out.iter().enumerate() {
                    if r as u32 == root {
                        assert_eq!(to_i64s(&got[0]), expect, "reduce {algo} n={n} root={root}");
                    } else {
                        assert!(got.is_empty());
                    }
                }
            }
        }
        let out = on_ranks(n, |c| {
            let op = Op::new("sum", "i8").unwrap();
            let inc = c.collective(Call::Scan { data: i64s(&vector(c.rank, 3)), op }, None, None, T).unwrap();
            let exc = c.collective(Call::Exscan { data: i64s(&vector(c.rank, 3)), op }, None, None, T).unwrap();
            (inc, exc)
        });
        for (r, (inc, exc)) in out.iter().enumerate() {
            let prefix = |upto: usize| -> Vec<i64> { (0..3).map(|i| (0..upto as u32).map(|q| vector(q, 3)[i]).sum()).collect() };
            assert_eq!(to_i64s(&inc[0]), prefix(r + 1), "scan n={n} rank {r}");
            if r == 0 {
                assert!(exc.is_empty());
            } else {
                assert_eq!(to_i64s(&exc[0]), prefix(r), "exscan n={n} rank {r}");
            }
        }
    }
}

fn block(r: u32, extra: u32) -> Bytes {
    Bytes::from(format!("block of rank {r} for {extra}").repeat((r % 3 + 1) as usize))
}

#[test]
fn bcast_gather_scatter_every_algorithm_every_root() {
    for n in 1..=8u32 {
        for root in 0..n {
            for algo in algos("bcast") {
                let out = on_ranks(n, move |c| {
                    let data = Bytes::from(vec![root as u8; 1001]);
                    let mine = (c.rank == root).then(|| data.clone());
                    c.collective(Call::Bcast { root: root.into(), data: mine, len: Some(1001) }, Some(algo), None, T).unwrap()
                });
                assert!(out.iter().all(|b| b[0] == vec![root as u8; 1001]), "bcast {algo} n={n} root={root}");
            }
            for algo in algos("gather") {
                let out = on_ranks(n, move |c| {
                    c.collective(Call::Gather { root: root.into(), data: block(c.rank, 0) }, Some(algo), None, T).unwrap()
                });
                let expect: Vec<Bytes> = (0..n).map(|r| block(r, 0)).collect();
                assert_eq!(out[root as usize], expect, "gather {algo} n={n} root={root}");
            }
            for algo in algos("scatter") {
                let out = on_ranks(n, move |c| {
                    let blocks = (c.rank == root).then(|| (0..c.size()).map(|r| block(r, root)).collect());
                    c.collective(Call::Scatter { root: root.into(), blocks }, Some(algo), None, T).unwrap()
                });
                for (r, got) in out.iter().enumerate() {
                    assert_eq!(got[0], block(r as u32, root), "scatter {algo} n={n} root={root}");
                }
            }
        }
    }
}

#[test]
fn allgather_alltoall_barrier_every_algorithm() {
    for n in 1..=8u32 {
        for algo in algos("allgather") {
            let out = on_ranks(n, move |c| c.collective(Call::Allgather { data: block(c.rank, 1) }, Some(algo), None, T).unwrap());
            let expect: Vec<Bytes> = (0..n).map(|r| block(r, 1)).collect();
            assert!(out.iter().all(|o| *o == expect), "allgather {algo} n={n}");
        }
        let out = on_ranks(n, |c| {
            let blocks = (0..c.size()).map(|d| block(c.rank, d)).collect();
            c.collective(Call::Alltoall { blocks }, None, None, T).unwrap()
        });
        for (r, got) in out.iter().enumerate() {
            let expect: Vec<Bytes> = (0..n).map(|s| block(s, r as u32)).collect();
            assert_eq!(*got, expect, "alltoall n={n}");
        }
        for algo in algos("barrier") {
            let out = on_ranks(n, move |c| c.collective(Call::Barrier, Some(algo), None, T).is_ok());
            assert!(out.iter().all(|ok| *ok), "barrier {algo} n={n}");
        }
    }
}

#[test]
fn bad_roots_and_mismatched_sizes_fail_without_hanging() {
    let out = on_ranks(3, |c| {
        let bad_root = c.collective(Call::Gather { root: 3, data: Bytes::new() }, None, None, T).unwrap_err().class;
        let op = Op::new("sum", "i8").unwrap();
        let len = if c.rank == 1 { 4 } else { 3 };
        let mismatch = c.collective(Call::Allreduce { data: i64s(&vector(c.rank, len)), op }, None, None, T);
        let unknown = c.collective(Call::Barrier, Some("telepathy"), None, T).unwrap_err().class;
        // The communicator still works afterwards.
        let after = c.collective(Call::Allreduce { data: i64s(&[1]), op }, None, None, T).unwrap();
        (bad_root, mismatch.is_err(), unknown, to_i64s(&after[0]))
    });
    for (bad_root, failed, unknown, after) in out {
        assert_eq!(bad_root, ErrorClass::Root);
        assert!(failed, "a size mismatch must fail on every rank of an allreduce");
        assert_eq!(unknown, ErrorClass::Arg);
        assert_eq!(after, vec![3]);
    }
}

#[test]
fn concurrent_nonblocking_collectives_do_not_interfere() {
    let out = on_ranks(4, |c| {
        let op = Op::new("sum", "i8").unwrap();
        let a = c.icollective(Call::Allreduce { data: i64s(&[c.rank as i64]), op }, Some("ring"), None, T).unwrap();
        let b = c.icollective(Call::Allgather { data: block(c.rank, 9) }, None, None, T).unwrap();
        let d = c.icollective(Call::Allreduce { data: i64s(&[10 * c.rank as i64]), op }, None, None, T).unwrap();
        let take = |x: &Arc<mpiws_core::Completion>| match mpiws_core::wait_outcome(x, T).unwrap() {
            mpiws_core::Outcome::Received { env, payload } => payload.into_parts(&env.parts),
            other => panic!("{other:?}"),
        };
        (to_i64s(&take(&d)[0]), take(&b), to_i64s(&take(&a)[0]))
    });
    for (d, b, a) in out {
        assert_eq!(a, vec![6]);
        assert_eq!(d, vec![60]);
        assert_eq!(b, (0..4).map(|r| block(r, 9)).collect::<Vec<_>>());
    }
}

#[test]
fn binomial_broadcast_is_forwarded_by_endpoints_before_their_application_calls_it() {
    // Root 0 of 4: 0 -> 2 -> 3 and 0 -> 1. Rank 2's application only joins
    // the broadcast after rank 3 has seen the message arrive: so its
    // endpoint must have forwarded it on its own.
    let seen = Arc::new((std::sync::Mutex::new(false), std::sync::Condvar::new()));
    let out = on_ranks(4, move |c| {
        let data = Bytes::from_static(b"forwarded before asked");
        if c.rank == 3 {
            let found = c.internal().probe(mpiws_core::ANY_SOURCE, mpiws_core::ANY_TAG, Some(Duration::from_secs(10)));
            let (lock, cv) = &*seen;
            *lock.lock().unwrap() = true;
            cv.notify_all();
            assert!(matches!(found, Ok(Some((2, _, _)))), "rank 3 got nothing from rank 2's endpoint: {:?}", found.map(|f| f.map(|x| x.0)));
        }
        if c.rank == 2 {
            let (lock, cv) = &*seen;
            let mut s = lock.lock().unwrap();
            while !*s {
                s = cv.wait(s).unwrap();
            }
        }
        let mine = (c.rank == 0).then(|| data.clone());
        c.collective(Call::Bcast { root: 0, data: mine, len: None }, Some("binomial"), None, T).unwrap()
    });
    assert!(out.iter().all(|b| b[0] == Bytes::from_static(b"forwarded before asked")));
}

/// Every rank gets the root's bytes as one block: joined by `collective`,
/// its segments left apart in `collective_outcome`'s payload.
#[test]
fn a_pipelined_broadcast_delivers_every_byte_from_any_root() {
    use mpiws_core::Outcome;
    // 3 MiB + 5 B: several segments and a short last one.
    let len = (3 << 20) + 5;
    let data: Bytes = (0..len).map(|i| (i % 251) as u8).collect::<Vec<u8>>().into();
    for root in [0, 2] {
        let d = data.clone();
        let out = on_ranks(4, move |c| {
            let mine = || (c.rank == root).then(|| d.clone());
            let joined = c.collective(Call::Bcast { root: root.into(), data: mine(), len: Some(len) }, Some("pipeline"), None, T).unwrap();
            let outcome =
                c.collective_outcome(Call::Bcast { root: root.into(), data: mine(), len: Some(len) }, Some("pipeline"), None, T).unwrap();
            let Outcome::Received { env, payload } = outcome else { panic!("not a received payload") };
            (joined, env.parts, payload.chunks.len(), payload.into_parts(&[]))
        });
        for (rank, (joined, parts, chunks, whole)) in out.into_iter().enumerate() {
            assert_eq!(joined, vec![data.clone()], "root {root} rank {rank}");
            assert_eq!((parts, whole), (vec![len as u64], vec![data.clone()]), "root {root} rank {rank}");
            assert!(rank == root as usize || chunks > 1, "root {root} rank {rank}: segments joined");
        }
    }
}

// ---- intercommunicators ------------------------------------------------------

/// World ranks 0..k and k..n as the two groups of an intercommunicator,
/// this rank's group the local one.
fn inter(c: &Comm, k: u32) -> Comm {
    let (a, b): (Vec<u32>, Vec<u32>) = ((0..k).collect(), (k..c.size()).collect());
    let (local, remote) = if c.rank < k { (a, b) } else { (b, a) };
    c.derive_inter(0x1a7e, local, remote).unwrap()
}

/// The world ranks of `inter`'s remote group.
fn remote_world(inter: &Comm) -> Vec<u32> {
    inter.remote_group().unwrap().to_vec()
}

#[test]
fn intercommunicator_collectives_follow_the_root_rules_on_every_split() {
    use mpiws_core::{PROC_NULL, ROOT};
    for (n, k) in [(2, 1), (3, 1), (3, 2), (5, 2), (6, 3)] {
        on_ranks(n, move |c| {
            let w = c.rank;
            let ic = inter(&c, k);
            let (lrank, theirs) = (ic.rank, remote_world(&ic));
            let m = theirs.len() as u32;
            let mine_first = w < k;
            let at = format!("n={n} k={k} world rank {w}");
            ic.collective(Call::Barrier, None, None, T).unwrap();
            let op = Op::new("sum", "i8").unwrap();
            let sum_of =
                |ranks: &[u32], len: usize| -> Vec<i64> { (0..len).map(|i| ranks.iter().map(|&r| vector(r, len)[i]).sum()).collect() };
            // Every root of either group.
            for root_first in [true, false] {
                let root_size = if root_first { k } else { n - k };
                for r in 0..root_size {
                    let root_world = if root_first { r } else { k + r };
                    let (root, here) =
                        if mine_first == root_first { (if lrank == r { ROOT } else { PROC_NULL }, false) } else { (r as i64, true) };
                    let data = Bytes::from(format!("from {root_world}"));
                    let mine = (root == ROOT).then(|| data.clone());
                    let got = ic.collective(Call::Bcast { root, data: mine, len: None }, None, None, T).unwrap();
                    assert_eq!(got, if here { vec![data] } else { vec![] }, "bcast root {root_world}, {at}");

                    let got = ic.collective(Call::Gather { root, data: block(w, 0) }, None, None, T).unwrap();
                    let expect: Vec<Bytes> = if root == ROOT { theirs.iter().map(|&q| block(q, 0)).collect() } else { vec![] };
                    assert_eq!(got, expect, "gather root {root_world}, {at}");

                    let blocks = (root == ROOT).then(|| theirs.iter().map(|&q| block(q, root_world)).collect());
                    let got = ic.collective(Call::Scatter { root, blocks }, None, None, T).unwrap();
                    assert_eq!(got, if here { vec![block(w, root_world)] } else { vec![] }, "scatter root {root_world}, {at}");

                    let got = ic.collective(Call::Reduce { root, data: i64s(&vector(w, 5)), op }, None, None, T).unwrap();
                    let expect = if root == ROOT { vec![i64s(&sum_of(&theirs, 5))] } else { vec![] };
                    assert_eq!(got, expect, "reduce root {root_world}, {at}");
                }
            }
            // Each group gets the other's.
            let got = ic.collective(Call::Allgather { data: block(w, 2) }, None, None, T).unwrap();
            assert_eq!(got, theirs.iter().map(|&q| block(q, 2)).collect::<Vec<_>>(), "allgather, {at}");
            let blocks = theirs.iter().map(|&q| block(w, q)).collect();
            let got = ic.collective(Call::Alltoall { blocks }, None, None, T).unwrap();
            assert_eq!(got, theirs.iter().map(|&q| block(q, w)).collect::<Vec<_>>(), "alltoall, {at}");
            let got = ic.collective(Call::Allreduce { data: i64s(&vector(w, 7)), op }, None, None, T).unwrap();
            assert_eq!(to_i64s(&got[0]), sum_of(&theirs, 7), "allreduce, {at}");
            // Reduce-scatter: local rank i gets i + 1 elements of the other
            // group's sum, so each group sends as many as the other receives.
            let total = |size: u32| (1..=size as usize).sum::<usize>();
            let counts: Vec<usize> = (1..=ic.size() as usize).map(|i| 8 * i).collect();
            let got = ic.collective(Call::ReduceScatter { data: i64s(&vector(w, total(m))), counts, op }, None, None, T).unwrap();
            let start = total(lrank);
            assert_eq!(to_i64s(&got[0]), sum_of(&theirs, total(ic.size()))[start..start + lrank as usize + 1], "reduce_scatter, {at}");
            // Started together, finished in any order: each call its own tag.
            let a = ic.icollective(Call::Allgather { data: block(w, 3) }, None, None, T).unwrap();
            let b = ic.icollective(Call::Allreduce { data: i64s(&[w as i64]), op }, None, None, T).unwrap();
            ic.collective(Call::Barrier, None, None, T).unwrap();
            let take = |x: &Arc<mpiws_core::Completion>| match mpiws_core::wait_outcome(x, T).unwrap() {
                mpiws_core::Outcome::Received { env, payload } => payload.into_parts(&env.parts),
                other => panic!("{other:?}"),
            };
            assert_eq!(to_i64s(&take(&b)[0]), vec![theirs.iter().map(|&q| q as i64).sum::<i64>()], "iallreduce, {at}");
            assert_eq!(take(&a), theirs.iter().map(|&q| block(q, 3)).collect::<Vec<_>>(), "iallgather, {at}");
            // The intracommunicator the groups came from is untouched.
            assert_eq!(to_i64s(&c.collective(Call::Allreduce { data: i64s(&[1]), op }, None, None, T).unwrap()[0]), vec![n as i64]);
        });
    }
}

#[test]
fn intercommunicator_arguments_are_checked_before_any_message() {
    use mpiws_core::ROOT;
    let out = on_ranks(3, |c| {
        let ic = inter(&c, 1);
        let m = remote_world(&ic).len();
        let op = Op::new("sum", "i8").unwrap();
        let classes = [
            ic.collective(Call::Gather { root: m as i64, data: Bytes::new() }, None, None, T),
            ic.collective(Call::Bcast { root: -7, data: None, len: None }, None, None, T),
            ic.collective(Call::Alltoall { blocks: vec![Bytes::new(); m + 1] }, None, None, T),
            ic.collective(Call::Scatter { root: ROOT, blocks: Some(vec![]) }, None, None, T),
            ic.collective(Call::Scan { data: i64s(&[1]), op }, None, None, T),
        ]
        .map(|r| r.unwrap_err().class);
        // None of them took a sequence number: the next call still matches.
        let after = ic.collective(Call::Allreduce { data: i64s(&[1]), op }, None, None, T).unwrap();
        (classes, to_i64s(&after[0]), m as i64)
    });
    for (classes, after, m) in out {
        assert_eq!(classes, [ErrorClass::Root, ErrorClass::Root, ErrorClass::Count, ErrorClass::Count, ErrorClass::Comm]);
        assert_eq!(after, vec![m]);
    }
}

#[test]
fn a_rank_gone_from_one_group_fails_both_groups_instead_of_hanging() {
    // Groups {0, 1} and {2, 3}; rank 3 ends before the allreduce (and may
    // miss what others still send it, the revocation among them).
    let out = on_ranks_ending(4, false, |c| {
        let ic = inter(&c, 2);
        ic.collective(Call::Barrier, None, None, T).unwrap();
        if c.rank == 3 {
            return None;
        }
        let op = Op::new("sum", "i8").unwrap();
        let started = std::time::Instant::now();
        let e = ic.collective(Call::Allreduce { data: i64s(&[1]), op }, None, None, T).unwrap_err();
        Some((e.class, started.elapsed()))
    });
    for (rank, got) in out.into_iter().enumerate().take(3) {
        let (class, took) = got.unwrap();
        assert_eq!(class, ErrorClass::ProcFailed, "rank {rank}");
        assert!(took < T.unwrap(), "rank {rank} waited for the time limit");
    }
}

// ---- neighbourhoods ----------------------------------------------------------

#[test]
fn neighbourhood_exchanges_pair_edges_as_point_to_point_would() {
    use mpiws_core::{Edge, PROC_NULL};
    let edges = |v: &[(i64, u32)]| v.iter().map(|&(rank, key)| Edge { rank, key }).collect::<Vec<_>>();
    for n in 1..=4u32 {
        // A periodic ring (a Cartesian dimension): in- and out-neighbours
        // are [left, right]; block i keyed i, in-edge j expects key j ^ 1,
        // so what went right arrives as the right neighbour's left block,
        // also where left and right are one rank (n = 1, 2).
        let out = on_ranks(n, move |c| {
            let (left, right) = (((c.rank + n - 1) % n) as i64, ((c.rank + 1) % n) as i64);
            let blocks = vec![block(c.rank, 0), block(c.rank, 1)];
            let call = Call::Neighbor { sources: edges(&[(left, 1), (right, 0)]), destinations: edges(&[(left, 0), (right, 1)]), blocks };
            c.collective(call, None, None, T).unwrap()
        });
        for (r, got) in out.iter().enumerate() {
            let (left, right) = ((r as u32 + n - 1) % n, (r as u32 + 1) % n);
            assert_eq!(*got, vec![block(left, 1), block(right, 0)], "ring of {n}, rank {r}");
        }
        // A line (not periodic): PROC_NULL at the ends gives an empty block;
        // and two edges to the next rank with one key, matched in order.
        let out = on_ranks(n, move |c| {
            let r = c.rank as i64;
            let prev = if r == 0 { PROC_NULL } else { r - 1 };
            let next = if r + 1 == n as i64 { PROC_NULL } else { r + 1 };
            let blocks = vec![block(c.rank, 10), block(c.rank, 11), block(c.rank, 12)];
            let call = Call::Neighbor {
                sources: edges(&[(prev, 0), (prev, 0), (next, 7)]),
                destinations: edges(&[(next, 0), (next, 0), (prev, 7)]),
                blocks,
            };
            c.collective(call, None, None, T).unwrap()
        });
        for (r, got) in out.iter().enumerate() {
            let r = r as u32;
            let expect = match (r > 0, r + 1 < n) {
                (true, true) => vec![block(r - 1, 10), block(r - 1, 11), block(r + 1, 12)],
                (true, false) => vec![block(r - 1, 10), block(r - 1, 11), Bytes::new()],
                (false, true) => vec![Bytes::new(), Bytes::new(), block(r + 1, 12)],
                (false, false) => vec![Bytes::new(); 3],
            };
            assert_eq!(*got, expect, "line of {n}, rank {r}");
        }
    }
    // Neighbours outside the communicator, or a block short: refused before any message.
    let out = on_ranks(2, move |c| {
        let bad = Call::Neighbor { sources: edges(&[(2, 0)]), destinations: vec![], blocks: vec![] };
        let short = Call::Neighbor { sources: vec![], destinations: edges(&[(0, 0)]), blocks: vec![] };
        let ic = inter(&c, 1);
        let on_inter = Call::Neighbor { sources: vec![], destinations: vec![], blocks: vec![] };
        [c.collective(bad, None, None, T), c.collective(short, None, None, T), ic.collective(on_inter, None, None, T)]
            .map(|r| r.unwrap_err().class)
    });
    assert!(out.iter().all(|c| *c == [ErrorClass::Rank, ErrorClass::Count, ErrorClass::Comm]));
}
