//! Every kind of drift `codegen check` promises to catch, introduced by hand in a temporary
//! copy of the workspace's specs, snapshots, docs and editor schema, and caught by the same
//! function the `check` command runs, with the promised message.
//!
//! Each case is data: an edit and the lines the report must contain. Set `UPDATE_EXPECT=1` to
//! rewrite the one fully pinned report (`tests/fixtures/check-output/`).

use std::path::{Path, PathBuf};

use codegen::drift::{Kind, Report};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Copies the directory `from` to `to`, with everything under it.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let p = e.unwrap().path();
        let target = to.join(p.file_name().unwrap());
        if p.is_dir() {
            copy_tree(&p, &target);
        } else {
            std::fs::copy(&p, target).unwrap();
        }
    }
}

/// A temporary workspace holding a copy of everything `check` reads.
struct Copy {
    dir: tempfile::TempDir,
}

impl Copy {
    fn new() -> Copy {
        let dir = tempfile::tempdir().unwrap();
        let root = root();
        for sub in ["spec", "docs"] {
            copy_tree(&root.join(sub), &dir.path().join(sub));
        }
        Copy { dir }
    }

    /// The line number of the first line of `rel` that starts with `text`.
    fn line_of(&self, rel: &str, text: &str) -> usize {
        let body = std::fs::read_to_string(self.path(rel)).unwrap();
        1 + body
            .lines()
            .position(|l| l.starts_with(text))
            .unwrap_or_else(|| panic!("{text:?} is not in {rel}"))
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// Replaces the one occurrence of `from` in `rel` with `to`.
    fn edit(&self, rel: &str, from: &str, to: &str) -> &Copy {
        let p = self.path(rel);
        let text = std::fs::read_to_string(&p).unwrap();
        assert_eq!(text.matches(from).count(), 1, "`{from}` in {rel}");
        std::fs::write(&p, text.replacen(from, to, 1)).unwrap();
        self
    }

    /// Replaces every occurrence of `from` in `rel` with `to`.
    fn edit_all(&self, rel: &str, from: &str, to: &str) -> &Copy {
        let p = self.path(rel);
        let text = std::fs::read_to_string(&p).unwrap();
        assert!(text.contains(from), "`{from}` in {rel}");
        std::fs::write(&p, text.replace(from, to)).unwrap();
        self
    }

    fn check(&self) -> Report {
        self.check_with(None)
    }

    /// [`Copy::check`] with server `name`'s live database at `db`.
    fn check_with(&self, live: Option<(&str, &Path)>) -> Report {
        let live = live.map(|(name, db)| {
            let at = mcpspec::backend::Location::parse(db.as_os_str()).expect("a location");
            (name, at)
        });
        let live = live.as_ref().map(|(name, at)| (*name, at));
        codegen::check::check_repo(self.dir.path(), Path::new("spec"), live)
    }

    fn render(&self, report: &Report) -> String {
        report.render_with(&|p: &Path| {
            std::fs::read_to_string(self.path(&p.to_string_lossy())).unwrap_or_default()
        })
    }

    /// Runs what `codegen snapshot` runs, for servers whose changes the policy allows.
    fn snapshot(&self) {
        let specs = codegen::load_dir(&self.path("spec"), Path::new("spec")).unwrap();
        for spec in &specs {
            let lock = self.path(&spec.lock_path().to_string_lossy());
            let committed = std::fs::read_to_string(&lock).ok();
            match codegen::drift::contract_outcome(spec, committed.as_deref()) {
                codegen::drift::Contract::Refused(f) => panic!("snapshot refused: {}", f.message),
                _ => std::fs::write(&lock, spec.snapshot()).unwrap(),
            }
        }
    }

    /// Runs what `codegen docs` runs.
    fn docs(&self) {
        let specs = codegen::load_dir(&self.path("spec"), Path::new("spec")).unwrap();
        for (path, text) in codegen::render_docs(&specs).unwrap() {
            std::fs::write(self.path(&path.to_string_lossy()), text).unwrap();
        }
    }
}

/// Asserts that the report has findings of exactly `kinds` and that its rendering contains
/// every line of `want`.
fn expect(copy: &Copy, kinds: &[Kind], want: &[&str]) -> String {
    let report = copy.check();
    let text = copy.render(&report);
    let mut got: Vec<Kind> = report.findings.iter().map(|f| f.kind).collect();
    got.sort();
    got.dedup();
    assert_eq!(got, kinds, "{text}");
    for w in want {
        assert!(text.contains(w), "missing {w:?} in:\n{text}");
    }
    text
}

const SPEC: &str = "spec/studio.yaml";

/// How many specs and tools the repository has.
fn repo_counts() -> (usize, usize) {
    let root = &root();
    let specs = codegen::load_dir(&root.join("spec"), Path::new("spec")).unwrap();
    (
        specs.len(),
        specs.iter().map(|s| s.tool_names().len()).sum(),
    )
}
/// The studio spec's version as committed: tests derive their expectations from it, so that
/// editing the spec (as "Add a tool" in the README does) never breaks them.
fn studio_version() -> String {
    let root = &root();
    let text = std::fs::read_to_string(root.join(SPEC)).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix("  version: "))
        .expect("server.version")
        .trim()
        .to_string()
}

