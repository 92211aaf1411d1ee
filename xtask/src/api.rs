//! The public API of a library crate, listed from its sources: every item a user of the crate
//! can name (in a module that is public all the way down, itself `pub`), one line each, with
//! the signature of functions and methods, the fields and variants of types, the trait
//! implementations of public types and the crate's exported macros. The runtime's listing is
//! committed (`server/runtime/public-api.txt`) and `cargo xtask check` fails when the sources
//! say otherwise, so that a change to what users can depend on is a deliberate one.
//!
//! A reading of the syntax, not the compiler's resolution (which `cargo public-api` gets from
//! rustdoc's JSON, on a nightly toolchain this repository's CI does not have): a `pub use` is
//! listed as written, not followed; an item public inside a private module is left out even
//! when a `pub use` elsewhere exports it (the `pub use` line shows it). Items under
//! `#[cfg(test)]` are left out; `#[doc(hidden)]` and `#[cfg(...)]` are shown on the line. What
//! is `#[doc(hidden)]`, or inside a module that is, is the crate's exports for its own
//! workspace and its generated code, outside the semver promise: marked on every line and
//! counted apart.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};
use syn::{Attribute, ImplItem, Item, TraitItem, Visibility};

/// The listing, and its counts for the summary line.
#[derive(Debug, Default)]
pub struct Api {
    pub lines: Vec<String>,
    pub modules: usize,
    pub items: usize,
    pub methods: usize,
    /// The modules, items and methods `#[doc(hidden)]` (themselves or a module above them).
    pub hidden: usize,
}

impl Api {
    /// The listing as the committed file holds it: a header, the counts, then the sorted lines.
    pub fn render(&self, crate_name: &str, command: &str) -> String {
        let mut out = format!(
            "# The public API of `{crate_name}`, listed from its sources by `{command}` \
             (xtask/src/api.rs): do not edit.\n# {} public modules, {} items, {} methods \
             and associated functions; {} more hidden (`#[doc(hidden)]`: the workspace's \
             own, outside the semver promise).\n",
            self.modules, self.items, self.methods, self.hidden
        );
        for l in &self.lines {
            out.push_str(l);
            out.push('\n');
        }
        out
    }
}

/// The public API of the crate whose root is `lib` (its `src/lib.rs`), named `crate_name`.
pub fn list(lib: &Path, crate_name: &str) -> Result<Api> {
    let mut api = Api::default();
    let dir = lib.parent().context("a crate root in a directory")?;
    module(&mut api, lib, dir, crate_name)?;
    api.lines.sort();
    api.lines.dedup();
    Ok(api)
}

/// Lists the public items of the module in `file`, whose child modules' files are in `dir`.
fn module(api: &mut Api, file: &Path, dir: &Path, path: &str) -> Result<()> {
    let text = std::fs::read_to_string(file).with_context(|| file.display().to_string())?;
    let parsed = syn::parse_file(&text).with_context(|| file.display().to_string())?;
    items(api, &parsed.items, dir, path)
}

fn items(api: &mut Api, list: &[Item], dir: &Path, path: &str) -> Result<()> {
    for item in list {
        if is_test(attrs_of(item)) {
            continue;
        }
        match item {
            Item::Mod(m) if public(&m.vis) => {
                let inner = format!("{path}::{}", m.ident);
                let before = (api.lines.len(), api.modules, api.items, api.methods);
                api.modules += 1;
                api.lines
                    .push(format!("{}pub mod {inner}", marks(&m.attrs)));
                let child_dir = dir.join(m.ident.to_string());
                match &m.content {
                    Some((_, nested)) => items(api, nested, &child_dir, &inner)?,
                    None => {
                        let file = module_file(dir, &m.ident.to_string())?;
                        let below = if file.ends_with("mod.rs") {
                            file.parent().map(Path::to_path_buf).unwrap_or_default()
                        } else {
                            child_dir
                        };
                        module(api, &file, &below, &inner)?;
                    }
                }
                if hidden(&m.attrs) {
                    hide_since(api, before);
                }
            }
            Item::Impl(i) => implementation(api, i, path),
            Item::Macro(m) if exported(&m.attrs) => {
                let name = m
                    .ident
                    .as_ref()
                    .map(ToString::to_string)
                    .unwrap_or_default();
                let root = path.split("::").next().unwrap_or(path);
                api.items += 1;
                api.lines
                    .push(format!("{}pub macro {root}::{name}!", marks(&m.attrs)));
            }
            other => {
                if let Some(line) = declaration(other, path) {
                    let before = (api.lines.len(), api.modules, api.items, api.methods);
                    api.items += 1;
                    api.lines.push(line);
                    let more = members(other, path, api);
                    api.lines.extend(more);
                    if hidden(attrs_of(other)) {
                        hide_since(api, before);
                    }
                }
            }
        }
    }
    Ok(())
}

