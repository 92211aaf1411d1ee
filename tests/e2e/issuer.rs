//! OAuth against an issuer that misbehaves, and against many callers at once: what the server
//! keeps of them is bounded. A hostile issuer of the harness's own (a thread on 127.0.0.1,
//! answering HTTP/1.1 as an authorization server would) publishes metadata and keys, then
//! streams key sets and introspection answers of hundreds of megabytes, and answers with
//! times of the wrong type or past any clock: the server refuses the tokens, stays within its
//! memory and answers on. The real provider (`oidc-provider`) signs thousands of tokens with
//! large claim sets: the server keeps only what it reads of them.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use mcpspec_testkit::HttpClient;
use serde_json::{Value, json};

use crate::common::rss_kib;

use crate::http::HttpServer;

/// The audience the servers here take tokens for.
const AUDIENCE: &str = "https://hostile.example/mcp";

/// A hostile issuer on 127.0.0.1 (see the module comment); its address.
fn hostile_issuer() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    let jwks_fetches = Arc::new(AtomicUsize::new(0));
    std::thread::spawn(move || {
        for conn in listener.incoming().map_while(Result::ok) {
            let fetches = jwks_fetches.clone();
            std::thread::spawn(move || answer(conn, addr, &fetches));
        }
    });
    addr
}

/// Reads one request of `conn` and answers it as the hostile issuer at `addr`.
fn answer(conn: TcpStream, addr: SocketAddr, jwks_fetches: &AtomicUsize) {
    let mut reader = BufReader::new(conn);
    let mut line = String::new();
    if reader.read_line(&mut line).is_err() {
        return;
    }
    let path = line
        .split_whitespace()
        .nth(1)
        .unwrap_or_default()
        .to_string();
    let mut length = 0;
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header).is_err() || header.trim().is_empty() {
            break;
        }
        if let Some(v) = header.to_ascii_lowercase().strip_prefix("content-length:") {
            length = v.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0; length];
    let _ = reader.read_exact(&mut body);
    let body = String::from_utf8_lossy(&body).to_string();
    let mut conn = reader.into_inner();
    let issuer = format!("http://{addr}");
    match path.as_str() {
        "/.well-known/oauth-authorization-server" => json_answer(
            &mut conn,
            &json!({"issuer": issuer, "jwks_uri": format!("{issuer}/jwks"),
                "introspection_endpoint": format!("{issuer}/introspect")}),
        ),
        "/jwks" if jwks_fetches.fetch_add(1, Ordering::SeqCst) == 0 => {
            json_answer(&mut conn, &json!({"keys": []}));
        }
        "/jwks" => endless(&mut conn, 400 << 20),
        "/introspect" => introspection(&mut conn, &body),
        _ => {
            let _ = conn.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n");
        }
    }
}

/// The hostile answer to the introspection of the token the form `body` names.
fn introspection(conn: &mut TcpStream, body: &str) {
    let token = body
        .split('&')
        .find_map(|kv| kv.strip_prefix("token="))
        .unwrap_or_default();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("time")
        .as_secs();
    let active = |extra: Value| {
        let mut a = json!({"active": true, "aud": AUDIENCE, "sub": token,
            "scope": "notes:read notes:write"});
        for (k, v) in extra.as_object().expect("an object") {
            a[k] = v.clone();
        }
        a
    };
    match token {
        "huge" => endless(conn, 300 << 20),
        "maxexp" => json_answer(conn, &active(json!({"exp": u64::MAX}))),
        "floatexp" => json_answer(conn, &active(json!({"exp": 1.5}))),
        "stringexp" => json_answer(conn, &active(json!({"exp": "1"}))),
        "notyet" => json_answer(conn, &active(json!({"nbf": now + 3600}))),
        _ => json_answer(conn, &json!({"active": false})),
    }
}

fn json_answer(conn: &mut TcpStream, v: &Value) {
    let body = v.to_string();
    let _ = write!(
        conn,
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
}

/// A JSON answer of `size` bytes without a length, sent as fast as the client reads it.
fn endless(conn: &mut TcpStream, size: usize) {
    let _ = conn.write_all(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n{\"keys\": [",
    );
    let chunk = vec![b' '; 1 << 16];
    let mut sent = 0;
    while sent < size && conn.write_all(&chunk).is_ok() {
        sent += chunk.len();
    }
}

/// A `tools/call list_notes` of protocol 2026-07-28 with `token`: its HTTP status and body.
fn list_with(addr: SocketAddr, token: &str) -> (u16, String) {
    let r = HttpClient::per_request(addr, Some(token))
        .post(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "list_notes", "arguments": {}}}))
        .expect("POST");
    (r.status, r.text())
}

/// A teamnotes database file made by `init`.
fn teamnotes_db(dir: &tempfile::TempDir) -> String {
    let db = dir.path().join("notes.db");
    let db = db.to_str().expect("utf-8").to_string();
    let (code, _, err) = crate::common::mcpspec(&["init", "teamnotes", "--db", &db], &[]);
    assert_eq!(code, 0, "{err}");
    db
}

