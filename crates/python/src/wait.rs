//! Blocking from Python: seconds as limits, and waits that release the GIL
//! and let Ctrl-C through.

use std::time::{Duration, Instant};

use pyo3::prelude::*;

/// Wake at least this often while blocked, to let Ctrl-C through.
const SIGNAL_SLICE: Duration = Duration::from_millis(100);

/// Seconds as a limit; None (no limit) also for infinite or unrepresentable ones.
pub fn secs(t: Option<f64>) -> Option<Duration> {
    t.and_then(|s| Duration::try_from_secs_f64(s.max(0.0)).ok())
}

/// Run `step(slice)` with the GIL released until it returns true or
/// `timeout` (seconds) passes, checking for signals between slices.
pub fn wait_in_slices(py: Python<'_>, timeout: Option<f64>, mut step: impl FnMut(Duration) -> bool + Send) -> PyResult<bool> {
    let deadline = secs(timeout).and_then(|d| Instant::now().checked_add(d));
    loop {
        let slice = match deadline {
            None => SIGNAL_SLICE,
            Some(d) => d.saturating_duration_since(Instant::now()).min(SIGNAL_SLICE),
        };
        if py.detach(|| step(slice)) {
            return Ok(true);
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Ok(false);
        }
        py.check_signals()?;
    }
}
