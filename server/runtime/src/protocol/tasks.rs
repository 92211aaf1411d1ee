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

use std::sync::mpsc::SyncSender;
use std::sync::{Arc, Mutex, OnceLock};

use rmcp::RoleServer;
use rmcp::model::{CallToolResponse, CallToolResult, ClientCapabilities, CreateTaskResult};
use rmcp::service::RequestContext;
use rmcp::task_manager::{TaskContext, TaskExit, TaskManager, TaskOptions};
use serde_json::{Map, Value};

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

/// Mints a task whose result is what `finish` settles to, and the answer to the call that
/// made it. `reply` hands the task's context to a handler waiting in `ctx.background()`;
/// `cancel` is the call's flag, which `tasks/cancel` sets.
pub(super) fn mint<F>(
    tasks: &TaskManager,
    reply: Option<SyncSender<TaskContext>>,
    cancel: Arc<std::sync::atomic::AtomicBool>,
    finish: F,
) -> CallToolResponse
where
    F: std::future::Future<Output = Result<CallToolResponse, ErrorData>> + Send + 'static,
{
    let task = tasks.spawn(TaskOptions::new(), move |task: TaskContext| {
        if let Some(reply) = reply {
            let _ = reply.send(task.clone());
        }
        Box::pin(async move {
            let asked = task.clone();
            let stopper = tokio::spawn(async move {
                asked.cancelled().await;
                cancel.store(true, std::sync::atomic::Ordering::SeqCst);
            });
            let settled = finish.await;
            stopper.abort();
            settle(settled, task.is_cancel_requested())
        })
    });
    CallToolResponse::Task(CreateTaskResult::new(task))
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
