//! The `lessons` server's management tools, through the built binary over stdio: intake
//! checks, the manifest the interceptor reads, review and promotion, edits, the doctor, the
//! configuration and the session-log scanner.

use std::path::Path;

use serde_json::{Value, json};

use crate::common::{Session, count_rows, start};

fn manifest_slugs(db: &Path) -> Vec<String> {
    let conn = rusqlite::Connection::open(db).expect("open db");
    let mut stmt = conn
        .prepare("SELECT slug FROM lesson_manifest ORDER BY slug")
        .expect("prepare");
    stmt.query_map([], |r| r.get(0))
        .expect("query")
        .collect::<Result<_, _>>()
        .expect("rows")
}

fn sql(db: &Path, statement: &str) {
    let conn = rusqlite::Connection::open(db).expect("open db");
    conn.execute_batch(statement).expect("statement");
}

fn slugs(v: &Value) -> Vec<&str> {
    v.as_array()
        .expect("array")
        .iter()
        .map(|l| l["slug"].as_str().expect("slug"))
        .collect()
}

fn add(s: &mut Session, extra: Value) -> Value {
    let mut args = json!({
        "tool": ["start_process"],
        "trigger": "docker system prune",
        "problem": "Pruning removed the volumes of a running database.",
        "solution": "Prune with --filter and never with --volumes on a dev box.",
        "type": "guard"
    });
    for (k, v) in extra.as_object().expect("object") {
        args[k] = v.clone();
    }
    s.ok("lessons_add", args)
}

#[test]
fn added_lessons_are_active_canonical_and_in_the_manifest() {
    let mut s = start("lessons", &[]);
    let added = add(&mut s, json!({"tags": ["Docker", "docker"]}));
    let lesson = &added["lesson"];
    assert_eq!(lesson["status"], "active");
    assert_eq!(lesson["source"], "mcp");
    assert_eq!(lesson["slug"], "docker-system-prune");
    // Desktop Commander's name is stored under the canonical name, and tags are normalised.
    assert_eq!(lesson["tool_names"], json!(["Bash"]));
    assert_eq!(lesson["tags"], json!(["docker"]));
    assert_eq!(
        lesson["command_patterns"],
        json!([r"\bdocker\s+system\s+prune\b"])
    );
    assert_eq!(added["manifest"]["path"], "lesson-manifest.json");
    let listed = s.ok("lessons_list", json!({"tool": "Bash"}));
    assert!(slugs(&listed["lessons"]).contains(&"docker-system-prune"));
    let db = s.db.path.clone();
    assert!(manifest_slugs(&db).contains(&"docker-system-prune".to_string()));
    let file: Value = serde_json::from_str(
        &std::fs::read_to_string(db.with_file_name("lesson-manifest.json")).expect("manifest file"),
    )
    .expect("manifest JSON");
    let in_file: Vec<&str> = file["lessons"]
        .as_array()
        .expect("lessons")
        .iter()
        .map(|l| l["slug"].as_str().expect("slug"))
        .collect();
    assert_eq!(in_file, manifest_slugs(&db));
    assert_eq!(
        count_rows(&db, "lesson_manifest"),
        count_rows(&db, "lessons WHERE status = 'active'")
    );
    s.finish();
}

