//! The handlers of the `pm` server (spec/pm.yaml): databases, dumps, git worktrees and
//! workflows of the project in the server's working directory.
//!
//! The project's `.pm.json` says where database files, dumps and worktrees live, which
//! database names are allowed and which database is the default. Every name and path from a
//! call is checked before it touches the file system: a `/`, `\` or `..` is a path traversal
//! attempt, anything else outside the naming rules is an invalid name. Every file and
//! directory a call reaches (database files, dumps, `sql_path`, the configured directories and
//! `.pm.json` itself) must resolve inside the project with symbolic links followed
//! ([`mcpspec::confine`]), checked on every call, else `PATH_TRAVERSAL`; database files are then
//! opened by their real path without following links, and new files are created exclusively.
//! `db.import` runs its SQL under an authorizer that refuses anything reaching another file.
//! Git runs as a child process with an argument list, never through a shell. When `.pm.json`
//! names a database server (`"postgres"` or `"mysql"`), the databases are that server's,
//! managed through the `DatabaseServer` trait (`server`; `postgres`, `mysql`) with the same tools,
//! names, rules and errors.
//!
//! Two resources are read through handlers too: `pm://config`, the validated config, and
//! `pm://database/{name}`, one database's tables and row counts. A missing config or database
//! is resource-not-found (-32002), since the URI names nothing; a name that is invalid, a
//! traversal attempt or not allowed is refused with the same declared errors as the tools.

mod mysql;
mod postgres;
mod server;

use std::path::{Component, Path, PathBuf};
use std::process::Command;

use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags};
use serde::{Deserialize, Serialize};

use crate::generated::pm::{
    ConfigResourceHandler, DatabaseResourceHandler, DbCloneHandler, DbCreateHandler, DbDropHandler,
    DbDumpHandler, DbDumpsHandler, DbImportHandler, DbListHandler, ProjectInfoHandler,
    ProjectInitHandler, WorkflowCreateHandler, WorkflowRemoveHandler, WorktreeCreateHandler,
    WorktreeListHandler, WorktreeRemoveHandler, args, outputs,
};
use mcpspec::handler::{Context, HandlerError, ResourceBody, ResourceVars};
use mcpspec_sqlite::confine::Also;
use server::DatabaseServer;

/// The `pm` handlers; all state is in the project's files.
#[derive(Debug, Clone, Copy, Default)]
pub struct Pm;

/// The config file, relative to the project.
pub const CONFIG_FILE: &str = ".pm.json";

type Result<T> = std::result::Result<T, HandlerError>;

/// The project's `.pm.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Where database files (`NAME.db`) live, relative to the project.
    pub databases_dir: String,
    /// Where `db.dump` writes SQL files, relative to the project.
    pub dumps_dir: String,
    /// Where worktrees are added, relative to the project.
    pub worktrees_dir: String,
    /// The database cloned by workflows, which cannot be dropped.
    pub default_database: String,
    /// Names allowed, exactly or as `prefix*`; every valid name when empty.
    #[serde(default)]
    pub allowed_databases: Vec<String>,
    /// A PostgreSQL server whose databases these are (a URL, or `env:NAME`); SQLite files in
    /// `databases_dir` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub postgres: Option<String>,
    /// A MariaDB/MySQL server whose databases these are (a `mysql://` or `mariadb://` URL, or
    /// `env:NAME`); its account needs the rights to create, drop and grant on them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mysql: Option<String>,
    /// The role a PostgreSQL import runs as (`pm_import` when absent): no attributes, no
    /// memberships, and pm's role a member of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub import_role: Option<String>,
    /// Whether PostgreSQL imports run when pm connects as a superuser; refused when absent.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub superuser_imports: bool,
}

impl Config {
    fn suggested(root: &Path) -> Config {
        let dir = root
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut name: String = dir
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_lowercase()
                } else {
                    '_'
                }
            })
            .collect();
        name = name.trim_matches('_').to_string();
        if !name.starts_with(|c: char| c.is_ascii_alphabetic()) {
            name.insert_str(0, "db_");
        }
        name.truncate(40);
        Config {
            databases_dir: ".pm/databases".into(),
            dumps_dir: ".pm/dumps".into(),
            worktrees_dir: ".pm/worktrees".into(),
            allowed_databases: vec![name.clone(), format!("{name}_*")],
            default_database: name,
            postgres: None,
            mysql: None,
            import_role: None,
            superuser_imports: false,
        }
    }

    /// The structural rules a config must follow beyond its JSON shape (`postgres` is checked
    /// where [`Project::open`] reads it).
    fn problem(&self) -> Option<String> {
        for (key, dir) in [
            ("databases_dir", &self.databases_dir),
            ("dumps_dir", &self.dumps_dir),
            ("worktrees_dir", &self.worktrees_dir),
        ] {
            let p = Path::new(dir);
            if dir.is_empty()
                || p.components()
                    .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
            {
                return Some(format!(
                    "`{key}` must be a relative path inside the project"
                ));
            }
        }
        if !valid_db_name(&self.default_database) {
            return Some("`default_database` is not a valid database name".into());
        }
        for a in &self.allowed_databases {
            let base = a.strip_suffix('*').unwrap_or(a);
            if !(valid_db_name(base) || (a.ends_with('*') && base.is_empty())) {
                return Some(format!("`allowed_databases` has an invalid entry `{a}`"));
            }
        }
        if self.postgres.is_some() && self.mysql.is_some() {
            return Some("name one database server: `postgres` or `mysql`, not both".into());
        }
        None
    }

    fn allows(&self, name: &str) -> bool {
        self.allowed_databases.is_empty()
            || self
                .allowed_databases
                .iter()
                .any(|a| match a.strip_suffix('*') {
                    Some(prefix) => name.starts_with(prefix),
                    None => a == name,
                })
    }

    fn to_output_info(&self) -> outputs::ProjectInfoConfig {
        outputs::ProjectInfoConfig {
            databases_dir: self.databases_dir.clone(),
            dumps_dir: self.dumps_dir.clone(),
            worktrees_dir: self.worktrees_dir.clone(),
            default_database: self.default_database.clone(),
            allowed_databases: self.allowed_databases.clone(),
        }
    }
}

