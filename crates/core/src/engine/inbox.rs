//! A rank's receive state, as pure data: its mailbox (`engine::mailbox`:
//! matching, and MPI's order per pair) and what surrounds it. The rules,
//! beyond the mailbox's own:
//! - a posted receive waits with its completion, and the caller's buffer
//!   if it gave one; a message is handed to it as it arrives, or at once
//!   if it is already here;
//! - a large message may be read straight into a waiting receive's buffer
//!   (a claim). If the read is cut off (a stream broke), the receive waits
//!   for the sender's retry, which goes to it; a retry that comes while the
//!   first copy is still being read is kept in case that read is cut off;
//! - a peer found gone fails the receives only it could satisfy (an
//!   any-source receive once every other rank is gone), now and later, and
//!   a claimed message of its that was cut off; what it sent before is still
//!   received;
//! - a peer's failure is *told* once the application had an error for it:
//!   a receive that only it could satisfy failed, or the rank says so
//!   (`tell`: a send to it failed, a flush reported it). A flush does not
//!   report a told peer's undelivered messages again (`rank::send`);
//! - a revocation (`wire::reserved::is_revoke`) fails the posted and later
//!   receives on its collective context;
//! - a sender whose message a receive took back after its send timed out
//!   (`take_back`) is never received from for that message;
//! - flow control: while the messages nobody asked for yet hold more than
//!   the bound, a sender no posted receive waits for is held back;
//! - a broadcast's forward list must start with this rank and name ranks
//!   of the domain;
//! - once closed (the rank ended), every operation fails with why.
//!
//! Each step runs under the rank's lock (`rank::Instance`) and returns what
//! to complete afterwards ([`Fires`]): completing wakes threads and may
//! drop a receive's buffer, which may be Python's (that takes the GIL), so
//! neither happens under the lock. No I/O, no threads: tested on its own.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use crate::engine::completion::{Completion, Outcome, RecvBuffer};
use crate::engine::mailbox::{Arrival, Mailbox, Message, Pattern, RecvId};
use crate::error::{Error, ErrorClass, Result};
use crate::wire::frame::Envelope;
use crate::wire::reserved::{fault_of, is_revoke, is_rma, REVOKE_TAG};

/// A posted receive: where its outcome goes, and the caller's buffer if it
/// gave one.
pub struct Waiting {
    pub completion: Arc<Completion>,
    pub buffer: Option<Box<dyn RecvBuffer>>,
    /// When it was posted, by the rank's clock (kept for the rank: how
    /// long receives wait for their message, `rank::traffic`).
    pub posted: Option<std::time::Instant>,
}

/// A message being read straight into a receive's buffer (`Inbox::claim`).
enum Claim {
    Reading,
    /// A retry came while the first copy was still being read.
    Retry(Message),
    /// The read was cut off: the receive waits for the retry.
    Cut(Waiting),
}

/// One thing to do once the lock is let go.
enum Fire {
    /// A receive takes a message (its synchronous sender is told).
    Take(Waiting, Message),
    /// A receive ends so (failed, or cancelled).
    End(Waiting, Result<Outcome>),
    /// A message was received another way: its synchronous sender is told.
    Matched(Message),
}

/// What a step leaves to do once the lock is let go: [`Fires::fire`].
#[must_use = "a step's receives complete only when its fires are fired"]
#[derive(Default)]
pub struct Fires(Vec<Fire>);

impl Fires {
    /// When the receives that take a message in this step were posted.
    pub fn posted(&self) -> impl Iterator<Item = std::time::Instant> + '_ {
        self.0.iter().filter_map(|f| match f {
            Fire::Take(w, _) => w.posted,
            _ => None,
        })
    }

    pub fn fire(self) {
        for f in self.0 {
            match f {
                Fire::Take(w, mut m) => {
                    m.matched();
                    w.completion.complete(Ok(Outcome::Received { env: m.env, payload: m.payload }));
                }
                Fire::End(w, outcome) => {
                    w.completion.complete(outcome);
                }
                Fire::Matched(mut m) => m.matched(),
            }
        }
    }

    #[cfg(test)]
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// What filing an arriving message did.
pub struct Arrived {
    /// A copy of a message filed before (a retry): nothing else happened
    /// but what `fires` holds.
    pub duplicate: bool,
    /// Window traffic taken out of the mailbox in its sender's order, for
    /// the windows (`rank::instance::WindowFrames`).
    pub rma: Vec<Message>,
    pub fires: Fires,
}

pub struct Inbox {
    rank: u32,
    size: u32,
    mailbox: Mailbox,
    waiting: HashMap<RecvId, Waiting>,
    /// By (source, sequence number).
    claims: HashMap<(u32, u64), Claim>,
    /// Set when the rank ended: every later operation fails with it.
    closed: Option<Error>,
    /// Peers found gone, and why.
    gone: HashMap<u32, Error>,
    /// Collective contexts revoked after a failure, and why.
    revoked: HashMap<u64, Error>,
    /// Peers whose failure the application was told.
    told: HashSet<u32>,
}

