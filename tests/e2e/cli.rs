//! The `mcpspec` command line: init, call, list, demo, and start-up failures.

use serde_json::Value;

use crate::common::{count_rows, mcpspec, sample_db};

#[test]
fn init_creates_a_database_and_never_overwrites_one() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("nested/dir/studio.db");
    let db_s = db.to_str().unwrap();
    let (code, out, err) = mcpspec(&["init", "studio", "--db", db_s], &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.trim(), format!("created {db_s} for `studio`"));
    assert_eq!(count_rows(&db, "learnings"), 0);

    let (code, _, err) = mcpspec(&["init", "studio", "--db", db_s, "--sample"], &[]);
    assert_eq!(code, 2);
    assert_eq!(
        err.trim(),
        format!(
            "error: {db_s} already holds tables (cycles, decisions, id_counters, learning_tags, learnings, learnings_fts, learnings_fts_config, learnings_fts_data, learnings_fts_docsize, learnings_fts_idx, projects); mcpspec init never changes an existing database"
        )
    );
    assert_eq!(count_rows(&db, "learnings"), 0);
}

#[test]
fn call_prints_the_result_and_signals_tool_errors_in_the_exit_code() {
    let db = sample_db("studio");
    let path = db.path.to_str().unwrap();
    let (code, out, err) = mcpspec(
        &[
            "call",
            "studio",
            "get_learning",
            r#"{"id":"L-015"}"#,
            "--db",
            path,
        ],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["title"], "Use Pydantic v2 syntax");

    let (code, out, _) = mcpspec(
        &[
            "call",
            "studio",
            "get_learning",
            r#"{"id":"nope"}"#,
            "--db",
            path,
        ],
        &[],
    );
    assert_eq!(code, 1);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["error"]["code"], "NOT_FOUND");

    let (code, _, err) = mcpspec(&["call", "studio", "nope", "{}", "--db", path], &[]);
    assert_eq!(code, 2);
    assert_eq!(err.trim(), "error: unknown tool: nope");

    let (code, _, err) = mcpspec(
        &["call", "studio", "get_learning", "{id", "--db", path],
        &[],
    );
    assert_eq!(code, 2);
    assert!(
        err.starts_with("error: the arguments are not valid JSON"),
        "{err}"
    );
}

#[test]
fn the_database_comes_from_flag_then_env_then_default() {
    let db = sample_db("studio");
    let path = db.path.to_str().unwrap();
    let home = tempfile::tempdir().unwrap();
    let home_s = home.path().to_str().unwrap();
    // The environment variable is used when there is no flag.
    let (code, out, err) = mcpspec(
        &[
            "call",
            "studio",
            "list_tags",
            r#"{"project_id":"proj-002"}"#,
        ],
        &[("STUDIO_DB_PATH", path), ("HOME", home_s)],
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("\"crdt\""), "{out}");
    // Without either, the default location under HOME is tried, and the error says how to fix it.
    let (code, _, err) = mcpspec(
        &["serve", "studio"],
        &[("STUDIO_DB_PATH", ""), ("HOME", home_s)],
    );
    assert_eq!(code, 2);
    let expected = format!(
        "error: database not found at {home_s}/.config/project-studio/studio.db (the default location)\n  set STUDIO_DB_PATH=/path/to/db or pass --db PATH, or create one with: mcpspec init studio --db {home_s}/.config/project-studio/studio.db [--sample]"
    );
    assert_eq!(err.trim(), expected);
    // `~` in the environment variable expands to HOME.
    let (code, _, err) = mcpspec(
        &["serve", "studio"],
        &[("STUDIO_DB_PATH", "~/x.db"), ("HOME", home_s)],
    );
    assert_eq!(code, 2);
    assert!(
        err.contains(&format!(
            "database not found at {home_s}/x.db (from the environment)"
        )),
        "{err}"
    );
}

