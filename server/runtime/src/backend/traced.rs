//! A span per database statement: a job's [`Session`] wrapped so that each `execute` and
//! `query` is a client span, a child of the sampled request being served on this thread (a
//! statement outside one is not traced), named by its operation (`SELECT`, `INSERT`, ...)
//! with `db.system.name` and `db.operation.name`, and `error.type` when it fails. Never the
//! statement's text or its arguments.

use super::Session;

/// Runs `f` on `session`, each statement traced when telemetry is on.
pub fn traced<T>(session: &mut dyn Session, f: impl FnOnce(&mut dyn Session) -> T) -> T {
    #[cfg(feature = "otel")]
    if crate::telemetry::spans::on() {
        return f(&mut imp::Traced { inner: session });
    }
    f(session)
}

/// The operations a statement's span is named by (`db.operation.name`), as static text.
#[cfg_attr(not(feature = "otel"), allow(dead_code))]
const OPERATIONS: &[&str] = &[
    "SELECT", "INSERT", "UPDATE", "DELETE", "WITH", "REPLACE", "MERGE", "VALUES", "CALL", "PRAGMA",
    "CREATE", "DROP", "ALTER", "TRUNCATE", "BEGIN", "COMMIT", "ROLLBACK", "SET", "SHOW", "EXPLAIN",
    "ANALYZE", "VACUUM", "COPY", "LOCK",
];

/// The operation a statement starts with (`SELECT`, `WITH`), skipping blanks and comments;
/// `None` when it starts with no word of [`OPERATIONS`].
#[cfg_attr(not(feature = "otel"), allow(dead_code))]
fn operation(sql: &str) -> Option<&'static str> {
    let mut rest = sql;
    loop {
        rest = rest.trim_start();
        if let Some(r) = rest.strip_prefix("--") {
            rest = r.split_once('\n').map_or("", |(_, r)| r);
        } else if let Some(r) = rest.strip_prefix("/*") {
            rest = r.split_once("*/").map_or("", |(_, r)| r);
        } else {
            break;
        }
    }
    // Bytes, not chars: a word of `OPERATIONS` is ASCII, so the first byte that is not an
    // ASCII letter ends it, whatever follows.
    let word = rest.as_bytes();
    let end = word
        .iter()
        .position(|b| !b.is_ascii_alphabetic())
        .unwrap_or(word.len());
    let word = &word[..end];
    OPERATIONS
        .iter()
        .find(|op| op.as_bytes().eq_ignore_ascii_case(word))
        .copied()
}

#[cfg(feature = "otel")]
mod imp {
    use crate::backend::{Bind, Changes, Dialect, Failure, Row, Session, Sql};
    use crate::telemetry::spans::{Open, What};

    pub(super) struct Traced<'a> {
        pub(super) inner: &'a mut dyn Session,
    }

    impl Traced<'_> {
        /// The statement's span, when the thread serves a sampled request: a request the
        /// sampler dropped carries none, and its statements are not roots of traces of their own.
        fn span(&self, sql: &str) -> Option<(Open, What)> {
            let span = Open::statement()?;
            let what = What::Statement {
                system: self.inner.dialect().system,
                operation: super::operation(sql),
            };
            Some((span, what))
        }
    }

    fn end<T>(span: Option<(Open, What)>, result: &Result<T, Failure>) {
        let Some((span, what)) = span else { return };
        let error = result
            .as_ref()
            .err()
            .map(|f| format!("{:?}", f.kind).into_boxed_str());
        span.end(what, error, std::time::Instant::now());
    }

    impl Session for Traced<'_> {
        fn dialect(&self) -> &'static Dialect {
            self.inner.dialect()
        }

        fn execute(&mut self, sql: Sql<'_>, bind: Bind<'_>) -> Result<Changes, Failure> {
            let span = self.span(sql.text);
            let result = self.inner.execute(sql, bind);
            end(span, &result);
            result
        }

        fn query(
            &mut self,
            sql: Sql<'_>,
            bind: Bind<'_>,
            each: &mut dyn FnMut(&dyn Row) -> bool,
        ) -> Result<(), Failure> {
            let span = self.span(sql.text);
            let result = self.inner.query(sql, bind, each);
            end(span, &result);
            result
        }

        fn begin(&mut self, writes: bool) -> Result<(), Failure> {
            self.inner.begin(writes)
        }

        fn end(&mut self, commit: bool) -> Result<(), Failure> {
            self.inner.end(commit)
        }

        fn act_as(&mut self, role: &str, setting: &str, claims: &str) -> Result<(), Failure> {
            self.inner.act_as(role, setting, claims)
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_statement_is_named_by_its_first_word() {
        let cases = [
            ("SELECT 1", Some("SELECT")),
            ("  insert into t values (1)", Some("INSERT")),
            (
                "-- a comment\nWITH x AS (SELECT 1) SELECT * FROM x",
                Some("WITH"),
            ),
            ("/* why */ delete from t", Some("DELETE")),
            ("", None),
            ("-- only a comment", None),
            ("(SELECT 1)", None),
            ("SELECTED", None),
            ("sélect 1", None),
            // A letter beyond ASCII ends the word as before, and splits no character.
            ("SELECT\u{e9}", Some("SELECT")),
        ];
        for (sql, op) in cases {
            assert_eq!(super::operation(sql), op, "{sql}");
        }
    }
}
