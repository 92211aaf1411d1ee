//! The PostgreSQL implementation of the seam: a pool of connections (r2d2 over `pgsync`'s,
//! the `tokio-postgres` driver polled on the calling thread, so that a job runs on whichever
//! thread has it, an HTTP runtime worker included), each keeping its prepared statements;
//! writes in transactions; a watchdog that cancels a statement on the server at the deadline
//! or on a client's cancellation; SQLSTATE classes mapped to the seam's error kinds; TLS
//! through rustls when the server offers it or the URL requires it (`sslmode=require`).
//! `init`, migrations and `pm`'s database management use the `postgres` crate's own
//! connections. Nothing here prints a password or a statement.

use std::collections::HashMap;
use std::error::Error as StdError;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bytes::BytesMut;
use postgres::error::SqlState;
use postgres::types::{FromSql, IsNull, ToSql, Type, to_sql_checked};
use postgres::{Client, Statement};
use tokio_postgres_rustls::MakeRustlsConnect;

use super::IDLE_CHECK;
use super::pgsync;
use super::watchdog::{Cancel, Watchdog};
use super::{
    Backend, Bind, Changes, ErrorKind, Failure, JobError, JobKind, OpenError, Row, Session, Sql,
    Stop, Value, ValueRef, Work,
};

/// The most connections one server process opens.
pub(crate) const MAX_CONNECTIONS: u32 = 16;

/// How long a call waits for a free connection, or for a new one to open.
const CHECKOUT_TIMEOUT: Duration = Duration::from_secs(5);

/// How much longer than the call timeout PostgreSQL's `statement_timeout` is.
const STATEMENT_TIMEOUT_MARGIN: Duration = Duration::from_secs(1);

pub use sqlscan::{is_url, redact};

/// The driver's words for an error, with the server's message and detail where it sent them.
fn describe(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{} ({})", db.message(), db.code().code()),
        None => e.to_string(),
    }
}

/// Parses `url` into the driver's configuration, with the statement timeout and read-only
/// mode as session defaults so that the server enforces both.
fn config(
    url: &str,
    read_only: bool,
    timeout: Duration,
) -> Result<tokio_postgres::Config, OpenError> {
    let mut config: tokio_postgres::Config =
        url.parse().map_err(|e: postgres::Error| OpenError::Url {
            url: redact(url),
            title: sqlscan::POSTGRES.title,
            reason: e.to_string(),
        })?;
    // The watchdog cancels a job at its deadline; the server's own timeout is the backstop, a
    // second later, so that it never fails the start-up check or a job the watchdog has not
    // yet looked at when the call timeout is very short.
    let backstop = timeout + STATEMENT_TIMEOUT_MARGIN;
    let mut options = format!("-c statement_timeout={}", backstop.as_millis());
    if read_only {
        options.push_str(" -c default_transaction_read_only=on");
    }
    config.options(&options);
    config.application_name("mcpspec");
    config.connect_timeout(CHECKOUT_TIMEOUT);
    Ok(config)
}

/// The TLS connector: rustls, used when the server offers TLS (`sslmode=prefer`, the default)
/// or the URL requires it (`sslmode=require`). As with libpq's `require`, the connection is
/// encrypted and the handshake signed by the certificate's key, but the certificate is not
/// checked against a CA: the driver's URLs have no `verify-full`. Unix sockets never use TLS.
fn tls() -> MakeRustlsConnect {
    static TLS: std::sync::OnceLock<MakeRustlsConnect> = std::sync::OnceLock::new();
    TLS.get_or_init(|| {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .expect("ring supports the default TLS versions")
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(EncryptOnly(provider)))
            .with_no_client_auth();
        MakeRustlsConnect::new(config)
    })
    .clone()
}

