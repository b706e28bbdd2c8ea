//! One connection to the host's database, whichever it is: the embedded
//! SQLite file of the data dir (the default) or a PostgreSQL server that
//! several replicas share (`database` in `settings.json`, or
//! `SKILLHOST_DATABASE`).
//!
//! Queries are written once, in the SQL both understand, with numbered
//! parameters (`?1`, `?2`, …); the PostgreSQL side renumbers them (`$1`).
//! Where the dialects differ (JSON functions, maintenance), the caller
//! asks [`Db::dialect`] and writes each. Parameters and columns are the
//! four kinds both keep: null, integers (booleans as 0/1), text and bytes.
//!
//! Both backends are synchronous to their callers, as SQLite always was:
//! a PostgreSQL query is run by a small runtime of its own
//! (`postgres.rs`) and the caller waits for its answer.

#[cfg(feature = "postgres")]
mod feed;
#[cfg(feature = "postgres")]
mod postgres;
mod sqlite;
#[cfg(feature = "postgres")]
mod tls;
#[cfg(not(feature = "postgres"))]
mod without_postgres;

#[cfg(not(feature = "postgres"))]
pub(crate) use self::without_postgres::{ChangeFeed, PgConn};
#[cfg(feature = "postgres")]
pub(crate) use self::{feed::ChangeFeed, postgres::PgConn};

use std::fmt;

/// The channel the triggers of `migrations.rs` notify on PostgreSQL, and
/// the change feed (`feed.rs`) listens on.
pub(crate) const FEED_CHANNEL: &str = "skillhost_changes";

/// Which SQL a connection speaks, where the two differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dialect {
    /// The embedded SQLite file.
    Sqlite,
    /// A PostgreSQL server.
    Postgres,
}

/// What went wrong with the database.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    /// A query that must return a row returned none.
    #[error("the query returned no row")]
    NoRows,
    /// SQLite refused or failed.
    #[error("{0}")]
    Sqlite(#[from] rusqlite::Error),
    /// PostgreSQL refused or failed (or the connection to it did).
    #[error("{message}")]
    Postgres {
        /// The SQLSTATE code, when the server answered with one.
        code: Option<String>,
        /// What went wrong.
        message: String,
    },
    /// A column held a value of another kind than the one asked for, or a
    /// parameter did not fit its column.
    #[error("{0}")]
    Value(String),
    /// A PostgreSQL database was named to a build without the `postgres`
    /// feature.
    #[error(
        "{named_by} names a PostgreSQL database, but this skillhost was built without the \
         `postgres` feature: build it with that feature (one of the defaults), or keep the \
         state in the data dir's SQLite file"
    )]
    PostgresNotBuilt {
        /// What named the database (and the URL, without its password).
        named_by: String,
    },
}

impl DbError {
    /// Whether the failure is a conflict with a concurrent transaction that
    /// running the transaction again resolves (PostgreSQL's serialization
    /// failures and deadlocks; SQLite serialises writers instead).
    pub(crate) fn is_retryable(&self) -> bool {
        matches!(self, DbError::Postgres { code: Some(c), .. } if c == "40001" || c == "40P01")
    }
}

/// What the database's calls return.
pub(crate) type Result<T, E = DbError> = std::result::Result<T, E>;

/// A value as both databases keep it, borrowed from a parameter or a row.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum ValueRef<'a> {
    /// SQL NULL.
    Null,
    /// An integer (booleans are 0 and 1).
    Int(i64),
    /// A floating-point number (only ever read, never written by the host).
    Real(f64),
    /// Text.
    Text(&'a str),
    /// Bytes.
    Blob(&'a [u8]),
}

impl ValueRef<'_> {
    fn kind(&self) -> &'static str {
        match self {
            ValueRef::Null => "null",
            ValueRef::Int(_) => "an integer",
            ValueRef::Real(_) => "a real",
            ValueRef::Text(_) => "text",
            ValueRef::Blob(_) => "bytes",
        }
    }
}

/// A value owned by a parameter on its way to the server or by a row on
/// its way back.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Owned {
    /// SQL NULL.
    Null,
    /// An integer.
    Int(i64),
    /// A floating-point number.
    Real(f64),
    /// Text.
    Text(String),
    /// Bytes.
    Blob(Vec<u8>),
}

impl Owned {
    /// The value, owned.
    pub(crate) fn of(v: ValueRef<'_>) -> Owned {
        match v {
            ValueRef::Null => Owned::Null,
            ValueRef::Int(i) => Owned::Int(i),
            ValueRef::Real(f) => Owned::Real(f),
            ValueRef::Text(s) => Owned::Text(s.to_string()),
            ValueRef::Blob(b) => Owned::Blob(b.to_vec()),
        }
    }