#[test]
fn intake_refuses_what_the_schema_cannot_see() {
    let mut s = start("lessons", &[]);
    let cases = [
        (
            json!({"command_patterns": ["(unclosed"]}),
            "INVALID_LESSON",
            "command_patterns",
        ),
        (
            json!({"tool": ["Read"], "trigger": "reading secrets"}),
            "INVALID_LESSON",
            "type",
        ),
        (
            json!({"problem": "TODO      ", "type": "hint"}),
            "INVALID_LESSON",
            "problem",
        ),
        (
            json!({"tags": ["platform:desktop"]}),
            "INVALID_LESSON",
            "tags",
        ),
        (json!({"tool": ["not a tool"]}), "INVALID_LESSON", "tool"),
        (
            json!({"trigger": "git push --force", "tool": ["Bash"]}),
            "DUPLICATE_LESSON",
            "slug",
        ),
        (
            json!({"slug": "git-stash-untracked"}),
            "DUPLICATE_LESSON",
            "slug",
        ),
    ];
    for (extra, code, field) in cases {
        let mut args = json!({
            "tool": ["Bash"],
            "trigger": "docker system prune",
            "problem": "Pruning removed the volumes of a running database.",
            "solution": "Prune with --filter and never with --volumes on a dev box.",
            "type": "guard"
        });
        for (k, v) in extra.as_object().expect("object") {
            args[k] = v.clone();
        }
        // The sample's force-push guard has the trigger `git push --force`.
        let error = s.tool_error("lessons_add", args);
        assert_eq!(error["code"], code, "{extra}: {error}");
        let named = error["field"]
            .as_str()
            .or_else(|| error["slug"].as_str().map(|_| "slug"));
        assert_eq!(named, Some(field), "{extra}: {error}");
    }
    // Arguments that fail the JSON Schema name the field too, and nothing was written.
    let error = s.tool_error(
        "lessons_add",
        json!({"tool": ["Bash"], "trigger": "x", "problem": "p", "solution": "s"}),
    );
    assert!(
        error["message"]
            .as_str()
            .expect("message")
            .contains("trigger"),
        "{error}"
    );
    let db = s.finish();
    assert_eq!(count_rows(&db.path, "lessons WHERE source = 'mcp'"), 0);
}

#[test]
fn candidates_are_reviewed_promoted_and_archived() {
    let mut s = start("lessons", &[]);
    let review = s.ok("lessons_review", json!({}));
    assert_eq!(review["count"], 1);
    let candidate = &review["candidates"][0];
    assert_eq!(candidate["slug"], "sed-in-place-macos");
    let id = candidate["id"].as_i64().expect("id");
    assert!(!manifest_slugs(&s.db.path).contains(&"sed-in-place-macos".into()));

    let promoted = s.ok(
        "lessons_promote",
        json!({"ids": [id], "patch": {"tags": ["shell", "macos"]}}),
    );
    assert_eq!(promoted["changed"], json!([id]));
    assert_eq!(promoted["status"], "active");
    assert!(manifest_slugs(&s.db.path).contains(&"sed-in-place-macos".into()));
    let listed = s.ok("lessons_list", json!({"tag": "macos"}));
    assert_eq!(slugs(&listed["lessons"]), ["sed-in-place-macos"]);

    // Promoting it again is refused: it is no longer a candidate.
    let error = s.tool_error("lessons_promote", json!({"ids": [id]}));
    assert_eq!(error["code"], "NOT_A_CANDIDATE");
    assert_eq!(s.ok("lessons_review", json!({}))["count"], 0);
    s.finish();
}

#[test]
fn edit_scope_cancel_and_restore() {
    let mut s = start("lessons", &[]);
    let id = add(&mut s, json!({}))["lesson"]["id"].as_i64().expect("id");

    let edited = s.ok(
        "lessons_edit",
        json!({"id": id, "patch": {"type": "hint", "solution": "Run docker volume ls first and prune with --filter."}}),
    );
    assert_eq!(edited["lesson"]["type"], "hint");
    let error = s.tool_error(
        "lessons_edit",
        json!({"id": id, "patch": {"path_patterns": ["[z-a]"]}}),
    );
    assert_eq!(error["field"], "path_patterns");
    assert_eq!(
        s.tool_error("lessons_edit", json!({"id": 999, "patch": {}}))["code"],
        "LESSON_NOT_FOUND"
    );

    let scoped = s.ok("lessons_scope", json!({"id": id, "scope": "/work/app/"}));
    assert_eq!(scoped["lesson"]["scope"], "/work/app");
    let global = s.ok("lessons_scope", json!({"id": id}));
    assert!(global["lesson"].get("scope").is_none_or(Value::is_null));

    let cancelled = s.ok(
        "lessons_cancel",
        json!({"id_or_slug": "docker-system-prune"}),
    );
    assert_eq!(cancelled["archived"], json!(["docker-system-prune"]));
    assert_eq!(cancelled["tag"], "#lesson:cancel docker-system-prune");
    assert!(!manifest_slugs(&s.db.path).contains(&"docker-system-prune".into()));
    // A slug nobody recorded yet: nothing archived, the tag still cancels an unscanned one.
    let unscanned = s.ok("lessons_cancel", json!({"id_or_slug": "not-yet-scanned"}));
    assert_eq!(unscanned["archived"], json!([]));
    assert_eq!(unscanned["tag"], "#lesson:cancel not-yet-scanned");

    let restored = s.ok("lessons_restore", json!({"id": id}));
    assert_eq!(restored["lesson"]["status"], "active");
    assert!(manifest_slugs(&s.db.path).contains(&"docker-system-prune".into()));
    assert_eq!(
        s.tool_error("lessons_restore", json!({"id": id}))["code"],
        "NOT_ARCHIVED"
    );
    let archived = s.ok("lessons_manage", json!({"status": "archived"}));
    assert_eq!(archived["count"], 0);
    s.finish();
}

