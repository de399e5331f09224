//! **Legacy programs as services.** A command-line program, deployed with a
//! one-line [`template::Template`], becomes a service with no change to the
//! program: clients spawn jobs of it, watch them, fetch their results (by
//! value, or by URL), and kill them. Files of any size pass by reference: a
//! job pulls an input from a URL itself, and one on this same endpoint is
//! linked, not copied.
//!
//! [`Jobs`] is an endpoint's register of programs, jobs and uploaded files;
//! [`job`] runs one job (stage inputs, run, record the outcome) and
//! [`stage`] brings its input files. What the register refuses is a
//! [`Refusal`]; the HTTP operations on jobs, one per file, are the HTTP
//! face's (`service::jobs`): this layer knows nothing of HTTP.
//!
//! Jobs and uploads belong to the key that made them: another key is told
//! there is no such job or upload (404, exactly as for one that does not
//! exist), unless it has `admin`. Reading a file's bytes is the exception:
//! a job's or an upload's file URL is a capability (its id is 128 random
//! bits), so that a job of another key, or another endpoint, can be given it
//! by reference.
//!
//! What keeps a client from harming the endpoint's machine through them:
//! [`workdir`] (a private work directory), [`safe_file`] (no job file is
//! read through a symlink, no name leaves its directory), [`fetch`] (URL
//! inputs only from allowed addresses, bounded in size and time),
//! [`disk`] (a quota on the work directory), [`process_group`] (a kill
//! ends everything a job started), and a bounded job table whose ended
//! jobs and uploads [`expiry`] removes after their time to live.
//!
//! [`forks`] is the fork server's endpoint half (instances' children and
//! the CWL runner's jobs are forked from a warm interpreter).
//!
//! A client may also make a [`session`]: a directory of its own where its
//! jobs read and write files by name, one job's output the next one's
//! input with no transfer ([`sessions`]: the register's sessions).
//!
//! In a work directory given with `--workdir`, the table is kept in a
//! [`ledger`] (SQLite): an endpoint started again on it answers for every
//! job, upload and session it kept ([`restore`]).

pub mod cwl;
pub mod disk;
pub mod expiry;
pub mod fetch;
pub mod forks;
pub mod interface;
pub mod job;
pub mod ledger;
pub mod process;
pub mod process_group;
pub mod restore;
pub mod safe_file;
pub mod session;
pub mod sessions;
pub mod stage;
pub mod template;
pub mod workdir;

use std::collections::{BTreeMap, HashMap};
use std::os::fd::FromRawFd;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Mutex, RwLock};
use serde::{Deserialize, Serialize};

use crate::config::seconds;
use crate::error::{err, ErrorClass, Result};
use crate::keys::{Key, KeyId, Keys, Scope};
use crate::runtime::runtime;
use disk::Disk;
use fetch::Fetcher;
use forks::ForkServer;
use job::{Home, Job, Kept};
use ledger::Ledger;
use session::{Names, Session};
use template::{Template, Word};
use workdir::WorkDir;

/// A deployed program: its name and the rule its jobs follow.
pub struct Program {
    pub name: String,
    pub runs: Runs,
    /// What it was deployed from: its template line, or its CWL document
    /// (JSON); a kept job keeps it (`ledger`).
    pub source: String,
}

/// How a program's command line is made: by its one-line template, or by its CWL tool document.
pub enum Runs {
    Template {
        template: Template,
        /// The template's first word; made absolute if it names a file, since
        /// each job runs in its own directory.
        executable: PathBuf,
    },
    Cwl(cwl::Tool),
    /// A CWL document this endpoint's own engine does not run, run by its
    /// CWL runner (`cwl::delegate`): the document, and the runner's command.
    CwlRunner {
        document: serde_json::Value,
        /// Its own files (`cwl::delegate::ATTACHED`), written beside it for each job.
        attached: Vec<(String, Vec<u8>)>,
        runner: Vec<String>,
    },
}

