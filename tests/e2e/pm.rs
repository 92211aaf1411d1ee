//! The `pm` server: Rust handlers over real git repositories and real SQLite files in temporary
//! project directories, through the built binary over stdio. Declared errors arrive as JSON-RPC
//! errors with their `data`; destructive tools need `confirm: true` and, from a client that
//! declares elicitation, the person's answer.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use mcpspec_testkit::StdioClient;
use serde_json::{Value, json};

use crate::common::{Session, start_project};

const CONFIG: &str = r#"{
  "databases_dir": ".pm/databases",
  "dumps_dir": ".pm/dumps",
  "worktrees_dir": ".pm/worktrees",
  "default_database": "app",
  "allowed_databases": ["app", "app_*", "scratch", "copy"]
}"#;

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(["-c", "user.name=e2e", "-c", "user.email=e2e@example.com"])
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A git repository with one commit, the config above, and a default database `app` with rows
/// of every SQLite type.
pub(crate) fn project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    git(root, &["init", "-q", "-b", "main"]);
    std::fs::write(root.join(".gitignore"), ".pm/\n").unwrap();
    git(root, &["add", ".gitignore"]);
    git(root, &["commit", "-q", "-m", "init"]);
    std::fs::write(root.join(".pm.json"), CONFIG).unwrap();
    std::fs::create_dir_all(root.join(".pm/databases")).unwrap();
    let conn = rusqlite::Connection::open(root.join(".pm/databases/app.db")).unwrap();
    conn.execute_batch(
        "CREATE TABLE users (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL, score REAL, avatar BLOB, note TEXT);
         CREATE INDEX users_name ON users(name);
         CREATE TABLE tags (user_id INTEGER REFERENCES users(id), tag TEXT, PRIMARY KEY (user_id, tag));
         CREATE TRIGGER users_tag AFTER INSERT ON users BEGIN INSERT INTO tags VALUES (new.id, 'new'); END;
         CREATE VIEW named AS SELECT name FROM users;
         INSERT INTO users (name, score, avatar, note) VALUES
           ('Ada', 0.1, X'00FF10', 'it''s \"quoted\"; -- not a comment'),
           ('Grace', -1e300, NULL, 'line one
line two'),
           ('Zoë 😀', 3.0, X'', NULL);
         DELETE FROM users WHERE name = 'nobody';",
    )
    .unwrap();
    dir
}

fn session() -> Session {
    start_project("pm", project(), json!({}))
}

fn root(s: &Session) -> &Path {
    &s.db.path
}

/// Every row of every table and the schema, as text, to compare two databases.
fn contents(db: &Path) -> Vec<String> {
    let conn = rusqlite::Connection::open(db).unwrap();
    let mut out: Vec<String> = conn
        .prepare("SELECT type || ' ' || name || ' ' || coalesce(sql, '') FROM sqlite_schema ORDER BY name")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let tables: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    for t in tables {
        let mut stmt = conn.prepare(&format!("SELECT * FROM \"{t}\"")).unwrap();
        let n = stmt.column_count();
        let rows = stmt
            .query_map([], |r| {
                let cells: Vec<String> = (0..n)
                    .map(|i| format!("{:?}", r.get_ref(i).unwrap()))
                    .collect();
                Ok(format!("{t}: {}", cells.join(" | ")))
            })
            .unwrap();
        out.extend(rows.map(Result::unwrap));
    }
    out
}

fn branches(dir: &Path) -> String {
    git(dir, &["branch", "--list", "--format=%(refname:short)"])
}

#[test]
fn all_fourteen_tools_are_listed_and_the_confirmed_ones_are_destructive() {
    let s = session();
    s.lists_seed_tools(
        "pm",
        &[
            "project.info",
            "project.init",
            "db.list",
            "db.dump",
            "db.import",
            "db.create",
            "db.drop",
            "db.clone",
            "db.dumps",
            "worktree.list",
            "worktree.create",
            "worktree.remove",
            "workflow.create",
            "workflow.remove",
        ],
    );
    // The three tools with a confirmation rule are destructive, and so is `db.import`, which
    // runs whatever SQL the file holds (the document asks no confirmation for it).
    for t in s.tools() {
        let destructive = t["annotations"]["destructiveHint"] == json!(true);
        let confirmed = t["inputSchema"]["properties"].get("confirm").is_some();
        assert_eq!(
            destructive,
            confirmed || t["name"] == "db.import",
            "{}",
            t["name"]
        );
    }
    assert_eq!(
        s.tool("db.list")["annotations"]["readOnlyHint"],
        json!(true)
    );
    s.finish();
}

#[test]
fn project_info_and_init() {
    let mut s = session();
    let info = s.ok("project.info", json!({}));
    assert_eq!(info["config"]["default_database"], "app");
    assert_eq!(
        (info["databases"].clone(), info["git"].clone()),
        (json!(1), json!(true))
    );
    assert_eq!(info["branch"], "main");
    let init = s.ok("project.init", json!({}));
    assert_eq!(init["created"], json!(false), "an existing config is kept");
    assert_eq!(init["config"]["default_database"], "app");

    // A project without a config: info says so, init writes a suggestion that info then reads.
    std::fs::remove_file(root(&s).join(".pm.json")).unwrap();
    let e = s.rpc_error("project.info", json!({}));
    assert_eq!(
        e,
        json!({"code": -32001, "message": "config file '.pm.json' not found; run project.init to create one",
               "data": {"code": "CONFIG_MISSING", "path": ".pm.json"}})
    );
    let init = s.ok("project.init", json!({}));
    assert_eq!(init["created"], json!(true));
    let written: Value =
        serde_json::from_str(&std::fs::read_to_string(root(&s).join(".pm.json")).unwrap()).unwrap();
    assert_eq!(written, init["config"]);
    let default = init["config"]["default_database"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        init["config"]["allowed_databases"],
        json!([default.clone(), format!("{default}_*")])
    );
    s.ok("project.info", json!({}));
    s.finish();
}

