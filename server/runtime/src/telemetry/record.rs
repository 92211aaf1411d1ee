//! A span as it travels from the thread that recorded it to the exporter: its context
//! ([`SpanCx`]), what it stands for ([`What`]), the ended span ([`Record`]) with its times on
//! the wall clock ([`ANCHOR`]), and the count of spans dropped on the way. The leaf of the
//! span pipeline: [`super::spans`] records, [`super::queue`] carries, [`super::export`] and
//! [`super::wire`] send, and each of them reads these types without reading the others.

use std::borrow::Cow;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::{Instant, SystemTime};

use opentelemetry::trace::{SpanId, TraceId};

/// A sampled span as its children see it: its trace, its id, the trace state it carries.
#[derive(Clone, Debug)]
pub(super) struct SpanCx {
    pub(super) trace: TraceId,
    pub(super) span: SpanId,
    pub(super) state: Option<Arc<str>>,
}

/// What a span stands for; its name and attributes are derived from it at export.
pub(crate) enum What {
    /// An MCP request (a server span).
    Request {
        method: &'static str,
        target: Option<Cow<'static, str>>,
        transport: &'static str,
        id: Option<Text>,
        session: Option<Text>,
    },
    /// A database statement (a client span).
    Statement {
        system: &'static str,
        operation: Option<&'static str>,
    },
    /// A call to an embedding provider (a client span): its kind (`static`, `openai`) and how
    /// many texts it embedded.
    Embedding { provider: &'static str, texts: Text },
}

/// A request's id or session as its record keeps it: inline up to 36 bytes (a UUID fits), so
/// that recording one allocates nothing on the serving thread and frees nothing on the
/// exporter's; a longer one on the heap.
pub(crate) struct Text(pub(super) smallvec::SmallVec<[u8; 36]>);

impl Text {
    /// The text's UTF-8 bytes, as the exporter writes them (unchecked: made only from text).
    pub(super) fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

impl From<&str> for Text {
    fn from(s: &str) -> Text {
        Text(smallvec::SmallVec::from_slice(s.as_bytes()))
    }
}

/// A span that has ended, on its way to the exporter.
pub(super) struct Record {
    pub(super) cx: SpanCx,
    /// The parent's id, and whether the parent came from the client (remote).
    pub(super) parent: Option<(SpanId, bool)>,
    pub(super) start: Instant,
    pub(super) end: Instant,
    pub(super) what: What,
    pub(super) error: Option<Box<str>>,
}

static DROPPED: AtomicU64 = AtomicU64::new(0);

/// The spans dropped since the process started: the queue was full, or the collector did not
/// take their batch.
pub(super) fn dropped() -> u64 {
    DROPPED.load(Ordering::Relaxed)
}

/// Counts `n` dropped spans; says so once, then at each power of two, so that a collector that
/// stays down does not flood the log.
pub(super) fn drop_spans(n: u64, why: &str) {
    let before = DROPPED.fetch_add(n, Ordering::Relaxed);
    let after = before + n;
    if before == 0 || before.ilog2() != after.ilog2() {
        tracing::warn!(dropped = after, "spans dropped: {why}");
    }
}

/// The wall clock at one reading of the monotonic clock. A span reads only the monotonic clock,
/// once at each end (the request's reading is the one its duration is measured with), and its
/// times are placed on the wall clock at export: a clock set back or forward while the
/// process runs moves no span's length.
pub(super) struct Anchor {
    pub(super) at: Instant,
    pub(super) unix_ns: u64,
}

pub(super) static ANCHOR: LazyLock<Anchor> = LazyLock::new(|| Anchor {
    at: Instant::now(),
    unix_ns: SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64),
});

/// `t` in nanoseconds since the Unix epoch, by the anchor.
pub(super) fn unix(t: Instant) -> u64 {
    let a = &*ANCHOR;
    match t.checked_duration_since(a.at) {
        Some(after) => a.unix_ns.saturating_add(after.as_nanos() as u64),
        None => a.unix_ns.saturating_sub((a.at - t).as_nanos() as u64),
    }
}

impl What {
    /// The span's name in at most two words joined by a space: `tools/call get_learning`,
    /// `SELECT`.
    pub(super) fn name(&self) -> (&str, Option<&str>) {
        match self {
            What::Request {
                method,
                target: Some(t),
                ..
            } if target_key(method).is_some() => (method, Some(t)),
            What::Request { method, .. } => (method, None),
            What::Statement {
                system, operation, ..
            } => (operation.unwrap_or(system), None),
            What::Embedding { provider, .. } => ("embeddings", Some(provider)),
        }
    }