/// Accepts the server's certificate as libpq's `sslmode=require` does, while still checking
/// that the handshake is signed by that certificate's key.
#[derive(Debug)]
struct EncryptOnly(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for EncryptOnly {
    fn verify_server_cert(
        &self,
        _end_entity: &rustls::pki_types::CertificateDer<'_>,
        _intermediates: &[rustls::pki_types::CertificateDer<'_>],
        _server_name: &rustls::pki_types::ServerName<'_>,
        _ocsp: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// One pooled connection with the statements it has prepared.
pub(crate) struct Conn {
    client: pgsync::Client,
    statements: HashMap<String, (Statement, Arc<[String]>)>,
    /// When a job last used it.
    used: std::time::Instant,
    /// Cancels what runs on it, from another thread.
    cancel: Arc<dyn Cancel>,
    /// A cancel request was sent for it (or is about to be): it is not used again.
    cancelled: Arc<std::sync::atomic::AtomicBool>,
    /// Whether the last job's failure was a serialization failure or a deadlock: its
    /// transaction was rolled back whole and may run again.
    conflict: bool,
}

/// Opens connections for the pool.
struct Manager {
    config: tokio_postgres::Config,
}

impl r2d2::ManageConnection for Manager {
    type Connection = Conn;
    type Error = pgsync::ConnectError;

    fn connect(&self) -> Result<Conn, pgsync::ConnectError> {
        let client = pgsync::Client::connect(&self.config, &tls())?;
        let cancelled = Arc::new(std::sync::atomic::AtomicBool::new(false));
        Ok(Conn {
            cancel: Arc::new(CancelPg {
                token: client.cancel_token(),
                due: Arc::clone(&cancelled),
            }),
            cancelled,
            client,
            statements: HashMap::new(),
            used: std::time::Instant::now(),
            conflict: false,
        })
    }

    fn is_valid(&self, conn: &mut Conn) -> Result<(), pgsync::ConnectError> {
        Ok(conn.client.simple_query("").map(|_| ())?)
    }

    /// A connection a cancel request was sent for is closed rather than kept: the request
    /// reaches the server later, and would stop whatever the connection's next job runs.
    fn has_broken(&self, conn: &mut Conn) -> bool {
        conn.client.is_closed() || conn.cancelled.load(Ordering::SeqCst)
    }
}

/// Sends r2d2's own errors (failed reconnects) to the log rather than stderr's raw text.
#[derive(Debug)]
struct LogErrors;

impl r2d2::HandleError<pgsync::ConnectError> for LogErrors {
    fn handle_error(&self, error: pgsync::ConnectError) {
        tracing::warn!(error = %describe_connect(&error), "opening a PostgreSQL connection failed");
    }
}

/// The words for a failed connection: the server's, or the socket's.
fn describe_connect(e: &pgsync::ConnectError) -> String {
    match e {
        pgsync::ConnectError::Pg(e) => describe(e),
        io => io.to_string(),
    }
}

/// PostgreSQL's cancel request for a connection's running statement.
struct CancelPg {
    token: pgsync::CancelToken,
    /// Shared with the connection, which the pool then closes (see `Manager::has_broken`).
    due: Arc<std::sync::atomic::AtomicBool>,
}

impl Cancel for CancelPg {
    fn cancel(&self) {
        if let Err(e) = self.token.cancel_query(&tls(), CHECKOUT_TIMEOUT) {
            tracing::warn!(error = %describe_connect(&e), "cancelling a statement failed");
        }
    }

    fn due(&self) {
        self.due.store(true, Ordering::SeqCst);
    }
}

/// A server's PostgreSQL database: the pool, and the watchdog that cancels statements.
pub(crate) struct Pool {
    /// Always `Some` but in `drop`.
    pool: Option<r2d2::Pool<Manager>>,
    read_only: bool,
    watchdog: Arc<Watchdog>,
    /// When a job last found its connection dead: connections last used before then are
    /// checked before a job gets them, since they most likely died with it.
    died: Mutex<Option<std::time::Instant>>,
    /// Every writing transaction is rolled back instead of committed (see
    /// [`super::Database::rehearse`]).
    rehearsal: bool,
}

impl Drop for Pool {
    /// The pool closes its connections on a thread of its own: closing one writes a last
    /// message to its server, which the thread that drops the engine (a runtime worker, when
    /// the server stops) should not wait for.
    fn drop(&mut self) {
        if let Some(pool) = self.pool.take() {
            let closing = std::thread::Builder::new()
                .name("pg-close".into())
                .spawn(move || drop(pool));
            if let Ok(t) = closing {
                let _ = t.join();
            }
        }
    }
}

impl Pool {
    fn pool(&self) -> &r2d2::Pool<Manager> {
        self.pool.as_ref().expect("the pool is open until dropped")
    }
}

impl Pool {
    /// Connects to `url` once, so that a wrong URL, password or database fails at start-up with
    /// the server's reason, and then opens the pool.
    pub fn open(url: &str, read_only: bool, timeout: Duration) -> Result<Pool, OpenError> {
        let config = config(url, read_only, timeout)?;
        let first = postgres::Config::from(config.clone())
            .connect(tls())
            .map_err(|e| connect_error(url, &e))?;
        drop(first);
        let pool = r2d2::Pool::builder()
            .max_size(MAX_CONNECTIONS)
            .min_idle(Some(1))
            .connection_timeout(CHECKOUT_TIMEOUT)
            // A broken connection is found when it fails, not with a round trip per call.
            .test_on_check_out(false)
            .error_handler(Box::new(LogErrors))
            .build_unchecked(Manager { config });
        Ok(Pool {
            pool: Some(pool),
            read_only,
            watchdog: Watchdog::start("pg-watchdog"),
            died: Mutex::new(None),
            rehearsal: false,
        })
    }

    /// From now on every write runs in a transaction that is rolled back.
    pub fn rehearse(&mut self) {
        self.rehearsal = true;
    }

    /// Runs `f` on a pooled connection.
    pub fn with<T>(&self, f: impl FnOnce(&mut Conn) -> Result<T, Failure>) -> Result<T, Failure> {
        let mut conn = self.pool().get().map_err(|e| Failure {
            kind: ErrorKind::Other,
            message: format!("no PostgreSQL connection: {e}"),
            constraint: String::new(),
        })?;
        f(&mut conn)
    }
}

/// How many times a job whose transaction hit a serialization failure or deadlock runs again.
const CONFLICT_RETRIES: u32 = 3;

/// PostgreSQL's side of the seam. A read that fails because its connection died (the server
/// restarted, say) runs once more on another connection; a write never runs twice, since its
/// commit may have landed before the connection went. A transaction PostgreSQL rolled back for
/// a serialization failure or deadlock runs again, up to `CONFLICT_RETRIES` times.
impl Backend for Pool {
    fn dialect(&self) -> &'static sqlscan::Dialect {
        &sqlscan::POSTGRES
    }

    fn run(&self, kind: JobKind, stop: &Stop, work: Work<'_>) -> Option<Result<(), JobError>> {
        if kind.writes && self.read_only {
            return None;
        }
        let mut retried = false;
        let mut conflicts = 0;
        loop {
            // Only a job that acts on waiting asks the pool whether it would wait.
            if stop.slow.is_some() && self.pool().state().idle_connections == 0 && !stop.waits() {
                // A job that gives way rather than wait stops as if interrupted.
                return Some(Err(JobError::Failed(Failure {
                    kind: ErrorKind::Interrupted,
                    message: "gave way rather than wait for a connection".into(),
                    constraint: String::new(),
                })));
            }
            let mut conn = match checkout(self) {
                Ok(c) => c,
                Err(e) => return Some(Err(JobError::Failed(e))),
            };
            conn.conflict = false;
            let out = {
                let _watch = self.watchdog.watch(stop, &conn.cancel);
                // A rehearsal wraps every write in a transaction, so that it can be rolled back.
                let transaction = kind.transaction || (kind.writes && self.rehearsal);
                let mut session = PgSession { conn: &mut conn };
                super::in_transaction(&mut session, kind.writes, transaction, self.rehearsal, work)
            };
            // A serialization failure or deadlock rolled the whole transaction back: run it
            // again, a few times, before reporting the database busy.
            if out.is_err() && conn.conflict && conflicts < CONFLICT_RETRIES && !stop.now() {
                conflicts += 1;
                conn.used = std::time::Instant::now();
                continue;
            }
            if out.is_err() && conn.client.is_closed() {
                *self.died.lock().unwrap_or_else(PoisonError::into_inner) =
                    Some(std::time::Instant::now());
                if !kind.writes && !retried {
                    retried = true;
                    continue;
                }
            }
            conn.used = std::time::Instant::now();
            return Some(out);
        }
    }

    fn columns(&self, sql: Sql<'_>) -> Result<Vec<super::Column>, String> {
        self.with(|conn| Ok(columns(conn, sql)))
            .unwrap_or_else(|f| Err(f.message))
    }

    fn describe(&self, sql: Sql<'_>) -> Result<super::Described, String> {
        self.with(|conn| Ok(describe_statement(conn, sql)))
            .unwrap_or_else(|f| Err(f.message))
    }

    fn tables(&self) -> Result<Vec<String>, String> {
        self.with(|conn| Ok(tables(&mut conn.client).map_err(|e| describe(&e))))
            .unwrap_or_else(|f| Err(f.message))
    }

    fn table_columns(&self, table: &str) -> Result<Vec<super::TableColumn>, String> {
        self.with(|conn| Ok(table_columns(&mut conn.client, table)))
            .unwrap_or_else(|f| Err(f.message))
    }

    fn rehearse(&mut self) {
        Pool::rehearse(self);
    }

    fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// Its connections need no runtime of their own (see `backend::pgsync`).
    fn runs_on_async_worker(&self) -> bool {
        true
    }

    /// The watchdog notices a stop within its interval (`watchdog::WATCH_INTERVAL`),
    /// and cancels the statement; a job that would wait for a connection notices at once.
    fn notices_slow(&self) -> bool {
        true
    }

    fn at_once(&self, _writes: bool) -> Option<usize> {
        usize::try_from(self.pool().max_size()).ok()
    }

    fn pool_use(&self) -> Option<super::PoolUse> {
        let state = self.pool().state();
        Some(super::PoolUse {
            open: state.connections,
            in_use: state.connections.saturating_sub(state.idle_connections),
            max: self.pool().max_size(),
        })
    }

    fn team(&self) -> Option<&'static super::Team> {
        Some(&TEAM)
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// The PostgreSQL engine: `postgres://` and `postgresql://` URLs.
pub(crate) const ENGINE: super::EngineEntry = super::EngineEntry {
    dialect: &sqlscan::POSTGRES,
    open: open_engine,
    create: create_engine,
    migrator: open_migrator,
};

/// The URL of a location, or why it has none.
fn url_of(location: &super::Location) -> Result<&str, OpenError> {
    match location {
        super::Location::Url(u, _) => Ok(u),
        super::Location::File(p) => Err(OpenError::Url {
            url: redact(&p.display().to_string()),
            title: sqlscan::POSTGRES.title,
            reason: "a file name, not a URL".into(),
        }),
    }
}

fn open_engine(t: &super::Target<'_>) -> Result<Box<dyn Backend>, OpenError> {
    let pool = Pool::open(url_of(t.location)?, t.how.read_only, t.timeout)?;
    Ok(Box::new(pool))
}

fn create_engine(c: &super::Creation<'_>) -> Result<bool, OpenError> {
    let (ddl, rows) = super::server_creation(c, &sqlscan::POSTGRES, MIGRATIONS_DDL, &TEAM)?;
    init(url_of(c.location)?, &ddl, rows)?;
    Ok(rows.is_some())
}

fn connect_error(url: &str, e: &postgres::Error) -> OpenError {
    OpenError::Connect {
        url: redact(url),
        title: sqlscan::POSTGRES.title,
        reason: describe(e),
    }
}

/// A connection for a job: one used recently, or one that answers a round trip. A connection
/// that does not answer is closed, so the pool drops it, and the next is tried.
fn checkout(pool: &Pool) -> Result<r2d2::PooledConnection<Manager>, Failure> {
    let unavailable = |message: String| Failure {
        kind: ErrorKind::Other,
        message,
        constraint: String::new(),
    };
    for _ in 0..=MAX_CONNECTIONS {
        let mut conn = pool
            .pool()
            .get()
            .map_err(|e| unavailable(format!("no PostgreSQL connection: {e}")))?;
        let suspect = pool
            .died
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some_and(|died| conn.used <= died);
        let fresh = conn.used.elapsed() < IDLE_CHECK && !suspect;
        if fresh || conn.client.is_valid(CHECKOUT_TIMEOUT).is_ok() {
            return Ok(conn);
        }
    }
    Err(unavailable("no PostgreSQL connection answers".to_string()))
}

/// A job's connection.
struct PgSession<'c> {
    conn: &'c mut Conn,
}

impl Conn {
    /// The seam's failure for a driver error, noting whether it was a conflict to retry.
    fn failed(&mut self, e: &postgres::Error) -> Failure {
        self.conflict = e.code().is_some_and(|c| {
            *c == SqlState::T_R_SERIALIZATION_FAILURE || *c == SqlState::T_R_DEADLOCK_DETECTED
        });
        failure(e)
    }

    /// The prepared statement for `sql` and the name of each of its parameters, prepared on
    /// first use. Named parameters are rewritten to PostgreSQL's `$n` here when the statement
    /// did not come rewritten from the build.
    fn prepare(&mut self, sql: Sql<'_>) -> Result<(Statement, Arc<[String]>), postgres::Error> {
        if let Some((st, names)) = self.statements.get(sql.text) {
            return Ok((st.clone(), names.clone()));
        }
        let (text, names): (std::borrow::Cow<'_, str>, Vec<String>) = match sql.params {
            Some(p) => (sql.text.into(), p.iter().map(|s| s.to_string()).collect()),
            None => {
                let numbered = sqlscan::positional(sql.text);
                (numbered.text.into(), numbered.names)
            }
        };
        let st = self.client.prepare(&text)?;
        let names: Arc<[String]> = names.into();
        if self.statements.len() >= 256 {
            self.statements.clear();
        }
        self.statements
            .insert(sql.text.to_string(), (st.clone(), names.clone()));
        Ok((st, names))
    }
}

/// The values for a statement's parameters, in order.
fn values(names: &[String], bind: Bind<'_>) -> Vec<Value> {
    names.iter().map(|n| bind(n)).collect()
}

impl Session for PgSession<'_> {
    fn dialect(&self) -> &'static sqlscan::Dialect {
        &sqlscan::POSTGRES
    }

    /// `set_config(..., true)` is `SET LOCAL`: the role and the claims end with the
    /// transaction, so a pooled connection keeps neither.
    fn act_as(&mut self, role: &str, setting: &str, claims: &str) -> Result<(), Failure> {
        const NAMES: &[&str] = &["role", "setting", "claims"];
        let sql = Sql {
            text: "SELECT set_config('role', $1, true), set_config($2, $3, true)",
            params: Some(NAMES),
            name: "",
        };
        let bind = |name: &str| match name {
            "role" => Value::Text(role.to_string()),
            "setting" => Value::Text(setting.to_string()),
            _ => Value::Text(claims.to_string()),
        };
        self.query(sql, &bind, &mut |_| true)
    }

    /// Several reads see one snapshot; writes run at the default isolation (read committed),
    /// with the write lock taken by each statement.
    fn begin(&mut self, writes: bool) -> Result<(), Failure> {
        let begin = if writes {
            "BEGIN"
        } else {
            "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
        };
        let conn = &mut *self.conn;
        conn.client
            .batch_execute(begin)
            .map_err(|e| conn.failed(&e))
    }

    fn end(&mut self, commit: bool) -> Result<(), Failure> {
        let end = if commit { "COMMIT" } else { "ROLLBACK" };
        let conn = &mut *self.conn;
        conn.client.batch_execute(end).map_err(|e| {
            let _ = conn.client.batch_execute("ROLLBACK");
            conn.failed(&e)
        })
    }

    fn execute(&mut self, sql: Sql<'_>, bind: Bind<'_>) -> Result<Changes, Failure> {
        let mut run = || -> Result<Changes, postgres::Error> {
            let (st, names) = self.conn.prepare(sql)?;
            let vals = values(&names, bind);
            let refs: Vec<&(dyn ToSql + Sync)> = vals.iter().map(|v| v as _).collect();
            let changes = self.conn.client.execute(&st, &refs)?;
            Ok(Changes {
                changes,
                last_insert_id: 0,
            })
        };
        run().map_err(|e| self.conn.failed(&e))
    }

    fn query(
        &mut self,
        sql: Sql<'_>,
        bind: Bind<'_>,
        each: &mut dyn FnMut(&dyn Row) -> bool,
    ) -> Result<(), Failure> {
        let mut run = || -> Result<(), postgres::Error> {
            let (st, names) = self.conn.prepare(sql)?;
            let vals = values(&names, bind);
            let mut wanted = true;
            self.conn
                .client
                .query_each(&st, vals.iter().map(|v| v as &dyn ToSql), &mut |row| {
                    if wanted && !each(&PgRow(row)) {
                        // The rest of the rows are read and dropped, so the connection is clean.
                        wanted = false;
                    }
                })
        };
        run().map_err(|e| self.conn.failed(&e))
    }
}

/// A row as the driver hands it over.
struct PgRow(postgres::Row);

/// A column's bytes as the server sent them, whatever its type.
struct Raw<'a>(&'a [u8]);

