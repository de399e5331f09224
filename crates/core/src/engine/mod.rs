//! The engine: MPI's receive-side rules and the bookkeeping of operations,
//! as plain data structures with no I/O, no threads and no runtime, each
//! tested on its own. `mailbox` matches messages to receives in per-pair
//! order; `inbox` is a rank's whole receive state around it (posted
//! receives and their buffers, messages read into them, peers gone,
//! revocations), whose steps return the completions to fire; `completion`
//! is where an operation's outcome lands and how a thread waits for it;
//! `tree` is the binomial tree arithmetic of forwarded broadcasts.

pub mod completion;
pub mod inbox;
pub mod mailbox;
pub mod tree;
