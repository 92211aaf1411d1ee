//! MCP Apps (SEP-1865) as a host meets them, checked against the SEP's own SDK
//! (`@modelcontextprotocol/ext-apps` 2.0.4 from npm: its JSON Schema of the types and its MIME
//! constant): the seeds' tools with `app: table` (studio's `query_learnings`, knowledge's
//! `kb_search`) name their view in `_meta.ui` as `McpUiToolMeta` says, and the view is served
//! over stdio and Streamable HTTP in both protocol eras with the SDK's MIME type and resource
//! metadata (`McpUiResourceMeta`: a CSP declaring no origin), as an HTML document that loads
//! nothing from elsewhere and speaks the view's side of the protocol.

use serde_json::{Value, json};

use crate::common::{Transport, sample_db, start_over};
use crate::content::ok;

/// A validator of the SDK schema's definition `name`, its sibling definitions beside it.
fn validator(schema: &Value, name: &str) -> jsonschema::Validator {
    let mut one = schema["$defs"][name].clone();
    assert!(one.is_object(), "the SDK's schema defines no {name}");
    one["$defs"] = schema["$defs"].clone();
    jsonschema::validator_for(&one).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// The SDK's `RESOURCE_MIME_TYPE`, read from its declarations.
fn sdk_mime_type(sdk: &std::path::Path) -> String {
    let text = std::fs::read_to_string(sdk.join("dist/src/constants.d.ts")).expect("constants");
    let line = text
        .lines()
        .find(|l| l.contains("RESOURCE_MIME_TYPE ="))
        .expect("RESOURCE_MIME_TYPE in the SDK");
    line.split('"').nth(1).expect("a quoted value").to_string()
}

#[cfg(feature = "full")]
#[test]
fn seed_tools_name_their_table_view_and_serve_it_as_the_sdk_says() {
    let sdk = crate::deps::ext_apps();
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(sdk.join("dist/src/generated/schema.json")).expect("schema"),
    )
    .expect("the SDK's schema is JSON");
    let tool_meta = validator(&schema, "McpUiToolMeta");
    let resource_meta = validator(&schema, "McpUiResourceMeta");
    let mime = sdk_mime_type(&sdk);
    for (server, tool) in [("studio", "query_learnings"), ("knowledge", "kb_search")] {
        for transport in [Transport::Stdio, Transport::Http, Transport::HttpPerRequest] {
            let mut s = start_over(transport, sample_db(server), server, &[]);
            let at = format!("{server} {transport:?}");
            let ui = s.tool(tool)["_meta"]["ui"].clone();
            if let Err(e) = tool_meta.validate(&ui) {
                panic!("{at}: {ui} is no McpUiToolMeta: {e}");
            }
            let uri = format!("ui://{server}/{tool}");
            assert_eq!(ui["resourceUri"], uri, "{at}");
            // Only the tools that declare an app name one.
            let with_views = s
                .tools()
                .iter()
                .filter(|t| t["_meta"]["ui"].is_object())
                .count();
            assert_eq!(with_views, 1, "{at}");
            let read = ok(&mut s, "resources/read", json!({"uri": uri}));
            let c = &read["contents"][0];
            assert_eq!(c["mimeType"], mime.as_str(), "{at}");
            let meta = &c["_meta"]["ui"];
            if let Err(e) = resource_meta.validate(meta) {
                panic!("{at}: {meta} is no McpUiResourceMeta: {e}");
            }
            assert_eq!(meta["csp"]["connectDomains"], json!([]), "{at}");
            assert_eq!(meta["csp"]["resourceDomains"], json!([]), "{at}");
            let html = c["text"].as_str().expect("the view as text");
            assert!(html.starts_with("<!DOCTYPE html>"), "{at}");
            for word in [
                "ui/initialize",
                "ui/notifications/initialized",
                "ui/notifications/tool-result",
            ] {
                assert!(html.contains(word), "{at}: the view never says {word}");
            }
            for outside in ["http://", "https://", "src=", "@import"] {
                assert!(!html.contains(outside), "{at}: the view has `{outside}`");
            }
            let listed = ok(&mut s, "resources/list", json!({}));
            assert!(
                listed["resources"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|r| r["uri"] == uri && r["mimeType"] == mime.as_str()),
                "{at}: {listed}"
            );
            // A view the server does not have is an unknown resource: -32002, which protocol
            // 2026-07-28 answers as invalid params.
            let missing = s
                .client
                .request(
                    "resources/read",
                    json!({"uri": format!("ui://{server}/nothing")}),
                )
                .expect("resources/read");
            let unknown = if matches!(transport, Transport::HttpPerRequest) {
                -32602
            } else {
                -32002
            };
            assert_eq!(missing["error"]["code"], unknown, "{at}: {missing}");
            s.finish();
        }
    }
}
