//! Validate stage: every rule a spec must follow, checked on the raw structs.
//!
//! All problems are collected, each at the position of the YAML node it is about, so that one
//! build or `check` run reports them together. `lower` runs only when this finds nothing.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde_json::Value;

use crate::diag::{Diagnostics, Pos, Sink, did_you_mean};
use crate::ir::{ArgType, ColumnKind, Mode};
use crate::spec::{
    RawBlock, RawColumn, RawError, RawInterceptRule, RawMessage, RawPrompt, RawProxy, RawResource,
    RawRule, RawSpec, RawStatement, RawTool, Sp, pos,
};
use crate::sqltext;

mod content;
mod embeddings;
mod errors;
mod page;
mod proxy;
mod server;
mod statements;
mod tools;

pub(crate) fn validate(file: &Path, source: &str, spec: &RawSpec) -> Diagnostics {
    let mut v = Validator {
        sink: Sink::new(file),
        source,
        claims: spec.server.value.claims.keys().cloned().collect(),
        embeddings: spec.embeddings.keys().cloned().collect(),
        engines: spec
            .database
            .as_ref()
            .map(|d| d.value.by_dialect().map(|(d, _)| d).collect())
            .unwrap_or_default(),
    };
    v.server(spec);
    v.embeddings(spec);
    for (from, to) in &spec.error_codes {
        if !crate::ir::ERROR_CODES.contains(&from.as_str()) {
            v.sink.error(
                pos(to),
                format!("`error_codes` renames unknown code `{from}`"),
                "",
                &format!(
                    "the runtime's codes are {}",
                    crate::ir::ERROR_CODES.join(", ")
                ),
            );
        }
        if to.value.is_empty()
            || !to
                .value
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        {
            v.sink.error(
                pos(to),
                format!("error code `{}` is not UPPER_SNAKE_CASE", to.value),
                "",
                "",
            );
        }
    }
    v.tools(spec);
    if let Some(p) = &spec.proxy {
        v.proxy(spec, p);
    }
    v.errors(spec);
    v.demo(spec);
    v.toolsets(spec);
    v.examples(spec);
    v.startup(spec);
    v.resources(spec);
    v.prompts(spec);
    v.all_scopes(spec);
    v.sink.finish()
}

