//! `mcpbench laminark`: the laminark `search` tool at 10k, 100k and 1M observations.
//!
//! For each size it builds a database of realistic observation text (deterministic), then
//! measures the same queries two ways in the same run: in-process through rusqlite with the
//! tool's own SQL and parameter transform (the floor), and through the real `mcpspec serve
//! laminark` over stdio (median and p99 of sequential calls after warm-up), plus the ping
//! round trip as the protocol overhead and the server's peak RSS.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use crate::client::{Launch, Server};
use crate::rng::Rng;
use crate::stats::Summary;

/// Words observations are made of: a few very common ones, many rare ones.
const COMMON: &[&str] = &[
    "the", "build", "test", "error", "fix", "user", "file", "function", "server", "config",
    "database", "query", "deploy", "cache", "request", "response", "commit", "branch", "review",
    "type",
];
const TOPICS: &[&str] = &[
    "rust",
    "cargo",
    "tokio",
    "async",
    "sqlite",
    "postgres",
    "migration",
    "index",
    "react",
    "hook",
    "render",
    "state",
    "docker",
    "kubernetes",
    "terraform",
    "lambda",
    "queue",
    "kafka",
    "redis",
    "nginx",
    "oauth",
    "token",
    "session",
    "cookie",
    "cors",
    "webpack",
    "vite",
    "eslint",
    "prettier",
    "jest",
    "pytest",
    "fixture",
    "mock",
    "snapshot",
    "regression",
    "latency",
    "throughput",
    "memory",
    "leak",
    "deadlock",
    "mutex",
    "channel",
    "stream",
    "parser",
    "lexer",
    "schema",
    "json",
    "yaml",
    "toml",
    "protobuf",
    "grpc",
    "websocket",
    "timeout",
    "retry",
    "backoff",
    "circuit",
    "breaker",
    "metrics",
    "tracing",
    "logging",
    "alert",
    "dashboard",
    "grafana",
    "prometheus",
    "sentry",
    "panic",
    "unwrap",
    "borrow",
    "lifetime",
    "trait",
    "generic",
    "macro",
    "closure",
    "iterator",
    "vector",
    "hashmap",
    "btree",
    "serde",
    "clap",
    "anyhow",
    "thiserror",
    "workspace",
    "feature",
    "toolchain",
    "clippy",
    "rustfmt",
    "miri",
];
const VERBS: &[&str] = &[
    "failed",
    "passed",
    "broke",
    "fixed",
    "timed out",
    "leaked",
    "slowed down",
    "crashed",
    "returned",
    "skipped",
    "retried",
    "blocked",
    "merged",
    "reverted",
    "upgraded",
];

fn sentence(rng: &mut Rng) -> String {
    let mut words = Vec::new();
    let n = 8 + rng.below(30);
    for i in 0..n {
        let w = if i % 5 == 2 {
            *rng.pick(VERBS)
        } else if rng.chance(45) {
            *rng.pick(COMMON)
        } else {
            *rng.pick(TOPICS)
        };
        words.push(w);
    }
    let mut s = words.join(" ");
    s.push('.');
    s
}

/// Writes a laminark database with `rows` observations over 20 projects.
pub fn generate(mcpspec: &Path, rows: usize, out: &Path) -> Result<()> {
    if out.exists() {
        return Ok(());
    }
    let status = std::process::Command::new(mcpspec)
        .args(["init", "laminark", "--db"])
        .arg(out)
        .stdout(std::process::Stdio::null())
        .status()?;
    if !status.success() {
        bail!("mcpspec init laminark failed");
    }
    let mut conn = rusqlite::Connection::open(out)?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "OFF")?;
    let mut rng = Rng::new(0x1a31_0a4c);
    let tx = conn.transaction()?;
    {
        let mut stmt = tx.prepare(
            "INSERT INTO observations (id, text, source, session_id, project_id, created_at, updated_at, deleted_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6, ?7)",
        )?;
        for i in 0..rows {
            let parts = 1 + rng.below(3);
            let text: Vec<String> = (0..parts).map(|_| sentence(&mut rng)).collect();
            let project = format!("project-{:02}", rng.below(20));
            let session = format!("sess-{:05}", i / 40);
            let minute = i as u64;
            let created = format!(
                "2026-{:02}-{:02}T{:02}:{:02}:00.000Z",
                1 + (minute / 43_200) % 12,
                1 + (minute / 1440) % 28,
                (minute / 60) % 24,
                minute % 60
            );
            let deleted: Option<&str> = rng.chance(2).then_some("2026-12-01T00:00:00.000Z");
            let source = if rng.chance(70) {
                "hook:PostToolUse"
            } else {
                "manual"
            };
            stmt.execute(rusqlite::params![
                format!("obs_{i:08}"),
                text.join(" "),
                source,
                session,
                project,
                created,
                deleted
            ])?;
        }
    }
    tx.commit()?;
    conn.execute_batch("INSERT INTO observations_fts(observations_fts) VALUES ('optimize'); PRAGMA wal_checkpoint(TRUNCATE);")?;
    Ok(())
}

/// The queries every measurement runs: one or two words, common and rare, some with no match.
pub fn queries() -> Vec<String> {
    let mut rng = Rng::new(42);
    (0..200)
        .map(|i| match i % 4 {
            0 => rng.pick(TOPICS).to_string(),
            1 => format!("{} {}", rng.pick(TOPICS), rng.pick(TOPICS)),
            2 => format!("{} {}", rng.pick(COMMON), rng.pick(TOPICS)),
            _ => format!("{} zzqx{}", rng.pick(TOPICS), i),
        })
        .collect()
}

