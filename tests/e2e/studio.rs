//! The `studio` server on its sample database: every tool, with exact expected results.

use serde_json::{Value, json};

use crate::common::{Session, count_rows, start};

fn ids(rows: &Value) -> Vec<&str> {
    rows.as_array()
        .expect("rows array")
        .iter()
        .map(|r| r["id"].as_str().expect("id"))
        .collect()
}

#[test]
fn query_learnings_filters_and_orders() {
    let mut s = start("studio", &[]);
    // (arguments, expected ids newest first)
    let cases: &[(Value, &[&str])] = &[
        (
            json!({}),
            &["L-050", "L-041", "L-023", "L-015", "L-060", "L-061"],
        ),
        // Tags match exactly: "railroad" is not "railway".
        (json!({"tags": ["railway"]}), &["L-041", "L-023"]),
        // Tags match ANY.
        (
            json!({"tags": ["railway", "pydantic"]}),
            &["L-041", "L-023", "L-015"],
        ),
        (
            json!({"tags": []}),
            &["L-050", "L-041", "L-023", "L-015", "L-060", "L-061"],
        ),
        (json!({"project_id": "proj-002"}), &["L-060"]),
        (
            json!({"project_id": "proj-001", "tags": ["fastapi"]}),
            &["L-050", "L-015"],
        ),
        // Search is a case-insensitive substring of title, problem or solution.
        (json!({"search": "PYDANTIC"}), &["L-015"]),
        (json!({"search": "health endpoint"}), &["L-041"]),
        (json!({"search": "NIXPACKS_"}), &["L-023"]),
        // LIKE wildcards in the search text are literal characters.
        (json!({"search": "%"}), &[]),
        (json!({"search": "_"}), &["L-050", "L-023", "L-015"]),
        (json!({"limit": 2}), &["L-050", "L-041"]),
        (json!({"limit": 50, "tags": ["sync"]}), &["L-060"]),
    ];
    for (args, want) in cases {
        let got = s.ok("query_learnings", args.clone());
        assert_eq!(ids(&got["learnings"]), *want, "query_learnings {args}");
    }
    s.finish();
}

#[test]
fn query_learnings_returns_full_rows_and_parsed_tags() {
    let mut s = start("studio", &[]);
    let got = s.ok("query_learnings", json!({"tags": ["railway"], "limit": 1}));
    assert_eq!(
        got,
        json!({"learnings": [{
            "id": "L-041",
            "title": "Railway health check required",
            "problem": "Deployment fails without health endpoint",
            "solution": "Add /health endpoint returning 200 OK",
            "tags": ["railway", "deployment", "health-check"],
            "project_id": "proj-001",
            "project_name": "Risk Workbench",
            "created_at": "2024-12-22T14:15:00Z"
        }], "next_cursor": got["next_cursor"]})
    );
    // One learning of two: a next page follows.
    assert!(got["next_cursor"].is_string(), "{got}");
    // A learning without a project omits the project fields rather than sending nulls.
    let got = s.ok("query_learnings", json!({"tags": ["railroad"]}));
    assert_eq!(
        got["learnings"][0],
        json!({
            "id": "L-061",
            "title": "railroad diagrams are not railway",
            "problem": "A tag substring must not match",
            "solution": "Match tags exactly",
            "tags": ["railroad"],
            "created_at": "2024-09-01T12:00:00Z"
        })
    );
    s.finish();
}

#[test]
fn query_learnings_explains_empty_results() {
    let mut s = start("studio", &[]);
    let cases = [
        (
            json!({"tags": ["kubernetes", "helm"]}),
            "No learnings found with tags: kubernetes, helm. Try list_tags to see available tags.",
        ),
        (
            json!({"search": "quantum"}),
            "No learnings found matching \"quantum\". Try fewer or different words, or list_tags.",
        ),
        (json!({"project_id": "proj-404"}), "No learnings found."),
    ];
    for (args, message) in cases {
        let got = s.ok("query_learnings", args.clone());
        assert_eq!(got, json!({"learnings": [], "message": message}), "{args}");
    }
    s.finish();
}

