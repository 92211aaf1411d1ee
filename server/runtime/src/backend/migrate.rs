//! Versioned migrations on a live database (a spec's `database.migrations`): which of them a
//! database has, read from its `mcpspec_migrations` table, and applying the missing ones in
//! order under the engine's lock, so that replicas starting together apply each once. The
//! engines give the primitives ([`Migrator`]); every decision is made here, once.
//!
//! A run is one transaction on SQLite (which holds the write lock for it) and on PostgreSQL
//! (which holds a transaction-scoped advisory lock): it applies everything or nothing.
//! MariaDB and MySQL commit DDL as it goes, so there each migration is recorded as soon as it
//! ran, under a named lock; a migration that fails half-way leaves its earlier statements
//! applied and itself unrecorded, which the error says.

use crate::def::{DatabaseDef, MigrationDef};

/// The table mcpspec keeps in a database it migrates: one row per applied migration.
pub const TABLE: &str = "mcpspec_migrations";

/// A row of [`TABLE`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    pub version: u32,
    pub name: String,
    pub checksum: String,
}

/// What a database holds before a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    /// The migrations table, with its rows in version order.
    Versioned(Vec<Applied>),
    /// No migrations table; the database's tables (none: a new database).
    Unversioned(Vec<String>),
}

/// A row of [`TABLE`] as an engine read it (the version as the widest integer, so that a row
/// changed by hand reads without failing), checked: a version that is no migration's is said
/// plainly, with what to do.
#[cfg_attr(
    not(any(feature = "sqlite", feature = "postgres", feature = "mysql")),
    allow(dead_code)
)]
pub fn applied(version: i64, name: String, checksum: String) -> Result<Applied, String> {
    let version = u32::try_from(version).ok().filter(|v| *v >= 1).ok_or_else(|| {
        format!(
            "{TABLE} holds the version {version} ({name}), which no migration has (they count from 1); the table was changed by hand: remove or correct that row"
        )
    })?;
    Ok(Applied {
        version,
        name,
        checksum,
    })
}

/// An engine's side of migrating: one connection, used by one run.
pub trait Migrator {
    /// The migrations table's rows, or the tables when there is none.
    fn found(&mut self) -> Result<Found, String>;
    /// Takes the lock that lets one run at a time apply migrations, and begins the run's
    /// transaction where the engine has one for DDL.
    fn lock(&mut self) -> Result<(), String>;
    /// Ends the run: commits it when `keep`, else undoes what the engine can; releases the
    /// lock.
    fn finish(&mut self, keep: bool) -> Result<(), String>;
    /// Runs SQL text of one or more statements.
    fn execute(&mut self, sql: &str) -> Result<(), String>;
    /// Marks a new database as mcpspec's own, as `init` does (SQLite's application id).
    fn claim(&mut self) -> Result<(), String> {
        Ok(())
    }
    /// The DDL of [`TABLE`] in the engine's dialect.
    fn table_ddl(&self) -> &'static str;
    /// Idempotent DDL of mcpspec's other tables in a database a team of replicas shares
    /// (used request states, tasks), each statement run by every run that writes.
    fn system_ddl(&self) -> &'static [&'static str] {
        &[]
    }
    /// The columns added to those tables since they were first made: each added, after
    /// [`Migrator::system_ddl`], when [`Migrator::has_column`] says the table lacks it.
    fn added_columns(&self) -> &'static [super::AddedColumn] {
        &[]
    }
    /// Whether `table` has `column`.
    fn has_column(&mut self, table: &str, column: &str) -> Result<bool, String> {
        let _ = (table, column);
        Ok(true)
    }
    /// Whether a run's DDL is one transaction (false on MariaDB and MySQL).
    fn transactional(&self) -> bool;
    /// The newest version whose migrations give exactly the schema of this database, which
    /// has tables but no migrations table; `None` when none does or the engine cannot tell.
    fn matching_version(&mut self, def: &DatabaseDef) -> Result<Option<u32>, String> {
        let _ = def;
        Ok(None)
    }
    /// What migrations 1 to `version` make that this database lacks or has otherwise, one
    /// line each (the database may hold more: another application's tables); `None` when the
    /// engine cannot compare a schema with a migration's.
    fn gaps_at(&mut self, def: &DatabaseDef, version: u32) -> Result<Option<Vec<String>>, String> {
        let _ = (def, version);
        Ok(None)
    }
}

