//! `mcpspec serve --http`: the built binary on a loopback port, driven by the small HTTP/1.1
//! client in `mcpspec::client`. Covers the bearer token, the Host and Origin allow-lists, the
//! body limit, the refusal of an unprotected public bind, session isolation and DELETE, a
//! stdio and an HTTP session sharing one database, draining on SIGTERM, and the lane that
//! answers plain SQL reads as JSON.

use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::Receiver;

use mcpspec_testkit::{ClientError, HttpClient, HttpResponse, RESPONSE_TIMEOUT};
use serde_json::{Value, json};

use crate::common::{Db, exe_for, mcpspec, sample_db, signal, start_on};
use crate::knowledge::{big_db, integrity};

const TOKEN: &str = "e2e-token-0123456789abcdef";

/// A running `mcpspec serve --http` and the address it reported on stderr.
pub(crate) struct HttpServer {
    pub(crate) child: Child,
    pub(crate) addr: SocketAddr,
    /// The rest of the server's stderr, line by line.
    pub(crate) stderr: Receiver<String>,
}

impl HttpServer {
    /// Starts the knowledge server on `db` at 127.0.0.1 on a free port, with `extra` flags
    /// and `env`, and waits for its `listening on` line.
    /// The knowledge server on `db`.
    pub(crate) fn start(db: &Path, extra: &[&str], env: &[(&str, &str)]) -> HttpServer {
        let mut args = vec!["knowledge", "--db", db.to_str().expect("utf-8")];
        args.extend_from_slice(extra);
        HttpServer::serve(&args, env)
    }

    /// `mcpspec serve ARGS --http 127.0.0.1:0`, once it announced its address.
    pub(crate) fn serve(args: &[&str], env: &[(&str, &str)]) -> HttpServer {
        let mut c = Command::new(exe_for(args[0]));
        c.arg("serve").args(args).args(["--http", "127.0.0.1:0"]);
        HttpServer::spawn(c, env)
    }

    /// [`HttpServer::serve`] with at most `files` open file descriptors (soft and hard).
    fn serve_limited(files: u32, args: &[&str], env: &[(&str, &str)]) -> HttpServer {
        let mut c = Command::new("sh");
        c.arg("-c")
            .arg(format!(
                "ulimit -n {files} && exec \"$0\" serve \"$@\" --http 127.0.0.1:0"
            ))
            .arg(exe_for(args[0]))
            .args(args);
        HttpServer::spawn(c, env)
    }

    /// Starts `c`, an `mcpspec serve --http` command, and waits for its address.
    pub(crate) fn spawn(mut c: Command, env: &[(&str, &str)]) -> HttpServer {
        c.env_remove("MCPSPEC_HTTP_TOKEN")
            .env("MCPSPEC_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        for (k, v) in env {
            c.env(k, v);
        }
        let mut child = c.spawn().expect("spawn mcpspec serve --http");
        let (addr, rx) = mcpspec_testkit::announced_addr(&mut child);
        HttpServer {
            child,
            addr,
            stderr: rx,
        }
    }

    fn client(&self, token: Option<&str>) -> HttpClient {
        HttpClient::new(self.addr, token)
    }

    /// A client with an initialized session.
    fn session(&self, token: Option<&str>) -> HttpClient {
        let mut c = self.client(token);
        let init = c.initialize().expect("initialize");
        assert!(init.get("result").is_some(), "initialize failed: {init}");
        assert!(c.session.is_some(), "initialize assigns a session id");
        c
    }

    /// Sends SIGTERM and waits for the exit status.
    pub(crate) fn terminate(self) -> std::process::ExitStatus {
        signal(self.child.id(), "-TERM");
        self.wait()
    }

    pub(crate) fn wait(mut self) -> std::process::ExitStatus {
        self.child.wait().expect("wait")
    }

    /// Stops the server and returns everything it wrote to stderr.
    pub(crate) fn stop_and_log(self) -> String {
        let log = std::mem::replace(&mut { self }.stderr, std::sync::mpsc::channel().1);
        log.iter().collect::<Vec<_>>().join("\n")
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn initialize_body() -> Vec<u8> {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "e2e", "version": "1"}}})
    .to_string()
    .into_bytes()
}

/// A refusal: the status, a JSON body with an `error` code, and nothing the client sent.
fn refused(r: &HttpResponse, status: u16, error: &str) {
    assert_eq!(r.status, status, "{}", r.text());
    assert_eq!(r.header("content-type"), Some("application/json"));
    let body: Value = serde_json::from_slice(&r.body).expect("a JSON body");
    assert_eq!(body["error"], error, "{body}");
    assert!(!r.text().contains(TOKEN), "the body leaks the token");
}

/// A successful tool result's structured content.
fn ok(c: &mut HttpClient, tool: &str, args: Value) -> Value {
    let r = c.call_tool(tool, args).expect("tools/call");
    assert_eq!(r["result"]["isError"], json!(false), "{r}");
    r["result"]["structuredContent"].clone()
}

#[test]
fn the_bearer_token_is_required_when_configured() {
    let db = sample_db("knowledge");
    let server = HttpServer::start(&db.path, &[], &[("MCPSPEC_HTTP_TOKEN", TOKEN)]);
    let wrong_same_length = format!("{}x", &TOKEN[..TOKEN.len() - 1]);
    let cases: [(&str, Option<&str>); 4] = [
        ("no token", None),
        ("wrong token", Some("nope")),
        ("wrong token of the same length", Some(&wrong_same_length)),
        ("the token with a suffix", Some(&format!("{TOKEN}0"))),
    ];
    for (case, token) in cases {
        let mut c = server.client(token);
        let r = c.exchange("POST", &[], &initialize_body()).unwrap();
        refused(&r, 401, "unauthorized");
        assert_eq!(r.header("www-authenticate"), Some("Bearer"), "{case}");
        // GET and DELETE are guarded too.
        assert_eq!(c.exchange("GET", &[], b"").unwrap().status, 401, "{case}");
        assert_eq!(
            c.exchange("DELETE", &[], b"").unwrap().status,
            401,
            "{case}"
        );
    }
    // Another scheme with the right secret is refused as well.
    let mut c = server.client(None);
    let basic = format!("Basic {TOKEN}");
    let r = c
        .exchange("POST", &[("Authorization", &basic)], &initialize_body())
        .unwrap();
    refused(&r, 401, "unauthorized");

    let mut c = server.session(Some(TOKEN));
    let added = ok(
        &mut c,
        "kb_add",
        json!({"content": "Tokens travel in the Authorization header.", "role": "dev"}),
    );
    let got = ok(&mut c, "kb_get", json!({"id": added["id"]}));
    assert_eq!(got["content"], "Tokens travel in the Authorization header.");
    assert!(server.terminate().success());
}

