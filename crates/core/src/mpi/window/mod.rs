//! One-sided communication (MPI RMA windows) as real remote memory access.
//!
//! Each rank registers its window memory (raw spans its binding keeps
//! alive) in its instance's [`Registry`], under the window's key: the
//! context of the communicator the window derives, with the collective
//! bit. An origin's put, get, accumulate, lock, ... is a message to the
//! target on that key with the reserved tag [`RMA_TAG`](crate::wire::reserved::RMA_TAG) (no application
//! receive can match it: collective contexts are never the application's);
//! the target's instance takes it out of its mailbox as it is filed
//! (`Instance::deliver`), whichever thread files it (the progress thread
//! reading the stream, or the endpoint serving a store), and applies it to
//! the registered memory here, with no call from the target's application.
//! Every operation is answered ([`op::Kind::Reply`]: the bytes read, or an
//! error), so fence, flush, unlock and complete wait until the origin's
//! operations are done at the target. The frames' meaning is in [`op`];
//! the passive-target lock's state in [`lock`].

pub mod extended;
pub mod lock;
pub mod op;
mod replies;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use parking_lot::{Condvar, Mutex};

use crate::engine::completion::{Completion, Outcome, Watcher};
use crate::error::{err, Error, ErrorClass, Result};
use crate::mpi::comm::Comm;
use crate::mpi::PROC_NULL;
use crate::net::reader::ReplyPlace;
use crate::rank::instance::WindowFrames;
use crate::rank::Instance;
use crate::wire::frame::{Envelope, Payload};
use crate::wire::reserved::{COLLECTIVE_BIT, RMA_TAG};
use op::{Header, Kind};

/// Salt of the communicator a window derives (`Comm::next_context`).
const WINDOW_SALT: u64 = 0x5749_4E44;

/// Where a reply's bytes go at the origin: memory its binding keeps alive
/// until the operation completes.
#[derive(Clone, Copy)]
pub struct RawDest {
    pub ptr: usize,
    pub len: usize,
}

/// A window's memory at this rank. `spans` are (address, length): one for
/// a created or allocated window, the attached ones for a dynamic window
/// (whose displacements are addresses).
struct Memory {
    spans: Vec<(usize, usize)>,
    dynamic: bool,
    disp_unit: u64,
}

struct Pending {
    target: u32,
    completion: Arc<Completion>,
    dest: Option<RawDest>,
    /// Its reply's body is being read into `dest` (`place_reply`): the
    /// reader finishes it; nothing else does, and flush still waits for it.
    placing: bool,
}

/// Post/complete notices of general active target synchronisation, by
/// world rank: exposures posted to this origin, epochs completed at this target.
#[derive(Default)]
struct Pscw {
    posted: HashMap<u32, u32>,
    completed: HashMap<u32, u32>,
    /// The ranks a start or wait here waits for a notice from (how many
    /// waits): liveness watches them.
    awaiting: HashMap<u32, usize>,
    /// Ranks found gone while awaited, and why: their notice never comes.
    gone: HashMap<u32, Error>,
}

/// What an instance keeps of one window: the target's memory and lock, the
/// origin's operations in flight.
pub struct Shared {
    key: u64,
    /// None once the window is freed: nothing is written after that.
    memory: Mutex<Option<Memory>>,
    lock: Mutex<lock::LockState>,
    pending: Mutex<HashMap<u64, Pending>>,
    /// The first failure of an operation nobody waits for by itself (a
    /// put, ...): reported by the next flush, fence or unlock.
    failed: Mutex<Option<Error>>,
    next_id: AtomicU64,
    pscw: Mutex<Pscw>,
    pscw_changed: Condvar,
}

/// The windows of one instance, by key.
#[derive(Default)]
pub struct Registry {
    windows: Mutex<HashMap<u64, Arc<Shared>>>,
}

fn contiguous(payload: &Payload) -> Bytes {
    match payload.chunks.as_slice() {
        [one] => one.clone(),
        _ => {
            let mut all = vec![0; payload.len()];
            payload.copy_to(&mut all);
            all.into()
        }
    }
}