/// What a run is asked to do.
#[derive(Debug, Clone, Copy, Default)]
pub struct Ask {
    /// Say what would be applied, and change nothing.
    pub dry_run: bool,
    /// For a database without a migrations table: the version it is at, recorded without
    /// running the migrations up to it.
    pub baseline: Option<u32>,
    /// Migrate only a database that is new or that mcpspec's migrations made (`serve
    /// --migrate`); another application's database needs an explicit `mcpspec migrate`.
    pub only_own: bool,
}

/// What a run did (or, in a dry run, would do).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// The version a database without a migrations table was found or declared to be at.
    pub baselined: Option<u32>,
    /// For a version declared with `--baseline`: whether the engine compared the database
    /// with it (false: the engine cannot, and the version was taken at the user's word).
    pub baseline_checked: Option<bool>,
    /// The migrations applied (or to apply), by version and name.
    pub applied: Vec<(u32, &'static str)>,
    /// The version the database is at afterwards.
    pub at: u32,
}

/// Where a database stands against a spec's migrations, for a server about to start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// Every migration is applied.
    Current,
    /// Migrations are missing: the version the database is at, and those to apply.
    Behind { at: u32, pending: Vec<String> },
    /// No migrations table; the database's tables (none: a new database).
    Unversioned(Vec<String>),
}

/// Why a database cannot be migrated or served as it is.
#[derive(Debug, thiserror::Error)]
pub enum MigrateError {
    #[error(
        "migration {version:04}_{name} was changed after this database applied it (recorded checksum {recorded}, now {now}); restore the file as it was and put the change in a new migration"
    )]
    Edited {
        version: u32,
        name: String,
        recorded: String,
        now: String,
    },
    #[error(
        "the database is at migration {at}, newer than the spec's last ({known}); serve it with the version of the spec that migrated it"
    )]
    Newer { at: u32, known: u32 },
    #[error(
        "the database holds tables that mcpspec's migrations did not make ({tables}); `serve --migrate` changes only databases it made, so migrate this one explicitly with `migrate`"
    )]
    NotOwn { tables: String },
    #[error(
        "the database has tables ({tables}) but no {TABLE} table, and its schema matches no version of the spec's migrations; if you know the version it is at, pass --baseline VERSION"
    )]
    NoMatch { tables: String },
    #[error("--baseline {0}: the spec has migrations 1 to {1}")]
    BadBaseline(u32, u32),
    #[error(
        "--baseline {version}: the database lacks what migrations 1 to {version} make ({gaps}); it is not at that version, so nothing was recorded"
    )]
    BaselineGaps { version: u32, gaps: String },
    #[error("migration {version:04}_{name} failed: {reason}; {undone}")]
    Failed {
        version: u32,
        name: &'static str,
        reason: String,
        undone: &'static str,
    },
    #[error("the database has no text for the `{0}` engine")]
    NoText(String),
    #[error("{0}")]
    Database(String),
}

/// Where the database stands against `def`'s migrations in `dialect`; nothing is written.
pub fn status(
    m: &mut dyn Migrator,
    def: &DatabaseDef,
    dialect: &str,
) -> Result<Status, MigrateError> {
    let applied = match m.found().map_err(MigrateError::Database)? {
        Found::Unversioned(tables) => return Ok(Status::Unversioned(tables)),
        Found::Versioned(rows) => rows,
    };
    let at = verify(&applied, def.migrations, dialect)?;
    let pending: Vec<String> = def
        .migrations
        .iter()
        .filter(|x| x.version > at)
        .map(|x| format!("{:04}_{}", x.version, x.name))
        .collect();
    Ok(if pending.is_empty() {
        Status::Current
    } else {
        Status::Behind { at, pending }
    })
}

