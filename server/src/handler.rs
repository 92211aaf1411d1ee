//! Rust handler bindings: what a hand-written handler receives and returns.
//!
//! Codegen emits, per server with `handler:` tools, one trait per tool, a `Handlers` trait that
//! needs them all, typed output structs and a `dispatcher`. The runtime reaches the user's
//! implementation through [`Dispatch`], registered in [`crate::handlers`]. Handlers are plain
//! blocking functions: the engine runs them on tokio's blocking pool, never on the runtime.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use rusqlite::Connection;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::db::Pool;
use crate::def::Arguments;

/// The name of the error a handler returns for an unexpected failure; the client sees a
/// sanitised message and the detail goes to the log.
pub const INTERNAL: &str = "INTERNAL_ERROR";

/// One progress report: work done, the total when known, and a short message.
#[derive(Debug, Clone, PartialEq)]
pub struct Progress {
    pub done: f64,
    pub total: Option<f64>,
    pub message: Option<String>,
}

/// Where progress reports go: the MCP layer sends them as `notifications/progress` when the
/// client asked for progress, and drops them otherwise.
pub type ProgressSink = Arc<dyn Fn(Progress) + Send + Sync>;

/// What a handler may use besides its arguments.
#[derive(Clone)]
pub struct Context {
    dir: PathBuf,
    cancel: Arc<AtomicBool>,
    pool: Option<Arc<Pool>>,
    progress: Option<ProgressSink>,
    request: u64,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("dir", &self.dir)
            .field("cancelled", &self.is_cancelled())
            .field("database", &self.pool.is_some())
            .field("request", &self.request)
            .finish()
    }
}

impl Context {
    /// A context for `dir` without database, cancellation or progress: for tests and tools.
    pub fn new(dir: impl Into<PathBuf>) -> Context {
        Context {
            dir: dir.into(),
            cancel: Arc::default(),
            pool: None,
            progress: None,
            request: 0,
        }
    }

    pub(crate) fn for_call(
        dir: PathBuf,
        cancel: Arc<AtomicBool>,
        pool: Option<Arc<Pool>>,
        progress: Option<ProgressSink>,
        request: u64,
    ) -> Context {
        Context {
            dir,
            cancel,
            pool,
            progress,
            request,
        }
    }

    /// The server's working directory: the project a handler works on.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Whether the client cancelled the call; a long handler checks it between steps.
    pub fn is_cancelled(&self) -> bool {
        self.cancel.load(Ordering::Relaxed)
    }

    /// The request id that the call log and sanitised error messages carry.
    pub fn request_id(&self) -> u64 {
        self.request
    }

    /// Reports progress to the client, if it asked for progress.
    pub fn progress(&self, done: f64, total: Option<f64>, message: impl Into<String>) {
        if let Some(sink) = &self.progress {
            sink(Progress {
                done,
                total,
                message: Some(message.into()),
            });
        }
    }

    /// The server's database file, when it has one.
    pub fn database_path(&self) -> Option<&Path> {
        self.pool.as_deref().map(Pool::path)
    }

    /// Runs `f` on a reader connection of the server's database.
    pub fn read<T>(&self, f: impl FnOnce(&mut Connection) -> T) -> Result<T, HandlerError> {
        match &self.pool {
            Some(p) => Ok(p.read(f)),
            None => Err(HandlerError::internal("the server declares no database")),
        }
    }

    /// Runs `f` on the writer connection of the server's database.
    pub fn write<T>(&self, f: impl FnOnce(&mut Connection) -> T) -> Result<T, HandlerError> {
        match &self.pool {
            Some(p) => p
                .write(f)
                .ok_or_else(|| HandlerError::new("READ_ONLY").message("the server is read-only")),
            None => Err(HandlerError::internal("the server declares no database")),
        }
    }
}

/// A handler's failure: a name (a declared error of the spec, or any UPPER_SNAKE_CASE code),
/// fields for the message template and `data`, and for internal failures a detail that is
/// logged but never sent.
#[derive(Debug, Clone, PartialEq)]
pub struct HandlerError {
    name: &'static str,
    message: Option<String>,
    fields: Map<String, Value>,
    detail: Option<String>,
}

impl HandlerError {
    /// An error by name, e.g. `HandlerError::new("DB_NOT_ALLOWED").with("database", name)`.
    pub fn new(name: &'static str) -> HandlerError {
        HandlerError {
            name,
            message: None,
            fields: Map::new(),
            detail: None,
        }
    }

    /// Adds a field, available to the message template and copied into `data` when the
    /// declared error lists it.
    pub fn with(mut self, key: &str, value: impl Serialize) -> HandlerError {
        let v = serde_json::to_value(value).unwrap_or(Value::Null);
        self.fields.insert(key.to_string(), v);
        self
    }

    /// The message for an error the spec does not declare (a declared one renders its
    /// template).
    pub fn message(mut self, message: impl Into<String>) -> HandlerError {
        self.message = Some(message.into());
        self
    }

    /// An unexpected failure. The client sees only that the tool failed and the request id;
    /// `detail` (which may hold paths or command output) goes to the server log.
    pub fn internal(detail: impl std::fmt::Display) -> HandlerError {
        HandlerError {
            name: INTERNAL,
            message: None,
            fields: Map::new(),
            detail: Some(detail.to_string()),
        }
    }

    /// The dispatcher was asked for a tool it does not serve: a defect, reported as internal.
    pub fn unknown_tool(tool: &str) -> HandlerError {
        HandlerError::internal(format!("no handler is generated for tool `{tool}`"))
    }

    pub fn name(&self) -> &'static str {
        self.name
    }

    pub fn fields(&self) -> &Map<String, Value> {
        &self.fields
    }

    pub fn text(&self) -> Option<&str> {
        self.message.as_deref()
    }

    /// The logged-only detail of an internal failure.
    pub fn detail(&self) -> Option<&str> {
        self.detail.as_deref()
    }
}

impl std::fmt::Display for HandlerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (&self.message, &self.detail) {
            (Some(m), _) => write!(f, "{}: {m}", self.name),
            (None, Some(d)) => write!(f, "{}: {d}", self.name),
            (None, None) => write!(f, "{}", self.name),
        }
    }
}

impl std::error::Error for HandlerError {}

/// A server's handlers as the engine calls them; implemented by the generated dispatcher.
pub trait Dispatch: Send + Sync {
    /// Runs the handler of `tool` with validated arguments and returns its output as JSON.
    fn call(&self, tool: &str, ctx: &Context, arguments: &Arguments)
    -> Result<Value, HandlerError>;
}

/// The glue of one generated dispatch arm: decode the typed arguments, call the handler,
/// serialise its typed output.
pub fn run<A: DeserializeOwned, O: Serialize>(
    arguments: &Arguments,
    f: impl FnOnce(A) -> Result<O, HandlerError>,
) -> Result<Value, HandlerError> {
    let args: A = crate::def::decode(arguments).map_err(HandlerError::internal)?;
    let out = f(args)?;
    serde_json::to_value(out).map_err(HandlerError::internal)
}
