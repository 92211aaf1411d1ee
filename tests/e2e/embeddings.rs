//! Search by meaning: the knowledge server with a real static model (WordLlama's, fetched from
//! PyPI by the harness) on SQLite (sqlite-vec) and PostgreSQL (pgvector), and with a real HTTP
//! server speaking the OpenAI embeddings API for the failures only a network has. Every call
//! goes through the built binary, as a client's would.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::{
    Db, EXE, Engine, Session, Transport, count_rows, sample_db, sample_db_on, sql_on,
    start_over_with,
};
use crate::openai::{Fault, Provider};

// With WordLlama's model, fetched from PyPI: the full tier, SQLite included.
#[cfg(feature = "full")]
crate::on_every_vector_engine_and_transport!(entries_are_found_by_meaning_and_by_their_words);
#[cfg(feature = "full")]
crate::on_every_vector_engine!(
    a_keyword_only_database_moves_forward_losing_nothing,
    kb_bulk_import_embeds_every_entry_or_adds_none,
);

/// Four entries on four subjects, and for each a question in other words.
const ENTRIES: [(&str, &str); 4] = [
    (
        "Use connection pooling so the database stays responsive under heavy load.",
        "why are my SQL requests slow when traffic spikes?",
    ),
    (
        "Rotate API keys every ninety days and never commit secrets to the repository.",
        "how often should credentials get replaced?",
    ),
    (
        "Keep the on-call runbook next to the alert that pages you.",
        "instructions for responding to a production incident at night",
    ),
    (
        "Profile memory before optimising; most leaks come from unbounded caches.",
        "finding out why a program uses too much RAM",
    ),
];

/// The environment that gives the knowledge server WordLlama's model.
fn model_env() -> Vec<(String, String)> {
    vec![(
        "KNOWLEDGE_EMBEDDINGS".into(),
        format!("static:{}", crate::deps::wordllama().display()),
    )]
}

fn refs(env: &[(String, String)]) -> Vec<(&str, &str)> {
    env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect()
}

/// The knowledge server on `db` over `transport` with `env`.
fn start(transport: Transport, db: Db, env: &[(String, String)]) -> Session {
    start_over_with(transport, db, "knowledge", &[], &refs(env))
}

/// The model id the server reports for WordLlama's model.
const MODEL: &str = "static:l2_supercat_256@256";

/// Adds [`ENTRIES`]; their ids, in order.
fn add_entries(s: &mut Session) -> Vec<String> {
    ENTRIES
        .iter()
        .map(|(content, _)| {
            let added = s.ok("kb_add", json!({"content": content, "role": "dev"}));
            added["id"].as_str().expect("an id").to_string()
        })
        .collect()
}