impl Validator<'_> {
    /// Every `scopes:` list of the spec: the server's, each tool's, resource's and prompt's.
    fn all_scopes(&mut self, spec: &RawSpec) {
        for (name, ty) in &spec.server.value.claims {
            if !is_ident(name) {
                self.sink.error(
                    pos(ty),
                    format!("claim `{name}` cannot be read as `:auth.claims.{name}`"),
                    "",
                    "a claim statements read is named with letters, digits and `_`",
                );
            }
            if mcpspec_def::ClaimKind::of(&ty.value).is_none() {
                self.sink.error(
                    pos(ty),
                    format!("claim `{name}` has the type `{}`", ty.value),
                    "",
                    "a claim is a `string`, `integer`, `number` or `boolean`",
                );
            }
        }
        if let Some(issuer) = &spec.server.value.issuer
            && !(issuer.value.starts_with("https://") || issuer.value.starts_with("http://"))
        {
            self.sink.error(
                pos(issuer),
                format!("`{}` is not an issuer's URL", issuer.value),
                "",
                "an OAuth issuer is an https URL, e.g. `https://id.example.com`",
            );
        }
        self.scopes(&spec.server.value.scopes);
        for t in &spec.tools {
            self.scopes(&t.value.scopes);
        }
        for r in &spec.resources {
            self.scopes(&r.value.scopes);
        }
        for p in &spec.prompts {
            self.scopes(&p.value.scopes);
        }
        let sides = spec.database.iter().flat_map(|d| d.value.by_dialect());
        for (dialect, side) in sides {
            if let Some(identity) = &side.value.identity {
                self.identity(dialect, identity);
            }
        }
    }

    /// `database.<engine>.identity`: PostgreSQL's only; roles and the setting are names.
    fn identity(&mut self, dialect: &sqlscan::Dialect, identity: &Sp<crate::spec::RawIdentity>) {
        if dialect.name != sqlscan::POSTGRES.name {
            self.sink.error(
                pos(identity),
                format!(
                    "`identity` is PostgreSQL's; {} has no roles a call could take",
                    dialect.name
                ),
                "",
                "on this engine statements read the caller as the parameter `:auth.sub`",
            );
            return;
        }
        let id = &identity.value;
        if id.roles.is_empty() {
            self.sink.error(
                pos(identity),
                "`identity.roles` lists no role",
                "",
                "list the roles a caller's call may take, e.g. `roles: [notes_user]`",
            );
        }
        let name = |s: &str, dots: bool| {
            !s.is_empty()
                && s.len() <= 63
                && s.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
                && s.chars().all(|c| {
                    c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || (dots && c == '.')
                })
        };
        for role in &id.roles {
            if !name(&role.value, false) {
                self.sink.error(
                    pos(role),
                    format!("`{}` is not a role name mcpspec takes", role.value),
                    "",
                    "lowercase letters, digits and `_`, starting with a letter or `_`, at most 63",
                );
            }
        }
        let setting = &id.claims_setting;
        if !name(&setting.value, true) || !setting.value.contains('.') {
            self.sink.error(
                pos(setting),
                format!("`{}` is not a custom setting's name", setting.value),
                "",
                "PostgreSQL's custom settings have a prefix and a dot, e.g. `request.jwt.claims`",
            );
        }
    }

    /// A `scopes:` list: each an OAuth scope token (RFC 6749, section 3.3: printable ASCII
    /// without spaces, `"` or `\\`), none twice.
    fn scopes(&mut self, list: &[Sp<String>]) {
        let mut seen = std::collections::BTreeSet::new();
        for s in list {
            let token = |c: char| c.is_ascii_graphic() && c != '"' && c != '\\';
            if s.value.is_empty() || !s.value.chars().all(token) {
                self.sink.error(
                    pos(s),
                    format!("`{}` is not an OAuth scope", s.value),
                    "",
                    "a scope is printable ASCII without spaces, `\"` or `\\`, e.g. `notes:write`",
                );
            } else if !seen.insert(s.value.as_str()) {
                self.sink.error(
                    pos(s),
                    format!("scope `{}` is listed twice", s.value),
                    "",
                    "",
                );
            }
        }
    }
}

/// What a statement's checks need to know of the tool it belongs to.
struct ToolScope<'a> {
    tool: &'a str,
    composite: bool,
    props: &'a BTreeMap<String, Pos>,
    /// Derived parameters and the argument each comes from.
    derived: &'a BTreeMap<String, String>,
    /// What `props` are, in messages: `input property`, `template variable`, `prompt argument`.
    noun: &'a str,
}

struct Validator<'a> {
    sink: Sink<'a>,
    source: &'a str,
    /// The claims `server.claims` declares, which statements may read as `:auth.claims.NAME`.
    claims: BTreeSet<String>,
    /// The embedding providers `embeddings:` declares, which statements may read as
    /// `:embeddings.NAME.FIELD`.
    embeddings: BTreeSet<String>,
    /// The dialects the database declares a side for.
    engines: Vec<&'static sqlscan::Dialect>,
}

