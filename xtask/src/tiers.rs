//! `cargo xtask test`, the README's test command: installs what the full tier needs
//! ([`crate::provision`]), runs the quick tier (`cargo test --workspace`, which needs only a
//! Rust toolchain), then the tests only the full tier has (those compiled in by the `full`
//! feature of the packages whose tests start servers, fetch from PyPI or npm, or build nested
//! crates), so that the cheap failures come first and no test runs twice.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use anyhow::{Context as _, Result, bail};

use crate::provision::{provision, run};

/// Provisions, then runs both tiers; `cargo_args` go to every cargo command (`--locked`).
pub fn test(root: &Path, cargo_args: &[String]) -> Result<()> {
    step("what the full tier needs");
    provision(root)?;
    step("quick tier: cargo test --workspace");
    run(cargo(root, cargo_args, false).args(["--workspace"]))?;
    let quick = listed(root, cargo_args, false)?;
    let full = listed(root, cargo_args, true)?;
    let only: Vec<&String> = full.difference(&quick).collect();
    if only.is_empty() {
        bail!("the full tier lists no test beyond the quick tier's: is the `full` feature wired?");
    }
    step(&format!(
        "full tier: the {} tests that need servers, the network or nested builds",
        only.len()
    ));
    run(cargo(root, cargo_args, true)
        .args(["--workspace", "--tests", "--", "--exact"])
        .args(only))
}

/// `cargo test` with `cargo_args`, and the full tier's feature when `full`.
fn cargo(root: &Path, cargo_args: &[String], full: bool) -> Command {
    let mut c = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    c.arg("test").args(cargo_args).current_dir(root);
    if full {
        c.args(["--features", "full"]);
    }
    c
}

/// The names of the tests (not doc tests) one tier compiles, across the workspace.
fn listed(root: &Path, cargo_args: &[String], full: bool) -> Result<BTreeSet<String>> {
    let out = cargo(root, cargo_args, full)
        .args([
            "--workspace",
            "--tests",
            "--",
            "--list",
            "--format",
            "terse",
        ])
        .output()
        .context("listing the tests")?;
    if !out.status.success() {
        bail!(
            "listing the tests failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.strip_suffix(": test"))
        .map(str::to_owned)
        .collect())
}

fn step(what: &str) {
    eprintln!("\n== {what}");
}
