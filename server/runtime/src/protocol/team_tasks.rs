//! Tasks a team of replicas shares through its database (`mcpspec_tasks`, see
//! [`crate::backend::TASKS_TABLE`]): a task of a request without a session (protocol
//! 2026-07-28, reached by its id alone) is recorded when it is minted and again when it
//! settles, with its `tasks/get` answer and the subject of the caller that minted it, so that
//! any replica answers `tasks/get` for it and passes on `tasks/cancel`, to that caller only
//! (another finds no such task). The replica running tasks says so every [`BEAT`] and picks up the
//! cancellations others asked for; a task whose replica stopped saying so for [`STALE`] (it
//! was killed) fails with that reason at the next `tasks/get`. Its questions (`tasks/update`)
//! are answered on the replica that asks them. A task of a session stays in the memory of the
//! replica holding the session, which is the only one that can reach it.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::ErrorData;
use rmcp::model::{CallToolResult, DetailedTask, Task, TaskPayload, TaskStatus};
use rmcp::task_manager::{TaskExit, TaskManager, current_timestamp};
use serde_json::{Map, Value};

use crate::backend::Database;
use crate::clock::unix_ms;

/// How often a replica says it still runs its tasks.
pub const BEAT: Duration = Duration::from_secs(1);

/// How long a task's replica may stay silent before the task counts as failed.
pub const STALE: Duration = Duration::from_secs(15);

/// The team's tasks as this replica sees them.
pub(super) struct Shared {
    db: Arc<Database>,
    /// This process's name among the replicas.
    replica: String,
    /// The tasks this replica runs and recorded, and whether its heartbeat is running.
    running: Mutex<(HashSet<String>, bool)>,
}

/// The error of a database that could not answer, with no location in it.
fn unavailable(reason: &str) -> ErrorData {
    tracing::warn!(reason, "the shared task table could not be read");
    ErrorData::internal_error("the team's task table did not answer; try again", None)
}

/// Runs `f` on the blocking pool (the database clients block).
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, String> + Send + 'static,
) -> Result<T, String> {
    tokio::task::spawn_blocking(f)
        .await
        .unwrap_or_else(|e| Err(e.to_string()))
}

fn to_object<T: serde::Serialize>(v: &T) -> Map<String, Value> {
    match serde_json::to_value(v) {
        Ok(Value::Object(o)) => o,
        _ => Map::new(),
    }
}

/// The `tasks/get` answer of `task` settled as `outcome`, and its status's wire name.
fn settled(mut task: Task, outcome: &Result<CallToolResult, TaskExit>) -> (DetailedTask, String) {
    task.last_updated_at = current_timestamp();
    let payload = match outcome {
        Ok(result) => TaskPayload::Completed {
            result: to_object(result),
        },
        Err(TaskExit::Cancelled) => TaskPayload::Cancelled,
        Err(TaskExit::Error(e)) => TaskPayload::Failed {
            error: to_object(e),
        },
    };
    let detail = DetailedTask::new(task, payload);
    let status = status_name(detail.status());
    (detail, status)
}

fn status_name(status: TaskStatus) -> String {
    serde_json::to_value(status)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// A random name for this process among the replicas: 16 bytes in hex.
fn replica_name() -> String {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b).expect("the operating system's random source is available");
    b.iter().map(|x| format!("{x:02x}")).collect()
}

impl Shared {
    pub(super) fn new(db: Arc<Database>) -> Arc<Shared> {
        Arc::new(Shared {
            db,
            replica: replica_name(),
            running: Mutex::new((HashSet::new(), false)),
        })
    }

    fn running(&self) -> std::sync::MutexGuard<'_, (HashSet<String>, bool)> {
        self.running
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Records a task this replica minted for the caller `subject` and runs with `manager`;
    /// false (said in the log) when the database did not take it, and the task is this
    /// replica's alone.
    pub(super) async fn record(
        self: &Arc<Self>,
        task: &Task,
        subject: Option<&str>,
        manager: &TaskManager,
    ) -> bool {
        let detail = DetailedTask::new(task.clone(), TaskPayload::Working);
        let Ok(detail) = serde_json::to_string(&detail) else {
            return false;
        };
        let expires = unix_ms().saturating_add(2 * RETAINED_MS);
        let (db, id, replica) = (self.db.clone(), task.task_id.clone(), self.replica.clone());
        let owner = subject.map(str::to_string);
        let recorded =
            blocking(move || db.record_task(&id, &replica, owner.as_deref(), &detail, expires))
                .await;
        if let Err(reason) = recorded {
            tracing::warn!(%reason, "a task could not be recorded in the team's task table; only this replica reaches it");
            return false;
        }
        let mut running = self.running();
        running.0.insert(task.task_id.clone());
        if !running.1 {
            running.1 = true;
            tokio::spawn(self.clone().heartbeat(manager.clone()));
        }
        true
    }

