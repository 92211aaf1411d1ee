//! The MariaDB/MySQL engine (cargo feature `mysql`): `mysql://` and `mariadb://` URLs, served
//! through the synchronous `mysql` driver and its pool, which fit the engine's blocking jobs.
//!
//! - **Sessions** run with `ANSI_QUOTES` and `PIPES_AS_CONCAT` added to `sql_mode` (so the
//!   spec's texts quote identifiers with `"` and join text with `||`, as its other dialects
//!   do), in UTC, and read-only (`SET SESSION TRANSACTION READ ONLY`) when the server is.
//! - **Jobs**: writes in a transaction; several reads in one consistent snapshot (`START
//!   TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY`). A deadlock (1213) or lock wait timeout
//!   (1205) runs the job again, a few times, then reports the database busy.
//! - **Deadlines**: a watchdog sends `KILL QUERY` on a connection of its own when a job's
//!   deadline passes or the client cancels; the server's `max_statement_time` (MariaDB) or
//!   `max_execution_time` (MySQL, reads only) is the backstop a second later.
//! - **TLS**: `ssl-mode=REQUIRED` in the URL encrypts without checking the certificate (as
//!   libmysqlclient's `REQUIRED`), `VERIFY_CA` checks it against the system's roots, and
//!   `VERIFY_IDENTITY` checks the host name too; without it the connection is not encrypted
//!   (the driver cannot fall back, so `PREFERRED` means unencrypted here). Unix sockets with
//!   `?socket=/path`.
//! - Nothing here prints a password or a statement's arguments.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use mysql::prelude::Queryable;
use mysql::{Opts, OptsBuilder, PoolConstraints, PoolOpts, SslOpts};

use super::IDLE_CHECK;
use super::watchdog::{Cancel, Watchdog};
use super::{
    Backend, Bind, Changes, Column, Described, ErrorKind, Failure, JobError, JobKind, OpenError,
    Row, Session, Sql, Stop, TableColumn, Value, ValueRef, Work,
};

/// The most connections one server process opens.
pub(crate) const MAX_CONNECTIONS: usize = 16;

/// How long a job waits for a free connection.
const CHECKOUT_TIMEOUT: Duration = Duration::from_secs(5);

/// How long opening a connection may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// How much longer than the call timeout the server's own statement timeout is.
const STATEMENT_TIMEOUT_MARGIN: Duration = Duration::from_secs(1);

/// How many times a job whose transaction hit a deadlock or a lock wait timeout runs again.
const CONFLICT_RETRIES: u32 = 3;

/// The MariaDB/MySQL engine: `mysql://` and `mariadb://` URLs.
pub(crate) const ENGINE: super::EngineEntry = super::EngineEntry {
    dialect: &sqlscan::MYSQL,
    open: open_engine,
    create: create_engine,
    migrator: open_migrator,
};

fn open_engine(t: &super::Target<'_>) -> Result<Box<dyn Backend>, OpenError> {
    let pool = Pool::open(url_of(t.location)?, t.how.read_only, t.timeout)?;
    Ok(Box::new(pool))
}

fn create_engine(c: &super::Creation<'_>) -> Result<bool, OpenError> {
    let (ddl, rows) = super::server_creation(c, &sqlscan::MYSQL, MIGRATIONS_DDL, &TEAM)?;
    init(url_of(c.location)?, &ddl, rows)?;
    Ok(rows.is_some())
}

/// The URL of a location, or why it has none.
fn url_of(location: &super::Location) -> Result<&str, OpenError> {
    match location {
        super::Location::Url(u, _) => Ok(u),
        super::Location::File(p) => Err(url_error(
            &p.display().to_string(),
            "a file name, not a URL".into(),
        )),
    }
}

fn url_error(url: &str, reason: String) -> OpenError {
    OpenError::Url {
        url: super::redact(url),
        title: sqlscan::MYSQL.title,
        reason,
    }
}

/// What is wrong with a URL the driver could not read, in words.
fn url_reason(e: &mysql::UrlError) -> String {
    match e {
        mysql::UrlError::ParseError(p) => format!("it does not parse: {p}"),
        other => other.to_string(),
    }
}

fn connect_error(url: &str, e: &mysql::Error) -> OpenError {
    OpenError::Connect {
        url: super::redact(url),
        title: sqlscan::MYSQL.title,
        reason: describe(e),
    }
}

