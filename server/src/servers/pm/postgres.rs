//! `pm`'s databases on a PostgreSQL server, when `.pm.json` names one (`"postgres":
//! "postgresql://..."`, or `"env:NAME"` for a URL kept in the environment): the same tools,
//! names, rules and errors as for SQLite files. `db.clone` is `CREATE DATABASE ... TEMPLATE`;
//! `db.dump` runs the machine's `pg_dump` (plain SQL with INSERTs, no owners or privileges).
//!
//! `db.import` runs a file through the driver, never through `psql`, and the database does
//! the confining: the file's text runs in one transaction inside a `SECURITY DEFINER`
//! function owned by the import role (`pm_import` unless `.pm.json` names another), a role
//! with no attributes and no memberships. Every statement of the file then runs with that
//! role's rights only, in the target database only: it cannot `SET ROLE` back (PostgreSQL
//! refuses `role` and `session_authorization` inside a security-definer function), reach
//! files or programs, touch roles or other databases, signal other sessions, or commit part
//! of the file (transaction control is refused inside a function). A text guard refuses the
//! plainly hostile first, and an import is bounded by the call's deadline.

use std::path::PathBuf;
use std::process::Command;

use mcpspec::__internal::backend::postgres::{bounded, connect, message};
use mcpspec::backend::Stop;
use mcpspec::handler::HandlerError;
use postgres::Client;

type Result<T> = std::result::Result<T, HandlerError>;

/// The role an import runs as, unless `.pm.json` names another (`import_role`).
pub(super) const IMPORT_ROLE: &str = "pm_import";

/// A PostgreSQL server whose databases a project manages.
pub(super) struct Server {
    url: String,
    config: postgres::Config,
    /// The role an import's statements run as.
    import_role: String,
    /// Whether imports run when pm's own role is a superuser (`superuser_imports`).
    superuser_imports: bool,
    /// When the call must stop: every connection's statement timeout, and an import's.
    stop: Stop,
}

/// What `.pm.json` says of the PostgreSQL server.
pub(super) struct Settings<'a> {
    /// `postgres`: a URL, or `env:NAME`.
    pub url: &'a str,
    /// `import_role`, when given.
    pub import_role: Option<&'a str>,
    /// `superuser_imports`.
    pub superuser_imports: bool,
}

impl Server {
    /// The server `.pm.json` names, for a call that must stop at `stop`.
    pub(super) fn from_config(
        settings: &Settings<'_>,
        stop: Stop,
    ) -> std::result::Result<Server, String> {
        let value = settings.url;
        let url = match value.strip_prefix("env:") {
            Some(var) => std::env::var(var)
                .map_err(|_| format!("`postgres` names the variable {var}, which is not set"))?,
            None => value.to_string(),
        };
        if !mcpspec::__internal::backend::postgres::is_url(&url) {
            return Err(
                "`postgres` must be a postgres:// or postgresql:// URL, or env:NAME".into(),
            );
        }
        let config = url
            .parse()
            .map_err(|e: postgres::Error| format!("`postgres` is not a valid URL: {e}"))?;
        let import_role = settings.import_role.unwrap_or(IMPORT_ROLE);
        if !valid_role(import_role) {
            return Err(format!(
                "`import_role` must be a role name of lowercase letters, digits and `_`, not `{import_role}`"
            ));
        }
        Ok(Server {
            url,
            config,
            import_role: import_role.to_string(),
            superuser_imports: settings.superuser_imports,
            stop,
        })
    }

    /// Where database `name` is, for results: its URL without the password.
    pub(super) fn location(&self, name: &str) -> String {
        super::server::database_url(&self.url, name)
    }

    /// A connection to database `name`, or to the URL's own database, whose statements stop
    /// at the call's deadline.
    fn connect(&self, name: Option<&str>) -> Result<Client> {
        let mut config = self.config.clone();
        if let Some(n) = name {
            config.dbname(n);
        }
        config.application_name("mcpspec-pm");
        config.options(&statement_timeout(&self.stop));
        connect(&config).map_err(|e| HandlerError::internal(message(&e)))
    }

