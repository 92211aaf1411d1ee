//! A small HTTP/1.1 client for Streamable HTTP on a [`std::net::TcpStream`]: it posts JSON-RPC
//! messages and reads JSON and SSE answers, with a session or per request (2026-07-28), and
//! never waits without a deadline. For the integration tests and the bench only.

use std::io::{BufRead, BufReader, Write};

use mcpspec::client::{ClientError, PER_REQUEST_VERSION, PROTOCOL_VERSION, RESPONSE_TIMEOUT};
use serde_json::{Value, json};

/// One HTTP response, read whole.
#[derive(Debug, Clone)]
pub struct HttpResponse {
    pub status: u16,
    /// Header names in lower case, in the order received.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl HttpResponse {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The JSON-RPC messages of the body: the body itself when it is JSON, or the `data` of
    /// every SSE event that has any (priming events carry none).
    pub fn messages(&self) -> Vec<Value> {
        let event_stream = self
            .header("content-type")
            .is_some_and(|t| t.starts_with("text/event-stream"));
        if !event_stream {
            return serde_json::from_slice(&self.body).into_iter().collect();
        }
        sse_events(&self.text())
            .iter()
            .filter_map(|data| serde_json::from_str(data).ok())
            .collect()
    }
}

/// The `data` of each event of an SSE text, its `data:` lines joined by newlines; events
/// without data are left out.
pub fn sse_events(text: &str) -> Vec<String> {
    let mut events = Vec::new();
    let mut data: Option<String> = None;
    for line in text.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l)) {
        if line.is_empty() {
            events.extend(data.take().filter(|d| !d.is_empty()));
        } else if let Some(rest) = line.strip_prefix("data:") {
            let rest = rest.strip_prefix(' ').unwrap_or(rest);
            match &mut data {
                Some(d) => {
                    d.push('\n');
                    d.push_str(rest);
                }
                None => data = Some(rest.to_string()),
            }
        }
    }
    events.extend(data.filter(|d| !d.is_empty()));
    events
}

/// Reads one response's status line and headers.
fn read_head(read: &mut impl BufRead) -> Result<(u16, Vec<(String, String)>), ClientError> {
    let mut line = String::new();
    let bad = |m: &str| ClientError::BadResponse(m.to_string());
    if read.read_line(&mut line).map_err(ClientError::Io)? == 0 {
        return Err(ClientError::Closed);
    }
    let status = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| bad("no status line"))?;
    let mut headers = Vec::new();
    loop {
        line.clear();
        if read.read_line(&mut line).map_err(ClientError::Io)? == 0 {
            return Err(bad("the headers end early"));
        }
        let l = line.trim_end();
        if l.is_empty() {
            return Ok((status, headers));
        }
        let (name, value) = l
            .split_once(':')
            .ok_or_else(|| bad("a header without a colon"))?;
        headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
    }
}

/// Reads a body framed by `Content-Length`, by chunks, or by the end of the connection.
fn read_body(
    read: &mut impl BufRead,
    headers: &[(String, String)],
) -> Result<Vec<u8>, ClientError> {
    let get = |n: &str| {
        headers
            .iter()
            .find(|(k, _)| k == n)
            .map(|(_, v)| v.as_str())
    };
    let mut body = Vec::new();
    if get("transfer-encoding").is_some_and(|t| t.eq_ignore_ascii_case("chunked")) {
        let mut line = String::new();
        loop {
            line.clear();
            read.read_line(&mut line).map_err(ClientError::Io)?;
            let size = line.trim().split(';').next().unwrap_or("");
            let size = usize::from_str_radix(size, 16)
                .map_err(|_| ClientError::BadResponse(format!("chunk size {size:?}")))?;
            if size == 0 {
                // Trailers, up to the empty line.
                loop {
                    line.clear();
                    if read.read_line(&mut line).map_err(ClientError::Io)? == 0
                        || line.trim().is_empty()
                    {
                        return Ok(body);
                    }
                }
            }
            let start = body.len();
            body.resize(start + size + 2, 0);
            read.read_exact(&mut body[start..])
                .map_err(ClientError::Io)?;
            body.truncate(start + size);
        }
    } else if let Some(n) = get("content-length") {
        let n: usize = n
            .parse()
            .map_err(|_| ClientError::BadResponse(format!("content-length {n:?}")))?;
        body.resize(n, 0);
        read.read_exact(&mut body).map_err(ClientError::Io)?;
    } else {
        read.read_to_end(&mut body).map_err(ClientError::Io)?;
    }
    Ok(body)
}

