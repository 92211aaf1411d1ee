//! The database seam: the [`Backend`] trait every engine implements, the values the engine
//! binds and reads, and the kinds of failure it tells apart, in terms of no particular
//! database. `sqlite` is the embedded implementation, `postgres` and `mysql` (MariaDB and
//! MySQL) the ones for teams, each behind the cargo feature of its name and listed in
//! `ENGINES`; the engine, the protocol,
//! the command line and the handler API name only the types of this module.
//!
//! Public: the seam's types, and `sqlite`'s handler accessor ([`sqlite::Sqlite`]). The
//! engines' own functions that this workspace's other crates call (the compiler's live
//! checks, the seeds' `pm` administration, the cli's `doctor`) are the crate's own, exported
//! to them by `mcpspec::__internal::backend` alone: outside the semver promise.

pub(crate) mod migrate;
#[cfg(feature = "mysql")]
pub(crate) mod mysql;
pub(crate) mod ops;
pub(crate) mod paths;
#[cfg(feature = "postgres")]
mod pgsync;
#[cfg(feature = "postgres")]
pub(crate) mod postgres;
#[cfg(feature = "sqlite")]
pub mod sqlite;
pub(crate) mod team;
// A span per statement (telemetry's, when it is on).
mod traced;
#[cfg(any(feature = "postgres", feature = "mysql"))]
pub(crate) mod watchdog;

pub use crate::pool_use::PoolUse;
pub(crate) use ops::{confine_spec_sql, create, migrator, redact};
pub use sqlscan::Dialect;
pub use team::{
    AddedColumn, FoundTask, STATES_TABLE, SharedStates, SharedTasks, TASK_OWNER, TASKS_TABLE, Team,
    state_database,
};

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::def::DatabaseDef;

/// What went wrong in the database, whatever the database: the engine maps each kind to a
/// tool error without quoting the database's own message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// A constraint (unique, not null, foreign key, check) refused a change.
    Constraint,
    /// Another writer holds the database; the call may be retried.
    Busy,
    /// The database or the connection does not accept writes.
    ReadOnly,
    /// The statement was stopped by the deadline, a cancellation, or to give way.
    Interrupted,
    /// Anything else.
    Other,
}

impl ErrorKind {
    /// The kind's name, as traces and the workbench show it (`Constraint`, `Busy`...).
    pub const fn name(self) -> &'static str {
        match self {
            ErrorKind::Constraint => "Constraint",
            ErrorKind::Busy => "Busy",
            ErrorKind::ReadOnly => "ReadOnly",
            ErrorKind::Interrupted => "Interrupted",
            ErrorKind::Other => "Other",
        }
    }
}

/// A value bound to a statement parameter or read from a result column: the backends' own
/// value type (what `params` binds calls it `SqlValue`).
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Integer(i64),
    Real(f64),
    Text(String),
    Blob(Vec<u8>),
    /// An embedding: bound as the engine's vector (pgvector's `vector` on PostgreSQL, the
    /// little-endian float32 blob sqlite-vec and MariaDB's `VECTOR` read elsewhere).
    Vector(std::sync::Arc<[f32]>),
}

impl Value {
    /// A vector's little-endian float32 bytes: sqlite-vec's and MariaDB's binary form.
    pub fn vector_bytes(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    /// A vector's text, `[0.1,0.2]`: what pgvector, sqlite-vec and MariaDB's `VEC_FromText`
    /// parse.
    pub fn vector_text(v: &[f32]) -> String {
        let mut out = String::with_capacity(v.len() * 12 + 2);
        out.push('[');
        for (i, x) in v.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(&x.to_string());
        }
        out.push(']');
        out
    }
}

/// A value as the database hands it over, borrowed from the current row.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ValueRef<'a> {
    Null,
    Integer(i64),
    Real(f64),
    Text(&'a [u8]),
    Blob(&'a [u8]),
}

impl ValueRef<'_> {
    /// The owned value.
    pub fn to_owned(self) -> Value {
        match self {
            ValueRef::Null => Value::Null,
            ValueRef::Integer(i) => Value::Integer(i),
            ValueRef::Real(f) => Value::Real(f),
            ValueRef::Text(t) => Value::Text(String::from_utf8_lossy(t).into_owned()),
            ValueRef::Blob(b) => Value::Blob(b.to_vec()),
        }
    }
}

/// A database failure: its kind, for the caller, and the database's own words, for the log
/// only (they may quote SQL text or paths).
#[derive(Debug, Clone)]
pub struct Failure {
    pub kind: ErrorKind,
    /// For the log only.
    pub message: String,
    /// For a constraint failure, what the constraint says without table or column names
    /// (`unique constraint failed`); empty otherwise.
    pub constraint: String,
}

