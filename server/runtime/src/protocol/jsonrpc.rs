//! Answers for messages that do not parse as MCP messages, shared by the stdio and HTTP
//! transports so that both say the same thing about the same bytes.
//!
//! [`answer_unparsable`] classifies the bytes: not JSON is -32700 with a null id, a batch or a
//! non-object is -32600, a request whose params do not fit its method is -32602 for its id. A
//! string with an unpaired UTF-16 surrogate escape (`"\ud800"`, which Python's `json` writes)
//! makes the whole text invalid JSON for serde, yet its id can still be read: such a request is
//! answered for that id, and a `tools/call` gets the same `INVALID_ARGUMENTS` tool result as
//! any other bad argument, naming the field.

use serde_json::{Map, Value, json};

use crate::engine::ToolError;
pub use crate::transform::quote;

/// The response to a line that did not parse as a client message, or `None` when it needs
/// none (a notification). `error` is the parser's complaint about the message shape.
pub fn answer_unparsable(line: &[u8], error: &dyn std::fmt::Display) -> Option<Value> {
    let value: Value = match serde_json::from_slice(line) {
        Ok(v) => v,
        Err(e) => return Some(salvage(line).unwrap_or_else(|| parse_error(&e))),
    };
    let Some(obj) = value.as_object() else {
        let what = if value.is_array() {
            "batches are not supported; send one message per line"
        } else {
            "a message must be a JSON object"
        };
        return Some(error_response(
            None,
            -32600,
            &format!("invalid request: {what}"),
        ));
    };
    let id = request_id(obj);
    let method = obj.get("method").and_then(Value::as_str);
    match (id, method) {
        // A notification that does not parse needs no answer.
        (None, Some(_)) if !obj.contains_key("id") => {
            tracing::debug!(error = %error, "ignoring a malformed notification");
            None
        }
        (Some(id), Some(method)) if obj.get("jsonrpc") == Some(&json!("2.0")) => {
            Some(error_response(
                Some(id),
                -32602,
                &format!("invalid params for {method}: {error}"),
            ))
        }
        (id, _) => Some(error_response(
            id,
            -32600,
            "invalid request: expected a JSON-RPC 2.0 message with `jsonrpc`, `method` and an integer or string `id`",
        )),
    }
}

/// Request methods MCP defines (through 2026-07-28, with the Skills extension's, SEP-2640);
/// any other method is not found.
pub const MCP_METHODS: &[&str] = &[
    "initialize",
    "ping",
    "server/discover",
    "tools/list",
    "tools/call",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "resources/subscribe",
    "resources/unsubscribe",
    "prompts/list",
    "prompts/get",
    "completion/complete",
    "logging/setLevel",
    "tasks/get",
    "tasks/list",
    "tasks/result",
    "tasks/cancel",
    "subscriptions/listen",
    "skills/list",
    "skills/get",
    "resources/directory/read",
];

/// Request methods protocol 2026-07-28 (with its tasks extension) removed: a request of that
/// revision naming one is method not found.
pub const REMOVED_IN_2026: &[&str] = &[
    "initialize",
    "logging/setLevel",
    "resources/subscribe",
    "resources/unsubscribe",
    "tasks/list",
    "tasks/result",
];

/// Whether params carry the protocol version of a request of 2026-07-28 or later in `_meta`.
pub fn is_per_request(params: Option<&Value>) -> bool {
    params
        .and_then(|p| p.pointer("/_meta/io.modelcontextprotocol~1protocolVersion"))
        .and_then(Value::as_str)
        .is_some_and(|v| v >= "2026-07-28")
}

/// The fields of MCP's request params and the JSON type each must have; a request whose
/// params do not parse names the first of them that has another type.
const TYPED_FIELDS: &[(&str, &str)] = &[
    ("name", "string"),
    ("uri", "string"),
    ("arguments", "object"),
    ("requestState", "string"),
    ("inputResponses", "object"),
    ("taskId", "string"),
    ("cursor", "string"),
    ("level", "string"),
    ("protocolVersion", "string"),
    ("capabilities", "object"),
    ("clientInfo", "object"),
    ("ref", "object"),
    ("argument", "object"),
    ("_meta", "object"),
];

