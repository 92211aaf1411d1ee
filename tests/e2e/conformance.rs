//! The runtime features behind spec/conformance.yaml over stdio: content-block results, log
//! levels, sampling and elicitation round trips answered by this test client, binary resources,
//! image prompt messages and resource subscriptions.

use std::time::Duration;

use serde_json::{Value, json};

use crate::common::{Session, start_project};

fn session(capabilities: Value) -> Session {
    start_project("conformance", tempfile::tempdir().unwrap(), capabilities)
}

/// Sends one request, answers each request of the server with `answer(method, params)`, and
/// returns the notifications that came before the response, the server's requests, and the
/// response.
fn exchange(
    s: &mut Session,
    method: &str,
    params: Value,
    answer: impl Fn(&str, &Value) -> Value,
) -> (Vec<Value>, Vec<Value>, Value) {
    let id = json!("x-1");
    let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    s.client.send_line(&msg.to_string()).unwrap();
    let (mut notes, mut asked) = (Vec::new(), Vec::new());
    loop {
        let m = s.client.recv(Duration::from_secs(10)).expect("a message");
        if m["id"] == id && m.get("method").is_none() {
            return (notes, asked, m);
        }
        match (m.get("id"), m["method"].as_str()) {
            (Some(rid), Some(meth)) => {
                let reply =
                    json!({"jsonrpc": "2.0", "id": rid, "result": answer(meth, &m["params"])});
                s.client.send_line(&reply.to_string()).unwrap();
                asked.push(m);
            }
            _ => notes.push(m),
        }
    }
}

fn no_answer(method: &str, _: &Value) -> Value {
    panic!("unexpected server request {method}")
}

fn call(s: &mut Session, tool: &str, args: Value) -> (Vec<Value>, Value) {
    let (notes, _, r) = exchange(
        s,
        "tools/call",
        json!({"name": tool, "arguments": args}),
        no_answer,
    );
    (notes, r["result"].clone())
}

#[test]
fn content_tools_return_blocks_and_publish_no_output_schema() {
    let mut s = session(json!({}));
    assert!(s.tool("test_image_content").get("outputSchema").is_none());
    let schema = &s.tool("json_schema_2020_12_tool")["inputSchema"];
    assert_eq!(
        schema["$schema"],
        "https://json-schema.org/draft/2020-12/schema"
    );
    assert_eq!(schema["$defs"]["address"]["type"], "object");
    assert_eq!(schema["additionalProperties"], false);
    let cases = [
        ("test_simple_text", json!({}), json!(["text"])),
        ("test_audio_content", json!({}), json!(["audio"])),
        (
            "test_multiple_content_types",
            json!({}),
            json!(["text", "image", "resource"]),
        ),
    ];
    for (tool, args, kinds) in cases {
        let (_, r) = call(&mut s, tool, args);
        let got: Vec<&Value> = r["content"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| &b["type"])
            .collect();
        assert_eq!(json!(got), kinds, "{tool}: {r}");
        assert!(r.get("structuredContent").is_none(), "{r}");
    }
    let (_, r) = call(&mut s, "test_audio_content", json!({}));
    assert_eq!(r["content"][0]["mimeType"], "audio/wav");
    let (_, r) = call(
        &mut s,
        "json_schema_2020_12_tool",
        json!({"name": "a", "address": {"city": "b"}}),
    );
    assert_eq!(
        r["content"][0]["text"],
        r#"JSON Schema 2020-12 tool called with: {"address": {"city": "b"}, "name": "a"}"#
    );
    let (_, r) = call(&mut s, "json_schema_2020_12_tool", json!({"address": 1}));
    assert_eq!(r["isError"], true, "{r}");
    let (_, r) = call(&mut s, "test_error_handling", json!({}));
    assert_eq!(r["isError"], true, "{r}");
    s.finish();
}

#[test]
fn log_messages_follow_the_level_the_client_set() {
    let mut s = session(json!({}));
    let levels = [(None, 3), (Some("error"), 0), (Some("debug"), 3)];
    for (level, expected) in levels {
        if let Some(l) = level {
            let r = s
                .client
                .request("logging/setLevel", json!({"level": l}))
                .unwrap();
            assert_eq!(r["result"], json!({}), "{r}");
        }
        let (notes, r) = call(&mut s, "test_tool_with_logging", json!({}));
        assert_eq!(r["isError"], false);
        assert_eq!(notes.len(), expected, "{level:?}: {notes:?}");
        for n in &notes {
            assert_eq!(n["method"], "notifications/message");
            assert_eq!(n["params"]["level"], "info");
        }
    }
    s.finish();
}