/// When a job must stop: its deadline, and the flag a client's cancellation sets. A call's
/// clock may stop while it waits for the client's answer (see [`Stop::pausable`]).
#[derive(Debug, Clone)]
pub struct Stop {
    deadline: Instant,
    pub cancel: Arc<AtomicBool>,
    /// What to do once the job turns out slow, if anything.
    pub slow: Option<Slow>,
    /// For a job whose clock stops while it waits for the client: the waits in progress and
    /// the time they took, shared by every clone.
    held: Option<Arc<Held>>,
}

#[derive(Debug, Default)]
struct Held {
    /// Waits in progress.
    waiting: std::sync::atomic::AtomicUsize,
    /// How long finished waits took, in nanoseconds: the deadline moves by as much.
    nanos: std::sync::atomic::AtomicU64,
}

/// A wait for the client in progress (see [`Stop::pause`]); the clock runs again when it drops.
pub struct Paused<'a> {
    held: Option<&'a Held>,
    since: Instant,
}

impl Drop for Paused<'_> {
    fn drop(&mut self) {
        if let Some(h) = self.held {
            let took = u64::try_from(self.since.elapsed().as_nanos()).unwrap_or(u64::MAX);
            h.nanos.fetch_add(took, Ordering::SeqCst);
            h.waiting.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

impl Stop {
    /// A job that may run for `timeout` from now, or until `cancel` is set.
    pub fn after(timeout: Duration, cancel: Arc<AtomicBool>) -> Stop {
        Stop {
            deadline: Instant::now() + timeout,
            cancel,
            slow: None,
            held: None,
        }
    }

    /// [`Stop::after`] for a call that may wait for the client (a person's answer, a model's
    /// completion): the time it waits does not count, see [`Stop::pause`].
    pub fn pausable(timeout: Duration, cancel: Arc<AtomicBool>) -> Stop {
        Stop {
            held: Some(Arc::default()),
            ..Stop::after(timeout, cancel)
        }
    }

    /// Stops the clock until the guard drops, for a wait for the client; nothing for a job
    /// that is not [`Stop::pausable`].
    pub fn pause(&self) -> Paused<'_> {
        let held = self.held.as_deref();
        if let Some(h) = held {
            h.waiting.fetch_add(1, Ordering::SeqCst);
        }
        Paused {
            held,
            since: Instant::now(),
        }
    }

    /// The deadline, moved by the time spent waiting for the client so far.
    pub fn deadline(&self) -> Instant {
        match &self.held {
            Some(h) => self.deadline + Duration::from_nanos(h.nanos.load(Ordering::SeqCst)),
            None => self.deadline,
        }
    }

    /// Whether the deadline has passed, outside a wait for the client.
    pub fn expired(&self) -> bool {
        match &self.held {
            Some(h) if h.waiting.load(Ordering::SeqCst) > 0 => false,
            _ => Instant::now() > self.deadline(),
        }
    }

    /// Resolves once [`Stop::expired`]; never before the deadline.
    pub async fn until_expired(&self) {
        loop {
            let at = self.deadline();
            tokio::time::sleep_until(at.into()).await;
            if self.expired() {
                return;
            }
            if self.deadline() <= Instant::now() {
                // Waiting for the client: look again shortly.
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }

    /// The same job, which runs `slow`'s action once it turns out slow.
    #[must_use]
    pub fn with_slow(mut self, slow: Option<Slow>) -> Stop {
        self.slow = slow;
        self
    }

    /// Whether the job must stop now. The backends ask while a statement runs (SQLite every
    /// thousand virtual-machine steps), which is also when a slow job is noticed.
    pub fn now(&self) -> bool {
        let now = Instant::now();
        if let Some(slow) = &self.slow {
            if now >= slow.after {
                slow.fire();
            }
            if slow.gave_way() {
                return true;
            }
        }
        self.cancel.load(Ordering::Relaxed)
            || (now > self.deadline && (self.held.is_none() || self.expired()))
    }

    /// The job is about to wait (for a connection, say): that makes it slow at once. Whether
    /// it waits: a job that gives way stops instead.
    pub fn waits(&self) -> bool {
        let Some(slow) = &self.slow else {
            return true;
        };
        slow.fire();
        !slow.gave_way()
    }

    /// Whether the job stopped to give way (see [`Slow::giving_way`]).
    pub fn gave_way(&self) -> bool {
        self.slow.as_ref().is_some_and(Slow::gave_way)
    }
}

/// An action run at most once, when a job has run for longer than a set time or is about to
/// wait. The stdio lane uses it to keep its turn at stdin through a quick call and to give it
/// to another thread, which then reads a cancellation, once the call turns out slow. A job
/// may instead give way once it turns out slow: it stops, so that it can run again where it
/// holds nothing up (see [`Slow::giving_way`]).
#[derive(Clone)]
pub struct Slow {
    after: Instant,
    once: Arc<SlowAction>,
}

struct SlowAction {
    fired: AtomicBool,
    action: Box<dyn Fn() + Send + Sync>,
    /// Whether the job stops once the action has run.
    gives_way: bool,
    /// Whether it has run and the job stopped because of that.
    gave_way: AtomicBool,
}

impl Slow {
    /// `action` runs once the job has run for `after` from now, or waits.
    pub fn new(after: Duration, action: impl Fn() + Send + Sync + 'static) -> Slow {
        Slow::with(after, Box::new(action), false)
    }

    /// A job that gives way once it has run for `after` from now, or would wait: its statement
    /// stops as if interrupted, and the job ends without a line in the call log or an error
    /// in the log, so that its caller can run it again elsewhere. Only jobs that change
    /// nothing may give way. The HTTP lane starts a call on the last free runtime worker this
    /// way, so that the worker is free again soon whatever the call turns out to be.
    pub fn giving_way(after: Duration) -> Slow {
        Slow::with(after, Box::new(|| {}), true)
    }

    fn with(after: Duration, action: Box<dyn Fn() + Send + Sync>, gives_way: bool) -> Slow {
        Slow {
            after: Instant::now() + after,
            once: Arc::new(SlowAction {
                fired: AtomicBool::new(false),
                action,
                gives_way,
                gave_way: AtomicBool::new(false),
            }),
        }
    }

    /// Whether the job stopped to give way.
    pub fn gave_way(&self) -> bool {
        self.once.gave_way.load(Ordering::SeqCst)
    }

    /// Runs the action, unless it has run.
    pub fn fire(&self) {
        if !self.once.fired.swap(true, Ordering::SeqCst) {
            // `Stop` fires it only where the job then stops, if it gives way.
            self.once
                .gave_way
                .store(self.once.gives_way, Ordering::SeqCst);
            (self.once.action)();
        }
    }

    /// Whether the action has run.
    pub fn fired(&self) -> bool {
        self.once.fired.load(Ordering::SeqCst)
    }

    /// Keeps the action from ever running (the job is over); whether it had run.
    pub fn disarm(&self) -> bool {
        self.once.fired.swap(true, Ordering::SeqCst)
    }
}

impl std::fmt::Debug for Slow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Slow")
            .field("after", &self.after)
            .field("fired", &self.fired())
            .field("gives_way", &self.once.gives_way)
            .field("gave_way", &self.gave_way())
            .finish()
    }
}

/// What a statement that changes rows reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Changes {
    pub changes: u64,
    /// The row id of the last inserted row, where the database has one.
    pub last_insert_id: i64,
}

