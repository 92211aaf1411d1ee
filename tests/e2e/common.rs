//! Helpers shared by the end-to-end tests, one per kind of outcome: a successful tool result,
//! a tool error (`isError`), a declared JSON-RPC error, and a protocol error.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use mcpspec_testkit::StdioClient;
use serde_json::{Value, json};

pub const EXE: &str = env!("CARGO_BIN_EXE_mcpspec-seeds");
/// The `mcpspec` command with the test doubles (`downstream`, `conformance`) beside the seeds.
pub const TESTBED: &str = env!("CARGO_BIN_EXE_mcpspec-testbed");

/// A `MCPSPEC_REQUEST_STATE_KEY` for servers that must seal alike: replicas, and two servers
/// whose answers a test compares byte for byte (a paged tool's `next_cursor` is sealed with
/// the process's key, random unless it is given).
pub const SHARED_KEY: (&str, &str) = (
    "MCPSPEC_REQUEST_STATE_KEY",
    "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff",
);

/// The binary that serves `server`: the test doubles are only in [`TESTBED`].
pub fn exe_for(server: &str) -> &'static str {
    match server {
        "downstream" | "conformance" => TESTBED,
        _ => EXE,
    }
}

/// A temporary directory with a database initialised from a server's spec.
pub struct Db {
    /// Keeps the directory alive as long as the database is used.
    pub _dir: tempfile::TempDir,
    pub path: PathBuf,
}

/// The databases a server runs on; tests that hold for every engine run once on each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    Sqlite,
    Postgres,
    Mariadb,
}

/// How a test's client reaches the server: stdio, or Streamable HTTP in a session of protocol
/// 2025-11-25 (what Claude Code and the TypeScript SDK 1.x negotiate) or with requests of
/// protocol 2026-07-28 (no session, each request carrying its version).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    Stdio,
    Http,
    HttpPerRequest,
}

/// Generates, for each named `fn name(engine: Engine, transport: Transport)`, a module `name`
/// with one test per engine and transport (`name::sqlite_stdio`, `name::postgres_http`,
/// `name::postgres_http_2026`, ...), so that no engine × transport × protocol revision goes
/// untested.
#[macro_export]
macro_rules! on_every_engine_and_transport {
    ($($name:ident),* $(,)?) => {
        $crate::on_engines_and_transports!([
            Sqlite => (sqlite_stdio, sqlite_http, sqlite_http_2026),
            Postgres => (postgres_stdio, postgres_http, postgres_http_2026),
            Mariadb => (mariadb_stdio, mariadb_http, mariadb_http_2026),
        ] $($name),*);
    };
}

/// Generates, for each named `fn name(engine: Engine, transport: Transport)`, a module `name`
/// with one test per engine of the bracketed list and per transport: `Engine => (stdio test,
/// HTTP test, HTTP 2026-07-28 test)`. SQLite's are in the quick tier, a database server's in
/// the full one. The macros around it name the lists the tests use.
#[macro_export]
macro_rules! on_engines_and_transports {
    ($engines:tt $($name:ident),* $(,)?) => {$(
        $crate::on_engines_and_transports!(@one $name $engines);
    )*};
    (@one $name:ident [$($engine:ident => ($stdio:ident, $http:ident, $http_2026:ident)),+ $(,)?]) => {
        mod $name {$(
            $crate::on_engines_and_transports!(@case $name $stdio $engine Stdio);
            $crate::on_engines_and_transports!(@case $name $http $engine Http);
            $crate::on_engines_and_transports!(@case $name $http_2026 $engine HttpPerRequest);
        )+}
    };
    (@case $name:ident $test:ident Sqlite $transport:ident) => {
        #[test]
        fn $test() {
            super::$name($crate::common::Engine::Sqlite, $crate::common::Transport::$transport)
        }
    };
    (@case $name:ident $test:ident $engine:ident $transport:ident) => {
        #[cfg(feature = "full")]
        #[test]
        fn $test() {
            super::$name($crate::common::Engine::$engine, $crate::common::Transport::$transport)
        }
    };
}

