//! `mcpspec setup`: puts a proxy server (such as `lessons`) in front of the MCP servers of
//! the person's Claude Desktop configuration.
//!
//! The plan is computed without touching a file: the Claude Desktop config for this system,
//! the servers it lists, the ones chosen to be proxied, the new downstream list and the new
//! Desktop config, with a unified diff of both. Applying it keeps a backup of the Desktop
//! config and writes each file through a temporary file and a rename. Key order in the
//! Desktop config is kept, so the diff shows only what changes.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, anyhow};
use mcpspec::__internal::backend::paths as db;
use mcpspec::def::ServerDef;

use serde::de::{Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Deserialize, Serialize, Serializer};
use serde_json::Value;

#[path = "../../codegen/src/textdiff.rs"]
mod textdiff;

/// The key under which the proxy is registered in the Desktop config.
pub const ENTRY: &str = "lessons-learned";

#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error("cannot read {path}: {reason}")]
    Read { path: String, reason: String },
    #[error("{path} is not valid JSON: {reason}")]
    Json { path: String, reason: String },
    #[error("{path} has no `mcpServers` object")]
    NoServers { path: String },
    #[error("no server named `{name}` in the Claude Desktop config; it lists: {known}")]
    UnknownServer { name: String, known: String },
    #[error("no servers chosen; pass --servers NAME,... or --all")]
    NothingChosen,
    #[error("cannot write {path}: {reason}")]
    Write { path: String, reason: String },
}

/// A JSON value that keeps the order of object keys, so that rewriting a person's config
/// changes only what it must.
#[derive(Debug, Clone, PartialEq)]
pub enum Ordered {
    Object(Vec<(String, Ordered)>),
    Array(Vec<Ordered>),
    Leaf(Value),
}