impl<'a> FromSql<'a> for Raw<'a> {
    fn from_sql(_: &Type, raw: &'a [u8]) -> Result<Self, Box<dyn StdError + Sync + Send>> {
        Ok(Raw(raw))
    }

    fn accepts(_: &Type) -> bool {
        true
    }
}

impl Row for PgRow {
    fn value(&self, i: usize) -> ValueRef<'_> {
        let ty = self.0.columns()[i].type_();
        let Ok(Some(Raw(raw))) = self.0.try_get::<_, Option<Raw<'_>>>(i) else {
            return ValueRef::Null;
        };
        let decoded = match *ty {
            Type::BOOL => bool::from_sql(ty, raw).map(|b| ValueRef::Integer(b.into())),
            Type::INT2 => i16::from_sql(ty, raw).map(|n| ValueRef::Integer(n.into())),
            Type::INT4 => i32::from_sql(ty, raw).map(|n| ValueRef::Integer(n.into())),
            Type::INT8 => i64::from_sql(ty, raw).map(ValueRef::Integer),
            Type::OID => u32::from_sql(ty, raw).map(|n| ValueRef::Integer(n.into())),
            Type::FLOAT4 => f32::from_sql(ty, raw).map(|f| ValueRef::Real(f.into())),
            Type::FLOAT8 => f64::from_sql(ty, raw).map(ValueRef::Real),
            Type::BYTEA => Ok(ValueRef::Blob(raw)),
            // jsonb's binary form is a version byte and the text.
            Type::JSONB => Ok(ValueRef::Text(raw.get(1..).unwrap_or_default())),
            // text, varchar, char, name, json and unknown are sent as their text.
            _ if readable_as_text(ty) => Ok(ValueRef::Text(raw)),
            _ => return ValueRef::Null,
        };
        decoded.unwrap_or(ValueRef::Null)
    }

    fn names(&self) -> Vec<&str> {
        self.0.columns().iter().map(|c| c.name()).collect()
    }
}