#[test]
fn get_learning_returns_detail_or_not_found() {
    let mut s = start("studio", &[]);
    assert_eq!(
        s.ok("get_learning", json!({"id": "L-023"})),
        json!({
            "id": "L-023",
            "title": "Railway env vars need NIXPACKS_ prefix",
            "problem": "Build-time env vars not accessible during build",
            "solution": "Prefix environment variables with NIXPACKS_ for build-time access",
            "tags": ["railway", "deployment", "env-vars"],
            "project_id": "proj-001",
            "project_name": "Risk Workbench",
            "cycle_id": "cycle-042",
            "cycle_name": "API Error Handling",
            "session_id": "sess-9",
            "created_at": "2024-12-20T10:30:00Z",
            "updated_at": "2024-12-20T10:30:00Z"
        })
    );
    assert_eq!(
        s.tool_error("get_learning", json!({"id": "L-999"})),
        json!({
            "code": "NOT_FOUND",
            "message": "No learning found with id \"L-999\". Use query_learnings to find learning ids."
        })
    );
    s.finish();
}

#[test]
fn list_tags_counts_most_used_first() {
    let mut s = start("studio", &[]);
    let t = |tag: &str, count: i64| json!({"tag": tag, "count": count});
    assert_eq!(
        s.ok("list_tags", json!({})),
        json!({"tags": [
            t("deployment", 2), t("fastapi", 2), t("railway", 2),
            t("crdt", 1), t("env-vars", 1), t("errors", 1), t("health-check", 1),
            t("pydantic", 1), t("python", 1), t("railroad", 1), t("sync", 1)
        ]})
    );
    assert_eq!(
        s.ok("list_tags", json!({"project_id": "proj-002"})),
        json!({"tags": [t("crdt", 1), t("sync", 1)]})
    );
    assert_eq!(
        s.ok("list_tags", json!({"project_id": "proj-404"})),
        json!({"tags": [], "message": "No tags found for project \"proj-404\"."})
    );
    s.finish();
}

#[test]
fn get_project_context_by_id_and_by_repo_path() {
    let mut s = start("studio", &[]);
    let risk = json!({
        "project": {
            "id": "proj-001",
            "name": "Risk Workbench",
            "description": "Risk scoring for loan applications",
            "repo_path": "/Users/jess/code/risk-workbench",
            "tech_stack": {"backend": "FastAPI", "frontend": "React", "database": "PostgreSQL", "deploy": "Railway"},
            "status": "active"
        },
        "active_cycle": {
            "id": "cycle-042",
            "name": "API Error Handling",
            "intent": "Add consistent error handling middleware to all API endpoints",
            "status": "in_progress"
        },
        "recent_learnings": [
            {"id": "L-050", "title": "FastAPI exception handlers run after middleware", "tags": ["fastapi", "errors"]},
            {"id": "L-041", "title": "Railway health check required", "tags": ["railway", "deployment", "health-check"]},
            {"id": "L-023", "title": "Railway env vars need NIXPACKS_ prefix", "tags": ["railway", "deployment", "env-vars"]},
            {"id": "L-015", "title": "Use Pydantic v2 syntax", "tags": ["python", "pydantic", "fastapi"]}
        ],
        "recent_decisions": [
            {"id": "D-008", "title": "JWT over session cookies", "decision": "Use JWT for stateless auth"},
            {"id": "D-007", "title": "FastAPI over Flask", "decision": "Use FastAPI for typed request models"}
        ]
    });
    for args in [
        json!({"project_id": "proj-001"}),
        json!({"repo_path": "/Users/jess/code/risk-workbench"}),
        // A path inside the repository finds it too.
        json!({"repo_path": "/Users/jess/code/risk-workbench/backend/app"}),
        // As does a fragment of the path, as in the source document.
        json!({"repo_path": "risk-workbench"}),
    ] {
        assert_eq!(s.ok("get_project_context", args.clone()), risk, "{args}");
    }
    // A project with no active cycle omits the field.
    assert_eq!(
        s.ok("get_project_context", json!({"project_id": "proj-002"})),
        json!({
            "project": {
                "id": "proj-002", "name": "Field Notes", "description": "Offline-first note taking app",
                "repo_path": "/Users/jess/code/field-notes",
                "tech_stack": {"frontend": "React Native", "sync": "CRDT"}, "status": "paused"
            },
            "recent_learnings": [{"id": "L-060", "title": "CRDT merges need stable ids", "tags": ["crdt", "sync"]}],
            "recent_decisions": [{"id": "D-010", "title": "CRDT sync", "decision": "Use a CRDT library rather than last-write-wins"}]
        })
    );
    assert_eq!(
        s.tool_error(
            "get_project_context",
            json!({"repo_path": "/elsewhere/other"})
        ),
        json!({"code": "NOT_FOUND", "message": "No project found for repository path \"/elsewhere/other\"."})
    );
    assert_eq!(
        s.tool_error("get_project_context", json!({"project_id": "proj-404"}))["code"],
        "NOT_FOUND"
    );
    assert_eq!(
        s.tool_error("get_project_context", json!({})),
        json!({
            "code": "INVALID_ARGUMENTS",
            "message": "invalid arguments: one of `project_id`, `repo_path` is required",
            "field": "project_id",
            "constraint": "requiredAny",
            "errors": [{"field": "project_id", "constraint": "requiredAny", "message": "one of project_id, repo_path is required"}]
        })
    );
    s.finish();
}

