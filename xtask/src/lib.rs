//! This repository's chores, in rust-analyzer's manner: what only mcpspec's own checkout
//! keeps, so that the compiler library knows no repository. The spec-language reference
//! (`docs/spec-reference.md`) quotes this repository's seed specs and codegen fixtures, and the
//! editor schema (`codegen/spec.schema.json`) is committed beside the compiler. `cargo xtask
//! codegen` writes both; `cargo xtask check` (and this crate's tests, so `cargo test`) fails
//! when either is stale.

pub mod api;
pub mod dist;
pub mod modules;

use std::path::{Path, PathBuf};

use codegen::drift::{Kind, Report};

/// The command that writes what [`rendered`] renders.
pub const COMMAND: &str = "cargo xtask codegen";

/// Where the spec-language reference is committed, relative to the workspace root.
pub const REFERENCE: &str = "docs/spec-reference.md";

/// Where the editor schema is committed, relative to the workspace root.
pub const EDITOR_SCHEMA: &str = "codegen/spec.schema.json";

/// Where the runtime's public API listing is committed ([`api`]), relative to the root.
pub const PUBLIC_API: &str = "server/runtime/public-api.txt";

/// The specs in `spec/` the reference quotes besides the codegen fixtures: the seed servers,
/// the OAuth example and the test doubles, which this repository compiles and tests. A spec someone adds to
/// `spec/` (as docs/getting-started.md does) leaves the reference as it is.
const QUOTED_SPECS: &[&str] = &[
    "conformance",
    "downstream",
    "knowledge",
    "laminark",
    "lessons",
    "pm",
    "studio",
    "teamnotes",
];

/// The workspace root of this checkout.
/// The variables `cargo run` gives the program it runs (`cargo xtask` is `cargo run -p xtask`)
/// that a cargo started from it must not inherit: cargo compares some of them with what a
/// build script said it depends on (ring's `rerun-if-env-changed=CARGO_MANIFEST_DIR`, say), so
/// a build started here and one started from a shell would each find the other's ring stale
/// and rebuild it and everything above it (rustls, reqwest, the engines: about half a minute
/// of a clean CI run, twice).
pub const CARGO_RUN_ENV: &[&str] = &[
    "CARGO_MANIFEST_DIR",
    "CARGO_MANIFEST_PATH",
    "CARGO_CRATE_NAME",
    "CARGO_BIN_NAME",
    "CARGO_PRIMARY_PACKAGE",
];

/// `program` (cargo, or a tool that runs cargo) with none of [`CARGO_RUN_ENV`] nor the
/// `CARGO_PKG_*` variables.
pub fn clean(program: impl AsRef<std::ffi::OsStr>) -> std::process::Command {
    let mut c = std::process::Command::new(program);
    for (key, _) in std::env::vars_os() {
        let key = key.to_string_lossy();
        if CARGO_RUN_ENV.contains(&key.as_ref()) || key.starts_with("CARGO_PKG_") {
            c.env_remove(key.as_ref());
        }
    }
    c
}

/// The cargo that runs xtask (`CARGO`), else `cargo` on the PATH, without `cargo run`'s
/// variables ([`clean`]).
pub fn cargo() -> std::process::Command {
    clean(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
}

pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives in the workspace")
        .to_path_buf()
}

/// The files the reference quotes, by name relative to `root`, with their texts: the seed
/// specs, then every codegen fixture that compiles (those whose name does not start with
/// `errors-`), in name order.
pub fn corpus(root: &Path) -> Vec<(String, String)> {
    let mut files: Vec<PathBuf> = QUOTED_SPECS
        .iter()
        .map(|name| root.join("spec").join(format!("{name}.yaml")))
        .collect();
    let mut fixtures: Vec<PathBuf> = std::fs::read_dir(root.join("tests/fixtures"))
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|d| {
            let name = d.file_name().unwrap_or_default().to_string_lossy();
            !name.starts_with("errors-") && d.join("spec.yaml").is_file()
        })
        .collect();
    fixtures.sort();
    files.extend(fixtures.into_iter().map(|d| d.join("spec.yaml")));
    files
        .iter()
        .filter_map(|p| {
            let shown = p
                .strip_prefix(root)
                .ok()?
                .to_string_lossy()
                .replace('\\', "/");
            Some((shown, std::fs::read_to_string(p).ok()?))
        })
        .collect()
}

/// The reference, the editor schema and the runtime's public API listing of the checkout at
/// `root`, keyed by path relative to it.
pub fn rendered(root: &Path) -> Vec<(PathBuf, String)> {
    let texts = corpus(root);
    let reference = codegen::reference::render(&codegen::reference::sources(&texts), COMMAND);
    // A runtime whose sources do not parse fails its build anyway; the listing says why here.
    let api = api::list(&root.join("server/runtime/src/lib.rs"), "mcpspec")
        .map(|a| a.render("mcpspec", COMMAND))
        .unwrap_or_else(|e| format!("error: the runtime's sources could not be read: {e:#}\n"));
    vec![
        (PathBuf::from(REFERENCE), reference),
        (
            PathBuf::from(EDITOR_SCHEMA),
            codegen::editor_schema(COMMAND),
        ),
        (PathBuf::from(PUBLIC_API), api),
    ]
}

/// A finding for each rendered file of the checkout at `root` that differs from what is
/// committed, with the difference.
pub fn check(root: &Path) -> Report {
    let mut report = Report::default();
    for (path, fresh) in rendered(root) {
        let committed = std::fs::read_to_string(root.join(&path)).ok();
        let shown = path.to_string_lossy().replace('\\', "/");
        if let Some(f) = codegen::drift::stale(&shown, committed.as_deref(), &fresh, COMMAND) {
            report.findings.push(f);
        }
    }
    debug_assert!(report.findings.iter().all(|f| f.kind == Kind::Stale));
    report
}

/// Writes every rendered file of the checkout at `root` that changed; the paths written.
pub fn write(root: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut written = Vec::new();
    for (path, fresh) in rendered(root) {
        let at = root.join(&path);
        if std::fs::read_to_string(&at).ok().as_deref() != Some(fresh.as_str()) {
            std::fs::write(&at, fresh)?;
            written.push(path);
        }
    }
    Ok(written)
}
