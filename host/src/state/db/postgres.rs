//! The PostgreSQL side of [`super::Db`]: `tokio-postgres` driven by a
//! runtime of its own (one thread, `skillhost-pg`), so that a caller
//! anywhere (a CLI command, an async task of the host, the writer thread)
//! waits for a query as it waits for SQLite, and no caller's runtime has
//! to drive the connection.
//!
//! Each connection prepares a statement once (by its SQL text) and keeps
//! it; `?N` parameters become `$N`. A connection the server closed is
//! opened again before the next query, unless it was inside a transaction
//! (whose work is lost: the transaction fails).

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use tokio_postgres::types::{IsNull, ToSql, Type, to_sql_checked};
use tokio_postgres::{Client, Statement};

use super::{DbError, Owned, Param, Result};
use crate::limits::DB_QUERY_TIMEOUT;

/// A parameter takes the type the server inferred for its place: an
/// integer fits a `bigint`, `integer`, `smallint`, `boolean` or `double`
/// column; text and bytes go as they are.
impl ToSql for Owned {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut bytes::BytesMut,
    ) -> std::result::Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        match self {
            Owned::Null => Ok(IsNull::Yes),
            Owned::Int(i) => match *ty {
                Type::INT8 => i.to_sql(ty, out),
                Type::INT4 => i32::try_from(*i)?.to_sql(ty, out),
                Type::INT2 => i16::try_from(*i)?.to_sql(ty, out),
                Type::BOOL => (*i != 0).to_sql(ty, out),
                Type::FLOAT8 => (*i as f64).to_sql(ty, out),
                _ => Err(format!("an integer parameter where {ty} was expected").into()),
            },
            Owned::Real(f) => f.to_sql(ty, out),
            Owned::Text(s) => s.as_str().to_sql(ty, out),
            Owned::Blob(b) => b.as_slice().to_sql(ty, out),
        }
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    to_sql_checked!();
}

/// The runtime that drives every PostgreSQL connection of the process.
pub(super) fn runtime() -> Result<&'static tokio::runtime::Runtime> {
    static RUNTIME: OnceLock<std::result::Result<tokio::runtime::Runtime, String>> =
        OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name("skillhost-pg")
                .enable_all()
                .build()
                .map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| DbError::Postgres {
            code: None,
            message: format!("cannot start the database runtime: {e}"),
        })
}

/// Runs `fut` on the database runtime and waits for it: on the calling
/// thread when it is outside any runtime, else on the runtime's thread
/// while this one waits.
fn run<T: Send + 'static>(fut: impl Future<Output = Result<T>> + Send + 'static) -> Result<T> {
    let rt = runtime()?;
    let bounded = async move {
        tokio::time::timeout(DB_QUERY_TIMEOUT, fut)
            .await
            .unwrap_or_else(|_| {
                Err(DbError::Postgres {
                    code: None,
                    message: format!(
                        "the database did not answer within {} s",
                        DB_QUERY_TIMEOUT.as_secs()
                    ),
                })
            })
    };
    if tokio::runtime::Handle::try_current().is_err() {
        return rt.block_on(bounded);
    }
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    rt.spawn(async move {
        let _ = tx.send(bounded.await);
    });
    rx.recv().unwrap_or_else(|_| {
        Err(DbError::Postgres {
            code: None,
            message: "the database task stopped".into(),
        })
    })
}

fn pg_error(e: tokio_postgres::Error) -> DbError {
    match e.as_db_error() {
        Some(db) => DbError::Postgres {
            code: Some(db.code().code().to_string()),
            message: match db.detail() {
                Some(d) => format!("{}: {} ({d})", db.severity(), db.message()),
                None => format!("{}: {}", db.severity(), db.message()),
            },
        },
        None => {
            let mut message = e.to_string();
            if let Some(source) = std::error::Error::source(&e) {
                message = format!("{message}: {source}");
            }
            DbError::Postgres {
                code: None,
                message,
            }
        }
    }
}

