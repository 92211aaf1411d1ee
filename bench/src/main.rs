//! `mcpbench`: the benchmark harness's command.
//!
//! - `mcpbench gen --mcpspec BIN --rows N --out DB` writes a studio database with N learnings.
//! - `mcpbench measure --name NAME --db DB --rows N [--dialect studio|toolbox] --out FILE -- CMD...`
//!   spawns the stdio MCP server CMD (with `{db}` in its arguments, and `BENCH_DB` in its
//!   environment, set to DB) and measures it; the result is written to FILE as JSON.
//!   It then runs the synchronous client again in a process of its own (`mcpbench sync`),
//!   pinned with `taskset` to one CPU together with the echo floor and the server, and its
//!   primary-key lookups as requests of protocol 2026-07-28, unpinned and pinned.
//! - `mcpbench sync --db DB --rows N [--dialect studio|toolbox] [--pk-only] [--per-request]
//!   -- CMD...` runs the synchronous client and its echo floor alone and prints the result as
//!   JSON; `--per-request` sends requests of protocol 2026-07-28 (no `initialize`, each with
//!   its `_meta`).
//! - `mcpbench drive --kind pk|search|tags|insert --calls N --db DB --rows N -- CMD...` only
//!   drives the server (handshake, then N sequential calls), for running it under a profiler.
//! - `mcpbench floor --db DB --rows N` times `get_learning`'s SQL straight through rusqlite.
//! - `mcpbench http --name NAME --db DB --rows N [--dialect studio|toolbox] [--clients 1,16,64]
//!   [--seconds S] [--rate R] --out FILE -- CMD... [--and CMD...]` starts the Streamable HTTP
//!   server CMD (`{port}` and `{db}` in its arguments) and measures calls/s and p99 with each
//!   number of concurrent clients, calling as fast as answered or, with `--rate`, R calls/s
//!   per server; with `--and`, every server at once, each with that many clients.
//! - `mcpbench report --json OUT --markdown BENCHMARKS.md RUN...` assembles measurements into
//!   the results file and the markdown report, and prints the table.
//! - `mcpbench laminark --mcpspec BIN --sizes 10000,100000,1000000 --dir DIR --out FILE
//!   [--rounds N]` measures laminark's `search` at each size, through the server and in-process.
//! - `mcpbench postgres --mcpspec BIN --toolbox BIN --url URL [--rows N] [--calls N]` measures
//!   knowledge on PostgreSQL against MCP Toolbox's `postgres-sql` source and the driver floor.
//! - `mcpbench engines --mcpspec BIN --toolbox BIN --sqlite PATH --postgres URL --mariadb URL
//!   [--rows N] [--calls N]` measures knowledge's `kb_get` and `kb_search` on its three engines,
//!   each beside its driver floor, and Toolbox's `mysql-sql` source on the same MariaDB.
//! - `mcpbench dev-loop --mcpspec BIN --root DIR [--edits N]` times YAML edit to the new
//!   tool's first answer through `mcpspec dev` and prints each time and the median as JSON.
//! - `mcpbench transports --mcpspec BIN [--calls N]` measures Streamable HTTP against stdio and
//!   the lessons proxy against direct calls to its downstream, and prints a Markdown table.
//! - `mcpbench untouched --mcpspec BIN --rows N[,N] --dir DIR --out FILE [--calls N]` measures
//!   studio on a database the application made, its derived structures in a mirror, against
//!   the same data with them in the file, and prints a Markdown section.
//! - `mcpbench telemetry-path [--calls N]` times telemetry's request path in-process with the
//!   OpenTelemetry set-up the environment asks for, and prints it as JSON.
//! - `mcpbench workbench --mcpspec BIN --db DB --rows N [--calls N] [--rounds N]` measures the
//!   server CPU per call of studio over stdio without the workbench, with `--ui` and no page,
//!   and with a page reading its events, and prints a Markdown table and the JSON.
//! - `mcpbench otlp-sink --port N` answers every OTLP/HTTP export on 127.0.0.1:N with 200 and
//!   keeps nothing, for `bench/telemetry`.