/// Send a frame to world rank `dest` on `key`; to this rank itself, handle
/// it here and now (no message). The send's completion, if any.
fn send_frame(instance: &Arc<Instance>, dest: u32, key: u64, frame: Vec<Bytes>) -> Option<Arc<Completion>> {
    if dest == instance.rank() {
        let payload = Payload::from_chunks(frame.into_iter().map(|b| Bytes::copy_from_slice(&b)).collect());
        instance.windows::<Registry>().handle(instance, dest, key, payload);
        return None;
    }
    let env = Envelope { source: instance.rank(), context: key, tag: RMA_TAG, seq: None, sync: false, parts: vec![], forward: vec![] };
    Some(instance.send(dest, env, frame, false, None))
}

fn reply(instance: &Arc<Instance>, dest: u32, key: u64, id: u64, outcome: Result<Bytes>) {
    let mut h = Header::new(Kind::Reply, id);
    let body = match outcome {
        Ok(data) => data,
        Err(e) => {
            h.class = e.class.code();
            e.message.into_bytes().into()
        }
    };
    h.len = body.len() as u64;
    send_frame(instance, dest, key, vec![h.encode().into(), body]);
}

impl Registry {
    fn get(&self, key: u64) -> Option<Arc<Shared>> {
        self.windows.lock().get(&key).cloned()
    }
}

impl WindowFrames for Registry {
    /// A window frame that arrived from world rank `source` on `key`
    /// (taken out of the mailbox by `Instance::deliver`).
    fn handle(&self, instance: &Arc<Instance>, source: u32, key: u64, payload: Payload) {
        let bytes = contiguous(&payload);
        let (h, data) = match Header::decode(&bytes) {
            Ok(x) => x,
            Err(_) => return, // not a frame anyone could be waiting for an answer to
        };
        let Some(w) = self.get(key) else {
            if h.kind != Kind::Reply {
                let e = Error::new(ErrorClass::Win, "no such window at the target (not created yet, or freed)");
                reply(instance, source, key, h.id, Err(e));
            }
            return;
        };
        match h.kind {
            Kind::Reply => w.replied(&h, data),
            Kind::Post | Kind::Complete => {
                let mut p = w.pscw.lock();
                let counts = if h.kind == Kind::Post { &mut p.posted } else { &mut p.completed };
                *counts.entry(source).or_insert(0) += 1;
                w.pscw_changed.notify_all();
            }
            Kind::Lock => {
                let kind = if h.op == 1 { lock::Kind::Exclusive } else { lock::Kind::Shared };
                let granted = w.lock.lock().request(lock::Request { origin: source, kind, id: h.id });
                if let Some(g) = granted {
                    reply(instance, g.origin, key, g.id, Ok(Bytes::new()));
                }
            }
            Kind::Unlock => {
                let released = w.lock.lock().release(source);
                match released {
                    Ok(granted) => {
                        reply(instance, source, key, h.id, Ok(Bytes::new()));
                        for g in granted {
                            reply(instance, g.origin, key, g.id, Ok(Bytes::new()));
                        }
                    }
                    Err(e) => reply(instance, source, key, h.id, Err(e)),
                }
            }
            _ => {
                let out = w.access(&h, data);
                reply(instance, source, key, h.id, out);
            }
        }
    }

    fn head(&self) -> usize {
        op::HEADER
    }

