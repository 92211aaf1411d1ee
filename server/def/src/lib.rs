//! The definition tables of an mcpspec server: one [`ServerDef`] per spec, the data the
//! runtime (`mcpspec`) interprets. They are built once, by the spec compiler's one builder
//! (`codegen::defs`), from a spec's IR: served as they are when a spec file is served, and
//! turned into the Rust tokens that rebuild them (`databake`'s [`Bake`], with the `bake`
//! feature) for a compiled server, so that the two never differ. Everything that interprets
//! them (validation, SQL execution, result shaping, the MCP surface) is the runtime's. The
//! runtime's settings and their defaults ([`settings`]) live here too, for the runtime and the
//! generated docs alike.
//!
//! [`Bake`]: https://docs.rs/databake

pub mod settings;

use serde::de::DeserializeOwned;
use serde_json::Value;

/// Tool arguments as they arrive in `tools/call`.
pub type Arguments = serde_json::Map<String, Value>;

/// How a tool's arguments become SQL parameters: by name from the validated JSON arguments,
/// each converted as the argument's type says, `(parameter, kind)`.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "bake", derive(databake::Bake), databake(path = mcpspec::def))]
pub struct Bind(pub &'static [(&'static str, ParamKind)]);

/// The Rust type an argument decodes to, which decides how it binds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "bake", derive(databake::Bake), databake(path = mcpspec::def))]
pub enum ParamKind {
    Text,
    Integer,
    /// A JSON number bound as a real, as `f64` binds.
    Real,
    Boolean,
    /// An array, bound as its JSON text.
    Array,
    /// Any JSON value, bound as `serde_json::Value` binds.
    Json,
    /// The reserved `:arguments` parameter: every argument as one JSON object.
    Arguments,
    /// `:auth.sub`: the caller's subject, from the request's OAuth access token.
    AuthSub,
    /// `:auth.claims.NAME`: a claim of the caller's access token, of the declared type.
    AuthClaim(ClaimKind),
    /// `:embeddings.NAME.FIELD`: the embedding provider `NAME` as the server runs it.
    Embeddings(EmbeddingsField),
    /// `:page.limit` or `:after.COLUMN` of a paged statement: the rows to fetch (the page's
    /// size and one more), and the last row's sort values that the call's `cursor` carries
    /// (NULL on the first page).
    Page,
}

/// What a `:embeddings.NAME.FIELD` parameter reads of a provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "bake", derive(databake::Bake), databake(path = mcpspec::def))]
pub enum EmbeddingsField {
    /// `model`: the model its vectors come from, with their dimensions (`static:…@256`,
    /// `openai:text-embedding-3-small@256`); NULL when the provider is off. Stored beside each
    /// vector, it tells the vectors of another model apart.
    Model,
    /// `dimensions`: the dimensions of its vectors, as the spec declares them.
    Dimensions,
    /// `health`: the provider checked now, as JSON text: `{provider, model, dimensions,
    /// state: "ok" | "off" | "failing", latency_ms, error}`.
    Health,
}

impl EmbeddingsField {
    /// Every field, with its name in `:embeddings.NAME.FIELD`.
    pub const ALL: &[(&str, EmbeddingsField)] = &[
        ("model", EmbeddingsField::Model),
        ("dimensions", EmbeddingsField::Dimensions),
        ("health", EmbeddingsField::Health),
    ];

    /// The field named `name`.
    pub fn of(name: &str) -> Option<EmbeddingsField> {
        Self::ALL.iter().find(|(n, _)| *n == name).map(|(_, f)| *f)
    }
}

/// The declared type of a claim statements read (`server.claims`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "bake", derive(databake::Bake), databake(path = mcpspec::def))]
pub enum ClaimKind {
    Text,
    Integer,
    Real,
    Boolean,
}

impl ClaimKind {
    /// The kind a spec's type name (`string`, `integer`, `number`, `boolean`) declares.
    pub fn of(name: &str) -> Option<ClaimKind> {
        Some(match name {
            "string" => ClaimKind::Text,
            "integer" => ClaimKind::Integer,
            "number" => ClaimKind::Real,
            "boolean" => ClaimKind::Boolean,
            _ => return None,
        })
    }

    /// The spec's name of the type.
    pub fn name(self) -> &'static str {
        match self {
            ClaimKind::Text => "string",
            ClaimKind::Integer => "integer",
            ClaimKind::Real => "number",
            ClaimKind::Boolean => "boolean",
        }
    }
}

