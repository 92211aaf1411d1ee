//! The module graph of a crate's `src/`, read from its paths (`crate::`, `super::`, `self::`
//! and `use crate::{...}` groups), and its cycles: groups of modules that reach each other.
//! A file is a module; a module's use of its ancestors is the tree, not a cycle; test modules
//! (`#[cfg(test)] mod ...`, to the end of the file, as this repository writes them) are left
//! out. A reading of the text, not of the compiler's resolution: enough to keep the runtime's
//! layers apart, which a test of this crate does (`the_runtime_has_no_module_cycles`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::LazyLock;

use regex::Regex;

/// A pattern of this reading, compiled once.
fn pattern(p: &str) -> Regex {
    Regex::new(p).expect("a valid pattern")
}

static COMMENTS: LazyLock<Regex> = LazyLock::new(|| pattern(r"//[^\n]*"));
static STRINGS: LazyLock<Regex> = LazyLock::new(|| pattern(r#""(?:\\.|[^"\\])*""#));
/// An inline test module, to the end of its file.
static TESTS: LazyLock<Regex> =
    LazyLock::new(|| pattern(r"#\[cfg\((?:all\()?test[^\]]*\]\s*mod \w+\s*\{"));
/// A test module in a file of its own (`#[cfg(test)] mod in_process;`).
static TEST_FILES: LazyLock<Regex> = LazyLock::new(|| {
    pattern(r"#\[cfg\((?:all\()?test[^\]]*\]\s*(?:pub(?:\([^)]*\))?\s+)?mod (\w+);")
});
static PATHS: LazyLock<Regex> = LazyLock::new(|| pattern(r"\b(crate|super|self)((?:::\w+)+)"));
static GROUPS: LazyLock<Regex> = LazyLock::new(|| pattern(r"use\s+crate::\{([^;]*)\};"));
static ITEM: LazyLock<Regex> = LazyLock::new(|| pattern(r"\w+(?:::\w+)*"));

/// Modules by path (`backend::sqlite`), each with the modules it names.
pub type Graph = BTreeMap<String, BTreeSet<String>>;

/// The graph of the crate whose sources are under `src`; with `top`, of its top-level modules
/// only (`backend::sqlite` counts as `backend`).
pub fn graph(src: &Path, top: bool) -> std::io::Result<Graph> {
    let mut files = BTreeMap::new();
    walk(src, src, &mut files)?;
    // A file declared under `#[cfg(test)]` is a test module.
    let tests: Vec<String> = files
        .iter()
        .flat_map(|(m, text)| {
            TEST_FILES.captures_iter(text).map(move |c| {
                if m.is_empty() {
                    c[1].to_string()
                } else {
                    format!("{m}::{}", &c[1])
                }
            })
        })
        .collect();
    for t in &tests {
        files.retain(|m, _| m != t && !m.starts_with(&format!("{t}::")));
    }
    let modules: BTreeSet<String> = files.keys().cloned().collect();
    let mut graph = Graph::new();
    for (module, text) in &files {
        let named = named(module, &code(text), &modules);
        let edges = graph.entry(module.clone()).or_default();
        edges.extend(
            named
                .into_iter()
                .filter(|t| !ancestor(t, module) && !ancestor(module, t)),
        );
    }
    if !top {
        return Ok(graph);
    }
    let head = |m: &str| m.split("::").next().unwrap_or_default().to_string();
    let mut tops = Graph::new();
    for (m, ts) in graph {
        let edges = tops.entry(head(&m)).or_default();
        edges.extend(ts.iter().map(|t| head(t)).filter(|t| *t != head(&m)));
    }
    Ok(tops)
}

/// The strongly connected groups of more than one module, each sorted, largest first.
pub fn cycles(graph: &Graph) -> Vec<Vec<String>> {
    let mut t = Tarjan {
        graph,
        next: 0,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        groups: Vec::new(),
    };
    for m in graph.keys() {
        if !t.index.contains_key(m.as_str()) {
            t.visit(m);
        }
    }
    let mut groups: Vec<Vec<String>> = t.groups.into_iter().filter(|g| g.len() > 1).collect();
    for g in &mut groups {
        g.sort();
    }
    groups.sort_by_key(|g| std::cmp::Reverse(g.len()));
    groups
}

struct Tarjan<'a> {
    graph: &'a Graph,
    next: usize,
    index: BTreeMap<&'a str, usize>,
    low: BTreeMap<&'a str, usize>,
    stack: Vec<&'a str>,
    groups: Vec<Vec<String>>,
}

impl<'a> Tarjan<'a> {
    fn visit(&mut self, v: &'a str) {
        self.index.insert(v, self.next);
        self.low.insert(v, self.next);
        self.next += 1;
        self.stack.push(v);
        for w in self.graph.get(v).into_iter().flatten() {
            if !self.index.contains_key(w.as_str()) {
                self.visit(w);
                let low = self.low[v].min(self.low[w.as_str()]);
                self.low.insert(v, low);
            } else if self.stack.contains(&w.as_str()) {
                let low = self.low[v].min(self.index[w.as_str()]);
                self.low.insert(v, low);
            }
        }
        if self.low[v] == self.index[v] {
            let mut group = Vec::new();
            while let Some(w) = self.stack.pop() {
                group.push(w.to_string());
                if w == v {
                    break;
                }
            }
            self.groups.push(group);
        }
    }
}

/// Every `.rs` file under `dir`, by module path.
fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, String>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            walk(root, &path, out)?;
        } else if path.extension().is_some_and(|e| e == "rs") {
            let rel = path.strip_prefix(root).unwrap_or(&path).with_extension("");
            let mut parts: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if matches!(
                parts.last().map(String::as_str),
                Some("mod" | "lib" | "main")
            ) {
                parts.pop();
            }
            out.insert(parts.join("::"), std::fs::read_to_string(&path)?);
        }
    }
    Ok(())
}