/// `?N` parameters as `$N` (outside quoted text).
pub(crate) fn numbered(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len() + 8);
    let mut quoted = false;
    for c in sql.chars() {
        match c {
            '\'' => {
                quoted = !quoted;
                out.push(c);
            }
            '?' if !quoted => out.push('$'),
            _ => out.push(c),
        }
    }
    out
}

/// One connection to a PostgreSQL server.
pub(crate) struct PgConn {
    target: super::tls::Target,
    client: Mutex<Arc<Client>>,
    statements: Mutex<HashMap<String, Statement>>,
    in_transaction: AtomicBool,
}

async fn open(target: super::tls::Target) -> Result<Client> {
    let (client, connection) = target.config.connect(target.tls).await.map_err(
        |e| match pg_error(e) {
            DbError::Postgres { code, message } if message.contains("invalid peer certificate") => {
                DbError::Postgres {
                    code,
                    message: format!(
                        "{message} (the server's certificate could not be verified: name the CA \
                         that signed it with `sslrootcert=PATH` in the database URL)"
                    ),
                }
            }
            e => e,
        },
    )?;
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::debug!("a database connection ended: {e}");
        }
    });
    Ok(client)
}

impl PgConn {
    /// Connects to the server `url` names (a `postgres://` URL; TLS as
    /// its `sslmode` asks, see `tls.rs`).
    pub fn connect(url: &str) -> Result<PgConn> {
        let target = super::tls::target(url, "skillhost")?;
        let client = run(open(target.clone()))?;
        Ok(PgConn {
            target,
            client: Mutex::new(Arc::new(client)),
            statements: Mutex::new(HashMap::new()),
            in_transaction: AtomicBool::new(false),
        })
    }

    /// The client, opened again first if the server closed it (outside a
    /// transaction).
    fn client(&self) -> Result<Arc<Client>> {
        let mut client = self.client.lock().unwrap_or_else(|e| e.into_inner());
        if client.is_closed() && !self.in_transaction.load(Ordering::Relaxed) {
            *client = Arc::new(run(open(self.target.clone()))?);
            self.statements
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clear();
        }
        Ok(client.clone())
    }

    /// The statement for `sql`, prepared on this connection once.
    fn statement(&self, client: &Arc<Client>, sql: &str) -> Result<Statement> {
        if let Some(s) = self
            .statements
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(sql)
        {
            return Ok(s.clone());
        }
        let text = numbered(sql);
        let c = client.clone();
        let stmt = run(async move { c.prepare(&text).await.map_err(pg_error) })?;
        self.statements
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(sql.to_string(), stmt.clone());
        Ok(stmt)
    }

    /// Runs a statement; how many rows it changed.
    pub fn execute(&self, sql: &str, params: &[&dyn Param]) -> Result<usize> {
        let client = self.client()?;
        let stmt = self.statement(&client, sql)?;
        let values: Vec<Owned> = params.iter().map(|p| Owned::of(p.value())).collect();
        run(async move {
            let refs: Vec<&(dyn ToSql + Sync)> =
                values.iter().map(|v| v as &(dyn ToSql + Sync)).collect();
            client
                .execute(&stmt, &refs)
                .await
                .map(|n| usize::try_from(n).unwrap_or(usize::MAX))
                .map_err(pg_error)
        })
    }

    /// Runs one statement once per row of parameters, pipelined: every
    /// execution is sent before the first answer is awaited, so a batch
    /// costs about one round trip, not one per row.
    pub fn execute_many(&self, sql: &str, rows: &[Vec<Owned>]) -> Result<()> {
        if rows.is_empty() {
            return Ok(());
        }
        let rows = rows.to_vec();
        let client = self.client()?;
        let stmt = self.statement(&client, sql)?;
        run(async move {
            let params: Vec<Vec<&(dyn ToSql + Sync)>> = rows
                .iter()
                .map(|r| r.iter().map(|v| v as &(dyn ToSql + Sync)).collect())
                .collect();
            futures_util::future::try_join_all(params.iter().map(|p| client.execute(&stmt, p)))
                .await
                .map(|_| ())
                .map_err(pg_error)
        })
    }