    /// The value, borrowed.
    pub(crate) fn as_ref(&self) -> ValueRef<'_> {
        match self {
            Owned::Null => ValueRef::Null,
            Owned::Int(i) => ValueRef::Int(*i),
            Owned::Real(f) => ValueRef::Real(*f),
            Owned::Text(s) => ValueRef::Text(s),
            Owned::Blob(b) => ValueRef::Blob(b),
        }
    }
}

/// A query parameter.
pub(crate) trait Param {
    /// The value bound.
    fn value(&self) -> ValueRef<'_>;
}

impl<T: Param + ?Sized> Param for &T {
    fn value(&self) -> ValueRef<'_> {
        (**self).value()
    }
}

impl<T: Param> Param for Option<T> {
    fn value(&self) -> ValueRef<'_> {
        match self {
            Some(v) => v.value(),
            None => ValueRef::Null,
        }
    }
}

impl Param for i64 {
    fn value(&self) -> ValueRef<'_> {
        ValueRef::Int(*self)
    }
}

impl Param for i32 {
    fn value(&self) -> ValueRef<'_> {
        ValueRef::Int(i64::from(*self))
    }
}

impl Param for u32 {
    fn value(&self) -> ValueRef<'_> {
        ValueRef::Int(i64::from(*self))
    }
}

impl Param for bool {
    fn value(&self) -> ValueRef<'_> {
        ValueRef::Int(i64::from(*self))
    }
}

impl Param for str {
    fn value(&self) -> ValueRef<'_> {
        ValueRef::Text(self)
    }
}

impl Param for String {
    fn value(&self) -> ValueRef<'_> {
        ValueRef::Text(self)
    }
}

impl Param for [u8] {
    fn value(&self) -> ValueRef<'_> {
        ValueRef::Blob(self)
    }
}

impl Param for Vec<u8> {
    fn value(&self) -> ValueRef<'_> {
        ValueRef::Blob(self)
    }
}

impl<const N: usize> Param for [u8; N] {
    fn value(&self) -> ValueRef<'_> {
        ValueRef::Blob(self)
    }
}

impl Param for Owned {
    fn value(&self) -> ValueRef<'_> {
        self.as_ref()
    }
}

/// The parameters of a query, in order: `params![a, b]` binds `?1` to `a`
/// and `?2` to `b`.
macro_rules! params {
    () => { &[] as &[&dyn $crate::state::db::Param] };
    ($($p:expr),+ $(,)?) => { &[$(&$p as &dyn $crate::state::db::Param),+] as &[&dyn $crate::state::db::Param] };
}
pub(crate) use params;

/// A value read from a column.
pub(crate) trait FromValue: Sized {
    /// Converts the column's value, or says why it cannot.
    fn from_value(v: ValueRef<'_>) -> Result<Self>;
}

fn mismatch<T>(want: &str, got: ValueRef<'_>) -> Result<T> {
    Err(DbError::Value(format!(
        "a column holds {}, where {want} was expected",
        got.kind()
    )))
}

impl FromValue for i64 {
    fn from_value(v: ValueRef<'_>) -> Result<Self> {
        match v {
            ValueRef::Int(i) => Ok(i),
            other => mismatch("an integer", other),
        }
    }
}

impl FromValue for u32 {
    fn from_value(v: ValueRef<'_>) -> Result<Self> {
        match v {
            ValueRef::Int(i) => u32::try_from(i)
                .map_err(|_| DbError::Value(format!("{i} is out of range for a 32-bit count"))),
            other => mismatch("an integer", other),
        }
    }
}

impl FromValue for bool {
    fn from_value(v: ValueRef<'_>) -> Result<Self> {
        match v {
            ValueRef::Int(i) => Ok(i != 0),
            other => mismatch("a boolean", other),
        }
    }
}

impl FromValue for f64 {
    fn from_value(v: ValueRef<'_>) -> Result<Self> {
        match v {
            ValueRef::Real(f) => Ok(f),
            ValueRef::Int(i) => Ok(i as f64),
            other => mismatch("a number", other),
        }
    }
}

impl FromValue for String {
    fn from_value(v: ValueRef<'_>) -> Result<Self> {
        match v {
            ValueRef::Text(s) => Ok(s.to_string()),
            other => mismatch("text", other),
        }
    }
}

impl FromValue for Vec<u8> {
    fn from_value(v: ValueRef<'_>) -> Result<Self> {
        match v {
            ValueRef::Blob(b) => Ok(b.to_vec()),
            other => mismatch("bytes", other),
        }
    }
}

impl<T: FromValue> FromValue for Option<T> {
    fn from_value(v: ValueRef<'_>) -> Result<Self> {
        match v {
            ValueRef::Null => Ok(None),
            other => T::from_value(other).map(Some),
        }
    }
}

/// One row of a query's answer.
pub(crate) struct Row<'a>(RowOf<'a>);

