//! The `laminark` server: BM25 ranking checked against an independent computation, query
//! safety for every FTS5 operator and a few hundred random strings, project scoping, soft
//! delete, snippets and the envelope fields.

use std::process::{Command, Stdio};
use std::time::Duration;

use mcpspec_testkit::StdioClient;
use serde_json::{Value, json};

use crate::common::{Db, EXE, sample_db};

fn empty_db() -> Db {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("laminark.db");
    let out = Command::new(EXE)
        .args(["init", "laminark", "--db"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(out.status.success());
    Db { _dir: dir, path }
}

fn spawn(db: &Db, env: &[(&str, &str)]) -> StdioClient {
    let mut c = Command::new(EXE);
    c.args(["serve", "laminark", "--db"])
        .arg(&db.path)
        .stderr(Stdio::null());
    for (k, v) in env {
        c.env(k, v);
    }
    let mut client = StdioClient::spawn(&mut c).unwrap();
    client.initialize().unwrap();
    client
}

fn ok(c: &mut StdioClient, tool: &str, args: Value) -> Value {
    let r = c.call_tool(tool, args.clone()).unwrap();
    assert_eq!(r["result"]["isError"], json!(false), "{tool} {args}: {r}");
    r["result"]["structuredContent"].clone()
}

fn ids(v: &Value, key: &str) -> Vec<String> {
    v[key]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect()
}

/// Okapi BM25 as FTS5 computes it: k1 = 1.2, b = 0.75, IDF = ln((N - n + 0.5) / (n + 0.5))
/// with non-positive IDFs replaced by 1e-6. Documents are whitespace-separated words.
fn bm25(corpus: &[&str], doc: &str, query: &[&str]) -> f64 {
    let (k1, b) = (1.2, 0.75);
    let n_docs = corpus.len() as f64;
    let avgdl = corpus
        .iter()
        .map(|d| d.split_whitespace().count())
        .sum::<usize>() as f64
        / n_docs;
    let words: Vec<&str> = doc.split_whitespace().collect();
    let dl = words.len() as f64;
    query
        .iter()
        .map(|q| {
            let n = corpus
                .iter()
                .filter(|d| d.split_whitespace().any(|w| w == *q))
                .count() as f64;
            let mut idf = ((n_docs - n + 0.5) / (n + 0.5)).ln();
            if idf <= 0.0 {
                idf = 1e-6;
            }
            let tf = words.iter().filter(|w| *w == q).count() as f64;
            idf * tf * (k1 + 1.0) / (tf + k1 * (1.0 - b + b * dl / avgdl))
        })
        .sum()
}

#[test]
fn ranking_matches_an_independent_bm25() {
    // Words the porter stemmer leaves as they are, so tokens are the words themselves.
    let corpus = [
        "rust rust rust alpha",
        "rust alpha beta gamma delta alpha beta gamma",
        "rust cargo",
        "cargo alpha beta",
        "alpha beta gamma",
        "delta gamma beta alpha delta",
        "gamma delta",
        "beta beta",
        "alpha gamma delta beta",
        "cargo cargo delta",
    ];
    let db = empty_db();
    let mut c = spawn(&db, &[]);
    let mut id_of = Vec::new();
    for text in corpus {
        let r = ok(
            &mut c,
            "save_observation",
            json!({"text": text, "projectId": "p"}),
        );
        id_of.push(r["id"].as_str().unwrap().to_string());
    }
    for query in [
        &["rust"][..],
        &["cargo"],
        &["rust", "cargo"],
        &["delta", "gamma"],
    ] {
        let mut want: Vec<(f64, usize)> = corpus
            .iter()
            .enumerate()
            .filter(|(_, d)| query.iter().all(|q| d.split_whitespace().any(|w| w == *q)))
            .map(|(i, d)| (bm25(&corpus, d, query), i))
            .collect();
        want.sort_by(|a, b| b.0.total_cmp(&a.0).then(id_of[a.1].cmp(&id_of[b.1])));
        let got = ok(
            &mut c,
            "search",
            json!({"query": query.join(" "), "projectId": "p", "limit": 20}),
        );
        let got_rows = got["results"].as_array().unwrap();
        assert_eq!(got_rows.len(), want.len(), "{query:?}: {got}");
        for (row, (score, i)) in got_rows.iter().zip(&want) {
            assert_eq!(row["id"], id_of[*i], "{query:?}: order {got}");
            let s = row["score"].as_f64().unwrap();
            assert!(
                (s - score).abs() < 1e-9 * score.max(1.0),
                "{query:?}: score {s} vs {score}"
            );
        }
        assert_eq!(got["totalCount"], want.len());
    }
    assert!(
        c.finish(Duration::from_secs(10))
            .is_some_and(|s| s.success())
    );
}

/// A deterministic generator of awkward queries: FTS5 syntax, quotes, unicode, control words.
fn awkward_queries() -> Vec<String> {
    let mut out: Vec<String> = [
        "^",
        "*",
        "\"",
        "\"\"",
        "OR",
        "AND",
        "NOT",
        "NEAR",
        "NEAR(a b, 2)",
        "(",
        ")",
        ":",
        "-",
        "+",
        "{a b}",
        "text:rust",
        "obs*",
        "a OR b",
        "NOT rust",
        "\"unclosed",
        "rust\"",
        "'",
        "''",
        "\\",
        "%",
        "_",
        "a AND",
        "( OR )",
        "^rust",
        "rust*",
        "*rust",
        "col:",
        "::",
        "\u{0}x",
        "é",
        "中文",
        "🦀 rust",
        "a\tb",
        "a\nb",
        "rowid",
        "observations_fts",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let alphabet: Vec<char> = "abcxyz \"*^():-+{}[]'\\/~.,;ORANDNOTNEAR0123456789é中🦀"
        .chars()
        .collect();
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    for _ in 0..300 {
        let mut s = String::from("q");
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let len = 1 + (state % 24) as usize;
        for _ in 0..len {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            s.push(alphabet[(state % alphabet.len() as u64) as usize]);
        }
        out.push(s);
    }
    out
}

#[test]
fn any_user_text_is_a_valid_query() {
    let db = sample_db("laminark");
    let mut c = spawn(&db, &[]);
    for q in awkward_queries() {
        for prefix in [false, true] {
            let r = c
                .call_tool("search", json!({"query": q, "prefix": prefix}))
                .unwrap();
            let result = &r["result"];
            if result["isError"] == json!(true) {
                // Only the argument rules may refuse a query (e.g. one that is only white space).
                let text = result["content"][0]["text"].as_str().unwrap();
                assert!(text.contains("INVALID_ARGUMENTS"), "{q:?} failed: {text}");
                assert!(q.trim().is_empty(), "{q:?} refused: {text}");
            } else {
                let out = &result["structuredContent"];
                assert!(out["results"].is_array(), "{q:?}: {r}");
                assert_eq!(out["query"], json!(q), "the query is echoed as given");
            }
        }
    }
    assert!(
        c.finish(Duration::from_secs(10))
            .is_some_and(|s| s.success())
    );
}

#[test]
fn search_is_project_scoped_with_a_configured_default() {
    let db = sample_db("laminark");
    // No default project: every project.
    let mut c = spawn(&db, &[]);
    assert_eq!(
        ids(
            &ok(&mut c, "search", json!({"query": "toolchain"})),
            "results"
        ),
        ["obs_0001", "obs_0008"]
    );
    assert_eq!(
        ids(
            &ok(
                &mut c,
                "search",
                json!({"query": "toolchain", "projectId": "laminark"})
            ),
            "results"
        ),
        ["obs_0001"]
    );
    assert!(
        c.finish(Duration::from_secs(10))
            .is_some_and(|s| s.success())
    );
    // LAMINARK_PROJECT is the current project when none is given.
    let mut c = spawn(&db, &[("LAMINARK_PROJECT", "webapp")]);
    assert_eq!(
        ids(
            &ok(&mut c, "search", json!({"query": "toolchain"})),
            "results"
        ),
        ["obs_0008"]
    );
    assert_eq!(
        ids(
            &ok(
                &mut c,
                "search",
                json!({"query": "toolchain", "projectId": "laminark"})
            ),
            "results"
        ),
        ["obs_0001"]
    );
    let t = ok(&mut c, "timeline", json!({}));
    assert_eq!(ids(&t, "entries"), ["obs_0008", "obs_0007"]);
    let saved = ok(
        &mut c,
        "save_observation",
        json!({"text": "saved into the current project"}),
    );
    assert_eq!(saved["projectId"], "webapp");
    assert!(
        c.finish(Duration::from_secs(10))
            .is_some_and(|s| s.success())
    );
}

#[test]
fn soft_deleted_observations_disappear_everywhere() {
    let db = sample_db("laminark");
    let mut c = spawn(&db, &[]);
    // obs_0006 was deleted in the sample data and mentions the toolchain too.
    assert!(
        !ids(
            &ok(&mut c, "search", json!({"query": "toolchain"})),
            "results"
        )
        .contains(&"obs_0006".to_string())
    );
    let deleted = ok(&mut c, "delete_observation", json!({"id": "obs_0001"}));
    assert_eq!(deleted["id"], "obs_0001");
    assert!(
        deleted["deletedAt"]
            .as_str()
            .is_some_and(|d| d.starts_with("20"))
    );
    assert_eq!(
        ids(
            &ok(&mut c, "search", json!({"query": "toolchain"})),
            "results"
        ),
        ["obs_0008"]
    );
    assert_eq!(
        ok(
            &mut c,
            "get_observations",
            json!({"ids": ["obs_0001", "obs_0002"]})
        )["count"],
        1
    );
    assert!(
        !ids(
            &ok(&mut c, "timeline", json!({"sessionId": "sess-a"})),
            "entries"
        )
        .contains(&"obs_0001".to_string())
    );
    let again = c
        .call_tool("delete_observation", json!({"id": "obs_0001"}))
        .unwrap();
    assert_eq!(again["result"]["isError"], json!(true));
    assert!(
        again["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("NOT_FOUND")
    );
    // The row stays in the database.
    let conn = rusqlite::Connection::open(&db.path).unwrap();
    let n: i64 = conn
        .query_row(
            "SELECT count(*) FROM observations WHERE id = 'obs_0001' AND deleted_at IS NOT NULL",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(n, 1);
    assert!(
        c.finish(Duration::from_secs(10))
            .is_some_and(|s| s.success())
    );
}

#[test]
fn results_are_a_compact_index_with_envelope_fields() {
    let db = sample_db("laminark");
    let mut c = spawn(&db, &[]);
    let r = ok(&mut c, "search", json!({"query": "toolchain", "limit": 1}));
    // The envelope counts every match, not just the page.
    assert_eq!(r["totalCount"], 2);
    assert_eq!(r["results"].as_array().unwrap().len(), 1);
    assert_eq!(r["query"], "toolchain");
    let row = &r["results"][0];
    let keys: Vec<&str> = row
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys, ["createdAt", "id", "score", "snippet", "source"]);
    // A long observation's snippet is cut to 100 characters, ending in "...".
    let snippet = row["snippet"].as_str().unwrap();
    assert_eq!(snippet.chars().count(), 100, "{snippet}");
    assert!(snippet.ends_with("..."));
    assert!(row["score"].as_f64().unwrap() > 0.0);
    // The token estimate is the result's JSON length / 4, rounded up.
    let len = serde_json::to_string(&r).unwrap().len();
    let est = r["tokenEstimate"].as_u64().unwrap() as usize;
    assert!(
        est.abs_diff(len.div_ceil(4)) <= 8,
        "estimate {est} for {len} bytes"
    );
    // Short observations are shown whole.
    let r = ok(&mut c, "search", json!({"query": "commits"}));
    assert_eq!(
        r["results"][0]["snippet"],
        "User prefers small commits with messages that explain why, not what."
    );
    // Nothing found: an empty index and a friendly message.
    assert_eq!(
        ok(&mut c, "search", json!({"query": "kubernetes"})),
        json!({"results": [], "totalCount": 0, "query": "kubernetes", "tokenEstimate": 14,
               "message": "No observations found matching 'kubernetes'."})
    );
    // Prefix search on request.
    assert!(
        ok(&mut c, "search", json!({"query": "obser"}))["results"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        ids(
            &ok(&mut c, "search", json!({"query": "obser", "prefix": true})),
            "results"
        ),
        ["obs_0005"]
    );
    assert!(
        c.finish(Duration::from_secs(10))
            .is_some_and(|s| s.success())
    );
}