impl Inbox {
    /// The receive state of rank `rank` of `size`.
    pub fn new(rank: u32, size: u32) -> Inbox {
        Inbox {
            rank,
            size,
            mailbox: Mailbox::default(),
            waiting: HashMap::new(),
            claims: HashMap::new(),
            closed: None,
            gone: HashMap::new(),
            revoked: HashMap::new(),
            told: HashSet::new(),
        }
    }

    // ---- messages arriving ---------------------------------------------------

    /// File a message that arrived whole.
    pub fn arrive(&mut self, msg: Message) -> Result<Arrived> {
        self.check_forward(&msg.env.forward)?;
        if let Some(e) = &self.closed {
            return Err(e.clone());
        }
        // Window traffic holds its place in its sender's order, then is
        // taken out for the windows (this one, or one it released).
        let rma = is_rma(&msg.env) || self.mailbox.holds_early(msg.env.source);
        let revoke =
            is_revoke(&msg.env).then_some(Pattern { context: msg.env.context, source: Some(msg.env.source), tag: Some(REVOKE_TAG) });
        let mut fires = match self.mailbox.arrive(msg) {
            Arrival::Duplicate(dup) => return Ok(Arrived { duplicate: true, rma: Vec::new(), fires: self.retried(dup) }),
            Arrival::Filed(matched) => self.take_waiting(matched),
        };
        // A revocation is filed first (it holds a place in its sender's order), then taken back.
        if let Some(m) = revoke.and_then(|p| self.mailbox.take(&p)) {
            let mut body = vec![0; m.payload.len()];
            m.payload.copy_to(&mut body);
            let why = fault_of(&body).unwrap_or_else(|| Error::new(ErrorClass::ProcFailed, "a rank failed"));
            fires.0.extend(self.revoke(m.env.context, why).0);
        }
        let rma = if rma { self.mailbox.take_where(is_rma) } else { Vec::new() };
        Ok(Arrived { duplicate: false, rma, fires })
    }

    /// A broadcast's forward list: this rank first, ranks of the domain.
    fn check_forward(&self, list: &[u32]) -> Result<()> {
        if list.is_empty() || (list[0] == self.rank && list.len() <= self.size as usize && list.iter().all(|&w| w < self.size)) {
            return Ok(());
        }
        Err(Error::new(ErrorClass::Arg, format!("invalid broadcast forward list {list:?} at rank {}", self.rank)))
    }

    /// A retry of a message that arrived before: kept for a receive reading
    /// the first copy in case that read is cut off; handed to the receive
    /// whose read was cut off; else a synchronous sender is told when the
    /// first copy is matched (`Mailbox::rejoin`).
    fn retried(&mut self, mut dup: Message) -> Fires {
        let key = (dup.env.source, dup.env.seq.unwrap_or(0));
        match self.claims.remove(&key) {
            None => self.mailbox.rejoin(dup),
            Some(Claim::Cut(w)) => return Fires(vec![Fire::Take(w, dup)]),
            Some(Claim::Reading) => {
                self.claims.insert(key, Claim::Retry(dup));
            }
            Some(Claim::Retry(mut older)) => {
                dup.on_match.append(&mut older.on_match);
                self.claims.insert(key, Claim::Retry(dup));
            }
        }
        Fires::default()
    }

    /// The message `seq` from `source` was refused here (and its sender
    /// told): later ones go on.
    /// Returns also the window traffic this lets go (held behind the gap
    /// it closes), for the windows.
    pub fn skip(&mut self, source: u32, seq: u64) -> (Fires, Vec<Message>) {
        let early = self.mailbox.holds_early(source);
        let matched = self.mailbox.skip(source, seq);
        let fires = self.take_waiting(matched);
        (fires, self.released_rma(early))
    }

    /// Window traffic messages let go from behind a sender's gap are, taken
    /// out for the windows as `arrive` does (no receive ever takes it).
    fn released_rma(&mut self, had_early: bool) -> Vec<Message> {
        if had_early {
            self.mailbox.take_where(is_rma)
        } else {
            Vec::new()
        }
    }

    /// For a message whose payload is still on the wire: the posted receive
    /// it goes to, if that receive has a buffer of at least `len` bytes. The
    /// reader then reads the payload into it and completes it (`Placed`),
    /// then says [`placed`](Inbox::placed), or [`cut`](Inbox::cut).
    /// The window traffic it lets go comes with it (as `skip`'s).
    pub fn claim(&mut self, env: &Envelope, len: usize) -> Option<(Waiting, Fires, Vec<Message>)> {
        if self.closed.is_some() {
            return None;
        }
        let waiting = &self.waiting;
        let fits = |id: RecvId| waiting.get(&id).and_then(|w| w.buffer.as_ref()).is_some_and(|b| b.len() >= len);
        let early = self.mailbox.holds_early(env.source);
        let (id, matched) = self.mailbox.claim(env, fits)?;
        let w = self.waiting.remove(&id)?;
        self.claims.insert((env.source, env.seq?), Claim::Reading);
        let fires = self.take_waiting(matched);
        Some((w, fires, self.released_rma(early)))
    }

