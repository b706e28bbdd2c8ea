//! The skill tables: installed versions (`installed_skills`), each name's
//! enablement and local trust (`skill_settings`), and the trusted publisher
//! keys (`trusted_keys`, `key_skill_grants`).

use crate::state::db::{self, params};

use crate::state::{Store, now};

/// One installed skill version as recorded.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct InstalledRecord {
    /// Name of the installed skill.
    pub name: String,
    /// The installed version (one folder per version).
    pub version: semver::Version,
    /// sha256 of the signed statement (the bundle's identity).
    pub digest: String,
    /// Key id of the signer, if signed.
    pub signer: Option<String>,
    /// Whether the operator trusts it (trusted signer, or `skills trust`).
    pub trusted: bool,
    /// Unix seconds.
    pub installed_at: i64,
    /// sha256 of the bundle file it was installed from, kept in the
    /// database's `blobs` (so replicas sharing a database each unpack the
    /// same bytes, and a migration carries it); `None` for an install made
    /// before installs kept their bundle.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bundle_sha256: Option<String>,
}

/// A trusted publisher key.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TrustedKey {
    /// Key id (16 hex digits of the key's sha256).
    pub key_id: String,
    /// Operator's label.
    pub label: String,
    /// Base64 public key.
    pub public_key: String,
    /// Skills this key is explicitly trusted to publish even when another
    /// key signed earlier versions.
    pub skills: Vec<String>,
}

/// Deletes the blobs no install and no ref names.
const FORGET_UNNAMED_BLOBS: &str = "DELETE FROM blobs WHERE NOT EXISTS
       (SELECT 1 FROM installed_skills WHERE bundle_sha256 = blobs.sha256)
     AND NOT EXISTS (SELECT 1 FROM refs WHERE refs.sha256 = blobs.sha256)";

/// Stores `bytes` under their sha256 `sha256` in `blobs` (once), on `tx`.
pub(super) fn put_blob_on(tx: &db::Db, sha256: &str, bytes: &[u8]) -> db::Result<()> {
    tx.execute(
        "INSERT INTO blobs (sha256, size, bytes) VALUES (?1, ?2, ?3)
         ON CONFLICT (sha256) DO NOTHING",
        params![sha256, bytes.len() as i64, bytes],
    )?;
    Ok(())
}

fn parse_version(s: String) -> db::Result<semver::Version> {
    semver::Version::parse(&s)
        .map_err(|e| db::DbError::Value(format!("installed version {s:?} is not semver: {e}")))
}

impl Store {
    /// Every installed version, sorted by name then version.
    pub fn installed(&self) -> db::Result<Vec<InstalledRecord>> {
        let mut rows = self.db().query_map(
            "SELECT name, version, digest, signer, trusted, installed_at, bundle_sha256
             FROM installed_skills",
            params![],
            |r| {
                Ok(InstalledRecord {
                    name: r.get(0)?,
                    version: parse_version(r.get(1)?)?,
                    digest: r.get(2)?,
                    signer: r.get(3)?,
                    trusted: r.get(4)?,
                    installed_at: r.get(5)?,
                    bundle_sha256: r.get(6)?,
                })
            },
        )?;
        rows.sort_by(|a, b| a.name.cmp(&b.name).then(a.version.cmp(&b.version)));
        Ok(rows)
    }

    /// Records an install; with `bundle`, the bundle's bytes too (under
    /// `r.bundle_sha256`, their sha256), in the same transaction.
    pub fn add_installed(&mut self, r: &InstalledRecord, bundle: Option<&[u8]>) -> db::Result<()> {
        self.db().transaction(|tx| {
            if let (Some(bytes), Some(sha256)) = (bundle, &r.bundle_sha256) {
                put_blob_on(tx, sha256, bytes)?;
            }
            tx.execute(
                "INSERT INTO installed_skills
                   (name, version, digest, signer, trusted, installed_at, bundle_sha256)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                params![
                    r.name,
                    r.version.to_string(),
                    r.digest,
                    r.signer,
                    r.trusted,
                    now(),
                    r.bundle_sha256
                ],
            )?;
            tx.execute(
                "INSERT INTO skill_settings (name, enabled) VALUES (?1, 1)
                 ON CONFLICT (name) DO NOTHING",
                params![r.name],
            )?;
            Ok(())
        })
    }

    /// Removes one installed version (or all of a name when `version` is
    /// `None`); returns the removed versions.
    pub fn remove_installed(
        &mut self,
        name: &str,
        version: Option<&semver::Version>,
    ) -> db::Result<Vec<semver::Version>> {
        self.db().transaction(|tx| {
            let mut removed = Vec::new();
            let versions: Vec<String> = tx.query_map(
                "SELECT version FROM installed_skills WHERE name = ?1",
                params![name],
                |r| r.get(0),
            )?;
            for v in versions {
                let parsed = parse_version(v.clone())?;
                if version.is_none_or(|want| *want == parsed) {
                    tx.execute(
                        "DELETE FROM installed_skills WHERE name = ?1 AND version = ?2",
                        params![name, v],
                    )?;
                    removed.push(parsed);
                }
            }
            tx.execute(FORGET_UNNAMED_BLOBS, params![])?;
            Ok(removed)
        })
    }

    /// Stores `bytes` under their sha256 `sha256` in `blobs` (once).
    pub(crate) fn put_blob(&self, sha256: &str, bytes: &[u8]) -> db::Result<()> {
        put_blob_on(self.db(), sha256, bytes)
    }