/// The next major version step, as `check` asks for one (`0.x` steps the minor).
fn major_step(v: &str) -> String {
    let n: Vec<u64> = v.split('.').map(|p| p.parse().unwrap()).collect();
    if n[0] == 0 {
        format!("0.{}.0", n[1] + 1)
    } else {
        format!("{}.0.0", n[0] + 1)
    }
}

/// The message of a contract change without a version step.
fn no_bump() -> String {
    let v = studio_version();
    format!("but `server.version` is {v}, not past the snapshot's {v}")
}

#[test]
fn a_fresh_copy_passes() {
    let copy = Copy::new();
    let report = copy.check();
    assert!(report.is_ok(), "{}", copy.render(&report));
    let (specs, tools) = repo_counts();
    assert_eq!(report.specs, specs);
    assert!(
        copy.render(&report)
            .starts_with(&format!("ok: {specs} specs, {tools} tools"))
    );
}

#[test]
fn spec_errors_point_at_the_yaml() {
    let copy = Copy::new();
    copy.edit(
        SPEC,
        "    title: Get a learning\n",
        "    titel: Get a learning\n",
    );
    copy.edit(SPEC, "      max_rows: 500\n", "      max_row: 500\n");
    let titel = format!(
        "error: unknown key `titel` in a tool\n  --> spec/studio.yaml:{}:5",
        copy.line_of(SPEC, "    titel: Get a learning")
    );
    let max_row = format!(
        "error: unknown key `max_row` in a statement\n  --> spec/studio.yaml:{}:7",
        copy.line_of(SPEC, "      max_row: 500")
    );
    let text = expect(
        &copy,
        &[Kind::Spec],
        &[
            &titel,
            "= help: did you mean `title`?",
            &max_row,
            "= help: did you mean `max_rows`?",
            "error: check found 2 problems",
        ],
    );
    // Nothing past a spec error is compared: the docs of a spec that does not compile are not
    // reported stale.
    assert!(!text.contains("is stale"), "{text}");
}

#[test]
fn a_statement_that_does_not_prepare() {
    let copy = Copy::new();
    copy.edit(
        SPEC,
        "SELECT id, title, decision\n",
        "SELECT id, title, verdict\n",
    );
    expect(
        &copy,
        &[Kind::Sql],
        &[
            "tool `get_project_context`: statement `recent_decisions` does not prepare against the declared schema: no such column: verdict",
        ],
    );
}

#[test]
fn an_interceptor_query_is_prepared_and_its_columns_checked() {
    // (edit, finding): a missing result column, then a query that does not prepare.
    let cases = [
        (
            ("m.message AS message", "m.message AS note"),
            "`intercept.sql` returns columns [key, action, note] but needs `message`",
        ),
        (
            ("FROM lesson_manifest m", "FROM lesson_manifests m"),
            "`intercept.sql` does not prepare against the declared schema: no such table: lesson_manifests",
        ),
    ];
    for ((from, to), want) in cases {
        let copy = Copy::new();
        copy.edit("spec/lessons.yaml", from, to);
        expect(&copy, &[Kind::Sql], &[want]);
    }
}

