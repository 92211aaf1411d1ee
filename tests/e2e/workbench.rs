//! The workbench (#60): `serve --ui ADDR` beside a stdio session shows every call the stdio
//! client makes (beside Streamable HTTP, the HTTP clients' in both eras), live over
//! Server-Sent Events and in `GET /ui/calls`, with the arguments sanitised as the call log's
//! and the response; keeps the last 1,000 calls; answers only its own address and page;
//! serves its page under a CSP with no inline script; refuses a non-loopback address; takes
//! the page's calls at its own `/mcp`, the server's protocol path; runs the spec's examples
//! with every write rolled back, only when asked with the workbench's header; and, at `/ui/`
//! on a guarded MCP listener, asks for the same token and shows an OAuth caller its own calls
//! only. The page itself, in Chromium, is `browser.rs`'s.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::Duration;

use mcpspec_testkit::StdioClient;
use serde_json::{Value, json};

use crate::common::{exe_for, mcpspec, sample_db};

/// How long a test waits for what must come before it fails (never a sleep).
const WAIT: Duration = Duration::from_secs(10);

/// knowledge over stdio with the workbench on a free loopback port: the client, the
/// workbench's address, and the rest of the server's stderr.
pub(crate) fn served(db: &std::path::Path) -> (StdioClient, SocketAddr, Receiver<String>) {
    let mut command = Command::new(exe_for("knowledge"));
    command
        .args(["serve", "knowledge", "--ui", "127.0.0.1:0", "--db"])
        .arg(db)
        .env("MCPSPEC_LOG", "warn");
    served_by(command)
}

/// The server `command` starts (a stdio server with `--ui` on a free loopback port, its
/// stderr left to this function): the client, initialised, the workbench's address, and the
/// rest of the server's stderr.
pub(crate) fn served_by(command: Command) -> (StdioClient, SocketAddr, Receiver<String>) {
    let (mut client, addr, rx) = started(command);
    client.initialize().expect("initialize");
    (client, addr, rx)
}

/// [`served_by`] without its `initialize`: the client's first message is the test's.
fn started(mut command: Command) -> (StdioClient, SocketAddr, Receiver<String>) {
    command.stderr(Stdio::piped());
    let mut client = StdioClient::spawn(&mut command).expect("spawn");
    let stderr = client.take_stderr().expect("piped stderr");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let addr = loop {
        let line = rx
            .recv_timeout(WAIT)
            .expect("the workbench announces its address");
        if let Some(url) = line.strip_prefix("mcpspec: workbench on http://") {
            break url.trim_end_matches('/').parse().expect("an address");
        }
    };
    (client, addr, rx)
}

/// A raw GET with these extra headers: the status, the headers (lower-case names) and the
/// body, read to its end.
pub(crate) fn get(
    addr: SocketAddr,
    path: &str,
    headers: &[(&str, &str)],
) -> (u16, Vec<(String, String)>, String) {
    let mut conn = TcpStream::connect(addr).expect("connect");
    conn.set_read_timeout(Some(WAIT)).unwrap();
    let host = headers
        .iter()
        .find(|(k, _)| *k == "Host")
        .map_or_else(|| addr.to_string(), |(_, v)| v.to_string());
    let mut request = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n");
    for (k, v) in headers.iter().filter(|(k, _)| *k != "Host") {
        request.push_str(&format!("{k}: {v}\r\n"));
    }
    request.push_str("\r\n");
    conn.write_all(request.as_bytes()).unwrap();
    let mut reader = BufReader::new(conn);
    let (status, headers) = head(&mut reader);
    let mut body = String::new();
    std::io::Read::read_to_string(&mut reader, &mut body).expect("the body");
    if header(&headers, "transfer-encoding") == Some("chunked") {
        body = unchunked(&body);
    }
    (status, headers, body)
}

/// A chunked body's content.
fn unchunked(mut rest: &str) -> String {
    let mut out = String::new();
    loop {
        let (size, after) = rest.split_once("\r\n").expect("a chunk's size");
        let size = usize::from_str_radix(size.trim(), 16).expect("a hexadecimal size");
        if size == 0 {
            return out;
        }
        out.push_str(&after[..size]);
        rest = &after[size + 2..];
    }
}

