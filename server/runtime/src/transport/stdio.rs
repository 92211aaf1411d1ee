//! The stdio transport: newline-delimited JSON-RPC on stdin and stdout.
//!
//! It replaces rmcp's own stdio transport so that every input gets an answer: a line that is
//! not JSON gets -32700 with a null id, well-formed JSON that is not a message gets -32600, a
//! request for a method MCP does not define gets -32601 (even before `initialize`), and an
//! oversized line is discarded without being buffered and answered with -32600.
//!
//! A few OS threads take turns reading stdin and one writes stdout, joined to the async side
//! by channels. tokio's own stdin and stdout hand every read and write to its blocking pool,
//! which cost several thread switches per call (see BENCHMARKS.md); the writer also batches
//! responses that are ready together into one flush.
//!
//! With a [`Lane`], a reading thread answers a plain SQL tool call itself (see
//! [`super::lane`]). It keeps its turn at stdin while the call is quick, so that a client that
//! waits for each answer costs no thread switch, and gives the turn to a waiting thread when
//! more input is already buffered or once the call turns out slow (SQLite's progress handler
//! notices; on PostgreSQL and MariaDB, the watchdog that stops late statements, within its
//! 20 ms round); only when no other thread is free to read does such a call go to rmcp, so
//! cancellations are always read.

use std::io::{BufRead, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use rmcp::RoleServer;
use rmcp::model::{ClientJsonRpcMessage, ClientRequest, JsonRpcMessage, RequestId};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::Value;
use tokio::sync::mpsc;

use super::lane::{Call, Lane, Route};
use crate::backend::Slow;

/// The largest message accepted on one line.
pub const MAX_LINE_BYTES: usize = 8 * 1024 * 1024;

/// Asks a running transport to stop reading and finish, e.g. on SIGTERM.
#[derive(Clone, Default)]
pub struct StopHandle {
    stopping: Arc<std::sync::atomic::AtomicBool>,
    notify: Arc<tokio::sync::Notify>,
}

impl StopHandle {
    pub fn stop(&self) {
        self.stopping
            .store(true, std::sync::atomic::Ordering::SeqCst);
        self.notify.notify_waiters();
    }

    async fn stopped(&self) {
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.stopping.load(std::sync::atomic::Ordering::SeqCst) {
                return;
            }
            notified.await;
        }
    }
}

/// Requests handed to rmcp and not yet answered, so that shutdown can wait for them.
#[derive(Default)]
struct InFlight {
    ids: std::sync::Mutex<std::collections::HashSet<String>>,
    answered: tokio::sync::Notify,
}

impl InFlight {
    fn key(id: &RequestId) -> String {
        serde_json::to_string(id).unwrap_or_default()
    }

    /// Records a request; false when a request with the same id is still unanswered.
    fn start(&self, id: &RequestId) -> bool {
        self.lock().insert(Self::key(id))
    }

