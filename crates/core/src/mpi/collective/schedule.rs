//! `Schedule`: one collective call's view of the communicator — the sends
//! and receives its algorithm is made of.
//!
//! Every message of a collective travels on the communicator's collective
//! context with the call's sequence number as its tag, so concurrent
//! (non-blocking) collectives on one communicator never match each other's
//! messages, and the per-pair order keeps the steps of one call apart.
//!
//! A message is a list of blocks (its parts) behind a status block: empty
//! of meaning (one zero byte) when all is well, else the error class and
//! message of the first fault. A rank that finds a fault (a mismatched
//! size, a peer that is gone) does not stop: it finishes its part of the
//! algorithm, so nobody waits for it for ever, and sends the fault along
//! with everything, so it reaches every rank downstream, each of which then
//! fails with the same error (naming a failed rank, for instance).
//!
//! On an intercommunicator a schedule addresses two groups: `send` and
//! `recv` name ranks of the local group, `send_remote` and `recv_remote`
//! ranks of the remote group, all on the one collective context (the
//! groups are disjoint, so a message's source says which kind it is). The
//! call's sequence number is the intercommunicator's, which both groups
//! count alike.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use crate::engine::completion::{wait_outcome, Completion, Outcome};
use crate::engine::tree;
use crate::error::{err, Error, ErrorClass, Result};
use crate::mpi::Comm;
use crate::wire::reserved::{fault_of, status_block, REVOKE_TAG};

pub struct Schedule {
    /// The local group, on the collective context.
    comm: Comm,
    /// An intercommunicator's remote group, on the same context.
    remote: Option<Comm>,
    tag: i64,
    timeout: Option<Duration>,
    pub rank: u32,
    pub size: u32,
    fault: Option<Error>,
    sends: Vec<Arc<Completion>>,
}

impl Schedule {
    /// Claim the next collective sequence number of `comm` for the call
    /// `name` (which the rank's instance is told: what its receives wait
    /// for, `rank::awaiting`). Must be called in the order the application
    /// calls collectives (before any thread hand-off), as every rank
    /// numbers them the same way.
    pub fn new(comm: &Comm, timeout: Option<Duration>, name: &'static str) -> Schedule {
        let tag = (comm.next_collective() % REVOKE_TAG as u64) as i64;
        let internal = comm.internal();
        let remote = internal.is_inter().then(|| internal.clone());
        let comm = internal.local_side();
        comm.instance.collectives.started(comm.context, tag as i32, name);
        Schedule { tag, timeout, rank: comm.rank, size: comm.size(), comm, remote, fault: None, sends: Vec::new() }
    }

    /// The size of an intercommunicator's remote group (None: an intracommunicator).
    pub fn remote_size(&self) -> Option<u32> {
        self.remote.as_ref().and_then(|r| r.remote_group()).map(|g| g.len() as u32)
    }

    fn side(&self, remote: bool) -> &Comm {
        match (&self.remote, remote) {
            (Some(r), true) => r,
            _ => &self.comm,
        }
    }

    /// Record a local fault: the call fails at the end, after its part is done.
    pub fn fault(&mut self, e: Error) {
        self.fault.get_or_insert(e);
    }

    fn status(&self) -> Bytes {
        status_block(self.fault.as_ref())
    }

    /// Start sending `blocks` to local rank `dest`.
    pub fn send(&mut self, dest: u32, blocks: &[Bytes]) -> Result<()> {
        self.send_forwarded(false, dest, blocks, Vec::new())
    }

    /// Start sending `blocks` to rank `dest` of the remote group.
    pub fn send_remote(&mut self, dest: u32, blocks: &[Bytes]) -> Result<()> {
        if self.remote.is_none() {
            return err(ErrorClass::Intern, "a remote send on an intracommunicator's schedule");
        }
        self.send_forwarded(true, dest, blocks, Vec::new())
    }

    /// Start a broadcast of `blocks` down the binomial tree over `order`
    /// (local ranks, this one first): each child's endpoint receives its
    /// subtree's world ranks and forwards the message on arrival.
    pub fn send_tree(&mut self, order: &[u32], blocks: &[Bytes]) -> Result<()> {
        let group = self.comm.group.clone();
        let world: Vec<u32> = order.iter().map(|&r| group[r as usize]).collect();
        for sub in tree::subtrees(world.len()) {
            self.send_forwarded(false, order[sub.start], blocks, world[sub].to_vec())?;
        }
        Ok(())
    }

