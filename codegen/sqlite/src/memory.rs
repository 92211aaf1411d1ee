//! SQLite's memory from the process's Rust allocator (the binary's `#[global_allocator]`:
//! mimalloc in mcpspec's own), set before SQLite is first used, and without SQLite's own
//! count of the memory it holds.
//!
//! Left to the C library's `malloc`, a statement that builds temporary b-trees (a
//! `MATERIALIZED` CTE, a sort, a window) allocates their page caches on each run and frees
//! them at its end. glibc gives the top of a thread's arena back to the kernel as soon as
//! more than its trim threshold is free, so the next run faults the same pages in again:
//! knowledge's hybrid `kb_search` on 10,000 entries spent two thirds of its 263 µs in the
//! kernel (`perf`: page faults under `pcache1FetchStage2`, pages zapped on free), and 78 µs
//! with glibc's trimming tuned off. Rust's allocator keeps freed memory for the thread's
//! next allocations, as it does for the rest of the server's. (SQLite's own page-cache pool,
//! `SQLITE_CONFIG_PAGECACHE`, would avoid the faults too, but it holds its whole size from
//! the start, whatever the load, and every connection's cache takes its pages under one
//! process-wide mutex.)
//!
//! SQLite's memory statistics (`SQLITE_CONFIG_MEMSTATUS`, on unless compiled out) take a
//! process-wide mutex on every allocation and free, for `sqlite3_memory_used()` and the
//! soft heap limit, neither of which mcpspec uses: they are turned off, as SQLite's
//! documentation suggests for speed.

use std::alloc::Layout;
use std::os::raw::{c_int, c_void};
use std::sync::atomic::{AtomicBool, Ordering};

use rusqlite::ffi;

/// Bytes kept before each allocation for its size (SQLite's `free` does not give it, Rust's
/// `dealloc` needs it). Eight keeps what follows aligned to eight, all SQLite asks.
const HEADER: usize = 8;

/// The alignment of every allocation (SQLite's `SQLITE_CONFIG_MALLOC` contract: eight).
const ALIGN: usize = 8;

/// The layout of an allocation of `n` bytes for SQLite, with its header.
fn layout(n: usize) -> Option<Layout> {
    Layout::from_size_align(n.checked_add(HEADER)?, ALIGN).ok()
}

/// Whether SQLite took Rust's allocator (see [`use_rust_allocator`]).
static TAKEN: AtomicBool = AtomicBool::new(false);

/// Points SQLite's allocations at Rust's allocator and turns its memory statistics off.
/// Called once, before SQLite is first initialised; records whether SQLite took the
/// allocator in [`TAKEN`] (it refuses once initialised, and then keeps its own, which works
/// as well, only slower).
pub(crate) fn use_rust_allocator() {
    let methods = ffi::sqlite3_mem_methods {
        xMalloc: Some(malloc),
        xFree: Some(free),
        xRealloc: Some(realloc),
        xSize: Some(size),
        xRoundup: Some(roundup),
        xInit: Some(init),
        xShutdown: Some(shutdown),
        pAppData: std::ptr::null_mut(),
    };
    // SAFETY: `sqlite3_config` is called before `sqlite3_initialize` (the caller's `Once`
    // runs before any connection opens), as its documentation requires; once SQLite is
    // initialised it returns SQLITE_MISUSE and changes nothing. SQLite copies `methods`.
    // Each option takes the argument its documentation names: a pointer to a
    // `sqlite3_mem_methods`, an `int`.
    #[allow(unsafe_code)]
    unsafe {
        let taken = ffi::sqlite3_config(ffi::SQLITE_CONFIG_MALLOC, &raw const methods);
        ffi::sqlite3_config(ffi::SQLITE_CONFIG_MEMSTATUS, 0 as c_int);
        TAKEN.store(taken == ffi::SQLITE_OK, Ordering::Relaxed);
    }
}

// The methods below are called by SQLite alone, on pointers they returned: SQLite never
// frees, resizes or measures a pointer it did not get from `malloc` or `realloc` here, and
// handles NULL and zero sizes itself (it calls `malloc` and `free` for them instead of
// `realloc`), which these check again all the same.

