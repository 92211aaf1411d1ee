//! Lower stage: a validated raw spec becomes the IR.
//!
//! This is where derived facts are computed once: Rust names, the published input and output
//! JSON Schemas, default annotations from what the SQL does, and parameter sources.

use std::collections::HashMap;

use serde_json::{Map, Value, json};

use mcpspec_def::{
    AnnotationsDef, AskDef, BindingDef, BlockDef, BlockKind, ClaimKind, ColumnDef, ContentDef,
    DownstreamDef, EmbeddingsField, EngineDef, IdentityDef, InterceptRuleDef, MessageBodyDef,
    MessageDef, MigrationDef, MigrationTextDef, ParamKind, PromptArgumentDef, ProviderDef,
    ProxyConfigDef, RuleDef, RuleKindDef,
};

use crate::ir::{
    AppDef, Arg, ArgType, Binding, Block, ColumnDoc, ColumnKind, ConfirmDef, Database, DatabaseDef,
    DemoCall, DeriveDef, Embedding, EmbeddingDef, EnvelopeDef, ErrorDef, Example, Expect,
    InterceptAction, InterceptSql, Migration, Mode, OutField, OutStruct, OutType, Prompt,
    PromptDef, Proxy, ProxyDef, Resource, ResourceDef, Server, StartupJob, Statement, StatementDef,
    TaskSupport, Tool, ToolDef,
};
use crate::names;
use crate::spec::{
    RawColumn, RawInput, RawPrompt, RawProxy, RawResource, RawSpec, RawStatement, RawTool,
};
use crate::sqltext;

/// The row cap of a `many` statement that declares none.
pub(crate) const DEFAULT_MAX_ROWS: u32 = 200;

pub(crate) fn lower(file: &str, spec: &RawSpec) -> Server {
    let server = &spec.server.value;
    // Statements carry a text for each dialect the server also runs on.
    let dialects: Vec<&'static sqlscan::Dialect> = spec
        .database
        .as_ref()
        .map(|d| d.value.by_dialect().map(|(d, _)| d).collect())
        .unwrap_or_default();
    let pg = &dialects[..];
    let claims: Vec<(String, ClaimKind)> = server
        .claims
        .iter()
        .filter_map(|(name, ty)| Some((name.clone(), ClaimKind::of(&ty.value)?)))
        .collect();
    let type_names = names::dedupe_types(
        spec.tools
            .iter()
            .map(|t| names::pascal(&t.value.name.value)),
    );
    Server {
        name_pos: crate::spec::pos(&server.name),
        name: server.name.value.clone(),
        module: names::snake(&server.name.value),
        version: server.version.value.clone(),
        title: server.title.clone(),
        instructions: server.instructions.clone(),
        file: file.to_string(),
        database: spec.database.as_ref().map(|db| database(&db.value)),
        proxy: spec.proxy.as_ref().map(|p| proxy(&p.value)),
        demo: demo(spec),
        startup: startup(spec),
        docs: server.docs.clone(),
        examples: examples(file, spec),
        tools: with_aliases(
            spec.tools
                .iter()
                .zip(type_names)
                .map(|(t, type_name)| {
                    let at = ToolAt {
                        pos: crate::spec::pos(t),
                        type_name,
                        pg,
                    };
                    tool(&t.value, at, &claims)
                })
                .collect(),
        ),
        toolsets: spec
            .toolsets
            .iter()
            .map(|(name, tools)| {
                let tools = tools.value.iter().map(|t| t.value.clone()).collect();
                (name.clone(), tools)
            })
            .collect(),
        error_codes: spec
            .error_codes
            .iter()
            .map(|(k, v)| (k.clone(), v.value.clone()))
            .collect(),
        errors: errors(spec),
        resources: spec
            .resources
            .iter()
            .zip(names::dedupe_types(
                spec.resources
                    .iter()
                    .map(|r| names::pascal(&r.value.name.value)),
            ))
            .map(|(r, ty)| resource(&r.value, crate::spec::pos(r).line, ty, pg))
            .collect(),
        prompts: spec.prompts.iter().map(|p| prompt(&p.value, pg)).collect(),
        scopes: scopes(&server.scopes),
        issuer: server.issuer.as_ref().map(|i| i.value.clone()),
        embeddings: embeddings(spec),
        // Read from their directories by `compile_in` (crate::skills), as migrations are.
        skills: Vec::new(),
        token_budget: server
            .token_budget
            .as_ref()
            .map(|b| (b.value, crate::spec::pos(b))),
    }
}

/// The embedding providers, by name (a provider validation refused is left out).
fn embeddings(spec: &RawSpec) -> Vec<Embedding> {
    use crate::intern::{slice, text};
    spec.embeddings
        .iter()
        .filter_map(|(name, e)| {
            let e = &e.value;
            let def = EmbeddingDef {
                name: text(name),
                dimensions: e.dimensions.value,
                provider: provider(
                    &e.provider.value,
                    e.model.as_ref().map(|m| m.value.as_str()),
                )?,
                key_env: text(
                    e.key_env
                        .as_ref()
                        .map_or(DEFAULT_KEY_ENV, |k| k.value.as_str()),
                ),
                batch: e.batch.as_ref().map_or(DEFAULT_BATCH, |b| b.value),
                timeout_ms: e
                    .timeout_ms
                    .as_ref()
                    .map_or(DEFAULT_TIMEOUT_MS, |t| t.value),
                retries: e.retries.as_ref().map_or(DEFAULT_RETRIES, |r| r.value),
                stored_in: slice(e.stored_in.iter().map(|s| text(&s.value)).collect()),
            };
            let stored_in_at = e.stored_in.iter().map(crate::spec::pos).collect();
            Some(Embedding { stored_in_at, def })
        })
        .collect()
}

/// An embedding provider's `provider:` text (`static:DIR`, `openai:URL`, `env:VAR`) and model.
fn provider(written: &str, model: Option<&str>) -> Option<ProviderDef> {
    use crate::intern::text;
    let (kind, rest) = written.split_once(':')?;
    match kind {
        "static" => Some(ProviderDef::Static(text(rest))),
        "openai" => Some(ProviderDef::OpenAi {
            base_url: text(rest.trim_end_matches('/')),
            model: text(model?),
        }),
        "env" => Some(ProviderDef::Env(text(rest))),
        _ => None,
    }
}

