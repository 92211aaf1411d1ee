//! The bounded queue between the threads that end spans and the exporter's thread: each thread
//! pushes into a single-producer ring of its own (`rtrb`), which publishes a span with one
//! release store, no lock and no read-modify-write, so that ending a span never waits on a fence
//! or shares a lock or a cache line with another thread. The spans waiting are counted in a
//! shared counter a chunk at a time; the exporter is woken when half the queue is waiting (in
//! whole batches, at least one) or a flush is asked for, never per span: at the default sizes
//! it wakes once for eight exports, posted back to back, since on a loaded server a wake-up of
//! its thread costs more than a batch's encoding (`BENCHMARKS.md`, "Fewer wake-ups"). A span
//! that would take the queue past its capacity is dropped and counted. A thread's ring starts
//! small and doubles when it is full, up to the whole capacity, so that one busy thread may
//! fill the queue as it could when every thread shared one, and a thread keeps only the room
//! its own backlog needed; the ring it outgrew is emptied by the exporter, in order, before
//! the new one.
//!
//! The queue is bounded by bytes as well as spans: what a span holds outside its record (a
//! trace state, an id or session too long to keep inline, an error; see
//! [`Record::heap_bytes`]) is counted in one shared total, and a span that would take it past
//! [`MAX_HEAP_BYTES`] is dropped and counted. Most spans hold nothing outside, and cost no
//! count.

use std::cell::{Cell, OnceCell, RefCell};
use std::sync::atomic::{AtomicIsize, AtomicUsize, Ordering};
use std::sync::mpsc::SyncSender;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rtrb::chunks::ReadChunk;
use rtrb::{Consumer, Producer, PushError, RingBuffer};

use super::record::{Record, drop_spans};

/// How many spans a thread adds to the shared count at once (at most a batch).
const CHUNK: usize = 32;

/// How many spans a thread's first ring holds (at most the capacity).
const FIRST_RING: usize = 4 * CHUNK;

/// The most bytes the spans waiting may hold outside their records (see the module comment):
/// a thousand requests' worth of the largest trace state W3C allows.
pub(super) const MAX_HEAP_BYTES: usize = 16 * 1024 * 1024;

/// The rings' read ends, taken for the exporter while it sends what they hold, and the
/// flushes asked for.
pub(super) struct Waiting {
    pub(super) rings: Vec<Consumer<Record>>,
    pub(super) flushes: Vec<SyncSender<()>>,
}

/// What wakes the exporter: half the queue waiting, or flushes.
#[derive(Default)]
struct Signal {
    full: bool,
    flushes: Vec<SyncSender<()>>,
}

pub(super) struct Queue {
    /// Every thread's ring, read end, in the order they were made; a thread that ended (or
    /// outgrew its ring) leaves its ring until a sweep empties it.
    rings: Mutex<Vec<Consumer<Record>>>,
    /// The spans queued, as the threads have counted them (a chunk at a time) less those
    /// taken: behind by the spans each live thread has not counted yet, so it may dip below 0.
    pending: Arc<AtomicIsize>,
    signal: Mutex<Signal>,
    ready: Condvar,
    capacity: usize,
    /// How many spans waiting wake the exporter: [`wake_at`].
    wake: usize,
    chunk: usize,
    /// The bytes the spans queued hold outside their records, and the most they may.
    heap: AtomicUsize,
    max_heap: usize,
}

/// How many spans waiting wake the exporter, for a queue of `capacity` spans exported `batch`
/// at a time: half the queue rounded down to whole batches, at least one batch. The other half
/// takes the spans ended while the exporter posts.
fn wake_at(capacity: usize, batch: usize) -> usize {
    (capacity / 2 / batch).max(1) * batch
}

/// A thread's write end, and the spans it queued but has not added to the shared count: it
/// adds them when the thread ends, so that the count never drifts.
struct Local {
    ring: RefCell<Producer<Record>>,
    uncounted: Cell<usize>,
    pending: Arc<AtomicIsize>,
}

impl Drop for Local {
    fn drop(&mut self) {
        let n = self.uncounted.get() as isize;
        self.pending.fetch_add(n, Ordering::Relaxed);
    }
}

