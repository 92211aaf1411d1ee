//! The `mcpspec` binary on a spec file a test wrote, the way a person without a Rust toolchain
//! uses it: `init --spec`, `serve --spec` over stdio and Streamable HTTP (a SQL tool, a
//! templated resource and a prompt, and bad input refused as a tool error), `call`, `test` and
//! `check --spec` (a broken statement reported at its line), and a spec with a handler tool
//! refused with how to serve it. The binary is this package's, or the one named by
//! `MCPSPEC_BIN` (`.ci/run` points it at the binary `cargo package` built from the published
//! tarballs, what `cargo install mcpspec-cli` builds).

// The quick tier (without the `full` feature) compiles the bundle test's npm helper unused.
#![cfg_attr(not(feature = "full"), allow(dead_code))]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use mcpspec_testkit::{HttpClient, StdioClient};
use serde_json::{Value, json};

/// The binary under test.
fn exe() -> PathBuf {
    std::env::var_os("MCPSPEC_BIN")
        .map_or_else(|| env!("CARGO_BIN_EXE_mcpspec").into(), PathBuf::from)
}

/// A spec over one table: a SQL tool with its example, a templated resource and a prompt.
const SPEC: &str = r#"server:
  name: parts
  version: 0.1.0
  title: Parts
database:
  env: PARTS_DB_PATH
  default_path: {linux: ~/.local/share/parts/parts.db}
  access: read_write
  schema: |
    CREATE TABLE IF NOT EXISTS parts (
      id INTEGER PRIMARY KEY,
      name TEXT NOT NULL,
      stock INTEGER NOT NULL
    );
  sample: |
    INSERT INTO parts (id, name, stock) VALUES (1, 'bolt', 40), (2, 'nut', 0);
