//! Call overhead of the sandbox: `cargo bench -p skillhost --bench sandbox`.
//!
//! Prints one `name: value` per line (times in microseconds unless the name
//! says otherwise):
//!
//! - `fresh_instance_call_*`: [`SkillComponent::call`] of `text.word_count`,
//!   a fresh store and instance per call, on a current-thread runtime, calls
//!   back to back (each one's time includes the previous one's teardown);
//! - `fresh_instance_answer_*`: the same with the scheduler let run between
//!   calls, untimed, as `serve --stdio` does while it reads the next request:
//!   the time until the answer, the teardown after it;
//! - `reused_instance_call_p50_us`: the same call repeated on one instance in
//!   one store. The host has no such API, so the bench builds a replica of
//!   the host's engine, linker and store setup with wasmtime directly;
//! - `native_call_p50_us`: the same work in native Rust (parse the arguments,
//!   count, serialize the result);
//! - `calls_per_sec_2_threads`: fresh-instance calls on a 2-worker runtime;
//! - `first_compile_ms`, `cached_load_ms`: `Sandbox::load` without and with
//!   the compiled-code cache;
//! - `breakdown_*`: where a fresh call's time goes, measured on the replica;
//! - `variant_*`: the replica's fresh-call p50 with one engine or store
//!   setting changed, to show what each costs;
//! - `pagemap_*`: the replica with `PoolingAllocationConfig::pagemap_scan`
//!   enabled (when the kernel supports it): breakdown and throughput;
//! - `reset_scan_*`: what the reset of a finished instance costs without
//!   the pagemap scan (the host's default until wasmtime 48.0.11, see
//!   `SandboxBuilder::pagemap_scan`) against with it: fresh-call p50
//!   through the public API, two sandboxes in alternating blocks, teardown
//!   included, and their ratio.

mod report;
use report::line;

use std::collections::HashMap;
use std::future::Future;
use std::hash::{Hash, Hasher};
use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use skillhost::{CallOptions, SandboxBuilder, SkillComponent};
use wasmtime::component::{Component, HasSelf, Linker, ResourceTable};
use wasmtime::{
    Config, Enabled, Engine, InstanceAllocationStrategy, OptLevel, PoolingAllocationConfig, Store,
    UpdateDeadline,
};
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

const TOOL: &str = "text.word_count";
const ARGS: &str = r#"{"text":"the quick brown fox"}"#;
const EXPECTED: &str = r#"{"words":4,"lines":1,"chars":19}"#;
const LABEL: &str = "text-tools@0.1.0";

const WARMUP: usize = 2_000;
const ITERATIONS: usize = 20_000;
const VARIANT_WARMUP: usize = 500;
const VARIANT_ITERATIONS: usize = 5_000;
const THROUGHPUT_TASKS: usize = 64;
const THROUGHPUT_DURATION: Duration = Duration::from_secs(2);
const COMPILE_RUNS: usize = 3;
const CACHED_RUNS: usize = 5;

/// Copies of the host's private sandbox constants (host/src/sandbox/mod.rs
/// and state.rs), so the replica engine is configured like the host's.
const MAX_INSTANCES: u32 = 256;
const MAX_WASM_STACK: usize = 512 << 10;
const EPOCH_TICK: Duration = Duration::from_millis(1);
const MAX_MEMORIES_PER_COMPONENT: u32 = 8;
const MAX_TABLES_PER_COMPONENT: u32 = 32;
const MAX_CORE_INSTANCES_PER_STORE: usize = 32;
const MAX_RESOURCE_HANDLES: usize = 4096;

