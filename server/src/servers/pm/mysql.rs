//! `pm`'s databases on a MariaDB/MySQL server, when `.pm.json` names one (`"mysql":
//! "mysql://..."` or `"mariadb://..."`, or `"env:NAME"` for a URL kept in the environment):
//! the same tools, names, rules and errors as for SQLite files and PostgreSQL.
//!
//! - `db.dump` runs the machine's `mariadb-dump` (or `mysqldump`) with the password in its
//!   environment, never its arguments, and leaves `DEFINER` clauses out, so that the dump
//!   imports as any account.
//! - `db.import` runs a file through the driver, never through a client, and the server does
//!   the confining: the file runs as an account pm creates for the call, with every right on
//!   the target database and none elsewhere (no `FILE`, no `SUPER`, no grant option), dropped
//!   when the call ends. Its statements cannot read or write files, change another database,
//!   the server's settings or its accounts. A text guard refuses the plainly hostile first
//!   (`LOAD DATA`, `INTO OUTFILE`, `LOAD_FILE`, `SET GLOBAL`, `GRANT`, account and server
//!   statements, plugins, client commands), looking inside `/*! ... */` comments, which
//!   the server runs. `DELIMITER` lines (which dumps use around triggers) are honoured.
//! - MariaDB and MySQL commit a statement that changes a table's structure as it runs, so an
//!   import is one transaction only for its data: a failed import into a database the call
//!   created drops that database; into an existing one, the error says what may stay.
//! - `db.clone` is a dump of the source imported, the same confined way, into a new database.

use std::path::PathBuf;
use std::process::Command;

use mcpspec::backend::Stop;
use mcpspec::handler::HandlerError;
use mysql::prelude::Queryable;
use mysql::{Conn, Opts, OptsBuilder};

use super::server::{DatabaseServer, ImportFailure};

type Result<T> = std::result::Result<T, HandlerError>;

/// How much of the call's time is kept back from its statements, for undoing a failed import
/// (dropping the database it created, and its account) before the call's deadline.
const CLEANUP_MARGIN: std::time::Duration = std::time::Duration::from_millis(500);

/// MariaDB's error for a statement stopped by `max_statement_time`.
const STATEMENT_TIMEOUT: u16 = 1969;

/// Databases of the server itself, never a project's.
const SYSTEM: [&str; 4] = ["mysql", "information_schema", "performance_schema", "sys"];

/// A MariaDB/MySQL server whose databases a project manages.
pub(super) struct Server {
    url: String,
    opts: Opts,
    /// When the call must stop: every statement's time limit, and an import's.
    stop: Stop,
}

impl Server {
    /// The server `.pm.json` names (`mysql`: a URL, or `env:NAME`), for a call that must stop
    /// at `stop`.
    pub(super) fn from_config(value: &str, stop: Stop) -> std::result::Result<Server, String> {
        let url = match value.strip_prefix("env:") {
            Some(var) => std::env::var(var)
                .map_err(|_| format!("`mysql` names the variable {var}, which is not set"))?,
            None => value.to_string(),
        };
        if !mcpspec::__internal::backend::mysql::is_url(&url) {
            return Err("`mysql` must be a mysql:// or mariadb:// URL, or env:NAME".into());
        }
        let opts = mcpspec::__internal::backend::mysql::opts(&url).map_err(|e| e.to_string())?;
        Ok(Server { url, opts, stop })
    }

    /// A connection to database `name`, or to none, as `user` when given; each statement is
    /// limited to what is left of the call's time, less [`CLEANUP_MARGIN`].
    fn connect_as(&self, name: Option<&str>, user: Option<(&str, &str)>) -> Result<Conn> {
        let mut b = OptsBuilder::from_opts(self.opts.clone()).db_name(name);
        if let Some((user, pass)) = user {
            b = b.user(Some(user)).pass(Some(pass));
        }
        let mut c = Conn::new(b).map_err(|e| internal(&e))?;
        let left = self
            .stop
            .deadline()
            .saturating_duration_since(std::time::Instant::now())
            .saturating_sub(CLEANUP_MARGIN);
        // MariaDB's name; MySQL has none for every statement, and says so: left alone.
        let _ = c.query_drop(format!(
            "SET SESSION max_statement_time = {}",
            left.as_secs_f64().max(0.1)
        ));
        Ok(c)
    }

