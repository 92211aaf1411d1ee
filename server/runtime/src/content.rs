//! MCP resources, prompts and completion over the generated [`ResourceDef`] and [`PromptDef`]
//! tables.
//!
//! Content is made the same way for a resource and for a prompt: an optional statement, run by
//! the [`Engine`] exactly as a tool's statement runs, gives `data`; an optional minijinja
//! template, kept in the engine's template environment, renders the variables and `data` as
//! text (without a template the text is `data` as JSON). A resource bound to a Rust `handler:`
//! is read through the engine's dispatcher instead, on the calling thread, which the MCP layer
//! runs on the blocking pool. Failures become [`ContentError`]s that say nothing of SQL text or
//! paths; the details go to the log.

use crate::backend::{Value as SqlValue, ValueRef};
use rmcp::model::{
    ArgumentInfo, CompletionContext, CompletionInfo, ContentBlock, ErrorCode, ErrorData,
    GetPromptResult, Prompt, PromptArgument, PromptMessage, Reference, Resource, ResourceContents,
    ResourceTemplate, Role,
};
use serde_json::{Map, Value, json};

use crate::def::{
    Arguments, ContentDef, MessageBodyDef, PromptDef, ResourceDef, ServerDef, StatementDef,
};
use crate::engine::{Engine, Job, ToolError};
use crate::handler::{INTERNAL, RESOURCE_NOT_FOUND, ResourceBody, ResourceVars};
use crate::params::ToParam;
use crate::templates::{PROMPT, RESOURCE, content_key, template_name};
pub use crate::uri_template::match_template;

/// The most completion values one answer carries, as MCP allows.
const MAX_COMPLETIONS: usize = 100;

/// Why a resource read, prompt or completion failed.
#[derive(Debug, Clone, PartialEq)]
pub enum ContentError {
    /// No resource has this URI (or its statement found no row): JSON-RPC -32002.
    ResourceNotFound(String),
    /// A resource handler found nothing at this URI and says why: JSON-RPC -32002 with this
    /// message, `(uri, message)`.
    ResourceNotFoundBecause(String, String),
    /// A declared error of the spec, returned by a resource handler: its own code.
    Rpc(crate::engine::RpcError),
    /// An unknown prompt or reference, or a missing or unknown argument: JSON-RPC -32602.
    InvalidParams(String, Value),
    /// A statement or template failed; the message is sanitised: JSON-RPC -32603.
    Failed(String),
}

/// The error as sent: what the client wrote (a URI, a name) is quoted back bounded, in `data`
/// as in the messages made from it.
impl From<ContentError> for ErrorData {
    fn from(e: ContentError) -> ErrorData {
        let shorten = crate::transform::shorten;
        match e {
            ContentError::ResourceNotFound(uri) => ErrorData::resource_not_found(
                "resource not found",
                Some(shorten(&json!({ "uri": uri }))),
            ),
            ContentError::ResourceNotFoundBecause(uri, message) => {
                ErrorData::resource_not_found(message, Some(shorten(&json!({ "uri": uri }))))
            }
            ContentError::Rpc(e) => ErrorData::new(ErrorCode(e.code), e.message, Some(e.data)),
            ContentError::InvalidParams(message, data) => {
                ErrorData::new(ErrorCode::INVALID_PARAMS, message, Some(shorten(&data)))
            }
            ContentError::Failed(message) => ErrorData::internal_error(message, None),
        }
    }
}

/// Whether the server declares any completion query.
pub fn has_completions(def: &ServerDef) -> bool {
    def.resources.iter().any(|r| !r.complete.is_empty())
        || def
            .prompts
            .iter()
            .any(|p| p.arguments.iter().any(|a| a.complete.is_some()))
}

