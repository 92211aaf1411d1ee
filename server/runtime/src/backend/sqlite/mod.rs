//! The SQLite engine (cargo feature `sqlite`): opening a file, creating it, and a small pool
//! with one writer and several readers so that reads do not queue behind writes; the
//! [`Backend`](crate::backend::Backend) over that pool, which a handler's typed accessor
//! (`handler::Context::sqlite`) reaches.

mod access;
pub(crate) mod migrator;
pub(crate) mod mirror;

pub use access::{ReadOnly, Sqlite};

use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, OptionalExtension};

use crate::backend::OpenError;
use crate::def::DatabaseDef;

/// How long a connection waits for a lock held by another connection or process.
pub(crate) const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// SQLite's own message for a failure, without rusqlite's wrapping; a statement a confined
/// connection refused says why.
pub(crate) use mcpspec_sqlite::confine::message as sqlite_message;

/// Whether this process runs a spec's SQL on its own (`init`, `migrate`, `check`, `test`):
/// then every connection it opens is confined (see [`mcpspec_sqlite::confine`]) once it is set up.
static CONFINED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Says that this process runs a spec's SQL on its own, to check it or to make a database from
/// it: from now on every connection refuses what could reach another file. `serve` does not
/// (a served spec is one its user chose); the command line says so for the other commands.
pub(crate) fn confine_every_connection() {
    CONFINED.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// Confines `conn` (files only; its own transactions allowed) when this process runs a spec's
/// SQL on its own ([`confine_every_connection`]).
pub(super) fn confined(mut conn: Connection) -> rusqlite::Result<Connection> {
    if CONFINED.load(std::sync::atomic::Ordering::Relaxed) {
        mcpspec_sqlite::confine::confine(&mut conn, mcpspec_sqlite::confine::Also::Nothing)?;
    }
    Ok(conn)
}

/// A scratch database in memory where a spec's DDL runs to learn what it makes: confined
/// whatever the process (see [`mcpspec_sqlite::confine`]), with `regexp()`.
pub(crate) fn scratch_connection() -> rusqlite::Result<Connection> {
    let conn = mcpspec_sqlite::confine::scratch()?;
    mcpspec_sqlite::regexp::register(&conn)?;
    Ok(conn)
}

/// A connection as every connection of the runtime is set up: `flags` (plus no mutex and
/// URI file names), the busy timeout, `regexp()`, a statement cache, and the query-planner
/// stability guarantee.
pub(super) fn open_plain(path: &Path, flags: OpenFlags) -> rusqlite::Result<Connection> {
    mcpspec_sqlite::setup();
    let flags = flags | OpenFlags::SQLITE_OPEN_NO_MUTEX | OpenFlags::SQLITE_OPEN_URI;
    let conn = Connection::open_with_flags(path, flags)?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    mcpspec_sqlite::regexp::register(&conn)?;
    conn.set_prepared_statement_cache_capacity(64);
    // The query-planner stability guarantee fixes each statement's plan when it is first
    // prepared. Without it SQLite re-plans a cached statement whenever its bindings change,
    // which was half of the instructions of a primary-key call (see BENCHMARKS.md).
    conn.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG,
        true,
    )?;
    Ok(conn)
}

fn open(path: &Path, read_only: bool) -> Result<Connection, OpenError> {
    let flags = if read_only {
        OpenFlags::SQLITE_OPEN_READ_ONLY
    } else {
        OpenFlags::SQLITE_OPEN_READ_WRITE
    };
    let err = |source: rusqlite::Error| OpenError::Open {
        path: path.display().to_string(),
        reason: source.to_string(),
    };
    let conn = open_plain(path, flags).map_err(err)?;
    ready(conn, read_only).map_err(err)
}

/// A connection checked to be a database, with a reader's smaller cache.
fn ready(conn: Connection, read_only: bool) -> rusqlite::Result<Connection> {
    if read_only {
        // Readers share the OS page cache; 1 MiB each instead of 2 keeps the footprint small.
        conn.pragma_update(None, "cache_size", -1024)?;
    }
    // A file that is not a database fails here rather than on the first call.
    conn.query_row("SELECT count(*) FROM sqlite_master", [], |_| Ok(()))?;
    Ok(conn)
}

/// Creates a database at `path` from the spec's schema, with its sample rows if asked. An
/// existing file is used only when it holds no tables yet; its data is never changed.
pub(crate) fn init(def: &DatabaseDef, path: &Path, sample: bool) -> Result<(), OpenError> {
    let create_err = |reason: String| OpenError::Create {
        path: path.display().to_string(),
        reason,
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| create_err(e.to_string()))?;
    }
    // A spec's schema writes nothing but this file, whoever wrote the spec.
    mcpspec_sqlite::setup();
    let conn = Connection::open(path)
        .and_then(|mut conn| {
            mcpspec_sqlite::regexp::register(&conn)?;
            mcpspec_sqlite::confine::confine(&mut conn, mcpspec_sqlite::confine::Also::Nothing)?;
            Ok(conn)
        })
        .map_err(|source| OpenError::Open {
            path: path.display().to_string(),
            reason: source.to_string(),
        })?;
    let tables: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")
        .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect())
        .map_err(|e| create_err(format!("not a SQLite database ({e})")))?;
    if !tables.is_empty() {
        return Err(OpenError::NotEmpty {
            path: path.display().to_string(),
            tables: tables.join(", "),
        });
    }
    // The file is mcpspec's own: its derived structures live in it (see `mirror`).
    let mut script = format!(
        "PRAGMA application_id = {};\nBEGIN;\n",
        mirror::APPLICATION_ID
    );
    let schema = crate::backend::migrate::creation_ddl(
        def,
        sqlscan::SQLITE.name,
        def.schema,
        migrator::table_ddl(),
    )
    .map_err(|e| create_err(e.to_string()))?;
    script.push_str(&schema);
    script.push('\n');
    script.push_str(def.derived);
    if sample && let Some(s) = def.sample {
        script.push('\n');
        script.push_str(s);
    }
    script.push_str("\nCOMMIT;");
    conn.execute_batch(&script)
        .map_err(|e| create_err(format!("the schema did not run: {}", sqlite_message(&e))))?;
    Ok(())
}

