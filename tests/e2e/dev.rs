//! `mcpspec dev`: a spec served straight from its YAML, each saved edit swapped in while the
//! client stays connected; and the definitions it builds equal the compiled ones.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

use mcpspec_testkit::StdioClient;
use serde_json::{Value, json};

use crate::common::{EXE, rss_kib};

const WAIT: Duration = Duration::from_secs(20);

/// A `dev` session: the client, and the server's stderr line by line.
pub(crate) struct Dev {
    client: StdioClient,
    stderr: Receiver<String>,
}

/// Saves `text` to `path` as an editor that writes a new file and renames it over the old one
/// does (vim, JetBrains' safe write): the watcher never sees it half-written, so a test never
/// races its own save. A save written in place settles before `dev` reads it;
/// [`reloads_leave_memory_flat`] saves in place, a thousand times.
pub(crate) fn save(path: impl AsRef<Path>, text: impl AsRef<[u8]>) -> std::io::Result<()> {
    let path = path.as_ref();
    let mut file = tempfile::NamedTempFile::new()?;
    std::io::Write::write_all(&mut file, text.as_ref())?;
    file.persist(path)?;
    Ok(())
}

/// `mcpspec dev SPEC` in `dir`, its temporary files under `dir/tmp`.
fn dev(dir: &Path, spec: &str) -> Dev {
    dev_with(dir, spec, &[])
}

/// [`dev`] with `extra` arguments after the spec.
pub(crate) fn dev_with(dir: &Path, spec: &str, extra: &[&str]) -> Dev {
    std::fs::create_dir_all(dir.join("tmp")).unwrap();
    let mut client = StdioClient::spawn(
        Command::new(EXE)
            .args(["dev", spec])
            .args(extra)
            .current_dir(dir)
            .env("TMPDIR", dir.join("tmp"))
            .stderr(Stdio::piped()),
    )
    .expect("spawn mcpspec dev");
    let stderr = client.take_stderr().expect("piped stderr");
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let init = client.initialize().expect("initialize");
    assert_eq!(
        init["result"]["capabilities"]["tools"]["listChanged"],
        json!(true),
        "{init}"
    );
    Dev { client, stderr: rx }
}

impl Dev {
    fn tool_names(&mut self) -> Vec<String> {
        let list = self.client.request("tools/list", json!({})).unwrap();
        list["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect()
    }

    fn structured(&mut self, tool: &str, args: Value) -> Value {
        let r = self.client.call_tool(tool, args).unwrap();
        assert_eq!(r["result"]["isError"], json!(false), "{r}");
        r["result"]["structuredContent"].clone()
    }

    /// Waits for the server to announce a new tool list.
    fn list_changed(&mut self) {
        loop {
            let msg = self
                .client
                .recv(WAIT)
                .expect("notifications/tools/list_changed");
            if msg["method"] == "notifications/tools/list_changed" {
                return;
            }
        }
    }

    /// The stderr lines up to and including the first that contains `end`.
    pub(crate) fn stderr_until(&self, end: &str) -> String {
        let mut seen = String::new();
        loop {
            let line = self
                .stderr
                .recv_timeout(WAIT)
                .unwrap_or_else(|_| panic!("no stderr line with {end:?}; saw:\n{seen}"));
            seen.push_str(&line);
            seen.push('\n');
            if line.contains(end) {
                return seen;
            }
        }
    }
}

pub(crate) const COUNT_TOOL: &str = r#"  - name: count_notes
    description: How many notes there are.
    sql:
      returns: scalar
      key: count
      query: SELECT count(*) AS n FROM notes
      columns: {n: integer}
"#;

/// `dev --toolset lean` offers the lean toolset's tools in every version it serves: a save
/// that adds a tool to the spec and to the set lists it; one that adds a tool outside the set
/// does not, and a call of it is an unknown tool. A toolset the spec does not declare refuses
/// to start.
/// `dev --ui`: the workbench shows the calls of every version served, a reload's new tool's
/// included; tells its pages of each reload, and of a save refused with its problems at their
/// lines; and runs every example on the scratch database's sample rows, rolled back.
#[test]
fn dev_s_workbench_shows_the_calls_of_every_version() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("notes.yaml");
    let original =
        std::fs::read_to_string("../tests/fixtures/basic/spec.yaml").expect("basic fixture");
    save(&spec, &original).unwrap();
    let mut s = dev_with(dir.path(), "notes.yaml", &["--ui", "127.0.0.1:0"]);
    let said = s.stderr_until("mcpspec: workbench on http://");
    let addr: std::net::SocketAddr = said
        .lines()
        .find_map(|l| l.strip_prefix("mcpspec: workbench on http://"))
        .and_then(|a| a.trim_end_matches('/').parse().ok())
        .expect("the workbench's address");
    // A page open first: the calls of every version are kept.
    let mut reloads = crate::workbench::stream(addr).filter(|(name, _)| name == "reload");
    s.structured("search_notes", json!({"q": "hel"}));
    save(&spec, format!("{original}{COUNT_TOOL}")).unwrap();
    s.list_changed();
    let (_, reload) = reloads.next().expect("a reload event");
    assert_eq!(reload["ok"], json!(true), "{reload}");
    assert_eq!(reload["tools"], json!(6), "{reload}");
    s.structured("count_notes", json!({}));
    let (status, _, body) = crate::workbench::get(addr, "/ui/calls", &[]);
    assert_eq!(status, 200);
    let calls = crate::workbench::tool_calls(&body);
    let tools: Vec<&str> = calls.iter().map(|c| c["tool"].as_str().unwrap()).collect();
    assert_eq!(tools, ["search_notes", "count_notes"]);

