//! Nothing to build: this script exists so that the build-dependencies in `Cargo.toml`, which
//! cargo resolves only for a package with a build script, take part in every build of
//! mcpspec's crates (see the comment there).

fn main() {}