fn main() -> anyhow::Result<()> {
    let wasm = skillhost::builtin_skills()
        .iter()
        .find(|b| b.name == "text-tools")
        .map(|b| b.component)
        .ok_or_else(|| anyhow::anyhow!("no built-in text-tools"))?;
    let sandbox = SandboxBuilder::new().build()?;
    let component = sandbox.load(LABEL, wasm)?;
    let current = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;

    // Fresh instance per call, through the public API.
    let fresh = current.block_on(fresh_public(&component, Teardown::Timed))?;
    let fresh_p50 = percentile(&fresh, 50.0);
    line("fresh_instance_call_p50_us", us(fresh_p50));
    line("fresh_instance_call_p99_us", us(percentile(&fresh, 99.0)));
    // The same calls with the scheduler let run between them, untimed, as
    // `serve --stdio` does while it waits for the next request: the
    // teardown happens there, after the answer.
    let answered = current.block_on(fresh_public(&component, Teardown::BetweenCalls))?;
    line(
        "fresh_instance_answer_p50_us",
        us(percentile(&answered, 50.0)),
    );
    line(
        "fresh_instance_answer_p99_us",
        us(percentile(&answered, 99.0)),
    );

    // One instance, many calls, on a replica of the host's engine.
    let mut compiled = CompiledCache::default();
    let host_like = Replica::new(EngineOpts::HOST, &mut compiled, wasm)?;
    let reused = current.block_on(host_like.reused_calls(WARMUP, ITERATIONS))?;
    let reused_p50 = percentile(&reused, 50.0);
    line("reused_instance_call_p50_us", us(reused_p50));

    let native = native_calls(WARMUP * 10, ITERATIONS * 10);
    let native_p50 = percentile(&native, 50.0);
    line("native_call_p50_us", us(native_p50));

    // The reset without the pagemap scan (the default) against with it.
    if PoolingAllocationConfig::is_pagemap_scan_available() {
        let scanning = SandboxBuilder::new().pagemap_scan(true).build()?;
        let scanned = scanning.load(LABEL, wasm)?;
        let (off, on) = current.block_on(alternating(&component, &scanned))?;
        let (off, on) = (percentile(&off, 50.0), percentile(&on, 50.0));
        line("reset_scan_off_fresh_call_p50_us", us(off));
        line("reset_scan_on_fresh_call_p50_us", us(on));
        line("reset_scan_off_vs_on_x", ratio(off, on));
    } else {
        line(
            "reset_scan_on_fresh_call_p50_us",
            "unavailable (no pagemap scan in this kernel)",
        );
    }

    let cps = throughput(&component)?;
    line("calls_per_sec_2_threads", format!("{cps:.0}"));

    let (compile, cached) = cache_loads(wasm)?;
    line("first_compile_ms", ms(compile));
    line("cached_load_ms", ms(cached));
    line("cache_speedup_x", ratio(compile, cached));
    line("fresh_vs_native_ratio", ratio(fresh_p50, native_p50));
    line("fresh_vs_reused_ratio", ratio(fresh_p50, reused_p50));

    // Where the time of a fresh call goes, on the replica.
    let phases = current.block_on(host_like.fresh_calls(WARMUP, ITERATIONS, true))?;
    let replica_total = breakdown("breakdown", &phases);
    let (public, replica) = current.block_on(interleaved(&component, &host_like))?;
    line(
        "breakdown_host_overhead_us",
        format!(
            "{:.2}",
            (percentile(&public, 50.0).as_secs_f64() - percentile(&replica, 50.0).as_secs_f64())
                * 1e6
        ),
    );
    line(
        "breakdown_wasi_ctx_build_only_us",
        us(percentile(&wasi_ctx_builds(ITERATIONS), 50.0)),
    );
    line(
        "breakdown_timeout_at_us",
        us(percentile(
            &current.block_on(timeout_at_overhead(ITERATIONS)),
            50.0,
        )),
    );
    line(
        "replica_calls_per_sec_2_threads",
        format!("{:.0}", replica_throughput(host_like)?),
    );

    // The replica's fresh-call p50 with one setting changed at a time.
    let pagemap = PoolingAllocationConfig::is_pagemap_scan_available();
    line("pagemap_scan_available", u8::from(pagemap));
    let h = EngineOpts::HOST;
    let with_pagemap = EngineOpts {
        pagemap_scan: true,
        memory_keep_resident: skillhost::PAGEMAP_MEMORY_KEEP_RESIDENT,
        table_keep_resident: skillhost::PAGEMAP_TABLE_KEEP_RESIDENT,
        ..h
    };
    let mut variants: Vec<(&str, EngineOpts)> = Vec::new();
    variants.push(("variant_host_config_us", h));
    if pagemap {
        variants.push(("variant_pagemap_scan_us", with_pagemap));
        variants.push((
            "variant_pagemap_scan_keep_resident_4m_us",
            EngineOpts {
                memory_keep_resident: 4 << 20,
                ..with_pagemap
            },
        ));
        variants.push((
            "variant_pagemap_scan_no_fuel_no_epoch_us",
            EngineOpts {
                fuel: false,
                epoch: false,
                ..with_pagemap
            },
        ));
    }
    // Without the scan (the host's reset): how much to keep resident.
    for (name, keep) in [
        ("variant_memory_keep_resident_0_us", 0),
        ("variant_memory_keep_resident_64k_us", 64 << 10),
        ("variant_memory_keep_resident_256k_us", 256 << 10),
        ("variant_memory_keep_resident_1m_us", 1 << 20),
        ("variant_memory_keep_resident_4m_us", 4 << 20),
    ] {
        let opts = EngineOpts {
            memory_keep_resident: keep,
            ..h
        };
        variants.push((name, opts));
    }
    for (name, keep) in [
        ("variant_table_keep_resident_0_us", 0),
        ("variant_table_keep_resident_4k_us", 4 << 10),
        ("variant_table_keep_resident_64k_us", 64 << 10),
    ] {
        let opts = EngineOpts {
            table_keep_resident: keep,
            ..h
        };
        variants.push((name, opts));
    }
    variants.push((
        "variant_no_memory_init_cow_us",
        EngineOpts {
            memory_init_cow: false,
            ..h
        },
    ));
    variants.push((
        "variant_on_demand_allocator_us",
        EngineOpts {
            pooling: false,
            ..h
        },
    ));
    variants.push(("variant_no_fuel_us", EngineOpts { fuel: false, ..h }));
    variants.push(("variant_no_epoch_us", EngineOpts { epoch: false, ..h }));
    for (name, opts) in variants {
        let replica = Replica::new(opts, &mut compiled, wasm)?;
        let phases =
            current.block_on(replica.fresh_calls(VARIANT_WARMUP, VARIANT_ITERATIONS, true))?;
        let total: Vec<Duration> = phases.iter().map(|ph| ph.iter().sum()).collect();
        line(name, us(percentile(&total, 50.0)));
    }

    // The most promising change in full: pagemap scanning.
    if pagemap {
        let replica = Replica::new(with_pagemap, &mut compiled, wasm)?;
        let phases = current.block_on(replica.fresh_calls(WARMUP, ITERATIONS, true))?;
        let total = breakdown("pagemap_breakdown", &phases);
        line(
            "pagemap_fresh_call_p99_us",
            us(percentile(
                &phases.iter().map(|ph| ph.iter().sum()).collect::<Vec<_>>(),
                99.0,
            )),
        );
        line("pagemap_vs_host_config_x", ratio(replica_total, total));
        line(
            "pagemap_calls_per_sec_2_threads",
            format!("{:.0}", replica_throughput(replica)?),
        );
    }
    Ok(())
}

