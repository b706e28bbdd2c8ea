//! The host as one authority: [`Host`] holds the registry, the grants, the
//! sandbox and the MCP manager, and every call passes one path:
//!
//! authorize → validate the arguments → stop in `waiting_approval` if the
//! tool needs confirmation → execute (sandbox limits, MCP timeouts) →
//! validate the result → record the run and its event.
//!
//! State lives in the data dir's database, so a long-running host and the
//! CLI can change it at the same time: the host notices another process's
//! change before its next call (SQLite's `data_version`, then the state
//! generation that every grant, trust or enablement change bumps).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use skillhost_mcp::{McpConfig, McpManager, RegisteredTool};

use crate::error::{PersonaError, StateError};
use crate::registry::{Conflict, DEFAULT_SPECIALISTS, Inputs, Registry, ToolSpec};
use crate::sandbox::Sandbox;
use crate::skill::Skill;
use crate::state::Store;
use crate::state::data_dir::DataDir;
use crate::state::refs::RefBlobs;
use crate::state::runs::{HostEvent, RunRow};
use crate::state::writer::EventWriter;
use redaction::{redact, secret_forms};

pub(crate) mod access;
pub(crate) mod answers;
mod builder;
mod call;
mod changes;
pub use changes::LIST_CHANGED_POLL;
pub(crate) mod handoff;
mod invoke;
pub(crate) mod metrics;
pub(crate) mod personas;
pub(crate) mod questions;
pub(crate) mod reach;
mod redaction;
pub(crate) mod runs;
pub(crate) mod scripts;
pub(crate) mod secrets;
mod servers;
mod skills;
mod sources;
pub(crate) mod tokens;
pub(crate) mod why;

pub use builder::HostBuilder;
pub use call::{CallRequest, Caller, RunOutput, RunReport};
pub use personas::{PersonaGrants, SkillGrantView};
pub(crate) use runs::Resumed;
pub use runs::{
    ACTIVITY_MAX_RUNS, Activity, ClientAnswer, Decider, EventPage, GcReport, InputRef,
    MinuteCounts, RunDetail, ToolLatency,
};
pub use skills::SkillStatus;

struct Seen {
    data_version: i64,
    generation: i64,
    /// When the database was last asked whether the state changed.
    checked_at: Option<std::time::Instant>,
    /// The change feed's epoch read just before that (see
    /// [`HostInner::still_fresh`]).
    feed_epoch: Option<u64>,
}

pub(crate) struct HostInner {
    pub(crate) root: PathBuf,
    data: DataDir,
    store: Mutex<Store>,
    writer: EventWriter,
    sandbox: Sandbox,
    pub(crate) mcp: McpManager,
    snapshot: RwLock<Option<Arc<Registry>>>,
    seen: Mutex<Seen>,
    /// The persona tokens as last read (`tokens.rs`).
    tokens: Mutex<tokens::TokenSnapshot>,
    /// The data dir's sealing key, once checked against the database
    /// (`secrets.rs` `sealing_key`).
    sealing: std::sync::OnceLock<Arc<crate::state::sealing::SealingKey>>,
    loaded: Mutex<HashMap<String, (String, Skill)>>,
    /// Skills' files for their scripts, with byte-code, by digest.
    script_files: scripts::ScriptFiles,
    events: tokio::sync::broadcast::Sender<HostEvent>,
    approval_ttl: Duration,
    /// Keep every call's arguments with its run (`settings.json`
    /// `record_arguments`).
    record_arguments: bool,
    refs: RefBlobs,
    /// Every configured secret value (MCP env and header values), redacted
    /// from anything recorded.
    secrets: RwLock<Arc<[String]>>,
    /// This host's counters ([`Host::metrics_text`]).
    metrics: crate::authority::metrics::Metrics,
    /// Bumped whenever the registry snapshot changes (see
    /// [`Host::changes`]); fed by one watcher task, whatever the number of
    /// listeners.
    changes: tokio::sync::watch::Sender<u64>,
    /// Whether the watcher task runs.
    watching: Mutex<bool>,
    /// Each ready skill's approved reach (origins, secret headers,
    /// assets), rebuilt with the registry.
    reach: RwLock<HashMap<String, Arc<reach::Reach>>>,
    /// The verifier of access tokens for the front (`front_oauth`), made
    /// from the settings at first use.
    access: std::sync::OnceLock<Option<Arc<access::AccessVerifier>>>,
    /// The signer of the answers a client carries between the rounds of a
    /// call (`requestState`), made from the database's key at first use.
    request_states: std::sync::OnceLock<rmcp::model::RequestStateCodec>,
    /// On a database replicas share: its change feed, which tells this
    /// host when to ask the database whether the state changed.
    feed: Option<crate::state::db::ChangeFeed>,
}

