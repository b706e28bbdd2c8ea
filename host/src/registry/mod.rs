//! The one tool registry: every tool the host can call, as a [`ToolSpec`],
//! and what each persona may see of it.
//!
//! Sources, in the order that decides a name collision:
//!
//! 1. tools of **built-in** skills;
//! 2. tools of other **skills** (managed installs and local folders) that
//!    are trusted and enabled, by skill name;
//! 3. tools discovered on **MCP servers** that are enabled, by server name.
//!
//! The first claimant of a name keeps it; every later one is left out of
//! the registry and reported as a [`Conflict`] (in `skillhost tools list`
//! and `skillhost why`). Load order never decides.
//!
//! A persona sees a skill's tools when the skill is trusted, enabled and
//! granted to it, and an MCP server's tools when the server is enabled and
//! lists the persona (or `*`) in `allowed_persona_ids`, and the tool's
//! definition still matches the one the operator approved. The operator
//! (no persona) sees every registered tool.

pub(crate) mod catalog;
pub(crate) mod grants;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;
use skillhost_mcp::{GLOBAL_ALL, McpConfig, RegisteredTool};

use crate::registry::catalog::{SkillEntry, SkillIdentity, SkillSource};
use crate::skill::manifest::SkillManifest;
use crate::skill::schema::{Schema, default_args_schema};

/// The `server` of a skill's tools: `skill:<skill name>`.
pub(crate) const SKILL_SERVER_PREFIX: &str = "skill:";

/// The canonical worker names a tool's `specialist` may be, when
/// `settings.json` does not list its own.
///
/// ```
/// assert!(skillhost::DEFAULT_SPECIALISTS.contains(&"knowledge_worker"));
/// ```
pub const DEFAULT_SPECIALISTS: &[&str] = &[
    "general_worker",
    "knowledge_worker",
    "research_worker",
    "data_worker",
    "coding_worker",
    "ops_worker",
];

/// The specialist of a tool that names none.
///
/// ```
/// assert_eq!(skillhost::DEFAULT_SPECIALIST, "general_worker");
/// ```
pub const DEFAULT_SPECIALIST: &str = "general_worker";

/// Checks `name` against the canonical worker names. An alias (a name that
/// is a canonical one without `_worker`, or a canonical one's prefix) is
/// refused with an error that names the canonical one.
///
/// ```
/// let canonical = vec!["knowledge_worker".to_string()];
/// assert!(skillhost::check_specialist("knowledge_worker", &canonical).is_ok());
/// let err = skillhost::check_specialist("knowledge", &canonical).unwrap_err();
/// assert!(err.contains("`knowledge_worker`"), "{err}");
/// ```
pub fn check_specialist(name: &str, canonical: &[String]) -> Result<(), String> {
    if canonical.iter().any(|c| c == name) {
        return Ok(());
    }
    let shown = crate::escape::escape_control(name, 64, false);
    let lower = name.to_ascii_lowercase();
    let alias_of = canonical.iter().find(|c| {
        let stem = c.strip_suffix("_worker").unwrap_or(c);
        lower == stem
            || lower == c.to_ascii_lowercase()
            || lower.replace('-', "_") == **c
            || (lower.len() >= 3 && stem.starts_with(&lower))
    });
    match alias_of {
        Some(c) => Err(format!(
            "specialist `{shown}` is an alias, not a canonical worker name; use `{c}`"
        )),
        None => Err(format!(
            "specialist `{shown}` is not a canonical worker name; use one of: {}",
            canonical
                .iter()
                .map(|c| format!("`{c}`"))
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// One registered tool, with the contract's stable fields first.
///
/// ```
/// # async fn f(host: skillhost::Host) -> anyhow::Result<()> {
/// for spec in host.tool_specs(Some("support"))?.iter() {
///     println!("{} on {} (confirm: {})", spec.name, spec.server, spec.requires_confirmation);
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolSpec {
    /// The registered name, unique host-wide (e.g. `text.word_count`,
    /// `everything.echo`).
    pub name: String,
    /// The canonical worker this tool belongs to.
    pub specialist: String,
    /// The tool's own name on its server (for skills the same as `name`).
    pub tool: String,
    /// Whether a call stops in `waiting_approval` until approved.
    pub requires_confirmation: bool,
    /// Why it does, naming the manifest field, configuration field or
    /// server annotation that decided (the approval queue shows it);
    /// `None` when it does not.
    pub confirmation_reason: Option<String>,
    /// Whether the tool may change data.
    pub mutates_data: bool,
    /// Who implements it: `skill:<skill name>` or the MCP server's name
    /// ([`ToolSpec::provider`] is the same, typed).
    pub server: String,
    /// Who implements it, typed.
    #[serde(skip)]
    pub provider: Provider,
    /// What the tool does.
    pub description: String,
    /// JSON Schema of the arguments (the default args schema when the tool
    /// declares none).
    pub input_schema: Value,
    /// JSON Schema of the result, if declared.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    /// Whether the tool may reach beyond the host (MCP's `openWorldHint`):
    /// every MCP server's tool, and a skill's when it declares
    /// `permissions.network`.
    #[serde(skip)]
    pub open_world: bool,
}

/// Two sources claiming one tool name, and which one the rule kept.
///
/// ```
/// let c = skillhost::Conflict { tool: "a.b".into(), kept: "skill:a".into(), dropped: "a".into(), rule: "skills before MCP servers".into() };
/// assert!(c.to_string().contains("skill:a"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Conflict {
    /// The contested name.
    pub tool: String,
    /// The `server` whose tool is registered.
    pub kept: String,
    /// The `server` whose tool was left out.
    pub dropped: String,
    /// The rule that decided.
    pub rule: String,
}

impl std::fmt::Display for Conflict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "tool `{}` is provided by {} and {}; {} is registered ({}); rename one to use both",
            self.tool, self.kept, self.dropped, self.kept, self.rule
        )
    }
}

