//! The handlers of the `conformance` server (spec/conformance.yaml): the fixture tools of the
//! official MCP conformance suite that talk to the client during their call, through the
//! [`Context`] methods for logging, progress, sampling, elicitation and resource updates, and
//! the fixtures of protocol 2026-07-28 that ask the client through `input_required`
//! ([`Context::ask`] with the keys the suite expects).

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::generated::conformance::args;
use crate::generated::conformance::{
    ConfirmDeleteHandler, FailingJobHandler, MultiInputHandler, ProtocolErrorJobHandler,
    SlowComputeHandler, TestElicitationHandler, TestElicitationSep1034DefaultsHandler,
    TestElicitationSep1330EnumsHandler, TestErrorHandlingHandler,
    TestInputRequiredResultCapabilitiesHandler, TestInputRequiredResultElicitationHandler,
    TestInputRequiredResultListRootsHandler, TestInputRequiredResultMultiRoundHandler,
    TestInputRequiredResultMultipleInputsHandler, TestInputRequiredResultRequestStateHandler,
    TestInputRequiredResultSamplingHandler, TestInputRequiredResultTamperedStateHandler,
    TestLoggingToolHandler, TestMissingCapabilityHandler, TestSamplingHandler,
    TestStreamingElicitationHandler, TestToolWithLoggingHandler, TestToolWithProgressHandler,
    TestToolWithTaskHandler, TestTouchWatchedResourceHandler,
};
use mcpspec::handler::{Content, Context, Elicited, HandlerError, Input, LogLevel, Question};
use serde_json::Map;

/// The conformance fixtures; they keep no state.
pub struct Conformance;

/// The URI whose subscribers `test_touch_watched_resource` notifies.
const WATCHED: &str = "test://watched-resource";

impl TestToolWithLoggingHandler for Conformance {
    fn with_logging(
        &self,
        ctx: &Context,
        _args: args::TestToolWithLogging,
    ) -> Result<Vec<Content>, HandlerError> {
        for step in [
            "Tool execution started",
            "Tool processing data",
            "Tool execution completed",
        ] {
            ctx.log(LogLevel::Info, step);
        }
        Ok(vec![Content::text(
            "Tool with logging executed successfully",
        )])
    }
}

impl TestToolWithProgressHandler for Conformance {
    fn with_progress(
        &self,
        ctx: &Context,
        _args: args::TestToolWithProgress,
    ) -> Result<Vec<Content>, HandlerError> {
        for done in [0.0, 50.0, 100.0] {
            ctx.progress(done, Some(100.0), format!("Completed step {done} of 100"));
        }
        Ok(vec![Content::text(
            "Tool with progress executed successfully",
        )])
    }
}

impl TestErrorHandlingHandler for Conformance {
    fn error_handling(
        &self,
        _ctx: &Context,
        _args: args::TestErrorHandling,
    ) -> Result<Vec<Content>, HandlerError> {
        Err(HandlerError::new("TEST_ERROR")
            .message("This tool intentionally returns an error for testing"))
    }
}

impl TestSamplingHandler for Conformance {
    fn sampling(
        &self,
        ctx: &Context,
        args: args::TestSampling,
    ) -> Result<Vec<Content>, HandlerError> {
        let answer = ctx.sample(&args.prompt, 100)?;
        Ok(vec![Content::text(format!("LLM response: {answer}"))])
    }
}

/// The text the elicitation tools return: the action and the content as JSON.
fn answered(prefix: &str, e: &Elicited) -> Vec<Content> {
    let content = e.content.clone().map_or(json!({}), Value::Object);
    vec![Content::text(format!(
        "{prefix}: action={}, content={content}",
        e.action
    ))]
}

impl TestElicitationHandler for Conformance {
    fn elicitation(
        &self,
        ctx: &Context,
        args: args::TestElicitation,
    ) -> Result<Vec<Content>, HandlerError> {
        let schema = json!({
            "type": "object",
            "properties": {
                "response": {"type": "string", "description": "User's response"},
            },
            "required": ["response"],
        });
        let e = ctx.elicit(&args.message, schema)?;
        Ok(answered("User response", &e))
    }
}

impl TestElicitationSep1034DefaultsHandler for Conformance {
    fn elicitation_defaults(
        &self,
        ctx: &Context,
        _args: args::TestElicitationSep1034Defaults,
    ) -> Result<Vec<Content>, HandlerError> {
        let schema = json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "User name", "default": "John Doe"},
                "age": {"type": "integer", "description": "User age", "default": 30},
                "score": {"type": "number", "description": "User score", "default": 95.5},
                "status": {
                    "type": "string",
                    "description": "User status",
                    "enum": ["active", "inactive", "pending"],
                    "default": "active",
                },
                "verified": {"type": "boolean", "description": "Verification status", "default": true},
            },
            "required": [],
        });
        let e = ctx.elicit(
            "Please review and update the form fields with defaults",
            schema,
        )?;
        Ok(answered("Elicitation completed", &e))
    }
}

