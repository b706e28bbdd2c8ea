//! The WebAssembly sandbox: one engine, compiled-code cache, epoch ticker,
//! import policy, and calls in fresh, limited stores.
//!
//! The sandbox knows nothing of manifests, schemas or personas. It loads a
//! component (checking its imports before anything runs) and runs calls
//! under [`Limits`](crate::Limits), each ending in one typed outcome.

mod ask;
mod bindings;
mod cache;
mod component;
mod imports;
mod invoke;
mod notices;
mod outbound;
mod outcome;
mod script;
mod spare;
mod state;
mod teardown;
mod ticker;
pub(crate) mod vfs;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use wasmtime::component::{HasSelf, Linker};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, OptLevel, PoolingAllocationConfig};

pub use ask::{
    AskError, AskFuture, AskStop, Asker, ClientCapability, InputAnswer, InputQuestion,
    InputRequest, is_question_key,
};
pub use component::{CallOptions, ClientReach, LoadError, LoadErrorKind, SkillComponent};
pub use imports::Capabilities;
pub use invoke::{InvokeFuture, InvokeRequest, Invoker, MAX_INVOKE_DEPTH, RefReader};
pub(crate) use notices::Notices;
pub use notices::{GuestLogLevel, GuestLogLine, LogSink};
pub use outbound::{
    AddressClass, DenyReason, INVALID_OUTBOUND_FIELD, InvalidSecretValue, OriginError,
    OriginPattern, Outbound, OutboundLimit, OutboundOutcome, OutboundRecord, Scheme, SecretHeader,
    SecretValue,
};
pub use outcome::{CallError, CallFailure, CallOutput, ToolError, TrapReason};
pub use script::{
    Interpreter, PycTree, ScriptRequest, ScriptRun, ScriptRuntime, ScriptRuntimeError, SkillFiles,
};
pub use vfs::{AssetsFolder, ScratchLimit};

use crate::limits::{
    DEFAULT_EPOCH_TICK, DEFAULT_MAX_INSTANCES, DEFAULT_MAX_WASM_STACK, HOST_STACK_HEADROOM,
    LimitsPolicy, MEMORY_KEEP_RESIDENT, MIN_EPOCH_TICK, PAGEMAP_MEMORY_KEEP_RESIDENT,
    PAGEMAP_TABLE_KEEP_RESIDENT, TABLE_KEEP_RESIDENT,
};
use state::CallState;

/// Configures a [`Sandbox`].
///
/// `SandboxBuilder::new()` has these defaults:
/// - no compiled-code cache (every load compiles);
/// - at most 256 instances at once; one more call gets a `busy` error;
/// - [`LimitsPolicy::default()`]: 64 MiB, 10 s, 10¹⁰ fuel per call;
/// - a 512 KiB WebAssembly stack;
/// - a 1 ms epoch tick;
/// - spare instances for components whose instantiation takes at least
///   50 µs (`SPARE_MIN_INSTANTIATE` in `limits.rs`);
/// - no pagemap scan: a finished instance's memory and tables are reset
///   without asking the kernel which pages it wrote (see
///   [`SandboxBuilder::pagemap_scan`]).
///
/// ```
/// let sandbox = skillhost::SandboxBuilder::new().max_instances(16).build().unwrap();
/// assert_eq!(sandbox.policy().defaults.memory_bytes, 64 << 20);
/// ```
#[derive(Debug, Clone)]
pub struct SandboxBuilder {
    cache_dir: Option<PathBuf>,
    max_instances: u32,
    policy: LimitsPolicy,
    max_wasm_stack: usize,
    epoch_tick: Duration,
    memory_images: bool,
    spare_threshold: Option<Duration>,
    pagemap_scan: bool,
}

impl Default for SandboxBuilder {
    fn default() -> Self {
        SandboxBuilder::new()
    }
}

impl SandboxBuilder {
    /// A builder with the defaults listed on [`SandboxBuilder`].
    ///
    /// ```
    /// let b = skillhost::SandboxBuilder::new();
    /// ```
    pub fn new() -> SandboxBuilder {
        SandboxBuilder {
            cache_dir: None,
            max_instances: DEFAULT_MAX_INSTANCES,
            policy: LimitsPolicy::default(),
            max_wasm_stack: DEFAULT_MAX_WASM_STACK,
            epoch_tick: DEFAULT_EPOCH_TICK,
            memory_images: true,
            spare_threshold: Some(crate::limits::SPARE_MIN_INSTANTIATE),
            pagemap_scan: false,
        }
    }

