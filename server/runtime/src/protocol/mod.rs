//! The MCP surface: an rmcp [`ServerHandler`] over the [`Engine`].
//!
//! Tool metadata is converted to rmcp's types once at start-up. Calls run on tokio's blocking
//! pool so SQLite never stalls the async runtime. Following MCP 2025-11-25, a tool that ran and
//! failed, or whose arguments failed validation, is a tool result with `isError`; an unknown
//! tool or arguments that are not an object is a protocol error. A failure the spec declares
//! under `errors:` is a JSON-RPC error with the declared code. Before a tool with a
//! confirmation rule runs, a client that declared the elicitation capability is asked to let
//! the person confirm; a decline or cancel aborts the call with nothing changed. A proxy's
//! re-exported downstream tools are listed after the server's own and their calls go to
//! [`Proxy::call`].

// Logging, sampling and `resources/subscribe` are deprecated by SEP-2577 in rmcp, but they are
// the current protocol (2025-11-25) that clients speak.
#![allow(deprecated)]

pub(crate) mod admission;
#[cfg(all(test, feature = "sqlite"))]
mod in_process;
pub mod jsonrpc;
mod tasks;
mod team_tasks;
mod traced;

pub use admission::BLOCKING_THREADS;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams,
    CompleteRequestParams, CompleteResult, ContentBlock, ElicitRequestParams, ElicitationSchema,
    ErrorCode, ErrorData, GetPromptRequestParams, GetPromptResponse, GetTaskParams, GetTaskResult,
    Implementation, InputRequiredResult, ListPromptsResult, ListResourceTemplatesResult,
    ListResourcesResult, ListToolsResult, PaginatedRequestParams, ProgressNotificationParam,
    Prompt, PromptsCapability, ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult,
    Resource, ResourceTemplate, ResourceUpdatedNotificationParam, ResourcesCapability,
    ServerCapabilities, ServerConfig, SetLevelRequestParams, SubscribeRequestParams,
    SubscriptionFilter, Tool, ToolAnnotations, UnsubscribeRequestParams, UpdateTaskParams,
};
use rmcp::service::{NotificationContext, Peer, RequestContext, SubscriptionContext};
use rmcp::{RoleServer, ServerHandler};
use serde_json::{Map, Value, json};

use crate::confirm::{Call, Confirmation, Confirmer, Round};
use crate::def::{ServerDef, TaskSupport};
use crate::engine::{CallError, Engine};
use crate::handler::{ClientLink, Input, Link, LogLevel, Question, Unanswered};
use crate::proxy::Proxy;

/// Cheap to clone: each HTTP session gets a clone sharing the engine and the tool list.
#[derive(Clone)]
pub struct McpServer {
    /// The engine and the lists it publishes; `mcpspec dev` replaces them on each edit.
    live: Arc<Live>,
    config: ServerConfig,
    /// The downstream servers and interceptor of a proxy spec.
    proxy: Option<Arc<Proxy>>,
    /// The session's state that handlers reach through their [`ClientLink`].
    session: Arc<Session>,
    /// Asks the person before destructive calls; shared by every session of the process.
    confirmer: Arc<Confirmer>,
    /// The calls running as tasks (the tasks extension); shared by every session.
    tasks: tasks::Tasks,
    /// How many calls of each tool may run at once; shared by every session.
    admission: Arc<admission::Admission>,
    /// The transport's shutdown, which ends listen streams and abandons calls still running.
    shutdown: crate::shutdown::Shutdown,
}

/// The longest URI a session may subscribe to.
const MAX_URI_BYTES: usize = 8 * 1024;

/// The most resources one session subscribes to.
const MAX_SUBSCRIPTIONS: usize = 1024;

/// What one client session set: its log level and its resource subscriptions, and the proxy's
/// hints it was already given (each at most once per session).
struct Session {
    /// The session's number in this process, which its tasks are bound to.
    id: u64,
    /// Log messages below this level are not sent; `info` until the client sets one.
    level: Mutex<LogLevel>,
    subscriptions: Mutex<BTreeSet<String>>,
    hints: Mutex<std::collections::HashSet<String>>,
}

impl Default for Session {
    fn default() -> Session {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        Session {
            id: NEXT.fetch_add(1, Ordering::Relaxed),
            level: Mutex::new(LogLevel::Info),
            subscriptions: Mutex::new(BTreeSet::new()),
            hints: Mutex::default(),
        }
    }
}

/// One version of a server: its engine and the tools, resources, templates and prompts it
/// publishes.
pub struct Surface {
    pub engine: Arc<Engine>,
    /// The tools `serve --toolset` offers; every tool of the engine's when `None`.
    offered: Option<Arc<BTreeSet<String>>>,
    tools: Vec<Tool>,
    /// The tools as listed to clients of protocol 2025-11-25: without top-level composition.
    portable: Vec<Tool>,
    resources: Vec<Resource>,
    templates: Vec<ResourceTemplate>,
    prompts: Vec<Prompt>,
}

impl Surface {
    /// The surface of `engine`; with `toolsets`, only the tools of those of its definition's
    /// toolsets (a name the definition no longer has offers none).
    fn of(engine: Arc<Engine>, toolsets: Option<&[String]>) -> Surface {
        let def = engine.def;
        let offered: Option<Arc<BTreeSet<String>>> = toolsets.map(|names| {
            let sets = def
                .toolsets
                .iter()
                .filter(|(n, _)| names.iter().any(|m| m == n));
            Arc::new(
                sets.flat_map(|(_, tools)| tools.iter().map(|t| t.to_string()))
                    .collect(),
            )
        });
        let mut tools = tools(def);
        if let Some(offered) = &offered {
            tools.retain(|t| offered.contains(t.name.as_ref()));
        }
        Surface {
            offered,
            portable: tools.iter().cloned().map(portable).collect(),
            tools,
            resources: [
                crate::content::resource_list(def),
                crate::apps::resources(def),
                crate::skills::resources(def),
            ]
            .concat(),
            templates: crate::content::template_list(def),
            prompts: crate::content::prompt_list(def),
            engine,
        }
    }

    /// Whether a call of the server's own tool `name` is offered: not when `serve --toolset`
    /// leaves it out (it is then unknown, as a tool the server does not have).
    pub fn offers(&self, name: &str) -> bool {
        self.offered.as_ref().is_none_or(|o| o.contains(name))
    }
}

/// The surface a server serves now, which a newer engine can replace while sessions go on:
/// a call keeps the surface it started with. It also tells every `subscriptions/listen`
/// stream of the process (protocol 2026-07-28) what changed.
pub struct Live {
    surface: std::sync::RwLock<Arc<Surface>>,
    changes: tokio::sync::broadcast::Sender<Change>,
    /// The toolsets `serve --toolset` and `dev --toolset` name, resolved against every
    /// version `dev` serves.
    toolsets: std::sync::OnceLock<Vec<String>>,
}

/// What a listen stream hears of.
#[derive(Debug, Clone, PartialEq)]
enum Change {
    /// A new version of the server: its tools, resources and prompts may differ.
    Lists,
    /// The proxy's downstream tools changed.
    Tools,
    /// A call wrote to the database: any resource may read differently.
    Written,
    /// A handler said that this resource changed.
    Updated(String),
}

impl Live {
    fn new(engine: Arc<Engine>) -> Live {
        Live {
            surface: std::sync::RwLock::new(Arc::new(Surface::of(engine, None))),
            // A stream more than this many changes behind skips to the newest.
            changes: tokio::sync::broadcast::channel(64).0,
            toolsets: std::sync::OnceLock::new(),
        }
    }

    /// Offers only the tools of the toolsets `names` from now on (`--toolset`), before any
    /// client is served.
    pub fn offer_only(&self, names: Vec<String>) {
        let _ = self.toolsets.set(names);
        self.replace(self.now().engine.clone());
    }