    // Every example runs on the sample rows; delete_note's is rolled back.
    let mut page = mcpspec_testkit::HttpClient::new(addr, None);
    let ran = page
        .exchange_to("/ui/examples", "POST", &[("Mcpspec-Workbench", "1")], b"")
        .expect("POST");
    assert_eq!(ran.status, 200, "{}", ran.text());
    let ran: Value = serde_json::from_slice(&ran.body).unwrap();
    let ran = ran["ran"].as_array().expect("ran");
    assert!(ran.iter().any(|r| r["tool"] == "delete_note"), "{ran:?}");
    for r in ran {
        assert_eq!(r["passed"], json!(true), "{r}");
    }
    assert_eq!(s.structured("count_notes", json!({}))["count"], 1);

    // A broken save: its problem, at its line, until a good save.
    save(&spec, format!("{original}{COUNT_TOOL}  - name: 7\n")).unwrap();
    let (_, refused) = reloads.next().expect("a reload event");
    assert_eq!(refused["ok"], json!(false), "{refused}");
    let problems = refused["problems"].as_str().expect("problems");
    assert!(problems.contains("notes.yaml:"), "{problems}");
}

#[test]
fn dev_follows_a_toolset_across_reloads() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("notes.yaml");
    let original =
        std::fs::read_to_string("../tests/fixtures/basic/spec.yaml").expect("basic fixture");
    let lean = |tools: &str| format!("toolsets:\n  lean: [{tools}]\n");
    save(&spec, format!("{original}{}", lean("search_notes"))).unwrap();
    let mut s = dev_with(dir.path(), "notes.yaml", &["--toolset", "lean"]);
    s.stderr_until("serving notes.yaml (5 tools)");
    assert_eq!(s.tool_names(), ["search_notes"]);
    let with_count = format!("{original}{COUNT_TOOL}");
    save(
        &spec,
        format!("{with_count}{}", lean("search_notes, count_notes")),
    )
    .unwrap();
    s.list_changed();
    assert_eq!(s.tool_names(), ["search_notes", "count_notes"]);
    assert_eq!(s.structured("count_notes", json!({}))["count"], 1);
    save(&spec, format!("{with_count}{}", lean("count_notes"))).unwrap();
    s.list_changed();
    assert_eq!(s.tool_names(), ["count_notes"]);
    let r = s
        .client
        .call_tool("search_notes", json!({"q": "hello"}))
        .unwrap();
    assert_eq!(r["error"]["code"], -32602, "{r}");
    assert_eq!(
        r["error"]["data"]["available"],
        json!(["count_notes"]),
        "{r}"
    );

    let out = Command::new(EXE)
        .args(["dev", "notes.yaml", "--toolset", "heavy"])
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .output()
        .expect("run dev");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("unknown toolset `heavy`; the `basic` server's are lean"),
        "{err}"
    );
}

