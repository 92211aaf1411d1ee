//! Parse stage: YAML text into raw spec structs that keep source positions.
//!
//! These types mirror the YAML one to one and are only read by `validate` and `lower`; nothing
//! is emitted from them directly. Unknown keys are rejected here: a first pass over the untyped
//! tree reports every one of them, each at its position with a "did you mean" among the keys
//! allowed at that place, before the typed parse. With the `editor-schema` feature the same
//! types, through their doc comments, give the JSON Schema that editors use.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::OnceLock;

use serde::Deserialize;
use serde_saphyr::Spanned;

use crate::diag::{Diagnostics, Pos, Sink, did_you_mean};

mod dialects;

use dialects::with_dialects;
pub(crate) use dialects::{DialectKeys, Dialected};

/// A value of the spec with where it was written (serde-saphyr's [`Spanned`]), in a type of
/// this crate so that the editor schema takes it for the value it holds: `JsonSchema` cannot be
/// implemented here for the foreign `Spanned`, and a field of it would otherwise say its
/// schema itself (`schemars(with = ...)`). Reads as the `Spanned` it holds.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(transparent)]
pub(crate) struct Sp<T>(Spanned<T>);

impl<T> std::ops::Deref for Sp<T> {
    type Target = Spanned<T>;

    fn deref(&self) -> &Spanned<T> {
        &self.0
    }
}

impl<T> Sp<T> {
    /// `value`, as written at `referenced` (an alias's value `defined` where its anchor is).
    pub(crate) const fn new(
        value: T,
        referenced: serde_saphyr::Location,
        defined: serde_saphyr::Location,
    ) -> Sp<T> {
        Sp(Spanned::new(value, referenced, defined))
    }
}

/// A [`Sp`] written as the value it holds: the editor schema writes a field's default
/// (`#[serde(default)]`) through it.
#[cfg(feature = "editor-schema")]
impl<T: serde::Serialize> serde::Serialize for Sp<T> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.value.serialize(serializer)
    }
}

/// The schema of the value a [`Sp`] holds, as the value's own.
#[cfg(feature = "editor-schema")]
impl<T: schemars::JsonSchema> schemars::JsonSchema for Sp<T> {
    fn inline_schema() -> bool {
        T::inline_schema()
    }

    fn schema_name() -> std::borrow::Cow<'static, str> {
        T::schema_name()
    }

    fn schema_id() -> std::borrow::Cow<'static, str> {
        T::schema_id()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        T::json_schema(generator)
    }
}

pub(crate) fn pos<T>(s: &Sp<T>) -> Pos {
    Pos::from_saphyr(s.referenced)
}

/// An mcpspec spec: one MCP server whose tools run SQL against a SQLite database.
#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "editor-schema", derive(schemars::JsonSchema))]
#[cfg_attr(
    feature = "editor-schema",
    schemars(title = "mcpspec spec", rename = "Spec")
)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawSpec {
    /// The server's identity, as sent in `initialize`.
    pub server: Sp<RawServer>,
    /// Where the database is and what it holds. Required when a tool runs SQL; a server whose
    /// tools are all Rust handlers may leave it out.
    pub database: Option<Sp<RawDatabase>>,
    /// Makes the server a proxy: it starts downstream MCP servers, re-exports their tools
    /// beside its own and passes each call through an interceptor that may block it (guard)
    /// or bundle a note with its result (hint).
    pub proxy: Option<Sp<RawProxy>>,
    /// The calls `mcpspec demo` makes, in order; the first call of each tool is also its example
    /// in the generated docs.
    #[serde(default)]
    pub demo: Vec<Sp<RawDemoCall>>,
    /// Work the server runs once in the background each time it starts serving: calls of its
    /// own tools, in order, on a thread of their own, so that `initialize` and the first calls
    /// never wait for them. Each outcome is logged to stderr; a failing job is logged and the
    /// server keeps serving. `MCPSPEC_STARTUP_JOBS=off` skips them.
    #[serde(default)]
    pub startup: Vec<Sp<RawStartupJob>>,
    /// The tools the server offers, in `tools/list` order.
    pub tools: Vec<Sp<RawTool>>,
    /// Named subsets of the tools, e.g. `read: [kb_get, kb_search]`: `serve --toolset NAME`
    /// (repeatable) offers only the tools of the sets it names, so that a client that needs
    /// fewer pays for fewer in its context (`mcpspec tokens` says how much each costs). A tool
    /// outside them is neither listed nor called; resources and prompts are unchanged.
    #[serde(default)]
    pub toolsets: BTreeMap<String, Sp<Vec<Sp<String>>>>,
    /// Renames of the runtime's error codes for this server, e.g.
    /// `INVALID_ARGUMENTS: VALIDATION_ERROR`.
    #[serde(default)]
    pub error_codes: BTreeMap<String, Sp<String>>,
    /// The server's JSON-RPC errors and the failures that map to them. A call failing with a
    /// declared error is answered with a JSON-RPC error `{code, message, data: {code: NAME, ...}}`
    /// instead of a tool result with `isError`.
    #[serde(default)]
    pub errors: Vec<Sp<RawError>>,
    /// MCP resources: data the client may read by URI, fixed or from a URI template, made by a
    /// statement and a minijinja template.
    #[serde(default)]
    pub resources: Vec<Sp<RawResource>>,
    /// MCP prompts: message templates a person picks in the client, with arguments.
    #[serde(default)]
    pub prompts: Vec<Sp<RawPrompt>>,
    /// Embedding providers, by name: what turns text into the vectors the statements store
    /// and search (a tool's `derive: {from: ARG, embed: NAME}`, and `:embeddings.NAME.model`,
    /// the model that made them). Each declares its vectors' dimensions, which every column
    /// that holds them must have: checked in each schema at build time and in a live database
    /// at start-up.
    #[serde(default)]
    pub embeddings: BTreeMap<String, Sp<RawEmbedding>>,
    /// Skills the server serves over MCP's Skills extension (SEP-2640), each a directory
    /// beside the spec in the Agent Skills layout, e.g. `skills/notes`: a `SKILL.md` whose
    /// front matter gives the skill's `name` (the directory's name) and `description`, and
    /// any other files (`references/`, `assets/`). Every file is a resource
    /// `skill://<name>/<path>`, listed with its SHA-256 digest by `skills/list`; the files are
    /// read when the spec compiles (at most 512 per skill and 16 MiB in all), and a file whose
    /// name starts with `.` is left out.
    #[serde(default)]
    pub skills: Vec<Sp<String>>,
}

/// An embedding provider.
#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "editor-schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "editor-schema", schemars(rename = "Embedding"))]
#[serde(deny_unknown_fields)]
pub(crate) struct RawEmbedding {
    /// The vectors' dimensions; every column that holds them (`stored_in`) has these.
    pub dimensions: Sp<u32>,
    /// Where the vectors come from: `static:DIR` (a static model: `model.safetensors` and
    /// `tokenizer.json` in DIR, relative to the working directory unless absolute, `~/` the
    /// home directory; no network; the model is named after DIR), `openai:BASE_URL`
    /// (an OpenAI-compatible `POST BASE_URL/embeddings`, which OpenAI, Ollama, vLLM,
    /// llama.cpp's server and TEI speak; needs `model`), or `env:VAR` (chosen when the server
    /// starts: VAR holds `static:DIR` or `openai:BASE_URL`, `VAR_MODEL` the model,
    /// `VAR_DIMENSIONS` the provider's dimensions when set, which must equal `dimensions`;
    /// VAR unset means no embeddings).
    pub provider: Sp<String>,
    /// The model an `openai:` provider is asked for, e.g. `text-embedding-3-small`.
    pub model: Option<Sp<String>>,
    /// The environment variable holding an HTTP provider's key (default `OPENAI_API_KEY`);
    /// the key itself never appears in a spec, a log, an error or a result.
    pub key_env: Option<Sp<String>>,
    /// The most texts one request carries (default 64): concurrent calls' texts are sent
    /// together up to it.
    pub batch: Option<Sp<u32>>,
    /// How long one request may take, in milliseconds (default 30000).
    pub timeout_ms: Option<Sp<u64>>,
    /// How often a failed request is tried again (default 3), after a backoff with jitter
    /// that honours `Retry-After` on 429 and 5xx answers.
    pub retries: Option<Sp<u32>>,
    /// The columns that hold this provider's vectors, as `table.column`: SQLite's
    /// `F32_BLOB(N)` (or a `vec0` table's `float[N]`), PostgreSQL's `vector(N)` (pgvector),
    /// MariaDB's `VECTOR(N)`.
    #[serde(default)]
    pub stored_in: Vec<Sp<String>>,
}

/// An MCP resource: exactly one of `uri` and `uri_template`, and at least one of `sql` and
/// `template`, or a `blob`, or a Rust `handler`.
#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "editor-schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "editor-schema", schemars(rename = "Resource"))]
#[serde(deny_unknown_fields)]
pub(crate) struct RawResource {
    /// A fixed URI, e.g. `knowledge://stats`.
    pub uri: Option<Sp<String>>,
    /// An RFC 6570 level 1 URI template, e.g. `knowledge://entry/{id}`; each variable binds as
    /// an SQL parameter (as text) and is a variable of the template.
    pub uri_template: Option<Sp<String>>,
    /// The resource's name, unique in the server.
    pub name: Sp<String>,
    /// A human-readable name for clients to show.
    pub title: Option<String>,
    /// What the resource holds.
    pub description: Option<String>,
    /// The content's MIME type; `text/plain` with a `template`, `application/json` without.
    pub mime_type: Option<Sp<String>>,
    /// A read-only statement like a tool's `sql`; its result is `data` in the template.
    pub sql: Option<Sp<RawStatement>>,
    /// A minijinja template over the URI template's variables and `data`; without it the
    /// content is `data` as JSON.
    pub template: Option<Sp<String>>,
    /// Fixed binary content in base64, read as a `blob` (instead of `sql` and `template`).
    pub blob: Option<Sp<String>>,
    /// The Rust method that makes the content (instead of `sql`, `template` and `blob`): it
    /// gets the URI and its template variables and returns text or bytes.
    pub handler: Option<Sp<String>>,
    /// Completion of URI template variables: `variable: SQL`, where `:value` is the partial
    /// text and the first column of each row is a candidate.
    #[serde(default)]
    pub complete: BTreeMap<String, Sp<String>>,
    /// OAuth scopes a caller needs to read the resource, besides the server's `scopes`.
    #[serde(default)]
    pub scopes: Vec<Sp<String>>,
}

