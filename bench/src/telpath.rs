//! `mcpbench telemetry-path`: what the telemetry's request path costs in-process, with the
//! OpenTelemetry set-up the environment asks for (as a server reads it): each request starts
//! its span (or is dropped by the sampler), carries its context to the thread that runs it,
//! and ends with its duration recorded. Timed on one thread and on two at once (each
//! thread with its own ring of the span queue and of the histogram), then the process's CPU per
//! request once the exporters have sent what they batched (their threads included; give
//! `OTEL_BSP_MAX_QUEUE_SIZE` room for every span, as `bench/telemetry` does, or what the queue
//! cannot hold is dropped and the figure leaves their export out). No server, no socket: the figure `bench/telemetry` cannot
//! resolve within its rounds' spread.

use std::borrow::Cow;
use std::time::Instant;

use anyhow::{Result, anyhow};
use mcpspec::__internal::{Parent, Request, RequestInfo};
use serde_json::{Value, json};

/// `calls` requests of `tools/call get_learning`, as the lane serves them.
fn requests(calls: u64) {
    for i in 0..calls {
        let id = i.to_string();
        let info = RequestInfo {
            method: "tools/call",
            target: Some(Cow::Borrowed("get_learning")),
            id: Some(&id),
            session: None,
            transport: "tcp",
        };
        let request = Request::start(&info, Parent::default());
        let attached = request.carry().attach();
        drop(attached);
        request.finish(&info, None);
    }
}

/// Nanoseconds per request on `threads` threads at once, each making `calls` requests.
fn timed(threads: usize, calls: u64) -> f64 {
    let started = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| requests(calls));
        }
    });
    started.elapsed().as_nanos() as f64 / calls as f64
}

/// Runs the measurement and returns it as JSON.
pub fn run(calls: u64) -> Result<Value> {
    let installed = mcpspec::__internal::install("mcpbench", || None).map_err(|e| anyhow!(e))?;
    requests(calls / 10);
    let cpu =
        || crate::client::proc_cpu_ms(std::process::id()).ok_or_else(|| anyhow!("/proc/self/stat"));
    let cpu_before = cpu()?;
    let one = timed(1, calls);
    let two = timed(2, calls);
    // Shutting the exporters down sends what they hold, on their threads.
    drop(installed);
    let cpu_ns = (cpu()? - cpu_before) * 1e6 / (3 * calls) as f64;
    Ok(json!({
        "calls": calls,
        "on": mcpspec::__internal::telemetry_on(),
        "ns_per_request_1_thread": one,
        "ns_per_request_2_threads": two,
        "process_cpu_ns_per_request": cpu_ns,
    }))
}