/// A response whose body is still to be read from `conn`, such as a GET's SSE stream.
pub struct OpenStream {
    pub status: u16,
    /// Header names in lower case, in the order received.
    pub headers: Vec<(String, String)>,
    pub conn: BufReader<std::net::TcpStream>,
}

/// An MCP client over Streamable HTTP on one kept-alive connection. It sends what the
/// specification asks of a client (`Accept` for JSON and SSE, `Mcp-Session-Id` and
/// `MCP-Protocol-Version` after `initialize`) and the bearer token when it has one.
pub struct HttpClient {
    addr: std::net::SocketAddr,
    /// The `Host` header sent; `127.0.0.1:PORT` unless changed.
    pub host: String,
    pub token: Option<String>,
    /// The session id the server assigned in answer to `initialize`.
    pub session: Option<String>,
    protocol_version: Option<String>,
    /// Whether requests are of protocol 2026-07-28: no session, each request carrying its
    /// version and the client's capabilities in `_meta` and its method and name as headers.
    per_request: bool,
    conn: Option<BufReader<std::net::TcpStream>>,
    next_id: i64,
    /// Every message the server sent that was not the awaited response, in order.
    pub other: Vec<Value>,
    /// The capabilities a per-request client declares in each request's `_meta` (none unless
    /// set, e.g. `{"elicitation": {}}` to be asked questions).
    pub capabilities: Value,
}

impl HttpClient {
    pub fn new(addr: std::net::SocketAddr, token: Option<&str>) -> HttpClient {
        HttpClient {
            addr,
            host: addr.to_string(),
            token: token.map(str::to_string),
            session: None,
            protocol_version: None,
            per_request: false,
            conn: None,
            next_id: 1,
            other: Vec::new(),
            capabilities: json!({}),
        }
    }

    /// A new connection to the server, with the response deadline as its read timeout.
    pub fn connect(&self) -> Result<std::net::TcpStream, ClientError> {
        let stream = std::net::TcpStream::connect_timeout(&self.addr, RESPONSE_TIMEOUT)
            .map_err(ClientError::Io)?;
        stream
            .set_read_timeout(Some(RESPONSE_TIMEOUT))
            .map_err(ClientError::Io)?;
        let _ = stream.set_nodelay(true);
        Ok(stream)
    }