impl Program {
    /// Program `name` made from its template line (`kind` "template") or
    /// its CWL document (`kind` "cwl", JSON text): a CommandLineTool the
    /// engine here runs, else any CWL document `runner` (the endpoint's CWL
    /// runner, if it has one) runs. Refused, saying why, if it is malformed
    /// or uses what neither runs.
    pub fn parse(name: &str, kind: &str, source: &str, runner: &[String]) -> Result<Program> {
        check_name(name)?;
        let runs = match kind {
            "template" => {
                let template = Template::parse(source)?;
                let Some(Word::Literal(first)) = template.words.first() else { unreachable!("a template starts with its program") };
                let executable = if first.contains('/') {
                    std::fs::canonicalize(first).or_else(|e| err(ErrorClass::Arg, format!("program {first}: {e}")))?
                } else {
                    PathBuf::from(first) // looked up on PATH
                };
                Runs::Template { template, executable }
            }
            "cwl" => {
                let doc: serde_json::Value =
                    serde_json::from_str(source).or_else(|e| err(ErrorClass::Arg, format!("CWL tool {name}: malformed JSON: {e}")))?;
                match cwl::Tool::parse(&doc) {
                    Ok(tool) => Runs::Cwl(tool),
                    Err(_) if !runner.is_empty() => {
                        // What the engine here does not run, the runner does.
                        let refused = |e: String| crate::error::Error::new(ErrorClass::Arg, format!("CWL document {name}: {e}"));
                        let mut document = doc;
                        let attached = cwl::delegate::take_attached(&mut document).map_err(refused)?;
                        cwl::delegate::check_document(&document, &attached).map_err(refused)?;
                        Runs::CwlRunner { document, attached, runner: runner.to_vec() }
                    }
                    Err(own) => return err(ErrorClass::Arg, format!("CWL tool {name}: {own}")),
                }
            }
            _ => return err(ErrorClass::Arg, format!("program {name}: unknown kind {kind:?}")),
        };
        Ok(Program { name: name.to_string(), runs, source: source.to_string() })
    }

    /// `template` or `cwl`: how its source is read.
    pub fn kind(&self) -> &'static str {
        match self.runs {
            Runs::Template { .. } => "template",
            Runs::Cwl(_) | Runs::CwlRunner { .. } => "cwl",
        }
    }

    /// The template of a template program.
    pub fn template(&self) -> Option<&Template> {
        match &self.runs {
            Runs::Template { template, .. } => Some(template),
            Runs::Cwl(_) | Runs::CwlRunner { .. } => None,
        }
    }

    /// The interface clients read (`GET /programs/{name}`): a template's
    /// parameters, or a CWL tool's inputs and outputs.
    pub fn describe(&self) -> serde_json::Value {
        match &self.runs {
            Runs::Template { template, .. } => template.describe(&self.name),
            Runs::Cwl(tool) => {
                let mut d = serde_json::json!({"name": self.name, "class": "CommandLineTool"});
                for (k, v) in tool.interface.as_object().expect("an object") {
                    d[k] = v.clone();
                }
                d
            }
            Runs::CwlRunner { document, .. } => {
                // A packed document's process is its `#main`.
                let main = document["$graph"].as_array().and_then(|g| g.iter().find(|p| p["id"] == "#main")).unwrap_or(document);
                serde_json::json!({"name": self.name, "class": main["class"], "inputs": main["inputs"], "outputs": main["outputs"],
                                   "runner": "the endpoint's CWL runner"})
            }
        }
    }
}

