//! Each request the server answers in a span of its own, its duration recorded (see
//! [`crate::telemetry`]): every method of [`super::McpServer`]'s `ServerHandler` starts with
//! [`start`] and runs its work through [`Span::run`]. The span's parent is the trace context
//! of the request's `_meta` (SEP-414), else of its HTTP `traceparent` header; the work's
//! statements are its children, on whatever thread they run. `initialize`, `ping` and
//! `server/discover`, which rmcp answers itself, have none. With telemetry off, a request
//! costs one check. The workbench (`--ui`) is told of every request but `tools/call` (which
//! the engine tells it of, with its arguments) here too: its method, target and client.

use std::borrow::Cow;

use rmcp::model::CallToolResponse;
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};

use crate::telemetry::{Parent, Request, RequestInfo};

/// A request's span while its work runs (nothing when telemetry is off), and what the
/// workbench is told of it when one is open.
pub(super) struct Span(Option<Live>, Option<Shown>);

/// A request as the workbench lists it, once it is answered.
struct Shown {
    method: &'static str,
    target: Option<String>,
    client: Option<String>,
    origin: Option<crate::watch::Origin>,
    started: std::time::Instant,
}

/// What the workbench is told of request `method` (not `tools/call`), while it records.
fn shown(
    method: &'static str,
    target: Option<&str>,
    context: &RequestContext<RoleServer>,
) -> Option<Shown> {
    crate::watch::recorder()?;
    (method != "tools/call").then(|| Shown {
        method,
        target: target.map(str::to_string),
        client: request_client(context),
        origin: request_origin(context),
        started: std::time::Instant::now(),
    })
}

/// The session a request or notification came in, for the workbench (see
/// [`crate::watch::Origin`]).
/// `named`: the client a request without a session names in its own `_meta`.
pub(super) fn origin(
    extensions: &rmcp::model::Extensions,
    named: Option<&str>,
) -> Option<crate::watch::Origin> {
    let transport = if over_http(extensions) { "tcp" } else { "pipe" };
    crate::watch::Origin::of(transport, header(extensions, "mcp-session-id"), named)
}

/// A request's [`origin`]: a request of 2026-07-28 names its client in its `_meta`.
pub(super) fn request_origin(context: &RequestContext<RoleServer>) -> Option<crate::watch::Origin> {
    let named = context.meta.client_info().map(|i| i.name);
    origin(&context.extensions, named.as_deref())
}

/// The name the client gave in `initialize`, when it gave one.
pub(super) fn client_name(peer: &rmcp::service::Peer<RoleServer>) -> Option<String> {
    peer.peer_info().map(|i| i.client_info.name.clone())
}

/// The client of a request: the one its session's `initialize` named, or else the one the
/// request names in its own `_meta` (a request of 2026-07-28).
fn request_client(context: &RequestContext<RoleServer>) -> Option<String> {
    client_name(&context.peer).or_else(|| context.meta.client_info().map(|i| i.name))
}

struct Live {
    method: &'static str,
    target: Option<Cow<'static, str>>,
    id: String,
    session: Option<String>,
    transport: &'static str,
    request: Request,
}

/// The request's HTTP header `name`, on the Streamable HTTP transport.
#[cfg(feature = "http")]
fn header<'a>(extensions: &'a rmcp::model::Extensions, name: &str) -> Option<&'a str> {
    extensions
        .get::<http::request::Parts>()?
        .headers
        .get(name)?
        .to_str()
        .ok()
}

#[cfg(not(feature = "http"))]
fn header<'a>(_: &'a rmcp::model::Extensions, _: &str) -> Option<&'a str> {
    None
}

/// Whether the request came over HTTP (rmcp hands its parts to the handler).
#[cfg(feature = "http")]
fn over_http(extensions: &rmcp::model::Extensions) -> bool {
    extensions.get::<http::request::Parts>().is_some()
}

#[cfg(not(feature = "http"))]
fn over_http(_: &rmcp::model::Extensions) -> bool {
    false
}

