//! knowledge on PostgreSQL against MCP Toolbox's `postgres-sql` source on the same database and
//! SQL, side by side in one run, with the floor: the same statement through the driver,
//! in-process. Sequential clients (write a request, block on its answer) over stdio, then 16
//! concurrent clients over Streamable HTTP.

use std::io::BufRead;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Instant;

use anyhow::{Context, Result, ensure};
use mcpspec_testkit::{HttpClient, StdioClient};
use serde_json::json;

use crate::stats::Summary;

/// One measured path, in microseconds.
struct Row {
    what: String,
    summary: Summary,
}

/// Times `calls` calls after a warm-up of a tenth as many.
pub(crate) fn time(calls: usize, mut call: impl FnMut() -> Result<()>) -> Result<Summary> {
    let mut samples = Vec::with_capacity(calls);
    for i in 0..calls + calls / 10 {
        let t = Instant::now();
        call()?;
        if i >= calls / 10 {
            samples.push(t.elapsed().as_secs_f64() * 1e6);
        }
    }
    Ok(Summary::of(&samples))
}

/// The echo floor: the same `kb_get` request written to `cat` and its echo read back, one
/// after the other, as the stdio client calls a server; what a round trip over two pipes
/// costs with no server work at all. The lowest median of three fresh `cat`s, because the
/// scheduler puts `cat` on the client's core in some runs and on the other in others (see
/// `bench/results/HISTORY.md`).
pub(crate) fn echo_floor(calls: usize, id: &str) -> Result<Summary> {
    use std::io::Write;
    let line = format!(
        "{}\n",
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
               "params": {"name": "kb_get", "arguments": {"id": id}}})
    );
    let mut best: Option<Summary> = None;
    for _ in 0..3 {
        let mut cat = Command::new("cat")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .context("run cat")?;
        let mut input = cat.stdin.take().context("cat's stdin")?;
        let mut output = std::io::BufReader::new(cat.stdout.take().context("cat's stdout")?);
        let mut echo = String::new();
        let s = time(calls, || {
            input.write_all(line.as_bytes())?;
            input.flush()?;
            echo.clear();
            output.read_line(&mut echo)?;
            ensure!(echo == line, "cat echoed something else");
            Ok(())
        })?;
        drop(input);
        cat.wait()?;
        if best.as_ref().is_none_or(|b| s.median < b.median) {
            best = Some(s);
        }
    }
    best.context("no echo run")
}

/// The statement `kb_get` runs on PostgreSQL, from the compiled knowledge server.
fn kb_get_sql() -> Result<&'static str> {
    let def = server::server("knowledge").context("the knowledge server")?;
    let tool = def.tool("kb_get").context("kb_get")?;
    let st = tool.binding.statements().first().context("a statement")?;
    Ok(st
        .text("postgres")
        .context("kb_get has PostgreSQL text")?
        .sql)
}