/// One writer connection and a few reader connections, handed out one call at a time.
pub(crate) struct Pool {
    path: std::path::PathBuf,
    /// Where the spec's derived structures live, when not in the database (see
    /// [`mirror`]).
    mirror: Option<std::sync::Arc<mirror::Mirror>>,
    /// The derived DDL still to apply in the database itself, when it belongs there.
    in_place: Option<&'static str>,
    /// Why the mirror could not be built, when it could not.
    unbuilt: Option<String>,
    // Boxed: the pool sits in `Database` beside PostgreSQL's much smaller one.
    writer: Option<Box<Mutex<Pooled>>>,
    readers: Mutex<Readers>,
    /// Signalled when a reader comes back while a call waits for one.
    available: Condvar,
    /// Every writing transaction is rolled back instead of committed (see
    /// [`crate::backend::Database::rehearse`]).
    rehearsal: bool,
}

/// How many reader connections a pool keeps.
pub(crate) const READERS: usize = 4;

/// A pooled connection, with what its queries learned of its statements' columns.
struct Pooled {
    conn: Connection,
    shapes: Shapes,
}

impl From<Connection> for Pooled {
    fn from(conn: Connection) -> Pooled {
        Pooled {
            conn,
            shapes: Shapes::default(),
        }
    }
}

/// The [`Row::memo`](crate::backend::Row::memo)s of one connection's statements, by SQL text. The
/// text is found by where it lies and its length, which costs less to hash than a statement,
/// and compared whole.
///
/// A memo stands while SQLite's counters say that the statement is the same one, with the
/// same columns, that it was made for. SQLite counts for each prepared statement how often
/// it was run and re-prepared (after a schema change, which may change its columns). A
/// memo's statement must have been re-prepared as often as when it was made, and run exactly
/// once since it was last asked for. A statement that was dropped from the connection's
/// cache and prepared again starts counting from zero, so its first query does not match a
/// memo, which counts at least one run before; a run that did not ask for the memo (another
/// call's `prepare_cached` of the same text) makes the count one too many.
#[derive(Default)]
struct Shapes(std::collections::HashMap<(usize, usize), Shape>);

/// The most statements whose memos one connection keeps.
const MAX_SHAPES: usize = 512;

/// One statement's memo and the counts it stands for.
struct Shape {
    sql: Box<str>,
    reprepares: i32,
    /// The run count that the statement's next query must show.
    next_run: i32,
    memo: crate::backend::Memo,
}

impl Shapes {
    /// The memo of `sql`, whose statement `stmt` is being run now, or `make`'s.
    fn memo(
        &mut self,
        sql: &str,
        stmt: &rusqlite::Statement<'_>,
        make: &dyn Fn() -> crate::backend::Memo,
    ) -> crate::backend::Memo {
        use rusqlite::StatementStatus as S;
        let reprepares = stmt.get_status(S::RePrepare);
        let run = stmt.get_status(S::Run);
        let next_run = run.wrapping_add(1);
        let key = (sql.as_ptr() as usize, sql.len());
        if let Some(shape) = self.0.get_mut(&key)
            && *shape.sql == *sql
            && shape.reprepares == reprepares
            && shape.next_run == run
        {
            shape.next_run = next_run;
            return shape.memo.clone();
        }
        // Texts that are no longer run (a spec reloaded by `mcpspec dev`) are not kept forever.
        if self.0.len() >= MAX_SHAPES {
            self.0.clear();
        }
        let memo = make();
        let shape = Shape {
            sql: sql.into(),
            reprepares,
            next_run,
            memo: memo.clone(),
        };
        self.0.insert(key, shape);
        memo
    }
}

/// The pool's readers.
struct Readers {
    idle: Vec<Pooled>,
    /// How many readers exist in all, idle or in use.
    open: usize,
    /// How many calls wait for a reader to come free. A reader that comes back wakes one only
    /// when there is one: a wake-up is a system call even when nobody waits.
    waiting: usize,
}

impl Pool {
    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// From now on every write runs in a transaction that is rolled back.
    pub fn rehearse(&mut self) {
        self.rehearsal = true;
    }

    /// Opens the pool over a database without a spec's derived structures (the tests').
    #[cfg(test)]
    pub(crate) fn open(path: &Path, read_only: bool) -> Result<Pool, OpenError> {
        Pool::open_as(
            path,
            None,
            crate::backend::Placing {
                read_only,
                ..Default::default()
            },
        )
    }