fn valid_db_name(s: &str) -> bool {
    s.len() <= 64
        && s.starts_with(|c: char| c.is_ascii_alphabetic())
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn traversal(field: &str, value: &str) -> HandlerError {
    HandlerError::new("PATH_TRAVERSAL")
        .with("field", field)
        .with("value", value)
}

fn invalid(field: &str, value: &str) -> HandlerError {
    HandlerError::new("INVALID_NAME")
        .with("field", field)
        .with("value", value)
}

/// A database name: traversal first, then the naming rule.
fn db_name(field: &str, value: &str) -> Result<()> {
    if value.contains('/') || value.contains('\\') || value.contains("..") {
        return Err(traversal(field, value));
    }
    if !valid_db_name(value) {
        return Err(invalid(field, value));
    }
    Ok(())
}

/// A branch name: no traversal, no option-looking or otherwise invalid git ref name.
fn branch_name(root: &Path, value: &str) -> Result<()> {
    if value.starts_with('/')
        || value.contains('\\')
        || value.split('/').any(|part| part == ".." || part == ".")
    {
        return Err(traversal("branch", value));
    }
    if value.starts_with('-') {
        return Err(invalid("branch", value));
    }
    let ok = Command::new("git")
        .args(["check-ref-format", "--branch", value])
        .current_dir(root)
        .output()
        .map_err(HandlerError::internal)?
        .status
        .success();
    if !ok {
        return Err(invalid("branch", value));
    }
    Ok(())
}

fn rel(p: &Path) -> String {
    p.to_string_lossy().replace('\\', "/")
}

/// The database server `.pm.json` names (`postgres` or `mysql`), if any.
fn database_server(
    config: &Config,
    ctx: &Context,
) -> std::result::Result<Option<Box<dyn DatabaseServer>>, String> {
    if let Some(url) = &config.postgres {
        let settings = postgres::Settings {
            url,
            import_role: config.import_role.as_deref(),
            superuser_imports: config.superuser_imports,
        };
        let server = postgres::Server::from_config(&settings, ctx.stop().clone())?;
        return Ok(Some(Box::new(server)));
    }
    if let Some(url) = &config.mysql {
        let server = mysql::Server::from_config(url, ctx.stop().clone())?;
        return Ok(Some(Box::new(server)));
    }
    Ok(None)
}

/// One git worktree: `(path, head, branch, main)`.
type Worktree = (PathBuf, String, Option<String>, bool);

/// The project: its root and config.
struct Project {
    root: PathBuf,
    config: Config,
    /// The database server the databases are on, when the config names one.
    server: Option<Box<dyn DatabaseServer>>,
}

impl Project {
    fn open(ctx: &Context) -> Result<Project> {
        let root = ctx.dir().to_path_buf();
        let path = resolve(&root, Path::new(CONFIG_FILE), "path", CONFIG_FILE)?;
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(HandlerError::new("CONFIG_MISSING").with("path", CONFIG_FILE));
            }
            Err(e) => {
                return Err(HandlerError::internal(format!(
                    "reading {}: {e}",
                    path.display()
                )));
            }
        };
        let config: Config = serde_json::from_str(&text).map_err(|e| {
            // serde_json's message names the key and position, never a path.
            HandlerError::new("CONFIG_INVALID")
                .with("path", CONFIG_FILE)
                .with("reason", e.to_string())
        })?;
        if let Some(reason) = config.problem() {
            return Err(HandlerError::new("CONFIG_INVALID")
                .with("path", CONFIG_FILE)
                .with("reason", reason));
        }
        let server = database_server(&config, ctx).map_err(|reason| {
            HandlerError::new("CONFIG_INVALID")
                .with("path", CONFIG_FILE)
                .with("reason", reason)
        })?;
        Ok(Project {
            root,
            config,
            server,
        })
    }

    /// Where database `name` is, for results: its file relative to the project, or its URL on
    /// the database server without the password.
    fn location(&self, name: &str) -> String {
        match &self.server {
            Some(server) => server.location(name),
            None => rel(&self.db_rel(name)),
        }
    }

    /// Refuses a name that is not allowed or a database that does not exist.
    fn must_exist(&self, field: &str, name: &str) -> Result<()> {
        match &self.server {
            Some(server) => {
                self.allowed(field, name)?;
                if !server.exists(name)? {
                    return Err(HandlerError::new("DB_NOT_FOUND").with("database", name));
                }
                Ok(())
            }
            None => self.existing(field, name).map(drop),
        }
    }

    fn db_rel(&self, name: &str) -> PathBuf {
        Path::new(&self.config.databases_dir).join(format!("{name}.db"))
    }

    /// A path relative to the project, resolved inside it (see [`resolve`]).
    fn file(&self, rel: &Path, field: &str, value: &str) -> Result<PathBuf> {
        resolve(&self.root, rel, field, value)
    }

    /// The real path of database `name`'s file, which must be inside the project.
    fn db_file(&self, field: &str, name: &str) -> Result<PathBuf> {
        self.file(&self.db_rel(name), field, name)
    }

    /// The real path of one of the configured directories.
    fn dir(&self, key: &str, dir: &str) -> Result<PathBuf> {
        self.file(Path::new(dir), key, dir)
    }

    /// Checks a database name from a call: naming, traversal, and the allowed list.
    fn allowed(&self, field: &str, name: &str) -> Result<()> {
        db_name(field, name)?;
        if !self.config.allows(name) {
            return Err(HandlerError::new("DB_NOT_ALLOWED").with("database", name));
        }
        Ok(())
    }

    fn existing(&self, field: &str, name: &str) -> Result<PathBuf> {
        self.allowed(field, name)?;
        let p = self.db_file(field, name)?;
        if !p.is_file() {
            return Err(HandlerError::new("DB_NOT_FOUND").with("database", name));
        }
        Ok(p)
    }

    /// The database files, by name, with their sizes; a file whose link leads outside the
    /// project is left out.
    fn databases(&self) -> Result<Vec<(String, u64)>> {
        if let Some(server) = &self.server {
            // The server's other databases are not the project's.
            return Ok(server
                .databases()?
                .into_iter()
                .filter(|(n, _)| valid_db_name(n) && self.config.allows(n))
                .collect());
        }
        let dir = self.dir("databases_dir", &self.config.databases_dir)?;
        let mut out = Vec::new();
        for (name, bytes) in self.listing(&dir, &self.config.databases_dir) {
            if let Some(stem) = name.strip_suffix(".db")
                && valid_db_name(stem)
            {
                out.push((stem.to_string(), bytes));
            }
        }
        Ok(out)
    }

    /// The dump files, by path relative to the project, with their sizes.
    fn dumps(&self) -> Result<Vec<(String, u64)>> {
        let dir = self.dir("dumps_dir", &self.config.dumps_dir)?;
        let rel_dir = Path::new(&self.config.dumps_dir);
        Ok(self
            .listing(&dir, &self.config.dumps_dir)
            .into_iter()
            .filter(|(name, _)| name.ends_with(".sql"))
            .map(|(name, bytes)| (rel(&rel_dir.join(name)), bytes))
            .collect())
    }

    /// The entries of a configured directory (real path `dir`, `rel_dir` in the config) that
    /// resolve inside the project, sorted by name, with their sizes.
    fn listing(&self, dir: &Path, rel_dir: &str) -> Vec<(String, u64)> {
        let mut out = Vec::new();
        let Ok(entries) = std::fs::read_dir(dir) else {
            return out;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let Ok(real) = self.file(&Path::new(rel_dir).join(&name), "path", &name) else {
                continue;
            };
            let bytes = std::fs::metadata(&real).map(|m| m.len()).unwrap_or(0);
            out.push((name, bytes));
        }
        out.sort();
        out
    }

    fn git(&self, command: &str, args: &[&str]) -> Result<String> {
        let out = Command::new("git")
            .args(args)
            .current_dir(&self.root)
            .output()
            .map_err(|e| HandlerError::internal(format!("running git: {e}")))?;
        if out.status.success() {
            return Ok(String::from_utf8_lossy(&out.stdout).into_owned());
        }
        let stderr = String::from_utf8_lossy(&out.stderr);
        tracing::warn!(command, stderr = %stderr.trim(), "git failed");
        // Git's first line says what went wrong; the project's absolute path is replaced so
        // that no path outside the project reaches the client.
        let root = self.root.to_string_lossy();
        let reason = stderr
            .lines()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("unknown error")
            .replace(root.as_ref(), ".")
            .trim()
            .to_string();
        Err(HandlerError::new("GIT_FAILED")
            .with("command", command)
            .with("reason", reason))
    }

    /// Every worktree, from `git worktree list --porcelain`.
    fn worktrees(&self) -> Result<Vec<Worktree>> {
        let text = self.git("worktree list", &["worktree", "list", "--porcelain"])?;
        let mut out = Vec::new();
        for block in text.split("\n\n").filter(|b| !b.trim().is_empty()) {
            let mut path = None;
            let mut head = String::new();
            let mut branch = None;
            for line in block.lines() {
                if let Some(p) = line.strip_prefix("worktree ") {
                    path = Some(PathBuf::from(p));
                } else if let Some(h) = line.strip_prefix("HEAD ") {
                    head = h.to_string();
                } else if let Some(b) = line.strip_prefix("branch ") {
                    branch = Some(b.strip_prefix("refs/heads/").unwrap_or(b).to_string());
                }
            }
            if let Some(p) = path {
                let main = out.is_empty();
                out.push((p, head, branch, main));
            }
        }
        Ok(out)
    }

    /// A path for the client: relative to the project when inside it, else only its name.
    fn shown(&self, p: &Path) -> String {
        let root = self
            .root
            .canonicalize()
            .unwrap_or_else(|_| self.root.clone());
        let p = p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
        match p.strip_prefix(&root) {
            Ok(r) if r.as_os_str().is_empty() => ".".into(),
            Ok(r) => rel(r),
            Err(_) => p
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
        }
    }

    fn worktree_rel(&self, branch: &str) -> PathBuf {
        Path::new(&self.config.worktrees_dir).join(branch.replace('/', "-"))
    }

    fn find_worktree(&self, branch: &str) -> Result<PathBuf> {
        self.worktrees()?
            .into_iter()
            .find(|(_, _, b, main)| !main && b.as_deref() == Some(branch))
            .map(|(p, _, _, _)| p)
            .ok_or_else(|| HandlerError::new("WORKTREE_NOT_FOUND").with("branch", branch))
    }

    fn create_worktree(&self, branch: &str, new_branch: bool) -> Result<String> {
        if self
            .worktrees()?
            .iter()
            .any(|(_, _, b, _)| b.as_deref() == Some(branch))
        {
            return Err(HandlerError::new("WORKTREE_EXISTS").with("branch", branch));
        }
        let rel_path = rel(&self.worktree_rel(branch));
        let real = self.file(Path::new(&rel_path), "branch", branch)?;
        if let Some(parent) = real.parent() {
            std::fs::create_dir_all(parent).map_err(HandlerError::internal)?;
        }
        if new_branch {
            self.git(
                "worktree add",
                &["worktree", "add", "-b", branch, "--", &rel_path],
            )?;
        } else {
            self.git(
                "worktree add",
                &["worktree", "add", "--", &rel_path, branch],
            )?;
        }
        Ok(rel_path)
    }

    fn remove_worktree(&self, branch: &str) -> Result<String> {
        let path = self.find_worktree(branch)?;
        let shown = self.shown(&path);
        let p = path.to_string_lossy().into_owned();
        self.git("worktree remove", &["worktree", "remove", "--", &p])?;
        Ok(shown)
    }

    fn create_db(&self, name: &str) -> Result<()> {
        self.allowed("database", name)?;
        if let Some(server) = &self.server {
            return server.create(name);
        }
        let path = self.db_file("database", name)?;
        if path.exists() {
            return Err(HandlerError::new("DB_EXISTS").with("database", name));
        }
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(HandlerError::internal)?;
        }
        let conn = open_db(&path, false).map_err(HandlerError::internal)?;
        // Writing the header makes an empty but valid SQLite file.
        conn.execute_batch("PRAGMA user_version = 0; VACUUM;")
            .map_err(HandlerError::internal)?;
        Ok(())
    }

    fn clone_db(&self, source: &str, target: &str) -> Result<()> {
        if let Some(server) = &self.server {
            self.must_exist("source", source)?;
            self.allowed("target", target)?;
            return server.clone_database(source, target);
        }
        let from = self.existing("source", source)?;
        self.allowed("target", target)?;
        let to = self.db_file("target", target)?;
        if to.exists() {
            return Err(HandlerError::new("DB_EXISTS").with("database", target));
        }
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent).map_err(HandlerError::internal)?;
        }
        let conn = open_db(&from, true).map_err(HandlerError::internal)?;
        conn.execute("VACUUM INTO ?1", [to.to_string_lossy().as_ref()])
            .map_err(HandlerError::internal)?;
        Ok(())
    }

    fn drop_db(&self, name: &str) -> Result<()> {
        self.allowed("database", name)?;
        if name == self.config.default_database {
            return Err(HandlerError::new("DB_IS_DEFAULT").with("database", name));
        }
        if let Some(server) = &self.server {
            self.must_exist("database", name)?;
            return server.drop_database(name);
        }
        self.existing("database", name)?;
        // The name is what goes: a link (checked to stay inside) is removed, not its target.
        let path = self.root.join(self.db_rel(name));
        std::fs::remove_file(&path).map_err(HandlerError::internal)?;
        for suffix in ["-wal", "-shm", "-journal"] {
            let mut side = path.clone().into_os_string();
            side.push(suffix);
            let _ = std::fs::remove_file(PathBuf::from(side));
        }
        Ok(())
    }
}

