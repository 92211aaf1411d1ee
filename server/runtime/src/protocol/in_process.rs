//! The protocol in process: the `basic` golden served by [`McpServer`] over one end of a
//! `tokio::io::duplex` pipe, rmcp's client on the other, on a scratch SQLite file made with
//! the spec's sample rows. The same path as stdio and HTTP from the handler on (rmcp's
//! service, the engine, the backend), without a process or a socket: the fast tier's check of
//! the protocol's outcomes, one helper per kind (a result, a tool error, a protocol error).

use std::sync::Arc;

use rmcp::model::{CallToolRequestParams, CallToolResult, ErrorCode};
use rmcp::service::{RoleClient, RunningService, ServiceError};
use rmcp::{ServiceExt as _, serve_client};
use serde_json::{Value, json};

use super::McpServer;
use crate::basic;
use crate::engine::{Engine, Limits};

/// A client session with the `basic` server; the directory holds its database.
struct Session {
    client: RunningService<RoleClient, ()>,
    _dir: tempfile::TempDir,
}

async fn session() -> Session {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let at = crate::cli::examples::scratch_database(&basic::SERVER, dir.path())
        .expect("the scratch database")
        .expect("basic has a database");
    let engine: Arc<Engine> =
        Engine::start_at(&basic::SERVER, Some(&at), false, Limits::default(), None)
            .expect("the engine starts");
    let (ours, theirs) = tokio::io::duplex(64 * 1024);
    let server = McpServer::with_proxy(engine, None);
    tokio::spawn(async move {
        if let Ok(running) = server.serve(theirs).await {
            let _ = running.waiting().await;
        }
    });
    let client = serve_client((), ours).await.expect("initialize");
    Session { client, _dir: dir }
}

impl Session {
    async fn call(&self, tool: &str, args: Value) -> Result<CallToolResult, ServiceError> {
        let mut params = CallToolRequestParams::new(tool.to_string());
        if let Value::Object(a) = args {
            params = params.with_arguments(a);
        }
        self.client.call_tool(params).await
    }

    /// A successful call's structured content.
    async fn ok(&self, tool: &str, args: Value) -> Value {
        let r = self.call(tool, args.clone()).await.expect("a result");
        assert_ne!(r.is_error, Some(true), "{tool} {args}: {r:?}");
        r.structured_content.expect("structured content")
    }

    /// A tool error's content (`isError`): the code, message and fields as text JSON.
    async fn tool_error(&self, tool: &str, args: Value) -> Value {
        let r = self.call(tool, args.clone()).await.expect("a result");
        assert_eq!(r.is_error, Some(true), "{tool} {args}: {r:?}");
        let text = r.content[0].as_text().expect("text content").text.clone();
        serde_json::from_str(&text).expect("the error as JSON")
    }

    /// A protocol error's code, message and data.
    async fn protocol_error(&self, tool: &str, args: Value) -> (ErrorCode, String, Value) {
        match self.call(tool, args).await {
            Err(ServiceError::McpError(e)) => {
                (e.code, e.message.to_string(), e.data.unwrap_or_default())
            }
            other => panic!("{tool}: a protocol error, not {other:?}"),
        }
    }
}

#[tokio::test]
async fn the_handshake_and_the_tool_list_come_from_the_definition() {
    let s = session().await;
    let info = s
        .client
        .peer_info()
        .expect("the server's answer to initialize");
    assert_eq!(
        info.server_info.as_ref().map(|i| i.name.as_str()),
        Some("basic")
    );
    assert_eq!(
        info.instructions.as_deref(),
        Some("A notes store for codegen goldens.")
    );
    let tools = s.client.list_all_tools().await.expect("tools/list");
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(
        names,
        [
            "search_notes",
            "delete_note",
            "find_note",
            "list_notes",
            "notes_between"
        ]
    );
    let delete = &tools[1];
    assert_eq!(delete.title.as_deref(), Some("Delete a note"));
    assert_eq!(
        delete.annotations.as_ref().and_then(|a| a.destructive_hint),
        Some(true)
    );
}

#[tokio::test]
async fn calls_answer_with_rows_tool_errors_and_protocol_errors() {
    let s = session().await;
    assert_eq!(
        s.ok("search_notes", json!({"q": "hel"})).await,
        json!({"notes": [{"id": 1, "body": "hello", "meta": {"pinned": true}}]})
    );
    // A bad argument is a tool error naming the field; nothing runs.
    let bad = s
        .tool_error("search_notes", json!({"q": "hel", "limit": 99}))
        .await;
    assert_eq!(bad["error"]["code"], "INVALID_ARGUMENTS", "{bad}");
    assert_eq!(bad["error"]["field"], "limit", "{bad}");
    // Top-level composition is enforced: exactly one of `id` and `body`.
    let both = s
        .tool_error("find_note", json!({"id": 1, "body": "hello"}))
        .await;
    assert_eq!(both["error"]["code"], "INVALID_ARGUMENTS", "{both}");
    // An unknown tool is a protocol error that names it and lists the tools.
    let (code, message, data) = s.protocol_error("no_such_tool", json!({})).await;
    assert_eq!(code, ErrorCode::INVALID_PARAMS);
    assert_eq!(message, "unknown tool: no_such_tool");
    assert_eq!(data["tool"], "no_such_tool", "{data}");
    assert_eq!(data["available"][0], "search_notes", "{data}");
}