#[test]
fn a_narrowed_input_without_a_major_step_is_refused() {
    let copy = Copy::new();
    copy.edit(SPEC, "          maximum: 50\n", "          maximum: 20\n");
    expect(
        &copy,
        &[Kind::Contract, Kind::Stale],
        &[
            &format!(
                "error: the tool contract of `studio` changed (1 breaking) {}",
                no_bump()
            ),
            "| breaking: tool `query_learnings`: input property `limit`: `maximum` tightened from 50 to 20",
            &format!(
                "= help: a breaking change needs a major version step: set `server.version: {}` in spec/studio.yaml, then run `cargo run -p codegen -- snapshot`",
                major_step(&studio_version())
            ),
            "-            \"maximum\": 50,",
            "+            \"maximum\": 20,",
            "docs/studio.md is stale",
        ],
    );
}

#[test]
fn a_major_step_allows_a_breaking_change_once_recorded() {
    let copy = Copy::new();
    copy.edit(SPEC, "          maximum: 50\n", "          maximum: 20\n");
    let next = major_step(&studio_version());
    copy.edit(
        SPEC,
        &format!("  version: {}\n", studio_version()),
        &format!("  version: {next}\n"),
    );
    expect(
        &copy,
        &[Kind::Contract, Kind::Stale],
        &[
            "error: the tool contract of `studio` changed (1 breaking) and spec/studio.lock.json does not record it",
            "= help: review the changes, then run `cargo run -p codegen -- snapshot` and commit spec/studio.lock.json",
        ],
    );
    copy.snapshot();
    copy.docs();
    let report = copy.check();
    assert!(report.is_ok(), "{}", copy.render(&report));
    let lock = std::fs::read_to_string(copy.path("spec/studio.lock.json")).unwrap();
    assert!(lock.contains(&format!("\"version\": \"{next}\"")));
}

#[test]
fn a_removed_or_renamed_tool_is_breaking() {
    let copy = Copy::new();
    copy.edit_all(SPEC, "list_tags", "list_all_tags");
    expect(
        &copy,
        &[Kind::Contract, Kind::Stale],
        &[
            // The description of `capture_learning` names the tool too.
            "changed (1 breaking, 1 compatible, 1 docs)",
            "| breaking: tool `list_tags`: tool removed (or renamed)",
            "| compatible: tool `list_all_tags`: tool added",
        ],
    );
}

#[test]
fn a_new_required_property_is_breaking() {
    let copy = Copy::new();
    copy.edit(
        SPEC,
        "      required: [project_id, title, decision]\n",
        "      required: [project_id, title, decision, why]\n",
    );
    copy.edit(
        SPEC,
        "        decision: {type: string, minLength: 3, maxLength: 4000, description: What was decided and why.}\n",
        "        decision: {type: string, minLength: 3, maxLength: 4000, description: What was decided and why.}\n        why: {type: string}\n",
    );
    copy.edit(
        SPEC,
        "        SELECT printf('D-%03d', last + 1), :project_id, :title, :decision,",
        "        SELECT printf('D-%03d', last + 1), :project_id, :title, :decision || :why,",
    );
    expect(
        &copy,
        &[Kind::Sql, Kind::Contract, Kind::Stale],
        &[
            // The tool's own example no longer passes its input schema.
            "error: the example of `capture_decision` has arguments its input schema refuses: \"why\" is a required property",
            "| breaking: tool `capture_decision`: input property `why` added as required",
            &no_bump(),
        ],
    );
}

#[test]
fn a_changed_result_shape_is_breaking() {
    let copy = Copy::new();
    copy.edit(
        SPEC,
        "        decision: text\n        created_at: text\n",
        "        decision: text\n        created_at: text?\n",
    );
    expect(
        &copy,
        &[Kind::Contract, Kind::Stale],
        &["| breaking: tool `capture_decision`: result field `created_at` may now be absent"],
    );
}

#[test]
fn an_annotation_turning_destructive_is_breaking() {
    let copy = Copy::new();
    copy.edit(
        SPEC,
        "      required: [project_id, title, decision]\n",
        "      required: [project_id, title, decision]\n    annotations: {destructiveHint: true}\n",
    );
    expect(
        &copy,
        &[Kind::Contract, Kind::Stale],
        &[
            "| breaking: tool `capture_decision`: annotation `destructiveHint` became true: the tool may now destroy data",
        ],
    );
}

#[test]
fn a_new_tool_needs_a_minor_step() {
    let copy = Copy::new();
    let text = std::fs::read_to_string(copy.path(SPEC)).unwrap();
    // A name no seed spec uses, so that the test holds whatever tools the spec has.
    let extra = "
  - name: test_added_tool
    description: How many learnings there are.
    sql:
      returns: scalar
      key: count
      query: SELECT count(*) AS n FROM learnings
      columns: {n: integer}
";
    std::fs::write(copy.path(SPEC), text + extra).unwrap();
    expect(
        &copy,
        &[Kind::Contract, Kind::Stale],
        &[
            "changed (1 compatible)",
            "| compatible: tool `test_added_tool`: tool added",
            "a compatible change needs at least a minor version step: set `server.version: ",
        ],
    );
}

