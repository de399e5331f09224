//! What the property-based fuzz targets (`tests/fuzz_*.rs`) share: how many
//! cases to run, and a watch on the largest allocation a parser asks for.
//!
//! `MPIWS_FUZZ_CASES` sets the number of cases per target (default 10,000:
//! a few seconds each in `cargo test`); `scripts/fuzz.sh` runs 1,000,000.

#![allow(dead_code)] // each target uses a part of it

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use proptest::test_runner::Config;

/// Cases per target when `MPIWS_FUZZ_CASES` is not set.
const DEFAULT_CASES: u32 = 10_000;

/// The proptest configuration of every target. Failures are not persisted
/// to files: each one found is kept as a named unit test instead.
pub fn config() -> Config {
    let cases = std::env::var("MPIWS_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(DEFAULT_CASES);
    Config { cases, failure_persistence: None, max_shrink_iters: 10_000, ..Config::default() }
}

/// The system allocator, noting the largest single request made while a
/// thread watches (`largest_allocation`). Installed by each target binary.
pub struct Watching;

thread_local! {
    static WATCHING: Cell<bool> = const { Cell::new(false) };
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

fn note(size: usize) {
    // try_with: allocations while a thread is torn down are not watched.
    let _ = WATCHING.try_with(|w| {
        if w.get() {
            let _ = LARGEST.try_with(|l| l.set(l.get().max(size)));
        }
    });
}

// SAFETY: every call is passed on to the system allocator unchanged.
unsafe impl GlobalAlloc for Watching {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        System.alloc(layout)
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        System.alloc_zeroed(layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        System.realloc(ptr, layout, new_size)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
}

/// Run `f` and answer its result with the largest single allocation (in
/// bytes) it asked for on this thread.
pub fn largest_allocation<R>(f: impl FnOnce() -> R) -> (R, usize) {
    LARGEST.with(|l| l.set(0));
    WATCHING.with(|w| w.set(true));
    let r = f();
    WATCHING.with(|w| w.set(false));
    (r, LARGEST.with(|l| l.get()))
}
