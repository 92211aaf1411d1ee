//! The tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663): a call of a tool whose spec
//! says `task:` may answer with a task id when the client declared the extension; the
//! client polls `tasks/get` for the state and the inlined result, answers the task's questions
//! with `tasks/update` and may stop it with `tasks/cancel`.
//!
//! A SQL or content tool's call becomes a task when it runs past `MCPSPEC_TASK_AFTER_MS`
//! (after its confirmation, which is asked first). A handler's call becomes one when the handler calls `ctx.background()`, so it
//! can ask the client through `input_required` rounds first and then go on in the background;
//! its questions after that wait for `tasks/update`. Tasks live in the memory of the process
//! that minted them (rmcp's [`TaskManager`]), for five minutes after creation and as long
//! again once they finished.
//!
//! [`Tasks`] bounds them: a session holds at most [`TASKS_PER_SESSION`] tasks and the process
//! [`TASKS_TOTAL`]; beyond, a call that may run as a task answers in its request instead and
//! one that must is refused with a clear error. A result over [`INLINE_RESULT_BYTES`] is kept
//! in a file of the process's own temporary directory (at most [`STORED_RESULT_BYTES`] in
//! all), not in memory. A task is its caller's: `tasks/get`, `tasks/update` and
//! `tasks/cancel` from another session, or with another subject's access token, find no such
//! task (the same answer as for an id never issued). Requests of protocol 2026-07-28 have no
//! session; their tasks are reached by id, a random UUID, and the caller's subject when there
//! is one, and on a database a team of replicas shares, from any replica (see
//! [`super::team_tasks`], where the subject is kept with the task).

use std::sync::mpsc::SyncSender;
use std::sync::{Arc, Mutex, OnceLock};

use rmcp::RoleServer;
use rmcp::model::{CallToolResponse, CallToolResult, ClientCapabilities, CreateTaskResult};
use rmcp::service::RequestContext;
use rmcp::task_manager::{TaskContext, TaskExit, TaskManager, TaskOptions};
use serde_json::{Map, Value};

use super::team_tasks::{Shared, unknown};
use crate::def::TaskSupport;
use crate::handler::Unanswered;
use rmcp::ErrorData;

/// Whether a call of a tool with `support` runs as a task: only when the request (or the
/// session's `initialize`) declared the extension. A tool that runs only as a task is -32021
/// to a client that did not.
pub(super) fn eligible(
    support: Option<TaskSupport>,
    context: &RequestContext<RoleServer>,
) -> Result<bool, ErrorData> {
    let Some(support) = support else {
        return Ok(false);
    };
    let declared = context
        .client_capabilities()
        .is_some_and(|c| c.supports_tasks());
    match (support, declared) {
        (TaskSupport::Required, false) => Err(ErrorData::missing_required_client_capability(
            ClientCapabilities::builder().enable_tasks().build(),
        )),
        (_, declared) => Ok(declared),
    }
}

/// How a handler's call becomes a task: `ctx.background()` asks the call to mint it and
/// waits for the task's context, through which later questions go.
pub(super) struct TaskSlot {
    mint: Mutex<Option<tokio::sync::oneshot::Sender<SyncSender<TaskContext>>>>,
    context: OnceLock<TaskContext>,
}

/// What `call_tool` waits on besides the call: a handler's request to become a task.
pub(super) type MintRequest = tokio::sync::oneshot::Receiver<SyncSender<TaskContext>>;

impl TaskSlot {
    pub(super) fn new() -> (Arc<TaskSlot>, MintRequest) {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let slot = TaskSlot {
            mint: Mutex::new(Some(tx)),
            context: OnceLock::new(),
        };
        (Arc::new(slot), rx)
    }

    /// From the handler's thread: makes the call a task (once) and blocks until it is one;
    /// false if the call can no longer become one.
    pub(super) fn background(&self) -> bool {
        if self.context.get().is_some() {
            return true;
        }
        let Some(mint) = self.mint.lock().ok().and_then(|mut m| m.take()) else {
            return false;
        };
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        if mint.send(tx).is_err() {
            return false;
        }
        match rx.recv() {
            Ok(context) => self.context.set(context).is_ok(),
            Err(_) => false,
        }
    }

    /// The task's context once the call is a task.
    pub(super) fn context(&self) -> Option<&TaskContext> {
        self.context.get()
    }
}

