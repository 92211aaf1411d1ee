//! How many calls of one tool run at once, and on which threads. Without a bound, a burst of
//! slow calls of one tool (long searches waiting for a reader connection, imports that never
//! end, handlers that ignore their cancellation) takes every thread and a quick call of another
//! tool waits behind them.
//!
//! Each tool may have [`CALLS_PER_TOOL`] calls running, or fewer when its database could not
//! run more of them at once anyway (on SQLite, a tool made of statements runs as many calls as
//! there are readers, and one at a time when it writes: more would take a thread, and its share
//! of memory, only to wait for a connection). More wait in the tool's queue, without
//! a thread, and each takes the place of a call of its tool that ends, on that call's thread. A
//! call keeps its place until its work has really ended, not only until it was answered, so
//! that work a handler does past its deadline still counts against its own tool and never
//! against the others. A call given up while it waits for a place (its deadline passed or its
//! client cancelled it, and `protocol::bounded` answered it) is dropped unrun.
//!
//! The calls (and the HTTP lane's reads that leave their worker, which take no place) run on
//! threads of this module's own, started on tokio's blocking pool (so that a
//! call has the runtime's context, and the runtime's shutdown waits for a call still running
//! as it did). A thread that ends a call takes the next one ready, else waits for one for
//! [`KEEP_ALIVE`]; a new thread is started only when a call takes a free place and no thread
//! waits, so there are never more threads than places held at once. (Spawning each call's work
//! on tokio's pool grew it to its limit by churn: a place was given up a moment before its
//! thread was idle again in tokio's eyes, more so on a busy machine, so the next call's spawn
//! found no idle thread and started one; a client with 64 calls in flight had them spread over
//! 64 threads, each with its own share of the allocator's memory.)

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use crate::backend::Stop;

/// The most threads calls run on at once. The runtime's blocking pool has as many again for
/// everything else (resource reads, health probes, HTTP lane reads that give way).
pub const BLOCKING_THREADS: usize = 64;

/// The most calls of one tool that run at once: a quarter of the threads, so that slow calls
/// of up to three tools leave room for everything else.
pub const CALLS_PER_TOOL: usize = BLOCKING_THREADS / 4;

/// How long a thread with no call to run waits for one before it ends: tokio's own figure for
/// its blocking pool.
const KEEP_ALIVE: Duration = Duration::from_secs(10);

/// The places of every tool and the threads calls run on, shared by every session of the
/// server; its threads end once it is dropped and their calls have.
pub(crate) struct Admission {
    pool: Arc<Pool>,
}

struct Pool {
    state: Mutex<State>,
    /// Wakes a thread waiting for a call (or every one, when the server ends).
    wake: Condvar,
}

#[derive(Default)]
struct State {
    /// Each tool's index in `tools`, by name.
    names: HashMap<String, usize>,
    tools: Vec<Places>,
    /// Calls that hold a place and wait for a thread, oldest first.
    ready: VecDeque<Call>,
    /// Threads started and not ended, running a call or waiting for one.
    threads: usize,
    /// Threads waiting for a call (some may be woken and not yet awake).
    waiting: usize,
    /// The server ended: waiting threads end.
    closing: bool,
}

/// One tool's places: how many of its calls hold one, and the calls waiting for one, oldest
/// first, each with what says whether its caller still waits for it.
#[derive(Default)]
struct Places {
    held: usize,
    waiting: VecDeque<(Stop, Call)>,
}

/// A call's work and its tool's index (`None`: work that takes no place, see
/// [`Admission::run_unplaced`]).
struct Call {
    tool: Option<usize>,
    work: Box<dyn FnOnce() + Send>,
}

/// What a call that took a free place runs on.
enum Thread {
    /// A waiting thread, woken for it (or a thread that ends its call first).
    Woken,
    /// A thread started for it.
    Started,
    /// The first thread to end its call, every thread being busy.
    Next,
}

impl Default for Admission {
    fn default() -> Admission {
        Admission {
            pool: Arc::new(Pool {
                state: Mutex::default(),
                wake: Condvar::new(),
            }),
        }
    }
}

impl Drop for Admission {
    fn drop(&mut self) {
        self.pool.lock().closing = true;
        self.pool.wake.notify_all();
    }
}

