//! One job: stage its inputs into its own directory, run the program there
//! (in a process group of its own) with the command line its template or
//! CWL tool gives, record how it ended (and a CWL job's output object). A kill ends it at any point (while staging
//! too). What it writes counts against the disk quota, measured while it
//! runs: a job that fills the quota is ended and fails.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;
use serde_json::{json, Map, Value};
use tokio::sync::{watch, Notify};

use crate::jobs::cwl;
use crate::jobs::disk::Disk;
use crate::jobs::fetch::Fetcher;
use crate::jobs::process_group;
use crate::jobs::safe_file::{bytes_under, create_new, inside, make_private_dir, open_beneath};
use crate::jobs::stage::{stage, Input};
use crate::jobs::template::{Placement, Word};
use crate::jobs::{Program, Runs};
use crate::keys::KeyId;

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
}

impl Phase {
    pub fn ended(self) -> bool {
        matches!(self, Phase::Done | Phase::Failed | Phase::Killed)
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct State {
    pub state: Phase,
    pub exit_code: Option<i32>,
    pub error: Option<String>,
    /// Seconds since the epoch.
    pub started: f64,
    pub ended: Option<f64>,
}

pub struct Job {
    pub id: String,
    pub program: Arc<Program>,
    /// The key that spawned it: only that key (or one with `admin`) may
    /// watch it, read its results, kill it or see it listed.
    pub owner: KeyId,
    pub dir: PathBuf,
    state: watch::Sender<State>,
    kill: Notify,
    killed: AtomicBool,
    disk: Arc<Disk>,
    /// The bytes of the job's directory counted against the quota.
    claimed: AtomicU64,
    /// Where stdout and stderr went, when not `.stdout`/`.stderr` (a CWL tool's captured streams).
    streams: OnceLock<(PathBuf, PathBuf)>,
    /// A CWL job's output object, once it has ended well.
    pub outputs: OnceLock<Map<String, Value>>,
}

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
    pub fn new(id: String, program: Arc<Program>, owner: KeyId, dir: PathBuf, disk: Arc<Disk>) -> Arc<Job> {
        let state = State { state: Phase::Staging, exit_code: None, error: None, started: now(), ended: None };
        Arc::new(Job {
            id,
            program,
            owner,
            dir,
            state: watch::channel(state).0,
            kill: Notify::new(),
            killed: AtomicBool::new(false),
            disk,
            claimed: AtomicU64::new(0),
            streams: OnceLock::new(),
            outputs: OnceLock::new(),
        })
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

    /// The job's URL on the endpoint at `base`.
    pub fn url(&self, base: &str) -> String {
        format!("{base}/jobs/{}", self.id)
    }

    /// What `GET /jobs/{id}` answers.
    pub fn describe(&self, base: &str) -> Value {
        let s = self.state();
        json!({
            "id": self.id, "program": self.program.name, "url": self.url(base),
            "state": s.state, "exit_code": s.exit_code, "error": s.error, "started": s.started, "ended": s.ended,
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

    /// Count `n` bytes the job is about to write against the quota.
    pub fn claim(&self, n: u64) -> Result<(), String> {
        self.disk.claim(Some(self.owner), n)?;
        self.claimed.fetch_add(n, Ordering::SeqCst);
        Ok(())
    }

    /// Measure the job's directory and count what changed; an error if
    /// it no longer fits the quota (then it is counted all the same).
    fn account_disk(&self) -> Result<(), String> {
        let measured = bytes_under(&self.dir);
        let before = self.claimed.swap(measured, Ordering::SeqCst);
        if measured <= before {
            self.disk.release(Some(self.owner), before - measured);
            return Ok(());
        }
        let more = measured - before;
        self.disk.claim(Some(self.owner), more).map_err(|full| {
            self.disk.force(Some(self.owner), more);
            format!("{} wrote more than the disk quota allows: {full}", self.program.name)
        })
    }

    /// The job's files are gone: give their bytes back to the quota.
    pub fn release_disk(&self) {
        self.disk.release(Some(self.owner), self.claimed.swap(0, Ordering::SeqCst));
    }

    fn set(&self, phase: Phase, exit_code: Option<i32>, error: Option<String>) {
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
    }

    /// Where the file of parameter `name` is (a `file` parameter's).
    pub fn file_path(&self, name: &str) -> Option<PathBuf> {
        let p = self.program.template()?.param(name)?;
        if p.placement != Placement::File {
            return None;
        }
        inside(&self.dir, &p.name)
    }

    /// The job's file `rel` as (directory, path under it) for
    /// `safe_file::open_beneath`: a template's `file` parameter, or any
    /// path in a CWL job's output directory.
    pub fn file_location(&self, rel: &str) -> Option<(PathBuf, String)> {
        match &self.program.runs {
            Runs::Template { .. } => self.file_path(rel).map(|_| (self.dir.clone(), rel.to_string())),
            Runs::Cwl(_) => Some((self.dir.join(cwl::OUT), rel.to_string())),
        }
    }

    pub fn stdout_path(&self) -> PathBuf {
        self.streams.get().map_or_else(|| self.dir.join(".stdout"), |s| s.0.clone())
    }

    pub fn stderr_path(&self) -> PathBuf {
        self.streams.get().map_or_else(|| self.dir.join(".stderr"), |s| s.1.clone())
    }

    /// The command to run, with its stdin; its stdout and stderr paths are set.
    fn command(&self, plan: Plan) -> Result<(tokio::process::Command, Option<std::fs::File>, Option<cwl::Launch>, Value), String> {
        match (&self.program.runs, plan) {
            (Runs::Template { template, executable }, Plan::Template(values)) => {
                let args = template.words[1..].iter().map(|w| match w {
                    Word::Literal(s) => s.clone(),
                    Word::Param(i) => {
                        let p = &template.params[*i];
                        match p.placement {
                            Placement::File => p.name.clone(), // relative to the job's directory
                            Placement::Val => values.iter().find(|(n, _)| *n == p.name).map(|(_, v)| v.clone()).unwrap_or_default(),
                        }
                    }
                });
                let mut cmd = tokio::process::Command::new(executable);
                cmd.args(args).current_dir(&self.dir);
                Ok((cmd, None, None, Value::Null))
            }
            (Runs::Cwl(tool), Plan::Cwl(job)) => {
                for d in [cwl::OUT, cwl::TMP] {
                    make_private_dir(&self.dir.join(d)).map_err(|e| format!("cannot make the job's {d}/: {e}"))?;
                }
                let inputs = cwl::inputs::resolve(&Value::Object(job), &self.dir);
                let launch = cwl::launch(tool, &inputs, &self.dir, &self.id)?;
                let out = self.dir.join(cwl::OUT);
                let _ = self.streams.set((
                    launch.stdout.as_ref().map_or_else(|| self.dir.join(".stdout"), |n| out.join(n)),
                    launch.stderr.as_ref().map_or_else(|| self.dir.join(".stderr"), |n| out.join(n)),
                ));
                let stdin = match &launch.stdin {
                    Some(rel) => Some(open_beneath(&self.dir, rel).map_err(|e| format!("stdin {rel}: {e}"))?),
                    None => None,
                };
                let mut cmd = tokio::process::Command::new(&launch.argv[0]);
                cmd.args(&launch.argv[1..]).current_dir(&out).env_clear().envs(launch.env.iter().map(|(k, v)| (k, v)));
                let ctx = cwl::argv::context(&inputs, &cwl::runtime(&self.dir));
                Ok((cmd, stdin, Some(launch), ctx))
            }
            _ => Err("the job's inputs are not of its program's kind".into()),
        }
    }

    /// A CWL job's outputs, collected after it exited well.
    async fn collect(&self, launch: &cwl::Launch, ctx: Value, files_url: &str) -> Result<(), String> {
        let Runs::Cwl(_) = &self.program.runs else { return Ok(()) };
        let program = self.program.clone();
        let out = self.dir.join(cwl::OUT);
        let streams = (launch.stdout.clone(), launch.stderr.clone());
        let url = format!("{files_url}/files");
        let found = tokio::task::spawn_blocking(move || {
            let Runs::Cwl(tool) = &program.runs else { unreachable!("checked above") };
            cwl::collect::collect(tool, &out, &ctx, (streams.0.as_deref(), streams.1.as_deref()), &url)
        })
        .await
        .map_err(|e| e.to_string())??;
        let _ = self.outputs.set(found);
        Ok(())
    }

    /// Stage, run, record. `plan` holds what the command line is made of,
    /// `inputs` the input files to bring; `url` is the job's own URL (a CWL
    /// job's output files are located under it).
    pub async fn run(self: Arc<Self>, plan: Plan, inputs: Vec<Input>, fetcher: Arc<Fetcher>, url: String) {
        let claim = |n| self.claim(n);
        let staged = tokio::select! {
            r = stage(&self.dir, inputs, &fetcher, &claim) => r,
            _ = self.kill.notified() => return self.set(Phase::Killed, None, None),
        };
        if let Err(e) = staged {
            return self.set(Phase::Failed, None, Some(e.message));
        }
        if self.killed.load(Ordering::SeqCst) {
            return self.set(Phase::Killed, None, None);
        }
        let (mut command, stdin, launch, ctx) = match self.command(plan) {
            Ok(c) => c,
            Err(e) => return self.set(Phase::Failed, None, Some(format!("{}: {e}", self.program.name))),
        };
        let (stdout, stderr) = match (create_new(&self.stdout_path()).await, create_new(&self.stderr_path()).await) {
            (Ok(o), Ok(e)) => (o.into_std().await, e.into_std().await),
            (Err(e), _) | (_, Err(e)) => return self.set(Phase::Failed, None, Some(format!("cannot create the job's output files: {e}"))),
        };
        let child = command
            .stdin(stdin.map_or_else(Stdio::null, Stdio::from))
            .stdout(stdout)
            .stderr(stderr)
            .process_group(0) // its own group, which a kill ends whole
            .kill_on_drop(true)
            .spawn();
        let mut child = match child {
            Ok(c) => c,
            Err(e) => {
                return self.set(
                    Phase::Failed,
                    None,
                    Some(format!("cannot start {}: {e}", command.as_std().get_program().to_string_lossy())),
                )
            }
        };
        let group = process_group::group_of(&child);
        self.set(Phase::Running, None, None);
        let mut disk_check = tokio::time::interval(DISK_CHECK);
        loop {
            tokio::select! {
                status = child.wait() => {
                    // The job is over: what it left running in its group ends with it.
                    if let Some(pgid) = group {
                        process_group::signal(pgid, libc::SIGKILL);
                    }
                    if let Err(over) = self.account_disk() {
                        return self.set(Phase::Failed, None, Some(over));
                    }
                    let success = |code: Option<i32>| match &self.program.runs {
                        Runs::Cwl(tool) => code.is_some_and(|c| tool.success_codes.contains(&c)),
                        Runs::Template { .. } => code == Some(0),
                    };
                    return match status {
                        Ok(s) if success(s.code()) => match &launch {
                            Some(l) => match self.collect(l, ctx, &url).await {
                                Ok(()) => self.set(Phase::Done, s.code(), None),
                                Err(e) => self.set(Phase::Failed, s.code(), Some(format!("{}: {e}", self.program.name))),
                            },
                            None => self.set(Phase::Done, s.code(), None),
                        },
                        Ok(s) => {
                            let error = match s.code() {
                                Some(c) => format!("{} exited with status {c}", self.program.name),
                                None => format!("{} ended by a signal", self.program.name),
                            };
                            self.set(Phase::Failed, s.code(), Some(error))
                        }
                        Err(e) => self.set(Phase::Failed, None, Some(format!("lost the program's process: {e}"))),
                    };
                }
                _ = self.kill.notified() => {
                    process_group::end(group, &mut child).await;
                    let _ = self.account_disk();
                    return self.set(Phase::Killed, None, None);
                }
                _ = disk_check.tick() => {
                    if self.killed.load(Ordering::SeqCst) {
                        self.kill.notify_one(); // handled by the branch above, next turn
                        continue;
                    }
                    if let Err(over) = self.account_disk() {
                        process_group::end(group, &mut child).await;
                        return self.set(Phase::Failed, None, Some(over));
                    }
                }
            }
        }
    }
}