/// Whether the driver's binary form of `ty` is its text.
fn readable_as_text(ty: &Type) -> bool {
    matches!(
        *ty,
        Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME | Type::JSON | Type::UNKNOWN
    )
}

/// Whether a result column of type `ty` can be read at all; the start-up check names the
/// others and asks for a cast.
pub(crate) fn readable(ty: &Type) -> bool {
    !sqlscan::reads_as(ty.name()).is_empty()
}

type BoxError = Box<dyn StdError + Sync + Send>;

impl ToSql for Value {
    fn to_sql(&self, ty: &Type, out: &mut BytesMut) -> Result<IsNull, BoxError> {
        match self {
            Value::Null => Ok(IsNull::Yes),
            Value::Integer(n) => integer_to_sql(*n, ty, out),
            Value::Real(f) => match *ty {
                Type::FLOAT8 => f.to_sql(ty, out),
                Type::FLOAT4 => (*f as f32).to_sql(ty, out),
                _ => text_to_sql(&f.to_string(), ty, out),
            },
            Value::Text(s) => text_to_sql(s, ty, out),
            Value::Blob(b) => match *ty {
                Type::BYTEA => b.as_slice().to_sql(ty, out),
                _ => Err(format!("a binary value cannot be bound to a {ty} parameter").into()),
            },
            Value::Vector(v) => vector_to_sql(v, ty, out),
        }
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    to_sql_checked!();
}

/// A vector as pgvector's binary `vector` (its dimensions, a reserved word, then each float
/// big-endian), as text where the parameter is text, as float32 bytes where it is `bytea`.
fn vector_to_sql(v: &[f32], ty: &Type, out: &mut BytesMut) -> Result<IsNull, BoxError> {
    use bytes::BufMut as _;
    match *ty {
        _ if ty.name() == "vector" => {
            let dims = u16::try_from(v.len()).map_err(|_| {
                format!(
                    "a vector of {} dimensions is more than pgvector holds",
                    v.len()
                )
            })?;
            out.put_u16(dims);
            out.put_u16(0);
            for x in v {
                out.put_f32(*x);
            }
            Ok(IsNull::No)
        }
        Type::BYTEA => Value::vector_bytes(v).as_slice().to_sql(ty, out),
        _ => text_to_sql(&Value::vector_text(v), ty, out),
    }
}

fn integer_to_sql(n: i64, ty: &Type, out: &mut BytesMut) -> Result<IsNull, BoxError> {
    match *ty {
        Type::INT8 => n.to_sql(ty, out),
        Type::INT4 => i32::try_from(n)?.to_sql(ty, out),
        Type::INT2 => i16::try_from(n)?.to_sql(ty, out),
        Type::BOOL => (n != 0).to_sql(ty, out),
        Type::FLOAT8 => (n as f64).to_sql(ty, out),
        Type::FLOAT4 => (n as f32).to_sql(ty, out),
        _ => text_to_sql(&n.to_string(), ty, out),
    }
}

fn text_to_sql(s: &str, ty: &Type, out: &mut BytesMut) -> Result<IsNull, BoxError> {
    match *ty {
        Type::JSONB => {
            out.extend_from_slice(&[1]);
            out.extend_from_slice(s.as_bytes());
            Ok(IsNull::No)
        }
        Type::INT8 | Type::INT4 | Type::INT2 => integer_to_sql(s.trim().parse()?, ty, out),
        Type::FLOAT8 => s.trim().parse::<f64>()?.to_sql(ty, out),
        Type::BOOL => match s {
            "true" | "1" => true.to_sql(ty, out),
            "false" | "0" => false.to_sql(ty, out),
            _ => Err(format!("{s:?} is not a boolean").into()),
        },
        _ if readable_as_text(ty) => {
            out.extend_from_slice(s.as_bytes());
            Ok(IsNull::No)
        }
        _ => {
            Err(format!("a text value cannot be bound to a {ty} parameter; cast it in SQL").into())
        }
    }
}

/// The seam's kind of a driver error, from its SQLSTATE class.
pub(crate) fn error_kind(e: &postgres::Error) -> ErrorKind {
    e.code().map_or(ErrorKind::Other, kind_of)
}

/// The seam's kind of a SQLSTATE.
fn kind_of(code: &SqlState) -> ErrorKind {
    let c = code.code();
    if *code == SqlState::QUERY_CANCELED {
        ErrorKind::Interrupted
    } else if c.starts_with("23") {
        ErrorKind::Constraint
    } else if *code == SqlState::T_R_SERIALIZATION_FAILURE
        || *code == SqlState::T_R_DEADLOCK_DETECTED
        || *code == SqlState::LOCK_NOT_AVAILABLE
    {
        ErrorKind::Busy
    } else if *code == SqlState::READ_ONLY_SQL_TRANSACTION {
        ErrorKind::ReadOnly
    } else {
        ErrorKind::Other
    }
}

/// What a constraint failure says, in SQLite's words and without table or column names, so
/// that both engines give one error.
fn constraint_detail(code: &SqlState) -> &'static str {
    match code.code() {
        "23505" => "unique constraint failed",
        "23502" => "not null constraint failed",
        "23503" => "foreign key constraint failed",
        "23514" => "check constraint failed",
        _ => "constraint failed",
    }
}

