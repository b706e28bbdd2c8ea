//! What the console's templates show: one struct per page (its template
//! named beside it) and the view of each record, made of plain strings so
//! the template only places and escapes them.

use std::sync::Arc;

use askama::Template;
use serde_json::Value;

use crate::escape::reveal_invisible;
use crate::limits::CONSOLE_ARGS_PREVIEW_CHARS;
use crate::{HostEvent, Outcome, RunDetail, RunRecord, ToolSpec};

/// The bar atop every signed-in page.
pub(crate) struct Nav {
    /// Which page is current (`approvals`, `runs`).
    pub page: &'static str,
    /// How many calls wait for approval (the badge).
    pub pending: u64,
}

/// The sign-in page.
#[derive(Template)]
#[template(path = "console/sign_in.html")]
pub(crate) struct SignIn {
    pub nav: Option<Nav>,
    pub error: Option<String>,
}

/// The answer to a sign-in: it hands the session's CSRF token to the
/// console's script, which keeps it and goes on to the approvals.
#[derive(Template)]
#[template(path = "console/signed_in.html")]
pub(crate) struct SignedIn {
    pub nav: Option<Nav>,
    pub csrf: String,
}

/// A page as a navigation gets it: nothing but the console's script,
/// which fetches the page with the session's CSRF token and shows it.
#[derive(Template)]
#[template(path = "console/shell.html")]
pub(crate) struct Shell {
    pub nav: Option<Nav>,
}

/// The approval queue page.
#[derive(Template)]
#[template(path = "console/approvals.html")]
pub(crate) struct Approvals {
    pub nav: Option<Nav>,
    pub pending: Vec<Pending>,
}

/// The queue alone (the live update fetches it).
#[derive(Template)]
#[template(path = "console/queue.html")]
pub(crate) struct Queue {
    pub pending: Vec<Pending>,
}

/// A run's page.
#[derive(Template)]
#[template(path = "console/run.html")]
pub(crate) struct Run {
    pub nav: Option<Nav>,
    pub notice: Option<&'static str>,
    pub run: RunView,
}

/// What went wrong.
#[derive(Template)]
#[template(path = "console/problem.html")]
pub(crate) struct Problem {
    pub nav: Option<Nav>,
    pub heading: &'static str,
    pub message: String,
    /// One of our own routes.
    pub back: &'static str,
}

/// The grants matrix.
#[derive(Template)]
#[template(path = "console/grants.html")]
pub(crate) struct Grants {
    pub nav: Option<Nav>,
    pub rows: Vec<GrantRow>,
    pub skills: Vec<String>,
    pub servers: Vec<ServerColumn>,
    /// Whether MCP grants may change now (every enabled server connected).
    pub mcp_ready: bool,
}

/// An MCP server's column.
pub(crate) struct ServerColumn {
    pub name: String,
    /// Granted to every persona (`*`).
    pub global: bool,
}

/// A persona's row.
pub(crate) struct GrantRow {
    pub persona: String,
    pub skills: Vec<GrantCell>,
    pub servers: Vec<GrantCell>,
    /// The tools the persona sees now.
    pub tools: Vec<String>,
}

/// One cell: where the grant stands and what its toggle does.
pub(crate) struct GrantCell {
    /// `skill` or `mcp` (the form's `kind`).
    pub kind: &'static str,
    pub name: String,
    /// `granted`, `denied`, `everyone` (the server's `*`), `suspended`.
    pub state: &'static str,
    /// What the cell says.
    pub label: String,
    /// The toggle: grant (`true`) or revoke; none for `everyone`.
    pub toggle: Option<bool>,
    /// The toggle button's accessible name.
    pub action: String,
}

impl GrantCell {
    /// A skill's cell.
    pub fn skill(persona: &str, name: &str, granted: bool, suspended: Option<String>) -> GrantCell {
        let (state, label) = match (granted, &suspended) {
            (true, _) => ("granted", "granted".to_string()),
            (false, Some(to)) => ("suspended", format!("suspended (given to {to})")),
            (false, None) => ("denied", "denied".to_string()),
        };
        GrantCell {
            kind: "skill",
            name: name.to_string(),
            state,
            label,
            toggle: Some(!granted),
            action: if granted {
                format!("Revoke skill {name} from {persona}")
            } else {
                format!("Grant skill {name} to {persona}")
            },
        }
    }

    /// An MCP server's cell.
    pub fn server(persona: &str, name: &str, global: bool, authorized: bool) -> GrantCell {
        let (state, label, toggle) = match (global, authorized) {
            (true, _) => ("everyone", "everyone (*)".to_string(), None),
            (false, true) => ("granted", "granted".to_string(), Some(false)),
            (false, false) => ("denied", "denied".to_string(), Some(true)),
        };
        GrantCell {
            kind: "mcp",
            name: name.to_string(),
            state,
            label,
            toggle,
            action: if authorized {
                format!("Revoke MCP server {name} from {persona}")
            } else {
                format!("Grant MCP server {name} to {persona}")
            },
        }
    }
}

