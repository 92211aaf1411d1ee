//! `dev`: serves a spec straight from its YAML over stdio, through the same IR and engine as a
//! compiled server, and swaps in each valid edit of the file (or of a file of its skills) while
//! the client stays connected.
//!
//! The binary supplies the spec compiler ([`Compile`]); the runtime knows none. An edit that
//! does not compile, or whose statements do not prepare, is reported on stderr and the last good
//! version keeps serving. A valid one replaces the engine for the next request and the client
//! hears `notifications/{tools,resources,prompts}/list_changed`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use anyhow::{Context as _, Result, anyhow};

use super::Server;
use crate::backend::Location;
use crate::def::{DatabaseDef, ServerDef};
use crate::engine::Engine;
use crate::handler::{Dispatch, NoHandlers};
use crate::protocol::{Live, McpServer};

/// The spec compiler a binary supplies: how it reads a spec file (a regular file of bounded
/// size, never a pipe or a device) and how it compiles that text into the runtime's tables or
/// renders its problems.
#[derive(Clone, Copy)]
pub struct Compile {
    pub read: fn(&Path) -> std::io::Result<String>,
    pub compile: fn(&Path, &str) -> Result<&'static ServerDef, String>,
}

impl Compile {
    /// The spec file's text, its problem rendered as the compiler's are when it cannot be read.
    pub(crate) fn read(&self, spec: &Path) -> Result<String, String> {
        (self.read)(spec).map_err(|e| {
            format!(
                "error: cannot read {}: {}",
                spec.display(),
                e.to_string().to_lowercase()
            )
        })
    }
}

/// How often the spec file's modification time and size are looked at: a `stat` 50 times a
/// second costs nothing measurable. A change is served once it has stayed the same for one
/// look more ([`Settle`]), on average 30 ms after the save lands.
const POLL: Duration = Duration::from_millis(20);

/// Tells when a changed stamp has settled: a save written in place (the file truncated, then
/// written, as many editors do) is seen half-way by a look that falls between the two, and
/// reading it then reports an error the user never saved. A change is acted on only when the
/// next look finds the same stamp.
#[derive(Debug, Default)]
struct Settle<T> {
    pending: Option<T>,
}

impl<T: PartialEq> Settle<T> {
    /// Whether `now`, which differs from what was last served, has stayed the same since the
    /// last look.
    fn settled(&mut self, now: T) -> bool {
        if self.pending.as_ref() == Some(&now) {
            self.pending = None;
            return true;
        }
        self.pending = Some(now);
        false
    }

    /// The stamps are back to what is served: nothing is pending.
    fn unchanged(&mut self) {
        self.pending = None;
    }
}

/// Serves `spec` until stdin closes, reloading it on every change. `db` is a live database
/// (file or URL); without one, a scratch SQLite database holds the spec's schema and sample
/// rows, made again when they change. Handler tools run the handlers of the compiled server of
/// the same name in `servers`, when there is one. With `toolsets` (`--toolset`), only their
/// tools are offered, in every version served. With `ui` (`--ui`), the workbench at that
/// loopback address shows the calls of every version (those made while a page is open, or
/// the last ones whenever made with [`Ui::history`]), follows the reloads (a refused save's
/// problems shown until a good one), and runs the examples on the scratch database's sample
/// rows.
pub fn run(
    spec: &Path,
    db: Option<&Path>,
    derive_in_place: bool,
    toolsets: &[String],
    ui: Option<Ui>,
    servers: Vec<Server>,
    compile: Compile,
) -> Result<ExitCode> {
    if let Some(ui) = ui {
        crate::workbench::on_this_machine(ui.addr)?;
        if ui.history {
            crate::workbench::keep_history();
        }
        if db.is_none() {
            crate::workbench::on_sample_rows();
        }
    }
    // Taken before the first compile, so that a save made while the server starts is served.
    let spec_seen = stamp(spec);
    let text = compile.read(spec).map_err(|problem| anyhow!("{problem}"))?;
    let def = (compile.compile)(spec, &text).map_err(|problems| anyhow!("{problems}"))?;
    let seen = (spec_seen, beside_stamps(spec, def));
    let last = Some(text);
    let handlers: Handlers = servers
        .into_iter()
        .filter_map(|s| Some((s.def.name, Arc::from(s.handlers?))))
        .collect();
    // Owned here, not by the watching thread (which the process ends without unwinding), so
    // that the scratch databases are removed when the session ends.
    let scratch = tempfile::tempdir().context("creating a scratch directory")?;
    let mut dbs = Databases {
        flag: db.map(Path::to_path_buf),
        in_place: derive_in_place,
        scratch: scratch.path().to_path_buf(),
        made: None,
    };
    // The toolsets are checked against the first version; a later one that drops one offers
    // none of its tools, and one that changes a set's tools is followed.
    let toolsets = super::offered(def, toolsets)?;
    let engine = start(def, &mut dbs, &handlers)?;
    eprintln!(
        "mcpspec dev: serving {} ({} tools) on {}; edits to the file are served as they are saved",
        spec.display(),
        def.tools.len(),
        dbs.shown(engine.as_ref())
    );
    let watch = Watch {
        spec: spec.to_path_buf(),
        compile,
        handlers,
        dbs,
        seen,
        last,
        settle: Settle::default(),
    };
    let make = |engine, proxy| {
        let server = McpServer::changing(engine, proxy);
        if let Some(names) = toolsets {
            server.live().offer_only(names);
        }
        server
    };
    super::serve_stdio(engine, make, ui.map(|ui| ui.addr), move |server, peer| {
        let live = server.live();
        let runtime = tokio::runtime::Handle::current();
        std::thread::spawn(move || watch.run(&live, &peer, &runtime));
    })?;
    drop(scratch);
    Ok(ExitCode::SUCCESS)
}

