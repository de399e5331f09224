//! Finding out that a peer is gone, so that nobody waits for it for ever.
//!
//! While a receive waits for a peer (any peer, for an any-source receive)
//! longer than one look (0.2 s: a busy program's short waits cost nothing),
//! the instance long-polls that peer's *status* operation, the same one the
//! launcher uses. The peer is declared gone when its status says its
//! instance ended (failed, cancelled, or done: whatever it sent is already
//! here, since an instance ends only after its sends were acknowledged), or
//! when it has been unreachable for the failure timeout
//! (`MPIWS_FAILURE_TIMEOUT`, seconds, default 3): its process died, its
//! host is cut off, or it hangs. Then `Instance::peer_gone` fails what only
//! that peer could complete. Nothing is polled while nobody waits.

use std::collections::HashSet;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use http::Method;
use parking_lot::Mutex;
use serde::Deserialize;

use crate::config::failure_timeout;
use crate::error::{Error, ErrorClass};
use crate::rank::instance::ErrorReport;
use crate::rank::{Instance, InstanceState};
use crate::runtime::runtime;
use crate::wire::url;

/// How often the instance looks at what its receives wait for.
const LOOK_EVERY: Duration = Duration::from_millis(200);
/// Longest a status long-poll is held (an ended peer answers at once).
const LONG_POLL: Duration = Duration::from_secs(2);

#[derive(Deserialize)]
struct PeerStatus {
    state: InstanceState,
    error: Option<ErrorReport>,
}

/// Start watching the peers of `instance` (for as long as it lives and runs).
pub fn watch(instance: &Arc<Instance>) {
    if instance.size() < 2 {
        return;
    }
    let weak = Arc::downgrade(instance);
    let watched = Arc::new(Mutex::new(HashSet::new()));
    runtime().spawn(async move {
        let mut seen: HashSet<u64> = HashSet::new();
        let mut windows_seen: HashSet<u32> = HashSet::new();
        loop {
            tokio::time::sleep(LOOK_EVERY).await;
            let Some(i) = weak.upgrade() else { return };
            if i.status().state.is_final() {
                return;
            }
            // Receives already posted at the last look have waited a while.
            let posted = i.posted_receives();
            let waiting_long = posted.iter().filter(|(id, _)| seen.contains(id)).map(|(_, s)| *s);
            let mut peers = i.peers_awaited_by(waiting_long);
            seen = posted.iter().map(|(id, _)| *id).collect();
            // Window traffic that waited since the last look, for a peer
            // known to be gone (a send to it failed) or to be watched.
            let now = window_awaited(&i);
            for &peer in now.iter().filter(|p| windows_seen.contains(p)) {
                match i.gone(peer) {
                    Some(why) => window_peer_gone(&i, peer, &why),
                    None => peers.push(peer),
                }
            }
            windows_seen = now.into_iter().collect();
            for peer in peers {
                if watched.lock().insert(peer) {
                    let (weak, watched) = (weak.clone(), watched.clone());
                    runtime().spawn(async move {
                        watch_peer(&weak, peer).await;
                        watched.lock().remove(&peer);
                    });
                }
            }
        }
    });
}

/// Long-poll `peer`'s status while receives wait for it; declare it gone
/// when it ended or stayed unreachable for the failure timeout.
async fn watch_peer(weak: &Weak<Instance>, peer: u32) {
    let mut unreachable_since: Option<Instant> = None;
    loop {
        let (uri, token, stores) = {
            let Some(i) = weak.upgrade() else { return };
            let awaited = i.peers_awaited_by(i.posted_receives().into_iter().map(|(_, s)| s));
            if i.status().state.is_final() || !(awaited.contains(&peer) || window_awaited(&i).contains(&peer)) {
                return;
            }
            let b = &i.binding;
            let uri = url::join(b.url_of(peer), &format!("/domains/{}/ranks/{peer}?wait={}", b.domain, LONG_POLL.as_secs_f64()));
            (uri, b.token.clone(), i.stores().clone())
        };
        let asked = stores.http().call_json::<PeerStatus>(Method::GET, &uri, Some(&token), None);
        let answer = match tokio::time::timeout(LONG_POLL + failure_timeout(), asked).await {
            Ok(a) => a,
            Err(_) => Err(Error::new(ErrorClass::ProcFailed, format!("{uri} did not answer"))),
        };
        let gone = match answer {
            Ok(s) if s.state.is_final() => {
                let why = s.error.map_or(String::new(), |e| format!(": {}: {}", e.name, e.message));
                let state = serde_json::to_value(s.state).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default();
                Some(format!("rank {peer} has ended ({state}{why})"))
            }
            Ok(_) => {
                unreachable_since = None;
                None
            }
            Err(e) => {
                let since = *unreachable_since.get_or_insert_with(Instant::now);
                if since.elapsed() >= failure_timeout() {
                    Some(format!("rank {peer} failed: unreachable for {:.1} s ({})", since.elapsed().as_secs_f64(), e.message))
                } else {
                    tokio::time::sleep(LOOK_EVERY).await;
                    None
                }
            }
        };
        if let Some(why) = gone {
            if let Some(i) = weak.upgrade() {
                let why = Error::new(ErrorClass::ProcFailed, why);
                i.peer_gone(peer, why.clone());
                window_peer_gone(&i, peer, &why);
            }
            return;
        }
    }
}

/// The peers this instance's window traffic waits for (`WindowFrames::awaited`).
fn window_awaited(i: &Instance) -> Vec<u32> {
    let me = i.rank();
    i.window_frames().map(|w| w.awaited().into_iter().filter(|&p| p != me).collect()).unwrap_or_default()
}

fn window_peer_gone(i: &Arc<Instance>, peer: u32, why: &Error) {
    if let Some(w) = i.window_frames() {
        w.peer_gone(i, peer, why);
    }
}
