//! MCP Apps (SEP-1865, `io.modelcontextprotocol/ui`): the views hosts render beside a tool's
//! result. A tool with `app:` names its view in `_meta.ui.resourceUri`; the view is the
//! resource `ui://<server>/<tool>`, HTML of type `text/html;profile=mcp-app` with a CSP that
//! declares no outside origin (no network, nothing loaded from elsewhere). The view is the
//! built-in table (`table.html`, embedded in the binary) or the spec author's HTML file, read
//! when the spec compiled. A leaf over the definition: the protocol layer calls it.

use rmcp::model::{MetaObject, Resource, ResourceContents};
use serde_json::{Map, Value, json};

use crate::def::{AppDef, ServerDef, ToolDef};

/// The MIME type of an app's HTML (SEP-1865).
pub(crate) const MIME_TYPE: &str = "text/html;profile=mcp-app";

/// The built-in table view.
const TABLE: &str = include_str!("table.html");

/// The URI of `tool`'s view.
fn uri(def: &ServerDef, tool: &ToolDef) -> String {
    format!("ui://{}/{}", def.name, tool.name)
}

/// Whether any tool has a view (the server then serves resources).
pub(crate) fn any(def: &ServerDef) -> bool {
    def.tools.iter().any(|t| t.app.is_some())
}

/// The tool's `_meta` naming its view, for `tools/list`.
pub(crate) fn tool_meta(def: &ServerDef, tool: &ToolDef) -> Option<MetaObject> {
    tool.app?;
    let mut meta = Map::new();
    meta.insert("ui".into(), json!({"resourceUri": uri(def, tool)}));
    Some(MetaObject(meta))
}

/// The views, as `resources/list` lists them.
pub(crate) fn resources(def: &ServerDef) -> Vec<Resource> {
    def.tools
        .iter()
        .filter(|t| t.app.is_some())
        .map(|t| {
            Resource::new(uri(def, t), format!("{}-view", t.name))
                .with_title(match t.app {
                    Some(AppDef::Html { .. }) => format!("{} (view)", t.title.unwrap_or(t.name)),
                    _ => format!("{} (table view)", t.title.unwrap_or(t.name)),
                })
                .with_description(match t.app {
                    Some(AppDef::Html { .. }) => {
                        format!("The MCP App that shows `{}`'s result.", t.name)
                    }
                    _ => format!("The MCP App that shows `{}`'s result as tables.", t.name),
                })
                .with_mime_type(MIME_TYPE)
        })
        .collect()
}

/// Whether `uri` is in the views' namespace, which only they answer.
pub(crate) fn owns(uri: &str) -> bool {
    uri.starts_with("ui://")
}

/// The view at `uri`: its HTML, with the resource metadata SEP-1865 defines (a CSP that
/// declares no origin, and a border the host draws).
pub(crate) fn read(def: &ServerDef, uri_asked: &str) -> Option<ResourceContents> {
    let tool = def
        .tools
        .iter()
        .find(|t| t.app.is_some() && uri(def, t) == uri_asked)?;
    let html = match tool.app? {
        AppDef::Table => TABLE,
        AppDef::Html { html, .. } => html,
    };
    let mut meta = Map::new();
    meta.insert(
        "ui".into(),
        json!({
            "csp": {"connectDomains": Value::Array(Vec::new()), "resourceDomains": Value::Array(Vec::new())},
            "prefersBorder": true,
        }),
    );
    Some(
        ResourceContents::text(html, uri_asked)
            .with_mime_type(MIME_TYPE)
            .with_meta(MetaObject(meta)),
    )
}