    fn connect(&self, name: Option<&str>) -> Result<Conn> {
        self.connect_as(name, None)
    }

    /// Runs one statement without a database; an existing target is `DB_EXISTS`.
    fn admin(&self, sql: &str, target: &str) -> Result<()> {
        self.connect(None)?
            .query_drop(sql)
            .map_err(|e| match code(&e) {
                Some(1007) => HandlerError::new("DB_EXISTS").with("database", target),
                Some(1008) => HandlerError::new("DB_NOT_FOUND").with("database", target),
                _ => internal(&e),
            })
    }

    /// The dump tool's connection arguments and environment: the password in `MYSQL_PWD`.
    fn connection_args(&self, cmd: &mut Command) {
        cmd.arg("--no-defaults");
        match self.opts.get_socket() {
            Some(socket) => {
                cmd.arg(format!("--socket={socket}"));
            }
            None => {
                cmd.arg(format!("--host={}", self.opts.get_ip_or_hostname()))
                    .arg(format!("--port={}", self.opts.get_tcp_port()))
                    .arg("--protocol=TCP");
            }
        }
        if let Some(user) = self.opts.get_user() {
            cmd.arg(format!("--user={user}"));
        }
        match self.opts.get_pass() {
            Some(p) => cmd.env("MYSQL_PWD", p),
            None => cmd.env_remove("MYSQL_PWD"),
        };
        if let Some(ssl) = self.opts.get_ssl_opts() {
            cmd.arg("--ssl");
            if !ssl.accept_invalid_certs() {
                cmd.arg("--ssl-verify-server-cert");
            }
        }
    }

    /// Creates `name` when `create`, then runs `sql` there confined (see the module comment);
    /// a database this call created is dropped when it fails.
    fn import_into(
        &self,
        name: &str,
        sql: &str,
        create: bool,
    ) -> std::result::Result<(), ImportFailure> {
        if create {
            self.create(name).map_err(|e| e.to_string())?;
        }
        let ran = self.confined(name, sql);
        if ran.is_err() && create {
            let _ = self.drop(name);
        }
        ran
    }

    /// Runs `sql` in database `name` as an account made for this call, with rights on that
    /// database only, and drops the account after. A statement stopped by the time limit set
    /// from the call's deadline (MariaDB's `max_statement_time`, error 1969) is the deadline.
    fn confined(&self, name: &str, sql: &str) -> std::result::Result<(), ImportFailure> {
        let statements = split(sql)?;
        let account = Account::create(self, name)?;
        let mut c = self
            .connect_as(Some(name), Some((&account.user, &account.password)))
            .map_err(|e| e.to_string())?;
        c.query_drop("START TRANSACTION").map_err(|e| words(&e))?;
        for s in &statements {
            if self.stop.now() {
                let _ = c.query_drop("ROLLBACK");
                return Err(ImportFailure::Stopped);
            }
            if let Err(e) = c.query_drop(s) {
                let _ = c.query_drop("ROLLBACK");
                return Err(match code(&e) {
                    Some(STATEMENT_TIMEOUT) => ImportFailure::Stopped,
                    _ => ImportFailure::Sql(words(&e)),
                });
            }
        }
        Ok(c.query_drop("COMMIT").map_err(|e| words(&e))?)
    }
}

impl DatabaseServer for Server {
    fn location(&self, name: &str) -> String {
        super::server::database_url(&self.url, name)
    }

    fn databases(&self) -> Result<Vec<(String, u64)>> {
        let rows: Vec<(String, u64)> = self
            .connect(None)?
            .query(
                "SELECT s.schema_name,
                        CAST(COALESCE(SUM(t.data_length + t.index_length), 0) AS UNSIGNED)
                 FROM information_schema.schemata s
                 LEFT JOIN information_schema.tables t ON t.table_schema = s.schema_name
                 GROUP BY s.schema_name ORDER BY s.schema_name",
            )
            .map_err(|e| internal(&e))?;
        Ok(rows
            .into_iter()
            .filter(|(n, _)| !SYSTEM.contains(&n.as_str()))
            .collect())
    }

    fn exists(&self, name: &str) -> Result<bool> {
        let n: Option<u64> = self
            .connect(None)?
            .exec_first(
                "SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name = ?",
                (name,),
            )
            .map_err(|e| internal(&e))?;
        Ok(n.unwrap_or(0) > 0)
    }

