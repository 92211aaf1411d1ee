//! `mcpbench untouched`: studio on a database the application made (never `mcpspec init`),
//! served read-only as the seed's server serves it, its derived structures in a mirror under
//! a cache directory of its own. Measured: the first start (the mirror built), a later start
//! (the mirror there), the synchronous median and p90 of substring search, tag filter and
//! primary key, the call that follows a learning another program wrote (the catch-up), and
//! the mirror's size on disk. The same calls on a copy served with `--derive-in-place` (the
//! structures in the file, as `init` makes them) are the floor these are compared with.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use mcpspec_testkit::StdioClient;
use serde_json::{Value, json};

use crate::workload::{Dialect, Kind, Workload};

/// What one server gave.
struct Figures {
    /// Milliseconds from spawn to the `initialize` answer.
    start_ms: f64,
    /// (kind, median µs, p90 µs)
    calls: Vec<(&'static str, f64, f64)>,
}

/// Measures studio on an untouched copy of `rows` learnings in `dir`, `calls` of each kind;
/// the result as JSON.
pub fn run(mcpspec: &Path, rows: usize, dir: &Path, calls: usize) -> Result<Value> {
    std::fs::create_dir_all(dir)?;
    let db = dir.join(format!("untouched-{rows}.db"));
    crate::data::generate_untouched(rows, &db)?;
    let cache = dir.join(format!("cache-{rows}"));
    let _ = std::fs::remove_dir_all(&cache);
    let serve = |extra: &[&str], db: &Path| -> Result<(StdioClient, f64)> {
        let mut c = Command::new(mcpspec);
        c.args(["serve", "studio", "--db"])
            .arg(db)
            .args(extra)
            .env("MCPSPEC_CACHE_DIR", &cache)
            .env("MCPSPEC_LOG", "warn")
            .stderr(Stdio::null());
        let started = Instant::now();
        let mut client = StdioClient::spawn(&mut c)?;
        let init = client.initialize()?;
        if init.get("result").is_none() {
            bail!("initialize failed: {init}");
        }
        Ok((client, started.elapsed().as_secs_f64() * 1e3))
    };
    // The first start builds the mirror; a second finds it.
    let (first, first_ms) = serve(&["--read-only"], &db)?;
    drop(first);
    let (mut warm, warm_ms) = serve(&["--read-only"], &db)?;
    let mirror = measure(&mut warm, rows, calls, warm_ms)?;
    let catch_up = catch_ups(&mut warm, &db, 9)?;
    drop(warm);
    let mirror_bytes = dir_bytes(&cache.join("mirrors"));
    let db_bytes = std::fs::metadata(&db)?.len();
    // The floor: the same data with the structures in the file.
    let in_place_db = dir.join(format!("in-place-{rows}.db"));
    std::fs::copy(&db, &in_place_db)?;
    let (mut placed, _) = serve(&["--derive-in-place"], &in_place_db)?;
    drop(placed.request("tools/list", json!({}))?);
    drop(placed);
    let (mut placed, placed_ms) = serve(&["--read-only"], &in_place_db)?;
    let floor = measure(&mut placed, rows, calls, placed_ms)?;
    drop(placed);
    let calls_json = |f: &Figures| -> Value {
        f.calls
            .iter()
            .map(|(k, median, p90)| (k.to_string(), json!({"median_us": median, "p90_us": p90})))
            .collect::<serde_json::Map<_, _>>()
            .into()
    };
    Ok(json!({
        "rows": rows,
        "first_start_ms": first_ms,
        "start_ms": mirror.start_ms,
        "calls": calls_json(&mirror),
        "catch_up_median_ms": catch_up,
        "database_bytes": db_bytes,
        "mirror_bytes": mirror_bytes,
        "in_place": {"start_ms": floor.start_ms, "calls": calls_json(&floor)},
    }))
}

/// The medians and p90s of `calls` synchronous calls of each read kind.
fn measure(c: &mut StdioClient, rows: usize, calls: usize, start_ms: f64) -> Result<Figures> {
    let mut out = Vec::new();
    for kind in [Kind::Pk, Kind::Search, Kind::Tags] {
        let mut w = Workload::new(kind, Dialect::Studio, rows);
        // Warm the caches and the statements first.
        for _ in 0..calls.min(50) {
            call(c, &w.next_params())?;
        }
        let mut times: Vec<f64> = (0..calls)
            .map(|_| {
                let params = w.next_params();
                let t = Instant::now();
                call(c, &params).map(|()| t.elapsed().as_secs_f64() * 1e6)
            })
            .collect::<Result<_>>()?;
        times.sort_by(f64::total_cmp);
        out.push((
            kind.name(),
            times[times.len() / 2],
            times[times.len() * 9 / 10],
        ));
    }
    Ok(Figures {
        start_ms,
        calls: out,
    })
}

fn call(c: &mut StdioClient, params: &Value) -> Result<()> {
    let r = c.request("tools/call", params.clone())?;
    if r["result"]["isError"] != json!(false) {
        bail!("the call failed: {params} -> {r}");
    }
    Ok(())
}

/// The median time of the search that follows a learning another program wrote: the mirror
/// catches up first. Each of `n` rounds inserts one learning and searches for it.
fn catch_ups(c: &mut StdioClient, db: &Path, n: usize) -> Result<f64> {
    let conn = rusqlite::Connection::open(db)?;
    conn.busy_timeout(Duration::from_secs(5))?;
    let mut times = Vec::new();
    for i in 0..n {
        let word = format!("zebra{i}q");
        conn.execute(
            "INSERT INTO learnings (id, title, problem, solution, tags, created_at, updated_at)
             VALUES (?1, ?2, 'p', 's', '[\"outside\"]', '2000-01-01T00:00:00Z', '2000-01-01T00:00:00Z')",
            rusqlite::params![format!("X-{i}"), format!("A {word} learning")],
        )?;
        let t = Instant::now();
        let r = c.request(
            "tools/call",
            json!({"name": "query_learnings", "arguments": {"search": word}}),
        )?;
        times.push(t.elapsed().as_secs_f64() * 1e3);
        if r["result"]["structuredContent"]["learnings"][0]["id"] != json!(format!("X-{i}")) {
            bail!("the learning written outside was not found: {r}");
        }
    }
    times.sort_by(f64::total_cmp);
    Ok(times[times.len() / 2])
}

/// The bytes of every file in `dir`.
fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.metadata().ok())
        .map(|m| m.len())
        .sum()
}

