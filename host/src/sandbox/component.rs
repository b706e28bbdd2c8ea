//! A loaded skill component and calls into it, each in a fresh store.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use wasmtime::component::Component;
use wasmtime::{Store, Trap, UpdateDeadline};

use super::bindings::{Skill, SkillPre};
use super::imports::Capabilities;
use super::invoke::{Invoker, RefReader};
use super::outbound::{Outbound, OutboundHooks};
use super::outcome::{CallError, CallFailure, CallOutput, ToolError, TrapReason};
use super::spare::{Held, MakesSpares, Making, Spares};
use super::state::{ASSETS_GUEST_PATH, CallBinding, CallIdentity, CallReach, CallState, HostTrap};
use super::vfs::{Mount, MountRoot, Vfs};
use super::{SandboxInner, imports};
use crate::escape::{escape_bytes, escape_control, redact};
use crate::limits::{KEPT_STDIO_BYTES, Limits};

/// How much captured stderr a [`CallError`] carries.
const ERROR_STDERR_BYTES: usize = 2048;

/// Why a component could not be loaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LoadErrorKind {
    /// The bytes are not WebAssembly at all.
    NotWebAssembly,
    /// A core module where a component was expected.
    CoreModule,
    /// A component that does not validate or compile (truncated, corrupt,
    /// using disabled proposals).
    Malformed,
    /// Imports the sandbox does not provide, or the `tools` export missing.
    Refused,
    /// Linking failed for another reason.
    Link,
}

/// A component that could not be loaded, naming the skill.
///
/// ```
/// let s = skillhost::SandboxBuilder::new().build().unwrap();
/// let err = s.load("x@1.0.0", b"\0asm\x01\0\0\0").unwrap_err();
/// assert_eq!(err.kind, skillhost::LoadErrorKind::CoreModule);
/// assert!(err.to_string().starts_with("skill `x@1.0.0`"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("skill `{skill}`: {message}")]
pub struct LoadError {
    /// The label given to [`Sandbox::load`](super::Sandbox::load).
    pub skill: String,
    /// What kind of failure.
    pub kind: LoadErrorKind,
    /// What was wrong and what to do.
    pub message: String,
}

/// Options of one call. `CallOptions::default()` runs under
/// [`Limits::default()`], with no config values, no `invoke` (every
/// `host.invoke` answers `denied`), at depth 0, with no outer deadline, no
/// outbound HTTP (every request refused) and no assets.
///
/// `outbound` and `assets` take effect only for a component loaded with
/// the matching [`Capabilities`]; without them its `wasi:http` refuses
/// every request and its `wasi:filesystem` is empty.
///
/// ```
/// let opts = skillhost::CallOptions { limits: skillhost::Limits { fuel: 10_000, ..Default::default() }, ..Default::default() };
/// ```
#[derive(Clone, Default)]
pub struct CallOptions {
    /// Limits of this call.
    pub limits: Limits,
    /// Values the component reads with `host.config`.
    pub config: Arc<BTreeMap<String, String>>,
    /// What `host.invoke` reaches; `None` denies every invoke.
    pub invoker: Option<Arc<dyn Invoker>>,
    /// Invoke depth of this call (0 for a call from outside).
    pub depth: u32,
    /// A deadline inherited from a caller; the call ends by the earlier of
    /// this and its own timeout.
    pub not_after: Option<Instant>,
    /// What `host.read-ref` reads; `None` denies every ref.
    pub refs: Option<Arc<dyn RefReader>>,
    /// Which origins outbound HTTP requests may reach, and the secret
    /// headers bound to them; `None` refuses every request.
    pub outbound: Option<Arc<Outbound>>,
    /// The folder the component reads at `/assets` (read-only, in host
    /// memory: no write, no `..` or symbolic link out of it); `None` gives
    /// an empty filesystem.
    pub assets: Option<Arc<super::AssetsFolder>>,
    /// Secret values to replace with `[redacted]` in what the sandbox logs
    /// and returns of the guest's log lines and stdout/stderr (longest
    /// first). A guest handed a secret back by an API it called cannot log
    /// it out.
    pub redact: Arc<[String]>,
    /// Receives the call's `host.progress` reports; `None` drops them.
    pub progress: Option<tokio::sync::mpsc::UnboundedSender<skillhost_mcp::Progress>>,
    /// Receives the call's log lines at or above its level (they go to the
    /// host's log either way); `None` sends them only to the host's log.
    pub log: Option<super::LogSink>,
    /// Puts the component's `host.ask` and `host.elicit` questions to the
    /// calling client; `None`: every question is unavailable (`elicit`
    /// answers `denied`).
    pub ask: Option<std::sync::Arc<dyn super::Asker>>,
    /// Which questions beyond forms the skill may ask (its approved
    /// permissions); none by default.
    pub client_reach: ClientReach,
}

