//! `serve --http --oauth-issuer`: mcpspec as an OAuth 2.1 resource server in front of the
//! `teamnotes` example, against a real authorization server (`oidc-provider`, see `oidc`)
//! issuing JWT access tokens with client credentials and resource indicators. The protected
//! resource metadata and the challenges; tokens signed with RS256, ES256 and EdDSA; callers
//! kept apart by `:auth.sub` on SQLite and by row-level security on PostgreSQL; scopes (403
//! with a step-up challenge); key rotation; every hostile token refused with nothing run; no
//! token in the log, and an audit line per call naming the subject.

use std::net::SocketAddr;

use mcpspec_testkit::{HttpClient, HttpResponse};
use serde_json::{Value, json};

use crate::common::mcpspec;
use crate::http::HttpServer;
use crate::oidc::{Client, Provider};
use crate::on_every_engine;

/// The team: alice and bob write (RS256 and ES256), carol only reads (EdDSA), dave has no
/// scope of this server, mallory names a database role outside the allow-list.
fn team() -> Vec<Client> {
    let user = |id, scope, alg, role: &str| Client {
        id,
        scope,
        alg,
        claims: json!({"role": role, "team": "red"}),
    };
    vec![
        user("alice", "notes:read notes:write", "RS256", "notes_user"),
        user("bob", "notes:read notes:write", "ES256", "notes_user"),
        user("carol", "notes:read", "EdDSA", "notes_user"),
        user("dave", "other:scope", "RS256", "notes_user"),
        user("mallory", "notes:read notes:write", "RS256", "postgres"),
    ]
}

/// A teamnotes database made by `init` at `db` (a file or a URL).
fn init(db: &str) {
    let (code, _, err) = mcpspec(&["init", "teamnotes", "--db", db], &[]);
    assert_eq!(code, 0, "init teamnotes on {db}: {err}");
}

/// A teamnotes database file made by `init`, in a directory that lives as long as the result.
fn teamnotes_file() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("notes.db");
    let db = db.to_str().expect("utf-8").to_string();
    init(&db);
    (dir, db)
}

/// teamnotes on `db` over HTTP, accepting `provider`'s tokens; key sets are fetched again at
/// once when a token names an unknown key, so that rotation is seen on the first token.
fn serve(db: &str, provider: &Provider, extra: &[&str]) -> HttpServer {
    let mut args = vec!["teamnotes", "--db", db, "--oauth-issuer", &provider.issuer];
    args.extend_from_slice(extra);
    HttpServer::serve(
        &args,
        &[("MCPSPEC_LOG", "info"), ("MCPSPEC_OAUTH_REFETCH_SECS", "0")],
    )
}

/// The resource tokens must be for: the server's own endpoint.
fn resource(addr: SocketAddr) -> String {
    format!("http://{addr}/mcp")
}

/// A session of the caller `token` names.
fn session(addr: SocketAddr, token: &str) -> HttpClient {
    let mut c = HttpClient::new(addr, Some(token));
    let init = c.initialize().expect("initialize");
    assert!(init.get("result").is_some(), "initialize failed: {init}");
    c
}

/// The structured result of a successful call.
fn call(c: &mut HttpClient, tool: &str, arguments: Value) -> Value {
    let r = c.call_tool(tool, arguments).expect("tools/call");
    assert_eq!(r["result"]["isError"], json!(false), "{tool}: {r}");
    r["result"]["structuredContent"].clone()
}

/// The texts of the caller's notes.
fn notes(c: &mut HttpClient) -> Vec<String> {
    let list = call(c, "list_notes", json!({}));
    list["rows"]
        .as_array()
        .or_else(|| list.as_array())
        .unwrap_or_else(|| panic!("rows: {list}"))
        .iter()
        .map(|n| n["text"].as_str().expect("text").to_string())
        .collect()
}

/// A `tools/call add_note` of protocol 2026-07-28 (no session needed) with `authorization`
/// as the whole `Authorization` header, or none.
fn add_with(addr: SocketAddr, authorization: Option<&str>, text: &str) -> HttpResponse {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "add_note", "arguments": {"text": text}}});
    if let Some(token) = authorization.and_then(|a| a.strip_prefix("Bearer ")) {
        return HttpClient::per_request(addr, Some(token))
            .post(&body)
            .expect("POST");
    }
    let headers: Vec<(&str, &str)> = authorization
        .map(|a| vec![("Authorization", a)])
        .unwrap_or_default();
    HttpClient::new(addr, None)
        .exchange("POST", &headers, body.to_string().as_bytes())
        .expect("POST")
}