/// Whether a skill's tools are in the registry, and if not, why.
///
/// ```
/// let s = skillhost::SkillState::Unresolved { missing: vec!["web.search".into()] };
/// assert_eq!(serde_json::to_value(&s).unwrap()["state"], "unresolved");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum SkillState {
    /// Trusted, enabled, and every name in `tool_names` is registered.
    Ready,
    /// Trusted and enabled, its own tools are registered, but these names
    /// of its `tool_names` match no registered tool.
    Unresolved {
        /// The names that match nothing.
        missing: Vec<String>,
    },
    /// Not trusted: visible to no persona until `skillhost skills trust`.
    Untrusted,
    /// Asks for permissions no operator approved: off until `skillhost
    /// skills approve`.
    Unapproved {
        /// What it asks for beyond the approved set, one line each.
        unapproved: Vec<String>,
    },
    /// Declares secrets that have no value: off until `skillhost secrets
    /// set`.
    SecretsMissing {
        /// The secrets without a value.
        missing: Vec<String>,
    },
    /// Disabled by the operator.
    Disabled,
    /// The manifest could not be read or a tool is invalid.
    Invalid {
        /// What is wrong.
        error: String,
    },
}

impl SkillState {
    /// Whether the skill's tools are registered.
    pub(crate) fn registers_tools(&self) -> bool {
        matches!(self, SkillState::Ready | SkillState::Unresolved { .. })
    }
}

/// A skill as the registry sees it.
#[derive(Debug, Clone)]
pub(crate) struct SkillInfo {
    pub entry: SkillEntry,
    pub manifest: Option<SkillManifest>,
    pub state: SkillState,
}

/// An MCP server as the registry sees it.
#[derive(Debug, Clone)]
pub(crate) struct ServerInfo {
    pub enabled: bool,
    pub global: bool,
    pub allowed: HashSet<String>,
}

/// Who implements a registered tool: a skill's component or an MCP
/// server. Shown (in [`ToolSpec::server`], runs and events) as
/// `skill:<skill name>` or the server's name.
///
/// ```
/// let p = skillhost::Provider::Skill("text-tools".into());
/// assert_eq!(p.to_string(), "skill:text-tools");
/// assert_eq!(skillhost::Provider::Mcp("everything".into()).to_string(), "everything");
/// assert_eq!(skillhost::Provider::parse("skill:text-tools"), Some(p));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Provider {
    /// A skill's component (by skill name).
    Skill(String),
    /// An MCP server (by config name).
    Mcp(String),
}

impl Provider {
    /// The provider a `server` string names (`skill:<name>` or an MCP
    /// server's name); `None` for the empty string.
    ///
    /// ```
    /// assert_eq!(skillhost::Provider::parse(""), None);
    /// ```
    pub fn parse(server: &str) -> Option<Provider> {
        if server.is_empty() {
            return None;
        }
        Some(match server.strip_prefix(SKILL_SERVER_PREFIX) {
            Some(skill) => Provider::Skill(skill.to_string()),
            None => Provider::Mcp(server.to_string()),
        })
    }

