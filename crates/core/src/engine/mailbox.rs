//! Matching: an instance's mailbox pairs arriving messages with posted receives.
//!
//! MPI's rules, over a transport that may reorder and repeat HTTP requests:
//! - each (sender, receiver) pair numbers its messages; a message is released
//!   for matching only when all earlier ones from that sender were, so receives
//!   see send order (non-overtaking) whatever order the requests arrived in;
//! - a repeated sequence number is a retry and is dropped (idempotent stores);
//! - a released message goes to the first posted receive that matches it, else
//!   joins the unexpected queue; a posted receive takes the first unexpected
//!   message that matches it, else waits in the posted queue.
//!
//! Pure data structure: no locks, no I/O, so it is tested on its own.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;

use tokio::sync::oneshot;

use crate::engine::completion::{Completion, Outcome};
use crate::error::{Error, ErrorClass};

use crate::wire::frame::{Envelope, Payload};

/// A message filed in a mailbox.
#[derive(Debug)]
pub struct Message {
    pub env: Envelope,
    pub payload: Payload,
    /// Told when a receive takes the message (what synchronous sends wait
    /// for): one per copy that arrived while it waited (retries).
    pub on_match: Vec<Told>,
}

/// Who is told that a receive took a synchronous message.
#[derive(Debug)]
pub enum Told {
    /// A waiter on a channel (a sender's stream or store, a watch); a
    /// message dropped untaken closes it.
    Channel(oneshot::Sender<()>),
    /// A send's own completion, completed by the receiving thread as it
    /// takes the message: a synchronous send to this rank itself, whose
    /// sends then complete in the order receives took them.
    Completion(SentWhenTaken),
}

/// A completion told "sent" when its message is taken, and failed if the
/// message is dropped untaken (the instance ended).
pub struct SentWhenTaken(Option<Arc<Completion>>);

impl std::fmt::Debug for SentWhenTaken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SentWhenTaken")
    }
}

impl Drop for SentWhenTaken {
    fn drop(&mut self) {
        if let Some(c) = self.0.take() {
            c.complete(Err(Error::new(ErrorClass::ProcFailed, "the instance ended before the message was received")));
        }
    }
}

impl Told {
    fn tell(self) {
        match self {
            Told::Channel(tx) => {
                let _ = tx.send(());
            }
            Told::Completion(mut c) => {
                if let Some(c) = c.0.take() {
                    c.complete(Ok(Outcome::Sent));
                }
            }
        }
    }
}

impl Message {
    pub fn new(env: Envelope, payload: Payload) -> Self {
        Message { env, payload, on_match: Vec::new() }
    }

    /// For a synchronous message: the channel that tells when a receive took it.
    pub fn await_match(&mut self) -> Option<oneshot::Receiver<()>> {
        self.env.sync.then(|| {
            let (tx, rx) = oneshot::channel();
            self.on_match.push(Told::Channel(tx));
            rx
        })
    }

    /// For a synchronous message: complete `c` (sent) when a receive takes it,
    /// in the receiving thread; false if the message is not synchronous.
    pub fn complete_when_taken(&mut self, c: Arc<Completion>) -> bool {
        if self.env.sync {
            self.on_match.push(Told::Completion(SentWhenTaken(Some(c))));
        }
        self.env.sync
    }

    /// Tell a synchronous sender that its message was matched.
    pub fn matched(&mut self) {
        for told in self.on_match.drain(..) {
            told.tell();
        }
    }
}

/// What a receive or probe asks for: `None` is a wildcard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pattern {
    pub context: u64,
    pub source: Option<u32>,
    pub tag: Option<i32>,
}

impl Pattern {
    pub fn matches(&self, e: &Envelope) -> bool {
        self.context == e.context && self.source.is_none_or(|s| s == e.source) && self.tag.is_none_or(|t| t == e.tag)
    }
}

/// Id of a posted receive, chosen by the caller.
pub type RecvId = u64;