#[cfg(feature = "full")]
#[test]
fn the_metadata_and_the_challenges_point_clients_at_the_issuer() {
    let provider = Provider::start(team());
    let (_dir, db) = teamnotes_file();
    let db = db.as_str();
    let server = serve(db, &provider, &[]);
    let mut c = HttpClient::new(server.addr, None);
    let metadata_url = format!(
        "http://{}/.well-known/oauth-protected-resource/mcp",
        server.addr
    );
    for path in [
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-protected-resource",
    ] {
        let r = raw_get(server.addr, path);
        assert_eq!(r.0, 200, "{path}: {}", r.1);
        let m: Value = serde_json::from_str(&r.1).expect("JSON");
        assert_eq!(m["resource"], json!(resource(server.addr)), "{m}");
        assert_eq!(m["authorization_servers"], json!([provider.issuer]), "{m}");
        assert_eq!(m["scopes_supported"], json!(["notes:read", "notes:write"]));
        assert_eq!(m["bearer_methods_supported"], json!(["header"]));
    }
    // No token: 401 pointing at the metadata, without an error.
    let r = add_with(server.addr, None, "x");
    assert_eq!(r.status, 401, "{}", r.text());
    let challenge = r.header("www-authenticate").expect("a challenge");
    assert_eq!(
        challenge,
        format!("Bearer resource_metadata=\"{metadata_url}\"")
    );
    // A token that is not one: 401 with invalid_token.
    let r = add_with(server.addr, Some("Bearer not-a-jwt"), "x");
    assert_eq!(r.status, 401);
    let challenge = r.header("www-authenticate").expect("a challenge");
    assert!(
        challenge.starts_with(&format!("Bearer resource_metadata=\"{metadata_url}\""))
            && challenge.contains("error=\"invalid_token\""),
        "{challenge}"
    );
    // A token in the URL is refused before it is read.
    let token = provider.token("alice", &resource(server.addr));
    let r = c
        .exchange_to(&format!("/mcp?access_token={token}"), "POST", &[], b"{}")
        .expect("POST");
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(
        r.text().contains("Authorization header only"),
        "{}",
        r.text()
    );
}

/// One HTTP/1.1 GET of `path`; status and body.
fn raw_get(addr: SocketAddr, path: &str) -> (u16, String) {
    let mut c = HttpClient::new(addr, None);
    let r = c.exchange_to(path, "GET", &[], b"").expect("GET");
    (r.status, r.text())
}

#[cfg(feature = "full")]
#[test]
fn callers_see_and_change_only_their_own_notes_on_sqlite() {
    let provider = Provider::start(team());
    let (_dir, db) = teamnotes_file();
    let db = db.as_str();
    let server = serve(db, &provider, &[]);
    let (alice_token, bob_token, carol_token) = (
        provider.token("alice", &resource(server.addr)),
        provider.token("bob", &resource(server.addr)),
        provider.token("carol", &resource(server.addr)),
    );
    let mut alice = session(server.addr, &alice_token);
    let mut bob = session(server.addr, &bob_token);
    let mut carol = session(server.addr, &carol_token);
    let a = call(&mut alice, "add_note", json!({"text": "alice's plan"}));
    call(&mut bob, "add_note", json!({"text": "bob's idea"}));
    assert_eq!(notes(&mut alice), ["alice's plan"]);
    assert_eq!(notes(&mut bob), ["bob's idea"]);
    // EdDSA-signed, and nothing of carol's.
    assert!(notes(&mut carol).is_empty());
    // Bob cannot delete alice's note; alice can.
    let id = a["id"].clone();
    assert_eq!(
        call(&mut bob, "delete_note", json!({"id": id}))["changes"],
        0
    );
    assert_eq!(notes(&mut alice), ["alice's plan"]);
    assert_eq!(
        call(&mut alice, "delete_note", json!({"id": id}))["changes"],
        1
    );
    assert!(notes(&mut alice).is_empty());
    // The subject cannot be smuggled in as an argument.
    let r = alice
        .call_tool("add_note", json!({"text": "mine?", "auth.sub": "bob"}))
        .expect("tools/call");
    assert_eq!(r["result"]["isError"], json!(true), "{r}");
    let text = r["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    let error: Value = serde_json::from_str(text).expect("the error as JSON");
    assert_eq!(error["error"]["code"], "INVALID_ARGUMENTS", "{r}");
    assert!(
        text.contains("auth.sub"),
        "the refusal names the argument: {text}"
    );
    assert_eq!(notes(&mut bob), ["bob's idea"]);
    // A session is its opener's: bob's token naming alice's session finds no such session.
    alice.token = Some(bob_token.clone());
    let r = alice
        .post(&json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
            "params": {"name": "list_notes", "arguments": {}}}))
        .expect("POST");
    assert_eq!(r.status, 404, "{}", r.text());
    alice.token = Some(alice_token.clone());
    assert!(notes(&mut alice).is_empty(), "alice's session goes on");
    // Every call has its audit line with the subject; no token is in the log.
    let log = server.stop_and_log();
    assert!(
        log.lines()
            .any(|l| l.contains("mcpspec::audit") && l.contains("alice") && l.contains("add_note")),
        "an audit line for alice's add_note:\n{log}"
    );
    for token in [&alice_token, &bob_token, &carol_token] {
        let signature = token.rsplit('.').next().expect("a signature");
        assert!(
            !log.contains(signature),
            "a token's signature is in the log"
        );
    }
}

