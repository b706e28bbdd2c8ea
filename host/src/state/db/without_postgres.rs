//! The PostgreSQL side of [`super::Db`] in a build without the `postgres`
//! feature: the same names as `postgres.rs` and `feed.rs`, but no value of
//! either can exist. Connecting is refused with
//! [`DbError::PostgresNotBuilt`], naming the feature; every other method
//! is unreachable (an uninhabited type has no `self`), so the callers'
//! matches on [`super::Db`] stay as they are in a full build.

use super::{DbError, Owned, Param, Result};

/// Stands for a PostgreSQL connection; none can be made in this build.
pub(crate) enum PgConn {}

impl PgConn {
    /// Refuses: this build has no PostgreSQL driver.
    pub fn connect(_url: &str) -> Result<PgConn> {
        Err(not_built())
    }

    /// Unreachable: no connection exists.
    pub fn execute(&self, _sql: &str, _params: &[&dyn Param]) -> Result<usize> {
        match *self {}
    }

    /// Unreachable: no connection exists.
    pub fn execute_many(&self, _sql: &str, _rows: &[Vec<Owned>]) -> Result<()> {
        match *self {}
    }

    /// Unreachable: no connection exists.
    pub fn execute_batch(&self, _sql: &str) -> Result<()> {
        match *self {}
    }

    /// Unreachable: no connection exists.
    pub fn query(&self, _sql: &str, _params: &[&dyn Param]) -> Result<Vec<Vec<Owned>>> {
        match *self {}
    }
}

/// Stands for the change feed of a PostgreSQL database; none can be
/// started in this build.
pub(crate) enum ChangeFeed {}

impl ChangeFeed {
    /// Refuses: this build has no PostgreSQL driver.
    pub fn start(_url: &str) -> Result<ChangeFeed> {
        Err(not_built())
    }

    /// Unreachable: no feed exists.
    pub async fn changed(&self) {
        match *self {}
    }

    /// Unreachable: no feed exists.
    pub fn epoch(&self) -> Option<u64> {
        match *self {}
    }
}

/// The refusal of a connection (its caller names the URL).
fn not_built() -> DbError {
    DbError::PostgresNotBuilt {
        named_by: "the database URL".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connecting_names_the_missing_feature() {
        // A connection cannot exist, so the result is always an error.
        let Err(e) = PgConn::connect("postgres://app:hunter2@db.internal/skills");
        let shown = e.to_string();
        assert!(shown.contains("`postgres` feature"), "{shown}");
        assert!(!shown.contains("hunter2"), "{shown}");
        let Err(e) = ChangeFeed::start("postgres://db.internal/skills");
        assert!(matches!(e, DbError::PostgresNotBuilt { .. }), "{e}");
    }
}
