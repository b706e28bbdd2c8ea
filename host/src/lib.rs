//! # skillhost
//!
//! A WebAssembly-sandboxed plugin host for AI agents.
//!
//! Skills are folders (or signed bundles) with a `skill.yaml` manifest and,
//! optionally, a WebAssembly component built against the `skillhost:plugin`
//! WIT world. Their code runs in a [`Sandbox`]: no filesystem, network,
//! environment or inherited stdio; fuel, memory and wall-clock limits; a
//! fresh instance per call. MCP servers' tools join them in one registry,
//! and every call passes one path through a [`Host`].
//!
//! ```no_run
//! # async fn f() -> anyhow::Result<()> {
//! use skillhost::{Caller, HostBuilder, Outcome};
//! let host = HostBuilder::new("data").build().await?;
//! host.add_persona("support", "answers customers")?;
//! host.grant_skill("support", "text-tools", true)?;
//! let run = host
//!     .call(&Caller::persona("support"), "text.word_count",
//!         serde_json::json!({"text": "hello sandbox"}), &Default::default())
//!     .await;
//! assert_eq!(run.outcome, Outcome::Ok);
//! host.shutdown().await;
//! # Ok(()) }
//! ```
//!
//! Two whole programs show embedding: `examples/embed.rs` (a host, a
//! persona, a granted and a refused call, the audit events) and
//! `examples/axum_service.rs` (one persona's tools behind an axum service,
//! refusals as HTTP statuses). The crate's map is `ARCHITECTURE.md` at the
//! repository root. The modules are private; what is public is re-exported
//! here, and listed below by concern.
//!
//! # Features
//!
//! `default-features = false` gives the host an embedder needs: the
//! sandbox, skills, bundles and skill scripts, the registry with personas
//! and grants, the state on SQLite, the MCP client, and the MCP server
//! front over stdio ([`McpFront`]). Each feature adds one part (all are
//! default):
//!
//! | feature | adds |
//! | --- | --- |
//! | `http` | the HTTP front: `HttpServer` (MCP over streamable HTTP at `/mcp`, the operator's API at `/api`, `/metrics`), on axum and hyper |
//! | `console` | the operator's console in the browser, served by the HTTP front at `/` (implies `http`) |
//! | `postgres` | the state on a PostgreSQL server shared by replicas (`database` in `settings.json`, `SKILLHOST_DATABASE`, [`migrate_state`]); without it a data dir naming PostgreSQL is refused with a [`StateError`] naming the feature |
//! | `cli` | the `skillhost` binary: its command line, log subscriber and allocator (implies `http` and `console`) |
//!
//! # The host
//!
//! - [`HostBuilder`] opens a data dir into a [`Host`]; `Host`'s own page
//!   lists its methods by task (calls, personas and grants, approvals and
//!   runs, skills and bundles, MCP servers, tokens, metrics).
//! - A call: [`Caller`], [`CallRequest`], [`RunReport`] with its
//!   [`Outcome`] and [`RunOutput`]; a handoff between calls:
//!   [`StructuredHandoff`]; what is waiting: [`Approval`], [`Question`].
//! - What a front lists: [`ToolSpec`] (with its [`Provider`]),
//!   [`PersonaGrants`], [`SkillStatus`]; the history: [`RunRecord`],
//!   [`RunDetail`], [`HostEvent`], [`Activity`].
//! - Access: [`TokenInfo`], [`FrontOAuth`], [`AccessRefusal`].
//!
//! # Errors
//!
//! Every fallible `Host` method returns the error of its family:
//! [`PersonaError`], [`CatalogError`], [`ApprovalError`], [`ServerError`],
//! [`RefError`], [`TokenError`], [`StateError`]. [`HostError::kind`] (an
//! [`ErrorKind`]) is what a front maps once to its own answer.
//!
//! # Skills
//!
//! - Manifests: [`SkillManifest`] (`skill.yaml`, or an Agent Skills
//!   `SKILL.md`), [`ToolDecl`], [`Permissions`], [`ManifestError`];
//!   schemas: [`Schema`].
//! - A loaded skill: [`Skill`], [`SkillError`]; the built-in ones:
//!   [`builtin_skills`].
//! - Building a guest from source: [`build_skill`], [`freshness`],
//!   [`BuildRecord`], [`BuildError`].
//! - Skill scripts: [`ScriptSet`], [`ScriptCall`], [`run_script_tool`];
//!   their Python packages: [`prepare_packages`], [`PackageLock`],
//!   [`check_wheel`].
//!
//! # Bundles
//!
//! [`pack_dir`], [`open_bundle`] and [`install_bundle`]; signatures:
//! [`SecretKey`], [`PublicKey`], [`Signer`], [`Statement`];
//! [`BundleError`], [`PackError`].
//!
//! # The sandbox and its limits
//!
//! [`SandboxBuilder`] and [`Sandbox`], a [`SkillComponent`] and its
//! [`CallOptions`], [`CallOutput`] or [`CallFailure`] ([`TrapReason`],
//! [`DenyReason`]); outbound HTTP: [`Outbound`], [`OriginPattern`];
//! scripts: [`ScriptRuntime`], [`ScriptRequest`]. Limits: [`Limits`],
//! [`LimitsPolicy`], [`LimitsRequest`], [`OutboundLimits`] and the
//! `DEFAULT_*` and `MAX_*` constants, each with the reason for its value.
//!
//! # State
//!
//! The data dir: [`Settings`] (`settings.json`), [`DB_FILE`],
//! [`compile_cache_dir`]; records: [`Persona`], [`InstalledRecord`],
//! [`TrustedKey`], [`SecretInfo`], [`RefInfo`], [`ApprovalRecord`];
//! moving the state to PostgreSQL: [`migrate_state`].
//!
//! # MCP
//!
//! Upstream servers are the `skillhost-mcp` crate's, run by the host
//! ([`Host::mcp`]; pins: [`StorePins`]). Serving: [`McpFront`] (an rmcp
//! server handler over a `Host` and a `Caller`, over stdio or any rmcp
//! transport); with the `http` feature, `HttpServer` and
//! `HttpServerBuilder` (MCP over streamable HTTP, the operator's API).
//!
//! # Text shown to people
//!
//! [`escape_for_terminal`] and [`reveal_invisible`]: control, invisible
//! and bidirectional characters made visible.