/// A backend-neutral failure from a driver error.
pub(crate) fn failure(e: &postgres::Error) -> Failure {
    let kind = error_kind(e);
    Failure {
        kind,
        message: describe(e),
        constraint: match (kind, e.code()) {
            (ErrorKind::Constraint, Some(code)) => constraint_detail(code).to_string(),
            _ => String::new(),
        },
    }
}

/// Prepares `sql` and returns its columns' names, or what is wrong: the server's words when it
/// does not prepare, and the columns whose type mcpspec does not read.
pub(crate) fn columns(conn: &mut Conn, sql: Sql<'_>) -> Result<Vec<super::Column>, String> {
    let (st, _) = conn.prepare(sql).map_err(|e| describe(&e))?;
    let unreadable: Vec<String> = st
        .columns()
        .iter()
        .filter(|c| !readable(c.type_()))
        .map(|c| format!("`{}` is {}", c.name(), c.type_()))
        .collect();
    if !unreadable.is_empty() {
        return Err(format!(
            "column {} of a type mcpspec does not read; cast it to text, a number, boolean or json in the query",
            unreadable.join(", ")
        ));
    }
    Ok(st
        .columns()
        .iter()
        .map(|c| super::Column {
            name: c.name().to_string(),
            typed: Some((
                c.type_().name().to_string(),
                sqlscan::reads_as(c.type_().name()),
            )),
            nullable_from: None,
        })
        .collect())
}

