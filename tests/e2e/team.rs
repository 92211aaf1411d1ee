//! A team of replicas on one PostgreSQL or MariaDB database. With the same request-state key,
//! a `requestState` that confirmed a call on one replica is refused on every other, because
//! the replicas record the states they redeem in the database they share
//! (`mcpspec_request_states`, made by `init`). A task minted on one replica is polled and
//! cancelled on the others, and fails with a reason when its replica is killed
//! (`mcpspec_tasks`). Served from a spec file with a tool that deletes with a confirmation and
//! one that waits in the database as a task.

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
  - name: wait
    description: Waits a number of seconds in the database, then says how long.
    annotations: {readOnlyHint: true}
    task: optional
    input:
      type: object
      properties:
        seconds: {type: integer, minimum: 0, maximum: 120}
      required: [seconds]
    sql:
      key: waited
      columns: {seconds: integer}
      query: SELECT :seconds AS seconds
      postgres: SELECT CAST(:seconds AS integer) AS seconds FROM pg_sleep(:seconds)
      mysql: SELECT CAST(:seconds AS SIGNED) AS seconds FROM (SELECT SLEEP(:seconds)) AS s
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

crate::on_every_engine_of_a_team!(
    a_state_redeemed_on_one_replica_is_refused_on_another,
    a_task_is_polled_and_cancelled_on_any_replica,
    a_task_whose_replica_is_killed_fails_with_a_reason,
    a_task_is_its_callers_on_every_replica,
    migrate_adds_the_task_owner_to_an_older_task_table,
);

/// The spec file in `dir` and a new database on `engine` that `init --sample` made from it.
struct Team {
    _dir: tempfile::TempDir,
    spec: String,
    url: String,
    engine: Engine,
}

impl Team {
    fn new(engine: Engine) -> Team {
        let dir = tempfile::tempdir().expect("tempdir");
        let spec = dir.path().join("notes.yaml");
        std::fs::write(&spec, SPEC).expect("spec");
        let spec = spec.display().to_string();
        let url = match engine {
            Engine::Postgres => crate::pg::Cluster::shared().create_database(),
            _ => crate::maria::Server::shared().create_database(),
        };
        let (code, _, err) = mcpspec(&["init", "--spec", &spec, "--sample", "--db", &url], &[]);
        assert_eq!(code, 0, "{err}");
        Team {
            _dir: dir,
            spec,
            url,
            engine,
        }
    }

    fn count(&self, table: &str) -> String {
        sql_on(
            self.engine,
            Path::new(&self.url),
            &format!("SELECT count(*) FROM {table}"),
        )
    }

    /// `n` replicas serving the spec over HTTP on the database, with `env`.
    fn replicas(&self, n: usize, env: &[(&str, &str)]) -> Vec<HttpServer> {
        (0..n)
            .map(|_| HttpServer::serve(&["--spec", &self.spec, "--db", &self.url], env))
            .collect()
    }
}