#[cfg(feature = "full")]
#[test]
fn scopes_are_enforced_with_a_step_up_challenge() {
    let provider = Provider::start(team());
    let (_dir, db) = teamnotes_file();
    let db = db.as_str();
    let server = serve(db, &provider, &[]);
    let carol_token = provider.token("carol", &resource(server.addr));
    let mut carol = session(server.addr, &carol_token);
    // tools/list shows what carol may not call (see the README for why).
    let list = carol.request("tools/list", json!({})).expect("tools/list");
    assert_eq!(list["result"]["tools"].as_array().map(Vec::len), Some(3));
    let r = carol
        .post(&json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
            "params": {"name": "add_note", "arguments": {"text": "x"}}}))
        .expect("POST");
    assert_eq!(r.status, 403, "{}", r.text());
    let challenge = r.header("www-authenticate").expect("a challenge");
    assert!(
        challenge.contains("error=\"insufficient_scope\"")
            && challenge.contains("scope=\"notes:read notes:write\""),
        "{challenge}"
    );
    assert!(notes(&mut carol).is_empty(), "nothing was added");
    // A token with none of the server's scopes cannot even initialize.
    let dave_token = provider.token("dave", &resource(server.addr));
    let r = HttpClient::new(server.addr, Some(&dave_token))
        .post(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"}}}),
        )
        .expect("POST");
    assert_eq!(r.status, 403, "{}", r.text());
    assert!(
        r.header("www-authenticate")
            .is_some_and(|c| c.contains("scope=\"notes:read\"")),
        "{:?}",
        r.header("www-authenticate")
    );
}

#[cfg(feature = "full")]
#[test]
fn a_rotated_key_is_picked_up_without_a_restart() {
    let provider = Provider::start(team());
    let (_dir, db) = teamnotes_file();
    let db = db.as_str();
    let server = serve(db, &provider, &[]);
    let before = provider.token("alice", &resource(server.addr));
    let mut alice = session(server.addr, &before);
    call(&mut alice, "add_note", json!({"text": "before"}));
    let kids = provider.rotate();
    let after = provider.token("alice", &resource(server.addr));
    let header = jwt_part(&after, 0);
    assert!(kids.contains(&header["kid"].as_str().unwrap_or_default().to_string()));
    let mut again = session(server.addr, &after);
    call(&mut again, "add_note", json!({"text": "after"}));
    assert_eq!(notes(&mut again), ["before", "after"]);
    // The refetch is bounded: a server that fetched the keys within the bound (here an hour)
    // does not fetch them again for a new key id, and refuses its tokens meanwhile.
    let bounded = HttpServer::serve(
        &["teamnotes", "--db", db, "--oauth-issuer", &provider.issuer],
        &[("MCPSPEC_OAUTH_REFETCH_SECS", "300")],
    );
    provider.rotate();
    let newest = provider.token("alice", &resource(bounded.addr));
    let r = add_with(bounded.addr, Some(&format!("Bearer {newest}")), "too new");
    assert_eq!(r.status, 401, "{}", r.text());
    assert!(
        r.text().contains("a key the issuer does not publish"),
        "{}",
        r.text()
    );
}

/// A key the issuer withdraws stops verifying, even for a token verified (and kept) before:
/// the server fetches the key set again once it has aged (here at once), and a set that lost
/// a key retires the tokens verified under the one before.
#[cfg(feature = "full")]
#[test]
fn a_withdrawn_key_stops_verifying_tokens_seen_before() {
    let provider = Provider::start(team());
    let (_dir, db) = teamnotes_file();
    let db = db.as_str();
    let server = HttpServer::serve(
        &["teamnotes", "--db", db, "--oauth-issuer", &provider.issuer],
        &[("MCPSPEC_OAUTH_KEYS_MAX_AGE_SECS", "0")],
    );
    let old = provider.token("alice", &resource(server.addr));
    let r = add_with(
        server.addr,
        Some(&format!("Bearer {old}")),
        "with the old key",
    );
    assert_eq!(r.status, 200, "{}", r.text());
    provider.rotate();
    // Still published: the old key verifies, from the cache or again.
    let r = add_with(
        server.addr,
        Some(&format!("Bearer {old}")),
        "still published",
    );
    assert_eq!(r.status, 200, "{}", r.text());
    provider.retire();
    let r = add_with(server.addr, Some(&format!("Bearer {old}")), "withdrawn");
    assert_eq!(r.status, 401, "{}", r.text());
    assert!(
        r.text().contains("a key the issuer does not publish"),
        "{}",
        r.text()
    );
    let new = provider.token("alice", &resource(server.addr));
    let mut alice = session(server.addr, &new);
    assert_eq!(notes(&mut alice), ["with the old key", "still published"]);
}