fn valid_name(s: &str, max: usize) -> bool {
    !s.is_empty()
        && s.len() <= max
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

impl Validator<'_> {
    /// An environment variable name: uppercase letters, digits and `_`.
    fn env_name(&mut self, env: &Sp<String>) {
        if env.value.is_empty()
            || !env
                .value
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        {
            self.sink.error(
                pos(env),
                format!("invalid environment variable name `{}`", env.value),
                "",
                "use uppercase letters, digits and `_`",
            );
        }
    }

    /// A regular expression of an interceptor rule must compile with the runtime's engine.
    fn regex(&mut self, re: &Sp<String>, what: &str) {
        if let Err(e) = regex::Regex::new(&re.value) {
            let detail = e.to_string();
            let last = detail
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("invalid pattern")
                .trim()
                .trim_start_matches("error: ")
                .to_string();
            self.sink.error(
                pos(re),
                format!("the {what} pattern `{}` is not a valid regular expression: {last}", re.value),
                "does not compile",
                "patterns use the syntax of the Rust `regex` crate; escape a literal `.`, `(` or `\\` with `\\`",
            );
        }
    }

    /// Base64 text: the standard alphabet, padded to a multiple of four.
    fn base64(&mut self, d: &Sp<String>, what: &str) {
        use base64::Engine;
        let t = d.value.trim();
        let ok = !t.is_empty() && base64::engine::general_purpose::STANDARD.decode(t).is_ok();
        if !ok {
            self.sink.error(
                pos(d),
                format!("{what} is not base64"),
                "",
                "write the bytes in standard base64 (A-Z, a-z, 0-9, `+`, `/`, `=` padding)",
            );
        }
    }

    /// A minijinja template must parse.
    fn template(&mut self, t: &Sp<String>, what: &str) {
        let env = minijinja::Environment::new();
        if let Err(e) = env.template_from_str(&t.value) {
            self.sink.error(
                pos(t),
                format!(
                    "{what} is not a valid template: {}",
                    e.detail().unwrap_or("syntax error")
                ),
                "",
                "fix the `{{ ... }}` expressions",
            );
        }
    }

    /// A resource or prompt name: valid as an MCP name, and not declared twice.
    fn unique_name<'a>(
        &mut self,
        kind: &str,
        name: &'a Sp<String>,
        names: &mut BTreeMap<&'a str, Pos>,
    ) {
        if !valid_name(&name.value, 128) {
            self.sink.error(
                pos(name),
                format!("invalid {kind} name `{}`", name.value),
                "",
                "use 1 to 128 of A-Z, a-z, 0-9, `_`, `-` and `.`",
            );
        }
        if let Some(first) = names.insert(&name.value, pos(name)) {
            self.sink.error(
                pos(name),
                format!("duplicate {kind} name `{}`", name.value),
                "declared again here",
                &format!(
                    "the first declaration is at line {}; rename one",
                    first.line
                ),
            );
        }
    }

    /// Compiles a template and returns the variables it reads, empty when it does not compile.
    fn template_vars(&mut self, t: &Sp<String>, what: &str) -> BTreeSet<String> {
        let env = minijinja::Environment::new();
        match env.template_from_str(&t.value) {
            Ok(tmpl) => tmpl.undeclared_variables(false).into_iter().collect(),
            Err(e) => {
                self.sink.error(
                    pos(t),
                    format!(
                        "{what} is not a valid template: {}",
                        e.detail().unwrap_or("syntax error")
                    ),
                    "",
                    "fix the `{{ ... }}` expressions",
                );
                BTreeSet::new()
            }
        }
    }

    /// The position of byte `offset` of a (possibly block) scalar, found in the source text.
    fn offset_pos(&self, scalar: &Sp<String>, offset: usize) -> Pos {
        let start = pos(scalar);
        let text = &scalar.value;
        let before = &text[..offset.min(text.len())];
        let line_in = before.matches('\n').count();
        let col_in = before.rsplit('\n').next().map_or(0, str::len);
        let inline = self
            .source
            .lines()
            .nth(start.line.saturating_sub(1) as usize)
            .is_some_and(|l| {
                let rest: String = l
                    .chars()
                    .skip(start.column.saturating_sub(1) as usize)
                    .collect();
                !(rest.starts_with('|') || rest.starts_with('>'))
            });
        if inline && line_in == 0 {
            return Pos {
                line: start.line,
                column: start.column + u32::try_from(col_in).unwrap_or(0),
            };
        }
        // A block scalar: its content starts on the next line at the block's indentation.
        let line_no = start.line as usize + line_in + usize::from(!inline);
        let first_indent = self
            .source
            .lines()
            .nth(start.line as usize)
            .map_or(0, |l| l.len() - l.trim_start().len());
        Pos {
            line: u32::try_from(line_no).unwrap_or(u32::MAX),
            column: u32::try_from(first_indent + col_in + 1).unwrap_or(u32::MAX),
        }
    }
}

