//! MPI operations over an instance: communicators (context + group) and the
//! point-to-point calls the Python API maps one to one.

pub mod collective;
pub mod comm;
pub mod datatype;
pub mod request;
pub mod window;

pub use comm::Comm;

/// Rank wildcards, null process and an intercommunicator's root, valued as in MPICH.
pub const ANY_SOURCE: i64 = -2;
pub const PROC_NULL: i64 = -1;
pub const ANY_TAG: i64 = -1;
/// The root of a rooted intercommunicator collective names itself so (MPI_ROOT).
pub const ROOT: i64 = -3;
