//! The lessons scanner on realistic Claude Code session files (user and assistant messages,
//! `tool_use` and `tool_result` blocks, one JSON object a line): the start-up job that scans
//! without any call, and the tier-2 heuristics with their evidence.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::Duration;

use mcpspec_testkit::StdioClient;
use serde_json::{Value, json};

use crate::common::{EXE, sample_db, start};

/// One step of a session, as Claude Code writes it.
enum Step<'a> {
    User(&'a str),
    Assistant(&'a str),
    /// A tool call: id, tool, input.
    Call(&'a str, &'a str, Value),
    /// A call's result: id, failed, text.
    Result(&'a str, bool, &'a str),
}

/// The JSONL text of a session.
fn session(id: &str, steps: &[Step<'_>]) -> String {
    let mut out = String::new();
    let mut parent = Value::Null;
    for (i, step) in steps.iter().enumerate() {
        let (kind, content) = match step {
            Step::User(text) => ("user", json!(text)),
            Step::Assistant(text) => ("assistant", json!([{"type": "text", "text": text}])),
            Step::Call(call, tool, input) => (
                "assistant",
                json!([
                    {"type": "text", "text": "Let me run that."},
                    {"type": "tool_use", "id": call, "name": tool, "input": input}
                ]),
            ),
            Step::Result(call, failed, text) => (
                "user",
                json!([{"type": "tool_result", "tool_use_id": call, "is_error": failed, "content": text}]),
            ),
        };
        let uuid = format!("{id}-{i}");
        let line = json!({
            "parentUuid": parent, "isSidechain": false, "userType": "external",
            "cwd": "/home/me/project", "sessionId": id, "version": "2.1.3",
            "type": kind, "uuid": uuid, "timestamp": format!("2026-11-20T10:00:{:02}.000Z", i % 60),
            "message": {"role": kind, "content": content},
        });
        out.push_str(&line.to_string());
        out.push('\n');
        parent = json!(uuid);
    }
    out
}

fn correction_session() -> String {
    session(
        "s-correct",
        &[
            Step::User("Clean up the build output please"),
            Step::Call(
                "toolu_1",
                "Bash",
                json!({"command": "rm -rf build", "description": "Remove build"}),
            ),
            Step::Result("toolu_1", false, ""),
            Step::Assistant("Removed the build directory."),
            Step::User(
                "No, don't delete build! It holds the release artifacts. Use cargo clean instead.",
            ),
            Step::Call("toolu_2", "Bash", json!({"command": "cargo clean"})),
            Step::Result("toolu_2", false, "Removed 120 files"),
        ],
    )
}

fn retry_session(id: &str) -> String {
    session(
        id,
        &[
            Step::User("Run the tests"),
            Step::Call("toolu_1", "Bash", json!({"command": "npm test"})),
            Step::Result(
                "toolu_1",
                true,
                "npm error Missing script: \"test\"\nnpm error To see a list of scripts, run: npm run",
            ),
            Step::Call(
                "toolu_2",
                "Read",
                json!({"file_path": "/home/me/project/package.json"}),
            ),
            Step::Result(
                "toolu_2",
                false,
                "{\"scripts\": {\"test:unit\": \"vitest run\"}}",
            ),
            Step::Call("toolu_3", "Bash", json!({"command": "npm run test:unit"})),
            Step::Result("toolu_3", false, "12 passed"),
            Step::User("Great, thanks"),
        ],
    )
}

fn repeat_session() -> String {
    session(
        "s-repeat",
        &[
            Step::User("Build it"),
            Step::Call(
                "toolu_1",
                "Bash",
                json!({"command": "cargo build --offline"}),
            ),
            Step::Result(
                "toolu_1",
                true,
                "error: failed to download `serde`\nnetwork is off",
            ),
            Step::Assistant("Let me try again."),
            Step::Call(
                "toolu_2",
                "Bash",
                json!({"command": "cargo build --offline"}),
            ),
            Step::Result(
                "toolu_2",
                true,
                "error: failed to download `serde`\nnetwork is off",
            ),
        ],
    )
}

/// A session where nothing went wrong, with openers that only look like corrections.
fn clean_session() -> String {
    session(
        "s-clean",
        &[
            Step::User("What changed on this branch?"),
            Step::Call(
                "toolu_1",
                "Bash",
                json!({"command": "git log --oneline -5"}),
            ),
            Step::Result("toolu_1", false, "abc123 fix\ndef456 feat"),
            Step::Assistant("Two commits."),
            Step::User("No problem, and now show the diff"),
            Step::Call("toolu_2", "Bash", json!({"command": "git diff main"})),
            Step::Result("toolu_2", false, "diff --git a/x b/x"),
            Step::User("Never mind, that is fine. Thanks!"),
        ],
    )
}

fn write(dir: &Path, name: &str, text: &str) {
    std::fs::write(dir.join(name), text).expect("write session");
}

fn suggested(scan: &Value) -> Vec<(String, String)> {
    scan["suggested"]
        .as_array()
        .expect("suggested")
        .iter()
        .map(|f| {
            (
                f["heuristic"].as_str().unwrap().to_string(),
                f["session"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn each_heuristic_finds_its_case_and_stays_quiet_on_a_clean_session() {
    let mut s = start("lessons", &[]);
    let sessions = tempfile::tempdir().unwrap();
    let dir = sessions.path().to_str().unwrap().to_string();
    let cases = [
        (
            "correct.jsonl",
            correction_session(),
            "correction",
            "s-correct",
        ),
        (
            "retry.jsonl",
            retry_session("s-retry"),
            "retry-succeeded",
            "s-retry",
        ),
        (
            "repeat.jsonl",
            repeat_session(),
            "repeated-failure",
            "s-repeat",
        ),
    ];
    for (file, text, heuristic, id) in &cases {
        write(sessions.path(), file, text);
        let scan = s.ok("lessons_scan", json!({"dir": dir}));
        assert_eq!(
            suggested(&scan),
            [(heuristic.to_string(), id.to_string())],
            "{file}: {scan}"
        );
        assert_eq!(scan["suggested"][0]["new"], json!(true));
    }
    write(sessions.path(), "clean.jsonl", &clean_session());
    let scan = s.ok("lessons_scan", json!({"dir": dir}));
    assert_eq!(
        suggested(&scan),
        [],
        "false positives on a clean session: {scan}"
    );

    // Each suggestion is a candidate tagged heuristic, with its evidence, never active.
    let review = s.ok("lessons_review", json!({"limit": 50}));
    let candidates = review["candidates"].as_array().unwrap();
    let heuristic: Vec<&Value> = candidates
        .iter()
        .filter(|c| c["tags"].as_array().unwrap().contains(&json!("heuristic")))
        .collect();
    assert_eq!(heuristic.len(), 3, "{review}");
    let correction = heuristic
        .iter()
        .find(|c| {
            c["tags"]
                .as_array()
                .unwrap()
                .contains(&json!("heuristic:correction"))
        })
        .unwrap();
    assert_eq!(correction["status"], "candidate");
    assert_eq!(correction["tool_names"], json!(["Bash"]));
    assert_eq!(correction["trigger"], "rm -rf build");
    let evidence = &correction["evidence"][0];
    assert_eq!(evidence["heuristic"], "correction");
    assert_eq!(evidence["session"], "s-correct");
    assert_eq!(evidence["line"], 5);
    assert_eq!(evidence["calls"][0]["key"], "rm -rf build");
    assert!(
        evidence["said"]
            .as_str()
            .unwrap()
            .starts_with("No, don't delete build")
    );
    let retry = heuristic
        .iter()
        .find(|c| {
            c["tags"]
                .as_array()
                .unwrap()
                .contains(&json!("heuristic:retry-succeeded"))
        })
        .unwrap();
    assert!(
        retry["solution"]
            .as_str()
            .unwrap()
            .contains("npm run test:unit"),
        "{retry}"
    );
    assert_eq!(retry["evidence"][0]["calls"][1]["key"], "npm run test:unit");
    let active = s.ok("lessons_list", json!({}));
    assert!(
        !active.to_string().contains("heuristic"),
        "a suggestion is never active: {active}"
    );
    s.finish();
}

#[test]
fn findings_count_up_across_sessions_once_per_finding() {
    let mut s = start("lessons", &[]);
    let sessions = tempfile::tempdir().unwrap();
    let dir = sessions.path().to_str().unwrap().to_string();
    write(sessions.path(), "a.jsonl", &retry_session("s-a"));
    let first = s.ok("lessons_scan", json!({"dir": dir}));
    let slug = first["suggested"][0]["slug"].as_str().unwrap().to_string();
    // The same lines again, even in a full rescan, count nothing.
    let again = s.ok("lessons_scan", json!({"dir": dir, "full": true}));
    assert_eq!(suggested(&again), [], "{again}");
    // The same finding in another session counts the candidate up.
    write(sessions.path(), "b.jsonl", &retry_session("s-b"));
    let second = s.ok("lessons_scan", json!({"dir": dir}));
    assert_eq!(second["suggested"][0]["slug"], slug.as_str(), "{second}");
    assert_eq!(second["suggested"][0]["new"], json!(false));
    let review = s.ok("lessons_review", json!({}));
    let c = review["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["slug"] == slug.as_str())
        .unwrap()
        .clone();
    assert_eq!(c["occurrences"], 2, "{c}");
    assert_eq!(c["evidence"].as_array().unwrap().len(), 2);
    // Archived by the reviewer: not suggested again.
    s.ok("lessons_cancel", json!({"id_or_slug": slug}));
    write(sessions.path(), "c.jsonl", &retry_session("s-c"));
    let third = s.ok("lessons_scan", json!({"dir": dir}));
    assert_eq!(suggested(&third), [], "{third}");
    s.finish();
}

#[test]
fn tier_two_can_be_switched_off_and_broken_files_do_no_harm() {
    let mut s = start("lessons", &[]);
    let sessions = tempfile::tempdir().unwrap();
    let dir = sessions.path().to_str().unwrap().to_string();
    s.ok(
        "lessons_config_set",
        json!({"key": "scanning.heuristics", "value": false}),
    );
    write(sessions.path(), "repeat.jsonl", &repeat_session());
    let off = s.ok("lessons_scan", json!({"dir": dir}));
    assert_eq!(suggested(&off), [], "{off}");
    let config = s.ok("lessons_config_get", json!({}));
    assert_eq!(config["config"]["scanning"]["heuristics"], json!(false));
    s.ok(
        "lessons_config_set",
        json!({"key": "scanning.heuristics", "value": true}),
    );
    // A malformed file and a half-written one: skipped without harm, and the half-written
    // line is read once it is complete.
    let retry = retry_session("s-half");
    let cut = retry[..retry.len() / 2].rfind('\n').map_or(0, |i| i + 1);
    write(sessions.path(), "half.jsonl", &retry[..cut + 10]);
    write(
        sessions.path(),
        "broken.jsonl",
        "{\"type\": \"assistant\", \"message\": \n[1,2\nnot json at all\n\u{0}\u{1}\n",
    );
    let partial = s.ok("lessons_scan", json!({"dir": dir}));
    assert_eq!(suggested(&partial), [], "{partial}");
    write(sessions.path(), "half.jsonl", &retry);
    let whole = s.ok("lessons_scan", json!({"dir": dir}));
    assert_eq!(
        suggested(&whole),
        [("retry-succeeded".to_string(), "s-half".to_string())],
        "{whole}"
    );
    s.finish();
}

/// A lessons server started as a client would, with its stderr read line by line.
fn serve_logging(db: &Path) -> (StdioClient, Receiver<String>) {
    let mut c = StdioClient::spawn(
        Command::new(EXE)
            .args(["serve", "lessons", "--db"])
            .arg(db)
            .env("LESSONS_PROXY_CONFIG", db.with_extension("none.json"))
            .env("MCPSPEC_LOG", "info")
            .env_remove("MCPSPEC_STARTUP_JOBS")
            .stderr(Stdio::piped()),
    )
    .expect("spawn");
    let (tx, rx) = std::sync::mpsc::channel();
    let stderr = c.take_stderr().expect("stderr");
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    (c, rx)
}

/// The first stderr line of a start-up job's outcome.
fn job_outcome(rx: &Receiver<String>) -> String {
    loop {
        let line = rx
            .recv_timeout(Duration::from_secs(20))
            .expect("the start-up job logs its outcome");
        if line.contains("start-up job") {
            return line;
        }
    }
}

fn set_sessions_dir(db: &Path, dir: &str) {
    rusqlite::Connection::open(db)
        .unwrap()
        .execute(
            "INSERT INTO settings (key, value) VALUES ('scanning.sessions_dir', ?1)",
            [json!(dir).to_string()],
        )
        .unwrap();
}

#[test]
fn the_start_up_scan_picks_up_a_tagged_lesson_without_any_call() {
    let db = sample_db("lessons");
    let sessions = tempfile::tempdir().unwrap();
    let mut text = session(
        "s-tagged",
        &[
            Step::User("Publish the crate"),
            Step::Assistant(
                "Done.\n#lesson\ntool: Bash\ntrigger: cargo publish\nproblem: publishing without --dry-run pushed a broken crate\nsolution: run cargo publish --dry-run first\n#/lesson",
            ),
        ],
    );
    // Plenty of other sessions, so that the scan is still running while the client calls.
    for i in 0..200 {
        text.push_str(&retry_session(&format!("s-{i}")));
    }
    write(sessions.path(), "big.jsonl", &text);
    set_sessions_dir(&db.path, sessions.path().to_str().unwrap());
    let (mut c, stderr) = serve_logging(&db.path);
    // The client is served at once, whatever the job is doing.
    let init = c.initialize().expect("initialize");
    assert!(init.get("result").is_some(), "{init}");
    let listed = c.call_tool("lessons_list", json!({})).expect("a call");
    assert_eq!(listed["result"]["isError"], json!(false), "{listed}");
    let outcome = job_outcome(&stderr);
    assert!(outcome.contains("start-up job finished"), "{outcome}");
    assert!(outcome.contains("lessons_scan"), "{outcome}");
    let review = c.call_tool("lessons_review", json!({"limit": 50})).unwrap();
    let candidates = &review["result"]["structuredContent"]["candidates"];
    assert!(
        candidates
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l["slug"] == "cargo-publish" && l["source"] == "scan"),
        "{review}"
    );
    assert!(
        c.finish(Duration::from_secs(10))
            .is_some_and(|s| s.success())
    );
}

#[test]
fn a_failing_start_up_job_is_logged_and_the_server_keeps_serving() {
    let db = sample_db("lessons");
    let missing = db.path.with_extension("no-sessions-here");
    set_sessions_dir(&db.path, missing.to_str().unwrap());
    let (mut c, stderr) = serve_logging(&db.path);
    let outcome = job_outcome(&stderr);
    assert!(outcome.contains("start-up job failed"), "{outcome}");
    assert!(outcome.contains("SESSIONS_NOT_FOUND"), "{outcome}");
    c.initialize().expect("initialize");
    let listed = c.call_tool("lessons_list", json!({})).expect("a call");
    assert_eq!(listed["result"]["isError"], json!(false), "{listed}");
    assert!(
        c.finish(Duration::from_secs(10))
            .is_some_and(|s| s.success())
    );
}

/// lessons_scan may run as a task (`task: optional`): for a client that takes tasks it checks
/// the directory first (a bad one is answered at once, no task made), then reads the sessions
/// in a task whose result `tasks/get` inlines.
#[test]
fn a_scan_runs_as_a_task_for_a_client_that_takes_tasks() {
    use crate::conformance::tasks::{created, rpc, until};
    let db = sample_db("lessons");
    let mut c = StdioClient::spawn(
        Command::new(EXE)
            .args(["serve", "lessons", "--db"])
            .arg(&db.path)
            .env("LESSONS_PROXY_CONFIG", db.path.with_extension("none.json"))
            .env_remove("MCPSPEC_STARTUP_JOBS")
            .stderr(Stdio::null()),
    )
    .expect("spawn");
    let scan = |dir: &str| json!({"name": "lessons_scan", "arguments": {"dir": dir}});
    let r = rpc(&mut c, "tools/call", scan("/nonexistent/sessions"));
    assert_eq!(r["result"]["resultType"], "complete", "{r}");
    assert_eq!(r["result"]["isError"], json!(true), "{r}");
    let sessions = tempfile::tempdir().unwrap();
    write(sessions.path(), "correct.jsonl", &correction_session());
    let id = created(&rpc(
        &mut c,
        "tools/call",
        scan(sessions.path().to_str().unwrap()),
    ));
    let done = until(&mut c, &id, "completed");
    let result = &done["result"]["structuredContent"];
    assert_eq!(
        suggested(result),
        [("correction".to_string(), "s-correct".to_string())],
        "{done}"
    );
}