/// A skill's file or an app's HTML saved while `dev` serves is served at once, as an edit of
/// the spec is: the entry's description follows, and the view's text; a broken skill keeps the
/// last good version.
#[test]
fn dev_follows_the_spec_s_skills_and_views() {
    let dir = tempfile::tempdir().unwrap();
    let original =
        std::fs::read_to_string("../tests/fixtures/basic/spec.yaml").expect("basic fixture");
    let with_view = original.replacen(
        "  - name: search_notes\n",
        "  - name: search_notes\n    app: {html: views/notes.html}\n",
        1,
    );
    assert_ne!(with_view, original);
    save(
        dir.path().join("notes.yaml"),
        format!("{with_view}skills:\n  - skills/notes-help\n"),
    )
    .unwrap();
    let view = dir.path().join("views/notes.html");
    std::fs::create_dir_all(view.parent().unwrap()).unwrap();
    save(&view, "<!DOCTYPE html><p>first</p>").unwrap();
    let skill = dir.path().join("skills/notes-help/SKILL.md");
    std::fs::create_dir_all(skill.parent().unwrap()).unwrap();
    let write = |description: &str| {
        let text = format!("---\nname: notes-help\ndescription: {description}\n---\n\nBody.\n");
        save(&skill, text).unwrap();
    };
    write("The first words.");
    let mut s = dev(dir.path(), "notes.yaml");
    s.stderr_until("serving notes.yaml");
    let described = |s: &mut Dev| {
        let list = s.client.request("skills/list", json!({})).unwrap();
        list["result"]["skills"][0]["frontmatter"]["description"].clone()
    };
    assert_eq!(described(&mut s), "The first words.");
    write("Other words, longer than the first.");
    s.list_changed();
    assert_eq!(described(&mut s), "Other words, longer than the first.");
    let shown = |s: &mut Dev| {
        let uri = json!({"uri": "ui://basic/search_notes"});
        let read = s.client.request("resources/read", uri).unwrap();
        read["result"]["contents"][0]["text"].clone()
    };
    assert_eq!(shown(&mut s), "<!DOCTYPE html><p>first</p>");
    save(&view, "<!DOCTYPE html><p>second, longer</p>").unwrap();
    s.list_changed();
    assert_eq!(shown(&mut s), "<!DOCTYPE html><p>second, longer</p>");
    // A SKILL.md without its description is refused; the last good version keeps serving.
    save(&skill, "---\nname: notes-help\n---\n").unwrap();
    s.stderr_until("has problems; still serving the last good version");
    assert_eq!(described(&mut s), "Other words, longer than the first.");
}

/// A SQL tool added to the file is listed and answers after the save, without a restart; a
/// broken edit is reported with its place and the last good version keeps serving; a schema
/// change makes a new scratch database with the new column.
#[test]
fn dev_swaps_in_each_valid_edit_and_keeps_serving_through_a_broken_one() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("notes.yaml");
    let original =
        std::fs::read_to_string("../tests/fixtures/basic/spec.yaml").expect("basic fixture");
    save(&spec, &original).unwrap();
    let mut s = dev(dir.path(), "notes.yaml");
    s.stderr_until("serving notes.yaml (5 tools) on a scratch database");
    assert_eq!(
        s.tool_names(),
        [
            "search_notes",
            "delete_note",
            "find_note",
            "list_notes",
            "notes_between"
        ]
    );
    let found = s.structured("search_notes", json!({"q": "hel"}));
    assert_eq!(found["notes"][0]["body"], "hello", "{found}");

    save(&spec, format!("{original}{COUNT_TOOL}")).unwrap();
    s.list_changed();
    assert_eq!(
        s.tool_names(),
        [
            "search_notes",
            "delete_note",
            "find_note",
            "list_notes",
            "notes_between",
            "count_notes"
        ]
    );
    assert_eq!(s.structured("count_notes", json!({})), json!({"count": 1}));
    // Each call is logged as `serve` logs it, for the client's log of the server.
    let said = s.stderr_until("tool=\"count_notes\"");
    assert!(said.contains("outcome=\"ok\""), "{said}");

    // A table that does not exist: the statement does not prepare, so the edit is refused.
    let broken = format!(
        "{original}{}",
        COUNT_TOOL.replace("FROM notes", "FROM nots")
    );
    save(&spec, broken).unwrap();
    let said = s.stderr_until("still serving the last good version");
    assert!(said.contains("no such table: nots"), "{said}");
    assert_eq!(s.structured("count_notes", json!({})), json!({"count": 1}));

    // A spec error points at the file, line and column, with its help line.
    save(&spec, original.replace("returns: execute", "returns: exec")).unwrap();
    let said = s.stderr_until("still serving the last good version");
    assert!(said.contains("--> notes.yaml:"), "{said}");
    assert!(said.contains("help:"), "{said}");
    assert_eq!(
        s.tool_names(),
        [
            "search_notes",
            "delete_note",
            "find_note",
            "list_notes",
            "notes_between",
            "count_notes"
        ]
    );

    // A new column in the schema and the sample rows: a new scratch database holds it.
    let with_author = format!("{original}{COUNT_TOOL}")
        .replace("meta TEXT);", "meta TEXT, author TEXT);")
        .replace(
            "INSERT INTO notes (body, meta) VALUES ('hello', '{\"pinned\": true}');",
            "INSERT INTO notes (body, meta, author) VALUES ('hello', '{\"pinned\": true}', 'ada');",
        )
        .replace(
            "SELECT id, body, meta FROM notes",
            "SELECT id, body, meta, author FROM notes",
        )
        .replace(
            "columns: {id: integer, body: text, meta: json?}",
            "columns: {id: integer, body: text, meta: json?, author: text?}",
        );
    save(&spec, with_author).unwrap();
    s.list_changed();
    let found = s.structured("search_notes", json!({"q": "hel"}));
    assert_eq!(found["notes"][0]["author"], "ada", "{found}");
    let status = s.client.finish(WAIT);
    assert!(status.is_some_and(|st| st.success()), "{status:?}");
    // The scratch databases went with the session.
    let left: Vec<_> = std::fs::read_dir(dir.path().join("tmp")).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");
}

