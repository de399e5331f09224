//! **Sessions**: a client's jobs sharing one directory on the endpoint's
//! disk, so that one job's output is the next one's input with no transfer
//! at all (the legacy-program framework's sessions).
//!
//! Rules:
//! - A session belongs to the key that made it; to any other key it does
//!   not exist (404, as one that does not), unless that key has `admin`.
//! - Its files live in `sessions/{id}/files/`; the records of its jobs
//!   (their streams and exit status) in `sessions/{id}/jobs/{job}/`.
//! - A name a client gives (a file to upload, a job's input or output) is
//!   a [`plain_name`]: one path component, never `..`, never absolute,
//!   never hidden, never starting with `-` (it goes on a program's command
//!   line, where it must not read as an option).
//! - A template program's job in a session runs in the session's files
//!   directory: each file parameter names a file there ([`Names`]): the
//!   session file the client named for it, else the parameter's own name.
//!   An input given by value or by URL is written there under that name,
//!   replacing what was there.
//! - Everything under the session counts against its quota (`disk`) and
//!   against its owner's share of the endpoint's quota: claimed before an
//!   upload or an input is written, measured while its jobs run. A job that
//!   fills the session's quota fails, as one that fills its key's share.
//! - A session nobody used for `idle` seconds (no request for it, no job
//!   of it running) is removed, with its files and its jobs.
//! - Files are read and listed never through a symlink a job may have put
//!   there (`safe_file`): a job in a session cannot make the endpoint read
//!   or serve anything outside it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::{json, Value};

use crate::jobs::disk::Disk;
use crate::jobs::job::now;
use crate::jobs::safe_file::bytes_under;
use crate::keys::{Key, KeyId};
use crate::wire::url;

/// Where a session's files are, under its directory.
pub const FILES: &str = "files";
/// Where its jobs' records are, under its directory.
pub const JOBS: &str = "jobs";

/// Whether a client may call a session file `name` (see the rules above).
pub fn plain_name(name: &str) -> Result<(), String> {
    let ok_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '+' | '=' | ',' | '@');
    if name.is_empty() || name.len() > 255 {
        return Err(format!("a session file's name is 1 to 255 characters, not {}", name.len()));
    }
    if name.starts_with('.') || name.starts_with('-') || !name.chars().all(ok_char) {
        return Err(format!(
            "{name:?} is not a session file's name: one name of letters, digits and . _ - + = , @, not starting with . or -"
        ));
    }
    Ok(())
}

/// The file each file parameter of a session job names in the session:
/// parameter name -> file name (a parameter not given one names itself).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Names(pub BTreeMap<String, String>);

impl Names {
    /// The file parameter `param` names.
    pub fn of<'a>(&'a self, param: &'a str) -> &'a str {
        self.0.get(param).map_or(param, String::as_str)
    }
}

/// What a session may be given, at most, and by default.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    /// The largest quota a session may have (also its default).
    pub disk: u64,
    /// The longest it may stay idle (also its default).
    pub idle: Duration,
    /// How many sessions one key keeps at once.
    pub per_key: usize,
}

impl Bounds {
    /// The quota and idle time a client asked for (None: the most), or why they cannot be given.
    pub fn grant(&self, disk: Option<u64>, idle: Option<f64>) -> Result<(u64, Duration), String> {
        let disk = match disk {
            None => self.disk,
            Some(d) if d > 0 && d <= self.disk => d,
            Some(d) => return Err(format!("a session's disk is 1 to {} bytes here (mpiws serve --max-session-disk), not {d}", self.disk)),
        };
        let max_idle = self.idle.as_secs_f64();
        let idle = match idle {
            None => self.idle,
            Some(s) if s.is_finite() && s > 0.0 && s <= max_idle => Duration::from_secs_f64(s),
            Some(s) => {
                return Err(format!(
                    "a session's idle time is above 0 and at most {max_idle} seconds here (mpiws serve --session-idle), not {s}"
                ))
            }
        };
        Ok((disk, idle))
    }
}

pub struct Session {
    pub id: String,
    pub owner: KeyId,
    /// `sessions/{id}` in the work directory.
    pub root: PathBuf,
    /// Its quota, in bytes.
    pub disk: u64,
    /// Removed after this long unused.
    pub idle: Duration,
    pub created: f64,
    last_used: Mutex<f64>,
    /// Its bytes counted against the endpoint's quota (under its owner).
    claimed: AtomicU64,
    quota: Arc<Disk>,
    /// Its jobs, by id, and whether each has ended (kept current by the jobs).
    jobs: Mutex<BTreeMap<String, bool>>,
}

impl Session {
    /// Its URL under the endpoint's `base`.
    pub fn url(&self, base: &str) -> String {
        url::join(base, &format!("/sessions/{}", self.id))
    }

    /// The URL of its file `name` (a path relative to its files, `/`-separated).
    pub fn file_url(&self, base: &str, name: &str) -> String {
        let path: Vec<String> = name.split('/').map(url::percent_encode).collect();
        format!("{}/files/{}", self.url(base), path.join("/"))
    }

