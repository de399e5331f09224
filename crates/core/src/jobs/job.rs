//! One job: stage its inputs into its own directory, run the program there
//! (in a process group of its own) with the command line its template or
//! CWL tool gives, record how it ended (and a CWL job's output object). A
//! kill ends it at any point (while staging too). What it writes counts
//! against the disk quota, measured while it runs: a job that fills the
//! quota is ended and fails.
//!
//! In a given work directory each change of state is written to the
//! ledger, and the program runs under a small shell wrapper that writes its
//! exit status to `.exit` in the job's directory: so an endpoint started
//! again after a crash can adopt a job that still runs, or learn how one
//! that ended meanwhile ended (`restore`). A program ended by signal N
//! reports exit code 128+N, as a shell does.

use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use tokio::sync::{watch, Notify};

use crate::jobs::cwl;
use crate::jobs::disk::Disk;
use crate::jobs::fetch::Fetcher;
use crate::jobs::forks::{Exit as Told, ForkServer};
use crate::jobs::ledger::{Ledger, Row};
use crate::jobs::process::Process as ChildProcess;
use crate::jobs::process_group::{self, Process};
use crate::jobs::safe_file::{bytes_under, create_new, inside, make_private_dir, open_beneath};
use crate::jobs::session::{Names, Session};
use crate::jobs::stage::{stage, Input};
use crate::jobs::template::{Placement, Word};
use crate::jobs::{Program, Runs};
use crate::keys::KeyId;
use crate::wire::url;

/// How often a running job's disk use is measured.
const DISK_CHECK: Duration = Duration::from_secs(1);

/// A killed job ends within its group's grace; this only bounds a stuck
/// file system.
const KILL_WAIT: Duration = Duration::from_secs(10);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Staging,
    Running,
    Done,
    Failed,
    Killed,
    /// It was staging or running when the endpoint stopped without ending
    /// it, and left no word of how it ended (see `restore`).
    Lost,
}

impl Phase {
    const ALL: [Phase; 6] = [Phase::Staging, Phase::Running, Phase::Done, Phase::Failed, Phase::Killed, Phase::Lost];

    pub fn ended(self) -> bool {
        matches!(self, Phase::Done | Phase::Failed | Phase::Killed | Phase::Lost)
    }