/// One row of a result.
pub trait Row {
    /// The value of column `i` (in the statement's column order).
    fn value(&self, i: usize) -> ValueRef<'_>;

    /// The statement's column names, in order. They are the same for every row of a query:
    /// callers that need them ask once, on the first row.
    fn names(&self) -> Vec<&str>;

    /// What the caller derives from the statement's columns (such as where its declared
    /// columns are), made by `make`. A backend may keep it with the prepared statement and
    /// give it back to later queries of the same statement, without `make`, for as long as
    /// the statement's columns stay the same; by default it keeps nothing.
    fn memo(&self, make: &dyn Fn() -> Memo) -> Memo {
        make()
    }
}

/// See [`Row::memo`].
pub type Memo = Arc<dyn std::any::Any + Send + Sync>;

/// The value bound to a named parameter (the name without its sigil).
pub type Bind<'a> = &'a dyn Fn(&str) -> Value;

/// A statement's text as the session's database takes it.
#[derive(Debug, Clone, Copy)]
pub struct Sql<'a> {
    pub text: &'a str,
    /// `None` when the text names its parameters (`:name`); otherwise the text numbers them
    /// (PostgreSQL's `$n`, rewritten at build time) and these are their names, in order.
    pub params: Option<&'a [&'a str]>,
    /// The spec's name for the statement (a tool's, or a composite's field), which the
    /// workbench shows beside its timing; empty for SQL the runtime or a handler wrote.
    pub name: &'static str,
}

impl<'a> From<&'a str> for Sql<'a> {
    fn from(text: &'a str) -> Sql<'a> {
        Sql {
            text,
            params: None,
            name: "",
        }
    }
}

/// One job's connection: every statement of a call runs on one session, inside one
/// transaction when the job writes or has several statements.
pub trait Session {
    /// The dialect of the session's database, so that a statement runs its text for it.
    fn dialect(&self) -> &'static Dialect;

    /// Runs a statement that returns no rows.
    fn execute(&mut self, sql: Sql<'_>, bind: Bind<'_>) -> Result<Changes, Failure>;

    /// Runs a query, calling `each` with each row until it returns `false` or the rows run out.
    fn query(
        &mut self,
        sql: Sql<'_>,
        bind: Bind<'_>,
        each: &mut dyn FnMut(&dyn Row) -> bool,
    ) -> Result<(), Failure>;

    /// Begins the job's transaction: one that may write when `writes`, else one consistent
    /// snapshot for its reads.
    fn begin(&mut self, writes: bool) -> Result<(), Failure>;