/// The host. Cheap to clone; every clone is the same host.
///
/// # Methods by task
///
/// Each task's methods are one `impl Host` block (one file of
/// `authority/`), listed here in the order an embedder meets them:
///
/// - **Start and stop**: build it with [`HostBuilder`]; [`data_dir`],
///   [`flush`] (the run history on disk), [`shutdown`].
/// - **A caller's tools and calls**: [`tool_specs`] (what a persona may
///   use), [`call`] and [`call_handoff`] (the one call path), [`changes`]
///   (wakes when the tool list may have changed), [`conflicts`] and
///   [`registry_problems`] (tools that could not be registered), [`why`]
///   (why a persona may or may not call a tool).
/// - **Personas and grants**: [`personas`], [`add_persona`],
///   [`remove_persona`], [`grants`], [`grant_skill`], [`grant_mcp`],
///   [`put_mcp_grants`], [`set_client_approval`].
/// - **Approvals, runs and events**: [`pending_approvals`], [`approve`],
///   [`approve_by`], [`deny`], [`deny_by`], [`deny_because`],
///   [`client_may_decide`]; [`runs`], [`run_page`], [`run`],
///   [`run_detail`], [`activity`]; [`events`] (the live stream),
///   [`recent_events`], [`event_page`]; [`gc`] (retention).
/// - **Questions a skill asks the operator**: [`questions`],
///   [`answer_question`].
/// - **Input refs** (files a call may read): [`add_ref`], [`refs`],
///   [`remove_ref`].
/// - **Skills and bundles**: [`skills`], [`installed_skills`],
///   [`skill_source_problems`], [`verify_bundle`], [`install_bundle`],
///   [`bundle_upload`], [`verify_upload`], [`install_upload`],
///   [`uninstall_skill`], [`set_skill_enabled`], [`trust_skill`],
///   [`approve_permissions`]; publisher keys: [`trust_key`],
///   [`trusted_keys`], [`untrust_key`]; skill folders to load:
///   [`sources`], [`add_source`], [`remove_source`].
/// - **Skill secrets**: [`set_secret`], [`secrets`], [`remove_secret`].
/// - **MCP servers**: [`mcp`], [`connect_mcp_servers`], [`mcp_servers`],
///   [`mcp_server`], [`add_mcp_server`], [`replace_mcp_server`],
///   [`remove_mcp_server`], [`enable_mcp_server`],
///   [`disable_mcp_server`], [`import_mcp_servers`], [`test_mcp_server`],
///   [`restart_mcp`], [`mcp_server_tools`], [`mcp_server_logs`]; their
///   sign-ins: [`sign_in_mcp_server`], [`sign_out_mcp_server`],
///   [`mcp_sign_in_state`].
/// - **Tokens and access**: [`add_token`], [`tokens`], [`remove_token`],
///   [`token_persona`], [`admin_token`]; OAuth access tokens:
///   [`front_oauth`], [`access_token_caller`].
/// - **Metrics**: [`metrics_text`] (Prometheus text).
///
/// Every fallible method returns the typed error of its family
/// ([`crate::HostError`]); [`call`] never fails: every way a call ends is
/// a [`RunReport`] outcome.
///
/// [`data_dir`]: Host::data_dir
/// [`flush`]: Host::flush
/// [`shutdown`]: Host::shutdown
/// [`tool_specs`]: Host::tool_specs
/// [`call`]: Host::call
/// [`call_handoff`]: Host::call_handoff
/// [`changes`]: Host::changes
/// [`conflicts`]: Host::conflicts
/// [`registry_problems`]: Host::registry_problems
/// [`why`]: Host::why
/// [`personas`]: Host::personas
/// [`add_persona`]: Host::add_persona
/// [`remove_persona`]: Host::remove_persona
/// [`grants`]: Host::grants
/// [`grant_skill`]: Host::grant_skill
/// [`grant_mcp`]: Host::grant_mcp
/// [`put_mcp_grants`]: Host::put_mcp_grants
/// [`set_client_approval`]: Host::set_client_approval
/// [`pending_approvals`]: Host::pending_approvals
/// [`approve`]: Host::approve
/// [`approve_by`]: Host::approve_by
/// [`deny`]: Host::deny
/// [`deny_by`]: Host::deny_by
/// [`deny_because`]: Host::deny_because
/// [`client_may_decide`]: Host::client_may_decide
/// [`runs`]: Host::runs
/// [`run_page`]: Host::run_page
/// [`run`]: Host::run
/// [`run_detail`]: Host::run_detail
/// [`activity`]: Host::activity
/// [`events`]: Host::events
/// [`recent_events`]: Host::recent_events
/// [`event_page`]: Host::event_page
/// [`gc`]: Host::gc
/// [`questions`]: Host::questions
/// [`answer_question`]: Host::answer_question
/// [`add_ref`]: Host::add_ref
/// [`refs`]: Host::refs
/// [`remove_ref`]: Host::remove_ref
/// [`skills`]: Host::skills
/// [`installed_skills`]: Host::installed_skills
/// [`skill_source_problems`]: Host::skill_source_problems
/// [`verify_bundle`]: Host::verify_bundle
/// [`install_bundle`]: Host::install_bundle
/// [`bundle_upload`]: Host::bundle_upload
/// [`verify_upload`]: Host::verify_upload
/// [`install_upload`]: Host::install_upload
/// [`uninstall_skill`]: Host::uninstall_skill
/// [`set_skill_enabled`]: Host::set_skill_enabled
/// [`trust_skill`]: Host::trust_skill
/// [`approve_permissions`]: Host::approve_permissions
/// [`trust_key`]: Host::trust_key
/// [`trusted_keys`]: Host::trusted_keys
/// [`untrust_key`]: Host::untrust_key
/// [`sources`]: Host::sources
/// [`add_source`]: Host::add_source
/// [`remove_source`]: Host::remove_source
/// [`set_secret`]: Host::set_secret
/// [`secrets`]: Host::secrets
/// [`remove_secret`]: Host::remove_secret
/// [`mcp`]: Host::mcp
/// [`connect_mcp_servers`]: Host::connect_mcp_servers
/// [`mcp_servers`]: Host::mcp_servers
/// [`mcp_server`]: Host::mcp_server
/// [`add_mcp_server`]: Host::add_mcp_server
/// [`replace_mcp_server`]: Host::replace_mcp_server
/// [`remove_mcp_server`]: Host::remove_mcp_server
/// [`enable_mcp_server`]: Host::enable_mcp_server
/// [`disable_mcp_server`]: Host::disable_mcp_server
/// [`import_mcp_servers`]: Host::import_mcp_servers
/// [`test_mcp_server`]: Host::test_mcp_server
/// [`restart_mcp`]: Host::restart_mcp
/// [`mcp_server_tools`]: Host::mcp_server_tools
/// [`mcp_server_logs`]: Host::mcp_server_logs
/// [`sign_in_mcp_server`]: Host::sign_in_mcp_server
/// [`sign_out_mcp_server`]: Host::sign_out_mcp_server
/// [`mcp_sign_in_state`]: Host::mcp_sign_in_state
/// [`add_token`]: Host::add_token
/// [`tokens`]: Host::tokens
/// [`remove_token`]: Host::remove_token
/// [`token_persona`]: Host::token_persona
/// [`admin_token`]: Host::admin_token
/// [`front_oauth`]: Host::front_oauth
/// [`access_token_caller`]: Host::access_token_caller
/// [`metrics_text`]: Host::metrics_text
///
/// ```no_run
/// # async fn f() -> anyhow::Result<()> {
/// use skillhost::{Caller, HostBuilder};
/// let host = HostBuilder::new("data").build().await?;
/// host.add_persona("support", "answers customers")?;
/// host.grant_skill("support", "text-tools", true)?;
/// let run = host.call(&Caller::persona("support"), "text.word_count",
///     serde_json::json!({"text": "one two"}), &Default::default()).await;
/// assert_eq!(run.output.unwrap().data()["words"], 2);
/// host.shutdown().await;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Host {
    pub(crate) inner: Arc<HostInner>,
}

