//! Compiles every `spec/*.yaml` into Rust at build time with the `codegen` library. An invalid
//! spec fails the build with diagnostics that point at file:line:column.

use std::path::{Path, PathBuf};

fn main() {
    let manifest = PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"),
    );
    let root = manifest
        .parent()
        .expect("server/ sits in the workspace")
        .to_path_buf();
    let spec_dir = root.join("spec");
    println!("cargo:rerun-if-changed={}", spec_dir.display());
    if let Ok(entries) = std::fs::read_dir(&spec_dir) {
        for e in entries.flatten() {
            println!("cargo:rerun-if-changed={}", e.path().display());
        }
    }
    let specs = match codegen::load_dir(&spec_dir, Path::new("spec")) {
        Ok(s) => s,
        Err(problems) => {
            // Diagnostics name files relative to the workspace root; render from there.
            let _ = std::env::set_current_dir(&root);
            eprintln!("\n{}", problems.render());
            std::process::exit(1);
        }
    };
    let out =
        PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR")).join("generated");
    std::fs::create_dir_all(&out).expect("create OUT_DIR/generated");
    for (path, text) in codegen::render_all(&specs) {
        let target = out.join(path);
        // Write only on change so that an unrelated rebuild does not recompile the server.
        if std::fs::read_to_string(&target).ok().as_deref() != Some(text.as_str()) {
            std::fs::write(&target, text).expect("write generated code");
        }
    }
}