fn entries_are_found_by_meaning_and_by_their_words(engine: Engine, transport: Transport) {
    let mut s = start(transport, sample_db_on(engine, "knowledge"), &model_env());
    // The sample rows came without vectors: a rebuild gives them theirs.
    let rebuilt = s.ok("kb_rebuild_embeddings", json!({}));
    assert_eq!(rebuilt["embedded"], 4, "{rebuilt}");
    assert_eq!(rebuilt["remaining"], 0, "{rebuilt}");
    assert_eq!(rebuilt["model"], MODEL, "{rebuilt}");
    let ids = add_entries(&mut s);
    for ((_, question), id) in ENTRIES.iter().zip(&ids) {
        for mode in ["semantic", "hybrid"] {
            let found = s.ok("kb_search", json!({"query": question, "mode": mode}));
            let first = &found["results"][0];
            assert_eq!(&first["id"], id, "{mode} {question:?}: {found}");
            // The question shares too few words with the entry for the keyword side.
            assert_eq!(first["matched"], "semantic", "{mode}: {found}");
        }
        let words = s.ok("kb_search", json!({"query": question, "mode": "keyword"}));
        assert!(
            words["results"]
                .as_array()
                .is_none_or(|r| r.iter().all(|e| &e["id"] != id)),
            "keyword search finds no entry in other words: {words}"
        );
    }
    // Words and meaning together: the entry with the words is found by both.
    let both = s.ok("kb_search", json!({"query": "rotate keys"}));
    assert_eq!(both["results"][0]["id"], json!(ids[1]), "{both}");
    assert_eq!(both["results"][0]["matched"], "both", "{both}");
    // A role that has none of them finds none of them by meaning either.
    let qa = s.ok(
        "kb_search",
        json!({"query": ENTRIES[0].1, "mode": "semantic", "role": "qa"}),
    );
    let qa_rows = qa["results"].as_array().expect("results");
    assert!(qa_rows.iter().all(|r| r["role"] == "qa"), "{qa}");
    // The nearest entry to the pooling one is about databases too.
    let related = s.ok("kb_get_related", json!({"id": ids[0], "limit": 3}));
    assert_eq!(related["entry"]["embedded"], true, "{related}");
    let near: Vec<&Value> = related["related"]
        .as_array()
        .expect("related")
        .iter()
        .collect();
    assert_eq!(near.len(), 3, "{related}");
    assert!(near.iter().all(|r| r["id"] != json!(ids[0])), "{related}");
    let sims: Vec<f64> = near
        .iter()
        .map(|r| r["similarity"].as_f64().expect("a similarity"))
        .collect();
    assert!(
        sims.windows(2).all(|w| w[0] >= w[1]),
        "nearest first: {sims:?}"
    );
    let stats = s.ok("kb_stats", json!({}));
    assert_eq!(
        stats["totals"],
        json!({"entries": 8, "embedded": 8, "other_model": 0, "not_embedded": 0, "model": MODEL, "dimensions": 256}),
        "{stats}"
    );
    let health = s.ok("kb_health", json!({}));
    assert_eq!(health["database"], "ok", "{health}");
    assert_eq!(health["embeddings"]["state"], "ok", "{health}");
    assert_eq!(health["embeddings"]["model"], MODEL, "{health}");
    assert!(
        health["embeddings"]["latency_ms"].as_f64().is_some(),
        "{health}"
    );
    s.finish();
}

/// The vector the server stored for the entry with `content`, from the SQLite file.
fn stored_vector(db: &Path, content: &str) -> Vec<f32> {
    let conn = rusqlite::Connection::open(db).expect("open");
    let blob: Vec<u8> = conn
        .query_row(
            "SELECT embedding FROM knowledge_entries WHERE content = ?1 AND embedding IS NOT NULL",
            [content],
            |r| r.get(0),
        )
        .unwrap_or_else(|e| panic!("the vector of {content:?}: {e}"));
    blob.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

fn cosine(a: &[f32], b: &[f64]) -> f64 {
    let dot: f64 = a.iter().zip(b).map(|(x, y)| f64::from(*x) * y).sum();
    let na: f64 = a.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
    let nb: f64 = b.iter().map(|y| y.powi(2)).sum::<f64>().sqrt();
    dot / (na * nb)
}

/// WordLlama's vectors as its own Python package makes them (pinned by
/// `tests/fixtures/embeddings/reference.py`), against what the server stores: the first texts
/// through `kb_add`, the rest through `kb_bulk_import`, including non-ASCII text, special
/// tokens and a 10,000-character text.
#[cfg(feature = "full")]
#[test]
fn wordllama_vectors_equal_the_python_packages() {
    let reference: Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/fixtures/embeddings/wordllama-l2_supercat_256.json"
        ))
        .expect("the reference vectors"),
    )
    .expect("JSON");
    let texts: Vec<&str> = reference["texts"]
        .as_array()
        .expect("texts")
        .iter()
        .map(|t| t.as_str().expect("a text"))
        .collect();
    assert!(texts.iter().any(|t| t.chars().count() == 10_000));
    let db = sample_db("knowledge");
    let path = db.path.clone();
    let mut s = start(Transport::Stdio, db, &model_env());
    for t in &texts[..3] {
        s.ok("kb_add", json!({"content": t, "role": "dev"}));
    }
    let rest: Vec<Value> = texts[3..]
        .iter()
        .map(|t| json!({"content": t, "role": "qa"}))
        .collect();
    s.ok("kb_bulk_import", json!({"entries": rest}));
    // Read while the session keeps the database's directory.
    for (text, want) in texts
        .iter()
        .zip(reference["vectors"].as_array().expect("vectors"))
    {
        let want: Vec<f64> = want
            .as_array()
            .expect("a vector")
            .iter()
            .map(|x| x.as_f64().expect("a number"))
            .collect();
        let got = stored_vector(&path, text);
        assert_eq!(got.len(), 256);
        let c = cosine(&got, &want);
        let shown: String = text.chars().take(40).collect();
        assert!(c >= 0.999, "{shown:?}: cosine {c}");
        let norm: f32 = got.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-4, "stored L2-normalised: {norm}");
    }
    s.finish();
}

