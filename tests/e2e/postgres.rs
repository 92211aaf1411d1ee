//! What only PostgreSQL has: a URL with a password that must never be printed, a server that
//! may go away while the server serves, `init` on a server's database, cancellation on the
//! server, and one definition's contract on both engines. The knowledge tests that hold for both
//! engines run on both in `knowledge.rs`.

use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use crate::common::{
    EXE, Engine, mcpspec, sample_db_at, sample_db_on, signal, start_command, start_on,
};
use crate::pg::Cluster;

/// Runs `mcpspec serve` with `args` and no client; returns (exit code, stderr).
fn serve_fails(args: &[&str], env: &[(&str, &str)]) -> (i32, String) {
    let mut c = Command::new(EXE);
    c.arg("serve").args(args).stdin(Stdio::null());
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().expect("run mcpspec serve");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[cfg(feature = "full")]
#[test]
fn start_up_failures_name_the_problem_and_never_the_password() {
    let cluster = Cluster::shared();
    let socket = cluster.dir.display().to_string();
    // (case, arguments, environment, what stderr must say)
    type Case<'a> = (&'a str, Vec<&'a str>, Vec<(&'a str, &'a str)>, &'a str);
    let missing_db = format!("postgresql://postgres:hunter2@/no_such_db?host={socket}");
    let no_server = "postgresql://postgres:hunter2@/kb?host=/nonexistent-dir".to_string();
    let password_param = format!("postgresql:///no_such_db?host={socket}&password=hunter2");
    let cases: Vec<Case<'_>> = vec![
        (
            "no such database",
            vec!["knowledge", "--db", &missing_db],
            vec![],
            "database \"no_such_db\" does not exist",
        ),
        (
            "no server",
            vec!["knowledge", "--db", &no_server],
            vec![],
            "cannot connect to PostgreSQL at postgresql://postgres:***@/kb",
        ),
        (
            "password as a parameter, from DATABASE_URL",
            vec!["knowledge"],
            vec![("DATABASE_URL", &password_param), ("KNOWLEDGE_DB_PATH", "")],
            "password=***",
        ),
        (
            "a server that runs on SQLite only",
            vec!["studio", "--db", &missing_db],
            vec![],
            "the `studio` server runs on SQLite only",
        ),
    ];
    for (case, args, env, says) in cases {
        let (code, err) = serve_fails(&args, &env);
        assert_eq!(code, 2, "{case}: {err}");
        assert!(err.contains(says), "{case}: {err}");
        assert!(
            !err.contains("hunter2"),
            "{case}: the password leaked: {err}"
        );
    }
}

