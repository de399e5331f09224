//! A job runs in a process group of its own, so that ending it ends what it
//! started too (a shell script's `sleep`, a pipeline, a daemon it forked):
//! the whole group is sent SIGTERM, given a short grace to exit cleanly,
//! then SIGKILL.
//!
//! A process is named by its pid and its start time together ([`Process`]):
//! after a restart the endpoint adopts a job's process only if the pid it
//! recorded still names the process it started, not a later one given the
//! same pid.

use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use tokio::process::Child;

/// How long a job's processes have between SIGTERM and SIGKILL.
pub const GRACE: Duration = Duration::from_secs(2);

/// How often a group is looked at while it is given its grace.
const POLL: Duration = Duration::from_millis(20);

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

/// Whether any process of group `pgid` is left.
pub fn group_alive(pgid: libc::pid_t) -> bool {
    // SAFETY: signal 0 sends nothing; it only asks whether the group exists.
    pgid > 1 && unsafe { libc::killpg(pgid, 0) } == 0
}

/// End the job: SIGTERM to its group, SIGKILL after the grace (or as soon
/// as the group is empty), and reap its direct child.
pub async fn end(pgid: Option<libc::pid_t>, child: &mut Child) {
    let Some(pgid) = pgid else {
        let _ = child.kill().await;
        return;
    };
    let deadline = Instant::now() + GRACE;
    signal(pgid, libc::SIGTERM);
    // The child is reaped first (a zombie still counts in its group); the
    // rest of the group keeps its grace even if the child went at once.
    let _ = tokio::time::timeout(GRACE, child.wait()).await;
    drain(pgid, deadline).await;
    signal(pgid, libc::SIGKILL); // whatever ignored SIGTERM, the child's own children too
    let _ = child.wait().await;
}

/// End group `pgid` of a job adopted after a restart (no child of ours).
pub async fn end_group(pgid: libc::pid_t) {
    if pgid <= 1 {
        return;
    }
    let deadline = Instant::now() + GRACE;
    signal(pgid, libc::SIGTERM);
    drain(pgid, deadline).await;
    signal(pgid, libc::SIGKILL);
}

async fn drain(pgid: libc::pid_t, deadline: Instant) {
    while group_alive(pgid) && Instant::now() < deadline {
        tokio::time::sleep(POLL).await;
    }
}

/// A process, named so that a later one given its pid is not taken for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Process {
    pub pid: libc::pid_t,
    /// When it started, in clock ticks since boot (`/proc/PID/stat`).
    pub start: u64,
}

impl Process {
    /// Process `pid` as it is now; None if there is none, or it has ended
    /// (a zombie).
    pub fn of(pid: libc::pid_t) -> Option<Process> {
        let stat = Stat::of(pid)?;
        (stat.state != 'Z' && stat.state != 'X').then_some(Process { pid, start: stat.start })
    }

    /// Whether it is still running (its pid names it, not a later process).
    pub fn alive(&self) -> bool {
        self.pid > 1 && Process::of(self.pid) == Some(*self)
    }
}

/// What `/proc/PID/stat` says of a process, of what mpiws asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    pub state: char,
    /// Its process group.
    pub pgrp: libc::pid_t,
    /// When it started, in clock ticks since boot.
    pub start: u64,
    /// Its resident memory, in pages.
    pub resident_pages: u64,
    /// CPU time it used, user and system, in clock ticks.
    pub cpu_ticks: u64,
}

impl Stat {
    pub fn of(pid: libc::pid_t) -> Option<Stat> {
        Stat::parse(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
    }

    /// The command name (field 2, in parentheses) may hold spaces and
    /// parentheses: the fields after it are counted from its last `)`.
    fn parse(stat: &str) -> Option<Stat> {
        let rest: Vec<&str> = stat[stat.rfind(')')? + 1..].split_whitespace().collect();
        // Field N of the line is rest[N - 3].
        Some(Stat {
            state: rest.first()?.chars().next()?,
            pgrp: rest.get(5 - 3)?.parse().ok()?,
            start: rest.get(22 - 3)?.parse().ok()?,
            resident_pages: rest.get(24 - 3)?.parse().ok()?,
            cpu_ticks: rest.get(14 - 3)?.parse::<u64>().ok()?.saturating_add(rest.get(15 - 3)?.parse().ok()?),
        })
    }

    /// What process `pid` used: CPU seconds and resident bytes.
    pub fn usage(pid: libc::pid_t) -> Option<(f64, u64)> {
        let stat = Stat::of(pid)?;
        // SAFETY: sysconf has no preconditions.
        let (tick, page) = unsafe { (libc::sysconf(libc::_SC_CLK_TCK), libc::sysconf(libc::_SC_PAGESIZE)) };
        let cpu = stat.cpu_ticks as f64 / tick.max(1) as f64;
        Some((cpu, stat.resident_pages.saturating_mul(u64::try_from(page).unwrap_or(4096))))
    }
}

/// The program `name` names: itself if it holds a `/` (checked if it is
/// absolute; a relative one is the job's directory's), else the first
/// executable of that name on `path` (as `execvp` would find it).
pub fn find_program(name: &str, path: Option<&str>) -> io::Result<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
    if name.contains('/') {
        return if Path::new(name).is_relative() || executable(Path::new(name)) {
            Ok(PathBuf::from(name))
        } else {
            Err(std::fs::metadata(name).err().unwrap_or_else(|| io::Error::from(io::ErrorKind::PermissionDenied)))
        };
    }
    if name.is_empty() {
        return Err(io::Error::from(io::ErrorKind::NotFound));
    }
    path.unwrap_or("/usr/local/bin:/usr/bin:/bin")
        .split(':')
        .map(|dir| Path::new(if dir.is_empty() { "." } else { dir }).join(name))
        .find(|p| executable(p))
        .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_line_is_read_past_a_command_name_with_parentheses_and_spaces() {
        let line = "4242 (a) b (c)) S 1 4240 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10 18446744073709551615";
        assert_eq!(Stat::parse(line), Some(Stat { state: 'S', pgrp: 4240, start: 987654, resident_pages: 10, cpu_ticks: 3 }));
        assert_eq!(Stat::parse("4242 (x) Z"), None, "too short");
        assert_eq!(Stat::parse("garbage"), None);
    }

    #[test]
    fn this_process_is_alive_and_a_later_start_time_is_another() {
        let me = Process::of(std::process::id() as libc::pid_t).unwrap();
        assert!(me.alive());
        assert!(!Process { start: me.start + 1, ..me }.alive());
        assert!(!Process { pid: 1, ..me }.alive(), "pid 1 is never a job's");
    }

    #[test]
    fn programs_are_found_on_the_path_or_refused() {
        assert_eq!(find_program("sh", Some("/nonexistent:/bin")).unwrap(), PathBuf::from("/bin/sh"));
        assert_eq!(find_program("sh", Some("/nonexistent")).unwrap_err().kind(), io::ErrorKind::NotFound);
        assert!(find_program("/bin/sh", None).is_ok());
        assert!(find_program("/etc/passwd", None).is_err(), "not executable");
        assert!(find_program("", None).is_err());
    }
}