/// A server compiled from one spec file.
#[derive(Debug, PartialEq)]
#[cfg_attr(feature = "bake", derive(databake::Bake), databake(path = mcpspec::def))]
pub struct ServerDef {
    pub name: &'static str,
    pub version: &'static str,
    pub title: Option<&'static str>,
    pub instructions: Option<&'static str>,
    /// The spec file this server was compiled from, relative to the workspace root.
    pub spec_file: &'static str,
    /// Absent for a server whose tools are all Rust handlers.
    pub database: Option<DatabaseDef>,
    /// Present when the server proxies downstream MCP servers.
    pub proxy: Option<ProxyDef>,
    pub demo: &'static [DemoCallDef],
    /// Calls run once in the background when the server starts serving, in order.
    pub startup: &'static [StartupJobDef],
    pub tools: &'static [ToolDef],
    /// Named subsets of the tools, `(name, tools)`, which `serve --toolset NAME` offers alone.
    pub toolsets: &'static [(&'static str, &'static [&'static str])],
    /// Renames of the runtime's error codes, `(built-in, this server's)`.
    pub error_codes: &'static [(&'static str, &'static str)],
    /// Declared JSON-RPC errors and the failures that map to them.
    pub errors: &'static [ErrorDef],
    /// MCP resources, fixed and templated, in spec order.
    pub resources: &'static [ResourceDef],
    /// MCP prompts, in spec order.
    pub prompts: &'static [PromptDef],
    /// OAuth scopes every request of a caller must have (see `ToolDef::scopes`).
    pub scopes: &'static [&'static str],
    /// The OAuth issuer the spec names, used when the command line and environment name none.
    pub issuer: Option<&'static str>,
    /// The tools' `examples:`, run by `mcpspec test` and `codegen check --db`.
    pub examples: &'static [ExampleDef],
    /// The embedding providers the spec declares (`embeddings:`), by name.
    pub embeddings: &'static [EmbeddingDef],
    /// The skills the server serves (`skills:`), in spec order.
    pub skills: &'static [SkillDef],
    /// The most the tool list may cost a client's context, in estimated tokens
    /// (`server.token_budget`).
    pub token_budget: Option<u64>,
}

impl ServerDef {
    /// The embedding provider named `name`.
    pub fn embedding(&self, name: &str) -> Option<&'static EmbeddingDef> {
        self.embeddings.iter().find(|e| e.name == name)
    }
}

/// An MCP App (SEP-1865) of a tool: the HTML view a host renders beside the tool's result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "bake", derive(databake::Bake), databake(path = mcpspec::def))]
pub enum AppDef {
    /// The runtime's built-in view of the structured result as tables.
    Table,
    /// A view of the spec author's own: an HTML file beside the spec, read when it compiled.
    Html {
        /// The file, as the spec names it (relative to the spec's directory).
        file: &'static str,
        html: &'static str,
    },
}

/// A skill in the Agent Skills layout that the server serves over the Skills extension
/// (SEP-2640): its `SKILL.md` and every other file of its directory, read when the spec was
/// compiled, each a resource `skill://<name>/<path>`.
#[derive(Debug, PartialEq)]
#[cfg_attr(feature = "bake", derive(databake::Bake), databake(path = mcpspec::def))]
pub struct SkillDef {
    /// The front matter's `name`, which is also the directory's name.
    pub name: &'static str,
    /// The front matter's `description`.
    pub description: &'static str,
    /// The whole front matter as JSON text, every field the author wrote.
    pub frontmatter: &'static str,
    /// The directory it was read from, as the spec names it (relative to the spec's).
    pub dir: &'static str,
    /// `SKILL.md` first, then the other files by path.
    pub files: &'static [SkillFileDef],
}

/// One file of a skill.
#[derive(Debug, PartialEq)]
#[cfg_attr(feature = "bake", derive(databake::Bake), databake(path = mcpspec::def))]
pub struct SkillFileDef {
    /// Its path in the skill's directory, `/`-separated, e.g. `references/search.md`.
    pub path: &'static str,
    pub mime_type: &'static str,
    /// The file's text; for a file that is not UTF-8, its bytes in base64.
    pub content: &'static str,
    /// Whether `content` is base64 (served as a blob).
    pub base64: bool,
    /// `sha256:` and the 64 lowercase hex digits of the file's bytes.
    pub digest: &'static str,
    /// The file's length in bytes.
    pub size: u64,
}

/// An embedding provider a spec declares: what turns text into the vectors its statements
/// store and search, and the dimensions every column that holds them has.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "bake", derive(databake::Bake), databake(path = mcpspec::def))]
pub struct EmbeddingDef {
    pub name: &'static str,
    /// The vectors' dimensions.
    pub dimensions: u32,
    pub provider: ProviderDef,
    /// The environment variable holding an HTTP provider's key (never the key).
    pub key_env: &'static str,
    /// The most texts one request to an HTTP provider carries.
    pub batch: u32,
    /// How long one request to an HTTP provider may take, in milliseconds.
    pub timeout_ms: u64,
    /// How often a failed request to an HTTP provider is tried again.
    pub retries: u32,
    /// The columns that hold this provider's vectors (`table.column`), checked against
    /// `dimensions` in every schema and live database.
    pub stored_in: &'static [&'static str],
}

