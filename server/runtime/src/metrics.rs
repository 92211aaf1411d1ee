//! Prometheus metrics of the tool calls, served at `/metrics` on the Streamable HTTP transport
//! when `serve --http ADDR --metrics` asks for them. Off by default, and then free: a call asks
//! one `OnceLock` whether metrics are on and records nothing. On, each call adds to a counter
//! by tool and outcome (`ok` or the error code) and to a histogram of its duration by tool.
//! The tool names and codes are the spec's (and the runtime's own codes), so the label sets
//! are bounded; arguments never become labels.

use std::sync::OnceLock;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// The media type of what [`encode`] writes, which Prometheus asks for first.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Outcome {
    tool: String,
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Tool {
    tool: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Provider {
    provider: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ProviderOutcome {
    provider: &'static str,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PoolState {
    state: &'static str,
}

/// The process's metrics.
struct Metrics {
    registry: Registry,
    calls: Family<Outcome, Counter>,
    durations: Family<Tool, Histogram>,
    in_flight: Gauge,
    /// The database pool's connections by state (`in_use`, `idle`), read at each scrape.
    pool: Family<PoolState, Gauge>,
    pool_max: Gauge,
    /// Spans the OpenTelemetry exporter could not deliver, read at each scrape.
    dropped_spans: Counter,
    /// Calls to embedding providers by kind and outcome, the texts they embedded, how long
    /// they took, and the texts waiting for a batch.
    embedding_calls: Family<ProviderOutcome, Counter>,
    embedding_texts: Family<Provider, Counter>,
    embedding_durations: Family<Provider, Histogram>,
    #[cfg_attr(not(feature = "embeddings"), allow(dead_code))]
    embedding_queued: Gauge,
}

static METRICS: OnceLock<Metrics> = OnceLock::new();

/// Turns metrics on for the process, naming the server in every series' `server` label.
pub fn enable(server: &str) {
    METRICS.get_or_init(|| {
        let mut registry = Registry::with_labels(
            [(
                std::borrow::Cow::Borrowed("server"),
                std::borrow::Cow::Owned(server.to_string()),
            )]
            .into_iter(),
        );
        let calls = Family::<Outcome, Counter>::default();
        registry.register(
            "mcpspec_tool_calls",
            "Tool calls answered, by tool and outcome (ok or the error code)",
            calls.clone(),
        );
        // 100 µs to about 6.5 s, doubling.
        let durations = Family::<Tool, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.0001, 2.0, 17))
        });
        registry.register(
            "mcpspec_tool_call_duration_seconds",
            "How long tool calls took, by tool",
            durations.clone(),
        );
        let in_flight = Gauge::default();
        registry.register(
            "mcpspec_tool_calls_in_flight",
            "Tool calls running now",
            in_flight.clone(),
        );
        let pool = Family::<PoolState, Gauge>::default();
        registry.register(
            "mcpspec_pool_connections",
            "The database pool's connections, by state (in_use or idle; SQLite: its readers)",
            pool.clone(),
        );
        let pool_max = Gauge::default();
        registry.register(
            "mcpspec_pool_max_connections",
            "The most connections the database pool opens",
            pool_max.clone(),
        );
        let dropped_spans = Counter::default();
        registry.register(
            "mcpspec_otel_dropped_spans",
            "Spans the OpenTelemetry exporter could not deliver to the collector (dropped)",
            dropped_spans.clone(),
        );
        let embedding_calls = Family::<ProviderOutcome, Counter>::default();
        registry.register(
            "mcpspec_embedding_calls",
            "Calls to embedding providers, by kind (static or openai) and outcome (ok, failed or stopped)",
            embedding_calls.clone(),
        );
        let embedding_texts = Family::<Provider, Counter>::default();
        registry.register(
            "mcpspec_embedding_texts",
            "Texts embedded by providers (not the ones the cache had), by kind",
            embedding_texts.clone(),
        );
        let embedding_durations = Family::<Provider, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.00001, 2.0, 22))
        });
        registry.register(
            "mcpspec_embedding_call_duration_seconds",
            "How long calls to embedding providers took, retries included, by kind",
            embedding_durations.clone(),
        );
        let embedding_queued = Gauge::default();
        registry.register(
            "mcpspec_embedding_queued_texts",
            "Texts waiting for an HTTP embedding provider's next batch",
            embedding_queued.clone(),
        );
        Metrics {
            registry,
            calls,
            durations,
            in_flight,
            pool,
            pool_max,
            dropped_spans,
            embedding_calls,
            embedding_texts,
            embedding_durations,
            embedding_queued,
        }
    });
}

/// A call that started: counted in flight until the guard drops.
pub struct Running(());

impl Running {
    /// Starts counting a call, when metrics are on.
    pub fn start() -> Option<Running> {
        let m = METRICS.get()?;
        m.in_flight.inc();
        Some(Running(()))
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(m) = METRICS.get() {
            m.in_flight.dec();
        }
    }
}

/// Records one answered call of `tool` with `outcome` that took `took`.
pub fn record(tool: &str, outcome: &str, took: Duration) {
    let Some(m) = METRICS.get() else {
        return;
    };
    m.calls
        .get_or_create(&Outcome {
            tool: tool.to_string(),
            outcome: outcome.to_string(),
        })
        .inc();
    m.durations
        .get_or_create(&Tool {
            tool: tool.to_string(),
        })
        .observe(took.as_secs_f64());
}

/// Records one call to an embedding provider of `kind` that embedded `texts` texts in `took`,
/// failed with `error` (`failed`, `stopped`) or not.
pub fn embedding(kind: &'static str, texts: usize, took: Duration, error: Option<&'static str>) {
    let Some(m) = METRICS.get() else {
        return;
    };
    let outcome = error.unwrap_or("ok");
    m.embedding_calls
        .get_or_create(&ProviderOutcome {
            provider: kind,
            outcome,
        })
        .inc();
    m.embedding_texts
        .get_or_create(&Provider { provider: kind })
        .inc_by(texts as u64);
    m.embedding_durations
        .get_or_create(&Provider { provider: kind })
        .observe(took.as_secs_f64());
}

/// Moves the count of texts waiting for an HTTP provider's next batch by `by`.
#[cfg_attr(not(feature = "embeddings"), allow(dead_code))]
pub fn embedding_queued(by: i64) {
    if let Some(m) = METRICS.get() {
        m.embedding_queued.inc_by(by);
    }
}

/// Every series in the OpenMetrics text format, with the pool's use as it is now; `None`
/// when metrics are off.
pub fn encode(pool: Option<crate::pool_use::PoolUse>) -> Option<String> {
    let m = METRICS.get()?;
    if let Some(p) = pool {
        let idle = p.open.saturating_sub(p.in_use);
        for (state, n) in [("in_use", p.in_use), ("idle", idle)] {
            m.pool.get_or_create(&PoolState { state }).set(i64::from(n));
        }
        m.pool_max.set(i64::from(p.max));
    }
    let dropped = crate::telemetry::dropped_spans();
    m.dropped_spans
        .inc_by(dropped.saturating_sub(m.dropped_spans.get()));
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, &m.registry).ok()?;
    Some(out)
}
