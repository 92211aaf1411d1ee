//! One contender on one database: cold start, sequential latency per workload, pipelined
//! throughput, the data returned by fixed check calls, and the server's peak RSS.

use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use serde_json::{Map, Value, json};

use crate::client::{Launch, Server};
use crate::stats::{Summary, round};
use crate::workload::{Dialect, Kind, Workload};

/// How much to measure; the defaults fit a run of a few minutes on two cores.
#[derive(Debug, Clone)]
pub struct Plan {
    pub cold_runs: usize,
    pub warmup_calls: usize,
    pub max_calls: usize,
    pub min_calls: usize,
    /// Time after which a sequential or pipelined phase stops early (after `min_calls`).
    pub budget: Duration,
    pub windows: Vec<usize>,
}

impl Default for Plan {
    fn default() -> Self {
        Plan {
            cold_runs: 10,
            warmup_calls: 200,
            max_calls: 5000,
            min_calls: 30,
            budget: Duration::from_millis(2500),
            windows: vec![1, 8, 64],
        }
    }
}

/// Spawn to `initialize` response and spawn to first `tools/list` response, in µs.
fn cold_start(launch: &Launch, runs: usize) -> Result<(Summary, Summary)> {
    let (mut init, mut list) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        let mut s = Server::spawn(launch)?;
        let r = s.initialize()?;
        init.push(micros(r.at - s.spawned));
        s.notify("notifications/initialized", json!({}))?;
        let r = s.request("tools/list", json!({}))?;
        list.push(micros(r.at - s.spawned));
        s.close(Duration::from_secs(3));
    }
    Ok((Summary::of(&init), Summary::of(&list)))
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// Failures seen in a phase: how many, and the first one in full.
#[derive(Default)]
struct Failures {
    count: usize,
    first: Option<String>,
}

impl Failures {
    fn note(&mut self, why: Option<String>) {
        if let Some(w) = why {
            self.count += 1;
            self.first.get_or_insert(w);
        }
    }

    fn to_json(&self) -> Value {
        json!({"count": self.count, "first": self.first})
    }
}

/// Calls one at a time; returns round-trip times in µs.
fn sequential(
    s: &mut Server,
    w: &mut Workload,
    calls: usize,
    plan: &Plan,
    failures: &mut Failures,
) -> Result<Vec<f64>> {
    let mut out = Vec::with_capacity(calls);
    let start = Instant::now();
    for i in 0..calls {
        if i >= plan.min_calls && start.elapsed() > plan.budget {
            break;
        }
        let params = w.next_params();
        let t0 = Instant::now();
        let id = s.send("tools/call", params)?;
        s.flush()?;
        let r = s.recv()?;
        if r.id != id {
            bail!("response {} arrived while waiting for {id}", r.id);
        }
        out.push(micros(r.at - t0));
        failures.note(r.failure());
    }
    Ok(out)
}

/// Keeps `window` calls in flight; returns (calls completed, calls per second).
fn pipelined(
    s: &mut Server,
    w: &mut Workload,
    window: usize,
    plan: &Plan,
    failures: &mut Failures,
) -> Result<(usize, f64)> {
    let (mut sent, mut done) = (0usize, 0usize);
    let mut stop = false;
    let start = Instant::now();
    loop {
        while !stop && sent < plan.max_calls && sent - done < window {
            s.send("tools/call", w.next_params())?;
            sent += 1;
        }
        s.flush()?;
        if done == sent {
            break;
        }
        let r = s.recv()?;
        done += 1;
        failures.note(r.failure());
        stop = stop || (done >= plan.min_calls && start.elapsed() > plan.budget);
    }
    let secs = start.elapsed().as_secs_f64();
    Ok((done, done as f64 / secs))
}

/// Learning ids in the order they first appear in a response, to compare what contenders return.
pub fn ids_in(text: &str) -> Vec<String> {
    let b = text.as_bytes();
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i + 2 < b.len() {
        if b[i] == b'L' && b[i + 1] == b'-' && b[i + 2].is_ascii_digit() {
            let start = i;
            i += 2;
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
            let id = &text[start..i];
            if !out.iter().any(|x| x == id) {
                out.push(id.to_string());
            }
        } else {
            i += 1;
        }
    }
    out
}

