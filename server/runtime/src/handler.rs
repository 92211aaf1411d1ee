//! Rust handler bindings: what a hand-written handler receives and returns.
//!
//! Codegen emits, per server with `handler:` tools or resources, one trait per tool and per
//! resource, a `Handlers` trait that needs them all, typed output structs and a `dispatcher`. The runtime reaches the user's
//! implementation through [`Dispatch`], handed over with [`crate::Server::with_handlers`]. Handlers are plain
//! blocking functions: the engine runs them on its call threads (started on tokio's blocking pool), never on
//! the runtime.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::backend::{Database, Stop};
use crate::def::Arguments;

/// The deadline of a context made outside a call: none to speak of.
const NO_DEADLINE: std::time::Duration = std::time::Duration::from_secs(365 * 24 * 3600);

/// The name of the error a handler returns for an unexpected failure; the client sees a
/// sanitised message and the detail goes to the log.
pub const INTERNAL: &str = "INTERNAL_ERROR";

/// The name of the error a resource handler returns when the URI names nothing: the client
/// gets JSON-RPC -32002 (resource not found) with the URI in `data`.
pub const RESOURCE_NOT_FOUND: &str = "RESOURCE_NOT_FOUND";

/// How a call reaches its client: progress reports and requests to the client, both absent
/// outside an MCP session (the CLI's `call`, tests).
#[derive(Clone, Default)]
pub struct Link {
    pub progress: Option<ProgressSink>,
    pub client: Option<Arc<dyn ClientLink>>,
    /// What to do once a SQL call turns out slow (see [`crate::backend::Slow`]).
    pub slow: Option<crate::backend::Slow>,
    /// The call's deadline and cancellation, when the caller answers the call by its deadline
    /// itself (the MCP layer does); the engine makes its own otherwise.
    pub stop: Option<Stop>,
    /// Who is calling: the identity an OAuth access token named, over HTTP.
    pub caller: Option<Arc<crate::auth::Identity>>,
}

fn no_client() -> HandlerError {
    HandlerError::new("NO_CLIENT").message("this call has no client session to ask")
}

/// The error of a question the client could not answer: `SAMPLING_FAILED`,
/// `ELICITATION_FAILED` or `ROOTS_FAILED`.
fn failed(capability: &str, why: &str) -> HandlerError {
    let name = match capability {
        "sampling" => "SAMPLING_FAILED",
        "elicitation" => "ELICITATION_FAILED",
        _ => "ROOTS_FAILED",
    };
    HandlerError::new(name).message(format!("{capability} failed: {why}"))
}

/// An `ElicitResult` as the handler sees it.
fn elicited(answer: &Value) -> Elicited {
    Elicited {
        action: answer["action"].as_str().unwrap_or_default().to_string(),
        content: answer["content"].as_object().cloned(),
    }
}

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

/// The severity of a log message sent to the client, as MCP's `logging/setLevel` orders them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogLevel {
    Debug,
    Info,
    Notice,
    Warning,
    Error,
    Critical,
    Alert,
    Emergency,
}

/// One block of a tool result's `content`, as MCP sends it: the output of a handler whose
/// spec says `output: content`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Content {
    Text {
        text: String,
    },
    Image {
        /// Base64.
        data: String,
        #[serde(rename = "mimeType")]
        mime_type: String,
    },
    Audio {
        /// Base64.
        data: String,
        #[serde(rename = "mimeType")]
        mime_type: String,
    },
    Resource {
        resource: EmbeddedText,
    },
}

/// The text content of a resource embedded in a result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EmbeddedText {
    pub uri: String,
    #[serde(rename = "mimeType")]
    pub mime_type: String,
    pub text: String,
}

impl Content {
    pub fn text(text: impl Into<String>) -> Content {
        Content::Text { text: text.into() }
    }

    /// An image, `data` in base64.
    pub fn image(data: impl Into<String>, mime_type: impl Into<String>) -> Content {
        Content::Image {
            data: data.into(),
            mime_type: mime_type.into(),
        }
    }

    /// An audio clip, `data` in base64.
    pub fn audio(data: impl Into<String>, mime_type: impl Into<String>) -> Content {
        Content::Audio {
            data: data.into(),
            mime_type: mime_type.into(),
        }
    }

