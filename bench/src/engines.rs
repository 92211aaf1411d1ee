//! knowledge on its three engines in one run: `kb_get` (a primary-key read) and `kb_search`
//! (ranked full-text search) on SQLite, PostgreSQL and MariaDB, each beside its floor (the
//! same statement, prepared once, through the engine's driver in this process), and MCP
//! Toolbox's `mysql-sql` source on the same MariaDB database. Sequential stdio clients (write a
//! request, block on its answer), then 16 concurrent Streamable HTTP clients.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, ensure};
use serde_json::{Value, json};

use std::time::Instant;

use crate::postgres::{http_server, stdio, throughput, time};
use crate::stats::Summary;

/// The word every bulk row's content holds one of 97, and the other of 89: a search for one
/// word matches about one row in 97, for two about one in 8,633.
fn words(n: usize) -> (String, String) {
    (format!("k{:03}", n % 97), format!("m{:03}", n % 89))
}

/// What `kb_search` looks for: one selective word and a second that narrows it.
const QUERY: &str = "k042 m017";

/// The engines measured, with where each database is.
pub struct Places<'a> {
    pub sqlite: &'a Path,
    pub postgres: &'a str,
    pub mariadb: &'a str,
}

/// A statement of the compiled knowledge server: its text for `dialect` and the argument
/// bound to each placeholder, in order.
fn statement(tool: &str, dialect: &str) -> Result<(String, Vec<&'static str>)> {
    let def = server::server("knowledge").context("the knowledge server")?;
    let tool_def = def.tool(tool).with_context(|| tool.to_string())?;
    let statements = tool_def.binding.statements();
    let st = statements.first().context("a statement")?;
    Ok(match st.text(dialect) {
        Some(t) => (t.sql.to_string(), t.params.to_vec()),
        None if dialect == "sqlite" => (st.sql.to_string(), st.params.to_vec()),
        None => {
            let d = sqlscan::DIALECTS
                .iter()
                .find(|d| d.name == dialect)
                .context("a dialect")?;
            let placed = d.place(st.sql);
            (
                placed.text,
                placed
                    .names
                    .iter()
                    .map(|n| {
                        st.params
                            .iter()
                            .copied()
                            .find(|p| p == n)
                            .unwrap_or("unknown")
                    })
                    .collect(),
            )
        }
    })
}

/// The value each argument of the measured calls binds: the search text as the `fts5`
/// transform quotes it, hybrid mode without a vector (no provider), no role, ten results.
enum Arg {
    Text(String),
    Null,
    Int(i64),
}

fn arg(name: &str, id: &str) -> Arg {
    match name {
        "id" => Arg::Text(id.to_string()),
        "query" => Arg::Text(mcpspec::__internal::fts5(QUERY, false)),
        // The servers run without an embedding provider: a hybrid search is keyword search.
        "mode" => Arg::Text("hybrid".to_string()),
        "limit" => Arg::Int(10),
        _ => Arg::Null,
    }
}