/// Asks every question at once as the task's input requests (so several can be pending
/// together) and waits for the answers that `tasks/update` brings.
pub(super) async fn ask(
    task: TaskContext,
    questions: Vec<(String, rmcp::model::InputRequest)>,
) -> Result<Map<String, Value>, Unanswered> {
    let pending: Vec<_> = questions
        .into_iter()
        .map(|(key, request)| {
            let task = task.clone();
            tokio::spawn(async move { (key.clone(), task.request_input(key, request).await) })
        })
        .collect();
    let mut answers = Map::new();
    for p in pending {
        match p.await {
            Ok((key, Ok(answer))) => {
                answers.insert(key, answer);
            }
            Ok((_, Err(TaskExit::Cancelled))) => {
                return Err(Unanswered::Failed("the task was cancelled".into()));
            }
            Ok((_, Err(TaskExit::Error(e)))) => return Err(Unanswered::Failed(e.message.into())),
            Err(e) => return Err(Unanswered::Failed(e.to_string())),
        }
    }
    Ok(answers)
}

/// The most tasks one session holds, running or kept for polling.
pub const TASKS_PER_SESSION: usize = 64;

/// The most tasks the process holds.
pub const TASKS_TOTAL: usize = 1024;

/// A task result larger than this (as JSON) is kept in a file rather than in memory.
pub const INLINE_RESULT_BYTES: usize = 16 * 1024;

/// The most bytes of task results kept in files at once.
pub const STORED_RESULT_BYTES: u64 = 512 * 1024 * 1024;

/// How long a task is kept: from its creation while it runs, and again once it settled
/// (rmcp's own retention, mirrored here to forget what rmcp forgot).
const RETAINED: std::time::Duration =
    std::time::Duration::from_millis(rmcp::task_manager::DEFAULT_TASK_TTL_MS);

/// Who may reach a task: the session that minted it (or any, for a task minted without one),
/// and the subject of the access token that minted it (or none, without OAuth).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Owner {
    session: Option<u64>,
    subject: Option<Arc<str>>,
}

impl Owner {
    /// The owner of a request of `session` (none for protocol 2026-07-28) by `subject`.
    pub(super) fn new(session: Option<u64>, subject: Option<&str>) -> Owner {
        Owner {
            session,
            subject: subject.map(Arc::from),
        }
    }

    /// The subject, as the team's table keeps it.
    pub(super) fn subject(&self) -> Option<&str> {
        self.subject.as_deref()
    }

    /// Whether a request of `self` may reach a task of `task`: the same subject, and the same
    /// session unless the task has none.
    fn reaches(&self, task: &Owner) -> bool {
        self.subject == task.subject && (task.session.is_none() || task.session == self.session)
    }
}

/// The process's tasks: rmcp's manager and what bounds it (see the module comment), and the
/// team's table when the database is shared.
#[derive(Clone, Default)]
pub(super) struct Tasks {
    manager: TaskManager,
    held: Arc<Mutex<Held>>,
    team: Option<Arc<Shared>>,
}

#[derive(Default)]
struct Held {
    entries: std::collections::HashMap<String, Entry>,
    stored_bytes: u64,
    /// Where large results are kept; made on first use, removed with the process's tasks.
    dir: Option<tempfile::TempDir>,
}

struct Entry {
    owner: Owner,
    created: std::time::Instant,
    settled: Option<std::time::Instant>,
    /// The file holding the result, and its size.
    file: Option<(std::path::PathBuf, u64)>,
}

impl Held {
    /// Forgets the tasks rmcp no longer keeps, with their files.
    fn sweep(&mut self) {
        let now = std::time::Instant::now();
        let mut freed = 0;
        self.entries.retain(|_, e| {
            let ended = e.settled.unwrap_or(e.created + RETAINED);
            let keep = now < ended + RETAINED;
            if !keep && let Some((path, size)) = &e.file {
                let _ = std::fs::remove_file(path);
                freed += size;
            }
            keep
        });
        self.stored_bytes -= freed;
    }

    /// Why `owner` may not hold another task, if it may not: a tool error the model can act
    /// on (wait, or cancel a task).
    fn full(&self, owner: &Owner) -> Option<crate::engine::ToolError> {
        let mine = self
            .entries
            .values()
            .filter(|e| e.owner.session == owner.session)
            .count();
        let (held, limit, whose) = if self.entries.len() >= TASKS_TOTAL {
            (self.entries.len(), TASKS_TOTAL, "the server")
        } else if owner.session.is_some() && mine >= TASKS_PER_SESSION {
            (mine, TASKS_PER_SESSION, "this session")
        } else {
            return None;
        };
        Some(crate::engine::ToolError {
            code: "TOO_MANY_TASKS",
            message: format!(
                "too many tasks: {whose} holds {held} (at most {limit}); wait for them to finish or cancel some with tasks/cancel"
            ),
            data: Some(serde_json::json!({"held": held, "limit": limit})),
        })
    }

