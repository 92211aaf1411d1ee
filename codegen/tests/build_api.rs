//! The build API as a build script calls it: `configure(dir).out_dir(..).compile()` writes the
//! generated files (and rewrites only what changed), and refuses a spec whose SQL does not
//! prepare against its declared schema, pointing at the statement.

use std::path::Path;

/// A spec directory holding the `basic` golden's spec as `basic.yaml`, with `edit` applied.
fn spec_dir(edit: impl Fn(String) -> String) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let text = std::fs::read_to_string(root.join("tests/fixtures/basic/spec.yaml")).unwrap();
    std::fs::write(dir.path().join("basic.yaml"), edit(text)).unwrap();
    dir
}

#[test]
fn compile_writes_the_generated_files_and_only_what_changed() {
    let specs = spec_dir(|t| t);
    let out = tempfile::tempdir().unwrap();
    mcpspec_codegen::build::configure(specs.path())
        .display_as("spec")
        .out_dir(out.path())
        .compile()
        .expect("the golden spec compiles");
    let generated = out.path().join("basic.rs");
    let text = std::fs::read_to_string(&generated).unwrap();
    assert!(text.starts_with("// @generated"), "{text}");
    assert!(text.contains("spec_file: \"spec/basic.yaml\""), "{text}");
    assert!(out.path().join("mod.rs").is_file());
    let before = std::fs::metadata(&generated).unwrap().modified().unwrap();
    mcpspec_codegen::build::configure(specs.path())
        .display_as("spec")
        .out_dir(out.path())
        .compile()
        .unwrap();
    assert_eq!(
        std::fs::metadata(&generated).unwrap().modified().unwrap(),
        before,
        "an unchanged file was rewritten"
    );
}

#[test]
fn a_statement_that_does_not_prepare_fails_the_build_at_its_line() {
    let specs = spec_dir(|t| t.replace("FROM notes WHERE instr", "FROM note WHERE instr"));
    let out = tempfile::tempdir().unwrap();
    let err = mcpspec_codegen::build::configure(specs.path())
        .display_as("spec")
        .out_dir(out.path())
        .compile()
        .expect_err("a wrong table fails the build")
        .to_string();
    assert!(err.contains("--> spec/basic.yaml:23:14"), "{err}");
    assert!(err.contains("no such table: note"), "{err}");
    assert!(
        err.contains("help: fix the query or the schema so they agree"),
        "{err}"
    );
    assert!(
        err.contains("SELECT id, body, meta FROM note"),
        "source line shown: {err}"
    );
    assert!(
        !out.path().join("basic.rs").exists(),
        "nothing is generated"
    );
}
