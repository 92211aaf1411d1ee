//! Read stage of a tool's `app: {html: FILE}`: the HTML document of an MCP App of the spec
//! author's own, read from beside the spec (before lowering, so that its problems come with the
//! spec's others) into the IR, so that a compiled server carries it.
//! Every problem is a diagnostic at the `app:` key, all of them collected. The file must lie
//! inside the spec's directory (links resolved), be a regular UTF-8 file and hold at most
//! [`MAX_BYTES`].

use std::collections::BTreeMap;
use std::path::{Component, Path};

use crate::diag::{Diagnostic, Diagnostics};
use crate::spec::{RawApp, RawTool, Sp};

/// The largest view read, in bytes.
pub(crate) const MAX_BYTES: u64 = 1024 * 1024;

/// Reads every tool's HTML view (`dir` is the spec's directory on disk, `spec_file` the spec
/// as messages name it): each tool's name with its text, or every problem found.
pub(crate) fn read(
    dir: &Path,
    spec_file: &Path,
    tools: &[Sp<RawTool>],
) -> Result<BTreeMap<String, String>, Diagnostics> {
    let mut problems = Diagnostics::default();
    let mut read = BTreeMap::new();
    for tool in tools {
        let Some(app) = &tool.value.app else {
            continue;
        };
        let RawApp::Html(h) = &app.value else {
            continue;
        };
        let at = |message: String, help: &str| Diagnostic {
            file: spec_file.to_path_buf(),
            pos: crate::spec::pos(app),
            message,
            label: Some("the app's HTML file".into()),
            help: Some(help.to_string()),
        };
        match one(dir, &h.html) {
            Ok(text) => {
                read.insert(tool.value.name.value.clone(), text);
            }
            Err((message, help)) => problems.items.push(at(message, help)),
        }
    }
    if problems.is_empty() {
        Ok(read)
    } else {
        Err(problems)
    }
}

/// The text of the view `file` beside the spec, or what is wrong and how to fix it.
fn one(dir: &Path, file: &str) -> Result<String, (String, &'static str)> {
    let rel = Path::new(file);
    if file.is_empty() || !rel.components().all(|c| matches!(c, Component::Normal(_))) {
        return Err((
            format!("the app's file `{file}` is not a file under the spec's directory"),
            "name a file beside the spec, e.g. `views/parts.html` (no `..`, not absolute)",
        ));
    }
    let path = dir.join(rel);
    let root = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    if let Err(why) = crate::skills::inside_as(root, &path, false) {
        return Err((
            format!("the app's file `{file}`: {why}"),
            "give an HTML file inside the spec's directory",
        ));
    }
    let bytes = crate::skills::read_bounded(&path, MAX_BYTES + 1).map_err(|e| {
        (
            format!("cannot read the app's file `{file}`: {e}"),
            "give an HTML file the spec's reader may read",
        )
    })?;
    if bytes.len() as u64 > MAX_BYTES {
        return Err((
            format!("the app's file `{file}` is larger than 1 MiB"),
            "keep a view small: a host loads it before the result it shows",
        ));
    }
    String::from_utf8(bytes).map_err(|_| {
        (
            format!("the app's file `{file}` is not UTF-8 text"),
            "save the HTML as UTF-8",
        )
    })
}
