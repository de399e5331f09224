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

pub mod describe;
pub mod files;
pub mod job;
pub mod kill;
pub mod results;
pub mod spawn;
pub mod stage;
pub mod status;
pub mod template;

use std::collections::{BTreeMap, HashMap};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use http::StatusCode;
use parking_lot::{Mutex, RwLock};

use crate::error::{err, ErrorClass, Result};
use crate::service::reply::{error, Reply};
use job::Job;
use template::{Template, Word};

/// A deployed program: its name, template and the executable it runs.
pub struct Program {
    pub name: String,
    pub template: Template,
    /// The template's first word; made absolute if it names a file, since
    /// each job runs in its own directory.
    pub executable: PathBuf,
}

pub struct Jobs {
    root: PathBuf,
    programs: RwLock<BTreeMap<String, Arc<Program>>>,
    jobs: Mutex<HashMap<String, Arc<Job>>>,
}

impl Jobs {
    /// Jobs and uploaded files live under `root` (created on first use).
    pub fn new(root: PathBuf) -> Jobs {
        Jobs { root, programs: RwLock::new(BTreeMap::new()), jobs: Mutex::new(HashMap::new()) }
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

    fn add_job(&self, job: Arc<Job>) {
        self.jobs.lock().insert(job.id.clone(), job);
    }

    fn job_dir(&self, id: &str) -> PathBuf {
        self.root.join("jobs").join(id)
    }

    /// Where upload `id` is kept; None for an id that is not one of ours.
    fn upload_path(&self, id: &str) -> Option<PathBuf> {
        is_id(id).then(|| self.uploads_dir().join(id))
    }

    fn uploads_dir(&self) -> PathBuf {
        self.root.join("files")
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

/// The size of a file, if it exists.
fn size_of(path: &Path) -> Option<u64> {
    std::fs::metadata(path).ok().filter(|m| m.is_file()).map(|m| m.len())
}
