//! What the spec compiler (its statement checks) and the runtime (its SQLite engine) do to every
//! SQLite connection they open, so that a statement prepares and runs alike in both: sqlite-vec
//! is there ([`vec`](mod@vec)), so is `regexp()` ([`regexp`]), and a spec's SQL that mcpspec
//! runs on its own is confined ([`confine`]). SQLite's memory comes from the process's Rust
//! allocator (`memory`). And a schema as facts that can be compared ([`shape`]), which both
//! read: `codegen check` and `codegen migrate --plan` from a spec's DDL, `mcpspec migrate` from
//! a database.

pub mod confine;
mod memory;
pub mod regexp;
pub mod shape;
pub mod vec;

/// Sets SQLite up for the whole process, once, before its first connection opens: its memory
/// from the Rust allocator (see `memory`), and sqlite-vec on every connection opened from now
/// on ([`vec`](mod@vec)). Call it before opening any connection (it is idempotent); a
/// connection opened before it keeps SQLite's own allocator for the process, which works
/// alike, only slower.
pub fn setup() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // First: SQLite takes an allocator only before it is initialised, which registering
        // an extension does.
        memory::use_rust_allocator();
        vec::register();
    });
}

/// Runs `f` on `conn` with its statements interrupted once `stop` says so (a deadline passed,
/// the call cancelled): SQLite's progress handler asks it every thousand steps, and is taken
/// off again when `f` returns.
pub fn bounded<T>(
    conn: &mut rusqlite::Connection,
    stop: impl FnMut() -> bool + Send + 'static,
    f: impl FnOnce(&mut rusqlite::Connection) -> T,
) -> T {
    let _ = conn.progress_handler(1_000, Some(stop));
    let out = f(conn);
    let _ = conn.progress_handler(0, None::<fn() -> bool>);
    out
}
