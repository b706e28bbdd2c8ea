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
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;
use skillhost_mcp::{McpConfig, McpManager, RegisteredTool, ServerState};
use tokio_util::sync::CancellationToken;

use crate::catalog::SkillSource;
use crate::data_dir::DataDir;
use crate::grants::PersonaGrantView;
use crate::handoff::StructuredHandoff;
use crate::limits::{LimitsPolicy, LimitsRequest};
use crate::refs::RefBlobs;
use crate::registry::{DEFAULT_SPECIALISTS, Inputs, Registry, SkillState};
use crate::runs::{EventWriter, HostEvent, Outcome, RunFilter, RunRecord, RunRow, now_ms};
use crate::sandbox::{Sandbox, SandboxBuilder, TrapReason};
use crate::skill::Skill;
use crate::store::Store;

/// Default time an approval stays valid.
pub const DEFAULT_APPROVAL_TTL: Duration = Duration::from_secs(900);

/// Builds a [`Host`].
///
/// Defaults: the data dir `./data`; the sandbox's default limits policy
/// ([`LimitsPolicy::default`]) and its compiled-code cache in
/// `data/cache/components`; MCP servers started on demand, for the call
/// that needs them, and stopped at [`Host::shutdown`]
/// (`connect_mcp(true)` starts every enabled server at build instead);
/// approvals valid for `approval_ttl_secs` from `settings.json`, else
/// [`DEFAULT_APPROVAL_TTL`].
///
/// ```no_run
/// # async fn f() -> anyhow::Result<()> {
/// let host = skillhost::HostBuilder::new("data").build().await?;
/// host.shutdown().await;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct HostBuilder {
    data_dir: PathBuf,
    policy: Option<LimitsPolicy>,
    sandbox: Option<Sandbox>,
    connect_mcp: bool,
    approval_ttl: Option<Duration>,
}

impl HostBuilder {
    /// A builder for the data dir at `data_dir` (created if missing).
    ///
    /// ```
    /// let b = skillhost::HostBuilder::new("data");
    /// ```
    pub fn new(data_dir: impl Into<PathBuf>) -> HostBuilder {
        HostBuilder {
            data_dir: data_dir.into(),
            policy: None,
            sandbox: None,
            connect_mcp: false,
            approval_ttl: None,
        }
    }

    /// The limits policy for skill calls (ignored if [`HostBuilder::sandbox`]
    /// is given).
    ///
    /// ```
    /// let b = skillhost::HostBuilder::new("data").limits(skillhost::LimitsPolicy::default());
    /// ```
    pub fn limits(mut self, policy: LimitsPolicy) -> HostBuilder {
        self.policy = Some(policy);
        self
    }

    /// Use this sandbox instead of building one.
    ///
    /// ```no_run
    /// let sandbox = skillhost::SandboxBuilder::new().build().unwrap();
    /// let b = skillhost::HostBuilder::new("data").sandbox(sandbox);
    /// ```
    pub fn sandbox(mut self, sandbox: Sandbox) -> HostBuilder {
        self.sandbox = Some(sandbox);
        self
    }

    /// Start every enabled MCP server at build and keep it supervised
    /// (for a long-running host); default false (start on demand).
    ///
    /// ```
    /// let b = skillhost::HostBuilder::new("data").connect_mcp(true);
    /// ```
    pub fn connect_mcp(mut self, yes: bool) -> HostBuilder {
        self.connect_mcp = yes;
        self
    }

    /// How long a call waiting for approval may be approved.
    ///
    /// ```
    /// let b = skillhost::HostBuilder::new("data").approval_ttl(std::time::Duration::from_secs(60));
    /// ```
    pub fn approval_ttl(mut self, ttl: Duration) -> HostBuilder {
        self.approval_ttl = Some(ttl);
        self
    }