/// The answer to a request rmcp could only decode as a custom one: rmcp falls back to that
/// both for a method MCP does not define (-32601, method not found) and for a known method
/// whose params do not parse (-32602, invalid params, naming the field of the wrong type when
/// it is one of MCP's own). Both transports answer through here.
pub fn custom_refusal(
    id: Option<Value>,
    method: &str,
    params: Option<&Value>,
    per_request: bool,
) -> Value {
    if !MCP_METHODS.contains(&method) || (per_request && REMOVED_IN_2026.contains(&method)) {
        return error_response(id, -32601, &format!("method not found: {}", quote(method)));
    }
    let misfit = params.and_then(Value::as_object).and_then(|p| {
        TYPED_FIELDS.iter().find(|(field, ty)| {
            p.get(*field).is_some_and(|v| {
                let is = match *ty {
                    "string" => v.is_string(),
                    _ => v.is_object(),
                };
                !is
            })
        })
    });
    let mut answer = match misfit {
        Some((field, ty)) => error_response(
            id,
            -32602,
            &format!("invalid params for {method}: `{field}` must be a {ty}"),
        ),
        None => error_response(
            id,
            -32602,
            &format!("invalid params for {method}: the params do not match the method's schema"),
        ),
    };
    if let Some((field, _)) = misfit {
        answer["error"]["data"] = json!({"field": field});
    }
    answer
}

/// A JSON-RPC error response.
pub fn error_response(id: Option<Value>, code: i64, message: &str) -> Value {
    json!({
        "jsonrpc": "2.0",
        "id": id.unwrap_or(Value::Null),
        "error": {"code": code, "message": message},
    })
}

fn parse_error(e: &serde_json::Error) -> Value {
    error_response(None, -32700, &format!("parse error: {e}"))
}

/// An integer or string `id`; anything else is no id.
fn request_id(obj: &Map<String, Value>) -> Option<Value> {
    obj.get("id")
        .filter(|v| v.is_string() || v.is_i64() || v.is_u64())
        .cloned()
}

/// Stands for an unpaired surrogate while the rest of the message is read: a noncharacter,
/// which Unicode reserves for exactly this kind of internal use.
const MARK: char = '\u{FFFF}';

/// The answer to a request whose only fault is an unpaired surrogate escape: a tool error
/// naming the argument for `tools/call`, -32602 for any other method. `None` when the text is
/// broken in some other way too, or has no id to answer.
fn salvage(line: &[u8]) -> Option<Value> {
    let repaired = mark_lone_surrogates(line)?;
    let value: Value = serde_json::from_slice(&repaired).ok()?;
    let obj = value.as_object()?;
    let id = request_id(obj)?;
    let method = obj.get("method").and_then(Value::as_str)?;
    let params = obj.get("params");
    if method == "tools/call"
        && let Some(Value::Object(arguments)) = params.and_then(|p| p.get("arguments"))
        && let Some(field) = arguments
            .iter()
            .find(|(_, v)| contains_mark(v))
            .map(|(k, _)| k.clone())
    {
        let shown = field.replace(MARK, "\u{FFFD}");
        let e = ToolError {
            code: "INVALID_ARGUMENTS",
            message: format!(
                "invalid arguments: `{shown}` has an unpaired UTF-16 surrogate escape, which is not Unicode; send valid text"
            ),
            data: Some(json!({
                "field": shown,
                "constraint": "unicode",
                "errors": [{"field": shown, "constraint": "unicode", "message": "has an unpaired UTF-16 surrogate escape"}],
            })),
        };
        return Some(json!({
            "jsonrpc": "2.0",
            "id": id,
            "result": {
                "content": [{"type": "text", "text": e.to_json().to_string()}],
                "isError": true,
            },
        }));
    }
    Some(error_response(
        Some(id),
        -32602,
        &format!(
            "invalid params for {method}: a string has an unpaired UTF-16 surrogate escape, which is not Unicode"
        ),
    ))
}

