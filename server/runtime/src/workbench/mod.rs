//! The workbench (`serve --ui`, `dev --ui`): a page served by the server's own process that
//! shows, live, every tool call it handles, from any client, the one that started it over
//! stdio included; that lists its tools, resources and prompts with a form for each, called
//! through the real MCP endpoint; and that runs the spec's examples, every write rolled back.
//!
//! This module keeps what the page shows: the calls in a bounded ring (the last [`RING`]),
//! each written as JSON when a page reads it (arguments sanitised exactly as the call log's;
//! the response kept while a page is open), `dev`'s last reload, and the examples' runs.
//! Nothing is written to disk. `site` answers the page's requests under `/ui/`; the
//! Streamable HTTP gate (`transport::http`) serves it, with `/mcp`, on the workbench's own
//! loopback listener or on the MCP listener behind its token, so the same access rules apply
//! to both. Without the `http` feature nothing serves the page: the ring is never installed,
//! and what would fill and read it is left unused.
#![cfg_attr(not(feature = "http"), allow(dead_code))]

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use tokio::sync::broadcast;

use crate::calllog::Call;
use crate::engine::{CallError, Engine, Reply};

#[cfg(feature = "http")]
mod site;
#[cfg(feature = "http")]
pub(crate) use site::{PREFIX, answer, page_file};

/// How many calls the ring keeps.
pub const RING: usize = 1000;

/// The most bytes of a call's arguments, or of its response, the ring keeps as they came (as
/// JSON): larger arguments are kept as the call log shows them (long text cut), or else left
/// out, so that the ring holds at most about 32 MiB however large the calls.
const KEPT_BYTES: usize = 16 * 1024;

/// What the workbench shows: the last [`RING`] calls, `dev`'s last reload, and the stream
/// of both.
pub struct Calls {
    ring: Mutex<VecDeque<Arc<Record>>>,
    live: broadcast::Sender<Event>,
    next: AtomicU64,
    /// `dev`'s last reload as the page reads it, for a page opened after it.
    status: Mutex<Option<Arc<str>>>,
}

/// Whether the database holds the spec's sample rows (`dev`'s scratch database), so that the
/// examples that need them run too.
static SAMPLE_ROWS: AtomicBool = AtomicBool::new(false);

/// What the page is sent as it happens.
#[derive(Clone)]
pub(crate) enum Event {
    Call(Arc<Record>),
    /// `dev` served a new version, or refused one: the JSON the page reads.
    Reload(Arc<str>),
}

/// One call as kept. Its JSON (the arguments sanitised) is written only when a page reads
/// it, so that a call costs little more than a copy of its arguments while no page is open.
pub struct Record {
    seq: u64,
    at_ms: u64,
    tool: Box<str>,
    caller: Option<Box<str>>,
    outcome: Box<str>,
    duration_ms: f64,
    result_bytes: usize,
    arguments: Option<Value>,
    /// What the client was answered: kept for every failure, and for a success while a page
    /// is open (a copy of every result would cost each call while nobody looks).
    response: Option<Value>,
}

impl Record {
    /// Whether a page of `whose` (a caller's subject; `None`: the operator) shows it.
    pub(crate) fn shown_to(&self, whose: Option<&str>) -> bool {
        whose.is_none_or(|sub| self.caller.as_deref() == Some(sub))
    }

    /// The call as the page reads it: one JSON object.
    pub(crate) fn line(&self) -> String {
        let arguments = self
            .arguments
            .as_ref()
            .map_or(Value::Null, crate::calllog::sanitize_arguments);
        json!({
            "seq": self.seq,
            "at_ms": self.at_ms,
            "method": "tools/call",
            "tool": self.tool,
            "caller": self.caller,
            "outcome": self.outcome,
            "duration_ms": self.duration_ms,
            "result_bytes": self.result_bytes,
            "arguments": arguments,
            "response": self.response,
        })
        .to_string()
    }
}

static ACTIVE: OnceLock<Arc<Calls>> = OnceLock::new();

