//! `mcpspec demo`: a scripted session against a real server process, printed for a person.
//!
//! It creates a scratch database with the spec's sample rows, starts this same binary as
//! `mcpspec serve` over stdio, and drives it as an MCP client would: initialize, list the
//! tools, then each call of the spec's `demo:` section, with its result and round-trip time.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::Value;

use crate::client::StdioClient;
use crate::def::ServerDef;

/// Runs the demo for `def`, starting `exe serve SERVING...` as the server (`SERVING` names the
/// server or its spec file); writes the transcript to `out`.
pub fn run(
    def: &'static ServerDef,
    exe: &Path,
    serving: &[std::ffi::OsString],
    out: &mut dyn std::io::Write,
) -> Result<()> {
    let dir = tempfile::tempdir().context("creating a scratch directory")?;
    writeln!(out, "# mcpspec demo: {} {}", def.name, def.version)?;
    let mut client = start(def, exe, serving, dir.path(), out)?;
    list_tools(&mut client, out)?;
    for call in def.demo {
        demo_call(&mut client, call, out)?;
    }
    let status = client.finish(Duration::from_secs(10));
    writeln!(
        out,
        "\n# server exited: {}",
        status.map_or("killed after 10 s".into(), |s| s.to_string())
    )?;
    if !status.is_some_and(|s| s.success()) {
        bail!("the server did not exit cleanly");
    }
    Ok(())
}

/// Starts the server in `dir` (on a scratch database with the sample rows there, when it has
/// a database) and initializes a session, saying how long that took.
fn start(
    def: &'static ServerDef,
    exe: &Path,
    serving: &[std::ffi::OsString],
    dir: &Path,
    out: &mut dyn std::io::Write,
) -> Result<StdioClient> {
    let mut command = Command::new(exe);
    command.arg("serve").args(serving).current_dir(dir);
    let shown = serving
        .iter()
        .map(|a| a.to_string_lossy())
        .collect::<Vec<_>>()
        .join(" ");
    match &def.database {
        Some(database) => {
            let db = dir.join(format!("{}.db", def.name));
            let at = crate::backend::Location::File(db.clone());
            crate::backend::create(&at, def.name, database, true)?;
            writeln!(out, "# scratch database with sample rows: {}", db.display())?;
            writeln!(out, "$ mcpspec serve {shown} --db {}\n", db.display())?;
            command.arg("--db").arg(&db);
        }
        None => {
            // A server without a database works on the project in its working directory.
            writeln!(out, "# scratch project directory: {}", dir.display())?;
            writeln!(out, "$ mcpspec serve {shown}\n")?;
        }
    }
    let started = Instant::now();
    let mut client = StdioClient::spawn(
        command
            // The transcript shows every call already; the server's own call log would repeat it.
            .env(
                "MCPSPEC_LOG",
                std::env::var("MCPSPEC_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .stderr(Stdio::inherit()),
    )?;
    let init = client.initialize()?;
    let info = &init["result"]["serverInfo"];
    writeln!(
        out,
        "-> initialize: {} {} (protocol {}), ready in {:.1} ms",
        info["name"].as_str().unwrap_or("?"),
        info["version"].as_str().unwrap_or("?"),
        init["result"]["protocolVersion"].as_str().unwrap_or("?"),
        started.elapsed().as_secs_f64() * 1000.0
    )?;
    Ok(client)
}

/// `tools/list`, each tool with what it does to the database.
fn list_tools(client: &mut StdioClient, out: &mut dyn std::io::Write) -> Result<()> {
    let list = client.request("tools/list", serde_json::json!({}))?;
    let tools = list["result"]["tools"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    writeln!(out, "-> tools/list: {} tools", tools.len())?;
    for t in &tools {
        let a = &t["annotations"];
        let kind = if a["readOnlyHint"] == Value::Bool(true) {
            "read-only"
        } else if a["destructiveHint"] == Value::Bool(true) {
            "destructive"
        } else {
            "writes"
        };
        writeln!(
            out,
            "   {:<22} {kind:<11} {}",
            t["name"].as_str().unwrap_or("?"),
            t["title"].as_str().unwrap_or("")
        )?;
    }
    Ok(())
}

/// One scripted call, with its note, its answer and its round-trip time.
fn demo_call(
    client: &mut StdioClient,
    call: &crate::def::DemoCallDef,
    out: &mut dyn std::io::Write,
) -> Result<()> {
    let args: Value = serde_json::from_str(call.arguments).context("demo arguments")?;
    writeln!(out)?;
    if let Some(note) = call.note {
        writeln!(out, "# {note}")?;
    }
    writeln!(out, "-> tools/call {} {}", call.tool, args)?;
    let t = Instant::now();
    let response = client.call_tool(call.tool, args)?;
    let ms = t.elapsed().as_secs_f64() * 1000.0;
    let result = &response["result"];
    if let Some(err) = response.get("error") {
        writeln!(out, "<- protocol error ({ms:.2} ms): {err}")?;
    } else if result["isError"] == Value::Bool(true) {
        let text = result["content"][0]["text"].as_str().unwrap_or("");
        writeln!(out, "<- tool error ({ms:.2} ms): {text}")?;
    } else {
        writeln!(out, "<- result ({ms:.2} ms):")?;
        let pretty = serde_json::to_string_pretty(&result["structuredContent"])?;
        for line in pretty.lines() {
            writeln!(out, "   {line}")?;
        }
    }
    Ok(())
}