/// Without a provider the server searches by keyword: hybrid is keyword search, semantic
/// search and the rebuild are refused with `EMBEDDINGS_OFF` naming the variable, and kb_health
/// says the provider is off.
#[test]
fn without_a_provider_search_is_by_keyword_and_by_meaning_is_refused() {
    let mut s = start(Transport::Stdio, sample_db("knowledge"), &[]);
    let found = s.ok("kb_search", json!({"query": "regression fixtures"}));
    assert_eq!(found["results"][0]["matched"], "keyword", "{found}");
    let refused = s.tool_error("kb_search", json!({"query": "tests", "mode": "semantic"}));
    assert_eq!(refused["code"], "EMBEDDINGS_OFF", "{refused}");
    assert_eq!(refused["field"], "mode", "{refused}");
    assert!(
        refused["message"]
            .as_str()
            .unwrap()
            .contains("KNOWLEDGE_EMBEDDINGS is not set"),
        "{refused}"
    );
    let rebuild = s.tool_error("kb_rebuild_embeddings", json!({}));
    assert_eq!(rebuild["code"], "EMBEDDINGS_OFF", "{rebuild}");
    let health = s.ok("kb_health", json!({}));
    assert_eq!(health["embeddings"]["state"], "off", "{health}");
    // An entry added meanwhile has no vector; kb_stats says so.
    s.ok(
        "kb_add",
        json!({"content": "Added without a provider.", "role": "pm"}),
    );
    let stats = s.ok("kb_stats", json!({}));
    assert_eq!(stats["totals"]["not_embedded"], 5, "{stats}");
    assert!(stats["totals"].get("model").is_none(), "{stats}");
    s.finish();
}

/// A knowledge database of the keyword-only era (migration 1, rows in it) moves forward with
/// `mcpspec migrate` and `kb_rebuild_embeddings`: every row is kept as it was and gains a
/// vector, and search by meaning finds them.
fn a_keyword_only_database_moves_forward_losing_nothing(engine: Engine) {
    let init = std::fs::read_to_string(match engine {
        Engine::Postgres => "../spec/migrations/knowledge/0001_init.postgres.sql",
        _ => "../spec/migrations/knowledge/0001_init.sql",
    })
    .expect("migration 1");
    let (db, rows) = match engine {
        Engine::Postgres => {
            let url = crate::pg::Cluster::shared().create_database();
            sql_on(engine, Path::new(&url), &init);
            let rows = "INSERT INTO knowledge_entries (id, content, role, tags) VALUES
                ('a', 'Use connection pooling so the database stays responsive under heavy load.', 'dev', '{db}'),
                ('b', 'Rotate API keys every ninety days and never commit secrets to the repository.', 'dev', NULL)";
            sql_on(engine, Path::new(&url), rows);
            let db = Db {
                _dir: tempfile::tempdir().expect("tempdir"),
                path: url.clone().into(),
            };
            // PostgreSQL cannot compare a schema with a migration's: the version is given.
            let (code, out, err) = crate::common::mcpspec(
                &["migrate", "knowledge", "--db", &url, "--baseline", "1"],
                &[],
            );
            assert_eq!(code, 0, "{out}{err}");
            assert!(out.contains("applied 0002_embeddings"), "{out}");
            (db, 2)
        }
        _ => {
            let dir = tempfile::tempdir().expect("tempdir");
            let path = dir.path().join("old.db");
            let conn = rusqlite::Connection::open(&path).expect("create");
            conn.execute_batch(&init).expect("migration 1");
            conn.execute_batch(
                "INSERT INTO knowledge_entries VALUES
                 ('a', 'Use connection pooling so the database stays responsive under heavy load.', 'dev', '[\"db\"]', '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z'),
                 ('b', 'Rotate API keys every ninety days and never commit secrets to the repository.', 'dev', NULL, '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z');",
            )
            .expect("rows of the keyword-only era");
            drop(conn);
            let (code, out, err) = crate::common::mcpspec(
                &["migrate", "knowledge", "--db", path.to_str().unwrap()],
                &[],
            );
            assert_eq!(code, 0, "{out}{err}");
            assert!(out.contains("applied 0002_embeddings"), "{out}");
            (Db { _dir: dir, path }, 2)
        }
    };
    let location = db.path.to_string_lossy().into_owned();
    let before = sql_on(
        engine,
        Path::new(&location),
        "SELECT string_agg(id || ':' || content, '|' ORDER BY id) FROM knowledge_entries",
    );
    let mut s = start(Transport::Stdio, db, &model_env());
    let rebuilt = s.ok("kb_rebuild_embeddings", json!({"batch_size": 1}));
    assert_eq!(
        (
            rebuilt["embedded"].clone(),
            rebuilt["batches"].clone(),
            rebuilt["remaining"].clone()
        ),
        (json!(rows), json!(rows), json!(0)),
        "{rebuilt}"
    );
    let found = s.ok(
        "kb_search",
        json!({"query": "how often should credentials get replaced?", "mode": "semantic"}),
    );
    assert_eq!(found["results"][0]["id"], "b", "{found}");
    let after = sql_on(
        engine,
        Path::new(&location),
        "SELECT string_agg(id || ':' || content, '|' ORDER BY id) FROM knowledge_entries",
    );
    assert_eq!(before, after, "every row kept as it was");
    s.finish();
}