#[test]
fn a_description_change_needs_a_patch_step() {
    let copy = Copy::new();
    copy.edit(
        SPEC,
        "description: The learning ID (e.g. \"L-023\").",
        "description: The learning's ID (e.g. \"L-023\").",
    );
    expect(
        &copy,
        &[Kind::Contract, Kind::Stale],
        &[
            "changed (1 docs)",
            "| docs: tool `get_learning`: input property `id`: description changed",
            "a description change needs at least a patch version step",
        ],
    );
}

#[test]
fn a_missing_snapshot() {
    let copy = Copy::new();
    std::fs::remove_file(copy.path("spec/studio.lock.json")).unwrap();
    expect(
        &copy,
        &[Kind::Contract],
        &["error: server `studio` has no contract snapshot"],
    );
}

#[test]
fn stale_docs_show_a_diff_and_the_command() {
    let copy = Copy::new();
    copy.edit(
        "docs/studio.md",
        "Create a database with",
        "Make a database with",
    );
    expect(
        &copy,
        &[Kind::Stale],
        &[
            "error: docs/studio.md is stale: it differs from what the specs generate",
            "= help: run `cargo run -p codegen -- docs` and commit the result",
            "--- docs/studio.md (committed)",
            "+++ docs/studio.md (generated)",
            "-Make a database with",
            "+Create a database with",
        ],
    );
}

#[test]
fn a_live_database_that_drifted() {
    let copy = Copy::new();
    let db = copy.path("live.db");
    let conn = rusqlite::Connection::open(&db).unwrap();
    // The declared schema, less the `decisions` table, a column of `learnings`, and with
    // `projects.status` of another type.
    conn.execute_batch(
        "CREATE TABLE projects (id TEXT PRIMARY KEY, name TEXT NOT NULL, description TEXT,
           repo_path TEXT, tech_stack TEXT, status INTEGER NOT NULL, created_at TEXT NOT NULL);
         CREATE TABLE cycles (id TEXT PRIMARY KEY, project_id TEXT NOT NULL, name TEXT NOT NULL,
           intent TEXT, status TEXT NOT NULL, created_at TEXT NOT NULL);
         CREATE TABLE learnings (id TEXT PRIMARY KEY, title TEXT NOT NULL, problem TEXT NOT NULL,
           solution TEXT NOT NULL, tags TEXT NOT NULL, project_id TEXT, cycle_id TEXT,
           created_at TEXT NOT NULL, updated_at TEXT NOT NULL);",
    )
    .unwrap();
    drop(conn);
    let report = copy.check_with(Some(("studio", &db)));
    let text = copy.render(&report);
    for want in [
        "error: the live database has no table `decisions`",
        "error: the live database's table `learnings` has no column `session_id`",
        "error: column `projects.status` is declared `TEXT` but is `INTEGER` in the live database",
        "tool `capture_decision`: statement `capture_decision` does not prepare against the live database: no such table: decisions",
        "= help: migrate the database, or change `database.schema` and the queries to match it",
    ] {
        assert!(text.contains(want), "missing {want:?} in:\n{text}");
    }
    assert!(report.findings.iter().all(|f| f.kind == Kind::Sql));
    // A live database made from the declared schema has no drift.
    let fresh = copy.path("fresh.db");
    let declared = text_between(&std::fs::read_to_string(copy.path(SPEC)).unwrap());
    rusqlite::Connection::open(&fresh)
        .unwrap()
        .execute_batch(&declared)
        .unwrap();
    let report = copy.check_with(Some(("studio", &fresh)));
    assert!(report.is_ok(), "{}", copy.render(&report));
}