/// An MCP prompt: arguments, an optional statement, and the messages it renders.
#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "editor-schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "editor-schema", schemars(rename = "Prompt"))]
#[serde(deny_unknown_fields)]
pub(crate) struct RawPrompt {
    /// The prompt's name, unique in the server.
    pub name: Sp<String>,
    /// A human-readable name for clients to show.
    pub title: Option<String>,
    /// What the prompt is for.
    pub description: Option<String>,
    /// The prompt's arguments, strings given by the person.
    #[serde(default)]
    pub arguments: Vec<Sp<RawPromptArgument>>,
    /// Questions for the person, asked before the messages render; each answer is
    /// `answers.<key>` in the messages.
    #[serde(default)]
    pub ask: Vec<Sp<RawAsk>>,
    /// A read-only statement like a tool's `sql`; the arguments bind as its parameters and its
    /// result is `data` in the messages.
    pub sql: Option<Sp<RawStatement>>,
    /// The messages, in order.
    pub messages: Vec<Sp<RawMessage>>,
    /// OAuth scopes a caller needs to get the prompt, besides the server's `scopes`.
    #[serde(default)]
    pub scopes: Vec<Sp<String>>,
}

/// An argument of a prompt.
#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "editor-schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "editor-schema", schemars(rename = "PromptArgument"))]
#[serde(deny_unknown_fields)]
pub(crate) struct RawPromptArgument {
    /// The argument's name; a variable of the messages and an SQL parameter.
    pub name: Sp<String>,
    /// What to give.
    pub description: Option<String>,
    /// Whether `prompts/get` must pass it.
    #[serde(default)]
    pub required: bool,
    /// Completion SQL: `:value` is the partial text, the first column of each row a candidate.
    pub complete: Option<Sp<String>>,
}

/// A question a prompt asks the person (a form, `elicitation/create`) before it renders.
#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "editor-schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "editor-schema", schemars(rename = "Ask"))]
#[serde(deny_unknown_fields)]
pub(crate) struct RawAsk {
    /// The answer's name: the messages read the accepted form as `answers.<key>`.
    pub key: Sp<String>,
    /// What the client shows the person.
    pub message: Sp<String>,
    /// The form: an object schema of string, number, integer or boolean properties.
    #[cfg_attr(
        feature = "editor-schema",
        schemars(with = "serde_json::Map<String, serde_json::Value>")
    )]
    pub schema: Sp<serde_json::Value>,
}

/// A message of a prompt: exactly one of `text`, `resource` and `image`.
#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "editor-schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "editor-schema", schemars(rename = "Message"))]
#[serde(deny_unknown_fields)]
pub(crate) struct RawMessage {
    /// `user` or `assistant`.
    #[cfg_attr(feature = "editor-schema", schemars(with = "MessageRole"))]
    pub role: Sp<String>,
    /// A minijinja template over the arguments and `data`.
    pub text: Option<Sp<String>>,
    /// The URI of a declared resource, embedded with its content; may use `{{ }}` over the
    /// arguments.
    pub resource: Option<Sp<String>>,
    /// An image in base64; needs `mime_type`.
    pub image: Option<Sp<String>>,
    /// The MIME type of an `image` message, e.g. `image/png`.
    pub mime_type: Option<Sp<String>>,
}

/// A declared error: a name, a JSON-RPC code and a message template.
#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "editor-schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "editor-schema", schemars(rename = "Error"))]
#[serde(deny_unknown_fields)]
pub(crate) struct RawError {
    /// UPPER_SNAKE_CASE; a handler returns it with `HandlerError::new("NAME")`, and it is
    /// `data.code` in the response.
    pub name: Sp<String>,
    /// The JSON-RPC error code, in the server range -32000 to -32099.
    pub code: Sp<i64>,
    /// A minijinja template over the error's fields and the call's arguments.
    pub message: Sp<String>,
    /// The fields copied into `data` beside `code`.
    #[serde(default)]
    pub data: Vec<Sp<String>>,
    /// Failures of the runtime that become this error. (Not `on:`, which YAML 1.1 reads as
    /// `true`.)
    #[serde(default)]
    pub rules: Vec<Sp<RawRule>>,
}

/// A failure that becomes a declared error.
#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "editor-schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "editor-schema", schemars(rename = "Rule"))]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRule {
    /// `invalid` (an argument failed its schema; needs `field`), `constraint` (SQLite refused a
    /// write), `no_row` (a `one` statement found nothing) or `no_change` (a write changed no
    /// rows).
    #[cfg_attr(feature = "editor-schema", schemars(with = "RuleKind"))]
    pub when: Sp<String>,
    /// The argument whose validation failure this rule maps (with `when: invalid`).
    pub field: Option<Sp<String>>,
    /// Only these tools; every tool when omitted.
    #[serde(default)]
    pub tools: Vec<Sp<String>>,
}

/// A destructive tool's confirmation rule.
#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "editor-schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "editor-schema", schemars(rename = "Confirm"))]
#[serde(deny_unknown_fields)]
pub(crate) struct RawConfirm {
    /// The boolean argument that must be `true` for the call to run.
    pub argument: Sp<String>,
    /// A minijinja template over the arguments, shown to the person when the client supports
    /// elicitation: say what will be destroyed.
    pub message: Sp<String>,
}

/// The server's identity.
#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "editor-schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "editor-schema", schemars(rename = "Server"))]
#[serde(deny_unknown_fields)]
pub(crate) struct RawServer {
    /// Lowercase letters, digits, `_` and `-`, starting with a letter; the name in
    /// `mcpspec serve NAME` and in generated file names.
    pub name: Sp<String>,
    /// The contract's SemVer version, `MAJOR.MINOR.PATCH`; `codegen check` asks for a major step
    /// when a tool's contract breaks.
    pub version: Sp<String>,
    /// A human-readable name for clients to show.
    pub title: Option<String>,
    /// Guidance for the model on when to use the server's tools, sent in `initialize`.
    pub instructions: Option<String>,
    /// Markdown for people, appended to the generated reference `docs/<server>.md`: how the
    /// server's handlers work, and why.
    pub docs: Option<String>,
    /// OAuth scopes every request of a caller must have, over HTTP with `--oauth-issuer`
    /// (tools, resources and prompts may ask for more with their own `scopes`); listed in the
    /// protected resource metadata. A request without them is refused with 403
    /// `insufficient_scope` naming the scopes to ask for.
    #[serde(default)]
    pub scopes: Vec<Sp<String>>,
    /// The OAuth issuer whose access tokens the server accepts over HTTP, when neither
    /// `--oauth-issuer` nor `MCPSPEC_OAUTH_ISSUER` names one.
    pub issuer: Option<Sp<String>>,
    /// Claims of the caller's access token that statements may read as `:auth.claims.NAME`,
    /// each with its type: `string`, `integer`, `number` or `boolean`. A claim the token lacks
    /// binds NULL; one of another type refuses the call (`FORBIDDEN`). `:auth.sub` needs no
    /// declaration.
    #[serde(default)]
    pub claims: BTreeMap<String, Sp<String>>,
    /// The most the tool list may cost a client's context before any call, in tokens as
    /// `mcpspec tokens` estimates them (its `tools/list` JSON at four bytes a token): `check`
    /// warns, without failing, when the whole list or a toolset's costs more.
    pub token_budget: Option<Sp<u64>>,
}

/// The database the tools run against, with a side per database server it also runs on
/// (`postgres:`, `mysql:`; see [`DialectKeys`]).
pub(crate) type RawDatabase = Dialected<RawDatabaseFields>;

/// The SQLite database the tools run against.
#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "editor-schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "editor-schema", schemars(rename = "Database"))]
#[serde(deny_unknown_fields)]
pub(crate) struct RawDatabaseFields {
    /// The environment variable that overrides the default path.
    pub env: Option<Sp<String>>,
    /// Default locations per operating system; `~` expands to the home directory.
    #[serde(default)]
    pub default_path: RawDefaultPath,
    /// `read_only` or `read_write` (the default).
    #[serde(default)]
    #[cfg_attr(feature = "editor-schema", schemars(with = "Option<AccessMode>"))]
    pub access: Option<Sp<String>>,
    /// The DDL the tools expect, run by `mcpspec init`.
    pub schema: Sp<String>,
    /// Sample rows as SQL, loaded by `mcpspec init --sample` and the demo.
    pub sample: Option<Sp<String>>,
    /// Structures derived from the data that the queries use (indexes, side tables, counters
    /// and the triggers that keep them current), as idempotent SQLite DDL. `init` applies them
    /// after the schema. A database mcpspec did not create is never changed: the server builds
    /// them in a mirror under the cache directory, over copies of the tables they name, kept
    /// current as the database changes (or in the database itself with `--derive-in-place`).
    pub derived: Option<Sp<String>>,
    /// Full-text indexes: FTS5 tables kept in sync with their source tables by triggers;
    /// placed like `derived` (in the database `init` made, else in a mirror), and filled from
    /// the source table when first made.
    #[serde(default)]
    pub fts: Vec<Sp<RawFts>>,
    /// A directory of versioned migrations, relative to the spec file: `0001_init.sql`,
    /// `0002_add_due_date.sql`, ... (SQLite's text, which the other engines run too unless a
    /// `0002_add_due_date.postgres.sql` or `.mysql.sql` beside it gives theirs). `init` runs
    /// them all, `mcpspec migrate` runs the ones a database lacks and records each in its
    /// `mcpspec_migrations` table, and `codegen check` proves that they give `schema`.
    pub migrations: Option<Sp<String>>,
}

