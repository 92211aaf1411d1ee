//! The call engine: runs one `tools/call` against a compiled [`ServerDef`].
//!
//! Per call: look the tool up, apply schema defaults, validate the arguments with a validator
//! compiled once, on the tool's first call, decode them through the generated typed binding,
//! run the statements on a pooled connection, and shape rows into the declared JSON (see
//! the `rows` module). Failures become [`CallError`]s that the MCP layer maps to tool results or
//! protocol errors.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

use crate::backend::{
    Bind, Column, Database, Dialect, Failure, Location, OpenError, Placing, Session, Sql, Stop,
    Value as SqlValue, statement_sql,
};
use crate::calllog;
pub use crate::calllog::sanitize_arguments;
use crate::def::{
    Arguments, BindingDef, EnvelopeDef, Mode, RuleKindDef, ServerDef, StatementDef, ToolDef,
};
use crate::handler::{Context, Dispatch, HandlerError, Link};
pub use crate::rows::{approx_json_size, approx_map_size};
use crate::rows::{column_json, row_json, row_order, row_text};
use crate::templates::template_name;
pub use crate::tool_error::ToolError;

mod backfill;
pub(crate) mod shown;

/// Limits applied to every call.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// The largest arguments object accepted, measured as JSON text.
    pub max_argument_bytes: usize,
    /// How long one call may run before its query is interrupted, unless the tool says.
    pub call_timeout: Duration,
    /// The largest result returned, measured as JSON text; `many` results are cut to fit and
    /// flagged `truncated`, other results over it are a `RESULT_TOO_LARGE` error.
    pub max_result_bytes: usize,
    /// How long a destructive call waits for the person's confirmation, and how long a
    /// confirmation question of protocol 2026-07-28 stays answerable.
    pub confirm_timeout: Duration,
    /// How long a SQL or content call of a tool that may run as a task answers as usual
    /// before it becomes one (for a client that takes tasks); zero: a task at once.
    pub task_after: Duration,
}

/// The defaults are the settings table's (see [`crate::def::settings`]), which the generated
/// docs cite: one source for both.
impl Default for Limits {
    fn default() -> Self {
        use crate::def::settings;
        let bytes = |s: settings::Setting| usize::try_from(s.default).unwrap_or(usize::MAX);
        Limits {
            max_argument_bytes: bytes(settings::MAX_ARGUMENT_BYTES),
            call_timeout: Duration::from_millis(settings::CALL_TIMEOUT_MS.default),
            max_result_bytes: bytes(settings::MAX_RESULT_BYTES),
            confirm_timeout: Duration::from_secs(settings::CONFIRM_TIMEOUT_SECS.default),
            task_after: Duration::from_millis(settings::TASK_AFTER_MS.default),
        }
    }
}

/// Why a call failed.
#[derive(Debug, Clone, PartialEq)]
pub enum CallError {
    /// No tool by that name: a protocol error (-32602).
    UnknownTool(String),
    /// `arguments` is present but not an object: a protocol error (-32602).
    MalformedArguments(String),
    /// The tool ran, or its arguments failed validation: a tool result with `isError`.
    Tool(ToolError),
    /// A failure the spec declares under `errors:`: a JSON-RPC error with its own code.
    Rpc(RpcError),
}

/// A declared error as sent: `{code, message, data: {code: NAME, ...fields}}`.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    pub code: i32,
    pub message: String,
    pub data: Value,
}

impl From<ToolError> for CallError {
    fn from(e: ToolError) -> Self {
        CallError::Tool(e)
    }
}

/// A successful call's structured result.
#[derive(Debug, Clone, PartialEq)]
pub struct Success {
    /// The structured result; for a content tool, its content blocks as a JSON array.
    pub structured: Value,
    /// Whether `structured` holds MCP content blocks rather than a structured result.
    pub content: bool,
}

/// A successful call as the lanes take it (see [`Engine::call_json`]): a [`Success`], or a
/// structured result that is one row, already written as compact JSON text.
pub(crate) enum Reply {
    Done(Success),
    /// A JSON object, and its [`approx_json_size`].
    Json {
        text: String,
        size: usize,
    },
}

impl Reply {
    /// The reply as a [`Success`]: the text read back into a value.
    fn into_success(self) -> Result<Success, CallError> {
        match self {
            Reply::Done(s) => Ok(s),
            Reply::Json { text, .. } => serde_json::from_str(&text)
                .map(|structured| Success {
                    structured,
                    content: false,
                })
                .map_err(|e| {
                    tracing::error!(error = %e, "a row written as JSON does not read back");
                    CallError::Tool(ToolError::new(
                        "INTERNAL_ERROR",
                        "the result could not be read; details are in the server log",
                    ))
                }),
        }
    }

    /// The approximate size of the result as JSON, for the call log.
    fn size(&self) -> usize {
        match self {
            Reply::Done(s) => approx_json_size(&s.structured),
            Reply::Json { size, .. } => *size,
        }
    }
}

struct CompiledTool {
    def: &'static ToolDef,
    /// The input schema, compiled into `validator` on the tool's first call: compiling every
    /// schema was half of the start-up time, and `codegen check` has already checked them.
    schema: Value,
    validator: std::sync::OnceLock<Result<jsonschema::Validator, String>>,
    defaults: Vec<(&'static str, Value)>,
    /// Whether the schema types some place as `integer`, which [`crate::numbers`] checks.
    integers: bool,
}

impl CompiledTool {
    /// The tool's input validator, compiled on first use.
    fn validator(&self) -> Result<&jsonschema::Validator, &String> {
        self.validator
            .get_or_init(|| jsonschema::validator_for(&self.schema).map_err(|e| e.to_string()))
            .as_ref()
    }
}

/// What a run of statements belongs to: a tool, or a resource or prompt of the spec.
#[derive(Debug, Clone, Copy)]
pub struct Job {
    /// As named in messages and logs.
    pub name: &'static str,
    /// What kind of thing `name` names in template names: empty for a tool, `resource:` or
    /// `prompt:` for content.
    pub prefix: &'static str,
    pub statements: &'static [StatementDef],
    /// One statement whose result is the whole result, rather than named parts.
    pub single: bool,
    /// Whether some statement changes the database.
    pub writes: bool,
}

impl Job {
    fn of(tool: &'static ToolDef) -> Job {
        Job {
            name: tool.name,
            prefix: "",
            statements: tool.binding.statements(),
            single: matches!(tool.binding, BindingDef::Single(_)),
            writes: tool.writes,
        }
    }

    /// The statement of a job that is one `one` or `optional` statement, whose row is the
    /// whole result.
    fn lone_row(&self) -> Option<&'static StatementDef> {
        match self.statements {
            [st] if self.single && matches!(st.mode, Mode::One | Mode::Optional) => Some(st),
            _ => None,
        }
    }
}

/// A server ready to answer calls: validators compiled, statements prepared, database open.
pub struct Engine {
    pub def: &'static ServerDef,
    /// Absent for a server without a database.
    db: Option<Arc<Database>>,
    /// The server's handlers, when it has handler tools (shared with a rehearsal twin).
    dispatch: Option<Arc<dyn Dispatch>>,
    /// Where the database is, when there is one: a rehearsal twin opens it again.
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    location: Option<Location>,
    /// The working directory at start-up, given to handlers.
    dir: PathBuf,
    tools: foldhash::HashMap<&'static str, CompiledTool>,
    templates: minijinja::Environment<'static>,
    limits: Limits,
    read_only: bool,
    next_id: AtomicU64,
    /// The spec's embedding providers, each on or off.
    embeddings: crate::embed::Embeddings,
}

/// The rows a `many` statement gave, and how they end.
#[derive(Default)]
struct Many {
    rows: Vec<Value>,
    /// Rows were left out for the row cap or the size budget.
    truncated: bool,
    /// A paged statement's last row's sort values, when rows remain after it.
    after: Option<Vec<SqlValue>>,
    /// A `page.by` column the result does not have.
    missing: Option<&'static str>,
}