/// The database a workflow gives a branch: the default's name, `_`, the branch in lowercase
/// with every other character as `_`.
fn workflow_db(default: &str, branch: &str) -> String {
    let slug: String = branch
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect();
    let mut name = format!("{default}_{slug}");
    name.truncate(64);
    name
}

/// `rel` resolved inside the project `root` with links followed, else `PATH_TRAVERSAL`
/// naming the field and value the path came from.
fn resolve(root: &Path, rel: &Path, field: &str, value: &str) -> Result<PathBuf> {
    mcpspec::confine::inside(root, rel).map_err(|e| match e {
        mcpspec::confine::Escape::Io(e) => HandlerError::internal(e),
        other => {
            tracing::warn!(field, value, reason = %other, "refused a path outside the project");
            traversal(field, value)
        }
    })
}

/// Opens a database file by its real path; a link swapped in since it was resolved is
/// refused by SQLite rather than followed.
fn open_db(path: &Path, read_only: bool) -> rusqlite::Result<Connection> {
    let mode = if read_only {
        OpenFlags::SQLITE_OPEN_READ_ONLY
    } else {
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE
    };
    Connection::open_with_flags(
        path,
        mode | OpenFlags::SQLITE_OPEN_NOFOLLOW
            | OpenFlags::SQLITE_OPEN_URI
            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
}

/// Creates a new file, never following a link or replacing what is there.
fn create_new(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)?
        .write_all(text.as_bytes())
}