/// `kb_bulk_import` embeds the entries in batches and adds them in one transaction: an entry
/// the database refuses leaves none of them added.
fn kb_bulk_import_embeds_every_entry_or_adds_none(engine: Engine) {
    let db = sample_db_on(engine, "knowledge");
    let location = db.path.to_string_lossy().into_owned();
    let mut s = start(Transport::Stdio, db, &model_env());
    let entries: Vec<Value> = (0..150)
        .map(|i| json!({"content": format!("Imported fact number {i} about caching."), "role": "dev", "tags": ["import"]}))
        .collect();
    let added = s.ok("kb_bulk_import", json!({"entries": entries}));
    assert_eq!(added["ids"].as_array().map(Vec::len), Some(150), "{added}");
    let stats = s.ok("kb_stats", json!({}));
    assert_eq!(stats["totals"]["embedded"], 150, "{stats}");
    // The second entry's text holds a NUL, which PostgreSQL's text refuses and the server
    // refuses everywhere: nothing of the import is added.
    let bad = s.tool_error(
        "kb_bulk_import",
        json!({"entries": [{"content": "fine", "role": "dev"}, {"content": "no\u{0}pe", "role": "dev"}]}),
    );
    assert!(bad["code"].is_string(), "{bad}");
    assert_eq!(
        sql_on(
            engine,
            Path::new(&location),
            "SELECT count(*) FROM knowledge_entries"
        ),
        "154"
    );
    s.finish();
}