    /// The surface now.
    pub fn now(&self) -> Arc<Surface> {
        self.surface
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Serves `engine` from the next request on.
    pub fn replace(&self, engine: Arc<Engine>) {
        let next = Arc::new(Surface::of(engine, self.toolsets.get().map(Vec::as_slice)));
        *self
            .surface
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = next;
        self.changed(Change::Lists);
    }

    /// Tells the listen streams; none listening is fine.
    fn changed(&self, change: Change) {
        let _ = self.changes.send(change);
    }
}

fn schema_object(text: &str) -> Arc<Map<String, Value>> {
    match serde_json::from_str(text) {
        Ok(Value::Object(o)) => Arc::new(o),
        _ => Arc::new(Map::new()),
    }
}

/// Input-schema keywords that combine or condition subschemas at the top level.
const COMPOSITION: [&str; 7] = ["anyOf", "oneOf", "allOf", "not", "if", "then", "else"];

/// The property keyword that mirrors an argument into an `Mcp-Param-*` HTTP header.
const HEADER_KEY: &str = "x-mcp-header";

/// A tool as listed to a client of protocol 2025-11-25: the Anthropic API and Claude Code
/// reject an input schema with top-level composition, so it is left out (the server still
/// enforces it when the tool is called), and so is `x-mcp-header`, which only 2026-07-28
/// clients act on. Protocol 2026-07-28 keeps JSON Schema 2020-12 whole (SEP-2106).
fn portable(mut tool: Tool) -> Tool {
    let headers = |s: &Map<String, Value>| {
        s.get("properties")
            .and_then(Value::as_object)
            .is_some_and(|p| p.values().any(|p| p.get(HEADER_KEY).is_some()))
    };
    let schema = &tool.input_schema;
    if COMPOSITION.iter().any(|k| schema.contains_key(*k)) || headers(schema) {
        let mut schema = (**schema).clone();
        schema.retain(|k, _| !COMPOSITION.contains(&k.as_str()));
        if let Some(Value::Object(props)) = schema.get_mut("properties") {
            for p in props.values_mut().filter_map(Value::as_object_mut) {
                p.remove(HEADER_KEY);
            }
        }
        tool.input_schema = Arc::new(schema);
    }
    tool
}

/// The tools of a server as MCP publishes them.
pub fn tools(def: &ServerDef) -> Vec<Tool> {
    def.tools
        .iter()
        .map(|t| {
            let mut a = ToolAnnotations::new()
                .read_only(t.annotations.read_only)
                .destructive(t.annotations.destructive)
                .idempotent(t.annotations.idempotent);
            a.open_world_hint = Some(t.annotations.open_world);
            if let Some(title) = t.title {
                a.title = Some(title.to_string());
            }
            let mut tool =
                Tool::new(t.name, t.description, schema_object(t.input_schema)).with_annotations(a);
            // A tool whose result is content blocks publishes no output schema.
            if !t.content {
                tool = tool.with_raw_output_schema(schema_object(t.output_schema));
            }
            if let Some(title) = t.title {
                tool = tool.with_title(title);
            }
            if let Some(meta) = crate::apps::tool_meta(def, t) {
                tool = tool.with_meta(meta);
            }
            if !t.icons.is_empty() {
                tool = tool.with_icons(t.icons.iter().map(icon).collect());
            }
            tool
        })
        .collect()
}

/// An icon as MCP publishes it.
fn icon(i: &crate::def::IconDef) -> rmcp::model::Icon {
    let mut icon = rmcp::model::Icon::new(i.src);
    icon.mime_type = i.mime_type.map(str::to_string);
    icon.sizes = (!i.sizes.is_empty()).then(|| i.sizes.iter().map(|s| s.to_string()).collect());
    icon.theme = i.theme.map(|t| match t {
        "dark" => rmcp::model::IconTheme::Dark,
        _ => rmcp::model::IconTheme::Light,
    });
    icon
}

impl McpServer {
    /// Asks the person before a call with a confirmation rule: `None` to go ahead, or the
    /// answer to send instead (the question, or the declined or timed-out result).
    async fn confirm_first(
        &self,
        context: &RequestContext<RoleServer>,
        name: &str,
        arguments: Option<&Value>,
        round: Option<&Round>,
    ) -> Option<Result<CallToolResponse, ErrorData>> {
        let now = self.now();
        let engine = &now.engine;
        let question = engine.confirmation(name, arguments)?;
        let stopped = match self.confirmer.confirm(context, round, question).await {
            Confirmation::Go => return None,
            Confirmation::Ask(input) => return Some(Ok((*input).into())),
            Confirmation::Stop(action) => engine.declined(name, action),
            Confirmation::TimedOut(after) => engine.unconfirmed(name, after),
        };
        tracing::info!(target: "mcpspec::call", tool = %crate::logsafe::quoted(name), outcome = "DECLINED", "call");
        Some(to_result(Err(stopped), engine.def).map(Into::into))
    }

    /// The way a call's handler reaches its client.
    fn link(
        &self,
        context: &RequestContext<RoleServer>,
        round: Option<Round>,
        task: Option<Arc<tasks::TaskSlot>>,
    ) -> Arc<SessionLink> {
        Arc::new(SessionLink {
            task,
            peer: context.peer.clone(),
            runtime: tokio::runtime::Handle::current(),
            session: self.session.clone(),
            // A call has a round exactly when it is of protocol 2026-07-28.
            log_level: LogGate::of(context, round.is_some()),
            live: self.live.clone(),
            asked: round.map(|round| Asked::new(round, context)),
        })
    }

    /// Protocol 2026-07-28: the round of the call, from the `requestState` and the answers it
    /// carries; invalid params when the state is not one this server issued for this call.
    fn round(
        &self,
        context: &RequestContext<RoleServer>,
        call: &Call<'_>,
    ) -> Result<Option<Round>, ErrorData> {
        if !per_request(context) {
            return Ok(None);
        }
        // Each response is a client's result (to elicitation, sampling or roots): an object.
        let mut responses = call.responses.into_iter().flatten();
        if let Some((key, _)) = responses.find(|(_, r)| !r.is_object()) {
            return Err(ErrorData::invalid_params(
                format!(
                    "invalid params for {}: `inputResponses.{key}` must be an object (the client's result to the request under that key)",
                    call.method
                ),
                Some(json!({"field": format!("inputResponses.{key}")})),
            ));
        }
        self.confirmer.round(call).map(Some).map_err(|why| {
            tracing::warn!(method = %crate::logsafe::quoted(call.method), name = %crate::logsafe::quoted(call.name), reason = %why, "refused a requestState that is not valid");
            ErrorData::invalid_params(
                format!(
                    "invalid params for {}: `requestState` is not one this server issued for this request ({why}); send the request again without it",
                    call.method
                ),
                Some(json!({"field": "requestState"})),
            )
        })
    }

