//! Reference docs: one Markdown page per server, rendered from the IR with minijinja.
//!
//! The template lives in `codegen/templates/` (linked from `templates/` at the workspace root)
//! and is embedded at compile time; undefined variables are errors, so a template typo fails the tests rather than printing
//! nothing. Rendering is pure: the same IR always gives the same text, with no version or date
//! stamp beyond the server's own version.

use minijinja::{Environment, UndefinedBehavior};
use serde::Serialize;
use serde_json::{Value, json};

use crate::contract;
use crate::ir::{self, Binding, Mode};

/// The command that writes the docs, named in their header and in help lines.
pub(crate) const DOCS_COMMAND: &str = "cargo run -p codegen -- docs";

const SERVER_TEMPLATE: &str = include_str!("../templates/server.md.j2");

#[derive(Serialize)]
struct Page<'a> {
    command: &'a str,
    server: ServerCtx,
    tools: Vec<ToolCtx>,
    resources: Vec<ResourceCtx>,
    prompts: Vec<PromptCtx>,
    skills: Vec<SkillCtx>,
}

#[derive(Serialize)]
struct SkillCtx {
    name: String,
    description: String,
    /// The files' paths, as a cell.
    files: String,
}

fn skill_ctx(k: &ir::Skill) -> SkillCtx {
    let files: Vec<String> = k.files.iter().map(|f| format!("`{}`", f.path)).collect();
    SkillCtx {
        name: k.name.clone(),
        description: cell(&k.description),
        files: files.join(", "),
    }
}

#[derive(Serialize)]
struct ResourceCtx {
    name: String,
    uri: String,
    mime_type: String,
    description: String,
    /// The variables that `completion/complete` fills, as a cell.
    complete: String,
}

#[derive(Serialize)]
struct PromptCtx {
    name: String,
    description: String,
    /// `name` (required) and the others, as a cell.
    arguments: String,
}

fn resource_ctx(r: &ir::Resource) -> ResourceCtx {
    let vars: Vec<String> = r.complete.iter().map(|(v, _)| format!("`{v}`")).collect();
    ResourceCtx {
        name: r.name.to_string(),
        uri: r.uri.to_string(),
        mime_type: r.mime_type.to_string(),
        description: cell(r.description.or(r.title).unwrap_or_default()),
        complete: vars.join(", "),
    }
}

fn prompt_ctx(p: &ir::Prompt) -> PromptCtx {
    let args: Vec<String> = p
        .arguments
        .iter()
        .map(|a| {
            let mut s = format!("`{}`", a.name);
            if a.required {
                s.push_str(" (required)");
            }
            if a.complete.is_some() {
                s.push_str(" (completes)");
            }
            s
        })
        .collect();
    let mut arguments = args.join(", ");
    if !p.ask.is_empty() {
        let asks: Vec<String> = p.ask.iter().map(|a| format!("`{}`", a.key)).collect();
        let sep = if arguments.is_empty() { "" } else { "; " };
        arguments = format!("{arguments}{sep}asks {}", asks.join(", "));
    }
    PromptCtx {
        name: p.name.to_string(),
        description: cell(p.description.or(p.title).unwrap_or_default()),
        arguments,
    }
}

/// A database server a server also runs on, for its page.
#[derive(Serialize)]
struct EngineCtx {
    title: &'static str,
    /// Its URL schemes as a phrase: "a `postgres://` or `postgresql://`".
    schemes: String,
    /// The scheme the examples use.
    scheme: &'static str,
    /// The variable that may hold its URL.
    env: Option<String>,
}

#[derive(Serialize)]
struct ServerCtx {
    name: String,
    title: String,
    version: String,
    instructions: String,
    file: String,
    lock: String,
    env: Option<String>,
    has_database: bool,
    /// The database servers the server also runs on.
    engines: Vec<EngineCtx>,
    /// The migrations, as `NNNN_name`, and their directory.
    migrations: Vec<String>,
    migrations_dir: String,
    read_only: bool,
    default_paths: Vec<PathCtx>,
    desktop_json: String,
    /// No tool or resource is written in Rust: `mcpspec serve --spec` serves it as it is.
    from_yaml: bool,
    errors: Vec<DeclaredCtx>,
    proxy: Option<ProxyCtx>,
    /// The start-up jobs, as `tool arguments` lines.
    startup: Vec<StartupCtx>,
    /// The spec's own Markdown, appended to the page.
    docs: Option<String>,
}