/// Counts what was listed since `before` (the lines, modules, items and methods then) as
/// hidden, and marks each of its lines so.
fn hide_since(api: &mut Api, before: (usize, usize, usize, usize)) {
    let (lines, modules, items, methods) = before;
    api.hidden += (api.modules - modules) + (api.items - items) + (api.methods - methods);
    (api.modules, api.items, api.methods) = (modules, items, methods);
    for line in &mut api.lines[lines..] {
        if !line.starts_with(HIDDEN) {
            line.insert_str(0, HIDDEN);
        }
    }
}

const HIDDEN: &str = "#[doc(hidden)] ";

fn hidden(attrs: &[Attribute]) -> bool {
    attrs
        .iter()
        .any(|a| tokens(a).replace(' ', "") == "#[doc(hidden)]")
}

/// The file of module `name` declared in a module whose children are in `dir`.
fn module_file(dir: &Path, name: &str) -> Result<PathBuf> {
    let flat = dir.join(format!("{name}.rs"));
    let nested = dir.join(name).join("mod.rs");
    [flat, nested]
        .into_iter()
        .find(|p| p.is_file())
        .with_context(|| format!("no file for module `{name}` in {}", dir.display()))
}

/// The line of a public item other than a module, an impl or a macro.
fn declaration(item: &Item, path: &str) -> Option<String> {
    let (attrs, what) = match item {
        Item::Fn(f) if public(&f.vis) => (&f.attrs, function(&f.sig, path)),
        Item::Struct(s) if public(&s.vis) => (&s.attrs, format!("struct {path}::{}", s.ident)),
        Item::Enum(e) if public(&e.vis) => (&e.attrs, format!("enum {path}::{}", e.ident)),
        Item::Trait(t) if public(&t.vis) => (&t.attrs, format!("trait {path}::{}", t.ident)),
        Item::Type(t) if public(&t.vis) => (
            &t.attrs,
            format!("type {path}::{} = {}", t.ident, tokens(&t.ty)),
        ),
        Item::Const(c) if public(&c.vis) => (
            &c.attrs,
            format!("const {path}::{}: {}", c.ident, tokens(&c.ty)),
        ),
        Item::Static(s) if public(&s.vis) => (
            &s.attrs,
            format!("static {path}::{}: {}", s.ident, tokens(&s.ty)),
        ),
        Item::Use(u) if public(&u.vis) => {
            (&u.attrs, format!("use {path}::{{{}}}", tokens(&u.tree)))
        }
        _ => return None,
    };
    Some(format!("{}pub {what}", marks(attrs)))
}

