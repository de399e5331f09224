//! A window's passive-target lock at its target, as pure state: which
//! origins hold it (one exclusive, or any number shared) and who waits, in
//! arrival order. Requests are granted as MPI has them: a shared lock while
//! no exclusive one is held, an exclusive one when nobody holds any; a
//! waiting exclusive request is not overtaken by later shared ones (no
//! starvation of writers).

use std::collections::{HashMap, VecDeque};

use crate::error::{err, ErrorClass, Result};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Exclusive,
    Shared,
}

/// A lock request: from which origin (world rank), and the id its grant
/// answers (the origin's operation id).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    pub origin: u32,
    pub kind: Kind,
    pub id: u64,
}

#[derive(Debug, Default)]
pub struct LockState {
    exclusive: Option<u32>,
    /// Shared holders and how many times each holds it (Lock_all and Lock
    /// of the same origin may overlap on a window only through threads).
    shared: HashMap<u32, u32>,
    waiting: VecDeque<Request>,
}

impl LockState {
    fn grantable(&self, kind: Kind) -> bool {
        match kind {
            Kind::Exclusive => self.exclusive.is_none() && self.shared.is_empty(),
            Kind::Shared => self.exclusive.is_none(),
        }
    }

    fn take(&mut self, r: Request) {
        match r.kind {
            Kind::Exclusive => self.exclusive = Some(r.origin),
            Kind::Shared => *self.shared.entry(r.origin).or_insert(0) += 1,
        }
    }

    /// Ask for the lock: Some(request) if granted now, None if it waits
    /// (granted later by `release`).
    pub fn request(&mut self, r: Request) -> Option<Request> {
        if self.waiting.is_empty() && self.grantable(r.kind) {
            self.take(r);
            return Some(r);
        }
        self.waiting.push_back(r);
        None
    }

    /// `origin` lets go of its lock: the requests this grants, in order.
    /// An origin that holds none is an error (MPI_ERR_RMA_SYNC).
    pub fn release(&mut self, origin: u32) -> Result<Vec<Request>> {
        if self.exclusive == Some(origin) {
            self.exclusive = None;
        } else if let Some(n) = self.shared.get_mut(&origin) {
            *n -= 1;
            if *n == 0 {
                self.shared.remove(&origin);
            }
        } else {
            return err(ErrorClass::RmaSync, format!("rank {origin} unlocks a window lock it does not hold"));
        }
        Ok(self.grant_waiting())
    }

    /// `origin` is gone (it ended, or stayed unreachable): it holds
    /// nothing and waits for nothing any more. The requests this grants, in
    /// order; none if it held and awaited nothing.
    pub fn forget(&mut self, origin: u32) -> Vec<Request> {
        self.waiting.retain(|r| r.origin != origin);
        if self.exclusive == Some(origin) {
            self.exclusive = None;
        }
        self.shared.remove(&origin);
        self.grant_waiting()
    }

    /// Grant the waiting requests that can be, in arrival order.
    fn grant_waiting(&mut self) -> Vec<Request> {
        let mut granted = Vec::new();
        while let Some(&r) = self.waiting.front() {
            if !self.grantable(r.kind) {
                break;
            }
            self.waiting.pop_front();
            self.take(r);
            granted.push(r);
        }
        granted
    }

    /// The origins that hold the lock while others wait for it: whose
    /// being gone would leave those waiting for ever (none while nobody waits).
    pub fn holders_awaited(&self) -> Vec<u32> {
        if self.waiting.is_empty() {
            return Vec::new();
        }
        self.exclusive.into_iter().chain(self.shared.keys().copied()).collect()
    }

    /// Whether anyone holds the lock or waits for it (a window being freed
    /// must not be).
    #[cfg(test)]
    pub fn busy(&self) -> bool {
        self.exclusive.is_some() || !self.shared.is_empty() || !self.waiting.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(origin: u32, kind: Kind, id: u64) -> Request {
        Request { origin, kind, id }
    }

    #[test]
    fn shared_locks_coexist_and_exclusive_ones_wait() {
        let mut l = LockState::default();
        assert!(l.request(req(0, Kind::Shared, 1)).is_some());
        assert!(l.request(req(1, Kind::Shared, 2)).is_some());
        assert!(l.request(req(2, Kind::Exclusive, 3)).is_none());
        // A shared request behind a waiting exclusive one waits too.
        assert!(l.request(req(3, Kind::Shared, 4)).is_none());
        assert!(l.release(0).unwrap().is_empty());
        let g = l.release(1).unwrap();
        assert_eq!(g, vec![req(2, Kind::Exclusive, 3)]);
        let g = l.release(2).unwrap();
        assert_eq!(g, vec![req(3, Kind::Shared, 4)]);
        assert!(l.release(3).unwrap().is_empty());
        assert!(!l.busy());
    }

    #[test]
    fn exclusive_locks_are_granted_one_at_a_time_in_order() {
        let mut l = LockState::default();
        assert!(l.request(req(5, Kind::Exclusive, 1)).is_some());
        assert!(l.request(req(6, Kind::Exclusive, 2)).is_none());
        assert!(l.request(req(7, Kind::Shared, 3)).is_none());
        assert!(l.request(req(8, Kind::Shared, 4)).is_none());
        assert_eq!(l.release(5).unwrap(), vec![req(6, Kind::Exclusive, 2)]);
        // Both shared requests go together.
        assert_eq!(l.release(6).unwrap(), vec![req(7, Kind::Shared, 3), req(8, Kind::Shared, 4)]);
        assert!(l.busy());
    }

    #[test]
    fn a_gone_origin_lets_go_of_what_it_held_and_waited_for() {
        let mut l = LockState::default();
        assert!(l.request(req(1, Kind::Exclusive, 1)).is_some());
        assert!(l.holders_awaited().is_empty(), "nobody waits: nobody to watch");
        assert!(l.request(req(2, Kind::Exclusive, 2)).is_none());
        assert!(l.request(req(1, Kind::Shared, 3)).is_none()); // the gone one waits too
        assert!(l.request(req(3, Kind::Shared, 4)).is_none());
        assert_eq!(l.holders_awaited(), vec![1]);
        // Rank 1 died holding the lock: the next in line gets it, its own request is dropped.
        assert_eq!(l.forget(1), vec![req(2, Kind::Exclusive, 2)]);
        assert_eq!(l.holders_awaited(), vec![2]);
        assert_eq!(l.release(2).unwrap(), vec![req(3, Kind::Shared, 4)]);
        assert!(l.forget(7).is_empty(), "a rank that held nothing changes nothing");
        assert_eq!(l.forget(3), vec![]);
        assert!(!l.busy());
    }

    #[test]
    fn unlocking_a_lock_not_held_is_a_sync_error() {
        let mut l = LockState::default();
        assert_eq!(l.release(0).unwrap_err().class, ErrorClass::RmaSync);
        l.request(req(0, Kind::Shared, 1));
        l.request(req(0, Kind::Shared, 2));
        l.release(0).unwrap();
        l.release(0).unwrap();
        assert_eq!(l.release(0).unwrap_err().class, ErrorClass::RmaSync);
    }
}