/// The fixed resources as `resources/list` publishes them.
pub fn resource_list(def: &ServerDef) -> Vec<Resource> {
    def.resources
        .iter()
        .filter(|r| !r.templated)
        .map(|r| {
            let mut out = Resource::new(r.uri, r.name).with_mime_type(r.mime_type);
            if let Some(t) = r.title {
                out = out.with_title(t);
            }
            if let Some(d) = r.description {
                out = out.with_description(d);
            }
            out
        })
        .collect()
}

/// The templated resources as `resources/templates/list` publishes them.
pub fn template_list(def: &ServerDef) -> Vec<ResourceTemplate> {
    def.resources
        .iter()
        .filter(|r| r.templated)
        .map(|r| {
            let mut out = ResourceTemplate::new(r.uri, r.name).with_mime_type(r.mime_type);
            if let Some(t) = r.title {
                out = out.with_title(t);
            }
            if let Some(d) = r.description {
                out = out.with_description(d);
            }
            out
        })
        .collect()
}

/// The prompts as `prompts/list` publishes them.
pub fn prompt_list(def: &ServerDef) -> Vec<Prompt> {
    def.prompts
        .iter()
        .map(|p| {
            let arguments = p
                .arguments
                .iter()
                .map(|a| {
                    let mut out = PromptArgument::new(a.name).with_required(a.required);
                    if let Some(d) = a.description {
                        out = out.with_description(d);
                    }
                    out
                })
                .collect();
            let mut out = Prompt::new(p.name, p.description, Some(arguments));
            if let Some(t) = p.title {
                out = out.with_title(t);
            }
            out
        })
        .collect()
}

/// Reads a resource by URI: a fixed URI first, then the templates in spec order.
pub fn read(engine: &Engine, uri: &str) -> Result<ResourceContents, ContentError> {
    let def = engine.def;
    let found = def
        .resources
        .iter()
        .find(|r| !r.templated && r.uri == uri)
        .map(|r| (r, Map::new()))
        .or_else(|| {
            def.resources.iter().filter(|r| r.templated).find_map(|r| {
                let vars = match_template(r.uri, uri)?;
                Some((r, vars))
            })
        });
    let Some((resource, vars)) = found else {
        return Err(ContentError::ResourceNotFound(uri.to_string()));
    };
    if let Some(blob) = resource.content.blob {
        return Ok(ResourceContents::blob(blob, uri).with_mime_type(resource.mime_type));
    }
    if resource.content.handler {
        return read_handler(engine, resource, uri, &vars);
    }
    let text = render_resource(engine, resource, &vars).map_err(|e| match e {
        Failure::NoRow(_) => ContentError::ResourceNotFound(uri.to_string()),
        Failure::Failed(m) => ContentError::Failed(m),
    })?;
    Ok(ResourceContents::text(text, uri).with_mime_type(resource.mime_type))
}

/// Reads a handler resource and maps the handler's error: a declared error is its JSON-RPC
/// error (its message over the variables and the error's fields), `RESOURCE_NOT_FOUND` is
/// -32002 with the handler's message, an internal failure a sanitised -32603 naming the
/// request, and any other name -32603 with the handler's message and fields.
fn read_handler(
    engine: &Engine,
    resource: &'static ResourceDef,
    uri: &str,
    vars: &Arguments,
) -> Result<ResourceContents, ContentError> {
    let values: ResourceVars = vars
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
        .collect();
    let (e, request) = match engine.read_handler(resource.name, uri, &values) {
        Ok(ResourceBody::Text { text, mime_type }) => {
            let mime = mime_type.unwrap_or_else(|| resource.mime_type.to_string());
            return Ok(ResourceContents::text(text, uri).with_mime_type(mime));
        }
        Ok(ResourceBody::Blob { bytes, mime_type }) => {
            let mime = mime_type.unwrap_or_else(|| resource.mime_type.to_string());
            let data = base64(&bytes);
            return Ok(ResourceContents::blob(data, uri).with_mime_type(mime));
        }
        Err(failure) => failure,
    };
    let mut context = vars.clone();
    context.insert("uri".into(), Value::String(uri.to_string()));
    if let Some(rpc) = engine.declared_error(e.name(), e.fields(), &Value::Object(context)) {
        return Err(ContentError::Rpc(rpc));
    }
    match e.name() {
        RESOURCE_NOT_FOUND => Err(ContentError::ResourceNotFoundBecause(
            uri.to_string(),
            e.text().unwrap_or("resource not found").to_string(),
        )),
        INTERNAL => {
            tracing::error!(request, resource = resource.name, error = %e, "resource handler failed");
            Err(ContentError::Failed(format!(
                "reading `{}` failed inside the server (request {request}; details are in the server log)",
                resource.name
            )))
        }
        name => Err(ContentError::Failed(e.text().map_or_else(
            || format!("reading `{}` failed: {name}", resource.name),
            str::to_string,
        ))),
    }
}