    /// A text resource embedded in the result.
    pub fn resource(
        uri: impl Into<String>,
        mime_type: impl Into<String>,
        text: impl Into<String>,
    ) -> Content {
        Content::Resource {
            resource: EmbeddedText {
                uri: uri.into(),
                mime_type: mime_type.into(),
                text: text.into(),
            },
        }
    }
}

/// The person's answer to an elicitation: `accept` (with the form's `content`), `decline` or
/// `cancel`.
#[derive(Debug, Clone, PartialEq)]
pub struct Elicited {
    pub action: String,
    pub content: Option<Map<String, Value>>,
}

/// The requests and notifications a handler may send to the client during its call. The MCP
/// layer implements it over the session; each method blocks the (blocking-pool) thread of the
/// handler until the client answered, never the async runtime.
pub trait ClientLink: Send + Sync {
    /// Sends `notifications/message` when `level` is at or above the level the client set.
    fn log(&self, level: LogLevel, logger: Option<&str>, data: Value);
    /// Asks the client every question and returns its results by key: under protocol
    /// 2025-11-25 as requests to the client, one after the other; under 2026-07-28 from the
    /// answers the retried call carries, or [`Unanswered::Later`] after recording the
    /// questions for the call's `input_required` result.
    fn ask(&self, questions: Vec<Question>) -> Result<Map<String, Value>, Unanswered>;
    /// Whether the client declared a capability (`sampling`, `elicitation`, `roots`, ...):
    /// in `initialize` (2025-11-25) or in the request's `_meta` (2026-07-28).
    fn supports(&self, capability: &str) -> bool;
    /// Sends `notifications/resources/updated` if the client subscribed to `uri`.
    fn resource_updated(&self, uri: &str);
    /// Makes the call a task (the tasks extension) if its tool may run as one and the client
    /// declared the extension; whether the call now runs as a task.
    fn background(&self) -> bool {
        false
    }
}

/// One question for the client, under the key its answer comes back with.
#[derive(Debug, Clone, PartialEq)]
pub struct Question {
    pub key: String,
    pub input: Input,
}

impl Question {
    pub fn new(key: impl Into<String>, input: Input) -> Question {
        Question {
            key: key.into(),
            input,
        }
    }
}

/// What a question asks the client for.
#[derive(Debug, Clone, PartialEq)]
pub enum Input {
    /// `elicitation/create`: the person fills a form; `schema` is a flat object schema of
    /// primitive properties. The answer is the `ElicitResult` (`action`, `content`).
    Elicit { message: String, schema: Value },
    /// `sampling/createMessage` with these params; the answer is the `CreateMessageResult`.
    Sample(Value),
    /// `roots/list`; the answer is the `ListRootsResult` (`roots`).
    Roots,
}

impl Input {
    /// The client capability the question needs: `elicitation`, `sampling` or `roots`.
    pub fn capability(&self) -> &'static str {
        match self {
            Input::Elicit { .. } => "elicitation",
            Input::Sample(_) => "sampling",
            Input::Roots => "roots",
        }
    }
}

/// Why the client's answers are not there.
#[derive(Debug, Clone, PartialEq)]
pub enum Unanswered {
    /// Protocol 2026-07-28: the questions go to the client in the call's `input_required`
    /// result, and the call runs again, from the start, with the answers. The handler stops
    /// here (it returns the error [`Context::ask`] gave it).
    Later,
    /// The client did not declare the capability the question needs.
    NoCapability(&'static str),
    /// The client was asked and the request failed (or the session ended).
    Failed(String),
}

/// The error name of a handler stopped to wait for the client's answers (protocol
/// 2026-07-28); the client never sees it, it gets the questions.
pub const INPUT_REQUIRED: &str = "INPUT_REQUIRED";

/// What a handler may use besides its arguments.
#[derive(Clone)]
pub struct Context {
    dir: PathBuf,
    /// The call's deadline and the flag the client's cancellation sets.
    pub(crate) stop: Stop,
    pub(crate) db: Option<Arc<Database>>,
    progress: Option<ProgressSink>,
    client: Option<Arc<dyn ClientLink>>,
    request: u64,
    /// Questions asked so far through `sample`, `elicit` and `roots`, for their keys.
    asked: Arc<std::sync::atomic::AtomicUsize>,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("dir", &self.dir)
            .field("cancelled", &self.is_cancelled())
            .field("database", &self.db.is_some())
            .field("request", &self.request)
            .finish()
    }
}