#[test]
fn start_up_fails_clearly_on_a_file_that_is_not_the_expected_database() {
    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("junk.db");
    std::fs::write(&junk, b"this is not a sqlite database at all, just text").unwrap();
    let (code, _, err) = mcpspec(&["serve", "studio", "--db", junk.to_str().unwrap()], &[]);
    assert_eq!(code, 2);
    assert!(
        err.starts_with(&format!(
            "error: cannot open the database at {}",
            junk.display()
        )),
        "{err}"
    );

    // A real database whose tables lack a column the tools use: the drift is reported before
    // serving, naming the tool and the statement.
    let drift = dir.path().join("drift.db");
    let conn = rusqlite::Connection::open(&drift).unwrap();
    conn.execute_batch(
        "CREATE TABLE projects (id TEXT PRIMARY KEY, name TEXT, description TEXT, repo_path TEXT, tech_stack TEXT, status TEXT, created_at TEXT);
         CREATE TABLE cycles (id TEXT, project_id TEXT, name TEXT, intent TEXT, status TEXT, created_at TEXT);
         CREATE TABLE learnings (id TEXT, title TEXT, problem TEXT, solution TEXT, project_id TEXT, cycle_id TEXT, session_id TEXT, created_at TEXT, updated_at TEXT);
         CREATE TABLE decisions (id TEXT, project_id TEXT, title TEXT, decision TEXT, created_at TEXT);",
    )
    .unwrap();
    drop(conn);
    let (code, _, err) = mcpspec(&["serve", "studio", "--db", drift.to_str().unwrap()], &[]);
    assert_eq!(code, 2);
    let expected = format!(
        "error: the database at {} does not match what spec/studio.yaml expects:
  tool `query_learnings`: statement `query_learnings` does not prepare: no such table: learnings_fts
  tool `get_learning`: statement `get_learning` does not prepare: no such column: l.tags
  tool `list_tags`: statement `list_tags` does not prepare: no such column: l.tags
  tool `get_project_context`: statement `recent_learnings` does not prepare: no such column: tags
  tool `capture_learning`: statement `capture_learning` does not prepare: table learnings has no column named tags
  tool `capture_decision`: statement `capture_decision` does not prepare: no such table: id_counters
the database differs from the schema the spec declares: migrate it, or point --db at the right file
the structures under `database.derived` could not be built: no such column: l.tags",
        drift.display()
    );
    assert_eq!(err.trim(), expected);
}

#[test]
fn list_names_every_seed_server_and_tool() {
    let (code, out, _) = mcpspec(&["list"], &[]);
    assert_eq!(code, 0);
    // What the compiled tables say, not numbers that change with every spec edit; the test
    // doubles are compiled but served only by mcpspec-testbed.
    for s in server::servers::seeds().iter().map(mcpspec::Server::def) {
        let head = format!(
            "{} {} ({}, {} tools)\n",
            s.name,
            s.version,
            s.spec_file,
            s.tools.len()
        );
        assert!(out.contains(&head), "{head} missing from:\n{out}");
    }
    // Each tool's effect comes from its annotations, handler tools included.
    for (tool, effect) in [
        ("capture_learning", "write"),
        ("get_learning", "read"),
        ("db.list", "read"),
        ("db.create", "write"),
        ("db.drop", "destructive"),
        ("lessons_cancel", "destructive"),
    ] {
        let line = out
            .lines()
            .find(|l| l.split_whitespace().next() == Some(tool))
            .unwrap_or_else(|| panic!("{tool} is not listed:\n{out}"));
        assert_eq!(line.split_whitespace().nth(1), Some(effect), "{line}");
    }
    let servers: Vec<&str> = out
        .lines()
        .filter(|l| !l.starts_with(' '))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(
        servers,
        // The five seeds, and the OAuth example (`teamnotes`, README "Teams").
        [
            "knowledge",
            "laminark",
            "lessons",
            "pm",
            "studio",
            "teamnotes"
        ],
        "{out}"
    );
    let (code, _, err) = mcpspec(&["serve", "nope"], &[]);
    assert_eq!(code, 2);
    assert!(
        err.starts_with("error: no server named `nope`; compiled servers: "),
        "{err}"
    );
    for double in ["downstream", "conformance"] {
        let (code, _, err) = mcpspec(&["serve", double], &[]);
        assert_eq!(code, 2, "{err}");
        assert!(
            err.starts_with(&format!("error: no server named `{double}`")),
            "{err}"
        );
    }
}