impl Ordered {
    fn get(&self, key: &str) -> Option<&Ordered> {
        match self {
            Ordered::Object(entries) => entries.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    fn to_value(&self) -> Value {
        match self {
            Ordered::Object(entries) => Value::Object(
                entries
                    .iter()
                    .map(|(k, v)| (k.clone(), v.to_value()))
                    .collect(),
            ),
            Ordered::Array(items) => Value::Array(items.iter().map(Ordered::to_value).collect()),
            Ordered::Leaf(v) => v.clone(),
        }
    }

    fn from_value(v: &Value) -> Ordered {
        match v {
            Value::Object(o) => Ordered::Object(
                o.iter()
                    .map(|(k, v)| (k.clone(), Ordered::from_value(v)))
                    .collect(),
            ),
            Value::Array(a) => Ordered::Array(a.iter().map(Ordered::from_value).collect()),
            other => Ordered::Leaf(other.clone()),
        }
    }
}

impl Serialize for Ordered {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Ordered::Object(entries) => {
                let mut m = s.serialize_map(Some(entries.len()))?;
                for (k, v) in entries {
                    m.serialize_entry(k, v)?;
                }
                m.end()
            }
            Ordered::Array(items) => {
                let mut q = s.serialize_seq(Some(items.len()))?;
                for v in items {
                    q.serialize_element(v)?;
                }
                q.end()
            }
            Ordered::Leaf(v) => v.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for Ordered {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Ordered, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Ordered;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("JSON")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Ordered, A::Error> {
                let mut entries = Vec::new();
                while let Some((k, v)) = map.next_entry::<String, Ordered>()? {
                    entries.push((k, v));
                }
                Ok(Ordered::Object(entries))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Ordered, A::Error> {
                let mut items = Vec::new();
                while let Some(v) = seq.next_element::<Ordered>()? {
                    items.push(v);
                }
                Ok(Ordered::Array(items))
            }
            fn visit_bool<E>(self, b: bool) -> Result<Ordered, E> {
                Ok(Ordered::Leaf(Value::Bool(b)))
            }
            fn visit_i64<E>(self, n: i64) -> Result<Ordered, E> {
                Ok(Ordered::Leaf(Value::from(n)))
            }
            fn visit_u64<E>(self, n: u64) -> Result<Ordered, E> {
                Ok(Ordered::Leaf(Value::from(n)))
            }
            fn visit_f64<E>(self, n: f64) -> Result<Ordered, E> {
                Ok(Ordered::Leaf(Value::from(n)))
            }
            fn visit_str<E>(self, s: &str) -> Result<Ordered, E> {
                Ok(Ordered::Leaf(Value::from(s)))
            }
            fn visit_string<E>(self, s: String) -> Result<Ordered, E> {
                Ok(Ordered::Leaf(Value::from(s)))
            }
            fn visit_unit<E>(self) -> Result<Ordered, E> {
                Ok(Ordered::Leaf(Value::Null))
            }
            fn visit_none<E>(self) -> Result<Ordered, E> {
                Ok(Ordered::Leaf(Value::Null))
            }
        }
        d.deserialize_any(V)
    }
}

fn pretty(v: &Ordered) -> String {
    serde_json::to_string_pretty(v).unwrap_or_default() + "\n"
}

/// Where Claude Desktop keeps its config on this system.
pub fn desktop_config_path() -> Option<PathBuf> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    if cfg!(target_os = "macos") {
        home.map(|h| h.join("Library/Application Support/Claude/claude_desktop_config.json"))
    } else if cfg!(windows) {
        std::env::var_os("APPDATA")
            .map(|a| PathBuf::from(a).join("Claude/claude_desktop_config.json"))
    } else {
        let config = std::env::var_os("XDG_CONFIG_HOME")
            .map(PathBuf::from)
            .or_else(|| home.map(|h| h.join(".config")));
        config.map(|c| c.join("Claude/claude_desktop_config.json"))
    }
}

/// One MCP server of the Desktop config.
#[derive(Debug, Clone, PartialEq)]
pub struct Listed {
    pub name: String,
    pub command: String,
    pub args: Vec<String>,
    /// Already proxied: the proxy's own entry is never offered.
    pub is_proxy: bool,
}

fn read(path: &Path) -> Result<String, SetupError> {
    std::fs::read_to_string(path).map_err(|e| read_error(path, &e))
}

/// A file that could not be read, said by its path and the kind of failure.
fn read_error(path: &Path, e: &std::io::Error) -> SetupError {
    SetupError::Read {
        path: path.display().to_string(),
        reason: e.kind().to_string(),
    }
}

fn parse(path: &Path, text: &str) -> Result<Ordered, SetupError> {
    serde_json::from_str(text).map_err(|e| SetupError::Json {
        path: path.display().to_string(),
        reason: e.to_string(),
    })
}

/// The servers a Desktop config lists, in its order.
pub fn list(path: &Path, text: &str) -> Result<Vec<Listed>, SetupError> {
    let doc = parse(path, text)?;
    let Some(Ordered::Object(servers)) = doc.get("mcpServers") else {
        return Err(SetupError::NoServers {
            path: path.display().to_string(),
        });
    };
    Ok(servers
        .iter()
        .map(|(name, entry)| {
            let v = entry.to_value();
            Listed {
                name: name.clone(),
                command: v["command"].as_str().unwrap_or_default().to_string(),
                args: v["args"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(Value::as_str)
                            .map(str::to_string)
                            .collect()
                    })
                    .unwrap_or_default(),
                is_proxy: name == ENTRY,
            }
        })
        .collect())
}

/// What the proxy's own Desktop entry runs.
#[derive(Debug, Clone)]
pub struct ProxyEntry {
    pub command: String,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
}

/// A computed change, not yet written.
#[derive(Debug, Clone)]
pub struct Plan {
    pub desktop_path: PathBuf,
    pub desktop_old: String,
    pub desktop_new: String,
    pub proxy_path: PathBuf,
    pub proxy_old: Option<String>,
    pub proxy_new: String,
    /// The servers moved behind the proxy, in the config's order.
    pub chosen: Vec<String>,
}

impl Plan {
    /// Unified diffs of both files.
    pub fn diff(&self) -> String {
        let d = self.desktop_path.display().to_string();
        let p = self.proxy_path.display().to_string();
        let mut out = textdiff::unified(&d, &d, &self.desktop_old, &self.desktop_new);
        out += &textdiff::unified(
            if self.proxy_old.is_some() {
                &p
            } else {
                "/dev/null"
            },
            &p,
            self.proxy_old.as_deref().unwrap_or(""),
            &self.proxy_new,
        );
        out
    }