    /// Ends the job's transaction: commits it when `commit`, else rolls it back. A commit that
    /// fails is rolled back before the failure is returned.
    fn end(&mut self, commit: bool) -> Result<(), Failure>;

    /// Takes a caller's database `role` and sets its `claims` (JSON text) under the setting
    /// named `setting`, for the current transaction only (`identity:`, PostgREST's model).
    /// Only an engine with such roles does (PostgreSQL); the compiler allows `identity:` on no
    /// other, and the others refuse.
    fn act_as(&mut self, role: &str, setting: &str, claims: &str) -> Result<(), Failure> {
        let _ = (role, setting, claims);
        Err(Failure {
            kind: ErrorKind::Other,
            message: format!("{} has no database roles to act as", self.dialect().title),
            constraint: String::new(),
        })
    }
}

/// A session on which every query returns no rows and every statement changes none: what a
/// job's statements give when they cannot match anything (a read of text with a NUL
/// character, which no engine of such a spec stores).
pub struct NoRows(pub &'static Dialect);

impl Session for NoRows {
    fn dialect(&self) -> &'static Dialect {
        self.0
    }

    fn act_as(&mut self, _: &str, _: &str, _: &str) -> Result<(), Failure> {
        Ok(())
    }

    fn execute(&mut self, _: Sql<'_>, _: Bind<'_>) -> Result<Changes, Failure> {
        Ok(Changes {
            changes: 0,
            last_insert_id: 0,
        })
    }

    fn query(
        &mut self,
        _: Sql<'_>,
        _: Bind<'_>,
        _: &mut dyn FnMut(&dyn Row) -> bool,
    ) -> Result<(), Failure> {
        Ok(())
    }

    fn begin(&mut self, _: bool) -> Result<(), Failure> {
        Ok(())
    }

    fn end(&mut self, _: bool) -> Result<(), Failure> {
        Ok(())
    }
}

/// A job's work stopped with its own error, which the job keeps (see [`Database::job`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Aborted;

/// Why a job ended without success.
#[derive(Debug)]
pub enum JobError {
    /// The work returned its own error; the transaction was rolled back.
    Aborted,
    /// The database failed around the work: no connection, or beginning or committing the
    /// transaction failed.
    Failed(Failure),
}

/// A job's work, run by a [`Backend`] on a session.
pub type Work<'a> = &'a mut dyn FnMut(&mut dyn Session) -> Result<(), Aborted>;

/// What a job asks of its session.
#[derive(Debug, Clone, Copy)]
pub struct JobKind {
    /// The job changes the database: it runs on the writer.
    pub writes: bool,
    /// The job runs in one transaction (it writes, or reads with several statements).
    pub transaction: bool,
}

/// A database engine: the seam the engine, the protocol and the command line run every
/// statement through. One module per engine implements it (`sqlite`, `postgres`), each behind
/// a cargo feature of the same name, and `ENGINES` lists them; nothing outside this module
/// and the engine's own names a database crate.
pub trait Backend: Send + Sync + 'static {
    /// The engine's SQL dialect: which of a statement's texts it runs.
    fn dialect(&self) -> &'static Dialect;

    /// Runs `work` on a session: a reader, or the writer when `kind.writes` (`None` when the
    /// database is read-only); inside a transaction when `kind.transaction` (see
    /// `in_transaction`), committed when `work` succeeds and rolled back otherwise; stopped
    /// at `stop`'s deadline or cancellation, which fails the running statement with
    /// [`ErrorKind::Interrupted`]. A backend may run `work` again, on a new connection, when
    /// the first died under a read or the transaction lost a conflict.
    fn run(&self, kind: JobKind, stop: &Stop, work: Work<'_>) -> Option<Result<(), JobError>>;

    /// Prepares `sql` and returns the columns it returns; the database's own words when it
    /// does not prepare.
    fn columns(&self, sql: Sql<'_>) -> Result<Vec<Column>, String>;

    /// Prepares `sql` and tells what the database knows of it: its columns (with types and
    /// where they may be NULL) and its placeholders' types, where the database says; the
    /// database's own words when it does not prepare. Nothing runs.
    fn describe(&self, sql: Sql<'_>) -> Result<Described, String> {
        self.columns(sql).map(|columns| Described {
            columns,
            params: Vec::new(),
        })
    }

    /// The database's tables (of the schema the server's statements name unqualified).
    fn tables(&self) -> Result<Vec<String>, String>;

    /// The columns of `table`, in order; empty when there is no such table.
    fn table_columns(&self, table: &str) -> Result<Vec<TableColumn>, String>;

    /// Makes every later write a rehearsal: it runs in a transaction that is rolled back, so
    /// that examples can be tried on a live database without changing it.
    fn rehearse(&mut self);

    /// Whether the database cannot be written through this connection (asked read-only, or
    /// the file cannot be written).
    fn is_read_only(&self) -> bool;

    /// Applies the derived DDL that belongs in the database itself; why it could not, if it
    /// could not. Not fatal by itself: the statements that need what is missing fail the
    /// start-up drift check, which then gives this reason too.
    fn derive_in_place(&self) -> Option<String> {
        None
    }

    /// Where the derived structures are kept when not in the database, for messages.
    fn derived_elsewhere(&self) -> Option<PathBuf> {
        None
    }

    /// Whether a job may run on a worker thread of an async runtime (it never blocks on a
    /// runtime of its own), so that a call is answered without a hand-off.
    fn runs_on_async_worker(&self) -> bool {
        false
    }

    /// Whether a running statement notices [`Stop::now`] as it goes (SQLite's progress
    /// handler does, PostgreSQL's watchdog within its interval), so that a call can act on
    /// turning out slow while it runs.
    fn notices_slow(&self) -> bool {
        false
    }

    /// How many connections the pool holds and how many jobs have one now, for `/metrics`;
    /// `None` when the engine does not say.
    fn pool_use(&self) -> Option<PoolUse> {
        None
    }

    /// How many jobs can have a connection at once: readers, or writers when `writes` (SQLite
    /// has one writer). A tool's calls past it would take a thread only to wait for a
    /// connection, so they wait for a place instead (see `protocol::admission`); `None` when
    /// the engine sets no such bound of its own.
    fn at_once(&self, writes: bool) -> Option<usize> {
        let _ = writes;
        None
    }

    /// The statements of mcpspec's own tables in a database a team of replicas shares (see
    /// [`Team`]); `None` for an engine served by one process (SQLite), which keeps that state
    /// in memory.
    fn team(&self) -> Option<&'static Team> {
        None
    }

    /// The backend itself, for a handler's typed accessor (`Context::sqlite`).
    fn as_any(&self) -> &dyn std::any::Any;
}

