//! An asynchronous MCP client over a child process's stdio, built for measuring: requests are
//! written without waiting, so that several can be in flight, and every response is matched
//! by id. It speaks newline-delimited JSON-RPC, as every stdio MCP server does.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, BufWriter};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// The protocol version the driver asks for: the one clients in use today negotiate.
pub const PROTOCOL_VERSION: &str = "2025-11-25";

/// How long any one response may take before the measurement is abandoned.
pub const RESPONSE_TIMEOUT: Duration = Duration::from_secs(60);

/// How a server process is started.
#[derive(Debug, Clone)]
pub struct Launch {
    pub program: String,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    /// Where the server's stderr goes; discarded when `None`.
    pub log: Option<std::path::PathBuf>,
}

/// A running server and the two ends of its stdio.
pub struct Server {
    child: Child,
    stdin: Option<BufWriter<ChildStdin>>,
    stdout: BufReader<ChildStdout>,
    line: String,
    next_id: u64,
    pub pid: u32,
    /// When the process was spawned, for cold-start figures.
    pub spawned: Instant,
}

impl Server {
    /// Spawns the server with piped stdin and stdout.
    pub fn spawn(launch: &Launch) -> Result<Server> {
        let mut cmd = Command::new(&launch.program);
        cmd.args(&launch.args)
            .envs(launch.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true);
        cmd.stderr(match &launch.log {
            Some(p) => Stdio::from(open_log(p)?),
            None => Stdio::null(),
        });
        let spawned = Instant::now();
        let mut child = cmd
            .spawn()
            .with_context(|| format!("starting {}", launch.program))?;
        let pid = child
            .id()
            .ok_or_else(|| anyhow!("the server exited at once"))?;
        let stdin = child.stdin.take().map(BufWriter::new);
        let stdout =
            BufReader::with_capacity(256 * 1024, child.stdout.take().context("no stdout pipe")?);
        Ok(Server {
            child,
            stdin,
            stdout,
            line: String::new(),
            next_id: 1,
            pid,
            spawned,
        })
    }

    /// Queues one request without flushing; returns its id.
    pub async fn send(&mut self, method: &str, params: Value) -> Result<u64> {
        let id = self.next_id;
        self.next_id += 1;
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.write_line(&msg).await?;
        Ok(id)
    }

    /// Queues one notification without flushing.
    pub async fn notify(&mut self, method: &str, params: Value) -> Result<()> {
        let msg = json!({"jsonrpc": "2.0", "method": method, "params": params});
        self.write_line(&msg).await
    }

    async fn write_line(&mut self, msg: &Value) -> Result<()> {
        let stdin = self.stdin.as_mut().context("stdin is closed")?;
        let mut bytes = serde_json::to_vec(msg)?;
        bytes.push(b'\n');
        stdin
            .write_all(&bytes)
            .await
            .context("writing to the server")?;
        Ok(())
    }

    pub async fn flush(&mut self) -> Result<()> {
        if let Some(s) = self.stdin.as_mut() {
            s.flush().await.context("writing to the server")?;
        }
        Ok(())
    }

    /// The next response (a message with an id and no method). Notifications and requests
    /// from the server are skipped; none of the contenders sends any that need an answer here.
    pub async fn recv(&mut self) -> Result<Response> {
        loop {
            self.line.clear();
            let n = tokio::time::timeout(RESPONSE_TIMEOUT, self.stdout.read_line(&mut self.line))
                .await
                .map_err(|_| anyhow!("no response within {RESPONSE_TIMEOUT:?}"))?
                .context("reading from the server")?;
            let at = Instant::now();
            if n == 0 {
                bail!("the server closed its output");
            }
            if self.line.trim().is_empty() {
                continue;
            }
            let value: Value = serde_json::from_str(&self.line).with_context(|| {
                format!(
                    "the server wrote a line that is not JSON: {}",
                    self.line.trim()
                )
            })?;
            if value.get("method").is_some() {
                continue;
            }
            let Some(id) = value.get("id").and_then(Value::as_u64) else {
                bail!("a response without a numeric id: {}", self.line.trim());
            };
            return Ok(Response {
                id,
                at,
                bytes: n,
                value,
            });
        }
    }

    /// Sends a request and waits for its response.
    pub async fn request(&mut self, method: &str, params: Value) -> Result<Response> {
        let id = self.send(method, params).await?;
        self.flush().await?;
        let r = self.recv().await?;
        if r.id != id {
            bail!("expected the response to request {id}, got {}", r.id);
        }
        Ok(r)
    }

    /// The `initialize` request, without the `initialized` notification that follows it.
    pub async fn initialize(&mut self) -> Result<Response> {
        let r = self
            .request(
                "initialize",
                json!({
                    "protocolVersion": PROTOCOL_VERSION,
                    "capabilities": {},
                    "clientInfo": {"name": "mcpbench", "version": env!("CARGO_PKG_VERSION")}
                }),
            )
            .await?;
        if r.value.get("result").is_none() {
            bail!("initialize failed: {}", r.value);
        }
        Ok(r)
    }

    /// The full handshake: `initialize`, then `notifications/initialized`.
    pub async fn handshake(&mut self) -> Result<Response> {
        let r = self.initialize().await?;
        self.notify("notifications/initialized", json!({})).await?;
        Ok(r)
    }

    /// The server's peak resident set size so far (VmHWM), in KiB.
    pub fn peak_rss_kib(&self) -> Option<u64> {
        proc_status_kib(self.pid, "VmHWM:")
    }

    /// CPU time the server has used so far (user plus system), in milliseconds.
    pub fn cpu_ms(&self) -> Option<f64> {
        proc_cpu_ms(self.pid)
    }

    /// Closes stdin and waits for the server to exit, killing it after `grace`.
    pub async fn close(mut self, grace: Duration) {
        if let Some(mut s) = self.stdin.take() {
            let _ = s.shutdown().await;
        }
        if tokio::time::timeout(grace, self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.kill().await;
        }
    }
}

/// One response and when it arrived.
pub struct Response {
    pub id: u64,
    pub at: Instant,
    pub bytes: usize,
    pub value: Value,
}

impl Response {
    /// Why the response is not a successful result, if it is not: a JSON-RPC error or a tool
    /// result with `isError`.
    pub fn failure(&self) -> Option<String> {
        if let Some(e) = self.value.get("error") {
            return Some(e.to_string());
        }
        match self.value.get("result") {
            Some(r) if r.get("isError") == Some(&Value::Bool(true)) => Some(r.to_string()),
            Some(_) => None,
            None => Some(format!("neither result nor error: {}", self.value)),
        }
    }
}

fn open_log(path: &Path) -> Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("opening {}", path.display()))
}

/// A `Vm…:` figure from /proc/PID/status, in KiB.
pub fn proc_status_kib(pid: u32, key: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find(|l| l.starts_with(key))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// CPU time process `pid` has used so far (user plus system), in milliseconds.
pub fn proc_cpu_ms(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name, which is in parentheses and may contain spaces.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    // Clock ticks are 100 per second on Linux for every architecture this runs on.
    Some((utime + stime) * 10.0)
}