impl Context {
    /// A context for `dir` without database, cancellation or progress: for tests and tools.
    pub fn new(dir: impl Into<PathBuf>) -> Context {
        Context {
            dir: dir.into(),
            stop: Stop::after(NO_DEADLINE, Arc::default()),
            db: None,
            progress: None,
            client: None,
            request: 0,
            asked: Arc::default(),
        }
    }

    pub(crate) fn for_call(
        dir: PathBuf,
        stop: Stop,
        db: Option<Arc<Database>>,
        link: Link,
        request: u64,
    ) -> Context {
        Context {
            dir,
            stop,
            db,
            progress: link.progress,
            client: link.client,
            request,
            asked: Arc::default(),
        }
    }

    /// Sends a log message to the client (`notifications/message`), if it is at or above the
    /// level the client set with `logging/setLevel`; dropped without a client session.
    pub fn log(&self, level: LogLevel, data: impl Serialize) {
        if let Some(c) = &self.client {
            c.log(
                level,
                None,
                serde_json::to_value(data).unwrap_or(Value::Null),
            );
        }
    }

    /// Asks the client's model for a completion (`sampling/createMessage`) of one user message,
    /// and returns the text of its answer. Fails when the client cannot sample.
    pub fn sample(&self, prompt: &str, max_tokens: u32) -> Result<String, HandlerError> {
        let params = serde_json::json!({
            "messages": [{"role": "user", "content": {"type": "text", "text": prompt}}],
            "maxTokens": max_tokens,
        });
        let result = self.sample_raw(params)?;
        Ok(result["content"]["text"]
            .as_str()
            .unwrap_or_default()
            .to_string())
    }

    /// Sends `sampling/createMessage` with these params and returns the client's result as
    /// JSON.
    pub fn sample_raw(&self, params: Value) -> Result<Value, HandlerError> {
        let key = self.next_key("sampling");
        self.ask_one(key, Input::Sample(params))
    }

    /// Asks the person to fill a form (`elicitation/create`): `schema` is a flat object schema
    /// of primitive properties, with defaults and enums as MCP allows.
    pub fn elicit(&self, message: &str, schema: Value) -> Result<Elicited, HandlerError> {
        let key = self.next_key("elicitation");
        let input = Input::Elicit {
            message: message.to_string(),
            schema,
        };
        Ok(elicited(&self.ask_one(key, input)?))
    }

    /// The client's roots (`roots/list`): the `ListRootsResult` as JSON.
    pub fn roots(&self) -> Result<Value, HandlerError> {
        let key = self.next_key("roots");
        self.ask_one(key, Input::Roots)
    }

    /// Asks the client every question at once and returns its results by key. Under protocol
    /// 2026-07-28 the questions travel in one `input_required` result and the call runs again
    /// from the start with the answers, so a handler asks before it changes anything, and asks
    /// the same questions under the same keys each time it runs.
    pub fn ask(&self, questions: Vec<Question>) -> Result<Map<String, Value>, HandlerError> {
        let client = self.client.as_ref().ok_or_else(no_client)?;
        let first = questions.first().map(|q| q.input.capability());
        // The time the client takes to answer does not count towards the call's deadline.
        let paused = self.stop.pause();
        let answered = client.ask(questions);
        drop(paused);
        answered.map_err(|why| match why {
            Unanswered::Later => HandlerError::new(INPUT_REQUIRED)
                .message("the client is asked first; the call runs again with its answers"),
            Unanswered::NoCapability(c) => failed(c, &format!("the client does not support {c}")),
            Unanswered::Failed(m) => failed(first.unwrap_or("input"), &m),
        })
    }

