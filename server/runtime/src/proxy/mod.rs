//! Proxy bindings at run time: downstream MCP servers started as child processes, their tools
//! re-exported beside the server's own, and an interceptor in front of every call to them.
//!
//! A spec's `proxy:` section becomes a [`ProxyDef`]. At start-up [`Proxy::start`] reads the
//! downstream list (the spec's `servers`, then the config file), starts each server with the
//! rmcp client over its stdio, and lists its tools. Name clashes are settled here: the
//! server's own tools win, and between downstream servers the later one in the list wins; each
//! clash is logged once. A supervisor task per downstream restarts it with a bounded backoff
//! when it exits; calls in flight fail at once with `DOWNSTREAM_FAILED`, and later calls wait
//! (within the call timeout) for the restarted process. When a downstream's tools change, the
//! client gets `notifications/tools/list_changed`.
//!
//! Per call, [`Proxy::call`] normalises the tool name, extracts `:command` and `:file_path`
//! from the arguments, checks the static rules and then runs the interceptor query on a reader
//! connection of the server's database. A guard blocks the call before the downstream sees it;
//! hints (each key once per session) are put before the downstream result's content; with no
//! match the downstream's result is returned unchanged.

pub(crate) mod downlink;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use crate::backend::Value as SqlValue;
use rmcp::model::{CallToolRequestParams, CallToolResult, ContentBlock, ErrorData, Tool};
use rmcp::service::{NotificationContext, Peer, ServiceError};
use rmcp::{ClientHandler, RoleClient, RoleServer};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use crate::backend::paths::expand;
use crate::backend::{Database, Row, Stop, ValueRef};
use crate::def::{InterceptAction, ProxyConfigDef, ProxyDef};
use crate::engine::{Engine, ToolError};

/// The first wait before restarting a downstream that exited.
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
/// The longest wait between restarts.
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// A downstream that ran this long before exiting restarts after the first backoff again.
const STABLE_AFTER: Duration = Duration::from_secs(10);
/// How long a downstream may take to start and list its tools.
const START_TIMEOUT: Duration = Duration::from_secs(20);
/// How long the server waits for its downstreams' first tool lists before it serves its own
/// client; slower downstreams' tools arrive later with `notifications/tools/list_changed`.
const START_GRACE: Duration = Duration::from_secs(1);
/// How long a stopping downstream may take to exit after its stdin closed before it is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(5);

/// Start-up failures of a proxy, each saying what to fix.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    #[error("cannot read the proxy config {path}: {source}")]
    ConfigRead {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "the proxy config {path} is not valid: {reason}\n  expected {{\"version\": 1, \"proxyServers\": [{{\"name\", \"command\", \"args\": [], \"env\": {{}}}}]}}"
    )]
    ConfigInvalid { path: String, reason: String },
    #[error("the interceptor query of {spec} does not run on this database: {reason}")]
    Query { spec: &'static str, reason: String },
    #[error("the interceptor query needs a database, and the server has none")]
    NoDatabase,
    #[error("interceptor rule `{key}` has a pattern that does not compile: {reason}")]
    Rule { key: &'static str, reason: String },
}

/// One downstream server to start.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DownstreamSpec {
    pub name: String,
    pub command: String,
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub env: std::collections::BTreeMap<String, String>,
}

/// The config file's shape.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ConfigFile {
    version: u32,
    #[serde(default)]
    proxy_servers: Vec<DownstreamSpec>,
}

/// Where the config file is: the environment variable, else the default for this system.
pub fn config_path(def: &ProxyConfigDef) -> Option<PathBuf> {
    if let Some(var) = def.env
        && let Some(v) = std::env::var_os(var).filter(|v| !v.is_empty())
    {
        return Some(expand(&v.to_string_lossy()));
    }
    crate::backend::paths::for_this_os(def.default_linux, def.default_macos, def.default_windows)
        .map(expand)
}

