//! mcpspec's own tables in a database that a team of replicas shares (PostgreSQL, MariaDB,
//! MySQL), and the [`Database`] methods that read and write them: the `requestState`s the team
//! redeemed ([`STATES_TABLE`]), so that a state confirms one retry in the whole team, and the
//! tasks its replicas run ([`TASKS_TABLE`]), so that any replica answers `tasks/get` and
//! `tasks/cancel`. The statements are written once, here, with named parameters (`:id`), which
//! each engine places as it prepares them (`$1`, `?`); an engine's [`Team`] adds only what its
//! dialect says its own way: the tables' DDL and recording a state unless it is there.
//! `init` and `migrate` create the tables. SQLite, served by one process, keeps both in
//! memory and has no `Team`.

use std::sync::Arc;
use std::time::Duration;

use super::{Database, Session, Sql, Stop, Value, ValueRef};

/// The table of used request states: a row per redeemed state's nonce until the state
/// expires.
pub const STATES_TABLE: &str = "mcpspec_request_states";

/// The table of tasks: a row per task of a request without a session, with the replica
/// running it, the subject of the caller that minted it (`owner`, NULL without OAuth), its
/// status, its `tasks/get` answer as JSON (`detail`), when its replica last said it still runs
/// it (`beat_at`) and when the row is forgotten (`expires_at`), both in milliseconds since the
/// epoch.
pub const TASKS_TABLE: &str = "mcpspec_tasks";

/// One engine's statements for mcpspec's team tables: its own DDL and state insert, and the
/// shared statements (`SHARED_TASKS`, `STATES_CLEANUP` in this module).
#[derive(Debug)]
pub struct Team {
    /// Creates the tables that are missing (idempotent), one statement each.
    pub ddl: &'static [&'static str],
    /// The columns added to the tables since they were first made, which `migrate` adds to
    /// a table an older mcpspec made.
    pub added: &'static [AddedColumn],
    pub states: SharedStates,
    pub tasks: SharedTasks,
}

/// A column of a team table that an older mcpspec made the table without.
#[derive(Debug)]
pub struct AddedColumn {
    pub table: &'static str,
    pub column: &'static str,
    /// Adds it (`ALTER TABLE ... ADD COLUMN ...`).
    pub ddl: &'static str,
}

/// The column of [`TASKS_TABLE`] that binds a task to its caller (added after the table).
pub const TASK_OWNER: &str = "owner";

/// The statements of [`STATES_TABLE`].
#[derive(Debug)]
pub struct SharedStates {
    /// Records a nonce (`nonce`, `expires`: seconds since the epoch) unless it is there
    /// already: one row changed when the state was unused.
    pub insert: Sql<'static>,
    /// Forgets the nonces of expired states (`now`).
    pub cleanup: Sql<'static>,
}