impl DialectKeys for RawDatabaseFields {
    type Value = RawEngine;

    #[cfg(feature = "editor-schema")]
    fn describe(d: &sqlscan::Dialect) -> String {
        let scheme = d.schemes.first().copied().unwrap_or(d.name);
        format!(
            "The server also runs on {} (a `{scheme}://` URL from `--db` or the environment): its side \
             of the database, the schema and sample rows `mcpspec init --db {scheme}://...` creates \
             there. Statements whose SQL differs there give `{}:` text.",
            d.title, d.name
        )
    }

    fn keys() -> &'static [&'static str] {
        static KEYS: OnceLock<&'static [&'static str]> = OnceLock::new();
        KEYS.get_or_init(|| with_dialects(crate::fields::of::<RawDatabaseFields>()))
    }
}

/// A database's side on a database server (`database.postgres`).
#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "editor-schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "editor-schema", schemars(rename = "DatabaseSide"))]
#[serde(deny_unknown_fields)]
pub(crate) struct RawEngine {
    /// Another environment variable that may hold the database URL, read after `env`
    /// (e.g. `DATABASE_URL`).
    pub env: Option<Sp<String>>,
    /// The DDL run by `mcpspec init --db postgres://...`.
    pub schema: Sp<String>,
    /// Sample rows as SQL, loaded by `mcpspec init --sample`.
    pub sample: Option<Sp<String>>,
    /// PostgreSQL only: each call of a caller (an OAuth access token over HTTP) runs in a
    /// transaction that first takes the role the token names and puts the token's claims in a
    /// setting, so that row-level security policies see who is calling (the PostgREST way). A
    /// call without a caller is refused.
    pub identity: Option<Sp<RawIdentity>>,
}

/// How a caller's access token becomes the database's idea of who is calling (PostgreSQL).
#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "editor-schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "editor-schema", schemars(rename = "Identity"))]
#[serde(deny_unknown_fields)]
pub(crate) struct RawIdentity {
    /// The claim that names the role to take (`SET LOCAL ROLE`), e.g. `role`; without it, or
    /// when the token lacks the claim, the call runs as the first of `roles`.
    pub role_claim: Option<Sp<String>>,
    /// The roles a call may take; a token naming another is refused before any statement.
    /// The server's login role must be a member of each.
    pub roles: Vec<Sp<String>>,
    /// The setting that receives the token's claims as JSON (`set_config(setting, claims,
    /// true)`, transaction-local), e.g. `request.jwt.claims`; policies read it with
    /// `current_setting('request.jwt.claims', true)::json->>'sub'`.
    pub claims_setting: Sp<String>,
}

/// Proxy bindings: the downstream servers and the interceptor in front of them.
#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "editor-schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "editor-schema", schemars(rename = "Proxy"))]
#[serde(deny_unknown_fields)]
pub(crate) struct RawProxy {
    /// A JSON file read at start-up that lists more downstream servers:
    /// `{"version": 1, "proxyServers": [{"name", "command", "args", "env"}]}`.
    pub config: Option<Sp<RawProxyConfig>>,
    /// Downstream servers started by every instance, before those of the config file.
    #[serde(default)]
    pub servers: Vec<Sp<RawDownstream>>,
    /// Downstream tool names mapped to the canonical names the interceptor sees as `:tool`,
    /// e.g. `start_process: Bash`; a tool not listed keeps its own name.
    #[serde(default)]
    pub normalize: BTreeMap<String, Sp<String>>,
    /// The argument names that give `:command` and `:file_path`, first present wins.
    pub extract: Option<Sp<RawExtract>>,
    /// What blocks a call or bundles a hint with its result.
    pub intercept: Option<Sp<RawIntercept>>,
}

/// Where the downstream config file is.
#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "editor-schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "editor-schema", schemars(rename = "ProxyConfig"))]
#[serde(deny_unknown_fields)]
pub(crate) struct RawProxyConfig {
    /// The environment variable that names the file, overriding the default path.
    pub env: Option<Sp<String>>,
    /// Default locations per operating system; `~` expands to the home directory. A missing
    /// file means no downstream servers from the file.
    #[serde(default)]
    pub default_path: RawDefaultPath,
}

/// A downstream MCP server, started as a child process speaking MCP over stdio.
#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "editor-schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "editor-schema", schemars(rename = "Downstream"))]
#[serde(deny_unknown_fields)]
pub(crate) struct RawDownstream {
    /// A name for logs and errors; unique among the downstream servers.
    pub name: Sp<String>,
    /// The program to start.
    pub command: Sp<String>,
    /// Its arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// Extra environment variables for it.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
}

/// The argument names the interceptor reads.
#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "editor-schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "editor-schema", schemars(rename = "Extract"))]
#[serde(deny_unknown_fields)]
pub(crate) struct RawExtract {
    /// Arguments that give `:command`, first present wins.
    #[serde(default)]
    pub command: Vec<Sp<String>>,
    /// Arguments that give `:file_path`, first present wins; of an array, its first string.
    #[serde(default)]
    pub file_path: Vec<Sp<String>>,
}

/// The interceptor: static rules, then a query on the server's database.
#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "editor-schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "editor-schema", schemars(rename = "Intercept"))]
#[serde(deny_unknown_fields)]
pub(crate) struct RawIntercept {
    /// Rules checked before the query.
    #[serde(default)]
    pub rules: Vec<Sp<RawInterceptRule>>,
    /// A query run per proxied call that returns the matching `key`, `action` (`guard` or
    /// `hint`) and `message` columns. Parameters: `:tool` (canonical), `:tool_name`,
    /// `:server`, `:command`, `:file_path`, `:arguments` (JSON text) and `:project`.
    pub sql: Option<Sp<String>>,
}

/// A static interceptor rule; every condition given must hold.
#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "editor-schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "editor-schema", schemars(rename = "InterceptRule"))]
#[serde(deny_unknown_fields)]
pub(crate) struct RawInterceptRule {
    /// The rule's name, reported as the lesson of a block and used to inject a hint once.
    pub key: Sp<String>,
    /// Canonical tool names it applies to; every tool when omitted.
    #[serde(default)]
    pub tools: Vec<Sp<String>>,
    /// A regular expression `:command` must match.
    pub command: Option<Sp<String>>,
    /// A regular expression `:file_path` must match.
    pub file_path: Option<Sp<String>>,
    /// `guard` (block the call) or `hint` (bundle the message with the result).
    #[cfg_attr(feature = "editor-schema", schemars(with = "InterceptAction"))]
    pub action: Sp<String>,
    /// What the model is told.
    pub message: Sp<String>,
}

/// A full-text index over some columns of a table.
#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "editor-schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "editor-schema", schemars(rename = "Fts"))]
#[serde(deny_unknown_fields)]
pub(crate) struct RawFts {
    /// The FTS5 table to create.
    pub table: String,
    /// The table whose rows it indexes (by rowid).
    pub source: String,
    /// The source columns to index.
    pub columns: Vec<String>,
    /// An FTS5 tokenizer, e.g. `porter unicode61`.
    pub tokenize: Option<String>,
}

/// A backfill: rows embedded in batches until none is left.
#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "editor-schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "editor-schema", schemars(rename = "Backfill"))]
#[serde(deny_unknown_fields)]
pub(crate) struct RawBackfill {
    /// The embedding provider (a name under `embeddings:`).
    pub embed: Sp<String>,
    /// The integer argument that sets how many rows a batch takes; the provider's `batch`
    /// when absent.
    pub size: Option<Sp<String>>,
    /// The rows still to embed, at most `:batch` of them: columns `key` (what `store` finds
    /// the row by) and `text` (what is embedded). A row `store` leaves as it was comes back,
    /// so this must leave out the rows `store` did.
    pub pending: Sp<RawStatement>,
    /// Stores one row's vector: `:vector` for the row `:key`, embedded from `:text` (a row
    /// whose text changed since `pending` read it should be left alone: `AND content =
    /// :text`). `returns: execute`.
    pub store: Sp<RawStatement>,
    /// How many rows are still to embed (`returns: scalar`): the total of the progress
    /// notifications, and the result's `remaining`.
    pub remaining: Option<Sp<RawStatement>>,
}

/// A parameter computed from an argument by transforms.
#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "editor-schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "editor-schema", schemars(rename = "Derive"))]
#[serde(deny_unknown_fields)]
pub(crate) struct RawDerive {
    /// The argument it is computed from. With `embed`, `ARG[]` embeds each string of an array
    /// and `ARG[].FIELD` each item's string field: the parameter is then the JSON text of the
    /// vectors, in the array's order, embedded in batches (`[[0.1, ...], ...]`, which
    /// sqlite-vec's `vec_f32(value)` and pgvector's `value::text::vector` read).
    pub from: String,
    /// The transforms applied, in order.
    #[serde(default)]
    pub transform: Vec<String>,
    /// The embedding provider (a name under `embeddings:`) that turns the text into a vector:
    /// the parameter is then the vector, bound as the engine's vector type. NULL when the
    /// argument is absent or null, or when the provider is off (unless `needed_when`).
    pub embed: Option<String>,
    /// With `embed`: the argument values that need the vector, `{ARG: [VALUE, ...]}`; a call
    /// with one of them while the provider is off fails with `EMBEDDINGS_OFF` instead of
    /// binding NULL.
    #[serde(default)]
    pub needed_when: BTreeMap<String, Vec<String>>,
}

