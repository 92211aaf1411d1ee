//! OpenTelemetry: a span per MCP request with the MCP semantic conventions and a child span
//! per database statement, and the `mcp.server.operation.duration` histogram and the pool's
//! connections as metrics, exported over OTLP/HTTP (protobuf). Off unless
//! `OTEL_EXPORTER_OTLP_ENDPOINT` (or its `_TRACES_`/`_METRICS_` form) is set, and then free: a
//! request asks one `OnceLock` and records nothing. Everything is configured by the standard
//! variables. The sampler (`OTEL_TRACES_SAMPLER`, `OTEL_TRACES_SAMPLER_ARG`), the id generator
//! and the resource (`OTEL_SERVICE_NAME`) are the OpenTelemetry SDK's (`otlp` sets them up);
//! spans are recorded and exported by a lean pipeline of our own (`spans`, `queue`, `export`,
//! `wire`), and metrics by a meter of our own (`meter`), which read the endpoint, headers,
//! timeout, batching and interval variables as the SDK would. A request's parent is the trace
//! context in its `_meta` (`traceparent`, `tracestate`, SEP-414), else in its HTTP
//! `traceparent` header. Arguments, SQL text and results never become attributes. Without the
//! `otel` feature every function here does nothing.

#[cfg(feature = "otel")]
mod export;
#[cfg(feature = "otel")]
mod meter;
#[cfg(feature = "otel")]
mod otlp;
#[cfg(feature = "otel")]
mod queue;
#[cfg(feature = "otel")]
mod record;
#[cfg(feature = "otel")]
pub(crate) mod spans;
#[cfg(feature = "otel")]
mod wire;

use std::time::Instant;

/// The trace context a request carries, as W3C Trace Context headers.
#[derive(Debug, Default, Clone, Copy)]
pub struct Parent<'a> {
    pub traceparent: Option<&'a str>,
    pub tracestate: Option<&'a str>,
}

/// What a request is, for its span and its duration's attributes. The method and (for the
/// server's own tools and prompts) the target are the spec's static names, so that a span
/// or a histogram point copies no text for them.
#[derive(Debug, Clone)]
pub struct RequestInfo<'a> {
    /// The JSON-RPC method (`mcp.method.name`).
    pub method: &'static str,
    /// The tool or prompt it names (`gen_ai.tool.name`, `gen_ai.prompt.name`), the span's
    /// target: the definition's name, or the request's for a proxied tool.
    pub target: Option<std::borrow::Cow<'static, str>>,
    /// The JSON-RPC id as text (`jsonrpc.request.id`).
    pub id: Option<&'a str>,
    /// The session (`mcp.session.id`), on HTTP.
    pub session: Option<&'a str>,
    /// `pipe` (stdio) or `tcp` (HTTP): `network.transport`.
    pub transport: &'static str,
}

/// A request being served: its span (when tracing is on) and when it started. Dropped without
/// [`Request::finish`], it ends as it was.
pub struct Request {
    #[cfg(feature = "otel")]
    inner: Option<otlp::Request>,
    started: Instant,
}

/// The context of a request carried to another thread (the blocking pool), so that its
/// statements' spans are the request's children there.
#[derive(Clone, Default)]
pub struct Carry {
    #[cfg(feature = "otel")]
    cx: Option<spans::SpanCx>,
}

/// While alive, the carried context is the thread's current one.
pub struct Attached {
    #[cfg(feature = "otel")]
    _guard: Option<spans::Guard>,
}

/// Whether anything is recorded: false unless [`install`] found an endpoint.
pub fn on() -> bool {
    #[cfg(feature = "otel")]
    {
        otlp::on()
    }
    #[cfg(not(feature = "otel"))]
    {
        false
    }
}

/// What keeps the exporters running: dropped at exit, it flushes what is left (bounded).
pub struct Installed {
    #[cfg(feature = "otel")]
    _inner: Option<otlp::Installed>,
}

