//! The direct-communication layer: instances talk to each other over HTTP.
//! `frame` maps envelopes to headers (and stream frames), `mailbox` matches,
//! `transport` sends stores to peers, `store` files what peers send,
//! `matched` tells a sender when a receive took its message, `withdraw`
//! takes back one whose send timed out, and
//! `stream` is the faster channel an HTTP upgrade opens between two ranks
//! (`head` reads the answer to such an upgrade);
//! `inbound` reads the streams that reach an instance (a progress thread, or
//! the very thread waiting for the message); `polled` is their socket I/O,
//! which polls briefly before sleeping where cores are free; `socket` is
//! what they read and write (TCP, or a local pair that `pump` carries over
//! TLS), `tls` the client's trust and handshake. Every outbound connection
//! is opened by `proxy` (directly or through the environment's HTTP proxy);
//! `connector` hands those to the HTTP client; `rtt` keeps the round trips
//! measured as streams open.

pub mod connector;
pub mod frame;
pub mod head;
pub mod inbound;
pub mod mailbox;
pub mod matched;
pub mod polled;
pub mod proxy;
pub mod pump;
pub mod rtt;
pub mod socket;
pub mod store;
pub mod stream;
pub mod tls;
pub mod transport;
pub mod withdraw;
