//! `mcpspec new` makes a crate of one's own outside this repository, and that crate works the
//! way its README says, built against mcpspec's crates as crates.io would serve them: the
//! tarballs `cargo package` makes of this checkout, unpacked and wired in with
//! `[patch.crates-io]`, never the checkout's sources. `cargo test` (which builds it and calls
//! both tools over stdio), `cargo run -- init` and `cargo run -- serve` driven by a client
//! here, its own `cargo run -p codegen -- check`, and a spec or SQL mistake failing
//! `cargo build`. The crate builds in the workspace's target directory under `cargo xtask test`
//! (sharing the dependencies compiled with the same features), else in one of its own under
//! this build's (`CARGO_TARGET_TMPDIR`), kept between runs.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use mcpspec_testkit::StdioClient;
use serde_json::json;

use crate::common::EXE;

/// Where the new crate builds: `MCPSPEC_NESTED_TARGET_DIR` when set, else a target directory
/// of its own, since this test may run inside a `cargo test` that holds the workspace's.
/// `cargo xtask test` runs the test binaries itself, holding no lock, and sets it to the
/// workspace's, so the dependencies the workspace has compiled with the same features are
/// not compiled again.
fn target_dir() -> PathBuf {
    std::env::var_os("MCPSPEC_NESTED_TARGET_DIR").map_or_else(
        || Path::new(env!("CARGO_TARGET_TMPDIR")).join("new-crate-target"),
        PathBuf::from,
    )
}

/// `cargo ARGS` in `dir`, building in the new crate's target directory. Without incremental
/// compilation, which would grow that directory by a new session's files on every run (18 GB
/// on a development machine after a day's runs; `.ci/run` turns it off for everything).
fn cargo_command(dir: &Path, args: &[&str]) -> Command {
    mcpspec_testkit::full_tier!("a nested cargo build");
    let mut c = cargo_without_test_env();
    c.args(workspace_profiles())
        .args(args)
        .current_dir(dir)
        .env("CARGO_TARGET_DIR", target_dir())
        .env("CARGO_INCREMENTAL", "0");
    c
}

/// The workspace's per-package settings of the dev profile (`opt-level` of the dependencies
/// it optimises, such as libsqlite3-sys), as `--config` flags: a crate's own profile is its
/// workspace root's, so without them the new crate would build those dependencies once more,
/// unoptimised, beside the workspace's in the target directory they share. Profiles change
/// how fast the build runs, never what it means.
fn workspace_profiles() -> Vec<String> {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../Cargo.toml");
    let text = std::fs::read_to_string(&manifest).expect("the workspace's manifest");
    let mut flags = Vec::new();
    let mut package = None;
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            package = line
                .strip_prefix("[profile.dev.package.")
                .and_then(|l| l.strip_suffix(']'));
        } else if let (Some(p), Some(level)) = (package, line.strip_prefix("opt-level = ")) {
            flags.extend([
                "--config".into(),
                format!("profile.dev.package.{p}.opt-level={level}"),
            ]);
        }
    }
    assert!(
        !flags.is_empty(),
        "no dev profile settings in {}",
        manifest.display()
    );
    flags
}

