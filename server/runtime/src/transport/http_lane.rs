//! The zero-hop lane of the Streamable HTTP transport: a plain `tools/call` of a tool that
//! only reads through SQL (the calls [`Lane`] takes) is answered by the runtime worker that
//! read the request, as one `application/json` body, without rmcp's session worker, its
//! channels, a call thread or an SSE stream of three chunks.
//!
//! The lane takes a POST only when rmcp would take it as it is, so that every refusal stays
//! rmcp's. In a session (a revision before 2026-07-28): the session exists and its client
//! sent `notifications/initialized`, which rmcp answered 202 with the `MCP-Protocol-Version`
//! the call carries. Without one (a request of 2026-07-28, whose `_meta` carries its version,
//! the client's capabilities and name and nothing else): the SEP-2243 headers are exactly
//! those of a valid call (one `MCP-Protocol-Version` equal to the `_meta` version, one
//! `Mcp-Method: tools/call`, one `Mcp-Name` equal to the tool's name, no `Mcp-Param-*`) and
//! the tool mirrors no argument into a header (`x-mcp-header`), which rmcp checks.
//! Either way `Accept` names JSON and SSE and the body is JSON. Anything else goes to rmcp.
//!
//! - **Engines.** A database whose jobs may run on a runtime worker answers there: SQLite, and
//!   PostgreSQL, whose connections are polled on the calling thread (`backend::pgsync`).
//!   MariaDB's driver blocks on a runtime of its own, which cannot start inside another, so
//!   its lane calls run on the server's call threads (`protocol::admission`).
//! - **Workers.** The HTTP runtime has a fixed set of workers; all but one may run lane calls
//!   to the end, so that one is free to read the next request (a cancellation among them). A
//!   lane call that finds no other free starts on that last one, and gives way to the
//!   call threads once it has run for a millisecond or would wait for a connection: quick
//!   calls, most of them, need no hand-off between threads, and the last worker is free again
//!   within about a millisecond on SQLite, whose statements notice at once, and within the
//!   watchdog's 20 ms on PostgreSQL, whose statement the watchdog cancels.
//! - **Cancellation.** `notifications/cancelled` naming a lane call of the same session sets
//!   its flag, which interrupts the statement; the notification then goes on to rmcp.
//! - **Idle sessions.** rmcp drops a session after five minutes without an event. A session
//!   served only by the lane is kept alive by a no-op event (a request channel opened and
//!   closed) at most once a minute.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use http::{HeaderMap, HeaderValue, header};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use serde_json::Value;

use super::lane::{Call, Lane, Route, notices_slow, runs_on_worker};
use crate::backend::Slow;
use crate::engine::Engine;
use crate::protocol::admission::Admission;

/// How long a call runs on the last free worker before it gives way to a call thread.
const GIVE_WAY_AFTER: Duration = Duration::from_millis(1);

/// How often a session served only by the lane is kept alive.
const TOUCH_EVERY: Duration = Duration::from_secs(60);

/// A session rmcp accepted `notifications/initialized` on.
struct Ready {
    /// The `MCP-Protocol-Version` header that notification carried.
    version: Option<HeaderValue>,
    /// When rmcp last saw an event of the session because of the lane.
    touched: Instant,
}

/// The lane, with what it knows of the sessions.
pub(super) struct HttpLane {
    lane: Lane,
    /// The server's call threads, which take a call that leaves its worker.
    threads: Arc<Admission>,
    sessions: Arc<LocalSessionManager>,
    ready: Mutex<HashMap<String, Ready>>,
    /// Cancellation flags of the lane calls running, by session and request id (as JSON).
    running: Mutex<HashMap<(String, String), Arc<AtomicBool>>>,
    /// How many more lane calls may run on a runtime worker now.
    spare: AtomicUsize,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The session id a request names.
pub(super) fn session_of(headers: &HeaderMap) -> Option<&str> {
    headers.get("mcp-session-id").and_then(|v| v.to_str().ok())
}

/// Whether `message` is a `notifications/initialized`.
pub(super) fn is_initialized(message: &Value) -> bool {
    message["method"] == "notifications/initialized" && message.get("id").is_none()
}

/// Whether a POST's headers are those rmcp accepts a request with; the lane never answers
/// what rmcp would refuse. Media types are compared by their essence (the type and subtype
/// before any `;` parameter, case-insensitively), as rmcp compares them: `application/jsonx`
/// is not JSON.
fn plain_post(headers: &HeaderMap) -> bool {
    let essence = |v: &str| {
        v.split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .to_ascii_lowercase()
    };
    let accepted: Vec<String> = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(essence)
        .collect();
    let json_body = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|c| essence(c) == "application/json");
    json_body
        && accepted.iter().any(|a| a == "application/json")
        && accepted.iter().any(|a| a == "text/event-stream")
}

