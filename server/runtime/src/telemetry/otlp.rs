//! What turns telemetry on and what a request records: the resource and the standard variables,
//! the SDK's meter provider with its OTLP/HTTP exporter (protobuf) for the duration histogram
//! and the pool's connections, and a request's span handed to [`super::spans`], which batches
//! and exports spans on a thread of its own (a call never waits; what the collector does not
//! take is dropped and counted, [`dropped_spans`]).

use std::sync::OnceLock;
use std::time::Duration;

use opentelemetry::KeyValue;
use opentelemetry::metrics::{Histogram, MeterProvider as _};
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::metrics::SdkMeterProvider;

use super::spans::{Open, SpanCx, What};
use super::{Parent, RequestInfo};
use crate::backend::PoolUse;

/// What the process records with, once [`install`] found an endpoint.
struct Live {
    duration: Option<Histogram<f64>>,
}

static LIVE: OnceLock<Live> = OnceLock::new();

pub(super) fn on() -> bool {
    LIVE.get().is_some()
}

pub(super) fn dropped_spans() -> u64 {
    super::spans::dropped()
}

/// What exports, flushed on drop (what is batched sent, bounded by the exporters' timeouts).
pub(super) struct Installed {
    traces: bool,
    metrics: Option<SdkMeterProvider>,
}

impl Drop for Installed {
    fn drop(&mut self) {
        let (traces, metrics) = (self.traces, self.metrics.take());
        // Flushing blocks: not on an async runtime's thread.
        let _ = std::thread::spawn(move || {
            if traces {
                super::spans::flush();
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
    if traces {
        super::spans::install(&resource)?;
    }
    let metering = metrics
        .then(|| meter_provider(resource, pool))
        .transpose()?;
    let duration = metering.as_ref().map(|(_, h)| h.clone());
    let _ = LIVE.set(Live { duration });
    tracing::info!(traces, metrics, "OpenTelemetry export over OTLP/HTTP is on");
    Ok(Some(Installed {
        traces,
        metrics: metering.map(|(p, _)| p),
    }))
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

/// A request's span: none for a request the sampler dropped or when only metrics are on, so
/// that such a request makes no span and carries no context.
pub(super) struct Request {
    span: Option<Open>,
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

impl Request {
    pub(super) fn start(info: &RequestInfo<'_>, parent: Parent<'_>) -> Request {
        Request {
            span: Open::request(parent, info.method),
        }
    }

    pub(super) fn context(&self) -> Option<SpanCx> {
        self.span.as_ref().map(|s| s.context().clone())
    }

    pub(super) fn finish(self, info: &RequestInfo<'_>, error: Option<&str>, took: Duration) {
        if let Some(span) = self.span {
            let what = What::Request {
                method: info.method,
                target: info.target.clone(),
                transport: info.transport,
                id: info.id.map(Box::from),
                session: info.session.map(Box::from),
            };
            span.end(what, error.map(Box::from));
        }
        if let Some(h) = LIVE.get().and_then(|l| l.duration.as_ref()) {
            let (attributes, n) = common(info, error);
            h.record(took.as_secs_f64(), &attributes[..n]);
        }
    }
}
