//! A prompt's questions to the person, asked before its messages render.
//!
//! The questions go through the request's [`ClientLink`], so both protocol eras work as they
//! do for a handler's questions: `elicitation/create` in a 2025-11-25 session, an
//! `input_required` result for a 2026-07-28 request (the link records the questions and the
//! caller answers with them). A question is never required: a client that cannot ask, a person
//! who declines or cancels, or a request that fails leaves that answer empty (`{}`), and the
//! messages decide what to say without it. An accepted answer must fit its form.

use serde_json::{Map, Value, json};

use crate::content::ContentError;
use crate::def::PromptDef;
use crate::handler::{ClientLink, Input, Question, Unanswered};

/// The answers to `prompt`'s questions, by key, for the messages' `answers`: each accepted
/// form's content, or `{}`. `None` when the client is to be asked first (protocol
/// 2026-07-28: the link holds the questions for the `input_required` result).
pub fn answers(
    prompt: &PromptDef,
    link: &dyn ClientLink,
) -> Result<Option<Map<String, Value>>, ContentError> {
    let mut out: Map<String, Value> = prompt
        .ask
        .iter()
        .map(|a| (a.key.to_string(), json!({})))
        .collect();
    if prompt.ask.is_empty() || !link.supports("elicitation") {
        return Ok(Some(out));
    }
    // Each form once: asked with it, and each answer checked against it.
    let forms: Vec<Value> = prompt
        .ask
        .iter()
        .map(|a| serde_json::from_str(a.schema).unwrap_or_else(|_| json!({})))
        .collect();
    let questions = prompt
        .ask
        .iter()
        .zip(&forms)
        .map(|(a, form)| {
            let message = a.message.to_string();
            Question::new(
                a.key,
                Input::Elicit {
                    message,
                    schema: form.clone(),
                },
            )
        })
        .collect();
    let given = match link.ask(questions) {
        Ok(given) => given,
        Err(Unanswered::Later) => return Ok(None),
        Err(Unanswered::NoCapability(_)) => return Ok(Some(out)),
        Err(Unanswered::Failed(why)) => {
            tracing::warn!(prompt = prompt.name, reason = %why, "the prompt's questions went unanswered");
            return Ok(Some(out));
        }
    };
    for (a, form) in prompt.ask.iter().zip(&forms) {
        if let Some(content) = accepted(prompt, a.key, form, given.get(a.key))? {
            out.insert(a.key.to_string(), content);
        }
    }
    Ok(Some(out))
}

/// The content of an accepted answer, checked against the question's form; `None` for an
/// answer declined, cancelled or missing.
fn accepted(
    prompt: &PromptDef,
    key: &str,
    form: &Value,
    answer: Option<&Value>,
) -> Result<Option<Value>, ContentError> {
    let Some(answer) = answer.filter(|a| a["action"] == "accept") else {
        return Ok(None);
    };
    let content = answer.get("content").cloned().unwrap_or_else(|| json!({}));
    let checked = jsonschema::validator_for(form)
        .map_err(|e| e.to_string())
        .and_then(|v| crate::engine::validate(&v, &content).map_err(|e| e.message));
    match checked {
        Ok(()) => Ok(Some(content)),
        Err(why) => Err(ContentError::InvalidParams(
            format!(
                "the answer to question `{key}` of prompt `{}` does not fit its form: {}",
                prompt.name,
                why.trim_start_matches("invalid arguments: ")
            ),
            json!({"prompt": prompt.name, "field": format!("inputResponses.{key}.content")}),
        )),
    }
}