/// The variable holding an HTTP provider's key when the spec names none.
pub(crate) const DEFAULT_KEY_ENV: &str = "OPENAI_API_KEY";
/// The most texts one request carries when the spec says nothing.
pub(crate) const DEFAULT_BATCH: u32 = 64;
/// How long one request may take when the spec says nothing, in milliseconds.
pub(crate) const DEFAULT_TIMEOUT_MS: u64 = 30_000;
/// How often a failed request is tried again when the spec says nothing.
pub(crate) const DEFAULT_RETRIES: u32 = 3;

/// The demo's calls, in the spec's order.
fn demo(spec: &RawSpec) -> Vec<DemoCall> {
    spec.demo
        .iter()
        .map(|d| DemoCall {
            pos: crate::spec::pos(&d.value.tool),
            tool: d.value.tool.value.clone(),
            arguments: arguments(&d.value.arguments),
            note: d.value.note.clone(),
            error: d.value.error.clone(),
        })
        .collect()
}

/// A call's arguments as the spec gives them; none is the empty object.
fn arguments(given: &Option<crate::spec::Sp<serde_json::Value>>) -> serde_json::Value {
    given
        .as_ref()
        .map_or_else(|| json!({}), |a| a.value.clone())
}

/// The jobs run when the server starts, in the spec's order.
fn startup(spec: &RawSpec) -> Vec<StartupJob> {
    spec.startup
        .iter()
        .map(|j| StartupJob {
            pos: crate::spec::pos(&j.value.tool),
            tool: j.value.tool.value.clone(),
            arguments: arguments(&j.value.arguments),
        })
        .collect()
}

/// The declared errors, each with the rules that raise it (a rule of an unknown kind, which
/// validation reported, is left out).
fn errors(spec: &RawSpec) -> Vec<ErrorDef> {
    use crate::intern::{slice, text, texts};
    spec.errors
        .iter()
        .map(|e| {
            let e = &e.value;
            let data: Vec<String> = e.data.iter().map(|d| d.value.clone()).collect();
            ErrorDef {
                name: text(&e.name.value),
                // Validation keeps a code within i32; the fallback is JSON-RPC's server error.
                code: i32::try_from(e.code.value).unwrap_or(-32000),
                message: text(e.message.value.trim_end()),
                data: texts(&data),
                rules: slice(e.rules.iter().filter_map(|r| rule(&r.value)).collect()),
            }
        })
        .collect()
}

/// One error rule: when it applies, and to which tools.
fn rule(r: &crate::spec::RawRule) -> Option<RuleDef> {
    use crate::intern::{text, texts};
    let when = match r.when.value.as_str() {
        "invalid" => RuleKindDef::Invalid(text(&r.field.as_ref()?.value)),
        "constraint" => RuleKindDef::Constraint,
        "no_row" => RuleKindDef::NoRow,
        "no_change" => RuleKindDef::NoChange,
        _ => return None,
    };
    let tools: Vec<String> = r.tools.iter().map(|t| t.value.clone()).collect();
    Some(RuleDef {
        when,
        tools: texts(&tools),
    })
}

/// The database section: where the file is, the schemas (SQLite's with its FTS tables) and the
/// PostgreSQL side.
fn database(db: &crate::spec::RawDatabase) -> Database {
    use crate::intern::{list, opt, text, texts};
    let path = &db.default_path;
    let def = DatabaseDef {
        env: opt(db.env.as_ref().map(|e| e.value.as_str())),
        default_linux: opt(path.linux.as_deref()),
        default_macos: opt(path.macos.as_deref()),
        default_windows: opt(path.windows.as_deref()),
        read_only: db.access.as_ref().is_some_and(|a| a.value == "read_only"),
        schema: text(&db.schema.value),
        derived: text(&derived_ddl(
            db.derived.as_ref().map(|d| d.value.as_str()),
            &db.fts,
        )),
        sample: opt(db.sample.as_ref().map(|s| s.value.as_str())),
        engines: list(&db.by_dialect().collect::<Vec<_>>(), |(dialect, side)| {
            let side = &side.value;
            EngineDef {
                dialect: dialect.name,
                env: opt(side.env.as_ref().map(|e| e.value.as_str())),
                schema: text(&side.schema.value),
                sample: opt(side.sample.as_ref().map(|s| s.value.as_str())),
                identity: side.identity.as_ref().map(|i| IdentityDef {
                    role_claim: opt(i.value.role_claim.as_ref().map(|c| c.value.as_str())),
                    roles: texts(&scopes(&i.value.roles)),
                    claims_setting: text(&i.value.claims_setting.value),
                }),
            }
        }),
        // Read from disk by `migrations::read`, which `compile_in` runs after lowering.
        migrations: &[],
    };
    Database {
        schema_pos: crate::spec::pos(&db.schema),
        migrations: Vec::new(),
        migrations_at: None,
        def,
    }
}

/// The migrations' definitions: each version's text per engine, with its checksum.
pub(crate) fn migration_defs(migrations: &[Migration]) -> &'static [MigrationDef] {
    use crate::intern::{list, text};
    list(migrations, |m| MigrationDef {
        version: m.version,
        name: text(&m.name),
        texts: list(&m.texts, |t| MigrationTextDef {
            dialect: t.dialect.name,
            sql: text(&t.sql),
            checksum: text(&t.checksum),
        }),
    })
}

