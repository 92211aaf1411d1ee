//! OpenTelemetry export, received by a real OTLP/HTTP receiver that the test starts on a
//! loopback port and that decodes what arrives with OpenTelemetry's own protobuf definitions
//! (`opentelemetry-proto`): a request's span with the client's trace context as its parent
//! (from `_meta` over stdio, from the `traceparent` header over HTTP), its statements' spans
//! as its children, the MCP attributes and no argument, the duration histogram, and a
//! collector that is down or never answers costing no call, its spans dropped and counted;
//! an https collector checked against the system's roots.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mcpspec_testkit::StdioClient;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{KeyValue, any_value};
use opentelemetry_proto::tonic::metrics::v1::Metric;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use serde_json::{Value, json};

use crate::common::rss_kib;
use crate::common::{EXE, Engine, sample_db, sample_db_on};
use crate::http::HttpServer;

/// A data point's attributes, as text.
type Point = Vec<(String, String)>;

/// What the receiver was sent.
#[derive(Default)]
struct Got {
    /// Each span with its resource's `service.name`.
    spans: Vec<(String, Span)>,
    /// The metrics of every export, in order.
    metrics: Vec<Metric>,
    /// The headers of every export request, lower-cased names.
    headers: Vec<Vec<(String, String)>>,
}

/// An OTLP/HTTP receiver (protobuf) on 127.0.0.1, answering 200 to `/v1/traces` and
/// `/v1/metrics`, over TLS when started with a certificate; stopped when dropped.
struct Receiver {
    addr: SocketAddr,
    tls: bool,
    got: Arc<Mutex<Got>>,
    stop: Arc<AtomicBool>,
}

impl Receiver {
    fn start() -> Receiver {
        Receiver::listen(None)
    }

    /// A receiver that accepts only TLS, with `config`'s certificate.
    fn start_tls(config: Arc<rustls::ServerConfig>) -> Receiver {
        Receiver::listen(Some(config))
    }

    fn listen(tls: Option<Arc<rustls::ServerConfig>>) -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let got = Arc::new(Mutex::new(Got::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let (g, s, secure) = (got.clone(), stop.clone(), tls.is_some());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if s.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(conn) = conn else { continue };
                let (g, tls) = (g.clone(), tls.clone());
                std::thread::spawn(move || match tls {
                    None => serve(conn, &g),
                    Some(config) => {
                        let session = rustls::ServerConnection::new(config).expect("a TLS session");
                        serve(rustls::StreamOwned::new(session, conn), &g)
                    }
                });
            }
        });
        Receiver {
            addr,
            tls: secure,
            got,
            stop,
        }
    }

    fn endpoint(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}", self.addr)
    }

    /// Waits (up to 30 s, polling) until `found` finds something in what arrived.
    fn until<T>(&self, what: &str, found: impl Fn(&Got) -> Option<T>) -> T {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(t) = found(&self.got.lock().unwrap()) {
                return t;
            }
            assert!(Instant::now() < deadline, "never received {what}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(self.addr);
    }
}

/// Answers the export requests of one connection (kept alive) until it closes.
fn serve(conn: impl Read + Write, got: &Mutex<Got>) {
    let mut reader = BufReader::new(conn);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let path = line
            .split_whitespace()
            .nth(1)
            .unwrap_or_default()
            .to_string();
        let mut headers = Vec::new();
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
            }
        }
        let length: usize = headers
            .iter()
            .find(|(k, _)| k == "content-length")
            .and_then(|(_, v)| v.parse().ok())
            .expect("the exporter sends a content-length");
        let mut body = vec![0; length];
        reader.read_exact(&mut body).expect("body");
        if headers
            .iter()
            .any(|(k, v)| k == "content-encoding" && v == "gzip")
        {
            let mut plain = Vec::new();
            flate2::read::GzDecoder::new(&body[..])
                .read_to_end(&mut plain)
                .expect("a gzipped export");
            body = plain;
        }
        record(&path, &body, headers, got);
        let ok =
            "HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n";
        let conn = reader.get_mut();
        if conn
            .write_all(ok.as_bytes())
            .and_then(|()| conn.flush())
            .is_err()
        {
            return;
        }
    }
}

/// Decodes one export request with the official messages.
fn record(path: &str, body: &[u8], headers: Vec<(String, String)>, got: &Mutex<Got>) {
    let mut got = got.lock().unwrap();
    got.headers.push(headers);
    match path {
        "/v1/traces" => {
            let request = ExportTraceServiceRequest::decode(body).expect("an OTLP trace export");
            for rs in request.resource_spans {
                let service = rs
                    .resource
                    .as_ref()
                    .and_then(|r| attr(&r.attributes, "service.name"))
                    .unwrap_or_default();
                for ss in rs.scope_spans {
                    for span in ss.spans {
                        got.spans.push((service.clone(), span));
                    }
                }
            }
        }
        "/v1/metrics" => {
            let request =
                ExportMetricsServiceRequest::decode(body).expect("an OTLP metrics export");
            for rm in request.resource_metrics {
                for sm in rm.scope_metrics {
                    got.metrics.extend(sm.metrics);
                }
            }
        }
        other => panic!("an export to an unknown path: {other}"),
    }
}

