//! The `lessons` server as a proxy: it starts `mcpspec serve downstream` (the test kit of
//! spec/downstream.yaml) from a temporary proxy-config.json, re-exports its tools, and runs
//! each call through the interceptor over a real lessons database.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::{Db, EXE, Session, TESTBED, sample_db, start_command, start_project};

/// A lessons proxy in front of downstream test servers, with its files.
struct Proxied {
    s: Session,
    /// The downstream that answers a tool every downstream has: the last one.
    answering: String,
    /// Holds the config, the downstream call log, stderr and the server's working directory.
    dir: tempfile::TempDir,
}

impl Proxied {
    fn log(&self) -> PathBuf {
        self.dir.path().join("calls.jsonl")
    }

    fn stderr(&self) -> PathBuf {
        self.dir.path().join("stderr.log")
    }

    /// The project directory the server runs in, as the server sees it.
    fn project(&self) -> PathBuf {
        self.dir
            .path()
            .join("project")
            .canonicalize()
            .expect("project dir")
    }

    /// Every call the downstream servers received, as `{tool, arguments}`.
    fn received(&self) -> Vec<Value> {
        std::fs::read_to_string(self.log())
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).expect("log line is JSON"))
            .collect()
    }

    /// Ends the session by closing stdin and returns what the server logged.
    fn finish(self) -> String {
        let stderr = self.stderr();
        self.s.finish();
        std::fs::read_to_string(stderr).unwrap_or_default()
    }
}

/// Extra environment variables of a downstream test server.
type Env<'a> = &'a [(&'a str, &'a str)];

/// A lesson row of the manifest the interceptor reads.
struct Lesson<'a> {
    slug: &'a str,
    kind: &'a str,
    tools: &'a [&'a str],
    commands: &'a [&'a str],
    paths: &'a [&'a str],
    tags: &'a [&'a str],
    scope: Option<&'a str>,
}

fn add_lesson(db: &Path, l: &Lesson<'_>) {
    let conn = rusqlite::Connection::open(db).expect("open lessons db");
    conn.execute(
        "INSERT INTO lesson_manifest (slug, type, tool_names, command_patterns, path_patterns, scope, tags, message)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        rusqlite::params![
            l.slug,
            l.kind,
            json!(l.tools).to_string(),
            json!(l.commands).to_string(),
            json!(l.paths).to_string(),
            l.scope,
            json!(l.tags).to_string(),
            format!("the {} lesson", l.slug),
        ],
    )
    .expect("insert lesson");
}

