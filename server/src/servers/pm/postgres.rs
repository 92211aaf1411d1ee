//! `pm`'s databases on a PostgreSQL server, when `.pm.json` names one (`"postgres":
//! "postgresql://..."`, or `"env:NAME"` for a URL kept in the environment): the same tools,
//! names, rules and errors as for SQLite files. `db.clone` is `CREATE DATABASE ... TEMPLATE`;
//! `db.dump` runs the machine's `pg_dump` (plain SQL with INSERTs, no owners or privileges);
//! `db.import` runs a file through the driver in one transaction, never through `psql`, after
//! refusing statements that reach beyond the database (roles, other databases, server files
//! and programs, system settings, untrusted languages).

use std::path::PathBuf;
use std::process::Command;

use mcpspec::backend::postgres::{connect, message, redact};
use mcpspec::handler::HandlerError;
use postgres::Client;

type Result<T> = std::result::Result<T, HandlerError>;

/// A PostgreSQL server whose databases a project manages.
pub(super) struct Server {
    url: String,
    config: postgres::Config,
}

impl Server {
    /// The server `.pm.json` names: a URL, or `env:NAME` for one in the environment.
    pub(super) fn from_config(value: &str) -> std::result::Result<Server, String> {
        let url = match value.strip_prefix("env:") {
            Some(var) => std::env::var(var)
                .map_err(|_| format!("`postgres` names the variable {var}, which is not set"))?,
            None => value.to_string(),
        };
        if !mcpspec::backend::postgres::is_url(&url) {
            return Err(
                "`postgres` must be a postgres:// or postgresql:// URL, or env:NAME".into(),
            );
        }
        let config = url
            .parse()
            .map_err(|e: postgres::Error| format!("`postgres` is not a valid URL: {e}"))?;
        Ok(Server { url, config })
    }

    /// Where database `name` is, for results: its URL without the password.
    pub(super) fn location(&self, name: &str) -> String {
        let base = redact(&self.url);
        let (head, query) = base
            .split_once('?')
            .map_or((base.as_str(), ""), |(h, q)| (h, q));
        let server = head.rsplit_once('/').map_or(head, |(s, _)| s);
        if query.is_empty() {
            format!("{server}/{name}")
        } else {
            format!("{server}/{name}?{query}")
        }
    }

    /// A connection to database `name`, or to the URL's own database.
    fn connect(&self, name: Option<&str>) -> Result<Client> {
        let mut config = self.config.clone();
        if let Some(n) = name {
            config.dbname(n);
        }
        config.application_name("mcpspec-pm");
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
        match self.config.get_password() {
            Some(p) => cmd.env("PGPASSWORD", String::from_utf8_lossy(p).into_owned()),
            None => cmd.env_remove("PGPASSWORD"),
        };
        if self.config.get_ssl_mode() == postgres::config::SslMode::Require {
            cmd.env("PGSSLMODE", "require");
        }
    }

    /// Runs `sql` in database `name` (created first when missing) in one transaction; the
    /// tables after it. On failure nothing stays, a database this call created included; the
    /// error is PostgreSQL's words, or the kind of statement refused.
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
        let created = !self.exists(name).map_err(|e| e.to_string())?;
        if created {
            self.create(name).map_err(|e| e.to_string())?;
        }
        let ran = self
            .connect(Some(name))
            .map_err(|e| e.to_string())
            .and_then(|mut c| {
                c.batch_execute(&format!("BEGIN;\n{sql}\n;COMMIT;"))
                    .map_err(|e| {
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
        let s =
            Server::from_config("postgresql://me:secret@db.example:5433/postgres?sslmode=require")
                .unwrap();
        assert_eq!(
            s.location("app"),
            "postgresql://me:***@db.example:5433/app?sslmode=require"
        );
        assert!(Server::from_config("mysql://x").is_err());
        assert!(Server::from_config("env:PM_TEST_SURELY_UNSET_VARIABLE").is_err());
    }
}