#[derive(Debug)]
pub enum Arrival {
    /// Already seen: a retry (handed back, see `Mailbox::rejoin`). Nothing changed.
    Duplicate(Message),
    /// Filed. The listed posted receives were matched by it (or by the earlier
    /// out-of-order messages it released) and must now be completed.
    Filed(Vec<(RecvId, Message)>),
}

#[derive(Debug, Default)]
pub struct Mailbox {
    next_seq: HashMap<u32, u64>,
    /// Arrived ahead of their turn; `None` marks a refused sequence number.
    early: HashMap<u32, BTreeMap<u64, Option<Message>>>,
    unexpected: VecDeque<Message>,
    posted: VecDeque<(RecvId, Pattern)>,
    unexpected_bytes: usize,
    peak_unexpected_bytes: usize,
    /// Senders asking to be told of the match of a message that has not
    /// arrived yet (`watch_match`), by (source, seq).
    watches: HashMap<(u32, u64), Vec<oneshot::Sender<()>>>,
    /// The latest refused (source, seq), so a watch can tell them from
    /// messages received (bounded: refusals come from bad input).
    refused: VecDeque<(u32, u64)>,
    /// Closed (the instance ended): what it held unreceived, never received.
    closed: Option<std::collections::HashSet<(u32, u64)>>,
}

const REFUSED_KEPT: usize = 1024;

impl Mailbox {
    /// File an arriving message.
    pub fn arrive(&mut self, mut msg: Message) -> Arrival {
        let mut matched = Vec::new();
        let Some(seq) = msg.env.seq else {
            self.release(msg, &mut matched);
            return Arrival::Filed(matched);
        };
        let source = msg.env.source;
        let next = *self.next_seq.get(&source).unwrap_or(&0);
        let early = self.early.entry(source).or_default();
        if seq < next || early.contains_key(&seq) {
            return Arrival::Duplicate(msg);
        }
        if let Some(w) = self.watches.remove(&(source, seq)) {
            msg.on_match.extend(w.into_iter().map(Told::Channel));
        }
        if seq > next {
            early.insert(seq, Some(msg));
            return Arrival::Filed(matched);
        }
        for m in std::iter::once(msg).chain(self.advance(source, seq)) {
            self.release(m, &mut matched);
        }
        Arrival::Filed(matched)
    }

    /// Sequence number `seq` from `source` was taken (or refused): move past
    /// it and return the messages that were waiting behind it.
    fn advance(&mut self, source: u32, seq: u64) -> Vec<Message> {
        let mut next = seq + 1;
        let mut ready = Vec::new();
        if let Some(early) = self.early.get_mut(&source) {
            while let Some(m) = early.remove(&next) {
                ready.extend(m);
                next += 1;
            }
        }
        self.next_seq.insert(source, next);
        ready
    }

    /// A message that will never be received (refused by the endpoint, or
    /// withdrawn): later messages must not wait for it, and a copy held
    /// ahead of its turn or arriving later is dropped. Returns the posted
    /// receives the released messages matched.
    pub fn skip(&mut self, source: u32, seq: u64) -> Vec<(RecvId, Message)> {
        self.never(source, seq);
        let next = *self.next_seq.get(&source).unwrap_or(&0);
        let mut matched = Vec::new();
        if seq > next {
            self.early.entry(source).or_default().insert(seq, None);
        } else if seq == next {
            for m in self.advance(source, seq) {
                self.release(m, &mut matched);
            }
        }
        matched
    }

    /// A retried copy of a message that arrived before: if the first copy is
    /// still waiting to be received, the retry's sender is told when it is
    /// taken; if it was taken already, now. (Messages leave only by being
    /// received, so a message not here any more was matched.)
    pub fn rejoin(&mut self, mut dup: Message) {
        if !dup.env.sync {
            return;
        }
        let Some(seq) = dup.env.seq else { return };
        match self.held(dup.env.source, seq) {
            Some(m) => m.on_match.append(&mut dup.on_match),
            None => dup.matched(),
        }
    }

    /// Message `seq` from `source` will never be received: its watchers are
    /// told so (by the drop), and later watches too.
    fn never(&mut self, source: u32, seq: u64) {
        self.watches.remove(&(source, seq));
        if self.refused.len() == REFUSED_KEPT {
            self.refused.pop_front();
        }
        self.refused.push_back((source, seq));
    }

