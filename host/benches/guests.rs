//! Fresh-instance calls of a Rust, a Python and a JavaScript guest, side by
//! side in one run: `cargo bench -p skillhost --bench guests`.
//!
//! Each call gets a fresh instance in a fresh store, as every host call
//! does. The guests are the examples of `plugins/` built by their own
//! toolchains (cargo, componentize-py, componentize-js):
//!
//! - `rust_*`: `text.word_count` of text-tools;
//! - `python_*`: `stats.describe` of py-stats (CPython, a pre-initialised
//!   heap of tens of MiB; the tool is warmed up at build time, the Python
//!   SDK's `warm_up`);
//! - `js_*`: `slug.make` of js-slug (StarlingMonkey);
//!
//! - `python_trivial_*`, `js_trivial_*`: a tool that only answers
//!   `{"ok": true}` (hostile-py's and hostile-js's `ok`), so what remains is
//!   the fresh instance and the SDK's dispatch;
//! - `python_trivial_warmed_*`: the same answer from a tool warmed up at
//!   build time (hostile-py's `warmed`): what the warm-up saves a call;
//!
//! - `python_trivial_big_args`: `ok` again, with 1 000 rows of arguments
//!   whose parsing allocates enough for CPython to collect in the call;
//!
//! each as `*_fresh_call_p50_us` and `*_p90_us`, with the ratio to the Rust
//! guest; then the same Python and JS calls with copy-on-write memory
//! images off (`*_copied_memory_p50_us`: the image copied into each
//! instance), which is what the images save; and `*_load_cached_ms`, a
//! load from the compiled-code cache.
//!
//! The fresh calls above make their instance in the call (spares off). A
//! host makes the next call's instance ahead of it for a guest whose
//! instantiation is slow (the sandbox's spare instances): `*_spare_call_p50_us`
//! and `*_spare_call_p90_us` time Python and JS calls that find one ready
//! (each call waits, untimed, until the spare its predecessor started is
//! made: calls spaced as an agent's are), with the ratio to the fresh call;
//! `n/a` for a guest that instantiates too quickly to get spares.
//!
//! `*_first_compile_ms` and `*_sibling_compile_ms`: what compiling a Python
//! (JS) component costs with an empty cache folder, and then what a second,
//! different component of the same language costs in that folder: its
//! whole-component cache misses, but the function cache holds the CPython
//! (StarlingMonkey) both carry, so only what differs is compiled;
//! `*_sibling_saves_x` is their ratio.
//!
//! `*_fresh_call_faults_p50` and `*_spare_call_faults_p50`: the page faults
//! of one call, median (`getrusage` of the calling thread): each page of the
//! copy-on-write memory image a call writes faults, and is copied, once in
//! every fresh instance.

mod report;
use report::{line, percentile, ratio};

use std::time::{Duration, Instant};

use skillhost::{CallOptions, SandboxBuilder, SkillComponent};
use skillhost_test_plugins as art;

const WARMUP: usize = 50;

struct Guest {
    name: &'static str,
    wasm: &'static str,
    tool: &'static str,
    /// The call's arguments (JSON).
    args: fn() -> String,
    iterations: usize,
}

const GUESTS: &[Guest] = &[
    Guest {
        name: "rust",
        wasm: art::TEXT_TOOLS_WASM_PATH,
        tool: "text.word_count",
        args: || r#"{"text":"the quick brown fox"}"#.into(),
        iterations: 20_000,
    },
    Guest {
        name: "python_trivial",
        wasm: art::HOSTILE_PY_WASM_PATH,
        tool: "hostile_py.ok",
        args: || "{}".into(),
        iterations: 2_000,
    },
    Guest {
        name: "python_trivial_warmed",
        wasm: art::HOSTILE_PY_WASM_PATH,
        tool: "hostile_py.warmed",
        args: || "{}".into(),
        iterations: 2_000,
    },
    Guest {
        name: "python_trivial_big_args",
        wasm: art::HOSTILE_PY_WASM_PATH,
        tool: "hostile_py.ok",
        args: big_args,
        iterations: 1_000,
    },
    Guest {
        name: "python",
        wasm: art::PY_STATS_WASM_PATH,
        tool: "stats.describe",
        args: || r#"{"numbers":[2,4,4,4,5,5,7,9]}"#.into(),
        iterations: 2_000,
    },
    Guest {
        name: "js_trivial",
        wasm: art::HOSTILE_JS_WASM_PATH,
        tool: "hostile_js.ok",
        args: || "{}".into(),
        iterations: 5_000,
    },
    Guest {
        name: "js",
        wasm: art::JS_SLUG_WASM_PATH,
        tool: "slug.make",
        args: || r#"{"text":"Hello, World! WebAssembly skills"}"#.into(),
        iterations: 5_000,
    },
];

