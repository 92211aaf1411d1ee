//! The workbench (`serve --ui ADDR`): a page served by the server's own process that shows,
//! live, every tool call it handles, from any client, the one that started it over stdio
//! included. Calls are kept in a bounded ring (the last [`RING`]) and written as JSON when a
//! page reads them, their arguments sanitised exactly as the call log's; nothing is written to
//! disk.
//! `GET /events` is a Server-Sent Events stream (the ring, then each new call), `GET /calls`
//! the ring as one JSON array, `/`, `/page.js` and `/page.css` the page: static files embedded
//! in the binary, under a Content-Security-Policy that allows nothing but the page's own
//! origin (no inline script, no other origin, no framing).
//!
//! It has no access control of its own yet, so it binds only a loopback address, and it
//! answers only requests whose Host is that address and whose Origin, when sent, is its own
//! (a page of another site, or a DNS-rebound name, gets 403). Trying tools from the page, the
//! spec's examples, and the page following `dev`'s reloads are not built yet (issue 60).

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::json;
use tokio::sync::broadcast;

use crate::calllog::Call;

#[cfg(feature = "http")]
mod serve;
#[cfg(feature = "http")]
pub use serve::{bind, serve};

/// How many calls the ring keeps.
pub const RING: usize = 1000;

/// The most bytes of a call's arguments the ring keeps as they came (as JSON): larger ones are
/// kept as the call log shows them (long text cut), or else left out, so that the ring holds
/// at most about 16 MiB of arguments however large the calls.
const KEPT_ARGUMENT_BYTES: usize = 16 * 1024;

/// The calls the workbench shows: the last [`RING`], and the stream of new ones.
pub struct Calls {
    ring: Mutex<VecDeque<Arc<Record>>>,
    live: broadcast::Sender<Arc<Record>>,
    next: std::sync::atomic::AtomicU64,
}

/// One call as kept. Its JSON (the arguments sanitised) is written only when a page reads
/// it, so that a call costs little more than a copy of its arguments while no page is open.
pub struct Record {
    seq: u64,
    at_ms: u64,
    tool: Box<str>,
    caller: Option<Box<str>>,
    outcome: Box<str>,
    duration_ms: f64,
    result_bytes: usize,
    arguments: Option<serde_json::Value>,
}

impl Record {
    /// The call as the page reads it: one JSON object.
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    pub(crate) fn line(&self) -> String {
        let arguments = self
            .arguments
            .as_ref()
            .map_or(serde_json::Value::Null, crate::calllog::sanitize_arguments);
        json!({
            "seq": self.seq,
            "at_ms": self.at_ms,
            "method": "tools/call",
            "tool": self.tool,
            "caller": self.caller,
            "outcome": self.outcome,
            "duration_ms": self.duration_ms,
            "result_bytes": self.result_bytes,
            "arguments": arguments,
        })
        .to_string()
    }
}

static ACTIVE: OnceLock<Arc<Calls>> = OnceLock::new();

/// The process's workbench calls, when `--ui` started one; the engine records each call there.
pub(crate) fn active() -> Option<&'static Arc<Calls>> {
    ACTIVE.get()
}

impl Calls {
    /// Keeps `call` and sends it to the pages open.
    pub(crate) fn record(&self, call: &Call<'_>) {
        let at_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        let record = Arc::new(Record {
            seq: self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            at_ms,
            tool: call.tool.into(),
            caller: call.sub.map(Into::into),
            outcome: call.outcome.into(),
            duration_ms: call.duration_ms,
            result_bytes: call.result_bytes,
            arguments: call.arguments.map(kept_arguments),
        });
        let old = {
            let mut ring = self.ring.lock().unwrap_or_else(PoisonError::into_inner);
            let old = (ring.len() == RING).then(|| ring.pop_front()).flatten();
            ring.push_back(record.clone());
            old
        };
        // Freed outside the lock.
        drop(old);
        if self.live.receiver_count() > 0 {
            let _ = self.live.send(record);
        }
    }

    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    fn snapshot(&self) -> Vec<Arc<Record>> {
        let ring = self.ring.lock().unwrap_or_else(PoisonError::into_inner);
        ring.iter().cloned().collect()
    }
}

/// A call's arguments as the ring keeps them: within [`KEPT_ARGUMENT_BYTES`].
fn kept_arguments(arguments: &serde_json::Value) -> serde_json::Value {
    use crate::rows::approx_json_size;
    let size = approx_json_size(arguments);
    if size <= KEPT_ARGUMENT_BYTES {
        return arguments.clone();
    }
    let shown = crate::calllog::sanitize_arguments(arguments);
    if approx_json_size(&shown) <= KEPT_ARGUMENT_BYTES {
        return shown;
    }
    json!({ "omitted": format!("{size} bytes of arguments, more than the workbench keeps") })
}

/// Starts recording calls, for a workbench about to serve them.
#[cfg_attr(not(feature = "http"), allow(dead_code))]
fn install() {
    let _ = ACTIVE.set(Arc::new(Calls {
        ring: Mutex::new(VecDeque::with_capacity(RING)),
        live: broadcast::channel(RING).0,
        next: std::sync::atomic::AtomicU64::new(1),
    }));
}

/// Why the workbench did not start.
#[derive(Debug, thiserror::Error)]
pub enum UiError {
    #[error(
        "--ui {0} is not a loopback address: the workbench has no access control of its own yet, so it listens on this machine only (127.0.0.1 or [::1])"
    )]
    NotLoopback(SocketAddr),
    #[error("cannot listen on {addr} for the workbench: {source}")]
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
}

/// Refuses a workbench address that is not on this machine, before anything is opened.
pub(crate) fn on_this_machine(addr: SocketAddr) -> Result<(), UiError> {
    if addr.ip().to_canonical().is_loopback() {
        Ok(())
    } else {
        Err(UiError::NotLoopback(addr))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ring_keeps_large_arguments_within_its_bound() {
        let small = json!({"id": 7, "tags": ["a", "b"]});
        assert_eq!(kept_arguments(&small), small);
        // Long text: kept as the call log shows it.
        let text = json!({"content": "x".repeat(1_000_000)});
        let kept = kept_arguments(&text);
        let content = kept["content"].as_str().expect("text, cut");
        assert!(
            content.len() < 1000 && content.starts_with("xxx"),
            "{content}"
        );
        // A long list of short values: left out, saying how large it was.
        let list = json!({"ids": (0..100_000).collect::<Vec<_>>()});
        let kept = kept_arguments(&list);
        assert!(
            kept["omitted"]
                .as_str()
                .is_some_and(|o| o.ends_with("bytes of arguments, more than the workbench keeps")),
            "{kept}"
        );
        assert!(crate::rows::approx_json_size(&kept) <= KEPT_ARGUMENT_BYTES);
    }
}
