//! A rank: one instance of one domain on this endpoint. `binding` is what a
//! *run* request carries (domain id, rank, endpoint list, token);
//! `instance` is the rank's state and lifecycle; `receive` and `send` are
//! its two sides (the receive state itself is `engine::inbox`, the wires
//! are `net`); `liveness` finds peers that are gone, so no wait hangs;
//! `traffic` counts what went to and came from each peer; `awaiting` says
//! what it waits for.

pub mod awaiting;
pub mod binding;
pub mod instance;
pub mod liveness;
mod receive;
mod send;
pub mod traffic;

pub use binding::Binding;
pub use instance::{ErrorReport, Instance, InstanceState, Status};