/// Creates knowledge with its sample rows at `location` through `mcpspec init`.
pub(crate) fn init_at(mcpspec: &Path, location: &str) -> Result<()> {
    let out = Command::new(mcpspec)
        .args(["init", "knowledge", "--sample", "--db", location])
        .output()?;
    ensure!(
        out.status.success(),
        "mcpspec init {location}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}

fn fill_sqlite(db: &Path, rows: usize) -> Result<()> {
    let mut conn = rusqlite::Connection::open(db)?;
    let tx = conn.transaction()?;
    {
        let mut st = tx.prepare(
            "INSERT INTO knowledge_entries (id, content, role, tags, created_at, updated_at)
             VALUES (?1, ?2, 'dev', ?3, '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z')",
        )?;
        for n in 1..=rows {
            let (a, b) = words(n);
            st.execute((
                format!("bulk-{n:07}"),
                format!("entry {n} about {a} and {b}"),
                format!("[\"bulk\",\"t{}\"]", n % 13),
            ))?;
        }
    }
    tx.commit()?;
    Ok(())
}

fn fill_postgres(url: &str, rows: usize) -> Result<()> {
    let mut client = postgres::Client::connect(url, postgres::NoTls)?;
    client.batch_execute(&format!(
        "INSERT INTO knowledge_entries (id, content, role, tags)
         SELECT 'bulk-' || lpad(n::text, 7, '0'),
                'entry ' || n || ' about k' || lpad((n % 97)::text, 3, '0') || ' and m' || lpad((n % 89)::text, 3, '0'),
                'dev', ARRAY['bulk', 't' || (n % 13)]
         FROM generate_series(1, {rows}) n;
         ANALYZE knowledge_entries;"
    ))?;
    Ok(())
}

fn fill_mariadb(url: &str, rows: usize) -> Result<()> {
    use mysql::prelude::Queryable;
    let mut conn = mysql::Conn::new(mysql::Opts::from_url(url)?)?;
    conn.query_drop(format!(
        "INSERT INTO knowledge_entries (id, content, role, tags, created_at, updated_at)
         SELECT CONCAT('bulk-', LPAD(seq, 7, '0')),
                CONCAT('entry ', seq, ' about k', LPAD(seq % 97, 3, '0'), ' and m', LPAD(seq % 89, 3, '0')),
                'dev', CONCAT('[\"bulk\",\"t', seq % 13, '\"]'),
                '2026-01-01 00:00:00.000', '2026-01-01 00:00:00.000'
         FROM seq_1_to_{rows}"
    ))?;
    conn.query_drop("ANALYZE TABLE knowledge_entries")?;
    Ok(())
}

/// NULL of whatever type the parameter has (a `vector`, which no Rust type of the driver's
/// binds, included).
#[derive(Debug)]
struct Null;

impl postgres::types::ToSql for Null {
    fn to_sql(
        &self,
        _: &postgres::types::Type,
        _: &mut bytes::BytesMut,
    ) -> Result<postgres::types::IsNull, Box<dyn std::error::Error + Sync + Send>> {
        Ok(postgres::types::IsNull::Yes)
    }

    fn accepts(_: &postgres::types::Type) -> bool {
        true
    }

    postgres::types::to_sql_checked!();
}

/// One call of a measured path.
type Call<'a> = Box<dyn FnMut() -> Result<()> + 'a>;

/// The floor of `tool` on SQLite: its statement through rusqlite (from the connection's
/// statement cache, as mcpspec's own jobs take theirs).
fn floor_sqlite<'a>(conn: &'a rusqlite::Connection, tool: &str, id: &str) -> Result<Call<'a>> {
    let (sql, _) = statement(tool, "sqlite")?;
    let (id, tool) = (id.to_string(), tool.to_string());
    Ok(Box::new(move || {
        let mut st = conn.prepare_cached(&sql)?;
        for i in 1..=st.parameter_count() {
            let name = st
                .parameter_name(i)
                .unwrap_or("")
                .trim_start_matches(':')
                .to_string();
            match arg(&name, &id) {
                Arg::Text(t) => st.raw_bind_parameter(i, t)?,
                Arg::Int(n) => st.raw_bind_parameter(i, n)?,
                Arg::Null => st.raw_bind_parameter(i, rusqlite::types::Null)?,
            }
        }
        let mut rows = st.raw_query();
        ensure!(rows.next()?.is_some(), "{tool} found nothing");
        while rows.next()?.is_some() {}
        Ok(())
    }))
}

/// The floor of `tool` on PostgreSQL: its statement through `postgres`, prepared once.
fn floor_postgres(url: &str, tool: &str, id: &str) -> Result<Call<'static>> {
    let mut client = postgres::Client::connect(url, postgres::NoTls)?;
    let (sql, names) = statement(tool, "postgres")?;
    let st = client.prepare(&sql)?;
    let values: Vec<Box<dyn postgres::types::ToSql + Sync + Send>> = names
        .iter()
        .zip(st.params())
        .map(
            |(name, ty)| -> Box<dyn postgres::types::ToSql + Sync + Send> {
                match (arg(name, id), ty) {
                    (Arg::Text(t), _) => Box::new(t),
                    (Arg::Int(n), &postgres::types::Type::INT4) => Box::new(n as i32),
                    (Arg::Int(n), _) => Box::new(n),
                    (Arg::Null, _) => Box::new(Null),
                }
            },
        )
        .collect();
    let tool = tool.to_string();
    Ok(Box::new(move || {
        let refs: Vec<&(dyn postgres::types::ToSql + Sync)> = values
            .iter()
            .map(|b| &**b as &(dyn postgres::types::ToSql + Sync))
            .collect();
        let rows = client.query(&st, &refs)?;
        ensure!(!rows.is_empty(), "{tool} found nothing");
        Ok(())
    }))
}