    /// The request head: the method, the path `/mcp`, this client's own headers, then
    /// `headers` (which may repeat one to override it).
    fn head(&self, path: &str, method: &str, headers: &[(&str, &str)], body_len: usize) -> String {
        let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {}\r\n", self.host);
        let mut own: Vec<(&str, String)> = vec![
            ("Accept", "application/json, text/event-stream".into()),
            ("Content-Type", "application/json".into()),
        ];
        if let Some(t) = &self.token {
            own.push(("Authorization", format!("Bearer {t}")));
        }
        if let Some(s) = &self.session {
            own.push(("Mcp-Session-Id", s.clone()));
        }
        if let Some(v) = &self.protocol_version {
            own.push(("MCP-Protocol-Version", v.clone()));
        }
        for (name, value) in own {
            if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case(name)) {
                head.push_str(&format!("{name}: {value}\r\n"));
            }
        }
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        if body_len > 0 || method == "POST" {
            head.push_str(&format!("Content-Length: {body_len}\r\n"));
        }
        head.push_str("\r\n");
        head
    }

    /// One HTTP exchange on the kept-alive connection, reconnecting once if the server closed
    /// it; the response is read whole.
    pub fn exchange(
        &mut self,
        method: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Result<HttpResponse, ClientError> {
        self.exchange_to("/mcp", method, headers, body)
    }

    /// [`HttpClient::exchange`] with another path than `/mcp` (a query string included).
    pub fn exchange_to(
        &mut self,
        path: &str,
        method: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Result<HttpResponse, ClientError> {
        let mut message = self.head(path, method, headers, body.len()).into_bytes();
        message.extend_from_slice(body);
        for attempt in 0..2 {
            let conn = match self.conn.take() {
                Some(c) => c,
                None => BufReader::new(self.connect()?),
            };
            match Self::on(conn, &message) {
                Ok((response, conn)) => {
                    let close = response
                        .header("connection")
                        .is_some_and(|c| c.eq_ignore_ascii_case("close"));
                    if !close {
                        self.conn = Some(conn);
                    }
                    return Ok(response);
                }
                // A kept-alive connection the server closed in the meantime: retry on a new one.
                Err(ClientError::Closed | ClientError::Io(_)) if attempt == 0 => continue,
                Err(e) => return Err(e),
            }
        }
        Err(ClientError::Closed)
    }

    fn on(
        mut conn: BufReader<std::net::TcpStream>,
        message: &[u8],
    ) -> Result<(HttpResponse, BufReader<std::net::TcpStream>), ClientError> {
        conn.get_mut().write_all(message).map_err(ClientError::Io)?;
        let (status, headers) = read_head(&mut conn)?;
        // 1xx, 204 and 304 answers never have a body (RFC 9112, section 6.3).
        let body = if status < 200 || status == 204 || status == 304 {
            Vec::new()
        } else {
            read_body(&mut conn, &headers)?
        };
        Ok((
            HttpResponse {
                status,
                headers,
                body,
            },
            conn,
        ))
    }

    /// A client whose requests are of protocol 2026-07-28 (see [`HttpClient::post`]), which
    /// needs no `initialize`.
    pub fn per_request(addr: std::net::SocketAddr, token: Option<&str>) -> HttpClient {
        let mut c = HttpClient::new(addr, token);
        c.per_request = true;
        c
    }

    /// POSTs one JSON-RPC message and returns the whole response. A per-request client
    /// (protocol 2026-07-28) adds what that revision asks of every request: `_meta` with the
    /// protocol version, the client's capabilities and name, and the `MCP-Protocol-Version`,
    /// `Mcp-Method` and (for a call, read or prompt, and a task's methods) `Mcp-Name` headers.
    pub fn post(&mut self, message: &Value) -> Result<HttpResponse, ClientError> {
        if !self.per_request || message.get("id").is_none() {
            return self.exchange("POST", &[], message.to_string().as_bytes());
        }
        let mut message = message.clone();
        let method = message["method"].as_str().unwrap_or_default().to_string();
        let params = &mut message["params"];
        if !params.is_object() {
            *params = json!({});
        }
        // What the caller put in `_meta` (trace context, say) stays beside what the revision
        // requires.
        let given = params["_meta"].as_object().cloned().unwrap_or_default();
        params["_meta"] = json!({
            "io.modelcontextprotocol/protocolVersion": PER_REQUEST_VERSION,
            "io.modelcontextprotocol/clientCapabilities": self.capabilities,
            "io.modelcontextprotocol/clientInfo": {"name": "mcpspec-client", "version": env!("CARGO_PKG_VERSION")}
        });
        for (k, v) in given {
            params["_meta"][k] = v;
        }
        let name = ["name", "uri", "taskId"]
            .iter()
            .find_map(|k| params[*k].as_str())
            .map(str::to_string);
        let mut headers = vec![
            ("MCP-Protocol-Version", PER_REQUEST_VERSION),
            ("Mcp-Method", method.as_str()),
        ];
        if let Some(n) = &name {
            headers.push(("Mcp-Name", n.as_str()));
        }
        self.exchange("POST", &headers, message.to_string().as_bytes())
    }

    /// Sends a request and returns its response message; other messages the server sent on
    /// the way are kept in [`HttpClient::other`]. A non-200 answer is an error.
    pub fn request(&mut self, method: &str, params: Value) -> Result<Value, ClientError> {
        let id = json!(self.next_id);
        self.next_id += 1;
        let response =
            self.post(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))?;
        if response.status != 200 {
            return Err(ClientError::Status {
                status: response.status,
                body: response.text(),
            });
        }
        let mut answer = None;
        for m in response.messages() {
            if answer.is_none() && m.get("id") == Some(&id) && m.get("method").is_none() {
                answer = Some(m);
            } else {
                self.other.push(m);
            }
        }
        answer.ok_or(ClientError::Closed)
    }

    pub fn notify(&mut self, method: &str, params: Value) -> Result<(), ClientError> {
        let response = self.post(&json!({"jsonrpc": "2.0", "method": method, "params": params}))?;
        match response.status {
            200..=299 => Ok(()),
            status => Err(ClientError::Status {
                status,
                body: response.text(),
            }),
        }
    }

    /// The `initialize` handshake followed by `notifications/initialized`; keeps the session
    /// id and the negotiated protocol version for the requests that follow.
    pub fn initialize(&mut self) -> Result<Value, ClientError> {
        self.initialize_with(json!({}))
    }

    /// [`HttpClient::initialize`] declaring `capabilities`.
    pub fn initialize_with(&mut self, capabilities: Value) -> Result<Value, ClientError> {
        self.session = None;
        self.protocol_version = None;
        let id = json!(0);
        let response = self.post(&json!({"jsonrpc": "2.0", "id": id, "method": "initialize",
        "params": {
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": capabilities,
            "clientInfo": {"name": "mcpspec-client", "version": env!("CARGO_PKG_VERSION")}
        }}))?;
        if response.status != 200 {
            return Err(ClientError::Status {
                status: response.status,
                body: response.text(),
            });
        }
        let answer = response
            .messages()
            .into_iter()
            .find(|m| m.get("id") == Some(&id))
            .ok_or(ClientError::Closed)?;
        self.session = response.header("mcp-session-id").map(str::to_string);
        self.protocol_version = answer["result"]["protocolVersion"]
            .as_str()
            .map(str::to_string);
        self.notify("notifications/initialized", json!({}))?;
        Ok(answer)
    }

    /// `tools/call`, returning the whole response message.
    pub fn call_tool(&mut self, name: &str, arguments: Value) -> Result<Value, ClientError> {
        self.request("tools/call", json!({"name": name, "arguments": arguments}))
    }

    /// Ends the session with DELETE and returns the HTTP status.
    pub fn delete_session(&mut self) -> Result<u16, ClientError> {
        Ok(self.exchange("DELETE", &[], b"")?.status)
    }

    /// Opens the session's SSE stream with GET on a connection of its own, read up to the
    /// start of the body.
    pub fn open_stream(&self) -> Result<OpenStream, ClientError> {
        let mut conn = BufReader::new(self.connect()?);
        let head = self.head("/mcp", "GET", &[("Accept", "text/event-stream")], 0);
        conn.get_mut()
            .write_all(head.as_bytes())
            .map_err(ClientError::Io)?;
        let (status, headers) = read_head(&mut conn)?;
        Ok(OpenStream {
            status,
            headers,
            conn,
        })
    }
}