#[test]
fn search_finds_words_in_any_field() {
    let mut s = start("lessons", &[]);
    let found = s.ok("lessons_search", json!({"query": "untracked"}));
    assert_eq!(slugs(&found["results"]), ["git-stash-untracked"]);
    let found = s.ok(
        "lessons_search",
        json!({"query": "sed", "status": "candidate"}),
    );
    assert_eq!(slugs(&found["results"]), ["sed-in-place-macos"]);
    // Operators are plain text, never a syntax error.
    let found = s.ok("lessons_search", json!({"query": "\"unbalanced AND ("}));
    assert_eq!(found["results"], json!([]));
    s.finish();
}

fn check<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no check {name}: {report}"))
}

fn flagged(report: &Value, name: &str) -> Vec<String> {
    check(report, name)["issues"]
        .as_array()
        .expect("issues")
        .iter()
        .map(|i| i["lesson"].as_str().expect("lesson").to_string())
        .collect()
}

#[test]
fn the_doctor_runs_nine_checks_and_flags_what_is_wrong() {
    let mut s = start("lessons", &[]);
    let report = s.ok("lessons_doctor", json!({}));
    assert_eq!(report["checks"].as_array().expect("checks").len(), 9);
    assert_eq!(
        report["ok"], true,
        "the sample library is healthy: {report}"
    );

    // Lessons written behind the server's back, the way a broken import would.
    sql(
        &s.db.path,
        r#"
        INSERT INTO lessons (slug, type, status, tool_names, command_patterns, trigger, problem, solution, tags) VALUES
          ('ps-loop', 'hint', 'active', '["list_processes"]', '[]', 'listing processes', 'Polling list_processes in a loop floods the context.', 'Read the process output once instead.', '[]'),
          ('bad-pattern', 'guard', 'active', '["bash"]', '["(unclosed"]', 'bad pattern', 'short', 'short', '[]'),
          ('old-candidate', 'hint', 'candidate', '["Read"]', '[]', 'old candidate', 'A candidate nobody reviewed for months.', 'Review candidates every week.', '[]');
        UPDATE lessons SET created_at = '2026-01-01T00:00:00Z' WHERE slug = 'old-candidate';
        "#,
    );
    let report = s.ok("lessons_doctor", json!({}));
    assert_eq!(report["ok"], false);
    for (name, lessons) in [
        ("invalid patterns", vec!["bad-pattern"]),
        ("non-canonical tool names", vec!["bad-pattern"]),
        ("thin text", vec!["bad-pattern", "bad-pattern"]),
        ("stale manifest", vec!["bad-pattern", "ps-loop"]),
        ("stale candidates", vec!["old-candidate"]),
        (
            "platform tag missing for platform-exclusive tools",
            vec!["ps-loop"],
        ),
        ("duplicates", vec![]),
        ("unbounded guards", vec![]),
        ("missing tool names", vec![]),
    ] {
        assert_eq!(flagged(&report, name), lessons, "{name}");
    }
    // The stale manifest is fixed by a build.
    s.ok("lessons_build", json!({}));
    let report = s.ok("lessons_doctor", json!({}));
    assert_eq!(flagged(&report, "stale manifest"), Vec::<String>::new());
    s.finish();
}