fn resource(
    r: &RawResource,
    line: u32,
    type_name: String,
    pg: &[&'static sqlscan::Dialect],
) -> Resource {
    use crate::intern::{opt, slice, text, texts};
    let (uri, templated) = match (&r.uri, &r.uri_template) {
        (Some(u), _) => (u.value.as_str(), false),
        (None, Some(t)) => (t.value.as_str(), true),
        (None, None) => ("", false),
    };
    let template = r.template.as_ref().map(|t| t.value.trim_end());
    let default_mime = if template.is_some() || r.handler.is_some() {
        "text/plain"
    } else {
        "application/json"
    };
    let statement = r
        .sql
        .as_ref()
        .map(|s| statement(&s.value, &r.name.value, pg));
    let def = ResourceDef {
        name: text(&r.name.value),
        uri: text(uri),
        templated,
        title: opt(r.title.as_deref()),
        description: opt(r.description.as_deref().map(str::trim_end)),
        mime_type: text(
            r.mime_type
                .as_ref()
                .map_or(default_mime, |m| m.value.as_str()),
        ),
        content: ContentDef {
            statement: statement.as_ref().map(|s| s.def.clone()),
            template: opt(template),
            blob: opt(r.blob.as_ref().map(|b| b.value.trim())),
            handler: r.handler.is_some(),
        },
        complete: slice(
            r.complete
                .iter()
                .map(|(k, v)| (text(k), text(v.value.trim_end())))
                .collect(),
        ),
        scopes: texts(&scopes(&r.scopes)),
    };
    Resource {
        statement,
        handler: r.handler.as_ref().map(|h| h.value.clone()),
        type_name,
        line,
        def,
    }
}

/// The scopes of a `scopes:` list, as written.
pub(crate) fn scopes(list: &[crate::spec::Sp<String>]) -> Vec<String> {
    list.iter().map(|s| s.value.clone()).collect()
}

fn prompt(p: &RawPrompt, pg: &[&'static sqlscan::Dialect]) -> Prompt {
    use crate::intern::{opt, slice, text, texts};
    let statement = p
        .sql
        .as_ref()
        .map(|s| statement(&s.value, &p.name.value, pg));
    let arguments = p.arguments.iter().map(|a| PromptArgumentDef {
        name: text(&a.value.name.value),
        description: opt(a.value.description.as_deref().map(str::trim_end)),
        required: a.value.required,
        complete: opt(a.value.complete.as_ref().map(|c| c.value.trim_end())),
    });
    let ask = p.ask.iter().map(|a| AskDef {
        key: text(&a.value.key.value),
        message: text(a.value.message.value.trim_end()),
        schema: text(&a.value.schema.value.to_string()),
    });
    let messages = p.messages.iter().map(|m| MessageDef {
        assistant: m.value.role.value == "assistant",
        body: match (&m.value.text, &m.value.resource, &m.value.image) {
            (Some(t), _, _) => MessageBodyDef::Text(text(t.value.trim_end())),
            (None, Some(r), _) => MessageBodyDef::Resource(text(r.value.trim())),
            (None, None, Some(i)) => MessageBodyDef::Image(
                text(i.value.trim()),
                text(m.value.mime_type.as_ref().map_or("", |m| m.value.as_str())),
            ),
            (None, None, None) => MessageBodyDef::Text(""),
        },
    });
    let def = PromptDef {
        name: text(&p.name.value),
        title: opt(p.title.as_deref()),
        description: opt(p.description.as_deref().map(str::trim_end)),
        arguments: slice(arguments.collect()),
        ask: slice(ask.collect()),
        statement: statement.as_ref().map(|s| s.def.clone()),
        messages: slice(messages.collect()),
        scopes: texts(&scopes(&p.scopes)),
    };
    Prompt { statement, def }
}

fn proxy(p: &RawProxy) -> Proxy {
    use crate::intern::{list, opt, slice, text};
    let strings = |v: &[crate::spec::Sp<String>]| slice(v.iter().map(|s| text(&s.value)).collect());
    let intercept = p.intercept.as_ref().map(|i| &i.value);
    let extract = p.extract.as_ref().map(|e| &e.value);
    let sql = intercept
        .and_then(|i| i.sql.as_ref())
        .map(|q| InterceptSql {
            pos: crate::spec::pos(q),
            sql: q.value.clone(),
            params: sqltext::params(&q.value)
                .into_iter()
                .map(|p| p.name)
                .collect(),
        });
    let rules = intercept.map_or(&[][..], |i| &i.rules[..]);
    let def = ProxyDef {
        config: p.config.as_ref().map(|c| {
            let c = &c.value;
            ProxyConfigDef {
                env: opt(c.env.as_ref().map(|e| e.value.as_str())),
                default_linux: opt(c.default_path.linux.as_deref()),
                default_macos: opt(c.default_path.macos.as_deref()),
                default_windows: opt(c.default_path.windows.as_deref()),
            }
        }),
        servers: list(&p.servers, |d| {
            let d = &d.value;
            DownstreamDef {
                name: text(&d.name.value),
                command: text(&d.command.value),
                args: crate::intern::texts(&d.args),
                env: slice(d.env.iter().map(|(k, v)| (text(k), text(v))).collect()),
            }
        }),
        normalize: slice(
            p.normalize
                .iter()
                .map(|(k, v)| (text(k), text(&v.value)))
                .collect(),
        ),
        extract_command: extract.map_or(&[][..], |e| strings(&e.command)),
        extract_file_path: extract.map_or(&[][..], |e| strings(&e.file_path)),
        rules: slice(
            rules
                .iter()
                .filter_map(|r| {
                    let r = &r.value;
                    Some(InterceptRuleDef {
                        key: text(&r.key.value),
                        tools: strings(&r.tools),
                        command: opt(r.command.as_ref().map(|c| c.value.as_str())),
                        file_path: opt(r.file_path.as_ref().map(|c| c.value.as_str())),
                        action: InterceptAction::parse(&r.action.value)?,
                        message: text(r.message.value.trim_end()),
                    })
                })
                .collect(),
        ),
        sql: opt(sql.as_ref().map(|q| q.sql.as_str())),
        params: sql
            .as_ref()
            .map_or(&[][..], |q| crate::intern::texts(&q.params)),
    };
    Proxy { sql, def }
}

fn tool(t: &RawTool, at: ToolAt, claims: &[(String, ClaimKind)]) -> Tool {
    let mut binding = binding(t, at.pg);
    let handler = matches!(binding, Binding::Handler(_));
    // A handler with `output: content` returns content blocks, like a `content:` binding.
    let content_output = handler && t.output.as_ref().is_some_and(|o| o.value.is_string());
    let content = content_output || matches!(binding, Binding::Content(_));
    let writes = binding.statements().iter().any(|s| sqltext::writes(s.sql));
    let empty = empty_input();
    let input = t.input.as_ref().map_or(&empty, |i| &i.value);
    let (mut args, defaults) = args(input);
    let mut schema = input_schema(input);
    if let Binding::Single(st) = &mut binding
        && let Some(page) = &mut st.def.page
    {
        page.size = page.size.or_else(|| {
            args.iter()
                .any(|a| a.wire == DEFAULT_PAGE_SIZE && a.ty == ArgType::Integer)
                .then_some(DEFAULT_PAGE_SIZE)
        });
        cursor_argument(&mut schema, &mut args);
    }
    let sql_args = sql_args(t, &binding);
    let output_schema = match &t.output {
        _ if content => Value::Null,
        Some(o) if handler => capped_output(o.value.clone(), t.max_bytes.is_some()),
        _ => output_schema(&binding, &schema),
    };
    let lowered = Lowered {
        input,
        schema: &schema,
        output_schema: &output_schema,
        binding: &binding,
        args: &args,
        defaults: &defaults,
        sql_args: &sql_args,
        writes,
        content,
    };
    let def = tool_def(t, &lowered, claims);
    Tool {
        pos: at.pos,
        outputs: match &t.output {
            Some(o) if handler && !content => outputs(t, &at.type_name, &o.value),
            _ => Vec::new(),
        },
        type_name: at.type_name,
        input_schema: schema,
        output_schema,
        args,
        binding,
        sql_args,
        defaults,
        def,
    }
}

/// What lowering derives for a tool beyond its spec, which its definition is made from.
struct Lowered<'a> {
    input: &'a RawInput,
    schema: &'a Value,
    output_schema: &'a Value,
    binding: &'a Binding,
    args: &'a [Arg],
    defaults: &'a [(String, Value)],
    sql_args: &'a [String],
    writes: bool,
    content: bool,
}

/// A tool's definition: its spec's settings as written, and what lowering derived.
fn tool_def(t: &RawTool, l: &Lowered<'_>, claims: &[(String, ClaimKind)]) -> ToolDef {
    use crate::intern::{list, opt, pairs, slice, text, texts};
    ToolDef {
        name: text(&t.name.value),
        title: opt(t.title.as_deref()),
        description: text(t.description.value.trim_end()),
        input_schema: text(&l.schema.to_string()),
        output_schema: text(&l.output_schema.to_string()),
        annotations: annotations(t, l.binding, l.writes),
        writes: l.writes,
        defaults: list(l.defaults, |(k, v)| (text(k), text(&v.to_string()))),
        required_any: slice(
            l.input
                .required_any
                .iter()
                .map(|r| text(&r.value))
                .collect(),
        ),
        transforms: slice(
            t.transform
                .iter()
                .map(|(k, v)| (text(k), texts(&v.value)))
                .collect(),
        ),
        timeout_ms: t.timeout_ms.as_ref().map(|t| t.value),
        scopes: texts(&scopes(&t.scopes)),
        derive: slice(t.derive.iter().map(|(k, d)| derive(k, &d.value)).collect()),
        env_defaults: pairs(
            &t.env_defaults
                .iter()
                .map(|(k, v)| (k.clone(), v.value.clone()))
                .collect::<Vec<_>>(),
        ),
        binding: binding_def(l.binding),
        content: l.content,
        bind: mcpspec_def::Bind(params(l.sql_args, l.args, claims)),
        confirm: t.confirm.as_ref().map(|c| ConfirmDef {
            argument: text(&c.value.argument.value),
            message: text(c.value.message.value.trim_end()),
        }),
        task: t.task.as_ref().map(|t| match t.value.as_str() {
            "required" => TaskSupport::Required,
            _ => TaskSupport::Optional,
        }),
        // Validation allowed only the built-in table view and HTML files, which `compile_in`
        // reads (crate::apps) and puts in `html`.
        app: t.app.as_ref().map(|a| match &a.value {
            crate::spec::RawApp::Builtin(_) => AppDef::Table,
            crate::spec::RawApp::Html(h) => AppDef::Html {
                file: text(&h.html),
                html: "",
            },
        }),
        max_bytes: t.max_bytes.as_ref().map(|m| m.value),
        icons: list(&t.icons, |i| {
            let i = &i.value;
            mcpspec_def::IconDef {
                src: text(&i.src.value),
                mime_type: opt(i.mime_type.as_ref().map(|m| m.value.as_str())),
                sizes: slice(i.sizes.iter().map(|z| text(&z.value)).collect()),
                theme: opt(i.theme.as_ref().map(|t| t.value.as_str())),
            }
        }),
    }
}

/// Where a tool stands: its position, its argument struct's name and the dialects its
/// statements are written for.
struct ToolAt<'a> {
    pos: crate::diag::Pos,
    type_name: String,
    pg: &'a [&'static sqlscan::Dialect],
}