/// Whether `s` is a name of letters, digits and `_` that starts with a letter or `_`.
fn is_ident(s: &str) -> bool {
    s.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Whether a prompt message's resource URI, with each `{{ ... }}` standing for some text,
/// names a declared resource: a fixed URI, or a URI template's literal parts around variables.
fn resource_declared(resources: &[Sp<crate::spec::RawResource>], uri: &str) -> bool {
    // A URI that is one expression (`{{ uri }}`) is known only at run time, which reports a
    // URI that names no resource.
    let t = uri.trim();
    if t.starts_with("{{") && t.ends_with("}}") && t.matches("{{").count() == 1 {
        return true;
    }
    let mut shown = String::new();
    let mut rest = uri;
    while let Some(open) = rest.find("{{") {
        shown.push_str(&rest[..open]);
        shown.push('x');
        rest = rest[open..]
            .find("}}")
            .map_or("", |c| &rest[open + c + 2..]);
    }
    shown.push_str(rest);
    resources.iter().any(|r| {
        let r = &r.value;
        r.uri.as_ref().is_some_and(|u| u.value == shown)
            || r.uri_template
                .as_ref()
                .is_some_and(|t| template_matches(&t.value, &shown))
    })
}

/// Whether `uri` is an expansion of a level 1 URI template (each variable non-empty text).
fn template_matches(template: &str, uri: &str) -> bool {
    match template.find('{') {
        None => template == uri,
        Some(open) => {
            let Some(lit) = uri.strip_prefix(&template[..open]) else {
                return false;
            };
            let Some(close) = template[open..].find('}') else {
                return false;
            };
            let after = &template[open + close + 1..];
            (1..=lit.len())
                .filter(|i| lit.is_char_boundary(*i))
                .any(|i| !lit[..i].contains('/') && template_matches(after, &lit[i..]))
        }
    }
}

/// Whether a word is a Rust keyword, which cannot name a handler method.
fn syn_keyword(s: &str) -> bool {
    matches!(
        s,
        "as" | "async"
            | "await"
            | "break"
            | "const"
            | "continue"
            | "crate"
            | "dyn"
            | "else"
            | "enum"
            | "extern"
            | "false"
            | "fn"
            | "for"
            | "if"
            | "impl"
            | "in"
            | "let"
            | "loop"
            | "match"
            | "mod"
            | "move"
            | "mut"
            | "pub"
            | "ref"
            | "return"
            | "self"
            | "static"
            | "struct"
            | "super"
            | "trait"
            | "true"
            | "type"
            | "unsafe"
            | "use"
            | "where"
            | "while"
            | "yield"
            | "_"
    )
}

/// A quick check of a default against the common keywords; `check` runs full JSON Schema.
fn default_problem(schema: &Value, default: &Value) -> Option<String> {
    let ty = ArgType::of_schema(schema);
    let type_ok = match (&ty, default) {
        (ArgType::String, Value::String(_))
        | (ArgType::Boolean, Value::Bool(_))
        | (ArgType::Number, Value::Number(_))
        | (ArgType::Array(_), Value::Array(_))
        | (ArgType::Json, _) => true,
        (ArgType::Integer, Value::Number(n)) => n.is_i64() || n.is_u64(),
        _ => false,
    };
    if !type_ok {
        return Some(format!("{default} is not of type {}", schema["type"]));
    }
    if let Some(n) = default.as_f64() {
        if let Some(min) = schema.get("minimum").and_then(Value::as_f64)
            && n < min
        {
            return Some(format!("{default} is less than the minimum of {min}"));
        }
        if let Some(max) = schema.get("maximum").and_then(Value::as_f64)
            && n > max
        {
            return Some(format!("{default} is greater than the maximum of {max}"));
        }
    }
    if let Some(values) = schema.get("enum").and_then(Value::as_array)
        && !values.contains(default)
    {
        return Some(format!("{default} is not one of the `enum` values"));
    }
    None
}

/// The schema keyword that mirrors an argument into an HTTP header (SEP-2243).
const HEADER_KEY: &str = "x-mcp-header";

/// Whether `x-mcp-header` appears anywhere in a JSON value.
fn holds_header(v: &Value) -> bool {
    match v {
        Value::Object(o) => o.contains_key(HEADER_KEY) || o.values().any(holds_header),
        Value::Array(a) => a.iter().any(holds_header),
        _ => false,
    }
}

/// A character of an HTTP token (RFC 9110 `tchar`).
fn is_token_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c)
}
