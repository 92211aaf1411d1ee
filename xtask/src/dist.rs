//! `cargo xtask dist npm`: the npm packages that install mcpspec without a Rust toolchain, in
//! the layout esbuild, Biome and Turborepo use. `mcpspec` holds a launcher of a few lines of
//! JavaScript (`xtask/dist/npm/launcher.js`) and names one package per platform in
//! `optionalDependencies`; each of those (`@mcpspec/linux-x64`, ...) carries that platform's
//! binary and declares its `os` and `cpu`, so npm installs only the one that fits. What it makes
//! goes to `target/dist/npm/` (the package directories) and `target/dist/` (the tarballs
//! `npm pack` makes of them).
//!
//! [`PLATFORMS`] is the one list of what a release builds; the release workflow runs this
//! command once per platform, with `--target`.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context as _, Result, bail};
use serde_json::{Value, json};

/// A platform the release builds: its Rust target and its npm names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Platform {
    /// The Rust target triple.
    pub target: &'static str,
    /// Node's `process.platform`.
    pub os: &'static str,
    /// Node's `process.arch`.
    pub cpu: &'static str,
}

impl Platform {
    /// The npm package that carries this platform's binary.
    pub fn package(&self) -> String {
        format!("@mcpspec/{}-{}", self.os, self.cpu)
    }

    /// The binary's file name.
    pub fn exe(&self) -> &'static str {
        if self.os == "win32" {
            "mcpspec.exe"
        } else {
            "mcpspec"
        }
    }

    /// The platform a target triple names.
    pub fn of(target: &str) -> Option<Platform> {
        PLATFORMS.iter().copied().find(|p| p.target == target)
    }

    /// The platform this xtask was built for.
    pub fn host() -> Option<Platform> {
        let os = match std::env::consts::OS {
            "macos" => "darwin",
            "windows" => "win32",
            other => other,
        };
        let cpu = match std::env::consts::ARCH {
            "x86_64" => "x64",
            "aarch64" => "arm64",
            other => other,
        };
        PLATFORMS
            .iter()
            .copied()
            .find(|p| p.os == os && p.cpu == cpu)
    }
}

/// Every platform a release builds a binary for.
pub const PLATFORMS: &[Platform] = &[
    Platform {
        target: "x86_64-unknown-linux-gnu",
        os: "linux",
        cpu: "x64",
    },
    Platform {
        target: "aarch64-unknown-linux-gnu",
        os: "linux",
        cpu: "arm64",
    },
    Platform {
        target: "x86_64-apple-darwin",
        os: "darwin",
        cpu: "x64",
    },
    Platform {
        target: "aarch64-apple-darwin",
        os: "darwin",
        cpu: "arm64",
    },
    Platform {
        target: "x86_64-pc-windows-msvc",
        os: "win32",
        cpu: "x64",
    },
];

const LAUNCHER: &str = include_str!("../dist/npm/launcher.js");
const README: &str = include_str!("../dist/npm/README.md");

/// The fields both packages share.
fn common(name: &str, version: &str, description: &str) -> serde_json::Map<String, Value> {
    let v = json!({
        "name": name,
        "version": version,
        "description": description,
        "license": "MIT OR Apache-2.0",
        "repository": {"type": "git", "url": "git+https://github.com/mcpspec/mcpspec.git"},
        "homepage": "https://github.com/mcpspec/mcpspec",
    });
    match v {
        Value::Object(m) => m,
        _ => unreachable!("an object"),
    }
}

/// The launcher package's manifest: every platform's package optional, at this version.
pub fn launcher_manifest(version: &str) -> Value {
    let mut m = common(
        "mcpspec",
        version,
        "Serve an MCP server straight from a YAML spec (SQL tools, resources, prompts) over stdio or Streamable HTTP",
    );
    m.insert("bin".into(), json!({"mcpspec": "bin/mcpspec.js"}));
    m.insert("files".into(), json!(["bin/mcpspec.js"]));
    m.insert("engines".into(), json!({"node": ">=18"}));
    m.insert(
        "keywords".into(),
        json!(["mcp", "model-context-protocol", "sql", "yaml"]),
    );
    let optional: serde_json::Map<String, Value> = PLATFORMS
        .iter()
        .map(|p| (p.package(), Value::from(version)))
        .collect();
    m.insert("optionalDependencies".into(), Value::Object(optional));
    Value::Object(m)
}

/// One platform's manifest: its `os` and `cpu` (and the C library on Linux, where the binary
/// links glibc), so npm installs it only there.
pub fn platform_manifest(p: Platform, version: &str) -> Value {
    let mut m = common(
        &p.package(),
        version,
        &format!(
            "The mcpspec binary for {}-{}; installed by the mcpspec package",
            p.os, p.cpu
        ),
    );
    m.insert("os".into(), json!([p.os]));
    m.insert("cpu".into(), json!([p.cpu]));
    if p.os == "linux" {
        m.insert("libc".into(), json!(["glibc"]));
    }
    m.insert("files".into(), json!([format!("bin/{}", p.exe())]));
    m.insert("preferUnplugged".into(), json!(true));
    Value::Object(m)
}