/// Each data point's attributes of a metric, as text.
fn points(m: &Metric) -> Vec<Point> {
    use opentelemetry_proto::tonic::metrics::v1::metric::Data;
    let attrs = |a: &[KeyValue]| {
        a.iter()
            .map(|kv| (kv.key.clone(), attr(a, &kv.key).unwrap_or_default()))
            .collect()
    };
    match &m.data {
        Some(Data::Histogram(h)) => h.data_points.iter().map(|p| attrs(&p.attributes)).collect(),
        Some(Data::Sum(s)) => s.data_points.iter().map(|p| attrs(&p.attributes)).collect(),
        Some(Data::Gauge(g)) => g.data_points.iter().map(|p| attrs(&p.attributes)).collect(),
        _ => Vec::new(),
    }
}

/// An attribute's value as text.
fn attr(attributes: &[KeyValue], key: &str) -> Option<String> {
    let value = attributes.iter().find(|kv| kv.key == key)?.value.as_ref()?;
    match value.value.as_ref()? {
        any_value::Value::StringValue(s) => Some(s.clone()),
        any_value::Value::IntValue(n) => Some(n.to_string()),
        any_value::Value::BoolValue(b) => Some(b.to_string()),
        any_value::Value::DoubleValue(d) => Some(d.to_string()),
        _ => None,
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT: &str = "00f067aa0ba902b7";

/// The environment that points the server at `receiver`, exporting at once.
fn otel_env(endpoint: &str) -> Vec<(&'static str, String)> {
    vec![
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.to_string()),
        ("OTEL_EXPORTER_OTLP_HEADERS", "x-team=blue".to_string()),
        ("OTEL_BSP_SCHEDULE_DELAY", "50".to_string()),
        ("OTEL_METRIC_EXPORT_INTERVAL", "200".to_string()),
    ]
}

/// knowledge over stdio on `db`, exporting to `receiver` with `env` besides, initialised.
fn stdio_server(receiver: &Receiver, db: &std::path::Path, env: &[(&str, &str)]) -> StdioClient {
    let mut command = Command::new(EXE);
    command
        .args(["serve", "knowledge", "--db"])
        .arg(db)
        .env_remove("OTEL_SERVICE_NAME")
        .env("MCPSPEC_STARTUP_JOBS", "off")
        .stderr(Stdio::null());
    for (k, v) in otel_env(&receiver.endpoint()) {
        command.env(k, v);
    }
    command.envs(env.iter().copied());
    let mut c = StdioClient::spawn(&mut command).expect("spawn");
    c.initialize().expect("initialize");
    c
}

/// Calls `kb_search` for an argument no span may name, with `meta` as the request's `_meta`,
/// and checks that it succeeded.
fn search_with_meta(c: &mut StdioClient, meta: Value) {
    let r = c
        .request(
            "tools/call",
            json!({"name": "kb_search", "arguments": {"query": "zebraword"}, "_meta": meta}),
        )
        .expect("tools/call");
    assert_eq!(r["result"]["isError"], false, "{r}");
}

/// The request span of `tool` in trace `trace`, and its statements' spans.
fn request_spans(got: &Got, trace: &str, tool: &str) -> Option<(String, Span, Vec<Span>)> {
    let (service, span) = got
        .spans
        .iter()
        .find(|(_, s)| hex(&s.trace_id) == trace && s.name == format!("tools/call {tool}"))?;
    let children = children_of(got, span);
    (!children.is_empty()).then(|| (service.clone(), span.clone(), children))
}

/// The spans whose parent is `span`.
fn children_of(got: &Got, span: &Span) -> Vec<Span> {
    got.spans
        .iter()
        .filter(|(_, s)| s.parent_span_id == span.span_id)
        .map(|(_, s)| s.clone())
        .collect()
}

/// Asserts what every request span says: a server span of `tool` under the client's span,
/// with the MCP attributes, and statements of `system` under it, naming nothing of the call
/// (each named by its operation: kb_search's statement is a `WITH`, kb_list's a `SELECT`).
fn assert_request(span: &Span, children: &[Span], tool: &str, transport: &str, system: &str) {
    let operation = if tool == "kb_search" {
        "WITH"
    } else {
        "SELECT"
    };
    assert_eq!(hex(&span.parent_span_id), PARENT, "{span:?}");
    assert_eq!(span.kind, 2, "a server span: {span:?}");
    let a = &span.attributes;
    assert_eq!(attr(a, "mcp.method.name").as_deref(), Some("tools/call"));
    assert_eq!(attr(a, "gen_ai.tool.name").as_deref(), Some(tool));
    assert_eq!(
        attr(a, "gen_ai.operation.name").as_deref(),
        Some("execute_tool")
    );
    assert_eq!(attr(a, "network.transport").as_deref(), Some(transport));
    assert!(attr(a, "jsonrpc.request.id").is_some(), "{span:?}");
    assert!(attr(a, "error.type").is_none(), "{span:?}");
    for c in children {
        assert_eq!(c.kind, 3, "a client span: {c:?}");
        assert_eq!(hex(&c.trace_id), TRACE);
        assert_eq!(
            attr(&c.attributes, "db.system.name").as_deref(),
            Some(system)
        );
        assert_eq!(
            attr(&c.attributes, "db.operation.name").as_deref(),
            Some(operation)
        );
        assert_eq!(c.name, operation);
        assert!(c.start_time_unix_nano >= span.start_time_unix_nano);
        assert!(c.end_time_unix_nano <= span.end_time_unix_nano);
    }
}

/// Every export arrived with the header `otel_env` configures (`x-team: blue`).
fn assert_team_header(got: &Got) {
    assert!(
        got.headers
            .iter()
            .all(|h| h.iter().any(|(k, v)| k == "x-team" && v == "blue")),
        "every export carries the configured header: {:?}",
        got.headers
    );
}

/// No span's attribute holds `secret`, an argument the client sent.
fn assert_never_named(got: &Got, secret: &str) {
    for (_, s) in &got.spans {
        for kv in &s.attributes {
            let v = attr(std::slice::from_ref(kv), &kv.key).unwrap_or_default();
            assert!(!v.contains(secret), "{} holds an argument: {v}", kv.key);
        }
    }
}

/// Over stdio on SQLite: the parent from `_meta.traceparent` (SEP-414), the statements as
/// children, the service named after the server, the exporter's headers from
/// `OTEL_EXPORTER_OTLP_HEADERS`; a trace the client did not sample is not recorded; a call on
/// the lane without trace context is a root span with its tool error; the duration histogram
/// arrives by tool.
#[test]
fn spans_of_a_stdio_call_arrive_under_the_clients_trace() {
    let receiver = Receiver::start();
    let db = sample_db("knowledge");
    let mut c = stdio_server(&receiver, &db.path, &[]);
    // A trace the client did not sample: the server records none of it (parent-based).
    let unsampled = "0af7651916cd43dd8448eb211c80319c";
    search_with_meta(
        &mut c,
        json!({"traceparent": format!("00-{unsampled}-{PARENT}-00")}),
    );
    let traceparent = format!("00-{TRACE}-{PARENT}-01");
    search_with_meta(
        &mut c,
        json!({"traceparent": traceparent, "tracestate": "team=blue"}),
    );
    let r = c
        .call_tool("kb_get", json!({"id": "no-such-entry"}))
        .expect("tools/call");
    assert_eq!(r["result"]["isError"], true, "{r}");

    let (service, span, children) = receiver.until("the kb_search span", |g| {
        request_spans(g, TRACE, "kb_search")
    });
    assert_eq!(service, "knowledge");
    assert_request(&span, &children, "kb_search", "pipe", "sqlite");
    let missing = receiver.until("the kb_get span", |g| {
        g.spans
            .iter()
            .find(|(_, s)| s.name == "tools/call kb_get")
            .map(|(_, s)| s.clone())
    });
    assert!(
        missing.parent_span_id.is_empty(),
        "a root span: {missing:?}"
    );
    assert_eq!(
        attr(&missing.attributes, "error.type").as_deref(),
        Some("tool_error")
    );
    let got = receiver.got.lock().unwrap();
    assert!(
        got.spans.iter().all(|(_, s)| hex(&s.trace_id) != unsampled),
        "spans of a trace the client did not sample"
    );
    assert_team_header(&got);
    assert_never_named(&got, "zebraword");
    assert_never_named(&got, "no-such-entry");
    drop(got);
    let points = receiver.until("the duration histogram", |g| {
        g.metrics
            .iter()
            .filter(|m| m.name == "mcp.server.operation.duration")
            .map(points)
            .find(|points| {
                points
                    .iter()
                    .any(|p| p.contains(&("gen_ai.tool.name".into(), "kb_get".into())))
            })
    });
    assert!(
        points
            .iter()
            .any(|p| p.contains(&("error.type".into(), "tool_error".into()))),
        "{points:?}"
    );
}

/// The workbench (`--ui`) names a sampled call's trace, and lists one statement for each
/// statement span the collector received under the call's span, by the spec's name.
#[test]
fn the_workbench_names_a_calls_trace_and_lists_its_statements() {
    let receiver = Receiver::start();
    let db = sample_db("knowledge");
    let mut command = Command::new(EXE);
    command
        .args(["serve", "knowledge", "--ui", "127.0.0.1:0", "--db"])
        .arg(&db.path)
        .env("MCPSPEC_STARTUP_JOBS", "off");
    for (k, v) in otel_env(&receiver.endpoint()) {
        command.env(k, v);
    }
    let (mut c, addr, _stderr) = crate::workbench::served_by(command);
    // A page watches, so that the call's statements are kept.
    let mut live = crate::workbench::stream(addr)
        .filter_map(|(name, v)| (name == "message" && v["method"] == "tools/call").then_some(v));
    search_with_meta(
        &mut c,
        json!({"traceparent": format!("00-{TRACE}-{PARENT}-01")}),
    );
    let listed = live.next().expect("the call, live");
    assert_eq!(listed["trace"], TRACE, "{listed}");
    let (status, _, body) =
        crate::workbench::get(addr, &format!("/ui/calls/{}", listed["seq"]), &[]);
    assert_eq!(status, 200, "{body}");
    let opened: Value = serde_json::from_str(&body).expect("the call as JSON");
    let (_, _, children) = receiver.until("the kb_search span", |g| {
        request_spans(g, TRACE, "kb_search")
    });
    let ran = opened["statements"]["kept"].as_array().expect("statements");
    assert_eq!(ran.len(), children.len(), "{opened}\n{children:?}");
    assert!(
        ran.iter()
            .all(|s| s["name"] == "kb_search" && s["operation"].is_string()),
        "{opened}"
    );
    // A call whose client did not sample its trace names none (nothing of it is exported).
    let unsampled = "0af7651916cd43dd8448eb211c80319c";
    search_with_meta(
        &mut c,
        json!({"traceparent": format!("00-{unsampled}-{PARENT}-00")}),
    );
    let second = live.next().expect("the second call");
    assert_eq!(second.get("trace"), None, "{second}");
}

/// With a ratio sampler of 0 under the client's decision (`parentbased_traceidratio`): a call
/// without trace context is dropped and leaves no span, not even its statements' as roots of
/// their own, yet its duration is recorded; a call under a sampled client span is traced with
/// its statements. Checked after the server exits, which flushes what it batched.
#[test]
fn a_call_the_sampler_drops_leaves_no_span_but_its_duration() {
    let receiver = Receiver::start();
    let db = sample_db("knowledge");
    let sampler = [
        ("OTEL_TRACES_SAMPLER", "parentbased_traceidratio"),
        ("OTEL_TRACES_SAMPLER_ARG", "0"),
    ];
    let mut c = stdio_server(&receiver, &db.path, &sampler);
    for _ in 0..3 {
        let r = c
            .call_tool("kb_list", json!({"limit": 2}))
            .expect("tools/call");
        assert_eq!(r["result"]["isError"], false, "{r}");
    }
    search_with_meta(
        &mut c,
        json!({"traceparent": format!("00-{TRACE}-{PARENT}-01")}),
    );
    let status = c.finish(Duration::from_secs(30)).expect("the server exits");
    assert!(status.success(), "{status:?}");

    let got = receiver.got.lock().unwrap();
    let (_, span, children) =
        request_spans(&got, TRACE, "kb_search").expect("the sampled call's spans");
    assert_request(&span, &children, "kb_search", "pipe", "sqlite");
    let strays: Vec<&Span> = got
        .spans
        .iter()
        .map(|(_, s)| s)
        .filter(|s| hex(&s.trace_id) != TRACE)
        .collect();
    assert!(strays.is_empty(), "spans of dropped calls: {strays:?}");
    assert_final_metrics(&got.metrics, "kb_list", 3);
}

/// The last export (the one at exit) holds the histogram's cumulative totals: `calls` calls
/// of `tool` in one series without error, their buckets adding up to their count under the
/// conventions' bounds in seconds; and the pool's connections by state and its maximum.
fn assert_final_metrics(metrics: &[Metric], tool: &str, calls: u64) {
    use opentelemetry_proto::tonic::metrics::v1::{
        AggregationTemporality, metric::Data, number_data_point,
    };
    let last = |name: &str| {
        metrics
            .iter()
            .rev()
            .find(|m| m.name == name)
            .unwrap_or_else(|| panic!("no {name} among {metrics:?}"))
    };
    let Some(Data::Histogram(h)) = &last("mcp.server.operation.duration").data else {
        panic!("the duration is not a histogram")
    };
    assert_eq!(
        h.aggregation_temporality,
        AggregationTemporality::Cumulative as i32
    );
    let p = h
        .data_points
        .iter()
        .find(|p| attr(&p.attributes, "gen_ai.tool.name").as_deref() == Some(tool))
        .unwrap_or_else(|| panic!("no point of {tool}: {h:?}"));
    assert_eq!(p.count, calls, "{p:?}");
    assert_eq!(attr(&p.attributes, "error.type"), None, "{p:?}");
    assert_eq!(
        attr(&p.attributes, "mcp.method.name").as_deref(),
        Some("tools/call")
    );
    assert_eq!(p.bucket_counts.iter().sum::<u64>(), calls, "{p:?}");
    assert_eq!(p.bucket_counts.len(), p.explicit_bounds.len() + 1, "{p:?}");
    assert_eq!(p.explicit_bounds.first(), Some(&0.0001), "{p:?}");
    assert_eq!(p.explicit_bounds.last(), Some(&300.0), "{p:?}");
    assert!(p.sum.is_some_and(|s| s > 0.0 && s < 30.0), "{p:?}");
    assert!(p.start_time_unix_nano > 0 && p.start_time_unix_nano <= p.time_unix_nano);
    let ints = |name: &str| -> Vec<(Option<String>, i64)> {
        let Some(Data::Sum(s)) = &last(name).data else {
            panic!("{name} is not a sum")
        };
        assert!(!s.is_monotonic, "{name}");
        s.data_points
            .iter()
            .map(|p| match p.value {
                Some(number_data_point::Value::AsInt(n)) => {
                    (attr(&p.attributes, "db.client.connection.state"), n)
                }
                _ => panic!("{name}: {p:?}"),
            })
            .collect()
    };
    let count = ints("db.client.connection.count");
    let states: Vec<_> = count.iter().map(|(s, _)| s.as_deref()).collect();
    assert_eq!(states, [Some("used"), Some("idle")], "{count:?}");
    let max = ints("db.client.connection.max");
    assert!(matches!(max[..], [(None, n)] if n >= 1), "{max:?}");
}

/// Over HTTP on PostgreSQL: the parent from the request's `traceparent` header, the
/// statements PostgreSQL's, the session named.
#[cfg(feature = "full")]
#[test]
fn spans_of_an_http_call_take_the_traceparent_header() {
    let receiver = Receiver::start();
    let db = sample_db_on(Engine::Postgres, "knowledge");
    let env = otel_env(&receiver.endpoint());
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let server = HttpServer::start(&db.path, &[], &env);
    let mut client = mcpspec_testkit::HttpClient::new(server.addr, None);
    client.initialize().expect("initialize");
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                      "params": {"name": "kb_list", "arguments": {"limit": 2}}});
    let traceparent = format!("00-{TRACE}-{PARENT}-01");
    let response = client
        .exchange(
            "POST",
            &[("traceparent", traceparent.as_str())],
            body.to_string().as_bytes(),
        )
        .expect("POST");
    let answer: Value = response.messages().into_iter().next().expect("a message");
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    let (_, span, children) =
        receiver.until("the kb_list span", |g| request_spans(g, TRACE, "kb_list"));
    assert_request(&span, &children, "kb_list", "tcp", "postgresql");
    assert_eq!(
        attr(&span.attributes, "jsonrpc.request.id").as_deref(),
        Some("7")
    );
    assert_eq!(
        attr(&span.attributes, "mcp.session.id"),
        client.session.clone(),
        "{span:?}"
    );
}

