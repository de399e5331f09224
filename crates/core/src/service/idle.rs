//! Idle connections end: a connection with no request in progress for the
//! head timeout is shut down gracefully (HTTP/1.1 keep-alive connections
//! have hyper's own head timeout; this covers HTTP/2, whose connections
//! hyper keeps for as long as the client does). A request in progress (a
//! long poll) keeps its connection; a graceful shutdown lets answers that
//! are still being sent finish.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;

/// Requests in progress on one connection, and when the last one ended.
pub struct Idle {
    state: Mutex<(usize, Instant)>,
}

/// Held while a request is in progress.
pub struct Busy(Arc<Idle>);

impl Drop for Busy {
    fn drop(&mut self) {
        let mut s = self.0.state.lock();
        s.0 -= 1;
        s.1 = Instant::now();
    }
}

impl Idle {
    pub fn new() -> Arc<Idle> {
        Arc::new(Idle { state: Mutex::new((0, Instant::now())) })
    }

    /// Is a request in progress?
    pub fn in_progress(&self) -> bool {
        self.state.lock().0 > 0
    }

    /// A request starts; it is in progress until the guard is dropped.
    pub fn busy(self: &Arc<Self>) -> Busy {
        self.state.lock().0 += 1;
        Busy(self.clone())
    }

    /// When the connection will have been idle for `timeout`, if it stays
    /// as it is now (None: a request is in progress).
    fn idle_until(&self, timeout: Duration) -> Option<Instant> {
        let s = self.state.lock();
        (s.0 == 0).then(|| s.1 + timeout)
    }

    /// Return once the connection has been idle for `timeout`.
    pub async fn expired(&self, timeout: Duration) {
        loop {
            match self.idle_until(timeout) {
                Some(at) if at <= Instant::now() => return,
                Some(at) => tokio::time::sleep_until(at).await,
                None => tokio::time::sleep(timeout).await,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_connection_is_idle_only_without_requests_for_the_timeout() {
        let idle = Idle::new();
        let t = Duration::from_secs(30);
        let busy = idle.busy();
        assert!(tokio::time::timeout(Duration::from_secs(100), idle.expired(t)).await.is_err(), "busy is not idle");
        drop(busy);
        let start = Instant::now();
        idle.expired(t).await;
        assert!(start.elapsed() >= t && start.elapsed() < t + Duration::from_secs(1));
    }
}