/// A SQL literal for one value, read back by SQLite as the same value and type.
fn literal(v: ValueRef<'_>) -> String {
    match v {
        ValueRef::Null => "NULL".into(),
        ValueRef::Integer(i) => i.to_string(),
        ValueRef::Real(f) if f.is_infinite() => if f > 0.0 { "1e999" } else { "-1e999" }.into(),
        // Debug formatting of f64 is the shortest text that parses back to the same value,
        // and always has a `.` or exponent, so SQLite reads it as REAL.
        ValueRef::Real(f) => format!("{f:?}"),
        // SQL text ends at a NUL, and a quoted literal must be UTF-8: other text is written
        // as its bytes and cast back, which keeps every byte.
        ValueRef::Text(t) => match std::str::from_utf8(t) {
            Ok(s) if !s.contains('\0') => format!("'{}'", s.replace('\'', "''")),
            _ => format!("CAST(X'{}' AS TEXT)", hex_upper(t)),
        },
        ValueRef::Blob(b) => format!("X'{}'", hex_upper(b)),
    }
}

fn hex_upper(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02X}")).collect()
}

fn quote_ident(s: &str) -> String {
    format!("\"{}\"", s.replace('"', "\"\""))
}

/// Dumps tables, rows, then indexes, triggers and views as SQL text that `db.import` runs in
/// one transaction. Returns the text and the tables dumped.
fn dump(
    conn: &Connection,
    only: Option<&[String]>,
    database: &str,
) -> Result<(String, Vec<String>)> {
    let mut stmt = conn
        .prepare(
            "SELECT type, name, tbl_name, sql FROM sqlite_schema \
             WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%' ORDER BY rowid",
        )
        .map_err(HandlerError::internal)?;
    let objects: Vec<(String, String, String, String)> = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .and_then(Iterator::collect)
        .map_err(HandlerError::internal)?;
    let tables: Vec<&(String, String, String, String)> =
        objects.iter().filter(|o| o.0 == "table").collect();
    if let Some(only) = only {
        for t in only {
            if !tables.iter().any(|o| &o.1 == t) {
                return Err(HandlerError::new("TABLE_NOT_FOUND")
                    .with("database", database)
                    .with("table", t));
            }
        }
    }
    let wanted = |table: &str| only.is_none_or(|o| o.iter().any(|t| t == table));
    let mut out = format!("-- pm dump of database '{database}'\n");
    let mut dumped = Vec::new();
    for (_, name, _, sql) in tables.iter().copied().filter(|o| wanted(&o.1)) {
        out.push_str(sql);
        out.push_str(";\n");
        let mut rows = conn
            .prepare(&format!("SELECT * FROM {}", quote_ident(name)))
            .map_err(HandlerError::internal)?;
        let n = rows.column_count();
        let mut q = rows.query([]).map_err(HandlerError::internal)?;
        while let Some(row) = q.next().map_err(HandlerError::internal)? {
            let values: Vec<String> = (0..n)
                .map(|i| literal(row.get_ref(i).unwrap_or(ValueRef::Null)))
                .collect();
            out.push_str(&format!(
                "INSERT INTO {} VALUES({});\n",
                quote_ident(name),
                values.join(",")
            ));
        }
        dumped.push(name.clone());
    }
    let has_sequence: bool = conn
        .query_row(
            "SELECT count(*) FROM sqlite_schema WHERE name = 'sqlite_sequence'",
            [],
            |r| r.get::<_, i64>(0),
        )
        .map(|n| n > 0)
        .unwrap_or(false);
    if has_sequence {
        let mut seq = conn
            .prepare("SELECT name, seq FROM sqlite_sequence")
            .map_err(HandlerError::internal)?;
        let rows: Vec<(String, i64)> = seq
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .and_then(Iterator::collect)
            .map_err(HandlerError::internal)?;
        for (name, n) in rows.into_iter().filter(|(t, _)| wanted(t)) {
            out.push_str(&format!(
                "DELETE FROM sqlite_sequence WHERE name = {0};\nINSERT INTO sqlite_sequence(name, seq) VALUES({0}, {n});\n",
                literal(ValueRef::Text(name.as_bytes()))
            ));
        }
    }
    for (_, _, table, sql) in objects.iter().filter(|o| o.0 != "table") {
        if wanted(table) {
            out.push_str(sql);
            out.push_str(";\n");
        }
    }
    Ok((out, dumped))
}

