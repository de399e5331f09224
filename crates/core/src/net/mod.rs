//! The network below a rank: how bytes reach a peer and how a peer's bytes
//! are read. `link` is a sender's stream to one peer (opened with an HTTP
//! upgrade, written from the sending thread, reconnected and replayed when
//! it breaks); `reader` reads the streams that reach a rank (its progress
//! thread, or the very thread waiting for the message) and hands what it
//! reads to a `Receiver`; `stores` sends messages as HTTP requests where
//! there is no stream; `http` is the process's HTTP client (JSON calls,
//! files). Below them: `socket` (TCP; TLS whose session the stream's
//! threads hold, `tls_socket`; a local pair that `pump` carries over a TLS
//! session they cannot hold; a same-host stream's rings, `local` + `ring`),
//! `polled` (socket I/O that polls briefly before sleeping where cores are
//! free), `tls` (the client's trust and handshake), `proxy`
//! (every outbound connection, directly or through the environment's HTTP
//! proxy), `connector` (hands those to the HTTP client), `tunnel` (TLS
//! with a pinned endpoint behind a relay, through the relay), `rtt` (round
//! trips measured as streams open).

pub mod connector;
pub mod descriptor;
pub mod http;
pub mod link;
pub mod local;
pub mod polled;
pub mod proxy;
pub mod pull;
pub mod pump;
pub mod reader;
pub mod ring;
pub mod rtt;
pub mod socket;
pub mod stores;
pub mod tls;
pub mod tls_records;
pub mod tls_socket;
pub mod tunnel;