/// Which questions beyond forms a skill may put to its caller's client:
/// its approved `permissions.sampling` and `permissions.roots`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClientReach {
    /// `sampling/createMessage`: a completion by the client's model.
    pub sampling: bool,
    /// `roots/list`: the client's roots.
    pub roots: bool,
}

impl fmt::Debug for CallOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CallOptions")
            .field("limits", &self.limits)
            .field("config_keys", &self.config.keys().collect::<Vec<_>>())
            .field("invoker", &self.invoker.is_some())
            .field("depth", &self.depth)
            .field("outbound", &self.outbound)
            .field(
                "assets",
                &self.assets.as_ref().map(|a| a.dir().to_path_buf()),
            )
            .field("redact", &self.redact.len())
            .field("progress", &self.progress.is_some())
            .field("log", &self.log.as_ref().map(|l| l.min))
            .field("ask", &self.ask.is_some())
            .field("client_reach", &self.client_reach)
            .finish()
    }
}

struct ComponentInner {
    sandbox: Arc<SandboxInner>,
    label: Arc<str>,
    sha256: String,
    from_cache: bool,
    capabilities: Capabilities,
    pre: SkillPre<CallState>,
    /// The next call's instance, made ahead of it (see the `spare` module).
    spares: Arc<Spares<Skill>>,
}

/// A compiled, checked and pre-instantiated skill component. Every call
/// gets a fresh instance in a fresh store. Cheap to clone.
///
/// ```no_run
/// # async fn f(c: skillhost::SkillComponent) {
/// let tools = c.implemented(&skillhost::Limits::default()).await.unwrap();
/// # }
/// ```
#[derive(Clone)]
pub struct SkillComponent {
    inner: Arc<ComponentInner>,
}

impl fmt::Debug for SkillComponent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SkillComponent")
            .field("label", &self.inner.label)
            .field("sha256", &self.inner.sha256)
            .finish()
    }
}

/// The first 8 bytes of a component (layer 1, version 0x0d).
const COMPONENT_HEADER: [u8; 8] = [0, b'a', b's', b'm', 0x0d, 0, 1, 0];
const CORE_MODULE_VERSION: [u8; 4] = [1, 0, 0, 0];

impl SkillComponent {
    pub(crate) fn load(
        sandbox: Arc<SandboxInner>,
        label: &str,
        wasm: &[u8],
        capabilities: Capabilities,
    ) -> Result<SkillComponent, LoadError> {
        let err = |kind, message: String| LoadError {
            skill: label.to_string(),
            kind,
            message,
        };
        check_header(label, wasm)?;
        // The surface first: a component the sandbox would refuse costs
        // no compilation and leaves nothing in the cache.
        imports::check(wasm).map_err(|e| match e {
            imports::SurfaceError::Malformed(m) => err(LoadErrorKind::Malformed, m),
            imports::SurfaceError::Refused(m) => err(LoadErrorKind::Refused, m),
        })?;
        let (component, sha256, from_cache) = compile(&sandbox, label, wasm)?;
        let instance_pre = sandbox.linker.instantiate_pre(&component).map_err(|e| {
            err(
                LoadErrorKind::Link,
                format!("cannot link: {}", error_chain(&e)),
            )
        })?;
        let pre = SkillPre::new(instance_pre).map_err(|e| {
            err(
                LoadErrorKind::Refused,
                format!("not a skill component: {}", error_chain(&e)),
            )
        })?;
        Ok(SkillComponent {
            inner: Arc::new(ComponentInner {
                sandbox,
                label: label.into(),
                sha256,
                from_cache,
                capabilities,
                pre,
                spares: Arc::default(),
            }),
        })
    }

