//! A service instance: one rank of one domain on this endpoint. It owns
//! that rank's receive state (`engine::inbox`, behind one lock), the send
//! sequence numbers towards every peer and the links to them, and the
//! state the service interface reports (running, done, failed, ...). Its
//! receive side is `rank::receive`, its send side `rank::send`.

use super::awaiting::Collectives;
use super::traffic::Traffic;
use std::any::Any;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};
use std::sync::{Arc, OnceLock};

use parking_lot::{Condvar, Mutex};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use crate::engine::completion::{fit_spin, Completion};
use crate::engine::inbox::Inbox;
use crate::error::{Error, ErrorClass};
use crate::net::link::{InFlight, Link, Undelivered};
use crate::net::reader::{Progress, ReplyPlace};
use crate::net::stores::Stores;
use crate::rank::{liveness, Binding};
use crate::wire::frame::Payload;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum InstanceState {
    /// Created by *run*; the service has not started yet.
    Starting,
    Running,
    Done,
    Failed,
    Cancelled,
}

impl InstanceState {
    pub fn is_final(self) -> bool {
        matches!(self, InstanceState::Done | InstanceState::Failed | InstanceState::Cancelled)
    }

    /// Its name, as JSON has it (and a metric's label).
    pub fn name(self) -> &'static str {
        match self {
            InstanceState::Starting => "starting",
            InstanceState::Running => "running",
            InstanceState::Done => "done",
            InstanceState::Failed => "failed",
            InstanceState::Cancelled => "cancelled",
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ErrorReport {
    pub class: i32,
    pub name: String,
    pub message: String,
    pub traceback: String,
}

/// What the status operation reports.
#[derive(Debug, Clone, Serialize)]
pub struct Status {
    pub domain: String,
    pub rank: u32,
    pub service: String,
    pub state: InstanceState,
    pub result: Option<serde_json::Value>,
    pub error: Option<ErrorReport>,
}

/// How this instance reaches one peer.
pub(super) enum Channel {
    Stream(Arc<Link>),
    Stores,
}

/// What takes one-sided window traffic out of the mailbox as it is filed,
/// whichever thread files it, with no call from the application: the
/// program face's windows (`mpi::window::Registry`), installed with the
/// first window. The rank knows only that such frames exist
/// (`wire::reserved::is_rma`), not what they mean.
pub trait WindowFrames: Send + Sync + 'static {
    fn handle(&self, instance: &Arc<Instance>, source: u32, key: u64, payload: Payload);
    /// The peers (world ranks) whose answer or release window traffic here
    /// waits for: liveness watches them as it watches receives' peers.
    fn awaited(&self) -> Vec<u32>;
    /// Peer `rank` is gone (`why`): what waits for it fails or goes on without it.
    fn peer_gone(&self, instance: &Arc<Instance>, rank: u32, why: &Error);
    /// How many bytes open a window frame (`net::reader::Receiver::window_head`).
    fn head(&self) -> usize;
    /// Where a reply's body still on the wire goes (`net::reader::Receiver::place_reply`).
    fn place_reply(&self, key: u64, head: &[u8], len: usize) -> Option<ReplyPlace>;
}

/// The installed `WindowFrames`, kept also as `Any` to be handed back as its own type.
struct Windows {
    frames: Arc<dyn WindowFrames>,
    any: Arc<dyn Any + Send + Sync>,
}

pub struct Instance {
    pub binding: Binding,
    /// The whole domain runs on this one host, with more ranks than cores:
    /// the same for every rank, so collectives may choose algorithms by it.
    pub crowded: bool,
    pub(super) inbox: Mutex<Inbox>,
    pub(super) arrived: Condvar,
    /// Notified when a receive is posted (a reader may wait for one, `claim`).
    pub(super) posted: Condvar,
    pub(super) next_recv_id: AtomicU64,
    /// What went to and came from each peer (`traffic`).
    pub traffic: Traffic,
    /// The collective calls started lately, to name what it waits for (`awaiting`).
    pub collectives: Collectives,
    pub(super) send_seq: Vec<AtomicU64>,
    status: watch::Sender<Status>,
    pub(super) in_flight: Arc<InFlight>,
    pub(super) channels: Vec<Mutex<Option<Channel>>>,
    /// Per peer: a failure of a send that had already completed.
    pub(super) undelivered: Vec<Undelivered>,
    /// Reads the streams peers open to this instance (started on the first).
    pub(super) progress: Mutex<Option<Arc<Progress>>>,
    /// Broadcast forwards still being written (checked by `flush`).
    pub(super) forwards: Mutex<Vec<(u32, Arc<Completion>)>>,
    pub(super) stores: Arc<Stores>,
    /// Whether any peer is gone (spares sends a lock while none is).
    pub(super) any_gone: AtomicBool,
    /// Messages filed whose forwards are not registered in `forwards` yet.
    pub(super) forwarding: AtomicUsize,
    windows: OnceLock<Windows>,
}

impl Instance {
    pub fn new(binding: Binding, stores: Arc<Stores>) -> Arc<Self> {
        let status = Status {
            domain: binding.domain.clone(),
            rank: binding.rank,
            service: binding.service.clone(),
            state: InstanceState::Starting,
            result: None,
            error: None,
        };
        let size = binding.size();
        let local = binding.local_ranks();
        let oversubscribed = fit_spin(local);
        let instance = Arc::new(Instance {
            crowded: local == size as usize && oversubscribed,
            send_seq: (0..size).map(|_| AtomicU64::new(0)).collect(),
            traffic: Traffic::new(size),
            collectives: Collectives::default(),
            inbox: Mutex::new(Inbox::new(binding.rank, size)),
            binding,
            arrived: Condvar::new(),
            posted: Condvar::new(),
            next_recv_id: AtomicU64::new(1),
            status: watch::channel(status).0,
            in_flight: Arc::new(InFlight::default()),
            channels: (0..size).map(|_| Mutex::new(None)).collect(),
            undelivered: (0..size).map(|_| Undelivered::default()).collect(),
            forwards: Mutex::new(Vec::new()),
            progress: Mutex::new(None),
            stores,
            any_gone: AtomicBool::new(false),
            forwarding: AtomicUsize::new(0),
            windows: OnceLock::new(),
        });
        liveness::watch(&instance);
        instance
    }

