//! The authoring loop through `mcpspec dev`: the time from saving a YAML edit that adds a tool
//! to that tool's first answer, as a client connected to the dev server sees it (the save,
//! the server noticing it, compiling the spec, starting the new engine, `list_changed`, then
//! `tools/list` and `tools/call`).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use mcpspec_testkit::StdioClient;
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(30);

/// Edits `spec/studio.yaml` (a copy) `edits` times, each adding one tool, and returns every
/// edit's time to the new tool's answer, in seconds.
pub fn run(mcpspec: &Path, root: &Path, edits: usize) -> Result<Vec<f64>> {
    // The server runs in a scratch directory, so the binary's path must not be relative.
    let mcpspec = std::path::absolute(mcpspec)?;
    let dir = tempfile::tempdir()?;
    let spec = dir.path().join("studio.yaml");
    let original = std::fs::read_to_string(root.join("spec/studio.yaml"))
        .context("reading spec/studio.yaml")?;
    std::fs::write(&spec, &original)?;
    // The server's stderr goes to a file, shown when an edit does not come through.
    let log = dir.path().join("dev.log");
    let mut client = StdioClient::spawn(
        Command::new(&mcpspec)
            .args(["dev", "studio.yaml"])
            .current_dir(dir.path())
            .stderr(Stdio::from(std::fs::File::create(&log)?)),
    )?;
    client.initialize()?;
    let mut text = original;
    let mut times = Vec::with_capacity(edits);
    for i in 0..edits {
        let name = format!("count_learnings_{i}");
        text.push_str(&format!(
            "\n  - name: {name}\n    description: How many learnings there are.\n    sql:\n      returns: scalar\n      key: count\n      query: SELECT count(*) AS n FROM learnings\n      columns: {{n: integer}}\n"
        ));
        let t0 = Instant::now();
        std::fs::write(&spec, &text)?;
        wait_for_list_changed(&mut client).with_context(|| {
            format!(
                "edit {i}: no tools/list_changed; the server said:\n{}",
                std::fs::read_to_string(&log).unwrap_or_default()
            )
        })?;
        let listed = client.request("tools/list", json!({}))?;
        if !listed.to_string().contains(&name) {
            bail!("the new tool {name} is not listed: {listed}");
        }
        let answer = client.call_tool(&name, json!({}))?;
        let seconds = t0.elapsed().as_secs_f64();
        if answer["result"]["isError"] != json!(false) {
            bail!("{name} failed: {answer}");
        }
        times.push(seconds);
    }
    // Closing stdin ends the session; the server removes its scratch database.
    if !client.finish(WAIT).is_some_and(|s| s.success()) {
        bail!("mcpspec dev did not exit cleanly");
    }
    Ok(times)
}

fn wait_for_list_changed(client: &mut StdioClient) -> Result<()> {
    loop {
        let msg: Value = client.recv(WAIT)?;
        if msg["method"] == "notifications/tools/list_changed" {
            return Ok(());
        }
    }
}