/// Where an embedding provider's vectors come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "bake", derive(databake::Bake), databake(path = mcpspec::def))]
pub enum ProviderDef {
    /// A static model in a directory (`model.safetensors`, `tokenizer.json`), relative to the
    /// spec file unless absolute.
    Static(&'static str),
    /// An OpenAI-compatible HTTP API: its base URL (`https://api.openai.com/v1`) and model.
    OpenAi {
        base_url: &'static str,
        model: &'static str,
    },
    /// Chosen when the server starts, by an environment variable: `static:DIR`,
    /// `openai:BASE_URL` (with `VAR_MODEL`), or unset for none; `VAR_DIMENSIONS`, when set, must
    /// equal the declared dimensions.
    Env(&'static str),
}

/// A parameter a SQL tool computes from an argument before its statements run.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "bake", derive(databake::Bake), databake(path = mcpspec::def))]
pub struct DeriveDef {
    /// The parameter's name.
    pub name: &'static str,
    /// The argument it is computed from.
    pub from: &'static str,
    /// The transforms applied to the argument's text, in order.
    pub transforms: &'static [&'static str],
    /// The embedding provider that turns the text into a vector; none for text.
    pub embed: Option<&'static str>,
    /// When the provider is off, the argument values (`(argument, [values])`) with which the
    /// call fails with `EMBEDDINGS_OFF` rather than binding NULL.
    pub needed_when: &'static [(&'static str, &'static [&'static str])],
}

/// A tool call from the spec's `examples:` and what must come back.
#[derive(Debug, PartialEq)]
#[cfg_attr(feature = "bake", derive(databake::Bake), databake(path = mcpspec::def))]
pub struct ExampleDef {
    pub tool: &'static str,
    /// The arguments as JSON text.
    pub arguments: &'static str,
    pub expect: ExpectDef,
    /// The expectation holds on the spec's sample rows only, so a live database skips it.
    pub sample_rows: bool,
    /// Where the example is: `spec/x.yaml:12:9`.
    pub at: &'static str,
}

/// What an example must return.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "bake", derive(databake::Bake), databake(path = mcpspec::def))]
pub enum ExpectDef {
    /// A structured result containing this JSON (objects by their listed keys, arrays element
    /// by element and of the same length).
    Returns(&'static str),
    /// A result with no rows.
    Empty,
    /// A failure with this error code.
    Error(&'static str),
}

impl ServerDef {
    /// Every statement of the server's resources and prompts, named for start-up messages.
    pub fn content_statements(&'static self) -> Vec<(String, &'static StatementDef)> {
        let def = self;
        let resources = def.resources.iter().filter_map(|r| {
            let st = r.content.statement.as_ref()?;
            Some((format!("resource `{}`", r.name), st))
        });
        let prompts = def.prompts.iter().filter_map(|p| {
            let st = p.statement.as_ref()?;
            Some((format!("prompt `{}`", p.name), st))
        });
        resources.chain(prompts).collect()
    }

    /// Every completion query of the server, named for start-up messages.
    pub fn completion_queries(&'static self) -> Vec<(String, &'static str)> {
        let def = self;
        let resources = def.resources.iter().flat_map(|r| {
            r.complete
                .iter()
                .map(move |(v, sql)| (format!("resource `{}` variable `{v}`", r.name), *sql))
        });
        let prompts = def.prompts.iter().flat_map(|p| {
            p.arguments.iter().filter_map(move |a| {
                Some((
                    format!("prompt `{}` argument `{}`", p.name, a.name),
                    a.complete?,
                ))
            })
        });
        resources.chain(prompts).collect()
    }
}

/// An MCP resource, read by `resources/read`.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "bake", derive(databake::Bake), databake(path = mcpspec::def))]
pub struct ResourceDef {
    /// Unique in the server.
    pub name: &'static str,
    /// The fixed URI, or an RFC 6570 level 1 template (`{var}`) when `templated`.
    pub uri: &'static str,
    pub templated: bool,
    pub title: Option<&'static str>,
    pub description: Option<&'static str>,
    pub mime_type: &'static str,
    pub content: ContentDef,
    /// Completion SQL per template variable: `(variable, SQL)`; `:value` is the partial text.
    pub complete: &'static [(&'static str, &'static str)],
    /// OAuth scopes a caller needs to read the resource, besides the server's.
    pub scopes: &'static [&'static str],
}

/// How text is made from data: an optional statement whose result is `data`, and an optional
/// minijinja template over the variables and `data` (without one, the text is `data` as JSON).
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "bake", derive(databake::Bake), databake(path = mcpspec::def))]
pub struct ContentDef {
    pub statement: Option<StatementDef>,
    pub template: Option<&'static str>,
    /// Fixed binary content in base64, sent as `blob` instead of text.
    pub blob: Option<&'static str>,
    /// The content comes from the server's Rust handler for this resource (`handler:`), read
    /// through the runtime's `mcpspec::handler::Dispatch::read`.
    pub handler: bool,
}