#[test]
fn the_token_comes_from_a_file_or_a_named_variable() {
    let db = sample_db("knowledge");
    let file = db._dir.path().join("token");
    std::fs::write(&file, format!("{TOKEN}\n")).unwrap();
    let file = file.to_str().unwrap().to_string();
    type Source<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)]);
    let sources: [Source; 2] = [
        (&["--token-file", &file], &[]),
        (&["--token-env", "E2E_TOKEN"], &[("E2E_TOKEN", TOKEN)]),
    ];
    for (flags, env) in sources {
        let server = HttpServer::start(&db.path, flags, env);
        let r = server
            .client(None)
            .exchange("POST", &[], &initialize_body())
            .unwrap();
        refused(&r, 401, "unauthorized");
        let mut c = server.session(Some(TOKEN));
        ok(&mut c, "kb_search", json!({"query": "sqlite"}));
        assert!(server.terminate().success(), "{flags:?}");
    }
    // A named variable that is not set is a start-up error.
    let (code, _, err) = mcpspec(
        &[
            "serve",
            "knowledge",
            "--db",
            db.path.to_str().unwrap(),
            "--http",
            "127.0.0.1:0",
            "--token-env",
            "E2E_TOKEN_UNSET",
        ],
        &[],
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("E2E_TOKEN_UNSET"), "{err}");
}

#[test]
fn bad_host_or_origin_is_forbidden() {
    let db = sample_db("knowledge");
    let server = HttpServer::start(
        &db.path,
        &[
            "--allow-host",
            "mcp.example.test",
            "--allow-origin",
            "https://app.example.test",
        ],
        &[("MCPSPEC_HTTP_TOKEN", TOKEN)],
    );
    let port = server.addr.port();
    let forbidden_hosts = [
        "evil.example.test".to_string(),
        format!("evil.example.test:{port}"),
        // The loopback names on another port.
        format!("127.0.0.1:{}", port.wrapping_add(1)),
        format!("localhost:{}", port.wrapping_add(1)),
    ];
    for host in &forbidden_hosts {
        // Refused before the token is looked at.
        let mut c = server.client(None);
        c.host = host.clone();
        let r = c.exchange("POST", &[], &initialize_body()).unwrap();
        refused(&r, 403, "forbidden");
    }
    let forbidden_origins = [
        "http://evil.example.test".to_string(),
        format!("http://evil.example.test:{port}"),
        format!("https://localhost:{port}"),
        "null".to_string(),
    ];
    for origin in &forbidden_origins {
        let mut c = server.client(Some(TOKEN));
        let r = c
            .exchange("POST", &[("Origin", origin)], &initialize_body())
            .unwrap();
        refused(&r, 403, "forbidden");
    }
    let allowed_hosts = [
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        format!("LOCALHOST:{port}"),
        "mcp.example.test".to_string(),
    ];
    for host in &allowed_hosts {
        let mut c = server.client(Some(TOKEN));
        c.host = host.clone();
        assert!(c.initialize().is_ok(), "{host}");
    }
    let allowed_origins = [
        format!("http://localhost:{port}"),
        format!("http://127.0.0.1:{port}"),
        "https://app.example.test".to_string(),
    ];
    for origin in &allowed_origins {
        let mut c = server.client(Some(TOKEN));
        let r = c
            .exchange("POST", &[("Origin", origin)], &initialize_body())
            .unwrap();
        assert_eq!(r.status, 200, "{origin}: {}", r.text());
    }
    assert!(server.terminate().success());
}

#[test]
fn an_oversized_body_is_413() {
    let db = sample_db("knowledge");
    let server = HttpServer::start(&db.path, &["--max-body-bytes", "2048"], &[]);
    let mut c = server.session(None);
    let content = "x".repeat(4096);
    let call = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
        "params": {"name": "kb_add", "arguments": {"content": content, "role": "dev"}}});
    let r = c.post(&call).unwrap();
    refused(&r, 413, "payload_too_large");

    // A chunked body declares no length; it is cut off at the same limit.
    let mut stream = c.connect().unwrap();
    let body = call.to_string();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {}\r\nAccept: application/json, text/event-stream\r\nContent-Type: application/json\r\nMcp-Session-Id: {}\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n{:x}\r\n{body}\r\n0\r\n\r\n",
        c.host,
        c.session.as_deref().unwrap(),
        body.len()
    );
    std::io::Write::write_all(&mut stream, head.as_bytes()).unwrap();
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");

    // The session still works, and nothing was written.
    let found = ok(&mut c, "kb_search", json!({"query": "xxxx"}));
    assert_eq!(found["results"], json!([]));
    assert!(server.terminate().success());
}

#[test]
fn a_public_address_without_a_token_is_refused_at_start_up() {
    let db = sample_db("knowledge");
    for addr in ["0.0.0.0:0", "[::]:0"] {
        let (code, _, err) = mcpspec(
            &[
                "serve",
                "knowledge",
                "--db",
                db.path.to_str().unwrap(),
                "--http",
                addr,
            ],
            &[],
        );
        assert_eq!(code, 2, "{addr}: {err}");
        assert!(err.contains("without a token"), "{err}");
        assert!(!err.contains("listening"), "{err}");
    }
}

