//! Start an instance's child process (one started ahead: `Spares`; forked by
//! the fork server when it can, else a new interpreter) and follow it to its end. The record
//! of the instance (here, in the endpoint) always ends: with the child's
//! reported outcome, cancelled (the child is then ended within
//! `process_group::GRACE`), over its time limit, or with why the child died.

use std::collections::VecDeque;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::error::ErrorClass;
use crate::jobs::forks::ForkServer;
use crate::jobs::process::Process;
use crate::keys::KeyId;
use crate::rank::instance::{ErrorReport, InstanceState};
use crate::rank::Instance;
use crate::runtime::runtime;
use crate::service::sandbox::handover::CHILD_FDS;
use crate::service::sandbox::memory::{Budget, Watched};
use crate::service::sandbox::{Sandbox, SandboxSetting};

/// How long a child that reported its outcome may take to exit.
const EXIT_GRACE: Duration = Duration::from_secs(10);

/// Children started ahead of need (`SandboxSetting::spares`), each waiting
/// for a binding: an instance starts without waiting for an interpreter to
/// start and import its service.
pub struct Spares {
    setting: SandboxSetting,
    /// Warm children (their services imported), oldest first.
    ready: Mutex<VecDeque<Spare>>,
    /// Whether a refill is under way: one child is started at a time, the
    /// next when it is warm, so that replacing the children a domain just
    /// took (8 at once for a workflow of 8 steps) never takes every core
    /// from the instances running — on 2 cores, 8 interpreters importing at
    /// once made a 64 MiB message between two of them 4 times slower.
    refilling: AtomicBool,
    /// What the children may hold resident, together and per key.
    budget: Arc<Budget>,
    /// Set when the endpoint closes: no spare is started any more.
    closed: AtomicBool,
    /// Where children are forked from; None: each is a new interpreter.
    forks: Option<Arc<ForkServer>>,
}

/// A child started ahead of need, waiting for its binding on stdin.
struct Spare {
    child: Process,
    /// The endpoint's end of the child's stdin.
    binding: UnixStream,
    handover: UnixStream,
    reports: UnixStream,
}

impl Spares {
    /// Start the spares (in the runtime).
    pub fn new(setting: &SandboxSetting) -> Arc<Spares> {
        let _in_runtime = runtime().enter();
        let spares = Arc::new(Spares {
            setting: setting.clone(),
            ready: Mutex::new(VecDeque::new()),
            refilling: AtomicBool::new(false),
            budget: Budget::new(setting.max_total_memory, setting.max_key_memory),
            closed: AtomicBool::new(false),
            forks: fork_server(setting),
        });
        spares.refill();
        spares
    }

    /// Start `instance` of `owner` in a child; `sandbox` is where it can be reached once ready.
    pub fn start(self: &Arc<Self>, instance: Arc<Instance>, sandbox: Arc<Sandbox>, owner: Option<KeyId>) {
        let spares = self.clone();
        runtime().spawn(async move {
            // Off the runtime's workers: a fork or a start waits for another process.
            let taking = spares.clone();
            let taken = tokio::task::spawn_blocking(move || taking.take()).await.unwrap_or_else(|e| Err(io::Error::other(e)));
            let outcome = match taken {
                Ok(spare) => {
                    spares.refill();
                    let watched = spare.child.group().map(|pgid| spares.budget.watch(owner, pgid));
                    follow(&spares.setting, spare, &instance, &sandbox, watched).await
                }
                Err(e) => Err(cannot(e)),
            };
            sandbox.close();
            if let Err((name, message)) = outcome {
                instance.fail(ErrorReport { class: ErrorClass::Other.code(), name: name.into(), message, traceback: String::new() });
            }
        });
    }

    /// End the spares (their endpoint closed): none is started again.
    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.ready.lock().clear(); // each killed as it is dropped
        if let Some(forks) = &self.forks {
            forks.close();
        }
    }

    /// A warm spare still alive, or a new child.
    fn take(&self) -> io::Result<Spare> {
        loop {
            let Some(mut spare) = self.ready.lock().pop_front() else { break };
            if spare.child.running() {
                return Ok(spare);
            }
        }
        spawn(&self.setting, self.forks.as_deref())
    }

    /// Start children until `spares` are warm, one after another, in the background.
    fn refill(self: &Arc<Self>) {
        if self.closed.load(Ordering::Acquire)
            || self.ready.lock().len() >= self.setting.spares
            || self.refilling.swap(true, Ordering::AcqRel)
        {
            return;
        }
        let me = self.clone();
        runtime().spawn_blocking(move || loop {
            let mut failed = false;
            while me.ready.lock().len() < me.setting.spares && !me.closed.load(Ordering::Acquire) {
                match spawn(&me.setting, me.forks.as_deref()) {
                    Ok(spare) if warm(&spare.reports) && !me.closed.load(Ordering::Acquire) => me.ready.lock().push_back(spare),
                    // It could not start, or import its services: the next
                    // instance starts a child itself, and says why.
                    _ => {
                        failed = true;
                        break;
                    }
                }
            }
            me.refilling.store(false, Ordering::Release);
            // Closed, or a child could not start: not tried again at once
            // (the next take refills, if it can).
            if failed || me.closed.load(Ordering::Acquire) {
                return;
            }
            // A take between the last look and now left refilling to us.
            if me.ready.lock().len() >= me.setting.spares || me.refilling.swap(true, Ordering::AcqRel) {
                return;
            }
        });
    }
}