/// An MCP prompt, rendered by `prompts/get`.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "bake", derive(databake::Bake), databake(path = mcpspec::def))]
pub struct PromptDef {
    /// Unique in the server.
    pub name: &'static str,
    pub title: Option<&'static str>,
    pub description: Option<&'static str>,
    pub arguments: &'static [PromptArgumentDef],
    /// Questions for the person, asked before the messages render.
    pub ask: &'static [AskDef],
    /// A statement over the arguments whose result is `data` in the messages.
    pub statement: Option<StatementDef>,
    pub messages: &'static [MessageDef],
    /// OAuth scopes a caller needs to get the prompt, besides the server's.
    pub scopes: &'static [&'static str],
}

/// A question a prompt asks the person (a form): the messages read the accepted answer's
/// content as `answers.<key>`.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "bake", derive(databake::Bake), databake(path = mcpspec::def))]
pub struct AskDef {
    pub key: &'static str,
    pub message: &'static str,
    /// The form's JSON Schema as JSON text: an object of primitive properties.
    pub schema: &'static str,
}

#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "bake", derive(databake::Bake), databake(path = mcpspec::def))]
pub struct PromptArgumentDef {
    pub name: &'static str,
    pub description: Option<&'static str>,
    pub required: bool,
    /// Completion SQL; `:value` is the partial text.
    pub complete: Option<&'static str>,
}

#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "bake", derive(databake::Bake), databake(path = mcpspec::def))]
pub struct MessageDef {
    /// `assistant` when true, else `user`.
    pub assistant: bool,
    pub body: MessageBodyDef,
}

#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "bake", derive(databake::Bake), databake(path = mcpspec::def))]
pub enum MessageBodyDef {
    /// A minijinja template over the arguments and `data`.
    Text(&'static str),
    /// The URI of a declared resource, a minijinja template over the arguments; embedded with
    /// its content.
    Resource(&'static str),
    /// An image: base64 data and its MIME type.
    Image(&'static str, &'static str),
}

/// A declared error, answered as a JSON-RPC error `{code, message, data: {code: name, ...}}`.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "bake", derive(databake::Bake), databake(path = mcpspec::def))]
pub struct ErrorDef {
    pub name: &'static str,
    /// In the server range -32000 to -32099.
    pub code: i32,
    /// A minijinja template over the error's fields and the call's arguments.
    pub message: &'static str,
    /// The fields copied into `data` beside `code`.
    pub data: &'static [&'static str],
    pub rules: &'static [RuleDef],
}

/// A failure that becomes a declared error, for some tools or (with none listed) all.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "bake", derive(databake::Bake), databake(path = mcpspec::def))]
pub struct RuleDef {
    pub when: RuleKindDef,
    pub tools: &'static [&'static str],
}

impl RuleDef {
    pub fn applies_to(&self, tool: &str) -> bool {
        self.tools.is_empty() || self.tools.contains(&tool)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "bake", derive(databake::Bake), databake(path = mcpspec::def))]
pub enum RuleKindDef {
    /// The named argument failed its JSON Schema.
    Invalid(&'static str),
    /// SQLite refused a write.
    Constraint,
    /// A `one` statement found no row.
    NoRow,
    /// A write changed no rows.
    NoChange,
}

/// A confirmation rule of a destructive tool.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "bake", derive(databake::Bake), databake(path = mcpspec::def))]
pub struct ConfirmDef {
    /// The boolean argument that must be `true`.
    pub argument: &'static str,
    /// A minijinja template over the arguments, the question put to the person.
    pub message: &'static str,
}

impl ServerDef {
    pub fn tool(&self, name: &str) -> Option<&'static ToolDef> {
        self.tools.iter().find(|t| t.name == name)
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
#[cfg_attr(feature = "bake", derive(databake::Bake), databake(path = mcpspec::def))]
pub struct DatabaseDef {
    /// The environment variable that overrides the default path.
    pub env: Option<&'static str>,
    pub default_linux: Option<&'static str>,
    pub default_macos: Option<&'static str>,
    pub default_windows: Option<&'static str>,
    /// Whether the spec declares the database read-only.
    pub read_only: bool,
    /// The DDL run by `mcpspec init`.
    pub schema: &'static str,
    /// Idempotent DDL for structures derived from the data (indexes, full-text tables, side
    /// tables and their triggers), applied by `init` after the schema and at start-up to every
    /// writable database; empty when the spec declares none.
    pub derived: &'static str,
    /// Sample rows loaded by `mcpspec init --sample` and `mcpspec demo`.
    pub sample: Option<&'static str>,
    /// The database servers the server also runs on, one per SQL dialect the spec gives a
    /// side for (`database.postgres`, ...).
    pub engines: &'static [EngineDef],
    /// The versioned migrations (`database.migrations`), in order; empty when the spec
    /// declares none, and `init` then runs the schema itself.
    pub migrations: &'static [MigrationDef],
}

impl DatabaseDef {
    /// The server's side for the dialect named `dialect`, if it runs there.
    pub fn engine(&self, dialect: &str) -> Option<&'static EngineDef> {
        self.engines.iter().find(|e| e.dialect == dialect)
    }
}

/// One versioned migration: a numbered SQL file beside the spec, with a text per engine the
/// server runs on (the file's own, or the `NNNN_name.<dialect>.sql` beside it).
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "bake", derive(databake::Bake), databake(path = mcpspec::def))]
pub struct MigrationDef {
    /// The number the file name starts with; versions count up from 1 without gaps.
    pub version: u32,
    /// The rest of the file name (`0002_lesson_evidence.sql` is `lesson_evidence`).
    pub name: &'static str,
    /// The text each engine runs, one per dialect (`sqlite`, `postgres`, ...).
    pub texts: &'static [MigrationTextDef],
}

