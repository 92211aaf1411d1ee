//! The intermediate representation: a validated server, ready to emit.
//!
//! `lower` builds it from the raw spec once `validate` found nothing wrong; `emit` and the
//! checks read only this. Every name here has both its wire form and its Rust form.

use serde_json::Value;

pub(crate) use mcpspec_def::{
    AppDef, ColumnKind, ConfirmDef, DatabaseDef, DeriveDef, EmbeddingDef, EnvelopeDef, ErrorDef,
    InterceptAction, Mode, PromptDef, ProxyDef, ResourceDef, StatementDef, TaskSupport, ToolDef,
};

/// Each IR type that holds its definition (`def`, built by `lower`) reads as it.
macro_rules! reads_as_its_definition {
    ($($ir:ty => $def:ty),* $(,)?) => {$(
        impl std::ops::Deref for $ir {
            type Target = $def;

            fn deref(&self) -> &$def {
                &self.def
            }
        }
    )*};
}

reads_as_its_definition!(
    Embedding => EmbeddingDef,
    Resource => ResourceDef,
    Prompt => PromptDef,
    Database => DatabaseDef,
    Proxy => ProxyDef,
    Tool => ToolDef,
    Statement => StatementDef,
);

#[derive(Debug, Clone)]
pub(crate) struct Server {
    pub name: String,
    /// Where `server.name` is in the spec.
    pub name_pos: crate::diag::Pos,
    /// The Rust module name of the server.
    pub module: String,
    pub version: String,
    pub title: Option<String>,
    pub instructions: Option<String>,
    /// The spec file as named in messages, relative to the workspace root.
    pub file: String,
    /// Absent for a server whose tools are all handlers.
    pub database: Option<Database>,
    /// Present when the server proxies downstream MCP servers.
    pub proxy: Option<Proxy>,
    pub demo: Vec<DemoCall>,
    /// Calls run once in the background at start-up, in order.
    pub startup: Vec<StartupJob>,
    /// Markdown appended to the generated reference.
    pub docs: Option<String>,
    pub tools: Vec<Tool>,
    /// Named subsets of the tools (`serve --toolset`), by name, each in the spec's order.
    pub toolsets: Vec<(String, Vec<String>)>,
    /// Runtime error code renames, `(built-in, this server's)`.
    pub error_codes: Vec<(String, String)>,
    /// Declared JSON-RPC errors and the failures that map to them.
    pub errors: Vec<ErrorDef>,
    /// MCP resources, fixed and templated, in spec order.
    pub resources: Vec<Resource>,
    /// MCP prompts, in spec order.
    pub prompts: Vec<Prompt>,
    /// OAuth scopes every request of a caller needs.
    pub scopes: Vec<String>,
    /// The OAuth issuer the spec names.
    pub issuer: Option<String>,
    /// Every tool's `examples:`, in spec order.
    pub examples: Vec<Example>,
    /// The embedding providers, by name.
    pub embeddings: Vec<Embedding>,
    /// The skills it serves, read from the directories `skills:` names, in spec order.
    pub skills: Vec<Skill>,
    /// The most the tool list may cost in estimated tokens, and where the spec says so.
    pub token_budget: Option<(u64, crate::diag::Pos)>,
}

/// A skill (the Agent Skills layout) read from its directory beside the spec.
#[derive(Debug, Clone)]
pub(crate) struct Skill {
    /// The front matter's `name`, which is the directory's name.
    pub name: String,
    pub description: String,
    /// The front matter as JSON, every field the author wrote.
    pub frontmatter: serde_json::Map<String, Value>,
    /// The directory as the spec names it, relative to the spec's directory.
    pub dir: String,
    /// `SKILL.md` first, then the other files by path.
    pub files: Vec<SkillFile>,
}

