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

pub(crate) fn validate(file: &Path, source: &str, spec: &RawSpec) -> Diagnostics {
    let mut v = Validator {
        sink: Sink::new(file),
        source,
        engines: spec
            .database
            .as_ref()
            .map(|d| d.value.engines().into_iter().map(|(d, _)| d).collect())
            .unwrap_or_default(),
    };
    v.server(spec);
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
    v.examples(spec);
    v.startup(spec);
    v.resources(spec);
    v.prompts(spec);
    v.sink.finish()
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
    fn server(&mut self, spec: &RawSpec) {
        let server = &spec.server.value;
        let name = &server.name;
        if !valid_name(&name.value, 64) || !name.value.starts_with(|c: char| c.is_ascii_lowercase())
        {
            self.sink.error(
                pos(name),
                format!("invalid server name `{}`", name.value),
                "not a server name",
                "use lowercase letters, digits, `_` and `-`, starting with a letter",
            );
        }
        let version = &server.version;
        let parts: Vec<&str> = version.value.split('.').collect();
        if parts.len() != 3 || parts.iter().any(|p| p.parse::<u64>().is_err()) {
            self.sink.error(
                pos(version),
                format!("invalid server version `{}`", version.value),
                "not MAJOR.MINOR.PATCH",
                "write a SemVer version such as `1.2.0`",
            );
        }
        let Some(db) = &spec.database else {
            if let Some(t) = spec
                .tools
                .iter()
                .find(|t| t.value.sql.is_some() || t.value.compose.is_some())
            {
                self.sink.error(
                    pos(t),
                    format!(
                        "tool `{}` runs SQL but the spec declares no `database`",
                        t.value.name.value
                    ),
                    "",
                    "add a `database:` section with the schema the SQL expects",
                );
            }
            return;
        };
        let db = &db.value;
        if let Some(access) = &db.access
            && !matches!(access.value.as_str(), "read_only" | "read_write")
        {
            self.sink.error(
                pos(access),
                format!("unknown database access `{}`", access.value),
                "not an access mode",
                "use `read_only` or `read_write`",
            );
        }
        if let Some(env) = &db.env {
            self.env_name(env);
        }
        if db.schema.value.trim().is_empty() {
            self.sink.error(
                pos(&db.schema),
                "the database schema is empty",
                "",
                "write the CREATE TABLE statements the tools expect",
            );
        }
    }

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

    /// Proxy bindings: downstream servers, the name map, and the interceptor.
    fn proxy(&mut self, spec: &RawSpec, proxy: &Sp<RawProxy>) {
        let p = &proxy.value;
        self.proxy_config(p);
        self.proxy_servers(p);
        self.proxy_mapping(p);
        let Some(intercept) = &p.intercept else {
            return;
        };
        let mut keys: BTreeMap<&str, Pos> = BTreeMap::new();
        for r in &intercept.value.rules {
            self.intercept_rule(&r.value, &mut keys);
        }
        if let Some(sql) = &intercept.value.sql {
            self.intercept_sql(spec, sql);
        }
    }

    /// Where the downstream list comes from: an environment variable or a default path.
    fn proxy_config(&mut self, p: &RawProxy) {
        if let Some(c) = &p.config {
            if let Some(env) = &c.value.env {
                self.env_name(env);
            }
            let d = &c.value.default_path;
            if c.value.env.is_none()
                && d.linux.is_none()
                && d.macos.is_none()
                && d.windows.is_none()
            {
                self.sink.error(
                    pos(c),
                    "`proxy.config` names neither an environment variable nor a default path",
                    "",
                    "add `env: NAME_OF_VARIABLE` or `default_path: {linux: ..., macos: ..., windows: ...}`",
                );
            }
        }
    }

    /// Downstream servers: each named once, with a command.
    fn proxy_servers(&mut self, p: &RawProxy) {
        let mut names: BTreeMap<&str, Pos> = BTreeMap::new();
        for d in &p.servers {
            let n = &d.value.name;
            if n.value.trim().is_empty() {
                self.sink.error(
                    pos(n),
                    "a downstream server has an empty name",
                    "",
                    "name it; the name appears in logs and in DOWNSTREAM_FAILED errors",
                );
            } else if let Some(first) = names.insert(n.value.as_str(), pos(n)) {
                self.sink.error(
                    pos(n),
                    format!("duplicate downstream server name `{}`", n.value),
                    "declared again here",
                    &format!(
                        "the first declaration is at line {}; rename one",
                        first.line
                    ),
                );
            }
            if d.value.command.value.trim().is_empty() {
                self.sink.error(
                    pos(&d.value.command),
                    format!("downstream server `{}` has an empty command", n.value),
                    "",
                    "name the program that starts it, e.g. `npx`",
                );
            }
        }
    }

    /// Tool-name normalisation and argument extraction: no empty names.
    fn proxy_mapping(&mut self, p: &RawProxy) {
        for (from, to) in &p.normalize {
            if from.trim().is_empty() || to.value.trim().is_empty() {
                self.sink.error(
                    pos(to),
                    format!("`normalize` maps `{from}` to an empty name"),
                    "",
                    "map each downstream tool name to a canonical name such as `Bash` or `Read`",
                );
            }
        }
        if let Some(e) = &p.extract {
            for (what, list) in [
                ("command", &e.value.command),
                ("file_path", &e.value.file_path),
            ] {
                for a in list {
                    if a.value.trim().is_empty() {
                        self.sink.error(
                            pos(a),
                            format!("`extract.{what}` lists an empty argument name"),
                            "",
                            "list the argument names a downstream tool uses",
                        );
                    }
                }
            }
        }
    }

    /// One interceptor rule: a unique key, a known action, a message, tools and patterns.
    fn intercept_rule<'r>(&mut self, r: &'r RawInterceptRule, keys: &mut BTreeMap<&'r str, Pos>) {
        let k = &r.key;
        if k.value.trim().is_empty() {
            self.sink.error(
                pos(k),
                "an interceptor rule has an empty `key`",
                "",
                "name the rule",
            );
        } else if let Some(first) = keys.insert(k.value.as_str(), pos(k)) {
            self.sink.error(
                pos(k),
                format!("duplicate interceptor rule key `{}`", k.value),
                "",
                &format!(
                    "the first is at line {}; give each rule its own key",
                    first.line
                ),
            );
        }
        if crate::ir::InterceptAction::parse(&r.action.value).is_none() {
            self.sink.error(
                pos(&r.action),
                format!("unknown interceptor action `{}`", r.action.value),
                "not an action",
                &match did_you_mean(&r.action.value, crate::ir::InterceptAction::NAMES) {
                    Some(s) => format!("did you mean `{s}`?"),
                    None => "use `guard` (block the call) or `hint` (bundle the message with the result)".into(),
                },
            );
        }
        if r.message.value.trim().is_empty() {
            self.sink.error(
                pos(&r.message),
                format!("interceptor rule `{}` has an empty message", k.value),
                "",
                "say why the call is blocked or what to keep in mind",
            );
        }
        for t in &r.tools {
            if t.value.trim().is_empty() {
                self.sink.error(
                    pos(t),
                    format!("interceptor rule `{}` names an empty tool", k.value),
                    "",
                    "use canonical names such as `Bash`",
                );
            }
        }
        if let Some(c) = &r.command {
            self.regex(c, "command");
        }
        if let Some(f) = &r.file_path {
            self.regex(f, "file_path");
        }
    }

    /// The interceptor query: a database to run on, and only interceptor parameters.
    fn intercept_sql(&mut self, spec: &RawSpec, sql: &Sp<String>) {
        if spec.database.is_none() {
            self.sink.error(
                pos(sql),
                "`intercept.sql` runs on the server's database but the spec declares no `database`",
                "",
                "add a `database:` section, or use static `rules` only",
            );
        }
        if sql.value.trim().is_empty() {
            self.sink.error(
                pos(sql),
                "`intercept.sql` is empty",
                "",
                "write the query or remove the key",
            );
        }
        for param in sqltext::params(&sql.value) {
            if !crate::ir::INTERCEPT_PARAMS.contains(&param.name.as_str()) {
                self.sink.error(
                    self.offset_pos(sql, param.offset),
                    format!(
                        "SQL parameter `:{}` of `intercept.sql` is not an interceptor parameter",
                        param.name
                    ),
                    "no such parameter",
                    &match did_you_mean(&param.name, crate::ir::INTERCEPT_PARAMS) {
                        Some(n) => format!("did you mean `:{n}`?"),
                        None => format!(
                            "the parameters are {}",
                            crate::ir::INTERCEPT_PARAMS
                                .iter()
                                .map(|p| format!(":{p}"))
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    },
                );
            }
        }
    }

    fn tools(&mut self, spec: &RawSpec) {
        if spec.tools.is_empty() {
            self.sink.error(
                pos(&spec.server),
                "the spec declares no tools",
                "",
                "add at least one entry under `tools:`",
            );
        }
        let mut seen: BTreeMap<&str, Pos> = BTreeMap::new();
        for tool in &spec.tools {
            let name = &tool.value.name;
            if let Some(first) = seen.get(name.value.as_str()) {
                self.sink.error(
                    pos(name),
                    format!("duplicate tool name `{}`", name.value),
                    "declared again here",
                    &format!(
                        "the first declaration is at line {}; rename one",
                        first.line
                    ),
                );
            } else {
                seen.insert(&name.value, pos(name));
            }
            self.tool(&tool.value, pos(tool));
        }
    }

    fn tool(&mut self, tool: &RawTool, at: Pos) {
        self.tool_head(tool);
        let (props, required) = self.tool_input(tool);
        self.tool_confirm(tool);
        if let Some(h) = &tool.handler {
            if let Some(c) = &tool.content {
                self.sink.error(
                    pos(c),
                    format!(
                        "tool `{}` has both `handler` and `content`",
                        tool.name.value
                    ),
                    "",
                    "a handler returns its content with `output: content`; drop one of them",
                );
            }
            self.handler_tool(tool, h, at);
            return;
        }
        if let Some(c) = &tool.content {
            self.content_tool(tool, c);
            return;
        }
        if let Some(o) = &tool.output {
            self.sink.error(
                pos(o),
                format!(
                    "`output` of `{}` applies only to handler tools",
                    tool.name.value
                ),
                "",
                "a SQL tool's output schema comes from its `columns`",
            );
        }
        let Some(statements) = self.tool_statements(tool, at) else {
            return;
        };
        self.tool_parameters(tool, &props);
        self.sql_tool(tool, &props, &required, statements);
    }

    /// The tool's name and description.
    fn tool_head(&mut self, tool: &RawTool) {
        let name = &tool.name;
        if !valid_name(&name.value, 128) {
            self.sink.error(
                pos(name),
                format!("invalid tool name `{}`", name.value),
                "not a tool name",
                "MCP tool names use 1 to 128 of A-Z, a-z, 0-9, `_`, `-` and `.`",
            );
        }
        if tool.description.value.trim().is_empty() {
            self.sink.error(
                pos(&tool.description),
                format!("tool `{}` has an empty description", name.value),
                "",
                "say what the tool does and when a model should call it",
            );
        }
    }

    /// The input schema's top level and each property; returns the properties (with their
    /// positions) and the required ones.
    fn tool_input(&mut self, tool: &RawTool) -> (BTreeMap<String, Pos>, BTreeSet<String>) {
        let name = &tool.name;
        let mut props: BTreeMap<String, Pos> = BTreeMap::new();
        let mut required: BTreeSet<String> = BTreeSet::new();
        if let Some(input) = &tool.input {
            let input = &input.value;
            if let Some(ty) = &input.ty
                && ty.value != "object"
            {
                self.sink.error(
                    pos(ty),
                    format!(
                        "the input schema of `{}` must have type `object`",
                        name.value
                    ),
                    "",
                    "MCP tool arguments are always an object",
                );
            }
            for (pname, schema) in &input.properties {
                props.insert(pname.clone(), pos(schema));
                self.property(&name.value, pname, schema, &input.defs);
            }
            self.header_params(&name.value, input);
            for r in &input.required {
                if !input.properties.contains_key(&r.value) {
                    let names: Vec<&str> = input.properties.keys().map(String::as_str).collect();
                    self.sink.error(
                        pos(r),
                        format!("required property `{}` is not declared", r.value),
                        "not in `properties`",
                        &match did_you_mean(&r.value, &names) {
                            Some(s) => format!("did you mean `{s}`?"),
                            None => "declare it under `properties` or remove it".into(),
                        },
                    );
                }
                required.insert(r.value.clone());
            }
            for r in &input.required_any {
                if !input.properties.contains_key(&r.value) {
                    self.sink.error(
                        pos(r),
                        format!("`requiredAny` names `{}`, which is not declared", r.value),
                        "not in `properties`",
                        "list properties declared under `properties`",
                    );
                }
            }
            if input.required_any.len() == 1 {
                self.sink.error(
                    pos(&input.required_any[0]),
                    "`requiredAny` lists a single property",
                    "",
                    "list two or more, or put the property under `required`",
                );
            }
            for (key, value) in [("then", &input.then), ("else", &input.else_)] {
                if let (Some(v), None) = (value, &input.if_) {
                    self.sink.error(
                        pos(v),
                        format!("`{key}` without `if` has no effect"),
                        "never applied",
                        "add the `if` subschema that selects it, or move these rules under `allOf`",
                    );
                }
            }
        }

        (props, required)
    }

    /// The confirmation rule: a boolean input property and a message template.
    fn tool_confirm(&mut self, tool: &RawTool) {
        let name = &tool.name;
        if let Some(c) = &tool.confirm {
            let arg = &c.value.argument;
            match tool
                .input
                .as_ref()
                .and_then(|i| i.value.properties.get(&arg.value))
            {
                None => self.sink.error(
                    pos(arg),
                    format!(
                        "the confirmation argument `{}` of `{}` is not an input property",
                        arg.value, name.value
                    ),
                    "not in `properties`",
                    "declare it as `{type: boolean}` under `input.properties`",
                ),
                Some(p) if p.value.get("type") != Some(&Value::from("boolean")) => self.sink.error(
                    pos(arg),
                    format!(
                        "the confirmation argument `{}` of `{}` is not a boolean",
                        arg.value, name.value
                    ),
                    "",
                    "give it `type: boolean`",
                ),
                Some(_) => {}
            }
            self.template(&c.value.message, "the confirmation message");
        }
    }

    /// A SQL tool's statements: exactly one of `sql` and `compose`; `None` when neither or
    /// both are there (reported).
    fn tool_statements<'t>(
        &mut self,
        tool: &'t RawTool,
        at: Pos,
    ) -> Option<Vec<&'t Sp<RawStatement>>> {
        let name = &tool.name;
        Some(match (&tool.sql, &tool.compose) {
            (Some(s), None) => vec![s],
            (None, Some(c)) => {
                if c.value.is_empty() {
                    self.sink.error(
                        pos(c),
                        "`compose` lists no statements",
                        "",
                        "add the named statements whose results form the fields of the result",
                    );
                }
                c.value.iter().collect()
            }
            (Some(s), Some(_)) => {
                self.sink.error(
                    pos(s),
                    format!("tool `{}` has both `sql` and `compose`", name.value),
                    "",
                    "a tool binds to one statement (`sql`) or to several (`compose`), not both",
                );
                return None;
            }
            (None, None) => {
                self.sink.error(
                    at,
                    format!("tool `{}` has no binding", name.value),
                    "",
                    "add `sql:` with a `query`, `compose:` with named statements, `content:` with fixed blocks, or `handler:` with a Rust method",
                );
                return None;
            }
        })
    }

    /// Transforms, derived parameters, environment defaults and the timeout of a SQL tool.
    fn tool_parameters(&mut self, tool: &RawTool, props: &BTreeMap<String, Pos>) {
        for (arg, list) in &tool.transform {
            if !props.contains_key(arg) {
                self.sink.error(
                    pos(list),
                    format!("`transform` names `{arg}`, which is not an input property"),
                    "",
                    "transform declared arguments only",
                );
            }
            self.check_transforms(arg, list, &list.value);
        }
        for (name, d) in &tool.derive {
            if props.contains_key(name) {
                self.sink.error(
                    pos(d),
                    format!("derived parameter `{name}` has the name of an argument"),
                    "",
                    "rename it",
                );
            }
            if !props.contains_key(&d.value.from) {
                self.sink.error(
                    pos(d),
                    format!("derived parameter `{name}` comes from `{}`, which is not an input property", d.value.from),
                    "",
                    "derive from a declared argument",
                );
            }
            self.check_transforms(name, d, &d.value.transform);
        }
        for (arg, var) in &tool.env_defaults {
            if !props.contains_key(arg) {
                self.sink.error(
                    pos(var),
                    format!("`env_defaults` names `{arg}`, which is not an input property"),
                    "",
                    "",
                );
            }
        }
        if let Some(t) = &tool.timeout_ms
            && t.value == 0
        {
            self.sink
                .error(pos(t), "`timeout_ms` must be at least 1", "", "");
        }
        if let Some(t) = &tool.task
            && !matches!(t.value.as_str(), "optional" | "required")
        {
            self.sink.error(
                pos(t),
                format!("unknown task support `{}`", t.value),
                "not a task support",
                "use `optional` (a task when the client can take one) or `required` (only as a task)",
            );
        }
    }

    /// A SQL tool's statements, and every required property used by one of them.
    fn sql_tool(
        &mut self,
        tool: &RawTool,
        props: &BTreeMap<String, Pos>,
        required: &BTreeSet<String>,
        statements: Vec<&Sp<RawStatement>>,
    ) {
        let name = &tool.name;
        let composite = tool.compose.is_some();
        let mut used: BTreeSet<String> = BTreeSet::new();
        // A derived parameter counts as a use of the argument it comes from.
        let derived: BTreeMap<String, String> = tool
            .derive
            .iter()
            .map(|(k, d)| (k.clone(), d.value.from.clone()))
            .collect();
        let mut earlier: BTreeMap<String, (Mode, BTreeSet<String>)> = BTreeMap::new();
        for st in statements {
            let cx = ToolScope {
                tool: &name.value,
                composite,
                props,
                derived: &derived,
                noun: "input property",
            };
            self.statement(&cx, st, &mut used, &mut earlier);
        }
        for r in required {
            if props.contains_key(r) && !used.contains(r) {
                self.sink.error(
                    props[r],
                    format!(
                        "required property `{r}` is never used by the SQL of `{}`",
                        name.value
                    ),
                    "required but unused",
                    &format!("use `:{r}` in a statement, or drop it from `required`"),
                );
            }
        }
    }

    /// A tool bound to a Rust handler: a method name, an object output schema, nothing of SQL.
    fn handler_tool(&mut self, tool: &RawTool, h: &Sp<String>, at: Pos) {
        let name = &tool.name.value;
        self.method_name(h, name);
        if let Some(s) = &tool.sql {
            self.sink.error(
                pos(s),
                format!("tool `{name}` has both `handler` and `sql`"),
                "",
                "a tool binds to SQL or to a Rust handler, not both",
            );
        }
        if let Some(c) = &tool.compose {
            self.sink.error(
                pos(c),
                format!("tool `{name}` has both `handler` and `compose`"),
                "",
                "a tool binds to SQL or to a Rust handler, not both",
            );
        }
        if let Some((d, _)) = tool.derive.iter().next() {
            self.sink.error(
                pos(&tool.derive[d]),
                format!("`derive` of `{name}` applies only to SQL tools"),
                "",
                "compute the value in the handler",
            );
        }
        match &tool.output {
            None => self.sink.error(
                at,
                format!("handler tool `{name}` declares no `output`"),
                "",
                "add `output:` with the JSON Schema object of the result; it is the tool's outputSchema and the handler's typed output",
            ),
            Some(o) if o.value.is_string() => {
                if o.value != "content" {
                    self.sink.error(
                        pos(o),
                        format!("unknown output `{}` of `{name}`", o.value.as_str().unwrap_or_default()),
                        "",
                        "write `output: content` for MCP content blocks, or the JSON Schema object of a structured result",
                    );
                }
            }
            Some(o) => {
                let ok = o.value.get("type") == Some(&Value::from("object"))
                    && o.value.get("properties").is_some_and(Value::is_object);
                if !ok {
                    self.sink.error(
                        pos(o),
                        format!("the output of `{name}` is not an object schema with `properties`"),
                        "",
                        "write `output: {type: object, properties: {...}, required: [...]}`",
                    );
                }
            }
        }
    }

    /// A handler's method name: a snake_case Rust identifier that is not a keyword.
    fn method_name(&mut self, h: &Sp<String>, owner: &str) {
        let ident = !h.value.is_empty()
            && h.value
                .starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
            && h.value
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        if !ident || syn_keyword(&h.value) {
            self.sink.error(
                pos(h),
                format!(
                    "handler `{}` of `{owner}` is not a Rust method name",
                    h.value
                ),
                "",
                "use snake_case: lowercase letters, digits and `_`, e.g. `db_list`",
            );
        }
    }

    /// A tool bound to fixed content blocks: each block well formed, nothing of SQL.
    fn content_tool(&mut self, tool: &RawTool, blocks: &Sp<Vec<Sp<RawBlock>>>) {
        let name = &tool.name.value;
        for (key, at) in [
            ("sql", tool.sql.as_ref().map(pos)),
            ("compose", tool.compose.as_ref().map(pos)),
            ("output", tool.output.as_ref().map(pos)),
        ] {
            if let Some(at) = at {
                self.sink.error(
                    at,
                    format!("tool `{name}` has both `content` and `{key}`"),
                    "",
                    "a content tool's result is its blocks; remove the other binding",
                );
            }
        }
        if blocks.value.is_empty() {
            self.sink.error(
                pos(blocks),
                format!("`content` of `{name}` lists no blocks"),
                "",
                "add blocks such as `{type: text, text: ...}`",
            );
        }
        for b in &blocks.value {
            let at = pos(b);
            let b = &b.value;
            let (text, data, mime, uri) = match b.ty.value.as_str() {
                "text" => (true, false, false, false),
                "image" | "audio" => (false, true, true, false),
                "resource" => (true, false, true, true),
                other => {
                    self.sink.error(
                        pos(&b.ty),
                        format!("unknown content block type `{other}`"),
                        "",
                        "use `text`, `image`, `audio` or `resource`",
                    );
                    continue;
                }
            };
            let ty = &b.ty.value;
            for (key, wanted, given) in [
                ("text", text, b.text.as_ref().map(pos)),
                ("data", data, b.data.as_ref().map(pos)),
                ("mime_type", mime, b.mime_type.as_ref().map(pos)),
                ("uri", uri, b.uri.as_ref().map(pos)),
            ] {
                match (wanted, given) {
                    (true, None) => self.sink.error(
                        at,
                        format!("a `{ty}` block of `{name}` has no `{key}`"),
                        "",
                        &format!("add `{key}:`"),
                    ),
                    (false, Some(p)) => self.sink.error(
                        p,
                        format!("`{key}` does not apply to a `{ty}` block"),
                        "",
                        "remove it",
                    ),
                    _ => {}
                }
            }
            if let Some(t) = &b.text {
                self.template(t, "the text of a content block");
            }
            if let Some(u) = &b.uri {
                self.template(u, "the uri of a content block");
            }
            if let Some(d) = &b.data {
                self.base64(d, "the data of a content block");
            }
            if let Some(m) = &b.mime_type
                && !m.value.contains('/')
            {
                self.sink.error(
                    pos(m),
                    format!("invalid mime type `{}`", m.value),
                    "",
                    "write a MIME type such as `image/png`",
                );
            }
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

    /// Declared errors: names, codes in the server range, templates and rules.
    fn errors(&mut self, spec: &RawSpec) {
        self.handler_names(spec);
        let mut names: BTreeMap<&str, Pos> = BTreeMap::new();
        let mut codes: BTreeMap<i64, Pos> = BTreeMap::new();
        let tools: Vec<&str> = spec
            .tools
            .iter()
            .map(|t| t.value.name.value.as_str())
            .collect();
        for e in &spec.errors {
            self.error_declaration(&e.value, &mut names, &mut codes);
            for r in &e.value.rules {
                self.error_rule(spec, &e.value.name, r, &tools);
            }
        }
    }

    /// Handler methods and traits: one method per tool or resource, and no two traits with
    /// one name.
    fn handler_names(&mut self, spec: &RawSpec) {
        let mut handlers = BTreeMap::new();
        for t in &spec.tools {
            if let Some(h) = &t.value.handler
                && let Some(first) = handlers.insert(h.value.as_str(), pos(h))
            {
                self.sink.error(
                    pos(h),
                    format!("handler `{}` is bound to two tools", h.value),
                    "",
                    &format!(
                        "the first is at line {}; give each tool its own method",
                        first.line
                    ),
                );
            }
        }
        // Tools and resources share one handler namespace: one method of one type each, and
        // one trait name each (`<Tool>Handler`, `<Resource>ResourceHandler`).
        for r in spec.resources.iter().filter(|r| r.value.handler.is_some()) {
            let ty = crate::names::pascal(&r.value.name.value) + "Resource";
            if let Some(t) = spec.tools.iter().find(|t| {
                t.value.handler.is_some() && crate::names::pascal(&t.value.name.value) == ty
            }) {
                self.sink.error(
                    pos(&r.value.name),
                    format!(
                        "the handler trait of resource `{}` would be `{ty}Handler`, as is that of tool `{}`",
                        r.value.name.value, t.value.name.value
                    ),
                    "",
                    "rename the resource or the tool",
                );
            }
        }
        for r in &spec.resources {
            if let Some(h) = &r.value.handler
                && let Some(first) = handlers.insert(h.value.as_str(), pos(h))
            {
                self.sink.error(
                    pos(h),
                    format!(
                        "handler `{}` of resource `{}` is already bound",
                        h.value, r.value.name.value
                    ),
                    "",
                    &format!(
                        "the first binding is at line {}; give each tool and resource its own method",
                        first.line
                    ),
                );
            }
        }
    }

    /// A declared error: its name, its code in the server range, its message and data, none
    /// declared twice.
    fn error_declaration<'e>(
        &mut self,
        e: &'e RawError,
        names: &mut BTreeMap<&'e str, Pos>,
        codes: &mut BTreeMap<i64, Pos>,
    ) {
        let n = &e.name;
        if n.value.is_empty()
            || !n
                .value
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        {
            self.sink.error(
                pos(n),
                format!("error name `{}` is not UPPER_SNAKE_CASE", n.value),
                "",
                "e.g. `DB_NOT_ALLOWED`",
            );
        }
        if let Some(first) = names.insert(n.value.as_str(), pos(n)) {
            self.sink.error(
                pos(n),
                format!("error `{}` is declared twice", n.value),
                "",
                &format!("the first declaration is at line {}", first.line),
            );
        }
        let c = &e.code;
        if !(-32099..=-32000).contains(&c.value) {
            self.sink.error(
                pos(c),
                format!(
                    "error code {} of `{}` is outside the server range",
                    c.value, n.value
                ),
                "not in -32000..-32099",
                "JSON-RPC reserves -32000 to -32099 for implementation-defined server errors",
            );
        } else if let Some(first) = codes.insert(c.value, pos(c)) {
            self.sink.error(
                pos(c),
                format!("error code {} is used twice", c.value),
                "",
                &format!(
                    "the first use is at line {}; give each error its own code",
                    first.line
                ),
            );
        }
        self.template(&e.message, &format!("the message of `{}`", n.value));
        for d in &e.data {
            if d.value.is_empty() || d.value == "code" {
                self.sink.error(
                    pos(d),
                    format!("`data` of `{}` names the field `{}`", n.value, d.value),
                    "",
                    "`code` is always present; name other fields",
                );
            }
        }
    }

    /// One rule of a declared error: a known failure, `field` exactly for `invalid`, known
    /// tools.
    fn error_rule(&mut self, spec: &RawSpec, n: &Sp<String>, r: &Sp<RawRule>, tools: &[&str]) {
        let rule = &r.value;
        let w = &rule.when;
        if !crate::ir::RuleKind::NAMES.contains(&w.value.as_str()) {
            self.sink.error(
                pos(w),
                format!("unknown failure `{}` in a rule of `{}`", w.value, n.value),
                "",
                &match did_you_mean(&w.value, crate::ir::RuleKind::NAMES) {
                    Some(s) => format!("did you mean `{s}`?"),
                    None => format!("use one of {}", crate::ir::RuleKind::NAMES.join(", ")),
                },
            );
        }
        match (&rule.field, w.value == "invalid") {
            (None, true) => self.sink.error(
                pos(r),
                format!("the `invalid` rule of `{}` names no `field`", n.value),
                "",
                "add `field: ARGUMENT`",
            ),
            (Some(f), false) => self.sink.error(
                pos(f),
                "`field` applies only to `when: invalid`",
                "",
                "remove it",
            ),
            (Some(f), true) => {
                let declared = spec.tools.iter().any(|t| {
                    t.value
                        .input
                        .as_ref()
                        .is_some_and(|i| i.value.properties.contains_key(&f.value))
                });
                if !declared {
                    self.sink.error(
                        pos(f),
                        format!("no tool has an argument `{}`", f.value),
                        "",
                        "name an input property of some tool",
                    );
                }
            }
            (None, false) => {}
        }
        for t in &rule.tools {
            if !tools.contains(&t.value.as_str()) {
                self.sink.error(
                    pos(t),
                    format!("a rule of `{}` names unknown tool `{}`", n.value, t.value),
                    "",
                    &match did_you_mean(&t.value, tools) {
                        Some(s) => format!("did you mean `{s}`?"),
                        None => "name tools declared under `tools:`".into(),
                    },
                );
            }
        }
    }

    fn check_transforms<T>(&mut self, arg: &str, at: &Sp<T>, list: &[String]) {
        for t in list {
            let known = crate::ir::TRANSFORMS.iter().any(|k| {
                if let Some(prefix) = k.strip_suffix(':') {
                    t.strip_prefix(prefix)
                        .and_then(|r| r.strip_prefix(':'))
                        .is_some_and(|n| n.parse::<usize>().is_ok_and(|n| n > 0))
                } else {
                    t == k
                }
            });
            if !known {
                self.sink.error(
                    pos(at),
                    format!("unknown transform `{t}` for `{arg}`"),
                    "",
                    "use trim, lower, fts5, fts5_prefix or truncate:N",
                );
            }
        }
    }

    /// `x-mcp-header` (SEP-2243): a top-level string, integer or boolean property whose value
    /// a client of protocol 2026-07-28 mirrors into an `Mcp-Param-NAME` HTTP header, NAME an
    /// HTTP token unique in the tool regardless of case. Clients drop a tool whose annotation
    /// breaks these rules, so each is a build error here.
    fn header_params(&mut self, tool: &str, input: &crate::spec::RawInput) {
        let mut seen: BTreeMap<String, &str> = BTreeMap::new();
        for (pname, schema) in &input.properties {
            let at = pos(schema);
            if let Some(obj) = schema.value.as_object()
                && obj.values().any(holds_header)
            {
                self.sink.error(
                    at,
                    format!("`x-mcp-header` below property `{pname}` of `{tool}`"),
                    "not a top-level property",
                    "put `x-mcp-header` on a property directly under `input.properties`",
                );
            }
            let Some(header) = schema.value.get(HEADER_KEY) else {
                continue;
            };
            let Some(header) = header.as_str().filter(|h| !h.is_empty()) else {
                self.sink.error(
                    at,
                    format!("the `x-mcp-header` of `{pname}` in `{tool}` is not a header name"),
                    "",
                    "give a non-empty name such as `Region`; clients send it as `Mcp-Param-Region`",
                );
                continue;
            };
            if !header.chars().all(is_token_char) {
                self.sink.error(
                    at,
                    format!("the `x-mcp-header` `{header}` of `{pname}` in `{tool}` is not an HTTP token"),
                    "",
                    "use ASCII letters, digits and ! # $ % & ' * + - . ^ _ ` | ~ only (no spaces or colons)",
                );
            }
            let ty = schema.value.get("type").and_then(Value::as_str);
            if !matches!(ty, Some("string" | "integer" | "boolean")) {
                self.sink.error(
                    at,
                    format!("`x-mcp-header` on `{pname}` of `{tool}`, which is not a string, integer or boolean"),
                    "",
                    "mirror a string, integer or boolean argument; a number's text is not exact, and objects and arrays have none",
                );
            }
            if let Some(other) = seen.insert(header.to_ascii_lowercase(), pname) {
                self.sink.error(
                    at,
                    format!(
                        "`{pname}` and `{other}` of `{tool}` both use `x-mcp-header` `{header}`"
                    ),
                    "",
                    "header names are compared without case; give each property its own",
                );
            }
        }
        let elsewhere = input.defs.values().chain(
            input
                .composition()
                .into_iter()
                .filter_map(|(_, v)| v.as_ref()),
        );
        for v in elsewhere.filter(|v| holds_header(&v.value)) {
            self.sink.error(
                pos(v),
                format!("`x-mcp-header` in `$defs` or a combinator of `{tool}`"),
                "not a top-level property",
                "put `x-mcp-header` on a property directly under `input.properties`",
            );
        }
    }

    fn property(
        &mut self,
        tool: &str,
        pname: &str,
        schema: &Sp<Value>,
        defs: &BTreeMap<String, Sp<Value>>,
    ) {
        let at = pos(schema);
        let Some(obj) = schema.value.as_object() else {
            self.sink.error(
                at,
                format!("property `{pname}` of `{tool}` is not a JSON Schema object"),
                "",
                "write the property as a mapping such as `{type: string}`",
            );
            return;
        };
        let scalar = |t: &str| {
            matches!(
                t,
                "string" | "integer" | "number" | "boolean" | "array" | "object"
            )
        };
        match obj.get("type") {
            Some(Value::String(t)) if scalar(t) => {}
            // A union of types (such as `[string, null]` or `[boolean, integer, string]`)
            // decodes as a JSON value in the typed arguments.
            Some(Value::Array(ts))
                if ts.len() >= 2
                    && ts
                        .iter()
                        .all(|t| t.as_str().is_some_and(|t| t == "null" || scalar(t)))
                    && ts.iter().filter_map(Value::as_str).any(scalar) => {}
            Some(other) => self.sink.error(
                at,
                format!("property `{pname}` of `{tool}` has unsupported type {other}"),
                "",
                "use one of string, integer, number, boolean, array, object",
            ),
            // A reference to a declared `$defs` entry takes that entry's type.
            None if obj
                .get("$ref")
                .and_then(Value::as_str)
                .and_then(|r| r.strip_prefix("#/$defs/"))
                .is_some_and(|d| defs.contains_key(d)) => {}
            None => self.sink.error(
                at,
                format!("property `{pname}` of `{tool}` has no `type`"),
                "",
                "give every argument a type so clients and the typed arguments agree",
            ),
        }
        if let Some(default) = obj.get("default")
            && let Some(problem) = default_problem(&schema.value, default)
        {
            self.sink.error(
                at,
                format!("the default of `{pname}` in `{tool}` violates its own schema: {problem}"),
                "",
                "change the default or the constraint so they agree",
            );
        }
        if let Some(p) = obj.get("pattern").and_then(Value::as_str)
            && p.is_empty()
        {
            self.sink.error(
                at,
                format!("property `{pname}` has an empty pattern"),
                "",
                "remove it",
            );
        }
    }

    fn statement(
        &mut self,
        cx: &ToolScope<'_>,
        st: &Sp<RawStatement>,
        used: &mut BTreeSet<String>,
        earlier: &mut BTreeMap<String, (Mode, BTreeSet<String>)>,
    ) {
        let s = &st.value;
        let at = pos(st);
        let mode = self.statement_mode(s);
        self.statement_place(cx, s, at, mode, earlier);
        let columns = self.statement_columns(cx.tool, s, at, mode);
        self.statement_messages(s, mode);
        self.statement_envelope(cx, s, mode);
        self.statement_params(cx, s, used, earlier);
        self.statement_dialects(s);
        if let Some(n) = &s.name {
            earlier.insert(n.value.clone(), (mode, columns));
        }
    }

    /// The statement's result mode; an unknown one is reported and read as `many`.
    fn statement_mode(&mut self, s: &RawStatement) -> Mode {
        match &s.returns {
            None => Mode::Many,
            Some(r) => match Mode::parse(&r.value) {
                Some(m) => m,
                None => {
                    self.sink.error(
                        pos(r),
                        format!("unknown result mode `{}`", r.value),
                        "not a result mode",
                        &match did_you_mean(&r.value, Mode::NAMES) {
                            Some(m) => format!("did you mean `{m}`?"),
                            None => format!("use one of {}", Mode::NAMES.join(", ")),
                        },
                    );
                    Mode::Many
                }
            },
        }
    }

    /// What a statement may say given whether it is composed: `name` under `compose`, `key`
    /// and `optional` only outside it.
    fn statement_place(
        &mut self,
        cx: &ToolScope<'_>,
        s: &RawStatement,
        at: Pos,
        mode: Mode,
        earlier: &BTreeMap<String, (Mode, BTreeSet<String>)>,
    ) {
        let (tool, composite) = (cx.tool, cx.composite);
        if composite {
            match &s.name {
                None => self.sink.error(
                    at,
                    format!("a statement of `{tool}` has no `name`"),
                    "",
                    "name each composed statement; the name is its field in the result",
                ),
                Some(n) if earlier.contains_key(&n.value) => self.sink.error(
                    pos(n),
                    format!("duplicate statement name `{}` in `{tool}`", n.value),
                    "",
                    "give each composed statement its own name",
                ),
                Some(_) => {}
            }
            if let Some(k) = &s.key {
                self.sink.error(
                    pos(k),
                    "`key` applies only to a single `sql` statement",
                    "",
                    "a composed statement's field is its `name`",
                );
            }
            if mode == Mode::Execute {
                self.sink.error(
                    at,
                    "a composed statement cannot use `returns: execute`",
                    "",
                    "use `INSERT ... RETURNING` with `returns: one` instead",
                );
            }
        } else {
            if let Some(n) = &s.name {
                self.sink.error(
                    pos(n),
                    "`name` applies only to statements under `compose`",
                    "",
                    "use `key` to name the field that holds the rows",
                );
            }
            if mode == Mode::Optional {
                self.sink.error(
                    s.returns.as_ref().map_or(at, pos),
                    "`returns: optional` applies only to statements under `compose`",
                    "",
                    "use `one` with a `not_found` message",
                );
            }
        }
    }

    /// Column types, and the columns each result mode needs; returns the declared names.
    fn statement_columns(
        &mut self,
        tool: &str,
        s: &RawStatement,
        at: Pos,
        mode: Mode,
    ) -> BTreeSet<String> {
        let mut columns = BTreeSet::new();
        for (cname, col) in &s.columns {
            columns.insert(cname.clone());
            let ty = match &col.value {
                RawColumn::Short(t) => t.as_str(),
                RawColumn::Full(f) => f.ty.as_str(),
            };
            if ColumnKind::parse(ty).is_none() {
                self.sink.error(
                    pos(col),
                    format!("unknown column type `{ty}` for `{cname}`"),
                    "not a column type",
                    &match did_you_mean(ty.trim_end_matches('?'), ColumnKind::NAMES) {
                        Some(k) => format!("did you mean `{k}`?"),
                        None => format!(
                            "use one of {}, with a trailing `?` when NULL is possible",
                            ColumnKind::NAMES.join(", ")
                        ),
                    },
                );
            }
        }
        match mode {
            Mode::Execute if !s.columns.is_empty() => self.sink.error(
                at,
                "`returns: execute` produces `changes` and `last_insert_id`, not columns",
                "",
                "remove `columns`, or use `RETURNING` with `returns: one`",
            ),
            Mode::Scalar if s.columns.len() != 1 => self.sink.error(
                at,
                format!(
                    "`returns: scalar` needs exactly one column, found {}",
                    s.columns.len()
                ),
                "",
                "declare the one column the statement selects",
            ),
            Mode::Many | Mode::One | Mode::Optional if s.columns.is_empty() => self.sink.error(
                at,
                format!("a statement of `{tool}` declares no `columns`"),
                "",
                "declare each result column with its type, e.g. `id: text`",
            ),
            _ => {}
        }
        columns
    }

    /// `empty_message` and `not_found`: each for its mode, each a template that parses.
    fn statement_messages(&mut self, s: &RawStatement, mode: Mode) {
        if let Some(m) = &s.empty_message
            && mode != Mode::Many
        {
            self.sink.error(
                pos(m),
                "`empty_message` applies only to `returns: many`",
                "",
                "use `not_found` for a single row",
            );
        }
        if let Some(m) = &s.not_found
            && mode != Mode::One
        {
            self.sink.error(
                pos(m),
                "`not_found` applies only to `returns: one`",
                "",
                "use `empty_message` for `returns: many`",
            );
        }
        for t in [&s.empty_message, &s.not_found].into_iter().flatten() {
            let env = minijinja::Environment::new();
            if let Err(e) = env.template_from_str(&t.value) {
                self.sink.error(
                    pos(t),
                    format!(
                        "invalid message template: {}",
                        e.detail().unwrap_or("syntax error")
                    ),
                    "",
                    "templates use minijinja syntax, e.g. `{{ tags | join(\", \") }}`",
                );
            }
        }
    }

    /// Envelope fields: only for a single `many` statement, without clashes, from known
    /// sources; and a positive `max_rows`.
    fn statement_envelope(&mut self, cx: &ToolScope<'_>, s: &RawStatement, mode: Mode) {
        let (composite, props) = (cx.composite, cx.props);
        for (field, src) in &s.envelope {
            if composite || mode != Mode::Many {
                self.sink.error(
                    pos(src),
                    "`envelope` applies only to a single `returns: many` statement",
                    "",
                    "",
                );
            }
            if [
                s.key.as_ref().map_or("rows", |k| k.value.as_str()),
                "truncated",
                "message",
            ]
            .contains(&field.as_str())
            {
                self.sink.error(
                    pos(src),
                    format!("envelope field `{field}` clashes with a field of the result"),
                    "",
                    "rename it",
                );
            }
            match crate::ir::Envelope::parse(&src.value) {
                None => self.sink.error(
                    pos(src),
                    format!("unknown envelope source `{}`", src.value),
                    "",
                    "use count, tokens, arg:NAME or column:NAME",
                ),
                Some(crate::ir::Envelope::Arg(a)) if !props.contains_key(&a) => self.sink.error(
                    pos(src),
                    format!("envelope field `{field}` echoes `{a}`, which is not an input property"),
                    "",
                    "",
                ),
                Some(crate::ir::Envelope::Column(c)) if !s.columns.contains_key(&c) => self.sink.error(
                    pos(src),
                    format!("envelope field `{field}` reads column `{c}`, which the statement does not declare"),
                    "",
                    "declare the column under `columns`",
                ),
                _ => {}
            }
        }
        if let Some(m) = &s.max_rows
            && m.value == 0
        {
            self.sink
                .error(pos(m), "`max_rows` must be at least 1", "", "");
        }
    }

    /// Parameters: each comes from an argument, a derived parameter or an earlier row; the
    /// arguments used are added to `used`.
    /// A statement's text for another dialect (`postgres:`): only where the server runs on
    /// that engine, and with no parameter that its `query` does not have (the arguments are
    /// bound by name on every engine).
    fn statement_dialects(&mut self, s: &RawStatement) {
        for (dialect, text) in s.dialect_texts() {
            self.statement_dialect(s, dialect, text);
        }
    }

    fn statement_dialect(
        &mut self,
        s: &RawStatement,
        dialect: &'static sqlscan::Dialect,
        text: &Sp<String>,
    ) {
        let key = dialect.name;
        if !self.engines.contains(&dialect) {
            self.sink.error(
                pos(text),
                format!(
                    "the statement gives `{key}:` text but the database declares no `{key}:` side"
                ),
                "",
                &format!("add `database.{key}` with its schema, or remove this text"),
            );
            return;
        }
        let known: Vec<String> = sqltext::params(&s.query.value)
            .into_iter()
            .map(|p| p.name)
            .collect();
        let refs = sqlscan::positional(&text.value).refs;
        for (name, offset) in refs.iter().filter(|(name, _)| !known.contains(name)) {
            let names: Vec<&str> = known.iter().map(String::as_str).collect();
            self.sink.error(
                self.offset_pos(text, *offset),
                format!(
                    "{} parameter `:{name}` is not a parameter of the statement's `query`",
                    dialect.title
                ),
                "not in `query`",
                &match did_you_mean(name, &names) {
                    Some(n) => format!("did you mean `:{n}`?"),
                    None => format!(
                        "both texts bind the same arguments; `query` has: {}",
                        if names.is_empty() {
                            "none".to_string()
                        } else {
                            names.join(", ")
                        }
                    ),
                },
            );
        }
    }

    fn statement_params(
        &mut self,
        cx: &ToolScope<'_>,
        s: &RawStatement,
        used: &mut BTreeSet<String>,
        earlier: &BTreeMap<String, (Mode, BTreeSet<String>)>,
    ) {
        let (tool, props, derived, noun) = (cx.tool, cx.props, cx.derived, cx.noun);
        let mut bound = BTreeSet::new();
        for (param, source) in &s.bind {
            bound.insert(param.clone());
            let ok = source.value.split_once('.').and_then(|(stmt, col)| {
                earlier
                    .get(stmt)
                    .map(|(m, cols)| matches!(m, Mode::One | Mode::Optional) && cols.contains(col))
            });
            if ok != Some(true) {
                let names: Vec<&str> = earlier.keys().map(String::as_str).collect();
                self.sink.error(
                    pos(source),
                    format!("`bind` source `{}` is not a column of an earlier single-row statement", source.value),
                    "",
                    &format!(
                        "write `statement.column` naming an earlier `one` or `optional` statement (earlier: {})",
                        if names.is_empty() { "none".to_string() } else { names.join(", ") }
                    ),
                );
            }
        }
        let params = sqltext::params(&s.query.value);
        for p in &params {
            if bound.contains(&p.name) {
                continue;
            }
            if props.contains_key(&p.name) {
                used.insert(p.name.clone());
            } else if let Some(from) = derived.get(&p.name) {
                used.insert(from.clone());
            } else if p.name == crate::ir::ARGUMENTS_PARAM {
                // The reserved parameter binds every argument as JSON text.
                used.extend(props.keys().cloned());
            } else {
                let names: Vec<&str> = props.keys().map(String::as_str).collect();
                self.sink.error(
                    self.offset_pos(&s.query, p.offset),
                    format!("SQL parameter `:{}` of `{tool}` matches no {noun}", p.name),
                    "no such argument",
                    &match did_you_mean(&p.name, &names) {
                        Some(n) => format!("did you mean `:{n}`?"),
                        None if noun == "input property" => format!("declare `{}` under `input.properties`, or bind it from an earlier statement", p.name),
                        None => format!("the {noun}s are: {}", if names.is_empty() { "none".to_string() } else { names.join(", ") }),
                    },
                );
            }
        }
        for param in &bound {
            if !params.iter().any(|p| &p.name == param) {
                self.sink.error(
                    pos(&s.bind[param]),
                    format!("`bind` names `{param}`, which the SQL never uses"),
                    "",
                    &format!("use `:{param}` in the query or remove it from `bind`"),
                );
            }
        }
    }

    /// Resources: names and URIs unique, one of `uri`/`uri_template`, content from a statement
    /// or a template, every variable used, completion only of variables.
    fn resources(&mut self, spec: &RawSpec) {
        let sql = spec
            .resources
            .iter()
            .find(|r| r.value.sql.is_some() || !r.value.complete.is_empty());
        if let Some(r) = sql
            && spec.database.is_none()
        {
            self.sink.error(
                pos(r),
                "resources run SQL but the spec declares no `database`",
                "",
                "add a `database:` section",
            );
        }
        let mut names: BTreeMap<&str, Pos> = BTreeMap::new();
        let mut uris: BTreeMap<&str, Pos> = BTreeMap::new();
        for r in &spec.resources {
            let at = pos(r);
            let r = &r.value;
            self.unique_name("resource", &r.name, &mut names);
            self.resource_uri(r, at, &mut uris);
            let variables = self.resource_variables(r);
            if let Some(m) = &r.mime_type
                && !m.value.contains('/')
            {
                self.sink.error(
                    pos(m),
                    format!("invalid mime type `{}`", m.value),
                    "",
                    "write a MIME type such as `text/markdown`",
                );
            }
            self.resource_source(r, at);
            self.resource_uses(r, at, &variables);
        }
    }

    /// A resource's fixed `uri` or `uri_template`: exactly one, with a scheme, not declared
    /// twice.
    fn resource_uri<'r>(&mut self, r: &'r RawResource, at: Pos, uris: &mut BTreeMap<&'r str, Pos>) {
        let name = &r.name;
        let uri = match (&r.uri, &r.uri_template) {
            (Some(u), None) => {
                if u.value.contains(['{', '}']) {
                    self.sink.error(
                        pos(u),
                        format!("the fixed uri of `{}` contains `{{` or `}}`", name.value),
                        "",
                        "use `uri_template` for a URI with variables",
                    );
                }
                Some(u)
            }
            (None, Some(t)) => Some(t),
            (Some(u), Some(_)) => {
                self.sink.error(
                    pos(u),
                    format!(
                        "resource `{}` has both `uri` and `uri_template`",
                        name.value
                    ),
                    "",
                    "a resource has a fixed `uri` or a `uri_template`, not both",
                );
                None
            }
            (None, None) => {
                self.sink.error(
                    at,
                    format!("resource `{}` has no `uri`", name.value),
                    "",
                    "add `uri:` for a fixed resource or `uri_template:` for one with variables",
                );
                None
            }
        };
        if let Some(u) = uri {
            if !u.value.contains("://") && !u.value.contains(':') {
                self.sink.error(
                    pos(u),
                    format!("the uri of `{}` has no scheme", name.value),
                    "",
                    "write a URI such as `app://things/{id}`",
                );
            }
            if let Some(first) = uris.insert(&u.value, pos(u)) {
                self.sink.error(
                    pos(u),
                    format!("duplicate resource uri `{}`", u.value),
                    "declared again here",
                    &format!("the first declaration is at line {}", first.line),
                );
            }
        }
    }

    /// The variables of a resource's uri template (none for a fixed uri).
    fn resource_variables(&mut self, r: &RawResource) -> Vec<String> {
        let name = &r.name;
        match &r.uri_template {
            Some(t) if r.uri.is_none() => match crate::ir::uri_variables(&t.value) {
                Ok(v) => {
                    if v.is_empty() {
                        self.sink.error(
                            pos(t),
                            format!("the uri template of `{}` has no variables", name.value),
                            "",
                            "use `uri` for a fixed resource",
                        );
                    }
                    v
                }
                Err(why) => {
                    self.sink.error(
                        pos(t),
                        format!("invalid uri template of `{}`: {why}", name.value),
                        "",
                        "write RFC 6570 level 1 variables such as `app://things/{id}`",
                    );
                    Vec::new()
                }
            },
            _ => Vec::new(),
        }
    }

    /// Where a resource's content comes from: a handler, a blob, or SQL and a template.
    fn resource_source(&mut self, r: &RawResource, at: Pos) {
        let name = &r.name;
        if let Some(h) = &r.handler {
            self.method_name(h, &name.value);
            for (key, other) in [
                ("sql", r.sql.as_ref().map(pos)),
                ("template", r.template.as_ref().map(pos)),
                ("blob", r.blob.as_ref().map(pos)),
            ] {
                if let Some(p) = other {
                    self.sink.error(
                        p,
                        format!("resource `{}` has both `handler` and `{key}`", name.value),
                        "",
                        "a resource's content comes from one source: `sql`/`template`, a `blob` or a Rust `handler`",
                    );
                }
            }
        } else if let Some(b) = &r.blob {
            if r.sql.is_some() || r.template.is_some() {
                self.sink.error(
                    pos(b),
                    format!(
                        "resource `{}` has both `blob` and `sql` or `template`",
                        name.value
                    ),
                    "",
                    "a resource is fixed binary content (`blob`) or made text, not both",
                );
            }
            if r.uri.is_none() {
                self.sink.error(
                    pos(b),
                    format!("the blob resource `{}` has a uri template", name.value),
                    "",
                    "give a fixed `uri`: a blob is the same for every URI",
                );
            }
            self.base64(b, "the blob of a resource");
        } else if r.sql.is_none() && r.template.is_none() {
            self.sink.error(
                at,
                format!("resource `{}` has no content", name.value),
                "",
                "add `sql:` (its result is the content, as JSON), `template:`, both, a `blob`, or a Rust `handler`",
            );
        }
    }

    /// Every variable used by the resource's SQL or template; completions only of variables.
    fn resource_uses(&mut self, r: &RawResource, at: Pos, variables: &[String]) {
        let name = &r.name;
        let props: BTreeMap<String, Pos> = variables.iter().map(|v| (v.clone(), at)).collect();
        let mut used = BTreeSet::new();
        if let Some(st) = &r.sql {
            self.content_statement(&name.value, st, &props, "template variable", &mut used);
        }
        if let Some(t) = &r.template {
            used.extend(self.template_vars(t, "the template of a resource"));
        }
        // A handler gets every variable, so it uses them all.
        for v in variables.iter().filter(|_| r.handler.is_none()) {
            if !used.contains(v) {
                self.sink.error(
                    pos(r.uri_template.as_ref().unwrap_or(name)),
                    format!(
                        "variable `{v}` of `{}` is used by neither its SQL nor its template",
                        name.value
                    ),
                    "",
                    &format!("use `:{v}` in the query or `{{{{ {v} }}}}` in the template"),
                );
            }
        }
        for (var, sql) in &r.complete {
            if !variables.contains(var) {
                self.sink.error(
                    pos(sql),
                    format!("`complete` of `{}` names `{var}`, which is not a variable of its uri template", name.value),
                    "",
                    &match did_you_mean(var, &variables.iter().map(String::as_str).collect::<Vec<_>>()) {
                        Some(s) => format!("did you mean `{s}`?"),
                        None => "complete the `{variables}` of `uri_template`".into(),
                    },
                );
            }
            self.completion(sql, variables);
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

    /// Prompts: names unique, arguments unique, messages well formed, resources declared.
    fn prompts(&mut self, spec: &RawSpec) {
        let mut names: BTreeMap<&str, Pos> = BTreeMap::new();
        for p in &spec.prompts {
            let at = pos(p);
            let p = &p.value;
            let name = &p.name;
            self.unique_name("prompt", name, &mut names);
            let props = self.prompt_arguments(p);
            let arg_names: Vec<String> = props.keys().cloned().collect();
            for a in &p.arguments {
                if let Some(c) = &a.value.complete {
                    self.completion(c, &arg_names);
                }
            }
            let mut used = BTreeSet::new();
            if let Some(st) = &p.sql {
                self.content_statement(&name.value, st, &props, "prompt argument", &mut used);
            }
            if p.messages.is_empty() {
                self.sink.error(
                    at,
                    format!("prompt `{}` has no messages", name.value),
                    "",
                    "add `messages:` with at least one `{role: user, text: ...}`",
                );
            }
            let asked = self.prompt_asks(p);
            for m in &p.messages {
                self.prompt_message(spec, &name.value, &m.value, &asked);
            }
        }
    }

    /// A prompt's questions: keys usable as template names, none twice and not `confirm`
    /// (the key of tool confirmations); a message; a form schema clients can show. Returns
    /// the keys.
    fn prompt_asks(&mut self, p: &RawPrompt) -> BTreeSet<String> {
        let mut keys = BTreeSet::new();
        for a in &p.ask {
            let key = &a.value.key;
            if !is_ident(&key.value) {
                self.sink.error(
                    pos(key),
                    format!("invalid question key `{}` in prompt `{}`", key.value, p.name.value),
                    "",
                    "use letters, digits and `_`, starting with a letter, so the messages can read `answers.<key>`",
                );
            } else if key.value == "confirm" {
                self.sink.error(
                    pos(key),
                    format!(
                        "question key `confirm` in prompt `{}` is reserved",
                        p.name.value
                    ),
                    "",
                    "`confirm` is the key of a tool's confirmation; choose another name",
                );
            }
            if !keys.insert(key.value.clone()) {
                self.sink.error(
                    pos(key),
                    format!(
                        "duplicate question `{}` in prompt `{}`",
                        key.value, p.name.value
                    ),
                    "",
                    "give each question its own key",
                );
            }
            if a.value.message.value.trim().is_empty() {
                self.sink.error(
                    pos(&a.value.message),
                    format!("question `{}` has an empty message", key.value),
                    "",
                    "say what the person is asked, e.g. `message: What context should the prompt use?`",
                );
            }
            self.form_schema(&a.value.schema, &key.value);
        }
        keys
    }

    /// A question's form: what MCP elicitation allows, an object whose properties are each a
    /// string, number, integer or boolean, and whose `required` names some of them.
    fn form_schema(&mut self, schema: &Sp<serde_json::Value>, key: &str) {
        let at = pos(schema);
        let s = &schema.value;
        let help =
            "write `schema: {type: object, properties: {name: {type: string}}, required: [name]}`";
        if s["type"] != "object" || !s["properties"].is_object() {
            self.sink.error(
                at,
                format!("the form of question `{key}` is not an object schema with `properties`"),
                "",
                help,
            );
            return;
        }
        let props = s["properties"].as_object().into_iter().flatten();
        for (name, p) in props {
            let primitive = p["type"]
                .as_str()
                .is_some_and(|t| matches!(t, "string" | "number" | "integer" | "boolean"));
            if !primitive {
                self.sink.error(
                    at,
                    format!("property `{name}` of the form of question `{key}` is not a string, number, integer or boolean"),
                    "",
                    "clients show forms of primitive fields only; split nested data into fields",
                );
            }
        }
        let required = s.get("required").map(|r| r.as_array());
        for r in required.into_iter().flatten().flatten() {
            let r = r.as_str().map_or_else(|| r.to_string(), str::to_string);
            if s["properties"].get(&r).is_none() {
                self.sink.error(
                    at,
                    format!("the form of question `{key}` requires `{r}`, which is not one of its properties"),
                    "",
                    "list only names from `properties` in `required`",
                );
            }
        }
        if matches!(required, Some(None)) {
            self.sink.error(
                at,
                format!("`required` of the form of question `{key}` is not a list"),
                "",
                help,
            );
        }
    }

    /// A prompt's arguments: names usable as SQL parameters, none twice; returns them with
    /// their positions.
    fn prompt_arguments(&mut self, p: &RawPrompt) -> BTreeMap<String, Pos> {
        let name = &p.name;
        let mut props: BTreeMap<String, Pos> = BTreeMap::new();
        for a in &p.arguments {
            let n = &a.value.name;
            if matches!(n.value.as_str(), "data" | "answers") {
                self.sink.error(
                    pos(n),
                    format!("argument `{}` of prompt `{}` is reserved", n.value, name.value),
                    "",
                    "the messages read the statement's result as `data` and the person's answers as `answers`; rename the argument",
                );
            }
            if !is_ident(&n.value) {
                self.sink.error(
                        pos(n),
                        format!("invalid argument name `{}` in prompt `{}`", n.value, name.value),
                        "",
                        "use letters, digits and `_`, starting with a letter, so it can be an SQL parameter",
                    );
            }
            if props.insert(n.value.clone(), pos(n)).is_some() {
                self.sink.error(
                    pos(n),
                    format!(
                        "duplicate argument `{}` in prompt `{}`",
                        n.value, name.value
                    ),
                    "",
                    "give each argument its own name",
                );
            }
        }
        props
    }

    /// One prompt message: a known role, and exactly one of text, a declared resource, or an
    /// image with its type.
    fn prompt_message(
        &mut self,
        spec: &RawSpec,
        prompt: &str,
        m: &RawMessage,
        asked: &BTreeSet<String>,
    ) {
        if !matches!(m.role.value.as_str(), "user" | "assistant") {
            self.sink.error(
                pos(&m.role),
                format!("unknown message role `{}`", m.role.value),
                "",
                "use `user` or `assistant`",
            );
        }
        if let Some(i) = &m.image {
            if m.text.is_some() || m.resource.is_some() {
                self.sink.error(
                    pos(i),
                    "a prompt message has `image` and also `text` or `resource`",
                    "",
                    "split it into two messages",
                );
            }
            self.base64(i, "the image of a prompt message");
            if m.mime_type
                .as_ref()
                .is_none_or(|t| !t.value.starts_with("image/"))
            {
                self.sink.error(
                    pos(i),
                    "an image message has no image `mime_type`",
                    "",
                    "add `mime_type: image/png` (or the image's type)",
                );
            }
            return;
        }
        if let Some(t) = &m.mime_type {
            self.sink.error(
                pos(t),
                "`mime_type` of a prompt message applies only to `image`",
                "",
                "remove it; a text message is text and a resource has its own type",
            );
        }
        match (&m.text, &m.resource) {
            (Some(t), None) => {
                self.template_vars(t, "a prompt message");
                self.answers_read(t, prompt, asked);
            }
            (None, Some(r)) => {
                self.template_vars(r, "the resource of a prompt message");
                if !resource_declared(&spec.resources, &r.value) {
                    self.sink.error(
                                pos(r),
                                format!("the message resource `{}` of `{}` names no declared resource", r.value, prompt),
                                "",
                                "use the `uri` of a resource, or fill a `uri_template` (with `{{ argument }}` where needed)",
                            );
                }
            }
            (Some(t), Some(_)) => self.sink.error(
                pos(t),
                "a prompt message has both `text` and `resource`",
                "",
                "split it into two messages",
            ),
            (None, None) => self.sink.error(
                pos(&m.role),
                "a prompt message has neither `text` nor `resource`",
                "",
                "add `text:`, `resource:` or `image:`",
            ),
        }
    }

    /// Each `answers.<key>` a message reads names a question of its prompt.
    fn answers_read(&mut self, t: &Sp<String>, prompt: &str, asked: &BTreeSet<String>) {
        let env = minijinja::Environment::new();
        let Ok(tmpl) = env.template_from_str(&t.value) else {
            return;
        };
        for var in tmpl.undeclared_variables(true) {
            let mut path = var.split('.');
            let (Some("answers"), Some(key)) = (path.next(), path.next()) else {
                continue;
            };
            if !asked.contains(key) {
                self.sink.error(
                    pos(t),
                    format!("a message of prompt `{prompt}` reads `answers.{key}`, but the prompt asks no question `{key}`"),
                    "",
                    "add it under the prompt's `ask:`, or read one of the keys it asks",
                );
            }
        }
    }

    /// A resource's or prompt's statement: the checks of a tool statement, with `props` as the
    /// parameters it may use, and read-only.
    fn content_statement(
        &mut self,
        owner: &str,
        st: &Sp<RawStatement>,
        props: &BTreeMap<String, Pos>,
        noun: &str,
        used: &mut BTreeSet<String>,
    ) {
        let derived = BTreeMap::new();
        let cx = ToolScope {
            tool: owner,
            composite: false,
            props,
            derived: &derived,
            noun,
        };
        self.statement(&cx, st, used, &mut BTreeMap::new());
        if st
            .value
            .returns
            .as_ref()
            .is_some_and(|r| r.value == "execute")
            || sqltext::inserts(&st.value.query.value)
        {
            self.sink.error(
                pos(st),
                format!("the statement of `{owner}` changes the database"),
                "",
                "resources and prompts only read; use a tool for writes",
            );
        }
    }

    /// A completion query: `:value` and the given names are its only parameters.
    fn completion(&mut self, sql: &Sp<String>, names: &[String]) {
        for p in sqltext::params(&sql.value) {
            if p.name != "value" && !names.contains(&p.name) {
                self.sink.error(
                    self.offset_pos(sql, p.offset),
                    format!(
                        "completion SQL parameter `:{}` is neither `:value` nor a variable",
                        p.name
                    ),
                    "",
                    &format!(
                        "`:value` is the partial text; the others are: {}",
                        if names.is_empty() {
                            "none".to_string()
                        } else {
                            names.join(", ")
                        }
                    ),
                );
            }
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

    /// Start-up jobs call declared tools with mapping arguments, never a tool that asks the
    /// person to confirm (nobody is there to answer).
    fn startup(&mut self, spec: &RawSpec) {
        for job in &spec.startup {
            let (tool, arguments) = (&job.value.tool, job.value.arguments.as_ref());
            if let Some(t) = self.fixed_call(spec, "start-up job", tool, arguments)
                && t.confirm.is_some()
            {
                self.sink.error(
                    pos(tool),
                    format!(
                        "the start-up job calls `{}`, which needs the person's confirmation",
                        tool.value
                    ),
                    "nobody is there to confirm at start-up",
                    "call a tool without a `confirm` rule",
                );
            }
        }
    }

    fn demo(&mut self, spec: &RawSpec) {
        for call in &spec.demo {
            let (tool, arguments) = (&call.value.tool, call.value.arguments.as_ref());
            self.fixed_call(spec, "demo call", tool, arguments);
        }
    }

    /// Each example gives its arguments as a mapping and exactly one of `returns`, `empty:
    /// true` and `error`.
    fn examples(&mut self, spec: &RawSpec) {
        for tool in &spec.tools {
            for e in &tool.value.examples {
                let x = &e.value;
                if let Some(a) = &x.arguments
                    && !a.value.is_object()
                {
                    self.sink.error(
                        pos(a),
                        "example arguments must be a mapping",
                        "not a mapping",
                        "write them as `arguments: {name: value}`",
                    );
                }
                if let Some(empty) = &x.empty
                    && !empty.value
                {
                    self.sink.error(
                        pos(empty),
                        "`empty: false` says nothing",
                        "",
                        "write `empty: true` for a call that finds no rows, or `returns:` with what it finds",
                    );
                }
                let given = usize::from(x.returns.is_some())
                    + usize::from(x.empty.is_some())
                    + usize::from(x.error.is_some());
                if given != 1 {
                    self.sink.error(
                        pos(e),
                        format!(
                            "an example of `{}` must say what comes back: exactly one of `returns`, `empty` and `error`",
                            tool.value.name.value
                        ),
                        if given == 0 { "no expectation" } else { "more than one expectation" },
                        "e.g. `returns: {id: 1}`, `empty: true` or `error: NOT_FOUND`",
                    );
                }
            }
        }
    }

    /// A call written into the spec (`what`: a demo call, a start-up job) names a declared
    /// tool and gives its arguments as a mapping; the tool, when it is declared.
    fn fixed_call<'s>(
        &mut self,
        spec: &'s RawSpec,
        what: &str,
        tool: &Sp<String>,
        arguments: Option<&Sp<serde_json::Value>>,
    ) -> Option<&'s crate::spec::RawTool> {
        if let Some(a) = arguments
            && !a.value.is_object()
        {
            self.sink.error(
                pos(a),
                format!("{what} arguments must be a mapping"),
                "not a mapping",
                "write them as `arguments: {name: value}`",
            );
        }
        let found = spec
            .tools
            .iter()
            .find(|t| t.value.name.value == tool.value)
            .map(|t| &t.value);
        if found.is_none() {
            let names: Vec<&str> = spec
                .tools
                .iter()
                .map(|t| t.value.name.value.as_str())
                .collect();
            self.sink.error(
                pos(tool),
                format!("the {what} names unknown tool `{}`", tool.value),
                "no such tool",
                &match did_you_mean(&tool.value, &names) {
                    Some(s) => format!("did you mean `{s}`?"),
                    None => "call one of the tools declared under `tools:`".into(),
                },
            );
        }
        found
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