    /// Opens the pool for the spec `spec` (its name and database), placing its derived
    /// structures as `mirror::place` decides: in the database, or in a mirror. A
    /// file that cannot be written (its mode, the directory, a `mode=ro` URI) is served
    /// read-only. In read-write mode a database that is mcpspec's own, or already in WAL
    /// mode, is switched to (kept in) WAL so that readers and the writer do not block each
    /// other; another program's database keeps its journal mode.
    pub fn open_as(
        path: &Path,
        spec: Option<(&str, &DatabaseDef)>,
        how: crate::backend::Placing,
    ) -> Result<Pool, OpenError> {
        let err = |source: rusqlite::Error| OpenError::Open {
            path: path.display().to_string(),
            reason: source.to_string(),
        };
        let mut how = how;
        let mut writer = if how.read_only {
            None
        } else {
            let w = open(path, false)?;
            if w.is_readonly(rusqlite::MAIN_DB).map_err(err)? {
                tracing::info!(db = %crate::backend::redact(&path.display().to_string()), "the database cannot be written; serving it read-only");
                how.read_only = true;
                None
            } else {
                Some(w)
            }
        };
        let placement = match spec {
            Some((name, def)) => {
                let reader;
                let probe = match &writer {
                    Some(w) => w,
                    None => {
                        reader = open(path, true)?;
                        &reader
                    }
                };
                mirror::place(probe, path, def, name, how)?
            }
            None => mirror::Placement::Nothing,
        };
        let (mirror, in_place, unbuilt) = match placement {
            mirror::Placement::Mirror(m) => (Some(m), None, None),
            mirror::Placement::InPlace(ddl) => (None, ddl, None),
            mirror::Placement::Nothing => (None, None, None),
            mirror::Placement::Unbuilt(why) => (None, None, Some(why)),
        };
        if let Some(w) = &mut writer {
            // A check (`check --db`, `test --db`) leaves the file as it was, journal mode too.
            set_up_writer(w, mirror.as_deref(), !how.scratch).map_err(err)?;
        }
        // Set up (the mirror attached), each connection is confined when the process checks
        // a spec.
        let writer = writer.map(confined).transpose().map_err(err)?;
        let writer = writer.map(|w| Box::new(Mutex::new(Pooled::from(w))));
        // One reader now, for the start-up checks; more are opened when calls overlap.
        let first = match &mirror {
            Some(m) => m.reader().and_then(|c| ready(c, true)).map_err(err)?,
            None => open(path, true)?,
        };
        let first = confined(first).map_err(err)?;
        let pool = Pool {
            path: path.to_path_buf(),
            mirror,
            in_place,
            unbuilt,
            writer,
            readers: Mutex::new(Readers {
                idle: vec![Pooled::from(first)],
                open: 1,
                waiting: 0,
            }),
            available: Condvar::new(),
            rehearsal: false,
        };
        Ok(pool)
    }

    /// A read-only connection on the database file itself, never its mirror, for what the
    /// file declares (its tables and their columns).
    fn catalog(&self) -> Result<Connection, String> {
        open(&self.path, true).map_err(|e| e.to_string())
    }

    /// The mirror holding the derived structures, when they are not in the database.
    pub fn mirror(&self) -> Option<&mirror::Mirror> {
        self.mirror.as_deref()
    }

    /// A new reader connection: on the database, or on its mirror with the database attached.
    fn new_reader(&self) -> Result<Connection, OpenError> {
        let err = |source: rusqlite::Error| OpenError::Open {
            path: self.path.display().to_string(),
            reason: source.to_string(),
        };
        let conn = match &self.mirror {
            Some(m) => m.reader().and_then(|c| ready(c, true)).map_err(err)?,
            None => open(&self.path, true)?,
        };
        confined(conn).map_err(err)
    }

    /// Catches the mirror up with the database, when there is one (see [`mirror`]).
    fn catch_up(&self) -> Result<(), crate::backend::Failure> {
        match &self.mirror {
            Some(m) => m.catch_up().map_err(|message| crate::backend::Failure {
                kind: crate::backend::ErrorKind::Other,
                message: format!("catching the mirror up: {message}"),
                constraint: String::new(),
            }),
            None => Ok(()),
        }
    }

    /// Runs `f` on a reader connection: an idle one, a new one while fewer than [`READERS`]
    /// exist, or the next one to come free.
    pub fn read<T>(&self, f: impl FnOnce(&mut Connection) -> T) -> T {
        self.caught_up();
        self.read_or_wait(|| {}, f)
    }

    /// [`Pool::catch_up`] for work outside a job (a handler's own connection use): a failure
    /// is logged, and the work reads the mirror as it stands.
    fn caught_up(&self) {
        if let Err(e) = self.catch_up() {
            tracing::error!(error = %e.message, "the mirror could not catch up");
        }
    }

    /// [`Pool::read`], calling `waits` first when it must wait for a reader to come free.
    pub fn read_or_wait<T>(&self, waits: impl FnOnce(), f: impl FnOnce(&mut Connection) -> T) -> T {
        let waits = || {
            waits();
            true
        };
        match self.lend_reader(waits, |pooled| f(&mut pooled.conn)) {
            Some(t) => t,
            None => unreachable!("a read that waits always gets a reader"),
        }
    }

    /// [`Pool::read_or_wait`], lending the reader with its memos; `waits` also says whether
    /// to wait at all, and `None` is the answer when it says not to.
    fn lend_reader<T>(
        &self,
        waits: impl FnOnce() -> bool,
        f: impl FnOnce(&mut Pooled) -> T,
    ) -> Option<T> {
        let mut waits = Some(waits);
        let lock = || {
            self.readers
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        };
        let conn = {
            let mut guard = lock();
            loop {
                if let Some(c) = guard.idle.pop() {
                    break c;
                }
                if guard.open < READERS {
                    guard.open += 1;
                    drop(guard);
                    match self.new_reader() {
                        Ok(c) => break Pooled::from(c),
                        Err(e) => {
                            // Fall back to waiting for one of the readers that exist.
                            tracing::warn!(error = %e, "could not open another reader");
                            guard = lock();
                            guard.open -= 1;
                            continue;
                        }
                    }
                }
                if let Some(waits) = waits.take() {
                    drop(guard);
                    if !waits() {
                        return None;
                    }
                    guard = lock();
                    continue;
                }
                guard.waiting += 1;
                guard = self
                    .available
                    .wait(guard)
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                guard.waiting -= 1;
            }
        };
        // Handed back when `f` returns and also when it panics (the lane catches panics), so
        // that a panicking call never costs the pool a reader and later reads never wait for
        // one that is gone.
        let mut lent = Lent {
            pool: self,
            conn: Some(conn),
        };
        Some(f(lent.conn.as_mut().expect("lent until dropped")))
    }