/// The one value of header `name`, when there is exactly one and it is text.
fn only<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    let mut values = headers.get_all(name).iter();
    let first = values.next()?;
    values
        .next()
        .is_none()
        .then(|| first.to_str().ok())
        .flatten()
}

/// Whether a 2026-07-28 `tools/call`'s headers are those rmcp accepts it with (SEP-2243):
/// one `MCP-Protocol-Version` equal to the request's `_meta` version (which the lane takes
/// only as 2026-07-28), one `Mcp-Method: tools/call`, one `Mcp-Name` equal to the tool's
/// name written as itself (a name of letters, digits, `_`, `-` and `.`, which no header
/// encoding changes), and no
/// `Mcp-Param-*` header, which rmcp checks against the tool's schema. Anything else, valid
/// or not, is rmcp's to answer.
fn standard_headers(headers: &HeaderMap, call: &Call) -> bool {
    let name = call.name();
    let plain_name = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    only(headers, "mcp-protocol-version") == Some(super::lane::PER_REQUEST)
        && only(headers, "mcp-method") == Some("tools/call")
        && plain_name
        && only(headers, "mcp-name") == Some(name)
        && !headers.keys().any(|k| k.as_str().starts_with("mcp-param-"))
}

impl HttpLane {
    /// A lane that runs at most `workers - 1` calls on the runtime's workers at once.
    pub(super) fn new(
        lane: Lane,
        threads: Arc<Admission>,
        sessions: Arc<LocalSessionManager>,
        workers: usize,
    ) -> Self {
        HttpLane {
            lane,
            threads,
            sessions,
            ready: Mutex::default(),
            running: Mutex::default(),
            spare: AtomicUsize::new(workers.saturating_sub(1)),
        }
    }

    /// Notes that rmcp accepted `notifications/initialized` on `session`.
    pub(super) fn initialized(&self, session: &str, version: Option<&HeaderValue>) {
        if version.is_some_and(|v| v.to_str().map_or(true, super::lane::is_modern)) {
            return;
        }
        let mut ready = lock(&self.ready);
        // Sessions that idled out are forgotten now and then.
        if ready.len() % 1024 == 1023
            && let Ok(live) = self.sessions.sessions.try_read()
        {
            ready.retain(|id, _| live.contains_key(id.as_str()));
        }
        ready.insert(
            session.to_string(),
            Ready {
                version: version.cloned(),
                touched: Instant::now(),
            },
        );
    }

    /// Forgets a session that ended.
    pub(super) fn ended(&self, session: &str) {
        lock(&self.ready).remove(session);
    }

    /// Sets the flag of the lane call `message` names when it is a `notifications/cancelled`,
    /// if one of `headers`' session is running.
    pub(super) fn cancel(&self, headers: &HeaderMap, message: &Value) {
        if message["method"] != "notifications/cancelled" {
            return;
        }
        let Some(session) = session_of(headers) else {
            return;
        };
        if let Some(id) = message.pointer("/params/requestId")
            && let Some(flag) = lock(&self.running).get(&(session.to_string(), id.to_string()))
        {
            flag.store(true, Ordering::SeqCst);
        }
    }

    /// The answer to `call`, the request the POST of `headers` carried, when the lane takes
    /// it: the JSON-RPC response as its body's bytes. `None` leaves the request to rmcp.
    pub(super) async fn answer(&self, headers: &HeaderMap, mut call: Call) -> Option<Vec<u8>> {
        // A request with trace context is rmcp's, whose span takes it as the parent.
        let plain =
            !(crate::telemetry::on() && headers.contains_key("traceparent")) && plain_post(headers);
        let session = session_of(headers);
        let route = Route::Http {
            plain,
            session: session.map(|s| self.accepted(s, headers)),
            standard_headers: session.is_none() && standard_headers(headers, &call),
        };
        let engine = self.lane.admits(&call, route)?;
        // A request of no session is stopped by its deadline, not by a
        // `notifications/cancelled` of whoever names its id.
        let Some(session) = session else {
            let answer = self
                .run(call, engine, Arc::new(AtomicBool::new(false)))
                .await;
            return (!answer.is_empty()).then_some(answer);
        };
        call.session = Some(session.to_string());
        let id: Value = serde_json::from_str(call.id.get()).ok()?;
        if !self.alive(session).await {
            return None;
        }
        let key = (session.to_string(), id.to_string());
        let cancel = Arc::new(AtomicBool::new(false));
        lock(&self.running).insert(key.clone(), cancel.clone());
        let answer = self.run(call, engine, cancel).await;
        lock(&self.running).remove(&key);
        (!answer.is_empty()).then_some(answer)
    }