/// `dev`'s workbench (`--ui ADDR`, and `--ui-history`).
#[derive(Debug, Clone, Copy)]
pub struct Ui {
    /// Where the page is served: a loopback address.
    pub addr: std::net::SocketAddr,
    /// Whether the last calls are kept while no page is open too, for a page opened later.
    pub history: bool,
}

/// The handlers of the binary's compiled servers, by server name.
type Handlers = std::collections::HashMap<&'static str, Arc<dyn Dispatch>>;

/// The engine for `def`, with the handlers of the compiled server of its name (shared by every
/// version that keeps the name).
fn start(def: &'static ServerDef, dbs: &mut Databases, handlers: &Handlers) -> Result<Arc<Engine>> {
    let location = dbs.for_def(def)?;
    let handlers: Box<dyn Dispatch> = match handlers.get(def.name) {
        Some(h) => Box::new(h.clone()),
        None => Box::new(NoHandlers(def.name)),
    };
    let placing = crate::backend::Placing {
        in_place: dbs.in_place,
        ..Default::default()
    };
    Ok(Engine::start_placed(
        def,
        location.as_ref(),
        placing,
        super::limits()?,
        Some(handlers),
    )?)
}

/// Where each version's database is.
struct Databases {
    /// `--db`, used by every version.
    flag: Option<PathBuf>,
    /// `--derive-in-place`.
    in_place: bool,
    /// The session's scratch directory.
    scratch: PathBuf,
    /// The scratch database made last, and the schema and sample rows it was made from.
    made: Option<(String, Location)>,
}

impl Databases {
    fn for_def(&mut self, def: &'static ServerDef) -> Result<Option<Location>> {
        let Some(database) = &def.database else {
            return Ok(None);
        };
        if let Some(flag) = &self.flag {
            return super::locate(def.name, database, Some(flag)).map(Some);
        }
        let source = scratch_source(database);
        if let Some((made_from, at)) = &self.made
            && *made_from == source
        {
            return Ok(Some(at.clone()));
        }
        // A new directory for a changed schema: calls of the previous version may still be
        // reading the old database.
        let n = std::fs::read_dir(&self.scratch).map_or(0, Iterator::count);
        let dir = self.scratch.join(n.to_string());
        std::fs::create_dir(&dir).context("creating a scratch directory")?;
        let at = super::examples::scratch_database(def, &dir)?;
        if let Some(at) = &at {
            self.made = Some((source, at.clone()));
        }
        Ok(at)
    }

    fn shown(&self, engine: &Engine) -> String {
        match (&self.flag, engine.database()) {
            (_, None) => "no database".into(),
            (Some(flag), Some(_)) => {
                Location::parse(flag.as_os_str()).map_or_else(|e| e.to_string(), |l| l.display())
            }
            (None, Some(_)) => "a scratch database with the sample rows".into(),
        }
    }
}

fn scratch_source(database: &DatabaseDef) -> String {
    format!(
        "{}\n--\n{}\n--\n{}",
        database.schema,
        database.derived,
        database.sample.unwrap_or("")
    )
}

/// What the watching thread needs to make the next version.
struct Watch {
    spec: PathBuf,
    compile: Compile,
    handlers: Handlers,
    dbs: Databases,
    /// The file's modification time and size (and its skills' and apps' files'), and its text, as last
    /// served or refused.
    seen: Stamps,
    last: Option<String>,
    /// A changed stamp waiting one look to settle.
    settle: Settle<Stamps>,
}