    /// Runs statements without parameters; notes where a transaction
    /// begins and ends.
    pub fn execute_batch(&self, sql: &str) -> Result<()> {
        let client = self.client()?;
        let text = sql.to_string();
        let out = run(async move { client.batch_execute(&text).await.map_err(pg_error) });
        let head = sql.trim_start();
        let starts = |word: &str| {
            head.get(..word.len())
                .is_some_and(|h| h.eq_ignore_ascii_case(word))
        };
        if starts("BEGIN") {
            self.in_transaction.store(out.is_ok(), Ordering::Relaxed);
        } else if starts("COMMIT") || starts("ROLLBACK") {
            self.in_transaction.store(false, Ordering::Relaxed);
        }
        out
    }

    /// Every row of the answer, as owned values.
    pub fn query(&self, sql: &str, params: &[&dyn Param]) -> Result<Vec<Vec<Owned>>> {
        let client = self.client()?;
        let stmt = self.statement(&client, sql)?;
        let values: Vec<Owned> = params.iter().map(|p| Owned::of(p.value())).collect();
        run(async move {
            let refs: Vec<&(dyn ToSql + Sync)> =
                values.iter().map(|v| v as &(dyn ToSql + Sync)).collect();
            let rows = client.query(&stmt, &refs).await.map_err(pg_error)?;
            rows.iter().map(row_values).collect()
        })
    }
}

/// A row's columns as owned values.
fn row_values(row: &tokio_postgres::Row) -> Result<Vec<Owned>> {
    let get_err = |e: tokio_postgres::Error| DbError::Value(e.to_string());
    (0..row.len())
        .map(|i| {
            let ty = row.columns()[i].type_();
            Ok(match *ty {
                Type::INT8 => row
                    .try_get::<_, Option<i64>>(i)
                    .map_err(get_err)?
                    .map_or(Owned::Null, Owned::Int),
                Type::INT4 => row
                    .try_get::<_, Option<i32>>(i)
                    .map_err(get_err)?
                    .map_or(Owned::Null, |v| Owned::Int(v.into())),
                Type::INT2 => row
                    .try_get::<_, Option<i16>>(i)
                    .map_err(get_err)?
                    .map_or(Owned::Null, |v| Owned::Int(v.into())),
                Type::OID => row
                    .try_get::<_, Option<u32>>(i)
                    .map_err(get_err)?
                    .map_or(Owned::Null, |v| Owned::Int(v.into())),
                Type::BOOL => row
                    .try_get::<_, Option<bool>>(i)
                    .map_err(get_err)?
                    .map_or(Owned::Null, |v| Owned::Int(v.into())),
                Type::FLOAT8 => row
                    .try_get::<_, Option<f64>>(i)
                    .map_err(get_err)?
                    .map_or(Owned::Null, Owned::Real),
                Type::FLOAT4 => row
                    .try_get::<_, Option<f32>>(i)
                    .map_err(get_err)?
                    .map_or(Owned::Null, |v| Owned::Real(v.into())),
                Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME => row
                    .try_get::<_, Option<String>>(i)
                    .map_err(get_err)?
                    .map_or(Owned::Null, Owned::Text),
                Type::BYTEA => row
                    .try_get::<_, Option<Vec<u8>>>(i)
                    .map_err(get_err)?
                    .map_or(Owned::Null, Owned::Blob),
                _ => {
                    return Err(DbError::Value(format!(
                        "column {} has type {ty}, which the host does not read (cast it)",
                        row.columns()[i].name()
                    )));
                }
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_are_renumbered_outside_quotes() {
        assert_eq!(
            numbered("SELECT a FROM t WHERE b = ?1 AND c = '?2' AND d = ?12"),
            "SELECT a FROM t WHERE b = $1 AND c = '?2' AND d = $12"
        );
    }
}