tools:
  - name: find_part
    title: Find a part
    description: The part with this id.
    input:
      type: object
      properties:
        id: {type: integer, minimum: 1, description: The part's id.}
      required: [id]
    sql:
      returns: one
      query: SELECT id, name, stock FROM parts WHERE id = :id
      columns: {id: integer, name: text, stock: integer}
      not_found: No part has id {{ id }}.
    examples:
      - arguments: {id: 1}
        returns: {id: 1, name: bolt, stock: 40}
        sample_rows: true
  - name: restock
    title: Restock a part
    description: Adds to a part's stock.
    input:
      type: object
      properties:
        id: {type: integer, minimum: 1}
        add: {type: integer, minimum: 1, maximum: 1000}
      required: [id, add]
    sql:
      returns: one
      query: UPDATE parts SET stock = stock + :add WHERE id = :id RETURNING id, stock
      columns: {id: integer, stock: integer}
      not_found: No part has id {{ id }}.
resources:
  - uri_template: parts://part/{id}
    name: part
    title: A part
    description: One part as text.
    mime_type: text/plain
    sql:
      returns: one
      query: SELECT name, stock FROM parts WHERE id = :id
      columns: {name: text, stock: integer}
    template: "{{ data.name }}: {{ data.stock }} in stock"
prompts:
  - name: reorder
    title: Reorder a part
    description: Ask for a reorder note for one part.
    arguments:
      - {name: part, description: The part's name, required: true}
    messages:
      - {role: user, text: "Write a reorder note for {{ part }}."}
"#;

/// A directory with the spec and a database `init --sample` made from it.
struct Project {
    dir: tempfile::TempDir,
}

impl Project {
    fn new(spec: &str) -> Project {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("parts.yaml"), spec).expect("write the spec");
        Project { dir }
    }

    fn spec(&self) -> PathBuf {
        self.dir.path().join("parts.yaml")
    }

    fn db(&self) -> PathBuf {
        self.dir.path().join("parts.db")
    }

    /// `mcpspec ARGS` in the project's directory.
    fn run(&self, args: &[&str]) -> Output {
        Command::new(exe())
            .args(args)
            .current_dir(self.dir.path())
            .env("MCPSPEC_LOG", "warn")
            .output()
            .expect("run mcpspec")
    }

    /// `mcpspec call --spec parts.yaml TOOL ARGS --db parts.db EXTRA...`: the exit code and
    /// the JSON printed.
    fn call(&self, tool: &str, args: &str, extra: &[&str]) -> (Option<i32>, Value) {
        let mut argv = vec![
            "call",
            "--spec",
            "parts.yaml",
            tool,
            args,
            "--db",
            "parts.db",
        ];
        argv.extend_from_slice(extra);
        let out = self.run(&argv);
        let printed = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}{}", text(&out.stdout), text(&out.stderr)));
        (out.status.code(), printed)
    }

    fn init(&self) {
        let out = self.run(&[
            "init",
            "--spec",
            "parts.yaml",
            "--db",
            "parts.db",
            "--sample",
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

fn text(out: &[u8]) -> String {
    String::from_utf8_lossy(out).into_owned()
}

/// What every session checks, over either transport: the listing, a call, a bad argument, the
/// resource and the prompt.
fn exercise(request: &mut dyn FnMut(&str, Value) -> Value) {
    let tools = request("tools/list", json!({}));
    let names: Vec<&str> = tools["result"]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(names, ["find_part", "restock"], "{tools}");
    let found = request(
        "tools/call",
        json!({"name": "find_part", "arguments": {"id": 1}}),
    );
    assert_eq!(
        found["result"]["structuredContent"],
        json!({"id": 1, "name": "bolt", "stock": 40}),
        "{found}"
    );
    let bad = request(
        "tools/call",
        json!({"name": "find_part", "arguments": {"id": "one"}}),
    );
    assert_eq!(bad["result"]["isError"], true, "{bad}");
    assert!(
        bad.to_string().contains("id"),
        "the failing field is named: {bad}"
    );
    let missing = request(
        "tools/call",
        json!({"name": "find_part", "arguments": {"id": 9}}),
    );
    assert_eq!(missing["result"]["isError"], true, "{missing}");
    assert!(
        missing.to_string().contains("No part has id 9"),
        "{missing}"
    );
    let read = request("resources/read", json!({"uri": "parts://part/2"}));
    assert_eq!(
        read["result"]["contents"][0]["text"], "nut: 0 in stock",
        "{read}"
    );
    let prompt = request(
        "prompts/get",
        json!({"name": "reorder", "arguments": {"part": "nut"}}),
    );
    assert_eq!(
        prompt["result"]["messages"][0]["content"]["text"], "Write a reorder note for nut.",
        "{prompt}"
    );
    let unknown = request("tools/call", json!({"name": "drop_parts", "arguments": {}}));
    assert!(
        unknown.get("error").is_some() || unknown["result"]["isError"] == true,
        "{unknown}"
    );
}

#[test]
fn a_spec_file_is_served_over_stdio() {
    let project = Project::new(SPEC);
    project.init();
    let mut client = StdioClient::spawn(
        Command::new(exe())
            .args(["serve", "--spec"])
            .arg(project.spec())
            .arg("--db")
            .arg(project.db())
            .stderr(Stdio::null()),
    )
    .expect("start mcpspec serve --spec");
    let init = client.initialize().expect("initialize");
    assert_eq!(init["result"]["serverInfo"]["name"], "parts", "{init}");
    exercise(&mut |method, params| client.request(method, params).expect("an answer"));
}

/// `mcpspec serve --spec ... --http 127.0.0.1:0`, once it announced its address.
struct HttpServer {
    child: Child,
    addr: std::net::SocketAddr,
}

impl HttpServer {
    fn start(project: &Project) -> HttpServer {
        let mut child = Command::new(exe())
            .args(["serve", "--spec"])
            .arg(project.spec())
            .arg("--db")
            .arg(project.db())
            .args(["--http", "127.0.0.1:0"])
            .env_remove("MCPSPEC_HTTP_TOKEN")
            .env("MCPSPEC_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn mcpspec serve --http");
        // The rest of the log is not looked at; the kit's thread keeps draining it.
        let (addr, _) = mcpspec_testkit::announced_addr(&mut child);
        HttpServer { child, addr }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_spec_file_is_served_over_streamable_http() {
    let project = Project::new(SPEC);
    project.init();
    let server = HttpServer::start(&project);
    let mut client = HttpClient::new(server.addr, None);
    let init = client.initialize().expect("initialize");
    assert_eq!(init["result"]["serverInfo"]["name"], "parts", "{init}");
    exercise(&mut |method, params| client.request(method, params).expect("an answer"));
}

#[test]
fn call_and_test_work_on_a_spec_file() {
    let project = Project::new(SPEC);
    project.init();
    let (code, v) = project.call("find_part", r#"{"id": 2}"#, &[]);
    assert_eq!(code, Some(0), "{v}");
    assert_eq!(v, json!({"id": 2, "name": "nut", "stock": 0}));
    let tested = project.run(&["test", "--spec", "parts.yaml"]);
    assert!(
        tested.status.success(),
        "{}{}",
        text(&tested.stdout),
        text(&tested.stderr)
    );
    assert!(
        text(&tested.stdout).contains("1 passed"),
        "{}",
        text(&tested.stdout)
    );
}

/// The runtime's guarantees hold for a spec file: `--read-only` refuses a write and still
/// reads, and an argument out of its schema's range never reaches the database.
#[test]
fn a_spec_file_served_read_only_refuses_writes() {
    let project = Project::new(SPEC);
    project.init();
    let args = r#"{"id": 1, "add": 5}"#;
    let (code, v) = project.call("restock", args, &["--read-only"]);
    assert_eq!(code, Some(1), "{v}");
    assert_eq!(v["error"]["code"], "READ_ONLY", "{v}");
    let (code, v) = project.call("restock", r#"{"id": 1, "add": 5000}"#, &[]);
    assert_eq!(code, Some(1), "{v}");
    assert!(
        v.to_string().contains("add"),
        "the failing field is named: {v}"
    );
    let (code, v) = project.call("restock", args, &[]);
    assert_eq!(code, Some(0), "{v}");
    assert_eq!(v, json!({"id": 1, "stock": 45}));
}

#[test]
fn check_reports_a_broken_statement_at_its_line() {
    let ok = Project::new(SPEC);
    let out = ok.run(&["check", "--spec", "parts.yaml"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).starts_with("ok: 1 spec, 2 tools"),
        "{}",
        text(&out.stdout)
    );

    let broken = Project::new(&SPEC.replace(
        "SELECT id, name, stock FROM parts WHERE id = :id",
        "SELECT id, name, stok FROM parts WHERE id = :id",
    ));
    let out = broken.run(&["check", "--spec", "parts.yaml"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    let report = text(&out.stderr);
    let line = SPEC
        .lines()
        .position(|l| l.contains("SELECT id, name, stock"))
        .expect("the statement's line")
        + 1;
    assert!(report.contains(&format!("parts.yaml:{line}:")), "{report}");
    assert!(report.contains("no such column: stok"), "{report}");
    // Nothing was served or written.
    assert!(!broken.db().exists());
}

/// A tool list past the spec's `token_budget` is a warning of `check`, at the budget's line,
/// that fails nothing (in text and in JSON); `tokens` says which list is over it; within the
/// budget, nothing is said.
#[test]
fn check_warns_when_the_tool_list_costs_more_than_its_budget() {
    let over =
        Project::new(&SPEC.replace("  title: Parts\n", "  title: Parts\n  token_budget: 10\n"));
    let out = over.run(&["check", "--spec", "parts.yaml"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let said = text(&out.stdout);
    assert!(
        said.contains("warning: the tool list of `parts` costs about"),
        "{said}"
    );
    assert!(said.contains("past the budget of 10"), "{said}");
    let line = 1 + SPEC.lines().position(|l| l == "  title: Parts").unwrap() + 1;
    assert!(said.contains(&format!("parts.yaml:{line}:")), "{said}");
    assert!(said.contains("ok: 1 spec, 2 tools"), "{said}");
    let out = over.run(&["check", "--spec", "parts.yaml", "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(report["ok"], true, "{report}");
    assert_eq!(report["warnings"][0]["kind"], "budget", "{report}");
    let out = over.run(&["tokens", "--spec", "parts.yaml"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("budget: 10 tokens (token_budget); over it: every tool"),
        "{}",
        text(&out.stdout)
    );

    let within = Project::new(&SPEC.replace(
        "  title: Parts\n",
        "  title: Parts\n  token_budget: 100000\n",
    ));
    let out = within.run(&["check", "--spec", "parts.yaml"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        !text(&out.stdout).contains("warning"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn a_spec_with_a_handler_tool_is_refused_with_how_to_serve_it() {
    let spec = SPEC.replace(
        "resources:",
        r#"  - name: shout
    description: The text in capitals.
    input: {type: object, properties: {text: {type: string}}, required: [text]}
    handler: shout
    output: {type: object, properties: {text: {type: string}}, required: [text]}
resources:"#,
    );
    let project = Project::new(&spec);
    project.init();
    let out = project.run(&["serve", "--spec", "parts.yaml", "--db", "parts.db"]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(err.contains("tool `shout` is written in Rust"), "{err}");
    assert!(err.contains("mcpspec new"), "{err}");
}

#[test]
fn a_spec_with_problems_is_refused_at_start_up_with_each_at_its_line() {
    let project = Project::new(&SPEC.replace("version: 0.1.0", "version: one"));
    let out = project.run(&["serve", "--spec", "parts.yaml", "--db", "parts.db"]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(err.contains("parts.yaml:3:12"), "{err}");
    // No database was created for a spec that does not compile.
    assert!(!project.db().exists());
}

/// A path that is not a spec file, and a directory, are refused as such.
#[test]
fn a_missing_spec_file_is_named() {
    let project = Project::new(SPEC);
    for target in ["nope.yaml", "."] {
        let out = project.run(&["serve", "--spec", target]);
        assert_eq!(out.status.code(), Some(2));
        let err = text(&out.stderr);
        assert!(err.contains(target) && err.contains("cannot read"), "{err}");
    }
}

/// The README's example spec, as printed there, passes `check` and answers its example.
#[test]
fn the_readme_example_checks_and_answers() {
    let readme = include_str!("../../../README.md");
    let spec = readme
        .split("```yaml\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("the README has a YAML example");
    let project = Project::new(spec);
    let checked = project.run(&["check", "--spec", "parts.yaml"]);
    assert!(checked.status.success(), "{}", text(&checked.stderr));
    project.init();
    let (code, v) = project.call("find_part", r#"{"id": 1}"#, &[]);
    assert_eq!(code, Some(0), "{v}");
    assert_eq!(v, json!({"id": 1, "name": "bolt", "stock": 40}));
}

/// The official MCP Bundle CLI (`@anthropic-ai/mcpb`, pinned in `tests/mcpb/`), installed
/// with `npm ci` under this build's temporary directory once, and reused.
fn mcpb() -> PathBuf {
    mcpspec_testkit::full_tier!("the mcpb CLI from npm");
    let here = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcpb");
    let work = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("mcpb");
    let bin = work.join("node_modules/.bin/mcpb");
    let lock = std::fs::read(here.join("package-lock.json")).expect("the pinned lock");
    if std::fs::read(work.join("package-lock.json")).ok().as_ref() != Some(&lock) || !bin.exists() {
        std::fs::create_dir_all(&work).expect("create the mcpb directory");
        for f in ["package.json", "package-lock.json"] {
            std::fs::copy(here.join(f), work.join(f)).expect("copy the pin");
        }
        let installed = Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
            .current_dir(&work)
            .status()
            .unwrap_or_else(|e| panic!("this test needs npm (Node.js) to install the official mcpb CLI: {e}; Debian: apt-get install nodejs npm"));
        assert!(installed.success(), "npm ci of @anthropic-ai/mcpb failed");
    }
    bin
}

/// `mcpspec bundle --spec` writes a bundle that the official `mcpb validate` accepts; unpacked,
/// the server starts the way its manifest says and answers; `server.json` names the bundle by
/// its SHA-256 in the form the MCP registry's schema asks for.
#[cfg(feature = "full")]
#[test]
fn a_bundle_validates_unpacks_and_serves_as_its_manifest_says() {
    let project = Project::new(SPEC);
    project.init();
    let out = project.run(&[
        "bundle",
        "--spec",
        "parts.yaml",
        "--out",
        "dist",
        "--registry-name",
        "io.github.example/parts",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let bundle = project.dir.path().join("dist/parts-0.1.0.mcpb");
    let mcpb = mcpb();
    let unpacked = project.dir.path().join("unpacked");
    let unpack = Command::new(&mcpb)
        .arg("unpack")
        .arg(&bundle)
        .arg(&unpacked)
        .output()
        .expect("mcpb unpack");
    assert!(
        unpack.status.success(),
        "{}{}",
        text(&unpack.stdout),
        text(&unpack.stderr)
    );
    let manifest_path = unpacked.join("manifest.json");
    let valid = Command::new(&mcpb)
        .arg("validate")
        .arg(&manifest_path)
        .output()
        .expect("mcpb validate");
    assert!(
        valid.status.success(),
        "{}{}",
        text(&valid.stdout),
        text(&valid.stderr)
    );
    assert!(
        text(&valid.stdout).contains("validation passes"),
        "{}",
        text(&valid.stdout)
    );

    let manifest: Value = serde_json::from_slice(&std::fs::read(&manifest_path).unwrap()).unwrap();
    let tools: Vec<&str> = manifest["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(tools, ["find_part", "restock"]);
    assert_eq!(manifest["prompts"][0]["name"], "reorder");
    assert_eq!(manifest["user_config"]["database"]["required"], true);
    // Started as a host starts it: ${__dirname} is the unpacked bundle, the user's database
    // fills ${user_config.database}.
    let fill = |s: &str| {
        s.replace("${__dirname}", unpacked.to_str().unwrap())
            .replace("${user_config.database}", project.db().to_str().unwrap())
    };
    let config = &manifest["server"]["mcp_config"];
    let mut command = Command::new(fill(config["command"].as_str().unwrap()));
    for a in config["args"].as_array().unwrap() {
        command.arg(fill(a.as_str().unwrap()));
    }
    for (k, v) in config["env"].as_object().unwrap() {
        command.env(k, v.as_str().unwrap());
    }
    let mut client =
        StdioClient::spawn(command.stderr(Stdio::null())).expect("start the bundled server");
    client.initialize().expect("initialize");
    let found = client
        .call_tool("find_part", json!({"id": 2}))
        .expect("call");
    assert_eq!(
        found["result"]["structuredContent"]["name"], "nut",
        "{found}"
    );

    let registry: Value = serde_json::from_slice(
        &std::fs::read(project.dir.path().join("dist/server.json")).unwrap(),
    )
    .unwrap();
    let sha = Command::new("sha256sum")
        .arg(&bundle)
        .output()
        .expect("sha256sum");
    let sha = text(&sha.stdout)
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_string();
    assert_eq!(registry["name"], "io.github.example/parts");
    assert_eq!(registry["version"], "0.1.0");
    let package = &registry["packages"][0];
    assert_eq!(package["registryType"], "mcpb");
    assert_eq!(package["fileSha256"], sha.as_str());
    assert_eq!(package["transport"]["type"], "stdio");
    let description = registry["description"].as_str().unwrap();
    assert!(
        (1..=100).contains(&description.chars().count()),
        "{description}"
    );
}

/// The published binary has no compiled servers, and says so with what to do instead.
#[test]
fn a_server_name_without_compiled_servers_points_at_spec_files() {
    let project = Project::new(SPEC);
    let listed = project.run(&["list"]);
    assert!(listed.status.success());
    assert!(
        text(&listed.stdout).contains("serve --spec FILE"),
        "{}",
        text(&listed.stdout)
    );
    let out = project.run(&["serve", "parts"]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.contains("no compiled servers") && err.contains("--spec spec/parts.yaml"),
        "{err}"
    );
}

/// A spec with migrations is bundled with them, at the place its `database.migrations` names
/// beside the bundled spec, so that the bundled binary creates and migrates databases from
/// them; the published binary migrates a database of an earlier version.
#[test]
fn a_bundle_carries_the_spec_s_migrations_and_migrate_works_on_the_published_binary() {
    let with_migrations = SPEC.replace(
        "  access: read_write\n",
        "  access: read_write\n  migrations: migrations\n",
    );
    let project = Project::new(&with_migrations);
    let dir = project.dir.path();
    std::fs::create_dir(dir.join("migrations")).expect("mkdir");
    std::fs::write(
        dir.join("migrations/0001_init.sql"),
        "CREATE TABLE parts (id INTEGER PRIMARY KEY, name TEXT NOT NULL);\n",
    )
    .expect("0001");
    // A database of the first version, made before the second migration existed.
    let first = with_migrations
        .replace("      stock INTEGER NOT NULL\n", "")
        .replace("name TEXT NOT NULL,", "name TEXT NOT NULL");
    std::fs::write(project.spec(), &first).expect("spec v1");
    let out = project.run(&["init", "--spec", "parts.yaml", "--db", "parts.db"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    std::fs::write(
        dir.join("migrations/0002_stock.sql"),
        "ALTER TABLE parts ADD COLUMN stock INTEGER NOT NULL DEFAULT 0;\n",
    )
    .expect("0002");
    let second = with_migrations.replace(
        "      stock INTEGER NOT NULL\n",
        "      stock INTEGER NOT NULL DEFAULT 0\n",
    );
    std::fs::write(project.spec(), &second).expect("spec v2");
    let out = project.run(&["migrate", "--spec", "parts.yaml", "--db", "parts.db"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        "applied 0002_stock\nparts.db is at migration 0002_stock\n"
    );

    let out = project.run(&["bundle", "--spec", "parts.yaml", "--out", "dist"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let file = std::fs::File::open(dir.join("dist/parts-0.1.0.mcpb")).expect("bundle");
    let mut archive = zip::ZipArchive::new(file).expect("a zip");
    let unpacked = dir.join("unpacked");
    archive.extract(&unpacked).expect("extract");
    for m in ["0001_init.sql", "0002_stock.sql"] {
        assert_eq!(
            std::fs::read(unpacked.join("server/migrations").join(m)).expect("bundled"),
            std::fs::read(dir.join("migrations").join(m)).expect("source"),
            "{m}"
        );
    }
    let binary = unpacked
        .join("server")
        .join(exe().file_name().expect("a name"));
    let made = Command::new(&binary)
        .args(["init", "--spec"])
        .arg(unpacked.join("server/parts.yaml"))
        .arg("--db")
        .arg(dir.join("fresh.db"))
        .output()
        .expect("run the bundled binary");
    assert!(made.status.success(), "{}", text(&made.stderr));
    let applied = Command::new(&binary)
        .args(["migrate", "--spec"])
        .arg(unpacked.join("server/parts.yaml"))
        .arg("--db")
        .arg(dir.join("fresh.db"))
        .output()
        .expect("run the bundled binary");
    assert!(
        text(&applied.stdout).ends_with("is at migration 0002_stock: nothing to apply\n"),
        "{}{}",
        text(&applied.stdout),
        text(&applied.stderr)
    );
}

/// A spec with skills is bundled with their files, byte for byte (a binary one too), at the
/// place `skills:` names beside the bundled spec, and the bundled binary serves them.
#[test]
fn a_bundle_carries_the_spec_s_skills_and_its_binary_serves_them() {
    let project = Project::new(&format!("{SPEC}skills:\n  - skills/parts-help\n"));
    let dir = project.dir.path();
    let skill = dir.join("skills/parts-help");
    std::fs::create_dir_all(skill.join("assets")).expect("mkdir");
    let files: [(&str, &[u8]); 2] = [
        (
            "SKILL.md",
            b"---\nname: parts-help\ndescription: Find a part by its id.\n---\n\nCall find_part.\n",
        ),
        ("assets/mark.bin", &[0, 159, 146, 150, 255]),
    ];
    for (path, bytes) in files {
        std::fs::write(skill.join(path), bytes).expect("write a skill file");
    }
    let out = project.run(&["bundle", "--spec", "parts.yaml", "--out", "dist"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let file = std::fs::File::open(dir.join("dist/parts-0.1.0.mcpb")).expect("bundle");
    let unpacked = dir.join("unpacked");
    zip::ZipArchive::new(file)
        .expect("a zip")
        .extract(&unpacked)
        .expect("extract");
    for (path, bytes) in files {
        let bundled = std::fs::read(unpacked.join("server/skills/parts-help").join(path));
        assert_eq!(bundled.expect("bundled"), bytes, "{path}");
    }
    let binary = unpacked
        .join("server")
        .join(exe().file_name().expect("a name"));
    let made = Command::new(&binary)
        .args(["init", "--spec"])
        .arg(unpacked.join("server/parts.yaml"))
        .arg("--db")
        .arg(dir.join("fresh.db"))
        .output()
        .expect("run the bundled binary");
    assert!(made.status.success(), "{}", text(&made.stderr));
    let mut client = StdioClient::spawn(
        Command::new(&binary)
            .args(["serve", "--spec"])
            .arg(unpacked.join("server/parts.yaml"))
            .arg("--db")
            .arg(dir.join("fresh.db"))
            .stderr(Stdio::null()),
    )
    .expect("start the bundled server");
    client.initialize().expect("initialize");
    let listed = client
        .request("skills/list", json!({}))
        .expect("skills/list");
    let manifest = &listed["result"]["skills"][0]["resources"];
    assert_eq!(
        manifest[1]["uri"], "skill://parts-help/assets/mark.bin",
        "{listed}"
    );
    assert_eq!(manifest[1]["size"], 5, "{listed}");
    let read = client
        .request(
            "resources/read",
            json!({"uri": "skill://parts-help/assets/mark.bin"}),
        )
        .expect("resources/read");
    assert_eq!(read["result"]["contents"][0]["blob"], "AJ+Slv8=", "{read}");
}

/// A tool's app of one's own (`app: {html: FILE}`) is served as its file says, as SEP-1865
/// says (`_meta.ui` naming it, the MIME type, a CSP declaring no origin), and a bundle carries
/// the file beside the spec.
#[test]
fn an_app_of_one_s_own_is_served_from_its_file_and_bundled() {
    let project = Project::new(&SPEC.replace(
        "    title: Find a part\n",
        "    title: Find a part\n    app: {html: views/part.html}\n",
    ));
    let dir = project.dir.path();
    let html = "<!DOCTYPE html>\n<html><body><p>A part.</p></body></html>\n";
    std::fs::create_dir(dir.join("views")).expect("mkdir");
    std::fs::write(dir.join("views/part.html"), html).expect("write the view");
    project.init();
    let mut client = StdioClient::spawn(
        Command::new(exe())
            .args(["serve", "--spec", "parts.yaml", "--db", "parts.db"])
            .current_dir(dir)
            .stderr(Stdio::null()),
    )
    .expect("start the server");
    client.initialize().expect("initialize");
    let tools = client.request("tools/list", json!({})).expect("tools/list");
    let find = tools["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "find_part")
        .cloned()
        .expect("find_part");
    assert_eq!(
        find["_meta"]["ui"],
        json!({"resourceUri": "ui://parts/find_part"}),
        "{find}"
    );
    let read = client
        .request("resources/read", json!({"uri": "ui://parts/find_part"}))
        .expect("resources/read");
    let c = &read["result"]["contents"][0];
    assert_eq!(c["text"], html, "{read}");
    assert_eq!(c["mimeType"], "text/html;profile=mcp-app", "{read}");
    assert_eq!(
        c["_meta"]["ui"]["csp"]["connectDomains"],
        json!([]),
        "{read}"
    );

    let out = project.run(&["bundle", "--spec", "parts.yaml", "--out", "dist"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let file = std::fs::File::open(dir.join("dist/parts-0.1.0.mcpb")).expect("bundle");
    let unpacked = dir.join("unpacked");
    zip::ZipArchive::new(file)
        .expect("a zip")
        .extract(&unpacked)
        .expect("extract");
    let bundled = std::fs::read_to_string(unpacked.join("server/views/part.html"));
    assert_eq!(bundled.expect("bundled"), html);
}

/// A spec from someone else, checked and tried as a user would before trusting it: its schema
/// attaching a file elsewhere, its sample rows vacuuming into one, a migration doing the same,
/// and a tool's statement too. `check --spec`, `init`, `test` and `migrate` refuse each, say
/// why, and create no file outside their scratch databases and the database asked for.
#[test]
fn checking_a_hostile_spec_writes_nothing_outside_its_database() {
    let outside = tempfile::tempdir().expect("tempdir");
    let o = outside.path().display().to_string();
    let with_migrations = SPEC.replace(
        "  access: read_write\n",
        "  access: read_write\n  migrations: migrations\n",
    );
    let attach_in_schema = SPEC.replace(
        "  schema: |\n",
        &format!("  schema: |\n    ATTACH DATABASE '{o}/schema.db' AS evil;\n    CREATE TABLE evil.t (x);\n"),
    );
    let vacuum_in_sample = SPEC.replace(
        "  sample: |\n",
        &format!("  sample: |\n    VACUUM INTO '{o}/sample.db';\n"),
    );
    let vacuum_in_a_tool = SPEC.replace(
        "      query: SELECT id, name, stock FROM parts WHERE id = :id\n",
        &format!("      query: SELECT id, name, stock FROM parts, (SELECT load_extension('{o}/x')) WHERE id = :id\n"),
    );
    let cases: [(&str, String, Option<String>); 4] = [
        ("schema", attach_in_schema, None),
        ("sample", vacuum_in_sample, None),
        ("tool", vacuum_in_a_tool, None),
        (
            "migration",
            with_migrations,
            Some(format!(
                "CREATE TABLE parts (id INTEGER PRIMARY KEY, name TEXT NOT NULL, stock INTEGER NOT NULL);\nATTACH DATABASE '{o}/migration.db' AS m;\nCREATE TABLE m.t (x);\n"
            )),
        ),
    ];
    for (what, spec, migration) in &cases {
        let project = Project::new(spec);
        if let Some(m) = migration {
            let dir = project.dir.path().join("migrations");
            std::fs::create_dir(&dir).expect("mkdir");
            std::fs::write(dir.join("0001_init.sql"), m).expect("0001");
        }
        let mut runs: Vec<&[&str]> = vec![
            &["check", "--spec", "parts.yaml"],
            &[
                "init",
                "--spec",
                "parts.yaml",
                "--db",
                "made.db",
                "--sample",
            ],
            &["test", "--spec", "parts.yaml"],
            &["init", "--spec", "parts.yaml", "--db", "plain.db"],
        ];
        if migration.is_some() {
            runs.push(&["migrate", "--spec", "parts.yaml", "--db", "empty.db"]);
        }
        // An empty file is an empty database, which `migrate` makes from the migrations.
        std::fs::write(project.dir.path().join("empty.db"), b"").expect("empty.db");
        for args in runs {
            let out = project.run(args);
            let said = format!("{}{}", text(&out.stdout), text(&out.stderr));
            assert!(
                !said.contains("panicked"),
                "{what}: {args:?} crashed: {said}"
            );
            // `check` runs each part of the spec on its own, outside a transaction: it
            // refuses the hostile statement and says why.
            if args[0] == "check" {
                assert_eq!(out.status.code(), Some(1), "{what}: {said}");
                assert!(said.contains("not authorized"), "{what}: {said}");
            }
        }
        let left: Vec<_> = std::fs::read_dir(outside.path())
            .expect("read the outside directory")
            .map(|e| e.expect("an entry").file_name())
            .collect();
        assert!(
            left.is_empty(),
            "{what}: files were written outside: {left:?}"
        );
    }
}

/// A pattern the validator cannot compile (past its size bound) is a finding of `check`, with
/// the property and the pattern, instead of a tool whose every call fails.
#[test]
fn check_refuses_a_pattern_the_validator_cannot_compile() {
    let spec = SPEC.replace(
        "        id: {type: integer, minimum: 1, description: The part's id.}\n",
        "        id: {type: integer, minimum: 1, description: The part's id.}\n        code: {type: string, pattern: \"((a{1,1000}){1,1000}){1,1000}\"}\n",
    );
    let project = Project::new(&spec);
    let out = project.run(&["check", "--spec", "parts.yaml"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    let report = text(&out.stderr);
    assert!(
        report.contains("tool `find_part`: the input schema does not compile (property `code`, pattern `((a{1,1000}){1,1000}){1,1000}`)"),
        "{report}"
    );
}

/// `list --spec FILE` lists the spec's server and tools, as `list` does the compiled ones.
#[test]
fn list_names_a_spec_file_s_tools() {
    let project = Project::new(SPEC);
    let out = project.run(&["list", "--spec", "parts.yaml"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let listed = text(&out.stdout);
    assert!(listed.starts_with("parts 0.1.0 ("), "{listed}");
    assert!(listed.contains("2 tools)"), "{listed}");
    for (tool, kind) in [("find_part", "read"), ("restock", "destructive")] {
        assert!(
            listed
                .lines()
                .any(|l| l.split_whitespace().take(2).eq([tool, kind])),
            "{tool}: {listed}"
        );
    }
}

/// The README's first command: `mcpspec demo --spec spec/studio.yaml` from the repository's
/// root makes a scratch database with the spec's sample rows, serves it from the spec file and
/// drives a session of the spec's `demo:` calls, each printed with its answer.
#[test]
fn the_readme_demo_runs_a_session_on_the_studio_spec() {
    let readme = include_str!("../../../README.md");
    assert!(
        readme.contains("-p mcpspec-cli --no-default-features -- demo --spec spec/studio.yaml"),
        "the README's first command is the demo of spec/studio.yaml"
    );
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = Command::new(exe())
        .args(["demo", "--spec", "spec/studio.yaml"])
        .current_dir(&root)
        .env("MCPSPEC_LOG", "warn")
        .output()
        .expect("run mcpspec demo");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("-> initialize: studio "), "{text}");
    assert!(text.contains("-> tools/list: "), "{text}");
    assert!(text.contains("\"id\": \"L-062\""), "{text}");
    assert!(
        text.trim_end().ends_with("# server exited: exit status: 0"),
        "{text}"
    );
}

/// `mcpspec --version` says the version, the engines and extras the binary was built with,
/// and that it serves spec files: what a bug report needs (this binary has its default
/// features).
#[test]
fn version_names_the_features_of_the_build() {
    let out = Command::new(exe())
        .arg("--version")
        .output()
        .expect("run mcpspec --version");
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!(
            "mcpspec {} (features: sqlite, postgres, mysql, http, otel, embeddings; serves spec files)\n",
            env!("CARGO_PKG_VERSION")
        )
    );
}

/// `doctor` on a project whose database is not made yet, with a Claude Code configuration (a
/// home of the test's own) that has a server whose database is that one, one whose spec is a
/// relative path (a note: it depends on the project Claude Code runs in) and one whose command
/// is not found, a project `.mcp.json` whose relative database is missing, and a Claude
/// Desktop file that is not JSON: each problem named with its help, exit 1; once the database exists and the configuration is fixed, no
/// problem and exit 0.
#[test]
fn doctor_says_what_stands_between_a_spec_and_its_host() {
    let p = Project::new(SPEC);
    let home = tempfile::tempdir().unwrap();
    let spec = p.spec().display().to_string();
    let db = p.db().display().to_string();
    let good = json!({"command": exe(), "args": ["serve", "--spec", spec, "--db", db]});
    let config = json!({"mcpServers": {
        "parts": good,
        "relative": {"command": exe(), "args": ["serve", "--spec", "parts.yaml"]},
        "lost": {"command": "/nowhere/bin/mcpspec", "args": ["serve", "--spec", spec]},
        "other": {"command": "npx", "args": ["-y", "some-other-server"]},
    }});
    std::fs::write(home.path().join(".claude.json"), config.to_string()).unwrap();
    let desktop = home.path().join(".config/Claude");
    std::fs::create_dir_all(&desktop).unwrap();
    std::fs::write(desktop.join("claude_desktop_config.json"), "{ not json").unwrap();
    // The project's own entry, which Claude Code starts in the project: its relative spec is
    // there, its relative database is not.
    let project = |db: &str| {
        let entry =
            json!({"command": exe(), "args": ["serve", "--spec", "parts.yaml", "--db", db]});
        let mcp = json!({"mcpServers": {"here": entry}});
        std::fs::write(p.dir.path().join(".mcp.json"), mcp.to_string()).unwrap();
    };
    project("missing.db");
    let doctor = |home: &Path| {
        Command::new(exe())
            .args(["doctor", "--spec", &spec, "--db", &db])
            .current_dir(p.dir.path())
            .env("HOME", home)
            .env_remove("XDG_CONFIG_HOME")
            .env("MCPSPEC_LOG", "warn")
            .output()
            .expect("run mcpspec doctor")
    };
    let out = doctor(home.path());
    let said = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{said}");
    for expected in [
        "ok: parts 0.1.0 compiles (2 tools)",
        "ok: every statement prepared against the schema, and the examples pass",
        &format!("problem: the database {db} (from --db) does not exist"),
        &format!("help: `mcpspec init --spec {spec} --db {db}` creates it"),
        "note: `relative`: --spec parts.yaml is relative to whichever project Claude Code runs in",
        "problem: `lost`: the command `/nowhere/bin/mcpspec` is not found",
        &format!("problem: `parts`: the database {db} does not exist"),
        "problem: not readable as JSON",
        "problem: `here`: the database missing.db does not exist",
        "5 problems found",
    ] {
        assert!(
            said.contains(expected),
            "doctor did not say {expected:?}:\n{said}"
        );
    }
    assert!(said.starts_with("mcpspec 0.1.0 (features: "), "{said}");
    assert!(!said.contains("some-other-server"), "{said}");

    // Made and fixed: nothing to say but ok.
    assert!(
        p.run(&["init", "--spec", &spec, "--db", &db, "--sample"])
            .status
            .success()
    );
    let fixed = tempfile::tempdir().unwrap();
    let config = json!({"mcpServers": {"parts": good}});
    std::fs::write(fixed.path().join(".claude.json"), config.to_string()).unwrap();
    project("parts.db");
    let out = doctor(fixed.path());
    let said = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{said}");
    assert!(
        said.contains(&format!("ok: database {db} (from --db)")),
        "{said}"
    );
    assert!(said.contains("ok: `here`: "), "{said}");
    assert!(said.ends_with("no problems found\n"), "{said}");
}
