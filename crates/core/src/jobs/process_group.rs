//! A job runs in a process group of its own, so that ending it ends what it
//! started too (a shell script's `sleep`, a pipeline, a daemon it forked):
//! the whole group is sent SIGTERM, given a short grace to exit cleanly,
//! then SIGKILL.

use std::time::Duration;

use tokio::process::Child;

/// How long a job's processes have between SIGTERM and SIGKILL.
pub const GRACE: Duration = Duration::from_secs(2);

/// The process group a job's direct child leads (started with
/// `process_group(0)`); None once it cannot be named safely.
pub fn group_of(child: &Child) -> Option<libc::pid_t> {
    // A pid of 0 or 1 given to killpg would name our own group or init's.
    child.id().and_then(|pid| libc::pid_t::try_from(pid).ok()).filter(|&pid| pid > 1)
}

/// Signal every process of group `pgid`.
pub fn signal(pgid: libc::pid_t, sig: libc::c_int) {
    // SAFETY: killpg only sends a signal; pgid > 1 names the job's group (see group_of).
    unsafe {
        libc::killpg(pgid, sig);
    }
}

/// End the job: SIGTERM to its group, SIGKILL after the grace, and reap
/// its direct child.
pub async fn end(pgid: Option<libc::pid_t>, child: &mut Child) {
    let Some(pgid) = pgid else {
        let _ = child.kill().await;
        return;
    };
    signal(pgid, libc::SIGTERM);
    let _ = tokio::time::timeout(GRACE, child.wait()).await;
    signal(pgid, libc::SIGKILL); // whatever ignored SIGTERM, the child's own children too
    let _ = child.wait().await;
}
