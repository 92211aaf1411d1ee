//! The zero-hop lane: a `tools/call` of a tool that only reads through SQL is answered on
//! the thread that read it, which also sends the answer. Over stdio that is a reading thread
//! (see [`super::stdio`]); over HTTP, the runtime worker that read the request (see
//! `transport::http_lane`). The call never crosses to rmcp's tasks, the blocking pool or a
//! writer thread, each of which can cost a sleeping core's wake-up (see `bench/results/HISTORY.md`).
//!
//! Only what needs nothing of the session takes the lane: a plain request (`name` and
//! `arguments`, no task, no `requestState`) for a tool of the server's own that reads, has no
//! handler, asks no confirmation and never becomes a task. Over stdio that is a request
//! without `_meta` in a session that began with `initialize` on a revision before
//! 2026-07-28, once the client said `notifications/initialized`; or a request of 2026-07-28,
//! whose `_meta` holds its version, the client's capabilities and name and nothing else, once
//! such a request has made rmcp choose that lifecycle. Over HTTP, both kinds too: see
//! `transport::http_lane` for the headers each must carry.
//! Everything else goes to rmcp as before. The answer is what rmcp would send: the same
//! [`to_result`], in the shape rmcp gives the request's revision, in the same envelope.
//!
//! [`to_result`]: crate::protocol::to_result

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::backend::Slow;
use crate::def::{BindingDef, ToolDef};
use crate::engine::{Engine, Reply};
use crate::handler::Link;
use crate::protocol::Live;

/// A `tools/call` request as every route that may answer it receives it, decoded once from
/// its bytes: the transport reads its id and tool from it (the HTTP transport's scope check
/// and in-flight bookkeeping), [`Lane::admits`] decides on it, the lane answers it on the
/// thread that read it, and the blocking pool takes it as it is. Only a request the lane could
/// take decodes as one (see [`Call::parse`]); everything else is decoded by rmcp.
pub struct Call {
    pub id: Box<RawValue>,
    name: String,
    /// The arguments object, as JSON.
    arguments: Option<Value>,
    /// A request of protocol 2026-07-28 carries its version in `_meta` (only that revision
    /// decodes as a call), with the client's capabilities and name.
    per_request: bool,
    /// The caller the HTTP transport verified, never read from the message.
    pub caller: Option<Arc<crate::auth::Identity>>,
    /// The HTTP session the request names (its `Mcp-Session-Id` header), for its span.
    pub session: Option<String>,
    /// The client's name a request of 2026-07-28 gives in its `_meta`, for the workbench.
    client: Option<String>,
}

/// The wire form of a [`Call`], borrowed from its bytes while it is checked.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Wire<'a> {
    jsonrpc: &'a str,
    #[serde(borrow)]
    id: &'a RawValue,
    method: &'a str,
    #[serde(borrow)]
    params: Params<'a>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Params<'a> {
    #[serde(borrow)]
    name: std::borrow::Cow<'a, str>,
    #[serde(default)]
    arguments: Option<Map<String, Value>>,
    /// A request of protocol 2026-07-28 carries the client's version and capabilities.
    #[serde(default, rename = "_meta", borrow, deserialize_with = "present")]
    meta: Option<Meta<'a>>,
}

/// A `_meta` that is there, which must then be one the lane takes (`null` is not).
fn present<'de: 'a, 'a, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Meta<'a>>, D::Error> {
    Meta::deserialize(d).map(Some)
}

/// The `_meta` of a 2026-07-28 request the lane answers: what that revision requires and the
/// client's name, each of the type rmcp reads it as, and nothing else (a progress token, a
/// log level and the like go to rmcp).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Meta<'a> {
    #[serde(rename = "io.modelcontextprotocol/protocolVersion", borrow)]
    version: std::borrow::Cow<'a, str>,
    #[serde(rename = "io.modelcontextprotocol/clientCapabilities")]
    _capabilities: rmcp::model::ClientCapabilities,
    #[serde(rename = "io.modelcontextprotocol/clientInfo", default)]
    client: Option<rmcp::model::Implementation>,
}

/// The revision whose requests carry their version in `_meta`, and the only one of them the
/// lane answers.
pub const PER_REQUEST: &str = "2026-07-28";