/// Every form a database location may take, through every command and variable that takes
/// one: no password reaches stderr, and a URL of a scheme mcpspec does not serve or a libpq
/// keyword string is refused as such, never taken as a file name (and never printed inside a
/// suggested `init` command).
#[cfg(feature = "full")]
#[test]
fn no_form_of_a_location_prints_its_password() {
    let socket = Cluster::shared().dir.display().to_string();
    // (location, what stderr must say)
    let forms = [
        (
            format!("postgresql:///no_such_db?host={socket}&pass%77ord=hunter2"),
            "does not exist",
        ),
        (
            format!("postgresql:///no_such_db?host={socket}&PassWord=hunter2&user=postgres"),
            "PostgreSQL",
        ),
        (
            "postgresql://postgres:hun/ter2@/kb?host=/nonexistent-dir".to_string(),
            "PostgreSQL",
        ),
        (
            "postgresql://postgres:hun?ter2@/kb?host=/nonexistent-dir".to_string(),
            "PostgreSQL",
        ),
        (
            format!("host={socket} dbname=kb password=hunter2"),
            "keyword/value connection string",
        ),
        (
            "dbname=kb password='hun ter2'".to_string(),
            "keyword/value connection string",
        ),
        (
            "mysql://user:hunter2@localhost/kb?socket=/nonexistent-dir/s".to_string(),
            "cannot connect to MariaDB/MySQL",
        ),
        (
            "mariadb://user:hun/ter2@localhost/kb?socket=/nonexistent-dir/s".to_string(),
            "percent-encoded",
        ),
        (
            "mariadb://user:hun%2Fter2@localhost/kb?socket=/nonexistent-dir/s".to_string(),
            "cannot connect to MariaDB/MySQL",
        ),
    ];
    for (location, says) in &forms {
        let l = location.as_str();
        // (how, arguments, environment)
        type Run<'a> = (&'a str, Vec<&'a str>, Vec<(&'a str, &'a str)>);
        let runs: [Run<'_>; 6] = [
            ("serve --db", vec!["serve", "knowledge", "--db", l], vec![]),
            ("init --db", vec!["init", "knowledge", "--db", l], vec![]),
            (
                "call --db",
                vec!["call", "knowledge", "kb_list", "{}", "--db", l],
                vec![],
            ),
            ("test --db", vec!["test", "knowledge", "--db", l], vec![]),
            (
                "KNOWLEDGE_DB_PATH",
                vec!["serve", "knowledge"],
                vec![("KNOWLEDGE_DB_PATH", l)],
            ),
            (
                "DATABASE_URL",
                vec!["serve", "knowledge"],
                vec![("DATABASE_URL", l), ("KNOWLEDGE_DB_PATH", "")],
            ),
        ];
        for (how, args, env) in runs {
            let mut c = Command::new(EXE);
            c.args(&args).stdin(Stdio::null());
            for (k, v) in &env {
                c.env(k, v);
            }
            let out = c.output().expect("run mcpspec");
            let err = String::from_utf8_lossy(&out.stderr);
            let all = format!("{err}{}", String::from_utf8_lossy(&out.stdout));
            assert!(!out.status.success(), "{how} {l}: {all}");
            for secret in ["hunter2", "ter2", "hun ter"] {
                assert!(
                    !all.contains(secret),
                    "{how} {l}: the password leaked: {all}"
                );
            }
            // DATABASE_URL is read only for a PostgreSQL URL; the others say what is wrong.
            if how != "DATABASE_URL" || l.starts_with("postgres") {
                assert!(err.contains(says), "{how} {l}: {err}");
            }
            assert!(
                !err.contains("mcpspec init knowledge --db mysql"),
                "{how}: {err}"
            );
        }
    }
}

#[cfg(feature = "full")]
#[test]
fn a_database_that_differs_from_the_spec_stops_start_up() {
    // (what differs, the change, what stderr must say)
    let cases = [
        (
            "a missing column",
            "ALTER TABLE knowledge_entries DROP COLUMN tags CASCADE",
            "column \"tags\" does not exist",
        ),
        (
            "a column of another type",
            "ALTER TABLE knowledge_entries DROP CONSTRAINT knowledge_entries_role_check;
             ALTER TABLE knowledge_entries ALTER COLUMN role TYPE integer USING 0",
            "statement `kb_get` returns column `role` as int4, which does not read as the declared text",
        ),
    ];
    for (case, change, says) in cases {
        let db = sample_db_on(Engine::Postgres, "knowledge");
        let url = db.path.to_str().unwrap();
        Cluster::shared().psql(url, change);
        let (code, err) = serve_fails(&["knowledge", "--db", url], &[]);
        assert_eq!(code, 2, "{case}: {err}");
        for want in [
            "does not match what spec/knowledge.yaml expects",
            "tool `kb_get`",
            says,
            "migrate it",
        ] {
            assert!(err.contains(want), "{case}: missing {want:?} in: {err}");
        }
    }
}