/// An INSERT must set every column the live database has NOT NULL without a default: the
/// studio writes once relied on defaults only `mcpspec init` creates.
#[test]
fn an_insert_that_leaves_a_not_null_column_unset_in_the_live_database() {
    let copy = Copy::new();
    drop(strict_studio_db(&copy, "live.db"));
    let live = copy.path("live.db");
    // The seed specs set every such column themselves.
    let report = copy.check_with(Some(("studio", &live)));
    assert!(report.is_ok(), "{}", copy.render(&report));
    // Leaving `created_at` to a default is a finding at the statement.
    copy.edit(
        SPEC,
        "        INSERT INTO decisions (id, project_id, title, decision, created_at)\n        SELECT",
        "        INSERT INTO decisions (id, project_id, title, decision)\n        SELECT",
    )
    .edit(
        SPEC,
        ":decision, strftime('%Y-%m-%dT%H:%M:%SZ', 'now')",
        ":decision",
    );
    let report = copy.check_with(Some(("studio", &live)));
    let text = copy.render(&report);
    assert!(
        text.contains("tool `capture_decision`: statement `capture_decision` leaves `decisions.created_at` unset, which is NOT NULL without a default in the live database"),
        "{text}"
    );
    assert!(text.contains("--> spec/studio.yaml:"), "{text}");
}

/// `check --db` runs the examples on the live database with every write rolled back: the
/// studio examples hold on a strict Project Studio database (no column defaults) and leave it
/// as it was; a write that leans on a default fails there, at the example, with what came back.
#[test]
fn examples_run_on_the_live_database_and_are_rolled_back() {
    let copy = Copy::new();
    let live = copy.path("live.db");
    drop(strict_studio_db(&copy, "live.db"));
    let schema = || sqlite_master(&live);
    let before = schema();
    let examples = |copy: &Copy| {
        codegen::check::check_examples(copy.dir.path(), Path::new("spec"), "studio", &live)
    };
    let report = examples(&copy);
    assert!(report.is_ok(), "{}", copy.render(&report));
    let conn = rusqlite::Connection::open(&live).unwrap();
    let rows: i64 = conn
        .query_row("SELECT count(*) FROM learnings", [], |r| r.get(0))
        .unwrap();
    assert_eq!(rows, 0, "the write examples were rolled back");
    drop(conn);
    // Neither are the derived structures built in it: they went to a scratch mirror.
    assert_eq!(schema(), before, "the examples changed the schema");
    copy.edit(
        SPEC,
        "session_id, created_at, updated_at)\n        SELECT",
        "session_id, updated_at)\n        SELECT",
    )
    .edit(
        SPEC,
        ":session_id,\n               strftime('%Y-%m-%dT%H:%M:%SZ', 'now'), strftime",
        ":session_id,\n               strftime",
    );
    let text = copy.render(&examples(&copy));
    assert!(
        text.contains("error: the example of `capture_learning` does not hold on"),
        "{text}"
    );
    assert!(text.contains("--> spec/studio.yaml:"), "{text}");
    assert!(text.contains("expected: success"), "{text}");
    assert!(text.contains("CONSTRAINT_VIOLATION"), "{text}");
}

/// `check` runs every spec's examples on a scratch database with its sample rows: a
/// statement edited so that it no longer returns what its example says fails the check at the
/// example's line, with what came back.
#[test]
fn examples_run_on_the_sample_rows_without_a_live_database() {
    let copy = Copy::new();
    let examples =
        |copy: &Copy| codegen::check::check_examples_on_samples(copy.dir.path(), Path::new("spec"));
    let report = examples(&copy);
    assert!(report.is_ok(), "{}", copy.render(&report));
    copy.edit(
        SPEC,
        "        WHERE l.id = :id\n",
        "        WHERE l.id = :id || 'x'\n",
    );
    let text = copy.render(&examples(&copy));
    let line = copy.line_of(SPEC, "      - arguments: {id: L-023}");
    assert!(
        text.contains("error: the example of `get_learning` does not hold on a scratch database with the sample rows"),
        "{text}"
    );
    assert!(
        text.contains(&format!("--> spec/studio.yaml:{line}:9")),
        "{text}"
    );
    assert!(text.contains("NOT_FOUND"), "{text}");
}