    /// `name@version` (or whatever label the component was loaded with).
    ///
    /// ```no_run
    /// # fn f(c: skillhost::SkillComponent) { println!("{}", c.label()); }
    /// ```
    pub fn label(&self) -> &str {
        &self.inner.label
    }

    /// Hex sha256 of the component bytes.
    ///
    /// ```no_run
    /// # fn f(c: skillhost::SkillComponent) { assert_eq!(c.sha256().len(), 64); }
    /// ```
    pub fn sha256(&self) -> &str {
        &self.inner.sha256
    }

    /// Whether loading took the compiled code from the cache.
    ///
    /// ```no_run
    /// # fn f(c: skillhost::SkillComponent) { println!("cached: {}", c.loaded_from_cache()); }
    /// ```
    pub fn loaded_from_cache(&self) -> bool {
        self.inner.from_cache
    }

    /// What the component was loaded with.
    ///
    /// ```no_run
    /// # fn f(c: skillhost::SkillComponent) { assert!(!c.capabilities().network); }
    /// ```
    pub fn capabilities(&self) -> Capabilities {
        self.inner.capabilities
    }

    /// The filesystem a call shows: the call's assets at `/assets`, if the
    /// component may read assets; else none.
    fn fs_of(&self, tool: &str, opts: &CallOptions) -> Result<Vfs, CallError> {
        let Some(assets) = opts
            .assets
            .as_ref()
            .filter(|_| self.inner.capabilities.assets)
        else {
            return Ok(Vfs::default());
        };
        let tree = assets.tree().map_err(|e| {
            CallError::new(
                &*self.inner.label,
                tool,
                CallFailure::Tool {
                    error: ToolError::Failed(format!(
                        "the skill's assets folder cannot be read: {}",
                        escape_control(&e, 512, false)
                    )),
                },
            )
        })?;
        Ok(Vfs::new(vec![Mount {
            path: ASSETS_GUEST_PATH.into(),
            root: MountRoot::ReadOnly(tree),
        }]))
    }

    /// What ties a store to this call: who calls, by when, what it may
    /// read and reach.
    fn binding_of(
        &self,
        tool: &str,
        opts: &CallOptions,
        deadline: Instant,
    ) -> Result<CallBinding, CallError> {
        let reach = CallReach {
            // Without network access every request is refused (and recorded).
            outbound: OutboundHooks::new(
                opts.outbound
                    .clone()
                    .filter(|_| self.inner.capabilities.network),
                opts.limits.outbound,
                deadline,
            ),
            fs: self.fs_of(tool, opts)?,
            redact: opts.redact.clone(),
            notices: super::Notices::new(opts.progress.clone(), opts.log.clone()),
            ask: opts.ask.clone(),
            client_reach: opts.client_reach,
        };
        Ok(CallBinding {
            identity: CallIdentity {
                skill: self.inner.label.clone(),
                tool: tool.into(),
            },
            deadline,
            config: opts.config.clone(),
            invoker: opts.invoker.clone(),
            depth: opts.depth,
            refs: opts.refs.clone(),
            reach,
            stdin: bytes::Bytes::new(),
        })
    }

