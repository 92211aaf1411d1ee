//! Versioned migrations through the built binary: a lessons database made by version 0.1
//! (before `lesson_evidence`) brought up to date with every row intact, then served; a server
//! refusing a database that lacks migrations (with the command that adds them) and `serve
//! --migrate` applying them; an edited applied migration refused; and two replicas starting
//! with `--migrate` on one PostgreSQL database, of which one applies and the other waits.

use std::path::Path;
use std::process::{Command, Stdio};

use mcpspec_testkit::StdioClient;
use serde_json::{Value, json};

use crate::common::{EXE, mcpspec, start_command};
use crate::pg::Cluster;

/// Every row of `table` as text, in rowid order: what "intact" is compared by.
fn dump(db: &Path, table: &str) -> Vec<String> {
    let conn = rusqlite::Connection::open(db).expect("open");
    let mut st = conn
        .prepare(&format!("SELECT * FROM {table} ORDER BY rowid"))
        .expect("prepare");
    let n = st.column_count();
    st.query_map([], |r| {
        let cells: Vec<String> = (0..n)
            .map(|i| match r.get_ref(i).expect("cell") {
                rusqlite::types::ValueRef::Null => "NULL".to_string(),
                rusqlite::types::ValueRef::Integer(v) => v.to_string(),
                rusqlite::types::ValueRef::Real(v) => v.to_string(),
                rusqlite::types::ValueRef::Text(t) | rusqlite::types::ValueRef::Blob(t) => {
                    String::from_utf8_lossy(t).into_owned()
                }
            })
            .collect();
        Ok(cells.join("|"))
    })
    .expect("query")
    .collect::<rusqlite::Result<_>>()
    .expect("rows")
}

/// A lessons database as version 0.1 of the server made it (its `init`: mcpspec's
/// application id, then the schema of that version, which is migration 0001), with rows a
/// person would have: lessons of each status, settings and scan state.
fn lessons_0_1(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("lessons.db");
    let conn = rusqlite::Connection::open(&path).expect("create");
    let schema = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../spec/migrations/lessons/0001_init.sql"),
    )
    .expect("read migration 0001");
    conn.execute_batch(&format!("PRAGMA application_id = 1835234160;\n{schema}"))
        .expect("the 0.1 schema");
    conn.execute_batch(
        "INSERT INTO lessons (slug, type, status, tool_names, command_patterns, trigger, problem, solution, tags, source, occurrences)
         VALUES ('no-force-push', 'guard', 'active', '[\"Bash\"]', '[\"git push --force\"]', 'git push --force',
                 'A force push lost a teammate''s commits.', 'Use --force-with-lease.', '[\"git\"]', 'manual', 1),
                ('stash-untracked', 'hint', 'candidate', '[\"Bash\"]', '[]', 'git stash',
                 'Untracked files leaked into the next branch.', 'Use git stash -u.', '[\"git\"]', 'scan', 3),
                ('old-advice', 'hint', 'archived', '[]', '[]', 'npm install',
                 'Outdated.', 'Gone.', '[]', 'mcp', 1);
         UPDATE lessons SET archived_reason = 'superseded' WHERE slug = 'old-advice';
         INSERT INTO settings (key, value) VALUES ('injection.hints', 'false');
         INSERT INTO scan_state (path, offset, scanned_at) VALUES ('/home/a/.claude/projects/x.jsonl', 4096, '2026-01-01T00:00:00Z');",
    )
    .expect("rows");
    path
}

const KEPT: [&str; 4] = ["lessons", "settings", "scan_state", "lesson_manifest"];