/// The text without comments, string literals and its test module.
fn code(text: &str) -> String {
    let text = COMMENTS.replace_all(text, "");
    let text = STRINGS.replace_all(&text, "\"\"");
    match TESTS.find(&text) {
        Some(m) => text[..m.start()].to_string(),
        None => text.into_owned(),
    }
}

/// The modules `code`, the text of `module`, names.
fn named(module: &str, code: &str, modules: &BTreeSet<String>) -> BTreeSet<String> {
    let here: Vec<&str> = if module.is_empty() {
        Vec::new()
    } else {
        module.split("::").collect()
    };
    let mut out = BTreeSet::new();
    for c in PATHS.captures_iter(code) {
        let mut base: Vec<&str> = match &c[1] {
            "crate" => Vec::new(),
            "super" => here[..here.len().saturating_sub(1)].to_vec(),
            _ => here.clone(),
        };
        let mut rest: Vec<&str> = c
            .get(2)
            .map_or("", |m| m.as_str())
            .split("::")
            .skip(1)
            .collect();
        while rest.first() == Some(&"super") {
            base.pop();
            rest.remove(0);
        }
        base.extend(rest);
        out.insert(resolve(&base, modules));
    }
    for g in GROUPS.captures_iter(code) {
        for i in ITEM.find_iter(&g[1]) {
            let segs: Vec<&str> = i.as_str().split("::").collect();
            out.insert(resolve(&segs, modules));
        }
    }
    out.retain(|t| t != module && !t.is_empty());
    out
}

/// The longest prefix of `segs` that is a module.
fn resolve(segs: &[&str], modules: &BTreeSet<String>) -> String {
    (0..=segs.len())
        .rev()
        .map(|n| segs[..n].join("::"))
        .find(|m| modules.contains(m))
        .unwrap_or_default()
}

/// Whether `a` is `b`'s ancestor (the crate root is everyone's).
fn ancestor(a: &str, b: &str) -> bool {
    a.is_empty() || b.strip_prefix(a).is_some_and(|r| r.starts_with("::"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A crate of `files` (path, text) in a temporary directory, and its cycles.
    fn cycles_of(files: &[(&str, &str)], top: bool) -> Vec<Vec<String>> {
        let dir = tempfile::tempdir().expect("a temporary directory");
        for (path, text) in files {
            let p = dir.path().join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        cycles(&graph(dir.path(), top).expect("read the crate"))
    }

    #[test]
    fn a_cycle_through_paths_uses_and_groups_is_found() {
        let files = [
            ("lib.rs", "mod a; mod b; mod c;"),
            ("a.rs", "use crate::b::Thing;"),
            ("b.rs", "fn f() { crate::c::g() }"),
            ("c.rs", "use crate::{a::X, d};"),
        ];
        assert_eq!(cycles_of(&files, false), [["a", "b", "c"]]);
    }

    #[test]
    fn tests_comments_strings_and_ancestors_make_no_cycle() {
        // Every use of `a` from `b` is in a test module, inline or in a file of its own.
        let files = [
            ("lib.rs", "mod a; mod b;"),
            (
                "a/mod.rs",
                "mod inner; use self::inner::X; use crate::b::Y;",
            ),
            (
                "a/inner.rs",
                "use super::Y; // crate::b::Z\nconst S: &str = \"crate::b\";",
            ),
            (
                "b.rs",
                "pub struct Y;\n#[cfg(test)]\nmod tests { use crate::a::W; }\n#[cfg(all(test, feature = \"x\"))]\nmod more;",
            ),
            ("b/more.rs", "use crate::a::W;"),
        ];
        assert!(cycles_of(&files, false).is_empty());
        assert!(cycles_of(&files, true).is_empty());
    }

    #[test]
    fn submodules_of_two_top_modules_that_meet_are_a_top_level_cycle() {
        let files = [
            ("lib.rs", "mod a; mod b;"),
            ("a/mod.rs", "mod x;"),
            ("a/x.rs", "use crate::b::Y;"),
            ("b/mod.rs", "mod y;"),
            ("b/y.rs", ""),
            ("b/z.rs", "use super::super::a::Q;"),
        ];
        assert!(cycles_of(&files, false).is_empty());
        assert_eq!(cycles_of(&files, true), [["a", "b"]]);
    }

    /// The runtime's layers: a change that makes two modules reach each other fails here,
    /// naming them (docs/ARCHITECTURE.md, "Invariants").
    #[test]
    fn the_runtime_and_the_compiler_have_no_module_cycles() {
        let root = crate::root();
        for krate in ["server/runtime/src", "codegen/src"] {
            for top in [false, true] {
                let graph = graph(&root.join(krate), top).expect("read the crate");
                let found = cycles(&graph);
                assert!(
                    found.is_empty(),
                    "{krate} has module cycles ({}): {found:?}",
                    if top { "top-level modules" } else { "files" }
                );
            }
        }
    }
}
