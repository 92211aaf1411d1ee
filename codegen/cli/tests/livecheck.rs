//! `codegen check --db knowledge=URL` against a live database server the test starts itself
//! (the e2e tests' throwaway PostgreSQL cluster and `mariadbd`): a database made from the
//! spec's own schema for that engine passes; one that drifted gives a finding per problem at
//! the spec's `postgres:` or `mysql:` text. One checker for every engine, reached through the
//! backend trait.

#[path = "../../../tests/e2e/pg.rs"]
#[allow(dead_code)]
mod pg;

#[path = "../../../tests/e2e/deps.rs"]
#[allow(dead_code)]
mod deps;

#[path = "../../../tests/e2e/maria.rs"]
#[allow(dead_code)]
mod maria;

use std::path::PathBuf;
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The knowledge spec's `database.<key>.schema`, as written.
fn declared_schema(key: &str) -> String {
    let spec = std::fs::read_to_string(root().join("spec/knowledge.yaml")).unwrap();
    let start = spec
        .find(&format!("  {key}:\n    env: DATABASE_URL\n    schema: |\n"))
        .unwrap_or_else(|| panic!("the knowledge spec declares a `{key}` schema"));
    let body = &spec[start..];
    let body = &body[body.find("schema: |\n").unwrap() + "schema: |\n".len()..];
    let end = body.find("    sample: |").unwrap();
    body[..end]
        .lines()
        .map(|l| l.strip_prefix("      ").unwrap_or(l))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Runs the check against `url`; (success, everything it printed).
fn check(url: &str) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_codegen"))
        .args(["check", "--db", &format!("knowledge={url}")])
        .current_dir(root())
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

#[test]
fn postgres_a_database_from_the_declared_schema_passes_and_drift_is_found_at_the_spec() {
    let cluster = pg::Cluster::shared();
    let fresh = cluster.create_database();
    cluster.psql(&fresh, &declared_schema("postgres"));
    let (ok, text) = check(&fresh);
    assert!(ok, "{text}");

    let drifted = cluster.create_database();
    cluster.psql(&drifted, &declared_schema("postgres"));
    cluster.psql(
        &drifted,
        "ALTER TABLE knowledge_entries ALTER COLUMN content DROP NOT NULL;
         ALTER TABLE knowledge_entries DROP CONSTRAINT knowledge_entries_role_check;
         ALTER TABLE knowledge_entries ALTER COLUMN role TYPE integer USING 0;
         ALTER TABLE knowledge_entries ADD COLUMN author text NOT NULL DEFAULT 'x';
         ALTER TABLE knowledge_entries ALTER COLUMN author DROP DEFAULT;",
    );
    let (ok, text) = check(&drifted);
    assert!(!ok, "{text}");
    for want in [
        // A column of another type than declared, and a parameter an argument cannot bind to.
        "tool `kb_get`: statement `kb_get`: column `role` is declared text but PostgreSQL returns int4",
        "tool `kb_add`: statement `kb_add`: parameter `:role` is int4 on PostgreSQL, which a string argument cannot bind to",
        "tool `kb_list`: statement `kb_list` does not prepare against the live database: operator does not exist: integer = text",
        // A nullable column declared non-null.
        "tool `kb_get`: statement `kb_get`: column `content` is declared non-null but comes from `knowledge_entries.content`, which may be NULL",
        // An INSERT that leaves a NOT NULL column without a default unset.
        "tool `kb_add`: statement `kb_add` leaves `knowledge_entries.author` unset",
        "--> spec/knowledge.yaml:",
    ] {
        assert!(text.contains(want), "missing {want:?} in:\n{text}");
    }
    // Only what drifted: `id` and `role` are still NOT NULL.
    assert!(
        !text.contains("`knowledge_entries.id`, which may be NULL"),
        "{text}"
    );

    // A vector column of other dimensions than the provider's, whether a provider is set or
    // not: the column is the spec's.
    let narrow = cluster.create_database();
    cluster.psql(&narrow, &declared_schema("postgres"));
    cluster.psql(
        &narrow,
        "DROP INDEX knowledge_entries_embedding;
         ALTER TABLE knowledge_entries ALTER COLUMN embedding TYPE vector(128) USING NULL;",
    );
    let (ok, text) = check(&narrow);
    assert!(!ok, "{text}");
    assert!(
        text.contains("the live database's knowledge_entries.embedding holds vectors of 128 dimensions, and `knowledge` makes 256"),
        "{text}"
    );

    // A table or column that is not there at all.
    let missing = cluster.create_database();
    cluster.psql(&missing, "CREATE TABLE unrelated (x int)");
    let (ok, text) = check(&missing);
    assert!(!ok);
    assert!(
        text.contains("tool `kb_get`: statement `kb_get` does not prepare against the live database: relation \"knowledge_entries\" does not exist"),
        "{text}"
    );
}

#[test]
fn mariadb_a_database_from_the_declared_schema_passes_and_drift_is_found_at_the_spec() {
    let server = maria::Server::shared();
    let fresh = server.create_database();
    server.sql(&fresh, &declared_schema("mysql"));
    let (ok, text) = check(&fresh);
    assert!(ok, "{text}");
    // The check only reads: the database holds what it held.
    assert_eq!(
        server.sql(&fresh, "SELECT COUNT(*) FROM knowledge_entries"),
        "0"
    );

    let drifted = server.create_database();
    server.sql(&drifted, &declared_schema("mysql"));
    server.sql(
        &drifted,
        "ALTER TABLE knowledge_entries MODIFY content LONGTEXT NULL;
         ALTER TABLE knowledge_entries MODIFY role INT NOT NULL;
         ALTER TABLE knowledge_entries ADD COLUMN author VARCHAR(20) NOT NULL;",
    );
    let (ok, text) = check(&drifted);
    assert!(!ok, "{text}");
    for want in [
        // A column of another type than declared.
        "tool `kb_get`: statement `kb_get`: column `role` is declared text but MariaDB/MySQL returns INT",
        // A nullable column declared non-null.
        "tool `kb_get`: statement `kb_get`: column `content` is declared non-null but comes from `knowledge_entries.content`, which may be NULL",
        // An INSERT that leaves a NOT NULL column without a default unset.
        "tool `kb_add`: statement `kb_add` leaves `knowledge_entries.author` unset",
        "--> spec/knowledge.yaml:",
    ] {
        assert!(text.contains(want), "missing {want:?} in:\n{text}");
    }
    // Only what drifted: `id` is still NOT NULL.
    assert!(
        !text.contains("`knowledge_entries.id`, which may be NULL"),
        "{text}"
    );

    // A table that is not there at all.
    let missing = server.create_database();
    server.sql(&missing, "CREATE TABLE unrelated (x int)");
    let (ok, text) = check(&missing);
    assert!(!ok);
    assert!(
        text.contains(
            "tool `kb_get`: statement `kb_get` does not prepare against the live database:"
        ) && text.contains("knowledge_entries' doesn't exist"),
        "{text}"
    );
    assert!(
        !text.contains("socket="),
        "the check printed the URL: {text}"
    );
}

/// A spec that stores vectors on MariaDB (its `mysql:` schema declares a `VECTOR(N)` column) is
/// refused by `check --db` on a MariaDB before 11.7, which has no vector type, saying so.
#[test]
fn a_spec_with_vectors_on_mariadb_is_refused_where_mariadb_has_none() {
    let project = tempfile::tempdir().unwrap();
    std::fs::create_dir(project.path().join("spec")).unwrap();
    std::fs::write(
        project.path().join("spec/notes.yaml"),
        r#"server: {name: notes, version: 0.1.0}
embeddings:
  notes:
    dimensions: 4
    provider: env:NOTES_EMBEDDINGS
    stored_in: [notes.embedding]
database:
  schema: CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL, embedding F32_BLOB(4));
  mysql:
    schema: CREATE TABLE notes (id BIGINT PRIMARY KEY, body TEXT NOT NULL, embedding VECTOR(4));
tools:
  - name: list_notes
    description: Every note.
    sql:
      query: SELECT id, body FROM notes ORDER BY id
      columns: {id: integer, body: text}
"#,
    )
    .unwrap();
    let server = maria::Server::shared();
    let db = server.create_database();
    server.sql(
        &db,
        "CREATE TABLE notes (id BIGINT PRIMARY KEY, body TEXT NOT NULL)",
    );
    let out = Command::new(env!("CARGO_BIN_EXE_codegen"))
        .args(["check", "--root"])
        .arg(project.path())
        .args(["--db", &format!("notes={db}")])
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{text}");
    assert!(
        text.contains("`notes` stores its vectors in notes.embedding: this MariaDB (10.11) has no vector type; MariaDB 11.7 and later do"),
        "{text}"
    );
}
