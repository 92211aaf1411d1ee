//! Every call is answered by its deadline, slow calls of one tool never hold up the calls of
//! another, and shutdown is bounded: the conformance kit's `slow_compute` with `stubborn`
//! (a handler that ignores its cancellation and deadline) over stdio.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use mcpspec_testkit::StdioClient;
use serde_json::{Value, json};

use crate::common::TESTBED;

/// The conformance kit over stdio with `env`, initialized.
fn conformance(env: &[(&str, &str)]) -> StdioClient {
    let mut c = Command::new(TESTBED);
    c.args(["serve", "conformance"])
        .current_dir(std::env::temp_dir())
        .env("MCPSPEC_LOG", "warn")
        .env("MCPSPEC_STARTUP_JOBS", "off")
        .stderr(Stdio::null());
    for (k, v) in env {
        c.env(k, v);
    }
    let mut client = StdioClient::spawn(&mut c).expect("spawn");
    client.initialize().expect("initialize");
    client
}

fn stubborn(id: &str, seconds: u32) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
        "name": "slow_compute", "arguments": {"seconds": seconds, "stubborn": true}}})
    .to_string()
}

/// The tool error a response carries, by code.
fn error_code(r: &Value) -> String {
    let text = r["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    let e: Value = serde_json::from_str(text).unwrap_or(Value::Null);
    e["error"]["code"].as_str().unwrap_or_default().to_string()
}

/// A handler that never looks at its deadline is answered `TIMEOUT` at it, not when (or if)
/// it returns.
#[test]
fn a_handler_call_is_answered_at_its_deadline() {
    let mut c = conformance(&[("MCPSPEC_CALL_TIMEOUT_MS", "1000")]);
    let started = Instant::now();
    c.send_line(&stubborn("stuck", 30)).unwrap();
    let r = c
        .recv_response(&json!("stuck"))
        .expect("an answer by the deadline");
    assert_eq!(error_code(&r), "TIMEOUT", "{r}");
    assert_eq!(r["result"]["isError"], json!(true), "{r}");
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "answered after {:?}",
        started.elapsed()
    );
    assert!(c.finish(Duration::from_secs(10)).is_some());
}

/// Twenty slow calls of one tool take at most its share of the threads: a call of another
/// tool is answered while all of them still run.
#[test]
fn slow_calls_of_one_tool_do_not_hold_up_another() {
    let mut c = conformance(&[]);
    for i in 0..20 {
        c.send_line(&stubborn(&format!("slow-{i}"), 2)).unwrap();
    }
    // The quick call is read after the slow ones, so without a bound it would queue behind.
    let quick = json!({"jsonrpc": "2.0", "id": "quick", "method": "tools/call",
        "params": {"name": "greet", "arguments": {"name": "Ada"}}});
    c.send_line(&quick.to_string()).unwrap();
    let r = c
        .recv_response(&json!("quick"))
        .expect("the quick call's answer");
    assert_eq!(r["result"]["content"][0]["text"], "Hello, Ada!", "{r}");
    let early: Vec<&Value> = c.other.iter().filter(|m| m.get("id").is_some()).collect();
    assert!(
        early.is_empty(),
        "a slow call ended before the quick one was answered: {early:?}"
    );
    for i in 0..20 {
        let r = c
            .recv_response(&json!(format!("slow-{i}")))
            .expect("each slow call's answer");
        assert_eq!(r["result"]["isError"], json!(false), "{r}");
    }
    assert!(c.finish(Duration::from_secs(10)).is_some());
}

/// A client that keeps 64 calls of one tool in flight has them run on the threads of the
/// tool's places, which pass from call to call: the server starts no thread per call.
/// (Spawning each call's work on tokio's pool grew it by churn: 31-35 threads in all here, up
/// to 64 in `bench/run`, each with its own share of the allocator's memory.) The rest of the process is the main thread, stdin's
/// three readers and stdout's writer, and a few of tokio's.
#[test]
fn pipelined_calls_run_on_their_tools_places_without_a_thread_each() {
    let mut c = conformance(&[]);
    let greet = |id: usize| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "greet", "arguments": {"name": "Ada"}}})
        .to_string()
    };
    let (calls, in_flight) = (3000, 64);
    let mut sent = 0;
    for answered in 0..calls {
        while sent < calls && sent < answered + in_flight {
            c.send_line(&greet(sent)).unwrap();
            sent += 1;
        }
        let r = c.recv_response(&json!(answered)).expect("an answer");
        assert_eq!(r["result"]["content"][0]["text"], "Hello, Ada!", "{r}");
    }
    let task = format!("/proc/{}/task", c.pid());
    let names: Vec<String> = std::fs::read_dir(&task)
        .expect("the server's threads")
        .map(|t| std::fs::read_to_string(t.unwrap().path().join("comm")).unwrap_or_default())
        .map(|n| n.trim().to_string())
        .collect();
    let places = 16;
    assert!(
        names.len() <= places + 8,
        "{} threads: {names:?}",
        names.len()
    );
    assert!(c.finish(Duration::from_secs(10)).is_some());
}

/// A call still running when stdin closes holds the exit up for the shutdown timeout at
/// most, even when its handler never returns in time.
#[test]
fn shutdown_is_bounded_by_its_timeout_whatever_a_handler_does() {
    let mut c = conformance(&[
        ("MCPSPEC_SHUTDOWN_TIMEOUT_SECS", "1"),
        ("MCPSPEC_CALL_TIMEOUT_MS", "60000"),
    ]);
    c.send_line(&stubborn("long", 50)).unwrap();
    let started = Instant::now();
    let (status, messages) = c.finish_keep_reading(Duration::from_secs(20));
    assert!(status.is_some(), "the server did not exit");
    // The timeout, then a second for the runtime at most; rmcp alone would wait five more.
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "exit took {:?}",
        started.elapsed()
    );
    let answer = messages
        .iter()
        .find(|m| m["id"] == "long")
        .expect("the call is answered");
    assert_eq!(error_code(answer), "SHUTTING_DOWN", "{answer}");
}

/// A `subscriptions/listen` stream of protocol 2026-07-28 never ends on its own; closing
/// stdin ends it and the server exits at once, not after the shutdown timeout.
#[test]
fn an_open_listen_stream_does_not_hold_up_shutdown() {
    let mut c = conformance(&[("MCPSPEC_SHUTDOWN_TIMEOUT_SECS", "30")]);
    let listen = json!({"jsonrpc": "2.0", "id": "watch", "method": "subscriptions/listen",
        "params": {"_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
        }, "notifications": {"toolsListChanged": true}}});
    c.send_line(&listen.to_string()).unwrap();
    let ack = c
        .recv(Duration::from_secs(10))
        .expect("the acknowledgement");
    assert_eq!(
        ack["method"], "notifications/subscriptions/acknowledged",
        "{ack}"
    );
    let started = Instant::now();
    let status = c.finish(Duration::from_secs(40));
    assert!(status.is_some_and(|s| s.success()), "{status:?}");
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "exit took {:?}",
        started.elapsed()
    );
}
