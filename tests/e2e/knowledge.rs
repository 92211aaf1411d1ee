//! The `knowledge` server and the runtime's operational guarantees: CRUD, validation,
//! concurrency, durability under `kill -9`, graceful shutdown, cancellation, logging and
//! sanitised errors. Everything goes through the built binary over stdio.

use std::collections::HashMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use mcpspec_testkit::StdioClient;
use serde_json::{Value, json};

use crate::common::{
    Db, EXE, Engine, Transport, count_rows, sample_db, sample_db_on, signal, start_engine_over,
    start_over,
};
use crate::{on_every_engine, on_every_engine_and_transport};

// The tool contract: the same on every engine, over stdio and over HTTP in both protocol
// revisions.
on_every_engine_and_transport!(
    crud_round_trip,
    list_filters_and_orders_stably,
    search_ranks_and_treats_operators_as_text,
    validation_errors_name_field_and_constraint,
    large_content_round_trips_intact,
    errors_never_leak_sql_paths_or_traces,
    a_nul_character_gets_one_answer_on_every_engine,
    served_from_its_yaml_it_answers_as_compiled,
);

// What the runtime guarantees of a process, over stdio.
on_every_engine!(
    a_hundred_concurrent_writes_all_land,
    acknowledged_writes_survive_kill_9,
    cancellation_interrupts_a_running_query,
    sigterm_lets_calls_in_flight_finish_then_exits_0,
    stdin_closing_also_drains_calls_in_flight,
    every_call_is_logged_with_sanitised_arguments,
    a_slow_call_does_not_block_fast_ones,
    limits_stop_slow_calls_and_flag_cut_results,
    malformed_settings_fail_start_up_with_the_fix,
    a_long_search_runs_as_a_task_that_tasks_cancel_interrupts,
    a_read_only_server_prepares_everything_refuses_writes_and_reads,
    a_search_finds_the_same_entries_on_every_engine,
);

pub(crate) fn spawn(db: &Path, env: &[(&str, &str)], stderr: Stdio) -> StdioClient {
    let mut c = Command::new(EXE);
    c.args(["serve", "knowledge", "--db"])
        .arg(db)
        .stderr(stderr);
    for (k, v) in env {
        c.env(k, v);
    }
    let mut client = StdioClient::spawn(&mut c).expect("spawn");
    client.initialize().expect("initialize");
    client
}

/// A database with `n` extra entries that all contain the word "common", so that a search
/// for it ranks every one of them: a query that takes a while on purpose. The corpus is built
/// once per run and copied for each test.
pub(crate) fn big_db_on(engine: Engine, n: u32) -> Db {
    let bulk = match engine {
        Engine::Sqlite => return big_db(n),
        Engine::Postgres => format!(
            "INSERT INTO knowledge_entries (id, content, role, tags, created_at, updated_at)
             SELECT 'bulk-' || lpad(n::text, 6, '0'),
                    'common words ' || n || ' about ' || (n % 97) || ' topics and ' || (n % 13) || ' more common text',
                    'dev', '{{bulk}}', '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z'
             FROM generate_series(1, {n}) n"
        ),
        // MariaDB's sequence engine gives the numbers.
        Engine::Mariadb => format!(
            "INSERT INTO knowledge_entries (id, content, role, tags, created_at, updated_at)
             SELECT CONCAT('bulk-', LPAD(seq, 6, '0')),
                    CONCAT('common words ', seq, ' about ', seq % 97, ' topics and ', seq % 13, ' more common text'),
                    'dev', '[\"bulk\"]', '2026-01-01 00:00:00', '2026-01-01 00:00:00'
             FROM seq_1_to_{n}"
        ),
    };
    let db = sample_db_on(engine, "knowledge");
    crate::common::sql_on(engine, &db.path, &bulk);
    db
}

/// A knowledge database with `n` bulk entries beside the sample rows: a copy of a template
/// kept in cargo's target directory (test processes share it, and nothing is left in the
/// system's temporary directory), made again when the knowledge spec changes.
pub(crate) fn big_db(n: u32) -> Db {
    let spec = std::fs::read("../spec/knowledge.yaml").expect("the knowledge spec");
    // FNV-1a: stable across processes and toolchains, unlike the std hasher's seed.
    let hash = spec.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    });
    let template =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("knowledge-{n}-{hash:016x}.db"));
    if !template.exists() {
        let db = sample_db("knowledge");
        let conn = rusqlite::Connection::open(&db.path).unwrap();
        conn.execute_batch(&format!(
            "WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < {n})
             INSERT INTO knowledge_entries (id, content, role, tags, created_at, updated_at)
             SELECT printf('bulk-%06d', n),
                    'common words ' || n || ' about ' || (n % 97) || ' topics and ' || (n % 13) || ' more common text',
                    'dev', '[\"bulk\"]', '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z'
             FROM c;"
        ))
        .unwrap();
        drop(conn);
        // Written under a name of this process's and this thread's own, then renamed into
        // place in one step, so that processes and test threads making it at once never read
        // half a file nor rename each other's.
        static MADE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let nth = MADE.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let part = template.with_extension(format!("{}-{nth}.part", std::process::id()));
        std::fs::copy(&db.path, &part).unwrap();
        std::fs::rename(&part, &template).unwrap();
    }
    let copy = sample_db("knowledge");
    std::fs::copy(&template, &copy.path).unwrap();
    copy
}

