//! `mcpspec new` makes a crate of one's own outside this repository, and that crate works the
//! way its README says: `cargo test` (which builds it and calls both tools over stdio),
//! `cargo run -- init` and `cargo run -- serve` driven by a client here, and mcpspec's codegen
//! checking it with `--root`, and a spec or SQL mistake failing `cargo build`. The crate's dependencies build in a target directory of their
//! own under this build's (`CARGO_TARGET_TMPDIR`), kept between runs.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use mcpspec_testkit::StdioClient;
use serde_json::json;

use crate::common::EXE;

/// Where the new crate builds: its own target directory, since this test runs inside a
/// `cargo test` that holds the workspace's.
fn target_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("new-crate-target")
}

/// `cargo ARGS` in `dir`, building in the new crate's target directory. Without incremental
/// compilation, which would grow that directory by a new session's files on every run (18 GB
/// on a development machine after a day's runs; `.ci/run` turns it off for everything).
fn cargo_command(dir: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO"));
    c.args(args)
        .current_dir(dir)
        .env("CARGO_TARGET_DIR", target_dir())
        .env("CARGO_INCREMENTAL", "0");
    c
}

/// Runs `cargo ARGS` in `dir` with the new crate's target directory; fails the test with
/// cargo's output when it fails.
fn cargo(dir: &Path, args: &[&str]) -> Output {
    let out = cargo_command(dir, args).output().expect("run cargo");
    assert!(
        out.status.success(),
        "cargo {args:?} failed in {}:\n{}\n{}",
        dir.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// mcpspec's codegen command line on the new crate, with `--root`.
fn codegen(dir: &Path, command: &str) -> Output {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../codegen/Cargo.toml");
    let manifest = manifest.to_str().expect("utf-8");
    cargo_command(
        dir,
        &[
            "run",
            "-q",
            "--manifest-path",
            manifest,
            "--",
            command,
            "--root",
            ".",
        ],
    )
    .output()
    .expect("run codegen")
}

#[test]
fn mcpspec_new_makes_a_crate_that_builds_tests_serves_and_checks_outside_the_workspace() {
    let parent = tempfile::tempdir().expect("tempdir");
    let checkout = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the checkout")
        .canonicalize()
        .expect("canonical checkout");
    assert!(!parent.path().canonicalize().unwrap().starts_with(&checkout));
    let dir = parent.path().join("team-notes");
    scaffold(&dir);
    // Its own test: builds the crate and calls both tools over stdio.
    cargo(&dir, &["test", "-q"]);
    serves_both_tools(&dir);
    checks_with_codegen(&dir);
    mistakes_fail_the_build(&dir);
}

/// `mcpspec new DIR --name notes` writes the crate's files, and refuses a second time.
fn scaffold(dir: &Path) {
    let out = Command::new(EXE)
        .args(["new", dir.to_str().expect("utf-8"), "--name", "notes"])
        .output()
        .expect("run mcpspec new");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for file in [
        "Cargo.toml",
        "Cargo.lock",
        "build.rs",
        "spec/notes.yaml",
        "src/main.rs",
        "tests/stdio.rs",
        ".mcp.json",
        "README.md",
    ] {
        assert!(dir.join(file).is_file(), "{file} was not created");
    }
    let mcp: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join(".mcp.json")).unwrap())
            .expect(".mcp.json is JSON");
    assert_eq!(
        mcp["mcpServers"]["notes"]["args"],
        json!(["serve", "notes"])
    );

    // A second `new` into the same directory changes nothing.
    let again = Command::new(EXE)
        .args(["new", dir.to_str().unwrap()])
        .output()
        .expect("run mcpspec new again");
    assert_eq!(again.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("already exists and is not empty"),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
}

/// Its binary through `cargo run`, as the README says: `init`, then `serve` answering both
/// tools.
fn serves_both_tools(dir: &Path) {
    let db = dir.join("notes.db");
    cargo(
        dir,
        &[
            "run", "-q", "--", "init", "notes", "--sample", "--db", "notes.db",
        ],
    );
    let mut client = StdioClient::spawn(
        cargo_command(dir, &["run", "-q", "--", "serve", "notes", "--db"])
            .arg(&db)
            .stderr(Stdio::null()),
    )
    .expect("cargo run -- serve");
    client.initialize().expect("initialize");
    let found = client
        .call_tool("search_notes", json!({"q": "thursdays"}))
        .expect("search_notes");
    assert_eq!(
        found["result"]["structuredContent"]["notes"][0]["body"],
        "Releases go out on Thursdays after the standup.",
        "{found}"
    );
    let counted = client
        .call_tool("word_count", json!({"text": "a b"}))
        .expect("word_count");
    assert_eq!(
        counted["result"]["structuredContent"],
        json!({"words": 2, "characters": 3})
    );
}

/// Its own check, through mcpspec's codegen with --root: the snapshot and docs are missing
/// until written, then everything is in order.
fn checks_with_codegen(dir: &Path) {
    let first = codegen(dir, "check");
    assert_eq!(first.status.code(), Some(1));
    let report = String::from_utf8_lossy(&first.stderr);
    assert!(
        report.contains("server `notes` has no contract snapshot"),
        "{report}"
    );
    assert!(report.contains("docs/notes.md is missing"), "{report}");
    for command in ["snapshot", "docs"] {
        let out = codegen(dir, command);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let ok = codegen(dir, "check");
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    assert!(
        String::from_utf8_lossy(&ok.stdout).starts_with("ok: 1 spec, 2 tools"),
        "{}",
        String::from_utf8_lossy(&ok.stdout)
    );
    // The editor schema belongs to mcpspec's checkout, not to the user's crate.
    assert!(!dir.join("codegen").exists());
}

/// A mistake in the spec, or in its SQL, fails `cargo build` at its line and column.
fn mistakes_fail_the_build(dir: &Path) {
    let spec = dir.join("spec/notes.yaml");
    let text = std::fs::read_to_string(&spec).unwrap();
    for (mistake, at, says) in [
        (
            text.replace("version: 0.1.0", "version: one"),
            "spec/notes.yaml:4:12",
            "version",
        ),
        (
            text.replace("FROM notes WHERE", "FROM note WHERE"),
            "spec/notes.yaml:",
            "no such table: note",
        ),
    ] {
        std::fs::write(&spec, mistake).unwrap();
        let broken = cargo_command(dir, &["build", "-q"])
            .output()
            .expect("cargo build");
        assert!(!broken.status.success());
        let err = String::from_utf8_lossy(&broken.stderr);
        assert!(err.contains(at) && err.contains(says), "{err}");
    }
    std::fs::write(&spec, text).unwrap();
}
