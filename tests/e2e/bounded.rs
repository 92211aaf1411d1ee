//! Results that cannot flood a client's context (#61, bounded results): a SQL tool that sets no
//! cap of its own, over a table of 100,000 rows of about 1 KB, answers within the server's
//! defaults (200 rows, and `MCPSPEC_MAX_RESULT_BYTES`) with `truncated` in its structured
//! content; under a smaller server-wide byte cap, the rows stop whole where the cap falls. A
//! Rust handler's list (pm's `db.list`) is cut the same way, at its own `max_bytes` and under
//! the server's cap. Over stdio, and over Streamable HTTP in both protocol eras.

use std::process::{Command, Stdio};

use mcpspec_testkit::StdioClient;
use serde_json::{Value, json};

use crate::common::{EXE, count_rows, mcpspec};

/// A table of long rows, and a tool over it with neither `max_rows` nor `max_bytes`.
const SPEC: &str = r#"server:
  name: archive
  version: 0.1.0
  title: Archive
database:
  env: ARCHIVE_DB_PATH
  access: read_write
  schema: |
    CREATE TABLE IF NOT EXISTS entries (id INTEGER PRIMARY KEY, body TEXT NOT NULL);
  sample: |
    INSERT INTO entries (id, body)
      WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100000)
      SELECT i, 'entry ' || i || ': ' || hex(zeroblob(500)) FROM n;
tools:
  - name: all_entries
    title: Every entry
    description: Every entry, as stored.
    input: {type: object, properties: {}}
    sql:
      key: entries
      query: SELECT id, body FROM entries ORDER BY id
      columns: {id: integer, body: text}
  - name: paged_entries
    title: Every entry, a page at a time
    description: Every entry, as stored, in pages.
    input:
      type: object
      properties:
        limit: {type: integer, minimum: 1, maximum: 200, default: 200}
    sql:
      key: entries
      page: {by: [id]}
      query: |
        SELECT id, body FROM entries WHERE :after.id IS NULL OR id > :after.id
        ORDER BY id LIMIT :page.limit
      columns: {id: integer, body: text}
"#;

/// One call of `tool` (no arguments) to the server `command` starts, with `env`: over stdio
/// (`http` is `None`), or over Streamable HTTP with a session (`Some(false)`, 2025-11-25) or
/// per request (`Some(true)`, 2026-07-28); its structured content.
fn call_once(mut command: Command, env: &[(&str, &str)], tool: &str, http: Option<bool>) -> Value {
    let answer = match http {
        None => {
            command.env("MCPSPEC_LOG", "warn").stderr(Stdio::null());
            for (k, v) in env {
                command.env(k, v);
            }
            let mut client = StdioClient::spawn(&mut command).expect("spawn");
            client.initialize().expect("initialize");
            let answer = client.call_tool(tool, json!({})).expect("call");
            client.finish(std::time::Duration::from_secs(10));
            answer
        }
        Some(per_request) => {
            command.args(["--http", "127.0.0.1:0"]);
            let server = crate::http::HttpServer::spawn(command, env);
            let mut client = if per_request {
                mcpspec_testkit::HttpClient::per_request(server.addr, None)
            } else {
                let mut c = mcpspec_testkit::HttpClient::new(server.addr, None);
                c.initialize().expect("initialize");
                c
            };
            client
                .request("tools/call", json!({"name": tool, "arguments": {}}))
                .expect("call")
        }
    };
    assert_eq!(answer["result"]["isError"], json!(false), "{answer}");
    answer["result"]["structuredContent"].clone()
}

/// `all_entries` served from the spec over `db`, with `env`; its structured content.
fn all_entries(spec: &str, db: &str, env: &[(&str, &str)], http: Option<bool>) -> Value {
    let mut command = Command::new(EXE);
    command.args(["serve", "--spec", spec, "--db", db]);
    call_once(command, env, "all_entries", http)
}