/// Creates the knowledge schema with its sample rows and `rows` more in the database at `url`.
fn prepare(mcpspec: &Path, url: &str, rows: usize) -> Result<()> {
    let out = Command::new(mcpspec)
        .args(["init", "knowledge", "--sample", "--db", url])
        .output()?;
    ensure!(
        out.status.success(),
        "mcpspec init: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut client = postgres::Client::connect(url, postgres::NoTls)?;
    client.batch_execute(&format!(
        "INSERT INTO knowledge_entries (id, content, role, tags)
         SELECT 'bulk-' || lpad(n::text, 7, '0'), 'entry ' || n || ' about topic ' || (n % 97),
                'dev', ARRAY['bulk', 't' || (n % 13)]
         FROM generate_series(1, {rows}) n;
         ANALYZE knowledge_entries;"
    ))?;
    Ok(())
}

/// MCP Toolbox's configuration: the same database and `kb_get`'s SQL as a `postgres-sql` tool.
fn toolbox_config(url: &str, sql: &str) -> Result<String> {
    let config: postgres::Config = url.parse()?;
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let host = match config.get_hosts().first() {
        Some(postgres::config::Host::Tcp(h)) => h.clone(),
        _ => anyhow::bail!("Toolbox needs a TCP host in the URL"),
    };
    let database = config.get_dbname().context("a database name")?;
    let user = config.get_user().unwrap_or("postgres");
    let statement = sql.replace('\n', " ");
    Ok(format!(
        "kind: source\nname: kb\ntype: postgres\nhost: {host}\nport: \"{port}\"\ndatabase: {database}\nuser: {user}\npassword: unused\n---\n\
         kind: tool\nname: kb_get\ntype: postgres-sql\nsource: kb\ndescription: Get one knowledge entry by id.\n\
         statement: {statement:?}\nparameters:\n  - name: id\n    type: string\n    description: The entry's UUID.\n"
    ))
}

/// A session on a stdio server started by `command`.
pub(crate) fn stdio(command: &mut Command) -> Result<StdioClient> {
    let mut client = StdioClient::spawn(command.stderr(Stdio::null()))?;
    let init = client.initialize()?;
    ensure!(init.get("result").is_some(), "initialize failed: {init}");
    Ok(client)
}

/// A server on 127.0.0.1 started by `command`, once it says it serves (on stdout or stderr);
/// `port` is where it listens (0 for mcpspec, which reports its port).
pub(crate) fn http_server(
    command: &mut Command,
    port: u16,
) -> Result<(Child, std::net::SocketAddr)> {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let out = child.stdout.take().context("stdout")?;
    let err = child.stderr.take().context("stderr")?;
    for pipe in [
        Box::new(out) as Box<dyn std::io::Read + Send>,
        Box::new(err),
    ] {
        let tx = tx.clone();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(pipe).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
    }
    drop(tx);
    let addr = loop {
        let line = rx.recv().context("the server exited before serving")?;
        if let Some(url) = line.strip_prefix("mcpspec: listening on http://") {
            break url.trim_end_matches("/mcp").parse()?;
        }
        if port != 0 && line.contains("Server ready to serve") {
            break format!("127.0.0.1:{port}").parse()?;
        }
    };
    // Keep draining, so that a chatty server never blocks on a full pipe.
    std::thread::spawn(move || rx.into_iter().for_each(drop));
    Ok((child, addr))
}

/// A throughput run: calls per second, the latency of every call, and the server's CPU per
/// call when its process was given.
pub(crate) struct Measured {
    pub rate: f64,
    pub latency: Summary,
    pub cpu_us: Option<f64>,
}

/// `clients` threads, each with its own session, making `warmup` then `calls` sequential
/// `kb_get` calls. Only the `calls` are measured: the clock and the server's (`pid`) CPU time
/// start once every session is open and warm (the pool's connections opened), so neither
/// opening sessions nor connecting to the database counts.
pub(crate) fn throughput(
    addr: std::net::SocketAddr,
    id: &str,
    clients: usize,
    (warmup, calls): (usize, usize),
    pid: Option<u32>,
) -> Result<Measured> {
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(clients + 1));
    let workers: Vec<_> = (0..clients)
        .map(|_| {
            let barrier = barrier.clone();
            let id = id.to_string();
            std::thread::spawn(move || -> Result<Vec<f64>> {
                let mut c = HttpClient::new(addr, None);
                c.initialize()?;
                let mut samples = Vec::with_capacity(calls);
                for n in 0..warmup + calls {
                    if n == warmup {
                        barrier.wait();
                    }
                    let t = Instant::now();
                    let r = c.call_tool("kb_get", json!({"id": id}))?;
                    // Toolbox leaves `isError` out of a successful result.
                    ensure!(
                        r.get("result").is_some() && r["result"]["isError"] != json!(true),
                        "{r}"
                    );
                    if n >= warmup {
                        samples.push(t.elapsed().as_secs_f64() * 1e6);
                    }
                }
                Ok(samples)
            })
        })
        .collect();
    let cpu = || {
        pid.map(crate::client::proc_cpu_ms)
            .map(|c| c.context("the server's CPU time"))
    };
    barrier.wait();
    let (start, before) = (Instant::now(), cpu().transpose()?);
    let mut all = Vec::new();
    for w in workers {
        all.extend(
            w.join()
                .map_err(|_| anyhow::anyhow!("a client panicked"))??,
        );
    }
    let rate = all.len() as f64 / start.elapsed().as_secs_f64();
    let after = cpu().transpose()?;
    let latency = Summary::of(&all);
    let cpu_us = before
        .zip(after)
        .map(|(b, a)| (a - b) * 1000.0 / latency.count as f64);
    Ok(Measured {
        rate,
        latency,
        cpu_us,
    })
}

