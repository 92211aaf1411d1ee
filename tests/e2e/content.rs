//! Resources, resource templates, prompts and completion, declared in `spec/knowledge.yaml`:
//! listed, read, rendered and completed through the built binary over stdio, with the
//! protocol errors for an unknown URI, an unknown prompt and a missing argument.

use std::process::{Command, Stdio};
use std::time::Duration;

use mcpspec_testkit::StdioClient;
use serde_json::{Value, json};

use crate::common::{EXE, Engine, Session, sample_db, start_engine};
use crate::on_every_engine;

on_every_engine!(
    fixed_and_templated_resources_are_listed_and_read,
    unknown_uris_are_resource_not_found,
    prompts_render_arguments_data_and_embedded_resources,
    prompt_errors_name_the_prompt_or_argument,
    completion_fills_prompt_arguments_and_template_variables,
);

const ENTRY: &str = "0b6f9e2a-5c1d-4e8f-9a3b-1c2d3e4f5a6b";

/// A successful request: returns its `result`.
pub(crate) fn ok(s: &mut Session, method: &str, params: Value) -> Value {
    let response = s.client.request(method, params.clone()).expect("response");
    assert!(
        response.get("error").is_none(),
        "{method} {params} failed: {response}"
    );
    response["result"].clone()
}

/// A protocol error: returns the JSON-RPC `error` object after checking its code.
pub(crate) fn protocol_error(s: &mut Session, method: &str, params: Value, code: i64) -> Value {
    let response = s.client.request(method, params.clone()).expect("response");
    assert!(
        response.get("result").is_none(),
        "{method} {params} should fail: {response}"
    );
    let error = response["error"].clone();
    assert_eq!(error["code"], json!(code), "{method} {params}: {error}");
    let text = error.to_string();
    assert!(
        !text.contains("SELECT") && !text.contains("/tmp"),
        "errors carry no SQL or paths: {text}"
    );
    error
}

/// The capabilities a server advertises in its answer to `initialize`.
fn capabilities(server: &str) -> Value {
    let db = sample_db(server);
    let mut client = StdioClient::spawn(
        Command::new(EXE)
            .args(["serve", server, "--db"])
            .arg(&db.path)
            .env("MCPSPEC_LOG", "warn")
            .stderr(Stdio::null()),
    )
    .expect("spawn server");
    let init = client.initialize().expect("initialize");
    let status = client.finish(Duration::from_secs(10));
    assert!(status.is_some_and(|s| s.success()), "exit: {status:?}");
    init["result"]["capabilities"].clone()
}

#[test]
fn capabilities_are_advertised_only_when_declared() {
    let caps = capabilities("knowledge");
    assert!(caps["resources"].is_object(), "{caps}");
    assert!(caps["prompts"].is_object(), "{caps}");
    assert!(caps["completions"].is_object(), "{caps}");

    // Studio declares no resource, prompt or completion; the view of its `app: table`
    // (`query_learnings`) is read as a resource, so it has the resources capability alone.
    let caps = capabilities("studio");
    assert!(caps["tools"].is_object(), "{caps}");
    assert_eq!(caps["resources"], json!({}), "{caps}");
    for c in ["prompts", "completions"] {
        assert!(caps.get(c).is_none(), "studio declares no {c}: {caps}");
    }
    // Laminark declares none of them, and has no app or skill.
    let caps = capabilities("laminark");
    assert!(caps["tools"].is_object(), "{caps}");
    for c in ["resources", "prompts", "completions", "extensions"] {
        assert!(caps.get(c).is_none(), "laminark declares no {c}: {caps}");
    }
}