#[test]
fn configuration_reads_defaults_and_checks_values() {
    let mut s = start("lessons", &[]);
    let config = s.ok("lessons_config_get", json!({}));
    assert_eq!(config["config"]["injection"]["hints"], true);
    assert_eq!(config["config"]["scanning"]["max_files"], 500);
    let set = s.ok(
        "lessons_config_set",
        json!({"key": "injection.hints", "value": false}),
    );
    assert_eq!(set["config"]["injection"]["hints"], false);
    for (key, value) in [
        ("injection.hints", json!("no")),
        ("scanning.max_files", json!(0)),
        ("scanning.sessions_dir", json!(" ")),
    ] {
        let error = s.tool_error("lessons_config_set", json!({"key": key, "value": value}));
        assert_eq!(error["code"], "INVALID_CONFIG", "{key}");
        assert_eq!(error["key"], key);
    }
    let error = s.tool_error(
        "lessons_config_set",
        json!({"key": "injection.bogus", "value": true}),
    );
    assert!(
        error["message"].as_str().expect("message").contains("key"),
        "{error}"
    );
    assert_eq!(
        s.ok("lessons_config_get", json!({}))["config"]["injection"]["hints"],
        false
    );
    s.finish();
}

fn assistant(text: &str) -> String {
    json!({"type": "assistant", "message": {"role": "assistant", "content": [{"type": "text", "text": text}]}})
        .to_string()
        + "\n"
}

const BLOCK: &str = "Fixed it.\n#lesson\ntool: Bash\ntrigger: cargo publish\nproblem: Publishing ran without the dry run and shipped a broken crate.\nsolution: Run cargo publish --dry-run first.\n#/lesson";

#[test]
fn scans_record_candidates_incrementally() {
    let mut s = start("lessons", &[]);
    let sessions = tempfile::tempdir().expect("tempdir");
    let project = sessions.path().join("project-a");
    std::fs::create_dir(&project).expect("mkdir");
    let log = project.join("session-1.jsonl");
    let user = json!({"type": "user", "message": {"role": "user", "content": "#lesson\ntool: Bash\ntrigger: user text\nproblem: users do not report lessons here.\nsolution: only assistants do.\n#/lesson"}}).to_string() + "\n";
    std::fs::write(&log, user + &assistant(BLOCK) + "{not json\n").expect("write log");
    let dir = sessions.path().to_str().expect("utf-8");

    let first = s.ok("lessons_scan", json!({"dir": dir}));
    assert_eq!(first["files"], 1);
    assert_eq!(first["lessons"], 1);
    assert_eq!(first["added"], json!(["cargo-publish"]));
    // Scanning again reads only what was appended since.
    let again = s.ok("lessons_scan", json!({"dir": dir}));
    assert_eq!(again["lessons"], 0);

    let mut text = assistant(BLOCK);
    text += &assistant("#lesson\ntool: Bash\ntrigger: x\nproblem: p\nsolution: s\n#/lesson");
    text += &assistant("Withdrawn: #lesson:cancel cargo-publish");
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&log)
        .expect("open");
    std::io::Write::write_all(&mut f, text.as_bytes()).expect("append");
    // A line still being written (no newline yet) waits for the next scan.
    std::io::Write::write_all(&mut f, assistant(BLOCK).trim_end().as_bytes()).expect("append");
    let third = s.ok("lessons_scan", json!({"dir": dir}));
    assert_eq!(third["lessons"], 2);
    assert_eq!(third["repeated"], json!(["cargo-publish"]));
    assert_eq!(third["invalid"], 1);
    assert_eq!(third["cancelled"], json!(["cargo-publish"]));

    let full = s.ok("lessons_scan", json!({"dir": dir, "full": true}));
    assert_eq!(full["lessons"], 3);

    let error = s.tool_error("lessons_scan", json!({"dir": "/no/such/dir"}));
    assert_eq!(error["code"], "SESSIONS_NOT_FOUND");
    assert!(
        !error.to_string().contains("/no/such"),
        "no paths leak: {error}"
    );
    s.finish();
}

/// The spec's default path of the downstream list on Linux, under the temp `HOME`.
const PROXY_CONFIG: &str = ".local/share/lessons-learned/proxy-config.json";

const DESKTOP: &str = r#"{
  "globalShortcut": "Ctrl+Space",
  "mcpServers": {
    "filesystem": {
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-filesystem", "/home/me"]
    },
    "desktop-commander": {
      "command": "npx",
      "args": ["-y", "@wonderwhy-er/desktop-commander@latest"],
      "env": {"DC_LOG": "1"}
    },
    "weather": {"command": "weather-mcp"}
  }
}
"#;