/// Prints the median of each phase of `phases` and of their total; returns
/// the total.
fn breakdown(prefix: &str, phases: &[Phases]) -> Duration {
    let names = [
        "wasi_ctx_and_state",
        "store_new",
        "instantiate",
        "call_only",
        "store_drop",
    ];
    for (i, name) in names.iter().enumerate() {
        let samples: Vec<Duration> = phases.iter().map(|ph| ph[i]).collect();
        line(
            &format!("{prefix}_{name}_us"),
            us(percentile(&samples, 50.0)),
        );
    }
    let before_drop: Vec<Duration> = phases.iter().map(|ph| ph[..4].iter().sum()).collect();
    line(
        &format!("{prefix}_before_drop_p50_us"),
        us(percentile(&before_drop, 50.0)),
    );
    let total: Vec<Duration> = phases.iter().map(|ph| ph.iter().sum()).collect();
    let p50 = percentile(&total, 50.0);
    line(&format!("{prefix}_replica_total_p50_us"), us(p50));
    p50
}

fn us(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1e6)
}

fn ms(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1e3)
}

fn ratio(a: Duration, b: Duration) -> String {
    format!("{:.1}", a.as_secs_f64() / b.as_secs_f64())
}

/// The `p`th percentile (nearest rank) of `samples`.
fn percentile(samples: &[Duration], p: f64) -> Duration {
    let mut sorted = samples.to_vec();
    sorted.sort_unstable();
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Where a fresh call's teardown lands in [`fresh_public`].
#[derive(Clone, Copy, PartialEq)]
enum Teardown {
    /// Calls follow each other without letting the scheduler run, so each
    /// call's end also drops the previous call's store: inside the time.
    Timed,
    /// The scheduler runs between calls, untimed: the store is dropped
    /// there (the time until the answer).
    BetweenCalls,
}

async fn fresh_public(
    component: &SkillComponent,
    teardown: Teardown,
) -> anyhow::Result<Vec<Duration>> {
    let opts = CallOptions::default();
    let expected: serde_json::Value = serde_json::from_str(EXPECTED)?;
    let out = component.call(TOOL, ARGS, &opts).await?;
    anyhow::ensure!(out.output == expected, "unexpected output {}", out.output);
    for _ in 0..WARMUP {
        black_box(component.call(TOOL, ARGS, &opts).await?);
    }
    let mut samples = Vec::with_capacity(ITERATIONS);
    for _ in 0..ITERATIONS {
        let start = Instant::now();
        let out = component
            .call(black_box(TOOL), black_box(ARGS), &opts)
            .await;
        samples.push(start.elapsed());
        black_box(out?);
        if teardown == Teardown::BetweenCalls {
            // The teardown task yields once itself before it drops.
            for _ in 0..4 {
                tokio::task::yield_now().await;
            }
        }
    }
    Ok(samples)
}

/// Public fresh calls and replica fresh calls in alternating blocks, so
/// the difference (the host's own per-call work) is not skewed by drift in
/// machine load.
async fn interleaved(
    component: &SkillComponent,
    replica: &Replica,
) -> anyhow::Result<(Vec<Duration>, Vec<Duration>)> {
    const BLOCK: usize = 1_000;
    let opts = CallOptions::default();
    let (mut public, mut own) = (Vec::new(), Vec::new());
    for _ in 0..ITERATIONS / BLOCK {
        for _ in 0..BLOCK {
            let start = Instant::now();
            let out = component.call(TOOL, ARGS, &opts).await;
            public.push(start.elapsed());
            black_box(out?);
        }
        for _ in 0..BLOCK {
            let start = Instant::now();
            let out = replica.fresh_call().await;
            own.push(start.elapsed());
            black_box(out?);
        }
    }
    Ok((public, own))
}

/// Fresh calls, teardown included, of `a` and `b` (the same component in
/// two sandboxes) in alternating blocks, so drift in machine load falls on
/// both alike.
async fn alternating(
    a: &SkillComponent,
    b: &SkillComponent,
) -> anyhow::Result<(Vec<Duration>, Vec<Duration>)> {
    const BLOCK: usize = 1_000;
    let opts = CallOptions::default();
    let (mut left, mut right) = (Vec::new(), Vec::new());
    for c in [a, b] {
        for _ in 0..WARMUP {
            black_box(c.call(TOOL, ARGS, &opts).await?);
        }
    }
    for _ in 0..ITERATIONS / BLOCK {
        for (c, samples) in [(a, &mut left), (b, &mut right)] {
            for _ in 0..BLOCK {
                let start = Instant::now();
                let out = c.call(black_box(TOOL), black_box(ARGS), &opts).await;
                samples.push(start.elapsed());
                black_box(out?);
            }
        }
    }
    Ok((left, right))
}

/// Fresh-instance calls per second through the public API.
fn throughput(component: &SkillComponent) -> anyhow::Result<f64> {
    let component = component.clone();
    calls_per_sec_2_threads(move || {
        let c = component.clone();
        async move {
            black_box(c.call(TOOL, ARGS, &CallOptions::default()).await?);
            Ok(())
        }
    })
}

/// Fresh-instance calls per second on the replica.
fn replica_throughput(replica: Replica) -> anyhow::Result<f64> {
    let replica = Arc::new(replica);
    calls_per_sec_2_threads(move || {
        let r = replica.clone();
        async move {
            black_box(r.fresh_call().await?);
            Ok(())
        }
    })
}

/// Calls per second of `call`: `THROUGHPUT_TASKS` tasks calling it in a
/// loop on a 2-worker runtime for `THROUGHPUT_DURATION`.
fn calls_per_sec_2_threads<F, Fut>(call: F) -> anyhow::Result<f64>
where
    F: Fn() -> Fut + Clone + Send + 'static,
    Fut: Future<Output = anyhow::Result<()>> + Send + 'static,
{
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(async {
        let run = |duration: Duration| {
            let call = call.clone();
            async move {
                let end = Instant::now() + duration;
                let tasks: Vec<_> = (0..THROUGHPUT_TASKS)
                    .map(|_| {
                        let call = call.clone();
                        tokio::spawn(async move {
                            let mut n = 0u64;
                            while Instant::now() < end {
                                call().await?;
                                n += 1;
                            }
                            anyhow::Ok(n)
                        })
                    })
                    .collect();
                let mut total = 0;
                for t in tasks {
                    total += t.await??;
                }
                anyhow::Ok(total)
            }
        };
        run(Duration::from_millis(200)).await?;
        let start = Instant::now();
        let calls = run(THROUGHPUT_DURATION).await?;
        Ok(calls as f64 / start.elapsed().as_secs_f64())
    })
}

/// Median `Sandbox::load` time without a cache (compile and write the
/// cache, fresh folder each run) and from the cache (a new sandbox on a
/// folder already holding the artifact).
fn cache_loads(wasm: &[u8]) -> anyhow::Result<(Duration, Duration)> {
    let mut compile = Vec::new();
    let mut cached = Vec::new();
    let mut last_dir = None;
    for _ in 0..COMPILE_RUNS {
        let dir = tempfile::tempdir()?;
        let sandbox = SandboxBuilder::new().cache_dir(dir.path()).build()?;
        let start = Instant::now();
        let c = sandbox.load(LABEL, wasm)?;
        compile.push(start.elapsed());
        anyhow::ensure!(
            !c.loaded_from_cache(),
            "a fresh cache folder had the component"
        );
        last_dir = Some(dir);
    }
    let dir = last_dir.expect("COMPILE_RUNS > 0");
    for _ in 0..CACHED_RUNS {
        let sandbox = SandboxBuilder::new().cache_dir(dir.path()).build()?;
        let start = Instant::now();
        let c = sandbox.load(LABEL, wasm)?;
        cached.push(start.elapsed());
        anyhow::ensure!(
            c.loaded_from_cache(),
            "the second load did not use the cache"
        );
    }
    Ok((percentile(&compile, 50.0), percentile(&cached, 50.0)))
}

// ---------------------------------------------------------------------------
// Native baseline: the text-tools algorithm in plain Rust.

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WordCountArgs {
    text: String,
}

#[derive(Serialize)]
struct WordCount {
    words: u64,
    lines: u64,
    chars: u64,
}

fn native_word_count(arguments_json: &str) -> String {
    let args: WordCountArgs = serde_json::from_str(arguments_json).expect("valid arguments");
    let out = WordCount {
        words: args.text.split_whitespace().count() as u64,
        lines: args.text.lines().count() as u64,
        chars: args.text.chars().count() as u64,
    };
    serde_json::to_string(&out).expect("serializable")
}

fn native_calls(warmup: usize, iterations: usize) -> Vec<Duration> {
    assert_eq!(native_word_count(ARGS), EXPECTED);
    for _ in 0..warmup {
        black_box(native_word_count(black_box(ARGS)));
    }
    let mut samples = Vec::with_capacity(iterations);
    for _ in 0..iterations {
        let start = Instant::now();
        let out = native_word_count(black_box(ARGS));
        samples.push(start.elapsed());
        black_box(out);
    }
    samples
}

// ---------------------------------------------------------------------------
// Replica of the host's sandbox, built on wasmtime directly.

mod replica {
    wasmtime::component::bindgen!({
        world: "skill",
        path: "../wit",
        exports: { default: async },
        imports: { default: trappable },
    });
}

use replica::skillhost::plugin::types::{LogLevel, ToolError};

/// Engine settings; [`EngineOpts::HOST`] is what `SandboxBuilder::build`
/// uses with its defaults.
#[derive(Clone, Copy)]
struct EngineOpts {
    fuel: bool,
    epoch: bool,
    pooling: bool,
    memory_keep_resident: usize,
    table_keep_resident: usize,
    memory_init_cow: bool,
    pagemap_scan: bool,
}

impl EngineOpts {
    const HOST: EngineOpts = EngineOpts {
        fuel: true,
        epoch: true,
        pooling: true,
        memory_keep_resident: skillhost::MEMORY_KEEP_RESIDENT,
        table_keep_resident: skillhost::TABLE_KEEP_RESIDENT,
        memory_init_cow: true,
        pagemap_scan: false,
    };

    fn engine(&self) -> anyhow::Result<Engine> {
        let n = MAX_INSTANCES;
        let mut config = Config::new();
        config
            .wasm_component_model(true)
            .consume_fuel(self.fuel)
            .epoch_interruption(self.epoch)
            .max_wasm_stack(MAX_WASM_STACK)
            .async_stack_size(MAX_WASM_STACK + (1 << 20))
            .cranelift_opt_level(OptLevel::Speed)
            .memory_init_cow(self.memory_init_cow);
        if self.pooling {
            let max_memory = skillhost::LimitsPolicy::default().max_memory_bytes;
            let mut pool = PoolingAllocationConfig::new();
            pool.total_component_instances(n)
                .total_core_instances(n * 8)
                .total_memories(n * 2)
                .total_tables(n * 4)
                .total_stacks(n)
                .max_memory_size(usize::try_from(max_memory)?)
                .max_memories_per_component(MAX_MEMORIES_PER_COMPONENT)
                .max_tables_per_component(MAX_TABLES_PER_COMPONENT)
                .linear_memory_keep_resident(self.memory_keep_resident)
                .table_keep_resident(self.table_keep_resident)
                .pagemap_scan(if self.pagemap_scan {
                    Enabled::Yes
                } else {
                    Enabled::No
                });
            config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        }
        Ok(Engine::new(&config)?)
    }
}

/// Compiled artifacts by engine compatibility hash, so variants that do
/// not change code generation skip compiling.
#[derive(Default)]
struct CompiledCache(HashMap<u64, Vec<u8>>);

impl CompiledCache {
    fn component(&mut self, engine: &Engine, wasm: &[u8]) -> anyhow::Result<Component> {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut h);
        let key = h.finish();
        if let Some(bytes) = self.0.get(&key) {
            // SAFETY: serialized by `Component::serialize` in this process.
            return Ok(unsafe { Component::deserialize(engine, bytes)? });
        }
        let c = Component::new(engine, wasm)?;
        self.0.insert(key, c.serialize()?);
        Ok(c)
    }
}