fn fixed_and_templated_resources_are_listed_and_read(engine: Engine) {
    let mut s = start_engine(engine, "knowledge", &[]);
    let list = ok(&mut s, "resources/list", json!({}));
    assert_eq!(
        list["resources"],
        json!([{
            "uri": "knowledge://stats",
            "name": "stats",
            "title": "Knowledge base statistics",
            "description": "How many entries the knowledge base holds for each role, and when each was last updated.",
            "mimeType": "text/markdown"
        }, {
            // The view of kb_search's `app: table` (tests/e2e/apps.rs).
            "uri": "ui://knowledge/kb_search",
            "name": "kb_search-view",
            "title": "Search the knowledge base (table view)",
            "description": "The MCP App that shows `kb_search`'s result as tables.",
            "mimeType": "text/html;profile=mcp-app"
        }, {
            // Its skill's SKILL.md, for clients without the Skills extension (tests/e2e/skills.rs).
            "uri": "skill://knowledge-base/SKILL.md",
            "name": "knowledge-base",
            "description": server::server("knowledge").unwrap().skills[0].description,
            "mimeType": "text/markdown"
        }])
    );
    let templates = ok(&mut s, "resources/templates/list", json!({}));
    assert_eq!(
        templates["resourceTemplates"][0]["uriTemplate"],
        "knowledge://entry/{id}"
    );
    assert_eq!(templates["resourceTemplates"][0]["name"], "entry");

    let stats = ok(
        &mut s,
        "resources/read",
        json!({"uri": "knowledge://stats"}),
    );
    let c = &stats["contents"][0];
    assert_eq!(c["uri"], "knowledge://stats");
    assert_eq!(c["mimeType"], "text/markdown");
    let text = c["text"].as_str().unwrap();
    assert!(text.starts_with("# Knowledge base statistics"), "{text}");
    assert!(
        text.contains("- dev: 1 entry, last updated 2026-01-20T10:00:00.000Z"),
        "{text}"
    );
    assert!(text.contains("- qa: 1 entry"), "{text}");

    // The statement sees writes made through the tools.
    s.ok(
        "kb_add",
        json!({"content": "Pin tool versions.", "role": "dev"}),
    );
    let stats = ok(
        &mut s,
        "resources/read",
        json!({"uri": "knowledge://stats"}),
    );
    assert!(
        stats["contents"][0]["text"]
            .as_str()
            .unwrap()
            .contains("- dev: 2 entries"),
        "{stats}"
    );

    let uri = format!("knowledge://entry/{ENTRY}");
    let entry = ok(&mut s, "resources/read", json!({"uri": uri}));
    let c = &entry["contents"][0];
    assert_eq!(c["uri"], json!(uri));
    let text = c["text"].as_str().unwrap();
    assert!(
        text.starts_with(&format!("# Knowledge entry {ENTRY}")),
        "{text}"
    );
    assert!(text.contains("Role: dev · Tags: validation, api"), "{text}");
    assert!(
        text.contains("Validate request bodies with zod schemas"),
        "{text}"
    );
    s.finish();
}

fn unknown_uris_are_resource_not_found(engine: Engine) {
    let mut s = start_engine(engine, "knowledge", &[]);
    for uri in [
        "knowledge://nothing",
        "knowledge://entry/",
        "knowledge://entry/a/b",
        // A template that matches, whose `one` statement finds no row.
        "knowledge://entry/00000000-0000-4000-8000-000000000000",
    ] {
        let e = protocol_error(&mut s, "resources/read", json!({"uri": uri}), -32002);
        assert_eq!(e["message"], "resource not found");
        assert_eq!(e["data"], json!({"uri": uri}));
    }
    s.finish();
}