/// One file of a skill.
#[derive(Debug, Clone)]
pub(crate) struct SkillFile {
    /// Relative to the skill's directory, `/`-separated.
    pub path: String,
    pub mime_type: String,
    /// The text, or the bytes in base64 for a file that is not UTF-8.
    pub content: String,
    pub base64: bool,
    /// `sha256:` and 64 lowercase hex digits.
    pub digest: String,
    pub size: u64,
}

/// An embedding provider: its definition ([`EmbeddingDef`], built by `lower` and read through
/// `Deref`), and where the spec names each column that holds its vectors.
#[derive(Debug, Clone)]
pub(crate) struct Embedding {
    /// Where the spec names each of `def.stored_in`, the columns holding its vectors, in their
    /// order.
    #[cfg_attr(not(feature = "sqlite"), allow(dead_code))]
    pub stored_in_at: Vec<crate::diag::Pos>,
    pub def: EmbeddingDef,
}

/// A tool call from a tool's `examples:` and what must come back.
#[derive(Debug, Clone)]
pub(crate) struct Example {
    pub tool: String,
    pub arguments: Value,
    pub expect: Expect,
    /// The expectation holds on the sample rows only.
    pub sample_rows: bool,
    /// Where the example is, as `file:line:column`.
    pub at: String,
    /// Where the example is; read by `check`.
    #[cfg_attr(not(feature = "sqlite"), allow(dead_code))]
    pub pos: crate::diag::Pos,
}

/// What an example must return.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Expect {
    /// A structured result that contains this value.
    Returns(Value),
    /// A result without rows.
    Empty,
    /// A failure with this error code.
    Error(String),
}

/// A start-up job: a call of one of the server's tools.
#[derive(Debug, Clone)]
pub(crate) struct StartupJob {
    pub tool: String,
    /// The arguments object.
    pub arguments: Value,
    /// Where the job is in the spec; read by `check`.
    #[cfg_attr(not(feature = "sqlite"), allow(dead_code))]
    pub pos: crate::diag::Pos,
}

/// An MCP resource: its definition as the runtime serves it ([`ResourceDef`], built by
/// `lower` and read through `Deref`), and what the checks and the emitter need beyond it.
#[derive(Debug, Clone)]
pub(crate) struct Resource {
    /// The statement that makes the content, with its positions (the definition holds its
    /// definition in `content.statement`).
    pub statement: Option<Statement>,
    /// The Rust method that makes the content, when bound with `handler:`.
    pub handler: Option<String>,
    /// The PascalCase stem of the resource's handler trait, `<Type>ResourceHandler`.
    #[cfg_attr(not(feature = "emit"), allow(dead_code))]
    pub type_name: String,
    /// The spec line that declares the resource.
    #[cfg_attr(not(feature = "emit"), allow(dead_code))]
    pub line: u32,
    pub def: ResourceDef,
}

/// An MCP prompt: its definition ([`PromptDef`], built by `lower` and read through `Deref`),
/// and its statement with its positions (the definition holds its definition).
#[derive(Debug, Clone)]
pub(crate) struct Prompt {
    pub statement: Option<Statement>,
    pub def: PromptDef,
}

/// One content block of a `content:` binding.
#[derive(Debug, Clone)]
pub(crate) struct Block {
    /// `text`, `image`, `audio` or `resource`.
    pub kind: String,
    pub text: Option<String>,
    pub data: Option<String>,
    pub mime_type: Option<String>,
    pub uri: Option<String>,
}

/// The variables of an RFC 6570 level 1 URI template, in order, or why it is not one.
pub(crate) fn uri_variables(template: &str) -> Result<Vec<String>, String> {
    let mut vars = Vec::new();
    let mut rest = template;
    let mut after_var = false;
    while let Some(open) = rest.find(['{', '}']) {
        if rest.as_bytes()[open] == b'}' {
            return Err("a `}` closes no variable".into());
        }
        if open == 0 && after_var {
            return Err("two variables touch; separate them with literal text".into());
        }
        let Some(close) = rest[open..].find('}') else {
            return Err("a `{` is never closed".into());
        };
        let name = &rest[open + 1..open + close];
        let ok = !name.is_empty()
            && name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !ok {
            return Err(format!(
                "`{{{name}}}` is not a level 1 variable (a name of letters, digits and `_`)"
            ));
        }
        if vars.iter().any(|v| v == name) {
            return Err(format!("variable `{name}` appears twice"));
        }
        vars.push(name.to_string());
        rest = &rest[open + close + 1..];
        after_var = true;
    }
    Ok(vars)
}

