//! The codegen goldens compile against the runtime: each expected file under
//! `tests/fixtures/*/expected/` is included here as a module and its table is inspected.

mod basic {
    include!("../fixtures/basic/expected/basic.rs");
}

mod names {
    include!("../fixtures/names/expected/names.rs");
}

#[test]
fn golden_tables_are_usable_by_the_runtime() {
    assert_eq!(basic::SERVER.name, "basic");
    assert_eq!(basic::SERVER.tools.len(), 2);
    let t = &basic::SERVER.tools[0];
    let mut args = serde_json::Map::new();
    args.insert("q".into(), serde_json::json!("x"));
    args.insert("limit".into(), serde_json::json!(3));
    let params = (t.bind)(&args).expect("bind");
    assert_eq!(params.len(), 2);
    // Wire names that are Rust keywords or clash after sanitising still decode: `projectId`
    // sorts first and keeps `project_id`, the later `project_id` becomes `project_id_2`.
    assert_eq!(names::SERVER.tools[1].name, "Type");
    let mut args = serde_json::Map::new();
    for (k, v) in [
        ("type", "a"),
        ("self", "b"),
        ("projectId", "c"),
        ("project_id", "d"),
    ] {
        args.insert(k.into(), serde_json::json!(v));
    }
    let a: names::args::Type = server::def::decode(&args).expect("decode");
    assert_eq!(
        (
            a.type_.as_str(),
            a.self_.as_str(),
            a.project_id.as_str(),
            a.project_id_2.as_str()
        ),
        ("a", "b", "c", "d")
    );
}
