//! The workbench's page in a real browser: Debian's headless Chromium, driven over WebDriver by
//! its own ChromeDriver (`chromium`, `chromium-driver`; `cargo xtask test` installs them) with
//! fantoccini. A call made by the stdio client appears in the live list; a tool's form, filled
//! and submitted, calls it through the workbench's `/mcp`; a bad argument shows the server's
//! message at its field; a resource template is read and a prompt rendered; an example runs
//! and passes; on a guarded listener the page asks for
//! the token and refuses a wrong one; with `dev`, the page follows a reload and shows a refused
//! save's problems. Each stage's screenshot is kept in `target/workbench-screenshots/`.

#![cfg(feature = "full")]

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use mcpspec_testkit::StdioClient;
use serde_json::{Value, json};

use crate::common::sample_db;

/// How long the page may take to show what must come (a failure bound, never a sleep).
const WAIT: Duration = Duration::from_secs(10);

/// ChromeDriver on a port of its own, and the headless Chromium session it started; both end
/// when this is dropped.
struct Browser {
    driver: Child,
    client: Option<Client>,
    runtime: tokio::runtime::Runtime,
    _profile: tempfile::TempDir,
}

/// What to install when a program is missing.
const INSTALL: &str = "the browser tests need Debian's chromium and chromium-driver: `cargo xtask test` installs them, or run `apt-get install chromium chromium-driver`";