/// Runs `work` on `session`, inside a transaction when `transaction`, which is committed when
/// `work` succeeds unless `rehearsal`: the one place a job's transaction is decided.
#[cfg(any(feature = "sqlite", feature = "postgres", feature = "mysql"))]
pub(crate) fn in_transaction(
    session: &mut dyn Session,
    writes: bool,
    transaction: bool,
    rehearsal: bool,
    work: Work<'_>,
) -> Result<(), JobError> {
    if transaction {
        session.begin(writes).map_err(JobError::Failed)?;
    }
    let result = work(session);
    if transaction {
        session
            .end(result.is_ok() && !rehearsal)
            .map_err(JobError::Failed)?;
    }
    result.map_err(|Aborted| JobError::Aborted)
}

/// A database server's connection idle for longer is checked with a round trip before a job
/// gets it, so that a server that restarted meanwhile costs no call an error.
#[cfg_attr(not(any(feature = "postgres", feature = "mysql")), allow(dead_code))]
pub(crate) const IDLE_CHECK: Duration = Duration::from_secs(1);

/// A server's database: the backend its location selected.
pub struct Database(Box<dyn Backend>);

impl Database {
    /// The database over `backend`.
    pub fn new(backend: Box<dyn Backend>) -> Database {
        Database(backend)
    }

    /// Opens the database at `location` for the spec `server` and its database `def`, with
    /// the engine its form selects (see `ENGINES`); derived structures placed as `how` says.
    pub fn open(
        location: &Location,
        server: &str,
        def: &'static DatabaseDef,
        how: Placing,
        timeout: Duration,
    ) -> Result<Database, OpenError> {
        let entry = engine_for(location, server, def)?;
        (entry.open)(&Target {
            location,
            server,
            def,
            how,
            timeout,
        })
        .map(Database)
    }

    /// Makes every later write a rehearsal (see [`Backend::rehearse`]).
    pub fn rehearse(&mut self) {
        self.0.rehearse();
    }

    /// See [`Backend::derive_in_place`].
    pub fn derive_in_place(&self) -> Option<String> {
        self.0.derive_in_place()
    }

    /// See [`Backend::derived_elsewhere`].
    pub fn derived_elsewhere(&self) -> Option<PathBuf> {
        self.0.derived_elsewhere()
    }

