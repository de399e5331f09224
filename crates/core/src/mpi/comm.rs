//! A communicator: a matching context and a group (local rank -> world rank)
//! over one instance. Messages carry world ranks and the context; receives
//! match on the context, so communicators never see each other's traffic.
//! An intercommunicator also has a remote group: point-to-point ranks
//! (destinations, sources) name its members, as MPI has it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use crate::engine::completion::{waited_outcome, Awaited, Completion, Outcome, RecvBuffer, Tracking};
use crate::engine::mailbox::{Pattern, RecvId};
use crate::error::{err, ErrorClass, Result};
use crate::mpi::{ANY_SOURCE, ANY_TAG, PROC_NULL};
use crate::rank::Instance;
pub use crate::wire::frame::WORLD_CONTEXT;
use crate::wire::frame::{Envelope, Payload, TAG_UB};
use crate::wire::reserved::COLLECTIVE_BIT;

pub const SELF_CONTEXT: u64 = 2;

#[derive(Clone)]
pub struct Comm {
    pub instance: Arc<Instance>,
    pub context: u64,
    /// World rank of each local rank.
    pub group: Arc<Vec<u32>>,
    /// World rank of each rank point-to-point names: the remote group's on
    /// an intercommunicator, else the same `Arc` as `group` (so the
    /// intracommunicator path translates as before, with no branch).
    peers: Arc<Vec<u32>>,
    /// This process's local rank.
    pub rank: u32,
    /// Communicators derived from this one so far (Dup, Split, ...): every
    /// member derives in the same order, so they agree on new contexts.
    derived: Arc<AtomicU64>,
    /// Collective calls started so far: their sequence numbers (tags).
    collectives: Arc<AtomicU64>,
    /// Whether the ranks are far apart, once measured (`collective::network`).
    far: Arc<std::sync::OnceLock<bool>>,
    /// Communicators made so far by `Create_group` per (group, tag).
    group_calls: Arc<parking_lot::Mutex<GroupCalls>>,
}

/// How many communicators `Create_group` made per (group of world ranks, tag).
type GroupCalls = std::collections::HashMap<(Vec<u32>, u64), u64>;

