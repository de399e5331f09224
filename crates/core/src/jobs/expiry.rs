//! Nothing is kept for ever: ended jobs (with their directories) and
//! uploads are removed once they are older than the endpoint's time to
//! live (`job_ttl`, `mpiws serve --job-ttl`). A job's age counts from its
//! end, an upload's from when it was written. A session is removed once
//! idle past its time (`session`).

use std::sync::Weak;
use std::time::{Duration, SystemTime};

use crate::jobs::Jobs;

/// Look for expired things this often, at most (and at least every minute).
fn period(ttl: Duration) -> Duration {
    (ttl / 4).clamp(Duration::from_millis(100), Duration::from_secs(60))
}

/// Remove what has expired, until the register is gone.
pub async fn expire_forever(jobs: Weak<Jobs>) {
    loop {
        let Some((period, sooner)) = jobs
            .upgrade()
            .map(|jobs| (period(jobs.shortest_idle().map_or(jobs.ttl, |idle| idle.min(jobs.ttl))), jobs.expiry_sooner.clone()))
        else {
            return;
        };
        tokio::select! {
            _ = tokio::time::sleep(period) => {}
            _ = sooner.notified() => continue, // a new session: look again how often
        }
        let Some(jobs) = jobs.upgrade() else { return };
        expire(&jobs).await;
    }
}

pub async fn expire(jobs: &Jobs) {
    for id in jobs.expired_sessions() {
        jobs.remove_session(&id).await;
    }
    for id in jobs.expired_jobs() {
        jobs.remove_job(&id).await;
    }
    let Some(cutoff) = SystemTime::now().checked_sub(jobs.ttl) else { return };
    let Some(uploads) = jobs.workdir.existing().map(|w| w.join("files")) else { return }; // none made yet
    let Ok(mut entries) = tokio::fs::read_dir(uploads).await else { return };
    while let Ok(Some(entry)) = entries.next_entry().await {
        let done = entry.file_name().to_str().is_some_and(super::is_id); // not a `.part` still arriving
        let old = entry.metadata().await.ok().and_then(|m| m.modified().ok()).is_some_and(|t| t <= cutoff);
        if done && old {
            jobs.remove_upload(&entry.path()).await;
        }
    }
}
