//! What `pm` asks of a database server whose databases a project keeps (`.pm.json` names it
//! with `"postgres"` or `"mysql"`): one implementation per engine, each with the same names,
//! rules and errors as the SQLite files pm keeps otherwise.

use mcpspec::handler::HandlerError;

type Result<T> = std::result::Result<T, HandlerError>;

/// A database server's side of pm's tools. Names reach it checked (naming rules, the allowed
/// list); an engine quotes them as identifiers all the same.
pub(super) trait DatabaseServer {
    /// Where database `name` is, for results: a URL without its password.
    fn location(&self, name: &str) -> String;

    /// The server's databases (not its system ones) with their sizes in bytes, by name.
    fn databases(&self) -> Result<Vec<(String, u64)>>;

    fn exists(&self, name: &str) -> Result<bool>;

    /// Creates an empty database; an existing one is `DB_EXISTS`.
    fn create(&self, name: &str) -> Result<()>;

    /// Creates `target` holding what `source` holds; an existing target is `DB_EXISTS`.
    fn clone_database(&self, source: &str, target: &str) -> Result<()>;

    fn drop_database(&self, name: &str) -> Result<()>;

    /// The base tables of database `name` with their row counts, in creation order where the
    /// engine keeps it (PostgreSQL), else by name (MariaDB, whose creation times are seconds).
    fn tables(&self, name: &str) -> Result<Vec<(String, i64)>>;

    /// Database `name` as SQL that [`DatabaseServer::import`] takes back, only `tables` when
    /// given, from the engine's own dump tool.
    fn dump(&self, name: &str, tables: Option<&[String]>) -> Result<String>;

    /// Runs `sql` in database `name` (created first when missing), confined to it; whether it
    /// was created, and the tables after it. On failure a database this call created is gone;
    /// the error is the engine's words or the kind of statement refused, or the call's
    /// deadline.
    fn import(
        &self,
        name: &str,
        sql: &str,
    ) -> std::result::Result<(bool, Vec<String>), ImportFailure>;
}

/// Why an import failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum ImportFailure {
    /// Its SQL failed or was refused: the engine's words.
    Sql(String),
    /// The call's time ran out (or the client cancelled it) while the file ran; what it did
    /// was undone as for any failure.
    Stopped,
}

impl From<String> for ImportFailure {
    fn from(words: String) -> ImportFailure {
        ImportFailure::Sql(words)
    }
}

/// Database `name` on the server at `url`, for results: the URL with its password replaced
/// and its path naming `name`, its parameters kept.
pub(super) fn database_url(url: &str, name: &str) -> String {
    let base = mcpspec::__internal::backend::redact(url);
    let (head, query) = base
        .split_once('?')
        .map_or((base.as_str(), ""), |(h, q)| (h, q));
    let (scheme, rest) = head.split_once("://").unwrap_or(("", head));
    let server = rest.split_once('/').map_or(rest, |(s, _)| s);
    let query = if query.is_empty() {
        String::new()
    } else {
        format!("?{query}")
    };
    format!("{scheme}://{server}/{name}{query}")
}
