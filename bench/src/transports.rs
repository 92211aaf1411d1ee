//! The cost of the ways a call can reach a tool, each against a baseline measured in the same
//! run: Streamable HTTP against stdio (a primary-key `kb_get` on the knowledge server), and a
//! call through the `lessons` proxy and its interceptor against the same call made directly
//! on the downstream server (the `downstream` test kit).
//!
//! Every figure is the median of `calls` sequential round trips after a warm-up of a tenth as
//! many, from this process as the client; the report gives each as a ratio to its baseline.

use std::io::BufRead;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Instant;

use anyhow::{Context, Result, anyhow, ensure};
use mcpspec_testkit::{HttpClient, StdioClient};
use serde_json::{Value, json};

/// One measured path and its baseline's name.
struct Row {
    what: &'static str,
    baseline: &'static str,
    /// Microseconds.
    median: f64,
    mean: f64,
}

/// Times `calls` round trips of `call`, which must answer a tool result; `is_error` says
/// whether that result is expected to be a tool error (a guard's block).
fn time(
    calls: usize,
    is_error: bool,
    mut call: impl FnMut() -> Result<Value>,
) -> Result<(f64, f64)> {
    let mut samples = Vec::with_capacity(calls);
    for i in 0..calls + calls / 10 {
        let t = Instant::now();
        let r = call()?;
        let elapsed = t.elapsed();
        ensure!(
            r["result"]["isError"] == json!(is_error),
            "unexpected answer: {r}"
        );
        if i >= calls / 10 {
            samples.push(elapsed.as_secs_f64() * 1e6);
        }
    }
    let s = crate::stats::Summary::of(&samples);
    Ok((s.median, s.mean))
}

fn stdio(mcpspec: &Path, args: &[&str], env: &[(&str, &Path)]) -> Result<StdioClient> {
    let mut c = Command::new(mcpspec);
    c.args(args)
        .env("MCPSPEC_LOG", "warn")
        .stderr(Stdio::null());
    for (k, v) in env {
        c.env(k, v);
    }
    let mut client = StdioClient::spawn(&mut c)?;
    let init = client.initialize()?;
    ensure!(init.get("result").is_some(), "initialize failed: {init}");
    Ok(client)
}

/// `mcpspec serve ARGS --http 127.0.0.1:0` and a session on it.
fn http(mcpspec: &Path, args: &[&str]) -> Result<(Child, HttpClient)> {
    let mut child = Command::new(mcpspec)
        .args(args)
        .args(["--http", "127.0.0.1:0"])
        .env("MCPSPEC_LOG", "warn")
        .env_remove("MCPSPEC_HTTP_TOKEN")
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()?;
    let stderr = child.stderr.take().context("stderr")?;
    let mut lines = std::io::BufReader::new(stderr).lines();
    let addr = loop {
        let line = lines.next().context("the server exited")??;
        if let Some(url) = line.strip_prefix("mcpspec: listening on http://") {
            break url.trim_end_matches("/mcp").parse()?;
        }
    };
    let mut client = HttpClient::new(addr, None);
    client.initialize()?;
    Ok((child, client))
}

