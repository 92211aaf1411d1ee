//! The spec-language reference quotes a real use of every key, from the specs this repository
//! compiles and tests.

use std::path::Path;

#[test]
fn every_key_of_the_language_has_an_example() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let texts = codegen::reference::checkout_corpus(&root, Path::new("spec"))
        .expect("this is mcpspec's checkout");
    let missing = codegen::reference::keys_without_example(&codegen::reference::sources(&texts));
    assert!(
        missing.is_empty(),
        "keys no spec or fixture uses, so the reference has no example for them: {missing:?}\nuse them in a fixture under tests/fixtures/"
    );
}
