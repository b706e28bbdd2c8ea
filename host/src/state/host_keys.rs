//! The `host_keys` table: secret keys the host signs with, each made once
//! (random) and then shared by every process on the data dir, so that what
//! one `serve` signs another verifies.

use crate::state::db::{self, params};

use super::Store;

/// Length of a key made here, in bytes.
const KEY_BYTES: usize = 32;

impl Store {
    /// The key named `name`, made now when there is none yet. Two
    /// processes making it at once agree on one (the first insert wins).
    pub(crate) fn host_key(&self, name: &str) -> anyhow::Result<Vec<u8>> {
        let conn = self.db();
        let get = |conn: &db::Db| {
            conn.query_opt(
                "SELECT key FROM host_keys WHERE name = ?1",
                params![name],
                |r| r.get::<Vec<u8>>(0),
            )
        };
        if let Some(key) = get(conn)? {
            return Ok(key);
        }
        let mut key = vec![0u8; KEY_BYTES];
        getrandom::fill(&mut key)
            .map_err(|e| anyhow::anyhow!("cannot read random bytes for a key: {e}"))?;
        conn.execute(
            "INSERT INTO host_keys (name, key, created_at) VALUES (?1, ?2, ?3)
             ON CONFLICT (name) DO NOTHING",
            params![name, key, super::now()],
        )?;
        get(conn)?.ok_or_else(|| anyhow::anyhow!("key `{name}` vanished after it was made"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_made_once_and_then_kept() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_sqlite(dir.path()).unwrap();
        let a = store.host_key("request_state").unwrap();
        assert_eq!(a.len(), KEY_BYTES);
        assert_eq!(store.host_key("request_state").unwrap(), a);
        assert_ne!(store.host_key("other").unwrap(), a);
        drop(store);
        let again = Store::open_sqlite(dir.path()).unwrap();
        assert_eq!(again.host_key("request_state").unwrap(), a);
    }
}
