//! The SQLite side of [`super::Db`]: statements prepared once per
//! connection (rusqlite's cache), parameters bound without copies.

use rusqlite::types::{ToSqlOutput, ValueRef as SqliteRef};

use super::{DbError, Param, Result, ValueRef};

/// A parameter as rusqlite binds it.
struct Bind<'a>(&'a dyn Param);

impl rusqlite::ToSql for Bind<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::Borrowed(match self.0.value() {
            ValueRef::Null => SqliteRef::Null,
            ValueRef::Int(i) => SqliteRef::Integer(i),
            ValueRef::Real(f) => SqliteRef::Real(f),
            ValueRef::Text(s) => SqliteRef::Text(s.as_bytes()),
            ValueRef::Blob(b) => SqliteRef::Blob(b),
        }))
    }
}

fn bind<'a>(params: &'a [&'a dyn Param]) -> impl Iterator<Item = Bind<'a>> {
    params.iter().map(|p| Bind(*p))
}

pub(super) fn execute(c: &rusqlite::Connection, sql: &str, params: &[&dyn Param]) -> Result<usize> {
    Ok(c.prepare_cached(sql)?
        .execute(rusqlite::params_from_iter(bind(params)))?)
}

pub(super) fn query_each(
    c: &rusqlite::Connection,
    sql: &str,
    params: &[&dyn Param],
    mut each: impl FnMut(&rusqlite::Row<'_>) -> Result<()>,
) -> Result<()> {
    let mut stmt = c.prepare_cached(sql)?;
    let mut rows = stmt.query(rusqlite::params_from_iter(bind(params)))?;
    while let Some(r) = rows.next()? {
        each(r)?;
    }
    Ok(())
}

/// Column `i` of `r`.
pub(super) fn value<'a>(r: &'a rusqlite::Row<'_>, i: usize) -> Result<ValueRef<'a>> {
    Ok(match r.get_ref(i)? {
        SqliteRef::Null => ValueRef::Null,
        SqliteRef::Integer(i) => ValueRef::Int(i),
        SqliteRef::Real(f) => ValueRef::Real(f),
        SqliteRef::Text(t) => ValueRef::Text(
            std::str::from_utf8(t)
                .map_err(|e| DbError::Value(format!("a text column is not UTF-8: {e}")))?,
        ),
        SqliteRef::Blob(b) => ValueRef::Blob(b),
    })
}
