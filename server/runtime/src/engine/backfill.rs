//! A `backfill:` tool: rows whose text still needs a vector of the running model, embedded
//! and stored a batch at a time until `pending` finds none. Each batch is read, embedded
//! (one provider call, batched as the provider allows) and stored in its own write
//! transaction, and the client hears the progress after each; a run stopped half-way (a kill,
//! the deadline, a cancellation) keeps what it stored, and the next run goes on from there.

use super::*;
use crate::backend::ValueRef;
use crate::def::BackfillDef;
use crate::handler::{Progress, ProgressSink};

/// A row `pending` gave: the key `store` finds it by, and its text.
struct Pending {
    key: SqlValue,
    text: String,
}

impl Engine {
    /// Runs a backfill tool to its end (or its stop), reporting progress to `progress`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn run_backfill(
        &self,
        tool: &CompiledTool,
        b: &'static BackfillDef,
        args: &Arguments,
        caller: Option<&crate::auth::Identity>,
        request: u64,
        stop: &Stop,
        progress: Option<ProgressSink>,
    ) -> Result<Reply, CallError> {
        let name = tool.def.name;
        caller_fits(tool.def, caller)?;
        if self.read_only {
            return Err(ToolError::new(
                "READ_ONLY",
                format!("`{name}` changes the database, and this server is running read-only; restart it without --read-only to allow writes"),
            )
            .into());
        }
        let Some(provider) = self.embeddings.provider(b.embed) else {
            let why = self.embeddings.off(b.embed).unwrap_or("it is off");
            return Err(ToolError::new(
                "EMBEDDINGS_OFF",
                format!(
                    "`{name}` makes vectors, and the embedding provider `{}` is off: {why}",
                    b.embed
                ),
            )
            .into());
        };
        let size = b
            .size
            .and_then(|a| args.get(a))
            .and_then(Value::as_i64)
            .or_else(|| self.def.embedding(b.embed).map(|e| i64::from(e.batch)))
            .unwrap_or(64)
            .clamp(1, 10_000);
        let mut params = crate::params::bind(&tool.def.bind, args, caller);
        self.provider_params(tool.def, &mut params, stop);
        let db = self.db()?;
        let acting = self.acting(db, name, caller)?;
        let acting = acting.as_ref();
        let job = |st: &'static StatementDef, writes: bool| Job {
            name,
            prefix: "",
            statements: std::slice::from_ref(st),
            single: true,
            writes,
        };
        let timeout = self.timeout(tool.def);
        let interrupted = |j: Job, e: ToolError| self.interrupted(j, e, &stop.cancel, timeout);
        let remaining = |params: &crate::params::Params| -> Result<Option<i64>, ToolError> {
            let Some(st) = b.statement("remaining") else {
                return Ok(None);
            };
            let j = job(st, false);
            let bind = |n: &str| param(params, n);
            self.in_session(db, j, acting, stop, request, |session| {
                scalar(session, st, &bind)
                    .map_err(|f| self.db_error(j, f, request))
                    .map(|v| v.as_i64())
            })
            .map_err(|e| interrupted(j, e))
        };
        let total = remaining(&params)?;
        let (pending, store) = match (b.statement("pending"), b.statement("store")) {
            (Some(p), Some(s)) => (p, s),
            _ => unreachable!("a backfill has `pending` and `store`"),
        };
        let (mut embedded, mut batches) = (0i64, 0i64);
        loop {
            if stop.now() {
                return Err(stopped(name, stop, embedded, batches).into());
            }
            let rows = self
                .in_session(db, job(pending, false), acting, stop, request, |session| {
                    pending_rows(session, pending, &params, size)
                        .map_err(|f| self.db_error(job(pending, false), f, request))
                })
                .map_err(|e| interrupted(job(pending, false), e))?;
            if rows.is_empty() {
                break;
            }
            let texts: Vec<&str> = rows.iter().map(|r| r.text.as_str()).collect();
            let cancel = &stop.cancel;
            let vectors = provider
                .embed(&texts, stop.deadline(), &|| cancel.load(Ordering::Relaxed))
                .map_err(|e| match e {
                    crate::embed::EmbedError::Stopped => stopped(name, stop, embedded, batches),
                    crate::embed::EmbedError::Failed(why) | crate::embed::EmbedError::Off(why) => ToolError::new(
                        "EMBEDDING_FAILED",
                        format!("`{name}` could not embed a batch: {why}; {embedded} rows were stored in {batches} batches before it, and a new call goes on from there"),
                    ),
                })?;
            let stored = self
                .in_session(db, job(store, true), acting, stop, request, |session| {
                    let mut changed = 0;
                    for (row, v) in rows.iter().zip(&vectors) {
                        let bind = |n: &str| match n {
                            "key" => row.key.clone(),
                            "text" => SqlValue::Text(row.text.clone()),
                            "vector" => SqlValue::Vector(v.clone()),
                            _ => param(&params, n),
                        };
                        let c = session
                            .execute(statement_sql(store, session.dialect()), &bind)
                            .map_err(|f| self.db_error(job(store, true), f, request))?;
                        changed += c.changes as i64;
                    }
                    Ok(changed)
                })
                .map_err(|e| interrupted(job(store, true), e))?;
            if stored == 0 {
                return Err(ToolError::new(
                    "INTERNAL_ERROR",
                    format!("`{name}` stopped: `store` changed none of the {} rows `pending` gave, so `pending` would give them again; `pending` must leave out the rows `store` did", rows.len()),
                )
                .into());
            }
            embedded += stored;
            batches += 1;
            if let Some(sink) = &progress {
                sink(Progress {
                    done: embedded as f64,
                    total: total.map(|t| t.max(embedded) as f64),
                    message: Some(match total {
                        Some(t) => format!("{embedded} of {t} rows embedded"),
                        None => format!("{embedded} rows embedded"),
                    }),
                });
            }
        }
        let left = remaining(&params)?;
        let mut out = json!({
            "embedded": embedded,
            "batches": batches,
            "model": provider.model(),
        });
        if let Some(left) = left {
            out["remaining"] = json!(left);
        }
        Ok(Reply::Done(Success {
            structured: out,
            content: false,
        }))
    }
}