    /// Whether a posted receive matches `env` (whether or not it could take its payload in place).
    pub fn has_receive_for(&self, env: &Envelope) -> bool {
        self.mailbox.has_receive_for(env)
    }

    /// A claimed message was read in full: a retry that came meanwhile was
    /// matched with it.
    pub fn placed(&mut self, source: u32, seq: u64) -> Fires {
        match self.claims.remove(&(source, seq)) {
            Some(Claim::Retry(m)) => Fires(vec![Fire::Matched(m)]),
            _ => Fires::default(),
        }
    }

    /// A claimed message was cut off mid-read: its receive takes the retry
    /// (which may have come already), or fails if none can come.
    pub fn cut(&mut self, source: u32, seq: u64, w: Waiting) -> Fires {
        let doomed = self.closed.clone().or_else(|| self.gone.get(&source).cloned());
        match self.claims.remove(&(source, seq)) {
            Some(Claim::Retry(m)) => Fires(vec![Fire::Take(w, m)]),
            _ => match doomed {
                Some(e) => Fires(vec![Fire::End(w, Err(e))]),
                None => {
                    self.claims.insert((source, seq), Claim::Cut(w));
                    Fires::default()
                }
            },
        }
    }

    // ---- receives ------------------------------------------------------------

    /// Post receive `id` for `pattern`: it takes a message waiting here, or
    /// waits for one, or fails at once if none can ever come.
    pub fn post(&mut self, id: RecvId, pattern: Pattern, w: Waiting) -> Fires {
        if let Some(e) = &self.closed {
            return Fires(vec![Fire::End(w, Err(e.clone()))]);
        }
        if let Some(m) = self.mailbox.post(id, pattern) {
            return Fires(vec![Fire::Take(w, m)]);
        }
        if let Some(e) = self.hopeless(&pattern) {
            self.mailbox.cancel(id);
            self.told_by(&pattern);
            return Fires(vec![Fire::End(w, Err(e))]);
        }
        self.waiting.insert(id, w);
        Fires::default()
    }

    /// Withdraw posted receive `id`, if nothing matched it yet: it completes `Cancelled`.
    pub fn cancel(&mut self, id: RecvId) -> Option<Fires> {
        if !self.mailbox.cancel(id) {
            return None;
        }
        Some(Fires(self.waiting.remove(&id).map(|w| Fire::End(w, Ok(Outcome::Cancelled))).into_iter().collect()))
    }

    /// Envelope and size of the message a receive with `pattern` would take
    /// now, if one is here; Err once closed.
    pub fn probe(&self, pattern: &Pattern) -> Result<Option<(Envelope, usize)>> {
        if let Some(m) = self.mailbox.probe(pattern) {
            return Ok(Some((m.env.clone(), m.payload.len())));
        }
        match &self.closed {
            Some(e) => Err(e.clone()),
            None => Ok(None),
        }
    }

    /// Take a matching message now if there is one (a matched probe's receive).
    pub fn take(&mut self, pattern: &Pattern) -> Option<Message> {
        self.mailbox.take(pattern)
    }

    /// Take back message `seq` from `source` unless a receive took it (its
    /// send timed out): true if withdrawn (it will never be received, and a
    /// copy that arrives later is dropped).
    pub fn take_back(&mut self, source: u32, seq: u64) -> (bool, Fires) {
        let (withdrawn, matched) = self.mailbox.take_back(source, seq);
        (withdrawn, self.take_waiting(matched))
    }

    /// Tell when a receive takes message `seq` from `source`: None if one
    /// did already; the receiver errs if the message is refused or this
    /// rank ends first.
    pub fn watch_match(&mut self, source: u32, seq: u64) -> Option<tokio::sync::oneshot::Receiver<()>> {
        self.mailbox.watch_match(source, seq)
    }

    fn take_waiting(&mut self, matched: Vec<(RecvId, Message)>) -> Fires {
        Fires(matched.into_iter().filter_map(|(id, m)| self.waiting.remove(&id).map(|w| Fire::Take(w, m))).collect())
    }

    // ---- failures ------------------------------------------------------------

    /// Peer `rank` is gone: receives only it could satisfy fail now and
    /// from now on, and so does a receive whose message from it was cut off.
    /// None if it was known gone already, or this rank ended.
    pub fn peer_gone(&mut self, rank: u32, why: Error) -> Option<Fires> {
        if self.closed.is_some() || self.gone.contains_key(&rank) {
            return None;
        }
        self.gone.insert(rank, why.clone());
        let (gone, size) = (&self.gone, self.size);
        let ids = self.mailbox.withdraw(|p| unsatisfiable(gone, size, p).is_some());
        let mut failed: Vec<Waiting> = ids.into_iter().filter_map(|id| self.waiting.remove(&id)).collect();
        failed.extend(self.take_cut(|source| source == rank));
        if !failed.is_empty() {
            self.told.insert(rank);
        }
        Some(Fires(failed.into_iter().map(|w| Fire::End(w, Err(why.clone()))).collect()))
    }