    fn new_store(
        &self,
        tool: &str,
        opts: &CallOptions,
        deadline: Instant,
    ) -> Result<Store<CallState>, CallError> {
        let binding = self.binding_of(tool, opts, deadline)?;
        Ok(new_store(
            &self.inner.sandbox,
            opts.limits,
            binding,
            KEPT_STDIO_BYTES,
        ))
    }

    /// The spare instance, if one made for this call's limits is ready,
    /// given the call's state (its filesystem too): its fuel is what a
    /// fresh store would have left after the same instantiation.
    fn take_spare(
        &self,
        tool: &str,
        opts: &CallOptions,
        deadline: Instant,
    ) -> Result<Option<(Store<CallState>, Skill)>, CallError> {
        let Some(spare) = self.inner.spares.take(&opts.limits) else {
            return Ok(None);
        };
        let binding = self.binding_of(tool, opts, deadline)?;
        let (mut store, skill, fuel_used) = spare.into_parts();
        bind_spare(
            &self.inner.sandbox,
            &mut store,
            binding,
            opts.limits.fuel,
            fuel_used,
        );
        Ok(Some((store, skill)))
    }

    /// Instantiates the component in `store`. If the pool is full and
    /// spares of the sandbox's components hold slots, they are dropped and
    /// the instantiation tried once more in a new store: spares never make
    /// a call busy.
    async fn instantiate(
        &self,
        store: &mut Store<CallState>,
        tool: &str,
        opts: &CallOptions,
        deadline: Instant,
    ) -> wasmtime::Result<Skill> {
        match self.instantiate_timed(store).await {
            Ok(skill) => Ok(skill),
            Err(e)
                if e.is::<wasmtime::PoolConcurrencyLimitError>()
                    && self.inner.sandbox.spares.evict() =>
            {
                // The failed store's partial instances go with it.
                *store = self
                    .new_store(tool, opts, deadline)
                    .map_err(|e| wasmtime::Error::msg(e.to_string()))?;
                self.inner.pre.instantiate_async(&mut *store).await
            }
            Err(e) => Err(e),
        }
    }

    /// Instantiates the component in `store`, noting how long it took
    /// (what decides whether the component gets spares).
    async fn instantiate_timed(&self, store: &mut Store<CallState>) -> wasmtime::Result<Skill> {
        let started = Instant::now();
        let skill = self.inner.pre.instantiate_async(&mut *store).await?;
        self.inner.spares.instantiated(started.elapsed());
        Ok(skill)
    }

    /// A fresh instance under `limits`, with nothing of a call bound to
    /// it (an empty filesystem: the call brings its own), if its
    /// instantiation succeeds in time and touches nothing outside its
    /// memory.
    async fn make_spare(&self, limits: Limits, held: Held) -> Making<Skill> {
        const TOOL: &str = "(spare instance)";
        let opts = CallOptions {
            limits,
            ..Default::default()
        };
        let deadline = Self::deadline(&opts, Instant::now());
        let Ok(mut store) = self.new_store(TOOL, &opts, deadline) else {
            return Making::Refused;
        };
        let made =
            tokio::time::timeout_at(deadline.into(), self.instantiate_timed(&mut store)).await;
        Making::settle(made, store, limits, held, &self.inner.label)
    }

    /// How many calls ran in a spare instance: a fresh instance made ahead
    /// of its call once the previous call ended, for a component whose
    /// instantiation is slow (see [`SandboxBuilder::spare_threshold`](super::SandboxBuilder::spare_threshold)).
    ///
    /// ```no_run
    /// # fn f(c: skillhost::SkillComponent) { println!("{}", c.spares_used()); }
    /// ```
    pub fn spares_used(&self) -> u64 {
        self.inner.spares.used()
    }

    /// Whether a spare instance is ready for the next call.
    ///
    /// ```no_run
    /// # fn f(c: skillhost::SkillComponent) { println!("{}", c.spare_ready()); }
    /// ```
    pub fn spare_ready(&self) -> bool {
        self.inner.spares.ready()
    }

    fn deadline(opts: &CallOptions, start: Instant) -> Instant {
        deadline_of(&opts.limits, opts.not_after, start)
    }

