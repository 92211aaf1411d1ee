//! A handler's typed access to SQLite ([`Sqlite`], which `handler::Context::sqlite` gives):
//! the one place the handler API hands out a `rusqlite` connection, behind the `sqlite`
//! feature. It knows no handler type: a write on a read-only server is [`ReadOnly`], which
//! the handler API turns into its `READ_ONLY` error.

use std::path::Path;

use super::{Pool, bounded};
use crate::backend::Stop;

/// A handler's access to the server's SQLite database (`handler::Context::sqlite`).
/// Statements run through it stop at the call's deadline or cancellation, as a SQL tool's do.
#[derive(Clone, Copy)]
pub struct Sqlite<'a> {
    pool: &'a Pool,
    stop: &'a Stop,
}

impl<'a> Sqlite<'a> {
    /// Access to `pool` for a call that stops as `stop` says.
    pub(crate) fn new(pool: &'a Pool, stop: &'a Stop) -> Self {
        Sqlite { pool, stop }
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        self.pool.path()
    }

    /// Runs `f` on a reader connection.
    pub fn read<T>(&self, f: impl FnOnce(&mut rusqlite::Connection) -> T) -> T {
        self.pool.read(|conn| bounded(conn, self.stop, f))
    }

    /// Runs `f` on the writer connection; [`ReadOnly`] when the server runs read-only.
    pub fn write<T>(&self, f: impl FnOnce(&mut rusqlite::Connection) -> T) -> Result<T, ReadOnly> {
        self.pool
            .write(|conn| bounded(conn, self.stop, f))
            .ok_or(ReadOnly)
    }
}

/// A write asked of a server that runs read-only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the server is read-only")]
pub struct ReadOnly;
