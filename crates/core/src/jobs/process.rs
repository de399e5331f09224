//! A child process, started by the endpoint or forked by a fork server
//! (`forks`): an instance's, or a job's. One way to name its group, ask
//! whether it runs, wait for its end and end it. Each leads a process group
//! of its own; a child dropped before its end is killed with its group.

use std::process::ExitStatus;
use std::time::Duration;

use tokio::process::Child;

use super::forks::Exit;
use super::process_group;

/// How often a forked child whose server is gone is looked at.
const POLL: Duration = Duration::from_millis(20);

pub enum Process {
    Started(Child),
    Forked { pid: libc::pid_t, exit: Exit },
}

impl Process {
    /// The process group it leads; None once it cannot be named safely.
    pub fn group(&self) -> Option<libc::pid_t> {
        match self {
            Process::Started(child) => process_group::group_of(child),
            Process::Forked { pid, .. } => Some(*pid).filter(|&p| p > 1),
        }
    }

    /// Whether it still runs.
    pub fn running(&mut self) -> bool {
        match self {
            Process::Started(child) => matches!(child.try_wait(), Ok(None)),
            Process::Forked { pid, exit } => exit.borrow().is_none() && process_group::group_alive(*pid),
        }
    }

    /// Its end: its status, None when nobody could tell (its fork server is gone).
    pub async fn wait(&mut self) -> Option<ExitStatus> {
        match self {
            Process::Started(child) => child.wait().await.ok(),
            Process::Forked { pid, exit } => match exit.wait_for(|e| e.is_some()).await.map(|status| *status) {
                Ok(status) => status,
                Err(_) => {
                    // Its server is gone: the child, its orphan, is reaped by
                    // init; its group empties when it ends.
                    while process_group::group_alive(*pid) {
                        tokio::time::sleep(POLL).await;
                    }
                    None
                }
            },
        }
    }

    /// End it: SIGTERM to its group, SIGKILL after `process_group::GRACE`.
    pub async fn end(&mut self) {
        match self {
            Process::Started(child) => process_group::end(process_group::group_of(child), child).await,
            Process::Forked { pid, .. } => {
                let pid = *pid;
                process_group::end_group(pid).await;
                let _ = tokio::time::timeout(process_group::GRACE, self.wait()).await;
            }
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        // A started child is killed as its Child drops (kill_on_drop).
        if let Process::Forked { pid, exit } = self {
            if exit.borrow().is_none() && *pid > 1 {
                process_group::signal(*pid, libc::SIGKILL);
            }
        }
    }
}