/// One `GET path` to `addr` on a connection of its own (`Connection: close`), without a token:
/// what a load balancer's or an orchestrator's probe sends.
pub fn get(addr: std::net::SocketAddr, path: &str) -> Result<HttpResponse, ClientError> {
    get_with_token(addr, path, None)
}

/// [`get`] with `Authorization: Bearer TOKEN` when there is a token: what a Prometheus
/// configured with the server's token sends.
pub fn get_with_token(
    addr: std::net::SocketAddr,
    path: &str,
    token: Option<&str>,
) -> Result<HttpResponse, ClientError> {
    let authorization =
        token.map_or_else(String::new, |t| format!("Authorization: Bearer {t}\r\n"));
    let stream =
        std::net::TcpStream::connect_timeout(&addr, RESPONSE_TIMEOUT).map_err(ClientError::Io)?;
    stream
        .set_read_timeout(Some(RESPONSE_TIMEOUT))
        .map_err(ClientError::Io)?;
    let mut conn = BufReader::new(stream);
    conn.get_mut()
        .write_all(
            format!(
                "GET {path} HTTP/1.1\r\nHost: {addr}\r\n{authorization}Connection: close\r\n\r\n"
            )
            .as_bytes(),
        )
        .map_err(ClientError::Io)?;
    let (status, headers) = read_head(&mut conn)?;
    let body = read_body(&mut conn, &headers)?;
    Ok(HttpResponse {
        status,
        headers,
        body,
    })
}

/// The address a `serve --http` process announced on its stderr (`mcpspec: listening on
/// http://ADDR/mcp`), waited for with a deadline, and the rest of its stderr line by line
/// (read by a thread of its own until the process closes it, whether or not anyone receives,
/// so that the server never blocks on a full pipe).
pub fn announced_addr(
    child: &mut std::process::Child,
) -> (std::net::SocketAddr, std::sync::mpsc::Receiver<String>) {
    let stderr = child.stderr.take().expect("the server's stderr is piped");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            let _ = tx.send(line);
        }
    });
    let mut said = Vec::new();
    let addr = loop {
        let line = rx.recv_timeout(RESPONSE_TIMEOUT).unwrap_or_else(|e| {
            panic!(
                "the server reports its address on stderr ({e}); it said:\n{}",
                said.join("\n")
            )
        });
        said.push(line.clone());
        if let Some(url) = line.strip_prefix("mcpspec: listening on http://") {
            let addr = url.strip_suffix("/mcp").expect("the endpoint is /mcp");
            break addr.parse().expect("a socket address");
        }
    };
    (addr, rx)
}
