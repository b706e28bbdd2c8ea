//! Skill scripts in the built-in Python runtime against native `python3` on
//! the same machine, in the same run: `cargo bench -p skillhost --bench
//! scripts`.
//!
//! - `runtime_compile_s`: loading the runtime into a sandbox with an empty
//!   compiled-code cache (cranelift compiles it; the standard library is
//!   unpacked once per process, in the first load);
//!   `runtime_load_cached_ms`: a load from the cache, what every later
//!   process pays;
//! - for each script, `*_fresh_p50_ms`/`_p95_ms` (a fresh instance made in
//!   the call: a sandbox without spares, what a cold call costs past the
//!   load), `*_spare_p50_ms`/`_p95_ms` (the instance made ahead of the
//!   call, untimed, as a host does between an agent's calls),
//!   `*_native_p50_ms`/`_p95_ms` (`python3 script.py` as a process, the
//!   same script), and the ratios of fresh and spare to native; the
//!   native lines say `n/a` without a `python3`;
//! - `trivial`: `print("hi")`;
//! - `imports`: a script importing a dozen standard modules, half of them
//!   outside the runtime's warm set, and using each a little; its
//!   `*_imports_ms` is the time its imports took, measured by the script
//!   (the rest of a call is the instance, the runner and the script's own
//!   work), `*_fuel` the fuel of one call, and `*_faults_p50` the page
//!   faults of one spare call (each page of the runtime's copy-on-write
//!   memory image a call writes faults once, and is copied);
//! - `*_fresh_stages` and `*_spare_stages`: where a call's time goes
//!   (`skillhost::stages`: `store` the scratch folder, filesystem and
//!   store; `instantiate`; `guest` the runtime running the script;
//!   `output` its stdio and files taken out; `teardown` the instance's
//!   memory reset, after the answer), p50/p90/p99 in ns.
//!
//! `cargo bench -p skillhost --bench scripts -- trivial` runs the scripts
//! whose name holds `trivial` only.

mod report;
use report::{line, percentile, ratio};

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use skillhost::{
    CallOptions, LimitsPolicy, SandboxBuilder, ScriptRequest, ScriptRuntime, SkillFiles,
};

const TRIVIAL: &str = "print('hi')\n";

const IMPORTS: &str = r#"import time
started = time.perf_counter()
import argparse, csv, dataclasses, json, re, tempfile, zipfile, xml.dom.minidom
import decimal, difflib, email.message, fractions, html.parser, statistics, tomllib
imported = time.perf_counter()
import io
rows = io.StringIO()
csv.writer(rows).writerow(["a", 1])
doc = xml.dom.minidom.parseString("<a><b>x</b></a>")
m = email.message.EmailMessage()
m["Subject"] = "hi"
data = json.dumps({"mean": statistics.mean([1, 2, 3]), "d": str(decimal.Decimal("1.1") * 2),
                   "diff": list(difflib.ndiff(["a"], ["b"])), "t": tomllib.loads("x = 1"),
                   "f": str(fractions.Fraction(1, 3)), "s": m["Subject"], "r": rows.getvalue()})
print(f"imports_ms={(imported - started) * 1e3:.3f}")
print(len(data))
"#;

struct Script {
    name: &'static str,
    source: &'static str,
    iterations: usize,
}

const SCRIPTS: &[Script] = &[
    Script {
        name: "trivial",
        source: TRIVIAL,
        iterations: 300,
    },
    Script {
        name: "imports",
        source: IMPORTS,
        iterations: 100,
    },
];