/// The database's default location per operating system.
#[derive(Debug, Default, Deserialize)]
#[cfg_attr(feature = "editor-schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "editor-schema", schemars(rename = "DefaultPath"))]
#[serde(deny_unknown_fields)]
pub(crate) struct RawDefaultPath {
    /// The path on Linux, e.g. `~/.config/app/app.db`.
    pub linux: Option<String>,
    /// The path on macOS, e.g. `~/Library/Application Support/app/app.db`.
    pub macos: Option<String>,
    /// The path on Windows, e.g. `%APPDATA%/app/app.db`.
    pub windows: Option<String>,
}

/// One start-up job: a call of one of the server's tools (SQL or handler).
#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "editor-schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "editor-schema", schemars(rename = "StartupJob"))]
#[serde(deny_unknown_fields)]
pub(crate) struct RawStartupJob {
    /// The tool to call; not one with a confirmation rule, since nobody is there to confirm.
    pub tool: Sp<String>,
    /// The call's arguments, validated like any call's when the job runs.
    #[serde(default)]
    #[cfg_attr(
        feature = "editor-schema",
        schemars(with = "Option<serde_json::Map<String, serde_json::Value>>")
    )]
    pub arguments: Option<Sp<serde_json::Value>>,
}

/// One call of the demo session.
#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "editor-schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "editor-schema", schemars(rename = "DemoCall"))]
#[serde(deny_unknown_fields)]
pub(crate) struct RawDemoCall {
    /// The tool to call.
    pub tool: Sp<String>,
    /// The call's arguments; they must satisfy the tool's input schema.
    #[serde(default)]
    #[cfg_attr(
        feature = "editor-schema",
        schemars(with = "Option<serde_json::Map<String, serde_json::Value>>")
    )]
    pub arguments: Option<Sp<serde_json::Value>>,
    /// Shown above the call.
    pub note: Option<String>,
    /// The error the call demonstrates, e.g. `INVALID_ARGUMENTS`; arguments meant to fail are
    /// then not held to the tool's input schema by `codegen check`.
    pub error: Option<String>,
}

/// An image a client may show beside a tool.
#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "editor-schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "editor-schema", schemars(rename = "Icon"))]
#[serde(deny_unknown_fields)]
pub(crate) struct RawIcon {
    /// The image: an `https:` URL, or a `data:image/...` URI with the image in base64.
    pub src: Sp<String>,
    /// Its MIME type (`image/png`, `image/svg+xml`, ...), when `src` does not make it plain.
    pub mime_type: Option<Sp<String>>,
    /// The sizes the image is drawn at, each `WxH` (`48x48`), or `any` for a scalable one.
    #[serde(default)]
    pub sizes: Vec<Sp<String>>,
    /// `light` or `dark`: the background the image is drawn for; any when left out.
    pub theme: Option<Sp<String>>,
}

/// One MCP tool: its contract and the SQL behind it.
#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "editor-schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "editor-schema", schemars(rename = "Tool"))]
#[serde(deny_unknown_fields)]
pub(crate) struct RawTool {
    /// The tool's name: 1 to 128 of `A-Z`, `a-z`, `0-9`, `_`, `-` and `.`.
    pub name: Sp<String>,
    /// A human-readable name for clients to show.
    pub title: Option<String>,
    /// What the tool does and when a model should call it.
    pub description: Sp<String>,
    /// The arguments as a JSON Schema object; omit for a tool without arguments.
    #[serde(default)]
    pub input: Option<Sp<RawInput>>,
    /// Behaviour hints for clients; derived from the SQL when omitted.
    pub annotations: Option<Sp<RawAnnotations>>,
    /// One statement whose result is the tool's result.
    pub sql: Option<Sp<RawStatement>>,
    /// Named statements run in order, each filling the field of its name.
    pub compose: Option<Sp<Vec<Sp<RawStatement>>>>,
    /// Fixed content blocks instead of SQL: the tool's result is these MCP content blocks, whose
    /// text and URIs are minijinja templates over the arguments.
    pub content: Option<Sp<Vec<Sp<RawBlock>>>>,
    /// Rows embedded in batches until none is left, instead of `sql`: for vectors that are
    /// missing or were made by another model (a new provider, new dimensions). Each batch is
    /// its own transaction, so a run stopped half-way keeps what it stored and the next goes
    /// on; progress goes to the client after each batch.
    pub backfill: Option<Sp<RawBackfill>>,
    /// A Rust handler instead of SQL: the snake_case method the server's generated handler
    /// trait declares for this tool. Needs `output`.
    pub handler: Option<Sp<String>>,
    /// The result of a handler tool as a JSON Schema object; it becomes the tool's
    /// `outputSchema` and the handler's typed output struct. `content` instead: the handler
    /// returns MCP content blocks (`Vec<Content>`) and the tool has no `outputSchema`.
    #[cfg_attr(
        feature = "editor-schema",
        schemars(with = "Option<serde_json::Map<String, serde_json::Value>>")
    )]
    pub output: Option<Sp<serde_json::Value>>,
    /// Refuse the call unless a boolean argument is `true`, and ask the person through MCP
    /// elicitation when the client supports it. Makes the tool `destructiveHint: true`.
    pub confirm: Option<Sp<RawConfirm>>,
    /// How long one call may run before its query is interrupted.
    pub timeout_ms: Option<Sp<u64>>,
    /// A Rust handler's cap on its result's size as JSON text, in bytes: a result past it
    /// keeps the rows of its longest list that fit, whole, beside `truncated: true` and a
    /// `message`. Default: the server-wide cap (`MCPSPEC_MAX_RESULT_BYTES`), which also bounds
    /// a larger value. A SQL tool sets it under `sql:`.
    pub max_bytes: Option<Sp<u64>>,
    /// OAuth scopes a caller's access token must grant to call this tool (besides the
    /// server's `scopes`); a call without them is refused with 403 `insufficient_scope`. Only
    /// served over HTTP with `--oauth-issuer`; stdio and the static token are not scoped.
    #[serde(default)]
    pub scopes: Vec<Sp<String>>,
    /// The tasks extension (`io.modelcontextprotocol/tasks`): `optional`, the call runs as a
    /// task when the client declared the extension; `required`, it runs only as one and a
    /// client without the extension gets -32021. A SQL or content call becomes a task when it
    /// runs past `MCPSPEC_TASK_AFTER_MS` (1 s by default); a handler's call, when it calls
    /// `ctx.background()`, so it may ask the client first.
    #[cfg_attr(feature = "editor-schema", schemars(with = "Option<TaskSupport>"))]
    pub task: Option<Sp<String>>,
    /// An MCP App (SEP-1865) a host that renders apps shows the result in, beside the text:
    /// `table`, the built-in view of the structured result (each list of rows a table, the
    /// other fields by name), or `{html: FILE}`, a view of one's own from an HTML file beside
    /// the spec (read when the spec compiles, at most 1 MiB). Either is served as the resource
    /// `ui://<server>/<tool>` (`text/html;profile=mcp-app`, with a CSP that allows no network
    /// and no outside resources) and named in the tool's `_meta.ui.resourceUri`. Other hosts
    /// show the text.
    pub app: Option<Sp<RawApp>>,
    /// Images a client may show beside the tool (MCP 2025-11-25), listed in `tools/list`.
    #[serde(default)]
    pub icons: Vec<Sp<RawIcon>>,
    /// Transforms applied to string arguments after validation and before binding, in order:
    /// `trim`, `lower`, `words` (the runs of letters and digits, lower-cased, one space apart:
    /// punctuation and operators separate words), `fts5` (each word quoted, all required),
    /// `fts5_prefix` (the same, each word a prefix) and `truncate:N`.
    #[serde(default)]
    pub transform: BTreeMap<String, Sp<Vec<String>>>,
    /// Extra SQL parameters computed from arguments: `name: {from: arg, transform: [...]}`.
    #[serde(default)]
    pub derive: BTreeMap<String, Sp<RawDerive>>,
    /// Defaults for absent arguments taken from environment variables at start-up.
    #[serde(default)]
    pub env_defaults: BTreeMap<String, Sp<String>>,
    /// Calls of this tool and what must come back; `mcpspec test` runs them on the sample
    /// database, `codegen check --db` on a live one (writes rolled back).
    #[serde(default)]
    pub examples: Vec<Sp<RawExample>>,
}

/// One example of a tool: its arguments and exactly one of `returns`, `empty` or `error`.
#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "editor-schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "editor-schema", schemars(rename = "Example"))]
#[serde(deny_unknown_fields)]
pub(crate) struct RawExample {
    /// The call's arguments; unless `error` is `INVALID_ARGUMENTS` they must satisfy the
    /// tool's input schema.
    #[serde(default)]
    #[cfg_attr(
        feature = "editor-schema",
        schemars(with = "Option<serde_json::Map<String, serde_json::Value>>")
    )]
    pub arguments: Option<Sp<serde_json::Value>>,
    /// Part of the structured result that must be there: each key listed must have the value
    /// given, compared the same way inside; arrays element by element, of the same length.
    pub returns: Option<Sp<serde_json::Value>>,
    /// `true`: the call succeeds and finds no rows.
    pub empty: Option<Sp<bool>>,
    /// The call fails with this error code, e.g. `NOT_FOUND`.
    pub error: Option<Sp<String>>,
    /// `true`: what comes back depends on the spec's sample rows, so the example runs on the
    /// sample database only, not on a live one (`check --db`, `mcpspec test --db`).
    #[serde(default)]
    pub sample_rows: bool,
}

/// One MCP content block of a `content:` binding.
#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "editor-schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "editor-schema", schemars(rename = "Block"))]
#[serde(deny_unknown_fields)]
pub(crate) struct RawBlock {
    /// `text`, `image`, `audio` or `resource` (an embedded text resource).
    #[serde(rename = "type")]
    #[cfg_attr(feature = "editor-schema", schemars(with = "BlockType"))]
    pub ty: Sp<String>,
    /// The text of a `text` or `resource` block: a minijinja template over the arguments (and
    /// `arguments`, all of them).
    pub text: Option<Sp<String>>,
    /// The base64 data of an `image` or `audio` block.
    pub data: Option<Sp<String>>,
    /// The MIME type of an `image`, `audio` or `resource` block.
    pub mime_type: Option<Sp<String>>,
    /// The URI of a `resource` block: a minijinja template over the arguments.
    pub uri: Option<Sp<String>>,
}