/// [`columns`], with where each column may be NULL and the type of each parameter.
fn describe_statement(conn: &mut Conn, sql: Sql<'_>) -> Result<super::Described, String> {
    let mut columns = columns(conn, sql)?;
    let (st, _) = conn.prepare(sql).map_err(|e| describe(&e))?;
    for (column, c) in columns.iter_mut().zip(st.columns()) {
        if let (Some(table), Some(attnum)) = (c.table_oid(), c.column_id()) {
            column.nullable_from = nullable_source(&mut conn.client, table, attnum);
        }
    }
    let params = st
        .params()
        .iter()
        .map(|ty| super::ParamType {
            name: ty.name().to_string(),
            binds: binds(ty),
        })
        .collect();
    Ok(super::Described { columns, params })
}

/// `table.column` when that column of the live table may be NULL. A view's columns always
/// say they may be, whatever they read, so only tables count.
fn nullable_source(client: &mut pgsync::Client, table: u32, attnum: i16) -> Option<String> {
    let row = client
        .query_opt(
            "SELECT c.relname::text, a.attname::text, a.attnotnull
             FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
             WHERE a.attrelid = $1 AND a.attnum = $2 AND c.relkind IN ('r', 'p')",
            &[&table, &attnum],
        )
        .ok()??;
    let not_null: bool = row.get(2);
    (!not_null).then(|| format!("{}.{}", row.get::<_, String>(0), row.get::<_, String>(1)))
}

/// The JSON Schema types of an argument that binds to a parameter of type `ty`, as the
/// runtime binds it (text as text, numbers as numbers, arrays and objects as JSON text).
fn binds(ty: &Type) -> &'static [&'static str] {
    let text = matches!(
        *ty,
        Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME | Type::UNKNOWN
    );
    if text {
        return &["null", "string", "integer", "number", "array", "object"];
    }
    match *ty {
        Type::JSON | Type::JSONB => &["null", "string", "array", "object"],
        Type::INT2 | Type::INT4 | Type::INT8 => &["null", "integer", "boolean"],
        Type::FLOAT4 | Type::FLOAT8 => &["null", "integer", "number"],
        Type::BOOL => &["null", "integer", "boolean"],
        _ => &["null"],
    }
}