impl Call {
    /// The bytes as a call the lane could take; `None` for anything else (rmcp then decodes
    /// it): another method, extra keys, an id that is neither a number nor a string, a
    /// `_meta` of another revision or with more than that revision requires.
    pub fn parse(bytes: &[u8]) -> Option<Call> {
        // Cheap refusals first: most other messages never reach the decoder.
        if !contains!(bytes, b"\"tools/call\"") {
            return None;
        }
        let wire: Wire<'_> = serde_json::from_slice(bytes).ok()?;
        let id = wire.id.get().as_bytes();
        let plain_id = id
            .first()
            .is_some_and(|b| *b == b'"' || b.is_ascii_digit() || *b == b'-');
        let revision = wire
            .params
            .meta
            .as_ref()
            .is_none_or(|m| m.version == PER_REQUEST);
        if !(wire.jsonrpc == "2.0" && wire.method == "tools/call" && plain_id && revision) {
            return None;
        }
        Some(Call {
            id: wire.id.to_owned(),
            name: wire.params.name.into_owned(),
            arguments: wire.params.arguments.map(Value::Object),
            per_request: wire.params.meta.is_some(),
            client: wire.params.meta.and_then(|m| m.client).map(|c| c.name),
            caller: None,
            session: None,
        })
    }

    /// Whether the request is of protocol 2026-07-28, which carries its version in `_meta`
    /// and is answered in that revision's shape; else it is a request of a session that
    /// began with `initialize` on an earlier revision.
    pub fn per_request(&self) -> bool {
        self.per_request
    }

    /// The tool the request calls.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The request id as rmcp's type, for the in-flight bookkeeping.
    pub fn request_id(&self) -> Option<rmcp::model::RequestId> {
        serde_json::from_str(self.id.get()).ok()
    }
}

/// What a transport knows of how a [`Call`] reached it, for [`Lane::admits`].
pub enum Route {
    /// Over stdio: whether the session's lifecycle is open to calls of the request's kind (a
    /// session that began with `initialize` and was told `notifications/initialized`, for a
    /// request without `_meta`; one whose 2026-07-28 requests made rmcp choose that
    /// lifecycle, for a request with it).
    Stdio { lifecycle: bool },
    /// Over HTTP. `plain`: the POST's headers are those rmcp takes a request with and it
    /// carries no trace context for rmcp's span; `session`: the session the request names,
    /// with whether rmcp accepted its `notifications/initialized` at the version the request
    /// carries; `standard_headers`: for a request of no session, whether its headers are
    /// exactly those rmcp accepts a 2026-07-28 call with (`http_lane::standard_headers`).
    #[cfg(feature = "http")]
    Http {
        plain: bool,
        session: Option<bool>,
        standard_headers: bool,
    },
}

/// Whether `tool`'s calls can be answered without the session: see the module comment.
fn takes_lane(tool: &ToolDef) -> bool {
    !tool.writes
        && tool.confirm.is_none()
        && tool.task.is_none()
        && !matches!(tool.binding, BindingDef::Handler)
}

/// Whether protocol `version` is 2026-07-28 or later, whose results the lane does not shape.
/// Revisions are dates, so their order is the order of their text.
pub fn is_modern(version: &str) -> bool {
    version >= "2026-07-28"
}

/// Whether `needle`, a constant, occurs in `haystack`: a cheap look at a line before
/// decoding it. The needle's searcher is built once, where it is named: built for each look
/// (`memmem::find`), it cost more than the look, about 1.5 % of a server's CPU a line
/// (`bench/workbench`).
macro_rules! contains {
    ($haystack:expr, $needle:expr) => {{
        static FINDER: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
            std::sync::LazyLock::new(|| memchr::memmem::Finder::new($needle));
        FINDER.find($haystack).is_some()
    }};
}
pub(crate) use contains;

/// Whether `engine`'s statements say when they turn out slow (SQLite's progress handler
/// does), so that a lane call can act on it while it runs.
#[cfg_attr(not(feature = "http"), allow(dead_code))]
pub(super) fn notices_slow(engine: &Engine) -> bool {
    engine.database().is_some_and(|d| d.notices_slow())
}

/// Whether `engine`'s jobs may run on a thread of an async runtime: SQLite's and
/// PostgreSQL's may; MariaDB's driver blocks on a runtime of its own, which panics inside
/// another.
#[cfg(feature = "http")]
pub(super) fn runs_on_worker(engine: &Engine) -> bool {
    engine.database().is_none_or(|d| d.runs_on_async_worker())
}

/// The lane over the server's current surface.
#[derive(Clone)]
pub struct Lane {
    live: Arc<Live>,
    /// `pipe` (stdio) or `tcp` (HTTP), for the calls' spans.
    transport: &'static str,
}