    /// Asks the component which tools it implements.
    ///
    /// ```no_run
    /// # async fn f(c: skillhost::SkillComponent) {
    /// for tool in c.implemented(&Default::default()).await.unwrap() { println!("{tool}"); }
    /// # }
    /// ```
    pub async fn implemented(&self, limits: &Limits) -> Result<Vec<String>, CallError> {
        const TOOL: &str = "implemented()";
        let opts = CallOptions {
            limits: *limits,
            ..Default::default()
        };
        let start = Instant::now();
        let deadline = Self::deadline(&opts, start);
        let mut store = self.new_store(TOOL, &opts, deadline)?;
        let run = async {
            let skill = self.instantiate_timed(&mut store).await?;
            skill
                .skillhost_plugin_tools()
                .call_implemented(&mut store)
                .await
        };
        match tokio::time::timeout_at(deadline.into(), run).await {
            Ok(Ok(names)) => Ok(names),
            Ok(Err(e)) => Err(classify(&self.inner.label, TOOL, &mut store, e)),
            Err(_) => Err(timed_out(&self.inner.label, TOOL, &store, start)),
        }
    }

    /// Calls `tool` with `arguments_json` in a fresh instance under
    /// `opts.limits`. The JSON result must parse and fit the output cap.
    ///
    /// ```no_run
    /// # async fn f(c: skillhost::SkillComponent) {
    /// let out = c.call("json.query", r#"{"document":[1],"pointer":"/0"}"#, &Default::default()).await.unwrap();
    /// assert_eq!(out.output, 1);
    /// # }
    /// ```
    pub async fn call(
        &self,
        tool: &str,
        arguments_json: &str,
        opts: &CallOptions,
    ) -> Result<CallOutput, CallError> {
        let result = self.call_once(tool, arguments_json, opts).await;
        super::spare::refill(self, opts.limits);
        result
    }

    async fn call_once(
        &self,
        tool: &str,
        arguments_json: &str,
        opts: &CallOptions,
    ) -> Result<CallOutput, CallError> {
        let start = Instant::now();
        let mut clock = crate::stages::start();
        let deadline = Self::deadline(opts, start);
        let (mut store, spare) = match self.take_spare(tool, opts, deadline)? {
            Some((store, skill)) => (store, Some(skill)),
            None => (self.new_store(tool, opts, deadline)?, None),
        };
        crate::stages::lap(crate::stages::Stage::Store, &mut clock);
        let run = async {
            let skill = match spare {
                Some(skill) => skill,
                None => self.instantiate(&mut store, tool, opts, deadline).await?,
            };
            crate::stages::lap(crate::stages::Stage::Instantiate, &mut clock);
            let r = skill
                .skillhost_plugin_tools()
                .call_call(&mut store, tool, arguments_json)
                .await;
            crate::stages::lap(crate::stages::Stage::Guest, &mut clock);
            r
        };
        let result = tokio::time::timeout_at(deadline.into(), run).await;
        let duration = start.elapsed();
        let outbound = store.data().outbound_records();
        let returned = match result {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => {
                return Err(CallError {
                    outbound,
                    ..classify(&self.inner.label, tool, &mut store, e)
                });
            }
            Err(_) => {
                return Err(CallError {
                    outbound,
                    ..timed_out(&self.inner.label, tool, &store, start)
                });
            }
        };
        let fuel_consumed = opts
            .limits
            .fuel
            .saturating_sub(store.get_fuel().unwrap_or(0));
        let (stdout, stderr) = take_stdio(&self.inner.label, tool, &store);
        let text = match returned {
            Ok(text) => text,
            Err(e) => {
                return Err(CallError {
                    stderr: escape_control(&stderr, ERROR_STDERR_BYTES, true),
                    outbound,
                    ..CallError::new(
                        &*self.inner.label,
                        tool,
                        CallFailure::Tool {
                            error: ToolError::from(e),
                        },
                    )
                });
            }
        };
        if text.len() as u64 > opts.limits.max_output_bytes {
            return Err(CallError {
                outbound,
                ..CallError::new(
                    &*self.inner.label,
                    tool,
                    CallFailure::Trapped {
                        reason: TrapReason::OutputTooLarge,
                        detail: format!(
                            "the result is {} bytes, over the output cap of {} bytes",
                            text.len(),
                            opts.limits.max_output_bytes
                        ),
                    },
                )
            });
        }
        let output = match serde_json::from_str(&text) {
            Ok(v) => v,
            Err(e) => {
                return Err(CallError {
                    outbound,
                    ..CallError::new(
                        &*self.inner.label,
                        tool,
                        CallFailure::Tool {
                            error: ToolError::Failed(format!(
                                "the tool returned invalid JSON: {e}"
                            )),
                        },
                    )
                });
            }
        };
        crate::stages::lap(crate::stages::Stage::Output, &mut clock);
        super::teardown::after_answer(store);
        Ok(CallOutput {
            output,
            stdout,
            stderr,
            fuel_consumed,
            duration,
            outbound,
        })
    }
}