impl Server {
    /// The statements of resources and prompts, each with its owner as messages name it
    /// (`resource `stats``).
    #[cfg_attr(not(feature = "sql-check"), allow(dead_code))]
    pub fn content_statements(&self) -> impl Iterator<Item = (String, &Statement)> {
        let resources = self
            .resources
            .iter()
            .filter_map(|r| Some((format!("resource `{}`", r.name), r.statement.as_ref()?)));
        let prompts = self
            .prompts
            .iter()
            .filter_map(|p| Some((format!("prompt `{}`", p.name), p.statement.as_ref()?)));
        resources.chain(prompts)
    }

    /// The tools bound to Rust handlers, in spec order.
    #[cfg_attr(not(feature = "emit"), allow(dead_code))]
    pub fn handler_tools(&self) -> impl Iterator<Item = (&Tool, &str)> {
        self.tools.iter().filter_map(|t| match &t.binding {
            Binding::Handler(m) => Some((t, m.as_str())),
            _ => None,
        })
    }

    /// The resources bound to Rust handlers, with their method names, in spec order.
    #[cfg_attr(not(feature = "emit"), allow(dead_code))]
    pub fn handler_resources(&self) -> impl Iterator<Item = (&Resource, &str)> {
        self.resources
            .iter()
            .filter_map(|r| Some((r, r.handler.as_deref()?)))
    }
}

/// The runtime failures an error rule may map (`when:`), as a spec writes them.
pub(crate) const RULE_KINDS: &[&str] = &["invalid", "constraint", "no_row", "no_change"];

/// A typed output struct of a handler tool, from an object schema.
#[derive(Debug, Clone)]
pub(crate) struct OutStruct {
    pub name: String,
    #[cfg_attr(not(feature = "emit"), allow(dead_code))]
    pub doc: String,
    pub fields: Vec<OutField>,
    /// An earlier output struct of the same server with the same fields (a schema reused with
    /// a YAML anchor, say): this one is emitted as an alias of it, so that handlers can pass
    /// one value to both.
    pub alias_of: Option<String>,
}

#[derive(Debug, Clone)]
pub(crate) struct OutField {
    pub wire: String,
    pub field: String,
    pub ty: OutType,
    pub required: bool,
    pub description: Option<String>,
}

#[derive(Debug, Clone)]
pub(crate) enum OutType {
    String,
    Integer,
    Number,
    Boolean,
    Array(Box<OutType>),
    /// Another generated struct, by name.
    Struct(String),
    Json,
}

/// The database: its definition as the runtime opens it ([`DatabaseDef`], built by `lower`
/// and read through `Deref`; its migrations' definitions put in by `compile_in` once they are
/// read), and what the checks need beyond it.
#[derive(Debug, Clone)]
pub(crate) struct Database {
    /// Where the schema is written, for findings about the live database.
    #[cfg_attr(not(feature = "sqlite"), allow(dead_code))]
    pub schema_pos: crate::diag::Pos,
    /// The versioned migrations, in order, with their files (read from `migrations:` by
    /// `migrations::read`).
    pub migrations: Vec<Migration>,
    /// Where `migrations:` is written, the directory it names as shown in messages, and as
    /// written (relative to the spec file).
    pub migrations_at: Option<(crate::diag::Pos, String, String)>,
    pub def: DatabaseDef,
}