#[test]
fn sampling_round_trips_through_the_client() {
    let mut s = session(json!({"sampling": {}}));
    let (_, asked, r) = exchange(
        &mut s,
        "tools/call",
        json!({"name": "test_sampling", "arguments": {"prompt": "hello"}}),
        |_, _| json!({"role": "assistant", "content": {"type": "text", "text": "hi there"}, "model": "m"}),
    );
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0]["method"], "sampling/createMessage");
    assert_eq!(
        asked[0]["params"]["messages"][0]["content"]["text"],
        "hello"
    );
    assert_eq!(asked[0]["params"]["maxTokens"], 100);
    assert_eq!(
        r["result"]["content"][0]["text"], "LLM response: hi there",
        "{r}"
    );
    s.finish();
    // A client without the capability is not asked; the call fails as a tool error.
    let mut s = session(json!({}));
    let (_, r) = call(&mut s, "test_sampling", json!({"prompt": "hello"}));
    assert_eq!(r["isError"], true, "{r}");
    assert!(
        r["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("SAMPLING_FAILED")
    );
    s.finish();
}

#[test]
fn elicitation_forms_carry_defaults_and_enums() {
    let mut s = session(json!({"elicitation": {}}));
    let (_, asked, r) = exchange(
        &mut s,
        "tools/call",
        json!({"name": "test_elicitation_sep1034_defaults", "arguments": {}}),
        |_, _| json!({"action": "accept", "content": {"name": "Jane"}}),
    );
    let props = &asked[0]["params"]["requestedSchema"]["properties"];
    assert_eq!(props["name"]["default"], "John Doe");
    assert_eq!(props["age"]["default"], 30);
    assert_eq!(props["score"]["default"], 95.5);
    assert_eq!(
        props["status"]["enum"],
        json!(["active", "inactive", "pending"])
    );
    assert_eq!(props["verified"]["default"], true);
    assert_eq!(
        r["result"]["content"][0]["text"],
        r#"Elicitation completed: action=accept, content={"name":"Jane"}"#
    );
    let (_, asked, r) = exchange(
        &mut s,
        "tools/call",
        json!({"name": "test_elicitation_sep1330_enums", "arguments": {}}),
        |_, _| json!({"action": "decline"}),
    );
    let props = &asked[0]["params"]["requestedSchema"]["properties"];
    assert_eq!(props["titledSingle"]["oneOf"][0]["const"], "value1");
    assert_eq!(props["legacyEnum"]["enumNames"][2], "Option Three");
    assert_eq!(
        props["titledMulti"]["items"]["anyOf"][1]["title"],
        "Second Choice"
    );
    assert_eq!(
        r["result"]["content"][0]["text"],
        "Elicitation completed: action=decline, content={}"
    );
    s.finish();
}

#[test]
fn binary_resources_image_prompts_and_subscriptions() {
    let mut s = session(json!({}));
    let r = s
        .client
        .request("resources/read", json!({"uri": "test://static-binary"}))
        .unwrap();
    let c = &r["result"]["contents"][0];
    assert_eq!(c["mimeType"], "image/png");
    assert!(c["blob"].as_str().unwrap().starts_with("iVBOR"), "{r}");
    assert!(c.get("text").is_none());
    let r = s
        .client
        .request("prompts/get", json!({"name": "test_prompt_with_image"}))
        .unwrap();
    assert_eq!(r["result"]["messages"][0]["content"]["type"], "image");
    assert_eq!(
        r["result"]["messages"][0]["content"]["mimeType"],
        "image/png"
    );
    let watched = json!({"uri": "test://watched-resource"});
    let r = s
        .client
        .request("resources/subscribe", watched.clone())
        .unwrap();
    assert_eq!(r["result"], json!({}), "{r}");
    let (notes, _) = call(&mut s, "test_touch_watched_resource", json!({}));
    assert_eq!(
        notes,
        vec![
            json!({"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": watched})
        ]
    );
    let r = s.client.request("resources/unsubscribe", watched).unwrap();
    assert_eq!(r["result"], json!({}), "{r}");
    let (notes, _) = call(&mut s, "test_touch_watched_resource", json!({}));
    assert!(notes.is_empty(), "{notes:?}");
    s.finish();
}
