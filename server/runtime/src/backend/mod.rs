//! The database seam: the values the engine binds and reads and the kinds of failure it tells
//! apart, in terms of no particular database. [`sqlite`] is the embedded implementation; the
//! generated code and the handler API name only these types.

pub mod sqlite;

/// A value bound to a statement parameter or read from a result column.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Integer(i64),
    Real(f64),
    Text(String),
    Blob(Vec<u8>),
}

/// What went wrong in the database, whatever the database: the engine maps each kind to a
/// tool error without quoting the database's own message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// A constraint (unique, not null, foreign key, check) refused a change.
    Constraint,
    /// Another writer holds the database; the call may be retried.
    Busy,
    /// The database or the connection does not accept writes.
    ReadOnly,
    /// The statement was stopped by the deadline or a cancellation.
    Interrupted,
    /// Anything else.
    Other,
}
