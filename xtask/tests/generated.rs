//! What only this checkout keeps is fresh, and the reference has an example for every key.

use std::path::Path;

/// The committed reference, editor schema and public API listing are what the compiler, the
/// specs and the runtime's sources render.
#[test]
fn the_reference_and_the_editor_schema_are_fresh() {
    let root = xtask::root();
    let report = xtask::check(&root);
    let read = |p: &Path| std::fs::read_to_string(root.join(p)).unwrap_or_default();
    assert!(report.is_ok(), "{}", report.render_with(&read));
}

/// A copy of what `check` reads from this checkout: the corpus, the committed files and the
/// runtime's sources.
fn copy_of_checkout() -> std::path::PathBuf {
    let copy = tempfile_dir();
    let root = xtask::root();
    for rel in ["spec", "docs", "codegen"] {
        std::fs::create_dir_all(copy.join(rel)).unwrap();
    }
    for (file, _) in xtask::corpus(&root) {
        let to = copy.join(&file);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(root.join(&file), to).unwrap();
    }
    for file in [xtask::REFERENCE, xtask::EDITOR_SCHEMA] {
        std::fs::copy(root.join(file), copy.join(file)).unwrap();
    }
    copy_dir(
        &root.join("server/runtime/src"),
        &copy.join("server/runtime/src"),
    );
    std::fs::copy(root.join(xtask::PUBLIC_API), copy.join(xtask::PUBLIC_API)).unwrap();
    copy
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &to.join(e.file_name()));
        } else {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

/// What `check` says of the checkout copied to `copy`, and how many findings.
fn checked(copy: &Path) -> (String, usize) {
    let report = xtask::check(copy);
    let text =
        report.render_with(&|p: &Path| std::fs::read_to_string(copy.join(p)).unwrap_or_default());
    (text, report.findings.len())
}

/// A change to the runtime's public API is a finding until the listing is written again: a
/// new public function, and a public module made the crate's own.
#[test]
fn a_change_to_the_public_api_is_found_with_its_difference() {
    let copy = copy_of_checkout();
    let lib = copy.join("server/runtime/src/lib.rs");
    let text = std::fs::read_to_string(&lib).unwrap();
    let edited = text.replacen("pub mod client;", "pub(crate) mod client;", 1)
        + "\n/// Added.\npub fn added(n: u32) -> Option<&'static str> { None }\n";
    std::fs::write(&lib, edited).unwrap();
    let (text, findings) = checked(&copy);
    for want in [
        "error: server/runtime/public-api.txt is stale",
        "+pub fn mcpspec::added(n: u32) -> Option<&'static str>",
        "-pub mod mcpspec::client",
    ] {
        assert!(text.contains(want), "missing {want:?} in:\n{text}");
    }
    assert_eq!(findings, 1, "{text}");
    std::fs::remove_dir_all(&copy).unwrap();
}

/// A stale editor schema is a finding with the difference and the command that fixes it.
#[test]
fn a_stale_editor_schema_is_found_with_its_difference() {
    let copy = copy_of_checkout();
    let root = xtask::root();
    let schema = std::fs::read_to_string(root.join(xtask::EDITOR_SCHEMA)).unwrap();
    let edited = schema.replacen("\"title\": \"mcpspec spec\"", "\"title\": \"old\"", 1);
    assert_ne!(schema, edited);
    std::fs::write(copy.join(xtask::EDITOR_SCHEMA), edited).unwrap();
    let (text, findings) = checked(&copy);
    for want in [
        "error: codegen/spec.schema.json is stale",
        "= help: run `cargo xtask codegen` and commit the result",
        "+  \"title\": \"mcpspec spec\"",
    ] {
        assert!(text.contains(want), "missing {want:?} in:\n{text}");
    }
    assert_eq!(findings, 1, "{text}");
    std::fs::remove_dir_all(&copy).unwrap();
}

#[test]
fn every_key_of_the_language_has_an_example() {
    let texts = xtask::corpus(&xtask::root());
    let missing = codegen::reference::keys_without_example(&codegen::reference::sources(&texts));
    assert!(
        missing.is_empty(),
        "keys no spec or fixture uses, so the reference has no example for them: {missing:?}\nuse them in a fixture under tests/fixtures/"
    );
}

/// A fresh directory under the target's temporary directory.
fn tempfile_dir() -> std::path::PathBuf {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::SeqCst);
    let dir =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("xtask-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