/// Key material the issuer replaces under the same key id stops verifying, even for a token
/// verified (and kept) before: the set fetched again has other material under that id, which
/// retires the tokens verified under the one before.
#[cfg(feature = "full")]
#[test]
fn a_key_replaced_under_its_id_stops_verifying_tokens_seen_before() {
    let provider = Provider::start(team());
    let (_dir, db) = teamnotes_file();
    let server = HttpServer::serve(
        &["teamnotes", "--db", &db, "--oauth-issuer", &provider.issuer],
        &[("MCPSPEC_OAUTH_KEYS_MAX_AGE_SECS", "0")],
    );
    let old = provider.token("alice", &resource(server.addr));
    let r = add_with(server.addr, Some(&format!("Bearer {old}")), "kept");
    assert_eq!(r.status, 200, "{}", r.text());
    provider.replace();
    let r = add_with(server.addr, Some(&format!("Bearer {old}")), "replaced");
    assert_eq!(r.status, 401, "{}", r.text());
    assert!(
        r.text().contains("signature does not verify"),
        "{}",
        r.text()
    );
    let new = provider.token("alice", &resource(server.addr));
    assert_eq!(
        jwt_part(&new, 0)["kid"],
        jwt_part(&old, 0)["kid"],
        "the same kid"
    );
    let mut alice = session(server.addr, &new);
    assert_eq!(notes(&mut alice), ["kept"]);
}

/// A part of a JWT (0: header, 1: claims), decoded.
fn jwt_part(token: &str, i: usize) -> Value {
    use base64::Engine;
    let part = token.split('.').nth(i).expect("a JWT");
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(part)
        .expect("base64url");
    serde_json::from_slice(&bytes).expect("JSON")
}

/// Alice's claims for `aud` from `provider`, valid for ten minutes from `now`, with `extra`
/// set over them (`null` removes nothing: it sets the claim to null).
fn claims_of(provider: &Provider, aud: &str, now: u64, extra: Value) -> Value {
    let c = json!({"sub": "alice", "iss": provider.issuer, "aud": aud,
        "exp": now + 600, "scope": "notes:read notes:write"});
    set_over(c, extra)
}

/// The header of a token signed with the provider's first RS256 key.
fn rs256_header() -> Value {
    json!({"alg": "RS256", "kid": "rs256-1", "typ": "at+jwt"})
}

/// The hostile tokens, each with what it is and the words its refusal must say: each differs
/// from an accepted token (`good`, forged with the right claims) in one thing.
fn hostile_tokens(
    provider: &Provider,
    aud: &str,
    now: u64,
    good: &str,
) -> Vec<(&'static str, String, &'static str)> {
    use base64::Engine;
    let mut tokens = forged_tokens(provider, aud, now);
    // Made otherwise: unsigned, for another resource by the provider itself, and too long.
    let b64 = |v: &Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
    let unsigned = json!({"alg": "none", "typ": "at+jwt"});
    let claims = claims_of(provider, aud, now, json!({}));
    let none = format!("{}.{}.", b64(&unsigned), b64(&claims));
    let other_resource = provider
        .token_for(
            "alice",
            "https://other.example/mcp",
            "notes:read notes:write",
        )
        .expect("a token for another resource");
    tokens.extend([
        ("alg none", none, "algorithm none is not accepted"),
        (
            "another resource's token",
            other_resource,
            "another audience",
        ),
        (
            "oversized",
            format!("{good}{}", "A".repeat(9000)),
            "longer than",
        ),
    ]);
    tokens
}

/// The hostile tokens forged with the provider's keys, as [`hostile_tokens`] gives them.
fn forged_tokens(
    provider: &Provider,
    aud: &str,
    now: u64,
) -> Vec<(&'static str, String, &'static str)> {
    let claims = |extra: Value| claims_of(provider, aud, now, extra);
    // The right header and key, and one claim wrong.
    let evil = "http://evil.example";
    let wrong_claims = [
        ("expired", json!({"exp": now - 120}), "expired"),
        ("not yet valid", json!({"nbf": now + 600}), "not valid yet"),
        (
            "wrong audience",
            json!({"aud": "http://127.0.0.1:1/mcp"}),
            "another audience",
        ),
        ("wrong issuer", json!({"iss": evil}), "another issuer"),
        ("no subject", json!({"sub": null}), "lacks the claim sub"),
        ("iss as a list", json!({"iss": [provider.issuer, evil]}), ""),
    ];
    // The right claims, and the header or the key wrong: the header is the right one with
    // these keys set over it.
    let unknown = "extensions this server does not understand";
    let wrong_headers = [
        (
            "unknown kid",
            json!({"kid": "nobody"}),
            "stranger",
            "a key the issuer does not publish",
        ),
        (
            "a stranger's key under a known kid",
            json!({}),
            "stranger",
            "signature does not verify",
        ),
        (
            "HS256 keyed with the public key",
            json!({"alg": "HS256"}),
            "hmac-public",
            "algorithm HS256 is not accepted",
        ),
        (
            "an unknown critical extension",
            json!({"crit": ["x-unknown"], "x-unknown": 1}),
            "current",
            unknown,
        ),
        ("an empty crit", json!({"crit": []}), "current", unknown),
        (
            "an unencoded payload",
            json!({"b64": false, "crit": ["b64"]}),
            "current",
            unknown,
        ),
        ("b64 without crit", json!({"b64": true}), "current", unknown),
    ];
    wrong_claims
        .into_iter()
        .map(|(what, extra, why)| (what, rs256_header(), extra, "current", why))
        .chain(wrong_headers.into_iter().map(|(what, over, key, why)| {
            (what, set_over(rs256_header(), over), json!({}), key, why)
        }))
        .map(|(what, header, extra, key, why)| {
            (what, provider.forge(header, claims(extra), key), why)
        })
        .collect()
}

