//! `cargo xtask test`, the README's test command: installs what the full tier needs
//! ([`crate::provision`]), runs the quick tier (what `cargo test --workspace` runs, which needs
//! only a Rust toolchain), then the tests only the full tier has (those compiled in by the
//! `full` feature of the packages whose tests start servers, fetch from PyPI or npm, or build
//! nested crates), so that the cheap failures come first and no test runs twice.
//!
//! Each tier's test binaries run side by side: `cargo test` would run them one after another,
//! and much of their time is spent waiting on the servers, clients and nested builds they
//! start (a quick binary of a few tests that each start a server held one core of two alone),
//! so the UI test's nested build and the end-to-end suite overlap instead of adding up. The
//! quick tier's doc tests run after its binaries. In the full tier each binary is given only
//! its own full-tier tests, and the few that take minutes each run in a process of their own,
//! started first ([`LONG_POLES`]). Every binary runs twice as many test threads as the machine
//! has cores, for the same reason (`RUST_TEST_THREADS` overrides it).

use std::collections::BTreeSet;
use std::io::{BufRead as _, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::thread;

use anyhow::{Context as _, Result, bail};

use crate::provision::{provision, run};

/// The full tier's tests that take a minute or more (a nested cargo build of a crate and its
/// dependencies from nothing): each runs in a process of its own, started first, so that it
/// overlaps the tests that wait on servers instead of starting when libtest's name order
/// reaches it and ending the run alone.
const LONG_POLES: &[&str] = &["new::"];

/// Provisions, then runs both tiers; `cargo_args` go to every cargo command (`--locked`).
pub fn test(root: &Path, cargo_args: &[String]) -> Result<()> {
    step("what the full tier needs");
    provision(root)?;
    let threads = threads();
    step("quick tier: cargo test --workspace, its test binaries side by side");
    let mut quick = BTreeSet::new();
    let mut runs = Vec::new();
    for b in binaries(root, cargo_args, false)? {
        let tests = b.tests()?;
        quick.extend(tests.iter().map(|t| (b.key(), t.clone())));
        if !tests.is_empty() {
            runs.push((Arc::new(b), tests));
        }
    }
    side_by_side("quick", &runs, &threads)?;
    run(cargo(root, cargo_args, false).args(["--workspace", "--doc"]))?;
    let mut runs = Vec::new();
    let mut rest = Vec::new();
    for b in binaries(root, cargo_args, true)? {
        let b = Arc::new(b);
        let (long, only): (Vec<String>, Vec<String>) = b
            .tests()?
            .into_iter()
            .filter(|t| !quick.contains(&(b.key(), t.clone())))
            .partition(|t| LONG_POLES.iter().any(|p| t.starts_with(p)));
        runs.extend(long.into_iter().map(|t| (b.clone(), vec![t])));
        if !only.is_empty() {
            rest.push((b, only));
        }
    }
    runs.append(&mut rest);
    let count: usize = runs.iter().map(|(_, only)| only.len()).sum();
    if count == 0 {
        bail!("the full tier lists no test beyond the quick tier's: is the `full` feature wired?");
    }
    step(&format!(
        "full tier: the {count} tests that need servers, the network or nested builds, \
         in {} processes side by side",
        runs.len()
    ));
    side_by_side("full", &runs, &threads)
}

/// `cargo test` with `cargo_args`, and the full tier's feature when `full`.
fn cargo(root: &Path, cargo_args: &[String], full: bool) -> Command {
    let mut c = xtask::cargo();
    c.arg("test").args(cargo_args).current_dir(root);
    if full {
        c.args(["--features", "full"]);
    }
    c
}

fn cargo_program() -> std::ffi::OsString {
    std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into())
}

/// The libtest arguments that set the test threads: none when the caller set
/// `RUST_TEST_THREADS`, else twice the cores.
fn threads() -> Vec<String> {
    if std::env::var_os("RUST_TEST_THREADS").is_some() {
        return Vec::new();
    }
    let cores = thread::available_parallelism().map_or(1, |n| n.get());
    vec!["--test-threads".into(), (2 * cores).to_string()]
}

/// One test binary of the workspace, as `cargo test --no-run` reports it.
struct Binary {
    exe: PathBuf,
    manifest: PathBuf,
    package: String,
    version: String,
    target: String,
    /// The workspace's target directory. No cargo holds its lock while the binary runs, so a
    /// test's nested cargo build may share it (`MCPSPEC_NESTED_TARGET_DIR`): the dependencies
    /// the workspace compiled with the same features are then not compiled again.
    target_dir: PathBuf,
}

impl Binary {
    /// Which test target this is, the same across both tiers' builds.
    fn key(&self) -> String {
        format!("{}:{}", self.manifest.display(), self.target)
    }

    /// A short name for the lines it prints.
    fn label(&self) -> String {
        format!("{}/{}", self.package, self.target)
    }

    /// The binary with the environment `cargo test` runs it in.
    fn command(&self) -> Command {
        let mut c = xtask::clean(&self.exe);
        let dir = self.manifest.parent().unwrap_or(Path::new("."));
        c.current_dir(dir)
            .env("CARGO", cargo_program())
            .env("CARGO_MANIFEST_DIR", dir)
            .env("CARGO_MANIFEST_PATH", &self.manifest)
            .env("CARGO_PKG_NAME", &self.package)
            .env("CARGO_PKG_VERSION", &self.version)
            .env("CARGO_CRATE_NAME", self.target.replace('-', "_"))
            .env("MCPSPEC_NESTED_TARGET_DIR", &self.target_dir);
        c
    }