/// A statement with named parameters, which the engine places as it prepares it.
#[cfg(any(feature = "postgres", feature = "mysql"))]
const fn named(text: &'static str) -> Sql<'static> {
    Sql {
        text,
        params: None,
        name: "",
    }
}

/// Forgets the nonces of expired states (`now`), on every engine.
#[cfg(any(feature = "postgres", feature = "mysql"))]
pub const STATES_CLEANUP: Sql<'static> =
    named("DELETE FROM mcpspec_request_states WHERE expires_at < :now");

/// The column added to [`TASKS_TABLE`] since it was first made, on every engine.
#[cfg(any(feature = "postgres", feature = "mysql"))]
pub const ADDED: &[AddedColumn] = &[AddedColumn {
    table: TASKS_TABLE,
    column: TASK_OWNER,
    ddl: "ALTER TABLE mcpspec_tasks ADD COLUMN owner TEXT",
}];

/// The statements of [`TASKS_TABLE`], on every engine.
#[cfg(any(feature = "postgres", feature = "mysql"))]
pub const SHARED_TASKS: SharedTasks = SharedTasks {
    insert: named(
        "INSERT INTO mcpspec_tasks (id, replica, owner, status, detail, beat_at, expires_at) VALUES (:id, :replica, :owner, 'working', :detail, :now, :expires)",
    ),
    settle: named(
        "UPDATE mcpspec_tasks SET status = :status, detail = :detail, expires_at = :expires WHERE id = :id AND status = 'working'",
    ),
    find: named(
        "SELECT status, detail, beat_at, owner FROM mcpspec_tasks WHERE id = :id AND expires_at >= :now",
    ),
    fail_stale: named(
        "UPDATE mcpspec_tasks SET status = 'failed', detail = :detail WHERE id = :id AND status = 'working' AND beat_at < :stale",
    ),
    cancel: named(
        "UPDATE mcpspec_tasks SET cancel_requested = TRUE WHERE id = :id AND status = 'working'",
    ),
    beat: named(
        "UPDATE mcpspec_tasks SET beat_at = :now WHERE replica = :replica AND status = 'working'",
    ),
    cancelled: named(
        "SELECT id FROM mcpspec_tasks WHERE replica = :replica AND status = 'working' AND cancel_requested",
    ),
    cleanup: named("DELETE FROM mcpspec_tasks WHERE expires_at < :now"),
};

/// The statements of [`TASKS_TABLE`].
#[derive(Debug)]
pub struct SharedTasks {
    /// A new working task (`id`, `replica`, `owner`, `detail`, `now`, `expires`).
    pub insert: Sql<'static>,
    /// A working task settles (`status`, `detail`, `expires`, `id`); no row changes when it
    /// is no longer working.
    pub settle: Sql<'static>,
    /// A task's `status`, `detail`, `beat_at` and `owner`, unless expired (`id`, `now`).
    pub find: Sql<'static>,
    /// A working task whose replica stopped saying so before `stale` fails (`detail`, `id`,
    /// `stale`).
    pub fail_stale: Sql<'static>,
    /// Asks the replica running a working task to cancel it (`id`).
    pub cancel: Sql<'static>,
    /// A replica says it still runs its working tasks (`now`, `replica`).
    pub beat: Sql<'static>,
    /// The ids of a replica's working tasks that another replica asked to cancel (`replica`).
    pub cancelled: Sql<'static>,
    /// Forgets expired tasks (`now`).
    pub cleanup: Sql<'static>,
}

/// A task as [`TASKS_TABLE`] holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoundTask {
    pub status: String,
    /// The task's `tasks/get` answer, as JSON.
    pub detail: String,
    /// When its replica last said it runs it, in milliseconds since the epoch.
    pub beat_at: i64,
    /// The subject of the caller that minted it; `None` without OAuth.
    pub owner: Option<String>,
}

/// The database of a team's shared state for a server that has none of its own (or whose own
/// is SQLite, served by one process): a database server's database where mcpspec keeps only
/// its own tables. Its side of every engine that keeps team tables, with nothing of a spec.
static STATE_SIDES: [crate::def::EngineDef; 2] = [
    crate::def::EngineDef {
        dialect: "postgres",
        env: None,
        schema: "",
        sample: None,
        identity: None,
    },
    crate::def::EngineDef {
        dialect: "mysql",
        env: None,
        schema: "",
        sample: None,
        identity: None,
    },
];

static STATE_DEF: crate::def::DatabaseDef = crate::def::DatabaseDef {
    env: None,
    default_linux: None,
    default_macos: None,
    default_windows: None,
    read_only: false,
    schema: "",
    derived: "",
    sample: None,
    engines: &STATE_SIDES,
    migrations: &[],
};