/// The lines of a public type's or trait's members: public fields, variants, trait items.
fn members(item: &Item, path: &str, api: &mut Api) -> Vec<String> {
    let mut out = Vec::new();
    match item {
        Item::Struct(s) => {
            for (i, f) in s.fields.iter().enumerate() {
                if public(&f.vis) && !is_test(&f.attrs) {
                    let name = f.ident.as_ref().map_or(i.to_string(), ToString::to_string);
                    out.push(format!(
                        "{}pub field {path}::{}::{name}: {}",
                        marks(&f.attrs),
                        s.ident,
                        tokens(&f.ty)
                    ));
                }
            }
        }
        Item::Enum(e) => {
            for v in &e.variants {
                let fields = match &v.fields {
                    syn::Fields::Unit => String::new(),
                    fields => tokens(fields),
                };
                out.push(format!(
                    "{}pub variant {path}::{}::{}{fields}",
                    marks(&v.attrs),
                    e.ident,
                    v.ident
                ));
            }
        }
        Item::Trait(t) => {
            for ti in &t.items {
                let line = match ti {
                    TraitItem::Fn(f) => {
                        api.methods += 1;
                        let at = format!("{path}::{}", t.ident);
                        format!("{}pub trait {}", marks(&f.attrs), function(&f.sig, &at))
                    }
                    TraitItem::Type(ty) => {
                        format!("pub trait type {path}::{}::{}", t.ident, ty.ident)
                    }
                    TraitItem::Const(c) => format!(
                        "pub trait const {path}::{}::{}: {}",
                        t.ident,
                        c.ident,
                        tokens(&c.ty)
                    ),
                    _ => continue,
                };
                out.push(line);
            }
        }
        _ => {}
    }
    out
}

/// The lines of an impl block: a trait impl as one line, an inherent impl's public
/// functions one each. Impls of types this reading cannot see are listed too, since a
/// private type's impl is rare in public modules and harmless to show.
fn implementation(api: &mut Api, i: &syn::ItemImpl, path: &str) {
    if is_test(&i.attrs) {
        return;
    }
    let generics = tokens(&i.generics);
    let ty = tokens(&i.self_ty);
    if let Some((trait_, _)) = &i.trait_ {
        api.lines.push(format!(
            "{}impl{generics} {} for {path}::{ty}",
            marks(&i.attrs),
            tokens(trait_)
        ));
        return;
    }
    for ii in &i.items {
        if let ImplItem::Fn(f) = ii
            && public(&f.vis)
            && !is_test(&f.attrs)
        {
            api.methods += 1;
            api.lines.push(format!(
                "{}pub {}",
                marks(&f.attrs),
                function(&f.sig, &format!("{path}::{ty}"))
            ));
        }
        if let ImplItem::Const(c) = ii
            && public(&c.vis)
        {
            api.items += 1;
            api.lines.push(format!(
                "{}pub const {path}::{ty}::{}: {}",
                marks(&c.attrs),
                c.ident,
                tokens(&c.ty)
            ));
        }
    }
}

/// `fn PATH::name<...>(args) -> out`, with its qualifiers (`async`, `const`, `unsafe`) first.
fn function(sig: &syn::Signature, path: &str) -> String {
    let text = signature(sig);
    match text.split_once("fn ") {
        Some((qualifiers, rest)) => format!("{qualifiers}fn {path}::{rest}"),
        None => text,
    }
}

/// `fn name<...>(args) -> out`, written as rustfmt would on one line.
fn signature(sig: &syn::Signature) -> String {
    let f = syn::ItemFn {
        attrs: Vec::new(),
        vis: Visibility::Inherited,
        modifiers: syn::FnModifiers::default(),
        sig: sig.clone(),
        block: Box::new(syn::parse_quote!({})),
    };
    let file = syn::File {
        shebang: None,
        frontmatter: None,
        attrs: Vec::new(),
        items: vec![Item::Fn(f)],
    };
    let text = prettyplease::unparse(&file);
    let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    one_line
        .trim_end_matches("{}")
        .trim_end()
        .replace("( ", "(")
        .replace(", )", ")")
        .replace(",)", ")")
}

/// Tokens as text, spaced as `quote` spaces them, then tightened where rustfmt would.
fn tokens(t: &impl quote::ToTokens) -> String {
    let mut s = t.to_token_stream().to_string();
    for (from, to) in [
        (" :: ", "::"),
        (":: ", "::"),
        (" ::", "::"),
        (" < ", "<"),
        ("< ", "<"),
        (" >", ">"),
        (" ,", ","),
        ("& ", "&"),
        ("( ", "("),
        (" )", ")"),
        ("[ ", "["),
        (" ]", "]"),
        ("{ ", "{"),
        (" }", "}"),
        (" ;", ";"),
        ("' ", "'"),
    ] {
        while s.contains(from) {
            s = s.replace(from, to);
        }
    }
    s
}