/// The downstream servers of a proxy: the spec's, then the config file's. A missing config
/// file means none from it; an unreadable or malformed one is a start-up error. A name used
/// twice keeps its first entry.
pub fn downstreams(def: &ProxyDef) -> Result<Vec<DownstreamSpec>, ProxyError> {
    let mut out: Vec<DownstreamSpec> = def
        .servers
        .iter()
        .map(|d| DownstreamSpec {
            name: d.name.to_string(),
            command: d.command.to_string(),
            args: d.args.iter().map(|a| (*a).to_string()).collect(),
            env: d
                .env
                .iter()
                .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
                .collect(),
        })
        .collect();
    if let Some(path) = def.config.as_ref().and_then(config_path) {
        let shown = path.display().to_string();
        match std::fs::read_to_string(&path) {
            Ok(text) => {
                let file: ConfigFile =
                    serde_json::from_str(&text).map_err(|e| ProxyError::ConfigInvalid {
                        path: shown.clone(),
                        reason: e.to_string(),
                    })?;
                if file.version != 1 {
                    return Err(ProxyError::ConfigInvalid {
                        path: shown,
                        reason: format!("version {} is not supported", file.version),
                    });
                }
                out.extend(file.proxy_servers);
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                tracing::info!(config = %shown, "no proxy config file; no downstream servers from it");
            }
            Err(source) => {
                return Err(ProxyError::ConfigRead {
                    path: shown,
                    source,
                });
            }
        }
    }
    let mut seen = HashSet::new();
    out.retain(|d| {
        let first = seen.insert(d.name.clone());
        if !first {
            tracing::warn!(downstream = %d.name, "a second downstream server has this name; it is skipped");
        }
        first
    });
    Ok(out)
}

/// A running downstream process: the client's peer, and a token cancelled once it stopped.
#[derive(Clone)]
struct Live {
    peer: Peer<RoleClient>,
    closed: CancellationToken,
}

/// One downstream server and what is known of it.
struct Downstream {
    spec: DownstreamSpec,
    /// The current process, `None` while it is (re)starting or stopped.
    live: watch::Sender<Option<Live>>,
    /// The tools it listed last; kept while it restarts.
    tools: Mutex<Vec<Tool>>,
}

/// The re-exported tools: their order in `tools/list` and the downstream of each.
#[derive(Default)]
struct Routes {
    tools: Vec<Tool>,
    by_name: HashMap<String, usize>,
}

/// A static rule with its patterns compiled.
struct Rule {
    def: &'static crate::def::InterceptRuleDef,
    command: Option<regex::Regex>,
    file_path: Option<regex::Regex>,
}

/// A lesson or rule that matched a call.
#[derive(Debug, Clone)]
struct Match {
    key: String,
    action: InterceptAction,
    message: String,
}

/// What the interceptor sees of one call.
struct Call<'a> {
    tool: &'a str,
    tool_name: &'a str,
    server: &'a str,
    command: Option<String>,
    file_path: Option<String>,
    arguments: String,
}

/// The proxy: downstream servers, routes to their tools, and the interceptor.
pub struct Proxy {
    def: &'static ProxyDef,
    engine: Arc<Engine>,
    own: HashSet<String>,
    downstreams: Vec<Downstream>,
    routes: RwLock<Routes>,
    rules: Vec<Rule>,
    /// The client sessions that sent `notifications/initialized`, told of `list_changed`.
    clients: Mutex<Vec<Peer<RoleServer>>>,
    /// Each change of the tools the clients see, for the listen streams of protocol
    /// 2026-07-28 (which have no session to be told in).
    changes: tokio::sync::broadcast::Sender<()>,
    /// Clashes already logged.
    clashes: Mutex<HashSet<String>>,
    shutdown: CancellationToken,
    /// When every downstream must be gone, once shutdown began: stopping one waits for it to
    /// exit only until then, and kills and reaps it after.
    stop_by: Mutex<Option<tokio::time::Instant>>,
    supervisors: Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

/// Tells a supervisor that its downstream announced a change of its tools.
struct Watcher {
    relist: mpsc::UnboundedSender<()>,
}

impl ClientHandler for Watcher {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let _ = self.relist.send(());
    }
}