#[test]
fn sessions_are_isolated_and_end_with_delete() {
    let db = sample_db("knowledge");
    let server = HttpServer::start(&db.path, &[], &[]);
    let mut a = server.session(None);
    let mut b = server.session(None);
    assert_ne!(a.session, b.session);
    ok(&mut a, "kb_search", json!({"query": "sqlite"}));
    ok(&mut b, "kb_search", json!({"query": "sqlite"}));

    // A request that is not `initialize` needs a session id; an unknown one is not found.
    let mut none = server.client(None);
    let list = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/list"});
    assert_eq!(none.post(&list).unwrap().status, 400);
    none.session = Some("not-a-session".into());
    assert_eq!(none.post(&list).unwrap().status, 404);

    // B's server-to-client stream is open until B's session ends.
    let open = b.open_stream().unwrap();
    let mut stream = open.conn;
    assert_eq!(open.status, 200);
    assert!(
        open.headers
            .iter()
            .any(|(n, v)| n == "content-type" && v.starts_with("text/event-stream")),
        "{:?}",
        open.headers
    );

    // Ending A leaves B alone; A's id is then unknown, to A and to anyone else.
    let a_id = a.session.clone();
    assert_eq!(a.delete_session().unwrap(), 204);
    match a.request("tools/list", json!({})) {
        Err(ClientError::Status { status: 404, .. }) => {}
        other => panic!("a deleted session must be unknown: {other:?}"),
    }
    let mut thief = server.client(None);
    thief.session = a_id;
    assert_eq!(thief.post(&list).unwrap().status, 404);
    ok(&mut b, "kb_search", json!({"query": "sqlite"}));

    // Ending B ends its stream.
    assert_eq!(b.delete_session().unwrap(), 204);
    // The body's last chunk arrives (the connection itself may stay open for reuse).
    while read_chunk(&mut stream).is_some() {}
    assert_eq!(b.post(&list).unwrap().status, 404);
    assert!(server.terminate().success());
}

#[test]
fn stdio_and_http_sessions_share_the_database() {
    let db = sample_db("knowledge");
    let copy = Db {
        path: db.path.clone(),
        _dir: tempfile::tempdir().unwrap(),
    };
    let server = HttpServer::start(&db.path, &[], &[]);
    let mut http = server.session(None);
    let mut stdio = start_on(copy, "knowledge", &[]);

    let from_http = ok(
        &mut http,
        "kb_add",
        json!({"content": "written over HTTP", "role": "dev"}),
    );
    let seen = stdio.ok("kb_get", json!({"id": from_http["id"]}));
    assert_eq!(seen["content"], "written over HTTP");

    let from_stdio = stdio.ok(
        "kb_add",
        json!({"content": "written over stdio", "role": "qa"}),
    );
    let seen = ok(&mut http, "kb_get", json!({"id": from_stdio["id"]}));
    assert_eq!(seen["content"], "written over stdio");

    stdio.finish();
    assert!(server.terminate().success());
    assert_eq!(integrity(&db.path), "ok");
}

/// Reads one chunk of a chunked body; `None` at the last chunk.
fn read_chunk(r: &mut impl BufRead) -> Option<String> {
    let mut line = String::new();
    r.read_line(&mut line).expect("a chunk size");
    let size = usize::from_str_radix(line.trim(), 16).expect("a hex chunk size");
    if size == 0 {
        return None;
    }
    let mut chunk = vec![0; size + 2];
    r.read_exact(&mut chunk).expect("a chunk");
    chunk.truncate(size);
    Some(String::from_utf8(chunk).expect("UTF-8 events"))
}

#[test]
fn sigterm_answers_calls_in_flight_then_exits_0() {
    let db = big_db(300_000);
    let server = HttpServer::start(&db.path, &[], &[]);
    let mut c = server.session(None);
    // The session's own stream stays open; it must not hold up shutdown.
    let open = c.open_stream().unwrap();
    let mut stream = open.conn;
    assert_eq!(open.status, 200);

    // A slow search on a connection of its own; its priming event shows that it arrived.
    let mut search = BufReader::new(c.connect().unwrap());
    let body = json!({"jsonrpc": "2.0", "id": 77, "method": "tools/call",
        "params": {"name": "kb_search", "arguments": {"query": "common", "limit": 50}}})
    .to_string();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {}\r\nAccept: application/json, text/event-stream\r\nContent-Type: application/json\r\nMcp-Session-Id: {}\r\nMCP-Protocol-Version: 2025-11-25\r\nContent-Length: {}\r\n\r\n{body}",
        c.host,
        c.session.as_deref().unwrap(),
        body.len()
    );
    std::io::Write::write_all(search.get_mut(), head.as_bytes()).unwrap();
    let mut head = Vec::new();
    loop {
        let mut line = String::new();
        search.read_line(&mut line).unwrap();
        if line.trim().is_empty() {
            break;
        }
        head.push(line.trim().to_ascii_lowercase());
    }
    assert!(head[0].starts_with("http/1.1 200"), "{head:?}");
    assert!(
        head.contains(&"transfer-encoding: chunked".to_string()),
        "{head:?}"
    );
    let priming = read_chunk(&mut search).expect("the priming event");
    assert!(!priming.contains("\"id\":77"), "{priming}");

    // A ping answered after the search started while nothing more arrived for the search:
    // the search is in flight.
    assert!(
        c.request("ping", json!({}))
            .unwrap()
            .get("result")
            .is_some()
    );
    search.get_ref().set_nonblocking(true).unwrap();
    let nothing_yet = search.buffer().is_empty()
        && matches!(search.get_ref().peek(&mut [0u8; 1]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock);
    search.get_ref().set_nonblocking(false).unwrap();
    assert!(
        nothing_yet,
        "the search finished before SIGTERM; make it slower"
    );

    signal(server.child.id(), "-TERM");
    let mut events = String::new();
    while let Some(chunk) = read_chunk(&mut search) {
        events.push_str(&chunk);
    }
    let answered = mcpspec_testkit::sse_events(&events)
        .iter()
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .any(|m| {
            m["id"] == 77
                && m["result"]["isError"] == json!(false)
                && m["result"]["structuredContent"]["results"]
                    .as_array()
                    .map(Vec::len)
                    == Some(50)
        });
    assert!(answered, "no answer to the call in flight: {events:.300}");
    // The open stream closes at shutdown and the server exits 0.
    let mut tail = Vec::new();
    stream.read_to_end(&mut tail).expect("the stream ends");
    let status = server.wait();
    assert!(status.success(), "{status:?}");
    assert_eq!(integrity(&db.path), "ok");
}

/// The next messages on a session's GET stream (one chunk of it).
fn stream_messages(stream: &mut impl BufRead) -> Vec<Value> {
    let chunk = read_chunk(stream).expect("the stream stays open");
    mcpspec_testkit::sse_events(&chunk)
        .iter()
        .filter_map(|d| serde_json::from_str(d).ok())
        .collect()
}