#[cfg(feature = "full")]
#[test]
fn init_creates_the_schema_once_and_refuses_a_database_with_tables() {
    let url = Cluster::shared().create_database();
    let (code, out, err) = mcpspec(&["init", "knowledge", "--db", &url], &[]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("created postgresql://"), "{out}");
    assert_eq!(
        Cluster::shared().psql(&url, "SELECT count(*) FROM knowledge_entries"),
        "0"
    );
    // Full-text search has its index.
    let indexes = Cluster::shared().psql(
        &url,
        "SELECT indexdef FROM pg_indexes WHERE indexname = 'knowledge_entries_search'",
    );
    assert!(indexes.contains("USING gin (search)"), "{indexes}");
    let (code, _, err) = mcpspec(&["init", "knowledge", "--sample", "--db", &url], &[]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains(
            "already holds tables (knowledge_entries, mcpspec_migrations, mcpspec_request_states, mcpspec_tasks)"
        ),
        "{err}"
    );
    assert_eq!(
        Cluster::shared().psql(&url, "SELECT count(*) FROM knowledge_entries"),
        "0",
        "init changed an existing database"
    );
}

#[cfg(feature = "full")]
#[test]
fn constraint_failures_are_the_same_tool_error_on_every_engine() {
    let mut errors = Vec::new();
    for engine in [Engine::Sqlite, Engine::Postgres, Engine::Mariadb] {
        let db = sample_db_on(engine, "knowledge");
        // A rule the database keeps and the spec does not know: unique content (a prefix of
        // it on MariaDB, which indexes no whole LONGTEXT).
        let sql = match engine {
            Engine::Mariadb => {
                "CREATE UNIQUE INDEX knowledge_unique_content ON knowledge_entries (content(255))"
            }
            _ => "CREATE UNIQUE INDEX knowledge_unique_content ON knowledge_entries (content)",
        };
        crate::common::sql_on(engine, &db.path, sql);
        let mut s = start_on(db, "knowledge", &[]);
        s.ok("kb_add", json!({"content": "only once", "role": "dev"}));
        errors.push(s.tool_error("kb_add", json!({"content": "only once", "role": "qa"})));
        s.finish();
    }
    assert_eq!(
        errors[0],
        json!({"code": "DATABASE_ERROR", "message": "the database refused the change: unique constraint failed"}),
        "sqlite"
    );
    assert_eq!(errors[1], errors[0], "postgres");
    assert_eq!(errors[2], errors[0], "mariadb");
}

#[cfg(feature = "full")]
#[test]
fn a_database_that_goes_away_gives_database_error_and_the_server_recovers() {
    // A cluster of its own: this test stops it.
    let cluster = Cluster::start();
    let url = cluster.create_database();
    let db = sample_db_at(&url, "knowledge");
    let mut s = start_on(db, "knowledge", &[]);
    let added = s.ok(
        "kb_add",
        json!({"content": "before the outage", "role": "qa"}),
    );
    let id = added["id"].as_str().unwrap().to_string();

    cluster.stop();
    let e = s.tool_error("kb_get", json!({"id": id}));
    assert_eq!(e["code"], "DATABASE_ERROR", "{e}");
    assert!(
        !e.to_string().contains(&cluster.dir.display().to_string()),
        "{e}"
    );

    cluster.restart();
    // Connections that died with the server are found and replaced: the first call after the
    // restart is served.
    let got = s.ok("kb_get", json!({"id": id}));
    assert_eq!(got["content"], "before the outage");
    let again = s.ok(
        "kb_add",
        json!({"content": "after the outage", "role": "qa"}),
    );
    assert!(again["id"].is_string());
    s.finish();
}