/// Turns telemetry on when the standard variables ask for it, with `server` as the service
/// name unless `OTEL_SERVICE_NAME` says otherwise; `pool` reads the database pool's
/// connections for the metrics. Says in the log where it exports. Runs the SDK's set-up on a
/// thread of its own (its HTTP client may not start inside an async runtime).
pub fn install(
    server: &str,
    pool: impl Fn() -> Option<crate::pool_use::PoolUse> + Send + Sync + 'static,
) -> Result<Installed, String> {
    #[cfg(feature = "otel")]
    {
        let server = server.to_string();
        let inner = std::thread::scope(|s| {
            s.spawn(move || otlp::install(&server, Box::new(pool)))
                .join()
                .unwrap_or_else(|_| Err("the OpenTelemetry set-up panicked".into()))
        })?;
        Ok(Installed { _inner: inner })
    }
    #[cfg(not(feature = "otel"))]
    {
        let _ = (server, pool);
        Ok(Installed {})
    }
}

impl Request {
    /// Starts serving a request: its span, a child of `parent` when that is a valid trace
    /// context, and its clock.
    pub fn start(info: &RequestInfo<'_>, parent: Parent<'_>) -> Request {
        #[cfg(not(feature = "otel"))]
        let _ = (info, parent);
        let started = Instant::now();
        Request {
            #[cfg(feature = "otel")]
            inner: otlp::on().then(|| otlp::Request::start(info, parent, started)),
            started,
        }
    }

    /// The request's context, to carry to the thread that runs its statements.
    pub fn carry(&self) -> Carry {
        Carry {
            #[cfg(feature = "otel")]
            cx: self.inner.as_ref().and_then(otlp::Request::context),
        }
    }

    /// Ends the request: its span with `error` (`error.type`: a JSON-RPC code, or
    /// `tool_error` for a tool result with `isError`), and its duration recorded.
    pub fn finish(self, info: &RequestInfo<'_>, error: Option<&str>) {
        #[cfg(feature = "otel")]
        if let Some(inner) = self.inner {
            let now = Instant::now();
            inner.finish(info, error, now, now - self.started);
        }
        #[cfg(not(feature = "otel"))]
        let _ = (info, error, self.started);
    }
}

/// The trace of the request this thread serves (32 hex digits), when it was sampled.
pub(crate) fn trace_id() -> Option<String> {
    #[cfg(feature = "otel")]
    return spans::current().map(|cx| cx.trace.to_string());
    #[cfg(not(feature = "otel"))]
    None
}

impl Carry {
    /// The current thread's context (the request's, on the thread serving it).
    pub fn current() -> Carry {
        Carry {
            #[cfg(feature = "otel")]
            cx: spans::current(),
        }
    }

    /// Makes the carried context current on this thread while the result lives.
    pub fn attach(&self) -> Attached {
        Attached {
            #[cfg(feature = "otel")]
            _guard: self.cx.clone().map(spans::attach),
        }
    }
}

/// The future `f` run with `carry` as its context (each poll), so that what it starts is the
/// request's child.
pub async fn within<F: std::future::Future>(carry: Carry, f: F) -> F::Output {
    #[cfg(feature = "otel")]
    if let Some(cx) = carry.cx {
        let mut f = std::pin::pin!(f);
        return std::future::poll_fn(move |task| {
            let _current = spans::attach(cx.clone());
            f.as_mut().poll(task)
        })
        .await;
    }
    let _ = carry;
    f.await
}

/// One call to an embedding provider of `kind` (`static`, `openai`) that embedded `texts`
/// texts from `started` until now and failed with `error`: a client span, the child of the
/// request this thread serves (none outside a sampled one).
pub fn embedding(kind: &'static str, texts: usize, started: Instant, error: Option<&'static str>) {
    #[cfg(feature = "otel")]
    if let Some(span) = spans::Open::child(started) {
        let what = spans::What::Embedding {
            provider: kind,
            texts: texts.to_string().as_str().into(),
        };
        span.end(what, error.map(Box::from), Instant::now());
    }
    #[cfg(not(feature = "otel"))]
    let _ = (kind, texts, started, error);
}

/// The number of spans the exporter could not deliver (the collector was down or refused
/// them) since the process started; they are dropped, never retried into memory.
#[cfg(feature = "http")]
pub fn dropped_spans() -> u64 {
    #[cfg(feature = "otel")]
    {
        otlp::dropped_spans()
    }
    #[cfg(not(feature = "otel"))]
    {
        0
    }
}