/// How making content failed, before the caller decides what that means for its request.
enum Failure {
    /// A `one` statement found no row; the statement's `not_found` message.
    NoRow(String),
    Failed(String),
}

fn render_resource(
    engine: &Engine,
    r: &'static ResourceDef,
    vars: &Arguments,
) -> Result<String, Failure> {
    render(engine, RESOURCE, r.name, &r.content, vars)
}

/// Makes the text of a resource or prompt from its statement and template.
fn render(
    engine: &Engine,
    prefix: &'static str,
    name: &'static str,
    content: &'static ContentDef,
    vars: &Arguments,
) -> Result<String, Failure> {
    let data = match &content.statement {
        Some(st) => run(engine, prefix, name, st, vars)?,
        None => Value::Null,
    };
    match content.template {
        Some(_) => render_template(
            engine,
            &template_name(&content_key(prefix, name), "", "content"),
            vars,
            &data,
        ),
        None => Ok(serde_json::to_string_pretty(&data).unwrap_or_default()),
    }
}

/// Runs one statement with the variables as its parameters: text as given, absent as NULL,
/// and `:arguments` as all of them in one JSON object.
fn run(
    engine: &Engine,
    prefix: &'static str,
    name: &'static str,
    st: &'static StatementDef,
    vars: &Arguments,
) -> Result<Value, Failure> {
    let params: Vec<(&'static str, SqlValue)> = st
        .params
        .iter()
        .map(|p| {
            let v = if *p == "arguments" && !vars.contains_key("arguments") {
                crate::params::arguments_param(vars)
            } else {
                vars.get(*p).map_or(SqlValue::Null, ToParam::to_param)
            };
            (*p, v)
        })
        .collect();
    let job = Job {
        name,
        prefix,
        statements: std::slice::from_ref(st),
        single: true,
        writes: false,
    };
    engine
        .query(job, &params, vars)
        .map_err(|e: ToolError| match e.code {
            "NOT_FOUND" => Failure::NoRow(e.message),
            _ => Failure::Failed(e.message),
        })
}

fn render_template(
    engine: &Engine,
    template: &str,
    vars: &Arguments,
    data: &Value,
) -> Result<String, Failure> {
    let mut ctx = vars.clone();
    ctx.insert("data".into(), data.clone());
    let t = engine
        .templates()
        .get_template(template)
        .map_err(|e| template_failure(template, &e))?;
    t.render(minijinja::value::Serde(&ctx))
        .map_err(|e| template_failure(template, &e))
}

fn template_failure(template: &str, e: &minijinja::Error) -> Failure {
    tracing::error!(template, error = %e, "a content template failed");
    Failure::Failed(format!(
        "rendering `{}` failed; details are in the server log",
        template.split('/').next().unwrap_or(template)
    ))
}

/// The prompt called `name`; invalid params naming the prompts there are, when none is.
pub fn prompt(def: &'static ServerDef, name: &str) -> Result<&'static PromptDef, ContentError> {
    def.prompts.iter().find(|p| p.name == name).ok_or_else(|| {
        let available: Vec<&str> = def.prompts.iter().map(|p| p.name).collect();
        ContentError::InvalidParams(
            format!("unknown prompt: {}", crate::transform::quote(name)),
            json!({"prompt": name, "available": available}),
        )
    })
}

/// Renders a prompt's messages with its arguments and the person's `answers` to its
/// questions (gathered by the protocol layer); a resource message embeds that resource.
pub fn get_prompt(
    engine: &Engine,
    p: &'static PromptDef,
    arguments: Option<&Arguments>,
    answers: Map<String, Value>,
) -> Result<GetPromptResult, ContentError> {
    let mut args = prompt_arguments(p, arguments)?;
    let data = match &p.statement {
        Some(st) => run(engine, PROMPT, p.name, st, &args).map_err(|e| match e {
            Failure::NoRow(m) => ContentError::InvalidParams(m, json!({"prompt": p.name})),
            Failure::Failed(m) => ContentError::Failed(m),
        })?,
        None => Value::Null,
    };
    // After the statement ran: the answers are for the messages, never SQL parameters.
    args.insert("answers".into(), Value::Object(answers));
    let key = content_key(PROMPT, p.name);
    let mut messages = Vec::with_capacity(p.messages.len());
    for (i, m) in p.messages.iter().enumerate() {
        let role = if m.assistant {
            Role::Assistant
        } else {
            Role::User
        };
        if let MessageBodyDef::Image(data, mime) = m.body {
            messages.push(PromptMessage::new(role, ContentBlock::image(data, mime)));
            continue;
        }
        let text = render_template(
            engine,
            &template_name(&key, "message", &i.to_string()),
            &args,
            &data,
        )
        .map_err(|e| match e {
            Failure::NoRow(m) | Failure::Failed(m) => ContentError::Failed(m),
        })?;
        let content = match m.body {
            MessageBodyDef::Text(_) => ContentBlock::text(text.trim().to_string()),
            MessageBodyDef::Image(..) => unreachable!("image messages are handled above"),
            MessageBodyDef::Resource(_) => {
                let uri = text.trim();
                let contents = read(engine, uri).map_err(|e| match e {
                    ContentError::ResourceNotFound(uri) => ContentError::InvalidParams(
                        format!(
                            "prompt `{}` embeds `{}`, which was not found",
                            p.name,
                            crate::transform::quote(&uri)
                        ),
                        json!({"prompt": p.name, "uri": uri}),
                    ),
                    other => other,
                })?;
                ContentBlock::resource(contents)
            }
        };
        messages.push(PromptMessage::new(role, content));
    }
    let mut result = GetPromptResult::new(messages);
    result.description = p.description.map(str::to_string);
    Ok(result)
}

/// The prompt's arguments as given: every required one present, no unknown one; values that
/// are not strings are taken as their JSON text.
fn prompt_arguments(
    p: &PromptDef,
    arguments: Option<&Arguments>,
) -> Result<Arguments, ContentError> {
    let given = arguments.cloned().unwrap_or_default();
    for k in given.keys() {
        if !p.arguments.iter().any(|a| a.name == k) {
            let known: Vec<&str> = p.arguments.iter().map(|a| a.name).collect();
            return Err(ContentError::InvalidParams(
                format!("prompt `{}` has no argument `{k}`", p.name),
                json!({"prompt": p.name, "argument": k, "arguments": known}),
            ));
        }
    }
    let mut out = Map::new();
    for a in p.arguments {
        match given.get(a.name) {
            Some(Value::Null) | None if a.required => {
                return Err(ContentError::InvalidParams(
                    format!(
                        "missing required argument `{}` of prompt `{}`",
                        a.name, p.name
                    ),
                    json!({"prompt": p.name, "argument": a.name}),
                ));
            }
            Some(Value::Null) | None => {}
            Some(Value::String(s)) => {
                out.insert(a.name.to_string(), Value::String(s.clone()));
            }
            Some(other) => {
                out.insert(a.name.to_string(), Value::String(other.to_string()));
            }
        }
    }
    Ok(out)
}

/// Completion values for a prompt argument or a resource template variable: the first column
/// of the declared query's rows, with `:value` the partial text and the other parameters the
/// context's arguments.
pub fn complete(
    engine: &Engine,
    reference: &Reference,
    argument: &ArgumentInfo,
    context: Option<&CompletionContext>,
) -> Result<CompletionInfo, ContentError> {
    let def = engine.def;
    let sql = match reference {
        Reference::Prompt(r) => {
            let Some(p) = def.prompts.iter().find(|p| p.name == r.name) else {
                return Err(ContentError::InvalidParams(
                    format!("unknown prompt: {}", crate::transform::quote(&r.name)),
                    json!({"prompt": r.name}),
                ));
            };
            p.arguments
                .iter()
                .find(|a| a.name == argument.name)
                .and_then(|a| a.complete)
        }
        Reference::Resource(r) => {
            let Some(res) = def.resources.iter().find(|x| x.templated && x.uri == r.uri) else {
                return Err(ContentError::InvalidParams(
                    format!(
                        "unknown resource template: {}",
                        crate::transform::quote(&r.uri)
                    ),
                    json!({"uri": r.uri}),
                ));
            };
            res.complete
                .iter()
                .find(|(v, _)| *v == argument.name)
                .map(|(_, sql)| *sql)
        }
        _ => {
            return Err(ContentError::InvalidParams(
                "unsupported completion reference".into(),
                json!({}),
            ));
        }
    };
    let Some(sql) = sql else {
        return Ok(CompletionInfo::default());
    };
    let bind = |name: &str| {
        if name == "value" {
            SqlValue::Text(argument.value.clone())
        } else {
            context
                .and_then(|c| c.get_argument(name))
                .map_or(SqlValue::Null, |v| SqlValue::Text(v.clone()))
        }
    };
    let mut values = Vec::new();
    let mut more = false;
    let outcome = engine.read_rows(sql, &bind, &mut |row| {
        let v = match row.value(0) {
            ValueRef::Text(t) => String::from_utf8_lossy(t).into_owned(),
            ValueRef::Integer(i) => i.to_string(),
            ValueRef::Real(f) => f.to_string(),
            ValueRef::Null | ValueRef::Blob(_) => return true,
        };
        if values.len() == MAX_COMPLETIONS {
            more = true;
            return false;
        }
        values.push(v);
        true
    });
    let outcome = outcome.map(|r| r.map(|()| (values, more)));
    match outcome {
        Some(Ok((values, more))) => {
            let mut info = CompletionInfo::new(values).unwrap_or_default();
            info.has_more = Some(more);
            Ok(info)
        }
        Some(Err(e)) => {
            tracing::error!(argument = %argument.name, error = %e.message, "a completion query failed");
            Err(ContentError::Failed(format!(
                "completing `{}` failed; details are in the server log",
                argument.name
            )))
        }
        None => Ok(CompletionInfo::default()),
    }
}

/// Standard base64 with padding, as a `blob` is sent.
fn base64(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_match_level_one_uris() {
        let m = match_template("kb://entry/{id}", "kb://entry/a%20b").unwrap();
        assert_eq!(m["id"], "a b");
        let m = match_template("kb://{kind}/{id}.md", "kb://entry/x.y.md").unwrap();
        assert_eq!(
            (m["kind"].as_str(), m["id"].as_str()),
            (Some("entry"), Some("x.y"))
        );
        assert!(match_template("kb://entry/{id}", "kb://entry/").is_none());
        assert!(match_template("kb://entry/{id}", "kb://entry/a/b").is_none());
        assert!(match_template("kb://entry/{id}", "kb://other/a").is_none());
        assert!(match_template("kb://entry/{id}", "kb://entry/%zz").is_none());
    }

    #[test]
    fn blobs_are_standard_padded_base64() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(&[0xff, 0xfe, 0x00, 0x10]), "//4AEA==");
    }
}
