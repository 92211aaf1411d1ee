//! A handler's typed access to SQLite ([`Context::sqlite`]): the one place the handler API
//! hands out a `rusqlite` connection, behind the `sqlite` feature.

use std::path::Path;

use super::Pool;
use crate::backend::{Database, Stop};
use crate::handler::{Context, HandlerError};

impl Context {
    /// The server's SQLite database, for a handler that works on it directly: the explicit
    /// way from the backend-neutral handler API to SQLite's own connection (cargo feature
    /// `sqlite`).
    pub fn sqlite(&self) -> Result<Sqlite<'_>, HandlerError> {
        match self.db.as_deref().and_then(Database::backend::<Pool>) {
            Some(pool) => Ok(Sqlite {
                pool,
                stop: &self.stop,
            }),
            None => Err(HandlerError::internal(
                "the server declares no SQLite database",
            )),
        }
    }
}

/// A handler's access to the server's SQLite database (see [`Context::sqlite`]). Statements
/// run through it stop at the call's deadline or cancellation, as a SQL tool's do.
#[derive(Clone, Copy)]
pub struct Sqlite<'a> {
    pool: &'a Pool,
    stop: &'a Stop,
}

impl Sqlite<'_> {
    /// The database file.
    pub fn path(&self) -> &Path {
        self.pool.path()
    }

    /// Runs `f` on a reader connection.
    pub fn read<T>(&self, f: impl FnOnce(&mut rusqlite::Connection) -> T) -> T {
        self.pool.read(|conn| super::bounded(conn, self.stop, f))
    }

    /// Runs `f` on the writer connection; `READ_ONLY` when the server runs read-only.
    pub fn write<T>(
        &self,
        f: impl FnOnce(&mut rusqlite::Connection) -> T,
    ) -> Result<T, HandlerError> {
        self.pool
            .write(|conn| super::bounded(conn, self.stop, f))
            .ok_or_else(|| HandlerError::new("READ_ONLY").message("the server is read-only"))
    }
}
