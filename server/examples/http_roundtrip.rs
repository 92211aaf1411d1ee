//! Measures the round trip of a primary-key call (`kb_get`) over Streamable HTTP against the
//! same call over stdio, on one knowledge database with its sample rows.
//!
//! `cargo build --release -p server --bin mcpspec --example http_roundtrip &&
//! target/release/examples/http_roundtrip [CALLS]` prints the median and mean of each and
//! their ratio. It uses the `mcpspec` binary next to the examples directory.

use std::io::BufRead;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow};
use serde_json::{Value, json};
use server::client::{HttpClient, StdioClient};

fn summary(mut samples: Vec<Duration>) -> (Duration, Duration) {
    samples.sort();
    let median = samples[samples.len() / 2];
    let mean = samples.iter().sum::<Duration>() / u32::try_from(samples.len()).unwrap_or(1);
    (median, mean)
}

fn time(calls: usize, mut call: impl FnMut() -> Result<Value>) -> Result<(Duration, Duration)> {
    for _ in 0..calls / 10 {
        call()?;
    }
    let mut samples = Vec::with_capacity(calls);
    for _ in 0..calls {
        let t = Instant::now();
        let r = call()?;
        samples.push(t.elapsed());
        if r["result"]["isError"] != json!(false) {
            return Err(anyhow!("the call failed: {r}"));
        }
    }
    Ok(summary(samples))
}

fn main() -> Result<()> {
    let calls: usize = std::env::args()
        .nth(1)
        .map(|n| n.parse())
        .transpose()?
        .unwrap_or(5000);
    let exe = std::env::current_exe()?
        .parent()
        .and_then(|p| p.parent())
        .map(|p| p.join("mcpspec"))
        .context("locating mcpspec")?;
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("knowledge.db");
    let ok = Command::new(&exe)
        .args(["init", "knowledge", "--sample", "--db"])
        .arg(&db)
        .status()?;
    anyhow::ensure!(ok.success(), "mcpspec init failed");

    let mut stdio = StdioClient::spawn(
        Command::new(&exe)
            .args(["serve", "knowledge", "--db"])
            .arg(&db)
            .env("MCPSPEC_LOG", "warn")
            .stderr(Stdio::null()),
    )?;
    stdio.initialize()?;
    let added = stdio.call_tool(
        "kb_add",
        json!({"content": "a row to read back", "role": "dev"}),
    )?;
    let id = added["result"]["structuredContent"]["id"].clone();
    let args = json!({"id": id});

    let mut child = Command::new(&exe)
        .args(["serve", "knowledge", "--db"])
        .arg(&db)
        .args(["--http", "127.0.0.1:0"])
        .env("MCPSPEC_LOG", "warn")
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
    let mut http = HttpClient::new(addr, None);
    http.initialize()?;

    let (s_median, s_mean) = time(calls, || Ok(stdio.call_tool("kb_get", args.clone())?))?;
    let (h_median, h_mean) = time(calls, || Ok(http.call_tool("kb_get", args.clone())?))?;
    println!("kb_get by primary key, {calls} sequential calls each");
    println!("stdio: median {s_median:?}, mean {s_mean:?}");
    println!("http:  median {h_median:?}, mean {h_mean:?}");
    println!(
        "http / stdio: {:.2}x median, {:.2}x mean",
        h_median.as_secs_f64() / s_median.as_secs_f64(),
        h_mean.as_secs_f64() / s_mean.as_secs_f64()
    );
    let _ = child.kill();
    let _ = child.wait();
    Ok(())
}