struct Limiter;

impl wasmtime::ResourceLimiter for Limiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _max: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired as u64 <= skillhost::DEFAULT_MEMORY_BYTES)
    }
    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _max: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= 100_000)
    }
    fn instances(&self) -> usize {
        MAX_CORE_INSTANCES_PER_STORE
    }
    fn tables(&self) -> usize {
        MAX_TABLES_PER_COMPONENT as usize
    }
    fn memories(&self) -> usize {
        MAX_MEMORIES_PER_COMPONENT as usize
    }
}

/// Store state like the host's `CallState`: WASI context with captured
/// stdout/stderr, a capped resource table, a limiter and a deadline.
struct State {
    wasi: WasiCtx,
    table: ResourceTable,
    limiter: Limiter,
    _stdout: MemoryOutputPipe,
    _stderr: MemoryOutputPipe,
    deadline: Instant,
}

impl State {
    fn new(deadline: Instant) -> State {
        let stdout = MemoryOutputPipe::new(1 << 20);
        let stderr = MemoryOutputPipe::new(1 << 20);
        let mut builder = WasiCtx::builder();
        builder
            .stdout(stdout.clone())
            .stderr(stderr.clone())
            .allow_blocking_current_thread(false);
        let wasi = builder.build();
        let mut table = ResourceTable::new();
        table.set_max_capacity(MAX_RESOURCE_HANDLES);
        State {
            wasi,
            table,
            limiter: Limiter,
            _stdout: stdout,
            _stderr: stderr,
            deadline,
        }
    }
}