impl Admission {
    /// Runs `work`, a call of `tool` (a tool the server has) that `stop` bounds: at once when
    /// the tool has a free place, else once the calls of the tool before it have taken theirs.
    /// The tool has [`CALLS_PER_TOOL`] places, or `at_once` when its database runs fewer of
    /// its calls at once (never fewer than one). Whether it waits.
    pub(super) fn run(
        &self,
        tool: &str,
        at_once: Option<usize>,
        stop: &Stop,
        work: impl FnOnce() + Send + 'static,
    ) -> bool {
        let work = Box::new(work);
        let limit = at_once.map_or(CALLS_PER_TOOL, |n| n.clamp(1, CALLS_PER_TOOL));
        let mut state = self.pool.lock();
        let index = state.index(tool);
        let call = Call {
            tool: Some(index),
            work,
        };
        let places = &mut state.tools[index];
        // At or past it: a reload may have given the tool fewer places than it holds.
        if places.held >= limit {
            // The calls given up so far go now, so that a tool whose calls never end does
            // not collect the calls its clients keep sending.
            places.waiting.retain(|(stop, _)| !given_up(stop));
            places.waiting.push_back((stop.clone(), call));
            return true;
        }
        places.held += 1;
        self.ready(state, call);
        false
    }

    /// Runs `work` on a call's thread without a tool's place: the HTTP lane's plain reads,
    /// which a database's own deadline bounds, and which the lane hands over only once they
    /// turn out slow (or always, on MariaDB, whose driver cannot run on a runtime worker).
    #[cfg(feature = "http")]
    pub(crate) fn run_unplaced(&self, work: impl FnOnce() + Send + 'static) {
        let call = Call {
            tool: None,
            work: Box::new(work),
        };
        self.ready(self.pool.lock(), call);
    }

    /// Makes `call` ready and finds it a thread.
    fn ready(&self, mut state: MutexGuard<'_, State>, call: Call) {
        state.ready.push_back(call);
        let thread = state.thread();
        drop(state);
        match thread {
            Thread::Woken => self.pool.wake.notify_one(),
            Thread::Started => {
                let pool = self.pool.clone();
                tokio::task::spawn_blocking(move || pool.serve());
            }
            Thread::Next => {}
        }
    }

    /// How many threads calls run on now, running a call or waiting for one.
    #[cfg(test)]
    fn threads(&self) -> usize {
        self.pool.lock().threads
    }
}

impl State {
    fn index(&mut self, tool: &str) -> usize {
        if let Some(&i) = self.names.get(tool) {
            return i;
        }
        self.tools.push(Places::default());
        self.names.insert(tool.to_string(), self.tools.len() - 1);
        self.tools.len() - 1
    }

    /// The thread for a call just made ready: one that waits, when as many wait as calls are
    /// ready, else a new one while there are fewer than [`BLOCKING_THREADS`], else the first
    /// to end its call. A thread is started only when every thread runs a call or is wanted by
    /// one ready: since each such call holds a place (or is unplaced work), there are never
    /// more threads than places held and unplaced work at once (a thread that ends its call
    /// and finds another ready takes it, even one a waiting thread was woken for, which then
    /// waits on).
    fn thread(&mut self) -> Thread {
        if self.waiting >= self.ready.len() {
            Thread::Woken
        } else if self.threads < BLOCKING_THREADS {
            self.threads += 1;
            Thread::Started
        } else {
            Thread::Next
        }
    }

    /// A call of `tool` ended: its place goes to the tool's next waiting call still waited
    /// for, which this thread runs next, else it is free.
    fn leave(&mut self, tool: Option<usize>) {
        let Some(tool) = tool else {
            return;
        };
        let places = &mut self.tools[tool];
        while let Some((stop, next)) = places.waiting.pop_front() {
            if !given_up(&stop) {
                self.ready.push_front(next);
                return;
            }
        }
        places.held -= 1;
    }
}