    /// Whether a skill's component provides the tool.
    ///
    /// ```
    /// assert!(skillhost::Provider::Skill("t".into()).is_skill());
    /// ```
    pub fn is_skill(&self) -> bool {
        matches!(self, Provider::Skill(_))
    }
}

impl std::fmt::Display for Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Provider::Skill(name) => write!(f, "{SKILL_SERVER_PREFIX}{name}"),
            Provider::Mcp(server) => f.write_str(server),
        }
    }
}

impl Serialize for Provider {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// One registered tool with what a call needs.
pub(crate) struct Entry {
    pub spec: Arc<ToolSpec>,
    pub input: Schema,
    pub output: Option<Schema>,
    /// Why the tool cannot be called, if it cannot (an MCP tool whose
    /// definition changed since it was approved).
    pub disabled: Option<String>,
    /// MCP: the call's timeout (for `why`).
    pub timeout: Option<Duration>,
    /// A skill's `run_script` tool: its scripts (which decide, per call,
    /// whether the chosen script needs confirmation).
    pub scripts: Option<Arc<crate::skill::scripts::ScriptSet>>,
}

impl Entry {
    /// Whether a call with `args` stops for confirmation: the tool's
    /// declaration, or for a `run_script` call the chosen script's (a
    /// script not declared read-only does).
    pub fn requires_confirmation(&self, args: &Value) -> bool {
        match &self.scripts {
            Some(set) => {
                let script = args.get("script").and_then(Value::as_str);
                !script.and_then(|p| set.get(p)).is_some_and(|s| s.read_only)
            }
            None => self.spec.requires_confirmation,
        }
    }
}

/// Everything the registry is built from.
pub(crate) struct Inputs {
    pub skills: Vec<(SkillEntry, Result<SkillManifest, String>)>,
    pub mcp: McpConfig,
    /// Every MCP server's tools: live ones for servers running in this
    /// process, stored ones otherwise.
    pub mcp_tools: BTreeMap<String, Vec<RegisteredTool>>,
    pub personas: Vec<String>,
    /// `(persona, skill, identity granted to)`; `None` for a grant from
    /// before identities were recorded.
    pub skill_grants: Vec<(String, String, Option<String>)>,
    pub specialists: Vec<String>,
    /// Problems with the skill sources (unreadable local folders).
    pub source_problems: Vec<String>,
}

/// A caller's tools, shared.
type ToolList = Arc<[Arc<ToolSpec>]>;

/// A snapshot of the registry and of every grant.
pub(crate) struct Registry {
    /// Each caller's `tool_specs`, computed on first use (a snapshot is
    /// never changed, so nothing invalidates them).
    views: std::sync::Mutex<HashMap<Option<String>, ToolList>>,
    pub entries: HashMap<String, Arc<Entry>>,
    /// Registered names, sorted.
    pub order: Vec<String>,
    pub skills: BTreeMap<String, SkillInfo>,
    pub servers: BTreeMap<String, ServerInfo>,
    pub personas: HashSet<String>,
    /// Each persona's skill grants in force: the skill of that name is the
    /// one the grant was given to.
    pub grants: HashMap<String, HashSet<String>>,
    /// Each persona's suspended skill grants: skill name → who the grant
    /// was given to, while another skill holds the name.
    pub suspended: HashMap<String, BTreeMap<String, String>>,
    /// Grants from before identities were recorded, with the identity of
    /// the skill present now, for the host to bind.
    pub unbound: Vec<(String, String, SkillIdentity)>,
    pub conflicts: Vec<Conflict>,
    /// Tools left out for a reason other than a conflict (a schema that
    /// does not compile, an invalid specialist on a server), by name.
    pub problems: Vec<String>,
    /// Problems with the skill sources (unreadable local folders).
    pub source_problems: Vec<String>,
}

fn compile(schema: &Value, what: &str) -> Result<Schema, String> {
    Schema::compile(schema).map_err(|e| format!("{what} does not compile: {e}"))
}

impl Registry {
    /// Builds the registry from its inputs by the rules in the module docs.
    pub fn build(inputs: Inputs) -> Registry {
        let mut reg = Registry {
            views: Default::default(),
            entries: HashMap::new(),
            order: Vec::new(),
            skills: BTreeMap::new(),
            servers: BTreeMap::new(),
            personas: inputs.personas.into_iter().collect(),
            grants: HashMap::new(),
            suspended: HashMap::new(),
            unbound: Vec::new(),
            conflicts: Vec::new(),
            problems: Vec::new(),
            source_problems: inputs.source_problems,
        };
        // Built-ins first, then the other skills by name.
        let mut skills = inputs.skills;
        skills.sort_by(|(a, _), (b, _)| {
            (a.source != SkillSource::Builtin)
                .cmp(&(b.source != SkillSource::Builtin))
                .then(a.name.cmp(&b.name))
        });
        for (entry, manifest) in skills {
            let name = entry.name.clone();
            let (state, manifest) = match manifest {
                Err(error) => (SkillState::Invalid { error }, None),
                Ok(m) => {
                    let state = if !entry.enabled {
                        SkillState::Disabled
                    } else if !entry.trusted {
                        SkillState::Untrusted
                    } else if !entry.unapproved.is_empty() {
                        SkillState::Unapproved {
                            unapproved: entry.unapproved.clone(),
                        }
                    } else if !entry.missing_secrets.is_empty() {
                        SkillState::SecretsMissing {
                            missing: entry.missing_secrets.clone(),
                        }
                    } else {
                        match reg.register_skill(&m, &inputs.specialists) {
                            Ok(()) => SkillState::Ready,
                            Err(error) => SkillState::Invalid { error },
                        }
                    };
                    (state, Some(m))
                }
            };
            reg.skills.insert(
                name,
                SkillInfo {
                    entry,
                    manifest,
                    state,
                },
            );
        }
        // A grant is in force only for the skill it was given to.
        for (persona, skill, granted_to) in inputs.skill_grants {
            let Some(info) = reg.skills.get(&skill) else {
                // Nothing of that name now: kept, in force again if the
                // same skill comes back.
                continue;
            };
            let now = info.entry.identity();
            match granted_to {
                None => {
                    reg.unbound.push((persona.clone(), skill.clone(), now));
                    reg.grants.entry(persona).or_default().insert(skill);
                }
                Some(g) if SkillIdentity::parse(&g).as_ref() == Some(&now) => {
                    reg.grants.entry(persona).or_default().insert(skill);
                }
                Some(g) => {
                    let who = SkillIdentity::parse(&g)
                        .map(|i| i.to_string())
                        .unwrap_or_else(|| format!("an unknown skill (`{g}`)"));
                    reg.suspended.entry(persona).or_default().insert(skill, who);
                }
            }
        }
        for server in &inputs.mcp.servers {
            reg.servers.insert(
                server.name.clone(),
                ServerInfo {
                    enabled: server.enabled,
                    global: server.allowed_persona_ids.iter().any(|p| p == GLOBAL_ALL),
                    allowed: server.allowed_persona_ids.iter().cloned().collect(),
                },
            );
            if !server.enabled {
                continue;
            }
            let specialist = server
                .specialist
                .clone()
                .unwrap_or_else(|| DEFAULT_SPECIALIST.to_string());
            if let Err(e) = check_specialist(&specialist, &inputs.specialists) {
                reg.problems.push(format!(
                    "MCP server `{}`: {e}; its tools are not registered",
                    server.name
                ));
                continue;
            }
            let Some(tools) = inputs.mcp_tools.get(&server.name) else {
                continue;
            };
            for t in tools {
                reg.register_mcp(&server.name, t, &specialist);
            }
        }
        // Resolve every registered skill's tool_names.
        for info in reg.skills.values_mut() {
            if info.state != SkillState::Ready {
                continue;
            }
            let Some(m) = &info.manifest else { continue };
            let missing: Vec<String> = m
                .tool_names
                .iter()
                .filter(|n| !reg.entries.contains_key(*n))
                .cloned()
                .collect();
            if !missing.is_empty() {
                info.state = SkillState::Unresolved { missing };
            }
        }
        reg.order = reg.entries.keys().cloned().collect();
        reg.order.sort();
        reg
    }