    /// Opens the data dir and its database, and builds the host.
    ///
    /// ```no_run
    /// # async fn f() -> anyhow::Result<()> {
    /// let host = skillhost::HostBuilder::new("data").build().await?;
    /// # Ok(()) }
    /// ```
    pub async fn build(self) -> anyhow::Result<Host> {
        let data = DataDir::open(&self.data_dir)?;
        let settings = data.settings()?;
        let sandbox = match self.sandbox {
            Some(s) => s,
            None => {
                let mut b = SandboxBuilder::new();
                b.cache_dir(data.root.join("cache").join("components"));
                if let Some(p) = self.policy {
                    b.policy(p);
                }
                b.build()?
            }
        };
        let mut store = Store::open(&data.root)?;
        crate::installs::recover(&data, &mut store)?;
        match store.interrupt_orphaned_runs() {
            Ok(ids) if !ids.is_empty() => {
                tracing::warn!(runs = ?ids, "approved runs interrupted by a process that died")
            }
            Ok(_) => {}
            Err(e) => tracing::warn!("cannot check for interrupted runs: {e}"),
        }
        let writer = EventWriter::start(Store::open(&data.root)?);
        let refs = RefBlobs::open(&data.dir)?;
        // Clean up after a crash mid-add, unless another process is adding a
        // ref right now (then its blob may be unrecorded for a moment; the
        // next start cleans up).
        match refs.try_lock_exclusive() {
            Ok(Some(_cleanup)) => {
                if let Err(e) = refs.sweep_temp() {
                    tracing::warn!("cannot clean unfinished refs: {e}");
                }
                // A blob whose record was never written (a crash between
                // the two) is unreachable: remove it.
                if let (Ok(ids), Ok(records)) = (refs.ids(), store.ref_records()) {
                    for id in ids {
                        if !records.iter().any(|r| r.ref_id == id) {
                            let _ = refs.remove(&id);
                        }
                    }
                }
            }
            Ok(None) => {}
            Err(e) => tracing::warn!("{e}"),
        }
        let mcp = McpManager::new(crate::mcp_state::mcp_manager_options(&data.root)?);
        let approval_ttl = self
            .approval_ttl
            .or(settings.approval_ttl_secs.map(Duration::from_secs))
            .unwrap_or(DEFAULT_APPROVAL_TTL);
        let (events, _) = tokio::sync::broadcast::channel(1024);
        let inner = Arc::new(HostInner {
            root: data.root.clone(),
            data,
            store: Mutex::new(store),
            writer,
            sandbox,
            mcp,
            snapshot: RwLock::new(None),
            seen: Mutex::new(Seen {
                data_version: -1,
                generation: -1,
            }),
            loaded: Mutex::new(HashMap::new()),
            events,
            approval_ttl,
            refs,
            secrets: RwLock::new(Vec::new()),
            metrics: crate::metrics::Metrics::new(),
        });
        let host = Host { inner };
        host.inner.expire_pending();
        if self.connect_mcp {
            let config = host.inner.mcp_config()?;
            host.inner.mcp.connect_all(&config).await;
        }
        Ok(host)
    }
}

/// Who is calling: a persona, or the operator (who may call every
/// registered tool).
///
/// ```
/// let c = skillhost::Caller::persona("support");
/// assert_eq!(c.persona_id(), Some("support"));
/// assert_eq!(skillhost::Caller::Operator.persona_id(), None);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caller {
    /// The operator: every registered tool, confirmation still applies.
    Operator,
    /// A persona: only the tools granted to it.
    Persona(String),
}

impl Caller {
    /// A persona caller.
    ///
    /// ```
    /// let c = skillhost::Caller::persona("ana");
    /// ```
    pub fn persona(id: impl Into<String>) -> Caller {
        Caller::Persona(id.into())
    }

    /// The persona's id, or `None` for the operator.
    ///
    /// ```
    /// assert_eq!(skillhost::Caller::Operator.persona_id(), None);
    /// ```
    pub fn persona_id(&self) -> Option<&str> {
        match self {
            Caller::Operator => None,
            Caller::Persona(p) => Some(p),
        }
    }
}

/// How to make one call, beyond the tool and its arguments.
///
/// `CallRequest::default()`: no refs, the tool's own limits, confirmation
/// required where the tool asks for it, not cancellable, progress dropped.
///
/// ```
/// let req = skillhost::CallRequest { confirmed: true, ..Default::default() };
/// ```
#[derive(Debug, Clone, Default)]
pub struct CallRequest {
    /// Refs (from [`Host::add_ref`]) the tool may read with `read-ref`.
    pub input_refs: Vec<String>,
    /// Limits asked for this call (capped by the policy).
    pub limits: LimitsRequest,
    /// The operator confirmed the call up front (`--yes`): no
    /// `waiting_approval` stop.
    pub confirmed: bool,
    /// Cancels the call: interrupts the WASM call or cancels the MCP request.
    pub cancel: Option<CancellationToken>,
    /// Receives the progress notifications an MCP server sends while it
    /// works on the call (skill tools report none).
    pub progress: Option<tokio::sync::mpsc::UnboundedSender<skillhost_mcp::Progress>>,
}