thread_local! {
    static LOCAL: OnceCell<Local> = const { OnceCell::new() };
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Queue {
    /// A queue holding at most `capacity` spans, exported `batch` at a time, and at most
    /// [`MAX_HEAP_BYTES`] outside their records.
    pub(super) fn new(capacity: usize, batch: usize) -> Queue {
        Queue::bounded(capacity, batch, MAX_HEAP_BYTES)
    }

    /// [`Queue::new`] with `max_heap` bytes outside the records at most.
    fn bounded(capacity: usize, batch: usize, max_heap: usize) -> Queue {
        Queue {
            rings: Mutex::default(),
            pending: Arc::default(),
            signal: Mutex::default(),
            ready: Condvar::new(),
            capacity,
            wake: wake_at(capacity, batch),
            chunk: CHUNK.min(batch),
            heap: AtomicUsize::new(0),
            max_heap,
        }
    }

    /// Counts `bytes` more held outside the records; false (counting nothing) when that would
    /// pass the bound.
    fn reserve(&self, bytes: usize) -> bool {
        if bytes == 0 {
            return true;
        }
        let before = self.heap.fetch_add(bytes, Ordering::Relaxed);
        if before.saturating_add(bytes) > self.max_heap {
            self.heap.fetch_sub(bytes, Ordering::Relaxed);
            return false;
        }
        true
    }

    /// A ring of `size` spans, its read end handed to the exporter.
    fn ring(&self, size: usize) -> Producer<Record> {
        let (producer, consumer) = RingBuffer::new(size);
        lock(&self.rings).push(consumer);
        producer
    }

    /// This thread's write end, made the first time it ends a span.
    fn local(&self) -> Local {
        Local {
            ring: RefCell::new(self.ring(FIRST_RING.min(self.capacity))),
            uncounted: Cell::new(0),
            pending: Arc::clone(&self.pending),
        }
    }

    /// Queues `record` in this thread's ring, or drops and counts it when the queue is full
    /// (or the thread is ending and has no ring any more).
    pub(super) fn push(&self, record: Record) {
        let bytes = record.heap_bytes();
        if !self.reserve(bytes) {
            drop_spans(1, "the export queue holds its most bytes");
            return;
        }
        let queued = LOCAL.try_with(|cell| {
            let local = cell.get_or_init(|| self.local());
            let uncounted = local.uncounted.get();
            let pending = self.pending.load(Ordering::Relaxed).max(0) as usize;
            if pending + uncounted >= self.capacity {
                return false;
            }
            let Ok(mut ring) = local.ring.try_borrow_mut() else {
                return false;
            };
            if let Err(PushError::Full(record)) = ring.push(record) {
                // Outgrown: a ring twice the size takes this span and the next; the exporter
                // empties the old one, which this thread lets go.
                let size = ring.buffer().capacity();
                if size >= self.capacity {
                    return false;
                }
                *ring = self.ring((2 * size).min(self.capacity));
                if ring.push(record).is_err() {
                    return false;
                }
            }
            drop(ring);
            if uncounted + 1 < self.chunk {
                local.uncounted.set(uncounted + 1);
                return true;
            }
            local.uncounted.set(0);
            let n = (uncounted + 1) as isize;
            let before = self.pending.fetch_add(n, Ordering::Relaxed);
            let wake = self.wake as isize;
            if before < wake && before + n >= wake {
                lock(&self.signal).full = true;
                self.ready.notify_one();
            }
            true
        });
        if queued != Ok(true) {
            self.heap.fetch_sub(bytes, Ordering::Relaxed);
            drop_spans(1, "the export queue is full");
        }
    }

    /// Asks the exporter to send what is waiting, `ack` told when it has.
    pub(super) fn flush(&self, ack: SyncSender<()>) {
        lock(&self.signal).flushes.push(ack);
        self.ready.notify_one();
    }

    /// Waits until half the queue is waiting, a flush is asked for or `delay` has passed, and
    /// takes the rings' read ends for [`Queue::drain`]; [`Queue::give_back`] returns them.
    pub(super) fn take(&self, delay: Duration) -> Waiting {
        let due = Instant::now() + delay;
        let mut signal = lock(&self.signal);
        while !signal.full && signal.flushes.is_empty() {
            let left = due.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            signal = self
                .ready
                .wait_timeout(signal, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        signal.full = false;
        let flushes = std::mem::take(&mut signal.flushes);
        drop(signal);
        Waiting {
            rings: std::mem::take(&mut *lock(&self.rings)),
            flushes,
        }
    }

    /// Hands what `rings` hold to `send` where they lie, uncopied, in batches of at most
    /// `batch` spans (each thread's in the order it ended them), then lets those spans go; the
    /// rings of write ends let go are dropped once emptied.
    pub(super) fn drain(
        &self,
        rings: &mut Vec<Consumer<Record>>,
        batch: usize,
        mut send: impl FnMut(&[&Record]),
    ) {
        // Read before the spans: a write end let go pushes nothing after.
        let ended: Vec<bool> = rings.iter().map(Consumer::is_abandoned).collect();
        let chunks: Vec<ReadChunk<'_, Record>> = rings
            .iter_mut()
            .filter_map(|ring| ring.read_chunk(ring.slots()).ok())
            .collect();
        let mut spans: Vec<&Record> = Vec::with_capacity(batch);
        for (head, tail) in chunks.iter().map(ReadChunk::as_slices) {
            for record in head.iter().chain(tail) {
                spans.push(record);
                if spans.len() == batch {
                    send(&spans);
                    spans.clear();
                }
            }
        }
        if !spans.is_empty() {
            send(&spans);
        }
        drop(spans);
        let taken: usize = chunks.iter().map(ReadChunk::len).sum();
        // Read after the chunks: a span in them was counted before it was pushed.
        if self.heap.load(Ordering::Relaxed) > 0 {
            let bytes: usize = chunks
                .iter()
                .map(ReadChunk::as_slices)
                .flat_map(|(head, tail)| head.iter().chain(tail))
                .map(Record::heap_bytes)
                .sum();
            self.heap.fetch_sub(bytes, Ordering::Relaxed);
        }
        chunks.into_iter().for_each(ReadChunk::commit_all);
        self.pending.fetch_sub(taken as isize, Ordering::Relaxed);
        let mut ended = ended.into_iter();
        rings.retain(|_| !ended.next().unwrap_or(false));
    }

    /// Returns the read ends [`Queue::take`] took, before the rings made meanwhile.
    pub(super) fn give_back(&self, rings: Vec<Consumer<Record>>) {
        let mut now = lock(&self.rings);
        let made = std::mem::replace(&mut *now, rings);
        now.extend(made);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::record::What;

    fn record() -> Record {
        let what = What::Statement {
            system: "sqlite",
            operation: Some("SELECT"),
        };
        Record::example(what, None, false)
    }

    /// How many spans each ring holds.
    fn lengths(rings: &[Consumer<Record>]) -> Vec<usize> {
        rings.iter().map(Consumer::slots).collect()
    }

    /// The sizes of the batches `rings` are drained in.
    fn drained(queue: &Queue, rings: &mut Vec<Consumer<Record>>, batch: usize) -> Vec<usize> {
        let mut batches = Vec::new();
        queue.drain(rings, batch, |b| batches.push(b.len()));
        batches
    }

    /// The exporter is woken at half the queue in whole batches, at least one batch.
    #[test]
    fn the_exporter_wakes_at_half_the_queue_in_whole_batches() {
        let cases = [
            ((2048, 512), 1024),
            ((8192, 2048), 4096),
            ((8192, 512), 4096),
            ((2048, 2048), 2048),
            ((1000, 300), 300),
            ((1000, 64), 448),
            ((1, 1), 1),
        ];
        for ((capacity, batch), wake) in cases {
            assert_eq!(
                wake_at(capacity, batch),
                wake,
                "queue {capacity}, batch {batch}"
            );
        }
    }

    /// Spans ended on several threads are all taken, the exporter woken once half the queue
    /// is counted (not after the delay), and the rings of threads that ended let go.
    #[test]
    fn spans_of_every_thread_are_taken_and_half_the_queue_wakes_the_exporter() {
        let queue = Arc::new(Queue::new(256, 64));
        let threads: Vec<_> = (0..3)
            .map(|_| {
                let q = Arc::clone(&queue);
                std::thread::spawn(move || (0..70).for_each(|_| q.push(record())))
            })
            .collect();
        threads
            .into_iter()
            .for_each(|t| t.join().expect("a thread ending spans"));
        queue.push(record());
        let started = Instant::now();
        let mut w = queue.take(Duration::from_secs(600));
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "woken by the delay"
        );
        assert_eq!(lengths(&w.rings), [70, 70, 70, 1], "each thread's ring");
        let batches = drained(&queue, &mut w.rings, 64);
        assert_eq!(batches, [64, 64, 64, 19], "every span, in batches");
        queue.give_back(w.rings);
        assert_eq!(
            queue.pending.load(Ordering::Relaxed),
            -1,
            "the threads that ended counted all theirs; this one has not counted its one yet"
        );
        assert_eq!(
            lock(&queue.rings).len(),
            1,
            "only this thread's ring is left"
        );
        let mut w = queue.take(Duration::from_millis(1));
        assert_eq!(lengths(&w.rings), [0], "the spans were let go");
        assert!(drained(&queue, &mut w.rings, 64).is_empty());
    }

    /// A batch's worth waiting, less than half the queue, does not wake the exporter: it
    /// takes the spans when the delay has passed.
    #[test]
    fn a_batch_below_half_the_queue_waits_for_the_delay() {
        let queue = Queue::new(256, 64);
        (0..96).for_each(|_| queue.push(record()));
        let delay = Duration::from_millis(50);
        let started = Instant::now();
        let mut w = queue.take(delay);
        assert!(started.elapsed() >= delay, "woken before the delay");
        assert_eq!(drained(&queue, &mut w.rings, 64), [64, 32]);
    }

    /// A thread whose ring is full moves to one twice its size, up to the capacity, without
    /// dropping a span; the ring it outgrew is drained first, then let go, also when it is
    /// outgrown while the exporter holds it.
    #[test]
    fn a_full_ring_grows_and_the_old_one_is_taken_first() {
        let queue = Queue::new(1000, 64);
        (0..300).for_each(|_| queue.push(record()));
        let mut w = queue.take(Duration::from_millis(1));
        assert_eq!(
            lengths(&w.rings),
            [FIRST_RING, 300 - FIRST_RING],
            "every span, none dropped, the outgrown ring's first"
        );
        drained(&queue, &mut w.rings, 1000);
        assert_eq!(w.rings.len(), 1, "the outgrown ring is let go");
        let size = LOCAL.with(|l| l.get().map(|l| l.ring.borrow().buffer().capacity()));
        assert_eq!(size, Some(2 * FIRST_RING));
        // Outgrown again while the exporter holds the rings: the one made meanwhile comes
        // after the ones given back.
        (0..2 * FIRST_RING + 10).for_each(|_| queue.push(record()));
        queue.give_back(w.rings);
        let w = queue.take(Duration::from_millis(1));
        assert_eq!(lengths(&w.rings), [2 * FIRST_RING, 10]);
    }

    /// Spans that hold bytes outside their records are dropped once those pass the bound,
    /// whatever room the queue has for spans; the bytes are given back as they are taken.
    #[test]
    fn the_bytes_spans_hold_are_bounded_too() {
        // Each example record holds its trace state, `team=blue`: 9 bytes.
        let held = record().heap_bytes();
        assert_eq!(held, 9);
        let queue = Queue::bounded(1000, 64, 10 * held);
        let before = super::super::record::dropped();
        (0..12).for_each(|_| queue.push(record()));
        assert_eq!(super::super::record::dropped() - before, 2);
        assert_eq!(queue.heap.load(Ordering::Relaxed), 10 * held);
        let mut w = queue.take(Duration::from_millis(1));
        assert_eq!(drained(&queue, &mut w.rings, 64), [10]);
        assert_eq!(queue.heap.load(Ordering::Relaxed), 0);
        queue.give_back(w.rings);
        (0..3).for_each(|_| queue.push(record()));
        assert_eq!(super::super::record::dropped() - before, 2, "room again");
    }

    /// One thread never queues more than the capacity; the rest is dropped and counted.
    #[test]
    fn a_full_queue_drops_and_counts() {
        let queue = Queue::new(10, 4);
        let before = super::super::record::dropped();
        (0..12).for_each(|_| queue.push(record()));
        assert_eq!(super::super::record::dropped() - before, 2);
        let w = queue.take(Duration::from_millis(1));
        assert_eq!(lengths(&w.rings).iter().sum::<usize>(), 10);
    }
}
