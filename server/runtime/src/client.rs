//! A minimal synchronous MCP client over a child process's stdio, speaking raw JSON-RPC lines:
//! [`StdioClient`], used by `mcpspec demo` and, through the `mcpspec-testkit` crate, by the
//! integration tests and the bench's synchronous measurements. It reads on the caller's thread
//! and never waits without a deadline.

use std::io::Write;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// How long a response may take before the client gives up.
pub const RESPONSE_TIMEOUT: Duration = Duration::from_secs(20);

/// The protocol version the client asks for.
pub const PROTOCOL_VERSION: &str = "2025-11-25";

/// The protocol version whose requests each carry it, with no session.
pub const PER_REQUEST_VERSION: &str = "2026-07-28";

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
    #[error("HTTP exchange failed: {0}")]
    Io(std::io::Error),
    #[error("malformed HTTP response: {0}")]
    BadResponse(String),
    #[error("HTTP {status}: {body}")]
    Status { status: u16, body: String },
}

pub struct StdioClient {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: Lines,
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
        Ok(StdioClient {
            child,
            stdin,
            stdout: Lines::new(stdout),
            next_id: 1,
            other: Vec::new(),
        })
    }

    /// Writes one raw line (a newline is added), in one write.
    pub fn send_line(&mut self, line: &str) -> Result<(), ClientError> {
        let mut bytes = Vec::with_capacity(line.len() + 1);
        bytes.extend_from_slice(line.as_bytes());
        bytes.push(b'\n');
        self.send_bytes(&bytes)
    }

    /// Writes bytes as they are: no newline is added.
    pub fn send_bytes(&mut self, bytes: &[u8]) -> Result<(), ClientError> {
        let stdin = self.stdin.as_mut().ok_or(ClientError::Closed)?;
        stdin
            .write_all(bytes)
            .and_then(|()| stdin.flush())
            .map_err(ClientError::Write)
    }

    /// The next line the server writes, without its newline, read on this thread: what a
    /// synchronous client does after each request.
    pub fn recv_line(&mut self, timeout: Duration) -> Result<String, ClientError> {
        self.stdout.next(Instant::now() + timeout)
    }

    /// Writes `bytes` (a request with its newline) and blocks until the next line comes back;
    /// how long that took. For measuring a synchronous client's round trip.
    pub fn round_trip(&mut self, bytes: &[u8]) -> Result<(Duration, String), ClientError> {
        let t0 = Instant::now();
        self.send_bytes(bytes)?;
        let line = self.recv_line(RESPONSE_TIMEOUT)?;
        Ok((t0.elapsed(), line))
    }

    /// The next message the server writes.
    pub fn recv(&mut self, timeout: Duration) -> Result<Value, ClientError> {
        let line = self.recv_line(timeout)?;
        serde_json::from_str(&line).map_err(|_| ClientError::NotJson(line))
    }

    /// The response with `id`: one kept aside earlier (it came while another response was
    /// awaited), else the next one to arrive. Anything else is kept in [`StdioClient::other`].
    pub fn recv_response(&mut self, id: &Value) -> Result<Value, ClientError> {
        let is_response = |msg: &Value| msg.get("id") == Some(id) && msg.get("method").is_none();
        if let Some(at) = self.other.iter().position(is_response) {
            return Ok(self.other.remove(at));
        }
        let deadline = Instant::now() + RESPONSE_TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let msg = self.recv(left)?;
            if is_response(&msg) {
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
        while let Ok(line) = self.stdout.next(deadline) {
            messages.extend(serde_json::from_str::<Value>(&line).ok());
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

    /// The server's stderr, when the command piped it.
    pub fn take_stderr(&mut self) -> Option<std::process::ChildStderr> {
        self.child.stderr.take()
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

/// The lines of a child's stdout, read on the caller's thread: on Unix, poll(2) bounds each
/// wait by the deadline, and the bytes are read as they come (a synchronous client's blocking
/// read); elsewhere a reading thread hands lines over a channel.
struct Lines {
    #[cfg(unix)]
    stdout: std::process::ChildStdout,
    /// Bytes read and not yet returned as a line.
    #[cfg(unix)]
    pending: Vec<u8>,
    #[cfg(not(unix))]
    lines: std::sync::mpsc::Receiver<String>,
}

impl Lines {
    #[cfg(unix)]
    fn new(stdout: std::process::ChildStdout) -> Lines {
        Lines {
            stdout,
            pending: Vec::with_capacity(64 * 1024),
        }
    }

    /// The next line, without its newline, by `deadline`.
    #[cfg(unix)]
    fn next(&mut self, deadline: Instant) -> Result<String, ClientError> {
        use rustix::event::{PollFd, PollFlags, Timespec, poll};
        use std::io::Read;
        let mut from = 0;
        loop {
            if let Some(at) = memchr::memchr(b'\n', &self.pending[from..]) {
                let line: Vec<u8> = self.pending.drain(..=from + at).collect();
                let line = &line[..line.len() - 1];
                return Ok(String::from_utf8_lossy(line).into_owned());
            }
            from = self.pending.len();
            let left = deadline.saturating_duration_since(Instant::now());
            let timeout = Timespec::try_from(left).unwrap_or(Timespec {
                tv_sec: 0,
                tv_nsec: 0,
            });
            let mut fds = [PollFd::new(&self.stdout, PollFlags::IN)];
            match poll(&mut fds, Some(&timeout)) {
                Ok(0) => return Err(ClientError::Timeout(left)),
                Ok(_) => {}
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(ClientError::Io(e.into())),
            }
            let mut chunk = [0u8; 64 * 1024];
            match self.stdout.read(&mut chunk) {
                Ok(0) => return Err(ClientError::Closed),
                Ok(n) => self.pending.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return Err(ClientError::Closed),
            }
        }
    }

    #[cfg(not(unix))]
    fn new(stdout: std::process::ChildStdout) -> Lines {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Lines { lines: rx }
    }

    #[cfg(not(unix))]
    fn next(&mut self, deadline: Instant) -> Result<String, ClientError> {
        use std::sync::mpsc::RecvTimeoutError;
        let left = deadline.saturating_duration_since(Instant::now());
        match self.lines.recv_timeout(left) {
            Ok(line) => Ok(line),
            Err(RecvTimeoutError::Timeout) => Err(ClientError::Timeout(left)),
            Err(RecvTimeoutError::Disconnected) => Err(ClientError::Closed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    #[test]
    fn a_response_kept_aside_is_the_one_returned_when_awaited_later() {
        // The server answers request 2 before request 1: awaiting 1 keeps 2 aside, and
        // awaiting 2 then returns it at once instead of waiting for a second copy.
        let mut c = StdioClient::spawn(Command::new("sh").args([
            "-c",
            r#"printf '%s\n' '{"jsonrpc":"2.0","id":2,"result":{"n":2}}' '{"jsonrpc":"2.0","id":1,"result":{"n":1}}'; cat >/dev/null"#,
        ]))
        .unwrap();
        assert_eq!(c.recv_response(&json!(1)).unwrap()["result"]["n"], 1);
        assert_eq!(c.other.len(), 1);
        assert_eq!(c.recv_response(&json!(2)).unwrap()["result"]["n"], 2);
        assert!(c.other.is_empty());
        assert!(
            c.finish(Duration::from_secs(5))
                .is_some_and(|s| s.success())
        );
    }

    #[test]
    fn a_line_written_in_pieces_is_read_whole_and_a_silent_server_times_out() {
        // Half a line, a pause, the rest and a second line in one write; then nothing.
        let mut c = StdioClient::spawn(Command::new("sh").args([
            "-c",
            r#"printf '{"a":'; sleep 0.2; printf '1}\n{"b":2}\n'; exec sleep 5"#,
        ]))
        .unwrap();
        assert_eq!(c.recv(Duration::from_secs(5)).unwrap(), json!({"a": 1}));
        assert_eq!(c.recv(Duration::from_secs(5)).unwrap(), json!({"b": 2}));
        let t0 = Instant::now();
        assert!(matches!(
            c.recv(Duration::from_millis(100)),
            Err(ClientError::Timeout(_))
        ));
        assert!(t0.elapsed() < Duration::from_secs(4));
    }
}