/// Fixed calls whose returned ids must agree across contenders.
fn checks(s: &mut Server, dialect: Dialect, rows: usize) -> Result<Value> {
    let toolbox = dialect == Dialect::Toolbox;
    let pk =
        json!({"name": "get_learning", "arguments": {"id": crate::data::learning_id(rows / 2)}});
    let search = json!({
        "name": if toolbox { "search_learnings" } else { "query_learnings" },
        "arguments": {"search": "Deadlock", "limit": 10}
    });
    let tags = if toolbox {
        json!({"name": "learnings_by_tags", "arguments": {"tags": "[\"rust\",\"caching\"]", "limit": 10}})
    } else {
        json!({"name": "query_learnings", "arguments": {"tags": ["rust", "caching"], "limit": 10}})
    };
    let mut out = Map::new();
    for (name, params) in [("pk", pk), ("search", search), ("tags", tags)] {
        let r = s.request("tools/call", params)?;
        let value = match r.failure() {
            Some(f) => json!({"error": f}),
            None => json!({"ids": ids_in(&r.value["result"].to_string()), "bytes": r.bytes}),
        };
        out.insert(name.into(), value);
    }
    Ok(Value::Object(out))
}

/// Runs the whole plan for one contender on one database.
pub fn run(launch: &Launch, dialect: Dialect, rows: usize, plan: &Plan) -> Result<Value> {
    let (init, list) = cold_start(launch, plan.cold_runs)?;
    let mut s = Server::spawn(launch)?;
    s.handshake()?;
    let tools = s.request("tools/list", json!({}))?;
    let tool_names: Vec<Value> = tools.value["result"]["tools"]
        .as_array()
        .map(|a| a.iter().map(|t| t["name"].clone()).collect())
        .unwrap_or_default();
    let check = checks(&mut s, dialect, rows)?;

    let mut seq = Map::new();
    let mut failures = Map::new();
    let mut cpu_per_pk_call = None;
    for kind in [Kind::Pk, Kind::Search, Kind::Tags] {
        let mut w = Workload::new(kind, dialect, rows);
        let mut f = Failures::default();
        sequential(&mut s, &mut w, plan.warmup_calls, &quick(plan), &mut f)?;
        let cpu_before = s.cpu_ms();
        let lat = sequential(&mut s, &mut w, plan.max_calls, plan, &mut f)?;
        if kind == Kind::Pk
            && let (Some(a), Some(b)) = (cpu_before, s.cpu_ms())
        {
            // Server CPU time (all threads) per sequential lookup, in µs.
            cpu_per_pk_call = Some(round((b - a) * 1000.0 / lat.len() as f64));
        }
        seq.insert(kind.name().into(), Summary::of(&lat).to_json());
        failures.insert(kind.name().into(), f.to_json());
    }
    let mut tput = Map::new();
    let mut f = Failures::default();
    for &n in &plan.windows {
        let mut w = Workload::new(Kind::Pk, dialect, rows);
        let (calls, rate) = pipelined(&mut s, &mut w, n, plan, &mut f)?;
        tput.insert(
            n.to_string(),
            json!({"calls": calls, "calls_per_s": round(rate)}),
        );
    }
    failures.insert("throughput".into(), f.to_json());
    // Inserts come last so that the reads above see the generated data only.
    let mut w = Workload::new(Kind::Insert, dialect, rows);
    let mut f = Failures::default();
    sequential(&mut s, &mut w, plan.warmup_calls / 4, &quick(plan), &mut f)?;
    let lat = sequential(&mut s, &mut w, plan.max_calls, plan, &mut f)?;
    seq.insert("insert".into(), Summary::of(&lat).to_json());
    failures.insert("insert".into(), f.to_json());

    let rss = s.peak_rss_kib();
    let cpu = s.cpu_ms();
    s.close(Duration::from_secs(3));
    // The synchronous client last, in a session of its own, with its echo floor just before.
    let sync = crate::sync::run(
        launch,
        (dialect, rows),
        plan,
        &Kind::ALL,
        crate::sync::Revision::Session,
    )?;
    Ok(json!({
        "sync": sync,
        "rows": rows,
        "cold_start": {"initialize": init.to_json(), "tools_list": list.to_json()},
        "sequential": seq,
        "throughput": tput,
        "peak_rss_kib": rss,
        "server_cpu_ms": cpu,
        "server_cpu_us_per_pk_call": cpu_per_pk_call,
        "failures": failures,
        "tools": tool_names,
        "check": check,
    }))
}

/// The plan for warm-up: a short budget so that slow contenders do not spend long on it.
fn quick(plan: &Plan) -> Plan {
    Plan {
        min_calls: 5,
        budget: plan.budget / 5,
        ..plan.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::ids_in;

    #[test]
    fn ids_are_found_in_order_once_each() {
        let text = r#"{"a":"L-010","b":"x L-2 y","c":"\"L-010\"","d":"L-","e":"AL-7"}"#;
        assert_eq!(ids_in(text), vec!["L-010", "L-2", "L-7"]);
    }
}