/// The limits an endpoint sets on its jobs and files (`mpiws serve`'s
/// options; part of `service::Config`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct Limits {
    /// Where jobs and uploads are kept; a fresh private temporary
    /// directory if None (see `workdir`).
    pub workdir: Option<PathBuf>,
    /// Largest file an upload (`POST /files`) may be.
    pub max_upload: u64,
    /// Hosts (`HOST[:PORT]`) and networks (CIDR) URL inputs may be pulled
    /// from besides public addresses (`--fetch-allow`; see `fetch`).
    pub fetch_allow: Vec<String>,
    /// Largest URL input one job may pull; `max_upload` if None.
    pub max_fetch: Option<u64>,
    /// Longest a URL input may take to pull.
    #[serde(with = "seconds")]
    pub fetch_timeout: Duration,
    /// Disk quota of the work directory: uploads, pulls and job files.
    pub max_disk: u64,
    /// The most of it one key's uploads and jobs may take.
    pub max_disk_per_key: u64,
    /// Most jobs the endpoint holds (running or ended, until removed), and
    /// most of them one key holds.
    pub max_jobs: usize,
    pub max_jobs_per_key: usize,
    /// Most uploads one key keeps at once (each until deleted or expired).
    pub max_uploads_per_key: usize,
    /// How long an ended job, or an upload, is kept before it is removed.
    #[serde(with = "seconds")]
    pub job_ttl: Duration,
    /// The largest disk quota a session may have (its default too).
    pub max_session_disk: u64,
    /// The longest a session may stay unused before it is removed (its default too).
    #[serde(with = "seconds")]
    pub session_idle: Duration,
    /// Most sessions one key keeps at once.
    pub max_sessions_per_key: usize,
    /// The command that runs the CWL documents the engine here does not
    /// (`--cwl-runner`; `cwl::delegate`); none if empty.
    pub cwl_runner: Vec<String>,
    /// Whether a job object given to the CWL runner may add requirements of
    /// its own (`cwl:requirements`: the client's expressions and environment,
    /// code run here); only where the client is this endpoint's own user
    /// (the endpoint `mpiws workflow run` starts for itself).
    pub cwl_client_requirements: bool,
    /// The command of the CWL runner's fork server (`forks`; `python -m
    /// mpiws.service.cwl_runner`), started when the first document for the
    /// runner is deployed: each job is then forked from it, cwltool and the
    /// CWL schema already loaded. None if empty: each job starts `cwl_runner`.
    pub cwl_runner_forks: Vec<String>,
    /// Or one already running: the descriptor of its wire, which the
    /// endpoint takes (the one a client forks from itself for its own endpoint).
    pub cwl_runner_wire: Option<i32>,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            workdir: None,
            max_upload: 1 << 30,
            fetch_allow: Vec::new(),
            max_fetch: None,
            fetch_timeout: Duration::from_secs(300),
            max_disk: 10 << 30,
            max_disk_per_key: 5 << 30,
            max_jobs: 1000,
            max_jobs_per_key: 500,
            max_uploads_per_key: 1000,
            job_ttl: Duration::from_secs(24 * 3600),
            max_session_disk: 5 << 30,
            session_idle: Duration::from_secs(3600),
            max_sessions_per_key: 16,
            cwl_runner: Vec::new(),
            cwl_client_requirements: false,
            cwl_runner_forks: Vec::new(),
            cwl_runner_wire: None,
        }
    }
}

/// Why the register refused a request; the HTTP face answers each as it
/// should (404, 503 or 429 with `Retry-After`).
#[derive(Debug, Clone, PartialEq)]
pub enum Refusal {
    /// No such job or program. A job of another key is refused with the
    /// very words of one that does not exist: another key does not learn
    /// that it exists.
    NotFound(String),
    /// No room: in the whole table, or (`per_key`) in one key's share;
    /// room is expected after `retry_after`.
    Full { per_key: bool, message: String, retry_after: Duration },
}

pub struct Jobs {
    workdir: WorkDir,
    /// Where the table is kept across restarts: in a given work directory.
    ledger: Option<Arc<Ledger>>,
    /// Each key's fingerprint, as the ledger names owners.
    fingerprints: HashMap<KeyId, String>,
    programs: RwLock<BTreeMap<String, Arc<Program>>>,
    jobs: Mutex<HashMap<String, Arc<Job>>>,
    /// Who uploaded each upload of this run of the endpoint (one left in a
    /// given `--workdir` by an earlier run has no owner: only `admin` may
    /// remove it, and it expires).
    uploads: Mutex<HashMap<String, KeyId>>,
    pub disk: Arc<Disk>,
    pub fetcher: Arc<Fetcher>,
    max_jobs: usize,
    max_jobs_per_key: usize,
    /// Most uploads one key keeps here at once.
    max_uploads_per_key: usize,
    /// How long ended jobs and uploads are kept.
    pub ttl: Duration,
    /// Sessions, by id (see `sessions`), and what one may be given.
    sessions: Mutex<HashMap<String, Arc<Session>>>,
    pub session_bounds: session::Bounds,
    /// Told when a session is made: expiry may have to look sooner.
    expiry_sooner: Arc<tokio::sync::Notify>,
    /// Runs the CWL documents the engine here does not (`Limits::cwl_runner`).
    cwl_runner: Vec<String>,
    /// Where the runner's jobs are forked from (`Limits::cwl_runner_forks`).
    cwl_forks: Mutex<CwlForks>,
}