/// Brings the database up to `def`'s last migration in `dialect`, as `ask` says.
pub fn migrate(
    m: &mut dyn Migrator,
    def: &DatabaseDef,
    dialect: &str,
    ask: Ask,
) -> Result<Report, MigrateError> {
    if !ask.dry_run {
        m.lock().map_err(MigrateError::Database)?;
    }
    let out = run(m, def, dialect, ask);
    if !ask.dry_run {
        let finished = m.finish(out.is_ok()).map_err(MigrateError::Database);
        if out.is_ok() {
            finished?;
        }
    }
    out
}

/// Makes mcpspec's own tables of a team of replicas where they are missing, and adds the
/// columns an older mcpspec made them without: those added, as `table.column`.
fn system_tables(m: &mut dyn Migrator) -> Result<Vec<String>, MigrateError> {
    for ddl in m.system_ddl() {
        m.execute(ddl).map_err(MigrateError::Database)?;
    }
    let mut added = Vec::new();
    for column in m.added_columns() {
        if !m
            .has_column(column.table, column.column)
            .map_err(MigrateError::Database)?
        {
            m.execute(column.ddl).map_err(MigrateError::Database)?;
            added.push(format!("{}.{}", column.table, column.column));
        }
    }
    Ok(added)
}

/// For a spec without migrations: brings only mcpspec's own tables up to date (makes those of
/// a team that are missing and adds the columns an older mcpspec made them without), under
/// the lock; the columns added, or `None` for an engine that keeps none.
pub fn system_only(m: &mut dyn Migrator) -> Result<Option<Vec<String>>, MigrateError> {
    if m.system_ddl().is_empty() {
        return Ok(None);
    }
    m.lock().map_err(MigrateError::Database)?;
    let out = system_tables(m);
    let finished = m.finish(out.is_ok()).map_err(MigrateError::Database);
    let added = out?;
    finished?;
    Ok(Some(added))
}

/// The run itself, inside the lock.
fn run(
    m: &mut dyn Migrator,
    def: &DatabaseDef,
    dialect: &str,
    ask: Ask,
) -> Result<Report, MigrateError> {
    let all = def.migrations;
    let mut report = Report::default();
    let at = match m.found().map_err(MigrateError::Database)? {
        Found::Versioned(rows) => verify(&rows, all, dialect)?,
        Found::Unversioned(tables) => {
            let (at, checked) = starting_version(m, def, &tables, ask)?;
            report.baseline_checked = checked;
            if !ask.dry_run {
                if tables.is_empty() {
                    m.claim().map_err(MigrateError::Database)?;
                }
                let ddl = m.table_ddl();
                m.execute(ddl).map_err(MigrateError::Database)?;
                for x in all.iter().filter(|x| x.version <= at) {
                    m.execute(&record_sql(x, text(x, dialect)?.checksum))
                        .map_err(MigrateError::Database)?;
                }
            }
            report.baselined = (!tables.is_empty()).then_some(at);
            at
        }
    };
    report.at = at;
    if !ask.dry_run {
        system_tables(m)?;
    }
    for x in all.iter().filter(|x| x.version > at) {
        let t = text(x, dialect)?;
        if !ask.dry_run {
            let transactional = m.transactional();
            let failed = |reason: String| MigrateError::Failed {
                version: x.version,
                name: x.name,
                reason,
                undone: if transactional {
                    "nothing was applied: the run is one transaction"
                } else {
                    "this engine commits DDL as it goes, so the migration's statements before the failing one stay applied; undo them by hand, fix the migration, and run it again (the migrations before it are recorded)"
                },
            };
            m.execute(t.sql).map_err(failed)?;
            m.execute(&record_sql(x, t.checksum))
                .map_err(MigrateError::Database)?;
        }
        report.applied.push((x.version, x.name));
        report.at = x.version;
    }
    Ok(report)
}

