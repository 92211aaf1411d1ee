//! What only MariaDB/MySQL has: TLS chosen by `ssl-mode` in the URL, and the deadlock and lock
//! wait errors that run a transaction again. The knowledge tests that hold for every engine
//! run on all three in `knowledge.rs`; the team of replicas in `postgres.rs` runs on both
//! database servers.

use serde_json::json;

use crate::common::{Engine, mcpspec, sample_db_at, sample_db_on, start_on};
use crate::maria::Server;

/// `mcpspec serve ARGS` that must fail: its exit code and what it printed on stderr.
fn serve_fails(args: &[&str]) -> (i32, String) {
    let (code, _, err) = mcpspec(&[&["serve"], args].concat(), &[]);
    (code, err)
}

/// A server that accepts only TLS on TCP (`require_secure_transport`), with a self-signed
/// certificate: `ssl-mode=REQUIRED` connects encrypted (as the MariaDB client's `REQUIRED`,
/// without checking the certificate against a CA); `VERIFY_CA` refuses the self-signed
/// certificate; `ssl-mode=DISABLED` is refused by the server and says so.
#[cfg(feature = "full")]
#[test]
fn ssl_mode_required_connects_over_tls_to_a_self_signed_server() {
    let (server, port) = Server::start_tls();
    let socket_url = server.create_database();
    let name = socket_url["mysql://root@localhost/".len()..]
        .split('?')
        .next()
        .unwrap()
        .to_string();
    server.sql(
        "mysql",
        "CREATE USER tls@'%' IDENTIFIED BY 'unused-secret'; GRANT ALL ON *.* TO tls@'%'",
    );
    let url = format!("mysql://tls:unused-secret@127.0.0.1:{port}/{name}?ssl-mode=REQUIRED");
    let db = sample_db_at(&url, "knowledge");
    let mut s = start_on(db, "knowledge", &[]);
    let found = s.ok("kb_search", json!({"query": "database"}));
    assert_eq!(
        found["results"].as_array().map(Vec::len),
        Some(2),
        "{found}"
    );
    s.finish();

    for (mode, says) in [
        // MariaDB words a refused unencrypted connection as a refused login (1045).
        ("DISABLED", "Access denied"),
        ("VERIFY_CA", "certificate"),
    ] {
        let other = url.replace("ssl-mode=REQUIRED", &format!("ssl-mode={mode}"));
        let (code, err) = serve_fails(&["knowledge", "--db", &other]);
        assert_eq!(code, 2, "{mode}: {err}");
        assert!(err.contains(says), "{mode}: {err}");
        assert!(!err.contains("unused-secret"), "{mode}: {err}");
    }
    let (code, err) = serve_fails(&[
        "knowledge",
        "--db",
        &url.replace("ssl-mode=REQUIRED", "ssl-mode=SOMETIMES"),
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("ssl-mode=SOMETIMES is not one of"), "{err}");
}

/// A transaction MariaDB rolls back for a deadlock (1213) runs again: the write lands once
/// and the call succeeds. The first insert is made to fail so by a trigger (a sequence is not
/// rolled back with the transaction).
#[cfg(feature = "full")]
#[test]
fn a_deadlock_is_retried_and_the_write_lands_once() {
    let db = sample_db_on(Engine::Mariadb, "knowledge");
    let url = db.path.to_str().unwrap().to_string();
    let server = Server::shared();
    server.sql(
        &url,
        "CREATE SEQUENCE attempts;
         DELIMITER //
         CREATE TRIGGER fail_first BEFORE INSERT ON knowledge_entries FOR EACH ROW
         BEGIN
           IF NEXTVAL(attempts) = 1 THEN
             SIGNAL SQLSTATE '40001' SET MESSAGE_TEXT = 'conflict', MYSQL_ERRNO = 1213;
           END IF;
         END //
         DELIMITER ;",
    );
    let mut s = start_on(db, "knowledge", &[]);
    let added = s.ok("kb_add", json!({"content": "lands once", "role": "dev"}));
    assert!(added["id"].is_string());
    s.finish();
    assert_eq!(
        server.sql(
            &url,
            "SELECT count(*) FROM knowledge_entries WHERE content = 'lands once'"
        ),
        "1"
    );
    assert_eq!(server.sql(&url, "SELECT NEXTVAL(attempts)"), "3");
}

/// A lock wait that outlasts the server's `innodb_lock_wait_timeout` (1205) on every attempt
/// ends as the busy error, after the retries, and nothing lands.
#[cfg(feature = "full")]
#[test]
fn a_lock_held_elsewhere_ends_as_database_busy() {
    let db = sample_db_on(Engine::Mariadb, "knowledge");
    let url = db.path.to_str().unwrap().to_string();
    let server = Server::shared();
    server.sql(
        &url,
        "CREATE TRIGGER always_busy BEFORE INSERT ON knowledge_entries FOR EACH ROW
           SIGNAL SQLSTATE 'HY000' SET MESSAGE_TEXT = 'Lock wait timeout exceeded', MYSQL_ERRNO = 1205",
    );
    let mut s = start_on(db, "knowledge", &[]);
    let e = s.tool_error("kb_add", json!({"content": "never lands", "role": "dev"}));
    assert_eq!(e["code"], "DATABASE_ERROR", "{e}");
    assert!(e["message"].as_str().unwrap().contains("busy"), "{e}");
    s.finish();
    assert_eq!(
        server.sql(
            &url,
            "SELECT count(*) FROM knowledge_entries WHERE content = 'never lands'"
        ),
        "0"
    );
}

/// Search on MariaDB: every word must appear, as on every engine, also the words InnoDB does
/// not index (shorter than three characters, its stopwords), which are checked on the
/// candidates its index finds; boolean operators in the user's text are plain words.
#[cfg(feature = "full")]
#[test]
fn search_requires_every_word_and_reads_operators_as_text() {
    let mut s = crate::common::start_engine(Engine::Mariadb, "knowledge", &[]);
    let mut count = |q: &str| {
        let r = s.ok("kb_search", json!({"query": q}));
        r["results"].as_array().map_or(0, Vec::len)
    };
    assert_eq!(count("database"), 2);
    // No entry that says "database" says "the" or "is" too.
    assert_eq!(count("the database"), 0);
    assert_eq!(count("a database is"), 0);
    assert_eq!(count("a database"), 1);
    assert_eq!(count("database migrations"), 1);
    // `-` would exclude the entry with "migrations" and `+` require; both are text here.
    assert_eq!(count("+database -migrations"), 1);
    assert_eq!(count("database ~migrations*"), 1);
    assert_eq!(count("\"database migrations\" <nothing>"), 0);
    s.finish();
}

/// Connections the server drops (`KILL CONNECTION`, as a restart or `wait_timeout` would) are
/// found dead and replaced: the next read answers, run once more on a fresh connection, and so
/// does everything after it.
#[cfg(feature = "full")]
#[test]
fn connections_the_server_drops_are_replaced_and_reads_recover() {
    let db = sample_db_on(Engine::Mariadb, "knowledge");
    let url = db.path.to_str().unwrap().to_string();
    let name = url["mysql://root@localhost/".len()..]
        .split('?')
        .next()
        .unwrap()
        .to_string();
    let server = Server::shared();
    let mut s = start_on(db, "knowledge", &[]);
    let id = "2d8b1a4c-7e3f-4a01-9c5d-3e4f5a6b7c8d";
    s.ok("kb_get", json!({"id": id}));
    let kill_all = || {
        let ids = server.sql(
            "mysql",
            &format!(
                "SELECT GROUP_CONCAT(id) FROM information_schema.processlist
                 WHERE db = '{name}' AND id <> CONNECTION_ID()"
            ),
        );
        assert!(!ids.is_empty() && ids != "NULL", "no connection to kill");
        for id in ids.split(',') {
            server.sql("mysql", &format!("KILL CONNECTION {id}"));
        }
    };
    kill_all();
    for _ in 0..3 {
        let got = s.ok("kb_get", json!({"id": id}));
        assert_eq!(got["id"], id);
    }
    let added = s.ok("kb_add", json!({"content": "after the kill", "role": "qa"}));
    assert!(added["id"].is_string());
    s.finish();
}
