//! Validation of `resources` and `prompts`: URIs and templates, their sources and uses,
//! prompt arguments, questions and messages.

use super::*;

impl Validator<'_> {
    /// Resources: names and URIs unique, one of `uri`/`uri_template`, content from a statement
    /// or a template, every variable used, completion only of variables.
    pub(super) fn resources(&mut self, spec: &RawSpec) {
        let sql = spec
            .resources
            .iter()
            .find(|r| r.value.sql.is_some() || !r.value.complete.is_empty());
        if let Some(r) = sql
            && spec.database.is_none()
        {
            self.sink.error(
                pos(r),
                "resources run SQL but the spec declares no `database`",
                "",
                "add a `database:` section",
            );
        }
        let mut names: BTreeMap<&str, Pos> = BTreeMap::new();
        let mut uris: BTreeMap<&str, Pos> = BTreeMap::new();
        for r in &spec.resources {
            let at = pos(r);
            let r = &r.value;
            self.unique_name("resource", &r.name, &mut names);
            self.resource_uri(r, at, &mut uris);
            let variables = self.resource_variables(r);
            if let Some(m) = &r.mime_type
                && !m.value.contains('/')
            {
                self.sink.error(
                    pos(m),
                    format!("invalid mime type `{}`", m.value),
                    "",
                    "write a MIME type such as `text/markdown`",
                );
            }
            self.resource_source(r, at);
            self.resource_uses(r, at, &variables);
        }
    }

    /// A resource's fixed `uri` or `uri_template`: exactly one, with a scheme, not declared
    /// twice.
    pub(super) fn resource_uri<'r>(
        &mut self,
        r: &'r RawResource,
        at: Pos,
        uris: &mut BTreeMap<&'r str, Pos>,
    ) {
        let name = &r.name;
        let uri = match (&r.uri, &r.uri_template) {
            (Some(u), None) => {
                if u.value.contains(['{', '}']) {
                    self.sink.error(
                        pos(u),
                        format!("the fixed uri of `{}` contains `{{` or `}}`", name.value),
                        "",
                        "use `uri_template` for a URI with variables",
                    );
                }
                Some(u)
            }
            (None, Some(t)) => Some(t),
            (Some(u), Some(_)) => {
                self.sink.error(
                    pos(u),
                    format!(
                        "resource `{}` has both `uri` and `uri_template`",
                        name.value
                    ),
                    "",
                    "a resource has a fixed `uri` or a `uri_template`, not both",
                );
                None
            }
            (None, None) => {
                self.sink.error(
                    at,
                    format!("resource `{}` has no `uri`", name.value),
                    "",
                    "add `uri:` for a fixed resource or `uri_template:` for one with variables",
                );
                None
            }
        };
        if let Some(u) = uri {
            if !u.value.contains("://") && !u.value.contains(':') {
                self.sink.error(
                    pos(u),
                    format!("the uri of `{}` has no scheme", name.value),
                    "",
                    "write a URI such as `app://things/{id}`",
                );
            }
            if let Some(first) = uris.insert(&u.value, pos(u)) {
                self.sink.error(
                    pos(u),
                    format!("duplicate resource uri `{}`", u.value),
                    "declared again here",
                    &format!("the first declaration is at line {}", first.line),
                );
            }
        }
    }

    /// The variables of a resource's uri template (none for a fixed uri).
    pub(super) fn resource_variables(&mut self, r: &RawResource) -> Vec<String> {
        let name = &r.name;
        match &r.uri_template {
            Some(t) if r.uri.is_none() => match crate::ir::uri_variables(&t.value) {
                Ok(v) => {
                    if v.is_empty() {
                        self.sink.error(
                            pos(t),
                            format!("the uri template of `{}` has no variables", name.value),
                            "",
                            "use `uri` for a fixed resource",
                        );
                    }
                    v
                }
                Err(why) => {
                    self.sink.error(
                        pos(t),
                        format!("invalid uri template of `{}`: {why}", name.value),
                        "",
                        "write RFC 6570 level 1 variables such as `app://things/{id}`",
                    );
                    Vec::new()
                }
            },
            _ => Vec::new(),
        }
    }

    /// Where a resource's content comes from: a handler, a blob, or SQL and a template.
    pub(super) fn resource_source(&mut self, r: &RawResource, at: Pos) {
        let name = &r.name;
        if let Some(h) = &r.handler {
            self.method_name(h, &name.value);
            for (key, other) in [
                ("sql", r.sql.as_ref().map(pos)),
                ("template", r.template.as_ref().map(pos)),
                ("blob", r.blob.as_ref().map(pos)),
            ] {
                if let Some(p) = other {
                    self.sink.error(
                        p,
                        format!("resource `{}` has both `handler` and `{key}`", name.value),
                        "",
                        "a resource's content comes from one source: `sql`/`template`, a `blob` or a Rust `handler`",
                    );
                }
            }
        } else if let Some(b) = &r.blob {
            if r.sql.is_some() || r.template.is_some() {
                self.sink.error(
                    pos(b),
                    format!(
                        "resource `{}` has both `blob` and `sql` or `template`",
                        name.value
                    ),
                    "",
                    "a resource is fixed binary content (`blob`) or made text, not both",
                );
            }
            if r.uri.is_none() {
                self.sink.error(
                    pos(b),
                    format!("the blob resource `{}` has a uri template", name.value),
                    "",
                    "give a fixed `uri`: a blob is the same for every URI",
                );
            }
            self.base64(b, "the blob of a resource");
        } else if r.sql.is_none() && r.template.is_none() {
            self.sink.error(
                at,
                format!("resource `{}` has no content", name.value),
                "",
                "add `sql:` (its result is the content, as JSON), `template:`, both, a `blob`, or a Rust `handler`",
            );
        }
    }

    /// Every variable used by the resource's SQL or template; completions only of variables.
    pub(super) fn resource_uses(&mut self, r: &RawResource, at: Pos, variables: &[String]) {
        let name = &r.name;
        let props: BTreeMap<String, Pos> = variables.iter().map(|v| (v.clone(), at)).collect();
        let mut used = BTreeSet::new();
        if let Some(st) = &r.sql {
            self.content_statement(&name.value, st, &props, "template variable", &mut used);
        }
        if let Some(t) = &r.template {
            used.extend(self.template_vars(t, "the template of a resource"));
        }
        // A handler gets every variable, so it uses them all.
        for v in variables.iter().filter(|_| r.handler.is_none()) {
            if !used.contains(v) {
                self.sink.error(
                    pos(r.uri_template.as_ref().unwrap_or(name)),
                    format!(
                        "variable `{v}` of `{}` is used by neither its SQL nor its template",
                        name.value
                    ),
                    "",
                    &format!("use `:{v}` in the query or `{{{{ {v} }}}}` in the template"),
                );
            }
        }
        for (var, sql) in &r.complete {
            if !variables.contains(var) {
                self.sink.error(
                    pos(sql),
                    format!("`complete` of `{}` names `{var}`, which is not a variable of its uri template", name.value),
                    "",
                    &match did_you_mean(var, &variables.iter().map(String::as_str).collect::<Vec<_>>()) {
                        Some(s) => format!("did you mean `{s}`?"),
                        None => "complete the `{variables}` of `uri_template`".into(),
                    },
                );
            }
            self.completion(sql, variables);
        }
    }

    /// Prompts: names unique, arguments unique, messages well formed, resources declared.
    pub(super) fn prompts(&mut self, spec: &RawSpec) {
        let mut names: BTreeMap<&str, Pos> = BTreeMap::new();
        for p in &spec.prompts {
            let at = pos(p);
            let p = &p.value;
            let name = &p.name;
            self.unique_name("prompt", name, &mut names);
            let props = self.prompt_arguments(p);
            let arg_names: Vec<String> = props.keys().cloned().collect();
            for a in &p.arguments {
                if let Some(c) = &a.value.complete {
                    self.completion(c, &arg_names);
                }
            }
            let mut used = BTreeSet::new();
            if let Some(st) = &p.sql {
                self.content_statement(&name.value, st, &props, "prompt argument", &mut used);
            }
            if p.messages.is_empty() {
                self.sink.error(
                    at,
                    format!("prompt `{}` has no messages", name.value),
                    "",
                    "add `messages:` with at least one `{role: user, text: ...}`",
                );
            }
            let asked = self.prompt_asks(p);
            for m in &p.messages {
                self.prompt_message(spec, &name.value, &m.value, &asked);
            }
        }
    }

    /// A prompt's questions: keys usable as template names, none twice and not `confirm`
    /// (the key of tool confirmations); a message; a form schema clients can show. Returns
    /// the keys.
    pub(super) fn prompt_asks(&mut self, p: &RawPrompt) -> BTreeSet<String> {
        let mut keys = BTreeSet::new();
        for a in &p.ask {
            let key = &a.value.key;
            if !is_ident(&key.value) {
                self.sink.error(
                    pos(key),
                    format!("invalid question key `{}` in prompt `{}`", key.value, p.name.value),
                    "",
                    "use letters, digits and `_`, starting with a letter, so the messages can read `answers.<key>`",
                );
            } else if key.value == "confirm" {
                self.sink.error(
                    pos(key),
                    format!(
                        "question key `confirm` in prompt `{}` is reserved",
                        p.name.value
                    ),
                    "",
                    "`confirm` is the key of a tool's confirmation; choose another name",
                );
            }
            if !keys.insert(key.value.clone()) {
                self.sink.error(
                    pos(key),
                    format!(
                        "duplicate question `{}` in prompt `{}`",
                        key.value, p.name.value
                    ),
                    "",
                    "give each question its own key",
                );
            }
            if a.value.message.value.trim().is_empty() {
                self.sink.error(
                    pos(&a.value.message),
                    format!("question `{}` has an empty message", key.value),
                    "",
                    "say what the person is asked, e.g. `message: What context should the prompt use?`",
                );
            }
            self.form_schema(&a.value.schema, &key.value);
        }
        keys
    }

    /// A question's form: what MCP elicitation allows, an object whose properties are each a
    /// string, number, integer or boolean, and whose `required` names some of them.
    pub(super) fn form_schema(&mut self, schema: &Sp<serde_json::Value>, key: &str) {
        let at = pos(schema);
        let s = &schema.value;
        let help =
            "write `schema: {type: object, properties: {name: {type: string}}, required: [name]}`";
        if s["type"] != "object" || !s["properties"].is_object() {
            self.sink.error(
                at,
                format!("the form of question `{key}` is not an object schema with `properties`"),
                "",
                help,
            );
            return;
        }
        let props = s["properties"].as_object().into_iter().flatten();
        for (name, p) in props {
            let primitive = p["type"]
                .as_str()
                .is_some_and(|t| matches!(t, "string" | "number" | "integer" | "boolean"));
            if !primitive {
                self.sink.error(
                    at,
                    format!("property `{name}` of the form of question `{key}` is not a string, number, integer or boolean"),
                    "",
                    "clients show forms of primitive fields only; split nested data into fields",
                );
            }
        }
        let required = s.get("required").map(|r| r.as_array());
        for r in required.into_iter().flatten().flatten() {
            let r = r.as_str().map_or_else(|| r.to_string(), str::to_string);
            if s["properties"].get(&r).is_none() {
                self.sink.error(
                    at,
                    format!("the form of question `{key}` requires `{r}`, which is not one of its properties"),
                    "",
                    "list only names from `properties` in `required`",
                );
            }
        }
        if matches!(required, Some(None)) {
            self.sink.error(
                at,
                format!("`required` of the form of question `{key}` is not a list"),
                "",
                help,
            );
        }
    }

    /// A prompt's arguments: names usable as SQL parameters, none twice; returns them with
    /// their positions.
    pub(super) fn prompt_arguments(&mut self, p: &RawPrompt) -> BTreeMap<String, Pos> {
        let name = &p.name;
        let mut props: BTreeMap<String, Pos> = BTreeMap::new();
        for a in &p.arguments {
            let n = &a.value.name;
            if matches!(n.value.as_str(), "data" | "answers") {
                self.sink.error(
                    pos(n),
                    format!("argument `{}` of prompt `{}` is reserved", n.value, name.value),
                    "",
                    "the messages read the statement's result as `data` and the person's answers as `answers`; rename the argument",
                );
            }
            if !is_ident(&n.value) {
                self.sink.error(
                        pos(n),
                        format!("invalid argument name `{}` in prompt `{}`", n.value, name.value),
                        "",
                        "use letters, digits and `_`, starting with a letter, so it can be an SQL parameter",
                    );
            }
            if props.insert(n.value.clone(), pos(n)).is_some() {
                self.sink.error(
                    pos(n),
                    format!(
                        "duplicate argument `{}` in prompt `{}`",
                        n.value, name.value
                    ),
                    "",
                    "give each argument its own name",
                );
            }
        }
        props
    }

    /// One prompt message: a known role, and exactly one of text, a declared resource, or an
    /// image with its type.
    pub(super) fn prompt_message(
        &mut self,
        spec: &RawSpec,
        prompt: &str,
        m: &RawMessage,
        asked: &BTreeSet<String>,
    ) {
        if !matches!(m.role.value.as_str(), "user" | "assistant") {
            self.sink.error(
                pos(&m.role),
                format!("unknown message role `{}`", m.role.value),
                "",
                "use `user` or `assistant`",
            );
        }
        if let Some(i) = &m.image {
            if m.text.is_some() || m.resource.is_some() {
                self.sink.error(
                    pos(i),
                    "a prompt message has `image` and also `text` or `resource`",
                    "",
                    "split it into two messages",
                );
            }
            self.base64(i, "the image of a prompt message");
            if m.mime_type
                .as_ref()
                .is_none_or(|t| !t.value.starts_with("image/"))
            {
                self.sink.error(
                    pos(i),
                    "an image message has no image `mime_type`",
                    "",
                    "add `mime_type: image/png` (or the image's type)",
                );
            }
            return;
        }
        if let Some(t) = &m.mime_type {
            self.sink.error(
                pos(t),
                "`mime_type` of a prompt message applies only to `image`",
                "",
                "remove it; a text message is text and a resource has its own type",
            );
        }
        match (&m.text, &m.resource) {
            (Some(t), None) => {
                self.template_vars(t, "a prompt message");
                self.answers_read(t, prompt, asked);
            }
            (None, Some(r)) => {
                self.template_vars(r, "the resource of a prompt message");
                if !resource_declared(&spec.resources, &r.value) {
                    self.sink.error(
                                pos(r),
                                format!("the message resource `{}` of `{}` names no declared resource", r.value, prompt),
                                "",
                                "use the `uri` of a resource, or fill a `uri_template` (with `{{ argument }}` where needed)",
                            );
                }
            }
            (Some(t), Some(_)) => self.sink.error(
                pos(t),
                "a prompt message has both `text` and `resource`",
                "",
                "split it into two messages",
            ),
            (None, None) => self.sink.error(
                pos(&m.role),
                "a prompt message has neither `text` nor `resource`",
                "",
                "add `text:`, `resource:` or `image:`",
            ),
        }
    }

    /// Each `answers.<key>` a message reads names a question of its prompt.
    pub(super) fn answers_read(&mut self, t: &Sp<String>, prompt: &str, asked: &BTreeSet<String>) {
        let env = minijinja::Environment::new();
        let Ok(tmpl) = env.template_from_str(&t.value) else {
            return;
        };
        for var in tmpl.undeclared_variables(true) {
            let mut path = var.split('.');
            let (Some("answers"), Some(key)) = (path.next(), path.next()) else {
                continue;
            };
            if !asked.contains(key) {
                self.sink.error(
                    pos(t),
                    format!("a message of prompt `{prompt}` reads `answers.{key}`, but the prompt asks no question `{key}`"),
                    "",
                    "add it under the prompt's `ask:`, or read one of the keys it asks",
                );
            }
        }
    }
}
