//! The error of a call that reached a tool ([`ToolError`]): a leaf, so that every layer that
//! can refuse a call (the engine, the caller's identity, embeddings, handlers) names it without
//! depending on the engine.

use serde_json::{Map, Value, json};

/// What went wrong in a call that reached a tool: shown to the model as a tool result with
/// `isError`, so it can correct itself.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolError {
    /// A stable machine-readable code such as `INVALID_ARGUMENTS` or `NOT_FOUND`.
    pub code: &'static str,
    pub message: String,
    /// Structured details: failing fields and the like.
    pub data: Option<Value>,
}

impl ToolError {
    pub(crate) fn new(code: &'static str, message: impl Into<String>) -> Self {
        ToolError {
            code,
            message: message.into(),
            data: None,
        }
    }

    /// The error, naming the argument it is about (`data.field`).
    pub(crate) fn with_field(mut self, field: &str) -> Self {
        self.data = Some(json!({ "field": field }));
        self
    }

    /// `INVALID_ARGUMENTS` for one argument: `invalid arguments: `FIELD` MESSAGE`, naming the
    /// field and the constraint it broke in `data`, as validation errors do.
    pub(crate) fn invalid_argument(field: &str, constraint: &str, message: &str) -> Self {
        ToolError {
            code: "INVALID_ARGUMENTS",
            message: format!("invalid arguments: `{field}` {message}"),
            data: Some(json!({
                "field": field,
                "constraint": constraint,
                "errors": [{"field": field, "constraint": constraint, "message": message}],
            })),
        }
    }

    /// The error as a JSON object, for the text content of the result.
    pub fn to_json(&self) -> Value {
        let mut o = Map::new();
        o.insert("code".into(), json!(self.code));
        o.insert("message".into(), json!(self.message));
        if let Some(Value::Object(d)) = &self.data {
            for (k, v) in d {
                o.insert(k.clone(), v.clone());
            }
        }
        json!({ "error": o })
    }
}