/// `{"rows": [[0, [0]], [1, [1]], …]}`, 1 000 rows: parsing it allocates
/// 2 000 lists, enough for CPython to collect during the call.
fn big_args() -> String {
    let rows: Vec<String> = (0..1_000).map(|i| format!("[{i},[{i}]]")).collect();
    format!(r#"{{"rows":[{}]}}"#, rows.join(","))
}

/// Page faults of this thread so far (a page a call writes in the
/// copy-on-write heap faults once, in every fresh instance).
fn faults() -> i64 {
    // SAFETY: getrusage only writes the struct it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) } != 0 {
        return 0;
    }
    usage.ru_minflt + usage.ru_majflt
}

fn main() -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let cache = tempfile::tempdir()?;
    let images = SandboxBuilder::new()
        .cache_dir(cache.path())
        .spare_threshold(None)
        .build()?;
    let copied = SandboxBuilder::new()
        .cache_dir(cache.path())
        .memory_images(false)
        .spare_threshold(None)
        .build()?;
    let spared = SandboxBuilder::new().cache_dir(cache.path()).build()?;

    let mut rust_p50 = Duration::ZERO;
    for g in GUESTS {
        let wasm = art::read_component(g.wasm);
        let label = format!("{}@bench", g.name);
        // The first load compiles and fills the cache; the second is what
        // every later process pays.
        images.load(&label, &wasm)?;
        let started = Instant::now();
        let component = images.load(&label, &wasm)?;
        let load = started.elapsed();
        let (samples, faulted) = rt.block_on(fresh_calls(&component, g, g.iterations))?;
        let p50 = percentile(&samples, 0.50);
        if g.name == "rust" {
            rust_p50 = p50;
        }
        line(&format!("{}_fresh_call_p50_us", g.name), us(p50));
        line(
            &format!("{}_fresh_call_p90_us", g.name),
            us(percentile(&samples, 0.90)),
        );
        line(
            &format!("{}_fresh_call_faults_p50", g.name),
            percentile(&faulted, 0.50),
        );
        line(&format!("{}_vs_rust", g.name), ratio(p50, rust_p50));
        line(
            &format!("{}_load_cached_ms", g.name),
            format!("{:.1}", load.as_secs_f64() * 1e3),
        );
        if g.name != "rust" {
            let component = copied.load(&label, &wasm)?;
            let (samples, _) = rt.block_on(fresh_calls(&component, g, g.iterations / 4))?;
            let copied_p50 = percentile(&samples, 0.50);
            line(&format!("{}_copied_memory_p50_us", g.name), us(copied_p50));
            line(&format!("{}_images_save", g.name), ratio(copied_p50, p50));

            let component = spared.load(&label, &wasm)?;
            match rt.block_on(spare_calls(&component, g, g.iterations / 2))? {
                Some((samples, faulted)) => {
                    let spare_p50 = percentile(&samples, 0.50);
                    line(&format!("{}_spare_call_p50_us", g.name), us(spare_p50));
                    line(
                        &format!("{}_spare_call_p90_us", g.name),
                        us(percentile(&samples, 0.90)),
                    );
                    line(
                        &format!("{}_spare_call_faults_p50", g.name),
                        percentile(&faulted, 0.50),
                    );
                    line(&format!("{}_spare_vs_fresh", g.name), ratio(spare_p50, p50));
                }
                None => line(
                    &format!("{}_spare_call_p50_us", g.name),
                    "n/a (its instantiation is under the spare threshold: no spares)",
                ),
            }
        }
    }
    for (lang, first, sibling) in [
        ("python", art::PY_STATS_WASM_PATH, art::HOSTILE_PY_WASM_PATH),
        ("js", art::JS_SLUG_WASM_PATH, art::HOSTILE_JS_WASM_PATH),
    ] {
        let (first_ms, sibling_ms) = sibling_compiles(first, sibling)?;
        line(
            &format!("{lang}_first_compile_ms"),
            format!("{first_ms:.0}"),
        );
        line(
            &format!("{lang}_sibling_compile_ms"),
            format!("{sibling_ms:.0}"),
        );
        line(
            &format!("{lang}_sibling_saves_x"),
            format!("{:.1}", first_ms / sibling_ms),
        );
    }
    Ok(())
}

