//! What a spec's SQL may not do when mcpspec runs it on its own: the schema, sample rows,
//! derived structures and migrations on a scratch database, `init` and `migrate` on a new one,
//! and the tools' statements when `check` and `test` run a spec's examples. A spec may come from
//! anyone, and checking it must write nothing outside the scratch file, so such a connection
//! refuses, through SQLite's authorizer, every statement that could reach another file:
//! `ATTACH` and `DETACH` (which `VACUUM INTO` uses too), whatever form their argument takes,
//! `load_extension()` and the pragmas that name directories. Anything the authorizer reports
//! that rusqlite cannot classify is refused too: SQLite reports an `ATTACH` whose file name is
//! an expression (`ATTACH (SELECT '...')`, `'a' || 'b'`, `char(...)`) with no file name, which
//! rusqlite then gives as an unknown action. SQLite's authorizer decides when a statement is
//! prepared, so no spelling or nesting of a statement gets past it. The compiler's checks and
//! the runtime share this one rule.

use std::sync::{Arc, Mutex};

use rusqlite::Connection;
use rusqlite::hooks::{AuthAction, AuthContext, Authorization};

/// What a statement a confined connection refused fails with, after SQLite's own words.
pub const REFUSED: &str = "not authorized: mcpspec runs a spec's SQL on its own (check, test, init, migrate) so that it reaches no file but its database; ATTACH, DETACH, VACUUM INTO, load_extension() and the directory pragmas are refused";

/// The kind of the first statement a confined connection refused, for the error message.
pub type Refused = Arc<Mutex<Option<&'static str>>>;

/// What a confined connection refuses besides what reaches another file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Also {
    /// Nothing else: a script may begin and commit its own transactions.
    Nothing,
    /// Transaction control too (`BEGIN`, `COMMIT`, `ROLLBACK`, `SAVEPOINT`): the caller runs
    /// the text in one transaction of its own.
    Transactions,
}

const ATTACH: &str = "ATTACH DATABASE or VACUUM INTO (it opens another database file)";
const DETACH: &str = "DETACH DATABASE";

/// The kind of statement `action` is, when a confined connection refuses it.
fn refused(action: &AuthAction<'_>, also: Also) -> Option<&'static str> {
    match action {
        AuthAction::Attach { .. } => Some(ATTACH),
        AuthAction::Detach { .. } => Some(DETACH),
        AuthAction::Unknown { code, .. } => Some(match *code {
            rusqlite::ffi::SQLITE_ATTACH => ATTACH,
            rusqlite::ffi::SQLITE_DETACH => DETACH,
            _ => "a statement SQLite's authorizer could not classify",
        }),
        AuthAction::Function { function_name }
            if function_name.eq_ignore_ascii_case("load_extension") =>
        {
            Some("load_extension() (it loads code from a file)")
        }
        AuthAction::Pragma { pragma_name, .. }
            if pragma_name.eq_ignore_ascii_case("temp_store_directory")
                || pragma_name.eq_ignore_ascii_case("data_store_directory") =>
        {
            Some("PRAGMA temp_store_directory/data_store_directory (it names a directory)")
        }
        AuthAction::Transaction { .. } | AuthAction::Savepoint { .. }
            if also == Also::Transactions =>
        {
            Some(
                "BEGIN, COMMIT, ROLLBACK or SAVEPOINT (the text runs in one transaction of its own)",
            )
        }
        _ => None,
    }
}

/// Makes `conn` refuse every statement that could reach a file other than its own database,
/// and `also` (see the module comment). The returned cell names the first kind refused.
pub fn confine(conn: &mut Connection, also: Also) -> rusqlite::Result<Refused> {
    let refused_kind: Refused = Arc::default();
    let cell = refused_kind.clone();
    conn.authorizer(Some(move |ctx: AuthContext<'_>| {
        match refused(&ctx.action, also) {
            None => Authorization::Allow,
            Some(kind) => {
                let mut first = cell
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                first.get_or_insert(kind);
                Authorization::Deny
            }
        }
    }))?;
    Ok(refused_kind)
}

/// SQLite's own words for a failure, without rusqlite's wrapping; a statement a confined
/// connection refused says why ([`REFUSED`]).
pub fn message(e: &rusqlite::Error) -> String {
    match e {
        rusqlite::Error::SqliteFailure(f, _)
            if f.code == rusqlite::ErrorCode::AuthorizationForStatementDenied =>
        {
            REFUSED.to_string()
        }
        rusqlite::Error::SqliteFailure(_, Some(m)) => m.clone(),
        rusqlite::Error::SqlInputError { msg, .. } => msg.clone(),
        other => other.to_string(),
    }
}

