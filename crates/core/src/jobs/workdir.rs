//! The endpoint's private work directory, where uploads and jobs live.
//! Other users of the machine must not read it, nor prepare it for us: a
//! predictable name in `/tmp` could be planted beforehand as a symlink to
//! somewhere of theirs. So without `--workdir` it is a fresh unguessable
//! name made with `mkdir` (which fails on anything already there, a
//! symlink included), mode 0700, on first use (most endpoints, every rank
//! of `mpiws run`, never run a job: they make none); a given `--workdir`
//! is checked at start, made 0700 if missing, and refused if it is a
//! symlink, not ours, or writable by others. A directory the endpoint made
//! is removed when it stops.

use std::io::ErrorKind;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use parking_lot::Mutex;

use crate::error::{err, ErrorClass, Result};
use crate::jobs::new_id;
use crate::jobs::safe_file::make_private_dir;

pub struct WorkDir {
    /// None until a fresh one is first needed.
    dir: Mutex<Option<Dir>>,
}

struct Dir {
    path: PathBuf,
    /// Made by this endpoint: removed when it stops.
    made: bool,
}

/// The subdirectories: one per job under `jobs`, the uploads in `files`, one per session under `sessions`.
pub const SUBDIRS: [&str; 3] = ["jobs", "files", "sessions"];

impl WorkDir {
    /// A given directory is checked (and made) now; else one is made on first use.
    pub fn open(given: Option<&Path>) -> Result<WorkDir> {
        let dir = match given {
            None => None,
            Some(path) => Some(with_subdirs(existing_or_made(path)?)?),
        };
        Ok(WorkDir { dir: Mutex::new(dir) })
    }

    /// The directory, made now if it is the first time it is needed.
    pub fn path(&self) -> Result<PathBuf> {
        let mut dir = self.dir.lock();
        if dir.is_none() {
            *dir = Some(with_subdirs(fresh()?)?);
        }
        Ok(dir.as_ref().map(|d| d.path.clone()).expect("made above"))
    }

    /// The directory if there is one yet (nothing is made).
    pub fn existing(&self) -> Option<PathBuf> {
        self.dir.lock().as_ref().map(|d| d.path.clone())
    }

    /// Remove the directory if this endpoint made it (its jobs have ended).
    pub fn remove(&self) {
        if let Some(d) = self.dir.lock().as_ref().filter(|d| d.made) {
            let _ = std::fs::remove_dir_all(&d.path); // does not follow symlinks inside
        }
    }
}

fn with_subdirs(dir: Dir) -> Result<Dir> {
    for sub in SUBDIRS {
        let path = dir.path.join(sub);
        match make_private_dir(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::AlreadyExists => check_ours(&path)?,
            Err(e) => return err(ErrorClass::Other, format!("cannot make {}: {e}", path.display())),
        }
    }
    Ok(dir)
}

/// A new directory with an unguessable name in the temporary directory.
fn fresh() -> Result<Dir> {
    let tmp = std::env::temp_dir();
    let path = tmp.join(format!("mpiws-{}", new_id()));
    match make_private_dir(&path) {
        Ok(()) => Ok(Dir { path, made: true }),
        Err(e) => err(ErrorClass::Other, format!("cannot make a work directory in {}: {e} (give one with --workdir)", tmp.display())),
    }
}

fn existing_or_made(path: &Path) -> Result<Dir> {
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == ErrorKind::NotFound => {
            if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
                std::fs::create_dir_all(parent).or_else(|e| err(ErrorClass::Other, format!("cannot make {}: {e}", parent.display())))?;
            }
            make_private_dir(path)
                .or_else(|e| err(ErrorClass::Other, format!("cannot make the work directory {}: {e}", path.display())))?;
            Ok(Dir { path: path.to_path_buf(), made: true })
        }
        Err(e) => err(ErrorClass::Other, format!("work directory {}: {e}", path.display())),
        Ok(_) => {
            check_ours(path)?;
            Ok(Dir { path: path.to_path_buf(), made: false })
        }
    }
}

/// A directory we may keep files in: a real directory (not a symlink),
/// ours, that no one else may write to.
fn check_ours(path: &Path) -> Result<()> {
    let refuse = |why: String| err(ErrorClass::Arg, format!("refusing work directory {}: {why}", path.display()));
    let meta = match std::fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) => return refuse(e.to_string()),
    };
    if meta.file_type().is_symlink() {
        return refuse("it is a symlink; give the directory it points to, if it is yours".into());
    }
    if !meta.is_dir() {
        return refuse("it is not a directory".into());
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    if meta.uid() != unsafe { libc::geteuid() } {
        return refuse(format!("it belongs to user {}, not to this one", meta.uid()));
    }
    if meta.mode() & 0o022 != 0 {
        return refuse(format!("others may write to it (mode {:o}); chmod go-w it, or give another", meta.mode() & 0o7777));
    }
    Ok(())
}