/// A call in an HTTP session without trace context, which the HTTP lane answers: a root
/// span that names the session and the request's id, with its statements under it.
#[test]
fn a_call_the_http_lane_answers_names_its_session() {
    let receiver = Receiver::start();
    let db = sample_db("knowledge");
    let env = otel_env(&receiver.endpoint());
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let server = HttpServer::start(&db.path, &[], &env);
    let mut client = mcpspec_testkit::HttpClient::new(server.addr, None);
    client.initialize().expect("initialize");
    let answer = client
        .call_tool("kb_list", json!({"limit": 2}))
        .expect("tools/call");
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    let (span, children) = receiver.until("the kb_list span", |g| {
        let (_, span) = g
            .spans
            .iter()
            .find(|(_, s)| s.name == "tools/call kb_list")?;
        let children = children_of(g, span);
        (!children.is_empty()).then(|| (span.clone(), children))
    });
    assert!(span.parent_span_id.is_empty(), "a root span: {span:?}");
    assert!(children.iter().all(|c| c.kind == 3), "{children:?}");
    let id = answer["id"].to_string();
    assert_eq!(
        attr(&span.attributes, "jsonrpc.request.id"),
        Some(id),
        "{span:?}"
    );
    assert_eq!(
        attr(&span.attributes, "mcp.session.id"),
        client.session.clone(),
        "{span:?}"
    );
    assert!(client.session.is_some());
}

