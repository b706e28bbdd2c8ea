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

mod authority;
mod bundle;
mod escape;
mod front;
mod limits;
mod registry;
mod sandbox;
mod skill;
mod state;
mod upstream;

#[doc(hidden)]
pub mod cli;

pub use authority::handoff::{
    HandoffError, LOCAL_PATH_REMOVED, MAX_HANDOFF_DEPTH, StructuredHandoff, strip_local_paths,
};
pub use authority::metrics::METRICS_CONTENT_TYPE;
pub use authority::why::{WhyReport, WhyStep};
pub use authority::{
    CallRequest, Caller, DEFAULT_APPROVAL_TTL, Host, HostBuilder, PersonaGrants, RunReport,
    SkillGrantView, SkillStatus,
};
pub use bundle::install::{InstallError, InstallOptions, InstallOutcome, install_bundle};
pub use bundle::trust::{KeyError, PublicKey, SecretKey};
pub use bundle::{
    BundleError, FileEntry, MAX_ARCHIVE_BYTES, MAX_ENTRIES, MAX_EXTRACTED_BYTES, OpenedBundle,
    PackError, SIGNATURE_PATH, STATEMENT_FORMAT, STATEMENT_PATH, Signer, Statement, open_bundle,
    pack_dir,
};
pub use front::http::{
    AdminAuth, AppState, DEFAULT_GRACE, HttpServer, HttpServerBuilder, OriginPolicy, api_router,
};
pub use front::mcp::{LIST_CHANGED_POLL, McpFront};
pub use limits::{
    DEFAULT_FUEL, DEFAULT_MAX_HOSTWARD_BYTES, DEFAULT_MAX_OUTPUT_BYTES, DEFAULT_MAX_STDIO_BYTES,
    DEFAULT_MEMORY_BYTES, DEFAULT_TIMEOUT, LimitError, Limits, LimitsPolicy, LimitsRequest,
};
pub use registry::catalog::{SkillEntry, SkillSource};
pub use registry::grants::{
    GrantChange, PersonaGrantView, next_allowed_persona_ids, persona_grants_get,
    persona_grants_put, toggle_grant,
};
pub use registry::{
    Conflict, DEFAULT_SPECIALIST, DEFAULT_SPECIALISTS, SkillState, ToolSpec, check_specialist,
};
pub use sandbox::{
    CallError, CallFailure, CallOptions, CallOutput, InvokeFuture, InvokeRequest, Invoker,
    LoadError, LoadErrorKind, MAX_INVOKE_DEPTH, RefReader, Sandbox, SandboxBuilder, SkillComponent,
    ToolError, TrapReason,
};
pub use skill::builtin::{BuiltinSkill, builtin_skills, plugin_artifacts};
pub use skill::guest_build::{BuildError, build_skill};
pub use skill::manifest::{
    AGENT_SKILL_FILE, Example, MANIFEST_FILE, MAX_YAML_DEPTH, ManifestError, ManifestLimits,
    SkillManifest, ToolDecl, valid_tool_name,
};
pub use skill::schema::{Schema, default_args_schema};
pub use skill::{Skill, SkillError};
pub use state::data_dir::{SETTINGS_FILE, Settings};
pub use state::personas::{Persona, valid_persona_id};
pub use state::refs::RefInfo;
pub use state::runs::{HostEvent, Outcome, RunFilter, RunRecord};
pub use state::tokens::{ADMIN_TOKEN_FILE, TOKEN_PREFIX, TokenInfo, new_token, token_digest};
pub use state::{DB_FILE, InstalledRecord, TrustedKey};
pub use upstream::pins::{SqlitePins, mcp_manager_options};
