//! The command line of a server binary: serve a compiled spec over stdio or Streamable HTTP,
//! call one tool, create a database, run a demo session, list what was compiled, or set up a
//! proxy. A binary lists its [`Server`]s and calls [`main`]; the `mcpspec` binary is one such
//! user, a crate made by `mcpspec new` another.

pub(crate) mod demo;
pub mod dev;
pub mod examples;
mod migrate;
mod skill;
mod tokens;

pub use tokens::{Cost, list_costs};

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, anyhow};
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

use crate::backend::Location;
use crate::backend::paths as db;
use crate::def::ServerDef;
use crate::engine::{CallError, Engine, Limits};
use crate::handler::Dispatch;

/// A compiled server and the handlers of its handler tools: one entry of a binary's registry.
pub struct Server {
    def: &'static ServerDef,
    handlers: Option<Box<dyn Dispatch>>,
}

impl Server {
    /// A server whose tools are all SQL or proxied: its generated definition alone.
    pub fn new(def: &'static ServerDef) -> Server {
        Server {
            def,
            handlers: None,
        }
    }

    /// A server with handler tools or resources, with its generated `dispatcher` over the
    /// handlers, e.g. `Server::with_handlers(&notes::SERVER, notes::dispatcher(Notes))`.
    pub fn with_handlers(def: &'static ServerDef, handlers: Box<dyn Dispatch>) -> Server {
        Server {
            def,
            handlers: Some(handlers),
        }
    }

    /// The generated definition.
    pub fn def(&self) -> &'static ServerDef {
        self.def
    }
}

#[derive(Parser)]
#[command(version, about = "MCP servers compiled from YAML specs")]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

/// The server a command works on: a compiled one by name, or a spec file served from its YAML.
#[derive(clap::Args)]
#[group(required = true, multiple = false)]
struct Target {
    /// The compiled server's name, as in `list`.
    server: Option<String>,
    /// A spec file to serve from its YAML, through the same engine as a compiled server (SQL,
    /// content and proxied tools, resources and prompts; handler tools need a crate of their
    /// own, made by `mcpspec new`).
    #[arg(long, value_name = "FILE")]
    spec: Option<PathBuf>,
}

#[derive(Subcommand)]
enum Cmd {
    /// Serve a compiled server or a spec file over stdio (for Claude Code and other MCP
    /// clients), or over Streamable HTTP with `--http`.
    Serve(Box<ServeArgs>),
    /// Run one tool call and print its result as JSON; exits 1 when the tool fails.
    #[command(
        override_usage = "call <SERVER> <TOOL> [ARGUMENTS]\n       call --spec <FILE> <TOOL> [ARGUMENTS]"
    )]
    Call {
        /// [SERVER] TOOL [ARGUMENTS]: the compiled server's name (not with --spec), the tool, and
        /// its arguments as a JSON object (default `{}`).
        #[arg(num_args = 1..=3, required = true, value_name = "ARG")]
        words: Vec<String>,
        /// A spec file to serve from its YAML instead of a compiled server.
        #[arg(long, value_name = "FILE")]
        spec: Option<PathBuf>,
        #[arg(long)]
        db: Option<PathBuf>,
        #[arg(long)]
        read_only: bool,
        /// As for `serve`.
        #[arg(long)]
        derive_in_place: bool,
    },
    /// Create a database from the spec's schema; never changes an existing database.
    Init {
        #[command(flatten)]
        target: Target,
        /// The database file to create, or a postgres:// or mysql:// URL of an empty database.
        #[arg(long)]
        db: PathBuf,
        /// Also load the spec's sample rows.
        #[arg(long)]
        sample: bool,
    },
    /// Apply the spec's migrations that the database lacks, in order, recording each in its
    /// mcpspec_migrations table; a database without that table is first matched to the
    /// version it is at. Never run by itself on another application's database.
    Migrate {
        #[command(flatten)]
        target: Target,
        /// The database file, or a postgres:// or mysql:// URL (else the spec's environment
        /// variables and default path, as for `serve`).
        #[arg(long)]
        db: Option<PathBuf>,
        /// Say what would be applied, and change nothing.
        #[arg(long)]
        dry_run: bool,
        /// For a database without a migrations table: the version it is at (found from its
        /// schema on SQLite when not given).
        #[arg(long, value_name = "VERSION")]
        baseline: Option<u32>,
    },
    /// Start the server on a scratch database with sample rows and drive a scripted session.
    Demo {
        #[command(flatten)]
        target: Target,
    },
    /// What each tool and each toolset costs a client's context: the size of its entry in
    /// `tools/list` and an estimate in tokens.
    Tokens {
        #[command(flatten)]
        target: Target,
    },
    /// Write a skill (Agent Skills layout, `DIR/<server>-tools/SKILL.md`) that teaches an agent
    /// to use the server's tools, from their titles, descriptions, arguments, examples and
    /// error codes; serve it with `skills:` once edited to taste.
    Skills {
        #[command(flatten)]
        target: Target,
        /// The directory the skill's directory is written in.
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
        /// Replace an existing SKILL.md.
        #[arg(long)]
        force: bool,
    },
    /// List the compiled servers and their tools, or the server and tools of a spec file.
    List {
        /// A spec file whose server and tools to list, instead of the compiled servers.
        #[arg(long, value_name = "FILE")]
        spec: Option<PathBuf>,
    },
    /// Run the spec's `examples:`: on a scratch database with the sample rows, or with --db
    /// on a live database, every write rolled back. Exits 1 when an example fails.
    Test {
        #[command(flatten)]
        target: Target,
        /// A live database file or postgres:// or mysql:// URL; its data is left as it was.
        #[arg(long)]
        db: Option<PathBuf>,
    },
}

/// The options of `serve`.
#[derive(clap::Args)]
struct ServeArgs {
    #[command(flatten)]
    target: Target,
    /// The database file, or a postgres:// or mysql:// URL for a server that runs on a
    /// database server; overrides the spec's environment variables and default path.
    #[arg(long)]
    db: Option<PathBuf>,
    /// Refuse every tool that changes the database.
    #[arg(long)]
    read_only: bool,
    /// Build the spec's derived structures (indexes, full-text and side tables) in a
    /// database mcpspec did not create, instead of in a mirror under the cache directory.
    #[arg(long)]
    derive_in_place: bool,
    /// Apply the spec's migrations that the database lacks before serving, when the
    /// database is new or mcpspec's migrations made it (replicas starting together
    /// apply each once); another application's database needs an explicit `migrate`.
    #[arg(long, conflicts_with = "read_only")]
    migrate: bool,
    /// Offer only the tools of this toolset (the spec's `toolsets:`); repeatable, the
    /// sets' tools together. Other tools are neither listed nor called.
    #[arg(long, value_name = "NAME")]
    toolset: Vec<String>,
    /// Serve the workbench at http://ADDR/ (a loopback address, e.g. 127.0.0.1:7777; port 0
    /// picks a free one): a page that shows, live, every call this server handles, its
    /// client's over stdio included, or its clients' over Streamable HTTP, and tries its
    /// tools, resources, prompts and examples. Beside --http, `--ui` without an address
    /// serves it at /ui/ on the MCP listener, behind the same token or OAuth. Off by default.
    #[arg(long, value_name = "ADDR", num_args = 0..=1)]
    ui: Option<Option<std::net::SocketAddr>>,
    /// Keep the last 1,000 calls while no workbench page is open too, for a page opened later
    /// (about 3 % more CPU a call at worst; bench/WORKBENCH.md). Without it a page shows the
    /// calls made while a page was open, and keeping none costs nothing measurable.
    #[arg(long, requires = "ui")]
    ui_history: bool,
    #[command(flatten)]
    http: Box<HttpArgs>,
}