/// A request of protocol 2026-07-28 (no session) over HTTP on MariaDB: its parent comes from
/// its own `_meta.traceparent` (SEP-414; such a request is rmcp's, not the lane's), its
/// statements are MariaDB's children, and it names no session.
#[cfg(feature = "full")]
#[test]
fn spans_of_a_2026_07_28_request_take_its_meta_on_mariadb() {
    let receiver = Receiver::start();
    let db = sample_db_on(Engine::Mariadb, "knowledge");
    let env = otel_env(&receiver.endpoint());
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let server = HttpServer::start(&db.path, &[], &env);
    let mut client = mcpspec_testkit::HttpClient::per_request(server.addr, None);
    let traceparent = format!("00-{TRACE}-{PARENT}-01");
    let response = client
        .post(&json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
            "params": {"name": "kb_list", "arguments": {"limit": 2},
                       "_meta": {"traceparent": traceparent}}}))
        .expect("POST");
    let answer: Value = response.messages().into_iter().next().expect("a message");
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    let (_, span, children) =
        receiver.until("the kb_list span", |g| request_spans(g, TRACE, "kb_list"));
    assert_request(&span, &children, "kb_list", "tcp", "mysql");
    assert_eq!(
        attr(&span.attributes, "jsonrpc.request.id").as_deref(),
        Some("9")
    );
    assert!(
        attr(&span.attributes, "mcp.session.id").is_none(),
        "{span:?}"
    );
}