/// Checks that `wasm` is a component (not junk, not a core module).
pub(super) fn check_header(label: &str, wasm: &[u8]) -> Result<(), LoadError> {
    let err = |kind, message: String| LoadError {
        skill: label.to_string(),
        kind,
        message,
    };
    if wasm.len() < 8 || &wasm[..4] != b"\0asm" {
        return Err(err(
            LoadErrorKind::NotWebAssembly,
            format!(
                "not a WebAssembly binary ({} bytes, no `\\0asm` header)",
                wasm.len()
            ),
        ));
    }
    if wasm[4..8] == CORE_MODULE_VERSION {
        return Err(err(
            LoadErrorKind::CoreModule,
            "this is a core WebAssembly module, not a component: build the skill for \
             `--target wasm32-wasip2` (or wrap the module with `wasm-tools component new`)"
                .into(),
        ));
    }
    if wasm[..8] != COMPONENT_HEADER {
        return Err(err(
            LoadErrorKind::Malformed,
            format!(
                "unsupported WebAssembly version/layer bytes {:02x?}",
                &wasm[4..8]
            ),
        ));
    }
    Ok(())
}

/// Compiles a checked component, or takes it from the sandbox's cache:
/// the component, its sha256, and whether it came from the cache.
pub(super) fn compile(
    sandbox: &SandboxInner,
    label: &str,
    wasm: &[u8],
) -> Result<(Component, String, bool), LoadError> {
    let sha256 = hex::encode(Sha256::digest(wasm));
    let engine = &sandbox.engine;
    let cached = sandbox.cache.as_ref().and_then(|c| c.load(engine, &sha256));
    let from_cache = cached.is_some();
    let component = match cached {
        Some(c) => c,
        None => {
            let started = Instant::now();
            let c = Component::new(engine, wasm).map_err(|e| LoadError {
                skill: label.to_string(),
                kind: LoadErrorKind::Malformed,
                message: format!("invalid component: {}", error_chain(&e)),
            })?;
            tracing::info!(
                skill = label,
                bytes = wasm.len(),
                ms = started.elapsed().as_millis() as u64,
                "compiled the component"
            );
            if let Some(cache) = &sandbox.cache {
                cache.store(&sha256, &c);
            }
            c
        }
    };
    if from_cache {
        tracing::debug!(skill = label, "took the compiled component from the cache");
    }
    Ok((component, sha256, from_cache))
}

