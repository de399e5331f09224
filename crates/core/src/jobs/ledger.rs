//! The durable record of an endpoint's jobs and uploads: an SQLite
//! database (`jobs.sqlite`, private like the rest) in a work directory
//! given with `--workdir`, so that an endpoint started again on it, after
//! a crash or for an upgrade, still answers every job it promised to keep.
//!
//! Rules:
//! - A job's row is written when it is admitted and again at each change
//!   of its state (with its process while it runs, its outputs once it has
//!   ended); removing a job removes its row. Each write is one statement,
//!   so a crash leaves the old row or the new, never half of one.
//! - A job's program is kept with it (its template line or CWL document):
//!   its answers do not depend on what is deployed after a restart.
//! - Owners are key fingerprints (`Key::fingerprint`), not positions in
//!   the keys file, which may change between runs.
//! - A heartbeat says when the endpoint was last alive: what a job that
//!   was running then, and is gone without a word, is reported `lost` at.
//! - A write that fails (disk full) is reported on stderr and the job goes
//!   on: the running endpoint stays right; only a later restart would
//!   know less.
//!
//! What a restart does with the rows is `restore`'s; this file is storage
//! only.

use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use parking_lot::Mutex;
use rusqlite::{params, Connection, OptionalExtension};

use crate::error::{err, Error, ErrorClass, Result};

/// The database's file in the work directory.
pub const FILE: &str = "jobs.sqlite";

/// The schema; `user_version` says which one a file holds.
const SCHEMA: &str = "
    CREATE TABLE IF NOT EXISTS jobs (
        id TEXT PRIMARY KEY,
        owner TEXT NOT NULL,
        program TEXT NOT NULL,
        kind TEXT NOT NULL,
        source TEXT NOT NULL,
        state TEXT NOT NULL,
        exit_code INTEGER,
        error TEXT,
        started REAL NOT NULL,
        ended REAL,
        pid INTEGER,
        pid_start INTEGER,
        collect TEXT,
        outputs TEXT,
        session TEXT,
        names TEXT
    );
    CREATE TABLE IF NOT EXISTS uploads (id TEXT PRIMARY KEY, owner TEXT NOT NULL);
    CREATE TABLE IF NOT EXISTS sessions (
        id TEXT PRIMARY KEY,
        owner TEXT NOT NULL,
        disk INTEGER NOT NULL,
        idle REAL NOT NULL,
        created REAL NOT NULL
    );
    CREATE TABLE IF NOT EXISTS heartbeat (one INTEGER PRIMARY KEY CHECK (one = 1), at REAL NOT NULL);
";
const VERSION: i64 = 2;

/// What makes a file of an earlier schema the current one (schema 1 had no sessions).
const UPGRADES: &[(i64, &str)] = &[(1, "ALTER TABLE jobs ADD COLUMN session TEXT; ALTER TABLE jobs ADD COLUMN names TEXT;")];

/// One job as the ledger keeps it.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub id: String,
    /// The owner's key fingerprint.
    pub owner: String,
    pub program: String,
    /// `template` or `cwl`: how `source` is read.
    pub kind: String,
    pub source: String,
    /// The job's phase, as its status names it.
    pub state: String,
    pub exit_code: Option<i32>,
    pub error: Option<String>,
    pub started: f64,
    pub ended: Option<f64>,
    /// While it runs: its process (the leader of its group) and that
    /// process's start time, which tells it from a later one given its pid.
    pub pid: Option<i32>,
    pub pid_start: Option<u64>,
    /// JSON: what collecting a CWL job's outputs needs, once it has run.
    pub collect: Option<String>,
    /// JSON: a CWL job's output object.
    pub outputs: Option<String>,
    /// The session it runs in, if it does, and (JSON) the session files its parameters name.
    pub session: Option<String>,
    pub names: Option<String>,
}

/// One session as the ledger keeps it.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionRow {
    pub id: String,
    /// The owner's key fingerprint.
    pub owner: String,
    pub disk: u64,
    /// Seconds.
    pub idle: f64,
    pub created: f64,
}

pub struct Ledger {
    db: Mutex<Connection>,
    path: PathBuf,
}