fn contains_mark(v: &Value) -> bool {
    match v {
        Value::String(s) => s.contains(MARK),
        Value::Array(a) => a.iter().any(contains_mark),
        Value::Object(o) => o.iter().any(|(k, x)| k.contains(MARK) || contains_mark(x)),
        _ => false,
    }
}

/// `line` with every `\uXXXX` escape of an unpaired surrogate inside a string replaced by the
/// escape of [`MARK`]; `None` when there is none, so that only such texts are salvaged.
fn mark_lone_surrogates(line: &[u8]) -> Option<Vec<u8>> {
    let hex = |at: usize| -> Option<u16> {
        let digits = line.get(at..at + 4)?;
        u16::from_str_radix(std::str::from_utf8(digits).ok()?, 16).ok()
    };
    let escape_at = |at: usize| -> Option<u16> {
        (line.get(at) == Some(&b'\\') && line.get(at + 1) == Some(&b'u'))
            .then(|| hex(at + 2))
            .flatten()
    };
    let mut out = Vec::with_capacity(line.len());
    let mut found = false;
    let mut in_string = false;
    let mut i = 0;
    while i < line.len() {
        let b = line[i];
        if !in_string {
            in_string = b == b'"';
            out.push(b);
            i += 1;
            continue;
        }
        match b {
            b'"' => {
                in_string = false;
                out.push(b);
                i += 1;
            }
            b'\\' => match escape_at(i) {
                Some(0xD800..=0xDBFF) if matches!(escape_at(i + 6), Some(0xDC00..=0xDFFF)) => {
                    out.extend_from_slice(&line[i..i + 12]);
                    i += 12;
                }
                Some(0xD800..=0xDFFF) => {
                    out.extend_from_slice(b"\\uFFFF");
                    found = true;
                    i += 6;
                }
                _ => {
                    // Any other escape is two bytes here; `\uXXXX` copies its digits next.
                    out.extend_from_slice(line.get(i..i + 2).unwrap_or(&line[i..]));
                    i += 2;
                }
            },
            _ => {
                out.push(b);
                i += 1;
            }
        }
    }
    found.then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transform::shorten;

    #[test]
    fn lone_surrogates_are_marked_and_pairs_kept() {
        let pair = br#"{"a":"\ud83d\ude00"}"#;
        assert_eq!(mark_lone_surrogates(pair), None);
        let lone = br#"{"a":"x\ud800y","b":"\udc00","c":"\\ud800"}"#;
        let fixed = mark_lone_surrogates(lone).expect("marked");
        let v: Value = serde_json::from_slice(&fixed).expect("parses");
        assert_eq!(v["a"], json!("x\u{FFFF}y"));
        assert_eq!(v["b"], json!("\u{FFFF}"));
        // An escaped backslash followed by `ud800` is plain text, not an escape.
        assert_eq!(v["c"], json!("\\ud800"));
    }

    #[test]
    fn a_tools_call_with_a_lone_surrogate_names_its_field() {
        let line = br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"t","arguments":{"ok":"a","q":"\ud800"}}}"#;
        let answer = answer_unparsable(line, &"x").expect("answered");
        assert_eq!(answer["id"], json!(7));
        assert_eq!(answer["result"]["isError"], json!(true));
        let text: Value =
            serde_json::from_str(answer["result"]["content"][0]["text"].as_str().unwrap()).unwrap();
        assert_eq!(text["error"]["code"], json!("INVALID_ARGUMENTS"));
        assert_eq!(text["error"]["field"], json!("q"));
    }

    #[test]
    fn other_methods_get_invalid_params_for_their_id() {
        let line =
            br#"{"jsonrpc":"2.0","id":"r1","method":"resources/read","params":{"uri":"\udfff"}}"#;
        let answer = answer_unparsable(line, &"x").expect("answered");
        assert_eq!(answer["id"], json!("r1"));
        assert_eq!(answer["error"]["code"], json!(-32602));
    }

    #[test]
    fn quotes_are_bounded() {
        let long = "é".repeat(1000);
        let q = quote(&long);
        assert!(q.chars().count() < 130, "{q}");
        assert_eq!(quote("short"), "short");
        let v = shorten(&json!({"a": [long.clone()], "b": 1}));
        assert!(v.to_string().len() < 400);
    }
}
