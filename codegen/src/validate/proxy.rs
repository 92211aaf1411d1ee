//! Validation of `proxy`: its downstream servers and config, argument normalisation and
//! extraction, and the interceptor's rules and query.

use super::*;

impl Validator<'_> {
    /// Proxy bindings: downstream servers, the name map, and the interceptor.
    pub(super) fn proxy(&mut self, spec: &RawSpec, proxy: &Sp<RawProxy>) {
        let p = &proxy.value;
        self.proxy_config(p);
        self.proxy_servers(p);
        self.proxy_mapping(p);
        let Some(intercept) = &p.intercept else {
            return;
        };
        let mut keys: BTreeMap<&str, Pos> = BTreeMap::new();
        for r in &intercept.value.rules {
            self.intercept_rule(&r.value, &mut keys);
        }
        if let Some(sql) = &intercept.value.sql {
            self.intercept_sql(spec, sql);
        }
    }

    /// Where the downstream list comes from: an environment variable or a default path.
    pub(super) fn proxy_config(&mut self, p: &RawProxy) {
        if let Some(c) = &p.config {
            if let Some(env) = &c.value.env {
                self.env_name(env);
            }
            let d = &c.value.default_path;
            if c.value.env.is_none()
                && d.linux.is_none()
                && d.macos.is_none()
                && d.windows.is_none()
            {
                self.sink.error(
                    pos(c),
                    "`proxy.config` names neither an environment variable nor a default path",
                    "",
                    "add `env: NAME_OF_VARIABLE` or `default_path: {linux: ..., macos: ..., windows: ...}`",
                );
            }
        }
    }

    /// Downstream servers: each named once, with a command.
    pub(super) fn proxy_servers(&mut self, p: &RawProxy) {
        let mut names: BTreeMap<&str, Pos> = BTreeMap::new();
        for d in &p.servers {
            let n = &d.value.name;
            if n.value.trim().is_empty() {
                self.sink.error(
                    pos(n),
                    "a downstream server has an empty name",
                    "",
                    "name it; the name appears in logs and in DOWNSTREAM_FAILED errors",
                );
            } else if let Some(first) = names.insert(n.value.as_str(), pos(n)) {
                self.sink.error(
                    pos(n),
                    format!("duplicate downstream server name `{}`", n.value),
                    "declared again here",
                    &format!(
                        "the first declaration is at line {}; rename one",
                        first.line
                    ),
                );
            }
            if d.value.command.value.trim().is_empty() {
                self.sink.error(
                    pos(&d.value.command),
                    format!("downstream server `{}` has an empty command", n.value),
                    "",
                    "name the program that starts it, e.g. `npx`",
                );
            }
        }
    }

    /// Tool-name normalisation and argument extraction: no empty names.
    pub(super) fn proxy_mapping(&mut self, p: &RawProxy) {
        for (from, to) in &p.normalize {
            if from.trim().is_empty() || to.value.trim().is_empty() {
                self.sink.error(
                    pos(to),
                    format!("`normalize` maps `{from}` to an empty name"),
                    "",
                    "map each downstream tool name to a canonical name such as `Bash` or `Read`",
                );
            }
        }
        if let Some(e) = &p.extract {
            for (what, list) in [
                ("command", &e.value.command),
                ("file_path", &e.value.file_path),
            ] {
                for a in list {
                    if a.value.trim().is_empty() {
                        self.sink.error(
                            pos(a),
                            format!("`extract.{what}` lists an empty argument name"),
                            "",
                            "list the argument names a downstream tool uses",
                        );
                    }
                }
            }
        }
    }

    /// One interceptor rule: a unique key, a known action, a message, tools and patterns.
    pub(super) fn intercept_rule<'r>(
        &mut self,
        r: &'r RawInterceptRule,
        keys: &mut BTreeMap<&'r str, Pos>,
    ) {
        let k = &r.key;
        if k.value.trim().is_empty() {
            self.sink.error(
                pos(k),
                "an interceptor rule has an empty `key`",
                "",
                "name the rule",
            );
        } else if let Some(first) = keys.insert(k.value.as_str(), pos(k)) {
            self.sink.error(
                pos(k),
                format!("duplicate interceptor rule key `{}`", k.value),
                "",
                &format!(
                    "the first is at line {}; give each rule its own key",
                    first.line
                ),
            );
        }
        if mcpspec_def::InterceptAction::parse(&r.action.value).is_none() {
            self.sink.error(
                pos(&r.action),
                format!("unknown interceptor action `{}`", r.action.value),
                "not an action",
                &match did_you_mean(&r.action.value, mcpspec_def::InterceptAction::NAMES) {
                    Some(s) => format!("did you mean `{s}`?"),
                    None => "use `guard` (block the call) or `hint` (bundle the message with the result)".into(),
                },
            );
        }
        if r.message.value.trim().is_empty() {
            self.sink.error(
                pos(&r.message),
                format!("interceptor rule `{}` has an empty message", k.value),
                "",
                "say why the call is blocked or what to keep in mind",
            );
        }
        for t in &r.tools {
            if t.value.trim().is_empty() {
                self.sink.error(
                    pos(t),
                    format!("interceptor rule `{}` names an empty tool", k.value),
                    "",
                    "use canonical names such as `Bash`",
                );
            }
        }
        if let Some(c) = &r.command {
            self.regex(c, "command");
        }
        if let Some(f) = &r.file_path {
            self.regex(f, "file_path");
        }
    }

    /// The interceptor query: a database to run on, and only interceptor parameters.
    pub(super) fn intercept_sql(&mut self, spec: &RawSpec, sql: &Sp<String>) {
        if spec.database.is_none() {
            self.sink.error(
                pos(sql),
                "`intercept.sql` runs on the server's database but the spec declares no `database`",
                "",
                "add a `database:` section, or use static `rules` only",
            );
        }
        if sql.value.trim().is_empty() {
            self.sink.error(
                pos(sql),
                "`intercept.sql` is empty",
                "",
                "write the query or remove the key",
            );
        }
        for param in sqltext::params(&sql.value) {
            if !crate::ir::INTERCEPT_PARAMS.contains(&param.name.as_str()) {
                self.sink.error(
                    self.offset_pos(sql, param.offset),
                    format!(
                        "SQL parameter `:{}` of `intercept.sql` is not an interceptor parameter",
                        param.name
                    ),
                    "no such parameter",
                    &match did_you_mean(&param.name, crate::ir::INTERCEPT_PARAMS) {
                        Some(n) => format!("did you mean `:{n}`?"),
                        None => format!(
                            "the parameters are {}",
                            crate::ir::INTERCEPT_PARAMS
                                .iter()
                                .map(|p| format!(":{p}"))
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    },
                );
            }
        }
    }
}