/// A fresh store for one call under `limits`, bound to `binding`, keeping
/// `kept` bytes of its stdout and stderr: its fuel set, its deadline
/// checked at every epoch tick (and the thread yielded to other calls).
pub(super) fn new_store(
    sandbox: &SandboxInner,
    limits: Limits,
    binding: CallBinding,
    kept: usize,
) -> Store<CallState> {
    let state = CallState::new(limits, binding, kept);
    let mut store = Store::new(&sandbox.engine, state);
    // The epoch advances only while some store lives.
    store.data_mut().ticking = Some(sandbox.ticker.ticking());
    store.limiter(|s| &mut s.limiter);
    // Cannot fail: fuel is enabled on every sandbox engine.
    let _ = store.set_fuel(limits.fuel);
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(|ctx| {
        let state = ctx.data();
        if Instant::now() >= state.call.deadline {
            Err(HostTrap::new(
                TrapReason::Deadline,
                format!(
                    "deadline of {} ms passed while running",
                    state.limits.timeout.as_millis()
                ),
            )
            .into())
        } else {
            // Yield so other calls on this thread make progress too.
            Ok(UpdateDeadline::Yield(1))
        }
    });
    store
}

/// A spare's store given its call: the call's binding, the epoch ticking,
/// and the fuel a fresh store would have left after the same
/// instantiation.
pub(super) fn bind_spare(
    sandbox: &SandboxInner,
    store: &mut Store<CallState>,
    binding: CallBinding,
    fuel: u64,
    fuel_used: u64,
) {
    let state = store.data_mut();
    state.rebind(binding);
    state.ticking = Some(sandbox.ticker.ticking());
    // Cannot fail: fuel is enabled on every sandbox engine.
    let _ = store.set_fuel(fuel.saturating_sub(fuel_used));
    store.set_epoch_deadline(1);
}

/// The call's deadline: its own timeout from `start`, or the caller's
/// if earlier.
pub(super) fn deadline_of(limits: &Limits, not_after: Option<Instant>, start: Instant) -> Instant {
    let own = start + limits.timeout;
    match not_after {
        Some(t) if t < own => t,
        _ => own,
    }
}

/// Logs and returns the captured stdout and stderr, escaped and redacted.
pub(super) fn take_stdio(label: &str, tool: &str, store: &Store<CallState>) -> (String, String) {
    let state = store.data();
    let stdout = redact(
        &state.call.reach.redact,
        &escape_bytes(&state.stdout.lock().kept, usize::MAX),
    );
    let stderr = redact(
        &state.call.reach.redact,
        &escape_bytes(&state.stderr.lock().kept, usize::MAX),
    );
    if !stdout.is_empty() {
        tracing::debug!(target: "skillhost::guest", skill = label, tool, stream = "stdout", "{stdout}");
    }
    if !stderr.is_empty() {
        tracing::debug!(target: "skillhost::guest", skill = label, tool, stream = "stderr", "{stderr}");
    }
    (stdout, stderr)
}

/// The error of a call that ran past its deadline.
pub(super) fn timed_out(
    label: &str,
    tool: &str,
    store: &Store<CallState>,
    start: Instant,
) -> CallError {
    let (_, stderr) = take_stdio(label, tool, store);
    CallError {
        stderr: escape_control(&stderr, ERROR_STDERR_BYTES, true),
        ..CallError::new(
            label,
            tool,
            CallFailure::Trapped {
                reason: TrapReason::Deadline,
                detail: format!(
                    "timed out after {} ms (deadline of {} ms)",
                    start.elapsed().as_millis(),
                    store.data().limits.timeout.as_millis()
                ),
            },
        )
    }
}

/// Turns a wasmtime error into one typed outcome.
pub(super) fn classify(
    label: &str,
    tool: &str,
    store: &mut Store<CallState>,
    e: wasmtime::Error,
) -> CallError {
    let (_, stderr) = take_stdio(label, tool, store);
    let state = store.data();
    let failure = if let Some(stop) = &state.ask_stop {
        CallFailure::Asked { stop: stop.clone() }
    } else if let Some(pool) = e.downcast_ref::<wasmtime::PoolConcurrencyLimitError>() {
        CallFailure::Busy {
            detail: format!("all instance slots are in use ({pool})"),
        }
    } else {
        let (reason, detail) = trap_of(&e, state, &stderr);
        CallFailure::Trapped { reason, detail }
    };
    CallError {
        stderr: escape_control(&stderr, ERROR_STDERR_BYTES, true),
        ..CallError::new(label, tool, failure)
    }
}