impl Proxy {
    /// Reads the downstream list, starts every downstream and lists its tools. A downstream
    /// that fails to start is logged and skipped; the server starts without it.
    pub async fn start(
        def: &'static ProxyDef,
        engine: Arc<Engine>,
        own_tools: &[Tool],
    ) -> Result<Arc<Proxy>, ProxyError> {
        let specs = downstreams(def)?;
        let rules = def
            .rules
            .iter()
            .map(|r| {
                let compile = |p: Option<&str>| {
                    p.map(regex::Regex::new)
                        .transpose()
                        .map_err(|e| ProxyError::Rule {
                            key: r.key,
                            reason: e.to_string(),
                        })
                };
                Ok(Rule {
                    def: r,
                    command: compile(r.command)?,
                    file_path: compile(r.file_path)?,
                })
            })
            .collect::<Result<Vec<_>, ProxyError>>()?;
        if let Some(sql) = def.sql {
            let db = engine.database().ok_or(ProxyError::NoDatabase)?;
            check_query(db, sql).map_err(|reason| ProxyError::Query {
                spec: engine.def.spec_file,
                reason,
            })?;
        }
        let proxy = Arc::new(Proxy {
            def,
            own: own_tools.iter().map(|t| t.name.to_string()).collect(),
            downstreams: specs
                .into_iter()
                .map(|spec| Downstream {
                    spec,
                    live: watch::channel(None).0,
                    tools: Mutex::new(Vec::new()),
                })
                .collect(),
            engine,
            routes: RwLock::new(Routes::default()),
            rules,
            clients: Mutex::new(Vec::new()),
            changes: tokio::sync::broadcast::channel(16).0,
            clashes: Mutex::new(HashSet::new()),
            shutdown: CancellationToken::new(),
            stop_by: Mutex::new(None),
            supervisors: Mutex::new(Vec::new()),
        });
        let mut started = Vec::new();
        for index in 0..proxy.downstreams.len() {
            let (tx, rx) = tokio::sync::oneshot::channel();
            let task = tokio::spawn(proxy.clone().supervise(index, tx));
            lock(&proxy.supervisors).push(task);
            started.push(rx);
        }
        // Downstreams that list their tools within the grace period are in the first
        // `tools/list`; a slow one never holds up the client's `initialize`.
        let grace = tokio::time::Instant::now() + START_GRACE;
        for rx in started {
            if tokio::time::timeout_at(grace, rx).await.is_err() {
                tracing::info!(
                    "a downstream server is still starting; its tools will be announced when it is ready"
                );
                break;
            }
        }
        Ok(proxy)
    }

    /// The re-exported downstream tools, in `tools/list` order.
    pub fn tools(&self) -> Vec<Tool> {
        read(&self.routes).tools.clone()
    }

    /// Whether `name` is a re-exported downstream tool.
    pub fn routes(&self, name: &str) -> bool {
        read(&self.routes).by_name.contains_key(name)
    }

    /// The re-exported tool named `name`.
    pub fn tool(&self, name: &str) -> Option<Tool> {
        read(&self.routes)
            .tools
            .iter()
            .find(|t| t.name == name)
            .cloned()
    }

    /// Remembers a client session so that later changes of the tools can be announced to it;
    /// over Streamable HTTP there is one per session, and ended ones are forgotten.
    pub fn set_client(&self, peer: Peer<RoleServer>) {
        let mut clients = lock(&self.clients);
        clients.retain(|p| !p.is_transport_closed());
        clients.push(peer);
    }

    /// Stops every downstream: closes its stdin, waits for it to exit (killing it after a
    /// timeout) and reaps it, so that no process outlives the server.
    /// Whatever the downstreams do, this returns within `timeout`: supervisors still busy
    /// then are aborted, which kills their children.
    pub async fn shutdown(&self, timeout: Duration) {
        let deadline = tokio::time::Instant::now() + timeout;
        // Each downstream is waited for until a little before the deadline, then killed and
        // reaped, so that aborting a supervisor stays a last resort.
        *lock(&self.stop_by) = Some(deadline - timeout.mul_f32(0.2));
        self.shutdown.cancel();
        let tasks: Vec<_> = lock(&self.supervisors).drain(..).collect();
        for mut t in tasks {
            if tokio::time::timeout_at(deadline, &mut t).await.is_err() {
                tracing::warn!("a downstream server did not stop in time; killing it");
                t.abort();
                let _ = t.await;
            }
        }
    }