    /// The server's databases (not templates) with their sizes, by name.
    pub(super) fn databases(&self) -> Result<Vec<(String, u64)>> {
        let mut c = self.connect(None)?;
        let rows = c
            .query(
                "SELECT datname::text, pg_database_size(oid) FROM pg_database
                 WHERE NOT datistemplate ORDER BY datname",
                &[],
            )
            .map_err(|e| HandlerError::internal(message(&e)))?;
        Ok(rows
            .iter()
            .map(|r| (r.get::<_, String>(0), r.get::<_, i64>(1).max(0) as u64))
            .collect())
    }

    pub(super) fn exists(&self, name: &str) -> Result<bool> {
        let mut c = self.connect(None)?;
        let n = c
            .query_one(
                "SELECT count(*) FROM pg_database WHERE datname = $1",
                &[&name],
            )
            .map_err(|e| HandlerError::internal(message(&e)))?;
        Ok(n.get::<_, i64>(0) > 0)
    }

    /// Runs one statement on the server's own database; an existing target is `DB_EXISTS`.
    fn admin(&self, sql: &str, target: &str) -> Result<()> {
        let mut c = self.connect(None)?;
        c.batch_execute(sql).map_err(|e| {
            if e.code() == Some(&postgres::error::SqlState::DUPLICATE_DATABASE) {
                HandlerError::new("DB_EXISTS").with("database", target)
            } else {
                HandlerError::internal(message(&e))
            }
        })
    }

    pub(super) fn create(&self, name: &str) -> Result<()> {
        self.admin(&format!("CREATE DATABASE {}", quote(name)), name)
    }

    pub(super) fn clone_from(&self, source: &str, target: &str) -> Result<()> {
        self.admin(
            &format!(
                "CREATE DATABASE {} TEMPLATE {}",
                quote(target),
                quote(source)
            ),
            target,
        )
    }

    pub(super) fn drop(&self, name: &str) -> Result<()> {
        self.admin(&format!("DROP DATABASE {}", quote(name)), name)
    }

    /// The base tables of database `name`, in the order they were created.
    pub(super) fn tables(&self, name: &str) -> Result<Vec<(String, i64)>> {
        let mut c = self.connect(Some(name))?;
        let names: Vec<String> = c
            .query(
                "SELECT c.relname::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                 WHERE c.relkind IN ('r', 'p') AND n.nspname = 'public' ORDER BY c.oid",
                &[],
            )
            .map_err(|e| HandlerError::internal(message(&e)))?
            .iter()
            .map(|r| r.get(0))
            .collect();
        let mut out = Vec::new();
        for t in names {
            let n: i64 = c
                .query_one(&format!("SELECT count(*) FROM public.{}", quote(&t)), &[])
                .map_err(|e| HandlerError::internal(message(&e)))?
                .get(0);
            out.push((t, n));
        }
        Ok(out)
    }

    /// Database `name` as plain SQL (INSERTs, no owners, no privileges), only `tables` when
    /// given, from the machine's `pg_dump`.
    pub(super) fn dump(&self, name: &str, tables: Option<&[String]>) -> Result<String> {
        let mut cmd = Command::new(tool("pg_dump")?);
        cmd.args([
            "--inserts",
            "--no-owner",
            "--no-privileges",
            "--no-comments",
        ]);
        for t in tables.unwrap_or_default() {
            cmd.arg("--table").arg(format!("public.{}", quote(t)));
        }
        self.connection_args(&mut cmd, name);
        let out = cmd.output().map_err(HandlerError::internal)?;
        if !out.status.success() {
            let reason = String::from_utf8_lossy(&out.stderr).trim().to_string();
            return Err(HandlerError::internal(format!("pg_dump failed: {reason}")));
        }
        String::from_utf8(out.stdout).map_err(HandlerError::internal)
    }

    /// Where `pg_dump` connects, with the password in its environment rather than its
    /// arguments (which other users of the machine can read).
    fn connection_args(&self, cmd: &mut Command, name: &str) {
        use postgres::config::Host;
        if let Some(host) = self.config.get_hosts().first() {
            let h = match host {
                Host::Tcp(h) => h.clone(),
                Host::Unix(p) => p.display().to_string(),
            };
            cmd.arg("--host").arg(h);
        }
        if let Some(port) = self.config.get_ports().first() {
            cmd.arg("--port").arg(port.to_string());
        }
        if let Some(user) = self.config.get_user() {
            cmd.arg("--username").arg(user);
        }
        cmd.arg("--dbname").arg(name).arg("--no-password");
        cmd.env("PGOPTIONS", statement_timeout(&self.stop));
        match self.config.get_password() {
            Some(p) => cmd.env("PGPASSWORD", String::from_utf8_lossy(p).into_owned()),
            None => cmd.env_remove("PGPASSWORD"),
        };
        if self.config.get_ssl_mode() == postgres::config::SslMode::Require {
            cmd.env("PGSSLMODE", "require");
        }
    }