#[derive(Serialize)]
struct Answer<'a, T: Serialize> {
    jsonrpc: &'static str,
    id: &'a RawValue,
    #[serde(skip_serializing_if = "Option::is_none")]
    result: Option<T>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<rmcp::model::ErrorData>,
}

impl Lane {
    /// The lane of the transport `transport` (`pipe` for stdio, `tcp` for HTTP).
    pub fn new(live: Arc<Live>, transport: &'static str) -> Lane {
        Lane { live, transport }
    }

    /// The engine that answers `call` on the lane when the lane takes it, arrived by
    /// `route`: the one place that decides which calls take the lane. The request must be
    /// one rmcp would take as it is (see [`Route`]), of the kind its session's lifecycle
    /// expects, and call a tool of the server's own, offered (`serve --toolset`), that
    /// reads, has no handler, asks no
    /// confirmation and never becomes a task; over HTTP without a session, a tool that
    /// mirrors no argument into a header (`x-mcp-header`), which rmcp checks.
    pub fn admits(&self, call: &Call, route: Route) -> Option<Arc<Engine>> {
        let (admitted, sessionless) = match route {
            Route::Stdio { lifecycle } => (lifecycle, false),
            #[cfg(feature = "http")]
            Route::Http {
                plain,
                session,
                standard_headers,
            } => match session {
                Some(ready) => (plain && ready && !call.per_request(), false),
                None => (plain && call.per_request() && standard_headers, true),
            },
        };
        let now = self.live.now();
        if !now.offers(call.name()) {
            return None;
        }
        let engine = now.engine.clone();
        let tool = engine.def.tool(call.name())?;
        let admitted = admitted
            && takes_lane(tool)
            && !(sessionless && contains!(tool.input_schema.as_bytes(), b"x-mcp-header"));
        admitted.then_some(engine)
    }

    /// Runs `call` on this thread and returns its answer, the JSON-RPC message, in a span of
    /// its own when telemetry is on (a lane request carries no trace context; one that does
    /// goes to rmcp). `cancel` interrupts the statement when the client cancels the request;
    /// `slow` acts once the call turns out slow.
    pub fn answer(
        &self,
        call: &Call,
        engine: &Engine,
        cancel: Arc<AtomicBool>,
        slow: Option<Slow>,
    ) -> Vec<u8> {
        // A request of 2026-07-28 names its client itself: its session is shown with it.
        if let Some(client) = call.client.as_deref() {
            crate::watch::named(
                || crate::watch::Origin::of(self.transport, call.session.as_deref(), None),
                client,
            );
        }
        let _serving = crate::watch::serving(|| {
            crate::watch::Origin::of(
                self.transport,
                call.session.as_deref(),
                call.client.as_deref(),
            )
        });
        if !crate::telemetry::on() {
            return self.run(call, engine, cancel, slow).0;
        }
        let id = call.id.get().trim_matches('"').to_string();
        let session = call.session.clone();
        let target = engine
            .def
            .tool(call.name())
            .map(|t| std::borrow::Cow::Borrowed(t.name));
        let info = crate::telemetry::RequestInfo {
            method: "tools/call",
            target,
            id: Some(&id),
            session: session.as_deref(),
            transport: self.transport,
        };
        let span = crate::telemetry::Request::start(&info, crate::telemetry::Parent::default());
        let (answer, error) = {
            let _attached = span.carry().attach();
            self.run(call, engine, cancel, slow)
        };
        span.finish(&info, error.as_deref());
        answer
    }

    /// [`Lane::answer`]'s work: the message, and the error type of its answer.
    fn run(
        &self,
        call: &Call,
        engine: &Engine,
        cancel: Arc<AtomicBool>,
        slow: Option<Slow>,
    ) -> (Vec<u8>, Option<String>) {
        let modern = call.per_request();
        let name = &call.name;
        let arguments = call.arguments.as_ref();
        let link = Link {
            progress: None,
            client: None,
            slow,
            stop: None,
            caller: call.caller.clone(),
        };
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            engine.call_json(name, arguments, Some(cancel), link)
        }))
        .unwrap_or_else(|_| {
            tracing::error!(tool = %crate::logsafe::quoted(name), "a call panicked");
            Err(engine.internal_error(name))
        });
        let outcome = match outcome {
            // A row, already written as a JSON object.
            Ok(Reply::Json { text, .. }) => {
                return (structured_answer(&call.id, &text, modern), None);
            }
            Ok(Reply::Done(s)) => Ok(s),
            Err(e) => Err(e),
        };
        let error = match &outcome {
            Ok(_) => None,
            Err(crate::engine::CallError::Tool(_)) => Some("tool_error".to_string()),
            Err(crate::engine::CallError::Rpc(e)) => Some(e.code.to_string()),
            Err(_) => Some("-32602".to_string()),
        };
        let text = match &outcome {
            Ok(s) if !s.content && s.structured.is_object() => {
                serde_json::to_string(&s.structured).ok()
            }
            _ => None,
        };
        let answer = match text {
            Some(text) => structured_answer(&call.id, &text, modern),
            None => rmcp_answer(
                &call.id,
                crate::protocol::to_result(outcome, engine.def),
                modern,
            ),
        };
        (answer, error)
    }
}