/// Measures every path and returns the report as a Markdown table.
pub fn run(mcpspec: &Path, calls: usize) -> Result<String> {
    ensure!(calls >= 10, "--calls must be at least 10");
    let dir = tempfile::tempdir()?;
    let mut rows = Vec::new();

    // Transports: the same primary-key read over stdio and over Streamable HTTP.
    let db = dir.path().join("knowledge.db");
    let ok = Command::new(mcpspec)
        .args(["init", "knowledge", "--sample", "--db"])
        .arg(&db)
        .stdout(Stdio::null())
        .status()?;
    ensure!(ok.success(), "mcpspec init knowledge failed");
    let db_arg = db.to_str().context("a UTF-8 path")?;
    let mut s = stdio(mcpspec, &["serve", "knowledge", "--db", db_arg], &[])?;
    let added = s.call_tool(
        "kb_add",
        json!({"content": "a row to read back", "role": "dev"}),
    )?;
    let args = json!({"id": added["result"]["structuredContent"]["id"].clone()});
    let (median, mean) = time(calls, false, || Ok(s.call_tool("kb_get", args.clone())?))?;
    rows.push(Row {
        what: "kb_get over stdio",
        baseline: "",
        median,
        mean,
    });
    let (mut child, mut h) = http(mcpspec, &["serve", "knowledge", "--db", db_arg])?;
    let (median, mean) = time(calls, false, || Ok(h.call_tool("kb_get", args.clone())?))?;
    rows.push(Row {
        what: "kb_get over Streamable HTTP",
        baseline: "kb_get over stdio",
        median,
        mean,
    });
    let _ = child.kill();
    let _ = child.wait();

    // The proxy: the downstream test kit called directly, then through `lessons` with its
    // sample lessons, whose interceptor query runs on every call.
    let mut direct = stdio(mcpspec, &["serve", "downstream"], &[])?;
    let echo = json!({"text": "hello"});
    let shell = json!({"command": "ls -la /tmp"});
    let (median, mean) = time(calls, false, || Ok(direct.call_tool("echo", echo.clone())?))?;
    rows.push(Row {
        what: "echo, downstream directly",
        baseline: "",
        median,
        mean,
    });
    let (median, mean) = time(calls, false, || {
        Ok(direct.call_tool("start_process", shell.clone())?)
    })?;
    rows.push(Row {
        what: "start_process, downstream directly",
        baseline: "",
        median,
        mean,
    });

    let lessons = dir.path().join("lessons.db");
    let ok = Command::new(mcpspec)
        .args(["init", "lessons", "--sample", "--db"])
        .arg(&lessons)
        .stdout(Stdio::null())
        .status()?;
    ensure!(ok.success(), "mcpspec init lessons failed");
    let config = dir.path().join("proxy-config.json");
    std::fs::write(
        &config,
        json!({"version": 1, "proxyServers": [{"name": "dc", "command": mcpspec,
            "args": ["serve", "downstream"], "env": {"MCPSPEC_LOG": "warn"}}]})
        .to_string(),
    )?;
    let mut proxied = stdio(
        mcpspec,
        &[
            "serve",
            "lessons",
            "--db",
            lessons.to_str().context("a UTF-8 path")?,
        ],
        &[("LESSONS_PROXY_CONFIG", &config)],
    )?;
    let (median, mean) = time(
        calls,
        false,
        || Ok(proxied.call_tool("echo", echo.clone())?),
    )?;
    rows.push(Row {
        what: "echo through the lessons proxy (no lesson matches)",
        baseline: "echo, downstream directly",
        median,
        mean,
    });
    let (median, mean) = time(calls, false, || {
        Ok(proxied.call_tool("start_process", shell.clone())?)
    })?;
    rows.push(Row {
        what: "start_process through the proxy (Bash lessons' patterns tried, none matches)",
        baseline: "start_process, downstream directly",
        median,
        mean,
    });
    let push = json!({"command": "git push --force origin main"});
    let (median, mean) = time(calls, true, || {
        Ok(proxied.call_tool("start_process", push.clone())?)
    })?;
    rows.push(Row {
        what: "start_process blocked by a guard (never forwarded)",
        baseline: "start_process, downstream directly",
        median,
        mean,
    });

    let mut out =
        String::from("| path | median | mean | median vs baseline |\n|---|---|---|---|\n");
    for r in &rows {
        let ratio = if r.baseline.is_empty() {
            "baseline".to_string()
        } else {
            let base = rows
                .iter()
                .find(|b| b.what == r.baseline)
                .ok_or_else(|| anyhow!("no baseline {}", r.baseline))?;
            format!("{:.2}× {}", r.median / base.median, base.what)
        };
        out += &format!(
            "| {} | {:.0} µs | {:.0} µs | {ratio} |\n",
            r.what, r.median, r.mean
        );
    }
    Ok(out)
}
