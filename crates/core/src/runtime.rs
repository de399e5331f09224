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