    /// Caches compiled components in `dir` (created if missing), and each
    /// compiled function in its `functions/` folder, so a component sharing
    /// code with one compiled before (every Python skill carries the same
    /// CPython) compiles only what is new.
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// skillhost::SandboxBuilder::new().cache_dir(dir.path()).build().unwrap();
    /// ```
    pub fn cache_dir(&mut self, dir: impl Into<PathBuf>) -> &mut Self {
        self.cache_dir = Some(dir.into());
        self
    }

    /// How many instances may run at once.
    ///
    /// ```
    /// skillhost::SandboxBuilder::new().max_instances(8);
    /// ```
    pub fn max_instances(&mut self, n: u32) -> &mut Self {
        self.max_instances = n.max(1);
        self
    }

    /// The limits policy: per-call defaults and ceilings.
    ///
    /// ```
    /// let mut policy = skillhost::LimitsPolicy::default();
    /// policy.defaults.fuel = 1_000_000;
    /// skillhost::SandboxBuilder::new().policy(policy);
    /// ```
    pub fn policy(&mut self, policy: LimitsPolicy) -> &mut Self {
        self.policy = policy;
        self
    }

    /// WebAssembly stack size per call.
    ///
    /// ```
    /// skillhost::SandboxBuilder::new().max_wasm_stack(256 << 10);
    /// ```
    pub fn max_wasm_stack(&mut self, bytes: usize) -> &mut Self {
        self.max_wasm_stack = bytes;
        self
    }

    /// Whether a fresh instance's memory is mapped copy-on-write from the
    /// component's pre-initialised image (the default: a Python or JS
    /// guest's heap of megabytes is not copied per call) or copied in. Off
    /// only to measure what the images save (`benches/guests.rs`).
    ///
    /// ```
    /// skillhost::SandboxBuilder::new().memory_images(false);
    /// ```
    pub fn memory_images(&mut self, on: bool) -> &mut Self {
        self.memory_images = on;
        self
    }

    /// Which components get a spare instance, made ahead of their next
    /// call once a call ended: those whose instantiation took at least
    /// `threshold`; `None`: none. A spare is a fresh instance that has
    /// run only the component's instantiation, used by one call made under
    /// the same limits (see [`SkillComponent::spares_used`]).
    ///
    /// ```
    /// skillhost::SandboxBuilder::new().spare_threshold(None);
    /// ```
    pub fn spare_threshold(&mut self, threshold: Option<Duration>) -> &mut Self {
        self.spare_threshold = threshold;
        self
    }

    /// Whether a finished instance's memory and tables are reset with the
    /// kernel's pagemap scan (Linux 6.7+; ignored where the kernel lacks
    /// it): only the pages the instance wrote are restored, and up to
    /// `PAGEMAP_MEMORY_KEEP_RESIDENT` of them stay mapped for the next
    /// instance. Off by default: before wasmtime 48.0.11 the scan asks
    /// only for written pages *present* in memory, so a written page the
    /// kernel had swapped out is neither reset nor dropped, and the next
    /// instance in the slot, for another call and perhaps another persona,
    /// can read it (the project's advisory SKILLHOST-2026-0001 in
    /// `.ci/advisories/`). Off, the reset restores a fixed prefix and drops
    /// the rest whatever the kernel did with the pages. Turn it back on by
    /// default with the move to 48.0.11; until then, only to measure what
    /// it saves (`benches/sandbox.rs`, `reset_scan_*`).
    ///
    /// ```
    /// skillhost::SandboxBuilder::new().pagemap_scan(true);
    /// ```
    pub fn pagemap_scan(&mut self, on: bool) -> &mut Self {
        self.pagemap_scan = on;
        self
    }

    /// The epoch tick.
    ///
    /// ```
    /// skillhost::SandboxBuilder::new().epoch_tick(std::time::Duration::from_millis(5));
    /// ```
    pub fn epoch_tick(&mut self, tick: Duration) -> &mut Self {
        self.epoch_tick = tick.max(MIN_EPOCH_TICK);
        self
    }