fn main() -> anyhow::Result<()> {
    // SAFETY: set before any thread is started and before the stages are
    // first read.
    unsafe { std::env::set_var("SKILLHOST_STAGE_TIMES", "1") };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let cache = tempfile::tempdir()?;
    let skill = tempfile::tempdir()?;
    std::fs::create_dir_all(skill.path().join("scripts"))?;
    for s in SCRIPTS {
        std::fs::write(
            skill.path().join(format!("scripts/{}.py", s.name)),
            s.source,
        )?;
    }
    let files = SkillFiles::from_dir(skill.path())?;

    let fresh_sandbox = SandboxBuilder::new()
        .cache_dir(cache.path())
        .spare_threshold(None)
        .build()?;
    let started = Instant::now();
    let fresh = match fresh_sandbox.script_runtime() {
        Ok(rt) => rt,
        Err(e) => {
            println!("scripts: skipped ({e})");
            return Ok(());
        }
    };
    line(
        "runtime_compile_s",
        format!("{:.1}", started.elapsed().as_secs_f64()),
    );
    let spared_sandbox = SandboxBuilder::new().cache_dir(cache.path()).build()?;
    let started = Instant::now();
    let spared = spared_sandbox.script_runtime()?;
    line(
        "runtime_load_cached_ms",
        format!("{:.1}", started.elapsed().as_secs_f64() * 1e3),
    );
    anyhow::ensure!(spared.loaded_from_cache(), "the second load compiled again");

    let opts = CallOptions {
        limits: LimitsPolicy::default().script_limits(),
        ..Default::default()
    };
    let python = native_python();
    let only: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    for s in SCRIPTS {
        if !only.is_empty() && !only.iter().any(|o| s.name.contains(o.as_str())) {
            continue;
        }
        let script = format!("scripts/{}.py", s.name);
        skillhost::stages::reset();
        let fresh_c = rt.block_on(calls(&fresh, &files, &script, &opts, s.iterations, false))?;
        let (fresh_t, fuel, imports) = (&fresh_c.samples, fresh_c.fuel, fresh_c.imports_ms);
        let fresh_stages = skillhost::stages::report().unwrap_or_default();
        skillhost::stages::reset();
        let spare_c = rt.block_on(calls(&spared, &files, &script, &opts, s.iterations, true))?;
        let (spare_t, spare_imports) = (&spare_c.samples, spare_c.imports_ms);
        let spare_stages = skillhost::stages::report().unwrap_or_default();
        let native_t = match &python {
            Some(p) => Some(native(p, skill.path(), &script, s.iterations / 3)?),
            None => None,
        };
        let p50 = percentile(fresh_t, 0.50);
        let spare50 = percentile(spare_t, 0.50);
        line(&format!("{}_fresh_p50_ms", s.name), ms(p50));
        line(
            &format!("{}_fresh_p95_ms", s.name),
            ms(percentile(fresh_t, 0.95)),
        );
        line(&format!("{}_spare_p50_ms", s.name), ms(spare50));
        line(
            &format!("{}_spare_p95_ms", s.name),
            ms(percentile(spare_t, 0.95)),
        );
        line(&format!("{}_fuel", s.name), fuel);
        line(&format!("{}_faults_p50", s.name), spare_c.faults_p50);
        line(&format!("{}_fresh_stages", s.name), fresh_stages);
        line(&format!("{}_spare_stages", s.name), spare_stages);
        if let Some(i) = imports {
            line(&format!("{}_fresh_imports_ms", s.name), format!("{i:.2}"));
        }
        if let Some(i) = spare_imports {
            line(&format!("{}_spare_imports_ms", s.name), format!("{i:.2}"));
        }
        match native_t {
            Some(n) => {
                let n50 = percentile(&n, 0.50);
                line(&format!("{}_native_p50_ms", s.name), ms(n50));
                line(
                    &format!("{}_native_p95_ms", s.name),
                    ms(percentile(&n, 0.95)),
                );
                line(&format!("{}_fresh_vs_native", s.name), ratio(p50, n50));
                line(&format!("{}_spare_vs_native", s.name), ratio(spare50, n50));
            }
            None => line(
                &format!("{}_native_p50_ms", s.name),
                "n/a (no python3 on this machine)",
            ),
        }
    }
    Ok(())
}

/// Page faults of this thread so far.
fn faults() -> i64 {
    // SAFETY: getrusage only writes the struct it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) } != 0 {
        return 0;
    }
    usage.ru_minflt + usage.ru_majflt
}

/// Each call's time and page faults, one call's fuel, and the median
/// import time the script reported (`imports_ms=`), if it does.
async fn calls(
    rt: &ScriptRuntime,
    files: &Arc<SkillFiles>,
    script: &str,
    opts: &CallOptions,
    iterations: usize,
    spares: bool,
) -> anyhow::Result<Calls> {
    let request = || ScriptRequest {
        skill: files.clone(),
        script: script.into(),
        args: Vec::new(),
        stdin: Vec::new(),
        inputs: Vec::new(),
    };
    for _ in 0..5 {
        rt.run(request(), opts.clone()).await?;
    }
    let mut samples = Vec::with_capacity(iterations);
    let mut faulted = Vec::with_capacity(iterations);
    let mut imports = Vec::new();
    let mut fuel = 0;
    for _ in 0..iterations {
        if spares {
            let give_up = Instant::now() + Duration::from_secs(5);
            while !rt.spare_ready() {
                anyhow::ensure!(Instant::now() < give_up, "no spare was made");
                tokio::time::sleep(Duration::from_micros(200)).await;
            }
        }
        let before = rt.spares_used();
        let faults_before = faults();
        let started = Instant::now();
        let run = rt.run(request(), opts.clone()).await?;
        samples.push(started.elapsed());
        faulted.push(faults() - faults_before);
        anyhow::ensure!(run.exit_code == 0, "{script} failed: {}", run.stderr);
        anyhow::ensure!(
            !spares || rt.spares_used() == before + 1,
            "the call did not run in the spare"
        );
        fuel = run.fuel_consumed;
        if let Some(v) = run
            .stdout
            .lines()
            .find_map(|l| l.strip_prefix("imports_ms="))
            .and_then(|v| v.parse::<f64>().ok())
        {
            imports.push(v);
        }
    }
    imports.sort_by(f64::total_cmp);
    faulted.sort_unstable();
    Ok(Calls {
        samples,
        fuel,
        imports_ms: imports.get(imports.len() / 2).copied(),
        faults_p50: faulted.get(faulted.len() / 2).copied().unwrap_or_default(),
    })
}

/// What [`calls`] measured.
struct Calls {
    samples: Vec<Duration>,
    fuel: u64,
    imports_ms: Option<f64>,
    faults_p50: i64,
}

/// `python3`, if this machine has one.
fn native_python() -> Option<String> {
    let ok = std::process::Command::new("python3")
        .arg("-c")
        .arg("pass")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    ok.then(|| "python3".to_string())
}

/// `python3 script` from a fresh working folder, timed as a process.
fn native(
    python: &str,
    skill: &Path,
    script: &str,
    iterations: usize,
) -> anyhow::Result<Vec<Duration>> {
    let work = tempfile::tempdir()?;
    let path = skill.join(script);
    let mut samples = Vec::with_capacity(iterations);
    for i in 0..iterations + 3 {
        let started = Instant::now();
        let out = std::process::Command::new(python)
            .arg(&path)
            .current_dir(work.path())
            .env_clear()
            .output()?;
        let took = started.elapsed();
        anyhow::ensure!(out.status.success(), "native {script} failed");
        if i >= 3 {
            samples.push(took);
        }
    }
    Ok(samples)
}

fn ms(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1e3)
}
