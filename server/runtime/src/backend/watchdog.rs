//! Cancels running statements on a database server when their job's deadline passes or the
//! client cancels the call: a thread that looks at the running jobs while there are any, for
//! the engines whose driver blocks in the server's round trip (PostgreSQL's cancel request,
//! MariaDB's `KILL QUERY`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use super::Stop;

/// Stops what runs on one connection, from another thread.
pub trait Cancel: Send + Sync {
    /// Asks the server to stop the connection's running statement; failures are logged.
    fn cancel(&self);

    /// Notes, before the job can end, that [`Cancel::cancel`] is about to be sent: it reaches
    /// the server later, and must not stop a statement of the connection's next job.
    fn due(&self) {}
}

/// The running jobs by number: each one's stop flags, how to cancel its statement, and how
/// many rounds have seen it due.
type Jobs = HashMap<u64, (Stop, Arc<dyn Cancel>, u32)>;

/// Cancels running statements on the server when their job's deadline passes or the client
/// cancels the call. It looks every [`WATCH_INTERVAL`] while jobs run and sleeps after a second
/// without any, so that a busy server pays no wake-up per call and an idle one none at all.
pub struct Watchdog {
    jobs: Mutex<Jobs>,
    next: AtomicU64,
    /// Set by the watchdog before it sleeps; the next job wakes it.
    sleeping: std::sync::atomic::AtomicBool,
    thread: std::sync::OnceLock<std::thread::Thread>,
}

/// How often the watchdog looks at the running jobs' cancellation flags.
pub const WATCH_INTERVAL: Duration = Duration::from_millis(20);

/// How long the watchdog goes on looking with no job before it sleeps.
const WATCH_IDLE: Duration = Duration::from_secs(1);

/// Unregisters a job from the watchdog when it ends.
pub struct Watched<'a> {
    dog: &'a Watchdog,
    id: u64,
}

impl Drop for Watched<'_> {
    fn drop(&mut self) {
        self.dog.lock().remove(&self.id);
    }
}

impl Drop for Watchdog {
    /// Wakes the thread, which then finds the pool gone and ends.
    fn drop(&mut self) {
        if let Some(t) = self.thread.get() {
            t.unpark();
        }
    }
}

impl Watchdog {
    pub fn start(name: &str) -> Arc<Watchdog> {
        let dog = Arc::new(Watchdog {
            jobs: Mutex::new(HashMap::new()),
            next: AtomicU64::new(1),
            sleeping: std::sync::atomic::AtomicBool::new(false),
            thread: std::sync::OnceLock::new(),
        });
        let weak = Arc::downgrade(&dog);
        let spawned = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || watch_loop(&weak));
        match spawned {
            Ok(handle) => {
                let _ = dog.thread.set(handle.thread().clone());
            }
            Err(e) => {
                tracing::warn!(error = %e, "no watchdog thread: statements stop at the server's own timeout only");
            }
        }
        dog
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Jobs> {
        self.jobs.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn watch(&self, stop: &Stop, token: &Arc<dyn Cancel>) -> Watched<'_> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.lock().insert(id, (stop.clone(), token.clone(), 0));
        if self.sleeping.swap(false, Ordering::SeqCst)
            && let Some(t) = self.thread.get()
        {
            t.unpark();
        }
        Watched { dog: self, id }
    }

    /// Cancels every job that must stop; whether any job is running. A job stays watched
    /// until it ends and is cancelled again on the rounds after its first (the 1st, 2nd, 4th,
    /// 8th...): a cancel that reaches the server before the job's statement does (before its
    /// first, or between two) stops nothing, and would leave the statement to run to its end.
    fn round(&self) -> bool {
        let (due, busy): (Vec<Arc<dyn Cancel>>, bool) = {
            let mut jobs = self.lock();
            let mut due = Vec::new();
            for (stop, token, seen) in jobs.values_mut() {
                if !stop.now() {
                    continue;
                }
                if *seen == 0 || seen.is_power_of_two() {
                    // Under the lock, so that a job that ends (and unregisters) after this
                    // round knows.
                    token.due();
                    due.push(token.clone());
                }
                *seen = seen.saturating_add(1);
            }
            (due, !jobs.is_empty())
        };
        for token in &due {
            token.cancel();
        }
        busy
    }
}

/// The watchdog's thread: a round every [`WATCH_INTERVAL`], asleep after [`WATCH_IDLE`]
/// without jobs until the next one; it ends with the pool.
fn watch_loop(weak: &std::sync::Weak<Watchdog>) {
    let mut last_busy = std::time::Instant::now();
    loop {
        std::thread::park_timeout(WATCH_INTERVAL);
        let Some(dog) = weak.upgrade() else {
            return;
        };
        if dog.round() {
            last_busy = std::time::Instant::now();
        } else if last_busy.elapsed() > WATCH_IDLE {
            dog.sleeping.store(true, Ordering::SeqCst);
            // A job registered between the round and now finds `sleeping` set and unparks.
            let quiet = dog.lock().is_empty();
            drop(dog);
            if quiet {
                std::thread::park();
            }
            last_busy = std::time::Instant::now();
        }
    }
}
