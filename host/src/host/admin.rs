//! The host's operator API: personas, grants, approvals, runs, events,
//! refs, shutdown.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use skillhost_mcp::{GLOBAL_ALL, McpConfig, McpManager};

use super::{
    CallRequest, Caller, Host, PersonaGrants, RefInfo, RunReport, SkillGrantView, SkillStatus, lock,
};
use crate::grants::{GrantChange, persona_grants_get, persona_grants_put, toggle_grant};
use crate::handoff::{HandoffError, StructuredHandoff};
use crate::personas::{Persona, invalid_persona_id, valid_persona_id};
use crate::refs::RefBlobs;
use crate::registry::{Conflict, ToolSpec};
use crate::runs::{HostEvent, RunFilter, RunRecord, now_ms};

fn persona_arg(id: &str) -> anyhow::Result<()> {
    if valid_persona_id(id) {
        Ok(())
    } else {
        anyhow::bail!("{}", invalid_persona_id(id))
    }
}

impl Host {
    /// The data dir.
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) { println!("{}", host.data_dir().display()); }
    /// ```
    pub fn data_dir(&self) -> &Path {
        &self.inner.root
    }

    /// The MCP manager (its servers' states, logs and tools).
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) { for s in host.mcp().statuses() { println!("{}", s.name); } }
    /// ```
    pub fn mcp(&self) -> &McpManager {
        &self.inner.mcp
    }

    /// The tools `persona` may use (`None`: every registered tool, as the
    /// operator sees them), sorted by name. An unknown persona is an error.
    /// The list is computed once per state and shared: asking again before
    /// anything changes costs a lookup.
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) -> anyhow::Result<()> {
    /// for spec in host.tool_specs(Some("support"))?.iter() { println!("{}", spec.name); }
    /// # Ok(()) }
    /// ```
    pub fn tool_specs(&self, persona: Option<&str>) -> anyhow::Result<Arc<[Arc<ToolSpec>]>> {
        let reg = self.inner.registry()?;
        if let Some(p) = persona
            && !reg.personas.contains(p)
        {
            anyhow::bail!("there is no persona `{p}` (`skillhost personas list` shows them)");
        }
        Ok(reg.tool_specs(persona))
    }

    /// The caller's tools as of the last state this host read, without
    /// checking whether the state changed since (no SQLite read): `None`
    /// before the first read or for an unknown persona. For fast paths
    /// that only need a positive answer and fall back to [`Host::tool_specs`]
    /// (the call itself re-checks everything on fresh state).
    pub(crate) fn tool_specs_last_read(
        &self,
        persona: Option<&str>,
    ) -> Option<Arc<[Arc<ToolSpec>]>> {
        let reg = self.inner.last_read()?;
        if persona.is_some_and(|p| !reg.personas.contains(p)) {
            return None;
        }
        Some(reg.tool_specs(persona))
    }

    /// Name collisions between tool sources, and which source the rule kept.
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) -> anyhow::Result<()> {
    /// for c in host.conflicts()? { eprintln!("{c}"); }
    /// # Ok(()) }
    /// ```
    pub fn conflicts(&self) -> anyhow::Result<Vec<Conflict>> {
        Ok(self.inner.registry()?.conflicts.clone())
    }

    /// Tools left out of the registry for another reason than a collision
    /// (a schema that does not compile, an invalid specialist).
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) -> anyhow::Result<()> {
    /// for p in host.registry_problems()? { eprintln!("{p}"); }
    /// # Ok(()) }
    /// ```
    pub fn registry_problems(&self) -> anyhow::Result<Vec<String>> {
        Ok(self.inner.registry()?.problems.clone())
    }

    /// Every effective skill with its state (`ready`, `unresolved` with the
    /// missing names, `untrusted`, `disabled`, `invalid`).
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) -> anyhow::Result<()> {
    /// for s in host.skills()? { println!("{}: {:?}", s.name, s.state); }
    /// # Ok(()) }
    /// ```
    pub fn skills(&self) -> anyhow::Result<Vec<SkillStatus>> {
        let reg = self.inner.registry()?;
        Ok(reg
            .skills
            .iter()
            .map(|(name, info)| SkillStatus {
                name: name.clone(),
                version: info.entry.version.to_string(),
                source: info.entry.source.clone(),
                trusted: info.entry.trusted,
                enabled: info.entry.enabled,
                state: info.state.clone(),
                tools: info
                    .manifest
                    .as_ref()
                    .map(|m| m.tools.iter().map(|t| t.name.clone()).collect())
                    .unwrap_or_default(),
                tool_names: info
                    .manifest
                    .as_ref()
                    .map(|m| m.tool_names.clone())
                    .unwrap_or_default(),
                shadows: info.entry.shadows.clone(),
            })
            .collect())
    }

    /// Enables or disables a skill by name.
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) -> anyhow::Result<()> {
    /// host.set_skill_enabled("text-tools", false)?;
    /// # Ok(()) }
    /// ```
    pub fn set_skill_enabled(&self, name: &str, enabled: bool) -> anyhow::Result<()> {
        self.known_skill(name)?;
        lock(&self.inner.store).set_enabled(name, enabled)?;
        self.inner.changed();
        Ok(())
    }

    /// Trusts an untrusted install or local folder of this name.
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) -> anyhow::Result<()> {
    /// host.trust_skill("my-skill")?;
    /// # Ok(()) }
    /// ```
    pub fn trust_skill(&self, name: &str) -> anyhow::Result<()> {
        self.known_skill(name)?;
        lock(&self.inner.store).set_trusted(name)?;
        self.inner.changed();
        Ok(())
    }

    fn known_skill(&self, name: &str) -> anyhow::Result<()> {
        let reg = self.inner.registry()?;
        if reg.skills.contains_key(name) {
            Ok(())
        } else {
            anyhow::bail!("no skill named `{name}` (see `skillhost skills list`)")
        }
    }

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

    /// Calls `tool` as `caller` through the whole path (see the module
    /// docs). Never fails: every way a call can end is a [`RunReport`]
    /// outcome, recorded with its event.
    ///
    /// ```no_run
    /// # async fn f(host: skillhost::Host) {
    /// let run = host.call(&skillhost::Caller::persona("support"), "text.word_count",
    ///     serde_json::json!({"text": "a b c"}), &Default::default()).await;
    /// println!("{} {}", run.run_id, run.outcome);
    /// # }
    /// ```
    pub async fn call(
        &self,
        caller: &Caller,
        tool: &str,
        args: Value,
        req: &CallRequest,
    ) -> RunReport {
        self.inner.call(caller, tool, args, req, None, None).await
    }

    /// Calls `tool` with a [`StructuredHandoff`] from a previous step: the
    /// handoff is checked first ([`StructuredHandoff::validate`]: no host
    /// path, no shell command or interpreter invocation, well-formed refs),
    /// then its `args` and `input_refs` (added to `req.input_refs`) go
    /// through [`Host::call`]. A refused handoff reaches no tool and records
    /// no run.
    ///
    /// ```no_run
    /// # async fn f(host: skillhost::Host) -> anyhow::Result<()> {
    /// let handoff: skillhost::StructuredHandoff =
    ///     serde_json::from_str(r#"{"args": {"text": "a b"}}"#)?;
    /// let run = host
    ///     .call_handoff(&skillhost::Caller::Operator, "text.word_count", &handoff, &Default::default())
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub async fn call_handoff(
        &self,
        caller: &Caller,
        tool: &str,
        handoff: &StructuredHandoff,
        req: &CallRequest,
    ) -> Result<RunReport, HandoffError> {
        handoff.validate()?;
        let mut req = req.clone();
        for r in &handoff.input_refs {
            if !req.input_refs.contains(r) {
                req.input_refs.push(r.clone());
            }
        }
        Ok(self
            .call(caller, tool, Value::Object(handoff.args.clone()), &req)
            .await)
    }

    /// Approves a run waiting for approval and executes exactly the
    /// approved arguments, once, as its caller (authorization is checked
    /// again). Approving twice, after a denial or after expiry is an
    /// error that says which.
    ///
    /// ```no_run
    /// # async fn f(host: skillhost::Host) -> anyhow::Result<()> {
    /// let run = host.approve("run_0123").await?;
    /// # Ok(()) }
    /// ```
    pub async fn approve(&self, run_id: &str) -> anyhow::Result<RunReport> {
        self.approve_with(run_id, None, None).await
    }

    /// [`Host::approve`] with the approving request's cancellation and
    /// progress sink (the MCP front's confirmation by elicitation).
    pub(crate) async fn approve_with(
        &self,
        run_id: &str,
        cancel: Option<tokio_util::sync::CancellationToken>,
        progress: Option<tokio::sync::mpsc::UnboundedSender<skillhost_mcp::Progress>>,
    ) -> anyhow::Result<RunReport> {
        let run = self.pending(run_id)?;
        let Some(before) = self.inner.decide(run_id, "approved")? else {
            anyhow::bail!(
                "run {run_id} was decided by someone else meanwhile (`skillhost runs show {run_id}`)"
            );
        };
        let caller = match &run.persona {
            Some(p) => Caller::Persona(p.clone()),
            None => Caller::Operator,
        };
        let req = CallRequest {
            input_refs: before.input_refs.clone(),
            cancel,
            progress,
            ..Default::default()
        };
        let args = before
            .args
            .clone()
            .unwrap_or(Value::Object(Default::default()));
        Ok(self
            .inner
            .call(
                &caller,
                &before.tool,
                args,
                &req,
                None,
                Some((before.run_id, before.created_at_ms)),
            )
            .await)
    }

    /// Denies a run waiting for approval.
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) -> anyhow::Result<()> {
    /// host.deny("run_0123")?;
    /// # Ok(()) }
    /// ```
    pub fn deny(&self, run_id: &str) -> anyhow::Result<RunRecord> {
        self.pending(run_id)?;
        if self.inner.decide(run_id, "denied")?.is_none() {
            anyhow::bail!(
                "run {run_id} was decided by someone else meanwhile (`skillhost runs show {run_id}`)"
            );
        }
        self.flush();
        lock(&self.inner.store)
            .run(run_id)?
            .ok_or_else(|| anyhow::anyhow!("run {run_id} vanished"))
    }

    /// The run if it is pending and not expired; otherwise an error saying
    /// where it stands (an expired one is marked so).
    fn pending(&self, run_id: &str) -> anyhow::Result<RunRecord> {
        self.flush();
        let Some(run) = lock(&self.inner.store).run(run_id)? else {
            anyhow::bail!("there is no run {run_id:?} (`skillhost runs list` shows runs)");
        };
        match run.approval.as_deref() {
            Some("pending") => {}
            Some("approved") => anyhow::bail!(
                "run {run_id} was already approved and ran once (outcome {}); an approval runs the call once",
                run.outcome
            ),
            Some("denied") => {
                anyhow::bail!("run {run_id} was denied; call the tool again to ask anew")
            }
            Some("expired") => {
                anyhow::bail!("run {run_id} expired unapproved; call the tool again to ask anew")
            }
            _ => anyhow::bail!(
                "run {run_id} did not wait for approval (outcome {}); only waiting_approval runs can be approved or denied",
                run.outcome
            ),
        }
        if run.expires_at_ms.is_some_and(|t| t <= now_ms()) {
            self.inner.decide(run_id, "expired")?;
            anyhow::bail!("run {run_id} expired unapproved; call the tool again to ask anew");
        }
        Ok(run)
    }

    /// Runs, newest first.
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) -> anyhow::Result<()> {
    /// let pending = host.runs(&skillhost::RunFilter { pending_only: true, ..Default::default() })?;
    /// # Ok(()) }
    /// ```
    pub fn runs(&self, filter: &RunFilter) -> anyhow::Result<Vec<RunRecord>> {
        self.flush();
        self.inner.expire_pending();
        Ok(lock(&self.inner.store).runs(filter)?)
    }

    /// One run.
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) -> anyhow::Result<()> {
    /// let run = host.run("run_0123")?;
    /// # Ok(()) }
    /// ```
    pub fn run(&self, run_id: &str) -> anyhow::Result<Option<RunRecord>> {
        self.flush();
        self.inner.expire_pending();
        Ok(lock(&self.inner.store).run(run_id)?)
    }

    /// The events of this host as they happen (calls, approvals). A slow
    /// receiver misses events rather than slowing calls (it sees
    /// `Lagged`); every event is also recorded in the database.
    ///
    /// ```no_run
    /// # async fn f(host: skillhost::Host) {
    /// let mut events = host.events();
    /// while let Ok(e) = events.recv().await { println!("{} {:?}", e.kind, e.outcome); }
    /// # }
    /// ```
    pub fn events(&self) -> tokio::sync::broadcast::Receiver<HostEvent> {
        self.inner.events.subscribe()
    }

    /// Recorded events, newest first.
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) -> anyhow::Result<()> {
    /// for e in host.recent_events(20)? { println!("{:?}", e.run_id); }
    /// # Ok(()) }
    /// ```
    pub fn recent_events(&self, limit: usize) -> anyhow::Result<Vec<HostEvent>> {
        self.flush();
        Ok(lock(&self.inner.store).recent_events(limit)?)
    }

    /// Stores a blob and returns its ref (`label` is kept for listing; pass
    /// a file name, not a path).
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) -> anyhow::Result<()> {
    /// let r = host.add_ref(&mut &b"hello"[..], "greeting.txt")?;
    /// println!("{}", r.ref_id);
    /// # Ok(()) }
    /// ```
    pub fn add_ref(&self, reader: &mut dyn std::io::Read, label: &str) -> anyhow::Result<RefInfo> {
        let label = crate::escape::escape_control(
            label.rsplit(['/', '\\']).next().unwrap_or(label),
            200,
            false,
        );
        // Shared: a cleanup in another process starting now waits for this
        // blob to be recorded.
        let _adding = self.inner.refs.lock_shared()?;
        let blob = self.inner.refs.put(reader)?;
        let info = RefInfo {
            ref_id: blob.id,
            sha256: blob.sha256,
            size: blob.size,
            label,
            created_at: now_ms() / 1000,
        };
        if let Err(e) = lock(&self.inner.store).add_ref_record(&info) {
            let _ = self.inner.refs.remove(&info.ref_id);
            return Err(e.into());
        }
        Ok(info)
    }

    /// Every stored ref, newest first.
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) -> anyhow::Result<()> {
    /// for r in host.refs()? { println!("{} {}", r.ref_id, r.label); }
    /// # Ok(()) }
    /// ```
    pub fn refs(&self) -> anyhow::Result<Vec<RefInfo>> {
        Ok(lock(&self.inner.store).ref_records()?)
    }

    /// Removes a ref and its blob.
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) -> anyhow::Result<()> {
    /// host.remove_ref("ref_00000000000000000000000000000000")?;
    /// # Ok(()) }
    /// ```
    pub fn remove_ref(&self, ref_id: &str) -> anyhow::Result<()> {
        if !RefBlobs::valid_id(ref_id) || !lock(&self.inner.store).remove_ref_record(ref_id)? {
            anyhow::bail!("there is no ref {ref_id:?} (`skillhost refs list` shows them)");
        }
        self.inner.refs.remove(ref_id)
    }

    /// Waits until every run and event so far is in the database.
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) { host.flush(); }
    /// ```
    pub fn flush(&self) {
        self.inner.writer.flush(Duration::from_secs(10));
    }

    /// Records everything pending and stops every MCP server this host
    /// started.
    ///
    /// ```no_run
    /// # async fn f(host: skillhost::Host) { host.shutdown().await; }
    /// ```
    pub async fn shutdown(&self) {
        self.inner.mcp.shutdown().await;
        self.inner.writer.close();
    }
}
