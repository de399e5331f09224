//! A program's SOAP request read as it arrives (`program`), so that files of
//! any size pass in bounded memory. A plain envelope is read whole (at most
//! `--max-spawn-body`). Of an MTOM package, the envelope and any base64 part
//! are held (together at most `--max-spawn-body`, and counted against
//! `--max-buffered`), and each binary part is written, as it arrives, to a
//! file of the caller's among the endpoint's uploads (each at most
//! `--max-upload`, its bytes claimed against the disk quota before they are
//! written): the job is given it by its URL, as an upload, and copies it
//! into its own directory. [`Received::discard`] removes those files once
//! the job has its copy (or when no job starts) and gives their bytes back.

use std::path::PathBuf;
use std::sync::Arc;

use http::StatusCode;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use tokio::io::AsyncWriteExt;

use super::envelope::{self, Attachment, Parts, Request};
use super::mtom::{self, Event, Head};
use super::program::Fault;
use crate::error::ErrorClass;
use crate::jobs::disk::Disk;
use crate::jobs::job::{Job, Phase};
use crate::jobs::new_id;
use crate::jobs::safe_file::create_new;
use crate::keys::KeyId;
use crate::service::jobs::files::too_large;
use crate::service::jobs::insufficient_storage;
use crate::service::reply::{read_body, stalled, HttpError};
use crate::service::Endpoint;
use crate::wire::url;

/// A request, and the files its binary parts were written to.
pub struct Received {
    pub request: Request,
    files: Files,
}

/// Files written for a request's parts (the last one perhaps still being
/// written), and the bytes each claimed of its owner's quota.
struct Files {
    disk: Arc<Disk>,
    owner: KeyId,
    written: Vec<(PathBuf, u64)>,
}

impl Files {
    async fn remove(&mut self) {
        for (path, size) in self.written.drain(..) {
            let _ = tokio::fs::remove_file(&path).await;
            self.disk.release(Some(self.owner), size);
        }
    }
}

impl Received {
    /// Remove the parts' files now.
    pub async fn discard(mut self) {
        self.files.remove().await;
    }

    /// Remove the parts' files once `job` no longer needs them: it has staged its inputs (or ended).
    pub fn discard_after(mut self, job: Arc<Job>) {
        if self.files.written.is_empty() {
            return;
        }
        tokio::spawn(async move {
            job.left(Phase::Staging).await;
            self.files.remove().await;
        });
    }
}

/// What the request's body holds: read whole, or (a package) as it comes.
pub async fn receive(ep: &Endpoint, owner: KeyId, content_type: &str, body: Incoming) -> Result<Received, Fault> {
    let files = Files { disk: ep.jobs.disk.clone(), owner, written: Vec::new() };
    let Some(params) = envelope::kind(content_type)? else {
        let what = "the SOAP request (--max-spawn-body; or send files as MTOM attachments, or by URL)";
        let body = read_body(ep, body, usize::try_from(ep.config.max_spawn_body).unwrap_or(usize::MAX), what).await?;
        return Ok(Received { request: envelope::operation(&body, envelope::Attachments::new())?, files });
    };
    let mut package = Package { ep, files, claim: ep.buffered.start(), held: 0, current: None };
    match package.read(&params, body).await {
        Ok(request) => Ok(Received { request, files: package.files }),
        Err(e) => {
            package.files.remove().await;
            Err(e)
        }
    }
}

/// An MTOM package being read.
struct Package<'a> {
    ep: &'a Endpoint,
    files: Files,
    /// The bytes held in memory, counted against `--max-buffered`.
    claim: crate::service::buffered::Claim,
    held: u64,
    current: Option<Current>,
}

/// The part being read.
enum Current {
    /// Held: the envelope, a base64 part.
    Held { head: Head, root: bool, bytes: Vec<u8> },
    /// Written to a file as it comes (the last of `Files::written`, named `id` when whole).
    File { cid: String, id: String, file: tokio::fs::File, size: u64 },
    /// Read past: a part no Include can name (it has no Content-ID).
    Skipped,
}