    /// Keeps `result` of task `id` in a file when it is large: the placeholder rmcp keeps
    /// instead, or an error when the files would grow past their budget.
    fn store(&mut self, id: &str, result: CallToolResult) -> Result<CallToolResult, TaskExit> {
        let Ok(text) = serde_json::to_vec(&result) else {
            return Ok(result);
        };
        if text.len() <= INLINE_RESULT_BYTES {
            return Ok(result);
        }
        let size = text.len() as u64;
        if self.stored_bytes + size > STORED_RESULT_BYTES {
            return Err(TaskExit::Error(ErrorData::internal_error(
                "the server keeps too many large task results; fetch or cancel earlier tasks first",
                None,
            )));
        }
        let written = self
            .dir()
            .map(|d| d.join(format!("{id}.json")))
            .and_then(|path| std::fs::write(&path, &text).map(|()| path));
        match written {
            Ok(path) => {
                self.stored_bytes += size;
                if let Some(e) = self.entries.get_mut(id) {
                    e.file = Some((path, size));
                }
                Ok(CallToolResult::success(Vec::new()))
            }
            Err(e) => {
                tracing::warn!(error = %e, "a large task result could not be kept in a file; keeping it in memory");
                Ok(result)
            }
        }
    }

    fn dir(&mut self) -> std::io::Result<std::path::PathBuf> {
        if self.dir.is_none() {
            self.dir = Some(
                tempfile::Builder::new()
                    .prefix("mcpspec-tasks-")
                    .tempdir()?,
            );
        }
        Ok(self
            .dir
            .as_ref()
            .map(|d| d.path().to_path_buf())
            .unwrap_or_default())
    }
}

impl Tasks {
    fn lock(&self) -> std::sync::MutexGuard<'_, Held> {
        self.held
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Why `owner` may not start another task now, if it may not.
    pub(super) fn refused(&self, owner: &Owner) -> Option<crate::engine::ToolError> {
        let mut held = self.lock();
        held.sweep();
        held.full(owner)
    }

    /// Tasks that a team of replicas on `db` shares (see [`super::team_tasks`]).
    pub(super) fn shared(db: Arc<crate::backend::Database>) -> Tasks {
        Tasks {
            team: Some(Shared::new(db)),
            ..Tasks::default()
        }
    }

    /// The team's table, for a task of `owner`: only tasks without a session are the team's.
    fn team(&self, owner: &Owner) -> Option<&Arc<Shared>> {
        self.team.as_ref().filter(|_| owner.session.is_none())
    }

    /// Mints a task of `owner` whose result is what `finish` settles to, and the answer to
    /// the call that made it, once the team's table (if any) has the task. `reply` hands the
    /// task's context to a handler waiting in `ctx.background()`; `cancel` is the call's
    /// flag, which `tasks/cancel` sets. The caller asked [`Tasks::refused`] first.
    pub(super) async fn mint<F>(
        &self,
        owner: Owner,
        reply: Option<SyncSender<TaskContext>>,
        cancel: Arc<std::sync::atomic::AtomicBool>,
        finish: F,
    ) -> CallToolResponse
    where
        F: std::future::Future<Output = Result<CallToolResponse, ErrorData>> + Send + 'static,
    {
        let store = self.clone();
        let team = self.team(&owner).cloned();
        let subject = owner.subject.clone();
        let (recorded, was_recorded) = tokio::sync::oneshot::channel::<()>();
        let task = self
            .manager
            .spawn(TaskOptions::new(), move |task: TaskContext| {
                store.lock().entries.insert(
                    task.task_id().to_string(),
                    Entry {
                        owner,
                        created: std::time::Instant::now(),
                        settled: None,
                        file: None,
                    },
                );
                if let Some(reply) = reply {
                    let _ = reply.send(task.clone());
                }
                Box::pin(async move {
                    let team = store.record(team, task.task_id(), subject.as_deref()).await;
                    let _ = recorded.send(());
                    let asked = task.clone();
                    let stopper = tokio::spawn(async move {
                        asked.cancelled().await;
                        cancel.store(true, std::sync::atomic::Ordering::SeqCst);
                    });
                    let settled = finish.await;
                    stopper.abort();
                    let outcome = settle(settled, task.is_cancel_requested());
                    if let Some((team, meta)) = team {
                        team.settle(meta, &outcome).await;
                    }
                    let mut held = store.lock();
                    if let Some(e) = held.entries.get_mut(task.task_id()) {
                        e.settled = Some(std::time::Instant::now());
                    }
                    outcome.and_then(|r| held.store(task.task_id(), r))
                })
            });
        let _ = was_recorded.await;
        CallToolResponse::Task(CreateTaskResult::new(task))
    }