/// The driver's options for `url`: `mariadb://` read as `mysql://`, a URL without a host
/// (`mysql:///db?socket=...`) as `localhost`, and `ssl-mode` turned into TLS settings.
fn base_opts(url: &str) -> Result<OptsBuilder, OpenError> {
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| url_error(url, "not a URL".into()))?;
    if !sqlscan::MYSQL
        .schemes
        .iter()
        .any(|s| s.eq_ignore_ascii_case(scheme))
    {
        return Err(url_error(
            url,
            format!("`{scheme}://` is not a MariaDB/MySQL scheme"),
        ));
    }
    let rest = if rest.starts_with('/') {
        format!("localhost{rest}")
    } else {
        rest.to_string()
    };
    let (head, query) = rest.split_once('?').unwrap_or((&rest, ""));
    let mut ssl_mode = String::new();
    let kept: Vec<&str> = query
        .split('&')
        .filter(|p| !p.is_empty())
        .filter(|p| match p.split_once('=') {
            Some((k, v))
                if k.eq_ignore_ascii_case("ssl-mode") || k.eq_ignore_ascii_case("sslmode") =>
            {
                ssl_mode = v.to_ascii_uppercase();
                false
            }
            _ => true,
        })
        .collect();
    let driver_url = if kept.is_empty() {
        format!("mysql://{head}")
    } else {
        format!("mysql://{head}?{}", kept.join("&"))
    };
    let opts = Opts::from_url(&driver_url).map_err(|e| {
        url_error(
            url,
            format!(
                "{} (a user name or password holding `/`, `?`, `@`, `:` or `#` is written percent-encoded, as %2F %3F %40 %3A %23)",
                url_reason(&e)
            ),
        )
    })?;
    let ssl = match ssl_mode.as_str() {
        "" | "DISABLED" | "PREFERRED" => None,
        "REQUIRED" => Some(
            SslOpts::default()
                .with_danger_accept_invalid_certs(true)
                .with_danger_skip_domain_validation(true),
        ),
        "VERIFY_CA" => Some(SslOpts::default().with_danger_skip_domain_validation(true)),
        "VERIFY_IDENTITY" => Some(SslOpts::default()),
        other => {
            return Err(url_error(
                url,
                format!(
                    "ssl-mode={other} is not one of DISABLED, PREFERRED, REQUIRED, VERIFY_CA, VERIFY_IDENTITY"
                ),
            ));
        }
    };
    Ok(OptsBuilder::from_opts(opts)
        .prefer_socket(false)
        .tcp_connect_timeout(Some(CONNECT_TIMEOUT))
        .stmt_cache_size(256)
        .ssl_opts(ssl))
}

/// The driver's options for `url` (a `mysql://` or `mariadb://` URL, with `ssl-mode` and
/// `?socket=` read as the engine reads them), for tools that reach the same server (`pm`).
pub fn opts(url: &str) -> Result<Opts, OpenError> {
    Ok(base_opts(url)?.into())
}

/// Whether `location` is a MariaDB/MySQL URL.
pub fn is_url(location: &str) -> bool {
    location.split_once("://").is_some_and(|(scheme, _)| {
        sqlscan::MYSQL
            .schemes
            .iter()
            .any(|s| s.eq_ignore_ascii_case(scheme))
    })
}

/// What every connection runs first, the pool's and `init`'s alike: ANSI quotes, `||` as
/// concatenation, UTC.
const SESSION_MODES: [&str; 2] = [
    "SET SESSION sql_mode = CONCAT(@@SESSION.sql_mode, ',ANSI_QUOTES,PIPES_AS_CONCAT')",
    "SET SESSION time_zone = '+00:00'",
];

/// Commands every session of the server runs first.
fn session_setup(read_only: bool, mariadb: bool, timeout: Duration) -> Vec<String> {
    let backstop = timeout + STATEMENT_TIMEOUT_MARGIN;
    let mut init: Vec<String> = SESSION_MODES.iter().map(|s| s.to_string()).collect();
    init.push(if mariadb {
        format!(
            "SET SESSION max_statement_time = {}",
            backstop.as_secs_f64()
        )
    } else {
        format!("SET SESSION max_execution_time = {}", backstop.as_millis())
    });
    if read_only {
        init.push("SET SESSION TRANSACTION READ ONLY".to_string());
    }
    init
}

/// A server's MariaDB/MySQL database: the pool, and the watchdog that kills statements.
pub(crate) struct Pool {
    pool: mysql::Pool,
    /// Options for a connection of the watchdog's own.
    plain: Arc<Opts>,
    read_only: bool,
    watchdog: Arc<Watchdog>,
    /// When a job last found its connection dead: reads then run once more.
    died: Mutex<Option<Instant>>,
    /// When each pooled connection (by id) was last handed to a job.
    used: Mutex<HashMap<u32, Instant>>,
    /// Every writing transaction is rolled back instead of committed.
    rehearsal: bool,
}

impl Pool {
    /// Connects to `url` once, so that a wrong URL, password or database fails at start-up
    /// with the server's reason, and then opens the pool.
    pub fn open(url: &str, read_only: bool, timeout: Duration) -> Result<Pool, OpenError> {
        let builder = base_opts(url)?;
        let plain: Opts = builder.clone().into();
        let mut first = mysql::Conn::new(plain.clone()).map_err(|e| connect_error(url, &e))?;
        let version: String = first
            .query_first("SELECT VERSION()")
            .map_err(|e| connect_error(url, &e))?
            .unwrap_or_default();
        drop(first);
        let mariadb = version.to_ascii_lowercase().contains("mariadb");
        let constraints = PoolConstraints::new(1, MAX_CONNECTIONS).unwrap_or_default();
        // A connection keeps its session and its prepared statements between jobs: the pool's
        // default reset on return (COM_RESET_CONNECTION, the session set-up again, every
        // statement prepared anew) cost five round trips a call. Nothing of a job outlives it:
        // every job ends its transaction, and only the set-up above sets the session.
        let opts: Opts = builder
            .init(session_setup(read_only, mariadb, timeout))
            .pool_opts(
                PoolOpts::default()
                    .with_constraints(constraints)
                    .with_reset_connection(false)
                    .with_check_health(false),
            )
            .into();
        let pool = mysql::Pool::new(opts).map_err(|e| connect_error(url, &e))?;
        Ok(Pool {
            pool,
            plain: Arc::new(plain),
            read_only,
            watchdog: Watchdog::start("mysql-watchdog"),
            died: Mutex::new(None),
            used: Mutex::new(HashMap::new()),
            rehearsal: false,
        })
    }

