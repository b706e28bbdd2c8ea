//! The `skill_secrets` table: each skill's secrets, sealed (the host's
//! `authority::secrets` seals and opens them under the data dir's key
//! file; this table never sees a value in the clear), each bound to the
//! identity of the skill it was set for.

use crate::state::db::{self, params};
use serde::Serialize;

use crate::state::{Store, now};

/// One stored secret, as listed: never its value.
///
/// ```
/// let s = skillhost::SecretInfo { skill: "weather".into(), name: "api_token".into(),
///     identity: "local".into(), set_at: 0 };
/// assert!(serde_json::to_string(&s).unwrap().contains("api_token"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SecretInfo {
    /// Name of the skill the secret belongs to.
    pub skill: String,
    /// The secret's name, as the skill's manifest declares it.
    pub name: String,
    /// Identity of the skill it was set for; another skill later installed
    /// under the same name does not get it.
    pub identity: String,
    /// Unix seconds.
    pub set_at: i64,
}

/// A sealed secret as stored.
pub(crate) struct SealedSecret {
    /// Identity of the skill it was set for.
    pub identity: String,
    /// The AEAD nonce.
    pub nonce: Vec<u8>,
    /// Ciphertext and tag.
    pub sealed: Vec<u8>,
}

impl Store {
    /// Stores (or replaces) a sealed secret.
    pub(crate) fn put_secret(
        &self,
        skill: &str,
        name: &str,
        secret: &SealedSecret,
    ) -> db::Result<()> {
        self.db().execute(
            "INSERT INTO skill_secrets (skill, name, identity, nonce, sealed, set_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)
             ON CONFLICT (skill, name) DO UPDATE SET identity = excluded.identity,
               nonce = excluded.nonce, sealed = excluded.sealed, set_at = excluded.set_at",
            params![
                skill,
                name,
                secret.identity,
                secret.nonce,
                secret.sealed,
                now()
            ],
        )?;
        Ok(())
    }

    /// The sealed secret `name` of `skill`, if set.
    pub(crate) fn sealed_secret(
        &self,
        skill: &str,
        name: &str,
    ) -> db::Result<Option<SealedSecret>> {
        self.db().query_opt(
            "SELECT identity, nonce, sealed FROM skill_secrets WHERE skill = ?1 AND name = ?2",
            params![skill, name],
            |r| {
                Ok(SealedSecret {
                    identity: r.get(0)?,
                    nonce: r.get(1)?,
                    sealed: r.get(2)?,
                })
            },
        )
    }

    /// Every stored secret of `skill` (or of every skill), by skill then
    /// name: names only.
    pub fn secret_infos(&self, skill: Option<&str>) -> db::Result<Vec<SecretInfo>> {
        self.db().query_map(
            "SELECT skill, name, identity, set_at FROM skill_secrets
             WHERE (CAST(?1 AS TEXT) IS NULL OR skill = ?1) ORDER BY skill, name",
            params![skill],
            |r| {
                Ok(SecretInfo {
                    skill: r.get(0)?,
                    name: r.get(1)?,
                    identity: r.get(2)?,
                    set_at: r.get(3)?,
                })
            },
        )
    }

    /// Removes a secret; returns whether there was one.
    pub fn remove_secret(&self, skill: &str, name: &str) -> db::Result<bool> {
        Ok(self.db().execute(
            "DELETE FROM skill_secrets WHERE skill = ?1 AND name = ?2",
            params![skill, name],
        )? > 0)
    }
}
