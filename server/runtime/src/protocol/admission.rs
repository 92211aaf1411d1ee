//! How many calls of one tool run at once. Calls run on tokio's blocking pool
//! ([`BLOCKING_THREADS`] threads); without a bound, a burst of slow calls of one tool (long
//! searches waiting for a reader connection, imports that never end, handlers that ignore
//! their cancellation) takes every thread and a quick call of another tool waits behind them.
//! Each tool may have [`CALLS_PER_TOOL`] calls running; more wait, without a thread, until one
//! ends or their deadline passes (then they are answered `TIMEOUT`). A call keeps its place
//! until its work has really ended, not only until it was answered, so that work a handler
//! does past its deadline still counts against its own tool and never against the others.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::backend::Stop;

/// The most threads the blocking pool runs at once.
pub const BLOCKING_THREADS: usize = 64;

/// The most calls of one tool that run at once: a quarter of the pool, so that slow calls of
/// up to three tools leave room for everything else.
pub const CALLS_PER_TOOL: usize = BLOCKING_THREADS / 4;

/// The places of every tool, shared by every session of the process.
#[derive(Default)]
pub(super) struct Admission {
    tools: Mutex<HashMap<String, Arc<Semaphore>>>,
}

impl Admission {
    /// A place for a call of `tool`, a tool the server has: at once when one is free, else
    /// once one is; `None` when `stop` expires (or is cancelled) first.
    pub(super) async fn enter(&self, tool: &str, stop: &Stop) -> Option<OwnedSemaphorePermit> {
        let places = {
            let mut tools = self.tools.lock().unwrap_or_else(PoisonError::into_inner);
            tools
                .entry(tool.to_string())
                .or_insert_with(|| Arc::new(Semaphore::new(CALLS_PER_TOOL)))
                .clone()
        };
        if let Ok(place) = places.clone().try_acquire_owned() {
            return Some(place);
        }
        tokio::select! {
            place = places.acquire_owned() => place.ok(),
            () = stop.until_expired() => None,
            () = cancelled(stop) => None,
        }
    }
}

/// Resolves once the client cancels the call.
async fn cancelled(stop: &Stop) {
    while !stop.cancel.load(std::sync::atomic::Ordering::Relaxed) {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn a_tool_runs_at_most_its_share_and_a_call_waits_only_until_its_deadline() {
        let admission = Admission::default();
        let long = Stop::after(Duration::from_secs(60), Arc::default());
        let mut held = Vec::new();
        for _ in 0..CALLS_PER_TOOL {
            held.push(admission.enter("slow", &long).await.expect("a place"));
        }
        // The tool is full: a call waits and is turned away at its deadline.
        let short = Stop::after(Duration::from_millis(50), Arc::default());
        assert!(admission.enter("slow", &short).await.is_none());
        // Another tool is not held up.
        assert!(admission.enter("quick", &short).await.is_some());
        // A place freed goes to the next call.
        held.pop();
        assert!(admission.enter("slow", &short).await.is_some());
    }
}