#[test]
fn a_tool_without_caps_over_100000_long_rows_answers_within_the_server_defaults() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("archive.yaml");
    std::fs::write(&spec, SPEC).unwrap();
    let db = dir.path().join("archive.db");
    let (spec, db_path) = (spec.display().to_string(), db.display().to_string());
    let (code, _, err) = mcpspec(
        &["init", "--spec", &spec, "--db", &db_path, "--sample"],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(count_rows(&db, "entries"), 100_000);

    // The defaults: 200 rows at most, whole, in order, and said to be cut.
    let out = all_entries(&spec, &db_path, &[], None);
    let rows = out["entries"].as_array().expect("entries");
    assert_eq!(rows.len(), 200);
    assert_eq!(out["truncated"], json!(true), "{}", rows.len());
    assert_eq!(rows[199]["id"], json!(200));
    assert!(
        rows.iter()
            .all(|r| r["body"].as_str().unwrap().len() > 1000)
    );

    // A server-wide cap of 64 KiB: fewer rows, each whole, the result under the cap.
    let out = all_entries(
        &spec,
        &db_path,
        &[("MCPSPEC_MAX_RESULT_BYTES", "65536")],
        None,
    );
    let rows = out["entries"].as_array().expect("entries");
    assert!((10..200).contains(&rows.len()), "{} rows", rows.len());
    assert_eq!(out["truncated"], json!(true));
    assert!(
        rows.iter()
            .all(|r| r["body"].as_str().unwrap().len() > 1000)
    );
    let size = serde_json::to_string(&out).unwrap().len();
    assert!(size <= 65536, "{size} bytes of structured content");
    let kept = rows.len();
    assert_eq!(
        out["message"],
        format!(
            "Only the first {kept} rows fit in the result; more matched. Narrow the arguments to see the others."
        )
    );

    // A paged tool cut by the cap gives the cursor that goes on after the last row kept.
    let mut command = Command::new(EXE);
    command
        .args(["serve", "--spec", &spec, "--db", &db_path])
        .env("MCPSPEC_MAX_RESULT_BYTES", "65536")
        .env("MCPSPEC_LOG", "warn")
        .stderr(Stdio::null());
    let mut client = StdioClient::spawn(&mut command).expect("spawn");
    client.initialize().expect("initialize");
    let page = |client: &mut StdioClient, args: Value| {
        let answer = client.call_tool("paged_entries", args).expect("call");
        assert_eq!(answer["result"]["isError"], json!(false), "{answer}");
        answer["result"]["structuredContent"].clone()
    };
    let first = page(&mut client, json!({}));
    assert_eq!(first["entries"], out["entries"]);
    assert_eq!(first["truncated"], json!(true));
    assert_eq!(
        first["message"],
        format!(
            "{kept} rows fit in the result; more follow. Pass `next_cursor` as `cursor` to read on."
        )
    );
    let second = page(&mut client, json!({"cursor": first["next_cursor"]}));
    assert_eq!(second["entries"][0]["id"], json!(kept + 1));
    assert_eq!(second["entries"].as_array().map(Vec::len), Some(kept));
    client.finish(std::time::Duration::from_secs(10));

    // The same caps over Streamable HTTP, in both eras: the same rows, cut the same way.
    let capped = [("MCPSPEC_MAX_RESULT_BYTES", "65536")];
    for per_request in [false, true] {
        let full = all_entries(&spec, &db_path, &[], Some(per_request));
        assert_eq!(full["entries"].as_array().map(Vec::len), Some(200));
        assert_eq!(full["truncated"], json!(true), "per request: {per_request}");
        let small = all_entries(&spec, &db_path, &capped, Some(per_request));
        assert_eq!(small, out, "per request: {per_request}");
    }
}

/// pm's `db.list` (a handler, `max_bytes: 65536`) in `project`; its structured content.
fn db_list(project: &std::path::Path, env: &[(&str, &str)], http: Option<bool>) -> Value {
    let mut command = Command::new(crate::common::exe_for("pm"));
    command.arg("serve").arg("pm").current_dir(project);
    call_once(command, env, "db.list", http)
}

#[test]
fn a_handler_list_over_its_cap_keeps_the_rows_that_fit_and_says_so() {
    let project = crate::pm::project();
    let dir = project.path().join(".pm/databases");
    for i in 0..1500 {
        std::fs::write(dir.join(format!("app_{i:04}.db")), b"").unwrap();
    }
    let names = |out: &Value| -> Vec<String> {
        out["databases"]
            .as_array()
            .expect("databases")
            .iter()
            .map(|d| d["name"].as_str().unwrap().to_string())
            .collect()
    };
    // Its own cap: the first databases, in order, whole, under 64 KiB, said to be cut.
    let out = db_list(project.path(), &[], None);
    let kept = names(&out);
    assert!((100..1501).contains(&kept.len()), "{} kept", kept.len());
    assert_eq!(kept[..2], ["app", "app_0000"]);
    assert_eq!(out["truncated"], json!(true));
    assert_eq!(
        out["message"],
        format!(
            "Only the first {} of 1501 databases fit in the result; ask for fewer or narrower.",
            kept.len()
        )
    );
    assert_eq!(out["default_database"], "app");
    assert!(serde_json::to_string(&out).unwrap().len() <= 65536);

    // The server's cap bounds it: fewer rows under 20,000 bytes.
    let capped = [("MCPSPEC_MAX_RESULT_BYTES", "20000")];
    let small = db_list(project.path(), &capped, None);
    let fewer = names(&small);
    assert!(
        fewer.len() < kept.len() && fewer.len() > 10,
        "{}",
        fewer.len()
    );
    assert_eq!(fewer[..], kept[..fewer.len()]);
    assert!(serde_json::to_string(&small).unwrap().len() <= 20000);

    // Over Streamable HTTP, in both eras: the same cut.
    for per_request in [false, true] {
        assert_eq!(
            db_list(project.path(), &[], Some(per_request)),
            out,
            "per request: {per_request}"
        );
        assert_eq!(
            db_list(project.path(), &capped, Some(per_request)),
            small,
            "per request: {per_request}"
        );
    }
}
