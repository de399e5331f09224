//! One tokio runtime per process, shared by the endpoint server and the
//! transport. Callers outside it (Python threads) block on its futures.

use std::sync::OnceLock;

use tokio::runtime::{Builder, Runtime};

pub fn runtime() -> &'static Runtime {
    static RT: OnceLock<Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        let threads = crate::config::io_threads();
        Builder::new_multi_thread()
            .worker_threads(threads)
            .thread_name("mpiws-io")
            .enable_all()
            .build()
            .expect("cannot start the tokio runtime")
    })
}

/// Run `f`, which may block (a window's answer opening a stream, say), from
/// any thread. On one of the runtime's own workers (a request the endpoint
/// serves) the worker's queued tasks go to another thread first
/// (`block_in_place`): a task `f` waits for would otherwise sit behind it
/// for ever, and a peer could freeze the endpoint by sending a few.
pub fn blocking<T>(f: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => tokio::task::block_in_place(f),
        _ => f(),
    }
}
