//! The OpenTelemetry SDK behind [`super`]: the tracer and meter providers, their OTLP/HTTP
//! exporters (protobuf) and what reads the standard variables. The SDK batches spans on a
//! thread of its own with a bounded queue, so exporting never blocks a call; a batch the
//! collector does not take (down, refusing) is dropped and counted ([`dropped_spans`]).

use std::borrow::Cow;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use opentelemetry::metrics::{Histogram, MeterProvider as _};
use opentelemetry::propagation::{Extractor, TextMapPropagator};
use opentelemetry::trace::{
    SamplingDecision, SamplingResult, SpanKind, Status, TraceContextExt, TraceId, Tracer,
    TracerProvider as _,
};
use opentelemetry::{Context, KeyValue};
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::metrics::SdkMeterProvider;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider, SpanData, SpanExporter};

use super::{Parent, RequestInfo};
use crate::backend::PoolUse;

/// What the process records with, once [`install`] found an endpoint.
struct Live {
    tracer: Option<SdkTracer>,
    duration: Option<Histogram<f64>>,
}

static LIVE: OnceLock<Live> = OnceLock::new();

static DROPPED: AtomicU64 = AtomicU64::new(0);

pub(super) fn on() -> bool {
    LIVE.get().is_some()
}

pub(super) fn tracer() -> Option<&'static SdkTracer> {
    LIVE.get()?.tracer.as_ref()
}

pub(super) fn dropped_spans() -> u64 {
    DROPPED.load(Ordering::Relaxed)
}

/// The providers, shut down (what is batched sent, bounded by the SDK's timeouts) on drop.
pub(super) struct Installed {
    traces: Option<SdkTracerProvider>,
    metrics: Option<SdkMeterProvider>,
}

impl Drop for Installed {
    fn drop(&mut self) {
        let (traces, metrics) = (self.traces.take(), self.metrics.take());
        // The SDK blocks while it flushes: not on an async runtime's thread.
        let _ = std::thread::spawn(move || {
            if let Some(t) = traces {
                let _ = t.shutdown();
            }
            if let Some(m) = metrics {
                let _ = m.shutdown();
            }
        })
        .join();
    }
}

/// Whether the standard variables ask for `signal` (`TRACES`, `METRICS`): an endpoint for it
/// or for every signal, and not `OTEL_<signal>_EXPORTER=none` or `OTEL_SDK_DISABLED=true`.
fn wanted(signal: &str) -> bool {
    let set = |name: &str| std::env::var(name).is_ok_and(|v| !v.trim().is_empty());
    let disabled = std::env::var("OTEL_SDK_DISABLED").is_ok_and(|v| v.eq_ignore_ascii_case("true"));
    let none = std::env::var(format!("OTEL_{signal}_EXPORTER"))
        .is_ok_and(|v| v.trim().eq_ignore_ascii_case("none"));
    !disabled
        && !none
        && (set("OTEL_EXPORTER_OTLP_ENDPOINT")
            || set(&format!("OTEL_EXPORTER_OTLP_{signal}_ENDPOINT")))
}

/// The service's resource: `OTEL_SERVICE_NAME` and `OTEL_RESOURCE_ATTRIBUTES` as the SDK
/// reads them, the server's name when no service name is set.
fn resource(server: &str) -> Resource {
    let named = std::env::var("OTEL_SERVICE_NAME").is_ok_and(|v| !v.trim().is_empty());
    let builder = Resource::builder();
    if named {
        builder.build()
    } else {
        builder.with_service_name(server.to_string()).build()
    }
}

pub(super) fn install(
    server: &str,
    pool: Box<dyn Fn() -> Option<PoolUse> + Send + Sync>,
) -> Result<Option<Installed>, String> {
    let (traces, metrics) = (wanted("TRACES"), wanted("METRICS"));
    if !traces && !metrics {
        return Ok(None);
    }
    let resource = resource(server);
    let tracing = traces
        .then(|| tracer_provider(resource.clone()))
        .transpose()?;
    let metering = metrics
        .then(|| meter_provider(resource, pool))
        .transpose()?;
    let duration = metering.as_ref().map(|(_, h)| h.clone());
    let _ = LIVE.set(Live {
        tracer: tracing.as_ref().map(|p| p.tracer("mcpspec")),
        duration,
    });
    tracing::info!(traces, metrics, "OpenTelemetry export over OTLP/HTTP is on");
    Ok(Some(Installed {
        traces: tracing,
        metrics: metering.map(|(p, _)| p),
    }))
}

