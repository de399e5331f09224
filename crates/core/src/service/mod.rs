//! The service interface: an endpoint serves deployed services over HTTP.
//! `endpoint` holds its state, `server` accepts connections and routes each
//! request to one operation per file (`describe`, `run`, `status`, `cancel`;
//! a rank's messages: `admit`, `store`, `stream`, `matched`, `withdraw`;
//! the table of them all is `routes`), and
//! `tls` makes it https, `sandbox` runs each instance in a process of its own,
//! `rendezvous` collects where ranks started by others are, `relay` lets
//! endpoints that accept no connections be reached through this one over
//! connections they open (`reverse` is their side; `tunnel` serves a
//! pinned client end to end through the relay), `upgrade` the HTTP/1.1
//! upgrades they and streams use; `client` is the
//! other side: starting and watching domains on endpoints.

pub mod admit;
pub mod buffered;
pub mod cancel;
pub mod client;
pub mod config;
pub mod conns;
pub mod dashboard;
pub mod describe;
pub mod ended;
pub mod endpoint;
pub mod guard;
pub mod idle;
pub mod jobs;
pub mod matched;
pub mod metrics;
pub mod ogcapi;
pub mod relay;
pub mod rendezvous;
pub mod reply;
pub mod reverse;
pub mod routes;
pub mod run;
pub mod sandbox;
pub mod server;
pub mod sessions;
pub mod shutdown;
pub mod soap;
pub mod status;
pub mod store;
pub mod stream;
pub mod tls;
pub mod tunnel;
pub mod upgrade;
pub mod withdraw;

pub use config::Config;
pub use endpoint::Endpoint;