#[test]
fn a_lessons_database_from_version_0_1_migrates_with_every_row_and_then_serves() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = lessons_0_1(dir.path());
    let shown = db.display().to_string();
    let before: Vec<Vec<String>> = KEPT.iter().map(|t| dump(&db, t)).collect();

    // Served as it is, it names what is missing and the command that adds it.
    let (code, _, err) = mcpspec(
        &["call", "lessons", "lessons_list", "{}", "--db", &shown],
        &[],
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("no such table: lesson_evidence"), "{err}");
    assert!(
        err.contains(&format!(
            "bring it up to date with: mcpspec-seeds migrate lessons --db {shown}"
        )),
        "{err}"
    );

    // A dry run says what it would do and writes nothing.
    let bytes = std::fs::read(&db).expect("read");
    let (code, out, err) = mcpspec(&["migrate", "lessons", "--db", &shown, "--dry-run"], &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out,
        format!(
            "{shown} had no migrations table; its schema is that of migration 0001_init (would record 0001_init as applied)\nwould apply 0002_lesson_evidence\n"
        )
    );
    assert!(
        std::fs::read(&db).expect("read") == bytes,
        "a dry run writes nothing"
    );

    let (code, out, err) = mcpspec(&["migrate", "lessons", "--db", &shown], &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out,
        format!(
            "{shown} had no migrations table; its schema is that of migration 0001_init (recorded 0001_init as applied)\napplied 0002_lesson_evidence\n{shown} is at migration 0002_lesson_evidence\n"
        )
    );
    let after: Vec<Vec<String>> = KEPT.iter().map(|t| dump(&db, t)).collect();
    assert_eq!(after, before, "every row is as it was");
    assert_eq!(
        dump(&db, "mcpspec_migrations")
            .iter()
            .map(|r| r.split('|').take(2).collect::<Vec<_>>().join("|"))
            .collect::<Vec<_>>(),
        ["1|init", "2|lesson_evidence"]
    );
    let (_, again, _) = mcpspec(&["migrate", "lessons", "--db", &shown], &[]);
    assert_eq!(
        again,
        format!("{shown} is at migration 0002_lesson_evidence: nothing to apply\n")
    );

    // The migrated database serves: its lessons, the full-text index over them, the new table.
    let mut s = start_command(
        Command::new(EXE)
            .args(["serve", "lessons", "--db"])
            .arg(&db)
            .env("MCPSPEC_LOG", "warn")
            .stderr(Stdio::null()),
        crate::common::Db {
            _dir: dir,
            path: db.clone(),
        },
    );
    let found = s.ok("lessons_search", json!({"query": "force push"}));
    assert_eq!(found["results"][0]["slug"], "no-force-push", "{found}");
    let review = s.ok("lessons_review", json!({}));
    assert_eq!(
        review["candidates"][0]["slug"], "stash-untracked",
        "{review}"
    );
    assert_eq!(review["candidates"][0]["evidence"], json!([]), "{review}");
    s.finish();
}

/// A project with one spec served from its file, `notes`, whose migrations are written by the
/// test: (version, file name, text).
fn notes_project(schema: &str, migrations: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    write_notes(dir.path(), schema, migrations);
    dir
}