/// `base` with every key of `over` set over it.
fn set_over(mut base: Value, over: Value) -> Value {
    for (k, v) in over.as_object().expect("object") {
        base[k] = v.clone();
    }
    base
}

#[cfg(feature = "full")]
#[test]
fn hostile_tokens_are_refused_and_nothing_runs() {
    let provider = Provider::start(team());
    let (_dir, db) = teamnotes_file();
    let db = db.as_str();
    let server = serve(db, &provider, &[]);
    let aud = resource(server.addr);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("time")
        .as_secs();
    let claims = |extra: Value| claims_of(&provider, &aud, now, extra);
    let rs = rs256_header();
    // The control: a token forged with the provider's own key and the right claims passes,
    // so each refusal below is for the one thing that is wrong with it.
    let good = provider.forge(rs.clone(), claims(json!({})), "current");
    let r = add_with(server.addr, Some(&format!("Bearer {good}")), "control");
    assert_eq!(r.status, 200, "the control token is accepted: {}", r.text());
    // Clocks differ a little: a token expired 10 s ago, or valid in 10 s, is within the skew.
    for (what, extra) in [
        ("expired 10 s ago", json!({"exp": now - 10})),
        ("valid in 10 s", json!({"nbf": now + 10})),
    ] {
        let t = provider.forge(rs.clone(), claims(extra), "current");
        let mut c = HttpClient::per_request(server.addr, Some(&t));
        let r = c
            .post(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": {"name": "list_notes", "arguments": {}}}))
            .expect("POST");
        assert_eq!(r.status, 200, "{what}: {}", r.text());
    }
    let hostile = hostile_tokens(&provider, &aud, now, &good);
    for (what, token, why) in &hostile {
        let r = add_with(server.addr, Some(&format!("Bearer {token}")), what);
        assert_eq!(r.status, 401, "{what}: {}", r.text());
        let challenge = r.header("www-authenticate").unwrap_or_default();
        assert!(
            challenge.contains("error=\"invalid_token\"") && r.text().contains(why),
            "{what}: {challenge} {}",
            r.text()
        );
        assert!(
            !r.text().contains(token.as_str()),
            "{what}: the token is echoed"
        );
    }
    // Not the Bearer scheme, and two Authorization headers.
    let r = add_with(server.addr, Some(&format!("Basic {good}")), "basic");
    assert_eq!(r.status, 401, "{}", r.text());
    let two = format!("Bearer {good}");
    let r = HttpClient::new(server.addr, None)
        .exchange(
            "POST",
            &[("Authorization", &two), ("Authorization", &two)],
            b"{}",
        )
        .expect("POST");
    assert_eq!(r.status, 400, "{}", r.text());
    // A header far past any token: refused by the HTTP layer, and the server goes on.
    let huge = format!("Bearer {}", "A".repeat(1 << 20));
    let r = HttpClient::new(server.addr, None).exchange("POST", &[("Authorization", &huge)], b"{}");
    match r {
        Ok(r) => assert_eq!(r.status, 431, "{}", r.text()),
        Err(e) => panic!("a huge header is answered, not dropped: {e:?}"),
    }
    // Only the control's note was written.
    let mut alice = session(server.addr, &good);
    assert_eq!(notes(&mut alice), ["control"]);
    let log = server.stop_and_log();
    for (what, token, _) in &hostile {
        let signature = token.rsplit('.').next().unwrap_or_default();
        assert!(
            signature.len() < 8 || !log.contains(signature),
            "{what}: the token is in the log"
        );
    }
}

/// Every control character (C0, DEL, C1) and the Unicode line and paragraph separators.
fn every_control_character() -> String {
    (0u32..0x20)
        .chain([0x7f])
        .chain(0x80..0xa0)
        .chain([0x2028, 0x2029])
        .filter_map(char::from_u32)
        .collect()
}

/// A caller's values reach the log quoted and escaped: a `sub` holding a newline and a whole
/// audit line of its own, and every control character, in a signed token, and a tool name and
/// arguments holding them too, leave one line per event and no raw control character.
#[cfg(feature = "full")]
#[test]
fn a_caller_s_values_cannot_forge_or_break_a_log_line() {
    let provider = Provider::start(team());
    let (_dir, db) = teamnotes_file();
    let server = serve(&db, &provider, &[]);
    let aud = resource(server.addr);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("time")
        .as_secs();
    let controls = every_control_character();
    let forged = "2026-01-01T00:00:00.000000Z  INFO mcpspec::audit: call sub=\"root\" tool=\"drop_all\" outcome=\"ok\"";
    let sub = format!("mallet\n{forged}\r\n{controls}");
    let token = provider.forge(
        rs256_header(),
        claims_of(&provider, &aud, now, json!({"sub": sub})),
        "current",
    );
    let r = add_with(
        server.addr,
        Some(&format!("Bearer {token}")),
        &format!("note\n{controls}"),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    // A tool name cannot be an HTTP header's value (`Mcp-Name`), so it goes in a session.
    let mut c = session(server.addr, &token);
    let r = c
        .call_tool(&format!("nope\n{forged}{controls}"), json!({"x": controls}))
        .expect("tools/call");
    assert!(r.get("error").is_some(), "{r}");
    let log = server.stop_and_log();
    let bad: Vec<char> = log
        .chars()
        .filter(|c| *c != '\n' && (c.is_control() || matches!(c, '\u{2028}' | '\u{2029}')))
        .collect();
    assert!(
        bad.is_empty(),
        "raw control characters in the log: {bad:?}\n{log}"
    );
    assert!(
        !log.lines().any(|l| l.starts_with("2026-01-01T00:00:00")),
        "a forged line:\n{log}"
    );
    let audit: Vec<&str> = log
        .lines()
        .filter(|l| {
            l.split_once("  INFO ")
                .is_some_and(|(_, rest)| rest.starts_with("mcpspec::audit: "))
                && l.contains("tool=\"add_note\"")
        })
        .collect();
    assert_eq!(audit.len(), 1, "{log}");
    assert!(
        audit[0].contains(
            "sub=\"mallet\\n2026-01-01T00:00:00.000000Z  INFO mcpspec::audit: call sub=\\\"root\\\""
        ),
        "the subject quoted and escaped: {}",
        audit[0]
    );
}

/// `mcpspec ARGS` (a call over stdio, so with no caller) fails with `IDENTITY_REQUIRED`.
fn refused_without_a_caller(args: &[&str]) {
    let (code, out, err) = mcpspec(args, &[]);
    assert_ne!(code, 0, "{out}");
    assert!(
        format!("{out}{err}").contains("IDENTITY_REQUIRED"),
        "{out}\n{err}"
    );
}

#[test]
fn without_a_token_a_tool_that_acts_as_its_caller_refuses() {
    let (_dir, db) = teamnotes_file();
    let db = db.as_str();
    refused_without_a_caller(&["call", "teamnotes", "list_notes", "{}", "--db", db]);
}

/// On PostgreSQL the database keeps callers apart: `teamnotes`' statements there have no
/// owner filter, and row-level security policies read the claims each call's transaction
/// sets, under the role the token names. The server logs in as a role that is no superuser.
#[cfg(feature = "full")]
#[test]
fn row_level_security_keeps_callers_apart_on_postgres() {
    let cluster = crate::pg::Cluster::shared();
    cluster.psql(
        "postgres",
        "DO $$ BEGIN
           IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'notes_user') THEN
             CREATE ROLE notes_user NOLOGIN; END IF;
           IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'teamnotes_app') THEN
             CREATE ROLE teamnotes_app LOGIN; GRANT notes_user TO teamnotes_app; END IF;
         END $$",
    );
    let name = format!("teamnotes_{}", std::process::id());
    cluster.psql(
        "postgres",
        &format!("CREATE DATABASE {name} OWNER teamnotes_app"),
    );
    let url = cluster.url_as(&name, "teamnotes_app");
    init(&url);
    let provider = Provider::start(team());
    let server = serve(&url, &provider, &[]);
    let token = |who| provider.token(who, &resource(server.addr));
    let (mut alice, mut bob) = (
        session(server.addr, &token("alice")),
        session(server.addr, &token("bob")),
    );
    let a = call(&mut alice, "add_note", json!({"text": "alice's plan"}));
    call(&mut bob, "add_note", json!({"text": "bob's idea"}));
    assert_eq!(notes(&mut alice), ["alice's plan"]);
    assert_eq!(notes(&mut bob), ["bob's idea"]);
    assert_eq!(
        call(&mut bob, "delete_note", json!({"id": a["id"]}))["changes"],
        0
    );
    assert_eq!(notes(&mut alice), ["alice's plan"]);
    // The rows, as the database's owner sees them: each with its caller as owner.
    let rows = cluster.psql(&name, "SELECT owner || ':' || text FROM notes ORDER BY id");
    assert_eq!(rows, "alice:alice's plan\nbob:bob's idea");
    // A role outside the allow-list is refused before any statement.
    let mut mallory = session(server.addr, &token("mallory"));
    let r = mallory
        .call_tool("add_note", json!({"text": "as postgres"}))
        .expect("tools/call");
    assert_eq!(r["result"]["isError"], json!(true), "{r}");
    let text = r["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    let error: Value = serde_json::from_str(text).expect("the error as JSON");
    assert_eq!(error["error"]["code"], "FORBIDDEN", "{r}");
    assert_eq!(cluster.psql(&name, "SELECT count(*) FROM notes"), "2");
    // Without a caller (stdio), no statement runs as the login role.
    refused_without_a_caller(&["call", "teamnotes", "list_notes", "{}", "--db", &url]);
    drop(server);
    cluster.psql("postgres", &format!("DROP DATABASE {name}"));
}

/// A server from a spec file that names its issuer and reads two declared claims, on each
/// engine (claims are parameters on every one).
const WHOAMI: &str = r#"server:
  name: whoami
  version: 0.1.0
  issuer: ISSUER
  claims: {team: string, level: integer}
database:
  schema: CREATE TABLE seen (sub TEXT);
  postgres:
    schema: CREATE TABLE seen (sub text);
  mysql:
    schema: CREATE TABLE seen (sub TEXT);
tools:
  - name: whoami
    description: The caller as the database sees it.
    annotations: {readOnlyHint: true}
    input: {type: object, properties: {}}
    sql:
      returns: one
      query: SELECT :auth.sub AS sub, :auth.claims.team AS team, :auth.claims.level AS level
      postgres: SELECT CAST(:auth.sub AS text) AS sub, CAST(:auth.claims.team AS text) AS team, CAST(:auth.claims.level AS bigint) AS level
      mysql: SELECT CAST(:auth.sub AS CHAR) AS sub, CAST(:auth.claims.team AS CHAR) AS team, CAST(:auth.claims.level AS SIGNED) AS level
      columns: {sub: text, team: text, level: integer}
resources:
  - uri: whoami://guide
    name: guide
    template: Ask whoami who you are.
    scopes: [notes:write]
prompts:
  - name: introduce
    scopes: [notes:write]
    messages:
      - role: user
        text: Introduce me.
"#;

// Tokens from the OpenID provider (npm): the full tier, SQLite included.
#[cfg(feature = "full")]
on_every_engine!(statements_read_declared_claims_of_the_callers_token);

fn statements_read_declared_claims_of_the_callers_token(engine: crate::common::Engine) {
    let mut clients = team();
    clients.push(Client {
        id: "erin",
        scope: "notes:read",
        alg: "ES256",
        claims: json!({"team": 7, "level": 3}),
    });
    clients.push(Client {
        id: "frank",
        scope: "notes:read",
        alg: "EdDSA",
        claims: json!({"team": "blue", "level": 3}),
    });
    let provider = Provider::start(clients);
    let dir = tempfile::tempdir().expect("tempdir");
    let spec = dir.path().join("whoami.yaml");
    std::fs::write(&spec, WHOAMI.replace("ISSUER", &provider.issuer)).expect("write the spec");
    let db = match engine {
        crate::common::Engine::Sqlite => {
            dir.path().join("w.db").to_str().expect("utf-8").to_string()
        }
        crate::common::Engine::Postgres => crate::pg::Cluster::shared().create_database(),
        crate::common::Engine::Mariadb => crate::maria::Server::shared().create_database(),
    };
    let spec = spec.to_str().expect("utf-8").to_string();
    let (code, _, err) = mcpspec(&["init", "--spec", &spec, "--db", &db], &[]);
    assert_eq!(code, 0, "{err}");
    // No --oauth-issuer: the spec's issuer is the one.
    let server = HttpServer::serve(
        &["--spec", &spec, "--db", &db],
        &[("MCPSPEC_OAUTH_REFETCH_SECS", "0")],
    );
    let token = |who| provider.token(who, &resource(server.addr));
    let mut alice = session(server.addr, &token("alice"));
    assert_eq!(
        call(&mut alice, "whoami", json!({})),
        // A claim the token lacks binds NULL, and a NULL column is left out of the row.
        json!({"sub": "alice", "team": "red"})
    );
    let mut frank = session(server.addr, &token("frank"));
    assert_eq!(
        call(&mut frank, "whoami", json!({})),
        json!({"sub": "frank", "team": "blue", "level": 3})
    );
    // A claim of another type than declared refuses the call, naming the claim only.
    let mut erin = session(server.addr, &token("erin"));
    let r = erin.call_tool("whoami", json!({})).expect("tools/call");
    let text = r["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    let error: Value = serde_json::from_str(text).expect("the error as JSON");
    assert_eq!(error["error"]["code"], "FORBIDDEN", "{r}");
    assert!(text.contains("`team`") && !text.contains('7'), "{text}");
    // A resource's and a prompt's own scopes: alice has notes:write, frank has not.
    for (method, params) in [
        ("resources/read", json!({"uri": "whoami://guide"})),
        ("prompts/get", json!({"name": "introduce"})),
    ] {
        let ok = alice.request(method, params.clone()).expect(method);
        assert!(ok.get("result").is_some(), "{method}: {ok}");
        let message = json!({"jsonrpc": "2.0", "id": 77, "method": method, "params": params});
        let r = frank.post(&message).expect(method);
        assert_eq!(r.status, 403, "{method}: {}", r.text());
        assert!(
            r.header("www-authenticate")
                .is_some_and(|c| c.contains("scope=\"notes:write\"")),
            "{method}: {:?}",
            r.header("www-authenticate")
        );
    }
    // The spec's issuer with an audience of the operator's own (the public URL behind a
    // proxy): the server starts, and takes tokens for that audience.
    let public = "https://whoami.example/mcp";
    let behind = HttpServer::serve(
        &["--spec", &spec, "--db", &db],
        &[("MCPSPEC_OAUTH_AUDIENCE", public)],
    );
    let mut alice = session(behind.addr, &provider.token("alice", public));
    assert_eq!(call(&mut alice, "whoami", json!({}))["sub"], "alice");
    // Without a token the claims are absent, and the tool says why it cannot run.
    refused_without_a_caller(&["call", "--spec", &spec, "whoami", "{}", "--db", &db]);
}

/// Opaque access tokens, checked at the issuer's introspection endpoint with the server's own
/// client credentials; without them an opaque token is refused as no JWT.
#[cfg(feature = "full")]
#[test]
fn opaque_tokens_are_checked_by_introspection() {
    let mut clients = team();
    let server_client = Client {
        id: "teamnotes-server",
        scope: "",
        alg: "RS256",
        claims: json!({}),
    };
    let secret = server_client.secret();
    clients.push(server_client);
    clients.push(Client {
        id: "olga",
        scope: "notes:read notes:write",
        alg: "opaque",
        claims: json!({}),
    });
    let provider = Provider::start(clients);
    let (_dir, db) = teamnotes_file();
    let db = db.as_str();
    let server = HttpServer::serve(
        &["teamnotes", "--db", db, "--oauth-issuer", &provider.issuer],
        &[
            ("MCPSPEC_OAUTH_CLIENT_ID", "teamnotes-server"),
            ("MCPSPEC_OAUTH_CLIENT_SECRET", &secret),
        ],
    );
    let token = provider.token("olga", &resource(server.addr));
    assert_eq!(token.matches('.').count(), 0, "an opaque token: {token}");
    let mut olga = session(server.addr, &token);
    call(&mut olga, "add_note", json!({"text": "opaque but known"}));
    assert_eq!(notes(&mut olga), ["opaque but known"]);
    // One for another resource, and one the issuer never issued.
    let elsewhere = provider
        .token_for("olga", "https://other.example/mcp", "notes:read")
        .expect("a token for another resource");
    for (what, t, why) in [
        ("another resource's", elsewhere.as_str(), "another audience"),
        ("made up", "not-issued-by-anyone-0123456789", "not active"),
    ] {
        let r = add_with(server.addr, Some(&format!("Bearer {t}")), what);
        assert_eq!(r.status, 401, "{what}: {}", r.text());
        assert!(r.text().contains(why), "{what}: {}", r.text());
    }
    // A server without credentials of its own accepts JWTs only.
    let jwt_only = serve(db, &provider, &[]);
    let r = add_with(jwt_only.addr, Some(&format!("Bearer {token}")), "x");
    assert_eq!(r.status, 401, "{}", r.text());
    assert!(r.text().contains("not a JWT"), "{}", r.text());
    assert_eq!(notes(&mut olga), ["opaque but known"]);
}

/// The workbench at `/ui/` behind OAuth (`--ui`): a caller sees its own calls only, never
/// another's arguments, and cannot run the examples, which run as the operator.
#[cfg(feature = "full")]
#[test]
fn the_workbench_shows_an_oauth_caller_its_own_calls_only() {
    let provider = Provider::start(team());
    let (_dir, db) = teamnotes_file();
    // The calls kept while no page is open too, so that a caller's calls are listed after.
    let server = serve(&db, &provider, &["--ui", "--ui-history"]);
    let alice_token = provider.token("alice", &resource(server.addr));
    let bob_token = provider.token("bob", &resource(server.addr));
    let mut alice = session(server.addr, &alice_token);
    let mut bob = session(server.addr, &bob_token);
    call(&mut alice, "add_note", json!({"text": "alice's secret"}));
    call(&mut bob, "add_note", json!({"text": "bob's secret"}));
    // Each call the caller sees, opened (with its arguments).
    let calls_of = |c: &mut HttpClient| -> Vec<Value> {
        let r = c.exchange_to("/ui/calls", "GET", &[], b"").expect("GET");
        assert_eq!(r.status, 200, "{}", r.text());
        let listed: Vec<Value> = serde_json::from_slice(&r.body).expect("JSON");
        listed
            .iter()
            .map(|call| {
                let path = format!("/ui/calls/{}", call["seq"]);
                let r = c.exchange_to(&path, "GET", &[], b"").expect("GET");
                assert_eq!(r.status, 200, "{}", r.text());
                serde_json::from_slice(&r.body).expect("JSON")
            })
            .collect()
    };
    let seen = calls_of(&mut alice);
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0]["arguments"]["text"], "alice's secret");
    assert_eq!(seen[0]["caller"], "alice");
    let seen = calls_of(&mut bob);
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0]["arguments"]["text"], "bob's secret");
    assert_eq!(raw_get(server.addr, "/ui/calls").0, 401);
    // Another caller's call, by its number: as if there were none.
    let alices = calls_of(&mut alice)[0]["seq"].clone();
    let r = bob
        .exchange_to(&format!("/ui/calls/{alices}"), "GET", &[], b"")
        .expect("GET");
    assert_eq!(r.status, 404, "{}", r.text());
    let r = alice
        .exchange_to("/ui/examples", "POST", &[("Mcpspec-Workbench", "1")], b"")
        .expect("POST");
    assert_eq!(r.status, 403, "{}", r.text());
    assert!(
        r.text().contains("the examples run as the operator"),
        "{}",
        r.text()
    );
}