#![deny(missing_docs)]

mod authority;
mod bundle;
mod error;
mod escape;
mod front;
mod limits;
mod registry;
mod sandbox;
mod skill;
pub mod stages;
mod state;
mod upstream;

// The host: one authority over the registry, grants, runs and approvals.
pub use authority::access::{
    AccessRefusal, CLOCK_LEEWAY, DEFAULT_PERSONA_CLAIM, FrontOAuth, Introspection,
    JWKS_REFETCH_INTERVAL, MAX_CLOCK_LEEWAY,
};
pub use authority::handoff::{
    HandoffError, LOCAL_PATH_REMOVED, MAX_HANDOFF_DEPTH, StructuredHandoff, strip_local_paths,
};
pub use authority::metrics::METRICS_CONTENT_TYPE;
pub use authority::personas::valid_persona_id;
pub use authority::questions::{QUESTION_WAIT, Question, QuestionAnswer, QuestionStatus};
pub use authority::tokens::{ADMIN_TOKEN_FILE, TOKEN_PREFIX, new_token, token_digest};
pub use authority::why::{WhyReport, WhyStep};
pub use authority::{
    ACTIVITY_MAX_RUNS, Activity, CallRequest, Caller, ClientAnswer, Decider, EventPage, GcReport,
    Host, HostBuilder, InputRef, LIST_CHANGED_POLL, MinuteCounts, PersonaGrants, RunDetail,
    RunOutput, RunReport, SkillGrantView, SkillStatus, ToolLatency,
};
pub use escape::escape_for_terminal;
pub use skill::ASSETS_DIR;
pub use state::sealing::SECRETS_KEY_FILE;

// Typed errors at the host's boundary.
pub use error::{
    ApprovalError, CatalogError, ErrorKind, HostError, PersonaError, RefError, ServerError,
    StateError, TokenError,
};

// The registry: tools, who provides them, who may see them.
pub use registry::catalog::{HeldVersion, SkillEntry, SkillIdentity, SkillSource};
pub use registry::grants::{
    GrantChange, PersonaGrantView, next_allowed_persona_ids, persona_grants_get,
    persona_grants_put, toggle_grant,
};
pub use registry::{
    Conflict, DEFAULT_SPECIALIST, DEFAULT_SPECIALISTS, Provider, SkillState, ToolSpec,
    check_specialist,
};

