//! Compiles every `spec/*.yaml` of the workspace into Rust at build time with codegen's build
//! API. An invalid spec fails the build with diagnostics that point at file:line:column.

fn main() -> Result<(), codegen::build::Error> {
    // The specs sit at the workspace root; diagnostics and the generated code name them from
    // there, as `spec/<server>.yaml`.
    codegen::build::configure("../spec")
        .display_as("spec")
        .compile()
}
