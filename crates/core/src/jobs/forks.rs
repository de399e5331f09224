//! A fork server (`python/mpiws/service/forks.py`): one interpreter, its
//! imports done once, that forks each child from itself, in milliseconds
//! where a new interpreter takes hundreds (an instance's import of its
//! services; the CWL runner's of cwltool and the CWL schema). The endpoint
//! starts it (`start`), or is given one already running (`on`: the one a
//! client forked from itself, warm with what it already loaded).
//!
//! Rules:
//! - One request at a time, answered in order: the lock on the wire is held
//!   from a request to its answer.
//! - One reader (a thread) reads all the server says: answers, and children's
//!   ends. A child's end always comes after its pid's answer, on the same
//!   wire, so it is never missed.
//! - A server that fails in any way (it cannot start, does not answer, says
//!   something malformed) is given up: the endpoint starts interpreters
//!   itself from then on. The children it forked go on; their ends are then
//!   seen by watching their process groups.
//! - Closing the wire is the end: the server forks no more, and exits once
//!   its last child ended.
//!
//! Wire (descriptor 3 of the server): 9-byte messages `[kind u8][pid i32 LE][status i32 LE]`
//! from the server (`W` once warm, `P` the answer to a request: the pid, 0 if
//! not forked, `X` a child ended with its wait status); requests are 8 bytes
//! (the child's address-space bound, 0: none) with three descriptors (the
//! child's stdin, and its descriptors 3 and 4).

use std::collections::HashMap;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::ExitStatusExt;
use std::process::{ExitStatus, Stdio};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::watch;

use crate::net::descriptor::send_with_fds;

/// Where the server finds its wire.
const WIRE_FD: RawFd = 3;

/// How long the server may take to import its services; then to answer a request.
const WARM_TIMEOUT: Duration = Duration::from_secs(60);
const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);

const MESSAGE: usize = 9;

/// A child's end as the server saw it: None while it runs (or, once the
/// server is gone, for good: it is then watched by its group).
pub type Exit = watch::Receiver<Option<ExitStatus>>;

pub struct ForkServer {
    /// The wire and the answers read from it; None once given up or closed.
    wire: Mutex<Option<Requests>>,
    /// Each child's end, by pid, until it is told.
    exits: Arc<Mutex<HashMap<i32, watch::Sender<Option<ExitStatus>>>>>,
    /// The server's own process, if the endpoint started it: killed if it is still there when the endpoint lets go of it.
    _process: Option<tokio::process::Child>,
}

struct Requests {
    wire: UnixStream,
    answers: mpsc::Receiver<Answer>,
    warm: bool,
}

enum Answer {
    Warm,
    /// The child's pid and its end; None: not forked.
    Forked(Option<(i32, Exit)>),
}

impl ForkServer {
    /// Start the server: `cmd`, given its wire at descriptor 3; None if it cannot start.
    pub fn start(mut cmd: tokio::process::Command) -> Option<Arc<ForkServer>> {
        let (ours, theirs) = UnixStream::pair().ok()?;
        cmd.stdin(Stdio::null());
        let fd = theirs.as_raw_fd();
        // SAFETY: between fork and exec the closure only calls dup2 (async-signal-safe) and allocates nothing.
        unsafe {
            cmd.pre_exec(move || if libc::dup2(fd, WIRE_FD) < 0 { Err(io::Error::last_os_error()) } else { Ok(()) });
        }
        let process = cmd.spawn().ok()?;
        drop(theirs);
        ForkServer::serving(ours, Some(process))
    }

    /// A server already running at the other end of `wire` (its process not the endpoint's to end).
    pub fn on(wire: UnixStream) -> Option<Arc<ForkServer>> {
        ForkServer::serving(wire, None)
    }

    fn serving(wire: UnixStream, process: Option<tokio::process::Child>) -> Option<Arc<ForkServer>> {
        let reader = wire.try_clone().ok()?;
        let (tx, answers) = mpsc::channel();
        let server = Arc::new(ForkServer {
            wire: Mutex::new(Some(Requests { wire, answers, warm: false })),
            exits: Arc::default(),
            _process: process,
        });
        let exits = server.exits.clone();
        std::thread::Builder::new().name("mpiws-forks".into()).spawn(move || read(reader, tx, exits)).ok()?;
        Some(server)
    }

    /// Fork a child with `fds` as its stdin and its descriptors 3 and 4, its
    /// address space bounded to `memory`: its pid and its end.
    /// Err: not forked (the caller starts an interpreter instead).
    pub fn fork(&self, memory: Option<u64>, fds: [&OwnedFd; 3]) -> io::Result<(i32, Exit)> {
        let mut guard = self.wire.lock();
        let requests = guard.as_mut().ok_or_else(|| io::Error::other("no fork server"))?;
        match requests.fork(memory, fds) {
            Ok(Some(forked)) => Ok(forked),
            Ok(None) => Err(io::Error::other("the fork server did not fork (it runs threads of its own)")),
            Err(e) => {
                *guard = None; // given up
                Err(e)
            }
        }
    }

    /// No more forks: the server exits once its children ended.
    pub fn close(&self) {
        self.wire.lock().take();
    }
}

impl Drop for Requests {
    fn drop(&mut self) {
        // The reader holds the socket too: the server is told by a shutdown,
        // not a close; it still tells the ends of the children it has.
        let _ = self.wire.shutdown(std::net::Shutdown::Write);
    }
}

impl Requests {
    /// Ok(None): the server refused (it runs Python threads).
    fn fork(&mut self, memory: Option<u64>, fds: [&OwnedFd; 3]) -> io::Result<Option<(i32, Exit)>> {
        if !self.warm {
            match self.answers.recv_timeout(WARM_TIMEOUT) {
                Ok(Answer::Warm) => self.warm = true,
                _ => return Err(io::Error::other("the fork server did not start")),
            }
        }
        let raw = fds.map(|fd| fd.as_raw_fd());
        send_with_fds(&self.wire, &memory.unwrap_or(0).to_le_bytes(), &raw)?;
        match self.answers.recv_timeout(ANSWER_TIMEOUT) {
            Ok(Answer::Forked(forked)) => Ok(forked),
            _ => Err(io::Error::other("the fork server did not answer")),
        }
    }
}

/// The reader: answers to `answers`, children's ends to `exits`. At the end
/// of the wire (or anything malformed) every child still running is left to
/// be watched by its group.
fn read(mut wire: UnixStream, answers: mpsc::Sender<Answer>, exits: Arc<Mutex<HashMap<i32, watch::Sender<Option<ExitStatus>>>>>) {
    let mut message = [0u8; MESSAGE];
    while wire.read_exact(&mut message).is_ok() {
        let pid = i32::from_le_bytes(message[1..5].try_into().expect("4 bytes"));
        let status = i32::from_le_bytes(message[5..9].try_into().expect("4 bytes"));
        let answer = match message[0] {
            b'W' => Answer::Warm,
            b'P' if pid > 1 => {
                // Registered before the child's end can be read (it comes after
                // this, on this wire); a pid used again starts afresh.
                let (told, exit) = watch::channel(None);
                exits.lock().insert(pid, told);
                Answer::Forked(Some((pid, exit)))
            }
            b'P' if pid == 0 => Answer::Forked(None),
            b'X' => {
                if let Some(told) = exits.lock().remove(&pid) {
                    told.send_replace(Some(ExitStatus::from_raw(status)));
                }
                continue;
            }
            _ => break,
        };
        if answers.send(answer).is_err() {
            break;
        }
    }
    exits.lock().clear(); // their receivers see the server gone
}
