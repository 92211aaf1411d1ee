//! The Streamable HTTP transport: `mcpspec serve <server> --http ADDR` serves the same
//! [`McpServer`] over MCP's Streamable HTTP (2025-11-25) at [`ENDPOINT`].
//!
//! rmcp's [`StreamableHttpService`] speaks the protocol: POST with JSON or SSE answers, GET for
//! the session's own SSE stream, DELETE to end a session, `Mcp-Session-Id` and
//! `MCP-Protocol-Version`. Sessions live in rmcp's in-memory [`LocalSessionManager`]; each one
//! gets a clone of one [`McpServer`], so all of them share the engine and its database
//! connections. A DELETE ends a session at once and an idle session is dropped after five
//! minutes.
//!
//! In front of it a `Gate` checks every request, in this order: exactly one `Host` header
//! (400), the `Host` and `Origin` headers against allow-lists (403, against DNS rebinding),
//! the bearer token when one is configured (401), the path (404) and the body size (413). A
//! POST body must be one JSON-RPC message: an empty or invalid body, bad UTF-8 or a batch is
//! 400 with the JSON-RPC error the stdio transport would send ([`crate::protocol::jsonrpc`]). A DELETE
//! of a session that does not exist is 404, and a successful one 204. The gate owns these
//! rules, so rmcp's own host and origin checks are switched off rather than kept with
//! different matching rules.
//!
//! Behind the gate, a plain SQL read in a session rmcp already accepted is answered by the
//! runtime worker that read it, as one JSON body (`transport::http_lane`); everything else goes
//! to rmcp.
//!
//! hyper's HTTP/1.1 server drives the connections. On shutdown the listener closes, the calls
//! in flight are answered (up to the drain timeout), then every session and SSE stream is
//! closed, as the stdio transport drains at end of input.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body::{Body, Frame, SizeHint};
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::json;
use tokio::net::TcpListener;

use super::health::Health;
use super::http_conns::{Backoff, Busy, Connections};
use super::http_lane::{HttpLane, is_initialized, session_of};
use super::lane::{Call, Lane};
use crate::auth::{Caller, Identity, Verifier};
use crate::protocol::McpServer;

/// The path of the MCP endpoint.
pub const ENDPOINT: &str = "/mcp";

/// Where Prometheus scrapes the metrics, when `--metrics` turned them on.
pub const METRICS: &str = "/metrics";

type HttpBody = BoxBody<Bytes, Infallible>;

/// How the HTTP endpoint is protected and bounded.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// The bearer token every request must carry; `None` admits every local request.
    pub token: Option<String>,
    /// `Host` values accepted besides the loopback names and the bound address.
    pub allow_hosts: Vec<String>,
    /// `Origin` values accepted besides `http://localhost:PORT` and `http://127.0.0.1:PORT`.
    pub allow_origins: Vec<String>,
    /// The largest request body accepted.
    pub max_body_bytes: usize,
    /// How long shutdown waits for calls in flight.
    pub drain_timeout: Duration,
    /// The runtime's worker threads: all but one may answer lane calls at once (see
    /// `transport::http_lane`); 0 or 1 keeps every call on rmcp's path.
    pub workers: usize,
    /// How many connections may be open at once (see `transport::http_conns`).
    pub max_connections: usize,
    /// How long after a shutdown signal the server keeps accepting requests while `/readyz`
    /// answers 503, so that a load balancer stops sending before the listener closes; zero
    /// closes it at once.
    pub ready_grace: Duration,
    /// Whether to count calls and serve them at `/metrics`.
    pub metrics: bool,
    /// Whether plain SQL reads take the lane (`MCPSPEC_HTTP_LANE=off` sends every request
    /// through rmcp, to compare answers or rule the lane out).
    pub lane: bool,
    /// OAuth 2.1: the issuer whose access tokens are accepted (see [`crate::auth`]).
    pub oauth: Option<OAuthOptions>,
    /// Whether the workbench's page is served under `/ui/` (see [`crate::workbench`]), behind
    /// the same checks as `/mcp`.
    pub ui: bool,
}

impl HttpOptions {
    /// The workbench's own loopback listener (`--ui ADDR`): its page under `/ui/` and `/mcp`
    /// for the page's calls, no token, every call on rmcp's path, and room for a few pages.
    /// Its requests are bounded as the server's arguments are (`max_body_bytes`).
    pub fn workbench(max_body_bytes: usize) -> Self {
        HttpOptions {
            token: None,
            allow_hosts: Vec::new(),
            allow_origins: Vec::new(),
            max_body_bytes,
            drain_timeout: Duration::from_secs(1),
            workers: 1,
            max_connections: 32,
            ready_grace: Duration::ZERO,
            metrics: false,
            lane: false,
            oauth: None,
            ui: true,
        }
    }
}

/// The authorization server whose access tokens the endpoint accepts.
#[derive(Debug, Clone)]
pub struct OAuthOptions {
    /// The issuer, exactly as its tokens' `iss` and its metadata name it.
    pub issuer: String,
    /// The audience tokens must name; by default this server's own endpoint URL,
    /// `http://ADDR/mcp` (set it to the public URL behind a proxy).
    pub audience: Option<String>,
    /// The server's own credentials at the issuer, to check opaque tokens by introspection
    /// (RFC 7662); without them only JWTs are accepted.
    pub client: Option<crate::auth::introspect::ClientCredentials>,
}

