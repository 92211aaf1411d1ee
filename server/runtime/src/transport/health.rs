//! `/healthz` and `/readyz` on the Streamable HTTP transport, for load balancers and
//! orchestrators. `/healthz` answers 200 while the process serves. `/readyz` answers 200 when
//! the database answers a trivial statement within two seconds (so a connection came free and
//! the database server responded) and 503 otherwise, and 503 from the moment a shutdown
//! begins, while calls in flight drain. Probes need no token, are answered whatever the Host
//! and Origin, and say only a fixed reason: never a location, an error's text or a version.
//! One probe of the database runs at a time; its outcome stands for a second, so a flood of
//! probes costs the database one statement a second.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use http::{Method, StatusCode};
use serde_json::{Value, json};

use crate::protocol::Live;

/// The paths answered here.
pub const HEALTHZ: &str = "/healthz";
pub const READYZ: &str = "/readyz";

/// How long a probe of the database may take before the server counts as not ready.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// How long a probe's outcome stands.
const FRESH: Duration = Duration::from_secs(1);

/// What a shutdown's readiness says.
const SHUTTING_DOWN: &str = "the server is shutting down";

/// The server's health, shared by every connection.
pub struct Health {
    live: Arc<Live>,
    draining: AtomicBool,
    /// The last probe's outcome and when it ended.
    last: Arc<Mutex<Option<Probed>>>,
    /// Whether a probe is running (until its blocking work ends, even after its waiter gave
    /// up on it).
    probing: Arc<AtomicBool>,
}

/// A probe's outcome and when it ended.
type Probed = (Instant, Result<(), &'static str>);

impl Health {
    pub fn new(live: Arc<Live>) -> Health {
        Health {
            live,
            draining: AtomicBool::new(false),
            last: Arc::default(),
            probing: Arc::default(),
        }
    }

    /// The database pool's use now, for `/metrics`.
    pub fn pool_use(&self) -> Option<crate::backend::PoolUse> {
        self.live.now().engine.pool_use()
    }

    /// From now on `/readyz` answers 503: the shutdown has begun.
    pub fn drain(&self) {
        self.draining.store(true, Ordering::SeqCst);
    }

    /// The status and JSON body answering a probe of `path` with `method`, or `None` when
    /// the request is not a probe.
    pub async fn answer(&self, method: &Method, path: &str) -> Option<(StatusCode, Value)> {
        if method != Method::GET && method != Method::HEAD {
            return None;
        }
        let outcome = match path {
            HEALTHZ => Ok(()),
            READYZ => self.ready().await,
            _ => return None,
        };
        Some(match outcome {
            Ok(()) => (StatusCode::OK, json!({"status": "ok"})),
            Err(reason) => (
                StatusCode::SERVICE_UNAVAILABLE,
                json!({"status": "unavailable", "reason": reason}),
            ),
        })
    }

    /// Whether the server is ready: not shutting down, and the last probe of the database,
    /// at most a second old, succeeded (a new probe runs when it is older).
    async fn ready(&self) -> Result<(), &'static str> {
        if self.draining.load(Ordering::SeqCst) {
            return Err(SHUTTING_DOWN);
        }
        let cached = *self.last.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((at, outcome)) = cached
            && at.elapsed() < FRESH
        {
            return outcome;
        }
        if self.probing.swap(true, Ordering::SeqCst) {
            // Another probe is running: its predecessor's outcome stands meanwhile.
            return cached.map_or(Ok(()), |(_, o)| o);
        }
        let engine = self.live.now().engine.clone();
        let (last, probing) = (self.last.clone(), self.probing.clone());
        let probe = tokio::task::spawn_blocking(move || {
            let outcome = engine.ready(PROBE_TIMEOUT);
            *last.lock().unwrap_or_else(PoisonError::into_inner) = Some((Instant::now(), outcome));
            probing.store(false, Ordering::SeqCst);
            outcome
        });
        let outcome = match tokio::time::timeout(PROBE_TIMEOUT + FRESH, probe).await {
            Ok(Ok(outcome)) => outcome,
            _ => Err("the database does not answer"),
        };
        if self.draining.load(Ordering::SeqCst) {
            return Err(SHUTTING_DOWN);
        }
        outcome
    }
}