fn table_names(conn: &Connection) -> Vec<String> {
    conn.prepare("SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")
        .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect())
        .unwrap_or_default()
}

impl ProjectInfoHandler for Pm {
    fn project_info(&self, ctx: &Context, _: args::ProjectInfo) -> Result<outputs::ProjectInfo> {
        let p = Project::open(ctx)?;
        let git = p.root.join(".git").exists();
        let branch = if git {
            p.git("branch", &["branch", "--show-current"])
                .ok()
                .map(|b| b.trim().to_string())
                .filter(|b| !b.is_empty())
        } else {
            None
        };
        Ok(outputs::ProjectInfo {
            root: p
                .root
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            config_path: CONFIG_FILE.into(),
            config: p.config.to_output_info(),
            databases: p.databases()?.len() as i64,
            dumps: p.dumps()?.len() as i64,
            git,
            branch,
        })
    }
}

impl ProjectInitHandler for Pm {
    fn project_init(&self, ctx: &Context, _: args::ProjectInit) -> Result<outputs::ProjectInit> {
        let path = resolve(ctx.dir(), Path::new(CONFIG_FILE), "path", CONFIG_FILE)?;
        let (config, created) = if path.exists() {
            (Project::open(ctx)?.config, false)
        } else {
            let config = Config::suggested(ctx.dir());
            let text = serde_json::to_string_pretty(&config).map_err(HandlerError::internal)?;
            create_new(&path, &(text + "\n")).map_err(HandlerError::internal)?;
            (config, true)
        };
        // `ProjectInitConfig` is an alias of `ProjectInfoConfig`: the spec gives both the
        // same schema.
        Ok(outputs::ProjectInit {
            config_path: CONFIG_FILE.into(),
            created,
            config: config.to_output_info(),
        })
    }
}