#[test]
fn capture_learning_and_decision_write_rows_with_generated_ids() {
    let mut s = start("studio", &[]);
    let saved = s.ok(
        "capture_learning",
        json!({
            "title": "SQLite WAL needs the -shm file",
            "problem": "Readers failed on a read-only mount",
            "solution": "Keep the directory writable or use immutable=1",
            "tags": ["sqlite", "wal"],
            "project_id": "proj-001",
            "session_id": "sess-42"
        }),
    );
    assert_eq!(saved["id"], "L-062");
    assert_eq!(saved["tags"], json!(["sqlite", "wal"]));
    assert_eq!(saved["project_id"], "proj-001");
    let full = s.ok("get_learning", json!({"id": "L-062"}));
    assert_eq!(full["session_id"], "sess-42");
    assert_eq!(full["project_name"], "Risk Workbench");
    assert_eq!(
        ids(&s.ok("query_learnings", json!({"tags": ["wal"]}))["learnings"]),
        ["L-062"]
    );
    // Ids keep counting.
    let next = s.ok(
        "capture_learning",
        json!({"title": "Second", "problem": "p p", "solution": "s s", "tags": ["wal"]}),
    );
    assert_eq!(next["id"], "L-063");
    assert!(next.get("project_id").is_none());

    // An unknown project is refused and nothing is written.
    let before = count_rows(&s.db.path, "learnings");
    assert_eq!(
        s.tool_error(
            "capture_learning",
            json!({"title": "T t", "problem": "p p", "solution": "s s", "tags": ["x"], "project_id": "proj-404"})
        ),
        json!({
            "code": "NOT_FOUND",
            "message": "Learning not saved: project \"proj-404\" does not exist. Check the id with get_project_context."
        })
    );
    assert_eq!(count_rows(&s.db.path, "learnings"), before);

    let d = s.ok(
        "capture_decision",
        json!({"project_id": "proj-002", "title": "Yjs over Automerge", "decision": "Yjs has the smaller bundle"}),
    );
    assert_eq!(
        (d["id"].as_str(), d["project_id"].as_str()),
        (Some("D-011"), Some("proj-002"))
    );
    let ctx = s.ok("get_project_context", json!({"project_id": "proj-002"}));
    assert_eq!(ctx["recent_decisions"][0]["id"], "D-011");
    assert_eq!(
        s.tool_error(
            "capture_decision",
            json!({"project_id": "nope", "title": "T t", "decision": "d d"})
        )["code"],
        "NOT_FOUND"
    );
    let db = s.finish();
    // Acknowledged writes are on disk once the server has exited.
    assert_eq!(count_rows(&db.path, "learnings"), 8);
    assert_eq!(count_rows(&db.path, "decisions"), 4);
}