/// Whether a new child says it is warm (`child::begin`: its services
/// imported, waiting for a binding), within `WARM_TIMEOUT`.
fn warm(reports: &UnixStream) -> bool {
    if reports.set_read_timeout(Some(WARM_TIMEOUT)).is_err() {
        return false;
    }
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    // Byte by byte: what follows the line is the instance's, read by `follow`.
    while line.len() <= WARM.len() {
        match (&*reports).read(&mut byte) {
            Ok(1) if byte[0] == b'\n' => break,
            Ok(1) => line.push(byte[0]),
            _ => return false,
        }
    }
    reports.set_read_timeout(None).is_ok() && line == WARM.as_bytes()
}

/// What a child reports once its services are imported, before its binding.
pub const WARM: &str = "warm";

/// How long a new spare may take to import its services.
const WARM_TIMEOUT: Duration = Duration::from_secs(60);

fn cannot(e: io::Error) -> Failure {
    ("InstanceNotStarted", format!("the endpoint could not start the instance's process: {e}"))
}

/// A new child, its wire in place, waiting for its binding: forked by
/// `forks` if it can, else a new interpreter.
fn spawn(setting: &SandboxSetting, forks: Option<&ForkServer>) -> io::Result<Spare> {
    let (binding, binding_child) = UnixStream::pair()?;
    let (handover, handover_child) = UnixStream::pair()?;
    let (reports, reports_child) = UnixStream::pair()?;
    let theirs = [binding_child, handover_child, reports_child].map(OwnedFd::from);
    if let Some(Ok((pid, exit))) = forks.map(|f| f.fork(setting.max_memory, [&theirs[0], &theirs[1], &theirs[2]])) {
        return Ok(Spare { child: Process::Forked { pid, exit }, binding, handover, reports });
    }
    let [stdin, handover_child, reports_child] = theirs;
    let mut cmd = command(setting)?;
    cmd.stdin(Stdio::from(stdin));
    let fds = (handover_child.as_raw_fd(), reports_child.as_raw_fd());
    let memory = setting.max_memory;
    // SAFETY: between fork and exec the closure only calls async-signal-safe
    // functions (fcntl, dup2, close, setrlimit) and allocates nothing.
    unsafe {
        cmd.pre_exec(move || place_wire(fds, memory));
    }
    let child = cmd.spawn()?;
    Ok(Spare { child: Process::Started(child), binding, handover, reports })
}

/// What the endpoint sets to start a fork server rather than a child (`forks.FORKS_ENV`).
const FORKS_ENV: &str = "MPIWS_SANDBOX_FORKS";

/// The fork server of the children (`python/mpiws/service/forks.py`); None if it cannot start.
fn fork_server(setting: &SandboxSetting) -> Option<Arc<ForkServer>> {
    let mut cmd = command(setting).ok()?;
    cmd.env(FORKS_ENV, "1");
    ForkServer::start(cmd)
}

/// The command of a child, and of the fork server its children inherit
/// its environment from: in a process group of its own, killed if dropped.
pub(super) fn command(setting: &SandboxSetting) -> io::Result<tokio::process::Command> {
    let Some((program, args)) = setting.command.split_first() else {
        return Err(io::Error::other("no command"));
    };
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args).process_group(0).kill_on_drop(true);
    if let Some(own) = &setting.trust {
        cmd.env(super::TRUST_ENV, own);
    }
    if setting.max_memory.is_some() {
        // Few malloc arenas: each reserves 64 MiB of the address space bounded below.
        cmd.env("MALLOC_ARENA_MAX", "2");
    }
    Ok(cmd)
}

/// What the child reports at its end: its instance's final status.
#[derive(serde::Deserialize)]
struct Outcome {
    state: InstanceState,
    result: Option<serde_json::Value>,
    error: Option<ErrorReport>,
}

