//! `mcpspec doctor [--spec FILE] [--db PATH|URL]`: what stands between a spec and the client
//! that should use it, said in plain words. The binary (version and features); the spec (its
//! problems and statements, as `check` finds them), its database (where it resolves and
//! whether it is there) and its embedding providers (a model directory, a key's variable); and
//! the MCP servers that run mcpspec in the host configuration files it finds (Claude Code's
//! `~/.claude.json` and the project's `.mcp.json`, Claude Desktop's
//! `claude_desktop_config.json`): a command the host cannot find, a spec or database that is
//! not there, a relative path a host resolves from somewhere else. Reads only; exits 1 when it
//! finds a problem.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Result;
use clap::{Arg, ArgMatches, Command};
use serde_json::Value;

/// The `doctor` subcommand.
pub fn command() -> mcpspec::cli::Extra {
    let command = Command::new("doctor")
        .about("Say what is wrong with a spec, its database and providers, and the host configurations that run mcpspec")
        .arg(
            Arg::new("spec")
                .long("spec")
                .value_name("FILE")
                .value_parser(clap::value_parser!(PathBuf))
                .help("A spec file to check, with its database and providers"),
        )
        .arg(
            Arg::new("db")
                .long("db")
                .value_name("PATH|URL")
                .value_parser(clap::value_parser!(PathBuf))
                .help("The spec's database, if not where the spec says (opened read-only)"),
        );
    mcpspec::cli::Extra {
        command,
        run,
        serves: false,
    }
}

/// What doctor says: lines under headings, and how many of them are problems.
#[derive(Default)]
struct Findings {
    out: String,
    problems: usize,
}

impl Findings {
    fn heading(&mut self, text: &str) {
        self.out += &format!("\n{text}\n");
    }
    fn ok(&mut self, text: &str) {
        self.out += &format!("  ok: {text}\n");
    }
    fn note(&mut self, text: &str) {
        self.out += &format!("  note: {text}\n");
    }
    fn problem(&mut self, text: &str, help: &str) {
        self.problems += 1;
        self.out += &format!("  problem: {text}\n    help: {help}\n");
    }
}

fn run(m: &ArgMatches, _servers: Vec<mcpspec::Server>) -> Result<ExitCode> {
    mcpspec::__internal::backend::confine_spec_sql();
    let mut f = Findings::default();
    f.out += &format!("mcpspec {}\n", mcpspec::cli::version(true));
    if let Some(spec) = m.get_one::<PathBuf>("spec") {
        spec_findings(
            &mut f,
            spec,
            m.get_one::<PathBuf>("db").map(PathBuf::as_path),
        );
    }
    host_findings(&mut f);
    print!("{}", f.out);
    if f.problems == 0 {
        println!("\nno problems found");
        Ok(ExitCode::SUCCESS)
    } else {
        println!(
            "\n{} problem{} found",
            f.problems,
            if f.problems == 1 { "" } else { "s" }
        );
        Ok(ExitCode::FAILURE)
    }
}

/// The spec's check, its database and its providers.
fn spec_findings(f: &mut Findings, spec: &Path, db: Option<&Path>) {
    f.heading(&format!("spec {}", spec.display()));
    // The compiler's own read: a regular file of bounded size, never a pipe or device.
    let text = match codegen::read_spec(spec) {
        Ok(t) => t,
        Err(e) => {
            let e = e.to_string().to_lowercase();
            return f.problem(
                &format!("cannot read {}: {e}", spec.display()),
                "give the spec file's path, e.g. --spec spec/notes.yaml",
            );
        }
    };
    let def = match codegen::live::compile_text(spec, &text) {
        Ok(def) => def,
        Err(_) => {
            return f.problem(
                "the spec has problems and cannot be served",
                &format!(
                    "`mcpspec check --spec {}` shows each at its line",
                    spec.display()
                ),
            );
        }
    };
    f.ok(&format!(
        "{} {} compiles ({} tool{})",
        def.name,
        def.version,
        def.tools.len(),
        if def.tools.len() == 1 { "" } else { "s" }
    ));
    let report = codegen::check::check_file(spec, None);
    if report.is_ok() {
        f.ok("every statement prepared against the schema, and the examples pass");
    } else {
        f.problem(
            &format!("check finds {} problem(s)", report.findings.len()),
            &format!("`mcpspec check --spec {}` shows each", spec.display()),
        );
    }
    if let Some(database) = &def.database {
        database_findings(f, spec, database, db);
    }
    for e in def.embeddings {
        provider_findings(f, spec, e);
    }
}