    /// A server whose tools include a proxy's re-exported downstream tools. Such a server
    /// announces `tools.listChanged`, since a restarted downstream may bring other tools.
    pub fn with_proxy(engine: Arc<Engine>, proxy: Option<Arc<Proxy>>) -> Self {
        let def = engine.def;
        let mut implementation = Implementation::new(def.name, def.version);
        implementation.title = def.title.map(str::to_string);
        // Resources, prompts and completion are advertised only when the spec declares them;
        // a proxy's tool list changes as its downstreams come and go.
        let mut capabilities = if proxy.is_some() {
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build()
        } else {
            ServerCapabilities::builder().enable_tools().build()
        };
        if !def.resources.is_empty() {
            // Subscribers hear of changes made by write tools and by handlers.
            let mut resources = ResourcesCapability::default();
            resources.subscribe = Some(true);
            capabilities.resources = Some(resources);
        }
        // Handlers may log to the client, so a server with handler tools takes a log level.
        if def
            .tools
            .iter()
            .any(|t| matches!(t.binding, crate::def::BindingDef::Handler))
        {
            capabilities.logging = Some(Map::new());
        }
        if !def.prompts.is_empty() {
            capabilities.prompts = Some(PromptsCapability::default());
        }
        if crate::content::has_completions(def) {
            capabilities.completions = Some(Map::new());
        }
        if def.tools.iter().any(|t| t.task.is_some()) {
            enable_tasks(&mut capabilities);
        }
        if !def.skills.is_empty() {
            enable_skills(&mut capabilities);
        }
        // An app's view is read as a resource.
        if crate::apps::any(def) {
            capabilities
                .resources
                .get_or_insert_with(ResourcesCapability::default);
        }
        let mut config = ServerConfig::new(capabilities).with_server_info(implementation);
        if let Some(i) = def.instructions {
            config = config.with_instructions(i);
        }
        let confirmer = Arc::new(Confirmer::new(engine.limits().confirm_timeout));
        let tasks = task_store(&engine);
        let live = Arc::new(Live::new(engine));
        if let Some(p) = &proxy {
            forward_tool_changes(p, &live);
        }
        McpServer {
            confirmer,
            tasks,
            admission: Arc::default(),
            shutdown: crate::shutdown::Shutdown::default(),
            live,
            config,
            proxy,
            session: Arc::new(Session::default()),
        }
    }

    /// A server whose definition may change while it serves (`mcpspec dev`): it announces
    /// every capability a spec can have, each list with `listChanged`, since an edit may add
    /// tools, resources or prompts the first version did not have. A proxy stays the one it
    /// started with.
    pub fn changing(engine: Arc<Engine>, proxy: Option<Arc<Proxy>>) -> Self {
        let mut server = McpServer::with_proxy(engine, proxy);
        let mut capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_prompts()
            .enable_prompts_list_changed()
            .enable_completions()
            .enable_logging()
            .build();
        let mut resources = ResourcesCapability::default();
        resources.subscribe = Some(true);
        resources.list_changed = Some(true);
        capabilities.resources = Some(resources);
        enable_tasks(&mut capabilities);
        enable_skills(&mut capabilities);
        server.config.capabilities = capabilities;
        server
    }

    /// The same server sealing its `requestState`s with `key` (32 bytes or more) instead of a
    /// key of its own: replicas behind one address accept each other's states. They record
    /// the states they redeem in `ledger` when given (a directory they share), else in the
    /// database they share when it is a database server's. The key seals the cursors of paged
    /// tools too, for the whole process.
    pub fn with_request_state_key(
        mut self,
        key: Vec<u8>,
        ledger: Option<crate::confirm::Ledger>,
    ) -> Self {
        let engine = self.now().engine.clone();
        let timeout = engine.limits().confirm_timeout;
        // The database is asked on a thread of its own: this may run on an async runtime.
        let ledger = ledger.or_else(|| {
            std::thread::scope(|s| s.spawn(|| engine.state_ledger()).join().ok().flatten())
        });
        // The same key seals the cursors of paged tools: a replica reads on from another's.
        crate::cursor::share_key(key.clone());
        self.confirmer = Arc::new(Confirmer::with_key(timeout, key, ledger));
        self
    }

    /// The surface the server serves, replaceable while it serves.
    /// The shutdown this server's calls and listen streams follow; the transport drives it.
    pub fn shutdown(&self) -> crate::shutdown::Shutdown {
        self.shutdown.clone()
    }

    /// The threads this server's calls run on, for the transports' own hand-offs.
    #[cfg(feature = "http")]
    pub(crate) fn call_threads(&self) -> Arc<admission::Admission> {
        self.admission.clone()
    }

    pub fn live(&self) -> Arc<Live> {
        self.live.clone()
    }

    fn now(&self) -> Arc<Surface> {
        self.live.now()
    }

    /// The same server for another client session (Streamable HTTP serves many): it shares
    /// the engine, the tools and the proxy, and starts with its own log level, subscriptions
    /// and injected hints.
    #[cfg(feature = "http")]
    pub fn for_new_session(&self) -> McpServer {
        McpServer {
            session: Arc::new(Session::default()),
            ..self.clone()
        }
    }
}

/// Tells the listen streams of each change of the proxy's tools, as long as the server lives.
fn forward_tool_changes(proxy: &Proxy, live: &Arc<Live>) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let mut changes = proxy.changes();
    let live = Arc::downgrade(live);
    runtime.spawn(async move {
        loop {
            match changes.recv().await {
                Ok(()) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
            }
            let Some(live) = live.upgrade() else { return };
            live.changed(Change::Tools);
        }
    });
}

/// Where the server keeps its tasks: in the database a team of replicas shares when it has
/// mcpspec's task table and the spec has tools that run as tasks, else in memory. The
/// database is asked on a thread of its own: this may run on an async runtime.
fn task_store(engine: &Arc<Engine>) -> tasks::Tasks {
    if !engine.def.tools.iter().any(|t| t.task.is_some()) {
        return tasks::Tasks::default();
    }
    let table = std::thread::scope(|s| s.spawn(|| engine.task_table()).join().ok().flatten());
    table.map_or_else(tasks::Tasks::default, tasks::Tasks::shared)
}

/// Advertises the skills extension (`io.modelcontextprotocol/skills`, SEP-2640) with
/// `resources/directory/read`, and the resources capability its files are read through.
fn enable_skills(capabilities: &mut ServerCapabilities) {
    let settings = serde_json::to_value(rmcp::model::SkillsCapability::new().with_directory_read());
    if let Ok(Value::Object(settings)) = settings {
        capabilities
            .extensions
            .get_or_insert_with(Default::default)
            .insert(rmcp::model::SKILLS_EXTENSION_ID.to_string(), settings);
    }
    capabilities
        .resources
        .get_or_insert_with(ResourcesCapability::default);
}