    /// Runs `sql` in database `name` (created first when missing) in one transaction, as the
    /// import role (see the module comment); the tables after it. On failure nothing stays,
    /// a database this call created included; the error is PostgreSQL's words, the kind of
    /// statement refused, or why the roles do not allow an import.
    pub(super) fn import(
        &self,
        name: &str,
        sql: &str,
    ) -> std::result::Result<(bool, Vec<String>), String> {
        let sql = &without_restrict(sql);
        if let Some(kind) = refused(sql) {
            return Err(format!(
                "refused {kind}: an import may only change its own database"
            ));
        }
        self.roles_allow_import()?;
        let created = !self.exists(name).map_err(|e| e.to_string())?;
        if created {
            self.create(name).map_err(|e| e.to_string())?;
        }
        let ran = self
            .connect(Some(name))
            .map_err(|e| e.to_string())
            .and_then(|mut c| {
                bounded(&mut c, &self.stop, |c| self.confined(c, sql)).map_err(|e| {
                    e.as_db_error()
                        .map_or_else(|| e.to_string(), |d| d.message().to_string())
                })
            });
        match ran {
            Ok(()) => {
                let tables = self.tables(name).map_err(|e| e.to_string())?;
                Ok((created, tables.into_iter().map(|(t, _)| t).collect()))
            }
            Err(reason) => {
                if created {
                    let _ = self.drop(name);
                }
                Err(reason)
            }
        }
    }
}

impl Server {
    /// Runs `sql` on `c` in one transaction, inside a security-definer function owned by the
    /// import role, after giving that role what it needs in this database: the public schema
    /// and the tables and sequences pm's own role may grant there.
    fn confined(&self, c: &mut Client, sql: &str) -> std::result::Result<(), postgres::Error> {
        let role = quote(&self.import_role);
        let mut tx = c.transaction()?;
        tx.batch_execute(&format!(
            "GRANT USAGE, CREATE ON SCHEMA public TO {role};
             GRANT ALL ON ALL TABLES IN SCHEMA public TO {role};
             GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO {role};
             CREATE FUNCTION pg_temp.mcpspec_import(text) RETURNS void
               LANGUAGE plpgsql SECURITY DEFINER
               AS $mcpspec$BEGIN EXECUTE $1; END$mcpspec$;
             ALTER FUNCTION pg_temp.mcpspec_import(text) OWNER TO {role};"
        ))?;
        if !sqlscan::words(sql).is_empty() {
            tx.execute("SELECT pg_temp.mcpspec_import($1)", &[&sql])?;
        }
        tx.commit()
    }

    /// Whether pm's own role and the import role allow an import: pm's role is not a
    /// superuser (unless `superuser_imports` says so) and is a member of the import role,
    /// which exists, has no attributes and belongs to no role.
    fn roles_allow_import(&self) -> std::result::Result<(), String> {
        let role = &self.import_role;
        let mut c = self.connect(None).map_err(|e| e.to_string())?;
        let row = c
            .query_one(
                "SELECT current_user::text, me.rolsuper, r.oid IS NOT NULL,
                        coalesce(r.rolsuper OR r.rolcreaterole OR r.rolcreatedb
                                 OR r.rolreplication OR r.rolbypassrls, false),
                        (SELECT count(*) FROM pg_auth_members m WHERE m.member = r.oid),
                        r.oid IS NOT NULL AND pg_has_role(current_user, r.oid, 'MEMBER')
                 FROM pg_roles me LEFT JOIN pg_roles r ON r.rolname = $1
                 WHERE me.rolname = current_user",
                &[role],
            )
            .map_err(|e| message(&e))?;
        let me: String = row.get(0);
        let (superuser, exists, privileged): (bool, bool, bool) =
            (row.get(1), row.get(2), row.get(3));
        let (memberships, member): (i64, bool) = (row.get(4), row.get(5));
        if superuser && !self.superuser_imports {
            return Err(format!(
                "refused: pm connects as `{me}`, a superuser; give pm a role without superuser rights that owns the project's databases, or set \"superuser_imports\": true in .pm.json"
            ));
        }
        if !exists {
            return Err(format!(
                "the import role `{role}` does not exist; create it once as an administrator: CREATE ROLE {role} NOLOGIN; GRANT {role} TO {me}"
            ));
        }
        if privileged || memberships > 0 {
            return Err(format!(
                "refused: the import role `{role}` must have no attributes (SUPERUSER, CREATEROLE, CREATEDB, REPLICATION, BYPASSRLS) and belong to no role"
            ));
        }
        if !member {
            return Err(format!(
                "pm's role `{me}` must be a member of the import role: GRANT {role} TO {me}"
            ));
        }
        Ok(())
    }
}