impl DbListHandler for Pm {
    fn db_list(&self, ctx: &Context, _: args::DbList) -> Result<outputs::DbList> {
        let p = Project::open(ctx)?;
        let databases = p
            .databases()?
            .into_iter()
            .map(|(name, bytes)| outputs::DbListDatabasesItem {
                default: name == p.config.default_database,
                allowed: p.config.allows(&name),
                bytes: bytes as i64,
                name,
            })
            .collect();
        Ok(outputs::DbList {
            databases,
            default_database: p.config.default_database.clone(),
        })
    }
}

impl DbDumpHandler for Pm {
    fn db_dump(&self, ctx: &Context, args: args::DbDump) -> Result<outputs::DbDump> {
        let p = Project::open(ctx)?;
        let (text, tables) = match &p.server {
            Some(server) => {
                p.must_exist("database", &args.database)?;
                server_dump(server.as_ref(), &args.database, args.tables.as_deref())?
            }
            None => {
                let path = p.existing("database", &args.database)?;
                let conn = open_db(&path, true).map_err(HandlerError::internal)?;
                dump(&conn, args.tables.as_deref(), &args.database)?
            }
        };
        let file = p.write_dump(&args.database, &text)?;
        Ok(outputs::DbDump {
            database: args.database,
            path: rel(&file),
            tables,
            bytes: text.len() as i64,
        })
    }
}

/// A database server's database as SQL, and the tables in it; an unknown table is
/// `TABLE_NOT_FOUND`.
fn server_dump(
    server: &dyn DatabaseServer,
    name: &str,
    only: Option<&[String]>,
) -> Result<(String, Vec<String>)> {
    let all: Vec<String> = server.tables(name)?.into_iter().map(|(t, _)| t).collect();
    let tables = match only {
        Some(wanted) => {
            if let Some(t) = wanted.iter().find(|t| !all.contains(t)) {
                return Err(HandlerError::new("TABLE_NOT_FOUND")
                    .with("database", name)
                    .with("table", t.as_str()));
            }
            wanted.to_vec()
        }
        None => all,
    };
    Ok((server.dump(name, only)?, tables))
}

impl Project {
    /// Writes a dump of `database` to a new file in the dumps directory; its path relative to
    /// the project. Whatever already has the name, a link included, is skipped.
    fn write_dump(&self, database: &str, text: &str) -> Result<PathBuf> {
        let dir = Path::new(&self.config.dumps_dir);
        let real_dir = self.dir("dumps_dir", &self.config.dumps_dir)?;
        std::fs::create_dir_all(&real_dir).map_err(HandlerError::internal)?;
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let mut n = 0;
        loop {
            let name = if n == 0 {
                format!("{database}-{stamp}.sql")
            } else {
                format!("{database}-{stamp}-{n}.sql")
            };
            match create_new(&real_dir.join(&name), text) {
                Ok(()) => return Ok(dir.join(name)),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && n < 1000 => n += 1,
                Err(e) => return Err(HandlerError::internal(e)),
            }
        }
    }
}

impl DbImportHandler for Pm {
    fn db_import(&self, ctx: &Context, args: args::DbImport) -> Result<outputs::DbImport> {
        let p = Project::open(ctx)?;
        p.allowed("database", &args.database)?;
        // A symbolic link inside the project may still point outside it.
        let real = p.file(Path::new(&args.sql_path), "sql_path", &args.sql_path)?;
        if !real.is_file() {
            return Err(HandlerError::new("FILE_NOT_FOUND").with("path", &args.sql_path));
        }
        let sql = std::fs::read_to_string(&real).map_err(|e| {
            HandlerError::new("SQL_FAILED")
                .with("path", &args.sql_path)
                .with("reason", e.to_string().to_lowercase())
        })?;
        if let Some(server) = &p.server {
            let (created, tables) =
                server
                    .import(&args.database, &sql)
                    .map_err(|failure| match failure {
                        server::ImportFailure::Sql(reason) => HandlerError::new("SQL_FAILED")
                            .with("path", &args.sql_path)
                            .with("reason", reason.to_lowercase()),
                        // Answered as the deadline answers every call (or as cancelled).
                        server::ImportFailure::Stopped => HandlerError::new("TIMEOUT"),
                    })?;
            return Ok(outputs::DbImport {
                path: p.location(&args.database),
                database: args.database,
                created,
                tables,
            });
        }
        let db = p.db_file("database", &args.database)?;
        let created = !db.exists();
        if created && let Some(parent) = db.parent() {
            std::fs::create_dir_all(parent).map_err(HandlerError::internal)?;
        }
        match import(&db, &sql, ctx.stop()) {
            Ok(tables) => Ok(outputs::DbImport {
                database: args.database.clone(),
                path: rel(&p.db_rel(&args.database)),
                created,
                tables,
            }),
            Err((e, refused)) => {
                // A failed import leaves no new file behind.
                if created {
                    let _ = std::fs::remove_file(&db);
                }
                let reason = match refused {
                    Some(kind) => {
                        format!("refused {kind}: an import may only change its own database")
                    }
                    None => mcpspec_sqlite::confine::message(&e),
                };
                Err(HandlerError::new("SQL_FAILED")
                    .with("path", &args.sql_path)
                    .with("reason", reason))
            }
        }
    }
}

