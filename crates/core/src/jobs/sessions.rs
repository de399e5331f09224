//! The register's sessions (see [`session`] for their rules): made for a
//! key within its share, found only by their owner (or `admin`), removed
//! whole (their jobs ended and removed, their files and bytes given back),
//! by their owner or once idle past their time. Kept in the ledger in a
//! given work directory, as jobs are (`restore` reads them back).
//!
//! [`session`]: super::session

use std::sync::Arc;
use std::time::Duration;

use crate::error::{Error, ErrorClass, Result};
use crate::jobs::job::now;
use crate::jobs::ledger::SessionRow;
use crate::jobs::safe_file::make_private_dir;
use crate::jobs::session::{self, Session, FILES, JOBS};
use crate::jobs::{new_id, Jobs, Refusal, RETRY_FULL};
use crate::keys::{Key, KeyId};

impl Jobs {
    /// A new session of `caller`'s with quota `disk` and idle time `idle`
    /// (as `Bounds::grant` gave them), if its key has room for one more.
    pub fn new_session(&self, caller: &Key, disk: u64, idle: Duration) -> std::result::Result<Result<Arc<Session>>, Refusal> {
        let per_key = self.session_bounds.per_key;
        if self.sessions.lock().values().filter(|s| s.owner == caller.id).count() >= per_key {
            let message = format!(
                "{} keeps its maximum of {per_key} sessions here (mpiws serve --max-sessions-per-key): delete one (DELETE /sessions/{{id}}), \
                 or wait for one to expire",
                caller.id
            );
            return Err(Refusal::Full { per_key: true, message, retry_after: RETRY_FULL });
        }
        Ok(self.make_session(caller.id, disk, idle))
    }

    fn make_session(&self, owner: KeyId, disk: u64, idle: Duration) -> Result<Arc<Session>> {
        let id = new_id();
        let root = self.workdir.path()?.join("sessions").join(&id);
        for dir in [root.clone(), root.join(FILES), root.join(JOBS)] {
            make_private_dir(&dir)
                .map_err(|e| Error::new(ErrorClass::Other, format!("cannot make the session's directory {}: {e}", dir.display())))?;
        }
        let session = Session::new(id, owner, root, disk, idle, self.disk.clone());
        if let Some(k) = self.kept(owner) {
            k.ledger.put_session(&SessionRow {
                id: session.id.clone(),
                owner: k.owner,
                disk,
                idle: idle.as_secs_f64(),
                created: session.created,
            });
        }
        self.sessions.lock().insert(session.id.clone(), session.clone());
        self.expiry_sooner.notify_one();
        Ok(session)
    }

    /// Session `id` if `caller` may act on it (it made it, or has
    /// `admin`); else refused as one that does not exist. Found, it is used.
    pub fn own_session(&self, id: &str, caller: &Key) -> std::result::Result<Arc<Session>, Refusal> {
        let found = self.sessions.lock().get(id).filter(|s| session::may_act(caller, s)).cloned();
        let session = found.ok_or_else(|| Refusal::NotFound(format!("no session {id} here")))?;
        session.touch();
        Ok(session)
    }

    /// The sessions `caller` may see (its own; every one to `admin`), oldest first.
    pub fn sessions_of(&self, caller: &Key) -> Vec<Arc<Session>> {
        let mut mine: Vec<Arc<Session>> = self.sessions.lock().values().filter(|s| session::may_act(caller, s)).cloned().collect();
        mine.sort_by(|a, b| a.created.total_cmp(&b.created).then_with(|| a.id.cmp(&b.id)));
        mine
    }

    /// Remove session `id` whole: its jobs ended and removed, its files
    /// deleted, its bytes given back. False if there was no such session.
    pub async fn remove_session(&self, id: &str) -> bool {
        let Some(session) = self.sessions.lock().remove(id) else { return false };
        for job in session.job_ids() {
            self.remove_job(&job).await;
        }
        if let Some(ledger) = &self.ledger {
            ledger.remove_session(id);
        }
        let _ = tokio::fs::remove_dir_all(&session.root).await; // never follows symlinks inside
        session.release_all();
        true
    }

    /// How many sessions are kept.
    pub fn session_count(&self) -> usize {
        self.sessions.lock().len()
    }

    /// Sessions idle past their time.
    pub fn expired_sessions(&self) -> Vec<String> {
        let t = now();
        self.sessions.lock().values().filter(|s| s.expired(t)).map(|s| s.id.clone()).collect()
    }

    /// The shortest idle time of a session, if there is one (how often expiry must look).
    pub fn shortest_idle(&self) -> Option<Duration> {
        self.sessions.lock().values().map(|s| s.idle).min()
    }

    /// The session a restart reads back (`restore`), its idle clock started again at `seen`.
    pub(super) fn restore_session(&self, row: &SessionRow, owner: KeyId, seen: f64) -> Option<Arc<Session>> {
        if !super::is_id(&row.id) {
            return None; // its directory is named by it
        }
        let root = self.workdir.existing()?.join("sessions").join(&row.id);
        let meta = std::fs::symlink_metadata(root.join(FILES)).ok()?;
        if !meta.is_dir() {
            return None;
        }
        let session = Session::new(row.id.clone(), owner, root, row.disk, Duration::from_secs_f64(row.idle.max(0.0)), self.disk.clone());
        session.used_at(seen);
        let _ = session.account(); // what is there counts again, against its owner
        self.sessions.lock().insert(session.id.clone(), session.clone());
        Some(session)
    }

    /// Session `id`, whoever owns it (a restart's jobs find theirs).
    pub(super) fn session(&self, id: &str) -> Option<Arc<Session>> {
        self.sessions.lock().get(id).cloned()
    }
}