impl TestElicitationSep1330EnumsHandler for Conformance {
    fn elicitation_enums(
        &self,
        ctx: &Context,
        _args: args::TestElicitationSep1330Enums,
    ) -> Result<Vec<Content>, HandlerError> {
        let titled = |titles: [&str; 3]| -> Vec<Value> {
            titles
                .iter()
                .enumerate()
                .map(|(i, t)| json!({"const": format!("value{}", i + 1), "title": t}))
                .collect()
        };
        let schema = json!({
            "type": "object",
            "properties": {
                "untitledSingle": {
                    "type": "string",
                    "description": "Select one option",
                    "enum": ["option1", "option2", "option3"],
                },
                "titledSingle": {
                    "type": "string",
                    "description": "Select one option with titles",
                    "oneOf": titled(["First Option", "Second Option", "Third Option"]),
                },
                "legacyEnum": {
                    "type": "string",
                    "description": "Select one option (legacy)",
                    "enum": ["opt1", "opt2", "opt3"],
                    "enumNames": ["Option One", "Option Two", "Option Three"],
                },
                "untitledMulti": {
                    "type": "array",
                    "description": "Select multiple options",
                    "minItems": 1,
                    "maxItems": 3,
                    "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
                },
                "titledMulti": {
                    "type": "array",
                    "description": "Select multiple options with titles",
                    "minItems": 1,
                    "maxItems": 3,
                    "items": {"anyOf": titled(["First Choice", "Second Choice", "Third Choice"])},
                },
            },
            "required": [],
        });
        let e = ctx.elicit("Please select options from the enum fields", schema)?;
        Ok(answered("Elicitation completed", &e))
    }
}

impl TestTouchWatchedResourceHandler for Conformance {
    fn touch_watched_resource(
        &self,
        ctx: &Context,
        _args: args::TestTouchWatchedResource,
    ) -> Result<Vec<Content>, HandlerError> {
        ctx.resource_updated(WATCHED);
        Ok(vec![Content::text(format!("{WATCHED} updated"))])
    }
}

impl TestLoggingToolHandler for Conformance {
    fn logging_tool(
        &self,
        ctx: &Context,
        _args: args::TestLoggingTool,
    ) -> Result<Vec<Content>, HandlerError> {
        for step in ["logging started", "logging going on", "logging done"] {
            ctx.log(LogLevel::Info, step);
        }
        Ok(vec![Content::text("logged three messages")])
    }
}

impl TestMissingCapabilityHandler for Conformance {
    fn missing_capability(
        &self,
        ctx: &Context,
        _args: args::TestMissingCapability,
    ) -> Result<Vec<Content>, HandlerError> {
        let answer = ctx.sample("Say hello.", 20)?;
        Ok(vec![Content::text(format!("LLM response: {answer}"))])
    }
}

impl TestStreamingElicitationHandler for Conformance {
    fn streaming_elicitation(
        &self,
        ctx: &Context,
        _args: args::TestStreamingElicitation,
    ) -> Result<Vec<Content>, HandlerError> {
        let e = ctx.elicit("What is your name?", text_form("name"))?;
        Ok(answered("User response", &e))
    }
}

/// A form of one required text field.
fn text_form(field: &str) -> Value {
    json!({
        "type": "object",
        "properties": {field: {"type": "string"}},
        "required": [field],
    })
}

fn elicit(message: &str, field: &str) -> Input {
    Input::Elicit {
        message: message.to_string(),
        schema: text_form(field),
    }
}

fn sample(prompt: &str, max_tokens: u32) -> Input {
    Input::Sample(json!({
        "messages": [{"role": "user", "content": {"type": "text", "text": prompt}}],
        "maxTokens": max_tokens,
    }))
}

/// A text field of a form's answer.
fn field<'a>(answers: &'a Map<String, Value>, key: &str, field: &str) -> &'a str {
    answers
        .get(key)
        .and_then(|a| a["content"][field].as_str())
        .unwrap_or_default()
}

/// The text of a sampling answer.
fn said<'a>(answers: &'a Map<String, Value>, key: &str) -> &'a str {
    answers[key]["content"]["text"].as_str().unwrap_or_default()
}

