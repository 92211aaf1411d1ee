//! What turns telemetry on and what a request records: the resource and the standard
//! variables, a request's span handed to [`super::spans`], which batches and exports spans on a
//! thread of its own (a call never waits; what the collector does not take is dropped and
//! counted, [`dropped_spans`]), and its duration added to [`super::meter`]'s histogram, which
//! exports the totals on a thread of its own.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use opentelemetry_sdk::Resource;

use super::spans::{Open, SpanCx, Text, What};
use super::{Parent, RequestInfo};
use crate::pool_use::PoolUse;

/// Set once [`install`] found an endpoint.
static LIVE: OnceLock<()> = OnceLock::new();

pub(super) fn on() -> bool {
    LIVE.get().is_some()
}

pub(super) fn dropped_spans() -> u64 {
    super::spans::dropped()
}

/// What exports, flushed on drop (what is batched sent, bounded by the exporters' timeouts).
pub(super) struct Installed(());

/// The longest a process waits at exit for its last spans and metrics to be taken, whatever
/// the export timeout: a collector that hangs costs a stopping server this much, no more.
pub const SHUTDOWN_FLUSH: std::time::Duration = std::time::Duration::from_secs(3);

impl Drop for Installed {
    fn drop(&mut self) {
        // Flushing blocks: not on an async runtime's thread. Both signals flush at once, each
        // bounded by SHUTDOWN_FLUSH; each does nothing when its signal is off.
        let spans = std::thread::spawn(|| super::spans::flush(SHUTDOWN_FLUSH));
        let metrics = std::thread::spawn(|| super::meter::flush(SHUTDOWN_FLUSH));
        let _ = (spans.join(), metrics.join());
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
    if metrics {
        super::meter::install(&resource, pool)?;
    }
    let _ = LIVE.set(());
    tracing::info!(traces, metrics, "OpenTelemetry export over OTLP/HTTP is on");
    Ok(Some(Installed(())))
}

/// A request's span: none for a request the sampler dropped or when only metrics are on, so
/// that such a request makes no span and carries no context.
pub(super) struct Request {
    span: Option<Open>,
}

impl Request {
    pub(super) fn start(info: &RequestInfo<'_>, parent: Parent<'_>, at: Instant) -> Request {
        Request {
            span: Open::request(parent, info.method, at),
        }
    }

    pub(super) fn context(&self) -> Option<SpanCx> {
        self.span.as_ref().map(|s| s.context().clone())
    }

    /// Ends the request `at`, `took` after it started.
    pub(super) fn finish(
        self,
        info: &RequestInfo<'_>,
        error: Option<&str>,
        at: Instant,
        took: Duration,
    ) {
        if let Some(span) = self.span {
            let what = What::Request {
                method: info.method,
                target: info.target.clone(),
                transport: info.transport,
                id: info.id.map(Text::from),
                session: info.session.map(Text::from),
            };
            span.end(what, error.map(Box::from), at);
        }
        super::meter::record(
            info.method,
            info.target.as_deref(),
            info.transport,
            error,
            took,
        );
    }
}
