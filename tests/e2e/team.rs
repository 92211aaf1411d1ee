//! A team of replicas on one PostgreSQL or MariaDB database, each with the same request-state
//! key: a
//! `requestState` that confirmed a call on one replica is refused on every other, because the
//! replicas record the states they redeem in the database they share (`mcpspec_request_states`,
//! made by `init`). Served from a spec file whose one tool deletes with a confirmation.

use std::path::Path;

use serde_json::{Value, json};

use crate::common::{Engine, mcpspec, sql_on};
use crate::http::HttpServer;

const SPEC: &str = r#"server:
  name: notes
  version: 0.1.0
database:
  schema: |
    CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL);
  sample: |
    INSERT INTO notes (id, body) VALUES (1, 'one'), (2, 'two');
  postgres:
    schema: |
      CREATE TABLE notes (id integer PRIMARY KEY, body text NOT NULL);
    sample: |
      INSERT INTO notes (id, body) VALUES (1, 'one'), (2, 'two');
  mysql:
    schema: |
      CREATE TABLE notes (id INT PRIMARY KEY, body TEXT NOT NULL) ENGINE = InnoDB;
    sample: |
      INSERT INTO notes (id, body) VALUES (1, 'one'), (2, 'two');
tools:
  - name: delete_note
    description: Deletes a note, once the person confirms.
    annotations: {destructiveHint: true, idempotentHint: true}
    input:
      type: object
      properties:
        id: {type: integer}
        confirm: {type: boolean, description: Must be true.}
      required: [id, confirm]
    confirm: {argument: confirm, message: "Delete note {{ id }}?"}
    sql:
      returns: execute
      query: DELETE FROM notes WHERE id = :id
"#;

/// A 2026-07-28 call of `delete_note` that can be asked questions, with `extra` params.
fn delete(client: &mut mcpspec_testkit::HttpClient, extra: Value) -> Value {
    let mut params = json!({"name": "delete_note", "arguments": {"id": 1, "confirm": true}});
    for (k, v) in extra.as_object().expect("an object") {
        params[k] = v.clone();
    }
    // An error answers with an HTTP error status under 2026-07-28: the message is read either way.
    let response = client
        .post(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}))
        .expect("tools/call");
    response
        .messages()
        .into_iter()
        .next()
        .unwrap_or_else(|| panic!("no message: {} {}", response.status, response.text()))
}

crate::on_every_engine_of_a_team!(a_state_redeemed_on_one_replica_is_refused_on_another);

fn a_state_redeemed_on_one_replica_is_refused_on_another(engine: Engine) {
    let dir = tempfile::tempdir().expect("tempdir");
    let spec = dir.path().join("notes.yaml");
    std::fs::write(&spec, SPEC).expect("spec");
    let spec = spec.display().to_string();
    let url = match engine {
        Engine::Postgres => crate::pg::Cluster::shared().create_database(),
        _ => crate::maria::Server::shared().create_database(),
    };
    let count = |table: &str| {
        sql_on(
            engine,
            Path::new(&url),
            &format!("SELECT count(*) FROM {table}"),
        )
    };
    let (code, _, err) = mcpspec(&["init", "--spec", &spec, "--sample", "--db", &url], &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        count("mcpspec_request_states"),
        "0",
        "init made mcpspec's table for used states"
    );
    let key = (
        "MCPSPEC_REQUEST_STATE_KEY",
        "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff",
    );
    let replicas: Vec<HttpServer> = (0..2)
        .map(|_| HttpServer::serve(&["--spec", &spec, "--db", &url], &[key]))
        .collect();
    let mut clients: Vec<_> = replicas
        .iter()
        .map(|r| {
            let mut c = mcpspec_testkit::HttpClient::per_request(r.addr, None);
            c.capabilities = json!({"elicitation": {}});
            c
        })
        .collect();

    // Asked on the first replica, confirmed there: the note goes.
    let asked = delete(&mut clients[0], json!({}));
    assert_eq!(asked["result"]["resultType"], "input_required", "{asked}");
    let state = asked["result"]["requestState"].clone();
    let accept = json!({"confirm": {"action": "accept", "content": {}}});
    let done = delete(
        &mut clients[0],
        json!({"inputResponses": accept, "requestState": state}),
    );
    assert_eq!(done["result"]["isError"], false, "{done}");
    assert_eq!(count("notes"), "1");

    // The same state and answer replayed on the other replica (which accepts the first's
    // states: same key) and on the first: refused, nothing runs.
    sql_on(
        engine,
        Path::new(&url),
        "INSERT INTO notes (id, body) VALUES (1, 'again')",
    );
    for i in [1, 0] {
        let replayed = delete(
            &mut clients[i],
            json!({"inputResponses": accept, "requestState": state}),
        );
        assert_eq!(replayed["error"]["code"], -32602, "{replayed}");
        assert_eq!(
            replayed["error"]["data"]["field"], "requestState",
            "{replayed}"
        );
        assert!(
            replayed["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("already used")),
            "{replayed}"
        );
    }
    assert_eq!(count("notes"), "2");
    assert_eq!(count("mcpspec_request_states"), "1");

    // A state issued by the second replica is good on the first, once.
    let asked = delete(&mut clients[1], json!({}));
    let state = asked["result"]["requestState"].clone();
    let done = delete(
        &mut clients[0],
        json!({"inputResponses": accept, "requestState": state}),
    );
    assert_eq!(done["result"]["isError"], false, "{done}");
    let replayed = delete(
        &mut clients[1],
        json!({"inputResponses": accept, "requestState": state}),
    );
    assert_eq!(replayed["error"]["code"], -32602, "{replayed}");
}
