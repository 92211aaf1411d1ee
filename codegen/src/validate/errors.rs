//! Validation of `error_codes` and `errors`: declared error codes, their rules and the tools
//! they name, and handler method names.

use super::*;

impl Validator<'_> {
    /// Declared errors: names, codes in the server range, templates and rules.
    pub(super) fn errors(&mut self, spec: &RawSpec) {
        self.handler_names(spec);
        let mut names: BTreeMap<&str, Pos> = BTreeMap::new();
        let mut codes: BTreeMap<i64, Pos> = BTreeMap::new();
        let tools: Vec<&str> = spec
            .tools
            .iter()
            .map(|t| t.value.name.value.as_str())
            .collect();
        for e in &spec.errors {
            self.error_declaration(&e.value, &mut names, &mut codes);
            for r in &e.value.rules {
                self.error_rule(spec, &e.value.name, r, &tools);
            }
        }
    }

    /// Handler methods and traits: one method per tool or resource, and no two traits with
    /// one name.
    pub(super) fn handler_names(&mut self, spec: &RawSpec) {
        let mut handlers = BTreeMap::new();
        for t in &spec.tools {
            if let Some(h) = &t.value.handler
                && let Some(first) = handlers.insert(h.value.as_str(), pos(h))
            {
                self.sink.error(
                    pos(h),
                    format!("handler `{}` is bound to two tools", h.value),
                    "",
                    &format!(
                        "the first is at line {}; give each tool its own method",
                        first.line
                    ),
                );
            }
        }
        // Tools and resources share one handler namespace: one method of one type each, and
        // one trait name each (`<Tool>Handler`, `<Resource>ResourceHandler`).
        for r in spec.resources.iter().filter(|r| r.value.handler.is_some()) {
            let ty = crate::names::pascal(&r.value.name.value) + "Resource";
            if let Some(t) = spec.tools.iter().find(|t| {
                t.value.handler.is_some() && crate::names::pascal(&t.value.name.value) == ty
            }) {
                self.sink.error(
                    pos(&r.value.name),
                    format!(
                        "the handler trait of resource `{}` would be `{ty}Handler`, as is that of tool `{}`",
                        r.value.name.value, t.value.name.value
                    ),
                    "",
                    "rename the resource or the tool",
                );
            }
        }
        for r in &spec.resources {
            if let Some(h) = &r.value.handler
                && let Some(first) = handlers.insert(h.value.as_str(), pos(h))
            {
                self.sink.error(
                    pos(h),
                    format!(
                        "handler `{}` of resource `{}` is already bound",
                        h.value, r.value.name.value
                    ),
                    "",
                    &format!(
                        "the first binding is at line {}; give each tool and resource its own method",
                        first.line
                    ),
                );
            }
        }
    }

    /// A declared error: its name, its code in the server range, its message and data, none
    /// declared twice.
    pub(super) fn error_declaration<'e>(
        &mut self,
        e: &'e RawError,
        names: &mut BTreeMap<&'e str, Pos>,
        codes: &mut BTreeMap<i64, Pos>,
    ) {
        let n = &e.name;
        if n.value.is_empty()
            || !n
                .value
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        {
            self.sink.error(
                pos(n),
                format!("error name `{}` is not UPPER_SNAKE_CASE", n.value),
                "",
                "e.g. `DB_NOT_ALLOWED`",
            );
        }
        if let Some(first) = names.insert(n.value.as_str(), pos(n)) {
            self.sink.error(
                pos(n),
                format!("error `{}` is declared twice", n.value),
                "",
                &format!("the first declaration is at line {}", first.line),
            );
        }
        let c = &e.code;
        if !(-32099..=-32000).contains(&c.value) {
            self.sink.error(
                pos(c),
                format!(
                    "error code {} of `{}` is outside the server range",
                    c.value, n.value
                ),
                "not in -32000..-32099",
                "JSON-RPC reserves -32000 to -32099 for implementation-defined server errors",
            );
        } else if let Some(first) = codes.insert(c.value, pos(c)) {
            self.sink.error(
                pos(c),
                format!("error code {} is used twice", c.value),
                "",
                &format!(
                    "the first use is at line {}; give each error its own code",
                    first.line
                ),
            );
        }
        self.template(&e.message, &format!("the message of `{}`", n.value));
        for d in &e.data {
            if d.value.is_empty() || d.value == "code" {
                self.sink.error(
                    pos(d),
                    format!("`data` of `{}` names the field `{}`", n.value, d.value),
                    "",
                    "`code` is always present; name other fields",
                );
            }
        }
    }

    /// One rule of a declared error: a known failure, `field` exactly for `invalid`, known
    /// tools.
    pub(super) fn error_rule(
        &mut self,
        spec: &RawSpec,
        n: &Sp<String>,
        r: &Sp<RawRule>,
        tools: &[&str],
    ) {
        let rule = &r.value;
        let w = &rule.when;
        if !crate::ir::RULE_KINDS.contains(&w.value.as_str()) {
            self.sink.error(
                pos(w),
                format!("unknown failure `{}` in a rule of `{}`", w.value, n.value),
                "",
                &match did_you_mean(&w.value, crate::ir::RULE_KINDS) {
                    Some(s) => format!("did you mean `{s}`?"),
                    None => format!("use one of {}", crate::ir::RULE_KINDS.join(", ")),
                },
            );
        }
        match (&rule.field, w.value == "invalid") {
            (None, true) => self.sink.error(
                pos(r),
                format!("the `invalid` rule of `{}` names no `field`", n.value),
                "",
                "add `field: ARGUMENT`",
            ),
            (Some(f), false) => self.sink.error(
                pos(f),
                "`field` applies only to `when: invalid`",
                "",
                "remove it",
            ),
            (Some(f), true) => {
                let declared = spec.tools.iter().any(|t| {
                    t.value
                        .input
                        .as_ref()
                        .is_some_and(|i| i.value.properties.contains_key(&f.value))
                });
                if !declared {
                    self.sink.error(
                        pos(f),
                        format!("no tool has an argument `{}`", f.value),
                        "",
                        "name an input property of some tool",
                    );
                }
            }
            (None, false) => {}
        }
        for t in &rule.tools {
            if !tools.contains(&t.value.as_str()) {
                self.sink.error(
                    pos(t),
                    format!("a rule of `{}` names unknown tool `{}`", n.value, t.value),
                    "",
                    &match did_you_mean(&t.value, tools) {
                        Some(s) => format!("did you mean `{s}`?"),
                        None => "name tools declared under `tools:`".into(),
                    },
                );
            }
        }
    }
}
