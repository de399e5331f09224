//! The direct-communication layer: instances talk to each other over HTTP.
//! `frame` maps envelopes to headers, `mailbox` matches, `transport` sends
//! stores to peers, `store` files what peers send.

pub mod frame;
pub mod mailbox;
pub mod store;
pub mod transport;