#[test]
fn an_invalid_config_is_config_invalid_with_the_reason() {
    let cases = [
        ("not json", "expected ident"),
        (r#"{"databases_dir": "d"}"#, "missing field"),
        (
            &CONFIG.replace("\"app\",", "\"app\", \"surprise\": 1,")[..],
            "",
        ),
        (
            &CONFIG.replace(
                "\"default_database\": \"app\"",
                "\"default_database\": \"1bad\"",
            )[..],
            "`default_database` is not a valid database name",
        ),
        (
            &CONFIG.replace("\".pm/dumps\"", "\"../dumps\"")[..],
            "`dumps_dir` must be a relative path inside the project",
        ),
        (
            &CONFIG.replace("\"copy\"", "\"../x\"")[..],
            "`allowed_databases` has an invalid entry `../x`",
        ),
    ];
    let mut s = session();
    for (text, reason) in cases {
        std::fs::write(root(&s).join(".pm.json"), text).unwrap();
        let e = s.rpc_error("db.list", json!({}));
        assert_eq!(e["code"], -32002, "{text}: {e}");
        assert_eq!(e["data"]["code"], "CONFIG_INVALID");
        assert_eq!(e["data"]["path"], ".pm.json");
        assert!(
            e["data"]["reason"].as_str().unwrap().contains(reason),
            "{text}: {e}"
        );
    }
    s.finish();
}

#[test]
fn databases_are_created_cloned_dumped_imported_and_dropped() {
    let mut s = session();
    let dir = root(&s).to_path_buf();
    let created = s.ok("db.create", json!({"database": "scratch"}));
    assert_eq!(
        created,
        json!({"database": "scratch", "path": ".pm/databases/scratch.db"})
    );
    let cloned = s.ok("db.clone", json!({"target": "copy"}));
    assert_eq!(cloned["source"], "app");
    assert_eq!(
        contents(&dir.join(".pm/databases/copy.db")),
        contents(&dir.join(".pm/databases/app.db"))
    );
    let list = s.ok("db.list", json!({}));
    let names: Vec<&str> = list["databases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["app", "copy", "scratch"]);
    assert_eq!(list["databases"][0]["default"], json!(true));

    // A dump re-imported into a fresh database gives the same schema and rows, including
    // blobs, reals, NULLs, quotes, newlines, emoji and the AUTOINCREMENT counter.
    let dump = s.ok("db.dump", json!({"database": "app"}));
    assert_eq!(dump["tables"], json!(["users", "tags"]));
    let path = dump["path"].as_str().unwrap();
    assert!(path.starts_with(".pm/dumps/app-") && path.ends_with(".sql"));
    let dumps = s.ok("db.dumps", json!({}));
    assert_eq!(dumps["dumps"][0]["path"], json!(path));
    let imported = s.ok(
        "db.import",
        json!({"database": "app_restored", "sql_path": path}),
    );
    assert_eq!(imported["created"], json!(true));
    assert_eq!(
        contents(&dir.join(".pm/databases/app_restored.db")),
        contents(&dir.join(".pm/databases/app.db"))
    );
    // Only some tables.
    let part = s.ok("db.dump", json!({"database": "app", "tables": ["tags"]}));
    assert_eq!(part["tables"], json!(["tags"]));
    let text = std::fs::read_to_string(dir.join(part["path"].as_str().unwrap())).unwrap();
    assert!(!text.contains("CREATE TABLE users"), "{text}");

    // A failing import changes nothing and leaves no new file.
    std::fs::write(
        dir.join("bad.sql"),
        "CREATE TABLE t (x); INSERT INTO nope VALUES (1);",
    )
    .unwrap();
    let e = s.rpc_error(
        "db.import",
        json!({"database": "app_bad", "sql_path": "bad.sql"}),
    );
    assert_eq!(e["data"]["code"], "SQL_FAILED");
    assert_eq!(e["data"]["reason"], "no such table: nope");
    assert!(!dir.join(".pm/databases/app_bad.db").exists());

    let dropped = s.ok("db.drop", json!({"database": "scratch", "confirm": true}));
    assert_eq!(dropped["database"], "scratch");
    assert!(!dir.join(".pm/databases/scratch.db").exists());
    s.finish();
}

#[test]
fn every_error_code_carries_its_data() {
    let mut s = session();
    std::fs::write(root(&s).join("ok.sql"), "SELECT 1;").unwrap();
    let cases = [
        // The document's example, exactly.
        (
            "db.create",
            json!({"database": "other_db"}),
            json!({"code": -32005, "message": "database 'other_db' is not in allowed list",
                   "data": {"code": "DB_NOT_ALLOWED", "database": "other_db"}}),
        ),
        // A schema failure of the named field is INVALID_NAME, not a generic invalid-params.
        (
            "db.create",
            json!({"database": "bad name!"}),
            json!({"code": -32003, "message": "invalid database 'bad name!'",
                   "data": {"code": "INVALID_NAME", "field": "database", "value": "bad name!"}}),
        ),
        // The handler's own naming rule gives the same error.
        (
            "db.create",
            json!({"database": "9lives"}),
            json!({"code": -32003, "message": "invalid database '9lives'",
                   "data": {"code": "INVALID_NAME", "field": "database", "value": "9lives"}}),
        ),
        (
            "worktree.create",
            json!({"branch": "bad branch"}),
            json!({"code": -32003, "message": "invalid branch 'bad branch'",
                   "data": {"code": "INVALID_NAME", "field": "branch", "value": "bad branch"}}),
        ),
        (
            "worktree.create",
            json!({"branch": "-x", "new_branch": true}),
            json!({"code": -32003, "message": "invalid branch '-x'",
                   "data": {"code": "INVALID_NAME", "field": "branch", "value": "-x"}}),
        ),
        (
            "db.drop",
            json!({"database": "app", "confirm": true}),
            json!({"code": -32006, "message": "database 'app' is the default database and cannot be dropped",
                   "data": {"code": "DB_IS_DEFAULT", "database": "app"}}),
        ),
        (
            "db.import",
            json!({"database": "app", "sql_path": "missing.sql"}),
            json!({"code": -32007, "message": "SQL file 'missing.sql' not found",
                   "data": {"code": "FILE_NOT_FOUND", "path": "missing.sql"}}),
        ),
        (
            "db.dump",
            json!({"database": "app_none"}),
            json!({"code": -32008, "message": "database 'app_none' does not exist",
                   "data": {"code": "DB_NOT_FOUND", "database": "app_none"}}),
        ),
        (
            "db.clone",
            json!({"source": "app", "target": "app"}),
            json!({"code": -32009, "message": "database 'app' already exists",
                   "data": {"code": "DB_EXISTS", "database": "app"}}),
        ),
        (
            "worktree.remove",
            json!({"branch": "nowhere", "confirm": true}),
            json!({"code": -32010, "message": "no worktree for branch 'nowhere'",
                   "data": {"code": "WORKTREE_NOT_FOUND", "branch": "nowhere"}}),
        ),
        (
            "db.dump",
            json!({"database": "app", "tables": ["users", "ghosts"]}),
            json!({"code": -32013, "message": "database 'app' has no table 'ghosts'",
                   "data": {"code": "TABLE_NOT_FOUND", "database": "app", "table": "ghosts"}}),
        ),
    ];
    for (tool, args, expected) in cases {
        let e = s.rpc_error(tool, args.clone());
        assert_eq!(e, expected, "{tool} {args}");
    }
    s.ok(
        "worktree.create",
        json!({"branch": "dup", "new_branch": true}),
    );
    let e = s.rpc_error("worktree.create", json!({"branch": "dup"}));
    assert_eq!(
        e["data"],
        json!({"code": "WORKTREE_EXISTS", "branch": "dup"})
    );
    // A missing argument is not an invalid name: it stays a tool error the model can fix.
    let e = s.tool_error("db.create", json!({}));
    assert_eq!(
        (e["code"].clone(), e["field"].clone()),
        (json!("INVALID_ARGUMENTS"), json!("database"))
    );
    let e = s.rpc_error("worktree.create", json!({"branch": "main"}));
    assert_eq!(
        e["data"]["code"], "WORKTREE_EXISTS",
        "main is checked out already"
    );
    // Git's own refusal is reported without the project's absolute path.
    let e = s.rpc_error("worktree.create", json!({"branch": "ghost"}));
    assert_eq!(
        e["data"],
        json!({"code": "GIT_FAILED", "command": "worktree add", "reason": "fatal: invalid reference: ghost"})
    );
    let text = e.to_string();
    assert!(!text.contains(&*root(&s).to_string_lossy()), "{text}");
    s.finish();
}

#[test]
fn path_traversal_is_refused_in_every_name_and_path() {
    let mut s = session();
    let dir = root(&s).to_path_buf();
    let outside = dir.parent().unwrap().join(format!(
        "{}-outside.sql",
        dir.file_name().unwrap().to_string_lossy()
    ));
    std::fs::write(&outside, "CREATE TABLE pwned (x);").unwrap();
    std::os::unix::fs::symlink(&outside, dir.join("link.sql")).unwrap();
    let outside_name = outside.file_name().unwrap().to_string_lossy().into_owned();
    let escape = format!("../{outside_name}");
    let cases: Vec<(&str, Value, &str, String)> = vec![
        (
            "db.create",
            json!({"database": "../evil"}),
            "database",
            "../evil".into(),
        ),
        (
            "db.create",
            json!({"database": "a/b"}),
            "database",
            "a/b".into(),
        ),
        (
            "db.create",
            json!({"database": "a\\b"}),
            "database",
            "a\\b".into(),
        ),
        (
            "db.create",
            json!({"database": ".."}),
            "database",
            "..".into(),
        ),
        (
            "db.dump",
            json!({"database": "../../etc/passwd"}),
            "database",
            "../../etc/passwd".into(),
        ),
        (
            "db.drop",
            json!({"database": "../app", "confirm": true}),
            "database",
            "../app".into(),
        ),
        (
            "db.clone",
            json!({"source": "../app", "target": "copy"}),
            "source",
            "../app".into(),
        ),
        (
            "db.clone",
            json!({"target": "../../copy"}),
            "target",
            "../../copy".into(),
        ),
        (
            "db.import",
            json!({"database": "app", "sql_path": escape.clone()}),
            "sql_path",
            escape.clone(),
        ),
        (
            "db.import",
            json!({"database": "app", "sql_path": outside.to_string_lossy()}),
            "sql_path",
            outside.to_string_lossy().into_owned(),
        ),
        (
            "db.import",
            json!({"database": "app", "sql_path": "sub/../../x.sql"}),
            "sql_path",
            "sub/../../x.sql".into(),
        ),
        (
            "db.import",
            json!({"database": "app", "sql_path": "link.sql"}),
            "sql_path",
            "link.sql".into(),
        ),
        (
            "db.import",
            json!({"database": "../app", "sql_path": "link.sql"}),
            "database",
            "../app".into(),
        ),
        (
            "worktree.create",
            json!({"branch": "../escape", "new_branch": true}),
            "branch",
            "../escape".into(),
        ),
        (
            "worktree.create",
            json!({"branch": "/abs", "new_branch": true}),
            "branch",
            "/abs".into(),
        ),
        (
            "worktree.create",
            json!({"branch": "a/../../b", "new_branch": true}),
            "branch",
            "a/../../b".into(),
        ),
        (
            "worktree.remove",
            json!({"branch": "../x", "confirm": true}),
            "branch",
            "../x".into(),
        ),
        (
            "workflow.create",
            json!({"branch": "..", "new_branch": true}),
            "branch",
            "..".into(),
        ),
        (
            "workflow.remove",
            json!({"branch": "../x", "confirm": true}),
            "branch",
            "../x".into(),
        ),
    ];
    let before = contents(&dir.join(".pm/databases/app.db"));
    for (tool, args, field, value) in cases {
        let e = s.rpc_error(tool, args.clone());
        assert_eq!(
            e["data"],
            json!({"code": "PATH_TRAVERSAL", "field": field, "value": value}),
            "{tool} {args}"
        );
        assert_eq!(e["code"], -32004);
    }
    assert_eq!(contents(&dir.join(".pm/databases/app.db")), before);
    assert!(!dir.parent().unwrap().join("evil.db").exists());
    assert_eq!(git(&dir, &["worktree", "list"]).lines().count(), 1);
    std::fs::remove_file(&outside).unwrap();
    s.finish();
}

#[test]
fn destructive_tools_need_confirm_true() {
    let mut s = session();
    let dir = root(&s).to_path_buf();
    s.ok("db.create", json!({"database": "scratch"}));
    s.ok(
        "workflow.create",
        json!({"branch": "feat/a", "new_branch": true}),
    );
    s.ok(
        "worktree.create",
        json!({"branch": "feat/b", "new_branch": true}),
    );
    let cases = [
        ("db.drop", json!({"database": "scratch"})),
        ("worktree.remove", json!({"branch": "feat/b"})),
        (
            "workflow.remove",
            json!({"branch": "feat/a", "drop_db": true}),
        ),
    ];
    for (tool, args) in &cases {
        for confirm in [None, Some(json!(false)), Some(json!("yes")), Some(json!(1))] {
            let mut a = args.clone();
            if let Some(c) = confirm {
                a["confirm"] = c;
            }
            let e = s.tool_error(tool, a.clone());
            assert_eq!(e["code"], "CONFIRMATION_REQUIRED", "{tool} {a}");
            assert_eq!(e["field"], "confirm");
        }
    }
    // Nothing was touched.
    assert!(dir.join(".pm/databases/scratch.db").exists());
    assert!(dir.join(".pm/databases/app_feat_a.db").exists());
    assert_eq!(git(&dir, &["worktree", "list"]).lines().count(), 3);
    for (tool, args) in cases {
        let mut a = args.clone();
        a["confirm"] = json!(true);
        s.ok(tool, a);
    }
    assert!(!dir.join(".pm/databases/scratch.db").exists());
    assert!(!dir.join(".pm/databases/app_feat_a.db").exists());
    assert_eq!(git(&dir, &["worktree", "list"]).lines().count(), 1);
    s.finish();
}

#[test]
fn worktrees_and_workflows() {
    let mut s = session();
    let dir = root(&s).to_path_buf();
    let wt = s.ok(
        "worktree.create",
        json!({"branch": "feature/x", "new_branch": true}),
    );
    assert_eq!(
        wt,
        json!({"branch": "feature/x", "path": ".pm/worktrees/feature-x"})
    );
    assert!(dir.join(".pm/worktrees/feature-x/.gitignore").exists());
    let list = s.ok("worktree.list", json!({}));
    let wts = list["worktrees"].as_array().unwrap();
    assert_eq!(wts.len(), 2);
    assert_eq!(
        (wts[0]["path"].clone(), wts[0]["main"].clone()),
        (json!("."), json!(true))
    );
    assert_eq!(wts[1]["branch"], "feature/x");
    assert_eq!(wts[1]["path"], ".pm/worktrees/feature-x");
    // An existing branch gets a worktree without `new_branch`.
    git(&dir, &["branch", "existing"]);
    s.ok("worktree.create", json!({"branch": "existing"}));
    s.ok(
        "worktree.remove",
        json!({"branch": "existing", "confirm": true}),
    );
    s.ok(
        "worktree.remove",
        json!({"branch": "feature/x", "confirm": true}),
    );
    assert!(!dir.join(".pm/worktrees/feature-x").exists());

    let wf = s.ok(
        "workflow.create",
        json!({"branch": "Fix-1", "new_branch": true}),
    );
    assert_eq!(
        wf,
        json!({"branch": "Fix-1", "worktree": ".pm/worktrees/Fix-1", "database": "app_fix_1"})
    );
    assert_eq!(
        contents(&dir.join(".pm/databases/app_fix_1.db")),
        contents(&dir.join(".pm/databases/app.db"))
    );
    let removed = s.ok(
        "workflow.remove",
        json!({"branch": "Fix-1", "confirm": true}),
    );
    assert_eq!(removed["dropped"], json!(false));
    assert!(
        dir.join(".pm/databases/app_fix_1.db").exists(),
        "kept without drop_db"
    );
    s.finish();
}

#[test]
fn a_workflow_whose_second_step_fails_leaves_nothing_behind() {
    let mut s = session();
    let dir = root(&s).to_path_buf();
    // The database the workflow would clone into already exists, so step two fails after
    // step one made the worktree and the branch.
    std::fs::copy(
        dir.join(".pm/databases/app.db"),
        dir.join(".pm/databases/app_feat_y.db"),
    )
    .unwrap();
    let branches_before = branches(&dir);
    let e = s.rpc_error(
        "workflow.create",
        json!({"branch": "feat/y", "new_branch": true}),
    );
    assert_eq!(
        e["data"],
        json!({"code": "DB_EXISTS", "database": "app_feat_y"})
    );
    assert_eq!(git(&dir, &["worktree", "list"]).lines().count(), 1);
    assert!(!dir.join(".pm/worktrees/feat-y").exists());
    assert_eq!(
        branches(&dir),
        branches_before,
        "the created branch is deleted"
    );
    // A branch that existed before is kept when the workflow is undone.
    git(&dir, &["branch", "feat/y"]);
    let e = s.rpc_error("workflow.create", json!({"branch": "feat/y"}));
    assert_eq!(e["data"]["code"], "DB_EXISTS");
    assert_eq!(git(&dir, &["worktree", "list"]).lines().count(), 1);
    assert!(branches(&dir).contains("feat/y"));
    s.finish();
}

/// A client that declares elicitation: the server asks before a confirmed destructive call.
mod elicitation {
    use super::*;

    fn session() -> Session {
        start_project("pm", project(), json!({"elicitation": {}}))
    }

    /// Calls `tool`, answers the server's `elicitation/create` with `answer`, and returns the
    /// question and the call's response.
    fn call_answering(s: &mut Session, tool: &str, args: Value, answer: Value) -> (Value, Value) {
        let id = json!("call-1");
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                         "params": {"name": tool, "arguments": args}});
        s.stdio().send_line(&msg.to_string()).unwrap();
        let request = s
            .stdio()
            .recv(Duration::from_secs(10))
            .expect("elicitation request");
        assert_eq!(request["method"], "elicitation/create", "{request}");
        let reply = json!({"jsonrpc": "2.0", "id": request["id"], "result": answer});
        s.stdio().send_line(&reply.to_string()).unwrap();
        let response = s.stdio().recv_response(&id).expect("call response");
        (request["params"].clone(), response)
    }

    #[test]
    fn decline_and_cancel_change_nothing_and_accept_drops() {
        let mut s = session();
        let dir = root(&s).to_path_buf();
        s.ok("db.create", json!({"database": "scratch"}));
        let db = dir.join(".pm/databases/scratch.db");
        for action in ["decline", "cancel"] {
            let (question, response) = call_answering(
                &mut s,
                "db.drop",
                json!({"database": "scratch", "confirm": true}),
                json!({"action": action}),
            );
            assert_eq!(
                question["message"],
                "Drop database scratch? This deletes the file."
            );
            assert_eq!(question["requestedSchema"]["type"], "object");
            assert_eq!(response["result"]["isError"], json!(true), "{response}");
            let error: Value =
                serde_json::from_str(response["result"]["content"][0]["text"].as_str().unwrap())
                    .unwrap();
            assert_eq!(error["error"]["code"], "DECLINED");
            let said = if action == "decline" {
                "declined"
            } else {
                "cancelled"
            };
            assert_eq!(error["error"]["action"], said);
            assert!(db.exists(), "{action} must leave the database");
        }
        let (_, response) = call_answering(
            &mut s,
            "db.drop",
            json!({"database": "scratch", "confirm": true}),
            json!({"action": "accept", "content": {}}),
        );
        assert_eq!(response["result"]["isError"], json!(false), "{response}");
        assert!(!db.exists());
        s.finish();
    }

    #[test]
    fn the_question_shows_what_will_be_destroyed_for_each_tool() {
        let mut s = session();
        s.ok(
            "workflow.create",
            json!({"branch": "wf", "new_branch": true}),
        );
        let (q, r) = call_answering(
            &mut s,
            "workflow.remove",
            json!({"branch": "wf", "drop_db": true, "confirm": true}),
            json!({"action": "decline"}),
        );
        assert_eq!(
            q["message"],
            "Remove the worktree of branch wf and drop its database?"
        );
        assert_eq!(r["result"]["isError"], json!(true));
        let (q, r) = call_answering(
            &mut s,
            "worktree.remove",
            json!({"branch": "wf", "confirm": true}),
            json!({"action": "accept"}),
        );
        assert_eq!(
            q["message"],
            "Remove the worktree of branch wf? Its directory is deleted."
        );
        assert_eq!(r["result"]["isError"], json!(false), "{r}");
        s.finish();
    }

    /// Protocol 2026-07-28 has no initialize: the client declares elicitation in each
    /// request's `_meta`, the server answers `input_required`, and the client retries the call
    /// with the person's answer in `inputResponses`.
    #[test]
    fn a_2026_client_is_asked_through_input_required() {
        let dir = project();
        let root = dir.path().to_path_buf();
        std::fs::copy(
            root.join(".pm/databases/app.db"),
            root.join(".pm/databases/scratch.db"),
        )
        .unwrap();
        let mut c = mcpspec_testkit::StdioClient::spawn(
            Command::new(crate::common::EXE)
                .args(["serve", "pm"])
                .current_dir(&root)
                .stderr(std::process::Stdio::null()),
        )
        .unwrap();
        let meta = |caps: Value| {
            json!({
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": caps,
                "io.modelcontextprotocol/clientInfo": {"name": "e2e", "version": "1"}
            })
        };
        let call = |c: &mut mcpspec_testkit::StdioClient, caps: Value, extra: Value| {
            let mut params = json!({"name": "db.drop", "_meta": meta(caps),
                                    "arguments": {"database": "scratch", "confirm": true}});
            for (k, v) in extra.as_object().unwrap() {
                params[k] = v.clone();
            }
            c.request("tools/call", params).unwrap()
        };
        let first = call(&mut c, json!({"elicitation": {}}), json!({}));
        let result = &first["result"];
        assert_eq!(result["resultType"], "input_required", "{first}");
        let ask = &result["inputRequests"]["confirm"];
        assert_eq!(ask["method"], "elicitation/create");
        assert_eq!(
            ask["params"]["message"],
            "Drop database scratch? This deletes the file."
        );
        // Each answer comes back with the state of the question it answers; a state is
        // good for one retry, so every retry asks anew when it is not the last.
        let mut state = result["requestState"].clone();
        assert!(state.is_string(), "{first}");
        for action in ["decline", "cancel"] {
            let r = call(
                &mut c,
                json!({"elicitation": {}}),
                json!({"inputResponses": {"confirm": {"action": action}}, "requestState": state}),
            );
            assert_eq!(r["result"]["isError"], json!(true), "{r}");
            assert!(root.join(".pm/databases/scratch.db").exists());
            let again = call(&mut c, json!({"elicitation": {}}), json!({}));
            state = again["result"]["requestState"].clone();
        }
        let r = call(
            &mut c,
            json!({"elicitation": {}}),
            json!({"inputResponses": {"confirm": {"action": "accept", "content": {}}}, "requestState": state}),
        );
        assert_eq!(r["result"]["isError"], json!(false), "{r}");
        assert!(!root.join(".pm/databases/scratch.db").exists());
        // Without the capability the argument rule stands alone.
        std::fs::copy(
            root.join(".pm/databases/app.db"),
            root.join(".pm/databases/scratch.db"),
        )
        .unwrap();
        let r = call(&mut c, json!({}), json!({}));
        assert_eq!(r["result"]["isError"], json!(false), "{r}");
        assert!(!root.join(".pm/databases/scratch.db").exists());
        assert!(
            c.finish(Duration::from_secs(10))
                .is_some_and(|s| s.success())
        );
    }

    #[test]
    fn cancelling_the_call_while_the_person_is_asked_changes_nothing() {
        let mut s = session();
        let db = root(&s).join(".pm/databases/scratch.db");
        s.ok("db.create", json!({"database": "scratch"}));
        let msg = json!({"jsonrpc": "2.0", "id": "drop-1", "method": "tools/call",
                         "params": {"name": "db.drop", "arguments": {"database": "scratch", "confirm": true}}});
        s.stdio().send_line(&msg.to_string()).unwrap();
        let request = s
            .stdio()
            .recv(Duration::from_secs(10))
            .expect("elicitation request");
        assert_eq!(request["method"], "elicitation/create");
        s.stdio()
            .notify("notifications/cancelled", json!({"requestId": "drop-1"}))
            .unwrap();
        // The server stays responsive, and an answer that arrives after the cancellation
        // does not revive the call.
        let list = s.ok("db.list", json!({}));
        assert_eq!(list["databases"].as_array().unwrap().len(), 2);
        let reply = json!({"jsonrpc": "2.0", "id": request["id"], "result": {"action": "accept"}});
        s.stdio().send_line(&reply.to_string()).unwrap();
        s.ok("db.list", json!({}));
        assert!(db.exists());
        let answered = s
            .stdio()
            .other
            .iter()
            .any(|m| m["id"] == "drop-1" && m["result"]["isError"] == json!(false));
        assert!(!answered, "{:?}", s.stdio().other);
        s.finish();
    }

    #[test]
    fn no_question_is_asked_for_a_call_that_is_refused_anyway() {
        let mut s = session();
        // `confirm: false` and invalid arguments are refused without asking the person: the
        // next message from the server is the answer to the call itself.
        let e = s.tool_error("db.drop", json!({"database": "app", "confirm": false}));
        assert_eq!(e["code"], "CONFIRMATION_REQUIRED");
        let e = s.rpc_error("db.drop", json!({"database": "bad name", "confirm": true}));
        assert_eq!(e["data"]["code"], "INVALID_NAME");
        assert!(
            s.stdio().other.is_empty(),
            "unexpected: {:?}",
            s.stdio().other
        );
        s.finish();
    }
}

