//! One job: stage its inputs into its own directory, run the program there
//! with the command line its template gives, record how it ended. A kill
//! ends it at any point (while staging too).

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;
use serde_json::{json, Value};
use tokio::sync::{watch, Notify};

use crate::direct::transport::Transport;
use crate::jobs::stage::{stage, Input};
use crate::jobs::template::{Placement, Word};
use crate::jobs::Program;

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
    pub dir: PathBuf,
    state: watch::Sender<State>,
    kill: Notify,
    killed: AtomicBool,
}

fn now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

impl Job {
    pub fn new(id: String, program: Arc<Program>, dir: PathBuf) -> Arc<Job> {
        let state = State { state: Phase::Staging, exit_code: None, error: None, started: now(), ended: None };
        Arc::new(Job { id, program, dir, state: watch::channel(state).0, kill: Notify::new(), killed: AtomicBool::new(false) })
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
        let p = self.program.template.param(name)?;
        (p.placement == Placement::File).then(|| self.dir.join(name))
    }

    pub fn stdout_path(&self) -> PathBuf {
        self.dir.join(".stdout")
    }

    pub fn stderr_path(&self) -> PathBuf {
        self.dir.join(".stderr")
    }

    /// Stage, run, record. `values` holds the command-line text of each
    /// `val` input, `inputs` the input files to bring.
    pub async fn run(self: Arc<Self>, values: Vec<(String, String)>, inputs: Vec<Input>, transport: Arc<Transport>) {
        let staged = tokio::select! {
            r = stage(&self.dir, inputs, &transport) => r,
            _ = self.kill.notified() => return self.set(Phase::Killed, None, None),
        };
        if let Err(e) = staged {
            return self.set(Phase::Failed, None, Some(e.message));
        }
        if self.killed.load(Ordering::SeqCst) {
            return self.set(Phase::Killed, None, None);
        }
        let args = self.program.template.words[1..].iter().map(|w| match w {
            Word::Literal(s) => s.clone(),
            Word::Param(i) => {
                let p = &self.program.template.params[*i];
                match p.placement {
                    Placement::File => p.name.clone(), // relative to the job's directory
                    Placement::Val => values.iter().find(|(n, _)| *n == p.name).map(|(_, v)| v.clone()).unwrap_or_default(),
                }
            }
        });
        let (stdout, stderr) = match (std::fs::File::create(self.stdout_path()), std::fs::File::create(self.stderr_path())) {
            (Ok(o), Ok(e)) => (o, e),
            (Err(e), _) | (_, Err(e)) => return self.set(Phase::Failed, None, Some(format!("cannot create the job's output files: {e}"))),
        };
        let child = tokio::process::Command::new(&self.program.executable)
            .args(args)
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(stderr)
            .kill_on_drop(true)
            .spawn();
        let mut child = match child {
            Ok(c) => c,
            Err(e) => return self.set(Phase::Failed, None, Some(format!("cannot start {}: {e}", self.program.executable.display()))),
        };
        self.set(Phase::Running, None, None);
        tokio::select! {
            status = child.wait() => match status {
                Ok(s) if s.success() => self.set(Phase::Done, Some(0), None),
                Ok(s) => {
                    let error = match s.code() {
                        Some(c) => format!("{} exited with status {c}", self.program.name),
                        None => format!("{} ended by a signal", self.program.name),
                    };
                    self.set(Phase::Failed, s.code(), Some(error))
                }
                Err(e) => self.set(Phase::Failed, None, Some(format!("lost the program's process: {e}"))),
            },
            _ = self.kill.notified() => {
                let _ = child.kill().await;
                self.set(Phase::Killed, None, None);
            }
        }
    }
}
