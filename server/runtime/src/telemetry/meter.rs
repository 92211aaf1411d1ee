//! The metrics exported over OTLP, aggregated and exported by mcpspec itself: the
//! `mcp.server.operation.duration` histogram by method, tool or prompt, transport and error
//! type, and the pool's connections (`db.client.connection.count` by state,
//! `db.client.connection.max`), read at each export. Each thread records into series of its
//! own (a shard), found in a thread-local map by a hash of the borrowed names: a request takes
//! no shared lock, touches no other core's cache line, copies no text and allocates nothing
//! once its series exists; two relaxed loads and stores (the shard's thread is its only writer),
//! which only the exporter reads. An
//! export adds up the shards; a thread that ends leaves its totals behind. A thread of
//! its own posts the cumulative totals as one `ExportMetricsServiceRequest` (OTLP/HTTP,
//! protobuf, `opentelemetry-proto`'s messages) every `OTEL_METRIC_EXPORT_INTERVAL` and when
//! the process exits; an export the collector does not take is logged and the next one
//! carries its totals.

use std::borrow::Cow;
use std::cell::RefCell;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::SyncSender;
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, InstrumentationScope, KeyValue, any_value};
use opentelemetry_proto::tonic::metrics::v1::{
    AggregationTemporality, Histogram, HistogramDataPoint, Metric, NumberDataPoint,
    ResourceMetrics, ScopeMetrics, Sum, metric::Data, number_data_point,
};
use prost::Message as _;

use super::export::{Endpoint, number};
use crate::pool_use::PoolUse;

/// The histogram's upper bounds in nanoseconds: from 100 µs (a read on the embedded engine)
/// to the semantic conventions' five minutes. Exported in seconds.
const BOUNDS_NS: [u64; 18] = [
    100_000,
    250_000,
    500_000,
    1_000_000,
    2_500_000,
    5_000_000,
    10_000_000,
    25_000_000,
    50_000_000,
    100_000_000,
    250_000_000,
    500_000_000,
    1_000_000_000,
    2_500_000_000,
    10_000_000_000,
    30_000_000_000,
    120_000_000_000,
    300_000_000_000,
];

/// One thread's shard of a series: the count in each bucket (the last above every bound) and
/// the sum, added to by its thread only.
#[derive(Default)]
struct Series {
    buckets: [AtomicU64; BOUNDS_NS.len() + 1],
    sum_ns: AtomicU64,
}

impl Series {
    /// Adds a request that took `took`. Only the shard's thread writes, so a load and a store
    /// do: no locked read-modify-write (a full fence on x86) on a request's path.
    fn add(&self, took: Duration) {
        let ns = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        let bucket = &self.buckets[BOUNDS_NS.partition_point(|&b| b < ns)];
        bucket.store(bucket.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        let sum = self.sum_ns.load(Ordering::Relaxed);
        self.sum_ns.store(sum.wrapping_add(ns), Ordering::Relaxed);
    }

    fn counts(&self) -> Counts {
        Counts {
            buckets: self.buckets.each_ref().map(|b| b.load(Ordering::Relaxed)),
            sum_ns: self.sum_ns.load(Ordering::Relaxed),
        }
    }
}

/// Totals read from shards, added up.
#[derive(Default, Clone, Copy)]
struct Counts {
    buckets: [u64; BOUNDS_NS.len() + 1],
    sum_ns: u64,
}

impl std::ops::AddAssign for Counts {
    fn add_assign(&mut self, other: Counts) {
        for (a, b) in self.buckets.iter_mut().zip(other.buckets) {
            *a += b;
        }
        self.sum_ns = self.sum_ns.wrapping_add(other.sum_ns);
    }
}

/// A series across threads: the shards of the threads recording into it, and what the
/// threads that ended left.
#[derive(Default)]
struct Totals {
    shards: Vec<Arc<Series>>,
    retired: Counts,
}

impl Totals {
    fn counts(&self) -> Counts {
        let mut all = self.retired;
        for s in &self.shards {
            all += s.counts();
        }
        all
    }
}

/// This thread's shards, by series. When the thread ends, their totals move to the series'
/// `retired` (under the lock an export reads them with, so that none is counted twice or lost).
#[derive(Default)]
struct Local(hashbrown::HashMap<Key, Arc<Series>>);

impl Drop for Local {
    fn drop(&mut self) {
        let Some(m) = METER.get() else { return };
        let mut all = m.series.lock().unwrap_or_else(|e| e.into_inner());
        for (key, shard) in self.0.drain() {
            if let Some(t) = all.get_mut(&key) {
                t.shards.retain(|s| !Arc::ptr_eq(s, &shard));
                t.retired += shard.counts();
            }
        }
    }
}

thread_local! {
    static LOCAL: RefCell<Local> = RefCell::default();
}

/// A series' attributes, owned: the method, the tool or prompt (only for `tools/call` and
/// `prompts/get`), the transport and the error type.
#[derive(Clone, PartialEq, Eq)]
struct Key {
    method: &'static str,
    target: Option<Cow<'static, str>>,
    transport: &'static str,
    error: Option<Box<str>>,
}

/// A series' attributes as a request has them, borrowed: looked up without copying.
struct Ask<'a> {
    method: &'static str,
    target: Option<&'a str>,
    transport: &'static str,
    error: Option<&'a str>,
}