/// The version a database without a migrations table is at, and for one the user declared
/// with `--baseline`, whether the engine checked it (a version it lacks the schema of is
/// refused): none for a new one, else the
/// baseline asked for or the one its schema matches.
fn starting_version(
    m: &mut dyn Migrator,
    def: &DatabaseDef,
    tables: &[String],
    ask: Ask,
) -> Result<(u32, Option<bool>), MigrateError> {
    if tables.is_empty() {
        return Ok((0, None));
    }
    if ask.only_own {
        return Err(MigrateError::NotOwn {
            tables: tables.join(", "),
        });
    }
    let last = def.migrations.last().map_or(0, |x| x.version);
    if let Some(b) = ask.baseline {
        if !(1..=last).contains(&b) {
            return Err(MigrateError::BadBaseline(b, last));
        }
        return match m.gaps_at(def, b).map_err(MigrateError::Database)? {
            Some(gaps) if !gaps.is_empty() => Err(MigrateError::BaselineGaps {
                version: b,
                gaps: gaps.join("; "),
            }),
            checked => Ok((b, Some(checked.is_some()))),
        };
    }
    m.matching_version(def)
        .map_err(MigrateError::Database)?
        .map(|v| (v, None))
        .ok_or_else(|| MigrateError::NoMatch {
            tables: tables.join(", "),
        })
}

/// The version the recorded rows reach, after checking each against the spec: same name,
/// same checksum, no version the spec does not have.
fn verify(rows: &[Applied], all: &[MigrationDef], dialect: &str) -> Result<u32, MigrateError> {
    let known = all.last().map_or(0, |x| x.version);
    let mut at = 0;
    for row in rows {
        let Some(x) = all.iter().find(|x| x.version == row.version) else {
            return Err(MigrateError::Newer {
                at: row.version,
                known,
            });
        };
        let now = text(x, dialect)?.checksum;
        if row.checksum != now || row.name != x.name {
            return Err(MigrateError::Edited {
                version: x.version,
                name: x.name.to_string(),
                recorded: short(&row.checksum),
                now: short(now),
            });
        }
        at = at.max(row.version);
    }
    Ok(at)
}

fn short(checksum: &str) -> String {
    checksum.chars().take(12).collect()
}

fn text(
    x: &MigrationDef,
    dialect: &str,
) -> Result<&'static crate::def::MigrationTextDef, MigrateError> {
    x.text(dialect)
        .ok_or_else(|| MigrateError::NoText(dialect.to_string()))
}

/// The statement that records `x` as applied. Its values are a number, a name of lowercase
/// letters, digits and `_`, and a hex checksum (the spec compiler allows nothing else), so
/// they are written in the text in every dialect.
fn record_sql(x: &MigrationDef, checksum: &str) -> String {
    format!(
        "INSERT INTO {TABLE} (version, name, checksum) VALUES ({}, '{}', '{}')",
        x.version,
        x.name.replace('\'', "''"),
        checksum.replace('\'', "''")
    )
}

/// `ddl` followed by `statement`, each ended by a `;`.
#[cfg_attr(not(any(feature = "postgres", feature = "mysql")), allow(dead_code))]
pub fn with_statement(ddl: &str, statement: &str) -> String {
    let ddl = ddl.trim_end();
    if ddl.is_empty() {
        return format!("{statement};\n");
    }
    // A newline before the `;`, so that a last line that is a comment does not swallow it.
    let sep = if ddl.ends_with(';') { "\n" } else { "\n;\n" };
    format!("{ddl}{sep}{statement};\n")
}

/// The DDL that creates a new database at `def`'s last migration in `dialect`: the migrations
/// table, each migration and the row that records it; `schema` itself when the spec has no
/// migrations. What `init` runs.
#[cfg_attr(
    not(any(feature = "sqlite", feature = "postgres", feature = "mysql")),
    allow(dead_code)
)]
pub fn creation_ddl(
    def: &DatabaseDef,
    dialect: &str,
    schema: &str,
    table_ddl: &str,
) -> Result<String, MigrateError> {
    if def.migrations.is_empty() {
        return Ok(schema.to_string());
    }
    let mut out = String::new();
    out.push_str(table_ddl);
    out.push_str(";\n");
    for x in def.migrations {
        let t = text(x, dialect)?;
        out.push_str(t.sql.trim_end());
        if !t.sql.trim_end().ends_with(';') {
            // On a line of its own: a last line that is a comment would swallow it.
            out.push_str("\n;");
        }
        out.push('\n');
        out.push_str(&record_sql(x, t.checksum));
        out.push_str(";\n");
    }
    Ok(out)
}