#[allow(unsafe_code)]
unsafe extern "C" fn malloc(n: c_int) -> *mut c_void {
    let Some(layout) = usize::try_from(n).ok().filter(|&n| n > 0).and_then(layout) else {
        return std::ptr::null_mut();
    };
    // SAFETY: the layout's size is at least HEADER, never zero.
    unsafe {
        let base = std::alloc::alloc(layout);
        if base.is_null() {
            return std::ptr::null_mut();
        }
        base.cast::<u64>().write(n as u64);
        base.add(HEADER).cast()
    }
}

/// The start of the block `p` (a pointer `malloc` or `realloc` returned) and its layout.
///
/// # Safety
/// `p` is a pointer this module's `malloc` or `realloc` returned and that is not freed.
#[allow(unsafe_code)]
unsafe fn block(p: *mut c_void) -> (*mut u8, Layout) {
    // SAFETY: `p` is HEADER bytes into a block whose first eight bytes hold its size, which
    // gave a valid layout when it was allocated.
    unsafe {
        let base = p.cast::<u8>().sub(HEADER);
        let n = base.cast::<u64>().read() as usize;
        (base, layout(n).unwrap_or_else(|| unreachable!()))
    }
}

#[allow(unsafe_code)]
unsafe extern "C" fn free(p: *mut c_void) {
    if p.is_null() {
        return;
    }
    // SAFETY: SQLite frees only what it allocated here, once.
    unsafe {
        let (base, layout) = block(p);
        std::alloc::dealloc(base, layout);
    }
}

#[allow(unsafe_code)]
unsafe extern "C" fn realloc(p: *mut c_void, n: c_int) -> *mut c_void {
    if p.is_null() {
        // SAFETY: as `malloc`.
        return unsafe { malloc(n) };
    }
    let Some(new) = usize::try_from(n).ok().filter(|&n| n > 0) else {
        return std::ptr::null_mut();
    };
    let Some(new_layout) = layout(new) else {
        return std::ptr::null_mut();
    };
    // SAFETY: `p` came from here and is live; the new size is nonzero and within a layout's
    // bounds. On failure the old block stays as it was, as SQLite expects.
    unsafe {
        let (base, old) = block(p);
        let moved = std::alloc::realloc(base, old, new_layout.size());
        if moved.is_null() {
            return std::ptr::null_mut();
        }
        moved.cast::<u64>().write(new as u64);
        moved.add(HEADER).cast()
    }
}

#[allow(unsafe_code)]
unsafe extern "C" fn size(p: *mut c_void) -> c_int {
    if p.is_null() {
        return 0;
    }
    // SAFETY: `p` came from here and is live. Its size was a `c_int` when it was allocated.
    unsafe { block(p).1.size() - HEADER }
        .try_into()
        .unwrap_or(c_int::MAX)
}

extern "C" fn roundup(n: c_int) -> c_int {
    n.checked_add(7).map_or(n, |n| n & !7)
}

extern "C" fn init(_: *mut c_void) -> c_int {
    ffi::SQLITE_OK
}

extern "C" fn shutdown(_: *mut c_void) {}

#[cfg(test)]
mod tests {
    #[test]
    fn sqlite_runs_on_the_rust_allocator() {
        // Every test of this crate sets SQLite up before it opens a connection.
        crate::setup();
        assert!(super::TAKEN.load(std::sync::atomic::Ordering::Relaxed));
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        // Temporary b-trees, a sort, growing strings (resized: SQLite measures a block
        // through `size` before it resizes it) and blobs: every method is used.
        let (n, longest): (i64, i64) = conn
            .query_row(
                "WITH RECURSIVE n(i, s) AS MATERIALIZED (
                   SELECT 1, 'x' UNION ALL SELECT i + 1, s || printf('%d', i) FROM n WHERE i < 5000)
                 SELECT count(*), max(length(s)) FROM (SELECT i, s, randomblob(i % 300) FROM n ORDER BY s DESC)",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        assert_eq!((n, longest), (5000, 18_890));
        assert_eq!(super::roundup(1), 8);
        assert_eq!(super::roundup(16), 16);
        assert_eq!(super::roundup(c_int_max()), c_int_max());
    }

    fn c_int_max() -> std::os::raw::c_int {
        std::os::raw::c_int::MAX
    }
}