    /// Deletes the blobs no install and no ref names any more.
    pub(crate) fn forget_unnamed_blobs(&self) -> db::Result<usize> {
        self.db().execute(FORGET_UNNAMED_BLOBS, params![])
    }

    /// The bytes stored under `sha256` in `blobs`, if any.
    pub(crate) fn blob(&self, sha256: &str) -> db::Result<Option<Vec<u8>>> {
        self.db().query_opt(
            "SELECT bytes FROM blobs WHERE sha256 = ?1",
            params![sha256],
            |r| r.get(0),
        )
    }

    /// Marks every installed version of `name` trusted, and a local
    /// development folder of that name too; returns the installed versions
    /// changed.
    pub fn set_trusted(&mut self, name: &str) -> db::Result<usize> {
        self.db().transaction(|tx| {
            let n = tx.execute(
                "UPDATE installed_skills SET trusted = 1 WHERE name = ?1",
                params![name],
            )?;
            tx.execute(
                "INSERT INTO skill_settings (name, trusted_local) VALUES (?1, 1)
                 ON CONFLICT (name) DO UPDATE SET trusted_local = 1",
                params![name],
            )?;
            Ok(n)
        })
    }

    /// Whether the operator trusted a local development skill of this name.
    pub fn trusted_local(&self, name: &str) -> db::Result<bool> {
        Ok(self
            .db()
            .query_opt(
                "SELECT trusted_local FROM skill_settings WHERE name = ?1",
                params![name],
                |r| r.get(0),
            )?
            .unwrap_or(false))
    }

    /// Whether a skill name is enabled (default: enabled).
    pub fn enabled(&self, name: &str) -> db::Result<bool> {
        Ok(self
            .db()
            .query_opt(
                "SELECT enabled FROM skill_settings WHERE name = ?1",
                params![name],
                |r| r.get(0),
            )?
            .unwrap_or(true))
    }

    /// Enables or disables a skill name.
    pub fn set_enabled(&mut self, name: &str, enabled: bool) -> db::Result<()> {
        self.db().execute(
            "INSERT INTO skill_settings (name, enabled) VALUES (?1, ?2)
             ON CONFLICT (name) DO UPDATE SET enabled = excluded.enabled",
            params![name, enabled],
        )?;
        Ok(())
    }

    /// Every trusted key.
    pub fn trusted_keys(&self) -> db::Result<Vec<TrustedKey>> {
        let keys: Vec<(String, String, String)> = self.db().query_map(
            "SELECT key_id, label, public_key FROM trusted_keys ORDER BY label, key_id",
            params![],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )?;
        let mut out = Vec::new();
        for (key_id, label, public_key) in keys {
            let skills = self.db().query_map(
                "SELECT skill FROM key_skill_grants WHERE key_id = ?1 ORDER BY skill",
                params![key_id],
                |r| r.get(0),
            )?;
            out.push(TrustedKey {
                key_id,
                label,
                public_key,
                skills,
            });
        }
        Ok(out)
    }

    /// Adds (or relabels) a trusted key, optionally trusted for given skills.
    pub fn add_trusted_key(
        &mut self,
        key_id: &str,
        label: &str,
        public_key: &str,
        skills: &[String],
    ) -> db::Result<()> {
        self.db().transaction(|tx| {
            tx.execute(
                "INSERT INTO trusted_keys (key_id, label, public_key, added_at) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (key_id) DO UPDATE SET label = excluded.label",
                params![key_id, label, public_key, now()],
            )?;
            for s in skills {
                tx.execute(
                    "INSERT INTO key_skill_grants (key_id, skill) VALUES (?1, ?2)
                     ON CONFLICT (key_id, skill) DO NOTHING",
                    params![key_id, s],
                )?;
            }
            Ok(())
        })
    }

    /// Removes a trusted key by id or label; returns how many were removed.
    pub fn remove_trusted_key(&mut self, id_or_label: &str) -> db::Result<usize> {
        self.db().transaction(|tx| {
            tx.execute(
                "DELETE FROM key_skill_grants WHERE key_id IN
                   (SELECT key_id FROM trusted_keys WHERE key_id = ?1 OR label = ?1)",
                params![id_or_label],
            )?;
            tx.execute(
                "DELETE FROM trusted_keys WHERE key_id = ?1 OR label = ?1",
                params![id_or_label],
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn install_records_round_trip_and_survive_reopen() {
        let dir = tempfile::tempdir().unwrap();
        {
            let mut s = Store::open_sqlite(dir.path()).unwrap();
            let r = InstalledRecord {
                name: "a".into(),
                version: semver::Version::new(1, 2, 3),
                digest: "d".into(),
                signer: Some("k".into()),
                trusted: false,
                installed_at: 0,
                bundle_sha256: None,
            };
            s.add_installed(&r, None).unwrap();
            assert!(s.add_installed(&r, None).is_err(), "same version twice");
            s.set_enabled("a", false).unwrap();
            s.add_trusted_key("k", "pub", "AAAA", &["a".into()])
                .unwrap();
        }
        let mut s = Store::open_sqlite(dir.path()).unwrap();
        let all = s.installed().unwrap();
        assert_eq!(all.len(), 1);
        assert!(!s.enabled("a").unwrap());
        assert!(s.enabled("other").unwrap());
        assert_eq!(s.trusted_keys().unwrap()[0].skills, vec!["a".to_string()]);
        assert_eq!(s.set_trusted("a").unwrap(), 1);
        assert!(s.installed().unwrap()[0].trusted);
        assert_eq!(s.remove_installed("a", None).unwrap().len(), 1);
        assert_eq!(s.remove_trusted_key("pub").unwrap(), 1);
    }
}