    /// The names of its tests.
    fn tests(&self) -> Result<Vec<String>> {
        let out = self
            .command()
            .args(["--list", "--format", "terse"])
            .output()
            .with_context(|| format!("listing the tests of {}", self.exe.display()))?;
        if !out.status.success() {
            bail!(
                "listing the tests of {} failed:\n{}",
                self.exe.display(),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.strip_suffix(": test"))
            .map(str::to_owned)
            .collect())
    }
}

/// The test binaries (not doc tests) one tier compiles across the workspace, built by
/// `cargo test --no-run`.
fn binaries(root: &Path, cargo_args: &[String], full: bool) -> Result<Vec<Binary>> {
    let out = cargo(root, cargo_args, full)
        .args([
            "--workspace",
            "--tests",
            "--no-run",
            "--message-format",
            "json-render-diagnostics",
        ])
        .stderr(Stdio::inherit())
        .output()
        .context("building the test binaries")?;
    if !out.status.success() {
        bail!("building the test binaries failed");
    }
    let target_dir = target_directory(root, cargo_args)?;
    let mut found = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(m) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        let (Some(exe), Some(manifest), Some(id)) = (
            m["executable"].as_str(),
            m["manifest_path"].as_str(),
            m["package_id"].as_str(),
        ) else {
            continue;
        };
        if m["reason"] != "compiler-artifact" || m["profile"]["test"] != true {
            continue;
        }
        let (package, version) = package_of(id, Path::new(manifest));
        found.push(Binary {
            exe: exe.into(),
            manifest: manifest.into(),
            package,
            version,
            target: m["target"]["name"].as_str().unwrap_or_default().to_owned(),
            target_dir: target_dir.clone(),
        });
    }
    Ok(found)
}

/// The workspace's target directory, as cargo resolves it (`CARGO_TARGET_DIR`, a config's
/// `build.target-dir`, else `target/`).
fn target_directory(root: &Path, cargo_args: &[String]) -> Result<PathBuf> {
    let out = xtask::cargo()
        .args(["metadata", "--no-deps", "--format-version", "1"])
        .args(cargo_args)
        .current_dir(root)
        .stderr(Stdio::inherit())
        .output()
        .context("running cargo metadata")?;
    if !out.status.success() {
        bail!("cargo metadata failed");
    }
    let m: serde_json::Value =
        serde_json::from_slice(&out.stdout).context("reading cargo metadata")?;
    m["target_directory"]
        .as_str()
        .map(PathBuf::from)
        .context("cargo metadata names no target directory")
}

/// The package name and version in a package id (`path+file:///dir#name@1.0.0`, or
/// `path+file:///dir/name#1.0.0` when the directory is named after the package).
fn package_of(id: &str, manifest: &Path) -> (String, String) {
    let tail = id.rsplit_once('#').map_or(id, |(_, t)| t);
    match tail.split_once('@') {
        Some((name, version)) => (name.to_owned(), version.to_owned()),
        None => {
            let dir = manifest.parent().and_then(Path::file_name);
            let name = dir.map_or_else(String::new, |d| d.to_string_lossy().into_owned());
            (name, tail.to_owned())
        }
    }
}

/// Runs each binary with its tests at once, every line of output prefixed with the binary's
/// name; fails naming the binaries whose tests failed in `tier`.
fn side_by_side(tier: &str, runs: &[(Arc<Binary>, Vec<String>)], threads: &[String]) -> Result<()> {
    let failed: Vec<String> = thread::scope(|s| {
        let handles: Vec<_> = runs
            .iter()
            .map(|(b, only)| s.spawn(move || run_prefixed(b, only, threads)))
            .collect();
        handles
            .into_iter()
            .zip(runs)
            .filter_map(|(h, (b, _))| match h.join() {
                Ok(Ok(true)) => None,
                Ok(Ok(false)) => Some(b.label()),
                Ok(Err(e)) => Some(format!("{} ({e:#})", b.label())),
                Err(_) => Some(format!("{} (its runner panicked)", b.label())),
            })
            .collect()
    });
    if !failed.is_empty() {
        bail!("{tier} tier: tests failed in {}", failed.join(", "));
    }
    Ok(())
}

/// One binary's run, its output prefixed; true when every test passed.
fn run_prefixed(b: &Binary, only: &[String], threads: &[String]) -> Result<bool> {
    let label = b.label();
    let mut child = b
        .command()
        .arg("--exact")
        .args(threads)
        .args(only)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("running {}", b.exe.display()))?;
    let out = child.stdout.take().context("the test's stdout")?;
    let err = child.stderr.take().context("the test's stderr")?;
    thread::scope(|s| {
        s.spawn(|| prefix(&label, out, false));
        s.spawn(|| prefix(&label, err, true));
    });
    Ok(child.wait()?.success())
}

fn prefix(label: &str, from: impl Read, to_stderr: bool) {
    for line in BufReader::new(from).lines().map_while(Result::ok) {
        if to_stderr {
            eprintln!("[{label}] {line}");
        } else {
            println!("[{label}] {line}");
        }
    }
}

fn step(what: &str) {
    eprintln!("\n== {what}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn package_ids_give_their_name_and_version() {
        let m = Path::new("/w/server/cli/Cargo.toml");
        assert_eq!(
            package_of("path+file:///w/server/cli#mcpspec-cli@0.1.0", m),
            ("mcpspec-cli".into(), "0.1.0".into())
        );
        let m = Path::new("/w/server/Cargo.toml");
        assert_eq!(
            package_of("path+file:///w/server#0.1.0", m),
            ("server".into(), "0.1.0".into())
        );
    }
}