    /// Builds the engine, linker and ticker.
    ///
    /// ```
    /// let sandbox = skillhost::SandboxBuilder::new().build().unwrap();
    /// ```
    pub fn build(&self) -> anyhow::Result<Sandbox> {
        let n = self.max_instances;
        // The pagemap scan stays off unless asked for (and the kernel has
        // it): before wasmtime 48.0.11 its reset skips written pages the
        // kernel swapped out, which the next instance could then read (see
        // `SandboxBuilder::pagemap_scan`). Turn it back on by default with
        // the move to 48.0.11. Each reset keeps its own amount resident
        // (`limits.rs`).
        let scan = self.pagemap_scan && PoolingAllocationConfig::is_pagemap_scan_available();
        let mut pool = PoolingAllocationConfig::new();
        pool.total_component_instances(n)
            .total_core_instances(n.saturating_mul(8))
            .total_memories(n.saturating_mul(2))
            .total_tables(n.saturating_mul(4))
            .total_stacks(n)
            .max_memory_size(usize::try_from(self.policy.max_memory_bytes).unwrap_or(usize::MAX))
            .max_memories_per_component(crate::limits::MAX_CALL_MEMORIES as u32)
            .max_tables_per_component(crate::limits::MAX_CALL_TABLES as u32)
            .pagemap_scan(if scan {
                wasmtime::Enabled::Yes
            } else {
                wasmtime::Enabled::No
            })
            .linear_memory_keep_resident(if scan {
                PAGEMAP_MEMORY_KEEP_RESIDENT
            } else {
                MEMORY_KEEP_RESIDENT
            })
            .table_keep_resident(if scan {
                PAGEMAP_TABLE_KEEP_RESIDENT
            } else {
                TABLE_KEEP_RESIDENT
            });

        let cache_folder = match &self.cache_dir {
            Some(dir) => {
                {
                    use std::os::unix::fs::DirBuilderExt as _;
                    // Compiled code is native code the host runs: private.
                    std::fs::DirBuilder::new()
                        .recursive(true)
                        .mode(0o700)
                        .create(dir)
                        .map_err(|e| {
                            anyhow::anyhow!("cannot create the cache folder {}: {e}", dir.display())
                        })?;
                }
                Some(
                    cap_std::fs::Dir::open_ambient_dir(dir, cap_std::ambient_authority()).map_err(
                        |e| anyhow::anyhow!("cannot open the cache folder {}: {e}", dir.display()),
                    )?,
                )
            }
            None => None,
        };
        let mut config = Config::new();
        config
            .wasm_component_model(true)
            .consume_fuel(true)
            .epoch_interruption(true)
            .max_wasm_stack(self.max_wasm_stack)
            .async_stack_size(self.max_wasm_stack.saturating_add(HOST_STACK_HEADROOM))
            .cranelift_opt_level(OptLevel::Speed)
            // Fresh instances map the memory image copy-on-write.
            .memory_init_cow(self.memory_images)
            .allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        if let Some(d) = &cache_folder {
            match cache::FunctionCache::open(d) {
                Ok(functions) => {
                    config
                        .enable_incremental_compilation(Arc::new(functions))
                        .map_err(|e| anyhow::anyhow!("cannot cache compiled functions: {e}"))?;
                }
                Err(e) => tracing::warn!("compiling without the function cache: {e}"),
            }
        }
        let engine = Engine::new(&config)
            .map_err(|e| anyhow::anyhow!("cannot create the wasm engine: {e}"))?;

        let linker = new_linker(&engine)?;

        let cache = cache_folder.map(|d| cache::CompileCache::new(d, &engine));
        let ticker = ticker::EpochTicker::start(&engine, self.epoch_tick);
        Ok(Sandbox {
            inner: Arc::new(SandboxInner {
                engine,
                linker,
                cache,
                policy: self.policy,
                ticker,
                spare_threshold: self.spare_threshold,
                spares: spare::SpareRoom::default(),
                script_runtime: std::sync::OnceLock::new(),
            }),
        })
    }
}