/// Where the spec's database resolves, and whether it is there (a file) or answers (a URL).
fn database_findings(
    f: &mut Findings,
    spec: &Path,
    def: &mcpspec::def::DatabaseDef,
    flag: Option<&Path>,
) {
    let (path, source) = match mcpspec::__internal::backend::paths::resolve(def, flag) {
        Ok(found) => found,
        Err(e) => {
            return f.problem(
                &format!("the spec names no database for this system: {e}"),
                "pass --db PATH, or set the spec's database.env variable",
            );
        }
    };
    let shown = path.display().to_string();
    if shown.contains("://") {
        let live = codegen::cli::live_location(&path);
        let report = live.map(|l| codegen::check::check_file(spec, Some(&l)));
        match report {
            Ok(r) if r.is_ok() => f.ok(&format!(
                "the database ({}) answers, and every statement prepares against it",
                source.describe()
            )),
            _ => f.problem(
                &format!(
                    "the database URL ({}) does not answer, or its tables differ from the spec's",
                    source.describe()
                ),
                &format!(
                    "`mcpspec check --spec {} --db URL` names what fails",
                    spec.display()
                ),
            ),
        }
        return;
    }
    let file = mcpspec::__internal::backend::paths::file_of(&path);
    if file.is_file() {
        f.ok(&format!("database {shown} ({})", source.describe()));
    } else {
        f.problem(
            &format!(
                "the database {shown} ({}) does not exist",
                source.describe()
            ),
            &format!(
                "`mcpspec init --spec {} --db {shown}` creates it (add --sample for the spec's sample rows)",
                spec.display()
            ),
        );
    }
}

/// An embedding provider: its model directory, or the variable its key or choice is read from.
fn provider_findings(f: &mut Findings, spec: &Path, e: &mcpspec::def::EmbeddingDef) {
    use mcpspec::def::ProviderDef;
    let set = |var: &str| std::env::var_os(var).is_some_and(|v| !v.is_empty());
    match e.provider {
        ProviderDef::Static(dir) => {
            let base = spec.parent().unwrap_or(Path::new("."));
            let dir = base.join(dir);
            let missing: Vec<&str> = ["model.safetensors", "tokenizer.json"]
                .into_iter()
                .filter(|file| !dir.join(file).is_file())
                .collect();
            if missing.is_empty() {
                f.ok(&format!(
                    "embeddings `{}`: the model in {}",
                    e.name,
                    dir.display()
                ));
            } else {
                f.problem(
                    &format!(
                        "embeddings `{}`: {} has no {}",
                        e.name,
                        dir.display(),
                        missing.join(" or ")
                    ),
                    "put the static model's files there (docs/guide.md, \"Search by meaning\")",
                );
            }
        }
        ProviderDef::OpenAi { base_url, .. } if set(e.key_env) => f.ok(&format!(
            "embeddings `{}`: {base_url}, its key in {}",
            e.name, e.key_env
        )),
        ProviderDef::OpenAi { base_url, .. } => f.problem(
            &format!("embeddings `{}`: {} is not set", e.name, e.key_env),
            &format!(
                "set {} to the key of {base_url} where the server runs",
                e.key_env
            ),
        ),
        ProviderDef::Env(var) if set(var) => {
            f.ok(&format!("embeddings `{}`: chosen by {var}", e.name));
        }
        ProviderDef::Env(var) => f.note(&format!(
            "embeddings `{}`: {var} is not set, so the server searches without embeddings",
            e.name
        )),
    }
}

/// The host configuration files that exist here, with their hosts' names and where the
/// servers at their top are started.
fn host_files() -> Vec<(&'static str, PathBuf, Cwd)> {
    let home = std::env::var_os("HOME")
        .or_else(|| std::env::var_os("USERPROFILE"))
        .map(PathBuf::from);
    let mut files = Vec::new();
    if let Some(home) = &home {
        files.push((
            "Claude Code, user and local scopes",
            home.join(".claude.json"),
            Cwd::AnyProject,
        ));
        let desktop = if cfg!(target_os = "macos") {
            home.join("Library/Application Support/Claude")
        } else if cfg!(windows) {
            std::env::var_os("APPDATA")
                .map_or_else(|| home.join("AppData/Roaming"), PathBuf::from)
                .join("Claude")
        } else {
            std::env::var_os("XDG_CONFIG_HOME")
                .map_or_else(|| home.join(".config"), PathBuf::from)
                .join("Claude")
        };
        files.push((
            "Claude Desktop",
            desktop.join("claude_desktop_config.json"),
            Cwd::Unknown,
        ));
    }
    files.push((
        "Claude Code, project scope",
        PathBuf::from(".mcp.json"),
        Cwd::Project,
    ));
    files.into_iter().filter(|(_, p, _)| p.is_file()).collect()
}

