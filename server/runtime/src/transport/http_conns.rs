//! The HTTP transport's connections: how many may be open, which one gives way when a new one
//! arrives at the cap, and how the accept loop behaves when the process runs out of file
//! descriptors.
//!
//! - **A cap below the descriptor limit.** At start-up the soft limit on open files is raised
//!   to the hard one, and the cap is `MCPSPEC_HTTP_MAX_CONNECTIONS` (default 1,024) but at
//!   most that limit less [`RESERVED_DESCRIPTORS`], kept for the database, pipes and
//!   downstream servers.
//! - **The idlest goes first.** A connection is idle while no request of it is being
//!   answered. A new connection at the cap closes the one idle the longest; when none is idle
//!   the new one is closed instead. Connections that open and never send (or send slowly)
//!   cannot keep real clients out.
//! - **Backing off.** When `accept` fails (out of descriptors, say) the loop sleeps, from a
//!   millisecond doubling up to a second, closes the idlest connection to free a descriptor,
//!   and logs at most one line every [`LOG_EVERY`] with how many failures it folded in.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

/// The default cap on open connections.
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;

/// Descriptors kept for everything but connections.
pub const RESERVED_DESCRIPTORS: u64 = 64;

/// How often a repeated failure to accept is logged at most.
pub const LOG_EVERY: Duration = Duration::from_secs(10);

/// The longest the accept loop sleeps after a failure.
const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// One open connection, as the registry sees it.
struct Conn {
    /// Requests of it being answered now.
    active: usize,
    /// When it last started or finished a request, or opened.
    last: Instant,
    /// Cancelled to close it.
    close: CancellationToken,
}

/// The open connections, under a cap.
pub struct Connections {
    cap: usize,
    next: AtomicU64,
    open: Mutex<HashMap<u64, Conn>>,
}

/// A connection's place in the registry: it marks requests and leaves when dropped.
pub struct Slot {
    id: u64,
    conns: Arc<Connections>,
    /// Cancelled when the registry closes the connection to make room.
    pub close: CancellationToken,
}