#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error(
        "refusing to serve on {0} without a token: a non-loopback address is reachable from other machines; set MCPSPEC_HTTP_TOKEN, pass --token-env VAR or --token-file PATH, or accept OAuth access tokens with --oauth-issuer URL"
    )]
    Unprotected(SocketAddr),
    #[error("the OAuth issuer could not be used: {0}")]
    Issuer(#[from] crate::auth::KeysError),
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
}

/// The cap on open connections: `wanted` (`MCPSPEC_HTTP_MAX_CONNECTIONS`, else 1,024), at
/// most this process's descriptor limit less a reserve (see `transport::http_conns`).
pub fn max_connections(wanted: Option<usize>) -> usize {
    super::http_conns::cap_for_this_process(
        wanted.unwrap_or(super::http_conns::DEFAULT_MAX_CONNECTIONS),
    )
}

/// Whether an address is reachable only from this machine.
pub fn is_loopback(addr: &SocketAddr) -> bool {
    addr.ip().to_canonical().is_loopback()
}

/// Binds the listener, refusing a non-loopback address when no token protects it.
pub async fn bind(addr: SocketAddr, options: &HttpOptions) -> Result<TcpListener, HttpError> {
    if options.token.is_none() && options.oauth.is_none() && !is_loopback(&addr) {
        return Err(HttpError::Unprotected(addr));
    }
    TcpListener::bind(addr)
        .await
        .map_err(|source| HttpError::Bind { addr, source })
}

/// Compares two secrets in time that depends only on the expected secret's length, never on
/// where the first difference is.
fn same_secret(expected: &[u8], given: &[u8]) -> bool {
    let mut diff = u8::from(expected.len() != given.len());
    for (i, e) in expected.iter().enumerate() {
        diff |= e ^ given.get(i).copied().unwrap_or(!e);
    }
    std::hint::black_box(diff) == 0
}

/// Requests whose answers have not been sent yet: POSTs only, since a GET stream stays open
/// for as long as its session lives. Counting costs two atomic additions a request; only a
/// drain, once it has begun, is woken when the count reaches zero.
#[derive(Clone)]
struct InFlight(Arc<Counter>);

#[derive(Default)]
struct Counter {
    requests: AtomicUsize,
    draining: AtomicBool,
    idle: tokio::sync::Notify,
}

impl InFlight {
    fn new() -> Self {
        InFlight(Arc::default())
    }

    fn enter(&self) -> InFlightGuard {
        self.0.requests.fetch_add(1, Ordering::SeqCst);
        InFlightGuard(self.0.clone())
    }

    /// Returns once no request is in flight.
    async fn idle(&self) {
        self.0.draining.store(true, Ordering::SeqCst);
        loop {
            let notified = self.0.idle.notified();
            let mut notified = std::pin::pin!(notified);
            // Registered before the count is read, so that a request ending in between
            // wakes it.
            notified.as_mut().enable();
            if self.0.requests.load(Ordering::SeqCst) == 0 {
                return;
            }
            notified.await;
        }
    }
}

struct InFlightGuard(Arc<Counter>);

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        let before = self.0.requests.fetch_sub(1, Ordering::SeqCst);
        if before == 1 && self.0.draining.load(Ordering::SeqCst) {
            self.0.idle.notify_waiters();
        }
    }
}

/// The requests of each session still unanswered, by session id and request id (as JSON).
type Open = Arc<std::sync::Mutex<std::collections::HashSet<(String, String)>>>;

/// Holds a request's place in [`Open`] until its answer has been sent.
struct OpenGuard {
    open: Open,
    key: (String, String),
}

impl Drop for OpenGuard {
    fn drop(&mut self) {
        self.open
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(&self.key);
    }
}

/// A response body that counts as in flight until it has been sent or dropped.
struct Tracked {
    inner: HttpBody,
    _guard: InFlightGuard,
    _open: Option<OpenGuard>,
}

impl Body for Tracked {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// The checks in front of rmcp's service, and the service itself.
struct Gate {
    token: Option<Vec<u8>>,
    /// OAuth: the access tokens' verifier, when `--oauth-issuer` named an issuer.
    oauth: Option<Arc<Verifier>>,
    /// The served surface, whose definition says which scopes a request needs.
    live: Arc<crate::protocol::Live>,
    /// The subject each session was opened by, when a caller opened it: a session is its
    /// caller's, and another caller's request naming it is answered as for no such session.
    owners: Owners,
    hosts: Vec<String>,
    origins: Vec<String>,
    max_body_bytes: usize,
    in_flight: InFlight,
    open: Open,
    sessions: Arc<LocalSessionManager>,
    service: StreamableHttpService<McpServer, LocalSessionManager>,
    /// Plain SQL reads answered without rmcp, when the runtime has workers to spare.
    lane: Option<HttpLane>,
    /// `/healthz` and `/readyz`.
    health: Health,
    /// Whether the workbench is served under `/ui/`.
    ui: bool,
}

/// A short JSON error body; it never echoes what the client sent.
fn refuse(status: StatusCode, error: &str, message: &str) -> Response<HttpBody> {
    json_answer(status, &json!({"error": error, "message": message}))
}

impl Gate {
    fn new(
        bound: SocketAddr,
        options: &HttpOptions,
        oauth: Option<Arc<Verifier>>,
        server: McpServer,
        config: StreamableHttpServerConfig,
    ) -> Self {
        let port = bound.port();
        let mut hosts = vec![
            format!("127.0.0.1:{port}"),
            format!("localhost:{port}"),
            format!("[::1]:{port}"),
            bound.to_string(),
        ];
        hosts.extend(options.allow_hosts.iter().cloned());
        let mut origins = vec![
            format!("http://localhost:{port}"),
            format!("http://127.0.0.1:{port}"),
        ];
        origins.extend(options.allow_origins.iter().cloned());
        let lower = |v: Vec<String>| v.into_iter().map(|s| s.to_ascii_lowercase()).collect();
        let sessions = Arc::new(LocalSessionManager::default());
        let live = server.live();
        let health = Health::new(server.live());
        let lane = (options.workers > 1 && options.lane).then(|| {
            HttpLane::new(
                Lane::new(server.live(), "tcp"),
                server.call_threads(),
                sessions.clone(),
                options.workers,
            )
        });
        let service = StreamableHttpService::new(
            move || Ok(server.for_new_session()),
            sessions.clone(),
            config,
        );
        Gate {
            token: options.token.as_ref().map(|t| t.as_bytes().to_vec()),
            oauth,
            live,
            owners: Owners::default(),
            hosts: lower(hosts),
            origins: lower(origins),
            max_body_bytes: options.max_body_bytes,
            in_flight: InFlight::new(),
            open: Open::default(),
            sessions,
            service,
            lane,
            health,
            ui: options.ui,
        }
    }