/// The one linker every component is instantiated with: the WASI subset,
/// the host interface, `wasi:http`, `wasi:filesystem` and `wasi:sockets`.
/// What the last three reach is decided per call (see the `imports`
/// module): an empty filesystem (the in-memory one of `vfs/`), refused
/// requests and refused sockets unless the skill's approved permissions
/// say otherwise.
fn new_linker(engine: &Engine) -> anyhow::Result<Linker<CallState>> {
    let mut linker: Linker<CallState> = Linker::new(engine);
    add_wasi_subset(&mut linker).map_err(|e| anyhow::anyhow!("cannot link WASI: {e}"))?;
    bindings::Skill::add_to_linker::<_, HasSelf<CallState>>(&mut linker, |s| s)
        .map_err(|e| anyhow::anyhow!("cannot link the host interface: {e}"))?;
    {
        use wasmtime_wasi_http::WasiHttpView as _;
        use wasmtime_wasi_http::p2::bindings::http::{outgoing_handler, types};
        let options = wasmtime_wasi_http::p2::bindings::LinkOptions::default();
        outgoing_handler::add_to_linker::<_, wasmtime_wasi_http::WasiHttp>(
            &mut linker,
            CallState::http,
        )
        .and_then(|()| {
            types::add_to_linker::<_, wasmtime_wasi_http::WasiHttp>(
                &mut linker,
                &options.into(),
                CallState::http,
            )
        })
        .map_err(|e| anyhow::anyhow!("cannot link wasi:http: {e}"))?;
    }
    // The in-memory filesystem (`vfs/`), not wasmtime-wasi's host folders.
    vfs::add_to_linker(&mut linker, CallState::vfs)
        .map_err(|e| anyhow::anyhow!("cannot link wasi:filesystem: {e}"))?;
    add_refused_sockets(&mut linker)
        .map_err(|e| anyhow::anyhow!("cannot link wasi:sockets: {e}"))?;
    Ok(linker)
}

/// Links `wasi:sockets`, every operation of which is refused: the call's
/// WASI context allows no TCP, no UDP, no name lookup and no address.
fn add_refused_sockets(l: &mut Linker<CallState>) -> wasmtime::Result<()> {
    use wasmtime_wasi::p2::bindings::sockets;
    use wasmtime_wasi::sockets::{WasiSockets, WasiSocketsView as _};
    let options = sockets::network::LinkOptions::default();
    sockets::tcp::add_to_linker::<CallState, WasiSockets>(l, CallState::sockets)?;
    sockets::udp::add_to_linker::<CallState, WasiSockets>(l, CallState::sockets)?;
    sockets::udp_create_socket::add_to_linker::<CallState, WasiSockets>(l, CallState::sockets)?;
    sockets::tcp_create_socket::add_to_linker::<CallState, WasiSockets>(l, CallState::sockets)?;
    sockets::instance_network::add_to_linker::<CallState, WasiSockets>(l, CallState::sockets)?;
    sockets::network::add_to_linker::<CallState, WasiSockets>(l, &options, CallState::sockets)?;
    sockets::ip_name_lookup::add_to_linker::<CallState, WasiSockets>(l, CallState::sockets)?;
    Ok(())
}

/// Links the WASI subset every skill may use: io, clocks, random and cli
/// (environment, exit, stdio, terminal queries). Sockets are never
/// linked; HTTP and filesystem only by [`new_linker`] for a capability.
fn add_wasi_subset(l: &mut Linker<CallState>) -> wasmtime::Result<()> {
    use wasmtime_wasi::WasiView;
    use wasmtime_wasi::cli::{WasiCli, WasiCliView};
    use wasmtime_wasi::clocks::{WasiClocks, WasiClocksView};
    use wasmtime_wasi::p2::bindings::{cli, clocks, random};
    use wasmtime_wasi::random::WasiRandom;

    wasmtime_wasi_io::add_to_linker_async(l)?;
    clocks::wall_clock::add_to_linker::<CallState, WasiClocks>(l, CallState::clocks)?;
    clocks::monotonic_clock::add_to_linker::<CallState, WasiClocks>(l, CallState::clocks)?;
    random::random::add_to_linker::<CallState, WasiRandom>(l, |t| t.ctx().ctx.random())?;
    random::insecure::add_to_linker::<CallState, WasiRandom>(l, |t| t.ctx().ctx.random())?;
    random::insecure_seed::add_to_linker::<CallState, WasiRandom>(l, |t| t.ctx().ctx.random())?;
    cli::exit::add_to_linker::<CallState, WasiCli>(l, CallState::cli)?;
    cli::environment::add_to_linker::<CallState, WasiCli>(l, CallState::cli)?;
    cli::stdin::add_to_linker::<CallState, WasiCli>(l, CallState::cli)?;
    cli::stdout::add_to_linker::<CallState, WasiCli>(l, CallState::cli)?;
    cli::stderr::add_to_linker::<CallState, WasiCli>(l, CallState::cli)?;
    cli::terminal_input::add_to_linker::<CallState, WasiCli>(l, CallState::cli)?;
    cli::terminal_output::add_to_linker::<CallState, WasiCli>(l, CallState::cli)?;
    cli::terminal_stdin::add_to_linker::<CallState, WasiCli>(l, CallState::cli)?;
    cli::terminal_stdout::add_to_linker::<CallState, WasiCli>(l, CallState::cli)?;
    cli::terminal_stderr::add_to_linker::<CallState, WasiCli>(l, CallState::cli)?;
    Ok(())
}