    /// A pooled connection that answers. One used within [`IDLE_CHECK`] and not before a
    /// connection was last found dead is taken as it is; any other is pinged first, and one
    /// that does not answer leaves the pool (the driver's own ping on every checkout cost a
    /// round trip a call).
    fn checkout(&self) -> Result<mysql::PooledConn, Failure> {
        let unavailable = |message: String| Failure {
            kind: ErrorKind::Other,
            message,
            constraint: String::new(),
        };
        for _ in 0..=MAX_CONNECTIONS {
            let mut conn = self.pool.try_get_conn(CHECKOUT_TIMEOUT).map_err(|e| {
                unavailable(format!("no MariaDB/MySQL connection: {}", describe(&e)))
            })?;
            let id = conn.connection_id();
            let now = Instant::now();
            let used = lock(&self.used).insert(id, now);
            let died = *lock(&self.died);
            let suspect = died.is_some_and(|d| used.is_none_or(|u| u <= d));
            let fresh = used.is_some_and(|u| now - u < IDLE_CHECK) && !suspect;
            if fresh || conn.as_mut().ping().is_ok() {
                return Ok(conn);
            }
            self.close(conn);
        }
        Err(unavailable(
            "no MariaDB/MySQL connection answers".to_string(),
        ))
    }

    /// The columns `text` returns, from preparing it (nothing runs). MariaDB describes a
    /// RETURNING clause's columns only when the statement runs: the same list selected from
    /// the target table has them.
    fn prepared_columns(&self, text: &str) -> Result<Arc<[mysql::Column]>, String> {
        let mut conn = self.checkout().map_err(|f| f.message)?;
        // MariaDB refuses even to prepare a change in a READ ONLY session: a read-only
        // server's connection is READ WRITE for the PREPARE alone, and a connection that
        // cannot be made READ ONLY again is closed instead of going back to the pool.
        if self.read_only {
            conn.query_drop("SET SESSION TRANSACTION READ WRITE")
                .map_err(|e| describe(&e))?;
        }
        let prepared = (|| {
            let columns = conn.prep(text).map_err(|e| describe(&e))?.columns();
            match returning_probe(text) {
                Some(probe) if columns.is_empty() => {
                    Ok(conn.prep(&probe).map_err(|e| describe(&e))?.columns())
                }
                _ => Ok(columns),
            }
        })();
        if self.read_only
            && let Err(e) = conn.query_drop("SET SESSION TRANSACTION READ ONLY")
        {
            drop(conn.unwrap());
            return Err(describe(&e));
        }
        prepared
    }

    /// Closes `conn` instead of putting it back in the pool, and forgets when it was used.
    fn close(&self, conn: mysql::PooledConn) {
        lock(&self.used).remove(&conn.connection_id());
        drop(conn.unwrap());
    }

    /// Runs `f` on a pooled connection.
    fn with<T>(
        &self,
        f: impl FnOnce(&mut mysql::PooledConn) -> Result<T, String>,
    ) -> Result<T, String> {
        let mut conn = self.checkout().map_err(|f| f.message)?;
        f(&mut conn)
    }
}

/// `m`, locked; a panic elsewhere does not poison what it guards here.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// `KILL QUERY` for one connection's running statement, sent on a connection of its own.
struct KillQuery {
    opts: Arc<Opts>,
    id: u32,
    /// Set once a kill is on its way: the connection is then closed after its job instead of
    /// going back to the pool, since a kill that arrives late would stop the next job's
    /// statement.
    due: Arc<AtomicBool>,
}

impl Cancel for KillQuery {
    fn cancel(&self) {
        let killed = mysql::Conn::new((*self.opts).clone())
            .and_then(|mut c| c.query_drop(format!("KILL QUERY {}", self.id)));
        if let Err(e) = killed {
            tracing::warn!(error = %describe(&e), "stopping a statement failed");
        }
    }

    fn due(&self) {
        self.due.store(true, Ordering::SeqCst);
    }
}