    /// The database's dialect.
    pub fn dialect(&self) -> &'static Dialect {
        self.0.dialect()
    }

    /// See [`Backend::is_read_only`].
    pub fn is_read_only(&self) -> bool {
        self.0.is_read_only()
    }

    /// See [`Backend::runs_on_async_worker`].
    pub fn runs_on_async_worker(&self) -> bool {
        self.0.runs_on_async_worker()
    }

    /// See [`Backend::notices_slow`].
    pub fn notices_slow(&self) -> bool {
        self.0.notices_slow()
    }

    /// The backend as its own type, for work that needs the engine itself (a handler's
    /// typed accessor); `None` on another engine.
    pub fn backend<B: Backend>(&self) -> Option<&B> {
        self.0.as_any().downcast_ref()
    }

    /// Runs one job on a session (see [`Backend::run`]): `f`'s own error is the job's, and a
    /// failure around it (no connection, a failed commit) becomes one through `fail`. `None`
    /// when the job writes and the database is read-only.
    pub fn job<T, E>(
        &self,
        writes: bool,
        transaction: bool,
        stop: &Stop,
        fail: impl Fn(Failure) -> E,
        mut f: impl FnMut(&mut dyn Session) -> Result<T, E>,
    ) -> Option<Result<T, E>> {
        let mut out = None;
        let kind = JobKind {
            writes,
            transaction,
        };
        let ran = self.0.run(
            kind,
            stop,
            &mut |session| match traced::traced(session, &mut f) {
                Ok(t) => {
                    out = Some(Ok(t));
                    Ok(())
                }
                Err(e) => {
                    out = Some(Err(e));
                    Err(Aborted)
                }
            },
        )?;
        let lost = || {
            fail(Failure {
                kind: ErrorKind::Other,
                message: "the job ended without running".into(),
                constraint: String::new(),
            })
        };
        Some(match ran {
            Err(JobError::Failed(failure)) => Err(fail(failure)),
            Ok(()) | Err(JobError::Aborted) => out.unwrap_or_else(|| Err(lost())),
        })
    }

    /// See [`Backend::columns`].
    pub fn columns(&self, sql: Sql<'_>) -> Result<Vec<Column>, String> {
        self.0.columns(sql)
    }

    /// See [`Backend::describe`].
    pub fn describe(&self, sql: Sql<'_>) -> Result<Described, String> {
        self.0.describe(sql)
    }

    /// See [`Backend::tables`].
    pub fn tables(&self) -> Result<Vec<String>, String> {
        self.0.tables()
    }

    /// See [`Backend::table_columns`].
    pub fn table_columns(&self, table: &str) -> Result<Vec<TableColumn>, String> {
        self.0.table_columns(table)
    }

    /// See [`Backend::pool_use`].
    pub fn pool_use(&self) -> Option<PoolUse> {
        self.0.pool_use()
    }

    /// How many jobs can have a connection at once (see [`Backend::at_once`]).
    pub(crate) fn at_once(&self, writes: bool) -> Option<usize> {
        self.0.at_once(writes)
    }
}

/// The text of `st` that a database of `dialect` runs: its text for that dialect where it has
/// one, else the text with named parameters.
pub(crate) fn statement_sql(
    st: &'static crate::def::StatementDef,
    dialect: &Dialect,
) -> Sql<'static> {
    match st.text(dialect.name) {
        Some(t) => Sql {
            text: t.sql,
            params: Some(t.params),
            name: st.name,
        },
        None => Sql {
            name: st.name,
            ..Sql::from(st.sql)
        },
    }
}

/// How a database was asked to be opened, for where its derived structures go.
#[derive(Debug, Clone, Copy, Default)]
pub struct Placing {
    /// The database is served read-only.
    pub read_only: bool,
    /// The user allows the derived structures in a database mcpspec did not create
    /// (`serve --derive-in-place`).
    pub in_place: bool,
    /// A check that must leave every file as it was: derived structures in a temporary
    /// directory.
    pub scratch: bool,
}

/// What an engine is asked to open.
pub struct Target<'a> {
    pub location: &'a Location,
    /// The spec's name, for messages and for where derived structures are kept.
    pub server: &'a str,
    pub def: &'static DatabaseDef,
    pub how: Placing,
    /// The call timeout, which a server-side statement timeout follows.
    pub timeout: Duration,
}

/// What a new database is made from.
pub struct Creation<'a> {
    pub location: &'a Location,
    pub def: &'a DatabaseDef,
    /// Whether to load the sample rows.
    pub sample: bool,
}