/// What one client sets stays in its session: a log level set by one HTTP session does not
/// silence another's log messages. rmcp sends log messages on the session's GET stream; a
/// resource notification after the call marks where the quiet session's would have been.
#[test]
fn each_http_session_has_its_own_log_level() {
    let server = HttpServer::serve(&["conformance"], &[]);
    let mut quiet = server.session(None);
    let mut chatty = server.session(None);
    quiet
        .request("logging/setLevel", json!({"level": "error"}))
        .expect("setLevel");
    quiet
        .request(
            "resources/subscribe",
            json!({"uri": "test://watched-resource"}),
        )
        .expect("subscribe");
    let mut streams = Vec::new();
    for c in [&quiet, &chatty] {
        let open = c.open_stream().expect("GET stream");
        assert_eq!(open.status, 200);
        let conn = open.conn;
        conn.get_ref()
            .set_read_timeout(Some(RESPONSE_TIMEOUT))
            .expect("timeout");
        streams.push(conn);
    }
    for c in [&mut quiet, &mut chatty] {
        let r = c
            .call_tool("test_tool_with_logging", json!({}))
            .expect("tools/call");
        assert_eq!(r["result"]["isError"], json!(false), "{r}");
    }
    ok(&mut quiet, "test_touch_watched_resource", json!({}));

    let mut seen = Vec::new();
    while !seen
        .iter()
        .any(|m: &Value| m["method"] == "notifications/resources/updated")
    {
        seen.extend(stream_messages(&mut streams[0]));
    }
    let methods: Vec<&str> = seen.iter().filter_map(|m| m["method"].as_str()).collect();
    assert_eq!(methods, ["notifications/resources/updated"], "{seen:?}");

    let mut logged = Vec::new();
    while logged.len() < 3 {
        for m in stream_messages(&mut streams[1]) {
            assert_eq!(m["method"], "notifications/message", "{m}");
            logged.push(m["params"]["data"].as_str().unwrap_or_default().to_string());
        }
    }
    assert_eq!(
        logged,
        [
            "Tool execution started",
            "Tool processing data",
            "Tool execution completed"
        ]
    );
    drop(streams);
    assert!(server.terminate().success());
}

/// A body that is not one JSON-RPC message is a bad request with the JSON-RPC error the stdio
/// transport sends; DELETE says whether there was a session to end; a request with two Host
/// headers is refused.
#[test]
fn malformed_bodies_deletes_and_hosts_get_the_right_status() {
    let db = sample_db("knowledge");
    let server = HttpServer::start(&db.path, &[], &[]);
    let mut c = server.session(None);
    // (body, JSON-RPC code)
    let cases: [(&[u8], i64); 6] = [
        (b"", -32700),
        (b"{\"jsonrpc\": \"2.0\", \"id\": 1,", -32700),
        (b"not json", -32700),
        (
            b"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\",\"params\":{\"x\":\"\xff\xfe\"}}",
            -32700,
        ),
        (
            b"[{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\"}]",
            -32600,
        ),
        (b"42", -32600),
    ];
    for (body, code) in cases {
        let r = c.exchange("POST", &[], body).unwrap();
        let shown = String::from_utf8_lossy(body);
        assert_eq!(r.status, 400, "{shown}: {}", r.text());
        assert_eq!(
            r.header("content-type"),
            Some("application/json"),
            "{shown}"
        );
        let answer: Value = serde_json::from_slice(&r.body).expect("a JSON-RPC answer");
        assert_eq!(answer["jsonrpc"], "2.0", "{shown}: {answer}");
        assert_eq!(answer["error"]["code"], code, "{shown}: {answer}");
        assert_eq!(answer["id"], Value::Null, "{shown}: {answer}");
    }
    // A lone surrogate: the id is readable, so the call gets its argument error.
    let r = c
        .exchange(
            "POST",
            &[],
            br#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"kb_search","arguments":{"query":"\ud800"}}}"#,
        )
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    let answer: Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(answer["id"], 9, "{answer}");
    assert_eq!(answer["result"]["isError"], json!(true), "{answer}");
    // The session is fine.
    ok(&mut c, "kb_search", json!({"query": "sqlite"}));

    // Two Host headers: refused, even when both are allowed.
    let host = c.host.clone();
    let r = c
        .exchange("POST", &[("Host", &host)], &initialize_body())
        .unwrap();
    refused(&r, 400, "bad_request");

    // DELETE: 204 for a live session, 404 for one already ended or never started.
    assert_eq!(c.delete_session().unwrap(), 204);
    assert_eq!(c.delete_session().unwrap(), 404);
    let mut stranger = server.client(None);
    stranger.session = Some("no-such-session".into());
    assert_eq!(stranger.delete_session().unwrap(), 404);
    assert!(server.terminate().success());
}

/// Requests of one session that reuse the id of one still unanswered are refused and never
/// run (three `kb_add` with one id once wrote three rows, answered one, and left two streams
/// open forever).
#[test]
fn a_request_reusing_an_id_in_flight_in_a_session_never_runs() {
    let db = sample_db("knowledge");
    let server = HttpServer::start(&db.path, &[], &[]);
    let c = server.session(None);
    let before = crate::common::count_rows(&db.path, "knowledge_entries");
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                      "params": {"name": "kb_add", "arguments": {"content": "same id", "role": "dev"}}})
    .to_string();
    let answers: Vec<HttpResponse> = std::thread::scope(|scope| {
        let calls: Vec<_> = (0..3)
            .map(|_| {
                let mut each = server.client(None);
                each.session = c.session.clone();
                each.host = c.host.clone();
                let body = body.clone();
                scope.spawn(move || {
                    each.exchange(
                        "POST",
                        &[("MCP-Protocol-Version", "2025-11-25")],
                        body.as_bytes(),
                    )
                    .expect("an answer to every request")
                })
            })
            .collect();
        calls.into_iter().map(|t| t.join().unwrap()).collect()
    });
    let mut ok = 0;
    for r in &answers {
        assert_eq!(r.status, 200, "{}", r.text());
        let message = r
            .messages()
            .into_iter()
            .find(|m| m.get("id").is_some())
            .unwrap_or_else(|| serde_json::from_slice(&r.body).expect("a JSON answer"));
        assert_eq!(message["id"], 7, "{message}");
        if message["result"]["isError"] == json!(false) {
            ok += 1;
        } else {
            assert_eq!(message["error"]["code"], -32600, "{message}");
        }
    }
    assert!(ok >= 1);
    assert_eq!(
        crate::common::count_rows(&db.path, "knowledge_entries"),
        before + ok,
        "every row written was answered"
    );
    assert!(server.terminate().success());
}