/// A derived parameter's definition.
fn derive(name: &str, d: &crate::spec::RawDerive) -> DeriveDef {
    use crate::intern::{list, opt, text, texts};
    DeriveDef {
        name: text(name),
        from: text(&d.from),
        transforms: texts(&d.transform),
        embed: opt(d.embed.as_deref()),
        needed_when: list(
            &d.needed_when.iter().collect::<Vec<_>>(),
            |(arg, values)| (text(arg), texts(values)),
        ),
    }
}

/// The binding's definition: its statements' definitions, or the handler, content or backfill.
fn binding_def(b: &Binding) -> BindingDef {
    use crate::intern::{list, opt, text};
    let defs = |statements: &[Statement]| list(statements, |s| s.def.clone());
    match b {
        Binding::Single(s) => BindingDef::Single(s.def.clone()),
        Binding::Composite(parts) => BindingDef::Composite(defs(parts)),
        Binding::Handler(_) => BindingDef::Handler,
        Binding::Backfill {
            embed,
            size,
            statements,
        } => BindingDef::Backfill(mcpspec_def::BackfillDef {
            embed: text(embed),
            size: opt(size.as_deref()),
            statements: defs(statements),
        }),
        Binding::Content(blocks) => BindingDef::Content(list(blocks, |b| BlockDef {
            kind: match b.kind.as_str() {
                "image" => BlockKind::Image,
                "audio" => BlockKind::Audio,
                "resource" => BlockKind::Resource,
                _ => BlockKind::Text,
            },
            text: opt(b.text.as_deref()),
            data: opt(b.data.as_deref()),
            mime_type: opt(b.mime_type.as_deref()),
            uri: opt(b.uri.as_deref()),
        })),
    }
}

/// What the runtime binds each SQL parameter of a tool from, by the parameter's name.
fn params(
    sql_args: &[String],
    args: &[Arg],
    claims: &[(String, ClaimKind)],
) -> &'static [(&'static str, ParamKind)] {
    crate::intern::list(sql_args, |wire| {
        let kind = match args.iter().find(|a| &a.wire == wire).map(|a| &a.ty) {
            Some(ArgType::String) => ParamKind::Text,
            Some(ArgType::Integer) => ParamKind::Integer,
            Some(ArgType::Number) => ParamKind::Real,
            Some(ArgType::Boolean) => ParamKind::Boolean,
            Some(ArgType::Array(_)) => ParamKind::Array,
            Some(ArgType::Json) => ParamKind::Json,
            None if wire == crate::ir::AUTH_SUB_PARAM => ParamKind::AuthSub,
            None if wire.starts_with(crate::ir::AUTH_CLAIM_PREFIX) => {
                let name = &wire[crate::ir::AUTH_CLAIM_PREFIX.len()..];
                let kind = claims.iter().find(|(n, _)| n == name).map(|(_, k)| *k);
                // Validation refuses an undeclared claim before this runs.
                ParamKind::AuthClaim(kind.unwrap_or(ClaimKind::Text))
            }
            None if wire.starts_with(crate::ir::EMBEDDINGS_PREFIX) => {
                let field = wire.rsplit_once('.').map_or("", |(_, f)| f);
                // Validation refuses a field that is not one before this runs.
                ParamKind::Embeddings(EmbeddingsField::of(field).unwrap_or(EmbeddingsField::Model))
            }
            None if crate::ir::is_page_param(wire) => ParamKind::Page,
            None => ParamKind::Arguments,
        };
        (crate::intern::text(wire), kind)
    })
}

