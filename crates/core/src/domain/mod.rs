//! A communication domain as one endpoint sees it: the binding a *run*
//! request carries, the service instance it creates, and how an instance
//! finds out that a peer it waits for is gone (`liveness`).

pub mod binding;
pub mod instance;
pub mod liveness;

pub use binding::Binding;
pub use instance::{Instance, InstanceState, Status};