/// The CWL runner's fork server: to start, running, or none (given up, or never given).
enum CwlForks {
    ToStart(Vec<String>),
    Running(Arc<ForkServer>),
    None,
}

/// When to try again when the job table, or a key's uploads, is full and nothing is due to expire soon.
const RETRY_FULL: Duration = Duration::from_secs(60);

impl Jobs {
    /// Jobs and uploaded files live in the work directory `limits` gives
    /// (or a fresh private one); its limits apply to them. A given one's
    /// ledger is read: the jobs and uploads it keeps are the table's again
    /// (owned by the same `keys`, if they are still there).
    pub fn new(limits: &Limits, keys: &Keys) -> Result<Jobs> {
        let workdir = WorkDir::open(limits.workdir.as_deref())?;
        let disk = Disk::new(limits.max_disk, limits.max_disk_per_key);
        let ledger = workdir.existing().map(|given| Ledger::open(&given)).transpose()?.map(Arc::new);
        let fetcher = Fetcher::new(&limits.fetch_allow, limits.max_fetch.unwrap_or(limits.max_upload), limits.fetch_timeout)?;
        let jobs = Jobs {
            workdir,
            ledger,
            fingerprints: keys.iter().map(|k| (k.id, k.fingerprint())).collect(),
            programs: RwLock::new(BTreeMap::new()),
            jobs: Mutex::new(HashMap::new()),
            uploads: Mutex::new(HashMap::new()),
            disk: Arc::new(disk),
            fetcher: Arc::new(fetcher),
            max_jobs: limits.max_jobs,
            max_jobs_per_key: limits.max_jobs_per_key,
            max_uploads_per_key: limits.max_uploads_per_key,
            ttl: limits.job_ttl,
            sessions: Mutex::new(HashMap::new()),
            expiry_sooner: Arc::new(tokio::sync::Notify::new()),
            session_bounds: session::Bounds {
                disk: limits.max_session_disk,
                idle: limits.session_idle,
                per_key: limits.max_sessions_per_key,
            },
            cwl_runner: limits.cwl_runner.clone(),
            cwl_forks: Mutex::new(match (limits.cwl_runner_wire, &limits.cwl_runner_forks) {
                // SAFETY: the descriptor is given to the endpoint to own (`Limits::cwl_runner_wire`).
                (Some(fd), _) => ForkServer::on(unsafe { UnixStream::from_raw_fd(fd) }).map_or(CwlForks::None, CwlForks::Running),
                (None, command) if !command.is_empty() => CwlForks::ToStart(command.clone()),
                _ => CwlForks::None,
            }),
        };
        restore::restore(&jobs, keys)?;
        Ok(jobs)
    }

    /// The work directory (made now if it was not yet).
    pub fn workdir(&self) -> Result<PathBuf> {
        self.workdir.path()
    }

    /// Deploy `template` as program `name` (replacing one of that name).
    pub fn deploy(&self, name: &str, template: &str) -> Result<()> {
        self.install(Program::parse(name, "template", template, &[])?);
        Ok(())
    }

    /// Deploy the CWL `document` (JSON text) as program `name` (replacing
    /// one of that name); refused, saying why, if neither the engine here
    /// nor the endpoint's CWL runner runs it (`Program::parse`).
    pub fn deploy_cwl(&self, name: &str, document: &str) -> Result<()> {
        self.install(Program::parse(name, "cwl", document, &self.cwl_runner)?);
        Ok(())
    }