/// A temp home for `mcpspec setup`: the Desktop config, the database and, at the spec's
/// default path under `HOME`, the downstream list.
struct SetupHome {
    dir: tempfile::TempDir,
}

impl SetupHome {
    fn new() -> SetupHome {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("claude_desktop_config.json"), DESKTOP).expect("write");
        SetupHome { dir }
    }

    fn path(&self, name: &str) -> std::path::PathBuf {
        self.dir.path().join(name)
    }

    fn setup(&self, extra: &[&str]) -> (i32, String, String) {
        let config = self.path("claude_desktop_config.json");
        let db = self.path("data/lessons.db");
        let mut args = vec![
            "setup",
            "lessons",
            "--config-path",
            config.to_str().expect("utf-8"),
            "--db",
            db.to_str().expect("utf-8"),
        ];
        args.extend_from_slice(extra);
        let home = self.dir.path().to_str().expect("utf-8");
        crate::common::mcpspec(&args, &[("HOME", home), ("LESSONS_PROXY_CONFIG", "")])
    }

    fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.path(name)).expect("read")
    }
}

#[test]
fn setup_dry_run_shows_the_diff_and_writes_nothing() {
    let home = SetupHome::new();
    let (code, out, err) = home.setup(&["--servers", "desktop-commander", "--dry-run"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("[x] 2. desktop-commander"), "{out}");
    assert!(out.contains("[ ] 1. filesystem"), "{out}");
    assert!(out.contains("-    \"desktop-commander\": {"), "{out}");
    assert!(out.contains("+    \"lessons-learned\": {"), "{out}");
    assert!(
        out.contains("--- /dev/null"),
        "the proxy config is new: {out}"
    );
    assert!(out.contains("dry run: nothing was written"), "{out}");
    assert_eq!(home.read("claude_desktop_config.json"), DESKTOP);
    assert!(!home.path("data").exists(), "nothing created");
    assert!(!home.path(".local").exists(), "nothing created");
}

#[test]
fn setup_moves_the_chosen_servers_behind_the_proxy() {
    let home = SetupHome::new();
    let (code, out, err) = home.setup(&["--servers", "desktop-commander,weather", "--yes"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("lessons://protocol"),
        "prints the system prompt: {out}"
    );
    assert_eq!(home.read("claude_desktop_config.json.bak"), DESKTOP);

    let new = home.read("claude_desktop_config.json");
    let config: Value = serde_json::from_str(&new).expect("JSON");
    let servers = config["mcpServers"].as_object().expect("servers");
    let names: Vec<&String> = servers.keys().collect();
    assert_eq!(names, ["filesystem", "lessons-learned"]);
    // Key order and untouched entries are kept as they were.
    assert!(new.starts_with("{\n  \"globalShortcut\""), "{new}");
    assert_eq!(config["mcpServers"]["filesystem"]["args"][2], "/home/me");
    let own = &config["mcpServers"]["lessons-learned"];
    assert_eq!(own["command"], crate::common::EXE);
    assert_eq!(own["args"][0], "serve");
    assert_eq!(own["args"][1], "lessons");
    let proxy_path = home.path(PROXY_CONFIG);
    assert_eq!(
        own["env"]["LESSONS_PROXY_CONFIG"],
        proxy_path.to_str().expect("utf-8")
    );

    let proxy: Value = serde_json::from_str(&home.read(PROXY_CONFIG)).expect("JSON");
    assert_eq!(proxy["version"], 1);
    assert_eq!(
        proxy["proxyServers"],
        json!([
            {"name": "desktop-commander", "command": "npx", "args": ["-y", "@wonderwhy-er/desktop-commander@latest"], "env": {"DC_LOG": "1"}},
            {"name": "weather", "command": "weather-mcp", "args": [], "env": {}}
        ])
    );
    assert!(
        home.path("data/lessons.db").exists(),
        "the database is created"
    );

    // Running it again offers only what is left, and adds to the downstream list.
    let (code, out, err) = home.setup(&["--all", "--yes"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        !out.contains(". lessons-learned"),
        "the proxy is never offered: {out}"
    );
    let proxy: Value = serde_json::from_str(&home.read(PROXY_CONFIG)).expect("JSON");
    let names: Vec<&str> = proxy["proxyServers"]
        .as_array()
        .expect("list")
        .iter()
        .map(|s| s["name"].as_str().expect("name"))
        .collect();
    assert_eq!(names, ["desktop-commander", "weather", "filesystem"]);
}

#[test]
fn setup_refuses_without_a_clear_answer() {
    let home = SetupHome::new();
    for (extra, message) in [
        (
            &["--servers", "nope", "--yes"][..],
            "no server named `nope`",
        ),
        (&["--yes"][..], "no servers chosen"),
        (&["--servers", "weather"][..], "pass --yes"),
    ] {
        let (code, _, err) = home.setup(extra);
        assert_eq!(code, 2, "{extra:?}");
        assert!(err.contains(message), "{extra:?}: {err}");
        assert_eq!(home.read("claude_desktop_config.json"), DESKTOP);
    }
    std::fs::write(home.path("claude_desktop_config.json"), "{not json").expect("write");
    let (code, _, err) = home.setup(&["--all", "--yes"]);
    assert_eq!(code, 2);
    assert!(err.contains("is not valid JSON"), "{err}");
}

fn read_text(s: &mut Session, uri: &str) -> String {
    let r = crate::content::ok(s, "resources/read", json!({"uri": uri}));
    r["contents"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("{uri}: {r}"))
        .to_string()
}

#[test]
fn protocol_resources_and_the_session_start_prompt() {
    let mut s = start("lessons", &[]);
    let listed = crate::content::ok(&mut s, "resources/list", json!({}));
    let uris: Vec<&str> = listed["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .map(|r| r["uri"].as_str().expect("uri"))
        .collect();
    for uri in [
        "lessons://protocol",
        "lessons://directives",
        "lessons://system-prompt",
    ] {
        assert!(uris.contains(&uri), "{uri} in {uris:?}");
    }

    let protocol = read_text(&mut s, "lessons://protocol");
    assert!(protocol.contains("#lesson\n"), "{protocol}");
    assert!(
        protocol.contains("**lesson-format** (protocol"),
        "{protocol}"
    );
    assert!(
        protocol.contains("**read-before-edit** (directive"),
        "{protocol}"
    );
    // Hints and guards are for the interceptor, not the session-start reminders.
    assert!(!protocol.contains("no-force-push"), "{protocol}");
    let directives = read_text(&mut s, "lessons://directives");
    assert!(
        directives.contains("## read-before-edit (directive; Edit)"),
        "{directives}"
    );
    let prompt = read_text(&mut s, "lessons://system-prompt");
    assert!(
        prompt.starts_with("At the start of every session, read the lessons://protocol resource")
    );

    // A directive added in the session is in the protocol at once.
    s.ok(
        "lessons_add",
        json!({"tool": ["Write"], "trigger": "writing generated files", "type": "directive",
               "problem": "Generated files edited by hand drift from their source.",
               "solution": "Change the generator's input and regenerate."}),
    );
    let protocol = read_text(&mut s, "lessons://protocol");
    assert!(
        protocol.contains("**writing-generated-files** (directive"),
        "{protocol}"
    );

    // The prompt carries the same content as the resource.
    let got = crate::content::ok(
        &mut s,
        "prompts/get",
        json!({"name": "lessons_session_start"}),
    );
    let message = &got["messages"][0];
    assert_eq!(message["role"], "user");
    assert_eq!(message["content"]["type"], "resource");
    assert_eq!(message["content"]["resource"]["uri"], "lessons://protocol");
    assert_eq!(message["content"]["resource"]["text"], protocol);

    // One lesson by slug, with completion of the slug.
    let one = read_text(&mut s, "lessons://lesson/no-force-push");
    assert!(
        one.starts_with("# no-force-push\n\nguard, active · tools: Bash"),
        "{one}"
    );
    let done = crate::content::ok(
        &mut s,
        "completion/complete",
        json!({"ref": {"type": "ref/resource", "uri": "lessons://lesson/{slug}"},
               "argument": {"name": "slug", "value": "git"}}),
    );
    assert_eq!(done["completion"]["values"], json!(["git-stash-untracked"]));
    s.finish();
}