/// Advertises the tasks extension (`io.modelcontextprotocol/tasks`).
fn enable_tasks(capabilities: &mut ServerCapabilities) {
    capabilities
        .extensions
        .get_or_insert_with(Default::default)
        .insert(rmcp::model::TASKS_EXTENSION_ID.to_string(), Map::new());
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A handler's way to its client, over the session's peer. The handler runs on tokio's
/// blocking pool: each method hands its future to the runtime and blocks this thread (not the
/// runtime) until it completed, so notifications reach the client before the call's result.
struct SessionLink {
    peer: Peer<RoleServer>,
    runtime: tokio::runtime::Handle,
    session: Arc<Session>,
    /// Which log messages reach the client.
    log_level: LogGate,
    /// Where changes go to the listen streams.
    live: Arc<Live>,
    /// Protocol 2026-07-28: the answers the call came with and the questions it asks.
    asked: Option<Asked>,
    /// How the call becomes a task, when its tool may run as one for this client.
    task: Option<Arc<tasks::TaskSlot>>,
}

/// A call of protocol 2026-07-28 asks the client by answering `input_required`: the answers
/// so far, the capabilities the request's `_meta` declares, and what the handler asked that
/// has no answer yet.
struct Asked {
    round: Round,
    capabilities: rmcp::model::ClientCapabilities,
    questions: Mutex<std::collections::BTreeMap<String, rmcp::model::InputRequest>>,
    missing: Mutex<Option<&'static str>>,
}

impl Asked {
    fn new(round: Round, context: &RequestContext<RoleServer>) -> Asked {
        Asked {
            round,
            capabilities: context.meta.client_capabilities().unwrap_or_default(),
            questions: Mutex::default(),
            missing: Mutex::default(),
        }
    }

    /// The answers to `questions` when the call has them all; otherwise records the others
    /// for the `input_required` result.
    fn ask(&self, questions: Vec<Question>) -> Result<Map<String, Value>, Unanswered> {
        let mut answers = Map::new();
        let mut open = Vec::new();
        for q in questions {
            match self.round.answers.get(&q.key) {
                Some(a) => {
                    answers.insert(q.key, a.clone());
                }
                None => open.push(q),
            }
        }
        if open.is_empty() {
            return Ok(answers);
        }
        for q in &open {
            let capability = q.input.capability();
            if !declares(&self.capabilities, capability) {
                *lock(&self.missing) = Some(capability);
                return Err(Unanswered::NoCapability(capability));
            }
        }
        lock(&self.questions).extend(input_requests(open)?);
        Err(Unanswered::Later)
    }

    /// What the call answers instead of its result, if the handler asked: -32021 for a
    /// capability the client did not declare, or the questions with a sealed state.
    fn answer(&self, confirmer: &Confirmer) -> Option<Result<InputRequiredResult, ErrorData>> {
        if let Some(capability) = *lock(&self.missing) {
            let required = serde_json::from_value(json!({ capability: {} })).unwrap_or_default();
            return Some(Err(ErrorData::missing_required_client_capability(required)));
        }
        let questions = std::mem::take(&mut *lock(&self.questions));
        if questions.is_empty() {
            return None;
        }
        Some(Ok(confirmer.issue(&self.round, questions)))
    }
}

/// A question as the request MCP sends for it.
fn input_request(input: &Input) -> Result<rmcp::model::InputRequest, String> {
    let request = match input {
        Input::Elicit { message, schema } => json!({
            "method": "elicitation/create",
            "params": {"mode": "form", "message": message, "requestedSchema": schema},
        }),
        Input::Sample(params) => json!({"method": "sampling/createMessage", "params": params}),
        Input::Roots => json!({"method": "roots/list"}),
    };
    serde_json::from_value(request).map_err(|e| format!("invalid request: {e}"))
}

/// The questions as the input requests MCP sends for them, under their keys.
fn input_requests(
    questions: Vec<Question>,
) -> Result<Vec<(String, rmcp::model::InputRequest)>, Unanswered> {
    questions
        .into_iter()
        .map(|q| Ok((q.key, input_request(&q.input).map_err(Unanswered::Failed)?)))
        .collect()
}

/// Whether a request is of protocol 2026-07-28 or later, where each request carries the
/// client's version, capabilities and log level in `_meta` and the server asks the client
/// only through `input_required` results.
fn per_request(context: &RequestContext<RoleServer>) -> bool {
    context
        .meta
        .protocol_version()
        .is_some_and(|v| v.to_string().as_str() >= "2026-07-28")
}

/// Method not found for a method protocol 2026-07-28 removed, asked by a request of that
/// protocol (on any transport); requests of 2025-11-25 sessions are served as before.
fn removed_in_2026(method: &str, context: &RequestContext<RoleServer>) -> Result<(), ErrorData> {
    if per_request(context) {
        return Err(ErrorData::new(
            ErrorCode::METHOD_NOT_FOUND,
            format!(
                "method not found: {} was removed in protocol 2026-07-28",
                crate::transform::quote(method)
            ),
            Some(json!({"method": method})),
        ));
    }
    Ok(())
}

/// Which log messages of a call reach the client.
enum LogGate {
    /// Protocol 2025-11-25: the level the session set with `logging/setLevel` (`info` before).
    Session,
    /// Protocol 2026-07-28: the level the request carries in `_meta`
    /// (`io.modelcontextprotocol/logLevel`); a request without one gets no log messages.
    Request(Option<LogLevel>),
}

impl LogGate {
    /// The gate of a call; `per_request` for a call of protocol 2026-07-28.
    fn of(context: &RequestContext<RoleServer>, per_request: bool) -> LogGate {
        if !per_request {
            return LogGate::Session;
        }
        LogGate::Request(
            context
                .meta
                .log_level()
                .and_then(|l| serde_json::from_value(json!(l)).ok()),
        )
    }
}

impl SessionLink {
    fn wait<T: Send + 'static>(
        &self,
        f: impl std::future::Future<Output = T> + Send + 'static,
    ) -> Option<T> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.runtime.spawn(async move {
            let _ = tx.send(f.await);
        });
        rx.blocking_recv().ok()
    }
}

/// Protocol 2025-11-25: requests to the client over the session, each answer as JSON.
impl SessionLink {
    /// Whether the client declared `capability`: in the request's `_meta` (2026-07-28) or
    /// in `initialize`.
    fn can(&self, capability: &str) -> bool {
        match &self.asked {
            Some(asked) => declares(&asked.capabilities, capability),
            // A 2025-11-25 client may offer URL elicitation only; a handler's forms need forms.
            None if capability == "elicitation" => {
                !self.peer.supported_elicitation_modes().is_empty()
            }
            None => self
                .peer
                .peer_info()
                .is_some_and(|i| declares(&i.capabilities, capability)),
        }
    }

    fn sample(&self, params: Value) -> Result<Value, Unanswered> {
        if !self.can("sampling") {
            return Err(Unanswered::NoCapability("sampling"));
        }
        let params: rmcp::model::CreateMessageRequestParams = serde_json::from_value(params)
            .map_err(|e| Unanswered::Failed(format!("invalid request: {e}")))?;
        let peer = self.peer.clone();
        answered(self.wait(async move { peer.create_message(params).await }))
    }

    fn elicit(&self, message: &str, schema: Value) -> Result<Value, Unanswered> {
        if !self.can("elicitation") {
            return Err(Unanswered::NoCapability("elicitation"));
        }
        let schema: ElicitationSchema = serde_json::from_value(schema)
            .map_err(|e| Unanswered::Failed(format!("invalid form schema: {e}")))?;
        let params = ElicitRequestParams::FormElicitationParams {
            meta: None,
            message: message.to_string(),
            requested_schema: schema,
        };
        let peer = self.peer.clone();
        answered(self.wait(async move { peer.create_elicitation(params).await }))
    }

    fn roots(&self) -> Result<Value, Unanswered> {
        if !self.can("roots") {
            return Err(Unanswered::NoCapability("roots"));
        }
        let peer = self.peer.clone();
        answered(self.wait(async move { peer.list_roots().await }))
    }
}

/// Whether `c` declares `capability` (`sampling`, `elicitation`, `roots`, or any other key).
fn declares(c: &rmcp::model::ClientCapabilities, capability: &str) -> bool {
    match capability {
        "elicitation" => c.elicitation.is_some(),
        "sampling" => c.sampling.is_some(),
        "roots" => c.roots.is_some(),
        other => serde_json::to_value(c).is_ok_and(|c| c.get(other).is_some()),
    }
}

/// A client's answer to a request as JSON: why not, when the request failed or the session
/// ended first.
fn answered<T: serde::Serialize>(
    result: Option<Result<T, rmcp::ServiceError>>,
) -> Result<Value, Unanswered> {
    let result = result
        .ok_or_else(ended)?
        .map_err(|e| Unanswered::Failed(e.to_string()))?;
    serde_json::to_value(result).map_err(|e| Unanswered::Failed(e.to_string()))
}

fn ended() -> Unanswered {
    Unanswered::Failed("the session ended".into())
}

impl ClientLink for SessionLink {
    fn log(&self, level: LogLevel, logger: Option<&str>, data: Value) {
        let least = match self.log_level {
            LogGate::Session => *lock(&self.session.level),
            LogGate::Request(Some(least)) => least,
            LogGate::Request(None) => return,
        };
        if level < least {
            return;
        }
        let Ok(level) = serde_json::from_value(json!(level)) else {
            return;
        };
        let mut param = rmcp::model::LoggingMessageNotificationParam::new(level, data);
        param.logger = logger.map(str::to_string);
        let peer = self.peer.clone();
        let _ = self.wait(async move { peer.notify_logging_message(param).await });
    }