    /// Whether the `Host` header (and an absolute request target, if any) is allowed.
    fn host_allowed(&self, req: &Request<Incoming>) -> bool {
        let allowed = |v: &str| self.hosts.iter().any(|h| h.eq_ignore_ascii_case(v));
        let Some(host) = req.headers().get(header::HOST) else {
            return false;
        };
        let target_ok = req.uri().authority().is_none_or(|a| allowed(a.as_str()));
        host.to_str().is_ok_and(allowed) && target_ok
    }

    /// Whether the `Origin` header is absent or allowed.
    fn origin_allowed(&self, req: &Request<Incoming>) -> bool {
        let mut origins = req.headers().get_all(header::ORIGIN).iter();
        match (origins.next(), origins.next()) {
            (None, _) => true,
            (Some(o), None) => o
                .to_str()
                .is_ok_and(|o| self.origins.iter().any(|a| a.eq_ignore_ascii_case(o))),
            _ => false,
        }
    }

    /// Whether the static token was sent, exactly.
    fn static_token(&self, bearer: Option<&[u8]>) -> bool {
        matches!((&self.token, bearer), (Some(expected), Some(given)) if same_secret(expected, given))
    }

    /// Who the request is from: `Ok(None)` for a request the static token (or no protection at
    /// all) admits, the caller a verified access token names, or the refusal (401).
    async fn access(
        &self,
        req: &Request<Incoming>,
    ) -> Result<Option<Arc<Identity>>, Response<HttpBody>> {
        let bearer = match bearer(req.headers()) {
            Ok(b) => b,
            Err(why) => return Err(refuse(StatusCode::BAD_REQUEST, "invalid_request", why)),
        };
        let Some(verifier) = &self.oauth else {
            if self.token.is_none() || self.static_token(bearer) {
                return Ok(None);
            }
            tracing::warn!("refused a request: missing or wrong bearer token");
            let mut r = refuse(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "a valid bearer token is required",
            );
            r.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static("Bearer"),
            );
            return Err(r);
        };
        // The static token, when there is one too, admits the operator (no identity).
        if self.static_token(bearer) {
            return Ok(None);
        }
        let challenge = |error: Option<(&str, &str)>| {
            crate::auth::verify::challenge(&verifier.metadata_url(), error, None)
        };
        let Some(token) = bearer else {
            tracing::warn!("refused a request: no access token");
            return Err(unauthorized(
                challenge(None),
                "invalid_token",
                "an access token is required (Authorization: Bearer)",
            ));
        };
        let token = std::str::from_utf8(token).unwrap_or_default();
        match verifier.verify(token).await {
            Ok(identity) => Ok(Some(identity)),
            Err(e) => {
                let why = e.to_string();
                tracing::warn!("refused a request: {why}");
                Err(unauthorized(
                    challenge(Some(("invalid_token", &why))),
                    "invalid_token",
                    &why,
                ))
            }
        }
    }

    /// The refusal of a request naming a session another caller opened: answered as for a
    /// session that does not exist, so that it learns nothing of it.
    fn not_theirs(
        &self,
        req: &Request<Incoming>,
        caller: Option<&Identity>,
    ) -> Option<Response<HttpBody>> {
        let session = session_of(req.headers())?;
        if !self
            .owners
            .someone_else(session, caller.map(|c| c.sub.as_str()))
        {
            return None;
        }
        tracing::warn!(
            sub = caller.map(|c| c.sub.as_str()),
            "refused a request naming another caller's session"
        );
        Some(refuse(
            StatusCode::NOT_FOUND,
            "not_found",
            "no such session; it may have ended already",
        ))
    }

    /// The protected resource metadata (RFC 9728), for a GET of either of its addresses.
    fn resource_metadata(&self, req: &Request<Incoming>) -> Option<Response<HttpBody>> {
        let verifier = self.oauth.as_ref()?;
        let path = req.uri().path();
        let ours = path == "/.well-known/oauth-protected-resource"
            || verifier.metadata_url().ends_with(path);
        if req.method() != Method::GET
            || !path.starts_with("/.well-known/oauth-protected-resource")
            || !ours
        {
            return None;
        }
        let scopes = crate::auth::all_scopes(self.live.now().engine.def);
        Some(json_answer(StatusCode::OK, &verifier.metadata(&scopes)))
    }

