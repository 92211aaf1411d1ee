//! The repository passes `cargo run -p codegen -- check`: the test runs the same function, so a
//! plain `cargo test` catches a broken spec, statement or schema, a contract that moved without
//! its snapshot, and stale docs or editor schema. The editor schema itself is checked against
//! the specs it describes.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

#[test]
fn repository_passes_check() {
    let root = root();
    let report = mcpspec_codegen::check::check_repo(&root, Path::new("spec"), None);
    assert!(
        report.is_ok(),
        "{}",
        report.render_with(&|p: &Path| std::fs::read_to_string(root.join(p)).unwrap_or_default())
    );
    assert!(report.specs >= 1 && report.tools >= 1);
}

#[test]
fn every_spec_carries_the_editor_schema_modeline() {
    for e in std::fs::read_dir(root().join("spec")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "yaml") {
            let text = std::fs::read_to_string(&p).unwrap();
            assert!(
                text.starts_with("# yaml-language-server: $schema=../codegen/spec.schema.json\n"),
                "{} lacks the modeline",
                p.display()
            );
        }
    }
}

fn yaml(path: &Path) -> serde_json::Value {
    serde_saphyr::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn the_editor_schema_accepts_valid_specs_and_flags_unknown_keys() {
    let schema: serde_json::Value =
        serde_json::from_str(&mcpspec_codegen::editor_schema("a test")).unwrap();
    jsonschema::meta::validate(&schema).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let root = root();
    for valid in [
        "spec/studio.yaml",
        "tests/fixtures/basic/spec.yaml",
        "tests/fixtures/names/spec.yaml",
    ] {
        let errors: Vec<String> = validator
            .iter_errors(&yaml(&root.join(valid)))
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect();
        assert!(errors.is_empty(), "{valid}: {errors:?}");
    }
    let typo = yaml(&root.join("tests/fixtures/errors-syntax/spec.yaml"));
    let errors: Vec<String> = validator
        .iter_errors(&typo)
        .map(|e| e.to_string())
        .collect();
    assert!(
        errors.iter().any(|e| e.contains("descripton")),
        "{errors:?}"
    );
    let mut wrong_mode = yaml(&root.join("spec/studio.yaml"));
    wrong_mode["tools"][1]["sql"]["returns"] = serde_json::json!("manny");
    assert!(!validator.is_valid(&wrong_mode));
}
