//! Validation of the server, its start-up jobs, demo calls, examples and toolsets: each names
//! a declared tool (with arguments that fit it).

use super::*;

impl Validator<'_> {
    pub(super) fn server(&mut self, spec: &RawSpec) {
        let server = &spec.server.value;
        let name = &server.name;
        if !valid_name(&name.value, 64) || !name.value.starts_with(|c: char| c.is_ascii_lowercase())
        {
            self.sink.error(
                pos(name),
                format!("invalid server name `{}`", name.value),
                "not a server name",
                "use lowercase letters, digits, `_` and `-`, starting with a letter",
            );
        }
        let version = &server.version;
        let parts: Vec<&str> = version.value.split('.').collect();
        if parts.len() != 3 || parts.iter().any(|p| p.parse::<u64>().is_err()) {
            self.sink.error(
                pos(version),
                format!("invalid server version `{}`", version.value),
                "not MAJOR.MINOR.PATCH",
                "write a SemVer version such as `1.2.0`",
            );
        }
        if let Some(b) = &server.token_budget
            && b.value == 0
        {
            self.sink.error(
                pos(b),
                "`token_budget` must be at least 1",
                "",
                "give the estimate in tokens the tool list may cost, e.g. `4000` (`mcpspec tokens` says what it costs now)",
            );
        }
        let Some(db) = &spec.database else {
            if let Some(t) = spec
                .tools
                .iter()
                .find(|t| t.value.sql.is_some() || t.value.compose.is_some())
            {
                self.sink.error(
                    pos(t),
                    format!(
                        "tool `{}` runs SQL but the spec declares no `database`",
                        t.value.name.value
                    ),
                    "",
                    "add a `database:` section with the schema the SQL expects",
                );
            }
            return;
        };
        let db = &db.value;
        if let Some(access) = &db.access
            && !matches!(access.value.as_str(), "read_only" | "read_write")
        {
            self.sink.error(
                pos(access),
                format!("unknown database access `{}`", access.value),
                "not an access mode",
                "use `read_only` or `read_write`",
            );
        }
        if let Some(env) = &db.env {
            self.env_name(env);
        }
        if db.schema.value.trim().is_empty() {
            self.sink.error(
                pos(&db.schema),
                "the database schema is empty",
                "",
                "write the CREATE TABLE statements the tools expect",
            );
        }
    }

    /// Start-up jobs call declared tools with mapping arguments, never a tool that asks the
    /// person to confirm (nobody is there to answer).
    pub(super) fn startup(&mut self, spec: &RawSpec) {
        for job in &spec.startup {
            let (tool, arguments) = (&job.value.tool, job.value.arguments.as_ref());
            if let Some(t) = self.fixed_call(spec, "start-up job", tool, arguments)
                && t.confirm.is_some()
            {
                self.sink.error(
                    pos(tool),
                    format!(
                        "the start-up job calls `{}`, which needs the person's confirmation",
                        tool.value
                    ),
                    "nobody is there to confirm at start-up",
                    "call a tool without a `confirm` rule",
                );
            }
        }
    }

    /// Each toolset has a name `serve --toolset` can take and names declared tools, at least
    /// one, each once.
    pub(super) fn toolsets(&mut self, spec: &RawSpec) {
        for (name, tools) in &spec.toolsets {
            if !valid_name(name, 64) || name.contains('.') {
                self.sink.error(
                    pos(tools),
                    format!("invalid toolset name `{name}`"),
                    "",
                    "use letters, digits, `_` and `-`",
                );
            }
            if tools.value.is_empty() {
                self.sink.error(
                    pos(tools),
                    format!("toolset `{name}` names no tool"),
                    "empty",
                    "list the tools it offers, e.g. `[kb_get, kb_search]`",
                );
            }
            let mut seen = BTreeSet::new();
            for tool in &tools.value {
                if !seen.insert(tool.value.as_str()) {
                    self.sink.error(
                        pos(tool),
                        format!("toolset `{name}` names `{}` twice", tool.value),
                        "again",
                        "name each tool once",
                    );
                    continue;
                }
                self.fixed_call(spec, &format!("toolset `{name}`"), tool, None);
            }
        }
    }

    pub(super) fn demo(&mut self, spec: &RawSpec) {
        for call in &spec.demo {
            let (tool, arguments) = (&call.value.tool, call.value.arguments.as_ref());
            self.fixed_call(spec, "demo call", tool, arguments);
        }
    }

    /// Each example gives its arguments as a mapping and exactly one of `returns`, `empty:
    /// true` and `error`.
    pub(super) fn examples(&mut self, spec: &RawSpec) {
        for tool in &spec.tools {
            for e in &tool.value.examples {
                let x = &e.value;
                if let Some(a) = &x.arguments
                    && !a.value.is_object()
                {
                    self.sink.error(
                        pos(a),
                        "example arguments must be a mapping",
                        "not a mapping",
                        "write them as `arguments: {name: value}`",
                    );
                }
                if let Some(empty) = &x.empty
                    && !empty.value
                {
                    self.sink.error(
                        pos(empty),
                        "`empty: false` says nothing",
                        "",
                        "write `empty: true` for a call that finds no rows, or `returns:` with what it finds",
                    );
                }
                let given = usize::from(x.returns.is_some())
                    + usize::from(x.empty.is_some())
                    + usize::from(x.error.is_some());
                if given != 1 {
                    self.sink.error(
                        pos(e),
                        format!(
                            "an example of `{}` must say what comes back: exactly one of `returns`, `empty` and `error`",
                            tool.value.name.value
                        ),
                        if given == 0 { "no expectation" } else { "more than one expectation" },
                        "e.g. `returns: {id: 1}`, `empty: true` or `error: NOT_FOUND`",
                    );
                }
            }
        }
    }

    /// A call written into the spec (`what`: a demo call, a start-up job) names a declared
    /// tool and gives its arguments as a mapping; the tool, when it is declared.
    pub(super) fn fixed_call<'s>(
        &mut self,
        spec: &'s RawSpec,
        what: &str,
        tool: &Sp<String>,
        arguments: Option<&Sp<serde_json::Value>>,
    ) -> Option<&'s crate::spec::RawTool> {
        if let Some(a) = arguments
            && !a.value.is_object()
        {
            self.sink.error(
                pos(a),
                format!("{what} arguments must be a mapping"),
                "not a mapping",
                "write them as `arguments: {name: value}`",
            );
        }
        let found = spec
            .tools
            .iter()
            .find(|t| t.value.name.value == tool.value)
            .map(|t| &t.value);
        if found.is_none() {
            let names: Vec<&str> = spec
                .tools
                .iter()
                .map(|t| t.value.name.value.as_str())
                .collect();
            self.sink.error(
                pos(tool),
                format!("the {what} names unknown tool `{}`", tool.value),
                "no such tool",
                &match did_you_mean(&tool.value, &names) {
                    Some(s) => format!("did you mean `{s}`?"),
                    None => "call one of the tools declared under `tools:`".into(),
                },
            );
        }
        found
    }
}
