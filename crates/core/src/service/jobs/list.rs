//! `GET /jobs`: the caller's jobs, oldest first — every job on the
//! endpoint to a key with `admin`. Each: its id, URL, program, state, when
//! it was created and the key that owns it (its line in the keys file).
//! Bounded as the job table is: at most `max_jobs` entries, and at most
//! `max_jobs_per_key` for a key without `admin`.

use http::StatusCode;
use serde_json::{json, Value};

use crate::keys::Key;
use crate::service::reply::{json, Reply};
use crate::service::Endpoint;

pub fn list(ep: &Endpoint, caller: &Key) -> Reply {
    let base = ep.url();
    let all: Vec<Value> = ep
        .jobs
        .jobs_of(caller)
        .iter()
        .map(|job| {
            let s = job.state();
            json!({
                "id": job.id, "url": job.url(&base), "program": job.program.name, "state": s.state,
                "created": s.started, "owner": job.owner.0,
            })
        })
        .collect();
    json(StatusCode::OK, &all)
}