    pub fn new(id: String, owner: KeyId, root: PathBuf, disk: u64, idle: Duration, quota: Arc<Disk>) -> Arc<Session> {
        let t = now();
        Arc::new(Session {
            id,
            owner,
            root,
            disk,
            idle,
            created: t,
            last_used: Mutex::new(t),
            claimed: AtomicU64::new(0),
            quota,
            jobs: Mutex::new(BTreeMap::new()),
        })
    }

    /// Where its files are.
    pub fn files(&self) -> PathBuf {
        self.root.join(FILES)
    }

    /// Where job `id`'s record is.
    pub fn job_dir(&self, id: &str) -> PathBuf {
        self.root.join(JOBS).join(id)
    }

    /// Someone used it now.
    pub fn touch(&self) {
        *self.last_used.lock() = now();
    }

    /// Its idle clock starts again at `t` (a restart: when the endpoint was last alive).
    pub fn used_at(&self, t: f64) {
        *self.last_used.lock() = t;
    }

    pub fn last_used(&self) -> f64 {
        *self.last_used.lock()
    }

    /// Whether it has been idle past its time at `t`: unused, and no job of it running.
    pub fn expired(&self, t: f64) -> bool {
        let running = self.jobs.lock().values().any(|ended| !ended);
        !running && t - self.last_used() >= self.idle.as_secs_f64()
    }

    /// Job `id` is in it (`ended`: and has ended).
    pub fn job(&self, id: &str, ended: bool) {
        self.jobs.lock().insert(id.to_string(), ended);
        if ended {
            self.touch(); // its idle time counts from its last job's end
        }
    }

    pub fn forget_job(&self, id: &str) {
        self.jobs.lock().remove(id);
    }

    pub fn job_ids(&self) -> Vec<String> {
        self.jobs.lock().keys().cloned().collect()
    }

    /// Bytes counted against it.
    pub fn used(&self) -> u64 {
        self.claimed.load(Ordering::SeqCst)
    }

    /// Count `n` more bytes about to be written, if they fit its quota and its owner's share.
    pub fn claim(&self, n: u64) -> Result<(), String> {
        let had = self.claimed.load(Ordering::SeqCst);
        if had.checked_add(n).is_none_or(|t| t > self.disk) {
            return Err(self.full(had, n));
        }
        self.quota.claim(Some(self.owner), n)?;
        self.claimed.fetch_add(n, Ordering::SeqCst);
        Ok(())
    }

    /// Whether `n` more bytes would fit now (nothing is counted).
    pub fn fits(&self, n: u64) -> Result<(), String> {
        let had = self.claimed.load(Ordering::SeqCst);
        if had.checked_add(n).is_none_or(|t| t > self.disk) {
            return Err(self.full(had, n));
        }
        self.quota.fits(Some(self.owner), n)
    }

    /// Give back `n` bytes claimed for what was not kept.
    pub fn release(&self, n: u64) {
        let had = self.claimed.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |c| Some(c.saturating_sub(n))).expect("always updated");
        self.quota.release(Some(self.owner), n.min(had));
    }

    /// Measure its directory and count what changed (jobs wrote, files
    /// were replaced or removed); an error if it is now over its quota or
    /// its owner's share (counted all the same: what comes next is refused).
    pub fn account(&self) -> Result<(), String> {
        let measured = bytes_under(&self.root);
        let before = self.claimed.load(Ordering::SeqCst);
        let shared = self.quota.recount(Some(self.owner), &self.claimed, measured);
        if measured > self.disk {
            return Err(self.full(before, measured.saturating_sub(before)));
        }
        shared
    }

    /// Its bytes are gone (removed): give them back.
    pub fn release_all(&self) {
        self.quota.release(Some(self.owner), self.claimed.swap(0, Ordering::SeqCst));
    }

    fn full(&self, had: u64, n: u64) -> String {
        format!(
            "session {}'s disk is full ({had} of {} bytes used, {n} more asked for): remove its files \
             (DELETE /sessions/{}/files/NAME), or make it with a larger disk (mpiws serve --max-session-disk bounds it)",
            self.id, self.disk, self.id
        )
    }

    /// What `GET /sessions/{id}` answers (its URL on the endpoint at `base`).
    pub fn describe(&self, url: &str) -> Value {
        let last = self.last_used();
        json!({
            "id": self.id, "url": url, "disk": self.disk, "used": self.used(), "idle": self.idle.as_secs_f64(),
            "created": self.created, "last_used": last, "expires": last + self.idle.as_secs_f64(),
            "jobs": self.job_ids(),
        })
    }
}

/// A key may act on a session if it made it, or has `admin`.
pub fn may_act(caller: &Key, session: &Session) -> bool {
    super::may_act(caller, session.owner)
}