/// The status line and headers of a response.
fn head(reader: &mut BufReader<TcpStream>) -> (u16, Vec<(String, String)>) {
    let mut line = String::new();
    reader.read_line(&mut line).expect("a status line");
    let status = line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("a status");
    let mut headers = Vec::new();
    loop {
        line.clear();
        reader.read_line(&mut line).expect("a header");
        let l = line.trim_end();
        if l.is_empty() {
            return (status, headers);
        }
        let (k, v) = l.split_once(':').expect("a header line");
        headers.push((k.to_ascii_lowercase(), v.trim().to_string()));
    }
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

/// The event stream, open: each event's name (`message` for a call, `reload` for one of
/// `dev`'s reloads) and data as it is read.
pub(crate) fn stream(addr: SocketAddr) -> impl Iterator<Item = (String, Value)> {
    let mut conn = TcpStream::connect(addr).expect("connect");
    conn.set_read_timeout(Some(WAIT)).unwrap();
    write!(
        conn,
        "GET /ui/events HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\n\r\n"
    )
    .unwrap();
    let mut reader = BufReader::new(conn);
    let (status, headers) = head(&mut reader);
    assert_eq!(status, 200);
    assert_eq!(header(&headers, "content-type"), Some("text/event-stream"));
    let mut name = String::from("message");
    reader
        .lines()
        .map(|l| l.expect("an event within the wait"))
        .filter_map(move |l| {
            if let Some(n) = l.strip_prefix("event: ") {
                name = n.to_string();
                return None;
            }
            let data = l.strip_prefix("data: ")?;
            let event = std::mem::replace(&mut name, "message".into());
            Some((event, serde_json::from_str(data).expect("JSON")))
        })
}

/// The tool calls on the event stream, as they are read.
fn events(addr: SocketAddr) -> impl Iterator<Item = Value> {
    stream(addr)
        .filter_map(|(name, v)| (name == "message" && v["method"] == "tools/call").then_some(v))
}

/// The tool calls in `GET /ui/calls`'s answer (the ring has the other requests too).
pub(crate) fn tool_calls(body: &str) -> Vec<Value> {
    let all: Vec<Value> = serde_json::from_str(body).expect("the calls as JSON");
    all.into_iter()
        .filter(|c| c["method"] == "tools/call")
        .collect()
}

#[test]
fn the_workbench_shows_a_stdio_clients_calls_live() {
    let db = sample_db("knowledge");
    let (mut client, addr, _stderr) = served(&db.path);
    // Opened before any call: the calls come as they happen.
    let mut live = events(addr);
    let ok = client
        .call_tool("kb_list", json!({"limit": 2, "role": "dev"}))
        .unwrap();
    assert_eq!(ok["result"]["isError"], json!(false));
    let long = "x".repeat(5000);
    client
        .call_tool("kb_get", json!({"id": "nope", "note": long}))
        .unwrap();
    let first = live.next().expect("the first call");
    assert_eq!(first["tool"], "kb_list");
    // Shown with the client the stdio session named in its `initialize`.
    assert_eq!(first["client"], "mcpspec-client", "{first}");
    assert_eq!(first["method"], "tools/call");
    assert_eq!(first["outcome"], "ok");
    assert!(
        first["duration_ms"].as_f64().is_some_and(|d| d > 0.0),
        "{first}"
    );
    assert!(
        first["result_bytes"].as_u64().is_some_and(|b| b > 0),
        "{first}"
    );
    let second = live.next().expect("the second call");
    assert_eq!(second["tool"], "kb_get");
    assert_eq!(second["outcome"], "VALIDATION_ERROR", "{second}");
    assert!(second["seq"].as_u64() > first["seq"].as_u64());
    opens_whole(addr, &first, &second);

    // The same calls in /calls, and on a stream opened later (the ring first). Nothing before
    // the page opened is kept without `--ui-history` (see
    // `calls_made_while_no_page_is_open_are_kept_with_ui_history_only`).
    let (status, _, body) = get(addr, "/ui/calls", &[]);
    assert_eq!(status, 200);
    let all: Vec<Value> = serde_json::from_str(&body).unwrap();
    // Besides the two calls, at most the session's start: rmcp tells of it once it has handled
    // the client's `notifications/initialized`, which may be after the page opened.
    assert!(
        all.iter()
            .all(|c| c["method"] == "tools/call" || c["method"] == "initialize"),
        "{all:?}"
    );
    assert_eq!(tool_calls(&body), [first.clone(), second.clone()]);
    let mut later = events(addr);
    assert_eq!(later.next().as_ref(), Some(&first));
    assert_eq!(later.next().as_ref(), Some(&second));

    // The last 1,000 calls are kept, not more.
    for i in 0..1000 {
        client
            .call_tool("kb_list", json!({"limit": 1 + i % 5}))
            .unwrap();
    }
    let (_, _, body) = get(addr, "/ui/calls", &[]);
    let calls: Vec<Value> = serde_json::from_str(&body).unwrap();
    assert_eq!(calls.len(), 1000);
    assert!(calls.iter().all(|c| c["tool"] == "kb_list"));
    let seq = |c: &Value| c["seq"].as_u64().expect("seq");
    assert_eq!(seq(&calls[999]) - seq(&calls[0]), 999);
    assert_eq!(seq(&calls[0]), seq(&second) + 1);
    assert!(
        client
            .finish(Duration::from_secs(10))
            .is_some_and(|s| s.success())
    );
}

/// The calls `first` (kb_list, answered) and `second` (kb_get, refused) opened on the page: the
/// list has neither arguments nor answers; a call opened has both.
fn opens_whole(addr: SocketAddr, first: &Value, second: &Value) {
    // The list has neither arguments nor answers; a call opened has both: the arguments
    // sanitised as the call log's (long text cut), the rows, the failure with its code.
    assert_eq!(first.get("arguments"), None, "{first}");
    let opened = |c: &Value| -> Value {
        let (status, _, body) = get(addr, &format!("/ui/calls/{}", c["seq"]), &[]);
        assert_eq!(status, 200, "{body}");
        serde_json::from_str(&body).expect("the call as JSON")
    };
    assert_eq!(first["answered"], json!(true), "{first}");
    let ok_opened = opened(first);
    assert_eq!(ok_opened["arguments"], json!({"limit": 2, "role": "dev"}));
    assert!(ok_opened["response"]["entries"].is_array(), "{ok_opened}");
    // With the statements it ran while the page watched: the spec's name for each, its first
    // word and its duration, never its text.
    let ran = ok_opened["statements"]["kept"]
        .as_array()
        .expect("the statements");
    assert_eq!(ran.len(), 1, "{ok_opened}");
    assert_eq!(ran[0]["name"], "kb_list", "{ok_opened}");
    assert_eq!(ran[0]["operation"], "SELECT", "{ok_opened}");
    assert!(ran[0]["duration_ms"].as_f64().is_some(), "{ok_opened}");
    assert_eq!(ran[0].get("failed"), None, "{ok_opened}");
    assert_eq!(ran[0].get("text"), None, "{ok_opened}");
    assert_eq!(ok_opened["statements"]["more"], 0, "{ok_opened}");
    let failed = opened(second);
    let note = failed["arguments"]["note"].as_str().expect("the note, cut");
    assert!(note.len() < 1000 && note.starts_with("xxxx"), "{note}");
    assert_eq!(failed["response"]["isError"], json!(true), "{failed}");
    assert_eq!(failed["response"]["code"], "VALIDATION_ERROR", "{failed}");
    // Refused before any statement ran.
    assert_eq!(failed["statements"]["kept"], json!([]), "{failed}");
    assert_eq!(get(addr, "/ui/calls/999999", &[]).0, 404);
}

/// Without `--ui-history` the workbench keeps nothing while no page is open: a page shows the
/// calls made since one was, and is told so first (`event: keeping`); the client the session
/// named is still known. With it, the last calls whenever made, the session's start first.
#[test]
fn calls_made_while_no_page_is_open_are_kept_with_ui_history_only() {
    let db = sample_db("knowledge");
    for history in [false, true] {
        let mut command = Command::new(exe_for("knowledge"));
        command
            .args(["serve", "knowledge", "--ui", "127.0.0.1:0", "--db"])
            .arg(&db.path)
            .env("MCPSPEC_LOG", "warn");
        if history {
            command.arg("--ui-history");
        }
        let (mut client, addr, _stderr) = served_by(command);
        let before = client.call_tool("kb_get", json!({"id": "nope"})).unwrap();
        assert_eq!(before["result"]["isError"], json!(true), "{before}");
        let mut page = stream(addr);
        assert_eq!(
            page.next(),
            Some(("keeping".to_string(), json!({ "history": history })))
        );
        let during = client.call_tool("kb_list", json!({"limit": 1})).unwrap();
        assert_eq!(during["result"]["isError"], json!(false), "{during}");
        // Read on the page until what must be kept has come: the call, and with --ui-history
        // the session's start, which rmcp tells of once it has handled the client's
        // `notifications/initialized` (no answer says when).
        let (mut call_seen, mut start_seen) = (false, !history);
        while !(call_seen && start_seen) {
            let (_, record) = page.next().expect("the page's next record");
            call_seen |= record["tool"] == "kb_list";
            start_seen |= record["method"] == "initialize";
        }
        let (_, _, body) = get(addr, "/ui/calls", &[]);
        let all: Vec<Value> = serde_json::from_str(&body).expect("the calls as JSON");
        let seen = |method: &str| -> Vec<(&str, &str)> {
            all.iter()
                .filter(|c| c["method"] == method)
                .map(|c| {
                    let text = |k: &str| c[k].as_str().unwrap_or("(none)");
                    (text("tool"), text("client"))
                })
                .collect()
        };
        let calls = match history {
            true => vec![("kb_get", "mcpspec-client"), ("kb_list", "mcpspec-client")],
            false => vec![("kb_list", "mcpspec-client")],
        };
        assert_eq!(seen("tools/call"), calls, "--ui-history: {history}\n{body}");
        // The session's start is kept with --ui-history. Without it, it may be kept too: rmcp
        // tells of it once it has handled the client's `notifications/initialized`, which has
        // no answer to wait for and may come after the page opened.
        let started = seen("initialize");
        assert!(
            started == [("", "mcpspec-client")] || (!history && started.is_empty()),
            "--ui-history: {history}\n{body}"
        );
        assert!(
            all.iter()
                .all(|c| c["method"] == "tools/call" || c["method"] == "initialize"),
            "{body}"
        );
        drop(page);
        assert!(client.finish(WAIT).is_some_and(|s| s.success()));
    }
}

/// A stdio client of protocol 2026-07-28 sends no `initialize`: each request names the client
/// in its own `_meta`, and the workbench shows its calls and requests with that name, the
/// first (which rmcp answers, choosing the session's lifecycle) and the next (which the lane
/// answers) alike.
#[test]
fn a_per_request_stdio_clients_calls_are_shown_with_its_name() {
    let db = sample_db("knowledge");
    let mut command = Command::new(exe_for("knowledge"));
    command
        .args(["serve", "knowledge", "--ui", "127.0.0.1:0", "--db"])
        .arg(&db.path)
        .env("MCPSPEC_LOG", "warn");
    let (mut client, addr, _stderr) = started(command);
    // A page is open before the first request: its calls are kept.
    let _page = stream(addr);
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": mcpspec_testkit::PER_REQUEST_VERSION,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "per-request-client", "version": "1.0.0"},
    });
    for limit in [1, 2] {
        let answer = client
            .request(
                "tools/call",
                json!({"name": "kb_list", "arguments": {"limit": limit}, "_meta": meta}),
            )
            .expect("a call");
        assert_eq!(answer["result"]["isError"], json!(false), "{answer}");
    }
    let answer = client
        .request("tools/list", json!({"_meta": meta}))
        .expect("the tools");
    assert!(answer["result"]["tools"].is_array(), "{answer}");
    let (_, _, body) = get(addr, "/ui/calls", &[]);
    let all: Vec<Value> = serde_json::from_str(&body).expect("the calls as JSON");
    let seen: Vec<(&str, &str)> = all
        .iter()
        .map(|c| {
            (
                c["method"].as_str().unwrap(),
                c["client"].as_str().unwrap_or("(none)"),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("tools/call", "per-request-client"),
            ("tools/call", "per-request-client"),
            ("tools/list", "per-request-client"),
        ],
        "{body}"
    );
    drop(client);
}

