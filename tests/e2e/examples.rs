//! The seed specs' `examples:` run by `mcpspec test`: on a scratch database with the sample
//! rows, and on a live database of either engine with every write rolled back.

use std::path::Path;
use std::process::Command;

use crate::common::{EXE, Engine, count_rows, mcpspec, sample_db_on};
use crate::on_every_engine;

/// `mcpspec test SERVER` in `dir` with `extra` arguments: its exit code and output.
fn test_in(dir: &Path, server: &str, extra: &[&str]) -> (i32, String) {
    let out = Command::new(EXE)
        .args(["test", server])
        .args(extra)
        .current_dir(dir)
        .env("MCPSPEC_STARTUP_JOBS", "off")
        .output()
        .expect("run mcpspec test");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap_or(-1), text)
}

/// Every example passed, and there were some.
fn all_passed(server: &str, (code, out): (i32, String)) {
    assert_eq!(code, 0, "{server}:\n{out}");
    let last = out.lines().last().unwrap_or_default();
    assert!(last.starts_with("ok: "), "{server}:\n{out}");
    assert!(last.ends_with(" passed, 0 failed"), "{server}:\n{out}");
    assert!(
        !last.starts_with("ok: 0 passed"),
        "{server} has no examples:\n{out}"
    );
}

#[test]
fn every_seed_servers_examples_hold_on_its_sample_rows() {
    let dir = tempfile::tempdir().unwrap();
    for server in ["studio", "knowledge", "laminark", "lessons"] {
        all_passed(server, test_in(dir.path(), server, &[]));
    }
    // pm works on the project in its working directory: a git repository with pm's config.
    let root = dir.path();
    let ok = Command::new("git")
        .args(["init", "-q", "-b", "main"])
        .current_dir(root)
        .status()
        .unwrap();
    assert!(ok.success());
    let out = Command::new(EXE)
        .args(["call", "pm", "project.init", "{}"])
        .current_dir(root)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    all_passed("pm", test_in(root, "pm", &[]));
}

/// On a live database the examples that do not depend on the sample rows run, writes
/// included, and the database is left as it was.
fn live_database_is_left_as_it_was(engine: Engine) {
    let db = sample_db_on(engine, "knowledge");
    let before = count_rows(&db.path, "knowledge_entries");
    let dir = tempfile::tempdir().unwrap();
    let url = db.path.to_str().unwrap();
    let (code, out) = test_in(dir.path(), "knowledge", &["--db", url]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("every write rolled back"), "{out}");
    assert!(
        out.contains("examples need the sample rows and do not run on a live database"),
        "{out}"
    );
    assert!(
        out.contains("ok      kb_add"),
        "the write example ran: {out}"
    );
    assert_eq!(count_rows(&db.path, "knowledge_entries"), before, "{out}");
}

on_every_engine!(live_database_is_left_as_it_was);

/// A server that is not compiled is named in the error.
#[test]
fn test_names_unknown_servers() {
    let (code, _, err) = mcpspec(&["test", "nope"], &[]);
    assert_eq!(code, 2);
    assert!(err.contains("no server named `nope`"), "{err}");
}
