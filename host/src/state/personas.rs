//! The `personas` and `skill_grants` tables. (The rules, and the MCP
//! server grants, are in `crate::authority::personas`.)

use crate::state::db::{self, params};
use serde::Serialize;

use crate::state::{Store, now};

/// One persona.
///
/// ```
/// let p = skillhost::Persona {
///     id: "support".into(), description: String::new(), created_at: 0, client_approval: false,
/// };
/// assert_eq!(serde_json::to_value(&p).unwrap()["id"], "support");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Persona {
    /// The persona's id.
    pub id: String,
    /// What the persona is for.
    pub description: String,
    /// Unix seconds.
    pub created_at: i64,
    /// Whether the persona's MCP client may answer the confirmation of its
    /// own calls (elicitation): the operator trusts that client application
    /// to put the question to a person. Off by default.
    pub client_approval: bool,
}

impl Store {
    /// Every persona, sorted by id.
    pub fn personas(&self) -> db::Result<Vec<Persona>> {
        self.db().query_map(
            "SELECT id, description, created_at, client_approval FROM personas ORDER BY id",
            params![],
            |r| {
                Ok(Persona {
                    id: r.get(0)?,
                    description: r.get(1)?,
                    created_at: r.get(2)?,
                    client_approval: r.get(3)?,
                })
            },
        )
    }

    /// Whether the persona's client may answer its confirmations; `None`
    /// when there is no such persona.
    pub fn client_approval(&self, id: &str) -> db::Result<Option<bool>> {
        self.db().query_opt(
            "SELECT client_approval FROM personas WHERE id = ?1",
            params![id],
            |r| r.get(0),
        )
    }

    /// Sets whether the persona's client may answer its confirmations;
    /// false when there is no such persona.
    pub fn set_client_approval(&self, id: &str, on: bool) -> db::Result<bool> {
        let n = self.db().execute(
            "UPDATE personas SET client_approval = ?2 WHERE id = ?1",
            params![id, on],
        )?;
        Ok(n == 1)
    }

    /// The ids of every persona, sorted.
    pub fn persona_ids(&self) -> db::Result<Vec<String>> {
        Ok(self.personas()?.into_iter().map(|p| p.id).collect())
    }

    /// Whether the persona exists.
    pub fn persona_exists(&self, id: &str) -> db::Result<bool> {
        self.db().query_row(
            "SELECT EXISTS (SELECT 1 FROM personas WHERE id = ?1)",
            params![id],
            |r| r.get(0),
        )
    }

    /// Adds a persona; false if it already existed.
    pub fn add_persona(&self, id: &str, description: &str) -> db::Result<bool> {
        let n = self.db().execute(
            "INSERT INTO personas (id, description, created_at) VALUES (?1, ?2, ?3)
             ON CONFLICT (id) DO NOTHING",
            params![id, description, now()],
        )?;
        Ok(n == 1)
    }

    /// Removes a persona and its skill grants; false if it did not exist.
    pub fn remove_persona(&self, id: &str) -> db::Result<bool> {
        let n = self
            .db()
            .execute("DELETE FROM personas WHERE id = ?1", params![id])?;
        Ok(n == 1)
    }

    /// Grants a skill to a persona, bound to the skill's `identity` (its
    /// stored form), or rebinds an existing grant to it. Returns whether
    /// anything changed.
    pub fn grant_skill(&self, persona: &str, skill: &str, identity: &str) -> db::Result<bool> {
        let n = self.db().execute(
            "INSERT INTO skill_grants (persona, skill, identity) VALUES (?1, ?2, ?3)
             ON CONFLICT (persona, skill) DO UPDATE SET identity = excluded.identity
             WHERE skill_grants.identity IS DISTINCT FROM excluded.identity",
            params![persona, skill, identity],
        )?;
        Ok(n == 1)
    }

    /// Revokes a persona's grant of a skill. Returns whether it existed.
    pub fn revoke_skill(&self, persona: &str, skill: &str) -> db::Result<bool> {
        let n = self.db().execute(
            "DELETE FROM skill_grants WHERE persona = ?1 AND skill = ?2",
            params![persona, skill],
        )?;
        Ok(n == 1)
    }

    /// Binds grants kept from before identities were recorded (NULL) to
    /// `identity`; a grant already bound is left alone.
    pub fn bind_legacy_grant(&self, persona: &str, skill: &str, identity: &str) -> db::Result<()> {
        self.db().execute(
            "UPDATE skill_grants SET identity = ?3
             WHERE persona = ?1 AND skill = ?2 AND identity IS NULL",
            params![persona, skill, identity],
        )?;
        Ok(())
    }

    /// Every grant as `(persona, skill, identity)`, sorted; the identity is
    /// `None` for a grant from before identities were recorded.
    pub fn skill_grants(&self) -> db::Result<Vec<(String, String, Option<String>)>> {
        self.db().query_map(
            "SELECT persona, skill, identity FROM skill_grants ORDER BY persona, skill",
            params![],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn personas_grants_and_generation() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open_sqlite(dir.path()).unwrap();
        let g0 = s.generation().unwrap();
        assert!(s.add_persona("ana", "").unwrap());
        assert!(!s.add_persona("ana", "").unwrap());
        assert!(s.grant_skill("ana", "text-tools", "builtin").unwrap());
        assert!(!s.grant_skill("ana", "text-tools", "builtin").unwrap());
        let g1 = s.generation().unwrap();
        assert!(g1 > g0);
        assert_eq!(
            s.skill_grants().unwrap(),
            vec![(
                "ana".to_string(),
                "text-tools".to_string(),
                Some("builtin".to_string())
            )]
        );
        // Granting again to another identity rebinds it and moves the
        // generation.
        assert!(s.grant_skill("ana", "text-tools", "signer:k").unwrap());
        assert!(s.generation().unwrap() > g1);
        assert_eq!(s.skill_grants().unwrap()[0].2.as_deref(), Some("signer:k"));
        // A legacy grant (NULL) is bound once; a bound one is left alone.
        s.db()
            .execute("UPDATE skill_grants SET identity = NULL", params![])
            .unwrap();
        s.bind_legacy_grant("ana", "text-tools", "local").unwrap();
        s.bind_legacy_grant("ana", "text-tools", "builtin").unwrap();
        assert_eq!(s.skill_grants().unwrap()[0].2.as_deref(), Some("local"));
        // Unchanged tool definitions do not move the generation.
        let defs = vec![("t".to_string(), "{}".to_string())];
        s.replace_mcp_tools("srv", &defs).unwrap();
        let g2 = s.generation().unwrap();
        s.replace_mcp_tools("srv", &defs).unwrap();
        assert_eq!(s.generation().unwrap(), g2);
        // Removing the persona removes its grants.
        assert!(s.remove_persona("ana").unwrap());
        assert!(s.skill_grants().unwrap().is_empty());
        // A grant to a missing persona is refused by the foreign key.
        assert!(s.grant_skill("nobody", "x", "builtin").is_err());
        assert!(!s.revoke_skill("nobody", "x").unwrap());
    }
}