/// Every object of a SQLite file's schema, in order.
fn sqlite_master(db: &Path) -> Vec<(String, String, Option<String>)> {
    let conn = rusqlite::Connection::open(db).unwrap();
    let mut st = conn
        .prepare("SELECT type, name, sql FROM sqlite_master ORDER BY type, name")
        .unwrap();
    st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

/// `codegen check --db` never writes the live database, also one without the derived
/// structures (it checks the statements over copies) and one it may not write at all; the
/// statements are still checked against it: a statement that names a column the file lacks
/// is a finding.
#[test]
fn check_with_a_live_database_leaves_it_as_it_was() {
    use std::os::unix::fs::PermissionsExt;
    let copy = Copy::new();
    let live = copy.path("live.db");
    drop(strict_studio_db(&copy, "live.db"));
    let before = sqlite_master(&live);
    let run = || {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_codegen"))
            .args(["check", "--root"])
            .arg(copy.dir.path())
            .arg("--db")
            .arg(format!("studio={}", live.display()))
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        (out.status.success(), text)
    };
    let (ok, text) = run();
    assert!(ok, "{text}");
    assert_eq!(
        sqlite_master(&live),
        before,
        "check changed the schema: {text}"
    );
    std::fs::set_permissions(&live, std::fs::Permissions::from_mode(0o444)).unwrap();
    let (ok, text) = run();
    assert!(ok, "{text}");
    std::fs::set_permissions(&live, std::fs::Permissions::from_mode(0o644)).unwrap();
    let conn = rusqlite::Connection::open(&live).unwrap();
    conn.execute_batch("ALTER TABLE learnings RENAME COLUMN solution TO fix")
        .unwrap();
    drop(conn);
    let before = sqlite_master(&live);
    let (ok, text) = run();
    assert!(!ok && text.contains("no such column: l.solution"), "{text}");
    assert_eq!(
        sqlite_master(&live),
        before,
        "check changed the schema: {text}"
    );
}

/// A database `name` in the copy with the studio spec's declared schema but no column defaults,
/// as a Project Studio database may be.
fn strict_studio_db(copy: &Copy, name: &str) -> rusqlite::Connection {
    let conn = rusqlite::Connection::open(copy.path(name)).unwrap();
    let declared = text_between(&std::fs::read_to_string(copy.path(SPEC)).unwrap());
    let strict = regex::Regex::new(r"(?i)\s+DEFAULT\s+(\([^()]*(\([^()]*\))?[^()]*\)|'[^']*')")
        .unwrap()
        .replace_all(&declared, "")
        .into_owned();
    conn.execute_batch(&strict).unwrap();
    conn
}

/// The DDL under `database.schema` of the studio spec, dedented.
fn text_between(spec: &str) -> String {
    let start = spec.find("  schema: |\n").unwrap() + "  schema: |\n".len();
    // The block ends at the next key (or comment) of the `database` section.
    let end: usize = spec[start..]
        .lines()
        .take_while(|l| l.is_empty() || l.starts_with("    "))
        .map(|l| l.len() + 1)
        .sum();
    spec[start..start + end]
        .lines()
        .map(|l| l.strip_prefix("    ").unwrap_or(l))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn json_output_carries_the_same_findings() {
    let copy = Copy::new();
    copy.edit(SPEC, "          maximum: 50\n", "          maximum: 20\n");
    let report = copy.check();
    let v: serde_json::Value = serde_json::from_str(&report.to_json()).unwrap();
    assert_eq!(v["ok"], false);
    let findings = v["findings"].as_array().unwrap();
    let contract = findings.iter().find(|f| f["kind"] == "contract").unwrap();
    assert_eq!(contract["file"], "spec/studio.yaml");
    assert_eq!(contract["changes"][0]["level"], "major");
    assert_eq!(contract["changes"][0]["tool"], "query_learnings");
    assert!(
        contract["diff"]
            .as_str()
            .unwrap()
            .contains("+            \"maximum\": 20,")
    );
    assert!(
        findings
            .iter()
            .any(|f| f["kind"] == "stale" && f["file"] == "docs/studio.md")
    );
    let ok: serde_json::Value = serde_json::from_str(&Copy::new().check().to_json()).unwrap();
    assert_eq!(
        ok,
        serde_json::json!({"ok": true, "specs": repo_counts().0, "tools": repo_counts().1, "findings": [], "warnings": []})
    );
}

/// The whole report for a breaking change, pinned byte for byte.
#[test]
fn the_breaking_change_report_is_pinned() {
    let copy = Copy::new();
    copy.edit(SPEC, "          maximum: 50\n", "          maximum: 20\n");
    copy.edit(
        SPEC,
        "        decision: text\n        created_at: text\n",
        "        decision: text\n        created_at: text?\n",
    );
    copy.docs();
    // Versions, and where in the lock file the changes are, move with every edit of the spec
    // (a tool added, say); the rest is pinned.
    let got = regex::Regex::new(r"\b\d+\.\d+\.\d+\b")
        .unwrap()
        .replace_all(&copy.render(&copy.check()), "X.Y.Z")
        .into_owned();
    let got = regex::Regex::new(r"(?m)^@@ -\d+,\d+ \+\d+,\d+ @@$")
        .unwrap()
        .replace_all(&got, "@@ hunk @@")
        .into_owned();
    let path = root().join("tests/fixtures/check-output/contract-breaking.stderr");
    if std::env::var_os("UPDATE_EXPECT").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &got).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|_| panic!("{} is missing; run with UPDATE_EXPECT=1", path.display()));
    assert_eq!(got, want);
}

