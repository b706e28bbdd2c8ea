//! Personas and their grants, through the host: a persona sees nothing
//! until an operator grants it a skill (`skill_grants`, in the database) or
//! an MCP server (the server's `allowed_persona_ids` in `mcp_servers.json`,
//! changed by the rules of `crate::registry::grants`).

use std::collections::BTreeMap;

use serde::Serialize;
use skillhost_mcp::GLOBAL_ALL;

use super::{Host, lock};
use crate::error::PersonaError;
use crate::registry::grants::{
    GrantChange, PersonaGrantView, persona_grants_get, persona_grants_put, toggle_grant,
};
use crate::state::personas::Persona;
use crate::upstream;

/// One persona's grants: every MCP server (the contract's GET shape) and every
/// skill.
///
/// ```
/// let g = skillhost::PersonaGrants { persona: "ana".into(), mcp: vec![], skills: vec![] };
/// assert_eq!(serde_json::to_value(&g).unwrap()["persona"], "ana");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PersonaGrants {
    /// Id of the persona these grants belong to.
    pub persona: String,
    /// Each MCP server: `name`, `global`, `authorized`.
    pub mcp: Vec<PersonaGrantView>,
    /// Each skill: `name`, `granted`, and `suspended` when the persona's
    /// grant of that name was given to another skill.
    pub skills: Vec<SkillGrantView>,
}

/// One skill in a persona's grants.
///
/// ```
/// let v = skillhost::SkillGrantView { name: "text-tools".into(), granted: true, suspended: None };
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SkillGrantView {
    /// Name of the granted skill.
    pub name: String,
    /// Whether the persona is granted it.
    pub granted: bool,
    /// Set when the persona was granted a skill of that name that is not
    /// the one installed now: who the grant was given to. The grant is not
    /// in force until it is given again.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub suspended: Option<String>,
}

