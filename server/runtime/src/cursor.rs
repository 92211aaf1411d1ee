//! Keyset pagination's cursors: the sort values of a page's last row (a statement's
//! `page.by` columns), sealed with HMAC-SHA256 as `requestState`s are (rmcp's
//! [`RequestStateCodec`]) and bound to the server, the tool and its sort columns, so that a
//! client can pass one back but cannot forge, alter or move one to another tool. The key is
//! the process's: random, or the one replicas share (`MCPSPEC_REQUEST_STATE_KEY`), so that a
//! cursor one replica issued reads on at another. A leaf: it knows the values and the seal,
//! not the engine.

use std::sync::OnceLock;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use rmcp::model::{RequestStateCodec, SealOptions};
use serde_json::{Value, json};

use crate::backend::Value as SqlValue;
use crate::def::{ParamKind, StatementDef, ToolDef};
use crate::params::Params;
use crate::tool_error::ToolError;

/// The process's sealing key, once chosen.
static CODEC: OnceLock<RequestStateCodec> = OnceLock::new();

/// Seals cursors with `key` (32 bytes or more), the key replicas share, when no cursor was
/// sealed yet; the first key chosen stays.
pub(crate) fn share_key(key: Vec<u8>) {
    let _ = CODEC.set(RequestStateCodec::new_unchecked(key));
}

fn codec() -> &'static RequestStateCodec {
    CODEC.get_or_init(|| {
        RequestStateCodec::new_unchecked(crate::confirm::random_bytes::<32>().to_vec())
    })
}

/// What a cursor is bound to: a cursor of another server, tool or sort does not open.
fn context(server: &str, tool: &str, by: &[&str]) -> Vec<u8> {
    let mut c = format!("mcpspec/cursor/v1\0{server}\0{tool}");
    for column in by {
        c.push('\0');
        c.push_str(column);
    }
    c.into_bytes()
}

/// The cursor that goes on after a row whose sort values are `values`.
pub(crate) fn seal(server: &str, tool: &str, by: &[&str], values: &[SqlValue]) -> String {
    let payload = Value::Array(values.iter().map(to_json).collect()).to_string();
    let context = context(server, tool, by);
    codec().seal_with(
        payload.as_bytes(),
        &SealOptions::new().associated_data(&context),
    )
}

/// The sort values a cursor carries, or why it is not one this tool issued.
pub(crate) fn open(
    server: &str,
    tool: &str,
    by: &[&str],
    cursor: &str,
) -> Result<Vec<SqlValue>, ToolError> {
    let refused = || {
        let message = "is not a cursor this tool gave: pass the `next_cursor` of its previous result as it was, or leave `cursor` out to start from the first page";
        ToolError::invalid_argument(crate::def::CURSOR_ARGUMENT, "cursor", message)
    };
    let bytes = codec()
        .open_with(cursor, &context(server, tool, by))
        .map_err(|_| refused())?;
    let values: Vec<Value> = serde_json::from_slice(&bytes).map_err(|_| refused())?;
    if values.len() != by.len() {
        return Err(refused());
    }
    values
        .iter()
        .map(from_json)
        .collect::<Option<_>>()
        .ok_or_else(refused)
}

/// A sort value as JSON: integers and reals stay apart (`1` and `1.0`), blobs are base64.
fn to_json(v: &SqlValue) -> Value {
    match v {
        SqlValue::Null | SqlValue::Vector(_) => Value::Null,
        SqlValue::Integer(i) => json!(i),
        SqlValue::Real(f) => serde_json::Number::from_f64(*f).map_or(Value::Null, Value::Number),
        SqlValue::Text(t) => json!(t),
        SqlValue::Blob(b) => json!({ "blob": STANDARD.encode(b) }),
    }
}

