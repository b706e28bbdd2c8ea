//! "Why can't this persona use that tool?": the contract's debugging order,
//! walked link by link, naming the first broken one.
//!
//! 1. **server**: the tool's server is configured, enabled and its process
//!    comes up (MCP), or its skill is installed, enabled, trusted and valid;
//! 2. **registry**: the tool is in `tool_specs()` (not shadowed by another
//!    source, not disabled because its definition changed);
//! 3. **grants**: the persona exists and is granted the server or skill;
//! 4. **runs**: the latest runs of the tool by the persona, with outcome,
//!    error and duration (a timeout shows here);
//! 5. **approvals**: runs stuck in `waiting_approval` (which look like
//!    "nothing happens" to a user);
//! 6. **log**: the tail of the MCP server's stderr log.

use serde::Serialize;

use crate::authority::Host;
use crate::error::StateError;
use crate::registry::{Provider, SkillState};
use crate::state::runs::{Outcome, RunFilter, RunRecord};

/// One link of the chain.
///
/// ```
/// let s = skillhost::WhyStep { step: "grants".into(), ok: false, detail: "not granted".into() };
/// assert_eq!(serde_json::to_value(&s).unwrap()["ok"], false);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WhyStep {
    /// `server`, `registry`, `grants`, `runs`, `approvals` or `log`.
    pub step: String,
    /// Whether this link holds.
    pub ok: bool,
    /// What was found, and what to do when it does not hold.
    pub detail: String,
}

/// The whole walk.
///
/// ```no_run
/// # async fn f(host: skillhost::Host) -> anyhow::Result<()> {
/// let why = host.why("support", "notes.write_note").await?;
/// println!("{}", why.verdict);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WhyReport {
    /// The persona asked about.
    pub persona: String,
    /// The tool asked about.
    pub tool: String,
    /// One sentence: the first broken link, or that the persona can use it.
    pub verdict: String,
    /// The first step that does not hold, if any.
    pub first_broken: Option<String>,
    /// Every step, in order.
    pub steps: Vec<WhyStep>,
    /// The latest runs of the tool by the persona, newest first.
    pub recent_runs: Vec<RunRecord>,
    /// Its runs waiting for approval.
    pub pending: Vec<RunRecord>,
    /// The tail of the MCP server's stderr log.
    pub log_tail: Option<String>,
}

fn step(name: &str, ok: bool, detail: impl Into<String>) -> WhyStep {
    WhyStep {
        step: name.to_string(),
        ok,
        detail: detail.into(),
    }
}

/// Bytes of the server log shown.
const LOG_TAIL_BYTES: usize = 2048;

/// # Why a call is allowed or refused
impl Host {
    /// Walks the debugging order for `persona` and `tool` (see the module
    /// docs). For an MCP tool whose server is not running in this process,
    /// the server is started to see whether it comes up.
    ///
    /// ```no_run
    /// # async fn f(host: skillhost::Host) -> Result<(), skillhost::StateError> {
    /// let why = host.why("support", "text.word_count").await?;
    /// for s in &why.steps { println!("{} {} {}", s.step, s.ok, s.detail); }
    /// # Ok(()) }
    /// ```
    pub async fn why(&self, persona: &str, tool: &str) -> Result<WhyReport, StateError> {
        Ok(self.walk(persona, tool).await?)
    }

