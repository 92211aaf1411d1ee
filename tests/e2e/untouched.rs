//! A database mcpspec did not create keeps its schema: served read-only in every way a file
//! can be read-only, served writable, checked with `codegen check --db`-style rehearsals and
//! `mcpspec test --db`, its `sqlite_master` (and on PostgreSQL its catalog) and rows are as
//! they were, and the derived structures live in a mirror under the cache directory. With
//! `--derive-in-place` the user lets them into the database.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use mcpspec_testkit::StdioClient;
use serde_json::json;

use crate::common::{Db, EXE, Session};
use crate::studio::app_studio_db;

/// Everything of a SQLite database's schema, in order.
fn schema(db: &Path) -> Vec<(String, String, Option<String>)> {
    let conn =
        rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .unwrap();
    let mut st = conn
        .prepare("SELECT type, name, sql FROM sqlite_master ORDER BY type, name")
        .unwrap();
    st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

/// Every table's name and row count.
fn counts(db: &Path) -> Vec<(String, i64)> {
    let conn =
        rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .unwrap();
    let tables: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    tables
        .into_iter()
        .map(|t| {
            let n = conn
                .query_row(&format!("SELECT count(*) FROM \"{t}\""), [], |r| r.get(0))
                .unwrap();
            (t, n)
        })
        .collect()
}

/// The files in a directory, by name.
fn files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// `mcpspec ARGS` as a user the file modes bind: `nobody` when the tests run as root (who
/// may write any file), else the test's own user.
fn unprivileged(args: &[&str]) -> Command {
    if is_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "nobody", "--", EXE]).args(args);
        c
    } else {
        let mut c = Command::new(EXE);
        c.args(args);
        c
    }
}

/// A session over `command` (a `serve studio`), its mirrors under `cache`.
fn session(mut command: Command, cache: &Path, db: Db) -> Session {
    command
        .env("MCPSPEC_CACHE_DIR", cache)
        .env("MCPSPEC_LOG", "warn")
        .stderr(Stdio::null());
    crate::common::start_command(&mut command, db)
}

/// A directory anyone may write, for the mirrors of a server that runs as `nobody`.
fn open_cache() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let cache = tempfile::tempdir().unwrap();
    std::fs::set_permissions(cache.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    cache
}

/// How a database is read-only.
#[derive(Debug, Clone, Copy)]
enum ReadOnly {
    Flag,
    Uri,
    FileAndDirectoryModes,
}

/// Every studio tool answers on the application's own database served read-only, as the seed's
/// server does: a flag, a `mode=ro` URI, or a 0444 file in a 0555 directory (the server then
/// running as a user the modes bind). Writes are refused as read-only; a learning the
/// application writes meanwhile is found by the next search and tag filter; the file's schema
/// and the directory are exactly as they were.
#[test]
fn the_app_s_own_database_served_read_only_answers_every_tool_and_stays_as_it_was() {
    use std::os::unix::fs::PermissionsExt;
    for how in [
        ReadOnly::Flag,
        ReadOnly::Uri,
        ReadOnly::FileAndDirectoryModes,
    ] {
        let db = app_studio_db(2000);
        let (path, dir) = (db.path.clone(), db._dir.path().to_path_buf());
        let before = (schema(&path), files(&dir));
        let cache = open_cache();
        let path_text = path.to_str().unwrap().to_string();
        let uri = format!("file:{path_text}?mode=ro");
        let command = match how {
            ReadOnly::Flag => {
                let mut c = Command::new(EXE);
                c.args(["serve", "studio", "--db", &path_text, "--read-only"]);
                c
            }
            ReadOnly::Uri => {
                let mut c = Command::new(EXE);
                c.args(["serve", "studio", "--db", &uri]);
                c
            }
            ReadOnly::FileAndDirectoryModes => {
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o444)).unwrap();
                std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o555)).unwrap();
                unprivileged(&["serve", "studio", "--db", &path_text])
            }
        };
        let mut s = session(command, cache.path(), db);
        every_tool_answers(&mut s, how);
        // The application writes a learning while the server runs.
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute(
            "INSERT INTO learnings (id, title, problem, solution, tags, created_at, updated_at)
             VALUES ('L-9001', 'Zebra crossings', 'p', 's', '[\"stripes\"]', '2001-01-01T00:00:00Z', '2001-01-01T00:00:00Z')",
            [],
        )
        .unwrap();
        drop(conn);
        let found = s.ok("query_learnings", json!({"search": "zebra"}));
        assert_eq!(found["learnings"][0]["id"], "L-9001", "{how:?}: {found}");
        let found = s.ok("query_learnings", json!({"tags": ["stripes"]}));
        assert_eq!(found["learnings"][0]["id"], "L-9001", "{how:?}: {found}");
        let db = s.finish();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(
            (schema(&path), files(&dir)),
            before,
            "{how:?}: the database changed"
        );
        drop(db);
    }
}