fn tracer_provider(resource: Resource) -> Result<SdkTracerProvider, String> {
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .build()
        .map_err(|e| format!("the OTLP span exporter: {e}"))?;
    Ok(SdkTracerProvider::builder()
        .with_batch_exporter(Counting(exporter))
        .with_resource(resource)
        .build())
}

/// Upper bounds of the duration histogram, in seconds: from 100 µs (a read on the embedded
/// engine) to the semantic conventions' five minutes.
const BOUNDARIES: [f64; 18] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    10.0, 30.0, 120.0, 300.0,
];

fn meter_provider(
    resource: Resource,
    pool: Box<dyn Fn() -> Option<PoolUse> + Send + Sync>,
) -> Result<(SdkMeterProvider, Histogram<f64>), String> {
    let exporter = opentelemetry_otlp::MetricExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .build()
        .map_err(|e| format!("the OTLP metric exporter: {e}"))?;
    let provider = SdkMeterProvider::builder()
        .with_periodic_exporter(exporter)
        .with_resource(resource)
        .build();
    let meter = provider.meter("mcpspec");
    let duration = meter
        .f64_histogram("mcp.server.operation.duration")
        .with_unit("s")
        .with_description("MCP requests as the server saw them, by method, tool and error type")
        .with_boundaries(BOUNDARIES.to_vec())
        .build();
    let pool = std::sync::Arc::new(pool);
    let read = pool.clone();
    meter
        .i64_observable_up_down_counter("db.client.connection.count")
        .with_description("The database pool's connections, by state (used or idle)")
        .with_callback(move |o| {
            if let Some(p) = read() {
                let idle = i64::from(p.open.saturating_sub(p.in_use));
                o.observe(
                    i64::from(p.in_use),
                    &[KeyValue::new("db.client.connection.state", "used")],
                );
                o.observe(idle, &[KeyValue::new("db.client.connection.state", "idle")]);
            }
        })
        .build();
    meter
        .i64_observable_up_down_counter("db.client.connection.max")
        .with_description("The most connections the database pool opens")
        .with_callback(move |o| {
            if let Some(p) = pool() {
                o.observe(i64::from(p.max), &[]);
            }
        })
        .build();
    Ok((provider, duration))
}

/// The OTLP span exporter, counting the spans of every batch it could not deliver.
#[derive(Debug)]
struct Counting(opentelemetry_otlp::SpanExporter);

impl SpanExporter for Counting {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let spans = batch.len() as u64;
        let result = self.0.export(batch).await;
        if let Err(e) = &result {
            let before = DROPPED.fetch_add(spans, Ordering::Relaxed);
            // Said once, then at each power of two dropped, so a collector that stays down
            // does not flood the log.
            let after = before + spans;
            if before == 0 || (before.ilog2() != after.ilog2()) {
                tracing::warn!(error = %e, dropped = after, "the OpenTelemetry collector did not take a batch of spans; they are dropped");
            }
        }
        result
    }

    fn shutdown_with_timeout(&mut self, timeout: Duration) -> OTelSdkResult {
        self.0.shutdown_with_timeout(timeout)
    }

    fn force_flush(&mut self) -> OTelSdkResult {
        self.0.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.0.set_resource(resource);
    }
}