/// The Streamable HTTP options of `serve`.
#[derive(clap::Args)]
struct HttpArgs {
    /// Serve Streamable HTTP at http://ADDR/mcp instead of stdio, e.g. 127.0.0.1:8080 (port 0
    /// picks a free port). A non-loopback address requires a token.
    #[arg(long, value_name = "ADDR")]
    http: Option<std::net::SocketAddr>,
    /// Read the bearer token from this environment variable (default: MCPSPEC_HTTP_TOKEN).
    #[arg(
        long,
        value_name = "VAR",
        requires = "http",
        conflicts_with = "token_file"
    )]
    token_env: Option<String>,
    /// Read the bearer token from this file (surrounding whitespace is ignored).
    #[arg(long, value_name = "PATH", requires = "http")]
    token_file: Option<PathBuf>,
    /// Also accept this Host header value (host or host:port, exactly as clients send it);
    /// repeatable.
    #[arg(long, value_name = "HOST", requires = "http")]
    allow_host: Vec<String>,
    /// Also accept this Origin (scheme://host[:port]); repeatable.
    #[arg(long, value_name = "ORIGIN", requires = "http")]
    allow_origin: Vec<String>,
    /// The largest request body accepted (default: MCPSPEC_HTTP_MAX_BODY_BYTES, else the
    /// argument limit MCPSPEC_MAX_ARGUMENT_BYTES, 4 MiB by default).
    #[arg(long, value_name = "BYTES", requires = "http")]
    max_body_bytes: Option<usize>,
    /// Accept OAuth 2.1 access tokens (JWTs) from this issuer (default:
    /// MCPSPEC_OAUTH_ISSUER): its keys are found through its metadata, and each request needs a
    /// token it signed for this server. With a static token as well, that token still admits
    /// the operator.
    #[arg(long, value_name = "URL", requires = "http")]
    oauth_issuer: Option<String>,
    /// The audience access tokens must name (default: MCPSPEC_OAUTH_AUDIENCE, else this
    /// server's own http://ADDR/mcp); set it to the public URL behind a proxy.
    #[arg(long, value_name = "URI", requires = "http")]
    oauth_audience: Option<String>,
    /// This server's client id at the issuer (default: MCPSPEC_OAUTH_CLIENT_ID), with its
    /// secret in MCPSPEC_OAUTH_CLIENT_SECRET: opaque access tokens are then checked by
    /// introspection (RFC 7662). Without it only JWT access tokens are accepted.
    #[arg(long, value_name = "ID", requires = "http")]
    oauth_client_id: Option<String>,
    /// Serve Prometheus metrics of the tool calls at http://ADDR/metrics (behind the token,
    /// when there is one). Off by default, and then nothing is counted.
    #[arg(long, requires = "http")]
    metrics: bool,
}

/// The environment variable the token is read from when no flag names a source.
#[cfg(feature = "http")]
const TOKEN_ENV: &str = "MCPSPEC_HTTP_TOKEN";

/// The bearer token, if any: from `--token-file`, from `--token-env` (which must be set), or
/// from MCPSPEC_HTTP_TOKEN when it is set. The token is never taken on the command line, where
/// other users of the machine could read it.
#[cfg(feature = "http")]
fn token(args: &HttpArgs) -> Result<Option<String>> {
    let (text, source) = if let Some(path) = &args.token_file {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading the token file {}", path.display()))?;
        (text, format!("the token file {}", path.display()))
    } else {
        let (name, required) = match &args.token_env {
            Some(name) => (name.as_str(), true),
            None => (TOKEN_ENV, false),
        };
        match std::env::var(name) {
            Ok(v) => (v, name.to_string()),
            Err(std::env::VarError::NotPresent) if !required => return Ok(None),
            Err(std::env::VarError::NotPresent) => {
                return Err(anyhow!("--token-env {name}: the variable is not set"));
            }
            Err(e) => return Err(anyhow!("{name} is not valid text: {e}")),
        }
    };
    let token = text.trim();
    if token.is_empty() {
        return Err(anyhow!("{source} holds an empty token"));
    }
    if token.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(anyhow!(
            "{source} holds a token with spaces or control characters"
        ));
    }
    Ok(Some(token.to_string()))
}

/// The server a command names: taken out of the registry, or compiled from its spec file with
/// `compile` (the binary's spec compiler) by [`from_spec`].
fn resolve(
    servers: &mut Vec<Server>,
    target: &Target,
    compile: Option<dev::Compile>,
) -> Result<Server> {
    let Some(spec) = &target.spec else {
        return find(servers, target.server.as_deref().unwrap_or_default());
    };
    let compile = compile.ok_or_else(|| {
        anyhow!("this binary serves its compiled servers only; serve a spec file with the `mcpspec` binary (`cargo install mcpspec-cli`)")
    })?;
    from_spec(servers, spec, compile)
}

/// The server of the spec file `spec`, compiled with `compile` (once per process). Its handler
/// tools run the handlers of the compiled server of the same name when the binary has one
/// ([`servable`] says what happens otherwise).
pub fn from_spec(servers: &mut Vec<Server>, spec: &Path, compile: dev::Compile) -> Result<Server> {
    let text = compile.read(spec).map_err(|problem| anyhow!("{problem}"))?;
    let def = (compile.compile)(spec, &text).map_err(|problems| anyhow!("{problems}"))?;
    if let Ok(compiled) = find(servers, def.name)
        && compiled.handlers.is_some()
    {
        return Ok(Server {
            def,
            handlers: compiled.handlers,
        });
    }
    Ok(Server::new(def))
}

/// Refuses to serve (or bundle) the server of the spec file `spec` when its handler tools or
/// resources have no handlers here, saying how to serve it; `init`, `call`, `test` and `list`
/// work on such a spec, a handler tool answering with a tool error.
pub fn servable(server: &Server, spec: &Path) -> Result<()> {
    if server.handlers.is_some() {
        return Ok(());
    }
    match handler_binding(server.def) {
        None => Ok(()),
        Some(what) => Err(anyhow!(
            "{}: {what} is written in Rust (`handler:`), and a spec file is served without compiling; serve this spec from a crate of its own: `mcpspec new DIR --name {}`, put the spec in DIR/spec/, implement the handler in DIR/src/main.rs, then `cargo run --release -- serve {}`",
            spec.display(),
            server.def.name,
            server.def.name
        )),
    }
}