/// One 2026-07-28 `tools/call` of the conformance server's `test_custom_headers` with `args`
/// and the extra `headers`: the HTTP status and the JSON-RPC message.
fn custom_headers_call(c: &mut HttpClient, args: Value, headers: &[(&str, &str)]) -> (u16, Value) {
    let tool = "test_custom_headers";
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
        "name": tool, "arguments": args, "_meta": meta_2026()}});
    let mut all = vec![
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", tool),
    ];
    all.extend_from_slice(headers);
    let r = c
        .exchange("POST", &all, body.to_string().as_bytes())
        .expect("an answer");
    let message = r.messages().into_iter().next().unwrap_or(Value::Null);
    (r.status, message)
}

/// `x-mcp-header` (SEP-2243): a 2026-07-28 call over HTTP must carry each annotated argument as
/// its `Mcp-Param-*` header, equal to the body (plain or `=?base64?...?=`), or it is refused
/// with HTTP 400 and -32020 before the tool runs. 2025-11-25 sessions never see the keyword.
#[test]
fn annotated_arguments_must_match_their_mcp_param_headers() {
    let server = HttpServer::serve(&["conformance"], &[]);
    let mut c = server.client(None);
    let args = json!({"region": "eu-west", "priority": 3});
    let (status, m) = custom_headers_call(
        &mut c,
        args.clone(),
        &[("Mcp-Param-Region", "eu-west"), ("Mcp-Param-Priority", "3")],
    );
    assert_eq!(
        (status, &m["result"]["isError"]),
        (200, &json!(false)),
        "{m}"
    );
    // The same value Base64-wrapped is accepted too.
    let (status, m) = custom_headers_call(
        &mut c,
        args.clone(),
        &[
            ("Mcp-Param-Region", "=?base64?ZXUtd2VzdA==?="),
            ("Mcp-Param-Priority", "3"),
        ],
    );
    assert_eq!(status, 200, "{m}");
    let refused = [
        vec![("Mcp-Param-Region", "us-east"), ("Mcp-Param-Priority", "3")],
        vec![("Mcp-Param-Priority", "3")],
        vec![
            ("Mcp-Param-Region", "=?base64?ZXUtd2VzdA?="),
            ("Mcp-Param-Priority", "3"),
        ],
        vec![
            ("Mcp-Param-Region", "eu-west"),
            ("Mcp-Param-Priority", "3"),
            ("Mcp-Param-Verbose", "true"),
        ],
    ];
    for headers in refused {
        let (status, m) = custom_headers_call(&mut c, args.clone(), &headers);
        assert_eq!(
            (status, &m["error"]["code"]),
            (400, &json!(-32020)),
            "{headers:?}: {m}"
        );
    }
    // A 2025-11-25 session lists the tool without the annotation, and calls need no headers.
    let mut old = server.session(None);
    let tools = old.request("tools/list", json!({})).unwrap();
    let tool = tools["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "test_custom_headers")
        .expect("listed")
        .clone();
    assert!(!tool.to_string().contains("x-mcp-header"), "{tool}");
    let r = old.call_tool("test_custom_headers", args).unwrap();
    assert_eq!(r["result"]["isError"], json!(false), "{r}");
}

/// A tool's icons (MCP 2025-11-25) are listed alike to both protocol eras over Streamable HTTP
/// and over stdio; a tool without icons lists no `icons` key.
#[test]
fn tool_icons_are_listed_to_both_eras_over_both_transports() {
    let want = json!([{"src": "https://example.com/text-48.png", "mimeType": "image/png",
        "sizes": ["48x48"], "theme": "dark"}]);
    let icons = |r: &Value| -> (Value, Option<Value>) {
        let tools = r["result"]["tools"].as_array().expect("tools");
        let of = |name: &str| tools.iter().find(|t| t["name"] == name).expect(name);
        let plain = of("test_image_content").get("icons").cloned();
        (of("test_simple_text")["icons"].clone(), plain)
    };
    let server = HttpServer::serve(&["conformance"], &[]);
    let r = server
        .session(None)
        .request("tools/list", json!({}))
        .expect("tools/list");
    assert_eq!(icons(&r), (want.clone(), None), "HTTP, 2025-11-25: {r}");
    let body = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list",
        "params": {"_meta": meta_2026()}});
    let headers = [
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", "tools/list"),
    ];
    let r = server
        .client(None)
        .exchange("POST", &headers, body.to_string().as_bytes())
        .expect("an answer");
    let r = r.messages().into_iter().next().unwrap_or(Value::Null);
    assert_eq!(icons(&r), (want.clone(), None), "HTTP, 2026-07-28: {r}");
    assert!(server.terminate().success());

    let stdio = || {
        let mut command = std::process::Command::new(crate::common::exe_for("conformance"));
        command
            .args(["serve", "conformance"])
            .env("MCPSPEC_LOG", "warn")
            .stderr(std::process::Stdio::null());
        mcpspec_testkit::StdioClient::spawn(&mut command).expect("spawn server")
    };
    let mut old = stdio();
    old.initialize().expect("initialize");
    let r = old.request("tools/list", json!({})).expect("tools/list");
    assert_eq!(icons(&r), (want.clone(), None), "stdio, 2025-11-25: {r}");
    let r = stdio()
        .request("tools/list", json!({"_meta": meta_2026()}))
        .expect("tools/list");
    assert_eq!(icons(&r), (want, None), "stdio, 2026-07-28: {r}");
}

/// The `_meta` of a request of protocol 2026-07-28: its version, capabilities and client.
fn meta_2026() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "e2e", "version": "1"}
    })
}

/// A `tools/call` POST of a 2025-11-25 session with request `id`, and its response.
fn post_call(c: &mut HttpClient, id: usize, params: Value) -> HttpResponse {
    let version = [("MCP-Protocol-Version", "2025-11-25")];
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params});
    c.exchange("POST", &version, body.to_string().as_bytes())
        .expect("an answer")
}

/// Asserts that `r` answers a call as cancelled.
fn assert_cancelled(r: &HttpResponse) {
    let answer: Value = serde_json::from_slice(&r.body).expect("JSON");
    let text = answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or("");
    assert!(
        text.contains("CANCELLED"),
        "a cancelled call answered with: {answer}"
    );
}