/// Starts `lessons` on a sample database proxying one test server per `(name, extra env)`,
/// all logging to the same call log.
fn proxied(downstreams: &[(&str, Env<'_>)]) -> Proxied {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(dir.path().join("project")).expect("project dir");
    let log = dir.path().join("calls.jsonl");
    let servers: Vec<Value> = downstreams
        .iter()
        .map(|(name, env)| {
            let mut e =
                json!({"DOWNSTREAM_LOG": log, "DOWNSTREAM_NAME": name, "MCPSPEC_LOG": "warn"});
            for (k, v) in *env {
                e[*k] = json!(v);
            }
            json!({"name": name, "command": TESTBED, "args": ["serve", "downstream"], "env": e})
        })
        .collect();
    let config = dir.path().join("proxy-config.json");
    std::fs::write(
        &config,
        json!({"version": 1, "proxyServers": servers}).to_string(),
    )
    .expect("write config");
    let db: Db = sample_db("lessons");
    let stderr = std::fs::File::create(dir.path().join("stderr.log")).expect("stderr file");
    let s = start_command(
        Command::new(EXE)
            .args(["serve", "lessons", "--db"])
            .arg(&db.path)
            .current_dir(dir.path().join("project"))
            .env("LESSONS_PROXY_CONFIG", &config)
            .env("MCPSPEC_LOG", "info")
            .stderr(Stdio::from(stderr)),
        db,
    );
    let answering = downstreams.last().map_or("", |d| d.0).to_string();
    Proxied { s, answering, dir }
}

/// The same call made directly on a downstream test server named `name`: what the proxy must
/// pass on.
fn direct(name: &str, tool: &str, args: Value) -> Value {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = start_command(
        Command::new(TESTBED)
            .args(["serve", "downstream"])
            .current_dir(dir.path())
            .env("DOWNSTREAM_NAME", name)
            .env("MCPSPEC_LOG", "warn")
            .stderr(Stdio::null()),
        Db {
            path: dir.path().to_path_buf(),
            _dir: dir,
        },
    );
    let r = s.call(tool, args)["result"].clone();
    s.finish();
    r
}

/// A call that reached the downstream and came back unchanged.
fn passed(p: &mut Proxied, tool: &str, args: Value) -> Value {
    let r = p.s.call(tool, args.clone())["result"].clone();
    let d = direct(&p.answering, tool, args.clone());
    assert_eq!(r["isError"], json!(false), "{tool} {args}: {r}");
    assert_eq!(r["content"], d["content"], "{tool} {args}: content changed");
    assert_eq!(
        r["structuredContent"], d["structuredContent"],
        "{tool} {args}"
    );
    r
}

/// A call that came back with the hint `key` before the downstream's unchanged content.
fn hinted(p: &mut Proxied, tool: &str, args: Value, key: &str) -> Value {
    let r = p.s.call(tool, args.clone())["result"].clone();
    let d = direct(&p.answering, tool, args.clone());
    assert_eq!(r["isError"], json!(false), "{tool} {args}: {r}");
    let content = r["content"].as_array().expect("content");
    let hint = content[0]["text"].as_str().expect("hint text");
    assert!(
        hint.starts_with(&format!("💡 LESSON ({key}): ")),
        "{tool} {args}: {hint}"
    );
    assert_eq!(json!(content[1..]), d["content"], "{tool} {args}");
    assert_eq!(
        r["structuredContent"], d["structuredContent"],
        "{tool} {args}"
    );
    r
}

/// A call that the guard `key` blocked.
fn blocked(p: &mut Proxied, tool: &str, args: Value, key: &str) {
    let r = p.s.call(tool, args.clone())["result"].clone();
    assert_eq!(r["isError"], json!(true), "{tool} {args}: {r}");
    let text = r["content"][0]["text"].as_str().expect("text");
    assert!(text.starts_with("🚫 BLOCKED: "), "{tool} {args}: {text}");
    assert_eq!(
        r["structuredContent"],
        json!({"code": "BLOCKED", "lesson": key}),
        "{tool} {args}"
    );
}

/// A call whose downstream stopped: a clean tool error naming it, without paths.
fn failed(p: &mut Proxied, tool: &str, args: Value, downstream: &str) {
    let r = p.s.call(tool, args.clone())["result"].clone();
    assert_eq!(r["isError"], json!(true), "{tool} {args}: {r}");
    let text = r["content"][0]["text"].as_str().expect("text");
    let e: Value = serde_json::from_str(text).expect("error JSON");
    assert_eq!(e["error"]["code"], "DOWNSTREAM_FAILED", "{r}");
    assert_eq!(e["error"]["downstream"], downstream, "{r}");
    assert!(!text.contains('/'), "no paths in errors: {text}");
}

fn bash(command: &str) -> Value {
    json!({"command": command})
}

#[test]
fn downstream_tools_are_reexported_with_their_schemas() {
    let p = proxied(&[("dc", &[])]);
    let own = &p.s.tool("lessons_list")["description"];
    assert!(
        own.as_str().is_some_and(|d| d.contains("active lessons")),
        "own tools win: {own}"
    );
    let mut d = start_project(
        "downstream",
        tempfile::tempdir().expect("tempdir"),
        json!({}),
    );
    for name in ["start_process", "read_file", "write_file", "echo", "crash"] {
        let ours = p.s.tool(name);
        let theirs = d.tool(name);
        for field in ["inputSchema", "outputSchema", "description", "annotations"] {
            assert_eq!(ours[field], theirs[field], "{name}.{field}");
        }
    }
    let names: Vec<&str> =
        p.s.tools()
            .iter()
            .filter_map(|t| t["name"].as_str())
            .collect();
    assert_eq!(
        names.iter().filter(|n| **n == "lessons_list").count(),
        1,
        "{names:?}"
    );
    d.call("echo", json!({"text": "x"}));
    d.finish();
    p.finish();
}

/// What the interceptor must do with a call.
enum Expect {
    Pass,
    Hint(&'static str),
    Block(&'static str),
}

#[test]
fn the_interceptor_blocks_hints_and_passes_through() {
    let mut p = proxied(&[("dc", &[])]);
    let project = p.project();
    let project = project.to_string_lossy();
    for l in [
        Lesson {
            slug: "mcp-secret-read",
            kind: "hint",
            tools: &["Read"],
            commands: &[],
            paths: &["secret"],
            tags: &["platform:mcp"],
            scope: None,
        },
        Lesson {
            slug: "cc-env-read",
            kind: "guard",
            tools: &["Read"],
            commands: &[],
            paths: &[r"\.env$"],
            tags: &["platform:claude-code"],
            scope: None,
        },
        Lesson {
            slug: "both-deploy",
            kind: "guard",
            tools: &["Bash"],
            commands: &[r"^deploy\b"],
            paths: &[],
            tags: &["platform:both"],
            scope: None,
        },
        Lesson {
            slug: "here-make",
            kind: "hint",
            tools: &["Bash"],
            commands: &[r"^make\b"],
            paths: &[],
            tags: &[],
            scope: Some(&project),
        },
        Lesson {
            slug: "elsewhere-npm",
            kind: "guard",
            tools: &["Bash"],
            commands: &[r"^npm\b"],
            paths: &[],
            tags: &[],
            scope: Some("/some/other/project"),
        },
        Lesson {
            slug: "protocol-bash",
            kind: "protocol",
            tools: &["Bash"],
            commands: &[],
            paths: &[],
            tags: &[],
            scope: None,
        },
        Lesson {
            slug: "bad-pattern",
            kind: "guard",
            tools: &["Bash"],
            commands: &["(unclosed"],
            paths: &[],
            tags: &[],
            scope: None,
        },
    ] {
        add_lesson(&p.s.db.path, &l);
    }
    let cases: Vec<(&str, Value, Expect)> = vec![
        // A sample guard lesson about Bash, reached through start_process.
        (
            "start_process",
            bash("git push --force origin main"),
            Expect::Block("no-force-push"),
        ),
        (
            "start_process",
            bash("git stash"),
            Expect::Hint("git-stash-untracked"),
        ),
        // Each hint once per session; guards every time.
        ("start_process", bash("git stash"), Expect::Pass),
        (
            "start_process",
            bash("git push -f origin main"),
            Expect::Block("no-force-push"),
        ),
        ("start_process", bash("ls -la"), Expect::Pass),
        // write_file is Write; lockfile-edits matches on the path.
        (
            "write_file",
            json!({"path": "app/Cargo.lock", "content": "x"}),
            Expect::Hint("lockfile-edits"),
        ),
        (
            "write_file",
            json!({"path": "app/Cargo.toml", "content": "x"}),
            Expect::Pass,
        ),
        // Platform tags: platform:mcp and platform:both apply here, platform:claude-code not.
        (
            "read_file",
            json!({"path": "the-secret.txt"}),
            Expect::Hint("mcp-secret-read"),
        ),
        ("read_file", json!({"path": "app/.env"}), Expect::Pass),
        (
            "start_process",
            bash("deploy prod"),
            Expect::Block("both-deploy"),
        ),
        // Scope: this project's lessons apply, another project's do not.
        ("start_process", bash("make all"), Expect::Hint("here-make")),
        ("start_process", bash("npm install"), Expect::Pass),
        // echo is not normalised, so no Bash lesson applies to it.
        ("echo", json!({"text": "git push --force"}), Expect::Pass),
    ];
    for (tool, args, expect) in cases {
        match expect {
            Expect::Pass => {
                passed(&mut p, tool, args);
            }
            Expect::Hint(key) => {
                hinted(&mut p, tool, args, key);
            }
            Expect::Block(key) => blocked(&mut p, tool, args, key),
        }
    }
    let commands: Vec<String> = p
        .received()
        .iter()
        .filter_map(|c| c["arguments"]["command"].as_str().map(str::to_string))
        .collect();
    assert_eq!(
        commands,
        [
            "git stash",
            "git stash",
            "ls -la",
            "make all",
            "npm install"
        ],
        "blocked calls never reach the downstream"
    );
    let log = p.finish();
    for needle in [
        r#"key=no-force-push action="guard""#,
        r#"key=git-stash-untracked action="hint""#,
        "regexp(): the pattern does not compile",
    ] {
        assert!(log.contains(needle), "stderr lacks {needle}:\n{log}");
    }
}

#[test]
fn a_lesson_added_to_the_manifest_applies_to_the_next_call() {
    let mut p = proxied(&[("dc", &[])]);
    passed(&mut p, "start_process", bash("terraform destroy"));
    add_lesson(
        &p.s.db.path,
        &Lesson {
            slug: "no-destroy",
            kind: "guard",
            tools: &["Bash"],
            commands: &[r"terraform\s+destroy"],
            paths: &[],
            tags: &[],
            scope: None,
        },
    );
    blocked(
        &mut p,
        "start_process",
        bash("terraform destroy"),
        "no-destroy",
    );
    p.finish();
}

/// The capture flow of the PRD: a lesson recorded with the management tools in the session
/// governs the next proxied call, and every later change to it does too.
#[test]
fn lessons_managed_in_the_session_govern_the_next_call() {
    let mut p = proxied(&[("dc", &[])]);
    let kubectl = bash("kubectl delete namespace prod");
    passed(&mut p, "start_process", kubectl.clone());
    let added = p.s.ok(
        "lessons_add",
        json!({"tool": ["start_process"], "trigger": "kubectl delete namespace", "type": "guard",
               "problem": "Deleting a namespace removed every workload in it at once.",
               "solution": "Delete the workloads one by one, after a dry run."}),
    );
    let id = added["lesson"]["id"].clone();
    blocked(
        &mut p,
        "start_process",
        kubectl.clone(),
        "kubectl-delete-namespace",
    );
    // Made a hint, it comes with the result once per session.
    p.s.ok("lessons_edit", json!({"id": id, "patch": {"type": "hint"}}));
    hinted(
        &mut p,
        "start_process",
        kubectl.clone(),
        "kubectl-delete-namespace",
    );
    passed(&mut p, "start_process", kubectl.clone());
    // Cancelled, it no longer applies; restored as a guard, it blocks again.
    p.s.ok(
        "lessons_cancel",
        json!({"id_or_slug": "kubectl-delete-namespace"}),
    );
    p.s.ok("lessons_restore", json!({"id": id}));
    p.s.ok(
        "lessons_edit",
        json!({"id": id, "patch": {"type": "guard"}}),
    );
    blocked(
        &mut p,
        "start_process",
        kubectl.clone(),
        "kubectl-delete-namespace",
    );
    let received = p.received();
    let reached = received
        .iter()
        .filter(|c| c["arguments"]["command"] == "kubectl delete namespace prod")
        .count();
    assert_eq!(
        reached, 3,
        "only the passed and hinted calls reached the downstream"
    );
    p.finish();
}

/// `injection.hints: false` leaves hints out; guards still block.
#[test]
fn hints_can_be_switched_off_and_guards_still_block() {
    let mut p = proxied(&[("dc", &[])]);
    p.s.ok(
        "lessons_config_set",
        json!({"key": "injection.hints", "value": false}),
    );
    passed(&mut p, "start_process", bash("git stash"));
    blocked(
        &mut p,
        "start_process",
        bash("git push --force origin main"),
        "no-force-push",
    );
    p.s.ok(
        "lessons_config_set",
        json!({"key": "injection.hints", "value": true}),
    );
    hinted(
        &mut p,
        "start_process",
        bash("git stash"),
        "git-stash-untracked",
    );
    p.finish();
}

#[test]
fn a_crashed_downstream_fails_calls_in_flight_and_is_restarted() {
    // `crash` ends the process; with DOWNSTREAM_CRASH_AFTER=2 an ordinary second call does.
    let cases: [(Env<'_>, &[(&str, Value)]); 2] = [
        (&[], &[("crash", json!({}))]),
        (
            &[("DOWNSTREAM_CRASH_AFTER", "2")],
            &[
                ("echo", json!({"text": "one"})),
                ("echo", json!({"text": "two"})),
            ],
        ),
    ];
    for (env, calls) in cases {
        let mut p = proxied(&[("dc", env)]);
        let (last, before) = calls.split_last().expect("calls");
        for (tool, args) in before {
            passed(&mut p, tool, args.clone());
        }
        failed(&mut p, last.0, last.1.clone(), "dc");
        // The next call waits for the restarted process and works.
        passed(&mut p, "echo", json!({"text": "after"}));
        let log = p.finish();
        assert!(log.contains("restarting it"), "{log}");
    }
}

#[test]
fn name_clashes_own_tools_win_then_the_later_downstream() {
    let mut p = proxied(&[("first", &[]), ("second", &[])]);
    let r = p.s.call("echo", json!({"text": "who"}));
    assert_eq!(r["result"]["structuredContent"]["server"], "second", "{r}");
    let own = p.s.call("lessons_list", json!({}));
    assert!(
        own["result"]["structuredContent"]["lessons"].is_array(),
        "the server's own lessons_list answers: {own}"
    );
    let log = p.finish();
    for needle in [
        "tool `echo` of downstream `first` is hidden by downstream `second` (the later one wins)",
        "tool `lessons_list` of downstream `first` is hidden by the server's own tool",
    ] {
        assert!(log.contains(needle), "stderr lacks {needle}:\n{log}");
    }
}

#[test]
fn a_downstream_that_fails_to_start_is_skipped() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("proxy-config.json");
    let servers = json!([
        {"name": "missing", "command": dir.path().join("no-such-program")},
        {"name": "dc", "command": TESTBED, "args": ["serve", "downstream"]},
    ]);
    std::fs::write(
        &config,
        json!({"version": 1, "proxyServers": servers}).to_string(),
    )
    .expect("write config");
    let db = sample_db("lessons");
    let mut s = start_command(
        Command::new(EXE)
            .args(["serve", "lessons", "--db"])
            .arg(&db.path)
            .env("LESSONS_PROXY_CONFIG", &config)
            .env("MCPSPEC_LOG", "warn")
            .stderr(Stdio::null()),
        db,
    );
    let r = s.call("echo", json!({"text": "still here"}));
    assert_eq!(
        r["result"]["structuredContent"]["text"], "still here",
        "{r}"
    );
    s.finish();
}

/// The processes whose parent is `pid`.
fn children(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Ok(child) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // The fields after the command name, which is in parentheses: state, ppid, ...
        let after = stat.rsplit_once(')').map_or("", |(_, r)| r);
        let ppid = after.split_whitespace().nth(1).and_then(|p| p.parse().ok());
        if ppid == Some(pid) {
            out.push(child);
        }
    }
    out
}

#[test]
fn shutdown_leaves_no_downstream_processes() {
    // Closing stdin, then SIGTERM.
    for terminate in [false, true] {
        let mut p = proxied(&[("a", &[]), ("b", &[])]);
        passed(&mut p, "echo", json!({"text": "x"}));
        let kids = children(p.s.stdio().pid());
        assert_eq!(kids.len(), 2, "one process per downstream: {kids:?}");
        if terminate {
            crate::common::signal(p.s.stdio().pid(), "-TERM");
            // The server's stdout closes when it exits.
            while p.s.stdio().recv(Duration::from_secs(20)).is_ok() {}
        }
        p.finish();
        for k in kids {
            assert!(
                !Path::new(&format!("/proc/{k}")).exists(),
                "downstream {k} outlived the server"
            );
        }
    }
}

/// Downstream servers that misbehave (tests/fixtures/proxy/misbehaving.py): the proxy reports
/// what happened, never answers their noise, and always exits.
mod misbehaving {
    use super::*;

    const SCRIPT: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/fixtures/proxy/misbehaving.py"
    );

    /// A lessons proxy in front of one misbehaving downstream in `mode`.
    struct Fake {
        s: Session,
        dir: tempfile::TempDir,
    }

    impl Fake {
        fn stderr(&self) -> String {
            std::fs::read_to_string(self.dir.path().join("stderr.log")).unwrap_or_default()
        }

        fn received(&self) -> String {
            std::fs::read_to_string(self.dir.path().join("received.jsonl")).unwrap_or_default()
        }

        /// The tool error of a call to a downstream tool.
        fn failure(&mut self, tool: &str) -> Value {
            let r = self.s.call(tool, json!({}));
            assert_eq!(r["result"]["isError"], json!(true), "{r}");
            let text: Value =
                serde_json::from_str(r["result"]["content"][0]["text"].as_str().unwrap()).unwrap();
            text["error"].clone()
        }
    }

    /// A proxy config in `dir` with one misbehaving downstream in `mode`.
    fn config(dir: &Path, mode: &str) -> std::path::PathBuf {
        let config = dir.join("proxy-config.json");
        let server = json!({"name": mode, "command": "python3", "args": [SCRIPT, mode],
                            "env": {"FAKE_LOG": dir.join("received.jsonl")}});
        std::fs::write(
            &config,
            json!({"version": 1, "proxyServers": [server]}).to_string(),
        )
        .expect("write config");
        config
    }

    fn fake(mode: &str, env: &[(&str, &str)]) -> Fake {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = config(dir.path(), mode);
        let db = sample_db("lessons");
        let stderr = std::fs::File::create(dir.path().join("stderr.log")).expect("stderr");
        let s = start_command(
            Command::new(EXE)
                .args(["serve", "lessons", "--db"])
                .arg(&db.path)
                .env("LESSONS_PROXY_CONFIG", &config)
                .env("MCPSPEC_LOG", "info")
                .env("MCPSPEC_CALL_TIMEOUT_MS", "15000")
                .envs(env.iter().copied())
                .stderr(Stdio::from(stderr)),
            db,
        );
        Fake { s, dir }
    }

    fn is_alive(pid: u32) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
            let after = stat.rsplit_once(')').map_or("", |(_, r)| r);
            !matches!(after.split_whitespace().next(), Some("Z" | "X"))
        })
    }

    #[test]
    fn a_downstream_writing_garbage_is_never_answered_and_is_restarted() {
        let mut f = fake("garbage", &[("MCPSPEC_SHUTDOWN_TIMEOUT_SECS", "1")]);
        let e = f.failure("garbage_tool");
        assert_eq!(e["code"], "DOWNSTREAM_FAILED", "{e}");
        assert_eq!(e["downstream"], "garbage");
        // The restarted process serves the next listing; the proxy sent nothing back for the
        // noise (it used to answer each line with an error, which the downstream echoed).
        let stderr = f.stderr();
        assert!(
            stderr.contains("keeps writing lines that are not MCP messages"),
            "{stderr}"
        );
        let received = f.received();
        assert!(
            !received.lines().any(|l| l.contains("\"error\"")),
            "the proxy answered the downstream's noise:\n{received}"
        );
        // The downstream ignores the end of its stdin and keeps running; the proxy still
        // exits within its shutdown timeout, and leaves nothing running.
        let kids = children(f.s.stdio().pid());
        assert!(!kids.is_empty());
        let Fake { s, dir: _dir } = f;
        s.finish();
        for k in kids {
            assert!(!is_alive(k), "downstream {k} outlived the server");
        }
    }

    #[test]
    fn a_result_over_the_size_limit_is_result_too_large_naming_the_limit() {
        let mut f = fake("huge", &[]);
        let e = f.failure("huge_tool");
        assert_eq!(e["code"], "RESULT_TOO_LARGE", "{e}");
        assert_eq!(e["limit"], 8 * 1024 * 1024, "{e}");
        assert!(e["message"].as_str().unwrap().contains("8388608"), "{e}");
        // The downstream is fine and keeps serving.
        let e = f.failure("huge_tool");
        assert_eq!(e["code"], "RESULT_TOO_LARGE", "{e}");
        assert!(!f.stderr().contains("restarting"), "{}", f.stderr());
        f.s.finish();
    }

    /// `{"id": 1, "result": {}}` without `"jsonrpc": "2.0"` is not a JSON-RPC answer: it is
    /// dropped like any other line that is not a message, and the real answer that follows
    /// is the one taken, for `initialize`, `tools/list` and calls alike.
    #[test]
    fn a_line_without_json_rpc_2_0_is_dropped_not_taken_as_the_answer() {
        let mut f = fake("noversion", &[]);
        assert!(
            f.s.tools().iter().any(|t| t["name"] == "noversion_tool"),
            "{:?}",
            f.s.tools()
        );
        let r = f.s.call("noversion_tool", json!({}));
        assert_eq!(r["result"]["content"][0]["text"], "ok", "{r}");
        f.s.finish();
    }

    #[test]
    fn a_non_object_result_is_reported_as_such_not_as_a_restart() {
        let mut f = fake("nonobject", &[]);
        let pid = children(f.s.stdio().pid());
        for _ in 0..2 {
            let e = f.failure("nonobject_tool");
            assert_eq!(e["code"], "DOWNSTREAM_FAILED", "{e}");
            let message = e["message"].as_str().unwrap();
            assert!(!message.contains("restart"), "{message}");
        }
        assert_eq!(
            children(f.s.stdio().pid()),
            pid,
            "the same process still serves"
        );
        f.s.finish();
    }

    #[test]
    fn a_downstream_that_never_answers_does_not_hold_up_initialize() {
        // `fake` initializes and lists tools with the client's 20 s deadline, which a proxy
        // waiting for the downstream's own 20 s start timeout would miss.
        let f = fake("silent", &[]);
        let names: Vec<&str> =
            f.s.tools()
                .iter()
                .filter_map(|t| t["name"].as_str())
                .collect();
        assert!(names.contains(&"lessons_list"), "{names:?}");
        assert!(!names.contains(&"silent_tool"));
        f.s.finish();
    }

    /// Protocol 2026-07-28 has no session to tell: a listen stream that asked for tool list
    /// changes hears that the slow downstream's tools arrived.
    #[test]
    fn a_listen_stream_hears_when_a_slow_downstream_s_tools_arrive() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = sample_db("lessons");
        let mut c = mcpspec_testkit::StdioClient::spawn(
            Command::new(EXE)
                .args(["serve", "lessons", "--db"])
                .arg(&db.path)
                .env("LESSONS_PROXY_CONFIG", config(dir.path(), "slow"))
                .stderr(Stdio::null()),
        )
        .expect("spawn");
        let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                          "io.modelcontextprotocol/clientCapabilities": {}});
        let listen = json!({"jsonrpc": "2.0", "id": "tools", "method": "subscriptions/listen",
            "params": {"_meta": meta, "notifications": {"toolsListChanged": true}}});
        c.send_line(&listen.to_string()).unwrap();
        let ack = c
            .recv(Duration::from_secs(10))
            .expect("the acknowledgement");
        assert_eq!(
            ack["method"], "notifications/subscriptions/acknowledged",
            "{ack}"
        );
        let note = c.recv(Duration::from_secs(20)).expect("a notification");
        assert_eq!(note["method"], "notifications/tools/list_changed", "{note}");
        assert_eq!(
            note["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], "tools",
            "{note}"
        );
        let list = c.request("tools/list", json!({"_meta": meta})).unwrap();
        assert!(list.to_string().contains("\"slow_tool\""), "{list}");
    }

    #[test]
    fn a_slow_downstream_s_tools_arrive_with_list_changed() {
        let mut f = fake("slow", &[]);
        let names = |tools: &[Value]| -> Vec<String> {
            tools
                .iter()
                .filter_map(|t| t["name"].as_str().map(str::to_string))
                .collect()
        };
        assert!(!names(f.s.tools()).contains(&"slow_tool".to_string()));
        let note =
            f.s.stdio()
                .recv(Duration::from_secs(20))
                .expect("a notification");
        assert_eq!(note["method"], "notifications/tools/list_changed", "{note}");
        let list = f.s.client.request("tools/list", json!({})).unwrap();
        let tools = list["result"]["tools"].as_array().unwrap();
        assert!(names(tools).contains(&"slow_tool".to_string()), "{list}");
        let r = f.s.call("slow_tool", json!({}));
        assert_eq!(r["result"]["content"][0]["text"], "ok", "{r}");
        f.s.finish();
    }
}