/// The first tool or resource of `def` bound to a Rust handler, named for a message.
fn handler_binding(def: &ServerDef) -> Option<String> {
    if let Some(t) = def
        .tools
        .iter()
        .find(|t| matches!(t.binding, crate::def::BindingDef::Handler))
    {
        return Some(format!("tool `{}`", t.name));
    }
    def.resources
        .iter()
        .find(|r| r.content.handler)
        .map(|r| format!("resource `{}`", r.name))
}

/// Takes the server named `name` out of the registry.
fn find(servers: &mut Vec<Server>, name: &str) -> Result<Server> {
    match servers.iter().position(|s| s.def.name == name) {
        Some(i) => Ok(servers.swap_remove(i)),
        None if servers.is_empty() => Err(anyhow!(
            "no server named `{name}`: this binary has no compiled servers; serve a spec file with --spec FILE (e.g. --spec spec/{name}.yaml)"
        )),
        None => {
            let names: Vec<&str> = servers.iter().map(|s| s.def.name).collect();
            Err(anyhow!(
                "no server named `{name}`; compiled servers: {}",
                names.join(", ")
            ))
        }
    }
}

/// A positive whole number from the environment; a malformed value is a start-up error that
/// names the variable, never silently ignored.
fn env_number(name: &str) -> Result<Option<u64>> {
    env_whole(name, 1)
}

/// A whole number of at least `least` from the environment, refused as [`env_number`]
/// refuses.
fn env_whole(name: &str, least: u64) -> Result<Option<u64>> {
    let kind = if least > 0 {
        "positive whole number"
    } else {
        "whole number"
    };
    match std::env::var(name) {
        Err(std::env::VarError::NotPresent) => Ok(None),
        Ok(v) if v.trim().is_empty() => Ok(None),
        Ok(v) => match v.trim().parse::<u64>() {
            Ok(n) if n >= least => Ok(Some(n)),
            _ => Err(anyhow!("{name}={v:?} is not a {kind}; fix or unset it")),
        },
        Err(e) => Err(anyhow!("{name} is not valid text: {e}")),
    }
}

fn limits() -> Result<Limits> {
    let mut l = Limits::default();
    if let Some(n) = env_number("MCPSPEC_MAX_ARGUMENT_BYTES")? {
        l.max_argument_bytes = usize::try_from(n)?;
    }
    if let Some(n) = env_number("MCPSPEC_MAX_RESULT_BYTES")? {
        l.max_result_bytes = usize::try_from(n)?;
    }
    if let Some(ms) = env_number("MCPSPEC_CALL_TIMEOUT_MS")? {
        l.call_timeout = Duration::from_millis(ms);
    }
    if let Some(secs) = env_number("MCPSPEC_CONFIRM_TIMEOUT_SECS")? {
        l.confirm_timeout = Duration::from_secs(secs);
    }
    if let Some(ms) = env_whole("MCPSPEC_TASK_AFTER_MS", 0)? {
        l.task_after = Duration::from_millis(ms);
    }
    Ok(l)
}

/// How a server starting on a database treats the spec's migrations: whether to apply the
/// missing ones, and the command that would.
struct Migrating {
    apply: bool,
    command: migrate::Command,
}

fn start(
    server: Server,
    flag: Option<&std::path::Path>,
    placing: crate::backend::Placing,
    migrating: &Migrating,
) -> Result<std::sync::Arc<Engine>> {
    let limits = limits()?;
    // Settings are refused before anything starts.
    state_key()?;
    let Server { def, handlers } = server;
    let Some(database) = &def.database else {
        // The server works on the project in its working directory, without a database.
        let engine = Engine::start(def, flag, placing.read_only, limits, handlers)?;
        tracing::info!(server = def.name, "ready");
        return Ok(engine);
    };
    let location = locate(def.name, database, flag)?;
    let command = &migrating.command;
    let unversioned =
        migrate::before_start(def.name, database, &location, migrating.apply, command)?;
    let engine =
        Engine::start_placed(def, Some(&location), placing, limits, handlers).map_err(|e| {
            if unversioned {
                migrate::unversioned_hint(e.into(), def.name, &location, command)
            } else {
                e.into()
            }
        })?;
    tracing::info!(server = def.name, db = %location.display(), read_only = engine.is_read_only(), "ready");
    Ok(engine)
}

/// Where a database's derived structures may go, from `serve`'s and `call`'s flags.
fn placing(read_only: bool, in_place: bool) -> crate::backend::Placing {
    crate::backend::Placing {
        read_only,
        in_place,
        scratch: false,
    }
}

/// Where the server's database is: `--db`, else the spec's environment variable, else (for a
/// server that runs on a database server) that engine's variable, else the default file. A
/// URL selects the engine of its scheme (`postgres://`, ...); a file must exist.
fn locate(
    server: &str,
    database: &crate::def::DatabaseDef,
    flag: Option<&std::path::Path>,
) -> Result<Location> {
    if let Some(f) = flag {
        let location = Location::parse(f.as_os_str())?;
        if let Location::File(path) = &location {
            db::require_exists(server, database, path, db::PathSource::Flag)?;
        }
        return Ok(location);
    }
    // A variable's value is a URL or a path; one of another form is refused as such.
    let from = |var: Option<&str>| -> Option<Result<Location>> {
        let value = std::env::var_os(var?)?;
        Some(Location::parse(&value).map_err(|e| anyhow!("{}: {e}", var.unwrap_or_default())))
    };
    let engine_envs = database.engines.iter().map(|e| e.env);
    for var in std::iter::once(database.env).chain(engine_envs) {
        match from(var).transpose()? {
            Some(url @ Location::Url(..)) => return Ok(url),
            // A path from the spec's variable is resolved below, as before.
            _ => continue,
        }
    }
    let (path, source) = db::resolve(database, None)?;
    db::require_exists(server, database, &path, source)?;
    Ok(Location::File(path))
}

/// A subcommand a binary adds to the runtime's own (the `mcpspec` binary adds `new`).
pub struct Extra {
    /// Its name, arguments and help, as clap shows them.
    pub command: clap::Command,
    /// Runs it with its parsed arguments and the binary's registry.
    pub run: fn(&clap::ArgMatches, Vec<Server>) -> Result<ExitCode>,
    /// Whether it serves an MCP session, whose calls are then logged as `serve` logs them.
    pub serves: bool,
}

