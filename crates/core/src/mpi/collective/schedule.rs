//! `Schedule`: one collective call's view of the communicator — the sends
//! and receives its algorithm is made of.
//!
//! Every message of a collective travels on the communicator's collective
//! context with the call's sequence number as its tag, so concurrent
//! (non-blocking) collectives on one communicator never match each other's
//! messages, and the per-pair order keeps the steps of one call apart.
//!
//! A message is a list of blocks (its parts) behind one status byte. A rank
//! that finds a fault (a mismatched size, say) does not stop: it finishes
//! its part of the algorithm, so nobody waits for it for ever, and marks
//! everything it sends as faulty, so the fault reaches the ranks downstream.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use crate::completion::{Completion, Outcome};
use crate::error::{err, Error, ErrorClass, Result};
use crate::mpi::comm::wait_outcome;
use crate::mpi::Comm;

const OK: &[u8] = &[0];
const FAULTY: &[u8] = &[1];

pub struct Schedule {
    comm: Comm,
    tag: i64,
    timeout: Option<Duration>,
    pub rank: u32,
    pub size: u32,
    fault: Option<Error>,
    sends: Vec<Arc<Completion>>,
}

impl Schedule {
    /// Claim the next collective sequence number of `comm`. Must be called
    /// in the order the application calls collectives (before any thread
    /// hand-off), as every rank numbers them the same way.
    pub fn new(comm: &Comm, timeout: Option<Duration>) -> Schedule {
        let tag = (comm.next_collective() % (i32::MAX as u64 + 1)) as i64;
        Schedule { comm: comm.internal(), tag, timeout, rank: comm.rank, size: comm.size(), fault: None, sends: Vec::new() }
    }

    /// Record a local fault: the call fails at the end, after its part is done.
    pub fn fault(&mut self, e: Error) {
        self.fault.get_or_insert(e);
    }

    /// Start sending `blocks` to local rank `dest`.
    pub fn send(&mut self, dest: u32, blocks: &[Bytes]) -> Result<()> {
        self.send_forwarded(dest, blocks, Vec::new())
    }

    /// Start a broadcast of `blocks` down the binomial tree over `order`
    /// (local ranks, this one first): each child's endpoint receives its
    /// subtree's world ranks and forwards the message on arrival.
    pub fn send_tree(&mut self, order: &[u32], blocks: &[Bytes]) -> Result<()> {
        let group = self.comm.group.clone();
        let world: Vec<u32> = order.iter().map(|&r| group[r as usize]).collect();
        let n = world.len();
        let mut m = n.next_power_of_two() >> 1;
        while m > 0 {
            if m < n {
                self.send_forwarded(order[m], blocks, world[m..(2 * m).min(n)].to_vec())?;
            }
            m >>= 1;
        }
        Ok(())
    }

    fn send_forwarded(&mut self, dest: u32, blocks: &[Bytes], forward: Vec<u32>) -> Result<()> {
        let status = Bytes::from_static(if self.fault.is_some() { FAULTY } else { OK });
        let mut chunks = Vec::with_capacity(blocks.len() + 1);
        let mut parts = Vec::with_capacity(blocks.len() + 1);
        chunks.push(status);
        parts.push(1);
        for b in blocks {
            parts.push(b.len() as u64);
            chunks.push(b.clone());
        }
        let c = self.comm.isend_tree(dest as i64, self.tag, chunks, parts, false, forward)?;
        self.sends.push(c);
        Ok(())
    }

    /// Receive the blocks local rank `source` sends.
    pub fn recv(&mut self, source: u32) -> Result<Vec<Bytes>> {
        let (_, c) = self.comm.irecv(source as i64, self.tag)?;
        let Outcome::Received { env, payload } = self.comm.recv_outcome(&c, source as i64, self.timeout)? else {
            return err(ErrorClass::Intern, "collective receive completed without a message");
        };
        let mut blocks = payload.into_parts(&env.parts);
        if blocks.is_empty() || blocks[0].len() != 1 {
            return err(ErrorClass::Intern, "malformed collective message");
        }
        if blocks[0][0] != 0 {
            self.fault(Error::new(ErrorClass::Other, format!("the collective failed on another rank (seen from rank {source})")));
        }
        blocks.remove(0);
        Ok(blocks)
    }

    /// Exchange with one peer (or two): send to `dest`, receive from `source`.
    pub fn sendrecv(&mut self, dest: u32, blocks: &[Bytes], source: u32) -> Result<Vec<Bytes>> {
        self.send(dest, blocks)?;
        self.recv(source)
    }

    /// Receive exactly one block from `source`.
    pub fn recv_one(&mut self, source: u32) -> Result<Bytes> {
        let mut b = self.recv(source)?;
        if b.len() != 1 {
            self.fault(Error::new(ErrorClass::Count, format!("expected one block from rank {source}, got {}", b.len())));
            b.resize(1, Bytes::new());
        }
        Ok(b.pop().unwrap_or_default())
    }

    /// Wait for the sends, then report the call's fault if there was one.
    pub fn finish<T>(self, value: T) -> Result<T> {
        for s in &self.sends {
            wait_outcome(s, self.timeout)?;
        }
        match self.fault {
            Some(e) => Err(e),
            None => Ok(value),
        }
    }
}