#[test]
fn the_workbench_answers_only_its_own_page_at_its_own_address() {
    let db = sample_db("knowledge");
    let (client, addr, _stderr) = served(&db.path);
    // The page: its own files only, under a CSP that allows nothing else and no inline script.
    let (status, headers, _) = get(addr, "/", &[]);
    assert_eq!((status, header(&headers, "location")), (303, Some("/ui/")));
    let (status, headers, page) = get(addr, "/ui/", &[]);
    assert_eq!(status, 200);
    let csp = header(&headers, "content-security-policy").expect("a CSP");
    assert!(
        csp.contains("default-src 'none'") && csp.contains("script-src 'self'"),
        "{csp}"
    );
    assert!(!csp.contains("unsafe-inline"), "{csp}");
    assert_eq!(header(&headers, "x-content-type-options"), Some("nosniff"));
    for tag in page.split("<script").skip(1) {
        assert!(
            tag.trim_start().starts_with("src="),
            "an inline script: <script{tag}"
        );
    }
    let handler = regex::Regex::new(r"\son[a-z]+\s*=").unwrap();
    assert!(
        !page.contains(" style=") && !handler.is_match(&page),
        "an inline style or event handler"
    );
    assert!(
        page.len() + get(addr, "/ui/page.js", &[]).2.len() + get(addr, "/ui/page.css", &[]).2.len()
            < 150_000
    );
    let (status, headers, _) = get(addr, "/ui/page.js", &[]);
    assert_eq!(
        (status, header(&headers, "content-type")),
        (200, Some("text/javascript; charset=utf-8"))
    );

    // Another Host (a DNS-rebound name) or another site's Origin: refused.
    let port = addr.port();
    let evil_host = format!("evil.example:{port}");
    for path in ["/ui/calls", "/ui/", "/ui/page.js", "/mcp"] {
        assert_eq!(get(addr, path, &[("Host", &evil_host)]).0, 403, "{path}");
        assert_eq!(
            get(addr, path, &[("Origin", "http://evil.example")]).0,
            403,
            "{path}"
        );
    }
    let own = format!("http://{addr}");
    assert_eq!(get(addr, "/ui/calls", &[("Origin", &own)]).0, 200);
    let localhost = format!("localhost:{port}");
    assert_eq!(get(addr, "/ui/calls", &[("Host", &localhost)]).0, 200);
    assert_eq!(get(addr, "/ui/nothing", &[]).0, 404);
    assert_eq!(get(addr, "/nothing", &[]).0, 404);
    drop(client);
}