/// Handler tools run the handlers compiled into the binary for the server of that name; a
/// server the binary has no handlers for answers a clear error instead.
#[test]
fn dev_runs_compiled_handlers_and_says_when_there_are_none() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let git = |args: &[&str]| {
        let ok = Command::new("git")
            .args(args)
            .current_dir(root)
            .status()
            .unwrap();
        assert!(ok.success());
    };
    git(&["init", "-q", "-b", "main"]);
    save(
        root.join(".pm.json"),
        r#"{"databases_dir": ".pm/databases", "dumps_dir": ".pm/dumps", "worktrees_dir": ".pm/worktrees", "default_database": "app", "allowed_databases": ["app"]}"#,
    )
    .unwrap();
    let pm = std::fs::read_to_string("../spec/pm.yaml").unwrap();
    save(root.join("pm.yaml"), &pm).unwrap();
    let mut s = dev(root, "pm.yaml");
    let info = s.structured("project.info", json!({}));
    assert_eq!(info["config"]["default_database"], "app", "{info}");

    // The same spec under another server name: this binary has no handlers for it.
    let other = pm.replacen("name: pm", "name: pm_copy", 1);
    assert_ne!(other, pm);
    save(root.join("pm.yaml"), other).unwrap();
    s.list_changed();
    let r = s.client.call_tool("project.info", json!({})).unwrap();
    let text = r["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert_eq!(r["result"]["isError"], json!(true), "{r}");
    assert!(text.contains("HANDLER_NOT_COMPILED"), "{r}");
    assert!(
        text.contains("this binary has no handlers for server `pm_copy`"),
        "{r}"
    );
    let status = s.client.finish(WAIT);
    assert!(status.is_some_and(|st| st.success()), "{status:?}");
}

/// What `dev` serves is what `cargo build` compiles: every seed server's definition built in
/// memory from its YAML equals, field by field, the compiled table baked from the same builder,
/// and binds the spec's own calls to the same SQL parameters.
#[test]
fn definitions_built_from_yaml_equal_the_compiled_ones() {
    let mut bound = 0;
    for server in server::servers::seeds() {
        let compiled = server.def();
        let file = Path::new(compiled.spec_file);
        let on_disk = Path::new("..").join(file);
        let text = std::fs::read_to_string(&on_disk).unwrap();
        let dir = on_disk.parent().expect("the spec's directory");
        let spec = codegen::compile_in(dir, file, &text).expect("the seed spec compiles");
        let live = codegen::defs::server_def(&spec);
        assert_eq!(live, compiled, "{}", compiled.name);
        let calls = compiled.demo.iter().map(|d| (d.tool, d.arguments));
        for (tool, arguments) in
            calls.chain(compiled.examples.iter().map(|e| (e.tool, e.arguments)))
        {
            bound += usize::from(same_params(compiled, live, tool, arguments));
        }
    }
    assert!(bound > 0, "no call of a seed spec binds SQL parameters");
}

/// Whether `tool` has statements, after checking that both definitions bind `arguments` alike:
/// the same parameter table and defaults, from which the runtime binds (a pure function of
/// them, which the runtime's golden tests call), and arguments that are an object.
fn same_params(
    compiled: &mcpspec::def::ServerDef,
    live: &mcpspec::def::ServerDef,
    tool: &str,
    arguments: &str,
) -> bool {
    let (Some(a), Some(b)) = (compiled.tool(tool), live.tool(tool)) else {
        panic!("`{tool}` is in both definitions");
    };
    if a.binding.statements().is_empty() {
        return false;
    }
    let Ok(Value::Object(_)) = serde_json::from_str::<Value>(arguments) else {
        panic!("arguments of {tool}");
    };
    assert_eq!(
        (a.bind, a.defaults),
        (b.bind, b.defaults),
        "{}: `{tool}` {arguments}",
        compiled.name
    );
    true
}

