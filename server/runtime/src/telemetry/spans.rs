//! The spans: a lean pipeline of mcpspec's own in place of the SDK's span and batch processor.
//! A sampled request and each of its statements are recorded as a small typed [`Record`] (ids,
//! two clock readings, static names, the few values the MCP and database conventions ask for)
//! and handed to the exporter's thread ([`super::export`]) through a bounded queue of a ring
//! per thread ([`super::queue`]), the exporter woken when half the queue is waiting, never per
//! span. Names, attribute keys and texts are written there ([`super::wire`]), straight from the
//! rings, not on the thread serving the call. A full queue, or a batch the collector does not
//! take, drops the spans and counts them ([`dropped`]): a call never waits for the collector.
//! The sampler and the id generator are the SDK's, as `OTEL_TRACES_SAMPLER*` configure them;
//! the resource is the SDK's too (`OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`).
//!
//! The context a statement's span is a child of is the thread's current [`SpanCx`], set while
//! a request's work runs ([`attach`]); only sampled spans are ever current.

use std::borrow::Cow;
use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, OnceLock};
use std::time::{Duration, Instant, SystemTime};

use opentelemetry::propagation::{Extractor, TextMapPropagator};
use opentelemetry::trace::{
    SamplingDecision, SpanId, SpanKind, TraceContextExt, TraceId, TraceState,
};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::Config;

use super::Parent;
use super::queue::Queue;

/// A sampled span as its children see it: its trace, its id, the trace state it carries.
#[derive(Clone, Debug)]
pub(super) struct SpanCx {
    trace: TraceId,
    span: SpanId,
    state: Option<Arc<str>>,
}

/// What a span stands for; its name and attributes are derived from it at export.
pub(super) enum What {
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
pub(super) struct Text(smallvec::SmallVec<[u8; 36]>);

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
    cx: SpanCx,
    /// The parent's id, and whether the parent came from the client (remote).
    parent: Option<(SpanId, bool)>,
    start: Instant,
    end: Instant,
    what: What,
    error: Option<Box<str>>,
}

/// A span that has started: a sampled request, or a statement under one.
pub(super) struct Open {
    cx: SpanCx,
    parent: Option<(SpanId, bool)>,
    start: Instant,
}

struct Pipeline {
    config: Config,
    queue: Arc<Queue>,
    /// How long a flush waits: the export timeout and a second.
    flush_wait: Duration,
}

static PIPELINE: OnceLock<Pipeline> = OnceLock::new();

static DROPPED: AtomicU64 = AtomicU64::new(0);

thread_local! {
    static CURRENT: RefCell<Option<SpanCx>> = const { RefCell::new(None) };
}

/// Whether spans are recorded (an endpoint for traces was found).
pub(super) fn on() -> bool {
    PIPELINE.get().is_some()
}

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

/// The thread's current sampled span.
pub(super) fn current() -> Option<SpanCx> {
    CURRENT.with(|c| c.borrow().clone())
}

/// While alive, a span is the thread's current one; the one before is restored on drop.
pub(super) struct Guard {
    previous: Option<SpanCx>,
}

/// Makes `cx` the thread's current span while the guard lives.
pub(super) fn attach(cx: SpanCx) -> Guard {
    Guard {
        previous: CURRENT.with(|c| c.replace(Some(cx))),
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        let previous = self.previous.take();
        let _ = CURRENT.try_with(|c| *c.borrow_mut() = previous);
    }
}

/// The trace context a request names, as the propagator reads it: its two headers, without
/// copying them into a map.
impl Extractor for Parent<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        match key {
            "traceparent" => self.traceparent,
            "tracestate" => self.tracestate,
            _ => None,
        }
    }

    fn keys(&self) -> Vec<&str> {
        let mut keys = Vec::with_capacity(2);
        if self.traceparent.is_some() {
            keys.push("traceparent");
        }
        if self.tracestate.is_some() {
            keys.push("tracestate");
        }
        keys
    }
}

/// The longest `traceparent` read: version 00's is 55 characters; a later version may add
/// fields after them, which are ignored (W3C Trace Context, section 3.2.4), up to this many.
const TRACEPARENT_MAX: usize = 512;

/// The most list-members a `tracestate` has (W3C Trace Context, section 3.3.1.1).
const TRACESTATE_MEMBERS: usize = 32;

/// The longest `tracestate` read: 32 members of a 256-character key, `=` and a 256-character
/// value, their commas and some optional whitespace.
const TRACESTATE_MAX: usize = TRACESTATE_MEMBERS * 513 + 4 * TRACESTATE_MEMBERS;

