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

use std::cell::RefCell;
use std::sync::{Arc, LazyLock, OnceLock};
use std::time::{Duration, Instant};

use opentelemetry::propagation::{Extractor, TextMapPropagator};
use opentelemetry::trace::{SamplingDecision, SpanId, SpanKind, TraceContextExt, TraceState};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::Config;

use super::Parent;
use super::queue::Queue;
pub(crate) use super::record::What;
pub(super) use super::record::{ANCHOR, Record, SpanCx, Text, dropped};

/// A span that has started: a sampled request, or a statement under one.
pub(crate) struct Open {
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

thread_local! {
    static CURRENT: RefCell<Option<SpanCx>> = const { RefCell::new(None) };
}

/// Whether spans are recorded (an endpoint for traces was found).
pub(crate) fn on() -> bool {
    PIPELINE.get().is_some()
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
    pub(crate) fn statement() -> Option<Open> {
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
    pub(crate) fn end(self, what: What, error: Option<Box<str>>, at: Instant) {
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