/// Start-up failures, each saying what to fix.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Db(#[from] OpenError),
    #[error("the database at {path} does not match what {spec} expects:\n  {problems}\n{fix}")]
    Drift {
        path: String,
        spec: &'static str,
        problems: String,
        /// Which side to fix: the database, or the spec when its statements do not prepare
        /// against its own declared schema either.
        fix: String,
    },
    #[error("the `{server}` server has no database; remove --db")]
    NoDatabase { server: &'static str },
    #[error(
        "the `{server}` server has handler tools but was started without handlers; pass its generated `dispatcher` your handlers"
    )]
    NoHandlers { server: &'static str },
    #[error("cannot read the working directory: {0}")]
    Dir(std::io::Error),
    #[error("tool `{tool}` in {spec}: {message}")]
    Tool {
        tool: &'static str,
        spec: &'static str,
        message: String,
    },
    #[error(transparent)]
    Embeddings(#[from] crate::embed::SetupError),
}

impl Engine {
    /// Opens the database and checks every tool against it before any call is served.
    /// `path` is the database file, required exactly when the spec declares a database;
    /// `handlers` serve the spec's handler tools and resources (the generated `dispatcher`).
    pub fn start(
        def: &'static ServerDef,
        path: Option<&Path>,
        read_only: bool,
        limits: Limits,
        handlers: Option<Box<dyn Dispatch>>,
    ) -> Result<Arc<Engine>, StartError> {
        let location = path.map(|p| Location::File(p.to_path_buf()));
        Engine::start_at(def, location.as_ref(), read_only, limits, handlers)
    }

    /// [`Engine::start`] on a database file or a PostgreSQL URL.
    pub fn start_at(
        def: &'static ServerDef,
        location: Option<&Location>,
        read_only: bool,
        limits: Limits,
        handlers: Option<Box<dyn Dispatch>>,
    ) -> Result<Arc<Engine>, StartError> {
        let placing = Placing {
            read_only,
            ..Placing::default()
        };
        Engine::start_placed(def, location, placing, limits, handlers)
    }

    /// [`Engine::start_at`], saying where a SQLite database's derived structures may go: in a
    /// database mcpspec did not create only when `placing.in_place` (else in a mirror beside
    /// it, see the SQLite backend's `mirror` module). A database file that cannot be written
    /// is served read-only.
    pub fn start_placed(
        def: &'static ServerDef,
        location: Option<&Location>,
        placing: Placing,
        limits: Limits,
        handlers: Option<Box<dyn Dispatch>>,
    ) -> Result<Arc<Engine>, StartError> {
        let placing = Placing {
            read_only: placing.read_only || def.database.as_ref().is_some_and(|d| d.read_only),
            ..placing
        };
        let (db, derive_failed) = open_database(def, location, placing, &limits)?.unzip();
        let read_only = placing.read_only || db.as_ref().is_some_and(Database::is_read_only);
        let opened = db.map(|db| (Arc::new(db), derive_failed.flatten()));
        Engine::assemble(
            def,
            opened,
            location,
            read_only,
            limits,
            handlers.map(Arc::from),
        )
    }

    /// [`Engine::start_at`] for a rehearsal: every write runs in a transaction that is rolled
    /// back, so that a spec's examples can run on a live database without changing it. The
    /// database is left exactly as it was: derived structures it lacks are built in a scratch
    /// mirror, never in it.
    pub fn start_rehearsal(
        def: &'static ServerDef,
        location: &Location,
        limits: Limits,
        handlers: Option<Box<dyn Dispatch>>,
    ) -> Result<Arc<Engine>, StartError> {
        Engine::rehearse(def, location, limits, handlers.map(Arc::from))
    }

    fn rehearse(
        def: &'static ServerDef,
        location: &Location,
        limits: Limits,
        handlers: Option<Arc<dyn Dispatch>>,
    ) -> Result<Arc<Engine>, StartError> {
        let placing = Placing {
            scratch: true,
            ..Placing::default()
        };
        let mut opened = open_database(def, Some(location), placing, &limits)?;
        if let Some((db, _)) = &mut opened {
            db.rehearse();
        }
        Engine::assemble(
            def,
            opened.map(|(db, failed)| (Arc::new(db), failed)),
            Some(location),
            false,
            limits,
            handlers,
        )
    }

    /// A rehearsal twin of this engine (see [`Engine::start_rehearsal`]): the same server,
    /// database and handlers, every write rolled back. `None` for a server without a
    /// database, whose handlers' effects nothing could roll back. For the workbench's
    /// examples.
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    pub(crate) fn rehearsal(&self) -> Option<Result<Arc<Engine>, StartError>> {
        let location = self.location.as_ref()?;
        Some(Engine::rehearse(
            self.def,
            location,
            self.limits,
            self.dispatch.clone(),
        ))
    }

    /// The engine over an open database: the tools compiled, the handlers in place, and every
    /// statement checked against the database.
    fn assemble(
        def: &'static ServerDef,
        opened: Option<(Arc<Database>, Option<String>)>,
        location: Option<&Location>,
        read_only: bool,
        limits: Limits,
        handlers: Option<Arc<dyn Dispatch>>,
    ) -> Result<Arc<Engine>, StartError> {
        let needs_handlers = def
            .tools
            .iter()
            .any(|t| matches!(t.binding, BindingDef::Handler))
            || def.resources.iter().any(|r| r.content.handler);
        let dispatch = if needs_handlers {
            Some(handlers.ok_or(StartError::NoHandlers { server: def.name })?)
        } else {
            None
        };
        let dir = std::env::current_dir().map_err(StartError::Dir)?;
        let mut tools = foldhash::HashMap::default();
        let mut templates = minijinja::Environment::new();
        for t in def.tools {
            tools.insert(t.name, compile_tool(def, t, &mut templates)?);
        }
        add_server_templates(def, &mut templates)?;
        // Every statement must prepare against the real database, and return the declared
        // columns, before the server accepts a call: drift is a start-up error listing every
        // affected tool, not a failure of some later call.
        let (db, derive_failed) = opened.unzip();
        if let (Some(db), Some(path)) = (&db, location) {
            let drift = drift(def, db.dialect(), &|sql| db.columns(sql));
            let derive_failed = derive_failed.flatten();
            if !drift.is_empty() {
                let mut fix = which_side(def, db.dialect());
                let derived = def
                    .database
                    .as_ref()
                    .is_some_and(|d| !d.derived.trim().is_empty());
                if let Some(reason) = derive_failed {
                    fix.push_str(&format!(
                        "\nthe structures under `database.derived` could not be built: {reason}"
                    ));
                } else if derived && let Some(at) = db.derived_elsewhere() {
                    fix.push_str(&format!(
                        "\nthe structures under `database.derived` are kept in {}, outside the database",
                        at.display()
                    ));
                }
                return Err(StartError::Drift {
                    path: path.display(),
                    spec: def.spec_file,
                    problems: drift.join("\n  "),
                    fix,
                });
            }
            if let Some(reason) = derive_failed {
                tracing::warn!(%reason, "could not build the structures under `database.derived`; the statements still prepare");
            }
        }
        let embeddings = crate::embed::Embeddings::start(def.embeddings)?;
        if let Some(db) = &db {
            crate::embed::columns::check(def, &embeddings, db)?;
        }
        Ok(Arc::new(Engine {
            def,
            db,
            dispatch,
            location: location.cloned(),
            dir,
            tools,
            templates,
            limits,
            read_only,
            next_id: AtomicU64::new(1),
            embeddings,
        }))
    }

    /// The spec's embedding providers, each on or off.
    pub fn embeddings(&self) -> &crate::embed::Embeddings {
        &self.embeddings
    }

    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// How many connections the database pool holds and uses now (see
    /// [`Database::pool_use`]); `None` without a database.
    pub fn pool_use(&self) -> Option<crate::backend::PoolUse> {
        self.db.as_ref()?.pool_use()
    }

    /// Where replicas sharing this server's database record the request states they
    /// redeemed, so that each confirms one retry in the whole team; `None` when the database
    /// is SQLite's or there is none (one process remembers), or when the database lacks
    /// mcpspec's table for them (said once in the log, with how to add it).
    pub fn state_ledger(&self) -> Option<crate::confirm::Ledger> {
        const ALONE: &str = "replicas share the request-state key but no database server: each replica remembers only the states it redeemed, so a state could be redeemed once per replica; set MCPSPEC_REQUEST_STATE_DIR to a directory the replicas share";
        let Some(db) = self.db.clone() else {
            tracing::warn!("{ALONE}");
            return None;
        };
        let Some(shares) = db.shares_states() else {
            tracing::warn!("{ALONE}");
            return None;
        };
        match shares {
            true => Some(Arc::new(move |nonce: &str, ttl: Duration| {
                db.redeem_state(nonce, ttl)
            })),
            false => {
                tracing::warn!(
                    table = crate::backend::STATES_TABLE,
                    "replicas share the request-state key but this database has no table for used states: each replica remembers only its own, so a state could be redeemed once per replica; `mcpspec init` on a new database or `mcpspec migrate` adds it"
                );
                None
            }
        }
    }

    /// The database in which replicas sharing it keep their tasks, so that any of them
    /// answers for a task; `None` when the database is SQLite's or there is none (the process
    /// keeps its tasks), when the server is read-only, or when it lacks mcpspec's table for
    /// them (said once in the log, with how to add it).
    pub fn task_table(&self) -> Option<Arc<crate::backend::Database>> {
        // A server that may not write keeps its tasks to itself.
        if self.read_only {
            return None;
        }
        let db = self.db.clone()?;
        if db.shares_tasks()? {
            return Some(db);
        }
        tracing::warn!(
            table = crate::backend::TASKS_TABLE,
            "this database has no table for tasks: a task is reached only on the replica that runs it; `mcpspec init` on a new database or `mcpspec migrate` adds it"
        );
        None
    }

    /// Whether calls can be answered now: the database answers a trivial statement within
    /// `within` (so a connection came free and the server responded); why not otherwise, in
    /// words that name no location. A server without a database is always ready. For
    /// `/readyz`.
    pub fn ready(&self, within: Duration) -> Result<(), &'static str> {
        self.embeddings.ready(within)?;
        let Some(db) = &self.db else {
            return Ok(());
        };
        let stop = crate::backend::Stop::after(within, Arc::default());
        let no_params: crate::backend::Bind<'_> = &|_| crate::backend::Value::Null;
        let answered = db.job(
            false,
            false,
            &stop,
            |_| (),
            |session| {
                session
                    .query(
                        crate::backend::Sql::from("SELECT 1"),
                        no_params,
                        &mut |_| false,
                    )
                    .map_err(|_| ())
            },
        );
        match answered {
            Some(Ok(())) => Ok(()),
            _ => Err("the database does not answer"),
        }
    }

    /// The message templates of the server, where resources and prompts keep theirs too.
    pub fn templates(&self) -> &minijinja::Environment<'static> {
        &self.templates
    }

    /// Runs the read-only statements of a resource or prompt on a pooled reader, under the
    /// call timeout, exactly as a tool's statements run; the request id names it in the log.
    pub fn query(
        &self,
        job: Job,
        params: &[(&'static str, SqlValue)],
        args: &Arguments,
    ) -> Result<Value, ToolError> {
        let request = self.next_id.fetch_add(1, Ordering::Relaxed);
        let timeout = self.limits.call_timeout;
        let stop = Stop::after(timeout, Arc::default());
        let db = self
            .db
            .as_deref()
            .ok_or_else(|| ToolError::new("INTERNAL_ERROR", "this server has no database"))?;
        self.run(db, job, None, params, args, &stop, request)
            .map_err(|e| self.interrupted(job, e, &stop.cancel, timeout))
    }

    /// Runs a read-only query on a pooled reader under the call timeout, calling `each` with
    /// each row; `None` without a database.
    pub fn read_rows(
        &self,
        sql: &str,
        bind: crate::backend::Bind<'_>,
        each: &mut dyn FnMut(&dyn crate::backend::Row) -> bool,
    ) -> Option<Result<(), crate::backend::Failure>> {
        let stop = Stop::after(self.limits.call_timeout, Arc::default());
        self.db.as_deref()?.job(
            false,
            false,
            &stop,
            |f| f,
            |s| s.query(sql.into(), bind, each),
        )
    }

    /// The server's database, absent for a server without one.
    pub fn database(&self) -> Option<&Arc<Database>> {
        self.db.as_ref()
    }

    /// The working directory at start-up: the project the server works on.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The limits every call runs under.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Runs one call. This blocks on SQLite; async callers run it on a blocking thread.
    pub fn call(&self, name: &str, arguments: Option<&Value>) -> Result<Success, CallError> {
        self.call_with(name, arguments, None)
    }

    /// Runs one call that stops with `CANCELLED` once `cancel` is set.
    pub fn call_with(
        &self,
        name: &str,
        arguments: Option<&Value>,
        cancel: Option<Arc<AtomicBool>>,
    ) -> Result<Success, CallError> {
        self.call_full(name, arguments, cancel, Link::default())
    }

    /// Runs one call with cancellation and, for handler tools, a link to the client
    /// (progress, logging, sampling, elicitation).
    pub fn call_full(
        &self,
        name: &str,
        arguments: Option<&Value>,
        cancel: Option<Arc<AtomicBool>>,
        link: Link,
    ) -> Result<Success, CallError> {
        self.call_as(name, arguments, cancel, link, false)
            .and_then(Reply::into_success)
    }

    /// [`Engine::call_full`] for the lanes, which send a structured result as JSON text: a
    /// result that is one row comes back already written, without a `Value` in between.
    pub(crate) fn call_json(
        &self,
        name: &str,
        arguments: Option<&Value>,
        cancel: Option<Arc<AtomicBool>>,
        link: Link,
    ) -> Result<Reply, CallError> {
        self.call_as(name, arguments, cancel, link, true)
    }

    /// Runs one call and logs it; `json` lets a lone row come back as JSON text.
    fn call_as(
        &self,
        name: &str,
        arguments: Option<&Value>,
        cancel: Option<Arc<AtomicBool>>,
        link: Link,
        json: bool,
    ) -> Result<Reply, CallError> {
        let request = self.next_id.fetch_add(1, Ordering::Relaxed);
        let started = Instant::now();
        let cancel = cancel.unwrap_or_default();
        let slow = link.slow.clone();
        let caller = link.caller.clone();
        #[cfg(feature = "http")]
        let running = crate::metrics::Running::start();
        let watcher = crate::watch::recorder();
        // Read once: the statements and a success's answer are kept only while a page watches.
        let watched = watcher.is_some_and(|w| w.watched());
        let statements = crate::watch::Statements::collect(watched);
        // Looked up once: the watcher is told the spec's own name.
        let found = self.tools.get_key_value(name);
        let result = self
            .call_inner(
                found.map(|(_, t)| t),
                name,
                arguments,
                request,
                &cancel,
                link,
                json,
            )
            .map_err(|e| self.declared(name, arguments, e))
            .map_err(|e| self.rename(e));
        // A call that gave way runs again, and is logged then.
        let gave_way = slow.is_some_and(|s| s.gave_way());
        #[cfg(feature = "http")]
        if running.is_some() && !gave_way {
            // A tool the spec does not have is one label, whatever name the client sent.
            let tool = self.def.tool(name).map_or("(unknown)", |t| t.name);
            crate::metrics::record(tool, outcome(&result).0, started.elapsed());
        }
        if let Some(caller) = &caller
            && !gave_way
        {
            // The audit line of a caller's call: who, what, how it ended, how long.
            tracing::info!(
                target: "mcpspec::audit",
                sub = %crate::logsafe::quoted(&caller.sub),
                tool = self.def.tool(name).map_or("(unknown)", |t| t.name),
                outcome = outcome(&result).0,
                duration_ms = calllog::millis_since(started),
                "call"
            );
        }
        let logged = calllog::enabled();
        if (logged || watcher.is_some()) && !gave_way {
            let (outcome, size) = outcome(&result);
            let call = calllog::Call {
                request,
                sub: caller.as_ref().map(|c| c.sub.as_str()),
                tool: name,
                outcome,
                duration_ms: calllog::millis_since(started),
                result_bytes: size,
                arguments,
            };
            if logged {
                calllog::log(&call);
            }
            // The workbench's page shows it too (`serve --ui`).
            if let Some(watcher) = watcher {
                statements.seen(|statements| {
                    watcher.call(crate::watch::SeenCall {
                        tool: found.map(|(k, _)| *k),
                        call: &call,
                        started,
                        watched,
                        outcome: shown::outcome(&result, outcome),
                        answer: shown::answer(&result, watched, size),
                        statements,
                        trace: crate::telemetry::trace_id().map(Into::into),
                        origin: crate::watch::origin(),
                    });
                });
            }
        }
        result
    }

    /// The error for a call that failed inside the server (a panic): sanitised, with the
    /// details in the log.
    pub fn internal_error(&self, tool: &str) -> CallError {
        let e = ToolError::new(
            "INTERNAL_ERROR",
            format!("`{tool}` failed inside the server; details are in the server log"),
        );
        self.rename(CallError::Tool(e))
    }

    /// Applies the server's renames of error codes.
    fn rename(&self, e: CallError) -> CallError {
        match e {
            CallError::Tool(mut t) => {
                if let Some((_, to)) = self
                    .def
                    .error_codes
                    .iter()
                    .find(|(from, _)| *from == t.code)
                {
                    t.code = to;
                }
                CallError::Tool(t)
            }
            other => other,
        }
    }

    /// Maps a failure to a declared error when a rule of the spec says so.
    fn declared(&self, tool: &str, arguments: Option<&Value>, e: CallError) -> CallError {
        let CallError::Tool(t) = &e else {
            return e;
        };
        let field_failed = |field: &str| {
            t.data
                .as_ref()
                .and_then(|d| d.get("errors"))
                .and_then(Value::as_array)
                .is_some_and(|errs| {
                    // A missing argument is not an invalid value: it keeps INVALID_ARGUMENTS.
                    errs.iter().any(|x| {
                        x.get("constraint").and_then(Value::as_str) != Some("required")
                            && x.get("field").and_then(Value::as_str).is_some_and(|f| {
                                f == field
                                    || f.strip_prefix(field).is_some_and(|r| r.starts_with('.'))
                            })
                    })
                })
        };
        for d in self.def.errors {
            for r in d.rules.iter().filter(|r| r.applies_to(tool)) {
                let mut fields = Map::new();
                let hit = match r.when {
                    RuleKindDef::Invalid(field) => {
                        let hit = t.code == "INVALID_ARGUMENTS" && field_failed(field);
                        if hit {
                            fields.insert("field".into(), json!(field));
                            if let Some(v) = arguments.and_then(|a| a.get(field)) {
                                fields.insert("value".into(), crate::transform::shorten(v));
                            }
                        }
                        hit
                    }
                    RuleKindDef::Constraint => t.code == "CONSTRAINT_VIOLATION",
                    RuleKindDef::NoRow => t.code == "NOT_FOUND",
                    RuleKindDef::NoChange => t.code == "NO_CHANGE",
                };
                if hit {
                    // The runtime's own (sanitised) message, for templates that want it.
                    fields.insert("detail".into(), json!(t.message));
                    return CallError::Rpc(self.rpc_error(d, &fields, arguments));
                }
            }
        }
        e
    }

    /// Renders a declared error: its message template over the fields and arguments, and
    /// `data` with `code` and the declared fields.
    fn rpc_error(
        &self,
        d: &crate::def::ErrorDef,
        fields: &Map<String, Value>,
        arguments: Option<&Value>,
    ) -> RpcError {
        let mut ctx = match arguments {
            Some(Value::Object(a)) => a.clone(),
            _ => Map::new(),
        };
        for (k, v) in fields {
            ctx.insert(k.clone(), v.clone());
        }
        let message = self
            .templates
            .get_template(&template_name("", d.name, "error"))
            .ok()
            .and_then(|t| t.render(minijinja::value::Serde(&ctx)).ok())
            .map_or_else(|| d.name.to_lowercase(), |m| m.trim().to_string());
        let mut data = Map::new();
        data.insert("code".into(), json!(d.name));
        for f in d.data {
            if let Some(v) = ctx.get(*f) {
                data.insert((*f).to_string(), v.clone());
            }
        }
        RpcError {
            code: d.code,
            message,
            data: Value::Object(data),
        }
    }

    /// The question a confirmation rule puts to the person, once the arguments are valid and
    /// the confirmation argument is `true`; `None` for a tool without the rule.
    pub fn confirmation(&self, name: &str, arguments: Option<&Value>) -> Option<String> {
        let tool = self.tools.get(name)?;
        let c = tool.def.confirm.as_ref()?;
        let mut args = match arguments {
            Some(Value::Object(m)) => m.clone(),
            _ => Map::new(),
        };
        for (k, v) in &tool.defaults {
            if !args.contains_key(*k) {
                args.insert((*k).to_string(), v.clone());
            }
        }
        let instance = Value::Object(args);
        if instance.get(c.argument) != Some(&Value::Bool(true))
            || !tool.validator().is_ok_and(|v| v.is_valid(&instance))
        {
            return None;
        }
        let message = self
            .templates
            .get_template(&template_name(tool.def.name, "confirm", "message"))
            .ok()
            .and_then(|t| t.render(minijinja::value::Serde(&instance)).ok())
            .map_or_else(
                || format!("Run `{}`? It cannot be undone.", tool.def.name),
                |m| m.trim().to_string(),
            );
        Some(message)
    }

    /// The error for a call the person declined or cancelled when asked to confirm.
    pub fn declined(&self, tool: &str, action: &str) -> CallError {
        let e = ToolError {
            code: "DECLINED",
            message: format!(
                "the person {action} the confirmation of `{tool}`; nothing was changed"
            ),
            data: Some(json!({"action": action})),
        };
        self.rename(CallError::Tool(e))
    }

    /// The error for a call whose confirmation nobody answered in time.
    pub fn unconfirmed(&self, tool: &str, after: Duration) -> CallError {
        let e = ToolError {
            code: "CONFIRMATION_TIMEOUT",
            message: format!(
                "nobody answered the confirmation of `{tool}` within {} s; nothing was changed",
                after.as_secs()
            ),
            data: Some(json!({"timeout_secs": after.as_secs()})),
        };
        self.rename(CallError::Tool(e))
    }

    /// Runs a call of `tool` (`None`: the spec has no tool `name`).
    #[allow(clippy::too_many_arguments)]
    fn call_inner(
        &self,
        tool: Option<&CompiledTool>,
        name: &str,
        arguments: Option<&Value>,
        request: u64,
        cancel: &Arc<AtomicBool>,
        link: Link,
        json: bool,
    ) -> Result<Reply, CallError> {
        let tool = tool.ok_or_else(|| CallError::UnknownTool(name.to_string()))?;
        let args = self.arguments(tool, name, arguments)?;
        let instance = self.validated(tool, name, args, request)?;
        let Value::Object(mut args) = instance else {
            unreachable!("arguments are an object")
        };
        // Messages quote the arguments as the caller wrote them, before any transform.
        let shown = (!tool.def.transforms.is_empty()).then(|| args.clone());
        for (arg, transforms) in tool.def.transforms {
            if let Some(v) = args.get_mut(*arg) {
                crate::transform::apply(v, transforms);
            }
        }
        let stop = link
            .stop
            .clone()
            .unwrap_or_else(|| Stop::after(self.timeout(tool.def), cancel.clone()));
        if matches!(tool.def.binding, BindingDef::Handler) {
            return self
                .run_handler(tool.def, &args, request, stop, link)
                .map(Reply::Done);
        }
        if let BindingDef::Content(blocks) = &tool.def.binding {
            return self.render_blocks(tool.def, blocks, &args).map(Reply::Done);
        }
        let stop = stop.with_slow(link.slow);
        let caller = link.caller.as_deref();
        if let BindingDef::Backfill(b) = &tool.def.binding {
            return self.run_backfill(tool, b, &args, caller, request, &stop, link.progress);
        }
        self.run_sql(tool, &args, shown.as_ref(), caller, request, &stop, json)
    }

    /// How long a call of `tool` may run.
    fn timeout(&self, tool: &ToolDef) -> Duration {
        tool.timeout_ms
            .map_or(self.limits.call_timeout, Duration::from_millis)
    }

    /// The deadline of a call of the tool `name` that starts now, and its cancellation flag:
    /// for a caller that answers the call by its deadline (see [`Link::stop`]). The time a
    /// handler waits for the client's answers does not count.
    pub fn stop_for(&self, name: &str, cancel: Arc<AtomicBool>) -> Stop {
        let timeout = self
            .def
            .tool(name)
            .map_or(self.limits.call_timeout, |t| self.timeout(t));
        Stop::pausable(timeout, cancel)
    }

    /// How many calls of `tool` can use the database at once, when its database bounds it:
    /// a tool whose work is its statements alone, on SQLite, runs as many at once as there
    /// are readers, and one at a time when it writes (see
    /// [`crate::backend::Backend::at_once`]). Not a tool that embeds a text first: its calls
    /// spend their time waiting for the provider, and the provider takes the texts of the
    /// calls that wait together in one request.
    pub(crate) fn at_once(&self, tool: &ToolDef) -> Option<usize> {
        let statements_alone = matches!(
            tool.binding,
            BindingDef::Single(_) | BindingDef::Composite(_)
        ) && tool.derive.iter().all(|d| d.embed.is_none());
        if statements_alone {
            self.db.as_deref()?.at_once(tool.writes)
        } else {
            None
        }
    }

    /// The error of a call still running when the server's shutdown timeout passed.
    pub fn shutting_down(&self, name: &str) -> CallError {
        let e = ToolError::new(
            "SHUTTING_DOWN",
            format!("the server is shutting down; `{name}` was stopped before it finished"),
        );
        self.rename(CallError::Tool(e))
    }

    /// The error of a call answered at its deadline while its work was still running: the
    /// same `TIMEOUT` a statement stopped at its deadline gives.
    pub fn timed_out(&self, name: &str) -> CallError {
        let timeout = self
            .def
            .tool(name)
            .map_or(self.limits.call_timeout, |t| self.timeout(t));
        let e = ToolError::new(
            "TIMEOUT",
            format!(
                "`{name}` took longer than {} ms and was stopped; narrow the request",
                timeout.as_millis()
            ),
        );
        self.rename(CallError::Tool(e))
    }

    /// The call's arguments as an object within the size limit, with the spec's defaults
    /// filled in; a destructive tool's confirmation argument must be `true`.
    fn arguments(
        &self,
        tool: &CompiledTool,
        name: &str,
        arguments: Option<&Value>,
    ) -> Result<Arguments, CallError> {
        let mut args: Arguments = match arguments {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(m)) => m.clone(),
            Some(other) => {
                return Err(CallError::MalformedArguments(format!(
                    "arguments must be an object, not {}",
                    json_type(other)
                )));
            }
        };
        let size = approx_map_size(&args);
        if size > self.limits.max_argument_bytes {
            return Err(ToolError {
                code: "ARGUMENTS_TOO_LARGE",
                message: format!(
                    "arguments are about {size} bytes; the limit is {} bytes",
                    self.limits.max_argument_bytes
                ),
                data: Some(json!({"size": size, "limit": self.limits.max_argument_bytes})),
            }
            .into());
        }
        for (k, v) in &tool.defaults {
            if !args.contains_key(*k) {
                args.insert((*k).to_string(), v.clone());
            }
        }
        // A destructive tool runs only when its confirmation argument is `true`; this is
        // checked first so that a missing or false confirmation gets this message.
        if let Some(c) = &tool.def.confirm
            && args.get(c.argument) != Some(&Value::Bool(true))
        {
            return Err(ToolError {
                code: "CONFIRMATION_REQUIRED",
                message: format!(
                    "`{name}` is destructive and runs only with `{}: true`; ask the person first",
                    c.argument
                ),
                data: Some(json!({"field": c.argument})),
            }
            .into());
        }
        Ok(args)
    }

    /// The arguments checked against the input schema, the `i64` range of integers and
    /// `requiredAny`.
    fn validated(
        &self,
        tool: &CompiledTool,
        name: &str,
        args: Arguments,
        request: u64,
    ) -> Result<Value, CallError> {
        let instance = Value::Object(args);
        let validator = tool.validator().map_err(|e| {
            tracing::error!(request, tool = name, error = %e, "the input schema does not compile");
            ToolError::new(
                "INTERNAL_ERROR",
                format!("`{name}` cannot validate its arguments; details are in the server log"),
            )
        })?;
        validate(validator, &instance)?;
        if tool.integers {
            crate::numbers::check(&tool.schema, &instance).map_err(bad_integer)?;
        }
        if tool.def.writes && self.nul_matters() {
            refuse_nul(&instance)?;
        }
        let any = tool.def.required_any;
        if !any.is_empty()
            && !any
                .iter()
                .any(|k| instance.get(*k).is_some_and(|v| !v.is_null()))
        {
            let names: Vec<String> = any.iter().map(|k| format!("`{k}`")).collect();
            return Err(ToolError {
                code: "INVALID_ARGUMENTS",
                message: format!("invalid arguments: one of {} is required", names.join(", ")),
                data: Some(json!({
                    "field": any[0],
                    "constraint": "requiredAny",
                    "errors": [{
                        "field": any[0],
                        "constraint": "requiredAny",
                        "message": format!("one of {} is required", any.join(", ")),
                    }],
                })),
            }
            .into());
        }
        Ok(instance)
    }

    /// Binds the `:embeddings.NAME.FIELD` parameters of `tool` from the providers.
    fn provider_params(&self, tool: &ToolDef, params: &mut crate::params::Params, stop: &Stop) {
        use crate::def::{EmbeddingsField, ParamKind};
        for ((_, kind), (name, value)) in tool.bind.0.iter().zip(params.iter_mut()) {
            let ParamKind::Embeddings(field) = kind else {
                continue;
            };
            let (provider, _) = crate::params::embeddings_param(name);
            *value = match field {
                EmbeddingsField::Model => self
                    .embeddings
                    .model(provider)
                    .map_or(SqlValue::Null, |m| SqlValue::Text(m.into())),
                EmbeddingsField::Dimensions => self
                    .def
                    .embedding(provider)
                    .map_or(SqlValue::Null, |e| SqlValue::Integer(e.dimensions.into())),
                EmbeddingsField::Health => SqlValue::Text(
                    self.embeddings
                        .health(provider, stop.deadline())
                        .to_string(),
                ),
            };
        }
    }

    /// Whether text with a NUL character (U+0000) is kept out of the database: for a spec that
    /// also runs on PostgreSQL, whose text cannot hold one, so that its tools keep one
    /// contract on every engine (writes refuse it, reads match nothing).
    fn nul_matters(&self) -> bool {
        self.def
            .database
            .as_ref()
            .is_some_and(|d| !d.engines.is_empty())
    }

    /// Runs a SQL tool: binds the typed parameters and the derived ones, runs its statements
    /// under its timeout, and applies a `no_change` rule. With `json`, a result that is one
    /// row comes back as JSON text.
    #[allow(clippy::too_many_arguments)]
    fn run_sql(
        &self,
        tool: &CompiledTool,
        args: &Arguments,
        shown: Option<&Arguments>,
        caller: Option<&crate::auth::Identity>,
        request: u64,
        stop: &Stop,
        json: bool,
    ) -> Result<Reply, CallError> {
        let name = tool.def.name;
        caller_fits(tool.def, caller)?;
        let mut params = crate::params::bind(&tool.def.bind, args, caller);
        self.provider_params(tool.def, &mut params, stop);
        if let BindingDef::Single(st) = &tool.def.binding {
            crate::cursor::bind(self.def.name, tool.def, st, args, &mut params)?;
        }
        if tool.def.writes && self.read_only {
            return Err(ToolError::new(
                "READ_ONLY",
                format!(
                    "`{name}` changes the database, and this server is running read-only; restart it without --read-only to allow writes"
                ),
            )
            .into());
        }
        let job = Job::of(tool.def);
        let (db, shown) = (self.db()?, shown.unwrap_or(args));
        let acting = self.acting(db, name, caller)?;
        // After the checks that need no provider: a call refused for them costs no embedding.
        crate::embed::derive::all(self.embeddings(), tool.def, shown, stop, &mut params)
            .map_err(|e| self.interrupted(job, e, &stop.cancel, self.timeout(tool.def)))?;
        // A read whose text holds a NUL matches nothing on any engine (see `nul_matters`):
        // its statements run against no rows, which gives the tool's own empty answer.
        if !tool.def.writes && self.nul_matters() && shown.values().any(|v| nul_path(v).is_some()) {
            let mut none = crate::backend::NoRows(db.dialect());
            let out = self.run_statements(job, &mut none, &params, shown, request)?;
            return Ok(Reply::Done(Success {
                structured: out,
                content: false,
            }));
        }
        let interrupted = |e| self.interrupted(job, e, &stop.cancel, self.timeout(tool.def));
        if json && let Some(st) = job.lone_row() {
            let (text, size) = self
                .in_session(db, job, acting.as_ref(), stop, request, |session| {
                    self.lone_row_text(session, job, st, &params, shown, request)
                })
                .map_err(interrupted)?;
            return Ok(Reply::Json { text, size });
        }
        let out = self
            .run(db, job, acting.as_ref(), &params, shown, stop, request)
            .map_err(interrupted)?;
        // A single `execute` that changed no rows fails only when a `no_change` rule maps it.
        if let BindingDef::Single(st) = &tool.def.binding
            && st.mode == Mode::Execute
            && out.get("changes") == Some(&json!(0))
            && self.def.errors.iter().any(|e| {
                e.rules
                    .iter()
                    .any(|r| r.when == RuleKindDef::NoChange && r.applies_to(name))
            })
        {
            return Err(ToolError::new("NO_CHANGE", format!("`{name}` changed no rows")).into());
        }
        Ok(Reply::Done(Success {
            structured: out,
            content: false,
        }))
    }

    /// Renders the blocks of a `content:` binding with the arguments (and `arguments`, all of
    /// them) as variables.
    fn render_blocks(
        &self,
        tool: &'static ToolDef,
        blocks: &'static [crate::def::BlockDef],
        args: &Arguments,
    ) -> Result<Success, CallError> {
        let mut vars = args.clone();
        vars.insert("arguments".into(), Value::Object(args.clone()));
        let render = |i: usize, part: &str| -> Result<String, CallError> {
            let name = template_name(tool.name, &format!("block{i}"), part);
            self.templates
                .get_template(&name)
                .and_then(|t| t.render(minijinja::value::Serde(&vars)))
                .map_err(|e| {
                    tracing::error!(tool = tool.name, template = %name, error = %e, "a content template failed");
                    self.internal_error(tool.name)
                })
        };
        let mut out = Vec::with_capacity(blocks.len());
        for (i, b) in blocks.iter().enumerate() {
            let mime = b.mime_type.unwrap_or("text/plain");
            let block = match b.kind {
                crate::def::BlockKind::Text => json!({"type": "text", "text": render(i, "text")?}),
                crate::def::BlockKind::Image => {
                    json!({"type": "image", "data": b.data.unwrap_or_default(), "mimeType": mime})
                }
                crate::def::BlockKind::Audio => {
                    json!({"type": "audio", "data": b.data.unwrap_or_default(), "mimeType": mime})
                }
                crate::def::BlockKind::Resource => json!({"type": "resource", "resource": {
                    "uri": render(i, "uri")?,
                    "mimeType": mime,
                    "text": render(i, "text")?,
                }}),
            };
            out.push(block);
        }
        Ok(Success {
            structured: Value::Array(out),
            content: true,
        })
    }

    fn db(&self) -> Result<&Database, CallError> {
        self.db.as_deref().ok_or_else(|| {
            CallError::Tool(ToolError::new(
                "INTERNAL_ERROR",
                "this server has no database",
            ))
        })
    }

    /// A handler's result within its cap (its `max_bytes`, bounded by the server's limit): as
    /// it is, or with the rows of its longest list that fit and a note saying so, when its
    /// output schema lets the note in; else `RESULT_TOO_LARGE`.
    fn bounded(&self, tool: &'static ToolDef, mut structured: Value) -> Result<Value, ToolError> {
        let budget = capped(tool.max_bytes, self.limits.max_result_bytes);
        let size = approx_json_size(&structured);
        if size <= budget {
            return Ok(structured);
        }
        let schema: Value = serde_json::from_str(tool.output_schema).unwrap_or(Value::Null);
        let closed = schema.get("additionalProperties") == Some(&Value::Bool(false))
            && schema["properties"].get("truncated").is_none();
        if !tool.content && !closed && crate::bound::cut_rows(&mut structured, budget).is_some() {
            return Ok(structured);
        }
        Err(too_large(tool.name, size, budget))
    }

    /// Runs a handler tool on the calling (blocking) thread and maps its error: a declared
    /// name becomes the JSON-RPC error, an internal failure a sanitised tool error, any other
    /// name a tool error with that code.
    fn run_handler(
        &self,
        tool: &'static ToolDef,
        args: &Arguments,
        request: u64,
        stop: Stop,
        link: Link,
    ) -> Result<Success, CallError> {
        let Some(dispatch) = &self.dispatch else {
            return Err(self.internal_error(tool.name));
        };
        let watch = stop.clone();
        let ctx = Context::for_call(self.dir.clone(), stop, self.db.clone(), link, request);
        let e = match dispatch.call(tool.name, &ctx, args) {
            Ok(structured) => {
                return Ok(Success {
                    structured: self.bounded(tool, structured)?,
                    content: tool.content,
                });
            }
            Err(e) => e,
        };
        // A handler that failed because its deadline came (its statement interrupted, a
        // database's statement time limit set from the deadline, or its own `TIMEOUT`) is
        // answered as the deadline answers every call, unless the client cancelled it.
        let deadline = watch.expired() || e.name() == "TIMEOUT";
        if deadline && !watch.cancel.load(Ordering::Relaxed) {
            return Err(self.timed_out(tool.name));
        }
        Err(self.handler_error(tool, e, args, request))
    }

    /// Reads a handler resource on the calling (blocking) thread: the dispatcher's answer, or
    /// the handler's error with the request id that names it in the log.
    pub(crate) fn read_handler(
        &self,
        resource: &'static str,
        uri: &str,
        vars: &crate::handler::ResourceVars,
    ) -> Result<crate::handler::ResourceBody, (HandlerError, u64)> {
        let request = self.next_id.fetch_add(1, Ordering::Relaxed);
        let Some(dispatch) = &self.dispatch else {
            return Err((HandlerError::unknown_resource(resource), request));
        };
        let ctx = Context::for_call(
            self.dir.clone(),
            Stop::after(self.limits.call_timeout, Arc::default()),
            self.db.clone(),
            Link::default(),
            request,
        );
        dispatch
            .read(resource, &ctx, uri, vars)
            .map_err(|e| (e, request))
    }

    /// The JSON-RPC error of a declared error by name, its message rendered over `fields` and
    /// `context`; `None` when the spec declares no such error.
    pub(crate) fn declared_error(
        &self,
        name: &str,
        fields: &Map<String, Value>,
        context: &Value,
    ) -> Option<RpcError> {
        let d = self.def.errors.iter().find(|d| d.name == name)?;
        Some(self.rpc_error(d, fields, Some(context)))
    }

    fn handler_error(
        &self,
        tool: &ToolDef,
        e: HandlerError,
        args: &Arguments,
        request: u64,
    ) -> CallError {
        if let Some(d) = self.def.errors.iter().find(|d| d.name == e.name()) {
            let arguments = Value::Object(args.clone());
            return CallError::Rpc(self.rpc_error(d, e.fields(), Some(&arguments)));
        }
        if e.name() == crate::handler::INTERNAL {
            tracing::error!(request, tool = tool.name, error = %e, "handler failed");
            return CallError::Tool(ToolError {
                code: "INTERNAL_ERROR",
                message: format!(
                    "`{}` failed inside the server (request {request}; details are in the server log)",
                    tool.name
                ),
                data: Some(json!({"request": request})),
            });
        }
        let message = e.text().map_or_else(
            || format!("`{}` failed: {}", tool.name, e.name()),
            str::to_string,
        );
        let data = (!e.fields().is_empty()).then(|| Value::Object(e.fields().clone()));
        CallError::Tool(ToolError {
            code: e.name(),
            message,
            data,
        })
    }

    /// Tells a cancelled call from a timed-out one once SQLite was interrupted.
    fn interrupted(
        &self,
        job: Job,
        e: ToolError,
        cancel: &AtomicBool,
        timeout: Duration,
    ) -> ToolError {
        if e.code != "TIMEOUT" {
            return e;
        }
        if cancel.load(Ordering::Relaxed) {
            ToolError::new(
                "CANCELLED",
                format!("`{}` was cancelled by the client", job.name),
            )
        } else {
            ToolError::new(
                "TIMEOUT",
                format!(
                    "`{}` took longer than {} ms and was stopped; narrow the request",
                    job.name,
                    timeout.as_millis()
                ),
            )
        }
    }

    /// Runs a job's statements on one session of `db`, in a transaction when it writes or
    /// has several statements, and bounds the size of the result.
    #[allow(clippy::too_many_arguments)]
    fn run(
        &self,
        db: &Database,
        job: Job,
        acting: Option<&crate::auth::Acting>,
        params: &[(&'static str, SqlValue)],
        args: &Arguments,
        stop: &Stop,
        request: u64,
    ) -> Result<Value, ToolError> {
        self.in_session(db, job, acting, stop, request, |session| {
            let v = self.run_statements(job, session, params, args, request)?;
            self.within_result_limit(job, approx_json_size(&v))?;
            Ok(v)
        })
    }

    /// [`Engine::run`]'s work in `session` for a job that is the one `one` or `optional`
    /// statement `st` (see [`Job::lone_row`]): its row written straight to JSON text (see
    /// [`row_text`]), with its approximate size.
    fn lone_row_text(
        &self,
        session: &mut dyn Session,
        job: Job,
        st: &'static StatementDef,
        params: &[(&'static str, SqlValue)],
        args: &Arguments,
        request: u64,
    ) -> Result<(String, usize), ToolError> {
        let bind = |name: &str| bound(st, name, params, &HashMap::new());
        let row = first_row_text(session, st, &bind).map_err(|f| self.db_error(job, f, request))?;
        let (text, size) = match row {
            Some(row) => row,
            None if st.mode == Mode::One => {
                let message = self.message(job, st, "not_found", args);
                return Err(ToolError::new("NOT_FOUND", message));
            }
            None => ("{}".to_string(), 2),
        };
        self.within_result_limit(job, size)?;
        Ok((text, size))
    }

    /// Runs `f` on one session of `db`, in a transaction when the job writes or has several
    /// statements; `READ_ONLY` when the job writes and the server is read-only.
    fn in_session<T>(
        &self,
        db: &Database,
        job: Job,
        acting: Option<&crate::auth::Acting>,
        stop: &Stop,
        request: u64,
        mut f: impl FnMut(&mut dyn Session) -> Result<T, ToolError>,
    ) -> Result<T, ToolError> {
        if stop.cancel.load(Ordering::Relaxed) {
            return Err(ToolError::new("TIMEOUT", "cancelled before it started"));
        }
        // A caller's call takes its role and claims for its own transaction only.
        let transaction = job.writes || job.statements.len() > 1 || acting.is_some();
        let f = |session: &mut dyn Session| {
            if let Some(acting) = acting {
                session
                    .act_as(acting.role(), acting.setting(), acting.claims())
                    .map_err(|e| self.db_error(job, e, request))?;
            }
            f(session)
        };
        let fail = |f: Failure| {
            // A job that gave way is run again elsewhere: its stop is no error.
            if f.kind == crate::backend::ErrorKind::Interrupted && stop.gave_way() {
                return ToolError::new("TIMEOUT", "gave way");
            }
            self.db_error(job, f, request)
        };
        db.job(job.writes, transaction, stop, fail, f)
            .unwrap_or_else(|| {
                Err(ToolError::new(
                    "READ_ONLY",
                    "this server is running read-only",
                ))
            })
    }

    /// What a verified token's identity keeps of its claims for this engine's calls.
    #[cfg(feature = "http")]
    pub(crate) fn kept_claims(&self) -> crate::auth::Kept {
        crate::auth::Kept::of(self.def, self.db.as_ref().map(|d| d.dialect().name))
    }

    /// The role and claims a call takes on a database whose side declares `identity:`: the
    /// caller's (refused when the token names a role outside the allow-list), and a refusal for
    /// a call without a caller, which would otherwise run as the server's own login.
    fn acting(
        &self,
        db: &Database,
        tool: &str,
        caller: Option<&crate::auth::Identity>,
    ) -> Result<Option<crate::auth::Acting>, ToolError> {
        let side = self
            .def
            .database
            .as_ref()
            .and_then(|d| d.engines.iter().find(|e| e.dialect == db.dialect().name));
        let Some(identity) = side.and_then(|s| s.identity.as_ref()) else {
            return Ok(None);
        };
        let Some(caller) = caller else {
            return Err(ToolError::new(
                "IDENTITY_REQUIRED",
                format!(
                    "`{tool}` runs as its caller's database role, and this request names no caller; call it over HTTP with an OAuth access token (serve --http ADDR --oauth-issuer URL)"
                ),
            ));
        };
        crate::auth::Acting::of(identity, caller).map(Some)
    }

    /// `RESULT_TOO_LARGE` when a result of about `size` bytes is larger than the result limit.
    fn within_result_limit(&self, job: Job, size: usize) -> Result<(), ToolError> {
        if size <= self.limits.max_result_bytes {
            return Ok(());
        }
        Err(too_large(job.name, size, self.limits.max_result_bytes))
    }

    /// Runs each statement in order; one statement's result is the tool's, several make an
    /// object keyed by statement name. Rows of `one` statements feed later statements' binds.
    fn run_statements(
        &self,
        job: Job,
        session: &mut dyn Session,
        params: &[(&'static str, SqlValue)],
        args: &Arguments,
        request: u64,
    ) -> Result<Value, ToolError> {
        let mut composite = Map::new();
        let mut raw_rows: HashMap<&str, HashMap<String, SqlValue>> = HashMap::new();
        for st in job.statements {
            let bind = |name: &str| bound(st, name, params, &raw_rows);
            let fail = |f: Failure| self.db_error(job, f, request);
            let part = match st.mode {
                Mode::Execute => {
                    let c = session
                        .execute(statement_sql(st, session.dialect()), &bind)
                        .map_err(fail)?;
                    if st.inserts {
                        json!({"changes": c.changes, "last_insert_id": c.last_insert_id})
                    } else {
                        json!({ "changes": c.changes })
                    }
                }
                Mode::Many => {
                    let page = (job.single && st.page.is_some())
                        .then(|| crate::cursor::page_size(st, args));
                    let many = self.many(session, st, &bind, page).map_err(fail)?;
                    if job.single {
                        return Ok(self.many_result(job, st, many, args));
                    }
                    Value::Array(many.rows)
                }
                Mode::Scalar => {
                    let v = scalar(session, st, &bind).map_err(fail)?;
                    if job.single {
                        let mut o = Map::new();
                        if !v.is_null() {
                            o.insert(st.key.to_string(), v);
                        }
                        return Ok(Value::Object(o));
                    }
                    v
                }
                Mode::One | Mode::Optional => {
                    match first_row(session, st, &bind, !job.single).map_err(fail)? {
                        Some((obj, raw)) => {
                            raw_rows.insert(st.name, raw);
                            Value::Object(obj)
                        }
                        None if st.mode == Mode::One => {
                            let message = self.message(job, st, "not_found", args);
                            return Err(ToolError::new("NOT_FOUND", message));
                        }
                        None if job.single => json!({}),
                        None => Value::Null,
                    }
                }
            };
            if job.single {
                return Ok(part);
            }
            if !part.is_null() {
                composite.insert(st.name.to_string(), part);
            }
        }
        Ok(Value::Object(composite))
    }

    /// The rows of a `many` statement, cut at its row cap (or, for a paged statement, its
    /// `page` size) or the size budget, whichever comes first (leaving room for the
    /// envelope); with whether they were cut and, for a paged statement with rows left, the
    /// last row's sort values.
    fn many(
        &self,
        session: &mut dyn Session,
        st: &'static StatementDef,
        bind: Bind<'_>,
        page: Option<usize>,
    ) -> Result<Many, Failure> {
        let mut many = Many::default();
        // The server's cap leaves room for the envelope; a statement's own counts the rows.
        let budget = capped(
            st.max_bytes,
            self.limits.max_result_bytes.saturating_sub(4096),
        );
        let cap = page.unwrap_or(st.max_rows as usize);
        let mut size = 0;
        let mut order = None;
        let mut keys: Option<Vec<Option<usize>>> = None;
        let mut last = Vec::new();
        session.query(statement_sql(st, session.dialect()), bind, &mut |row| {
            let full = many.rows.len() >= cap;
            if !full {
                let order = order.get_or_insert_with(|| row_order(row, st));
                let json = Value::Object(row_json(row, &order.columns));
                size += approx_json_size(&json) + 1;
                if size <= budget {
                    many.rows.push(json);
                    if let Some(p) = st.page.filter(|_| page.is_some()) {
                        let keys = keys.get_or_insert_with(|| {
                            let names = row.names();
                            p.by.iter()
                                .map(|c| names.iter().position(|n| n == c))
                                .collect()
                        });
                        last = keys
                            .iter()
                            .map(|k| k.map_or(SqlValue::Null, |i| row.value(i).to_owned()))
                            .collect();
                        many.missing =
                            p.by.iter()
                                .zip(keys.iter())
                                .find(|(_, k)| k.is_none())
                                .map(|(c, _)| *c);
                    }
                    return true;
                }
            }
            // A row past the page or the cap: the next page starts at it.
            many.truncated = page.is_none() || !full;
            if page.is_some() && !many.rows.is_empty() {
                many.after = Some(std::mem::take(&mut last));
            }
            false
        })?;
        // A query that fetches no row past the page: a full page may have a next.
        if let (Some(size), Some(p)) = (page, st.page)
            && !p.peek
            && many.after.is_none()
            && many.rows.len() >= size
        {
            many.after = Some(last);
        }
        Ok(many)
    }

    /// The result of a tool whose one statement returns many rows: the rows under the
    /// statement's key, the envelope, the truncation flag, the next page's cursor and the
    /// message (why it is empty, or cut short and how to see the rest).
    fn many_result(&self, job: Job, st: &StatementDef, many: Many, args: &Arguments) -> Value {
        let Many {
            mut rows,
            truncated,
            after,
            missing,
        } = many;
        let mut o = Map::new();
        let (empty, kept) = (rows.is_empty(), rows.len());
        self.envelope(st, &mut rows, &mut o, args);
        o.insert(st.key.to_string(), Value::Array(rows));
        if truncated {
            o.insert("truncated".into(), Value::Bool(true));
        }
        let next = match (after, st.page, missing) {
            (Some(values), Some(page), None) => Some(crate::cursor::seal(
                self.def.name,
                job.name,
                page.by,
                &values,
            )),
            (Some(_), Some(_), Some(column)) => {
                tracing::error!(
                    tool = job.name,
                    column,
                    "a `page.by` column is not in the result: no next page"
                );
                None
            }
            _ => None,
        };
        let message = match (&next, truncated) {
            (Some(_), true) => Some(format!(
                "{kept} rows fit in the result; more follow. Pass `next_cursor` as `cursor` to read on."
            )),
            (None, true) if empty => {
                Some("The next row is larger than the result may hold.".into())
            }
            (None, true) => Some(format!(
                "Only the first {kept} rows fit in the result; more matched. Narrow the arguments to see the others."
            )),
            _ if empty && st.empty_message.is_some() => Some(self.message(job, st, "empty", args)),
            _ => None,
        };
        if let Some(next) = next {
            o.insert(crate::def::NEXT_CURSOR_FIELD.into(), json!(next));
        }
        if let Some(m) = message {
            o.insert("message".into(), json!(m));
        }
        Value::Object(o)
    }

    /// Fills the envelope fields of a `many` result; `column:` fields move out of the rows.
    fn envelope(
        &self,
        st: &StatementDef,
        rows: &mut [Value],
        out: &mut Map<String, Value>,
        args: &Arguments,
    ) {
        let mut tokens_field = None;
        for (field, source) in st.envelope {
            let v = match source {
                EnvelopeDef::Count => json!(rows.len()),
                EnvelopeDef::Tokens => {
                    tokens_field = Some(*field);
                    continue;
                }
                EnvelopeDef::Arg(a) => match args.get(*a) {
                    Some(v) => v.clone(),
                    None => continue,
                },
                EnvelopeDef::Column(c) => {
                    let first = rows.first().and_then(|r| r.get(*c)).cloned();
                    for r in rows.iter_mut() {
                        if let Some(o) = r.as_object_mut() {
                            o.remove(*c);
                        }
                    }
                    first.unwrap_or(json!(0))
                }
            };
            out.insert((*field).to_string(), v);
        }
        if let Some(field) = tokens_field {
            // The rows and the fields so far, without the braces of the envelope itself.
            let size: usize = rows.iter().map(|r| approx_json_size(r) + 1).sum::<usize>()
                + approx_map_size(out)
                - 2;
            out.insert(field.to_string(), json!(size.div_ceil(4)));
        }
    }

    fn message(&self, job: Job, st: &StatementDef, kind: &str, args: &Arguments) -> String {
        let fallback = || match kind {
            "empty" => "No results.".to_string(),
            _ => format!("`{}` found nothing for these arguments.", job.name),
        };
        let Ok(t) = self.templates.get_template(&template_name(
            &format!("{}{}", job.prefix, job.name),
            st.name,
            kind,
        )) else {
            return fallback();
        };
        match t.render(minijinja::value::Serde(args)) {
            Ok(s) => s.trim().to_string(),
            Err(e) => {
                tracing::warn!(tool = job.name, error = %e, "message template failed");
                fallback()
            }
        }
    }

    /// Maps a database failure to a tool error without leaking SQL text or paths; the full
    /// error goes to the log with the request id.
    fn db_error(&self, job: Job, e: Failure, request: u64) -> ToolError {
        use crate::backend::ErrorKind as K;
        tracing::error!(request, tool = job.name, error = %e.message, "database error");
        match e.kind {
            // The caller tells a timeout from a cancellation.
            K::Interrupted => ToolError::new("TIMEOUT", "interrupted"),
            K::Constraint => ToolError {
                code: "CONSTRAINT_VIOLATION",
                message: format!("the database refused the change: {}", e.constraint),
                data: None,
            },
            K::Busy => ToolError::new(
                "DATABASE_BUSY",
                "the database is busy with another writer; try again shortly",
            ),
            K::ReadOnly => ToolError::new("READ_ONLY", "the database file is read-only"),
            K::Other => ToolError {
                code: "DATABASE_ERROR",
                message: format!(
                    "the database failed to run `{}` (request {request}; details are in the server log)",
                    job.name
                ),
                data: Some(json!({"request": request})),
            },
        }
    }
}

/// Opens the server's database at `location` with the engine its form selects (see
/// [`crate::backend::ENGINES`]); `None` when there is none to open.
fn open_database(
    def: &'static ServerDef,
    location: Option<&Location>,
    placing: Placing,
    limits: &Limits,
) -> Result<Option<(Database, Option<String>)>, StartError> {
    Ok(match (&def.database, location) {
        (Some(d), Some(at)) => {
            let db = Database::open(at, def.name, d, placing, limits.call_timeout)?;
            let failed = db.derive_in_place();
            Some((db, failed))
        }
        (None, Some(_)) => return Err(StartError::NoDatabase { server: def.name }),
        (_, None) => None,
    })
}

/// A tool ready to call: its parsed input schema, its defaults (environment defaults read
/// now), and its message templates added to `templates`.
fn compile_tool(
    def: &'static ServerDef,
    t: &'static ToolDef,
    templates: &mut minijinja::Environment<'static>,
) -> Result<CompiledTool, StartError> {
    let fail = |message: String| StartError::Tool {
        tool: t.name,
        spec: def.spec_file,
        message,
    };
    let schema: Value = serde_json::from_str(t.input_schema)
        .map_err(|e| fail(format!("input schema is not JSON: {e}")))?;

    let mut defaults = t
        .defaults
        .iter()
        .map(|(k, v)| {
            Ok((
                *k,
                serde_json::from_str(v).map_err(|e| fail(e.to_string()))?,
            ))
        })
        .collect::<Result<Vec<_>, StartError>>()?;
    // Environment defaults win over schema defaults and are read once, at start-up.
    for (arg, var) in t.env_defaults {
        if let Some(v) = std::env::var(var).ok().filter(|v| !v.is_empty()) {
            defaults.retain(|(k, _)| k != arg);
            defaults.push((*arg, Value::String(v)));
        }
    }
    if let Some(c) = &t.confirm {
        templates
            .add_template_owned(template_name(t.name, "confirm", "message"), c.message)
            .map_err(|e| fail(format!("confirmation template: {e}")))?;
    }
    if let BindingDef::Content(blocks) = &t.binding {
        for (i, b) in blocks.iter().enumerate() {
            for (part, source) in [("text", b.text), ("uri", b.uri)] {
                if let Some(src) = source {
                    templates
                        .add_template_owned(template_name(t.name, &format!("block{i}"), part), src)
                        .map_err(|e| fail(format!("content template: {e}")))?;
                }
            }
        }
    }
    for st in t.binding.statements() {
        for (kind, source) in [("empty", st.empty_message), ("not_found", st.not_found)] {
            if let Some(src) = source {
                templates
                    .add_template_owned(template_name(t.name, st.name, kind), src)
                    .map_err(|e| fail(format!("message template: {e}")))?;
            }
        }
    }
    Ok(CompiledTool {
        def: t,
        integers: crate::numbers::mentions_integer(&schema),
        schema,
        validator: std::sync::OnceLock::new(),
        defaults,
    })
}

/// The templates of the declared errors, resources and prompts.
fn add_server_templates(
    def: &'static ServerDef,
    templates: &mut minijinja::Environment<'static>,
) -> Result<(), StartError> {
    for e in def.errors {
        templates
            .add_template_owned(template_name("", e.name, "error"), e.message)
            .map_err(|err| StartError::Tool {
                tool: e.name,
                spec: def.spec_file,
                message: format!("error message template: {err}"),
            })?;
    }
    crate::templates::add_content(def, templates).map_err(|(name, message)| StartError::Tool {
        tool: name,
        spec: def.spec_file,
        message,
    })?;
    Ok(())
}

/// Every statement of the spec that does not prepare where `columns` prepares it, or returns
/// other columns than it declares, as one line each.
fn drift(
    def: &'static ServerDef,
    engine: &Dialect,
    columns: &dyn Fn(Sql<'_>) -> Result<Vec<Column>, String>,
) -> Vec<String> {
    let mut out = Vec::new();
    for t in def.tools {
        for st in t.binding.statements() {
            if let Err(message) = prepare_checked(columns, engine, st) {
                out.push(format!("tool `{}`: {message}", t.name));
            }
        }
    }
    for (what, st) in def.content_statements() {
        if let Err(message) = prepare_checked(columns, engine, st) {
            out.push(format!("{what}: {message}"));
        }
    }
    for (what, sql) in def.completion_queries() {
        if let Err(e) = columns(sql.into()) {
            out.push(format!(
                "{what}: the completion query does not prepare: {e}"
            ));
        }
    }
    out
}

/// Prepares a statement and checks that it returns the declared columns.
fn prepare_checked(
    columns: &dyn Fn(Sql<'_>) -> Result<Vec<Column>, String>,
    engine: &Dialect,
    st: &'static StatementDef,
) -> Result<(), String> {
    let actual = columns(statement_sql(st, engine))
        .map_err(|e| format!("statement `{}` does not prepare: {e}", st.name))?;
    if st.mode == Mode::Execute {
        return Ok(());
    }
    for c in st.columns {
        let Some(found) = actual.iter().find(|a| a.name == c.name) else {
            return Err(format!(
                "statement `{}` does not return the declared column `{}`",
                st.name, c.name
            ));
        };
        if let Some((ty, kinds)) = &found.typed
            && !kinds.contains(&c.kind.name())
        {
            return Err(format!(
                "statement `{}` returns column `{}` as {ty}, which does not read as the declared {}; cast it in the statement",
                st.name,
                c.name,
                c.kind.name()
            ));
        }
    }
    Ok(())
}

/// What to fix when statements do not prepare on the database: the spec, when they do not
/// prepare against the spec's own declared schema either (a wrong table or column in the
/// YAML), else the database (it drifted from the schema, or is another file).
fn which_side(def: &'static ServerDef, engine: &Dialect) -> String {
    if !engine.schemes.is_empty() {
        return format!(
            "the database differs from the schema the spec declares for {}: migrate it, or point --db at the right database (`cargo run -p codegen -- check` checks the spec itself)",
            engine.title
        );
    }
    let declared = def.database.as_ref().and_then(|db| {
        let ddl = format!("{}\n{}", db.schema, db.derived);
        let columns = crate::backend::scratch_columns(&ddl)?;
        Some(drift(def, &sqlscan::SQLITE, &|sql| columns(sql.text)))
    });
    match declared {
        Some(d) if !d.is_empty() => format!(
            "the spec is wrong: these statements do not prepare against the schema {} declares either; fix them there (`cargo run -p codegen -- check` points at each)",
            def.spec_file
        ),
        _ => "the database differs from the schema the spec declares: migrate it, or point --db at the right file".into(),
    }
}

/// The value of a named parameter: from an earlier statement's row when the statement binds
/// it so, else from the arguments; NULL when neither has it.
fn bound(
    st: &StatementDef,
    name: &str,
    params: &[(&'static str, SqlValue)],
    rows: &HashMap<&str, HashMap<String, SqlValue>>,
) -> SqlValue {
    if let Some((_, src, col)) = st.bind.iter().find(|(p, _, _)| *p == name) {
        return rows
            .get(src)
            .and_then(|r| r.get(*col))
            .cloned()
            .unwrap_or(SqlValue::Null);
    }
    params
        .iter()
        .find(|(p, _)| *p == name)
        .map_or(SqlValue::Null, |(_, v)| v.clone())
}

/// The first column of the first row of a `scalar` statement, as its declared type; null
/// without a row.
fn scalar(
    session: &mut dyn Session,
    st: &'static StatementDef,
    bind: Bind<'_>,
) -> Result<Value, Failure> {
    let mut v = Value::Null;
    session.query(statement_sql(st, session.dialect()), bind, &mut |row| {
        if let Some(&(idx, col)) = row_order(row, st).columns.first() {
            v = column_json(row.value(idx), col);
        }
        false
    })?;
    Ok(v)
}

/// The first row of a `one` or `optional` statement: its declared columns as JSON, and, when
/// `keep_raw`, every column's raw value for the binds of later statements.
#[allow(clippy::type_complexity)]
fn first_row(
    session: &mut dyn Session,
    st: &'static StatementDef,
    bind: Bind<'_>,
    keep_raw: bool,
) -> Result<Option<(Map<String, Value>, HashMap<String, SqlValue>)>, Failure> {
    let mut out = None;
    session.query(statement_sql(st, session.dialect()), bind, &mut |row| {
        // The raw values feed later statements' binds; a lone statement has none.
        let raw = if keep_raw {
            row.names()
                .iter()
                .enumerate()
                .map(|(i, n)| (n.to_string(), row.value(i).to_owned()))
                .collect()
        } else {
            HashMap::new()
        };
        out = Some((row_json(row, &row_order(row, st).columns), raw));
        false
    })?;
    Ok(out)
}

/// [`first_row`] for a lone statement: the row written as JSON text, with its size.
fn first_row_text(
    session: &mut dyn Session,
    st: &'static StatementDef,
    bind: Bind<'_>,
) -> Result<Option<(String, usize)>, Failure> {
    let mut out = None;
    session.query(statement_sql(st, session.dialect()), bind, &mut |row| {
        out = Some(row_text(row, &row_order(row, st).columns));
        false
    })?;
    Ok(out)
}

/// The most argument failures one error reports.
const MAX_REPORTED_ERRORS: usize = 20;

/// Validates arguments, naming every failing field (at most [`MAX_REPORTED_ERRORS`]).
pub(crate) fn validate(
    validator: &jsonschema::Validator,
    instance: &Value,
) -> Result<(), ToolError> {
    if validator.is_valid(instance) {
        return Ok(());
    }
    // (field, constraint, message), sorted so that the report is stable.
    let mut errors: Vec<(String, String, String)> = Vec::new();
    for e in validator.iter_errors(instance) {
        let path = e.instance_path().to_string();
        let mut field = path.trim_start_matches('/').replace('/', ".");
        let mut message = e.to_string();
        // The message quotes the value; a huge one is shortened, never sent back whole.
        let value = e.instance().to_string();
        if value.chars().nth(crate::transform::QUOTE_CHARS).is_some() {
            message = message.replace(&value, &crate::transform::quote(&value));
        }
        if message
            .chars()
            .nth(4 * crate::transform::QUOTE_CHARS)
            .is_some()
        {
            message = crate::transform::quote(&message);
        }
        let constraint = e.kind().keyword().to_string();
        match e.kind() {
            jsonschema::error::ValidationErrorKind::Required { property } => {
                if let Some(p) = property.as_str() {
                    field = p.to_string();
                    message = "is required".into();
                }
            }
            jsonschema::error::ValidationErrorKind::AdditionalProperties { unexpected } => {
                field = unexpected.join(", ");
                message = "is not an argument of this tool".into();
            }
            _ => {}
        }
        // A field is the client's own text (an unknown argument's name): quoted bounded.
        errors.push((crate::transform::quote(&field), constraint, message));
        if errors.len() >= 4 * MAX_REPORTED_ERRORS {
            break;
        }
    }
    errors.sort();
    errors.dedup();
    // A report names at most this many failures, and how many it left out.
    let left_out = errors.len().saturating_sub(MAX_REPORTED_ERRORS);
    errors.truncate(MAX_REPORTED_ERRORS);
    if left_out > 0 {
        errors.push((
            String::new(),
            "more".into(),
            format!("and at least {left_out} more"),
        ));
    }
    let text: Vec<String> = errors
        .iter()
        .map(|(f, _, m)| {
            if f.is_empty() {
                m.clone()
            } else {
                format!("`{f}` {}", strip_value_prefix(m))
            }
        })
        .collect();
    let fields: Vec<Value> = errors
        .iter()
        .map(|(f, c, m)| json!({"field": f, "constraint": c, "message": m}))
        .collect();
    let (field, constraint) = errors
        .first()
        .map(|(f, c, _)| (f.clone(), c.clone()))
        .unwrap_or_default();
    Err(ToolError {
        code: "INVALID_ARGUMENTS",
        message: format!("invalid arguments: {}", text.join("; ")),
        data: Some(json!({"field": field, "constraint": constraint, "errors": fields})),
    })
}

/// Where the arguments hold text with a NUL character, as a field path (`tags.0`), if they do.
fn nul_path(instance: &Value) -> Option<String> {
    fn find(v: &Value, path: &mut Vec<String>) -> bool {
        match v {
            Value::String(s) => s.contains('\0'),
            Value::Array(a) => a.iter().enumerate().any(|(i, x)| {
                path.push(i.to_string());
                find(x, path) || {
                    path.pop();
                    false
                }
            }),
            Value::Object(o) => o.iter().any(|(k, x)| {
                path.push(k.clone());
                find(x, path) || {
                    path.pop();
                    false
                }
            }),
            _ => false,
        }
    }
    let mut path = Vec::new();
    find(instance, &mut path).then(|| path.join("."))
}

/// A tool's or a statement's own byte cap, bounded by the server's.
fn capped(own: Option<u64>, server: usize) -> usize {
    own.map_or(server, |b| {
        usize::try_from(b).unwrap_or(usize::MAX).min(server)
    })
}

/// `RESULT_TOO_LARGE` for `tool`'s result of about `size` bytes, over `limit`.
fn too_large(tool: &str, size: usize, limit: usize) -> ToolError {
    ToolError {
        code: "RESULT_TOO_LARGE",
        message: format!(
            "the result of `{tool}` is about {size} bytes; the limit is {limit} bytes; ask for less"
        ),
        data: Some(json!({"size": size, "limit": limit})),
    }
}

/// Refuses text with a NUL character anywhere in the arguments, naming the field: PostgreSQL
/// cannot store it (see `Engine::nul_matters`).
fn refuse_nul(instance: &Value) -> Result<(), ToolError> {
    let Some(path) = nul_path(instance) else {
        return Ok(());
    };
    let field = crate::transform::quote(&path);
    let message = "contains a NUL character (U+0000), which the database cannot store";
    Err(ToolError::invalid_argument(&field, "nul", message))
}

/// The error for an integer argument that does not decode as `i64`.
fn bad_integer(e: crate::numbers::BadInteger) -> ToolError {
    ToolError {
        code: "INVALID_ARGUMENTS",
        message: format!("invalid arguments: `{}` is invalid: {}", e.field, e.message),
        data: Some(json!({
            "field": e.field,
            "constraint": "type",
            "errors": [{"field": e.field, "constraint": "type", "message": e.message}],
        })),
    }
}

/// jsonschema messages start with the offending value (`100 is greater than ...`); after the
/// field name the value reads better at the end, so keep the message as is but lowercased.
fn strip_value_prefix(m: &str) -> String {
    if m == "is required" || m == "is not an argument of this tool" {
        return m.to_string();
    }
    format!("is invalid: {m}")
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A call's outcome as the log and the metrics name it (`ok`, or the error code), and the
/// size of what it answered.
fn outcome(result: &Result<Reply, CallError>) -> (&str, usize) {
    match result {
        Ok(r) => ("ok", r.size()),
        Err(CallError::Tool(e)) => (e.code, e.message.len()),
        Err(CallError::Rpc(e)) => (
            e.data
                .get("code")
                .and_then(Value::as_str)
                .unwrap_or("rpc_error"),
            e.message.len(),
        ),
        Err(_) => ("protocol_error", 0),
    }
}

/// Refuses a call of `tool` that reads the caller (`:auth.sub`, `:auth.claims.NAME`) without
/// one (`IDENTITY_REQUIRED`), or whose caller's claims are not of the declared types.
fn caller_fits(
    tool: &'static ToolDef,
    caller: Option<&crate::auth::Identity>,
) -> Result<(), ToolError> {
    let name = tool.name;
    let reads_caller = tool.bind.0.iter().any(|(_, k)| {
        matches!(
            k,
            crate::def::ParamKind::AuthSub | crate::def::ParamKind::AuthClaim(_)
        )
    });
    match caller {
        Some(caller) => claims_fit(name, &tool.bind, caller),
        None if reads_caller => Err(ToolError::new(
            "IDENTITY_REQUIRED",
            format!(
                "`{name}` acts as its caller (its SQL reads `:auth.*`), and this request names none; call it over HTTP with an OAuth access token (serve --http ADDR --oauth-issuer URL)"
            ),
        )),
        None => Ok(()),
    }
}

/// Refuses a call (`FORBIDDEN`) whose caller's token has a claim the tool reads in another
/// type than the spec declares: the claim's name is said, never its value.
fn claims_fit(
    tool: &str,
    bind: &crate::def::Bind,
    caller: &crate::auth::Identity,
) -> Result<(), ToolError> {
    for (param, kind) in bind.0 {
        let crate::def::ParamKind::AuthClaim(kind) = kind else {
            continue;
        };
        let name = crate::params::claim_name(param);
        if let Some(v) = caller.claims.get(name)
            && !v.is_null()
            && !crate::params::claim_fits(v, *kind)
        {
            return Err(ToolError::new(
                "FORBIDDEN",
                format!(
                    "`{tool}` reads the access token's claim `{name}` as a {}, and the token's is not one",
                    kind.name()
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::basic;

    /// Drift names the side to fix: the database when the spec's statements prepare against
    /// its own declared schema, the spec when they do not (a wrong table in the YAML).
    #[test]
    fn drift_says_which_side_to_fix() {
        use crate::def::{DatabaseDef, ServerDef};
        let basic = &basic::SERVER;
        assert!(super::which_side(basic, &sqlscan::SQLITE).starts_with("the database differs"));
        let db = basic.database.as_ref().expect("basic has a database");
        let broken: &'static ServerDef = Box::leak(Box::new(ServerDef {
            name: basic.name,
            version: basic.version,
            title: basic.title,
            instructions: basic.instructions,
            spec_file: basic.spec_file,
            database: Some(DatabaseDef {
                env: db.env,
                default_linux: db.default_linux,
                default_macos: db.default_macos,
                default_windows: db.default_windows,
                read_only: db.read_only,
                // A declared schema the statements do not fit: the spec is what is wrong.
                schema: "CREATE TABLE notes (id TEXT);",
                derived: "",
                sample: None,
                engines: &[],
                migrations: &[],
            }),
            proxy: None,
            demo: &[],
            startup: &[],
            tools: basic.tools,
            toolsets: basic.toolsets,
            error_codes: basic.error_codes,
            errors: basic.errors,
            resources: basic.resources,
            prompts: basic.prompts,
            scopes: &[],
            issuer: None,
            examples: &[],
            embeddings: &[],
            skills: &[],
            token_budget: None,
        }));
        let fix = super::which_side(broken, &sqlscan::SQLITE);
        assert!(fix.starts_with("the spec is wrong"), "{fix}");
        assert!(fix.contains("tests/fixtures/basic/spec.yaml"), "{fix}");
    }

    /// An engine over a basic golden database of `notes`, in a directory that lives as long
    /// as the second value.
    fn basic_engine(notes: &[String]) -> (std::sync::Arc<super::Engine>, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("basic.db");
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(basic::SERVER.database.as_ref().unwrap().schema)
            .unwrap();
        for body in notes {
            conn.execute("INSERT INTO notes (body) VALUES (?1)", [body])
                .unwrap();
        }
        drop(conn);
        let engine = super::Engine::start(
            &basic::SERVER,
            Some(&path),
            false,
            super::Limits::default(),
            None,
        )
        .unwrap();
        (engine, dir)
    }

    /// On SQLite a tool of statements runs as many calls at once as there are readers, one
    /// at a time when it writes (the one writer): its places in `protocol::admission`.
    #[test]
    fn a_tool_of_statements_runs_as_many_calls_at_once_as_sqlite_can() {
        let (engine, _dir) = basic_engine(&[]);
        let at_once = |name: &str| engine.at_once(basic::SERVER.tool(name).unwrap());
        let readers = Some(crate::backend::sqlite::READERS);
        assert_eq!(at_once("search_notes"), readers);
        assert_eq!(at_once("find_note"), readers);
        assert_eq!(at_once("delete_note"), Some(1));
    }

    /// A statement's `max_bytes` keeps the rows that fit in it, whole, and flags the result
    /// `truncated`: the basic golden's `search_notes` (`max_bytes: 4096`) over 20 notes of
    /// 500 bytes each, which `max_rows` and `limit` would let through.
    #[test]
    fn max_bytes_keeps_the_rows_that_fit_and_says_so() {
        let body = format!("note {}", "x".repeat(495));
        let (engine, _dir) = basic_engine(&vec![body.clone(); 20]);
        let args = serde_json::json!({"q": "note", "limit": 20});
        let result = engine.call("search_notes", Some(&args)).unwrap().structured;
        let notes = result["notes"].as_array().unwrap();
        let size = serde_json::to_string(notes).unwrap().len();
        assert!(
            !notes.is_empty() && notes.len() < 20,
            "{} rows",
            notes.len()
        );
        assert!(size <= 4096, "{size} bytes");
        assert_eq!(result["truncated"], true);
        assert!(
            notes.iter().all(|n| n["body"] == body.as_str()),
            "rows are whole"
        );
        let kept = notes.len();
        assert_eq!(
            result["message"],
            format!(
                "Only the first {kept} rows fit in the result; more matched. Narrow the arguments to see the others."
            )
        );
    }

    /// A paged tool (the basic golden's `list_notes`, newest first, `LIMIT :page.size`) gives
    /// `next_cursor` after every full page, and the pages together are every note once, in
    /// order, whatever the page size: a full last page is followed by an empty one. (The
    /// knowledge e2e tests page with `:page.limit`, whose last page gives no cursor.)
    #[test]
    fn pages_hold_every_row_once_and_say_when_more_follow() {
        let (engine, _dir) =
            basic_engine(&(1..=9).map(|i| format!("note {i}")).collect::<Vec<_>>());
        let all: Vec<i64> = (1..=9).rev().collect();
        for (limit, pages) in [(1, 10), (2, 5), (3, 4), (9, 2), (10, 1)] {
            let (mut seen, mut cursor, mut n) = (Vec::new(), None, 0);
            loop {
                let mut args = serde_json::json!({ "limit": limit });
                if let Some(c) = cursor.take() {
                    args["cursor"] = c;
                }
                let out = engine.call("list_notes", Some(&args)).unwrap().structured;
                seen.extend(
                    out["notes"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|r| r["id"].as_i64().unwrap()),
                );
                assert!(out.get("truncated").is_none(), "{out}");
                n += 1;
                match out.get("next_cursor") {
                    Some(c) => cursor = Some(c.clone()),
                    None => break,
                }
            }
            assert_eq!((seen, n), (all.clone(), pages), "pages of {limit}");
        }
        // A cursor that is not one is refused, naming the argument.
        let args = serde_json::json!({"cursor": "rs2.e30.AAAA"});
        match engine.call("list_notes", Some(&args)) {
            Err(super::CallError::Tool(e)) => {
                assert_eq!(e.code, "INVALID_ARGUMENTS");
                assert_eq!(e.data.unwrap()["field"], "cursor");
            }
            other => panic!("{other:?}"),
        }
    }
}
