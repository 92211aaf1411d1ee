//! What only this checkout keeps is fresh, and the reference has an example for every key.

use std::path::Path;

/// The committed reference and editor schema are what the compiler and the specs render.
#[test]
fn the_reference_and_the_editor_schema_are_fresh() {
    let root = xtask::root();
    let report = xtask::check(&root);
    let read = |p: &Path| std::fs::read_to_string(root.join(p)).unwrap_or_default();
    assert!(report.is_ok(), "{}", report.render_with(&read));
}

/// A stale editor schema is a finding with the difference and the command that fixes it.
#[test]
fn a_stale_editor_schema_is_found_with_its_difference() {
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
    std::fs::copy(root.join(xtask::REFERENCE), copy.join(xtask::REFERENCE)).unwrap();
    let schema = std::fs::read_to_string(root.join(xtask::EDITOR_SCHEMA)).unwrap();
    let edited = schema.replacen("\"title\": \"mcpspec spec\"", "\"title\": \"old\"", 1);
    assert_ne!(schema, edited);
    std::fs::write(copy.join(xtask::EDITOR_SCHEMA), edited).unwrap();
    let report = xtask::check(&copy);
    let text =
        report.render_with(&|p: &Path| std::fs::read_to_string(copy.join(p)).unwrap_or_default());
    for want in [
        "error: codegen/spec.schema.json is stale",
        "= help: run `cargo xtask codegen` and commit the result",
        "+  \"title\": \"mcpspec spec\"",
    ] {
        assert!(text.contains(want), "missing {want:?} in:\n{text}");
    }
    assert_eq!(report.findings.len(), 1, "{text}");
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
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("xtask-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
