//! The bench's driver of a server over stdio, built for measuring on the test kit's client:
//! requests are queued and written together, so that several can be in flight, and every
//! response is matched by id. It speaks newline-delimited JSON-RPC, as every stdio MCP server
//! does.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use std::process::Command;

use anyhow::{Context, Result, bail};
use mcpspec_testkit::StdioClient;
use serde_json::{Value, json};

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

/// A running server spoken to through the test kit's stdio client: requests are queued and
/// written together when flushed, so that several can be in flight, and every response is
/// matched by id.
pub struct Server {
    client: StdioClient,
    /// Requests queued and not yet written.
    queued: Vec<u8>,
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
            .envs(launch.env.iter().map(|(k, v)| (k, v)));
        cmd.stderr(match &launch.log {
            Some(p) => Stdio::from(open_log(p)?),
            None => Stdio::null(),
        });
        let spawned = Instant::now();
        let client =
            StdioClient::spawn(&mut cmd).with_context(|| format!("starting {}", launch.program))?;
        let pid = client.pid();
        Ok(Server {
            client,
            queued: Vec::with_capacity(64 * 1024),
            next_id: 1,
            pid,
            spawned,
        })
    }

    /// Queues one request without writing it; returns its id.
    pub fn send(&mut self, method: &str, params: Value) -> Result<u64> {
        let id = self.next_id;
        self.next_id += 1;
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.queue(&msg)?;
        Ok(id)
    }

    /// Queues one notification without writing it.
    pub fn notify(&mut self, method: &str, params: Value) -> Result<()> {
        let msg = json!({"jsonrpc": "2.0", "method": method, "params": params});
        self.queue(&msg)
    }

    fn queue(&mut self, msg: &Value) -> Result<()> {
        serde_json::to_writer(&mut self.queued, msg)?;
        self.queued.push(b'\n');
        Ok(())
    }

    /// Writes every queued message, in one write.
    pub fn flush(&mut self) -> Result<()> {
        if !self.queued.is_empty() {
            self.client
                .send_bytes(&self.queued)
                .context("writing to the server")?;
            self.queued.clear();
        }
        Ok(())
    }

    /// The next response (a message with an id and no method). Notifications and requests
    /// from the server are skipped; none of the contenders sends any that need an answer here.
    pub fn recv(&mut self) -> Result<Response> {
        loop {
            let line = self
                .client
                .recv_line(RESPONSE_TIMEOUT)
                .context("reading from the server")?;
            let at = Instant::now();
            if line.trim().is_empty() {
                continue;
            }
            let value: Value = serde_json::from_str(&line).with_context(|| {
                format!("the server wrote a line that is not JSON: {}", line.trim())
            })?;
            if value.get("method").is_some() {
                continue;
            }
            let Some(id) = value.get("id").and_then(Value::as_u64) else {
                bail!("a response without a numeric id: {}", line.trim());
            };
            return Ok(Response {
                id,
                at,
                bytes: line.len() + 1,
                value,
            });
        }
    }

    /// Sends a request and waits for its response.
    pub fn request(&mut self, method: &str, params: Value) -> Result<Response> {
        let id = self.send(method, params)?;
        self.flush()?;
        let r = self.recv()?;
        if r.id != id {
            bail!("expected the response to request {id}, got {}", r.id);
        }
        Ok(r)
    }

    /// The `initialize` request, without the `initialized` notification that follows it.
    pub fn initialize(&mut self) -> Result<Response> {
        let r = self.request(
            "initialize",
            json!({
                "protocolVersion": PROTOCOL_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "mcpbench", "version": env!("CARGO_PKG_VERSION")}
            }),
        )?;
        if r.value.get("result").is_none() {
            bail!("initialize failed: {}", r.value);
        }
        Ok(r)
    }

    /// The full handshake: `initialize`, then `notifications/initialized`.
    pub fn handshake(&mut self) -> Result<Response> {
        let r = self.initialize()?;
        self.notify("notifications/initialized", json!({}))?;
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
    pub fn close(mut self, grace: Duration) {
        let _ = self.flush();
        let _ = self.client.finish(grace);
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

/// CPU time the live threads of process `pid` have used so far, in milliseconds to the
/// nanosecond (each thread's `/proc/PID/task/TID/schedstat`), where [`proc_cpu_ms`] counts
/// whole clock ticks of 10 ms: a measurement of a second of CPU is within 1 % there, exact
/// here. A thread that ended is not counted, so the difference of two readings is the CPU of
/// the window between them only when no thread ended in it: [`cpu_between`] checks that.
pub fn threads_cpu_ms(pid: u32) -> Option<f64> {
    let mut ns = 0u64;
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).ok()? {
        let stat = std::fs::read_to_string(task.ok()?.path().join("schedstat")).ok()?;
        ns += stat.split_whitespace().next()?.parse::<u64>().ok()?;
    }
    Some(ns as f64 / 1e6)
}

/// Both readings of process `pid`'s CPU, to be taken before and after a window.
#[derive(Debug, Clone, Copy)]
pub struct CpuReading {
    ticks_ms: f64,
    threads_ms: f64,
}

impl CpuReading {
    pub fn of(pid: u32) -> Result<CpuReading> {
        Ok(CpuReading {
            ticks_ms: proc_cpu_ms(pid).context("the process's CPU time (/proc/PID/stat)")?,
            threads_ms: threads_cpu_ms(pid).context("its threads' CPU time (schedstat)")?,
        })
    }
}

/// The CPU milliseconds process `pid` used between two readings, exact (its threads'); an
/// error when the whole process's count in clock ticks disagrees by more than two ticks and
/// a percent (a thread ended in the window, and the exact figure would leave its time out).
pub fn cpu_between(before: CpuReading, after: CpuReading) -> Result<f64> {
    let exact = after.threads_ms - before.threads_ms;
    let ticks = after.ticks_ms - before.ticks_ms;
    if (exact - ticks).abs() > 20.0 + exact * 0.01 {
        bail!(
            "the server's threads used {exact:.1} ms of CPU but the process {ticks:.0} ms: a thread ended while measuring"
        );
    }
    Ok(exact)
}
