//! Validation of a statement's `page:` (keyset pagination): where it may be, its sort columns,
//! the argument that sizes a page, and the parameters its query must bind, in every dialect,
//! so that no page can skip or repeat a row the query would return.

use super::*;
use crate::ir::{AFTER_PREFIX, PAGE_LIMIT_PARAM, PAGE_SIZE_PARAM, is_page_param};

impl Validator<'_> {
    /// A tool statement's page, when it has one, and the page parameters of one without.
    pub(super) fn statement_page(&mut self, tool: &RawTool, st: &Sp<RawStatement>, mode: Mode) {
        let s = &st.value;
        let Some(page) = &s.page else {
            self.page_params_without_page(tool, s);
            return;
        };
        let at = pos(page);
        if tool.compose.is_some() || mode != Mode::Many {
            self.sink.error(
                at,
                "`page` applies only to a tool's one `returns: many` statement",
                "",
                "page the list a tool returns; a composite's parts are not paged",
            );
            return;
        }
        self.page_by(&page.value, at);
        self.page_size(tool, s, &page.value, at);
        self.page_clashes(tool, s, at);
        let texts = std::iter::once(&s.query).chain(s.by_dialect().map(|(_, t)| t));
        for text in texts {
            self.page_query(&tool.name.value, &page.value, text);
        }
    }

    /// The sort columns: at least one, each once.
    fn page_by(&mut self, page: &crate::spec::RawPage, at: Pos) {
        if page.by.is_empty() {
            self.sink.error(
                at,
                "`page.by` names no column",
                "",
                "list the `ORDER BY` columns, ending with a unique one, e.g. `by: [created_at, id]`",
            );
        }
        let mut seen = BTreeSet::new();
        for c in &page.by {
            if !seen.insert(c.value.as_str()) {
                self.sink.error(
                    pos(c),
                    format!("`page.by` names `{}` twice", c.value),
                    "",
                    "",
                );
            }
        }
    }

    /// The size argument: an integer input property whose `maximum` a page can hold.
    fn page_size(
        &mut self,
        tool: &RawTool,
        s: &RawStatement,
        page: &crate::spec::RawPage,
        at: Pos,
    ) {
        let props = tool.input.as_ref().map(|i| &i.value.properties);
        let max_rows = s
            .max_rows
            .as_ref()
            .map_or(crate::lower::DEFAULT_MAX_ROWS, |m| m.value);
        let (name, at) = match &page.size {
            Some(z) => (z.value.as_str(), pos(z)),
            None => ("limit", at),
        };
        let Some(schema) = props.and_then(|p| p.get(name)) else {
            if page.size.is_some() {
                self.sink.error(
                    at,
                    format!("`page.size` names `{name}`, which is not an input property"),
                    "",
                    "name the integer argument that sets how many rows a page holds, or leave `size` out for pages of `max_rows` rows",
                );
            }
            return;
        };
        if ArgType::of_schema(&schema.value) != ArgType::Integer {
            self.sink.error(
                pos(schema),
                format!("`{name}` sets a page's size, so it must be an integer"),
                "",
                "give it `type: integer`",
            );
            return;
        }
        let maximum = schema.value.get("maximum").and_then(Value::as_u64);
        if maximum.is_none_or(|m| m > u64::from(max_rows)) {
            self.sink.error(
                pos(schema),
                format!("`{name}` sets a page's size, so its `maximum` must be at most `max_rows` ({max_rows})"),
                "",
                &format!("give `{name}` `maximum: {max_rows}` or less, so that a page is never cut short"),
            );
        }
    }

    /// The `cursor` argument and the `next_cursor` field are the page's.
    fn page_clashes(&mut self, tool: &RawTool, s: &RawStatement, at: Pos) {
        let cursor = mcpspec_def::CURSOR_ARGUMENT;
        if let Some(p) = tool
            .input
            .as_ref()
            .and_then(|i| i.value.properties.get(cursor))
        {
            self.sink.error(
                pos(p),
                format!("a paged tool takes its `{cursor}` argument itself"),
                "",
                "rename the input property; `page` adds `cursor` to the input schema",
            );
        }
        let next = mcpspec_def::NEXT_CURSOR_FIELD;
        let key = s.key.as_ref().map(|k| k.value.as_str());
        if key == Some(next) || s.envelope.contains_key(next) {
            self.sink.error(
                at,
                format!("`{next}` is the field a paged result gives its next cursor in"),
                "",
                "rename the key or the envelope field",
            );
        }
    }

    /// One text of a paged query binds `:after.COLUMN` for every sort column, and
    /// `:page.limit` or `:page.size`, and no other page parameter.
    fn page_query(&mut self, tool: &str, page: &crate::spec::RawPage, text: &Sp<String>) {
        let params = sqltext::params(&text.value);
        let used = |name: &str| params.iter().any(|p| p.name == name);
        let mut wanted = vec![PAGE_LIMIT_PARAM.to_string(), PAGE_SIZE_PARAM.to_string()];
        for c in &page.by {
            let name = format!("{AFTER_PREFIX}{}", c.value);
            if !wanted.contains(&name) {
                wanted.push(name);
            }
        }
        if !used(PAGE_LIMIT_PARAM) && !used(PAGE_SIZE_PARAM) {
            self.sink.error(
                pos(text),
                format!("the query of paged `{tool}` uses neither `:{PAGE_LIMIT_PARAM}` nor `:{PAGE_SIZE_PARAM}`"),
                "",
                "end the query with `LIMIT :page.limit`: a page's size and one more row, which tells whether another page follows",
            );
        }
        for name in wanted[2..].iter().filter(|n| !used(n)) {
            self.sink.error(
                pos(text),
                format!("the query of paged `{tool}` does not use `:{name}`"),
                "",
                &format!("keep only the rows after the cursor, e.g. `AND (:{name} IS NULL OR ...)`; it is NULL on the first page"),
            );
        }
        for p in params.iter().filter(|p| is_page_param(&p.name)) {
            if !wanted.contains(&p.name) {
                self.sink.error(
                    self.offset_pos(text, p.offset),
                    format!(
                        "SQL parameter `:{}` of `{tool}` is not a page parameter",
                        p.name
                    ),
                    "",
                    &format!(
                        "a paged query binds {}",
                        wanted
                            .iter()
                            .map(|w| format!("`:{w}`"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                );
            }
        }
    }

    /// A statement that does not page binds no page parameter.
    fn page_params_without_page(&mut self, tool: &RawTool, s: &RawStatement) {
        for p in sqltext::params(&s.query.value) {
            if is_page_param(&p.name) {
                self.sink.error(
                    self.offset_pos(&s.query, p.offset),
                    format!(
                        "SQL parameter `:{}` of `{}` is bound only by a paged statement",
                        p.name, tool.name.value
                    ),
                    "",
                    "declare `page: {by: [...]}` on the statement, naming its `ORDER BY` columns",
                );
            }
        }
    }
}