    /// Writes both files: the Desktop config's old text goes to `<name>.bak` first, and each
    /// file is replaced through a rename so that a crash leaves the old or the new one.
    /// Returns the backup's path.
    pub fn apply(&self) -> Result<PathBuf, SetupError> {
        let backup = self.desktop_path.with_extension("json.bak");
        write(&backup, &self.desktop_old)?;
        write(&self.proxy_path, &self.proxy_new)?;
        write(&self.desktop_path, &self.desktop_new)?;
        Ok(backup)
    }
}

fn write(path: &Path, text: &str) -> Result<(), SetupError> {
    mcpspec::handler::replace_file(path, text.as_bytes()).map_err(|e| SetupError::Write {
        path: path.display().to_string(),
        reason: e.to_string(),
    })
}

/// Computes the change: the chosen servers leave the Desktop config's `mcpServers` for the
/// proxy's downstream list (replacing entries of the same name there), and the proxy's own
/// entry is added or updated. Everything else in both files is kept as it was.
pub fn plan(
    desktop_path: &Path,
    proxy_path: &Path,
    chosen: &[String],
    entry: &ProxyEntry,
) -> Result<Plan, SetupError> {
    let desktop_old = read(desktop_path)?;
    let listed = list(desktop_path, &desktop_old)?;
    let known: Vec<&str> = listed
        .iter()
        .filter(|l| !l.is_proxy)
        .map(|l| l.name.as_str())
        .collect();
    for name in chosen {
        if !known.contains(&name.as_str()) {
            return Err(SetupError::UnknownServer {
                name: name.clone(),
                known: known.join(", "),
            });
        }
    }
    if chosen.is_empty() {
        return Err(SetupError::NothingChosen);
    }
    let mut doc = parse(desktop_path, &desktop_old)?;
    let Ordered::Object(top) = &mut doc else {
        unreachable!("list() found mcpServers in an object");
    };
    let Some((_, Ordered::Object(servers))) = top.iter_mut().find(|(k, _)| k == "mcpServers")
    else {
        unreachable!("list() found mcpServers");
    };
    let mut moved = Vec::new();
    servers.retain(|(name, v)| {
        if chosen.contains(name) {
            moved.push((name.clone(), v.to_value()));
            false
        } else {
            true
        }
    });
    let own = own_entry(entry);
    match servers.iter_mut().find(|(k, _)| k == ENTRY) {
        Some((_, v)) => *v = own,
        None => servers.push((ENTRY.into(), own)),
    }

    let proxy_old = read_proxy(proxy_path)?;
    let mut proxy = match &proxy_old {
        Some(t) => parse(proxy_path, t)?,
        None => Ordered::Object(vec![("version".into(), Ordered::Leaf(Value::from(1)))]),
    };
    add_downstream(proxy_path, &mut proxy, &moved)?;
    Ok(Plan {
        desktop_path: desktop_path.to_path_buf(),
        desktop_new: pretty(&doc),
        desktop_old,
        proxy_path: proxy_path.to_path_buf(),
        proxy_old,
        proxy_new: pretty(&proxy),
        chosen: moved.into_iter().map(|(n, _)| n).collect(),
    })
}

/// The proxy's own entry in the Desktop config, as `entry` says.
fn own_entry(entry: &ProxyEntry) -> Ordered {
    Ordered::Object(vec![
        (
            "command".into(),
            Ordered::Leaf(Value::from(entry.command.clone())),
        ),
        (
            "args".into(),
            Ordered::Array(
                entry
                    .args
                    .iter()
                    .map(|a| Ordered::Leaf(Value::from(a.clone())))
                    .collect(),
            ),
        ),
        (
            "env".into(),
            Ordered::Object(
                entry
                    .env
                    .iter()
                    .map(|(k, v)| (k.clone(), Ordered::Leaf(Value::from(v.clone()))))
                    .collect(),
            ),
        ),
    ])
}

