//! A spec's `examples:`: each one a tool call and what must come back, run through the engine
//! like any call (by `mcpspec test`, by `codegen check --db` and by `mcpspec dev`) and judged
//! here.

use serde_json::{Value, json};

use crate::def::{ExampleDef, ExpectDef};
use crate::engine::{CallError, Engine};

/// How one example went.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// Where the example is: `spec/x.yaml:12:9`.
    pub at: &'static str,
    pub tool: &'static str,
    /// `None` when the call returned what the example expects; else what differed.
    pub failure: Option<String>,
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.failure {
            None => write!(f, "ok      {} ({})", self.tool, self.at),
            Some(why) => write!(f, "FAILED  {} ({})\n{why}", self.tool, self.at),
        }
    }
}

/// Runs the examples of the engine's server, in spec order: every one on the sample rows,
/// else (on a live database) those that do not depend on them.
pub fn run_all(engine: &Engine, on_sample_rows: bool) -> Vec<Outcome> {
    engine
        .def
        .examples
        .iter()
        .filter(|e| on_sample_rows || !e.sample_rows)
        .map(|e| run(engine, e))
        .collect()
}

impl Engine {
    /// What a call of `example` returned that its expectation did not hold for, said in
    /// plain words; `None` when it held. For the spec compiler's `check`, which reports it at
    /// the example's line.
    pub fn example_failure(&self, example: &ExampleDef) -> Option<String> {
        run(self, example).failure
    }
}

/// Why `example` cannot run on a rehearsal twin of `engine` (`sample_rows`: the database holds
/// the spec's sample rows); `None` when it can.
fn why_not(engine: &Engine, example: &ExampleDef, sample_rows: bool) -> Option<&'static str> {
    let writes = engine.def.tool(example.tool).is_some_and(|t| t.writes);
    if engine.database().is_none() {
        Some("the server has no database to roll its effects back on (`mcpspec test` runs it)")
    } else if writes && engine.is_read_only() {
        Some("its tool writes, and the server is read-only")
    } else if example.sample_rows && !sample_rows {
        Some("it expects the spec's sample rows (`mcpspec dev` and `mcpspec test` run it)")
    } else {
        None
    }
}

/// The spec's examples as the workbench lists them: each one's tool, place, arguments and
/// whether it can run here (`sample_rows`: the database holds the spec's sample rows).
#[cfg_attr(not(feature = "http"), allow(dead_code))]
pub(crate) fn listing(engine: &Engine, sample_rows: bool) -> Value {
    let listed: Vec<Value> = engine
        .def
        .examples
        .iter()
        .enumerate()
        .map(|(n, e)| {
            let why_not = why_not(engine, e, sample_rows);
            json!({
                "n": n,
                "tool": e.tool,
                "at": e.at,
                "arguments": serde_json::from_str::<Value>(e.arguments).unwrap_or(Value::Null),
                "expect": expectation(&e.expect),
                "runs": why_not.is_none(),
                "why_not": why_not,
            })
        })
        .collect();
    json!({ "server": engine.def.name, "examples": listed })
}

#[cfg_attr(not(feature = "http"), allow(dead_code))]
fn expectation(expect: &crate::def::ExpectDef) -> Value {
    use crate::def::ExpectDef;
    match expect {
        ExpectDef::Returns(text) => {
            json!({"returns": serde_json::from_str::<Value>(text).unwrap_or(Value::Null)})
        }
        ExpectDef::Empty => json!({"returns": "no rows"}),
        ExpectDef::Error(code) => json!({"error": code}),
    }
}

/// Runs the examples (`which`: one by its number, else every one that can run here) on a
/// rehearsal twin of `engine`, every write rolled back, and says how each went: the
/// workbench's examples.
#[cfg_attr(not(feature = "http"), allow(dead_code))]
pub(crate) fn rehearse(
    engine: &Engine,
    which: Option<usize>,
    sample_rows: bool,
) -> Result<Value, String> {
    let examples = engine.def.examples;
    let runs = |n: usize| why_not(engine, &examples[n], sample_rows).is_none();
    let chosen: Vec<usize> = match which {
        Some(n) if n < examples.len() => {
            if let Some(why) = why_not(engine, &examples[n], sample_rows) {
                return Err(why.to_string());
            }
            vec![n]
        }
        Some(n) => return Err(format!("there is no example {n}")),
        None => (0..examples.len()).filter(|n| runs(*n)).collect(),
    };
    let twin = match engine.rehearsal() {
        Some(Ok(twin)) => twin,
        Some(Err(e)) => {
            tracing::warn!(error = %e, "the workbench's rehearsal did not start");
            return Err("the rehearsal database did not open; the server log says why".into());
        }
        None => return Err("this server has no database to roll its examples back on".into()),
    };
    let ran: Vec<Value> = chosen
        .into_iter()
        .map(|n| {
            let outcome = run(&twin, &examples[n]);
            json!({
                "n": n,
                "tool": outcome.tool,
                "at": outcome.at,
                "passed": outcome.failure.is_none(),
                "failure": outcome.failure,
            })
        })
        .collect();
    Ok(json!({ "ran": ran }))
}

/// Runs one example and judges its outcome.
pub fn run(engine: &Engine, example: &ExampleDef) -> Outcome {
    let failure = match serde_json::from_str::<Value>(example.arguments) {
        Ok(args) => judge(&example.expect, engine.call(example.tool, Some(&args))),
        Err(e) => Some(format!("  the arguments are not JSON: {e}")),
    };
    Outcome {
        at: example.at,
        tool: example.tool,
        failure,
    }
}

