//! The repository's own specs pass every check `cargo run -p codegen -- check` runs, so a
//! plain `cargo test` catches a broken spec, statement or schema.

use std::path::Path;

#[test]
fn repository_specs_pass_check() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let specs = match codegen::load_dir(&root.join("spec"), Path::new("spec")) {
        Ok(s) => s,
        Err(d) => panic!(
            "{}",
            d.render_with(&|p: &Path| std::fs::read_to_string(root.join(p)).unwrap_or_default())
        ),
    };
    assert!(specs.iter().any(|s| s.name() == "studio"));
    for spec in &specs {
        let mut problems = codegen::check::check_schemas(spec);
        problems
            .items
            .extend(codegen::check::check_sql(spec, None).items);
        assert!(problems.is_empty(), "{}", problems);
    }
}