#[test]
fn the_workbench_listens_on_this_machine_only() {
    let db = sample_db("knowledge");
    let db = db.path.display().to_string();
    let (code, _, err) = mcpspec(
        &[
            "serve",
            "--spec",
            "../spec/knowledge.yaml",
            "--db",
            &db,
            "--ui",
            "0.0.0.0:0",
        ],
        &[],
    );
    assert_eq!(code, 2, "{err}");
    // Refused before the database is opened.
    assert!(!err.contains("ready"), "{err}");
    assert!(
        err.contains("--ui 0.0.0.0:0 is not a loopback address"),
        "{err}"
    );

    // Nor beside a server whose callers a token guards: the page would show their calls to
    // anyone on this machine.
    let (code, _, err) = mcpspec(
        &[
            "serve",
            "--spec",
            "../spec/knowledge.yaml",
            "--db",
            &db,
            "--http",
            "127.0.0.1:0",
            "--ui",
            "127.0.0.1:0",
        ],
        &[(
            "MCPSPEC_HTTP_TOKEN",
            "a-token-of-at-least-32-characters-long",
        )],
    );
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("beside a server that a token or OAuth guards"),
        "{err}"
    );
    assert!(
        err.contains("give --ui without an address to serve the workbench at /ui/"),
        "{err}"
    );
    assert!(!err.contains("ready"), "{err}");

    // Beside stdio it needs an address of its own.
    let (code, _, err) = mcpspec(
        &[
            "serve",
            "--spec",
            "../spec/knowledge.yaml",
            "--db",
            &db,
            "--ui",
        ],
        &[],
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--ui needs an address beside stdio"), "{err}");

    // `--ui-history` keeps calls for a workbench: without one, `serve` and `dev` say so.
    for command in [
        &["serve", "--spec", "../spec/knowledge.yaml", "--db", &db][..],
        &["dev", "../spec/knowledge.yaml", "--db", &db][..],
    ] {
        let (code, _, err) = mcpspec(&[command, &["--ui-history"]].concat(), &[]);
        assert_eq!(code, 2, "{err}");
        // clap's own words: `--ui [<ADDR>]` (serve) or `--ui <ADDR>` (dev) is required.
        assert!(
            err.contains("required arguments were not provided") && err.contains("  --ui "),
            "{err}"
        );
        assert!(!err.contains("ready"), "{err}");
    }
}

