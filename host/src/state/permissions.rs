//! The `permission_approvals` table: for each skill name and identity, the
//! permission set an operator approved (canonical JSON and its sha256),
//! who approved it and when. A version of the skill whose permissions are
//! within the approved set may run; one asking for more waits.

use crate::state::db::{self, params};
use serde::Serialize;

use crate::state::{Store, now};

/// One approval as recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ApprovalRecord {
    /// Name of the skill the set was approved for.
    pub skill: String,
    /// Identity of that skill (`builtin`, `local`, `signer:KEY`,
    /// `unsigned:DIGEST`): another skill of the same name is not covered.
    pub identity: String,
    /// The approved set, as canonical JSON.
    pub permissions: String,
    /// sha256 of `permissions`, the digest `skills approve` shows.
    pub digest: String,
    /// Who approved (`operator`, `operator:<token id>`).
    pub approved_by: String,
    /// Unix seconds.
    pub approved_at: i64,
}

impl Store {
    /// The set approved for `skill` as `identity`, if any.
    pub fn approval(&self, skill: &str, identity: &str) -> db::Result<Option<ApprovalRecord>> {
        self.db().query_opt(
            "SELECT skill, identity, permissions, digest, approved_by, approved_at
                 FROM permission_approvals WHERE skill = ?1 AND identity = ?2",
            params![skill, identity],
            |r| {
                Ok(ApprovalRecord {
                    skill: r.get(0)?,
                    identity: r.get(1)?,
                    permissions: r.get(2)?,
                    digest: r.get(3)?,
                    approved_by: r.get(4)?,
                    approved_at: r.get(5)?,
                })
            },
        )
    }

    /// Records `permissions` (canonical JSON, sha256 `digest`) as approved
    /// for `skill` as `identity`, replacing an earlier approval.
    pub fn approve_permissions(
        &self,
        skill: &str,
        identity: &str,
        permissions: &str,
        digest: &str,
        approved_by: &str,
    ) -> db::Result<()> {
        self.db().execute(
            "INSERT INTO permission_approvals
               (skill, identity, permissions, digest, approved_by, approved_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)
             ON CONFLICT (skill, identity) DO UPDATE SET permissions = excluded.permissions,
               digest = excluded.digest, approved_by = excluded.approved_by,
               approved_at = excluded.approved_at",
            params![skill, identity, permissions, digest, approved_by, now()],
        )?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_approval_is_per_identity_and_replaced_by_the_next() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let store = Store::open_sqlite(tmp.path()).expect("open");
        let before = store.generation().expect("generation");
        store
            .approve_permissions("w", "signer:k1", "{\"assets\":false}", "d1", "operator")
            .expect("approve");
        assert!(
            store.generation().expect("generation") > before,
            "readiness changed"
        );
        assert_eq!(store.approval("w", "signer:k2").expect("read"), None);
        store
            .approve_permissions("w", "signer:k1", "{\"assets\":true}", "d2", "operator")
            .expect("approve");
        let a = store
            .approval("w", "signer:k1")
            .expect("read")
            .expect("some");
        assert_eq!(
            (a.digest.as_str(), a.permissions.as_str()),
            ("d2", "{\"assets\":true}")
        );
    }
}
