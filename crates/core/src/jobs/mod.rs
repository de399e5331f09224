//! **Legacy programs as services.** A command-line program, deployed with a
//! one-line [`template::Template`], becomes a service with no change to the
//! program: clients spawn jobs of it, watch them, fetch their results (by
//! value, or by URL), and kill them. Files of any size pass by reference: a
//! job pulls an input from a URL itself, and one on this same endpoint is
//! linked, not copied.
//!
//! [`Jobs`] is an endpoint's register of programs, jobs and uploaded files;
//! [`job`] runs one job (stage inputs, run, record the outcome) and
//! [`stage`] brings its input files. One HTTP operation per file:
//! [`describe`], [`spawn`] (also *call*), [`status`], [`results`], [`kill`],
//! [`files`] (uploads and downloads).
//!
//! What keeps a client from harming the endpoint's machine through them:
//! [`workdir`] (a private work directory), [`safe_file`] (no job file is
//! read through a symlink, no name leaves its directory), [`fetch`] (URL
//! inputs only from allowed addresses, bounded in size and time),
//! [`disk`] (a quota on the work directory), [`process_group`] (a kill
//! ends everything a job started), and a bounded job table whose ended
//! jobs and uploads [`expiry`] removes after their time to live.

pub mod describe;
pub mod disk;
pub mod expiry;
pub mod fetch;
pub mod files;
pub mod job;
pub mod kill;
pub mod process_group;
pub mod results;
pub mod safe_file;
pub mod spawn;
pub mod stage;
pub mod status;
pub mod template;
pub mod workdir;

use std::collections::{BTreeMap, HashMap};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use http::StatusCode;
use parking_lot::{Mutex, RwLock};

use crate::error::{err, ErrorClass, Result};
use crate::service::reply::{error, Reply};
use crate::service::Config;
use disk::Disk;
use fetch::Fetcher;
use job::Job;
use template::{Template, Word};
use workdir::WorkDir;

/// A deployed program: its name, template and the executable it runs.
pub struct Program {
    pub name: String,
    pub template: Template,
    /// The template's first word; made absolute if it names a file, since
    /// each job runs in its own directory.
    pub executable: PathBuf,
}

pub struct Jobs {
    workdir: WorkDir,
    programs: RwLock<BTreeMap<String, Arc<Program>>>,
    jobs: Mutex<HashMap<String, Arc<Job>>>,
    pub disk: Arc<Disk>,
    pub fetcher: Arc<Fetcher>,
    max_jobs: usize,
    /// How long ended jobs and uploads are kept.
    pub ttl: Duration,
}

/// When the job table is full and no ended job is due to expire soon.
const RETRY_FULL: Duration = Duration::from_secs(60);

impl Jobs {
    /// Jobs and uploaded files live in the work directory `config` gives
    /// (or a fresh private one); its limits apply to them.
    pub fn new(config: &Config) -> Result<Jobs> {
        let workdir = WorkDir::open(config.workdir.as_deref())?;
        let disk = Disk::new(config.max_disk);
        if let Some(given) = workdir.existing() {
            disk.force(safe_file::bytes_under(&given)); // what a given --workdir already holds
        }
        let fetcher = Fetcher::new(&config.fetch_allow, config.max_fetch.unwrap_or(config.max_upload), config.fetch_timeout)?;
        Ok(Jobs {
            workdir,
            programs: RwLock::new(BTreeMap::new()),
            jobs: Mutex::new(HashMap::new()),
            disk: Arc::new(disk),
            fetcher: Arc::new(fetcher),
            max_jobs: config.max_jobs,
            ttl: config.job_ttl,
        })
    }

    /// The work directory (made now if it was not yet).
    pub fn workdir(&self) -> Result<PathBuf> {
        self.workdir.path()
    }

    /// Deploy `template` as program `name` (replacing one of that name).
    pub fn deploy(&self, name: &str, template: &str) -> Result<()> {
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.') {
            return err(ErrorClass::Arg, format!("program name {name:?}: letters, digits, '_', '-' and '.'"));
        }
        let template = Template::parse(template)?;
        let Some(Word::Literal(first)) = template.words.first() else { unreachable!("a template starts with its program") };
        let executable = if first.contains('/') {
            std::fs::canonicalize(first).or_else(|e| err(ErrorClass::Arg, format!("program {first}: {e}")))?
        } else {
            PathBuf::from(first) // looked up on PATH
        };
        let program = Program { name: name.to_string(), template, executable };
        self.programs.write().insert(name.to_string(), Arc::new(program));
        Ok(())
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

