//! `cargo xtask dist npm`: the npm packages that install mcpspec without a Rust toolchain, in
//! the layout esbuild, Biome and Turborepo use. `mcpspec` holds a launcher of a few lines of
//! JavaScript (`xtask/dist/npm/launcher.js`) and names one package per platform in
//! `optionalDependencies`; each of those (`@mcpspec/linux-x64`, ...) carries that platform's
//! binary and declares its `os` and `cpu`, so npm installs only the one that fits. What it makes
//! goes to `target/dist/npm/` (the package directories) and `target/dist/` (the tarballs
//! `npm pack` makes of them).
//!
//! `cargo xtask dist pypi` makes the PyPI wheel: maturin (from PyPI, pinned, in a virtual
//! environment of its own under `target/dist/`) builds `server/cli` with `bindings = "bin"`
//! (`server/cli/pyproject.toml`), so the wheel carries the `mcpspec` binary and `pip install
//! mcpspec` or `uvx mcpspec` puts it on the PATH.
//!
//! `cargo xtask dist oci` makes the OCI image with Debian's `umoci` (no container daemon): the
//! binary, the shared libraries it links and the loader (as `ldd` names them), CA
//! certificates, a non-root user and a `/data` volume, serving Streamable HTTP on
//! `0.0.0.0:8080`, where the server itself refuses to start without a token or an issuer. It is
//! written as an OCI layout (`target/dist/oci/`) and an archive of it
//! (`target/dist/mcpspec-oci.tar`, for `podman load` or `skopeo copy oci-archive:`).
//!
//! [`PLATFORMS`] is the one list of what a release builds; the release workflow runs these
//! commands once per platform, with `--target`.

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

/// The name the MCP registry knows mcpspec by. Each package proves it is this server's as the
/// registry checks: npm's `mcpName`, a `mcp-name:` line in the PyPI README
/// (`server/cli/README.md`), and the OCI image's `io.modelcontextprotocol.server.name` label.
pub const REGISTRY_NAME: &str = "io.github.mcpspec/mcpspec";

/// The registry's `server.json` schema [`server_json`] follows (the one `mcpspec bundle`
/// writes to).
const SERVER_SCHEMA: &str =
    "https://static.modelcontextprotocol.io/schemas/2025-09-29/server.schema.json";

/// Where the release pushes the image.
pub const OCI_REPOSITORY: &str = "mcpspec/mcpspec";

const LAUNCHER: &str = include_str!("../dist/npm/launcher.js");
const README: &str = include_str!("../dist/npm/README.md");

/// `cargo xtask dist npm [--binary FILE] [--target TRIPLE]`, `dist pypi [--profile P]
/// [--target T] [--manifest CARGO_TOML]` and `dist oci --binary FILE`: what each makes, under `target/dist/`, printed.
pub fn run(root: &Path, args: &[String]) -> Result<()> {
    let (mut binary, mut target, mut profile) = (None, None, "dist".to_owned());
    let mut manifest = root.join("server/cli/Cargo.toml");
    let mut it = args.iter();
    let what = it.next().map(String::as_str);
    if !matches!(what, Some("npm" | "pypi" | "oci" | "server-json")) {
        bail!(
            "`dist` makes `npm` packages, a `pypi` wheel, an `oci` image or `server-json`, not {what:?}; see cargo xtask --help"
        );
    }
    while let Some(a) = it.next() {
        let value = it.next();
        match (what, a.as_str(), value) {
            (Some("npm" | "oci"), "--binary", Some(v)) => binary = Some(PathBuf::from(v)),
            (Some("pypi"), "--profile", Some(v)) => profile = v.clone(),
            (Some("pypi"), "--manifest", Some(v)) => manifest = PathBuf::from(v),
            (_, "--target", Some(v)) => target = Some(v.clone()),
            _ => bail!(
                "unknown argument `{a}` of `dist {}`; see cargo xtask --help",
                what.unwrap_or("")
            ),
        }
    }
    let target_dir =
        std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from);
    if what == Some("server-json") {
        let out = target_dir.join("dist").join("server.json");
        std::fs::create_dir_all(out.parent().expect("dist/"))?;
        let text = serde_json::to_string_pretty(&server_json(env!("CARGO_PKG_VERSION")))? + "\n";
        std::fs::write(&out, text)?;
        println!("{}", out.display());
        return Ok(());
    }
    if what == Some("oci") {
        let binary = binary.context("`dist oci` needs --binary FILE")?;
        let out = target_dir.join("dist");
        let archive = oci(&binary, env!("CARGO_PKG_VERSION"), &out)?;
        println!("{}", archive.display());
        return Ok(());
    }
    if what == Some("pypi") {
        let out = target_dir.join("dist");
        let wheel = pypi(root, &manifest, &profile, target.as_deref(), &out)?;
        println!("{}", wheel.display());
        return Ok(());
    }
    let platform = match &target {
        Some(t) => Platform::of(t).with_context(|| {
            format!(
                "no npm platform for the target {t}; the release builds these: {}",
                {
                    let all: Vec<&str> = PLATFORMS.iter().map(|p| p.target).collect();
                    all.join(", ")
                }
            )
        })?,
        None => Platform::host().context("this machine is no platform the release builds")?,
    };
    let binary = match binary {
        Some(b) => b,
        None => dist_build(root, &target_dir, target.as_deref(), platform)?,
    };
    let out = target_dir.join("dist");
    for tarball in npm(platform, env!("CARGO_PKG_VERSION"), &binary, &out)? {
        println!("{}", tarball.display());
    }
    Ok(())
}

