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
    s.stdio().send_line(&msg.to_string()).unwrap();
    let (mut notes, mut asked) = (Vec::new(), Vec::new());
    loop {
        let m = s.stdio().recv(Duration::from_secs(10)).expect("a message");
        if m["id"] == id && m.get("method").is_none() {
            return (notes, asked, m);
        }
        match (m.get("id"), m["method"].as_str()) {
            (Some(rid), Some(meth)) => {
                let reply =
                    json!({"jsonrpc": "2.0", "id": rid, "result": answer(meth, &m["params"])});
                s.stdio().send_line(&reply.to_string()).unwrap();
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
        json!({"name": "a", "address": {"city": "b"}, "email": "a@b.c"}),
    );
    assert_eq!(
        r["content"][0]["text"],
        r#"JSON Schema 2020-12 tool called with: {"address": {"city": "b"}, "email": "a@b.c", "name": "a"}"#
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

/// A handler's questions under protocol 2025-11-25: requests to the client during the call,
/// one after the other, for the same handler code that 2026-07-28 runs in rounds.
#[test]
fn a_handler_s_questions_are_requests_to_a_2025_client() {
    let mut s = session(json!({"elicitation": {}}));
    let (_, asked, r) = exchange(
        &mut s,
        "tools/call",
        json!({"name": "test_input_required_result_multi_round", "arguments": {}}),
        |method, params| {
            assert_eq!(method, "elicitation/create");
            let field = if params["message"].as_str().unwrap().contains("name") {
                json!({"name": "Ada"})
            } else {
                json!({"color": "blue"})
            };
            json!({"action": "accept", "content": field})
        },
    );
    assert_eq!(asked.len(), 2, "{asked:?}");
    assert_eq!(r["result"]["content"][0]["text"], "Ada likes blue", "{r}");
}

/// A prompt's question under protocol 2025-11-25: an `elicitation/create` request during
/// `prompts/get`; declined, or to a client without forms, the prompt renders without it.
#[test]
fn a_prompt_s_question_is_a_request_to_a_2025_client() {
    let get = json!({"name": "test_input_required_result_prompt"});
    let said = |r: &Value| r["result"]["messages"][0]["content"]["text"].clone();
    let mut s = session(json!({"elicitation": {}}));
    let (_, asked, r) = exchange(&mut s, "prompts/get", get.clone(), |method, params| {
        assert_eq!(method, "elicitation/create");
        assert_eq!(params["requestedSchema"]["required"], json!(["context"]));
        json!({"action": "accept", "content": {"context": "the changelog"}})
    });
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert_eq!(said(&r), "Use this context: the changelog", "{r}");
    let (_, _, r) = exchange(
        &mut s,
        "prompts/get",
        get.clone(),
        |_, _| json!({"action": "decline"}),
    );
    assert_eq!(said(&r), "No context was given.", "{r}");
    s.finish();
    let mut s = session(json!({}));
    let (_, _, r) = exchange(&mut s, "prompts/get", get, no_answer);
    assert_eq!(said(&r), "No context was given.", "{r}");
    s.finish();
}

/// Protocol 2026-07-28 over stdio: no `initialize`, each request carries the client's version
/// and capabilities in `_meta`, and a handler asks the client through `input_required`
/// results whose sealed `requestState` carries the answers so far.
mod per_request {
    use std::process::{Command, Stdio};
    use std::time::Duration;

    use mcpspec_testkit::StdioClient;
    use serde_json::{Value, json};

    pub(super) fn server(env: &[(&str, &str)]) -> StdioClient {
        let mut command = Command::new(crate::common::exe_for("conformance"));
        command
            .args(["serve", "conformance"])
            .env("MCPSPEC_LOG", "warn")
            .stderr(Stdio::null());
        for (k, v) in env {
            command.env(k, v);
        }
        StdioClient::spawn(&mut command).expect("spawn server")
    }

    /// One `tools/call` of `tool` from a client with `capabilities` (and `meta` besides), with
    /// `extra` params: the notifications before its answer, and the answer.
    pub(super) fn call(
        c: &mut StdioClient,
        tool: &str,
        capabilities: Value,
        meta: Value,
        extra: Value,
    ) -> (Vec<Value>, Value) {
        named(c, "tools/call", tool, capabilities, meta, extra)
    }

    /// One request of `method` (`tools/call` or `prompts/get`) for `name`, as [`call`].
    fn named(
        c: &mut StdioClient,
        method: &str,
        name: &str,
        capabilities: Value,
        meta: Value,
        extra: Value,
    ) -> (Vec<Value>, Value) {
        let mut params = json!({"name": name, "arguments": {}, "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": capabilities,
            "io.modelcontextprotocol/clientInfo": {"name": "e2e", "version": "1"}
        }});
        for (k, v) in meta.as_object().unwrap() {
            params["_meta"][k] = v.clone();
        }
        for (k, v) in extra.as_object().unwrap() {
            params[k] = v.clone();
        }
        let id = json!("call");
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        c.send_line(&msg.to_string()).unwrap();
        let mut notes = Vec::new();
        loop {
            let m = c.recv(Duration::from_secs(10)).expect("a message");
            if m["id"] == id {
                return (notes, m);
            }
            assert!(m.get("id").is_none(), "a request to a 2026 client: {m}");
            notes.push(m);
        }
    }

    pub(super) fn asks(r: &Value) -> (Vec<String>, String) {
        assert_eq!(r["result"]["resultType"], "input_required", "{r}");
        let keys = r["result"]["inputRequests"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        let state = r["result"]["requestState"].as_str().expect("a state");
        (keys, state.to_string())
    }

    fn text(r: &Value) -> &str {
        r["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
    }

    fn refused(r: &Value) {
        assert_eq!(r["error"]["code"], -32602, "{r}");
        assert_eq!(r["error"]["data"]["field"], "requestState", "{r}");
    }

    const FORMS: &str = r#"{"elicitation": {}}"#;

    fn answer(key: &str, content: Value, state: &str) -> Value {
        json!({"inputResponses": {key: {"action": "accept", "content": content}},
               "requestState": state})
    }

    #[test]
    fn a_handler_asks_in_rounds_and_each_state_carries_the_answers_so_far() {
        let mut c = server(&[]);
        let forms: Value = serde_json::from_str(FORMS).unwrap();
        let tool = "test_input_required_result_multi_round";
        let (_, r) = call(&mut c, tool, forms.clone(), json!({}), json!({}));
        let (keys, first) = asks(&r);
        assert_eq!(keys, ["step1"]);
        let step1 = answer("step1", json!({"name": "Ada"}), &first);
        let (_, r) = call(&mut c, tool, forms.clone(), json!({}), step1);
        let (keys, second) = asks(&r);
        assert_eq!(keys, ["step2"], "only the new question is asked");
        // Only step2 is answered now: step1's answer comes back from the sealed state.
        let step2 = answer("step2", json!({"color": "blue"}), &second);
        let (_, r) = call(&mut c, tool, forms.clone(), json!({}), step2.clone());
        assert_eq!(r["result"]["resultType"], "complete", "{r}");
        assert_eq!(text(&r), "Ada likes blue", "{r}");
        // A state serves one retry.
        refused(&call(&mut c, tool, forms.clone(), json!({}), step2).1);
        // Several questions travel in one round, each under its key.
        let caps = json!({"elicitation": {}, "sampling": {}, "roots": {}});
        let (_, r) = call(
            &mut c,
            "test_input_required_result_multiple_inputs",
            caps,
            json!({}),
            json!({}),
        );
        assert_eq!(asks(&r).0, ["client_roots", "greeting", "user_name"]);
        assert_eq!(
            r["result"]["inputRequests"]["greeting"]["method"],
            "sampling/createMessage"
        );
    }

    #[test]
    fn a_state_counts_only_for_the_call_it_was_issued_for() {
        let mut c = server(&[]);
        let forms: Value = serde_json::from_str(FORMS).unwrap();
        let tool = "test_input_required_result_elicitation";
        let name = json!({"name": "Ada"});
        // A handler's question may be answered without a state (SEP-2322), and responses to
        // questions nobody asked are ignored.
        let (_, r) = call(
            &mut c,
            tool,
            forms.clone(),
            json!({}),
            json!({"inputResponses": {"user_name": {"action": "accept", "content": name},
                                      "unasked": {"action": "accept", "content": {"x": 1}}}}),
        );
        assert_eq!(text(&r), "Hello, Ada!", "{r}");
        // A response that is not a client's result is invalid params, naming it.
        let (_, r) = call(
            &mut c,
            tool,
            forms.clone(),
            json!({}),
            json!({"inputResponses": {"user_name": 12345}}),
        );
        assert_eq!(r["error"]["code"], -32602, "{r}");
        assert_eq!(
            r["error"]["data"]["field"], "inputResponses.user_name",
            "{r}"
        );
        let (_, r) = call(&mut c, tool, forms.clone(), json!({}), json!({}));
        let (_, state) = asks(&r);
        // Tampered with, made up, or issued for another tool: refused.
        let mut forged = state.clone();
        forged.replace_range(forged.len() - 4.., "AAAA");
        for bad in [forged.as_str(), "made-up"] {
            refused(
                &call(
                    &mut c,
                    tool,
                    forms.clone(),
                    json!({}),
                    answer("user_name", name.clone(), bad),
                )
                .1,
            );
        }
        let other = "test_input_required_result_tampered_state";
        refused(
            &call(
                &mut c,
                other,
                forms.clone(),
                json!({}),
                answer("user_name", name.clone(), &state),
            )
            .1,
        );
        // The state itself still works (the refusals did not use it), and extra keys are
        // ignored.
        let mut retry = answer("user_name", name.clone(), &state);
        retry["inputResponses"]["unasked"] = json!({"action": "accept"});
        let (_, r) = call(&mut c, tool, forms, json!({}), retry);
        assert_eq!(text(&r), "Hello, Ada!", "{r}");
    }

    /// The message `test_input_required_result_prompt` renders.
    fn said(r: &Value) -> &str {
        r["result"]["messages"][0]["content"]["text"]
            .as_str()
            .unwrap_or_default()
    }

    /// A prompt's question (SEP-2322 for a request other than a tool call): asked in an
    /// `input_required` result whose state is bound to the prompt and its arguments, the
    /// answer checked against the form, and left empty for a client that cannot ask.
    #[test]
    fn a_prompt_asks_first_with_a_state_bound_to_it() {
        let mut c = server(&[]);
        let forms: Value = serde_json::from_str(FORMS).unwrap();
        let prompt = "test_input_required_result_prompt";
        let get = |c: &mut StdioClient, caps: &Value, extra: Value| {
            named(c, "prompts/get", prompt, caps.clone(), json!({}), extra).1
        };
        let r = get(&mut c, &forms, json!({}));
        let (keys, state) = asks(&r);
        assert_eq!(keys, ["user_context"]);
        let asked = &r["result"]["inputRequests"]["user_context"];
        assert_eq!(asked["method"], "elicitation/create", "{r}");
        assert_eq!(
            asked["params"]["message"],
            "What context should the prompt use?"
        );
        assert_eq!(
            asked["params"]["requestedSchema"],
            json!({"type": "object", "properties": {"context": {"type": "string"}},
                   "required": ["context"]})
        );
        // Not for a tool call, nor for another prompt.
        let context = json!({"context": "release notes"});
        let bad = answer("user_context", context.clone(), &state);
        let (_, r) = call(&mut c, prompt, forms.clone(), json!({}), bad.clone());
        refused(&r);
        refused(
            &named(
                &mut c,
                "prompts/get",
                "test_simple_prompt",
                forms.clone(),
                json!({}),
                bad.clone(),
            )
            .1,
        );
        // An answer that does not fit the form is invalid params, naming it; the state was
        // not used up by the refusals, and the retry renders with the answer.
        let r = get(
            &mut c,
            &forms,
            answer("user_context", json!({"context": 5}), &state),
        );
        assert_eq!(r["error"]["code"], -32602, "{r}");
        assert_eq!(
            r["error"]["data"]["field"], "inputResponses.user_context.content",
            "{r}"
        );
        let (_, state) = asks(&get(&mut c, &forms, json!({})));
        let r = get(
            &mut c,
            &forms,
            answer("user_context", context.clone(), &state),
        );
        assert_eq!(r["result"]["resultType"], "complete", "{r}");
        assert_eq!(said(&r), "Use this context: release notes", "{r}");
        refused(&get(
            &mut c,
            &forms,
            answer("user_context", context.clone(), &state),
        ));
        // Answered without a state, declined, or from a client that cannot ask.
        let stateless = json!({"inputResponses": {"user_context":
            {"action": "accept", "content": context}}});
        assert_eq!(
            said(&get(&mut c, &forms, stateless)),
            "Use this context: release notes"
        );
        let declined = json!({"inputResponses": {"user_context": {"action": "decline"}}});
        assert_eq!(
            said(&get(&mut c, &forms, declined)),
            "No context was given."
        );
        assert_eq!(
            said(&get(&mut c, &json!({}), json!({}))),
            "No context was given."
        );
    }

    /// JSON Schema 2020-12 kept whole (SEP-2106): top-level composition and conditionals are
    /// listed to 2026-07-28 requests, left out for a 2025-11-25 session (whose clients reject
    /// them), and enforced for both.
    #[test]
    fn top_level_composition_is_listed_to_2026_clients_and_enforced_for_all() {
        let mut c = server(&[]);
        let tool = "json_schema_2020_12_tool";
        let meta = json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "e2e", "version": "1"}
        });
        let listed = |r: Value| {
            let tools = r["result"]["tools"].as_array().expect("tools").clone();
            let t = tools.into_iter().find(|t| t["name"] == tool).expect(tool);
            t["inputSchema"].clone()
        };
        let whole = listed(c.request("tools/list", json!({"_meta": meta})).unwrap());
        for key in ["allOf", "if", "then", "else"] {
            assert!(whole.get(key).is_some(), "{key} kept: {whole}");
        }
        assert_eq!(whole["$defs"]["address"]["$anchor"], "addressDef");
        // Protocol 2026-07-28: the conditional holds (phone chosen, no phone given).
        let args = json!({"contactMethod": "phone", "email": "a@b.c"});
        let (_, r) = call(
            &mut c,
            tool,
            json!({}),
            json!({}),
            json!({"arguments": args.clone()}),
        );
        assert_eq!(r["result"]["isError"], true, "{r}");
        assert!(text(&r).contains(r#""field":"phone""#), "{r}");
        let (_, r) = call(
            &mut c,
            tool,
            json!({}),
            json!({}),
            json!({"arguments": {"contactMethod": "phone", "phone": "1"}}),
        );
        assert_eq!(r["result"]["isError"], json!(false), "{r}");

        let mut old = server(&[]);
        old.initialize().unwrap();
        let portable = listed(old.request("tools/list", json!({})).unwrap());
        for key in ["allOf", "anyOf", "oneOf", "not", "if", "then", "else"] {
            assert!(portable.get(key).is_none(), "{key} left out: {portable}");
        }
        assert_eq!(portable["properties"], whole["properties"]);
        assert_eq!(portable["$defs"], whole["$defs"]);
        // Left out of the listing, still enforced: neither phone nor email.
        let r = old
            .call_tool(tool, json!({"contactMethod": "email"}))
            .unwrap();
        assert_eq!(r["result"]["isError"], true, "{r}");
        let r = old.call_tool(tool, args).unwrap();
        assert_eq!(r["result"]["isError"], true, "{r}");
    }

    /// A state lives as long as the confirm timeout: here 1 s, so the test waits for it to
    /// pass (the wait is the subject, not a synchronisation).
    #[test]
    fn an_expired_state_is_refused() {
        let mut c = server(&[("MCPSPEC_CONFIRM_TIMEOUT_SECS", "1")]);
        let forms: Value = serde_json::from_str(FORMS).unwrap();
        let tool = "test_input_required_result_elicitation";
        let (_, r) = call(&mut c, tool, forms.clone(), json!({}), json!({}));
        let (_, state) = asks(&r);
        std::thread::sleep(Duration::from_millis(1100));
        let (_, r) = call(
            &mut c,
            tool,
            forms,
            json!({}),
            answer("user_name", json!({"name": "Ada"}), &state),
        );
        refused(&r);
        assert!(
            r["error"]["message"].as_str().unwrap().contains("xpired"),
            "{r}"
        );
    }

    #[test]
    fn replicas_with_one_key_accept_each_other_s_states() {
        let key = "ab".repeat(32);
        let env = [("MCPSPEC_REQUEST_STATE_KEY", key.as_str())];
        let (mut one, mut two, mut own) = (server(&env), server(&env), server(&[]));
        let forms: Value = serde_json::from_str(FORMS).unwrap();
        let tool = "test_input_required_result_elicitation";
        let (_, r) = call(&mut one, tool, forms.clone(), json!({}), json!({}));
        let (_, state) = asks(&r);
        let retry = answer("user_name", json!({"name": "Ada"}), &state);
        refused(&call(&mut own, tool, forms.clone(), json!({}), retry.clone()).1);
        let (_, r) = call(&mut two, tool, forms, json!({}), retry);
        assert_eq!(text(&r), "Hello, Ada!", "{r}");
        // A key that is not one is refused at start-up, without repeating it.
        let (code, _, err) = crate::common::mcpspec(
            &["serve", "studio", "--db", "/nonexistent/x.db"],
            &[("MCPSPEC_REQUEST_STATE_KEY", "secret-but-short")],
        );
        assert_ne!(code, 0);
        assert!(
            err.contains("MCPSPEC_REQUEST_STATE_KEY is not a key"),
            "{err}"
        );
        assert!(!err.contains("secret-but-short"), "{err}");
    }

    #[test]
    fn a_question_the_client_cannot_answer_is_a_missing_capability() {
        let mut c = server(&[]);
        let (_, r) = call(
            &mut c,
            "test_missing_capability",
            json!({}),
            json!({}),
            json!({}),
        );
        assert_eq!(r["error"]["code"], -32021, "{r}");
        assert_eq!(
            r["error"]["data"]["requiredCapabilities"],
            json!({"sampling": {}}),
            "{r}"
        );
        // A handler may ask only what the client declared.
        let (_, r) = call(
            &mut c,
            "test_input_required_result_capabilities",
            json!({"sampling": {}}),
            json!({}),
            json!({}),
        );
        assert_eq!(asks(&r).0, ["greeting"]);
    }

    #[test]
    fn log_messages_follow_the_level_in_the_request_meta() {
        let mut c = server(&[]);
        let tool = "test_logging_tool";
        let level = |l: &str| json!({"io.modelcontextprotocol/logLevel": l});
        let (notes, r) = call(&mut c, tool, json!({}), json!({}), json!({}));
        assert!(r.get("result").is_some(), "{r}");
        assert!(notes.is_empty(), "no level, no log: {notes:?}");
        let (notes, _) = call(&mut c, tool, json!({}), level("info"), json!({}));
        let logs: Vec<&Value> = notes
            .iter()
            .filter(|n| n["method"] == "notifications/message")
            .collect();
        assert_eq!(logs.len(), 3, "{notes:?}");
        let (notes, _) = call(&mut c, tool, json!({}), level("error"), json!({}));
        assert!(notes.is_empty(), "info is below error: {notes:?}");
        // The session-wide level is gone from 2026-07-28; 2025-11-25 sessions keep it.
        let r = c
            .request(
                "logging/setLevel",
                json!({"level": "debug", "_meta": meta()}),
            )
            .unwrap();
        assert_eq!(r["error"]["code"], -32601, "{r}");
    }

    fn meta() -> Value {
        json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
        })
    }

    /// Opens a `subscriptions/listen` stream with request id `id` and returns its
    /// acknowledgement.
    fn listen(c: &mut StdioClient, id: &str, notifications: Value) -> Value {
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": "subscriptions/listen",
            "params": {"_meta": meta(), "notifications": notifications}});
        c.send_line(&msg.to_string()).unwrap();
        c.recv(Duration::from_secs(10))
            .expect("the acknowledgement")
    }

    /// Reads until a notification `method` for the stream `id` arrives; every message read.
    fn until(c: &mut StdioClient, method: &str, id: &str) -> Vec<Value> {
        let mut seen = Vec::new();
        loop {
            let m = c.recv(Duration::from_secs(10)).expect("the notification");
            let done = m["method"] == method
                && m["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == id;
            seen.push(m);
            if done {
                return seen;
            }
        }
    }

    fn tagged<'a>(seen: &'a [Value], id: &str) -> Vec<&'a Value> {
        seen.iter()
            .filter(|m| m["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == id)
            .collect()
    }

    #[test]
    fn listen_streams_hear_of_the_resources_they_asked_for() {
        let mut c = server(&[]);
        let watched = "test://watched-resource";
        let ack = listen(&mut c, "watch", json!({"resourceSubscriptions": [watched]}));
        assert_eq!(
            ack["method"], "notifications/subscriptions/acknowledged",
            "{ack}"
        );
        assert_eq!(
            ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], "watch",
            "{ack}"
        );
        let ack = listen(&mut c, "prompts", json!({"promptsListChanged": true}));
        assert_eq!(
            ack["method"], "notifications/subscriptions/acknowledged",
            "{ack}"
        );
        let (notes, r) = call(
            &mut c,
            "test_touch_watched_resource",
            json!({}),
            json!({}),
            json!({}),
        );
        assert!(r.get("result").is_some(), "{r}");
        let mut seen = notes;
        if tagged(&seen, "watch").is_empty() {
            seen.extend(until(&mut c, "notifications/resources/updated", "watch"));
        }
        let heard = tagged(&seen, "watch");
        assert_eq!(heard.len(), 1, "{seen:?}");
        assert_eq!(heard[0]["method"], "notifications/resources/updated");
        assert_eq!(heard[0]["params"]["uri"], watched);
        assert!(
            tagged(&seen, "prompts").is_empty(),
            "outside its filter: {seen:?}"
        );
        for id in ["watch", "prompts"] {
            c.notify("notifications/cancelled", json!({"requestId": id}))
                .unwrap();
        }
        assert!(
            c.finish(Duration::from_secs(10))
                .is_some_and(|s| s.success())
        );
    }

    #[test]
    fn a_write_is_heard_by_streams_listening_to_the_server_s_resources() {
        let db = crate::common::sample_db("knowledge");
        let mut c = StdioClient::spawn(
            Command::new(crate::common::exe_for("knowledge"))
                .args(["serve", "knowledge", "--db"])
                .arg(&db.path)
                .env("MCPSPEC_LOG", "warn")
                .stderr(Stdio::null()),
        )
        .unwrap();
        let stats = "knowledge://stats";
        let ack = listen(&mut c, "stats", json!({"resourceSubscriptions": [stats]}));
        assert_eq!(
            ack["method"], "notifications/subscriptions/acknowledged",
            "{ack}"
        );
        let args = json!({"arguments": {"content": "Use WAL.", "role": "dev"}});
        let (notes, r) = call(&mut c, "kb_add", json!({}), json!({}), args);
        assert_eq!(r["result"]["isError"], json!(false), "{r}");
        let mut seen = notes;
        if tagged(&seen, "stats").is_empty() {
            seen.extend(until(&mut c, "notifications/resources/updated", "stats"));
        }
        assert_eq!(
            tagged(&seen, "stats")[0]["params"]["uri"],
            stats,
            "{seen:?}"
        );
    }
}