impl Backend for Pool {
    fn dialect(&self) -> &'static sqlscan::Dialect {
        &sqlscan::MYSQL
    }

    fn run(&self, kind: JobKind, stop: &Stop, work: Work<'_>) -> Option<Result<(), JobError>> {
        if kind.writes && self.read_only {
            return None;
        }
        let (mut retried, mut conflicts) = (false, 0);
        loop {
            let mut conn = match self.checkout() {
                Ok(c) => c,
                Err(e) => return Some(Err(JobError::Failed(e))),
            };
            let killed = Arc::new(AtomicBool::new(false));
            let kill: Arc<dyn Cancel> = Arc::new(KillQuery {
                opts: self.plain.clone(),
                id: conn.connection_id(),
                due: killed.clone(),
            });
            let mut session = MySession {
                conn: &mut conn,
                conflict: false,
                died: false,
            };
            let out = {
                let _watch = self.watchdog.watch(stop, &kill);
                // A rehearsal wraps every write in a transaction, so that it can be rolled back.
                let transaction = kind.transaction || (kind.writes && self.rehearsal);
                super::in_transaction(&mut session, kind.writes, transaction, self.rehearsal, work)
            };
            let (conflict, died) = (session.conflict, session.died);
            if killed.load(Ordering::SeqCst) {
                self.close(conn);
            }
            if out.is_err() && conflict && conflicts < CONFLICT_RETRIES && !stop.now() {
                conflicts += 1;
                continue;
            }
            if out.is_err() && died {
                *lock(&self.died) = Some(Instant::now());
                if !kind.writes && !retried {
                    retried = true;
                    continue;
                }
            }
            return Some(out);
        }
    }

    fn columns(&self, sql: Sql<'_>) -> Result<Vec<Column>, String> {
        self.describe(sql).map(|d| d.columns)
    }

    fn describe(&self, sql: Sql<'_>) -> Result<Described, String> {
        let (text, _) = placed(sql);
        let columns = self.prepared_columns(&text)?;
        let unreadable: Vec<String> = columns
            .iter()
            .filter(|c| reads_as(c).is_empty())
            .map(|c| format!("`{}` is {}", c.name_str(), type_name(c)))
            .collect();
        if !unreadable.is_empty() {
            return Err(format!(
                "column {} of a type mcpspec does not read; cast it to text, a number or JSON text in the query",
                unreadable.join(", ")
            ));
        }
        let columns = columns
            .iter()
            .map(|c| Column {
                name: c.name_str().into_owned(),
                typed: Some((type_name(c), reads_as(c))),
                nullable_from: nullable_from(c),
            })
            .collect();
        Ok(Described {
            columns,
            params: Vec::new(),
        })
    }

    fn tables(&self) -> Result<Vec<String>, String> {
        self.with(|conn| tables(conn).map_err(|e| describe(&e)))
    }

    fn table_columns(&self, table: &str) -> Result<Vec<TableColumn>, String> {
        self.with(|conn| {
            let rows: Vec<(String, String, bool)> = conn
                .exec(
                    "SELECT column_name, column_type,
                            is_nullable = 'NO' AND column_default IS NULL
                              AND extra NOT LIKE '%auto_increment%' AND extra NOT LIKE '%GENERATED%'
                     FROM information_schema.columns
                     WHERE table_schema = DATABASE() AND table_name = ?
                     ORDER BY ordinal_position",
                    (table,),
                )
                .map_err(|e| describe(&e))?;
            Ok(rows
                .into_iter()
                .map(|(name, ty, required)| TableColumn { name, ty, required })
                .collect())
        })
    }

    fn rehearse(&mut self) {
        self.rehearsal = true;
    }

    fn is_read_only(&self) -> bool {
        self.read_only
    }

    fn at_once(&self, _writes: bool) -> Option<usize> {
        Some(MAX_CONNECTIONS)
    }

    fn team(&self) -> Option<&'static super::Team> {
        Some(&TEAM)
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// `sql`'s text with `?` placeholders and the name bound to each, in order: as the build
/// wrote it, or rewritten here from named parameters (`:name`).
fn placed(sql: Sql<'_>) -> (std::borrow::Cow<'_, str>, Vec<String>) {
    match sql.params {
        Some(p) => (sql.text.into(), p.iter().map(|s| s.to_string()).collect()),
        None => {
            let p = sqlscan::MYSQL.place(sql.text);
            (p.text.into(), p.names)
        }
    }
}

/// `SELECT <list> FROM <table>` for a statement that ends in `RETURNING <list>`: its target
/// table (`INSERT INTO t`, `REPLACE INTO t`, `DELETE FROM t`) with the same list, which
/// prepares with the columns the statement returns.
fn returning_probe(text: &str) -> Option<String> {
    let upper = text.to_ascii_uppercase();
    let word_at = |word: &str| -> Vec<usize> {
        sqlscan::code(text)
            .into_iter()
            .flat_map(|r| {
                let hay = &upper[r.clone()];
                hay.match_indices(word)
                    .map(move |(i, _)| r.start + i)
                    .collect::<Vec<_>>()
            })
            .filter(|&i| {
                let before = upper[..i].chars().next_back();
                let after = upper[i + word.len()..].chars().next();
                let edge = |c: Option<char>| c.is_none_or(|c| !(c.is_alphanumeric() || c == '_'));
                edge(before) && edge(after)
            })
            .collect()
    };
    let at = *word_at("RETURNING").last()?;
    let list = text[at + "RETURNING".len()..].trim().trim_end_matches(';');
    let into = ["INTO", "FROM"]
        .iter()
        .filter_map(|w| word_at(w).first().copied().map(|i| i + w.len()))
        .min()?;
    let table = text[into..]
        .split(|c: char| c.is_whitespace() || c == '(')
        .find(|w| !w.is_empty())?;
    Some(format!("SELECT {list} FROM {table}"))
}