/// The proxy's config as it is now; `None` when there is none yet.
fn read_proxy(proxy_path: &Path) -> Result<Option<String>, SetupError> {
    match std::fs::read_to_string(proxy_path) {
        Ok(t) => Ok(Some(t)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(read_error(proxy_path, &e)),
    }
}

/// Adds the `moved` servers to the proxy config's `proxyServers` (made when missing),
/// replacing entries of the same name.
fn add_downstream(
    proxy_path: &Path,
    proxy: &mut Ordered,
    moved: &[(String, Value)],
) -> Result<(), SetupError> {
    let Ordered::Object(pentries) = proxy else {
        return Err(SetupError::Json {
            path: proxy_path.display().to_string(),
            reason: "not a JSON object".into(),
        });
    };
    if !pentries.iter().any(|(k, _)| k == "proxyServers") {
        pentries.push(("proxyServers".into(), Ordered::Array(Vec::new())));
    }
    let Some((_, Ordered::Array(list))) = pentries.iter_mut().find(|(k, _)| k == "proxyServers")
    else {
        return Err(SetupError::Json {
            path: proxy_path.display().to_string(),
            reason: "`proxyServers` is not an array".into(),
        });
    };
    for (name, v) in moved {
        list.retain(|e| e.get("name").map(Ordered::to_value) != Some(Value::from(name.clone())));
        let mut fields = vec![("name".to_string(), Ordered::Leaf(Value::from(name.clone())))];
        for key in ["command", "args", "env"] {
            let value = v.get(key).cloned().unwrap_or_else(|| match key {
                "args" => Value::Array(Vec::new()),
                "env" => Value::Object(serde_json::Map::new()),
                _ => Value::from(""),
            });
            fields.push((key.to_string(), Ordered::from_value(&value)));
        }
        list.push(Ordered::Object(fields));
    }
    Ok(())
}

/// Parses the person's answer to the numbered list: numbers or names separated by commas or
/// spaces, or `all`.
pub fn parse_choice(answer: &str, listed: &[Listed]) -> Result<Vec<String>, String> {
    let offered: Vec<&Listed> = listed.iter().filter(|l| !l.is_proxy).collect();
    let answer = answer.trim();
    if answer.eq_ignore_ascii_case("all") {
        return Ok(offered.iter().map(|l| l.name.clone()).collect());
    }
    let mut out = Vec::new();
    for word in answer.split([',', ' ']).filter(|w| !w.is_empty()) {
        let name = match word.parse::<usize>() {
            Ok(n) if (1..=offered.len()).contains(&n) => offered[n - 1].name.clone(),
            Ok(n) => return Err(format!("{n} is not in the list (1 to {})", offered.len())),
            Err(_) => match offered.iter().find(|l| l.name == word) {
                Some(l) => l.name.clone(),
                None => return Err(format!("`{word}` is not in the list")),
            },
        };
        if !out.contains(&name) {
            out.push(name);
        }
    }
    Ok(out)
}

/// The name of the resource whose text `mcpspec setup` prints for the person to paste into
/// a Claude Desktop project's instructions (PRD section 10).
pub const SYSTEM_PROMPT_RESOURCE: &str = "system-prompt";

/// The static text of the server's system-prompt resource, when it declares one.
pub fn system_prompt(def: &mcpspec::def::ServerDef) -> Option<&'static str> {
    def.resources
        .iter()
        .find(|r| r.name == SYSTEM_PROMPT_RESOURCE && r.content.statement.is_none())
        .and_then(|r| r.content.template)
}

/// `mcpspec setup <server>`: the parsed command line.
#[derive(clap::Parser)]
#[command(
    name = "setup",
    about = "Put a proxy server (`lessons`) in front of the MCP servers of Claude Desktop's config: shows a diff, writes only after confirmation, keeps a backup"
)]
struct SetupCommand {
    server: String,
    #[command(flatten)]
    flags: SetupFlags,
}

/// The `setup` subcommand, for the `mcpspec` binary's command line.
pub fn command() -> clap::Command {
    <SetupCommand as clap::CommandFactory>::command()
}