/// The seed's provider failures, against a real HTTP server: after its retries a failing
/// provider is a tool error with the server's code (API_ERROR), saying how many tries, and
/// nothing is written; a 429's `Retry-After` is honoured; a vector of the wrong dimensions and
/// a hang are errors too; the key never shows in an error or the log.
#[test]
fn a_failing_provider_writes_nothing_and_never_shows_its_key() {
    let provider = Provider::start("sk-test-0123456789abcdef");
    let db = sample_db("knowledge");
    let path = db.path.clone();
    let mut env = provider.env();
    env.push(("MCPSPEC_CALL_TIMEOUT_MS".into(), "3000".into()));
    let log = tempfile::NamedTempFile::new().expect("a log file");
    let mut c = Command::new(EXE);
    c.args(["serve", "knowledge", "--db"])
        .arg(&path)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .env("MCPSPEC_LOG", "debug")
        .stderr(Stdio::from(log.reopen().expect("reopen the log")));
    let mut s = crate::common::start_command(&mut c, db);
    assert!(
        provider.wait_seen(1, Duration::from_secs(30)),
        "the start-up check"
    );
    // The key goes in the Authorization header, and there only.
    assert_eq!(
        provider.seen()[0].authorization,
        Some(format!("Bearer {}", provider.key))
    );

    // 500 four times: the first try and three retries, then an error.
    provider.fail_next(&[
        Fault::Status(500, None),
        Fault::Status(500, None),
        Fault::Status(500, None),
        Fault::Status(500, None),
    ]);
    let seen = provider.seen().len();
    let e = s.tool_error(
        "kb_add",
        json!({"content": "Never written.", "role": "dev"}),
    );
    assert_eq!(e["code"], "API_ERROR", "{e}");
    assert_eq!(e["field"], "content", "{e}");
    let message = e["message"].as_str().unwrap();
    assert!(
        message.contains("HTTP 500") && message.contains("4 tries"),
        "{e}"
    );
    assert!(message.contains("nothing was changed"), "{e}");
    assert_eq!(provider.seen().len() - seen, 4);
    assert_eq!(count_rows(&path, "knowledge_entries"), 4, "nothing written");
    // An import whose batch fails adds none of its entries.
    provider.fail_next(&[Fault::Status(500, None); 4]);
    let e = s.tool_error(
        "kb_bulk_import",
        json!({"entries": [{"content": "One.", "role": "dev"}, {"content": "Two.", "role": "qa"}]}),
    );
    assert_eq!(e["code"], "API_ERROR", "{e}");
    assert_eq!(e["field"], "entries", "{e}");
    assert_eq!(count_rows(&path, "knowledge_entries"), 4, "nothing written");

    // 429 with Retry-After: 1, then vectors: the call succeeds after the wait.
    provider.fail_next(&[Fault::Status(429, Some(1))]);
    let seen = provider.seen().len();
    s.ok(
        "kb_add",
        json!({"content": "Written after a 429.", "role": "dev"}),
    );
    let tries = &provider.seen()[seen..];
    assert_eq!(tries.len(), 2, "{tries:?}");
    assert!(
        tries[1].at.duration_since(tries[0].at) >= Duration::from_secs(1),
        "Retry-After is honoured"
    );

    // Vectors of another dimension are refused, not stored.
    provider.fail_next(&[Fault::Dimensions(8)]);
    let e = s.tool_error(
        "kb_add",
        json!({"content": "Wrong dimensions.", "role": "dev"}),
    );
    assert_eq!(e["code"], "API_ERROR", "{e}");
    assert!(
        e["message"].as_str().unwrap().contains("8 dimensions"),
        "{e}"
    );

    // A provider that does not answer: the call ends at its deadline, nothing written.
    provider.fail_next(&[Fault::Hang]);
    let e = s.tool_error("kb_add", json!({"content": "Hung.", "role": "dev"}));
    assert_eq!(e["code"], "API_ERROR", "{e}");
    assert!(
        e["message"].as_str().unwrap().contains("did not answer"),
        "{e}"
    );
    assert_eq!(
        count_rows(&path, "knowledge_entries"),
        5,
        "one write, after the 429"
    );

    // An update that leaves the content as it was asks the provider nothing (the cache).
    let added = s.ok(
        "kb_add",
        json!({"content": "Cached by content.", "role": "dev"}),
    );
    let seen = provider.seen().len();
    let same = s.ok(
        "kb_update",
        json!({"id": added["id"], "content": "Cached by content.", "tags": ["kept"]}),
    );
    assert_eq!(same["tags"], json!(["kept"]), "{same}");
    assert_eq!(
        provider.seen().len(),
        seen,
        "no provider call for an unchanged text"
    );
    s.finish();

    // A key the provider refuses: said by the variable's name, never the key.
    let db = sample_db("knowledge");
    let mut env = provider.env();
    env.retain(|(k, _)| k != "OPENAI_API_KEY");
    env.push(("OPENAI_API_KEY".into(), "sk-wrong-key-do-not-show".into()));
    let seen = provider.seen().len();
    let mut s = start(Transport::Stdio, db, &env);
    assert!(
        provider.wait_seen(seen + 1, Duration::from_secs(30)),
        "the start-up check"
    );
    let e = s.tool_error("kb_add", json!({"content": "Refused key.", "role": "dev"}));
    assert_eq!(e["code"], "API_ERROR", "{e}");
    let text = e.to_string();
    assert!(
        text.contains("OPENAI_API_KEY") && text.contains("401"),
        "{e}"
    );
    assert!(!text.contains("sk-wrong-key"), "{e}");
    let health = s.ok("kb_health", json!({}));
    assert_eq!(health["embeddings"]["state"], "failing", "{health}");
    assert!(!health.to_string().contains("sk-wrong-key"), "{health}");
    s.finish();
    let logged = std::fs::read_to_string(log.path()).expect("the log");
    assert!(
        !logged.contains("sk-test-0123456789abcdef"),
        "the key is not logged"
    );
    assert!(
        logged.contains("embedding request failed, trying again"),
        "retries are logged"
    );
}