/// The column's type in SQL's words (`INT`, `VARCHAR`, `TEXT`, `BLOB`, ...), for messages;
/// the protocol's own name where SQL has no other.
fn type_name(c: &mysql::Column) -> String {
    let name = format!("{:?}", c.column_type());
    let protocol = name.strip_prefix("MYSQL_TYPE_").unwrap_or(&name);
    let blob = protocol.ends_with("BLOB");
    let sql = match protocol {
        "TINY" => "TINYINT",
        "SHORT" => "SMALLINT",
        "INT24" => "MEDIUMINT",
        "LONG" => "INT",
        "LONGLONG" => "BIGINT",
        "NEWDECIMAL" => "DECIMAL",
        "VAR_STRING" => "VARCHAR",
        "STRING" => "CHAR",
        "NEWDATE" => "DATE",
        _ if blob && is_binary(c) => "BLOB",
        _ if blob => "TEXT",
        other => other,
    };
    sql.to_string()
}

/// What a column reads as, by its type.
fn reads_as(c: &mysql::Column) -> &'static [&'static str] {
    let name = format!("{:?}", c.column_type());
    let name = name.strip_prefix("MYSQL_TYPE_").unwrap_or(&name);
    sqlscan::MYSQL.reads_as.map_or(&[], |f| f(name))
}

/// Whether a string column holds bytes rather than text (the binary character set, 63, which
/// numbers and dates report too).
fn is_binary(c: &mysql::Column) -> bool {
    use mysql::consts::ColumnType as T;
    c.character_set() == 63
        && matches!(
            c.column_type(),
            T::MYSQL_TYPE_VARCHAR
                | T::MYSQL_TYPE_VAR_STRING
                | T::MYSQL_TYPE_STRING
                | T::MYSQL_TYPE_BLOB
                | T::MYSQL_TYPE_TINY_BLOB
                | T::MYSQL_TYPE_MEDIUM_BLOB
                | T::MYSQL_TYPE_LONG_BLOB
        )
}

/// `table.column` when the column reads a table column that may be NULL.
fn nullable_from(c: &mysql::Column) -> Option<String> {
    let table = c.org_table_str();
    let name = c.org_name_str();
    let not_null = c
        .flags()
        .contains(mysql::consts::ColumnFlags::NOT_NULL_FLAG);
    (!not_null && !table.is_empty() && !name.is_empty()).then(|| format!("{table}.{name}"))
}

/// The tables of the connection's database.
fn tables(conn: &mut impl Queryable) -> Result<Vec<String>, mysql::Error> {
    conn.query(
        "SELECT table_name FROM information_schema.tables
         WHERE table_schema = DATABASE() AND table_type = 'BASE TABLE' ORDER BY table_name",
    )
}

/// Whether `e` says the connection itself is gone: the socket failed, or the server said so
/// (1927 killed, 1053 shutting down, 4031 closed for inactivity, 2006/2013 gone away).
fn connection_died(e: &mysql::Error) -> bool {
    match e {
        mysql::Error::IoError(_) | mysql::Error::CodecError(_) | mysql::Error::DriverError(_) => {
            true
        }
        mysql::Error::MySqlError(m) => matches!(m.code, 1927 | 1053 | 4031 | 2006 | 2013),
        _ => false,
    }
}

/// A job's connection.
struct MySession<'c> {
    conn: &'c mut mysql::PooledConn,
    /// Whether the last failure was a deadlock or lock wait timeout, to run the job again.
    conflict: bool,
    /// Whether the last failure was the connection's own (it died).
    died: bool,
}

impl MySession<'_> {
    fn failed(&mut self, e: &mysql::Error) -> Failure {
        let code = server_code(e);
        self.conflict = matches!(code, Some(1213 | 1205));
        self.died = connection_died(e);
        failure(e)
    }

    fn values(names: &[String], bind: Bind<'_>) -> Vec<mysql::Value> {
        names
            .iter()
            .map(|n| match bind(n) {
                Value::Null => mysql::Value::NULL,
                Value::Integer(i) => mysql::Value::Int(i),
                Value::Real(f) => mysql::Value::Double(f),
                Value::Text(s) => mysql::Value::Bytes(s.into_bytes()),
                Value::Blob(b) => mysql::Value::Bytes(b),
                // MariaDB's VECTOR takes the little-endian float32 bytes.
                Value::Vector(v) => mysql::Value::Bytes(Value::vector_bytes(&v)),
            })
            .collect()
    }
}