/// The tasks extension (`io.modelcontextprotocol/tasks`) over stdio with raw JSON-RPC: tools
/// whose spec says `task:` answer with a task id, and `tasks/get`, `tasks/update` and
/// `tasks/cancel` drive it.
pub(crate) mod tasks {
    use std::time::{Duration, Instant};

    use mcpspec_testkit::StdioClient;
    use serde_json::{Value, json};

    use super::per_request::{asks, call, server};

    const TASKS: &str = "io.modelcontextprotocol/tasks";

    /// A 2026-07-28 client that declares the tasks extension and elicitation.
    pub(crate) fn caps() -> Value {
        json!({"elicitation": {}, "extensions": {TASKS: {}}})
    }

    /// One 2026-07-28 request of a tasks method with the extension declared.
    pub(crate) fn rpc(c: &mut StdioClient, method: &str, mut params: Value) -> Value {
        params["_meta"] = json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": caps(),
            "io.modelcontextprotocol/clientInfo": {"name": "e2e", "version": "1"}
        });
        c.request(method, params).unwrap()
    }

    /// The task id of a `CreateTaskResult`.
    pub(crate) fn created(r: &Value) -> String {
        assert_eq!(r["result"]["resultType"], "task", "{r}");
        assert!(r["result"]["ttlMs"].is_u64(), "{r}");
        r["result"]["taskId"]
            .as_str()
            .expect("a task id")
            .to_string()
    }

    /// Polls `tasks/get` (the extension's own way to wait, at a short interval) until the task
    /// reaches `status`; panics after 10 s.
    pub(crate) fn until(c: &mut StdioClient, id: &str, status: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let r = rpc(c, "tasks/get", json!({"taskId": id}));
            assert_eq!(r["result"]["resultType"], "complete", "{r}");
            if r["result"]["status"] == status {
                return r["result"].clone();
            }
            assert!(Instant::now() < deadline, "never {status}: {r}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    #[test]
    fn a_task_tool_answers_with_a_task_whose_result_tasks_get_inlines() {
        let mut c = server(&[]);
        let args = json!({"arguments": {"seconds": 0.2, "label": "e2e"}});
        let (_, r) = call(&mut c, "slow_compute", caps(), json!({}), args.clone());
        let id = created(&r);
        assert!(r["result"].get("requestState").is_none(), "{r}");
        let done = until(&mut c, &id, "completed");
        assert_eq!(
            done["result"]["content"][0]["text"],
            "Computed e2e after 0.2 seconds"
        );
        // Without the extension the same tool answers synchronously.
        let (_, r) = call(&mut c, "slow_compute", json!({}), json!({}), args);
        assert_eq!(r["result"]["resultType"], "complete", "{r}");
        assert!(r["result"].get("taskId").is_none(), "{r}");
        // An unknown task is invalid params.
        let r = rpc(&mut c, "tasks/get", json!({"taskId": "no-such-task"}));
        assert_eq!(r["error"]["code"], -32602, "{r}");
    }

    #[test]
    fn a_tool_that_runs_only_as_a_task_is_32021_to_a_client_without_the_extension() {
        let mut c = server(&[]);
        let (_, r) = call(&mut c, "failing_job", json!({}), json!({}), json!({}));
        assert_eq!(r["error"]["code"], -32021, "{r}");
        assert!(
            r["error"]["data"]["requiredCapabilities"]["extensions"][TASKS].is_object(),
            "{r}"
        );
        // With it: a tool error settles as completed with isError, a protocol error as failed.
        let (_, r) = call(&mut c, "failing_job", caps(), json!({}), json!({}));
        let failing = created(&r);
        let (_, r) = call(&mut c, "protocol_error_job", caps(), json!({}), json!({}));
        let crashed = created(&r);
        let done = until(&mut c, &failing, "completed");
        assert_eq!(done["result"]["isError"], true, "{done}");
        let failed = until(&mut c, &crashed, "failed");
        assert_eq!(failed["error"]["code"], -32010, "{failed}");
        assert!(failed.get("result").is_none(), "{failed}");
    }

    #[test]
    fn tasks_cancel_stops_a_running_task() {
        let mut c = server(&[]);
        let args = json!({"arguments": {"seconds": 60}});
        let (_, r) = call(&mut c, "slow_compute", caps(), json!({}), args);
        let id = created(&r);
        assert_eq!(until(&mut c, &id, "working")["status"], "working");
        let r = rpc(&mut c, "tasks/cancel", json!({"taskId": id}));
        assert_eq!(r["result"], json!({"resultType": "complete"}), "{r}");
        until(&mut c, &id, "cancelled");
        // Cancelling a finished task is acknowledged the same way.
        let r = rpc(&mut c, "tasks/cancel", json!({"taskId": id}));
        assert_eq!(r["result"]["resultType"], "complete", "{r}");
    }

    #[test]
    fn a_task_s_questions_are_answered_with_tasks_update() {
        let mut c = server(&[]);
        let args = json!({"arguments": {"filename": "notes.txt"}});
        let (_, r) = call(&mut c, "confirm_delete", caps(), json!({}), args);
        let id = created(&r);
        let waiting = until(&mut c, &id, "input_required");
        let asked = &waiting["inputRequests"]["confirm_delete"];
        assert_eq!(asked["method"], "elicitation/create", "{waiting}");
        let answer = json!({"confirm_delete": {"action": "accept", "content": {"confirm": true}}});
        let r = rpc(
            &mut c,
            "tasks/update",
            json!({"taskId": id, "inputResponses": answer}),
        );
        assert_eq!(r["result"]["resultType"], "complete", "{r}");
        let done = until(&mut c, &id, "completed");
        assert_eq!(done["result"]["content"][0]["text"], "Deleted notes.txt");
    }

    #[test]
    fn a_handler_asks_in_rounds_then_goes_on_as_a_task() {
        let mut c = server(&[]);
        let tool = "test_tool_with_task";
        let (_, r) = call(&mut c, tool, caps(), json!({}), json!({}));
        let (keys, state) = asks(&r);
        assert_eq!(keys, ["user_name"]);
        let answer = json!({"inputResponses": {"user_name": {"action": "accept",
            "content": {"name": "Ada"}}}, "requestState": state});
        let (_, r) = call(&mut c, tool, caps(), json!({}), answer);
        let id = created(&r);
        assert!(r["result"].get("requestState").is_none(), "{r}");
        let done = until(&mut c, &id, "completed");
        assert_eq!(done["result"]["content"][0]["text"], "Hello, Ada!");
    }

    /// A 2025-11-25 session that declared the extension in `initialize` gets tasks too.
    #[test]
    fn a_session_that_declared_the_extension_gets_tasks() {
        let mut c = server(&[]);
        let init = c
            .request(
                "initialize",
                json!({"protocolVersion": "2025-11-25",
                       "capabilities": {"extensions": {TASKS: {}}},
                       "clientInfo": {"name": "e2e", "version": "1"}}),
            )
            .unwrap();
        assert!(
            init["result"]["capabilities"]["extensions"][TASKS].is_object(),
            "{init}"
        );
        c.notify("notifications/initialized", json!({})).unwrap();
        let r = c.call_tool("slow_compute", json!({"seconds": 0})).unwrap();
        let id = created(&r);
        let r = c.request("tasks/get", json!({"taskId": id})).unwrap();
        assert!(r["result"]["status"].is_string(), "{r}");
    }
}