    /// Each attribute the conventions ask for, key and text, handed to `each`: MCP's for a
    /// request, the database's for a statement; `error.type` (and a request's JSON-RPC code as
    /// `rpc.response.status_code`) when the span failed with `error`.
    /// A value is handed as its UTF-8 bytes, which is what the wire carries.
    pub(super) fn attributes(
        &self,
        error: Option<&str>,
        mut each: impl FnMut(&'static str, &[u8]),
    ) {
        match self {
            What::Request {
                method,
                target,
                transport,
                id,
                session,
            } => {
                each("mcp.method.name", method.as_bytes());
                each("network.transport", transport.as_bytes());
                if let (Some(key), Some(t)) = (target_key(method), target) {
                    each(key, t.as_bytes());
                }
                if *method == "tools/call" {
                    each("gen_ai.operation.name", b"execute_tool");
                }
                if let Some(id) = id {
                    each("jsonrpc.request.id", id.as_bytes());
                }
                if let Some(s) = session {
                    each("mcp.session.id", s.as_bytes());
                }
                if let Some(e) = error {
                    each("error.type", e.as_bytes());
                    if e.parse::<i64>().is_ok() {
                        each("rpc.response.status_code", e.as_bytes());
                    }
                }
            }
            What::Statement { system, operation } => {
                each("db.system.name", system.as_bytes());
                if let Some(op) = operation {
                    each("db.operation.name", op.as_bytes());
                }
                if let Some(e) = error {
                    each("error.type", e.as_bytes());
                }
            }
            What::Embedding { provider, texts } => {
                each("gen_ai.operation.name", b"embeddings");
                each("gen_ai.provider.name", provider.as_bytes());
                each("mcpspec.embedding.texts", texts.as_bytes());
                if let Some(e) = error {
                    each("error.type", e.as_bytes());
                }
            }
        }
    }
}

impl Record {
    pub(super) fn trace(&self) -> [u8; 16] {
        self.cx.trace.to_bytes()
    }

    pub(super) fn span(&self) -> [u8; 8] {
        self.cx.span.to_bytes()
    }

    pub(super) fn state(&self) -> Option<&str> {
        self.cx.state.as_deref()
    }

    /// The parent's id, and whether the parent came from the client.
    pub(super) fn parent(&self) -> Option<([u8; 8], bool)> {
        self.parent.map(|(p, remote)| (p.to_bytes(), remote))
    }

    pub(super) fn what(&self) -> &What {
        &self.what
    }

    pub(super) fn error(&self) -> Option<&str> {
        self.error.as_deref()
    }

    /// Start and end, in nanoseconds since the Unix epoch.
    pub(super) fn times(&self) -> (u64, u64) {
        (unix(self.start), unix(self.end))
    }

    /// The bytes the record holds outside itself, which the queue bounds: its trace state, an
    /// id or session too long to keep inline, a target that is not one of the spec's names,
    /// its error. Zero for most spans.
    pub(super) fn heap_bytes(&self) -> usize {
        let state = self.cx.state.as_deref().map_or(0, str::len);
        let error = self.error.as_deref().map_or(0, str::len);
        let what = match &self.what {
            What::Request {
                target,
                id,
                session,
                ..
            } => {
                let owned = match target {
                    Some(Cow::Owned(t)) => t.len(),
                    _ => 0,
                };
                let spilled = |t: &Option<Text>| {
                    t.as_ref()
                        .filter(|t| t.0.spilled())
                        .map_or(0, |t| t.0.len())
                };
                owned + spilled(id) + spilled(session)
            }
            What::Statement { .. } | What::Embedding { .. } => 0,
        };
        state + error + what
    }
}

#[cfg(test)]
use std::time::Duration;

#[cfg(test)]
impl Record {
    /// A record of trace `07…`, span `01…` under parent `09…` (from the client when `remote`),
    /// trace state `team=blue`, starting at the anchor and lasting 250 µs.
    pub(super) fn example(what: What, error: Option<&str>, remote: bool) -> Record {
        let start = ANCHOR.at;
        Record {
            cx: SpanCx {
                trace: TraceId::from_bytes([7; 16]),
                span: SpanId::from_bytes([1; 8]),
                state: Some("team=blue".into()),
            },
            parent: Some((SpanId::from_bytes([9; 8]), remote)),
            start,
            end: start + Duration::from_micros(250),
            what,
            error: error.map(Box::from),
        }
    }
}

/// The attribute that names a request's target, for the methods whose target is one of the
/// spec's tools or prompts (a bounded set); none for the others (a resource's URI is not).
pub(super) fn target_key(method: &str) -> Option<&'static str> {
    match method {
        "tools/call" => Some("gen_ai.tool.name"),
        "prompts/get" => Some("gen_ai.prompt.name"),
        _ => None,
    }
}