#[derive(Serialize)]
struct StartupCtx {
    tool: String,
    arguments: String,
}

/// A proxy's downstream servers and interceptor, for the page's proxy section.
#[derive(Serialize)]
struct ProxyCtx {
    config_env: Option<String>,
    config_paths: Vec<PathCtx>,
    servers: Vec<String>,
    normalize: Vec<NameMap>,
    extract_command: String,
    extract_file_path: String,
    rules: Vec<RuleCtx>,
    has_sql: bool,
    params: String,
}

#[derive(Serialize)]
struct NameMap {
    from: String,
    to: String,
}

#[derive(Serialize)]
struct RuleCtx {
    key: String,
    action: &'static str,
    when: String,
    message: String,
}

/// A declared error, for the server's errors table.
#[derive(Serialize)]
struct DeclaredCtx {
    name: String,
    code: i64,
    message: String,
    data: String,
    from: String,
}

#[derive(Serialize)]
struct PathCtx {
    os: &'static str,
    path: String,
}

#[derive(Serialize)]
struct ToolCtx {
    name: String,
    anchor: String,
    title: String,
    description: String,
    effect: &'static str,
    annotations: Vec<NameValue>,
    /// The OAuth scopes a caller needs, the server's and the tool's, as `a`, `b`.
    scopes: String,
    /// Its MCP App's view and URI, when it has one.
    app: String,
    params: Vec<ParamCtx>,
    required_any: String,
    result_kind: String,
    output: Vec<FieldCtx>,
    example: Option<ExampleCtx>,
    errors: Vec<ErrorCtx>,
}

#[derive(Serialize)]
struct NameValue {
    name: &'static str,
    /// `true` or `false` as JSON writes them.
    value: &'static str,
}

#[derive(Serialize)]
struct ParamCtx {
    name: String,
    #[serde(rename = "type")]
    ty: String,
    required: bool,
    default: String,
    description: String,
}

#[derive(Serialize)]
struct FieldCtx {
    name: String,
    #[serde(rename = "type")]
    ty: String,
    required: bool,
    description: String,
}

#[derive(Serialize)]
struct ExampleCtx {
    arguments: String,
    note: Option<String>,
}

#[derive(Serialize)]
struct ErrorCtx {
    code: String,
    when: String,
}

/// Where a server's page is written, relative to the workspace root.
pub(crate) fn path(server: &ir::Server) -> String {
    format!("docs/{}.md", server.name)
}

/// Where a server's contract snapshot is written, relative to the workspace root: beside its
/// spec file.
pub(crate) fn lock_path(server: &ir::Server) -> String {
    match server.file.rsplit_once('/') {
        Some((dir, _)) => format!("{dir}/{}.lock.json", server.name),
        None => format!("{}.lock.json", server.name),
    }
}

/// Renders one server's reference page.
pub(crate) fn render(server: &ir::Server) -> Result<String, minijinja::Error> {
    let mut env = Environment::new();
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    env.add_template("server.md", SERVER_TEMPLATE)?;
    let page = Page {
        command: DOCS_COMMAND,
        server: server_ctx(server),
        tools: server.tools.iter().map(|t| tool_ctx(server, t)).collect(),
        resources: server.resources.iter().map(resource_ctx).collect(),
        prompts: server.prompts.iter().map(prompt_ctx).collect(),
        skills: server.skills.iter().map(skill_ctx).collect(),
    };
    let text = env
        .get_template("server.md")?
        .render(minijinja::value::Serde(&page))?;
    // Collapse the blank lines that template control flow leaves behind.
    let mut out = String::with_capacity(text.len());
    let mut blank = 0;
    for line in text.lines() {
        let line = line.trim_end();
        blank = if line.is_empty() { blank + 1 } else { 0 };
        if blank < 2 {
            out.push_str(line);
            out.push('\n');
        }
    }
    while out.ends_with("\n\n") {
        out.pop();
    }
    Ok(out)
}