/// Runs the command line over `servers`, the binary's registry, and returns its exit code:
/// `fn main() -> ExitCode { mcpspec::cli::main(vec![...]) }`. Logs go to stderr.
pub fn main(servers: Vec<Server>) -> ExitCode {
    main_with(servers, Vec::new())
}

/// Like [`main`], with the binary's own subcommands beside the runtime's.
pub fn main_with(servers: Vec<Server>, extras: Vec<Extra>) -> ExitCode {
    run_main(servers, extras, None)
}

/// Like [`main_with`], and the commands also take `--spec FILE` instead of a server's name,
/// compiling the file with `compile` (the `mcpspec` binary's spec compiler).
pub fn main_with_specs(
    servers: Vec<Server>,
    extras: Vec<Extra>,
    compile: dev::Compile,
) -> ExitCode {
    run_main(servers, extras, Some(compile))
}

/// What `--version` says: the version, the runtime's features this binary was built with,
/// and whether it compiles spec files (`--spec`); `mcpspec doctor` opens with it too.
pub fn version(compiles_specs: bool) -> String {
    let features: Vec<&str> = [
        ("sqlite", cfg!(feature = "sqlite")),
        ("postgres", cfg!(feature = "postgres")),
        ("mysql", cfg!(feature = "mysql")),
        ("http", cfg!(feature = "http")),
        ("otel", cfg!(feature = "otel")),
        ("embeddings", cfg!(feature = "embeddings")),
    ]
    .into_iter()
    .filter_map(|(name, on)| on.then_some(name))
    .collect();
    format!(
        "{} (features: {}; {})",
        env!("CARGO_PKG_VERSION"),
        if features.is_empty() {
            "none".to_string()
        } else {
            features.join(", ")
        },
        if compiles_specs {
            "serves spec files"
        } else {
            "compiled servers only"
        }
    )
}

fn run_main(servers: Vec<Server>, extras: Vec<Extra>, compile: Option<dev::Compile>) -> ExitCode {
    // Help and errors name the binary as it was invoked.
    let name = std::env::args_os()
        .next()
        .and_then(|a| {
            std::path::Path::new(&a)
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
        })
        .unwrap_or_else(|| "mcpspec".into());
    // Once per process: clap keeps the names for the life of the program.
    let name: &'static str = Box::leak(name.into_boxed_str());
    let _ = BINARY.set(name);
    let version: &'static str = Box::leak(version(compile.is_some()).into_boxed_str());
    let mut command = Cli::command().name(name).bin_name(name).version(version);
    for e in &extras {
        command = command.subcommand(e.command.clone());
    }
    let matches = command.get_matches();
    if let Some((sub, args)) = matches.subcommand()
        && let Some(extra) = extras.iter().find(|e| e.command.get_name() == sub)
    {
        init_logging(if extra.serves { SESSION_LOG } else { "warn" });
        return exit_code((extra.run)(args, servers));
    }
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(c) => c,
        Err(e) => e.exit(),
    };
    // A served session logs every call by default (stderr is the client's log); the one-shot
    // commands print their own output and log only warnings.
    init_logging(match cli.command {
        Cmd::Serve(_) => SESSION_LOG,
        _ => "warn",
    });
    exit_code(run(cli, servers, compile))
}

/// The default log filter of a served session: every call, and warnings.
/// The runtime's blocking pool: the threads calls run on (see `protocol::BLOCKING_THREADS`)
/// and as many again for the rest of the blocking work, which a burst of calls never holds up.
const BLOCKING_POOL: usize = 2 * crate::protocol::BLOCKING_THREADS;

const SESSION_LOG: &str = "warn,mcpspec=info,server=info";

/// Logs to stderr, filtered by MCPSPEC_LOG (or RUST_LOG), else by `default`; JSON lines when
/// MCPSPEC_LOG_FORMAT=json. Each line is one event: control characters inside it are escaped
/// (see [`crate::logsafe`]).
fn init_logging(default: &str) {
    let filter = std::env::var("MCPSPEC_LOG")
        .or_else(|_| std::env::var("RUST_LOG"))
        .unwrap_or_else(|_| default.into());
    let subscriber = tracing_subscriber::fmt()
        .with_writer(crate::logsafe::Stderr)
        .with_ansi(false)
        .with_env_filter(tracing_subscriber::EnvFilter::new(filter));
    if std::env::var("MCPSPEC_LOG_FORMAT").as_deref() == Ok("json") {
        subscriber.json().init();
        crate::calllog::install(crate::calllog::Format::Json);
    } else {
        subscriber.init();
        crate::calllog::install(crate::calllog::Format::Text);
    }
}

/// A command's exit code; a failure is printed as `error: ...` and exits 2.
/// Writes a line to stdout, failing when it cannot (a reader such as `| head` went away).
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout().lock(), $($arg)*)?
    }};
}