/// One versioned migration, with its text for each engine the server runs on.
#[derive(Debug, Clone)]
pub(crate) struct Migration {
    pub version: u32,
    pub name: String,
    /// SQLite's text first, then one per engine side.
    pub texts: Vec<MigrationText>,
}

impl Migration {
    /// The text for `dialect`.
    #[cfg_attr(not(feature = "sqlite"), allow(dead_code))]
    pub fn text(&self, dialect: &sqlscan::Dialect) -> Option<&MigrationText> {
        self.texts.iter().find(|t| t.dialect == dialect)
    }
}

/// A migration's text in one dialect, the file it is in and its checksum.
#[derive(Debug, Clone)]
pub(crate) struct MigrationText {
    pub dialect: &'static sqlscan::Dialect,
    /// The file, as shown in messages.
    pub file: String,
    pub sql: String,
    pub checksum: String,
}

/// A proxy: its definition ([`ProxyDef`], built by `lower` and read through `Deref`), and its
/// interceptor query with where it is written (the definition holds its text and parameters).
#[derive(Debug, Clone)]
pub(crate) struct Proxy {
    pub sql: Option<InterceptSql>,
    pub def: ProxyDef,
}

/// The interceptor's query and the parameters it uses.
#[derive(Debug, Clone)]
pub(crate) struct InterceptSql {
    /// Where the query is written, for findings of later checks.
    #[cfg_attr(not(feature = "sqlite"), allow(dead_code))]
    pub pos: crate::diag::Pos,
    pub sql: String,
    pub params: Vec<String>,
}

/// The parameters an interceptor query may use.
pub(crate) const INTERCEPT_PARAMS: &[&str] = &[
    "tool",
    "tool_name",
    "server",
    "command",
    "file_path",
    "arguments",
    "project",
];

/// The columns an interceptor query must return.
#[cfg_attr(not(feature = "sqlite"), allow(dead_code))]
pub(crate) const INTERCEPT_COLUMNS: &[&str] = &["key", "action", "message"];

#[derive(Debug, Clone)]
pub(crate) struct DemoCall {
    pub tool: String,
    pub arguments: Value,
    pub note: Option<String>,
    /// The error the call demonstrates, when it is meant to fail; read by `check`.
    #[cfg_attr(not(feature = "sqlite"), allow(dead_code))]
    pub error: Option<String>,
    /// Where the call is in the spec; read by `check`.
    #[cfg_attr(not(feature = "sqlite"), allow(dead_code))]
    pub pos: crate::diag::Pos,
}

/// A tool: its definition as the runtime runs it ([`ToolDef`], built by `lower` and read
/// through `Deref`), and what the checks, the docs and the emitter need beyond it. Four fields
/// here stand in for the definition's of the same name in a richer form: the schemas and the
/// defaults as JSON values (the definition holds their text) and the binding with its
/// statements' positions (the definition holds their definitions).
#[derive(Debug, Clone)]
pub(crate) struct Tool {
    /// Where the tool is declared, for findings of later checks.
    #[cfg_attr(not(feature = "sqlite"), allow(dead_code))]
    pub pos: crate::diag::Pos,
    /// The argument struct's name.
    #[cfg_attr(not(feature = "emit"), allow(dead_code))]
    pub type_name: String,
    pub input_schema: Value,
    pub output_schema: Value,
    #[cfg_attr(not(feature = "emit"), allow(dead_code))]
    pub args: Vec<Arg>,
    pub binding: Binding,
    /// Arguments referenced by some statement, in order of first use.
    pub sql_args: Vec<String>,
    /// Argument defaults to apply before validation, as `(wire name, value)`.
    #[cfg_attr(not(feature = "sqlite"), allow(dead_code))]
    pub defaults: Vec<(String, Value)>,
    /// For handler tools: the output structs, the tool's own first.
    pub outputs: Vec<OutStruct>,
    pub def: ToolDef,
}