pub(crate) struct SandboxInner {
    engine: Engine,
    /// The one linker (see [`new_linker`]).
    linker: Linker<CallState>,
    cache: Option<cache::CompileCache>,
    policy: LimitsPolicy,
    ticker: ticker::EpochTicker,
    /// Instantiations this long get spares; `None`: no spares.
    spare_threshold: Option<Duration>,
    /// The spares held or being made, across components.
    spares: spare::SpareRoom,
    /// The script runtime, once loaded (or why it cannot be).
    script_runtime:
        std::sync::OnceLock<Result<Arc<script::LoadedRuntime>, script::ScriptRuntimeError>>,
}

/// The sandbox: one engine for the whole host, cheap to clone.
///
/// ```no_run
/// # async fn f() -> anyhow::Result<()> {
/// let sandbox = skillhost::SandboxBuilder::new().build()?;
/// let component = sandbox.load("text-tools@0.1.0", &std::fs::read("text_tools.wasm")?)?;
/// let out = component
///     .call("text.word_count", r#"{"text":"a b"}"#, &skillhost::CallOptions::default())
///     .await?;
/// assert_eq!(out.output["words"], 2);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Sandbox {
    inner: Arc<SandboxInner>,
}

impl std::fmt::Debug for Sandbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sandbox")
            .field("policy", &self.inner.policy)
            .finish_non_exhaustive()
    }
}

impl Sandbox {
    /// The limits policy calls run under.
    ///
    /// ```
    /// let s = skillhost::SandboxBuilder::new().build().unwrap();
    /// assert_eq!(s.policy().defaults.timeout.as_secs(), 10);
    /// ```
    pub fn policy(&self) -> &LimitsPolicy {
        &self.inner.policy
    }

    /// Loads a component without capabilities: checks that it is a
    /// component, refuses any import the sandbox does not provide (from the
    /// bytes, before compiling), compiles it (or takes it from the cache),
    /// and pre-instantiates it. `label`
    /// names it in every error, typically `name@version`. The same as
    /// [`load_with`](Sandbox::load_with) and `Capabilities::default()`.
    ///
    /// ```
    /// let s = skillhost::SandboxBuilder::new().build().unwrap();
    /// let err = s.load("junk@0.1.0", b"not wasm").unwrap_err();
    /// assert!(err.to_string().contains("not a WebAssembly binary"));
    /// ```
    pub fn load(&self, label: &str, wasm: &[u8]) -> Result<SkillComponent, LoadError> {
        self.load_with(label, wasm, Capabilities::default())
    }

    /// Loads a component with `capabilities`: its `wasi:http` requests go
    /// out only with `network` (each checked against the call's
    /// `Outbound`), and its `wasi:filesystem` shows the call's assets only
    /// with `assets`; without them, requests are refused and the
    /// filesystem is empty.
    ///
    /// ```
    /// use skillhost::Capabilities;
    /// let s = skillhost::SandboxBuilder::new().build().unwrap();
    /// let caps = Capabilities { network: true, assets: false };
    /// let err = s.load_with("junk@0.1.0", b"not wasm", caps).unwrap_err();
    /// assert_eq!(err.kind, skillhost::LoadErrorKind::NotWebAssembly);
    /// ```
    pub fn load_with(
        &self,
        label: &str,
        wasm: &[u8],
        capabilities: Capabilities,
    ) -> Result<SkillComponent, LoadError> {
        SkillComponent::load(self.inner.clone(), label, wasm, capabilities)
    }
}