/// What differs between an expectation and a call's outcome, or `None` when it holds.
fn judge(expect: &ExpectDef, outcome: Result<crate::engine::Success, CallError>) -> Option<String> {
    let (succeeded, actual) = match outcome {
        Ok(s) => (true, s.structured),
        Err(e) => (false, failure_json(&e)),
    };
    let shown = serde_json::to_string_pretty(&actual).unwrap_or_default();
    let differs = |expected: String, why: String| {
        Some(format!(
            "  expected: {expected}\n  actual:   {}\n  ({why})",
            shown.replace('\n', "\n            ")
        ))
    };
    match (expect, succeeded) {
        (ExpectDef::Returns(text), true) => {
            let want: Value = serde_json::from_str(text).unwrap_or(Value::Null);
            let why = mismatch(&want, &actual, "result")?;
            differs(want.to_string(), why)
        }
        (ExpectDef::Empty, true) if has_no_rows(&actual) => None,
        (ExpectDef::Empty, true) => {
            differs("a result without rows".into(), "rows came back".into())
        }
        (ExpectDef::Error(code), false) if error_code(&actual) == Some(code) => None,
        (ExpectDef::Error(code), false) => differs(
            format!("the error {code}"),
            format!("another error: {}", error_code(&actual).unwrap_or("?")),
        ),
        (ExpectDef::Error(code), true) => {
            differs(format!("the error {code}"), "the call succeeded".into())
        }
        (ExpectDef::Returns(_) | ExpectDef::Empty, false) => {
            differs("success".into(), "the call failed".into())
        }
    }
}

/// A failed call as the client sees it: a tool error's JSON, or a protocol error's.
fn failure_json(e: &CallError) -> Value {
    match e {
        CallError::Tool(t) => t.to_json(),
        CallError::Rpc(r) => {
            serde_json::json!({"error": {"code": r.data.get("code"), "message": r.message, "rpc": r.code}})
        }
        CallError::UnknownTool(name) => {
            serde_json::json!({"error": {"code": "UNKNOWN_TOOL", "message": format!("unknown tool: {name}")}})
        }
        CallError::MalformedArguments(m) => {
            serde_json::json!({"error": {"code": "MALFORMED_ARGUMENTS", "message": m}})
        }
    }
}

fn error_code(failure: &Value) -> Option<&str> {
    failure["error"]["code"].as_str()
}

/// Whether a structured result holds no rows: its lists are all empty and its single-row
/// fields null (a `many` statement's rows, an `optional` one's row, every part of a composite).
pub fn has_no_rows(result: &Value) -> bool {
    match result {
        Value::Null => true,
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => {
            let rows: Vec<&Value> = o
                .iter()
                .filter(|(k, _)| !matches!(k.as_str(), "message" | "truncated"))
                .map(|(_, v)| v)
                .filter(|v| v.is_array() || v.is_null() || v.is_object())
                .collect();
            !rows.is_empty() && rows.into_iter().all(has_no_rows)
        }
        _ => false,
    }
}

/// Where `actual` fails to contain `want`, or `None` when it does: objects by the keys `want`
/// lists, arrays element by element and of the same length, numbers by value.
pub fn mismatch(want: &Value, actual: &Value, at: &str) -> Option<String> {
    match (want, actual) {
        (Value::Object(w), Value::Object(a)) => w.iter().find_map(|(k, wv)| match a.get(k) {
            Some(av) => mismatch(wv, av, &format!("{at}.{k}")),
            None => Some(format!("{at}.{k} is missing")),
        }),
        (Value::Array(w), Value::Array(a)) if w.len() != a.len() => {
            Some(format!("{at} has {} elements, not {}", a.len(), w.len()))
        }
        (Value::Array(w), Value::Array(a)) => w
            .iter()
            .zip(a)
            .enumerate()
            .find_map(|(i, (wv, av))| mismatch(wv, av, &format!("{at}[{i}]"))),
        (Value::Number(w), Value::Number(a)) if w.as_f64() == a.as_f64() => None,
        (w, a) if w == a => None,
        (w, a) => Some(format!("{at} is {a}, not {w}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn containment_lists_keys_and_compares_arrays_whole() {
        let actual = json!({"rows": [{"id": 1, "t": "a"}, {"id": 2, "t": "b"}], "count": 2});
        assert_eq!(mismatch(&json!({"count": 2.0}), &actual, "result"), None);
        assert_eq!(
            mismatch(&json!({"rows": [{"id": 1}, {"id": 2}]}), &actual, "result"),
            None
        );
        assert_eq!(
            mismatch(&json!({"rows": [{"id": 1}]}), &actual, "result").as_deref(),
            Some("result.rows has 2 elements, not 1")
        );
        assert_eq!(
            mismatch(&json!({"rows": [{"id": 1}, {"t": "c"}]}), &actual, "result").as_deref(),
            Some("result.rows[1].t is \"b\", not \"c\"")
        );
        assert_eq!(
            mismatch(&json!({"nope": 1}), &actual, "result").as_deref(),
            Some("result.nope is missing")
        );
    }

    #[test]
    fn no_rows_means_empty_lists_and_null_rows() {
        for empty in [
            json!({"notes": [], "message": "nothing"}),
            json!({"note": null}),
            json!({"a": [], "b": null}),
        ] {
            assert!(has_no_rows(&empty), "{empty}");
        }
        for rows in [
            json!({"notes": [{"id": 1}]}),
            json!({"note": {"id": 1}}),
            json!({"count": 0}),
            json!({"a": [], "b": [1]}),
        ] {
            assert!(!has_no_rows(&rows), "{rows}");
        }
    }
}