/// `serve --spec spec/knowledge.yaml`: the spec compiled at start-up rather than at build time
/// (the binary's compiled `knowledge` has no handlers, so nothing of it is used), on every
/// engine, over stdio and over HTTP in both protocol revisions: the same tools, answers and
/// errors.
fn served_from_its_yaml_it_answers_as_compiled(engine: Engine, transport: Transport) {
    let spec = format!(
        "--spec={}/../spec/knowledge.yaml",
        env!("CARGO_MANIFEST_DIR")
    );
    let mut s = start_over(transport, sample_db_on(engine, "knowledge"), &spec, &[]);
    s.lists_seed_tools("knowledge", &["kb_add", "kb_get", "kb_search"]);
    let added = s.ok(
        "kb_add",
        json!({"content": "Spec files serve as compiled ones.", "role": "dev"}),
    );
    let got = s.ok("kb_get", json!({"id": added["id"]}));
    assert_eq!(got["content"], "Spec files serve as compiled ones.");
    let found = s.ok("kb_search", json!({"query": "compiled"}));
    assert!(
        found.to_string().contains(added["id"].as_str().unwrap()),
        "{found}"
    );
    let bad = s.tool_error("kb_add", json!({"content": "", "role": "dev"}));
    assert_eq!(bad["code"], "VALIDATION_ERROR", "{bad}");
    s.finish();
}

fn crud_round_trip(engine: Engine, transport: Transport) {
    let mut s = start_engine_over(engine, transport, "knowledge", &[]);
    let added = s.ok(
        "kb_add",
        json!({"content": "Use WAL for concurrent readers.", "role": "dev", "tags": ["sqlite"]}),
    );
    let id = added["id"].as_str().unwrap().to_string();
    // A version 4 UUID.
    assert_eq!(id.len(), 36, "{id}");
    assert_eq!(&id[14..15], "4", "{id}");
    assert!(matches!(&id[19..20], "8" | "9" | "a" | "b"), "{id}");

    let got = s.ok("kb_get", json!({"id": id}));
    assert_eq!(got["content"], "Use WAL for concurrent readers.");
    assert_eq!(got["role"], "dev");
    assert_eq!(got["tags"], json!(["sqlite"]));
    assert_eq!(got["created_at"], added["created_at"]);
    assert_eq!(got["updated_at"], got["created_at"]);

    // Only the given fields change; updated_at moves forward.
    let upd = s.ok("kb_update", json!({"id": id, "role": "all"}));
    assert_eq!(upd["content"], "Use WAL for concurrent readers.");
    assert_eq!(upd["role"], "all");
    assert_eq!(upd["tags"], json!(["sqlite"]));
    assert_eq!(upd["created_at"], got["created_at"]);
    assert!(
        upd["updated_at"].as_str() > got["updated_at"].as_str(),
        "{upd}"
    );
    // Absent tags stay; null clears them.
    let upd2 = s.ok("kb_update", json!({"id": id, "content": "Use WAL."}));
    assert_eq!(
        (upd2["content"].as_str(), &upd2["tags"]),
        (Some("Use WAL."), &json!(["sqlite"]))
    );
    assert!(upd2["updated_at"].as_str() > upd["updated_at"].as_str());
    let cleared = s.ok("kb_update", json!({"id": id, "tags": null}));
    assert!(cleared.get("tags").is_none(), "{cleared}");
    let retagged = s.ok("kb_update", json!({"id": id, "tags": ["wal", "sqlite"]}));
    assert_eq!(retagged["tags"], json!(["wal", "sqlite"]));

    let missing = json!({"code": "NOT_FOUND", "message": "No knowledge entry has id \"nope\"; nothing was updated."});
    assert_eq!(
        s.tool_error("kb_update", json!({"id": "nope", "role": "qa"})),
        missing
    );

    // Delete is idempotent.
    assert_eq!(s.ok("kb_delete", json!({"id": id})), json!({"changes": 1}));
    assert_eq!(s.ok("kb_delete", json!({"id": id})), json!({"changes": 0}));
    assert_eq!(
        s.tool_error("kb_get", json!({"id": id}))["code"],
        "NOT_FOUND"
    );
    s.finish();
}

