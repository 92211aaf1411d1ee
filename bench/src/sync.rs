//! A synchronous client, calling the way the Python SDK and Claude Code do: write one request,
//! block reading until its answer arrives, then send the next. Its echo floor is the same
//! client against `cat`, which answers each line with itself: what a round trip costs in
//! pipes, wake-ups and JSON on the client's side alone, measured in the same run. Round trip
//! minus the floor is the server's share.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use mcpspec_testkit::StdioClient;
use serde_json::{Map, Value, json};

use crate::client::{Launch, PROTOCOL_VERSION};
use crate::measure::Plan;
use crate::stats::Summary;
use crate::workload::{Dialect, Kind, Workload};

/// How a session's requests name their protocol revision.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Revision {
    /// `initialize` with 2025-11-25, then requests without `_meta`.
    Session,
    /// No `initialize`: each request carries protocol 2026-07-28 and the client's capabilities
    /// and name in `_meta`, as clients of that revision (the Python SDK 2.x among them) send.
    PerRequest,
}

impl Revision {
    /// `params` of a request of this revision.
    fn params(self, mut params: Value) -> Value {
        if self == Revision::PerRequest {
            params["_meta"] = json!({
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo":
                    {"name": "mcpbench-sync", "version": env!("CARGO_PKG_VERSION")}
            });
        }
        params
    }
}

/// A process spoken to with blocking reads and writes: the test kit's stdio client, which
/// reads each answer on the calling thread.
struct Blocking {
    client: StdioClient,
    next_id: u64,
}

impl Blocking {
    fn spawn(program: &str, args: &[String], env: &[(String, String)]) -> Result<Blocking> {
        let mut command = Command::new(program);
        command
            .args(args)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stderr(Stdio::null());
        let client =
            StdioClient::spawn(&mut command).with_context(|| format!("starting {program}"))?;
        Ok(Blocking { client, next_id: 1 })
    }

    /// Writes `line` (with its newline) in one write and blocks until a line comes back.
    fn round_trip(&mut self, line: &[u8]) -> Result<(Duration, String)> {
        Ok(self.client.round_trip(line)?)
    }

    /// One request and its answer, which must be a success.
    fn request(&mut self, method: &str, params: Value) -> Result<Duration> {
        let id = self.next_id;
        self.next_id += 1;
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let mut bytes = serde_json::to_vec(&msg)?;
        bytes.push(b'\n');
        let (took, line) = self.round_trip(&bytes)?;
        let answer: Value = serde_json::from_str(&line).context("an answer that is not JSON")?;
        if answer["id"] != json!(id) || answer.get("error").is_some() {
            bail!("request {id} was answered with {answer}");
        }
        Ok(took)
    }

    fn notify(&mut self, method: &str) -> Result<()> {
        Ok(self.client.notify(method, json!({}))?)
    }

    fn close(self) {
        let _ = self.client.finish(Duration::from_secs(3));
    }
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// Calls of `kind` of `revision`, one at a time within the plan's budget; round trips in µs.
fn calls(
    s: &mut Blocking,
    (kind, revision): (Kind, Revision),
    dialect: Dialect,
    rows: usize,
    plan: &Plan,
) -> Result<Vec<f64>> {
    let mut w = Workload::new(kind, dialect, rows);
    for _ in 0..plan.warmup_calls / 4 {
        s.request("tools/call", revision.params(w.next_params()))?;
    }
    within_budget(plan, || {
        Ok(micros(
            s.request("tools/call", revision.params(w.next_params()))?,
        ))
    })
}

/// Samples of `one` (µs each) until the plan's call count or its time budget runs out, but
/// never fewer than its minimum.
fn within_budget(plan: &Plan, mut one: impl FnMut() -> Result<f64>) -> Result<Vec<f64>> {
    let start = Instant::now();
    let mut out = Vec::new();
    while out.len() < plan.max_calls
        && (out.len() < plan.min_calls || start.elapsed() < plan.budget)
    {
        out.push(one()?);
    }
    Ok(out)
}

/// How many fresh `cat` processes the echo floor is taken from.
const FLOOR_SESSIONS: usize = 3;

/// The echo floor: of [`FLOOR_SESSIONS`] sessions against a fresh `cat` each, the one with the
/// lowest median, and every session's median. The lowest, because where the scheduler puts
/// `cat` is luck: on the client's core the two take turns and a round trip costs a few
/// microseconds; on the other core, on a virtual machine whose idle cores halt, every message
/// wakes a halted core and the same round trip costs several times more (see
/// `bench/results/HISTORY.md`). One session can land either way, which made the floor, and the
/// server-side figures taken from it, swing between runs.
fn floor(
    dialect: Dialect,
    rows: usize,
    plan: &Plan,
    revision: Revision,
) -> Result<(Vec<f64>, Vec<f64>)> {
    let mut best: Option<(f64, Vec<f64>)> = None;
    let mut medians = Vec::new();
    for _ in 0..FLOOR_SESSIONS {
        let lat = floor_session(dialect, rows, plan, revision)?;
        let median = Summary::of(&lat).median;
        medians.push(median);
        if best.as_ref().is_none_or(|(m, _)| median < *m) {
            best = Some((median, lat));
        }
    }
    Ok((best.map(|(_, lat)| lat).unwrap_or_default(), medians))
}

/// One floor session: the primary-key requests of the workload, each echoed back by `cat`.
fn floor_session(
    dialect: Dialect,
    rows: usize,
    plan: &Plan,
    revision: Revision,
) -> Result<Vec<f64>> {
    let mut cat = Blocking::spawn("cat", &[], &[])?;
    let mut w = Workload::new(Kind::Pk, dialect, rows);
    let mut id = 0u64;
    let out = within_budget(plan, || {
        id += 1;
        let params = revision.params(w.next_params());
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params});
        let mut bytes = serde_json::to_vec(&msg)?;
        bytes.push(b'\n');
        let (took, line) = cat.round_trip(&bytes)?;
        // The client decodes what came back, as it would an answer.
        let _: Value = serde_json::from_str(&line)?;
        Ok(micros(took))
    })?;
    cat.close();
    Ok(out)
}

