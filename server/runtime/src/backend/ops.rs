//! What this workspace's other crates do with a database beyond serving it: `init`'s creation,
//! `migrate`'s connection, a location as logs show it, and confining a spec's SQL when mcpspec
//! runs it on its own. The runtime's own (`crate::backend` re-exports them to it), and
//! exported to the workspace by `mcpspec::__internal::backend` alone.

#[cfg(feature = "sqlite")]
use super::sqlite;
use super::{Creation, Location, Migrating, OpenError, engine_for};
use crate::def::DatabaseDef;

/// Says that this process runs a spec's SQL on its own (`init`, `migrate`, `check`, `test`),
/// whoever wrote the spec: from now on no connection it opens to a SQLite file may reach another
/// file (see [`mcpspec_sqlite::confine`]). Scratch databases in memory are confined in any process.
pub fn confine_spec_sql() {
    #[cfg(feature = "sqlite")]
    sqlite::confine_every_connection();
}

/// Creates the spec's schema at `location` (`mcpspec init`); whether sample rows were loaded.
/// An existing database is used only when it holds no tables yet.
pub fn create(
    location: &Location,
    server: &str,
    def: &DatabaseDef,
    sample: bool,
) -> Result<bool, OpenError> {
    let entry = engine_for(location, server, def)?;
    (entry.create)(&Creation {
        location,
        def,
        sample,
    })
}

/// A connection that migrates the database at `location` for the spec `server` (see
/// `migrate`); it only reads unless `write`.
pub fn migrator(
    location: &Location,
    server: &str,
    def: &DatabaseDef,
    write: bool,
) -> Result<Migrating, OpenError> {
    let entry = engine_for(location, server, def)?;
    (entry.migrator)(location, write)
}

/// A database location (a URL of any scheme, a keyword string, a file path) as messages and
/// logs show it: every password replaced by `***`. The one place locations are redacted.
pub fn redact(location: &str) -> String {
    sqlscan::redact(location)
}