/// # Personas and grants
///
/// Who may call, and which skills and MCP servers each persona may use.
impl Host {
    /// Every persona, sorted by id.
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) -> Result<(), skillhost::PersonaError> {
    /// for p in host.personas()? { println!("{}", p.id); }
    /// # Ok(()) }
    /// ```
    pub fn personas(&self) -> Result<Vec<Persona>, PersonaError> {
        Ok(lock(&self.inner.store).personas()?)
    }

    /// Creates a persona (granted nothing). Returns false if it existed.
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) -> Result<(), skillhost::PersonaError> {
    /// host.add_persona("support", "answers customers")?;
    /// # Ok(()) }
    /// ```
    pub fn add_persona(&self, id: &str, description: &str) -> Result<bool, PersonaError> {
        persona_arg(id)?;
        let added = lock(&self.inner.store).add_persona(id, description)?;
        self.inner.changed();
        Ok(added)
    }

    /// Removes a persona: first from every MCP server's grants, then with
    /// its skill grants, so a crash in between leaves it with less, never
    /// more. Pending approvals of the persona are denied at approval.
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) -> Result<(), skillhost::PersonaError> {
    /// host.remove_persona("support")?;
    /// # Ok(()) }
    /// ```
    pub fn remove_persona(&self, id: &str) -> Result<(), PersonaError> {
        persona_arg(id)?;
        if !lock(&self.inner.store).persona_exists(id)? {
            return Err(no_persona(id, LIST_HINT));
        }
        upstream::update_config(&self.inner.data, |config| {
            for s in &mut config.servers {
                s.allowed_persona_ids.retain(|p| p != id);
            }
            Ok::<_, PersonaError>(())
        })?;
        let store = lock(&self.inner.store);
        store.remove_persona(id)?;
        drop(store);
        self.inner.changed();
        Ok(())
    }

    /// Grants (`on`) or revokes an MCP server for a persona, or for every
    /// persona with `"*"`, by the contract's rules (see
    /// [`crate::next_allowed_persona_ids`]). Returns the server's new
    /// `allowed_persona_ids`.
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) -> Result<(), skillhost::PersonaError> {
    /// assert_eq!(host.grant_mcp("*", "everything", true)?, vec!["*".to_string()]);
    /// # Ok(()) }
    /// ```
    pub fn grant_mcp(
        &self,
        persona: &str,
        server: &str,
        on: bool,
    ) -> Result<Vec<String>, PersonaError> {
        if persona != GLOBAL_ALL {
            persona_arg(persona)?;
        }
        let existing = {
            let store = lock(&self.inner.store);
            let ids = store.persona_ids()?;
            if persona != GLOBAL_ALL && !ids.iter().any(|p| p == persona) {
                return Err(no_persona(
                    persona,
                    &format!("`skillhost personas add {persona}` creates it"),
                ));
            }
            ids
        };
        let next = upstream::update_config(&self.inner.data, |config| {
            let names: Vec<String> = config.servers.iter().map(|s| s.name.clone()).collect();
            let Some(s) = config.server_mut(server) else {
                return Err(PersonaError::NotFound(format!(
                    "no MCP server named {server:?} is configured (configured: {})",
                    if names.is_empty() {
                        "none".to_string()
                    } else {
                        names.join(", ")
                    }
                )));
            };
            // The server's list is the only MCP grant the host keeps, so
            // "clearing per-persona overrides" when it becomes global is
            // the list becoming exactly ["*"].
            let next = match toggle_grant(&s.allowed_persona_ids, persona, on, &existing) {
                GrantChange::Global(list) | GrantChange::Listed(list) => list,
            };
            s.allowed_persona_ids = next.clone();
            Ok(next)
        })?;
        self.inner.changed();
        Ok(next)
    }

    /// A persona's grants PUT across MCP servers (server → authorized):
    /// global servers are skipped, others toggled for this persona.
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) -> Result<(), skillhost::PersonaError> {
    /// let wanted = std::collections::BTreeMap::from([("notes".to_string(), true)]);
    /// let grants = host.put_mcp_grants("support", &wanted)?;
    /// # Ok(()) }
    /// ```
    pub fn put_mcp_grants(
        &self,
        persona: &str,
        wanted: &BTreeMap<String, bool>,
    ) -> Result<PersonaGrants, PersonaError> {
        persona_arg(persona)?;
        let existing = lock(&self.inner.store).persona_ids()?;
        if !existing.iter().any(|p| p == persona) {
            return Err(no_persona(persona, LIST_HINT));
        }
        upstream::update_config(&self.inner.data, |config| {
            let servers: Vec<(String, Vec<String>)> = config
                .servers
                .iter()
                .map(|s| (s.name.clone(), s.allowed_persona_ids.clone()))
                .collect();
            for (name, list) in persona_grants_put(&servers, persona, wanted, &existing) {
                if let Some(s) = config.server_mut(&name) {
                    s.allowed_persona_ids = list;
                }
            }
            Ok::<_, PersonaError>(())
        })?;
        self.inner.changed();
        self.grants(persona)
    }

    /// Grants (`on`) or revokes a skill for a persona. Returns whether
    /// anything changed.
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) -> Result<(), skillhost::PersonaError> {
    /// host.grant_skill("support", "text-tools", true)?;
    /// # Ok(()) }
    /// ```
    pub fn grant_skill(&self, persona: &str, skill: &str, on: bool) -> Result<bool, PersonaError> {
        persona_arg(persona)?;
        let reg = self.inner.registry()?;
        if !reg.personas.contains(persona) {
            return Err(no_persona(
                persona,
                &format!("`skillhost personas add {persona}` creates it"),
            ));
        }
        let changed = if on {
            let Some(info) = reg.skills.get(skill) else {
                return Err(PersonaError::NotFound(format!(
                    "no skill named `{skill}` (skills: {})",
                    reg.skills.keys().cloned().collect::<Vec<_>>().join(", ")
                )));
            };
            // Bound to the skill of that name now; a suspended grant is
            // rebound to it.
            let identity = info.entry.identity().stored();
            lock(&self.inner.store).grant_skill(persona, skill, &identity)?
        } else {
            lock(&self.inner.store).revoke_skill(persona, skill)?
        };
        self.inner.changed();
        Ok(changed)
    }

    /// One persona's grants: every MCP server (`global` servers show
    /// `authorized: true`) and every skill.
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) -> Result<(), skillhost::PersonaError> {
    /// let g = host.grants("support")?;
    /// # Ok(()) }
    /// ```
    pub fn grants(&self, persona: &str) -> Result<PersonaGrants, PersonaError> {
        persona_arg(persona)?;
        let reg = self.inner.registry()?;
        if !reg.personas.contains(persona) {
            return Err(no_persona(persona, LIST_HINT));
        }
        let config = self.inner.mcp_config()?;
        let servers: Vec<(String, Vec<String>)> = config
            .servers
            .iter()
            .map(|s| (s.name.clone(), s.allowed_persona_ids.clone()))
            .collect();
        let granted = reg.grants.get(persona);
        Ok(PersonaGrants {
            persona: persona.to_string(),
            mcp: persona_grants_get(&servers, persona),
            skills: reg
                .skills
                .keys()
                .map(|name| SkillGrantView {
                    name: name.clone(),
                    granted: granted.is_some_and(|g| g.contains(name)),
                    suspended: reg
                        .suspended
                        .get(persona)
                        .and_then(|s| s.get(name))
                        .cloned(),
                })
                .collect(),
        })
    }

    /// Allows (`on`) or forbids the persona's MCP client to answer the
    /// confirmation of the persona's own calls (elicitation, or a
    /// 2026-07-28 retry with `inputResponses`). Off for every new persona:
    /// then only an operator approves its waiting calls. Turning it on
    /// trusts the client application to show the question to a person and
    /// to send that person's answer.
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) -> Result<(), skillhost::PersonaError> {
    /// host.set_client_approval("support", true)?;
    /// # Ok(()) }
    /// ```
    pub fn set_client_approval(&self, persona: &str, on: bool) -> Result<(), PersonaError> {
        persona_arg(persona)?;
        if !lock(&self.inner.store).set_client_approval(persona, on)? {
            return Err(no_persona(persona, LIST_HINT));
        }
        Ok(())
    }
}