    /// Goes on as a task (the tasks extension) when the tool's spec says `task:` and the
    /// client declared the extension: the call answers the client at once with a task id, and
    /// the handler's result becomes the task's. Questions asked after this wait for the
    /// client's `tasks/update`; ask what a retry round needs before calling it. Returns whether
    /// the call now runs as a task; when it does not, the handler simply goes on.
    pub fn background(&self) -> bool {
        self.client.as_ref().is_some_and(|c| c.background())
    }

    /// Whether the client declared a capability (`sampling`, `elicitation`, `roots`): a
    /// handler asks only what the client can answer, or fails with its own error.
    pub fn client_supports(&self, capability: &str) -> bool {
        self.client.as_ref().is_some_and(|c| c.supports(capability))
    }

    fn ask_one(&self, key: String, input: Input) -> Result<Value, HandlerError> {
        let mut answers = self.ask(vec![Question::new(key.clone(), input)])?;
        Ok(answers.remove(&key).unwrap_or(Value::Null))
    }

    /// The key of the next question of a kind, the same each time the call runs.
    fn next_key(&self, kind: &str) -> String {
        let n = self.asked.fetch_add(1, Ordering::Relaxed) + 1;
        format!("{kind}-{n}")
    }

    /// Tells clients subscribed to `uri` that the resource changed.
    pub fn resource_updated(&self, uri: &str) {
        if let Some(c) = &self.client {
            c.resource_updated(uri);
        }
    }

    /// The server's working directory: the project a handler works on.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Whether the client cancelled the call; a long handler checks it between steps.
    pub fn is_cancelled(&self) -> bool {
        self.stop.cancel.load(Ordering::Relaxed)
    }