/// The `codegen` command with `--db`: `SERVER=` is split off before a relative path is
/// resolved against the directory the command was run from.
#[test]
fn the_command_line_names_the_server_of_a_live_database() {
    let root = &root();
    let dir = tempfile::tempdir().unwrap();
    let live = rusqlite::Connection::open(dir.path().join("studio.db")).unwrap();
    live.execute_batch(&text_between(
        &std::fs::read_to_string(root.join(SPEC)).unwrap(),
    ))
    .unwrap();
    drop(live);
    let run = |db: &str| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_codegen"))
            .args(["check", "--db", db])
            .current_dir(dir.path())
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    // A relative path after `studio=` is the file beside the caller, and it matches.
    assert_eq!(run("studio=studio.db"), (Some(0), String::new()));
    // The same file checked as another server's database drifts.
    let (code, err) = run("knowledge=studio.db");
    assert_eq!(code, Some(1));
    assert!(err.contains("knowledge_entries"), "{err}");
    // Without the server, several specs make the path ambiguous.
    let (code, err) = run("studio.db");
    assert_eq!(code, Some(2));
    assert!(
        err.starts_with("error: --db needs the server it belongs to: --db SERVER=PATH"),
        "{err}"
    );
    let (code, err) = run("nope=studio.db");
    assert_eq!(code, Some(1));
    assert!(
        err.contains("--db names server `nope`, which no spec declares"),
        "{err}"
    );
}

const KNOWLEDGE: &str = "spec/knowledge.yaml";

#[test]
fn a_removed_resource_or_a_new_required_prompt_argument_is_breaking() {
    let copy = Copy::new();
    copy.edit(KNOWLEDGE, "    name: stats\n", "    name: statistics\n");
    copy.edit(
        KNOWLEDGE,
        "      - name: focus\n",
        "      - name: focus\n        required: true\n",
    );
    expect(
        &copy,
        &[Kind::Contract, Kind::Stale],
        &[
            "changed (2 breaking, 1 compatible)",
            "| breaking: prompt `review_entry`: argument `focus` required changed",
            "| breaking: resource `stats`: resource removed (or renamed)",
            "| compatible: resource `statistics`: resource added",
        ],
    );
}

/// A prompt's question is never required (a client that cannot ask renders without it), so
/// adding one is compatible.
#[test]
fn a_new_prompt_question_is_compatible() {
    let copy = Copy::new();
    copy.edit(
        KNOWLEDGE,
        "    sql:\n      returns: one\n      query: SELECT role FROM knowledge_entries",
        "    ask:\n      - key: audience\n        message: Who reads the entry?\n        schema: {type: object, properties: {who: {type: string}}}\n    sql:\n      returns: one\n      query: SELECT role FROM knowledge_entries",
    );
    expect(
        &copy,
        &[Kind::Contract, Kind::Stale],
        &[
            "changed (1 compatible)",
            "| compatible: prompt `review_entry`: question `audience` added",
        ],
    );
}

/// Task support is part of a tool's contract: `required` turns away clients without the tasks
/// extension, so it breaks them; `optional` does not.
#[test]
fn a_tool_that_must_run_as_a_task_is_breaking() {
    let copy = Copy::new();
    copy.edit(
        KNOWLEDGE,
        "MCPSPEC_TASK_AFTER_MS.\n    task: optional\n",
        "MCPSPEC_TASK_AFTER_MS.\n    task: required\n",
    );
    copy.edit(
        KNOWLEDGE,
        "  - name: kb_list\n",
        "  - name: kb_list\n    task: optional\n",
    );
    expect(
        &copy,
        &[Kind::Contract],
        &[
            "changed (1 breaking, 1 compatible)",
            "| breaking: tool `kb_search`: task support changed from optional to required",
            "| compatible: tool `kb_list`: task support changed from never to optional",
        ],
    );
}