fn write_notes(dir: &Path, schema: &str, migrations: &[(&str, &str)]) {
    let spec = format!(
        "server:\n  name: notes\n  version: 0.1.0\ndatabase:\n  migrations: migrations\n  schema: |\n{}\ntools:\n  - name: list_notes\n    description: Every note.\n    annotations: {{readOnlyHint: true}}\n    sql:\n      key: notes\n      query: SELECT id, body FROM notes ORDER BY id\n      columns: {{id: integer, body: text}}\n",
        schema
            .lines()
            .map(|l| format!("    {l}"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    std::fs::write(dir.join("notes.yaml"), spec).expect("spec");
    std::fs::create_dir_all(dir.join("migrations")).expect("dir");
    for (file, text) in migrations {
        std::fs::write(dir.join("migrations").join(file), text).expect("migration");
    }
}

const V1: &str = "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL);";
const V2: &str = "ALTER TABLE notes ADD COLUMN due TEXT;";
const SCHEMA_2: &str = "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL, due TEXT);";

#[test]
fn a_server_refuses_a_database_without_its_migrations_until_they_are_applied() {
    let project = notes_project(V1, &[("0001_init.sql", V1)]);
    let spec = project.path().join("notes.yaml").display().to_string();
    let db = project.path().join("notes.db").display().to_string();
    let (code, _, err) = mcpspec(&["init", "--spec", &spec, "--db", &db], &[]);
    assert_eq!(code, 0, "{err}");
    rusqlite::Connection::open(&db)
        .expect("open")
        .execute("INSERT INTO notes (body) VALUES ('kept')", [])
        .expect("a row");

    // The spec moves on: a column and the migration that adds it.
    write_notes(
        project.path(),
        SCHEMA_2,
        &[("0001_init.sql", V1), ("0002_due.sql", V2)],
    );
    let list = ["call", "--spec", &spec, "list_notes", "{}", "--db", &db];
    let (code, _, err) = mcpspec(&list, &[]);
    assert_eq!(code, 2, "{err}");
    assert_eq!(
        err,
        format!(
            "error: the database at {db} is at migration 1 of 2; not applied: 0002_due\n  run: mcpspec-seeds migrate --spec {spec} --db {db}\n  or start the server with --migrate\n"
        )
    );

    // `serve --migrate` applies it at start-up, and serves.
    let mut client = StdioClient::spawn(
        Command::new(EXE)
            .args(["serve", "--spec", &spec, "--migrate", "--db", &db])
            .env("MCPSPEC_LOG", "warn")
            .stderr(Stdio::null()),
    )
    .expect("spawn");
    client.initialize().expect("initialize");
    let listed = client.call_tool("list_notes", json!({})).expect("call");
    assert_eq!(
        listed["result"]["structuredContent"]["notes"],
        json!([{"id": 1, "body": "kept"}]),
        "{listed}"
    );
    client.finish(std::time::Duration::from_secs(10));

    // An applied migration edited afterwards is refused, before anything is served.
    write_notes(
        project.path(),
        SCHEMA_2,
        &[
            ("0001_init.sql", V1),
            (
                "0002_due.sql",
                "ALTER TABLE notes ADD COLUMN due TEXT NOT NULL DEFAULT '';",
            ),
        ],
    );
    let (code, _, err) = mcpspec(&list, &[]);
    assert_eq!(code, 2);
    assert!(
        err.starts_with("error: migration 0002_due was changed after this database applied it (recorded checksum "),
        "{err}"
    );
    let (code, _, err) = mcpspec(&["migrate", "--spec", &spec, "--db", &db], &[]);
    assert_eq!(code, 2);
    assert!(
        err.contains("restore the file as it was and put the change in a new migration"),
        "{err}"
    );
}

#[test]
fn serve_migrate_leaves_another_applications_database_to_an_explicit_migrate() {
    let project = notes_project(V1, &[("0001_init.sql", V1)]);
    let spec = project.path().join("notes.yaml").display().to_string();
    let db = project.path().join("theirs.db");
    rusqlite::Connection::open(&db)
        .expect("create")
        .execute_batch("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL); CREATE TABLE users (id INTEGER PRIMARY KEY);")
        .expect("their schema");
    let bytes = std::fs::read(&db).expect("read");
    let shown = db.display().to_string();
    let (code, _, err) = mcpspec(
        &["serve", "--spec", &spec, "--migrate", "--db", &shown],
        &[],
    );
    assert_eq!(code, 2);
    assert!(
        err.contains("holds tables that mcpspec's migrations did not make (notes, users)"),
        "{err}"
    );
    assert!(std::fs::read(&db).expect("read") == bytes, "untouched");
    // Its schema is no version of the migrations (it has `users`): migrate says so, and a
    // baseline the person gives is taken.
    let (code, _, err) = mcpspec(&["migrate", "--spec", &spec, "--db", &shown], &[]);
    assert_eq!(code, 2);
    assert!(err.contains("matches no version of the spec's migrations; if you know the version it is at, pass --baseline VERSION"), "{err}");
    assert!(std::fs::read(&db).expect("read") == bytes, "untouched");
    let (code, out, err) = mcpspec(
        &[
            "migrate",
            "--spec",
            &spec,
            "--db",
            &shown,
            "--baseline",
            "1",
        ],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("it holds what the migrations up to 0001_init make, as --baseline says (checked) (recorded 0001_init as applied)"),
        "{out}"
    );
}

/// `--baseline N` is checked where the engine can compare schemas (SQLite): a database that
/// lacks what migrations 1 to N make is refused with what it lacks, and nothing is recorded;
/// where it cannot (PostgreSQL), the version is taken and the output says nothing was checked.
#[cfg(feature = "full")]
#[test]
fn a_baseline_is_checked_where_the_engine_can_and_said_unchecked_where_not() {
    let project = notes_project(SCHEMA_2, &[("0001_init.sql", V1), ("0002_due.sql", V2)]);
    let spec = project.path().join("notes.yaml").display().to_string();
    let db = project.path().join("theirs.db");
    rusqlite::Connection::open(&db)
        .expect("create")
        .execute_batch("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL); CREATE TABLE users (id INTEGER PRIMARY KEY);")
        .expect("their schema, at version 1");
    let bytes = std::fs::read(&db).expect("read");
    let shown = db.display().to_string();
    let migrate = |baseline: &str, db: &str| {
        mcpspec(
            &[
                "migrate",
                "--spec",
                &spec,
                "--db",
                db,
                "--baseline",
                baseline,
            ],
            &[],
        )
    };
    let (code, _, err) = migrate("2", &shown);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("--baseline 2: the database lacks what migrations 1 to 2 make (")
            && err.contains("due"),
        "{err}"
    );
    assert!(
        std::fs::read(&db).expect("read") == bytes,
        "nothing recorded"
    );
    let (code, out, err) = migrate("1", &shown);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("(checked) (recorded 0001_init as applied)"),
        "{out}"
    );
    assert!(out.contains("applied 0002_due"), "{out}");

    let url = Cluster::shared().create_database();
    crate::common::sql_on(
        crate::common::Engine::Postgres,
        Path::new(&url),
        "CREATE TABLE theirs (x integer)",
    );
    // At the newest migration by the user's word: nothing is left to apply.
    let (code, out, err) = mcpspec(
        &["migrate", "knowledge", "--db", &url, "--baseline", "2"],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("--baseline says it is at migration 0002_embeddings, which was not checked"),
        "{out}"
    );
}

/// A `serve --migrate` replica of knowledge on `url` over stdio, started now.
fn replica(url: &str) -> StdioClient {
    StdioClient::spawn(
        Command::new(EXE)
            .args(["serve", "knowledge", "--migrate", "--db", url])
            .env("MCPSPEC_LOG", "warn,mcpspec=info")
            .env("MCPSPEC_STARTUP_JOBS", "off")
            .stderr(Stdio::piped()),
    )
    .expect("spawn a replica")
}

#[cfg(feature = "full")]
#[test]
fn replicas_starting_together_with_migrate_on_one_postgres_database_apply_it_once() {
    let cluster = Cluster::shared();
    let url = cluster.create_database();
    // Both processes start before either is asked anything: their start-ups race.
    let mut replicas: Vec<StdioClient> = (0..2).map(|_| replica(&url)).collect();
    let mut logs = Vec::new();
    for r in &mut replicas {
        let stderr = r.take_stderr().expect("stderr");
        logs.push(std::thread::spawn(move || {
            std::io::read_to_string(stderr).unwrap_or_default()
        }));
    }
    for r in &mut replicas {
        let init = r.initialize().expect("initialize");
        assert!(init.get("result").is_some(), "{init}");
        let added = r
            .call_tool(
                "kb_add",
                json!({"content": "Replicas share one schema.", "role": "dev"}),
            )
            .expect("kb_add");
        assert_eq!(added["result"]["isError"], false, "{added}");
    }
    for r in replicas {
        r.finish(std::time::Duration::from_secs(10));
    }
    let logs: Vec<String> = logs.into_iter().map(|h| h.join().expect("log")).collect();
    let applied = logs
        .iter()
        .filter(|l| l.contains("applied migration 0001_init"))
        .count();
    assert_eq!(
        applied, 1,
        "one replica applies, the other finds it done: {logs:#?}"
    );
    assert_eq!(
        cluster.psql(
            &url,
            "SELECT string_agg(version || ' ' || name, ',' ORDER BY version) FROM mcpspec_migrations"
        ),
        "1 init,2 embeddings"
    );
    assert_eq!(
        cluster.psql(&url, "SELECT count(*) FROM knowledge_entries"),
        "2"
    );
}

#[cfg(feature = "full")]
#[test]
fn knowledge_migrations_give_its_declared_postgres_schema() {
    let cluster = Cluster::shared();
    let migrated = cluster.create_database();
    let (code, _, err) = mcpspec(&["init", "knowledge", "--db", &migrated], &[]);
    assert_eq!(code, 0, "{err}");
    let declared = cluster.create_database();
    let spec: Value = serde_saphyr::from_str::<Value>(
        &std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../spec/knowledge.yaml"),
        )
        .expect("spec"),
    )
    .expect("yaml");
    let schema = spec["database"]["postgres"]["schema"]
        .as_str()
        .expect("schema");
    cluster.psql(&declared, schema);
    // Columns with types, NULL and defaults; indexes; triggers; constraints; mcpspec's own
    // tables left out.
    let catalog = "SELECT string_agg(x, E'\\n' ORDER BY x) FROM (
        SELECT table_name || '.' || column_name || ' ' || data_type || ' ' || is_nullable || ' ' || coalesce(column_default, '') AS x
          FROM information_schema.columns WHERE table_schema = 'public' AND table_name NOT LIKE 'mcpspec%'
        UNION ALL SELECT indexdef FROM pg_indexes WHERE schemaname = 'public' AND tablename NOT LIKE 'mcpspec%'
        UNION ALL SELECT pg_get_triggerdef(oid) FROM pg_trigger WHERE NOT tgisinternal
        UNION ALL SELECT conname || ' ' || pg_get_constraintdef(oid) FROM pg_constraint
          WHERE connamespace = 'public'::regnamespace AND conrelid::regclass::text NOT LIKE 'mcpspec%'
      ) t";
    let want = cluster.psql(&declared, catalog);
    let got = cluster.psql(&migrated, catalog);
    assert!(
        want.contains("knowledge_entries.search tsvector NO"),
        "{want}"
    );
    assert_eq!(got, want);
}