/// The URIs of a roots answer, comma-separated.
fn roots(answers: &Map<String, Value>, key: &str) -> String {
    let uris: Vec<&str> = answers[key]["roots"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["uri"].as_str())
        .collect();
    uris.join(", ")
}

impl TestInputRequiredResultElicitationHandler for Conformance {
    fn ask_name(
        &self,
        ctx: &Context,
        _args: args::TestInputRequiredResultElicitation,
    ) -> Result<Vec<Content>, HandlerError> {
        let a = ctx.ask(vec![Question::new(
            "user_name",
            elicit("What is your name?", "name"),
        )])?;
        let name = field(&a, "user_name", "name");
        Ok(vec![Content::text(format!("Hello, {name}!"))])
    }
}

impl TestInputRequiredResultSamplingHandler for Conformance {
    fn ask_model(
        &self,
        ctx: &Context,
        _args: args::TestInputRequiredResultSampling,
    ) -> Result<Vec<Content>, HandlerError> {
        let a = ctx.ask(vec![Question::new(
            "capital_question",
            sample("What is the capital of France?", 100),
        )])?;
        Ok(vec![Content::text(format!(
            "The model says: {}",
            said(&a, "capital_question")
        ))])
    }
}

impl TestInputRequiredResultListRootsHandler for Conformance {
    fn ask_roots(
        &self,
        ctx: &Context,
        _args: args::TestInputRequiredResultListRoots,
    ) -> Result<Vec<Content>, HandlerError> {
        let a = ctx.ask(vec![Question::new("client_roots", Input::Roots)])?;
        Ok(vec![Content::text(format!(
            "Client roots: {}",
            roots(&a, "client_roots")
        ))])
    }
}

/// Asks a yes-or-no form under `confirm`; whether the person said yes.
fn confirmed(ctx: &Context) -> Result<bool, HandlerError> {
    let form = Input::Elicit {
        message: "Please confirm".into(),
        schema: json!({
            "type": "object",
            "properties": {"ok": {"type": "boolean"}},
            "required": ["ok"],
        }),
    };
    let a = ctx.ask(vec![Question::new("confirm", form)])?;
    Ok(a["confirm"]["content"]["ok"].as_bool().unwrap_or(false))
}

impl TestInputRequiredResultRequestStateHandler for Conformance {
    fn ask_with_state(
        &self,
        ctx: &Context,
        _args: args::TestInputRequiredResultRequestState,
    ) -> Result<Vec<Content>, HandlerError> {
        // The runtime accepts an answer only with the sealed state it was asked with, so an
        // answer here came back with a valid state.
        let ok = confirmed(ctx)?;
        Ok(vec![Content::text(format!("state-ok: confirmed={ok}"))])
    }
}

impl TestInputRequiredResultTamperedStateHandler for Conformance {
    fn ask_tamper_proof(
        &self,
        ctx: &Context,
        _args: args::TestInputRequiredResultTamperedState,
    ) -> Result<Vec<Content>, HandlerError> {
        let ok = confirmed(ctx)?;
        Ok(vec![Content::text(format!("confirmed={ok}"))])
    }
}

impl TestInputRequiredResultMultipleInputsHandler for Conformance {
    fn ask_three(
        &self,
        ctx: &Context,
        _args: args::TestInputRequiredResultMultipleInputs,
    ) -> Result<Vec<Content>, HandlerError> {
        let a = ctx.ask(vec![
            Question::new("user_name", elicit("What is your name?", "name")),
            Question::new("greeting", sample("Generate a greeting", 50)),
            Question::new("client_roots", Input::Roots),
        ])?;
        Ok(vec![Content::text(format!(
            "{} {}; roots: {}",
            said(&a, "greeting"),
            field(&a, "user_name", "name"),
            roots(&a, "client_roots")
        ))])
    }
}

impl TestInputRequiredResultMultiRoundHandler for Conformance {
    fn ask_twice(
        &self,
        ctx: &Context,
        _args: args::TestInputRequiredResultMultiRound,
    ) -> Result<Vec<Content>, HandlerError> {
        let first = ctx.ask(vec![Question::new(
            "step1",
            elicit("Step 1: What is your name?", "name"),
        )])?;
        let second = ctx.ask(vec![Question::new(
            "step2",
            elicit("Step 2: What is your favorite color?", "color"),
        )])?;
        Ok(vec![Content::text(format!(
            "{} likes {}",
            field(&first, "step1", "name"),
            field(&second, "step2", "color")
        ))])
    }
}

