//! `Comm`: a communicator's point-to-point calls. Ranks are local to the
//! communicator; wildcards and PROC_NULL use MPI's values.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use mpiws_core::{Comm as CoreComm, Completion, Instance as CoreInstance, RecvBuffer, Request as CoreRequest};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::buffers::{bytes_of, plain, to_bytes, Dest};
use crate::errors::IntoPy;
use crate::request::{Message, Request};
use crate::wait::{secs, wait_in_slices};

#[pyclass(module = "mpiws._core", frozen, weakref)]
pub struct Comm {
    pub inner: CoreComm,
}

impl From<CoreComm> for Comm {
    fn from(inner: CoreComm) -> Self {
        Comm { inner }
    }
}

#[pymethods]
impl Comm {
    #[getter]
    fn rank(&self) -> u32 {
        self.inner.rank
    }
    #[getter]
    fn size(&self) -> u32 {
        self.inner.size()
    }
    #[getter]
    fn context(&self) -> u64 {
        self.inner.context
    }
    /// World rank of each local rank.
    #[getter]
    fn group(&self) -> Vec<u32> {
        self.inner.group.to_vec()
    }
    /// The endpoint URL of every world rank of the domain, in rank order.
    #[getter]
    fn endpoints(&self) -> Vec<String> {
        self.inner.instance.binding.endpoints.clone()
    }