impl Session for MySession<'_> {
    fn dialect(&self) -> &'static sqlscan::Dialect {
        &sqlscan::MYSQL
    }

    fn execute(&mut self, sql: Sql<'_>, bind: Bind<'_>) -> Result<Changes, Failure> {
        let (text, names) = placed(sql);
        let values = Self::values(&names, bind);
        let run = |conn: &mut mysql::PooledConn| -> Result<Changes, mysql::Error> {
            let st = conn.prep(text.as_ref())?;
            let result = conn.exec_iter(&st, mysql::Params::Positional(values))?;
            let changes = Changes {
                changes: result.affected_rows(),
                last_insert_id: result
                    .last_insert_id()
                    .and_then(|n| i64::try_from(n).ok())
                    .unwrap_or(0),
            };
            drop(result);
            Ok(changes)
        };
        run(self.conn).map_err(|e| self.failed(&e))
    }

    fn query(
        &mut self,
        sql: Sql<'_>,
        bind: Bind<'_>,
        each: &mut dyn FnMut(&dyn Row) -> bool,
    ) -> Result<(), Failure> {
        let (text, names) = placed(sql);
        let values = Self::values(&names, bind);
        let run = |conn: &mut mysql::PooledConn| -> Result<(), mysql::Error> {
            let st = conn.prep(text.as_ref())?;
            let result = conn.exec_iter(&st, mysql::Params::Positional(values))?;
            let mut wanted = true;
            // The rest of the rows are read and dropped, so the connection is clean.
            for row in result {
                let row = row?;
                if wanted {
                    // The row's own columns: MariaDB describes a RETURNING clause's columns
                    // only when the statement runs.
                    let columns = row.columns();
                    wanted = each(&MyRow::new(row, &columns));
                }
            }
            Ok(())
        };
        run(self.conn).map_err(|e| self.failed(&e))
    }

    /// Several reads see one snapshot; writes take row locks as their statements run.
    fn begin(&mut self, writes: bool) -> Result<(), Failure> {
        let begin = if writes {
            "START TRANSACTION"
        } else {
            "START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY"
        };
        self.conn.query_drop(begin).map_err(|e| self.failed(&e))
    }

    fn end(&mut self, commit: bool) -> Result<(), Failure> {
        let end = if commit { "COMMIT" } else { "ROLLBACK" };
        self.conn.query_drop(end).map_err(|e| {
            let _ = self.conn.query_drop("ROLLBACK");
            self.failed(&e)
        })
    }
}

/// A row, its dates and times already written as text and its decimals as numbers.
struct MyRow<'c> {
    values: Vec<mysql::Value>,
    columns: &'c [mysql::Column],
}

impl<'c> MyRow<'c> {
    fn new(row: mysql::Row, columns: &'c [mysql::Column]) -> MyRow<'c> {
        let values = row
            .unwrap()
            .into_iter()
            .zip(columns)
            .map(|(v, c)| normalised(v, c))
            .collect();
        MyRow { values, columns }
    }
}

/// A value as the seam reads it: dates and times as ISO text, decimals as numbers.
fn normalised(v: mysql::Value, c: &mysql::Column) -> mysql::Value {
    use mysql::consts::ColumnType as T;
    match v {
        mysql::Value::Date(y, mo, d, h, mi, s, us) => {
            let text = if c.column_type() == T::MYSQL_TYPE_DATE {
                format!("{y:04}-{mo:02}-{d:02}")
            } else {
                format!(
                    "{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{:03}Z",
                    us / 1000
                )
            };
            mysql::Value::Bytes(text.into_bytes())
        }
        mysql::Value::Time(neg, days, h, mi, s, us) => {
            let hours = u64::from(days) * 24 + u64::from(h);
            let sign = if neg { "-" } else { "" };
            let text = format!("{sign}{hours:02}:{mi:02}:{s:02}.{:03}", us / 1000);
            mysql::Value::Bytes(text.into_bytes())
        }
        mysql::Value::Bytes(b)
            if matches!(
                c.column_type(),
                T::MYSQL_TYPE_NEWDECIMAL | T::MYSQL_TYPE_DECIMAL
            ) =>
        {
            std::str::from_utf8(&b)
                .ok()
                .and_then(|s| s.parse::<f64>().ok())
                .map_or(mysql::Value::Bytes(b), mysql::Value::Double)
        }
        other => other,
    }
}

impl Row for MyRow<'_> {
    fn value(&self, i: usize) -> ValueRef<'_> {
        let binary = self.columns.get(i).is_some_and(is_binary);
        match self.values.get(i) {
            None | Some(mysql::Value::NULL) => ValueRef::Null,
            Some(mysql::Value::Int(n)) => ValueRef::Integer(*n),
            Some(mysql::Value::UInt(n)) => {
                i64::try_from(*n).map_or(ValueRef::Real(*n as f64), ValueRef::Integer)
            }
            Some(mysql::Value::Float(f)) => ValueRef::Real(f64::from(*f)),
            Some(mysql::Value::Double(f)) => ValueRef::Real(*f),
            Some(mysql::Value::Bytes(b)) if binary => ValueRef::Blob(b),
            Some(mysql::Value::Bytes(b)) => ValueRef::Text(b),
            Some(mysql::Value::Date(..) | mysql::Value::Time(..)) => ValueRef::Null,
        }
    }

    fn names(&self) -> Vec<&str> {
        self.columns
            .iter()
            .map(|c| std::str::from_utf8(c.name_ref()).unwrap_or_default())
            .collect()
    }
}

/// The server's error code, where the server sent one.
fn server_code(e: &mysql::Error) -> Option<u16> {
    match e {
        mysql::Error::MySqlError(m) => Some(m.code),
        _ => None,
    }
}

/// The seam's kind of a driver error.
pub(crate) fn error_kind(e: &mysql::Error) -> ErrorKind {
    match server_code(e) {
        // Duplicate key, foreign keys, NOT NULL, CHECK.
        Some(1062 | 1451 | 1452 | 1216 | 1217 | 1048 | 1364 | 3819 | 4025) => ErrorKind::Constraint,
        Some(1213 | 1205) => ErrorKind::Busy,
        Some(1290 | 1792 | 1836) => ErrorKind::ReadOnly,
        // KILL QUERY, MySQL's max_execution_time, MariaDB's max_statement_time.
        Some(1317 | 3024 | 1969) => ErrorKind::Interrupted,
        _ => ErrorKind::Other,
    }
}