/// Opens the team's state database at `location` (`MCPSPEC_REQUEST_STATE_DB`), making
/// mcpspec's own tables there when they are missing (the user named it for them) and nothing
/// else: a database server's, since SQLite is served by one process.
pub fn state_database(location: &super::Location) -> Result<Arc<Database>, String> {
    const NAME: &str = "the request-state database";
    if location.dialect().schemes.is_empty() {
        return Err(format!(
            "{NAME} must be a PostgreSQL or MariaDB/MySQL URL: a SQLite file is served by one process, which remembers its own states"
        ));
    }
    let mut m = super::migrator(location, NAME, &STATE_DEF, true).map_err(|e| e.to_string())?;
    super::migrate::system_only(&mut *m).map_err(|e| e.to_string())?;
    let db = Database::open(
        location,
        NAME,
        &STATE_DEF,
        super::Placing::default(),
        Duration::from_secs(10),
    )
    .map_err(|e| e.to_string())?;
    match db.shares_states() {
        Some(true) => Ok(Arc::new(db)),
        _ => Err(format!("{NAME} has no table for used states")),
    }
}

/// A statement's parameters by name; a name not given binds NULL.
fn binding<'a>(pairs: &'a [(&'a str, Value)]) -> impl Fn(&str) -> Value + 'a {
    move |name| {
        pairs
            .iter()
            .find(|(n, _)| *n == name)
            .map_or(Value::Null, |(_, v)| v.clone())
    }
}

fn text(v: ValueRef<'_>) -> String {
    match v {
        ValueRef::Text(b) | ValueRef::Blob(b) => String::from_utf8_lossy(b).into_owned(),
        ValueRef::Integer(n) => n.to_string(),
        ValueRef::Real(f) => f.to_string(),
        ValueRef::Null => String::new(),
    }
}

impl Database {
    /// The engine's team tables, `None` for an engine served by one process.
    fn team(&self) -> Option<&'static Team> {
        self.0.team()
    }

    /// Whether `table` of the team tables exists: `None` for an engine served by one
    /// process.
    fn has_team_table(&self, table: &str) -> Option<bool> {
        self.team()?;
        Some(self.tables().is_ok_and(|t| t.iter().any(|t| t == table)))
    }

    /// Whether the used request states can be recorded in this database for the whole team:
    /// `None` for an engine served by one process, else whether its [`STATES_TABLE`] exists.
    pub fn shares_states(&self) -> Option<bool> {
        self.has_team_table(STATES_TABLE)
    }

    /// Whether tasks can be kept in this database for the whole team: `None` for an engine
    /// served by one process, else whether its [`TASKS_TABLE`] exists with the column that
    /// binds a task to its caller ([`TASK_OWNER`]; `migrate` adds it to an older table).
    pub fn shares_tasks(&self) -> Option<bool> {
        let exists = self.has_team_table(TASKS_TABLE)?;
        Some(
            exists
                && self
                    .0
                    .table_columns(TASKS_TABLE)
                    .is_ok_and(|c| c.iter().any(|c| c.name == TASK_OWNER)),
        )
    }

    /// Runs `work` with the team's statements in one writing transaction, bounded to ten
    /// seconds.
    fn team_job<T>(
        &self,
        work: impl FnMut(&mut dyn Session, &'static Team) -> Result<T, String>,
    ) -> Result<T, String> {
        let mut work = work;
        let team = self
            .team()
            .ok_or_else(|| "this engine keeps no team tables".to_string())?;
        let stop = Stop::after(Duration::from_secs(10), Arc::default());
        self.job(true, true, &stop, |f| f.message, |s| work(s, team))
            .unwrap_or_else(|| Err("the database is served read-only".into()))
    }

    /// Runs the one statement `pick` chooses with `pairs` bound: how many rows it changed.
    fn team_execute(
        &self,
        pick: fn(&'static Team) -> Sql<'static>,
        pairs: &[(&str, Value)],
    ) -> Result<u64, String> {
        let bind = binding(pairs);
        self.team_job(|session, team| {
            session
                .execute(pick(team), &bind)
                .map(|c| c.changes)
                .map_err(|f| f.message)
        })
    }

    /// Records that the state with `nonce`, which expires in `ttl`, was used: `Ok(true)` when
    /// it was not used before anywhere in the team, `Ok(false)` when it was; why not, when the
    /// database could not say. Expired rows are forgotten now and then.
    pub fn redeem_state(&self, nonce: &str, ttl: Duration) -> Result<bool, String> {
        let now = crate::clock::unix_ms() / 1000;
        let expires = now.saturating_add(i64::try_from(ttl.as_secs()).unwrap_or(i64::MAX));
        let pairs = [
            ("nonce", Value::Text(nonce.to_string())),
            ("expires", Value::Integer(expires)),
            ("now", Value::Integer(now)),
        ];
        let bind = binding(&pairs);
        self.team_job(|session, team| {
            if now % 16 == 0 {
                session
                    .execute(team.states.cleanup, &bind)
                    .map_err(|f| f.message)?;
            }
            let changed = session
                .execute(team.states.insert, &bind)
                .map_err(|f| f.message)?;
            Ok(changed.changes == 1)
        })
    }

    /// Records a new working task `id` that `replica` runs for the caller `owner`, whose
    /// `tasks/get` answer is `detail`, kept until `expires` (ms). Expired tasks are forgotten
    /// now and then.
    pub fn record_task(
        &self,
        id: &str,
        replica: &str,
        owner: Option<&str>,
        detail: &str,
        expires: i64,
    ) -> Result<(), String> {
        let now = crate::clock::unix_ms();
        let pairs = [
            ("id", Value::Text(id.to_string())),
            ("replica", Value::Text(replica.to_string())),
            (
                "owner",
                owner.map_or(Value::Null, |o| Value::Text(o.to_string())),
            ),
            ("detail", Value::Text(detail.to_string())),
            ("now", Value::Integer(now)),
            ("expires", Value::Integer(expires)),
        ];
        let bind = binding(&pairs);
        self.team_job(|session, team| {
            if (now / 1000) % 16 == 0 {
                session
                    .execute(team.tasks.cleanup, &bind)
                    .map_err(|f| f.message)?;
            }
            session
                .execute(team.tasks.insert, &bind)
                .map_err(|f| f.message)?;
            Ok(())
        })
    }

    /// Settles working task `id` to `status` with its final `detail`, kept until `expires`
    /// (ms): false when it was no longer working (it failed as stale meanwhile).
    pub fn settle_task(
        &self,
        id: &str,
        status: &str,
        detail: &str,
        expires: i64,
    ) -> Result<bool, String> {
        let pairs = [
            ("id", Value::Text(id.to_string())),
            ("status", Value::Text(status.to_string())),
            ("detail", Value::Text(detail.to_string())),
            ("expires", Value::Integer(expires)),
        ];
        Ok(self.team_execute(|t| t.tasks.settle, &pairs)? == 1)
    }

    /// Task `id` as the team keeps it, unless unknown or expired.
    pub fn find_task(&self, id: &str) -> Result<Option<FoundTask>, String> {
        let pairs = [
            ("id", Value::Text(id.to_string())),
            ("now", Value::Integer(crate::clock::unix_ms())),
        ];
        let bind = binding(&pairs);
        self.team_job(|session, team| {
            let mut found = None;
            session
                .query(team.tasks.find, &bind, &mut |row| {
                    let beat_at = match row.value(2) {
                        ValueRef::Integer(n) => n,
                        other => text(other).parse().unwrap_or(0),
                    };
                    let owner = match row.value(3) {
                        ValueRef::Null => None,
                        other => Some(text(other)),
                    };
                    found = Some(FoundTask {
                        status: text(row.value(0)),
                        detail: text(row.value(1)),
                        beat_at,
                        owner,
                    });
                    false
                })
                .map_err(|f| f.message)?;
            Ok(found)
        })
    }

    /// Fails working task `id` with `detail` when its replica last said it runs it before
    /// `stale` (ms): whether it did.
    pub fn fail_stale_task(&self, id: &str, detail: &str, stale: i64) -> Result<bool, String> {
        let pairs = [
            ("id", Value::Text(id.to_string())),
            ("detail", Value::Text(detail.to_string())),
            ("stale", Value::Integer(stale)),
        ];
        Ok(self.team_execute(|t| t.tasks.fail_stale, &pairs)? == 1)
    }

    /// Asks the replica running working task `id` to cancel it.
    pub fn request_task_cancel(&self, id: &str) -> Result<(), String> {
        let pairs = [("id", Value::Text(id.to_string()))];
        self.team_execute(|t| t.tasks.cancel, &pairs).map(drop)
    }

    /// `replica` says it still runs its working tasks: the ids of those another replica
    /// asked to cancel.
    pub fn beat_tasks(&self, replica: &str) -> Result<Vec<String>, String> {
        let pairs = [
            ("replica", Value::Text(replica.to_string())),
            ("now", Value::Integer(crate::clock::unix_ms())),
        ];
        let bind = binding(&pairs);
        self.team_job(|session, team| {
            session
                .execute(team.tasks.beat, &bind)
                .map_err(|f| f.message)?;
            let mut ids = Vec::new();
            session
                .query(team.tasks.cancelled, &bind, &mut |row| {
                    ids.push(text(row.value(0)));
                    true
                })
                .map_err(|f| f.message)?;
            Ok(ids)
        })
    }
}

#[cfg(all(test, any(feature = "postgres", feature = "mysql")))]
mod tests {
    use super::*;

    /// The shared statements, placed as each engine places them when it prepares them: the
    /// texts each engine wrote by hand before they were written once.
    #[test]
    fn the_shared_statements_place_as_each_engine_wrote_them() {
        let placed = |sql: Sql<'static>, d: &sqlscan::Dialect| {
            let p = d.place(sql.text);
            (p.text, p.names.join(" "))
        };
        let t = SHARED_TASKS;
        let cases = [
            (
                t.insert,
                "INSERT INTO mcpspec_tasks (id, replica, owner, status, detail, beat_at, expires_at) VALUES ($1, $2, $3, 'working', $4, $5, $6)",
                "INSERT INTO mcpspec_tasks (id, replica, owner, status, detail, beat_at, expires_at) VALUES (?, ?, ?, 'working', ?, ?, ?)",
                "id replica owner detail now expires",
            ),
            (
                t.settle,
                "UPDATE mcpspec_tasks SET status = $1, detail = $2, expires_at = $3 WHERE id = $4 AND status = 'working'",
                "UPDATE mcpspec_tasks SET status = ?, detail = ?, expires_at = ? WHERE id = ? AND status = 'working'",
                "status detail expires id",
            ),
            (
                t.find,
                "SELECT status, detail, beat_at, owner FROM mcpspec_tasks WHERE id = $1 AND expires_at >= $2",
                "SELECT status, detail, beat_at, owner FROM mcpspec_tasks WHERE id = ? AND expires_at >= ?",
                "id now",
            ),
            (
                t.fail_stale,
                "UPDATE mcpspec_tasks SET status = 'failed', detail = $1 WHERE id = $2 AND status = 'working' AND beat_at < $3",
                "UPDATE mcpspec_tasks SET status = 'failed', detail = ? WHERE id = ? AND status = 'working' AND beat_at < ?",
                "detail id stale",
            ),
            (
                t.beat,
                "UPDATE mcpspec_tasks SET beat_at = $1 WHERE replica = $2 AND status = 'working'",
                "UPDATE mcpspec_tasks SET beat_at = ? WHERE replica = ? AND status = 'working'",
                "now replica",
            ),
            (
                STATES_CLEANUP,
                "DELETE FROM mcpspec_request_states WHERE expires_at < $1",
                "DELETE FROM mcpspec_request_states WHERE expires_at < ?",
                "now",
            ),
        ];
        for (sql, postgres, mysql, names) in cases {
            assert_eq!(
                placed(sql, &sqlscan::POSTGRES),
                (postgres.to_string(), names.to_string())
            );
            assert_eq!(
                placed(sql, &sqlscan::MYSQL),
                (mysql.to_string(), names.to_string())
            );
        }
    }
}
