//! `mcpspec dev` compiles a spec again at every save and serves the definitions it builds,
//! which the runtime keeps as `&'static` tables. This measures what a save of an unchanged spec
//! keeps: the bytes still allocated after each compile, counted by this binary's allocator
//! (`stats_alloc`; the file's one test, so that nothing else allocates meanwhile).

use std::alloc::System;
use std::path::Path;

use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};

#[global_allocator]
static ALLOCATOR: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Compiles every seed spec and builds its definitions, as a save in `dev` does.
fn save(specs: &[(String, String)]) {
    for (path, text) in specs {
        let spec = mcpspec_codegen::compile(Path::new(path), text).expect("a seed spec compiles");
        let def = mcpspec_codegen::defs::server_def(&spec);
        assert_eq!(def.name, spec.name());
    }
}

/// Saves after the first two; each compiles the five seeds (30 to 100 ms in a debug build).
/// One save that kept anything would fail it: without the interning of slices each keeps 133
/// blocks.
const SAVES: usize = 50;

#[test]
fn saves_of_the_same_specs_keep_no_byte_more_than_the_first() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let specs: Vec<(String, String)> = ["studio", "laminark", "knowledge", "pm", "lessons"]
        .iter()
        .map(|name| {
            let path = root.join(format!("spec/{name}.yaml"));
            let text = std::fs::read_to_string(&path).expect("a seed spec");
            (path.to_string_lossy().into_owned(), text)
        })
        .collect();
    // The first saves build and keep the definitions (and whatever the libraries set up once);
    // every save after them finds what it builds already kept.
    save(&specs);
    save(&specs);
    let region = Region::new(ALLOCATOR);
    for _ in 0..SAVES {
        save(&specs);
    }
    // `bytes_allocated` and `bytes_deallocated` count a reallocation's growth and shrinkage.
    let c = region.change();
    let (blocks, bytes) = (
        c.allocations as i64 - c.deallocations as i64,
        c.bytes_allocated as i64 - c.bytes_deallocated as i64,
    );
    assert_eq!(
        (blocks, bytes),
        (0, 0),
        "{SAVES} saves of unchanged specs kept {blocks} blocks, {bytes} bytes"
    );
}