/// Runs every measurement against the database at `url` and returns the Markdown report.
pub fn run(mcpspec: &Path, toolbox: &Path, url: &str, rows: usize, calls: usize) -> Result<String> {
    prepare(mcpspec, url, rows)?;
    let sql = kb_get_sql()?;
    let id = format!("bulk-{:07}", rows / 2);
    let mut out = Vec::new();

    // The floor: the same statement, prepared once, through the driver in this process.
    let mut client = postgres::Client::connect(url, postgres::NoTls)?;
    let st = client.prepare(sql)?;
    let floor = time(calls, || {
        let r = client.query_one(&st, &[&id])?;
        ensure!(r.get::<_, &str>(0) == id);
        Ok(())
    })?;
    let floor_median = floor.median;
    out.push(Row {
        what: "driver floor: kb_get's SQL in-process".into(),
        summary: floor,
    });
    let echo = echo_floor(calls, &id)?;
    let echo_median = echo.median;

    let dir = tempfile::tempdir()?;
    let config = dir.path().join("tools.yaml");
    std::fs::write(&config, toolbox_config(url, sql)?)?;
    let args = json!({"id": id});
    let mut m = stdio(
        Command::new(mcpspec)
            .args(["serve", "knowledge", "--db", url])
            .env("MCPSPEC_LOG", "warn"),
    )?;
    let s = time(calls, || {
        let r = m.call_tool("kb_get", args.clone())?;
        ensure!(r["result"]["structuredContent"]["id"] == json!(id), "{r}");
        Ok(())
    })?;
    out.push(Row {
        what: "mcpspec, stdio".into(),
        summary: s,
    });
    let mut t = stdio(Command::new(toolbox).arg("--config").arg(&config).args([
        "--stdio",
        "--disable-version-check",
        "--disable-reload",
        "--log-level",
        "WARN",
    ]))?;
    let s = time(calls, || {
        let r = t.call_tool("kb_get", args.clone())?;
        ensure!(
            r["result"]["isError"] != json!(true) && r.to_string().contains(&id),
            "{r}"
        );
        Ok(())
    })?;
    out.push(Row {
        what: "MCP Toolbox, stdio".into(),
        summary: s,
    });
    drop((m, t));

    let mut table = String::from("| path | median | p99 | median vs floor |\n|---|---|---|---|\n");
    for r in &out {
        table += &format!(
            "| {} | {:.0} µs | {:.0} µs | {:.2}× |\n",
            r.what,
            r.summary.median,
            r.summary.p99,
            r.summary.median / floor_median
        );
    }
    table += &format!(
        "| echo floor: the request through `cat` | {:.0} µs | {:.0} µs | |\n",
        echo.median, echo.p99
    );
    let ours = out[1].summary.median;
    let theirs = out[2].summary.median;
    table += &format!(
        "\nmcpspec's stdio median is **{:.2}×** the driver floor plus the echo floor ({:.0} µs + {:.0} µs; goal 1.5×), Toolbox's {:.2}×.\n",
        ours / (floor_median + echo_median),
        floor_median,
        echo_median,
        theirs / (floor_median + echo_median),
    );
    table += &format!(
        "Toolbox's stdio median is {:.2}× mcpspec's; server-side (round trip less the driver floor) {:.2}×.\n",
        theirs / ours,
        (theirs - floor_median) / (ours - floor_median)
    );

    table += &http_table(mcpspec, toolbox, url, &config, &id, calls)?;
    Ok(table)
}

/// Sixteen concurrent clients over Streamable HTTP on each server: calls per second, latency.
fn http_table(
    mcpspec: &Path,
    toolbox: &Path,
    url: &str,
    config: &Path,
    id: &str,
    calls: usize,
) -> Result<String> {
    // The same calls at each level, enough that the server's CPU time, which Linux counts in
    // 10 ms ticks, is read to within a percent.
    let total = (calls * 16).max(800);
    let mut table = format!(
        "\n| concurrent HTTP clients ({total} calls after a warm-up of a tenth as many) | server | calls/s | median | p99 | server CPU per call |\n|---|---|---|---|---|---|\n"
    );
    let mut ratios = Vec::new();
    for clients in [16, 64] {
        let load = (total / clients / 10, total / clients);
        let (mut mc, maddr) = http_server(
            Command::new(mcpspec)
                .args(["serve", "knowledge", "--db", url, "--http", "127.0.0.1:0"])
                .env("MCPSPEC_LOG", "warn")
                .env_remove("MCPSPEC_HTTP_TOKEN"),
            0,
        )?;
        let ours = throughput(maddr, id, clients, load, Some(mc.id()))?;
        let _ = mc.kill();
        let _ = mc.wait();
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let (mut tc, taddr) = http_server(
            Command::new(toolbox)
                .arg("--config")
                .arg(config)
                .args(["--address", "127.0.0.1", "--port", &port.to_string()])
                .args([
                    "--disable-version-check",
                    "--disable-reload",
                    "--log-level",
                    "INFO",
                ]),
            port,
        )?;
        let theirs = throughput(taddr, id, clients, load, Some(tc.id()))?;
        let _ = tc.kill();
        let _ = tc.wait();
        for (name, m) in [("mcpspec", &ours), ("MCP Toolbox", &theirs)] {
            table += &format!(
                "| {clients} | {name} | {:.0} | {:.0} µs | {:.0} µs | {:.1} µs |\n",
                m.rate,
                m.latency.median,
                m.latency.p99,
                m.cpu_us.unwrap_or(f64::NAN)
            );
        }
        ratios.push((clients, ours, theirs));
    }
    table += "\n";
    for (clients, ours, theirs) in ratios {
        table += &format!(
            "At {clients} clients mcpspec serves **{:.2}×** Toolbox's calls per second with {:.2}× its p99, at {:.2}× its server CPU per call.\n",
            ours.rate / theirs.rate,
            ours.latency.p99 / theirs.latency.p99,
            ours.cpu_us.unwrap_or(f64::NAN) / theirs.cpu_us.unwrap_or(f64::NAN)
        );
    }
    Ok(table)
}