/// What one call came to.
///
/// ```no_run
/// # async fn f(host: skillhost::Host) {
/// let run = host.call(&skillhost::Caller::Operator, "text.word_count",
///     serde_json::json!({"text": "a b"}), &Default::default()).await;
/// match run.outcome {
///     skillhost::Outcome::Ok => println!("{}", run.output.unwrap_or_default()),
///     skillhost::Outcome::WaitingApproval => println!("approve with `skillhost runs approve {}`", run.run_id),
///     other => println!("{other}: {}", run.error.unwrap_or_default()),
/// }
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunReport {
    /// The run's id.
    pub run_id: String,
    /// The persona (`None`: the operator).
    pub persona: Option<String>,
    /// The tool as asked for.
    pub tool: String,
    /// Its server (`skill:<name>` or the MCP server), when registered.
    pub server: String,
    /// How it ended.
    pub outcome: Outcome,
    /// The result: a skill's JSON output, or an MCP `CallToolResult`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    /// What went wrong, for every outcome but `ok`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The sandbox limit that stopped the call, for `trapped` and sandbox
    /// timeouts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trap: Option<TrapReason>,
    /// How long it took.
    pub duration_ms: u64,
    /// For `waiting_approval`: until when it may be approved (Unix ms).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at_ms: Option<i64>,
}

impl RunReport {
    /// The handoff this run passes to the next tool: its result as the next
    /// call's `args`, with every local path removed
    /// ([`StructuredHandoff::from_mcp_result`]), so that no host path an MCP
    /// server (or a skill) put in its result is ever copied on. `None` unless
    /// the run ended `ok`.
    ///
    /// An MCP result gives its `structuredContent`, else its text parsed as
    /// JSON, else `{"result": text}`; a skill gives its JSON output. A value
    /// that is not an object lands under `args.result`.
    ///
    /// ```no_run
    /// # async fn f(host: skillhost::Host) {
    /// let run = host.call(&skillhost::Caller::Operator, "everything.echo",
    ///     serde_json::json!({"message": "saved to /tmp/x"}), &Default::default()).await;
    /// if let Some(next) = run.handoff() {
    ///     assert!(!next.args.values().any(|v| v.to_string().contains("/tmp/x")));
    /// }
    /// # }
    /// ```
    pub fn handoff(&self) -> Option<StructuredHandoff> {
        if self.outcome != Outcome::Ok {
            return None;
        }
        let output = self.output.as_ref()?;
        let value = if self
            .server
            .starts_with(crate::registry::SKILL_SERVER_PREFIX)
        {
            output.clone()
        } else {
            mcp_result_value(output)
        };
        Some(StructuredHandoff::from_mcp_result(&value, Vec::new()))
    }
}

/// The data of an MCP `CallToolResult` (as JSON): `structuredContent`, else
/// the text content parsed as JSON, else the text under `result`.
fn mcp_result_value(result: &Value) -> Value {
    let Ok(result) = serde_json::from_value::<skillhost_mcp::CallToolResult>(result.clone()) else {
        return result.clone();
    };
    if let Some(structured) = result.structured_content.as_ref().filter(|v| !v.is_null()) {
        return structured.clone();
    }
    let text = skillhost_mcp::text_content(&result);
    serde_json::from_str(&text).unwrap_or(Value::String(text))
}

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

/// A skill as the registry sees it: source, trust, enablement and state.
///
/// ```no_run
/// # fn f(host: skillhost::Host) -> anyhow::Result<()> {
/// for s in host.skills()? { println!("{} {:?}", s.name, s.state); }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SkillStatus {
    /// The skill.
    pub name: String,
    /// Its version.
    pub version: String,
    /// Where it comes from.
    pub source: SkillSource,
    /// Whether it is trusted.
    pub trusted: bool,
    /// Whether it is enabled.
    pub enabled: bool,
    /// Whether its tools are registered, and if not, why.
    #[serde(flatten)]
    pub state: SkillState,
    /// The tools it implements.
    pub tools: Vec<String>,
    /// Its `tool_names`.
    pub tool_names: Vec<String>,
    /// What it shadows.
    pub shadows: Vec<String>,
}

/// A stored ref.
///
/// ```
/// let r = skillhost::RefInfo { ref_id: "ref_0".into(), sha256: String::new(), size: 0, label: "a.txt".into(), created_at: 0 };
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RefInfo {
    /// The opaque id.
    pub ref_id: String,
    /// sha256 of the content.
    pub sha256: String,
    /// Size in bytes.
    pub size: u64,
    /// A label (the file's name, never its path).
    pub label: String,
    /// Unix seconds.
    pub created_at: i64,
}