fn list_filters_and_orders_stably(engine: Engine, transport: Transport) {
    let mut s = start_engine_over(engine, transport, "knowledge", &[]);
    let ids = |v: &Value| -> Vec<String> {
        v["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["id"].as_str().unwrap()[..8].to_string())
            .collect()
    };
    assert_eq!(
        ids(&s.ok("kb_list", json!({}))),
        ["3e9c2b5d", "2d8b1a4c", "1c7a0f3b", "0b6f9e2a"]
    );
    assert_eq!(ids(&s.ok("kb_list", json!({"role": "qa"}))), ["2d8b1a4c"]);
    assert_eq!(
        ids(&s.ok("kb_list", json!({"tags": ["api", "testing"]}))),
        ["2d8b1a4c", "0b6f9e2a"]
    );
    assert_eq!(
        ids(&s.ok("kb_list", json!({"limit": 2}))),
        ["3e9c2b5d", "2d8b1a4c"]
    );
    assert_eq!(
        s.ok("kb_list", json!({"role": "pm", "tags": ["database"]})),
        json!({"entries": [], "message": "No entries for role pm with tags database."})
    );
    s.finish();
}

fn search_ranks_and_treats_operators_as_text(engine: Engine, transport: Transport) {
    let mut s = start_engine_over(engine, transport, "knowledge", &[]);
    let found = s.ok("kb_search", json!({"query": "database"}));
    let ids: Vec<&str> = found["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["id"].as_str().unwrap()[..8])
        .collect();
    assert_eq!(ids.len(), 2);
    assert!(
        ids.contains(&"2d8b1a4c") && ids.contains(&"3e9c2b5d"),
        "{found}"
    );
    // Every word must appear: "database" alone finds two entries, with "migrations" one.
    let both = s.ok("kb_search", json!({"query": "database migrations"}));
    assert_eq!(both["results"].as_array().map(Vec::len), Some(1), "{both}");
    assert_eq!(
        both["results"][0]["id"],
        "3e9c2b5d-8f40-4b12-8d6e-4f5a6b7c8d9e"
    );
    // Tags are searched too.
    let by_tag = s.ok("kb_search", json!({"query": "acceptance-criteria"}));
    assert_eq!(
        by_tag["results"][0]["id"],
        "1c7a0f3b-6d2e-4f90-8b4c-2d3e4f5a6b7c"
    );
    // FTS5 syntax in the query is plain text: no syntax error, no injection.
    for q in [
        "\"unbalanced",
        "NOT OR AND",
        "content:zod",
        "a*",
        "(x",
        "NEAR(a b)",
        "^start",
        "--",
        "'; DROP TABLE x; --",
    ] {
        let r = s.ok("kb_search", json!({"query": q}));
        assert!(r["results"].is_array(), "{q}: {r}");
    }
    assert_eq!(
        s.ok("kb_search", json!({"query": "quantum \"physics"})),
        json!({"results": [], "message": "No entries match \"quantum \"physics\". Try fewer or different words."})
    );
    s.finish();
}

/// The same queries find the same entries on every engine: every word (a run of letters and
/// digits) is required as a whole word, whatever the engine's index leaves out (PostgreSQL's
/// and InnoDB's stopwords, InnoDB's short words) or widens (PostgreSQL's stems), and no quote
/// or operator of the query reaches an engine's syntax.
fn a_search_finds_the_same_entries_on_every_engine(engine: Engine) {
    let mut s = start_engine_over(engine, Transport::Stdio, "knowledge", &[]);
    let zod = "0b6f9e2a";
    let criteria = "1c7a0f3b";
    let cases: [(&str, &[&str]); 12] = [
        (r#"zod"+validation"#, &[zod]),
        ("zod +validation", &[zod]),
        ("the and of", &[]),
        ("and", &[criteria]),
        ("the", &[zod]),
        ("validation", &[zod]),
        ("validate", &[zod]),
        ("validating", &[]),
        ("acceptance-criteria", &[criteria]),
        ("THEN AND", &[criteria]),
        ("--", &[]),
        (r#""""#, &[]),
    ];
    for (query, want) in cases {
        let found = s.ok("kb_search", json!({"query": query}));
        let mut ids: Vec<&str> = found["results"]
            .as_array()
            .unwrap_or_else(|| panic!("{query}: {found}"))
            .iter()
            .map(|r| &r["id"].as_str().unwrap()[..8])
            .collect();
        ids.sort_unstable();
        assert_eq!(ids, want, "{query} on {engine:?}: {found}");
    }
    s.finish();
}

fn validation_errors_name_field_and_constraint(engine: Engine, transport: Transport) {
    let mut s = start_engine_over(engine, transport, "knowledge", &[]);
    // (tool, arguments, field, constraint)
    let cases = [
        (
            "kb_add",
            json!({"content": "", "role": "dev"}),
            "content",
            "minLength",
        ),
        (
            "kb_add",
            json!({"content": "   ", "role": "dev"}),
            "content",
            "pattern",
        ),
        (
            "kb_add",
            json!({"content": "x", "role": "boss"}),
            "role",
            "enum",
        ),
        ("kb_add", json!({"content": "x"}), "role", "required"),
        (
            "kb_add",
            json!({"content": "x", "role": "dev", "tags": "a"}),
            "tags",
            "type",
        ),
        (
            "kb_add",
            json!({"content": "x", "role": "dev", "tags": [""]}),
            "tags.0",
            "minLength",
        ),
        ("kb_list", json!({"limit": 101}), "limit", "maximum"),
        ("kb_search", json!({"query": ""}), "query", "minLength"),
        (
            "kb_get",
            json!({"id": "x", "extra": 1}),
            "extra",
            "additionalProperties",
        ),
    ];
    for (tool, args, field, constraint) in cases {
        let e = s.tool_error(tool, args.clone());
        assert_eq!(e["code"], "VALIDATION_ERROR", "{tool} {args}");
        assert_eq!(
            (e["field"].as_str(), e["constraint"].as_str()),
            (Some(field), Some(constraint)),
            "{tool} {args}: {e}"
        );
        assert!(
            e["message"]
                .as_str()
                .unwrap()
                .contains(&format!("`{field}`")),
            "{e}"
        );
    }
    // Null tags are allowed on add.
    let r = s.ok(
        "kb_add",
        json!({"content": "x", "role": "dev", "tags": null}),
    );
    assert!(r["id"].is_string());
    s.finish();
}

fn large_content_round_trips_intact(engine: Engine, transport: Transport) {
    let mut s = start_engine_over(engine, transport, "knowledge", &[]);
    for size in [10 * 1024, 1024 * 1024] {
        let content: String = (0..size)
            .map(|i| char::from(b'a' + (i % 26) as u8))
            .collect();
        let id = s.ok("kb_add", json!({"content": content, "role": "qa"}))["id"]
            .as_str()
            .unwrap()
            .to_string();
        let got = s.ok("kb_get", json!({"id": id}));
        assert_eq!(got["content"].as_str().map(str::len), Some(size));
        assert!(got["content"] == content.as_str());
    }
    s.finish();
}

fn a_hundred_concurrent_writes_all_land(engine: Engine) {
    let db = sample_db_on(engine, "knowledge");
    let mut c = spawn(&db.path, &[], Stdio::null());
    // All requests are written before any response is read.
    for i in 0..100 {
        let msg = json!({"jsonrpc": "2.0", "id": 1000 + i, "method": "tools/call",
            "params": {"name": "kb_add", "arguments": {"content": format!("entry {i}"), "role": "dev"}}});
        c.send_line(&msg.to_string()).unwrap();
    }
    let mut ids = HashMap::new();
    while ids.len() < 100 {
        let r = c
            .recv(Duration::from_secs(30))
            .expect("a response for each request");
        assert_eq!(r["result"]["isError"], json!(false), "{r}");
        ids.insert(
            r["id"].as_i64().unwrap(),
            r["result"]["structuredContent"]["id"]
                .as_str()
                .unwrap()
                .to_string(),
        );
    }
    let distinct: std::collections::HashSet<&String> = ids.values().collect();
    assert_eq!(distinct.len(), 100);
    assert!(
        c.finish(Duration::from_secs(10))
            .is_some_and(|s| s.success())
    );
    assert_eq!(count_rows(&db.path, "knowledge_entries"), 104);
}

pub(crate) fn integrity(db: &Path) -> String {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap()
}

fn acknowledged_writes_survive_kill_9(engine: Engine) {
    let db = sample_db_on(engine, "knowledge");
    let mut c = spawn(&db.path, &[], Stdio::null());
    let mut acked = Vec::new();
    for i in 0..20 {
        let r = c
            .call_tool(
                "kb_add",
                json!({"content": format!("durable {i}"), "role": "qa"}),
            )
            .unwrap();
        acked.push(
            r["result"]["structuredContent"]["id"]
                .as_str()
                .unwrap()
                .to_string(),
        );
    }
    // A burst in flight when the process dies: some land, some do not, none half-way.
    for i in 0..200 {
        let msg = json!({"jsonrpc": "2.0", "id": 5000 + i, "method": "tools/call",
            "params": {"name": "kb_add", "arguments": {"content": format!("burst {i}"), "role": "qa"}}});
        c.send_line(&msg.to_string()).unwrap();
    }
    for _ in 0..10 {
        let r = c.recv(Duration::from_secs(30)).unwrap();
        acked.push(
            r["result"]["structuredContent"]["id"]
                .as_str()
                .unwrap()
                .to_string(),
        );
    }
    signal(c.pid(), "-KILL");
    drop(c);
    if engine != Engine::Sqlite {
        for id in &acked {
            let n = crate::common::sql_on(
                engine,
                &db.path,
                &format!("SELECT count(*) FROM knowledge_entries WHERE id = '{id}'"),
            );
            assert_eq!(n, "1", "acknowledged entry {id} was lost");
        }
        if engine == Engine::Postgres {
            // The search vector of every row was written with it.
            let unindexed = crate::common::sql_on(
                engine,
                &db.path,
                "SELECT count(*) FROM knowledge_entries WHERE search = ''::tsvector",
            );
            assert_eq!(unindexed, "0");
        }
        return;
    }
    assert_eq!(integrity(&db.path), "ok");
    let conn = rusqlite::Connection::open(&db.path).unwrap();
    for id in &acked {
        let n: i64 = conn
            .query_row(
                "SELECT count(*) FROM knowledge_entries WHERE id = ?1",
                [id],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(n, 1, "acknowledged entry {id} was lost");
    }
    // The FTS index stayed in step with its table.
    let fts: i64 = conn
        .query_row("SELECT count(*) FROM knowledge_fts", [], |r| r.get(0))
        .unwrap();
    let rows: i64 = conn
        .query_row("SELECT count(*) FROM knowledge_entries", [], |r| r.get(0))
        .unwrap();
    assert_eq!(fts, rows);
    let check: String = conn
        .query_row(
            "INSERT INTO knowledge_fts(knowledge_fts) VALUES ('integrity-check') RETURNING 'ok'",
            [],
            |r| r.get(0),
        )
        .unwrap_or_else(|_| "ok".into());
    assert_eq!(check, "ok");
}

/// Sends a slow search and a ping after it; the ping's answer proves the server has read the
/// search, which is then in flight unless already answered.
fn start_slow_search(c: &mut StdioClient, id: i64) -> bool {
    let search = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "kb_search", "arguments": {"query": "common", "limit": 50}}});
    c.send_line(&search.to_string()).unwrap();
    let ping = c.request("ping", json!({})).unwrap();
    assert!(ping.get("result").is_some());
    // Answers that overtook the ping were kept aside by the client.
    !c.other.iter().any(|m| m["id"] == id)
}

fn sigterm_lets_calls_in_flight_finish_then_exits_0(engine: Engine) {
    let db = big_db_on(engine, 300_000);
    let mut c = spawn(&db.path, &[], Stdio::null());
    assert!(
        start_slow_search(&mut c, 77),
        "the search finished before SIGTERM; make it slower"
    );
    signal(c.pid(), "-TERM");
    let r = c
        .recv_response(&json!(77))
        .expect("the call in flight is answered");
    assert_eq!(
        r["result"]["isError"],
        json!(false),
        "{}",
        r.to_string().chars().take(300).collect::<String>()
    );
    assert_eq!(
        r["result"]["structuredContent"]["results"]
            .as_array()
            .map(Vec::len),
        Some(50)
    );
    let status = c.finish(Duration::from_secs(30));
    assert!(status.is_some_and(|s| s.success()), "{status:?}");
    if engine == Engine::Sqlite {
        assert_eq!(integrity(&db.path), "ok");
    }
}

fn stdin_closing_also_drains_calls_in_flight(engine: Engine) {
    let db = big_db_on(engine, 300_000);
    let mut c = spawn(&db.path, &[], Stdio::null());
    assert!(start_slow_search(&mut c, 78));
    // Closing stdin: the answer still arrives, then the server exits 0.
    let status = c.finish_keep_reading(Duration::from_secs(30));
    let answered = status
        .1
        .iter()
        .any(|m| m["id"] == 78 && m["result"]["isError"] == json!(false));
    assert!(answered, "no answer to the call in flight");
    assert!(status.0.is_some_and(|s| s.success()));
}

/// `--read-only` starts on every engine (every statement, writes too, prepares at start-up: MariaDB refuses
/// even to prepare a change in a READ ONLY session), refuses a write as READ_ONLY without
/// touching the database, and reads.
fn a_read_only_server_prepares_everything_refuses_writes_and_reads(engine: Engine) {
    let mut s = crate::common::start_engine(engine, "knowledge", &["--read-only"]);
    let before = count_rows(&s.db.path, "knowledge_entries");
    let e = s.tool_error("kb_add", json!({"content": "not now", "role": "dev"}));
    // The seed's codes name every database refusal DATABASE_ERROR (`errors:` in the spec).
    assert_eq!(
        e,
        json!({"code": "DATABASE_ERROR", "message": "`kb_add` changes the database, and this server is running read-only; restart it without --read-only to allow writes"})
    );
    let listed = s.ok("kb_list", json!({}));
    assert_eq!(
        listed["entries"].as_array().unwrap().len() as i64,
        before,
        "{listed}"
    );
    assert_eq!(count_rows(&s.db.path, "knowledge_entries"), before);
    s.finish();
}

fn cancellation_interrupts_a_running_query(engine: Engine) {
    cancel_while_running(
        engine,
        json!({"name": "kb_search", "arguments": {"query": "common", "limit": 50}}),
    );
}

/// A read that takes the stdio lane (a plain SQL tool, answered on the thread that read it)
/// is interrupted the same way: another thread reads the cancellation meanwhile.
#[test]
fn cancellation_interrupts_a_read_answered_on_the_reading_thread() {
    cancel_while_running(
        Engine::Sqlite,
        json!({"name": "kb_list", "arguments": {"tags": ["no-such-tag"], "limit": 100}}),
    );
}

/// A lane call keeps its thread's turn at stdin only while it is quick: one that turns out
/// slow gives the turn to another thread, so a request sent after it is answered first. (The
/// call may be read alone or together with the ping; either way the ping must not wait.)
#[test]
fn a_lane_read_that_turns_out_slow_does_not_hold_up_the_next_message() {
    let db = big_db(300_000);
    let mut c = spawn(&db.path, &[], Stdio::null());
    for id in [81, 82, 83] {
        let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "kb_list", "arguments": {"tags": ["no-such-tag"], "limit": 100}}});
        c.send_bytes(format!("{call}\n").as_bytes()).unwrap();
        let ping = c.request("ping", json!({})).unwrap();
        assert!(ping.get("result").is_some(), "{ping}");
        assert!(
            !c.other.iter().any(|m| m["id"] == id),
            "the ping waited for the slow call {id}"
        );
        let slow = c.recv_response(&json!(id)).unwrap();
        assert_eq!(slow["result"]["isError"], json!(false), "{slow}");
    }
    assert!(
        c.finish(Duration::from_secs(30))
            .is_some_and(|s| s.success())
    );
}