mod client;
mod data;
mod devloop;
mod embeddings;
mod engines;
mod floor;
mod http;
mod laminark;
mod measure;
mod postgres;
mod report;
mod rng;
mod sink;
mod stats;
mod sync;
mod telpath;
mod transports;
mod untouched;
mod workbench;
mod workload;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde_json::json;

/// Command-line flags as `--name value` pairs, and what follows `--`.
struct Args {
    flags: Vec<(String, String)>,
    switches: Vec<String>,
    positional: Vec<String>,
    rest: Vec<String>,
}

const SWITCHES: &[&str] = &["--quick", "--pk-only", "--per-request"];

impl Args {
    fn parse(raw: impl Iterator<Item = String>) -> Result<Args> {
        let mut a = Args {
            flags: Vec::new(),
            switches: Vec::new(),
            positional: Vec::new(),
            rest: Vec::new(),
        };
        let mut raw = raw.peekable();
        while let Some(x) = raw.next() {
            if x == "--" {
                a.rest = raw.collect();
                break;
            } else if SWITCHES.contains(&x.as_str()) {
                a.switches.push(x);
            } else if let Some(name) = x.strip_prefix("--") {
                let value = raw
                    .next()
                    .with_context(|| format!("--{name} needs a value"))?;
                a.flags.push((name.to_string(), value));
            } else {
                a.positional.push(x);
            }
        }
        Ok(a)
    }

