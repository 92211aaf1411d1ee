//! Throughput for teams: N concurrent clients, each its own Streamable HTTP session on its own
//! kept-alive connection, calling `get_learning` by primary key as fast as answers come back
//! (request, blocking read, next request), for a fixed time at each client count.
//!
//! The server under test is started by this module with `{port}` and `{db}` in its command
//! replaced, and `BENCH_DB` set. Each level reports calls per second over the whole level, the
//! median and p99 latency of every call in it, and the server's CPU time per call (from
//! `/proc/PID/stat`), so a contender that burns more CPU for the same throughput shows it.
//!
//! The clients keep their own cost low and equal for every contender: the request body is
//! written from a pre-serialised `params` text, and an answer is checked by its bytes (a
//! `result` that is not `isError`) after the first answer of each session was parsed whole.

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail, ensure};
use mcpspec_testkit::HttpClient;
use serde_json::{Value, json};

use crate::client::proc_cpu_ms;
use crate::stats::Summary;
use crate::workload::{Dialect, Kind, Workload};

/// What one run measures.
pub struct Plan {
    /// Client counts, one level each, in order.
    pub clients: Vec<usize>,
    /// How long each level calls.
    pub seconds: f64,
    /// Calls each session makes before the level's clock starts.
    pub warmup_calls: usize,
    /// Requests of protocol 2026-07-28: no session, each carrying its version and the
    /// client's capabilities and name in `_meta` and the SEP-2243 headers, as clients of that
    /// revision send them.
    pub per_request: bool,
    /// Calls per second each server is sent, spread evenly over its clients (each waits for
    /// its turn before a call); `None` calls as fast as the answers come.
    pub rate: Option<f64>,
}

/// The server process, killed when dropped.
struct Served {
    child: Child,
    addr: SocketAddr,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A free loopback port: bound, read, released.
fn free_port() -> Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?.port())
}

