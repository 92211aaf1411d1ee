//! The workbench (#60, its first part): `serve --ui ADDR` beside a stdio session shows every
//! call the stdio client makes (beside Streamable HTTP, the HTTP clients' in both eras), live
//! over Server-Sent Events and in `GET /calls`, with the arguments sanitised as the call log's;
//! keeps the last 1,000 calls; answers only its own address and page; serves its page under a
//! CSP with no inline script; and refuses a non-loopback address. (The page in a real browser,
//! trying tools and examples are to come.)

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
fn served(db: &std::path::Path) -> (StdioClient, SocketAddr, Receiver<String>) {
    let mut command = Command::new(exe_for("knowledge"));
    command
        .args(["serve", "knowledge", "--ui", "127.0.0.1:0", "--db"])
        .arg(db)
        .env("MCPSPEC_LOG", "warn")
        .stderr(Stdio::piped());
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
    client.initialize().expect("initialize");
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
    (status, headers, body)
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

/// The event stream, open: each call as it is read.
fn events(addr: SocketAddr) -> impl Iterator<Item = Value> {
    let mut conn = TcpStream::connect(addr).expect("connect");
    conn.set_read_timeout(Some(WAIT)).unwrap();
    write!(
        conn,
        "GET /events HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\n\r\n"
    )
    .unwrap();
    let mut reader = BufReader::new(conn);
    let (status, headers) = head(&mut reader);
    assert_eq!(status, 200);
    assert_eq!(header(&headers, "content-type"), Some("text/event-stream"));
    reader
        .lines()
        .map(|l| l.expect("an event within the wait"))
        .filter_map(|l| {
            l.strip_prefix("data: ")
                .map(|d| serde_json::from_str(d).expect("JSON"))
        })
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
    assert_eq!(first["method"], "tools/call");
    assert_eq!(first["outcome"], "ok");
    assert_eq!(first["arguments"], json!({"limit": 2, "role": "dev"}));
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
    // Long text is cut as the call log cuts it.
    let note = second["arguments"]["note"].as_str().expect("the note, cut");
    assert!(note.len() < 1000 && note.starts_with("xxxx"), "{note}");
    assert!(second["seq"].as_u64() > first["seq"].as_u64());

    // The same calls in /calls, and on a stream opened later (the ring first).
    let (status, _, body) = get(addr, "/calls", &[]);
    assert_eq!(status, 200);
    let calls: Vec<Value> = serde_json::from_str(&body).unwrap();
    assert_eq!(calls, [first.clone(), second.clone()]);
    let mut later = events(addr);
    assert_eq!(later.next().as_ref(), Some(&first));
    assert_eq!(later.next().as_ref(), Some(&second));

    // The last 1,000 calls are kept, not more.
    for i in 0..1000 {
        client
            .call_tool("kb_list", json!({"limit": 1 + i % 5}))
            .unwrap();
    }
    let (_, _, body) = get(addr, "/calls", &[]);
    let calls: Vec<Value> = serde_json::from_str(&body).unwrap();
    assert_eq!(calls.len(), 1000);
    assert_eq!(calls[0]["seq"], json!(3));
    assert_eq!(calls[999]["seq"], json!(1002));
    assert!(
        client
            .finish(Duration::from_secs(10))
            .is_some_and(|s| s.success())
    );
}

#[test]
fn the_workbench_answers_only_its_own_page_at_its_own_address() {
    let db = sample_db("knowledge");
    let (client, addr, _stderr) = served(&db.path);
    // The page: its own files only, under a CSP that allows nothing else and no inline script.
    let (status, headers, page) = get(addr, "/", &[]);
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
        page.len() + get(addr, "/page.js", &[]).2.len() + get(addr, "/page.css", &[]).2.len()
            < 150_000
    );
    let (status, headers, _) = get(addr, "/page.js", &[]);
    assert_eq!(
        (status, header(&headers, "content-type")),
        (200, Some("text/javascript; charset=utf-8"))
    );

    // Another Host (a DNS-rebound name) or another site's Origin: refused.
    let port = addr.port();
    let evil_host = format!("evil.example:{port}");
    assert_eq!(get(addr, "/calls", &[("Host", &evil_host)]).0, 403);
    assert_eq!(
        get(addr, "/calls", &[("Origin", "http://evil.example")]).0,
        403
    );
    let own = format!("http://{addr}");
    assert_eq!(get(addr, "/calls", &[("Origin", &own)]).0, 200);
    let localhost = format!("localhost:{port}");
    assert_eq!(get(addr, "/calls", &[("Host", &localhost)]).0, 200);
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
    assert!(!err.contains("ready"), "{err}");
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
    let mut lines = BufReader::new(stderr).lines().map_while(Result::ok);
    let (mut mcp, mut ui) = (None::<SocketAddr>, None::<SocketAddr>);
    while mcp.is_none() || ui.is_none() {
        let line = lines.next().expect("the server announces both addresses");
        if let Some(a) = line.strip_prefix("mcpspec: workbench on http://") {
            ui = a.trim_end_matches('/').parse().ok();
        } else if let Some(a) = line.strip_prefix("mcpspec: listening on http://") {
            mcp = a.trim_end_matches("/mcp").parse().ok();
        }
    }
    let (mcp, ui) = (mcp.unwrap(), ui.unwrap());
    let mut session = mcpspec_testkit::HttpClient::new(mcp, None);
    session.initialize().expect("initialize");
    let call = json!({"name": "kb_list", "arguments": {"limit": 1}});
    let answer = session.request("tools/call", call.clone()).expect("call");
    assert_eq!(answer["result"]["isError"], json!(false), "{answer}");
    let mut per_request = mcpspec_testkit::HttpClient::per_request(mcp, None);
    let answer = per_request.request("tools/call", call).expect("call");
    assert_eq!(answer["result"]["isError"], json!(false), "{answer}");
    let (_, _, body) = get(ui, "/calls", &[]);
    let calls: Vec<Value> = serde_json::from_str(&body).unwrap();
    let seen: Vec<(&str, &str)> = calls
        .iter()
        .map(|c| (c["tool"].as_str().unwrap(), c["outcome"].as_str().unwrap()))
        .collect();
    assert_eq!(seen, [("kb_list", "ok"), ("kb_list", "ok")]);
    let _ = child.kill();
    let _ = child.wait();
}