impl MigrationDef {
    /// The text a database of `dialect` runs, if the server runs there.
    pub fn text(&self, dialect: &str) -> Option<&'static MigrationTextDef> {
        self.texts.iter().find(|t| t.dialect == dialect)
    }
}

/// A migration's text in one dialect and its checksum, which the database records when it
/// applies it.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "bake", derive(databake::Bake), databake(path = mcpspec::def))]
pub struct MigrationTextDef {
    pub dialect: &'static str,
    pub sql: &'static str,
    /// The SHA-256 of the file's bytes, as lowercase hex.
    pub checksum: &'static str,
}

/// A server's side on a database server: the dialect, where the URL may also come from, and
/// what `init` creates.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "bake", derive(databake::Bake), databake(path = mcpspec::def))]
pub struct EngineDef {
    /// The dialect's name, as `sqlscan::DIALECTS` lists it (`postgres`).
    pub dialect: &'static str,
    /// Another environment variable that may hold the database URL, after `env`.
    pub env: Option<&'static str>,
    /// The DDL run by `mcpspec init --db URL`.
    pub schema: &'static str,
    /// Sample rows for `init --sample`.
    pub sample: Option<&'static str>,
    /// How a caller becomes the database's role and claims (PostgreSQL).
    pub identity: Option<IdentityDef>,
}

/// Each call of a caller runs as `SET LOCAL ROLE` (one of `roles`, named by the claim
/// `role_claim`, else the first) with the token's claims in the setting `claims_setting`.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "bake", derive(databake::Bake), databake(path = mcpspec::def))]
pub struct IdentityDef {
    pub role_claim: Option<&'static str>,
    pub roles: &'static [&'static str],
    pub claims_setting: &'static str,
}

/// A statement's text in one dialect, its named parameters rewritten to the dialect's
/// placeholders at build time.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "bake", derive(databake::Bake), databake(path = mcpspec::def))]
pub struct DialectSqlDef {
    /// The dialect's name (`postgres`).
    pub dialect: &'static str,
    pub sql: &'static str,
    /// The name bound to each placeholder, in order.
    pub params: &'static [&'static str],
}

/// A proxy's tables: its downstream servers and its interceptor, run by the runtime's
/// `mcpspec::proxy`.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "bake", derive(databake::Bake), databake(path = mcpspec::def))]
pub struct ProxyDef {
    /// The JSON file that lists more downstream servers, read at start-up.
    pub config: Option<ProxyConfigDef>,
    /// Downstream servers declared in the spec, started before those of the config file.
    pub servers: &'static [DownstreamDef],
    /// `(downstream tool name, canonical name)`, sorted by downstream name.
    pub normalize: &'static [(&'static str, &'static str)],
    /// Argument names that give `:command`, first present wins.
    pub extract_command: &'static [&'static str],
    /// Argument names that give `:file_path`, first present wins.
    pub extract_file_path: &'static [&'static str],
    /// Static rules, checked before the query.
    pub rules: &'static [InterceptRuleDef],
    /// The interceptor query on the server's database, returning `key`, `action`, `message`.
    pub sql: Option<&'static str>,
    /// The named parameters of the query, without sigils.
    pub params: &'static [&'static str],
}

/// Where a proxy's config file is.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "bake", derive(databake::Bake), databake(path = mcpspec::def))]
pub struct ProxyConfigDef {
    pub env: Option<&'static str>,
    pub default_linux: Option<&'static str>,
    pub default_macos: Option<&'static str>,
    pub default_windows: Option<&'static str>,
}

/// A downstream MCP server declared in a spec.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "bake", derive(databake::Bake), databake(path = mcpspec::def))]
pub struct DownstreamDef {
    pub name: &'static str,
    pub command: &'static str,
    pub args: &'static [&'static str],
    pub env: &'static [(&'static str, &'static str)],
}

/// What an interceptor match does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "bake", derive(databake::Bake), databake(path = mcpspec::def))]
pub enum InterceptAction {
    /// Block the call; the downstream never sees it.
    Guard,
    /// Forward the call and put the message before the result's content.
    Hint,
}