/// The floor of `tool` on MariaDB: its statement through `mysql`, prepared once, on a
/// connection made with mcpspec's own options for the URL (TCP as the URL says: the driver's
/// default would switch to the server's Unix socket) and a session set as mcpspec's are
/// (ANSI quotes, `||` joins).
fn floor_mariadb(url: &str, tool: &str, id: &str) -> Result<Call<'static>> {
    use mysql::prelude::Queryable;
    let opts =
        mcpspec::__internal::backend::mysql::opts(url).map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut conn = mysql::Conn::new(opts)?;
    conn.query_drop(
        "SET SESSION sql_mode = CONCAT(@@SESSION.sql_mode, ',ANSI_QUOTES,PIPES_AS_CONCAT')",
    )?;
    let (sql, names) = statement(tool, "mysql")?;
    let st = conn.prep(&sql)?;
    let values: Vec<mysql::Value> = names
        .iter()
        .map(|name| match arg(name, id) {
            Arg::Text(t) => mysql::Value::from(t),
            Arg::Int(n) => mysql::Value::from(n),
            Arg::Null => mysql::Value::NULL,
        })
        .collect();
    let params = mysql::Params::Positional(values);
    let tool = tool.to_string();
    Ok(Box::new(move || {
        let rows: Vec<mysql::Row> = conn.exec(&st, params.clone())?;
        ensure!(!rows.is_empty(), "{tool} found nothing");
        Ok(())
    }))
}

/// How many blocks the floor and mcpspec take turns in, so that a drift of the machine or of
/// the engine (an index settling after the bulk load) weighs on both alike.
const BLOCKS: usize = 6;

/// `calls` calls of each path, after a warm-up of a tenth as many, in alternating blocks.
fn interleaved<'a>(
    calls: usize,
    floor: &mut Call<'a>,
    ours: &mut Call<'a>,
) -> Result<(Summary, Summary)> {
    for _ in 0..calls / 10 {
        floor()?;
        ours()?;
    }
    let (mut f, mut o) = (Vec::with_capacity(calls), Vec::with_capacity(calls));
    for _ in 0..BLOCKS {
        for (call, samples) in [(&mut *floor, &mut f), (&mut *ours, &mut o)] {
            for _ in 0..calls / BLOCKS {
                let t = Instant::now();
                call()?;
                samples.push(t.elapsed().as_secs_f64() * 1e6);
            }
        }
    }
    Ok((Summary::of(&f), Summary::of(&o)))
}

/// MCP Toolbox's configuration for MariaDB: the same database and `kb_get`'s text as a
/// `mysql-sql` tool.
fn toolbox_config(url: &str) -> Result<String> {
    let opts = mysql::Opts::from_url(url)?;
    let (sql, _) = statement("kb_get", "mysql")?;
    Ok(format!(
        "kind: source\nname: kb\ntype: mysql\nhost: {}\nport: \"{}\"\ndatabase: {}\nuser: {}\npassword: {}\n---\n\
         kind: tool\nname: kb_get\ntype: mysql-sql\nsource: kb\ndescription: Get one knowledge entry by id.\n\
         statement: {:?}\nparameters:\n  - name: id\n    type: string\n    description: The entry's UUID.\n",
        opts.get_ip_or_hostname(),
        opts.get_tcp_port(),
        opts.get_db_name().context("a database in the URL")?,
        opts.get_user().context("a user in the URL")?,
        opts.get_pass().unwrap_or(""),
        sql.replace('\n', " ")
    ))
}

/// One measured path.
struct Row {
    engine: &'static str,
    what: String,
    summary: Summary,
    floor: f64,
}

/// `tool` through an mcpspec stdio session on `location`.
fn through_mcpspec(
    mcpspec: &Path,
    location: &str,
    tool: &str,
    args: Value,
) -> Result<Call<'static>> {
    let mut m = stdio(
        Command::new(mcpspec)
            .args(["serve", "knowledge", "--db", location])
            .env("MCPSPEC_LOG", "warn"),
    )?;
    let tool = tool.to_string();
    Ok(Box::new(move || {
        let r = m.call_tool(&tool, args.clone())?;
        ensure!(r["result"]["isError"] == json!(false), "{r}");
        Ok(())
    }))
}

