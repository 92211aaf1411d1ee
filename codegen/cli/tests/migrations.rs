//! `codegen check` and `codegen migrate --plan` on a project of their own (`--root`): the
//! migrations must give the declared schema, a migration the contract snapshot records may
//! not change, a new migration takes the version step the contract asks for, and the
//! migration `--plan` writes applies cleanly to a real database of the previous version (its
//! rows kept) and makes `check` pass once that step is made. A step that may lose data needs
//! the acknowledgement line in the file.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A project: `spec/notes.yaml` and its migrations in `spec/migrations/notes/`.
struct Project {
    dir: tempfile::TempDir,
}

const V1: &str = "CREATE TABLE notes (\n  id INTEGER PRIMARY KEY,\n  body TEXT NOT NULL,\n  tag TEXT\n);\nCREATE INDEX notes_tag ON notes (tag);\n";

impl Project {
    fn new() -> Project {
        let p = Project {
            dir: tempfile::tempdir().unwrap(),
        };
        std::fs::create_dir_all(p.path("spec/migrations/notes")).unwrap();
        std::fs::create_dir_all(p.path("docs")).unwrap();
        p.write("spec/migrations/notes/0001_init.sql", V1);
        p.spec("1.0.0", V1);
        for command in ["snapshot", "docs"] {
            let (ok, text) = p.codegen(&[command]);
            assert!(ok, "{command}: {text}");
        }
        p
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    fn write(&self, rel: &str, text: &str) {
        std::fs::write(self.path(rel), text).unwrap();
    }

    fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.path(rel)).unwrap()
    }

    /// Writes the spec at `version` with `schema` declared.
    fn spec(&self, version: &str, schema: &str) {
        let schema: Vec<String> = schema.lines().map(|l| format!("    {l}")).collect();
        self.write(
            "spec/notes.yaml",
            &format!(
                "server:\n  name: notes\n  version: {version}\ndatabase:\n  migrations: migrations/notes\n  schema: |\n{}\ntools:\n  - name: list_notes\n    description: Every note.\n    annotations: {{readOnlyHint: true}}\n    sql:\n      key: notes\n      query: SELECT id, body FROM notes ORDER BY id\n      columns: {{id: integer, body: text}}\n",
                schema.join("\n")
            ),
        );
    }

    /// Runs `codegen ARGS --root DIR`; (success, everything it printed).
    fn codegen(&self, args: &[&str]) -> (bool, String) {
        let out = Command::new(env!("CARGO_BIN_EXE_codegen"))
            .args(args)
            .arg("--root")
            .arg(self.dir.path())
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        (out.status.success(), text)
    }

    /// `check`, then `snapshot` and `docs` when it asks for them only: what a person does
    /// once the version step is made.
    fn record(&self) {
        for command in ["snapshot", "docs"] {
            let (ok, text) = self.codegen(&[command]);
            assert!(ok, "{command}: {text}");
        }
        let (ok, text) = self.codegen(&["check"]);
        assert!(ok, "{text}");
    }

    /// The line of `spec/notes.yaml` that starts with `text`.
    fn line_of(&self, text: &str) -> usize {
        1 + self
            .read("spec/notes.yaml")
            .lines()
            .position(|l| l.trim_start().starts_with(text))
            .unwrap()
    }

    /// The spec as the runtime's definition, compiled from the project's files.
    fn def(&self) -> &'static mcpspec::def::ServerDef {
        let text = self.read("spec/notes.yaml");
        let spec = codegen::compile_in(&self.path("spec"), Path::new("spec/notes.yaml"), &text)
            .unwrap_or_else(|d| panic!("{d}"));
        codegen::defs::server_def(&spec)
    }
}

/// A SQLite file of the project's previous version (`def`, as `init` makes it) with a row.
fn database_at(def: &'static mcpspec::def::ServerDef, dir: &Path) -> PathBuf {
    let path = dir.join("notes.db");
    let location = mcpspec::backend::Location::File(path.clone());
    let database = def.database.as_ref().unwrap();
    mcpspec::__internal::backend::create(&location, def.name, database, false).unwrap();
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute("INSERT INTO notes (body, tag) VALUES ('kept', 'a')", [])
        .unwrap();
    path
}