/// The result as a Markdown section for BENCHMARKS.md.
pub fn markdown(results: &[Value]) -> String {
    let mut md = String::from(
        "## Untouched databases\n\nstudio on a database the application made (its own tables, no mcpspec structure, the default rollback journal), served `--read-only` as the seed's server serves it. The derived structures (trigram index, tag index, newest-first order, id counters) live in a mirror under the cache directory (`bench/src/untouched.rs`); the file is never written. The floor is the same data with the structures in the file (`--derive-in-place` once, then `--read-only`). Synchronous client, one call at a time, times in µs (median / p90).\n\n| learnings | first start (mirror built) | start | primary key | search | tag filter | call after an outside write | database | mirror |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for r in results {
        let c = |k: &str| {
            format!(
                "{:.0} / {:.0}",
                r["calls"][k]["median_us"].as_f64().unwrap_or(0.0),
                r["calls"][k]["p90_us"].as_f64().unwrap_or(0.0)
            )
        };
        let f = |k: &str| {
            format!(
                "{:.0} / {:.0}",
                r["in_place"]["calls"][k]["median_us"]
                    .as_f64()
                    .unwrap_or(0.0),
                r["in_place"]["calls"][k]["p90_us"].as_f64().unwrap_or(0.0)
            )
        };
        let mib = |k: &str| r[k].as_f64().unwrap_or(0.0) / (1024.0 * 1024.0);
        md.push_str(&format!(
            "| {} | {:.0} ms | {:.1} ms | {} (floor {}) | {} (floor {}) | {} (floor {}) | {:.1} ms | {:.1} MiB | {:.1} MiB |\n",
            r["rows"],
            r["first_start_ms"].as_f64().unwrap_or(0.0),
            r["start_ms"].as_f64().unwrap_or(0.0),
            c("pk"),
            f("pk"),
            c("search"),
            f("search"),
            c("tags"),
            f("tags"),
            r["catch_up_median_ms"].as_f64().unwrap_or(0.0),
            mib("database_bytes"),
            mib("mirror_bytes"),
        ));
    }
    md
}

/// `mcpbench untouched --mcpspec BIN --rows N[,N...] --dir DIR --out FILE [--calls N]`.
pub fn command(mcpspec: &Path, rows: &[usize], dir: &Path, calls: usize, out: &Path) -> Result<()> {
    let mut results = Vec::new();
    for &n in rows {
        eprintln!("untouched: {n} learnings");
        results.push(run(mcpspec, n, dir, calls).with_context(|| format!("{n} learnings"))?);
    }
    std::fs::write(out, serde_json::to_string_pretty(&results)?)?;
    print!("{}", markdown(&results));
    Ok(())
}