/// A collector that is down: every call is answered as usual, and the spans it could not
/// take are dropped and counted in `/metrics`.
#[test]
fn a_collector_that_is_down_costs_no_call_and_its_spans_are_counted() {
    let closed = TcpListener::bind("127.0.0.1:0").expect("bind");
    let endpoint = format!("http://{}", closed.local_addr().expect("addr"));
    drop(closed);
    assert_calls_answered_and_spans_dropped(&endpoint, &[]);
}

/// A collector that takes the connection and never answers: the export gives up at
/// `OTEL_EXPORTER_OTLP_TIMEOUT`, so the calls are answered as usual and the batch is dropped
/// and counted, not waited for.
#[test]
fn a_collector_that_never_answers_is_given_up_at_the_timeout() {
    let silent = TcpListener::bind("127.0.0.1:0").expect("bind");
    let endpoint = format!("http://{}", silent.local_addr().expect("addr"));
    // Holds every connection open, reading nothing and answering nothing.
    std::thread::spawn(move || {
        let held: Vec<TcpStream> = silent.incoming().map_while(Result::ok).collect();
        drop(held);
    });
    assert_calls_answered_and_spans_dropped(&endpoint, &[("OTEL_EXPORTER_OTLP_TIMEOUT", "300")]);
}

/// W3C Trace Context's limits hold: a `tracestate` of 32 members goes with the span, one of 33
/// (or any that is not valid) is dropped whole while the span stays in the client's trace,
/// and a `traceparent` past any version's length is not a parent.
#[test]
fn a_tracestate_past_w3c_limits_is_dropped_and_the_trace_kept() {
    let receiver = Receiver::start();
    let db = sample_db("knowledge");
    let mut c = stdio_server(&receiver, &db.path, &[]);
    let members = |n: usize| {
        (0..n)
            .map(|i| format!("v{i}=x{i}"))
            .collect::<Vec<_>>()
            .join(",")
    };
    let cases = [
        ("4bf92f3577b34da6a3ce929d0e0e4701", members(32), members(32)),
        (
            "4bf92f3577b34da6a3ce929d0e0e4702",
            members(33),
            String::new(),
        ),
        (
            "4bf92f3577b34da6a3ce929d0e0e4703",
            "ok=1,Bad=2".to_string(),
            String::new(),
        ),
    ];
    for (trace, state, _) in &cases {
        search_with_meta(
            &mut c,
            json!({"traceparent": format!("00-{trace}-{PARENT}-01"), "tracestate": state}),
        );
    }
    let long = format!(
        "00-4bf92f3577b34da6a3ce929d0e0e4704-{PARENT}-01-{}",
        "0".repeat(600)
    );
    search_with_meta(&mut c, json!({"traceparent": long}));
    for (trace, _, kept) in &cases {
        let (_, span, _) = receiver.until(trace, |got| request_spans(got, trace, "kb_search"));
        assert_eq!(&span.trace_state, kept, "{trace}");
        assert_eq!(hex(&span.parent_span_id), PARENT);
    }
    // The long traceparent's request is the root of a trace of its own.
    receiver.until("the long traceparent's span", |got| {
        got.spans
            .iter()
            .any(|(_, s)| s.name == "tools/call kb_search" && s.parent_span_id.is_empty())
            .then_some(())
    });
    let _ = c.finish(Duration::from_secs(10));
}