/// The four read tools answer, and the two writes are refused as read-only.
fn every_tool_answers(s: &mut Session, how: ReadOnly) {
    let found = s.ok("query_learnings", json!({"search": "timeout"}));
    assert_eq!(
        found["learnings"].as_array().map(Vec::len),
        Some(10),
        "{how:?}: {found}"
    );
    let tagged = s.ok("query_learnings", json!({"tags": ["rust"], "limit": 3}));
    assert_eq!(
        tagged["learnings"].as_array().map(Vec::len),
        Some(3),
        "{how:?}: {tagged}"
    );
    assert_eq!(s.ok("get_learning", json!({"id": "L-007"}))["id"], "L-007");
    let tags = s.ok("list_tags", json!({}));
    assert!(
        tags["tags"].as_array().is_some_and(|t| t.len() >= 4),
        "{tags}"
    );
    let ctx = s.ok("get_project_context", json!({"project_id": "p1"}));
    assert_eq!(ctx["project"]["name"], "One", "{ctx}");
    for (tool, args) in [
        (
            "capture_learning",
            json!({"title": "Not here", "problem": "read only", "solution": "refused", "tags": ["x"]}),
        ),
        (
            "capture_decision",
            json!({"project_id": "p1", "title": "Not here", "decision": "read only"}),
        ),
    ] {
        let e = s.tool_error(tool, args);
        assert_eq!(e["code"], "READ_ONLY", "{how:?} {tool}: {e}");
    }
}

/// Served writable without the opt-in, the application's database gains rows through the
/// tools and nothing else: its schema and journal mode stay, the new learning is numbered
/// after the application's and is in the file for the application to read.
#[test]
fn a_database_made_elsewhere_served_writable_keeps_its_schema_and_journal_mode() {
    let db = app_studio_db(300);
    let path = db.path.clone();
    let before = schema(&path);
    let cache = tempfile::tempdir().unwrap();
    let mut c = Command::new(EXE);
    c.args(["serve", "studio", "--db", path.to_str().unwrap()]);
    let mut s = session(c, cache.path(), db);
    let l = s.ok(
        "capture_learning",
        json!({"title": "Mirrors keep indexes outside", "problem": "ppp", "solution": "sss", "tags": ["mirror"]}),
    );
    assert_eq!(l["id"], "L-301", "{l}");
    let l = s.ok(
        "capture_learning",
        json!({"title": "A second capture", "problem": "ppp", "solution": "sss", "tags": ["mirror"]}),
    );
    assert_eq!(l["id"], "L-302", "{l}");
    let found = s.ok("query_learnings", json!({"tags": ["mirror"]}));
    assert_eq!(
        found["learnings"].as_array().map(Vec::len),
        Some(2),
        "{found}"
    );
    let db = s.finish();
    assert_eq!(schema(&path), before, "the schema changed");
    let conn = rusqlite::Connection::open(&path).unwrap();
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "delete");
    let n: i64 = conn
        .query_row(
            "SELECT count(*) FROM learnings WHERE tags LIKE '%mirror%'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(n, 2);
    assert_eq!(files(cache.path()), ["mirrors"]);
    drop(db);
}

/// A spec of its own (not a seed's), served with `mcpspec dev` on a database made outside
/// mcpspec: without the opt-in the file keeps its schema and the full-text search still
/// answers, from a mirror; with `--derive-in-place` the file gains the derived structures.
#[test]
fn derived_structures_enter_a_database_made_elsewhere_only_when_the_user_allows_it() {
    const SPEC: &str = r#"server: {name: notes, version: 0.1.0, title: Notes}
database:
  access: read_write
  schema: |
    CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL);
  derived: |
    CREATE INDEX IF NOT EXISTS notes_body ON notes(body);
  fts:
    - {table: notes_fts, source: notes, columns: [body]}
tools:
  - name: find_notes
    description: Notes with these words.
    input:
      properties:
        words: {type: string, minLength: 1, description: What to look for.}
      required: [words]
    sql:
      key: notes
      query: |
        SELECT n.id, n.body FROM notes_fts f JOIN notes n ON n.rowid = f.rowid
        WHERE notes_fts MATCH :words ORDER BY n.id
      columns: {id: integer, body: text}
  - name: add_note
    description: Adds a note.
    input:
      properties:
        body: {type: string, minLength: 1, description: The note.}
      required: [body]
    sql:
      returns: one
      query: INSERT INTO notes (body) VALUES (:body) RETURNING id, body
      columns: {id: integer, body: text}