impl InterceptAction {
    /// Every action as a spec (and an interceptor query's `action` column) writes it.
    pub const NAMES: &'static [&'static str] = &["guard", "hint"];

    /// Reads an action as a spec or the `action` column of an interceptor query writes it.
    pub fn parse(s: &str) -> Option<InterceptAction> {
        match s {
            "guard" => Some(InterceptAction::Guard),
            "hint" => Some(InterceptAction::Hint),
            _ => None,
        }
    }
}

/// A static interceptor rule; every condition given must hold.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "bake", derive(databake::Bake), databake(path = mcpspec::def))]
pub struct InterceptRuleDef {
    pub key: &'static str,
    /// Canonical tool names; every tool when empty.
    pub tools: &'static [&'static str],
    /// A regular expression `:command` must match.
    pub command: Option<&'static str>,
    /// A regular expression `:file_path` must match.
    pub file_path: Option<&'static str>,
    pub action: InterceptAction,
    pub message: &'static str,
}

/// A start-up job: a call of one of the server's own tools.
#[derive(Debug, PartialEq)]
#[cfg_attr(feature = "bake", derive(databake::Bake), databake(path = mcpspec::def))]
pub struct StartupJobDef {
    pub tool: &'static str,
    /// The arguments as JSON text.
    pub arguments: &'static str,
}

/// One step of the scripted `mcpspec demo` session.
#[derive(Debug, PartialEq)]
#[cfg_attr(feature = "bake", derive(databake::Bake), databake(path = mcpspec::def))]
pub struct DemoCallDef {
    pub tool: &'static str,
    /// The arguments as JSON text.
    pub arguments: &'static str,
    pub note: Option<&'static str>,
}

#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "bake", derive(databake::Bake), databake(path = mcpspec::def))]
pub struct ToolDef {
    pub name: &'static str,
    pub title: Option<&'static str>,
    pub description: &'static str,
    /// The published input JSON Schema, as JSON text.
    pub input_schema: &'static str,
    /// The published output JSON Schema, as JSON text.
    pub output_schema: &'static str,
    pub annotations: AnnotationsDef,
    /// Whether some statement changes the database; such tools are refused when read-only.
    pub writes: bool,
    /// Defaults applied to absent arguments before validation: `(name, JSON text)`.
    pub defaults: &'static [(&'static str, &'static str)],
    /// At least one of these arguments must be present (checked after JSON Schema).
    pub required_any: &'static [&'static str],
    /// Transforms applied to string arguments after validation: `(argument, [transform])`.
    pub transforms: &'static [(&'static str, &'static [&'static str])],
    /// The tool's own call timeout; the server default applies when absent.
    pub timeout_ms: Option<u64>,
    /// OAuth scopes a caller needs to call the tool, besides the server's.
    pub scopes: &'static [&'static str],
    /// Extra SQL parameters computed from arguments.
    pub derive: &'static [DeriveDef],
    /// Defaults for absent arguments read from environment variables at start-up.
    pub env_defaults: &'static [(&'static str, &'static str)],
    pub binding: BindingDef,
    /// Whether the result is MCP content blocks (a `content:` binding, or a handler with
    /// `output: content`) rather than structured JSON; such a tool has no output schema.
    pub content: bool,
    pub bind: Bind,
    pub confirm: Option<ConfirmDef>,
    /// Whether calls run as tasks (the tasks extension); `None`, never.
    pub task: Option<TaskSupport>,
    /// The MCP App (SEP-1865) hosts show the result in, as the resource `ui://<server>/<tool>`.
    pub app: Option<AppDef>,
    /// A handler tool's cap on its result's size as JSON text, in bytes (the server's limit
    /// bounds it too): a result past it keeps the rows of its longest list that fit.
    pub max_bytes: Option<u64>,
    /// Images a client may show beside the tool.
    pub icons: &'static [IconDef],
}

/// An image a client may show beside a tool (MCP 2025-11-25), as `tools/list` gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "bake", derive(databake::Bake), databake(path = mcpspec::def))]
pub struct IconDef {
    /// An `https:` URL or a `data:image/` URI.
    pub src: &'static str,
    pub mime_type: Option<&'static str>,
    /// Each `WxH` or `any`.
    pub sizes: &'static [&'static str],
    /// `light` or `dark`; `None` for any background.
    pub theme: Option<&'static str>,
}

/// Whether a tool's calls run as tasks (`io.modelcontextprotocol/tasks`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "bake", derive(databake::Bake), databake(path = mcpspec::def))]
pub enum TaskSupport {
    /// As a task when the client declared the extension, else synchronously.
    Optional,
    /// Only as a task; a client without the extension gets -32021.
    Required,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "bake", derive(databake::Bake), databake(path = mcpspec::def))]
pub struct AnnotationsDef {
    pub read_only: bool,
    pub destructive: bool,
    pub idempotent: bool,
    pub open_world: bool,
}