    fn finish(&self, id: &RequestId) {
        if self.lock().remove(&Self::key(id)) {
            self.answered.notify_waiters();
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, std::collections::HashSet<String>> {
        self.ids
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The server's own requests to the client (elicitation, sampling, ping) still unanswered.
/// On the wire each carries an id made of a per-process secret and a counter, so a client
/// cannot answer a question before it was asked (say, a confirmation) by guessing its id; an
/// answer is matched back to rmcp's id, and one that matches no question is dropped.
struct Asked {
    prefix: String,
    next: std::sync::atomic::AtomicU64,
    open: std::sync::Mutex<std::collections::HashMap<String, RequestId>>,
}

impl Asked {
    fn new() -> Asked {
        Asked {
            prefix: format!(
                "s-{}",
                crate::confirm::hex(&crate::confirm::random_bytes::<12>())
            ),
            next: std::sync::atomic::AtomicU64::new(0),
            open: std::sync::Mutex::default(),
        }
    }

    /// The wire id for an outgoing request with rmcp's `id`.
    fn issue(&self, id: RequestId) -> RequestId {
        let n = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let wire = format!("{}-{n}", self.prefix);
        self.lock().insert(wire.clone(), id);
        RequestId::String(wire.into())
    }

    /// rmcp's id for an answer's wire id, once; `None` for an id this server never sent.
    fn answered(&self, wire: &RequestId) -> Option<RequestId> {
        match wire {
            RequestId::String(s) => self.lock().remove(&**s),
            RequestId::Number(_) => None,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<String, RequestId>> {
        self.open
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// What the reader thread hands over: a whole line, or the news that one was too long.
enum Input {
    Line(Vec<u8>),
    Oversized,
}

pub struct StdioTransport {
    lines: mpsc::UnboundedReceiver<Input>,
    /// Which calls the lane may take, from the messages rmcp is handed.
    lifecycle: Lifecycle,
    out: std::sync::mpsc::Sender<Vec<u8>>,
    max_line: usize,
    requests: Arc<InFlight>,
    asked: Arc<Asked>,
    stop: StopHandle,
    drain_timeout: std::time::Duration,
    drain_deadline: Option<tokio::time::Instant>,
    /// What the calls and listen streams follow when the transport drains and gives up.
    shutdown: crate::shutdown::Shutdown,
}

/// Which calls the lane may take, as the session's lifecycle stands: rmcp chooses it from
/// the first request, and the transport follows that choice from the messages it hands rmcp.
/// A thread that reads a call before the transport has seen the choice leaves it to rmcp.
#[derive(Clone, Default)]
struct Lifecycle(Arc<std::sync::atomic::AtomicU8>);

impl Lifecycle {
    /// No request has chosen yet.
    const UNDECIDED: u8 = 0;
    /// The first request was an `initialize` of a revision before 2026-07-28, and
    /// `notifications/initialized` has not come yet.
    const INITIALIZING: u8 = 1;
    /// A session that began with `initialize` on a revision before 2026-07-28: plain calls.
    const SESSION: u8 = 2;
    /// Requests of 2026-07-28 without `initialize`, each with its `_meta`: such calls.
    const PER_REQUEST: u8 = 3;
    /// Neither, for good (an `initialize` asking for 2026-07-28, or one after requests).
    const NEITHER: u8 = 4;

    fn set(&self, state: u8) {
        self.0.store(state, Ordering::SeqCst);
    }

    fn get(&self) -> u8 {
        self.0.load(Ordering::SeqCst)
    }

    /// Whether the lane may take some calls now.
    fn open(&self) -> bool {
        matches!(self.get(), Self::SESSION | Self::PER_REQUEST)
    }

    /// Whether the lane may take `call` now.
    fn takes(&self, call: &Call) -> bool {
        match self.get() {
            Self::SESSION => !call.per_request(),
            Self::PER_REQUEST => call.per_request(),
            _ => false,
        }
    }
}

/// Whether a request other than `initialize`, `ping` and `server/discover` makes rmcp choose
/// the per-request lifecycle: its `_meta` names a version rmcp supports, with the client's
/// capabilities.
fn chooses_per_request(request: &ClientRequest) -> bool {
    use rmcp::model::{GetMeta, ProtocolVersion};
    let meta = request.get_meta();
    meta.protocol_version()
        .is_some_and(|v| ProtocolVersion::KNOWN_VERSIONS.contains(&v))
        && meta
            .missing_required_keys(&ProtocolVersion::V_2026_07_28)
            .is_empty()
}

/// Reads a stream line by line, never buffering more than `max` bytes of one line.
struct LineReader {
    read: std::io::BufReader<Box<dyn std::io::Read + Send>>,
    max: usize,
    line: Vec<u8>,
    discarding: bool,
    ended: bool,
    fd: Pollable,
    /// Whether the last request came within [`LOOK`] of the answer before it: the client
    /// calls back to back.
    brisk: bool,
}

/// A stream's descriptor, where it can be polled (stdin on Unix).
#[derive(Clone, Copy, Default)]
struct Pollable(#[cfg(unix)] Option<std::os::fd::BorrowedFd<'static>>);

impl Pollable {
    /// stdin, on a machine where looking for the next request leaves a core to the client:
    /// with one core, the look would only keep the client from running.
    fn stdin() -> Pollable {
        let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
        #[cfg(unix)]
        return Pollable((cores > 1).then(rustix::stdio::stdin));
        #[cfg(not(unix))]
        {
            let _ = cores;
            Pollable()
        }
    }
}

/// How long the thread with the turn at stdin looks for the next request after a lane answer,
/// when the client calls back to back, before it blocks on stdin.
const LOOK: std::time::Duration = std::time::Duration::from_micros(50);

impl LineReader {
    /// Looks for the next request for up to [`LOOK`] after the answer written at `answered`,
    /// when the client calls back to back and nothing is buffered. A thread blocked on stdin
    /// lets its core sleep, and on a virtual machine waking a sleeping core costs tens of
    /// microseconds (see `bench/results/HISTORY.md`), more than the look; a client that pauses makes
    /// the next request late, and the thread blocks at once until it calls briskly again.
    fn look_for_next(&mut self, answered: std::time::Instant) {
        #[cfg(unix)]
        if let Some(fd) = self.fd.0
            && self.brisk
            && self.read.buffer().is_empty()
        {
            use rustix::event::{PollFd, PollFlags, Timespec, poll};
            let now = Timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            while answered.elapsed() < LOOK {
                let mut fds = [PollFd::new(&fd, PollFlags::IN)];
                if poll(&mut fds, Some(&now)).map_or(true, |n| n > 0) {
                    return;
                }
                std::hint::spin_loop();
            }
        }
        #[cfg(not(unix))]
        let _ = answered;
    }

    /// The next line or oversize notice; `None` at end of input, and ever after.
    fn next(&mut self) -> Option<Input> {
        while !self.ended {
            let available = match self.read.fill_buf() {
                Ok(a) => a,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    tracing::error!(error = %e, "reading stdin failed");
                    self.ended = true;
                    return None;
                }
            };
            if available.is_empty() {
                self.ended = true;
                // The last message may end at end of input without a newline; it still counts.
                let last = std::mem::take(&mut self.line);
                return (!self.discarding && !last.is_empty()).then_some(Input::Line(last));
            }
            let newline = available.iter().position(|b| *b == b'\n');
            let take = newline.map_or(available.len(), |i| i + 1);
            let mut event = None;
            if self.discarding {
                self.discarding = newline.is_none();
            } else if self.line.len() + take > self.max {
                self.line.clear();
                self.discarding = newline.is_none();
                event = Some(Input::Oversized);
            } else {
                self.line.extend_from_slice(&available[..take]);
                if newline.is_some() {
                    event = Some(Input::Line(std::mem::replace(
                        &mut self.line,
                        Vec::with_capacity(4096),
                    )));
                }
            }
            self.read.consume(take);
            if event.is_some() {
                return event;
            }
        }
        None
    }
}

/// stdout, shared by the writer thread and the threads that answer lane calls.
type Out = Arc<std::sync::Mutex<std::io::BufWriter<Box<dyn std::io::Write + Send>>>>;

fn lock_out(
    out: &Out,
) -> std::sync::MutexGuard<'_, std::io::BufWriter<Box<dyn std::io::Write + Send>>> {
    out.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Writes each message, flushing once no more are waiting, until every sender is gone.
fn write_messages(out: &Out, rx: &std::sync::mpsc::Receiver<Vec<u8>>) {
    while let Ok(first) = rx.recv() {
        let mut write = lock_out(out);
        let mut result = write.write_all(&first);
        while let (Ok(()), Ok(more)) = (&result, rx.try_recv()) {
            result = write.write_all(&more);
        }
        if let Err(e) = result.and_then(|()| write.flush()) {
            tracing::error!(error = %e, "writing stdout failed");
            return;
        }
    }
    // A lane answer being written now is finished before the process may exit.
    let _ = lock_out(out).flush();
}

/// A lane call a reading thread took on.
struct Claimed {
    call: Call,
    /// The engine of the surface the call was claimed on; it runs there.
    engine: Arc<crate::engine::Engine>,
    id: RequestId,
    /// The id as JSON text, the key of its cancellation flag.
    key: String,
    cancel: Arc<AtomicBool>,
}

/// What the reading threads share.
struct Readers {
    /// stdin; only the thread whose turn it is reads.
    reader: std::sync::Mutex<LineReader>,
    turn: std::sync::Mutex<Turn>,
    /// Signalled when the turn is given up while a thread waits for it.
    turn_free: std::sync::Condvar,
    tx: mpsc::UnboundedSender<Input>,
    lane: Option<Lane>,
    lifecycle: Lifecycle,
    out: Out,
    requests: Arc<InFlight>,
    /// The cancellation flags of lane calls running, by request id as JSON text.
    running: std::sync::Mutex<std::collections::HashMap<String, Arc<AtomicBool>>>,
}

/// The turn at stdin: whether a thread has it, and how many wait for it. A thread keeps its
/// turn through a quick lane call, so that a client that waits for each answer before it
/// sends the next request costs no thread switch; a call that turns out slow, or that comes
/// while more input is already buffered, gives the turn to a waiting thread, which then reads
/// the next message (a cancellation, say) while the call runs.
#[derive(Default)]
struct Turn {
    taken: bool,
    waiting: usize,
}

/// How long a lane call runs with its thread's turn at stdin before giving it up.
const KEEP_TURN: std::time::Duration = std::time::Duration::from_millis(1);

impl Readers {
    /// One reading thread: takes its turn at stdin, then answers a lane call itself or hands
    /// the message to rmcp, until end of input.
    fn work(self: &Arc<Self>) {
        let mut has_turn = false;
        // When this thread last wrote a lane answer and kept its turn.
        let mut answered: Option<std::time::Instant> = None;
        loop {
            if !has_turn {
                self.take_turn();
                has_turn = true;
                answered = None;
            }
            let (input, buffered) = {
                let mut reader = self
                    .reader
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                if let Some(at) = answered {
                    reader.look_for_next(at);
                }
                let input = reader.next();
                if let Some(at) = answered {
                    reader.brisk = at.elapsed() <= LOOK;
                }
                (input, !reader.read.buffer().is_empty())
            };
            let Some(input) = input else {
                // Every other thread, in its turn, finds the end too.
                self.give_turn();
                return;
            };
            // A lane call is claimed before the next message is read, so that a cancellation
            // that follows it finds it running.
            let claimed = match &input {
                Input::Line(line) => self.claim(line),
                Input::Oversized => None,
            };
            if let Some(claimed) = claimed {
                has_turn = self.answer(claimed, buffered);
                answered = has_turn.then(std::time::Instant::now);
                continue;
            }
            answered = None;
            if let Input::Line(line) = &input {
                self.cancel_lane_call(line);
            }
            // Handed over before the next message is read, so that rmcp sees the messages
            // in stdin's order (a cancellation after its request).
            if self.tx.send(input).is_err() {
                self.give_turn();
                return;
            }
        }
    }

    /// Waits until no other thread has the turn at stdin, and takes it.
    fn take_turn(&self) {
        let mut turn = self.lock_turn();
        while turn.taken {
            turn.waiting += 1;
            turn = self
                .turn_free
                .wait(turn)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            turn.waiting -= 1;
        }
        turn.taken = true;
    }

    /// Gives up the turn at stdin, waking a thread that waits for it.
    fn give_turn(&self) {
        let mut turn = self.lock_turn();
        turn.taken = false;
        let wake = turn.waiting > 0;
        drop(turn);
        if wake {
            self.turn_free.notify_one();
        }
    }

    fn lock_turn(&self) -> std::sync::MutexGuard<'_, Turn> {
        self.turn
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// `line` as a lane call this thread answers: when it is one, the session's lifecycle
    /// lets the lane take it and another thread is free to read meanwhile. Registers it as
    /// in flight and cancellable; `None` leaves the line to rmcp.
    fn claim(&self, line: &[u8]) -> Option<Claimed> {
        let lane = self.lane.as_ref()?;
        if !self.lifecycle.open() || self.lock_turn().waiting == 0 {
            return None;
        }
        let call = Call::parse(line)?;
        let lifecycle = self.lifecycle.takes(&call);
        let engine = lane.admits(&call, Route::Stdio { lifecycle })?;
        let id = call.request_id()?;
        // A duplicate id goes to rmcp, which refuses it.
        if !self.requests.start(&id) {
            return None;
        }
        let key = call.id.get().to_string();
        let cancel = Arc::new(AtomicBool::new(false));
        self.lock_running().insert(key.clone(), cancel.clone());
        Some(Claimed {
            call,
            engine,
            id,
            key,
            cancel,
        })
    }

    /// Runs a claimed lane call on this thread, which has the turn at stdin, and writes its
    /// answer; whether the thread still has the turn. The turn is given up at once when more
    /// input is `buffered`, else once the call turns out slow: SQLite's statements say so as
    /// they run; on a database server the watchdog that stops late statements does, within
    /// its interval (`backend::watchdog::WATCH_INTERVAL`), so that a client that waits for
    /// each answer costs no thread switch there either.
    fn answer(self: &Arc<Self>, claimed: Claimed, buffered: bool) -> bool {
        let Some(lane) = &self.lane else {
            self.give_turn();
            return false;
        };
        let slow = if buffered {
            self.give_turn();
            None
        } else {
            let readers = Arc::downgrade(self);
            Some(Slow::new(KEEP_TURN, move || {
                if let Some(r) = readers.upgrade() {
                    r.give_turn();
                }
            }))
        };
        let mut answer = lane.answer(&claimed.call, &claimed.engine, claimed.cancel, slow.clone());
        let has_turn = slow.is_some_and(|s| !s.disarm());
        answer.push(b'\n');
        self.lock_running().remove(&claimed.key);
        let mut out = lock_out(&self.out);
        // Finished before it is written, as rmcp's answers are: a client that reuses the id
        // as soon as it reads the answer is not refused.
        self.requests.finish(&claimed.id);
        if let Err(e) = out.write_all(&answer).and_then(|()| out.flush()) {
            tracing::error!(error = %e, "writing stdout failed");
        }
        has_turn
    }

    /// Sets the flag of the lane call a `notifications/cancelled` names, if one is running.
    fn cancel_lane_call(&self, line: &[u8]) {
        if self.lane.is_none() || !super::lane::contains!(line, b"notifications/cancelled") {
            return;
        }
        let Ok(v) = serde_json::from_slice::<Value>(line) else {
            return;
        };
        if let Some(id) = v.pointer("/params/requestId")
            && let Some(flag) = self.lock_running().get(&id.to_string())
        {
            flag.store(true, Ordering::SeqCst);
        }
    }

    fn lock_running(
        &self,
    ) -> std::sync::MutexGuard<'_, std::collections::HashMap<String, Arc<AtomicBool>>> {
        self.running
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl StdioTransport {
    /// A transport over this process's stdin and stdout; with `lane`, plain SQL tool calls
    /// are answered on the thread that read them. The returned handle finishes once the
    /// transport is dropped and everything it was given has been written; join it before
    /// exiting so that no answer is lost.
    pub fn stdio(lane: Option<Lane>) -> (StdioTransport, std::thread::JoinHandle<()>) {
        Self::over_polled(
            std::io::stdin(),
            std::io::stdout(),
            MAX_LINE_BYTES,
            lane,
            Pollable::stdin(),
        )
    }

    /// A transport over any reader and writer: one thread reads (three take turns with a
    /// lane, so that two may answer calls while one reads) and one writes; `fd` is `read`'s
    /// descriptor when it can be polled.
    fn over_polled(
        read: impl std::io::Read + Send + 'static,
        write: impl std::io::Write + Send + 'static,
        max_line: usize,
        lane: Option<Lane>,
        fd: Pollable,
    ) -> (StdioTransport, std::thread::JoinHandle<()>) {
        let (tx, lines) = mpsc::unbounded_channel();
        let out: Out = Arc::new(std::sync::Mutex::new(std::io::BufWriter::with_capacity(
            64 * 1024,
            Box::new(write),
        )));
        let requests: Arc<InFlight> = Arc::default();
        let lifecycle = Lifecycle::default();
        let threads = if lane.is_some() { 3 } else { 1 };
        let readers = Arc::new(Readers {
            reader: std::sync::Mutex::new(LineReader {
                read: std::io::BufReader::with_capacity(64 * 1024, Box::new(read)),
                max: max_line,
                line: Vec::with_capacity(4096),
                discarding: false,
                ended: false,
                fd,
                brisk: false,
            }),
            turn: std::sync::Mutex::default(),
            turn_free: std::sync::Condvar::new(),
            tx,
            lane,
            lifecycle: lifecycle.clone(),
            out: out.clone(),
            requests: requests.clone(),
            running: std::sync::Mutex::default(),
        });
        for i in 0..threads {
            let readers = readers.clone();
            std::thread::Builder::new()
                .name(format!("mcpspec-stdin-{i}"))
                .spawn(move || readers.work())
                .expect("spawn a stdin thread");
        }
        let (sender, rx) = std::sync::mpsc::channel::<Vec<u8>>();
        let writer = std::thread::Builder::new()
            .name("mcpspec-stdout".into())
            .spawn(move || write_messages(&out, &rx))
            .expect("spawn the stdout thread");
        let transport = StdioTransport {
            lines,
            lifecycle,
            out: sender,
            max_line,
            requests,
            asked: Arc::new(Asked::new()),
            stop: StopHandle::default(),
            drain_timeout: std::time::Duration::from_secs(30),
            drain_deadline: None,
            shutdown: crate::shutdown::Shutdown::default(),
        };
        (transport, writer)
    }

    /// A handle that makes the transport stop reading and drain, as at end of input.
    pub fn stop_handle(&self) -> StopHandle {
        self.stop.clone()
    }

    /// How long to wait at end of input for calls in flight to be answered.
    #[must_use]
    pub fn with_drain_timeout(mut self, timeout: std::time::Duration) -> Self {
        self.drain_timeout = timeout;
        self
    }

    /// The shutdown the server's calls follow (see [`crate::shutdown`]): this transport says
    /// when it drains and when it gives up on the calls still running.
    #[must_use]
    pub fn with_shutdown(mut self, shutdown: crate::shutdown::Shutdown) -> Self {
        self.shutdown = shutdown;
        self
    }

    /// At end of input: write our own replies, then wait until rmcp has answered every request
    /// it was given, up to the drain timeout; calls still running then are abandoned, which
    /// answers them. Cancellation-safe: the deadline is kept.
    async fn drain(&mut self) {
        self.shutdown.drain();
        let deadline = *self
            .drain_deadline
            .get_or_insert_with(|| tokio::time::Instant::now() + self.drain_timeout);
        loop {
            let answered = self.requests.answered.notified();
            tokio::pin!(answered);
            answered.as_mut().enable();
            let left = self.requests.lock().len();
            if left == 0 {
                return;
            }
            if tokio::time::timeout_at(deadline, answered).await.is_err() {
                tracing::warn!(
                    unanswered = left,
                    "shutdown timeout reached; abandoning calls in flight"
                );
                self.shutdown.abandon();
                return;
            }
        }
    }

    fn reply(&mut self, id: Option<Value>, code: i64, message: String) {
        self.send_value(&crate::protocol::jsonrpc::error_response(
            id, code, &message,
        ));
    }

    fn send_value(&mut self, body: &Value) {
        let mut bytes = serde_json::to_vec(body).unwrap_or_default();
        bytes.push(b'\n');
        // The writer thread keeps the order of everything it is given.
        let _ = self.out.send(bytes);
    }

    /// Answers a line that did not parse as a message (see [`crate::protocol::jsonrpc`]).
    fn reject(&mut self, line: &[u8], err: &serde_json::Error) {
        if let Some(answer) = crate::protocol::jsonrpc::answer_unparsable(line, err) {
            self.send_value(&answer);
        }
    }

    /// Answers a request rmcp could only decode as a custom one (see
    /// [`crate::protocol::jsonrpc::custom_refusal`]); `true` when answered.
    fn refuse_custom(&mut self, msg: &ClientJsonRpcMessage) -> bool {
        if let JsonRpcMessage::Request(r) = msg
            && let ClientRequest::CustomRequest(c) = &r.request
        {
            let answer = crate::protocol::jsonrpc::custom_refusal(
                Some(id_json(&r.id)),
                &c.method,
                c.params.as_ref(),
                crate::protocol::jsonrpc::is_per_request(c.params.as_ref()),
            );
            self.send_value(&answer);
            return true;
        }
        false
    }

    /// Notes the lifecycle `request` chooses, if it is the first to choose one.
    fn follow_lifecycle(&mut self, request: &ClientRequest) {
        let undecided = self.lifecycle.get() == Lifecycle::UNDECIDED;
        match request {
            ClientRequest::InitializeRequest(init) => {
                crate::watch::named(
                    || Some(crate::watch::Origin::Stdio),
                    &init.params.client_info.name,
                );
                // An `initialize` asking for 2026-07-28, or one that is not the session's
                // first request, leaves every call to rmcp.
                let modern = super::lane::is_modern(&init.params.protocol_version.to_string());
                self.lifecycle.set(if undecided && !modern {
                    Lifecycle::INITIALIZING
                } else {
                    Lifecycle::NEITHER
                });
            }
            ClientRequest::PingRequest(_) | ClientRequest::DiscoverRequest(_) => {}
            other => {
                if undecided && chooses_per_request(other) {
                    self.lifecycle.set(Lifecycle::PER_REQUEST);
                }
                // A request of 2026-07-28 names its client in its own `_meta` (there is no
                // `initialize` to name it once): the session's calls are shown with it.
                if crate::watch::watcher().is_some()
                    && let Some(info) = rmcp::model::GetMeta::get_meta(other).client_info()
                {
                    crate::watch::named(|| Some(crate::watch::Origin::Stdio), &info.name);
                }
            }
        }
    }

    /// `notifications/initialized`: a session that began with `initialize` of an earlier
    /// revision now takes the lane.
    fn initialized(&self) {
        if self.lifecycle.get() == Lifecycle::INITIALIZING {
            self.lifecycle.set(Lifecycle::SESSION);
        }
    }

    /// The bookkeeping of a message before rmcp gets it: answers are matched back to the
    /// server's own requests, a request with an id in flight is refused, cancellations and
    /// `notifications/initialized` are noted. `false` when the message is not passed on.
    fn admit(&mut self, msg: &mut ClientJsonRpcMessage) -> bool {
        match msg {
            JsonRpcMessage::Response(r) => match self.asked.answered(&r.id) {
                Some(id) => r.id = id,
                None => {
                    tracing::warn!(id = %id_json(&r.id), "ignoring an answer to a request this server did not send");
                    return false;
                }
            },
            JsonRpcMessage::Error(e) => {
                match e.id.as_ref().and_then(|id| self.asked.answered(id)) {
                    Some(id) => e.id = Some(id),
                    None => {
                        tracing::warn!(
                            "ignoring an error answer to a request this server did not send"
                        );
                        return false;
                    }
                }
            }
            JsonRpcMessage::Request(r) => {
                self.follow_lifecycle(&r.request);
                // Answers are matched to requests by id alone: a second request with the
                // id of one still in flight could never be told apart, so it never runs.
                if !self.requests.start(&r.id) {
                    self.reply(
                        Some(id_json(&r.id)),
                        -32600,
                        format!(
                            "invalid request: request id {} is already in flight; use a new id for each request",
                            id_json(&r.id)
                        ),
                    );
                    return false;
                }
            }
            // A cancelled request may never be answered; shutdown need not wait for it.
            JsonRpcMessage::Notification(n) => match &n.notification {
                rmcp::model::ClientNotification::CancelledNotification(c) => {
                    if let Some(id) = &c.params.request_id {
                        self.requests.finish(id);
                    }
                }
                rmcp::model::ClientNotification::InitializedNotification(_) => {
                    self.initialized();
                }
                _ => {}
            },
        }
        true
    }
}

fn id_json(id: &RequestId) -> Value {
    serde_json::to_value(id).unwrap_or(Value::Null)
}

impl Transport<RoleServer> for StdioTransport {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let out = self.out.clone();
        let requests = self.requests.clone();
        let mut item = item;
        if let JsonRpcMessage::Request(r) = &mut item {
            r.id = self.asked.issue(r.id.clone());
        }
        async move {
            let mut bytes = serde_json::to_vec(&item).map_err(std::io::Error::other)?;
            bytes.push(b'\n');
            // Queued answers are written before the writer thread ends, and the server joins
            // that thread before it exits, so queued counts as answered for shutdown.
            out.send(bytes).map_err(|_| {
                std::io::Error::new(std::io::ErrorKind::BrokenPipe, "stdout is closed")
            })?;
            match &item {
                JsonRpcMessage::Response(r) => requests.finish(&r.id),
                JsonRpcMessage::Error(e) => {
                    if let Some(id) = &e.id {
                        requests.finish(id);
                    }
                }
                _ => {}
            }
            Ok(())
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            let stop = self.stop.clone();
            let input = tokio::select! {
                input = self.lines.recv() => input,
                () = stop.stopped() => None,
            };
            let bytes = match input {
                None => {
                    self.drain().await;
                    return None;
                }
                Some(Input::Oversized) => {
                    self.reply(
                        None,
                        -32600,
                        format!("invalid request: message exceeds {} bytes", self.max_line),
                    );
                    continue;
                }
                Some(Input::Line(bytes)) => bytes,
            };
            let mut line: &[u8] = &bytes;
            while let [rest @ .., b'\n' | b'\r'] = line {
                line = rest;
            }
            let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let parsed = serde_json::from_slice::<ClientJsonRpcMessage>(line);
            let msg = match parsed {
                Ok(m) => m,
                Err(e) => {
                    let owned = line.to_vec();
                    self.reject(&owned, &e);
                    continue;
                }
            };
            if self.refuse_custom(&msg) {
                continue;
            }
            let mut msg = msg;
            if self.admit(&mut msg) {
                return Some(msg);
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        // The writer thread flushes whenever its queue runs dry; nothing is held back here.
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stream that hands over at most `chunk` bytes a read, as a pipe may.
    struct Chunked {
        data: Vec<u8>,
        at: usize,
        chunk: usize,
    }

    impl std::io::Read for Chunked {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = self.chunk.min(buf.len()).min(self.data.len() - self.at);
            buf[..n].copy_from_slice(&self.data[self.at..self.at + n]);
            self.at += n;
            Ok(n)
        }
    }

    /// What a reader of lines at most `max` bytes long makes of `input` read `chunk` bytes at
    /// a time: each line as text, `!` for a line that was too long.
    fn read(input: &str, max: usize, chunk: usize) -> Vec<String> {
        let stream = Chunked {
            data: input.as_bytes().to_vec(),
            at: 0,
            chunk,
        };
        let mut reader = LineReader {
            read: std::io::BufReader::with_capacity(8, Box::new(stream)),
            max,
            line: Vec::new(),
            discarding: false,
            ended: false,
            fd: Pollable::default(),
            brisk: false,
        };
        let out: Vec<String> = std::iter::from_fn(|| reader.next())
            .map(|i| match i {
                Input::Line(l) => String::from_utf8(l).unwrap(),
                Input::Oversized => "!".into(),
            })
            .collect();
        assert!(reader.next().is_none(), "input that ended stays ended");
        out
    }

    /// Lines come out whole however the stream cuts them; a line over the limit is one notice
    /// and reading goes on at the next line; the last line counts without its newline.
    #[test]
    fn lines_come_whole_and_a_long_one_is_one_notice() {
        let cases: [(&str, usize, &[&str]); 7] = [
            ("", 16, &[]),
            ("a\nbc\n", 16, &["a\n", "bc\n"]),
            ("a\nlast", 16, &["a\n", "last"]),
            ("\n\n", 16, &["\n", "\n"]),
            ("0123456789abcdef-too-long\nok\n", 16, &["!", "ok\n"]),
            (
                "ok\n0123456789abcdef-too-long-to-the-end",
                16,
                &["ok\n", "!"],
            ),
            ("0123456789abcde\n", 16, &["0123456789abcde\n"]),
        ];
        for (input, max, want) in cases {
            for chunk in [1, 2, 3, 7, 64] {
                assert_eq!(
                    read(input, max, chunk),
                    want,
                    "{input:?} read {chunk} at a time"
                );
            }
        }
    }

    /// The server's questions go out under ids a client cannot guess, and each answer is
    /// matched back to rmcp's id once; an id never sent is no answer.
    #[test]
    fn answers_match_only_questions_asked_and_only_once() {
        let asked = Asked::new();
        let wire = asked.issue(RequestId::Number(7));
        let RequestId::String(s) = &wire else {
            panic!("a wire id is a string: {wire:?}");
        };
        assert!(s.starts_with("s-") && s.len() > 20, "{s}");
        assert_ne!(asked.issue(RequestId::Number(8)), wire);
        assert_eq!(asked.answered(&wire), Some(RequestId::Number(7)));
        assert_eq!(asked.answered(&wire), None, "answered once");
        assert_eq!(asked.answered(&RequestId::Number(7)), None);
        assert_eq!(asked.answered(&RequestId::String("s-guess-0".into())), None);
        assert_ne!(Asked::new().prefix, asked.prefix, "a secret per process");
    }

    /// A request id in flight cannot start again until it is answered.
    #[test]
    fn an_id_in_flight_is_refused_until_answered() {
        let flight = InFlight::default();
        let id = RequestId::String("a".into());
        assert!(flight.start(&id));
        assert!(!flight.start(&id));
        assert!(flight.start(&RequestId::Number(1)), "another id");
        flight.finish(&id);
        assert!(flight.start(&id));
    }
}