    fn install(&self, program: Program) {
        if let Runs::CwlRunner { .. } = program.runs {
            self.cwl_forks(); // warm by the time its first job comes
        }
        self.programs.write().insert(program.name.clone(), Arc::new(program));
    }

    /// The CWL runner's fork server, started now if it was not yet; None
    /// if there is none (its jobs then each start the runner afresh).
    pub fn cwl_forks(&self) -> Option<Arc<ForkServer>> {
        let mut forks = self.cwl_forks.lock();
        if let CwlForks::ToStart(command) = &*forks {
            let started = command.split_first().and_then(|(program, args)| {
                let _in_runtime = runtime().enter();
                let mut cmd = tokio::process::Command::new(program);
                cmd.args(args).process_group(0).kill_on_drop(true);
                ForkServer::start(cmd)
            });
            *forks = started.map_or(CwlForks::None, CwlForks::Running);
        }
        match &*forks {
            CwlForks::Running(server) => Some(server.clone()),
            _ => None,
        }
    }

    /// A new job of `program` for `owner` (its id, its directory's path, and
    /// where it is kept), to be admitted; in `session`, with the session
    /// files its parameters name.
    pub fn new_job(&self, program: Arc<Program>, owner: &Key, session: Option<(Arc<Session>, Names)>) -> Result<Arc<Job>> {
        let id = new_id();
        let dir = match &session {
            Some((s, _)) => s.job_dir(&id),
            None => self.job_dir(&id)?,
        };
        Ok(Job::new(id, program, owner.id, Home { dir, disk: self.disk.clone(), kept: self.kept(owner.id), session }))
    }

    /// Where a job or upload of `owner` is kept, if the table is.
    fn kept(&self, owner: KeyId) -> Option<Kept> {
        let ledger = self.ledger.clone()?;
        Some(Kept { ledger, owner: self.fingerprints.get(&owner).cloned().unwrap_or_default() })
    }

    pub fn program(&self, name: &str) -> Option<Arc<Program>> {
        self.programs.read().get(name).cloned()
    }

    pub fn programs(&self) -> Vec<Arc<Program>> {
        self.programs.read().values().cloned().collect()
    }

    pub fn job(&self, id: &str) -> Option<Arc<Job>> {
        self.jobs.lock().get(id).cloned()
    }

    /// Job `id`, whoever asks (the job's files: their URLs are capabilities).
    pub fn found_job(&self, id: &str) -> std::result::Result<Arc<Job>, Refusal> {
        self.job(id).ok_or_else(|| no_job(id))
    }

    /// Job `id` if `caller` may act on it (it spawned it, or has `admin`);
    /// else refused as a job that does not exist.
    pub fn own_job(&self, id: &str, caller: &Key) -> std::result::Result<Arc<Job>, Refusal> {
        self.job(id).filter(|job| may_act(caller, job.owner)).ok_or_else(|| no_job(id))
    }

    /// The jobs `caller` may see (its own; every one to `admin`), oldest
    /// first: at most `max_jobs`, the table's bound.
    pub fn jobs_of(&self, caller: &Key) -> Vec<Arc<Job>> {
        let mut mine: Vec<(f64, Arc<Job>)> =
            self.jobs.lock().values().filter(|j| may_act(caller, j.owner)).map(|j| (j.state().started, j.clone())).collect();
        mine.sort_by(|(a, ja), (b, jb)| a.total_cmp(b).then_with(|| ja.id.cmp(&jb.id)));
        mine.into_iter().map(|(_, j)| j).collect()
    }

    /// How many jobs the table holds (running or ended).
    pub fn count(&self) -> usize {
        self.jobs.lock().len()
    }