/// Builds mcpspec-cli in the `dist` profile (for `target`, else this machine); the binary.
fn dist_build(
    root: &Path,
    target_dir: &Path,
    target: Option<&str>,
    platform: Platform,
) -> Result<PathBuf> {
    let mut c = crate::cargo();
    c.args([
        "build",
        "--locked",
        "--profile",
        "dist",
        "-p",
        "mcpspec-cli",
    ])
    .current_dir(root);
    let mut dir = target_dir.to_path_buf();
    if let Some(t) = target {
        c.args(["--target", t]);
        dir.push(t);
    }
    if !c.status().context("running cargo build")?.success() {
        bail!("cargo build --profile dist -p mcpspec-cli failed");
    }
    Ok(dir.join("dist").join(platform.exe()))
}

/// The registry's `server.json` for mcpspec at `version`: the npm and PyPI packages over
/// stdio and the OCI image over Streamable HTTP, each with the arguments a person fills in
/// (the spec file, its database) and, for the image, the token it refuses to start without.
pub fn server_json(version: &str) -> Value {
    let stdio_args = json!([
        {"type": "positional", "value": "serve"},
        {"type": "named", "name": "--spec", "isRequired": true, "format": "filepath",
         "description": "The spec file to serve, e.g. /path/to/notes.yaml"},
        {"type": "named", "name": "--db", "format": "filepath",
         "description": "Its database (else the spec's variable or default path)"},
    ]);
    let stdio = |registry: &str| {
        json!({
            "registryType": registry,
            "identifier": "mcpspec",
            "version": version,
            "transport": {"type": "stdio"},
            "packageArguments": stdio_args,
        })
    };
    json!({
        "$schema": SERVER_SCHEMA,
        "name": REGISTRY_NAME,
        "description": "An MCP server written as YAML: SQL tools, resources and prompts over SQLite, PostgreSQL or MariaDB",
        "version": version,
        "repository": {"url": "https://github.com/mcpspec/mcpspec", "source": "github"},
        "packages": [
            stdio("npm"),
            stdio("pypi"),
            {
                "registryType": "oci",
                "registryBaseUrl": "https://ghcr.io",
                "identifier": OCI_REPOSITORY,
                "version": version,
                "transport": {"type": "streamable-http", "url": "http://localhost:8080/mcp"},
                "environmentVariables": [
                    {"name": "MCPSPEC_HTTP_TOKEN", "isRequired": true, "isSecret": true,
                     "description": "The bearer token clients must send; the image refuses to start without it or an OAuth issuer"},
                ],
            },
        ],
    })
}

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
    m.insert("mcpName".into(), json!(REGISTRY_NAME));
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
    // npm is a batch file on Windows, which Command finds only by its full name.
    let o = Command::new(if cfg!(windows) { "npm.cmd" } else { "npm" })
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

/// The maturin the wheel is built with.
pub const MATURIN: &str = "maturin==1.16.0";

