//! A real HTTP server on loopback that speaks the OpenAI embeddings API (`POST
//! /v1/embeddings`), for the error paths of an HTTP provider: deterministic vectors (each
//! text's from its hash, of the dimensions asked for) and faults the test queues (429 with
//! `Retry-After`, 500, a hang, a wrong dimension), a key it checks (401 otherwise), and a gate
//! that holds requests until the test opens it. It records every request it answers.
//! Semantics are tested with the real model, never with this.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// What the next request gets instead of vectors.
#[derive(Debug, Clone, Copy)]
pub enum Fault {
    /// This status, with `Retry-After: secs` when given.
    Status(u16, Option<u64>),
    /// No answer until the connection closes.
    Hang,
    /// Vectors of this many dimensions, whatever was asked.
    Dimensions(usize),
}

/// A request the server answered (or held).
#[derive(Debug, Clone)]
pub struct Seen {
    pub texts: Vec<String>,
    pub at: Instant,
    pub authorization: Option<String>,
}

#[derive(Default)]
struct State {
    faults: Vec<Fault>,
    seen: Vec<Seen>,
    /// How many more requests may pass before the gate holds them; `None`: all.
    gate: Option<usize>,
    held: usize,
}

/// The running server; it stops with the test process.
pub struct Provider {
    pub addr: SocketAddr,
    /// The key it accepts (`Authorization: Bearer KEY`).
    pub key: String,
    state: Arc<(Mutex<State>, Condvar)>,
}

impl Provider {
    /// A server that accepts `key`, answering on a thread of its own per connection.
    pub fn start(key: &str) -> Provider {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        let addr = listener.local_addr().expect("its address");
        let state: Arc<(Mutex<State>, Condvar)> = Arc::default();
        let (shared, key_owned) = (state.clone(), key.to_string());
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                let (state, key) = (shared.clone(), key_owned.clone());
                std::thread::spawn(move || serve(conn, &state, &key));
            }
        });
        Provider {
            addr,
            key: key.to_string(),
            state,
        }
    }

    /// The base URL, as `KNOWLEDGE_EMBEDDINGS=openai:...` takes it.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The environment that makes the knowledge server use this provider.
    pub fn env(&self) -> Vec<(String, String)> {
        vec![
            (
                "KNOWLEDGE_EMBEDDINGS".into(),
                format!("openai:{}", self.base_url()),
            ),
            ("KNOWLEDGE_EMBEDDINGS_MODEL".into(), "fake-embedding".into()),
            ("OPENAI_API_KEY".into(), self.key.clone()),
        ]
    }

    /// Queues faults for the next requests, in order.
    pub fn fail_next(&self, faults: &[Fault]) {
        let mut s = self.state.0.lock().unwrap();
        s.faults.extend(faults.iter().cloned());
    }

    /// Holds every request from now until [`Provider::open`].
    pub fn shut(&self) {
        self.allow(0);
    }

    /// Lets `n` more requests through, then holds the rest until [`Provider::open`].
    pub fn allow(&self, n: usize) {
        self.state.0.lock().unwrap().gate = Some(n);
        self.state.1.notify_all();
    }

    /// Lets the held requests (and the later ones) through.
    pub fn open(&self) {
        self.state.0.lock().unwrap().gate = None;
        self.state.1.notify_all();
    }

    /// Waits (at most `within`) until `n` requests are held at the gate.
    pub fn wait_held(&self, n: usize, within: Duration) -> bool {
        let (lock, cv) = &*self.state;
        let s = lock.lock().unwrap();
        let (s, _) = cv.wait_timeout_while(s, within, |s| s.held < n).unwrap();
        s.held >= n
    }

    /// Waits (at most `within`) until `n` requests were answered (or are being): e.g. the
    /// server's start-up check, before a test queues faults for the calls it makes.
    pub fn wait_seen(&self, n: usize, within: Duration) -> bool {
        let (lock, cv) = &*self.state;
        let s = lock.lock().unwrap();
        let (s, _) = cv
            .wait_timeout_while(s, within, |s| s.seen.len() < n)
            .unwrap();
        s.seen.len() >= n
    }

    /// Every request seen so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.state.0.lock().unwrap().seen.clone()
    }
}

/// A text's vector: `dims` values from its FNV-1a hash, through xorshift.
pub fn vector(text: &str, dims: usize) -> Vec<f32> {
    let mut x = text.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    }) | 1;
    (0..dims)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % 2000) as f32 / 1000.0 - 1.0
        })
        .collect()
}

fn serve(conn: TcpStream, state: &Arc<(Mutex<State>, Condvar)>, key: &str) {
    let mut reader = BufReader::new(conn.try_clone().expect("clone the connection"));
    let mut conn = conn;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let (mut length, mut authorization) = (0usize, None);
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            let (name, value) = h.split_once(':').unwrap_or((h, ""));
            match name.to_ascii_lowercase().as_str() {
                "content-length" => length = value.trim().parse().unwrap_or(0),
                "authorization" => authorization = Some(value.trim().to_string()),
                _ => {}
            }
        }
        let mut body = vec![0u8; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let texts: Vec<String> = request["input"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|t| t.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        let dims = request["dimensions"].as_u64().unwrap_or(256) as usize;
        let fault = {
            let (lock, cv) = &**state;
            let mut s = lock.lock().unwrap();
            s.held += 1;
            cv.notify_all();
            s = cv.wait_while(s, |s| s.gate == Some(0)).unwrap();
            s.held -= 1;
            if let Some(n) = &mut s.gate {
                *n -= 1;
            }
            s.seen.push(Seen {
                texts: texts.clone(),
                at: Instant::now(),
                authorization: authorization.clone(),
            });
            cv.notify_all();
            (!s.faults.is_empty()).then(|| s.faults.remove(0))
        };
        let (status, retry_after, answer) = match (fault, authorization) {
            (_, a) if a.as_deref() != Some(&format!("Bearer {key}")) => (
                401,
                None,
                json!({"error": {"message": format!("Incorrect API key provided: {}", a.unwrap_or_default()), "type": "invalid_request_error"}}),
            ),
            (Some(Fault::Hang), _) => {
                // Held until the client gives up and closes.
                let mut sink = [0u8; 1];
                let _ = reader.read(&mut sink);
                return;
            }
            (Some(Fault::Status(code, after)), _) => (
                code,
                after,
                json!({"error": {"message": "the fake provider says no", "type": "server_error"}}),
            ),
            (Some(Fault::Dimensions(d)), _) => (200, None, answer(&texts, d)),
            (None, _) => (200, None, answer(&texts, dims)),
        };
        let body = answer.to_string();
        let mut head = format!(
            "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\n",
            body.len()
        );
        if let Some(s) = retry_after {
            head.push_str(&format!("retry-after: {s}\r\n"));
        }
        head.push_str("\r\n");
        if conn.write_all(head.as_bytes()).is_err() || conn.write_all(body.as_bytes()).is_err() {
            return;
        }
    }
}

fn answer(texts: &[String], dims: usize) -> Value {
    let data: Vec<Value> = texts
        .iter()
        .enumerate()
        .map(|(i, t)| json!({"object": "embedding", "index": i, "embedding": vector(t, dims)}))
        .collect();
    json!({"object": "list", "data": data, "model": "fake-embedding", "usage": {"prompt_tokens": 0, "total_tokens": 0}})
}