#[cfg(all(test, feature = "sqlite"))]
mod tests {
    use super::*;
    use crate::backend::sqlite::migrator::SqliteMigrator;
    use crate::def::MigrationTextDef;

    static TEXTS_1: [MigrationTextDef; 1] = [MigrationTextDef {
        dialect: "sqlite",
        sql: "CREATE TABLE a (x TEXT NOT NULL);",
        checksum: "c1",
    }];
    static TEXTS_2: [MigrationTextDef; 1] = [MigrationTextDef {
        dialect: "sqlite",
        sql: "CREATE TABLE b (y INTEGER);\nALTER TABLE a ADD COLUMN z TEXT;",
        checksum: "c2",
    }];
    static MIGRATIONS: [MigrationDef; 2] = [
        MigrationDef {
            version: 1,
            name: "init",
            texts: &TEXTS_1,
        },
        MigrationDef {
            version: 2,
            name: "b",
            texts: &TEXTS_2,
        },
    ];
    static DEF: DatabaseDef = DatabaseDef {
        env: None,
        default_linux: None,
        default_macos: None,
        default_windows: None,
        read_only: false,
        schema: "CREATE TABLE a (x TEXT NOT NULL, z TEXT); CREATE TABLE b (y INTEGER);",
        derived: "",
        sample: None,
        engines: &[],
        migrations: &MIGRATIONS,
    };