    /// Puts a reader back among the idle ones and wakes one waiting call, if one waits.
    fn give_back(&self, conn: Pooled) {
        let someone_waits = {
            let mut readers = self
                .readers
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            readers.idle.push(conn);
            readers.waiting > 0
        };
        if someone_waits {
            self.available.notify_one();
        }
    }

    /// Runs `f` on the writer connection, or returns `None` when the pool is read-only.
    pub fn write<T>(&self, f: impl FnOnce(&mut Connection) -> T) -> Option<T> {
        self.caught_up();
        self.lend_writer(|pooled| f(&mut pooled.conn))
    }

    /// [`Pool::write`], lending the writer with its memos.
    fn lend_writer<T>(&self, f: impl FnOnce(&mut Pooled) -> T) -> Option<T> {
        let writer = self.writer.as_ref()?;
        let mut pooled = writer
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        Some(f(&mut pooled))
    }

    pub fn is_read_only(&self) -> bool {
        self.writer.is_none()
    }

    /// Applies the spec's derived DDL (see [`crate::def::DatabaseDef::derived`]) in one
    /// transaction on the writer, in a database that is mcpspec's own or whose user allowed
    /// it (see `mirror::place`). Does nothing on a read-only pool; on failure nothing
    /// is applied and the reason is returned, with SQLite's wording.
    pub fn derive_in_place(&self) -> Result<(), String> {
        if let Some(why) = &self.unbuilt {
            return Err(why.clone());
        }
        let ddl = self.in_place.unwrap_or_default();
        if ddl.trim().is_empty() {
            return Ok(());
        }
        // BEGIN (deferred): when every structure exists, nothing is written.
        let applied = self.write(|conn| {
            conn.execute_batch(&format!("BEGIN;\n{ddl}\nCOMMIT;"))
                .map_err(|e| {
                    let _ = conn.execute_batch("ROLLBACK");
                    sqlite_message(&e)
                })
        });
        applied.unwrap_or(Ok(()))
    }
}

/// A reader lent to one call; dropping it gives the connection back to the pool.
struct Lent<'p> {
    pool: &'p Pool,
    conn: Option<Pooled>,
}

impl Drop for Lent<'_> {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            self.pool.give_back(conn);
        }
    }
}

impl rusqlite::ToSql for crate::backend::Value {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        use rusqlite::types::{ToSqlOutput, ValueRef};
        // sqlite-vec reads a vector as its little-endian float32 blob.
        if let crate::backend::Value::Vector(v) = self {
            return Ok(ToSqlOutput::Owned(rusqlite::types::Value::Blob(
                crate::backend::Value::vector_bytes(v),
            )));
        }
        Ok(ToSqlOutput::Borrowed(match self {
            crate::backend::Value::Null => ValueRef::Null,
            crate::backend::Value::Integer(i) => ValueRef::Integer(*i),
            crate::backend::Value::Real(f) => ValueRef::Real(*f),
            crate::backend::Value::Text(s) => ValueRef::Text(s.as_bytes()),
            crate::backend::Value::Blob(b) => ValueRef::Blob(b),
            crate::backend::Value::Vector(_) => ValueRef::Null,
        }))
    }
}

impl rusqlite::types::FromSql for crate::backend::Value {
    fn column_result(v: rusqlite::types::ValueRef<'_>) -> rusqlite::types::FromSqlResult<Self> {
        use rusqlite::types::ValueRef;
        Ok(match v {
            ValueRef::Null => crate::backend::Value::Null,
            ValueRef::Integer(i) => crate::backend::Value::Integer(i),
            ValueRef::Real(f) => crate::backend::Value::Real(f),
            ValueRef::Text(t) => {
                crate::backend::Value::Text(String::from_utf8_lossy(t).into_owned())
            }
            ValueRef::Blob(b) => crate::backend::Value::Blob(b.to_vec()),
        })
    }
}

/// The backend-neutral kind of a SQLite failure.
pub(crate) fn error_kind(e: &rusqlite::Error) -> crate::backend::ErrorKind {
    use rusqlite::ErrorCode as C;
    match e.sqlite_error_code() {
        Some(C::OperationInterrupted) => crate::backend::ErrorKind::Interrupted,
        Some(C::ConstraintViolation) => crate::backend::ErrorKind::Constraint,
        Some(C::DatabaseBusy | C::DatabaseLocked) => crate::backend::ErrorKind::Busy,
        Some(C::ReadOnly) => crate::backend::ErrorKind::ReadOnly,
        _ => crate::backend::ErrorKind::Other,
    }
}

/// What a constraint failure says, without the table and column names after its colon
/// (`unique constraint failed`), lowercased.
pub(crate) fn constraint_detail(e: &rusqlite::Error) -> String {
    match e {
        rusqlite::Error::SqliteFailure(_, Some(m)) => m
            .split(':')
            .next()
            .unwrap_or("constraint failed")
            .to_lowercase(),
        _ => "constraint failed".into(),
    }
}

/// A backend-neutral failure from a SQLite error.
pub(crate) fn failure(e: &rusqlite::Error) -> crate::backend::Failure {
    let kind = error_kind(e);
    crate::backend::Failure {
        kind,
        message: e.to_string(),
        constraint: if kind == crate::backend::ErrorKind::Constraint {
            constraint_detail(e)
        } else {
            String::new()
        },
    }
}

