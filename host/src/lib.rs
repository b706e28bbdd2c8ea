//! # skillhost
//!
//! A WebAssembly-sandboxed plugin host for AI agents.
//!
//! Skills are folders (or signed bundles) with a `skill.yaml` manifest and,
//! optionally, a WebAssembly component built against the `skillhost:plugin`
//! WIT world. Their code runs in a [`Sandbox`]: no filesystem, network,
//! environment or inherited stdio; fuel, memory and wall-clock limits; a
//! fresh instance per call.
//!
//! ```no_run
//! # async fn f() -> anyhow::Result<()> {
//! let sandbox = skillhost::SandboxBuilder::new().build()?;
//! let text_tools = skillhost::builtin_skills()[0].load(&sandbox)?;
//! let out = text_tools
//!     .call("text.word_count", &serde_json::json!({"text": "hello sandbox"}), &Default::default())
//!     .await?;
//! assert_eq!(out.output["words"], 2);
//! # Ok(()) }
//! ```

#![deny(missing_docs)]

mod builtin;
mod bundle;
mod catalog;
mod data_dir;
mod escape;
mod grants;
mod guest_build;
mod handoff;
mod host;
mod http;
mod installs;
mod limits;
mod manifest;
mod mcp_confirm;
mod mcp_front;
mod mcp_servers;
mod mcp_skills;
mod mcp_state;
mod metrics;
mod personas;
mod refs;
mod registry;
mod runs;
mod sandbox;
mod schema;
mod skill;
mod store;
mod tokens;
mod trust;
mod why;

#[doc(hidden)]
pub mod cli;

pub use builtin::{BuiltinSkill, builtin_skills, plugin_artifacts};
pub use bundle::{
    BundleError, FileEntry, MAX_ARCHIVE_BYTES, MAX_ENTRIES, MAX_EXTRACTED_BYTES, OpenedBundle,
    PackError, SIGNATURE_PATH, STATEMENT_FORMAT, STATEMENT_PATH, Signer, Statement, open_bundle,
    pack_dir,
};
pub use catalog::{SkillEntry, SkillSource};
pub use data_dir::{SETTINGS_FILE, Settings};
pub use grants::{
    GrantChange, PersonaGrantView, next_allowed_persona_ids, persona_grants_get,
    persona_grants_put, toggle_grant,
};
pub use guest_build::{BuildError, build_skill};
pub use handoff::{
    HandoffError, LOCAL_PATH_REMOVED, MAX_HANDOFF_DEPTH, StructuredHandoff, strip_local_paths,
};
pub use host::{
    CallRequest, Caller, DEFAULT_APPROVAL_TTL, Host, HostBuilder, PersonaGrants, RefInfo,
    RunReport, SkillGrantView, SkillStatus,
};
pub use http::{
    AdminAuth, AppState, DEFAULT_GRACE, HttpServer, HttpServerBuilder, OriginPolicy, api_router,
};
pub use installs::{InstallError, InstallOptions, InstallOutcome, install_bundle};
pub use limits::{
    DEFAULT_FUEL, DEFAULT_MAX_HOSTWARD_BYTES, DEFAULT_MAX_OUTPUT_BYTES, DEFAULT_MAX_STDIO_BYTES,
    DEFAULT_MEMORY_BYTES, DEFAULT_TIMEOUT, LimitError, Limits, LimitsPolicy, LimitsRequest,
};
pub use manifest::{
    AGENT_SKILL_FILE, Example, MANIFEST_FILE, MAX_YAML_DEPTH, ManifestError, ManifestLimits,
    SkillManifest, ToolDecl, valid_tool_name,
};
pub use mcp_front::{LIST_CHANGED_POLL, McpFront};
pub use mcp_state::{SqlitePins, mcp_manager_options};
pub use metrics::METRICS_CONTENT_TYPE;
pub use personas::{Persona, valid_persona_id};
pub use registry::{
    Conflict, DEFAULT_SPECIALIST, DEFAULT_SPECIALISTS, SkillState, ToolSpec, check_specialist,
};
pub use runs::{HostEvent, Outcome, RunFilter, RunRecord};
pub use sandbox::{
    CallError, CallFailure, CallOptions, CallOutput, InvokeFuture, InvokeRequest, Invoker,
    LoadError, LoadErrorKind, MAX_INVOKE_DEPTH, RefReader, Sandbox, SandboxBuilder, SkillComponent,
    ToolError, TrapReason,
};
pub use schema::{Schema, default_args_schema};
pub use skill::{Skill, SkillError};
pub use store::{DB_FILE, InstalledRecord, TrustedKey};
pub use tokens::{ADMIN_TOKEN_FILE, TOKEN_PREFIX, TokenInfo, new_token, token_digest};
pub use trust::{KeyError, PublicKey, SecretKey};
pub use why::{WhyReport, WhyStep};