/// On MariaDB (whose DDL commits as it goes, so a run holds a named lock instead of a
/// transaction) `migrate` makes an empty database, records it, and finds nothing to do after;
/// the server then serves it.
#[cfg(feature = "full")]
#[test]
fn migrate_on_mariadb_makes_an_empty_database_and_records_it() {
    let url = crate::maria::Server::shared().create_database();
    let (code, out, err) = mcpspec(&["migrate", "knowledge", "--db", &url, "--dry-run"], &[]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.starts_with("would apply 0001_init\nwould apply 0002_embeddings\n"),
        "{out}"
    );
    let (code, out, err) = mcpspec(&["migrate", "knowledge", "--db", &url], &[]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.starts_with("applied 0001_init\napplied 0002_embeddings\n"),
        "{out}"
    );
    let (code, out, err) = mcpspec(&["migrate", "knowledge", "--db", &url], &[]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.ends_with("is at migration 0002_embeddings: nothing to apply\n"),
        "{out}"
    );
    let (code, out, err) = mcpspec(
        &[
            "call",
            "knowledge",
            "kb_add",
            r#"{"content": "MariaDB migrated.", "role": "qa"}"#,
            "--db",
            &url,
        ],
        &[],
    );
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(
        crate::common::sql_on(
            crate::common::Engine::Mariadb,
            Path::new(&url),
            "SELECT GROUP_CONCAT(CONCAT(version, ' ', name) ORDER BY version) FROM mcpspec_migrations"
        ),
        "1 init,2 embeddings"
    );
}