/// Cargo without the variables `cargo test` gives this test (`CARGO_MANIFEST_DIR`,
/// `CARGO_PKG_*`, ...): cargo compares some of them with what build scripts said they depend
/// on (ring's `CARGO_MANIFEST_DIR`), so a nested build that inherited them would find the
/// workspace's ring stale in the target directory it shares, and the next build outside would
/// find the nested build's stale again, each rebuilding it and everything above it.
fn cargo_without_test_env() -> Command {
    let mut c = Command::new(env!("CARGO"));
    for (key, _) in std::env::vars_os() {
        let key = key.to_string_lossy();
        if key.starts_with("CARGO_PKG_")
            || [
                "CARGO_MANIFEST_DIR",
                "CARGO_MANIFEST_PATH",
                "CARGO_CRATE_NAME",
                "CARGO_BIN_NAME",
                "CARGO_PRIMARY_PACKAGE",
                "CARGO_TARGET_TMPDIR",
            ]
            .contains(&key.as_ref())
        {
            c.env_remove(key.as_ref());
        }
    }
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

/// The new crate's own `cargo run -p codegen -- COMMAND`.
fn codegen(dir: &Path, command: &str) -> Output {
    cargo_command(dir, &["run", "-q", "-p", "codegen", "--", command])
        .output()
        .expect("run codegen")
}

/// The crates a new crate depends on, directly or not: what `cargo package` must make.
const PUBLISHED: &[&str] = &[
    "mcpspec",
    "mcpspec-def",
    "mcpspec-sqlscan",
    "mcpspec-sqlite",
    "mcpspec-codegen",
];

/// Packages this checkout's published crates with `cargo package` (in a target directory of
/// this test's, since the running `cargo test` holds the workspace's), unpacks each tarball
/// and returns the `[patch.crates-io]` table that points a crate at them.
fn packaged_crates(into: &Path) -> String {
    let checkout = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let target = Path::new(env!("CARGO_TARGET_TMPDIR")).join("package-target");
    let mut args = vec!["package", "--no-verify", "--allow-dirty", "--locked", "-q"];
    for p in PUBLISHED {
        args.extend(["-p", p]);
    }
    let out = cargo_without_test_env()
        .args(&args)
        .current_dir(&checkout)
        .env("CARGO_TARGET_DIR", &target)
        .output()
        .expect("run cargo package");
    assert!(
        out.status.success(),
        "cargo package failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let version = env!("CARGO_PKG_VERSION");
    let mut patch = String::from("\n[patch.crates-io]\n");
    for p in PUBLISHED {
        let tarball = target.join(format!("package/{p}-{version}.crate"));
        let untar = Command::new("tar")
            .arg("xzf")
            .arg(&tarball)
            .arg("-C")
            .arg(into)
            .status()
            .expect("run tar");
        assert!(untar.success(), "unpacking {}", tarball.display());
        let unpacked = into.join(format!("{p}-{version}"));
        // What crates.io would serve: no path dependencies, no tests.
        let manifest = std::fs::read_to_string(unpacked.join("Cargo.toml")).unwrap();
        assert!(!manifest.contains("path = \"../"), "{p}: {manifest}");
        assert!(!unpacked.join("tests").exists(), "{p} ships its tests");
        patch += &format!("{p} = {{ path = {:?} }}\n", unpacked.display().to_string());
    }
    patch
}

#[cfg(feature = "full")]
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
    let crates = parent.path().join("crates");
    std::fs::create_dir(&crates).unwrap();
    let patch = packaged_crates(&crates);
    scaffold(&dir);
    let manifest = dir.join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    // By version, as a crate from crates.io; the patch stands in for the registry.
    assert!(
        text.contains(
            "mcpspec = { version = \"0.1\", default-features = false, features = [\"sqlite\"] }"
        ),
        "{text}"
    );
    std::fs::write(&manifest, text + &patch).unwrap();
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
        "spec/migrations/notes/0001_init.sql",
        "src/main.rs",
        "tests/stdio.rs",
        ".mcp.json",
        "README.md",
        "codegen/Cargo.toml",
        "codegen/src/main.rs",
        ".github/workflows/ci.yml",
        "spec/spec.schema.json",
        "spec/notes.lock.json",
        "docs/notes.md",
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
    // `init` ran the scaffold's first migration and recorded it; `migrate` finds it current.
    assert_eq!(crate::common::count_rows(&db, "mcpspec_migrations"), 1);
    let current = cargo(
        dir,
        &["run", "-q", "--", "migrate", "notes", "--db", "notes.db"],
    );
    assert_eq!(
        String::from_utf8_lossy(&current.stdout),
        "notes.db is at migration 0001_init: nothing to apply\n"
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

/// Its own check, `cargo run -p codegen -- check` as its CI workflow runs it: in order as
/// made (contract snapshot and docs included), and a changed tool fails it until the snapshot
/// and docs are written again.
fn checks_with_codegen(dir: &Path) {
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
    let workflow = std::fs::read_to_string(dir.join(".github/workflows/ci.yml")).unwrap();
    assert!(
        workflow.contains("cargo run --locked -p codegen -- check"),
        "{workflow}"
    );
    let spec = dir.join("spec/notes.yaml");
    let text = std::fs::read_to_string(&spec).unwrap();
    // A described change, with the patch step its contract asks for.
    let changed = text
        .replacen("description: ", "description: Changed. ", 1)
        .replacen("version: 0.1.0", "version: 0.1.1", 1);
    assert_ne!(changed, text);
    std::fs::write(&spec, &changed).unwrap();
    let stale = codegen(dir, "check");
    assert_eq!(stale.status.code(), Some(1));
    let report = String::from_utf8_lossy(&stale.stderr);
    assert!(report.contains("docs/notes.md"), "{report}");
    for command in ["snapshot", "docs"] {
        let out = codegen(dir, command);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let again = codegen(dir, "check");
    assert!(
        again.status.success(),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    std::fs::write(&spec, text).unwrap();
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