/// The process's workbench, when `--ui` started one; the engine records each call there.
pub(crate) fn active() -> Option<&'static Arc<Calls>> {
    ACTIVE.get()
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl Calls {
    /// Keeps `call`, which ended with `result`, and sends it to the pages open.
    pub(crate) fn record(&self, call: &Call<'_>, result: &Result<Reply, CallError>) {
        let watched = self.live.receiver_count() > 0;
        let record = Arc::new(Record {
            seq: self.next.fetch_add(1, Ordering::Relaxed),
            at_ms: now_ms(),
            tool: call.tool.into(),
            caller: call.sub.map(Into::into),
            outcome: call.outcome.into(),
            duration_ms: call.duration_ms,
            result_bytes: call.result_bytes,
            arguments: call.arguments.map(kept_arguments),
            response: response(result, watched),
        });
        let old = {
            let mut ring = self.ring.lock().unwrap_or_else(PoisonError::into_inner);
            let old = (ring.len() == RING).then(|| ring.pop_front()).flatten();
            ring.push_back(record.clone());
            old
        };
        // Freed outside the lock.
        drop(old);
        if watched {
            let _ = self.live.send(Event::Call(record));
        }
    }

    fn snapshot(&self) -> Vec<Arc<Record>> {
        let ring = self.ring.lock().unwrap_or_else(PoisonError::into_inner);
        ring.iter().cloned().collect()
    }

    fn status(&self) -> Option<Arc<str>> {
        self.status
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn reloaded(&self, line: Value) {
        let line: Arc<str> = line.to_string().into();
        *self.status.lock().unwrap_or_else(PoisonError::into_inner) = Some(line.clone());
        if self.live.receiver_count() > 0 {
            let _ = self.live.send(Event::Reload(line));
        }
    }
}

/// `dev` serves a new version with `tools` tools: the pages list them again.
pub(crate) fn reloaded(tools: usize) {
    if let Some(calls) = active() {
        calls.reloaded(json!({"ok": true, "tools": tools, "at_ms": now_ms()}));
    }
}

/// `dev` refused the file as saved, for `problems` (each at its file:line:column); the pages
/// show them until a good version is served.
pub(crate) fn refused(problems: &str) {
    if let Some(calls) = active() {
        calls.reloaded(json!({"ok": false, "problems": problems, "at_ms": now_ms()}));
    }
}

/// Tells the workbench that the database holds the spec's sample rows (`dev` without `--db`).
pub(crate) fn on_sample_rows() {
    SAMPLE_ROWS.store(true, Ordering::Relaxed);
}

/// The answer a call's record keeps: the failure, or (`watched`) the result.
fn response(result: &Result<Reply, CallError>, watched: bool) -> Option<Value> {
    let answered = match result {
        Ok(_) if !watched => return None,
        Ok(Reply::Done(s)) => s.structured.clone(),
        Ok(Reply::Json { text, size }) if *size <= KEPT_BYTES => {
            serde_json::from_str(text).unwrap_or(Value::Null)
        }
        Ok(Reply::Json { size, .. }) => return Some(omitted(*size, "result")),
        Err(CallError::Tool(e)) => {
            json!({"isError": true, "code": e.code, "message": e.message, "data": e.data})
        }
        Err(CallError::Rpc(e)) => {
            json!({"error": {"code": e.code, "message": e.message, "data": e.data}})
        }
        Err(CallError::UnknownTool(m) | CallError::MalformedArguments(m)) => {
            json!({"error": {"code": -32602, "message": m}})
        }
    };
    let size = crate::rows::approx_json_size(&answered);
    Some(if size <= KEPT_BYTES {
        answered
    } else {
        omitted(size, "result")
    })
}

fn omitted(size: usize, what: &str) -> Value {
    json!({ "omitted": format!("{size} bytes of {what}, more than the workbench keeps") })
}

/// The spec's examples as the page lists them: each one's tool, place, arguments and whether
/// it can run here.
pub(crate) fn examples(engine: &Engine) -> Value {
    let sample_rows = SAMPLE_ROWS.load(Ordering::Relaxed);
    let rolled_back = engine.database().is_some();
    let listed: Vec<Value> = engine
        .def
        .examples
        .iter()
        .enumerate()
        .map(|(n, e)| {
            let why_not = if !rolled_back {
                Some("the server has no database to roll its effects back on (`mcpspec test` runs it)")
            } else if e.sample_rows && !sample_rows {
                Some("it expects the spec's sample rows (`mcpspec dev` and `mcpspec test` run it)")
            } else {
                None
            };
            json!({
                "n": n,
                "tool": e.tool,
                "at": e.at,
                "arguments": serde_json::from_str::<Value>(e.arguments).unwrap_or(Value::Null),
                "expect": expectation(&e.expect),
                "runs": why_not.is_none(),
                "why_not": why_not,
            })
        })
        .collect();
    json!({ "server": engine.def.name, "examples": listed })
}

fn expectation(expect: &crate::def::ExpectDef) -> Value {
    use crate::def::ExpectDef;
    match expect {
        ExpectDef::Returns(text) => {
            json!({"returns": serde_json::from_str::<Value>(text).unwrap_or(Value::Null)})
        }
        ExpectDef::Empty => json!({"returns": "no rows"}),
        ExpectDef::Error(code) => json!({"error": code}),
    }
}

/// Runs the examples (`which`: one by its number, else every one that can run here) on a
/// rehearsal twin of `engine`, every write rolled back, and says how each went.
pub(crate) fn run_examples(engine: &Engine, which: Option<usize>) -> Result<Value, String> {
    let listed = examples(engine);
    let runnable = |n: usize| listed["examples"][n]["runs"].as_bool() == Some(true);
    let chosen: Vec<usize> = match which {
        Some(n) if n < engine.def.examples.len() => {
            if !runnable(n) {
                return Err(listed["examples"][n]["why_not"]
                    .as_str()
                    .unwrap_or("it cannot run here")
                    .to_string());
            }
            vec![n]
        }
        Some(n) => return Err(format!("there is no example {n}")),
        None => (0..engine.def.examples.len())
            .filter(|n| runnable(*n))
            .collect(),
    };
    let twin = match engine.rehearsal() {
        Some(Ok(twin)) => twin,
        Some(Err(e)) => {
            tracing::warn!(error = %e, "the workbench's rehearsal did not start");
            return Err("the rehearsal database did not open; the server log says why".into());
        }
        None => return Err("this server has no database to roll its examples back on".into()),
    };
    let ran: Vec<Value> = chosen
        .into_iter()
        .map(|n| {
            let outcome = crate::examples::run(&twin, &engine.def.examples[n]);
            json!({
                "n": n,
                "tool": outcome.tool,
                "at": outcome.at,
                "passed": outcome.failure.is_none(),
                "failure": outcome.failure,
            })
        })
        .collect();
    Ok(json!({ "ran": ran }))
}

/// A call's arguments as the ring keeps them: within [`KEPT_BYTES`].
fn kept_arguments(arguments: &serde_json::Value) -> serde_json::Value {
    use crate::rows::approx_json_size;
    let size = approx_json_size(arguments);
    if size <= KEPT_BYTES {
        return arguments.clone();
    }
    let shown = crate::calllog::sanitize_arguments(arguments);
    if approx_json_size(&shown) <= KEPT_BYTES {
        return shown;
    }
    omitted(size, "arguments")
}

/// Binds `addr` (loopback only) for a workbench of its own, and starts recording calls.
#[cfg(feature = "http")]
pub(crate) async fn bind(addr: SocketAddr) -> Result<tokio::net::TcpListener, UiError> {
    on_this_machine(addr)?;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| UiError::Bind { addr, source })?;
    install();
    Ok(listener)
}