    /// Wait until every send of this rank is acknowledged or failed; false
    /// if `timeout` passed first. Raises if a completed send was not delivered.
    #[pyo3(signature = (timeout=None))]
    fn flush(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<bool> {
        flush(py, &self.inner.instance, timeout)
    }

    /// Start a send of `buffers` (any contiguous buffers, sent back to back).
    /// `parts` gives their lengths when the receiver must split them again.
    /// `tell_match`: report when a receive took the message (the "matched"
    /// event of a standard send; a synchronous send's completion says so).
    #[pyo3(signature = (dest, tag, buffers, split=false, sync=false, tell_match=false))]
    #[allow(clippy::too_many_arguments)]
    fn isend(
        &self,
        py: Python<'_>,
        dest: i64,
        tag: i64,
        buffers: Vec<Bound<'_, PyAny>>,
        split: bool,
        sync: bool,
        tell_match: bool,
    ) -> PyResult<Request> {
        self.start_send(py, dest, tag, chunks_of(&buffers)?, split, sync, false, tell_match)
    }

    /// A blocking send: `isend` and its wait in one call (the common case,
    /// without a Request object in between).
    /// With `timeout` (seconds), ERR_TIMEOUT if not sent by then: the
    /// message is withdrawn, unless a receive took it just then (the send
    /// then completes).
    #[pyo3(signature = (dest, tag, buffers, split=false, sync=false, timeout=None))]
    #[allow(clippy::too_many_arguments)]
    fn send(
        &self,
        py: Python<'_>,
        dest: i64,
        tag: i64,
        buffers: Vec<Bound<'_, PyAny>>,
        split: bool,
        sync: bool,
        timeout: Option<f64>,
    ) -> PyResult<()> {
        let r = self.start_send(py, dest, tag, chunks_of(&buffers)?, split, sync, true, false)?;
        r.finish(py, "send", timeout).map(|_| ())
    }

    /// `send` of a buffer given alone, when the buffer rules take it as
    /// given (`buffers::plain`: a send's common case, without a Python
    /// call); false, having done nothing, when they must read it.
    #[pyo3(signature = (dest, tag, buffer, sync=false, timeout=None))]
    fn send_plain(
        &self,
        py: Python<'_>,
        dest: i64,
        tag: i64,
        buffer: &Bound<'_, PyAny>,
        sync: bool,
        timeout: Option<f64>,
    ) -> PyResult<bool> {
        let Some(buf) = plain(buffer, false) else { return Ok(false) };
        let r = self.start_send(py, dest, tag, vec![bytes_of(buf)], false, sync, true, false)?;
        r.finish(py, "send", timeout)?;
        Ok(true)
    }

    /// `recv` into a buffer given alone, as `send_plain`: (source, tag,
    /// bytes received), or None, having done nothing, when the buffer rules
    /// must read it.
    #[pyo3(signature = (source, tag, buffer, timeout=None))]
    fn recv_plain(
        &self,
        py: Python<'_>,
        source: i64,
        tag: i64,
        buffer: &Bound<'_, PyAny>,
        timeout: Option<f64>,
    ) -> PyResult<Option<(i64, i64, usize)>> {
        let Some(r) = self.irecv_plain(source, tag, buffer)? else { return Ok(None) };
        let msg = r.finish(py, "receive", timeout)?.expect("a receive yields a message");
        let n = msg.copy_into(py, buffer, None)?;
        Ok(Some((msg.source, msg.tag, n)))
    }

    /// `irecv` into a buffer given alone, as `recv_plain`: its request, or
    /// None, having done nothing, when the buffer rules must read it.
    fn irecv_plain(&self, source: i64, tag: i64, buffer: &Bound<'_, PyAny>) -> PyResult<Option<Request>> {
        let Some(buf) = plain(buffer, true) else { return Ok(None) };
        self.post_recv(source, tag, Some(Box::new(Dest::of(buf)))).map(Some)
    }

    /// `Sendrecv` in one call: the receive is posted, then the send is
    /// written once this thread reads the source's stream, so the peer's
    /// message finds it reading (`Request::wait_after`). Returns the
    /// received message, after the send completed too.
    #[pyo3(signature = (dest, sendtag, buffers, source, recvtag, buffer=None, timeout=None, split=false))]
    #[allow(clippy::too_many_arguments)]
    fn sendrecv(
        &self,
        py: Python<'_>,
        dest: i64,
        sendtag: i64,
        buffers: Vec<Bound<'_, PyAny>>,
        source: i64,
        recvtag: i64,
        buffer: Option<&Bound<'_, PyAny>>,
        timeout: Option<f64>,
        split: bool,
    ) -> PyResult<Message> {
        let chunks = chunks_of(&buffers)?;
        let parts = if split { chunks.iter().map(|c| c.len() as u64).collect() } else { Vec::new() };
        let r = self.irecv(source, recvtag, buffer)?;
        let (comm, keep) = (&self.inner, chunks.clone());
        let mut sent = None;
        let got = r.wait_after(py, timeout, || sent = Some(comm.isend(dest, sendtag, chunks, parts, false)));
        let sent = sent.expect("the first wait starts the send").py_err()?;
        let s = Request::new(CoreRequest::send(self.inner.clone(), sent, dest, None), keep);
        if !got? {
            r.expired(py, "receive", timeout)?;
        }
        s.finish(py, "send", None)?;
        Ok(r.take()?.expect("a receive yields a message"))
    }

    /// A blocking receive: `irecv` and its wait in one call.
    /// With `timeout` (seconds), ERR_TIMEOUT if nothing matched by then
    /// (the receive is withdrawn: a later message waits for another).
    #[pyo3(signature = (source, tag, buffer=None, timeout=None))]
    fn recv(&self, py: Python<'_>, source: i64, tag: i64, buffer: Option<&Bound<'_, PyAny>>, timeout: Option<f64>) -> PyResult<Message> {
        let r = self.irecv(source, tag, buffer)?;
        Ok(r.finish(py, "receive", timeout)?.expect("a receive yields a message"))
    }

    /// Post a receive; a large message may be read straight into `buffer`.
    #[pyo3(signature = (source, tag, buffer=None))]
    fn irecv(&self, source: i64, tag: i64, buffer: Option<&Bound<'_, PyAny>>) -> PyResult<Request> {
        let buffer = match buffer {
            Some(b) => Some(Box::new(Dest::get(b)?) as Box<dyn RecvBuffer>),
            None => None,
        };
        self.post_recv(source, tag, buffer)
    }

    /// (source, tag, nbytes) of the next matching message, or None if none
    /// arrives within `timeout` (0: just look; None: wait for ever).
    #[pyo3(signature = (source, tag, timeout=None))]
    fn probe(&self, py: Python<'_>, source: i64, tag: i64, timeout: Option<f64>) -> PyResult<Option<(i64, i64, usize)>> {
        if timeout == Some(0.0) {
            return self.inner.probe(source, tag, Some(Duration::ZERO)).py_err();
        }
        let comm = self.inner.clone();
        let mut found = Ok(None);
        wait_in_slices(py, timeout, |slice| {
            found = comm.probe(source, tag, Some(slice));
            !matches!(found, Ok(None))
        })?;
        found.py_err()
    }

    /// Run a collective (or, `nonblocking`, start it); the Request's message
    /// holds the result blocks as parts. See `mpiws_core::Call`: on an
    /// intercommunicator `root` may be ROOT or PROC_NULL; `sources` and
    /// `destinations` are a neighbourhood exchange's (rank, key) edges.
    #[pyo3(signature = (name, root=0, data=None, blocks=None, op=None, counts=None, length=None, sources=None, destinations=None, algorithm=None, hint=None, nonblocking=false, timeout=None))]
    #[allow(clippy::too_many_arguments)]
    fn collective(
        &self,
        py: Python<'_>,
        name: &str,
        root: i64,
        data: Option<Bound<'_, PyAny>>,
        blocks: Option<Vec<Bound<'_, PyAny>>>,
        op: Option<(String, String)>,
        counts: Option<Vec<usize>>,
        length: Option<usize>,
        sources: crate::collective::Edges,
        destinations: crate::collective::Edges,
        algorithm: Option<String>,
        hint: Option<usize>,
        nonblocking: bool,
        timeout: Option<f64>,
    ) -> PyResult<Request> {
        let call = crate::collective::call(name, root, data, blocks, op, counts, length, sources, destinations)?;
        let timeout = secs(timeout);
        let c = if nonblocking {
            self.inner.icollective(call, algorithm.as_deref(), hint, timeout).py_err()?
        } else {
            let comm = self.inner.clone();
            let out = py.detach(move || comm.collective_outcome(call, algorithm.as_deref(), hint, timeout)).py_err()?;
            let c = Completion::new();
            c.complete(Ok(out));
            c
        };
        Ok(Request::new(CoreRequest::call(self.inner.clone(), c), Vec::new()))
    }

    /// Context for the next communicator derived from this one.
    #[pyo3(signature = (salt=0))]
    fn next_context(&self, salt: u64) -> u64 {
        self.inner.next_context(salt)
    }

    /// Where partitioned point-to-point with `tag` travels (`mpi::Comm::partitioned`).
    fn partitioned(&self, tag: i64) -> Comm {
        self.inner.partitioned(tag).into()
    }

    /// Context for a communicator only `group`'s members create.
    fn group_context(&self, group: Vec<u32>, tag: u64) -> u64 {
        self.inner.group_context(&group, tag)
    }

    /// Communicator over `group` (world ranks); None if this rank is not in it.
    fn derive(&self, context: u64, group: Vec<u32>) -> Option<Comm> {
        self.inner.derive(context, group).map(Comm::from)
    }

    /// Intercommunicator with `context` between `local_group` (world ranks,
    /// this rank among them) and `remote_group`: point-to-point ranks name
    /// the remote group's members. None if this rank is not in `local_group`.
    fn derive_inter(&self, context: u64, local_group: Vec<u32>, remote_group: Vec<u32>) -> Option<Comm> {
        self.inner.derive_inter(context, local_group, remote_group).map(Comm::from)
    }

    /// World rank of each remote rank of an intercommunicator; None for an
    /// intracommunicator.
    #[getter]
    fn remote_group(&self) -> Option<Vec<u32>> {
        self.inner.remote_group().map(|g| g.to_vec())
    }

    fn world_rank(&self, local: i64) -> PyResult<u32> {
        self.inner.world_rank(local).py_err()
    }

    fn local_rank(&self, world: u32) -> Option<u32> {
        self.inner.local_rank(world)
    }

    /// Exchange a small byte string with every member (collective).
    #[pyo3(signature = (data, timeout=None))]
    fn allgather_bytes<'py>(&self, py: Python<'py>, data: Vec<u8>, timeout: Option<f64>) -> PyResult<Vec<Bound<'py, PyBytes>>> {
        let comm = self.inner.clone();
        let out = py.detach(move || comm.allgather_bytes(data.into(), secs(timeout))).py_err()?;
        Ok(out.iter().map(|b| PyBytes::new(py, b)).collect())
    }
}

