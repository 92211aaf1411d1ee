//! SQLite's side of migrating ([`Migrator`]): a run is one `BEGIN IMMEDIATE` transaction, so
//! it holds the database's write lock from before it reads what is applied until it commits,
//! and another process migrating the same file waits for it and then finds nothing to do. A
//! database without a migrations table is matched against each version of the spec's
//! migrations by its [`shape`].

use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

use crate::backend::OpenError;
use crate::backend::migrate::{Found, Migrator, TABLE};
use crate::def::{DatabaseDef, MigrationDef};
use mcpspec_sqlite::shape;

/// How long a run waits for another process's run (or any writer) to finish.
const LOCK_WAIT: Duration = Duration::from_secs(600);

const TABLE_DDL: &str = "CREATE TABLE mcpspec_migrations (\n  version INTEGER PRIMARY KEY,\n  name TEXT NOT NULL,\n  checksum TEXT NOT NULL,\n  applied_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))\n)";

/// A connection that migrates one SQLite file.
pub struct SqliteMigrator {
    conn: Connection,
}

impl SqliteMigrator {
    /// Opens the existing file at `path`, read-only unless `write`.
    pub fn open(path: &Path, write: bool) -> Result<SqliteMigrator, OpenError> {
        let flags = if write {
            OpenFlags::SQLITE_OPEN_READ_WRITE
        } else {
            OpenFlags::SQLITE_OPEN_READ_ONLY
        };
        let err = |e: rusqlite::Error| OpenError::Open {
            path: crate::backend::redact(&path.display().to_string()),
            reason: super::sqlite_message(&e),
        };
        let conn = super::open_plain(path, flags)
            .and_then(|mut c| {
                // A spec's migrations write nothing but this file.
                mcpspec_sqlite::confine::confine(&mut c, mcpspec_sqlite::confine::Also::Nothing)?;
                Ok(c)
            })
            .map_err(err)?;
        conn.busy_timeout(LOCK_WAIT).map_err(err)?;
        conn.query_row("SELECT count(*) FROM sqlite_schema", [], |_| Ok(()))
            .map_err(err)?;
        Ok(SqliteMigrator { conn })
    }
}

/// SQLite's own words for a failure.
fn said(e: rusqlite::Error) -> String {
    super::sqlite_message(&e)
}

impl Migrator for SqliteMigrator {
    fn found(&mut self) -> Result<Found, String> {
        let tables: Vec<String> = self
            .conn
            .prepare(
                "SELECT name FROM sqlite_schema WHERE type = 'table' \
                 AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name",
            )
            .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect())
            .map_err(said)?;
        if !tables.iter().any(|t| t == TABLE) {
            return Ok(Found::Unversioned(tables));
        }
        let rows = self
            .conn
            .prepare(&format!(
                "SELECT version, name, checksum FROM {TABLE} ORDER BY version"
            ))
            .and_then(|mut s| {
                s.query_map([], |r| {
                    // Whatever a hand changed the row to reads, and is judged below.
                    let text = |i| {
                        r.get::<_, Option<String>>(i)
                            .ok()
                            .flatten()
                            .unwrap_or_default()
                    };
                    Ok((r.get::<_, i64>(0).unwrap_or(0), text(1), text(2)))
                })?
                .collect::<rusqlite::Result<Vec<_>>>()
            })
            .map_err(said)?;
        rows.into_iter()
            .map(|(version, name, checksum)| {
                crate::backend::migrate::applied(version, name, checksum)
            })
            .collect::<Result<_, _>>()
            .map(Found::Versioned)
    }

    fn lock(&mut self) -> Result<(), String> {
        self.conn.execute_batch("BEGIN IMMEDIATE").map_err(said)
    }

    fn finish(&mut self, keep: bool) -> Result<(), String> {
        let end = if keep { "COMMIT" } else { "ROLLBACK" };
        self.conn.execute_batch(end).map_err(said)
    }

    fn execute(&mut self, sql: &str) -> Result<(), String> {
        self.conn.execute_batch(sql).map_err(said)
    }

    fn claim(&mut self) -> Result<(), String> {
        // A new database is mcpspec's own, as one `init` made: derived structures live in it.
        self.conn
            .pragma_update(None, "application_id", super::mirror::APPLICATION_ID)
            .map_err(said)
    }

    fn table_ddl(&self) -> &'static str {
        TABLE_DDL
    }

    fn transactional(&self) -> bool {
        true
    }

    fn matching_version(&mut self, def: &DatabaseDef) -> Result<Option<u32>, String> {
        matching_version(&self.conn, def)
    }

    fn gaps_at(&mut self, def: &DatabaseDef, version: u32) -> Result<Option<Vec<String>>, String> {
        let (strip, actual) = actual_shape(&self.conn, def)?;
        let upto: Vec<&MigrationDef> = def
            .migrations
            .iter()
            .filter(|x| x.version <= version)
            .collect();
        let expected = strip(shape_after(&upto)?);
        // What the migrations make and the database lacks, or has otherwise ("-" lines);
        // what the database holds besides ("+" lines) is another application's.
        Ok(Some(
            shape::differences(&expected, &actual)
                .into_iter()
                .filter(|l| l.starts_with('-'))
                .collect(),
        ))
    }
}