/// The SQLite engine: files, opened by path.
pub(crate) const ENGINE: crate::backend::EngineEntry = crate::backend::EngineEntry {
    dialect: &sqlscan::SQLITE,
    open: open_engine,
    create: create_engine,
    migrator: open_migrator,
};

fn open_migrator(
    location: &crate::backend::Location,
    write: bool,
) -> Result<Box<dyn crate::backend::migrate::Migrator>, OpenError> {
    Ok(Box::new(migrator::SqliteMigrator::open(
        file(location)?,
        write,
    )?))
}

/// The file of a location SQLite opens.
fn file(location: &crate::backend::Location) -> Result<&Path, OpenError> {
    match location {
        crate::backend::Location::File(p) => Ok(p),
        crate::backend::Location::Url(u, _) => Err(OpenError::Open {
            path: crate::backend::redact(u),
            reason: "SQLite opens files, not URLs".into(),
        }),
    }
}

fn open_engine(
    t: &crate::backend::Target<'_>,
) -> Result<Box<dyn crate::backend::Backend>, OpenError> {
    let pool = Pool::open_as(file(t.location)?, Some((t.server, t.def)), t.how)?;
    Ok(Box::new(pool))
}

fn create_engine(c: &crate::backend::Creation<'_>) -> Result<bool, OpenError> {
    init(c.def, file(c.location)?, c.sample)?;
    Ok(c.sample && c.def.sample.is_some())
}