/// Sends the tool call `params` on a big database with its cancellation right behind it: the
/// server stays free for the next call, and the call stops as cancelled.
fn cancel_while_running(engine: Engine, params: Value) {
    let db = big_db_on(engine, 300_000);
    let log = db._dir.path().join("server.log");
    let file = std::fs::File::create(&log).unwrap();
    let mut c = spawn(
        &db.path,
        &[("MCPSPEC_LOG", "info"), ("MCPSPEC_LOG_FORMAT", "json")],
        Stdio::from(file),
    );
    // The cancellation follows the request at once: the server registers the request before it
    // reads the next message, so the call is stopped before or while it runs, never after.
    let call = json!({"jsonrpc": "2.0", "id": 79, "method": "tools/call", "params": params});
    c.send_line(&call.to_string()).unwrap();
    c.notify(
        "notifications/cancelled",
        json!({"requestId": 79, "reason": "user pressed escape"}),
    )
    .unwrap();
    // The server is free for the next call.
    let r = c
        .request(
            "tools/call",
            json!({"name": "kb_get", "arguments": {"id": "0b6f9e2a-5c1d-4e8f-9a3b-1c2d3e4f5a6b"}}),
        )
        .unwrap();
    assert_eq!(r["result"]["structuredContent"]["role"], "dev");
    let (status, rest) = c.finish_keep_reading(Duration::from_secs(30));
    assert!(status.is_some_and(|s| s.success()));
    // If the cancelled call is answered at all (MCP lets a server stay silent), it says so.
    for m in rest.iter().filter(|m| m["id"] == 79) {
        let text = m["result"]["content"][0]["text"].as_str().unwrap_or("");
        assert!(
            text.contains("CANCELLED"),
            "a cancelled call answered with: {text}"
        );
    }
    // The server's call log shows the call stopped as cancelled.
    let text = std::fs::read_to_string(&log).unwrap();
    let outcomes: Vec<String> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["target"] == "mcpspec::call" && v["fields"]["tool"] == params["name"])
        .map(|v| v["fields"]["outcome"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(outcomes, ["CANCELLED"], "{text}");
}

/// kb_search may run as a task (`task: optional`): for a client that takes tasks, a search
/// answers as usual within MCPSPEC_TASK_AFTER_MS and becomes a task past it (0: at once), whose
/// result `tasks/get` inlines and whose query `tasks/cancel` interrupts.
fn a_long_search_runs_as_a_task_that_tasks_cancel_interrupts(engine: Engine) {
    use crate::conformance::tasks::{created, rpc, until};
    let search =
        |query: &str| json!({"name": "kb_search", "arguments": {"query": query, "limit": 50}});
    // Within the grace period: the result, not a task.
    let db = sample_db_on(engine, "knowledge");
    let mut c = spawn_bare(&db.path, &[("MCPSPEC_TASK_AFTER_MS", "60000")]);
    let r = rpc(&mut c, "tools/call", search("database"));
    assert_eq!(r["result"]["resultType"], "complete", "{r}");
    let direct = r["result"]["structuredContent"].clone();
    assert!(!direct["results"].as_array().unwrap().is_empty(), "{r}");
    drop(c);
    // Past it: a task whose result is the same search's.
    let mut c = spawn_bare(&db.path, &[("MCPSPEC_TASK_AFTER_MS", "0")]);
    let id = created(&rpc(&mut c, "tools/call", search("database")));
    let done = until(&mut c, &id, "completed");
    assert_eq!(done["result"]["structuredContent"], direct, "{done}");
    // A long one stops when its task is cancelled, and the server goes on serving.
    let big = big_db_on(engine, 300_000);
    let mut c = spawn_bare(&big.path, &[("MCPSPEC_TASK_AFTER_MS", "0")]);
    let id = created(&rpc(&mut c, "tools/call", search("common")));
    let r = rpc(&mut c, "tasks/cancel", json!({"taskId": id}));
    assert_eq!(r["result"]["resultType"], "complete", "{r}");
    until(&mut c, &id, "cancelled");
    let r = rpc(
        &mut c,
        "tools/call",
        json!({"name": "kb_list", "arguments": {"limit": 1}}),
    );
    assert_eq!(r["result"]["isError"], json!(false), "{r}");
}

/// A knowledge server on `db` for requests of protocol 2026-07-28 (no `initialize`).
fn spawn_bare(db: &Path, env: &[(&str, &str)]) -> StdioClient {
    let mut c = Command::new(EXE);
    c.args(["serve", "knowledge", "--db"])
        .arg(db)
        .stderr(Stdio::null());
    for (k, v) in env {
        c.env(k, v);
    }
    StdioClient::spawn(&mut c).expect("spawn")
}

fn every_call_is_logged_with_sanitised_arguments(engine: Engine) {
    let db = sample_db_on(engine, "knowledge");
    let log = db._dir.path().join("server.log");
    let file = std::fs::File::create(&log).unwrap();
    let mut c = spawn(
        &db.path,
        &[("MCPSPEC_LOG", "info"), ("MCPSPEC_LOG_FORMAT", "json")],
        Stdio::from(file),
    );
    let long = "z".repeat(500);
    c.call_tool(
        "kb_add",
        json!({"content": long, "role": "dev", "tags": ["sk-live-abcdef123456"]}),
    )
    .unwrap();
    c.call_tool("kb_get", json!({"id": "missing"})).unwrap();
    assert!(
        c.finish(Duration::from_secs(10))
            .is_some_and(|s| s.success())
    );
    let text = std::fs::read_to_string(&log).unwrap();
    let calls: Vec<Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["target"] == "mcpspec::call")
        .collect();
    assert_eq!(calls.len(), 2, "{text}");
    let add = &calls[0]["fields"];
    assert_eq!(
        (add["tool"].as_str(), add["outcome"].as_str()),
        (Some("kb_add"), Some("ok"))
    );
    assert!(
        add["request"].as_u64().is_some()
            && add["duration_ms"].as_f64().is_some()
            && add["result_bytes"].as_u64() > Some(0)
    );
    let args = add["arguments"].as_str().unwrap();
    assert!(
        args.contains("…(500 chars)") && !args.contains(&long),
        "{args}"
    );
    assert!(
        args.contains("[redacted]") && !args.contains("sk-live"),
        "{args}"
    );
    assert_eq!(calls[1]["fields"]["outcome"], "NOT_FOUND");
    assert!(
        !text
            .lines()
            .any(|l| l.starts_with('{') && serde_json::from_str::<Value>(l).is_err())
    );
}