/// Runs `mcpspec setup` on one of the seed servers.
pub fn run(m: &clap::ArgMatches, _servers: Vec<mcpspec::Server>) -> Result<ExitCode> {
    let c = <SetupCommand as clap::FromArgMatches>::from_arg_matches(m)?;
    let def = crate::server(&c.server)
        .filter(|d| {
            crate::servers::seeds()
                .iter()
                .any(|s| s.def().name == d.name)
        })
        .ok_or_else(|| anyhow!("no server named `{}`", c.server))?;
    run_setup(def, c.flags)
}

/// The flags of `mcpspec setup`.
#[derive(clap::Args)]
struct SetupFlags {
    /// The Claude Desktop config; this system's usual place by default.
    #[arg(long)]
    config_path: Option<PathBuf>,
    /// The downstream list the proxy reads; by default where the spec's `proxy.config`
    /// points (its environment variable, else its default path).
    #[arg(long)]
    proxy_config: Option<PathBuf>,
    /// The database the proxy uses; the spec's environment variable or default path.
    #[arg(long)]
    db: Option<PathBuf>,
    /// The servers to proxy, by name (comma-separated); asked interactively otherwise.
    #[arg(long, value_delimiter = ',')]
    servers: Vec<String>,
    /// Proxy every server of the config.
    #[arg(long, conflicts_with = "servers")]
    all: bool,
    /// Show the change and write nothing.
    #[arg(long)]
    dry_run: bool,
    /// Write without asking.
    #[arg(long, short)]
    yes: bool,
}

fn ask(question: &str) -> Result<String> {
    use std::io::Write;
    print!("{question}");
    std::io::stdout().flush()?;
    let mut answer = String::new();
    std::io::stdin().read_line(&mut answer)?;
    Ok(answer)
}

/// `mcpspec setup`: the PRD's setup-mcp steps, with flags for every question so that it runs
/// unattended too.
fn run_setup(def: &'static ServerDef, f: SetupFlags) -> Result<ExitCode> {
    let proxy = def.proxy.as_ref().ok_or_else(|| {
        anyhow!(
            "`{}` is not a proxy server: its spec has no `proxy:` section",
            def.name
        )
    })?;
    let config = proxy.config.as_ref().ok_or_else(|| {
        anyhow!(
            "the proxy of `{}` reads no downstream list (`proxy.config`)",
            def.name
        )
    })?;
    let desktop = match f.config_path.clone() {
        Some(p) => p,
        None => desktop_config_path().ok_or_else(|| {
            anyhow!("no Claude Desktop config location on this system; pass --config-path")
        })?,
    };
    let text = std::fs::read_to_string(&desktop)
        .with_context(|| format!("reading the Claude Desktop config {}", desktop.display()))?;
    let listed = list(&desktop, &text)?;
    let database = match &def.database {
        Some(d) => Some((d, std::path::absolute(db::resolve(d, f.db.as_deref())?.0)?)),
        None => None,
    };
    // The downstream list goes where the server will look for it: the flag, else the spec's
    // environment variable or default path, which the Desktop entry then names explicitly.
    let proxy_path = match f
        .proxy_config
        .clone()
        .or_else(|| mcpspec::__internal::config_path(config))
    {
        Some(p) => std::path::absolute(p)?,
        None => {
            return Err(anyhow!(
                "no default downstream list on this system; pass --proxy-config"
            ));
        }
    };
    println!("Claude Desktop config: {}", desktop.display());
    let chosen = choose(&f, &listed)?;
    let exe = std::env::current_exe().context("locating the mcpspec binary")?;
    let mut args = vec!["serve".to_string(), def.name.to_string()];
    if let (Some(_), Some((_, path))) = (&f.db, &database) {
        args.extend(["--db".to_string(), path.display().to_string()]);
    }
    let entry = ProxyEntry {
        command: exe.display().to_string(),
        args,
        env: config
            .env
            .map(|var| (var.to_string(), proxy_path.display().to_string()))
            .into_iter()
            .collect(),
    };
    let plan = plan(&desktop, &proxy_path, &chosen, &entry)?;
    println!("\n{}", plan.diff());
    if let Some(code) = stop_before_writing(&f)? {
        return Ok(code);
    }
    if let Some((d, path)) = &database
        && !path.exists()
    {
        let at = mcpspec::backend::Location::File(path.clone());
        mcpspec::__internal::backend::create(&at, def.name, d, false)?;
        println!("created {}", path.display());
    }
    let backup = plan.apply()?;
    report(def, &plan, &backup);
    Ok(ExitCode::SUCCESS)
}

