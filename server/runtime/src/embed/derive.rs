//! A SQL tool's derived parameters (`derive:`): an argument's text through its transforms,
//! and, with `embed: NAME`, that text's vector from the provider `NAME`. `from: ARG[]` and
//! `from: ARG[].FIELD` embed each string of an array (or each item's field) in one go, and
//! bind the JSON text of the vectors in the array's order (`null` for an item without text).
//!
//! A vector is NULL when the argument is absent or null, and when the provider is off,
//! unless the call's arguments are among the derive's `needed_when` values: then the call
//! fails with `EMBEDDINGS_OFF`, before anything runs. A provider that fails is
//! `EMBEDDING_FAILED`, and nothing is written, since the statements have not run yet.

use serde_json::Value;

use crate::backend::{Stop, Value as SqlValue};
use crate::def::{Arguments, DeriveDef, ToolDef};
use crate::tool_error::ToolError;

use super::Embeddings;
use crate::params::{Params, ToParam};

/// Where a derive's text comes from.
#[derive(Debug, PartialEq, Eq)]
enum Source<'a> {
    /// The argument itself.
    One(&'a str),
    /// Each string of the array argument.
    Each(&'a str),
    /// Each item's field of the array argument.
    Field(&'a str, &'a str),
}

fn source(from: &str) -> Source<'_> {
    match from.split_once("[]") {
        None => Source::One(from),
        Some((arg, "")) => Source::Each(arg),
        Some((arg, rest)) => Source::Field(arg, rest.trim_start_matches('.')),
    }
}

/// Adds `tool`'s derived parameters for a call with `args` to `params`.
pub(crate) fn all(
    embeddings: &Embeddings,
    tool: &'static ToolDef,
    args: &Arguments,
    stop: &Stop,
    params: &mut Params,
) -> Result<(), ToolError> {
    for d in tool.derive {
        let value = match d.embed {
            None => {
                let mut v = args.get(d.from).cloned().unwrap_or(Value::Null);
                crate::transform::apply(&mut v, d.transforms);
                v.to_param()
            }
            Some(provider) => embedded(embeddings, tool, d, provider, args, stop)?,
        };
        params.push((d.name, value));
    }
    Ok(())
}

/// The vector (or the vectors' JSON text) of a derive with `embed: provider`.
fn embedded(
    embeddings: &Embeddings,
    tool: &'static ToolDef,
    d: &'static DeriveDef,
    provider: &str,
    args: &Arguments,
    stop: &Stop,
) -> Result<SqlValue, ToolError> {
    let texts = texts(d, args);
    let Some(p) = embeddings.provider(provider) else {
        if let Some((arg, value)) = needed(d, args) {
            let why = embeddings.off(provider).unwrap_or("it is off");
            return Err(ToolError::new(
                "EMBEDDINGS_OFF",
                format!(
                    "`{}` with {arg} {value} needs vectors, and the embedding provider `{provider}` is off: {why}",
                    tool.name
                ),
            )
            .with_field(arg));
        }
        return Ok(SqlValue::Null);
    };
    let Some(texts) = texts else {
        return Ok(SqlValue::Null);
    };
    let asked: Vec<&str> = texts.iter().flatten().map(String::as_str).collect();
    let cancel = &stop.cancel;
    let vectors = p
        .embed(&asked, stop.deadline(), &|| {
            cancel.load(std::sync::atomic::Ordering::Relaxed)
        })
        .map_err(|e| match e {
            super::EmbedError::Stopped => {
                ToolError::new("TIMEOUT", "the embedding provider did not answer in time")
            }
            super::EmbedError::Failed(why) | super::EmbedError::Off(why) => ToolError::new(
                "EMBEDDING_FAILED",
                format!(
                    "`{}` could not embed `{}`: {why}; nothing was changed",
                    tool.name, d.from
                ),
            )
            .with_field(root(d.from)),
        })?;
    if let Source::One(_) = source(d.from) {
        return Ok(vectors
            .into_iter()
            .next()
            .map_or(SqlValue::Null, SqlValue::Vector));
    }
    // The vectors' JSON text, `null` for an item without text.
    let mut made = vectors.into_iter();
    let mut out = String::with_capacity(asked.len() * 256 * 11 + 2);
    out.push('[');
    for (i, t) in texts.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        match t.as_ref().and_then(|_| made.next()) {
            Some(v) => out.push_str(&SqlValue::vector_text(&v)),
            None => out.push_str("null"),
        }
    }
    out.push(']');
    Ok(SqlValue::Text(out))
}

/// The argument a derive's `from` names.
fn root(from: &str) -> &str {
    match source(from) {
        Source::One(a) | Source::Each(a) | Source::Field(a, _) => a,
    }
}

/// The texts to embed, through the derive's transforms: one for a single argument, one per
/// item for an array (`None` where an item has none); `None` when the argument is absent or
/// null.
fn texts(d: &DeriveDef, args: &Arguments) -> Option<Vec<Option<String>>> {
    let text = |v: Option<&Value>| -> Option<String> {
        let mut v = v?.clone();
        crate::transform::apply(&mut v, d.transforms);
        v.as_str().map(str::to_string)
    };
    match source(d.from) {
        Source::One(arg) => Some(vec![Some(text(args.get(arg))?)]),
        Source::Each(arg) => Some(
            args.get(arg)?
                .as_array()?
                .iter()
                .map(|v| text(Some(v)))
                .collect(),
        ),
        Source::Field(arg, field) => Some(
            args.get(arg)?
                .as_array()?
                .iter()
                .map(|item| text(item.get(field)))
                .collect(),
        ),
    }
}

/// The argument and value of the call that need the vector (`needed_when`), if any.
fn needed<'a>(d: &'a DeriveDef, args: &'a Arguments) -> Option<(&'a str, &'a str)> {
    d.needed_when.iter().find_map(|(arg, values)| {
        let given = args.get(*arg)?.as_str()?;
        values.contains(&given).then_some((*arg, given))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_source_names_an_argument_its_items_or_their_field() {
        assert_eq!(source("content"), Source::One("content"));
        assert_eq!(source("texts[]"), Source::Each("texts"));
        assert_eq!(
            source("entries[].content"),
            Source::Field("entries", "content")
        );
        assert_eq!(root("entries[].content"), "entries");
    }

    #[test]
    fn texts_follow_the_items_and_their_transforms() {
        let d = DeriveDef {
            name: "v",
            from: "entries[].content",
            transforms: &["trim"],
            embed: Some("e"),
            needed_when: &[("mode", &["semantic"])],
        };
        let args: Arguments = serde_json::from_value(serde_json::json!({
            "entries": [{"content": " a "}, {"role": "dev"}, {"content": "b"}],
            "mode": "semantic",
        }))
        .unwrap();
        assert_eq!(
            texts(&d, &args),
            Some(vec![Some("a".into()), None, Some("b".into())])
        );
        assert_eq!(needed(&d, &args), Some(("mode", "semantic")));
        let none: Arguments =
            serde_json::from_value(serde_json::json!({"mode": "keyword"})).unwrap();
        assert_eq!(texts(&d, &none), None);
        assert_eq!(needed(&d, &none), None);
    }
}
