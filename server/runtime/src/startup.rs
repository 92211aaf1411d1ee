//! Start-up jobs: the calls a spec's `startup:` declares, run once in the background each
//! time the server starts serving.
//!
//! The jobs run in order on a thread of their own, through the same [`Engine::call_with`] as
//! any client's call (validation, SQL or handler, limits, the call log), so `initialize` and
//! the first calls never wait for them. Each outcome is logged to stderr under the target
//! `mcpspec::startup`; a failing job is logged and the next one runs. Shutdown cancels the job
//! running then, as `notifications/cancelled` would. `MCPSPEC_STARTUP_JOBS=off` (or `0`,
//! `false`) skips them all.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use serde_json::Value;

use crate::engine::{CallError, Engine};

/// The variable that switches start-up jobs off.
pub const SWITCH: &str = "MCPSPEC_STARTUP_JOBS";

/// The running jobs of a server; dropping it leaves them running.
pub struct Jobs {
    cancel: Arc<AtomicBool>,
    _thread: Option<std::thread::JoinHandle<()>>,
}

impl Jobs {
    /// Asks the job running now to stop, and skips the rest.
    pub fn cancel(&self) {
        self.cancel.store(true, Ordering::Relaxed);
    }

    /// Waits until every job has run.
    #[cfg(test)]
    pub(crate) fn join(mut self) {
        if let Some(t) = self._thread.take() {
            let _ = t.join();
        }
    }
}

/// Whether the environment switches start-up jobs off.
pub fn switched_off() -> bool {
    std::env::var(SWITCH).is_ok_and(|v| {
        matches!(
            v.trim().to_ascii_lowercase().as_str(),
            "off" | "0" | "false" | "no"
        )
    })
}

/// Starts the server's start-up jobs in the background, unless there are none or they are
/// switched off.
pub fn spawn(engine: Arc<Engine>) -> Jobs {
    let cancel = Arc::new(AtomicBool::new(false));
    let jobs = engine.def.startup;
    if jobs.is_empty() || switched_off() {
        if !jobs.is_empty() {
            tracing::info!(target: "mcpspec::startup", "start-up jobs are switched off by {SWITCH}");
        }
        return Jobs {
            cancel,
            _thread: None,
        };
    }
    let flag = cancel.clone();
    let thread = std::thread::Builder::new()
        .name("mcpspec-startup".into())
        .spawn(move || run(&engine, &flag))
        .map_err(|e| tracing::error!(target: "mcpspec::startup", error = %e, "cannot start the start-up jobs"))
        .ok();
    Jobs {
        cancel,
        _thread: thread,
    }
}

/// Runs every job in order, logging each outcome.
fn run(engine: &Engine, cancel: &Arc<AtomicBool>) {
    for job in engine.def.startup {
        if cancel.load(Ordering::Relaxed) {
            return;
        }
        let started = Instant::now();
        let arguments: Value = serde_json::from_str(job.arguments).unwrap_or_default();
        let outcome = engine.call_with(job.tool, Some(&arguments), Some(cancel.clone()));
        let ms = (started.elapsed().as_secs_f64() * 1e4).round() / 10.0;
        match outcome {
            Ok(s) => tracing::info!(
                target: "mcpspec::startup",
                job = job.tool,
                duration_ms = ms,
                result = %summary(&s.structured),
                "start-up job finished"
            ),
            Err(e) => tracing::warn!(
                target: "mcpspec::startup",
                job = job.tool,
                duration_ms = ms,
                error = %describe(&e),
                "start-up job failed; the server keeps serving"
            ),
        }
    }
}

/// A short view of a result for the log line.
fn summary(v: &Value) -> String {
    crate::protocol::jsonrpc::quote(&v.to_string())
}

fn describe(e: &CallError) -> String {
    match e {
        CallError::Tool(t) => format!("{}: {}", t.code, t.message),
        CallError::Rpc(r) => format!("{}: {}", r.code, r.message),
        CallError::UnknownTool(t) => format!("unknown tool {t}"),
        CallError::MalformedArguments(m) => m.clone(),
    }
}

/// Checks the providers of `engine` on a thread of its own, once the server serves (over
/// stdio, once the session is up: a static model's load never slows `initialize`): each
/// outcome is logged (a failure as a warning, with what calls that embed will meet).
pub fn check_embeddings(engine: &Arc<Engine>) {
    if engine.embeddings().on().next().is_none() {
        return;
    }
    let engine = engine.clone();
    let _ = std::thread::Builder::new()
        .name("mcpspec-embeddings-check".into())
        .spawn(move || {
            for (name, outcome) in engine.embeddings().check_all(START_CHECK) {
                let model = engine.embeddings().model(name).unwrap_or_default();
                match outcome {
                    Ok(took) => tracing::info!(
                        provider = name,
                        model,
                        latency_ms = took.as_millis() as u64,
                        "the embedding provider answered its start-up check"
                    ),
                    Err(e) => tracing::warn!(
                        provider = name,
                        model,
                        "the embedding provider did not answer its start-up check: {e}; calls that embed fail until it does, and searches by keyword still work"
                    ),
                }
            }
        });
}

/// How long the start-up check waits for each embedding provider.
const START_CHECK: std::time::Duration = std::time::Duration::from_secs(30);