    /// Revoke a collective context: its posted receives fail, and later ones at once.
    fn revoke(&mut self, context: u64, why: Error) -> Fires {
        if self.revoked.contains_key(&context) {
            return Fires::default();
        }
        let why = Error::new(why.class, format!("collectives on this communicator were revoked after a failure: {}", why.message));
        self.revoked.insert(context, why.clone());
        let ids = self.mailbox.withdraw(|p| p.context == context);
        Fires(ids.into_iter().filter_map(|id| self.waiting.remove(&id)).map(|w| Fire::End(w, Err(why.clone()))).collect())
    }

    /// The rank ended: every waiting receive fails with `why`, and every later operation.
    pub fn close(&mut self, why: Error) -> Fires {
        self.closed = Some(why.clone());
        self.mailbox.close();
        let mut waiting: Vec<Waiting> = std::mem::take(&mut self.waiting).into_values().collect();
        waiting.extend(self.take_cut(|_| true));
        Fires(waiting.into_iter().map(|w| Fire::End(w, Err(why.clone()))).collect())
    }

    /// Why a receive with `pattern` can never be satisfied, if it cannot.
    fn hopeless(&self, pattern: &Pattern) -> Option<Error> {
        if let Some(e) = self.revoked.get(&pattern.context) {
            return Some(e.clone());
        }
        unsatisfiable(&self.gone, self.size, pattern).cloned()
    }

    /// Remove the receives whose claimed message was cut off, from the
    /// sources `doomed` picks: no retry will come for them.
    fn take_cut(&mut self, doomed: impl Fn(u32) -> bool) -> Vec<Waiting> {
        let keys: Vec<(u32, u64)> =
            self.claims.iter().filter(|((s, _), c)| doomed(*s) && matches!(c, Claim::Cut(_))).map(|(k, _)| *k).collect();
        keys.into_iter()
            .filter_map(|k| match self.claims.remove(&k) {
                Some(Claim::Cut(w)) => Some(w),
                _ => None,
            })
            .collect()
    }

    // ---- questions -----------------------------------------------------------

    /// Why peer `rank` is gone, if it is.
    pub fn gone(&self, rank: u32) -> Option<Error> {
        self.gone.get(&rank).cloned()
    }

    /// The application was told that peer `rank` failed (a send to it
    /// failed, or a flush reported it).
    pub fn tell(&mut self, rank: u32) {
        self.told.insert(rank);
    }

    /// Whether the application was told that peer `rank` failed.
    pub fn told(&self, rank: u32) -> bool {
        self.told.contains(&rank)
    }

    /// A receive with `pattern` failed as hopeless: the gone peers it
    /// waited for (all of them, for any source) are told.
    fn told_by(&mut self, pattern: &Pattern) {
        match pattern.source {
            Some(s) if self.gone.contains_key(&s) => {
                self.told.insert(s);
            }
            None => self.told.extend(self.gone.keys()),
            Some(_) => {}
        }
    }

    /// Why this rank ended, once it has.
    pub fn ended(&self) -> Option<Error> {
        self.closed.clone()
    }

    /// What the posted receives ask for, oldest first.
    pub fn posted_patterns(&self) -> Vec<Pattern> {
        self.mailbox.patterns()
    }

    /// The posted receives, with the source each waits for (None: any).
    pub fn posted_receives(&self) -> Vec<(RecvId, Option<u32>)> {
        self.mailbox.awaited()
    }

    /// The peers that `receives` wait for (every other rank for an
    /// any-source receive), leaving out those already gone.
    pub fn peers_awaited_by(&self, receives: impl IntoIterator<Item = Option<u32>>) -> Vec<u32> {
        let mut peers = Vec::new();
        for source in receives {
            match source {
                Some(s) => peers.push(s),
                None => {
                    peers = (0..self.size).collect();
                    break;
                }
            }
        }
        peers.sort_unstable();
        peers.dedup();
        peers.retain(|p| *p != self.rank && !self.gone.contains_key(p));
        peers
    }

    /// Bytes of the messages no receive asked for yet (and the most they ever held).
    pub fn unexpected_bytes(&self) -> usize {
        self.mailbox.unexpected_bytes()
    }

    pub fn peak_unexpected_bytes(&self) -> usize {
        self.mailbox.peak_unexpected_bytes()
    }

    /// Whether to stop taking messages from `source` for now: messages
    /// nobody asked for yet hold more than `max` bytes and no posted receive
    /// waits for `source` (one that does must get its message).
    pub fn holds_back(&self, source: u32, max: usize) -> bool {
        self.mailbox.unexpected_bytes() > max && !self.mailbox.awaits(source)
    }
}