"#;
    for in_place in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("notes.yaml"), SPEC).unwrap();
        let db = dir.path().join("notes.db");
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.execute_batch(
            "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL);
             INSERT INTO notes (body) VALUES ('the quick fox'), ('a lazy dog');",
        )
        .unwrap();
        drop(conn);
        let before = schema(&db);
        let cache = tempfile::tempdir().unwrap();
        let mut c = Command::new(EXE);
        c.args(["dev", "notes.yaml", "--db", "notes.db"])
            .current_dir(dir.path())
            .env("MCPSPEC_CACHE_DIR", cache.path())
            .stderr(Stdio::null());
        if in_place {
            c.arg("--derive-in-place");
        }
        let mut client = StdioClient::spawn(&mut c).unwrap();
        client.initialize().unwrap();
        let found = client
            .call_tool("find_notes", json!({"words": "fox"}))
            .unwrap();
        assert_eq!(
            found["result"]["structuredContent"]["notes"][0]["id"], 1,
            "{found}"
        );
        let added = client
            .call_tool("add_note", json!({"body": "another fox"}))
            .unwrap();
        assert_eq!(added["result"]["structuredContent"]["id"], 3, "{added}");
        let found = client
            .call_tool("find_notes", json!({"words": "fox"}))
            .unwrap();
        assert_eq!(
            found["result"]["structuredContent"]["notes"]
                .as_array()
                .map(Vec::len),
            Some(2),
            "{found}"
        );
        assert!(
            client
                .finish(Duration::from_secs(10))
                .is_some_and(|s| s.success())
        );
        let after = schema(&db);
        let names: Vec<&str> = after.iter().map(|(_, n, _)| n.as_str()).collect();
        if in_place {
            assert!(
                names.contains(&"notes_fts") && names.contains(&"notes_body"),
                "{names:?}"
            );
            assert!(
                files(cache.path()).is_empty(),
                "no mirror when the structures are in place"
            );
        } else {
            assert_eq!(after, before, "the schema changed without the opt-in");
            let mirrors = files(&cache.path().join("mirrors"));
            assert_eq!(
                mirrors.iter().filter(|f| f.ends_with(".db")).count(),
                1,
                "{mirrors:?}"
            );
        }
    }
}

/// `mcpspec test --db` on a database mcpspec did not create leaves it exactly as it found it:
/// schema, rows, and the directory.
#[test]
fn test_on_a_live_sqlite_database_never_writes() {
    let db = app_studio_db(50);
    let (path, dir) = (db.path.clone(), db._dir.path().to_path_buf());
    let before = (schema(&path), counts(&path), files(&dir));
    let cache = tempfile::tempdir().unwrap();
    let out = Command::new(EXE)
        .args(["test", "studio", "--db", path.to_str().unwrap()])
        .env("MCPSPEC_CACHE_DIR", cache.path())
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(text.contains("capture_learning"), "{text}");
    assert_eq!(
        (schema(&path), counts(&path), files(&dir)),
        before,
        "{text}"
    );
    assert!(
        files(cache.path()).is_empty(),
        "a check leaves no mirror behind: {text}"
    );
}

/// The same on PostgreSQL: `mcpspec test --db` leaves every table, its rows and the catalog
/// as they were.
#[cfg(feature = "full")]
#[test]
fn test_on_a_live_postgresql_database_never_writes() {
    let db = crate::common::sample_db_on(crate::common::Engine::Postgres, "knowledge");
    let url = db.path.to_str().unwrap().to_string();
    let cluster = crate::pg::Cluster::shared();
    let state = || {
        cluster.psql(
            &url,
            "SELECT string_agg(x, E'\\n' ORDER BY x) FROM (
               SELECT format('%s %s %s', c.relkind, c.relname, pg_relation_size(c.oid) > 0) AS x
                 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public'
               UNION ALL SELECT format('trigger %s', tgname) FROM pg_trigger WHERE NOT tgisinternal
               UNION ALL SELECT format('proc %s', proname) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'public'
               UNION ALL SELECT format('rows %s', count(*)) FROM knowledge_entries
               UNION ALL SELECT format('entry %s %s', id, md5(content)) FROM knowledge_entries
             ) all_of_it",
        )
    };
    let before = state();
    let out = Command::new(EXE)
        .args(["test", "knowledge", "--db", &url])
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(text.contains("kb_add"), "{text}");
    assert_eq!(state(), before, "{text}");
}
