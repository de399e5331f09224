//! The wire: what bytes mean, and nothing else (no I/O, no state).
//! `frame` maps an envelope to HTTP headers (a store) and to binary frames
//! (a stream), with acknowledgements; `reserved` names the contexts and
//! tags the core keeps for itself (collectives, revocation, one-sided
//! windows) and the status block a collective's messages start with;
//! `head` reads the head of an HTTP answer (a stream's upgrade); `url`
//! is the one parser of URLs and ports.

pub mod frame;
pub mod head;
pub mod reserved;
pub mod url;