impl Connections {
    pub fn new(cap: usize) -> Arc<Connections> {
        Arc::new(Connections {
            cap: cap.max(1),
            next: AtomicU64::new(1),
            open: Mutex::default(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<u64, Conn>> {
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The cap.
    pub fn cap(&self) -> usize {
        self.cap
    }

    /// Admits a new connection: at the cap, the idlest one is closed to make room, and
    /// without an idle one the new connection is refused (`None`).
    pub fn admit(self: &Arc<Self>) -> Option<Slot> {
        let mut open = self.lock();
        if open.len() >= self.cap && !close_idlest(&mut open) {
            return None;
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let close = CancellationToken::new();
        open.insert(
            id,
            Conn {
                active: 0,
                last: Instant::now(),
                close: close.clone(),
            },
        );
        Some(Slot {
            id,
            conns: self.clone(),
            close,
        })
    }

    /// Closes the idlest connection, to free a descriptor; whether there was one.
    pub fn shed(&self) -> bool {
        close_idlest(&mut self.lock())
    }

    /// How many connections are open.
    pub fn len(&self) -> usize {
        self.lock().len()
    }
}

/// Closes and forgets the connection idle the longest; whether one was idle.
fn close_idlest(open: &mut HashMap<u64, Conn>) -> bool {
    let idlest = open
        .iter()
        .filter(|(_, c)| c.active == 0)
        .min_by_key(|(_, c)| c.last)
        .map(|(id, _)| *id);
    match idlest.and_then(|id| open.remove(&id)) {
        Some(c) => {
            c.close.cancel();
            true
        }
        None => false,
    }
}

impl Slot {
    /// Marks a request of this connection as being answered until the guard drops.
    pub fn request(&self) -> Busy {
        self.touch(1);
        Busy {
            id: self.id,
            conns: self.conns.clone(),
        }
    }

    fn touch(&self, delta: isize) {
        touch(&self.conns, self.id, delta);
    }
}

fn touch(conns: &Connections, id: u64, delta: isize) {
    if let Some(c) = conns.lock().get_mut(&id) {
        c.active = c.active.saturating_add_signed(delta);
        c.last = Instant::now();
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.conns.lock().remove(&self.id);
    }
}

/// A request being answered (see [`Slot::request`]).
pub struct Busy {
    id: u64,
    conns: Arc<Connections>,
}

impl Drop for Busy {
    fn drop(&mut self) {
        touch(&self.conns, self.id, -1);
    }
}

/// The cap for this process: `wanted`, but at most the descriptor limit (raised to the hard
/// limit first, where the system allows) less [`RESERVED_DESCRIPTORS`].
pub fn cap_for_this_process(wanted: usize) -> usize {
    match descriptor_limit() {
        Some(limit) => {
            let room = limit.saturating_sub(RESERVED_DESCRIPTORS).max(1);
            wanted.min(usize::try_from(room).unwrap_or(usize::MAX))
        }
        None => wanted,
    }
}

/// The soft limit on open files after raising it to the hard limit.
#[cfg(unix)]
fn descriptor_limit() -> Option<u64> {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    if let (Some(current), Some(maximum)) = (limit.current, limit.maximum)
        && maximum > current
    {
        let mut raised = limit;
        raised.current = Some(maximum);
        if setrlimit(Resource::Nofile, raised).is_ok() {
            return Some(maximum);
        }
    }
    limit.current
}

#[cfg(not(unix))]
fn descriptor_limit() -> Option<u64> {
    None
}

/// The accept loop's pace after failures: the next sleep, and when to log.
pub struct Backoff {
    sleep: Duration,
    failures: u64,
    logged: Option<Instant>,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            sleep: Duration::ZERO,
            failures: 0,
            logged: None,
        }
    }
}

impl Backoff {
    /// A failure: how long to sleep now, and, when a line is due, how many failures it
    /// stands for.
    pub fn failed(&mut self, now: Instant) -> (Duration, Option<u64>) {
        self.failures += 1;
        self.sleep = (self.sleep * 2).clamp(Duration::from_millis(1), MAX_BACKOFF);
        let due = self
            .logged
            .is_none_or(|t| now.duration_since(t) >= LOG_EVERY);
        let report = due.then(|| {
            self.logged = Some(now);
            std::mem::take(&mut self.failures)
        });
        (self.sleep, report)
    }

    /// A connection was accepted: the next failure sleeps briefly again.
    pub fn accepted(&mut self) {
        self.sleep = Duration::ZERO;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_the_cap_the_idlest_connection_gives_way_and_busy_ones_never_do() {
        let conns = Connections::new(2);
        let a = conns.admit().unwrap();
        std::thread::sleep(Duration::from_millis(2));
        let b = conns.admit().unwrap();
        // `a` is the idlest: the third closes it.
        let c = conns.admit().unwrap();
        assert!(a.close.is_cancelled() && !b.close.is_cancelled());
        drop(a);
        assert_eq!(conns.len(), 2);
        // Both busy: a fourth is refused and nothing is closed.
        let (_b, _c) = (b.request(), c.request());
        assert!(conns.admit().is_none());
        assert!(!b.close.is_cancelled() && !c.close.is_cancelled());
        drop(_b);
        std::thread::sleep(Duration::from_millis(2));
        drop(_c);
        // Once a request ends its connection is idle again, since then: `b` goes first.
        assert!(conns.shed());
        assert!(b.close.is_cancelled() && !c.close.is_cancelled());
    }

    #[test]
    fn failures_back_off_to_a_second_and_log_once_per_period() {
        let mut b = Backoff::default();
        let t0 = Instant::now();
        let mut sleeps = Vec::new();
        let mut reports = Vec::new();
        for i in 0..14 {
            let (sleep, report) = b.failed(t0 + Duration::from_millis(i * 100));
            sleeps.push(sleep);
            reports.extend(report);
        }
        assert_eq!(sleeps[0], Duration::from_millis(1));
        assert_eq!(sleeps[1], Duration::from_millis(2));
        assert_eq!(*sleeps.last().unwrap(), MAX_BACKOFF);
        // One line in the first ten seconds, for the first failure.
        assert_eq!(reports, [1]);
        let (_, report) = b.failed(t0 + LOG_EVERY + Duration::from_secs(1));
        assert_eq!(
            report,
            Some(14),
            "the next line counts the failures folded in"
        );
        b.accepted();
        assert_eq!(b.failed(t0 + LOG_EVERY * 3).0, Duration::from_millis(1));
    }
}