impl TestInputRequiredResultCapabilitiesHandler for Conformance {
    fn ask_what_the_client_can(
        &self,
        ctx: &Context,
        _args: args::TestInputRequiredResultCapabilities,
    ) -> Result<Vec<Content>, HandlerError> {
        let mut questions = Vec::new();
        if ctx.client_supports("elicitation") {
            questions.push(Question::new(
                "user_name",
                elicit("What is your name?", "name"),
            ));
        }
        if ctx.client_supports("sampling") {
            questions.push(Question::new("greeting", sample("Generate a greeting", 50)));
        }
        if questions.is_empty() {
            return Ok(vec![Content::text("the client can answer nothing")]);
        }
        let a = ctx.ask(questions)?;
        let keys: Vec<&str> = a.keys().map(String::as_str).collect();
        Ok(vec![Content::text(format!(
            "answered: {}",
            keys.join(", ")
        ))])
    }
}

/// Works for `seconds`, in short steps so that a cancellation (of the request, or of the task
/// with `tasks/cancel`) stops it within a step.
fn work(ctx: &Context, seconds: f64) -> Result<(), HandlerError> {
    let until = Instant::now() + Duration::from_secs_f64(seconds.max(0.0));
    loop {
        if ctx.is_cancelled() {
            return Err(HandlerError::new("CANCELLED").message("the work was cancelled"));
        }
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(());
        }
        std::thread::sleep(left.min(Duration::from_millis(20)));
    }
}

impl SlowComputeHandler for Conformance {
    fn slow_compute(
        &self,
        ctx: &Context,
        args: args::SlowCompute,
    ) -> Result<Vec<Content>, HandlerError> {
        ctx.background();
        if args.stubborn {
            std::thread::sleep(Duration::from_secs_f64(args.seconds.max(0.0)));
        } else {
            work(ctx, args.seconds)?;
        }
        let label = args.label.as_deref().unwrap_or("work");
        Ok(vec![Content::text(format!(
            "Computed {label} after {} seconds",
            args.seconds
        ))])
    }
}

impl FailingJobHandler for Conformance {
    fn failing_job(
        &self,
        ctx: &Context,
        _args: args::FailingJob,
    ) -> Result<Vec<Content>, HandlerError> {
        ctx.background();
        work(ctx, 1.0)?;
        Err(HandlerError::new("JOB_FAILED").message("the job failed, as this fixture always does"))
    }
}

impl ProtocolErrorJobHandler for Conformance {
    fn protocol_error_job(
        &self,
        ctx: &Context,
        _args: args::ProtocolErrorJob,
    ) -> Result<Vec<Content>, HandlerError> {
        ctx.background();
        Err(HandlerError::new("JOB_CRASHED").with("reason", "this fixture always crashes"))
    }
}

impl ConfirmDeleteHandler for Conformance {
    fn confirm_delete(
        &self,
        ctx: &Context,
        args: args::ConfirmDelete,
    ) -> Result<Vec<Content>, HandlerError> {
        ctx.background();
        let question = Input::Elicit {
            message: format!("Delete {}?", args.filename),
            schema: json!({"type": "object", "properties": {"confirm": {"type": "boolean"}}}),
        };
        let a = ctx.ask(vec![Question::new("confirm_delete", question)])?;
        let accepted = a.get("confirm_delete").and_then(|r| r["action"].as_str()) == Some("accept");
        Ok(vec![Content::text(match accepted {
            true => format!("Deleted {}", args.filename),
            false => format!("Kept {}", args.filename),
        })])
    }
}

impl MultiInputHandler for Conformance {
    fn multi_input(
        &self,
        ctx: &Context,
        _args: args::MultiInput,
    ) -> Result<Vec<Content>, HandlerError> {
        ctx.background();
        let a = ctx.ask(vec![
            Question::new("first_name", elicit("What is your first name?", "name")),
            Question::new(
                "favourite_colour",
                elicit("What is your favourite colour?", "colour"),
            ),
        ])?;
        Ok(vec![Content::text(format!(
            "{} likes {}",
            field(&a, "first_name", "name"),
            field(&a, "favourite_colour", "colour")
        ))])
    }
}

impl TestToolWithTaskHandler for Conformance {
    fn greet_later(
        &self,
        ctx: &Context,
        _args: args::TestToolWithTask,
    ) -> Result<Vec<Content>, HandlerError> {
        // Asked in input_required rounds first; only the answered call becomes a task.
        let a = ctx.ask(vec![Question::new(
            "user_name",
            elicit("What is your name?", "name"),
        )])?;
        ctx.background();
        Ok(vec![Content::text(format!(
            "Hello, {}!",
            field(&a, "user_name", "name")
        ))])
    }
}