/// Starts recording calls, for a workbench about to serve them.
pub(crate) fn install() {
    let _ = ACTIVE.set(Arc::new(Calls {
        ring: Mutex::new(VecDeque::with_capacity(RING)),
        live: broadcast::channel(RING).0,
        next: AtomicU64::new(1),
        status: Mutex::new(None),
    }));
}

/// Why the workbench did not start.
#[derive(Debug, thiserror::Error)]
pub enum UiError {
    #[error(
        "--ui {0} is not a loopback address: on a listener of its own the workbench asks for no token, so it listens on this machine only (127.0.0.1 or [::1]); beside --http, `--ui` without an address serves it at /ui/ on the MCP listener, behind its token"
    )]
    NotLoopback(SocketAddr),
    #[error("cannot listen on {addr} for the workbench: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
}

/// Refuses a workbench address that is not on this machine, before anything is opened.
pub(crate) fn on_this_machine(addr: SocketAddr) -> Result<(), UiError> {
    if addr.ip().to_canonical().is_loopback() {
        Ok(())
    } else {
        Err(UiError::NotLoopback(addr))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ring_keeps_large_arguments_within_its_bound() {
        let small = json!({"id": 7, "tags": ["a", "b"]});
        assert_eq!(kept_arguments(&small), small);
        // Long text: kept as the call log shows it.
        let text = json!({"content": "x".repeat(1_000_000)});
        let kept = kept_arguments(&text);
        let content = kept["content"].as_str().expect("text, cut");
        assert!(
            content.len() < 1000 && content.starts_with("xxx"),
            "{content}"
        );
        // A long list of short values: left out, saying how large it was.
        let list = json!({"ids": (0..100_000).collect::<Vec<_>>()});
        let kept = kept_arguments(&list);
        assert!(
            kept["omitted"]
                .as_str()
                .is_some_and(|o| o.ends_with("bytes of arguments, more than the workbench keeps")),
            "{kept}"
        );
        assert!(crate::rows::approx_json_size(&kept) <= KEPT_BYTES);
    }

    #[test]
    fn a_response_is_kept_for_failures_and_for_results_a_page_watches() {
        use crate::engine::Success;
        let ok = || {
            Ok(Reply::Done(Success {
                structured: json!({"rows": [1, 2]}),
                content: false,
            }))
        };
        assert_eq!(response(&ok(), false), None);
        assert_eq!(response(&ok(), true), Some(json!({"rows": [1, 2]})));
        let row = Ok(Reply::Json {
            text: r#"{"id":7}"#.into(),
            size: 8,
        });
        assert_eq!(response(&row, true), Some(json!({"id": 7})));
        let failed = Err(CallError::Tool(crate::tool_error::ToolError::new(
            "NOT_FOUND",
            "no entry 7",
        )));
        assert_eq!(
            response(&failed, false),
            Some(
                json!({"isError": true, "code": "NOT_FOUND", "message": "no entry 7", "data": null})
            )
        );
        let large = Ok(Reply::Done(Success {
            structured: json!({"text": "x".repeat(KEPT_BYTES + 1)}),
            content: false,
        }));
        let kept = response(&large, true).expect("kept");
        assert!(
            kept["omitted"]
                .as_str()
                .is_some_and(|o| o.ends_with("bytes of result, more than the workbench keeps")),
            "{kept}"
        );
    }

    #[test]
    fn an_oauth_caller_is_shown_its_own_calls_only() {
        let record = |caller: Option<&str>| Record {
            seq: 1,
            at_ms: 0,
            tool: "t".into(),
            caller: caller.map(Into::into),
            outcome: "ok".into(),
            duration_ms: 0.0,
            result_bytes: 0,
            arguments: None,
            response: None,
        };
        let (alices, operators) = (record(Some("alice")), record(None));
        assert!(alices.shown_to(None) && operators.shown_to(None));
        assert!(alices.shown_to(Some("alice")));
        assert!(!alices.shown_to(Some("bob")));
        assert!(!operators.shown_to(Some("alice")));
    }
}
