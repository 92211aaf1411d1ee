//! Validation of statements, wherever they are (tools, resources, prompts): return mode, place
//! in a composite, columns, messages, envelope, dialect texts and parameters.

use super::*;

/// The smallest `max_bytes`: room for a row of a few fields.
pub(super) const MIN_MAX_BYTES: u64 = 256;

impl Validator<'_> {
    pub(super) fn statement(
        &mut self,
        cx: &ToolScope<'_>,
        st: &Sp<RawStatement>,
        used: &mut BTreeSet<String>,
        earlier: &mut BTreeMap<String, (Mode, BTreeSet<String>)>,
    ) {
        let s = &st.value;
        let at = pos(st);
        let mode = self.statement_mode(s);
        self.statement_place(cx, s, at, mode, earlier);
        let columns = self.statement_columns(cx.tool, s, at, mode);
        self.statement_messages(s, mode);
        if cx.composite
            && let Some(m) = &s.empty_message
        {
            self.sink.error(
                pos(m),
                "`empty_message` applies to a tool's one `many` statement, not to one in `compose`",
                "",
                "in `compose` an empty list says it; say in the tool's description what an empty field means",
            );
        }
        self.statement_envelope(cx, s, mode);
        self.statement_params(cx, s, used, earlier);
        self.statement_dialects(s);
        if let Some(n) = &s.name {
            earlier.insert(n.value.clone(), (mode, columns));
        }
    }

    /// The statement's result mode; an unknown one is reported and read as `many`.
    pub(super) fn statement_mode(&mut self, s: &RawStatement) -> Mode {
        match &s.returns {
            None => Mode::Many,
            Some(r) => match Mode::parse(&r.value) {
                Some(m) => m,
                None => {
                    self.sink.error(
                        pos(r),
                        format!("unknown result mode `{}`", r.value),
                        "not a result mode",
                        &match did_you_mean(&r.value, Mode::NAMES) {
                            Some(m) => format!("did you mean `{m}`?"),
                            None => format!("use one of {}", Mode::NAMES.join(", ")),
                        },
                    );
                    Mode::Many
                }
            },
        }
    }

    /// What a statement may say given whether it is composed: `name` under `compose`, `key`
    /// and `optional` only outside it.
    pub(super) fn statement_place(
        &mut self,
        cx: &ToolScope<'_>,
        s: &RawStatement,
        at: Pos,
        mode: Mode,
        earlier: &BTreeMap<String, (Mode, BTreeSet<String>)>,
    ) {
        let (tool, composite) = (cx.tool, cx.composite);
        if composite {
            match &s.name {
                None => self.sink.error(
                    at,
                    format!("a statement of `{tool}` has no `name`"),
                    "",
                    "name each composed statement; the name is its field in the result",
                ),
                Some(n) if earlier.contains_key(&n.value) => self.sink.error(
                    pos(n),
                    format!("duplicate statement name `{}` in `{tool}`", n.value),
                    "",
                    "give each composed statement its own name",
                ),
                Some(_) => {}
            }
            if let Some(k) = &s.key {
                self.sink.error(
                    pos(k),
                    "`key` applies only to a single `sql` statement",
                    "",
                    "a composed statement's field is its `name`",
                );
            }
            if mode == Mode::Execute {
                self.sink.error(
                    at,
                    "a composed statement cannot use `returns: execute`",
                    "",
                    "use `INSERT ... RETURNING` with `returns: one` instead",
                );
            }
        } else {
            if let Some(n) = &s.name {
                self.sink.error(
                    pos(n),
                    "`name` applies only to statements under `compose`",
                    "",
                    "use `key` to name the field that holds the rows",
                );
            }
            if mode == Mode::Optional {
                self.sink.error(
                    s.returns.as_ref().map_or(at, pos),
                    "`returns: optional` applies only to statements under `compose`",
                    "",
                    "use `one` with a `not_found` message",
                );
            }
        }
    }

    /// Column types, and the columns each result mode needs; returns the declared names.
    pub(super) fn statement_columns(
        &mut self,
        tool: &str,
        s: &RawStatement,
        at: Pos,
        mode: Mode,
    ) -> BTreeSet<String> {
        let mut columns = BTreeSet::new();
        for (cname, col) in &s.columns {
            columns.insert(cname.clone());
            let ty = match &col.value {
                RawColumn::Short(t) => t.as_str(),
                RawColumn::Full(f) => f.ty.as_str(),
            };
            if ColumnKind::parse(ty).is_none() {
                self.sink.error(
                    pos(col),
                    format!("unknown column type `{ty}` for `{cname}`"),
                    "not a column type",
                    &match did_you_mean(ty.trim_end_matches('?'), ColumnKind::NAMES) {
                        Some(k) => format!("did you mean `{k}`?"),
                        None => format!(
                            "use one of {}, with a trailing `?` when NULL is possible",
                            ColumnKind::NAMES.join(", ")
                        ),
                    },
                );
            }
        }
        match mode {
            Mode::Execute if !s.columns.is_empty() => self.sink.error(
                at,
                "`returns: execute` produces `changes` and `last_insert_id`, not columns",
                "",
                "remove `columns`, or use `RETURNING` with `returns: one`",
            ),
            Mode::Scalar if s.columns.len() != 1 => self.sink.error(
                at,
                format!(
                    "`returns: scalar` needs exactly one column, found {}",
                    s.columns.len()
                ),
                "",
                "declare the one column the statement selects",
            ),
            Mode::Many | Mode::One | Mode::Optional if s.columns.is_empty() => self.sink.error(
                at,
                format!("a statement of `{tool}` declares no `columns`"),
                "",
                "declare each result column with its type, e.g. `id: text`",
            ),
            _ => {}
        }
        columns
    }

    /// `empty_message` and `not_found`: each for its mode, each a template that parses.
    pub(super) fn statement_messages(&mut self, s: &RawStatement, mode: Mode) {
        if let Some(m) = &s.empty_message
            && mode != Mode::Many
        {
            self.sink.error(
                pos(m),
                "`empty_message` applies only to `returns: many`",
                "",
                "use `not_found` for a single row",
            );
        }
        if let Some(m) = &s.not_found
            && mode != Mode::One
        {
            self.sink.error(
                pos(m),
                "`not_found` applies only to `returns: one`",
                "",
                "use `empty_message` for `returns: many`",
            );
        }
        for t in [&s.empty_message, &s.not_found].into_iter().flatten() {
            let env = minijinja::Environment::new();
            if let Err(e) = env.template_from_str(&t.value) {
                self.sink.error(
                    pos(t),
                    format!(
                        "invalid message template: {}",
                        e.detail().unwrap_or("syntax error")
                    ),
                    "",
                    "templates use minijinja syntax, e.g. `{{ tags | join(\", \") }}`",
                );
            }
        }
    }

    /// Envelope fields: only for a single `many` statement, without clashes, from known
    /// sources; and a positive `max_rows`.
    pub(super) fn statement_envelope(&mut self, cx: &ToolScope<'_>, s: &RawStatement, mode: Mode) {
        let (composite, props) = (cx.composite, cx.props);
        for (field, src) in &s.envelope {
            if composite || mode != Mode::Many {
                self.sink.error(
                    pos(src),
                    "`envelope` applies only to a single `returns: many` statement",
                    "",
                    "",
                );
            }
            if [
                s.key.as_ref().map_or("rows", |k| k.value.as_str()),
                "truncated",
                "message",
            ]
            .contains(&field.as_str())
            {
                self.sink.error(
                    pos(src),
                    format!("envelope field `{field}` clashes with a field of the result"),
                    "",
                    "rename it",
                );
            }
            match crate::ir::envelope(&src.value) {
                None => self.sink.error(
                    pos(src),
                    format!("unknown envelope source `{}`", src.value),
                    "",
                    "use count, tokens, arg:NAME or column:NAME",
                ),
                Some(crate::ir::EnvelopeDef::Arg(a)) if !props.contains_key(a) => self.sink.error(
                    pos(src),
                    format!("envelope field `{field}` echoes `{a}`, which is not an input property"),
                    "",
                    "",
                ),
                Some(crate::ir::EnvelopeDef::Column(c)) if !s.columns.contains_key(c) => self.sink.error(
                    pos(src),
                    format!("envelope field `{field}` reads column `{c}`, which the statement does not declare"),
                    "",
                    "declare the column under `columns`",
                ),
                _ => {}
            }
        }
        if let Some(m) = &s.max_rows
            && m.value == 0
        {
            self.sink
                .error(pos(m), "`max_rows` must be at least 1", "", "");
        }
        if let Some(m) = &s.max_bytes
            && m.value < MIN_MAX_BYTES
        {
            self.sink.error(
                pos(m),
                format!("`max_bytes` must be at least {MIN_MAX_BYTES}"),
                "too small for a row",
                "cap the rows with `max_rows` instead, or give room for at least one row",
            );
        }
    }

    /// Parameters: each comes from an argument, a derived parameter or an earlier row; the
    /// arguments used are added to `used`.
    /// A statement's text for another dialect (`postgres:`): only where the server runs on
    /// that engine, and with no parameter that its `query` does not have (the arguments are
    /// bound by name on every engine).
    pub(super) fn statement_dialects(&mut self, s: &RawStatement) {
        for (dialect, text) in s.by_dialect() {
            self.statement_dialect(s, dialect, text);
        }
    }

    pub(super) fn statement_dialect(
        &mut self,
        s: &RawStatement,
        dialect: &'static sqlscan::Dialect,
        text: &Sp<String>,
    ) {
        let key = dialect.name;
        if !self.engines.contains(&dialect) {
            self.sink.error(
                pos(text),
                format!(
                    "the statement gives `{key}:` text but the database declares no `{key}:` side"
                ),
                "",
                &format!("add `database.{key}` with its schema, or remove this text"),
            );
            return;
        }
        let known: Vec<String> = sqltext::params(&s.query.value)
            .into_iter()
            .map(|p| p.name)
            .collect();
        let refs = sqlscan::positional(&text.value).refs;
        for (name, offset) in refs.iter().filter(|(name, _)| !known.contains(name)) {
            let names: Vec<&str> = known.iter().map(String::as_str).collect();
            self.sink.error(
                self.offset_pos(text, *offset),
                format!(
                    "{} parameter `:{name}` is not a parameter of the statement's `query`",
                    dialect.title
                ),
                "not in `query`",
                &match did_you_mean(name, &names) {
                    Some(n) => format!("did you mean `:{n}`?"),
                    None => format!(
                        "both texts bind the same arguments; `query` has: {}",
                        if names.is_empty() {
                            "none".to_string()
                        } else {
                            names.join(", ")
                        }
                    ),
                },
            );
        }
    }

    pub(super) fn statement_params(
        &mut self,
        cx: &ToolScope<'_>,
        s: &RawStatement,
        used: &mut BTreeSet<String>,
        earlier: &BTreeMap<String, (Mode, BTreeSet<String>)>,
    ) {
        let (tool, props, derived, noun) = (cx.tool, cx.props, cx.derived, cx.noun);
        let mut bound = BTreeSet::new();
        for (param, source) in &s.bind {
            bound.insert(param.clone());
            let ok = source.value.split_once('.').and_then(|(stmt, col)| {
                earlier
                    .get(stmt)
                    .map(|(m, cols)| matches!(m, Mode::One | Mode::Optional) && cols.contains(col))
            });
            if ok != Some(true) {
                let names: Vec<&str> = earlier.keys().map(String::as_str).collect();
                self.sink.error(
                    pos(source),
                    format!("`bind` source `{}` is not a column of an earlier single-row statement", source.value),
                    "",
                    &format!(
                        "write `statement.column` naming an earlier `one` or `optional` statement (earlier: {})",
                        if names.is_empty() { "none".to_string() } else { names.join(", ") }
                    ),
                );
            }
        }
        let params = sqltext::params(&s.query.value);
        for p in &params {
            if bound.contains(&p.name) {
                continue;
            }
            if props.contains_key(&p.name) {
                used.insert(p.name.clone());
            } else if let Some(from) = derived.get(&p.name) {
                used.insert(from.clone());
            } else if p.name == crate::ir::ARGUMENTS_PARAM {
                // The reserved parameter binds every argument as JSON text.
                used.extend(props.keys().cloned());
            } else if p.name == crate::ir::AUTH_SUB_PARAM && noun == "input property" {
                // The caller's subject, from the access token; never an argument.
            } else if let Some(claim) = p.name.strip_prefix(crate::ir::AUTH_CLAIM_PREFIX)
                && noun == "input property"
            {
                if !self.claims.contains(claim) {
                    let declared: Vec<&str> = self.claims.iter().map(String::as_str).collect();
                    self.sink.error(
                        self.offset_pos(&s.query, p.offset),
                        format!("SQL parameter `:{}` of `{tool}` reads a claim the spec does not declare", p.name),
                        "undeclared claim",
                        &match did_you_mean(claim, &declared) {
                            Some(n) => format!("did you mean `:auth.claims.{n}`?"),
                            None => format!("declare it with its type under `server.claims`, e.g. `{claim}: string`"),
                        },
                    );
                }
            } else if let Some(rest) = p.name.strip_prefix(crate::ir::EMBEDDINGS_PREFIX)
                && noun == "input property"
            {
                self.embeddings_param(tool, s, p, rest);
            } else if crate::ir::is_page_param(&p.name) && noun == "input property" {
                // The page's, bound by the runtime: see `statement_page`.
            } else if p.name.starts_with("auth.") || p.name == crate::ir::AUTH_SUB_PARAM {
                self.sink.error(
                    self.offset_pos(&s.query, p.offset),
                    format!("SQL parameter `:{}` of `{tool}` is not the caller's identity", p.name),
                    "",
                    match noun {
                        "input property" => "a tool's statements read the caller as `:auth.sub` and its token's declared claims as `:auth.claims.NAME`",
                        _ => "only a tool's statements may read the caller; a resource's or a prompt's cannot",
                    },
                );
            } else {
                let names: Vec<&str> = props.keys().map(String::as_str).collect();
                self.sink.error(
                    self.offset_pos(&s.query, p.offset),
                    format!("SQL parameter `:{}` of `{tool}` matches no {noun}", p.name),
                    "no such argument",
                    &match did_you_mean(&p.name, &names) {
                        Some(n) => format!("did you mean `:{n}`?"),
                        None if noun == "input property" => format!("declare `{}` under `input.properties`, or bind it from an earlier statement", p.name),
                        None => format!("the {noun}s are: {}", if names.is_empty() { "none".to_string() } else { names.join(", ") }),
                    },
                );
            }
        }
        for param in &bound {
            if !params.iter().any(|p| &p.name == param) {
                self.sink.error(
                    pos(&s.bind[param]),
                    format!("`bind` names `{param}`, which the SQL never uses"),
                    "",
                    &format!("use `:{param}` in the query or remove it from `bind`"),
                );
            }
        }
    }

    /// A `:embeddings.NAME.FIELD` parameter: a declared provider and one of its fields.
    fn embeddings_param(
        &mut self,
        tool: &str,
        s: &RawStatement,
        p: &sqltext::ParamRef,
        rest: &str,
    ) {
        let (provider, field) = rest.rsplit_once('.').unwrap_or((rest, ""));
        let fields: Vec<&str> = mcpspec_def::EmbeddingsField::ALL
            .iter()
            .map(|(n, _)| *n)
            .collect();
        if !self.embeddings.contains(provider) {
            let declared: Vec<&str> = self.embeddings.iter().map(String::as_str).collect();
            self.sink.error(
                self.offset_pos(&s.query, p.offset),
                format!("SQL parameter `:{}` of `{tool}` reads a provider `embeddings:` does not declare", p.name),
                "undeclared provider",
                &match did_you_mean(provider, &declared) {
                    Some(n) => format!("did you mean `:embeddings.{n}.{field}`?"),
                    None => "declare the provider under `embeddings:`".to_string(),
                },
            );
        } else if mcpspec_def::EmbeddingsField::of(field).is_none() {
            self.sink.error(
                self.offset_pos(&s.query, p.offset),
                format!(
                    "SQL parameter `:{}` of `{tool}` reads no field of a provider",
                    p.name
                ),
                "",
                &format!("a provider's fields are {}", fields.join(", ")),
            );
        }
    }

    /// A resource's or prompt's statement: the checks of a tool statement, with `props` as the
    /// parameters it may use, and read-only.
    pub(super) fn content_statement(
        &mut self,
        owner: &str,
        st: &Sp<RawStatement>,
        props: &BTreeMap<String, Pos>,
        noun: &str,
        used: &mut BTreeSet<String>,
    ) {
        let derived = BTreeMap::new();
        let cx = ToolScope {
            tool: owner,
            composite: false,
            props,
            derived: &derived,
            noun,
        };
        self.statement(&cx, st, used, &mut BTreeMap::new());
        if st
            .value
            .returns
            .as_ref()
            .is_some_and(|r| r.value == "execute")
            || sqltext::inserts(&st.value.query.value)
        {
            self.sink.error(
                pos(st),
                format!("the statement of `{owner}` changes the database"),
                "",
                "resources and prompts only read; use a tool for writes",
            );
        }
    }

    /// A completion query: `:value` and the given names are its only parameters.
    pub(super) fn completion(&mut self, sql: &Sp<String>, names: &[String]) {
        for p in sqltext::params(&sql.value) {
            if p.name != "value" && !names.contains(&p.name) {
                self.sink.error(
                    self.offset_pos(sql, p.offset),
                    format!(
                        "completion SQL parameter `:{}` is neither `:value` nor a variable",
                        p.name
                    ),
                    "",
                    &format!(
                        "`:value` is the partial text; the others are: {}",
                        if names.is_empty() {
                            "none".to_string()
                        } else {
                            names.join(", ")
                        }
                    ),
                );
            }
        }
    }
}
