//! A real OpenID provider for the OAuth tests: `oidc-provider` (npm, OpenID Certified), run
//! by `tests/oauth/provider.mjs` on 127.0.0.1 with client-credentials clients, resource
//! indicators and JWT access tokens. The harness installs its npm packages once (`npm ci`,
//! under a lock, so that test processes running at once install them once), starts one
//! provider per test and kills it when the test ends. The provider's two test-only endpoints
//! rotate its keys and sign the hostile tokens (see the script's head).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

/// `tests/oauth`, where the provider's script and its `package-lock.json` are.
fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/oauth")
}

/// Installs the provider's packages once (`npm ci`), however many test processes ask.
fn installed() {
    mcpspec_testkit::full_tier!("oidc-provider from npm");
    let dir = dir();
    let lock = std::fs::File::create(std::env::temp_dir().join("mcpspec-oauth-npm.lock"))
        .expect("create the npm lock file");
    lock.lock().expect("lock the npm lock file");
    if dir
        .join("node_modules/oidc-provider/package.json")
        .is_file()
    {
        return;
    }
    let out = Command::new("npm")
        .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
        .current_dir(&dir)
        .output()
        .unwrap_or_else(|e| {
            panic!("the OAuth tests need Node.js and npm to run oidc-provider ({e}); install them (Debian: apt-get install nodejs npm) and run again")
        });
    assert!(
        out.status.success(),
        "npm ci in tests/oauth failed (the registry must be reachable once):\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A client of the provider: its id and secret, the scopes it may ask for, the algorithm its
/// access tokens are signed with, and extra claims they carry.
pub struct Client {
    pub id: &'static str,
    pub scope: &'static str,
    pub alg: &'static str,
    pub claims: Value,
}

impl Client {
    /// The client's secret.
    pub fn secret(&self) -> String {
        format!("secret-of-{}-0123456789abcdef", self.id)
    }
}

/// A running provider.
pub struct Provider {
    child: Child,
    /// Its issuer identifier, `http://127.0.0.1:PORT`.
    pub issuer: String,
    clients: Vec<Client>,
}

impl Provider {
    /// Starts a provider with `clients` and waits for its issuer line.
    pub fn start(clients: Vec<Client>) -> Provider {
        installed();
        let config = json!({"clients": clients.iter().map(|c| json!({
            "id": c.id, "secret": c.secret(), "scope": c.scope, "alg": c.alg, "claims": c.claims,
            // An `opaque` algorithm asks for opaque access tokens instead of JWTs.
            "format": if c.alg == "opaque" { "opaque" } else { "jwt" },
            // A client with no scope is a resource server, which authenticates with Basic.
            "basic": c.scope.is_empty(),
        })).collect::<Vec<_>>()});
        let mut child = Command::new("node")
            .arg("provider.mjs")
            .arg(config.to_string())
            .current_dir(dir())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start node tests/oauth/provider.mjs");
        let mut first = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut first)
            .expect("read the provider's first line");
        let issuer = serde_json::from_str::<Value>(&first)
            .ok()
            .and_then(|v| v["issuer"].as_str().map(str::to_string))
            .unwrap_or_else(|| panic!("the provider did not start: {first:?}"));
        Provider {
            child,
            issuer,
            clients,
        }
    }

    /// An access token for `client` (client credentials) for `resource` with `scope`; the
    /// provider's error body when it refuses.
    pub fn token_for(&self, client: &str, resource: &str, scope: &str) -> Result<String, String> {
        let c = self
            .clients
            .iter()
            .find(|c| c.id == client)
            .expect("a client of this provider");
        let form = [
            ("grant_type", "client_credentials"),
            ("client_id", c.id),
            ("client_secret", &c.secret()),
            ("resource", resource),
            ("scope", scope),
        ]
        .iter()
        .map(|(k, v)| format!("{k}={}", encode(v)))
        .collect::<Vec<_>>()
        .join("&");
        let (status, body) = self.post("/token", "application/x-www-form-urlencoded", &form);
        let answer: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
        match (status, answer["access_token"].as_str()) {
            (200, Some(t)) => Ok(t.to_string()),
            _ => Err(body),
        }
    }

    /// [`Provider::token_for`] with the client's whole scope; panics when refused.
    pub fn token(&self, client: &str, resource: &str) -> String {
        let scope = self
            .clients
            .iter()
            .find(|c| c.id == client)
            .expect("a client of this provider")
            .scope;
        self.token_for(client, resource, scope)
            .unwrap_or_else(|e| panic!("no token for {client}: {e}"))
    }

    /// New signing keys; the old ones stay published after them. The new kids.
    pub fn rotate(&self) -> Vec<String> {
        let (status, body) = self.post("/control/rotate", "application/json", "{}");
        assert_eq!(status, 200, "rotate: {body}");
        let v: Value = serde_json::from_str(&body).expect("JSON");
        v["kids"]
            .as_array()
            .expect("kids")
            .iter()
            .map(|k| k.as_str().expect("a kid").to_string())
            .collect()
    }

    /// Withdraws every key but the newest of each algorithm.
    pub fn retire(&self) {
        let (status, body) = self.post("/control/retire", "application/json", "{}");
        assert_eq!(status, 200, "retire: {body}");
    }

    /// New key material under the newest kids (see `provider.mjs`).
    pub fn replace(&self) {
        let (status, body) = self.post("/control/replace", "application/json", "{}");
        assert_eq!(status, 200, "replace: {body}");
    }

    /// A token signed outside the provider's rules (see `provider.mjs`): `header` and
    /// `claims` as given, with the key `key` (`current`, `stranger` or `hmac-public`).
    pub fn forge(&self, header: Value, claims: Value, key: &str) -> String {
        let body = json!({"header": header, "claims": claims, "key": key}).to_string();
        let (status, token) = self.post("/control/forge", "application/json", &body);
        assert_eq!(status, 200, "forge: {token}");
        token
    }

    /// One HTTP/1.0 POST to the provider (the answer is read to its end); status and body.
    fn post(&self, path: &str, content_type: &str, body: &str) -> (u16, String) {
        let addr = self.issuer.trim_start_matches("http://");
        let mut s = TcpStream::connect(addr).expect("connect to the provider");
        s.set_read_timeout(Some(Duration::from_secs(30)))
            .expect("timeout");
        write!(
            s,
            "POST {path} HTTP/1.0\r\nHost: {addr}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .expect("send");
        let mut answer = String::new();
        s.read_to_string(&mut answer).expect("read the answer");
        let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
        let status = head
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        (status, body.to_string())
    }
}

impl Drop for Provider {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `s` percent-encoded for a form body.
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}