#[test]
fn a_resource_statement_or_completion_that_does_not_prepare() {
    let copy = Copy::new();
    copy.edit(
        KNOWLEDGE,
        "SELECT role, count(*) AS entries, max",
        "SELECT rolle AS role, count(*) AS entries, max",
    );
    copy.edit(
        KNOWLEDGE,
        "      id: SELECT id FROM knowledge_entries WHERE id LIKE",
        "      id: SELECT id FROM knowledge_entry WHERE id LIKE",
    );
    expect(
        &copy,
        &[Kind::Sql],
        &[
            "resource `stats`: the statement does not prepare against the declared schema: no such column: rolle",
            "resource `entry` variable `id`: the completion query does not prepare against the declared schema: no such table: knowledge_entry",
        ],
    );
}

/// Demo calls and start-up jobs run with fixed arguments: arguments the tool's input schema
/// refuses are found before the call fails; a demo call that shows an argument error says so.
#[test]
fn demo_and_start_up_arguments_must_fit_the_input_schema() {
    let copy = Copy::new();
    copy.edit(
        SPEC,
        "  - tool: list_tags\n    note: discover what learnings exist",
        "  - tool: list_tags\n    arguments: {limit: 0}\n    note: discover what learnings exist",
    );
    let report = copy.check();
    let text = copy.render(&report);
    assert!(
        text.contains("the demo call of `list_tags` has arguments its input schema refuses:"),
        "{text}"
    );
    assert!(text.contains("= help: fix the arguments"), "{text}");
    copy.edit(
        SPEC,
        "    arguments: {limit: 0}\n    note: discover what learnings exist",
        "    arguments: {limit: 0}\n    note: discover what learnings exist\n    error: INVALID_ARGUMENTS",
    );
    copy.docs();
    let report = copy.check();
    assert!(report.is_ok(), "{}", copy.render(&report));
}

/// `mcpspec serve NAME` and the generated files use the server's name: a spec file named
/// otherwise is reported at `server.name`.
#[test]
fn a_spec_file_named_unlike_its_server_is_reported() {
    let copy = Copy::new();
    std::fs::rename(copy.path(SPEC), copy.path("spec/project-studio.yaml")).unwrap();
    let report = copy.check();
    let text = copy.render(&report);
    assert!(
        text.contains(
            "error: the spec file is named `project-studio` but declares server `studio`"
        ),
        "{text}"
    );
    assert!(text.contains("--> spec/project-studio.yaml:5:9"), "{text}");
    assert!(
        text.contains(
            "= help: rename the file to `studio.yaml`, or the server to `project-studio`"
        ),
        "{text}"
    );
}

/// The command finds its project when it runs, never where its binary was built: a checkout
/// moved or copied with its `target/` (cargo then reuses the binary) is checked where it is
/// now, through the package directory `cargo run` names in `CARGO_MANIFEST_DIR`, or, run
/// without it, from the current directory up.
#[test]
fn the_project_is_found_where_the_command_runs() {
    let copy = Copy::new();
    std::fs::write(copy.path("Cargo.toml"), "[workspace]\n").unwrap();
    std::fs::create_dir_all(copy.path("codegen/cli")).unwrap();
    std::fs::write(copy.path("codegen/cli/Cargo.toml"), "[package]\n").unwrap();
    copy.edit(
        SPEC,
        "    title: Get a learning\n",
        "    titel: Get a learning\n",
    );
    let package = copy.path("codegen/cli");
    for (manifest_dir, cwd) in [
        (Some(package.as_path()), copy.path("docs")),
        (None, copy.path("spec")),
    ] {
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_codegen"));
        command.arg("check").current_dir(&cwd);
        match manifest_dir {
            Some(dir) => command.env("CARGO_MANIFEST_DIR", dir),
            None => command.env_remove("CARGO_MANIFEST_DIR"),
        };
        let out = command.output().unwrap();
        let text = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{manifest_dir:?}: {text}");
        assert!(
            text.contains("unknown key `titel` in a tool"),
            "{manifest_dir:?}: the copy was checked: {text}"
        );
    }
    // Outside any project, it says how to name one.
    let nowhere = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_codegen"))
        .arg("check")
        .current_dir(nowhere.path())
        .env_remove("CARGO_MANIFEST_DIR")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(text.contains("no project found from"), "{text}");
}