    /// Message `seq` from `source`, if it is here unreceived (in order or
    /// ahead of its turn).
    fn held(&mut self, source: u32, seq: u64) -> Option<&mut Message> {
        match self.early.get_mut(&source).and_then(|e| e.get_mut(&seq)) {
            Some(m) => m.as_mut(),
            None => self.unexpected.iter_mut().find(|m| m.env.source == source && m.env.seq == Some(seq)),
        }
    }

    /// Whether message `seq` from `source` is settled: Some(true) taken by
    /// a receive, Some(false) never to be received (refused, withdrawn, or
    /// not received before the mailbox closed); None while it is held or
    /// still to come. (Messages leave only by being received or refused.)
    fn settled(&self, source: u32, seq: u64) -> Option<bool> {
        let next = *self.next_seq.get(&source).unwrap_or(&0);
        if self.refused.contains(&(source, seq)) {
            return Some(false);
        }
        if let Some(lost) = &self.closed {
            return Some(seq < next && !lost.contains(&(source, seq)));
        }
        let unreceived = || self.unexpected.iter().any(|m| m.env.source == source && m.env.seq == Some(seq));
        match self.early.get(&source).and_then(|e| e.get(&seq)) {
            Some(None) => Some(false),
            Some(Some(_)) => None,
            None if seq >= next || unreceived() => None,
            None => Some(true),
        }
    }

    /// Take back message `seq` from `source` unless a receive took it (its
    /// send timed out): true if withdrawn, so it is never received, whether
    /// it is here, on its way (a copy arriving later is dropped as a retry)
    /// or held by an ended instance. Also returns the posted receives that
    /// messages waiting behind it matched.
    pub fn take_back(&mut self, source: u32, seq: u64) -> (bool, Vec<(RecvId, Message)>) {
        if let Some(taken) = self.settled(source, seq) {
            return (!taken, Vec::new());
        }
        if let Some(i) = self.unexpected.iter().position(|m| m.env.source == source && m.env.seq == Some(seq)) {
            let m = self.unexpected.remove(i).expect("found");
            self.unexpected_bytes -= m.payload.len();
            self.never(source, seq);
            return (true, Vec::new());
        }
        (true, self.skip(source, seq)) // ahead of its turn, or still to come
    }

    /// A sender asks to be told when a receive takes its message `seq`
    /// (after the send started: "matched" of a standard send). None: taken
    /// already. The receiver errs (dropped unsent) if the message is never
    /// received: refused, withdrawn, or the mailbox closes first.
    pub fn watch_match(&mut self, source: u32, seq: u64) -> Option<oneshot::Receiver<()>> {
        let (tx, rx) = oneshot::channel();
        match self.settled(source, seq) {
            Some(true) => return None,
            Some(false) => return Some(rx),
            None => {}
        }
        match self.held(source, seq) {
            Some(m) => m.on_match.push(Told::Channel(tx)),
            None => self.watches.entry((source, seq)).or_default().push(tx),
        }
        Some(rx)
    }

    fn release(&mut self, msg: Message, matched: &mut Vec<(RecvId, Message)>) {
        if let Some(i) = self.posted.iter().position(|(_, p)| p.matches(&msg.env)) {
            let (id, _) = self.posted.remove(i).unwrap();
            matched.push((id, msg));
        } else {
            self.unexpected_bytes += msg.payload.len();
            self.peak_unexpected_bytes = self.peak_unexpected_bytes.max(self.unexpected_bytes);
            self.unexpected.push_back(msg);
        }
    }

    /// Whether a posted receive matches `env`.
    pub fn has_receive_for(&self, env: &Envelope) -> bool {
        self.posted.iter().any(|(_, p)| p.matches(env))
    }

