//! Parse stage: YAML text into raw spec structs that keep source positions.
//!
//! These types mirror the YAML one to one and are only read by `validate` and `lower`; nothing
//! is emitted from them directly. Unknown keys are rejected here, with the position serde-saphyr
//! reports and a "did you mean" where a known key is close.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use serde_saphyr::Spanned;

use crate::diag::{Diagnostics, Pos, Sink, did_you_mean};

pub(crate) type Sp<T> = Spanned<T>;

pub(crate) fn pos<T>(s: &Sp<T>) -> Pos {
    Pos::from_saphyr(s.referenced)
}

/// One spec file as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawSpec {
    pub server: Sp<RawServer>,
    pub database: Sp<RawDatabase>,
    #[serde(default)]
    pub demo: Vec<Sp<RawDemoCall>>,
    pub tools: Vec<Sp<RawTool>>,
    /// Renames of the runtime's error codes for this server, e.g.
    /// `INVALID_ARGUMENTS: VALIDATION_ERROR`.
    #[serde(default)]
    pub error_codes: BTreeMap<String, Sp<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawServer {
    pub name: Sp<String>,
    pub version: Sp<String>,
    pub title: Option<String>,
    pub instructions: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawDatabase {
    /// The environment variable that overrides the default path.
    pub env: Option<Sp<String>>,
    /// Default locations per operating system; `~` expands to the home directory.
    #[serde(default)]
    pub default_path: RawDefaultPath,
    /// `read_only` or `read_write`.
    #[serde(default)]
    pub access: Option<Sp<String>>,
    /// The DDL the tools expect, run by `mcpspec init`.
    pub schema: Sp<String>,
    /// Sample rows as SQL, loaded by `mcpspec init --sample` and the demo.
    pub sample: Option<Sp<String>>,
    /// Full-text indexes: FTS5 tables kept in sync with their source tables by triggers.
    #[serde(default)]
    pub fts: Vec<Sp<RawFts>>,
}

#[derive(Debug, Deserialize)]
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

/// A parameter computed from an argument by transforms.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawDerive {
    pub from: String,
    #[serde(default)]
    pub transform: Vec<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawDefaultPath {
    pub linux: Option<String>,
    pub macos: Option<String>,
    pub windows: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawDemoCall {
    pub tool: Sp<String>,
    #[serde(default)]
    pub arguments: Option<Sp<serde_json::Value>>,
    pub note: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawTool {
    pub name: Sp<String>,
    pub title: Option<String>,
    pub description: Sp<String>,
    #[serde(default)]
    pub input: Option<Sp<RawInput>>,
    pub annotations: Option<Sp<RawAnnotations>>,
    pub sql: Option<Sp<RawStatement>>,
    pub compose: Option<Sp<Vec<Sp<RawStatement>>>>,
    /// How long one call may run before its query is interrupted.
    pub timeout_ms: Option<Sp<u64>>,
    /// Transforms applied to string arguments after validation and before binding, in order:
    /// `trim`, `lower`, `fts5` (each word quoted, all required), `fts5_prefix` (the same, each
    /// word a prefix) and `truncate:N`.
    #[serde(default)]
    pub transform: BTreeMap<String, Sp<Vec<String>>>,
    /// Extra SQL parameters computed from arguments: `name: {from: arg, transform: [...]}`.
    #[serde(default)]
    pub derive: BTreeMap<String, Sp<RawDerive>>,
    /// Defaults for absent arguments taken from environment variables at start-up.
    #[serde(default)]
    pub env_defaults: BTreeMap<String, Sp<String>>,
}

/// The top level of a tool's input JSON Schema. Properties stay raw JSON Schema so that every
/// keyword reaches the published schema; the keys here are the ones codegen reads.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawInput {
    #[serde(rename = "type")]
    pub ty: Option<Sp<String>>,
    pub description: Option<String>,
    #[serde(default)]
    pub properties: BTreeMap<String, Sp<serde_json::Value>>,
    #[serde(default)]
    pub required: Vec<Sp<String>>,
    /// At least one of these properties must be given. Checked by the server, because clients
    /// such as Claude Code reject a top-level `anyOf` in an input schema.
    #[serde(default, rename = "requiredAny")]
    pub required_any: Vec<Sp<String>>,
    #[serde(rename = "additionalProperties")]
    pub additional_properties: Option<bool>,
    #[serde(rename = "anyOf")]
    pub any_of: Option<Sp<serde_json::Value>>,
    #[serde(rename = "oneOf")]
    pub one_of: Option<Sp<serde_json::Value>>,
    #[serde(rename = "allOf")]
    pub all_of: Option<Sp<serde_json::Value>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct RawAnnotations {
    pub read_only_hint: Option<bool>,
    pub destructive_hint: Option<bool>,
    pub idempotent_hint: Option<bool>,
    pub open_world_hint: Option<bool>,
}

/// A SQL statement and how its result becomes JSON.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawStatement {
    /// The field this statement fills in a composite result.
    pub name: Option<Sp<String>>,
    pub query: Sp<String>,
    /// `many`, `one`, `optional`, `scalar` or `execute`.
    pub returns: Option<Sp<String>>,
    /// The field holding the rows (`many`) or the value (`scalar`) in a single-statement result.
    pub key: Option<Sp<String>>,
    /// Result columns: `name: type` where type is `text`, `integer`, `real`, `boolean` or
    /// `json`, with a trailing `?` when the column may be NULL.
    #[serde(default)]
    pub columns: BTreeMap<String, Sp<RawColumn>>,
    pub max_rows: Option<Sp<u32>>,
    pub empty_message: Option<Sp<String>>,
    pub not_found: Option<Sp<String>>,
    /// Parameters bound from a column of an earlier single-row statement: `param: stmt.column`.
    #[serde(default)]
    pub bind: BTreeMap<String, Sp<String>>,
    /// Computed fields beside the rows of a `many` result: `count`, `tokens`, `arg:NAME`
    /// (an argument as given) or `column:NAME` (a column of the first row, removed from rows).
    #[serde(default)]
    pub envelope: BTreeMap<String, Sp<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(crate) enum RawColumn {
    Short(String),
    Full(RawColumnFull),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawColumnFull {
    #[serde(rename = "type")]
    pub ty: String,
    #[serde(default)]
    pub nullable: bool,
    pub description: Option<String>,
    /// The JSON Schema of a `json` column's value.
    pub schema: Option<serde_json::Value>,
}

const TOP_KEYS: &[&str] = &["server", "database", "demo", "tools", "error_codes"];
const TOOL_KEYS: &[&str] = &[
    "name",
    "title",
    "description",
    "input",
    "annotations",
    "sql",
    "compose",
    "timeout_ms",
    "transform",
    "derive",
    "env_defaults",
];
const STATEMENT_KEYS: &[&str] = &[
    "name",
    "query",
    "returns",
    "key",
    "columns",
    "max_rows",
    "empty_message",
    "not_found",
    "bind",
    "envelope",
];
const DATABASE_KEYS: &[&str] = &["env", "default_path", "access", "schema", "sample", "fts"];
const INPUT_KEYS: &[&str] = &[
    "type",
    "description",
    "properties",
    "required",
    "requiredAny",
    "additionalProperties",
    "anyOf",
    "oneOf",
    "allOf",
];

/// Parses one spec file's text; `file` is used only for positions in diagnostics.
pub(crate) fn parse(file: &Path, text: &str) -> Result<RawSpec, Diagnostics> {
    // The default options keep serde-saphyr's input budget, which bounds alias expansion and
    // nesting, so a hostile spec cannot exhaust memory at build time.
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
        TOP_KEYS,
        TOOL_KEYS,
        STATEMENT_KEYS,
        DATABASE_KEYS,
        INPUT_KEYS,
    ]
    .concat()
    .into_iter()
    .collect();
    match did_you_mean(word, &all) {
        Some(s) => format!("did you mean `{s}`?"),
        None => "remove the key; the spec language does not know it".to_string(),
    }
}