/// Every host file found, and each of its servers that runs mcpspec.
fn host_findings(f: &mut Findings) {
    let files = host_files();
    if files.is_empty() {
        f.heading("hosts");
        f.note("no Claude Code or Claude Desktop configuration found here");
    }
    for (host, file, top) in files {
        f.heading(&format!("{host}: {}", file.display()));
        let parsed = std::fs::read_to_string(&file)
            .map_err(|e| e.to_string())
            .and_then(|t| serde_json::from_str::<Value>(&t).map_err(|e| e.to_string()));
        let config = match parsed {
            Ok(c) => c,
            Err(e) => {
                f.problem(
                    &format!("not readable as JSON: {e}"),
                    "fix the file, or let the host write it (`claude mcp add ...`)",
                );
                continue;
            }
        };
        let servers = servers_in(&config, top);
        let ours: Vec<_> = servers.iter().filter(|(_, s, _)| runs_mcpspec(s)).collect();
        if ours.is_empty() {
            f.note(&format!("{} server(s), none runs mcpspec", servers.len()));
        }
        for (name, server, cwd) in ours {
            server_findings(f, host, name, server, *cwd);
        }
    }
}

/// Where a host starts a server, which is what a relative path in its arguments is relative to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cwd {
    /// This project: Claude Code's project scope (`.mcp.json`) and local scope (the entries
    /// under this directory in `~/.claude.json`), which it starts here.
    Project,
    /// Wherever Claude Code happens to run: its user scope, used from every project.
    AnyProject,
    /// A directory of the host's own choosing: Claude Desktop.
    Unknown,
}

/// The `mcpServers` of a host file with where each is started: at the file's top, and in
/// Claude Code's file under this directory's project (local scope).
fn servers_in(config: &Value, top: Cwd) -> Vec<(String, Value, Cwd)> {
    let mut found: Vec<(String, Value, Cwd)> = Vec::new();
    let mut add = |servers: &Value, cwd: Cwd| {
        if let Some(map) = servers.as_object() {
            found.extend(map.iter().map(|(k, v)| (k.clone(), v.clone(), cwd)));
        }
    };
    add(&config["mcpServers"], top);
    if let Ok(cwd) = std::env::current_dir() {
        let local = &config["projects"][cwd.to_string_lossy().as_ref()]["mcpServers"];
        add(local, Cwd::Project);
    }
    found
}

/// Whether a server entry runs mcpspec: its command is `mcpspec`, or `npx`/`uvx`/`pipx` with
/// `mcpspec` among the arguments.
fn runs_mcpspec(server: &Value) -> bool {
    let command = server["command"].as_str().unwrap_or_default();
    let stem = Path::new(command)
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    stem == "mcpspec" || args(server).iter().any(|a| a == "mcpspec")
}