/// Starts `program args` with `{port}` and `{db}` replaced and waits until a session can be
/// initialised on it (polling, for at most 20 s).
fn serve(
    program: &str,
    args: &[String],
    db: &str,
    log: Option<&std::path::Path>,
) -> Result<Served> {
    let port = free_port()?;
    let args: Vec<String> = args
        .iter()
        .map(|a| a.replace("{port}", &port.to_string()).replace("{db}", db))
        .collect();
    let stderr = match log {
        Some(p) => Stdio::from(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)
                .with_context(|| format!("opening {}", p.display()))?,
        ),
        None => Stdio::null(),
    };
    let child = Command::new(program)
        .args(&args)
        .env("BENCH_DB", db)
        .env("MCPSPEC_LOG", "warn")
        .env_remove("MCPSPEC_HTTP_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .with_context(|| format!("starting {program}"))?;
    let mut served = Served {
        child,
        addr: SocketAddr::from(([127, 0, 0, 1], port)),
    };
    let start = Instant::now();
    loop {
        if let Some(status) = served.child.try_wait()? {
            bail!("the server exited before listening: {status}");
        }
        if HttpClient::new(served.addr, token().as_deref())
            .initialize()
            .is_ok()
        {
            return Ok(served);
        }
        ensure!(
            start.elapsed() < Duration::from_secs(20),
            "the server did not answer initialize on {} within 20 s",
            served.addr
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The bearer token every request carries: `MCPBENCH_HTTP_TOKEN` (a static token, or an OAuth
/// access token when the server checks those), none when unset.
fn token() -> Option<String> {
    std::env::var("MCPBENCH_HTTP_TOKEN")
        .ok()
        .filter(|t| !t.is_empty())
}

/// Whether an answer's bytes hold a successful tool result (JSON or one SSE event).
fn succeeded(body: &[u8]) -> bool {
    let has = |needle: &[u8]| body.windows(needle.len()).any(|w| w == needle);
    has(b"\"result\"") && !has(b"\"isError\":true")
}

/// One session's calls in one level.
struct Session {
    client: HttpClient,
    /// Pre-serialised `params` of the calls, used in turn.
    params: Vec<String>,
    next: usize,
    id: u64,
    /// The tool's name, for the `Mcp-Name` header of a request of 2026-07-28; `None` in a
    /// session.
    per_request: Option<String>,
}

/// `params` with the `_meta` a request of 2026-07-28 carries, and the tool it names.
fn per_request_params(params: &Value) -> (String, String) {
    let mut p = params.clone();
    p["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "mcpbench", "version": "1"}
    });
    let name = p["name"].as_str().unwrap_or_default().to_string();
    (p.to_string(), name)
}

impl Session {
    fn open(
        addr: SocketAddr,
        index: usize,
        rows: usize,
        dialect: Dialect,
        per_request: bool,
    ) -> Result<Session> {
        let mut client = HttpClient::new(addr, token().as_deref());
        if !per_request {
            client.initialize()?;
        }
        let mut w = Workload::new(Kind::Pk, dialect, rows);
        // Sessions start at different points of the same sequence.
        for _ in 0..index * 37 {
            w.next_params();
        }
        let mut name = None;
        let params = (0..256)
            .map(|_| {
                let p = w.next_params();
                if per_request {
                    let (text, tool) = per_request_params(&p);
                    name = Some(tool);
                    text
                } else {
                    p.to_string()
                }
            })
            .collect();
        let mut s = Session {
            client,
            params,
            next: 0,
            id: 0,
            per_request: name,
        };
        let first = s.call_bytes()?;
        let answer: Vec<Value> = first.messages();
        let result = answer
            .iter()
            .find_map(|m| m.get("result"))
            .ok_or_else(|| anyhow!("the first call got no result: {}", first.text()))?;
        ensure!(
            result.get("isError") != Some(&json!(true)) && result["content"].is_array(),
            "the first call failed: {result}"
        );
        Ok(s)
    }

    fn call_bytes(&mut self) -> Result<mcpspec_testkit::HttpResponse> {
        self.id += 1;
        let params = &self.params[self.next % self.params.len()];
        self.next += 1;
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":{},"method":"tools/call","params":{params}}}"#,
            self.id
        );
        let r = match &self.per_request {
            Some(name) => self.client.exchange(
                "POST",
                &[
                    ("MCP-Protocol-Version", "2026-07-28"),
                    ("Mcp-Method", "tools/call"),
                    ("Mcp-Name", name),
                ],
                body.as_bytes(),
            )?,
            None => self.client.exchange("POST", &[], body.as_bytes())?,
        };
        ensure!(r.status == 200, "HTTP {}: {}", r.status, r.text());
        Ok(r)
    }

    /// One checked call and its latency in microseconds.
    fn call(&mut self) -> Result<f64> {
        let t = Instant::now();
        let r = self.call_bytes()?;
        let us = t.elapsed().as_secs_f64() * 1e6;
        ensure!(succeeded(&r.body), "a call failed: {}", r.text());
        Ok(us)
    }
}

/// What one client thread brings back: the server it called, its latencies, when it ended.
type ClientRun = (usize, Vec<f64>, Instant);

/// One level: `n` sessions on each server calling for `seconds` (as fast as they are answered,
/// or paced at the plan's rate), all servers at once; returns each server's figures, in the
/// order of `served`.
fn level(
    served: &[Served],
    n: usize,
    rows: usize,
    dialect: Dialect,
    plan: &Plan,
) -> Result<Vec<Value>> {
    let barrier = Arc::new(Barrier::new(n * served.len() + 1));
    let budget = Duration::from_secs_f64(plan.seconds);
    let warmup = plan.warmup_calls;
    let per_request = plan.per_request;
    // Each client's time between calls when paced: `n` clients share the server's rate.
    let gap = plan.rate.map(|r| Duration::from_secs_f64(n as f64 / r));
    let mut workers = Vec::new();
    for (k, server) in served.iter().enumerate() {
        for i in 0..n {
            let (barrier, addr) = (barrier.clone(), server.addr);
            workers.push(std::thread::spawn(move || -> Result<ClientRun> {
                let opened =
                    Session::open(addr, i, rows, dialect, per_request).and_then(|mut s| {
                        (0..warmup).try_for_each(|_| s.call().map(drop))?;
                        Ok(s)
                    });
                barrier.wait();
                let mut s = opened?;
                let start = Instant::now();
                let mut pace = gap.map(|g| (g, start + g.mul_f64(i as f64 / n as f64)));
                let mut samples = Vec::new();
                while start.elapsed() < budget {
                    if let Some((gap, next)) = &mut pace {
                        let now = Instant::now();
                        if *next > now {
                            std::thread::sleep(*next - now);
                        }
                        *next += *gap;
                    }
                    samples.push(s.call()?);
                }
                Ok((k, samples, Instant::now()))
            }));
        }
    }
    barrier.wait();
    let start = Instant::now();
    let cpu_before: Vec<_> = served.iter().map(|s| proc_cpu_ms(s.child.id())).collect();
    let mut samples = vec![Vec::new(); served.len()];
    let mut end = vec![start; served.len()];
    for w in workers {
        let (k, s, finished) = w
            .join()
            .map_err(|_| anyhow!("a client thread panicked"))??;
        samples[k].extend(s);
        end[k] = end[k].max(finished);
    }
    let figures = served.iter().enumerate().map(|(k, server)| {
        let cpu = proc_cpu_ms(server.child.id())
            .zip(cpu_before[k])
            .map(|(a, b)| a - b);
        let elapsed = (end[k] - start).as_secs_f64();
        let calls = samples[k].len();
        let s = Summary::of(&samples[k]);
        json!({
            "clients": n,
            "calls": calls,
            "seconds": crate::stats::round(elapsed),
            "calls_per_s": (calls as f64 / elapsed).round(),
            "median_us": crate::stats::round(s.median),
            "p99_us": crate::stats::round(s.p99),
            "server_cpu_us_per_call": cpu.map(|ms| crate::stats::round(ms * 1000.0 / calls.max(1) as f64)),
        })
    });
    Ok(figures.collect())
}

/// Starts each server of `commands` and measures every level of `plan` on them, all at
/// once when there are several (side by side, so that the machine's drift touches each
/// alike). A level's figures are an object for one server, else an array in the order of
/// `commands`.
pub fn run(
    commands: &[Vec<String>],
    db: &str,
    rows: usize,
    dialect: Dialect,
    plan: &Plan,
    log: Option<&std::path::Path>,
) -> Result<Value> {
    let mut served = Vec::new();
    for command in commands {
        let Some((program, args)) = command.split_first() else {
            bail!("give the server command after --");
        };
        ensure!(
            args.iter().any(|a| a.contains("{port}")),
            "the server command must take the port as {{port}}"
        );
        served.push(serve(program, args, db, log)?);
    }
    let mut levels = serde_json::Map::new();
    for &n in &plan.clients {
        let mut figures = level(&served, n, rows, dialect, plan)
            .with_context(|| format!("{n} concurrent clients"))?;
        for f in &figures {
            eprintln!(
                "  http {n:>2} clients: {} calls/s, p99 {} µs",
                f["calls_per_s"], f["p99_us"]
            );
        }
        let figures = match figures.len() {
            1 => figures.remove(0),
            _ => Value::Array(figures),
        };
        levels.insert(n.to_string(), figures);
    }
    Ok(json!({
        "tool": "get_learning",
        "seconds_per_level": plan.seconds,
        "rate": plan.rate,
        "levels": levels,
    }))
}

#[cfg(test)]
mod tests {
    use super::succeeded;

    #[test]
    fn an_answer_is_judged_by_its_bytes() {
        assert!(succeeded(
            br#"{"jsonrpc":"2.0","id":1,"result":{"content":[]}}"#
        ));
        assert!(succeeded(
            b"event: message\ndata: {\"id\":1,\"result\":{\"isError\":false}}\n\n"
        ));
        assert!(!succeeded(br#"{"id":1,"result":{"isError":true}}"#));
        assert!(!succeeded(br#"{"id":1,"error":{"code":-32602}}"#));
    }
}
