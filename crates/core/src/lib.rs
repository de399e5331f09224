//! # mpiws core
//!
//! MPI-style message passing between web services, without any Python: the
//! Python package (`crates/python`) is a thin binding over this crate.
//!
//! Map of the code, by layer:
//!
//! - [`service`] — the **service interface**. An [`service::Endpoint`] is one
//!   HTTP server hosting deployed services; `run` creates a service instance
//!   of a domain, `status`/`cancel` manage it, `describe` lists what is there;
//!   [`service::sandbox`] runs each instance's code in a process of its own.
//!   [`service::client`] is the launcher's side of those operations.
//! - [`domain`] — a communication domain as one endpoint sees it: the
//!   [`domain::Binding`] (domain id, rank, endpoint list, token) and the
//!   [`domain::Instance`] it creates, which owns that rank's mailbox;
//!   [`domain::liveness`] finds peers that are gone, so no wait hangs.
//! - [`mpi`] — the **MPI operations**: a [`mpi::Comm`] is a context and a
//!   group over an instance; point-to-point calls map to it one to one;
//!   [`mpi::collective`] runs collectives (one file per family of
//!   algorithms) on a [`mpi::collective::Schedule`] of sends and receives,
//!   with builtin reductions on typed buffers in [`mpi::collective::op`];
//!   [`mpi::datatype`] builds derived datatypes' layouts and packs them.
//! - [`direct`] — the **direct-communication layer**: [`direct::frame`] is the
//!   seam between HTTP and meaning (envelope headers + raw body),
//!   [`direct::mailbox`] matches messages to receives in per-pair order,
//!   [`direct::store`] files what peers send, [`direct::transport`] sends,
//!   [`direct::stream`] / [`direct::inbound`] are the faster upgraded
//!   channel and its readers, [`direct::polled`] their socket I/O.
//! - [`jobs`] — **legacy programs as services**: a command-line program
//!   deployed with a one-line template (or a CWL `CommandLineTool`,
//!   [`jobs::cwl`]); jobs of it are spawned, watched, killed, and their
//!   files pass by value or by URL.
//! - [`completion`] — where outcomes land, how threads wait for them
//!   (polling briefly, then sleeping), and [`completion::Events`], the
//!   queue a handler thread sleeps on.
//! - [`error`] — errors with MPI error classes; [`runtime`] — the tokio runtime;
//!   [`body`] — the chunked HTTP body type.

pub mod body;
pub mod completion;
pub mod direct;
pub mod domain;
pub mod error;
pub mod jobs;
pub mod mpi;
pub mod runtime;
pub mod service;

pub use error::{Error, ErrorClass, Result};