/// The top level of a tool's input JSON Schema. Properties stay raw JSON Schema so that every
/// keyword reaches the published schema; the keys here are the ones codegen reads.
#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "editor-schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "editor-schema", schemars(rename = "Input"))]
#[serde(deny_unknown_fields)]
pub(crate) struct RawInput {
    /// Always `object`.
    #[serde(rename = "type")]
    #[cfg_attr(feature = "editor-schema", schemars(with = "Option<ObjectType>"))]
    pub ty: Option<Sp<String>>,
    /// What the arguments are, for the model.
    pub description: Option<String>,
    /// Each argument's JSON Schema, published as written.
    #[serde(default)]
    #[cfg_attr(
        feature = "editor-schema",
        schemars(with = "BTreeMap<String, serde_json::Map<String, serde_json::Value>>")
    )]
    pub properties: BTreeMap<String, Sp<serde_json::Value>>,
    /// The arguments a call must pass.
    #[serde(default)]
    pub required: Vec<Sp<String>>,
    /// At least one of these properties must be given. Checked by the server, because clients
    /// such as Claude Code reject a top-level `anyOf` in an input schema.
    #[serde(default, rename = "requiredAny")]
    pub required_any: Vec<Sp<String>>,
    /// Whether arguments not under `properties` are accepted; `false` unless set.
    #[serde(rename = "additionalProperties")]
    pub additional_properties: Option<bool>,
    /// The JSON Schema dialect, published as written, e.g.
    /// `https://json-schema.org/draft/2020-12/schema`.
    #[serde(rename = "$schema")]
    pub dialect: Option<Sp<String>>,
    /// Reusable subschemas that properties reference with `$ref: '#/$defs/NAME'`, published as
    /// written.
    #[serde(default, rename = "$defs")]
    #[cfg_attr(
        feature = "editor-schema",
        schemars(with = "BTreeMap<String, serde_json::Map<String, serde_json::Value>>")
    )]
    pub defs: BTreeMap<String, Sp<serde_json::Value>>,
    /// At least one of these subschemas must hold. Top-level composition is published to protocol 2026-07-28 requests only
    /// (clients of 2025-11-25, Claude Code among them, reject it); the server enforces it for
    /// every call. `requiredAny` says "at least one of" portably.
    #[serde(rename = "anyOf")]
    pub any_of: Option<Sp<serde_json::Value>>,
    /// Exactly one of these subschemas must hold. Top-level composition is published to protocol 2026-07-28 requests only
    /// (clients of 2025-11-25, Claude Code among them, reject it); the server enforces it for
    /// every call. `requiredAny` says "at least one of" portably.
    #[serde(rename = "oneOf")]
    pub one_of: Option<Sp<serde_json::Value>>,
    /// Every one of these subschemas must hold. Top-level composition is published to protocol 2026-07-28 requests only
    /// (clients of 2025-11-25, Claude Code among them, reject it); the server enforces it for
    /// every call. `requiredAny` says "at least one of" portably.
    #[serde(rename = "allOf")]
    pub all_of: Option<Sp<serde_json::Value>>,
    /// This subschema must not hold. Top-level composition is published to protocol 2026-07-28 requests only
    /// (clients of 2025-11-25, Claude Code among them, reject it); the server enforces it for
    /// every call. `requiredAny` says "at least one of" portably.
    #[serde(rename = "not")]
    pub not: Option<Sp<serde_json::Value>>,
    /// When the arguments match this subschema, `then` must hold, else `else`. Top-level composition is published to protocol 2026-07-28 requests only
    /// (clients of 2025-11-25, Claude Code among them, reject it); the server enforces it for
    /// every call. `requiredAny` says "at least one of" portably.
    #[serde(rename = "if")]
    pub if_: Option<Sp<serde_json::Value>>,
    /// What must hold when `if` matches. Top-level composition is published to protocol 2026-07-28 requests only
    /// (clients of 2025-11-25, Claude Code among them, reject it); the server enforces it for
    /// every call. `requiredAny` says "at least one of" portably.
    #[serde(rename = "then")]
    pub then: Option<Sp<serde_json::Value>>,
    /// What must hold when `if` does not match. Top-level composition is published to protocol 2026-07-28 requests only
    /// (clients of 2025-11-25, Claude Code among them, reject it); the server enforces it for
    /// every call. `requiredAny` says "at least one of" portably.
    #[serde(rename = "else")]
    pub else_: Option<Sp<serde_json::Value>>,
}

impl RawInput {
    /// The top-level composition and conditional keywords, by wire name, in published order.
    pub(crate) fn composition(&self) -> [(&'static str, &Option<Sp<serde_json::Value>>); 7] {
        [
            ("anyOf", &self.any_of),
            ("oneOf", &self.one_of),
            ("allOf", &self.all_of),
            ("not", &self.not),
            ("if", &self.if_),
            ("then", &self.then),
            ("else", &self.else_),
        ]
    }
}

/// MCP tool annotations; each one omitted is derived from what the SQL does.
#[derive(Debug, Default, Deserialize)]
#[cfg_attr(feature = "editor-schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "editor-schema", schemars(rename = "Annotations"))]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct RawAnnotations {
    /// The tool does not change its environment; default: true when the SQL only reads.
    pub read_only_hint: Option<bool>,
    /// The tool may destroy data; default: true when the SQL updates or deletes.
    pub destructive_hint: Option<bool>,
    /// Repeating a call has no further effect; default: true when the SQL only reads.
    pub idempotent_hint: Option<bool>,
    /// The tool reaches outside a closed world; default: false.
    pub open_world_hint: Option<bool>,
}

impl DialectKeys for RawStatementFields {
    type Value = String;

    #[cfg(feature = "editor-schema")]
    fn describe(d: &sqlscan::Dialect) -> String {
        let bound = match d.placeholders {
            sqlscan::Placeholders::Question => " (they are bound as `?` in order of appearance)",
            _ => "",
        };
        format!(
            "The statement's {} text where it differs from `query` (full-text search, JSON, \
             upserts), with the same named parameters and result columns{bound}.",
            d.title
        )
    }

    fn keys() -> &'static [&'static str] {
        static KEYS: OnceLock<&'static [&'static str]> = OnceLock::new();
        KEYS.get_or_init(|| with_dialects(crate::fields::of::<RawStatementFields>()))
    }
}

/// A statement, with its text per database server where it differs from `query`
/// (`postgres:`, `mysql:`; see [`DialectKeys`]).
pub(crate) type RawStatement = Dialected<RawStatementFields>;

/// A SQL statement and how its result becomes JSON.
#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "editor-schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "editor-schema", schemars(rename = "Statement"))]
#[serde(deny_unknown_fields)]
pub(crate) struct RawStatementFields {
    /// The field this statement fills in a composite result.
    pub name: Option<Sp<String>>,
    /// SQL with named parameters such as `:tag`, bound from the arguments, never interpolated.
    pub query: Sp<String>,
    /// `many` (default), `one`, `optional`, `scalar` or `execute`.
    #[cfg_attr(feature = "editor-schema", schemars(with = "Option<ReturnMode>"))]
    pub returns: Option<Sp<String>>,
    /// The field holding the rows (`many`) or the value (`scalar`) in a single-statement result.
    pub key: Option<Sp<String>>,
    /// Result columns: `name: type` where type is `text`, `integer`, `real`, `boolean` or
    /// `json`, with a trailing `?` when the column may be NULL.
    #[serde(default)]
    pub columns: BTreeMap<String, Sp<RawColumn>>,
    /// A hard cap on rows (default 200); more rows are cut and flagged `truncated`.
    pub max_rows: Option<Sp<u32>>,
    /// A cap on the rows' size as JSON text, in bytes, beside `max_rows`: the rows that fit
    /// are kept, whole, and the result is flagged `truncated`, so that a list of long rows
    /// cannot flood a client's context. Default: the server-wide cap
    /// (`MCPSPEC_MAX_RESULT_BYTES`, 8 MiB), which also bounds a larger value.
    pub max_bytes: Option<Sp<u64>>,
    /// A minijinja template over the arguments, returned as `message` when `many` finds nothing.
    pub empty_message: Option<Sp<String>>,
    /// A minijinja template, the message of the `NOT_FOUND` error when `one` finds nothing.
    pub not_found: Option<Sp<String>>,
    /// Parameters bound from a column of an earlier single-row statement: `param: stmt.column`.
    #[serde(default)]
    pub bind: BTreeMap<String, Sp<String>>,
    /// Computed fields beside the rows of a `many` result: `count`, `tokens`, `arg:NAME`
    /// (an argument as given) or `column:NAME` (a column of the first row, removed from rows).
    #[serde(default)]
    pub envelope: BTreeMap<String, Sp<String>>,
    /// Keyset pagination: the tool takes a `cursor` argument and its result gives
    /// `next_cursor` while rows remain. The query binds `:after.COLUMN` for each `by` column
    /// (the last row's values, NULL on the first page) and keeps only the rows after them, and
    /// ends with `LIMIT :page.limit` (a page's size and one more, which tells whether another
    /// page follows) or, where one more row would change the query's plan, `LIMIT :page.size`
    /// (a full page then gives a cursor, and the last full page is followed by an empty one).
    pub page: Option<Sp<RawPage>>,
}

/// A statement's keyset pagination.
#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "editor-schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "editor-schema", schemars(rename = "Page"))]
#[serde(deny_unknown_fields)]
pub(crate) struct RawPage {
    /// The result columns the query's `ORDER BY` sorts on, in its order, ending with a unique
    /// one (such as the id) so that no two rows tie. A column not under `columns` is read for
    /// the cursor and left out of the rows (an exact sort key beside a formatted one).
    pub by: Vec<Sp<String>>,
    /// The integer argument that sets a page's size (default `limit`, when the tool has it);
    /// without one a page holds `max_rows` rows.
    pub size: Option<Sp<String>>,
}