/// A server stopping while its collector hangs (a long export timeout, spans and metrics
/// waiting) exits within its bounded flush (3 s) and the drain, not after the export timeout
/// twice over (over 60 s with a 30 s timeout before).
#[test]
fn a_server_stops_promptly_while_its_collector_hangs() {
    let silent = TcpListener::bind("127.0.0.1:0").expect("bind");
    let endpoint = format!("http://{}", silent.local_addr().expect("addr"));
    std::thread::spawn(move || {
        let held: Vec<TcpStream> = silent.incoming().map_while(Result::ok).collect();
        drop(held);
    });
    let db = sample_db("knowledge");
    let mut command = Command::new(EXE);
    command
        .args(["serve", "knowledge", "--db"])
        .arg(&db.path)
        .env("MCPSPEC_STARTUP_JOBS", "off")
        .env("OTEL_EXPORTER_OTLP_TIMEOUT", "30000")
        .stderr(Stdio::null());
    for (k, v) in otel_env(&endpoint) {
        command.env(k, v);
    }
    let mut c = StdioClient::spawn(&mut command).expect("spawn");
    c.initialize().expect("initialize");
    for _ in 0..3 {
        search_with_meta(&mut c, json!({}));
    }
    // Stdin closes: the exports the flush asks for hang.
    let status = c.finish(Duration::from_secs(15));
    assert!(
        status.is_some_and(|s| s.success()),
        "the server did not exit within 15 s: {status:?}"
    );
}

/// With a collector that takes the connection and never answers, requests with a `tracestate`
/// of thousands of members (past W3C's limits) leave the server's memory where it was: the
/// state is dropped, and what the waiting spans hold is bounded in bytes as well as spans.
#[test]
fn huge_trace_states_cost_no_memory_while_the_collector_hangs() {
    let silent = TcpListener::bind("127.0.0.1:0").expect("bind");
    let endpoint = format!("http://{}", silent.local_addr().expect("addr"));
    std::thread::spawn(move || {
        let held: Vec<TcpStream> = silent.incoming().map_while(Result::ok).collect();
        drop(held);
    });
    let db = sample_db("knowledge");
    let mut command = Command::new(EXE);
    command
        .args(["serve", "knowledge", "--db"])
        .arg(&db.path)
        .env("MCPSPEC_STARTUP_JOBS", "off")
        .env("OTEL_EXPORTER_OTLP_TIMEOUT", "600000")
        .stderr(Stdio::null());
    for (k, v) in otel_env(&endpoint) {
        command.env(k, v);
    }
    let mut c = StdioClient::spawn(&mut command).expect("spawn");
    c.initialize().expect("initialize");
    search_with_meta(&mut c, json!({}));
    let before = rss_kib(c.pid());
    // 4,000 valid members, about 1 MB: each call would keep a megabyte in its spans.
    let state: String = (0..4000)
        .map(|i| format!("vendor{i:04}={}", "x".repeat(240)))
        .collect::<Vec<_>>()
        .join(",");
    for i in 0..150 {
        let trace = format!("4bf92f3577b34da6a3ce929d0e{i:06x}");
        search_with_meta(
            &mut c,
            json!({"traceparent": format!("00-{trace}-{PARENT}-01"), "tracestate": state}),
        );
    }
    let after = rss_kib(c.pid());
    assert!(
        after < before + 64 * 1024,
        "the server grew from {before} KiB to {after} KiB"
    );
}