/// An engine this build can open: its dialect and how it opens and creates databases.
pub(crate) struct EngineEntry {
    pub dialect: &'static Dialect,
    pub open: fn(&Target<'_>) -> Result<Box<dyn Backend>, OpenError>,
    /// Creates the spec's schema (and sample rows) in a new or empty database; whether
    /// sample rows were loaded.
    pub create: fn(&Creation<'_>) -> Result<bool, OpenError>,
    /// A connection that migrates the existing database at a location (read-only unless
    /// asked to write).
    pub migrator: fn(&Location, bool) -> Result<Migrating, OpenError>,
}

/// A connection that migrates one database.
pub type Migrating = Box<dyn migrate::Migrator>;

/// Every engine built in, one per enabled feature.
pub(crate) static ENGINES: &[EngineEntry] = &[
    #[cfg(feature = "sqlite")]
    sqlite::ENGINE,
    #[cfg(feature = "postgres")]
    postgres::ENGINE,
    #[cfg(feature = "mysql")]
    mysql::ENGINE,
];

/// The engine that serves `location` for the spec `server`: the one of the URL's scheme, or
/// SQLite for a file; an error saying why there is none.
fn engine_for(
    location: &Location,
    server: &str,
    def: &DatabaseDef,
) -> Result<&'static EngineEntry, OpenError> {
    let dialect = location.dialect();
    if !dialect.schemes.is_empty() && def.engine(dialect.name).is_none() {
        return Err(OpenError::NotDeclared {
            server: server.to_string(),
            key: dialect.name,
        });
    }
    ENGINES
        .iter()
        .find(|e| e.dialect == dialect)
        .ok_or(OpenError::NotBuilt {
            title: dialect.title,
            feature: dialect.name,
        })
}

/// What `init` runs on a database server's empty database: the side's schema (or all
/// migrations, recorded), then mcpspec's tables for a team of replicas (`team`); and
/// the sample rows when asked. Each database-server engine's `create` starts here.
#[cfg(any(feature = "postgres", feature = "mysql"))]
pub(crate) fn server_creation(
    c: &Creation<'_>,
    dialect: &'static Dialect,
    migrations_ddl: &str,
    team: &Team,
) -> Result<(String, Option<&'static str>), OpenError> {
    let side = c.def.engine(dialect.name);
    let (schema, sample) = side.map_or(("", None), |s| (s.schema, s.sample));
    let ddl = migrate::creation_ddl(c.def, dialect.name, schema, migrations_ddl).map_err(|e| {
        OpenError::Create {
            path: c.location.display(),
            reason: e.to_string(),
        }
    })?;
    let rows = if c.sample { sample } else { None };
    let ddl = team
        .ddl
        .iter()
        .fold(ddl, |ddl, table| migrate::with_statement(&ddl, table));
    Ok((ddl, rows))
}

/// Problems opening or creating a database, each with what to do about it, never with a
/// password.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error(
        "database not found at {path} ({how})\n  set {env_hint}, or create one with: mcpspec init {server} --db {path}{sample}"
    )]
    Missing {
        path: String,
        how: &'static str,
        env_hint: String,
        server: String,
        sample: &'static str,
    },
    #[error("no database path: pass --db PATH{env_hint} (no default location for this system)")]
    NoPath { env_hint: String },
    #[error("cannot open the database at {path}: {reason}")]
    Open { path: String, reason: String },
    #[error(
        "{path} already holds tables ({tables}); mcpspec init never changes an existing database"
    )]
    NotEmpty { path: String, tables: String },
    #[error("cannot create {path}: {reason}")]
    Create { path: String, reason: String },
    #[error("{url} is not a {title} URL: {reason}")]
    Url {
        url: String,
        title: &'static str,
        reason: String,
    },
    #[error("cannot connect to {title} at {url}: {reason}")]
    Connect {
        url: String,
        title: &'static str,
        reason: String,
    },
    #[error("the `{server}` server runs on SQLite only; its spec declares no `{key}:` schema")]
    NotDeclared { server: String, key: &'static str },
    #[error(
        "this build of mcpspec has no {title} engine; build it with the cargo feature `{feature}`"
    )]
    NotBuilt {
        title: &'static str,
        feature: &'static str,
    },
}

/// Where a server's database is: a SQLite file, or a PostgreSQL URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// A file, served by SQLite.
    File(std::path::PathBuf),
    /// A URL of a database server, and the dialect its scheme selects.
    Url(String, &'static Dialect),
}

/// A database location that names no database mcpspec serves. Its messages show the
/// location without its password.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum LocationError {
    #[error(
        "{shown} is a `{scheme}://` URL, which mcpspec does not serve; give a SQLite file path or a URL of {known}"
    )]
    UnknownScheme {
        scheme: String,
        shown: String,
        /// The schemes mcpspec serves, for the message.
        known: String,
    },
    #[error(
        "{shown} looks like a PostgreSQL keyword/value connection string; give it as a URL instead: postgresql://USER:PASSWORD@HOST:PORT/DATABASE (or postgresql:///DATABASE?host=/socket/dir)"
    )]
    KeywordString { shown: String },
}

impl Location {
    /// A URL of a scheme of [`sqlscan::DIALECTS`] (`postgres://`, ...), or a file path; a URL
    /// of another scheme or a libpq keyword string is refused as such, never taken as a file
    /// name.
    pub fn parse(s: &std::ffi::OsStr) -> Result<Location, LocationError> {
        let Some(text) = s.to_str() else {
            return Ok(Location::File(s.into()));
        };
        match sqlscan::form(text) {
            sqlscan::Form::Url(dialect) => Ok(Location::Url(text.to_string(), dialect)),
            sqlscan::Form::File => Ok(Location::File(s.into())),
            sqlscan::Form::OtherScheme(scheme) => Err(LocationError::UnknownScheme {
                scheme,
                shown: redact(text),
                known: sqlscan::DIALECTS
                    .iter()
                    .flat_map(|d| d.schemes)
                    .map(|s| format!("{s}://"))
                    .collect::<Vec<_>>()
                    .join(" or "),
            }),
            sqlscan::Form::KeywordString => Err(LocationError::KeywordString {
                shown: redact(text),
            }),
        }
    }