impl Watch {
    /// Looks at the file every [`POLL`] and serves each valid change; ends with the process.
    fn run(
        mut self,
        live: &Arc<Live>,
        peer: &rmcp::service::Peer<rmcp::RoleServer>,
        runtime: &tokio::runtime::Handle,
    ) {
        loop {
            std::thread::sleep(POLL);
            // The skills of the version served now: a broken edit keeps the last good ones.
            let now = (
                stamp(&self.spec),
                beside_stamps(&self.spec, live.now().engine.def),
            );
            if now == self.seen {
                self.settle.unchanged();
                continue;
            }
            if !self.settle.settled(now.clone()) {
                continue;
            }
            let beside_changed = now.1 != self.seen.1;
            let read = self.compile.read(&self.spec);
            if stamp(&self.spec) != now.0 {
                // Written again while it was read: served when that write settles.
                continue;
            }
            self.seen = now;
            let text = match read {
                Ok(text) => text,
                Err(problem) => {
                    eprintln!("{problem}\nmcpspec dev: still serving the last good version");
                    crate::workbench::refused(&problem.to_string());
                    self.last = None;
                    continue;
                }
            };
            if self.last.as_ref() == Some(&text) && !beside_changed {
                continue;
            }
            if let Some(engine) = self.next(&text) {
                let tools = engine.def.tools.len();
                // The new version's skills may lie elsewhere: looked at from now on.
                self.seen.1 = beside_stamps(&self.spec, engine.def);
                live.replace(engine);
                // Said once the new version serves, so that a client that reads it is served it.
                eprintln!(
                    "mcpspec dev: reloaded {} ({tools} tools)",
                    self.spec.display()
                );
                crate::workbench::reloaded(tools);
                let peer = peer.clone();
                runtime.spawn(async move {
                    let _ = peer.notify_tool_list_changed().await;
                    let _ = peer.notify_resource_list_changed().await;
                    let _ = peer.notify_prompt_list_changed().await;
                });
            }
        }
    }

    /// The engine of the file as it is now, or `None` (the problems printed) when it does not
    /// compile or start.
    fn next(&mut self, text: &str) -> Option<Arc<Engine>> {
        self.last = Some(text.to_string());
        let shown = self.spec.display();
        let def = match (self.compile.compile)(&self.spec, text) {
            Ok(def) => def,
            Err(problems) => {
                eprintln!(
                    "{problems}\nmcpspec dev: {shown} has problems; still serving the last good version"
                );
                crate::workbench::refused(&problems.to_string());
                return None;
            }
        };
        match start(def, &mut self.dbs, &self.handlers) {
            Ok(engine) => Some(engine),
            Err(e) => {
                eprintln!(
                    "error: {e:#}\nmcpspec dev: {shown} does not start; still serving the last good version"
                );
                crate::workbench::refused(&format!("{e:#}"));
                None
            }
        }
    }
}

/// The spec file's stamp, and its skills' files' by path.
type Stamps = (Option<(SystemTime, u64)>, Vec<(PathBuf, SystemTime, u64)>);

/// The most skill files looked at on each round: past SEP-2640's 512 per skill, a directory
/// is refused by the compiler anyway.
const MAX_WATCHED: usize = 4096;

/// The modification time and size of every file under the directories `def`'s skills were
/// read from (beside `spec`), and of its apps' HTML files, by path: an edit, an addition or a
/// removal changes them.
fn beside_stamps(spec: &Path, def: &ServerDef) -> Vec<(PathBuf, SystemTime, u64)> {
    let base = spec.parent().unwrap_or(Path::new(""));
    let mut out = Vec::new();
    for skill in def.skills {
        walk(&base.join(skill.dir), &mut out);
    }
    for tool in def.tools {
        if let Some(crate::def::AppDef::Html { file, .. }) = tool.app {
            let path = base.join(file);
            if let Ok(m) = std::fs::metadata(&path) {
                let modified = m.modified().unwrap_or(SystemTime::UNIX_EPOCH);
                out.push((path, modified, m.len()));
            }
        }
    }
    out.sort();
    out
}

fn walk(dir: &Path, out: &mut Vec<(PathBuf, SystemTime, u64)>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        if out.len() >= MAX_WATCHED {
            return;
        }
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() {
            walk(&entry.path(), out);
        } else if let Ok(m) = entry.metadata() {
            let modified = m.modified().unwrap_or(SystemTime::UNIX_EPOCH);
            out.push((entry.path(), modified, m.len()));
        }
    }
}

/// What tells a changed file from an unchanged one without reading it.
fn stamp(path: &Path) -> Option<(SystemTime, u64)> {
    let m = std::fs::metadata(path).ok()?;
    Some((m.modified().ok()?, m.len()))
}

#[cfg(test)]
mod tests {
    use super::Settle;

    #[test]
    fn a_change_is_acted_on_once_the_next_look_finds_it_the_same() {
        let mut settle = Settle::default();
        // Truncated, then written before the next look: only the written file is acted on.
        assert!(!settle.settled(0));
        assert!(!settle.settled(120));
        assert!(settle.settled(120));
        // Acted on once: the same stamp again waits for a change.
        assert!(!settle.settled(120));
        settle.unchanged();
        // A change undone before the next look is never acted on.
        assert!(!settle.settled(7));
        settle.unchanged();
        assert!(!settle.settled(8));
        assert!(settle.settled(8));
    }
}
