//! What a job's statements are seen as: a job's [`Session`] wrapped so that each `execute`
//! and `query` is a client span, a child of the sampled request being served on this thread (a
//! statement outside one is not traced), named by its operation (`SELECT`, `INSERT`, ...)
//! with `db.system.name` and `db.operation.name`, and `error.type` when it fails; and, while a
//! workbench page watches the call this thread serves (`watch::Statements`), a line of the
//! call's record with the statement's spec name, operation and duration. Never the
//! statement's text or its arguments.

use std::time::Instant;

use super::{Bind, Changes, Dialect, Failure, Row, Session, Sql};

/// Runs `f` on `session`, each statement traced when telemetry is on and seen when a page
/// watches the call.
pub fn traced<T>(session: &mut dyn Session, f: impl FnOnce(&mut dyn Session) -> T) -> T {
    #[cfg(feature = "otel")]
    let spans = crate::telemetry::spans::on();
    #[cfg(not(feature = "otel"))]
    let spans = false;
    let watched = crate::watch::collecting();
    if spans || watched {
        return f(&mut Observed {
            inner: session,
            spans,
            watched,
        });
    }
    f(session)
}

/// The operations a statement's span is named by (`db.operation.name`).
const OPERATIONS: [&str; 24] = [
    "SELECT", "INSERT", "UPDATE", "DELETE", "WITH", "REPLACE", "MERGE", "VALUES", "CALL", "PRAGMA",
    "CREATE", "DROP", "ALTER", "TRUNCATE", "BEGIN", "COMMIT", "ROLLBACK", "SET", "SHOW", "EXPLAIN",
    "ANALYZE", "VACUUM", "COPY", "LOCK",
];

/// An upper-case word of at most eight letters as one number (its bytes, zero-padded), so that
/// a word is found among [`OPERATIONS`] by comparing numbers.
const fn packed(word: &[u8]) -> u64 {
    let mut bytes = [0u8; 8];
    let mut i = 0;
    while i < word.len() {
        bytes[i] = word[i];
        i += 1;
    }
    u64::from_le_bytes(bytes)
}

/// [`OPERATIONS`] packed, with each one's place there, in the order of the numbers: a
/// word's number is looked up in a binary search of five steps, not compared with each.
const PACKED: [(u64, usize); 24] = {
    let mut table = [(0u64, 0usize); 24];
    let mut i = 0;
    while i < OPERATIONS.len() {
        table[i] = (packed(OPERATIONS[i].as_bytes()), i);
        i += 1;
    }
    // Insertion sort, as a const fn can.
    let mut j = 1;
    while j < table.len() {
        let mut k = j;
        while k > 0 && table[k - 1].0 > table[k].0 {
            let t = table[k - 1];
            table[k - 1] = table[k];
            table[k] = t;
            k -= 1;
        }
        j += 1;
    }
    table
};

/// The operation a statement starts with (`SELECT`, `WITH`), skipping blanks and comments;
/// `None` when it starts with no word of [`OPERATIONS`]. Found for each statement a page
/// watches or a trace samples, so the word is packed into a number and looked up as one
/// rather than compared as text with each operation in turn, and a statement that starts
/// with its word (a spec's nearly always does) skips nothing.
fn operation(sql: &str) -> Option<&'static str> {
    let start = sql.as_bytes().first().is_some_and(u8::is_ascii_alphabetic);
    let rest = if start { sql } else { after_blanks(sql) };
    // Bytes, not chars: each operation is ASCII, so the first byte that is not an ASCII
    // letter ends the word, whatever follows; none is longer than eight letters.
    let mut key = 0u64;
    for (i, &b) in rest.as_bytes().iter().take(9).enumerate() {
        if !b.is_ascii_alphabetic() {
            break;
        }
        if i == 8 {
            return None;
        }
        // Upper case: a letter's bit 5 cleared.
        key |= u64::from(b & 0xDF) << (8 * i);
    }
    let found = PACKED.binary_search_by_key(&key, |&(k, _)| k).ok()?;
    Some(OPERATIONS[PACKED[found].1])
}

/// `sql` after its leading blanks and comments.
fn after_blanks(sql: &str) -> &str {
    let mut rest = sql;
    loop {
        rest = rest.trim_start();
        if let Some(r) = rest.strip_prefix("--") {
            rest = r.split_once('\n').map_or("", |(_, r)| r);
        } else if let Some(r) = rest.strip_prefix("/*") {
            rest = r.split_once("*/").map_or("", |(_, r)| r);
        } else {
            return rest;
        }
    }
}

/// A session whose statements are traced (`spans`) or seen by the workbench (`watched`).
struct Observed<'a> {
    inner: &'a mut dyn Session,
    spans: bool,
    watched: bool,
}

/// A statement under way: its span, when traced, and when it started.
struct Started {
    #[cfg(feature = "otel")]
    span: Option<(crate::telemetry::spans::Open, crate::telemetry::spans::What)>,
    at: Instant,
}

impl Observed<'_> {
    fn start(&self, sql: &Sql<'_>) -> Started {
        #[cfg(feature = "otel")]
        let span = if self.spans {
            // When the thread serves a sampled request: a request the sampler dropped carries
            // none, and its statements are not roots of traces of their own.
            crate::telemetry::spans::Open::statement().map(|span| {
                let what = crate::telemetry::spans::What::Statement {
                    system: self.inner.dialect().system,
                    operation: operation(sql.text),
                };
                (span, what)
            })
        } else {
            None
        };
        #[cfg(not(feature = "otel"))]
        let _ = (self.spans, sql);
        Started {
            #[cfg(feature = "otel")]
            span,
            at: Instant::now(),
        }
    }

    fn finish<T>(&self, started: Started, sql: &Sql<'_>, result: &Result<T, Failure>) {
        let error = || result.as_ref().err().map(|f| f.kind.name());
        if self.watched {
            crate::watch::ran(sql.name, operation(sql.text), started.at, error());
        }
        #[cfg(feature = "otel")]
        if let Some((span, what)) = started.span {
            span.end(what, error().map(Into::into), Instant::now());
        }
    }
}

impl Session for Observed<'_> {
    fn dialect(&self) -> &'static Dialect {
        self.inner.dialect()
    }

    fn execute(&mut self, sql: Sql<'_>, bind: Bind<'_>) -> Result<Changes, Failure> {
        let started = self.start(&sql);
        let result = self.inner.execute(sql, bind);
        self.finish(started, &sql, &result);
        result
    }

    fn query(
        &mut self,
        sql: Sql<'_>,
        bind: Bind<'_>,
        each: &mut dyn FnMut(&dyn Row) -> bool,
    ) -> Result<(), Failure> {
        let started = self.start(&sql);
        let result = self.inner.query(sql, bind, each);
        self.finish(started, &sql, &result);
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
            // The longest operations, and a word one letter longer than either.
            ("truncate t", Some("TRUNCATE")),
            ("Rollback;", Some("ROLLBACK")),
            ("ROLLBACKS", None),
            ("pragmatically", None),
            ("sélect 1", None),
            // A letter beyond ASCII ends the word as before, and splits no character.
            ("SELECT\u{e9}", Some("SELECT")),
        ];
        for (sql, op) in cases {
            assert_eq!(super::operation(sql), op, "{sql}");
        }
        // Every operation is found, in either case, through the sorted table.
        for op in super::OPERATIONS {
            assert_eq!(super::operation(&format!("{op} x")), Some(op));
            assert_eq!(super::operation(&op.to_lowercase()), Some(op));
        }
    }
}