/// The value of the parameter `n` among `params`; NULL when it is not there.
fn param(params: &crate::params::Params, n: &str) -> SqlValue {
    params
        .iter()
        .find(|(p, _)| *p == n)
        .map_or(SqlValue::Null, |(_, v)| v.clone())
}

/// The rows `pending` gives with `:batch` at `size`.
fn pending_rows(
    session: &mut dyn Session,
    st: &'static StatementDef,
    params: &crate::params::Params,
    size: i64,
) -> Result<Vec<Pending>, Failure> {
    let bind = |n: &str| match n {
        "batch" => SqlValue::Integer(size),
        _ => param(params, n),
    };
    let mut out = Vec::new();
    let mut at: Option<(usize, usize)> = None;
    session.query(statement_sql(st, session.dialect()), &bind, &mut |row| {
        let (k, t) = *at.get_or_insert_with(|| {
            let names = row.names();
            let find = |c: &str| names.iter().position(|n| *n == c).unwrap_or(0);
            (find("key"), find("text"))
        });
        let text = match row.value(t) {
            ValueRef::Text(t) => String::from_utf8_lossy(t).into_owned(),
            _ => String::new(),
        };
        out.push(Pending {
            key: row.value(k).to_owned(),
            text,
        });
        true
    })?;
    Ok(out)
}

/// The error of a backfill stopped by its deadline or a cancellation: what it stored.
fn stopped(name: &str, stop: &Stop, embedded: i64, batches: i64) -> ToolError {
    let (code, why) = if stop.cancel.load(Ordering::Relaxed) {
        ("CANCELLED", "was cancelled")
    } else {
        ("TIMEOUT", "ran out of time")
    };
    ToolError::new(
        code,
        format!(
            "`{name}` {why} after storing {embedded} rows in {batches} batches; they are kept, and a new call goes on from there"
        ),
    )
}
