//! The stdio transport: newline-delimited JSON-RPC on stdin and stdout.
//!
//! It replaces rmcp's own stdio transport so that every input gets an answer: a line that is
//! not JSON gets -32700 with a null id, well-formed JSON that is not a message gets -32600, a
//! request for a method MCP does not define gets -32601 (even before `initialize`), and an
//! oversized line is discarded without being buffered and answered with -32600.

use std::sync::Arc;

use rmcp::RoleServer;
use rmcp::model::{ClientJsonRpcMessage, ClientRequest, JsonRpcMessage, RequestId};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::Mutex;

/// Request methods MCP defines (through 2026-07-28); any other method is not found.
const MCP_METHODS: &[&str] = &[
    "initialize",
    "ping",
    "server/discover",
    "tools/list",
    "tools/call",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "resources/subscribe",
    "resources/unsubscribe",
    "prompts/list",
    "prompts/get",
    "completion/complete",
    "logging/setLevel",
    "tasks/get",
    "tasks/list",
    "tasks/result",
    "tasks/cancel",
    "subscriptions/listen",
];

/// The largest message accepted on one line.
pub const MAX_LINE_BYTES: usize = 8 * 1024 * 1024;

pub struct StdioTransport<R, W> {
    read: BufReader<R>,
    line: Vec<u8>,
    discarding: bool,
    max_line: usize,
    write: Arc<Mutex<W>>,
    /// Error replies the transport writes itself, each on its own task so that rmcp's
    /// cancellation of `receive` can neither drop nor repeat one; awaited at end of input.
    inflight: Vec<tokio::task::JoinHandle<()>>,
}

impl<R, W> StdioTransport<R, W>
where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    pub fn new(read: R, write: W) -> Self {
        StdioTransport {
            read: BufReader::with_capacity(64 * 1024, read),
            line: Vec::with_capacity(4096),
            discarding: false,
            max_line: MAX_LINE_BYTES,
            write: Arc::new(Mutex::new(write)),
            inflight: Vec::new(),
        }
    }

    /// Sets the largest accepted line, mainly for tests.
    #[must_use]
    pub fn with_max_line(mut self, max: usize) -> Self {
        self.max_line = max;
        self
    }

    /// Reads one line into `self.line`; cancellation-safe because partial input stays in the
    /// buffer for the next call. Returns `None` at end of input.
    async fn read_line(&mut self) -> Option<Result<(), ()>> {
        loop {
            let available = match self.read.fill_buf().await {
                Ok(a) => a,
                Err(e) => {
                    tracing::error!(error = %e, "reading stdin failed");
                    return None;
                }
            };
            if available.is_empty() {
                return None;
            }
            let newline = available.iter().position(|b| *b == b'\n');
            let take = newline.map_or(available.len(), |i| i + 1);
            let mut oversized = false;
            if self.discarding {
                if newline.is_some() {
                    self.discarding = false;
                }
            } else if self.line.len() + take > self.max_line {
                self.line.clear();
                oversized = true;
                self.discarding = newline.is_none();
            } else {
                self.line.extend_from_slice(&available[..take]);
            }
            self.read.consume(take);
            if oversized {
                return Some(Err(()));
            }
            if newline.is_some() && !self.discarding && !self.line.is_empty() {
                return Some(Ok(()));
            }
        }
    }

    fn reply(&mut self, id: Option<Value>, code: i64, message: String) {
        let body = json!({
            "jsonrpc": "2.0",
            "id": id.unwrap_or(Value::Null),
            "error": {"code": code, "message": message},
        });
        let mut bytes = serde_json::to_vec(&body).unwrap_or_default();
        bytes.push(b'\n');
        let write = self.write.clone();
        self.inflight.retain(|h| !h.is_finished());
        self.inflight.push(tokio::spawn(async move {
            let mut w = write.lock().await;
            if let Err(e) = w.write_all(&bytes).await.and(w.flush().await) {
                tracing::error!(error = %e, "writing stdout failed");
            }
        }));
    }

    /// Waits until every reply of the transport's own is written; cancellation-safe.
    async fn drain_replies(&mut self) {
        while let Some(h) = self.inflight.last_mut() {
            let _ = h.await;
            self.inflight.pop();
        }
    }

    /// Classifies a line that did not parse as a message and answers it.
    fn reject(&mut self, line: &[u8], err: &serde_json::Error) {
        let value: Value = match serde_json::from_slice(line) {
            Ok(v) => v,
            Err(e) => {
                self.reply(None, -32700, format!("parse error: {e}"));
                return;
            }
        };
        let Some(obj) = value.as_object() else {
            let what = if value.is_array() {
                "batches are not supported; send one message per line"
            } else {
                "a message must be a JSON object"
            };
            self.reply(None, -32600, format!("invalid request: {what}"));
            return;
        };
        let id = obj
            .get("id")
            .filter(|v| v.is_string() || v.is_i64() || v.is_u64())
            .cloned();
        let method = obj.get("method").and_then(Value::as_str);
        match (id, method) {
            // A notification that does not parse needs no answer.
            (None, Some(_)) if !obj.contains_key("id") => {
                tracing::debug!(error = %err, "ignoring a malformed notification");
            }
            (Some(id), Some(method)) if obj.get("jsonrpc") == Some(&json!("2.0")) => {
                self.reply(
                    Some(id),
                    -32602,
                    format!("invalid params for {method}: {err}"),
                );
            }
            (id, _) => {
                self.reply(
                    id,
                    -32600,
                    "invalid request: expected a JSON-RPC 2.0 message with `jsonrpc`, `method` and an integer or string `id`".into(),
                );
            }
        }
    }
}

fn id_json(id: &RequestId) -> Value {
    serde_json::to_value(id).unwrap_or(Value::Null)
}

impl<R, W> Transport<RoleServer> for StdioTransport<R, W>
where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let write = self.write.clone();
        async move {
            let mut bytes = serde_json::to_vec(&item).map_err(std::io::Error::other)?;
            bytes.push(b'\n');
            let mut w = write.lock().await;
            w.write_all(&bytes).await?;
            w.flush().await
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            let Some(read) = self.read_line().await else {
                self.drain_replies().await;
                return None;
            };
            if read.is_err() {
                self.reply(
                    None,
                    -32600,
                    format!("invalid request: message exceeds {} bytes", self.max_line),
                );
                continue;
            }
            let mut line: &[u8] = &self.line;
            while let [rest @ .., b'\n' | b'\r'] = line {
                line = rest;
            }
            let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
            if line.iter().all(u8::is_ascii_whitespace) {
                self.line.clear();
                continue;
            }
            let parsed = serde_json::from_slice::<ClientJsonRpcMessage>(line);
            let msg = match parsed {
                Ok(m) => m,
                Err(e) => {
                    let owned = line.to_vec();
                    self.line.clear();
                    self.reject(&owned, &e);
                    continue;
                }
            };
            self.line.clear();
            if let JsonRpcMessage::Request(r) = &msg
                && let ClientRequest::CustomRequest(c) = &r.request
            {
                // rmcp falls back to a custom request both for unknown methods and for known
                // ones whose params do not parse; tell the two apart.
                let (code, message) = if MCP_METHODS.contains(&c.method.as_str()) {
                    (
                        -32602,
                        format!(
                            "invalid params for {}: the params do not match the method's schema",
                            c.method
                        ),
                    )
                } else {
                    (-32601, format!("method not found: {}", c.method))
                };
                self.reply(Some(id_json(&r.id)), code, message);
                continue;
            }
            return Some(msg);
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.write.lock().await.flush().await
    }
}