fn engine_ctx(e: &mcpspec_def::EngineDef) -> EngineCtx {
    // Lowering names only dialects `sqlscan` registers.
    let dialect = sqlscan::Dialect::named(e.dialect).unwrap_or(&sqlscan::SQLITE);
    let schemes: Vec<String> = dialect
        .schemes
        .iter()
        .map(|s| format!("`{s}://`"))
        .collect();
    EngineCtx {
        title: dialect.title,
        schemes: format!("a {}", schemes.join(" or ")),
        scheme: dialect.schemes.last().copied().unwrap_or_default(),
        env: e.env.map(str::to_string),
    }
}

fn server_ctx(s: &ir::Server) -> ServerCtx {
    let none = ir::Database {
        schema_pos: crate::diag::Pos::default(),
        migrations: Vec::new(),
        migrations_at: None,
        def: mcpspec_def::DatabaseDef::default(),
    };
    let db = s.database.as_ref().unwrap_or(&none);
    let default_paths = paths([db.default_linux, db.default_macos, db.default_windows]);
    let mut entry = json!({"command": "/path/to/mcpspec", "args": ["serve", s.name]});
    if let Some(env) = db.env {
        entry["env"] = json!({ env: format!("/path/to/{}.db", s.name) });
    }
    let desktop = json!({"mcpServers": { s.name.clone(): entry }});
    ServerCtx {
        name: s.name.clone(),
        title: s.title.clone().unwrap_or_else(|| s.name.clone()),
        version: s.version.clone(),
        instructions: s
            .instructions
            .as_deref()
            .unwrap_or_default()
            .trim()
            .to_string(),
        file: s.file.clone(),
        lock: lock_path(s),
        env: db.env.map(str::to_string),
        has_database: s.database.is_some(),
        engines: db.engines.iter().map(engine_ctx).collect(),
        migrations: db
            .migrations
            .iter()
            .map(|m| format!("{:04}_{}", m.version, m.name))
            .collect(),
        migrations_dir: db
            .migrations_at
            .as_ref()
            .map_or_else(String::new, |(_, dir, _)| dir.clone()),
        read_only: db.read_only,
        default_paths,
        desktop_json: contract::to_pretty(&desktop).trim_end().to_string(),
        from_yaml: s.handler_tools().next().is_none() && s.handler_resources().next().is_none(),
        errors: s.errors.iter().map(declared_ctx).collect(),
        proxy: s.proxy.as_ref().map(proxy_ctx),
        startup: s
            .startup
            .iter()
            .map(|j| StartupCtx {
                tool: j.tool.clone(),
                arguments: j.arguments.to_string(),
            })
            .collect(),
        docs: s.docs.as_deref().map(|d| d.trim().to_string()),
    }
}

/// The default locations given per operating system (Linux, macOS, Windows), as rows.
fn paths(linux_macos_windows: [Option<&str>; 3]) -> Vec<PathCtx> {
    ["Linux", "macOS", "Windows"]
        .into_iter()
        .zip(linux_macos_windows)
        .filter_map(|(os, p)| {
            p.map(|p| PathCtx {
                os,
                path: p.to_string(),
            })
        })
        .collect()
}

