//! What the spec compiler (its statement checks) and the runtime (its SQLite engine) do to every
//! SQLite connection they open, so that a statement prepares and runs alike in both: sqlite-vec
//! is there ([`vec`](mod@vec)), and a spec's SQL that mcpspec runs on its own is confined ([`confine`]).

pub mod confine;
pub mod vec;
