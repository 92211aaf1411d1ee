//! The names under which the engine keeps a spec's message and content templates, and the
//! registration of the templates of resources and prompts at start-up. The engine renders them;
//! [`crate::content`] renders the content ones.

use crate::def::{MessageBodyDef, ServerDef, StatementDef};

/// The name of a template: `{owner}/{part}/{kind}`, e.g. `search/notes/empty`.
pub fn template_name(owner: &str, part: &str, kind: &str) -> String {
    format!("{owner}/{part}/{kind}")
}

/// The owner prefix of a resource's templates.
pub const RESOURCE: &str = "resource:";
/// The owner prefix of a prompt's templates.
pub const PROMPT: &str = "prompt:";

/// The owner of a resource's or prompt's templates.
pub fn content_key(prefix: &str, name: &str) -> String {
    format!("{prefix}{name}")
}

/// Adds the templates of every resource and prompt to the engine's environment, at start-up.
/// A template that does not compile names its resource or prompt.
pub fn add_content(
    def: &'static ServerDef,
    env: &mut minijinja::Environment<'static>,
) -> Result<(), (&'static str, String)> {
    let mut add = |owner: &'static str, name: String, source: &'static str| {
        env.add_template_owned(name, source)
            .map_err(|e| (owner, format!("template: {e}")))
    };
    for r in def.resources {
        let key = content_key(RESOURCE, r.name);
        if let Some(t) = r.content.template {
            add(r.name, template_name(&key, "", "content"), t)?;
        }
        if let Some(st) = &r.content.statement {
            statement_templates(&mut add, r.name, &key, st)?;
        }
    }
    for p in def.prompts {
        let key = content_key(PROMPT, p.name);
        for (i, m) in p.messages.iter().enumerate() {
            let source = match m.body {
                MessageBodyDef::Text(t) | MessageBodyDef::Resource(t) => t,
                MessageBodyDef::Image(..) => continue,
            };
            add(
                p.name,
                template_name(&key, "message", &i.to_string()),
                source,
            )?;
        }
        if let Some(st) = &p.statement {
            statement_templates(&mut add, p.name, &key, st)?;
        }
    }
    Ok(())
}

fn statement_templates(
    add: &mut impl FnMut(&'static str, String, &'static str) -> Result<(), (&'static str, String)>,
    owner: &'static str,
    key: &str,
    st: &'static StatementDef,
) -> Result<(), (&'static str, String)> {
    for (kind, source) in [("empty", st.empty_message), ("not_found", st.not_found)] {
        if let Some(src) = source {
            add(owner, template_name(key, st.name, kind), src)?;
        }
    }
    Ok(())
}
