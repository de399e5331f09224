//! A communication domain as one endpoint sees it: the binding a *run*
//! request carries, and the service instance it creates.

pub mod binding;
pub mod instance;

pub use binding::Binding;
pub use instance::{Instance, InstanceState, Status};
