//! Which connections an endpoint serves: pure state, no I/O (the server
//! asks it at each accept and tells it what happened).
//!
//! The rules:
//! 1. At most `max` connections are served at once (`--max-connections`);
//!    beyond that, new ones wait in the listen queue.
//! 2. At most `per_address` of them come from one client address
//!    (`--max-connections-per-address`): one more is closed at once.
//! 3. A connection is *proven* once a request on it showed a credential
//!    (an endpoint key, a domain token, a file's capability) and was
//!    answered with success. Connections not yet proven hold at most
//!    `max - reserve` places (`--reserved-connections`): the rest are kept
//!    for clients that proved who they are.
//! 4. When a new connection would break rule 1 or 3, the oldest unproven
//!    connection with no request in progress, open for `MIN_AGE` at least,
//!    is shed (closed) to make room; if there is none, the new one waits
//!    in the listen queue. So a client sending half a request head, a
//!    thousand times, pushes out its own connections, not everyone else's
//!    for the length of the head timeout; and a burst of honest new
//!    connections, each sending its head at once, is queued, not shed.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// How long an unproven connection is kept before it may be shed: an
/// honest client sends its first request head well within it.
pub const MIN_AGE: Duration = Duration::from_secs(1);

/// A connection's number, in the order they came.
pub type ConnId = u64;

/// What to do with a new connection.
#[derive(Debug, PartialEq, Eq)]
pub enum Admit<H> {
    /// Serve it as `id`, after closing `shed` (an older unproven connection) if named.
    Serve { id: ConnId, shed: Option<(ConnId, H)> },
    /// Its address has `per_address` connections already: close it.
    TooManyFrom(IpAddr),
}

struct Conn<H> {
    addr: IpAddr,
    proven: bool,
    since: Instant,
    handle: H,
}

/// The connections served, each with the server's `H` (how to close it,
/// whether a request is in progress on it).
pub struct Conns<H> {
    max: usize,
    per_address: usize,
    reserve: usize,
    next: ConnId,
    open: HashMap<ConnId, Conn<H>>,
    /// Unproven connections, oldest first.
    unproven: VecDeque<ConnId>,
    by_address: HashMap<IpAddr, usize>,
}

impl<H> Conns<H> {
    pub fn new(max: usize, per_address: usize, reserve: usize) -> Self {
        let max = max.max(1);
        Conns {
            max,
            per_address: per_address.max(1),
            reserve: reserve.min(max / 2),
            next: 0,
            open: HashMap::new(),
            unproven: VecDeque::new(),
            by_address: HashMap::new(),
        }
    }

    /// May the server accept one more now (rules 1 and 3, counting
    /// sheddable ones as room)? If not, it waits for a connection to close
    /// (or to become sheddable).
    pub fn room(&self, now: Instant, busy: impl Fn(&H) -> bool) -> bool {
        !self.full() || self.sheddable(now, &busy).is_some()
    }

    fn full(&self) -> bool {
        self.open.len() >= self.max || self.unproven.len() >= self.max - self.reserve
    }

    /// A new connection from `addr` (admitted when `room` said so); `busy`
    /// says whether a request is in progress on a connection (such a one is
    /// not shed).
    pub fn admit(&mut self, addr: IpAddr, now: Instant, handle: H, busy: impl Fn(&H) -> bool) -> Admit<H> {
        if self.by_address.get(&addr).copied().unwrap_or(0) >= self.per_address {
            return Admit::TooManyFrom(addr);
        }
        let shed = if self.full() { self.sheddable(now, &busy) } else { None };
        let shed = shed.and_then(|old| self.closed(old).map(|h| (old, h)));
        let id = self.next;
        self.next += 1;
        self.open.insert(id, Conn { addr, proven: false, since: now, handle });
        self.unproven.push_back(id);
        *self.by_address.entry(addr).or_default() += 1;
        Admit::Serve { id, shed }
    }

    /// A request on `id` showed a credential and succeeded.
    pub fn proven(&mut self, id: ConnId) {
        if let Some(c) = self.open.get_mut(&id).filter(|c| !c.proven) {
            c.proven = true;
            self.unproven.retain(|&u| u != id);
        }
    }

    /// `id` closed (or was shed): its place is free. Its handle, the first time.
    pub fn closed(&mut self, id: ConnId) -> Option<H> {
        let c = self.open.remove(&id)?;
        if !c.proven {
            self.unproven.retain(|&u| u != id);
        }
        if let Some(n) = self.by_address.get_mut(&c.addr) {
            *n -= 1;
            if *n == 0 {
                self.by_address.remove(&c.addr);
            }
        }
        Some(c.handle)
    }