/// `parent` within W3C Trace Context's limits: a `traceparent` longer than any version of it
/// is dropped with its `tracestate`, and a `tracestate` that is not a valid list of at most 32
/// members is dropped whole, as the specification says a vendor that cannot parse it does.
fn within_limits(parent: Parent<'_>) -> Parent<'_> {
    let traceparent = parent.traceparent.filter(|p| p.len() <= TRACEPARENT_MAX);
    Parent {
        traceparent,
        tracestate: traceparent.and(parent.tracestate.filter(|s| valid_tracestate(s))),
    }
}

/// Whether `s` is a `tracestate` W3C Trace Context accepts: at most [`TRACESTATE_MEMBERS`]
/// list-members, each `key=value` with the key and value rules of section 3.3.1.3; empty
/// members (between two commas) are allowed and not counted.
fn valid_tracestate(s: &str) -> bool {
    if s.len() > TRACESTATE_MAX {
        return false;
    }
    let mut members = 0;
    for member in s.split(',').map(|m| m.trim_matches([' ', '\t'])) {
        if member.is_empty() {
            continue;
        }
        members += 1;
        let valid = member
            .split_once('=')
            .is_some_and(|(k, v)| valid_key(k) && valid_value(v));
        if members > TRACESTATE_MEMBERS || !valid {
            return false;
        }
    }
    true
}

/// A `tracestate` key: `simple-key` or `tenant@system` (section 3.3.1.3.1).
fn valid_key(key: &str) -> bool {
    let rest = |s: &str, max: usize| {
        s.len() <= max
            && s.bytes().all(|b| {
                b.is_ascii_lowercase()
                    || b.is_ascii_digit()
                    || matches!(b, b'_' | b'-' | b'*' | b'/')
            })
    };
    match key.split_once('@') {
        None => key.starts_with(|c: char| c.is_ascii_lowercase()) && rest(&key[1..], 255),
        Some((tenant, system)) => {
            tenant.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
                && rest(&tenant[1..], 240)
                && system.starts_with(|c: char| c.is_ascii_lowercase())
                && rest(&system[1..], 13)
        }
    }
}

/// A `tracestate` value: up to 256 printable ASCII characters but `,` and `=`, not ending in a
/// space (section 3.3.1.3.2).
fn valid_value(value: &str) -> bool {
    !value.is_empty()
        && value.len() <= 256
        && !value.ends_with(' ')
        && value
            .bytes()
            .all(|b| (0x20..=0x7e).contains(&b) && b != b',' && b != b'=')
}

impl Open {
    /// A request's span, when the sampler keeps it: the child of `parent` when that is a valid
    /// trace context within W3C's limits, else the root of a new trace. `name` is what the
    /// sampler is told.
    pub(super) fn request(parent: Parent<'_>, name: &str, start: Instant) -> Option<Open> {
        let p = PIPELINE.get()?;
        let parent = within_limits(parent);
        let parent = parent
            .traceparent
            .map(|_| TraceContextPropagator::new().extract(&parent))
            .filter(|cx| cx.has_active_span());
        let remote = parent.as_ref().map(|cx| {
            let s = cx.span().span_context().clone();
            (s.trace_id(), s.span_id())
        });
        let trace = remote.map_or_else(|| p.config.id_generator.new_trace_id(), |(t, _)| t);
        let sampled = p.config.sampler.should_sample(
            parent.as_ref(),
            trace,
            name,
            &SpanKind::Server,
            &[],
            &[],
        );
        // The SDK exports only sampled spans: a span recorded but not sampled is not sent.
        if sampled.decision != SamplingDecision::RecordAndSample {
            return None;
        }
        // Most traces carry no state: that is told without writing a header.
        let state = (sampled.trace_state != TraceState::NONE)
            .then(|| sampled.trace_state.header())
            .filter(|s| !s.is_empty());
        Some(Open {
            cx: SpanCx {
                trace,
                span: p.config.id_generator.new_span_id(),
                state: state.map(Arc::from),
            },
            parent: remote.map(|(_, s)| (s, true)),
            start,
        })
    }

    /// A statement's span, the child of the thread's current span; none outside a sampled one.
    pub(super) fn statement() -> Option<Open> {
        Open::child(Instant::now())
    }

    /// A span that started at `start`, the child of the thread's current span; none outside
    /// a sampled one.
    pub(super) fn child(start: Instant) -> Option<Open> {
        let p = PIPELINE.get()?;
        let parent = current()?;
        Some(Open {
            parent: Some((parent.span, false)),
            cx: SpanCx {
                span: p.config.id_generator.new_span_id(),
                ..parent
            },
            start,
        })
    }

    pub(super) fn context(&self) -> &SpanCx {
        &self.cx
    }

    /// Ends the span `at` as `what`, failed with `error`, and queues it for export (dropped
    /// and counted when the queue is full).
    pub(super) fn end(self, what: What, error: Option<Box<str>>, at: Instant) {
        let record = Record {
            cx: self.cx,
            parent: self.parent,
            start: self.start,
            end: at,
            what,
            error,
        };
        if let Some(p) = PIPELINE.get() {
            p.queue.push(record);
        }
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
fn unix(t: Instant) -> u64 {
    let a = &*ANCHOR;
    match t.checked_duration_since(a.at) {
        Some(after) => a.unix_ns.saturating_add(after.as_nanos() as u64),
        None => a.unix_ns.saturating_sub((a.at - t).as_nanos() as u64),
    }
}

/// Starts the pipeline: its queue and the exporter's thread (sending with `resource`), as the
/// standard variables configure them. The sampler and id generator are the SDK's default
/// configuration, read from the same variables.
pub(super) fn install(resource: &opentelemetry_sdk::Resource) -> Result<(), String> {
    let settings = super::export::Settings::from_env()?;
    LazyLock::force(&ANCHOR);
    let flush_wait = settings.flush_wait();
    let queue = Arc::new(Queue::new(settings.queue, settings.batch));
    super::export::spawn(settings, queue.clone(), resource)?;
    let _ = PIPELINE.set(Pipeline {
        config: Config::default(),
        queue,
        flush_wait,
    });
    Ok(())
}

/// Sends what is queued and waits for it: at most the export timeout and a second, and at
/// most `within`.
pub(super) fn flush(within: Duration) {
    let Some(p) = PIPELINE.get() else { return };
    let (ack, done) = std::sync::mpsc::sync_channel(1);
    p.queue.flush(ack);
    let _ = done.recv_timeout(p.flush_wait.min(within));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tracestate_past_w3c_limits_is_dropped_whole() {
        let members = |n: usize| {
            (0..n)
                .map(|i| format!("v{i}=x{i}"))
                .collect::<Vec<_>>()
                .join(",")
        };
        assert!(valid_tracestate(&members(32)));
        assert!(!valid_tracestate(&members(33)));
        assert!(valid_tracestate("a=1, ,b=2,,"));
        assert!(valid_tracestate("tenant1@sys=x,rojo=00f067aa0ba902b7"));
        let long_key = format!("k{}=v", "a".repeat(255));
        assert!(valid_tracestate(&long_key));
        assert!(!valid_tracestate(&format!("k{}=v", "a".repeat(256))));
        assert!(valid_tracestate(&format!("k={}", "v".repeat(256))));
        assert!(!valid_tracestate(&format!("k={}", "v".repeat(257))));
        for bad in [
            "K=1",
            "k",
            "=v",
            "k=",
            "k=a,b=1=2",
            "k=a\tb",
            "k=\u{7f}",
            "1k=v",
            "a@B=1",
        ] {
            assert!(!valid_tracestate(bad), "{bad:?}");
        }
        // The most a valid one can hold is within the bound.
        let biggest = (0..32)
            .map(|i| format!("{}{:0>254}=", (b'a' + i as u8 % 26) as char, i) + &"v".repeat(256))
            .collect::<Vec<_>>()
            .join(" , ");
        assert!(valid_tracestate(&biggest), "{}", biggest.len());
        assert!(!valid_tracestate(&format!("{biggest},x=1")));
        let huge = "k=v,".repeat(250_000);
        assert!(!valid_tracestate(&huge));
    }

    #[test]
    fn a_traceparent_past_its_limit_is_dropped_with_its_state() {
        let p = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let kept = within_limits(Parent {
            traceparent: Some(p),
            tracestate: Some("a=1"),
        });
        assert_eq!((kept.traceparent, kept.tracestate), (Some(p), Some("a=1")));
        let long = format!("{p}-{}", "0".repeat(TRACEPARENT_MAX));
        let dropped = within_limits(Parent {
            traceparent: Some(&long),
            tracestate: Some("a=1"),
        });
        assert_eq!((dropped.traceparent, dropped.tracestate), (None, None));
        let no_state = within_limits(Parent {
            traceparent: Some(p),
            tracestate: Some("a=1,b"),
        });
        assert_eq!((no_state.traceparent, no_state.tracestate), (Some(p), None));
    }

    /// A UUID is kept in the record itself; a longer text goes to the heap; both read back.
    #[test]
    fn a_text_up_to_36_bytes_is_kept_inline() {
        let uuid = "0b9d6a2e-5a43-4e0a-9c1d-3f2a7e8b6c10";
        let inline = Text::from(uuid);
        assert!(!inline.0.spilled());
        assert_eq!(inline.as_bytes(), uuid.as_bytes());
        let long = format!("{uuid}-and-more-é");
        let spilled = Text::from(long.as_str());
        assert!(spilled.0.spilled());
        assert_eq!(spilled.as_bytes(), long.as_bytes());
    }
}