/// A request's span, current in its context; none for a request the sampler dropped or when
/// only metrics are on, so that such a request makes no span and carries no context.
pub(super) struct Request {
    cx: Option<Context>,
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

/// The parent context `parent` names, when it is a valid W3C trace context.
fn extract(parent: Parent<'_>) -> Context {
    if parent.traceparent.is_none() {
        return Context::new();
    }
    TraceContextPropagator::new().extract(&parent)
}

/// The attributes a request's span and duration share, at most four: the first `n` of the
/// array (no allocation for a request that succeeds).
fn common(info: &RequestInfo<'_>, error: Option<&str>) -> ([KeyValue; 4], usize) {
    let empty = || KeyValue::new("", "");
    let mut a = [
        KeyValue::new("mcp.method.name", info.method),
        KeyValue::new("network.transport", info.transport),
        empty(),
        empty(),
    ];
    let mut n = 2;
    let target = match (info.method, &info.target) {
        ("tools/call", Some(t)) => Some(KeyValue::new("gen_ai.tool.name", t.clone())),
        ("prompts/get", Some(t)) => Some(KeyValue::new("gen_ai.prompt.name", t.clone())),
        _ => None,
    };
    for kv in [
        target,
        error.map(|e| KeyValue::new("error.type", e.to_string())),
    ]
    .into_iter()
    .flatten()
    {
        a[n] = kv;
        n += 1;
    }
    (a, n)
}

/// The attributes of a request's span.
fn attributes(info: &RequestInfo<'_>) -> Vec<KeyValue> {
    let (common, n) = common(info, None);
    let mut attributes = Vec::with_capacity(n + 3);
    attributes.extend(common.into_iter().take(n));
    if info.method == "tools/call" {
        attributes.push(KeyValue::new("gen_ai.operation.name", "execute_tool"));
    }
    if let Some(id) = info.id {
        attributes.push(KeyValue::new("jsonrpc.request.id", id.to_string()));
    }
    if let Some(s) = info.session {
        attributes.push(KeyValue::new("mcp.session.id", s.to_string()));
    }
    attributes
}

/// The sampler's decision for a request span named `name` under `parent`, with the trace id
/// it was taken for: the SDK's own sampler and id generator (what `OTEL_TRACES_SAMPLER` set),
/// asked before any span is made, the way `tracing-opentelemetry` pre-samples.
fn sample(tracer: &SdkTracer, parent: &Context, name: &str) -> (TraceId, SamplingResult) {
    let trace_id = if parent.has_active_span() {
        parent.span().span_context().trace_id()
    } else {
        tracer.id_generator().new_trace_id()
    };
    let result = tracer.should_sample().should_sample(
        Some(parent),
        trace_id,
        name,
        &SpanKind::Server,
        &[],
        &[],
    );
    (trace_id, result)
}

impl Request {
    pub(super) fn start(info: &RequestInfo<'_>, parent: Parent<'_>) -> Request {
        let Some(tracer) = tracer() else {
            return Request { cx: None };
        };
        let parent = extract(parent);
        // A request the sampler drops makes no span at all: no builder, no tracer cloned, no
        // context to carry (its statements, finding no sampled span, make none either).
        let (trace_id, sampling) = sample(tracer, &parent, info.method);
        if sampling.decision == SamplingDecision::Drop {
            return Request { cx: None };
        }
        let name = match &info.target {
            Some(t) if matches!(info.method, "tools/call" | "prompts/get") => {
                Cow::Owned(format!("{} {t}", info.method))
            }
            _ => Cow::Borrowed(info.method),
        };
        let mut builder = tracer
            .span_builder(name)
            .with_kind(SpanKind::Server)
            .with_attributes(attributes(info));
        builder.trace_id = Some(trace_id);
        builder.sampling_result = Some(sampling);
        let span = tracer.build_with_context(builder, &parent);
        Request {
            cx: Some(parent.with_span(span)),
        }
    }

    pub(super) fn context(&self) -> Option<Context> {
        self.cx.clone()
    }

    pub(super) fn finish(self, info: &RequestInfo<'_>, error: Option<&str>, took: Duration) {
        if let Some(cx) = &self.cx {
            end(&cx.span(), error);
        }
        if let Some(h) = LIVE.get().and_then(|l| l.duration.as_ref()) {
            let (attributes, n) = common(info, error);
            h.record(took.as_secs_f64(), &attributes[..n]);
        }
    }
}

/// Ends a request's span with `error` (`error.type`, and the JSON-RPC code as
/// `rpc.response.status_code`).
fn end(span: &opentelemetry::trace::SpanRef<'_>, error: Option<&str>) {
    if let Some(e) = error {
        span.set_attribute(KeyValue::new("error.type", e.to_string()));
        if let Ok(code) = e.parse::<i64>() {
            span.set_attribute(KeyValue::new("rpc.response.status_code", code.to_string()));
        }
        span.set_status(Status::error(e.to_string()));
    }
    span.end();
}