struct Seen {
    data_version: i64,
    generation: i64,
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
    loaded: Mutex<HashMap<String, (String, Skill)>>,
    events: tokio::sync::broadcast::Sender<HostEvent>,
    approval_ttl: Duration,
    refs: RefBlobs,
    /// Every configured secret value (MCP env and header values), redacted
    /// from anything recorded.
    secrets: RwLock<Vec<String>>,
    /// This host's counters ([`Host::metrics_text`]).
    metrics: crate::metrics::Metrics,
}

/// The host. Cheap to clone; every clone is the same host.
///
/// ```no_run
/// # async fn f() -> anyhow::Result<()> {
/// use skillhost::{Caller, HostBuilder};
/// let host = HostBuilder::new("data").build().await?;
/// host.add_persona("support", "answers customers")?;
/// host.grant_skill("support", "text-tools", true)?;
/// let run = host.call(&Caller::persona("support"), "text.word_count",
///     serde_json::json!({"text": "one two"}), &Default::default()).await;
/// assert_eq!(run.output.unwrap()["words"], 2);
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

/// The strings to redact for one configured secret value: the whole value
/// and, for a value with an authentication scheme or several words
/// (`Bearer abc…`, `Basic …`), each word after the first, so the token is
/// redacted even when quoted alone. Words shorter than 4 characters are
/// not redacted on their own (they would mangle ordinary text).
fn secret_forms(value: &str) -> Vec<String> {
    let mut forms = vec![value.to_string()];
    forms.extend(
        value
            .split_whitespace()
            .skip(1)
            .map(str::to_string)
            .filter(|w| w.len() >= 4),
    );
    forms.retain(|v| v.trim().len() >= 4);
    forms.dedup();
    forms
}

/// Replaces every secret value in `text` with `[redacted]`.
fn redact(secrets: &[String], text: &str) -> String {
    let mut out = text.to_string();
    for s in secrets {
        if s.len() >= 4 && out.contains(s.as_str()) {
            out = out.replace(s.as_str(), "[redacted]");
        }
    }
    out
}

impl HostInner {
    fn mcp_config(&self) -> anyhow::Result<McpConfig> {
        McpConfig::load(&self.data.dir).map_err(|e| anyhow::anyhow!("{}: {e}", self.root.display()))
    }

    /// Marks the snapshot stale after a change made through this host's
    /// own connection (which `data_version` does not report).
    fn changed(&self) {
        lock(&self.seen).data_version = -1;
    }

