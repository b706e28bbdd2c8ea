//! The `api_tokens` table: persona bearer tokens, by the sha256 of the
//! token (the token itself is never stored; `crate::authority::tokens`
//! makes and checks tokens). Removing a persona removes its tokens
//! (`ON DELETE CASCADE`).

use rusqlite::{OptionalExtension, params};
use serde::Serialize;

use crate::state::{Store, now};

/// One stored persona token, as listed: never the token itself.
///
/// ```
/// let t = skillhost::TokenInfo {
///     id: 1, prefix: "skh_AbCdEf".into(), persona: "support".into(),
///     label: "laptop".into(), created_at: 0,
/// };
/// assert_eq!(serde_json::to_value(&t).unwrap()["persona"], "support");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TokenInfo {
    /// The id `tokens remove` takes.
    pub id: i64,
    /// The token's first characters, to recognise it.
    pub prefix: String,
    /// The persona the token acts as.
    pub persona: String,
    /// The operator's label.
    pub label: String,
    /// Unix seconds.
    pub created_at: i64,
}

impl Store {
    /// Stores a token's digest (and its shown `prefix`) for `persona` and
    /// returns its row.
    pub fn add_token(
        &self,
        digest: &[u8; 32],
        prefix: &str,
        persona: &str,
        label: &str,
    ) -> rusqlite::Result<TokenInfo> {
        let prefix = prefix.to_string();
        let created_at = now();
        self.conn().execute(
            "INSERT INTO api_tokens (digest, prefix, persona, label, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5)",
            params![hex::encode(digest), prefix, persona, label, created_at],
        )?;
        Ok(TokenInfo {
            id: self.conn().last_insert_rowid(),
            prefix,
            persona: persona.to_string(),
            label: label.to_string(),
            created_at,
        })
    }

    /// Every persona token, by id.
    pub fn tokens(&self) -> rusqlite::Result<Vec<TokenInfo>> {
        let mut stmt = self.conn().prepare_cached(
            "SELECT id, prefix, persona, label, created_at FROM api_tokens ORDER BY id",
        )?;
        stmt.query_map([], |r| {
            Ok(TokenInfo {
                id: r.get(0)?,
                prefix: r.get(1)?,
                persona: r.get(2)?,
                label: r.get(3)?,
                created_at: r.get(4)?,
            })
        })?
        .collect()
    }

    /// Removes a token by id; false if there was none.
    pub fn remove_token(&self, id: i64) -> rusqlite::Result<bool> {
        let n = self
            .conn()
            .execute("DELETE FROM api_tokens WHERE id = ?1", params![id])?;
        Ok(n == 1)
    }

    /// The persona of the token with this digest, if any.
    pub fn token_persona(&self, digest: &[u8; 32]) -> rusqlite::Result<Option<String>> {
        self.conn()
            .prepare_cached("SELECT persona FROM api_tokens WHERE digest = ?1")?
            .query_row(params![hex::encode(digest)], |r| r.get(0))
            .optional()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_follow_their_persona() {
        let tmp = tempfile::tempdir().unwrap();
        let s = Store::open(tmp.path()).unwrap();
        s.add_persona("p", "").unwrap();
        let digest = [7u8; 32];
        let info = s.add_token(&digest, "skh_AbCdEf", "p", "laptop").unwrap();
        assert_eq!(info.prefix, "skh_AbCdEf");
        assert_eq!(s.token_persona(&digest).unwrap().as_deref(), Some("p"));
        assert!(s.add_token(&[8u8; 32], "skh_x", "nobody", "").is_err());
        s.remove_persona("p").unwrap();
        assert_eq!(s.token_persona(&digest).unwrap(), None);
        assert!(s.tokens().unwrap().is_empty());
    }
}
