//! `mcpbench workbench`: what the workbench (`serve --ui`, issue 60) costs the server per call.
//! studio over stdio on a database of `rows` learnings, a synchronous client (request, blocking
//! read, next request) calling `get_learning` by primary key, and the server's CPU time per
//! call (all its threads, to the nanosecond: each thread's schedstat) five ways: without `--ui`
//! twice (the second is the floor: what two identical servers differ by), with `--ui` and no
//! page open (nothing kept), with `--ui --ui-history` and no page open (every call kept for a
//! page to come), and with `--ui` and a page open (a reader of `/ui/events` that takes every
//! call's event, as the page does).
//!
//! Each round starts the five servers side by side and calls them in turn, a block of
//! [`BLOCK`] calls to each (its caches warm after the first few), the order of the five
//! rotating from block to block: what the shared machine does meanwhile (another tenant, a
//! clock change) falls on the five alike, where servers measured one after another met it
//! each at another moment (their floor was ±5-10 % a round). A variant's ratio is taken
//! against `off` of its own round; the report gives the medians over rounds.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use mcpspec_testkit::StdioClient;
use serde_json::{Value, json};

use crate::client::{CpuReading, cpu_between};
use crate::stats::{median, round};

/// A way to serve: the flags given to `serve`, and whether a page reads `/ui/events`.
struct Variant {
    name: &'static str,
    flags: &'static [&'static str],
    page: bool,
}

/// The workbench on a free loopback port.
const UI: &[&str] = &["--ui", "127.0.0.1:0"];

/// The variants, in the order of the first round.
const VARIANTS: [Variant; 5] = [
    Variant {
        name: "off",
        flags: &[],
        page: false,
    },
    Variant {
        name: "off again",
        flags: &[],
        page: false,
    },
    Variant {
        name: "ui, no page",
        flags: UI,
        page: false,
    },
    Variant {
        name: "ui-history, no page",
        flags: &["--ui", "127.0.0.1:0", "--ui-history"],
        page: false,
    },
    Variant {
        name: "ui, a page open",
        flags: UI,
        page: true,
    },
];

/// One server's figures in one round.
struct Figures {
    cpu_us_per_call: f64,
    wall_us_per_call: f64,
    /// Bytes of events the page read (0 without one).
    page_bytes: u64,
}

/// How many calls a server answers in a row before the next server's turn.
const BLOCK: usize = 1000;

/// Measures every variant in `rounds` rounds of `calls` calls each (after a warm-up of a
/// tenth as many); the result as JSON.
pub fn run(mcpspec: &Path, db: &Path, rows: usize, calls: usize, rounds: usize) -> Result<Value> {
    let mut all: Vec<Vec<Figures>> = (0..VARIANTS.len()).map(|_| Vec::new()).collect();
    for r in 0..rounds {
        eprintln!("workbench: round {} of {rounds}", r + 1);
        for (v, figures) in one_round(mcpspec, db, rows, calls)?.into_iter().enumerate() {
            all[v].push(figures);
        }
    }
    let floor: Vec<f64> = all[0].iter().map(|f| f.cpu_us_per_call).collect();
    let mut table = Vec::new();
    for (v, figures) in all.iter().enumerate() {
        let mut cpu: Vec<f64> = figures.iter().map(|f| f.cpu_us_per_call).collect();
        let mut wall: Vec<f64> = figures.iter().map(|f| f.wall_us_per_call).collect();
        let mut ratio: Vec<f64> = cpu.iter().zip(&floor).map(|(c, o)| c / o).collect();
        cpu.sort_by(f64::total_cmp);
        wall.sort_by(f64::total_cmp);
        ratio.sort_by(f64::total_cmp);
        table.push(json!({
            "variant": VARIANTS[v].name,
            "server_cpu_us_per_call": round(median(&cpu)),
            "wall_us_per_call": round(median(&wall)),
            "ratio_to_off": median(&ratio),
            "ratio_range": [ratio[0], ratio[ratio.len() - 1]],
            "page_bytes": figures.iter().map(|f| f.page_bytes).sum::<u64>(),
        }));
    }
    Ok(json!({"rows": rows, "calls": calls, "rounds": rounds, "block": BLOCK, "variants": table}))
}