    /// Records task `id` in the team's table when there is one: the table and the task as
    /// minted, when it took it.
    async fn record(
        &self,
        team: Option<Arc<Shared>>,
        id: &str,
        subject: Option<&str>,
    ) -> Option<(Arc<Shared>, rmcp::model::Task)> {
        let team = team?;
        let meta = self.manager.get_task(id).ok()?.task;
        team.record(&meta, subject, &self.manager)
            .await
            .then_some((team, meta))
    }

    /// Whether `owner` may reach task `id`: one the process holds, of the same subject and
    /// session (see [`Owner`]). Any other id is an unknown task, quoted back bounded.
    fn reaches(&self, owner: &Owner, id: &str) -> Result<(), ErrorData> {
        let mut held = self.lock();
        held.sweep();
        match held.entries.get(id) {
            Some(e) if owner.reaches(&e.owner) => Ok(()),
            _ => Err(unknown(id)),
        }
    }

    /// `tasks/get`: the task's state, its result read back from its file when kept there; a
    /// task of the team that another replica minted, as the team's table has it.
    pub(super) async fn get(
        &self,
        owner: Owner,
        id: &str,
    ) -> Result<rmcp::model::DetailedTask, ErrorData> {
        match (self.reaches(&owner, id), self.team(&owner)) {
            (Ok(()), _) => self.get_here(id),
            (Err(_), Some(team)) => team.get(id, owner.subject()).await,
            (Err(e), None) => Err(e),
        }
    }

    fn get_here(&self, id: &str) -> Result<rmcp::model::DetailedTask, ErrorData> {
        let mut task = self.manager.get_task(id)?;
        let file = self.lock().entries.get(id).and_then(|e| e.file.clone());
        if let (Some((path, _)), rmcp::model::TaskPayload::Completed { result }) =
            (file, &mut task.payload)
        {
            let kept = std::fs::read(&path)
                .ok()
                .and_then(|b| serde_json::from_slice::<Map<String, Value>>(&b).ok());
            match kept {
                Some(r) => *result = r,
                None => {
                    return Err(ErrorData::internal_error(
                        "the task's result could not be read back",
                        None,
                    ));
                }
            }
        }
        Ok(task)
    }

    /// `tasks/update`.
    pub(super) async fn update(
        &self,
        owner: Owner,
        id: &str,
        responses: impl IntoIterator<Item = (String, Value)>,
    ) -> Result<(), ErrorData> {
        match (self.reaches(&owner, id), self.team(&owner)) {
            (Ok(()), _) => self.manager.update_task(id, responses),
            (Err(_), Some(team)) => team.update(id, owner.subject()).await,
            (Err(e), None) => Err(e),
        }
    }

    /// `tasks/cancel`.
    pub(super) async fn cancel(&self, owner: Owner, id: &str) -> Result<(), ErrorData> {
        match (self.reaches(&owner, id), self.team(&owner)) {
            (Ok(()), _) => self.manager.cancel_task(id),
            (Err(_), Some(team)) => team.cancel(id, owner.subject()).await,
            (Err(e), None) => Err(e),
        }
    }
}

/// A task's terminal state: its tool result (`completed`, a tool error included), a protocol
/// error (`failed`), or `cancelled` when `tasks/cancel` stopped it before it succeeded.
fn settle(
    settled: Result<CallToolResponse, ErrorData>,
    cancel_requested: bool,
) -> Result<CallToolResult, TaskExit> {
    match settled {
        Ok(CallToolResponse::Complete(r)) if cancel_requested && r.is_error == Some(true) => {
            Err(TaskExit::Cancelled)
        }
        Ok(CallToolResponse::Complete(r)) => Ok(r),
        Ok(_) => Err(TaskExit::Error(ErrorData::internal_error(
            "the task's handler asked the client after it left the request; ask before ctx.background()",
            None,
        ))),
        Err(_) if cancel_requested => Err(TaskExit::Cancelled),
        Err(e) => Err(TaskExit::Error(e)),
    }
}