/// Runs every measurement and returns the Markdown tables.
pub fn run(
    mcpspec: &Path,
    toolbox: &Path,
    at: &Places<'_>,
    rows: usize,
    calls: usize,
) -> Result<String> {
    let sqlite = at.sqlite.to_str().context("a UTF-8 path")?;
    init_at(mcpspec, sqlite)?;
    fill_sqlite(at.sqlite, rows)?;
    init_at(mcpspec, at.postgres)?;
    fill_postgres(at.postgres, rows)?;
    init_at(mcpspec, at.mariadb)?;
    fill_mariadb(at.mariadb, rows)?;
    let id = format!("bulk-{:07}", rows / 2);
    // kb_search's statement compares vectors (`vec_distance_cosine`), as the server's
    // connections do with sqlite-vec.
    mcpspec_sqlite::setup();
    let lite = rusqlite::Connection::open(at.sqlite)?;
    let mut out = Vec::new();
    let engines: [(&'static str, &str); 3] = [
        ("SQLite", sqlite),
        ("PostgreSQL", at.postgres),
        ("MariaDB", at.mariadb),
    ];
    for (engine, location) in engines {
        for (tool, args) in [
            ("kb_get", json!({"id": id})),
            ("kb_search", json!({"query": QUERY})),
        ] {
            let mut floor = match engine {
                "SQLite" => floor_sqlite(&lite, tool, &id)?,
                "PostgreSQL" => floor_postgres(at.postgres, tool, &id)?,
                _ => floor_mariadb(at.mariadb, tool, &id)?,
            };
            let mut ours = through_mcpspec(mcpspec, location, tool, args)?;
            let (floor, ours) = interleaved(calls, &mut floor, &mut ours)?;
            let f = floor.median;
            out.push(Row {
                engine,
                what: format!("{tool}: driver floor"),
                summary: floor,
                floor: f,
            });
            out.push(Row {
                engine,
                what: format!("{tool}: mcpspec, stdio"),
                summary: ours,
                floor: f,
            });
        }
    }
    // Toolbox's kb_get on the same MariaDB database.
    let dir = tempfile::tempdir()?;
    let config = dir.path().join("tools.yaml");
    std::fs::write(&config, toolbox_config(at.mariadb)?)?;
    let mut t = stdio(Command::new(toolbox).arg("--config").arg(&config).args([
        "--stdio",
        "--disable-version-check",
        "--disable-reload",
        "--log-level",
        "WARN",
    ]))?;
    let toolbox_get = time(calls, || {
        let r = t.call_tool("kb_get", json!({"id": id}))?;
        ensure!(
            r["result"]["isError"] != json!(true) && r.to_string().contains(&id),
            "{r}"
        );
        Ok(())
    })?;
    drop(t);
    let maria_floor = out
        .iter()
        .find(|r| r.engine == "MariaDB" && r.what == "kb_get: driver floor")
        .map_or(1.0, |r| r.summary.median);
    out.push(Row {
        engine: "MariaDB",
        what: "kb_get: MCP Toolbox (mysql-sql), stdio".into(),
        summary: toolbox_get,
        floor: maria_floor,
    });

    let mut table =
        String::from("| engine | path | median | p99 | median vs floor |\n|---|---|---|---|---|\n");
    for r in &out {
        table += &format!(
            "| {} | {} | {:.0} µs | {:.0} µs | {:.2}× |\n",
            r.engine,
            r.what,
            r.summary.median,
            r.summary.p99,
            r.summary.median / r.floor
        );
    }
    table += &http_table(mcpspec, toolbox, &engines, &config, &id, calls)?;
    Ok(table)
}

/// Sixteen concurrent HTTP clients calling `kb_get`: mcpspec on each engine, and Toolbox on
/// MariaDB.
fn http_table(
    mcpspec: &Path,
    toolbox: &Path,
    engines: &[(&'static str, &str)],
    config: &Path,
    id: &str,
    calls: usize,
) -> Result<String> {
    let clients = 16;
    let per_client = (calls / 4).max(50);
    let mut table = format!(
        "\n| {clients} concurrent HTTP clients, {per_client} `kb_get` calls each after a warm-up of a tenth as many | calls/s | median | p99 |\n|---|---|---|---|\n"
    );
    for (engine, location) in engines {
        let (mut child, addr) = http_server(
            Command::new(mcpspec)
                .args([
                    "serve",
                    "knowledge",
                    "--db",
                    location,
                    "--http",
                    "127.0.0.1:0",
                ])
                .env("MCPSPEC_LOG", "warn")
                .env_remove("MCPSPEC_HTTP_TOKEN"),
            0,
        )?;
        let m = throughput(addr, id, clients, (per_client / 10, per_client), None)?;
        let _ = child.kill();
        let _ = child.wait();
        table += &format!(
            "| mcpspec on {engine} | {:.0} | {:.0} µs | {:.0} µs |\n",
            m.rate, m.latency.median, m.latency.p99
        );
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let (mut child, addr) = http_server(
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
    let m = throughput(addr, id, clients, (per_client / 10, per_client), None)?;
    let _ = child.kill();
    let _ = child.wait();
    table += &format!(
        "| MCP Toolbox on MariaDB | {:.0} | {:.0} µs | {:.0} µs |\n",
        m.rate, m.latency.median, m.latency.p99
    );
    Ok(table)
}
