//! A span per database statement: a job's [`Session`] wrapped so that each `execute` and
//! `query` is a client span, a child of the request being served on this thread, named by its
//! operation (`SELECT`, `INSERT`, ...) with `db.system.name` and `db.operation.name`, and
//! `error.type` when it fails. Never the statement's text or its arguments.

use crate::backend::Session;

/// Runs `f` on `session`, each statement traced when telemetry is on.
pub fn traced<T>(session: &mut dyn Session, f: impl FnOnce(&mut dyn Session) -> T) -> T {
    #[cfg(feature = "otel")]
    if super::otlp::on() {
        return f(&mut imp::Traced { inner: session });
    }
    f(session)
}

/// The operation a statement starts with, upper case (`SELECT`, `WITH`), skipping blanks and
/// comments; `None` when it starts with no word.
#[cfg_attr(not(feature = "otel"), allow(dead_code))]
fn operation(sql: &str) -> Option<String> {
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
    let word: String = rest.chars().take_while(char::is_ascii_alphabetic).collect();
    (!word.is_empty()).then(|| word.to_ascii_uppercase())
}

#[cfg(feature = "otel")]
mod imp {
    use opentelemetry::KeyValue;
    use opentelemetry::trace::{Span, SpanKind, Status, Tracer};

    use crate::backend::{Bind, Changes, Dialect, Failure, Row, Session, Sql};

    pub(super) struct Traced<'a> {
        pub(super) inner: &'a mut dyn Session,
    }

    impl Traced<'_> {
        fn span(&self, sql: &str) -> Option<opentelemetry_sdk::trace::Span> {
            let tracer = super::super::otlp::tracer()?;
            let system = self.inner.dialect().system;
            let op = super::operation(sql);
            let name = op.clone().unwrap_or_else(|| system.to_string());
            let mut attributes = vec![KeyValue::new("db.system.name", system)];
            if let Some(op) = op {
                attributes.push(KeyValue::new("db.operation.name", op));
            }
            Some(
                tracer
                    .span_builder(name)
                    .with_kind(SpanKind::Client)
                    .with_attributes(attributes)
                    .start(tracer),
            )
        }
    }

    fn end<T>(span: Option<opentelemetry_sdk::trace::Span>, result: &Result<T, Failure>) {
        let Some(mut span) = span else { return };
        if let Err(f) = result {
            let kind = format!("{:?}", f.kind);
            span.set_attribute(KeyValue::new("error.type", kind.clone()));
            span.set_status(Status::error(kind));
        }
        span.end();
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
        ];
        for (sql, op) in cases {
            assert_eq!(super::operation(sql).as_deref(), op, "{sql}");
        }
    }
}
