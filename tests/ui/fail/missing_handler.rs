//! The `pm` handlers implemented by hand, with one mistake.

use server::generated::pm::{self, args, outputs};
use server::handler::{Context, HandlerError};

struct Mine;

macro_rules! stub {
    ($($trait:ident $method:ident $ty:ident;)*) => {$(
        impl pm::$trait for Mine {
            fn $method(&self, _: &Context, _: args::$ty) -> Result<outputs::$ty, HandlerError> {
                Err(HandlerError::new("UNIMPLEMENTED"))
            }
        }
    )*};
}

stub! {
    ProjectInfoHandler project_info ProjectInfo;
    ProjectInitHandler project_init ProjectInit;
    DbListHandler db_list DbList;
    DbDumpHandler db_dump DbDump;
    DbImportHandler db_import DbImport;
    DbCreateHandler db_create DbCreate;
    DbCloneHandler db_clone DbClone;
    DbDumpsHandler db_dumps DbDumps;
    WorktreeListHandler worktree_list WorktreeList;
    WorktreeCreateHandler worktree_create WorktreeCreate;
    WorktreeRemoveHandler worktree_remove WorktreeRemove;
    WorkflowCreateHandler workflow_create WorkflowCreate;
    WorkflowRemoveHandler workflow_remove WorkflowRemove;
}

// The handler of `db.drop` is missing.

fn main() {
    let _ = pm::dispatcher(Mine);
}