    /// The 403 of a caller whose token lacks scopes `body`'s request needs (step-up: the
    /// challenge names every scope the request needs, so the client asks for all of them).
    fn insufficient_scope(&self, identity: &Identity, head: &Head) -> Option<Response<HttpBody>> {
        let (method, target) = head.method_and_target()?;
        let def = self.live.now().engine.def;
        let needed = crate::auth::needed_scopes(def, method, target);
        self.lacking(identity, &needed, method)
    }

    /// The 403 of a caller whose token lacks some of `needed`, for `what` it asked (a method,
    /// or a path); `None` when it has them all.
    fn lacking(
        &self,
        identity: &Identity,
        needed: &[&str],
        what: &str,
    ) -> Option<Response<HttpBody>> {
        let verifier = self.oauth.as_ref()?;
        let missing = identity.missing(needed.iter().copied());
        if missing.is_empty() {
            return None;
        }
        let why = format!("this request needs the scopes {}", missing.join(" "));
        tracing::warn!(sub = %crate::logsafe::quoted(&identity.sub), what, "refused a request: {why}");
        let scope = needed.join(" ");
        let challenge = crate::auth::verify::challenge(
            &verifier.metadata_url(),
            Some(("insufficient_scope", &why)),
            Some(&scope),
        );
        let mut r = refuse(StatusCode::FORBIDDEN, "insufficient_scope", &why);
        if let Ok(v) = header::HeaderValue::from_str(&challenge) {
            r.headers_mut().insert(header::WWW_AUTHENTICATE, v);
        }
        Some(r)
    }

    fn declared_too_large(&self, req: &Request<Incoming>) -> bool {
        req.headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .is_some_and(|n| n > self.max_body_bytes as u64)
    }

    async fn handle(&self, req: Request<Incoming>) -> Response<HttpBody> {
        if let Some(answer) = self.page(&req) {
            return answer;
        }
        let caller = match self.admit(&req).await {
            Ok(caller) => caller,
            Err(answer) => return answer,
        };
        if let Some(answer) = self.metrics(&req, caller.as_deref()) {
            return answer;
        }
        if self.ui && req.uri().path().starts_with(crate::workbench::PREFIX) {
            return crate::workbench::answer(req, &self.live, caller.as_deref()).await;
        }
        if req.uri().path() != ENDPOINT {
            return refuse(
                StatusCode::NOT_FOUND,
                "not_found",
                "the MCP endpoint is /mcp",
            );
        }
        if self.declared_too_large(&req) {
            return refuse(
                StatusCode::PAYLOAD_TOO_LARGE,
                "payload_too_large",
                &format!("the request body exceeds {} bytes", self.max_body_bytes),
            );
        }
        if let Some(refusal) = self.not_theirs(&req, caller.as_deref()) {
            return refusal;
        }
        match *req.method() {
            Method::DELETE => self.delete(req).await,
            Method::POST => self.post(req, caller).await,
            _ => self.service.handle(req).await,
        }
    }

    /// The workbench's own files, when it is on: open to a request whose Host and Origin are
    /// allowed, with or without a token, so that the page loads and asks for one.
    fn page(&self, req: &Request<Incoming>) -> Option<Response<HttpBody>> {
        if !self.ui {
            return None;
        }
        let file = crate::workbench::page_file(req)?;
        let one_host = req.headers().get_all(header::HOST).iter().count() == 1;
        Some(
            if one_host && self.host_allowed(req) && self.origin_allowed(req) {
                file
            } else {
                refuse(
                    StatusCode::FORBIDDEN,
                    "forbidden",
                    "the Host or Origin header is not allowed",
                )
            },
        )
    }

    /// The checks every request passes before its path means anything: one `Host`, the
    /// probes (answered here, open to all), `Host` and `Origin`, the resource metadata (open
    /// to all), no token in the URL, and the token (see [`Gate::access`]). The caller, or the
    /// answer that ends the request.
    async fn admit(
        &self,
        req: &Request<Incoming>,
    ) -> Result<Option<Arc<Identity>>, Response<HttpBody>> {
        if req.headers().get_all(header::HOST).iter().count() > 1 {
            tracing::warn!("refused a request with more than one Host header");
            return Err(refuse(
                StatusCode::BAD_REQUEST,
                "bad_request",
                "a request must have exactly one Host header",
            ));
        }
        // Probes come from load balancers and orchestrators, by whatever address they reach
        // the server, without a token; they learn nothing but ready or not.
        if let Some(answer) = self.probe(req).await {
            return Err(answer);
        }
        if !self.host_allowed(req) {
            tracing::warn!(host = ?req.headers().get(header::HOST), "refused a request: Host not allowed");
            return Err(refuse(
                StatusCode::FORBIDDEN,
                "forbidden",
                "the Host header is not allowed",
            ));
        }
        if !self.origin_allowed(req) {
            tracing::warn!(origin = ?req.headers().get(header::ORIGIN), "refused a request: Origin not allowed");
            return Err(refuse(
                StatusCode::FORBIDDEN,
                "forbidden",
                "the Origin header is not allowed",
            ));
        }
        if let Some(answer) = self.resource_metadata(req) {
            return Err(answer);
        }
        if token_in_query(req) {
            tracing::warn!("refused a request: an access token in the query string");
            return Err(refuse(
                StatusCode::BAD_REQUEST,
                "invalid_request",
                "access tokens are accepted in the Authorization header only, never in the URL",
            ));
        }
        self.access(req).await
    }