/// A tool's MCP App: the built-in `table`, or an HTML file of one's own.
#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "editor-schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "editor-schema", schemars(rename = "App"))]
#[serde(untagged)]
pub(crate) enum RawApp {
    /// `table`, the built-in view.
    Builtin(String),
    /// A view of one's own.
    Html(RawAppHtml),
}

/// An app whose HTML is a file beside the spec.
#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "editor-schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "editor-schema", schemars(rename = "AppHtml"))]
#[serde(deny_unknown_fields)]
pub(crate) struct RawAppHtml {
    /// The HTML document, relative to the spec's directory, e.g. `views/parts.html`.
    pub html: String,
}

/// A result column: `text`, `integer`, `real`, `boolean` or `json`, with `?` when NULL is
/// possible; or the long form.
#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "editor-schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "editor-schema", schemars(rename = "Column"))]
#[serde(untagged)]
pub(crate) enum RawColumn {
    Short(#[cfg_attr(feature = "editor-schema", schemars(with = "ColumnType"))] String),
    Full(RawColumnFull),
}

/// A result column in the long form.
#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "editor-schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "editor-schema", schemars(rename = "ColumnFull"))]
#[serde(deny_unknown_fields)]
pub(crate) struct RawColumnFull {
    /// `text`, `integer`, `real`, `boolean` or `json`.
    #[serde(rename = "type")]
    #[cfg_attr(feature = "editor-schema", schemars(with = "ColumnKindName"))]
    pub ty: String,
    /// Whether the column may be NULL; a NULL is omitted from the row.
    #[serde(default)]
    pub nullable: bool,
    /// Published in the tool's output schema.
    pub description: Option<String>,
    /// The JSON Schema of a `json` column's value.
    pub schema: Option<serde_json::Value>,
}

/// Types that exist only to describe the spec language in the editor schema: the closed sets
/// of words that the parse stage reads as plain strings and `validate` checks.
#[cfg(feature = "editor-schema")]
mod editor {
    // These types are only described in the schema, never built.
    #![allow(dead_code)]

    use schemars::JsonSchema;

    /// How the server may use the database.
    #[derive(JsonSchema)]
    #[serde(rename_all = "snake_case")]
    pub(crate) enum AccessMode {
        /// Write tools are refused with `READ_ONLY`.
        ReadOnly,
        /// Write tools run in an immediate transaction.
        ReadWrite,
    }

    /// The type of a tool's arguments.
    #[derive(JsonSchema)]
    #[serde(rename_all = "snake_case")]
    pub(crate) enum ObjectType {
        /// MCP tool arguments are always an object.
        Object,
    }

    /// Whether a tool's calls run as tasks.
    #[derive(JsonSchema)]
    #[serde(rename_all = "snake_case")]
    pub(crate) enum TaskSupport {
        /// As a task when the client declared the tasks extension, else synchronously.
        Optional,
        /// Only as a task; a client without the tasks extension gets -32021.
        Required,
    }

    /// How a statement's rows become the result.
    #[derive(JsonSchema)]
    #[serde(rename_all = "snake_case")]
    pub(crate) enum ReturnMode {
        /// Every row, as an array under `key`.
        Many,
        /// Exactly one row; none is a `NOT_FOUND` tool error.
        One,
        /// In `compose` only: at most one row; none omits the field.
        Optional,
        /// The single column of the single row, under `key`.
        Scalar,
        /// A write without `RETURNING`: `{changes, last_insert_id}`.
        Execute,
    }

    /// The kind of a content block.
    #[derive(JsonSchema)]
    #[serde(rename_all = "snake_case")]
    pub(crate) enum BlockType {
        /// Text.
        Text,
        /// An image in base64.
        Image,
        /// Audio in base64.
        Audio,
        /// An embedded text resource.
        Resource,
    }

    /// Who says a prompt message.
    #[derive(JsonSchema)]
    #[serde(rename_all = "snake_case")]
    pub(crate) enum MessageRole {
        /// The person.
        User,
        /// The model.
        Assistant,
    }

    /// What an interceptor rule does with a matching call.
    #[derive(JsonSchema)]
    #[serde(rename_all = "snake_case")]
    pub(crate) enum InterceptAction {
        /// Block the call: the downstream never sees it.
        Guard,
        /// Forward the call and put the message before the result's content.
        Hint,
    }

    /// A failure an error rule maps.
    #[derive(JsonSchema)]
    #[serde(rename_all = "snake_case")]
    pub(crate) enum RuleKind {
        /// An argument failed its JSON Schema; name it with `field`.
        Invalid,
        /// SQLite refused a write (UNIQUE, CHECK, FOREIGN KEY, NOT NULL).
        Constraint,
        /// A `one` statement found no row.
        NoRow,
        /// A write changed no rows.
        NoChange,
    }

    /// A column type.
    #[derive(JsonSchema)]
    #[serde(rename_all = "snake_case")]
    pub(crate) enum ColumnKindName {
        /// A JSON string.
        Text,
        /// A JSON integer.
        Integer,
        /// A JSON number.
        Real,
        /// A JSON boolean (SQLite 0 or 1).
        Boolean,
        /// JSON text in the database, returned as a JSON value.
        Json,
    }

    /// A column type, with a trailing `?` when the column may be NULL.
    #[derive(JsonSchema)]
    pub(crate) enum ColumnType {
        #[serde(rename = "text")]
        Text,
        #[serde(rename = "text?")]
        NullableText,
        #[serde(rename = "integer")]
        Integer,
        #[serde(rename = "integer?")]
        NullableInteger,
        #[serde(rename = "real")]
        Real,
        #[serde(rename = "real?")]
        NullableReal,
        #[serde(rename = "boolean")]
        Boolean,
        #[serde(rename = "boolean?")]
        NullableBoolean,
        #[serde(rename = "json")]
        Json,
        #[serde(rename = "json?")]
        NullableJson,
    }
}
#[cfg(feature = "editor-schema")]
use editor::{
    AccessMode, BlockType, ColumnKindName, ColumnType, InterceptAction, MessageRole, ObjectType,
    ReturnMode, RuleKind, TaskSupport,
};

/// The JSON Schema of the spec language, for YAML language servers: pretty JSON with sorted
/// keys and a `$comment` naming the command that writes it.
#[cfg(feature = "editor-schema")]
pub(crate) fn editor_schema(made_by: &str) -> String {
    let mut v = editor_schema_value();
    if let Some(o) = v.as_object_mut() {
        o.insert(
            "$comment".into(),
            serde_json::json!(format!(
                "@generated by `{made_by}`; do not edit. Derived from codegen/src/spec.rs"
            )),
        );
    }
    crate::contract::to_pretty(&v)
}

/// The editor schema as JSON, which the spec-language reference is rendered from too.
#[cfg(feature = "editor-schema")]
pub(crate) fn editor_schema_value() -> serde_json::Value {
    schemars::schema_for!(RawSpec).to_value()
}

/// The keywords of JSON Schema 2020-12 (with draft-07's `definitions`, `dependencies` and
/// `additionalItems`, which validators still read).
const SCHEMA_KEYWORDS: &[&str] = &[
    "$schema",
    "$id",
    "$ref",
    "$defs",
    "$anchor",
    "$dynamicRef",
    "$dynamicAnchor",
    "$vocabulary",
    "$comment",
    "definitions",
    "type",
    "enum",
    "const",
    "multipleOf",
    "maximum",
    "exclusiveMaximum",
    "minimum",
    "exclusiveMinimum",
    "maxLength",
    "minLength",
    "pattern",
    "maxItems",
    "minItems",
    "uniqueItems",
    "maxContains",
    "minContains",
    "maxProperties",
    "minProperties",
    "required",
    "dependentRequired",
    "dependencies",
    "properties",
    "patternProperties",
    "additionalProperties",
    "propertyNames",
    "items",
    "prefixItems",
    "additionalItems",
    "contains",
    "unevaluatedItems",
    "unevaluatedProperties",
    "allOf",
    "anyOf",
    "oneOf",
    "not",
    "if",
    "then",
    "else",
    "dependentSchemas",
    "format",
    "contentEncoding",
    "contentMediaType",
    "contentSchema",
    "title",
    "description",
    "default",
    "deprecated",
    "readOnly",
    "writeOnly",
    "examples",
];
/// Keywords whose value maps names to schemas.
const SCHEMA_MAPS: &[&str] = &[
    "properties",
    "patternProperties",
    "$defs",
    "definitions",
    "dependentSchemas",
];
/// Keywords whose value is a list of schemas.
const SCHEMA_LISTS: &[&str] = &["allOf", "anyOf", "oneOf", "prefixItems"];
/// Keywords whose value is one schema (a boolean schema is a scalar, and passes).
const SCHEMA_VALUES: &[&str] = &[
    "items",
    "additionalProperties",
    "additionalItems",
    "not",
    "if",
    "then",
    "else",
    "contains",
    "propertyNames",
    "unevaluatedItems",
    "unevaluatedProperties",
    "contentSchema",
];

/// Parses one spec file's text; `file` is used only for positions in diagnostics.
pub(crate) fn parse(file: &Path, text: &str) -> Result<RawSpec, Diagnostics> {
    // The default options keep serde-saphyr's input budget, which bounds alias expansion and
    // nesting, so a hostile spec cannot exhaust memory at build time.
    //
    // A first pass over the untyped tree reports every unknown key at once, where the typed
    // parse would stop at the first. A document that is not even YAML falls through to the
    // typed parse, which reports the syntax error.
    if let Ok(tree) = serde_saphyr::from_str::<Node>(text) {
        let mut sink = Sink::new(file);
        unknown_keys(&mut sink, &tree, Ctx::Top);
        let found = sink.finish();
        if !found.is_empty() {
            return Err(found);
        }
    }
    match serde_saphyr::from_str::<RawSpec>(text) {
        Ok(spec) => Ok(spec),
        Err(err) => {
            let mut sink = Sink::new(file);
            let pos = err.location().map(Pos::from_saphyr).unwrap_or_default();
            let full = err.to_string();
            let message = first_line(&full);
            let help = unknown_key_help(&message);
            sink.error(pos, lowercase_first(&message), "", &help);
            Err(sink.finish())
        }
    }
}

fn first_line(s: &str) -> String {
    let line = s.lines().next().unwrap_or(s).trim();
    let line = line.strip_prefix("error: ").unwrap_or(line);
    // Drop a leading "line N column M: ", which the diagnostic shows as file:line:column.
    let line = match line.strip_prefix("line ").and_then(|r| r.split_once(": ")) {
        Some((coords, rest)) if coords.contains(" column ") => rest,
        _ => line,
    };
    // serde-saphyr appends the location to its message; the diagnostic carries it separately.
    let cut = line.find(" at line ").unwrap_or(line.len());
    line[..cut].trim_end_matches('.').to_string()
}

fn lowercase_first(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_lowercase().collect::<String>() + c.as_str(),
        None => String::new(),
    }
}