/// A plain SQL read is answered by the worker that read it (the lane) as one JSON body, the
/// same result rmcp gives; a tool that may become a task keeps rmcp's SSE answer. A lane call
/// is interrupted by `notifications/cancelled` sent on another connection, and the session
/// goes on serving.
#[test]
fn plain_reads_answer_as_json_and_stop_when_cancelled() {
    let db = big_db(300_000);
    let env = [
        ("MCPSPEC_LOG", "info"),
        ("MCPSPEC_LOG_FORMAT", "json"),
        crate::common::SHARED_KEY,
    ];
    let mut server = HttpServer::start(&db.path, &[], &env);
    let log = std::mem::replace(&mut server.stderr, std::sync::mpsc::channel().1);
    let mut c = server.session(None);
    let list = json!({"name": "kb_list", "arguments": {"limit": 2}});
    let r = post_call(&mut c, 1, list.clone());
    assert_eq!(
        r.header("content-type"),
        Some("application/json"),
        "{}",
        r.text()
    );
    let direct: Value = serde_json::from_slice(&r.body).expect("one JSON message");
    assert_eq!(direct["id"], 1);
    assert_eq!(direct["result"]["isError"], json!(false), "{direct}");
    assert_eq!(
        direct["result"]["structuredContent"]["entries"]
            .as_array()
            .map(Vec::len),
        Some(2)
    );
    // The shape of 2025-11-25: no `resultType`, as rmcp answers that revision.
    assert!(direct["result"].get("resultType").is_none(), "{direct}");
    // The same read in a stdio session gives the same result.
    let mut stdio = crate::knowledge::spawn(&db.path, &[crate::common::SHARED_KEY], Stdio::null());
    let same = stdio.call_tool("kb_list", json!({"limit": 2})).unwrap();
    assert_eq!(same["result"], direct["result"]);
    drop(stdio);
    let r = post_call(
        &mut c,
        2,
        json!({"name": "kb_search", "arguments": {"query": "common", "limit": 1}}),
    );
    assert_eq!(
        r.header("content-type"),
        Some("text/event-stream"),
        "{}",
        r.text()
    );

    // A long lane read on a connection of its own, cancelled from the session's connection
    // until its answer comes (the server may read the cancellation before the request).
    let mut slow = server.client(None);
    slow.session = c.session.clone();
    let slow_call = std::thread::spawn(move || {
        post_call(
            &mut slow,
            79,
            json!({"name": "kb_list", "arguments": {"tags": ["no-such-tag"], "limit": 100}}),
        )
    });
    let start = std::time::Instant::now();
    while !slow_call.is_finished() {
        c.notify(
            "notifications/cancelled",
            json!({"requestId": 79, "reason": "user pressed escape"}),
        )
        .unwrap();
        assert!(
            start.elapsed() < RESPONSE_TIMEOUT,
            "the cancelled read did not stop"
        );
    }
    assert_cancelled(&slow_call.join().unwrap());
    // The session goes on serving, and the call log shows the read stopped as cancelled.
    assert_eq!(post_call(&mut c, 80, list).status, 200);
    assert!(server.terminate().success());
    let outcomes: Vec<String> = log
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(&l).ok())
        .filter(|v| v["target"] == "mcpspec::call" && v["fields"]["tool"] == "kb_list")
        .map(|v| v["fields"]["outcome"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(outcomes, ["ok", "CANCELLED", "ok"]);
}

crate::on_every_engine_on_the_workers!(
    a_read_on_the_last_free_worker_gives_way_and_every_read_can_be_cancelled
);

/// With every runtime worker but one answering a long lane read, the next long read starts
/// on the last worker and gives way to the blocking pool (within about a millisecond on
/// SQLite, within the watchdog's interval on PostgreSQL), so that the cancellations of all of
/// them are read while they run. Each call has one line in the call log, however it ran, and
/// giving way is no error. On both engines whose calls run on the runtime's workers.
fn a_read_on_the_last_free_worker_gives_way_and_every_read_can_be_cancelled(
    engine: crate::common::Engine,
) {
    // The server runs one worker per core, and at least two.
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get().max(2));
    let db = crate::knowledge::big_db_on(engine, 300_000);
    let env = [("MCPSPEC_LOG", "info"), ("MCPSPEC_LOG_FORMAT", "json")];
    let mut server = HttpServer::start(&db.path, &[], &env);
    let log = std::mem::replace(&mut server.stderr, std::sync::mpsc::channel().1);
    let mut c = server.session(None);
    // On PostgreSQL a cancellation reaches a statement through the watchdog, a round every
    // 20 ms, and here twice (the read on the last worker gives way, then a cancellation is
    // seen), so on a loaded machine a scan could end first. There the reads wait instead for a
    // lock the test holds until they are answered: they can only end by being cancelled.
    let mut lock = (engine == crate::common::Engine::Postgres).then(|| {
        let url = db.path.to_str().expect("a URL");
        let mut holder = postgres::Client::connect(url, postgres::NoTls).expect("a session");
        holder
            .batch_execute("BEGIN; LOCK TABLE knowledge_entries IN ACCESS EXCLUSIVE MODE")
            .expect("the table locked");
        holder
    });
    let slow_reads: Vec<_> = (0..workers)
        .map(|i| {
            let mut slow = server.client(None);
            slow.session = c.session.clone();
            let args =
                json!({"name": "kb_list", "arguments": {"tags": ["no-such-tag"], "limit": 100}});
            std::thread::spawn(move || post_call(&mut slow, 100 + i, args))
        })
        .collect();
    let start = std::time::Instant::now();
    while slow_reads.iter().any(|t| !t.is_finished()) {
        for i in 0..workers {
            c.notify(
                "notifications/cancelled",
                json!({"requestId": 100 + i, "reason": "user pressed escape"}),
            )
            .unwrap();
        }
        assert!(
            start.elapsed() < RESPONSE_TIMEOUT,
            "the cancelled reads did not stop"
        );
    }
    if let Some(holder) = lock.as_mut() {
        holder.batch_execute("COMMIT").expect("the lock released");
    }
    for read in slow_reads {
        assert_cancelled(&read.join().unwrap());
    }
    let list = json!({"name": "kb_list", "arguments": {"limit": 2}});
    let r: Value = serde_json::from_slice(&post_call(&mut c, 1, list).body).expect("JSON");
    assert_eq!(r["result"]["isError"], json!(false), "{r}");
    assert!(server.terminate().success());
    let lines: Vec<Value> = log
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(&l).ok())
        .collect();
    let mut outcomes: Vec<&str> = lines
        .iter()
        .filter(|v| v["target"] == "mcpspec::call" && v["fields"]["tool"] == "kb_list")
        .map(|v| v["fields"]["outcome"].as_str().unwrap_or(""))
        .collect();
    outcomes.sort_unstable();
    let mut expected = vec!["CANCELLED"; workers];
    expected.push("ok");
    assert_eq!(outcomes, expected);
    assert!(
        !lines.iter().any(|v| v.to_string().contains("gave way")),
        "giving way was logged"
    );
}