/// What a tool is bound to: one statement, several, a handler or fixed content.
fn binding(t: &RawTool, pg: &[&'static sqlscan::Dialect]) -> Binding {
    if let Some(b) = &t.backfill {
        let b = &b.value;
        let named = |name: &str, s: &RawStatement| {
            let mut st = statement(s, &t.name.value, pg);
            st.def.name = crate::intern::text(name);
            st
        };
        let mut statements = vec![
            named("pending", &b.pending.value),
            named("store", &b.store.value),
        ];
        if let Some(r) = &b.remaining {
            statements.push(named("remaining", &r.value));
        }
        return Binding::Backfill {
            embed: b.embed.value.clone(),
            size: b.size.as_ref().map(|s| s.value.clone()),
            statements,
        };
    }
    match (&t.sql, &t.compose) {
        (Some(s), _) => Binding::Single(Box::new(statement(&s.value, &t.name.value, pg))),
        (None, Some(c)) => Binding::Composite(
            c.value
                .iter()
                .map(|s| statement(&s.value, &t.name.value, pg))
                .collect(),
        ),
        (None, None) => match (&t.handler, &t.content) {
            (Some(h), _) => Binding::Handler(h.value.clone()),
            (None, Some(blocks)) => Binding::Content(
                blocks
                    .value
                    .iter()
                    .map(|b| Block {
                        kind: b.value.ty.value.clone(),
                        text: b
                            .value
                            .text
                            .as_ref()
                            .map(|t| t.value.trim_end().to_string()),
                        data: b.value.data.as_ref().map(|d| d.value.trim().to_string()),
                        mime_type: b.value.mime_type.as_ref().map(|m| m.value.clone()),
                        uri: b.value.uri.as_ref().map(|u| u.value.trim().to_string()),
                    })
                    .collect(),
            ),
            (None, None) => unreachable!("validate rejects a tool without a binding"),
        },
    }
}

/// The published annotations: the spec's, else what the SQL shows (a handler is assumed to
/// change things; a confirmation rule makes a tool destructive).
fn annotations(t: &RawTool, binding: &Binding, writes: bool) -> AnnotationsDef {
    let handler = matches!(binding, Binding::Handler(_));
    let destroys = binding
        .statements()
        .iter()
        .any(|s| sqltext::destroys(s.sql));
    let raw = t.annotations.as_ref().map(|a| &a.value);
    // A handler's effects are not visible to codegen: it is assumed to change things unless
    // its annotations say otherwise, and a confirmation rule makes it destructive.
    let changes = writes || handler;
    let destroys = destroys || t.confirm.is_some();
    AnnotationsDef {
        read_only: raw.and_then(|a| a.read_only_hint).unwrap_or(!changes),
        destructive: raw.and_then(|a| a.destructive_hint).unwrap_or(destroys),
        idempotent: raw.and_then(|a| a.idempotent_hint).unwrap_or(!changes),
        open_world: raw.and_then(|a| a.open_world_hint).unwrap_or(false),
    }
}

/// The input of a tool that declares none: an object without properties.
fn empty_input() -> RawInput {
    RawInput {
        ty: None,
        description: None,
        properties: Default::default(),
        required: Vec::new(),
        required_any: Vec::new(),
        additional_properties: None,
        dialect: None,
        defs: Default::default(),
        any_of: None,
        one_of: None,
        all_of: None,
        not: None,
        if_: None,
        then: None,
        else_: None,
    }
}

/// The typed arguments of an input schema (Rust field beside wire name), and the defaults.
fn args(input: &RawInput) -> (Vec<Arg>, Vec<(String, Value)>) {
    let required: Vec<&str> = input.required.iter().map(|r| r.value.as_str()).collect();
    let fields = names::dedupe(input.properties.keys().map(|k| names::snake(k)));
    let mut args = Vec::new();
    let mut defaults = Vec::new();
    for ((wire, schema), field) in input.properties.iter().zip(fields) {
        let default = schema.value.get("default").cloned();
        if let Some(d) = &default {
            defaults.push((wire.clone(), d.clone()));
        }
        args.push(Arg {
            wire: wire.clone(),
            field,
            ty: ArgType::of_schema(&schema.value),
            present: required.contains(&wire.as_str()) || default.is_some(),
            description: schema
                .value
                .get("description")
                .and_then(Value::as_str)
                .map(str::to_string),
        });
    }
    (args, defaults)
}

/// The SQL parameters the typed binding fills: every statement parameter that is neither
/// derived nor bound from an earlier row, once each.
fn sql_args(t: &RawTool, binding: &Binding) -> Vec<String> {
    let mut sql_args: Vec<String> = Vec::new();
    for s in binding.statements() {
        for &p in s.params {
            // Derived parameters are computed by the runtime, not by the typed binding; so are
            // a backfill's own.
            if t.derive.contains_key(p)
                || (t.backfill.is_some() && crate::ir::BACKFILL_PARAMS.contains(&p))
            {
                continue;
            }
            if !s.bind.iter().any(|(b, _, _)| *b == p) && !sql_args.iter().any(|a| a == p) {
                sql_args.push(p.to_string());
            }
        }
    }
    sql_args
}

/// The typed output structs of a handler tool with an object output schema.
fn outputs(t: &RawTool, type_name: &str, schema: &Value) -> Vec<OutStruct> {
    let mut out = Vec::new();
    out_struct(
        type_name,
        &format!("The result of the `{}` tool.", t.name.value),
        schema,
        &mut out,
    );
    out
}

/// Builds the typed output struct `name` for an object schema, and every struct its properties
/// need, appending them to `out` (the struct itself first).
fn out_struct(name: &str, doc: &str, schema: &Value, out: &mut Vec<OutStruct>) {
    let index = out.len();
    out.push(OutStruct {
        name: name.to_string(),
        doc: doc.to_string(),
        fields: Vec::new(),
        alias_of: None,
    });
    let empty = Map::new();
    let props = schema
        .get("properties")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let fields = names::dedupe(props.keys().map(|k| names::snake(k)));
    let mut built = Vec::new();
    for ((wire, prop), field) in props.iter().zip(fields) {
        let nested = format!("{name}{}", names::pascal(wire));
        let ty = out_type(&nested, wire, prop, out);
        built.push(OutField {
            wire: wire.clone(),
            field,
            ty,
            required: required.contains(&wire.as_str()),
            description: prop
                .get("description")
                .and_then(Value::as_str)
                .map(str::to_string),
        });
    }
    out[index].fields = built;
}

/// The Rust type of one output property; objects with properties become nested structs.
fn out_type(nested: &str, wire: &str, prop: &Value, out: &mut Vec<OutStruct>) -> OutType {
    let has_props = |v: &Value| v.get("properties").is_some_and(Value::is_object);
    match prop.get("type").and_then(Value::as_str) {
        Some("object") if has_props(prop) => {
            out_struct(nested, &format!("The `{wire}` field."), prop, out);
            OutType::Struct(nested.to_string())
        }
        Some("array") => match prop.get("items") {
            Some(items) => {
                let item = format!("{nested}Item");
                match out_type(&item, wire, items, out) {
                    OutType::Json => OutType::Json,
                    inner => OutType::Array(Box::new(inner)),
                }
            }
            None => OutType::Json,
        },
        Some("string") => OutType::String,
        Some("integer") => OutType::Integer,
        Some("number") => OutType::Number,
        Some("boolean") => OutType::Boolean,
        _ => OutType::Json,
    }
}

fn statement(s: &RawStatement, tool: &str, pg: &[&'static sqlscan::Dialect]) -> Statement {
    use crate::intern::{list, opt, slice, text, texts};
    let mode = s
        .returns
        .as_ref()
        .and_then(|r| Mode::parse(&r.value))
        .unwrap_or(Mode::Many);
    let (columns, column_docs): (Vec<_>, Vec<_>) = s.columns.iter().map(column).unzip();
    let default_key = match mode {
        Mode::Scalar => "value",
        _ => "rows",
    };
    let dialect_texts: Vec<_> = pg
        .iter()
        .map(|&dialect| (dialect, s.for_dialect(dialect).unwrap_or(&s.query)))
        .collect();
    let params = sqltext::params(&s.query.value);
    let def = StatementDef {
        name: text(s.name.as_ref().map_or(tool, |n| n.value.as_str())),
        key: text(s.key.as_ref().map_or(default_key, |k| k.value.as_str())),
        sql: text(&sqlscan::sqlite_text(s.query.value.trim_end())),
        texts: list(&dialect_texts, |(dialect, t)| {
            let placed = dialect.place(t.value.trim_end());
            mcpspec_def::DialectSqlDef {
                dialect: dialect.name,
                sql: text(&placed.text),
                params: texts(&placed.names),
            }
        }),
        mode,
        inserts: sqltext::inserts(&s.query.value),
        columns: slice(columns),
        max_rows: s.max_rows.as_ref().map_or(DEFAULT_MAX_ROWS, |m| m.value),
        max_bytes: s.max_bytes.as_ref().map(|m| m.value),
        empty_message: opt(s.empty_message.as_ref().map(|m| m.value.trim_end())),
        not_found: opt(s.not_found.as_ref().map(|m| m.value.trim_end())),
        params: slice(params.iter().map(|p| text(&p.name)).collect()),
        bind: slice(
            s.bind
                .iter()
                .filter_map(|(param, src)| {
                    let (st, col) = src.value.split_once('.')?;
                    Some((text(param), text(st), text(col)))
                })
                .collect(),
        ),
        envelope: slice(
            s.envelope
                .iter()
                .filter_map(|(k, v)| Some((text(k), crate::ir::envelope(&v.value)?)))
                .collect(),
        ),
        page: s.page.as_ref().map(|p| mcpspec_def::PageDef {
            by: slice(p.value.by.iter().map(|c| text(&c.value)).collect()),
            size: opt(p.value.size.as_ref().map(|z| z.value.as_str())),
            peek: params.iter().any(|p| p.name == crate::ir::PAGE_LIMIT_PARAM),
        }),
    };
    Statement {
        pos: crate::spec::pos(&s.query),
        text_pos: dialect_texts
            .iter()
            .map(|(_, t)| crate::spec::pos(t))
            .collect(),
        column_docs,
        def,
    }
}

/// A result column as the runtime reads it, and what its schema says beyond its kind.
fn column((name, c): (&String, &crate::spec::Sp<RawColumn>)) -> (ColumnDef, ColumnDoc) {
    let (ty, nullable_flag, doc) = match &c.value {
        RawColumn::Short(t) => (t.as_str(), false, ColumnDoc::default()),
        RawColumn::Full(f) => (
            f.ty.as_str(),
            f.nullable,
            ColumnDoc {
                description: f.description.clone(),
                schema: f.schema.clone(),
            },
        ),
    };
    let (kind, nullable) = ColumnKind::parse(ty).unwrap_or((ColumnKind::Json, true));
    let def = ColumnDef {
        name: crate::intern::text(name),
        kind,
        nullable: nullable || nullable_flag,
    };
    (def, doc)
}

/// The DDL the server applies at start-up: the spec's `derived` statements, then each
/// full-text index with its triggers and, when the index is new on a table that has rows, the
/// `rebuild` that fills it. Every statement is idempotent, so applying it again changes nothing.
/// The `rebuild`'s guard asks for one row with scalar subqueries, not `EXISTS`: SQLite 3.54
/// plans `EXISTS (SELECT 1 FROM source)` in that `WHERE` so that it costs milliseconds on a large
/// table (2.2 ms of a 5 ms start on 100,000 learnings), at every start.
fn derived_ddl(derived: Option<&str>, fts: &[crate::spec::Sp<crate::spec::RawFts>]) -> String {
    let mut out = derived.map(str::trim_end).unwrap_or_default().to_string();
    for f in fts {
        let f = &f.value;
        let (t, src) = (&f.table, &f.source);
        let cols = f.columns.join(", ");
        let new_cols: Vec<String> = f.columns.iter().map(|c| format!("new.{c}")).collect();
        let old_cols: Vec<String> = f.columns.iter().map(|c| format!("old.{c}")).collect();
        let (new_cols, old_cols) = (new_cols.join(", "), old_cols.join(", "));
        let tokenize = f
            .tokenize
            .as_ref()
            .map(|k| format!(", tokenize = '{}'", k.replace('\'', "''")))
            .unwrap_or_default();
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(&format!(
            "-- Full-text index `{t}` over `{src}`, generated from `database.fts`.\n\
             CREATE VIRTUAL TABLE IF NOT EXISTS {t} USING fts5({cols}, content = '{src}', content_rowid = 'rowid'{tokenize});\n\
             INSERT INTO {t} ({t}) SELECT 'rebuild'\n  \
             WHERE (SELECT 1 FROM {t}_docsize LIMIT 1) IS NULL AND (SELECT 1 FROM {src} LIMIT 1) IS NOT NULL;\n\
             CREATE TRIGGER IF NOT EXISTS {t}_ai AFTER INSERT ON {src} BEGIN\n  \
             INSERT INTO {t} (rowid, {cols}) VALUES (new.rowid, {new_cols});\nEND;\n\
             CREATE TRIGGER IF NOT EXISTS {t}_ad AFTER DELETE ON {src} BEGIN\n  \
             INSERT INTO {t} ({t}, rowid, {cols}) VALUES ('delete', old.rowid, {old_cols});\nEND;\n\
             CREATE TRIGGER IF NOT EXISTS {t}_au AFTER UPDATE ON {src} BEGIN\n  \
             INSERT INTO {t} ({t}, rowid, {cols}) VALUES ('delete', old.rowid, {old_cols});\n  \
             INSERT INTO {t} (rowid, {cols}) VALUES (new.rowid, {new_cols});\nEND;"
        ));
    }
    if !out.is_empty() {
        out.push('\n');
    }
    out
}

/// A handler's output schema; with `max_bytes`, with the fields a cut result adds.
fn capped_output(mut schema: Value, capped: bool) -> Value {
    if let Some(props) = schema.get_mut("properties").and_then(Value::as_object_mut)
        && capped
    {
        for (field, ty, description) in [
            (
                "truncated",
                "boolean",
                "Present and true when the result was cut to fit its cap.",
            ),
            (
                "message",
                "string",
                "What was cut, and how to see the rest.",
            ),
        ] {
            props
                .entry(field)
                .or_insert_with(|| json!({"type": ty, "description": description}));
        }
    }
    schema
}

/// The argument a paged statement takes its page size from when `page.size` does not say.
const DEFAULT_PAGE_SIZE: &str = "limit";

/// Adds the `cursor` argument of a paged tool to its input schema and its arguments.
fn cursor_argument(schema: &mut Value, args: &mut Vec<Arg>) {
    let name = mcpspec_def::CURSOR_ARGUMENT;
    let description = "Where to go on from: the `next_cursor` of the previous page, as given. Omit it for the first page.";
    schema["properties"][name] = json!({
        "type": "string",
        "minLength": 1,
        "maxLength": MAX_CURSOR_CHARS,
        "description": description,
    });
    args.push(Arg {
        wire: name.to_string(),
        field: names::snake(name),
        ty: ArgType::String,
        present: false,
        description: Some(description.to_string()),
    });
}

/// The longest cursor a paged tool takes: room for the sort values of a row of a few long
/// keys, sealed; a longer one is refused by the schema before it is read.
const MAX_CURSOR_CHARS: u32 = 4096;

fn input_schema(input: &RawInput) -> Value {
    let mut o = Map::new();
    o.insert("type".into(), json!("object"));
    // `requiredAny` cannot be said portably in JSON Schema, so the schema says it in words and
    // the server enforces it.
    let any: Vec<String> = input
        .required_any
        .iter()
        .map(|r| format!("`{}`", r.value))
        .collect();
    let any_note = (!any.is_empty()).then(|| format!("Pass at least one of {}.", any.join(", ")));
    match (&input.description, any_note) {
        (Some(d), Some(n)) => {
            o.insert("description".into(), json!(format!("{} {n}", d.trim_end())));
        }
        (Some(d), None) => {
            o.insert("description".into(), json!(d));
        }
        (None, Some(n)) => {
            o.insert("description".into(), json!(n));
        }
        (None, None) => {}
    }
    if let Some(d) = &input.dialect {
        o.insert("$schema".into(), json!(d.value));
    }
    if !input.defs.is_empty() {
        let defs: Map<String, Value> = input
            .defs
            .iter()
            .map(|(k, v)| (k.clone(), v.value.clone()))
            .collect();
        o.insert("$defs".into(), Value::Object(defs));
    }
    let props: Map<String, Value> = input
        .properties
        .iter()
        .map(|(k, v)| (k.clone(), v.value.clone()))
        .collect();
    o.insert("properties".into(), Value::Object(props));
    if !input.required.is_empty() {
        let req: Vec<&str> = input.required.iter().map(|r| r.value.as_str()).collect();
        o.insert("required".into(), json!(req));
    }
    // Unknown arguments are rejected unless the spec opts in, so a misspelt argument is an error
    // the model can correct rather than a filter silently ignored.
    o.insert(
        "additionalProperties".into(),
        json!(input.additional_properties.unwrap_or(false)),
    );
    // Kept whole (JSON Schema 2020-12, SEP-2106); the runtime leaves them out of what it
    // lists to clients of protocol 2025-11-25.
    for (key, value) in input.composition() {
        if let Some(v) = value {
            o.insert(key.into(), v.value.clone());
        }
    }
    Value::Object(o)
}

fn column_schema(c: &ColumnDef, doc: &ColumnDoc) -> Value {
    let mut s = match (c.kind, &doc.schema) {
        (_, Some(s)) => s.clone(),
        (ColumnKind::Text, None) => json!({"type": "string"}),
        (ColumnKind::Integer, None) => json!({"type": "integer"}),
        (ColumnKind::Real, None) => json!({"type": "number"}),
        (ColumnKind::Boolean, None) => json!({"type": "boolean"}),
        (ColumnKind::Json, None) => json!({}),
    };
    if let (Some(d), Some(o)) = (&doc.description, s.as_object_mut()) {
        o.insert("description".into(), json!(d));
    }
    s
}

/// A statement's result columns, each with its doc, but those the envelope moves out of the
/// rows.
fn row_columns(s: &Statement) -> impl Iterator<Item = (&ColumnDef, &ColumnDoc)> {
    let moved: Vec<&str> = s
        .envelope
        .iter()
        .filter_map(|(_, e)| match e {
            EnvelopeDef::Column(c) => Some(*c),
            _ => None,
        })
        .collect();
    s.def
        .columns
        .iter()
        .zip(&s.column_docs)
        .filter(move |(c, _)| !moved.contains(&c.name))
}

/// The schema of one row: NULL columns are omitted, so only non-null ones are required.
fn row_schema<'a>(columns: impl Iterator<Item = (&'a ColumnDef, &'a ColumnDoc)>) -> Value {
    let mut props = Map::new();
    let mut required = Vec::new();
    for (c, doc) in columns {
        props.insert(c.name.to_string(), column_schema(c, doc));
        if !c.nullable {
            required.push(c.name);
        }
    }
    json!({"type": "object", "properties": props, "required": required})
}

/// Every result column of a statement with its doc.
fn all_columns(s: &Statement) -> impl Iterator<Item = (&ColumnDef, &ColumnDoc)> {
    s.def.columns.iter().zip(&s.column_docs)
}

fn part_schema(s: &Statement) -> Value {
    match s.mode {
        Mode::Many => json!({"type": "array", "items": row_schema(all_columns(s))}),
        Mode::One | Mode::Optional => row_schema(all_columns(s)),
        Mode::Scalar => column_schema(&s.columns[0], &s.column_docs[0]),
        Mode::Execute => execute_schema(),
    }
}

fn execute_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "changes": {"type": "integer", "description": "Rows inserted, updated or deleted."},
            "last_insert_id": {"type": "integer", "description": "The rowid of the last inserted row, for statements that insert."}
        },
        "required": ["changes"]
    })
}

