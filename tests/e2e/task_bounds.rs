//! Tasks are bounded: per session and in all, a call that may run as a task answers in its
//! request once no more fit and one that must is refused; a large result is kept in a file,
//! not in memory; a task is its session's; an id is quoted back bounded.

use std::process::{Command, Stdio};

use mcpspec_testkit::{HttpClient, StdioClient};
use serde_json::{Value, json};

use crate::common::TESTBED;

const TASKS: &str = "io.modelcontextprotocol/tasks";

/// The conformance kit over stdio in a 2025-11-25 session that declared the tasks extension,
/// with its temporary files in `tmp`.
fn session(tmp: &std::path::Path) -> StdioClient {
    let mut c = StdioClient::spawn(
        Command::new(TESTBED)
            .args(["serve", "conformance"])
            .env("MCPSPEC_LOG", "warn")
            .env("TMPDIR", tmp)
            .stderr(Stdio::null()),
    )
    .expect("spawn");
    let init = c
        .request(
            "initialize",
            json!({"protocolVersion": "2025-11-25",
                   "capabilities": {"extensions": {TASKS: {}}},
                   "clientInfo": {"name": "e2e", "version": "1"}}),
        )
        .unwrap();
    assert!(init.get("result").is_some(), "{init}");
    c.notify("notifications/initialized", json!({})).unwrap();
    c
}

fn tool_error(r: &Value) -> Value {
    assert_eq!(r["result"]["isError"], json!(true), "{r}");
    let text = r["result"]["content"][0]["text"].as_str().unwrap();
    serde_json::from_str::<Value>(text).unwrap()["error"].clone()
}

/// Waits (polling `tasks/get`) until task `id` completed; its result.
fn completed(c: &mut StdioClient, id: &str) -> Value {
    for _ in 0..500 {
        let r = c.request("tasks/get", json!({"taskId": id})).unwrap();
        match r["result"]["status"].as_str() {
            Some("completed") => return r["result"]["result"].clone(),
            Some("working") => std::thread::sleep(std::time::Duration::from_millis(20)),
            _ => panic!("{r}"),
        }
    }
    panic!("task {id} never completed");
}

#[test]
fn a_session_holds_at_most_its_share_of_tasks() {
    let tmp = tempfile::tempdir().unwrap();
    let mut c = session(tmp.path());
    let mut ids = Vec::new();
    for i in 0..64 {
        let r = c
            .call_tool(
                "slow_compute",
                json!({"seconds": 0, "label": format!("t{i}")}),
            )
            .unwrap();
        assert_eq!(r["result"]["resultType"], "task", "call {i}: {r}");
        ids.push(r["result"]["taskId"].as_str().unwrap().to_string());
    }
    // The session is full: a call that may run as a task answers in its request.
    let r = c
        .call_tool("slow_compute", json!({"seconds": 0, "label": "plain"}))
        .unwrap();
    assert!(r["result"].get("taskId").is_none(), "{r}");
    assert_eq!(
        r["result"]["content"][0]["text"], "Computed plain after 0 seconds",
        "{r}"
    );
    // One that must run as a task is refused, saying why and what to do.
    let e = tool_error(&c.call_tool("failing_job", json!({})).unwrap());
    assert_eq!(e["code"], "TOO_MANY_TASKS", "{e}");
    assert_eq!(
        (e["limit"].as_u64(), e["held"].as_u64()),
        (Some(64), Some(64)),
        "{e}"
    );
    assert!(
        e["message"].as_str().unwrap().contains("tasks/cancel"),
        "{e}"
    );
    // The tasks it holds are all still there.
    assert_eq!(
        completed(&mut c, &ids[63])["content"][0]["text"],
        "Computed t63 after 0 seconds"
    );
    assert!(c.finish(std::time::Duration::from_secs(10)).is_some());
}

#[test]
fn a_large_task_result_is_kept_in_a_file_and_read_back_whole() {
    let tmp = tempfile::tempdir().unwrap();
    let mut c = session(tmp.path());
    let label = "x".repeat(200_000);
    let r = c
        .call_tool("slow_compute", json!({"seconds": 0, "label": label}))
        .unwrap();
    let id = r["result"]["taskId"].as_str().unwrap().to_string();
    let result = completed(&mut c, &id);
    assert_eq!(
        result["content"][0]["text"],
        format!("Computed {label} after 0 seconds")
    );
    let kept: Vec<_> = walk(tmp.path())
        .into_iter()
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy() == format!("{id}.json"))
        })
        .collect();
    assert_eq!(kept.len(), 1, "the result is kept in one file");
    assert!(std::fs::metadata(&kept[0]).unwrap().len() > 200_000);
    // A small one stays in memory.
    let r = c.call_tool("slow_compute", json!({"seconds": 0})).unwrap();
    let small = r["result"]["taskId"].as_str().unwrap().to_string();
    completed(&mut c, &small);
    assert!(
        walk(tmp.path())
            .iter()
            .all(|p| !p.ends_with(format!("{small}.json")))
    );
    assert!(c.finish(std::time::Duration::from_secs(10)).is_some());
    // The files go with the process.
    assert!(walk(tmp.path()).is_empty(), "{:?}", walk(tmp.path()));
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// Over HTTP, a task is its session's: another session cannot see, update or cancel it, and
/// learns nothing from trying (the same answer as for an id that never existed). A 1 MiB id
/// is quoted back bounded.
#[test]
fn a_task_belongs_to_its_session() {
    let server = crate::http::HttpServer::serve(&["conformance"], &[]);
    let session = || {
        let mut c = HttpClient::new(server.addr, None);
        let init = c
            .initialize_with(json!({"extensions": {TASKS: {}}}))
            .unwrap();
        assert!(init.get("result").is_some(), "{init}");
        c
    };
    let (mut a, mut b) = (session(), session());
    let r = a.call_tool("slow_compute", json!({"seconds": 30})).unwrap();
    let id = r["result"]["taskId"].as_str().expect("a task").to_string();
    let never = b
        .request(
            "tasks/get",
            json!({"taskId": "0f0f0f0f-0000-4000-8000-000000000000"}),
        )
        .unwrap();
    for (method, params) in [
        ("tasks/get", json!({"taskId": id})),
        ("tasks/cancel", json!({"taskId": id})),
        ("tasks/update", json!({"taskId": id, "inputResponses": {}})),
    ] {
        let r = b.request(method, params).unwrap();
        assert_eq!(r["error"]["code"], never["error"]["code"], "{method}: {r}");
        assert!(
            r["error"]["message"]
                .as_str()
                .unwrap()
                .starts_with("unknown task"),
            "{r}"
        );
    }
    let mine = a.request("tasks/get", json!({"taskId": id})).unwrap();
    assert_eq!(mine["result"]["status"], "working", "{mine}");
    let huge = "t".repeat(1 << 20);
    let r = b.request("tasks/get", json!({"taskId": huge})).unwrap();
    assert!(r.to_string().len() < 2048, "{} bytes", r.to_string().len());
    let r = a.request("tasks/cancel", json!({"taskId": id})).unwrap();
    assert!(r.get("result").is_some(), "{r}");
}