/// The load of `first` in an empty cache folder, then of `sibling` (another
/// component of the same language) in that folder, each by a new sandbox
/// as a new process would: milliseconds each.
fn sibling_compiles(first: &str, sibling: &str) -> anyhow::Result<(f64, f64)> {
    let cache = tempfile::tempdir()?;
    let mut took = Vec::new();
    for (label, path) in [("first@bench", first), ("sibling@bench", sibling)] {
        let wasm = art::read_component(path);
        let sandbox = SandboxBuilder::new().cache_dir(cache.path()).build()?;
        let started = Instant::now();
        let component = sandbox.load(label, &wasm)?;
        took.push(started.elapsed().as_secs_f64() * 1e3);
        anyhow::ensure!(!component.loaded_from_cache(), "{label} was cached");
    }
    Ok((took[0], took[1]))
}

/// Each call's time and page faults.
type Timed = (Vec<Duration>, Vec<i64>);

async fn fresh_calls(
    component: &SkillComponent,
    g: &Guest,
    iterations: usize,
) -> anyhow::Result<Timed> {
    let opts = CallOptions::default();
    let args = (g.args)();
    for _ in 0..WARMUP {
        component.call(g.tool, &args, &opts).await?;
    }
    let mut samples = Vec::with_capacity(iterations);
    let mut faulted = Vec::with_capacity(iterations);
    for _ in 0..iterations {
        let faults_before = faults();
        let started = Instant::now();
        let out = component.call(g.tool, &args, &opts).await?;
        samples.push(started.elapsed());
        faulted.push(faults() - faults_before);
        std::hint::black_box(out);
    }
    Ok((samples, faulted))
}

/// Calls that each find a spare instance ready: before each, the bench
/// waits (untimed) until the spare the previous call started is made.
/// `None` if the component gets no spares (its instantiation is quicker
/// than the sandbox's threshold).
async fn spare_calls(
    component: &SkillComponent,
    g: &Guest,
    iterations: usize,
) -> anyhow::Result<Option<Timed>> {
    let opts = CallOptions::default();
    let args = (g.args)();
    for _ in 0..WARMUP {
        component.call(g.tool, &args, &opts).await?;
    }
    let mut samples = Vec::with_capacity(iterations);
    let mut faulted = Vec::with_capacity(iterations);
    for _ in 0..iterations {
        let give_up = Instant::now() + Duration::from_millis(200);
        while !component.spare_ready() {
            if Instant::now() > give_up {
                return Ok(None);
            }
            tokio::task::yield_now().await;
        }
        let before = component.spares_used();
        let faults_before = faults();
        let started = Instant::now();
        let out = component.call(g.tool, &args, &opts).await?;
        samples.push(started.elapsed());
        faulted.push(faults() - faults_before);
        anyhow::ensure!(
            component.spares_used() == before + 1,
            "the call did not run in the spare"
        );
        std::hint::black_box(out);
    }
    Ok(Some((samples, faulted)))
}

fn us(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1e6)
}