fn many_schema(s: &Statement, input: &Value) -> Value {
    let mut props = Map::new();
    props.insert(
        s.key.to_string(),
        json!({"type": "array", "items": row_schema(row_columns(s))}),
    );
    props.insert("truncated".into(), json!({"type": "boolean", "description": "Present and true when more rows matched than the result may hold."}));
    props.insert(
        "message".into(),
        json!({"type": "string", "description": "Why the result is empty or cut short, and what to try next."}),
    );
    if s.page.is_some() {
        props.insert(
            mcpspec_def::NEXT_CURSOR_FIELD.into(),
            json!({"type": "string", "description": "Present while rows remain: pass it as `cursor` to get the next page."}),
        );
    }
    let mut required = vec![s.key];
    for (field, e) in s.envelope {
        let schema = match e {
            EnvelopeDef::Count => {
                json!({"type": "integer", "description": "How many rows this result holds."})
            }
            EnvelopeDef::Tokens => {
                json!({"type": "integer", "description": "An estimate of the tokens this result takes (its JSON length / 4)."})
            }
            EnvelopeDef::Arg(a) => {
                let mut p = input["properties"][a].clone();
                if let Some(o) = p.as_object_mut() {
                    o.remove("default");
                }
                p
            }
            EnvelopeDef::Column(c) => all_columns(s)
                .find(|(col, _)| col.name == *c)
                .map(|(col, doc)| column_schema(col, doc))
                .unwrap_or_else(|| json!({})),
        };
        props.insert(field.to_string(), schema);
        if !matches!(e, EnvelopeDef::Arg(_)) {
            required.push(field);
        }
    }
    json!({"type": "object", "properties": props, "required": required})
}