    fn send_forwarded(&mut self, remote: bool, dest: u32, blocks: &[Bytes], forward: Vec<u32>) -> Result<()> {
        let status = self.status();
        let mut chunks = Vec::with_capacity(blocks.len() + 1);
        let mut parts = Vec::with_capacity(blocks.len() + 1);
        parts.push(status.len() as u64);
        chunks.push(status);
        for b in blocks {
            parts.push(b.len() as u64);
            chunks.push(b.clone());
        }
        // A send that cannot start (its peer is gone) is a fault like any other.
        match self.side(remote).isend_tree(dest as i64, self.tag, chunks, parts, false, forward) {
            Ok(c) => self.sends.push(c),
            Err(e) => self.fault(e),
        }
        Ok(())
    }

    /// Receive the blocks local rank `source` sends. A receive that fails
    /// (its peer is gone) is a fault, and yields no blocks.
    pub fn recv(&mut self, source: u32) -> Result<Vec<Bytes>> {
        self.recv_from(false, source)
    }

    /// Receive the blocks rank `source` of the remote group sends.
    pub fn recv_remote(&mut self, source: u32) -> Result<Vec<Bytes>> {
        if self.remote.is_none() {
            return err(ErrorClass::Intern, "a remote receive on an intracommunicator's schedule");
        }
        self.recv_from(true, source)
    }

    fn recv_from(&mut self, remote: bool, source: u32) -> Result<Vec<Bytes>> {
        let side = self.side(remote);
        let got = side.irecv(source as i64, self.tag).and_then(|(_, c)| side.recv_outcome(&c, source as i64, self.timeout));
        let (env, payload) = match got {
            Ok(Outcome::Received { env, payload }) => (env, payload),
            Ok(_) => return err(ErrorClass::Intern, "collective receive completed without a message"),
            Err(e) => {
                self.fault(e);
                return Ok(Vec::new());
            }
        };
        let mut blocks = payload.into_parts(&env.parts);
        if blocks.is_empty() || blocks[0].is_empty() {
            return err(ErrorClass::Intern, "malformed collective message");
        }
        if let Some(mut e) = fault_of(&blocks.remove(0)) {
            if e.message.is_empty() {
                let whose = if remote { "remote rank" } else { "rank" };
                e.message = format!("the collective failed on another rank (seen from {whose} {source})");
            }
            self.fault(e);
        }
        Ok(blocks)
    }

    /// Exchange with one peer (or two): send to `dest`, receive from `source`.
    pub fn sendrecv(&mut self, dest: u32, blocks: &[Bytes], source: u32) -> Result<Vec<Bytes>> {
        self.send(dest, blocks)?;
        self.recv(source)
    }

    /// Receive exactly one block from `source`.
    pub fn recv_one(&mut self, source: u32) -> Result<Bytes> {
        let b = self.recv(source)?;
        Ok(self.only(b, "rank", source))
    }

    /// Receive exactly one block from rank `source` of the remote group.
    pub fn recv_remote_one(&mut self, source: u32) -> Result<Bytes> {
        let b = self.recv_remote(source)?;
        Ok(self.only(b, "remote rank", source))
    }

    fn only(&mut self, mut b: Vec<Bytes>, whose: &str, source: u32) -> Bytes {
        if b.len() != 1 {
            self.fault(Error::new(ErrorClass::Count, format!("expected one block from {whose} {source}, got {}", b.len())));
            b.resize(1, Bytes::new());
        }
        b.pop().unwrap_or_default()
    }

    /// Wait for the sends, then report the call's fault if there was one.
    /// The first fault is the one reported (a failed send is often its echo).
    pub fn finish<T>(self, value: T) -> Result<T> {
        let sent: Result<()> = self.sends.iter().try_for_each(|s| wait_outcome(s, self.timeout).map(|_| ()));
        let Some(e) = self.fault.clone().or(sent.err()) else { return Ok(value) };
        if e.class == ErrorClass::ProcFailed {
            self.revoke(&e);
        }
        Err(e)
    }

    /// A rank failed: the ranks of this communicator may now be in different
    /// collective calls (some gave up on an earlier one), so a rank can wait
    /// for one that left. Revoke the communicator's collectives everywhere:
    /// every rank's pending and later collective receives on it fail (this
    /// rank's too: the revocation is sent to itself as well). On an
    /// intercommunicator, both groups' ranks.
    fn revoke(&self, why: &Error) {
        let status = status_block(Some(why));
        for r in 0..self.size {
            let _ = self.comm.isend_tree(r as i64, REVOKE_TAG as i64, vec![status.clone()], vec![], false, vec![]);
        }
        if let (Some(remote), Some(m)) = (&self.remote, self.remote_size()) {
            for r in 0..m {
                let _ = remote.isend_tree(r as i64, REVOKE_TAG as i64, vec![status.clone()], vec![], false, vec![]);
            }
        }
    }
}