/// Ten `kb_add` calls at once make two requests of the HTTP provider: the first call's text
/// alone, and the other nine's together while it was in flight.
#[test]
fn ten_parallel_adds_share_the_provider_s_requests() {
    let provider = Provider::start("sk-batch");
    let db = sample_db("knowledge");
    let env = provider.env();
    let server = crate::http::HttpServer::serve(
        &["knowledge", "--db", db.path.to_str().unwrap(), "--metrics"],
        &refs(&env),
    );
    assert!(
        provider.wait_seen(1, Duration::from_secs(30)),
        "the start-up check"
    );
    provider.shut();
    let calls: Vec<_> = (0..10)
        .map(|i| {
            let addr = server.addr;
            std::thread::spawn(move || {
                let mut c = mcpspec_testkit::HttpClient::per_request(addr, None);
                c.call_tool(
                    "kb_add",
                    json!({"content": format!("Parallel entry {i}."), "role": "dev"}),
                )
                .expect("a response")
            })
        })
        .collect();
    assert!(
        provider.wait_held(1, Duration::from_secs(30)),
        "the first request arrives"
    );
    // The other nine wait for the next batch; the server's metrics say when they all do.
    let queued = (0..600).any(|_| {
        let metrics = mcpspec_testkit::get(server.addr, "/metrics")
            .map(|r| r.text())
            .unwrap_or_default();
        let waiting = metrics
            .lines()
            .find(|l| l.starts_with("mcpspec_embedding_queued_texts"))
            .and_then(|l| l.rsplit(' ').next()?.parse::<i64>().ok());
        if waiting == Some(9) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
        false
    });
    assert!(queued, "nine texts wait for the next batch");
    provider.open();
    for call in calls {
        let r = call.join().expect("the call's thread");
        assert_eq!(r["result"]["isError"], false, "{r}");
    }
    let batches: Vec<usize> = provider.seen()[1..].iter().map(|s| s.texts.len()).collect();
    assert_eq!(
        batches,
        [1, 9],
        "two requests: the first text, then the other nine"
    );
    drop(server);
}

/// A provider chosen at start-up whose dimensions differ from the spec's (and the column's)
/// is refused before serving, with the way to change them; so is a database column of other
/// dimensions, and a MariaDB without vectors.
#[cfg(feature = "full")]
#[test]
fn a_provider_that_does_not_fit_the_database_is_refused_before_serving() {
    let serve = |db: &str, env: &[(&str, &str)]| {
        let out = Command::new(EXE)
            .args(["serve", "knowledge", "--db", db])
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .output()
            .expect("run serve");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let model = model_env();
    let model = refs(&model);
    let db = sample_db("knowledge");
    let at = db.path.to_str().unwrap();
    let mut wider = model.clone();
    wider.push(("KNOWLEDGE_EMBEDDINGS_DIMENSIONS", "768"));
    let (code, err) = serve(at, &wider);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("KNOWLEDGE_EMBEDDINGS_DIMENSIONS is 768")
            && err.contains("write a migration")
            && err.contains("rebuild"),
        "{err}"
    );

    let pg = sample_db_on(Engine::Postgres, "knowledge");
    let url = pg.path.to_str().unwrap();
    sql_on(
        Engine::Postgres,
        Path::new(url),
        "DROP INDEX knowledge_entries_embedding; ALTER TABLE knowledge_entries ALTER COLUMN embedding TYPE vector(128) USING NULL",
    );
    let (code, err) = serve(url, &model);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("knowledge_entries.embedding holds vectors of 128 dimensions")
            && err.contains("mcpspec migrate"),
        "{err}"
    );

    let maria = sample_db_on(Engine::Mariadb, "knowledge");
    let (code, err) = serve(maria.path.to_str().unwrap(), &model);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("has no vector type") && err.contains("11.7"),
        "{err}"
    );
}