#[test]
fn tags_are_validated_before_anything_is_written() {
    let mut s = start("studio", &[]);
    let base = json!({"title": "T t", "problem": "p p", "solution": "s s"});
    let with = |tags: Value| {
        let mut a = base.clone();
        a["tags"] = tags;
        a
    };
    // (tags, failing field)
    let cases = [
        (json!([]), "tags"),
        (json!(["Bad Tag"]), "tags.0"),
        (json!(["ok", "UPPER"]), "tags.1"),
        (json!(["dup", "dup"]), "tags"),
        (json!("railway"), "tags"),
        (json!([1]), "tags.0"),
    ];
    for (tags, field) in cases {
        let err = s.tool_error("capture_learning", with(tags.clone()));
        assert_eq!(err["code"], "INVALID_ARGUMENTS", "{tags}");
        assert_eq!(err["field"], field, "{tags}: {err}");
    }
    assert_eq!(count_rows(&s.db.path, "learnings"), 6);
    s.finish();
}

#[test]
fn read_only_server_refuses_writes_and_still_reads() {
    let mut s = start("studio", &["--read-only"]);
    let err = s.tool_error(
        "capture_learning",
        json!({"title": "T t", "problem": "p p", "solution": "s s", "tags": ["x"]}),
    );
    assert_eq!(err["code"], "READ_ONLY");
    assert_eq!(
        err["message"],
        "`capture_learning` changes the database, and this server is running read-only; restart it without --read-only to allow writes"
    );
    assert_eq!(
        ids(&s.ok("query_learnings", json!({"limit": 1}))["learnings"]),
        ["L-050"]
    );
    assert_eq!(count_rows(&s.db.path, "learnings"), 6);
    s.finish();
}

#[test]
fn tools_list_publishes_schemas_and_derived_annotations() {
    let s: Session = start("studio", &[]);
    s.lists_seed_tools(
        "studio",
        &[
            "query_learnings",
            "get_learning",
            "list_tags",
            "get_project_context",
            "capture_learning",
            "capture_decision",
        ],
    );
    for t in s.tools() {
        let name = t["name"].as_str().unwrap();
        let writes = name.starts_with("capture_");
        let a = &t["annotations"];
        assert_eq!(a["readOnlyHint"], json!(!writes), "{name}");
        assert_eq!(
            a["destructiveHint"],
            json!(false),
            "{name}: inserts destroy nothing"
        );
        assert_eq!(a["idempotentHint"], json!(!writes), "{name}");
        assert_eq!(a["openWorldHint"], json!(false), "{name}");
        assert!(
            t["title"].is_string() && t["description"].is_string(),
            "{name}"
        );
        assert_eq!(t["inputSchema"]["type"], "object", "{name}");
        assert_eq!(
            t["inputSchema"]["additionalProperties"],
            json!(false),
            "{name}"
        );
        assert_eq!(t["outputSchema"]["type"], "object", "{name}");
        for key in ["anyOf", "oneOf", "allOf", "not"] {
            assert!(
                t["inputSchema"].get(key).is_none(),
                "{name}: top-level {key} is not portable"
            );
        }
        for key in ["anyOf", "oneOf", "allOf", "not"] {
            assert!(
                t["inputSchema"].get(key).is_none(),
                "{name}: top-level {key} is not portable"
            );
        }
        jsonschema::meta::validate(&t["inputSchema"]).expect("input schema is valid JSON Schema");
        jsonschema::meta::validate(&t["outputSchema"]).expect("output schema is valid JSON Schema");
    }
    let limit = &s.tool("query_learnings")["inputSchema"]["properties"]["limit"];
    assert_eq!(
        limit,
        &json!({
            "type": "integer", "minimum": 1, "maximum": 50, "default": 10,
            "description": "Maximum number of results per page (default 10, max 50)."
        })
    );
    assert_eq!(
        s.tool("get_learning")["inputSchema"]["required"],
        json!(["id"])
    );
    s.finish();
}