/// How long a scratch database runs a spec's SQL in all before its statements are interrupted:
/// a schema or sample rows that never end (a recursive query without a bound) fail the check
/// instead of hanging it.
pub const SCRATCH_TIME: std::time::Duration = std::time::Duration::from_secs(60);

/// A scratch database in memory, confined (transactions allowed) and bounded in time
/// ([`SCRATCH_TIME`]): where a spec's DDL is run to learn what it makes.
pub fn scratch() -> rusqlite::Result<Connection> {
    crate::setup();
    let mut conn = Connection::open_in_memory()?;
    confine(&mut conn, Also::Nothing)?;
    let until = std::time::Instant::now() + SCRATCH_TIME;
    conn.progress_handler(10_000, Some(move || std::time::Instant::now() > until))?;
    Ok(conn)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every form of `ATTACH` (a literal, an expression, a parameter, a function of text),
    /// `DETACH` and `VACUUM INTO` is refused before it opens anything: no file appears in the
    /// directory, and an outside database is neither read nor written.
    #[test]
    fn every_form_of_attach_is_refused() {
        crate::setup();
        let out = std::env::temp_dir().join(format!("sqlscan-confine-{}", std::process::id()));
        std::fs::create_dir_all(&out).unwrap();
        let outside = out.join("outside.db");
        Connection::open(&outside)
            .unwrap()
            .execute_batch("CREATE TABLE IF NOT EXISTS secret(s); DELETE FROM secret; INSERT INTO secret VALUES ('k');")
            .unwrap();
        let o = out.display().to_string();
        let hex: String = format!("{o}/h.db")
            .bytes()
            .map(|b| format!("{b:02x}"))
            .collect();
        let chars: Vec<String> = format!("{o}/c.db").bytes().map(|b| b.to_string()).collect();
        let forms = [
            format!("ATTACH DATABASE '{o}/lit.db' AS x"),
            format!("ATTACH (SELECT '{o}/sub.db') AS x"),
            format!("ATTACH '{o}' || '/cat.db' AS x"),
            format!("ATTACH char({}) AS x", chars.join(",")),
            format!("ATTACH CAST(X'{hex}' AS TEXT) AS x"),
            format!("ATTACH printf('%s/p.db', '{o}') AS x"),
            format!("ATTACH replace('{o}/r.dbX', 'X', '') AS x"),
            format!("ATTACH (SELECT '{o}/outside.db') AS x"),
            "ATTACH :file AS x".to_string(),
            format!("ATTACH lower('{o}/L.DB') AS x KEY 'k'"),
            "DETACH main".to_string(),
            "DETACH (SELECT 'main')".to_string(),
            format!("VACUUM INTO '{o}/v.db'"),
            format!("VACUUM INTO (SELECT '{o}/vs.db')"),
            "SELECT load_extension('/tmp/evil')".to_string(),
            format!("PRAGMA temp_store_directory = '{o}'"),
        ];
        for also in [Also::Nothing, Also::Transactions] {
            let mut conn = Connection::open_in_memory().unwrap();
            let refused = confine(&mut conn, also).unwrap();
            for sql in &forms {
                *refused.lock().unwrap() = None;
                let ran = conn.prepare(sql).and_then(|mut st| {
                    if st.parameter_count() > 0 {
                        st.raw_bind_parameter(1, format!("{o}/param.db"))?;
                    }
                    st.raw_execute()
                });
                assert!(ran.is_err(), "{sql} ran");
                assert!(refused.lock().unwrap().is_some(), "{sql}: {ran:?}");
            }
            let transaction = conn.execute_batch("BEGIN; CREATE TABLE t (x); COMMIT;");
            assert_eq!(
                transaction.is_ok(),
                also == Also::Nothing,
                "{transaction:?}"
            );
        }
        let mut left: Vec<_> = std::fs::read_dir(&out)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        left.sort();
        let _ = std::fs::remove_dir_all(&out);
        assert_eq!(left, ["outside.db"], "nothing else was created");
    }

    #[test]
    fn a_scratch_database_runs_ddl_and_refuses_attach() {
        let conn = scratch().unwrap();
        conn.execute_batch("BEGIN; CREATE TABLE t (x); INSERT INTO t VALUES (1); COMMIT;")
            .unwrap();
        assert!(conn.execute_batch("ATTACH ':memory:' AS m").is_err());
    }
}