    async fn walk(&self, persona: &str, tool: &str) -> anyhow::Result<WhyReport> {
        let mut steps = Vec::new();
        let mut log_tail = None;
        let config = self.mcp_config()?;
        let reg0 = self.registry()?;
        // Which server or skill is meant: the registered one, else an MCP
        // server named by the prefix, else a skill that declares the tool
        // (or whose scripts are it, registered once approved).
        let registered = reg0.entries.get(tool).cloned();
        let provider = match &registered {
            Some(e) => Some(e.spec.provider.clone()),
            None => tool
                .split_once('.')
                .and_then(|(s, _)| config.server(s))
                .map(|s| Provider::Mcp(s.name.clone()))
                .or_else(|| {
                    reg0.skills
                        .iter()
                        .find(|(n, i)| {
                            i.manifest.as_ref().is_some_and(|m| {
                                m.tools.iter().any(|t| t.name == tool)
                                    || (m.permissions.scripts.is_some()
                                        && crate::skill::scripts::tool::run_script_tool(n) == tool)
                            })
                        })
                        .map(|(n, _)| Provider::Skill(n.clone()))
                }),
        };
        // 1. server / skill
        match &provider {
            None => steps.push(step(
                "server",
                false,
                format!(
                    "no configured MCP server or skill provides `{tool}` (MCP tools are named \
                     SERVER.TOOL; `skillhost mcp list` and `skillhost skills list` show what exists)"
                ),
            )),
            Some(Provider::Mcp(server)) => {
                let cfg = config.server(server);
                match cfg {
                    Some(c) if !c.enabled => steps.push(step(
                        "server",
                        false,
                        format!("MCP server `{server}` is disabled (`skillhost mcp enable {server}`)"),
                    )),
                    Some(_) => match self.ensure_mcp(server).await {
                        Ok(()) => {
                            let s = self.mcp().status(server);
                            steps.push(step(
                                "server",
                                true,
                                match s {
                                    Some(s) => format!(
                                        "MCP server `{server}` is enabled and {} (pid {}, {} tools)",
                                        s.state,
                                        s.pid.map(|p| p.to_string()).unwrap_or_else(|| "-".into()),
                                        s.tools
                                    ),
                                    None => format!("MCP server `{server}` is enabled"),
                                },
                            ))
                        }
                        Err(e) => steps.push(step("server", false, e.to_string())),
                    },
                    None => steps.push(step(
                        "server",
                        false,
                        format!("no MCP server named `{server}` is configured"),
                    )),
                }
                log_tail = self.server_log_tail(server);
            }
            Some(Provider::Skill(name)) => {
                let info = reg0.skills.get(name);
                let (ok, detail) = match info.map(|i| &i.state) {
                    None => (false, format!("skill `{name}` is not installed")),
                    Some(SkillState::Ready) => (true, format!("skill `{name}` is trusted, enabled and ready")),
                    Some(SkillState::Unresolved { missing }) => (
                        true,
                        format!(
                            "skill `{name}` is trusted and enabled, but its tool_names name tools that are not \
                             registered: {}",
                            missing.join(", ")
                        ),
                    ),
                    Some(SkillState::Untrusted) => (
                        false,
                        format!("skill `{name}` is not trusted (`skillhost skills trust {name}`)"),
                    ),
                    Some(SkillState::Disabled) => (
                        false,
                        format!("skill `{name}` is disabled (`skillhost skills enable {name}`)"),
                    ),
                    Some(SkillState::Invalid { error }) => (false, format!("skill `{name}` is invalid: {error}")),
                    Some(SkillState::Unapproved { unapproved }) => (
                        false,
                        format!(
                            "skill `{name}` asks for permissions no operator approved: {} \
                             (`skillhost skills show {name}` lists them, `skillhost skills approve {name}` \
                             approves them)",
                            unapproved.join("; ")
                        ),
                    ),
                    Some(SkillState::SecretsMissing { missing }) => (
                        false,
                        format!(
                            "skill `{name}` declares secrets with no value: {} (`skillhost secrets set \
                             {name} NAME` reads the value from standard input)",
                            missing.join(", ")
                        ),
                    ),
                };
                let detail = match info.and_then(|i| i.entry.held.as_ref()) {
                    Some(h) => format!(
                        "{detail}; version {} is installed but waits for approval of: {} \
                         (`skillhost skills approve {name}` activates it)",
                        h.version,
                        h.unapproved.join("; ")
                    ),
                    None => detail,
                };
                let detail = match info.map(|i| &i.entry) {
                    Some(e) if e.shadows.iter().any(|s| s.starts_with("builtin:")) => format!(
                        "{detail}; this {} copy shadows the built-in skill of that name \
                         (`skillhost uninstall {name}` brings the built-in back)",
                        e.source.as_str()
                    ),
                    _ => detail,
                };
                steps.push(step("server", ok, detail));
            }
        }
        // The server may have just come up and stored its tools.
        let reg = self.registry()?;
        // 2. registry
        match reg.entries.get(tool) {
            Some(e) => match &e.disabled {
                Some(why) => steps.push(step(
                    "registry",
                    false,
                    format!("`{tool}` is registered but disabled: {why}"),
                )),
                None => steps.push(step(
                    "registry",
                    true,
                    format!(
                        "`{tool}` is in tool_specs() from {} (requires_confirmation: {}{})",
                        e.spec.server,
                        e.spec.requires_confirmation,
                        e.timeout
                            .map(|t| format!(", timeout {} s", t.as_secs()))
                            .unwrap_or_default()
                    ),
                )),
            },
            None => {
                let detail = match reg.conflicts.iter().find(|c| c.tool == tool) {
                    Some(c) => c.to_string(),
                    None => {
                        let close: Vec<&String> = reg
                            .order
                            .iter()
                            .filter(|n| {
                                tool.split_once('.')
                                    .is_some_and(|(s, _)| n.starts_with(&format!("{s}.")))
                            })
                            .take(10)
                            .collect();
                        if close.is_empty() {
                            format!("`{tool}` is not in tool_specs()")
                        } else {
                            format!(
                                "`{tool}` is not in tool_specs(); its server registers: {}",
                                close
                                    .iter()
                                    .map(|s| s.as_str())
                                    .collect::<Vec<_>>()
                                    .join(", ")
                            )
                        }
                    }
                };
                steps.push(step("registry", false, detail));
            }
        }
        // 3. grants
        let grant = if !reg.personas.contains(persona) {
            step(
                "grants",
                false,
                format!("there is no persona `{persona}` (`skillhost personas add {persona}`)"),
            )
        } else {
            match &provider {
                Some(Provider::Mcp(server)) => match reg.servers.get(server) {
                    Some(s) if s.global => step(
                        "grants",
                        true,
                        format!("MCP server `{server}` is granted to every persona (`*`)"),
                    ),
                    Some(s) if s.allowed.contains(persona) => step(
                        "grants",
                        true,
                        format!("MCP server `{server}` is granted to `{persona}`"),
                    ),
                    _ => step(
                        "grants",
                        false,
                        format!(
                            "MCP server `{server}` is not granted to `{persona}` \
                             (`skillhost grants mcp {persona} {server} on`)"
                        ),
                    ),
                },
                Some(Provider::Skill(name)) => {
                    if reg.grants.get(persona).is_some_and(|g| g.contains(name)) {
                        step(
                            "grants",
                            true,
                            format!("skill `{name}` is granted to `{persona}`"),
                        )
                    } else if let Some(who) = reg.suspended.get(persona).and_then(|s| s.get(name)) {
                        let now = reg
                            .skills
                            .get(name)
                            .map(|i| i.entry.identity().to_string())
                            .unwrap_or_default();
                        step(
                            "grants",
                            false,
                            format!(
                                "the grant of skill `{name}` to `{persona}` is suspended: it was \
                                 given to {who}, and `{name}` is now {now}; \
                                 `skillhost grants skill {persona} {name} on` grants this one"
                            ),
                        )
                    } else {
                        step(
                            "grants",
                            false,
                            format!(
                                "skill `{name}` is not granted to `{persona}` \
                                 (`skillhost grants skill {persona} {name} on`)"
                            ),
                        )
                    }
                }
                None => step(
                    "grants",
                    false,
                    "nothing to grant: no server or skill provides the tool",
                ),
            }
        };
        steps.push(grant);
        // 4. runs
        let recent = self.runs(&RunFilter {
            persona: Some(persona.to_string()),
            tool: Some(tool.to_string()),
            limit: 5,
            ..Default::default()
        })?;
        let runs_step = match recent.first() {
            None => step(
                "runs",
                true,
                format!("`{persona}` has not called `{tool}` yet"),
            ),
            Some(r) => {
                let ok = matches!(
                    r.outcome,
                    Outcome::Ok | Outcome::WaitingApproval | Outcome::Running
                );
                let took = r
                    .duration_ms
                    .map(|d| format!(" after {d} ms"))
                    .unwrap_or_default();
                step(
                    "runs",
                    ok,
                    format!(
                        "latest run {}: {}{took}{}",
                        r.run_id,
                        r.outcome,
                        r.error
                            .as_deref()
                            .map(|e| format!(": {e}"))
                            .unwrap_or_default()
                    ),
                )
            }
        };
        steps.push(runs_step);
        // 5. approvals
        let pending = self.runs(&RunFilter {
            persona: Some(persona.to_string()),
            tool: Some(tool.to_string()),
            pending_only: true,
            limit: 20,
            ..Default::default()
        })?;
        steps.push(if pending.is_empty() {
            step("approvals", true, "no run is waiting for approval")
        } else {
            step(
                "approvals",
                false,
                format!(
                    "{} run(s) waiting_approval (nothing happens until an operator decides): {}; \
                     `skillhost runs approve ID` or `skillhost runs deny ID`",
                    pending.len(),
                    pending
                        .iter()
                        .map(|r| r.run_id.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )
        });
        // 6. log
        if let Some(tail) = &log_tail {
            steps.push(step(
                "log",
                true,
                format!("last {} bytes of the server's stderr log below", tail.len()),
            ));
        }
        let first_broken = steps.iter().find(|s| !s.ok).map(|s| s.step.clone());
        let verdict = match steps.iter().find(|s| !s.ok) {
            Some(s) => format!("{}: {}", s.step, s.detail),
            None => format!("`{persona}` can use `{tool}`"),
        };
        Ok(WhyReport {
            persona: persona.to_string(),
            tool: tool.to_string(),
            verdict,
            first_broken,
            steps,
            recent_runs: recent,
            pending,
            log_tail,
        })
    }

    fn server_log_tail(&self, server: &str) -> Option<String> {
        if let Some(live) = self.mcp().logs(server, LOG_TAIL_BYTES)
            && !live.is_empty()
        {
            return Some(live);
        }
        let path = std::path::Path::new("mcp")
            .join(server)
            .join(skillhost_mcp::LOG_FILE);
        let bytes = self.data().read(&path).ok()?;
        let start = bytes.len().saturating_sub(LOG_TAIL_BYTES);
        let text = String::from_utf8_lossy(&bytes[start..]).into_owned();
        (!text.is_empty()).then_some(text)
    }
}