fn a_state_redeemed_on_one_replica_is_refused_on_another(engine: Engine) {
    let team = Team::new(engine);
    let url = &team.url;
    let count = |table: &str| team.count(table);
    assert_eq!(
        count("mcpspec_request_states"),
        "0",
        "init made mcpspec's table for used states"
    );
    let key = (
        "MCPSPEC_REQUEST_STATE_KEY",
        "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff",
    );
    let replicas = team.replicas(2, &[key]);
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
        Path::new(url),
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

/// A 2026-07-28 client of `replica` that takes tasks.
fn tasks_client(replica: &HttpServer) -> mcpspec_testkit::HttpClient {
    let mut c = mcpspec_testkit::HttpClient::per_request(replica.addr, None);
    c.capabilities = crate::conformance::tasks::caps();
    c
}

/// One request of `method` through `client`: its one message.
fn rpc(client: &mut mcpspec_testkit::HttpClient, method: &str, params: Value) -> Value {
    let response = client
        .post(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
        .unwrap_or_else(|e| panic!("{method}: {e}"));
    response
        .messages()
        .into_iter()
        .next()
        .unwrap_or_else(|| panic!("no message: {} {}", response.status, response.text()))
}

/// `wait` for `seconds` through `client`, which answers with a task at once: its id.
fn start_wait(client: &mut mcpspec_testkit::HttpClient, seconds: u64) -> String {
    let r = rpc(
        client,
        "tools/call",
        json!({"name": "wait", "arguments": {"seconds": seconds}}),
    );
    crate::conformance::tasks::created(&r)
}

/// Polls `tasks/get` for `id` through `client` until the task reaches `status`; panics after
/// `within`.
fn until(
    client: &mut mcpspec_testkit::HttpClient,
    id: &str,
    status: &str,
    within: std::time::Duration,
) -> Value {
    let deadline = std::time::Instant::now() + within;
    loop {
        let r = rpc(client, "tasks/get", json!({"taskId": id}));
        assert_eq!(r["result"]["resultType"], "complete", "{r}");
        if r["result"]["status"] == status {
            return r["result"].clone();
        }
        assert!(std::time::Instant::now() < deadline, "never {status}: {r}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Three replicas: a task minted on the first is seen working and then completed, with its
/// result inlined, on the second and the third; one cancelled through the third stops on the
/// first (its statement interrupted) and reads cancelled everywhere; an unknown id is an
/// unknown task on every replica, and a task's questions are not answered on another.
fn a_task_is_polled_and_cancelled_on_any_replica(engine: Engine) {
    let team = Team::new(engine);
    assert_eq!(team.count("mcpspec_tasks"), "0", "init made the task table");
    let replicas = team.replicas(3, &[("MCPSPEC_TASK_AFTER_MS", "0")]);
    let mut clients: Vec<_> = replicas.iter().map(tasks_client).collect();

    let id = start_wait(&mut clients[0], 2);
    let seen = rpc(&mut clients[2], "tasks/get", json!({"taskId": id}));
    assert_eq!(seen["result"]["status"], "working", "{seen}");
    assert_eq!(seen["result"]["taskId"], id, "{seen}");
    let done = until(
        &mut clients[1],
        &id,
        "completed",
        std::time::Duration::from_secs(20),
    );
    assert_eq!(
        done["result"]["structuredContent"],
        json!({"waited": [{"seconds": 2}]}),
        "{done}"
    );
    let here = until(
        &mut clients[0],
        &id,
        "completed",
        std::time::Duration::from_secs(1),
    );
    assert_eq!(here["result"], done["result"], "the same result everywhere");

    let id = start_wait(&mut clients[0], 60);
    let r = rpc(&mut clients[2], "tasks/cancel", json!({"taskId": id}));
    assert_eq!(r["result"]["resultType"], "complete", "{r}");
    let within = std::time::Duration::from_secs(20);
    until(&mut clients[1], &id, "cancelled", within);
    until(&mut clients[0], &id, "cancelled", within);

    let r = rpc(
        &mut clients[1],
        "tasks/get",
        json!({"taskId": "00000000-0000-4000-8000-000000000000"}),
    );
    assert_eq!(r["error"]["code"], -32602, "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("unknown task")),
        "{r}"
    );
    let r = rpc(
        &mut clients[1],
        "tasks/update",
        json!({"taskId": id, "inputResponses": {}}),
    );
    assert_eq!(r["error"]["code"], -32602, "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("another replica")),
        "{r}"
    );
    assert_eq!(team.count("mcpspec_tasks"), "2");
}

/// Under OAuth, two replicas that accept tokens for one audience: a task alice minted (on a
/// 2026-07-28 request, reached by its id) is hers on every replica. Bob's token on either
/// replica gets the answer of an unknown task from `tasks/get`, `tasks/update` and
/// `tasks/cancel`, and his cancel stops nothing; alice reaches it from the other replica.
fn a_task_is_its_callers_on_every_replica(engine: Engine) {
    use crate::oidc::{Client, Provider};
    let user = |id| Client {
        id,
        scope: "notes:read",
        alg: "RS256",
        claims: json!({}),
    };
    let provider = Provider::start(vec![user("alice"), user("bob")]);
    let audience = "https://notes.example/mcp";
    let team = Team::new(engine);
    let env = [
        ("MCPSPEC_TASK_AFTER_MS", "0"),
        ("MCPSPEC_OAUTH_ISSUER", provider.issuer.as_str()),
        ("MCPSPEC_OAUTH_AUDIENCE", audience),
    ];
    let replicas = team.replicas(2, &env);
    let client = |replica: &HttpServer, who: &str| {
        let mut c = mcpspec_testkit::HttpClient::per_request(
            replica.addr,
            Some(&provider.token(who, audience)),
        );
        c.capabilities = crate::conformance::tasks::caps();
        c
    };
    let mut alice = [client(&replicas[0], "alice"), client(&replicas[1], "alice")];
    let mut bob = [client(&replicas[0], "bob"), client(&replicas[1], "bob")];
    let id = start_wait(&mut alice[0], 3);
    for (i, b) in bob.iter_mut().enumerate() {
        for (method, params) in [
            ("tasks/get", json!({"taskId": id})),
            ("tasks/update", json!({"taskId": id, "inputResponses": {}})),
            ("tasks/cancel", json!({"taskId": id})),
        ] {
            let r = rpc(b, method, params);
            assert_eq!(
                r["error"]["code"], -32602,
                "bob's {method} on replica {i}: {r}"
            );
            assert_eq!(
                r["error"]["message"],
                format!("unknown task: {id}"),
                "the same answer as for an id never issued: {r}"
            );
        }
    }
    let done = until(
        &mut alice[1],
        &id,
        "completed",
        std::time::Duration::from_secs(20),
    );
    assert_eq!(
        done["result"]["structuredContent"],
        json!({"waited": [{"seconds": 3}]}),
        "bob's cancel stopped nothing: {done}"
    );
    until(
        &mut alice[0],
        &id,
        "completed",
        std::time::Duration::from_secs(1),
    );
}

/// A task table an older mcpspec made (without the column that binds a task to its caller):
/// a server keeps its tasks to itself and says how to add it; `migrate` adds it, keeping the
/// rows, and the replicas share tasks again.
fn migrate_adds_the_task_owner_to_an_older_task_table(engine: Engine) {
    let team = Team::new(engine);
    let path = Path::new(&team.url);
    sql_on(engine, path, "DROP TABLE mcpspec_tasks");
    sql_on(
        engine,
        path,
        "CREATE TABLE mcpspec_tasks (id VARCHAR(64) PRIMARY KEY, replica VARCHAR(64) NOT NULL, status VARCHAR(16) NOT NULL, cancel_requested BOOLEAN NOT NULL DEFAULT FALSE, detail TEXT NOT NULL, beat_at BIGINT NOT NULL, expires_at BIGINT NOT NULL)",
    );
    sql_on(
        engine,
        path,
        "INSERT INTO mcpspec_tasks VALUES ('old', 'r', 'completed', FALSE, '{}', 0, 0)",
    );
    let old = HttpServer::serve(
        &["--spec", &team.spec, "--db", &team.url],
        &[("MCPSPEC_TASK_AFTER_MS", "0")],
    );
    let mut client = tasks_client(&old);
    let id = start_wait(&mut client, 0);
    until(
        &mut client,
        &id,
        "completed",
        std::time::Duration::from_secs(20),
    );
    assert_eq!(
        team.count("mcpspec_tasks"),
        "1",
        "the task was kept in memory only"
    );
    let log = old.stop_and_log();
    assert!(
        log.contains("mcpspec migrate"),
        "the server says how to add the column: {log}"
    );
    let (code, out, err) = mcpspec(&["migrate", "--spec", &team.spec, "--db", &team.url], &[]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("added mcpspec_tasks.owner"), "{out}");
    assert_eq!(team.count("mcpspec_tasks"), "1", "the rows are kept");
    let (code, out, err) = mcpspec(&["migrate", "--spec", &team.spec, "--db", &team.url], &[]);
    assert_eq!(code, 0, "a second run finds the column: {err}");
    assert!(out.contains("up to date"), "{out}");
    let replicas = team.replicas(2, &[("MCPSPEC_TASK_AFTER_MS", "0")]);
    let mut clients: Vec<_> = replicas.iter().map(tasks_client).collect();
    let id = start_wait(&mut clients[0], 1);
    until(
        &mut clients[1],
        &id,
        "completed",
        std::time::Duration::from_secs(20),
    );
}

/// A replica killed with SIGKILL while it runs a task: the other replica soon answers that
/// the task failed, saying why, and keeps answering so.
fn a_task_whose_replica_is_killed_fails_with_a_reason(engine: Engine) {
    let team = Team::new(engine);
    let mut replicas = team.replicas(2, &[("MCPSPEC_TASK_AFTER_MS", "0")]);
    let mut clients: Vec<_> = replicas.iter().map(tasks_client).collect();
    let id = start_wait(&mut clients[0], 120);
    let seen = rpc(&mut clients[1], "tasks/get", json!({"taskId": id}));
    assert_eq!(seen["result"]["status"], "working", "{seen}");
    replicas[0].child.kill().expect("SIGKILL");
    replicas[0].child.wait().expect("wait");

    let failed = until(
        &mut clients[1],
        &id,
        "failed",
        std::time::Duration::from_secs(60),
    );
    assert!(
        failed["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("replica running this task stopped")),
        "{failed}"
    );
    let again = rpc(&mut clients[1], "tasks/get", json!({"taskId": id}));
    assert_eq!(again["result"]["status"], "failed", "{again}");
}
