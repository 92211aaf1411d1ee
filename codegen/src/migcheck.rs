//! The check that a spec's migrations give its declared schema (`codegen check`): the
//! migrations' SQLite texts are run in order on an empty in-memory database, and its shape
//! (tables, columns, types, NOT NULL, defaults, keys, indexes, triggers, views) is compared
//! with that of the declared `database.schema`, through the runtime's
//! [`shape`](mcpspec_sqlite::shape), the same comparison `mcpspec migrate` uses to
//! find the version of a database without a migrations table. Also the difference that
//! `codegen migrate --plan` turns into the next migration.

use std::path::PathBuf;

use mcpspec::__internal::backend::migrate::TABLE;
use mcpspec_sqlite::shape::{self, Shape};

use crate::Spec;
use crate::diag::{Diagnostic, Diagnostics, Pos};
use crate::ir;

/// The declared schema's shape and the migrations' shape, or the problems that stop either
/// from being built (a migration that does not run, a schema that does not load).
pub(crate) fn shapes(db: &ir::Database) -> Result<(Shape, Shape), Diagnostics> {
    let mut out = Diagnostics::default();
    let declared = shape::of_ddl(db.schema, &[TABLE]);
    let mut ddl = String::new();
    let mut migrated = None;
    for m in &db.migrations {
        let Some(t) = m.text(&sqlscan::SQLITE) else {
            continue;
        };
        ddl.push_str(&t.sql);
        ddl.push_str("\n;\n");
        match shape::of_ddl(&ddl, &[TABLE]) {
            Ok(s) => migrated = Some(s),
            Err(e) => {
                out.items.push(Diagnostic {
                    file: PathBuf::from(&t.file),
                    pos: Pos { line: 1, column: 1 },
                    message: format!(
                        "migration {:04}_{} does not run on SQLite after the ones before it: {e}",
                        m.version, m.name
                    ),
                    label: None,
                    help: Some(
                        "fix the statement; a migration runs on the schema the earlier ones made"
                            .into(),
                    ),
                });
                return Err(out);
            }
        }
    }
    match (declared, migrated) {
        (Ok(d), Some(m)) => Ok((d, m)),
        // A schema that does not load is reported by the statement checks.
        _ => Err(out),
    }
}

/// The spec's database when it declares migrations.
fn versioned(spec: &Spec) -> Option<&ir::Database> {
    spec.ir
        .database
        .as_ref()
        .filter(|d| !d.migrations.is_empty())
}

/// A finding when the migrations do not give exactly the declared schema.
pub fn check_migrations(spec: &Spec) -> Diagnostics {
    let mut out = Diagnostics::default();
    let Some(db) = versioned(spec) else {
        return out;
    };
    let (declared, migrated) = match shapes(db) {
        Ok(s) => s,
        Err(d) => return d,
    };
    let differences = shape::differences(&declared, &migrated);
    if differences.is_empty() {
        return out;
    }
    let (pos, dir, _) = db.migrations_at.clone().unwrap_or_default();
    let lines: Vec<String> = differences.iter().map(|d| format!("    {d}")).collect();
    out.items.push(Diagnostic {
        file: PathBuf::from(&spec.ir.file),
        pos,
        message: format!(
            "the migrations in {dir} do not give the declared `database.schema` (- only in the schema, + only after the migrations):\n{}",
            lines.join("\n")
        ),
        label: Some("the migrations".into()),
        help: Some(format!(
            "add the migration that makes the difference (`cargo run -p codegen -- migrate --plan {}` writes it), or correct the schema",
            spec.ir.name
        )),
    });
    out
}

/// A finding when the live database at `location` lacks some of the spec's migrations, has
/// one that was edited since, or is newer than the spec; nothing is written. A database
/// without a migrations table is judged by its tables, as the server judges it.
pub fn check_live_migrations(
    spec: &Spec,
    def: &mcpspec::def::ServerDef,
    location: &mcpspec::backend::Location,
) -> Diagnostics {
    use mcpspec::__internal::backend::migrate::{self, Status};
    let mut out = Diagnostics::default();
    let (Some(db), Some(database)) = (versioned(spec), def.database.as_ref()) else {
        return out;
    };
    let status = mcpspec::__internal::backend::migrator(location, def.name, database, false)
        .map_err(|e| e.to_string())
        .and_then(|mut m| {
            migrate::status(&mut *m, database, location.dialect().name).map_err(|e| e.to_string())
        });
    let message = match status {
        Ok(Status::Current | Status::Unversioned(_)) => return out,
        Ok(Status::Behind { at, pending }) => format!(
            "the live database {} is at migration {at} of {}; not applied: {}",
            location.display(),
            db.migrations.len(),
            pending.join(", ")
        ),
        Err(e) => format!("the live database {}: {e}", location.display()),
    };
    let (pos, _, _) = db.migrations_at.clone().unwrap_or_default();
    out.items.push(Diagnostic {
        file: PathBuf::from(&spec.ir.file),
        pos,
        message,
        label: Some("the migrations".into()),
        help: Some(format!(
            "bring it up to date with `mcpspec migrate {} --db {}`",
            spec.ir.name,
            location.display()
        )),
    });
    out
}