fn mix(mut x: u64) -> u64 {
    // splitmix64 finaliser: a well-spread, deterministic hash.
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// A received message as the communicator reports it (local source rank).
pub struct Received {
    pub source: i64,
    pub tag: i64,
    pub parts: Vec<u64>,
    pub payload: Payload,
}

impl Comm {
    pub fn world(instance: Arc<Instance>) -> Comm {
        let group = (0..instance.size()).collect();
        let rank = instance.rank();
        Comm::new(instance, WORLD_CONTEXT, Arc::new(group), rank)
    }

    pub fn self_comm(instance: Arc<Instance>) -> Comm {
        let me = instance.rank();
        Comm::new(instance, SELF_CONTEXT, Arc::new(vec![me]), 0)
    }

    fn new(instance: Arc<Instance>, context: u64, group: Arc<Vec<u32>>, rank: u32) -> Comm {
        Comm {
            instance,
            context,
            peers: group.clone(),
            group,
            rank,
            derived: Arc::new(AtomicU64::new(0)),
            collectives: Arc::new(AtomicU64::new(0)),
            far: Arc::default(),
            group_calls: Arc::default(),
        }
    }

    pub fn size(&self) -> u32 {
        self.group.len() as u32
    }

    /// The communicator partitioned point-to-point (`Psend_init`,
    /// `Precv_init`) with `tag` travels on: these ranks on a context both
    /// sides derive from this one's and the tag without communicating, so
    /// its messages (tagged by partition) match no other receive.
    pub fn partitioned(&self, tag: i64) -> Comm {
        let context = (mix(self.context ^ mix((tag as u64) ^ 0x9A27_1770)) & !COLLECTIVE_BIT).max(SELF_CONTEXT + 1);
        Comm { context, derived: Arc::default(), collectives: Arc::default(), group_calls: Arc::default(), ..self.clone() }
    }

    /// The context for the next communicator derived from this one; `salt`
    /// separates the communicators one call creates (Split's colours).
    pub fn next_context(&self, salt: u64) -> u64 {
        let n = self.derived.fetch_add(1, Ordering::SeqCst);
        let c = mix(self.context ^ mix(n.wrapping_add(1)) ^ mix(salt.wrapping_mul(31).wrapping_add(7)));
        (c & !COLLECTIVE_BIT).max(SELF_CONTEXT + 1)
    }

    /// The context for a communicator over `group` (world ranks) that only
    /// its members create (MPI_Comm_create_group): derived from the group,
    /// the tag and how many such calls the members made before, so it needs
    /// no communication and the other ranks need not take part.
    pub fn group_context(&self, group: &[u32], tag: u64) -> u64 {
        let n = {
            let mut calls = self.group_calls.lock();
            let n = calls.entry((group.to_vec(), tag)).or_insert(0);
            *n += 1;
            *n
        };
        let g = group.iter().fold(mix(group.len() as u64), |h, &w| mix(h ^ w as u64));
        let c = mix(self.context ^ mix(g ^ mix(tag.wrapping_add(0x5EED))) ^ mix(n));
        (c & !COLLECTIVE_BIT).max(SELF_CONTEXT + 1)
    }

    /// Whether the ranks are far apart: measured and agreed at the first
    /// collective that asks (`collective::network`), then remembered.
    pub fn far_apart(&self, timeout: Option<std::time::Duration>) -> crate::error::Result<bool> {
        if let Some(&far) = self.far.get() {
            return Ok(far);
        }
        let far = crate::mpi::collective::network::measure(self, timeout)?;
        Ok(*self.far.get_or_init(|| far))
    }

    /// The sequence number of the next collective call on this communicator.
    pub fn next_collective(&self) -> u64 {
        self.collectives.fetch_add(1, Ordering::SeqCst)
    }

    /// A communicator over `group` (world ranks) with `context`; None if this
    /// process is not in the group.
    pub fn derive(&self, context: u64, group: Vec<u32>) -> Option<Comm> {
        let me = self.instance.rank();
        let rank = group.iter().position(|&w| w == me)? as u32;
        Some(Comm::new(self.instance.clone(), context, Arc::new(group), rank))
    }

    /// An intercommunicator with `context` between `local` (world ranks,
    /// this process among them) and `remote`; None if this process is not
    /// in `local`. Its collectives are the core's (`collective::inter`): a
    /// `Schedule` addresses both groups.
    pub fn derive_inter(&self, context: u64, local: Vec<u32>, remote: Vec<u32>) -> Option<Comm> {
        let mut c = self.derive(context, local)?;
        c.peers = Arc::new(remote);
        Some(c)
    }

    /// The remote group (world ranks) of an intercommunicator; None for an
    /// intracommunicator.
    pub fn remote_group(&self) -> Option<&Arc<Vec<u32>>> {
        (!Arc::ptr_eq(&self.peers, &self.group)).then_some(&self.peers)
    }

    pub fn is_inter(&self) -> bool {
        self.remote_group().is_some()
    }

    /// The same group with the collective context (for internal traffic).
    pub fn internal(&self) -> Comm {
        Comm { context: self.context | COLLECTIVE_BIT, ..self.clone() }
    }

    /// The local group alone, as an intracommunicator on the same context:
    /// an intercommunicator's collectives talk within the local group on it
    /// and to the remote group on the intercommunicator itself (the groups
    /// are disjoint, so sources tell the two kinds of traffic apart).
    pub fn local_side(&self) -> Comm {
        Comm { peers: self.group.clone(), ..self.clone() }
    }

    /// The world rank of point-to-point rank `local` (of the remote group
    /// on an intercommunicator).
    pub fn world_rank(&self, local: i64) -> Result<u32> {
        let peers = &self.peers;
        if local < 0 || local >= peers.len() as i64 {
            let what = if self.is_inter() { "remote group size" } else { "communicator size" };
            return err(ErrorClass::Rank, format!("invalid rank {local} ({what} {})", peers.len()));
        }
        Ok(peers[local as usize])
    }

    /// The point-to-point rank of world rank `world` (in the remote group
    /// on an intercommunicator), if it is there.
    pub fn local_rank(&self, world: u32) -> Option<u32> {
        let peers = &self.peers;
        if peers.len() == self.instance.size() as usize && peers[world as usize % peers.len()] == world {
            return Some(world);
        }
        peers.iter().position(|&w| w == world).map(|r| r as u32)
    }

    fn check_send_tag(tag: i64) -> Result<i32> {
        if !(0..=TAG_UB as i64).contains(&tag) {
            return err(ErrorClass::Tag, format!("invalid tag {tag}: must be 0..={TAG_UB}"));
        }
        Ok(tag as i32)
    }

    /// Start a send to local rank `dest`. `parts` splits the chunks into
    /// logical parts (pickled object and its out-of-band buffers).
    pub fn isend(&self, dest: i64, tag: i64, chunks: Vec<Bytes>, parts: Vec<u64>, sync: bool) -> Result<Arc<Completion>> {
        self.start_send(dest, tag, chunks, parts, sync, Vec::new(), false, None)
    }

    /// `isend` that also reports when the receiver stored the message (the
    /// "completed" event; see `Instance::ask_ack`) and, with `tell_match`,
    /// when a receive took it (the "matched" event of a standard send).
    pub fn isend_tracked(
        &self,
        dest: i64,
        tag: i64,
        chunks: Vec<Bytes>,
        parts: Vec<u64>,
        sync: bool,
        tell_match: bool,
    ) -> Result<(Arc<Completion>, Tracking)> {
        let track = Tracking::new(sync, tell_match);
        let c = self.start_send(dest, tag, chunks, parts, sync, Vec::new(), false, Some(track.clone()))?;
        Ok((c, track))
    }

    /// The "matched" event of a tracked standard send that did not ask for
    /// it at its start: the receiver is asked now (`service::matched`). None
    /// for a synchronous send, whose completion says it.
    pub fn ask_match(&self, track: &Tracking) -> Option<Arc<Completion>> {
        if track.sync {
            return None;
        }
        if let Some(m) = &track.matched {
            return Some(m.clone());
        }
        Some(match track.sent.get() {
            Some(&(dest, seq)) => self.instance.ask_match(dest, seq),
            None => {
                // Never sent: to PROC_NULL (done), or it failed on the way out.
                let c = Completion::new();
                if track.stored.is_done() {
                    c.complete(track.stored.peek_error().map_or(Ok(Outcome::Sent), Err));
                }
                c
            }
        })
    }

    /// Withdraw a tracked send that timed out, unless a receive took it
    /// already (`Instance::withdraw`): true if withdrawn.
    pub fn withdraw(&self, track: &Tracking) -> Result<bool> {
        match track.sent.get() {
            Some(&(dest, seq)) => self.instance.withdraw(dest, seq),
            None => Ok(true), // never sent
        }
    }

    /// The start of a blocking send: a large message is written by this
    /// thread, which would only wait for it otherwise (and, polling, take
    /// the core the writing thread needs: 1 MiB ping-pong 330 -> 600 us).
    pub fn send_start(&self, dest: i64, tag: i64, chunks: Vec<Bytes>, parts: Vec<u64>, sync: bool) -> Result<(Arc<Completion>, Tracking)> {
        let track = Tracking::new(sync, false);
        let c = self.start_send(dest, tag, chunks, parts, sync, Vec::new(), true, Some(track.clone()))?;
        Ok((c, track))
    }

    /// `isend`, with a broadcast subtree (world ranks, `dest` first) that the
    /// receiving endpoint forwards the message down.
    pub fn isend_tree(
        &self,
        dest: i64,
        tag: i64,
        chunks: Vec<Bytes>,
        parts: Vec<u64>,
        sync: bool,
        forward: Vec<u32>,
    ) -> Result<Arc<Completion>> {
        self.start_send(dest, tag, chunks, parts, sync, forward, false, None)
    }

    #[allow(clippy::too_many_arguments)]
    fn start_send(
        &self,
        dest: i64,
        tag: i64,
        chunks: Vec<Bytes>,
        parts: Vec<u64>,
        sync: bool,
        forward: Vec<u32>,
        inline: bool,
        track: Option<Tracking>,
    ) -> Result<Arc<Completion>> {
        let tag = Self::check_send_tag(tag)?;
        if dest == PROC_NULL {
            let c = Completion::new();
            c.complete(Ok(Outcome::Sent));
            if let Some(t) = track {
                t.settle(&Ok(())); // nothing to store or match: done too
            }
            return Ok(c);
        }
        let world = self.world_rank(dest)?;
        let env = Envelope { source: self.instance.rank(), context: self.context, tag, seq: None, sync, parts, forward };
        Ok(self.instance.send(world, env, chunks, inline, track))
    }

    fn pattern(&self, source: i64, tag: i64) -> Result<Pattern> {
        let source = match source {
            ANY_SOURCE => None,
            s => Some(self.world_rank(s)?),
        };
        let tag = match tag {
            ANY_TAG => None,
            t if (0..=TAG_UB as i64).contains(&t) => Some(t as i32),
            t => return err(ErrorClass::Tag, format!("invalid tag {t}")),
        };
        Ok(Pattern { context: self.context, source, tag })
    }

    /// Post a receive. `None` id means it completed at once (PROC_NULL).
    pub fn irecv(&self, source: i64, tag: i64) -> Result<(Option<RecvId>, Arc<Completion>)> {
        self.irecv_into(source, tag, None)
    }

    /// Post a receive with the buffer a large message may be read into.
    pub fn irecv_into(&self, source: i64, tag: i64, buffer: Option<Box<dyn RecvBuffer>>) -> Result<(Option<RecvId>, Arc<Completion>)> {
        if source == PROC_NULL {
            let c = Completion::new();
            let env = Envelope { source: u32::MAX, context: self.context, tag: -1, seq: None, sync: false, parts: vec![], forward: vec![] };
            c.complete(Ok(Outcome::Received { env, payload: Payload::default() }));
            return Ok((None, c));
        }
        let (id, c) = self.instance.post_recv(self.pattern(source, tag)?, buffer);
        Ok((Some(id), c))
    }

    /// Wait up to `timeout` for a receive posted for local rank `source`
    /// (reading that peer's stream in this thread meanwhile); true once done.
    pub fn wait_recv(&self, c: &Completion, source: i64, timeout: Option<Duration>) -> bool {
        self.wait_recv_after(c, source, timeout, &mut || {})
    }

    /// `wait_recv`, running `first` once this thread reads the stream (a
    /// `Sendrecv` sends from there: `Instance::wait_for_after`).
    pub fn wait_recv_after(&self, c: &dyn Awaited, source: i64, timeout: Option<Duration>, first: &mut dyn FnMut()) -> bool {
        let world = (source >= 0).then(|| self.world_rank(source).ok()).flatten();
        self.instance.wait_for_after(c, world, timeout, first)
    }

    /// `wait_recv`, then the outcome (a timeout is an error).
    pub fn recv_outcome(&self, c: &Completion, source: i64, timeout: Option<Duration>) -> Result<Outcome> {
        waited_outcome(c, self.wait_recv(c, source, timeout), timeout)
    }

    pub fn cancel_recv(&self, id: RecvId) -> bool {
        self.instance.cancel_recv(id)
    }

    /// Translate a completed receive into local terms.
    pub fn received(&self, env: Envelope, payload: Payload) -> Received {
        let source = match env.source {
            u32::MAX => PROC_NULL,
            w => self.local_rank(w).map_or(ANY_SOURCE, |r| r as i64),
        };
        let tag = if env.tag < 0 { ANY_TAG } else { env.tag as i64 };
        Received { source, tag, parts: env.parts, payload }
    }

    /// (source, tag, size) of the next matching message; waits up to `timeout`.
    pub fn probe(&self, source: i64, tag: i64, timeout: Option<Duration>) -> Result<Option<(i64, i64, usize)>> {
        if source == PROC_NULL {
            return Ok(Some((PROC_NULL, ANY_TAG, 0)));
        }
        let found = self.instance.probe(self.pattern(source, tag)?, timeout)?;
        Ok(found.map(|(env, len)| {
            let r = self.received(env, Payload::default());
            (r.source, r.tag, len)
        }))
    }

    /// Blocking exchange of one small byte string with every member (used to
    /// build communicators): an allgather, numbered like every collective.
    pub fn allgather_bytes(&self, data: Bytes, timeout: Option<Duration>) -> Result<Vec<Bytes>> {
        self.collective(crate::mpi::collective::Call::Allgather { data }, None, None, timeout)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::stores::Stores;
    use crate::rank::Binding;

    /// World rank `rank` of six (no endpoint is contacted).
    fn world(rank: u32) -> Comm {
        let endpoints: Vec<String> = (0..6).map(|i| format!("http://127.0.0.1:{}", 1 + i)).collect();
        let b =
            Binding { domain: "d".into(), rank, endpoints, token: "t".repeat(16), service: String::new(), params: serde_json::Value::Null };
        Comm::world(Instance::new(b, Arc::new(Stores::new())))
    }

    #[test]
    fn intercommunicator_ranks_name_the_remote_group() {
        let w = world(2);
        let inter = w.derive_inter(77, vec![0, 2, 4], vec![5, 3]).unwrap();
        // Its own rank and size are the local group's ...
        assert_eq!((inter.rank, inter.size()), (1, 3));
        assert_eq!(inter.remote_group().map(|g| g.to_vec()), Some(vec![5, 3]));
        // ... destinations and sources the remote group's.
        assert_eq!(inter.world_rank(0).unwrap(), 5);
        assert_eq!(inter.world_rank(1).unwrap(), 3);
        assert_eq!(inter.world_rank(2).unwrap_err().class, ErrorClass::Rank);
        assert_eq!(inter.world_rank(-3).unwrap_err().class, ErrorClass::Rank);
        assert_eq!(inter.local_rank(3), Some(1));
        assert_eq!(inter.local_rank(4), None); // a local member is no peer
        let env = Envelope { source: 5, context: 77, tag: 9, seq: None, sync: false, parts: vec![], forward: vec![] };
        assert_eq!(inter.received(env, Payload::default()).source, 0);
        let p = inter.pattern(1, 9).unwrap();
        assert_eq!((p.context, p.source, p.tag), (77, Some(3), Some(9)));
        // A process outside the local group gets none.
        assert!(w.derive_inter(77, vec![0, 4], vec![2]).is_none());
    }

    #[test]
    fn intracommunicators_stay_as_they_were() {
        let w = world(3);
        assert!(w.remote_group().is_none() && !w.internal().is_inter());
        assert_eq!((w.world_rank(5).unwrap(), w.local_rank(5)), (5, Some(5)));
        let sub = w.derive(9, vec![3, 1]).unwrap();
        assert!(!sub.is_inter());
        assert_eq!((sub.rank, sub.world_rank(1).unwrap(), sub.local_rank(1)), (0, 1, Some(1)));
        // Derived from an intercommunicator: an intracommunicator again.
        let inter = w.derive_inter(7, vec![1, 3], vec![0]).unwrap();
        assert!(inter.internal().is_inter());
        assert!(!inter.derive(8, vec![0, 1, 3]).unwrap().is_inter());
        // Its local side: the local group alone, on the same context.
        let local = inter.internal().local_side();
        assert!(!local.is_inter() && local.context == inter.internal().context);
        assert_eq!((local.rank, local.world_rank(1).unwrap(), local.local_rank(1)), (1, 3, Some(0)));
        // Collectives MPI leaves undefined there are refused before any message.
        let call = crate::mpi::collective::Call::Scan { data: Bytes::new(), op: crate::mpi::collective::Op::new("sum", "i8").unwrap() };
        assert_eq!(inter.collective(call, None, None, Some(Duration::ZERO)).unwrap_err().class, ErrorClass::Comm);
    }
}