fn output_schema(binding: &Binding, input: &Value) -> Value {
    match binding {
        Binding::Single(s) => match s.mode {
            Mode::Many => many_schema(s, input),
            Mode::One | Mode::Optional => row_schema(all_columns(s)),
            Mode::Scalar => {
                let nullable = s.columns[0].nullable;
                let required: Vec<&str> = if nullable { vec![] } else { vec![s.key] };
                json!({"type": "object", "properties": {s.key: part_schema(s)}, "required": required})
            }
            Mode::Execute => execute_schema(),
        },
        Binding::Handler(_) | Binding::Content(_) => json!({"type": "object"}),
        Binding::Backfill { .. } => backfill_schema(),
        Binding::Composite(parts) => {
            let props: Map<String, Value> = parts
                .iter()
                .map(|p| (p.name.to_string(), part_schema(p)))
                .collect();
            let required: Vec<&str> = parts
                .iter()
                .filter(|p| {
                    matches!(p.mode, Mode::One | Mode::Many)
                        || (p.mode == Mode::Scalar && !p.columns[0].nullable)
                })
                .map(|p| p.name)
                .collect();
            json!({"type": "object", "properties": props, "required": required})
        }
    }
}

/// The result of a backfill: what it stored, in how many batches, what is left, and the model.
fn backfill_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "embedded": {"type": "integer", "description": "Rows given a vector by this call."},
            "batches": {"type": "integer", "description": "Batches stored, each in its own transaction."},
            "remaining": {"type": "integer", "description": "Rows still without a vector of the running model."},
            "model": {"type": "string", "description": "The model the vectors were made with."}
        },
        "required": ["embedded", "batches", "model"]
    })
}