/// Personas and tokens.
#[derive(Template)]
#[template(path = "console/personas.html")]
pub(crate) struct Personas {
    pub nav: Option<Nav>,
    pub personas: Vec<PersonaView>,
    pub tokens: Vec<TokenView>,
    /// A token just minted: shown this once.
    pub minted: Option<Minted>,
}

/// A token just minted.
pub(crate) struct Minted {
    pub token: String,
    pub persona: String,
}

/// A persona's line.
pub(crate) struct PersonaView {
    pub id: String,
    pub description: String,
    pub client_approval: bool,
    pub tokens: usize,
    pub created: String,
}

impl PersonaView {
    /// The view of `p`, counting its tokens.
    pub fn of(p: &crate::Persona, tokens: &[crate::TokenInfo]) -> PersonaView {
        PersonaView {
            id: p.id.clone(),
            description: p.description.clone(),
            client_approval: p.client_approval,
            tokens: tokens.iter().filter(|t| t.persona == p.id).count(),
            created: iso(p.created_at.saturating_mul(1000)),
        }
    }
}

/// A token's line (never the token: its first characters).
pub(crate) struct TokenView {
    pub id: i64,
    pub prefix: String,
    pub persona: String,
    pub label: String,
    pub created: String,
}

impl TokenView {
    /// The view of `t`.
    pub fn of(t: &crate::TokenInfo) -> TokenView {
        TokenView {
            id: t.id,
            prefix: t.prefix.clone(),
            persona: t.persona.clone(),
            label: t.label.clone(),
            created: iso(t.created_at.saturating_mul(1000)),
        }
    }
}

/// The runs list.
#[derive(Template)]
#[template(path = "console/runs.html")]
pub(crate) struct Runs {
    pub nav: Option<Nav>,
    pub rows: Vec<RunRow>,
    /// The next page's cursor.
    pub next: Option<String>,
    pub persona: String,
    pub tool: String,
    pub outcome: &'static str,
    pub outcomes: Vec<&'static str>,
    /// The last hour's charts.
    pub activity: ActivityChart,
}

/// The last hour drawn: stacked bars of calls per minute by outcome, and
/// each tool's durations (server-rendered SVG: numbers we computed, titles
/// escaped like any text).
pub(crate) struct ActivityChart {
    pub bars: Vec<Bar>,
    /// The tallest minute's calls (the scale).
    pub peak: u64,
    pub total: u64,
    pub tools: Vec<ToolBar>,
    pub truncated: bool,
}

/// One minute's bar: each segment's y and height, in the chart's units
/// (100 high).
pub(crate) struct Bar {
    pub x: usize,
    /// (class, y, height) bottom up: ok, failed, denied, open.
    pub segments: Vec<(&'static str, f64, f64)>,
    pub title: String,
}

/// One tool's line in the latency chart.
pub(crate) struct ToolBar {
    pub tool: String,
    pub calls: u64,
    /// p50, p95 and p99 in ms, as [`under_ms`] writes them.
    pub p50: String,
    pub p95: String,
    pub p99: String,
    /// p50 and p95 as widths out of 100 (of the slowest p95 shown).
    pub w50: f64,
    pub w95: f64,
}

impl ActivityChart {
    /// The charts of `a` (minutes oldest first).
    pub fn of(a: &crate::Activity) -> ActivityChart {
        let peak = a.per_minute.iter().map(|m| m.total()).max().unwrap_or(0);
        let scale = if peak == 0 { 0.0 } else { 100.0 / peak as f64 };
        let minutes = a.per_minute.len();
        let bars = a
            .per_minute
            .iter()
            .enumerate()
            .map(|(i, m)| {
                let mut y = 100.0;
                let mut segments = Vec::new();
                for (class, n) in [
                    ("ok", m.ok),
                    ("failed", m.failed),
                    ("denied", m.denied),
                    ("open", m.open),
                ] {
                    if n > 0 {
                        let h = n as f64 * scale;
                        y -= h;
                        segments.push((class, y, h));
                    }
                }
                ActivityChart::bar(i, minutes, m, segments)
            })
            .collect();
        let slowest = a
            .tools
            .iter()
            .take(10)
            .map(|t| t.p95_ms)
            .max()
            .unwrap_or(0)
            .max(1) as f64;
        ActivityChart {
            bars,
            peak,
            total: a.per_minute.iter().map(|m| m.total()).sum(),
            tools: a
                .tools
                .iter()
                .take(10)
                .map(|t| ToolBar {
                    tool: t.tool.clone(),
                    calls: t.calls,
                    p50: under_ms(t.p50_ms),
                    p95: under_ms(t.p95_ms),
                    p99: under_ms(t.p99_ms),
                    w50: t.p50_ms as f64 / slowest * 100.0,
                    w95: t.p95_ms as f64 / slowest * 100.0,
                })
                .collect(),
            truncated: a.truncated,
        }
    }