    /// Registers a trusted, enabled skill's tools (all or none: an invalid
    /// specialist or schema makes the whole skill invalid).
    fn register_skill(&mut self, m: &SkillManifest, specialists: &[String]) -> Result<(), String> {
        let server = format!("{SKILL_SERVER_PREFIX}{}", m.name);
        let mut entries = Vec::new();
        for t in &m.tools {
            let specialist = t
                .specialist
                .clone()
                .unwrap_or_else(|| DEFAULT_SPECIALIST.to_string());
            check_specialist(&specialist, specialists)
                .map_err(|e| format!("tool `{}`: {e}", t.name))?;
            let input_schema = t.input_schema.clone().unwrap_or_else(default_args_schema);
            let input = compile(&input_schema, "the input schema")
                .map_err(|e| format!("tool `{}`: {e}", t.name))?;
            let output = t
                .output_schema
                .as_ref()
                .map(|s| compile(s, "the output schema"))
                .transpose()
                .map_err(|e| format!("tool `{}`: {e}", t.name))?;
            let mutates_data = !t.read_only;
            entries.push(Entry {
                spec: Arc::new(ToolSpec {
                    name: t.name.clone(),
                    specialist,
                    tool: t.name.clone(),
                    requires_confirmation: t.requires_confirmation(),
                    confirmation_reason: t.confirmation_reason(),
                    mutates_data,
                    server: server.clone(),
                    provider: Provider::Skill(m.name.clone()),
                    description: t.description.clone(),
                    input_schema,
                    output_schema: t.output_schema.clone(),
                    open_world: !m.permissions.network.is_empty(),
                }),
                input,
                output,
                disabled: None,
                timeout: None,
                scripts: None,
            });
        }
        if let Some(set) = m.script_set.clone() {
            let input_schema = crate::skill::scripts::tool::run_script_schema(&set);
            let input = compile(&input_schema, "the run_script input schema")?;
            let all_read_only = set.all_read_only();
            entries.push(Entry {
                spec: Arc::new(ToolSpec {
                    name: crate::skill::scripts::tool::run_script_tool(&m.name),
                    specialist: DEFAULT_SPECIALIST.to_string(),
                    tool: crate::skill::scripts::tool::run_script_tool(&m.name),
                    requires_confirmation: !all_read_only,
                    confirmation_reason: (!all_read_only).then(|| {
                        "its scripts are not all declared read-only (`scripts.read_only` in \
                         skill.yaml); a call of a read-only one needs no confirmation"
                            .to_string()
                    }),
                    mutates_data: !all_read_only,
                    server: server.clone(),
                    provider: Provider::Skill(m.name.clone()),
                    description: crate::skill::scripts::tool::run_script_description(&m.name, &set),
                    input_schema,
                    output_schema: None,
                    open_world: !m.permissions.network.is_empty(),
                }),
                input,
                output: None,
                disabled: None,
                timeout: None,
                scripts: Some(set),
            });
        }
        for e in entries {
            self.claim(
                e,
                "built-in skills first, then skills by name, then MCP servers by name",
            );
        }
        Ok(())
    }

