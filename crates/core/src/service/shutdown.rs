//! Ending an endpoint's process on SIGTERM or SIGINT, whatever its services
//! are doing. A signal handler written in Python runs only when the
//! interpreter gets round to it, which a service holding the GIL (a long C
//! call) prevents for ever; so the signals are blocked in every thread and
//! one thread of ours waits for them, closes every endpoint of the process
//! (its jobs end, a work directory it made is removed) and ends the process.

use std::sync::{Arc, Weak};

use parking_lot::Mutex;

use crate::error::{Error, ErrorClass, Result};
use crate::runtime::runtime;
use crate::service::Endpoint;

/// The endpoints of this process, closed when a signal ends it.
static OPEN: Mutex<Vec<Weak<Endpoint>>> = Mutex::new(Vec::new());

/// Close `ep` too if a signal ends the process.
pub fn register(ep: &Arc<Endpoint>) {
    let mut open = OPEN.lock();
    open.retain(|w| w.strong_count() > 0);
    open.push(Arc::downgrade(ep));
}

fn close_all() {
    let open: Vec<Arc<Endpoint>> = OPEN.lock().drain(..).filter_map(|w| w.upgrade()).collect();
    for ep in open {
        runtime().block_on(ep.close());
    }
}

/// Block SIGTERM and SIGINT in the calling thread and in every thread it
/// starts from now on (call it before any other thread exists), and start
/// the thread that ends the process (status 128 + the signal, as a shell
/// reports a process killed by it) once the endpoints are closed.
pub fn exit_on_signals() -> Result<()> {
    // SAFETY: plain libc calls on a local, initialised signal set.
    let set = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGINT);
        if libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) != 0 {
            return Err(Error::new(ErrorClass::Intern, "cannot block SIGTERM and SIGINT"));
        }
        set
    };
    std::thread::Builder::new()
        .name("mpiws-signals".into())
        .spawn(move || {
            let mut signal = 0;
            // SAFETY: `set` is a valid signal set; `signal` a valid out-pointer.
            while unsafe { libc::sigwait(&set, &mut signal) } != 0 {}
            close_all();
            std::process::exit(128 + signal);
        })
        .map(drop)
        .map_err(|e| Error::new(ErrorClass::Intern, format!("cannot start a thread: {e}")))
}