    /// How many jobs the table holds in each state.
    pub fn states(&self) -> BTreeMap<&'static str, u64> {
        let mut by = BTreeMap::new();
        for job in self.jobs.lock().values() {
            *by.entry(job.state().state.name()).or_default() += 1;
        }
        by
    }

    /// Program `name`, or why not.
    pub fn found_program(&self, name: &str) -> std::result::Result<Arc<Program>, Refusal> {
        self.program(name).ok_or_else(|| Refusal::NotFound(format!("no program {name:?} is deployed here")))
    }

    /// Room for another upload of `caller` (fewer than `max_uploads_per_key`
    /// of its own), else the key's share is full.
    pub fn upload_room(&self, caller: &Key) -> std::result::Result<(), Refusal> {
        let per_key = self.max_uploads_per_key;
        if self.uploads.lock().values().filter(|&&k| k == caller.id).count() < per_key {
            return Ok(());
        }
        let message = format!(
            "{} keeps its maximum of {per_key} uploads here (--max-uploads-per-key): delete some, or wait for them to expire",
            caller.id
        );
        Err(Refusal::Full { per_key: true, message, retry_after: RETRY_FULL })
    }

    /// Enter `job` in the table, if there is room (`max_jobs`) and its key
    /// holds fewer than `max_jobs_per_key`; else the table, or the key's
    /// share, is full until an ended job expires.
    pub fn admit(&self, job: Arc<Job>) -> std::result::Result<(), Refusal> {
        let mut jobs = self.jobs.lock();
        if jobs.len() >= self.max_jobs {
            let message = format!(
                "this endpoint holds {} jobs, its limit: retry later, remove ended jobs (DELETE /jobs/{{id}}?remove=true), \
                 or raise it (mpiws serve --max-jobs)",
                jobs.len()
            );
            return Err(Refusal::Full { per_key: false, message, retry_after: self.retry_after(jobs.values()) });
        }
        let owner = job.owner;
        let held = jobs.values().filter(|j| j.owner == owner).count();
        if held >= self.max_jobs_per_key {
            let message = format!(
                "{owner} holds {held} jobs here, its limit: retry later, remove its ended jobs (DELETE /jobs/{{id}}?remove=true), \
                 or raise it (mpiws serve --max-jobs-per-key)"
            );
            return Err(Refusal::Full {
                per_key: true,
                message,
                retry_after: self.retry_after(jobs.values().filter(|j| j.owner == owner)),
            });
        }
        job.keep();
        if let Some(s) = &job.session {
            s.job(&job.id, false);
        }
        jobs.insert(job.id.clone(), job);
        Ok(())
    }

    /// Take a job that never started out of the table (its directory could not be made).
    pub fn forget(&self, id: &str) {
        if let Some(s) = self.jobs.lock().remove(id).and_then(|j| j.session.clone()) {
            s.forget_job(id);
        }
        if let Some(ledger) = &self.ledger {
            ledger.remove_job(id);
        }
    }

    /// Record `owner` as the uploader of upload `id` (before it gets its name).
    pub fn record_upload(&self, id: &str, owner: KeyId) {
        self.uploads.lock().insert(id.to_string(), owner);
        if let Some(k) = self.kept(owner) {
            k.ledger.put_upload(id, &k.owner);
        }
    }

    /// Forget upload `id`'s uploader (the upload could not be kept, or is removed).
    pub fn forget_upload(&self, id: &str) -> Option<KeyId> {
        if let Some(ledger) = &self.ledger {
            ledger.remove_upload(id);
        }
        self.uploads.lock().remove(id)
    }

    /// When the first of `jobs` that has ended expires (and so makes room).
    fn retry_after<'a>(&self, jobs: impl Iterator<Item = &'a Arc<Job>>) -> Duration {
        let now = job::now();
        let soonest = jobs.filter_map(|j| j.state().ended).map(|ended| ended + self.ttl.as_secs_f64() - now).fold(f64::INFINITY, f64::min);
        if soonest.is_finite() {
            Duration::from_secs_f64(soonest.clamp(1.0, 86400.0))
        } else {
            RETRY_FULL
        }
    }

    /// Take job `id` out of the table and remove its files (killing it
    /// first if it runs); false if there was no such job.
    pub async fn remove_job(&self, id: &str) -> bool {
        let Some(job) = self.job(id) else { return false };
        job.end().await;
        if self.jobs.lock().remove(id).is_none() {
            return false; // removed meanwhile by another request
        }
        if let Some(ledger) = &self.ledger {
            ledger.remove_job(id);
        }
        let _ = tokio::fs::remove_dir_all(&job.dir).await; // never follows symlinks inside
        job.release_disk();
        true
    }

    /// Ended jobs whose time to live has passed.
    pub fn expired_jobs(&self) -> Vec<String> {
        let cutoff = job::now() - self.ttl.as_secs_f64();
        self.jobs.lock().values().filter(|j| j.state().ended.is_some_and(|e| e <= cutoff)).map(|j| j.id.clone()).collect()
    }

    /// Kill every job and remove the work directory if the endpoint made
    /// it: the endpoint stops.
    pub async fn close(&self) {
        let all: Vec<Arc<Job>> = self.jobs.lock().drain().map(|(_, j)| j).collect();
        self.sessions.lock().clear();
        for job in &all {
            job.end().await;
        }
        self.workdir.remove();
    }

    pub fn job_dir(&self, id: &str) -> Result<PathBuf> {
        Ok(self.workdir.path()?.join("jobs").join(id))
    }

    /// Where upload `id` is kept; None for an id that is not one of ours.
    pub fn upload_path(&self, id: &str) -> Option<PathBuf> {
        is_id(id).then(|| Some(self.workdir.existing()?.join("files").join(id))).flatten()
    }

    /// Where upload `id` is kept, if `caller` may remove it: it uploaded
    /// it, or has `admin`. None otherwise, as for an upload that does not
    /// exist.
    pub fn own_upload_path(&self, id: &str, caller: &Key) -> Option<PathBuf> {
        let owner = self.uploads.lock().get(id).copied();
        let allowed = caller.allows(Scope::Admin) || owner == Some(caller.id);
        allowed.then(|| self.upload_path(id)).flatten()
    }

    /// Where uploads are kept (the work directory is made if need be).
    pub fn uploads_dir(&self) -> Result<PathBuf> {
        Ok(self.workdir.path()?.join("files"))
    }

    /// Remove the upload at `path` (`files/{id}`), forget its owner and
    /// give its bytes back to the quota.
    pub async fn remove_upload(&self, path: &Path) -> bool {
        let size = safe_file::size_of(path);
        let removed = tokio::fs::remove_file(path).await.is_ok();
        let owner = path.file_name().and_then(|n| n.to_str()).and_then(|id| self.forget_upload(id));
        if removed {
            self.disk.release(owner, size.unwrap_or(0));
        }
        removed
    }
}