fn prompts_render_arguments_data_and_embedded_resources(engine: Engine) {
    let mut s = start_engine(engine, "knowledge", &[]);
    let list = ok(&mut s, "prompts/list", json!({}));
    assert_eq!(
        list["prompts"],
        json!([{
            "name": "review_entry",
            "title": "Review a knowledge entry",
            "description": "Ask for a review of one entry's accuracy and clarity, with the entry attached.",
            "arguments": [
                {"name": "id", "description": "The entry's UUID.", "required": true},
                {"name": "focus", "description": "What to look at most, e.g. accuracy, clarity or tone.", "required": false}
            ]
        }])
    );

    let got = ok(
        &mut s,
        "prompts/get",
        json!({"name": "review_entry", "arguments": {"id": ENTRY, "focus": "accuracy"}}),
    );
    let messages = got["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 2, "{got}");
    assert_eq!(messages[0]["role"], "user");
    let text = messages[0]["content"]["text"].as_str().unwrap();
    assert!(
        text.starts_with(
            "Review the knowledge entry below, written for the dev role, with a focus on accuracy."
        ),
        "{text}"
    );
    let embedded = &messages[1]["content"];
    assert_eq!(embedded["type"], "resource");
    assert_eq!(
        embedded["resource"]["uri"],
        json!(format!("knowledge://entry/{ENTRY}"))
    );
    assert_eq!(embedded["resource"]["mimeType"], "text/markdown");
    assert!(
        embedded["resource"]["text"]
            .as_str()
            .unwrap()
            .contains("Validate request bodies"),
        "{embedded}"
    );

    // The optional argument may be left out.
    let got = ok(
        &mut s,
        "prompts/get",
        json!({"name": "review_entry", "arguments": {"id": ENTRY}}),
    );
    let text = got["messages"][0]["content"]["text"].as_str().unwrap();
    assert!(text.contains("for the dev role. Say what"), "{text}");
    s.finish();
}

fn prompt_errors_name_the_prompt_or_argument(engine: Engine) {
    let mut s = start_engine(engine, "knowledge", &[]);
    let e = protocol_error(&mut s, "prompts/get", json!({"name": "nope"}), -32602);
    assert_eq!(e["message"], "unknown prompt: nope");
    assert_eq!(e["data"]["available"], json!(["review_entry"]));

    let e = protocol_error(
        &mut s,
        "prompts/get",
        json!({"name": "review_entry", "arguments": {"focus": "tone"}}),
        -32602,
    );
    assert_eq!(
        e["message"],
        "missing required argument `id` of prompt `review_entry`"
    );
    assert_eq!(
        e["data"],
        json!({"prompt": "review_entry", "argument": "id"})
    );

    let e = protocol_error(
        &mut s,
        "prompts/get",
        json!({"name": "review_entry", "arguments": {"id": ENTRY, "fokus": "tone"}}),
        -32602,
    );
    assert_eq!(e["data"]["argument"], "fokus");

    // The prompt's statement finds no entry: its `not_found` message.
    let e = protocol_error(
        &mut s,
        "prompts/get",
        json!({"name": "review_entry", "arguments": {"id": "missing"}}),
        -32602,
    );
    assert_eq!(
        e["message"],
        "No knowledge entry has id \"missing\". Use kb_search or kb_list to find entries."
    );
    s.finish();
}

fn completion_fills_prompt_arguments_and_template_variables(engine: Engine) {
    let mut s = start_engine(engine, "knowledge", &[]);
    let prompt = ok(
        &mut s,
        "completion/complete",
        json!({
            "ref": {"type": "ref/prompt", "name": "review_entry"},
            "argument": {"name": "id", "value": "1c"}
        }),
    );
    assert_eq!(
        prompt["completion"],
        json!({"values": ["1c7a0f3b-6d2e-4f90-8b4c-2d3e4f5a6b7c"], "hasMore": false})
    );
    let template = ok(
        &mut s,
        "completion/complete",
        json!({
            "ref": {"type": "ref/resource", "uri": "knowledge://entry/{id}"},
            "argument": {"name": "id", "value": ""}
        }),
    );
    let values = template["completion"]["values"].as_array().unwrap();
    assert_eq!(values.len(), 4, "{template}");
    assert_eq!(values[0], "0b6f9e2a-5c1d-4e8f-9a3b-1c2d3e4f5a6b");

    // An argument without a completion query completes to nothing.
    let none = ok(
        &mut s,
        "completion/complete",
        json!({
            "ref": {"type": "ref/prompt", "name": "review_entry"},
            "argument": {"name": "focus", "value": "acc"}
        }),
    );
    assert_eq!(none["completion"]["values"], json!([]));

    protocol_error(
        &mut s,
        "completion/complete",
        json!({
            "ref": {"type": "ref/prompt", "name": "nope"},
            "argument": {"name": "id", "value": ""}
        }),
        -32602,
    );
    s.finish();
}