impl Pool {
    /// A thread's life: runs the calls ready, in turn, and waits for more for up to
    /// [`KEEP_ALIVE`] once there are none.
    fn serve(&self) {
        let mut state = self.lock();
        loop {
            if let Some(call) = state.ready.pop_front() {
                drop(state);
                // A call with a place runs even when given up meanwhile: its engine answers
                // it as cancelled or timed out, and logs it, as it does any call.
                let tool = call.tool;
                run_caught(call.work);
                state = self.lock();
                state.leave(tool);
                continue;
            }
            match self.wait(state) {
                Some(awake) => state = awake,
                None => return,
            }
        }
    }

    /// Waits for a call ready: the state then, or `None` when this thread ends (it waited
    /// [`KEEP_ALIVE`], or the server ended).
    fn wait<'a>(&'a self, mut state: MutexGuard<'a, State>) -> Option<MutexGuard<'a, State>> {
        if state.closing {
            state.threads -= 1;
            return None;
        }
        state.waiting += 1;
        loop {
            let (awake, waited) = self
                .wake
                .wait_timeout(state, KEEP_ALIVE)
                .unwrap_or_else(PoisonError::into_inner);
            state = awake;
            if !state.ready.is_empty() {
                state.waiting -= 1;
                return Some(state);
            }
            if state.closing || waited.timed_out() {
                state.waiting -= 1;
                state.threads -= 1;
                return None;
            }
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Whether the caller of a waiting call no longer waits for it: its deadline passed or its
/// client cancelled it.
pub(super) fn given_up(stop: &Stop) -> bool {
    stop.cancel.load(Ordering::Relaxed) || stop.expired()
}

/// A panic ends the call it happened in, not its thread: the call's answer is lost (its caller
/// hears so: the sender it held is dropped) and the thread goes on to the next call.
fn run_caught(work: Box<dyn FnOnce() + Send>) {
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(work));
}

/// Resolves once the client cancels the call: a call that waits for its place has no work
/// running yet that would notice.
pub(super) async fn cancelled(stop: &Stop) {
    while !stop.cancel.load(Ordering::Relaxed) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::sync::atomic::AtomicBool;
    use std::sync::mpsc::{Receiver, channel};
    use std::sync::{Condvar, Mutex};
    use std::time::Duration;

    /// Long enough never to fail a test that works, short enough to fail one that hangs.
    const WAIT: Duration = Duration::from_secs(60);

    /// A gate the calls of a test wait at until it opens.
    #[derive(Default)]
    struct Gate {
        open: Mutex<bool>,
        opened: Condvar,
    }

    impl Gate {
        fn pass(&self) {
            let mut open = self.open.lock().unwrap();
            while !*open {
                open = self.opened.wait(open).unwrap();
            }
        }

        fn open(&self) {
            *self.open.lock().unwrap() = true;
            self.opened.notify_all();
        }
    }

    fn stop() -> Stop {
        Stop::after(WAIT, Arc::default())
    }

    /// `n` calls of `tool` that wait at `gate`, then say which thread ran them.
    fn gated(
        admission: &Admission,
        tool: &str,
        n: usize,
        gate: &Arc<Gate>,
    ) -> (Vec<bool>, Receiver<std::thread::ThreadId>) {
        gated_at_once(admission, tool, None, n, gate)
    }

    /// [`gated`], the tool's database running at most `at_once` of its calls at once.
    fn gated_at_once(
        admission: &Admission,
        tool: &str,
        at_once: Option<usize>,
        n: usize,
        gate: &Arc<Gate>,
    ) -> (Vec<bool>, Receiver<std::thread::ThreadId>) {
        let (ran, on) = channel();
        let waited = (0..n)
            .map(|_| {
                let (gate, ran) = (gate.clone(), ran.clone());
                admission.run(tool, at_once, &stop(), move || {
                    gate.pass();
                    ran.send(std::thread::current().id()).unwrap();
                })
            })
            .collect();
        (waited, on)
    }

    #[tokio::test]
    async fn a_tool_runs_its_share_at_once_and_the_rest_in_turn_on_the_threads_it_has() {
        let admission = Admission::default();
        let gate = Arc::new(Gate::default());
        let (waited, on) = gated(&admission, "slow", CALLS_PER_TOOL * 4, &gate);
        let at_once = waited.iter().filter(|w| !**w).count();
        assert_eq!(at_once, CALLS_PER_TOOL, "{waited:?}");
        assert!(waited[CALLS_PER_TOOL..].iter().all(|w| *w), "{waited:?}");
        // Another tool is not held up.
        let (quick, answered) = channel();
        assert!(!admission.run("quick", None, &stop(), move || quick.send(()).unwrap()));
        answered
            .recv_timeout(WAIT)
            .expect("the other tool's call ran");
        gate.open();
        let threads: HashSet<_> = (0..CALLS_PER_TOOL * 4)
            .map(|_| on.recv_timeout(WAIT).expect("every call ran"))
            .collect();
        assert_eq!(threads.len(), CALLS_PER_TOOL);
        // A thread gives up its place and waits for a call in one step, so a burst after
        // this one finds every place free with a thread waiting, or held by a call about to
        // hand it over: no thread is started for it.
        let started = admission.threads();
        assert_eq!(started, CALLS_PER_TOOL + 1);
        let gate = Arc::new(Gate::default());
        let (_, on) = gated(&admission, "slow", CALLS_PER_TOOL * 4, &gate);
        gate.open();
        let again: HashSet<_> = (0..CALLS_PER_TOOL * 4)
            .map(|_| on.recv_timeout(WAIT).expect("every call ran"))
            .collect();
        assert!(again.len() <= CALLS_PER_TOOL, "{again:?}");
        assert_eq!(admission.threads(), started);
    }

    #[tokio::test]
    async fn a_tool_whose_database_runs_fewer_at_once_has_as_many_places() {
        let admission = Admission::default();
        // SQLite's readers for a read, its one writer for a write; a bound past the share
        // is no bound, and a bound of zero is one place.
        for (tool, at_once, places) in [
            ("read", Some(4), 4),
            ("write", Some(1), 1),
            ("pool", Some(CALLS_PER_TOOL * 2), CALLS_PER_TOOL),
            ("none", Some(0), 1),
        ] {
            let gate = Arc::new(Gate::default());
            let (waited, on) = gated_at_once(&admission, tool, at_once, places * 3, &gate);
            let ran_at_once = waited.iter().filter(|w| !**w).count();
            assert_eq!(ran_at_once, places, "{tool}: {waited:?}");
            // The rest waited for those places, and run once the gate opens.
            gate.open();
            for _ in 0..places * 3 {
                on.recv_timeout(WAIT).expect("every call ran");
            }
        }
    }

    #[tokio::test]
    async fn a_call_given_up_while_it_waits_is_dropped_unrun() {
        let admission = Admission::default();
        let gate = Arc::new(Gate::default());
        let (_, on) = gated(&admission, "slow", CALLS_PER_TOOL, &gate);
        let given_up = stop();
        let ran = Arc::new(AtomicBool::new(false));
        let marked = ran.clone();
        let work = move || marked.store(true, Ordering::SeqCst);
        assert!(admission.run("slow", None, &given_up, work));
        given_up.cancel.store(true, Ordering::SeqCst);
        // The call after it runs once the given-up one has left the queue.
        let (last, answered) = channel();
        assert!(admission.run("slow", None, &stop(), move || last.send(()).unwrap()));
        gate.open();
        answered.recv_timeout(WAIT).expect("the last call ran");
        assert!(!ran.load(Ordering::SeqCst));
        assert_eq!(on.iter().take(CALLS_PER_TOOL).count(), CALLS_PER_TOOL);
    }

    #[tokio::test]
    async fn a_call_that_panics_gives_its_thread_to_the_next() {
        let admission = Admission::default();
        let gate = Arc::new(Gate::default());
        let (_, on) = gated(&admission, "shaky", CALLS_PER_TOOL, &gate);
        for _ in 0..CALLS_PER_TOOL {
            assert!(admission.run("shaky", None, &stop(), || panic!("a handler's bug")));
        }
        let (last, answered) = channel();
        assert!(admission.run("shaky", None, &stop(), move || last.send(()).unwrap()));
        gate.open();
        answered
            .recv_timeout(WAIT)
            .expect("the call after the panics ran");
        assert_eq!(on.iter().take(CALLS_PER_TOOL).count(), CALLS_PER_TOOL);
    }
}