/// Generates, for each named `fn name(engine: Engine)`, a module `name` with one test per
/// engine of the bracketed list (`[sqlite => Sqlite, ...]`: the test's name, then the
/// `Engine`). The macros below name the lists the tests use.
#[macro_export]
macro_rules! on_engines {
    ($engines:tt $($name:ident),* $(,)?) => {$(
        $crate::on_engines!(@one $name $engines);
    )*};
    (@one $name:ident [$($test:ident => $engine:ident),+ $(,)?]) => {
        mod $name {$(
            $crate::on_engines!(@case $name $test $engine);
        )+}
    };
    // SQLite is in the quick tier; a database server's case is in the full tier.
    (@case $name:ident $test:ident Sqlite) => {
        #[test]
        fn $test() {
            super::$name($crate::common::Engine::Sqlite)
        }
    };
    (@case $name:ident $test:ident $engine:ident) => {
        #[cfg(feature = "full")]
        #[test]
        fn $test() {
            super::$name($crate::common::Engine::$engine)
        }
    };
}

/// One test per engine (`name::sqlite`, `name::postgres`, `name::mariadb`).
#[macro_export]
macro_rules! on_every_engine {
    ($($name:ident),* $(,)?) => {
        $crate::on_engines!([sqlite => Sqlite, postgres => Postgres, mariadb => Mariadb] $($name),*);
    };
}

/// One test per engine that holds vectors (`name::sqlite` with sqlite-vec, `name::postgres`
/// with pgvector; MariaDB before 11.7 has none).
#[macro_export]
macro_rules! on_every_vector_engine {
    ($($name:ident),* $(,)?) => {
        $crate::on_engines!([sqlite => Sqlite, postgres => Postgres] $($name),*);
    };
}

/// One test per engine that holds vectors and per transport (stdio, HTTP with a session,
/// HTTP of protocol 2026-07-28).
#[macro_export]
macro_rules! on_every_vector_engine_and_transport {
    ($($name:ident),* $(,)?) => {
        $crate::on_engines_and_transports!([
            Sqlite => (sqlite_stdio, sqlite_http, sqlite_http_2026),
            Postgres => (postgres_stdio, postgres_http, postgres_http_2026),
        ] $($name),*);
    };
}

/// One test per engine a team of replicas shares (`name::postgres`, `name::mariadb`).
#[macro_export]
macro_rules! on_every_engine_of_a_team {
    ($($name:ident),* $(,)?) => {
        $crate::on_engines!([postgres => Postgres, mariadb => Mariadb] $($name),*);
    };
}

/// One test per engine whose calls run on the HTTP runtime's workers (`name::sqlite`,
/// `name::postgres`; MariaDB's run on the blocking pool).
#[macro_export]
macro_rules! on_every_engine_on_the_workers {
    ($($name:ident),* $(,)?) => {
        $crate::on_engines!([sqlite => Sqlite, postgres => Postgres] $($name),*);
    };
}

/// A database with a server's sample rows on `engine`: a SQLite file, or a new database in
/// the test process's PostgreSQL cluster or MariaDB server (its URL is the `path`, passed as
/// `--db`).
pub fn sample_db_on(engine: Engine, server: &str) -> Db {
    match engine {
        Engine::Sqlite => sample_db(server),
        Engine::Postgres => sample_db_at(
            &crate::pg::Cluster::for_server(server).create_database(),
            server,
        ),
        Engine::Mariadb => sample_db_at(&crate::maria::Server::shared().create_database(), server),
    }
}

/// Runs `sql` on `db`, a database on `engine`, with that engine's own client; what it printed
/// (one value per line, columns separated by `|` on PostgreSQL and a tab on MariaDB). SQLite
/// returns the first column of the first row.
pub fn sql_on(engine: Engine, db: &Path, sql: &str) -> String {
    let at = db.to_str().expect("a UTF-8 location");
    match engine {
        Engine::Postgres => crate::pg::Cluster::of(at).psql(at, sql),
        Engine::Mariadb => crate::maria::Server::shared().sql(at, sql),
        Engine::Sqlite => {
            let conn = rusqlite::Connection::open(db).expect("open the database");
            let mut stmt = conn.prepare(sql).expect("prepare the SQL");
            if stmt.column_count() == 0 {
                stmt.raw_execute().expect("run the SQL");
                return String::new();
            }
            stmt.query_row([], |r| r.get::<_, rusqlite::types::Value>(0))
                .map(|v| match v {
                    rusqlite::types::Value::Integer(i) => i.to_string(),
                    rusqlite::types::Value::Real(f) => f.to_string(),
                    rusqlite::types::Value::Text(t) => t,
                    _ => String::new(),
                })
                .unwrap_or_default()
        }
    }
}