    /// The registry as last read, whether or not the state changed since.
    fn last_read(&self) -> Option<Arc<Registry>> {
        self.snapshot
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The current registry, rebuilt if any state changed since the last
    /// call (in this process or another).
    fn registry(&self) -> anyhow::Result<Arc<Registry>> {
        {
            let store = lock(&self.store);
            let mut seen = lock(&self.seen);
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
        let (skills, personas, skill_grants, defs) = {
            let store = lock(&self.store);
            let (entries, problems) = crate::catalog::effective(&self.data, &store)?;
            for p in problems {
                tracing::warn!("{p}");
            }
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
            .flat_map(|s| s.env.values().chain(s.headers.values()))
            .flat_map(|v| secret_forms(v.expose()))
            .collect();
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        *self.secrets.write().unwrap_or_else(|e| e.into_inner()) = secrets;
        let specialists = if settings.specialists.is_empty() {
            DEFAULT_SPECIALISTS.iter().map(|s| s.to_string()).collect()
        } else {
            settings.specialists.clone()
        };
        Ok(Registry::build(Inputs {
            skills,
            mcp,
            mcp_tools,
            personas,
            skill_grants,
            specialists,
        }))
    }

    fn redact(&self, text: &str) -> String {
        redact(
            &self.secrets.read().unwrap_or_else(|e| e.into_inner()),
            text,
        )
    }

    /// Marks every pending run past its expiry as expired (at build and
    /// before runs are listed, so no expired run is shown as waiting).
    pub(crate) fn expire_pending(&self) {
        let pending = {
            let store = lock(&self.store);
            store.runs(&RunFilter {
                pending_only: true,
                limit: 10_000,
                ..Default::default()
            })
        };
        let Ok(pending) = pending else { return };
        let now = now_ms();
        for r in pending {
            if r.expires_at_ms.is_some_and(|t| t <= now) {
                let _ = self.decide(&r.run_id, "expired");
            }
        }
    }

    /// Records a decision on a pending run and its event.
    fn decide(&self, run_id: &str, decision: &'static str) -> anyhow::Result<Option<RunRecord>> {
        let error = match decision {
            "denied" => Some("denied by the operator".to_string()),
            "expired" => Some("the approval expired before anyone approved it".to_string()),
            _ => None,
        };
        let before = lock(&self.store).decide_run(run_id, decision, error.as_deref())?;
        if let Some(r) = &before {
            let outcome = if decision == "approved" {
                Outcome::Running
            } else {
                Outcome::Denied
            };
            self.emit(HostEvent {
                at_ms: now_ms(),
                kind: "approval".into(),
                run_id: Some(r.run_id.clone()),
                persona: r.persona.clone(),
                tool: Some(r.tool.clone()),
                server: Some(r.server.clone()),
                outcome: Some(outcome),
                duration_ms: None,
                detail: serde_json::json!({ "decision": decision }),
            });
        }
        Ok(before)
    }

    fn emit(&self, e: HostEvent) {
        let _ = self.events.send(e.clone());
        self.writer.event(e);
    }

    /// Queues a run with the event of its end (written together), then
    /// publishes the event.
    fn emit_run(&self, row: RunRow, e: HostEvent) {
        self.writer.run_with_event(row, e.clone());
        let _ = self.events.send(e);
    }

    /// The loaded skill of this name (compiled once per digest).
    fn skill(&self, reg: &Registry, name: &str) -> Result<Skill, String> {
        let info = reg
            .skills
            .get(name)
            .ok_or_else(|| format!("skill `{name}` is not installed"))?;
        if let Some((digest, skill)) = lock(&self.loaded).get(name)
            && *digest == info.entry.digest
        {
            return Ok(skill.clone());
        }
        let skill = info
            .entry
            .load(&self.sandbox)
            .map_err(|e| format!("cannot load skill `{name}`: {e}"))?;
        lock(&self.loaded).insert(name.to_string(), (info.entry.digest.clone(), skill.clone()));
        Ok(skill)
    }

    /// Makes sure an MCP server is running in this process (on demand).
    async fn ensure_server(&self, server: &str) -> Result<(), String> {
        if let Some(s) = self.mcp.status(server)
            && s.state == ServerState::Ready
        {
            return Ok(());
        }
        if self.mcp.status(server).is_none() {
            let config = self.mcp_config().map_err(|e| e.to_string())?;
            let Some(cfg) = config.server(server).cloned() else {
                return Err(format!("no MCP server named {server:?} is configured"));
            };
            if !cfg.enabled {
                return Err(format!(
                    "MCP server {server:?} is disabled (`skillhost mcp enable {server}`)"
                ));
            }
            let limit = cfg.timeouts.connect() + Duration::from_secs(1);
            self.mcp.start(cfg);
            let status = self.mcp.wait_settled(server, limit).await;
            return match status {
                Some(s) if s.state == ServerState::Ready => Ok(()),
                other => Err(format!(
                    "MCP server {server:?} is not ready: {}",
                    other
                        .and_then(|s| s.last_error)
                        .unwrap_or_else(|| "it did not become ready".into())
                )),
            };
        }
        // Supervised already (starting or restarting): the call waits for
        // the next session itself.
        Ok(())
    }
}

mod admin;
mod call;
mod installs;
mod metrics;
mod servers;
mod tokens;

pub(crate) use installs::InstallRefusal;

impl Host {
    pub(crate) fn registry(&self) -> anyhow::Result<Arc<Registry>> {
        self.inner.registry()
    }

    pub(crate) fn mcp_config(&self) -> anyhow::Result<McpConfig> {
        self.inner.mcp_config()
    }

    pub(crate) async fn ensure_mcp(&self, server: &str) -> Result<(), String> {
        self.inner.ensure_server(server).await
    }

    pub(crate) fn data(&self) -> &cap_std::fs::Dir {
        &self.inner.data.dir
    }
}

#[cfg(test)]
mod tests {
    use super::{redact, secret_forms};

    #[test]
    fn a_bearer_token_is_redacted_alone_too() {
        let mut secrets = secret_forms("Bearer tok-1234567890");
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        assert_eq!(
            redact(&secrets, "sent Bearer tok-1234567890"),
            "sent [redacted]"
        );
        assert_eq!(
            redact(&secrets, "invalid token tok-1234567890"),
            "invalid token [redacted]"
        );
        // The scheme word alone is not a secret.
        assert_eq!(redact(&secrets, "Bearer auth"), "Bearer auth");
    }

    #[test]
    fn short_values_are_not_redacted_alone() {
        assert!(secret_forms("ab").is_empty());
        assert_eq!(secret_forms("Basic x"), vec!["Basic x".to_string()]);
    }
}