/// Lists the config's servers (the proxy itself left out) and returns those to proxy: all,
/// the ones named by flag, or the person's answer on a terminal.
fn choose(f: &SetupFlags, listed: &[Listed]) -> Result<Vec<String>> {
    use std::io::IsTerminal;
    let offered: Vec<&Listed> = listed.iter().filter(|l| !l.is_proxy).collect();
    for (i, l) in offered.iter().enumerate() {
        let mark = if f.all || f.servers.contains(&l.name) {
            "x"
        } else {
            " "
        };
        println!(
            "  [{mark}] {}. {}  ({} {})",
            i + 1,
            l.name,
            l.command,
            l.args.join(" ")
        );
    }
    if f.all {
        Ok(offered.iter().map(|l| l.name.clone()).collect())
    } else if !f.servers.is_empty() {
        Ok(f.servers.clone())
    } else if std::io::stdin().is_terminal() {
        let answer = ask("Proxy which servers? (numbers or names, or `all`): ")?;
        parse_choice(&answer, listed).map_err(|e| anyhow!(e))
    } else {
        Err(SetupError::NothingChosen.into())
    }
}

/// The exit code to stop with before writing: a dry run, or a person who did not say yes;
/// `None` to go on.
fn stop_before_writing(f: &SetupFlags) -> Result<Option<ExitCode>> {
    use std::io::IsTerminal;
    if f.dry_run {
        println!("dry run: nothing was written");
        return Ok(Some(ExitCode::SUCCESS));
    }
    if f.yes {
        return Ok(None);
    }
    if !std::io::stdin().is_terminal() {
        return Err(anyhow!(
            "not a terminal: pass --yes to write without asking, or --dry-run"
        ));
    }
    let answer = ask("Write these changes? [y/N] ")?;
    if matches!(answer.trim(), "y" | "Y" | "yes") {
        Ok(None)
    } else {
        println!("nothing was written");
        Ok(Some(ExitCode::FAILURE))
    }
}

/// What was written, and what the person does next.
fn report(def: &ServerDef, plan: &Plan, backup: &Path) {
    println!(
        "wrote {} (backup: {})",
        plan.desktop_path.display(),
        backup.display()
    );
    println!("wrote {}", plan.proxy_path.display());
    println!("\nRestart Claude Desktop.");
    if let Some(text) = system_prompt(def) {
        println!("Then paste this into the project's instructions:\n\n{text}");
    }
    println!(
        "Note: hints arrive with the result of the call they are about, after it ran; guards \
         block before the call is forwarded. Use a guard where acting first would do harm."
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordered_json_round_trips_key_order() {
        let text = r#"{"z": 1, "a": {"y": [1, {"c": 2, "b": 3}], "x": null}}"#;
        let v: Ordered = serde_json::from_str(text).expect("parse");
        assert_eq!(
            serde_json::to_string(&v).expect("print"),
            r#"{"z":1,"a":{"y":[1,{"c":2,"b":3}],"x":null}}"#
        );
    }

    #[test]
    fn choices_by_number_name_or_all() {
        let l = |name: &str| Listed {
            name: name.into(),
            command: "x".into(),
            args: vec![],
            is_proxy: name == ENTRY,
        };
        let listed = [l("fs"), l(ENTRY), l("dc")];
        assert_eq!(
            parse_choice("2, fs", &listed),
            Ok(vec!["dc".into(), "fs".into()])
        );
        assert_eq!(
            parse_choice("all", &listed),
            Ok(vec!["fs".into(), "dc".into()])
        );
        assert!(parse_choice("3", &listed).is_err());
        assert!(parse_choice("nope", &listed).is_err());
    }
}