    /// The oldest unproven connection with no request in progress, open for `MIN_AGE` at least.
    fn sheddable(&self, now: Instant, busy: &impl Fn(&H) -> bool) -> Option<ConnId> {
        let old_enough = |c: &Conn<H>| now.saturating_duration_since(c.since) >= MIN_AGE;
        self.unproven.iter().copied().find(|id| self.open.get(id).is_some_and(|c| old_enough(c) && !busy(&c.handle)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl<H> Conns<H> {
        fn handle(&self, id: ConnId) -> Option<&H> {
            self.open.get(&id).map(|c| &c.handle)
        }

        fn len(&self) -> usize {
            self.open.len()
        }
    }

    const A: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 1));
    const B: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 2));

    fn id<H: std::fmt::Debug>(a: Admit<H>) -> ConnId {
        match a {
            Admit::Serve { id, .. } => id,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn half_sent_heads_push_out_their_own_kind_first() {
        // 8 places, 2 kept for proven clients.
        let mut c: Conns<()> = Conns::new(8, 100, 2);
        let idle = |_: &()| false;
        let t0 = Instant::now();
        let keyed = id(c.admit(B, t0, (), idle));
        c.proven(keyed);
        let attack: Vec<ConnId> = (0..6).map(|_| id(c.admit(A, t0, (), idle))).collect();
        // Six unproven: no room for a seventh until the oldest is old enough to shed.
        assert!(!c.room(t0, idle));
        let later = t0 + MIN_AGE;
        assert!(c.room(later, idle));
        assert_eq!(c.admit(A, later, (), idle), Admit::Serve { id: 7, shed: Some((attack[0], ())) });
        assert!(c.handle(keyed).is_some() && c.handle(attack[0]).is_none());
        // A new client's connection gets in the same way, and once proven it stays.
        let newcomer = id(c.admit(B, later, (), idle));
        c.proven(newcomer);
        // One place was left for unproven ones; then each new one sheds the oldest of them.
        assert!(matches!(c.admit(A, later, (), idle), Admit::Serve { shed: None, .. }));
        for i in 0..20 {
            let now = later + MIN_AGE * (i + 1);
            assert!(c.room(now, idle));
            assert!(matches!(c.admit(A, now, (), idle), Admit::Serve { shed: Some(_), .. }));
        }
        assert!(c.handle(keyed).is_some() && c.handle(newcomer).is_some());
        assert_eq!(c.len(), 8);
    }

    #[test]
    fn a_connection_with_a_request_in_progress_is_not_shed() {
        let mut c: Conns<bool> = Conns::new(2, 100, 0);
        let busy = |b: &bool| *b;
        let t0 = Instant::now();
        let working = id(c.admit(A, t0, true, busy));
        let idle = id(c.admit(A, t0, false, busy));
        let later = t0 + MIN_AGE;
        assert_eq!(c.admit(A, later, false, busy), Admit::Serve { id: 2, shed: Some((idle, false)) });
        assert!(c.handle(working).is_some());
        // All busy or proven: no room; the server waits for one to close.
        c.proven(2);
        assert!(!c.room(later + MIN_AGE, busy));
        c.closed(working);
        assert!(c.room(later, busy));
    }

    #[test]
    fn one_address_holds_at_most_its_share() {
        let mut c: Conns<()> = Conns::new(100, 2, 10);
        let (idle, now) = (|_: &()| false, Instant::now());
        let first = id(c.admit(A, now, (), idle));
        id(c.admit(A, now, (), idle));
        assert_eq!(c.admit(A, now, (), idle), Admit::TooManyFrom(A));
        id(c.admit(B, now, (), idle));
        c.closed(first);
        id(c.admit(A, now, (), idle));
        assert_eq!(c.len(), 3);
    }

    #[test]
    fn proven_connections_fill_every_place_and_then_the_queue_waits() {
        let mut c: Conns<()> = Conns::new(3, 100, 1);
        let (idle, now) = (|_: &()| false, Instant::now());
        for _ in 0..3 {
            let i = id(c.admit(A, now, (), idle));
            c.proven(i);
        }
        assert!(!c.room(now + MIN_AGE, idle));
        assert!(c.closed(0).is_some());
        assert!(c.room(now, idle));
        assert!(c.closed(0).is_none()); // twice: nothing more
        assert_eq!(c.len(), 2);
    }

    #[test]
    fn the_reserve_leaves_unproven_connections_half_the_places_at_least() {
        let mut c: Conns<()> = Conns::new(16, 100, 128);
        let (idle, now) = (|_: &()| false, Instant::now());
        for _ in 0..8 {
            id(c.admit(A, now, (), idle));
        }
        assert!(!c.room(now, idle));
    }
}