impl Comm {
    fn post_recv(&self, source: i64, tag: i64, buffer: Option<Box<dyn RecvBuffer>>) -> PyResult<Request> {
        let (id, c) = self.inner.irecv_into(source, tag, buffer).py_err()?;
        Ok(Request::new(CoreRequest::recv(self.inner.clone(), c, id, source), Vec::new()))
    }

    /// `inline`: a blocking send, which writes a large message itself.
    #[allow(clippy::too_many_arguments)]
    fn start_send(
        &self,
        py: Python<'_>,
        dest: i64,
        tag: i64,
        chunks: Vec<Bytes>,
        split: bool,
        sync: bool,
        inline: bool,
        tell_match: bool,
    ) -> PyResult<Request> {
        let parts = if split { chunks.iter().map(|c| c.len() as u64).collect() } else { Vec::new() };
        // The send may write to a socket from this thread: without the GIL.
        // A non-blocking send is tracked: its "completed" event may be asked for.
        let start = |c: &CoreComm| {
            if inline {
                c.send_start(dest, tag, chunks.clone(), parts, sync).map(|(c, t)| (c, Some(t)))
            } else {
                c.isend_tracked(dest, tag, chunks.clone(), parts, sync, tell_match).map(|(c, t)| (c, Some(t)))
            }
        };
        let (c, track) = py.detach(|| start(&self.inner)).py_err()?;
        Ok(Request::new(CoreRequest::send(self.inner.clone(), c, dest, track), chunks))
    }
}

fn chunks_of(buffers: &[Bound<'_, PyAny>]) -> PyResult<Vec<Bytes>> {
    buffers.iter().map(to_bytes).collect()
}

/// Wait until every send of `instance` is acknowledged or failed, in slices
/// (Ctrl-C is seen); false if `timeout` passed first (`Comm.flush`, `Instance.flush`).
pub(crate) fn flush(py: Python<'_>, instance: &Arc<CoreInstance>, timeout: Option<f64>) -> PyResult<bool> {
    let mut outcome = Ok(true);
    wait_in_slices(py, timeout, |slice| {
        outcome = instance.flush(Some(slice));
        !matches!(outcome, Ok(false))
    })?;
    outcome.py_err()
}
