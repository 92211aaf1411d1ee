//! How a call's validated arguments become the values its statements bind: [`SqlValue`]
//! (the database seam's `Value`), each argument converted as its declared type says
//! ([`bind`] over a tool's [`Bind`] list), and [`ToParam`] for values a handler or a derived
//! parameter binds.

use serde_json::Value;

use crate::auth::Identity;
pub use crate::auth::claim_name;
use crate::def::{Arguments, Bind, ClaimKind, ParamKind};

pub use crate::backend::Value as SqlValue;

/// SQL parameters by name (without the `:` sigil), from a tool's validated arguments.
pub type Params = Vec<(&'static str, SqlValue)>;

/// The SQL parameters of a tool bound by `bind`, from its validated arguments and the caller
/// (`:auth.sub`; NULL without one, which the engine refuses before binding).
pub fn bind(bind: &Bind, arguments: &Arguments, caller: Option<&Identity>) -> Params {
    bind.0
        .iter()
        .map(|(name, kind)| (*name, json_param(arguments, caller, name, *kind)))
        .collect()
}

fn json_param(
    arguments: &Arguments,
    caller: Option<&Identity>,
    name: &str,
    kind: ParamKind,
) -> SqlValue {
    let v = match (kind, arguments.get(name)) {
        (ParamKind::Arguments, _) => return arguments_param(arguments),
        (ParamKind::AuthSub, _) => {
            return caller.map_or(SqlValue::Null, |c| SqlValue::Text(c.sub.clone()));
        }
        (ParamKind::AuthClaim(kind), _) => {
            let claim = caller.and_then(|c| c.claims.get(claim_name(name)));
            return claim.map_or(SqlValue::Null, |v| claim_param(v, kind));
        }
        // The engine binds these from its providers, and from the page (`crate::cursor`).
        (ParamKind::Embeddings(_) | ParamKind::Page, _) => return SqlValue::Null,
        (_, None | Some(Value::Null)) => return SqlValue::Null,
        (_, Some(v)) => v,
    };
    match kind {
        ParamKind::Integer => v.as_i64().map_or(SqlValue::Null, SqlValue::Integer),
        ParamKind::Real => v.as_f64().map_or(SqlValue::Null, SqlValue::Real),
        ParamKind::Boolean => SqlValue::Integer(i64::from(v.as_bool().unwrap_or(false))),
        ParamKind::Text => v
            .as_str()
            .map_or_else(|| v.to_param(), |s| SqlValue::Text(s.into())),
        ParamKind::Array => SqlValue::Text(v.to_string()),
        ParamKind::Json
        | ParamKind::Arguments
        | ParamKind::AuthSub
        | ParamKind::AuthClaim(_)
        | ParamKind::Embeddings(_)
        | ParamKind::Page => v.to_param(),
    }
}

/// The provider and field a `:embeddings.NAME.FIELD` parameter reads.
pub fn embeddings_param(param: &str) -> (&str, &str) {
    let rest = param.strip_prefix("embeddings.").unwrap_or(param);
    rest.rsplit_once('.').unwrap_or((rest, ""))
}

/// Whether a claim's value is of the declared kind (the engine refuses a call whose token
/// has one that is not).
pub fn claim_fits(v: &Value, kind: ClaimKind) -> bool {
    match kind {
        ClaimKind::Text => v.is_string(),
        ClaimKind::Integer => v.is_i64(),
        ClaimKind::Real => v.is_number(),
        ClaimKind::Boolean => v.is_boolean(),
    }
}

/// A claim's value bound as its declared kind; one of another kind binds NULL.
fn claim_param(v: &Value, kind: ClaimKind) -> SqlValue {
    if !claim_fits(v, kind) {
        return SqlValue::Null;
    }
    match kind {
        ClaimKind::Boolean => SqlValue::Integer(i64::from(v.as_bool().unwrap_or(false))),
        ClaimKind::Real => v.as_f64().map_or(SqlValue::Null, SqlValue::Real),
        _ => v.to_param(),
    }
}

/// The reserved `:arguments` parameter: every validated argument as one JSON object.
pub fn arguments_param(arguments: &Arguments) -> SqlValue {
    SqlValue::Text(serde_json::to_string(arguments).unwrap_or_else(|_| "{}".into()))
}

/// Conversion of a typed argument into an SQL parameter. Arrays and objects bind as JSON text,
/// for use with `json_each`; an absent optional argument binds as NULL.
pub trait ToParam {
    fn to_param(&self) -> SqlValue;
}

impl ToParam for String {
    fn to_param(&self) -> SqlValue {
        SqlValue::Text(self.clone())
    }
}

impl ToParam for i64 {
    fn to_param(&self) -> SqlValue {
        SqlValue::Integer(*self)
    }
}

impl ToParam for f64 {
    fn to_param(&self) -> SqlValue {
        SqlValue::Real(*self)
    }
}

impl ToParam for bool {
    fn to_param(&self) -> SqlValue {
        SqlValue::Integer(i64::from(*self))
    }
}

impl<T: ToParam> ToParam for Option<T> {
    fn to_param(&self) -> SqlValue {
        self.as_ref().map_or(SqlValue::Null, ToParam::to_param)
    }
}

impl<T: serde::Serialize> ToParam for Vec<T> {
    fn to_param(&self) -> SqlValue {
        SqlValue::Text(serde_json::to_string(self).unwrap_or_else(|_| "[]".into()))
    }
}

impl ToParam for Value {
    fn to_param(&self) -> SqlValue {
        match self {
            Value::Null => SqlValue::Null,
            Value::Bool(b) => SqlValue::Integer(i64::from(*b)),
            Value::Number(n) => n.as_i64().map_or_else(
                || SqlValue::Real(n.as_f64().unwrap_or(0.0)),
                SqlValue::Integer,
            ),
            Value::String(s) => SqlValue::Text(s.clone()),
            other => SqlValue::Text(other.to_string()),
        }
    }
}