/// The connection option that bounds every statement by the call's deadline, plus a second.
fn statement_timeout(stop: &Stop) -> String {
    let left = stop
        .deadline()
        .saturating_duration_since(std::time::Instant::now());
    let ms = left.as_millis().saturating_add(1000).min(i32::MAX as u128);
    format!("-c statement_timeout={ms}")
}

/// Whether `name` is a plain role name, written as is in SQL and messages.
fn valid_role(name: &str) -> bool {
    (1..=63).contains(&name.len())
        && name.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// `sql` without the `\restrict KEY` and `\unrestrict KEY` lines pg_dump writes around a
/// dump (they only tell psql to refuse other meta-commands, which the driver never runs).
fn without_restrict(sql: &str) -> String {
    sql.lines()
        .filter(|l| {
            let mut w = l.split_whitespace();
            let marker = matches!(w.next(), Some("\\restrict" | "\\unrestrict"));
            !(marker && w.next().is_some() && w.next().is_none())
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `name` as a quoted identifier, its quotes doubled.
fn quote(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// A PostgreSQL client program (`pg_dump`): on PATH, else in the newest Debian install.
fn tool(name: &str) -> Result<PathBuf> {
    let on_path = std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join(name))
            .find(|f| f.is_file())
    });
    let debian = || {
        let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path().join("bin").join(name))
            .filter(|f| f.is_file())
            .collect();
        found.sort();
        found.pop()
    };
    on_path.or_else(debian).ok_or_else(|| {
        HandlerError::internal(format!(
            "{name} not found; install PostgreSQL's client programs (apt-get install postgresql-client)"
        ))
    })
}

/// The first statement of `sql` that reaches beyond its database, by kind; `None` when there
/// is none. This is a guard, not a sandbox: a role without superuser rights is what keeps an
/// import inside its database.
fn refused(sql: &str) -> Option<&'static str> {
    if sql.lines().any(|l| l.trim_start().starts_with('\\')) {
        return Some("a psql meta-command");
    }
    let words = sqlscan::words(sql);
    let pairs = [
        ("COPY", "", "COPY"),
        ("ALTER", "SYSTEM", "ALTER SYSTEM"),
        ("SET", "ROLE", "SET ROLE"),
        ("SET", "LOCAL", "SET LOCAL"),
        ("SET", "SESSION", "SET SESSION AUTHORIZATION"),
        ("RESET", "ROLE", "RESET ROLE"),
        ("LOAD", "", "LOAD"),
    ];
    let objects = [
        "ROLE",
        "USER",
        "GROUP",
        "DATABASE",
        "TABLESPACE",
        "EXTENSION",
        "SERVER",
        "SUBSCRIPTION",
        "PUBLICATION",
    ];
    let functions = [
        "LO_IMPORT",
        "LO_EXPORT",
        "PG_READ_FILE",
        "PG_READ_BINARY_FILE",
        "PG_LS_DIR",
        "PG_STAT_FILE",
        "DBLINK",
        "DBLINK_EXEC",
    ];
    let untrusted = ["PLPYTHON3U", "PLPYTHONU", "PLPERLU", "PLTCLU", "C"];
    for (i, w) in words.iter().enumerate() {
        let next = words.get(i + 1).map_or("", String::as_str);
        // Statements are recognised where they start: first, or after a `;`.
        let starts = i == 0 || words[i - 1] == ";";
        for (a, b, kind) in pairs {
            if starts && w == a && (b.is_empty() || next == b) {
                return Some(kind);
            }
        }
        if starts && matches!(w.as_str(), "CREATE" | "ALTER" | "DROP") && objects.contains(&next) {
            return Some("a statement on roles, databases or the server");
        }
        if functions.contains(&w.as_str()) {
            return Some("a function that reaches files or other databases");
        }
        if w == "LANGUAGE" && untrusted.contains(&next) {
            return Some("an untrusted language");
        }
    }
    None
}