/// `kb_rebuild_embeddings` stores a batch at a time and reports progress: killed half-way, it
/// keeps what it stored, and the next call goes on from there.
#[test]
fn a_rebuild_killed_half_way_goes_on_from_where_it_stopped() {
    let provider = Provider::start("sk-rebuild");
    let db = crate::knowledge::big_db(96);
    let path = db.path.clone();
    let env = provider.env();
    let mut c = crate::knowledge::spawn(&path, &refs(&env), Stdio::null());
    assert!(
        provider.wait_seen(1, Duration::from_secs(30)),
        "the start-up check"
    );
    // Two batches pass; the third is held until the server is killed.
    provider.allow(2);
    let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": "kb_rebuild_embeddings", "arguments": {"batch_size": 25},
                   "_meta": {"progressToken": "rebuild"}}});
    c.send_line(&call.to_string()).expect("send");
    let mut progress = Vec::new();
    while progress.len() < 2 {
        let m = c
            .recv(Duration::from_secs(30))
            .expect("a progress notification");
        if m["method"] == "notifications/progress" {
            progress.push(m["params"].clone());
        }
    }
    let numbers: Vec<(f64, f64)> = progress
        .iter()
        .map(|p| {
            (
                p["progress"].as_f64().unwrap(),
                p["total"].as_f64().unwrap(),
            )
        })
        .collect();
    assert_eq!(numbers, [(25.0, 100.0), (50.0, 100.0)], "{progress:?}");
    assert!(
        provider.wait_held(1, Duration::from_secs(30)),
        "the third batch is asked for"
    );
    crate::common::signal(c.pid(), "-KILL");
    drop(c);
    let embedded = |path: &Path| {
        let conn = rusqlite::Connection::open(path).expect("open");
        conn.query_row(
            "SELECT count(*) FROM knowledge_entries WHERE embedding IS NOT NULL",
            [],
            |r| r.get::<_, i64>(0),
        )
        .expect("count")
    };
    assert_eq!(embedded(&path), 50, "the two stored batches are kept");
    provider.open();
    let mut s = start(Transport::Stdio, db, &env);
    let rest = s.ok("kb_rebuild_embeddings", json!({"batch_size": 25}));
    assert_eq!(rest["embedded"], 50, "{rest}");
    assert_eq!(rest["remaining"], 0, "{rest}");
    assert_eq!(embedded(&path), 100);
    s.finish();
}

/// Each provider call is a span of the request that made it (with the provider's kind) and
/// is counted in `/metrics`.
#[cfg(feature = "full")]
#[test]
fn every_provider_call_is_counted_in_the_metrics() {
    let db = sample_db("knowledge");
    let env = model_env();
    let server = crate::http::HttpServer::serve(
        &["knowledge", "--db", db.path.to_str().unwrap(), "--metrics"],
        &refs(&env),
    );
    let mut c = mcpspec_testkit::HttpClient::new(server.addr, None);
    c.initialize().expect("initialize");
    for i in 0..3 {
        let r = c
            .call_tool(
                "kb_add",
                json!({"content": format!("Counted entry {i}."), "role": "dev"}),
            )
            .expect("kb_add");
        assert_eq!(r["result"]["isError"], false, "{r}");
    }
    // Three calls, and the start-up check on a thread of its own: waited for, not assumed.
    let mut metrics = String::new();
    for _ in 0..600 {
        metrics = mcpspec_testkit::get(server.addr, "/metrics")
            .expect("metrics")
            .text();
        if metrics
            .lines()
            .any(|l| l.starts_with("mcpspec_embedding_texts_total{") && l.ends_with(" 4"))
        {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let line = |name: &str| {
        metrics
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("{name} in {metrics}"))
            .to_string()
    };
    let calls = line("mcpspec_embedding_calls_total{");
    assert!(
        calls.contains("provider=\"static\"") && calls.contains("outcome=\"ok\""),
        "{calls}"
    );
    assert!(calls.ends_with(" 4"), "{calls}");
    assert!(
        line("mcpspec_embedding_texts_total{").ends_with(" 4"),
        "{metrics}"
    );
    drop(server);
}