    /// When the call must stop: its deadline (the tool's `timeout_ms`, else
    /// `MCPSPEC_CALL_TIMEOUT_MS`) and the client's cancellation. The call is answered with
    /// `TIMEOUT` at the deadline whatever the handler does; a handler that runs a long
    /// statement or program bounds it by this (a statement timeout, a cancel request, a kill),
    /// so that its work stops too.
    pub fn stop(&self) -> &Stop {
        &self.stop
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
}

/// Replaces the file at `path` with `bytes` through a temporary file in the same directory
/// and a rename, so that a reader sees the old or the new file, never half of one. Creates
/// the directory when missing.
pub fn replace_file(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    std::io::Write::write_all(&mut tmp, bytes)?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
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

    /// The dispatcher was asked for a resource it does not serve: a defect, reported as
    /// internal.
    pub fn unknown_resource(resource: &str) -> HandlerError {
        HandlerError::internal(format!("no handler is generated for resource `{resource}`"))
    }

    /// A resource handler's answer that its URI names nothing; `message` tells the client
    /// why (the URI itself is added to `data`).
    pub fn resource_not_found(message: impl Into<String>) -> HandlerError {
        HandlerError::new(RESOURCE_NOT_FOUND).message(message)
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

/// The values of a resource's URI template variables, percent-decoded, by variable name;
/// empty for a fixed URI.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResourceVars(BTreeMap<String, String>);

impl ResourceVars {
    /// The value of the variable `name`, e.g. `vars.get("name")` for `pm://database/{name}`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(String::as_str)
    }

    /// Every variable and its value, in name order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }
}

impl<K: Into<String>, V: Into<String>> FromIterator<(K, V)> for ResourceVars {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> ResourceVars {
        ResourceVars(
            iter.into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        )
    }
}

/// What a resource handler returns: text or bytes, each with a MIME type that overrides the
/// spec's `mime_type` when given.
#[derive(Debug, Clone, PartialEq)]
pub enum ResourceBody {
    Text {
        text: String,
        mime_type: Option<String>,
    },
    Blob {
        bytes: Vec<u8>,
        mime_type: Option<String>,
    },
}

impl ResourceBody {
    /// Text of the spec's MIME type.
    pub fn text(text: impl Into<String>) -> ResourceBody {
        ResourceBody::Text {
            text: text.into(),
            mime_type: None,
        }
    }

    /// Bytes of the spec's MIME type, sent base64-encoded as a `blob`.
    pub fn blob(bytes: impl Into<Vec<u8>>) -> ResourceBody {
        ResourceBody::Blob {
            bytes: bytes.into(),
            mime_type: None,
        }
    }

    /// A value as pretty-printed JSON text, of type `application/json`.
    pub fn json(value: &impl Serialize) -> Result<ResourceBody, HandlerError> {
        let text = serde_json::to_string_pretty(value).map_err(HandlerError::internal)?;
        Ok(ResourceBody::text(text).with_mime_type("application/json"))
    }

    /// Overrides the spec's MIME type for this answer.
    pub fn with_mime_type(self, mime: impl Into<String>) -> ResourceBody {
        let mime = Some(mime.into());
        match self {
            ResourceBody::Text { text, .. } => ResourceBody::Text {
                text,
                mime_type: mime,
            },
            ResourceBody::Blob { bytes, .. } => ResourceBody::Blob {
                bytes,
                mime_type: mime,
            },
        }
    }
}

/// A server's handlers as the engine calls them; implemented by the generated dispatcher.
pub trait Dispatch: Send + Sync {
    /// Runs the handler of `tool` with validated arguments and returns its output as JSON.
    fn call(&self, tool: &str, ctx: &Context, arguments: &Arguments)
    -> Result<Value, HandlerError>;

    /// Reads the handler resource named `resource` (its spec name) at `uri`, whose template
    /// variables are `vars`. Servers without handler resources keep this default.
    fn read(
        &self,
        resource: &str,
        ctx: &Context,
        uri: &str,
        vars: &ResourceVars,
    ) -> Result<ResourceBody, HandlerError> {
        let _ = (ctx, uri, vars);
        Err(HandlerError::unknown_resource(resource))
    }
}

/// Shared handlers: `mcpspec dev` gives every version of a server the same ones.
impl<D: Dispatch + ?Sized> Dispatch for Arc<D> {
    fn call(
        &self,
        tool: &str,
        ctx: &Context,
        arguments: &Arguments,
    ) -> Result<Value, HandlerError> {
        (**self).call(tool, ctx, arguments)
    }

    fn read(
        &self,
        resource: &str,
        ctx: &Context,
        uri: &str,
        vars: &ResourceVars,
    ) -> Result<ResourceBody, HandlerError> {
        (**self).read(resource, ctx, uri, vars)
    }
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

/// The handlers of a server a binary was not built with (`mcpspec dev` of another spec, the
/// examples `codegen check` runs): every handler tool and resource answers why it cannot run.
pub struct NoHandlers(pub &'static str);

impl NoHandlers {
    fn error(&self, what: &str) -> HandlerError {
        HandlerError::new("HANDLER_NOT_COMPILED").message(format!(
            "{what} runs a Rust handler, and this binary has no handlers for server `{}`; SQL tools, resources and prompts work in `dev`, handlers only in a binary built with them (`cargo build`, then serve it)",
            self.0
        ))
    }
}

impl Dispatch for NoHandlers {
    fn call(&self, tool: &str, _: &Context, _: &Arguments) -> Result<Value, HandlerError> {
        Err(self.error(&format!("tool `{tool}`")))
    }

    fn read(
        &self,
        resource: &str,
        _: &Context,
        _: &str,
        _: &ResourceVars,
    ) -> Result<ResourceBody, HandlerError> {
        Err(self.error(&format!("resource `{resource}`")))
    }
}

#[cfg(feature = "sqlite")]
impl Context {
    /// The server's SQLite database, for a handler that works on it directly: the explicit
    /// way from the backend-neutral handler API to SQLite's own connection (cargo feature
    /// `sqlite`).
    pub fn sqlite(&self) -> Result<crate::backend::sqlite::Sqlite<'_>, HandlerError> {
        use crate::backend::sqlite::{Pool, Sqlite};
        match self.db.as_deref().and_then(Database::backend::<Pool>) {
            Some(pool) => Ok(Sqlite::new(pool, &self.stop)),
            None => Err(HandlerError::internal(
                "the server declares no SQLite database",
            )),
        }
    }
}

#[cfg(feature = "sqlite")]
impl From<crate::backend::sqlite::ReadOnly> for HandlerError {
    fn from(e: crate::backend::sqlite::ReadOnly) -> Self {
        HandlerError::new("READ_ONLY").message(e.to_string())
    }
}
