//! The proxy's end of a downstream server's stdio: newline-delimited JSON-RPC to the child's
//! stdin and from its stdout, as the rmcp client's transport.
//!
//! rmcp's own transport answers every line it cannot parse, which a downstream that writes
//! garbage echoes back, forever. This one never answers a downstream:
//! - a line that is not a message is counted and dropped; [`MAX_GARBAGE_LINES`] of them in a
//!   row mean the downstream is broken, and the transport closes, so its supervisor stops and
//!   restarts it with backoff;
//! - a line that is JSON and carries the id of a request in flight, but is not a valid
//!   answer (say, a non-object `result`), becomes a `DOWNSTREAM_FAILED` error for that request;
//! - a line over the size limit is not buffered; when its head or tail names a request in
//!   flight, that request fails with `RESULT_TOO_LARGE` naming the limit, otherwise the
//!   downstream is treated as broken as above.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use rmcp::RoleClient;
use rmcp::model::{ErrorCode, ErrorData, JsonRpcError, JsonRpcMessage, RequestId};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{ChildStdin, ChildStdout};

/// Lines that are not messages, in a row, after which a downstream is given up on.
pub const MAX_GARBAGE_LINES: usize = 100;

/// How much of the start and end of an oversized line is kept to find its id.
const KEEP: usize = 4096;

/// The `data.code` of the errors this transport makes up for a request.
pub const TOO_LARGE: &str = "RESULT_TOO_LARGE";
pub const MALFORMED: &str = "DOWNSTREAM_FAILED";

/// One downstream's stdio as an rmcp client transport.
pub struct Downlink {
    name: String,
    read: BufReader<ChildStdout>,
    write: Arc<tokio::sync::Mutex<ChildStdin>>,
    max_line: usize,
    /// Ids of the requests sent and not yet answered, as JSON text.
    pending: Arc<Mutex<HashSet<String>>>,
    garbage: usize,
}

/// Whether `text` is a JSON object whose `jsonrpc` member is `"2.0"`. Malformed JSON passes,
/// so that the parser below names what is wrong with it.
fn is_json_rpc_2(text: &[u8]) -> bool {
    #[derive(serde::Deserialize)]
    struct Version<'a> {
        #[serde(borrow, default)]
        jsonrpc: Option<std::borrow::Cow<'a, str>>,
    }
    match serde_json::from_slice::<Version<'_>>(text) {
        Ok(v) => v.jsonrpc.as_deref() == Some("2.0"),
        Err(_) => true,
    }
}

/// A line as read: whole, or only its head and tail when it was over the limit.
enum Line {
    Whole(Vec<u8>),
    Oversized { head: Vec<u8>, tail: Vec<u8> },
}

impl Downlink {
    /// A transport for the downstream `name`; lines over `max_line` bytes are not buffered.
    pub fn new(name: &str, stdout: ChildStdout, stdin: ChildStdin, max_line: usize) -> Downlink {
        Downlink {
            name: name.to_string(),
            read: BufReader::with_capacity(64 * 1024, stdout),
            write: Arc::new(tokio::sync::Mutex::new(stdin)),
            max_line,
            pending: Arc::default(),
            garbage: 0,
        }
    }