/// An https collector: the export goes over TLS, the collector's certificate checked against
/// the system's roots (which `SSL_CERT_FILE` names here, as it does for any program that reads
/// them). Trusting another root only, the server exports nothing and counts its spans as
/// dropped.
#[test]
fn an_https_collector_is_checked_against_the_systems_roots() {
    let certs = Certs::make();
    let receiver = Receiver::start_tls(certs.server_config());
    let db = sample_db("knowledge");
    let ca = certs.path("ca.crt");
    let c = stdio_server(&receiver, &db.path, &[("SSL_CERT_FILE", &ca)]);
    let exports = assert_search_exported(c, &receiver);

    let other = certs.path("other.crt");
    assert_calls_answered_and_spans_dropped(&receiver.endpoint(), &[("SSL_CERT_FILE", &other)]);
    assert_eq!(
        receiver.got.lock().unwrap().headers.len(),
        exports,
        "an export arrived from a server that does not trust the collector's root"
    );
}

/// Two certificate authorities made with openssl for one test, `ca` and `other`, and a
/// certificate for 127.0.0.1 that `ca` signed.
struct Certs {
    dir: tempfile::TempDir,
}

impl Certs {
    fn make() -> Certs {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let ec = [
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
        ];
        for ca in ["ca", "other"] {
            let (key, crt) = (format!("{ca}.key"), format!("{ca}.crt"));
            let subject = format!("/CN=mcpspec test {ca}");
            let mut args = vec!["req", "-x509", "-days", "1", "-subj", &subject];
            args.extend(ec);
            args.extend(["-keyout", &key, "-out", &crt]);
            openssl(&dir, &args);
        }
        let mut args = vec!["req", "-subj", "/CN=127.0.0.1"];
        args.extend(ec);
        args.extend(["-keyout", "leaf.key", "-out", "leaf.csr"]);
        openssl(&dir, &args);
        std::fs::write(
            dir.path().join("leaf.ext"),
            "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n",
        )
        .expect("write leaf.ext");
        openssl(
            &dir,
            &[
                "x509",
                "-req",
                "-in",
                "leaf.csr",
                "-CA",
                "ca.crt",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-days",
                "1",
                "-extfile",
                "leaf.ext",
                "-out",
                "leaf.crt",
            ],
        );
        Certs { dir }
    }

    fn path(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }

    /// The receiver's TLS configuration: the certificate for 127.0.0.1 and its key.
    fn server_config(&self) -> Arc<rustls::ServerConfig> {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};
        let chain = CertificateDer::pem_file_iter(self.path("leaf.crt"))
            .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
            .expect("leaf.crt");
        let key = PrivateKeyDer::from_pem_file(self.path("leaf.key")).expect("leaf.key");
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("TLS versions")
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .expect("the receiver's certificate");
        Arc::new(config)
    }
}

/// Runs openssl with `args` in `dir`, and checks that it succeeded.
fn openssl(dir: &tempfile::TempDir, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir.path())
        .output()
        .expect("run openssl (install it: apt-get install openssl)");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Starts knowledge over HTTP exporting to `endpoint` (with `env` besides), checks that 20