/// `dev` reads a spec only from a regular file of bounded size: a link to `/dev/zero`, a FIFO
/// or a huge one-line file is refused at once with why (nothing read without end, nothing
/// blocked), a long line's diagnostic shows a window of it, and while serving, a file turned
/// into a FIFO is reported and a later good save is still served.
#[test]
fn dev_reads_only_regular_files_of_bounded_size() {
    let dir = tempfile::tempdir().unwrap();
    let run = |spec: &str| {
        let out = Command::new(EXE)
            .args(["dev", spec])
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .output()
            .expect("run mcpspec dev");
        assert!(!out.status.success(), "{spec}");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    std::os::unix::fs::symlink("/dev/zero", dir.path().join("zero.yaml")).unwrap();
    assert!(run("zero.yaml").contains("not a regular file"));
    let fifo = dir.path().join("fifo.yaml");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    assert!(run("fifo.yaml").contains("not a regular file"));
    let huge = format!("server: {{name: x, title: {}}}\n", "y".repeat(5 << 20));
    save(dir.path().join("huge.yaml"), huge).unwrap();
    let err = run("huge.yaml");
    assert!(err.contains("at most 4194304 bytes"), "{err}");
    // A long line within the limit: its diagnostic shows a window, not the line.
    let long = format!("server: {{name: x, titel: {}}}\n", "y".repeat(1 << 20));
    save(dir.path().join("long.yaml"), long).unwrap();
    let err = run("long.yaml");
    assert!(err.len() < 4096, "{} bytes of diagnostics", err.len());
    assert!(err.contains("titel"), "{err}");

    // Serving: the file becomes a FIFO, then a good spec again.
    let spec = dir.path().join("notes.yaml");
    let original = std::fs::read_to_string("../tests/fixtures/basic/spec.yaml").unwrap();
    save(&spec, &original).unwrap();
    let mut s = dev(dir.path(), "notes.yaml");
    s.stderr_until("serving notes.yaml (5 tools)");
    std::fs::remove_file(&spec).unwrap();
    assert!(
        Command::new("mkfifo")
            .arg(&spec)
            .status()
            .unwrap()
            .success()
    );
    s.stderr_until("not a regular file");
    std::fs::remove_file(&spec).unwrap();
    save(
        &spec,
        original.replace("tools:\n", &format!("tools:\n{COUNT_TOOL}")),
    )
    .unwrap();
    s.stderr_until("reloaded notes.yaml (6 tools)");
    assert!(s.tool_names().contains(&"count_notes".to_string()));
}

/// Reloads cost no memory once a version has been seen: 1,000 saves that switch the spec
/// between two versions (one adds a tool with a 40 KB description) leave the server's memory
/// where it was after the first 100 (before, each such save leaked its definitions and
/// templates: 9 MB over 360 saves). Definitions are built once per version and the engine's
/// templates are owned by the engine, so nothing is leaked per reload.
#[test]
fn reloads_leave_memory_flat() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("notes.yaml");
    let original =
        std::fs::read_to_string("../tests/fixtures/basic/spec.yaml").expect("basic fixture");
    let long = "All about the notes, said at length. ".repeat(1100);
    let other = format!(
        "{original}{}",
        COUNT_TOOL.replace("How many notes there are.", &long)
    );
    std::fs::write(&spec, &original).unwrap();
    let mut s = dev(dir.path(), "notes.yaml");
    s.stderr_until("serving notes.yaml (5 tools) on a scratch database");
    let pid = s.client.pid();
    let mut warm = 0;
    for i in 0..1000 {
        let text = if i % 2 == 0 { &other } else { &original };
        std::fs::write(&spec, text).unwrap();
        s.list_changed();
        if i == 100 {
            warm = rss_kib(pid);
        }
    }
    let after = rss_kib(pid);
    eprintln!("dev's memory after 100 reloads: {warm} KiB; after 1,000: {after} KiB");
    assert!(
        after <= warm + 4 * 1024,
        "900 reloads of versions seen before grew the server from {warm} KiB to {after} KiB"
    );
    assert_eq!(s.tool_names().len(), 5, "the last save is the original");
}