fn exit_code(outcome: Result<ExitCode>) -> ExitCode {
    match outcome {
        Ok(code) => code,
        // The reader of our output went away: nothing more to say, and nothing went wrong here.
        Err(e)
            if e.downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe) =>
        {
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// `mcpspec init`: the spec's schema (and sample rows when asked) in a new SQLite file, or in
/// an empty PostgreSQL database when `db` is a URL.
fn init(def: &crate::def::ServerDef, db: &std::path::Path, sample: bool) -> Result<ExitCode> {
    let database = def.database.as_ref().ok_or_else(|| {
        anyhow!(
            "the `{}` server has no database; it works on the project in its working directory",
            def.name
        )
    })?;
    let location = Location::parse(db.as_os_str())?;
    let with_rows = crate::backend::create(&location, def.name, database, sample)?;
    let shown = location.display();
    say!(
        "created {shown} for `{}`{}",
        def.name,
        if with_rows { " with sample rows" } else { "" }
    );
    Ok(ExitCode::SUCCESS)
}

/// `serve`: resolves the server, checks what can be checked before the database opens, starts
/// the engine and serves over stdio or Streamable HTTP.
fn serve_command(
    args: ServeArgs,
    servers: &mut Vec<Server>,
    compile: Option<dev::Compile>,
) -> Result<ExitCode> {
    let ServeArgs {
        target,
        db,
        read_only,
        derive_in_place,
        migrate,
        toolset,
        ui,
        ui_history,
        http,
    } = args;
    let migrating = Migrating {
        apply: migrate,
        command: migrate_command(&target),
    };
    let server = resolve(servers, &target, compile)?;
    if let Some(spec) = &target.spec {
        servable(&server, spec)?;
    }
    let offered = offered(server.def, &toolset)?;
    // The workbench's address and the HTTP options are checked before the database is
    // opened.
    let mut options = match http.http {
        Some(addr) => Some((addr, http_options(&http, server.def.issuer)?)),
        None => None,
    };
    let ui = workbench_at(ui, ui_history, options.as_mut().map(|(_, o)| o))?;
    let placing = placing(read_only, derive_in_place);
    let engine = start(server, db.as_deref(), placing, &migrating)?;
    let _telemetry = telemetry(&engine)?;
    match options {
        Some((addr, options)) => serve_http(engine, addr, options, offered, ui)?,
        None => serve(engine, offered, ui)?,
    }
    Ok(ExitCode::SUCCESS)
}

fn run(cli: Cli, mut servers: Vec<Server>, compile: Option<dev::Compile>) -> Result<ExitCode> {
    match cli.command {
        Cmd::Serve(args) => serve_command(*args, &mut servers, compile),
        Cmd::Call {
            words,
            spec,
            db,
            read_only,
            derive_in_place,
        } => {
            let (target, tool, arguments) = call_words(words, spec)?;
            let migrating = Migrating {
                apply: false,
                command: migrate_command(&target),
            };
            let server = resolve(&mut servers, &target, compile)?;
            let args: serde_json::Value =
                serde_json::from_str(&arguments).context("the arguments are not valid JSON")?;
            let placing = placing(read_only, derive_in_place);
            let engine = start(server, db.as_deref(), placing, &migrating)?;
            call(&engine, &tool, &args)
        }
        Cmd::Test { target, db } => {
            crate::backend::confine_spec_sql();
            let server = resolve(&mut servers, &target, compile)?;
            examples::run(server, db.as_deref(), &mut std::io::stdout().lock())
        }
        Cmd::Migrate {
            target,
            db,
            dry_run,
            baseline,
        } => {
            crate::backend::confine_spec_sql();
            let def = resolve(&mut servers, &target, compile)?.def;
            let ask = crate::backend::migrate::Ask {
                dry_run,
                baseline,
                only_own: false,
            };
            migrate_cmd(def, db.as_deref(), ask)
        }
        Cmd::Init { target, db, sample } => {
            crate::backend::confine_spec_sql();
            init(resolve(&mut servers, &target, compile)?.def, &db, sample)
        }
        Cmd::Demo { target } => demo_cmd(resolve(&mut servers, &target, compile)?, &target),
        Cmd::Tokens { target } => {
            let server = resolve(&mut servers, &target, compile)?;
            say!("{}", tokens::report(server.def));
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Skills { target, out, force } => {
            let server = resolve(&mut servers, &target, compile)?;
            let file = skill::write(server.def, &out, force)?;
            say!("wrote {}", file.display());
            Ok(ExitCode::SUCCESS)
        }
        Cmd::List { spec: None } => list(servers),
        Cmd::List { spec: Some(spec) } => {
            let target = Target {
                server: None,
                spec: Some(spec),
            };
            list(vec![resolve(&mut servers, &target, compile)?])
        }
    }
}

/// `mcpspec demo`: a scripted session against `server` served by this binary, as `target`
/// names it, printed.
fn demo_cmd(server: Server, target: &Target) -> Result<ExitCode> {
    if let Some(spec) = &target.spec {
        servable(&server, spec)?;
    }
    let def = server.def;
    let exe = std::env::current_exe().context("locating the mcpspec binary")?;
    // The server process is started in a scratch directory: a spec file by its full path.
    let serving: Vec<std::ffi::OsString> = match &target.spec {
        Some(spec) => vec!["--spec".into(), std::path::absolute(spec)?.into()],
        None => vec![def.name.into()],
    };
    demo::run(def, &exe, &serving, &mut std::io::stdout().lock())?;
    Ok(ExitCode::SUCCESS)
}

/// `mcpspec list`: the compiled servers, by name, and each one's tools.
fn list(mut servers: Vec<Server>) -> Result<ExitCode> {
    if servers.is_empty() {
        say!(
            "no compiled servers: this binary serves spec files (serve --spec FILE; list --spec FILE lists one's tools)"
        );
        return Ok(ExitCode::SUCCESS);
    }
    servers.sort_by_key(|s| s.def.name);
    for s in servers.iter().map(|s| s.def) {
        say!(
            "{} {} ({}, {} tools)",
            s.name,
            s.version,
            s.spec_file,
            s.tools.len()
        );
        for t in s.tools {
            // The published annotations, which handler tools declare themselves.
            let kind = if t.annotations.destructive {
                "destructive"
            } else if t.annotations.read_only {
                "read"
            } else {
                "write"
            };
            say!("  {:<24} {kind:<11} {}", t.name, t.title.unwrap_or(""));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `mcpspec migrate`: the database `locate` finds for `def`, migrated as `ask` says.
fn migrate_cmd(
    def: &'static ServerDef,
    db: Option<&Path>,
    ask: crate::backend::migrate::Ask,
) -> Result<ExitCode> {
    let database = def
        .database
        .as_ref()
        .ok_or_else(|| anyhow!("the `{}` server has no database to migrate", def.name))?;
    let location = locate(def.name, database, db)?;
    migrate::run(
        def.name,
        database,
        &location,
        ask,
        &mut std::io::stdout().lock(),
    )?;
    Ok(ExitCode::SUCCESS)
}

/// The binary's name as invoked, for the commands messages tell users to run.
static BINARY: std::sync::OnceLock<&'static str> = std::sync::OnceLock::new();

/// The `migrate` command for the server `target` names.
fn migrate_command(target: &Target) -> migrate::Command {
    let binary = BINARY.get().copied().unwrap_or("mcpspec");
    migrate::Command(match (&target.spec, &target.server) {
        (Some(spec), _) => format!("{binary} migrate --spec {}", spec.display()),
        (None, server) => format!("{binary} migrate {}", server.as_deref().unwrap_or_default()),
    })
}

/// `call`'s words: `SERVER TOOL [ARGUMENTS]`, or `TOOL [ARGUMENTS]` with `--spec`.
fn call_words(words: Vec<String>, spec: Option<PathBuf>) -> Result<(Target, String, String)> {
    let mut words = words.into_iter();
    let server = match spec {
        Some(_) => None,
        None => words.next(),
    };
    let tool = words.next().ok_or_else(|| {
        anyhow!(
            "call needs a tool: call SERVER TOOL [ARGUMENTS], or call --spec FILE TOOL [ARGUMENTS]"
        )
    })?;
    let arguments = words.next().unwrap_or_else(|| "{}".into());
    if let Some(extra) = words.next() {
        return Err(anyhow!(
            "unexpected argument `{extra}`: give the arguments as one JSON object"
        ));
    }
    Ok((Target { server, spec }, tool, arguments))
}

/// Runs one call and prints its result (or its error) as JSON; exits 1 when the tool fails.
fn call(engine: &Engine, tool: &str, args: &serde_json::Value) -> Result<ExitCode> {
    let outcome = engine.call(tool, Some(args));
    let failed = outcome.is_err();
    match outcome {
        Ok(s) => say!("{}", serde_json::to_string_pretty(&s.structured)?),
        Err(CallError::Tool(e)) => say!("{}", serde_json::to_string_pretty(&e.to_json())?),
        Err(CallError::Rpc(e)) => {
            let v = serde_json::json!({"code": e.code, "message": e.message, "data": e.data});
            say!("{}", serde_json::to_string_pretty(&v)?)
        }
        Err(other) => {
            let e = crate::protocol::to_result(Err(other), engine.def)
                .err()
                .map(|e| e.message.into_owned());
            return Err(anyhow!(e.unwrap_or_default()));
        }
    }
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// Without the `http` feature there are no HTTP options: `--http` is refused, saying why.
#[cfg(not(feature = "http"))]
fn http_options(_: &HttpArgs, _: Option<&str>) -> Result<std::convert::Infallible> {
    Err(anyhow!(
        "this binary was built without Streamable HTTP (the `http` feature of the mcpspec crate); serve over stdio, or rebuild with it"
    ))
}

#[cfg(not(feature = "http"))]
fn serve_http(
    _: std::sync::Arc<Engine>,
    _: std::net::SocketAddr,
    options: std::convert::Infallible,
    _: Option<Vec<String>>,
    _: Option<std::net::SocketAddr>,
) -> Result<()> {
    match options {}
}

/// The HTTP options of `args`, OAuth's issuer defaulting to the spec's (`server.issuer`).
#[cfg(feature = "http")]
fn http_options(
    args: &HttpArgs,
    spec_issuer: Option<&str>,
) -> Result<crate::transport::http::HttpOptions> {
    let max_body_bytes = match args.max_body_bytes {
        Some(0) => return Err(anyhow!("--max-body-bytes must be positive")),
        Some(n) => n,
        None => match env_number("MCPSPEC_HTTP_MAX_BODY_BYTES")? {
            Some(n) => usize::try_from(n)?,
            None => limits()?.max_argument_bytes,
        },
    };
    let options = crate::transport::http::HttpOptions {
        token: token(args)?,
        allow_hosts: args.allow_host.clone(),
        allow_origins: args.allow_origin.clone(),
        max_body_bytes,
        drain_timeout: drain_timeout()?,
        // One worker per core, and at least two, so that one reads while another answers.
        workers: std::thread::available_parallelism().map_or(2, |n| n.get().max(2)),
        max_connections: crate::transport::http::max_connections(
            env_number("MCPSPEC_HTTP_MAX_CONNECTIONS")?
                .map(usize::try_from)
                .transpose()?,
        ),
        ready_grace: Duration::from_millis(env_whole("MCPSPEC_READY_GRACE_MS", 0)?.unwrap_or(0)),
        metrics: args.metrics,
        lane: lane_on()?,
        oauth: oauth(args, spec_issuer)?,
        // `--ui` without an address turns it on (see `workbench_at`).
        ui: false,
    };
    // An unprotected non-loopback address is refused when binding (`transport::http::bind`),
    // once the spec's own issuer is known.
    Ok(options)
}

/// The OAuth issuer and audience, from the flags or their environment variables; the issuer
/// is the spec's (`server.issuer`) when neither names one.
#[cfg(feature = "http")]
fn oauth(
    args: &HttpArgs,
    spec_issuer: Option<&str>,
) -> Result<Option<crate::transport::http::OAuthOptions>> {
    let from = |flag: &Option<String>, var: &str| {
        flag.clone()
            .or_else(|| std::env::var(var).ok())
            .filter(|v| !v.trim().is_empty())
    };
    let issuer = from(&args.oauth_issuer, "MCPSPEC_OAUTH_ISSUER")
        .or_else(|| spec_issuer.map(str::to_string));
    let audience = from(&args.oauth_audience, "MCPSPEC_OAUTH_AUDIENCE");
    match (issuer, audience) {
        (Some(issuer), audience) => {
            if !issuer.starts_with("https://") && !issuer.starts_with("http://") {
                return Err(anyhow!(
                    "--oauth-issuer must be an http(s) URL, not {issuer:?}"
                ));
            }
            let client = introspection_client(args.oauth_client_id.as_deref())?;
            Ok(Some(crate::transport::http::OAuthOptions {
                issuer,
                audience,
                client,
            }))
        }
        (None, Some(_)) => Err(anyhow!(
            "--oauth-audience needs an issuer: --oauth-issuer, MCPSPEC_OAUTH_ISSUER or the spec's server.issuer"
        )),
        (None, None) => Ok(None),
    }
}

/// The server's own credentials at the issuer, for introspecting opaque tokens: the id from
/// `--oauth-client-id` or MCPSPEC_OAUTH_CLIENT_ID, the secret from MCPSPEC_OAUTH_CLIENT_SECRET
/// only (never the command line, where other users of the machine could read it).
#[cfg(feature = "http")]
fn introspection_client(
    flag: Option<&str>,
) -> Result<Option<crate::auth::introspect::ClientCredentials>> {
    let id = flag
        .map(str::to_string)
        .or_else(|| std::env::var("MCPSPEC_OAUTH_CLIENT_ID").ok())
        .filter(|v| !v.trim().is_empty());
    let Some(id) = id else {
        return Ok(None);
    };
    let secret = std::env::var("MCPSPEC_OAUTH_CLIENT_SECRET")
        .ok()
        .filter(|v| !v.trim().is_empty())
        .ok_or_else(|| {
            anyhow!("the OAuth client {id} needs its secret in MCPSPEC_OAUTH_CLIENT_SECRET to introspect tokens")
        })?;
    Ok(Some(crate::auth::introspect::ClientCredentials {
        id,
        secret: secret.trim().to_string(),
    }))
}

/// OpenTelemetry for a serving `engine`, when the standard variables ask for it (see
/// [`crate::telemetry`]); kept until the server exits, when what is batched is sent.
fn telemetry(engine: &std::sync::Arc<Engine>) -> Result<crate::telemetry::Installed> {
    let pool = engine.clone();
    crate::telemetry::install(engine.def.name, move || pool.pool_use())
        .map_err(|e| anyhow!("OpenTelemetry could not start: {e}"))
}

/// `MCPSPEC_HTTP_LANE`: `off` sends every HTTP request through rmcp; `on` (the default)
/// lets plain SQL reads take the lane.
#[cfg(feature = "http")]
fn lane_on() -> Result<bool> {
    match std::env::var("MCPSPEC_HTTP_LANE").as_deref() {
        Err(_) | Ok("on" | "") => Ok(true),
        Ok("off") => Ok(false),
        Ok(_) => Err(anyhow!("MCPSPEC_HTTP_LANE must be `on` or `off`")),
    }
}

fn drain_timeout() -> Result<Duration> {
    Ok(Duration::from_secs(
        env_number("MCPSPEC_SHUTDOWN_TIMEOUT_SECS")?.unwrap_or(30),
    ))
}

/// Starts a proxy spec's downstream servers before the first request, so that the first
/// `tools/list` already has their tools.
async fn start_proxy(
    engine: &std::sync::Arc<Engine>,
) -> Result<Option<std::sync::Arc<crate::proxy::Proxy>>> {
    Ok(match &engine.def.proxy {
        Some(def) => {
            let own = crate::protocol::tools(engine.def);
            Some(crate::proxy::Proxy::start(def, engine.clone(), &own).await?)
        }
        None => None,
    })
}

/// Serves Streamable HTTP until SIGTERM/SIGINT arrives, then drains like the stdio path.
#[cfg(feature = "http")]
fn serve_http(
    engine: std::sync::Arc<Engine>,
    addr: std::net::SocketAddr,
    options: crate::transport::http::HttpOptions,
    offered: Option<Vec<String>>,
    ui: Option<std::net::SocketAddr>,
) -> Result<()> {
    if options.metrics {
        crate::metrics::enable(engine.def.name);
    }
    // A fixed set of workers reads requests and answers plain SQL reads itself (the lane);
    // every other call's SQLite work goes to the call threads, on the blocking pool.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(options.workers)
        .max_blocking_threads(BLOCKING_POOL)
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let workbench = bind_workbench(ui).await?;
        let listener = crate::transport::http::bind(addr, &options).await?;
        let bound = listener.local_addr()?;
        // Tests and scripts read the port from this line; keep its wording stable.
        eprintln!(
            "mcpspec: listening on http://{bound}{}",
            crate::transport::http::ENDPOINT
        );
        let proxy = start_proxy(&engine).await?;
        crate::startup::check_embeddings(&engine);
        let jobs = crate::startup::spawn(engine.clone());
        let handler = shared_key(crate::protocol::McpServer::with_proxy(
            engine,
            proxy.clone(),
        ))?;
        if let Some(tools) = offered {
            handler.live().offer_only(tools);
        }
        if options.ui {
            eprintln!("mcpspec: workbench on http://{bound}/ui/");
        }
        serve_workbench(workbench, &handler);
        let served = crate::transport::http::serve(listener, handler, options, async {
            shutdown_signal().await;
            tracing::info!("signal received; finishing calls in flight");
        })
        .await;
        jobs.cancel();
        // Every downstream process is stopped and reaped before the server exits.
        if let Some(p) = proxy {
            p.shutdown(drain_timeout()?).await;
        }
        served?;
        Ok::<(), anyhow::Error>(())
    })?;
    runtime.shutdown_timeout(Duration::from_secs(1));
    tracing::info!("stopped");
    Ok(())
}

/// The server with the `requestState` key of `MCPSPEC_REQUEST_STATE_KEY`, when set, and the
/// ledger of used states that `MCPSPEC_REQUEST_STATE_DIR` or `MCPSPEC_REQUEST_STATE_DB`
/// names.
fn shared_key(server: crate::protocol::McpServer) -> Result<crate::protocol::McpServer> {
    Ok(match state_key()? {
        Some(key) => {
            let ledger = match state_dir()? {
                Some(dir) => Some(dir),
                None => state_db()?,
            };
            server.with_request_state_key(key, ledger)
        }
        None => server,
    })
}

/// The ledger of used request states in the database `MCPSPEC_REQUEST_STATE_DB` names (a
/// PostgreSQL or MariaDB/MySQL URL), for replicas on machines that share no directory and a
/// server without a database server of its own, such as pm.
fn state_db() -> Result<Option<crate::confirm::Ledger>> {
    const VAR: &str = "MCPSPEC_REQUEST_STATE_DB";
    let Some(url) = std::env::var_os(VAR).filter(|v| !v.is_empty()) else {
        return Ok(None);
    };
    let location = Location::parse(&url).map_err(|e| anyhow!("{VAR}: {e}"))?;
    // Opened on a thread of its own: the drivers block, and this may run on an async runtime.
    let db = std::thread::scope(|s| {
        s.spawn(|| crate::backend::state_database(&location))
            .join()
            .unwrap_or_else(|_| Err("opening it panicked".into()))
    })
    .map_err(|e| anyhow!("{VAR}: {e}"))?;
    Ok(Some(std::sync::Arc::new(
        move |nonce: &str, ttl: std::time::Duration| db.redeem_state(nonce, ttl),
    )))
}

/// The ledger of used request states in `MCPSPEC_REQUEST_STATE_DIR`, for replicas that share
/// a directory rather than a database server (see [`crate::confirm::directory_ledger`]).
fn state_dir() -> Result<Option<crate::confirm::Ledger>> {
    const VAR: &str = "MCPSPEC_REQUEST_STATE_DIR";
    match std::env::var_os(VAR).filter(|v| !v.is_empty()) {
        None => Ok(None),
        Some(dir) => crate::confirm::directory_ledger(dir.into())
            .map(Some)
            .map_err(|e| anyhow!("{VAR}: the directory cannot be used: {e}")),
    }
}

/// The key of `MCPSPEC_REQUEST_STATE_KEY` (hexadecimal, 32 bytes or more), with which replicas
/// accept each other's `requestState`s; `None` when unset (each process makes its own).
fn state_key() -> Result<Option<Vec<u8>>> {
    const VAR: &str = "MCPSPEC_REQUEST_STATE_KEY";
    let Ok(text) = std::env::var(VAR) else {
        return Ok(None);
    };
    let text = text.trim();
    let key: Option<Vec<u8>> = (text.len() % 2 == 0)
        .then(|| {
            (0..text.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
                .collect()
        })
        .flatten();
    match key {
        Some(key) if key.len() >= 32 => Ok(Some(key)),
        // The value is a secret: the message does not repeat it.
        _ => Err(anyhow!(
            "{VAR} is not a key: give at least 64 hexadecimal digits (32 bytes), e.g. from `openssl rand -hex 32`"
        )),
    }
}

/// Serves until stdin closes or SIGTERM/SIGINT arrives.
fn serve(
    engine: std::sync::Arc<Engine>,
    offered: Option<Vec<String>>,
    ui: Option<std::net::SocketAddr>,
) -> Result<()> {
    let make = |engine, proxy| {
        let server = crate::protocol::McpServer::with_proxy(engine, proxy);
        if let Some(tools) = offered {
            server.live().offer_only(tools);
        }
        server
    };
    serve_stdio(engine, make, ui, |_, _| {})
}

/// The toolsets `names` (`--toolset`), each one `def` declares; `None` (every tool) when none
/// is named.
pub(crate) fn offered(def: &ServerDef, names: &[String]) -> Result<Option<Vec<String>>> {
    if names.is_empty() {
        return Ok(None);
    }
    for name in names {
        if !def.toolsets.iter().any(|(n, _)| n == name) {
            let declared: Vec<&str> = def.toolsets.iter().map(|(n, _)| *n).collect();
            return Err(anyhow!(
                "unknown toolset `{name}`; {}",
                if declared.is_empty() {
                    format!(
                        "the `{}` server declares none (`toolsets:` in its spec)",
                        def.name
                    )
                } else {
                    format!("the `{}` server's are {}", def.name, declared.join(", "))
                }
            ));
        }
    }
    Ok(Some(names.to_vec()))
}

/// [`serve`] with the protocol handler `make` builds over the engine and the proxy;
/// `started` gets the handler and the client's peer once the session is up.
fn serve_stdio(
    engine: std::sync::Arc<Engine>,
    make: impl FnOnce(
        std::sync::Arc<Engine>,
        Option<std::sync::Arc<crate::proxy::Proxy>>,
    ) -> crate::protocol::McpServer,
    ui: Option<std::net::SocketAddr>,
    started: impl FnOnce(&crate::protocol::McpServer, rmcp::service::Peer<rmcp::RoleServer>),
) -> Result<()> {
    let drain = drain_timeout()?;
    // One thread runs the protocol; SQLite work goes to the call threads (on the blocking
    // pool) and stdio to the transport's own threads, so a multi-threaded scheduler would only
    // add wake-ups.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .max_blocking_threads(BLOCKING_POOL)
        .enable_all()
        .build()?;
    let (session, writer) = runtime.block_on(async move {
        let workbench = bind_workbench(ui).await?;
        let proxy = start_proxy(&engine).await?;
        let jobs = crate::startup::spawn(engine.clone());
        let checked = engine.clone();
        let handler = shared_key(make(engine, proxy.clone()))?;
        serve_workbench(workbench, &handler);
        // Plain SQL tool calls are answered on the thread that read them (zero hops).
        let lane = crate::transport::lane::Lane::new(handler.live(), "pipe");
        let (transport, writer) = crate::transport::stdio::StdioTransport::stdio(Some(lane));
        let transport = transport
            .with_drain_timeout(drain)
            .with_shutdown(handler.shutdown());
        // On SIGTERM or SIGINT the transport stops reading and waits for the calls in flight,
        // as when stdin closes, so their answers still reach the client.
        let stop = transport.stop_handle();
        tokio::spawn(async move {
            shutdown_signal().await;
            tracing::info!("signal received; finishing calls in flight");
            stop.stop();
        });
        let session = match rmcp::serve_server(handler.clone(), transport).await {
            Ok(running) => {
                // The session is up (`initialize` answered): the providers are checked now.
                crate::startup::check_embeddings(&checked);
                started(&handler, running.peer().clone());
                running
                    .waiting()
                    .await
                    .map(|_| ())
                    .map_err(|e| anyhow!("the MCP session ended with an error: {e}"))
            }
            Err(e) => Err(anyhow!("the MCP session failed to start: {e}")),
        };
        jobs.cancel();
        // Every downstream process is stopped before the server exits, within the timeout.
        if let Some(p) = proxy {
            p.shutdown(drain).await;
        }
        Ok::<_, anyhow::Error>((session, writer))
    })?;
    session?;
    // Calls still running after the drain timeout are abandoned rather than awaited forever;
    // the database closes when the engine is dropped.
    runtime.shutdown_timeout(Duration::from_secs(1));
    // Every answer queued before the session ended reaches stdout before the process exits.
    let _ = writer.join();
    tracing::info!("stopped");
    Ok(())
}

/// Where the workbench listens of its own (`--ui ADDR`), checked before anything opens:
/// `None` when it is off, or served at `/ui/` on the MCP listener (`--ui` beside `--http`,
/// which turns it on in `http`). A listener of its own asks for no token, so it is loopback
/// only, and refused beside an MCP listener a token or OAuth guards, whose callers' calls it
/// would show to anyone on this machine.
#[cfg(feature = "http")]
fn workbench_at(
    ui: Option<Option<std::net::SocketAddr>>,
    history: bool,
    http: Option<&mut crate::transport::http::HttpOptions>,
) -> Result<Option<std::net::SocketAddr>> {
    if history {
        crate::workbench::keep_history();
    }
    match (ui, http) {
        (None, _) => Ok(None),
        (Some(None), Some(options)) => {
            options.ui = true;
            crate::workbench::install();
            Ok(None)
        }
        (Some(None), None) => Err(anyhow!(
            "--ui needs an address beside stdio, e.g. --ui 127.0.0.1:7777"
        )),
        (Some(Some(addr)), options) => {
            crate::workbench::on_this_machine(addr)?;
            if options.is_some_and(|o| o.token.is_some() || o.oauth.is_some()) {
                return Err(anyhow!(
                    "--ui {addr} beside a server that a token or OAuth guards would show its callers' calls to anyone on this machine; give --ui without an address to serve the workbench at /ui/ on the MCP listener, behind the same token"
                ));
            }
            Ok(Some(addr))
        }
    }
}

#[cfg(not(feature = "http"))]
fn workbench_at(
    ui: Option<Option<std::net::SocketAddr>>,
    _: bool,
    _: Option<&mut std::convert::Infallible>,
) -> Result<Option<std::net::SocketAddr>> {
    match ui {
        None => Ok(None),
        Some(_) => Err(anyhow!(
            "--ui: this mcpspec was built without the workbench (the `http` feature)"
        )),
    }
}

/// Binds the workbench's own listener (`--ui ADDR`), announcing its address on stderr; it is
/// served once the protocol handler is made ([`serve_workbench`]).
async fn bind_workbench(
    addr: Option<std::net::SocketAddr>,
) -> Result<Option<tokio::net::TcpListener>> {
    let Some(addr) = addr else {
        return Ok(None);
    };
    #[cfg(feature = "http")]
    {
        let listener = crate::workbench::bind(addr).await?;
        // Tests and scripts read the address from this line; keep its wording stable.
        eprintln!("mcpspec: workbench on http://{}/", listener.local_addr()?);
        Ok(Some(listener))
    }
    #[cfg(not(feature = "http"))]
    Err(anyhow!(
        "--ui {addr}: this mcpspec was built without the workbench (the `http` feature)"
    ))
}

/// Serves the workbench on its own listener: a Streamable HTTP gate with no token (the
/// listener is loopback only) over `handler`, answering the page at `/ui/` and its calls at
/// `/mcp`, until the process ends.
fn serve_workbench(
    listener: Option<tokio::net::TcpListener>,
    handler: &crate::protocol::McpServer,
) {
    let Some(listener) = listener else {
        return;
    };
    #[cfg(feature = "http")]
    {
        let handler = handler.clone();
        tokio::spawn(async move {
            let limits = handler.live().now().engine.limits();
            let options = crate::transport::http::HttpOptions::workbench(limits.max_argument_bytes);
            let served =
                crate::transport::http::serve(listener, handler, options, std::future::pending())
                    .await;
            if let Err(e) = served {
                tracing::warn!(error = %e, "the workbench stopped");
            }
        });
    }
    #[cfg(not(feature = "http"))]
    let _ = (listener, handler);
}

async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = signal(SignalKind::terminate()).expect("install SIGTERM handler");
        tokio::select! {
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