impl WasiView for State {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl wasmtime_wasi_io::IoView for State {
    fn table(&mut self) -> &mut ResourceTable {
        &mut self.table
    }
}

impl replica::skillhost::plugin::types::Host for State {}

impl replica::skillhost::plugin::host::Host for State {
    fn log(&mut self, _level: LogLevel, _message: String) -> wasmtime::Result<()> {
        Ok(())
    }
    fn invoke(
        &mut self,
        tool: String,
        _arguments_json: String,
    ) -> wasmtime::Result<Result<String, ToolError>> {
        Ok(Err(ToolError::Denied(tool)))
    }
    fn config(&mut self, _key: String) -> wasmtime::Result<Option<String>> {
        Ok(None)
    }
    fn read_ref(
        &mut self,
        reference: String,
        _offset: u64,
        _len: u32,
    ) -> wasmtime::Result<Result<Vec<u8>, ToolError>> {
        Ok(Err(ToolError::Denied(reference)))
    }
    fn progress(
        &mut self,
        _progress: f64,
        _total: Option<f64>,
        _message: Option<String>,
    ) -> wasmtime::Result<()> {
        Ok(())
    }
    fn elicit(
        &mut self,
        _message: String,
        _schema_json: String,
    ) -> wasmtime::Result<Result<replica::skillhost::plugin::host::ElicitAnswer, ToolError>> {
        Ok(Err(ToolError::Denied("no user".into())))
    }
    fn ask(
        &mut self,
        _requests: Vec<replica::skillhost::plugin::host::InputRequest>,
    ) -> wasmtime::Result<Result<Vec<replica::skillhost::plugin::host::InputAnswer>, ToolError>>
    {
        Ok(Err(ToolError::Denied("no client".into())))
    }
}

/// The WASI subset the host links (see `add_wasi_subset` in the host).
fn add_wasi_subset(l: &mut Linker<State>) -> wasmtime::Result<()> {
    use wasmtime_wasi::cli::{WasiCli, WasiCliView};
    use wasmtime_wasi::clocks::{WasiClocks, WasiClocksView};
    use wasmtime_wasi::p2::bindings::{cli, clocks, random};
    use wasmtime_wasi::random::WasiRandom;

    wasmtime_wasi_io::add_to_linker_async(l)?;
    clocks::wall_clock::add_to_linker::<State, WasiClocks>(l, State::clocks)?;
    clocks::monotonic_clock::add_to_linker::<State, WasiClocks>(l, State::clocks)?;
    random::random::add_to_linker::<State, WasiRandom>(l, |t| t.ctx().ctx.random())?;
    random::insecure::add_to_linker::<State, WasiRandom>(l, |t| t.ctx().ctx.random())?;
    random::insecure_seed::add_to_linker::<State, WasiRandom>(l, |t| t.ctx().ctx.random())?;
    cli::exit::add_to_linker::<State, WasiCli>(l, State::cli)?;
    cli::environment::add_to_linker::<State, WasiCli>(l, State::cli)?;
    cli::stdin::add_to_linker::<State, WasiCli>(l, State::cli)?;
    cli::stdout::add_to_linker::<State, WasiCli>(l, State::cli)?;
    cli::stderr::add_to_linker::<State, WasiCli>(l, State::cli)?;
    cli::terminal_input::add_to_linker::<State, WasiCli>(l, State::cli)?;
    cli::terminal_output::add_to_linker::<State, WasiCli>(l, State::cli)?;
    cli::terminal_stdin::add_to_linker::<State, WasiCli>(l, State::cli)?;
    cli::terminal_stdout::add_to_linker::<State, WasiCli>(l, State::cli)?;
    cli::terminal_stderr::add_to_linker::<State, WasiCli>(l, State::cli)?;
    Ok(())
}

/// Advances an engine's epoch every [`EPOCH_TICK`], like the host's ticker.
struct Ticker {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Ticker {
    fn start(engine: &Engine) -> Ticker {
        let stop = Arc::new(AtomicBool::new(false));
        let (flag, engine) = (stop.clone(), engine.clone());
        let thread = std::thread::spawn(move || {
            while !flag.load(Ordering::Relaxed) {
                std::thread::sleep(EPOCH_TICK);
                engine.increment_epoch();
            }
        });
        Ticker {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Durations of one fresh call's phases: state (WASI context) creation,
/// store creation and setup, instantiation, the call, dropping the store.
type Phases = [Duration; 5];

struct Replica {
    engine: Engine,
    opts: EngineOpts,
    pre: replica::SkillPre<State>,
    _ticker: Option<Ticker>,
}

impl Replica {
    fn new(opts: EngineOpts, compiled: &mut CompiledCache, wasm: &[u8]) -> anyhow::Result<Replica> {
        let engine = opts.engine()?;
        let component = compiled.component(&engine, wasm)?;
        let mut linker = Linker::new(&engine);
        add_wasi_subset(&mut linker)?;
        replica::Skill::add_to_linker::<_, HasSelf<State>>(&mut linker, |s| s)?;
        let pre = replica::SkillPre::new(linker.instantiate_pre(&component)?)?;
        let ticker = opts.epoch.then(|| Ticker::start(&engine));
        Ok(Replica {
            engine,
            opts,
            pre,
            _ticker: ticker,
        })
    }

    /// A store set up like the host's `SkillComponent::new_store`.
    fn new_store(&self, state: State) -> Store<State> {
        let mut store = Store::new(&self.engine, state);
        store.limiter(|s| &mut s.limiter);
        if self.opts.fuel {
            store
                .set_fuel(skillhost::DEFAULT_FUEL)
                .expect("fuel is enabled");
        }
        if self.opts.epoch {
            store.set_epoch_deadline(1);
            store.epoch_deadline_callback(|ctx| {
                if Instant::now() >= ctx.data().deadline {
                    Err(wasmtime::format_err!("deadline passed"))
                } else {
                    Ok(UpdateDeadline::Yield(1))
                }
            });
        }
        store
    }

    /// One fresh call like `SkillComponent::call`, timing each phase;
    /// returns the phases and the tool's output.
    async fn fresh_call(&self) -> anyhow::Result<(Phases, String)> {
        let t0 = Instant::now();
        let state = State::new(t0 + skillhost::DEFAULT_TIMEOUT);
        let t1 = Instant::now();
        let mut store = self.new_store(state);
        let t2 = Instant::now();
        let skill = self.pre.instantiate_async(&mut store).await?;
        let t3 = Instant::now();
        let out = skill
            .skillhost_plugin_tools()
            .call_call(&mut store, black_box(TOOL), black_box(ARGS))
            .await?;
        let t4 = Instant::now();
        drop(store);
        let t5 = Instant::now();
        let out = out.map_err(|e| anyhow::anyhow!("tool error: {e:?}"))?;
        Ok(([t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4], out))
    }

    /// `iterations` fresh calls after `warmup` ones, timing each phase.
    async fn fresh_calls(
        &self,
        warmup: usize,
        iterations: usize,
        check: bool,
    ) -> anyhow::Result<Vec<Phases>> {
        let mut samples = Vec::with_capacity(iterations);
        for i in 0..warmup + iterations {
            let (phases, out) = self.fresh_call().await?;
            if check && i == 0 {
                anyhow::ensure!(out == EXPECTED, "unexpected output {out}");
            }
            black_box(out);
            if i >= warmup {
                samples.push(phases);
            }
        }
        Ok(samples)
    }

    /// `iterations` calls on one instance in one store.
    async fn reused_calls(
        &self,
        warmup: usize,
        iterations: usize,
    ) -> anyhow::Result<Vec<Duration>> {
        let mut store = self.new_store(State::new(Instant::now() + Duration::from_secs(3600)));
        let skill = self.pre.instantiate_async(&mut store).await?;
        let tools = skill.skillhost_plugin_tools();
        let mut samples = Vec::with_capacity(iterations);
        for i in 0..warmup + iterations {
            if self.opts.fuel {
                store.set_fuel(skillhost::DEFAULT_FUEL)?;
            }
            let start = Instant::now();
            let out = tools
                .call_call(&mut store, black_box(TOOL), black_box(ARGS))
                .await;
            let elapsed = start.elapsed();
            let out = out?.map_err(|e| anyhow::anyhow!("tool error: {e:?}"))?;
            if i == 0 {
                anyhow::ensure!(out == EXPECTED, "unexpected output {out}");
            }
            black_box(out);
            if i >= warmup {
                samples.push(elapsed);
            }
        }
        Ok(samples)
    }
}

/// Cost of building a WASI context like the host's, alone.
fn wasi_ctx_builds(iterations: usize) -> Vec<Duration> {
    let deadline = Instant::now() + Duration::from_secs(3600);
    (0..iterations + WARMUP)
        .map(|_| {
            let start = Instant::now();
            black_box(State::new(deadline));
            start.elapsed()
        })
        .skip(WARMUP)
        .collect()
}

/// Cost of the `tokio::time::timeout_at` wrapper the host puts around each
/// call, around an already-ready future.
async fn timeout_at_overhead(iterations: usize) -> Vec<Duration> {
    let mut samples = Vec::with_capacity(iterations);
    for i in 0..iterations + WARMUP {
        let start = Instant::now();
        let deadline = start + skillhost::DEFAULT_TIMEOUT;
        let r = tokio::time::timeout_at(deadline.into(), async { black_box(1) }).await;
        let elapsed = start.elapsed();
        black_box(r.ok());
        if i >= WARMUP {
            samples.push(elapsed);
        }
    }
    samples
}