impl Browser {
    fn start() -> Browser {
        let chromium = on_path("chromium");
        let port = free_port();
        let mut driver = Command::new(on_path("chromedriver"))
            .arg(format!("--port={port}"))
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("chromedriver: {e}; {INSTALL}"));
        // It says when it listens.
        let out = driver.stdout.take().expect("piped stdout");
        let mut lines = BufReader::new(out).lines();
        loop {
            let line = lines
                .next()
                .expect("chromedriver says it started")
                .expect("chromedriver's output");
            if line.contains("started successfully") {
                break;
            }
        }
        std::thread::spawn(move || for _ in lines {});
        let profile = tempfile::tempdir().expect("a profile directory");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        let capabilities = json!({
            "goog:chromeOptions": {
                "binary": chromium,
                "args": [
                    "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    "--disable-quic", "--no-first-run", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync", "--window-size=1280,900",
                    format!("--user-data-dir={}", profile.path().display()),
                ]
            }
        });
        let Value::Object(capabilities) = capabilities else {
            unreachable!()
        };
        let client = runtime
            .block_on(
                ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
                    .capabilities(capabilities)
                    .connect(&format!("http://127.0.0.1:{port}")),
            )
            .unwrap_or_else(|e| panic!("a Chromium session: {e}; {INSTALL}"));
        Browser {
            driver,
            client: Some(client),
            runtime,
            _profile: profile,
        }
    }

    fn client(&self) -> &Client {
        self.client.as_ref().expect("the session")
    }

    fn goto(&self, url: &str) {
        self.runtime
            .block_on(self.client().goto(url))
            .unwrap_or_else(|e| panic!("open {url}: {e}"));
    }

    /// The element at `css`, once there.
    fn find(&self, css: &str) -> fantoccini::elements::Element {
        self.runtime
            .block_on(
                self.client()
                    .wait()
                    .at_most(WAIT)
                    .for_element(Locator::Css(css)),
            )
            .unwrap_or_else(|e| panic!("{css} within {WAIT:?}: {e}"))
    }

    /// The element at `xpath`, once there.
    fn find_xpath(&self, xpath: &str) -> fantoccini::elements::Element {
        self.runtime
            .block_on(
                self.client()
                    .wait()
                    .at_most(WAIT)
                    .for_element(Locator::XPath(xpath)),
            )
            .unwrap_or_else(|e| panic!("{xpath} within {WAIT:?}: {e}"))
    }

    fn click(&self, css: &str) {
        let e = self.find(css);
        self.runtime
            .block_on(e.click())
            .unwrap_or_else(|e| panic!("click {css}: {e}"));
    }

    /// Types `text` into the field at `css`, emptied first.
    fn fill(&self, css: &str, text: &str) {
        let e = self.find(css);
        self.runtime.block_on(async {
            e.clear().await.expect("clear");
            e.send_keys(text).await.expect("type");
        });
    }

    fn text(&self, css: &str) -> String {
        let e = self.find(css);
        self.runtime.block_on(e.text()).expect("text")
    }

    /// Waits until the element at `css` shows text that `holds` accepts; its text then.
    fn text_until(&self, css: &str, holds: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + WAIT;
        loop {
            let text = self.text(css);
            if holds(&text) {
                return text;
            }
            assert!(Instant::now() < deadline, "{css} still shows {text:?}");
            // The page updates on its own; look again on the next frame.
            self.runtime
                .block_on(self.client().execute(
                    "return new Promise((r) => requestAnimationFrame(() => r(null)))",
                    vec![],
                ))
                .expect("a frame");
        }
    }

    fn attr(&self, css: &str, name: &str) -> Option<String> {
        let e = self.find(css);
        self.runtime.block_on(e.attr(name)).expect("an attribute")
    }

    fn hidden(&self, css: &str) -> bool {
        self.attr(css, "hidden").is_some()
    }

    /// Keeps a screenshot of the page as `name`.png among the test artifacts.
    fn screenshot(&self, name: &str) {
        let png = self
            .runtime
            .block_on(self.client().screenshot())
            .expect("a screenshot");
        let dir = screenshots();
        std::fs::create_dir_all(&dir).expect("the screenshots' directory");
        std::fs::write(dir.join(format!("{name}.png")), png).expect("write the screenshot");
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if let Some(client) = self.client.take() {
            let _ = self.runtime.block_on(client.close());
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// Where the screenshots are kept: `target/workbench-screenshots/`.
fn screenshots() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("the target directory")
        .join("workbench-screenshots")
}

/// Where `program` is on `PATH`; fails saying what to install when it is not.
fn on_path(program: &str) -> PathBuf {
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("{program} is not on PATH: {INSTALL}"))
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

#[test]
fn the_page_shows_a_stdio_clients_calls_and_tries_tools_and_examples() {
    let db = sample_db("knowledge");
    let (mut client, addr, _stderr) = crate::workbench::served(&db.path);
    let browser = Browser::start();
    browser.goto(&format!("http://{addr}/"));
    browser.text_until("#status", |s| s == "live");
    browser.text_until("#server", |s| s == "Knowledge Base 0.3.3");
    // Served without --ui-history: the page says that the calls made before it opened were
    // not kept, and how to keep them.
    let note = browser.text_until("#history", |t| !t.is_empty());
    assert!(note.contains("--ui-history"), "{note}");
    shows_a_stdio_call(&browser, &mut client, addr);
    tries_a_tool(&browser);
    reads_a_resource_and_renders_a_prompt(&browser);
    runs_an_example(&browser);
    drop(browser);
    assert!(
        client
            .finish(Duration::from_secs(10))
            .is_some_and(|s| s.success())
    );
}

/// The stdio client's call in the live list, opened with its statements; the page's own lists
/// asked for once, in one session of its own.
fn shows_a_stdio_call(browser: &Browser, client: &mut StdioClient, addr: SocketAddr) {
    // A call of the stdio client (Claude Code's, in use) appears in the live list.
    let asked = Instant::now();
    client
        .call_tool("kb_list", json!({"limit": 2, "role": "dev"}))
        .expect("a stdio call");
    browser.find_xpath("//table[@id='calls']//td[text()='kb_list']");
    eprintln!(
        "the stdio client's call was shown {} ms after it was answered",
        asked.elapsed().as_millis()
    );
    // The page's lists, asked for at once on load, share one session of the page's.
    let page_requests = |method: &str| -> usize {
        let (_, _, body) = crate::workbench::get(addr, "/ui/calls", &[]);
        let all: Vec<serde_json::Value> = serde_json::from_str(&body).expect("the calls");
        all.iter()
            .filter(|c| c["method"] == method && c["client"] == "mcpspec-workbench")
            .count()
    };
    for list in ["#tool-list li", "#resource-list li", "#prompt-list li"] {
        browser.find(list);
    }
    for list in ["tools/list", "resources/list", "prompts/list"] {
        assert_eq!(page_requests(list), 1, "{list}");
    }
    assert_eq!(page_requests("initialize"), 1);
    browser.click("#calls tbody tr");
    let detail = browser.text_until("#detail", |d| d.contains("\"response\""));
    assert!(detail.contains("\"role\": \"dev\""), "{detail}");
    // The statements it ran, in a table of their own: the spec's name and the operation.
    let ran = browser.text_until("#statements tbody", |t| t.contains("kb_list"));
    assert!(ran.contains("SELECT"), "{ran}");
    browser.screenshot("calls");
}

/// kb_list's form, filled and submitted; a bad argument answered with the server's message at
/// its field; the page's calls in the live list too.
fn tries_a_tool(browser: &Browser) {
    // The tools tab: kb_list's form, filled and submitted.
    browser.click("#tab-tools");
    browser.click("#tool-list button[data-tool='kb_list']");
    browser.fill("[data-path='limit']", "1");
    browser.click("#tool-view form.try button[type='submit']");
    let result = browser.text_until("#tool-view pre.result", |t| t.contains("entries"));
    assert!(!result.contains("isError"), "{result}");
    assert_eq!(
        browser.attr("#tool-view pre.result", "class").as_deref(),
        Some("result")
    );
    browser.screenshot("tool-result");

    // A bad argument: the server's own message, at its field.
    browser.fill("[data-path='limit']", "many");
    browser.click("#tool-view form.try button[type='submit']");
    let message = browser.text_until("[data-path='limit'] ~ .message", |m| !m.is_empty());
    assert!(message.contains("integer"), "{message}");
    assert_eq!(
        browser
            .attr("[data-path='limit']", "aria-invalid")
            .as_deref(),
        Some("true")
    );
    browser.screenshot("tool-bad-argument");

    // The page's calls are in the live list too.
    browser.click("#tab-calls");
    let rows = browser.runtime.block_on(
        browser
            .client()
            .find_all(Locator::XPath("//table[@id='calls']//td[text()='kb_list']")),
    );
    assert!(rows.expect("rows").len() >= 3);
}

/// A resource template's variable filled in and read; a prompt rendered.
fn reads_a_resource_and_renders_a_prompt(browser: &Browser) {
    let entry = "0b6f9e2a-5c1d-4e8f-9a3b-1c2d3e4f5a6b";
    browser.click("#tab-resources");
    browser.click("#resource-list button[data-name='entry']");
    browser.fill("#resource-view [data-path='id']", entry);
    browser.click("#resource-view form.try button[type='submit']");
    let read = browser.text_until("#resource-view pre.result", |t| {
        t.contains("# Knowledge entry")
    });
    assert!(read.contains("Role: dev"), "{read}");
    browser.click("#tab-prompts");
    browser.click("#prompt-list button[data-name='review_entry']");
    browser.fill("#prompt-view [data-path='id']", entry);
    browser.click("#prompt-view form.try button[type='submit']");
    let messages = browser.text_until("#prompt-view pre.result", |t| t.starts_with("[user]"));
    assert!(messages.contains("zod"), "{messages}");
    browser.screenshot("prompt");
}

/// An example runs and passes.
fn runs_an_example(browser: &Browser) {
    browser.click("#tab-examples");
    browser.click("#examples tbody button");
    let outcome = browser.text_until("#examples td.passed, #examples td.failed", |t| {
        !t.is_empty()
    });
    assert_eq!(outcome, "passed");
    browser.screenshot("examples");
}

#[test]
fn the_page_asks_for_the_token_of_a_guarded_server() {
    const TOKEN: &str = "a-token-of-at-least-32-characters-long";
    let db = sample_db("knowledge");
    let server =
        crate::http::HttpServer::start(&db.path, &["--ui"], &[("MCPSPEC_HTTP_TOKEN", TOKEN)]);
    let addr = server.addr;
    let browser = Browser::start();
    browser.goto(&format!("http://{addr}/ui/"));
    // Refused without the token: the page asks for it.
    browser.find("#login:not([hidden])");
    browser.screenshot("token-asked");
    browser.fill("#token", "not-the-token");
    browser.click("#login button");
    let refused = browser.text_until("#login-error", |t| !t.is_empty());
    assert!(refused.contains("refused that token"), "{refused}");
    browser.fill("#token", TOKEN);
    browser.click("#login button");
    browser.text_until("#status", |s| s == "live");
    assert!(browser.hidden("#login"));
    let mut operator = mcpspec_testkit::HttpClient::new(addr, Some(TOKEN));
    operator.initialize().expect("initialize");
    operator
        .call_tool("kb_list", json!({"limit": 1}))
        .expect("a call");
    browser.find_xpath("//table[@id='calls']//td[text()='kb_list']");
    drop(browser);
    drop(server);
}

#[test]
fn the_page_follows_dev_s_reloads() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("notes.yaml");
    let original =
        std::fs::read_to_string("../tests/fixtures/basic/spec.yaml").expect("basic fixture");
    std::fs::write(&spec, &original).unwrap();
    let dev = crate::dev::dev_with(dir.path(), "notes.yaml", &["--ui", "127.0.0.1:0"]);
    let said = dev.stderr_until("mcpspec: workbench on http://");
    let addr: SocketAddr = said
        .lines()
        .find_map(|l| l.strip_prefix("mcpspec: workbench on http://"))
        .and_then(|a| a.trim_end_matches('/').parse().ok())
        .expect("the workbench's address");
    let browser = Browser::start();
    browser.goto(&format!("http://{addr}/ui/"));
    browser.text_until("#status", |s| s == "live");
    browser.click("#tab-tools");
    browser.find("#tool-list button[data-tool='search_notes']");
    crate::dev::save(&spec, format!("{original}{}", crate::dev::COUNT_TOOL)).unwrap();
    browser.find("#tool-list button[data-tool='count_notes']");
    crate::dev::save(
        &spec,
        format!("{original}{}  - name: 7\n", crate::dev::COUNT_TOOL),
    )
    .unwrap();
    browser.find("#problems-box:not([hidden])");
    let problems = browser.text("#problems");
    assert!(problems.contains("notes.yaml:"), "{problems}");
    browser.screenshot("dev-problems");
    crate::dev::save(&spec, &original).unwrap();
    browser.find("#problems-box[hidden]");
    drop(dev);
}