/// What a constraint failure says, in SQLite's words and without table or column names, so
/// that every engine gives one error.
fn constraint_detail(code: u16) -> &'static str {
    match code {
        1062 => "unique constraint failed",
        1048 | 1364 => "not null constraint failed",
        1451 | 1452 | 1216 | 1217 => "foreign key constraint failed",
        3819 | 4025 => "check constraint failed",
        _ => "constraint failed",
    }
}

/// A backend-neutral failure from a driver error.
pub(crate) fn failure(e: &mysql::Error) -> Failure {
    let kind = error_kind(e);
    Failure {
        kind,
        message: describe(e),
        constraint: match (kind, server_code(e)) {
            (ErrorKind::Constraint, Some(code)) => constraint_detail(code).to_string(),
            _ => String::new(),
        },
    }
}

/// The server's words for an error, with its code; never the URL or a password.
pub fn describe(e: &mysql::Error) -> String {
    match e {
        mysql::Error::MySqlError(m) => format!("{} ({})", m.message, m.code),
        mysql::Error::UrlError(u) => format!("the URL: {u}"),
        mysql::Error::DriverError(d) => super::redact(&d.to_string()),
        mysql::Error::IoError(io) => super::redact(&io.to_string()),
        other => super::redact(&other.to_string()),
    }
}

/// One connection to the database at `url`, outside the pool, in the pool's
/// [`SESSION_MODES`]: for `init` and migrations.
fn one_connection(url: &str) -> Result<mysql::Conn, OpenError> {
    let opts: Opts = base_opts(url)?.init(SESSION_MODES.to_vec()).into();
    mysql::Conn::new(opts).map_err(|e| connect_error(url, &e))
}

/// Creates the schema (and the sample rows when asked) in the empty database at `url`. DDL
/// commits as it goes in MariaDB and MySQL, so a schema or sample that fails half-way is
/// undone by dropping every table made: the database was empty before, and is again.
pub(crate) fn init(url: &str, schema: &str, sample: Option<&str>) -> Result<(), OpenError> {
    let mut conn = one_connection(url)?;
    let create = |e: &mysql::Error| OpenError::Create {
        path: format!("the schema at {}", super::redact(url)),
        reason: describe(e),
    };
    let existing = tables(&mut conn).map_err(|e| create(&e))?;
    if !existing.is_empty() {
        return Err(OpenError::NotEmpty {
            path: super::redact(url),
            tables: existing.join(", "),
        });
    }
    let made = conn.query_drop(schema).and_then(|()| match sample {
        Some(rows) => conn
            .query_drop("START TRANSACTION")
            .and_then(|()| conn.query_drop(rows))
            .and_then(|()| conn.query_drop("COMMIT")),
        None => Ok(()),
    });
    if let Err(e) = made {
        let _ = conn.query_drop("ROLLBACK");
        undo(&mut conn);
        return Err(create(&e));
    }
    Ok(())
}

/// Drops every table of the connection's database, foreign keys aside.
fn undo(conn: &mut mysql::Conn) {
    let Ok(made) = tables(conn) else { return };
    if made.is_empty() {
        return;
    }
    let names: Vec<String> = made
        .iter()
        .map(|t| format!("`{}`", t.replace('`', "``")))
        .collect();
    let _ = conn.query_drop(format!(
        "SET FOREIGN_KEY_CHECKS = 0; DROP TABLE IF EXISTS {}; SET FOREIGN_KEY_CHECKS = 1",
        names.join(", ")
    ));
}

/// mcpspec's tables for a team of replicas (see [`super::Team`]): the DDL and the state insert
/// in this dialect, the rest shared.
static TEAM: super::Team = super::Team {
    ddl: &[
        "CREATE TABLE IF NOT EXISTS mcpspec_request_states (nonce VARCHAR(64) PRIMARY KEY, expires_at BIGINT NOT NULL) ENGINE = InnoDB",
        "CREATE TABLE IF NOT EXISTS mcpspec_tasks (id VARCHAR(64) PRIMARY KEY, replica VARCHAR(64) NOT NULL, owner TEXT, status VARCHAR(16) NOT NULL, cancel_requested BOOLEAN NOT NULL DEFAULT FALSE, detail LONGTEXT NOT NULL, beat_at BIGINT NOT NULL, expires_at BIGINT NOT NULL) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4",
    ],
    added: super::team::ADDED,
    states: super::SharedStates {
        insert: Sql {
            text: "INSERT IGNORE INTO mcpspec_request_states (nonce, expires_at) VALUES (:nonce, :expires)",
            params: None,
            name: "",
        },
        cleanup: super::team::STATES_CLEANUP,
    },
    tasks: super::team::SHARED_TASKS,
};

const MIGRATIONS_DDL: &str = "CREATE TABLE mcpspec_migrations (\n  version INT PRIMARY KEY,\n  name VARCHAR(200) NOT NULL,\n  checksum CHAR(64) NOT NULL,\n  applied_at DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3)\n) ENGINE = InnoDB";

/// MariaDB's and MySQL's side of migrating: DDL commits as it goes, so a run holds a named
/// lock (`GET_LOCK`, per database) instead of a transaction, and each migration is recorded
/// as soon as it ran.
struct MysqlMigrator {
    conn: mysql::Conn,
    lock: String,
}