fn errors_never_leak_sql_paths_or_traces(engine: Engine, transport: Transport) {
    let db = sample_db_on(engine, "knowledge");
    let path = db.path.clone();
    let mut s = start_over(transport, db, "knowledge", &[]);
    let mut texts = Vec::new();
    let mut collect = |r: &Value| texts.push(r.to_string());
    collect(&s.call("kb_get", json!({"id": "missing"})));
    collect(&s.call("kb_add", json!({"content": "", "role": "nobody"})));
    collect(&s.call("kb_update", json!({"id": "missing", "content": "x"})));
    collect(&s.call("kb_search", json!({"query": "\"(("})));
    collect(&s.call("nope", json!({})));
    // Break the database behind the server's back: the failure must be reported sanitised.
    let break_it = match engine {
        // The search trigger then fails on every insert.
        Engine::Postgres => "ALTER TABLE knowledge_entries RENAME COLUMN search TO search_gone",
        // The insert then names a column that is not there.
        Engine::Mariadb => "ALTER TABLE knowledge_entries RENAME COLUMN role TO search_gone",
        Engine::Sqlite => "DROP TABLE knowledge_fts",
    };
    crate::common::sql_on(engine, &path, break_it);
    let broken = s.call(
        "kb_add",
        json!({"content": "after the break", "role": "dev"}),
    );
    let text = broken["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_string();
    let e: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(e["error"]["code"], "DATABASE_ERROR", "{text}");
    collect(&broken);
    let dir = crate::common::server_dir(engine, &path);
    for t in &texts {
        for needle in [
            "SELECT",
            "INSERT",
            "UPDATE ",
            "knowledge_fts",
            "search_gone",
            "sqlite",
            "postgres",
            "plpgsql",
            "mariadb",
            "MariaDB",
            "InnoDB",
            ".db",
            &dir,
            "panicked",
            "backtrace",
            ".rs:",
        ] {
            assert!(!t.contains(needle), "{needle:?} leaked in {t}");
        }
    }
    s.finish();
}

fn a_slow_call_does_not_block_fast_ones(engine: Engine) {
    let db = big_db_on(engine, 300_000);
    let mut c = spawn(&db.path, &[], Stdio::null());
    assert!(start_slow_search(&mut c, 80));
    // Reads run on a pool of connections: this one is answered while the search still runs.
    let r = c
        .request(
            "tools/call",
            json!({"name": "kb_list", "arguments": {"limit": 1, "role": "pm"}}),
        )
        .unwrap();
    assert_eq!(r["result"]["structuredContent"]["entries"][0]["role"], "pm");
    assert!(
        !c.other.iter().any(|m| m["id"] == 80),
        "the slow search finished first; make it slower"
    );
    // So is a write.
    let w = c
        .call_tool(
            "kb_add",
            json!({"content": "written meanwhile", "role": "qa"}),
        )
        .unwrap();
    assert_eq!(w["result"]["isError"], json!(false));
    let slow = c.recv_response(&json!(80)).unwrap();
    assert_eq!(slow["result"]["isError"], json!(false));
    assert!(
        c.finish(Duration::from_secs(30))
            .is_some_and(|s| s.success())
    );
}

fn limits_stop_slow_calls_and_flag_cut_results(engine: Engine) {
    let db = big_db_on(engine, 300_000);
    // A call that runs past the timeout is interrupted and says so.
    let mut c = spawn(&db.path, &[("MCPSPEC_CALL_TIMEOUT_MS", "1")], Stdio::null());
    let r = c
        .call_tool("kb_search", json!({"query": "common"}))
        .unwrap();
    let text = r["result"]["content"][0]["text"].as_str().unwrap();
    let e: Value = serde_json::from_str(text).unwrap();
    assert_eq!(e["error"]["code"], "DATABASE_ERROR", "{text}");
    assert_eq!(
        e["error"]["message"],
        "`kb_search` took longer than 1 ms and was stopped; narrow the request"
    );
    assert!(
        c.finish(Duration::from_secs(10))
            .is_some_and(|s| s.success())
    );

    // A result over the size limit is cut between rows and flagged, never cut mid-JSON.
    let mut c = spawn(
        &db.path,
        &[("MCPSPEC_MAX_RESULT_BYTES", "20000")],
        Stdio::null(),
    );
    let r = c.call_tool("kb_list", json!({"limit": 100})).unwrap();
    let out = &r["result"]["structuredContent"];
    let n = out["entries"].as_array().unwrap().len();
    assert!(n > 10 && n < 100, "{n} entries");
    assert_eq!(out["truncated"], json!(true));
    // A single row over the limit is an error that says what to do.
    let big = "b".repeat(30_000);
    let id = c
        .call_tool("kb_add", json!({"content": big, "role": "qa"}))
        .unwrap()["result"]["structuredContent"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let r = c.call_tool("kb_get", json!({"id": id})).unwrap();
    let e: Value =
        serde_json::from_str(r["result"]["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(e["error"]["code"], "RESULT_TOO_LARGE");
    assert_eq!(e["error"]["limit"], 20000);
    assert!(
        c.finish(Duration::from_secs(10))
            .is_some_and(|s| s.success())
    );
}

fn malformed_settings_fail_start_up_with_the_fix(engine: Engine) {
    let db = sample_db_on(engine, "knowledge");
    let out = Command::new(EXE)
        .args(["serve", "knowledge", "--db"])
        .arg(&db.path)
        .env("MCPSPEC_CALL_TIMEOUT_MS", "soon")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim(),
        "error: MCPSPEC_CALL_TIMEOUT_MS=\"soon\" is not a positive whole number; fix or unset it"
    );
}

/// Reads of protocol 2026-07-28 over stdio (no `initialize`, each request with its `_meta`)
/// take the lane once a request has made rmcp choose that lifecycle, and answer what rmcp
/// answers: each call below goes once as the lane takes it and once with a `_meta` key more,
/// which leaves it to rmcp. Such a read is cancelled like any other, and a call without
/// `_meta` stays rmcp's, which refuses it in this lifecycle.
#[test]
fn reads_of_2026_07_28_over_stdio_answer_what_rmcp_answers() {
    let db = big_db(300_000);
    let mut c = spawn_bare(&db.path, &[]);
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"roots": {}},
        "io.modelcontextprotocol/clientInfo": {"name": "e2e", "version": "1"}
    });
    let mut to_rmcp = meta.clone();
    to_rmcp["x-e2e"] = json!(1);
    let mut next = 0;
    let mut call = |c: &mut StdioClient, name: &str, arguments: &Value, meta: &Value| {
        next += 1;
        let params = json!({"name": name, "arguments": arguments, "_meta": meta});
        let m = json!({"jsonrpc": "2.0", "id": next, "method": "tools/call", "params": params});
        c.send_line(&m.to_string()).unwrap();
        let mut answer = c.recv_response(&json!(next)).expect("an answer");
        answer.as_object_mut().unwrap().remove("id");
        answer
    };
    let calls = [
        ("kb_list", json!({"limit": 2})),
        (
            "kb_get",
            json!({"id": "0b6f9e2a-5c1d-4e8f-9a3b-1c2d3e4f5a6b"}),
        ),
        ("kb_get", json!({"id": "nope"})),
        ("kb_list", json!({"limit": "two"})),
        ("kb_list", json!({"limit": 2, "colour": "red"})),
        ("kb_search", json!({"query": "common", "limit": 1})),
    ];
    // The first round's first call chooses the lifecycle; every later one may take the lane.
    for _ in 0..2 {
        for (name, arguments) in &calls {
            let lane = call(&mut c, name, arguments, &meta);
            let rmcp = call(&mut c, name, arguments, &to_rmcp);
            assert_eq!(lane, rmcp, "{name} {arguments}");
        }
    }
    let ok = call(&mut c, "kb_list", &json!({"limit": 2}), &meta);
    assert_eq!(ok["result"]["resultType"], "complete", "{ok}");
    assert_eq!(ok["result"]["isError"], json!(false), "{ok}");

    // A long read, cancelled right behind it, stops as cancelled.
    let slow = json!({"name": "kb_list", "arguments": {"tags": ["no-such-tag"], "limit": 100}, "_meta": meta});
    let m = json!({"jsonrpc": "2.0", "id": "slow", "method": "tools/call", "params": slow});
    c.send_line(&m.to_string()).unwrap();
    c.notify(
        "notifications/cancelled",
        json!({"requestId": "slow", "reason": "user pressed escape", "_meta": meta}),
    )
    .unwrap();
    let again = call(&mut c, "kb_list", &json!({"limit": 2}), &meta);
    assert_eq!(again, ok);

    // Without `_meta`, rmcp refuses the call in this lifecycle.
    let plain = c
        .request(
            "tools/call",
            json!({"name": "kb_list", "arguments": {"limit": 2}}),
        )
        .unwrap();
    assert_eq!(plain["error"]["code"], -32602, "{plain}");
    let (status, rest) = c.finish_keep_reading(Duration::from_secs(30));
    assert!(status.is_some_and(|s| s.success()));
    // The lane answers a cancelled read, as cancelled (rmcp would stay silent).
    let answers: Vec<_> = rest.iter().filter(|m| m["id"] == "slow").collect();
    assert_eq!(answers.len(), 1, "{answers:?}");
    let text = answers[0]["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or("");
    assert!(
        text.contains("CANCELLED"),
        "a cancelled read answered: {text}"
    );
}

/// PostgreSQL's text cannot hold a NUL character (U+0000), so knowledge keeps one contract on
/// both engines: a write that carries one is a validation error naming the field, and a read
/// matches nothing (`kb_get` is `NOT_FOUND`), never a `DATABASE_ERROR`.
fn a_nul_character_gets_one_answer_on_every_engine(engine: Engine, transport: Transport) {
    let mut s = start_engine_over(engine, transport, "knowledge", &[]);
    let id = s.ok("kb_add", json!({"content": "plain", "role": "dev"}))["id"]
        .as_str()
        .unwrap()
        .to_string();
    // (tool, arguments, the field named)
    let writes = [
        (
            "kb_add",
            json!({"content": "a\u{0}b", "role": "dev"}),
            "content",
        ),
        (
            "kb_add",
            json!({"content": "ok", "role": "dev", "tags": ["x", "y\u{0}"]}),
            "tags.1",
        ),
        (
            "kb_update",
            json!({"id": id, "content": "\u{0}"}),
            "content",
        ),
        ("kb_update", json!({"id": "x\u{0}", "content": "ok"}), "id"),
        ("kb_delete", json!({"id": "x\u{0}"}), "id"),
    ];
    for (tool, args, field) in writes {
        let e = s.tool_error(tool, args.clone());
        assert_eq!(e["code"], "VALIDATION_ERROR", "{tool} {args}: {e}");
        assert_eq!(
            (e["field"].as_str(), e["constraint"].as_str()),
            (Some(field), Some("nul")),
            "{e}"
        );
    }
    assert_eq!(
        s.tool_error("kb_get", json!({"id": "x\u{0}"}))["code"],
        "NOT_FOUND"
    );
    let found = s.ok("kb_search", json!({"query": "plain\u{0}"}));
    assert_eq!(found["results"], json!([]), "{found}");
    let listed = s.ok("kb_list", json!({"tags": ["\u{0}"]}));
    assert_eq!(listed["entries"], json!([]), "{listed}");
    // Nothing was written, and the entry is as it was.
    assert_eq!(s.ok("kb_get", json!({"id": id}))["content"], "plain");
    s.finish();
}

/// `serve knowledge --toolset read` offers the read toolset's tools alone, over stdio and
/// HTTP in both protocol eras: `tools/list` lists them in the spec's order, they answer (a
/// plain read on the lane too), and a tool outside the set is unknown, as one the server does
/// not have, with only the offered tools named. Two toolsets together offer both sets' tools;
/// a toolset the spec does not declare refuses to start, naming those it does.
#[test]
fn a_toolset_offers_only_its_tools() {
    const READ: [&str; 6] = [
        "kb_get",
        "kb_list",
        "kb_search",
        "kb_get_related",
        "kb_stats",
        "kb_health",
    ];
    for transport in [Transport::Stdio, Transport::Http, Transport::HttpPerRequest] {
        let db = sample_db("knowledge");
        let mut s = crate::common::start_over(transport, db, "knowledge", &["--toolset", "read"]);
        let names: Vec<&str> = s
            .tools()
            .iter()
            .filter_map(|t| t["name"].as_str())
            .collect();
        assert_eq!(names, READ, "{transport:?}");
        let listed = s.ok("kb_list", json!({}));
        assert!(listed["entries"].is_array(), "{listed}");
        s.ok("kb_search", json!({"query": "transaction"}));
        for (tool, args) in [
            ("kb_add", json!({"content": "Not offered.", "role": "dev"})),
            ("kb_delete", json!({"id": "x"})),
        ] {
            let response = s.call(tool, args);
            let error = &response["error"];
            assert_eq!(error["code"], -32602, "{transport:?} {response}");
            assert_eq!(
                error["message"],
                format!("unknown tool: {tool}"),
                "{response}"
            );
            assert_eq!(error["data"]["available"], json!(READ), "{response}");
        }
        s.finish();
    }
    let out = Command::new(EXE)
        .args(["serve", "knowledge", "--toolset", "write"])
        .stdin(Stdio::null())
        .output()
        .expect("run serve");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("unknown toolset `write`; the `knowledge` server's are read"),
        "{err}"
    );
}

/// `mcpspec tokens knowledge`: a line a tool with its `tools/list` entry's size and estimate,
/// the read toolset's list and the whole list; the toolset costs less than every tool.
#[test]
fn tokens_says_what_each_tool_and_toolset_costs() {
    let out = Command::new(EXE)
        .args(["tokens", "knowledge"])
        .output()
        .expect("run tokens");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let bytes_of = |prefix: &str| -> usize {
        let line = text
            .lines()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no `{prefix}` line in:\n{text}"));
        line[prefix.len()..]
            .split_whitespace()
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    for tool in ["kb_add ", "kb_search ", "kb_bulk_import "] {
        assert!(bytes_of(tool) > 100, "{text}");
    }
    let read = bytes_of("--toolset read ");
    let every = bytes_of("every tool ");
    assert!(read > 0 && read < every, "{text}");
    assert!(text.contains("~tokens"), "{text}");
}