    /// A POST: one message, its id claimed in its session, the caller's scopes checked, then
    /// answered by the lane or rmcp. It counts as in flight until its answer has been sent, so
    /// that shutdown can wait for it; the guard travels with the response body.
    async fn post(
        &self,
        req: Request<Incoming>,
        caller: Option<Arc<Identity>>,
    ) -> Response<HttpBody> {
        let guard = self.in_flight.enter();
        let (mut parts, body, head) = match self.one_message(req).await {
            Ok(r) => r,
            Err(answer) => return answer,
        };
        let open = match self.claim(&parts.headers, head.id()) {
            Ok(open) => open,
            Err(refusal) => return json_answer(StatusCode::OK, &refusal),
        };
        // The caller travels with the request: to the lane's call, or in the extensions rmcp
        // hands to the handler.
        if let Some(identity) = &caller {
            if let Some(refusal) = self.insufficient_scope(identity, &head) {
                return refusal;
            }
            parts.extensions.insert(Caller(identity.clone()));
        }
        let opener = caller.as_ref().map(|c| c.sub.clone());
        let (head, lane_answer) = match head {
            Head::Call(call) => match self.lane_answer(&parts.headers, call, caller).await {
                Ok(answer) => (None, Some(answer)),
                Err(()) => (None, None),
            },
            Head::Json(v) => (Some(v), None),
        };
        let response = match lane_answer {
            Some(answer) => answer,
            None => match custom_refusal(&parts.headers, &body) {
                Some(refusal) => refusal,
                None => self.to_rmcp(parts, body, head.as_ref()).await,
            },
        };
        let session = response.headers().get("mcp-session-id");
        if let (Some(init), Some(session)) = (head.as_ref(), session)
            && init["method"] == "initialize"
            && let Some(client) = init["params"]["clientInfo"]["name"].as_str()
        {
            // The session's client, for the workbench: known before the client can send the
            // session's first call, which needs this answer's session id.
            crate::watch::named(
                || Some(crate::watch::Origin::Http(session.to_str().ok()?.into())),
                client,
            );
        }
        if let (Some(sub), Some(session)) = (opener, session) {
            self.owners.opened(session, sub, &self.sessions).await;
        }
        response.map(|inner| {
            Tracked {
                inner,
                _guard: guard,
                _open: open,
            }
            .boxed()
        })
    }

    /// The answer to a load balancer's probe (`/healthz`, `/readyz`), never cached.
    async fn probe(&self, req: &Request<Incoming>) -> Option<Response<HttpBody>> {
        let (status, body) = self.health.answer(req.method(), req.uri().path()).await?;
        let mut answer = json_answer(status, &body);
        answer.headers_mut().insert(
            header::CACHE_CONTROL,
            header::HeaderValue::from_static("no-store"),
        );
        Some(answer)
    }

    /// The metrics, for a `GET /metrics` when `--metrics` turned them on: under OAuth, to a
    /// caller whose token has the scopes every request of the server needs.
    fn metrics(
        &self,
        req: &Request<Incoming>,
        caller: Option<&Identity>,
    ) -> Option<Response<HttpBody>> {
        if req.uri().path() != METRICS || req.method() != Method::GET {
            return None;
        }
        let text = crate::metrics::encode(self.health.pool_use())?;
        if let Some(caller) = caller
            && let Some(refusal) = self.lacking(caller, self.live.now().engine.def.scopes, METRICS)
        {
            return Some(refusal);
        }
        let mut answer = Response::new(Full::new(Bytes::from(text)).boxed());
        answer.headers_mut().insert(
            header::CONTENT_TYPE,
            header::HeaderValue::from_static(crate::metrics::CONTENT_TYPE),
        );
        Some(answer)
    }

    /// Records a request of a session as unanswered; a second request with the id of one
    /// still unanswered in the same session is refused (-32600 naming the id) and never runs,
    /// since answers are matched to requests by id alone. The refusal is the JSON-RPC error.
    fn claim(
        &self,
        headers: &http::HeaderMap,
        id: Option<serde_json::Value>,
    ) -> Result<Option<OpenGuard>, serde_json::Value> {
        let (Some(session), Some(id)) = (session_of(headers), id) else {
            return Ok(None);
        };
        let key = (session.to_string(), id.to_string());
        let fresh = self
            .open
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(key.clone());
        if !fresh {
            return Err(crate::protocol::jsonrpc::error_response(
                Some(id.clone()),
                -32600,
                &format!(
                    "invalid request: request id {id} is already in flight; use a new id for each request"
                ),
            ));
        }
        Ok(Some(OpenGuard {
            open: self.open.clone(),
            key,
        }))
    }

    /// The lane's answer to `call`, a POST's request, when it takes it; `Err` leaves the
    /// request to rmcp.
    async fn lane_answer(
        &self,
        headers: &http::HeaderMap,
        mut call: Call,
        caller: Option<Arc<Identity>>,
    ) -> Result<Response<HttpBody>, ()> {
        let lane = self.lane.as_ref().ok_or(())?;
        call.caller = caller;
        let answer = lane.answer(headers, call).await.ok_or(())?;
        let mut response = Response::new(Full::new(Bytes::from(answer)).boxed());
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            header::HeaderValue::from_static("application/json"),
        );
        Ok(response)
    }

    /// Hands a POST to rmcp; the lane notes the cancellations and initialised sessions it sees
    /// on the way.
    async fn to_rmcp(
        &self,
        parts: http::request::Parts,
        body: Bytes,
        message: Option<&serde_json::Value>,
    ) -> Response<HttpBody> {
        let (Some(lane), Some(message)) = (&self.lane, message) else {
            return self
                .service
                .handle(Request::from_parts(parts, Full::new(body)))
                .await;
        };
        lane.cancel(&parts.headers, message);
        let initialized = is_initialized(message).then(|| {
            let session = session_of(&parts.headers).map(str::to_string);
            (session, parts.headers.get("mcp-protocol-version").cloned())
        });
        let response = self
            .service
            .handle(Request::from_parts(parts, Full::new(body)))
            .await;
        if let Some((Some(session), version)) = initialized
            && response.status() == StatusCode::ACCEPTED
        {
            lane.initialized(&session, version.as_ref());
        }
        response
    }
}