/// The database server's own directory, which no message may show; a SQLite file's directory.
pub fn server_dir(engine: Engine, db: &Path) -> String {
    match engine {
        Engine::Sqlite => db.parent().unwrap().to_string_lossy().into_owned(),
        Engine::Postgres => crate::pg::Cluster::of(&db.to_string_lossy())
            .dir
            .display()
            .to_string(),
        Engine::Mariadb => crate::maria::Server::shared().dir.display().to_string(),
    }
}

/// The database at `url` (PostgreSQL or MariaDB) made a server's sample database (`mcpspec
/// init --sample`); its URL is the `path`, passed as `--db`.
pub fn sample_db_at(url: &str, server: &str) -> Db {
    let (code, _, err) = mcpspec(&["init", server, "--sample", "--db", url], &[]);
    assert_eq!(code, 0, "init on {url} failed: {err}");
    Db {
        _dir: tempfile::tempdir().expect("tempdir"),
        path: PathBuf::from(url),
    }
}

/// [`start`] on `engine`.
pub fn start_engine(engine: Engine, server: &str, extra: &[&str]) -> Session {
    start_on(sample_db_on(engine, server), server, extra)
}

/// [`start_on`] over `transport`.
pub fn start_over(transport: Transport, db: Db, server: &str, extra: &[&str]) -> Session {
    start_over_with(transport, db, server, extra, &[])
}

/// [`start_over`] with `env` set for the server.
pub fn start_over_with(
    transport: Transport,
    db: Db,
    server: &str,
    extra: &[&str],
    env: &[(&str, &str)],
) -> Session {
    let per_request = match transport {
        Transport::Stdio => {
            let mut c = Command::new(exe_for(server));
            c.args(["serve", server, "--db"])
                .arg(&db.path)
                .args(extra)
                .env("MCPSPEC_LOG", "warn")
                .envs(env.iter().copied())
                .stderr(if std::env::var_os("E2E_STDERR").is_some() {
                    Stdio::inherit()
                } else {
                    Stdio::null()
                });
            return start_command(&mut c, db);
        }
        Transport::Http => false,
        Transport::HttpPerRequest => true,
    };
    let mut args = vec![server, "--db", db.path.to_str().expect("a UTF-8 path")];
    args.extend_from_slice(extra);
    let mut env = env.to_vec();
    env.push(("MCPSPEC_STARTUP_JOBS", "off"));
    let server = crate::http::HttpServer::serve(&args, &env);
    let mut client = if per_request {
        mcpspec_testkit::HttpClient::per_request(server.addr, None)
    } else {
        let mut c = mcpspec_testkit::HttpClient::new(server.addr, None);
        let init = c.initialize().expect("initialize");
        assert!(init.get("result").is_some(), "initialize failed: {init}");
        c
    };
    let list = client.request("tools/list", json!({})).expect("tools/list");
    let tools = list["result"]["tools"]
        .as_array()
        .cloned()
        .unwrap_or_else(|| panic!("tools array: {list}"));
    Session {
        client: Client::Http {
            server: Box::new(server),
            client,
        },
        db,
        tools,
    }
}

/// A server with `server`'s sample rows on `engine`, reached over `transport`.
pub fn start_engine_over(
    engine: Engine,
    transport: Transport,
    server: &str,
    extra: &[&str],
) -> Session {
    start_over(transport, sample_db_on(engine, server), server, extra)
}