impl Hash for Key {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.ask().hash(state);
    }
}

impl Hash for Ask<'_> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        (self.method, self.target, self.transport, self.error).hash(state);
    }
}

impl hashbrown::Equivalent<Key> for Ask<'_> {
    fn equivalent(&self, key: &Key) -> bool {
        let k = key.ask();
        (self.method, self.target, self.transport, self.error)
            == (k.method, k.target, k.transport, k.error)
    }
}

impl Key {
    fn ask(&self) -> Ask<'_> {
        Ask {
            method: self.method,
            target: self.target.as_deref(),
            transport: self.transport,
            error: self.error.as_deref(),
        }
    }

    /// The data point's attributes, as the request's span names them.
    fn attributes(&self) -> Vec<KeyValue> {
        let mut out = vec![
            text("mcp.method.name", self.method),
            text("network.transport", self.transport),
        ];
        if let (Some(key), Some(t)) = (super::record::target_key(self.method), &self.target) {
            out.push(text(key, t));
        }
        if let Some(e) = &self.error {
            out.push(text("error.type", e));
        }
        out
    }
}

fn text(key: &str, value: &str) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue {
            value: Some(any_value::Value::StringValue(value.into())),
        }),
    }
}

/// The process's meter: its series, what it reads the pool with, and the exporter's wake-ups.
struct Meter {
    series: Mutex<hashbrown::HashMap<Key, Totals>>,
    pool: Box<dyn Fn() -> Option<PoolUse> + Send + Sync>,
    /// When the totals started, Unix nanoseconds (every series is cumulative from here).
    start: u64,
    /// Flushes asked for, each acknowledged once its export was posted.
    flushes: Mutex<Vec<SyncSender<()>>>,
    wake: Condvar,
    /// How long a flush waits: the export timeout and a second.
    flush_wait: Duration,
}

static METER: OnceLock<Meter> = OnceLock::new();

