//! Integer arguments, decided in one place for SQL and handler tools alike.
//!
//! JSON Schema's `integer` admits `1.0`, `1e308` and `9223372036854775808`, but the runtime
//! decodes integers into `i64` (SQLite's integer, and the generated argument structs'). After
//! the schema validated the arguments, [`check`] walks the schema beside the value and refuses
//! every number at an `integer` place that is written with a fraction or exponent or lies
//! outside `i64`, naming the field, so that such a value is `INVALID_ARGUMENTS` and never a
//! decoding failure inside the server.

use serde_json::{Number, Value};

/// An integer argument that cannot be decoded: where it is and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadInteger {
    /// The dotted path of the field, `items.0.id` style.
    pub field: String,
    pub message: String,
}

/// Whether a schema has an `integer` anywhere, so that tools without one skip the walk.
pub fn mentions_integer(schema: &Value) -> bool {
    match schema {
        Value::String(s) => s == "integer",
        Value::Array(a) => a.iter().any(mentions_integer),
        Value::Object(o) => o.values().any(mentions_integer),
        _ => false,
    }
}

/// Checks every number of `instance` that `schema` types as an integer.
pub fn check(schema: &Value, instance: &Value) -> Result<(), BadInteger> {
    walk(schema, schema, instance, &mut Vec::new(), 0)
}

/// How deep `$ref`s and nesting are followed; deeper values are left to the decoder.
const MAX_DEPTH: usize = 64;

fn walk(
    root: &Value,
    schema: &Value,
    value: &Value,
    path: &mut Vec<String>,
    depth: usize,
) -> Result<(), BadInteger> {
    let Some(s) = schema.as_object() else {
        return Ok(());
    };
    if depth > MAX_DEPTH {
        return Ok(());
    }
    if let Some(target) = s
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| resolve(root, r))
    {
        walk(root, target, value, path, depth + 1)?;
    }
    for all in s
        .get("allOf")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        walk(root, all, value, path, depth + 1)?;
    }
    if let Value::Number(n) = value
        && is_integer_type(s.get("type"))
        && let Some(message) = problem(n)
    {
        return Err(BadInteger {
            field: path.join("."),
            message,
        });
    }
    match value {
        Value::Object(o) => {
            let properties = s.get("properties").and_then(Value::as_object);
            for (k, v) in o {
                let sub = properties
                    .and_then(|p| p.get(k))
                    .or_else(|| s.get("additionalProperties").filter(|a| a.is_object()));
                if let Some(sub) = sub {
                    path.push(k.clone());
                    walk(root, sub, v, path, depth + 1)?;
                    path.pop();
                }
            }
        }
        Value::Array(a) => {
            let prefix = s.get("prefixItems").and_then(Value::as_array);
            for (i, v) in a.iter().enumerate() {
                let sub = prefix
                    .and_then(|p| p.get(i))
                    .or_else(|| s.get("items").filter(|x| x.is_object()));
                if let Some(sub) = sub {
                    path.push(i.to_string());
                    walk(root, sub, v, path, depth + 1)?;
                    path.pop();
                }
            }
        }
        _ => {}
    }
    Ok(())
}

/// `integer`, or a list of types with `integer` and without `number` (a `number` place
/// decodes into `f64`, where any JSON number fits).
fn is_integer_type(t: Option<&Value>) -> bool {
    match t {
        Some(Value::String(s)) => s == "integer",
        Some(Value::Array(a)) => {
            a.iter().any(|x| x == "integer") && !a.iter().any(|x| x == "number")
        }
        _ => false,
    }
}

/// A local reference, `#/$defs/NAME` or any other JSON pointer into the schema itself.
fn resolve<'a>(root: &'a Value, reference: &str) -> Option<&'a Value> {
    let pointer = reference.strip_prefix('#')?;
    root.pointer(pointer)
}

/// Why `n` does not decode as an `i64`, if it does not.
fn problem(n: &Number) -> Option<String> {
    if n.is_i64() {
        return None;
    }
    if n.is_u64() {
        return Some(format!(
            "{n} is outside the 64-bit integer range ({} to {})",
            i64::MIN,
            i64::MAX
        ));
    }
    let f = n.as_f64().unwrap_or(f64::NAN);
    if f.fract() == 0.0 && f >= i64::MIN as f64 && f < i64::MAX as f64 {
        Some(format!(
            "{n} is not an integer as written; send it without a fraction or exponent ({})",
            f as i64
        ))
    } else if f.fract() == 0.0 {
        Some(format!(
            "{n} is outside the 64-bit integer range ({} to {})",
            i64::MIN,
            i64::MAX
        ))
    } else {
        Some(format!("{n} is not an integer"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn field(schema: Value, v: Value) -> Option<String> {
        check(&schema, &v).err().map(|e| e.field)
    }

    #[test]
    fn integers_that_do_not_fit_i64_are_named() {
        let s = json!({"type": "object", "properties": {
            "id": {"type": "integer"},
            "ids": {"type": "array", "items": {"type": ["integer", "null"]}},
            "x": {"type": "number"},
            "r": {"$ref": "#/$defs/n"}
        }, "$defs": {"n": {"type": "integer"}}});
        assert_eq!(field(s.clone(), json!({"id": 1, "x": 1.5})), None);
        assert_eq!(field(s.clone(), json!({"id": i64::MIN})), None);
        let big: Value = serde_json::from_str("9223372036854775808").unwrap();
        assert_eq!(field(s.clone(), json!({"id": big})), Some("id".into()));
        assert_eq!(field(s.clone(), json!({"id": 1.0})), Some("id".into()));
        assert_eq!(field(s.clone(), json!({"id": 1e308})), Some("id".into()));
        assert_eq!(
            field(s.clone(), json!({"ids": [1, null, 2.0]})),
            Some("ids.2".into())
        );
        assert_eq!(field(s.clone(), json!({"r": 3.0})), Some("r".into()));
        assert_eq!(field(s, json!({"x": 1e308})), None);
    }

    #[test]
    fn messages_say_what_to_send() {
        let e = check(&json!({"type": "integer"}), &json!(1.0)).unwrap_err();
        assert!(e.message.contains("without a fraction"), "{}", e.message);
        let e = check(&json!({"type": "integer"}), &json!(-1e300)).unwrap_err();
        assert!(e.message.contains("outside the 64-bit"), "{}", e.message);
    }
}