    fn create(&self, name: &str) -> Result<()> {
        self.admin(&format!("CREATE DATABASE {}", quote(name)), name)
    }

    fn clone_database(&self, source: &str, target: &str) -> Result<()> {
        if self.exists(target)? {
            return Err(HandlerError::new("DB_EXISTS").with("database", target));
        }
        let text = self.dump(source, None)?;
        self.import_into(target, &text, true)
            .map_err(|failure| match failure {
                ImportFailure::Sql(reason) => {
                    HandlerError::internal(format!("cloning {source}: {reason}"))
                }
                ImportFailure::Stopped => HandlerError::new("TIMEOUT"),
            })
    }

    fn drop_database(&self, name: &str) -> Result<()> {
        self.drop(name)
    }

    fn tables(&self, name: &str) -> Result<Vec<(String, i64)>> {
        let mut c = self.connect(Some(name))?;
        let names: Vec<String> = c
            .query(
                "SELECT table_name FROM information_schema.tables
                 WHERE table_schema = DATABASE() AND table_type = 'BASE TABLE'
                 ORDER BY table_name",
            )
            .map_err(|e| internal(&e))?;
        let mut out = Vec::new();
        for t in names {
            let n: Option<i64> = c
                .query_first(format!("SELECT COUNT(*) FROM {}", quote(&t)))
                .map_err(|e| internal(&e))?;
            out.push((t, n.unwrap_or(0)));
        }
        Ok(out)
    }

    fn dump(&self, name: &str, tables: Option<&[String]>) -> Result<String> {
        let mut cmd = Command::new(dump_tool()?);
        self.connection_args(&mut cmd);
        cmd.args([
            "--single-transaction",
            "--skip-lock-tables",
            "--no-tablespaces",
            "--skip-comments",
            "--skip-dump-date",
            "--skip-add-locks",
            "--skip-disable-keys",
            "--hex-blob",
            "--",
            name,
        ]);
        cmd.args(tables.unwrap_or_default());
        let out = cmd.output().map_err(HandlerError::internal)?;
        if !out.status.success() {
            let reason = String::from_utf8_lossy(&out.stderr).trim().to_string();
            return Err(HandlerError::internal(format!(
                "the dump tool failed: {}",
                mcpspec::__internal::backend::redact(&reason)
            )));
        }
        let text = String::from_utf8(out.stdout).map_err(HandlerError::internal)?;
        Ok(without_definers(&text))
    }

    fn import(
        &self,
        name: &str,
        sql: &str,
    ) -> std::result::Result<(bool, Vec<String>), ImportFailure> {
        if let Some(kind) = refused(sql) {
            return Err(ImportFailure::Sql(format!(
                "refused {kind}: an import may only change its own database"
            )));
        }
        let created = !self.exists(name).map_err(|e| e.to_string())?;
        self.import_into(name, sql, created).map_err(|failure| match failure {
            ImportFailure::Sql(reason) if !created => ImportFailure::Sql(format!(
                "{reason} (the file's data changes were rolled back; statements that change a table's structure commit as they run in MariaDB and MySQL, so those that ran before the failure stay)"
            )),
            other => other,
        })?;
        let tables = self.tables(name).map_err(|e| e.to_string())?;
        Ok((created, tables.into_iter().map(|(t, _)| t).collect()))
    }
}

impl Server {
    fn drop(&self, name: &str) -> Result<()> {
        self.admin(&format!("DROP DATABASE {}", quote(name)), name)
    }
}

/// The account an import runs as: made for one call, with every right on one database, and
/// dropped when the call ends.
struct Account<'s> {
    server: &'s Server,
    user: String,
    /// The host the account is for: the one pm's own connection comes from.
    host: String,
    password: String,
}