#[test]
fn demo_drives_a_real_session_and_exits_cleanly() {
    let (code, out, err) = mcpspec(&["demo", "studio"], &[]);
    assert_eq!(code, 0, "{err}");
    let studio = server::server("studio").expect("studio is compiled");
    assert!(
        out.contains(&format!(
            "-> initialize: studio {} (protocol 2025-11-25)",
            studio.version
        )),
        "{out}"
    );
    assert!(
        out.contains(&format!("-> tools/list: {} tools", studio.tools.len())),
        "{out}"
    );
    assert!(
        out.contains("-> tools/call get_learning {\"id\":\"L-999\"}\n<- tool error"),
        "{out}"
    );
    assert!(out.contains("\"id\": \"L-062\""), "{out}");
    assert!(
        out.contains("No learnings found with tags: no-such-tag."),
        "{out}"
    );
    assert!(
        out.trim_end().ends_with("# server exited: exit status: 0"),
        "{out}"
    );
}

#[test]
fn a_server_without_a_database_refuses_db_flags_and_runs_its_demo() {
    let (code, _, err) = mcpspec(&["init", "pm", "--db", "/nonexistent/pm.db"], &[]);
    assert_eq!(code, 2);
    assert!(err.contains("the `pm` server has no database"), "{err}");
    let (code, _, err) = mcpspec(&["serve", "pm", "--db", "/nonexistent/pm.db"], &[]);
    assert_eq!(code, 2);
    assert!(err.contains("has no database; remove --db"), "{err}");
    let (code, out, err) = mcpspec(&["demo", "pm"], &[]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("$ mcpspec serve pm\n"), "{out}");
    let pm = server::server("pm").expect("pm is compiled");
    assert!(
        out.contains(&format!("-> tools/list: {} tools", pm.tools.len())),
        "{out}"
    );
    assert!(out.contains("\"created\": true"), "{out}");
    assert!(
        out.trim_end().ends_with("# server exited: exit status: 0"),
        "{out}"
    );
}

#[test]
fn call_prints_a_declared_error_and_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(crate::common::EXE)
        .args(["call", "pm", "project.info"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["code"], -32001);
    assert_eq!(v["data"]["code"], "CONFIG_MISSING");
}

/// `mcpspec call ... | head -1`: the reader goes away after one line; the command ends quietly
/// with success instead of panicking on the broken pipe.
#[test]
fn a_reader_that_goes_away_ends_the_output_quietly() {
    use std::io::{BufRead, BufReader, Read};
    let db = sample_db("knowledge");
    // More output than a pipe holds, so that the writer meets the closed end.
    let big = serde_json::json!({"content": "x".repeat(100_000), "role": "qa"}).to_string();
    let path = db.path.to_str().unwrap();
    for _ in 0..3 {
        let (code, _, err) = mcpspec(&["call", "knowledge", "kb_add", &big, "--db", path], &[]);
        assert_eq!(code, 0, "{err}");
    }
    let mut child = std::process::Command::new(crate::common::EXE)
        .args(["call", "knowledge", "kb_list", r#"{"limit": 100}"#, "--db"])
        .arg(&db.path)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    // The read end is closed here, with most of the output unread.
    assert_eq!(first.trim(), "{");
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}: {err}");
    assert!(!err.contains("panicked"), "{err}");
}