    /// A message whose payload is still on the wire: if it is next in order
    /// from its sender and the first posted receive it matches is one
    /// `accept` approves (it can take the payload in place), take that
    /// receive now. Returns its id and what the messages this releases matched.
    pub fn claim(&mut self, env: &Envelope, accept: impl Fn(RecvId) -> bool) -> Option<(RecvId, Vec<(RecvId, Message)>)> {
        let seq = env.seq?;
        if seq != *self.next_seq.get(&env.source).unwrap_or(&0) {
            return None;
        }
        let i = self.posted.iter().position(|(_, p)| p.matches(env))?;
        let id = self.posted[i].0;
        if !accept(id) {
            return None;
        }
        self.posted.remove(i);
        for tx in self.watches.remove(&(env.source, seq)).into_iter().flatten() {
            let _ = tx.send(());
        }
        let mut matched = Vec::new();
        for m in self.advance(env.source, seq) {
            self.release(m, &mut matched);
        }
        Some((id, matched))
    }

    /// Whether messages from `source` wait ahead of their turn (an
    /// arrival from it may release them).
    pub fn holds_early(&self, source: u32) -> bool {
        self.early.get(&source).is_some_and(|e| !e.is_empty())
    }

    /// Remove and return every unexpected message `pick` chooses, in order
    /// (window traffic, which no receive takes: `mpi::window`).
    pub fn take_where(&mut self, pick: impl Fn(&Envelope) -> bool) -> Vec<Message> {
        if !self.unexpected.iter().any(|m| pick(&m.env)) {
            return Vec::new();
        }
        let (out, keep): (VecDeque<_>, VecDeque<_>) = self.unexpected.drain(..).partition(|m| pick(&m.env));
        self.unexpected = keep;
        let out: Vec<Message> = out.into();
        self.unexpected_bytes -= out.iter().map(|m| m.payload.len()).sum::<usize>();
        out
    }

    /// Post a receive: returns the message at once if one already matches.
    pub fn post(&mut self, id: RecvId, pattern: Pattern) -> Option<Message> {
        if let Some(m) = self.take(&pattern) {
            return Some(m);
        }
        self.posted.push_back((id, pattern));
        None
    }

    /// Remove and return the first unexpected message matching `pattern`.
    pub fn take(&mut self, pattern: &Pattern) -> Option<Message> {
        let i = self.unexpected.iter().position(|m| pattern.matches(&m.env))?;
        let m = self.unexpected.remove(i).unwrap();
        self.unexpected_bytes -= m.payload.len();
        Some(m)
    }

    /// Withdraw a posted receive; false if it was already matched (or unknown).
    pub fn cancel(&mut self, id: RecvId) -> bool {
        match self.posted.iter().position(|(i, _)| *i == id) {
            Some(i) => {
                self.posted.remove(i);
                true
            }
            None => false,
        }
    }

    /// Withdraw the posted receives whose pattern `doomed` picks (their peer
    /// is gone); returns their ids.
    pub fn withdraw(&mut self, doomed: impl Fn(&Pattern) -> bool) -> Vec<RecvId> {
        let (out, keep): (VecDeque<_>, VecDeque<_>) = self.posted.drain(..).partition(|(_, p)| doomed(p));
        self.posted = keep;
        out.into_iter().map(|(id, _)| id).collect()
    }

    /// What the posted receives ask for, oldest first.
    pub fn patterns(&self) -> Vec<Pattern> {
        self.posted.iter().map(|(_, p)| *p).collect()
    }

    /// The posted receives and the source each waits for (None: any).
    pub fn awaited(&self) -> Vec<(RecvId, Option<u32>)> {
        self.posted.iter().map(|(id, p)| (*id, p.source)).collect()
    }

    /// Whether a posted receive would take a message from `source`.
    pub fn awaits(&self, source: u32) -> bool {
        self.posted.iter().any(|(_, p)| p.source.is_none_or(|s| s == source))
    }

    /// The first unexpected message a receive with `pattern` would take.
    pub fn probe(&self, pattern: &Pattern) -> Option<&Message> {
        self.unexpected.iter().find(|m| pattern.matches(&m.env))
    }

    /// Bytes held by messages no receive has asked for yet.
    pub fn unexpected_bytes(&self) -> usize {
        self.unexpected_bytes
    }