/// An issuer streaming a key set of 400 MB and an introspection answer of 300 MB: each is
/// given up past its bound as it arrives (the token refused), and the server's memory stays
/// where it was; times of the wrong type refuse the token, a time past any clock is trusted
/// for the cache's bound only (no overflow), and a token not valid yet is refused.
#[test]
fn a_hostile_issuer_costs_no_memory_and_its_odd_answers_are_refused() {
    let issuer = hostile_issuer();
    let dir = tempfile::tempdir().expect("tempdir");
    let db = teamnotes_db(&dir);
    let server = HttpServer::serve(
        &[
            "teamnotes",
            "--db",
            &db,
            "--oauth-issuer",
            &format!("http://{issuer}"),
        ],
        &[
            ("MCPSPEC_OAUTH_AUDIENCE", AUDIENCE),
            ("MCPSPEC_OAUTH_CLIENT_ID", "mcpspec"),
            (
                "MCPSPEC_OAUTH_CLIENT_SECRET",
                "s3cret-of-the-resource-server",
            ),
            ("MCPSPEC_OAUTH_KEYS_MAX_AGE_SECS", "0"),
            ("MCPSPEC_OAUTH_REFETCH_SECS", "0"),
        ],
    );
    let pid = server.child.id();
    let before = rss_kib(pid);
    for _ in 0..3 {
        let (status, text) = list_with(server.addr, "huge");
        assert_eq!(status, 401, "{text}");
        assert!(text.contains("could not be checked"), "{text}");
        // A JWT makes the server fetch the (aged) key set again: 400 MB, given up.
        let jwt = "eyJhbGciOiJSUzI1NiIsImtpZCI6Im5ldyJ9.eyJzdWIiOiJ4In0.c2ln";
        let (status, text) = list_with(server.addr, jwt);
        assert_eq!(status, 401, "{text}");
    }
    let after = rss_kib(pid);
    assert!(
        after < before + 64 * 1024,
        "the server grew from {before} KiB to {after} KiB"
    );
    let (status, text) = list_with(server.addr, "maxexp");
    assert_eq!(
        status, 200,
        "an exp past any clock is trusted, bounded: {text}"
    );
    for token in ["floatexp", "stringexp"] {
        let (status, text) = list_with(server.addr, token);
        assert_eq!(status, 401, "{token}: {text}");
        assert!(
            text.contains("claim exp is not of its registered type"),
            "{text}"
        );
    }
    let (status, text) = list_with(server.addr, "notyet");
    assert_eq!(status, 401, "{text}");
    assert!(text.contains("not valid yet"), "{text}");
    let (status, text) = list_with(server.addr, "maxexp");
    assert_eq!(status, 200, "the server answers on: {text}");
}

/// Many callers whose tokens carry large claim sets: the server keeps only the claims it reads
/// (teamnotes on SQLite reads none), so its memory grows by far less than the claims it was
/// sent (about 190 MB for 1,000 such tokens when every claim was kept).
#[cfg(feature = "full")]
#[test]
fn many_tokens_with_large_claims_cost_little_memory() {
    use crate::oidc::Provider;
    let provider = Provider::start(Vec::new());
    let dir = tempfile::tempdir().expect("tempdir");
    let db = teamnotes_db(&dir);
    let server = HttpServer::serve(
        &["teamnotes", "--db", &db, "--oauth-issuer", &provider.issuer],
        &[("MCPSPEC_OAUTH_AUDIENCE", AUDIENCE)],
    );
    let pid = server.child.id();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("time")
        .as_secs();
    // About 5 KB of claims in many small values (a directory's group ids), each a value of
    // its own once parsed.
    let groups = vec![7; 2400];
    let token = |i: usize| {
        let claims = json!({"sub": format!("user{i}"), "iss": provider.issuer,
            "aud": AUDIENCE, "exp": now + 600, "scope": "notes:read", "groups": groups});
        provider.forge(json!({"alg": "RS256", "kid": "rs256-1"}), claims, "current")
    };
    let (status, text) = list_with(server.addr, &token(0));
    assert_eq!(status, 200, "{text}");
    let before = rss_kib(pid);
    for i in 1..1000 {
        let (status, text) = list_with(server.addr, &token(i));
        assert_eq!(status, 200, "{text}");
    }
    let after = rss_kib(pid);
    assert!(
        after < before + 40 * 1024,
        "1,000 tokens grew the server from {before} KiB to {after} KiB"
    );
}

/// `/metrics` under OAuth answers a token with the server's scopes, and refuses one without
/// them (403 with the step-up challenge), as every `/mcp` request is.
#[cfg(feature = "full")]
#[test]
fn metrics_need_the_server_s_scopes() {
    use crate::oidc::{Client, Provider};
    let user = |id, scope| Client {
        id,
        scope,
        alg: "RS256",
        claims: json!({}),
    };
    let provider = Provider::start(vec![
        user("reader", "notes:read"),
        user("stranger", "other:scope"),
    ]);
    let dir = tempfile::tempdir().expect("tempdir");
    let db = teamnotes_db(&dir);
    let server = HttpServer::serve(
        &[
            "teamnotes",
            "--db",
            &db,
            "--oauth-issuer",
            &provider.issuer,
            "--metrics",
        ],
        &[("MCPSPEC_OAUTH_AUDIENCE", AUDIENCE)],
    );
    let ok = {
        let token = provider.token("reader", AUDIENCE);
        mcpspec_testkit::get_with_token(server.addr, "/metrics", Some(&token)).expect("GET")
    };
    assert_eq!(ok.status, 200, "{}", ok.text());
    let refused = {
        let token = provider.token("stranger", AUDIENCE);
        mcpspec_testkit::get_with_token(server.addr, "/metrics", Some(&token)).expect("GET")
    };
    assert_eq!(refused.status, 403, "{}", refused.text());
    assert!(
        refused
            .header("www-authenticate")
            .is_some_and(|c| c.contains("insufficient_scope") && c.contains("notes:read")),
        "{:?}",
        refused.header("www-authenticate")
    );
}
