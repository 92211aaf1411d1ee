//! Compile-fail tests of the generated handler traits: the message a user sees when a handler
//! (of a tool or of a resource) is missing or has the wrong argument or return type. The cases
//! implement the golden spec `tests/fixtures/handlers/spec.yaml`, whose generated code they
//! include, so the pinned line numbers do not move with the servers in `spec/`.
//! `TRYBUILD=overwrite` rewrites the expected `.stderr` files; review the diff.

#[test]
fn handler_mistakes_are_compile_errors_that_name_the_tool() {
    let t = trybuild::TestCases::new();
    t.compile_fail("../tests/ui/fail/*.rs");
}
