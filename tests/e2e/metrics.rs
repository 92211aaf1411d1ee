//! `serve --http --metrics`: the tool calls counted by tool and outcome and timed, served at
//! `/metrics` and scraped by a real Prometheus (Debian's `prometheus`, which `.ci/run`
//! installs) that the test starts on a free port with a configuration of its own and stops
//! afterwards. Without `--metrics` there is no `/metrics` and nothing is counted.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::sample_db;
use crate::http::HttpServer;

/// The Prometheus server on the PATH (Debian's is /usr/bin/prometheus), or how to get it.
fn prometheus_bin() -> PathBuf {
    mcpspec_testkit::full_tier!("Prometheus");
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join("prometheus"))
        .find(|bin| bin.is_file())
        .unwrap_or_else(|| {
            panic!(
                "these tests scrape /metrics with a real Prometheus: install it (Debian and Ubuntu: apt-get install prometheus, as .ci/run does; macOS: brew install prometheus)"
            )
        })
}

/// A Prometheus that scrapes `target` every second, stopped when dropped.
struct Prometheus {
    child: Child,
    addr: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    fn scraping(target: SocketAddr) -> Prometheus {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = dir.path().join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: mcpspec\n    metrics_path: /metrics\n    static_configs:\n      - targets: ['{target}']\n"
            ),
        )
        .expect("config");
        // A free port for its web API: bound, read, released.
        let addr = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port");
        let child = Command::new(prometheus_bin())
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start prometheus");
        Prometheus {
            child,
            addr,
            _dir: dir,
        }
    }

    /// The value of the instant query `query` once Prometheus has a sample for it, waiting at
    /// most `within`.
    fn value(&self, query: &str, within: Duration) -> String {
        let encoded: String = query
            .bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'_' => (b as char).to_string(),
                _ => format!("%{b:02X}"),
            })
            .collect();
        let deadline = Instant::now() + within;
        loop {
            if let Ok(r) =
                mcpspec_testkit::get(self.addr, &format!("/api/v1/query?query={encoded}"))
                && r.status == 200
            {
                let v: Value = serde_json::from_slice(&r.body).expect("JSON");
                if let Some(value) = v["data"]["result"][0]["value"][1].as_str() {
                    return value.to_string();
                }
            }
            assert!(
                Instant::now() < deadline,
                "Prometheus has no sample of {query} after {within:?}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[cfg(feature = "full")]
#[test]
fn prometheus_scrapes_calls_by_tool_and_outcome_and_their_durations() {
    let db = sample_db("knowledge");
    let path = db.path.display().to_string();
    let server = HttpServer::serve(&["knowledge", "--db", &path, "--metrics"], &[]);
    let mut client = mcpspec_testkit::HttpClient::new(server.addr, None);
    client.initialize().expect("initialize");
    for _ in 0..3 {
        let r = client.call_tool("kb_list", json!({})).expect("kb_list");
        assert_eq!(r["result"]["isError"], false, "{r}");
    }
    let missing = client
        .call_tool(
            "kb_get",
            json!({"id": "00000000-0000-4000-8000-000000000000"}),
        )
        .expect("kb_get");
    assert_eq!(missing["result"]["isError"], true, "{missing}");

    let text = mcpspec_testkit::get(server.addr, "/metrics")
        .expect("GET /metrics")
        .text();
    assert!(
        text.contains(
            "mcpspec_tool_calls_total{server=\"knowledge\",tool=\"kb_list\",outcome=\"ok\"} 3"
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "mcpspec_tool_calls_total{server=\"knowledge\",tool=\"kb_get\",outcome=\"NOT_FOUND\"} 1"
        ),
        "{text}"
    );
    assert!(
        !text.contains("00000000-0000"),
        "arguments never become labels: {text}"
    );
    // The pool as it is at the scrape: SQLite's four readers at most, none busy now.
    assert!(
        text.contains("mcpspec_pool_max_connections{server=\"knowledge\"} 4"),
        "{text}"
    );
    assert!(
        text.contains("mcpspec_pool_connections{server=\"knowledge\",state=\"in_use\"} 0"),
        "{text}"
    );

    let prometheus = Prometheus::scraping(server.addr);
    let within = Duration::from_secs(30);
    assert_eq!(prometheus.value("up{job=\"mcpspec\"}", within), "1");
    assert_eq!(
        prometheus.value(
            "mcpspec_tool_calls_total{tool=\"kb_list\",outcome=\"ok\"}",
            within
        ),
        "3"
    );
    assert_eq!(
        prometheus.value(
            "mcpspec_tool_call_duration_seconds_count{tool=\"kb_list\"}",
            within
        ),
        "3"
    );
    assert_eq!(
        prometheus.value(
            "mcpspec_tool_calls_total{tool=\"kb_get\",outcome=\"NOT_FOUND\"}",
            within
        ),
        "1"
    );
    assert_eq!(
        prometheus.value("mcpspec_pool_max_connections", within),
        "4"
    );
}

#[test]
fn without_the_flag_there_is_no_metrics_endpoint() {
    let db = sample_db("knowledge");
    let path = db.path.display().to_string();
    let server = HttpServer::serve(&["knowledge", "--db", &path], &[]);
    let r = mcpspec_testkit::get(server.addr, "/metrics").expect("GET /metrics");
    assert_eq!(r.status, 404, "{}", r.text());
}
