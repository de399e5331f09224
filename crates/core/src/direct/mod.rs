//! The direct-communication layer: instances talk to each other over HTTP.
//! `frame` maps envelopes to headers (and stream frames), `mailbox` matches,
//! `transport` sends stores to peers, `store` files what peers send, and
//! `stream` is the faster channel an HTTP upgrade opens between two ranks.

pub mod frame;
pub mod mailbox;
pub mod store;
pub mod stream;
pub mod transport;
