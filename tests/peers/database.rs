//! The databases a test runs the host on: the data dir's SQLite file, or a
//! fresh database on the tests' PostgreSQL server (the test matrix: one
//! test body, run on each). Included by path in the test crates that use
//! it (`host/tests/binary/common`, `tests/src`).
//!
//! The server is `SKILLHOST_TEST_POSTGRES` (a `postgres://` URL of a role
//! that may create databases), else the one `tests/peers/install.sh`
//! started (`target/peers/postgres.url`). Without either, a PostgreSQL
//! variant prints why and passes without running, unless
//! `SKILLHOST_TEST_REQUIRE_POSTGRES` is set (as CI sets it), when it fails.

#![allow(dead_code)]

use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Which database a test runs the host on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// `skillhost.db` in the data dir.
    Sqlite,
    /// A fresh database on the tests' PostgreSQL server.
    Postgres,
}

/// A database made for one test, dropped (connections and all) when the
/// test is done with it.
#[derive(Debug)]
pub struct TestDatabase {
    admin: String,
    name: String,
    /// The database's URL, as the host takes it (`database` in
    /// `settings.json`, or `SKILLHOST_DATABASE`).
    pub url: String,
}

/// The tests' PostgreSQL server, if one is configured.
pub fn server() -> Option<String> {
    if let Ok(url) = std::env::var("SKILLHOST_TEST_POSTGRES")
        && !url.is_empty()
    {
        return Some(url);
    }
    let file = Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .find(|d| d.join("tests/peers/postgres.sh").exists())
        .map(|root| root.join("target/peers/postgres.url"))?;
    let url = std::fs::read_to_string(file).ok()?;
    let url = url.trim().to_string();
    (!url.is_empty()).then_some(url)
}

/// The CA certificate the tests' server's TLS certificate is signed by
/// (`tests/peers/postgres.sh` makes it), if there is one.
pub fn ca_file() -> Option<std::path::PathBuf> {
    let file = Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .find(|d| d.join("tests/peers/postgres.sh").exists())
        .map(|root| root.join("target/peers/postgres-ca.pem"))?;
    file.exists().then_some(file)
}

fn psql(url: &str, sql: &str) -> Result<(), String> {
    let out = Command::new("psql")
        .args(["-X", "-q", "-v", "ON_ERROR_STOP=1", url, "-c", sql])
        .output()
        .map_err(|e| format!("cannot run psql: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// A fresh, empty database for the test `test`, or `None` (with the reason
/// printed) where no server is configured.
pub fn fresh(test: &str) -> Option<TestDatabase> {
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let Some(admin) = server() else {
        assert!(
            std::env::var_os("SKILLHOST_TEST_REQUIRE_POSTGRES").is_none(),
            "SKILLHOST_TEST_REQUIRE_POSTGRES is set but no PostgreSQL server is: set \
             SKILLHOST_TEST_POSTGRES or run tests/peers/install.sh"
        );
        eprintln!(
            "skipped on PostgreSQL: no test server (set SKILLHOST_TEST_POSTGRES, or run \
             tests/peers/install.sh, which starts one)"
        );
        return None;
    };
    let slug: String = test
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .take(30)
        .collect();
    let name = format!(
        "skh_{slug}_{}_{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    );
    psql(&admin, &format!("CREATE DATABASE {name}"))
        .unwrap_or_else(|e| panic!("cannot create the test database {name}: {e}"));
    let base = admin.split('?').next().unwrap_or(&admin);
    let at = base.rfind('/').expect("a database URL ends with /database");
    let url = format!("{}/{name}", &base[..at]);
    Some(TestDatabase { admin, name, url })
}

impl TestDatabase {
    /// Runs `sql` on this database (as its owner); the rows it returns,
    /// one per line, columns split by `|`. Panics, saying why, when it
    /// fails.
    pub fn sql(&self, sql: &str) -> String {
        let out = Command::new("psql")
            .args([
                "-X",
                "-q",
                "-A",
                "-t",
                "-v",
                "ON_ERROR_STOP=1",
                &self.url,
                "-c",
                sql,
            ])
            .output()
            .unwrap_or_else(|e| panic!("cannot run psql: {e}"));
        assert!(
            out.status.success(),
            "{sql}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// Everything the database holds, as `pg_dump` writes it (data only):
    /// to search it for what must never be stored in the clear.
    pub fn dump(&self) -> String {
        let out = Command::new("pg_dump")
            .args(["--data-only", "--no-owner", &self.url])
            .output()
            .unwrap_or_else(|e| panic!("cannot run pg_dump: {e}"));
        assert!(
            out.status.success(),
            "pg_dump: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        let _ = psql(
            &self.admin,
            &format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name),
        );
    }
}