    /// Runs a lane call: on this worker when a spare one is free and the database allows it,
    /// else as [`HttpLane::on_last_worker`] or on a call thread.
    async fn run(&self, call: Call, engine: Arc<Engine>, cancel: Arc<AtomicBool>) -> Vec<u8> {
        if !runs_on_worker(&engine) {
            self.on_call_thread(call, engine, cancel).await
        } else if self.take_spare() {
            let answer = self.lane.answer(&call, &engine, cancel, None);
            self.spare.fetch_add(1, Ordering::SeqCst);
            answer
        } else {
            self.on_last_worker(call, engine, cancel).await
        }
    }

    /// Answers a call that finds every spare worker answering one. It starts on this worker,
    /// the last free one, when the database says when a statement turns out slow, and gives
    /// way once it has run for [`GIVE_WAY_AFTER`] or would wait for a connection: the
    /// statement stops and the call runs again on a call thread, so that a worker is free
    /// again soon to read the next request (a cancellation among them). A quick call, most of
    /// them, is answered here without a hand-off to another thread and back.
    async fn on_last_worker(
        &self,
        call: Call,
        engine: Arc<Engine>,
        cancel: Arc<AtomicBool>,
    ) -> Vec<u8> {
        if !notices_slow(&engine) {
            return self.on_call_thread(call, engine, cancel).await;
        }
        let slow = Slow::giving_way(GIVE_WAY_AFTER);
        let answer = self
            .lane
            .answer(&call, &engine, cancel.clone(), Some(slow.clone()));
        if !slow.gave_way() {
            return answer;
        }
        self.on_call_thread(call, engine, cancel).await
    }

    /// Answers a call on one of the server's call threads, which takes the call as it was
    /// decoded (empty when it panicked: rmcp then takes the request).
    async fn on_call_thread(
        &self,
        call: Call,
        engine: Arc<Engine>,
        cancel: Arc<AtomicBool>,
    ) -> Vec<u8> {
        let lane = self.lane.clone();
        let (answer, answered) = tokio::sync::oneshot::channel();
        self.threads.run_unplaced(move || {
            let _ = answer.send(lane.answer(&call, &engine, cancel, None));
        });
        answered.await.unwrap_or_default()
    }

    /// Whether `session` is ready for the lane with the protocol version `headers` carry.
    fn accepted(&self, session: &str, headers: &HeaderMap) -> bool {
        lock(&self.ready)
            .get(session)
            .is_some_and(|r| r.version.as_ref() == headers.get("mcp-protocol-version"))
    }

    /// Whether rmcp still has `session`; keeps it from idling out while the lane serves it.
    async fn alive(&self, session: &str) -> bool {
        let handle = self.sessions.sessions.read().await.get(session).cloned();
        let Some(handle) = handle else {
            self.ended(session);
            return false;
        };
        let touch = lock(&self.ready).get_mut(session).is_some_and(|r| {
            let due = r.touched.elapsed() >= TOUCH_EVERY;
            if due {
                r.touched = Instant::now();
            }
            due
        });
        if touch {
            tokio::spawn(async move {
                if let Ok(channel) = handle.establish_request_wise_channel().await
                    && let Some(id) = channel.http_request_id
                {
                    let _ = handle.close_request_wise_channel(id).await;
                }
            });
        }
        true
    }

    fn take_spare(&self) -> bool {
        self.spare
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_json_bodies_that_accept_json_and_sse_take_the_lane() {
        let both = "application/json, text/event-stream";
        // (content type, accept, taken)
        let cases = [
            ("application/json", both, true),
            ("Application/JSON; charset=utf-8", both, true),
            ("application/jsonx", both, false),
            ("application/json-seq", both, false),
            ("text/json", both, false),
            ("application/json", "application/json", false),
            (
                "application/json",
                "application/jsonx, text/event-streamy",
                false,
            ),
            (
                "application/json",
                "text/event-stream;q=1, application/json;q=0.5",
                true,
            ),
        ];
        for (content, accept, taken) in cases {
            let mut h = HeaderMap::new();
            h.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_str(content).unwrap(),
            );
            h.insert(header::ACCEPT, HeaderValue::from_str(accept).unwrap());
            assert_eq!(plain_post(&h), taken, "{content} / {accept}");
        }
    }
}