    /// A reply whose body is still on the wire, to an operation that takes
    /// bytes (a get): marked as placing (nobody else finishes it; flush still
    /// waits for it), its memory lent to the reader, then completed, or
    /// failed if the read was cut off (its sender may send it again, but
    /// nothing waits for that).
    fn place_reply(&self, key: u64, head: &[u8], len: usize) -> Option<ReplyPlace> {
        let (h, _) = Header::decode(head).ok()?;
        if h.kind != Kind::Reply || h.class != 0 || h.len != len as u64 {
            return None;
        }
        let w = self.get(key)?;
        let dest = {
            let mut pending = w.pending.lock();
            let p = pending.get_mut(&h.id).filter(|p| !p.placing)?;
            p.placing = p.dest.is_some();
            p.dest?
        };
        let id = h.id;
        let finish = move |read: bool| {
            let Some(p) = w.pending.lock().remove(&id) else { return };
            if read {
                p.completion.complete(Ok(Outcome::Sent));
            } else {
                let e = Error::new(ErrorClass::Other, "the target's answer was cut off mid-read");
                w.failed.lock().get_or_insert(e.clone());
                p.completion.complete(Err(e));
            }
        };
        Some(ReplyPlace { ptr: dest.ptr, len: dest.len, finish: Box::new(finish) })
    }

    /// The targets of this rank's operations in flight, and the holders of
    /// a lock here that others wait for.
    fn awaited(&self) -> Vec<u32> {
        let windows: Vec<Arc<Shared>> = self.windows.lock().values().cloned().collect();
        let mut peers: Vec<u32> = Vec::new();
        for w in windows {
            peers.extend(w.pending.lock().values().map(|p| p.target));
            peers.extend(w.lock.lock().holders_awaited());
            peers.extend(w.pscw.lock().awaiting.keys().copied());
        }
        peers.sort_unstable();
        peers.dedup();
        peers
    }

    /// Operations awaiting `rank`'s answer fail with `why`; a lock it held
    /// here, or waited for, is let go of (so those waiting behind it are not
    /// held for ever by a rank that died holding it).
    fn peer_gone(&self, instance: &Arc<Instance>, rank: u32, why: &Error) {
        let windows: Vec<Arc<Shared>> = self.windows.lock().values().cloned().collect();
        for w in windows {
            let lost: Vec<Pending> = {
                let mut pending = w.pending.lock();
                // One being placed is the reader's to finish (its stream ends: the read is cut off).
                let ids: Vec<u64> = pending.iter().filter(|(_, p)| p.target == rank && !p.placing).map(|(id, _)| *id).collect();
                ids.into_iter().filter_map(|id| pending.remove(&id)).collect()
            };
            if !lost.is_empty() {
                w.failed.lock().get_or_insert(why.clone());
            }
            for p in lost {
                p.completion.complete(Err(why.clone()));
            }
            let granted = w.lock.lock().forget(rank);
            for g in granted {
                reply(instance, g.origin, w.key, g.id, Ok(Bytes::new()));
            }
            let mut pscw = w.pscw.lock();
            if pscw.awaiting.contains_key(&rank) {
                pscw.gone.insert(rank, why.clone());
                w.pscw_changed.notify_all();
            }
        }
    }
}

impl Shared {
    /// Apply a data operation to this rank's memory, bounds checked.
    fn access(&self, h: &Header, data: &[u8]) -> Result<Bytes> {
        let guard = self.memory.lock();
        let Some(m) = guard.as_ref() else {
            return err(ErrorClass::Win, "the target window was freed");
        };
        let (base, offset) = if m.dynamic {
            let (i, off) = op::locate(&m.spans, h.disp, h.len)?;
            (m.spans[i].0, off)
        } else {
            let (base, size) = m.spans.first().copied().unwrap_or((0, 0));
            (base, op::range(h.disp, m.disp_unit, h.len, size as u64)?)
        };
        let len = h.len as usize; // within a span: fits
        if len == 0 {
            return op::apply(h, data, &mut []).map(Bytes::from);
        }
        // SAFETY: the span is registered memory its binding keeps alive
        // until `free`, which takes this lock first; `offset + len` lies
        // within it (checked above); writers are serialised by the lock.
        let mem = unsafe { std::slice::from_raw_parts_mut((base + offset) as *mut u8, len) };
        if h.kind == Kind::Get {
            return Ok(replies::copy_of(mem)); // what `op::apply` gives, in a buffer used again
        }
        op::apply(h, data, mem).map(Bytes::from)
    }