impl super::server::DatabaseServer for Server {
    fn location(&self, name: &str) -> String {
        Server::location(self, name)
    }

    fn databases(&self) -> Result<Vec<(String, u64)>> {
        Server::databases(self)
    }

    fn exists(&self, name: &str) -> Result<bool> {
        Server::exists(self, name)
    }

    fn create(&self, name: &str) -> Result<()> {
        Server::create(self, name)
    }

    fn clone_database(&self, source: &str, target: &str) -> Result<()> {
        Server::clone_from(self, source, target)
    }

    fn drop_database(&self, name: &str) -> Result<()> {
        Server::drop(self, name)
    }

    fn tables(&self, name: &str) -> Result<Vec<(String, i64)>> {
        Server::tables(self, name)
    }

    fn dump(&self, name: &str, tables: Option<&[String]>) -> Result<String> {
        Server::dump(self, name, tables)
    }

    fn import(
        &self,
        name: &str,
        sql: &str,
    ) -> std::result::Result<(bool, Vec<String>), super::server::ImportFailure> {
        // A statement cancelled at the call's deadline is answered as the deadline answers,
        // by the runtime, which sees the deadline passed.
        Server::import(self, name, sql).map_err(super::server::ImportFailure::Sql)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn imports_reaching_beyond_their_database_are_refused() {
        for (sql, refused_as) in [
            ("CREATE TABLE t (x int); INSERT INTO t VALUES (1);", None),
            ("INSERT INTO t VALUES ('COPY x TO PROGRAM')", None),
            ("-- DROP DATABASE x\nSELECT 1", None),
            ("INSERT INTO jobs (load, copy) VALUES (1, 2)", None),
            ("SELECT 1; COPY t TO PROGRAM 'sh'", Some("COPY")),
            ("COPY t TO PROGRAM 'sh'", Some("COPY")),
            ("copy t from '/etc/passwd'", Some("COPY")),
            ("\\! rm -rf /", Some("a psql meta-command")),
            (
                "\\restrict abc\nSELECT 1;\n\\unrestrict abc",
                Some("a psql meta-command"),
            ),
            ("ALTER SYSTEM SET fsync = off", Some("ALTER SYSTEM")),
            (
                "CREATE ROLE admin SUPERUSER",
                Some("a statement on roles, databases or the server"),
            ),
            (
                "drop database other",
                Some("a statement on roles, databases or the server"),
            ),
            (
                "SELECT pg_read_file('/etc/passwd')",
                Some("a function that reaches files or other databases"),
            ),
            (
                "CREATE FUNCTION f() RETURNS int AS $$ import os $$ LANGUAGE plpython3u",
                Some("an untrusted language"),
            ),
            ("SET ROLE postgres", Some("SET ROLE")),
        ] {
            assert_eq!(refused(sql), refused_as, "{sql}");
        }
    }

    #[test]
    fn pg_dumps_restrict_markers_are_dropped_and_nothing_else() {
        let dump = "\\restrict k3y\nCREATE TABLE t (x int);\n\\unrestrict k3y\n\\! ls";
        assert_eq!(without_restrict(dump), "CREATE TABLE t (x int);\n\\! ls");
    }

    #[test]
    fn locations_name_the_database_without_the_password() {
        let server = |url| {
            let settings = Settings {
                url,
                import_role: None,
                superuser_imports: false,
            };
            Server::from_config(
                &settings,
                Stop::after(std::time::Duration::from_secs(1), Default::default()),
            )
        };
        let s = server("postgresql://me:secret@db.example:5433/postgres?sslmode=require").unwrap();
        assert_eq!(
            s.location("app"),
            "postgresql://me:***@db.example:5433/app?sslmode=require"
        );
        assert!(server("mysql://x").is_err());
        assert!(server("env:PM_TEST_SURELY_UNSET_VARIABLE").is_err());
    }
}