/// Builds the wheel of the cli whose manifest is `manifest` (`server/cli/Cargo.toml`, or the
/// same crate unpacked from its tarball) with maturin in `profile` (for `target`, else this
/// machine) into `out`, installing maturin first when its pin is not there; the wheel's path.
pub fn pypi(
    root: &Path,
    manifest: &Path,
    profile: &str,
    target: Option<&str>,
    out: &Path,
) -> Result<PathBuf> {
    let venv = out.join("maturin");
    // A virtual environment's programs: bin/ on Unix, Scripts\ (with .exe) on Windows.
    let program = |name: &str| {
        if cfg!(windows) {
            venv.join("Scripts").join(format!("{name}.exe"))
        } else {
            venv.join("bin").join(name)
        }
    };
    let maturin = program("maturin");
    let pin = venv.join("pin.txt");
    if std::fs::read_to_string(&pin).ok().as_deref() != Some(MATURIN) {
        let made = Command::new(if cfg!(windows) { "python" } else { "python3" })
            .args(["-m", "venv", "--clear"])
            .arg(&venv)
            .status()
            .context("running python3 -m venv (Debian: apt-get install python3-venv)")?;
        if !made.success() {
            bail!(
                "python3 cannot make a virtual environment; on Debian or Ubuntu: apt-get install python3-venv"
            );
        }
        let pip = Command::new(program("pip"))
            .args(["install", "-q", "--disable-pip-version-check", MATURIN])
            .status()
            .context("running pip")?;
        if !pip.success() {
            bail!("pip install {MATURIN} failed");
        }
        std::fs::write(&pin, MATURIN)?;
    }
    // maturin runs cargo.
    let mut c = crate::clean(&maturin);
    c.args(["build", "--locked", "--quiet", "--profile", profile])
        .arg("--manifest-path")
        .arg(manifest)
        .arg("--out")
        .arg(out)
        .current_dir(root);
    if let Some(t) = target {
        c.args(["--target", t]);
    }
    let before = wheels(out)?;
    if !c.status().context("running maturin")?.success() {
        bail!("maturin build failed");
    }
    let made: Vec<PathBuf> = wheels(out)?
        .into_iter()
        .filter(|(w, when)| before.iter().all(|(b, t)| b != w || t != when))
        .map(|(w, _)| w)
        .collect();
    match made.as_slice() {
        [one] => Ok(one.clone()),
        other => bail!(
            "maturin left {} new wheels in {}, not one",
            other.len(),
            out.display()
        ),
    }
}

/// The wheels in `dir` with their modification times.
fn wheels(dir: &Path) -> Result<Vec<(PathBuf, std::time::SystemTime)>> {
    std::fs::create_dir_all(dir)?;
    let mut found = Vec::new();
    for e in std::fs::read_dir(dir)? {
        let path = e?.path();
        if path.extension().is_some_and(|x| x == "whl") {
            let when = std::fs::metadata(&path)?.modified()?;
            found.push((path, when));
        }
    }
    Ok(found)
}

/// The image's user and group id: not root, and no id a host is likely to give a person.
pub const OCI_UID: u32 = 10001;

/// What the image runs: the binary, then `serve` over Streamable HTTP on every interface,
/// for the spec in the `/data` volume (a `docker run ... IMAGE ARGS` replaces the command).
pub const OCI_COMMAND: &[&str] = &[
    "serve",
    "--spec",
    "/data/spec.yaml",
    "--http",
    "0.0.0.0:8080",
];

/// Builds the image of `binary` into `out/oci/` (tagged `version`) and `out/mcpspec-oci.tar`;
/// the archive's path.
pub fn oci(binary: &Path, version: &str, out: &Path) -> Result<PathBuf> {
    let layout = out.join("oci");
    let bundle = out.join("oci-bundle");
    for dir in [&layout, &bundle] {
        if dir.exists() {
            std::fs::remove_dir_all(dir).with_context(|| format!("clearing {}", dir.display()))?;
        }
    }
    let image = format!("{}:{version}", layout.display());
    umoci(&["init", "--layout", &layout.to_string_lossy()])?;
    umoci(&["new", "--image", &image])?;
    umoci(&["unpack", "--image", &image, &bundle.to_string_lossy()])?;
    rootfs(binary, &bundle.join("rootfs"))?;
    umoci(&["repack", "--image", &image, &bundle.to_string_lossy()])?;
    let user = format!("{OCI_UID}:{OCI_UID}");
    let label = format!("org.opencontainers.image.version={version}");
    let registry_label = format!("io.modelcontextprotocol.server.name={REGISTRY_NAME}");
    let mut config = vec![
        "config",
        "--image",
        &image,
        "--config.user",
        &user,
        "--config.entrypoint",
        "/usr/local/bin/mcpspec",
        "--config.exposedports",
        "8080/tcp",
        "--config.volume",
        "/data",
        "--config.workingdir",
        "/data",
        "--config.env",
        "HOME=/data",
        "--config.label",
        &label,
        "--config.label",
        "org.opencontainers.image.source=https://github.com/mcpspec/mcpspec",
        "--config.label",
        &registry_label,
    ];
    for arg in OCI_COMMAND {
        config.extend(["--config.cmd", arg]);
    }
    umoci(&config)?;
    umoci(&["gc", "--layout", &layout.to_string_lossy()])?;
    std::fs::remove_dir_all(&bundle)?;
    let archive = out.join("mcpspec-oci.tar");
    let tar = Command::new("tar")
        .arg("-C")
        .arg(&layout)
        .arg("-cf")
        .arg(&archive)
        .arg(".")
        .status()
        .context("running tar")?;
    if !tar.success() {
        bail!("tar of {} failed", layout.display());
    }
    Ok(archive)
}