    /// The client this instance sends stores (and asks its peers) with.
    pub fn stores(&self) -> &Arc<Stores> {
        &self.stores
    }

    pub fn rank(&self) -> u32 {
        self.binding.rank
    }

    pub fn size(&self) -> u32 {
        self.binding.size()
    }

    /// This rank's window traffic handler, installed on first use as a `T::default()`.
    pub fn windows<T: WindowFrames + Default>(&self) -> Arc<T> {
        let w = self.windows.get_or_init(|| {
            let t = Arc::new(T::default());
            Windows { frames: t.clone(), any: t }
        });
        w.any.clone().downcast::<T>().unwrap_or_else(|_| panic!("one window traffic handler type per instance"))
    }

    /// The window traffic handler, if a window was ever made here.
    pub(super) fn window_frames(&self) -> Option<Arc<dyn WindowFrames>> {
        self.windows.get().map(|w| w.frames.clone())
    }

    /// The reader of this instance's incoming streams (started on first use).
    pub fn progress(&self) -> std::io::Result<Arc<Progress>> {
        let mut p = self.progress.lock();
        if let Some(p) = &*p {
            return Ok(p.clone());
        }
        // A stream accepted as the instance ended: `close` has taken (or
        // will take, after this lock) the progress it stops; a new one
        // would read for ever.
        if let Some(e) = self.ended() {
            return Err(std::io::Error::other(e.message));
        }
        let started = Progress::start()?;
        *p = Some(started.clone());
        Ok(started)
    }

    // ---- state -----------------------------------------------------------

    pub fn status(&self) -> Status {
        self.status.borrow().clone()
    }

    /// Its state alone (no copy of its result).
    pub fn state(&self) -> InstanceState {
        self.status.borrow().state
    }

    pub fn watch_status(&self) -> watch::Receiver<Status> {
        self.status.subscribe()
    }

    pub fn set_running(&self) {
        self.status.send_modify(|s| {
            if s.state == InstanceState::Starting {
                s.state = InstanceState::Running;
            }
        });
    }

    /// The service returned `result`.
    pub fn finish(&self, result: serde_json::Value) {
        self.end(InstanceState::Done, Some(result), None);
    }

    /// The service raised.
    pub fn fail(&self, report: ErrorReport) {
        self.end(InstanceState::Failed, None, Some(report));
    }

    /// Cancelled through the service interface: pending and later operations fail.
    pub fn cancel(&self) {
        self.end(InstanceState::Cancelled, None, None);
    }

    fn end(&self, state: InstanceState, result: Option<serde_json::Value>, error: Option<ErrorReport>) {
        let mut changed = false;
        self.status.send_if_modified(|s| {
            if s.state.is_final() {
                return false;
            }
            s.state = state;
            s.result = result;
            s.error = error;
            changed = true;
            true
        });
        if changed {
            let why = match state {
                InstanceState::Cancelled => {
                    Error::new(ErrorClass::Cancelled, format!("domain {} rank {} was cancelled", self.binding.domain, self.rank()))
                }
                _ => Error::new(ErrorClass::ProcFailed, format!("domain {} rank {} has ended", self.binding.domain, self.rank())),
            };
            self.close(why);
        }
    }

    fn close(&self, why: Error) {
        let fires = self.inbox.lock().close(why);
        self.arrived.notify_all();
        self.fire(fires);
        for ch in &self.channels {
            if let Some(Channel::Stream(link)) = ch.lock().take() {
                link.close();
            }
        }
        if let Some(p) = self.progress.lock().take() {
            p.stop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_states_name_is_its_json() {
        use InstanceState::*;
        for s in [Starting, Running, Done, Failed, Cancelled] {
            assert_eq!(serde_json::to_value(s).unwrap(), s.name());
        }
    }

    fn instance() -> Arc<Instance> {
        let endpoints = vec!["http://127.0.0.1:1".to_string(), "http://127.0.0.1:2".to_string()];
        let b = Binding {
            domain: "d".into(),
            rank: 0,
            endpoints,
            token: "t".repeat(16),
            service: String::new(),
            params: serde_json::Value::Null,
        };
        Instance::new(b, Arc::new(Stores::new()))
    }

    /// A stream accepted as the instance ends gets no reader: one started
    /// after `close` would read (a thread and its sockets) for ever.
    #[test]
    fn an_ended_instance_starts_no_stream_reader() {
        let live = instance();
        assert!(live.progress().is_ok());
        live.finish(serde_json::Value::Null);
        assert!(live.progress.lock().is_none(), "stopped and let go at the end");
        assert!(live.progress().is_err(), "none started after the end");
    }
}