enum RowOf<'a> {
    Sqlite(&'a rusqlite::Row<'a>),
    Postgres(&'a [Owned]),
}

impl Row<'_> {
    /// Column `i` (from 0).
    pub fn get<T: FromValue>(&self, i: usize) -> Result<T> {
        T::from_value(self.value(i)?)
    }

    /// Column `i` as an owned value, whatever its kind (copying rows
    /// between databases).
    pub fn owned(&self, i: usize) -> Result<Owned> {
        Ok(Owned::of(self.value(i)?))
    }

    /// Column `i` as text borrowed from the row (`""` for null).
    pub fn get_str(&self, i: usize) -> Result<&str> {
        match self.value(i)? {
            ValueRef::Text(s) => Ok(s),
            ValueRef::Null => Ok(""),
            other => mismatch("text", other),
        }
    }

    fn value(&self, i: usize) -> Result<ValueRef<'_>> {
        match &self.0 {
            RowOf::Sqlite(r) => sqlite::value(r, i),
            RowOf::Postgres(r) => r
                .get(i)
                .map(Owned::as_ref)
                .ok_or_else(|| DbError::Value(format!("no column {i}"))),
        }
    }
}

/// A connection.
pub(crate) enum Db {
    /// The data dir's SQLite file.
    Sqlite(rusqlite::Connection),
    /// A PostgreSQL server.
    Postgres(Box<PgConn>),
}

impl fmt::Debug for Db {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Db::Sqlite(_) => "Db::Sqlite",
            Db::Postgres(_) => "Db::Postgres",
        })
    }
}

impl Db {
    /// Which SQL this connection speaks.
    pub fn dialect(&self) -> Dialect {
        match self {
            Db::Sqlite(_) => Dialect::Sqlite,
            Db::Postgres(_) => Dialect::Postgres,
        }
    }

    /// Runs a statement; returns how many rows it changed.
    pub fn execute(&self, sql: &str, params: &[&dyn Param]) -> Result<usize> {
        match self {
            Db::Sqlite(c) => sqlite::execute(c, sql, params),
            Db::Postgres(c) => c.execute(sql, params),
        }
    }

    /// Runs one statement once per row of `rows`; on PostgreSQL the
    /// executions are pipelined (one round trip for the batch).
    pub fn execute_many(&self, sql: &str, rows: &[Vec<Owned>]) -> Result<()> {
        match self {
            Db::Sqlite(c) => {
                for row in rows {
                    let params: Vec<&dyn Param> = row.iter().map(|v| v as &dyn Param).collect();
                    sqlite::execute(c, sql, &params)?;
                }
                Ok(())
            }
            Db::Postgres(c) => c.execute_many(sql, rows),
        }
    }

    /// Runs statements separated by `;`, without parameters.
    pub fn execute_batch(&self, sql: &str) -> Result<()> {
        match self {
            Db::Sqlite(c) => Ok(c.execute_batch(sql)?),
            Db::Postgres(c) => c.execute_batch(sql),
        }
    }