#[derive(Debug, Clone)]
pub(crate) struct Arg {
    pub wire: String,
    #[cfg_attr(not(feature = "emit"), allow(dead_code))]
    pub field: String,
    pub ty: ArgType,
    /// Always present after defaults: required or defaulted.
    #[cfg_attr(not(feature = "emit"), allow(dead_code))]
    pub present: bool,
    #[cfg_attr(not(feature = "emit"), allow(dead_code))]
    pub description: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ArgType {
    String,
    Integer,
    Number,
    Boolean,
    Array(Box<ArgType>),
    Json,
}

impl ArgType {
    /// The Rust type for a JSON Schema property, from its `type` and `items`. A type list
    /// with `"null"` gives the other type; absence and null both become `None`.
    pub fn of_schema(schema: &Value) -> ArgType {
        let ty = match schema.get("type") {
            Some(Value::Array(types)) => {
                let non_null: Vec<&str> = types
                    .iter()
                    .filter_map(Value::as_str)
                    .filter(|t| *t != "null")
                    .collect();
                match non_null.as_slice() {
                    [one] => Some(*one),
                    _ => None,
                }
            }
            other => other.and_then(Value::as_str),
        };
        match ty {
            Some("string") => ArgType::String,
            Some("integer") => ArgType::Integer,
            Some("number") => ArgType::Number,
            Some("boolean") => ArgType::Boolean,
            Some("array") => match schema.get("items").map(ArgType::of_schema) {
                Some(
                    inner @ (ArgType::String
                    | ArgType::Integer
                    | ArgType::Number
                    | ArgType::Boolean),
                ) => ArgType::Array(Box::new(inner)),
                _ => ArgType::Json,
            },
            _ => ArgType::Json,
        }
    }
}

/// The transforms the runtime knows, with `truncate:N` written as its prefix.
pub(crate) const TRANSFORMS: &[&str] =
    &["trim", "lower", "words", "fts5", "fts5_prefix", "truncate:"];

/// The runtime's error codes a spec may rename.
pub(crate) const ERROR_CODES: &[&str] = &[
    "INVALID_ARGUMENTS",
    "NOT_FOUND",
    "READ_ONLY",
    "ARGUMENTS_TOO_LARGE",
    "RESULT_TOO_LARGE",
    "CONSTRAINT_VIOLATION",
    "DATABASE_BUSY",
    "DATABASE_ERROR",
    "TIMEOUT",
    "CANCELLED",
    "INTERNAL_ERROR",
    "CONFIRMATION_REQUIRED",
    "DECLINED",
    "IDENTITY_REQUIRED",
    "FORBIDDEN",
    "EMBEDDINGS_OFF",
    "EMBEDDING_FAILED",
];

/// The SQL parameter that binds the whole validated arguments object as JSON text, so that a
/// statement can tell an absent argument (`json_type(:arguments, '$.x') IS NULL`) from null.
pub(crate) const ARGUMENTS_PARAM: &str = "arguments";

/// The SQL parameter that binds the caller's subject: the `sub` of the OAuth access token the
/// request came with (see the runtime's `auth`). No argument can supply it.
pub(crate) const AUTH_SUB_PARAM: &str = "auth.sub";

/// The prefix of the SQL parameters that read an embedding provider as the server runs it,
/// `:embeddings.NAME.model`.
pub(crate) const EMBEDDINGS_PREFIX: &str = "embeddings.";

/// The prefix of the SQL parameters that bind a declared claim of the caller's access token,
/// `:auth.claims.NAME`.
pub(crate) const AUTH_CLAIM_PREFIX: &str = "auth.claims.";

#[derive(Debug, Clone)]
pub(crate) enum Binding {
    Single(Box<Statement>),
    Composite(Vec<Statement>),
    /// A Rust handler: the method of the server's handler trait.
    Handler(String),
    /// Fixed content blocks.
    Content(Vec<Block>),
    /// Rows embedded in batches until none is left: `statements` are `pending`, `store` and
    /// `remaining` (when the spec gives it), named so.
    Backfill {
        embed: String,
        size: Option<String>,
        statements: Vec<Statement>,
    },
}

/// The parameters a backfill's statements bind that no argument gives: `:batch` (pending),
/// `:key`, `:text` and `:vector` (store).
pub(crate) const BACKFILL_PARAMS: &[&str] = &["batch", "key", "text", "vector"];

impl Binding {
    pub fn statements(&self) -> &[Statement] {
        match self {
            Binding::Single(s) => std::slice::from_ref(s),
            Binding::Composite(v) => v,
            Binding::Backfill { statements, .. } => statements,
            Binding::Handler(_) | Binding::Content(_) => &[],
        }
    }
}

/// A statement: its definition as the runtime runs it ([`StatementDef`], built by `lower`
/// and read through `Deref`), and what the checks and the output schema need beyond it.
#[derive(Debug, Clone)]
pub(crate) struct Statement {
    /// Where the query is written, for findings of later checks.
    #[cfg_attr(not(feature = "sqlite"), allow(dead_code))]
    pub pos: crate::diag::Pos,
    /// Where each of `def.texts` is written (the dialect's own text, else the `query`), in
    /// their order.
    #[cfg_attr(not(feature = "sqlite"), allow(dead_code))]
    pub text_pos: Vec<crate::diag::Pos>,
    /// Each of `def.columns`' description and schema, in their order: the output schema's.
    pub column_docs: Vec<ColumnDoc>,
    pub def: StatementDef,
}

/// What a result column's schema says beyond its kind.
#[derive(Debug, Clone, Default)]
pub(crate) struct ColumnDoc {
    pub description: Option<String>,
    /// The schema the spec gives the column in place of its kind's.
    pub schema: Option<Value>,
}

impl Statement {
    /// The names of the columns the statement's result must have: the declared ones, and the
    /// `page.by` columns read for the cursor alone.
    #[cfg_attr(not(feature = "sqlite"), allow(dead_code))]
    pub fn result_columns(&self) -> Vec<&'static str> {
        let mut names: Vec<&'static str> = self.columns.iter().map(|c| c.name).collect();
        for c in self.page.iter().flat_map(|p| p.by) {
            if !names.contains(c) {
                names.push(c);
            }
        }
        names
    }
}

