//! Personas and their grants, through the host.

use std::collections::BTreeMap;

use serde::Serialize;
use skillhost_mcp::{GLOBAL_ALL, McpConfig};

use super::{Host, lock};
use crate::registry::grants::{
    GrantChange, PersonaGrantView, persona_grants_get, persona_grants_put, toggle_grant,
};
use crate::state::personas::{Persona, invalid_persona_id, valid_persona_id};

/// One persona's grants: every MCP server (the seed's GET shape) and every
/// skill.
///
/// ```
/// let g = skillhost::PersonaGrants { persona: "ana".into(), mcp: vec![], skills: vec![] };
/// assert_eq!(serde_json::to_value(&g).unwrap()["persona"], "ana");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PersonaGrants {
    /// The persona.
    pub persona: String,
    /// Each MCP server: `name`, `global`, `authorized`.
    pub mcp: Vec<PersonaGrantView>,
    /// Each skill: `name`, `granted`.
    pub skills: Vec<SkillGrantView>,
}

/// One skill in a persona's grants.
///
/// ```
/// let v = skillhost::SkillGrantView { name: "text-tools".into(), granted: true };
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SkillGrantView {
    /// The skill.
    pub name: String,
    /// Whether the persona is granted it.
    pub granted: bool,
}

impl Host {
    /// Every persona, sorted by id.
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) -> anyhow::Result<()> {
    /// for p in host.personas()? { println!("{}", p.id); }
    /// # Ok(()) }
    /// ```
    pub fn personas(&self) -> anyhow::Result<Vec<Persona>> {
        Ok(lock(&self.inner.store).personas()?)
    }

    /// Creates a persona (granted nothing). Returns false if it existed.
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) -> anyhow::Result<()> {
    /// host.add_persona("support", "answers customers")?;
    /// # Ok(()) }
    /// ```
    pub fn add_persona(&self, id: &str, description: &str) -> anyhow::Result<bool> {
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
    /// # fn f(host: skillhost::Host) -> anyhow::Result<()> {
    /// host.remove_persona("support")?;
    /// # Ok(()) }
    /// ```
    pub fn remove_persona(&self, id: &str) -> anyhow::Result<()> {
        persona_arg(id)?;
        if !lock(&self.inner.store).persona_exists(id)? {
            anyhow::bail!("there is no persona `{id}` (`skillhost personas list` shows them)");
        }
        McpConfig::update(&self.inner.data.dir, |config| {
            for s in &mut config.servers {
                s.allowed_persona_ids.retain(|p| p != id);
            }
            Ok(())
        })
        .map_err(|e| anyhow::anyhow!("{}: {e}", self.inner.root.display()))?;
        let store = lock(&self.inner.store);
        store.bump_generation()?;
        store.remove_persona(id)?;
        drop(store);
        self.inner.changed();
        Ok(())
    }

    /// Grants (`on`) or revokes an MCP server for a persona, or for every
    /// persona with `"*"`, by the seed's rules (see
    /// [`crate::next_allowed_persona_ids`]). Returns the server's new
    /// `allowed_persona_ids`.
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) -> anyhow::Result<()> {
    /// assert_eq!(host.grant_mcp("*", "everything", true)?, vec!["*".to_string()]);
    /// # Ok(()) }
    /// ```
    pub fn grant_mcp(&self, persona: &str, server: &str, on: bool) -> anyhow::Result<Vec<String>> {
        if persona != GLOBAL_ALL {
            persona_arg(persona)?;
        }
        let existing = {
            let store = lock(&self.inner.store);
            let ids = store.persona_ids()?;
            if persona != GLOBAL_ALL && !ids.iter().any(|p| p == persona) {
                anyhow::bail!(
                    "there is no persona `{persona}` (`skillhost personas add {persona}` creates it)"
                );
            }
            ids
        };
        let next = McpConfig::update(&self.inner.data.dir, |config| {
            let names: Vec<String> = config.servers.iter().map(|s| s.name.clone()).collect();
            let Some(s) = config.server_mut(server) else {
                return Err(format!(
                    "no MCP server named {server:?} is configured (configured: {})",
                    if names.is_empty() {
                        "none".to_string()
                    } else {
                        names.join(", ")
                    }
                ));
            };
            // The server's list is the only MCP grant the host keeps, so
            // "clearing per-persona overrides" when it becomes global is
            // the list becoming exactly ["*"].
            let next = match toggle_grant(&s.allowed_persona_ids, persona, on, &existing) {
                GrantChange::Global(list) | GrantChange::Listed(list) => list,
            };
            s.allowed_persona_ids = next.clone();
            Ok(next)
        })
        .map_err(|e| anyhow::anyhow!("{e}"))?;
        lock(&self.inner.store).bump_generation()?;
        self.inner.changed();
        Ok(next)
    }

    /// A persona's grants PUT across MCP servers (server → authorized):
    /// global servers are skipped, others toggled for this persona.
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) -> anyhow::Result<()> {
    /// let wanted = std::collections::BTreeMap::from([("notes".to_string(), true)]);
    /// let grants = host.put_mcp_grants("support", &wanted)?;
    /// # Ok(()) }
    /// ```
    pub fn put_mcp_grants(
        &self,
        persona: &str,
        wanted: &BTreeMap<String, bool>,
    ) -> anyhow::Result<PersonaGrants> {
        persona_arg(persona)?;
        let existing = lock(&self.inner.store).persona_ids()?;
        if !existing.iter().any(|p| p == persona) {
            anyhow::bail!("there is no persona `{persona}`");
        }
        McpConfig::update(&self.inner.data.dir, |config| {
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
            Ok(())
        })
        .map_err(|e| anyhow::anyhow!("{e}"))?;
        lock(&self.inner.store).bump_generation()?;
        self.inner.changed();
        self.grants(persona)
    }

    /// Grants (`on`) or revokes a skill for a persona. Returns whether
    /// anything changed.
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) -> anyhow::Result<()> {
    /// host.grant_skill("support", "text-tools", true)?;
    /// # Ok(()) }
    /// ```
    pub fn grant_skill(&self, persona: &str, skill: &str, on: bool) -> anyhow::Result<bool> {
        persona_arg(persona)?;
        let reg = self.inner.registry()?;
        if !reg.personas.contains(persona) {
            anyhow::bail!(
                "there is no persona `{persona}` (`skillhost personas add {persona}` creates it)"
            );
        }
        if on && !reg.skills.contains_key(skill) {
            anyhow::bail!(
                "no skill named `{skill}` (skills: {})",
                reg.skills.keys().cloned().collect::<Vec<_>>().join(", ")
            );
        }
        let changed = lock(&self.inner.store).set_skill_grant(persona, skill, on)?;
        self.inner.changed();
        Ok(changed)
    }

    /// One persona's grants: every MCP server (`global` servers show
    /// `authorized: true`) and every skill.
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) -> anyhow::Result<()> {
    /// let g = host.grants("support")?;
    /// # Ok(()) }
    /// ```
    pub fn grants(&self, persona: &str) -> anyhow::Result<PersonaGrants> {
        persona_arg(persona)?;
        let reg = self.inner.registry()?;
        if !reg.personas.contains(persona) {
            anyhow::bail!("there is no persona `{persona}` (`skillhost personas list` shows them)");
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
                })
                .collect(),
        })
    }
}

fn persona_arg(id: &str) -> anyhow::Result<()> {
    if valid_persona_id(id) {
        Ok(())
    } else {
        anyhow::bail!("{}", invalid_persona_id(id))
    }
}