/// The answer to a call whose result is a structured object, written directly from `text`, the
/// result's JSON. It is what [`rmcp_answer`] sends for it, byte for byte (a test holds them to
/// that), but the result is serialised once: `text` is copied as `structuredContent` and
/// escaped once into the text block, where rmcp would serialise the result twice more. A
/// `modern` (2026-07-28) result starts with `resultType`, as rmcp gives that revision.
fn structured_answer(id: &RawValue, text: &str, modern: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(2 * text.len() + 160);
    out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    out.extend_from_slice(id.get().as_bytes());
    out.extend_from_slice(br#","result":{"#);
    if modern {
        out.extend_from_slice(br#""resultType":"complete","#);
    }
    out.extend_from_slice(br#""content":[{"type":"text","text":""#);
    quote_json(text, &mut out);
    out.extend_from_slice(br#""}],"structuredContent":"#);
    out.extend_from_slice(text.as_bytes());
    out.extend_from_slice(br#","isError":false}}"#);
    out
}

/// Writes `json`, compact JSON text, as the inside of a JSON string: `"` and `\` escaped.
/// Nothing else in compact JSON needs escaping, since it holds no raw control characters
/// (strings carry them escaped, and there is no whitespace between tokens). The quotes are
/// dense in JSON, so this runs from quote to quote rather than byte by byte, as a general
/// string escaper must.
fn quote_json(json: &str, out: &mut Vec<u8>) {
    let bytes = json.as_bytes();
    let mut from = 0;
    for at in memchr::memchr2_iter(b'"', b'\\', bytes) {
        out.extend_from_slice(&bytes[from..at]);
        out.extend_from_slice(&[b'\\', bytes[at]]);
        from = at + 1;
    }
    out.extend_from_slice(&bytes[from..]);
}

/// The answer rmcp would send for `outcome`, a call's result from [`to_result`], in the same
/// envelope: in the shape rmcp gives revisions before 2026-07-28, or that revision's when
/// `modern`.
///
/// [`to_result`]: crate::protocol::to_result
fn rmcp_answer(
    id: &RawValue,
    outcome: Result<rmcp::model::CallToolResult, rmcp::model::ErrorData>,
    modern: bool,
) -> Vec<u8> {
    let (result, error) = match outcome {
        Ok(r) => {
            let mut r = rmcp::model::ServerResult::CallToolResult(r);
            if modern {
                r.fill_missing_cache_hints();
            } else {
                // Earlier revisions: no `resultType: complete` and no structured content
                // that is not an object.
                r.strip_result_type_for_legacy_peer();
                r.strip_non_object_output_for_legacy_peer();
            }
            (Some(r), None)
        }
        // 2026-07-28 has no code of its own for a resource not found.
        Err(mut e) if modern && e.code == rmcp::model::ErrorCode::RESOURCE_NOT_FOUND => {
            e.code = rmcp::model::ErrorCode::INVALID_PARAMS;
            (None, Some(e))
        }
        Err(e) => (None, Some(e)),
    };
    let answer = Answer {
        jsonrpc: "2.0",
        id,
        result,
        error,
    };
    serde_json::to_vec(&answer).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_plain_tool_calls_are_lane_requests() {
        // (line, a lane request)
        let cases: &[(&str, bool)] = &[
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{"a":1}}}"#,
                true,
            ),
            (
                r#"{"jsonrpc":"2.0","id":"x-1","method":"tools/call","params":{"name":"t"}}"#,
                true,
            ),
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","_meta":{"progressToken":1}}}"#,
                false,
            ),
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","task":{}}}"#,
                false,
            ),
            (
                r#"{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"t"}}"#,
                false,
            ),
            (
                r#"{"jsonrpc":"2.0","id":1.5e0,"method":"tools/call","params":{"name":"t"}}"#,
                false,
            ),
            (
                r#"{"jsonrpc":"1.0","id":1,"method":"tools/call","params":{"name":"t"}}"#,
                false,
            ),
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"name":"tools/call"}}"#,
                false,
            ),
            (
                r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"t"}}"#,
                false,
            ),
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":[1]}}"#,
                false,
            ),
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"},"extra":1}"#,
                false,
            ),
            ("not json \"tools/call\"", false),
        ];
        for (line, lane) in cases {
            let call = Call::parse(line.as_bytes());
            let usable = call.as_ref().is_some_and(|c| c.request_id().is_some());
            assert_eq!(usable, *lane, "{line}");
            assert!(call.is_none_or(|c| !c.per_request()), "{line}");
        }
    }

    #[test]
    fn a_request_of_2026_07_28_is_a_lane_request_with_only_what_that_revision_requires() {
        let version = r#""io.modelcontextprotocol/protocolVersion""#;
        let caps = r#""io.modelcontextprotocol/clientCapabilities""#;
        let info = r#""io.modelcontextprotocol/clientInfo""#;
        // (the `_meta`, a lane request)
        let cases = [
            (format!(r#"{{{version}:"2026-07-28",{caps}:{{}}}}"#), true),
            (
                format!(
                    r#"{{{version}:"2026-07-28",{caps}:{{"elicitation":{{}},"roots":{{"listChanged":true}}}},{info}:{{"name":"c","version":"1"}}}}"#
                ),
                true,
            ),
            (
                format!(r#"{{{caps}:{{}},{version}:"2026-07-28",{info}:null}}"#),
                true,
            ),
            // Another revision, or what 2026-07-28 requires missing or of the wrong type.
            (format!(r#"{{{version}:"2025-11-25",{caps}:{{}}}}"#), false),
            (format!(r#"{{{version}:"2026-12-01",{caps}:{{}}}}"#), false),
            (format!(r#"{{{version}:"2026-07-28"}}"#), false),
            (format!(r#"{{{caps}:{{}}}}"#), false),
            (format!(r#"{{{version}:"2026-07-28",{caps}:5}}"#), false),
            (format!(r#"{{{version}:2026,{caps}:{{}}}}"#), false),
            (
                format!(r#"{{{version}:"2026-07-28",{caps}:{{}},{info}:{{"name":1}}}}"#),
                false,
            ),
            // Anything more is rmcp's: a progress token, a log level, a key of another kind.
            (
                format!(r#"{{{version}:"2026-07-28",{caps}:{{}},"progressToken":1}}"#),
                false,
            ),
            (
                format!(
                    r#"{{{version}:"2026-07-28",{caps}:{{}},"io.modelcontextprotocol/logLevel":"info"}}"#
                ),
                false,
            ),
            (
                format!(r#"{{{version}:"2026-07-28",{caps}:{{}},"x":1}}"#),
                false,
            ),
            ("{}".to_string(), false),
            ("null".to_string(), false),
        ];
        for (meta, lane) in cases {
            let line = format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"t","arguments":{{}},"_meta":{meta}}}}}"#
            );
            let call = Call::parse(line.as_bytes());
            assert_eq!(call.is_some(), lane, "{meta}");
            assert!(call.is_none_or(|c| c.per_request()), "{meta}");
        }
    }

    #[test]
    fn a_structured_answer_is_what_rmcp_sends() {
        let results = [
            json!({}),
            json!({"id": "L-001", "tags": ["a", "b"], "n": 3, "x": 1.5, "none": null, "ok": true}),
            json!({"quote": "say \"hi\"\\ \n\t\u{1}\u{7f}", "unicode": "é ☃ 😀 \u{2028}"}),
            json!({"nested": {"deep": [{"a": [1, -2, 3.25e-10]}, {}], "big": u64::MAX}}),
            json!({"z": 1, "a": 2, "m": {"y": 1, "b": 2}}),
        ];
        for id in [r#"7"#, r#""req-1""#, r#""é\"x""#, r#"-3"#] {
            let id = RawValue::from_string(id.into()).unwrap();
            for v in &results {
                let text = serde_json::to_string(v).unwrap();
                for modern in [false, true] {
                    let ours = String::from_utf8(structured_answer(&id, &text, modern)).unwrap();
                    let result = rmcp::model::CallToolResult::structured(v.clone());
                    let rmcp = rmcp_answer(&id, Ok(result), modern);
                    assert_eq!(ours, String::from_utf8(rmcp).unwrap(), "{v} {modern}");
                }
            }
        }
    }
}