/// The files of both packages, relative to `target/dist/npm/`, but for the binary itself.
pub fn render(p: Platform, version: &str) -> Vec<(PathBuf, String)> {
    let json = |v: Value| serde_json::to_string_pretty(&v).expect("JSON") + "\n";
    let dir = format!("{}-{}", p.os, p.cpu);
    vec![
        (
            "mcpspec/package.json".into(),
            json(launcher_manifest(version)),
        ),
        ("mcpspec/bin/mcpspec.js".into(), LAUNCHER.to_owned()),
        ("mcpspec/README.md".into(), README.to_owned()),
        (
            format!("{dir}/package.json").into(),
            json(platform_manifest(p, version)),
        ),
        (
            format!("{dir}/README.md").into(),
            format!(
                "# {}\n\nThe `mcpspec` binary for {}-{}, which the `mcpspec` package runs; \
                 install that one (`npx -y mcpspec`).\n",
                p.package(),
                p.os,
                p.cpu
            ),
        ),
    ]
}

/// Writes both packages under `out/npm/` with `binary` as the platform's, packs them into
/// `out/`, and returns the tarballs (launcher first).
pub fn npm(p: Platform, version: &str, binary: &Path, out: &Path) -> Result<Vec<PathBuf>> {
    let root = out.join("npm");
    if root.exists() {
        std::fs::remove_dir_all(&root).with_context(|| format!("clearing {}", root.display()))?;
    }
    for (path, text) in render(p, version) {
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().expect("a directory"))?;
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    let dir = root.join(format!("{}-{}", p.os, p.cpu));
    let exe = dir.join("bin").join(p.exe());
    std::fs::create_dir_all(exe.parent().expect("bin/"))?;
    std::fs::copy(binary, &exe).with_context(|| format!("copying {}", binary.display()))?;
    executable(&root.join("mcpspec/bin/mcpspec.js"))?;
    executable(&exe)?;
    let mut packed = Vec::new();
    for pkg in [root.join("mcpspec"), dir] {
        packed.push(pack(&pkg, out)?);
    }
    Ok(packed)
}

/// `npm pack` of one package directory into `out`; the tarball's path.
fn pack(dir: &Path, out: &Path) -> Result<PathBuf> {
    let o = Command::new("npm")
        .args(["pack", "--silent", "--pack-destination"])
        .arg(out)
        .current_dir(dir)
        .output()
        .context("running npm pack (npm comes with Node.js: apt-get install npm)")?;
    if !o.status.success() {
        bail!(
            "npm pack in {} failed:\n{}",
            dir.display(),
            String::from_utf8_lossy(&o.stderr)
        );
    }
    let name = String::from_utf8_lossy(&o.stdout).trim().to_owned();
    Ok(out.join(name))
}

#[cfg(unix)]
fn executable(path: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
        .with_context(|| format!("making {} executable", path.display()))
}

#[cfg(not(unix))]
fn executable(_: &Path) -> Result<()> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_launcher_names_every_platform_at_its_own_version() {
        let m = launcher_manifest("1.2.3");
        assert_eq!(m["bin"]["mcpspec"], "bin/mcpspec.js");
        let optional = m["optionalDependencies"].as_object().unwrap();
        assert_eq!(optional.len(), PLATFORMS.len());
        assert!(optional.values().all(|v| v == "1.2.3"));
        assert_eq!(optional["@mcpspec/linux-x64"], "1.2.3");
    }

    #[test]
    fn a_platform_package_is_only_for_its_platform() {
        let p = Platform::of("aarch64-apple-darwin").unwrap();
        let m = platform_manifest(p, "1.2.3");
        assert_eq!(m["name"], "@mcpspec/darwin-arm64");
        assert_eq!(m["os"], json!(["darwin"]));
        assert_eq!(m["cpu"], json!(["arm64"]));
        assert!(m.get("libc").is_none());
        let w = Platform::of("x86_64-pc-windows-msvc").unwrap();
        assert_eq!(
            platform_manifest(w, "1.2.3")["files"],
            json!(["bin/mcpspec.exe"])
        );
        let l = Platform::of("x86_64-unknown-linux-gnu").unwrap();
        assert_eq!(platform_manifest(l, "1.2.3")["libc"], json!(["glibc"]));
    }

    #[test]
    fn the_launcher_looks_up_the_names_the_manifests_use() {
        // The launcher builds `@mcpspec/${process.platform}-${process.arch}` and the binary's
        // name as `package()` and `exe()` do.
        assert!(LAUNCHER.contains("`@mcpspec/${platform}`"));
        assert!(LAUNCHER.contains("`${process.platform}-${process.arch}`"));
        assert!(LAUNCHER.contains("\"mcpspec.exe\" : \"mcpspec\""));
        assert!(LAUNCHER.contains("require.resolve(`${pkg}/bin/${exe}`)"));
    }
}