    /// Records how a task this replica recorded settled.
    pub(super) async fn settle(&self, task: Task, outcome: &Result<CallToolResult, TaskExit>) {
        let id = task.task_id.clone();
        let (detail, status) = settled(task, outcome);
        let detail = serde_json::to_string(&detail).unwrap_or_default();
        let expires = unix_ms().saturating_add(RETAINED_MS);
        let (db, key) = (self.db.clone(), id.clone());
        match blocking(move || db.settle_task(&key, &status, &detail, expires)).await {
            Ok(true) => {}
            Ok(false) => {
                tracing::warn!(task = %id, "a task settled after the team counted it failed")
            }
            Err(reason) => {
                tracing::warn!(%reason, task = %id, "a task's outcome could not be recorded in the team's task table")
            }
        }
        self.running().0.remove(&id);
    }

    /// Says every [`BEAT`] that this replica still runs its tasks, and cancels those another
    /// replica asked to cancel, for as long as it runs any.
    async fn heartbeat(self: Arc<Self>, manager: TaskManager) {
        loop {
            tokio::time::sleep(BEAT).await;
            {
                let mut running = self.running();
                if running.0.is_empty() {
                    running.1 = false;
                    return;
                }
            }
            let (db, replica) = (self.db.clone(), self.replica.clone());
            match blocking(move || db.beat_tasks(&replica)).await {
                Ok(cancelled) => {
                    let mine: Vec<String> = {
                        let running = self.running();
                        cancelled
                            .into_iter()
                            .filter(|id| running.0.contains(id))
                            .collect()
                    };
                    for id in mine {
                        let _ = manager.cancel_task(&id);
                    }
                }
                Err(reason) => {
                    tracing::warn!(%reason, "could not tell the team that this replica still runs its tasks");
                }
            }
        }
    }

    /// Task `id` as the team's table has it, when the caller `subject` minted it; an unknown
    /// task when it has none or another caller's.
    async fn find(
        &self,
        id: &str,
        subject: Option<&str>,
    ) -> Result<crate::backend::FoundTask, ErrorData> {
        let (db, key) = (self.db.clone(), id.to_string());
        blocking(move || db.find_task(&key))
            .await
            .map_err(|r| unavailable(&r))?
            .filter(|found| found.owner.as_deref() == subject)
            .ok_or_else(|| unknown(id))
    }

    /// `tasks/get` of a task another replica minted: its recorded answer, or failed when its
    /// replica stopped saying it runs it.
    pub(super) async fn get(
        &self,
        id: &str,
        subject: Option<&str>,
    ) -> Result<DetailedTask, ErrorData> {
        let found = self.find(id, subject).await?;
        let mut detail: DetailedTask =
            serde_json::from_str(&found.detail).map_err(|e| unavailable(&e.to_string()))?;
        let stale = unix_ms().saturating_sub(i64::try_from(STALE.as_millis()).unwrap_or(0));
        if found.status == "working" && found.beat_at < stale {
            let error = ErrorData::internal_error(
                format!(
                    "the replica running this task stopped (not heard from for over {} s); run the tool again",
                    STALE.as_secs()
                ),
                None,
            );
            let (failed, _) = settled(detail.task, &Err(TaskExit::Error(error)));
            let text = serde_json::to_string(&failed).unwrap_or_default();
            let (db, key) = (self.db.clone(), id.to_string());
            blocking(move || db.fail_stale_task(&key, &text, stale))
                .await
                .map_err(|r| unavailable(&r))?;
            // Whoever wrote last, the table says what the task came to.
            let settled = self.find(id, subject).await?;
            return serde_json::from_str(&settled.detail).map_err(|e| unavailable(&e.to_string()));
        }
        detail.task.status = detail.payload.status();
        Ok(detail)
    }

    /// `tasks/cancel` of a task another replica runs: asks that replica to cancel it (within
    /// a [`BEAT`]); a task that already settled is left as it is.
    pub(super) async fn cancel(&self, id: &str, subject: Option<&str>) -> Result<(), ErrorData> {
        if self.find(id, subject).await?.status == "working" {
            let (db, key) = (self.db.clone(), id.to_string());
            blocking(move || db.request_task_cancel(&key))
                .await
                .map_err(|r| unavailable(&r))?;
        }
        Ok(())
    }

    /// `tasks/update` of a task another replica runs: its questions are answered there.
    pub(super) async fn update(&self, id: &str, subject: Option<&str>) -> Result<(), ErrorData> {
        self.find(id, subject).await?;
        Err(ErrorData::invalid_params(
            format!(
                "task {} runs on another replica: its questions are answered there (send tasks/update to the replica that asked them)",
                crate::transform::quote(id)
            ),
            None,
        ))
    }
}

/// How long a finished task is kept (rmcp's default, as `tasks::RETAINED`), in milliseconds:
/// for the team's table, and re-used by the tasks of one process.
#[allow(clippy::cast_possible_wrap)]
pub(super) const RETAINED_MS: i64 = rmcp::task_manager::DEFAULT_TASK_TTL_MS as i64;

/// The answer for a task `id` this caller cannot reach: the same as for one never issued.
pub(super) fn unknown(id: &str) -> ErrorData {
    ErrorData::invalid_params(
        format!("unknown task: {}", crate::transform::quote(id)),
        None,
    )
}