/// The columns of `table` in the current schema: their types, and which an INSERT must set.
fn table_columns(
    client: &mut pgsync::Client,
    table: &str,
) -> Result<Vec<super::TableColumn>, String> {
    let rows = client
        .query(
            "SELECT a.attname::text, format_type(a.atttypid, a.atttypmod),
                    a.attnotnull AND NOT a.atthasdef AND a.attidentity = '' AND a.attgenerated = ''
             FROM pg_attribute a
             WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped
             ORDER BY a.attnum",
            &[&table],
        )
        .map_err(|e| describe(&e))?;
    Ok(rows
        .iter()
        .map(|r| super::TableColumn {
            name: r.get(0),
            ty: r.get(1),
            required: r.get(2),
        })
        .collect())
}

/// A connection for work outside a server's pool (`pm`'s database management, `init`): TLS
/// as the pool's, and the driver's own errors.
pub fn connect(config: &postgres::Config) -> Result<Client, postgres::Error> {
    config.connect(tls())
}

/// Runs `f` on `client`, a connection made with [`connect`] outside a pool, under `stop`: the
/// session's `statement_timeout` is the time left (plus a second), and a watcher thread
/// sends the server a cancel request once `stop` says the job must stop (its deadline, or the
/// client's cancellation), so that no statement outlives its call.
pub fn bounded<T>(
    client: &mut Client,
    stop: &Stop,
    f: impl FnOnce(&mut Client) -> Result<T, postgres::Error>,
) -> Result<T, postgres::Error> {
    let left = stop
        .deadline()
        .saturating_duration_since(std::time::Instant::now());
    let ms = left.as_millis().saturating_add(1000).min(i32::MAX as u128);
    client.batch_execute(&format!("SET statement_timeout = {ms}"))?;
    let token = client.cancel_token();
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|scope| {
        let watcher = scope.spawn(|| {
            while !done.load(Ordering::SeqCst) {
                if stop.now() {
                    if let Err(e) = token.cancel_query(tls()) {
                        tracing::warn!(error = %describe(&e), "cancelling a statement failed");
                    }
                    return;
                }
                std::thread::park_timeout(super::watchdog::WATCH_INTERVAL);
            }
        });
        let out = f(client);
        done.store(true, Ordering::SeqCst);
        watcher.thread().unpark();
        out
    })
}

/// The server's words for a driver error, never the URL or a password.
pub fn message(e: &postgres::Error) -> String {
    describe(e)
}

/// The two connections `tables` reads the catalog through: a pooled one, and one of the
/// `postgres` crate's (`init`, migrations).
trait Catalog {
    fn rows(&mut self, sql: &str) -> Result<Vec<postgres::Row>, postgres::Error>;
}

impl Catalog for Client {
    fn rows(&mut self, sql: &str) -> Result<Vec<postgres::Row>, postgres::Error> {
        Client::query(self, sql, &[])
    }
}

impl Catalog for pgsync::Client {
    fn rows(&mut self, sql: &str) -> Result<Vec<postgres::Row>, postgres::Error> {
        pgsync::Client::query(self, sql, &[])
    }
}

/// The tables in the public schema of the database at `url`.
fn tables(client: &mut impl Catalog) -> Result<Vec<String>, postgres::Error> {
    Ok(client
        .rows(
            "SELECT table_name::text FROM information_schema.tables \
             WHERE table_schema = current_schema() ORDER BY 1",
        )?
        .iter()
        .map(|r| r.get(0))
        .collect())
}

/// Creates the schema (and the sample rows when asked) in the empty database at `url`, in one
/// transaction; a database that already has tables is refused.
pub(crate) fn init(url: &str, schema: &str, sample: Option<&str>) -> Result<(), OpenError> {
    let config = postgres::Config::from(config(url, false, Duration::from_secs(600))?);
    let mut client = config.connect(tls()).map_err(|e| connect_error(url, &e))?;
    let create = |e: postgres::Error| OpenError::Create {
        path: format!("the schema at {}", redact(url)),
        reason: describe(&e),
    };
    let existing = tables(&mut client).map_err(create)?;
    if !existing.is_empty() {
        return Err(OpenError::NotEmpty {
            path: redact(url),
            tables: existing.join(", "),
        });
    }
    let mut script = String::from("BEGIN;\n");
    script.push_str(schema);
    if let Some(s) = sample {
        script.push('\n');
        script.push_str(s);
    }
    script.push_str("\nCOMMIT;");
    client.batch_execute(&script).map_err(create)
}

/// mcpspec's tables for a team of replicas (see [`super::Team`]): the DDL and the state insert
/// in this dialect, the rest shared.
static TEAM: super::Team = super::Team {
    ddl: &[
        "CREATE TABLE IF NOT EXISTS mcpspec_request_states (nonce text PRIMARY KEY, expires_at bigint NOT NULL)",
        "CREATE TABLE IF NOT EXISTS mcpspec_tasks (id text PRIMARY KEY, replica text NOT NULL, owner text, status text NOT NULL, cancel_requested boolean NOT NULL DEFAULT false, detail text NOT NULL, beat_at bigint NOT NULL, expires_at bigint NOT NULL)",
    ],
    added: super::team::ADDED,
    states: super::SharedStates {
        insert: Sql {
            text: "INSERT INTO mcpspec_request_states (nonce, expires_at) VALUES (:nonce, :expires) ON CONFLICT (nonce) DO NOTHING",
            params: None,
            name: "",
        },
        cleanup: super::team::STATES_CLEANUP,
    },
    tasks: super::team::SHARED_TASKS,
};