/// Applies `def`'s migrations to the file at `path` through the runtime, as `mcpspec
/// migrate` does.
fn migrate(def: &'static mcpspec::def::ServerDef, path: &Path) -> Vec<(u32, &'static str)> {
    let location = mcpspec::backend::Location::File(path.to_path_buf());
    let database = def.database.as_ref().unwrap();
    let mut m =
        mcpspec::__internal::backend::migrator(&location, def.name, database, true).unwrap();
    let ask = mcpspec::__internal::backend::migrate::Ask::default();
    mcpspec::__internal::backend::migrate::migrate(&mut *m, database, "sqlite", ask)
        .unwrap_or_else(|e| panic!("{e}"))
        .applied
}

#[test]
fn a_planned_column_applies_cleanly_and_check_passes_after_the_version_step() {
    let p = Project::new();
    let (ok, text) = p.codegen(&["check"]);
    assert!(ok, "{text}");
    let before = p.def();
    let scratch = tempfile::tempdir().unwrap();
    let db = database_at(before, scratch.path());

    // The schema gains a column the migrations do not make: check says so at `migrations:`.
    let v2 = V1.replace(
        "  tag TEXT\n",
        "  tag TEXT,\n  due TEXT NOT NULL DEFAULT ''\n",
    );
    p.spec("1.0.0", &v2);
    let (ok, text) = p.codegen(&["check"]);
    assert!(!ok);
    let at = format!("spec/notes.yaml:{}:", p.line_of("migrations:"));
    assert!(text.contains(&at), "{text}");
    assert!(
        text.contains("the migrations in spec/migrations/notes do not give the declared `database.schema` (- only in the schema, + only after the migrations):\n    - table notes: column due TEXT NOT NULL DEFAULT ''"),
        "{text}"
    );
    assert!(
        text.contains("`cargo run -p codegen -- migrate --plan notes` writes it"),
        "{text}"
    );

    let (ok, text) = p.codegen(&["migrate", "--plan", "notes"]);
    assert!(ok, "{text}");
    assert!(
        text.starts_with(
            "wrote spec/migrations/notes/0002_add_notes_due.sql\n  add column notes.due\n"
        ),
        "{text}"
    );
    let planned = p.read("spec/migrations/notes/0002_add_notes_due.sql");
    assert!(
        planned.ends_with("\n-- add column notes.due\nALTER TABLE \"notes\" ADD COLUMN \"due\" TEXT NOT NULL DEFAULT '';\n"),
        "{planned}"
    );

    // Check now asks for the version step a new migration needs.
    let (ok, text) = p.codegen(&["check"]);
    assert!(!ok);
    assert!(
        text.contains("compatible: migration `0002_add_notes_due`: migration added"),
        "{text}"
    );
    assert!(text.contains("set `server.version: 1.1.0`"), "{text}");
    p.spec("1.1.0", &v2);
    p.record();
    let lock = p.read("spec/notes.lock.json");
    assert!(lock.contains("\"0002_add_notes_due\""), "{lock}");

    // `check --db` finds the database of the version before behind, and writes nothing.
    let live = format!("notes={}", db.display());
    let bytes = std::fs::read(&db).unwrap();
    let (ok, text) = p.codegen(&["check", "--db", &live]);
    assert!(!ok);
    assert!(
        text.contains(&format!(
            "the live database {} is at migration 1 of 2; not applied: 0002_add_notes_due",
            db.display()
        )),
        "{text}"
    );
    assert!(
        std::fs::read(&db).unwrap() == bytes,
        "check --db writes nothing"
    );

    // The planned file applies to the database of the version before, and keeps its row.
    assert_eq!(migrate(p.def(), &db), [(2, "add_notes_due")]);
    let (ok, text) = p.codegen(&["check", "--db", &live]);
    assert!(ok, "{text}");
    let conn = rusqlite::Connection::open(&db).unwrap();
    let row: (String, String) = conn
        .query_row("SELECT body, due FROM notes", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap();
    assert_eq!(row, ("kept".to_string(), String::new()));
}

#[test]
fn an_edited_recorded_migration_and_a_wrong_one_fail_check() {
    let p = Project::new();
    // Editing the recorded migration (its schema with it) is refused whatever the version.
    let edited = V1.replace("tag TEXT", "tag TEXT NOT NULL DEFAULT 'none'");
    p.write("spec/migrations/notes/0001_init.sql", &edited);
    p.spec("2.0.0", &edited);
    let (ok, text) = p.codegen(&["check"]);
    assert!(!ok);
    assert!(
        text.contains("a migration that spec/notes.lock.json records changed: 0001_init was edited; a database may have applied it as it was"),
        "{text}"
    );
    let (ok, text) = p.codegen(&["snapshot"]);
    assert!(!ok, "snapshot records no edited migration: {text}");

    // A new migration that does not give the schema is found, and one that does not run too.
    p.write("spec/migrations/notes/0001_init.sql", V1);
    p.spec("1.1.0", V1);
    p.write(
        "spec/migrations/notes/0002_more.sql",
        "CREATE TABLE extra (id INTEGER);\n",
    );
    let (ok, text) = p.codegen(&["check"]);
    assert!(!ok);
    assert!(text.contains("    + table extra"), "{text}");
    p.write(
        "spec/migrations/notes/0002_more.sql",
        "ALTER TABLE missing ADD COLUMN x TEXT;\n",
    );
    let (ok, text) = p.codegen(&["check"]);
    assert!(!ok);
    assert!(
        text.contains("spec/migrations/notes/0002_more.sql:1:1")
            && text.contains("migration 0002_more does not run on SQLite after the ones before it: no such table: missing"),
        "{text}"
    );
    // A gap in the numbering and a name that is not a migration's are spec errors.
    std::fs::remove_file(p.path("spec/migrations/notes/0002_more.sql")).unwrap();
    p.write("spec/migrations/notes/0003_later.sql", "SELECT 1;\n");
    p.write("spec/migrations/notes/4_bad.sql", "SELECT 1;\n");
    let (ok, text) = p.codegen(&["check"]);
    assert!(!ok);
    assert!(
        text.contains("migration 0002 is missing: the versions go on at 0003"),
        "{text}"
    );
    assert!(
        text.contains("`4_bad.sql` is not a migration file name"),
        "{text}"
    );
}

#[test]
fn a_destructive_plan_needs_acknowledging_and_a_major_step_and_keeps_the_rows() {
    let p = Project::new();
    let scratch = tempfile::tempdir().unwrap();
    let db = database_at(p.def(), scratch.path());
    // `tag` goes: SQLite cannot drop it in place, so the table is rebuilt.
    let v2 = V1
        .replace(
            "  body TEXT NOT NULL,\n  tag TEXT\n",
            "  body TEXT NOT NULL\n",
        )
        .replace("CREATE INDEX notes_tag ON notes (tag);\n", "");
    p.spec("1.0.0", &v2);
    let (ok, text) = p.codegen(&["migrate", "--plan", "notes", "--name", "drop_tag"]);
    assert!(ok, "{text}");
    assert!(text.contains("drops column(s) tag (destructive)"), "{text}");
    let file = "spec/migrations/notes/0002_drop_tag.sql";
    let planned = p.read(file);
    assert!(
        planned.contains("-- destructive: rebuild table notes"),
        "{planned}"
    );

    let (ok, text) = p.codegen(&["check"]);
    assert!(!ok);
    assert!(
        text.contains("`DROP TABLE` may lose data, and the migration does not say it means it"),
        "{text}"
    );
    p.write(file, &format!("-- mcpspec: destructive\n{planned}"));
    let (ok, text) = p.codegen(&["check"]);
    assert!(!ok);
    assert!(
        text.contains("breaking: migration `0002_drop_tag`: destructive migration added"),
        "{text}"
    );
    assert!(text.contains("set `server.version: 2.0.0`"), "{text}");
    p.spec("2.0.0", &v2);
    p.record();

    assert_eq!(migrate(p.def(), &db), [(2, "drop_tag")]);
    let conn = rusqlite::Connection::open(&db).unwrap();
    let body: String = conn
        .query_row("SELECT body FROM notes", [], |r| r.get(0))
        .unwrap();
    assert_eq!(body, "kept");
    let columns: i64 = conn
        .query_row("SELECT count(*) FROM pragma_table_info('notes')", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(columns, 2);
}
