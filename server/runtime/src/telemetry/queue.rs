//! The bounded queue between the threads that end spans and the exporter's thread, sharded by
//! thread: each thread appends to a vector of its own under a lock that only the exporter's
//! sweep ever contends, so that two threads ending spans at once never share a lock or a cache
//! line. The spans waiting are counted in a shared counter a chunk at a time; the exporter is
//! woken when a batch's worth is waiting or a flush is asked for, never per span. A span that
//! would take the queue past its capacity is dropped and counted.

use std::cell::OnceCell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::SyncSender;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::spans::{Record, drop_spans};

/// How many spans a thread adds to the shared count at once (at most a batch).
const CHUNK: usize = 32;

/// The spans waiting for the exporter (each shard's vector as it was), and the flushes asked
/// for.
#[derive(Default)]
pub(super) struct Waiting {
    pub(super) spans: Vec<Vec<Record>>,
    pub(super) flushes: Vec<SyncSender<()>>,
}

/// One thread's spans, and how many of them the shared count holds.
#[derive(Default)]
struct Shard {
    spans: Vec<Record>,
    counted: usize,
}

/// What wakes the exporter: a batch's worth waiting, or flushes.
#[derive(Default)]
struct Signal {
    full: bool,
    flushes: Vec<SyncSender<()>>,
}

pub(super) struct Queue {
    /// Every thread's shard; a thread that ended leaves its shard until a sweep empties it.
    shards: Mutex<Vec<Arc<Mutex<Shard>>>>,
    /// The spans the shards hold, counted a chunk at a time.
    pending: AtomicUsize,
    signal: Mutex<Signal>,
    ready: Condvar,
    capacity: usize,
    batch: usize,
    chunk: usize,
}

thread_local! {
    static SHARD: OnceCell<Arc<Mutex<Shard>>> = const { OnceCell::new() };
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Queue {
    /// A queue holding at most `capacity` spans, waking the exporter every `batch`.
    pub(super) fn new(capacity: usize, batch: usize) -> Queue {
        Queue {
            shards: Mutex::default(),
            pending: AtomicUsize::new(0),
            signal: Mutex::default(),
            ready: Condvar::new(),
            capacity,
            batch,
            chunk: CHUNK.min(batch),
        }
    }

    /// Queues `record` in this thread's shard, or drops and counts it when the queue is full
    /// (or the thread is ending and has no shard any more).
    pub(super) fn push(&self, record: Record) {
        let queued = SHARD.try_with(|cell| {
            let shard = cell.get_or_init(|| {
                let shard = Arc::default();
                lock(&self.shards).push(Arc::clone(&shard));
                shard
            });
            let mut s = lock(shard);
            let uncounted = s.spans.len() - s.counted;
            if self.pending.load(Ordering::Relaxed) + uncounted >= self.capacity {
                return false;
            }
            s.spans.push(record);
            if uncounted + 1 >= self.chunk {
                let before = self.pending.fetch_add(uncounted + 1, Ordering::Relaxed);
                s.counted = s.spans.len();
                drop(s);
                if before < self.batch && before + uncounted + 1 >= self.batch {
                    lock(&self.signal).full = true;
                    self.ready.notify_one();
                }
            }
            true
        });
        if queued != Ok(true) {
            drop_spans(1, "the export queue is full");
        }
    }

    /// Asks the exporter to send what is waiting, `ack` told when it has.
    pub(super) fn flush(&self, ack: SyncSender<()>) {
        lock(&self.signal).flushes.push(ack);
        self.ready.notify_one();
    }

    /// Waits until a batch's worth is waiting, a flush is asked for or `delay` has passed, and
    /// takes what every shard holds, giving each an empty vector from `spares` in place of
    /// its own: no span is copied, and a shard keeps the room it grew.
    pub(super) fn take(&self, delay: Duration, spares: &mut Vec<Vec<Record>>) -> Waiting {
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
            spans: self.sweep(spares),
            flushes,
        }
    }

    /// Every shard's spans; the shards of threads that ended are let go once emptied.
    fn sweep(&self, spares: &mut Vec<Vec<Record>>) -> Vec<Vec<Record>> {
        let mut out = Vec::new();
        lock(&self.shards).retain(|shard| {
            let mut s = lock(shard);
            self.pending.fetch_sub(s.counted, Ordering::Relaxed);
            s.counted = 0;
            if !s.spans.is_empty() {
                let spare = spares.pop().unwrap_or_default();
                out.push(std::mem::replace(&mut s.spans, spare));
            }
            drop(s);
            // Only this list holds the shard of a thread that ended.
            Arc::strong_count(shard) > 1
        });
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::spans::What;

    fn record() -> Record {
        let what = What::Statement {
            system: "sqlite",
            operation: Some("SELECT"),
        };
        Record::example(what, None, false)
    }

    /// Spans ended on several threads are all taken, the exporter woken once a batch's worth
    /// is counted (not after the delay), and the shards of threads that ended let go.
    #[test]
    fn spans_of_every_thread_are_taken_and_a_full_batch_wakes_the_exporter() {
        let queue = Arc::new(Queue::new(1000, 64));
        let threads: Vec<_> = (0..3)
            .map(|_| {
                let q = Arc::clone(&queue);
                std::thread::spawn(move || (0..40).for_each(|_| q.push(record())))
            })
            .collect();
        threads
            .into_iter()
            .for_each(|t| t.join().expect("a thread ending spans"));
        queue.push(record());
        let started = Instant::now();
        let mut spares = vec![Vec::new()];
        let w = queue.take(Duration::from_secs(600), &mut spares);
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "woken by the delay"
        );
        let lengths: Vec<usize> = w.spans.iter().map(Vec::len).collect();
        assert_eq!(lengths, [40, 40, 40, 1], "each shard's spans, uncopied");
        assert!(spares.is_empty(), "the spare went to a shard");
        assert_eq!(queue.pending.load(Ordering::Relaxed), 0);
        assert_eq!(
            lock(&queue.shards).len(),
            1,
            "only this thread's shard is left"
        );
        assert!(
            queue
                .take(Duration::from_millis(1), &mut spares)
                .spans
                .is_empty()
        );
    }

    /// One thread never queues more than the capacity; the rest is dropped and counted.
    #[test]
    fn a_full_queue_drops_and_counts() {
        let queue = Queue::new(10, 4);
        let before = super::super::spans::dropped();
        (0..12).for_each(|_| queue.push(record()));
        assert_eq!(super::super::spans::dropped() - before, 2);
        let w = queue.take(Duration::from_millis(1), &mut Vec::new());
        assert_eq!(w.spans.iter().map(Vec::len).sum::<usize>(), 10);
    }
}