#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "bake", derive(databake::Bake), databake(path = mcpspec::def))]
pub enum BindingDef {
    Single(StatementDef),
    Composite(&'static [StatementDef]),
    /// A Rust handler, reached through the server's dispatcher.
    Handler,
    /// Fixed content blocks whose text and URIs are minijinja templates over the arguments.
    Content(&'static [BlockDef]),
    /// Rows embedded in batches until none is left (`backfill:`).
    Backfill(BackfillDef),
}

/// A backfill: rows whose text still needs a vector, embedded and stored a batch at a time,
/// each batch its own transaction, until none is left. A run stopped half-way (a kill, a
/// timeout, a cancellation) keeps the batches it stored; the next run goes on from there.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "bake", derive(databake::Bake), databake(path = mcpspec::def))]
pub struct BackfillDef {
    /// The embedding provider.
    pub embed: &'static str,
    /// The integer argument that sets the rows per batch; the provider's `batch` without one.
    pub size: Option<&'static str>,
    /// `pending` (the rows still to embed, `key` and `text`, at most `:batch`), `store` (one
    /// row's `:vector` for its `:key` and `:text`), and `remaining` (how many are left), when
    /// the spec gives it.
    pub statements: &'static [StatementDef],
}

impl BackfillDef {
    /// The statement named `name` (`pending`, `store`, `remaining`).
    pub fn statement(&self, name: &str) -> Option<&'static StatementDef> {
        self.statements.iter().find(|s| s.name == name)
    }
}

/// One content block of a `content:` binding.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "bake", derive(databake::Bake), databake(path = mcpspec::def))]
pub struct BlockDef {
    pub kind: BlockKind,
    /// The text of a `text` or `resource` block: a minijinja template over the arguments.
    pub text: Option<&'static str>,
    /// The base64 data of an `image` or `audio` block.
    pub data: Option<&'static str>,
    pub mime_type: Option<&'static str>,
    /// The URI of a `resource` block: a minijinja template over the arguments.
    pub uri: Option<&'static str>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "bake", derive(databake::Bake), databake(path = mcpspec::def))]
pub enum BlockKind {
    Text,
    Image,
    Audio,
    Resource,
}

impl BindingDef {
    pub fn statements(&self) -> &[StatementDef] {
        match self {
            BindingDef::Single(s) => std::slice::from_ref(s),
            BindingDef::Composite(parts) => parts,
            BindingDef::Backfill(b) => b.statements,
            BindingDef::Handler | BindingDef::Content(_) => &[],
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "bake", derive(databake::Bake), databake(path = mcpspec::def))]
pub struct StatementDef {
    /// The field of a composite result.
    pub name: &'static str,
    /// The field that holds rows (`Many`) or the value (`Scalar`) of a single statement.
    pub key: &'static str,
    /// The text with named parameters (`:name`): what SQLite runs.
    pub sql: &'static str,
    /// The text each other dialect the server runs on takes, one per engine of its database.
    pub texts: &'static [DialectSqlDef],
    pub mode: Mode,
    /// Whether the statement inserts rows, so that `execute` reports `last_insert_id`.
    pub inserts: bool,
    pub columns: &'static [ColumnDef],
    /// The most rows a `Many` statement returns; more are cut and flagged `truncated`.
    pub max_rows: u32,
    /// The most bytes a `Many` statement's rows make as JSON text, when it sets a cap of its
    /// own (the server's limit bounds it too); the rows past it are cut and flagged
    /// `truncated`.
    pub max_bytes: Option<u64>,
    /// A minijinja template over the arguments, shown when `Many` finds nothing.
    pub empty_message: Option<&'static str>,
    /// A minijinja template over the arguments, the error when `One` finds nothing.
    pub not_found: Option<&'static str>,
    /// Named parameters of the SQL, without sigils.
    pub params: &'static [&'static str],
    /// Parameters bound from an earlier single-row statement: `(param, statement, column)`.
    pub bind: &'static [(&'static str, &'static str, &'static str)],
    /// Computed fields beside the rows of a single `Many` statement.
    pub envelope: &'static [(&'static str, EnvelopeDef)],
    /// Keyset pagination of a single `Many` statement, when it pages.
    pub page: Option<PageDef>,
}

/// How a `Many` statement pages: the result columns its `ORDER BY` sorts on, whose values in
/// the last row returned the result's `next_cursor` carries (sealed) and the next call binds
/// as `:after.COLUMN`; the argument that sets a page's size; and how the query tells that
/// another page follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "bake", derive(databake::Bake), databake(path = mcpspec::def))]
pub struct PageDef {
    /// The sort columns, in `ORDER BY` order.
    pub by: &'static [&'static str],
    /// The integer argument that sets a page's size; without one, a page is `max_rows` rows.
    pub size: Option<&'static str>,
    /// Whether the query fetches one more row than a page holds (`:page.limit`), so that a
    /// next cursor is given only while rows remain; else (`:page.size`) a full page gives
    /// one.
    pub peek: bool,
}

/// The argument a paged tool takes its cursor in, and the result field that gives the next.
pub const CURSOR_ARGUMENT: &str = "cursor";
/// The field of a paged tool's result that holds the cursor of the next page.
pub const NEXT_CURSOR_FIELD: &str = "next_cursor";