type Failure = (&'static str, String);

async fn follow(
    setting: &SandboxSetting,
    spare: Spare,
    instance: &Arc<Instance>,
    sandbox: &Sandbox,
    watched: Option<Watched>,
) -> Result<(), Failure> {
    let Spare { mut child, binding, handover, reports } = spare;
    sandbox.pid.store(child.group().unwrap_or(0), std::sync::atomic::Ordering::Relaxed);

    let text = serde_json::to_vec(&instance.binding).expect("a binding encodes");
    // A child that cannot read its binding fails by itself; it is followed below.
    if binding.set_nonblocking(true).is_ok() {
        if let Ok(mut stdin) = tokio::net::UnixStream::from_std(binding) {
            let _ = stdin.write_all(&text).await;
        }
    } // dropped: the end of the binding
    reports.set_nonblocking(true).map_err(cannot)?;
    let mut lines = BufReader::new(tokio::net::UnixStream::from_std(reports).map_err(cannot)?).lines();
    let mut handover = Some(handover);
    let mut status = instance.watch_status();
    let limit = tokio::time::sleep(setting.max_time);
    tokio::pin!(limit);
    loop {
        tokio::select! {
            line = lines.next_line() => match line {
                // A child started for this instance (no warm spare was left) says so first.
                Ok(Some(line)) if line == WARM => {}
                Ok(Some(line)) => match (line.strip_prefix("ready "), line.strip_prefix("traffic ")) {
                    (Some(url), _) => {
                        if let Some(h) = handover.take() {
                            sandbox.set_ready(url.to_string(), h);
                        }
                        instance.set_running();
                    }
                    // What the instance sent and received, as its child counts it (an unreadable report is none).
                    (_, Some(counts)) => {
                        if let Ok(counts) = serde_json::from_str(counts) {
                            instance.traffic.take(&counts);
                        }
                    }
                    (None, None) => {
                        apply(instance, &line);
                        break;
                    }
                },
                _ => break, // the child closed its reports: it is ending
            },
            _ = async { status.wait_for(|s| s.state.is_final()).await.map(drop) } => {
                // Cancelled through the endpoint: the code ends now.
                child.end().await;
                return Ok(());
            }
            why = async { match &watched { Some(w) => w.over.wait().await, None => std::future::pending().await } } => {
                child.end().await;
                return Err(("MemoryLimitExceeded", why));
            }
            _ = &mut limit => {
                child.end().await;
                let t = setting.max_time;
                return Err(("TimeLimitExceeded", format!("the instance ran longer than this endpoint allows ({t:?}, --max-instance-time) and was ended")));
            }
        }
    }
    match tokio::time::timeout(EXIT_GRACE, child.wait()).await {
        Ok(_) if instance.status().state.is_final() => Ok(()),
        Ok(exit) => Err(("InstanceDied", died(exit, setting.max_memory))),
        Err(_) => {
            child.end().await;
            Err(("InstanceDied", "the instance's process did not exit after its code ended, and was ended".into()))
        }
    }
}

/// The child's final status, onto the record.
fn apply(instance: &Instance, line: &str) {
    match serde_json::from_str::<Outcome>(line) {
        Ok(Outcome { state: InstanceState::Done, result, .. }) => instance.finish(result.unwrap_or(serde_json::Value::Null)),
        Ok(Outcome { state: InstanceState::Failed, error: Some(e), .. }) => instance.fail(e),
        Ok(Outcome { state: InstanceState::Cancelled, .. }) => instance.cancel(),
        _ => instance.fail(ErrorReport {
            class: ErrorClass::Intern.code(),
            name: "InstanceDied".into(),
            message: format!("the instance's process reported an unreadable outcome: {:.200}", line),
            traceback: String::new(),
        }),
    }
}

fn died(exit: Option<ExitStatus>, memory: Option<u64>) -> String {
    use std::os::unix::process::ExitStatusExt;
    let how = match exit.map(|e| (e.code(), e.signal())) {
        Some((_, Some(sig))) => format!("was killed by signal {sig}"),
        Some((Some(code), _)) => format!("exited with status {code}"),
        _ => "ended".to_string(),
    };
    let hint = memory.map(|m| format!(" (its memory is bounded to {m} bytes: --max-instance-memory)")).unwrap_or_default();
    format!("the instance's process {how} before its code ended{hint}")
}

/// In the forked child: the wire's two ends at `CHILD_FDS`, and the memory bound.
fn place_wire((handover, reports): (RawFd, RawFd), memory: Option<u64>) -> io::Result<()> {
    let check = |r: libc::c_int| if r < 0 { Err(io::Error::last_os_error()) } else { Ok(r) };
    // SAFETY: plain descriptor calls on descriptors this process owns.
    unsafe {
        // First above the targets, so that neither end overwrites the other.
        let h = check(libc::fcntl(handover, libc::F_DUPFD, 10))?;
        let r = check(libc::fcntl(reports, libc::F_DUPFD, 10))?;
        check(libc::dup2(h, CHILD_FDS.0))?;
        check(libc::dup2(r, CHILD_FDS.1))?;
        libc::close(h);
        libc::close(r);
        if let Some(m) = memory {
            let limit = libc::rlimit { rlim_cur: m as libc::rlim_t, rlim_max: m as libc::rlim_t };
            check(libc::setrlimit(libc::RLIMIT_AS, &limit))?;
        }
    }
    Ok(())
}