    fn register_mcp(&mut self, server: &str, t: &RegisteredTool, specialist: &str) {
        let input = match compile(&t.tool.input_schema, "the input schema") {
            Ok(s) => s,
            Err(e) => {
                self.problems.push(format!(
                    "MCP tool `{}`: {e}; it is not registered",
                    t.tool.name
                ));
                return;
            }
        };
        let output = match t
            .tool
            .output_schema
            .as_ref()
            .map(|s| compile(s, "the output schema"))
        {
            Some(Err(e)) => {
                self.problems.push(format!(
                    "MCP tool `{}`: {e}; it is not registered",
                    t.tool.name
                ));
                return;
            }
            Some(Ok(s)) => Some(s),
            None => None,
        };
        self.claim(
            Entry {
                spec: Arc::new(ToolSpec {
                    name: t.tool.name.clone(),
                    specialist: specialist.to_string(),
                    tool: t.tool.tool.clone(),
                    requires_confirmation: t.tool.requires_confirmation,
                    confirmation_reason: t.tool.confirmation_reason.clone(),
                    mutates_data: t.tool.mutates_data,
                    server: server.to_string(),
                    provider: Provider::Mcp(server.to_string()),
                    description: t.tool.description.clone(),
                    input_schema: t.tool.input_schema.clone(),
                    output_schema: t.tool.output_schema.clone(),
                    open_world: true,
                }),
                input,
                output,
                disabled: t.disabled_reason.clone(),
                timeout: Some(t.tool.timeout),
                scripts: None,
            },
            "skills before MCP servers, servers by name",
        );
    }

    fn claim(&mut self, e: Entry, rule: &str) {
        let name = e.spec.name.clone();
        match self.entries.get(&name) {
            Some(kept) => self.conflicts.push(Conflict {
                tool: name,
                kept: kept.spec.server.clone(),
                dropped: e.spec.server.clone(),
                rule: rule.to_string(),
            }),
            None => {
                self.entries.insert(name, Arc::new(e));
            }
        }
    }