fn open_migrator(
    location: &super::Location,
    _write: bool,
) -> Result<Box<dyn super::migrate::Migrator>, OpenError> {
    let url = url_of(location)?;
    let mut conn = one_connection(url)?;
    let db: Option<String> = conn
        .query_first("SELECT DATABASE()")
        .map_err(|e| connect_error(url, &e))?
        .flatten();
    Ok(Box::new(MysqlMigrator {
        conn,
        lock: format!("mcpspec_migrations {}", db.unwrap_or_default()),
    }))
}

impl super::migrate::Migrator for MysqlMigrator {
    fn found(&mut self) -> Result<super::migrate::Found, String> {
        use super::migrate::{Found, TABLE};
        let all = tables(&mut self.conn).map_err(|e| describe(&e))?;
        if !all.iter().any(|t| t == TABLE) {
            return Ok(Found::Unversioned(all));
        }
        // The version read as the widest integer and the texts as text whatever their
        // columns were changed to, so that a row changed by hand is said, not a panic.
        type Row = (Option<i64>, Option<String>, Option<String>);
        let rows: Vec<Row> = self
            .conn
            .query(
                "SELECT CAST(version AS SIGNED), CAST(name AS CHAR), CAST(checksum AS CHAR) FROM mcpspec_migrations ORDER BY version",
            )
            .map_err(|e| describe(&e))?;
        rows.into_iter()
            .map(|(version, name, checksum)| {
                let (name, checksum) = (name.unwrap_or_default(), checksum.unwrap_or_default());
                super::migrate::applied(version.unwrap_or(0), name, checksum)
            })
            .collect::<Result<_, _>>()
            .map(Found::Versioned)
    }

    fn lock(&mut self) -> Result<(), String> {
        let got: Option<Option<i64>> = self
            .conn
            .exec_first("SELECT GET_LOCK(?, 600)", (self.lock.as_str(),))
            .map_err(|e| describe(&e))?;
        match got.flatten() {
            Some(1) => Ok(()),
            _ => Err("another migration held the lock for 10 minutes".into()),
        }
    }

    fn finish(&mut self, _keep: bool) -> Result<(), String> {
        self.conn
            .exec_drop("DO RELEASE_LOCK(?)", (self.lock.as_str(),))
            .map_err(|e| describe(&e))
    }

    fn execute(&mut self, sql: &str) -> Result<(), String> {
        self.conn.query_drop(sql).map_err(|e| describe(&e))
    }

    fn table_ddl(&self) -> &'static str {
        MIGRATIONS_DDL
    }

    fn transactional(&self) -> bool {
        false
    }

    fn system_ddl(&self) -> &'static [&'static str] {
        TEAM.ddl
    }

    fn added_columns(&self) -> &'static [super::AddedColumn] {
        TEAM.added
    }

    fn has_column(&mut self, table: &str, column: &str) -> Result<bool, String> {
        let found: Option<u8> = self
            .conn
            .exec_first(
                "SELECT 1 FROM information_schema.columns WHERE table_schema = DATABASE() AND table_name = ? AND column_name = ?",
                (table, column),
            )
            .map_err(|e| describe(&e))?;
        Ok(found.is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An error as a MariaDB or MySQL server sends it, with its code.
    fn server_error(code: u16) -> mysql::Error {
        mysql::Error::MySqlError(mysql::MySqlError {
            state: "HY000".into(),
            message: format!("the server's words ({code})"),
            code,
        })
    }

    /// Each server code becomes the seam's kind and, for a constraint, the words every engine
    /// says it in; the message keeps the server's words and its code.
    #[test]
    fn server_codes_map_to_the_seams_kinds_and_words() {
        use ErrorKind::{Busy, Constraint, Interrupted, Other, ReadOnly};
        let cases = [
            (1062, Constraint, "unique constraint failed"),
            (1048, Constraint, "not null constraint failed"),
            (1364, Constraint, "not null constraint failed"),
            (1451, Constraint, "foreign key constraint failed"),
            (1452, Constraint, "foreign key constraint failed"),
            (1216, Constraint, "foreign key constraint failed"),
            (1217, Constraint, "foreign key constraint failed"),
            (3819, Constraint, "check constraint failed"),
            (4025, Constraint, "check constraint failed"),
            (1213, Busy, ""),
            (1205, Busy, ""),
            (1290, ReadOnly, ""),
            (1792, ReadOnly, ""),
            (1836, ReadOnly, ""),
            (1317, Interrupted, ""),
            (3024, Interrupted, ""),
            (1969, Interrupted, ""),
            (1064, Other, ""),
            (1146, Other, ""),
        ];
        for (code, kind, words) in cases {
            let f = failure(&server_error(code));
            assert_eq!((f.kind, f.constraint.as_str()), (kind, words), "{code}");
            assert_eq!(f.message, format!("the server's words ({code}) ({code})"));
        }
    }

    /// A driver error that is not the server's is `Other`, and says nothing of a password.
    #[test]
    fn a_drivers_own_error_is_other_and_names_no_password() {
        let e = mysql::Error::UrlError(mysql::UrlError::BadUrl);
        let f = failure(&e);
        assert_eq!((f.kind, f.constraint.as_str()), (ErrorKind::Other, ""));
        assert!(f.message.starts_with("the URL"), "{}", f.message);
    }
}