/// Starts the span of request `method` (naming `target`, a tool or prompt).
pub(super) fn start(
    method: &'static str,
    target: Option<Cow<'static, str>>,
    context: &RequestContext<RoleServer>,
) -> Span {
    let shown = shown(method, target.as_deref(), context);
    if !crate::telemetry::on() {
        return Span(None, shown);
    }
    let meta = &context.meta.0.0;
    let text = |k: &str| meta.get(k).and_then(serde_json::Value::as_str);
    let parent = match text("traceparent") {
        Some(p) => Parent {
            traceparent: Some(p),
            tracestate: text("tracestate"),
        },
        None => Parent {
            traceparent: header(&context.extensions, "traceparent"),
            tracestate: header(&context.extensions, "tracestate"),
        },
    };
    let id = context.id.to_string();
    let session = header(&context.extensions, "mcp-session-id");
    let transport = if over_http(&context.extensions) {
        "tcp"
    } else {
        "pipe"
    };
    let info = RequestInfo {
        method,
        target,
        id: Some(&id),
        session,
        transport,
    };
    let request = Request::start(&info, parent);
    Span(
        Some(Live {
            method,
            target: info.target,
            session: session.map(str::to_string),
            id,
            transport,
            request,
        }),
        shown,
    )
}

/// What an answer says of how the request went, for `error.type`.
pub(super) trait Outcome {
    /// `tool_error` for a tool result with `isError`.
    fn error_type(&self) -> Option<&'static str> {
        None
    }
}

impl Outcome for CallToolResponse {
    fn error_type(&self) -> Option<&'static str> {
        match self {
            CallToolResponse::Complete(r) if r.is_error == Some(true) => Some("tool_error"),
            _ => None,
        }
    }
}

macro_rules! plain_outcomes {
    ($($t:ty),* $(,)?) => {$(impl Outcome for $t {})*};
}

plain_outcomes!(
    (),
    rmcp::model::ListToolsResult,
    rmcp::model::ListResourcesResult,
    rmcp::model::ListResourceTemplatesResult,
    rmcp::model::ReadResourceResponse,
    rmcp::model::ListPromptsResult,
    rmcp::model::GetPromptResponse,
    rmcp::model::CompleteResult,
    rmcp::model::GetTaskResult,
    rmcp::model::ListSkillsResult,
    rmcp::model::GetSkillResult,
);

impl Span {
    /// The span, the workbench shown `target` as what the request is of.
    pub(super) fn showing(mut self, target: &str) -> Span {
        if let Some(s) = &mut self.1 {
            s.target = Some(target.to_string());
        }
        self
    }

    /// Runs `work` as the request's (its statements the span's children), then ends the span
    /// with the answer's error type and records the duration.
    pub(super) async fn run<T: Outcome>(
        self,
        work: impl std::future::Future<Output = Result<T, ErrorData>>,
    ) -> Result<T, ErrorData> {
        let Span(live, shown) = self;
        let Some(live) = live else {
            let result = work.await;
            show(shown, &result);
            return result;
        };
        let result = crate::telemetry::within(live.request.carry(), work).await;
        show(shown, &result);
        let error = match &result {
            Err(e) => Some(e.code.0.to_string()),
            Ok(t) => t.error_type().map(str::to_string),
        };
        let Live {
            method,
            target,
            id,
            session,
            transport,
            request,
        } = live;
        let info = RequestInfo {
            method,
            target,
            id: Some(&id),
            session: session.as_deref(),
            transport,
        };
        request.finish(&info, error.as_deref());
        result
    }
}

/// Tells the workbench how the request went: `ok`, the tool result's error, or the JSON-RPC
/// error's code.
fn show<T: Outcome>(shown: Option<Shown>, result: &Result<T, ErrorData>) {
    let (Some(s), Some(watcher)) = (shown, crate::watch::watcher()) else {
        return;
    };
    let outcome = match result {
        Ok(t) => t.error_type().unwrap_or("ok").to_string(),
        Err(e) => e.code.0.to_string(),
    };
    watcher.request(&crate::watch::SeenRequest {
        method: s.method,
        target: s.target.as_deref(),
        client: s.client.as_deref(),
        origin: s.origin,
        outcome: &outcome,
        duration_ms: crate::calllog::millis_since(s.started),
    });
}