#[cfg(feature = "full")]
#[test]
fn a_timeout_cancels_the_statement_on_the_server() {
    let db = sample_db_on(Engine::Postgres, "knowledge");
    let url = db.path.to_str().unwrap().to_string();
    let name = url
        .strip_prefix("postgresql:///")
        .and_then(|rest| rest.split('?').next())
        .expect("a database name in the URL")
        .to_string();
    let mut s = start_command(
        Command::new(EXE)
            .args(["serve", "knowledge", "--db", &url])
            .env("MCPSPEC_CALL_TIMEOUT_MS", "50")
            .env("MCPSPEC_LOG", "warn")
            .stderr(Stdio::null()),
        db,
    );
    // Once the server has started (its statements prepared), another session takes the table
    // (a migration, say): the search cannot finish, so it is still running on the server when
    // the timeout fires, however fast the machine (a search over 300,000 rows once finished
    // inside the 50 ms).
    let lock = Cluster::shared().hold(
        &name,
        "BEGIN; LOCK TABLE knowledge_entries IN ACCESS EXCLUSIVE MODE;",
    );
    let e = s.tool_error("kb_search", json!({"query": "common", "limit": 50}));
    assert_eq!(
        (e["code"].as_str(), e["message"].as_str()),
        (
            Some("DATABASE_ERROR"),
            Some("`kb_search` took longer than 50 ms and was stopped; narrow the request")
        ),
        "{e}"
    );
    // And so is its statement on the server, with the server still running and the lock still
    // held: an uncancelled search would wait for it for ever. The call is answered at its
    // deadline and the watchdog sends the cancel request within its round (20 ms), so the
    // statement may outlive the answer by that long: polled, with a bound.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let running = Cluster::shared().psql(
            &url,
            "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%ts_rank%' AND pid <> pg_backend_pid() AND state = 'active'",
        );
        if running == "0" {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the search still runs on the server 5 s after its timeout"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    drop(lock);
    s.finish();
}

/// One stateless 2026-07-28 `tools/call` (no session: any replica can serve it); the result,
/// or the transport's error.
fn stateless_call(
    client: &mut mcpspec_testkit::HttpClient,
    tool: &str,
    arguments: Value,
) -> Result<Value, mcpspec_testkit::ClientError> {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
    "name": tool, "arguments": arguments,
    "_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "team", "version": "1"}
    }}});
    let headers = [
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", tool),
    ];
    let r = client.exchange("POST", &headers, body.to_string().as_bytes())?;
    let messages = r.messages();
    Ok(messages.into_iter().next().unwrap_or(Value::Null))
}

/// What one team client saw.
#[derive(Default)]
struct Seen {
    /// The content of every acknowledged write.
    acked: Vec<String>,
    /// Anything but a clean success from a replica that was up.
    errors: Vec<String>,
    /// Acknowledged writes read back from another replica.
    reads: usize,
    /// Reads cut off by the kill (sent to the replica as it died).
    reads_cut: usize,
}

/// What the team's clients share: the replicas, whether the first is down, how many writes
/// were acknowledged, and where to say that the kill point is reached.
struct Team {
    addrs: Vec<std::net::SocketAddr>,
    down: std::sync::atomic::AtomicBool,
    acked: std::sync::atomic::AtomicUsize,
    kill_after: usize,
    reached: std::sync::Mutex<std::sync::mpsc::Sender<()>>,
}