/// SQLite's side of the seam: the progress handler stops a statement at the deadline or on
/// cancellation; a writing transaction takes the write lock at once (`BEGIN IMMEDIATE`) so
/// that it never fails half-way on a busy database.
impl crate::backend::Backend for Pool {
    fn dialect(&self) -> &'static sqlscan::Dialect {
        &sqlscan::SQLITE
    }

    fn run(
        &self,
        kind: crate::backend::JobKind,
        stop: &crate::backend::Stop,
        work: crate::backend::Work<'_>,
    ) -> Option<Result<(), crate::backend::JobError>> {
        use crate::backend::JobError;
        if let Err(f) = self.catch_up() {
            return Some(Err(JobError::Failed(f)));
        }
        let run = |pooled: &mut Pooled| {
            let watch = stop.clone();
            let _ = pooled
                .conn
                .progress_handler(1_000, Some(move || watch.now()));
            // A rehearsal wraps every write in a transaction, so that it can be rolled back.
            let transaction = kind.transaction || (kind.writes && self.rehearsal);
            let Pooled { conn, shapes } = pooled;
            let mut session = SqliteSession { conn, shapes };
            let out = crate::backend::in_transaction(
                &mut session,
                kind.writes,
                transaction,
                self.rehearsal,
                work,
            );
            let _ = pooled.conn.progress_handler(0, None::<fn() -> bool>);
            out
        };
        if kind.writes {
            self.lend_writer(run)
        } else {
            // A job that gives way rather than wait stops as if interrupted.
            let gave_way = || {
                Err(JobError::Failed(crate::backend::Failure {
                    kind: crate::backend::ErrorKind::Interrupted,
                    message: "gave way rather than wait for a reader".into(),
                    constraint: String::new(),
                }))
            };
            Some(
                self.lend_reader(|| stop.waits(), run)
                    .unwrap_or_else(gave_way),
            )
        }
    }

    fn columns(&self, sql: crate::backend::Sql<'_>) -> Result<Vec<crate::backend::Column>, String> {
        self.read(|conn| columns(conn, sql.text))
            .map(crate::backend::untyped)
    }

    fn tables(&self) -> Result<Vec<String>, String> {
        let conn = self.catalog()?;
        let mut st = conn
            .prepare(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name",
            )
            .map_err(|e| sqlite_message(&e))?;
        st.query_map([], |r| r.get(0))
            .and_then(Iterator::collect)
            .map_err(|e| sqlite_message(&e))
    }

    fn table_columns(&self, table: &str) -> Result<Vec<crate::backend::TableColumn>, String> {
        table_columns(&self.catalog()?, table).map_err(|e| sqlite_message(&e))
    }

    fn rehearse(&mut self) {
        Pool::rehearse(self);
    }

    fn is_read_only(&self) -> bool {
        Pool::is_read_only(self)
    }

    fn derive_in_place(&self) -> Option<String> {
        Pool::derive_in_place(self).err()
    }

    fn derived_elsewhere(&self) -> Option<PathBuf> {
        self.mirror().map(|m| m.path().to_path_buf())
    }

    fn runs_on_async_worker(&self) -> bool {
        true
    }

    fn notices_slow(&self) -> bool {
        true
    }

    fn at_once(&self, writes: bool) -> Option<usize> {
        Some(if writes { 1 } else { READERS })
    }

    fn pool_use(&self) -> Option<crate::backend::PoolUse> {
        // The readers: the writer is one connection whose use is the write lock's.
        let readers = self
            .readers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let open = u32::try_from(readers.open).unwrap_or(u32::MAX);
        let idle = u32::try_from(readers.idle.len()).unwrap_or(u32::MAX);
        Some(crate::backend::PoolUse {
            open,
            in_use: open.saturating_sub(idle),
            max: u32::try_from(READERS).unwrap_or(u32::MAX),
        })
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// The columns of `table` on `conn`: its declared types, and which an INSERT must set (NOT
/// NULL without a default, other than an INTEGER PRIMARY KEY alone, which is the rowid
/// SQLite assigns).
fn table_columns(
    conn: &Connection,
    table: &str,
) -> rusqlite::Result<Vec<crate::backend::TableColumn>> {
    let keys: i64 = conn.query_row(
        "SELECT count(*) FROM pragma_table_info(?1) WHERE pk > 0",
        [table],
        |r| r.get(0),
    )?;
    let mut st = conn.prepare(
        "SELECT name, type, \"notnull\", dflt_value IS NULL, pk FROM pragma_table_xinfo(?1) WHERE hidden = 0 ORDER BY cid",
    )?;
    let mut columns = st
        .query_map([table], |r| {
            let ty: String = r.get(1)?;
            let rowid = r.get::<_, i64>(4)? == 1 && keys == 1 && ty.eq_ignore_ascii_case("integer");
            Ok(crate::backend::TableColumn {
                name: r.get(0)?,
                required: r.get::<_, bool>(2)? && r.get::<_, bool>(3)? && !rowid,
                ty,
            })
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    // A virtual table's columns have no declared type in SQLite's catalogue: their
    // definitions are read from its CREATE text (sqlite-vec's `embedding float[256]`).
    if columns.iter().any(|c| c.ty.is_empty()) {
        let create: Option<String> = conn
            .query_row(
                "SELECT sql FROM sqlite_schema WHERE name = ?1 AND sql LIKE 'CREATE VIRTUAL TABLE%'",
                [table],
                |r| r.get(0),
            )
            .optional()?;
        let defs = create
            .map(|c| sqlscan::vectors::virtual_columns(&c))
            .unwrap_or_default();
        for c in columns.iter_mut().filter(|c| c.ty.is_empty()) {
            if let Some((_, ty)) = defs.iter().find(|(n, _)| n.eq_ignore_ascii_case(&c.name)) {
                c.ty = ty.clone();
            }
        }
    }
    Ok(columns)
}

/// Sets the writer up: WAL for a database that is mcpspec's own or in WAL already (another
/// program's keeps its journal mode) when `wal`, foreign keys, and the replay into the mirror.
fn set_up_writer(
    w: &Connection,
    mirror: Option<&mirror::Mirror>,
    wal: bool,
) -> rusqlite::Result<()> {
    let mode: String = w.query_row("PRAGMA journal_mode", [], |r| r.get(0))?;
    let ours =
        w.query_row("PRAGMA application_id", [], |r| r.get::<_, i32>(0))? == mirror::APPLICATION_ID;
    if wal && (ours || mode.eq_ignore_ascii_case("wal")) {
        w.pragma_update(None, "journal_mode", "WAL")?;
    }
    w.pragma_update(None, "synchronous", "NORMAL")?;
    w.pragma_update(None, "foreign_keys", "ON")?;
    if let Some(m) = mirror {
        m.watch_writer(w)?;
    }
    Ok(())
}

/// Runs `f` on `conn` with its statements interrupted once `stop` says the job must stop (its
/// deadline or a cancellation), as [`mcpspec_sqlite::bounded`] does.
pub(crate) fn bounded<T>(
    conn: &mut Connection,
    stop: &crate::backend::Stop,
    f: impl FnOnce(&mut Connection) -> T,
) -> T {
    let watch = stop.clone();
    mcpspec_sqlite::bounded(conn, move || watch.now(), f)
}

/// A job's connection.
struct SqliteSession<'c> {
    conn: &'c Connection,
    shapes: &'c mut Shapes,
}

/// A row of a session's query, which keeps its statement's memo with the connection.
struct SqliteRow<'r, 's> {
    row: &'r rusqlite::Row<'r>,
    sql: &'s str,
    shapes: &'s std::cell::RefCell<&'s mut Shapes>,
}

/// Binds each named parameter of `stmt` to what `bind` gives for its name.
fn bind_all(
    stmt: &mut rusqlite::Statement<'_>,
    bind: crate::backend::Bind<'_>,
) -> rusqlite::Result<()> {
    for i in 1..=stmt.parameter_count() {
        let Some(full) = stmt.parameter_name(i) else {
            continue;
        };
        stmt.raw_bind_parameter(i, bind(&sqlscan::sqlite_param(&full[1..])))?;
    }
    Ok(())
}

impl crate::backend::Row for SqliteRow<'_, '_> {
    fn value(&self, i: usize) -> crate::backend::ValueRef<'_> {
        use rusqlite::types::ValueRef as V;
        match self.row.get_ref(i).unwrap_or(V::Null) {
            V::Null => crate::backend::ValueRef::Null,
            V::Integer(n) => crate::backend::ValueRef::Integer(n),
            V::Real(f) => crate::backend::ValueRef::Real(f),
            V::Text(t) => crate::backend::ValueRef::Text(t),
            V::Blob(b) => crate::backend::ValueRef::Blob(b),
        }
    }

    fn names(&self) -> Vec<&str> {
        self.row.as_ref().column_names().collect()
    }

    fn memo(&self, make: &dyn Fn() -> crate::backend::Memo) -> crate::backend::Memo {
        self.shapes
            .borrow_mut()
            .memo(self.sql, self.row.as_ref(), make)
    }
}

impl crate::backend::Session for SqliteSession<'_> {
    fn dialect(&self) -> &'static sqlscan::Dialect {
        &sqlscan::SQLITE
    }

    fn begin(&mut self, writes: bool) -> Result<(), crate::backend::Failure> {
        let begin = if writes { "BEGIN IMMEDIATE" } else { "BEGIN" };
        self.conn.execute_batch(begin).map_err(|e| failure(&e))
    }

    fn end(&mut self, commit: bool) -> Result<(), crate::backend::Failure> {
        let end = if commit { "COMMIT" } else { "ROLLBACK" };
        self.conn.execute_batch(end).map_err(|e| {
            let _ = self.conn.execute_batch("ROLLBACK");
            failure(&e)
        })
    }

    fn execute(
        &mut self,
        sql: crate::backend::Sql<'_>,
        bind: crate::backend::Bind<'_>,
    ) -> Result<crate::backend::Changes, crate::backend::Failure> {
        let run = || -> rusqlite::Result<crate::backend::Changes> {
            let mut stmt = self.conn.prepare_cached(sql.text)?;
            bind_all(&mut stmt, bind)?;
            let changes = stmt.raw_execute()?;
            Ok(crate::backend::Changes {
                changes: changes as u64,
                last_insert_id: self.conn.last_insert_rowid(),
            })
        };
        run().map_err(|e| failure(&e))
    }

    fn query(
        &mut self,
        sql: crate::backend::Sql<'_>,
        bind: crate::backend::Bind<'_>,
        each: &mut dyn FnMut(&dyn crate::backend::Row) -> bool,
    ) -> Result<(), crate::backend::Failure> {
        let mut run = || -> rusqlite::Result<()> {
            let mut stmt = self.conn.prepare_cached(sql.text)?;
            bind_all(&mut stmt, bind)?;
            let mut rows = stmt.raw_query();
            let shapes = std::cell::RefCell::new(&mut *self.shapes);
            while let Some(row) = rows.next()? {
                let row = SqliteRow {
                    row,
                    sql: sql.text,
                    shapes: &shapes,
                };
                if !each(&row) {
                    break;
                }
            }
            Ok(())
        };
        run().map_err(|e| failure(&e))
    }
}