/// Connections that open and never send cannot keep clients out or make the server spin: with
/// 128 descriptors the cap is 64 connections, and 300 idle ones only make the idlest give way.
/// A client is then served, the server stays nearly idle while they are held, and nothing
/// floods the log.
#[test]
fn idle_connections_beyond_the_descriptor_limit_neither_lock_out_nor_spin() {
    let db = sample_db("knowledge");
    let server = HttpServer::serve_limited(
        128,
        &["knowledge", "--db", db.path.to_str().unwrap()],
        &[("MCPSPEC_LOG", "info")],
    );
    let idle: Vec<std::net::TcpStream> = (0..300)
        .filter_map(|_| std::net::TcpStream::connect(server.addr).ok())
        .collect();
    assert!(idle.len() >= 200, "only {} connections opened", idle.len());
    let mut c = server.session(None);
    let listed = ok(&mut c, "kb_list", json!({}));
    assert!(listed["entries"].is_array(), "{listed}");
    let cpu = |pid: u32| -> u64 {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        let fields: Vec<&str> = stat
            .rsplit(')')
            .next()
            .unwrap()
            .split_whitespace()
            .collect();
        fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
    };
    let ticks = |f: &dyn Fn()| {
        let before = cpu(server.child.id());
        f();
        cpu(server.child.id()) - before
    };
    // Clock ticks are hundredths of a second: a spinning loop would use about 100 here.
    let used = ticks(&|| std::thread::sleep(std::time::Duration::from_secs(1)));
    assert!(
        used < 50,
        "the server used {used} ticks in a second holding idle connections"
    );
    // Another client still gets in while the idle ones are held.
    let mut d = server.session(None);
    ok(&mut d, "kb_list", json!({}));
    drop(idle);
    let flood: Vec<String> = server
        .stderr
        .try_iter()
        .filter(|l| l.contains("accept") || l.contains("connection"))
        .collect();
    assert!(flood.len() <= 3, "{flood:?}");
}

/// A request whose params do not fit its method is -32602 naming the field, and an unknown
/// method -32601, over HTTP as over stdio: in a 2025-11-25 session (status 200, as its other
/// errors) and as requests of 2026-07-28 (400 and 404). rmcp answered both -32601 with the
/// method's name, and 404 for 2026-07-28.
#[test]
fn params_that_do_not_fit_their_method_are_invalid_params_naming_the_field() {
    let db = sample_db("knowledge");
    let server = HttpServer::start(&db.path, &[], &[]);
    // (method, params, code, the field named)
    let cases = [
        (
            "tools/call",
            json!({"name": "kb_get", "arguments": {"id": "x"}, "requestState": 5}),
            -32602,
            Some("requestState"),
        ),
        (
            "tools/call",
            json!({"name": "kb_get", "arguments": {"id": "x"}, "requestState": {"a": 1}}),
            -32602,
            Some("requestState"),
        ),
        ("tools/call", json!({"name": 5}), -32602, Some("name")),
        (
            "tools/call",
            json!({"name": "kb_get", "arguments": [1]}),
            -32602,
            Some("arguments"),
        ),
        ("resources/read", json!({"uri": [1]}), -32602, Some("uri")),
        ("no/such/method", json!({}), -32601, None),
    ];
    let mut session = server.session(None);
    let mut per_request = HttpClient::per_request(server.addr, None);
    for (era, c) in [
        ("2025-11-25", &mut session),
        ("2026-07-28", &mut per_request),
    ] {
        for (method, params, code, field) in &cases {
            let body = json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params});
            let r = c.post(&body).expect("an answer");
            let status = match (era, code) {
                ("2025-11-25", _) => 200,
                (_, -32601) => 404,
                _ => 400,
            };
            assert_eq!(r.status, status, "{era} {method} {params}: {}", r.text());
            let answer = r.messages().pop().expect("a message");
            assert_eq!(answer["id"], 7, "{answer}");
            assert_eq!(
                answer["error"]["code"], *code,
                "{era} {method} {params}: {answer}"
            );
            if let Some(field) = field {
                assert_eq!(answer["error"]["data"]["field"], *field, "{answer}");
                assert!(
                    answer["error"]["message"].as_str().unwrap().contains(field),
                    "{answer}"
                );
            }
        }
    }
    // Methods 2026-07-28 removed are not found for its requests, whatever their params.
    for method in [
        "initialize",
        "logging/setLevel",
        "resources/subscribe",
        "tasks/list",
        "tasks/result",
    ] {
        let body = json!({"jsonrpc": "2.0", "id": 8, "method": method, "params": {"uri": 5}});
        let r = per_request.post(&body).expect("an answer");
        assert_eq!(r.status, 404, "{method}: {}", r.text());
        let answer = r.messages().pop().expect("a message");
        assert_eq!(answer["error"]["code"], -32601, "{method}: {answer}");
    }
}

/// A body is JSON only when its media type's essence is `application/json`: the lane took
/// `application/jsonx` as JSON and answered it; now every such call is rmcp's 415.
#[test]
fn a_body_of_another_media_type_is_refused_even_for_a_plain_read() {
    let db = sample_db("knowledge");
    let server = HttpServer::start(&db.path, &[], &[]);
    let mut c = server.session(None);
    let call = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
        "params": {"name": "kb_list", "arguments": {}}});
    for (content_type, status) in [
        ("application/jsonx", 415),
        ("application/json-patch+json", 415),
        ("text/json", 415),
        ("application/json; charset=utf-8", 200),
    ] {
        let r = c
            .exchange(
                "POST",
                &[("Content-Type", content_type)],
                call.to_string().as_bytes(),
            )
            .unwrap();
        assert_eq!(r.status, status, "{content_type}: {}", r.text());
    }
}