fn ticked<S: std::fmt::Display>(items: &[S]) -> String {
    if items.is_empty() {
        return "none".into();
    }
    items
        .iter()
        .map(|i| format!("`{i}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn proxy_ctx(p: &ir::Proxy) -> ProxyCtx {
    let config_paths = p.config.as_ref().map_or_else(Vec::new, |c| {
        paths([c.default_linux, c.default_macos, c.default_windows])
    });
    ProxyCtx {
        config_env: p.config.as_ref().and_then(|c| c.env).map(str::to_string),
        config_paths,
        servers: p
            .servers
            .iter()
            .map(|d| {
                let mut line = format!("`{}`: `{}", d.name, d.command);
                for a in d.args {
                    line.push(' ');
                    line.push_str(a);
                }
                line.push('`');
                line
            })
            .collect(),
        normalize: p
            .normalize
            .iter()
            .map(|(from, to)| NameMap {
                from: from.to_string(),
                to: to.to_string(),
            })
            .collect(),
        extract_command: ticked(p.extract_command),
        extract_file_path: ticked(p.extract_file_path),
        rules: p
            .rules
            .iter()
            .map(|r| {
                let mut when = Vec::new();
                if !r.tools.is_empty() {
                    when.push(format!("tool {}", ticked(r.tools)));
                }
                if let Some(c) = &r.command {
                    when.push(format!("command matches `{}`", c.replace('|', "\\|")));
                }
                if let Some(f) = &r.file_path {
                    when.push(format!("path matches `{}`", f.replace('|', "\\|")));
                }
                RuleCtx {
                    key: r.key.to_string(),
                    action: match r.action {
                        mcpspec_def::InterceptAction::Guard => "guard",
                        mcpspec_def::InterceptAction::Hint => "hint",
                    },
                    when: if when.is_empty() {
                        "every call".into()
                    } else {
                        when.join(", ")
                    },
                    message: cell(r.message),
                }
            })
            .collect(),
        has_sql: p.sql.is_some(),
        params: ticked(&p.params.iter().map(|p| format!(":{p}")).collect::<Vec<_>>()),
    }
}

fn declared_ctx(e: &mcpspec_def::ErrorDef) -> DeclaredCtx {
    let mut from: Vec<String> = e
        .rules
        .iter()
        .map(|r| {
            let what = match r.when {
                mcpspec_def::RuleKindDef::Invalid(f) => format!("an invalid `{f}`"),
                mcpspec_def::RuleKindDef::Constraint => "a constraint failure".into(),
                mcpspec_def::RuleKindDef::NoRow => "no row".into(),
                mcpspec_def::RuleKindDef::NoChange => "no rows changed".into(),
            };
            if r.tools.is_empty() {
                what
            } else {
                let tools: Vec<String> = r.tools.iter().map(|t| format!("`{t}`")).collect();
                format!("{what} in {}", tools.join(", "))
            }
        })
        .collect();
    from.push("a handler returning it".into());
    let mut data = vec!["`code`".to_string()];
    data.extend(e.data.iter().map(|d| format!("`{d}`")));
    DeclaredCtx {
        name: e.name.to_string(),
        code: i64::from(e.code),
        message: cell(e.message).replace('`', "'"),
        data: data.join(", "),
        from: from.join("; "),
    }
}

/// Text safe inside one Markdown table cell.
fn cell(s: &str) -> String {
    s.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|")
}

/// A schema's type in words, e.g. `array of string` or `integer, 1 to 50`.
fn type_words(schema: &Value) -> String {
    let base = match schema.get("type") {
        Some(Value::String(t)) if t == "array" => match schema.get("items") {
            Some(items) => format!("array of {}", type_words(items)),
            None => "array".into(),
        },
        Some(Value::String(t)) => t.clone(),
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join(" or "),
        _ => "any JSON".into(),
    };
    let mut limits = Vec::new();
    let num = |k: &str| schema.get(k).map(Value::to_string);
    match (num("minimum"), num("maximum")) {
        (Some(a), Some(b)) => limits.push(format!("{a} to {b}")),
        (Some(a), None) => limits.push(format!("at least {a}")),
        (None, Some(b)) => limits.push(format!("at most {b}")),
        (None, None) => {}
    }
    for (key, one, many) in [
        ("Length", "character", "characters"),
        ("Items", "item", "items"),
    ] {
        let unit = |n: &str| if n == "1" { one } else { many };
        match (num(&format!("min{key}")), num(&format!("max{key}"))) {
            (Some(a), Some(b)) => limits.push(format!("{a} to {b} {}", unit(&b))),
            (Some(a), None) => limits.push(format!("at least {a} {}", unit(&a))),
            (None, Some(b)) => limits.push(format!("at most {b} {}", unit(&b))),
            (None, None) => {}
        }
    }
    if schema.get("uniqueItems") == Some(&Value::Bool(true)) {
        limits.push("unique".into());
    }
    if let Some(p) = schema.get("pattern").and_then(Value::as_str) {
        limits.push(format!("matching `{p}`"));
    }
    if let Some(e) = schema.get("enum").and_then(Value::as_array) {
        let vals: Vec<String> = e.iter().map(|v| format!("`{v}`")).collect();
        limits.push(format!("one of {}", vals.join(", ")));
    }
    if limits.is_empty() {
        base
    } else {
        format!("{base} ({})", limits.join(", "))
    }
}

fn params(t: &ir::Tool) -> Vec<ParamCtx> {
    let props = t.input_schema["properties"].as_object();
    let required: Vec<&str> = t.input_schema["required"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    props
        .into_iter()
        .flatten()
        .map(|(name, schema)| ParamCtx {
            name: name.clone(),
            ty: cell(&type_words(schema)),
            required: required.contains(&name.as_str()),
            default: schema
                .get("default")
                .map_or_else(String::new, |d| format!("`{d}`")),
            description: cell(
                schema
                    .get("description")
                    .and_then(Value::as_str)
                    .unwrap_or_default(),
            ),
        })
        .collect()
}

/// The result's fields, with one level of nesting shown as `rows[].id` or `project.id`.
fn output(schema: &Value) -> Vec<FieldCtx> {
    let mut out = Vec::new();
    fields(schema, "", 0, &mut out);
    out
}

fn fields(schema: &Value, prefix: &str, depth: usize, out: &mut Vec<FieldCtx>) {
    let required: Vec<&str> = schema["required"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let Some(props) = schema["properties"].as_object() else {
        return;
    };
    for (name, s) in props {
        let full = format!("{prefix}{name}");
        let nested_object = s["type"] == "object" && s["properties"].is_object();
        let nested_rows = s["type"] == "array" && s["items"]["properties"].is_object();
        let ty = if nested_object {
            "object".to_string()
        } else if nested_rows {
            "array of objects".to_string()
        } else {
            type_words(s)
        };
        out.push(FieldCtx {
            name: full.clone(),
            ty: cell(&ty),
            required: required.contains(&name.as_str()),
            description: cell(
                s.get("description")
                    .and_then(Value::as_str)
                    .unwrap_or_default(),
            ),
        });
        if depth == 0 {
            if nested_object {
                fields(s, &format!("{full}."), depth + 1, out);
            } else if nested_rows {
                fields(&s["items"], &format!("{full}[]."), depth + 1, out);
            }
        }
    }
}

fn result_kind(t: &ir::Tool) -> String {
    match &t.binding {
        Binding::Single(s) => match s.mode {
            Mode::Many => format!(
                "rows under `{}`, at most {}{}; more are cut and flagged `truncated`",
                s.key,
                s.max_rows,
                s.max_bytes
                    .map(|b| format!(" and {b} bytes of JSON"))
                    .unwrap_or_default()
            ),
            Mode::One | Mode::Optional => "one row".into(),
            Mode::Scalar => format!("one value under `{}`", s.key),
            Mode::Execute => "the number of changed rows".into(),
        },
        Binding::Composite(parts) => {
            let names: Vec<String> = parts.iter().map(|p| format!("`{}`", p.name)).collect();
            format!("an object of {}", names.join(", "))
        }
        Binding::Handler(m) if t.content => {
            format!("MCP content blocks made by the Rust handler `{m}`")
        }
        Binding::Handler(m) => format!("the output of the Rust handler `{m}`"),
        Binding::Content(blocks) => {
            let kinds: Vec<String> = blocks.iter().map(|b| format!("`{}`", b.kind)).collect();
            format!("MCP content blocks: {}", kinds.join(", "))
        }
        Binding::Backfill { embed, .. } => format!(
            "`embedded`, `batches`, `remaining` and `model`: rows given vectors by `{embed}`, a batch per transaction"
        ),
    }
}

/// The errors of a tool that acts as its caller: `IDENTITY_REQUIRED` when it reads `:auth.*`
/// or the server declares a PostgreSQL `identity`, and `FORBIDDEN` for a role outside it.
fn identity_errors(s: &ir::Server, t: &ir::Tool, out: &mut Vec<ErrorCtx>) {
    let identity = s
        .database
        .iter()
        .flat_map(|d| d.engines)
        .find_map(|e| e.identity.as_ref());
    let reads_caller = t
        .sql_args
        .iter()
        .any(|a| a == crate::ir::AUTH_SUB_PARAM || a.starts_with(crate::ir::AUTH_CLAIM_PREFIX));
    if identity.is_some() || reads_caller {
        out.push(ErrorCtx {
            code: "IDENTITY_REQUIRED".into(),
            when: "the request carries no OAuth access token (stdio, or the static token): the tool acts as its caller".into(),
        });
    }
    if let Some(identity) = identity {
        out.push(ErrorCtx {
            code: "FORBIDDEN".into(),
            when: format!(
                "on PostgreSQL, the access token names a role other than {}",
                identity
                    .roles
                    .iter()
                    .map(|r| format!("`{r}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        });
    }
}

fn errors(s: &ir::Server, t: &ir::Tool) -> Vec<ErrorCtx> {
    let mut out = vec![ErrorCtx {
        code: "INVALID_ARGUMENTS".into(),
        when: if t.required_any.is_empty() {
            "the arguments do not match the input schema; `field` names the first bad one".into()
        } else {
            format!(
                "the arguments do not match the input schema, or none of {} is given",
                t.required_any
                    .iter()
                    .map(|a| format!("`{a}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        },
    }];
    out.push(ErrorCtx {
        code: "ARGUMENTS_TOO_LARGE".into(),
        when: format!(
            "the arguments exceed {}",
            mcpspec_def::settings::MAX_ARGUMENT_BYTES.cited()
        ),
    });
    not_found_errors(t, &mut out);
    if let Some(c) = &t.confirm {
        confirm_errors(c, &mut out);
    }
    if matches!(t.binding, Binding::Handler(_)) {
        if !s.errors.is_empty() {
            out.push(ErrorCtx {
                code: "declared errors".into(),
                when: "the handler's failures, as JSON-RPC errors; see [Errors](#errors)".into(),
            });
        }
        out.push(ErrorCtx {
            code: "INTERNAL_ERROR".into(),
            when: "the handler failed unexpectedly; the message carries the request id, the server log the details".into(),
        });
        return out;
    }
    identity_errors(s, t, &mut out);
    database_errors(t, &mut out);
    out
}

/// `NOT_FOUND`, for each statement that must find its one row.
fn not_found_errors(t: &ir::Tool, out: &mut Vec<ErrorCtx>) {
    for st in t.binding.statements() {
        if st.mode == Mode::One {
            let which = if matches!(t.binding, Binding::Composite(_)) {
                format!(" for `{}`", st.name)
            } else {
                String::new()
            };
            let when = match &st.not_found {
                Some(m) => format!(
                    "no row matches{which}; the message is rendered from `{}`",
                    cell(m).replace('`', "'")
                ),
                None => format!("no row matches{which}"),
            };
            out.push(ErrorCtx {
                code: "NOT_FOUND".into(),
                when,
            });
        }
    }
}

/// The codes of a tool that asks for confirmation.
fn confirm_errors(c: &mcpspec_def::ConfirmDef, out: &mut Vec<ErrorCtx>) {
    out.push(ErrorCtx {
        code: "CONFIRMATION_REQUIRED".into(),
        when: format!("`{}` is not `true`", c.argument),
    });
    out.push(ErrorCtx {
        code: "DECLINED".into(),
        when:
            "the client supports elicitation and the person declined or cancelled; nothing changed"
                .into(),
    });
    out.push(ErrorCtx {
        code: "CONFIRMATION_TIMEOUT".into(),
        when: format!(
            "nobody answered the question within {}; nothing changed",
            mcpspec_def::settings::CONFIRM_TIMEOUT_SECS.cited()
        ),
    });
}

/// The database's codes: a writing tool's, then every SQL tool's.
fn database_errors(t: &ir::Tool, out: &mut Vec<ErrorCtx>) {
    if t.writes {
        out.push(ErrorCtx {
            code: "READ_ONLY".into(),
            when:
                "the server runs `--read-only`, the spec says `read_only`, or the file is read-only"
                    .into(),
        });
        out.push(ErrorCtx {
            code: "CONSTRAINT_VIOLATION".into(),
            when: "the database refuses the change (a unique, foreign key or check constraint)"
                .into(),
        });
    }
    for (code, when) in [
        (
            "DATABASE_BUSY",
            "another writer holds the database; try again shortly".to_string(),
        ),
        (
            "TIMEOUT",
            format!(
                "the call ran longer than {} or the tool's `timeout_ms`",
                mcpspec_def::settings::CALL_TIMEOUT_MS.cited()
            ),
        ),
        (
            "DATABASE_ERROR",
            "anything else; the message carries the request id, the server log the details"
                .to_string(),
        ),
    ] {
        out.push(ErrorCtx {
            code: code.into(),
            when,
        });
    }
}

fn json_bool(b: bool) -> &'static str {
    if b { "true" } else { "false" }
}

fn tool_ctx(server: &ir::Server, t: &ir::Tool) -> ToolCtx {
    let a = t.annotations;
    let effect = if a.destructive {
        "updates or deletes"
    } else if !a.read_only {
        "writes"
    } else {
        "reads"
    };
    let example = server
        .demo
        .iter()
        .find(|d| d.tool == t.name)
        .map(|d| ExampleCtx {
            // Quoted for a POSIX shell: a single quote closes, is escaped, and reopens.
            arguments: serde_json::to_string(&contract::canonical(&d.arguments))
                .unwrap_or_default()
                .replace('\'', "'\\''"),
            note: d.note.clone(),
        });
    ToolCtx {
        name: t.name.to_string(),
        // GitHub's anchor for a heading that is just the tool name in backticks.
        anchor: t.name.to_lowercase(),
        title: t.title.unwrap_or_default().to_string(),
        description: t
            .description
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" "),
        effect,
        app: match t.app {
            Some(mcpspec_def::AppDef::Table) => {
                format!("the built-in table view, `ui://{}/{}`", server.name, t.name)
            }
            Some(mcpspec_def::AppDef::Html { file, .. }) => {
                format!("`{file}`, as `ui://{}/{}`", server.name, t.name)
            }
            None => String::new(),
        },
        scopes: server
            .scopes
            .iter()
            .map(String::as_str)
            .chain(
                t.scopes
                    .iter()
                    .copied()
                    .filter(|x| !server.scopes.iter().any(|s| s == x)),
            )
            .map(|x| format!("`{x}`"))
            .collect::<Vec<_>>()
            .join(", "),
        annotations: vec![
            NameValue {
                name: "readOnlyHint",
                value: json_bool(a.read_only),
            },
            NameValue {
                name: "destructiveHint",
                value: json_bool(a.destructive),
            },
            NameValue {
                name: "idempotentHint",
                value: json_bool(a.idempotent),
            },
            NameValue {
                name: "openWorldHint",
                value: json_bool(a.open_world),
            },
        ],
        params: params(t),
        required_any: t
            .required_any
            .iter()
            .map(|a| format!("`{a}`"))
            .collect::<Vec<_>>()
            .join(", "),
        result_kind: result_kind(t),
        output: output(&t.output_schema),
        example,
        errors: errors(server, t),
    }
}