/// The regular files under `dir` (links and what is not a file left out,
/// nothing followed), as paths relative to it with their sizes, sorted;
/// at most `max` of them.
pub fn listing(dir: &Path, max: usize) -> Vec<(String, u64)> {
    let mut found = Vec::new();
    let mut todo = vec![(dir.to_path_buf(), String::new())];
    while let Some((d, prefix)) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for entry in entries.flatten() {
            let Some(name) = entry.file_name().to_str().map(str::to_string) else { continue };
            let rel = if prefix.is_empty() { name } else { format!("{prefix}/{name}") };
            match entry.metadata() {
                Ok(m) if m.is_dir() => todo.push((entry.path(), rel)),
                Ok(m) if m.is_file() && !rel.rsplit('/').next().is_some_and(|n| n.starts_with('.')) => found.push((rel, m.len())),
                _ => {}
            }
            if found.len() >= max {
                found.sort();
                return found;
            }
        }
    }
    found.sort();
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_a_client_gives_are_one_plain_component_that_is_never_an_option() {
        for ok in ["a", "data.bin", "step-1.out", "x_y+z=1,2@3", "A9"] {
            assert!(plain_name(ok).is_ok(), "{ok}");
        }
        for bad in ["", ".", "..", ".hidden", "-rf", "--output=x", "a/b", "/etc/passwd", "../x", "a b", "a\0b", "é", &"x".repeat(256)] {
            assert!(plain_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_parameter_names_its_own_file_unless_given_one() {
        let names = Names([("in".to_string(), "data.bin".to_string())].into());
        assert_eq!((names.of("in"), names.of("out")), ("data.bin", "out"));
    }

    #[test]
    fn a_client_gets_what_it_asks_within_the_bounds_and_the_most_by_default() {
        let b = Bounds { disk: 100, idle: Duration::from_secs(60), per_key: 4 };
        assert_eq!(b.grant(None, None).unwrap(), (100, Duration::from_secs(60)));
        assert_eq!(b.grant(Some(10), Some(1.5)).unwrap(), (10, Duration::from_millis(1500)));
        assert!(b.grant(Some(101), None).unwrap_err().contains("--max-session-disk"));
        assert!(b.grant(Some(0), None).is_err());
        for idle in [0.0, -1.0, 61.0, f64::NAN, f64::INFINITY] {
            assert!(b.grant(None, Some(idle)).unwrap_err().contains("--session-idle"), "{idle}");
        }
    }

    fn session(disk: u64, quota: &Arc<Disk>) -> Arc<Session> {
        let root = std::env::temp_dir().join(format!("mpiws-session-{}", crate::jobs::new_id()));
        std::fs::create_dir_all(root.join(FILES)).unwrap();
        Session::new("s".into(), KeyId(1), root, disk, Duration::from_secs(60), quota.clone())
    }

    #[test]
    fn its_bytes_count_against_its_quota_and_its_owners_share() {
        let quota = Arc::new(Disk::new(1000, 150));
        let s = session(100, &quota);
        s.claim(60).unwrap();
        assert!(s.claim(41).unwrap_err().contains("session s's disk is full"));
        s.claim(40).unwrap();
        assert_eq!((s.used(), quota.used(Some(KeyId(1)))), (100, (100, 100)));
        s.release(30);
        assert_eq!((s.used(), quota.used(Some(KeyId(1))).1), (70, 70));
        // What is on disk is what counts: measured, the claims are corrected.
        std::fs::write(s.files().join("a"), [0u8; 20]).unwrap();
        s.account().unwrap();
        assert_eq!((s.used(), quota.used(Some(KeyId(1))).1), (20, 20));
        std::fs::write(s.files().join("b"), [0u8; 120]).unwrap();
        assert!(s.account().unwrap_err().contains("disk is full"), "over its quota");
        assert_eq!(quota.used(Some(KeyId(1))).1, 140, "counted all the same");
        s.release_all();
        assert_eq!(quota.used(Some(KeyId(1))), (0, 0));
        std::fs::remove_dir_all(&s.root).unwrap();
    }

    #[test]
    fn it_expires_when_unused_for_its_idle_time_and_not_while_a_job_runs() {
        let quota = Arc::new(Disk::new(1000, 1000));
        let s = session(100, &quota);
        let t = s.last_used();
        assert!(!s.expired(t + 59.0) && s.expired(t + 60.0));
        s.job("j", false);
        assert!(!s.expired(t + 3600.0), "a job of it runs");
        s.job("j", true);
        assert!(!s.expired(s.last_used() + 59.0) && s.expired(s.last_used() + 60.0));
        std::fs::remove_dir_all(&s.root).unwrap();
    }

    #[test]
    fn a_listing_shows_regular_files_only_and_follows_no_link() {
        let quota = Arc::new(Disk::new(1000, 1000));
        let s = session(100, &quota);
        let f = s.files();
        std::fs::write(f.join("a"), b"abc").unwrap();
        std::fs::create_dir(f.join("d")).unwrap();
        std::fs::write(f.join("d").join("b"), b"x").unwrap();
        std::fs::write(f.join(".part-1"), b"half").unwrap();
        std::os::unix::fs::symlink("/etc", f.join("etc")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", f.join("passwd")).unwrap();
        assert_eq!(listing(&f, 100), vec![("a".to_string(), 3), ("d/b".to_string(), 1)]);
        assert_eq!(listing(&f, 1).len(), 1, "bounded");
        std::fs::remove_dir_all(&s.root).unwrap();
    }
}