impl Team {
    fn down(&self) -> bool {
        self.down.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Replica `at`, or another when it is the one that was killed.
    fn up(&self, at: usize, other: usize) -> usize {
        if at == 0 && self.down() { other } else { at }
    }
}

/// Team client `c`: `writes` acknowledged `kb_add`s round robin over the replicas that are up,
/// each read back from the next replica.
fn team_client(team: &Team, c: usize, writes: usize) -> Seen {
    let mut clients: Vec<_> = team
        .addrs
        .iter()
        .map(|a| mcpspec_testkit::HttpClient::new(*a, None))
        .collect();
    let mut seen = Seen::default();
    let (mut attempt, mut i) = (0, 0);
    while seen.acked.len() < writes {
        attempt += 1;
        // No session, no affinity: any replica serves any call.
        let at = team.up((c + attempt) % 3, 1 + attempt % 2);
        let content = format!("team {c}-{i} try {attempt}");
        let args = json!({"content": content, "role": "dev", "tags": ["team"]});
        match stateless_call(&mut clients[at], "kb_add", args) {
            Ok(r) if r["result"]["isError"] == json!(false) => {
                let id = r["result"]["structuredContent"]["id"].clone();
                seen.acked.push(content);
                i += 1;
                let n = team.acked.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
                if n == team.kill_after {
                    let _ = team.reached.lock().unwrap().send(());
                }
                let from = team.up((at + 1) % 3, 1);
                match stateless_call(&mut clients[from], "kb_get", json!({"id": id})) {
                    Ok(g) if g["result"]["structuredContent"]["id"] == id => seen.reads += 1,
                    Err(_) if from == 0 && team.down() => seen.reads_cut += 1,
                    other => seen
                        .errors
                        .push(format!("read {id} from {from}: {other:?}")),
                }
            }
            // The killed replica: the write may or may not have landed; it was not
            // acknowledged, and the next attempt goes elsewhere with new content.
            Err(_) if at == 0 && team.down() => {}
            other => seen.errors.push(format!("write on {at}: {other:?}")),
        }
    }
    seen
}

/// Every acknowledged write is in the database at `url` exactly once.
fn acknowledged_writes_present_once(engine: Engine, db: &Path, acked: &[&String]) {
    let present = crate::common::sql_on(
        engine,
        db,
        "SELECT SUM(CASE WHEN n = 1 THEN 1 ELSE 0 END), SUM(CASE WHEN n > 1 THEN 1 ELSE 0 END)
         FROM (SELECT content, count(*) AS n FROM knowledge_entries WHERE content LIKE 'team %' GROUP BY content) c",
    );
    let (once, twice) = present.split_once(['|', '\t']).expect("two counts");
    assert_eq!(twice, "0", "some writes landed twice");
    // Writes cut off by the kill may have landed unacknowledged; acknowledged ones all did.
    let once: usize = once.parse().unwrap();
    assert!(
        once >= acked.len(),
        "{once} present, {} acknowledged",
        acked.len()
    );
    let list: Vec<String> = acked.iter().map(|c| format!("'{c}'")).collect();
    let found = crate::common::sql_on(
        engine,
        db,
        &format!(
            "SELECT count(*) FROM knowledge_entries WHERE content IN ({})",
            list.join(",")
        ),
    );
    assert_eq!(
        found,
        acked.len().to_string(),
        "an acknowledged write is missing"
    );
}

crate::on_every_engine_of_a_team!(a_team_of_replicas_on_one_database_loses_no_acknowledged_write);

/// Three replicas on one database, twenty clients with no affinity writing 1,000 entries and
/// reading each back from another replica; one replica is killed with SIGKILL mid-burst. On
/// each database server engine.
fn a_team_of_replicas_on_one_database_loses_no_acknowledged_write(engine: Engine) {
    const CLIENTS: usize = 20;
    const WRITES: usize = 50;
    let db = sample_db_on(engine, "knowledge");
    let replicas: Vec<crate::http::HttpServer> = (0..3)
        .map(|_| crate::http::HttpServer::start(&db.path, &[], &[]))
        .collect();
    let (reached, kill_now) = std::sync::mpsc::channel::<()>();
    let team = std::sync::Arc::new(Team {
        addrs: replicas.iter().map(|r| r.addr).collect(),
        down: false.into(),
        acked: 0.into(),
        kill_after: 400,
        reached: std::sync::Mutex::new(reached),
    });
    let workers: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let team = team.clone();
            std::thread::spawn(move || team_client(&team, c, WRITES))
        })
        .collect();
    kill_now.recv().expect("the burst reaches the kill point");
    team.down.store(true, std::sync::atomic::Ordering::SeqCst);
    signal(replicas[0].child.id(), "-KILL");
    let seen: Vec<Seen> = workers.into_iter().map(|w| w.join().unwrap()).collect();

    let errors: Vec<&String> = seen.iter().flat_map(|s| &s.errors).collect();
    assert!(
        errors.is_empty(),
        "{} errors, first: {:?}",
        errors.len(),
        errors.first()
    );
    let acked: Vec<&String> = seen.iter().flat_map(|s| &s.acked).collect();
    assert_eq!(acked.len(), CLIENTS * WRITES);
    // Every acknowledged write was read back from another replica (unless the read went to
    // the replica as it was killed).
    let reads: usize = seen.iter().map(|s| s.reads).sum();
    let cut: usize = seen.iter().map(|s| s.reads_cut).sum();
    eprintln!("team: acked {} reads {reads} cut {cut}", acked.len());
    assert_eq!(reads + cut, acked.len());
    assert!(cut <= CLIENTS, "{cut} reads cut off");
    acknowledged_writes_present_once(engine, &db.path, &acked);
    // The replicas that were not killed still serve.
    for r in &replicas[1..] {
        let mut c = mcpspec_testkit::HttpClient::new(r.addr, None);
        let got = stateless_call(&mut c, "kb_list", json!({"tags": ["team"], "limit": 1})).unwrap();
        assert_eq!(got["result"]["isError"], json!(false), "{got}");
    }
}