impl StatementDef {
    /// The statement's text in the dialect named `dialect`, where the server runs on it.
    pub fn text(&self, dialect: &str) -> Option<&'static DialectSqlDef> {
        self.texts.iter().find(|t| t.dialect == dialect)
    }
}

/// Where an envelope field's value comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "bake", derive(databake::Bake), databake(path = mcpspec::def))]
pub enum EnvelopeDef {
    /// The number of rows returned.
    Count,
    /// An estimate of the result's tokens: its JSON length / 4.
    Tokens,
    /// An argument as the caller gave it.
    Arg(&'static str),
    /// A column of the first row (0 when there are no rows), removed from every row.
    Column(&'static str),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "bake", derive(databake::Bake), databake(path = mcpspec::def))]
pub enum Mode {
    Many,
    One,
    Optional,
    Scalar,
    Execute,
}

impl Mode {
    /// Every mode as a spec writes it (`returns:`), in the order of the variants.
    pub const NAMES: &'static [&'static str] = &["many", "one", "optional", "scalar", "execute"];
    const ALL: [Mode; 5] = [
        Mode::Many,
        Mode::One,
        Mode::Optional,
        Mode::Scalar,
        Mode::Execute,
    ];

    /// The mode a spec writes as `name`.
    pub fn parse(name: &str) -> Option<Mode> {
        let i = Mode::NAMES.iter().position(|n| *n == name)?;
        Some(Mode::ALL[i])
    }

    /// The mode as a spec writes it.
    pub fn name(self) -> &'static str {
        Mode::NAMES[self as usize]
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "bake", derive(databake::Bake), databake(path = mcpspec::def))]
pub struct ColumnDef {
    pub name: &'static str,
    pub kind: ColumnKind,
    pub nullable: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "bake", derive(databake::Bake), databake(path = mcpspec::def))]
pub enum ColumnKind {
    Text,
    Integer,
    Real,
    Boolean,
    /// JSON stored as text, returned as a JSON value.
    Json,
}

impl ColumnKind {
    /// Every kind as a spec writes it, in the order of the variants.
    pub const NAMES: &'static [&'static str] = &["text", "integer", "real", "boolean", "json"];
    const ALL: [ColumnKind; 5] = [
        ColumnKind::Text,
        ColumnKind::Integer,
        ColumnKind::Real,
        ColumnKind::Boolean,
        ColumnKind::Json,
    ];

    /// A column's type as a spec writes it (`text`, `integer?`, ...): the kind, and whether
    /// the column may be NULL (the trailing `?`).
    pub fn parse(written: &str) -> Option<(ColumnKind, bool)> {
        let (base, nullable) = match written.strip_suffix('?') {
            Some(b) => (b, true),
            None => (written, false),
        };
        let i = ColumnKind::NAMES.iter().position(|n| *n == base.trim())?;
        Some((ColumnKind::ALL[i], nullable))
    }

    /// The kind as a spec writes it.
    pub fn name(self) -> &'static str {
        ColumnKind::NAMES[self as usize]
    }
}

/// Arguments that passed JSON Schema validation but do not decode into the typed struct.
/// Validation runs first, so this signals a schema the typed struct disagrees with.
#[derive(Debug, thiserror::Error)]
#[error("arguments do not match the typed struct: {0}")]
pub struct ArgsError(#[from] pub serde_json::Error);

/// Decodes validated arguments into a tool's generated argument struct.
pub fn decode<T: DeserializeOwned>(arguments: &Arguments) -> Result<T, ArgsError> {
    // Deserializing from a borrowed map avoids cloning the arguments.
    Ok(T::deserialize(MapRef(arguments))?)
}

struct MapRef<'a>(&'a Arguments);

impl<'de> serde::Deserializer<'de> for MapRef<'de> {
    type Error = serde_json::Error;

    fn deserialize_any<V: serde::de::Visitor<'de>>(
        self,
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        serde::de::value::MapDeserializer::new(self.0.iter().map(|(k, v)| (k.as_str(), v)))
            .deserialize_any(visitor)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map struct enum identifier ignored_any
    }
}

#[cfg(test)]
mod tests {
    use super::{ColumnKind, Mode};

    #[test]
    fn a_mode_and_a_column_kind_read_back_from_the_names_a_spec_writes() {
        for name in Mode::NAMES {
            assert_eq!(Mode::parse(name).map(Mode::name), Some(*name));
        }
        assert_eq!(Mode::parse("optional"), Some(Mode::Optional));
        assert_eq!(Mode::parse("Many"), None);
        for name in ColumnKind::NAMES {
            assert_eq!(
                ColumnKind::parse(name).map(|(k, n)| (k.name(), n)),
                Some((*name, false))
            );
        }
        assert_eq!(ColumnKind::parse("json?"), Some((ColumnKind::Json, true)));
        assert_eq!(ColumnKind::parse("blob"), None);
    }
}