/// Beside Streamable HTTP the workbench shows the HTTP clients' calls, in both eras.
#[test]
fn the_workbench_shows_http_clients_calls_too() {
    let db = sample_db("knowledge");
    let mut child = Command::new(exe_for("knowledge"))
        .args([
            "serve",
            "knowledge",
            "--http",
            "127.0.0.1:0",
            "--ui",
            "127.0.0.1:0",
            "--db",
        ])
        .arg(&db.path)
        .env("MCPSPEC_LOG", "warn")
        .env_remove("MCPSPEC_HTTP_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let stderr = child.stderr.take().expect("piped stderr");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    // Killed on drop, should the test fail before its end.
    let mut server = crate::http::HttpServer {
        child,
        addr: SocketAddr::from(([127, 0, 0, 1], 0)),
        stderr: rx,
    };
    let mut ui = None::<SocketAddr>;
    while server.addr.port() == 0 || ui.is_none() {
        let line = server
            .stderr
            .recv_timeout(WAIT)
            .expect("the server announces both addresses");
        if let Some(a) = line.strip_prefix("mcpspec: workbench on http://") {
            ui = a.trim_end_matches('/').parse().ok();
        } else if let Some(a) = line.strip_prefix("mcpspec: listening on http://") {
            server.addr = a.trim_end_matches("/mcp").parse().expect("an address");
        }
    }
    let (mcp, ui) = (server.addr, ui.unwrap());
    // A page is open before the clients come: their calls are kept.
    let _page = stream(ui);
    let mut session = mcpspec_testkit::HttpClient::new(mcp, None);
    session.initialize().expect("initialize");
    let call = json!({"name": "kb_list", "arguments": {"limit": 1}});
    let answer = session.request("tools/call", call.clone()).expect("call");
    assert_eq!(answer["result"]["isError"], json!(false), "{answer}");
    // Requests of 2026-07-28, without a session: one naming its client in its `_meta`, one
    // naming none.
    let mut per_request = mcpspec_testkit::HttpClient::per_request(mcp, None);
    for client in [
        json!({"name": "another-client", "version": "1.0.0"}),
        Value::Null,
    ] {
        let mut call = call.clone();
        call["_meta"] = json!({ "io.modelcontextprotocol/clientInfo": client });
        let answer = per_request.request("tools/call", call).expect("call");
        assert_eq!(answer["result"]["isError"], json!(false), "{answer}");
    }
    let (_, _, body) = get(ui, "/ui/calls", &[]);
    let calls = tool_calls(&body);
    let seen: Vec<(&str, &str)> = calls
        .iter()
        .map(|c| (c["tool"].as_str().unwrap(), c["outcome"].as_str().unwrap()))
        .collect();
    assert_eq!(
        seen,
        [("kb_list", "ok"), ("kb_list", "ok"), ("kb_list", "ok")]
    );
    // The session's call is shown with the client its session named; a request without a
    // session (2026-07-28) with the client it names itself, and never with another's.
    assert_eq!(calls[0]["client"], "mcpspec-client", "{body}");
    assert_eq!(calls[1]["client"], "another-client", "{body}");
    assert_eq!(calls[2]["client"], Value::Null, "{body}");
    assert!(server.terminate().success());
}

/// The page's calls go through the workbench's own `/mcp`, the server's protocol path: the
/// tools listed with their schemas, a call answered as any client's, a bad argument answered
/// with the server's own message naming the field, and both calls live beside the stdio
/// client's.
#[test]
fn the_workbench_tries_tools_through_the_servers_own_endpoint() {
    let db = sample_db("knowledge");
    let (mut client, addr, _stderr) = served(&db.path);
    let mut live = events(addr);
    client
        .call_tool("kb_list", json!({"limit": 1}))
        .expect("the stdio client's call");
    let mut page = mcpspec_testkit::HttpClient::new(addr, None);
    let init = page.initialize().expect("initialize at the workbench");
    assert_eq!(init["result"]["serverInfo"]["name"], "knowledge", "{init}");
    let listed = page.request("tools/list", json!({})).expect("tools/list");
    let tools = listed["result"]["tools"].as_array().expect("tools");
    let kb_list = tools
        .iter()
        .find(|t| t["name"] == "kb_list")
        .expect("kb_list is listed");
    assert_eq!(kb_list["inputSchema"]["type"], "object", "{kb_list}");
    let ok = page
        .call_tool("kb_list", json!({"limit": 2}))
        .expect("a call from the page");
    assert_eq!(ok["result"]["isError"], json!(false), "{ok}");
    let bad = page
        .call_tool("kb_list", json!({"limit": "many"}))
        .expect("a bad argument");
    assert_eq!(bad["result"]["isError"], json!(true), "{bad}");
    let text = bad["result"]["content"][0]["text"].as_str().expect("text");
    let failure: Value = serde_json::from_str(text).expect("the error as JSON");
    assert_eq!(failure["error"]["field"], "limit", "{failure}");
    let (_, _, body) = get(addr, "/ui/calls", &[]);
    let all: Vec<Value> = serde_json::from_str(&body).unwrap();
    assert!(
        all.iter().any(|c| c["method"] == "tools/list"
            && c["client"] == "mcpspec-client"
            && c["outcome"] == "ok"),
        "{all:?}"
    );
    let seen: Vec<(String, String)> = live
        .by_ref()
        .take(3)
        .map(|c| (c["tool"].to_string(), c["outcome"].to_string()))
        .collect();
    assert_eq!(
        seen,
        [
            ("\"kb_list\"".into(), "\"ok\"".into()),
            ("\"kb_list\"".into(), "\"ok\"".into()),
            (
                "\"kb_list\"".into(),
                format!("{}", failure["error"]["code"])
            ),
        ]
    );
    drop(client);
}

/// A POST under `/ui/` with the workbench's header, through `client` (its token, if any).
fn run_examples(client: &mut mcpspec_testkit::HttpClient, path: &str) -> (u16, Value) {
    let r = client
        .exchange_to(path, "POST", &[("Mcpspec-Workbench", "1")], b"")
        .expect("POST");
    (
        r.status,
        serde_json::from_slice(&r.body).unwrap_or(Value::Null),
    )
}

/// The examples: listed with where each is and whether it runs here (on the application's own
/// database, not those that expect the sample rows), run only with the workbench's header,
/// passing, and rolled back: the database has the rows it had.
#[test]
fn the_workbench_runs_the_examples_with_every_write_rolled_back() {
    let db = sample_db("knowledge");
    let before = crate::common::count_rows(&db.path, "knowledge_entries");
    let (client, addr, _stderr) = served(&db.path);
    let (status, _, body) = get(addr, "/ui/examples", &[]);
    assert_eq!(status, 200);
    let listed: Value = serde_json::from_str(&body).unwrap();
    let examples = listed["examples"].as_array().expect("examples");
    assert!(examples.len() >= 5, "{listed}");
    assert!(
        examples.iter().all(|e| e["at"]
            .as_str()
            .is_some_and(|at| at.contains("knowledge.yaml:"))),
        "{listed}"
    );
    let runs = examples.iter().filter(|e| e["runs"] == json!(true)).count();
    assert!(runs > 0, "{listed}");
    let mut page = mcpspec_testkit::HttpClient::new(addr, None);
    // Without the header (a form of another site could send the rest): refused.
    let r = page
        .exchange_to("/ui/examples", "POST", &[], b"")
        .expect("POST");
    assert_eq!(r.status, 403);
    let (status, ran) = run_examples(&mut page, "/ui/examples");
    assert_eq!(status, 200, "{ran}");
    let ran = ran["ran"].as_array().expect("ran").clone();
    assert_eq!(ran.len(), runs);
    for r in &ran {
        assert_eq!(r["passed"], json!(true), "{r}");
    }
    // One by its number; one that cannot run here says why.
    let first = ran[0]["n"].as_u64().unwrap();
    let (status, one) = run_examples(&mut page, &format!("/ui/examples/{first}"));
    assert_eq!(
        (status, one["ran"][0]["passed"].clone()),
        (200, json!(true))
    );
    if let Some(skipped) = examples.iter().find(|e| e["runs"] == json!(false)) {
        let n = skipped["n"].as_u64().unwrap();
        let (status, why) = run_examples(&mut page, &format!("/ui/examples/{n}"));
        assert_eq!(status, 409, "{why}");
        assert!(
            why["error"]
                .as_str()
                .is_some_and(|w| w.contains("sample rows")),
            "{why}"
        );
    }
    assert_eq!(run_examples(&mut page, "/ui/examples/9999").0, 409);
    drop(client);
    assert_eq!(
        crate::common::count_rows(&db.path, "knowledge_entries"),
        before
    );
}

/// `serve --http ADDR --ui` serves the workbench at `/ui/` on the MCP listener, behind its
/// token: the page loads without one (so that it can ask), its data and the examples need it.
#[test]
fn the_workbench_on_a_guarded_listener_asks_for_the_token() {
    const TOKEN: &str = "a-token-of-at-least-32-characters-long";
    let db = sample_db("knowledge");
    // The calls kept while no page is open too, so that the operator's call below is listed.
    let server = crate::http::HttpServer::start(
        &db.path,
        &["--ui", "--ui-history"],
        &[("MCPSPEC_HTTP_TOKEN", TOKEN)],
    );
    let (addr, said) = (server.addr, &server.stderr);
    let announced = loop {
        let line = said
            .recv_timeout(WAIT)
            .expect("the workbench's address is said");
        if line.starts_with("mcpspec: workbench on") {
            break line;
        }
    };
    assert_eq!(
        announced,
        format!("mcpspec: workbench on http://{addr}/ui/")
    );
    assert_eq!(get(addr, "/ui/", &[]).0, 200);
    assert_eq!(get(addr, "/ui/page.js", &[]).0, 200);
    for path in ["/ui/calls", "/ui/examples", "/ui/events"] {
        assert_eq!(get(addr, path, &[]).0, 401, "{path}");
        let bearer = format!("Bearer {TOKEN}");
        if path != "/ui/events" {
            assert_eq!(
                get(addr, path, &[("Authorization", &bearer)]).0,
                200,
                "{path}"
            );
        }
    }
    let mut anonymous = mcpspec_testkit::HttpClient::new(addr, None);
    assert_eq!(run_examples(&mut anonymous, "/ui/examples").0, 401);
    let mut operator = mcpspec_testkit::HttpClient::new(addr, Some(TOKEN));
    operator.initialize().expect("initialize");
    operator
        .call_tool("kb_list", json!({"limit": 1}))
        .expect("a call");
    let calls = operator
        .exchange_to("/ui/calls", "GET", &[], b"")
        .expect("the calls");
    let calls = tool_calls(&calls.text());
    assert_eq!(calls.len(), 1);
    let (status, ran) = run_examples(&mut operator, "/ui/examples");
    assert_eq!(status, 200, "{ran}");
    drop(server);
}

/// On a server served `--read-only`, the examples whose tool writes are not run, even rolled
/// back: the database is left alone as asked; the reads still run and pass.
#[test]
fn a_read_only_server_runs_only_the_examples_that_read() {
    let db = sample_db("knowledge");
    let mut command = Command::new(exe_for("knowledge"));
    command
        .args([
            "serve",
            "knowledge",
            "--read-only",
            "--ui",
            "127.0.0.1:0",
            "--db",
        ])
        .arg(&db.path)
        .env("MCPSPEC_LOG", "warn");
    let (_client, addr, _stderr) = served_by(command);
    let (_, _, body) = get(addr, "/ui/examples", &[]);
    let listed: Value = serde_json::from_str(&body).unwrap();
    let examples = listed["examples"].as_array().expect("examples");
    let add = examples
        .iter()
        .find(|e| e["tool"] == "kb_add")
        .expect("kb_add's example");
    assert_eq!(add["runs"], json!(false), "{add}");
    assert!(
        add["why_not"]
            .as_str()
            .is_some_and(|w| w.contains("read-only")),
        "{add}"
    );
    let mut page = mcpspec_testkit::HttpClient::new(addr, None);
    let (status, ran) = run_examples(&mut page, "/ui/examples");
    assert_eq!(status, 200, "{ran}");
    let ran = ran["ran"].as_array().expect("ran");
    assert!(
        !ran.is_empty()
            && ran
                .iter()
                .all(|r| r["passed"] == json!(true) && r["tool"] != "kb_add"),
        "{ran:?}"
    );
}

/// The examples run on PostgreSQL and MariaDB as on SQLite, through each engine's rehearsal:
/// every one that runs there passes, and every write is rolled back.
#[cfg(feature = "full")]
#[test]
fn the_workbench_runs_the_examples_on_postgresql_and_mariadb() {
    use crate::common::{Engine, sample_db_on, sql_on};
    for engine in [Engine::Postgres, Engine::Mariadb] {
        let db = sample_db_on(engine, "knowledge");
        let count = || sql_on(engine, &db.path, "SELECT count(*) FROM knowledge_entries");
        let before = count();
        let (client, addr, _stderr) = served(&db.path);
        let (_, _, body) = get(addr, "/ui/examples", &[]);
        let listed: Value = serde_json::from_str(&body).expect("the examples");
        let runs = listed["examples"]
            .as_array()
            .expect("examples")
            .iter()
            .filter(|e| e["runs"] == json!(true))
            .count();
        assert!(runs > 0, "{engine:?}: {listed}");
        let mut page = mcpspec_testkit::HttpClient::new(addr, None);
        let (status, ran) = run_examples(&mut page, "/ui/examples");
        assert_eq!(status, 200, "{engine:?}: {ran}");
        let ran = ran["ran"].as_array().expect("ran");
        assert_eq!(ran.len(), runs, "{engine:?}: {ran:?}");
        assert!(
            ran.iter().any(|r| r["tool"] == "kb_add"),
            "{engine:?}: a writing example ran: {ran:?}"
        );
        for r in ran {
            assert_eq!(r["passed"], json!(true), "{engine:?}: {r}");
        }
        drop(client);
        assert_eq!(count(), before, "{engine:?}: a write was kept");
    }
}
