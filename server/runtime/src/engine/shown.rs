//! What a watcher (the workbench, `--ui`) is given of a call's answer, from the engine's side
//! of the seam (`watch`):
//! the answer as JSON text (every failure; a success's result while a page is open) and the
//! outcome, borrowed when it is the server's own code. The watcher takes them as plain text,
//! so that it needs nothing of the engine's types.

use std::borrow::Cow;

use serde_json::json;

use super::{CallError, Reply};
use crate::watch::{self, Answer, Answered};

/// The outcome a call's record shows: `ok`, or the error's code (`fallback` for the errors
/// whose code is not the server's own).
pub(crate) fn outcome(result: &Result<Reply, CallError>, fallback: &str) -> Cow<'static, str> {
    match result {
        Ok(_) => Cow::Borrowed("ok"),
        Err(CallError::Tool(e)) => Cow::Borrowed(e.code),
        Err(_) => Cow::Owned(fallback.to_string()),
    }
}

/// The answer a call's record keeps: the failure, or (`watched`) the result, within the
/// workbench's bound (`size`: the result's size as JSON, as the call log counts it). A one-row
/// result the lane wrote as text is kept as that text; a result's value is kept as a copy,
/// written as JSON only if a page opens the call.
pub(crate) fn answer(
    result: &Result<Reply, CallError>,
    watched: bool,
    size: usize,
) -> Option<Answered<'_>> {
    let failure = match result {
        Ok(_) if !watched => return None,
        Ok(_) if size > watch::KEPT_BYTES => {
            return Some(Answered::Made(Answer::Value(watch::omitted(
                size, "result",
            ))));
        }
        // Lent: the watcher copies it where it keeps it.
        Ok(Reply::Json { text, .. }) => return Some(Answered::Text(text)),
        // Copied, not written: writing it as JSON is left to a page that opens the call.
        Ok(Reply::Done(s)) => return Some(Answered::Made(Answer::Value(s.structured.clone()))),
        Err(CallError::Tool(e)) => {
            json!({"isError": true, "code": e.code, "message": e.message, "data": e.data})
        }
        Err(CallError::Rpc(e)) => {
            json!({"error": {"code": e.code, "message": e.message, "data": e.data}})
        }
        Err(CallError::UnknownTool(m) | CallError::MalformedArguments(m)) => {
            json!({"error": {"code": -32602, "message": m}})
        }
    };
    let text = failure.to_string();
    Some(Answered::Made(if text.len() <= watch::KEPT_BYTES {
        Answer::Text(text)
    } else {
        Answer::Value(watch::omitted(text.len(), "result"))
    }))
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;

    #[test]
    fn a_response_is_kept_for_failures_and_for_results_a_page_watches() {
        use crate::engine::Success;
        let ok = || {
            Ok(Reply::Done(Success {
                structured: json!({"rows": [1, 2]}),
                content: false,
            }))
        };
        let kept = |r: &Result<Reply, CallError>, watched| -> Option<Value> {
            let size = match r {
                Ok(reply) => reply.size(),
                Err(_) => 0,
            };
            // Kept in a slot that held another call's answer, as the ring's records are.
            let mut slot = Some(Answer::Text(r#"{"before":1}"#.into()));
            let a = answer(r, watched, size)?;
            a.keep_in(&mut slot);
            slot.map(|a| serde_json::from_str(&a.json()).expect("JSON"))
        };
        assert_eq!(kept(&ok(), false), None);
        assert_eq!(kept(&ok(), true), Some(json!({"rows": [1, 2]})));
        let row = Ok(Reply::Json {
            text: r#"{"id":7}"#.into(),
            size: 8,
        });
        assert_eq!(kept(&row, true), Some(json!({"id": 7})));
        let failed = Err(CallError::Tool(crate::tool_error::ToolError::new(
            "NOT_FOUND",
            "no entry 7",
        )));
        assert_eq!(
            kept(&failed, false),
            Some(
                json!({"isError": true, "code": "NOT_FOUND", "message": "no entry 7", "data": null})
            )
        );
        let large = Ok(Reply::Done(Success {
            structured: json!({"text": "x".repeat(watch::KEPT_BYTES + 1)}),
            content: false,
        }));
        let large = kept(&large, true).expect("kept");
        assert!(
            large["omitted"]
                .as_str()
                .is_some_and(|o| o.ends_with("bytes of result, more than the workbench keeps")),
            "{large}"
        );
    }
}