impl<'s> Account<'s> {
    /// Makes the account, for the host the server sees pm's own connection come from (so that
    /// the anonymous accounts a default install leaves for `localhost` cannot shadow it), with
    /// every right on `database` and that database only: its name is granted as a literal, the
    /// `_` and `%` a database-level grant reads as wildcards escaped.
    fn create(server: &'s Server, database: &str) -> std::result::Result<Account<'s>, String> {
        let granted = grant_pattern(database)?;
        let mut c = server.connect(None).map_err(|e| e.to_string())?;
        let host = own_host(&mut c)?;
        let account = Account {
            server,
            user: format!("pm_import_{}", random_hex::<6>()),
            host,
            password: random_hex::<24>(),
        };
        let made = c
            .query_drop(format!(
                "CREATE USER {} IDENTIFIED BY '{}'",
                account.name(),
                account.password
            ))
            .and_then(|()| {
                c.query_drop(format!(
                    "GRANT ALL PRIVILEGES ON {granted}.* TO {}",
                    account.name()
                ))
            });
        if let Err(e) = made {
            drop(account);
            return Err(format!(
                "pm's account cannot make the account an import runs as ({}); give it the right to, once, as an administrator: GRANT CREATE USER ON *.* TO <pm's account>; GRANT ALL ON `<prefix>%`.* TO <pm's account> WITH GRANT OPTION",
                words(&e)
            ));
        }
        Ok(account)
    }

    /// The account as a statement names it: `'user'@'host'`.
    fn name(&self) -> String {
        format!("'{}'@{}", self.user, string_literal(&self.host))
    }
}

impl Drop for Account<'_> {
    fn drop(&mut self) {
        let dropped = self
            .server
            .connect(None)
            .map(|mut c| c.query_drop(format!("DROP USER IF EXISTS {}", self.name())));
        if !matches!(dropped, Ok(Ok(()))) {
            tracing::warn!(user = %self.user, "dropping an import's account failed");
        }
    }
}

/// The host part of the account pm's connection `c` logged in from, as the server sees it
/// (`localhost` over a socket, an address over TCP): `USER()` is `user@host`.
fn own_host(c: &mut Conn) -> std::result::Result<String, String> {
    let user: Option<String> = c.query_first("SELECT USER()").map_err(|e| words(&e))?;
    user.as_deref()
        .and_then(|u| u.rsplit_once('@'))
        .map(|(_, host)| host.to_string())
        .filter(|h| !h.is_empty() && h.len() <= 255)
        .ok_or_else(|| "the server did not say which host pm connects from".to_string())
}

/// `database` as a database-level grant names exactly it and nothing else: backquoted, with
/// the wildcards `_` and `%` escaped. A name with a character a grant cannot say literally
/// (a backslash, a backquote, a quote) is refused rather than granted as a pattern.
fn grant_pattern(database: &str) -> std::result::Result<String, String> {
    if database.is_empty()
        || !database
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '%' | '$' | '-'))
    {
        return Err(format!(
            "the database name {database:?} cannot be granted exactly; use letters, digits and `_`"
        ));
    }
    let escaped = database.replace('_', "\\_").replace('%', "\\%");
    Ok(format!("`{escaped}`"))
}

/// `s` as a single-quoted string literal.
fn string_literal(s: &str) -> String {
    format!("'{}'", s.replace('\\', "\\\\").replace('\'', "''"))
}

/// `N` random bytes from the operating system, as lowercase hex.
fn random_hex<const N: usize>() -> String {
    let mut b = [0u8; N];
    getrandom::fill(&mut b).expect("the operating system's random source is available");
    b.iter().map(|b| format!("{b:02x}")).collect()
}

/// A database or table name as an identifier.
fn quote(name: &str) -> String {
    format!("`{}`", name.replace('`', "``"))
}

fn code(e: &mysql::Error) -> Option<u16> {
    match e {
        mysql::Error::MySqlError(m) => Some(m.code),
        _ => None,
    }
}

/// The server's words for an error, without a password or a location.
fn words(e: &mysql::Error) -> String {
    mcpspec::__internal::backend::mysql::describe(e)
}

fn internal(e: &mysql::Error) -> HandlerError {
    HandlerError::internal(words(e))
}

/// The machine's dump tool: `mariadb-dump`, else `mysqldump`.
fn dump_tool() -> Result<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    ["mariadb-dump", "mysqldump"]
        .iter()
        .find_map(|name| {
            std::env::split_paths(&path)
                .chain([PathBuf::from("/usr/bin")])
                .map(|d| d.join(name))
                .find(|f| f.is_file())
        })
        .ok_or_else(|| {
            HandlerError::internal(
                "mariadb-dump not found; install MariaDB's client programs (apt-get install mariadb-client)",
            )
        })
}

