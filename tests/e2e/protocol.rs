//! Bad input of every kind gets a clear, correctly shaped answer and never a crash or a hang.

use serde_json::{Value, json};

use crate::common::{EXE, sample_db, start};

/// Sends one raw line and checks the JSON-RPC error code and id of the answer.
fn expect_protocol_error(
    s: &mut crate::common::Session,
    line: &str,
    code: i64,
    id: Value,
) -> Value {
    let r = s.raw(line);
    assert_eq!(r["jsonrpc"], "2.0", "{line} -> {r}");
    assert_eq!(r["error"]["code"], code, "{line} -> {r}");
    assert_eq!(r["id"], id, "{line} -> {r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()),
        "{r}"
    );
    r
}

#[test]
fn malformed_messages_get_json_rpc_errors() {
    let mut s = start("studio", &[]);
    // (line, code, id)
    let cases = [
        ("not json", -32700, Value::Null),
        ("{\"jsonrpc\":\"2.0\",\"id\":1,", -32700, Value::Null),
        ("[1,2]", -32600, Value::Null),
        ("42", -32600, Value::Null),
        (r#"{"id":10}"#, -32600, json!(10)),
        (
            r#"{"jsonrpc":"2.0","id":11,"method":"foo/bar","params":{}}"#,
            -32601,
            json!(11),
        ),
        (
            r#"{"jsonrpc":"2.0","id":"s","method":"resources/nonsense"}"#,
            -32601,
            json!("s"),
        ),
        (
            r#"{"jsonrpc":"2.0","id":12,"method":"tools/call"}"#,
            -32602,
            json!(12),
        ),
        (
            r#"{"jsonrpc":"2.0","id":13,"method":"tools/call","params":{"name":"get_learning","arguments":"L-1"}}"#,
            -32602,
            json!(13),
        ),
        (
            r#"{"jsonrpc":"2.0","id":14,"method":"tools/call","params":{"name":"get_learning","arguments":[1]}}"#,
            -32602,
            json!(14),
        ),
    ];
    for (line, code, id) in cases {
        expect_protocol_error(&mut s, line, code, id);
    }
    // The session is intact afterwards.
    assert_eq!(s.ok("get_learning", json!({"id": "L-015"}))["id"], "L-015");
    s.finish();
}

#[test]
fn unknown_tool_is_a_protocol_error_listing_the_tools() {
    let mut s = start("studio", &[]);
    let r = s.call("get_learnings", json!({}));
    assert_eq!(r["error"]["code"], -32602);
    assert_eq!(r["error"]["message"], "unknown tool: get_learnings");
    assert_eq!(r["error"]["data"]["tool"], "get_learnings");
    assert_eq!(r["error"]["data"]["available"][1], "get_learning");
    s.finish();
}

#[test]
fn invalid_arguments_are_tool_errors_naming_the_field() {
    let mut s = start("studio", &[]);
    // (tool, arguments, field, message)
    let cases = [
        (
            "get_learning",
            json!({}),
            "id",
            "invalid arguments: `id` is required",
        ),
        (
            "get_learning",
            json!({"id": 5}),
            "id",
            "invalid arguments: `id` is invalid: 5 is not of type \"string\"",
        ),
        (
            "get_learning",
            json!({"id": ""}),
            "id",
            "invalid arguments: `id` is invalid: \"\" is shorter than 1 character",
        ),
        (
            "get_learning",
            json!({"id": "L-1", "verbose": true}),
            "verbose",
            "invalid arguments: `verbose` is not an argument of this tool",
        ),
        (
            "query_learnings",
            json!({"limit": 0}),
            "limit",
            "invalid arguments: `limit` is invalid: 0 is less than the minimum of 1",
        ),
        (
            "query_learnings",
            json!({"limit": 51}),
            "limit",
            "invalid arguments: `limit` is invalid: 51 is greater than the maximum of 50",
        ),
        (
            "query_learnings",
            json!({"limit": 2.5}),
            "limit",
            "invalid arguments: `limit` is invalid: 2.5 is not of type \"integer\"",
        ),
        (
            "query_learnings",
            json!({"tags": "railway"}),
            "tags",
            "invalid arguments: `tags` is invalid: \"railway\" is not of type \"array\"",
        ),
        (
            "query_learnings",
            json!({"project_id": null}),
            "project_id",
            "invalid arguments: `project_id` is invalid: null is not of type \"string\"",
        ),
    ];
    for (tool, args, field, message) in cases {
        let err = s.tool_error(tool, args.clone());
        assert_eq!(err["code"], "INVALID_ARGUMENTS", "{tool} {args}");
        assert_eq!(err["field"], field, "{tool} {args}");
        assert_eq!(err["message"], message, "{tool} {args}");
        assert_eq!(err["errors"][0]["field"], field);
    }
    // Absent arguments are fine when nothing is required.
    let r = s.call("list_tags", Value::Null);
    assert_eq!(r["result"]["isError"], json!(false), "{r}");
    s.finish();
}

#[test]
fn oversized_input_is_refused_without_harm() {
    let mut s = start("studio", &[]);
    // An argument over the per-call limit (4 MiB) is a tool error.
    let big = "x".repeat(4_300_000);
    let err = s.tool_error("query_learnings", json!({"search": big}));
    assert_eq!(err["code"], "ARGUMENTS_TOO_LARGE");
    assert_eq!(err["limit"], 4_194_304);
    // A line over the transport limit (8 MiB) is discarded unbuffered and answered.
    let huge = format!(
        r#"{{"jsonrpc":"2.0","id":99,"method":"tools/call","params":{{"name":"get_learning","arguments":{{"id":"{}"}}}}}}"#,
        "y".repeat(9 * 1024 * 1024)
    );
    let r = s.raw(&huge);
    assert_eq!(
        r["error"]["code"],
        -32600,
        "{}",
        r.to_string().chars().take(200).collect::<String>()
    );
    assert_eq!(r["id"], Value::Null);
    assert_eq!(s.ok("get_learning", json!({"id": "L-015"}))["id"], "L-015");
    s.finish();
}

#[test]
fn protocol_versions_are_negotiated() {
    let db = sample_db("studio");
    // (requested, answered)
    for (requested, answered) in [
        ("2024-11-05", "2024-11-05"),
        ("2025-03-26", "2025-03-26"),
        ("2025-06-18", "2025-06-18"),
        ("2025-11-25", "2025-11-25"),
        ("1999-01-01", "2025-11-25"),
    ] {
        let mut c = server::client::StdioClient::spawn(
            std::process::Command::new(EXE)
                .args(["serve", "studio", "--db"])
                .arg(&db.path)
                .stderr(std::process::Stdio::null()),
        )
        .unwrap();
        let r = c
            .request(
                "initialize",
                json!({"protocolVersion": requested, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}),
            )
            .unwrap();
        assert_eq!(r["result"]["protocolVersion"], answered, "{requested}: {r}");
        assert_eq!(r["result"]["serverInfo"]["name"], "studio");
        assert_eq!(r["result"]["capabilities"]["tools"], json!({}));
        assert!(
            c.finish(std::time::Duration::from_secs(10))
                .is_some_and(|s| s.success())
        );
    }
}

#[test]
fn requests_before_initialize_are_answered_at_once() {
    let db = sample_db("studio");
    let mut c = server::client::StdioClient::spawn(
        std::process::Command::new(EXE)
            .args(["serve", "studio", "--db"])
            .arg(&db.path)
            .stderr(std::process::Stdio::null()),
    )
    .unwrap();
    // An unknown method before initialize: method not found, not a stall.
    let r = c.request("foo/bar", json!({})).unwrap();
    assert_eq!(r["error"]["code"], -32601, "{r}");
    // A 2026-07-28 client opens with server/discover; without its _meta the request is
    // answered with invalid params, so the client falls back or fixes the request.
    let r = c.request("server/discover", json!({})).unwrap();
    assert_eq!(r["error"]["code"], -32602, "{r}");
    // With the inline metadata the new lifecycle requires, discovery succeeds.
    let r = c
        .request(
            "server/discover",
            json!({"_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {}
            }}),
        )
        .unwrap();
    assert!(
        r["result"]["supportedVersions"]
            .as_array()
            .is_some_and(|v| v.contains(&json!("2025-11-25"))),
        "{r}"
    );
    // The classic lifecycle still works on the same connection.
    let r = c.initialize().unwrap();
    assert_eq!(r["result"]["protocolVersion"], "2025-11-25");
    let r = c.call_tool("get_learning", json!({"id": "L-023"})).unwrap();
    assert_eq!(r["result"]["structuredContent"]["id"], "L-023");
    assert!(
        c.finish(std::time::Duration::from_secs(10))
            .is_some_and(|s| s.success())
    );
}