    /// Why `tool`, which is not registered, is not: the skill that
    /// declares it is untrusted, disabled, invalid or lost a name conflict,
    /// or its MCP server is disabled. `None` when nothing declares it.
    pub fn unregistered_reason(&self, tool: &str) -> Option<String> {
        for (name, info) in &self.skills {
            let Some(m) = &info.manifest else { continue };
            if !m.tools.iter().any(|t| t.name == tool) {
                continue;
            }
            return Some(match &info.state {
                SkillState::Untrusted => format!(
                    "`{tool}` belongs to skill `{name}`, which is untrusted; \
                     `skillhost skills trust {name}` trusts it"
                ),
                SkillState::Disabled => format!(
                    "`{tool}` belongs to skill `{name}`, which is disabled; \
                     `skillhost skills enable {name}` enables it"
                ),
                SkillState::Invalid { error } => {
                    format!("`{tool}` belongs to skill `{name}`, which is invalid: {error}")
                }
                SkillState::Unapproved { unapproved } => format!(
                    "`{tool}` belongs to skill `{name}`, which asks for permissions no operator \
                     approved ({}); `skillhost skills approve {name}` approves them",
                    unapproved.join("; ")
                ),
                SkillState::SecretsMissing { missing } => format!(
                    "`{tool}` belongs to skill `{name}`, which needs secrets that are not set \
                     ({}); `skillhost secrets set {name} NAME` sets one",
                    missing.join(", ")
                ),
                SkillState::Ready | SkillState::Unresolved { .. } => format!(
                    "`{tool}` of skill `{name}` lost a name conflict (`skillhost tools list` \
                     reports it)"
                ),
            });
        }
        let (server, _) = tool.split_once('.')?;
        let info = self.servers.get(server)?;
        let tool = crate::escape::escape_control(tool, 128, false);
        Some(if info.enabled {
            format!(
                "MCP server `{server}` has no tool `{tool}` (`skillhost mcp tools {server}` \
                 lists its tools)"
            )
        } else {
            format!(
                "`{tool}` would come from MCP server `{server}`, which is disabled; \
                 `skillhost mcp enable {server}` enables it"
            )
        })
    }

    /// Whether `persona` (`None`: the operator) may use the entry. A
    /// disabled MCP tool is visible to nobody but the operator's listing.
    pub fn visible(&self, persona: Option<&str>, e: &Entry) -> bool {
        let Some(p) = persona else {
            return true;
        };
        if e.disabled.is_some() || !self.personas.contains(p) {
            return false;
        }
        match &e.spec.provider {
            Provider::Skill(skill) => {
                self.grants.get(p).is_some_and(|g| g.contains(skill))
                    && self
                        .skills
                        .get(skill)
                        .is_some_and(|s| s.state.registers_tools())
            }
            Provider::Mcp(server) => self
                .servers
                .get(server)
                .is_some_and(|s| s.enabled && (s.global || s.allowed.contains(p))),
        }
    }

    /// The persona's tools (`None`: every registered tool), sorted by name.
    pub fn tool_specs(&self, persona: Option<&str>) -> Arc<[Arc<ToolSpec>]> {
        let key = persona.map(str::to_string);
        let mut views = self.views.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(v) = views.get(&key) {
            return v.clone();
        }
        let view: Arc<[Arc<ToolSpec>]> = self
            .order
            .iter()
            .filter_map(|n| self.entries.get(n))
            .filter(|e| persona.is_none() || self.visible(persona, e))
            .map(|e| e.spec.clone())
            .collect();
        views.insert(key, view.clone());
        view
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canonical() -> Vec<String> {
        DEFAULT_SPECIALISTS.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn specialists_refuse_aliases_naming_the_canonical_one() {
        let c = canonical();
        for ok in DEFAULT_SPECIALISTS {
            assert!(check_specialist(ok, &c).is_ok());
        }
        for (alias, canon) in [
            ("knowledge", "knowledge_worker"),
            ("Knowledge", "knowledge_worker"),
            ("knowledge-worker", "knowledge_worker"),
            ("research", "research_worker"),
            ("know", "knowledge_worker"),
        ] {
            let e = check_specialist(alias, &c).unwrap_err();
            assert!(e.contains(&format!("use `{canon}`")), "{alias}: {e}");
        }
        let e = check_specialist("chef", &c).unwrap_err();
        assert!(
            e.contains("one of") && e.contains("`general_worker`"),
            "{e}"
        );
    }
}