/// The shape of `conn`'s database without the structures the spec derives, and the function
/// that leaves those out of another shape.
fn actual_shape(
    conn: &Connection,
    def: &DatabaseDef,
) -> Result<(impl Fn(shape::Shape) -> shape::Shape + use<>, shape::Shape), String> {
    let derived = derived_names(def)?;
    let strip = move |mut s: shape::Shape| {
        s.objects.retain(|(_, name), _| !derived.contains(name));
        s
    };
    let actual = strip(shape::shape(conn, &[TABLE]).map_err(said)?);
    Ok((strip, actual))
}

/// The shape the SQLite texts of `migrations`, run in order, give.
fn shape_after(migrations: &[&MigrationDef]) -> Result<shape::Shape, String> {
    let mut ddl = String::new();
    for x in migrations {
        let text = x
            .text(sqlscan::SQLITE.name)
            .ok_or_else(|| "a migration has no SQLite text".to_string())?;
        ddl.push_str(text.sql);
        ddl.push_str("\n;\n");
    }
    shape::of_ddl(&ddl, &[TABLE]).map_err(|e| match migrations.last() {
        Some(x) => format!(
            "migration {:04}_{} does not run on SQLite: {e}",
            x.version, x.name
        ),
        None => e,
    })
}

/// The newest version whose migrations give the schema of `conn`'s database, leaving out
/// the structures the spec derives from the data (which a database `init` made also holds).
fn matching_version(conn: &Connection, def: &DatabaseDef) -> Result<Option<u32>, String> {
    let (strip, actual) = actual_shape(conn, def)?;
    let all: Vec<&MigrationDef> = def.migrations.iter().collect();
    let mut found = None;
    for n in 1..=all.len() {
        if strip(shape_after(&all[..n])?) == actual {
            found = Some(all[n - 1].version);
        }
    }
    Ok(found)
}

/// The names of the objects the spec's derived DDL makes.
fn derived_names(def: &DatabaseDef) -> Result<Vec<String>, String> {
    if def.derived.trim().is_empty() {
        return Ok(Vec::new());
    }
    let before = shape::of_ddl(def.schema, &[TABLE])?;
    let after = shape::of_ddl(&format!("{}\n;\n{}", def.schema, def.derived), &[TABLE])?;
    Ok(after
        .objects
        .keys()
        .filter(|k| !before.objects.contains_key(*k))
        .map(|(_, name)| name.clone())
        .collect())
}

/// The migrations table's DDL, for `init`.
pub(crate) const fn table_ddl() -> &'static str {
    TABLE_DDL
}