    /// The answer to one of this origin's operations.
    fn replied(&self, h: &Header, data: &[u8]) {
        let Some(p) = ({
            let mut pending = self.pending.lock();
            pending.get(&h.id).is_some_and(|p| !p.placing).then(|| pending.remove(&h.id)).flatten()
        }) else {
            return; // answered already, or being placed (a copy of it)
        };
        if h.class != 0 {
            let e = Error::new(ErrorClass::from_code(h.class as i64), String::from_utf8_lossy(data).into_owned());
            self.failed.lock().get_or_insert(e.clone());
            p.completion.complete(Err(e));
            return;
        }
        if let Some(d) = p.dest {
            let n = d.len.min(data.len());
            // SAFETY: `RawDest`'s contract: valid for `len` bytes until the
            // operation completes, which is after this.
            unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), d.ptr as *mut u8, n) };
        }
        p.completion.complete(Ok(Outcome::Sent));
    }
}

/// Fails an operation whose request could not be sent.
struct SendWatch {
    send: std::sync::Weak<Completion>,
    op: Arc<Completion>,
    shared: Arc<Shared>,
}

impl Watcher for SendWatch {
    fn fire(&self) {
        if let Some(e) = self.send.upgrade().and_then(|s| s.peek_error()) {
            self.shared.failed.lock().get_or_insert(e.clone());
            self.op.complete(Err(e));
        }
    }
}

/// One window as a rank's application sees it.
pub struct Window {
    /// The communicator the window derived (fence's barrier runs on it).
    pub comm: Comm,
    shared: Arc<Shared>,
}

impl Window {
    /// Create a window over `comm` (collective: every member calls it in
    /// the same order) with this rank's memory `spans`; register it before
    /// the caller's exchange of sizes, so that no operation finds it missing.
    ///
    /// # Safety
    /// The spans must stay valid (and not be moved) until `free` returns.
    pub unsafe fn create(comm: &Comm, spans: Vec<(usize, usize)>, disp_unit: u64, dynamic: bool) -> Result<Window> {
        if comm.is_inter() {
            return err(ErrorClass::Comm, "windows are created over intracommunicators");
        }
        let context = comm.next_context(WINDOW_SALT);
        let wcomm = comm.derive(context, comm.group.to_vec()).expect("a member of its own group");
        let key = context | COLLECTIVE_BIT;
        let shared = Arc::new(Shared {
            key,
            memory: Mutex::new(Some(Memory { spans, dynamic, disp_unit: disp_unit.max(1) })),
            lock: Mutex::default(),
            pending: Mutex::default(),
            failed: Mutex::default(),
            next_id: AtomicU64::new(1),
            pscw: Mutex::default(),
            pscw_changed: Condvar::new(),
        });
        let registry = comm.instance.windows::<Registry>();
        let mut windows = registry.windows.lock();
        if windows.contains_key(&key) {
            return err(ErrorClass::Intern, "window key already in use");
        }
        windows.insert(key, shared.clone());
        drop(windows);
        Ok(Window { comm: wcomm, shared })
    }

    fn instance(&self) -> &Arc<Instance> {
        &self.comm.instance
    }

    /// Start an operation on local rank `target`: the completion of its
    /// reply (done at once for PROC_NULL).
    fn start(&self, target: i64, mut h: Header, data: Vec<Bytes>, dest: Option<RawDest>) -> Result<Arc<Completion>> {
        let c = Completion::new();
        if target == PROC_NULL {
            c.complete(Ok(Outcome::Sent));
            return Ok(c);
        }
        let world = self.comm.world_rank(target)?;
        if self.shared.memory.lock().is_none() {
            return err(ErrorClass::Win, "the window was freed");
        }
        if let Some(gone) = self.instance().gone(world) {
            return Err(gone);
        }
        h.id = self.shared.next_id.fetch_add(1, Ordering::Relaxed);
        self.shared.pending.lock().insert(h.id, Pending { target: world, completion: c.clone(), dest, placing: false });
        let mut frame = vec![Bytes::from(h.encode())];
        frame.extend(data);
        if let Some(sent) = send_frame(self.instance(), world, self.shared.key, frame) {
            let watch = Arc::new(SendWatch { send: Arc::downgrade(&sent), op: c.clone(), shared: self.shared.clone() });
            if !sent.watch(watch.clone()) {
                watch.fire();
            }
        }
        Ok(c)
    }