    /// The location for messages, without a password (see [`redact`]).
    pub fn display(&self) -> String {
        match self {
            Location::File(p) => redact(&p.display().to_string()),
            Location::Url(u, _) => redact(u),
        }
    }

    /// The dialect of the engine that serves the location: SQLite for a file.
    pub fn dialect(&self) -> &'static Dialect {
        match self {
            Location::File(_) => &sqlscan::SQLITE,
            Location::Url(_, d) => d,
        }
    }
}

/// A result column of a prepared statement.
#[derive(Debug, Clone)]
pub struct Column {
    pub name: String,
    /// The database's type, where it has one per column (PostgreSQL; SQLite's columns take
    /// any value), and the names of the declared kinds a value of that type reads as.
    pub typed: Option<(String, &'static [&'static str])>,
    /// The table column it reads (`table.column`) when that column may be NULL, where the
    /// database says ([`Backend::describe`] only).
    pub nullable_from: Option<String>,
}

/// What a database tells of a prepared statement, for checks (`codegen check --db`).
#[derive(Debug, Clone, Default)]
pub struct Described {
    pub columns: Vec<Column>,
    /// The type the database infers for each placeholder, in order; empty when it infers none
    /// (SQLite binds any value anywhere).
    pub params: Vec<ParamType>,
}

/// A placeholder's type as the database inferred it.
#[derive(Debug, Clone)]
pub struct ParamType {
    /// The database's name of the type.
    pub name: String,
    /// The JSON Schema types (`string`, `integer`, ...) of an argument that binds to it.
    pub binds: &'static [&'static str],
}

/// A column of a table, as the database declares it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableColumn {
    pub name: String,
    /// Its declared type, as the database writes it.
    pub ty: String,
    /// Whether an INSERT must set it: NOT NULL, without a default, and not a value the
    /// database assigns (a rowid, an identity or generated column).
    pub required: bool,
}

/// Columns known by name only.
#[cfg(feature = "sqlite")]
pub(crate) fn untyped(names: Vec<String>) -> Vec<Column> {
    names
        .into_iter()
        .map(|name| Column {
            name,
            typed: None,
            nullable_from: None,
        })
        .collect()
}

/// A function that prepares statements against a spec's declared schema, as
/// [`Database::columns`] does against a real database.
pub(crate) type Columns = Box<dyn Fn(&str) -> Result<Vec<Column>, String>>;

/// Prepares statements against `schema` in a scratch in-memory database (SQLite's, the
/// dialect the spec's own schema is written in); `None` when the schema does not load or this
/// build has no SQLite.
pub(crate) fn scratch_columns(schema: &str) -> Option<Columns> {
    #[cfg(feature = "sqlite")]
    {
        let columns = sqlite::scratch(schema)?;
        Some(Box::new(move |sql: &str| columns(sql).map(untyped)))
    }
    #[cfg(not(feature = "sqlite"))]
    {
        let _ = schema;
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A job with `slow`, asked whether it stops before and after `slow` comes due, and
    /// whether it waits for a connection.
    fn asked(slow: &Slow) -> (bool, bool, bool) {
        let stop =
            Stop::after(Duration::from_secs(60), Arc::default()).with_slow(Some(slow.clone()));
        let early = stop.now();
        std::thread::sleep(Duration::from_millis(2));
        (early, stop.now(), stop.waits())
    }

    #[test]
    fn a_slow_job_acts_once_and_stops_only_when_it_gives_way() {
        let runs = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let acting = |after| {
            let counted = runs.clone();
            Slow::new(after, move || {
                counted.fetch_add(1, Ordering::SeqCst);
            })
        };
        let (due, later) = (Duration::from_millis(1), Duration::from_secs(60));
        // (gives way, after, stops early, stops once due, waits for a connection, gave way)
        let cases = [
            (false, due, false, false, true, false),
            (true, due, false, true, false, true),
            (true, later, false, false, false, true),
        ];
        for (i, (gives_way, after, early, stops, waits, gave_way)) in cases.into_iter().enumerate()
        {
            let slow = if gives_way {
                Slow::giving_way(after)
            } else {
                acting(after)
            };
            let (e, d, w) = asked(&slow);
            assert_eq!(
                (e, d, w, slow.gave_way()),
                (early, stops, waits, gave_way),
                "case {i}"
            );
        }
        assert_eq!(runs.load(Ordering::SeqCst), 1, "the action runs once");
        // A job that was never slow never gave way, and a disarmed one never will.
        let quick = Slow::giving_way(later);
        assert!(!quick.disarm());
        assert!(
            !Stop::after(later, Arc::default())
                .with_slow(Some(quick.clone()))
                .now()
        );
        assert!(!quick.gave_way());
    }
}