crate::on_every_engine!(a_migrations_row_changed_by_hand_is_said_not_a_crash);

/// A row of `mcpspec_migrations` changed by hand (a negative version) stops `migrate`, `serve`
/// and `call` with what is wrong and what to do, on every engine: never a panic of the
/// driver's row conversion.
fn a_migrations_row_changed_by_hand_is_said_not_a_crash(engine: crate::common::Engine) {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = match engine {
        crate::common::Engine::Sqlite => {
            let path = dir.path().join("k.db");
            std::fs::write(&path, b"").expect("an empty database");
            path.display().to_string()
        }
        crate::common::Engine::Postgres => Cluster::shared().create_database(),
        crate::common::Engine::Mariadb => crate::maria::Server::shared().create_database(),
    };
    let (code, _, err) = mcpspec(&["migrate", "knowledge", "--db", &db], &[]);
    assert_eq!(code, 0, "{err}");
    crate::common::sql_on(
        engine,
        Path::new(&db),
        "INSERT INTO mcpspec_migrations (version, name, checksum) VALUES (-3, 'by_hand', 'x')",
    );
    let runs: [&[&str]; 3] = [
        &["migrate", "knowledge", "--db", &db],
        &["call", "knowledge", "kb_list", "{}", "--db", &db],
        &["migrate", "knowledge", "--db", &db, "--dry-run"],
    ];
    for args in runs {
        let (code, out, err) = mcpspec(args, &[]);
        assert_eq!(code, 2, "{args:?}: {out}{err}");
        assert!(
            err.contains("holds the version -3 (by_hand)") && err.contains("remove or correct"),
            "{args:?}: {err}"
        );
        assert!(!err.contains("panicked"), "{err}");
    }
}
