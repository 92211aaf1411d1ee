//! Paths confined to a directory: what a handler opens, creates, lists or deletes on a
//! client's behalf must stay inside its project once every symbolic link is followed.
//!
//! [`inside`] walks a relative path one component at a time from the directory's real path.
//! A component that is a link is resolved, and the walk goes on from its target only while
//! that target is inside; a link that leads nowhere is refused too, since creating a file
//! through it would create the link's target. Components that do not exist yet hold no link,
//! so a path to be created is checked as well as one that exists. The check runs on every
//! call, so a link planted after start-up is caught.

use std::path::{Component, Path, PathBuf};

/// Why a path is not inside its directory.
#[derive(Debug, thiserror::Error)]
pub enum Escape {
    #[error("the path is absolute or leaves the directory with `..`")]
    NotRelative,
    #[error("the path leads outside the directory through a symbolic link")]
    Outside,
    #[error("the path goes through a symbolic link that leads nowhere")]
    Dangling,
    #[error("the path cannot be resolved: {0}")]
    Io(#[from] std::io::Error),
}

/// `rel`, relative to `root`, as it really is on disk (every link resolved), when it stays
/// inside `root`.
pub fn inside(root: &Path, rel: &Path) -> Result<PathBuf, Escape> {
    if rel.is_absolute()
        || rel
            .components()
            .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
    {
        return Err(Escape::NotRelative);
    }
    let root = root.canonicalize()?;
    let mut real = root.clone();
    for c in rel.components() {
        let Component::Normal(name) = c else { continue };
        let next = real.join(name);
        match next.symlink_metadata() {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => real = next,
            Err(e) => return Err(Escape::Io(e)),
            Ok(m) if m.file_type().is_symlink() => {
                real = next.canonicalize().map_err(|_| Escape::Dangling)?;
                if !real.starts_with(&root) {
                    return Err(Escape::Outside);
                }
            }
            Ok(_) => real = next,
        }
    }
    Ok(real)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[test]
    fn links_are_followed_and_judged_by_their_target() {
        use std::os::unix::fs::symlink;
        let out = tempfile::tempdir().unwrap();
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        std::fs::create_dir(r.join("d")).unwrap();
        symlink(out.path(), r.join("out")).unwrap();
        symlink(r.join("d"), r.join("in")).unwrap();
        symlink(out.path().join("missing"), r.join("dangling")).unwrap();
        let real = |p: &str| inside(r, Path::new(p));
        assert!(
            real("d/new.db")
                .unwrap()
                .starts_with(r.canonicalize().unwrap())
        );
        assert!(real("in/x.db").unwrap().ends_with("d/x.db"));
        assert!(real("not/yet/here.db").is_ok());
        assert!(matches!(real("out"), Err(Escape::Outside)));
        assert!(matches!(real("out/x.db"), Err(Escape::Outside)));
        assert!(matches!(real("dangling"), Err(Escape::Dangling)));
        assert!(matches!(real("../x"), Err(Escape::NotRelative)));
        assert!(matches!(real("/etc"), Err(Escape::NotRelative)));
    }
}