/// A read of protocol 2026-07-28 (no session) takes the lane only with the SEP-2243 headers
/// rmcp takes it with: the same requests, well formed and not, sent to a server with the lane
/// and to one without (`MCPSPEC_HTTP_LANE=off`, every request rmcp's) get the same status and
/// the same JSON-RPC message; only the valid call is the lane's (one JSON body, where rmcp
/// answers with an event stream).
#[test]
fn a_2026_read_takes_the_lane_only_with_the_headers_rmcp_takes() {
    let db = sample_db("knowledge");
    let lane = HttpServer::start(&db.path, &[], &[crate::common::SHARED_KEY]);
    let rmcp = HttpServer::start(
        &db.path,
        &[],
        &[("MCPSPEC_HTTP_LANE", "off"), crate::common::SHARED_KEY],
    );
    let meta = meta_2026();
    let body = |name: &str, meta: &Value| {
        json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
               "params": {"name": name, "arguments": {"limit": 2}, "_meta": meta}})
        .to_string()
    };
    let good = [
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", "kb_list"),
    ];
    let with = |extra: &[(&'static str, &'static str)], without: &str| {
        let mut h: Vec<(&str, &str)> = good
            .iter()
            .copied()
            .filter(|(k, _)| !k.eq_ignore_ascii_case(without))
            .collect();
        h.extend_from_slice(extra);
        h
    };
    // (what, headers, body, taken by the lane)
    type Case<'a> = (&'a str, Vec<(&'a str, &'a str)>, String, bool);
    let cases: Vec<Case> = vec![
        ("valid", with(&[], ""), body("kb_list", &meta), true),
        (
            "no Mcp-Name",
            with(&[], "Mcp-Name"),
            body("kb_list", &meta),
            false,
        ),
        (
            "another Mcp-Name",
            with(&[("Mcp-Name", "kb_get")], "Mcp-Name"),
            body("kb_list", &meta),
            false,
        ),
        (
            "two Mcp-Name",
            with(&[("Mcp-Name", "kb_list")], ""),
            body("kb_list", &meta),
            false,
        ),
        (
            "no Mcp-Method",
            with(&[], "Mcp-Method"),
            body("kb_list", &meta),
            false,
        ),
        (
            "another Mcp-Method",
            with(&[("Mcp-Method", "tools/list")], "Mcp-Method"),
            body("kb_list", &meta),
            false,
        ),
        (
            "no version header",
            with(&[], "MCP-Protocol-Version"),
            body("kb_list", &meta),
            false,
        ),
        (
            "an older version header",
            with(
                &[("MCP-Protocol-Version", "2025-11-25")],
                "MCP-Protocol-Version",
            ),
            body("kb_list", &meta),
            false,
        ),
        (
            "an Mcp-Param header",
            with(&[("Mcp-Param-Limit", "2")], ""),
            body("kb_list", &meta),
            false,
        ),
        (
            "an unknown tool",
            with(&[("Mcp-Name", "no_such_tool")], "Mcp-Name"),
            body("no_such_tool", &meta),
            false,
        ),
    ];
    for (what, headers, body, lane_takes) in cases {
        compare(what, [&lane, &rmcp], &headers, &body, lane_takes);
    }
}

/// A 2026-07-28 call of a tool that mirrors an argument into a header (`x-mcp-header`,
/// SEP-2243) is rmcp's whatever the headers: a missing `Mcp-Param-Region` is refused as rmcp
/// refuses it, and a present one is answered as rmcp answers it.
#[test]
fn a_2026_call_of_a_tool_that_mirrors_an_argument_into_a_header_is_rmcps() {
    let lane = HttpServer::serve(&["conformance"], &[]);
    let rmcp = HttpServer::serve(&["conformance"], &[("MCPSPEC_HTTP_LANE", "off")]);
    let body = json!({"jsonrpc": "2.0", "id": 8, "method": "tools/call",
        "params": {"name": "test_custom_headers", "arguments": {"region": "eu"}, "_meta": meta_2026()}})
    .to_string();
    let named = [
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", "test_custom_headers"),
    ];
    let mut mirrored = named.to_vec();
    mirrored.push(("Mcp-Param-Region", "eu"));
    compare("no Mcp-Param-Region", [&lane, &rmcp], &named, &body, false);
    compare("Mcp-Param-Region", [&lane, &rmcp], &mirrored, &body, false);
}

/// Sends one POST to the server with the lane and to the one without, and asserts their
/// answers are the same, and that the lane answered (one JSON body where rmcp streams SSE)
/// when `lane_takes`, else that rmcp did.
fn compare(
    what: &str,
    servers: [&HttpServer; 2],
    headers: &[(&str, &str)],
    body: &str,
    lane_takes: bool,
) {
    {
        let answers: Vec<_> = servers
            .iter()
            .map(|server| {
                let mut c = mcpspec_testkit::HttpClient::new(server.addr, None);
                let r = c
                    .exchange("POST", headers, body.as_bytes())
                    .unwrap_or_else(|e| panic!("{what}: {e}"));
                let message = r.messages().into_iter().next();
                (
                    r.status,
                    r.header("content-type").map(str::to_string),
                    message,
                )
            })
            .collect();
        let (lane_answer, rmcp_answer) = (&answers[0], &answers[1]);
        assert_eq!(lane_answer.0, rmcp_answer.0, "{what}: the status");
        assert_eq!(lane_answer.2, rmcp_answer.2, "{what}: the message");
        assert!(rmcp_answer.2.is_some(), "{what}: rmcp answered nothing");
        let json = lane_answer.1.as_deref() == Some("application/json");
        if lane_takes {
            assert!(
                json,
                "{what}: the lane answers one JSON body: {lane_answer:?}"
            );
            let m = lane_answer.2.as_ref().unwrap();
            assert_eq!(m["result"]["resultType"], "complete", "{m}");
            assert_eq!(m["result"]["isError"], false, "{m}");
        } else {
            assert_eq!(
                lane_answer.1, rmcp_answer.1,
                "{what}: rmcp's answer, as rmcp sends it"
            );
        }
    }
}