/// The echo floor, then a session of the synchronous client against the server: round trips
/// per kind of call (`kinds`), with requests of `revision`. The server's share is computed by
/// the report.
pub fn run(
    launch: &Launch,
    (dialect, rows): (Dialect, usize),
    plan: &Plan,
    kinds: &[Kind],
    revision: Revision,
) -> Result<Value> {
    let mut out = Map::new();
    let (floor, sessions) = floor(dialect, rows, plan, revision)?;
    out.insert("floor".into(), Summary::of(&floor).to_json());
    out.insert("floor_session_medians_us".into(), json!(sessions));
    let mut s = Blocking::spawn(&launch.program, &launch.args, &launch.env)?;
    if revision == Revision::Session {
        s.request(
            "initialize",
            json!({"protocolVersion": PROTOCOL_VERSION, "capabilities": {},
                   "clientInfo": {"name": "mcpbench-sync", "version": env!("CARGO_PKG_VERSION")}}),
        )?;
        s.notify("notifications/initialized")?;
    }
    for &kind in kinds {
        let lat = calls(&mut s, (kind, revision), dialect, rows, plan)?;
        out.insert(kind.name().into(), Summary::of(&lat).to_json());
    }
    s.close();
    Ok(Value::Object(out))
}

/// [`run`] again in a process of its own (`mcpbench sync` with `args`), pinned with `taskset` to
/// one CPU that it shares with `cat` and the server it spawns. No message then wakes a halted
/// CPU, so the round trips show each server's own work without the wake-ups between CPUs that
/// a virtual machine charges for (see `bench/results/HISTORY.md`). A diagnostic beside [`run`], which
/// measures the way clients call.
pub fn pinned(args: impl IntoIterator<Item = String>) -> Result<Value> {
    let cpu = first_allowed_cpu()?;
    let exe = std::env::current_exe().context("finding mcpbench itself")?;
    let out = Command::new("taskset")
        .arg("-c")
        .arg(cpu.to_string())
        .arg(exe)
        .arg("sync")
        .args(args)
        .stderr(Stdio::inherit())
        .output()
        .context("running taskset to pin the synchronous client; it comes with util-linux")?;
    if !out.status.success() {
        bail!("the pinned synchronous client failed ({})", out.status);
    }
    let mut v: Value =
        serde_json::from_slice(&out.stdout).context("the pinned client's result is not JSON")?;
    v["cpu"] = json!(cpu);
    Ok(v)
}

/// The lowest CPU this process may run on, from `Cpus_allowed_list` in `/proc/self/status`.
fn first_allowed_cpu() -> Result<usize> {
    let status =
        std::fs::read_to_string("/proc/self/status").context("reading /proc/self/status")?;
    let list = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .context("no Cpus_allowed_list in /proc/self/status")?;
    first_cpu(list).with_context(|| format!("cannot read a CPU from Cpus_allowed_list {list:?}"))
}

/// The first CPU of a kernel CPU list such as `0-1` or `2,4-7`, which lists them in order.
fn first_cpu(list: &str) -> Option<usize> {
    list.trim().split([',', '-']).next()?.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::first_cpu;

    #[test]
    fn the_first_cpu_of_a_list_is_its_lowest() {
        for (list, first) in [
            ("0-1", Some(0)),
            ("2,4-7", Some(2)),
            (" 3\n", Some(3)),
            ("", None),
        ] {
            assert_eq!(first_cpu(list), first, "{list:?}");
        }
    }
}