    /// Job `id`, or the 404 every job operation answers without it.
    pub fn job_or_404(&self, id: &str) -> std::result::Result<Arc<Job>, Reply> {
        self.job(id).ok_or_else(|| error(StatusCode::NOT_FOUND, ErrorClass::Arg, format!("no job {id} here")))
    }

    /// Program `name`, or the 404 every program operation answers without it.
    pub fn program_or_404(&self, name: &str) -> std::result::Result<Arc<Program>, Reply> {
        self.program(name)
            .ok_or_else(|| error(StatusCode::NOT_FOUND, ErrorClass::Arg, format!("no program {name:?} is deployed here")))
    }

    /// Enter `job` in the table, if there is room (`max_jobs`); else the
    /// 503 that says when an ended job will have made room.
    fn admit(&self, job: Arc<Job>) -> std::result::Result<(), Reply> {
        let mut jobs = self.jobs.lock();
        if jobs.len() >= self.max_jobs {
            let now = job::now();
            let soonest = jobs.values().filter_map(|j| j.state().ended).map(|ended| ended + self.ttl.as_secs_f64() - now).fold(f64::INFINITY, f64::min);
            let retry = if soonest.is_finite() { Duration::from_secs_f64(soonest.clamp(1.0, 86400.0)) } else { RETRY_FULL };
            let mut reply = error(
                StatusCode::SERVICE_UNAVAILABLE,
                ErrorClass::Other,
                format!(
                    "this endpoint holds {} jobs, its limit: retry later, remove ended jobs (DELETE /jobs/{{id}}?remove=true), \
                     or raise it (mpiws serve --max-jobs)",
                    jobs.len()
                ),
            );
            reply.headers_mut().insert(http::header::RETRY_AFTER, http::HeaderValue::from(retry.as_secs().max(1)));
            return Err(reply);
        }
        jobs.insert(job.id.clone(), job);
        Ok(())
    }

    /// Take job `id` out of the table and remove its files (killing it
    /// first if it runs); false if there was no such job.
    pub async fn remove_job(&self, id: &str) -> bool {
        let Some(job) = self.job(id) else { return false };
        job.end().await;
        if self.jobs.lock().remove(id).is_none() {
            return false; // removed meanwhile by another request
        }
        let _ = tokio::fs::remove_dir_all(&job.dir).await; // never follows symlinks inside
        job.release_disk();
        true
    }

    /// Ended jobs whose time to live has passed.
    fn expired_jobs(&self) -> Vec<String> {
        let cutoff = job::now() - self.ttl.as_secs_f64();
        self.jobs.lock().values().filter(|j| j.state().ended.is_some_and(|e| e <= cutoff)).map(|j| j.id.clone()).collect()
    }

    /// Kill every job and remove the work directory if the endpoint made
    /// it: the endpoint stops.
    pub async fn close(&self) {
        let all: Vec<Arc<Job>> = self.jobs.lock().drain().map(|(_, j)| j).collect();
        for job in &all {
            job.end().await;
        }
        self.workdir.remove();
    }

    fn job_dir(&self, id: &str) -> Result<PathBuf> {
        Ok(self.workdir.path()?.join("jobs").join(id))
    }

    /// Where upload `id` is kept; None for an id that is not one of ours.
    fn upload_path(&self, id: &str) -> Option<PathBuf> {
        is_id(id).then(|| Some(self.workdir.existing()?.join("files").join(id))).flatten()
    }

    /// Where uploads are kept (the work directory is made if need be).
    fn uploads_dir(&self) -> Result<PathBuf> {
        Ok(self.workdir.path()?.join("files"))
    }

    /// Remove upload `id` and give its bytes back to the quota.
    async fn remove_upload(&self, path: &Path) -> bool {
        let size = safe_file::size_of(path);
        let removed = tokio::fs::remove_file(path).await.is_ok();
        if removed {
            self.disk.release(size.unwrap_or(0));
        }
        removed
    }
}

/// A fresh unguessable id: job and file URLs are capabilities.
pub fn new_id() -> String {
    let mut b = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .expect("/dev/urandom is readable");
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn is_id(s: &str) -> bool {
    s.len() == 32 && s.bytes().all(|c| c.is_ascii_hexdigit())
}