/// Whether `id` is a valid persona id: 1 to 64 of `a-z`, `0-9`, `_`, `-`,
/// starting with a letter or digit.
///
/// ```
/// assert!(skillhost::valid_persona_id("support_bot"));
/// assert!(!skillhost::valid_persona_id("*"));
/// assert!(!skillhost::valid_persona_id("Ana"));
/// ```
pub fn valid_persona_id(id: &str) -> bool {
    let b = id.as_bytes();
    !b.is_empty()
        && b.len() <= 64
        && (b[0].is_ascii_lowercase() || b[0].is_ascii_digit())
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'_' || *c == b'-')
}

/// The message for an invalid persona id.
pub(crate) fn invalid_persona_id(id: &str) -> String {
    format!(
        "{:?} is not a valid persona id: use 1 to 64 of a-z, 0-9, `_` and `-`, starting with a \
         letter or digit (`*` means every persona and is only valid in MCP grants)",
        crate::escape::escape_control(id, 80, false)
    )
}

/// Refuses an invalid persona id.
fn persona_arg(id: &str) -> Result<(), PersonaError> {
    if valid_persona_id(id) {
        Ok(())
    } else {
        Err(PersonaError::Invalid(invalid_persona_id(id)))
    }
}

/// "There is no persona", with the command that helps.
fn no_persona(id: &str, hint: &str) -> PersonaError {
    PersonaError::NotFound(format!("there is no persona `{id}` ({hint})"))
}

const LIST_HINT: &str = "`skillhost personas list` shows them";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn persona_ids() {
        for ok in ["a", "support", "ops-2", "x_y", "0"] {
            assert!(valid_persona_id(ok), "{ok}");
        }
        let long = "a".repeat(65);
        for bad in ["", "*", "Ana", "-a", "_a", "a b", "a/b", "é", long.as_str()] {
            assert!(!valid_persona_id(bad), "{bad}");
        }
    }
}