// Skills: manifests, schemas, loaded skills, built-ins, the guest build.
pub use skill::builtin::{BuiltinSkill, builtin_skills};
pub use skill::content::ResultKind;
pub use skill::guest_build::{
    BUILD_CACHE_ENV, BUILD_RECORD_SECTION, BuildError, BuildRecord, COMPONENTIZE_JS_VERSION,
    COMPONENTIZE_PY_VERSION, Freshness, GuestLanguage, JS_SDK, PYTHON_SDK, PYTHON_VENDOR_DIR,
    SKILL_WIT, SourceDigest, SourceProblem, Toolchains, build_skill, build_skill_with, freshness,
    rebuild_skill,
};
pub use skill::manifest::{
    AGENT_SKILL_DESCRIPTION_CHARS, DEFAULT_SCRIPTS_FOLDER, ManifestWarning, PythonDecl,
    ReadOnlyScripts, ScriptsDecl, ScriptsPermission,
};
pub use skill::manifest::{
    AGENT_SKILL_FILE, Example, MANIFEST_FILE, MAX_YAML_DEPTH, ManifestError, ManifestLimits,
    Permissions, PromptArgumentDecl, PromptDecl, PromptMessageDecl, PromptRole, ResourceDecl,
    ResourceTemplateDecl, SecretDecl, SkillManifest, ToolDecl, valid_tool_name,
};
pub use skill::schema::{Schema, default_args_schema};
pub use skill::scripts::mime::mime_type_of;
pub use skill::scripts::packages::{Prepared as PreparedPackages, prepare as prepare_packages};
pub use skill::scripts::requirements::{
    Lock as PackageLock, Pin as PackagePin, normalize_package_name, valid_package_name,
};
pub use skill::scripts::resolve::{Requirement, marker_holds};
pub use skill::scripts::tool::{
    RUN_SCRIPT, ScriptCall, ScriptFileArg, run_script_description, run_script_schema,
    run_script_tool,
};
pub use skill::scripts::wheel::{CheckedWheel, WheelName, check_wheel};
pub use skill::scripts::{Script, ScriptSet, ScriptsError};
pub use skill::{Skill, SkillError};

// Bundles: pack, open, sign, install.
pub use bundle::install::{InstallOptions, InstallOutcome, install_bundle};
pub use bundle::trust::{KeyError, PublicKey, SecretKey};
pub use bundle::{
    BundleError, BundleUpload, FileEntry, MAX_ARCHIVE_BYTES, MAX_ENTRIES, MAX_EXTRACTED_BYTES,
    OpenedBundle, PackError, SIGNATURE_PATH, STATEMENT_FORMAT, STATEMENT_PATH, Signer, Statement,
    open_bundle, pack_dir,
};