/// A dump without `DEFINER=user@host` clauses, which only an administrator may import.
fn without_definers(text: &str) -> String {
    static DEFINER: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    let re = DEFINER.get_or_init(|| {
        regex::Regex::new(
            r"DEFINER=(`[^`]*`|'[^']*'|[A-Za-z0-9_.%-]+)@(`[^`]*`|'[^']*'|[A-Za-z0-9_.%-]+)",
        )
        .expect("a valid pattern")
    });
    re.replace_all(text, "").into_owned()
}

/// What a scan of SQL text found: the statements to send, and the code outside literals and
/// comments (the inside of `/*! ... */` included, which the server runs), for the guard.
#[derive(Default)]
struct Scanned {
    statements: Vec<String>,
    code: String,
    /// A client command, which only the command-line client understands.
    client_command: Option<&'static str>,
}

/// Splits `sql` into statements at its delimiter (`;`, or what a `DELIMITER` line sets), as
/// MariaDB's client does: not inside quotes, backquotes or comments.
fn split(sql: &str) -> std::result::Result<Vec<String>, String> {
    let scanned = scan(sql);
    match scanned.client_command {
        Some(kind) => Err(format!(
            "refused {kind}: an import may only change its own database"
        )),
        None => Ok(scanned.statements),
    }
}

/// Scans `sql`: see [`Scanned`].
fn scan(sql: &str) -> Scanned {
    let mut s = Scanner {
        chars: sql.chars().collect(),
        i: 0,
        delimiter: ";".to_string(),
        current: String::new(),
        out: Scanned::default(),
    };
    while s.i < s.chars.len() {
        // A line that starts a statement may be a client command.
        if s.current.trim().is_empty() && (s.i == 0 || s.chars[s.i - 1] == '\n') && s.command_line()
        {
            continue;
        }
        let c = s.chars[s.i];
        if c == '\'' || c == '"' || c == '`' {
            s.quoted(c);
            continue;
        }
        if s.line_comment() || s.block_comment() || s.statement_end() {
            continue;
        }
        s.current.push(c);
        s.out.code.push(c);
        s.i += 1;
    }
    if !s.current.trim().is_empty() {
        s.out.statements.push(s.current);
    }
    s.out
}

/// A scan under way: the text, where it is, the delimiter that ends a statement now, the
/// statement being read and what was found so far.
struct Scanner {
    chars: Vec<char>,
    i: usize,
    delimiter: String,
    current: String,
    out: Scanned,
}

impl Scanner {
    /// Whether the text at `i` starts with `s`, ignoring ASCII case.
    fn at(&self, i: usize, s: &str) -> bool {
        s.chars().enumerate().all(|(k, c)| {
            self.chars
                .get(i + k)
                .is_some_and(|x| x.eq_ignore_ascii_case(&c))
        })
    }

    /// At the start of a line that starts a statement: a `DELIMITER` line is taken whole
    /// (true), setting the delimiter when it names one; the first client command is noted.
    fn command_line(&mut self) -> bool {
        let line: String = self.chars[self.i..]
            .iter()
            .take_while(|c| **c != '\n')
            .collect();
        let word = line.trim_start().to_ascii_lowercase();
        if let Some(rest) = word.strip_prefix("delimiter") {
            if !rest.trim().is_empty() {
                self.delimiter = line.trim_start()[9..].trim().to_string();
            }
            self.i += line.chars().count();
            return true;
        }
        for (prefix, kind) in [
            ("source ", "a client command (source)"),
            ("system ", "a client command (system)"),
            ("\\!", "a client command (\\!)"),
            ("\\.", "a client command (\\.)"),
            ("connect ", "a client command (connect)"),
        ] {
            if word.starts_with(prefix) && self.out.client_command.is_none() {
                self.out.client_command = Some(kind);
            }
        }
        false
    }

    /// Quoted text opened by `quote`: kept in the statement, left out of the code.
    fn quoted(&mut self, quote: char) {
        let start = self.i;
        let mut i = self.i + 1;
        while i < self.chars.len() {
            if self.chars[i] == '\\' && quote != '`' {
                i += 2;
                continue;
            }
            if self.chars[i] == quote {
                if self.chars.get(i + 1) == Some(&quote) {
                    i += 2;
                    continue;
                }
                break;
            }
            i += 1;
        }
        self.i = (i + 1).min(self.chars.len());
        self.current.extend(&self.chars[start..self.i]);
        self.out.code.push(' ');
    }