/// A server that accepts only TLS on TCP, with a self-signed certificate: `sslmode=require`
/// connects encrypted (as libpq's `require`, without checking the certificate against a CA);
/// `sslmode=disable` is refused by the server and says so. On the machine's own PostgreSQL
/// (the wheel the other tests use is built without TLS), with a spec that needs no extension.
#[cfg(feature = "full")]
#[test]
fn sslmode_require_connects_over_tls_to_a_self_signed_server() {
    let (cluster, port) = Cluster::start_tls();
    let socket_url = cluster.create_database();
    let name = socket_url["postgresql:///".len()..]
        .split('?')
        .next()
        .unwrap()
        .to_string();
    let url =
        format!("postgresql://postgres:unused-secret@127.0.0.1:{port}/{name}?sslmode=require");
    let spec = format!(
        "--spec={}/../tests/fixtures/postgres/spec.yaml",
        env!("CARGO_MANIFEST_DIR")
    );
    let (code, _, err) = mcpspec(&["init", &spec, "--sample", "--db", &url], &[]);
    assert_eq!(code, 0, "init on {url} failed: {err}");
    let db = crate::common::Db {
        _dir: tempfile::tempdir().expect("tempdir"),
        path: std::path::PathBuf::from(&url),
    };
    let mut s = start_on(db, &spec, &[]);
    let found = s.ok("get_note", json!({"id": 1}));
    assert_eq!(found["title"], "first", "{found}");
    // Every connection of the server is encrypted.
    let encrypted = cluster.psql(
        &socket_url,
        "SELECT count(*) FILTER (WHERE s.ssl), count(*) FROM pg_stat_ssl s
         JOIN pg_stat_activity a USING (pid) WHERE a.application_name = 'mcpspec'",
    );
    let (tls, all) = encrypted.split_once('|').unwrap();
    assert!(all != "0" && tls == all, "{encrypted}");
    s.finish();

    let plain = url.replace("sslmode=require", "sslmode=disable");
    let (code, err) = serve_fails(&[&spec, "--db", &plain], &[]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("no encryption"), "{err}");
    assert!(!err.contains("unused-secret"), "{err}");
}

/// A transaction PostgreSQL rolls back for a serialization failure runs again: the write lands
/// once and the call succeeds. The first insert is made to fail so (a sequence is not rolled
/// back with the transaction).
#[cfg(feature = "full")]
#[test]
fn a_serialization_failure_is_retried_and_the_write_lands_once() {
    let db = sample_db_on(Engine::Postgres, "knowledge");
    let url = db.path.to_str().unwrap().to_string();
    Cluster::shared().psql(
        &url,
        "CREATE SEQUENCE attempts;
         CREATE FUNCTION fail_first() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN
           IF nextval('attempts') = 1 THEN
             RAISE EXCEPTION 'conflict' USING ERRCODE = 'serialization_failure';
           END IF;
           RETURN NEW;
         END $$;
         CREATE TRIGGER fail_first BEFORE INSERT ON knowledge_entries
           FOR EACH ROW EXECUTE FUNCTION fail_first();",
    );
    let mut s = start_on(db, "knowledge", &[]);
    let added = s.ok("kb_add", json!({"content": "lands once", "role": "dev"}));
    assert!(added["id"].is_string());
    s.finish();
    let cluster = Cluster::shared();
    assert_eq!(
        cluster.psql(
            &url,
            "SELECT count(*) FROM knowledge_entries WHERE content = 'lands once'"
        ),
        "1"
    );
    assert_eq!(cluster.psql(&url, "SELECT last_value FROM attempts"), "2");
}