    fn data_header(kind: Kind, disp: u64, len: usize) -> Header {
        Header { disp, len: len as u64, ..Header::new(kind, 0) }
    }

    pub fn put(&self, target: i64, disp: u64, data: Bytes) -> Result<Arc<Completion>> {
        let h = Self::data_header(Kind::Put, disp, data.len());
        self.start(target, h, vec![data], None)
    }

    /// # Safety
    /// `dest` must stay valid until the returned completion is done.
    pub unsafe fn get(&self, target: i64, disp: u64, dest: RawDest) -> Result<Arc<Completion>> {
        let h = Self::data_header(Kind::Get, disp, dest.len);
        self.start(target, h, vec![], Some(dest))
    }

    /// Accumulate `data` (elements of `dtype`, `collective::op::Dtype`'s
    /// name) with `op` (both by name) into the target; with `fetch`, get the target's
    /// bytes from before too (`len` of them: NO_OP sends no data).
    ///
    /// # Safety
    /// `fetch` must stay valid until the returned completion is done.
    pub unsafe fn accumulate(
        &self,
        target: i64,
        disp: u64,
        data: Bytes,
        len: usize,
        (op, dtype): (&str, &str),
        fetch: Option<RawDest>,
    ) -> Result<Arc<Completion>> {
        let kind = if fetch.is_some() { Kind::GetAccumulate } else { Kind::Accumulate };
        let mut h = Self::data_header(kind, disp, len);
        h.op = op::OPS.iter().position(|&o| o == op).ok_or_else(|| Error::new(ErrorClass::Op, format!("no accumulate operation {op:?}")))?
            as u8;
        h.dtype = op::dtype_name(dtype)?;
        h.accumulate_op()?; // refused here, not at the target
        self.start(target, h, vec![data], fetch)
    }

    /// # Safety
    /// `dest` must stay valid until the returned completion is done.
    pub unsafe fn compare_and_swap(&self, target: i64, disp: u64, origin: Bytes, compare: Bytes, dest: RawDest) -> Result<Arc<Completion>> {
        if origin.len() != compare.len() || origin.len() != dest.len {
            return err(ErrorClass::Count, "compare-and-swap operands differ in size");
        }
        let h = Self::data_header(Kind::CompareAndSwap, disp, origin.len());
        self.start(target, h, vec![origin, compare], Some(dest))
    }

    /// Ask for the passive-target lock at `target`: done once granted.
    pub fn lock(&self, target: i64, exclusive: bool) -> Result<Arc<Completion>> {
        let mut h = Header::new(Kind::Lock, 0);
        h.op = if exclusive { 1 } else { 2 };
        self.start(target, h, vec![], None)
    }

    /// Let go of the lock at `target` (after `flush`): done once released.
    pub fn unlock(&self, target: i64) -> Result<Arc<Completion>> {
        self.start(target, Header::new(Kind::Unlock, 0), vec![], None)
    }

    /// Wait up to `timeout` until every operation to local rank `target`
    /// (None: to every rank) is done at its target. Ok(false) if the time
    /// passed first; the first failure of an operation since the last
    /// flush is the error.
    pub fn flush(&self, target: Option<i64>, timeout: Option<Duration>) -> Result<bool> {
        let world = target.filter(|&t| t != PROC_NULL).map(|t| self.comm.world_rank(t)).transpose()?;
        if target == Some(PROC_NULL) {
            return Ok(true);
        }
        let deadline = timeout.map(|t| Instant::now() + t);
        loop {
            let next = {
                let p = self.shared.pending.lock();
                p.values().filter(|p| world.is_none_or(|w| w == p.target)).map(|p| (p.target, p.completion.clone())).next()
            };
            let Some((t, c)) = next else { break };
            let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            if !self.instance().wait_for(&*c, Some(t), left) {
                return Ok(false);
            }
            // Done: the reply removed it (or a failed send: remove it here).
            self.shared.pending.lock().retain(|_, p| !Arc::ptr_eq(&p.completion, &c) || p.placing);
        }
        match self.shared.failed.lock().take() {
            Some(e) => Err(e),
            None => Ok(true),
        }
    }

