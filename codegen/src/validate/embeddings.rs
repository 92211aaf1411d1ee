//! Validation of the embedding providers (`embeddings:`) and of what uses them: each
//! provider's form, and every column that holds its vectors declared with its dimensions in
//! each schema that declares it; a derive's `embed:` naming a provider and its `from:` an
//! argument that holds text.

use super::*;
use crate::spec::{RawBackfill, RawDerive, RawEmbedding};

/// The most dimensions a provider may declare: pgvector's `vector` holds 16,000.
const MAX_DIMENSIONS: u32 = 16_000;
/// The most texts one request may carry: OpenAI's limit.
const MAX_BATCH: u32 = 2048;
/// The most retries a provider may declare.
const MAX_RETRIES: u32 = 10;

impl Validator<'_> {
    /// Every provider under `embeddings:`.
    pub(super) fn embeddings(&mut self, spec: &RawSpec) {
        for (name, e) in &spec.embeddings {
            if !is_ident(name) {
                self.sink.error(
                    pos(e),
                    format!(
                        "embedding provider `{name}` cannot be read as `:embeddings.{name}.model`"
                    ),
                    "",
                    "name a provider with letters, digits and `_`",
                );
            }
            self.embedding(spec, name, e);
        }
    }

    fn embedding(&mut self, spec: &RawSpec, name: &str, e: &Sp<RawEmbedding>) {
        let e = &e.value;
        let dims = e.dimensions.value;
        if dims == 0 || dims > MAX_DIMENSIONS {
            self.sink.error(
                pos(&e.dimensions),
                format!("`{name}` declares {dims} dimensions"),
                "",
                &format!("a vector has 1 to {MAX_DIMENSIONS} dimensions (pgvector's limit)"),
            );
        }
        self.provider(name, e);
        if let Some(k) = &e.key_env {
            self.env_name(k);
        }
        if let Some(b) = &e.batch
            && (b.value == 0 || b.value > MAX_BATCH)
        {
            self.sink.error(
                pos(b),
                format!("`batch` of `{name}` is {}", b.value),
                "",
                &format!("a request carries 1 to {MAX_BATCH} texts"),
            );
        }
        if let Some(t) = &e.timeout_ms
            && t.value == 0
        {
            self.sink
                .error(pos(t), "`timeout_ms` must be at least 1", "", "");
        }
        if let Some(r) = &e.retries
            && r.value > MAX_RETRIES
        {
            self.sink.error(
                pos(r),
                format!("`retries` of `{name}` is {}", r.value),
                "",
                &format!("a provider is tried again at most {MAX_RETRIES} times"),
            );
        }
        // Columns are held to valid dimensions only.
        if (1..=MAX_DIMENSIONS).contains(&dims) {
            for place in &e.stored_in {
                self.stored_in(spec, name, dims, place);
            }
        }
    }

    /// `provider:` is `static:DIR`, `openai:URL` (with `model`) or `env:VAR` (without).
    fn provider(&mut self, name: &str, e: &RawEmbedding) {
        let p = &e.provider;
        let help = "write `static:DIR` (a model's directory), `openai:https://api.openai.com/v1` (with `model`), or `env:VAR` (chosen when the server starts)";
        let Some((kind, rest)) = p.value.split_once(':') else {
            self.sink
                .error(pos(p), format!("`{}` is not a provider", p.value), "", help);
            return;
        };
        match kind {
            "static" | "env" if rest.trim().is_empty() => {
                self.sink
                    .error(pos(p), format!("`{}` names nothing", p.value), "", help);
            }
            "static" => {}
            "env" => self.env_name(&Sp::new(rest.to_string(), p.referenced, p.defined)),
            "openai" => {
                if !(rest.starts_with("https://") || rest.starts_with("http://")) {
                    self.sink.error(
                        pos(p),
                        format!("`{rest}` is not an http or https URL"),
                        "",
                        "write the API's base URL, e.g. `openai:https://api.openai.com/v1`",
                    );
                }
                if e.model.is_none() {
                    self.sink.error(
                        pos(p),
                        format!("`{name}` asks an HTTP provider and names no `model`"),
                        "",
                        "add `model:`, e.g. `model: text-embedding-3-small`",
                    );
                }
            }
            _ => self
                .sink
                .error(pos(p), format!("unknown provider `{kind}`"), "", help),
        }
        if kind != "openai"
            && let Some(m) = &e.model
        {
            self.sink.error(
                pos(m),
                format!("`model` applies to an `openai:` provider, and `{name}` is `{kind}:`"),
                "",
                match kind {
                    "env" => "the variable's `_MODEL` names the model the server asks for",
                    _ => "a static model is its directory",
                },
            );
        }
    }

    /// A `stored_in` column: `table.column`, declared in the spec's own schema, and with the
    /// provider's dimensions in every schema that declares it.
    fn stored_in(&mut self, spec: &RawSpec, name: &str, dims: u32, place: &Sp<String>) {
        let Some((table, column)) = place.value.rsplit_once('.') else {
            self.sink.error(
                pos(place),
                format!("`{}` is not `table.column`", place.value),
                "",
                "name the column that holds the vectors, e.g. `notes.embedding`",
            );
            return;
        };
        let Some(db) = &spec.database else {
            return;
        };
        let db = &db.value;
        // Each schema the spec gives, with the key that holds it and its dialect.
        let mut schemas: Vec<(String, &sqlscan::Dialect, &Sp<String>)> =
            vec![("database.schema".into(), &sqlscan::SQLITE, &db.schema)];
        for (dialect, side) in db.by_dialect() {
            let key = format!("database.{}.schema", dialect.name);
            schemas.push((key, dialect, &side.value.schema));
        }
        for (i, (key, dialect, schema)) in schemas.into_iter().enumerate() {
            let found = sqlscan::vectors::declared(&schema.value, table, column);
            if i == 0 && found.is_empty() {
                self.sink.error(
                    pos(place),
                    format!(
                        "`{name}` stores its vectors in {}, which {key} does not declare",
                        place.value
                    ),
                    "",
                    &format!("declare the column in the schema, e.g. `{column} F32_BLOB({dims})`"),
                );
            }
            for (ty, at) in found {
                match sqlscan::vectors::dimensions(&ty) {
                    Some(n) if n == dims => {}
                    got => self.sink.error(
                        self.offset_pos(schema, at),
                        match got {
                            Some(n) => format!(
                                "{} holds vectors of {n} dimensions in {key}, and `{name}` makes {dims}",
                                place.value
                            ),
                            None => format!(
                                "{} is `{ty}` in {key}, not a vector of {dims} dimensions",
                                place.value
                            ),
                        },
                        "",
                        &format!(
                            "declare it as {}",
                            dialect.vector_column.replace("{dims}", &dims.to_string())
                        ),
                    ),
                }
            }
        }
    }

    /// A derive's `embed:` and `needed_when:`: a declared provider, an argument of text.
    pub(super) fn derive_embedding(
        &mut self,
        spec: &RawSpec,
        tool: &RawTool,
        name: &str,
        d: &Sp<RawDerive>,
    ) {
        let raw = &d.value;
        let Some(provider) = &raw.embed else {
            if !raw.needed_when.is_empty() {
                self.sink.error(
                    pos(d),
                    format!("derived parameter `{name}` has `needed_when` and no `embed`"),
                    "",
                    "`needed_when` says when a vector is needed; add `embed: PROVIDER`",
                );
            }
            return;
        };
        if !spec.embeddings.contains_key(provider) {
            let names: Vec<&str> = spec.embeddings.keys().map(String::as_str).collect();
            self.sink.error(
                pos(d),
                format!("derived parameter `{name}` embeds with `{provider}`, which `embeddings:` does not declare"),
                "",
                &match did_you_mean(provider, &names) {
                    Some(n) => format!("did you mean `{n}`?"),
                    None => "declare the provider under `embeddings:`".to_string(),
                },
            );
        }
        let props = tool.input.as_ref().map(|i| &i.value.properties);
        for (arg, values) in &raw.needed_when {
            let Some(schema) = props.and_then(|p| p.get(arg)).map(|s| &s.value) else {
                self.sink.error(
                    pos(d),
                    format!(
                        "`needed_when` of `{name}` names `{arg}`, which is not an input property"
                    ),
                    "",
                    "name an argument whose values need the vector",
                );
                continue;
            };
            if let Some(allowed) = schema.get("enum").and_then(Value::as_array) {
                let names: Vec<&str> = allowed.iter().filter_map(Value::as_str).collect();
                for v in values {
                    if !names.contains(&v.as_str()) {
                        self.sink.error(
                            pos(d),
                            format!("`needed_when` of `{name}` gives `{arg}` the value `{v}`, which its `enum` does not allow"),
                            "",
                            &format!("`{arg}` is one of {}", names.join(", ")),
                        );
                    }
                }
            }
        }
        let root = raw.from.split("[]").next().unwrap_or(&raw.from);
        if raw.from.contains("[]")
            && let Some(schema) = props.and_then(|p| p.get(root)).map(|s| &s.value)
            && !is_array(schema)
        {
            self.sink.error(
                pos(d),
                format!(
                    "derived parameter `{name}` embeds the items of `{root}`, which is not an array"
                ),
                "",
                "`ARG[]` and `ARG[].FIELD` read an array argument",
            );
        }
    }
}