/// A POST's one message, decoded once by [`Gate::one_message`]: a `tools/call` the lane could
/// take (which the scope check, the in-flight bookkeeping and the lane read as it is), or any
/// other message as JSON.
enum Head {
    Call(Call),
    Json(serde_json::Value),
}

impl Head {
    /// The id of a request (a number or a string); `None` for a notification or a response.
    fn id(&self) -> Option<serde_json::Value> {
        match self {
            Head::Call(call) => serde_json::from_str(call.id.get()).ok(),
            Head::Json(v) => v
                .get("method")
                .and(v.get("id"))
                .filter(|id| id.is_string() || id.is_number())
                .cloned(),
        }
    }

    /// The method and what it names (a tool's or prompt's name, a resource's URI), for the
    /// scopes it needs.
    fn method_and_target(&self) -> Option<(&str, Option<&str>)> {
        match self {
            Head::Call(call) => Some(("tools/call", Some(call.name()))),
            Head::Json(v) => {
                let method = v.get("method")?.as_str()?;
                let key = if method == "resources/read" {
                    "uri"
                } else {
                    "name"
                };
                let target = v
                    .get("params")
                    .and_then(|p| p.get(key))
                    .and_then(|t| t.as_str());
                Some((method, target))
            }
        }
    }
}

/// The answer to a request rmcp would decode only as a custom one (a method MCP does not
/// define, or a known method whose params do not parse: see
/// [`crate::protocol::jsonrpc::custom_refusal`]), as the stdio transport gives it. rmcp
/// would answer both -32601 with the method's name as the message, and a request of protocol
/// 2026-07-28 with HTTP 404. Requests of that revision get the status that goes with the code
/// (404 for -32601, 400 for -32602); a session's requests get 200, as their other errors do.
fn custom_refusal(headers: &http::HeaderMap, body: &Bytes) -> Option<Response<HttpBody>> {
    use rmcp::model::{ClientJsonRpcMessage, ClientRequest, JsonRpcMessage};
    let Ok(JsonRpcMessage::Request(r)) = serde_json::from_slice::<ClientJsonRpcMessage>(body)
    else {
        return None;
    };
    let ClientRequest::CustomRequest(c) = &r.request else {
        return None;
    };
    let per_request = headers
        .get("mcp-protocol-version")
        .and_then(|v| v.to_str().ok())
        .is_some_and(super::lane::is_modern);
    // A request of neither kind is rmcp's to refuse (no session, say).
    if !per_request && session_of(headers).is_none() {
        return None;
    }
    let id = serde_json::to_value(&r.id).ok();
    let answer =
        crate::protocol::jsonrpc::custom_refusal(id, &c.method, c.params.as_ref(), per_request);
    let status = match (per_request, answer["error"]["code"].as_i64()) {
        (true, Some(-32601)) => StatusCode::NOT_FOUND,
        (true, _) => StatusCode::BAD_REQUEST,
        (false, _) => StatusCode::OK,
    };
    Some(json_answer(status, &answer))
}

/// Which caller opened each session (see `Gate::owners`), bounded: past
/// [`Owners::MAX`] entries, those of sessions that ended are dropped.
#[derive(Default)]
struct Owners(std::sync::Mutex<std::collections::HashMap<String, String>>);

impl Owners {
    const MAX: usize = 10_000;

    fn lock(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<String, String>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Records that `sub` opened `session`.
    async fn opened(
        &self,
        session: &header::HeaderValue,
        sub: String,
        sessions: &LocalSessionManager,
    ) {
        use rmcp::transport::streamable_http_server::session::SessionManager;
        let Ok(session) = session.to_str() else {
            return;
        };
        if self.lock().len() >= Self::MAX {
            let known: Vec<String> = self.lock().keys().cloned().collect();
            let mut ended = Vec::new();
            for id in known {
                if !sessions
                    .has_session(&id.clone().into())
                    .await
                    .unwrap_or(false)
                {
                    ended.push(id);
                }
            }
            let mut owners = self.lock();
            for id in ended {
                owners.remove(&id);
            }
        }
        self.lock().insert(session.to_string(), sub);
    }

    /// Whether `session` was opened by a caller other than `sub` (or by one, when `sub` is
    /// no caller).
    fn someone_else(&self, session: &str, sub: Option<&str>) -> bool {
        self.lock()
            .get(session)
            .is_some_and(|owner| Some(owner.as_str()) != sub)
    }
}

/// The bearer token of `headers`: `None` without an `Authorization` header; refused when
/// there are several, or when it is not the Bearer scheme with one token.
fn bearer(headers: &http::HeaderMap) -> Result<Option<&[u8]>, &'static str> {
    let mut all = headers.get_all(header::AUTHORIZATION).iter();
    let (Some(value), None) = (all.next(), all.next()) else {
        return match headers.contains_key(header::AUTHORIZATION) {
            true => Err("a request must have at most one Authorization header"),
            false => Ok(None),
        };
    };
    let value = value.as_bytes();
    let Some(space) = value.iter().position(|b| *b == b' ') else {
        return Ok(Some(&[]));
    };
    let (scheme, token) = (&value[..space], value[space + 1..].trim_ascii());
    if !scheme.eq_ignore_ascii_case(b"bearer") {
        return Ok(Some(&[]));
    }
    Ok(Some(token))
}

