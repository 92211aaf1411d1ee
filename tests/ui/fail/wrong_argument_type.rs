//! The handlers of the golden `files` spec (tests/fixtures/handlers/spec.yaml), implemented
//! by hand with one mistake.

mod files {
    include!("../../fixtures/handlers/expected/files.rs");
}

use files::{args, outputs};
use mcpspec::handler::{Context, HandlerError, ResourceBody, ResourceVars};

struct Mine;

impl files::FilesListHandler for Mine {
    fn list_files(&self, _: &Context, _: args::FilesList) -> Result<outputs::FilesList, HandlerError> {
        Ok(outputs::FilesList { files: Vec::new(), total: None })
    }
}

// The handler of `files.delete` takes the file name instead of the typed arguments.
impl files::FilesDeleteHandler for Mine {
    fn delete_file(&self, _: &Context, name: String) -> Result<outputs::FilesDelete, HandlerError> {
        Err(HandlerError::new("NOT_ALLOWED").with("name", name))
    }
}

impl files::FileResourceHandler for Mine {
    fn read_file(&self, _: &Context, _: &str, _: &ResourceVars) -> Result<ResourceBody, HandlerError> {
        Ok(ResourceBody::text(""))
    }
}

fn main() {
    let _ = files::dispatcher(Mine);
}