/// The SQL parameter of a paged statement that binds how many rows to fetch: a page's size
/// and one more, which tells whether rows remain.
pub(crate) const PAGE_LIMIT_PARAM: &str = "page.limit";

/// The SQL parameter of a paged statement that binds a page's size, for a query that cannot
/// afford the one more row: a full page then always gives a next cursor, and the last full
/// page is followed by an empty one.
pub(crate) const PAGE_SIZE_PARAM: &str = "page.size";

/// The prefix of the SQL parameters of a paged statement that bind the cursor's sort values,
/// `:after.COLUMN` (NULL on the first page).
pub(crate) const AFTER_PREFIX: &str = "after.";

/// Whether `param` is one a paged statement binds from its page (`:page.limit`,
/// `:after.COLUMN`) rather than from an argument.
pub(crate) fn is_page_param(param: &str) -> bool {
    param == PAGE_LIMIT_PARAM || param == PAGE_SIZE_PARAM || param.starts_with(AFTER_PREFIX)
}

/// An envelope field's source as a spec writes it (`count`, `tokens`, `arg:NAME`,
/// `column:NAME`).
pub(crate) fn envelope(s: &str) -> Option<EnvelopeDef> {
    use crate::intern::text;
    match s {
        "count" => Some(EnvelopeDef::Count),
        "tokens" => Some(EnvelopeDef::Tokens),
        _ => match s.split_once(':') {
            Some(("arg", a)) if !a.is_empty() => Some(EnvelopeDef::Arg(text(a))),
            Some(("column", c)) if !c.is_empty() => Some(EnvelopeDef::Column(text(c))),
            _ => None,
        },
    }
}
