//! Bringing a job's input files into its directory: written from the
//! request (by value), pulled from a URL (by reference, see [`fetch`]), or
//! copied from a file this endpoint already holds. Always a copy of its
//! own: a program that rewrites its input must not change an upload or
//! another job's output (`std::io::copy` between files uses the kernel's
//! `copy_file_range`, which shares blocks where the file system can).
//!
//! [`fetch`]: crate::jobs::fetch

use std::path::{Component, Path, PathBuf};

use tokio::io::AsyncWriteExt;

use crate::error::{Error, ErrorClass, Result};
use crate::jobs::fetch::Fetcher;
use crate::jobs::safe_file::{create_new, make_private_dir, open_beneath};

pub enum Source {
    /// Sent by value in the spawn request.
    Bytes(Vec<u8>),
    /// A URL the job pulls its input from.
    Url(String),
    /// A file on this endpoint (an upload, or another job's file): `rel`
    /// under the directory `root` (see [`open_beneath`]).
    Local { root: PathBuf, rel: String },
    /// A directory to make (a CWL Directory input, before its listing).
    Dir,
}

pub struct Input {
    /// What the client calls it, as errors say it (`input 'x'`).
    pub name: String,
    /// Where it goes in the job's directory: plain names, `a/b/c`; its
    /// directories are made first (the job's directory is new, nothing runs in it yet).
    pub rel: String,
    pub source: Source,
}

/// `rel` under `dir`, if it is made of plain names only.
fn under(dir: &Path, rel: &str) -> Option<PathBuf> {
    let plain = !rel.is_empty() && Path::new(rel).components().all(|c| matches!(c, Component::Normal(_)));
    plain.then(|| dir.join(rel))
}

/// Bring `inputs` into the job directory `dir`, counting their bytes with
/// `claim` (the job's share of the disk quota) before they are written;
/// `replace`: a file already there under an input's name is replaced (a
/// session's; removed, never written through: it may be a symlink).
pub async fn stage(
    dir: &Path,
    inputs: Vec<Input>,
    fetcher: &Fetcher,
    claim: &(dyn Fn(u64) -> std::result::Result<(), String> + Sync),
    replace: bool,
) -> Result<()> {
    for input in inputs {
        let fail = |why: String| Error::new(ErrorClass::Other, format!("{}: {why}", input.name));
        let to = under(dir, &input.rel).ok_or_else(|| fail("not a plain file name".into()))?;
        if let Some(parent) = to.parent().filter(|p| *p != dir) {
            tokio::fs::create_dir_all(parent).await.map_err(|e| fail(e.to_string()))?;
        }
        if replace {
            if let Source::Local { root, rel } = &input.source {
                if same_file(&open_beneath(root, rel).map_err(|e| fail(e.to_string()))?, &to) {
                    continue; // a session's own file, named where it already is
                }
            }
            match tokio::fs::remove_file(&to).await {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(fail(format!("cannot replace it: {e}"))),
                _ => {}
            }
        }
        if let Source::Dir = input.source {
            make_private_dir(&to).map_err(|e| fail(e.to_string()))?;
            continue;
        }
        let mut file = create_new(&to).await.map_err(|e| fail(e.to_string()))?;
        match input.source {
            Source::Dir => unreachable!("made above"),
            Source::Bytes(b) => {
                claim(b.len() as u64).map_err(fail)?;
                file.write_all(&b).await.map_err(|e| fail(e.to_string()))?;
                file.flush().await.map_err(|e| fail(e.to_string()))?;
            }
            Source::Url(url) => {
                fetcher.fetch(&url, &mut file, claim).await.map_err(fail)?;
            }
            Source::Local { root, rel } => {
                let src = open_beneath(&root, &rel).map_err(|e| fail(e.to_string()))?;
                let meta = src.metadata().map_err(|e| fail(e.to_string()))?;
                claim(meta.len()).map_err(fail)?;
                let dst = file.into_std().await;
                let copied = tokio::task::spawn_blocking(move || {
                    let (mut src, mut dst) = (std::io::Read::take(src, meta.len()), dst);
                    std::io::copy(&mut src, &mut dst)
                })
                .await;
                match copied {
                    Ok(Ok(_)) => {}
                    Ok(Err(e)) => return Err(fail(e.to_string())),
                    Err(e) => return Err(fail(e.to_string())),
                }
            }
        }
    }
    Ok(())
}

/// Whether `open` is the file at `path` (not following a link there).
fn same_file(open: &std::fs::File, path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (open.metadata(), std::fs::symlink_metadata(path)) {
        (Ok(a), Ok(b)) => (a.dev(), a.ino()) == (b.dev(), b.ino()),
        _ => false,
    }
}