    fn bar(
        i: usize,
        minutes: usize,
        m: &crate::MinuteCounts,
        segments: Vec<(&'static str, f64, f64)>,
    ) -> Bar {
        let ago = minutes - 1 - i;
        Bar {
            x: i * 10,
            segments,
            title: format!(
                "{} min ago: {} ok, {} failed, {} denied, {} open",
                ago, m.ok, m.failed, m.denied, m.open
            ),
        }
    }
}

/// A run in the list.
pub(crate) struct RunRow {
    pub run_id: String,
    pub when: String,
    pub persona: String,
    pub tool: String,
    /// The script a skill's `run_script` run ran.
    pub script: Option<String>,
    pub outcome: &'static str,
    pub duration: String,
}

impl RunRow {
    /// The view of `r`.
    pub fn of(r: &RunRecord) -> RunRow {
        // A skill's `run_script` run: the tool the skill's scripts are.
        let script = r
            .server
            .strip_prefix(crate::registry::SKILL_SERVER_PREFIX)
            .is_some_and(|skill| crate::run_script_tool(skill) == r.tool)
            .then(|| r.args.as_ref()?.get("script")?.as_str().map(str::to_string))
            .flatten();
        RunRow {
            run_id: r.run_id.clone(),
            when: iso(r.created_at_ms),
            persona: persona_of(r.persona.as_deref()),
            tool: r.tool.clone(),
            script,
            outcome: r.outcome.as_str(),
            duration: r.duration_ms.map(millis).unwrap_or_default(),
        }
    }
}

/// The MCP servers page.
#[derive(Template)]
#[template(path = "console/servers.html")]
pub(crate) struct Servers {
    pub nav: Option<Nav>,
    pub servers: Vec<ServerCard>,
}

/// One MCP server as its card shows it.
pub(crate) struct ServerCard {
    pub name: String,
    pub description: String,
    /// `stdio`, `http` or `sse`, with what it runs or reaches.
    pub transport: String,
    pub enabled: bool,
    /// `running` (ready), `starting`, `backing off` (degraded), `failed`,
    /// `disabled`, `needs sign-in`.
    pub state: &'static str,
    /// `state` as a CSS class (no spaces).
    pub state_class: String,
    pub last_error: Option<String>,
    pub restarts: u32,
    pub tools: Vec<ServerToolView>,
    /// Tools whose definition changed since pinned.
    pub drifted: usize,
    pub stderr: String,
}

/// One of a server's tools.
pub(crate) struct ServerToolView {
    pub name: String,
    pub description: String,
    /// Why it cannot be called (drift), if it cannot.
    pub disabled: Option<String>,
}

impl ServerCard {
    /// The card of `s`, with its status, its registered tools among
    /// `tools` and the tail of its stderr.
    pub fn of(
        s: &skillhost_mcp::ServerConfig,
        status: Option<skillhost_mcp::ServerStatus>,
        tools: &[skillhost_mcp::RegisteredTool],
        stderr: String,
    ) -> ServerCard {
        use skillhost_mcp::ServerState;
        let transport = match (&s.command, &s.url) {
            (Some(cmd), _) => format!("stdio: {cmd} {}", s.args.join(" ")),
            (None, Some(url)) => format!("{:?}: {url}", s.transport).to_lowercase(),
            (None, None) => format!("{:?}", s.transport).to_lowercase(),
        };
        let state = match status.as_ref().map(|st| st.state) {
            None if s.enabled => "not started",
            None | Some(ServerState::Disabled) => "disabled",
            Some(ServerState::Starting) => "starting",
            Some(ServerState::Ready) => "running",
            Some(ServerState::Degraded) => "backing off",
            Some(ServerState::Failed) => "failed",
            Some(ServerState::NeedsSignIn) => "needs sign-in",
        };
        let tools: Vec<ServerToolView> = tools
            .iter()
            .filter(|t| t.tool.server == s.name)
            .map(|t| ServerToolView {
                name: t.tool.name.clone(),
                description: t.tool.description.clone(),
                disabled: t.disabled_reason.clone(),
            })
            .collect();
        ServerCard {
            name: s.name.clone(),
            description: s.description.clone(),
            transport,
            enabled: s.enabled,
            state,
            state_class: state.replace(' ', "-"),
            last_error: status.as_ref().and_then(|st| st.last_error.clone()),
            restarts: status.as_ref().map(|st| st.restarts).unwrap_or(0),
            drifted: tools.iter().filter(|t| t.disabled.is_some()).count(),
            tools,
            stderr,
        }
    }
}

/// The skills page.
#[derive(Template)]
#[template(path = "console/skills.html")]
pub(crate) struct Skills {
    pub nav: Option<Nav>,
    pub skills: Vec<SkillCard>,
}

/// One skill as its card shows it.
pub(crate) struct SkillCard {
    pub name: String,
    pub version: String,
    /// `builtin`, `local` or `managed`.
    pub source: &'static str,
    pub digest: String,
    pub signer: String,
    pub trusted: bool,
    pub enabled: bool,
    /// `ready`, `unresolved`, `untrusted`, `unapproved`, `secrets missing`,
    /// `disabled`, `invalid`.
    pub state: &'static str,
    /// What the state means, one line each.
    pub state_detail: Vec<String>,
    pub tools: Vec<String>,
    /// What it may reach beyond computing, one line each.
    pub permissions: Vec<String>,
    pub permissions_digest: String,
    /// Whether approving its permissions is what it waits for.
    pub awaits_approval: bool,
    /// A newer version waiting for approval, as one line.
    pub held: Option<String>,
    /// The installed versions, newest first (managed installs).
    pub versions: Vec<String>,
    /// Its scripts, one line each (what its `run_script` tool runs, and
    /// why one cannot run).
    pub scripts: Vec<String>,
    /// What loaded but should be known, one line each.
    pub warnings: Vec<String>,
}

impl SkillCard {
    /// The card of `s`; `installed` every installed version, `keys` the
    /// trusted publisher keys (a signer is shown by its key's name).
    pub fn of(
        s: &crate::SkillStatus,
        installed: &[crate::InstalledRecord],
        keys: &[crate::TrustedKey],
    ) -> SkillCard {
        use crate::SkillState;
        let (state, state_detail) = match &s.state {
            SkillState::Ready => ("ready", vec![]),
            SkillState::Unresolved { missing } => (
                "unresolved",
                missing
                    .iter()
                    .map(|m| format!("no tool named {m}"))
                    .collect(),
            ),
            SkillState::Untrusted => (
                "untrusted",
                vec!["visible to no persona until trusted".into()],
            ),
            SkillState::Unapproved { unapproved } => ("unapproved", unapproved.clone()),
            SkillState::SecretsMissing { missing } => (
                "secrets missing",
                missing
                    .iter()
                    .map(|m| format!("secret {m} has no value"))
                    .collect(),
            ),
            SkillState::Disabled => ("disabled", vec![]),
            SkillState::Invalid { error } => ("invalid", vec![error.clone()]),
        };
        let mut versions: Vec<&crate::InstalledRecord> =
            installed.iter().filter(|r| r.name == s.name).collect();
        versions.sort_by(|a, b| b.version.cmp(&a.version));
        SkillCard {
            name: s.name.clone(),
            version: s.version.clone(),
            source: s.source.as_str(),
            digest: s.digest.clone(),
            signer: s
                .signer
                .as_deref()
                .map(|id| key_named(id, keys))
                .unwrap_or_else(|| "unsigned".into()),
            trusted: s.trusted,
            enabled: s.enabled,
            state,
            state_detail,
            tools: s.tools.clone(),
            permissions: permission_lines(&s.permissions),
            permissions_digest: s.permissions_digest.clone(),
            awaits_approval: matches!(s.state, SkillState::Unapproved { .. }) || s.held.is_some(),
            held: s.held.as_ref().map(|h| {
                format!(
                    "version {} waits for approval of: {}",
                    h.version,
                    h.unapproved.join("; ")
                )
            }),
            versions: versions.iter().map(|r| r.version.to_string()).collect(),
            scripts: s
                .scripts
                .iter()
                .flat_map(|set| &set.scripts)
                .map(|script| match (script.refusal(), script.read_only) {
                    (Some(_), _) => format!("{} (cannot run in the sandbox)", script.path),
                    (None, true) => format!("{} (read-only)", script.path),
                    (None, false) => script.path.clone(),
                })
                .collect(),
            warnings: s.warnings.iter().map(|w| w.to_string()).collect(),
        }
    }
}

/// A signer's key as an operator knows it: the name it was trusted under
/// and its id (`alice, key 96cd78b7712e9acf`), or its id alone.
fn key_named(key_id: &str, keys: &[crate::TrustedKey]) -> String {
    match keys.iter().find(|k| k.key_id == key_id) {
        Some(k) if !k.label.is_empty() && k.label != key_id => {
            format!("{}, key {key_id}", k.label)
        }
        _ => format!("key {key_id}"),
    }
}

/// What a permission set lets a component reach, one line each.
fn permission_lines(p: &crate::Permissions) -> Vec<String> {
    let mut lines: Vec<String> = p.network.iter().map(|o| format!("HTTP to {o}")).collect();
    lines.extend(p.secrets.iter().map(|s| {
        format!(
            "secret {} as header {} to {}",
            s.name,
            s.header,
            s.origins.join(", ")
        )
    }));
    if p.assets {
        lines.push("reads its own assets/ folder".into());
    }
    if p.sampling {
        lines.push("asks the caller's model for completions (sampling)".into());
    }
    if p.roots {
        lines.push("asks the caller for its roots".into());
    }
    if let Some(s) = &p.scripts {
        lines.push(format!(
            "runs its scripts in the sandbox ({}; digest {})",
            s.scripts.join(", "),
            s.digest.get(..12).unwrap_or(&s.digest)
        ));
        if !s.packages.is_empty() {
            lines.push(format!("with the packages {}", s.packages.join(", ")));
        }
    }
    lines
}

/// A bundle verified, before the operator installs it.
#[derive(Template)]
#[template(path = "console/verified.html")]
pub(crate) struct Verified {
    pub nav: Option<Nav>,
    pub name: String,
    pub version: String,
    pub digest: String,
    /// Who signed it, as a sentence.
    pub signer: String,
    /// Whether a trusted key signed it (else it installs untrusted, if at
    /// all).
    pub trusted: bool,
    /// Its files and sizes.
    pub files: Vec<(String, String)>,
    /// The manifest's description, when it has one.
    pub description: String,
    /// What its manifest asks to reach, one line each.
    pub permissions: Vec<String>,
    /// Why its manifest could not be read, if it could not.
    pub manifest_error: Option<String>,
}

impl Verified {
    /// The view of an opened bundle; `keys` the trusted publisher keys.
    pub fn of(b: &crate::OpenedBundle, keys: &[crate::TrustedKey], nav: Option<Nav>) -> Verified {
        let (signer, trusted) = match &b.signer {
            crate::Signer::Unsigned => ("unsigned".to_string(), false),
            crate::Signer::Unknown { key_id } => (
                format!("signed by key {key_id}, which this host does not trust"),
                false,
            ),
            crate::Signer::Trusted { key_id } => (
                format!("signed by trusted {}", key_named(key_id, keys)),
                true,
            ),
        };
        let manifest = b
            .files
            .get("skill.yaml")
            .map(|m| crate::SkillManifest::parse(&String::from_utf8_lossy(m)));
        let (description, permissions, manifest_error) = match manifest {
            Some(Ok(m)) => (
                m.description.clone(),
                permission_lines(&m.permissions),
                None,
            ),
            Some(Err(e)) => (String::new(), vec![], Some(e.to_string())),
            None => (String::new(), vec![], Some("no skill.yaml".into())),
        };
        Verified {
            nav,
            name: b.statement.name.clone(),
            version: b.statement.version.to_string(),
            digest: b.digest.clone(),
            signer,
            trusted,
            files: b
                .files
                .iter()
                .map(|(k, v)| (k.clone(), format!("{} bytes", v.len())))
                .collect(),
            description,
            permissions,
            manifest_error,
        }
    }
}

/// A waiting call as the queue shows it.
pub(crate) struct Pending {
    pub run_id: String,
    pub persona: String,
    pub tool: String,
    pub provider: String,
    pub why: String,
    pub created_iso: String,
    pub age: String,
    pub expires_in: String,
    pub args_preview: Vec<Piece>,
    pub args_full: Vec<Piece>,
    pub args_len: usize,
    pub truncated: bool,
}

impl Pending {
    /// The view of a waiting run; `specs` (every registered tool) says why
    /// it needs confirmation.
    pub fn of(r: &RunRecord, specs: Option<&[Arc<ToolSpec>]>) -> Pending {
        let now = crate::state::runs::now_ms();
        let spec = specs.and_then(|s| s.iter().find(|s| s.name == r.tool));
        let args_full = r
            .args
            .as_ref()
            .and_then(|a| serde_json::to_string_pretty(a).ok())
            .map(|a| reveal_invisible(&a).into_owned())
            .unwrap_or_else(|| "{}".to_string());
        let args_len = args_full.chars().count();
        let truncated = args_len > CONSOLE_ARGS_PREVIEW_CHARS;
        let args_preview = if truncated {
            let mut s: String = args_full.chars().take(CONSOLE_ARGS_PREVIEW_CHARS).collect();
            s.push('…');
            s
        } else {
            args_full.clone()
        };
        Pending {
            run_id: r.run_id.clone(),
            persona: reveal_invisible(&persona_of(r.persona.as_deref())).into_owned(),
            tool: reveal_invisible(&r.tool).into_owned(),
            provider: reveal_invisible(&provider_of(&r.server)).into_owned(),
            why: why_it_waits(spec),
            created_iso: iso(r.created_at_ms),
            age: span(now.saturating_sub(r.created_at_ms)) + " ago",
            expires_in: r
                .expires_at_ms
                .map(|t| span(t.saturating_sub(now)))
                .unwrap_or_else(|| "never".into()),
            args_preview: pieces(&args_preview),
            args_full: pieces(&args_full),
            args_len,
            truncated,
        }
    }
}

/// A piece of a JSON text as a page shows it: the inside of a string
/// (shown isolated, `<bdi>`: its direction, right-to-left text included,
/// cannot run into the text around it) or what lies between strings.
pub(crate) struct Piece {
    pub text: String,
    /// The inside of a string.
    pub string: bool,
}

/// `json` (invisible characters revealed already) in [`Piece`]s; a string
/// cut short (a preview) is a string to its end.
fn pieces(json: &str) -> Vec<Piece> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut in_string = false;
    let mut escaped = false;
    for c in json.chars() {
        if in_string && !escaped && c == '"' {
            // The string ends: its inside is a piece; the quote begins the
            // next.
            out.push(Piece {
                text: std::mem::take(&mut current),
                string: true,
            });
            in_string = false;
            current.push(c);
            continue;
        }
        current.push(c);
        if in_string {
            escaped = !escaped && c == '\\';
        } else if c == '"' {
            out.push(Piece {
                text: std::mem::take(&mut current),
                string: false,
            });
            in_string = true;
        }
    }
    if !current.is_empty() {
        out.push(Piece {
            text: current,
            string: in_string,
        });
    }
    out
}

/// Why a tool's calls wait for an operator, from its registration.
fn why_it_waits(spec: Option<&Arc<ToolSpec>>) -> String {
    let Some(spec) = spec else {
        return "the tool is no longer registered; approving it will fail".into();
    };
    let mut why = match &spec.confirmation_reason {
        Some(reason) => reason.clone(),
        None => "it no longer needs confirmation; approving it runs it".to_string(),
    };
    if spec.mutates_data {
        why.push_str("; it may change data");
    }
    if spec.open_world {
        why.push_str("; it reaches beyond the host");
    }
    why
}

/// A run's page.
pub(crate) struct RunView {
    pub run_id: String,
    pub tool: String,
    pub persona: String,
    pub provider: String,
    pub outcome: String,
    pub approval: Option<String>,
    pub decided_by: Option<String>,
    pub duration: Option<String>,
    pub parent: Option<String>,
    pub error: Option<String>,
    pub output: Option<Vec<Piece>>,
    pub args: Option<Vec<Piece>>,
    pub refs: Vec<RefLine>,
    pub children: Vec<ChildRun>,
    pub timeline: Vec<Moment>,
}

/// One line of a run's timeline.
pub(crate) struct Moment {
    pub iso: String,
    pub what: String,
}

/// A ref a run was handed, as its page lists it.
pub(crate) struct RefLine {
    pub ref_id: String,
    /// Label, size and digest; or that it was removed since.
    pub what: String,
}

/// A run another run invoked.
pub(crate) struct ChildRun {
    pub run_id: String,
    pub tool: String,
    pub outcome: String,
}

impl RunView {
    /// The view of a run and what surrounds it; `output` when the page
    /// has its result.
    pub fn of(d: &RunDetail, output: Option<String>) -> RunView {
        let r = &d.run;
        let mut timeline = vec![Moment {
            iso: iso(r.created_at_ms),
            what: match r.approval {
                Some(_) => "called; waits for an operator's approval".into(),
                None => "called".into(),
            },
        }];
        timeline.extend(d.events.iter().map(|e| Moment {
            iso: iso(e.at_ms),
            what: reveal_invisible(&event_line(e)).into_owned(),
        }));
        if !matches!(r.outcome, Outcome::WaitingApproval | Outcome::Running) {
            let what = match r.duration_ms {
                Some(ms) => format!("ended {} after {}", r.outcome, millis(ms)),
                None => format!("ended {}", r.outcome),
            };
            timeline.push(Moment {
                iso: iso(r.updated_at_ms),
                what,
            });
        }
        RunView {
            run_id: r.run_id.clone(),
            tool: reveal_invisible(&r.tool).into_owned(),
            persona: reveal_invisible(&persona_of(r.persona.as_deref())).into_owned(),
            provider: reveal_invisible(&provider_of(&r.server)).into_owned(),
            outcome: r.outcome.as_str().to_string(),
            approval: r.approval.map(|a| a.as_str().to_string()),
            decided_by: r.decided_by.clone(),
            duration: r.duration_ms.map(millis),
            parent: r.parent_run_id.clone(),
            error: r.error.as_deref().map(|e| reveal_invisible(e).into_owned()),
            output: output.map(|o| pieces(&reveal_invisible(&o))),
            args: r
                .args
                .as_ref()
                .and_then(|a| serde_json::to_string_pretty(a).ok())
                .map(|a| pieces(&reveal_invisible(&a))),
            refs: d
                .refs
                .iter()
                .map(|i| RefLine {
                    ref_id: i.ref_id.clone(),
                    what: match &i.stored {
                        Some(info) => format!(
                            "{}, {} bytes, sha256 {}",
                            info.label, info.size, info.sha256
                        ),
                        None => "removed since".into(),
                    },
                })
                .collect(),
            children: d
                .children
                .iter()
                .map(|c| ChildRun {
                    run_id: c.run_id.clone(),
                    tool: c.tool.clone(),
                    outcome: c.outcome.as_str().to_string(),
                })
                .collect(),
            timeline,
        }
    }
}

/// One event of a run as its timeline says it.
fn event_line(e: &HostEvent) -> String {
    let text = |k: &str| e.detail.get(k).and_then(Value::as_str);
    match e.kind.as_str() {
        "approval" => {
            let by = text("decided_by").unwrap_or("someone");
            let mut line = match text("decision") {
                Some("approved") => format!("approved by {by}"),
                Some("denied") => format!("denied by {by}"),
                Some("expired") => "expired: nobody approved it in time".to_string(),
                Some(other) => format!("{other} by {by}"),
                None => format!("decided by {by}"),
            };
            if let Some(reason) = text("reason") {
                line.push_str(": ");
                line.push_str(reason);
            }
            line
        }
        "outbound" => {
            let method = text("method").unwrap_or("?");
            let origin = text("origin").unwrap_or("?");
            let status = e
                .detail
                .get("status")
                .and_then(Value::as_u64)
                .map(|s| format!(" → {s}"))
                .unwrap_or_default();
            let outcome = text("outcome").unwrap_or("?");
            format!("outbound {method} {origin}{status} ({outcome})")
        }
        "question_asked" => format!(
            "its MCP server asked the user: {}",
            text("message").unwrap_or("(no message)")
        ),
        kind => {
            let detail = e.detail.to_string();
            let cut: String = detail.chars().take(200).collect();
            format!("{kind}: {cut}")
        }
    }
}

fn persona_of(p: Option<&str>) -> String {
    p.map(str::to_string)
        .unwrap_or_else(|| "the operator".into())
}

fn provider_of(server: &str) -> String {
    match server.strip_prefix("skill:") {
        Some(skill) => format!("skill {skill}"),
        None => format!("MCP server {server}"),
    }
}

/// Unix ms as an RFC 3339 UTC time to the second (`1970-01-01T00:00:00Z`);
/// a time the format cannot hold (beyond year 9999) as its ms.
fn iso(ms: i64) -> String {
    time::OffsetDateTime::from_unix_timestamp(ms.div_euclid(1000))
        .ok()
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_else(|| format!("{ms} ms after 1970"))
}

/// A recorded duration in whole ms as a number of ms: a run records its
/// duration in whole milliseconds, so a 0 is a call that took less than
/// one (`< 1`), not one that took no time.
fn under_ms(ms: i64) -> String {
    if ms < 1 { "< 1".into() } else { ms.to_string() }
}

/// A recorded duration in whole ms, with its unit (`< 1 ms`, `12 ms`).
fn millis(ms: i64) -> String {
    format!("{} ms", under_ms(ms))
}

/// A duration in ms, as a person says it (`12 s`, `3 min`, `2 h 5 min`).
fn span(ms: i64) -> String {
    let s = ms.max(0) / 1000;
    match s {
        0..60 => format!("{s} s"),
        60..3600 => format!("{} min", s / 60),
        _ => format!("{} h {} min", s / 3600, s % 3600 / 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_read_as_utc() {
        assert_eq!(iso(0), "1970-01-01T00:00:00Z");
        assert_eq!(iso(1_772_582_400_000), "2026-03-04T00:00:00Z");
        assert_eq!(iso(951_782_400_000 + 3_723_000), "2000-02-29T01:02:03Z");
    }

    #[test]
    fn a_call_under_a_millisecond_does_not_read_zero() {
        assert_eq!(millis(0), "< 1 ms");
        assert_eq!(millis(1), "1 ms");
        assert_eq!(millis(2_500), "2500 ms");
        let activity = crate::Activity {
            per_minute: vec![],
            tools: vec![crate::ToolLatency {
                tool: "text.word_count".into(),
                calls: 3,
                p50_ms: 0,
                p95_ms: 0,
                p99_ms: 4,
            }],
            truncated: false,
        };
        let chart = ActivityChart::of(&activity);
        let t = &chart.tools[0];
        assert_eq!(
            (t.p50.as_str(), t.p95.as_str(), t.p99.as_str()),
            ("< 1", "< 1", "4")
        );
    }

    #[test]
    fn spans_read_as_people_say_them() {
        assert_eq!(span(-5), "0 s");
        assert_eq!(span(59_999), "59 s");
        assert_eq!(span(60_000), "1 min");
        assert_eq!(span(7_500_000), "2 h 5 min");
    }

    /// A run `run_1` of `tool` on `server` with `args`, waiting for
    /// approval, by no persona; a test sets what else it needs.
    fn run_record(tool: &str, server: &str, args: Option<Value>) -> RunRecord {
        RunRecord {
            run_id: "run_1".into(),
            parent_run_id: None,
            persona: None,
            tool: tool.into(),
            server: server.into(),
            outcome: crate::Outcome::WaitingApproval,
            approval: None,
            args,
            input_refs: vec![],
            error: None,
            created_at_ms: 0,
            updated_at_ms: 0,
            expires_at_ms: None,
            decided_by: None,
            duration_ms: None,
        }
    }

    #[test]
    fn hostile_arguments_are_escaped_in_the_queue() {
        let record = RunRecord {
            persona: Some("<b>ana</b>".into()),
            approval: Some(crate::Approval::Pending),
            ..run_record(
                "x.<script>",
                "skill:x",
                Some(serde_json::json!({"text": "<img src=x onerror=alert(1)>"})),
            )
        };
        let html = Queue {
            pending: vec![Pending::of(&record, None)],
        }
        .render()
        .expect("renders");
        assert!(!html.contains("<img"), "{html}");
        assert!(!html.contains("<script>"), "{html}");
        assert!(!html.contains("<b>"), "{html}");
        assert!(
            html.contains("&#60;img src=x onerror=alert(1)&#62;"),
            "{html}"
        );
    }

    #[test]
    fn json_is_shown_in_pieces_each_string_apart() {
        let shown = |json: &str| {
            pieces(json)
                .into_iter()
                .map(|p| (p.text, p.string))
                .collect::<Vec<_>>()
        };
        let s = |t: &str, string: bool| (t.to_string(), string);
        assert_eq!(
            shown(r#"{"a": "x \"y\" \\", "": 1}"#),
            vec![
                s("{\"", false),
                s("a", true),
                s("\": \"", false),
                s(r#"x \"y\" \\"#, true),
                s("\", \"", false),
                s("", true),
                s("\": 1}", false),
            ]
        );
        // A preview cut inside a string: a string to its end.
        assert_eq!(shown(r#"["abc"#), vec![s("[\"", false), s("abc", true)]);
    }

    #[test]
    fn long_arguments_fold() {
        let record = run_record(
            "t",
            "s",
            Some(serde_json::json!({"text": "x".repeat(5000)})),
        );
        let p = Pending::of(&record, None);
        assert!(p.truncated);
        assert_eq!(
            p.args_preview
                .iter()
                .map(|p| p.text.chars().count())
                .sum::<usize>(),
            CONSOLE_ARGS_PREVIEW_CHARS + 1
        );
        assert!(p.args_preview.last().is_some_and(|p| p.string));
        assert!(p.args_len > 5000);
        assert_eq!(p.persona, "the operator");
    }

    #[test]
    fn a_script_run_names_its_script_and_no_other_run_does() {
        let record = |tool: &str, server: &str, args: Option<Value>| RunRecord {
            persona: Some("ana".into()),
            outcome: crate::Outcome::Ok,
            duration_ms: Some(12),
            ..run_record(tool, server, args)
        };
        let script = Some(serde_json::json!({"script": "scripts/count_words.py"}));
        let row = RunRow::of(&record(
            "word-report.run_script",
            "skill:word-report",
            script.clone(),
        ));
        assert_eq!(row.script.as_deref(), Some("scripts/count_words.py"));
        assert_eq!(row.tool, "word-report.run_script");
        // Another skill's tool, an MCP server's tool of that name, a name
        // that only ends the same way, a run without arguments: no script.
        for (tool, server, args) in [
            ("text.word_count", "skill:text-tools", script.clone()),
            ("everything.run_script", "everything", script.clone()),
            (
                "word-report.not_run_script",
                "skill:word-report",
                script.clone(),
            ),
            ("word-report.run_script", "skill:word-report", None),
            (
                "word-report.run_script",
                "skill:word-report",
                Some(serde_json::json!({"script": 7})),
            ),
        ] {
            assert_eq!(
                RunRow::of(&record(tool, server, args)).script,
                None,
                "{tool}"
            );
        }
    }
}