/// The names of the columns `sql` returns.
pub(crate) fn columns(conn: &Connection, sql: &str) -> Result<Vec<String>, String> {
    let st = conn.prepare_cached(sql).map_err(|e| sqlite_message(&e))?;
    Ok(st.column_names().map(String::from).collect())
}

/// [`columns`] on a scratch in-memory database made from `schema`.
pub(crate) fn scratch(
    schema: &str,
) -> Option<impl Fn(&str) -> Result<Vec<String>, String> + use<>> {
    let conn = scratch_connection().ok()?;
    conn.execute_batch(schema).ok()?;
    Some(move |sql: &str| columns(&conn, sql))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::Backend as _;
    use std::sync::Arc;

    /// Each failure a real database gives becomes the seam's kind and, for a constraint, the
    /// words every engine says it in (no table or column name).
    #[test]
    fn a_real_databases_failures_map_to_the_seams_kinds_and_words() {
        use crate::backend::ErrorKind::{Busy, Constraint, Interrupted, Other, ReadOnly};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let mut conn = Connection::open(&path).unwrap();
        conn.execute_batch(
            "PRAGMA foreign_keys = ON;
             CREATE TABLE p (id INTEGER PRIMARY KEY);
             CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE,
                             n INTEGER CHECK (n > 0), p INTEGER REFERENCES p(id));
             INSERT INTO t (id, name, n) VALUES (1, 'a', 1);",
        )
        .unwrap();
        let cases = [
            (
                "INSERT INTO t (id, name, n) VALUES (2, 'a', 1)",
                Constraint,
                "unique constraint failed",
            ),
            (
                "INSERT INTO t (id, name, n) VALUES (1, 'b', 1)",
                Constraint,
                "unique constraint failed",
            ),
            (
                "INSERT INTO t (id, name, n) VALUES (2, NULL, 1)",
                Constraint,
                "not null constraint failed",
            ),
            (
                "INSERT INTO t (id, name, n) VALUES (2, 'b', 0)",
                Constraint,
                "check constraint failed",
            ),
            (
                "INSERT INTO t (id, name, n, p) VALUES (2, 'b', 1, 9)",
                Constraint,
                "foreign key constraint failed",
            ),
            ("SELECT nope FROM t", Other, ""),
        ];
        for (sql, kind, words) in cases {
            let f = failure(&conn.execute(sql, []).unwrap_err());
            assert_eq!((f.kind, f.constraint.as_str()), (kind, words), "{sql}");
            assert!(!f.message.is_empty(), "{sql}");
        }
        // Another connection holds the write lock, and this one does not wait for it.
        let other = Connection::open(&path).unwrap();
        other.execute_batch("BEGIN IMMEDIATE").unwrap();
        conn.busy_timeout(std::time::Duration::ZERO).unwrap();
        let busy = conn
            .execute("INSERT INTO p (id) VALUES (1)", [])
            .unwrap_err();
        assert_eq!(failure(&busy).kind, Busy);
        other.execute_batch("ROLLBACK").unwrap();
        // A connection that may not write.
        conn.execute_batch("PRAGMA query_only = ON").unwrap();
        let read_only = conn
            .execute("INSERT INTO p (id) VALUES (2)", [])
            .unwrap_err();
        assert_eq!(failure(&read_only).kind, ReadOnly);
        conn.execute_batch("PRAGMA query_only = OFF").unwrap();
        // A statement its progress handler stops, as a deadline or a cancellation does.
        conn.progress_handler(1, Some(|| true)).unwrap();
        let stopped = conn
            .query_row("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c", [], |r| r.get::<_, i64>(0))
            .unwrap_err();
        assert_eq!(failure(&stopped).kind, Interrupted);
    }

    /// A database file in a directory of its own, with one table `t` of one row, `x` = 7.
    fn one_row() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        Connection::open(&path)
            .unwrap()
            .execute_batch("CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (7);")
            .unwrap();
        (dir, path)
    }

    #[test]
    fn a_read_that_waits_for_a_reader_gets_the_next_one_back() {
        use std::sync::mpsc::channel;
        let (_dir, path) = one_row();
        // Threads of their own rather than scoped ones, so that a read that is never woken
        // fails the test instead of hanging it.
        let pool = Arc::new(Pool::open(&path, false).unwrap());
        // Every reader busy until its holder is released.
        let (held, all_held) = channel();
        let mut releases = Vec::new();
        for _ in 0..READERS {
            let (release, released) = channel::<()>();
            releases.push(release);
            let (held, pool) = (held.clone(), pool.clone());
            std::thread::spawn(move || {
                pool.read(|_| {
                    held.send(()).unwrap();
                    let _ = released.recv();
                })
            });
        }
        for _ in 0..READERS {
            all_held.recv().unwrap();
        }
        let (done, finished) = channel();
        let reader = pool.clone();
        std::thread::spawn(move || {
            let x: i64 = reader.read(|c| c.query_row("SELECT x FROM t", [], |r| r.get(0)).unwrap());
            done.send(x).unwrap();
        });
        // Release one holder only once the fifth read is asleep on the pool.
        while pool.readers.lock().unwrap().waiting == 0 {
            std::thread::yield_now();
        }
        releases.pop().unwrap().send(()).unwrap();
        let x = finished
            .recv_timeout(std::time::Duration::from_secs(20))
            .expect("the waiting read was never woken");
        assert_eq!(x, 7);
        for r in releases {
            r.send(()).unwrap();
        }
        assert_eq!(pool.readers.lock().unwrap().waiting, 0);
    }

    /// What one step of [`a_memo_stands_while_its_statement_keeps_its_columns`] does before
    /// it queries `sql` on the pool's only reader.
    enum Before {
        Nothing,
        /// Changes the schema through the writer.
        Alter(&'static str),
        /// Runs `sql` on the reader without asking for the memo.
        RunAside,
        /// Keeps one statement in the reader's cache.
        CacheOne,
    }

    /// Queries `sql` through a session and asks for its memo, counting in `made` the memos
    /// made. Returns the memo's column names and the statement's.
    fn memo_and_names(
        pool: &Pool,
        sql: &str,
        made: &std::cell::Cell<u32>,
    ) -> (Vec<String>, Vec<String>) {
        let stop = crate::backend::Stop::after(Duration::from_secs(20), Arc::default());
        let mut out = None;
        pool.run(
            crate::backend::JobKind {
                writes: false,
                transaction: false,
            },
            &stop,
            &mut |session| {
                session
                    .query(sql.into(), &|_| crate::backend::Value::Null, &mut |row| {
                        let names = || {
                            row.names()
                                .iter()
                                .map(|n| n.to_string())
                                .collect::<Vec<_>>()
                        };
                        let memo = row.memo(&|| {
                            made.set(made.get() + 1);
                            Arc::new(names())
                        });
                        let memo = memo.downcast::<Vec<String>>().unwrap();
                        out = Some(((*memo).clone(), names()));
                        false
                    })
                    .map_err(|_| crate::backend::Aborted)
            },
        )
        .unwrap()
        .unwrap();
        out.expect("a row")
    }

    #[test]
    fn a_memo_stands_while_its_statement_keeps_its_columns() {
        const ALL: &str = "SELECT * FROM t";
        const X: &str = "SELECT x FROM t";
        let (_dir, path) = one_row();
        let pool = Pool::open(&path, false).unwrap();
        let (all, x) = (std::cell::Cell::new(0), std::cell::Cell::new(0));
        // (what comes first, the statement queried, memos made for `ALL` and `X` after it).
        // A schema change re-prepares the statement, which SQLite also counts as a run.
        let steps = [
            (Before::Nothing, ALL, (1, 0)),
            (Before::Nothing, ALL, (1, 0)),
            (Before::Nothing, ALL, (1, 0)),
            (
                Before::Alter("ALTER TABLE t ADD COLUMN c TEXT"),
                ALL,
                (2, 0),
            ),
            (Before::Nothing, ALL, (2, 0)),
            (
                Before::Alter("ALTER TABLE t RENAME COLUMN c TO d"),
                ALL,
                (3, 0),
            ),
            (Before::RunAside, ALL, (4, 0)),
            (Before::Nothing, ALL, (4, 0)),
            (Before::Nothing, X, (4, 1)),
            (Before::Nothing, X, (4, 1)),
            // One statement in the cache: each query prepares its statement again.
            (Before::CacheOne, ALL, (5, 1)),
            (Before::Nothing, X, (5, 2)),
            (Before::Nothing, ALL, (6, 2)),
        ];
        for (i, (before, sql, counts)) in steps.into_iter().enumerate() {
            match before {
                Before::Nothing => {}
                Before::Alter(ddl) => {
                    pool.write(|c| c.execute_batch(ddl).unwrap()).unwrap();
                }
                Before::RunAside => pool.read(|c| {
                    let mut st = c.prepare_cached(sql).unwrap();
                    st.query_row([], |_| Ok(())).unwrap();
                }),
                Before::CacheOne => pool.read(|c| c.set_prepared_statement_cache_capacity(1)),
            }
            let made = if sql == ALL { &all } else { &x };
            let (memo, names) = memo_and_names(&pool, sql, made);
            assert_eq!(memo, names, "step {i}: a memo for other columns");
            assert_eq!((all.get(), x.get()), counts, "step {i}: memos made");
        }
        assert_eq!(
            pool.readers.lock().unwrap().open,
            1,
            "one reader throughout"
        );
    }

    #[test]
    fn a_panicking_read_gives_its_reader_back() {
        let (_dir, path) = one_row();
        let pool = Pool::open(&path, false).unwrap();
        // More panics than the pool has readers: each one's reader comes back.
        for _ in 0..=READERS {
            let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                pool.read(|_| -> () { panic!("a call panicked") })
            }));
            assert!(caught.is_err());
        }
        let (idle, open) = {
            let readers = pool.readers.lock().unwrap();
            (readers.idle.len(), readers.open)
        };
        assert_eq!((idle, open), (1, 1), "(idle, open) readers");
        let x: i64 = pool.read(|c| c.query_row("SELECT x FROM t", [], |r| r.get(0)).unwrap());
        assert_eq!(x, 7);
    }
}