/// Whether the URL carries an access token (`access_token=`), which OAuth 2.1 forbids: URLs
/// end up in logs and histories.
fn token_in_query(req: &Request<Incoming>) -> bool {
    req.uri().query().is_some_and(|q| {
        q.split('&').any(|pair| {
            pair.split('=')
                .next()
                .is_some_and(|k| k.eq_ignore_ascii_case("access_token"))
        })
    })
}

/// A 401 with the `WWW-Authenticate` challenge `challenge`.
fn unauthorized(challenge: String, error: &str, message: &str) -> Response<HttpBody> {
    let mut r = refuse(StatusCode::UNAUTHORIZED, error, message);
    if let Ok(v) = header::HeaderValue::from_str(&challenge) {
        r.headers_mut().insert(header::WWW_AUTHENTICATE, v);
    }
    r
}

/// A JSON body with a status.
fn json_answer(status: StatusCode, body: &serde_json::Value) -> Response<HttpBody> {
    let mut response = Response::new(Full::new(Bytes::from(body.to_string())).boxed());
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    response
}

impl Gate {
    /// Reads a POST body (up to the limit) and lets it through only when it is one JSON-RPC
    /// message, with its id when it is a request; anything else is answered here as the stdio
    /// transport answers it.
    async fn one_message(
        &self,
        req: Request<Incoming>,
    ) -> Result<(http::request::Parts, Bytes, Head), Response<HttpBody>> {
        let (parts, body) = req.into_parts();
        let bytes = match http_body_util::Limited::new(body, self.max_body_bytes)
            .collect()
            .await
        {
            Ok(b) => b.to_bytes(),
            Err(e) if e.is::<http_body_util::LengthLimitError>() => {
                return Err(refuse(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "payload_too_large",
                    &format!("the request body exceeds {} bytes", self.max_body_bytes),
                ));
            }
            Err(e) => {
                tracing::debug!(error = %e, "reading a request body failed");
                return Err(refuse(
                    StatusCode::BAD_REQUEST,
                    "bad_request",
                    "the request body could not be read",
                ));
            }
        };
        // Decoded once: as the call the lane could take when it is one, else as JSON.
        if let Some(call) = Call::parse(&bytes) {
            return Ok((parts, bytes, Head::Call(call)));
        }
        let answer = match serde_json::from_slice::<serde_json::Value>(&bytes) {
            Ok(v) if v.is_object() => return Ok((parts, bytes, Head::Json(v))),
            Ok(_) => crate::protocol::jsonrpc::answer_unparsable(&bytes, &"not a message"),
            Err(e) => crate::protocol::jsonrpc::answer_unparsable(&bytes, &e),
        };
        // Only a request whose id could be read gets its answer as a success; every other
        // body is a bad request.
        let answer = answer.unwrap_or_else(|| {
            crate::protocol::jsonrpc::error_response(None, -32600, "invalid request")
        });
        let status = if answer["id"].is_null() {
            StatusCode::BAD_REQUEST
        } else {
            StatusCode::OK
        };
        Err(json_answer(status, &answer))
    }

    /// DELETE ends a session: 404 for one that does not exist (or ended already), 204 once
    /// it is ended.
    async fn delete(&self, req: Request<Incoming>) -> Response<HttpBody> {
        use rmcp::transport::streamable_http_server::session::SessionManager;
        let id = req
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map(
                |s| -> rmcp::transport::streamable_http_server::session::SessionId {
                    s.to_owned().into()
                },
            );
        if let Some(id) = &id
            && !self.sessions.has_session(id).await.unwrap_or(false)
        {
            return refuse(
                StatusCode::NOT_FOUND,
                "not_found",
                "no such session; it may have ended already",
            );
        }
        let mut response = self.service.handle(req).await;
        if let (Some(lane), Some(id)) = (&self.lane, &id)
            && response.status() == StatusCode::ACCEPTED
        {
            lane.ended(id);
        }
        if response.status() == StatusCode::ACCEPTED {
            *response.status_mut() = StatusCode::NO_CONTENT;
            *response.body_mut() = Full::new(Bytes::new()).boxed();
        }
        response
    }
}

/// `response` with `busy` held until its body is sent: a connection streaming an answer (an
/// SSE stream among them) is not idle.
fn busy_until_sent(response: Response<HttpBody>, busy: Busy) -> Response<HttpBody> {
    response.map(|body| {
        body.map_frame(move |frame| {
            let _ = &busy;
            frame
        })
        .boxed()
    })
}

/// The checker of `o`'s access tokens for the server bound at `bound` (the audience defaults
/// to its own endpoint URL), with the issuer's keys fetched now, keeping of each token's
/// claims what `kept` says.
async fn verifier(
    o: &OAuthOptions,
    bound: SocketAddr,
    kept: crate::auth::Kept,
) -> std::io::Result<Arc<Verifier>> {
    let audience = o
        .audience
        .clone()
        .unwrap_or_else(|| format!("http://{bound}{ENDPOINT}"));
    let verifier = Verifier::new(&o.issuer, &audience, o.client.clone(), kept)
        .await
        .map_err(std::io::Error::other)?;
    tracing::info!(issuer = %o.issuer, %audience, "accepting OAuth access tokens");
    Ok(Arc::new(verifier))
}