fn args(server: &Value) -> Vec<String> {
    server["args"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// One server entry: its command found as the host would find it, and the files its
/// arguments name: there, and named so that the host finds them from where it starts it.
fn server_findings(f: &mut Findings, host: &str, name: &str, server: &Value, cwd: Cwd) {
    let command = server["command"].as_str().unwrap_or_default();
    let before = f.problems;
    match find_program(command) {
        Some(_) if host == "Claude Desktop" && !Path::new(command).is_absolute() => f.note(&format!(
            "`{name}`: Claude Desktop starts `{command}` without your shell's PATH; if it says the command is not found, give its full path"
        )),
        Some(_) => {}
        None => f.problem(
            &format!("`{name}`: the command `{command}` is not found"),
            "install it, or give the command's full path in the entry",
        ),
    }
    let args = args(server);
    for flag in ["--spec", "--db"] {
        let Some(value) = args.iter().skip_while(|a| *a != flag).nth(1) else {
            continue;
        };
        if value.contains("://") {
            continue;
        }
        let path = Path::new(value);
        match cwd {
            _ if path.is_absolute() => {}
            Cwd::Unknown => {
                f.problem(
                    &format!("`{name}`: {flag} {value} is a relative path"),
                    "Claude Desktop starts the server in a directory of its own choosing; give the full path",
                );
                continue;
            }
            Cwd::AnyProject => {
                f.note(&format!(
                    "`{name}`: {flag} {value} is relative to whichever project Claude Code runs in; give the full path to use it from every project"
                ));
                continue;
            }
            Cwd::Project => {}
        }
        missing_file(f, name, flag, value, path);
    }
    if f.problems == before {
        f.ok(&format!("`{name}`: {command} {}", args.join(" ")));
    }
}

/// A problem when the spec or database an entry names (absolute, or relative to this
/// project) is not there.
fn missing_file(f: &mut Findings, name: &str, flag: &str, value: &str, path: &Path) {
    if path.exists() {
        return;
    }
    if flag == "--spec" {
        f.problem(
            &format!("`{name}`: the spec {value} does not exist"),
            "give the path of the spec file",
        );
    } else {
        f.problem(
            &format!("`{name}`: the database {value} does not exist"),
            "`mcpspec init --spec SPEC --db FILE` creates it",
        );
    }
}

/// A program as a host finds it: a path that exists, or a name on the PATH.
fn find_program(command: &str) -> Option<PathBuf> {
    if command.is_empty() {
        return None;
    }
    let path = Path::new(command);
    if path.components().count() > 1 {
        return path.is_file().then(|| path.to_path_buf());
    }
    let exts: &[&str] = if cfg!(windows) {
        &["", ".exe", ".cmd"]
    } else {
        &[""]
    };
    std::env::split_paths(&std::env::var_os("PATH")?).find_map(|dir| {
        exts.iter()
            .map(|ext| dir.join(format!("{command}{ext}")))
            .find(|p| p.is_file())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn servers_that_run_mcpspec_are_told_apart() {
        assert!(runs_mcpspec(
            &json!({"command": "/usr/local/bin/mcpspec", "args": ["serve"]})
        ));
        assert!(runs_mcpspec(
            &json!({"command": "npx", "args": ["-y", "mcpspec", "serve"]})
        ));
        assert!(runs_mcpspec(
            &json!({"command": "uvx", "args": ["mcpspec", "serve"]})
        ));
        assert!(!runs_mcpspec(
            &json!({"command": "npx", "args": ["-y", "other-server"]})
        ));
        assert!(!runs_mcpspec(
            &json!({"type": "http", "url": "https://x/mcp"})
        ));
    }

    #[test]
    fn a_missing_command_and_relative_paths_are_problems() {
        let mut f = Findings::default();
        let server = json!({"command": "no-such-mcpspec-command-here", "args": ["serve", "--spec", "notes.yaml"]});
        server_findings(&mut f, "Claude Desktop", "notes", &server, Cwd::Unknown);
        assert_eq!(f.problems, 2, "{}", f.out);
        assert!(
            f.out
                .contains("the command `no-such-mcpspec-command-here` is not found"),
            "{}",
            f.out
        );
        assert!(
            f.out.contains("--spec notes.yaml is a relative path"),
            "{}",
            f.out
        );
    }

    #[test]
    fn relative_paths_are_judged_by_where_the_host_starts_the_server() {
        let server =
            json!({"command": "sh", "args": ["serve", "--spec", "no-such-dir/notes.yaml"]});
        // A project's own entry: relative to this directory, where the file is missing.
        let mut f = Findings::default();
        server_findings(
            &mut f,
            "Claude Code, project scope",
            "notes",
            &server,
            Cwd::Project,
        );
        assert_eq!(f.problems, 1, "{}", f.out);
        assert!(
            f.out
                .contains("the spec no-such-dir/notes.yaml does not exist"),
            "{}",
            f.out
        );
        // The user scope: a note, since it depends on the project Claude Code runs in.
        let mut f = Findings::default();
        let scope = "Claude Code, user and local scopes";
        server_findings(&mut f, scope, "notes", &server, Cwd::AnyProject);
        assert_eq!(f.problems, 0, "{}", f.out);
        assert!(
            f.out
                .contains("note: `notes`: --spec no-such-dir/notes.yaml is relative"),
            "{}",
            f.out
        );
    }
}