/// One round: a server of each variant, started, warmed up, measured side by side (see the
/// module's note), stopped.
fn one_round(mcpspec: &Path, db: &Path, rows: usize, calls: usize) -> Result<Vec<Figures>> {
    let mut servers = (0..VARIANTS.len())
        .map(|v| Served::start(mcpspec, db, v))
        .collect::<Result<Vec<_>>>()?;
    for server in &mut servers {
        for i in 0..calls / 10 {
            server.call(i, rows)?;
        }
    }
    let before = servers
        .iter()
        .map(|s| CpuReading::of(s.client.pid()))
        .collect::<Result<Vec<_>>>()?;
    let mut wall = vec![0.0f64; servers.len()];
    let blocks = calls.div_ceil(BLOCK);
    for b in 0..blocks {
        for k in 0..servers.len() {
            let v = (k + b) % servers.len();
            let started = Instant::now();
            for i in b * BLOCK..((b + 1) * BLOCK).min(calls) {
                servers[v].call(i, rows)?;
            }
            wall[v] += started.elapsed().as_secs_f64();
        }
    }
    let mut figures = Vec::new();
    for ((server, before), wall) in servers.into_iter().zip(before).zip(wall) {
        let after = CpuReading::of(server.client.pid())?;
        let cpu_ms = cpu_between(before, after)?;
        figures.push(Figures {
            cpu_us_per_call: cpu_ms * 1000.0 / calls as f64,
            wall_us_per_call: wall * 1e6 / calls as f64,
            page_bytes: server.read.load(Ordering::Relaxed),
        });
        // Stopped as a client stops it (stdin closed), so that a profiler around it can write.
        server.client.finish(std::time::Duration::from_secs(120));
    }
    Ok(figures)
}

/// A server of one variant, initialised, with its page open when the variant has one.
struct Served {
    client: StdioClient,
    /// Bytes of events its page read.
    read: Arc<AtomicU64>,
}

impl Served {
    fn start(mcpspec: &Path, db: &Path, v: usize) -> Result<Served> {
        let variant = &VARIANTS[v];
        let ui = !variant.flags.is_empty();
        let mut command = Command::new(mcpspec);
        command
            .args(["serve", "studio", "--db"])
            .arg(db)
            .args(variant.flags)
            .env("MCPSPEC_LOG", "warn")
            .stderr(Stdio::piped());
        let mut client = StdioClient::spawn(&mut command)?;
        let stderr = client.take_stderr().context("the server's stderr")?;
        let mut lines = BufReader::new(stderr).lines();
        let addr: Option<SocketAddr> = if ui {
            let addr = loop {
                let line = lines.next().context("the workbench's address")??;
                if let Some(a) = line.strip_prefix("mcpspec: workbench on http://") {
                    break a.trim_end_matches('/').parse()?;
                }
            };
            Some(addr)
        } else {
            None
        };
        std::thread::spawn(move || for _ in lines {});
        if client.initialize()?.get("result").is_none() {
            bail!("initialize failed");
        }
        let read = Arc::new(AtomicU64::new(0));
        if variant.page {
            page(addr.context("an address")?, read.clone())?;
        }
        Ok(Served { client, read })
    }

    /// Call number `i`: a learning by its primary key, spread over the `rows`.
    fn call(&mut self, i: usize, rows: usize) -> Result<()> {
        let id = crate::data::learning_id(1 + (i * 7919) % rows);
        let r = self.client.call_tool("get_learning", json!({ "id": id }))?;
        if r["result"]["isError"] != json!(false) {
            bail!("get_learning failed: {r}");
        }
        Ok(())
    }
}

/// A page: `GET /ui/events` on a thread of its own, every byte read and counted, until the
/// server closes the stream. Open when this returns: the answer has begun, so the server
/// counts the page.
fn page(addr: SocketAddr, read: Arc<AtomicU64>) -> Result<()> {
    let mut conn = TcpStream::connect(addr)?;
    write!(
        conn,
        "GET /ui/events HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\n\r\n"
    )?;
    let mut buf = [0u8; 16 * 1024];
    let n = conn.read(&mut buf)?;
    read.fetch_add(n as u64, Ordering::Relaxed);
    std::thread::spawn(move || {
        while let Ok(n) = conn.read(&mut buf) {
            if n == 0 {
                break;
            }
            read.fetch_add(n as u64, Ordering::Relaxed);
        }
    });
    Ok(())
}

/// The table the command prints.
pub fn markdown(result: &Value) -> String {
    let mut out = format!(
        "studio over stdio, {} learnings, get_learning by primary key from a synchronous client, {} calls a server in blocks of {} taken in turn with the round's other servers, {} rounds; server CPU per call, median over rounds; ratio to `off` in the same round (median, and range)\n\n| variant | server CPU µs/call | wall µs/call | ratio to off | range |\n|---|---:|---:|---:|---|\n",
        result["rows"], result["calls"], result["block"], result["rounds"]
    );
    let n = |v: &Value| v.as_f64().unwrap_or(f64::NAN);
    for v in result["variants"].as_array().into_iter().flatten() {
        out += &format!(
            "| {} | {:.1} | {:.1} | {:.3} | {:.3} to {:.3} |\n",
            v["variant"].as_str().unwrap_or_default(),
            n(&v["server_cpu_us_per_call"]),
            n(&v["wall_us_per_call"]),
            n(&v["ratio_to_off"]),
            n(&v["ratio_range"][0]),
            n(&v["ratio_range"][1])
        );
    }
    out
}