fn unix_nanos(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// Records one request that took `took`, when metrics are on. `target` counts only for
/// `tools/call` and `prompts/get` (the spec's names), so that the series stay bounded.
pub(super) fn record(
    method: &'static str,
    target: Option<&str>,
    transport: &'static str,
    error: Option<&str>,
    took: Duration,
) {
    let Some(m) = METER.get() else { return };
    let ask = Ask {
        method,
        target: target.filter(|_| super::record::target_key(method).is_some()),
        transport,
        error,
    };
    // After the thread's locals are gone (a destructor's request), it is not recorded.
    let _ = LOCAL.try_with(|local| {
        let mut local = local.borrow_mut();
        if let Some(s) = local.0.get(&ask) {
            s.add(took);
            return;
        }
        let key = Key {
            method,
            target: ask.target.map(|t| Cow::Owned(t.to_string())),
            transport,
            error: error.map(Box::from),
        };
        let shard = Arc::new(Series::default());
        shard.add(took);
        let mut all = m.series.lock().unwrap_or_else(|e| e.into_inner());
        all.entry(key.clone())
            .or_default()
            .shards
            .push(shard.clone());
        drop(all);
        local.0.insert(key, shard);
    });
}

/// Starts the meter and its exporter's thread, posting under `resource` where the standard
/// variables say; `pool` reads the database pool's connections at each export.
pub(super) fn install(
    resource: &opentelemetry_sdk::Resource,
    pool: Box<dyn Fn() -> Option<PoolUse> + Send + Sync>,
) -> Result<(), String> {
    let endpoint = Endpoint::from_env("METRICS")?;
    let client = endpoint.client();
    let interval = Duration::from_millis(number("OTEL_METRIC_EXPORT_INTERVAL", 60_000).max(1));
    let flush_wait = endpoint.flush_wait();
    let prefix = super::wire::resource_and_scope(resource);
    let _ = METER.set(Meter {
        series: Mutex::default(),
        pool,
        start: unix_nanos(SystemTime::now()),
        flushes: Mutex::default(),
        wake: Condvar::new(),
        flush_wait,
    });
    std::thread::Builder::new()
        .name("mcpspec-metrics".into())
        .spawn(move || run(&endpoint, &client, interval, &prefix))
        .map_err(|e| format!("the metric exporter's thread: {e}"))?;
    Ok(())
}

type Prefix = (
    opentelemetry_proto::tonic::resource::v1::Resource,
    InstrumentationScope,
);

/// The exporter's loop: an export each interval or when a flush asks, then the flushes
/// acknowledged.
fn run(endpoint: &Endpoint, client: &ureq::Agent, every: Duration, prefix: &Prefix) {
    let Some(m) = METER.get() else { return };
    let mut failed = 0u64;
    loop {
        let flushes = {
            let asked = m.flushes.lock().unwrap_or_else(|e| e.into_inner());
            let (mut asked, _) = m
                .wake
                .wait_timeout_while(asked, every, |a| a.is_empty())
                .unwrap_or_else(|e| e.into_inner());
            std::mem::take(&mut *asked)
        };
        let body = m
            .export(prefix, unix_nanos(SystemTime::now()))
            .encode_to_vec();
        if let Err(why) = endpoint.post(client, &body) {
            failed += 1;
            // Once, then at each power of two: a collector that stays down does not flood.
            if failed.is_power_of_two() {
                tracing::warn!(failed, "an export of metrics: {why}");
            }
        }
        for ack in flushes {
            let _ = ack.send(());
        }
    }
}

/// Posts the totals now and waits for it: at most the export timeout and a second, and at
/// most `within`.
pub(super) fn flush(within: std::time::Duration) {
    let Some(m) = METER.get() else { return };
    let (ack, done) = std::sync::mpsc::sync_channel(1);
    m.flushes
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(ack);
    m.wake.notify_one();
    let _ = done.recv_timeout(m.flush_wait.min(within));
}

impl Meter {
    /// Every series' totals and the pool's connections as of `now`, as one export.
    fn export(&self, prefix: &Prefix, now: u64) -> ExportMetricsServiceRequest {
        let mut metrics = vec![self.durations(now)];
        if let Some(p) = (self.pool)() {
            metrics.extend(self.pool_metrics(p, now));
        }
        ExportMetricsServiceRequest {
            resource_metrics: vec![ResourceMetrics {
                resource: Some(prefix.0.clone()),
                scope_metrics: vec![ScopeMetrics {
                    scope: Some(prefix.1.clone()),
                    metrics,
                    schema_url: String::new(),
                }],
                schema_url: String::new(),
            }],
        }
    }

    fn durations(&self, now: u64) -> Metric {
        let all = self.series.lock().unwrap_or_else(|e| e.into_inner());
        let mut rows: Vec<(&Key, Counts)> = all.iter().map(|(k, t)| (k, t.counts())).collect();
        rows.sort_by_key(|(k, _)| {
            let a = k.ask();
            (a.method, a.target, a.transport, a.error)
        });
        let points = rows
            .into_iter()
            .map(|(key, c)| HistogramDataPoint {
                attributes: key.attributes(),
                start_time_unix_nano: self.start,
                time_unix_nano: now,
                count: c.buckets.iter().sum(),
                sum: Some(c.sum_ns as f64 / 1e9),
                bucket_counts: c.buckets.to_vec(),
                explicit_bounds: BOUNDS_NS.iter().map(|&b| b as f64 / 1e9).collect(),
                ..Default::default()
            })
            .collect();
        drop(all);
        Metric {
            name: "mcp.server.operation.duration".into(),
            description: "MCP requests as the server saw them, by method, tool and error type"
                .into(),
            unit: "s".into(),
            data: Some(Data::Histogram(Histogram {
                data_points: points,
                aggregation_temporality: AggregationTemporality::Cumulative as i32,
            })),
            ..Default::default()
        }
    }

    /// The pool's connections by state and its maximum, as non-monotonic sums (what an
    /// up-down counter exports).
    fn pool_metrics(&self, p: PoolUse, now: u64) -> [Metric; 2] {
        let point = |n: u32, attributes: Vec<KeyValue>| NumberDataPoint {
            attributes,
            start_time_unix_nano: self.start,
            time_unix_nano: now,
            value: Some(number_data_point::Value::AsInt(i64::from(n))),
            ..Default::default()
        };
        let sum = |name: &str, description: &str, data_points| Metric {
            name: name.into(),
            description: description.into(),
            data: Some(Data::Sum(Sum {
                data_points,
                aggregation_temporality: AggregationTemporality::Cumulative as i32,
                is_monotonic: false,
            })),
            ..Default::default()
        };
        let state = |s: &str| vec![text("db.client.connection.state", s)];
        let idle = p.open.saturating_sub(p.in_use);
        [
            sum(
                "db.client.connection.count",
                "The database pool's connections, by state (used or idle)",
                vec![point(p.in_use, state("used")), point(idle, state("idle"))],
            ),
            sum(
                "db.client.connection.max",
                "The most connections the database pool opens",
                vec![point(p.max, Vec::new())],
            ),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A series found by borrowed names is the one its owned key hashes to, and each
    /// duration lands in the first bucket whose bound it does not exceed.
    #[test]
    fn a_series_is_found_by_borrowed_names_and_buckets_by_bound() {
        let mut all: hashbrown::HashMap<Key, Series> = hashbrown::HashMap::new();
        let key = Key {
            method: "tools/call",
            target: Some(Cow::Owned("kb_get".into())),
            transport: "pipe",
            error: Some("tool_error".into()),
        };
        all.insert(key, Series::default());
        let ask = Ask {
            method: "tools/call",
            target: Some("kb_get"),
            transport: "pipe",
            error: Some("tool_error"),
        };
        let s = all.get(&ask).expect("found by borrowed names");
        assert!(
            all.get(&Ask { error: None, ..ask }).is_none(),
            "another error type is another series"
        );
        for ns in [0, 100_000, 100_001, 300_000_000_000, 300_000_000_001] {
            s.add(Duration::from_nanos(ns));
        }
        let counts: Vec<u64> = s
            .buckets
            .iter()
            .map(|b| b.load(Ordering::Relaxed))
            .collect();
        assert_eq!(counts[0], 2, "{counts:?}");
        assert_eq!(counts[1], 1, "{counts:?}");
        assert_eq!(counts[BOUNDS_NS.len() - 1], 1, "{counts:?}");
        assert_eq!(counts[BOUNDS_NS.len()], 1, "{counts:?}");
        assert_eq!(counts.iter().sum::<u64>(), 5);
        assert_eq!(
            s.sum_ns.load(Ordering::Relaxed),
            100_000 + 100_001 + 300_000_000_000 + 300_000_000_001
        );
        assert_eq!(BOUNDS_NS[0] as f64 / 1e9, 0.0001);
    }

    /// Threads record into shards of their own; an export adds them up, and a thread that
    /// ended leaves its totals (its shard gone) without counting them twice.
    #[test]
    fn an_export_adds_up_the_threads_and_keeps_what_ended_threads_left() {
        let m = METER.get_or_init(|| Meter {
            series: Mutex::default(),
            pool: Box::new(|| None),
            start: 1,
            flushes: Mutex::default(),
            wake: Condvar::new(),
            flush_wait: Duration::from_secs(1),
        });
        let call = || {
            record(
                "tools/call",
                Some("kb_get"),
                "tcp",
                None,
                Duration::from_micros(300),
            )
        };
        let ended: Vec<_> = (0..2)
            .map(|_| std::thread::spawn(move || (0..3).for_each(|_| call())))
            .collect();
        ended
            .into_iter()
            .for_each(|t| t.join().expect("a recording thread"));
        call();
        call();
        // A resource's URI is not a series of its own.
        record(
            "resources/read",
            Some("kb://1"),
            "tcp",
            None,
            Duration::from_micros(1),
        );
        let prefix =
            super::super::wire::resource_and_scope(&opentelemetry_sdk::Resource::builder().build());
        let export = m.export(&prefix, 2);
        let metric = &export.resource_metrics[0].scope_metrics[0].metrics[0];
        let Some(Data::Histogram(h)) = &metric.data else {
            panic!("{metric:?}")
        };
        let counts: Vec<(usize, u64)> = h
            .data_points
            .iter()
            .map(|p| (p.attributes.len(), p.count))
            .collect();
        // resources/read: method and transport; tools/call: and the tool.
        assert_eq!(counts, [(2, 1), (3, 8)], "{h:?}");
        assert_eq!(
            h.data_points[1].bucket_counts[2], 8,
            "300 µs is under the 500 µs bound"
        );
        let all = m.series.lock().unwrap();
        let shards: Vec<usize> = all.values().map(|t| t.shards.len()).collect();
        assert_eq!(shards, [1, 1], "the ended threads' shards are gone");
    }
}