    /// A comment to the end of the line (`--` followed by a space or the line's end, and
    /// `#`), skipped; false when none starts here.
    fn line_comment(&mut self) -> bool {
        let i = self.i;
        let dashes = self.at(i, "-- ")
            || self.at(i, "--\t")
            || (self.at(i, "--") && self.chars.get(i + 2).is_none_or(|c| *c == '\n'));
        if !dashes && self.chars[i] != '#' {
            return false;
        }
        while self.i < self.chars.len() && self.chars[self.i] != '\n' {
            self.i += 1;
        }
        true
    }

    /// A `/* */` comment, kept in the statement; its inside is code when it is run (`/*!`,
    /// `/*M!`). False when none starts here.
    fn block_comment(&mut self) -> bool {
        let start = self.i;
        if !self.at(start, "/*") {
            return false;
        }
        let executable = self.at(start, "/*!") || self.at(start, "/*M!");
        let mut i = start + 2;
        while i < self.chars.len() && !self.at(i, "*/") {
            i += 1;
        }
        self.i = (i + 2).min(self.chars.len());
        self.current.extend(&self.chars[start..self.i]);
        if executable {
            let inner: String = self.chars[start..self.i].iter().collect();
            let inner = inner
                .trim_start_matches("/*")
                .trim_start_matches(['!', 'M', 'm'])
                .trim_start_matches('!')
                .trim_start_matches(|c: char| c.is_ascii_digit())
                .trim_end_matches("*/");
            self.out.code.push(' ');
            self.out.code.push_str(inner);
        }
        self.out.code.push(' ');
        true
    }

    /// The delimiter: the statement read so far ends (kept unless blank). False when the
    /// delimiter is not here.
    fn statement_end(&mut self) -> bool {
        if !self.at(self.i, &self.delimiter) {
            return false;
        }
        if !self.current.trim().is_empty() {
            self.out.statements.push(std::mem::take(&mut self.current));
        }
        self.current.clear();
        self.out.code.push_str(" ; ");
        self.i += self.delimiter.chars().count();
        true
    }
}

/// The first statement of `sql` that reaches beyond its database, by kind; `None` when there
/// is none. This is a guard, not a sandbox: the import's account, with rights on one database
/// only, is what keeps a file in its database.
fn refused(sql: &str) -> Option<&'static str> {
    let scanned = scan(sql);
    if let Some(kind) = scanned.client_command {
        return Some(kind);
    }
    let words: Vec<String> = scanned
        .code
        .split(|c: char| {
            !(c.is_ascii_alphanumeric() || c == '_' || c == '@' || c == '!' || c == '\\')
        })
        .filter(|w| !w.is_empty())
        .map(str::to_ascii_lowercase)
        .collect();
    let pair = |a: &str, b: &str| words.windows(2).any(|w| w[0] == a && w[1] == b);
    let any = |w: &str| words.iter().any(|x| x == w);
    let rules: [(bool, &'static str); 16] = [
        (pair("load", "data") || pair("load", "xml"), "LOAD DATA"),
        (
            pair("into", "outfile") || pair("into", "dumpfile"),
            "INTO OUTFILE",
        ),
        (any("load_file"), "LOAD_FILE"),
        (
            pair("set", "global")
                || pair("set", "persist")
                || words.iter().any(|w| w.starts_with("@@global")),
            "SET GLOBAL",
        ),
        (any("grant") || any("revoke"), "GRANT"),
        (
            ["create", "drop", "alter", "rename"]
                .iter()
                .any(|v| pair(v, "user") || pair(v, "role"))
                || pair("set", "password")
                || pair("set", "role"),
            "an account statement",
        ),
        (
            pair("install", "plugin") || pair("uninstall", "plugin") || pair("install", "soname"),
            "INSTALL PLUGIN",
        ),
        (
            ["create", "alter", "drop"]
                .iter()
                .any(|v| pair(v, "server")),
            "a server statement",
        ),
        (
            ["create", "drop", "alter"]
                .iter()
                .any(|v| pair(v, "database") || pair(v, "schema")),
            "a database statement",
        ),
        (any("use"), "USE"),
        (any("shutdown") || any("kill"), "a server statement"),
        (
            any("flush") || any("purge") || pair("reset", "master"),
            "a server statement",
        ),
        (
            pair("change", "master") || any("slave") || any("replica"),
            "a replication statement",
        ),
        (
            any("prepare") || any("execute") || pair("deallocate", "prepare"),
            "PREPARE",
        ),
        (any("sql_log_bin"), "SET sql_log_bin"),
        (any("\\!") || any("system"), "a client command (system)"),
    ];
    rules
        .into_iter()
        .find_map(|(hit, kind)| hit.then_some(kind))
}

