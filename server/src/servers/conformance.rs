//! The handlers of the `conformance` server (spec/conformance.yaml): the fixture tools of the
//! official MCP conformance suite that talk to the client during their call, through the
//! [`Context`] methods for logging, progress, sampling, elicitation and resource updates.

use serde_json::{Value, json};

use crate::generated::conformance::args;
use crate::generated::conformance::{
    TestElicitationHandler, TestElicitationSep1034DefaultsHandler,
    TestElicitationSep1330EnumsHandler, TestErrorHandlingHandler, TestSamplingHandler,
    TestToolWithLoggingHandler, TestToolWithProgressHandler, TestTouchWatchedResourceHandler,
};
use mcpspec::handler::{Content, Context, Elicited, HandlerError, LogLevel};

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
