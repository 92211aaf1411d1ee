//! Compile-fail tests of the generated handler traits: the message a user sees when a handler
//! (of a tool or of a resource) is missing or has the wrong argument or return type. The cases
//! implement the golden spec `tests/fixtures/handlers/spec.yaml`, whose generated code they
//! include, so the pinned line numbers do not move with the servers in `spec/`.
//! `TRYBUILD=overwrite` rewrites the expected `.stderr` files; review the diff.
//!
//! They belong to the package `mcpspec-uitests` (server/uitests), whose dependencies are only
//! what the generated code needs: trybuild builds every case with the package's dependencies
//! in a target directory of its own, which took 1 min 44 s from the `server` package (every
//! engine, OAuth, OpenTelemetry, the e2e tests' clients) and takes 39 s from this one.

/// Where the cases are, from this package's directory (trybuild resolves globs from there).
const CASES: &str = "../../tests/ui/fail";

#[test]
fn handler_mistakes_are_compile_errors_that_name_the_tool() {
    // A glob that matches nothing passes in trybuild ("no trybuild tests enabled"): count first.
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(CASES);
    let cases = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.path().extension().is_some_and(|x| x == "rs"))
        })
        .count();
    assert!(cases >= 4, "{} cases in {}", cases, dir.display());
    let t = trybuild::TestCases::new();
    t.compile_fail(format!("{CASES}/*.rs"));
}
