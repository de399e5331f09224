//! An endpoint started again on a work directory it kept jobs in: what
//! each job and upload its [`ledger`](super::ledger) records becomes.
//!
//! Rules ([`fate`] decides, pure):
//! - A job that had ended is kept as it ended: its status, exit code,
//!   outputs and files are served as before, and it expires on time.
//! - A job that was running is adopted if its process still runs (the same
//!   process: pid and start time), or if it ended meanwhile and its
//!   wrapper left its exit status: it is recorded as if the endpoint had
//!   watched it throughout (a CWL job's outputs collected, a kill ends it).
//! - Any other job that had not ended is `lost`, last seen when the
//!   endpoint was last alive (its heartbeat): one that was staging (the
//!   endpoint itself was bringing its inputs), or one whose process is
//!   gone without a word.
//! - What a key no longer in the keys file owned belongs to no key: only
//!   `admin` may act on it.
//! - Half-written uploads (`*.part`) are removed: no URL was given for them.
//! - A session is kept with its files, its idle time counted again from
//!   when the endpoint was last alive; its jobs are in it again. One whose
//!   directory is gone is forgotten.
//! - The disk quota counts what is there again: each job's directory and
//!   upload against its owner, the rest against no key.

use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::Duration;

use crate::error::Result;
use crate::jobs::job::{self, Home, Job, Kept, Phase, EXIT_FILE};
use crate::jobs::ledger::Row;
use crate::jobs::process_group::Process;
use crate::jobs::{is_id, safe_file, Jobs, Program};
use crate::keys::{KeyId, Keys};
use crate::runtime::runtime;

/// What a recorded job becomes.
#[derive(Debug, PartialEq, Eq)]
pub enum Fate {
    /// As it was: it had ended.
    Keep,
    /// Watched again until it ends.
    Adopt,
    /// Lost: nothing tells how it ended.
    Lose(&'static str),
}

/// The fate of a job recorded in `phase`: whether its recorded process
/// still runs, and whether its exit status was written.
pub fn fate(phase: Phase, process_runs: bool, exit_written: bool) -> Fate {
    match phase {
        p if p.ended() => Fate::Keep,
        Phase::Running if process_runs || exit_written => Fate::Adopt,
        Phase::Running => Fate::Lose("it was running when the endpoint stopped, and its process is gone without an exit status"),
        _ => Fate::Lose("the endpoint stopped while it brought the job's inputs; it never started"),
    }
}

/// How often the endpoint says in its ledger that it is alive.
const BEAT: Duration = Duration::from_secs(5);

/// Make `jobs`' table what its ledger records (see the rules above).
pub(super) fn restore(jobs: &Jobs, keys: &Keys) -> Result<()> {
    let Some(ledger) = jobs.ledger.clone() else { return Ok(()) };
    let workdir = jobs.workdir.path()?;
    let owners: HashMap<String, KeyId> = keys.iter().map(|k| (k.fingerprint(), k.id)).collect();
    let owner = |fingerprint: &str| owners.get(fingerprint).copied().unwrap_or(KeyId::GONE);
    let last_seen = ledger.last_beat().unwrap_or_else(job::now);
    let mut counted = 0u64;
    for row in ledger.sessions()? {
        match jobs.restore_session(&row, owner(&row.owner), last_seen) {
            Some(session) => counted = counted.saturating_add(session.used()),
            None => ledger.remove_session(&row.id),
        }
    }
    for row in ledger.jobs()? {
        let Some(job) = rebuilt(jobs, &row, owner(&row.owner), Kept { ledger: ledger.clone(), owner: row.owner.clone() }) else {
            eprintln!("mpiws: jobs ledger: job {} cannot be read back; it is dropped", row.id);
            ledger.remove_job(&row.id);
            continue;
        };
        counted = counted.saturating_add(job.recount_disk());
        let process_runs = row.pid.zip(row.pid_start).is_some_and(|(pid, start)| Process { pid, start }.alive());
        let exit_written = safe_file::size_of(&job.dir.join(EXIT_FILE)).is_some();
        match fate(job.state().state, process_runs, exit_written) {
            Fate::Keep => {}
            Fate::Adopt => {
                runtime().spawn(job.clone().adopt());
            }
            Fate::Lose(why) => job.lose(why.to_string(), last_seen.max(job.state().started)),
        }
        if let Some(s) = &job.session {
            s.job(&job.id, job.state().state.ended());
        }
        jobs.jobs.lock().insert(job.id.clone(), job);
    }
    let files = workdir.join("files");
    for (id, fingerprint) in ledger.uploads()? {
        match safe_file::size_of(&files.join(&id)) {
            Some(size) if is_id(&id) => {
                jobs.disk.force(Some(owner(&fingerprint)), size);
                counted = counted.saturating_add(size);
                jobs.uploads.lock().insert(id, owner(&fingerprint));
            }
            _ => ledger.remove_upload(&id), // expired or removed while the ledger could not say so
        }
    }
    if let Ok(entries) = std::fs::read_dir(&files) {
        for entry in entries.flatten() {
            if entry.file_name().to_str().is_some_and(|n| n.ends_with(".part")) {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
    jobs.disk.force(None, safe_file::bytes_under(&workdir).saturating_sub(counted));
    ledger.beat(job::now());
    Ok(())
}

/// The job `row` records, with its program as it was deployed then.
fn rebuilt(jobs: &Jobs, row: &Row, owner: KeyId, kept: Kept) -> Option<Arc<Job>> {
    if !is_id(&row.id) {
        return None; // its directory is named by it
    }
    let program = Program::parse(&row.program, &row.kind, &row.source, &jobs.cwl_runner).ok()?;
    let (dir, session) = match &row.session {
        // A job of a session that is gone is gone with it.
        Some(id) => {
            let session = jobs.session(id)?;
            let names = serde_json::from_str(row.names.as_deref().unwrap_or("{}")).ok()?;
            (session.job_dir(&row.id), Some((session, names)))
        }
        None => (jobs.job_dir(&row.id).ok()?, None),
    };
    Job::from_row(row, Arc::new(program), owner, Home { dir, disk: jobs.disk.clone(), kept: Some(kept), session })
}

/// Say in the ledger, every few seconds, that the endpoint is alive, until
/// the register is gone.
pub async fn beat_forever(jobs: Weak<Jobs>) {
    loop {
        tokio::time::sleep(BEAT).await;
        let Some(jobs) = jobs.upgrade() else { return };
        if let Some(ledger) = &jobs.ledger {
            ledger.beat(job::now());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ended_jobs_are_kept_running_ones_adopted_if_they_left_a_trace_else_lost() {
        for ended in [Phase::Done, Phase::Failed, Phase::Killed, Phase::Lost] {
            assert_eq!(fate(ended, false, false), Fate::Keep);
            assert_eq!(fate(ended, true, true), Fate::Keep, "an ended job's pid may be another process's now");
        }
        assert_eq!(fate(Phase::Running, true, false), Fate::Adopt);
        assert_eq!(fate(Phase::Running, false, true), Fate::Adopt, "ended meanwhile: its status is read");
        assert!(matches!(fate(Phase::Running, false, false), Fate::Lose(why) if why.contains("without an exit status")));
        assert!(matches!(fate(Phase::Staging, true, true), Fate::Lose(why) if why.contains("never started")));
    }
}