    /// MPI_Win_fence: this rank's operations done at their targets, then
    /// a barrier (so everyone's are, before anyone goes on).
    pub fn fence(&self, timeout: Option<Duration>) -> Result<()> {
        if !self.flush(None, timeout)? {
            return err(ErrorClass::Timeout, format!("fence: operations not done within {timeout:?}"));
        }
        self.comm.collective(crate::mpi::collective::Call::Barrier, None, None, timeout)?;
        Ok(())
    }

    /// MPI_Win_post: expose this window to the origins `group` (local ranks).
    pub fn post(&self, group: &[i64]) -> Result<()> {
        for &o in group {
            let world = self.comm.world_rank(o)?;
            send_frame(self.instance(), world, self.shared.key, vec![Header::new(Kind::Post, 0).encode().into()]);
        }
        Ok(())
    }

    /// Wait up to `timeout` until each rank of `group` (local ranks) sent
    /// one notice of `kind` (Post: for start; Complete: for wait/test), and
    /// consume them; false (none consumed) if the time passed first. A rank
    /// found gone before its notice came is an error (liveness watches the
    /// ranks awaited here), never a wait for ever.
    fn await_notices(&self, group: &[i64], posted: bool, timeout: Option<Duration>) -> Result<bool> {
        let worlds = group.iter().map(|&r| self.comm.world_rank(r)).collect::<Result<Vec<u32>>>()?;
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut p = self.shared.pscw.lock();
        for &w in &worlds {
            *p.awaiting.entry(w).or_default() += 1;
        }
        let outcome = loop {
            let counts = if posted { &mut p.posted } else { &mut p.completed };
            if worlds.iter().all(|w| counts.get(w).copied().unwrap_or(0) > 0) {
                for w in &worlds {
                    *counts.get_mut(w).expect("counted") -= 1;
                }
                break Ok(true);
            }
            let missing: Vec<u32> = worlds.iter().copied().filter(|w| counts.get(w).copied().unwrap_or(0) == 0).collect();
            let gone = missing.into_iter().find_map(|w| p.gone.get(&w).cloned().or_else(|| self.instance().gone(w)));
            if let Some(why) = gone {
                break Err(why);
            }
            match deadline {
                None => self.shared.pscw_changed.wait(&mut p),
                Some(d) => {
                    if self.shared.pscw_changed.wait_until(&mut p, d).timed_out() {
                        break Ok(false);
                    }
                }
            }
        };
        for w in &worlds {
            if let Some(n) = p.awaiting.get_mut(w) {
                *n -= 1;
                if *n == 0 {
                    p.awaiting.remove(w);
                }
            }
        }
        outcome
    }

    /// MPI_Win_start: wait until every target in `group` posted.
    pub fn start_epoch(&self, group: &[i64], timeout: Option<Duration>) -> Result<bool> {
        self.await_notices(group, true, timeout)
    }

    /// MPI_Win_complete: operations to `group` done, then each is told.
    pub fn complete(&self, group: &[i64]) -> Result<()> {
        self.flush(None, None)?;
        for &t in group {
            let world = self.comm.world_rank(t)?;
            send_frame(self.instance(), world, self.shared.key, vec![Header::new(Kind::Complete, 0).encode().into()]);
        }
        Ok(())
    }

    /// MPI_Win_wait / MPI_Win_test: every origin in `group` completed.
    pub fn wait_epoch(&self, group: &[i64], timeout: Option<Duration>) -> Result<bool> {
        self.await_notices(group, false, timeout)
    }