/// Marks each output struct whose fields equal an earlier one's as an alias of it. Structs are
/// compared with their nested struct types already resolved to the structs they alias, so a
/// schema reused through a YAML anchor yields one Rust type under every name.
fn with_aliases(mut tools: Vec<Tool>) -> Vec<Tool> {
    fn shape(t: &OutType, alias: &HashMap<String, String>) -> String {
        match t {
            OutType::Struct(n) => format!("struct {}", alias.get(n).unwrap_or(n)),
            OutType::Array(inner) => format!("[{}]", shape(inner, alias)),
            other => format!("{other:?}"),
        }
    }
    // The first struct of each shape (its fields, in order) is the canonical one.
    let mut canonical: HashMap<String, String> = HashMap::new();
    let mut alias: HashMap<String, String> = HashMap::new();
    for tool in &mut tools {
        // Nested structs follow their parent, so resolve them first.
        for s in tool.outputs.iter_mut().rev() {
            let key = s
                .fields
                .iter()
                .map(|f| {
                    format!(
                        "{}|{}|{}|{}|{:?}\n",
                        f.wire,
                        f.field,
                        f.required,
                        shape(&f.ty, &alias),
                        f.description
                    )
                })
                .collect::<String>();
            match canonical.get(&key) {
                Some(first) => {
                    s.alias_of = Some(first.clone());
                    alias.insert(s.name.clone(), first.clone());
                }
                None => {
                    canonical.insert(key, s.name.clone());
                }
            }
        }
    }
    tools
}

/// Every tool's examples, in spec order; validate made sure each has exactly one expectation.
fn examples(file: &str, spec: &RawSpec) -> Vec<Example> {
    let mut out = Vec::new();
    for t in &spec.tools {
        for e in &t.value.examples {
            let pos = crate::spec::pos(e);
            let x = &e.value;
            let expect = match (&x.returns, &x.error) {
                (Some(r), _) => Expect::Returns(r.value.clone()),
                (None, Some(code)) => Expect::Error(code.value.clone()),
                (None, None) => Expect::Empty,
            };
            out.push(Example {
                tool: t.value.name.value.clone(),
                arguments: x
                    .arguments
                    .as_ref()
                    .map_or_else(|| json!({}), |a| a.value.clone()),
                expect,
                sample_rows: x.sample_rows,
                at: format!("{file}:{}:{}", pos.line, pos.column),
                pos,
            });
        }
    }
    out
}