/// Serves `server` on `listener` until `shutdown` resolves, then drains as described in the
/// module documentation.
pub async fn serve(
    listener: TcpListener,
    server: McpServer,
    options: HttpOptions,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let bound = listener.local_addr()?;
    let config = StreamableHttpServerConfig::default()
        .disable_allowed_hosts()
        .disable_allowed_origins()
        .with_max_request_body_bytes(options.max_body_bytes);
    let sessions = config.cancellation_token.clone();
    let ending = server.shutdown();
    let oauth = match &options.oauth {
        Some(o) => Some(verifier(o, bound, server.live().now().engine.kept_claims()).await?),
        None => None,
    };
    let gate = Arc::new(Gate::new(bound, &options, oauth, server, config));
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let mut http = hyper::server::conn::http1::Builder::new();
    // The timer bounds how long a client may take to send its headers.
    http.timer(TokioTimer::new());
    let conns = Connections::new(options.max_connections);
    let mut backoff = Backoff::default();
    let mut refused = 0_u64;
    tokio::pin!(shutdown);
    // After the shutdown signal: readiness fails at once, and requests are still accepted
    // until the grace period ends (at once when there is none).
    let mut grace: Option<std::pin::Pin<Box<tokio::time::Sleep>>> = None;
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of descriptors and the like: free one, back off, log now and then.
                    conns.shed();
                    let (sleep, report) = backoff.failed(std::time::Instant::now());
                    if let Some(n) = report {
                        tracing::warn!(error = %e, failures = n, open = conns.len(), "accepting connections failed; backing off");
                    }
                    tokio::time::sleep(sleep).await;
                    continue;
                }
            },
            () = &mut shutdown, if grace.is_none() => {
                gate.health.drain();
                if options.ready_grace.is_zero() {
                    break;
                }
                tracing::info!(grace_ms = options.ready_grace.as_millis(), "shutting down: /readyz answers 503; accepting requests for the grace period");
                grace = Some(Box::pin(tokio::time::sleep(options.ready_grace)));
                continue;
            }
            () = async { grace.as_mut().expect("guarded").await }, if grace.is_some() => break,
        };
        backoff.accepted();
        let Some(slot) = conns.admit() else {
            // Every connection is answering a request: this one is closed at once.
            refused += 1;
            if refused.is_power_of_two() {
                tracing::warn!(
                    cap = conns.cap(),
                    refused,
                    "at the connection cap with none idle; closing new connections"
                );
            }
            continue;
        };
        let _ = stream.set_nodelay(true);
        spawn_connection(stream, peer, slot, &http, &graceful, gate.clone());
    }
    drop(listener);
    gate.health.drain();
    tracing::info!("stopped accepting connections; finishing calls in flight");
    drain(&gate, &ending, graceful, &sessions, options.drain_timeout).await;
    Ok(())
}

/// Serves an accepted connection's requests (from `peer`, holding `slot` among the open ones)
/// through `gate` on a task of its own, until the client ends it, `graceful` shuts it down or
/// it is closed to make room for another.
fn spawn_connection(
    stream: tokio::net::TcpStream,
    peer: SocketAddr,
    slot: super::http_conns::Slot,
    http: &hyper::server::conn::http1::Builder,
    graceful: &hyper_util::server::graceful::GracefulShutdown,
    gate: Arc<Gate>,
) {
    let slot = Arc::new(slot);
    let marks = slot.clone();
    let service = hyper::service::service_fn(move |req| {
        let (gate, busy) = (gate.clone(), marks.request());
        async move { Ok::<_, Infallible>(busy_until_sent(gate.handle(req).await, busy)) }
    });
    let conn = graceful.watch(http.serve_connection(TokioIo::new(stream), service));
    tokio::spawn(async move {
        tokio::select! {
            ended = conn => if let Err(e) = ended {
                tracing::debug!(%peer, error = %e, "connection ended with an error");
            },
            // Closed to make room for a new connection: dropping it closes the socket.
            () = slot.close.cancelled() => {
                tracing::debug!(%peer, "closed an idle connection to make room");
            }
        }
    });
}

/// Once no connection is accepted any more: listen streams end, the calls in flight are
/// answered (abandoned, each answered as shutting down, once `timeout` has passed), then the
/// `sessions` end and the connections are given two seconds to close.
async fn drain(
    gate: &Gate,
    ending: &crate::shutdown::Shutdown,
    graceful: hyper_util::server::graceful::GracefulShutdown,
    sessions: &tokio_util::sync::CancellationToken,
    timeout: Duration,
) {
    ending.drain();
    let closed = graceful.shutdown();
    if tokio::time::timeout(timeout, gate.in_flight.idle())
        .await
        .is_err()
    {
        tracing::warn!("shutdown timeout reached; abandoning calls in flight");
        ending.abandon();
    }
    // Every POST is answered: end the sessions, which closes their GET streams too.
    sessions.cancel();
    if tokio::time::timeout(Duration::from_secs(2), closed)
        .await
        .is_err()
    {
        tracing::warn!("some connections did not close in time");
    }
}

#[cfg(test)]
mod tests {
    use super::same_secret;

    #[test]
    fn secrets_compare_whole() {
        assert!(same_secret(b"s3cret-token", b"s3cret-token"));
        assert!(!same_secret(b"s3cret-token", b"s3cret-tokem"));
        assert!(!same_secret(b"s3cret-token", b"s3cret-toke"));
        assert!(!same_secret(b"s3cret-token", b"s3cret-token!"));
        assert!(!same_secret(b"s3cret-token", b""));
        assert!(!same_secret(b"\0", b""));
    }
}