fn from_json(v: &Value) -> Option<SqlValue> {
    Some(match v {
        Value::Null => SqlValue::Null,
        Value::Number(n) => match n.as_i64() {
            Some(i) if !n.is_f64() => SqlValue::Integer(i),
            _ => SqlValue::Real(n.as_f64()?),
        },
        Value::String(s) => SqlValue::Text(s.clone()),
        Value::Object(o) => SqlValue::Blob(STANDARD.decode(o.get("blob")?.as_str()?).ok()?),
        _ => return None,
    })
}

/// The rows a page of `st` holds for a call with `arguments`: its size argument, else its
/// `max_rows`, never more than `max_rows`.
pub(crate) fn page_size(st: &StatementDef, arguments: &crate::def::Arguments) -> usize {
    let cap = st.max_rows.max(1) as usize;
    let asked = st
        .page
        .and_then(|p| p.size)
        .and_then(|size| arguments.get(size)?.as_u64());
    asked.map_or(cap, |n| usize::try_from(n).unwrap_or(cap).clamp(1, cap))
}

/// Binds a paged statement's `:page.limit` (a page's size and one more), `:page.size` and
/// `:after.COLUMN` (the sort values the call's `cursor` carries; NULL without one).
pub(crate) fn bind(
    server: &str,
    tool: &ToolDef,
    st: &StatementDef,
    arguments: &crate::def::Arguments,
    params: &mut Params,
) -> Result<(), ToolError> {
    let Some(page) = st.page else {
        return Ok(());
    };
    let after = match arguments
        .get(crate::def::CURSOR_ARGUMENT)
        .and_then(Value::as_str)
    {
        Some(cursor) => Some(open(server, tool.name, page.by, cursor)?),
        None => None,
    };
    let limit = i64::try_from(page_size(st, arguments)).unwrap_or(i64::MAX - 1) + 1;
    for ((_, kind), (name, value)) in tool.bind.0.iter().zip(params.iter_mut()) {
        if *kind != ParamKind::Page {
            continue;
        }
        *value = match name.strip_prefix("after.") {
            None if *name == "page.size" => SqlValue::Integer(limit - 1),
            None => SqlValue::Integer(limit),
            Some(column) => page
                .by
                .iter()
                .position(|c| *c == column)
                .and_then(|i| after.as_ref()?.get(i).cloned())
                .unwrap_or(SqlValue::Null),
        };
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const BY: &[&str] = &["created_at", "id"];

    fn values() -> Vec<SqlValue> {
        vec![
            SqlValue::Text("2026-11-29 17:30:01.123456+00".into()),
            SqlValue::Integer(42),
        ]
    }

    #[test]
    fn a_cursor_opens_to_the_values_it_was_sealed_with() {
        let cursor = seal("kb", "kb_list", BY, &values());
        assert_eq!(open("kb", "kb_list", BY, &cursor).unwrap(), values());
        let odd = vec![
            SqlValue::Real(1.0),
            SqlValue::Blob(vec![0, 255]),
            SqlValue::Null,
        ];
        let by = &["a", "b", "c"];
        let cursor = seal("kb", "kb_list", by, &odd);
        assert_eq!(open("kb", "kb_list", by, &cursor).unwrap(), odd);
    }

    #[test]
    fn a_cursor_of_another_tool_or_sort_or_altered_is_refused_naming_the_field() {
        let cursor = seal("kb", "kb_list", BY, &values());
        let refused = |r: Result<Vec<SqlValue>, ToolError>| {
            let e = r.expect_err("refused");
            assert_eq!(e.code, "INVALID_ARGUMENTS");
            assert_eq!(e.data.unwrap()["field"], "cursor");
        };
        refused(open("kb", "kb_search", BY, &cursor));
        refused(open("other", "kb_list", BY, &cursor));
        refused(open("kb", "kb_list", &["id", "created_at"], &cursor));
        let mut altered = cursor.clone().into_bytes();
        let last = altered.len() - 1;
        altered[last] = if altered[last] == b'A' { b'B' } else { b'A' };
        refused(open(
            "kb",
            "kb_list",
            BY,
            &String::from_utf8(altered).unwrap(),
        ));
        refused(open("kb", "kb_list", BY, "not a cursor"));
    }
}