    /// The most bytes unexpected messages ever held at once.
    pub fn peak_unexpected_bytes(&self) -> usize {
        self.peak_unexpected_bytes
    }

    /// Empty the mailbox (the instance ended): the posted receives to fail.
    pub fn close(&mut self) -> Vec<RecvId> {
        let held = self.unexpected.drain(..).filter_map(|m| Some((m.env.source, m.env.seq?)));
        let early = self.early.drain().flat_map(|(source, e)| e.into_keys().map(move |seq| (source, seq)));
        self.closed = Some(held.chain(early).collect());
        self.watches.clear();
        self.unexpected_bytes = 0;
        self.posted.drain(..).map(|(id, _)| id).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn msg(source: u32, tag: i32, seq: Option<u64>, body: &'static str) -> Message {
        let env = Envelope { source, context: 0, tag, seq, sync: false, parts: vec![], forward: vec![] };
        Message::new(env, Payload::from_chunks(vec![Bytes::from_static(body.as_bytes())]))
    }

    fn pat(source: Option<u32>, tag: Option<i32>) -> Pattern {
        Pattern { context: 0, source, tag }
    }

    fn body(m: &Message) -> String {
        let mut v = vec![0u8; m.payload.len()];
        m.payload.copy_to(&mut v);
        String::from_utf8(v).unwrap()
    }

    fn filed(a: Arrival) -> Vec<(RecvId, Message)> {
        match a {
            Arrival::Filed(v) => v,
            Arrival::Duplicate(_) => panic!("unexpected duplicate"),
        }
    }

    #[test]
    fn out_of_order_arrivals_are_received_in_send_order() {
        let mut mb = Mailbox::default();
        assert!(filed(mb.arrive(msg(1, 0, Some(2), "c"))).is_empty());
        assert!(filed(mb.arrive(msg(1, 0, Some(1), "b"))).is_empty());
        assert!(mb.probe(&pat(None, None)).is_none(), "nothing released before seq 0");
        filed(mb.arrive(msg(1, 0, Some(0), "a")));
        let got: Vec<String> = (0..3).map(|i| body(&mb.post(i, pat(Some(1), None)).unwrap())).collect();
        assert_eq!(got, vec!["a", "b", "c"]);
    }

    #[test]
    fn a_refused_sequence_number_does_not_hold_back_later_messages() {
        let mut mb = Mailbox::default();
        mb.post(1, pat(Some(0), None));
        // seq 1 arrives first, waiting for 0, which the endpoint refused.
        assert!(matches!(mb.arrive(msg(0, 5, Some(1), "b")), Arrival::Filed(m) if m.is_empty()));
        let matched = mb.skip(0, 0);
        assert_eq!(matched.len(), 1);
        assert_eq!(matched[0].1.env.seq, Some(1));
        // A refusal known before its neighbours arrive works too.
        mb.skip(0, 3);
        mb.arrive(msg(0, 5, Some(4), "e"));
        mb.arrive(msg(0, 5, Some(2), "c"));
        let got: Vec<_> = mb.unexpected.iter().map(|m| m.env.seq).collect();
        assert_eq!(got, vec![Some(2), Some(4)]);
    }

    #[test]
    fn retried_sequence_numbers_are_dropped() {
        let mut mb = Mailbox::default();
        filed(mb.arrive(msg(0, 0, Some(0), "a")));
        assert!(matches!(mb.arrive(msg(0, 0, Some(0), "a")), Arrival::Duplicate(_)));
        filed(mb.arrive(msg(0, 0, Some(2), "c")));
        assert!(matches!(mb.arrive(msg(0, 0, Some(2), "c")), Arrival::Duplicate(_)));
        assert_eq!(mb.unexpected_bytes(), 1);
    }

    #[test]
    fn a_retried_synchronous_message_is_told_of_the_first_copys_match() {
        let mut mb = Mailbox::default();
        let sync = |body| {
            let mut m = msg(0, 0, Some(0), body);
            m.env.sync = true;
            m
        };
        let mut first = sync("a");
        let mut rx1 = first.await_match().unwrap();
        filed(mb.arrive(first));
        let mut retry = sync("a");
        let mut rx2 = retry.await_match().unwrap();
        let Arrival::Duplicate(dup) = mb.arrive(retry) else { panic!("not a duplicate") };
        mb.rejoin(dup);
        assert!(rx2.try_recv().is_err(), "not matched yet");
        mb.post(1, pat(None, None)).unwrap().matched();
        assert!(rx1.try_recv().is_ok() && rx2.try_recv().is_ok());
        // A retry of a message already taken is told at once.
        let mut late = sync("a");
        let mut rx3 = late.await_match().unwrap();
        let Arrival::Duplicate(dup) = mb.arrive(late) else { panic!("not a duplicate") };
        mb.rejoin(dup);
        assert!(rx3.try_recv().is_ok());
    }

    #[test]
    fn a_sender_watching_a_match_is_told_whenever_it_asks() {
        let mut mb = Mailbox::default();
        // Asked before the message arrived (seq 1, after seq 0).
        let mut early = mb.watch_match(0, 1).unwrap();
        filed(mb.arrive(msg(0, 0, Some(0), "a")));
        filed(mb.arrive(msg(0, 0, Some(1), "b")));
        assert!(early.try_recv().is_err(), "not received yet");
        // Asked while it waits unexpected.
        let mut waiting = mb.watch_match(0, 1).unwrap();
        assert_eq!(body(&mb.post(1, pat(None, None)).unwrap()), "a");
        assert!(early.try_recv().is_err() && waiting.try_recv().is_err(), "seq 0 taken, not seq 1");
        mb.post(2, pat(None, None)).unwrap().matched();
        assert!(early.try_recv().is_ok() && waiting.try_recv().is_ok());
        // Asked after it was taken: at once.
        assert!(mb.watch_match(0, 1).is_none());
        // Taken in place (claimed) while a watch waited.
        mb.post(3, pat(Some(0), None));
        let mut claimed = mb.watch_match(0, 2).unwrap();
        let env = Envelope { source: 0, context: 0, tag: 0, seq: Some(2), sync: false, parts: vec![], forward: vec![] };
        mb.claim(&env, |_| true).unwrap();
        assert!(claimed.try_recv().is_ok());
        // Refused: the watcher hears it will never be, whenever it asks.
        let mut refused = mb.watch_match(0, 3).unwrap();
        mb.skip(0, 3);
        assert!(matches!(refused.try_recv(), Err(oneshot::error::TryRecvError::Closed)));
        assert!(matches!(mb.watch_match(0, 3).unwrap().try_recv(), Err(oneshot::error::TryRecvError::Closed)));
        // Closed: what it received stays received; what it held or never got, never.
        filed(mb.arrive(msg(0, 0, Some(4), "held")));
        mb.close();
        assert!(mb.watch_match(0, 1).is_none());
        for seq in [4, 5] {
            assert!(matches!(mb.watch_match(0, seq).unwrap().try_recv(), Err(oneshot::error::TryRecvError::Closed)));
        }
    }

    #[test]
    fn a_message_is_withdrawn_only_if_no_receive_took_it() {
        let mut mb = Mailbox::default();
        filed(mb.arrive(msg(0, 0, Some(0), "taken")));
        filed(mb.arrive(msg(0, 0, Some(1), "waiting")));
        mb.post(1, pat(None, None)).unwrap();
        assert!(!mb.take_back(0, 0).0, "a receive took it");
        assert!(mb.take_back(0, 1).0);
        assert!(mb.probe(&pat(None, None)).is_none() && mb.unexpected_bytes() == 0);
        // On its way: withdrawn before it arrives; it is dropped when it does,
        // and what it held back goes on.
        filed(mb.arrive(msg(0, 0, Some(3), "behind")));
        mb.post(2, pat(None, None));
        let (gone, matched) = mb.take_back(0, 2);
        assert!(gone && matched.len() == 1 && body(&matched[0].1) == "behind");
        assert!(matches!(mb.arrive(msg(0, 0, Some(2), "late")), Arrival::Duplicate(_)));
        assert!(mb.watch_match(0, 2).is_some(), "never matched");
        // Arrived ahead of its turn: withdrawn too, and what waits behind goes on.
        filed(mb.arrive(msg(0, 0, Some(5), "early")));
        filed(mb.arrive(msg(0, 0, Some(6), "after")));
        assert!(mb.take_back(0, 5).0);
        let matched = filed(mb.arrive(msg(0, 0, Some(4), "first")));
        assert!(matched.is_empty());
        let got: Vec<String> = (10..12).map(|i| body(&mb.post(i, pat(None, None)).unwrap())).collect();
        assert_eq!(got, vec!["first", "after"]);
    }

    #[test]
    fn posted_receive_is_matched_by_a_later_arrival() {
        let mut mb = Mailbox::default();
        assert!(mb.post(7, pat(Some(2), Some(5))).is_none());
        assert!(filed(mb.arrive(msg(2, 4, Some(0), "wrong tag"))).is_empty());
        let m = filed(mb.arrive(msg(2, 5, Some(1), "right")));
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].0, 7);
        assert_eq!(body(&m[0].1), "right");
    }

    #[test]
    fn wildcards_take_the_earliest_matching_message() {
        let mut mb = Mailbox::default();
        filed(mb.arrive(msg(3, 1, Some(0), "x")));
        filed(mb.arrive(msg(1, 2, Some(0), "y")));
        filed(mb.arrive(msg(3, 2, Some(1), "z")));
        assert_eq!(body(&mb.post(0, pat(None, Some(2))).unwrap()), "y");
        assert_eq!(body(&mb.post(1, pat(None, None)).unwrap()), "x");
        assert_eq!(body(&mb.post(2, pat(Some(3), None)).unwrap()), "z");
    }

    #[test]
    fn receives_are_matched_in_post_order() {
        let mut mb = Mailbox::default();
        mb.post(10, pat(None, None));
        mb.post(11, pat(Some(0), None));
        let m = filed(mb.arrive(msg(0, 0, Some(0), "first")));
        assert_eq!(m[0].0, 10);
        let m = filed(mb.arrive(msg(0, 0, Some(1), "second")));
        assert_eq!(m[0].0, 11);
    }

    #[test]
    fn claim_takes_a_posted_receive_only_in_order() {
        let mut mb = Mailbox::default();
        mb.post(1, pat(Some(0), None));
        mb.post(2, pat(Some(0), None));
        let env = |seq| Envelope { source: 0, context: 0, tag: 0, seq: Some(seq), sync: false, parts: vec![], forward: vec![] };
        assert!(mb.claim(&env(1), |_| true).is_none(), "seq 0 has not arrived");
        assert!(mb.claim(&env(0), |_| false).is_none(), "refused by accept");
        filed(mb.arrive(msg(0, 0, Some(1), "second")));
        let (id, matched) = mb.claim(&env(0), |_| true).unwrap();
        assert_eq!(id, 1);
        // seq 1 was waiting for seq 0: released now, it matches receive 2
        assert_eq!(matched.len(), 1);
        assert_eq!((matched[0].0, body(&matched[0].1)), (2, "second".to_string()));
        assert!(matches!(mb.arrive(msg(0, 0, Some(0), "again")), Arrival::Duplicate(_)));
    }

    #[test]
    fn contexts_are_isolated() {
        let mut mb = Mailbox::default();
        filed(mb.arrive(msg(0, 0, Some(0), "ctx0")));
        let other = Pattern { context: 9, source: None, tag: None };
        assert!(mb.post(1, other).is_none());
        assert!(mb.probe(&pat(None, None)).is_some());
    }

    #[test]
    fn cancel_withdraws_only_unmatched_receives() {
        let mut mb = Mailbox::default();
        mb.post(1, pat(None, None));
        assert!(mb.cancel(1));
        assert!(!mb.cancel(1));
        assert!(filed(mb.arrive(msg(0, 0, None, "kept"))).is_empty());
        assert_eq!(mb.close(), Vec::<RecvId>::new());
    }
}
