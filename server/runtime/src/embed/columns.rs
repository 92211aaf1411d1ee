//! The columns that hold a provider's vectors (`stored_in`), held to the provider's
//! dimensions in the live database when the server starts: a provider whose vectors do not
//! fit the column is refused before serving, with the migration and rebuild to run, never a
//! silent mismatch. A provider that is off writes no vectors and is not checked. MariaDB
//! before 11.7 has no vector type, which is said as such.

use crate::backend::Database;
use crate::def::ServerDef;

use super::{Embeddings, SetupError};

/// Checks every `stored_in` column of every provider that is on against `db`.
pub(crate) fn check(
    def: &'static ServerDef,
    embeddings: &Embeddings,
    db: &Database,
) -> Result<(), SetupError> {
    for (e, _) in embeddings.on() {
        let fail = |message: String| SetupError {
            name: e.name,
            message,
        };
        for place in e.stored_in {
            let (table, column) = place.rsplit_once('.').unwrap_or(("", place));
            let columns = db
                .table_columns(table)
                .map_err(|why| fail(format!("cannot read the columns of {table}: {why}")))?;
            let found = columns.iter().find(|c| c.name.eq_ignore_ascii_case(column));
            let Some(found) = found else {
                return Err(fail(missing(def, db, place)));
            };
            match sqlscan::vectors::dimensions(&found.ty) {
                Some(n) if n == e.dimensions => {}
                Some(n) => {
                    return Err(fail(format!(
                        "the database's column {place} holds vectors of {n} dimensions, and the provider makes {}; to change them, write a migration that changes {place} (and every other column under `stored_in`) to {} dimensions, run `mcpspec migrate`, then rebuild the vectors",
                        e.dimensions, e.dimensions
                    )));
                }
                None => {
                    return Err(fail(format!(
                        "the database's column {place} is `{}`, not a vector of {} dimensions ({})",
                        found.ty,
                        e.dimensions,
                        vector_type(db, e.dimensions)
                    )));
                }
            }
        }
    }
    Ok(())
}

/// What to say of a MariaDB without vectors, where the spec stores some: `None` when the
/// database is not a MariaDB before 11.7.
pub fn no_vectors_here(db: &Database) -> Option<String> {
    if db.dialect().name != sqlscan::MYSQL.name {
        return None;
    }
    let version = mariadb_version(db).filter(|v| *v < (11, 7))?;
    Some(format!(
        "this MariaDB ({}.{}) has no vector type; MariaDB 11.7 and later do",
        version.0, version.1
    ))
}

/// What to say of a `stored_in` column the database lacks.
fn missing(def: &ServerDef, db: &Database, place: &str) -> String {
    if let Some(why) = no_vectors_here(db) {
        return format!(
            "{why}, so it has no column {place} to hold vectors: unset the provider to search by keyword only, or move to MariaDB 11.7"
        );
    }
    let migrations = def
        .database
        .as_ref()
        .is_some_and(|d| !d.migrations.is_empty());
    format!(
        "the database has no column {place} to hold the vectors{}",
        if migrations {
            format!("; run `mcpspec migrate {}` first", def.name)
        } else {
            String::new()
        }
    )
}

/// The vector type of the database's engine, for a message.
fn vector_type(db: &Database, dims: u32) -> String {
    match db.dialect().name {
        n if n == sqlscan::POSTGRES.name => format!("pgvector's vector({dims})"),
        n if n == sqlscan::MYSQL.name => format!("MariaDB's VECTOR({dims})"),
        _ => format!("SQLite's F32_BLOB({dims}), or sqlite-vec's float[{dims}] in a vec0 table"),
    }
}

/// The MariaDB server's version, when the database is one.
pub fn mariadb_version(db: &Database) -> Option<(u32, u32)> {
    let stop = crate::backend::Stop::after(std::time::Duration::from_secs(10), Default::default());
    let text = db
        .job(
            false,
            false,
            &stop,
            |_| (),
            |session| {
                let mut out = None;
                session
                    .query(
                        crate::backend::Sql::from("SELECT VERSION()"),
                        &|_| crate::backend::Value::Null,
                        &mut |row| {
                            if let crate::backend::ValueRef::Text(t) = row.value(0) {
                                out = Some(String::from_utf8_lossy(t).into_owned());
                            }
                            false
                        },
                    )
                    .map_err(|_| ())?;
                Ok(out)
            },
        )?
        .ok()??;
    if !text.to_ascii_lowercase().contains("mariadb") {
        return None;
    }
    let mut parts = text.split(['.', '-']);
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}