/// Why a store trapped. Flags the host set take precedence over what the
/// guest did afterwards (e.g. Rust aborting after a failed allocation).
fn trap_of(e: &wasmtime::Error, state: &CallState, stderr: &str) -> (TrapReason, String) {
    if let Some(t) = e.downcast_ref::<HostTrap>() {
        return (t.reason, t.detail.clone());
    }
    if state.limiter.memory_denied.is_some() {
        return (
            TrapReason::Memory,
            format!(
                "memory cap of {} MiB reached",
                state.limits.memory_bytes >> 20
            ),
        );
    }
    if let Some(t) = &state.host_trap {
        return (t.reason, t.detail.clone());
    }
    for (stream, name) in [(&state.stdout, "stdout"), (&state.stderr, "stderr")] {
        if stream.lock().exceeded {
            return (
                TrapReason::OutputTooLarge,
                format!(
                    "{name} exceeded its cap of {} bytes",
                    state.limits.max_stdio_bytes
                ),
            );
        }
    }
    if let Some(exit) = e.downcast_ref::<wasmtime_wasi::I32Exit>() {
        return (
            TrapReason::Other,
            format!("the component called exit({})", exit.0),
        );
    }
    match e.downcast_ref::<Trap>() {
        Some(Trap::OutOfFuel) => (
            TrapReason::Fuel,
            format!("all fuel consumed (budget of {} units)", state.limits.fuel),
        ),
        Some(Trap::StackOverflow) => (TrapReason::Stack, "WebAssembly stack overflow".into()),
        Some(Trap::Interrupt) => (TrapReason::Deadline, "interrupted at the deadline".into()),
        Some(Trap::UnreachableCodeReached) => match panic_message(stderr) {
            Some(m) => (TrapReason::Panic, m),
            None if stderr.contains("memory allocation of") => (
                TrapReason::Memory,
                "the component aborted after an allocation failed".into(),
            ),
            None => (
                TrapReason::Panic,
                "the component aborted (wasm `unreachable` executed)".into(),
            ),
        },
        Some(other) => (TrapReason::Other, format!("trap: {other}")),
        None => {
            let chain = error_chain(e);
            if chain.contains("exceeds memory limits") || chain.contains("memory minimum size") {
                (TrapReason::Memory, chain)
            } else {
                (TrapReason::Other, chain)
            }
        }
    }
}

/// The panic line of a Rust guest's stderr, if it panicked.
fn panic_message(stderr: &str) -> Option<String> {
    let start = stderr.find("panicked at")?;
    let tail: String = stderr[start..]
        .lines()
        .take(2)
        .collect::<Vec<_>>()
        .join(" ");
    Some(escape_control(&tail, 512, false))
}

/// An error and its causes on one line, without backtraces.
fn error_chain(e: &wasmtime::Error) -> String {
    let mut s = e.to_string();
    for cause in e.chain().skip(1) {
        s.push_str(": ");
        s.push_str(&cause.to_string());
    }
    escape_control(&s, 1024, false)
}

impl MakesSpares for SkillComponent {
    type Instance = Skill;

    fn spares(&self) -> &Arc<Spares<Skill>> {
        &self.inner.spares
    }

    fn sandbox(&self) -> &SandboxInner {
        &self.inner.sandbox
    }

    fn make(&self, limits: Limits, held: Held) -> impl Future<Output = Making<Skill>> + Send {
        self.make_spare(limits, held)
    }
}

#[allow(dead_code)]
fn _assert_send(c: SkillComponent, o: CallOptions) {
    fn is_send<T: Send>(_: T) {}
    is_send(async move { c.call("t", "{}", &o).await });
    let _ = Duration::ZERO;
}
