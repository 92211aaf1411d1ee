//! Bad input of every kind gets a clear, correctly shaped answer and never a crash or a hang.

use serde_json::{Value, json};

use crate::common::{EXE, Session, sample_db, start};

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
        let mut c = mcpspec_testkit::StdioClient::spawn(
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
    let mut c = mcpspec_testkit::StdioClient::spawn(
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

/// Integers that JSON Schema accepts but an `i64` cannot hold, or that are written with a
/// fraction or exponent, are `INVALID_ARGUMENTS` naming the field, for SQL and handler tools
/// alike; never an internal error or serde's own text.
#[test]
fn integers_outside_i64_or_written_as_floats_are_invalid_arguments() {
    // (server, tool, arguments, field, what the message says)
    let cases = [
        (
            "studio",
            "query_learnings",
            r#"{"limit": 1.0}"#,
            "limit",
            "without a fraction",
        ),
        (
            "studio",
            "query_learnings",
            r#"{"limit": 1e308}"#,
            "limit",
            "maximum of 50",
        ),
        (
            "studio",
            "query_learnings",
            r#"{"limit": 9223372036854775808}"#,
            "limit",
            "maximum of 50",
        ),
        (
            "lessons",
            "lessons_edit",
            r#"{"id": 9223372036854775808, "patch": {"trigger": "run the tests"}}"#,
            "id",
            "outside the 64-bit integer range",
        ),
        (
            "lessons",
            "lessons_edit",
            r#"{"id": 1e308, "patch": {"trigger": "run the tests"}}"#,
            "id",
            "outside the 64-bit integer range",
        ),
        (
            "lessons",
            "lessons_edit",
            r#"{"id": 1.0, "patch": {"trigger": "run the tests"}}"#,
            "id",
            "without a fraction",
        ),
        (
            "lessons",
            "lessons_list",
            r#"{"limit": 2.0}"#,
            "limit",
            "without a fraction",
        ),
    ];
    for server in ["studio", "lessons"] {
        let mut s = start(server, &[]);
        for (_, tool, args, field, says) in cases.iter().filter(|c| c.0 == server) {
            // Sent as text: `json!` would turn the big integer into a float.
            let line = format!(
                r#"{{"jsonrpc":"2.0","id":"int","method":"tools/call","params":{{"name":"{tool}","arguments":{args}}}}}"#
            );
            let r = s.raw(&line);
            assert_eq!(r["result"]["isError"], json!(true), "{tool} {args}: {r}");
            let text: Value =
                serde_json::from_str(r["result"]["content"][0]["text"].as_str().unwrap()).unwrap();
            let e = &text["error"];
            assert_eq!(e["code"], "INVALID_ARGUMENTS", "{tool} {args}: {e}");
            assert_eq!(e["field"], *field, "{tool} {args}: {e}");
            let message = e["message"].as_str().unwrap();
            assert!(message.contains(says), "{tool} {args}: {message}");
            assert!(
                !message.contains("invalid type"),
                "serde's text leaked: {message}"
            );
        }
        s.finish();
    }
}

/// A huge bad value is quoted back shortened, not whole (a 1 MiB `search` once gave a 2 MB
/// error).
#[test]
fn validation_errors_quote_at_most_about_a_hundred_characters_of_a_value() {
    let mut s = start("studio", &[]);
    let big = "q".repeat(1024 * 1024);
    let response = s.call("query_learnings", json!({"search": big}));
    let size = response.to_string().len();
    assert!(size < 2_000, "the error is {size} bytes");
    let text: Value =
        serde_json::from_str(response["result"]["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(text["error"]["code"], "INVALID_ARGUMENTS");
    assert_eq!(text["error"]["field"], "search");
    assert!(
        text["error"]["message"]
            .as_str()
            .unwrap()
            .contains("longer than 200"),
        "{text}"
    );
    s.finish();
}

/// `"\ud800"` (which Python's json module writes) is not Unicode, so the line is not valid
/// JSON; but its id can be read, so the client gets an answer it can match.
#[test]
fn a_lone_surrogate_is_an_argument_error_for_the_request_it_came_in() {
    let mut s = start("studio", &[]);
    let r = s.raw(
        r#"{"jsonrpc":"2.0","id":41,"method":"tools/call","params":{"name":"query_learnings","arguments":{"search":"ab\ud800cd"}}}"#,
    );
    assert_eq!(r["id"], 41, "{r}");
    assert_eq!(r["result"]["isError"], json!(true), "{r}");
    let text: Value =
        serde_json::from_str(r["result"]["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(text["error"]["code"], "INVALID_ARGUMENTS");
    assert_eq!(text["error"]["field"], "search");
    // Any other method: invalid params, for its id.
    expect_protocol_error(
        &mut s,
        r#"{"jsonrpc":"2.0","id":"p","method":"prompts/get","params":{"name":"\udc01"}}"#,
        -32602,
        json!("p"),
    );
    // A proper pair is fine, and so is the session.
    let ok = s.ok("query_learnings", json!({"search": "\u{1F600}"}));
    assert!(ok["learnings"].is_array());
    s.finish();
}

/// The last message may end at end of input without a newline: it is still run and answered
/// before the server exits.
#[test]
fn the_last_line_without_a_newline_is_run_and_answered() {
    let mut s = crate::common::start("knowledge", &[]);
    let db = s.db.path.clone();
    let before = crate::common::count_rows(&db, "knowledge_entries");
    let call = json!({"jsonrpc": "2.0", "id": "last", "method": "tools/call",
                      "params": {"name": "kb_add", "arguments": {"content": "the last word", "role": "dev"}}});
    s.stdio().send_bytes(call.to_string().as_bytes()).unwrap();
    let Session {
        client: crate::common::Client::Stdio(client),
        db: keep,
        ..
    } = s
    else {
        unreachable!("a stdio session")
    };
    let (status, messages) = client.finish_keep_reading(std::time::Duration::from_secs(10));
    assert!(status.is_some_and(|s| s.success()), "{status:?}");
    let answer = messages
        .iter()
        .find(|m| m["id"] == "last")
        .unwrap_or_else(|| panic!("no answer to the last line: {messages:?}"));
    assert_eq!(answer["result"]["isError"], json!(false), "{answer}");
    assert_eq!(
        crate::common::count_rows(&keep.path, "knowledge_entries"),
        before + 1
    );
}

/// Requests that reuse the id of one in flight are refused and never run: every row written
/// has its own answer (three `kb_add` with one id once wrote three rows and got one answer).
#[test]
fn a_request_reusing_an_id_in_flight_never_runs() {
    let mut s = crate::common::start("knowledge", &[]);
    let before = crate::common::count_rows(&s.db.path, "knowledge_entries");
    let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                      "params": {"name": "kb_add", "arguments": {"content": "same id", "role": "dev"}}});
    // All three in one write, so the later ones arrive while the first is in flight or after
    // it was answered; either way each row written has exactly one answer.
    let line = call.to_string();
    s.stdio()
        .send_bytes(format!("{line}\n{line}\n{line}\n").as_bytes())
        .unwrap();
    let mut answers = Vec::new();
    while answers.len() < 3 {
        answers.push(
            s.stdio()
                .recv(std::time::Duration::from_secs(10))
                .expect("an answer per line"),
        );
    }
    let ok = answers
        .iter()
        .filter(|a| a["result"]["isError"] == json!(false))
        .count();
    let refused: Vec<&Value> = answers
        .iter()
        .filter(|a| a.get("error").is_some())
        .collect();
    assert_eq!(ok + refused.len(), 3, "{answers:?}");
    for r in &refused {
        assert_eq!(r["error"]["code"], -32600, "{r}");
        assert_eq!(r["id"], 7, "{r}");
        assert!(
            r["error"]["message"]
                .as_str()
                .unwrap()
                .contains("already in flight")
        );
    }
    assert_eq!(
        crate::common::count_rows(&s.db.path, "knowledge_entries"),
        before + ok as i64,
        "{answers:?}"
    );
    s.finish();
}

/// Whatever the client names, it is quoted back bounded: a 1 MiB unknown argument name, tool,
/// prompt, URI, method, completion reference or task id gets an answer of a few hundred
/// bytes, never the name repeated (it was 1 to 3 MB).
#[test]
fn names_are_echoed_bounded_whatever_their_length() {
    let big = "n".repeat(1 << 20);
    let tasks = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}},
    });
    let mut s =
        crate::common::start_project("conformance", tempfile::tempdir().unwrap(), json!({}));
    // (what, method, params, the answer's error code, or none for a tool error)
    let cases = [
        (
            "argument name",
            "tools/call",
            json!({"name": "greet", "arguments": {"name": "a", big.clone(): 1}}),
            None,
        ),
        (
            "argument names",
            "tools/call",
            json!({"name": "greet", "arguments": (0..5000).map(|i| (format!("{i}{big:.200}"), json!(1))).collect::<serde_json::Map<_, _>>()}),
            None,
        ),
        (
            "tool",
            "tools/call",
            json!({"name": big, "arguments": {}}),
            Some(-32602),
        ),
        ("prompt", "prompts/get", json!({"name": big}), Some(-32602)),
        ("uri", "resources/read", json!({"uri": big}), Some(-32002)),
        (
            "uri of a scheme",
            "resources/read",
            json!({"uri": format!("test://{big}")}),
            Some(-32002),
        ),
        (
            "completion reference",
            "completion/complete",
            json!({"ref": {"type": "ref/prompt", "name": big}, "argument": {"name": "x", "value": "y"}}),
            Some(-32602),
        ),
        (
            "resource template",
            "completion/complete",
            json!({"ref": {"type": "ref/resource", "uri": big}, "argument": {"name": "x", "value": "y"}}),
            Some(-32602),
        ),
        (
            "subscription",
            "resources/subscribe",
            json!({"uri": big}),
            Some(-32602),
        ),
        (
            "task id",
            "tasks/get",
            json!({"taskId": big, "_meta": tasks}),
            Some(-32602),
        ),
        ("method", big.as_str(), json!({}), Some(-32601)),
    ];
    for (what, method, params, code) in cases {
        let r = s.client.request(method, params).expect("an answer");
        let size = r.to_string().len();
        assert!(size < 4096, "{what}: {size} bytes");
        match code {
            Some(code) => assert_eq!(r["error"]["code"], code, "{what}: {r}"),
            None => assert_eq!(r["result"]["isError"], json!(true), "{what}: {r}"),
        }
    }
    s.finish();
}
