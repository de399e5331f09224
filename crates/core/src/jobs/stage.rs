//! Bringing a job's input files into its directory: written from the
//! request (by value), pulled from a URL (by reference), or, for a file
//! this endpoint already holds, linked without copying.

use std::path::{Path, PathBuf};

use crate::direct::transport::Transport;
use crate::error::{Error, ErrorClass, Result};

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
    /// The program may change the file (`in_out`): never share it.
    pub writable: bool,
}

pub async fn stage(dir: &Path, inputs: Vec<Input>, transport: &Transport) -> Result<()> {
    for input in inputs {
        let to = dir.join(&input.name);
        let what = |e: std::io::Error| Error::new(ErrorClass::Other, format!("input '{}': {e}", input.name));
        match input.source {
            Source::Bytes(b) => tokio::fs::write(&to, b).await.map_err(what)?,
            Source::Url(url) => {
                transport.download(&url, &to).await.map_err(|e| Error::new(e.class, format!("input '{}': {}", input.name, e.message)))?;
            }
            Source::Local(from) => {
                // A hard link shares the file's data: no copy, however large.
                if input.writable || tokio::fs::hard_link(&from, &to).await.is_err() {
                    tokio::fs::copy(&from, &to).await.map_err(what)?;
                }
            }
        }
    }
    Ok(())
}