    /// A SQLite file made by `ddl`, and a migrator on it.
    fn database(ddl: &str) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db.sqlite");
        rusqlite::Connection::open(&path)
            .unwrap()
            .execute_batch(ddl)
            .unwrap();
        (dir, path)
    }

    fn migrator(path: &std::path::Path) -> SqliteMigrator {
        SqliteMigrator::open(path, true).unwrap()
    }

    fn rows(path: &std::path::Path) -> Vec<(u32, String)> {
        let conn = rusqlite::Connection::open(path).unwrap();
        let mut st = conn
            .prepare("SELECT version, name FROM mcpspec_migrations ORDER BY version")
            .unwrap();
        st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap()
    }

    #[test]
    fn a_new_database_gets_every_migration_and_a_record_of_each() {
        let (_dir, path) = database("");
        let report = migrate(&mut migrator(&path), &DEF, "sqlite", Ask::default()).unwrap();
        assert_eq!(
            (report.applied, report.at),
            (vec![(1, "init"), (2, "b")], 2)
        );
        assert_eq!(rows(&path), [(1, "init".into()), (2, "b".into())]);
        assert_eq!(
            status(&mut migrator(&path), &DEF, "sqlite").unwrap(),
            Status::Current
        );
    }

    #[test]
    fn only_the_missing_migrations_run_and_a_dry_run_runs_none() {
        let (_dir, path) =
            database("CREATE TABLE a (x TEXT NOT NULL); INSERT INTO a VALUES ('kept');");
        let baseline = Ask {
            baseline: Some(1),
            dry_run: true,
            ..Ask::default()
        };
        let dry = migrate(&mut migrator(&path), &DEF, "sqlite", baseline).unwrap();
        assert_eq!((dry.baselined, dry.applied), (Some(1), vec![(2, "b")]));
        let untouched = rusqlite::Connection::open(&path).unwrap();
        let tables: i64 = untouched
            .query_row("SELECT count(*) FROM sqlite_schema", [], |r| r.get(0))
            .unwrap();
        assert_eq!(tables, 1, "a dry run writes nothing");
        // Without --baseline, the version is found from the schema.
        let report = migrate(&mut migrator(&path), &DEF, "sqlite", Ask::default()).unwrap();
        assert_eq!(
            (report.baselined, report.applied),
            (Some(1), vec![(2, "b")])
        );
        let kept: String = untouched
            .query_row("SELECT x FROM a", [], |r| r.get(0))
            .unwrap();
        assert_eq!(kept, "kept");
        assert_eq!(rows(&path).len(), 2);
    }

    #[test]
    fn edited_newer_and_foreign_databases_are_refused_untouched() {
        let versioned = |rows: &str| {
            format!(
                "{}; CREATE TABLE a (x TEXT NOT NULL); INSERT INTO mcpspec_migrations (version, name, checksum) VALUES {rows};",
                crate::backend::sqlite::migrator::table_ddl()
            )
        };
        let own = Ask {
            only_own: true,
            ..Ask::default()
        };
        let cases = [
            (
                versioned("(1, 'init', 'other')"),
                Ask::default(),
                "was changed after",
            ),
            (
                versioned("(1, 'init', 'c1'), (3, 'c', 'c3')"),
                Ask::default(),
                "newer than the spec's last",
            ),
            (
                "CREATE TABLE users (id)".to_string(),
                own,
                "did not make (users)",
            ),
            (
                "CREATE TABLE users (id)".to_string(),
                Ask::default(),
                "matches no version",
            ),
            (
                "CREATE TABLE users (id)".to_string(),
                Ask {
                    baseline: Some(3),
                    ..Ask::default()
                },
                "--baseline 3",
            ),
        ];
        for (ddl, ask, want) in cases {
            let (_dir, path) = database(&ddl);
            let before = std::fs::read(&path).unwrap();
            let err = migrate(&mut migrator(&path), &DEF, "sqlite", ask)
                .unwrap_err()
                .to_string();
            assert!(err.contains(want), "{err}");
            assert_eq!(
                std::fs::read(&path).unwrap(),
                before,
                "{want}: the file is unchanged"
            );
        }
    }

    #[test]
    fn creation_ddl_ends_each_text_even_after_a_closing_comment() {
        static COMMENTED: [MigrationTextDef; 1] = [MigrationTextDef {
            dialect: "sqlite",
            sql: "CREATE TABLE a (x TEXT NOT NULL)\n-- no semicolon, and a comment last",
            checksum: "c1",
        }];
        static ONE: [MigrationDef; 1] = [MigrationDef {
            version: 1,
            name: "init",
            texts: &COMMENTED,
        }];
        let def = DatabaseDef {
            migrations: &ONE,
            ..DEF
        };
        let ddl = creation_ddl(
            &def,
            "sqlite",
            "",
            crate::backend::sqlite::migrator::table_ddl(),
        )
        .unwrap();
        let ddl = with_statement(&ddl, "CREATE TABLE b (y)");
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        conn.execute_batch(&ddl)
            .unwrap_or_else(|e| panic!("{e}: {ddl}"));
        let tables: i64 = conn
            .query_row(
                "SELECT count(*) FROM sqlite_schema WHERE type = 'table'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(tables, 3, "{ddl}");
        let recorded: String = conn
            .query_row("SELECT name FROM mcpspec_migrations", [], |r| r.get(0))
            .unwrap();
        assert_eq!(recorded, "init");
        // A schema of its own without migrations is the schema, the statement after it.
        assert_eq!(
            with_statement("CREATE TABLE s (z);", "X"),
            "CREATE TABLE s (z);\nX;\n"
        );
        assert_eq!(
            creation_ddl(
                &DatabaseDef {
                    migrations: &[],
                    ..DEF
                },
                "sqlite",
                "S",
                "T"
            )
            .unwrap(),
            "S"
        );
    }

    #[test]
    fn a_failing_migration_applies_nothing() {
        static BAD: [MigrationTextDef; 1] = [MigrationTextDef {
            dialect: "sqlite",
            sql: "CREATE TABLE c (z); CREATE TABLE a (again);",
            checksum: "c2",
        }];
        static BROKEN: [MigrationDef; 2] = [
            MigrationDef {
                version: 1,
                name: "init",
                texts: &TEXTS_1,
            },
            MigrationDef {
                version: 2,
                name: "bad",
                texts: &BAD,
            },
        ];
        let def = DatabaseDef {
            migrations: &BROKEN,
            ..DEF
        };
        let (_dir, path) = database("");
        let err = migrate(&mut migrator(&path), &def, "sqlite", Ask::default()).unwrap_err();
        assert!(
            err.to_string().starts_with(
                "migration 0002_bad failed: table a already exists; nothing was applied"
            ),
            "{err}"
        );
        let conn = rusqlite::Connection::open(&path).unwrap();
        let tables: i64 = conn
            .query_row("SELECT count(*) FROM sqlite_schema", [], |r| r.get(0))
            .unwrap();
        assert_eq!(tables, 0);
    }
}
