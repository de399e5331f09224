//! # mpiws core
//!
//! MPI-style message passing between web services, without any Python: the
//! Python package (`crates/python`) is a binding over this crate's facade
//! (the `pub use` items below) and the public `wire`, `config` and `error`
//! modules, and nothing else of it.
//!
//! ## Layout
//!
//! One engine, two faces. Each layer is a folder; a layer uses only the
//! layers below it (checked by `scripts/layers.py`, which reads the allowed
//! arrows from `docs/architecture.md`):
//!
//! ```text
//!  service  the HTTP face: one route table (routes), the server, guard and
//!           keys, the endpoint's state, every operation (run, status,
//!           store, stream, ...), jobs' HTTP operations, the OGC API -
//!           Processes face (ogcapi), sandbox, relay
//!     │                           mpi  the program face: Comm, collective/
//!     │                                (schedules), datatype/, window/
//!     ▼                            │
//!  jobs     legacy programs        │
//!     │                            ▼
//!     │                  rank   one rank: instance (state, lifecycle),
//!     │                          receive, send, liveness
//!     ▼                            ▼
//!  net      links (streams), readers, stores, the HTTP client, sockets, TLS, proxies
//!     ▼
//!  engine   mailbox, inbox (receive state), completion, tree: no I/O
//!     ▼
//!  wire     frames and envelopes, reserved tags, HTTP answer heads, URLs: bytes only
//! ```
//!
//! Beside them, leaves every layer may use: [`error`] (errors with MPI
//! error classes), [`config`] (every `MPIWS_*` setting), `runtime` (the
//! tokio runtime), `body` (the chunked HTTP body type), `keys` (endpoint
//! keys and scopes: who owns what).
//!
//! What crosses layers upward does so through a trait the lower layer
//! declares: `net::reader::Receiver` (what a stream's reader files
//! messages with, implemented by `rank::Instance`) and
//! `rank::instance::WindowFrames` (one-sided window traffic, implemented
//! by `mpi::window::Registry`).
//!
//! ## One message
//!
//! `comm.send(obj, dest=1)` → `mpi::Comm::send_start` → `rank::send`
//! (sequence number, the peer's `net::link::Link`, opened on first use with
//! an HTTP upgrade that `service::stream` answers) → frame bytes on the
//! socket. At the receiver, `net::reader` reads the frame (in the thread
//! waiting for it, or the progress thread) and hands it to
//! `rank::receive` (`Receiver::deliver`), which files it in the
//! `engine::inbox` / `engine::mailbox` and completes the matching receive's
//! `engine::completion::Completion`.

mod body;
pub mod config;
mod engine;
pub mod error;
mod jobs;
mod keys;
mod mpi;
mod net;
mod rank;
mod runtime;
mod service;
/// The wire protocol's codecs: public, so that `tests/fuzz_*.rs` drive them as a peer would.
pub mod wire;

pub use error::{Error, ErrorClass, Result};

// ---- the facade: what the binding, the examples and the tests use ----------

pub use engine::completion::{wait_any, wait_outcome, Awaited, Completion, Events, Outcome, RecvBuffer, Tracking};
pub use engine::mailbox::RecvId;
pub use jobs::cwl::params::{eval as cwl_eval, Mode as CwlMode};
pub use jobs::template;
pub use mpi::collective::{Call, Edge, Op, ALGORITHMS};
pub use mpi::datatype::Layout;
pub use mpi::request::Request;
pub use mpi::window::{RawDest, Window};
pub use mpi::{Comm, ANY_SOURCE, ANY_TAG, PROC_NULL, ROOT};
pub use net::http::Http;
pub use net::link::EAGER_BELOW;
pub use rank::{Binding, ErrorReport, Instance, InstanceState, Status};
pub use runtime::runtime;
pub use service::client::DomainClient;
pub use service::dashboard::board::Watched;
pub use service::rendezvous::{register as rendezvous_register, Registration};
pub use service::sandbox::child::{begin as sandbox_begin, report as sandbox_report};
pub use service::shutdown::exit_on_signals;
pub use service::{Config, Endpoint};