/// The image's files: the binary and what it links, the user, the CA certificates the
/// OAuth and embedding clients trust, `/data` owned by the user, and `/tmp`.
fn rootfs(binary: &Path, root: &Path) -> Result<()> {
    let put = |path: &str, from: &Path| -> Result<()> {
        let to = root.join(path.trim_start_matches('/'));
        std::fs::create_dir_all(to.parent().expect("a directory"))?;
        std::fs::copy(from, &to).with_context(|| format!("copying {}", from.display()))?;
        Ok(())
    };
    put("/usr/local/bin/mcpspec", binary)?;
    executable(&root.join("usr/local/bin/mcpspec"))?;
    for lib in linked(binary)? {
        put(&lib, Path::new(&lib))?;
    }
    let certs = Path::new("/etc/ssl/certs/ca-certificates.crt");
    if certs.exists() {
        put("/etc/ssl/certs/ca-certificates.crt", certs)?;
    }
    std::fs::create_dir_all(root.join("etc"))?;
    std::fs::write(
        root.join("etc/passwd"),
        format!(
            "root:x:0:0:root:/root:/sbin/nologin\nmcpspec:x:{OCI_UID}:{OCI_UID}:mcpspec:/data:/sbin/nologin\n"
        ),
    )?;
    std::fs::write(
        root.join("etc/group"),
        format!("root:x:0:\nmcpspec:x:{OCI_UID}:\n"),
    )?;
    let data = root.join("data");
    std::fs::create_dir_all(&data)?;
    std::fs::create_dir_all(root.join("tmp"))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::os::unix::fs::chown(&data, Some(OCI_UID), Some(OCI_UID))
            .context("giving /data to the image's user (umoci unpacks as root here)")?;
        std::fs::set_permissions(root.join("tmp"), std::fs::Permissions::from_mode(0o1777))?;
    }
    Ok(())
}

/// The shared libraries `binary` links and the loader, as `ldd` names them.
fn linked(binary: &Path) -> Result<Vec<String>> {
    let out = Command::new("ldd")
        .arg(binary)
        .output()
        .context("running ldd")?;
    if !out.status.success() {
        bail!("ldd {} failed", binary.display());
    }
    Ok(libraries(&String::from_utf8_lossy(&out.stdout)))
}

/// The absolute paths in `ldd`'s report (`libc.so.6 => /lib/.../libc.so.6 (0x..)` and
/// `/lib64/ld-linux-x86-64.so.2 (0x..)`); the kernel's vDSO has none.
pub fn libraries(ldd: &str) -> Vec<String> {
    ldd.lines()
        .filter_map(|l| {
            let path = match l.split_once("=>") {
                Some((_, right)) => right.split_whitespace().next()?,
                None => l.split_whitespace().next()?,
            };
            path.starts_with('/').then(|| path.to_owned())
        })
        .collect()
}

fn umoci(args: &[&str]) -> Result<()> {
    let status = Command::new("umoci")
        .args(args)
        .status()
        .context("running umoci (Debian: apt-get install umoci)")?;
    if !status.success() {
        bail!("umoci {} failed", args.join(" "));
    }
    Ok(())
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
    fn server_json_lists_every_package_at_this_version() {
        let s = server_json("1.2.3");
        let packages = s["packages"].as_array().unwrap();
        let kinds: Vec<&str> = packages
            .iter()
            .map(|p| p["registryType"].as_str().unwrap())
            .collect();
        assert_eq!(kinds, ["npm", "pypi", "oci"]);
        assert!(packages.iter().all(|p| p["version"] == "1.2.3"));
        assert_eq!(s["name"], REGISTRY_NAME);
        assert_eq!(packages[2]["transport"]["type"], "streamable-http");
        assert_eq!(launcher_manifest("1.2.3")["mcpName"], REGISTRY_NAME);
    }

    #[test]
    fn the_pypi_readme_names_the_server_as_the_registry_checks() {
        let readme = include_str!("../../server/cli/README.md");
        assert!(
            readme.contains(&format!("mcp-name: {REGISTRY_NAME}")),
            "server/cli/README.md needs the line `mcp-name: {REGISTRY_NAME}`"
        );
    }

    #[test]
    fn ldd_reports_give_the_files_to_copy() {
        let ldd = "\tlinux-vdso.so.1 (0x00007ffd)\n\
                   \tlibgcc_s.so.1 => /lib/x86_64-linux-gnu/libgcc_s.so.1 (0x00007f1)\n\
                   \tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f2)\n\
                   \t/lib64/ld-linux-x86-64.so.2 (0x00007f3)\n";
        assert_eq!(
            libraries(ldd),
            [
                "/lib/x86_64-linux-gnu/libgcc_s.so.1",
                "/lib/x86_64-linux-gnu/libc.so.6",
                "/lib64/ld-linux-x86-64.so.2"
            ]
        );
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