/// A Project Studio database made by Project Studio itself, whose NOT NULL columns have no
/// defaults (only `mcpspec init` adds them): the writes still work, since they set every
/// such column themselves.
#[test]
fn writes_work_on_a_database_without_the_declared_defaults() {
    let def = server::server("studio").expect("studio");
    let db = def.database.as_ref().expect("a database");
    let strict = regex::Regex::new(r"(?i)\s+DEFAULT\s+(\([^()]*(\([^()]*\))?[^()]*\)|'[^']*')")
        .unwrap()
        .replace_all(db.schema, "")
        .into_owned();
    assert!(!strict.to_ascii_uppercase().contains("DEFAULT"), "{strict}");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("studio.db");
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(&strict).unwrap();
    conn.execute_batch(db.sample.expect("sample rows")).unwrap();
    drop(conn);
    let mut s = crate::common::start_on(crate::common::Db { _dir: dir, path }, "studio", &[]);
    let l = s.ok(
        "capture_learning",
        json!({"title": "Strict schemas need explicit timestamps", "problem": "INSERT relied on a default",
               "solution": "Set created_at in the statement", "tags": ["sqlite"], "project_id": "proj-001"}),
    );
    assert!(
        l["created_at"].as_str().is_some_and(|t| t.ends_with('Z')),
        "{l}"
    );
    let d = s.ok(
        "capture_decision",
        json!({"project_id": "proj-001", "title": "Timestamps in SQL", "decision": "Always set them"}),
    );
    assert!(d["created_at"].is_string(), "{d}");
    s.finish();
}

/// `query_learnings` as it was before the indexes: every learning checked with `instr`, newest
/// first. The indexed query must return exactly what this returns.
const PLAIN_QUERY: &str = "SELECT l.id FROM learnings l
WHERE (:project_id IS NULL OR l.project_id = :project_id)
  AND (:tags IS NULL OR json_array_length(:tags) = 0 OR EXISTS (
        SELECT 1 FROM json_each(CASE WHEN json_valid(l.tags) THEN l.tags ELSE '[]' END) t
        WHERE t.value IN (SELECT value FROM json_each(:tags))))
  AND (:search IS NULL
       OR instr(lower(l.title), lower(:search)) > 0
       OR instr(lower(l.problem), lower(:search)) > 0
       OR instr(lower(l.solution), lower(:search)) > 0)
ORDER BY l.created_at DESC, l.id DESC
LIMIT :limit";

/// A studio database as another program makes it: the declared tables only (no indexes, no
/// full-text table, no counters), with `n` learnings whose words, tags and projects repeat at
/// different rates, so that some searches match many recent rows and others a few old ones.
fn plain_studio_db(n: usize) -> crate::common::Db {
    let def = server::server("studio").expect("studio");
    let db = def.database.as_ref().expect("a database");
    studio_db_with(db.schema, n)
}

/// A Project Studio database as the application itself makes it: the columns the seed's own
/// queries read, in the application's order, with its own constraints, a column and a table
/// of its own, and nothing of mcpspec's (no index, trigger or side table).
pub(crate) const APP_DDL: &str = "
CREATE TABLE projects (id TEXT PRIMARY KEY, name TEXT NOT NULL, description TEXT, repo_path TEXT,
  tech_stack TEXT, status TEXT NOT NULL DEFAULT 'active', archived INTEGER NOT NULL DEFAULT 0,
  created_at TEXT);
CREATE TABLE cycles (id TEXT PRIMARY KEY, project_id TEXT NOT NULL REFERENCES projects(id),
  name TEXT NOT NULL, intent TEXT, status TEXT, created_at TEXT);
CREATE TABLE learnings (id TEXT PRIMARY KEY, project_id TEXT REFERENCES projects(id),
  cycle_id TEXT REFERENCES cycles(id), session_id TEXT, title TEXT NOT NULL, problem TEXT NOT NULL,
  solution TEXT NOT NULL, tags TEXT, created_at TEXT NOT NULL, updated_at TEXT NOT NULL);
CREATE TABLE decisions (id TEXT PRIMARY KEY, project_id TEXT, title TEXT NOT NULL, decision TEXT,
  created_at TEXT);
CREATE TABLE app_settings (key TEXT PRIMARY KEY, value TEXT);";

/// [`APP_DDL`] with `n` learnings: a database mcpspec did not make.
pub(crate) fn app_studio_db(n: usize) -> crate::common::Db {
    studio_db_with(APP_DDL, n)
}