    /// Keeps one downstream running until shutdown. `first` is signalled once its first start
    /// succeeded or failed.
    async fn supervise(self: Arc<Proxy>, index: usize, first: tokio::sync::oneshot::Sender<()>) {
        let d = &self.downstreams[index];
        let name = d.spec.name.clone();
        let mut first = Some(first);
        let mut backoff = FIRST_BACKOFF;
        loop {
            let (relist_tx, mut relist) = mpsc::unbounded_channel();
            let attempt = tokio::select! {
                r = tokio::time::timeout(START_TIMEOUT, connect(&d.spec, Watcher { relist: relist_tx }, self.engine.limits().max_result_bytes)) => {
                    r.unwrap_or_else(|_| Err(format!("it did not answer within {START_TIMEOUT:?}")))
                }
                () = self.shutdown.cancelled() => return,
            };
            let mut running = match attempt {
                Ok(r) => r,
                Err(e) => {
                    if let Some(f) = first.take() {
                        // A downstream that never started is skipped: retrying a wrong command
                        // would only fill the log.
                        tracing::warn!(downstream = %name, error = %e, "the downstream server failed to start; it is skipped");
                        let _ = f.send(());
                        return;
                    }
                    tracing::warn!(downstream = %name, error = %e, retry_in_ms = backoff.as_millis() as u64, "the downstream server failed to restart");
                    if self.wait(backoff).await {
                        return;
                    }
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                    continue;
                }
            };
            let closed = CancellationToken::new();
            d.live.send_replace(Some(Live {
                peer: running.peer.clone(),
                closed: closed.clone(),
            }));
            tracing::info!(downstream = %name, tools = running.tools.len(), pid = running.child.id(), "downstream server started");
            self.set_tools(index, std::mem::take(&mut running.tools))
                .await;
            if let Some(f) = first.take() {
                let _ = f.send(());
            }
            let since = Instant::now();
            let Some(mut done) = running.done.take() else {
                return;
            };
            let stopping = loop {
                tokio::select! {
                    _ = &mut done => break false,
                    () = self.shutdown.cancelled() => break true,
                    Some(()) = relist.recv() => {
                        let listed = tokio::select! {
                            r = tokio::time::timeout(START_TIMEOUT, running.peer.list_all_tools()) => r,
                            () = self.shutdown.cancelled() => break true,
                        };
                        match listed {
                            Ok(Ok(tools)) => self.set_tools(index, tools).await,
                            Ok(Err(e)) => tracing::warn!(downstream = %name, error = %e, "relisting the tools failed"),
                            Err(_) => tracing::warn!(downstream = %name, "relisting the tools timed out"),
                        }
                    }
                }
            };
            if stopping {
                running.done = Some(done);
            }
            // Calls waiting for this process see it gone before they see `closed`, so that
            // the next call waits for the restarted process instead of picking this one.
            d.live.send_replace(None);
            closed.cancel();
            running.stop(self.stop_grace()).await;
            if stopping {
                tracing::info!(downstream = %name, "downstream server stopped");
                return;
            }
            if since.elapsed() >= STABLE_AFTER {
                backoff = FIRST_BACKOFF;
            }
            tracing::warn!(downstream = %name, restart_in_ms = backoff.as_millis() as u64, "the downstream server exited; restarting it");
            if self.wait(backoff).await {
                return;
            }
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    }

    /// How long a stopping downstream may take to exit: [`STOP_TIMEOUT`], or less once shutdown
    /// set a time by which every downstream must be gone.
    fn stop_grace(&self) -> Duration {
        lock(&self.stop_by).map_or(STOP_TIMEOUT, |by| {
            by.saturating_duration_since(tokio::time::Instant::now())
                .min(STOP_TIMEOUT)
        })
    }

    /// Waits `d`, or until shutdown; true when shutting down.
    async fn wait(&self, d: Duration) -> bool {
        tokio::select! {
            () = tokio::time::sleep(d) => false,
            () = self.shutdown.cancelled() => true,
        }
    }

    /// Records a downstream's tools, rebuilds the routes, and tells the client when the set
    /// of tools it sees changed.
    async fn set_tools(&self, index: usize, tools: Vec<Tool>) {
        *lock(&self.downstreams[index].tools) = tools;
        let changed = self.rebuild();
        if changed {
            let _ = self.changes.send(());
            let clients: Vec<Peer<RoleServer>> = {
                let mut clients = lock(&self.clients);
                clients.retain(|p| !p.is_transport_closed());
                clients.clone()
            };
            for peer in clients {
                if let Err(e) = peer.notify_tool_list_changed().await {
                    tracing::warn!(error = %e, "notifications/tools/list_changed could not be sent");
                }
            }
        }
    }

    /// Hears of each change of the tools the clients see (a downstream that started late, or
    /// came back with other tools).
    pub fn changes(&self) -> tokio::sync::broadcast::Receiver<()> {
        self.changes.subscribe()
    }

    /// Settles name clashes and recomputes the routes; true when the tools changed.
    fn rebuild(&self) -> bool {
        let mut routes = Routes::default();
        for (i, d) in self.downstreams.iter().enumerate() {
            for t in lock(&d.tools).iter() {
                let name = t.name.to_string();
                if self.own.contains(&name) {
                    self.clash(
                        format!("own:{name}:{}", d.spec.name),
                        &name,
                        &d.spec.name,
                        "the server's own tool",
                    );
                    continue;
                }
                match routes.by_name.get(&name) {
                    Some(&j) => {
                        let earlier = &self.downstreams[j].spec.name;
                        self.clash(
                            format!("{name}:{earlier}:{}", d.spec.name),
                            &name,
                            earlier,
                            &format!("downstream `{}` (the later one wins)", d.spec.name),
                        );
                        if let Some(slot) = routes.tools.iter_mut().find(|x| x.name == t.name) {
                            *slot = t.clone();
                        }
                    }
                    None => routes.tools.push(t.clone()),
                }
                routes.by_name.insert(name, i);
            }
        }
        let mut current = write(&self.routes);
        let changed = current.tools != routes.tools;
        *current = routes;
        changed
    }

    /// Logs a clash once.
    fn clash(&self, id: String, tool: &str, hidden: &str, winner: &str) {
        if lock(&self.clashes).insert(id) {
            tracing::warn!(
                tool,
                "tool `{tool}` of downstream `{hidden}` is hidden by {winner}"
            );
        }
    }

    /// Runs one call to a re-exported tool through the interceptor and, unless a guard blocks
    /// it, on the downstream that serves it. `seen` holds the hint keys the calling session
    /// was already given.
    pub async fn call(
        &self,
        name: &str,
        arguments: Option<Map<String, Value>>,
        cancelled: CancellationToken,
        seen: &Mutex<HashSet<String>>,
    ) -> Result<CallToolResult, ErrorData> {
        let Some(index) = read(&self.routes).by_name.get(name).copied() else {
            return Err(ErrorData::invalid_params(
                format!("unknown tool: {}", crate::transform::quote(name)),
                None,
            ));
        };
        let d = &self.downstreams[index];
        let args = arguments.clone().unwrap_or_default();
        let canonical = self
            .def
            .normalize
            .iter()
            .find(|(from, _)| *from == name)
            .map_or(name, |(_, to)| *to);
        let call = Call {
            tool: canonical,
            tool_name: name,
            server: &d.spec.name,
            command: extract(&args, self.def.extract_command),
            file_path: extract(&args, self.def.extract_file_path),
            arguments: Value::Object(args).to_string(),
        };
        let matches = self.intercept(&call).await;
        if let Some(guard) = matches.iter().find(|m| m.action == InterceptAction::Guard) {
            tracing::info!(target: "mcpspec::proxy", tool = name, downstream = %d.spec.name, key = %guard.key, action = "guard", "intercepted");
            return Ok(blocked(guard));
        }
        // Each hint key is claimed when the call is decided, so that concurrent calls do not
        // both carry it.
        let hints: Vec<&Match> = {
            let mut seen = lock(seen);
            matches
                .iter()
                .filter(|m| seen.insert(m.key.clone()))
                .collect()
        };
        for h in &hints {
            tracing::info!(target: "mcpspec::proxy", tool = name, downstream = %d.spec.name, key = %h.key, action = "hint", "intercepted");
        }
        let mut result = self.forward(d, name, arguments, cancelled).await?;
        if !hints.is_empty() {
            result
                .content
                .insert(0, ContentBlock::text(hint_text(&hints)));
        }
        Ok(result)
    }

    /// The rules and query rows that match a call: static rules first, then the query, which is
    /// skipped once a rule guards. A failing query is logged and matches nothing, so a broken
    /// database never blocks the downstream tools.
    async fn intercept(&self, call: &Call<'_>) -> Vec<Match> {
        let mut out: Vec<Match> = self
            .rules
            .iter()
            .filter(|r| rule_matches(r, call))
            .map(|r| Match {
                key: r.def.key.to_string(),
                action: r.def.action,
                message: r.def.message.to_string(),
            })
            .collect();
        if out.iter().any(|m| m.action == InterceptAction::Guard) {
            return out;
        }
        let (Some(sql), Some(db)) = (self.def.sql, self.engine.database()) else {
            return out;
        };
        let db = db.clone();
        let timeout = self.engine.limits().call_timeout;
        let params: Vec<(&'static str, SqlValue)> = self
            .def
            .params
            .iter()
            .map(|p| (*p, param(p, call, self.engine.dir())))
            .collect();
        let found =
            tokio::task::spawn_blocking(move || run_query(&db, sql, &params, timeout)).await;
        match found {
            Ok(Ok(found)) => out.extend(found),
            Ok(Err(e)) => {
                tracing::error!(tool = call.tool_name, error = %e, "the interceptor query failed; the call goes through unchecked");
            }
            Err(e) => {
                tracing::error!(tool = call.tool_name, error = %e, "the interceptor query panicked; the call goes through unchecked");
            }
        }
        out
    }

    /// Sends a call to its downstream, waiting (within the call timeout) for a process that is
    /// restarting. A process that stops before answering fails the call with
    /// `DOWNSTREAM_FAILED`; an error the downstream answers with is passed through.
    async fn forward(
        &self,
        d: &Downstream,
        name: &str,
        arguments: Option<Map<String, Value>>,
        cancelled: CancellationToken,
    ) -> Result<CallToolResult, ErrorData> {
        let timeout = self.engine.limits().call_timeout;
        let deadline = tokio::time::Instant::now() + timeout;
        let mut rx = d.live.subscribe();
        let live = tokio::select! {
            r = tokio::time::timeout_at(deadline, rx.wait_for(|l| l.as_ref().is_some_and(|l| !l.closed.is_cancelled()))) => {
                match r {
                    Ok(Ok(l)) => l.clone(),
                    _ => return Ok(failed(&d.spec.name, "is not running")),
                }
            }
            () = cancelled.cancelled() => return Ok(tool_error("CANCELLED", format!("the call to `{name}` was cancelled"), None)),
        };
        let Some(live) = live else {
            return Ok(failed(&d.spec.name, "is not running"));
        };
        let mut params = CallToolRequestParams::new(name.to_string());
        if let Some(a) = arguments {
            params = params.with_arguments(a);
        }
        tokio::select! {
            r = live.peer.call_tool(params) => match r {
                Ok(result) => Ok(result),
                Err(ServiceError::McpError(e)) => made_up(e),
                Err(e) => {
                    tracing::warn!(downstream = %d.spec.name, tool = name, error = %e, "the downstream call failed");
                    // Only a process that is gone is being restarted; one that answered
                    // nonsense is still running, and says so.
                    let what = if live.closed.is_cancelled() || live.peer.is_transport_closed() {
                        "stopped before answering; it is being restarted".to_string()
                    } else {
                        format!("answered `{name}` with something that is not a tool result")
                    };
                    Ok(failed(&d.spec.name, &what))
                }
            },
            () = live.closed.cancelled() => {
                tracing::warn!(downstream = %d.spec.name, tool = name, "the downstream server stopped during a call");
                Ok(failed(&d.spec.name, "stopped before answering; it is being restarted"))
            }
            () = tokio::time::sleep_until(deadline) => Ok(tool_error(
                "TIMEOUT",
                format!("`{name}` did not answer within {} ms", timeout.as_millis()),
                None,
            )),
            () = cancelled.cancelled() => Ok(tool_error("CANCELLED", format!("the call to `{name}` was cancelled"), None)),
        }
    }
}

/// A started downstream: the child process, the client's peer, its first tool list, and the
/// client's service loop, which ends when the process's stdout closes.
struct Running {
    child: tokio::process::Child,
    peer: Peer<RoleClient>,
    stop: rmcp::service::RunningServiceCancellationToken,
    tools: Vec<Tool>,
    /// `None` once it was awaited to the end.
    done: Option<tokio::task::JoinHandle<()>>,
}

impl Running {
    /// Ends the client, which closes the child's stdin, then waits for the child to exit,
    /// killing it once `grace` has passed. The child is reaped either way.
    async fn stop(mut self, grace: Duration) {
        self.stop.cancel();
        let deadline = tokio::time::Instant::now() + grace;
        // The client's loop may be stuck writing to a child that does not read; it gets the
        // same time as the child, then is dropped, which closes the pipes.
        if let Some(mut done) = self.done.take()
            && tokio::time::timeout_at(deadline, &mut done).await.is_err()
        {
            done.abort();
            let _ = done.await;
        }
        match tokio::time::timeout_at(deadline, self.child.wait()).await {
            Ok(_) => {}
            Err(_) => {
                tracing::warn!(
                    pid = self.child.id(),
                    "a downstream server did not exit; killing it"
                );
                let _ = self.child.kill().await;
            }
        }
    }
}

/// Starts one downstream process and lists its tools.
async fn connect(
    spec: &DownstreamSpec,
    watcher: Watcher,
    max_line: usize,
) -> Result<Running, String> {
    let mut cmd = tokio::process::Command::new(&spec.command);
    cmd.args(&spec.args)
        .envs(&spec.env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true);
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start `{}`: {e}", spec.command))?;
    let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
        return Err("no stdio pipes".into());
    };
    let link = crate::proxy::downlink::Downlink::new(&spec.name, stdout, stdin, max_line);
    let running = match rmcp::serve_client(watcher, link).await {
        Ok(r) => r,
        Err(e) => {
            let _ = child.kill().await;
            return Err(format!("the MCP handshake failed: {e}"));
        }
    };
    let peer = running.peer().clone();
    let stop = running.cancellation_token();
    let done = tokio::spawn(async move {
        let _ = running.waiting().await;
    });
    match peer.list_all_tools().await {
        Ok(tools) => Ok(Running {
            child,
            peer,
            stop,
            tools,
            done: Some(done),
        }),
        Err(e) => {
            let r = Running {
                child,
                peer,
                stop,
                tools: Vec::new(),
                done: Some(done),
            };
            r.stop(STOP_TIMEOUT).await;
            Err(format!("tools/list failed: {e}"))
        }
    }
}

/// The first argument among `names` that is present: a string, or an array's first string.
fn extract(args: &Map<String, Value>, names: &[&str]) -> Option<String> {
    names.iter().find_map(|n| match args.get(*n)? {
        Value::String(s) => Some(s.clone()),
        Value::Array(items) => items.iter().find_map(Value::as_str).map(str::to_string),
        _ => None,
    })
}

fn rule_matches(r: &Rule, call: &Call<'_>) -> bool {
    let tool_ok = r.def.tools.is_empty() || r.def.tools.contains(&call.tool);
    let pattern_ok = |re: &Option<regex::Regex>, v: &Option<String>| match re {
        None => true,
        Some(re) => v.as_deref().is_some_and(|v| re.is_match(v)),
    };
    tool_ok && pattern_ok(&r.command, &call.command) && pattern_ok(&r.file_path, &call.file_path)
}

/// The value of an interceptor parameter for a call.
fn param(name: &str, call: &Call<'_>, project: &Path) -> SqlValue {
    let text = |s: &str| SqlValue::Text(s.to_string());
    match name {
        "tool" => text(call.tool),
        "tool_name" => text(call.tool_name),
        "server" => text(call.server),
        "command" => call.command.as_deref().map_or(SqlValue::Null, text),
        "file_path" => call.file_path.as_deref().map_or(SqlValue::Null, text),
        "arguments" => text(&call.arguments),
        "project" => text(&project.to_string_lossy()),
        _ => SqlValue::Null,
    }
}

/// Runs the interceptor query on a reader connection, under the call timeout.
fn run_query(
    db: &Database,
    sql: &str,
    params: &[(&'static str, SqlValue)],
    timeout: std::time::Duration,
) -> Result<Vec<Match>, String> {
    // Whatever sigil the query uses, a parameter binds by its name.
    let bind = |name: &str| {
        params
            .iter()
            .find(|(p, _)| *p == name)
            .map_or(SqlValue::Null, |(_, v)| v.clone())
    };
    let text = |row: &dyn Row, i: Option<usize>| match i.map(|i| row.value(i)) {
        Some(ValueRef::Text(t)) => Some(String::from_utf8_lossy(t).into_owned()),
        _ => None,
    };
    let mut out = Vec::new();
    let mut odd = false;
    let stop = Stop::after(timeout, std::sync::Arc::default());
    let ran = db.job(
        false,
        false,
        &stop,
        |f| f,
        |session| {
            session.query(sql.into(), &bind, &mut |row| {
                let names = row.names();
                let at = |c: &str| names.iter().position(|n| *n == c);
                let (Some(key), Some(action), Some(message)) = (
                    text(row, at("key")),
                    text(row, at("action")),
                    text(row, at("message")),
                ) else {
                    odd = true;
                    return false;
                };
                match InterceptAction::parse(&action) {
                    Some(action) => out.push(Match {
                        key,
                        action,
                        message,
                    }),
                    None => {
                        tracing::warn!(
                            key,
                            action,
                            "the interceptor query returned an unknown action; the row is ignored"
                        );
                    }
                }
                true
            })
        },
    );
    match ran {
        Some(Ok(())) if odd => Err("a row has no text key, action or message".into()),
        Some(Ok(())) => Ok(out),
        Some(Err(f)) => Err(f.message),
        None => Err("no reader".into()),
    }
}

/// Prepares the interceptor query at start-up and checks that it returns the columns the
/// runtime reads.
fn check_query(db: &Database, sql: &str) -> Result<(), String> {
    let names = db.columns(sql.into())?;
    let missing: Vec<&str> = ["key", "action", "message"]
        .into_iter()
        .filter(|c| !names.iter().any(|n| n.name == **c))
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!("it returns no {} column", missing.join(", ")))
    }
}

/// A downstream's JSON-RPC error, passed through, unless the transport made it up to report
/// what went wrong with the answer ([`crate::proxy::downlink`]): that becomes a tool error.
fn made_up(e: ErrorData) -> Result<CallToolResult, ErrorData> {
    let code = e
        .data
        .as_ref()
        .and_then(|d| d.get("code"))
        .and_then(Value::as_str);
    let code = match code {
        Some(crate::proxy::downlink::TOO_LARGE) => crate::proxy::downlink::TOO_LARGE,
        Some(crate::proxy::downlink::MALFORMED) => crate::proxy::downlink::MALFORMED,
        _ => return Err(e),
    };
    let mut data = e.data.unwrap_or_default();
    if let Some(d) = data.as_object_mut() {
        d.remove("code");
    }
    Ok(tool_error(code, e.message.into_owned(), Some(data)))
}

/// A tool result with `isError` and the runtime's error JSON.
fn tool_error(code: &'static str, message: String, data: Option<Value>) -> CallToolResult {
    let e = ToolError {
        code,
        message,
        data,
    };
    CallToolResult::error(vec![ContentBlock::text(e.to_json().to_string())])
}

/// The result of a call whose downstream stopped or is not running. It names the downstream
/// and nothing of its command or paths.
fn failed(downstream: &str, what: &str) -> CallToolResult {
    tool_error(
        "DOWNSTREAM_FAILED",
        format!("the downstream server `{downstream}` {what}"),
        Some(json!({"downstream": downstream})),
    )
}

/// The result of a blocked call.
fn blocked(guard: &Match) -> CallToolResult {
    let mut r = CallToolResult::error(vec![ContentBlock::text(format!(
        "🚫 BLOCKED: {}",
        guard.message
    ))]);
    r.structured_content = Some(json!({"code": "BLOCKED", "lesson": guard.key}));
    r
}

/// The text block put before a result's content: one line per hint.
fn hint_text(hints: &[&Match]) -> String {
    hints
        .iter()
        .map(|h| format!("💡 LESSON ({}): {}", h.key, h.message))
        .collect::<Vec<_>>()
        .join("\n")
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn read<T>(m: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    m.read().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn write<T>(m: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    m.write().unwrap_or_else(std::sync::PoisonError::into_inner)
}