/// The search tool's statement, exactly as compiled into the server.
fn search_sql() -> Result<&'static str> {
    let def = server::server("laminark").context("the laminark server is not compiled in")?;
    let tool = def.tool("search").context("laminark has no search tool")?;
    Ok(tool.binding.statements()[0].sql)
}

/// The floor: the tool's SQL in-process, with the same parameters the server binds.
pub fn floor(db: &Path, queries: &[String], project: &str, rounds: usize) -> Result<Summary> {
    let conn =
        rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)?;
    let sql = search_sql()?;
    let mut stmt = conn.prepare_cached(sql)?;
    let mut samples = Vec::new();
    for round in 0..rounds + 1 {
        for q in queries {
            let t = Instant::now();
            let m_all = mcpspec::__internal::fts5(q, false);
            let m_pre = mcpspec::__internal::fts5(q, true);
            let mut rows = stmt.query(rusqlite::named_params! {
                ":prefix": false, ":match_prefix": m_pre, ":match_all": m_all,
                ":projectId": project, ":limit": 10,
            })?;
            let mut n = 0;
            while let Some(r) = rows.next()? {
                let _: String = r.get("snippet")?;
                n += 1;
            }
            std::hint::black_box(n);
            if round > 0 {
                samples.push(t.elapsed().as_secs_f64() * 1e6);
            }
        }
    }
    Ok(Summary::of(&samples))
}

pub struct Through {
    pub search: Summary,
    pub ping: Summary,
    pub rss_kib: Option<u64>,
}

/// The same queries through the real server over stdio.
pub fn through_server(
    mcpspec: &Path,
    db: &Path,
    queries: &[String],
    project: &str,
    rounds: usize,
) -> Result<Through> {
    let launch = Launch {
        program: mcpspec.display().to_string(),
        args: vec![
            "serve".into(),
            "laminark".into(),
            "--db".into(),
            db.display().to_string(),
        ],
        env: vec![("MCPSPEC_LOG".into(), "warn".into())],
        log: None,
    };
    let mut s = Server::spawn(&launch)?;
    s.handshake()?;
    let mut search = Vec::new();
    let mut ping = Vec::new();
    for round in 0..rounds + 1 {
        for q in queries {
            let t = Instant::now();
            let r = s.request(
                "tools/call",
                json!({"name": "search", "arguments": {"query": q, "projectId": project}}),
            )?;
            let us = t.elapsed().as_secs_f64() * 1e6;
            if let Some(f) = r.failure() {
                bail!("search {q:?} failed: {f}");
            }
            if round > 0 {
                search.push(us);
            }
        }
        for _ in 0..50 {
            let t = Instant::now();
            s.request("ping", json!({}))?;
            if round > 0 {
                ping.push(t.elapsed().as_secs_f64() * 1e6);
            }
        }
    }
    let rss_kib = s.peak_rss_kib();
    s.close(Duration::from_secs(5));
    Ok(Through {
        search: Summary::of(&search),
        ping: Summary::of(&ping),
        rss_kib,
    })
}

/// Runs every size and returns the rows of the report.
pub fn run(mcpspec: &Path, sizes: &[usize], dir: &Path, rounds: usize) -> Result<Vec<Value>> {
    std::fs::create_dir_all(dir)?;
    let queries = queries();
    let mut out = Vec::new();
    for &n in sizes {
        let db: PathBuf = dir.join(format!("laminark-{n}.db"));
        let t = Instant::now();
        generate(mcpspec, n, &db)?;
        eprintln!(
            "laminark {n}: data ready in {:.1} s",
            t.elapsed().as_secs_f64()
        );
        let f = floor(&db, &queries, "project-07", rounds)?;
        let s = through_server(mcpspec, &db, &queries, "project-07", rounds)?;
        let bound = 2.0 * f.median + s.ping.median;
        out.push(json!({
            "rows": n,
            "floor": f.to_json(),
            "server": s.search.to_json(),
            "ping": s.ping.to_json(),
            "server_over_floor_p50": crate::stats::round(s.search.median / f.median),
            "goal_p50_us": crate::stats::round(bound),
            "goal_met": s.search.median <= bound,
            "peak_rss_kib": s.rss_kib,
        }));
        eprintln!(
            "laminark {n}: floor p50 {:.0} us, server p50 {:.0} us (p99 {:.0}), ping {:.0} us, rss {:?} KiB",
            f.median, s.search.median, s.search.p99, s.ping.median, s.rss_kib
        );
    }
    Ok(out)
}

/// The rows as a Markdown table.
pub fn markdown(rows: &[Value]) -> String {
    let mut out = String::from(
        "| observations | in-process floor p50 / p99 | through the server p50 / p99 | server / floor (p50) | ping p50 | goal: p50 <= 2 x floor + ping | peak RSS |\n|---:|---:|---:|---:|---:|---|---:|\n",
    );
    let us = |v: &Value| v.as_f64().map_or("?".to_string(), |x| format!("{x:.0} µs"));
    for r in rows {
        out.push_str(&format!(
            "| {} | {} / {} | {} / {} | {:.2}x | {} | {} ({} µs) | {} |\n",
            r["rows"],
            us(&r["floor"]["median_us"]),
            us(&r["floor"]["p99_us"]),
            us(&r["server"]["median_us"]),
            us(&r["server"]["p99_us"]),
            r["server_over_floor_p50"].as_f64().unwrap_or(f64::NAN),
            us(&r["ping"]["median_us"]),
            if r["goal_met"] == json!(true) {
                "met"
            } else {
                "missed"
            },
            r["goal_p50_us"].as_f64().map_or(0.0, f64::round),
            r["peak_rss_kib"]
                .as_u64()
                .map_or("?".to_string(), |k| format!("{:.1} MiB", k as f64 / 1024.0)),
        ));
    }
    out
}
