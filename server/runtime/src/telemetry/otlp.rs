//! The OpenTelemetry SDK behind [`super`]: the tracer and meter providers, their OTLP/HTTP
//! exporters (protobuf) and what reads the standard variables. The SDK batches spans on a
//! thread of its own with a bounded queue, so exporting never blocks a call; a batch the
//! collector does not take (down, refusing) is dropped and counted ([`dropped_spans`]).

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use opentelemetry::metrics::{Histogram, MeterProvider as _};
use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::{
    Span as _, SpanKind, Status, TraceContextExt, Tracer, TracerProvider as _,
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

/// A request's span, current in its context.
pub(super) struct Request {
    cx: Context,
}

/// The parent context `parent` names, when it is a valid W3C trace context.
fn extract(parent: Parent<'_>) -> Context {
    let Some(traceparent) = parent.traceparent else {
        return Context::new();
    };
    let mut carrier = std::collections::HashMap::new();
    carrier.insert("traceparent".to_string(), traceparent.to_string());
    if let Some(state) = parent.tracestate {
        carrier.insert("tracestate".to_string(), state.to_string());
    }
    TraceContextPropagator::new().extract(&carrier)
}

/// The attributes a request's span and duration share.
fn common(info: &RequestInfo<'_>, error: Option<&str>) -> Vec<KeyValue> {
    let mut a = Vec::with_capacity(8);
    a.push(KeyValue::new("mcp.method.name", info.method));
    a.push(KeyValue::new("network.transport", info.transport));
    match (info.method, &info.target) {
        ("tools/call", Some(t)) => a.push(KeyValue::new("gen_ai.tool.name", t.clone())),
        ("prompts/get", Some(t)) => a.push(KeyValue::new("gen_ai.prompt.name", t.clone())),
        _ => {}
    }
    if let Some(e) = error {
        a.push(KeyValue::new("error.type", e.to_string()));
    }
    a
}

/// The attributes of a request's span.
fn attributes(info: &RequestInfo<'_>) -> Vec<KeyValue> {
    let mut attributes = common(info, None);
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

impl Request {
    pub(super) fn start(info: &RequestInfo<'_>, parent: Parent<'_>) -> Request {
        let parent = extract(parent);
        let Some(tracer) = tracer() else {
            return Request { cx: parent };
        };
        // The sampler decides on the method alone; only a span it records gets its full name
        // and attributes, so that a request whose trace is not sampled builds neither.
        let mut span = tracer
            .span_builder(info.method)
            .with_kind(SpanKind::Server)
            .start_with_context(tracer, &parent);
        if span.is_recording() {
            if let Some(t) = &info.target
                && matches!(info.method, "tools/call" | "prompts/get")
            {
                span.update_name(format!("{} {t}", info.method));
            }
            span.set_attributes(attributes(info));
        }
        Request {
            cx: parent.with_span(span),
        }
    }

    pub(super) fn context(&self) -> Context {
        self.cx.clone()
    }

    pub(super) fn finish(self, info: &RequestInfo<'_>, error: Option<&str>, took: Duration) {
        let span = self.cx.span();
        if let Some(e) = error {
            span.set_attribute(KeyValue::new("error.type", e.to_string()));
            if let Ok(code) = e.parse::<i64>() {
                span.set_attribute(KeyValue::new("rpc.response.status_code", code.to_string()));
            }
            span.set_status(Status::error(e.to_string()));
        }
        span.end();
        if let Some(h) = LIVE.get().and_then(|l| l.duration.as_ref()) {
            h.record(took.as_secs_f64(), &common(info, error));
        }
    }
}