fn check_name(name: &str) -> Result<()> {
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.') {
        return err(ErrorClass::Arg, format!("program name {name:?}: letters, digits, '_', '-' and '.'"));
    }
    Ok(())
}

/// A key may act on what `owner` made if it is that key, or has `admin`.
/// (Also the rule for sessions: `session::may_act`.)
fn may_act(caller: &Key, owner: KeyId) -> bool {
    caller.id == owner || caller.allows(Scope::Admin)
}

/// What a job operation is told of a job that does not exist, and of one
/// of another key: the same, word for word.
fn no_job(id: &str) -> Refusal {
    Refusal::NotFound(format!("no job {id} here"))
}

/// A fresh unguessable id: job and file URLs are capabilities.
pub fn new_id() -> String {
    crate::keys::random_hex()
}

fn is_id(s: &str) -> bool {
    s.len() == 32 && s.bytes().all(|c| c.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::Keys;

    const A: &str = "aaaaaaaaaaaaaaaaaaaa";
    const B: &str = "bbbbbbbbbbbbbbbbbbbb";
    const ADMIN: &str = "cccccccccccccccccccc";
    const NO_JOB: &str = "00000000000000000000000000000000";

    fn table(max_jobs: usize, max_jobs_per_key: usize) -> (Jobs, Keys) {
        let keys = Keys::parse(&format!("{A} jobs\n{B} jobs files\n{ADMIN} admin\n")).unwrap();
        let jobs = Jobs::new(&Limits { max_jobs, max_jobs_per_key, ..Limits::default() }, &keys).unwrap();
        jobs.deploy("sleep", "sleep [in:val:seconds:float]").unwrap();
        (jobs, keys)
    }

    fn key<'a>(keys: &'a Keys, secret: &str) -> &'a Key {
        keys.find(secret).unwrap()
    }

    /// A job of `owner`, entered in the table (no directory: it never runs).
    fn spawn(jobs: &Jobs, owner: &Key) -> std::result::Result<Arc<Job>, Refusal> {
        let job = jobs.new_job(jobs.program("sleep").unwrap(), owner, None).unwrap();
        jobs.admit(job.clone()).map(|()| job)
    }

    #[test]
    fn another_keys_job_is_answered_as_one_that_does_not_exist() {
        let (jobs, keys) = table(10, 5);
        let (a, b, admin) = (key(&keys, A), key(&keys, B), key(&keys, ADMIN));
        let job = spawn(&jobs, a).unwrap();
        assert!(jobs.own_job(&job.id, a).is_ok());
        assert!(jobs.own_job(&job.id, admin).is_ok());
        let theirs = jobs.own_job(&job.id, b).err().unwrap();
        let Refusal::NotFound(missing) = jobs.found_job(NO_JOB).err().unwrap() else { panic!("not found") };
        assert_eq!(theirs, Refusal::NotFound(missing.replace(NO_JOB, &job.id)), "word for word");
        // the capability routes (job files) still find it, whoever asks
        assert!(jobs.found_job(&job.id).is_ok());
        let listed = |k: &Key| jobs.jobs_of(k).iter().map(|j| j.id.clone()).collect::<Vec<_>>();
        let job2 = spawn(&jobs, b).unwrap();
        assert_eq!(listed(a), vec![job.id.clone()]);
        assert_eq!(listed(b), vec![job2.id.clone()]);
        assert_eq!(listed(admin).len(), 2);
        assert_eq!(jobs.count(), 2);
        crate::runtime::runtime().block_on(jobs.close()); // its fresh work directory too
    }

    #[test]
    fn a_key_holds_at_most_its_share_of_the_table() {
        let (jobs, keys) = table(3, 2);
        let (a, b) = (key(&keys, A), key(&keys, B));
        spawn(&jobs, a).unwrap();
        spawn(&jobs, a).unwrap();
        let Refusal::Full { per_key, message, retry_after } = spawn(&jobs, a).err().unwrap() else { panic!("full") };
        assert!(per_key);
        assert_eq!(retry_after, RETRY_FULL); // none of its jobs has ended
        assert!(message.contains("--max-jobs-per-key") && message.contains("key 1 holds 2 jobs"), "{message}");
        spawn(&jobs, b).unwrap(); // another key is not held back by it
        let Refusal::Full { per_key, message, .. } = spawn(&jobs, b).err().unwrap() else { panic!("full") };
        assert!(!per_key);
        assert!(message.contains("--max-jobs)"), "{message}");
        crate::runtime::runtime().block_on(jobs.close());
    }

    #[test]
    fn uploads_are_removed_only_by_their_key_or_admin() {
        let (jobs, keys) = table(3, 2);
        let (a, b, admin) = (key(&keys, A), key(&keys, B), key(&keys, ADMIN));
        let dir = jobs.uploads_dir().unwrap();
        let id = new_id();
        std::fs::write(dir.join(&id), b"x").unwrap();
        jobs.record_upload(&id, a.id);
        assert!(jobs.own_upload_path(&id, b).is_none());
        assert_eq!(jobs.own_upload_path(&id, a), jobs.upload_path(&id));
        assert_eq!(jobs.own_upload_path(&id, admin), jobs.upload_path(&id));
        let unowned = new_id(); // left by an earlier run of a given --workdir
        std::fs::write(dir.join(&unowned), b"y").unwrap();
        assert!(jobs.own_upload_path(&unowned, a).is_none());
        assert!(jobs.own_upload_path(&unowned, admin).is_some());
        let rt = crate::runtime::runtime();
        assert!(rt.block_on(jobs.remove_upload(&jobs.upload_path(&id).unwrap())));
        assert!(jobs.uploads.lock().is_empty(), "its owner is forgotten with it");
        rt.block_on(jobs.close());
    }
}
