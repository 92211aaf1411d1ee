//! Where a database file is: the `--db` flag, the spec's environment variable, or the spec's
//! default for the operating system, with `~` and `%VAR%` expanded; and the file a SQLite
//! `file:` URI names. Engine-neutral: the command line and handlers use it whatever engine
//! serves the file.

use std::path::{Path, PathBuf};

use super::OpenError;
use crate::def::DatabaseDef;

/// Where the database path came from, for messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathSource {
    Flag,
    Env,
    Default,
}

impl PathSource {
    pub fn describe(self) -> &'static str {
        match self {
            PathSource::Flag => "from --db",
            PathSource::Env => "from the environment",
            PathSource::Default => "the default location",
        }
    }
}

/// Expands a leading `~` and `%APPDATA%`-style variables in a default path.
pub fn expand(path: &str) -> PathBuf {
    let home = std::env::var_os("HOME").or_else(|| std::env::var_os("USERPROFILE"));
    let mut s = path.to_string();
    if (s == "~" || s.starts_with("~/") || s.starts_with("~\\"))
        && let Some(h) = &home
    {
        s = format!("{}{}", h.to_string_lossy(), &s[1..]);
    }
    while let Some(start) = s.find('%') {
        let Some(len) = s[start + 1..].find('%') else {
            break;
        };
        let var = &s[start + 1..start + 1 + len];
        let value = std::env::var(var)
            .ok()
            .or_else(|| home.as_ref().map(|h| h.to_string_lossy().into_owned()))
            .unwrap_or_default();
        s = format!("{}{}{}", &s[..start], value, &s[start + 2 + len..]);
    }
    PathBuf::from(s)
}

/// Of a spec's per-system defaults, the one for the system this runs on.
pub(crate) fn for_this_os<'a>(
    linux: Option<&'a str>,
    macos: Option<&'a str>,
    windows: Option<&'a str>,
) -> Option<&'a str> {
    if cfg!(target_os = "macos") {
        macos
    } else if cfg!(windows) {
        windows
    } else {
        linux
    }
}

/// Resolves the database path: the `--db` flag, then the spec's environment variable, then the
/// spec's default for this operating system.
pub fn resolve(def: &DatabaseDef, flag: Option<&Path>) -> Result<(PathBuf, PathSource), OpenError> {
    if let Some(p) = flag {
        return Ok((p.to_path_buf(), PathSource::Flag));
    }
    if let Some(var) = def.env
        && let Some(v) = std::env::var_os(var).filter(|v| !v.is_empty())
    {
        return Ok((expand(&v.to_string_lossy()), PathSource::Env));
    }
    match for_this_os(def.default_linux, def.default_macos, def.default_windows) {
        Some(d) => Ok((expand(d), PathSource::Default)),
        None => Err(OpenError::NoPath {
            env_hint: def.env.map(|e| format!(" or set {e}")).unwrap_or_default(),
        }),
    }
}

/// The file a database location names: the location itself, or the file of a SQLite `file:`
/// URI (`file:/data/app.db?mode=ro`, `file:///data/app.db`), percent-decoded.
pub fn file_of(location: &Path) -> PathBuf {
    let Some(uri) = location.to_str().and_then(|s| s.strip_prefix("file:")) else {
        return location.to_path_buf();
    };
    let uri = uri.split(['?', '#']).next().unwrap_or_default();
    // `file://HOST/path`: the authority (empty or `localhost`) goes.
    let path = match uri.strip_prefix("//") {
        Some(rest) => rest.find('/').map_or("", |i| &rest[i..]),
        None => uri,
    };
    let bytes = path.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        if bytes[i] == b'%'
            && let (Some(h), Some(l)) = (
                bytes.get(i + 1).copied().and_then(hex),
                bytes.get(i + 2).copied().and_then(hex),
            )
        {
            out.push((h * 16 + l) as u8);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    PathBuf::from(String::from_utf8_lossy(&out).into_owned())
}

/// Fails with a message that says how to fix it when the database file does not exist.
pub(crate) fn require_exists(
    server: &str,
    def: &DatabaseDef,
    path: &Path,
    source: PathSource,
) -> Result<(), OpenError> {
    if file_of(path).is_file() {
        return Ok(());
    }
    Err(OpenError::Missing {
        path: super::redact(&path.display().to_string()),
        how: source.describe(),
        env_hint: def.env.map_or_else(
            || "--db PATH".to_string(),
            |e| format!("{e}=/path/to/db or pass --db PATH"),
        ),
        server: server.to_string(),
        sample: if def.sample.is_some() {
            " [--sample]"
        } else {
            ""
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expands_home_and_percent_variables() {
        // SAFETY-free: the test reads, it does not set, the environment.
        let home = std::env::var("HOME").unwrap_or_default();
        assert_eq!(
            expand("~/x/notes.db"),
            PathBuf::from(format!("{home}/x/notes.db"))
        );
        assert_eq!(expand("/abs/path.db"), PathBuf::from("/abs/path.db"));
        let path = std::env::var("PATH").unwrap_or_default();
        assert_eq!(expand("%PATH%/y"), PathBuf::from(format!("{path}/y")));
    }
}
