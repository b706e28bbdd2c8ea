//! The `api_tokens` table: persona bearer tokens, by the sha256 of the
//! token (the token itself is never stored; `crate::authority::tokens`
//! makes and checks tokens). Removing a persona removes its tokens
//! (`ON DELETE CASCADE`).

use std::collections::HashMap;

use crate::state::db::{self, params};
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
    ) -> db::Result<TokenInfo> {
        let prefix = prefix.to_string();
        let created_at = now();
        let id = self.db().query_row(
            "INSERT INTO api_tokens (digest, prefix, persona, label, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5) RETURNING id",
            params![hex::encode(digest), prefix, persona, label, created_at],
            |r| r.get(0),
        )?;
        Ok(TokenInfo {
            id,
            prefix,
            persona: persona.to_string(),
            label: label.to_string(),
            created_at,
        })
    }

    /// Every persona token, by id.
    pub fn tokens(&self) -> db::Result<Vec<TokenInfo>> {
        self.db().query_map(
            "SELECT id, prefix, persona, label, created_at FROM api_tokens ORDER BY id",
            params![],
            |r| {
                Ok(TokenInfo {
                    id: r.get(0)?,
                    prefix: r.get(1)?,
                    persona: r.get(2)?,
                    label: r.get(3)?,
                    created_at: r.get(4)?,
                })
            },
        )
    }

    /// Removes a token by id; false if there was none.
    pub fn remove_token(&self, id: i64) -> db::Result<bool> {
        let n = self
            .db()
            .execute("DELETE FROM api_tokens WHERE id = ?1", params![id])?;
        Ok(n == 1)
    }

    /// The tokens' generation: bumped by every change to `api_tokens`, by
    /// any process (triggers).
    pub(crate) fn token_generation(&self) -> db::Result<i64> {
        self.db().query_row(
            "SELECT value FROM token_generation WHERE id = 1",
            params![],
            |r| r.get(0),
        )
    }

    /// Every token's persona, by the token's sha256 (hex).
    pub(crate) fn token_personas(&self) -> db::Result<HashMap<String, String>> {
        let mut out = HashMap::new();
        self.db()
            .query_each("SELECT digest, persona FROM api_tokens", params![], |r| {
                out.insert(r.get(0)?, r.get(1)?);
                Ok(())
            })?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_follow_their_persona() {
        let tmp = tempfile::tempdir().unwrap();
        let s = Store::open_sqlite(tmp.path()).unwrap();
        s.add_persona("p", "").unwrap();
        let digest = [7u8; 32];
        let info = s.add_token(&digest, "skh_AbCdEf", "p", "laptop").unwrap();
        assert_eq!(info.prefix, "skh_AbCdEf");
        let by_digest = |s: &Store| {
            s.token_personas()
                .unwrap()
                .get(&hex::encode(digest))
                .cloned()
        };
        assert_eq!(by_digest(&s).as_deref(), Some("p"));
        assert!(s.add_token(&[8u8; 32], "skh_x", "nobody", "").is_err());
        s.remove_persona("p").unwrap();
        assert_eq!(by_digest(&s), None);
        assert!(s.tokens().unwrap().is_empty());
    }

    #[test]
    fn every_change_to_the_tokens_bumps_their_generation() {
        let tmp = tempfile::tempdir().unwrap();
        let s = Store::open_sqlite(tmp.path()).unwrap();
        s.add_persona("p", "").unwrap();
        let g0 = s.token_generation().unwrap();
        let info = s.add_token(&[7u8; 32], "skh_AbCdEf", "p", "").unwrap();
        let g1 = s.token_generation().unwrap();
        assert!(g1 > g0);
        assert_eq!(
            s.token_personas()
                .unwrap()
                .get(&hex::encode([7u8; 32]))
                .map(String::as_str),
            Some("p")
        );
        assert!(s.remove_token(info.id).unwrap());
        let g2 = s.token_generation().unwrap();
        assert!(g2 > g1);
        // A persona's removal takes its tokens with it (a cascade): that
        // too is a change.
        s.add_token(&[8u8; 32], "skh_x", "p", "").unwrap();
        let g3 = s.token_generation().unwrap();
        s.remove_persona("p").unwrap();
        assert!(s.token_generation().unwrap() > g3);
        assert!(s.token_personas().unwrap().is_empty());
    }
}