/// Turns serde's "unknown field `x`" into a "did you mean" help line.
fn unknown_key_help(message: &str) -> String {
    let Some(rest) = message.split("unknown field `").nth(1) else {
        return String::new();
    };
    let word = rest.split('`').next().unwrap_or("");
    let all: Vec<&str> = [
        crate::fields::of::<RawSpec>(),
        crate::fields::of::<RawTool>(),
        crate::fields::of::<RawStatement>(),
        crate::fields::of::<RawDatabase>(),
        crate::fields::of::<RawInput>(),
    ]
    .concat()
    .into_iter()
    .collect();
    match did_you_mean(word, &all) {
        Some(s) => format!("did you mean `{s}`?"),
        None => "remove the key; the spec language does not know it".to_string(),
    }
}

/// Where a node sits in a spec, which decides the keys it may have.
#[derive(Debug, Clone, Copy)]
enum Ctx {
    Top,
    Server,
    Database,
    /// A database side (`database.postgres`, `database.mysql`).
    Engine,
    /// `database.postgres.identity`.
    Identity,
    DefaultPath,
    Demos,
    Demo,
    Startups,
    Startup,
    /// A JSON Schema: its keys must be JSON Schema keywords (or `x-` extensions).
    Schema,
    /// A mapping of names to schemas (`properties`, `$defs`, ...).
    Schemas,
    /// A sequence of schemas (`allOf`, `prefixItems`, ...).
    SchemaList,
    Tools,
    Tool,
    Input,
    Annotations,
    Statements,
    Statement,
    Columns,
    Column,
    FtsList,
    Fts,
    Derives,
    Derive,
    Embeddings,
    Embedding,
    Backfill,
    Errors,
    Error,
    Rules,
    Rule,
    Confirm,
    /// A tool's `app:` in its long form.
    App,
    Icons,
    Icon,
    /// A statement's `page:`.
    Page,
    Resources,
    Resource,
    Prompts,
    Prompt,
    PromptArguments,
    PromptArgument,
    Asks,
    Ask,
    Messages,
    Message,
    Proxy,
    ProxyConfig,
    Downstreams,
    Downstream,
    Extract,
    Intercept,
    InterceptRules,
    InterceptRule,
    Blocks,
    Block,
    Examples,
    Example,
    /// Free-form: JSON Schema, arguments, templates.
    Any,
}

/// Whether `key` names a database server's dialect (a side of `database:`): a registered
/// dialect reached by URL, not the embedded default.
fn is_server_dialect(key: &str) -> bool {
    sqlscan::Dialect::named(key).is_some_and(|d| !d.schemes.is_empty())
}

impl Ctx {
    /// What such a node is called in messages, and the keys it may have.
    fn keys(self) -> Option<(&'static str, &'static [&'static str])> {
        Some(match self {
            Ctx::Top => ("the top level of a spec", crate::fields::of::<RawSpec>()),
            Ctx::Server => ("`server`", crate::fields::of::<RawServer>()),
            Ctx::Database => ("`database`", crate::fields::of::<RawDatabase>()),
            Ctx::Engine => (
                "a database side (`database.postgres`, ...)",
                crate::fields::of::<RawEngine>(),
            ),
            Ctx::DefaultPath => ("`default_path`", crate::fields::of::<RawDefaultPath>()),
            Ctx::Identity => ("`identity`", crate::fields::of::<RawIdentity>()),
            Ctx::Demo => ("a demo call", crate::fields::of::<RawDemoCall>()),
            Ctx::Startup => ("a start-up job", crate::fields::of::<RawStartupJob>()),
            Ctx::Schema => ("a JSON Schema", SCHEMA_KEYWORDS),
            Ctx::Tool => ("a tool", crate::fields::of::<RawTool>()),
            Ctx::Input => ("`input`", crate::fields::of::<RawInput>()),
            Ctx::Annotations => ("`annotations`", crate::fields::of::<RawAnnotations>()),
            Ctx::Statement => ("a statement", crate::fields::of::<RawStatement>()),
            Ctx::Column => ("a column", crate::fields::of::<RawColumnFull>()),
            Ctx::Fts => ("a full-text index", crate::fields::of::<RawFts>()),
            Ctx::Derive => ("a derived parameter", crate::fields::of::<RawDerive>()),
            Ctx::Embedding => ("an embedding provider", crate::fields::of::<RawEmbedding>()),
            Ctx::Backfill => ("`backfill`", crate::fields::of::<RawBackfill>()),
            Ctx::Error => ("an error", crate::fields::of::<RawError>()),
            Ctx::Rule => ("an error rule", crate::fields::of::<RawRule>()),
            Ctx::Confirm => ("`confirm`", crate::fields::of::<RawConfirm>()),
            Ctx::App => ("`app`", crate::fields::of::<RawAppHtml>()),
            Ctx::Icon => ("an icon", crate::fields::of::<RawIcon>()),
            Ctx::Page => ("`page`", crate::fields::of::<RawPage>()),
            Ctx::Resource => ("a resource", crate::fields::of::<RawResource>()),
            Ctx::Prompt => ("a prompt", crate::fields::of::<RawPrompt>()),
            Ctx::PromptArgument => (
                "a prompt argument",
                crate::fields::of::<RawPromptArgument>(),
            ),
            Ctx::Ask => ("a prompt question", crate::fields::of::<RawAsk>()),
            Ctx::Message => ("a prompt message", crate::fields::of::<RawMessage>()),
            Ctx::Proxy => ("`proxy`", crate::fields::of::<RawProxy>()),
            Ctx::ProxyConfig => ("`proxy.config`", crate::fields::of::<RawProxyConfig>()),
            Ctx::Downstream => ("a downstream server", crate::fields::of::<RawDownstream>()),
            Ctx::Extract => ("`extract`", crate::fields::of::<RawExtract>()),
            Ctx::Intercept => ("`intercept`", crate::fields::of::<RawIntercept>()),
            Ctx::InterceptRule => (
                "an interceptor rule",
                crate::fields::of::<RawInterceptRule>(),
            ),
            Ctx::Block => ("a content block", crate::fields::of::<RawBlock>()),
            Ctx::Example => ("an example", crate::fields::of::<RawExample>()),
            _ => return None,
        })
    }

    /// The context of the value under `key` of a mapping in this context.
    fn child(self, key: &str) -> Ctx {
        match (self, key) {
            (Ctx::Top, "server") => Ctx::Server,
            (Ctx::Top, "database") => Ctx::Database,
            (Ctx::Top, "proxy") => Ctx::Proxy,
            (Ctx::Proxy, "config") => Ctx::ProxyConfig,
            (Ctx::ProxyConfig, "default_path") => Ctx::DefaultPath,
            (Ctx::Proxy, "servers") => Ctx::Downstreams,
            (Ctx::Proxy, "extract") => Ctx::Extract,
            (Ctx::Proxy, "intercept") => Ctx::Intercept,
            (Ctx::Intercept, "rules") => Ctx::InterceptRules,
            (Ctx::Top, "demo") => Ctx::Demos,
            (Ctx::Top, "startup") => Ctx::Startups,
            (Ctx::Input | Ctx::Schema, k) if SCHEMA_MAPS.contains(&k) => Ctx::Schemas,
            (Ctx::Input | Ctx::Schema, k) if SCHEMA_LISTS.contains(&k) => Ctx::SchemaList,
            (Ctx::Input | Ctx::Schema, k) if SCHEMA_VALUES.contains(&k) => Ctx::Schema,
            (Ctx::Schemas, _) => Ctx::Schema,
            (Ctx::Tool, "output") | (Ctx::Column, "schema") => Ctx::Schema,
            (Ctx::Top, "tools") => Ctx::Tools,
            (Ctx::Top, "errors") => Ctx::Errors,
            (Ctx::Top, "resources") => Ctx::Resources,
            (Ctx::Top, "prompts") => Ctx::Prompts,
            (Ctx::Top, "embeddings") => Ctx::Embeddings,
            (Ctx::Embeddings, _) => Ctx::Embedding,
            (Ctx::Resource | Ctx::Prompt, "sql") => Ctx::Statement,
            (Ctx::Prompt, "arguments") => Ctx::PromptArguments,
            (Ctx::Prompt, "messages") => Ctx::Messages,
            (Ctx::Prompt, "ask") => Ctx::Asks,
            (Ctx::Ask, "schema") => Ctx::Schema,
            (Ctx::Error, "rules") => Ctx::Rules,
            (Ctx::Tool, "confirm") => Ctx::Confirm,
            (Ctx::Tool, "app") => Ctx::App,
            (Ctx::Tool, "icons") => Ctx::Icons,
            (Ctx::Tool, "content") => Ctx::Blocks,
            (Ctx::Database, "default_path") => Ctx::DefaultPath,
            (Ctx::Database, "fts") => Ctx::FtsList,
            (Ctx::Database, key) if is_server_dialect(key) => Ctx::Engine,
            (Ctx::Engine, "identity") => Ctx::Identity,
            (Ctx::Tool, "derive") => Ctx::Derives,
            (Ctx::Tool, "backfill") => Ctx::Backfill,
            (Ctx::Backfill, "pending" | "store" | "remaining") => Ctx::Statement,
            (Ctx::Derives, _) => Ctx::Derive,
            (Ctx::Tool, "input") => Ctx::Input,
            (Ctx::Tool, "annotations") => Ctx::Annotations,
            (Ctx::Tool, "sql") => Ctx::Statement,
            (Ctx::Tool, "compose") => Ctx::Statements,
            (Ctx::Tool, "examples") => Ctx::Examples,
            (Ctx::Statement, "columns") => Ctx::Columns,
            (Ctx::Statement, "page") => Ctx::Page,
            (Ctx::Columns, _) => Ctx::Column,
            _ => Ctx::Any,
        }
    }

    /// The context of each element of a sequence in this context.
    fn element(self) -> Ctx {
        match self {
            Ctx::Demos => Ctx::Demo,
            Ctx::Startups => Ctx::Startup,
            Ctx::SchemaList => Ctx::Schema,
            Ctx::Tools => Ctx::Tool,
            Ctx::Icons => Ctx::Icon,
            Ctx::Statements => Ctx::Statement,
            Ctx::FtsList => Ctx::Fts,
            Ctx::Errors => Ctx::Error,
            Ctx::Rules => Ctx::Rule,
            Ctx::Resources => Ctx::Resource,
            Ctx::Prompts => Ctx::Prompt,
            Ctx::PromptArguments => Ctx::PromptArgument,
            Ctx::Asks => Ctx::Ask,
            Ctx::Messages => Ctx::Message,
            Ctx::Downstreams => Ctx::Downstream,
            Ctx::InterceptRules => Ctx::InterceptRule,
            Ctx::Blocks => Ctx::Block,
            Ctx::Examples => Ctx::Example,
            _ => Ctx::Any,
        }
    }
}

impl Ctx {
    /// The editor schema's name for mappings in this context (`Top` is its root); `None` where
    /// the spec language does not define the keys (JSON Schema, arguments, templates).
    #[cfg(feature = "editor-schema")]
    fn definition(self) -> Option<&'static str> {
        Some(match self {
            Ctx::Top => "",
            Ctx::Server => "Server",
            Ctx::Database => "Database",
            Ctx::Engine => "DatabaseSide",
            Ctx::DefaultPath => "DefaultPath",
            Ctx::Identity => "Identity",
            Ctx::Demo => "DemoCall",
            Ctx::Startup => "StartupJob",
            Ctx::Tool => "Tool",
            Ctx::Input => "Input",
            Ctx::Annotations => "Annotations",
            Ctx::Statement => "Statement",
            Ctx::Column => "ColumnFull",
            Ctx::Fts => "Fts",
            Ctx::Derive => "Derive",
            Ctx::Embedding => "Embedding",
            Ctx::Backfill => "Backfill",
            Ctx::Error => "Error",
            Ctx::Rule => "Rule",
            Ctx::Confirm => "Confirm",
            Ctx::App => "AppHtml",
            Ctx::Icon => "Icon",
            Ctx::Page => "Page",
            Ctx::Resource => "Resource",
            Ctx::Prompt => "Prompt",
            Ctx::PromptArgument => "PromptArgument",
            Ctx::Ask => "Ask",
            Ctx::Message => "Message",
            Ctx::Proxy => "Proxy",
            Ctx::ProxyConfig => "ProxyConfig",
            Ctx::Downstream => "Downstream",
            Ctx::Extract => "Extract",
            Ctx::Intercept => "Intercept",
            Ctx::InterceptRule => "InterceptRule",
            Ctx::Block => "Block",
            Ctx::Example => "Example",
            _ => return None,
        })
    }
}