const MIGRATIONS_DDL: &str = "CREATE TABLE mcpspec_migrations (\n  version integer PRIMARY KEY,\n  name text NOT NULL,\n  checksum text NOT NULL,\n  applied_at timestamptz NOT NULL DEFAULT now()\n)";

/// PostgreSQL's side of migrating: a run is one transaction that first takes a
/// transaction-scoped advisory lock keyed by the schema, so replicas starting together queue
/// on it and the later ones find the work done; DDL is transactional, so a failed run leaves
/// nothing behind.
struct PgMigrator {
    client: Client,
}

fn open_migrator(
    location: &super::Location,
    write: bool,
) -> Result<Box<dyn super::migrate::Migrator>, OpenError> {
    let url = url_of(location)?;
    let config = postgres::Config::from(config(url, !write, Duration::from_secs(600))?);
    let client = config.connect(tls()).map_err(|e| connect_error(url, &e))?;
    Ok(Box::new(PgMigrator { client }))
}

impl super::migrate::Migrator for PgMigrator {
    fn found(&mut self) -> Result<super::migrate::Found, String> {
        use super::migrate::{Found, TABLE};
        let all = tables(&mut self.client).map_err(|e| describe(&e))?;
        if !all.iter().any(|t| t == TABLE) {
            return Ok(Found::Unversioned(all));
        }
        let rows = self
            .client
            .query(
                "SELECT version::bigint, name::text, checksum::text FROM mcpspec_migrations ORDER BY version",
                &[],
            )
            .map_err(|e| describe(&e))?;
        rows.iter()
            .map(|r| {
                let text = |i| {
                    r.try_get::<_, Option<String>>(i)
                        .ok()
                        .flatten()
                        .unwrap_or_default()
                };
                let version = r.try_get::<_, Option<i64>>(0).ok().flatten().unwrap_or(0);
                super::migrate::applied(version, text(1), text(2))
            })
            .collect::<Result<_, _>>()
            .map(Found::Versioned)
    }

    fn lock(&mut self) -> Result<(), String> {
        self.client
            .batch_execute(
                "BEGIN; SELECT pg_advisory_xact_lock(hashtext('mcpspec_migrations ' || current_schema()))",
            )
            .map_err(|e| describe(&e))
    }

    fn finish(&mut self, keep: bool) -> Result<(), String> {
        self.client
            .batch_execute(if keep { "COMMIT" } else { "ROLLBACK" })
            .map_err(|e| describe(&e))
    }

    fn execute(&mut self, sql: &str) -> Result<(), String> {
        self.client.batch_execute(sql).map_err(|e| describe(&e))
    }

    fn table_ddl(&self) -> &'static str {
        MIGRATIONS_DDL
    }

    fn transactional(&self) -> bool {
        true
    }

    fn system_ddl(&self) -> &'static [&'static str] {
        TEAM.ddl
    }

    fn added_columns(&self) -> &'static [super::AddedColumn] {
        TEAM.added
    }

    fn has_column(&mut self, table: &str, column: &str) -> Result<bool, String> {
        self.client
            .query_opt(
                "SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = $1 AND column_name = $2",
                &[&table, &column],
            )
            .map(|row| row.is_some())
            .map_err(|e| describe(&e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each SQLSTATE becomes the seam's kind and, for a constraint, the words every engine
    /// says it in (SQLite's, without table or column names).
    #[test]
    fn sqlstates_map_to_the_seams_kinds_and_words() {
        use ErrorKind::{Busy, Constraint, Interrupted, Other, ReadOnly};
        let cases = [
            (
                SqlState::UNIQUE_VIOLATION,
                Constraint,
                "unique constraint failed",
            ),
            (
                SqlState::NOT_NULL_VIOLATION,
                Constraint,
                "not null constraint failed",
            ),
            (
                SqlState::FOREIGN_KEY_VIOLATION,
                Constraint,
                "foreign key constraint failed",
            ),
            (
                SqlState::CHECK_VIOLATION,
                Constraint,
                "check constraint failed",
            ),
            (
                SqlState::EXCLUSION_VIOLATION,
                Constraint,
                "constraint failed",
            ),
            (SqlState::T_R_SERIALIZATION_FAILURE, Busy, ""),
            (SqlState::T_R_DEADLOCK_DETECTED, Busy, ""),
            (SqlState::LOCK_NOT_AVAILABLE, Busy, ""),
            (SqlState::READ_ONLY_SQL_TRANSACTION, ReadOnly, ""),
            (SqlState::QUERY_CANCELED, Interrupted, ""),
            (SqlState::SYNTAX_ERROR, Other, ""),
            (SqlState::UNDEFINED_TABLE, Other, ""),
            (SqlState::INSUFFICIENT_PRIVILEGE, Other, ""),
        ];
        for (code, kind, words) in cases {
            assert_eq!(kind_of(&code), kind, "{}", code.code());
            if kind == Constraint {
                assert_eq!(constraint_detail(&code), words, "{}", code.code());
            }
        }
    }
}
