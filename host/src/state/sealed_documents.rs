//! The `sealed_documents` table: documents replicas sharing a database
//! share, sealed under the data dir's key (`sealing.rs`) so the database
//! never holds them in the clear: the MCP servers' configuration
//! (`upstream/shared_config.rs`) and each HTTP server's OAuth sign-in
//! (`upstream/shared_sign_ins.rs`). Each write is a compare-and-set
//! on the document's revision, so two replicas changing it at once never
//! lose each other's change: the loser reads the new revision and applies
//! its change again.

use std::time::{Duration, Instant};

use sha2::{Digest as _, Sha256};

use super::Store;
use super::data_dir::DatabaseUrl;
use super::db::{self, Db, PgConn, params};
use super::sealing::Sealed;

/// Key of the advisory lock writers of a sealed document hold (PostgreSQL).
const DOCUMENTS_LOCK: i64 = 0x736b_696c_6c64_6f63;

/// Why a section run under the documents' lock failed.
#[derive(Debug)]
pub(crate) enum Locked<E> {
    /// The lock could not be taken or released.
    Lock(anyhow::Error),
    /// The section's own error.
    Inner(E),
}

impl Store {
    /// Runs `section` holding the documents' lock: on PostgreSQL an
    /// advisory lock that every writer of a sealed document takes for its
    /// read-modify-write (released with the section, or by the server if
    /// the process dies); on SQLite, which no replicas share, none.
    pub(crate) fn with_documents_locked<T, E>(
        &self,
        section: impl FnOnce() -> Result<T, E>,
    ) -> Result<T, Locked<E>> {
        if self.db.dialect() == db::Dialect::Sqlite {
            return section().map_err(Locked::Inner);
        }
        self.db
            .execute("SELECT pg_advisory_lock(?1)", params![DOCUMENTS_LOCK])
            .map_err(|e| Locked::Lock(anyhow::anyhow!("cannot lock the shared documents: {e}")))?;
        let out = section();
        let unlocked = self
            .db
            .execute("SELECT pg_advisory_unlock(?1)", params![DOCUMENTS_LOCK]);
        let out = out.map_err(Locked::Inner)?;
        unlocked.map_err(|e| {
            Locked::Lock(anyhow::anyhow!("cannot unlock the shared documents: {e}"))
        })?;
        Ok(out)
    }

    /// The document `name` and its revision, if it was ever written.
    pub(crate) fn sealed_document(&self, name: &str) -> db::Result<Option<(i64, Sealed)>> {
        self.db.query_opt(
            "SELECT revision, nonce, sealed FROM sealed_documents WHERE name = ?1",
            params![name],
            |r| {
                Ok((
                    r.get(0)?,
                    Sealed {
                        nonce: r.get(1)?,
                        sealed: r.get(2)?,
                    },
                ))
            },
        )
    }

    /// The revision of document `name`, if it was ever written.
    pub(crate) fn sealed_document_revision(&self, name: &str) -> db::Result<Option<i64>> {
        self.db.query_opt(
            "SELECT revision FROM sealed_documents WHERE name = ?1",
            params![name],
            |r| r.get(0),
        )
    }

    /// Writes the document `name` as revision `expected + 1` (1 when
    /// `expected` is `None`: the document must not exist yet), if its
    /// revision is still `expected`. Returns whether it was written (false:
    /// another writer came first).
    pub(crate) fn put_sealed_document(
        &self,
        name: &str,
        expected: Option<i64>,
        doc: &Sealed,
    ) -> db::Result<bool> {
        let now = super::now();
        let written = match expected {
            None => self.db.execute(
                "INSERT INTO sealed_documents (name, revision, nonce, sealed, updated_at)
                 VALUES (?1, 1, ?2, ?3, ?4) ON CONFLICT (name) DO NOTHING",
                params![name, doc.nonce, doc.sealed, now],
            )?,
            Some(revision) => self.db.execute(
                "UPDATE sealed_documents SET revision = revision + 1, nonce = ?3, sealed = ?4,
                        updated_at = ?5
                 WHERE name = ?1 AND revision = ?2",
                params![name, revision, doc.nonce, doc.sealed, now],
            )?,
        };
        Ok(written == 1)
    }
}

/// A PostgreSQL advisory lock named for one document, held on a
/// connection of its own, so that holding it across a network round trip
/// (an OAuth refresh) blocks no other query of the process. Released when
/// dropped, or by the server when the process dies.
pub(crate) struct DocumentLock {
    db: Db,
    key: i64,
}

impl DocumentLock {
    /// Takes the lock named `name` on the database at `url`, waiting at
    /// most `wait` for another holder to let go.
    pub(crate) fn take(url: &DatabaseUrl, name: &str, wait: Duration) -> anyhow::Result<Self> {
        let db = Db::Postgres(Box::new(
            PgConn::connect(url.expose()).map_err(|e| anyhow::anyhow!("{url}: {e}"))?,
        ));
        let key = lock_key(name);
        let deadline = Instant::now() + wait;
        loop {
            let taken: bool =
                db.query_row("SELECT pg_try_advisory_lock(?1)", params![key], |r| {
                    r.get(0)
                })?;
            if taken {
                return Ok(DocumentLock { db, key });
            }
            if Instant::now() >= deadline {
                anyhow::bail!(
                    "another replica has held the lock of {name:?} for {} s",
                    wait.as_secs()
                );
            }
            std::thread::sleep(crate::limits::DOCUMENT_LOCK_POLL);
        }
    }
}

impl Drop for DocumentLock {
    fn drop(&mut self) {
        // The connection closes right after; the server would release the
        // lock then anyway.
        let _ = self
            .db
            .execute("SELECT pg_advisory_unlock(?1)", params![self.key]);
    }
}

/// The advisory lock key of document `name`: the first 8 bytes of a
/// digest, apart from every other lock key of the host by its prefix.
fn lock_key(name: &str) -> i64 {
    let digest = Sha256::digest(format!("skillhost-document-lock\0{name}").as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    i64::from_be_bytes(first)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(b: u8) -> Sealed {
        Sealed {
            nonce: vec![b; 12],
            sealed: vec![b; 20],
        }
    }

    #[test]
    fn a_write_lands_only_on_the_revision_it_read() {
        let dir = tempfile::tempdir().expect("tempdir");
        let s = Store::open_sqlite(dir.path()).expect("store");
        assert_eq!(s.sealed_document("mcp").expect("read"), None);
        assert!(s.put_sealed_document("mcp", None, &doc(1)).expect("first"));
        assert!(
            !s.put_sealed_document("mcp", None, &doc(2))
                .expect("second create"),
            "a second create loses"
        );
        assert_eq!(s.sealed_document("mcp").expect("read"), Some((1, doc(1))));
        let g = s.generation().expect("generation");
        assert!(
            s.put_sealed_document("mcp", Some(1), &doc(3))
                .expect("update")
        );
        assert!(
            s.generation().expect("generation") > g,
            "a change bumps the generation"
        );
        assert!(
            !s.put_sealed_document("mcp", Some(1), &doc(4))
                .expect("stale update"),
            "a writer on a stale revision loses"
        );
        assert_eq!(s.sealed_document("mcp").expect("read"), Some((2, doc(3))));
    }
}