/// Where each key of the spec language is written in `text`: `(definition, key, line)` for
/// every key of a mapping the language defines, in document order (see [`Ctx::definition`]).
#[cfg(feature = "editor-schema")]
pub(crate) fn key_sites(text: &str) -> Vec<(&'static str, String, u32)> {
    fn walk(node: &Node, ctx: Ctx, out: &mut Vec<(&'static str, String, u32)>) {
        match node {
            Node::Map(entries) => {
                for (key, value) in entries {
                    if let Some(def) = ctx.definition() {
                        out.push((def, key.value.0.clone(), pos(key).line));
                    }
                    walk(value, ctx.child(&key.value.0), out);
                }
            }
            Node::Seq(items) => items.iter().for_each(|i| walk(i, ctx.element(), out)),
            Node::Scalar | Node::Null => {}
        }
    }
    let mut out = Vec::new();
    if let Ok(tree) = serde_saphyr::from_str::<Node>(text) {
        walk(&tree, Ctx::Top, &mut out);
    }
    out
}

/// Reports every key the spec language does not know, with the closest known key.
fn unknown_keys(sink: &mut Sink<'_>, node: &Node, ctx: Ctx) {
    match node {
        Node::Map(entries) => {
            for (key, value) in entries {
                if matches!(ctx, Ctx::Schema | Ctx::Input) && matches!(value, Node::Null) {
                    null_keyword(sink, key, ctx);
                    continue;
                }
                if matches!(ctx, Ctx::Schema) && key.value.0.starts_with("x-") {
                    continue;
                }
                if let Some((what, known)) = ctx.keys()
                    && !known.contains(&key.value.0.as_str())
                {
                    let help = match did_you_mean(&key.value.0, known) {
                        Some(s) => format!("did you mean `{s}`?"),
                        None => format!("the keys of {what} are {}", known.join(", ")),
                    };
                    sink.error(
                        pos(key),
                        format!("unknown key `{}` in {what}", key.value.0),
                        "unknown key",
                        &help,
                    );
                    continue;
                }
                unknown_keys(sink, value, ctx.child(&key.value.0));
            }
        }
        Node::Seq(items) => {
            for item in items {
                unknown_keys(sink, item, ctx.element());
            }
        }
        Node::Scalar | Node::Null => {}
    }
}

/// A schema key without a value: in a flow mapping, the words after a comma in unquoted text
/// (`{description: The id, if any.}` makes a key `if any.`), else a keyword left empty.
fn null_keyword(sink: &mut Sink<'_>, key: &Sp<Key>, ctx: Ctx) {
    let name = &key.value.0;
    let known = ctx.keys().is_some_and(|(_, k)| k.contains(&name.as_str()));
    if known {
        sink.error(
            pos(key),
            format!("JSON Schema keyword `{name}` has no value"),
            "no value",
            "give it a value, or remove it",
        );
    } else {
        sink.error(
            pos(key),
            format!("`{name}` is not a JSON Schema keyword; it would be published as `\"{name}\": null`"),
            "a key without a value",
            "a comma inside `{...}` ends the text before it: quote that text, e.g. `description: \"The id, if any.\"`",
        );
    }
}

/// A YAML document as a tree of mappings, sequences and scalars, with the position of every
/// key, for the pass that reports every unknown key before the typed parse stops at the first.
#[derive(Debug)]
pub(crate) enum Node {
    Map(Vec<(Sp<Key>, Node)>),
    Seq(Vec<Node>),
    Scalar,
    /// `~`, `null` or nothing at all: in a JSON Schema, the trace of a key with no value.
    Null,
}

/// A mapping key as text, whatever scalar it was written as.
#[derive(Debug)]
pub(crate) struct Key(pub String);

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Key;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a scalar key")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Key, E> {
                Ok(Key(v.to_string()))
            }
            fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Key, E> {
                Ok(Key(v.to_string()))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Key, E> {
                Ok(Key(v.to_string()))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Key, E> {
                Ok(Key(v.to_string()))
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Key, E> {
                Ok(Key(v.to_string()))
            }
            fn visit_unit<E: serde::de::Error>(self) -> Result<Key, E> {
                Ok(Key("null".into()))
            }
        }
        d.deserialize_any(V)
    }
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Node;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("any YAML value")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut m: A) -> Result<Node, A::Error> {
                let mut out = Vec::new();
                while let Some(k) = m.next_key::<Sp<Key>>()? {
                    out.push((k, m.next_value::<Node>()?));
                }
                Ok(Node::Map(out))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut s: A) -> Result<Node, A::Error> {
                let mut out = Vec::new();
                while let Some(n) = s.next_element::<Node>()? {
                    out.push(n);
                }
                Ok(Node::Seq(out))
            }
            fn visit_str<E: serde::de::Error>(self, _: &str) -> Result<Node, E> {
                Ok(Node::Scalar)
            }
            fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<Node, E> {
                Ok(Node::Scalar)
            }
            fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<Node, E> {
                Ok(Node::Scalar)
            }
            fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<Node, E> {
                Ok(Node::Scalar)
            }
            fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<Node, E> {
                Ok(Node::Scalar)
            }
            fn visit_unit<E: serde::de::Error>(self) -> Result<Node, E> {
                Ok(Node::Null)
            }
            fn visit_none<E: serde::de::Error>(self) -> Result<Node, E> {
                Ok(Node::Null)
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod node_tests {
    use super::*;

    #[test]
    fn keys_keep_positions() {
        let n: Node = serde_saphyr::from_str("a: 1\nb:\n  - c: x\n    dd: [1, 2]\n").unwrap();
        let Node::Map(top) = n else { panic!() };
        assert_eq!(top[1].0.value.0, "b");
        assert_eq!(pos(&top[1].0), Pos { line: 2, column: 1 });
        let Node::Seq(items) = &top[1].1 else {
            panic!()
        };
        let Node::Map(inner) = &items[0] else {
            panic!()
        };
        assert_eq!(pos(&inner[1].0), Pos { line: 4, column: 5 });
    }
}