// The sandbox and its limits.
pub use limits::{
    DEFAULT_APPROVAL_TTL, DEFAULT_EPOCH_TICK, DEFAULT_FUEL, DEFAULT_MAX_HOSTWARD_BYTES,
    DEFAULT_MAX_INSTANCES, DEFAULT_MAX_OUTPUT_BYTES, DEFAULT_MAX_STDIO_BYTES,
    DEFAULT_MAX_WASM_STACK, DEFAULT_MEMORY_BYTES, DEFAULT_OUTBOUND_MAX_CONCURRENT,
    DEFAULT_OUTBOUND_MAX_REQUEST_BODY_BYTES, DEFAULT_OUTBOUND_MAX_REQUESTS,
    DEFAULT_OUTBOUND_MAX_RESPONSE_BODY_BYTES, DEFAULT_OUTBOUND_MAX_RESPONSE_HEADER_BYTES,
    DEFAULT_OUTBOUND_REQUEST_TIMEOUT, DEFAULT_TIMEOUT, DENY_REASON_MAX_CHARS,
    HTTP_BODY_MIN_BYTES_PER_SEC, HTTP_BODY_READ_TIMEOUT, HTTP_HEADER_READ_TIMEOUT,
    HTTP_IDLE_TIMEOUT, HTTP_MAX_CONNECTIONS, HTTP_MAX_CONNECTIONS_PER_PEER, LimitError, Limits,
    LimitsPolicy, LimitsRequest, MAX_APPROVAL_TTL, MAX_CALL_NOTICES, MAX_CONTENT_BLOCKS,
    MAX_ORIGINS, MAX_OUTBOUND_HOST_BYTES, MAX_OUTBOUND_METHOD_BYTES, MAX_PENDING_PER_CALLER,
    MAX_SECRET_BYTES, MAX_SECRETS, MCP_MAX_LISTEN_STREAMS, MCP_MAX_LISTEN_STREAMS_PER_CALLER,
    MCP_MAX_RESOURCE_SUBSCRIPTIONS, MCP_MAX_SESSIONS, MCP_MAX_SESSIONS_PER_CALLER,
    MCP_SESSION_IDLE, MEMORY_KEEP_RESIDENT, OutboundLimits, PAGEMAP_MEMORY_KEEP_RESIDENT,
    PAGEMAP_TABLE_KEEP_RESIDENT, RUN_DETAIL_MAX_CHILDREN, RUN_DETAIL_MAX_EVENTS,
    SERVE_MAX_BYTES_PER_SEC, SERVE_MAX_COUNT, SERVE_MAX_SECS, TABLE_KEEP_RESIDENT,
};
pub use limits::{
    DEFAULT_SCRIPT_FUEL, DEFAULT_SCRIPT_MEMORY_BYTES, DEFAULT_SCRIPT_TIMEOUT, MAX_SCRATCH_BYTES,
    MAX_SCRATCH_BYTES_IN_FLIGHT, MAX_SCRATCH_DEPTH, MAX_SCRATCH_FILES, MAX_SCRATCH_NAME_BYTES,
    MAX_SCRATCH_PATH_BYTES, MAX_SCRIPT_ARG_BYTES, MAX_SCRIPT_ARGS, MAX_SCRIPT_INPUT_BYTES,
    MAX_SCRIPT_INPUT_FILES, MAX_SCRIPT_OUTPUT_BYTES, MAX_SCRIPT_OUTPUT_FILES,
    MAX_SCRIPT_STDIN_BYTES, MAX_SKILL_TREE_BYTES, MAX_SKILL_TREE_FILES, SCRIPT_STDOUT_KEPT_BYTES,
};
pub use sandbox::{
    AddressClass, AskError, AskFuture, AskStop, Asker, AssetsFolder, CallError, CallFailure,
    CallOptions, CallOutput, Capabilities, ClientCapability, ClientReach, DenyReason,
    GuestLogLevel, GuestLogLine, INVALID_OUTBOUND_FIELD, InputAnswer, InputQuestion, InputRequest,
    Interpreter, InvalidSecretValue, InvokeFuture, InvokeRequest, Invoker, LoadError,
    LoadErrorKind, LogSink, MAX_INVOKE_DEPTH, OriginError, OriginPattern, Outbound, OutboundLimit,
    OutboundOutcome, OutboundRecord, PycTree, RefReader, Sandbox, SandboxBuilder, Scheme,
    ScratchLimit, ScriptRequest, ScriptRun, ScriptRuntime, ScriptRuntimeError, SecretHeader,
    SecretValue, SkillComponent, SkillFiles, ToolError, TrapReason, is_question_key,
};

// State: the data dir and its records.
pub use state::DB_FILE;
pub use state::data_dir::{COMPILE_CACHE_ENV, SETTINGS_FILE, Settings, compile_cache_dir};
pub use state::permissions::ApprovalRecord;
pub use state::personas::Persona;
pub use state::refs::RefInfo;
pub use state::runs::{Approval, HostEvent, Outcome, RunFilter, RunPage, RunRecord};
pub use state::secrets::SecretInfo;
pub use state::skills::{InstalledRecord, TrustedKey};
pub use state::tokens::TokenInfo;
pub use state::transfer::{MigrationReport, migrate_to as migrate_state};

// MCP upstream: the host's side of configured MCP servers.
pub use upstream::pins::{StorePins, mcp_manager_options};
pub use upstream::{Enabled, PinStatus};

// Fronts: MCP over stdio or HTTP, and the operator's HTTP API.
#[cfg(feature = "http")]
pub use front::http::{
    AdminAuth, AppState, DEFAULT_GRACE, HttpLimits, HttpServer, HttpServerBuilder, OriginPolicy,
    api_router, raise_open_files_limit,
};
pub use front::mcp::{McpFront, StdioSessionError};

// Text shown for a decision: invisible and bidi characters made visible.
pub use escape::reveal_invisible;
