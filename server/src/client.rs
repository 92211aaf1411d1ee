//! A minimal synchronous MCP client over a child process's stdio, used by `mcpspec demo` and
//! by the integration tests. It speaks raw JSON-RPC lines and never waits without a deadline.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// How long a response may take before the client gives up.
pub const RESPONSE_TIMEOUT: Duration = Duration::from_secs(20);

/// The protocol version the client asks for.
pub const PROTOCOL_VERSION: &str = "2025-11-25";

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("cannot start the server: {0}")]
    Spawn(std::io::Error),
    #[error("cannot write to the server: {0}")]
    Write(std::io::Error),
    #[error("the server sent no response within {0:?}")]
    Timeout(Duration),
    #[error("the server closed its output")]
    Closed,
    #[error("the server wrote a line that is not JSON: {0}")]
    NotJson(String),
}

pub struct StdioClient {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    next_id: i64,
    /// Every message the server sent that was not the awaited response, in order.
    pub other: Vec<Value>,
}

impl StdioClient {
    /// Starts `command` with piped stdin and stdout; stderr is left as the command sets it.
    pub fn spawn(command: &mut Command) -> Result<StdioClient, ClientError> {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(ClientError::Spawn)?;
        let stdout = child.stdout.take().ok_or(ClientError::Closed)?;
        let stdin = child.stdin.take();
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Ok(StdioClient {
            child,
            stdin,
            lines: rx,
            next_id: 1,
            other: Vec::new(),
        })
    }

    /// Writes one raw line (a newline is added).
    pub fn send_line(&mut self, line: &str) -> Result<(), ClientError> {
        let stdin = self.stdin.as_mut().ok_or(ClientError::Closed)?;
        stdin
            .write_all(line.as_bytes())
            .and_then(|()| stdin.write_all(b"\n"))
            .and_then(|()| stdin.flush())
            .map_err(ClientError::Write)
    }

    /// The next message the server writes.
    pub fn recv(&mut self, timeout: Duration) -> Result<Value, ClientError> {
        match self.lines.recv_timeout(timeout) {
            Ok(line) => serde_json::from_str(&line).map_err(|_| ClientError::NotJson(line)),
            Err(RecvTimeoutError::Timeout) => Err(ClientError::Timeout(timeout)),
            Err(RecvTimeoutError::Disconnected) => Err(ClientError::Closed),
        }
    }

    /// Waits for the response with `id`, keeping anything else in [`StdioClient::other`].
    pub fn recv_response(&mut self, id: &Value) -> Result<Value, ClientError> {
        let deadline = Instant::now() + RESPONSE_TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let msg = self.recv(left)?;
            if msg.get("id") == Some(id) && msg.get("method").is_none() {
                return Ok(msg);
            }
            self.other.push(msg);
        }
    }

    /// Sends a request and waits for its response (a `result` or an `error`).
    pub fn request(&mut self, method: &str, params: Value) -> Result<Value, ClientError> {
        let id = json!(self.next_id);
        self.next_id += 1;
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send_line(&msg.to_string())?;
        self.recv_response(&id)
    }

    pub fn notify(&mut self, method: &str, params: Value) -> Result<(), ClientError> {
        let msg = json!({"jsonrpc": "2.0", "method": method, "params": params});
        self.send_line(&msg.to_string())
    }

    /// The `initialize` handshake followed by `notifications/initialized`.
    pub fn initialize(&mut self) -> Result<Value, ClientError> {
        let response = self.request(
            "initialize",
            json!({
                "protocolVersion": PROTOCOL_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "mcpspec-client", "version": env!("CARGO_PKG_VERSION")}
            }),
        )?;
        self.notify("notifications/initialized", json!({}))?;
        Ok(response)
    }

    /// `tools/call`, returning the whole response message.
    pub fn call_tool(&mut self, name: &str, arguments: Value) -> Result<Value, ClientError> {
        self.request("tools/call", json!({"name": name, "arguments": arguments}))
    }

    /// Closes the server's stdin and waits for it to exit, killing it after `timeout`.
    pub fn finish(self, timeout: Duration) -> Option<ExitStatus> {
        self.finish_keep_reading(timeout).0
    }

    /// Closes the server's stdin, keeps every message it still writes (with those kept aside
    /// earlier), and waits for it to exit, killing it after `timeout`.
    pub fn finish_keep_reading(mut self, timeout: Duration) -> (Option<ExitStatus>, Vec<Value>) {
        drop(self.stdin.take());
        let deadline = Instant::now() + timeout;
        let mut messages = std::mem::take(&mut self.other);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => messages.extend(serde_json::from_str::<Value>(&line).ok()),
                Err(_) => break,
            }
        }
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => return (Some(status), messages),
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(5));
                }
                _ => {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    return (None, messages);
                }
            }
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for StdioClient {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