    /// Hands each row of the answer to `each`, in order.
    pub fn query_each(
        &self,
        sql: &str,
        params: &[&dyn Param],
        mut each: impl FnMut(&Row<'_>) -> Result<()>,
    ) -> Result<()> {
        match self {
            Db::Sqlite(c) => sqlite::query_each(c, sql, params, |r| each(&Row(RowOf::Sqlite(r)))),
            Db::Postgres(c) => {
                for r in c.query(sql, params)? {
                    each(&Row(RowOf::Postgres(&r)))?;
                }
                Ok(())
            }
        }
    }

    /// Every row of the answer, each made by `f`.
    pub fn query_map<T>(
        &self,
        sql: &str,
        params: &[&dyn Param],
        mut f: impl FnMut(&Row<'_>) -> Result<T>,
    ) -> Result<Vec<T>> {
        let mut out = Vec::new();
        self.query_each(sql, params, |r| {
            out.push(f(r)?);
            Ok(())
        })?;
        Ok(out)
    }

    /// The first row of the answer made by `f`, or `None`.
    pub fn query_opt<T>(
        &self,
        sql: &str,
        params: &[&dyn Param],
        f: impl FnOnce(&Row<'_>) -> Result<T>,
    ) -> Result<Option<T>> {
        let mut f = Some(f);
        let mut out = None;
        self.query_each(sql, params, |r| {
            if let Some(f) = f.take() {
                out = Some(f(r)?);
            }
            Ok(())
        })?;
        Ok(out)
    }

    /// The first row of the answer made by `f`; [`DbError::NoRows`] when
    /// there is none.
    pub fn query_row<T>(
        &self,
        sql: &str,
        params: &[&dyn Param],
        f: impl FnOnce(&Row<'_>) -> Result<T>,
    ) -> Result<T> {
        self.query_opt(sql, params, f)?.ok_or(DbError::NoRows)
    }

    /// Runs `f` in one transaction: committed if it returns `Ok`, rolled
    /// back if it fails (or panics). SQLite takes the write lock at the
    /// start (`BEGIN IMMEDIATE`); PostgreSQL runs it serializable and runs
    /// `f` again (a bounded number of times) when a concurrent transaction
    /// conflicted with it, so `f` must do nothing outside the database.
    pub fn transaction<T>(&self, mut f: impl FnMut(&Db) -> Result<T>) -> Result<T> {
        let begin = match self {
            Db::Sqlite(_) => "BEGIN IMMEDIATE",
            Db::Postgres(_) => "BEGIN ISOLATION LEVEL SERIALIZABLE",
        };
        let mut attempt = 0;
        loop {
            attempt += 1;
            self.execute_batch(begin)?;
            let guard = Rollback(self);
            let out = f(self).and_then(|v| self.execute_batch("COMMIT").map(|()| v));
            match out {
                Ok(v) => {
                    std::mem::forget(guard);
                    return Ok(v);
                }
                Err(e) => {
                    drop(guard);
                    if e.is_retryable() && attempt < crate::limits::DB_TRANSACTION_ATTEMPTS {
                        continue;
                    }
                    return Err(e);
                }
            }
        }
    }
}

/// Rolls back the open transaction unless forgotten (on an error or a
/// panic inside it).
struct Rollback<'a>(&'a Db);

impl Drop for Rollback<'_> {
    fn drop(&mut self) {
        let _ = self.0.execute_batch("ROLLBACK");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sqlite() -> Db {
        Db::Sqlite(rusqlite::Connection::open_in_memory().unwrap())
    }

    #[test]
    fn parameters_and_columns_keep_their_kind() {
        let db = sqlite();
        db.execute_batch("CREATE TABLE t (i INTEGER, s TEXT, b BLOB, n TEXT)")
            .unwrap();
        let none: Option<&str> = None;
        let n = db
            .execute(
                "INSERT INTO t (i, s, b, n) VALUES (?1, ?2, ?3, ?4)",
                params![7i64, "seven", vec![7u8, 0], none],
            )
            .unwrap();
        assert_eq!(n, 1);
        let row = db
            .query_row("SELECT i, s, b, n FROM t", params![], |r| {
                Ok((
                    r.get::<i64>(0)?,
                    r.get::<String>(1)?,
                    r.get::<Vec<u8>>(2)?,
                    r.get::<Option<String>>(3)?,
                ))
            })
            .unwrap();
        assert_eq!(row, (7, "seven".into(), vec![7, 0], None));
        let wrong = db.query_row("SELECT s FROM t", params![], |r| r.get::<i64>(0));
        assert!(matches!(wrong, Err(DbError::Value(m)) if m.contains("text")));
        assert!(matches!(
            db.query_row("SELECT i FROM t WHERE i = 8", params![], |r| r
                .get::<i64>(0)),
            Err(DbError::NoRows)
        ));
    }

    #[test]
    fn a_failed_transaction_leaves_nothing() {
        let db = sqlite();
        db.execute_batch("CREATE TABLE t (i INTEGER PRIMARY KEY)")
            .unwrap();
        let out: Result<()> = db.transaction(|tx| {
            tx.execute("INSERT INTO t (i) VALUES (1)", params![])?;
            tx.execute("INSERT INTO t (i) VALUES (1)", params![])?;
            Ok(())
        });
        assert!(out.is_err());
        let n = db
            .query_row("SELECT COUNT(*) FROM t", params![], |r| r.get::<i64>(0))
            .unwrap();
        assert_eq!(n, 0);
        db.transaction(|tx| tx.execute("INSERT INTO t (i) VALUES (2)", params![]))
            .unwrap();
        let n = db
            .query_row("SELECT COUNT(*) FROM t", params![], |r| r.get::<i64>(0))
            .unwrap();
        assert_eq!(n, 1);
    }
}