impl Package<'_> {
    async fn read(&mut self, params: &std::collections::HashMap<String, String>, mut body: Incoming) -> Result<Request, Fault> {
        let mut reader = mtom::Reader::new(params.get("boundary").map_or("", String::as_str)).map_err(malformed)?;
        let mut parts = Parts::new(params);
        let mut events = Vec::new();
        let timeout = self.ep.config.body_timeout;
        loop {
            let frame = match tokio::time::timeout(timeout, body.frame()).await {
                Err(_) => return Err(stalled(timeout).into()),
                Ok(None) => break,
                Ok(Some(frame)) => frame
                    .map_err(|e| HttpError::new(StatusCode::BAD_REQUEST, ErrorClass::Arg, format!("cannot read the MTOM package: {e}")))?,
            };
            let Ok(data) = frame.into_data() else { continue };
            reader.feed(&data, &mut events).map_err(malformed)?;
            for event in events.drain(..) {
                self.event(event, &mut parts).await?;
            }
        }
        reader.finish().map_err(malformed)?;
        let (root, attachments) = parts.whole()?;
        Ok(envelope::operation(&root, attachments)?)
    }

    async fn event(&mut self, event: Event, parts: &mut Parts) -> Result<(), Fault> {
        match event {
            Event::Start(head) => {
                let root = parts.is_root(&head);
                self.current = Some(match (&head.content_id, root || !mtom::is_binary(&head.encoding)) {
                    (_, true) => Current::Held { head, root, bytes: Vec::new() },
                    (None, false) => Current::Skipped,
                    (Some(cid), false) => {
                        let id = new_id();
                        let part = self.ep.jobs.uploads_dir().map_err(|e| internal(e.message))?.join(format!("{id}.part"));
                        let file = create_new(&part).await.map_err(|e| internal(format!("cannot store a part: {e}")))?;
                        self.files.written.push((part, 0));
                        Current::File { cid: cid.clone(), id, file, size: 0 }
                    }
                });
            }
            Event::Data(data) => match self.current.as_mut() {
                Some(Current::Held { bytes, .. }) => {
                    let n = data.len() as u64;
                    let max = self.ep.config.max_spawn_body;
                    if self.held.saturating_add(n) > max {
                        let message = format!("the SOAP envelope and its base64 parts are over {max} bytes (--max-spawn-body)");
                        return Err(HttpError::new(StatusCode::PAYLOAD_TOO_LARGE, ErrorClass::Arg, message).into());
                    }
                    self.claim.grow(n).map_err(|max| {
                        let message =
                            format!("this endpoint holds its maximum of {max} bytes of request bodies now (--max-buffered); try again");
                        HttpError::retry_later(
                            StatusCode::SERVICE_UNAVAILABLE,
                            ErrorClass::Other,
                            message,
                            std::time::Duration::from_secs(1),
                        )
                    })?;
                    self.held += n;
                    bytes.extend_from_slice(&data);
                }
                Some(Current::File { file, size, .. }) => {
                    let n = data.len() as u64;
                    let max = self.ep.config.jobs.max_upload;
                    if size.saturating_add(n) > max {
                        return Err(too_large(max).into());
                    }
                    self.files.disk.claim(Some(self.files.owner), n).map_err(insufficient_storage)?;
                    *size += n;
                    self.files.written.last_mut().expect("its file is the last").1 += n; // given back if this fails
                    file.write_all(&data).await.map_err(|e| internal(format!("cannot store a part: {e}")))?;
                }
                Some(Current::Skipped) | None => {}
            },
            Event::End => match self.current.take() {
                Some(Current::Held { head, root: true, bytes }) => parts.root(mtom::decode(&head.encoding, bytes).map_err(malformed)?)?,
                Some(Current::Held { head, root: false, bytes }) => {
                    let bytes = mtom::decode(&head.encoding, bytes).map_err(malformed)?;
                    parts.attachment(head.content_id, Attachment::Bytes(bytes))?;
                }
                Some(Current::File { cid, id, mut file, .. }) => {
                    file.flush().await.map_err(|e| internal(format!("cannot store a part: {e}")))?;
                    // Only a whole part gets its name: a URL never points at half a file.
                    let (part, _) = self.files.written.last_mut().expect("its file is the last");
                    let whole = part.with_file_name(&id);
                    tokio::fs::rename(&*part, &whole).await.map_err(|e| internal(format!("cannot store a part: {e}")))?;
                    *part = whole;
                    parts.attachment(Some(cid), Attachment::Upload(url::join(&self.ep.url(), &format!("/files/{id}"))))?;
                }
                Some(Current::Skipped) | None => {}
            },
        }
        Ok(())
    }
}

/// A package that is not what MTOM says it is (a fault of the envelope's kind: no error class).
fn malformed(message: String) -> Fault {
    envelope::sender(message).into()
}

fn internal(message: String) -> Fault {
    HttpError::new(StatusCode::INTERNAL_SERVER_ERROR, ErrorClass::Other, message).into()
}
