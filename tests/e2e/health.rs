//! `/healthz` and `/readyz` on the Streamable HTTP transport, probed as a load balancer
//! probes: without a token, on a connection of their own. Readiness follows the database (a
//! PostgreSQL cluster of the test's own, stopped and started again) and fails first on
//! SIGTERM, while requests are still answered for the grace period.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use mcpspec_testkit::HttpResponse;
use serde_json::{Value, json};

use crate::common::{mcpspec, sample_db, signal};
use crate::http::HttpServer;
use crate::pg::Cluster;

/// `GET path`, answered.
fn probe(addr: SocketAddr, path: &str) -> HttpResponse {
    mcpspec_testkit::get(addr, path).unwrap_or_else(|e| panic!("GET {path}: {e}"))
}

fn body(r: &HttpResponse) -> Value {
    serde_json::from_slice(&r.body).expect("a JSON body")
}

/// Probes `path` until it answers `status`, for at most `within`; that answer.
fn probe_until(addr: SocketAddr, path: &str, status: u16, within: Duration) -> HttpResponse {
    let deadline = Instant::now() + within;
    loop {
        let r = probe(addr, path);
        if r.status == status {
            return r;
        }
        assert!(
            Instant::now() < deadline,
            "{path} still answers {} after {within:?}: {}",
            r.status,
            r.text()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[cfg(feature = "full")]
#[test]
fn probes_need_no_token_and_readiness_follows_the_database() {
    // A cluster of this test's own: it is stopped and started again.
    let cluster = Cluster::start();
    let url = cluster.create_database();
    let (code, _, err) = mcpspec(&["init", "knowledge", "--db", &url], &[]);
    assert_eq!(code, 0, "{err}");
    let server = HttpServer::serve(
        &["knowledge", "--db", &url, "--metrics"],
        &[("MCPSPEC_HTTP_TOKEN", "s3cret-token")],
    );
    let addr = server.addr;
    let health = probe(addr, "/healthz");
    assert_eq!(
        (health.status, body(&health)),
        (200, json!({"status": "ok"}))
    );
    let ready = probe(addr, "/readyz");
    assert_eq!((ready.status, body(&ready)), (200, json!({"status": "ok"})));
    assert_eq!(
        ready.header("cache-control"),
        Some("no-store"),
        "a probe's answer is never cached"
    );
    // The MCP endpoint itself still wants the token, and so do the metrics, which show the
    // PostgreSQL pool.
    assert_eq!(probe(addr, "/mcp").status, 401);
    assert_eq!(probe(addr, "/metrics").status, 401);
    let metrics = mcpspec_testkit::get_with_token(addr, "/metrics", Some("s3cret-token"))
        .expect("GET /metrics")
        .text();
    assert!(
        metrics.contains("mcpspec_pool_connections{server=\"knowledge\",state=\"in_use\"} 0")
            && metrics.contains("mcpspec_pool_max_connections{server=\"knowledge\"} "),
        "{metrics}"
    );

    cluster.stop();
    let down = probe_until(addr, "/readyz", 503, Duration::from_secs(10));
    assert_eq!(
        body(&down),
        json!({"status": "unavailable", "reason": "the database does not answer"}),
        "a fixed reason, never the URL or the driver's words"
    );
    assert_eq!(
        probe(addr, "/healthz").status,
        200,
        "the process still serves"
    );

    cluster.restart();
    probe_until(addr, "/readyz", 200, Duration::from_secs(20));
}

#[test]
fn on_sigterm_readiness_fails_first_while_requests_are_answered_then_it_exits() {
    let db = sample_db("knowledge");
    let path = db.path.display().to_string();
    let server = HttpServer::serve(
        &["knowledge", "--db", &path],
        &[("MCPSPEC_READY_GRACE_MS", "3000")],
    );
    let addr = server.addr;
    assert_eq!(probe(addr, "/readyz").status, 200);
    let mut client = mcpspec_testkit::HttpClient::new(addr, None);
    client.initialize().expect("initialize");

    signal(server.child.id(), "-TERM");
    let draining = probe_until(addr, "/readyz", 503, Duration::from_secs(2));
    assert_eq!(
        body(&draining),
        json!({"status": "unavailable", "reason": "the server is shutting down"})
    );
    assert_eq!(probe(addr, "/healthz").status, 200);
    // Still answering while load balancers take it out of rotation.
    let listed = client
        .call_tool("kb_list", json!({}))
        .expect("a call during the grace period");
    assert_eq!(listed["result"]["isError"], false, "{listed}");
    let status = server.wait();
    assert!(status.success(), "{status:?}");
}