#[cfg(test)]
mod tests {
    use super::{grant_pattern, refused, scan, string_literal, without_definers};

    #[test]
    fn a_grant_names_its_database_exactly() {
        assert_eq!(grant_pattern("app_db").unwrap(), r"`app\_db`");
        assert_eq!(grant_pattern("a%b").unwrap(), r"`a\%b`");
        assert_eq!(grant_pattern("plain1").unwrap(), "`plain1`");
        for bad in ["", "a`b", r"a\b", "a'b", "a b", "a.b"] {
            assert!(grant_pattern(bad).is_err(), "{bad:?}");
        }
        assert_eq!(string_literal(r"it's\"), r"'it''s\\'");
    }

    #[test]
    fn statements_split_at_the_delimiter_outside_quotes_and_comments() {
        let s = scan(
            "CREATE TABLE t (a text); INSERT INTO t VALUES ('x;y'), (\"it\\\"s;\"); -- c; d\n\
             /* e; f */ INSERT INTO t VALUES ('g');\n\
             DELIMITER ;;\n\
             CREATE TRIGGER tr BEFORE INSERT ON t FOR EACH ROW BEGIN SET NEW.a = 'z'; END ;;\n\
             DELIMITER ;\n\
             SELECT 1",
        );
        assert_eq!(s.statements.len(), 5, "{:?}", s.statements);
        assert!(s.statements[1].contains("'x;y'"));
        assert!(s.statements[3].contains("SET NEW.a = 'z'; END"));
        assert_eq!(s.statements[4].trim(), "SELECT 1");
    }

    #[test]
    fn the_guard_reads_code_and_run_comments_only() {
        for (sql, kind) in [
            (
                "LOAD DATA INFILE '/etc/passwd' INTO TABLE t",
                Some("LOAD DATA"),
            ),
            (
                "SELECT * FROM t INTO OUTFILE '/tmp/x'",
                Some("INTO OUTFILE"),
            ),
            ("SELECT LOAD_FILE('/etc/passwd')", Some("LOAD_FILE")),
            ("SET GLOBAL max_connections = 1", Some("SET GLOBAL")),
            ("SET @@global.read_only = 1", Some("SET GLOBAL")),
            ("GRANT ALL ON *.* TO x", Some("GRANT")),
            (
                "CREATE USER x IDENTIFIED BY 'y'",
                Some("an account statement"),
            ),
            ("INSTALL PLUGIN x SONAME 'y.so'", Some("INSTALL PLUGIN")),
            ("DROP DATABASE other", Some("a database statement")),
            ("USE other", Some("USE")),
            (
                "/*!50000 LOAD DATA INFILE 'x' INTO TABLE t */",
                Some("LOAD DATA"),
            ),
            ("source /etc/x.sql", Some("a client command (source)")),
            ("\\! sh", Some("a client command (\\!)")),
            ("system sh", Some("a client command (system)")),
            ("PREPARE s FROM @q", Some("PREPARE")),
            // Words in data or comments are data.
            (
                "INSERT INTO t VALUES ('LOAD DATA INFILE, GRANT, USE x')",
                None,
            ),
            ("-- GRANT ALL\nINSERT INTO t VALUES (1)", None),
            ("/* DROP DATABASE x */ INSERT INTO t VALUES (1)", None),
            ("CREATE TABLE t (a int); INSERT INTO t VALUES (1)", None),
        ] {
            assert_eq!(refused(sql), kind, "{sql}");
        }
    }

    #[test]
    fn definers_leave_a_dump() {
        assert_eq!(
            without_definers(
                "/*!50013 DEFINER=`root`@`localhost` SQL SECURITY DEFINER */ /*!50017 DEFINER=`a`@`%`*/"
            ),
            "/*!50013  SQL SECURITY DEFINER */ /*!50017 */"
        );
    }
}