    fn get(&self, name: &str) -> Option<&str> {
        self.flags
            .iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    fn all(&self, name: &str) -> Vec<String> {
        self.flags
            .iter()
            .filter(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .collect()
    }

    fn need(&self, name: &str) -> Result<&str> {
        self.get(name)
            .with_context(|| format!("--{name} is required"))
    }

    fn has(&self, switch: &str) -> bool {
        self.switches.iter().any(|s| s == switch)
    }

    /// The number `--NAME` gives, else `default` (required when `None`).
    fn number<T: std::str::FromStr>(&self, name: &str, default: Option<T>) -> Result<T>
    where
        T::Err: std::error::Error + Send + Sync + 'static,
    {
        match (self.get(name), default) {
            (Some(text), _) => text.parse().with_context(|| format!("--{name}")),
            (None, Some(default)) => Ok(default),
            (None, None) => bail!("--{name} is required"),
        }
    }

    /// The path `--NAME` gives (required).
    fn path(&self, name: &str) -> Result<PathBuf> {
        self.need(name).map(PathBuf::from)
    }
}

fn main() -> Result<()> {
    let mut raw = std::env::args().skip(1);
    let command = raw.next().unwrap_or_default();
    let args = Args::parse(raw)?;
    match command.as_str() {
        "gen" => gen_cmd(&args),
        "measure" => measure_cmd(&args),
        "sync" => sync_cmd(&args),
        "http" => http_cmd(&args),
        "drive" => drive_cmd(&args),
        "floor" => floor_cmd(&args),
        "laminark" => laminark_cmd(&args),
        "postgres" => postgres_cmd(&args),
        "engines" => engines_cmd(&args),
        "embeddings" => embeddings_cmd(&args),
        "dev-loop" => dev_loop_cmd(&args),
        "telemetry-path" => {
            println!("{}", telpath::run(args.number("calls", Some(1_000_000))?)?);
            Ok(())
        }
        "workbench" => workbench_cmd(&args),
        "otlp-sink" => sink::run(args.number("port", None)?),
        "untouched" => untouched_cmd(&args),
        "transports" => {
            let calls = args.number("calls", Some(3000))?;
            print!("{}", transports::run(&args.path("mcpspec")?, calls)?);
            Ok(())
        }
        "report" => report_cmd(&args),
        _ => bail!(
            "usage: mcpbench gen|measure|http|drive|floor|laminark|transports|report ... (see the module docs in bench/src/main.rs)"
        ),
    }
}

fn gen_cmd(args: &Args) -> Result<()> {
    let (rows, out) = (args.number("rows", None)?, args.path("out")?);
    data::generate(&args.path("mcpspec")?, rows, &out)?;
    eprintln!("generated {} with {rows} learnings", out.display());
    Ok(())
}

fn floor_cmd(args: &Args) -> Result<()> {
    let (rows, calls) = (
        args.number("rows", None)?,
        args.number("calls", Some(20000))?,
    );
    let v = floor::run(&args.path("db")?, rows, calls)?;
    println!("{}", serde_json::to_string_pretty(&v)?);
    Ok(())
}

fn postgres_cmd(args: &Args) -> Result<()> {
    let (rows, calls) = (
        args.number("rows", Some(10000))?,
        args.number("calls", Some(3000))?,
    );
    let (mcpspec, toolbox) = (args.path("mcpspec")?, args.path("toolbox")?);
    print!(
        "{}",
        postgres::run(&mcpspec, &toolbox, args.need("url")?, rows, calls)?
    );
    Ok(())
}

fn engines_cmd(args: &Args) -> Result<()> {
    let places = engines::Places {
        sqlite: &args.path("sqlite")?,
        postgres: args.need("postgres")?,
        mariadb: args.need("mariadb")?,
    };
    let (mcpspec, toolbox) = (args.path("mcpspec")?, args.path("toolbox")?);
    let (rows, calls) = (
        args.number("rows", Some(10000))?,
        args.number("calls", Some(3000))?,
    );
    print!(
        "{}",
        engines::run(&mcpspec, &toolbox, &places, rows, calls)?
    );
    Ok(())
}

fn embeddings_cmd(args: &Args) -> Result<()> {
    let setup = embeddings::Setup {
        mcpspec: args.path("mcpspec")?,
        model: args.path("model")?,
        python: args.get("python").map(PathBuf::from),
        pg: args.get("postgres").map(str::to_string),
        rows: args.number("rows", Some(100000))?,
        calls: args.number("calls", Some(200))?,
    };
    print!("{}", embeddings::run(&setup)?);
    Ok(())
}

fn workbench_cmd(args: &Args) -> Result<()> {
    let result = workbench::run(
        &args.path("mcpspec")?,
        &args.path("db")?,
        args.number("rows", Some(100000))?,
        args.number("calls", Some(20000))?,
        args.number("rounds", Some(5))?,
    )?;
    print!("{}", workbench::markdown(&result));
    println!("{result}");
    Ok(())
}

fn untouched_cmd(args: &Args) -> Result<()> {
    let rows: Vec<usize> = args
        .need("rows")?
        .split(',')
        .map(|n| n.trim().parse().context("--rows"))
        .collect::<Result<_>>()?;
    let (mcpspec, dir, out) = (args.path("mcpspec")?, args.path("dir")?, args.path("out")?);
    untouched::command(
        &mcpspec,
        &rows,
        &dir,
        args.number("calls", Some(300))?,
        &out,
    )
}

fn report_cmd(args: &Args) -> Result<()> {
    report::run(
        &args.path("json")?,
        &args.path("markdown")?,
        &report::Inputs {
            runs: args.positional.iter().map(PathBuf::from).collect(),
            command: args.get("command").unwrap_or("bench/run").to_string(),
            findings: args.get("findings").map(PathBuf::from),
            edit_loop: args.get("edit-loop").map(PathBuf::from),
            untouched: args.get("untouched").map(PathBuf::from),
            skipped: args.all("skipped"),
        },
    )
}

/// The server command after `--`, with `{db}` replaced and `BENCH_DB` set.
fn launch(args: &Args) -> Result<client::Launch> {
    let db = args.need("db")?.to_string();
    let Some((program, rest)) = args.rest.split_first() else {
        bail!("give the server command after --");
    };
    Ok(client::Launch {
        program: program.clone(),
        args: rest.iter().map(|a| a.replace("{db}", &db)).collect(),
        env: vec![("BENCH_DB".into(), db.clone())],
        log: args.get("log").map(PathBuf::from),
    })
}

/// `laminark`: measures search at each size and writes the results.
fn laminark_cmd(args: &Args) -> Result<()> {
    let sizes: Vec<usize> = args
        .get("sizes")
        .unwrap_or("10000,100000,1000000")
        .split(',')
        .map(|s| s.trim().parse())
        .collect::<Result<_, _>>()
        .context("--sizes")?;
    let rounds: usize = args
        .get("rounds")
        .unwrap_or("3")
        .parse()
        .context("--rounds")?;
    let rows = laminark::run(
        &PathBuf::from(args.need("mcpspec")?),
        &sizes,
        &PathBuf::from(args.need("dir")?),
        rounds,
    )?;
    let doc = json!({"benchmark": "laminark search", "rounds": rounds, "sizes": rows});
    std::fs::write(
        args.need("out")?,
        serde_json::to_string_pretty(&doc)? + "\n",
    )?;
    print!("{}", laminark::markdown(&rows));
    Ok(())
}

/// `dev-loop`: prints each edit's time and the median as JSON.
fn dev_loop_cmd(args: &Args) -> Result<()> {
    let edits: usize = args
        .get("edits")
        .unwrap_or("10")
        .parse()
        .context("--edits")?;
    let mut times = devloop::run(
        &PathBuf::from(args.need("mcpspec")?),
        &PathBuf::from(args.need("root")?),
        edits,
    )?;
    let ms = |t: f64| (t * 1000.0).round() / 1000.0;
    let runs: Vec<f64> = times.iter().copied().map(ms).collect();
    times.sort_by(f64::total_cmp);
    let median = stats::median(&times);
    println!(
        "{}",
        json!({"median_s": ms(median), "max_s": times.last().copied().map(ms), "runs": runs})
    );
    Ok(())
}

fn drive_cmd(args: &Args) -> Result<()> {
    let rows: usize = args.need("rows")?.parse().context("--rows")?;
    let calls: usize = args.need("calls")?.parse().context("--calls")?;
    let kind = match args.get("kind").unwrap_or("pk") {
        "pk" => workload::Kind::Pk,
        "search" => workload::Kind::Search,
        "tags" => workload::Kind::Tags,
        "insert" => workload::Kind::Insert,
        other => bail!("unknown kind {other}"),
    };
    let launch = launch(args)?;
    {
        let mut s = client::Server::spawn(&launch)?;
        s.handshake()?;
        let mut w = workload::Workload::new(kind, workload::Dialect::Studio, rows);
        let start = std::time::Instant::now();
        for _ in 0..calls {
            let r = s.request("tools/call", w.next_params())?;
            if let Some(f) = r.failure() {
                bail!("a call failed: {f}");
            }
        }
        let took = start.elapsed();
        eprintln!(
            "{calls} calls in {:.1} ms ({:.1} µs each); peak RSS {:?} KiB",
            took.as_secs_f64() * 1e3,
            took.as_secs_f64() * 1e6 / calls as f64,
            s.peak_rss_kib()
        );
        s.close(Duration::from_secs(30));
        Ok(())
    }
}

fn dialect(args: &Args) -> Result<workload::Dialect> {
    match args.get("dialect").unwrap_or("studio") {
        "studio" => Ok(workload::Dialect::Studio),
        "toolbox" => Ok(workload::Dialect::Toolbox),
        other => bail!("unknown dialect {other}"),
    }
}

/// `http`: measures the HTTP server after `--` at each client count and writes the result.
fn http_cmd(args: &Args) -> Result<()> {
    let db = args.need("db")?.to_string();
    let rows: usize = args.need("rows")?.parse().context("--rows")?;
    let clients: Vec<usize> = args
        .get("clients")
        .unwrap_or("1,16,64")
        .split(',')
        .map(|s| s.trim().parse())
        .collect::<Result<_, _>>()
        .context("--clients")?;
    let quick = args.has("--quick");
    let plan = http::Plan {
        clients,
        seconds: match args.get("seconds") {
            Some(s) => s.parse().context("--seconds")?,
            None if quick => 0.3,
            None => 3.0,
        },
        warmup_calls: if quick { 5 } else { 50 },
        per_request: args.has("--per-request"),
        rate: args
            .get("rate")
            .map(|r| r.parse().context("--rate"))
            .transpose()?,
    };
    let log = args.get("log").map(PathBuf::from);
    // `-- A... --and B...`: servers measured side by side.
    let commands: Vec<Vec<String>> = args
        .rest
        .split(|a| a == "--and")
        .map(<[String]>::to_vec)
        .collect();
    let result = http::run(&commands, &db, rows, dialect(args)?, &plan, log.as_deref())?;
    let out = json!({
        "kind": "http",
        "contender": args.need("name")?,
        "version": args.get("version"),
        "command": args.rest,
        "db": args.get("label").unwrap_or(&db),
        "quick": quick,
        "result": result,
    });
    let path = args.need("out")?;
    std::fs::write(path, serde_json::to_string_pretty(&out)?)
        .with_context(|| format!("writing {path}"))?;
    Ok(())
}

/// The measuring plan: the default, or tiny budgets with `--quick`.
fn plan(args: &Args) -> measure::Plan {
    let mut plan = measure::Plan::default();
    if args.has("--quick") {
        plan.cold_runs = 3;
        plan.warmup_calls = 20;
        plan.max_calls = 300;
        plan.min_calls = 10;
        plan.budget = Duration::from_millis(400);
    }
    plan
}

/// `sync`: the synchronous client and its echo floor alone; prints the result as JSON.
fn sync_cmd(args: &Args) -> Result<()> {
    let rows: usize = args.need("rows")?.parse().context("--rows")?;
    // `--pk-only` keeps to primary-key lookups, the calls `bench/placement` studies.
    let kinds: &[workload::Kind] = if args.has("--pk-only") {
        &[workload::Kind::Pk]
    } else {
        &workload::Kind::ALL
    };
    // `--per-request` sends requests of protocol 2026-07-28, each with its `_meta`.
    let revision = if args.has("--per-request") {
        sync::Revision::PerRequest
    } else {
        sync::Revision::Session
    };
    let result = sync::run(
        &launch(args)?,
        (dialect(args)?, rows),
        &plan(args),
        kinds,
        revision,
    )?;
    println!("{}", serde_json::to_string(&result)?);
    Ok(())
}

fn measure_cmd(args: &Args) -> Result<()> {
    let db = args.need("db")?.to_string();
    let rows: usize = args.need("rows")?.parse().context("--rows")?;
    let dialect = dialect(args)?;
    let launch = launch(args)?;
    let plan = plan(args);
    let loadavg = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let mut result = measure::run(&launch, dialect, rows, &plan)?;
    // This process's arguments after `measure` serve `mcpbench sync` as they are.
    let sync_args: Vec<String> = std::env::args().skip(2).collect();
    result["pinned"] = sync::pinned(sync_args.clone())?;
    // Primary-key lookups of protocol 2026-07-28, unpinned and pinned; a contender that does
    // not serve that revision gets its error instead.
    let per_request = |pinned: bool| {
        let mut args = vec!["--per-request".to_string(), "--pk-only".to_string()];
        args.extend(sync_args.iter().cloned());
        let run = if pinned {
            sync::pinned(args)
        } else {
            sync::run(
                &launch,
                (dialect, rows),
                &plan,
                &[workload::Kind::Pk],
                sync::Revision::PerRequest,
            )
        };
        run.unwrap_or_else(|e| json!({"error": format!("{e:#}")}))
    };
    result["per_request"] = json!({"sync": per_request(false), "pinned": per_request(true)});
    let out = json!({
        "contender": args.need("name")?,
        "version": args.get("version"),
        "command": std::iter::once(launch.program.clone()).chain(launch.args.clone()).collect::<Vec<_>>(),
        "db": args.get("label").unwrap_or(&db),
        "quick": args.has("--quick"),
        "loadavg_before": loadavg.trim(),
        "result": result,
    });
    let path = args.need("out")?;
    std::fs::write(path, serde_json::to_string_pretty(&out)?)
        .with_context(|| format!("writing {path}"))?;
    Ok(())
}
