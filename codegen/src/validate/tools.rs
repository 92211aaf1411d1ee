//! Validation of `tools`: names, input schemas and their defaults and headers, confirmation,
//! parameters, and each kind of binding (SQL, handler, content).

use super::*;

impl Validator<'_> {
    pub(super) fn tools(&mut self, spec: &RawSpec) {
        if spec.tools.is_empty() {
            self.sink.error(
                pos(&spec.server),
                "the spec declares no tools",
                "",
                "add at least one entry under `tools:`",
            );
        }
        let mut seen: BTreeMap<&str, Pos> = BTreeMap::new();
        for tool in &spec.tools {
            let name = &tool.value.name;
            if let Some(first) = seen.get(name.value.as_str()) {
                self.sink.error(
                    pos(name),
                    format!("duplicate tool name `{}`", name.value),
                    "declared again here",
                    &format!(
                        "the first declaration is at line {}; rename one",
                        first.line
                    ),
                );
            } else {
                seen.insert(&name.value, pos(name));
            }
            self.tool(spec, &tool.value, pos(tool));
        }
    }

    pub(super) fn tool(&mut self, spec: &RawSpec, tool: &RawTool, at: Pos) {
        self.tool_head(tool);
        let (props, required) = self.tool_input(tool);
        self.tool_confirm(tool);
        if let Some(app) = &tool.app {
            self.app(tool, app);
        }
        for icon in &tool.icons {
            self.icon(&icon.value);
        }
        if let Some(h) = &tool.handler {
            if let Some(c) = &tool.content {
                self.sink.error(
                    pos(c),
                    format!(
                        "tool `{}` has both `handler` and `content`",
                        tool.name.value
                    ),
                    "",
                    "a handler returns its content with `output: content`; drop one of them",
                );
            }
            self.handler_tool(tool, h, at);
            return;
        }
        if let Some(c) = &tool.content {
            self.content_tool(tool, c);
            return;
        }
        if let Some(o) = &tool.output {
            self.sink.error(
                pos(o),
                format!(
                    "`output` of `{}` applies only to handler tools",
                    tool.name.value
                ),
                "",
                "a SQL tool's output schema comes from its `columns`",
            );
        }
        if let Some(b) = &tool.backfill {
            self.tool_parameters(spec, tool, &props);
            self.backfill_tool(spec, tool, b, &props, &required);
            return;
        }
        let Some(statements) = self.tool_statements(tool, at) else {
            return;
        };
        self.tool_parameters(spec, tool, &props);
        self.sql_tool(tool, &props, &required, statements);
    }

    /// The tool's name and description.
    pub(super) fn tool_head(&mut self, tool: &RawTool) {
        let name = &tool.name;
        if !valid_name(&name.value, 128) {
            self.sink.error(
                pos(name),
                format!("invalid tool name `{}`", name.value),
                "not a tool name",
                "MCP tool names use 1 to 128 of A-Z, a-z, 0-9, `_`, `-` and `.`",
            );
        }
        if tool.description.value.trim().is_empty() {
            self.sink.error(
                pos(&tool.description),
                format!("tool `{}` has an empty description", name.value),
                "",
                "say what the tool does and when a model should call it",
            );
        }
    }

    /// The input schema's top level and each property; returns the properties (with their
    /// positions) and the required ones.
    pub(super) fn tool_input(
        &mut self,
        tool: &RawTool,
    ) -> (BTreeMap<String, Pos>, BTreeSet<String>) {
        let name = &tool.name;
        let mut props: BTreeMap<String, Pos> = BTreeMap::new();
        let mut required: BTreeSet<String> = BTreeSet::new();
        if let Some(input) = &tool.input {
            let input = &input.value;
            if let Some(ty) = &input.ty
                && ty.value != "object"
            {
                self.sink.error(
                    pos(ty),
                    format!(
                        "the input schema of `{}` must have type `object`",
                        name.value
                    ),
                    "",
                    "MCP tool arguments are always an object",
                );
            }
            for (pname, schema) in &input.properties {
                props.insert(pname.clone(), pos(schema));
                self.property(&name.value, pname, schema, &input.defs);
            }
            self.header_params(&name.value, input);
            for r in &input.required {
                if !input.properties.contains_key(&r.value) {
                    let names: Vec<&str> = input.properties.keys().map(String::as_str).collect();
                    self.sink.error(
                        pos(r),
                        format!("required property `{}` is not declared", r.value),
                        "not in `properties`",
                        &match did_you_mean(&r.value, &names) {
                            Some(s) => format!("did you mean `{s}`?"),
                            None => "declare it under `properties` or remove it".into(),
                        },
                    );
                }
                required.insert(r.value.clone());
            }
            for r in &input.required_any {
                if !input.properties.contains_key(&r.value) {
                    self.sink.error(
                        pos(r),
                        format!("`requiredAny` names `{}`, which is not declared", r.value),
                        "not in `properties`",
                        "list properties declared under `properties`",
                    );
                }
            }
            if input.required_any.len() == 1 {
                self.sink.error(
                    pos(&input.required_any[0]),
                    "`requiredAny` lists a single property",
                    "",
                    "list two or more, or put the property under `required`",
                );
            }
            for (key, value) in [("then", &input.then), ("else", &input.else_)] {
                if let (Some(v), None) = (value, &input.if_) {
                    self.sink.error(
                        pos(v),
                        format!("`{key}` without `if` has no effect"),
                        "never applied",
                        "add the `if` subschema that selects it, or move these rules under `allOf`",
                    );
                }
            }
        }

        (props, required)
    }

    /// The confirmation rule: a boolean input property and a message template.
    pub(super) fn tool_confirm(&mut self, tool: &RawTool) {
        let name = &tool.name;
        if let Some(c) = &tool.confirm {
            let arg = &c.value.argument;
            match tool
                .input
                .as_ref()
                .and_then(|i| i.value.properties.get(&arg.value))
            {
                None => self.sink.error(
                    pos(arg),
                    format!(
                        "the confirmation argument `{}` of `{}` is not an input property",
                        arg.value, name.value
                    ),
                    "not in `properties`",
                    "declare it as `{type: boolean}` under `input.properties`",
                ),
                Some(p) if p.value.get("type") != Some(&Value::from("boolean")) => self.sink.error(
                    pos(arg),
                    format!(
                        "the confirmation argument `{}` of `{}` is not a boolean",
                        arg.value, name.value
                    ),
                    "",
                    "give it `type: boolean`",
                ),
                Some(_) => {}
            }
            self.template(&c.value.message, "the confirmation message");
        }
    }

    /// A SQL tool's statements: exactly one of `sql` and `compose`; `None` when neither or
    /// both are there (reported).
    pub(super) fn tool_statements<'t>(
        &mut self,
        tool: &'t RawTool,
        at: Pos,
    ) -> Option<Vec<&'t Sp<RawStatement>>> {
        let name = &tool.name;
        Some(match (&tool.sql, &tool.compose) {
            (Some(s), None) => vec![s],
            (None, Some(c)) => {
                if c.value.is_empty() {
                    self.sink.error(
                        pos(c),
                        "`compose` lists no statements",
                        "",
                        "add the named statements whose results form the fields of the result",
                    );
                }
                c.value.iter().collect()
            }
            (Some(s), Some(_)) => {
                self.sink.error(
                    pos(s),
                    format!("tool `{}` has both `sql` and `compose`", name.value),
                    "",
                    "a tool binds to one statement (`sql`) or to several (`compose`), not both",
                );
                return None;
            }
            (None, None) => {
                self.sink.error(
                    at,
                    format!("tool `{}` has no binding", name.value),
                    "",
                    "add `sql:` with a `query`, `compose:` with named statements, `content:` with fixed blocks, or `handler:` with a Rust method",
                );
                return None;
            }
        })
    }

    /// Transforms, derived parameters, environment defaults and the timeout of a SQL tool.
    pub(super) fn tool_parameters(
        &mut self,
        spec: &RawSpec,
        tool: &RawTool,
        props: &BTreeMap<String, Pos>,
    ) {
        for (arg, list) in &tool.transform {
            if !props.contains_key(arg) {
                self.sink.error(
                    pos(list),
                    format!("`transform` names `{arg}`, which is not an input property"),
                    "",
                    "transform declared arguments only",
                );
            }
            self.check_transforms(arg, list, &list.value);
        }
        for (name, d) in &tool.derive {
            if props.contains_key(name) {
                self.sink.error(
                    pos(d),
                    format!("derived parameter `{name}` has the name of an argument"),
                    "",
                    "rename it",
                );
            }
            let from = d.value.from.split("[]").next().unwrap_or(&d.value.from);
            if !props.contains_key(from) {
                self.sink.error(
                    pos(d),
                    format!("derived parameter `{name}` comes from `{}`, which is not an input property", d.value.from),
                    "",
                    "derive from a declared argument",
                );
            }
            self.check_transforms(name, d, &d.value.transform);
            self.derive_embedding(spec, tool, name, d);
        }
        for (arg, var) in &tool.env_defaults {
            if !props.contains_key(arg) {
                self.sink.error(
                    pos(var),
                    format!("`env_defaults` names `{arg}`, which is not an input property"),
                    "",
                    "",
                );
            }
        }
        if let Some(t) = &tool.timeout_ms
            && t.value == 0
        {
            self.sink
                .error(pos(t), "`timeout_ms` must be at least 1", "", "");
        }
        self.tool_max_bytes(tool);
        if let Some(t) = &tool.task
            && !matches!(t.value.as_str(), "optional" | "required")
        {
            self.sink.error(
                pos(t),
                format!("unknown task support `{}`", t.value),
                "not a task support",
                "use `optional` (a task when the client can take one) or `required` (only as a task)",
            );
        }
    }

    /// A tool's `app:`: the built-in `table` or an HTML file, over a structured result. The
    /// file itself is read (and refused) by `compile_in` (crate::apps).
    fn app(&mut self, tool: &RawTool, app: &Sp<crate::spec::RawApp>) {
        if let crate::spec::RawApp::Builtin(name) = &app.value
            && name != "table"
        {
            self.sink.error(
                pos(app),
                format!("unknown app `{name}`"),
                "not an app",
                "use `table`, the built-in view of the structured result, or `{html: FILE}`, a view of your own",
            );
        }
        let content_only = tool.content.is_some()
            || tool
                .output
                .as_ref()
                .is_some_and(|o| o.value.as_str() == Some("content"));
        if content_only {
            self.sink.error(
                pos(app),
                format!(
                    "an app shows a structured result, and `{}` returns content blocks",
                    tool.name.value
                ),
                "",
                "remove `app:`, or give the tool a structured result (`sql:`, or `output:` a schema)",
            );
        }
    }

    /// An icon: an `https:` or `data:image/` source, an image MIME type, sizes a client can
    /// read and a theme it knows.
    fn icon(&mut self, icon: &crate::spec::RawIcon) {
        let src = &icon.src.value;
        if !(src.starts_with("https://") || src.starts_with("data:image/")) {
            self.sink.error(
                pos(&icon.src),
                "an icon's `src` is neither an `https:` URL nor a `data:image/` URI",
                "not an icon source",
                "give an `https://...` URL, or the image inline as `data:image/png;base64,...`",
            );
        }
        if let Some(m) = &icon.mime_type
            && !m.value.starts_with("image/")
        {
            self.sink.error(
                pos(m),
                format!("`{}` is not an image type", m.value),
                "",
                "use the image's type, such as `image/png` or `image/svg+xml`",
            );
        }
        for size in &icon.sizes {
            let wxh = size.value.split_once('x').is_some_and(|(w, h)| {
                [w, h]
                    .iter()
                    .all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            });
            if !(wxh || size.value == "any") {
                self.sink.error(
                    pos(size),
                    format!("icon size `{}` is neither `WxH` nor `any`", size.value),
                    "",
                    "write a size as `48x48`, or `any` for a scalable image",
                );
            }
        }
        if let Some(t) = &icon.theme
            && !["light", "dark"].contains(&t.value.as_str())
        {
            self.sink.error(
                pos(t),
                format!("unknown icon theme `{}`", t.value),
                "",
                "use `light` or `dark`, or leave `theme` out for an icon drawn for any",
            );
        }
    }

    /// A SQL tool's statements, and every required property used by one of them.
    pub(super) fn sql_tool(
        &mut self,
        tool: &RawTool,
        props: &BTreeMap<String, Pos>,
        required: &BTreeSet<String>,
        statements: Vec<&Sp<RawStatement>>,
    ) {
        let name = &tool.name;
        let composite = tool.compose.is_some();
        let mut used: BTreeSet<String> = BTreeSet::new();
        // A derived parameter counts as a use of the argument it comes from.
        let derived: BTreeMap<String, String> = tool
            .derive
            .iter()
            .map(|(k, d)| (k.clone(), d.value.from.clone()))
            .collect();
        let mut earlier: BTreeMap<String, (Mode, BTreeSet<String>)> = BTreeMap::new();
        for st in statements {
            let cx = ToolScope {
                tool: &name.value,
                composite,
                props,
                derived: &derived,
                noun: "input property",
            };
            self.statement(&cx, st, &mut used, &mut earlier);
            let mode = st
                .value
                .returns
                .as_ref()
                .and_then(|r| Mode::parse(&r.value));
            self.statement_page(tool, st, mode.unwrap_or(Mode::Many));
        }
        // The confirmation's argument is the runtime's to check, not the SQL's to read.
        if let Some(c) = &tool.confirm {
            used.insert(c.value.argument.value.clone());
        }
        for r in required {
            if props.contains_key(r) && !used.contains(r) {
                self.sink.error(
                    props[r],
                    format!(
                        "required property `{r}` is never used by the SQL of `{}`",
                        name.value
                    ),
                    "required but unused",
                    &format!("use `:{r}` in a statement, or drop it from `required`"),
                );
            }
        }
    }

    /// A tool bound to a Rust handler: a method name, an object output schema, nothing of SQL.
    pub(super) fn handler_tool(&mut self, tool: &RawTool, h: &Sp<String>, at: Pos) {
        let name = &tool.name.value;
        self.method_name(h, name);
        if let Some(s) = &tool.sql {
            self.sink.error(
                pos(s),
                format!("tool `{name}` has both `handler` and `sql`"),
                "",
                "a tool binds to SQL or to a Rust handler, not both",
            );
        }
        if let Some(c) = &tool.compose {
            self.sink.error(
                pos(c),
                format!("tool `{name}` has both `handler` and `compose`"),
                "",
                "a tool binds to SQL or to a Rust handler, not both",
            );
        }
        if let Some((d, _)) = tool.derive.iter().next() {
            self.sink.error(
                pos(&tool.derive[d]),
                format!("`derive` of `{name}` applies only to SQL tools"),
                "",
                "compute the value in the handler",
            );
        }
        match &tool.output {
            None => self.sink.error(
                at,
                format!("handler tool `{name}` declares no `output`"),
                "",
                "add `output:` with the JSON Schema object of the result; it is the tool's outputSchema and the handler's typed output",
            ),
            Some(o) if o.value.is_string() => {
                if o.value != "content" {
                    self.sink.error(
                        pos(o),
                        format!("unknown output `{}` of `{name}`", o.value.as_str().unwrap_or_default()),
                        "",
                        "write `output: content` for MCP content blocks, or the JSON Schema object of a structured result",
                    );
                }
            }
            Some(o) => {
                let ok = o.value.get("type") == Some(&Value::from("object"))
                    && o.value.get("properties").is_some_and(Value::is_object);
                if !ok {
                    self.sink.error(
                        pos(o),
                        format!("the output of `{name}` is not an object schema with `properties`"),
                        "",
                        "write `output: {type: object, properties: {...}, required: [...]}`",
                    );
                }
            }
        }
    }

    /// A handler's method name: a snake_case Rust identifier that is not a keyword.
    pub(super) fn method_name(&mut self, h: &Sp<String>, owner: &str) {
        let ident = !h.value.is_empty()
            && h.value
                .starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
            && h.value
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        if !ident || syn_keyword(&h.value) {
            self.sink.error(
                pos(h),
                format!(
                    "handler `{}` of `{owner}` is not a Rust method name",
                    h.value
                ),
                "",
                "use snake_case: lowercase letters, digits and `_`, e.g. `db_list`",
            );
        }
    }

    /// A tool bound to fixed content blocks: each block well formed, nothing of SQL.
    pub(super) fn content_tool(&mut self, tool: &RawTool, blocks: &Sp<Vec<Sp<RawBlock>>>) {
        let name = &tool.name.value;
        for (key, at) in [
            ("sql", tool.sql.as_ref().map(pos)),
            ("compose", tool.compose.as_ref().map(pos)),
            ("output", tool.output.as_ref().map(pos)),
        ] {
            if let Some(at) = at {
                self.sink.error(
                    at,
                    format!("tool `{name}` has both `content` and `{key}`"),
                    "",
                    "a content tool's result is its blocks; remove the other binding",
                );
            }
        }
        if blocks.value.is_empty() {
            self.sink.error(
                pos(blocks),
                format!("`content` of `{name}` lists no blocks"),
                "",
                "add blocks such as `{type: text, text: ...}`",
            );
        }
        for b in &blocks.value {
            let at = pos(b);
            let b = &b.value;
            let (text, data, mime, uri) = match b.ty.value.as_str() {
                "text" => (true, false, false, false),
                "image" | "audio" => (false, true, true, false),
                "resource" => (true, false, true, true),
                other => {
                    self.sink.error(
                        pos(&b.ty),
                        format!("unknown content block type `{other}`"),
                        "",
                        "use `text`, `image`, `audio` or `resource`",
                    );
                    continue;
                }
            };
            let ty = &b.ty.value;
            for (key, wanted, given) in [
                ("text", text, b.text.as_ref().map(pos)),
                ("data", data, b.data.as_ref().map(pos)),
                ("mime_type", mime, b.mime_type.as_ref().map(pos)),
                ("uri", uri, b.uri.as_ref().map(pos)),
            ] {
                match (wanted, given) {
                    (true, None) => self.sink.error(
                        at,
                        format!("a `{ty}` block of `{name}` has no `{key}`"),
                        "",
                        &format!("add `{key}:`"),
                    ),
                    (false, Some(p)) => self.sink.error(
                        p,
                        format!("`{key}` does not apply to a `{ty}` block"),
                        "",
                        "remove it",
                    ),
                    _ => {}
                }
            }
            if let Some(t) = &b.text {
                self.template(t, "the text of a content block");
            }
            if let Some(u) = &b.uri {
                self.template(u, "the uri of a content block");
            }
            if let Some(d) = &b.data {
                self.base64(d, "the data of a content block");
            }
            if let Some(m) = &b.mime_type
                && !m.value.contains('/')
            {
                self.sink.error(
                    pos(m),
                    format!("invalid mime type `{}`", m.value),
                    "",
                    "write a MIME type such as `image/png`",
                );
            }
        }
    }

    pub(super) fn check_transforms<T>(&mut self, arg: &str, at: &Sp<T>, list: &[String]) {
        for t in list {
            let known = crate::ir::TRANSFORMS.iter().any(|k| {
                if let Some(prefix) = k.strip_suffix(':') {
                    t.strip_prefix(prefix)
                        .and_then(|r| r.strip_prefix(':'))
                        .is_some_and(|n| n.parse::<usize>().is_ok_and(|n| n > 0))
                } else {
                    t == k
                }
            });
            if !known {
                self.sink.error(
                    pos(at),
                    format!("unknown transform `{t}` for `{arg}`"),
                    "",
                    "use trim, lower, words, fts5, fts5_prefix or truncate:N",
                );
            }
        }
    }

    /// `x-mcp-header` (SEP-2243): a top-level string, integer or boolean property whose value
    /// a client of protocol 2026-07-28 mirrors into an `Mcp-Param-NAME` HTTP header, NAME an
    /// HTTP token unique in the tool regardless of case. Clients drop a tool whose annotation
    /// breaks these rules, so each is a build error here.
    pub(super) fn header_params(&mut self, tool: &str, input: &crate::spec::RawInput) {
        let mut seen: BTreeMap<String, &str> = BTreeMap::new();
        for (pname, schema) in &input.properties {
            let at = pos(schema);
            if let Some(obj) = schema.value.as_object()
                && obj.values().any(holds_header)
            {
                self.sink.error(
                    at,
                    format!("`x-mcp-header` below property `{pname}` of `{tool}`"),
                    "not a top-level property",
                    "put `x-mcp-header` on a property directly under `input.properties`",
                );
            }
            let Some(header) = schema.value.get(HEADER_KEY) else {
                continue;
            };
            let Some(header) = header.as_str().filter(|h| !h.is_empty()) else {
                self.sink.error(
                    at,
                    format!("the `x-mcp-header` of `{pname}` in `{tool}` is not a header name"),
                    "",
                    "give a non-empty name such as `Region`; clients send it as `Mcp-Param-Region`",
                );
                continue;
            };
            if !header.chars().all(is_token_char) {
                self.sink.error(
                    at,
                    format!("the `x-mcp-header` `{header}` of `{pname}` in `{tool}` is not an HTTP token"),
                    "",
                    "use ASCII letters, digits and ! # $ % & ' * + - . ^ _ ` | ~ only (no spaces or colons)",
                );
            }
            let ty = schema.value.get("type").and_then(Value::as_str);
            if !matches!(ty, Some("string" | "integer" | "boolean")) {
                self.sink.error(
                    at,
                    format!("`x-mcp-header` on `{pname}` of `{tool}`, which is not a string, integer or boolean"),
                    "",
                    "mirror a string, integer or boolean argument; a number's text is not exact, and objects and arrays have none",
                );
            }
            if let Some(other) = seen.insert(header.to_ascii_lowercase(), pname) {
                self.sink.error(
                    at,
                    format!(
                        "`{pname}` and `{other}` of `{tool}` both use `x-mcp-header` `{header}`"
                    ),
                    "",
                    "header names are compared without case; give each property its own",
                );
            }
        }
        let elsewhere = input.defs.values().chain(
            input
                .composition()
                .into_iter()
                .filter_map(|(_, v)| v.as_ref()),
        );
        for v in elsewhere.filter(|v| holds_header(&v.value)) {
            self.sink.error(
                pos(v),
                format!("`x-mcp-header` in `$defs` or a combinator of `{tool}`"),
                "not a top-level property",
                "put `x-mcp-header` on a property directly under `input.properties`",
            );
        }
    }

    pub(super) fn property(
        &mut self,
        tool: &str,
        pname: &str,
        schema: &Sp<Value>,
        defs: &BTreeMap<String, Sp<Value>>,
    ) {
        let at = pos(schema);
        let Some(obj) = schema.value.as_object() else {
            self.sink.error(
                at,
                format!("property `{pname}` of `{tool}` is not a JSON Schema object"),
                "",
                "write the property as a mapping such as `{type: string}`",
            );
            return;
        };
        let scalar = |t: &str| {
            matches!(
                t,
                "string" | "integer" | "number" | "boolean" | "array" | "object"
            )
        };
        match obj.get("type") {
            Some(Value::String(t)) if scalar(t) => {}
            // A union of types (such as `[string, null]` or `[boolean, integer, string]`)
            // decodes as a JSON value in the typed arguments.
            Some(Value::Array(ts))
                if ts.len() >= 2
                    && ts
                        .iter()
                        .all(|t| t.as_str().is_some_and(|t| t == "null" || scalar(t)))
                    && ts.iter().filter_map(Value::as_str).any(scalar) => {}
            Some(other) => self.sink.error(
                at,
                format!("property `{pname}` of `{tool}` has unsupported type {other}"),
                "",
                "use one of string, integer, number, boolean, array, object",
            ),
            // A reference to a declared `$defs` entry takes that entry's type.
            None if obj
                .get("$ref")
                .and_then(Value::as_str)
                .and_then(|r| r.strip_prefix("#/$defs/"))
                .is_some_and(|d| defs.contains_key(d)) => {}
            None => self.sink.error(
                at,
                format!("property `{pname}` of `{tool}` has no `type`"),
                "",
                "give every argument a type so clients and the typed arguments agree",
            ),
        }
        if let Some(default) = obj.get("default")
            && let Some(problem) = default_problem(&schema.value, default)
        {
            self.sink.error(
                at,
                format!("the default of `{pname}` in `{tool}` violates its own schema: {problem}"),
                "",
                "change the default or the constraint so they agree",
            );
        }
        if let Some(p) = obj.get("pattern").and_then(Value::as_str)
            && p.is_empty()
        {
            self.sink.error(
                at,
                format!("property `{pname}` has an empty pattern"),
                "",
                "remove it",
            );
        }
    }

    /// A tool's own `max_bytes`: a handler's, of room for a row at least.
    fn tool_max_bytes(&mut self, tool: &RawTool) {
        let Some(m) = &tool.max_bytes else {
            return;
        };
        if tool.handler.is_none() {
            self.sink.error(
                pos(m),
                "a tool's own `max_bytes` caps a Rust handler's result",
                "",
                "a SQL tool sets `max_bytes` under `sql:`, beside `max_rows`",
            );
        }
        if m.value < super::statements::MIN_MAX_BYTES {
            self.sink.error(
                pos(m),
                format!(
                    "`max_bytes` must be at least {}",
                    super::statements::MIN_MAX_BYTES
                ),
                "too small for a row",
                "give room for at least one row",
            );
        }
    }
}