    /// Its name in a status (and in the ledger).
    pub fn name(self) -> &'static str {
        match self {
            Phase::Staging => "staging",
            Phase::Running => "running",
            Phase::Done => "done",
            Phase::Failed => "failed",
            Phase::Killed => "killed",
            Phase::Lost => "lost",
        }
    }

    pub fn parse(name: &str) -> Option<Phase> {
        Phase::ALL.into_iter().find(|p| p.name() == name)
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct State {
    pub state: Phase,
    pub exit_code: Option<i32>,
    pub error: Option<String>,
    /// Seconds since the epoch.
    pub started: f64,
    /// When it ended; a lost job's: when it was last seen.
    pub ended: Option<f64>,
}

pub struct Job {
    pub id: String,
    pub program: Arc<Program>,
    /// The key that spawned it: only that key (or one with `admin`) may
    /// watch it, read its results, kill it or see it listed.
    pub owner: KeyId,
    /// Its own directory: its record (streams, exit status) and, unless
    /// it runs in a session, its files.
    pub dir: PathBuf,
    /// The session it runs in (its files are the session's), and the
    /// session files its parameters name.
    pub session: Option<Arc<Session>>,
    pub names: Names,
    state: watch::Sender<State>,
    kill: Notify,
    killed: AtomicBool,
    disk: Arc<Disk>,
    /// The bytes of the job's directory counted against the quota.
    claimed: AtomicU64,
    /// What collecting a CWL job's outputs needs, known once its command
    /// line is made (kept, so that a job adopted after a restart is
    /// collected as it would have been).
    collecting: OnceLock<Collecting>,
    /// A CWL job's output object, once it has ended well.
    pub outputs: OnceLock<Map<String, Value>>,
    /// How the client that started it asked for its results, as the face
    /// it came through keeps it (opaque here; not kept across a restart).
    pub results_asked: OnceLock<Value>,
    /// Its process while it runs, for the ledger.
    process: Mutex<Option<Process>>,
    /// Where its changes of state are written, and its owner's fingerprint
    /// there: set in a given work directory.
    kept: Option<Kept>,
}

/// Where a job lives: its directory, the quota its bytes count against,
/// where it is kept across restarts, and the session it runs in (with the
/// files its parameters name there).
pub struct Home {
    pub dir: PathBuf,
    pub disk: Arc<Disk>,
    pub kept: Option<Kept>,
    pub session: Option<(Arc<Session>, Names)>,
}

/// Where a job is kept across restarts, and as whose.
#[derive(Clone)]
pub struct Kept {
    pub ledger: Arc<Ledger>,
    pub owner: String,
}

/// What collecting a CWL job's outputs needs besides its tool.
#[derive(Clone, Serialize, Deserialize)]
struct Collecting {
    /// The context its expressions were evaluated in (`inputs`, `runtime`).
    ctx: Value,
    /// The names its captured stdout and stderr have in `out/`.
    stdout: Option<String>,
    stderr: Option<String>,
    /// The job's URL, under which its output files are located.
    url: String,
}

/// The file the wrapper writes a job's exit status to, in its directory.
pub const EXIT_FILE: &str = ".exit";

/// Runs the program (`$2...`), then writes its exit status to `$1`
/// (whole: written aside, then renamed; never through a file the job put
/// there) and exits with it.
const WRAPPER: &str =
    r#"f=$1; shift; "$@"; s=$?; rm -f "$f.part"; (set -C; printf '%s\n' "$s" > "$f.part") && mv -f "$f.part" "$f"; exit "$s""#;

/// What a job's command line is made from, besides its files.
pub enum Plan {
    /// A template's `val` inputs: name and command-line text.
    Template(Vec<(String, String)>),
    /// A CWL job object, checked (`cwl::inputs::check`).
    Cwl(Map<String, Value>),
}

pub(crate) fn now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

impl Job {
    pub fn new(id: String, program: Arc<Program>, owner: KeyId, home: Home) -> Arc<Job> {
        let state = State { state: Phase::Staging, exit_code: None, error: None, started: now(), ended: None };
        Job::with_state(id, program, owner, home, state)
    }

    fn with_state(id: String, program: Arc<Program>, owner: KeyId, home: Home, state: State) -> Arc<Job> {
        let Home { dir, disk, kept, session } = home;
        let (session, names) = session.map_or((None, Names::default()), |(s, n)| (Some(s), n));
        Arc::new(Job {
            id,
            program,
            owner,
            dir,
            session,
            names,
            state: watch::channel(state).0,
            kill: Notify::new(),
            killed: AtomicBool::new(false),
            disk,
            claimed: AtomicU64::new(0),
            collecting: OnceLock::new(),
            outputs: OnceLock::new(),
            results_asked: OnceLock::new(),
            process: Mutex::new(None),
            kept,
        })
    }

    /// The job a ledger row describes (`restore`), as it was written: its
    /// state, outputs and process; None if the row does not make sense.
    pub fn from_row(row: &Row, program: Arc<Program>, owner: KeyId, home: Home) -> Option<Arc<Job>> {
        let state = State {
            state: Phase::parse(&row.state)?,
            exit_code: row.exit_code,
            error: row.error.clone(),
            started: row.started,
            ended: row.ended,
        };
        let job = Job::with_state(row.id.clone(), program, owner, home, state);
        if let Some(c) = &row.collect {
            let _ = job.collecting.set(serde_json::from_str(c).ok()?);
        }
        if let Some(o) = &row.outputs {
            let _ = job.outputs.set(serde_json::from_str(o).ok()?);
        }
        *job.process.lock() = row.pid.zip(row.pid_start).map(|(pid, start)| Process { pid, start });
        Some(job)
    }

    /// The job as the ledger keeps it.
    fn row(&self, owner: &str) -> Row {
        let s = self.state();
        let process = *self.process.lock();
        Row {
            id: self.id.clone(),
            owner: owner.to_string(),
            program: self.program.name.clone(),
            kind: self.program.kind().to_string(),
            source: self.program.source.clone(),
            state: s.state.name().to_string(),
            exit_code: s.exit_code,
            error: s.error,
            started: s.started,
            ended: s.ended,
            pid: process.map(|p| p.pid),
            pid_start: process.map(|p| p.start),
            collect: self.collecting.get().and_then(|c| serde_json::to_string(c).ok()),
            outputs: self.outputs.get().and_then(|o| serde_json::to_string(o).ok()),
            session: self.session.as_ref().map(|s| s.id.clone()),
            names: self.session.as_ref().and_then(|_| serde_json::to_string(&self.names).ok()),
        }
    }

    /// Write the job to the ledger, if it is kept.
    pub fn keep(&self) {
        if let Some(k) = &self.kept {
            k.ledger.put_job(&self.row(&k.owner));
        }
    }

    pub fn state(&self) -> State {
        self.state.borrow().clone()
    }

    /// The job's state once it has ended, or after `wait`, whichever is first.
    pub async fn wait(&self, wait: Duration) -> State {
        let mut rx = self.state.subscribe();
        let _ = tokio::time::timeout(wait, rx.wait_for(|s| s.state.ended())).await;
        self.state()
    }

    /// Once the job is past `phase` (or has ended): a staging job's inputs are its own.
    pub async fn left(&self, phase: Phase) {
        let mut rx = self.state.subscribe();
        let _ = rx.wait_for(|s| s.state != phase).await;
    }

    /// The job's URL on the endpoint at `base`.
    pub fn url(&self, base: &str) -> String {
        url::join(base, &format!("/jobs/{}", self.id))
    }

    /// What `GET /jobs/{id}` answers.
    pub fn describe(&self, base: &str) -> Value {
        let s = self.state();
        json!({
            "id": self.id, "program": self.program.name, "url": self.url(base),
            "state": s.state, "exit_code": s.exit_code, "error": s.error, "started": s.started, "ended": s.ended,
            "last_seen": if s.state == Phase::Lost { s.ended } else { None },
        })
    }

    /// Ask the job to end; it ends as `killed` unless it already ended.
    pub fn kill(&self) {
        self.killed.store(true, Ordering::SeqCst);
        self.kill.notify_one();
    }

    /// Kill the job if it runs, and wait (bounded) until it has ended.
    pub async fn end(&self) {
        if !self.state().state.ended() {
            self.kill();
            self.wait(KILL_WAIT).await;
        }
    }

    /// Where it runs, and its files are: its session's files, or its own directory.
    pub fn workdir(&self) -> PathBuf {
        self.session.as_ref().map_or_else(|| self.dir.clone(), |s| s.files())
    }

    /// Count `n` bytes the job is about to write against the quota (its session's, if it runs in one).
    pub fn claim(&self, n: u64) -> Result<(), String> {
        if let Some(s) = &self.session {
            return s.claim(n);
        }
        self.disk.claim(Some(self.owner), n)?;
        self.claimed.fetch_add(n, Ordering::SeqCst);
        Ok(())
    }

    /// Measure the job's directory and count what changed; an error if
    /// it no longer fits the quota (then it is counted all the same).
    fn account_disk(&self) -> Result<(), String> {
        if let Some(s) = &self.session {
            return s.account().map_err(|full| format!("{} wrote more than the disk quota allows: {full}", self.program.name));
        }
        self.disk
            .recount(Some(self.owner), &self.claimed, bytes_under(&self.dir))
            .map_err(|full| format!("{} wrote more than the disk quota allows: {full}", self.program.name))
    }

    /// The bytes of its files counted against the quota (a session job's are its session's).
    pub fn disk_bytes(&self) -> u64 {
        self.claimed.load(Ordering::Relaxed)
    }

    /// Count the job's directory, as found, against its owner's quota (a
    /// restart); the bytes counted.
    pub fn recount_disk(&self) -> u64 {
        if self.session.is_some() {
            return 0; // counted with its session
        }
        let n = bytes_under(&self.dir);
        self.disk.force(Some(self.owner), n);
        self.claimed.store(n, Ordering::SeqCst);
        n
    }

    /// The job's files are gone: give their bytes back to the quota.
    pub fn release_disk(&self) {
        if let Some(s) = &self.session {
            s.forget_job(&self.id);
            let _ = s.account(); // its record is gone
            return;
        }
        self.disk.release(Some(self.owner), self.claimed.swap(0, Ordering::SeqCst));
    }

    fn set(&self, phase: Phase, exit_code: Option<i32>, error: Option<String>) {
        if phase.ended() {
            *self.process.lock() = None;
        }
        self.state.send_modify(|s| {
            if s.state.ended() {
                return;
            }
            s.state = phase;
            s.exit_code = exit_code;
            s.error = error;
            if phase.ended() {
                s.ended = Some(now());
            }
        });
        if let Some(session) = self.session.as_ref().filter(|_| phase.ended()) {
            session.job(&self.id, true);
        }
        self.keep();
    }

    /// A restored job that was staging or running when the endpoint
    /// stopped, and left no word of how it ended: lost, last seen at `seen`.
    pub fn lose(&self, why: String, seen: f64) {
        *self.process.lock() = None;
        self.state.send_modify(|s| {
            s.state = Phase::Lost;
            s.error = Some(why);
            s.ended = Some(seen);
        });
        self.keep();
    }

    /// Where the file of parameter `name` is (a `file` parameter's): in
    /// its session, the session file it names.
    pub fn file_path(&self, name: &str) -> Option<PathBuf> {
        let p = self.program.template()?.param(name)?;
        if p.placement != Placement::File {
            return None;
        }
        inside(&self.workdir(), self.names.of(&p.name))
    }

    /// Where output `name`'s file is (a `val` output's too: its parameter's name where the job runs).
    pub fn output_path(&self, name: &str) -> PathBuf {
        self.file_path(name).unwrap_or_else(|| self.workdir().join(name))
    }

    /// The job's file `rel` as (directory, path under it) for
    /// `safe_file::open_beneath`: a template's `file` parameter, or any
    /// path in a CWL job's output directory.
    pub fn file_location(&self, rel: &str) -> Option<(PathBuf, String)> {
        match &self.program.runs {
            Runs::Template { .. } => self.file_path(rel).map(|_| (self.workdir(), self.names.of(rel).to_string())),
            Runs::Cwl(_) | Runs::CwlRunner { .. } => Some((self.dir.join(cwl::OUT), rel.to_string())),
        }
    }

    pub fn stdout_path(&self) -> PathBuf {
        self.stream_path(self.collecting.get().and_then(|c| c.stdout.as_deref()), ".stdout")
    }

    pub fn stderr_path(&self) -> PathBuf {
        self.stream_path(self.collecting.get().and_then(|c| c.stderr.as_deref()), ".stderr")
    }

    /// Where a stream went: a CWL tool's captured stream in `out/`, or the job's own file.
    fn stream_path(&self, captured: Option<&str>, own: &str) -> PathBuf {
        captured.map_or_else(|| self.dir.join(own), |name| self.dir.join(cwl::OUT).join(name))
    }

    /// The command to run (under the wrapper), with its stdin; a CWL
    /// job's collecting is set.
    fn command(&self, plan: Plan, url: &str) -> Result<(tokio::process::Command, Option<std::fs::File>), String> {
        let (argv, stdin, env, cwd) = match (&self.program.runs, plan) {
            (Runs::Template { template, executable }, Plan::Template(values)) => {
                let args = template.words[1..].iter().map(|w| match w {
                    Word::Literal(s) => s.clone(),
                    Word::Param(i) => {
                        let p = &template.params[*i];
                        match p.placement {
                            Placement::File => self.names.of(&p.name).to_string(), // relative to where it runs
                            Placement::Val => values.iter().find(|(n, _)| *n == p.name).map(|(_, v)| v.clone()).unwrap_or_default(),
                        }
                    }
                });
                let argv = std::iter::once(executable.to_string_lossy().into_owned()).chain(args).collect::<Vec<_>>();
                (argv, None, None, self.workdir())
            }
            (Runs::Cwl(tool), Plan::Cwl(job)) => {
                for d in [cwl::OUT, cwl::TMP] {
                    make_private_dir(&self.dir.join(d)).map_err(|e| format!("cannot make the job's {d}/: {e}"))?;
                }
                let inputs = cwl::inputs::resolve(&Value::Object(job), &self.dir);
                let launch = cwl::launch(tool, &inputs, &self.dir, &self.id)?;
                let stdin = match &launch.stdin {
                    Some(rel) => Some(open_beneath(&self.dir, rel).map_err(|e| format!("stdin {rel}: {e}"))?),
                    None => None,
                };
                let ctx = cwl::argv::context(&inputs, &cwl::runtime(&self.dir));
                let _ = self.collecting.set(Collecting { ctx, stdout: launch.stdout, stderr: launch.stderr, url: url.to_string() });
                (launch.argv, stdin, Some(launch.env), self.dir.join(cwl::OUT))
            }
            (Runs::CwlRunner { document, attached, runner }, Plan::Cwl(job)) => {
                for d in [cwl::OUT, cwl::TMP, cwl::delegate::DOCUMENT_DIR] {
                    make_private_dir(&self.dir.join(d)).map_err(|e| format!("cannot make the job's {d}/: {e}"))?;
                }
                let job = cwl::delegate::as_the_runner_reads(cwl::inputs::resolve(&Value::Object(job), &self.dir));
                // Numbers as the document wrote them (serde_json keeps their text): the runner prints them so.
                let own = attached.iter().map(|(n, b)| (format!("{}/{n}", cwl::delegate::DOCUMENT_DIR), b.clone()));
                let files = [
                    (cwl::delegate::DOCUMENT.to_string(), document.to_string().into_bytes()),
                    (cwl::delegate::JOB.to_string(), job.to_string().into_bytes()),
                ];
                for (name, bytes) in files.into_iter().chain(own) {
                    std::fs::write(self.dir.join(&name), bytes).map_err(|e| format!("cannot write the job's {name}: {e}"))?;
                }
                let _ = self.collecting.set(Collecting { ctx: Value::Null, stdout: None, stderr: None, url: url.to_string() });
                // The runner's own environment: it clears the tool's, as for the engine here.
                (cwl::delegate::argv(runner, &self.dir), None, None, self.dir.join(cwl::TMP))
            }
            _ => return Err("the job's inputs are not of its program's kind".into()),
        };
        // Found now, as the program would have been: what cannot start is
        // said so, not left to the wrapper's shell.
        let path = env.as_ref().and_then(|e| e.iter().find(|(k, _)| k == "PATH").map(|(_, v)| v.clone()));
        let program = process_group::find_program(&argv[0], path.or_else(|| std::env::var("PATH").ok()).as_deref())
            .map_err(|e| format!("cannot start {}: {e}", argv[0]))?;
        let mut cmd = tokio::process::Command::new("/bin/sh");
        cmd.arg("-c").arg(WRAPPER).arg("mpiws-job").arg(self.dir.join(EXIT_FILE)).arg(program).args(&argv[1..]).current_dir(cwd);
        if let Some(env) = env {
            cmd.env_clear().envs(env);
        }
        Ok((cmd, stdin))
    }

    /// A CWL job's outputs, collected after it exited well.
    async fn collect(&self) -> Result<(), String> {
        if let Runs::Template { .. } = &self.program.runs {
            return Ok(());
        }
        let Some(c) = self.collecting.get().cloned() else { return Err("nothing tells how to collect its outputs".into()) };
        let (program, printed, dir) = (self.program.clone(), self.stdout_path(), self.dir.clone());
        let out = self.dir.join(cwl::OUT);
        let url = url::join(&c.url, "/files");
        let found = tokio::task::spawn_blocking(move || match &program.runs {
            Runs::Cwl(tool) => cwl::collect::collect(tool, &out, &c.ctx, (c.stdout.as_deref(), c.stderr.as_deref()), &url),
            _ => {
                let mut text = String::new();
                let file = std::fs::File::open(&printed).map_err(|e| format!("the CWL runner's output: {e}"))?;
                std::io::Read::read_to_string(&mut std::io::Read::take(file, cwl::delegate::MAX_OUTPUT), &mut text)
                    .map_err(|e| format!("the CWL runner's output: {e}"))?;
                cwl::delegate::settle_links(&dir, &out)?;
                cwl::delegate::collect(&text, &out, &url)
            }
        })
        .await
        .map_err(|e| e.to_string())??;
        let _ = self.outputs.set(found);
        Ok(())
    }

    /// Stage, run, record. `plan` holds what the command line is made of,
    /// `inputs` the input files to bring; `url` is the job's own URL (a CWL
    /// job's output files are located under it); `forks`, the fork server a
    /// job of the CWL runner is forked from, if there is one.
    pub async fn run(self: Arc<Self>, plan: Plan, inputs: Vec<Input>, fetcher: Arc<Fetcher>, url: String, forks: Option<Arc<ForkServer>>) {
        let claim = |n| self.claim(n);
        let workdir = self.workdir();
        let staged = tokio::select! {
            r = stage(&workdir, inputs, &fetcher, &claim, self.session.is_some()) => r,
            _ = self.kill.notified() => return self.set(Phase::Killed, None, None),
        };
        if let Err(e) = staged {
            return self.set(Phase::Failed, None, Some(e.message));
        }
        if self.killed.load(Ordering::SeqCst) {
            return self.set(Phase::Killed, None, None);
        }
        let (mut command, stdin) = match self.command(plan, &url) {
            Ok(c) => c,
            Err(e) => return self.set(Phase::Failed, None, Some(format!("{}: {e}", self.program.name))),
        };
        let (stdout, stderr) = match (create_new(&self.stdout_path()).await, create_new(&self.stderr_path()).await) {
            (Ok(o), Ok(e)) => (o.into_std().await, e.into_std().await),
            (Err(e), _) | (_, Err(e)) => return self.set(Phase::Failed, None, Some(format!("cannot create the job's output files: {e}"))),
        };
        let child = match forks {
            Some(forks) => self.fork(forks, &stdout, &stderr).await.map(|(pid, exit)| ChildProcess::Forked { pid, exit }),
            None => None,
        };
        let child = match child {
            Some(forked) => forked,
            None => match command
                .stdin(stdin.map_or_else(Stdio::null, Stdio::from))
                .stdout(stdout)
                .stderr(stderr)
                .process_group(0) // its own group, which a kill ends whole
                .kill_on_drop(true)
                .spawn()
            {
                Ok(c) => ChildProcess::Started(c),
                Err(e) => return self.set(Phase::Failed, None, Some(format!("cannot start {}: {e}", self.program.name))),
            },
        };
        let group = child.group();
        *self.process.lock() = group.and_then(Process::of);
        self.set(Phase::Running, None, None);
        let ending = self.watch(Watched::Running(child, self.dir.join(EXIT_FILE)), group).await;
        self.conclude(ending).await;
    }

    /// The CWL runner's job forked by `forks` (its request on its stdin:
    /// `service/cwl_runner.py`): its pid and end; None if it was not forked
    /// (it is then started afresh).
    async fn fork(&self, forks: Arc<ForkServer>, stdout: &std::fs::File, stderr: &std::fs::File) -> Option<(libc::pid_t, Told)> {
        use std::io::Write;
        let at = |p: PathBuf| p.to_string_lossy().into_owned();
        let request = json!({
            "argv": cwl::delegate::argv(&[], &self.dir),
            "cwd": at(self.dir.join(cwl::TMP)),
            "exit": at(self.dir.join(EXIT_FILE)),
        });
        let (mut ours, theirs) = std::os::unix::net::UnixStream::pair().ok()?;
        ours.write_all(request.to_string().as_bytes()).ok()?; // a few paths: the socket's buffer holds them
        drop(ours);
        let fds = [theirs.into(), stdout.try_clone().ok()?.into(), stderr.try_clone().ok()?.into()];
        let fds: [std::os::fd::OwnedFd; 3] = fds;
        tokio::task::spawn_blocking(move || forks.fork(None, [&fds[0], &fds[1], &fds[2]])).await.ok()?.ok()
    }

    /// Go on watching a job that ran when the endpoint stopped, and record
    /// how it ends, as `run` would have (`restore`: after a restart).
    pub async fn adopt(self: Arc<Self>) {
        let Some(process) = *self.process.lock() else { return self.lose("its process is not known".into(), now()) };
        let ending = self.watch(Watched::Adopted(process, self.dir.join(EXIT_FILE)), Some(process.pid)).await;
        self.conclude(ending).await;
    }

    /// Wait until the job's process ends, or it is killed, or it writes
    /// more than the quota allows.
    async fn watch(&self, mut process: Watched, group: Option<libc::pid_t>) -> Ending {
        let mut disk_check = tokio::time::interval(DISK_CHECK);
        loop {
            tokio::select! {
                exit = process.exited() => {
                    // The job is over: what it left running in its group ends with it.
                    if let Some(pgid) = group {
                        process_group::signal(pgid, libc::SIGKILL);
                    }
                    return Ending::Exited(exit);
                }
                _ = self.kill.notified() => {
                    process.end().await;
                    let _ = self.account_disk();
                    return Ending::Killed;
                }
                _ = disk_check.tick() => {
                    if self.killed.load(Ordering::SeqCst) {
                        self.kill.notify_one(); // handled by the branch above, next turn
                        continue;
                    }
                    if let Err(over) = self.account_disk() {
                        process.end().await;
                        return Ending::OverQuota(over);
                    }
                }
            }
        }
    }

    /// Record how the job ended (collecting a CWL job's outputs).
    async fn conclude(&self, ending: Ending) {
        let exit = match ending {
            Ending::Killed => return self.set(Phase::Killed, None, None),
            Ending::OverQuota(over) => return self.set(Phase::Failed, None, Some(over)),
            Ending::Exited(exit) => exit,
        };
        if let Err(over) = self.account_disk() {
            return self.set(Phase::Failed, None, Some(over));
        }
        let name = &self.program.name;
        let success = |code: Option<i32>| match &self.program.runs {
            Runs::Cwl(tool) => code.is_some_and(|c| tool.success_codes.contains(&c)),
            Runs::Template { .. } | Runs::CwlRunner { .. } => code == Some(0),
        };
        match exit {
            Exit::Code(code) if success(code) => match self.collect().await {
                Ok(()) => self.set(Phase::Done, code, None),
                Err(e) => self.set(Phase::Failed, code, Some(format!("{name}: {e}"))),
            },
            Exit::Code(Some(c)) => self.set(Phase::Failed, Some(c), Some(format!("{name} exited with status {c}"))),
            Exit::Code(None) => self.set(Phase::Failed, None, Some(format!("{name} ended by a signal"))),
            Exit::Error(e) => self.set(Phase::Failed, None, Some(format!("lost the program's process: {e}"))),
            Exit::Unknown => self.lose(format!("{name} ended while the endpoint was stopped, and left no exit status"), now()),
        }
    }
}

/// How a job's watch ended.
enum Ending {
    Exited(Exit),
    Killed,
    OverQuota(String),
}

/// How a job's process ended, as far as the endpoint can tell.
enum Exit {
    /// Its exit code; None if a signal ended it.
    Code(Option<i32>),
    /// Waiting for it failed.
    Error(String),
    /// An adopted process ended without an exit status written.
    Unknown,
}

/// The process a job runs in: the endpoint's (its child, or forked for it
/// by a fork server), or one adopted after a restart (no longer anyone's
/// child we can wait for: it is watched). Each writes its exit status to
/// the job's exit file (the wrapper; a forked runner itself), read where
/// nobody else can tell it.
enum Watched {
    Running(ChildProcess, PathBuf),
    Adopted(Process, PathBuf),
}

/// How often an adopted process is looked at.
const ADOPTED_CHECK: Duration = Duration::from_millis(250);

impl Watched {
    async fn exited(&mut self) -> Exit {
        match self {
            Watched::Running(child, exit_file) => match child.wait().await {
                Some(status) => Exit::Code(status.code()),
                None => read_exit(exit_file).map_or(Exit::Error("nothing tells how it ended".into()), |code| Exit::Code(Some(code))),
            },
            Watched::Adopted(process, exit_file) => {
                while process.alive() {
                    tokio::time::sleep(ADOPTED_CHECK).await;
                }
                read_exit(exit_file).map_or(Exit::Unknown, |code| Exit::Code(Some(code)))
            }
        }
    }

    async fn end(&mut self) {
        match self {
            Watched::Running(child, _) => child.end().await,
            Watched::Adopted(process, _) => process_group::end_group(process.pid).await,
        }
    }
}

/// The exit status the wrapper wrote, if it did (read as any job file is:
/// never through a link, bounded).
fn read_exit(path: &std::path::Path) -> Option<i32> {
    use std::io::Read;
    let mut file = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK).open(path).ok()?;
    let mut text = String::new();
    (&mut file).take(16).read_to_string(&mut text).ok()?;
    text.trim().parse().ok()
}