    fn ask(&self, questions: Vec<Question>) -> Result<Map<String, Value>, Unanswered> {
        if let Some(task) = self.task.as_ref().and_then(|t| t.context()) {
            if let Some(q) = questions.iter().find(|q| !self.can(q.input.capability())) {
                return Err(Unanswered::NoCapability(q.input.capability()));
            }
            let (task, requests) = (task.clone(), input_requests(questions)?);
            return self.wait(tasks::ask(task, requests)).ok_or_else(ended)?;
        }
        if let Some(asked) = &self.asked {
            return asked.ask(questions);
        }
        let mut answers = Map::new();
        for q in questions {
            let answer = match q.input {
                Input::Sample(params) => self.sample(params)?,
                Input::Elicit { message, schema } => self.elicit(&message, schema)?,
                Input::Roots => self.roots()?,
            };
            answers.insert(q.key, answer);
        }
        Ok(answers)
    }

    fn supports(&self, capability: &str) -> bool {
        self.can(capability)
    }

    fn background(&self) -> bool {
        self.task.as_ref().is_some_and(|t| t.background())
    }

    fn resource_updated(&self, uri: &str) {
        self.live.changed(Change::Updated(uri.to_string()));
        if !lock(&self.session.subscriptions).contains(uri) {
            return;
        }
        let peer = self.peer.clone();
        let param = ResourceUpdatedNotificationParam::new(uri);
        let _ = self.wait(async move { peer.notify_resource_updated(param).await });
    }
}

/// A call's outcome as an MCP tool result, or a protocol error.
pub fn to_result(
    outcome: Result<crate::engine::Success, CallError>,
    def: &ServerDef,
) -> Result<CallToolResult, ErrorData> {
    match outcome {
        Ok(s) if s.content => {
            let blocks: Vec<ContentBlock> = serde_json::from_value(s.structured).map_err(|e| {
                tracing::error!(error = %e, "a content result is not MCP content");
                ErrorData::internal_error("the tool's content is malformed", None)
            })?;
            Ok(CallToolResult::success(blocks))
        }
        Ok(s) => Ok(CallToolResult::structured(s.structured)),
        Err(CallError::Tool(e)) => Ok(CallToolResult::error(vec![ContentBlock::text(
            e.to_json().to_string(),
        )])),
        Err(CallError::UnknownTool(name)) => {
            Err(unknown_tool(&name, def.tools.iter().map(|t| t.name)))
        }
        Err(CallError::MalformedArguments(m)) => {
            Err(ErrorData::new(ErrorCode::INVALID_PARAMS, m, None))
        }
        Err(CallError::Rpc(e)) => Err(ErrorData::new(ErrorCode(e.code), e.message, Some(e.data))),
    }
}

/// The protocol error of a call of `name`, a tool the server does not offer, listing those it
/// does.
fn unknown_tool<'a>(name: &str, available: impl Iterator<Item = &'a str>) -> ErrorData {
    let available: Vec<&str> = available.collect();
    let name = crate::transform::quote(name);
    ErrorData::new(
        ErrorCode::INVALID_PARAMS,
        format!("unknown tool: {name}"),
        Some(json!({"tool": name, "available": available})),
    )
}

/// Runs content work that may touch SQLite on tokio's blocking pool.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, crate::content::ContentError> + Send + 'static,
) -> Result<T, ErrorData> {
    let carry = crate::telemetry::Carry::current();
    match tokio::task::spawn_blocking(move || {
        let _cx = carry.attach();
        f()
    })
    .await
    {
        Ok(r) => r.map_err(ErrorData::from),
        Err(e) => {
            tracing::error!(error = %e, "a content request panicked");
            Err(ErrorData::internal_error(
                "the request failed inside the server; details are in the server log",
                None,
            ))
        }
    }
}