/// `#[doc(hidden)] ` and the item's `#[cfg(...)]`s, as prefixes of its line.
fn marks(attrs: &[Attribute]) -> String {
    let mut out = String::new();
    for a in attrs {
        let shown = tokens(a);
        if a.path().is_ident("cfg") || hidden(std::slice::from_ref(a)) {
            let _ = write!(out, "{} ", shown.replace(' ', "").replace("=", " = "));
        }
    }
    out
}

fn public(vis: &Visibility) -> bool {
    matches!(vis, Visibility::Public(_))
}

fn exported(attrs: &[Attribute]) -> bool {
    attrs.iter().any(|a| a.path().is_ident("macro_export"))
}

/// Whether `attrs` hold `#[cfg(test)]` (or `#[cfg(all(test, ...))]`).
fn is_test(attrs: &[Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg") && {
            let t = tokens(a).replace(' ', "");
            t.starts_with("#[cfg(test") || t.starts_with("#[cfg(all(test")
        }
    })
}

fn attrs_of(item: &Item) -> &[Attribute] {
    match item {
        Item::Const(i) => &i.attrs,
        Item::Enum(i) => &i.attrs,
        Item::Fn(i) => &i.attrs,
        Item::Impl(i) => &i.attrs,
        Item::Macro(i) => &i.attrs,
        Item::Mod(i) => &i.attrs,
        Item::Static(i) => &i.attrs,
        Item::Struct(i) => &i.attrs,
        Item::Trait(i) => &i.attrs,
        Item::Type(i) => &i.attrs,
        Item::Use(i) => &i.attrs,
        _ => &[],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A crate of three files: what is listed and what is not.
    #[test]
    fn only_what_a_user_can_name_is_listed() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path();
        std::fs::write(
            src.join("lib.rs"),
            "pub mod open; mod closed; pub(crate) mod own;\n\
             #[doc(hidden)] pub mod inner { pub struct S; impl S { pub fn f() {} } }\n\
             pub use open::Thing;\n\
             #[macro_export] macro_rules! shout { () => {} }\n\
             #[cfg(test)] pub mod tests { pub fn t() {} }\n",
        )
        .unwrap();
        std::fs::write(
            src.join("open.rs"),
            "pub struct Thing { pub name: String, secret: u8 }\n\
             impl Thing { pub fn new(name: &str) -> Self { todo!() } fn private(&self) {} }\n\
             impl Default for Thing { fn default() -> Self { todo!() } }\n\
             pub enum Kind { A, B(u32) }\n\
             #[doc(hidden)] pub fn hidden() {}\n\
             #[cfg(feature = \"x\")] pub const N: usize = 1;\n\
             pub(crate) fn crate_only() {}\n",
        )
        .unwrap();
        std::fs::write(src.join("closed.rs"), "pub fn unreachable() {}\n").unwrap();
        std::fs::write(src.join("own.rs"), "pub fn also_unreachable() {}\n").unwrap();
        let api = list(&src.join("lib.rs"), "demo").unwrap();
        let expected = [
            "#[cfg(feature = \"x\")] pub const demo::open::N: usize",
            "#[doc(hidden)] pub fn demo::inner::S::f()",
            "#[doc(hidden)] pub fn demo::open::hidden()",
            "#[doc(hidden)] pub mod demo::inner",
            "#[doc(hidden)] pub struct demo::inner::S",
            "impl Default for demo::open::Thing",
            "pub enum demo::open::Kind",
            "pub field demo::open::Thing::name: String",
            "pub fn demo::open::Thing::new(name: &str) -> Self",
            "pub macro demo::shout!",
            "pub mod demo::open",
            "pub struct demo::open::Thing",
            "pub use demo::{open::Thing}",
            "pub variant demo::open::Kind::A",
            "pub variant demo::open::Kind::B(u32)",
        ];
        assert_eq!(api.lines, expected, "{:#?}", api.lines);
        assert_eq!(
            (api.modules, api.items, api.methods, api.hidden),
            (1, 5, 1, 4)
        );
    }
}