#[test]
fn a_workflow_reports_progress_when_asked() {
    let mut s = session();
    let response = s
        .client
        .request(
            "tools/call",
            json!({"name": "workflow.create", "arguments": {"branch": "p", "new_branch": true},
                   "_meta": {"progressToken": "wf-1"}}),
        )
        .expect("response");
    assert_eq!(response["result"]["isError"], json!(false), "{response}");
    // The notifications arrive before the response, which the client kept aside.
    let progress: Vec<(f64, String)> = s
        .stdio()
        .other
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .map(|m| {
            assert_eq!(m["params"]["progressToken"], "wf-1");
            assert_eq!(m["params"]["total"], json!(2.0));
            (
                m["params"]["progress"].as_f64().unwrap(),
                m["params"]["message"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        progress,
        [
            (1.0, "worktree created".to_string()),
            (2.0, "database cloned".to_string())
        ]
    );
    s.finish();
}

#[test]
fn an_internal_failure_is_sanitised_and_logged_with_its_request_id() {
    let dir = project();
    let root = dir.path().to_path_buf();
    // The databases directory is a file, so creating a database fails inside the handler.
    std::fs::write(root.join("blocker"), "").unwrap();
    let config = CONFIG.replace("\".pm/databases\"", "\"blocker/sub\"");
    std::fs::write(root.join(".pm.json"), config).unwrap();
    let log = root.join("server.log");
    let mut c = mcpspec_testkit::StdioClient::spawn(
        Command::new(crate::common::EXE)
            .args(["serve", "pm"])
            .current_dir(&root)
            .stderr(std::fs::File::create(&log).unwrap()),
    )
    .unwrap();
    c.initialize().unwrap();
    let r = c
        .call_tool("db.create", json!({"database": "scratch"}))
        .unwrap();
    assert_eq!(r["result"]["isError"], json!(true), "{r}");
    let error: Value =
        serde_json::from_str(r["result"]["content"][0]["text"].as_str().unwrap()).unwrap();
    let request = error["error"]["request"].as_u64().expect("request id");
    assert_eq!(error["error"]["code"], "INTERNAL_ERROR");
    let text = r.to_string();
    assert!(
        !text.contains("blocker"),
        "no path reaches the client: {text}"
    );
    assert!(
        c.finish(Duration::from_secs(10))
            .is_some_and(|s| s.success())
    );
    let logged = std::fs::read_to_string(&log).unwrap();
    let line = logged
        .lines()
        .find(|l| l.contains("handler failed"))
        .unwrap_or_else(|| panic!("no log line: {logged}"));
    assert!(line.contains(&format!("request={request}")), "{line}");
    assert!(
        line.contains("Not a directory") || line.contains("not a directory"),
        "{line}"
    );
}

/// The failure of a resource read through a pm handler: its JSON-RPC error, with neither the
/// project's absolute path nor SQL in it.
fn read_error(s: &mut Session, uri: &str, code: i64) -> Value {
    let e = crate::content::protocol_error(s, "resources/read", json!({"uri": uri}), code);
    let root = root(s).to_string_lossy().into_owned();
    assert!(!e.to_string().contains(&root), "{uri}: {e}");
    e
}

fn read_json(s: &mut Session, uri: &str) -> Value {
    let r = crate::content::ok(s, "resources/read", json!({"uri": uri}));
    let c = &r["contents"][0];
    assert_eq!(c["uri"], uri);
    assert_eq!(c["mimeType"], "application/json");
    serde_json::from_str(c["text"].as_str().expect("text")).expect("JSON text")
}

#[test]
fn the_config_and_each_database_are_resources_read_by_handlers() {
    let mut s = session();
    let list = crate::content::ok(&mut s, "resources/list", json!({}));
    assert_eq!(list["resources"][0]["uri"], "pm://config");
    assert_eq!(list["resources"][0]["mimeType"], "application/json");
    let templates = crate::content::ok(&mut s, "resources/templates/list", json!({}));
    assert_eq!(
        templates["resourceTemplates"][0]["uriTemplate"],
        "pm://database/{name}"
    );

    let config = read_json(&mut s, "pm://config");
    assert_eq!(config, serde_json::from_str::<Value>(CONFIG).unwrap());

    // The trigger tags every inserted user; sqlite_sequence is SQLite's own and left out.
    let app = read_json(&mut s, "pm://database/app");
    assert_eq!(
        app,
        json!({
            "name": "app",
            "path": ".pm/databases/app.db",
            "bytes": app["bytes"],
            "default": true,
            "tables": [{"name": "tags", "rows": 3}, {"name": "users", "rows": 3}],
        })
    );
    assert!(app["bytes"].as_i64().unwrap() > 0, "{app}");
    s.ok("db.create", json!({"database": "scratch"}));
    let scratch = read_json(&mut s, "pm://database/scratch");
    assert_eq!(scratch["tables"], json!([]));
    assert_eq!(scratch["default"], false);
    s.finish();
}

#[test]
fn resource_reads_of_missing_things_are_not_found_and_bad_names_are_refused() {
    let mut s = session();
    for (uri, message) in [
        ("pm://database/copy", Some("database 'copy' does not exist")),
        ("pm://nothing", Some("resource not found")),
        // A template variable never spans a `/`.
        ("pm://database/app/x", Some("resource not found")),
    ] {
        let e = read_error(&mut s, uri, -32002);
        assert_eq!(e["data"], json!({"uri": uri}));
        if let Some(m) = message {
            assert_eq!(e["message"], m);
        }
    }
    // Names are refused with the declared errors the db tools use.
    for (uri, code, data) in [
        (
            "pm://database/..%2F..%2Fetc%2Fpasswd",
            -32004,
            json!({"code": "PATH_TRAVERSAL", "field": "database", "value": "../../etc/passwd"}),
        ),
        (
            "pm://database/..",
            -32004,
            json!({"code": "PATH_TRAVERSAL", "field": "database", "value": ".."}),
        ),
        (
            "pm://database/a-b",
            -32003,
            json!({"code": "INVALID_NAME", "field": "database", "value": "a-b"}),
        ),
        (
            "pm://database/other",
            -32005,
            json!({"code": "DB_NOT_ALLOWED", "database": "other"}),
        ),
    ] {
        let e = read_error(&mut s, uri, code);
        assert_eq!(e["data"], data, "{uri}");
    }
    let tool = s.rpc_error("db.dump", json!({"database": "../../etc/passwd"}));
    assert_eq!(
        tool["data"],
        json!({"code": "PATH_TRAVERSAL", "field": "database", "value": "../../etc/passwd"})
    );

    // Without a config the resource names nothing; the message says how to make one.
    std::fs::remove_file(root(&s).join(".pm.json")).unwrap();
    let e = read_error(&mut s, "pm://config", -32002);
    assert_eq!(
        e["message"],
        "config file '.pm.json' not found; run project.init to create one"
    );
    assert_eq!(e["data"], json!({"uri": "pm://config"}));
    let e = read_error(&mut s, "pm://database/app", -32001);
    assert_eq!(e["data"]["code"], "CONFIG_MISSING");
    s.finish();
}

/// What a hostile client tried against `pm`, each refused at the mechanism.
mod hostile {
    use super::*;
    use std::os::unix::fs::symlink;
    use std::process::Stdio;

    use mcpspec_testkit::StdioClient;

    /// A database outside the project, with a row nobody in the project may read.
    fn outside_db(dir: &Path) -> std::path::PathBuf {
        let path = dir.join("secret.db");
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch("CREATE TABLE secret (v TEXT); INSERT INTO secret VALUES ('top');")
            .unwrap();
        path
    }

    fn traversal(s: &mut Session, tool: &str, args: Value) {
        let e = s.rpc_error(tool, args.clone());
        assert_eq!(e["data"]["code"], "PATH_TRAVERSAL", "{tool} {args}: {e}");
        assert!(!e.to_string().contains("secret"), "{tool}: {e}");
    }

    /// Links planted after start-up, leading out of the project, are refused for every file a
    /// call reaches, and nothing outside is read, written, created or deleted.
    #[test]
    fn symbolic_links_out_of_the_project_are_path_traversal() {
        let mut s = session();
        let dir = root(&s).to_path_buf();
        let out = tempfile::tempdir().unwrap();
        let secret = outside_db(out.path());
        let before = contents(&secret);
        let dbs = dir.join(".pm/databases");
        symlink(&secret, dbs.join("app_evil.db")).unwrap();
        symlink(out.path().join("made.db"), dbs.join("app_new.db")).unwrap();
        std::fs::write(dir.join("ok.sql"), "CREATE TABLE t (a);").unwrap();

        traversal(&mut s, "db.dump", json!({"database": "app_evil"}));
        traversal(
            &mut s,
            "db.import",
            json!({"database": "app_evil", "sql_path": "ok.sql"}),
        );
        traversal(
            &mut s,
            "db.clone",
            json!({"source": "app_evil", "target": "copy"}),
        );
        traversal(
            &mut s,
            "db.drop",
            json!({"database": "app_evil", "confirm": true}),
        );
        traversal(&mut s, "db.create", json!({"database": "app_new"}));
        traversal(
            &mut s,
            "db.import",
            json!({"database": "app_new", "sql_path": "ok.sql"}),
        );
        traversal(
            &mut s,
            "db.clone",
            json!({"source": "app", "target": "app_new"}),
        );
        let read = s
            .client
            .request("resources/read", json!({"uri": "pm://database/app_evil"}))
            .unwrap();
        assert_eq!(read["error"]["data"]["code"], "PATH_TRAVERSAL", "{read}");
        let listed = s.ok("db.list", json!({}));
        let names: Vec<&str> = listed["databases"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["app"], "links leading out are not listed");
        assert_eq!(contents(&secret), before);
        assert!(secret.exists());
        assert!(!out.path().join("made.db").exists());
        assert!(
            !dir.join(".pm/dumps").exists()
                || std::fs::read_dir(dir.join(".pm/dumps")).unwrap().count() == 0
        );

        // A configured directory that is itself a link leading out.
        symlink(out.path(), dir.join(".pm/dumps")).unwrap();
        traversal(&mut s, "db.dump", json!({"database": "app"}));
        traversal(&mut s, "db.dumps", json!({}));
        std::fs::write(
            dir.join(".pm.json"),
            CONFIG.replace("\".pm/databases\"", "\".pm/outdb\""),
        )
        .unwrap();
        symlink(out.path(), dir.join(".pm/outdb")).unwrap();
        traversal(&mut s, "db.list", json!({}));
        traversal(&mut s, "db.create", json!({"database": "scratch"}));
        assert_eq!(
            std::fs::read_dir(out.path()).unwrap().count(),
            1,
            "only the secret is outside"
        );
        // A link that stays inside the project is followed as before.
        std::fs::write(dir.join(".pm.json"), CONFIG).unwrap();
        std::fs::remove_file(dir.join(".pm/dumps")).unwrap();
        std::fs::create_dir_all(dir.join("real_dumps")).unwrap();
        symlink(dir.join("real_dumps"), dir.join(".pm/dumps")).unwrap();
        let dumped = s.ok("db.dump", json!({"database": "app"}));
        assert!(dumped["path"].as_str().unwrap().starts_with(".pm/dumps/"));
        assert_eq!(
            std::fs::read_dir(dir.join("real_dumps")).unwrap().count(),
            1
        );
        s.finish();
    }

    /// An import may change its own database and nothing else: statements that open other
    /// files, load code or end the import's transaction are refused, and nothing is written.
    #[test]
    fn an_import_cannot_reach_other_files() {
        let mut s = session();
        let dir = root(&s).to_path_buf();
        let out = tempfile::tempdir().unwrap();
        let app = dir.join(".pm/databases/app.db");
        let before = contents(&app);
        let o = out.path().display();
        let cases = [
            (
                format!("ATTACH DATABASE '{o}/x.db' AS x; CREATE TABLE x.t(a);"),
                "ATTACH",
            ),
            // A file name that is an expression reaches SQLite's authorizer without a name.
            (
                format!("ATTACH (SELECT '{o}/e.db') AS e; CREATE TABLE e.t(a);"),
                "ATTACH",
            ),
            (
                format!("ATTACH '{o}' || '/c.db' AS c; CREATE TABLE c.t(a);"),
                "ATTACH",
            ),
            (
                format!("CREATE TABLE IF NOT EXISTS v(a); VACUUM INTO '{o}/v.db';"),
                "VACUUM",
            ),
            (format!("COMMIT; VACUUM INTO '{o}/w.db';"), "COMMIT"),
            (
                format!("COMMIT; ATTACH '{o}/y.db' AS y; CREATE TABLE y.t(a);"),
                "COMMIT",
            ),
            (
                "SELECT load_extension('/tmp/nothing');".to_string(),
                "load_extension",
            ),
            (
                "CREATE TABLE IF NOT EXISTS z (a); DETACH main;".to_string(),
                "DETACH",
            ),
            (
                format!("PRAGMA temp_store_directory = '{o}';"),
                "temp_store_directory",
            ),
        ];
        for (i, (sql, kind)) in cases.iter().enumerate() {
            let file = format!("evil{i}.sql");
            std::fs::write(dir.join(&file), sql).unwrap();
            for database in ["app", "scratch"] {
                let e = s.rpc_error("db.import", json!({"database": database, "sql_path": file}));
                assert_eq!(e["data"]["code"], "SQL_FAILED", "{sql}: {e}");
                let reason = e["data"]["reason"].as_str().unwrap();
                // VACUUM cannot run inside the import's transaction at all; SQLite says so.
                assert!(reason.contains(kind), "{sql}: {reason}");
                assert!(
                    kind == &"VACUUM" || reason.contains("refused"),
                    "{sql}: {reason}"
                );
                assert!(!reason.contains(&o.to_string()), "a path leaked: {reason}");
            }
        }
        assert_eq!(
            std::fs::read_dir(out.path()).unwrap().count(),
            0,
            "nothing outside"
        );
        assert_eq!(contents(&app), before, "the target is unchanged");
        assert!(!dir.join(".pm/databases/scratch.db").exists());
        // An ordinary dump still imports.
        s.ok("db.dump", json!({"database": "app"}));
        let dumps = s.ok("db.dumps", json!({}));
        let path = dumps["dumps"][0]["path"].as_str().unwrap().to_string();
        s.ok(
            "db.import",
            json!({"database": "scratch", "sql_path": path}),
        );
        assert_eq!(contents(&dir.join(".pm/databases/scratch.db")), before);
        s.finish();
    }

    /// Text with NUL bytes or bytes that are not UTF-8 survives a dump and an import.
    #[test]
    fn dumps_round_trip_every_value_sqlite_stores() {
        let mut s = session();
        let dir = root(&s).to_path_buf();
        let app = dir.join(".pm/databases/app.db");
        let conn = rusqlite::Connection::open(&app).unwrap();
        conn.execute_batch(
            "INSERT INTO users (name, note) VALUES ('nul', CAST(X'6100620063' AS TEXT));
             INSERT INTO users (name, note) VALUES (CAST(X'FF00FE' AS TEXT), CAST(X'' AS TEXT));
             INSERT INTO users (name, score) VALUES ('extremes', 1e308);
             INSERT INTO users (name, score) VALUES ('tiny', -4.9e-324);
             INSERT INTO users (id, name) VALUES (9223372036854775807, 'max');",
        )
        .unwrap();
        drop(conn);
        let dumped = s.ok("db.dump", json!({"database": "app"}));
        let path = dumped["path"].as_str().unwrap().to_string();
        s.ok("db.import", json!({"database": "copy", "sql_path": path}));
        assert_eq!(contents(&dir.join(".pm/databases/copy.db")), contents(&app));
        s.finish();
    }

    /// A pm server with elicitation and the environment given.
    fn asking(dir: &Path, env: &[(&str, &str)]) -> StdioClient {
        let mut c = StdioClient::spawn(
            Command::new(crate::common::EXE)
                .args(["serve", "pm"])
                .current_dir(dir)
                .envs(env.iter().copied())
                .env("MCPSPEC_LOG", "warn")
                .stderr(Stdio::null()),
        )
        .unwrap();
        let init = c
            .request(
                "initialize",
                json!({"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}},
                       "clientInfo": {"name": "e2e", "version": "1"}}),
            )
            .unwrap();
        assert!(init.get("result").is_some(), "{init}");
        c.notify("notifications/initialized", json!({})).unwrap();
        c
    }

    fn drop_call(id: &str, database: &str) -> String {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
               "params": {"name": "db.drop", "arguments": {"database": database, "confirm": true}}})
        .to_string()
    }

    /// Nobody answers `elicitation/create`: the call ends after the confirm timeout with an
    /// error, and nothing changes.
    #[test]
    fn an_unanswered_confirmation_times_out_and_changes_nothing() {
        let dir = project();
        let db = dir.path().join(".pm/databases/scratch.db");
        std::fs::copy(dir.path().join(".pm/databases/app.db"), &db).unwrap();
        let mut c = asking(dir.path(), &[("MCPSPEC_CONFIRM_TIMEOUT_SECS", "1")]);
        c.send_line(&drop_call("wait", "scratch")).unwrap();
        let ask = c.recv(Duration::from_secs(10)).unwrap();
        assert_eq!(ask["method"], "elicitation/create", "{ask}");
        let answer = c
            .recv_response(&json!("wait"))
            .expect("an answer without ours");
        let text: Value =
            serde_json::from_str(answer["result"]["content"][0]["text"].as_str().unwrap()).unwrap();
        assert_eq!(text["error"]["code"], "CONFIRMATION_TIMEOUT", "{answer}");
        assert_eq!(text["error"]["timeout_secs"], 1);
        assert!(db.exists());
        // A late answer changes nothing either.
        c.send_line(
            &json!({"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept"}}).to_string(),
        )
        .unwrap();
        assert!(
            c.request("ping", json!({}))
                .unwrap()
                .get("result")
                .is_some()
        );
        assert!(db.exists());
        assert!(
            c.finish(Duration::from_secs(10))
                .is_some_and(|s| s.success())
        );
    }

    /// An answer sent with the call, before the server asked (its question's id guessed),
    /// confirms nothing: the question is still asked, and the person's answer decides.
    #[test]
    fn a_confirmation_cannot_be_answered_before_it_is_asked() {
        let dir = project();
        let db = dir.path().join(".pm/databases/scratch.db");
        std::fs::copy(dir.path().join(".pm/databases/app.db"), &db).unwrap();
        let mut c = asking(dir.path(), &[]);
        let mut burst = drop_call("pre", "scratch");
        for guess in [json!(0), json!(1), json!(2), json!("0"), json!("1")] {
            burst.push('\n');
            burst.push_str(
                &json!({"jsonrpc": "2.0", "id": guess, "result": {"action": "accept"}}).to_string(),
            );
        }
        c.send_line(&burst).unwrap();
        let ask = c.recv(Duration::from_secs(10)).unwrap();
        assert_eq!(
            ask["method"], "elicitation/create",
            "the question is asked: {ask}"
        );
        assert!(db.exists(), "nothing ran before the person answered");
        c.send_line(
            &json!({"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "decline"}})
                .to_string(),
        )
        .unwrap();
        let answer = c.recv_response(&json!("pre")).unwrap();
        assert_eq!(answer["result"]["isError"], json!(true), "{answer}");
        assert!(db.exists());
        assert!(
            c.finish(Duration::from_secs(10))
                .is_some_and(|s| s.success())
        );
    }

    /// Under protocol 2026-07-28 only the `requestState` the server issued for this call, used
    /// once, confirms it: answers without it are asked again, and a forged, foreign or
    /// replayed state is refused.
    #[test]
    fn a_2026_confirmation_needs_the_state_the_server_issued() {
        let dir = project();
        let dbs = dir.path().join(".pm/databases");
        for name in ["scratch", "copy"] {
            std::fs::copy(dbs.join("app.db"), dbs.join(format!("{name}.db"))).unwrap();
        }
        let mut c = StdioClient::spawn(
            Command::new(crate::common::EXE)
                .args(["serve", "pm"])
                .current_dir(dir.path())
                .stderr(Stdio::null()),
        )
        .unwrap();
        let call = |c: &mut StdioClient, database: &str, extra: Value| {
            let mut params = json!({"name": "db.drop",
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
                    "io.modelcontextprotocol/clientInfo": {"name": "e2e", "version": "1"}
                },
                "arguments": {"database": database, "confirm": true}});
            for (k, v) in extra.as_object().unwrap() {
                params[k] = v.clone();
            }
            c.request("tools/call", params).unwrap()
        };
        let accept = json!({"confirm": {"action": "accept", "content": {}}});
        // Pre-answered, with no state: the question is asked, nothing runs.
        let r = call(&mut c, "scratch", json!({"inputResponses": accept}));
        assert_eq!(r["result"]["resultType"], "input_required", "{r}");
        assert!(dbs.join("scratch.db").exists());
        let state = r["result"]["requestState"].as_str().unwrap().to_string();
        let refused = |r: &Value| {
            assert_eq!(r["error"]["code"], -32602, "{r}");
            assert_eq!(r["error"]["data"]["field"], "requestState", "{r}");
        };
        // A state for other arguments, or tampered with, is refused.
        refused(&call(
            &mut c,
            "copy",
            json!({"inputResponses": accept, "requestState": state}),
        ));
        let mut forged = state.clone();
        forged.replace_range(forged.len() - 4.., "AAAA");
        refused(&call(
            &mut c,
            "scratch",
            json!({"inputResponses": accept, "requestState": forged}),
        ));
        refused(&call(
            &mut c,
            "scratch",
            json!({"inputResponses": accept, "requestState": "made-up"}),
        ));
        assert!(dbs.join("scratch.db").exists() && dbs.join("copy.db").exists());
        // The real one works once.
        let r = call(
            &mut c,
            "scratch",
            json!({"inputResponses": accept, "requestState": state}),
        );
        assert_eq!(r["result"]["isError"], json!(false), "{r}");
        assert!(!dbs.join("scratch.db").exists());
        std::fs::copy(dbs.join("app.db"), dbs.join("scratch.db")).unwrap();
        refused(&call(
            &mut c,
            "scratch",
            json!({"inputResponses": accept, "requestState": state}),
        ));
        assert!(dbs.join("scratch.db").exists());
        assert!(
            c.finish(Duration::from_secs(10))
                .is_some_and(|s| s.success())
        );
    }

    /// A request that reuses the id of a call in flight (here, one waiting for the person) is
    /// refused at once and never runs.
    #[test]
    fn a_request_with_the_id_of_one_in_flight_is_refused_and_never_runs() {
        let dir = project();
        let db = dir.path().join(".pm/databases/scratch.db");
        std::fs::copy(dir.path().join(".pm/databases/app.db"), &db).unwrap();
        let mut c = asking(dir.path(), &[]);
        c.send_line(&drop_call("same", "scratch")).unwrap();
        let ask = c.recv(Duration::from_secs(10)).unwrap();
        assert_eq!(ask["method"], "elicitation/create");
        let create = json!({"jsonrpc": "2.0", "id": "same", "method": "tools/call",
                            "params": {"name": "db.create", "arguments": {"database": "copy"}}});
        c.send_line(&create.to_string()).unwrap();
        let refused = c.recv(Duration::from_secs(10)).unwrap();
        assert_eq!(refused["id"], "same", "{refused}");
        assert_eq!(refused["error"]["code"], -32600, "{refused}");
        assert!(
            refused["error"]["message"]
                .as_str()
                .unwrap()
                .contains("\"same\"")
        );
        c.send_line(
            &json!({"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "decline"}})
                .to_string(),
        )
        .unwrap();
        let answer = c.recv_response(&json!("same")).unwrap();
        assert_eq!(
            answer["result"]["isError"],
            json!(true),
            "the first call's own answer: {answer}"
        );
        assert!(
            !dir.path().join(".pm/databases/copy.db").exists(),
            "the duplicate never ran"
        );
        assert!(db.exists());
        assert!(
            c.finish(Duration::from_secs(10))
                .is_some_and(|s| s.success())
        );
    }
}

/// A project whose `.pm.json` names the test cluster: its default database `{prefix}` holds
/// rows of many types, a serial counter, an index, a view and a trigger. Returns the project
/// and the prefix (database names are the cluster's, shared by the tests of this process).
/// A project whose databases are on the test cluster, managed as the README recommends: pm
/// connects as `{prefix}_owner`, a role without superuser rights that may create databases
/// and owns the default one, and imports run as `{prefix}_import`, a role with no attributes
/// that the owner is a member of.
fn pg_project() -> (tempfile::TempDir, String) {
    pg_project_as(false)
}

/// The owner role of a [`pg_project`] whose default database is `db`.
fn pg_owner(db: &str) -> String {
    format!("{db}_owner")
}

/// [`pg_project`], with pm connecting as the cluster's superuser (and `superuser_imports`)
/// when `superuser`.
fn pg_project_as(superuser: bool) -> (tempfile::TempDir, String) {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(1);
    let cluster = crate::pg::Cluster::debian();
    let prefix = format!(
        "pm{}n{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    let (owner, import) = (pg_owner(&prefix), format!("{prefix}_import"));
    let user = if superuser {
        "postgres"
    } else {
        owner.as_str()
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    git(root, &["init", "-q", "-b", "main"]);
    std::fs::write(root.join(".gitignore"), ".pm/\n").unwrap();
    git(root, &["add", ".gitignore"]);
    git(root, &["commit", "-q", "-m", "init"]);
    let mut config = json!({
        "databases_dir": ".pm/databases", "dumps_dir": ".pm/dumps", "worktrees_dir": ".pm/worktrees",
        "default_database": prefix, "allowed_databases": [prefix, format!("{prefix}_*")],
        "postgres": cluster.url_as("postgres", user),
        "import_role": import,
    });
    if superuser {
        config["superuser_imports"] = json!(true);
    }
    std::fs::write(root.join(".pm.json"), config.to_string()).unwrap();
    cluster.psql(
        "postgres",
        &format!(
            "CREATE ROLE {owner} LOGIN CREATEDB; CREATE ROLE {import} NOLOGIN; GRANT {import} TO {owner}"
        ),
    );
    cluster.psql(
        "postgres",
        &format!("CREATE DATABASE {prefix} OWNER {user}"),
    );
    cluster.psql(
        &cluster.url_as(&prefix, user),
        "CREATE TABLE users (id serial PRIMARY KEY, name text NOT NULL, score float8, avatar bytea, note text);
         CREATE INDEX users_name ON users (name);
         CREATE TABLE tags (user_id int REFERENCES users (id), tag text, PRIMARY KEY (user_id, tag));
         CREATE FUNCTION tag_new() RETURNS trigger LANGUAGE plpgsql AS $$
           BEGIN INSERT INTO tags VALUES (NEW.id, 'new'); RETURN NEW; END $$;
         CREATE TRIGGER users_tag AFTER INSERT ON users FOR EACH ROW EXECUTE FUNCTION tag_new();
         CREATE VIEW named AS SELECT name FROM users;
         INSERT INTO users (name, score, avatar, note) VALUES
           ('Ada', 0.1, '\\x00ff10', 'it''s \"quoted\"; -- not a comment'),
           ('Grace', -1e300, NULL, E'line one\nline two'),
           ('Zoë 😀', 3.0, '\\x', NULL);",
    );
    (dir, prefix)
}

/// Database `name`'s schema and rows as text, to compare two databases of the cluster.
fn pg_contents(name: &str) -> String {
    let cluster = crate::pg::Cluster::debian();
    cluster.psql(
        &cluster.url(name),
        "SELECT string_agg(x, E'\\n' ORDER BY x) FROM (
           SELECT format('%s.%s %s %s %s', table_name, column_name, data_type, is_nullable, column_default) AS x
             FROM information_schema.columns WHERE table_schema = 'public'
           UNION ALL SELECT format('index %s', indexdef) FROM pg_indexes WHERE schemaname = 'public'
           UNION ALL SELECT format('trigger %s', tgname) FROM pg_trigger WHERE NOT tgisinternal
           UNION ALL SELECT format('users %s', u::text) FROM users u
           UNION ALL SELECT format('tags %s', t::text) FROM tags t
           UNION ALL SELECT format('sequence %s %s', last_value, is_called) FROM users_id_seq
         ) all_of_it",
    )
}

#[cfg(feature = "full")]
#[test]
fn databases_on_a_postgresql_server_are_created_cloned_dumped_imported_and_dropped() {
    let (project, db) = pg_project();
    let mut s = start_project("pm", project, json!({}));
    let dir = root(&s).to_path_buf();
    let created = s.ok("db.create", json!({"database": format!("{db}_scratch")}));
    // The path of a database on a server is its URL (without a password).
    let scratch = format!("{db}_scratch");
    assert_eq!(
        created,
        json!({"database": scratch, "path": crate::pg::Cluster::debian().url_as(&scratch, &pg_owner(&db))})
    );
    let cloned = s.ok("db.clone", json!({"target": format!("{db}_copy")}));
    assert_eq!(cloned["source"], json!(db));
    assert_eq!(pg_contents(&format!("{db}_copy")), pg_contents(&db));
    let list = s.ok("db.list", json!({}));
    let names: Vec<&str> = list["databases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [db.clone(), format!("{db}_copy"), format!("{db}_scratch")]
    );
    assert_eq!(list["databases"][0]["default"], json!(true));

    pg_dumps_round_trip(&mut s, &dir, &db);
    let e = s.rpc_error("db.drop", json!({"database": db, "confirm": true}));
    assert_eq!(e["data"]["code"], "DB_IS_DEFAULT");
    let e = s.rpc_error("db.clone", json!({"target": format!("{db}_copy")}));
    assert_eq!(e["data"]["code"], "DB_EXISTS");
    s.ok(
        "db.drop",
        json!({"database": format!("{db}_scratch"), "confirm": true}),
    );
    let e = s.rpc_error(
        "db.drop",
        json!({"database": format!("{db}_scratch"), "confirm": true}),
    );
    assert_eq!(e["data"]["code"], "DB_NOT_FOUND");

    pg_workflow(&mut s, &db);
    // The database resource reads the server's tables, and the config resource hides nothing
    // but a password.
    let info = read_json(&mut s, &format!("pm://database/{db}"));
    assert_eq!(
        (&info["default"], &info["tables"]),
        (
            &json!(true),
            &json!([{"name": "users", "rows": 3}, {"name": "tags", "rows": 3}])
        )
    );
    let config = read_json(&mut s, "pm://config");
    assert_eq!(
        config["postgres"],
        json!(crate::pg::Cluster::debian().url_as("postgres", &pg_owner(&db)))
    );
    s.finish();
}

/// A dump of `db` imported into a new database gives the same schema, rows and counter; a
/// failing import leaves nothing; one that reaches beyond its database is refused.
fn pg_dumps_round_trip(s: &mut Session, dir: &Path, db: &str) {
    // A dump imported into a new database gives the same schema, rows and counter.
    let dump = s.ok("db.dump", json!({"database": db}));
    assert_eq!(dump["tables"], json!(["users", "tags"]));
    let path = dump["path"].as_str().unwrap().to_string();
    let restored = format!("{db}_restored");
    let imported = s.ok("db.import", json!({"database": restored, "sql_path": path}));
    assert_eq!(imported["created"], json!(true));
    assert_eq!(imported["tables"], json!(["users", "tags"]));
    assert_eq!(pg_contents(&restored), pg_contents(db));
    let part = s.ok("db.dump", json!({"database": db, "tables": ["tags"]}));
    assert_eq!(part["tables"], json!(["tags"]));
    let text = std::fs::read_to_string(dir.join(part["path"].as_str().unwrap())).unwrap();
    assert!(!text.contains("CREATE TABLE public.users"), "{text}");
    let e = s.rpc_error("db.dump", json!({"database": db, "tables": ["nope"]}));
    assert_eq!(e["data"]["code"], "TABLE_NOT_FOUND");

    // A failing import changes nothing and leaves no new database; one that reaches beyond its
    // database is refused before it runs.
    std::fs::write(
        dir.join("bad.sql"),
        "CREATE TABLE t (x int); INSERT INTO nope VALUES (1);",
    )
    .unwrap();
    let bad = format!("{db}_bad");
    let e = s.rpc_error("db.import", json!({"database": bad, "sql_path": "bad.sql"}));
    assert_eq!(e["data"]["code"], "SQL_FAILED");
    assert_eq!(e["data"]["reason"], "relation \"nope\" does not exist");
    std::fs::write(
        dir.join("evil.sql"),
        "COPY (SELECT 1) TO PROGRAM 'touch /tmp/pm-evil'",
    )
    .unwrap();
    let e = s.rpc_error(
        "db.import",
        json!({"database": bad, "sql_path": "evil.sql"}),
    );
    assert_eq!(
        e["data"]["reason"],
        "refused copy: an import may only change its own database"
    );
    let names = crate::pg::Cluster::debian().psql(
        "postgres",
        &format!("SELECT count(*) FROM pg_database WHERE datname = '{bad}'"),
    );
    assert_eq!(names, "0");
}

/// A workflow clones the default database `db` for its worktree and drops it when undone.
fn pg_workflow(s: &mut Session, db: &str) {
    let wf = s.ok(
        "workflow.create",
        json!({"branch": "Fix-1", "new_branch": true}),
    );
    let branch_db = format!("{db}_fix_1");
    assert_eq!(wf["database"], json!(branch_db));
    assert_eq!(pg_contents(&branch_db), pg_contents(db));
    let removed = s.ok(
        "workflow.remove",
        json!({"branch": "Fix-1", "drop_db": true, "confirm": true}),
    );
    assert_eq!(removed["dropped"], json!(true));
    let left = crate::pg::Cluster::debian().psql(
        "postgres",
        &format!("SELECT count(*) FROM pg_database WHERE datname = '{branch_db}'"),
    );
    assert_eq!(left, "0");
}

/// The calls that must fail on a database server before anything reaches it, or with the
/// server's own refusal, for a project whose default database is `db`: (tool, arguments, the
/// error's data).
fn server_error_cases(db: &str) -> Vec<(&'static str, Value, Value)> {
    let none = format!("{db}_none");
    vec![
        (
            "db.create",
            json!({"database": "other_db"}),
            json!({"code": "DB_NOT_ALLOWED", "database": "other_db"}),
        ),
        (
            "db.create",
            json!({"database": "x\"; DROP DATABASE postgres; --"}),
            json!({"code": "INVALID_NAME", "field": "database", "value": "x\"; DROP DATABASE postgres; --"}),
        ),
        (
            "db.create",
            json!({"database": "../etc"}),
            json!({"code": "PATH_TRAVERSAL", "field": "database", "value": "../etc"}),
        ),
        (
            "db.create",
            json!({"database": db}),
            json!({"code": "DB_EXISTS", "database": db}),
        ),
        (
            "db.drop",
            json!({"database": db, "confirm": true}),
            json!({"code": "DB_IS_DEFAULT", "database": db}),
        ),
        (
            "db.drop",
            json!({"database": none, "confirm": true}),
            json!({"code": "DB_NOT_FOUND", "database": none}),
        ),
        (
            "db.dump",
            json!({"database": none}),
            json!({"code": "DB_NOT_FOUND", "database": none}),
        ),
        (
            "db.clone",
            json!({"source": none, "target": format!("{db}_x")}),
            json!({"code": "DB_NOT_FOUND", "database": none}),
        ),
        (
            "db.clone",
            json!({"target": db}),
            json!({"code": "DB_EXISTS", "database": db}),
        ),
        (
            "db.import",
            json!({"database": db, "sql_path": "missing.sql"}),
            json!({"code": "FILE_NOT_FOUND", "path": "missing.sql"}),
        ),
        (
            "db.import",
            json!({"database": db, "sql_path": "../outside.sql"}),
            json!({"code": "PATH_TRAVERSAL", "field": "sql_path", "value": "../outside.sql"}),
        ),
        (
            "db.dump",
            json!({"database": db, "tables": ["users", "ghosts"]}),
            json!({"code": "TABLE_NOT_FOUND", "database": db, "table": "ghosts"}),
        ),
    ]
}

/// The database errors on a PostgreSQL server: the same codes, messages and data as on files,
/// checked before anything reaches the server; names and paths from calls never get near SQL.
#[cfg(feature = "full")]
#[test]
fn database_errors_on_a_postgresql_server_carry_their_data() {
    let (project, db) = pg_project();
    let mut s = start_project("pm", project, json!({}));
    std::fs::write(root(&s).join("ok.sql"), "SELECT 1;").unwrap();
    let cases = server_error_cases(&db);
    for (tool, args, data) in cases {
        let e = s.rpc_error(tool, args.clone());
        assert_eq!(e["data"], data, "{tool} {args}");
    }
    // Nothing was created or dropped by any of them.
    let left = crate::pg::Cluster::debian().psql(
        "postgres",
        &format!("SELECT string_agg(datname, ',' ORDER BY datname) FROM pg_database WHERE datname LIKE '{db}%' OR datname = 'other_db'"),
    );
    assert_eq!(left, db);
    s.finish();
}

/// `workflow.create` says `task: optional`: a client of protocol 2026-07-28 that declares the
/// tasks extension gets a task once the arguments are checked, and the worktree and database
/// copy are there when `tasks/get` says it completed; bad arguments are still refused in the
/// call itself.
#[test]
fn workflow_create_runs_as_a_task_for_a_client_that_takes_tasks() {
    let dir = project();
    let mut c = mcpspec_testkit::StdioClient::spawn(
        Command::new(crate::common::EXE)
            .args(["serve", "pm"])
            .current_dir(dir.path())
            .stderr(std::process::Stdio::null()),
    )
    .unwrap();
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities":
            {"extensions": {"io.modelcontextprotocol/tasks": {}}},
        "io.modelcontextprotocol/clientInfo": {"name": "e2e", "version": "1"}
    });
    let request = |c: &mut mcpspec_testkit::StdioClient, method: &str, mut params: Value| {
        params["_meta"] = meta.clone();
        c.request(method, params).unwrap()
    };
    let r = request(
        &mut c,
        "tools/call",
        json!({"name": "workflow.create", "arguments": {"branch": "..", "new_branch": true}}),
    );
    assert_eq!(r["error"]["data"]["code"], "PATH_TRAVERSAL", "{r}");
    let r = request(
        &mut c,
        "tools/call",
        json!({"name": "workflow.create", "arguments": {"branch": "feature-x", "new_branch": true}}),
    );
    assert_eq!(r["result"]["resultType"], "task", "{r}");
    let id = r["result"]["taskId"].as_str().unwrap().to_string();
    // Polling is the extension's own way to wait; at most 10 s.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let done = loop {
        let r = request(&mut c, "tasks/get", json!({"taskId": id}));
        if r["result"]["status"] != "working" {
            break r;
        }
        assert!(std::time::Instant::now() < deadline, "still working: {r}");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(done["result"]["status"], "completed", "{done}");
    assert_eq!(done["result"]["result"]["isError"], json!(false), "{done}");
    assert_eq!(
        done["result"]["result"]["structuredContent"]["database"],
        "app_feature_x"
    );
    assert!(dir.path().join(".pm/databases/app_feature_x.db").exists());
    assert!(git(dir.path(), &["worktree", "list"]).contains("feature-x"));
}

/// An import runs as the import role inside its own database, so the database refuses what
/// reaches beyond it, however the text hides it from the text guard: programs and files,
/// roles and role changes, other databases, other sessions, part of the file committed.
/// Tried as the role the README recommends and as a superuser that opted in; after every
/// file, nothing outside the target changed and the target is as it was.
#[cfg(feature = "full")]
#[test]
fn a_postgresql_import_is_confined_to_its_database() {
    for superuser in [false, true] {
        hostile_imports(superuser);
    }
}

fn hostile_imports(superuser: bool) {
    use std::os::unix::fs::PermissionsExt;
    let cluster = crate::pg::Cluster::debian();
    let (project, db) = pg_project_as(superuser);
    let owner = pg_owner(&db);
    let (other, evil) = (format!("other{db}"), format!("{db}_evil"));
    cluster.psql(
        "postgres",
        &format!("CREATE DATABASE {other} OWNER {owner}"),
    );
    let markers = tempfile::tempdir().unwrap();
    std::fs::set_permissions(markers.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let m = markers.path().join("ran").display().to_string();
    // A session of pm's own role that an import must not be able to end.
    let mut victim =
        postgres::Client::connect(&cluster.url_as("postgres", &owner), postgres::NoTls)
            .expect("a victim session");
    let outside = |cluster: &crate::pg::Cluster| {
        cluster.psql(
            "postgres",
            &format!(
                "SELECT concat_ws(' | ',
                   (SELECT string_agg(format('%s %s %s', a.grantee, a.privilege_type, a.is_grantable), ',' ORDER BY 1)
                      FROM pg_database d, aclexplode(coalesce(d.datacl, acldefault('d', d.datdba))) a
                      WHERE d.datname = '{other}'),
                   (SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = '{other}'),
                   (SELECT string_agg(setconfig::text, ',') FROM pg_db_role_setting s JOIN pg_database d ON d.oid = s.setdatabase),
                   (SELECT string_agg(rolname || rolsuper::text, ',' ORDER BY rolname) FROM pg_roles WHERE rolname LIKE '{db}%'),
                   (SELECT string_agg(r.rolname, ',') FROM pg_auth_members a JOIN pg_roles r ON r.oid = a.roleid JOIN pg_roles m ON m.oid = a.member WHERE m.rolname = '{owner}'),
                   (SELECT count(*) FROM pg_event_trigger),
                   (SELECT count(*) FROM pg_extension))"
            ),
        )
    };
    let before = (outside(cluster), pg_contents(&db));
    let files = [
        format!("DO $$BEGIN EXECUTE 'COPY (SELECT 1) TO PROGRAM ''touch {m}1'''; END$$;"),
        format!("DO $$BEGIN EXECUTE 'CO' || 'PY (SELECT 1) TO PROGRAM ''touch {m}2'''; END$$;"),
        format!("SELECT $q$'$q$; COPY (SELECT 1) TO PROGRAM 'touch {m}3'; SELECT $q$'$q$;"),
        format!("SELECT E'\\''; COPY (SELECT 1) TO PROGRAM 'touch {m}4'; SELECT '';"),
        format!("SELECT $x$'$x$; COPY (SELECT 'k') TO '{m}5';"),
        "SELECT \"pg_read_file\"('/etc/hostname');".to_string(),
        "SELECT \"lo_import\"('/etc/hostname');".to_string(),
        "SELECT lo_get(\"lo_import\"('/etc/hostname'));".to_string(),
        "SELECT query_to_xml('SELECT pg_ls_dir(''/'')', true, true, '');".to_string(),
        "CREATE FUNCTION f(cstring) RETURNS int LANGUAGE internal AS 'int4in';".to_string(),
        format!("SET LOCAL ROLE postgres; CREATE ROLE {evil} SUPERUSER;"),
        format!("SELECT set_config('role', 'postgres', true); CREATE ROLE {evil} SUPERUSER;"),
        "SET SESSION AUTHORIZATION postgres;".to_string(),
        "DO $$BEGIN PERFORM set_config('session_authorization', 'postgres', false); END$$;"
            .to_string(),
        "DO $$BEGIN RESET ROLE; END$$;".to_string(),
        format!("DO $$BEGIN CREATE ROLE {evil} SUPERUSER LOGIN; END$$;"),
        format!("DO $$BEGIN EXECUTE 'GRANT pg_execute_server_program TO {owner}'; END$$;"),
        format!("DO $$BEGIN EXECUTE 'ALTER ROLE {owner} SUPERUSER'; END$$;"),
        "DO $$BEGIN CREATE EXTENSION dblink; END$$;".to_string(),
        format!("DO $$BEGIN EXECUTE 'ALTER DATABASE {other} SET work_mem = ''1MB'''; END$$;"),
        format!("REVOKE CONNECT ON DATABASE {other} FROM PUBLIC;"),
        format!("COMMENT ON DATABASE {other} IS 'pwned';"),
        format!("GRANT ALL ON DATABASE {other} TO PUBLIC;"),
        "CREATE FUNCTION et() RETURNS event_trigger LANGUAGE plpgsql AS $$BEGIN END$$; \
         CREATE EVENT TRIGGER et ON ddl_command_start EXECUTE FUNCTION et();"
            .to_string(),
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
         WHERE pid <> pg_backend_pid() AND backend_type = 'client backend';"
            .to_string(),
        "SELECT pg_cancel_backend(pid) FROM pg_stat_activity \
         WHERE pid <> pg_backend_pid() AND backend_type = 'client backend';"
            .to_string(),
        "SELECT pg_reload_conf();".to_string(),
        "CREATE TABLE a (x int); COMMIT; SELECT 1/0;".to_string(),
        "CREATE TABLE a (x int); CREATE PROCEDURE p() LANGUAGE plpgsql AS $$BEGIN COMMIT; END$$; \
         CALL p(); SELECT 1/0;"
            .to_string(),
        "CREATE TABLE a (x int); DO $$BEGIN EXECUTE 'END'; END$$;".to_string(),
        format!("CREATE DATABASE {db}_made;"),
    ];
    let mut s = start_project("pm", project, json!({}));
    let dir = root(&s).to_path_buf();
    for (i, sql) in files.iter().enumerate() {
        let file = format!("hostile{i}.sql");
        std::fs::write(dir.join(&file), sql).unwrap();
        // The database refuses most of them; a REVOKE or GRANT of rights the role lacks is
        // only a warning there, and changes nothing either.
        let e = s.call("db.import", json!({"database": db, "sql_path": file}));
        assert!(
            e["error"]["data"]["code"] == "SQL_FAILED" || e["result"]["isError"] == json!(false),
            "{sql}: {e}"
        );
        let now = (outside(cluster), pg_contents(&db));
        assert_eq!(
            now, before,
            "superuser {superuser}: {sql} changed something: {e}"
        );
        let alive = victim.simple_query("SELECT 1");
        assert!(alive.is_ok(), "{sql} ended another session: {e}");
    }
    assert_eq!(
        std::fs::read_dir(markers.path()).unwrap().count(),
        0,
        "a program or file was written"
    );
    let made = cluster.psql(
        "postgres",
        &format!("SELECT count(*) FROM pg_database WHERE datname LIKE '{db}_made%'"),
    );
    assert_eq!(made, "0");
    // An ordinary file still imports, into the existing database's own tables too.
    std::fs::write(
        dir.join("ok.sql"),
        "CREATE TABLE notes (id serial PRIMARY KEY, body text); INSERT INTO notes (body) VALUES ('one');
         INSERT INTO users (name) VALUES ('Imported');",
    )
    .unwrap();
    let ok = s.ok("db.import", json!({"database": db, "sql_path": "ok.sql"}));
    assert_eq!(ok["tables"], json!(["users", "tags", "notes"]));
    s.finish();
}

/// Imports are refused outright when pm connects as a superuser that did not opt in, or when
/// the import role is missing or has rights of its own; each refusal says what to do.
#[cfg(feature = "full")]
#[test]
fn a_postgresql_import_needs_a_confined_role() {
    let cluster = crate::pg::Cluster::debian();
    let (project, db) = pg_project_as(true);
    let dir = project.path().to_path_buf();
    let config_path = dir.join(".pm.json");
    let config: Value =
        serde_json::from_str(&std::fs::read_to_string(&config_path).unwrap()).unwrap();
    std::fs::write(dir.join("ok.sql"), "CREATE TABLE t (x int);").unwrap();
    let import = format!("{db}_import");
    let mut s = start_project("pm", project, json!({}));
    let reason = |s: &mut Session, config: &Value| {
        std::fs::write(&config_path, config.to_string()).unwrap();
        let e = s.rpc_error("db.import", json!({"database": db, "sql_path": "ok.sql"}));
        assert_eq!(e["data"]["code"], "SQL_FAILED", "{e}");
        e["data"]["reason"].as_str().unwrap().to_string()
    };
    let mut no_opt_in = config.clone();
    no_opt_in
        .as_object_mut()
        .unwrap()
        .remove("superuser_imports");
    let r = reason(&mut s, &no_opt_in);
    assert!(
        r.contains("superuser") && r.contains("superuser_imports"),
        "{r}"
    );
    let mut missing = config.clone();
    missing["import_role"] = json!(format!("{db}_nobody"));
    let r = reason(&mut s, &missing);
    assert!(
        r.contains("does not exist") && r.contains("create role"),
        "{r}"
    );
    cluster.psql("postgres", &format!("ALTER ROLE {import} CREATEDB"));
    let r = reason(&mut s, &config);
    assert!(r.contains("no attributes"), "{r}");
    cluster.psql(
        "postgres",
        &format!("ALTER ROLE {import} NOCREATEDB; GRANT pg_read_server_files TO {import}"),
    );
    let r = reason(&mut s, &config);
    assert!(r.contains("belong to no role"), "{r}");
    assert_eq!(
        cluster.psql(
            &cluster.url(&db),
            "SELECT count(*) FROM pg_tables WHERE tablename = 't'"
        ),
        "0"
    );
    s.finish();
}

/// An import is bounded by the call's deadline: a statement that runs past it is cancelled on
/// the server (however the file sets `statement_timeout`), the call is answered by then, and
/// nothing of the file stays.
#[cfg(feature = "full")]
#[test]
fn a_postgresql_import_stops_at_the_call_deadline() {
    let cluster = crate::pg::Cluster::debian();
    let (project, db) = pg_project();
    let dir = project.path().to_path_buf();
    std::fs::write(
        dir.join("slow.sql"),
        "CREATE TABLE a (x int); SET statement_timeout = 0; SELECT pg_sleep(30);",
    )
    .unwrap();
    let mut c = StdioClient::spawn(
        Command::new(crate::common::EXE)
            .args(["serve", "pm"])
            .current_dir(&dir)
            .env("MCPSPEC_LOG", "warn")
            .env("MCPSPEC_CALL_TIMEOUT_MS", "1500")
            .stderr(Stdio::null()),
    )
    .unwrap();
    c.initialize().unwrap();
    let started = std::time::Instant::now();
    let r = c
        .call_tool("db.import", json!({"database": db, "sql_path": "slow.sql"}))
        .unwrap();
    let took = started.elapsed();
    assert!(
        r.get("error").is_some() || r["result"]["isError"] == json!(true),
        "{r}"
    );
    assert!(
        took < std::time::Duration::from_secs(10),
        "answered after {took:?}"
    );
    let sleeping = cluster.psql(
        "postgres",
        "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%pg_sleep(30)%' AND pid <> pg_backend_pid()",
    );
    assert_eq!(sleeping, "0", "the statement still runs on the server");
    assert_eq!(
        cluster.psql(
            &cluster.url(&db),
            "SELECT count(*) FROM pg_tables WHERE tablename = 'a'"
        ),
        "0"
    );
    assert!(
        c.finish(Duration::from_secs(10))
            .is_some_and(|s| s.success())
    );
}

/// Nine imports that would never end hold up nothing: `project.info`, `db.list` and
/// `worktree.list` are answered while they run, each import is answered `TIMEOUT` by its
/// deadline (3 s) while two other threads keep both cores busy, and its statement stops there
/// (the server is idle afterwards).
#[test]
fn endless_imports_are_stopped_at_their_deadline_and_hold_up_no_other_tool() {
    let dir = project();
    std::fs::write(
        dir.path().join("endless.sql"),
        "CREATE TABLE t (x); WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) \
         INSERT INTO t SELECT x FROM c;",
    )
    .unwrap();
    let mut c = StdioClient::spawn(
        Command::new(crate::common::EXE)
            .args(["serve", "pm"])
            .current_dir(dir.path())
            .env("MCPSPEC_LOG", "warn")
            .env("MCPSPEC_CALL_TIMEOUT_MS", "3000")
            .stderr(Stdio::null()),
    )
    .unwrap();
    c.initialize().unwrap();
    // Load: two threads spinning for as long as the imports run.
    let busy = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let spinners: Vec<_> = (0..2)
        .map(|_| {
            let busy = busy.clone();
            std::thread::spawn(move || {
                while busy.load(std::sync::atomic::Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            })
        })
        .collect();
    let sent = std::time::Instant::now();
    for i in 0..9 {
        let call = json!({"jsonrpc": "2.0", "id": format!("import-{i}"), "method": "tools/call",
            "params": {"name": "db.import", "arguments": {"database": format!("app_{i}"), "sql_path": "endless.sql"}}});
        c.send_line(&call.to_string()).unwrap();
    }
    for tool in ["project.info", "db.list", "worktree.list"] {
        let r = c.call_tool(tool, json!({})).unwrap();
        assert_eq!(r["result"]["isError"], json!(false), "{tool}: {r}");
    }
    let early: Vec<&Value> = c.other.iter().filter(|m| m.get("id").is_some()).collect();
    assert!(
        early.is_empty(),
        "an import ended before the quick calls: {early:?}"
    );
    for i in 0..9 {
        let r = c.recv_response(&json!(format!("import-{i}"))).unwrap();
        let text = r["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default();
        assert_eq!(r["result"]["isError"], json!(true), "{r}");
        assert!(text.contains("\"TIMEOUT\""), "import {i}: {r}");
    }
    // Answered by the deadline, give or take the busy machine: not seconds after it.
    let took = sent.elapsed();
    busy.store(false, std::sync::atomic::Ordering::Relaxed);
    spinners
        .into_iter()
        .for_each(|t| t.join().expect("a spinner"));
    assert!(took < Duration::from_secs(5), "answered after {took:?}");
    // Every import's statement stopped: the server is idle now.
    let ticks = || -> u64 {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", c.pid())).unwrap();
        let f: Vec<&str> = stat
            .rsplit(')')
            .next()
            .unwrap()
            .split_whitespace()
            .collect();
        f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
    };
    let before = ticks();
    std::thread::sleep(Duration::from_secs(1));
    assert!(ticks() - before < 30, "the imports still run");
    assert!(
        !dir.path().join(".pm/databases/app_0.db").exists(),
        "a failed import leaves no file"
    );
    assert!(
        c.finish(Duration::from_secs(10))
            .is_some_and(|s| s.success())
    );
}

/// A project whose `.pm.json` names the test MariaDB server (`"mysql"`): pm connects as
/// `{prefix}_pm`, an account with every right on the project's databases (`{prefix}%`), the
/// grant option there and the right to make accounts (for the account each import runs as),
/// and nothing else. Its default database `{prefix}` holds rows of many types, an
/// auto-increment counter, an index, a foreign key, a view and a trigger. Returns the project
/// and the prefix.
fn maria_project() -> (tempfile::TempDir, String) {
    maria_project_on(crate::maria::Server::shared(), "%")
}

/// [`maria_project`] on `server`, with pm's own account made for `host`.
fn maria_project_on(server: &crate::maria::Server, host: &str) -> (tempfile::TempDir, String) {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(1);
    let prefix = format!(
        "pm{}m{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    git(root, &["init", "-q", "-b", "main"]);
    std::fs::write(root.join(".gitignore"), ".pm/\n").unwrap();
    git(root, &["add", ".gitignore"]);
    git(root, &["commit", "-q", "-m", "init"]);
    let config = json!({
        "databases_dir": ".pm/databases", "dumps_dir": ".pm/dumps", "worktrees_dir": ".pm/worktrees",
        "default_database": prefix, "allowed_databases": [prefix, format!("{prefix}_*")],
        "mysql": maria_url_on(server, &prefix, &prefix),
    });
    std::fs::write(root.join(".pm.json"), config.to_string()).unwrap();
    server.sql(
        "mysql",
        &format!(
            "CREATE USER {prefix}_pm@'{host}' IDENTIFIED BY 'pm-secret';
             GRANT ALL ON `{prefix}%`.* TO {prefix}_pm@'{host}' WITH GRANT OPTION;
             GRANT CREATE USER ON *.* TO {prefix}_pm@'{host}';
             CREATE DATABASE {prefix}"
        ),
    );
    server.sql(
        &prefix,
        "CREATE TABLE users (id INT AUTO_INCREMENT PRIMARY KEY, name VARCHAR(100) NOT NULL,
                             score DOUBLE, avatar BLOB, note TEXT, KEY users_name (name))
           DEFAULT CHARSET = utf8mb4;
         CREATE TABLE tags (user_id INT, tag VARCHAR(20), PRIMARY KEY (user_id, tag),
                            FOREIGN KEY (user_id) REFERENCES users (id));
         CREATE TRIGGER users_tag AFTER INSERT ON users FOR EACH ROW INSERT INTO tags VALUES (NEW.id, 'new');
         CREATE VIEW named AS SELECT name FROM users;
         INSERT INTO users (name, score, avatar, note) VALUES
           ('Ada', 0.1, 0x00ff10, 'it''s \"quoted\"; -- not a comment'),
           ('Grace', -1e300, NULL, 'line one\\nline two'),
           ('Zoë 😀', 3.0, '', NULL);",
    );
    (dir, prefix)
}

/// The URL pm connects with: the test server's socket, as `{prefix}_pm`, database `db`.
fn maria_url(prefix: &str, db: &str) -> String {
    maria_url_on(crate::maria::Server::shared(), prefix, db)
}

/// [`maria_url`] on `server`.
fn maria_url_on(server: &crate::maria::Server, prefix: &str, db: &str) -> String {
    let socket = server.socket();
    format!(
        "mysql://{prefix}_pm:pm-secret@localhost/{db}?socket={}",
        socket.display()
    )
}

/// Database `name`'s schema and rows as text, to compare two databases of the server.
fn maria_contents(name: &str) -> String {
    crate::maria::Server::shared().sql(
        name,
        "SELECT GROUP_CONCAT(x ORDER BY x SEPARATOR '\\n') FROM (
           SELECT CONCAT_WS(' ', table_name, column_name, column_type, is_nullable, column_default, extra) AS x
             FROM information_schema.columns WHERE table_schema = DATABASE()
           UNION ALL SELECT CONCAT_WS(' ', 'index', table_name, index_name, column_name)
             FROM information_schema.statistics WHERE table_schema = DATABASE()
           UNION ALL SELECT CONCAT_WS(' ', 'fk', constraint_name, referenced_table_name)
             FROM information_schema.referential_constraints WHERE constraint_schema = DATABASE()
           UNION ALL SELECT CONCAT_WS(' ', 'trigger', trigger_name, action_statement)
             FROM information_schema.triggers WHERE trigger_schema = DATABASE()
           UNION ALL SELECT CONCAT_WS(' ', 'view', table_name) FROM information_schema.views
             WHERE table_schema = DATABASE()
           UNION ALL SELECT CONCAT_WS(' ', 'users', id, name, score, HEX(avatar), note) FROM users
           UNION ALL SELECT CONCAT_WS(' ', 'tags', user_id, tag) FROM tags
           UNION ALL SELECT CONCAT('next id ', auto_increment) FROM information_schema.tables
             WHERE table_schema = DATABASE() AND table_name = 'users'
         ) all_of_it",
    )
}

/// How many databases named `name` the test server has.
/// The import accounts that can still reach database `name`: each import's account is granted
/// that database alone (as `GRANT ... ON name.*`, its `_` escaped) and is dropped with its
/// grants when the import ends. Counted by database, not by the accounts' common prefix, since
/// other tests' imports run at the same time on the shared server.
fn import_accounts_of(name: &str) -> String {
    crate::maria::Server::shared().sql(
        "mysql",
        &format!(
            "SELECT COUNT(*) FROM mysql.db WHERE user LIKE 'pm\\_import\\_%' \
             AND REPLACE(db, '\\\\_', '_') = '{name}'"
        ),
    )
}

fn maria_databases_named(name: &str) -> String {
    crate::maria::Server::shared().sql(
        "mysql",
        &format!("SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name = '{name}'"),
    )
}

#[cfg(feature = "full")]
#[test]
fn databases_on_a_mariadb_server_are_created_cloned_dumped_imported_and_dropped() {
    let (project, db) = maria_project();
    let mut s = start_project("pm", project, json!({}));
    let dir = root(&s).to_path_buf();
    let scratch = format!("{db}_scratch");
    let created = s.ok("db.create", json!({"database": scratch}));
    // The path of a database on a server is its URL, without the password.
    let shown = maria_url(&db, &scratch).replace("pm-secret", "***");
    assert_eq!(created, json!({"database": scratch, "path": shown}));
    let cloned = s.ok("db.clone", json!({"target": format!("{db}_copy")}));
    assert_eq!(cloned["source"], json!(db));
    assert_eq!(maria_contents(&format!("{db}_copy")), maria_contents(&db));
    let list = s.ok("db.list", json!({}));
    let names: Vec<&str> = list["databases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [db.clone(), format!("{db}_copy"), format!("{db}_scratch")]
    );
    assert_eq!(list["databases"][0]["default"], json!(true));

    // A dump imported into a new database gives the same schema, rows and counter.
    let dump = s.ok("db.dump", json!({"database": db}));
    // By name on MariaDB, whose tables keep no creation order finer than a second.
    assert_eq!(dump["tables"], json!(["tags", "users"]));
    let text = std::fs::read_to_string(dir.join(dump["path"].as_str().unwrap())).unwrap();
    assert!(!text.contains("DEFINER="), "{text}");
    let restored = format!("{db}_restored");
    let imported = s.ok(
        "db.import",
        json!({"database": restored, "sql_path": dump["path"]}),
    );
    assert_eq!(imported["created"], json!(true));
    assert_eq!(maria_contents(&restored), maria_contents(&db));
    let part = s.ok("db.dump", json!({"database": db, "tables": ["tags"]}));
    assert_eq!(part["tables"], json!(["tags"]));
    let text = std::fs::read_to_string(dir.join(part["path"].as_str().unwrap())).unwrap();
    assert!(!text.contains("CREATE TABLE `users`"), "{text}");
    let e = s.rpc_error("db.dump", json!({"database": db, "tables": ["nope"]}));
    assert_eq!(e["data"]["code"], "TABLE_NOT_FOUND");

    // A failing import leaves no new database behind.
    std::fs::write(
        dir.join("bad.sql"),
        "CREATE TABLE t (x int); INSERT INTO nope VALUES (1);",
    )
    .unwrap();
    let bad = format!("{db}_bad");
    let e = s.rpc_error("db.import", json!({"database": bad, "sql_path": "bad.sql"}));
    assert_eq!(e["data"]["code"], "SQL_FAILED");
    assert!(
        e["data"]["reason"]
            .as_str()
            .unwrap()
            .contains("nope' doesn't exist"),
        "{e}"
    );
    assert_eq!(maria_databases_named(&bad), "0");

    let e = s.rpc_error("db.drop", json!({"database": db, "confirm": true}));
    assert_eq!(e["data"]["code"], "DB_IS_DEFAULT");
    let e = s.rpc_error("db.clone", json!({"target": format!("{db}_copy")}));
    assert_eq!(e["data"]["code"], "DB_EXISTS");
    s.ok("db.drop", json!({"database": scratch, "confirm": true}));
    let e = s.rpc_error("db.drop", json!({"database": scratch, "confirm": true}));
    assert_eq!(e["data"]["code"], "DB_NOT_FOUND");

    // A workflow clones the default database for its worktree and drops it when undone.
    let wf = s.ok(
        "workflow.create",
        json!({"branch": "Fix-1", "new_branch": true}),
    );
    let branch_db = format!("{db}_fix_1");
    assert_eq!(wf["database"], json!(branch_db));
    assert_eq!(maria_contents(&branch_db), maria_contents(&db));
    let removed = s.ok(
        "workflow.remove",
        json!({"branch": "Fix-1", "drop_db": true, "confirm": true}),
    );
    assert_eq!(removed["dropped"], json!(true));
    assert_eq!(maria_databases_named(&branch_db), "0");

    // The resources read the server's tables, and the config hides nothing but a password.
    let info = read_json(&mut s, &format!("pm://database/{db}"));
    assert_eq!(
        (&info["default"], &info["tables"]),
        (
            &json!(true),
            &json!([{"name": "tags", "rows": 3}, {"name": "users", "rows": 3}])
        )
    );
    let config = read_json(&mut s, "pm://config");
    assert_eq!(
        config["mysql"],
        json!(maria_url(&db, &db).replace("pm-secret", "***"))
    );
    s.finish();
}

/// An import runs as an account with rights on its own database only, made for the call and
/// dropped after it: what the text guard lets through is still kept in the database, and the
/// guard refuses the plainly hostile before anything runs.
#[cfg(feature = "full")]
#[test]
fn a_mariadb_import_is_confined_to_its_database() {
    let (project, db) = maria_project();
    let server = crate::maria::Server::shared();
    // Another project's database on the same server, and the server's own tables.
    let other = format!("{db}_other");
    server.sql(
        "mysql",
        &format!("CREATE DATABASE {other}; CREATE TABLE {other}.secret (x TEXT); INSERT INTO {other}.secret VALUES ('s3cret')"),
    );
    // A database-level grant reads `_` as any one character: `{db}Xtarget` is what a grant
    // of `{db}_target` written as a pattern would also reach.
    let neighbour = format!("{db}Xtarget");
    server.sql(
        "mysql",
        &format!("CREATE DATABASE {neighbour}; CREATE TABLE {neighbour}.secret (x TEXT); INSERT INTO {neighbour}.secret VALUES ('s3cret')"),
    );
    let mut s = start_project("pm", project, json!({}));
    let dir = root(&s).to_path_buf();
    let target = format!("{db}_target");
    // (file, what the reason says, in lowercase as pm gives every reason)
    let cases = [
        (format!("CREATE TABLE t (x int); INSERT INTO {neighbour}.secret VALUES ('planted')"), "denied"),
        (format!("CREATE TABLE t (x int); UPDATE {neighbour}.secret SET x = 'changed'"), "denied"),
        (format!("CREATE TABLE {neighbour}.planted (x int)"), "denied"),
        (format!("CREATE TABLE {other}.planted (x int)"), "denied"),
        (format!("INSERT INTO {other}.secret VALUES ('planted')"), "denied"),
        (format!("CREATE TABLE stolen AS SELECT * FROM {other}.secret"), "denied"),
        ("CREATE TABLE stolen AS SELECT user, password FROM mysql.user".to_string(), "denied"),
        ("CREATE TABLE t (x int); ALTER TABLE t ENGINE = CONNECT TABLE_TYPE = DOS FILE_NAME = '/etc/passwd'".to_string(), ""),
        ("LOAD DATA INFILE '/etc/passwd' INTO TABLE t".to_string(), "refused load data"),
        ("SELECT 'x' INTO OUTFILE '/tmp/pm-evil'".to_string(), "refused into outfile"),
        ("CREATE TABLE f AS SELECT LOAD_FILE('/etc/passwd') AS x".to_string(), "refused load_file"),
        ("SET GLOBAL max_connections = 1".to_string(), "refused set global"),
        (format!("GRANT ALL ON *.* TO {db}_pm@'%'"), "refused grant"),
        ("CREATE USER evil IDENTIFIED BY 'x'".to_string(), "refused an account statement"),
        ("INSTALL PLUGIN connect SONAME 'ha_connect'".to_string(), "refused install plugin"),
        ("/*!50000 LOAD DATA INFILE '/etc/passwd' INTO TABLE t */".to_string(), "refused load data"),
        ("\\! touch /tmp/pm-evil".to_string(), "refused a client command"),
        ("source /etc/passwd".to_string(), "refused a client command"),
        (format!("DROP DATABASE {other}"), "refused a database statement"),
        (format!("USE {other}"), "refused use"),
    ];
    for (sql, says) in &cases {
        std::fs::write(dir.join("evil.sql"), sql).unwrap();
        let e = s.rpc_error(
            "db.import",
            json!({"database": target, "sql_path": "evil.sql"}),
        );
        assert_eq!(e["data"]["code"], "SQL_FAILED", "{sql}: {e}");
        let reason = e["data"]["reason"].as_str().unwrap();
        assert!(reason.contains(says), "{sql}: {reason}");
        assert!(!reason.contains("pm-secret"), "{sql}: {reason}");
        assert_eq!(maria_databases_named(&target), "0", "{sql}");
    }
    assert_eq!(
        server.sql(&other, "SELECT GROUP_CONCAT(x) FROM secret"),
        "s3cret"
    );
    assert_eq!(
        server.sql(&neighbour, "SELECT GROUP_CONCAT(x) FROM secret"),
        "s3cret"
    );
    assert_eq!(
        server.sql(
            &neighbour,
            "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE()"
        ),
        "1"
    );
    assert!(!Path::new("/tmp/pm-evil").exists());
    // Every account made for an import is gone.
    assert_eq!(import_accounts_of(&target), "0");
    s.finish();
}

/// On a server installed as `mariadb-install-db` does by default, whose anonymous accounts for
/// `localhost` shadow any account made for `'%'` over the socket, pm (its own account made for
/// `localhost`, as such a server needs) imports: the account an import runs as is made for the
/// host pm connects from.
#[cfg(feature = "full")]
#[test]
fn a_mariadb_import_works_where_anonymous_local_accounts_exist() {
    let server = crate::maria::Server::start_default_install();
    assert_ne!(
        server.sql(
            "mysql",
            "SELECT COUNT(*) FROM mysql.user WHERE user = '' AND host = 'localhost'"
        ),
        "0",
        "the default install has an anonymous account for localhost"
    );
    let (project, db) = maria_project_on(&server, "localhost");
    let mut s = start_project("pm", project, json!({}));
    let dir = root(&s).to_path_buf();
    std::fs::write(
        dir.join("ok.sql"),
        "CREATE TABLE t (x int); INSERT INTO t VALUES (1), (2);",
    )
    .unwrap();
    let target = format!("{db}_new");
    let imported = s.ok(
        "db.import",
        json!({"database": target, "sql_path": "ok.sql"}),
    );
    assert_eq!(imported["created"], json!(true), "{imported}");
    assert_eq!(server.sql(&target, "SELECT SUM(x) FROM t"), "3");
    assert_eq!(import_accounts_of(&target), "0");
    s.finish();
}

/// The same errors on a MariaDB server, and `.pm.json` naming a server wrongly.
#[cfg(feature = "full")]
#[test]
fn database_errors_on_a_mariadb_server_carry_their_data() {
    let (project, db) = maria_project();
    let dir = project.path().to_path_buf();
    let mut s = start_project("pm", project, json!({}));
    for (tool, args, data) in server_error_cases(&db) {
        let e = s.rpc_error(tool, args.clone());
        assert_eq!(e["data"], data, "{tool} {args}");
    }
    assert_eq!(
        crate::maria::Server::shared().sql(
            "mysql",
            &format!("SELECT GROUP_CONCAT(schema_name) FROM information_schema.schemata WHERE schema_name LIKE '{db}%' OR schema_name = 'other_db'"),
        ),
        db
    );
    let config: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join(".pm.json")).unwrap()).unwrap();
    for (key, value, reason) in [
        (
            "mysql",
            json!("ftp://x/y"),
            "`mysql` must be a mysql:// or mariadb:// URL, or env:NAME",
        ),
        (
            "mysql",
            json!("env:PM_NO_SUCH_VARIABLE"),
            "`mysql` names the variable PM_NO_SUCH_VARIABLE, which is not set",
        ),
        (
            "postgres",
            json!("postgresql:///x"),
            "name one database server: `postgres` or `mysql`, not both",
        ),
    ] {
        let mut c = config.clone();
        c[key] = value;
        std::fs::write(dir.join(".pm.json"), c.to_string()).unwrap();
        let e = s.rpc_error("db.list", json!({}));
        assert_eq!(
            e["data"],
            json!({"code": "CONFIG_INVALID", "path": ".pm.json", "reason": reason}),
            "{key}"
        );
    }
    s.finish();
}

/// An import on MariaDB stops at the call's deadline: each statement is limited to what is
/// left of the call's time (less a margin for undoing it), the database the call created is
/// dropped, and so is its account, before the call answers.
#[cfg(feature = "full")]
#[test]
fn a_mariadb_import_stops_at_its_deadline_and_leaves_nothing() {
    let (project, db) = maria_project();
    std::fs::write(
        project.path().join("endless.sql"),
        "CREATE TABLE t (x INT); INSERT INTO t SELECT SLEEP(600);",
    )
    .unwrap();
    let mut c = StdioClient::spawn(
        Command::new(crate::common::EXE)
            .args(["serve", "pm"])
            .current_dir(project.path())
            .env("MCPSPEC_LOG", "warn")
            .env("MCPSPEC_CALL_TIMEOUT_MS", "2000")
            .stderr(Stdio::null()),
    )
    .unwrap();
    c.initialize().unwrap();
    let target = format!("{db}_endless");
    let r = c
        .call_tool(
            "db.import",
            json!({"database": target, "sql_path": "endless.sql"}),
        )
        .unwrap();
    // The statement is stopped short of the deadline, so that the call undoes the import and
    // answers before it: as the deadline answers every call.
    let text = r["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert_eq!(r["result"]["isError"], json!(true), "{r}");
    assert!(text.contains("\"TIMEOUT\""), "{r}");
    assert_eq!(maria_databases_named(&target), "0");
    assert_eq!(import_accounts_of(&target), "0");
    drop(project);
}

/// Replicas of pm (no database) with one request-state key and one place for the states they
/// redeemed: a directory they share (`MCPSPEC_REQUEST_STATE_DIR`), or a PostgreSQL or MariaDB
/// database (`MCPSPEC_REQUEST_STATE_DB`, for replicas on machines that share no directory). A
/// confirmation answered on one replica is refused when replayed on the other, whichever
/// issued it, and nothing runs twice.
mod a_confirmation_redeemed_on_one_pm_replica_is_refused_on_another {
    #[test]
    fn in_a_shared_directory() {
        let states = tempfile::tempdir().expect("tempdir");
        let used = states.path().join("used");
        super::replay_across_replicas(("MCPSPEC_REQUEST_STATE_DIR", used.to_str().expect("utf-8")));
    }

    #[cfg(feature = "full")]
    #[test]
    fn in_a_postgres_database() {
        let url = crate::pg::Cluster::debian().create_database();
        super::replay_across_replicas(("MCPSPEC_REQUEST_STATE_DB", &url));
        let rows = crate::common::sql_on(
            crate::common::Engine::Postgres,
            std::path::Path::new(&url),
            "SELECT count(*) FROM mcpspec_request_states",
        );
        assert_eq!(rows, "2", "each state redeemed once, in the database");
    }

    #[cfg(feature = "full")]
    #[test]
    fn in_a_mariadb_database() {
        let url = crate::maria::Server::shared().create_database();
        super::replay_across_replicas(("MCPSPEC_REQUEST_STATE_DB", &url));
    }

    /// A SQLite file is no place for a team's states (one process serves it): refused at
    /// start-up, saying so.
    #[test]
    fn not_in_a_sqlite_file() {
        let (code, _, err) = crate::common::mcpspec(
            &["serve", "pm"],
            &[
                (
                    "MCPSPEC_REQUEST_STATE_KEY",
                    "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff",
                ),
                ("MCPSPEC_REQUEST_STATE_DB", "/tmp/states.db"),
            ],
        );
        assert_eq!(code, 2, "{err}");
        assert!(
            err.contains("MCPSPEC_REQUEST_STATE_DB: the request-state database must be a PostgreSQL or MariaDB/MySQL URL"),
            "{err}"
        );
    }
}

/// See [`a_confirmation_redeemed_on_one_pm_replica_is_refused_on_another`]: two pm replicas
/// with `ledger` (a variable and its value) set.
fn replay_across_replicas(ledger: (&str, &str)) {
    let dir = project();
    let dbs = dir.path().join(".pm/databases");
    let replica = || {
        StdioClient::spawn(
            Command::new(crate::common::EXE)
                .args(["serve", "pm"])
                .current_dir(dir.path())
                .env(
                    "MCPSPEC_REQUEST_STATE_KEY",
                    "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff",
                )
                .env(ledger.0, ledger.1)
                .stderr(Stdio::null()),
        )
        .expect("spawn pm")
    };
    let mut replicas = [replica(), replica()];
    let drop = |c: &mut StdioClient, extra: Value| {
        let mut params = json!({"name": "db.drop",
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
                "io.modelcontextprotocol/clientInfo": {"name": "e2e", "version": "1"}
            },
            "arguments": {"database": "scratch", "confirm": true}});
        for (k, v) in extra.as_object().expect("an object") {
            params[k] = v.clone();
        }
        c.request("tools/call", params).expect("tools/call")
    };
    let accept = json!({"confirm": {"action": "accept", "content": {}}});
    for (issuer, other) in [(0, 1), (1, 0)] {
        std::fs::copy(dbs.join("app.db"), dbs.join("scratch.db")).unwrap();
        let asked = drop(&mut replicas[issuer], json!({}));
        assert_eq!(asked["result"]["resultType"], "input_required", "{asked}");
        let answer =
            json!({"inputResponses": accept, "requestState": asked["result"]["requestState"]});
        let done = drop(&mut replicas[other], answer.clone());
        assert_eq!(done["result"]["isError"], json!(false), "{done}");
        assert!(!dbs.join("scratch.db").exists());
        std::fs::copy(dbs.join("app.db"), dbs.join("scratch.db")).unwrap();
        for i in [issuer, other] {
            let replayed = drop(&mut replicas[i], answer.clone());
            assert_eq!(replayed["error"]["code"], -32602, "{replayed}");
            assert_eq!(replayed["error"]["data"]["field"], "requestState");
            assert!(dbs.join("scratch.db").exists(), "nothing ran twice");
        }
    }
}