/// Runs imported SQL on the database file at `db` in one transaction, confined (see
/// [`mcpspec_sqlite::confine`]: every statement that could reach a file other than its own
/// database, or step out of the transaction, is refused); the tables after it, or the error and
/// the statement kind that was refused, if one was.
fn import(
    db: &Path,
    sql: &str,
    stop: &mcpspec::backend::Stop,
) -> std::result::Result<Vec<String>, (rusqlite::Error, Option<&'static str>)> {
    let mut conn = open_db(db, false).map_err(|e| (e, None))?;
    conn.execute_batch("BEGIN IMMEDIATE")
        .map_err(|e| (e, None))?;
    let refused =
        mcpspec_sqlite::confine::confine(&mut conn, Also::Transactions).map_err(|e| (e, None))?;
    // The file's statements stop at the call's deadline or when the client cancels.
    let watch = stop.clone();
    let ran = mcpspec_sqlite::bounded(&mut conn, move || watch.now(), |c| c.execute_batch(sql));
    let first = *refused
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    conn.authorizer(None::<fn(rusqlite::hooks::AuthContext<'_>) -> rusqlite::hooks::Authorization>)
        .map_err(|e| (e, first))?;
    match ran {
        Ok(()) => {
            conn.execute_batch("COMMIT").map_err(|e| (e, None))?;
            Ok(table_names(&conn))
        }
        Err(e) => {
            // Nothing of a failed import stays: the whole transaction is undone.
            let _ = conn.execute_batch("ROLLBACK");
            Err((e, first))
        }
    }
}

impl DbCreateHandler for Pm {
    fn db_create(&self, ctx: &Context, args: args::DbCreate) -> Result<outputs::DbCreate> {
        let p = Project::open(ctx)?;
        p.create_db(&args.database)?;
        Ok(outputs::DbCreate {
            path: p.location(&args.database),
            database: args.database,
        })
    }
}

impl DbDropHandler for Pm {
    fn db_drop(&self, ctx: &Context, args: args::DbDrop) -> Result<outputs::DbDrop> {
        let p = Project::open(ctx)?;
        p.drop_db(&args.database)?;
        Ok(outputs::DbDrop {
            path: p.location(&args.database),
            database: args.database,
        })
    }
}

impl DbCloneHandler for Pm {
    fn db_clone(&self, ctx: &Context, args: args::DbClone) -> Result<outputs::DbClone> {
        let p = Project::open(ctx)?;
        let source = args
            .source
            .unwrap_or_else(|| p.config.default_database.clone());
        p.clone_db(&source, &args.target)?;
        Ok(outputs::DbClone {
            path: p.location(&args.target),
            source,
            target: args.target,
        })
    }
}

impl DbDumpsHandler for Pm {
    fn db_dumps(&self, ctx: &Context, _: args::DbDumps) -> Result<outputs::DbDumps> {
        let p = Project::open(ctx)?;
        Ok(outputs::DbDumps {
            dumps: p
                .dumps()?
                .into_iter()
                .map(|(path, bytes)| outputs::DbDumpsDumpsItem {
                    path,
                    bytes: bytes as i64,
                })
                .collect(),
        })
    }
}

impl WorktreeListHandler for Pm {
    fn worktree_list(&self, ctx: &Context, _: args::WorktreeList) -> Result<outputs::WorktreeList> {
        let p = Project::open(ctx)?;
        let worktrees = p
            .worktrees()?
            .into_iter()
            .map(
                |(path, head, branch, main)| outputs::WorktreeListWorktreesItem {
                    path: p.shown(&path),
                    branch,
                    head,
                    main,
                },
            )
            .collect();
        Ok(outputs::WorktreeList { worktrees })
    }
}

impl WorktreeCreateHandler for Pm {
    fn worktree_create(
        &self,
        ctx: &Context,
        args: args::WorktreeCreate,
    ) -> Result<outputs::WorktreeCreate> {
        let p = Project::open(ctx)?;
        branch_name(&p.root, &args.branch)?;
        let path = p.create_worktree(&args.branch, args.new_branch)?;
        Ok(outputs::WorktreeCreate {
            branch: args.branch,
            path,
        })
    }
}

impl WorktreeRemoveHandler for Pm {
    fn worktree_remove(
        &self,
        ctx: &Context,
        args: args::WorktreeRemove,
    ) -> Result<outputs::WorktreeRemove> {
        let p = Project::open(ctx)?;
        branch_name(&p.root, &args.branch)?;
        let path = p.remove_worktree(&args.branch)?;
        Ok(outputs::WorktreeRemove {
            branch: args.branch,
            path,
        })
    }
}

impl WorkflowCreateHandler for Pm {
    fn workflow_create(
        &self,
        ctx: &Context,
        args: args::WorkflowCreate,
    ) -> Result<outputs::WorkflowCreate> {
        let p = Project::open(ctx)?;
        branch_name(&p.root, &args.branch)?;
        let database = workflow_db(&p.config.default_database, &args.branch);
        p.allowed("database", &database)?;
        // The arguments are good: a client that takes tasks gets one from here on.
        ctx.background();
        // Step one: the worktree. Step two: the database copy; when it fails, step one is
        // undone (and the branch deleted if this call created it), so nothing is left behind.
        let worktree = p.create_worktree(&args.branch, args.new_branch)?;
        ctx.progress(1.0, Some(2.0), "worktree created");
        // A cancellation between the steps is a failure of step two: step one is undone.
        let cloned = if ctx.is_cancelled() {
            Err(HandlerError::new("CANCELLED")
                .message("the workflow was cancelled; its worktree was removed"))
        } else {
            p.clone_db(&p.config.default_database, &database)
        };
        if let Err(e) = cloned {
            let path = rel(&p.worktree_rel(&args.branch));
            if let Err(undo) = p.git(
                "worktree remove",
                &["worktree", "remove", "--force", "--", &path],
            ) {
                tracing::error!(error = %undo, "undoing the worktree of a failed workflow failed");
            }
            if args.new_branch
                && let Err(undo) = p.git("branch", &["branch", "-D", "--", &args.branch])
            {
                tracing::error!(error = %undo, "deleting the branch of a failed workflow failed");
            }
            return Err(e);
        }
        ctx.progress(2.0, Some(2.0), "database cloned");
        Ok(outputs::WorkflowCreate {
            branch: args.branch,
            worktree,
            database,
            dropped: None,
        })
    }
}

impl WorkflowRemoveHandler for Pm {
    fn workflow_remove(
        &self,
        ctx: &Context,
        args: args::WorkflowRemove,
    ) -> Result<outputs::WorkflowRemove> {
        let p = Project::open(ctx)?;
        branch_name(&p.root, &args.branch)?;
        let database = workflow_db(&p.config.default_database, &args.branch);
        if args.drop_db {
            // Check the database before removing anything, so a refusal changes nothing.
            p.must_exist("database", &database)?;
            if database == p.config.default_database {
                return Err(HandlerError::new("DB_IS_DEFAULT").with("database", &database));
            }
        }
        let worktree = p.remove_worktree(&args.branch)?;
        if args.drop_db {
            p.drop_db(&database)?;
        }
        Ok(outputs::WorkflowRemove {
            branch: args.branch,
            worktree,
            database,
            dropped: Some(args.drop_db),
        })
    }
}

/// One table of a database and its row count, in `pm://database/{name}`.
#[derive(Debug, Serialize)]
struct TableRows {
    name: String,
    rows: i64,
}

/// The content of `pm://database/{name}`: what `db.list` says of the database (which is
/// allowed, or it would be refused), and its tables.
#[derive(Debug, Serialize)]
struct DatabaseInfo {
    name: String,
    /// The file, relative to the project.
    path: String,
    bytes: i64,
    default: bool,
    tables: Vec<TableRows>,
}

impl ConfigResourceHandler for Pm {
    fn config_resource(&self, ctx: &Context, _: &str, _: &ResourceVars) -> Result<ResourceBody> {
        let p = Project::open(ctx).map_err(|e| match e.name() {
            "CONFIG_MISSING" => HandlerError::resource_not_found(format!(
                "config file '{CONFIG_FILE}' not found; run project.init to create one"
            )),
            _ => e,
        })?;
        // The server's URL is shown without its password.
        let mut shown = p.config.clone();
        shown.postgres = shown
            .postgres
            .map(|u| mcpspec::__internal::backend::redact(&u));
        shown.mysql = shown
            .mysql
            .map(|u| mcpspec::__internal::backend::redact(&u));
        ResourceBody::json(&shown)
    }
}

impl DatabaseResourceHandler for Pm {
    fn database_resource(
        &self,
        ctx: &Context,
        _: &str,
        vars: &ResourceVars,
    ) -> Result<ResourceBody> {
        let name = vars.get("name").unwrap_or_default();
        let p = Project::open(ctx)?;
        let missing = |e: HandlerError| {
            if e.name() == "DB_NOT_FOUND" {
                HandlerError::resource_not_found(format!("database '{name}' does not exist"))
            } else {
                e
            }
        };
        if let Some(server) = &p.server {
            p.must_exist("database", name).map_err(missing)?;
            let bytes = server
                .databases()?
                .into_iter()
                .find(|(n, _)| n == name)
                .map_or(0, |(_, b)| b);
            let tables = server
                .tables(name)?
                .into_iter()
                .map(|(name, rows)| TableRows { name, rows })
                .collect();
            return ResourceBody::json(&DatabaseInfo {
                name: name.to_string(),
                path: p.location(name),
                bytes: bytes as i64,
                default: name == p.config.default_database,
                tables,
            });
        }
        let path = p.existing("database", name).map_err(|e| {
            if e.name() == "DB_NOT_FOUND" {
                HandlerError::resource_not_found(format!("database '{name}' does not exist"))
            } else {
                e
            }
        })?;
        let conn = open_db(&path, true).map_err(HandlerError::internal)?;
        let mut tables = Vec::new();
        for t in table_names(&conn) {
            let sql = format!("SELECT count(*) FROM \"{}\"", t.replace('"', "\"\""));
            let rows = conn
                .query_row(&sql, [], |r| r.get(0))
                .map_err(HandlerError::internal)?;
            tables.push(TableRows { name: t, rows });
        }
        let bytes = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        ResourceBody::json(&DatabaseInfo {
            name: name.to_string(),
            path: rel(&p.db_rel(name)),
            bytes: bytes as i64,
            default: name == p.config.default_database,
            tables,
        })
    }
}