impl Ledger {
    /// Open (or make) the ledger of work directory `dir`.
    pub fn open(dir: &Path) -> Result<Ledger> {
        let path = dir.join(FILE);
        let fail = |e: rusqlite::Error| Error::new(ErrorClass::Other, format!("jobs ledger {}: {e}", path.display()));
        // Made private before SQLite opens it (it would use the umask); its
        // journal files take the database's mode.
        if let Err(e) =
            std::fs::OpenOptions::new().create(true).append(true).mode(0o600).custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC).open(&path)
        {
            return err(ErrorClass::Other, format!("jobs ledger {}: {e}", path.display()));
        }
        let db = Connection::open(&path).map_err(fail)?;
        // WAL: a commit is one append; a killed process loses nothing it
        // committed (NORMAL syncs at checkpoints: only a power cut could
        // take the last commits).
        db.execute_batch("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA busy_timeout = 5000;").map_err(fail)?;
        let version: i64 = db.query_row("PRAGMA user_version", [], |r| r.get(0)).map_err(fail)?;
        if version > VERSION {
            return err(
                ErrorClass::Arg,
                format!("jobs ledger {}: written by a newer mpiws (schema {version}; this one knows {VERSION})", path.display()),
            );
        }
        for (from, upgrade) in UPGRADES {
            if version == *from {
                db.execute_batch(upgrade).map_err(fail)?;
            }
        }
        db.execute_batch(SCHEMA).map_err(fail)?;
        db.execute_batch(&format!("PRAGMA user_version = {VERSION}")).map_err(fail)?;
        Ok(Ledger { db: Mutex::new(db), path })
    }

    /// Write `row`, replacing the job's earlier one.
    pub fn put_job(&self, row: &Row) {
        self.write(
            "INSERT OR REPLACE INTO jobs VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)",
            params![
                row.id,
                row.owner,
                row.program,
                row.kind,
                row.source,
                row.state,
                row.exit_code,
                row.error,
                row.started,
                row.ended,
                row.pid,
                row.pid_start.map(|t| t as i64),
                row.collect,
                row.outputs,
                row.session,
                row.names
            ],
        );
    }

    pub fn remove_job(&self, id: &str) {
        self.write("DELETE FROM jobs WHERE id = ?1", params![id]);
    }

    pub fn put_session(&self, s: &SessionRow) {
        self.write(
            "INSERT OR REPLACE INTO sessions VALUES (?1, ?2, ?3, ?4, ?5)",
            params![s.id, s.owner, i64::try_from(s.disk).unwrap_or(i64::MAX), s.idle, s.created],
        );
    }

    pub fn remove_session(&self, id: &str) {
        self.write("DELETE FROM sessions WHERE id = ?1", params![id]);
    }

    /// Every session row.
    pub fn sessions(&self) -> Result<Vec<SessionRow>> {
        let db = self.db.lock();
        db.prepare("SELECT id, owner, disk, idle, created FROM sessions ORDER BY created, id")
            .and_then(|mut q| {
                q.query_map([], |r| {
                    Ok(SessionRow {
                        id: r.get(0)?,
                        owner: r.get(1)?,
                        disk: r.get::<_, i64>(2)?.max(0) as u64,
                        idle: r.get(3)?,
                        created: r.get(4)?,
                    })
                })?
                .collect()
            })
            .or_else(|e| err(ErrorClass::Other, format!("jobs ledger {}: {e}", self.path.display())))
    }

    pub fn put_upload(&self, id: &str, owner: &str) {
        self.write("INSERT OR REPLACE INTO uploads VALUES (?1, ?2)", params![id, owner]);
    }

    pub fn remove_upload(&self, id: &str) {
        self.write("DELETE FROM uploads WHERE id = ?1", params![id]);
    }

    /// Say the endpoint is alive at `now` (seconds since the epoch).
    pub fn beat(&self, now: f64) {
        self.write("INSERT OR REPLACE INTO heartbeat VALUES (1, ?1)", params![now]);
    }

    /// When the endpoint last said it was alive.
    pub fn last_beat(&self) -> Option<f64> {
        self.db.lock().query_row("SELECT at FROM heartbeat", [], |r| r.get(0)).optional().ok().flatten()
    }

    /// Every job row, oldest first.
    pub fn jobs(&self) -> Result<Vec<Row>> {
        let db = self.db.lock();
        let rows = db
            .prepare("SELECT * FROM jobs ORDER BY started, id")
            .and_then(|mut q| {
                q.query_map([], |r| {
                    Ok(Row {
                        id: r.get(0)?,
                        owner: r.get(1)?,
                        program: r.get(2)?,
                        kind: r.get(3)?,
                        source: r.get(4)?,
                        state: r.get(5)?,
                        exit_code: r.get(6)?,
                        error: r.get(7)?,
                        started: r.get(8)?,
                        ended: r.get(9)?,
                        pid: r.get(10)?,
                        pid_start: r.get::<_, Option<i64>>(11)?.map(|t| t as u64),
                        collect: r.get(12)?,
                        outputs: r.get(13)?,
                        session: r.get(14)?,
                        names: r.get(15)?,
                    })
                })?
                .collect::<rusqlite::Result<Vec<Row>>>()
            })
            .or_else(|e| err(ErrorClass::Other, format!("jobs ledger {}: {e}", self.path.display())))?;
        Ok(rows)
    }

    /// Every upload and its owner's fingerprint.
    pub fn uploads(&self) -> Result<Vec<(String, String)>> {
        let db = self.db.lock();
        db.prepare("SELECT id, owner FROM uploads")
            .and_then(|mut q| q.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?.collect())
            .or_else(|e| err(ErrorClass::Other, format!("jobs ledger {}: {e}", self.path.display())))
    }

    fn write(&self, sql: &str, values: impl rusqlite::Params) {
        if let Err(e) = self.db.lock().execute(sql, values) {
            eprintln!("mpiws: jobs ledger {}: cannot write: {e}", self.path.display());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn row(id: &str, state: &str) -> Row {
        Row {
            id: id.into(),
            owner: "f".repeat(32),
            program: "add".into(),
            kind: "template".into(),
            source: "add.sh [in:val:x:int]".into(),
            state: state.into(),
            exit_code: None,
            error: None,
            started: 1.5,
            ended: None,
            pid: Some(4242),
            pid_start: Some(u64::from(u32::MAX) + 7),
            collect: None,
            outputs: Some("{\"n\": 1}".into()),
            session: None,
            names: None,
        }
    }

    #[test]
    fn what_is_written_is_read_by_the_next_run() {
        let dir = std::env::temp_dir().join(format!("mpiws-ledger-{}", crate::jobs::new_id()));
        std::fs::create_dir(&dir).unwrap();
        {
            let l = Ledger::open(&dir).unwrap();
            l.put_job(&row("a", "running"));
            l.put_job(&row("b", "running"));
            l.put_job(&Row { exit_code: Some(3), ended: Some(2.5), pid: None, ..row("b", "failed") }); // replaces
            l.put_job(&row("c", "done"));
            l.remove_job("c");
            l.put_upload("u1", "owner1");
            l.put_upload("u2", "owner2");
            l.remove_upload("u2");
            l.beat(99.0);
        }
        let l = Ledger::open(&dir).unwrap();
        let rows = l.jobs().unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0], row("a", "running"));
        assert_eq!((rows[1].state.as_str(), rows[1].exit_code, rows[1].pid), ("failed", Some(3), None));
        assert_eq!(l.uploads().unwrap(), vec![("u1".to_string(), "owner1".to_string())]);
        assert_eq!(l.last_beat(), Some(99.0));
        let mode = std::fs::metadata(dir.join(FILE)).unwrap().permissions().mode();
        assert_eq!(mode & 0o077, 0, "private: {mode:o}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn sessions_and_session_jobs_are_kept_and_a_schema_1_file_is_upgraded() {
        let dir = std::env::temp_dir().join(format!("mpiws-ledger-{}", crate::jobs::new_id()));
        std::fs::create_dir(&dir).unwrap();
        // A file as the first schema wrote it, with a job in it.
        let v1 = Connection::open(dir.join(FILE)).unwrap();
        v1.execute_batch(
            "CREATE TABLE jobs (id TEXT PRIMARY KEY, owner TEXT NOT NULL, program TEXT NOT NULL, kind TEXT NOT NULL, \
             source TEXT NOT NULL, state TEXT NOT NULL, exit_code INTEGER, error TEXT, started REAL NOT NULL, ended REAL, \
             pid INTEGER, pid_start INTEGER, collect TEXT, outputs TEXT); \
             INSERT INTO jobs VALUES ('old', 'f', 'add', 'template', 'add.sh', 'done', 0, NULL, 1.0, 2.0, NULL, NULL, NULL, NULL); \
             PRAGMA user_version = 1;",
        )
        .unwrap();
        drop(v1);
        {
            let l = Ledger::open(&dir).unwrap();
            assert_eq!(l.jobs().unwrap()[0].session, None, "the old job is read");
            let s = SessionRow { id: "s1".into(), owner: "o".into(), disk: 1 << 40, idle: 60.0, created: 3.0 };
            l.put_session(&s);
            l.put_session(&SessionRow { id: "s2".into(), ..s.clone() });
            l.remove_session("s2");
            l.put_job(&Row { session: Some("s1".into()), names: Some("{\"in\":\"a\"}".into()), ..row("j", "running") });
        }
        let l = Ledger::open(&dir).unwrap();
        assert_eq!(l.sessions().unwrap(), vec![SessionRow { id: "s1".into(), owner: "o".into(), disk: 1 << 40, idle: 60.0, created: 3.0 }]);
        let j = l.jobs().unwrap().into_iter().find(|r| r.id == "j").unwrap();
        assert_eq!((j.session.as_deref(), j.names.as_deref()), (Some("s1"), Some("{\"in\":\"a\"}")));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_newer_schema_is_refused_not_overwritten() {
        let dir = std::env::temp_dir().join(format!("mpiws-ledger-{}", crate::jobs::new_id()));
        std::fs::create_dir(&dir).unwrap();
        drop(Ledger::open(&dir).unwrap());
        Connection::open(dir.join(FILE)).unwrap().execute_batch("PRAGMA user_version = 99").unwrap();
        let e = Ledger::open(&dir).err().unwrap();
        assert!(e.message.contains("newer mpiws"), "{}", e.message);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