/// calls are answered, and waits (up to 30 s) until `/metrics` counts a dropped span.
fn assert_calls_answered_and_spans_dropped(endpoint: &str, env: &[(&str, &str)]) {
    let db = sample_db("knowledge");
    let mut all = otel_env(endpoint);
    all.extend(env.iter().map(|(k, v)| (*k, v.to_string())));
    let all: Vec<(&str, &str)> = all.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let server = HttpServer::start(&db.path, &["--metrics"], &all);
    let mut client = mcpspec_testkit::HttpClient::new(server.addr, None);
    client.initialize().expect("initialize");
    for _ in 0..20 {
        let r = client
            .request(
                "tools/call",
                json!({"name": "kb_list", "arguments": {"limit": 1}}),
            )
            .expect("tools/call");
        assert_eq!(r["result"]["isError"], false, "{r}");
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let text = mcpspec_testkit::get(server.addr, "/metrics")
            .expect("/metrics")
            .text();
        let dropped = text
            .lines()
            .find_map(|l| l.strip_prefix("mcpspec_otel_dropped_spans_total"))
            .and_then(|rest| rest.split_whitespace().last())
            .and_then(|n| n.parse::<f64>().ok())
            .unwrap_or(0.0);
        if dropped >= 1.0 {
            break;
        }
        assert!(Instant::now() < deadline, "no dropped span counted: {text}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A traces endpoint that is not a URL stops `serve` with an error that names the problem and
/// not the value (an endpoint may carry credentials); a header that is not valid is left out
/// and the server serves and exports with the others.
#[test]
fn an_endpoint_that_is_not_a_url_is_refused_without_its_text() {
    let db = sample_db("knowledge");
    let stderr = refused_serve(
        &db.path,
        &[(
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            "user:s3cret@collector",
        )],
        "the OTLP traces endpoint is not a URL",
    );
    assert!(!stderr.contains("s3cret"), "the endpoint leaked: {stderr}");

    // A header that is not valid is left out; the others still go with every export.
    let receiver = Receiver::start();
    let c = stdio_server(
        &receiver,
        &db.path,
        &[("OTEL_EXPORTER_OTLP_HEADERS", "bad header=x,x-team=blue")],
    );
    assert_search_exported(c, &receiver);
}

/// With `OTEL_EXPORTER_OTLP_COMPRESSION=gzip` (in any case), every export, spans and metrics,
/// is sent gzipped and says so, and decodes; a compression that is neither gzip nor none stops
/// `serve` with an error naming it.
#[test]
fn exports_are_gzipped_when_asked_and_an_unknown_compression_is_refused() {
    let db = sample_db("knowledge");
    let receiver = Receiver::start();
    let c = stdio_server(
        &receiver,
        &db.path,
        &[("OTEL_EXPORTER_OTLP_COMPRESSION", "GZIP")],
    );
    let exports = assert_search_exported(c, &receiver);
    let got = receiver.got.lock().unwrap();
    assert!(!got.metrics.is_empty(), "no metrics arrived");
    assert!(exports >= 2, "{exports} exports");
    for headers in &got.headers {
        assert!(
            headers
                .iter()
                .any(|(k, v)| k == "content-encoding" && v == "gzip"),
            "an export not gzipped: {headers:?}"
        );
    }
    drop(got);

    refused_serve(
        &db.path,
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.endpoint()),
            ("OTEL_EXPORTER_OTLP_METRICS_COMPRESSION", "zstd"),
        ],
        "the OTLP metrics compression is `zstd`: it is gzip or none",
    );
}

/// Runs knowledge's `serve` on `db` with `env` (and no `OTEL_EXPORTER_OTLP_ENDPOINT` unless
/// `env` sets one), checks that it stops with an error saying `says`, and returns its stderr.
fn refused_serve(db: &std::path::Path, env: &[(&str, &str)], says: &str) -> String {
    let out = Command::new(EXE)
        .args(["serve", "knowledge", "--db"])
        .arg(db)
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .expect("run serve");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "served: {stderr}");
    assert!(stderr.contains(says), "{stderr}");
    stderr
}

/// Calls `kb_search` on `c`, lets the server exit, and checks that the call's span arrived
/// at `receiver` with the team's header; how many exports it has received.
fn assert_search_exported(mut c: StdioClient, receiver: &Receiver) -> usize {
    search_with_meta(&mut c, json!({}));
    let status = c.finish(Duration::from_secs(30)).expect("the server exits");
    assert!(status.success(), "{status:?}");
    let got = receiver.got.lock().unwrap();
    assert!(
        got.spans
            .iter()
            .any(|(_, s)| s.name == "tools/call kb_search"),
        "the call's span arrived"
    );
    assert_team_header(&got);
    got.headers.len()
}

/// A call that embeds its text has the provider's call as a client span of its request,
/// `embeddings static`, with the provider's kind and how many texts, and nothing of the text.
#[cfg(feature = "full")]
#[test]
fn an_embedding_is_a_span_of_the_call_that_asked_for_it() {
    let receiver = Receiver::start();
    let db = sample_db("knowledge");
    let model = format!("static:{}", crate::deps::wordllama().display());
    let mut c = stdio_server(&receiver, &db.path, &[("KNOWLEDGE_EMBEDDINGS", &model)]);
    let traceparent = format!("00-{TRACE}-{PARENT}-01");
    let r = c
        .request(
            "tools/call",
            json!({"name": "kb_add", "arguments": {"content": "zebraword embedded", "role": "dev"},
                   "_meta": {"traceparent": traceparent}}),
        )
        .expect("tools/call");
    assert_eq!(r["result"]["isError"], false, "{r}");
    let (span, embedding) = receiver.until("the embedding's span", |g| {
        let (_, span) = g
            .spans
            .iter()
            .find(|(_, s)| hex(&s.trace_id) == TRACE && s.name == "tools/call kb_add")?;
        let embedding = children_of(g, span)
            .into_iter()
            .find(|s| s.name == "embeddings static")?;
        Some((span.clone(), embedding))
    });
    assert_eq!(embedding.kind, 3, "a client span: {embedding:?}");
    let a = &embedding.attributes;
    assert_eq!(
        attr(a, "gen_ai.operation.name").as_deref(),
        Some("embeddings")
    );
    assert_eq!(attr(a, "gen_ai.provider.name").as_deref(), Some("static"));
    assert_eq!(attr(a, "mcpspec.embedding.texts").as_deref(), Some("1"));
    assert!(embedding.start_time_unix_nano >= span.start_time_unix_nano);
    assert!(embedding.end_time_unix_nano <= span.end_time_unix_nano);
    assert_never_named(&receiver.got.lock().unwrap(), "zebraword");
}