    /// MPI_Win_attach: a dynamic window's span more.
    ///
    /// # Safety
    /// As `create`: valid until detached or the window is freed.
    pub unsafe fn attach(&self, address: usize, len: usize) -> Result<()> {
        let mut m = self.shared.memory.lock();
        let Some(m) = m.as_mut().filter(|m| m.dynamic) else {
            return err(ErrorClass::RmaAttach, "memory is attached to dynamic windows only");
        };
        m.spans.push((address, len));
        Ok(())
    }

    /// MPI_Win_detach: forget the span at `address` (the latest attached).
    pub fn detach(&self, address: usize) -> Result<()> {
        let mut m = self.shared.memory.lock();
        let Some(m) = m.as_mut().filter(|m| m.dynamic) else {
            return err(ErrorClass::RmaAttach, "memory is detached from dynamic windows only");
        };
        match m.spans.iter().rposition(|&(a, _)| a == address) {
            Some(i) => {
                m.spans.remove(i);
                Ok(())
            }
            None => err(ErrorClass::RmaAttach, format!("no memory attached at address {address:#x}")),
        }
    }

    /// MPI_Win_free (collective): own operations done, a barrier (so
    /// nobody's are in flight to here), then the memory is let go of.
    pub fn free(&self, timeout: Option<Duration>) -> Result<()> {
        let flushed = self.flush(None, timeout);
        let barrier = self.comm.collective(crate::mpi::collective::Call::Barrier, None, None, timeout);
        self.release();
        if !flushed? {
            return err(ErrorClass::Timeout, "window free: operations not done in time");
        }
        barrier.map(|_| ())
    }

    /// Unregister: from here on nothing is written to the memory.
    pub fn release(&self) {
        self.instance().windows::<Registry>().windows.lock().remove(&self.shared.key);
        *self.shared.memory.lock() = None;
    }
}

impl Drop for Window {
    fn drop(&mut self) {
        self.release();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::stores::Stores;
    use crate::rank::Binding;

    fn solo() -> Comm {
        let b = Binding {
            domain: "d".into(),
            rank: 0,
            endpoints: vec!["http://127.0.0.1:1".into()],
            token: "t".into(),
            service: String::new(),
            params: serde_json::Value::Null,
        };
        Comm::world(Instance::new(b, Arc::new(Stores::new())))
    }

    #[test]
    fn operations_on_this_ranks_window_apply_and_are_bounds_checked() {
        let comm = solo();
        let mut mem = vec![0u8; 16];
        let w = unsafe { Window::create(&comm, vec![(mem.as_mut_ptr() as usize, 16)], 4, false) }.unwrap();
        w.put(0, 1, Bytes::from_static(&[1, 2, 3, 4])).unwrap();
        let mut got = [0u8; 4];
        let c = unsafe { w.get(0, 1, RawDest { ptr: got.as_mut_ptr() as usize, len: 4 }) }.unwrap();
        assert!(c.is_done());
        assert!(w.flush(None, Some(Duration::ZERO)).unwrap());
        assert_eq!(got, [1, 2, 3, 4]);
        // Past the end: refused with RMA_RANGE, nothing written.
        let bad = w.put(0, 3, Bytes::from_static(&[9; 8])).unwrap();
        assert_eq!(bad.peek_error().unwrap().class, ErrorClass::RmaRange);
        assert_eq!(w.flush(Some(0), None).unwrap_err().class, ErrorClass::RmaRange);
        assert_eq!(&mem[4..8], &[1, 2, 3, 4]);
        assert!(mem[8..].iter().all(|&b| b == 0));
        // Locks: exclusive, then a second request waits for the unlock.
        assert!(w.lock(0, true).unwrap().is_done());
        let waiting = w.lock(0, false).unwrap();
        assert!(!waiting.is_done());
        assert!(w.unlock(0).unwrap().is_done());
        assert!(waiting.is_done());
        w.release();
        // After free, operations fail (the window is gone), memory untouched.
        assert_eq!(w.put(0, 0, Bytes::from_static(&[7])).err().map(|e| e.class), Some(ErrorClass::Win));
        assert_eq!(mem[0], 0);
        mem.clear();
    }
}