/// Why a receive with `pattern` can never be matched, given the peers that
/// are `gone`: its source is gone, or (any source) every other rank is.
fn unsatisfiable<'a>(gone: &'a HashMap<u32, Error>, size: u32, pattern: &Pattern) -> Option<&'a Error> {
    match pattern.source {
        Some(s) => gone.get(&s),
        None if gone.len() + 1 >= size as usize => gone.values().next(),
        None => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::frame::Payload;
    use crate::wire::reserved::{status_block, COLLECTIVE_BIT, RMA_TAG};

    const CTX: u64 = 1;

    fn payload(b: &[u8]) -> Payload {
        Payload::from_chunks(vec![bytes::Bytes::copy_from_slice(b)])
    }

    fn env(source: u32, tag: i32, seq: u64) -> Envelope {
        Envelope { source, context: CTX, tag, seq: Some(seq), sync: false, parts: vec![], forward: vec![] }
    }

    fn msg(source: u32, tag: i32, seq: u64, body: &[u8]) -> Message {
        Message::new(env(source, tag, seq), payload(body))
    }

    fn from(source: Option<u32>, tag: Option<i32>) -> Pattern {
        Pattern { context: CTX, source, tag }
    }

    /// A receive without a buffer, and its completion.
    fn receive() -> (Waiting, Arc<Completion>) {
        let c = Completion::new();
        (Waiting { completion: c.clone(), buffer: None, posted: None }, c)
    }

    struct Buffer(Vec<u8>);
    impl RecvBuffer for Buffer {
        fn len(&self) -> usize {
            self.0.len()
        }
        fn as_mut_slice(&mut self) -> &mut [u8] {
            &mut self.0
        }
    }

    fn with_buffer(len: usize) -> (Waiting, Arc<Completion>) {
        let c = Completion::new();
        (Waiting { completion: c.clone(), buffer: Some(Box::new(Buffer(vec![0; len]))), posted: None }, c)
    }

    /// What a completed receive got: (source, tag, body), or its error's class.
    fn got(c: &Completion) -> std::result::Result<(u32, i32, Vec<u8>), ErrorClass> {
        match c.take().expect("completed") {
            Ok(Outcome::Received { env, payload }) => {
                let mut b = vec![0; payload.len()];
                payload.copy_to(&mut b);
                Ok((env.source, env.tag, b))
            }
            Ok(other) => panic!("not a message: {other:?}"),
            Err(e) => Err(e.class),
        }
    }

    fn arrive(inbox: &mut Inbox, m: Message) -> Arrived {
        inbox.arrive(m).expect("filed")
    }

    fn gone_error() -> Error {
        Error::new(ErrorClass::ProcFailed, "rank 1 failed")
    }

    #[test]
    fn a_posted_receive_takes_the_first_matching_message_and_an_early_one_waits() {
        let mut inbox = Inbox::new(0, 3);
        let (w, c) = receive();
        assert!(inbox.post(1, from(Some(1), Some(7)), w).is_empty());
        arrive(&mut inbox, msg(2, 7, 0, b"other")).fires.fire(); // another source: unexpected
        assert!(!c.is_done());
        arrive(&mut inbox, msg(1, 7, 0, b"mine")).fires.fire();
        assert_eq!(got(&c), Ok((1, 7, b"mine".to_vec())));
        let (w, c) = receive();
        inbox.post(2, from(None, None), w).fire(); // the unexpected one, at once
        assert_eq!(got(&c), Ok((2, 7, b"other".to_vec())));
    }

    #[test]
    fn messages_from_one_sender_are_received_in_send_order_whatever_order_they_arrive_in() {
        let mut inbox = Inbox::new(0, 2);
        let (w1, c1) = receive();
        let (w2, c2) = receive();
        assert!(inbox.post(1, from(Some(1), None), w1).is_empty());
        assert!(inbox.post(2, from(Some(1), None), w2).is_empty());
        arrive(&mut inbox, msg(1, 5, 1, b"second")).fires.fire();
        assert!(!c1.is_done() && !c2.is_done(), "held back until the first arrives");
        arrive(&mut inbox, msg(1, 5, 0, b"first")).fires.fire();
        assert_eq!(got(&c1).unwrap().2, b"first");
        assert_eq!(got(&c2).unwrap().2, b"second");
    }

    #[test]
    fn a_synchronous_sender_is_told_when_a_receive_takes_its_message_and_so_is_its_retry() {
        let mut inbox = Inbox::new(0, 2);
        let mut first = msg(1, 5, 0, b"sync");
        first.env.sync = true;
        let mut told = first.await_match().unwrap();
        arrive(&mut inbox, first).fires.fire();
        let mut retry = msg(1, 5, 0, b"sync");
        retry.env.sync = true;
        let mut told_retry = retry.await_match().unwrap();
        assert!(arrive(&mut inbox, retry).duplicate);
        assert!(told.try_recv().is_err() && told_retry.try_recv().is_err(), "not matched yet");
        let (w, c) = receive();
        inbox.post(1, from(Some(1), None), w).fire();
        assert_eq!(got(&c).unwrap().2, b"sync");
        assert!(told.try_recv().is_ok() && told_retry.try_recv().is_ok());
    }

    #[test]
    fn a_retry_of_a_message_filed_before_is_dropped() {
        let mut inbox = Inbox::new(0, 2);
        assert!(!arrive(&mut inbox, msg(1, 5, 0, b"x")).duplicate);
        assert!(arrive(&mut inbox, msg(1, 5, 0, b"x")).duplicate);
        assert_eq!(inbox.unexpected_bytes(), 1);
    }

    #[test]
    fn withdraw_against_arrival_a_message_taken_back_is_never_received() {
        // Taken back before it arrived: the copy that arrives later is dropped.
        let mut inbox = Inbox::new(0, 2);
        let (withdrawn, fires) = inbox.take_back(1, 0);
        fires.fire();
        assert!(withdrawn);
        let (w, c) = receive();
        assert!(inbox.post(1, from(Some(1), None), w).is_empty());
        arrive(&mut inbox, msg(1, 5, 0, b"late")).fires.fire();
        arrive(&mut inbox, msg(1, 5, 1, b"next")).fires.fire();
        assert_eq!(got(&c).unwrap().2, b"next", "the withdrawn message is skipped, the next one received");
        // Taken back while it waits unexpected: removed.
        let mut inbox = Inbox::new(0, 2);
        arrive(&mut inbox, msg(1, 5, 0, b"x")).fires.fire();
        assert!(inbox.take_back(1, 0).0);
        assert_eq!(inbox.probe(&from(None, None)).unwrap(), None);
        // A receive took it first: not withdrawn, the send completes after all.
        let mut inbox = Inbox::new(0, 2);
        let (w, c) = receive();
        assert!(inbox.post(1, from(None, None), w).is_empty());
        arrive(&mut inbox, msg(1, 5, 0, b"taken")).fires.fire();
        assert!(!inbox.take_back(1, 0).0);
        assert_eq!(got(&c).unwrap().2, b"taken");
    }

    #[test]
    fn probe_against_receive_a_probed_message_is_the_one_a_receive_then_takes() {
        let mut inbox = Inbox::new(0, 3);
        arrive(&mut inbox, msg(1, 5, 0, b"a")).fires.fire();
        arrive(&mut inbox, msg(2, 6, 0, b"bb")).fires.fire();
        let (e, len) = inbox.probe(&from(None, Some(6))).unwrap().unwrap();
        assert_eq!((e.source, len), (2, 2));
        let m = inbox.take(&from(Some(e.source), Some(e.tag))).unwrap();
        assert_eq!(m.env.source, 2);
        assert_eq!(inbox.probe(&from(None, Some(6))).unwrap(), None, "taken: no longer probed");
        let (w, c) = receive();
        inbox.post(1, from(None, None), w).fire();
        assert_eq!(got(&c).unwrap().2, b"a");
    }

    #[test]
    fn a_large_message_is_read_into_a_waiting_buffer_that_fits_and_only_then() {
        let mut inbox = Inbox::new(0, 2);
        let (w, _small) = with_buffer(4);
        assert!(inbox.post(1, from(Some(1), None), w).is_empty());
        assert!(inbox.claim(&env(1, 5, 0), 8).is_none(), "too small to read into");
        let mut inbox = Inbox::new(0, 2);
        let (w, c) = with_buffer(8);
        assert!(inbox.post(1, from(Some(1), None), w).is_empty());
        let (claimed, fires, _) = inbox.claim(&env(1, 5, 0), 8).expect("claimed");
        assert!(fires.is_empty() && Arc::ptr_eq(&claimed.completion, &c));
        inbox.placed(1, 0).fire();
        // the next message from that sender is received normally
        let (w2, c2) = receive();
        assert!(inbox.post(2, from(Some(1), None), w2).is_empty());
        arrive(&mut inbox, msg(1, 5, 1, b"next")).fires.fire();
        assert_eq!(got(&c2).unwrap().2, b"next");
    }

    #[test]
    fn a_read_cut_off_mid_message_takes_the_retry_whenever_it_comes() {
        // The retry comes after the cut.
        let mut inbox = Inbox::new(0, 2);
        let (w, c) = with_buffer(8);
        assert!(inbox.post(1, from(Some(1), None), w).is_empty());
        let (claimed, _, _) = inbox.claim(&env(1, 5, 0), 8).unwrap();
        assert!(inbox.cut(1, 0, claimed).is_empty());
        assert!(!c.is_done());
        let a = arrive(&mut inbox, msg(1, 5, 0, b"retried!"));
        assert!(a.duplicate);
        a.fires.fire();
        assert_eq!(got(&c).unwrap().2, b"retried!");
        // The retry comes while the first copy is still being read.
        let mut inbox = Inbox::new(0, 2);
        let (w, c) = with_buffer(8);
        assert!(inbox.post(1, from(Some(1), None), w).is_empty());
        let (claimed, _, _) = inbox.claim(&env(1, 5, 0), 8).unwrap();
        assert!(arrive(&mut inbox, msg(1, 5, 0, b"early co")).fires.is_empty());
        inbox.cut(1, 0, claimed).fire();
        assert_eq!(got(&c).unwrap().2, b"early co");
    }

    #[test]
    fn a_peer_failing_mid_message_fails_the_receive_reading_it() {
        // Gone after the cut: the receive waiting for the retry fails.
        let mut inbox = Inbox::new(0, 3);
        let (w, c) = with_buffer(8);
        assert!(inbox.post(1, from(None, None), w).is_empty());
        let (claimed, _, _) = inbox.claim(&env(1, 5, 0), 8).unwrap();
        assert!(inbox.cut(1, 0, claimed).is_empty());
        inbox.peer_gone(1, gone_error()).unwrap().fire();
        assert_eq!(got(&c), Err(ErrorClass::ProcFailed));
        // Gone before the cut: it fails at the cut.
        let mut inbox = Inbox::new(0, 3);
        let (w, c) = with_buffer(8);
        assert!(inbox.post(1, from(None, None), w).is_empty());
        let (claimed, _, _) = inbox.claim(&env(1, 5, 0), 8).unwrap();
        inbox.peer_gone(1, gone_error()).unwrap().fire();
        inbox.cut(1, 0, claimed).fire();
        assert_eq!(got(&c), Err(ErrorClass::ProcFailed));
    }

    #[test]
    fn a_gone_peer_is_told_only_once_the_application_had_an_error_for_it() {
        let mut inbox = Inbox::new(0, 3);
        inbox.peer_gone(1, gone_error()).unwrap().fire();
        assert!(!inbox.told(1), "nothing waited for it: nobody was told");
        let (w, c) = receive();
        inbox.post(1, from(Some(2), None), w).fire();
        assert!(!c.is_done() && !inbox.told(1), "a receive from another peer tells nothing");
        let (w, c) = receive();
        inbox.post(2, from(Some(1), None), w).fire();
        assert_eq!(got(&c), Err(ErrorClass::ProcFailed));
        assert!(inbox.told(1) && !inbox.told(2));
        inbox.tell(2); // a send to it failed
        assert!(inbox.told(2));
    }

    #[test]
    fn a_gone_peer_fails_what_only_it_could_send_and_what_it_sent_is_still_received() {
        let mut inbox = Inbox::new(0, 3);
        arrive(&mut inbox, msg(1, 5, 0, b"before")).fires.fire();
        let (from_1, c1) = receive();
        let (from_2, c2) = receive();
        let (any, c_any) = receive();
        assert!(inbox.post(1, from(Some(1), Some(9)), from_1).is_empty());
        assert!(inbox.post(2, from(Some(2), None), from_2).is_empty());
        assert!(inbox.post(3, from(None, Some(9)), any).is_empty());
        assert!(!inbox.told(1));
        inbox.peer_gone(1, gone_error()).unwrap().fire();
        assert_eq!(got(&c1), Err(ErrorClass::ProcFailed));
        assert!(inbox.told(1), "a receive failed for it");
        assert!(!c2.is_done() && !c_any.is_done(), "rank 2 may still send");
        assert!(inbox.peer_gone(1, gone_error()).is_none(), "known already");
        let (w, c) = receive();
        inbox.post(4, from(Some(1), Some(5)), w).fire();
        assert_eq!(got(&c).unwrap().2, b"before", "sent before it went");
        let (w, c) = receive();
        inbox.post(5, from(Some(1), None), w).fire();
        assert_eq!(got(&c), Err(ErrorClass::ProcFailed), "later receives from it fail at once");
        inbox.peer_gone(2, gone_error()).unwrap().fire();
        assert!(inbox.told(2));
        assert_eq!(got(&c2), Err(ErrorClass::ProcFailed));
        assert_eq!(got(&c_any), Err(ErrorClass::ProcFailed), "every other rank is gone");
        assert_eq!(inbox.peers_awaited_by([None]), Vec::<u32>::new());
    }

    #[test]
    fn a_revocation_fails_the_collective_receives_of_its_context_now_and_later() {
        let mut inbox = Inbox::new(0, 3);
        let coll = CTX | COLLECTIVE_BIT;
        let (w, c) = receive();
        let (p2p, c_p2p) = receive();
        assert!(inbox.post(1, Pattern { context: coll, source: Some(2), tag: Some(0) }, w).is_empty());
        assert!(inbox.post(2, from(Some(2), None), p2p).is_empty());
        let status = status_block(Some(&gone_error()));
        let revoke = Envelope { source: 1, context: coll, tag: REVOKE_TAG, seq: Some(0), sync: false, parts: vec![], forward: vec![] };
        arrive(&mut inbox, Message::new(revoke, Payload::from_chunks(vec![status]))).fires.fire();
        assert_eq!(got(&c), Err(ErrorClass::ProcFailed));
        assert!(!c_p2p.is_done(), "point-to-point goes on");
        let (w, c) = receive();
        inbox.post(3, Pattern { context: coll, source: Some(2), tag: Some(1) }, w).fire();
        assert_eq!(got(&c), Err(ErrorClass::ProcFailed));
    }

    #[test]
    fn window_traffic_is_taken_out_for_the_windows_in_its_senders_order() {
        let mut inbox = Inbox::new(0, 2);
        let key = 9 | COLLECTIVE_BIT;
        let rma = |seq| Envelope { source: 1, context: key, tag: RMA_TAG, seq: Some(seq), sync: false, parts: vec![], forward: vec![] };
        let early = arrive(&mut inbox, Message::new(rma(1), payload(b"put")));
        assert!(early.rma.is_empty(), "waits for the message before it");
        let later = arrive(&mut inbox, msg(1, 5, 0, b"p2p"));
        assert_eq!(later.rma.len(), 1);
        assert_eq!(inbox.unexpected_bytes(), 3, "only the point-to-point message stays");
    }

    /// A skipped message (refused, or a one-sided reply read in place) that
    /// closes a gap lets go the window traffic held behind it: it goes to
    /// the windows then, not to wait unexpected for the next window frame.
    #[test]
    fn window_traffic_let_go_by_a_skip_is_taken_out_for_the_windows() {
        let mut inbox = Inbox::new(0, 2);
        let key = 9 | COLLECTIVE_BIT;
        let rma = |seq| Envelope { source: 1, context: key, tag: RMA_TAG, seq: Some(seq), sync: false, parts: vec![], forward: vec![] };
        assert!(arrive(&mut inbox, Message::new(rma(1), payload(b"reply"))).rma.is_empty(), "held behind 0");
        let (_, rma_out) = inbox.skip(1, 0);
        assert_eq!(rma_out.len(), 1, "let go with the skip");
        assert_eq!(inbox.unexpected_bytes(), 0);
        let (_, none) = inbox.skip(1, 5); // ahead: nothing let go
        assert!(none.is_empty());
    }

    #[test]
    fn flow_control_holds_back_only_senders_no_receive_waits_for() {
        let mut inbox = Inbox::new(0, 3);
        arrive(&mut inbox, msg(1, 5, 0, &[0; 100])).fires.fire();
        assert!(inbox.holds_back(1, 50) && inbox.holds_back(2, 50));
        assert!(!inbox.holds_back(1, 100), "within the bound");
        let (w, _c) = receive();
        assert!(inbox.post(1, from(Some(2), Some(7)), w).is_empty());
        assert!(!inbox.holds_back(2, 50), "a posted receive waits for it");
        assert!(inbox.holds_back(1, 50));
    }

    #[test]
    fn a_forward_list_must_start_here_and_name_ranks_of_the_domain() {
        let mut inbox = Inbox::new(1, 4);
        let mut m = msg(0, 5, 0, b"x");
        m.env.forward = vec![1, 3];
        assert!(inbox.arrive(m).is_ok());
        for bad in [vec![2, 3], vec![1, 4], vec![1, 2, 3, 0, 0]] {
            let mut m = msg(0, 5, 1, b"x");
            m.env.forward = bad;
            assert_eq!(inbox.arrive(m).err().map(|e| e.class), Some(ErrorClass::Arg));
        }
    }

    #[test]
    fn a_cancelled_receive_completes_cancelled_once() {
        let mut inbox = Inbox::new(0, 2);
        let (w, c) = receive();
        assert!(inbox.post(1, from(None, None), w).is_empty());
        inbox.cancel(1).expect("cancelled").fire();
        assert!(matches!(c.take(), Some(Ok(Outcome::Cancelled))));
        assert!(inbox.cancel(1).is_none());
        arrive(&mut inbox, msg(1, 5, 0, b"x")).fires.fire();
        assert_eq!(inbox.unexpected_bytes(), 1, "no receive takes it now");
    }

    #[test]
    fn once_closed_waiting_receives_fail_and_so_does_everything_after() {
        let mut inbox = Inbox::new(0, 2);
        let (w, c) = receive();
        assert!(inbox.post(1, from(None, None), w).is_empty());
        let why = Error::new(ErrorClass::Cancelled, "cancelled");
        inbox.close(why.clone()).fire();
        assert_eq!(got(&c), Err(ErrorClass::Cancelled));
        assert_eq!(inbox.arrive(msg(1, 5, 0, b"x")).err(), Some(why.clone()));
        let (w, c) = receive();
        inbox.post(2, from(None, None), w).fire();
        assert_eq!(got(&c), Err(ErrorClass::Cancelled));
        assert_eq!(inbox.probe(&from(None, None)).err(), Some(why));
        assert!(inbox.claim(&env(1, 5, 0), 1).is_none());
    }
}