impl Validator<'_> {
    /// A tool bound to `backfill:`: no other binding, a declared provider, an integer `size`
    /// argument, and its statements (`pending` many rows of `key` and `text`, `store` an
    /// `execute`, `remaining` a scalar), each with the parameters of its place.
    pub(super) fn backfill_tool(
        &mut self,
        spec: &RawSpec,
        tool: &RawTool,
        b: &Sp<RawBackfill>,
        props: &BTreeMap<String, Pos>,
        required: &BTreeSet<String>,
    ) {
        self.backfill_settings(spec, tool, &b.value);
        self.backfill_statements(tool, &b.value, props, required);
    }

    /// What a backfill may be given beside its statements: no other binding and no `derive`, a
    /// declared provider, and an integer `size` argument.
    fn backfill_settings(&mut self, spec: &RawSpec, tool: &RawTool, raw: &RawBackfill) {
        let name = &tool.name.value;
        let others = [
            ("sql", tool.sql.as_ref().map(pos)),
            ("compose", tool.compose.as_ref().map(pos)),
        ];
        for (key, at) in others {
            if let Some(at) = at {
                self.sink.error(
                    at,
                    format!("tool `{name}` has both `backfill` and `{key}`"),
                    "",
                    "a backfill runs its own statements; drop one of them",
                );
            }
        }
        if let Some((d, _)) = tool.derive.iter().next() {
            self.sink.error(
                pos(&tool.derive[d]),
                format!("`derive` of `{name}` does not apply to a backfill"),
                "",
                "a backfill binds `:batch`, `:key`, `:text` and `:vector` itself",
            );
        }
        if !spec.embeddings.contains_key(&raw.embed.value) {
            let names: Vec<&str> = spec.embeddings.keys().map(String::as_str).collect();
            self.sink.error(
                pos(&raw.embed),
                format!(
                    "`backfill` of `{name}` embeds with `{}`, which `embeddings:` does not declare",
                    raw.embed.value
                ),
                "",
                &match did_you_mean(&raw.embed.value, &names) {
                    Some(n) => format!("did you mean `{n}`?"),
                    None => "declare the provider under `embeddings:`".to_string(),
                },
            );
        }
        if let Some(size) = &raw.size {
            let schema = tool
                .input
                .as_ref()
                .and_then(|i| i.value.properties.get(&size.value));
            if schema.is_none_or(|s| ArgType::of_schema(&s.value) != ArgType::Integer) {
                self.sink.error(
                    pos(size),
                    format!("`size` of `{name}`'s backfill names `{}`, which is not an integer argument", size.value),
                    "",
                    "name the integer argument that sets how many rows a batch takes",
                );
            }
        }
    }

    /// A backfill's statements, each with the parameters of its place, and every required
    /// property used by one of them.
    fn backfill_statements(
        &mut self,
        tool: &RawTool,
        raw: &RawBackfill,
        props: &BTreeMap<String, Pos>,
        required: &BTreeSet<String>,
    ) {
        let name = &tool.name.value;
        let mut used = BTreeSet::new();
        let derived: BTreeMap<String, String> = tool
            .derive
            .iter()
            .map(|(k, d)| (k.clone(), d.value.from.clone()))
            .collect();
        let parts: [BackfillPart<'_>; 3] = [
            ("pending", Some(&raw.pending), Mode::Many, &["batch"]),
            (
                "store",
                Some(&raw.store),
                Mode::Execute,
                &["key", "text", "vector"],
            ),
            ("remaining", raw.remaining.as_ref(), Mode::Scalar, &[]),
        ];
        for (part, st, want, own) in parts {
            let Some(st) = st else { continue };
            let mut scope = props.clone();
            for p in own {
                scope.insert((*p).to_string(), pos(st));
            }
            let cx = ToolScope {
                tool: name,
                composite: false,
                props: &scope,
                derived: &derived,
                noun: "input property",
            };
            let mut earlier = BTreeMap::new();
            self.statement(&cx, st, &mut used, &mut earlier);
            self.backfill_part(name, part, st, want);
        }
        for r in required {
            if props.contains_key(r)
                && !used.contains(r)
                && raw.size.as_ref().is_none_or(|s| &s.value != r)
            {
                self.sink.error(
                    props[r],
                    format!("required property `{r}` is never used by `{name}`'s backfill"),
                    "required but unused",
                    &format!("use `:{r}` in a statement, or drop it from `required`"),
                );
            }
        }
    }

    /// A backfill statement's mode and, for `pending`, its `key` and `text` columns.
    fn backfill_part(&mut self, tool: &str, part: &str, st: &Sp<RawStatement>, want: Mode) {
        let mode = st
            .value
            .returns
            .as_ref()
            .and_then(|r| Mode::parse(&r.value))
            .unwrap_or(Mode::Many);
        if mode != want {
            self.sink.error(
                pos(st),
                format!("`{part}` of `{tool}`'s backfill returns `{}`", mode.name()),
                "",
                &format!("a backfill's `{part}` is `returns: {}`", want.name()),
            );
        }
        if part == "pending" {
            for column in ["key", "text"] {
                if !st.value.columns.contains_key(column) {
                    self.sink.error(
                        pos(st),
                        format!("`pending` of `{tool}`'s backfill declares no column `{column}`"),
                        "",
                        "`pending` returns each row's `key` (what `store` finds it by) and `text` (what is embedded)",
                    );
                }
            }
        }
    }
}

/// A backfill statement's place: its name, the statement, its mode and its own parameters.
type BackfillPart<'a> = (&'a str, Option<&'a Sp<RawStatement>>, Mode, &'a [&'a str]);

/// Whether a property's schema is an array's (its `type` is `array`, or a list with it).
fn is_array(schema: &Value) -> bool {
    match schema.get("type") {
        Some(Value::String(t)) => t == "array",
        Some(Value::Array(types)) => types.iter().any(|t| t == "array"),
        _ => false,
    }
}
