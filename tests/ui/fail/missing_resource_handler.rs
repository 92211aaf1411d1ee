//! The handlers of the golden `files` spec (tests/fixtures/handlers/spec.yaml), implemented
//! by hand with the resource handler missing.

mod files {
    include!("../../fixtures/handlers/expected/files.rs");
}

use files::{args, outputs};
use mcpspec::handler::{Context, HandlerError};

struct Mine;

impl files::FilesListHandler for Mine {
    fn list_files(&self, _: &Context, _: args::FilesList) -> Result<outputs::FilesList, HandlerError> {
        Ok(outputs::FilesList { files: Vec::new(), total: None })
    }
}

impl files::FilesDeleteHandler for Mine {
    fn delete_file(&self, _: &Context, _: args::FilesDelete) -> Result<outputs::FilesDelete, HandlerError> {
        Ok(outputs::FilesDelete { deleted: true })
    }
}

// The handler of the resource `file` is missing.

fn main() {
    let _ = files::dispatcher(Mine);
}