impl std::fmt::Debug for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Host")
            .field("data_dir", &self.inner.root)
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl HostInner {
    /// The MCP servers' configuration: the data dir's file, or on a
    /// database replicas share, the database's (`upstream/shared_config.rs`).
    fn mcp_config(&self) -> anyhow::Result<McpConfig> {
        if self.data.database.is_shared() {
            let key = self.sealing_key()?;
            return crate::upstream::shared_config::load(&lock(&self.store), &key);
        }
        McpConfig::load(&self.data.dir).map_err(|e| anyhow::anyhow!("{}: {e}", self.root.display()))
    }

    /// Marks the snapshot stale after a change made through this host's
    /// own connection (which `data_version` does not report).
    fn changed(&self) {
        lock(&self.seen).data_version = -1;
        lock(&self.tokens).checked_at = None;
    }

    /// The registry as last read, whether or not the state changed since.
    fn last_read(&self) -> Option<Arc<Registry>> {
        self.snapshot
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The change feed's epoch now: `None` without a feed or while it is
    /// away.
    fn feed_epoch(&self) -> Option<u64> {
        self.feed.as_ref().and_then(|f| f.epoch())
    }

    /// Whether a snapshot read from the database at `checked_at`, when the
    /// feed's epoch was `epoch`, may still be used without asking the
    /// database again: while the feed listens, until it moves (or
    /// [`FEED_RECHECK`](crate::limits::FEED_RECHECK) passes); else for
    /// [`REGISTRY_RECHECK`](crate::limits::REGISTRY_RECHECK).
    fn still_fresh(&self, checked_at: Option<std::time::Instant>, epoch: Option<u64>) -> bool {
        let Some(t) = checked_at else { return false };
        match self.feed_epoch() {
            Some(now) if epoch == Some(now) => t.elapsed() < crate::limits::FEED_RECHECK,
            _ => t.elapsed() < crate::limits::REGISTRY_RECHECK,
        }
    }

    /// The current registry, rebuilt if any state changed since the last
    /// call (in this process or another).
    fn registry(&self) -> anyhow::Result<Arc<Registry>> {
        // Asked within REGISTRY_RECHECK, with no change in this process
        // since: the snapshot stands, and the database is not asked. A
        // change another process commits applies from then on. On a
        // database replicas share, while the change feed listens, the
        // snapshot stands until the feed says another connection
        // committed a change (`still_fresh`).
        {
            let seen = lock(&self.seen);
            if seen.data_version != -1
                && self.still_fresh(seen.checked_at, seen.feed_epoch)
                && let Some(reg) = self.last_read()
            {
                return Ok(reg);
            }
        }
        {
            // The epoch before the database: a change committed after
            // this read moves it, so it is not missed.
            let epoch = self.feed_epoch();
            let store = lock(&self.store);
            let mut seen = lock(&self.seen);
            seen.checked_at = Some(std::time::Instant::now());
            seen.feed_epoch = epoch;
            let dv = store.data_version()?;
            let current = self
                .snapshot
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .clone();
            if dv == seen.data_version
                && let Some(reg) = current
            {
                return Ok(reg);
            }
            let generation = store.generation()?;
            seen.data_version = dv;
            if generation == seen.generation
                && let Some(reg) = current
            {
                return Ok(reg);
            }
            seen.generation = generation;
        }
        let reg = Arc::new(self.build_registry()?);
        *self.snapshot.write().unwrap_or_else(|e| e.into_inner()) = Some(reg.clone());
        Ok(reg)
    }

    fn build_registry(&self) -> anyhow::Result<Registry> {
        let settings = self.data.settings()?;
        let mcp = self.mcp_config()?;
        let source_problems;
        let (skills, personas, skill_grants, defs) = {
            let store = lock(&self.store);
            // Installs another replica made, unpacked here first.
            if self.data.database.is_shared() {
                crate::bundle::install::materialize(&self.data, &store)?;
            }
            let (entries, problems) = crate::registry::catalog::effective(&self.data, &store)?;
            for p in &problems {
                tracing::warn!("{p}");
            }
            source_problems = problems;
            (
                entries,
                store.persona_ids()?,
                store.skill_grants()?,
                store.mcp_tool_definitions()?,
            )
        };
        let skills = skills
            .into_iter()
            .map(|e| {
                let m = e.manifest().map_err(|err| err.to_string());
                (e, m)
            })
            .collect();
        let mut mcp_tools: BTreeMap<String, Vec<RegisteredTool>> = BTreeMap::new();
        for (server, def) in defs {
            match serde_json::from_str::<RegisteredTool>(&def) {
                Ok(t) => mcp_tools.entry(server).or_default().push(t),
                Err(e) => {
                    tracing::warn!(server = %server, "a stored tool definition is unreadable: {e}")
                }
            }
        }
        let mut secrets: Vec<String> = mcp
            .servers
            .iter()
            .flat_map(|s| {
                s.env
                    .values()
                    .chain(s.headers.values())
                    .chain(s.oauth.as_ref().and_then(|o| o.client_secret.as_ref()))
            })
            .flat_map(|v| secret_forms(v.expose()))
            .collect();
        let specialists = if settings.specialists.is_empty() {
            DEFAULT_SPECIALISTS.iter().map(|s| s.to_string()).collect()
        } else {
            settings.specialists.clone()
        };
        let reg = Registry::build(Inputs {
            skills,
            mcp,
            mcp_tools,
            personas,
            skill_grants,
            specialists,
            source_problems,
        });
        // The redaction list: the MCP servers' secrets and the skills'.
        let (reach, values) = self.build_reach(&reg);
        *self.reach.write().unwrap_or_else(|e| e.into_inner()) = reach;
        secrets.extend(values.iter().flat_map(|v| secret_forms(v)));
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        secrets.dedup();
        *self.secrets.write().unwrap_or_else(|e| e.into_inner()) = secrets.into();
        // Grants from before identities were recorded are bound to the
        // skill present now, once.
        if !reg.unbound.is_empty() {
            let store = lock(&self.store);
            for (persona, skill, identity) in &reg.unbound {
                store.bind_legacy_grant(persona, skill, &identity.stored())?;
            }
        }
        Ok(reg)
    }

    /// Redacts every secret from the strings of `value`; whether any was
    /// there.
    fn redact_value(&self, value: &mut serde_json::Value) -> bool {
        let secrets = self.secrets.read().unwrap_or_else(|e| e.into_inner());
        !secrets.is_empty() && redaction::redact_value(&secrets, value)
    }

    fn redact(&self, text: &str) -> String {
        redact(
            &self.secrets.read().unwrap_or_else(|e| e.into_inner()),
            text,
        )
    }

    /// Records and publishes an event. Every event passes here, so every
    /// string in it that a guest, a server or a caller chose is redacted
    /// here, once, whoever built it (`redaction::redact_event`); with no
    /// secret configured this costs a read lock.
    fn emit(&self, mut e: HostEvent) {
        {
            let secrets = self.secrets.read().unwrap_or_else(|e| e.into_inner());
            if !secrets.is_empty() {
                redaction::redact_event(&secrets, &mut e);
            }
        }
        let _ = self.events.send(e.clone());
        self.writer.event(e);
    }

    /// Queues a run with the event of its end (written together), then
    /// publishes the event; both redacted as [`HostInner::emit`] says.
    fn emit_run(&self, mut row: RunRow, mut e: HostEvent) {
        {
            let secrets = self.secrets.read().unwrap_or_else(|e| e.into_inner());
            if !secrets.is_empty() {
                redaction::redact_run(&secrets, &mut row);
                redaction::redact_event(&secrets, &mut e);
            }
        }
        self.writer.run_with_event(row, e.clone());
        let _ = self.events.send(e);
    }
}

impl Host {
    pub(crate) fn registry(&self) -> anyhow::Result<Arc<Registry>> {
        self.inner.registry()
    }

    pub(crate) fn mcp_config(&self) -> anyhow::Result<McpConfig> {
        self.inner.mcp_config()
    }

    pub(crate) async fn ensure_mcp(&self, server: &str) -> Result<(), crate::error::ServerError> {
        self.inner.ensure_server(server).await
    }

    pub(crate) fn data(&self) -> &cap_std::fs::Dir {
        &self.inner.data.dir
    }
}

/// # The host itself
///
/// Its data dir, the tools a persona may use, what could not be
/// registered, and stopping.
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
    /// # fn f(host: skillhost::Host) -> Result<(), skillhost::PersonaError> {
    /// for spec in host.tool_specs(Some("support"))?.iter() { println!("{}", spec.name); }
    /// # Ok(()) }
    /// ```
    pub fn tool_specs(&self, persona: Option<&str>) -> Result<Arc<[Arc<ToolSpec>]>, PersonaError> {
        let reg = self.inner.registry()?;
        if let Some(p) = persona
            && !reg.personas.contains(p)
        {
            return Err(PersonaError::NotFound(format!(
                "there is no persona `{p}` (`skillhost personas list` shows them)"
            )));
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
    /// # fn f(host: skillhost::Host) -> Result<(), skillhost::StateError> {
    /// for c in host.conflicts()? { eprintln!("{c}"); }
    /// # Ok(()) }
    /// ```
    pub fn conflicts(&self) -> Result<Vec<Conflict>, StateError> {
        Ok(self.inner.registry()?.conflicts.clone())
    }

    /// Tools left out of the registry for another reason than a collision
    /// (a schema that does not compile, an invalid specialist).
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) -> Result<(), skillhost::StateError> {
    /// for p in host.registry_problems()? { eprintln!("{p}"); }
    /// # Ok(()) }
    /// ```
    pub fn registry_problems(&self) -> Result<Vec<String>, StateError> {
        Ok(self.inner.registry()?.problems.clone())
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