/// [`blocking`] answered by `within`: a resource read or completion that runs longer is
/// answered with an error at once (its statements, a handler's among them, stop at the same
/// deadline).
async fn blocking_within<T: Send + 'static>(
    within: std::time::Duration,
    f: impl FnOnce() -> Result<T, crate::content::ContentError> + Send + 'static,
) -> Result<T, ErrorData> {
    tokio::time::timeout(within, blocking(f))
        .await
        .unwrap_or_else(|_| {
            Err(ErrorData::internal_error(
                format!(
                    "the request took longer than {} ms and was stopped",
                    within.as_millis()
                ),
                None,
            ))
        })
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        self.config.clone()
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let span = traced::start("tools/list", None, &context);
        span.run(async move {
            let now = self.now();
            let mut tools = if per_request(&context) {
                now.tools.clone()
            } else {
                now.portable.clone()
            };
            if let Some(p) = &self.proxy {
                tools.extend(p.tools());
            }
            Ok(ListToolsResult::with_all_items(tools))
        })
        .await
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let span = traced::start("resources/list", None, &context);
        span.run(async move {
            Ok(ListResourcesResult::with_all_items(
                self.now().resources.clone(),
            ))
        })
        .await
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        let span = traced::start("resources/templates/list", None, &context);
        span.run(async move {
            Ok(ListResourceTemplatesResult::with_all_items(
                self.now().templates.clone(),
            ))
        })
        .await
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        // The URI is not a span attribute (any number of them), but the workbench shows it.
        let span = traced::start("resources/read", None, &context).showing(&request.uri);
        span.run(async move {
            let engine = self.now().engine.clone();
            let uri = request.uri;
            if crate::apps::owns(&uri) {
                return crate::apps::read(engine.def, &uri)
                    .map(|c| ReadResourceResult::new(vec![c]).into())
                    .ok_or_else(|| crate::content::ContentError::ResourceNotFound(uri).into());
            }
            if crate::skills::owns(&uri) {
                return crate::skills::read(engine.def, &uri)
                    .map(|c| ReadResourceResult::new(vec![c]).into())
                    .ok_or_else(|| no_skill_file(&uri));
            }
            let within = engine.limits().call_timeout;
            let contents =
                blocking_within(within, move || crate::content::read(&engine, &uri)).await?;
            Ok(ReadResourceResult::new(vec![contents]).into())
        })
        .await
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let span = traced::start("prompts/list", None, &context);
        span.run(async move {
            Ok(ListPromptsResult::with_all_items(
                self.now().prompts.clone(),
            ))
        })
        .await
    }

    /// Renders a prompt; one that asks the person first does so the way a handler's
    /// questions are asked (protocol 2026-07-28: an `input_required` result, then the retry).
    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let span = traced::start("prompts/get", self.target_prompt(&request.name), &context);
        span.run(async move {
            let engine = self.now().engine.clone();
            let prompt = crate::content::prompt(engine.def, &request.name)?;
            let arguments = request.arguments.map(Value::Object);
            let call = Call {
                method: "prompts/get",
                name: prompt.name,
                arguments: arguments.as_ref(),
                request_state: request.request_state.as_deref(),
                responses: request.input_responses.as_ref(),
            };
            let round = self.round(&context, &call)?;
            let link = self.link(&context, round, None);
            let asker = link.clone();
            let rendered = blocking(move || {
                let Some(answers) = crate::questions::answers(prompt, asker.as_ref())? else {
                    return Ok(None);
                };
                let arguments = arguments.as_ref().and_then(Value::as_object);
                crate::content::get_prompt(&engine, prompt, arguments, answers).map(Some)
            })
            .await?;
            match rendered {
                Some(result) => Ok(result.into()),
                None => match link.asked.as_ref().and_then(|a| a.answer(&self.confirmer)) {
                    Some(asked) => asked.map(Into::into),
                    None => Err(ErrorData::internal_error(
                        "the prompt's questions were not recorded",
                        None,
                    )),
                },
            }
        })
        .await
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        let span = traced::start("completion/complete", None, &context);
        span.run(async move {
            let engine = self.now().engine.clone();
            let within = engine.limits().call_timeout;
            let info = blocking_within(within, move || {
                crate::content::complete(
                    &engine,
                    &request.r#ref,
                    &request.argument,
                    request.context.as_ref(),
                )
            })
            .await?;
            Ok(CompleteResult::new(info))
        })
        .await
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let span = traced::start("logging/setLevel", None, &context);
        span.run(async move {
            removed_in_2026("logging/setLevel", &context)?;
            let level: LogLevel = serde_json::from_value(json!(request.level))
                .map_err(|e| ErrorData::invalid_params(format!("unknown log level: {e}"), None))?;
            *lock(&self.session.level) = level;
            Ok(())
        })
        .await
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let span = traced::start("resources/subscribe", None, &context);
        span.run(async move {
            if self.now().engine.def.resources.is_empty() {
                return Err(ErrorData::new(
                    ErrorCode::METHOD_NOT_FOUND,
                    "this server has no resources",
                    None,
                ));
            }
            // A session's subscriptions are bounded in number and length, as all it may hold.
            let uri = request.uri;
            if uri.len() > MAX_URI_BYTES {
                return Err(ErrorData::invalid_params(
                    format!(
                        "uri is {} bytes; the longest a subscription takes is {MAX_URI_BYTES}: {}",
                        uri.len(),
                        crate::transform::quote(&uri)
                    ),
                    None,
                ));
            }
            let mut subscriptions = lock(&self.session.subscriptions);
            if subscriptions.len() >= MAX_SUBSCRIPTIONS && !subscriptions.contains(&uri) {
                return Err(ErrorData::invalid_params(
                    format!(
                        "a session subscribes to at most {MAX_SUBSCRIPTIONS} resources; unsubscribe from some first"
                    ),
                    None,
                ));
            }
            subscriptions.insert(uri);
            Ok(())
        })
        .await
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let span = traced::start("resources/unsubscribe", None, &context);
        span.run(async move {
            lock(&self.session.subscriptions).remove(&request.uri);
            Ok(())
        })
        .await
    }

    /// Protocol 2026-07-28: a listen stream gets what it asked for of what the server
    /// announces (rmcp intersects the two).
    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(requested.clone())
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let mut changes = self.live.changes.subscribe();
        loop {
            let change = tokio::select! {
                () = context.cancelled() => return Ok(()),
                // A stream never ends on its own: it ends when the server stops reading.
                () = self.shutdown.draining() => return Ok(()),
                c = changes.recv() => c,
            };
            let change = match change {
                Ok(c) => c,
                // Behind: the changes missed are told as a new version would be.
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => Change::Lists,
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return Ok(()),
            };
            if tell(context.sink(), change).await.is_err() {
                return Ok(());
            }
        }
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.now()
            .tools
            .iter()
            .find(|t| t.name == name)
            .cloned()
            .or_else(|| self.proxy.as_ref().and_then(|p| p.tool(name)))
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        // The workbench lists the session's start, with the client's name.
        if let Some(watcher) = crate::watch::recorder() {
            watcher.request(&crate::watch::SeenRequest {
                method: "initialize",
                target: None,
                client: traced::client_name(&context.peer).as_deref(),
                origin: traced::origin(&context.extensions, None),
                outcome: "ok",
                duration_ms: 0.0,
            });
        }
        if let Some(p) = &self.proxy {
            p.set_client(context.peer);
        }
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let now = self.now();
        let def = now
            .engine
            .def
            .tool(&request.name)
            .filter(|t| now.offers(t.name));
        let span = traced::start("tools/call", target_tool(def, &request.name), &context);
        span.run(async move {
            // Under `serve --toolset`, a name the surface does not offer is unknown, and the
            // error lists only the tools offered.
            if def.is_none()
                && now.offered.is_some()
                && !self.proxy.as_ref().is_some_and(|p| p.routes(&request.name))
            {
                let offered = now.tools.iter().map(|t| t.name.as_ref());
                return Err(unknown_tool(&request.name, offered));
            }
            // The server's own tools win a clash, so only other names reach the proxy.
            match &self.proxy {
                Some(p) if def.is_none() && p.routes(&request.name) => p
                    .call(
                        &request.name,
                        request.arguments,
                        context.ct.clone(),
                        &self.session.hints,
                    )
                    .await
                    .map(Into::into),
                _ => self.call_own(&now.engine, def, request, context).await,
            }
        })
        .await
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        let span = traced::start("tasks/get", None, &context);
        span.run(async move {
            self.tasks
                .get(self.owner(&context), &request.task_id)
                .await
                .map(GetTaskResult::new)
        })
        .await
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let span = traced::start("tasks/update", None, &context);
        span.run(async move {
            self.tasks
                .update(
                    self.owner(&context),
                    &request.task_id,
                    request.input_responses,
                )
                .await
        })
        .await
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let span = traced::start("tasks/cancel", None, &context);
        span.run(async move {
            self.tasks
                .cancel(self.owner(&context), &request.task_id)
                .await
        })
        .await
    }

    async fn list_skills(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListSkillsResult, ErrorData> {
        let span = traced::start("skills/list", None, &context);
        span.run(async move {
            let skills = crate::skills::list(self.now().engine.def);
            Ok(rmcp::model::ListSkillsResult::with_all_items(skills))
        })
        .await
    }

    async fn get_skill(
        &self,
        request: rmcp::model::GetSkillRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::GetSkillResult, ErrorData> {
        let span = traced::start("skills/get", None, &context);
        span.run(async move {
            crate::skills::get(self.now().engine.def, &request.uri)
                .map(rmcp::model::GetSkillResult::new)
                .ok_or_else(|| invalid_uri("no skill is served at", &request.uri))
        })
        .await
    }

    async fn read_resource_directory(
        &self,
        request: rmcp::model::ReadResourceDirectoryRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ReadResourceDirectoryResult, ErrorData> {
        let span = traced::start("resources/directory/read", None, &context);
        span.run(async move {
            let uri = request.uri;
            match crate::skills::directory(self.now().engine.def, &uri) {
                Ok(children) => Ok(ListResourcesResult::with_all_items(children)),
                Err(crate::skills::NotADirectory::File) => Err(ErrorData::invalid_params(
                    format!("{} is not a directory resource", quote(&uri)),
                    Some(json!({"uri": quote(&uri)})),
                )),
                Err(crate::skills::NotADirectory::Unknown) => {
                    Err(invalid_uri("no directory is served at", &uri))
                }
            }
        })
        .await
    }
}

/// `resources/read` of a skill file the server does not serve: invalid params, as SEP-2640
/// answers an unknown skill file.
fn no_skill_file(uri: &str) -> ErrorData {
    invalid_uri("no skill file is served at", uri)
}

/// Invalid params about `uri`, quoted (a long one shortened) in the message and the data.
fn invalid_uri(what: &str, uri: &str) -> ErrorData {
    let quoted = quote(uri);
    ErrorData::invalid_params(format!("{what} {quoted}"), Some(json!({"uri": quoted})))
}

fn quote(s: &str) -> String {
    crate::transform::quote(s)
}

/// A call's work as `call_tool` awaits it: its outcome, or [`Lost`].
type Job = std::pin::Pin<Box<dyn std::future::Future<Output = Outcome> + Send>>;

/// What a call's work came to.
type Outcome = Result<Result<crate::engine::Success, CallError>, Lost>;

/// A call's work ended without an outcome: it panicked (the panic is on stderr).
#[derive(Debug)]
struct Lost;

/// What a call's work runs with, moved to the thread that runs it (see `admission`).
struct Work {
    engine: Arc<Engine>,
    name: String,
    arguments: Option<Value>,
    /// Set when the call is cancelled or runs past its deadline.
    cancel: Arc<AtomicBool>,
    link: Link,
    /// The session it came in, for the workbench (when one watches).
    origin: Option<crate::watch::Origin>,
}

impl Work {
    /// Runs the call on this thread, to its end.
    fn run(self) -> Result<crate::engine::Success, CallError> {
        let _serving = crate::watch::serving(|| self.origin.clone());
        let arguments = self.arguments.as_ref();
        self.engine
            .call_full(&self.name, arguments, Some(self.cancel), self.link)
    }
}

/// `work` answered by `stop`'s deadline: when the deadline passes first (the time a handler
/// waits for the client's answers aside), the call's cancellation flag is set, which stops
/// its statements and tells its handler, and the outcome is `TIMEOUT`; the work goes on only
/// as long as it takes to notice. A call that `waits` for its tool's place is answered
/// `TIMEOUT` as well when its client cancels it meanwhile, and its work is dropped unrun (see
/// `admission`). When the transport abandons the calls still running at shutdown, the call is
/// answered at once in the same way.
fn bounded(
    work: tokio::sync::oneshot::Receiver<Result<crate::engine::Success, CallError>>,
    waits: bool,
    stop: crate::backend::Stop,
    shutdown: crate::shutdown::Shutdown,
    engine: Arc<Engine>,
    tool: String,
) -> Job {
    Box::pin(async move {
        tokio::select! {
            // Work that failed as its deadline passed (a statement interrupted at it) is
            // answered as the deadline answers, whichever of the two this select saw first;
            // so is work dropped unrun because it was given up while it waited.
            outcome = work => match outcome {
                Ok(Err(_)) if stop.expired() && !stop.cancel.load(Ordering::Relaxed) => {
                    Ok(Err(engine.timed_out(&tool)))
                }
                Err(_) if admission::given_up(&stop) => Ok(Err(engine.timed_out(&tool))),
                other => other.map_err(|_| Lost),
            },
            () = stop.until_expired() => {
                stop.cancel.store(true, Ordering::Relaxed);
                tracing::warn!(tool = %crate::logsafe::quoted(&tool), "a call ran, or waited for a place, past its deadline; answered TIMEOUT and told to stop");
                Ok(Err(engine.timed_out(&tool)))
            }
            () = admission::cancelled(&stop), if waits => Ok(Err(engine.timed_out(&tool))),
            () = shutdown.abandoned() => {
                stop.cancel.store(true, Ordering::Relaxed);
                Ok(Err(engine.shutting_down(&tool)))
            }
        }
    })
}

impl McpServer {
    /// A call to one of the server's own tools (`def`), or to a name it does not know, which
    /// its engine answers as such: refused at once when it must run as a task and no more
    /// fit, then its confirmation asked for when its rules say so, then its work run and
    /// answered (see [`McpServer::conclude`]).
    async fn call_own(
        &self,
        engine: &Arc<Engine>,
        def: Option<&'static crate::def::ToolDef>,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = request.name.into_owned();
        let support = def.and_then(|t| t.task);
        let as_task = tasks::eligible(support, &context)?;
        let owner = self.owner(&context);
        // A tool that runs only as a task is refused at once when no more tasks fit.
        if as_task
            && support == Some(TaskSupport::Required)
            && let Some(full) = self.tasks.refused(&owner)
        {
            return to_result(Err(CallError::Tool(full)), engine.def).map(Into::into);
        }
        let handler = def.is_some_and(|t| matches!(t.binding, crate::def::BindingDef::Handler));
        let arguments = request.arguments.map(Value::Object);
        let call = Call {
            method: "tools/call",
            name: &name,
            arguments: arguments.as_ref(),
            request_state: request.request_state.as_deref(),
            responses: request.input_responses.as_ref(),
        };
        let round = self.round(&context, &call)?;
        if let Some(stopped) = self
            .confirm_first(&context, &name, arguments.as_ref(), round.as_ref())
            .await
        {
            return stopped;
        }
        let (cancel, watcher) = cancel_flag(&context);
        // The call is answered by its deadline, whatever its work does (see `bounded`).
        let stop = engine.stop_for(&name, cancel.clone());
        let (progress, forwarder) = progress_forwarder(&context);
        // A handler's call becomes a task when the handler asks to; any other, after a while.
        let (slot, minted) = match as_task && handler {
            true => {
                let (slot, minted) = tasks::TaskSlot::new();
                (Some(slot), Some(minted))
            }
            false => (None, None),
        };
        let session_link = self.link(&context, round, slot);
        let work = Work {
            engine: engine.clone(),
            name: name.clone(),
            arguments,
            cancel: cancel.clone(),
            link: Link {
                progress,
                client: Some(session_link.clone() as Arc<dyn ClientLink>),
                slow: None,
                stop: Some(stop.clone()),
                caller: caller_of(&context),
            },
            origin: crate::watch::recorder().and_then(|_| traced::request_origin(&context)),
        };
        let job = self.job(work, stop, def);
        let ending = Ending {
            watcher,
            forwarder,
            link: session_link,
            writes: def.is_some_and(|t| t.writes),
            engine: engine.clone(),
            tool: name,
            confirmer: self.confirmer.clone(),
            cancel,
        };
        // A SQL or content call answers as usual unless it runs past the grace period.
        let after = (as_task && !handler).then(|| ending.engine.limits().task_after);
        self.conclude(job, ending, minted, after, support, owner)
            .await
    }

    /// `work` as a [`Job`] on a call's thread, answered by `stop`'s deadline (see
    /// [`bounded`]). The call of a tool the server has (`def`) takes one of its places (as
    /// many as [`Engine::at_once`] allows), or waits for one (see `admission`), which it keeps
    /// until its work ends; one that finds none by its deadline is answered as timed out. A
    /// name the server does not know takes no place: its engine answers it at once.
    fn job(
        &self,
        work: Work,
        stop: crate::backend::Stop,
        def: Option<&'static crate::def::ToolDef>,
    ) -> Job {
        let (engine, tool) = (work.engine.clone(), work.name.clone());
        let carry = crate::telemetry::Carry::current();
        let (answer, outcome) = tokio::sync::oneshot::channel();
        let run = move || {
            let _cx = carry.attach();
            let _ = answer.send(work.run());
        };
        let waits = match def {
            Some(def) => self.admission.run(&tool, engine.at_once(def), &stop, run),
            None => {
                tokio::task::spawn_blocking(run);
                false
            }
        };
        bounded(outcome, waits, stop, self.shutdown.clone(), engine, tool)
    }

    /// Answers a running call: as a task once it ran `after` (at once when zero), as a task
    /// when its handler asks to (`minted`), or with its result; a tool that runs only as a
    /// task answers with one even when its call finished first (a handler's questions, if it
    /// asked in input_required rounds, come first).
    async fn conclude(
        &self,
        mut job: Job,
        mut ending: Ending,
        minted: Option<tasks::MintRequest>,
        after: Option<std::time::Duration>,
        support: Option<TaskSupport>,
        owner: tasks::Owner,
    ) -> Result<CallToolResponse, ErrorData> {
        // The call becomes a task after a while, when its handler asks to, or not at all.
        let reply = match (after, minted) {
            (Some(after), _) if after.is_zero() => None,
            (Some(after), _) => tokio::select! {
                biased;
                outcome = &mut job => return self.answer(ending, outcome, support, owner).await,
                () = tokio::time::sleep(after) => None,
            },
            (None, Some(mut minted)) => tokio::select! {
                outcome = &mut job => return self.answer(ending, outcome, support, owner).await,
                Ok(reply) = &mut minted => Some(reply),
            },
            (None, None) => return self.answer(ending, job.await, support, owner).await,
        };
        // When no more tasks fit, a call that may run as one answers in its request (a
        // handler waiting in `ctx.background()` hears that it goes on there).
        if support != Some(TaskSupport::Required) && self.tasks.refused(&owner).is_some() {
            drop(reply);
            return self.answer(ending, job.await, support, owner).await;
        }
        ending.detach();
        let cancel = ending.cancel.clone();
        let finish = async move { ending.answer(job.await).await };
        Ok(self.tasks.mint(owner, reply, cancel, finish).await)
    }

    /// A span's target for prompt `name`, as [`McpServer::target_tool`].
    fn target_prompt(&self, name: &str) -> Option<std::borrow::Cow<'static, str>> {
        if !crate::telemetry::on() {
            return None;
        }
        let def = self.now().engine.def;
        Some(match def.prompts.iter().find(|p| p.name == name) {
            Some(p) => p.name.into(),
            None => name.to_string().into(),
        })
    }

    /// Whom a request's tasks belong to: its caller's subject (under OAuth) and its session,
    /// none for a request of protocol 2026-07-28 (there the task's random id and the subject
    /// reach it).
    fn owner(&self, context: &RequestContext<RoleServer>) -> tasks::Owner {
        let caller = caller_of(context);
        tasks::Owner::new(
            (!per_request(context)).then_some(self.session.id),
            caller.as_ref().map(|c| c.sub.as_str()),
        )
    }

    /// The answer of a call that did not become a task while it ran; a tool that runs only as
    /// a task answers with one that has already completed.
    async fn answer(
        &self,
        ending: Ending,
        outcome: Outcome,
        support: Option<TaskSupport>,
        owner: tasks::Owner,
    ) -> Result<CallToolResponse, ErrorData> {
        let cancel = ending.cancel.clone();
        match ending.answer(outcome).await {
            answer @ Ok(CallToolResponse::Complete(_))
                if support == Some(TaskSupport::Required) =>
            {
                Ok(self
                    .tasks
                    .mint(owner, None, cancel, async move { answer })
                    .await)
            }
            answer => answer,
        }
    }
}

/// What answering a call needs once its work ended: in the request, or
/// in the task it became.
struct Ending {
    /// Interrupts the call when the request is cancelled; stopped when the call becomes a
    /// task, which `tasks/cancel` interrupts instead.
    watcher: tokio::task::JoinHandle<()>,
    forwarder: Option<tokio::task::JoinHandle<()>>,
    link: Arc<SessionLink>,
    writes: bool,
    engine: Arc<Engine>,
    tool: String,
    confirmer: Arc<Confirmer>,
    /// The call's cancellation flag, which `tasks/cancel` sets once it is a task.
    cancel: Arc<AtomicBool>,
}

impl Ending {
    /// The call leaves its request (it became a task): the request's cancellation no longer
    /// reaches it.
    fn detach(&mut self) {
        self.watcher.abort();
    }

    /// The call's answer from its outcome: the questions of a handler that asked (protocol
    /// 2026-07-28), or its result; subscribers hear of a write.
    async fn answer(self, outcome: Outcome) -> Result<CallToolResponse, ErrorData> {
        let outcome = outcome.unwrap_or_else(|Lost| {
            tracing::error!(tool = %crate::logsafe::quoted(&self.tool), "a call panicked");
            Err(self.engine.internal_error(&self.tool))
        });
        self.watcher.abort();
        // The sink is dropped with the call, which ends the forwarder once it sent the rest.
        if let Some(f) = self.forwarder {
            let _ = f.await;
        }
        // A handler that asked the client (protocol 2026-07-28) stopped for the answers,
        // whatever it returned.
        if let Some(asked) = &self.link.asked
            && let Some(answer) = asked.answer(&self.confirmer)
        {
            return answer.map(Into::into);
        }
        if self.writes && outcome.is_ok() {
            self.link.live.changed(Change::Written);
            notify_subscribed(&self.link.session, &self.link.peer).await;
        }
        to_result(outcome, self.engine.def).map(Into::into)
    }
}

/// Tells the session's peer that every resource it subscribed to may have changed.
async fn notify_subscribed(session: &Session, peer: &Peer<RoleServer>) {
    let uris: Vec<String> = lock(&session.subscriptions).iter().cloned().collect();
    for uri in uris {
        let _ = peer
            .notify_resource_updated(ResourceUpdatedNotificationParam::new(uri))
            .await;
    }
}

/// The flag that interrupts a call's SQLite work, set when `notifications/cancelled` cancels
/// the request's token, and the task that watches the token.
fn cancel_flag(
    context: &RequestContext<RoleServer>,
) -> (Arc<AtomicBool>, tokio::task::JoinHandle<()>) {
    let cancel = Arc::new(AtomicBool::new(false));
    let flag = cancel.clone();
    let ct = context.ct.clone();
    let watcher = tokio::spawn(async move {
        ct.cancelled().await;
        flag.store(true, Ordering::Relaxed);
    });
    (cancel, watcher)
}

/// Sends one change to a listen stream, as the notifications its filter accepts; an error
/// only when the stream is gone.
async fn tell(
    sink: &rmcp::service::SubscriptionSink,
    change: Change,
) -> Result<(), rmcp::service::SubscriptionSendError> {
    let accepted = sink.accepted().clone();
    let mut sent = Vec::new();
    match change {
        Change::Lists => {
            if accepted.tools_list_changed == Some(true) {
                sent.push(sink.notify_tool_list_changed().await);
            }
            if accepted.prompts_list_changed == Some(true) {
                sent.push(sink.notify_prompt_list_changed().await);
            }
            if accepted.resources_list_changed == Some(true) {
                sent.push(sink.notify_resource_list_changed().await);
            }
        }
        Change::Tools => {
            if accepted.tools_list_changed == Some(true) {
                sent.push(sink.notify_tool_list_changed().await);
            }
        }
        Change::Written => {
            for uri in accepted.resource_subscriptions.unwrap_or_default() {
                sent.push(sink.notify_resource_updated(uri).await);
            }
        }
        Change::Updated(uri) => {
            if accepted
                .resource_subscriptions
                .is_some_and(|uris| uris.contains(&uri))
            {
                sent.push(sink.notify_resource_updated(uri).await);
            }
        }
    }
    match sent.into_iter().find_map(Result::err) {
        Some(e @ rmcp::service::SubscriptionSendError::SubscriptionClosed)
        | Some(e @ rmcp::service::SubscriptionSendError::Service(_)) => Err(e),
        _ => Ok(()),
    }
}

/// When the client sent a progress token: the sink handlers report progress into (from a
/// blocking thread) and the task that forwards the reports as `notifications/progress`.
fn progress_forwarder(
    context: &RequestContext<RoleServer>,
) -> (
    Option<crate::handler::ProgressSink>,
    Option<tokio::task::JoinHandle<()>>,
) {
    let Some(token) = context.meta.get_progress_token() else {
        return (None, None);
    };
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<crate::handler::Progress>();
    let peer = context.peer.clone();
    let forwarder = tokio::spawn(async move {
        while let Some(p) = rx.recv().await {
            let mut n = ProgressNotificationParam::new(token.clone(), p.done);
            if let Some(t) = p.total {
                n = n.with_total(t);
            }
            if let Some(m) = p.message {
                n = n.with_message(m);
            }
            let _ = peer.notify_progress(n).await;
        }
    });
    let sink: crate::handler::ProgressSink = Arc::new(move |p| {
        let _ = tx.send(p);
    });
    (Some(sink), Some(forwarder))
}

/// A span's target for a call of `name`: the definition's name (`def`, the tool the call
/// names), or the request's for a proxied tool; nothing when telemetry is off.
fn target_tool(
    def: Option<&'static crate::def::ToolDef>,
    name: &str,
) -> Option<std::borrow::Cow<'static, str>> {
    if !crate::telemetry::on() {
        return None;
    }
    Some(match def {
        Some(t) => t.name.into(),
        None => name.to_string().into(),
    })
}

/// The caller of a request over HTTP: the identity the transport verified from its access
/// token (see [`crate::auth`]), which rmcp hands on with the request's HTTP parts.
fn caller_of(context: &RequestContext<RoleServer>) -> Option<Arc<crate::auth::Identity>> {
    #[cfg(feature = "http")]
    {
        let parts = context.extensions.get::<http::request::Parts>()?;
        parts
            .extensions
            .get::<crate::auth::Caller>()
            .map(|c| c.0.clone())
    }
    #[cfg(not(feature = "http"))]
    {
        let _ = context;
        None
    }
}
