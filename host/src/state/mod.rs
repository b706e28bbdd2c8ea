//! Durable host state: installed skills, their trust and enablement,
//! trusted publisher keys, personas, grants, tokens, runs, events,
//! questions, refs. By default in an embedded SQLite database
//! (`skillhost.db` in the data dir: WAL mode, `synchronous = FULL`); or in
//! a PostgreSQL server that several replicas share (`database` in
//! `settings.json`, or `SKILLHOST_DATABASE`). Versioned migrations
//! (`migrations.rs`), one transaction per change so a kill -9 leaves the
//! last committed state.

pub(crate) mod data_dir;
pub(crate) mod db;
pub(crate) mod host_keys;
mod migrations;
pub(crate) mod permissions;
pub(crate) mod personas;
pub(crate) mod questions;
pub(crate) mod refs;
pub(crate) mod runs;
pub(crate) mod sealed_documents;
pub(crate) mod sealing;
pub(crate) mod secrets;
pub(crate) mod skills;
pub(crate) mod tokens;
pub(crate) mod transfer;
pub(crate) mod upstream;
pub(crate) mod writer;

use std::path::Path;
use std::time::Duration;

use rusqlite::Connection;

use self::data_dir::{DataDir, Database};
use self::db::{Db, Dialect, PgConn, params};

/// File name of the database in the data dir.
pub const DB_FILE: &str = "skillhost.db";

/// A connection to the host's database.
pub(crate) struct Store {
    db: Db,
}

/// Unix seconds (0 if the clock is before 1970): the timestamps of
/// installs, personas, grants and tokens.
pub(crate) fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

impl Store {
    /// The connection, for the modules that keep their own tables here
    /// (personas, runs, refs).
    pub(crate) fn db(&self) -> &Db {
        &self.db
    }

    /// The state generation: bumped by every change to personas, grants,
    /// skill enablement or trust, installs, discovered MCP tools and pins
    /// (triggers), and by [`Store::bump_generation`].
    pub fn generation(&self) -> db::Result<i64> {
        self.db.query_row(
            "SELECT value FROM generation WHERE id = 1",
            params![],
            |r| r.get(0),
        )
    }

    /// Bumps the generation for a change the database does not see (the
    /// MCP servers' configuration file).
    pub fn bump_generation(&self) -> db::Result<()> {
        self.db.execute(
            "UPDATE generation SET value = value + 1 WHERE id = 1",
            params![],
        )?;
        // The triggers notify the replicas' change feeds of every other
        // change; this one has no trigger.
        if self.db.dialect() == Dialect::Postgres {
            self.db
                .execute("SELECT pg_notify(?1, 'state')", params![db::FEED_CHANNEL])?;
        }
        Ok(())
    }

    /// A number that changes when another connection commits: SQLite's
    /// `data_version`; on PostgreSQL, the two generations (state and
    /// tokens), which every change another replica makes to what is
    /// served bumps.
    pub fn data_version(&self) -> db::Result<i64> {
        match self.db.dialect() {
            Dialect::Sqlite => self
                .db
                .query_row("PRAGMA data_version", params![], |r| r.get(0)),
            Dialect::Postgres => self.db.query_row(
                "SELECT (SELECT value FROM generation WHERE id = 1)
                        + (SELECT value FROM token_generation WHERE id = 1)",
                params![],
                |r| r.get(0),
            ),
        }
    }

    /// Opens (creating and migrating) the database the data dir names:
    /// its own SQLite file, or the PostgreSQL server of its settings.
    pub fn open(data: &DataDir) -> anyhow::Result<Store> {
        match &data.database {
            Database::Sqlite => Store::open_sqlite(&data.root),
            Database::Postgres(url) => {
                let db = Db::Postgres(Box::new(
                    PgConn::connect(url.expose())
                        .map_err(|e| anyhow::anyhow!("cannot connect to {url}: {e}"))?,
                ));
                migrations::migrate(&db)
                    .map_err(|e| anyhow::anyhow!("cannot migrate {url}: {e}"))?;
                Ok(Store { db })
            }
        }
    }

    /// Opens (creating and migrating) the SQLite database in `data_dir`.
    pub fn open_sqlite(data_dir: &Path) -> anyhow::Result<Store> {
        let path = data_dir.join(DB_FILE);
        // Created private (0600) before SQLite opens it: SQLite gives its
        // `-wal` and `-shm` files the database file's mode.
        {
            use std::os::unix::fs::OpenOptionsExt as _;
            match std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(data_dir::PRIVATE_FILE_MODE)
                .open(&path)
            {
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => anyhow::bail!("cannot create {}: {e}", path.display()),
            }
        }
        let conn = Connection::open(&path)
            .map_err(|e| anyhow::anyhow!("cannot open {}: {e}", path.display()))?;
        conn.busy_timeout(Duration::from_secs(10))?;
        // A new database frees the pages of deleted runs back to the file
        // system on `gc` (`PRAGMA incremental_vacuum`); only settable
        // before the first table.
        let fresh: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
        if fresh == 0 {
            conn.pragma_update(None, "auto_vacuum", "INCREMENTAL")?;
        }
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "FULL")?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        let db = Db::Sqlite(conn);
        migrations::migrate(&db)
            .map_err(|e| anyhow::anyhow!("cannot migrate {}: {e}", path.display()))?;
        Ok(Store { db })
    }
}