    /// The next line, or `None` at end of output.
    async fn line(&mut self) -> Option<Line> {
        let mut line = Vec::new();
        let mut tail: Vec<u8> = Vec::new();
        let mut over = false;
        loop {
            let available = match self.read.fill_buf().await {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!(downstream = %self.name, error = %e, "reading the downstream failed");
                    return None;
                }
            };
            if available.is_empty() {
                return (!line.is_empty() && !over).then_some(Line::Whole(line));
            }
            let newline = available.iter().position(|b| *b == b'\n');
            let take = newline.map_or(available.len(), |i| i + 1);
            let chunk = &available[..take];
            if !over && line.len() + take > self.max_line {
                over = true;
                line.truncate(KEEP);
            }
            if over {
                tail.extend_from_slice(chunk);
                if tail.len() > KEEP {
                    tail.drain(..tail.len() - KEEP);
                }
            } else {
                line.extend_from_slice(chunk);
            }
            self.read.consume(take);
            if newline.is_some() {
                return Some(if over {
                    Line::Oversized { head: line, tail }
                } else {
                    Line::Whole(line)
                });
            }
        }
    }

    /// The pending request whose id appears as `"id":ID` in `text`, if one does.
    fn pending_in(&self, text: &[u8]) -> Option<RequestId> {
        let text = String::from_utf8_lossy(text);
        let compact: String = text.chars().filter(|c| !c.is_whitespace()).collect();
        let pending = self
            .pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        pending
            .iter()
            .find(|id| compact.contains(&format!("\"id\":{id}")))
            .and_then(|id| serde_json::from_str(id).ok())
    }

    /// The ids of the requests sent and not answered yet.
    fn pending(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A made-up error answer to request `id`, so that its caller learns what happened.
    fn fail(
        &self,
        id: RequestId,
        code: &str,
        message: String,
        extra: Value,
    ) -> RxJsonRpcMessage<RoleClient> {
        self.answered(&id);
        let mut data = json!({"code": code, "downstream": self.name});
        if let (Value::Object(d), Value::Object(x)) = (&mut data, extra) {
            d.extend(x);
        }
        JsonRpcMessage::Error(JsonRpcError {
            jsonrpc: Default::default(),
            id: Some(id),
            error: ErrorData::new(ErrorCode::INTERNAL_ERROR, message, Some(data)),
        })
    }

    fn answered(&self, id: &RequestId) {
        let key = serde_json::to_string(id).unwrap_or_default();
        self.pending().remove(&key);
    }

    /// Counts a line that is not a message; false once the downstream is given up on.
    fn garbage(&mut self, what: &str) -> bool {
        self.garbage += 1;
        if self.garbage == 1 {
            tracing::warn!(downstream = %self.name, "the downstream server wrote {what}; ignoring it");
        }
        if self.garbage >= MAX_GARBAGE_LINES {
            tracing::error!(downstream = %self.name, lines = self.garbage, "the downstream server keeps writing lines that are not MCP messages; restarting it");
            return false;
        }
        true
    }
}

impl Transport<RoleClient> for Downlink {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        if let JsonRpcMessage::Request(r) = &item {
            let key = serde_json::to_string(&r.id).unwrap_or_default();
            self.pending().insert(key);
        }
        let write = self.write.clone();
        async move {
            let mut bytes = serde_json::to_vec(&item).map_err(std::io::Error::other)?;
            bytes.push(b'\n');
            let mut w = write.lock().await;
            w.write_all(&bytes).await?;
            w.flush().await
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        loop {
            let bytes = match self.line().await? {
                Line::Whole(b) => b,
                Line::Oversized { head, tail } => {
                    let found = self.pending_in(&head).or_else(|| self.pending_in(&tail));
                    let Some(id) = found else {
                        if self.garbage("a message over the size limit that answers no request") {
                            continue;
                        }
                        return None;
                    };
                    let limit = self.max_line;
                    tracing::warn!(downstream = %self.name, limit, "a downstream answer is over the size limit");
                    return Some(self.fail(
                        id,
                        TOO_LARGE,
                        format!("the answer of the downstream server `{}` is over {limit} bytes (MCPSPEC_MAX_RESULT_BYTES); ask for less", self.name),
                        json!({"limit": limit}),
                    ));
                }
            };
            let text = bytes.trim_ascii();
            if text.is_empty() {
                continue;
            }
            // rmcp reads a message without `"jsonrpc": "2.0"` as one; such a line is not
            // JSON-RPC 2.0 and is dropped like any other that is not a message, never taken as
            // the answer to a request.
            if !is_json_rpc_2(text) {
                if !self.garbage("a line that is not JSON-RPC 2.0") {
                    return None;
                }
                continue;
            }
            match serde_json::from_slice::<RxJsonRpcMessage<RoleClient>>(text) {
                Ok(msg) => {
                    self.garbage = 0;
                    match &msg {
                        JsonRpcMessage::Response(r) => self.answered(&r.id),
                        JsonRpcMessage::Error(e) => {
                            if let Some(id) = &e.id {
                                self.answered(id);
                            }
                        }
                        _ => {}
                    }
                    return Some(msg);
                }
                Err(e) => {
                    // JSON with the id of a request in flight answers it, badly: fail that
                    // request rather than leave it waiting for the timeout.
                    let id = serde_json::from_slice::<Value>(text)
                        .ok()
                        .and_then(|v| v.get("id").cloned())
                        .and_then(|id| serde_json::to_string(&id).ok())
                        .filter(|key| self.pending().contains(key))
                        .and_then(|key| serde_json::from_str::<RequestId>(&key).ok());
                    if let Some(id) = id {
                        tracing::warn!(downstream = %self.name, error = %e, "the downstream server answered with a malformed message");
                        return Some(self.fail(
                            id,
                            MALFORMED,
                            format!("the downstream server `{}` answered with a message that is not valid MCP", self.name),
                            json!({}),
                        ));
                    }
                    if !self.garbage("a line that is not an MCP message") {
                        return None;
                    }
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.write.lock().await.shutdown().await
    }
}