/// A studio database made from `ddl` (never by `init`) with two projects and `n` learnings.
fn studio_db_with(ddl: &str, n: usize) -> crate::common::Db {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("studio.db");
    let mut conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(ddl).unwrap();
    conn.execute_batch("INSERT INTO projects (id, name) VALUES ('p1', 'One'), ('p2', 'Two');")
        .unwrap();
    let words = [
        "Timeout",
        "deadlock",
        "Stale Data",
        "WAL mode",
        "Équipe",
        "say \"hi\"",
        "50% off",
        "snake_case",
        "rare-token-zq",
    ];
    let tags = ["rust", "sqlite", "ci", "Deploy", "x"];
    let tx = conn.transaction().unwrap();
    for i in 1..=n {
        // Rare words only in the oldest learnings; common ones everywhere.
        let word = if i % 997 == 0 { words[8] } else { words[i % 8] };
        let tag_list = match i % 7 {
            0 => format!(r#"["{}","{}"]"#, tags[i % 5], tags[(i / 5) % 5]),
            1 => format!(r#"["{0}","{0}"]"#, tags[i % 5]),
            2 => "[]".into(),
            _ => format!(r#"["{}"]"#, tags[(i / 3) % 5]),
        };
        tx.execute(
            "INSERT INTO learnings (id, title, problem, solution, tags, project_id, created_at, updated_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7)",
            rusqlite::params![
                format!("L-{i:03}"),
                format!("Learning {i} about {word}"),
                format!("problem {} text", words[(i * 3) % 8]),
                if i % 11 == 0 { "ÉQUIPE upper".to_string() } else { format!("fix {}", i % 13) },
                tag_list,
                if i % 3 == 0 { "p2" } else { "p1" },
                // Not in id order: created_at repeats and runs backwards in places.
                format!("2024-{:02}-{:02}T00:00:00Z", 1 + (i * 7) % 12, 1 + (i % 28)),
            ],
        )
        .unwrap();
    }
    tx.commit().unwrap();
    crate::common::Db { _dir: dir, path }
}

/// The ids [`PLAIN_QUERY`] returns for `args` on `db`.
fn plain_ids(db: &std::path::Path, args: &Value) -> Vec<String> {
    let conn = rusqlite::Connection::open(db).unwrap();
    let text = |k: &str| args.get(k).and_then(Value::as_str).map(str::to_string);
    let tags = args.get("tags").map(Value::to_string);
    let limit = args.get("limit").and_then(Value::as_i64).unwrap_or(10);
    let mut st = conn.prepare(PLAIN_QUERY).unwrap();
    st.query_map(
        rusqlite::named_params! {":project_id": text("project_id"), ":tags": tags,
        ":search": text("search"), ":limit": limit},
        |r| r.get(0),
    )
    .unwrap()
    .collect::<Result<_, _>>()
    .unwrap()
}

#[test]
fn the_indexed_search_returns_what_the_plain_scan_returns_on_a_database_init_did_not_make() {
    let db = plain_studio_db(3000);
    let reference = db._dir.path().join("reference.db");
    std::fs::copy(&db.path, &reference).unwrap();
    let path = db.path.clone();
    // The server builds the indexes at start-up on a database that lacks them.
    let mut s = crate::common::start_on(db, "studio", &[]);
    let searches = [
        None,
        Some("Timeout"),
        Some("timeout"),
        Some("STALE data"),
        Some("rare-token-zq"),
        Some("Équipe"),
        Some("équipe"),
        Some("ÉQUIPE"),
        Some("say \"hi\""),
        Some("\""),
        Some("50%"),
        Some("%"),
        Some("_c"),
        Some("e_"),
        Some("ab"),
        Some("q"),
        Some("no such words"),
        Some("learning 29"),
        Some("fix 12"),
    ];
    let filters = [
        json!({}),
        json!({"tags": ["rust"]}),
        json!({"tags": ["Deploy", "x"]}),
        json!({"tags": ["no-such-tag"]}),
        json!({"tags": []}),
        json!({"project_id": "p2"}),
        json!({"project_id": "p1", "tags": ["ci"], "limit": 50}),
        json!({"limit": 1}),
    ];
    let compare = |s: &mut crate::common::Session| {
        let mut checked = 0;
        for search in searches {
            for filter in &filters {
                let mut args = filter.clone();
                if let Some(q) = search {
                    args["search"] = json!(q);
                }
                let got = s.ok("query_learnings", args.clone());
                let got: Vec<String> = ids(&got["learnings"])
                    .iter()
                    .map(|s| s.to_string())
                    .collect();
                assert_eq!(got, plain_ids(&reference, &args), "query_learnings {args}");
                checked += usize::from(!got.is_empty());
            }
        }
        assert!(
            checked > 60,
            "too few searches found anything to compare: {checked}"
        );
    };
    compare(&mut s);
    // Then 400 newer learnings that hold none of the words, written by another program to both
    // files: the newest 300 no longer answer a search, so the trigram index's newest matches
    // bound the answer (or, past the bound's limit, name the candidates).
    for path in [&path, &reference] {
        add_filler(path, 400);
    }
    compare(&mut s);
    s.finish();
}

/// Adds `n` learnings newer than any [`plain_studio_db`] makes, none holding its words or tags.
fn add_filler(db: &std::path::Path, n: usize) {
    let mut conn = rusqlite::Connection::open(db).unwrap();
    let tx = conn.transaction().unwrap();
    for i in 0..n {
        tx.execute(
            "INSERT INTO learnings (id, title, problem, solution, tags, project_id, created_at, updated_at)
             VALUES (?1, ?2, 'nothing', 'nothing', '[\"filler\"]', 'p1', ?3, ?3)",
            rusqlite::params![
                format!("L-F{i:03}"),
                format!("Filler {i}"),
                format!("2025-06-{:02}T00:00:00Z", 1 + i % 28),
            ],
        )
        .unwrap();
    }
    tx.commit().unwrap();
}

#[test]
fn rows_written_by_another_program_are_found_and_numbered_after() {
    let db = plain_studio_db(500);
    let path = db.path.clone();
    let mut s = crate::common::start_on(db, "studio", &[]);
    // Another program writes while the server runs: the triggers keep the indexes current.
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute(
        "INSERT INTO learnings (id, title, problem, solution, tags, created_at, updated_at)
         VALUES ('L-900', 'Zebra crossing', 'p', 's', '[\"outside\"]', '2020-01-01T00:00:00Z', '2020-01-01T00:00:00Z')",
        [],
    )
    .unwrap();
    let found = s.ok("query_learnings", json!({"search": "zebra"}));
    assert_eq!(ids(&found["learnings"]), ["L-900"]);
    let found = s.ok("query_learnings", json!({"tags": ["outside"]}));
    assert_eq!(ids(&found["learnings"]), ["L-900"]);
    conn.execute(
        "UPDATE learnings SET title = 'Horse', tags = '[\"inside\"]' WHERE id = 'L-900'",
        [],
    )
    .unwrap();
    let gone = s.ok("query_learnings", json!({"search": "zebra"}));
    assert_eq!(ids(&gone["learnings"]), Vec::<&str>::new());
    let gone = s.ok("query_learnings", json!({"tags": ["outside"]}));
    assert_eq!(ids(&gone["learnings"]), Vec::<&str>::new());
    // The next id follows the highest one, whoever wrote it.
    let l = s.ok(
        "capture_learning",
        json!({"title": "Counters follow outside writes", "problem": "ppp", "solution": "sss", "tags": ["ids"]}),
    );
    assert_eq!(l["id"], "L-901", "{l}");
    conn.execute("DELETE FROM learnings WHERE id = 'L-901'", [])
        .unwrap();
    let l = s.ok(
        "capture_learning",
        json!({"title": "Ids are not reused", "problem": "ppp", "solution": "sss", "tags": ["ids"]}),
    );
    assert_eq!(l["id"], "L-902", "{l}");
    let found = s.ok(
        "query_learnings",
        json!({"search": "not reused", "tags": ["ids"]}),
    );
    assert_eq!(ids(&found["learnings"]), ["L-902"]);
    drop(conn);
    s.finish();
}