pub fn sample_db(server: &str) -> Db {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join(format!("{server}.db"));
    let out = Command::new(EXE)
        .args(["init", server, "--sample", "--db"])
        .arg(&path)
        .output()
        .expect("run mcpspec init");
    assert!(
        out.status.success(),
        "init failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Db { _dir: dir, path }
}

/// A running server with an initialized MCP session.
pub struct Session {
    pub client: Client,
    pub db: Db,
    tools: Vec<Value>,
}

/// A session's client: over the server's stdio, or over HTTP to a server it started.
pub enum Client {
    Stdio(StdioClient),
    Http {
        server: Box<crate::http::HttpServer>,
        client: mcpspec_testkit::HttpClient,
    },
}

impl Client {
    /// Sends a request and returns its response message.
    pub fn request(
        &mut self,
        method: &str,
        params: Value,
    ) -> Result<Value, mcpspec_testkit::ClientError> {
        match self {
            Client::Stdio(c) => c.request(method, params),
            Client::Http { client, .. } => client.request(method, params),
        }
    }

    /// `tools/call`, returning the whole response message.
    pub fn call_tool(
        &mut self,
        name: &str,
        arguments: Value,
    ) -> Result<Value, mcpspec_testkit::ClientError> {
        self.request("tools/call", json!({"name": name, "arguments": arguments}))
    }
}

pub fn start(server: &str, extra: &[&str]) -> Session {
    start_on(sample_db(server), server, extra)
}

/// `mcpspec serve SERVER --db DB EXTRA` over stdio. Its log is dropped; with `E2E_STDERR` set
/// in the environment it goes to the test's stderr, to read why a call failed.
pub fn start_on(db: Db, server: &str, extra: &[&str]) -> Session {
    start_command(
        Command::new(exe_for(server))
            .args(["serve", server, "--db"])
            .arg(&db.path)
            .args(extra)
            .env("MCPSPEC_LOG", "warn")
            .stderr(if std::env::var_os("E2E_STDERR").is_some() {
                Stdio::inherit()
            } else {
                Stdio::null()
            }),
        db,
    )
}

/// A session with a server started by `command`, which the caller set up (environment,
/// working directory, stderr).
pub fn start_command(command: &mut Command, db: Db) -> Session {
    // Start-up jobs (the lessons scan of ~/.claude/projects) would make other tests depend
    // on the machine; the tests about jobs start their servers themselves.
    command.env("MCPSPEC_STARTUP_JOBS", "off");
    let mut client = StdioClient::spawn(command).expect("spawn server");
    let init = client.initialize().expect("initialize");
    assert!(init.get("result").is_some(), "initialize failed: {init}");
    let list = client.request("tools/list", json!({})).expect("tools/list");
    let tools = list["result"]["tools"]
        .as_array()
        .cloned()
        .expect("tools array");
    Session {
        client: Client::Stdio(client),
        db,
        tools,
    }
}

/// A server without a database, working on the project in `dir`, whose client declares
/// `capabilities` in `initialize`. The session's `db` is the project directory.
pub fn start_project(server: &str, dir: tempfile::TempDir, capabilities: Value) -> Session {
    let mut client = StdioClient::spawn(
        Command::new(exe_for(server))
            .args(["serve", server])
            .current_dir(dir.path())
            .env("MCPSPEC_LOG", "warn")
            .stderr(Stdio::null()),
    )
    .expect("spawn server");
    let init = client
        .request(
            "initialize",
            json!({
                "protocolVersion": "2025-11-25",
                "capabilities": capabilities,
                "clientInfo": {"name": "e2e", "version": "1"}
            }),
        )
        .expect("initialize");
    assert!(init.get("result").is_some(), "initialize failed: {init}");
    client
        .notify("notifications/initialized", json!({}))
        .expect("initialized");
    let list = client.request("tools/list", json!({})).expect("tools/list");
    let tools = list["result"]["tools"]
        .as_array()
        .cloned()
        .expect("tools array");
    let path = dir.path().to_path_buf();
    Session {
        client: Client::Stdio(client),
        db: Db { _dir: dir, path },
        tools,
    }
}

impl Session {
    pub fn tool(&self, name: &str) -> &Value {
        self.tools
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("no tool {name} in tools/list"))
    }

    pub fn tools(&self) -> &[Value] {
        &self.tools
    }

    /// Checks that `tools/list` publishes every compiled tool of `server` in spec order, and
    /// the seed document's `seed` tools among them in that order. Tools a user adds (as the
    /// README's "Add a tool" does) keep this true.
    pub fn lists_seed_tools(&self, server: &str, seed: &[&str]) {
        let names: Vec<&str> = self
            .tools
            .iter()
            .map(|t| t["name"].as_str().expect("a tool name"))
            .collect();
        let compiled: Vec<&str> = server::server(server)
            .expect("a compiled server")
            .tools
            .iter()
            .map(|t| t.name)
            .collect();
        assert_eq!(names, compiled);
        let in_order: Vec<&str> = names.iter().copied().filter(|n| seed.contains(n)).collect();
        assert_eq!(in_order, seed);
    }

    /// The stdio client, for what only stdio has (raw lines, the process).
    pub fn stdio(&mut self) -> &mut StdioClient {
        match &mut self.client {
            Client::Stdio(c) => c,
            Client::Http { .. } => panic!("this session is over HTTP"),
        }
    }

    /// The raw response to `tools/call`.
    pub fn call(&mut self, tool: &str, args: Value) -> Value {
        self.client
            .call_tool(tool, args)
            .expect("tools/call response")
    }

    /// A successful call: returns `structuredContent`, after checking that it conforms to the
    /// tool's published output schema and that the text content carries the same JSON.
    pub fn ok(&mut self, tool: &str, args: Value) -> Value {
        let response = self.call(tool, args.clone());
        let result = &response["result"];
        assert_eq!(
            result["isError"],
            json!(false),
            "{tool} {args} failed: {response}"
        );
        let structured = result["structuredContent"].clone();
        assert!(
            structured.is_object(),
            "{tool}: structuredContent must be an object: {response}"
        );
        let text: Value =
            serde_json::from_str(result["content"][0]["text"].as_str().expect("text content"))
                .expect("text content is JSON");
        assert_eq!(
            text, structured,
            "{tool}: text and structured content differ"
        );
        let schema = &self.tool(tool)["outputSchema"];
        let validator = jsonschema::validator_for(schema).expect("output schema compiles");
        let errors: Vec<String> = validator
            .iter_errors(&structured)
            .map(|e| e.to_string())
            .collect();
        assert!(
            errors.is_empty(),
            "{tool}: result violates its outputSchema: {errors:?}\n{structured}"
        );
        structured
    }

    /// A tool error: returns the `error` object of the text content, after checking that the
    /// result is flagged `isError` and carries no structured content.
    pub fn tool_error(&mut self, tool: &str, args: Value) -> Value {
        let response = self.call(tool, args.clone());
        let result = &response["result"];
        assert_eq!(
            result["isError"],
            json!(true),
            "{tool} {args} should fail: {response}"
        );
        assert!(
            result.get("structuredContent").is_none(),
            "errors carry no structuredContent"
        );
        let text: Value =
            serde_json::from_str(result["content"][0]["text"].as_str().expect("text"))
                .expect("error text is JSON");
        text["error"].clone()
    }

    /// A declared error: returns the JSON-RPC `error` object after checking that there is no
    /// result, that the code is in the server range, and that `data.code` names the error.
    pub fn rpc_error(&mut self, tool: &str, args: Value) -> Value {
        let response = self.call(tool, args.clone());
        assert!(
            response.get("result").is_none(),
            "{tool} {args} should be a JSON-RPC error: {response}"
        );
        let error = response["error"].clone();
        let code = error["code"].as_i64().expect("numeric code");
        assert!(
            (-32099..=-32000).contains(&code),
            "{tool}: code {code} is outside the server range"
        );
        assert!(error["data"]["code"].is_string(), "data.code: {error}");
        error
    }

    /// A protocol error in answer to a raw line: returns the whole response.
    pub fn raw(&mut self, line: &str) -> Value {
        let c = self.stdio();
        c.send_line(line).expect("send");
        c.recv(Duration::from_secs(10))
            .expect("a response to every line")
    }

    /// Ends the session, by closing stdin or (over HTTP) ending the session and sending
    /// SIGTERM; the server must exit 0.
    pub fn finish(self) -> Db {
        let status = match self.client {
            Client::Stdio(c) => c.finish(Duration::from_secs(10)),
            Client::Http { server, mut client } => {
                if client.session.is_some() {
                    assert_eq!(client.delete_session().expect("DELETE"), 204);
                }
                Some(server.terminate())
            }
        };
        assert!(
            status.is_some_and(|s| s.success()),
            "server exit: {status:?}"
        );
        self.db
    }
}

/// Runs `mcpspec` with arguments and returns (exit code, stdout, stderr).
pub fn mcpspec(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut c = Command::new(EXE);
    c.args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().expect("run mcpspec");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

pub fn count_rows(db: &Path, table: &str) -> i64 {
    let server = match db.to_str() {
        Some(u) if u.starts_with("postgresql://") => Some(Engine::Postgres),
        Some(u) if u.starts_with("mysql://") => Some(Engine::Mariadb),
        _ => None,
    };
    if let Some(engine) = server {
        return sql_on(engine, db, &format!("SELECT count(*) FROM {table}"))
            .parse()
            .expect("a count");
    }
    let conn = rusqlite::Connection::open(db).expect("open db");
    conn.query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))
        .expect("count")
}

/// Sends a signal (`-TERM`, `-KILL`) to a process.
pub fn signal(pid: u32, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .expect("kill");
    assert!(ok.success());
}

/// A process's resident memory (`VmRSS`), in KiB.
pub fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .expect("the process's status")
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .expect("VmRSS")
}
