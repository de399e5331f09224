//! Bringing a job's input files into its directory: written from the
//! request (by value), pulled from a URL (by reference, see [`fetch`]), or
//! copied from a file this endpoint already holds. Always a copy of its
//! own: a program that rewrites its input must not change an upload or
//! another job's output (`std::io::copy` between files uses the kernel's
//! `copy_file_range`, which shares blocks where the file system can).
//!
//! [`fetch`]: crate::jobs::fetch

use std::path::PathBuf;

use tokio::io::AsyncWriteExt;

use crate::error::{Error, ErrorClass, Result};
use crate::jobs::fetch::Fetcher;
use crate::jobs::job::Job;
use crate::jobs::safe_file::{create_new, inside, open_regular};

pub enum Source {
    /// Sent by value in the spawn request.
    Bytes(Vec<u8>),
    /// A URL the job pulls its input from.
    Url(String),
    /// A file on this endpoint (an upload, or another job's file).
    Local(PathBuf),
}

pub struct Input {
    pub name: String,
    pub source: Source,
}

pub async fn stage(job: &Job, inputs: Vec<Input>, fetcher: &Fetcher) -> Result<()> {
    for input in inputs {
        let fail = |why: String| Error::new(ErrorClass::Other, format!("input '{}': {why}", input.name));
        let to = inside(&job.dir, &input.name).ok_or_else(|| fail("not a plain file name".into()))?;
        let mut file = create_new(&to).await.map_err(|e| fail(e.to_string()))?;
        match input.source {
            Source::Bytes(b) => {
                job.claim(b.len() as u64).map_err(fail)?;
                file.write_all(&b).await.map_err(|e| fail(e.to_string()))?;
                file.flush().await.map_err(|e| fail(e.to_string()))?;
            }
            Source::Url(url) => {
                fetcher.fetch(&url, &mut file, &|n| job.claim(n)).await.map_err(fail)?;
            }
            Source::Local(from) => {
                let (src, meta) = open_regular(&from).await.map_err(|e| fail(e.to_string()))?;
                job.claim(meta.len()).map_err(fail)?;
                let (src, dst) = (src.into_std().await, file.into_std().await);
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
