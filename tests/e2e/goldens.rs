//! The PostgreSQL golden served by the runtime's engine in process on the test cluster: the
//! one golden test that needs a database server (the others are the runtime's own tests,
//! `server/runtime/src/goldens.rs`).

#[allow(dead_code)]
mod on_postgres {
    include!("../fixtures/postgres/expected/notes.rs");
}

/// The golden of a server that runs on both engines carries each statement's PostgreSQL text
/// with its parameters numbered, and those texts run: the golden's tables, started in-process
/// on a database of the test cluster made from its PostgreSQL schema.
#[cfg(feature = "full")]
#[test]
fn golden_postgres_statements_are_numbered_and_run_on_postgresql() {
    use mcpspec::backend::Location;
    use mcpspec::engine::{Engine, Limits};
    let def = &on_postgres::SERVER;
    let tagged = def.tool("tagged").unwrap().binding.statements()[0]
        .text("postgres")
        .unwrap();
    assert_eq!(
        (tagged.sql, tagged.params),
        (
            "SELECT id, title FROM notes WHERE tags ? $1 AND title <> ':tag' AND $1::text = $1",
            &["tag"][..]
        )
    );
    let pg = def.database.as_ref().unwrap().engine("postgres").unwrap();
    assert_eq!(pg.env, Some("DATABASE_URL"));
    let cluster = crate::pg::Cluster::shared();
    let url = cluster.create_database();
    cluster.psql(
        &url,
        &format!(
            "{}; {}; UPDATE notes SET tags = '[\"a\"]'",
            pg.schema,
            pg.sample.unwrap()
        ),
    );
    let engine = Engine::start_at(
        def,
        Some(&Location::parse(url.as_ref()).unwrap()),
        false,
        Limits::default(),
        None,
    )
    .unwrap();
    let call =
        |tool: &str, args: serde_json::Value| engine.call(tool, Some(&args)).unwrap().structured;
    assert_eq!(
        call("get_note", serde_json::json!({"id": 1})),
        serde_json::json!({"id": 1, "title": "first"})
    );
    assert_eq!(
        call("tagged", serde_json::json!({"tag": "a"}))["rows"],
        serde_json::json!([{"id": 1, "title": "first"}])
    );
}
