//! Skill scripts through `skillhost serve --stdio`, driven by an MCP
//! client, against native `python3` running the same script on the same
//! input, in the same run: `cargo bench -p skillhost --bench
//! scripts_serve` (`SKILLHOST_BENCH_QUICK=1` for a short run; `-- NAME`
//! measures the cases whose name holds NAME).
//!
//! The cases: `trivial` (`print("hi")`, a skill of the bench's own whose
//! scripts are declared read-only), and the fixtures of
//! `plugins/script-skills/` on their real packages: `pdf_fields` (pdf-forms'
//! `extract_form_field_info.py` on pypdf, a three-field form in, a JSON file
//! out), `office_unpack` and `office_pack` (office-docs' `unpack.py` and
//! `pack.py` on defusedxml and zipfile, a small docx in and out; pack takes
//! the unpacked parts by the refs an unpack call made) and `validate`
//! (skill-validator's `quick_validate.py` on PyYAML). The fixtures are
//! packed with `--wheels` (the folder `SKILLHOST_BENCH_WHEELS` names, else
//! `target/peers/wheels` of `tests/peers/install.sh`), signed, installed
//! (which byte-compiles their scripts and packages), approved and granted
//! to persona `bench`, as an operator would; without the wheels only
//! `trivial` runs, with a line saying why. The inputs are made by the
//! bench. The fixtures' scripts write files, so each call is confirmed by
//! the client (elicitation, answered at once by the bench's rmcp client),
//! as an agent's user would.
//!
//! For each case:
//!
//! - `*_cold_empty_cache_ms`: the first call after `serve` starts, its
//!   compiled-code cache (`data/cache/components`) emptied first: the
//!   runtime is compiled by cranelift inside that call;
//! - `*_cold_p50_ms`: the first call after `serve` starts with the cache
//!   warm (what every start after the first pays), p50 over several starts;
//!   `*_start_p50_ms`: the start itself, from spawning `serve` to the end of
//!   the MCP handshake;
//! - `*_warm_p50_ms`/`_p95_ms`: repeated calls on one session, one native
//!   run between two calls (an agent's calls are never back to back: the
//!   host makes the next call's instance in between); `trivial` also
//!   back to back (`trivial_back_to_back_p50_ms`), each call then waiting
//!   for its instance;
//! - `*_native_cold_ms`: `python3 SCRIPT` with the packages in a folder
//!   the bench unpacked from the same wheels, before Python has written
//!   any `__pycache__` there; `*_native_p50_ms`/`_p95_ms`: repeated runs;
//!   each run a process in a fresh working folder holding the inputs, as
//!   a skill's instructions say to run it; the native lines say `n/a` with
//!   the reason where no `python3` runs;
//! - the ratios against native (`*_warm_vs_native`, `*_cold_vs_native`:
//!   the cold call with a warm cache against native's first run);
//! - `*_stages`: where the warm session's calls went inside `serve`
//!   (`skillhost::stages`, `SKILLHOST_STAGE_TIMES=1`): p50 per stage in µs,
//!   `handler` being the whole `tools/call` and `guest` the script's run in
//!   the runtime.
//!
//! Every answer is checked (`exit_code` 0), and the first warm answer's
//! stdout is compared with native's. Goals (issue 39): `trivial` warm p50
//! ≤ 5 ms, the import-heavy scripts' warm p50 ≤ 2× native's.

mod command;
mod report;
use report::{line, percentile, ratio};

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use base64::Engine as _;
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult,
    ElicitationAction, ElicitationCapability, ErrorData, FormElicitationCapability, Implementation,
    ProtocolVersion,
};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, RequestContext, RunningService};
use rmcp::{ClientHandler, RoleClient};
use serde_json::{Value, json};
use tokio::io::AsyncReadExt as _;
use tokio::process::{Child, Command};

/// The persona the calls are made as.
const PERSONA: &str = "bench";
/// The goals (issue 39).
const TARGET_TRIVIAL_P50_MS: f64 = 5.0;
const TARGET_VS_NATIVE_X: f64 = 2.0;
/// How long a start, a call or a stop may take.
const START_TIMEOUT: Duration = Duration::from_secs(60);
const CALL_TIMEOUT: Duration = Duration::from_secs(120);
const STOP_TIMEOUT: Duration = Duration::from_secs(10);

/// The fixtures of `plugins/script-skills/` the bench packs with wheels.
const FIXTURES: [&str; 3] = ["pdf-forms", "office-docs", "skill-validator"];

/// The trivial skill, the bench's own.
const HELLO_MANIFEST: &str = "name: hello
version: 1.0.0
description: Prints one line; the trivial script of the scripts-through-serve bench.
instructions: |
  Run `scripts/hello.py`.
scripts:
  read_only: true
";

/// A SKILL.md the validator checks.
const SKILL_MD: &str = "---\nname: my-skill\ndescription: Does things.\n---\n# My skill\n";

/// The docx's parts (those of the scripts test's).
const DOCX_PARTS: [(&str, &str); 3] = [
    (
        "[Content_Types].xml",
        r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/><Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>"#,
    ),
    (
        "_rels/.rels",
        r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/></Relationships>"#,
    ),
    (
        "word/document.xml",
        r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?><w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body><w:p><w:r><w:t>Hello from skillhost</w:t></w:r></w:p><w:p><w:r><w:t xml:space="preserve">Second  paragraph</w:t></w:r></w:p></w:body></w:document>"#,
    ),
];

/// One input file of a case: its name in the scratch folder and bytes.
type Input = (String, Vec<u8>);

/// One script measured.
struct Case {
    /// The name its lines start with.
    name: &'static str,
    /// The skill and the script in it.
    skill: &'static str,
    script: &'static str,
    args: Vec<String>,
    /// The input files, placed in the working folder (natively) or sent
    /// with the call (base64, or by `refs`).
    inputs: Vec<Input>,
    /// For each input, the ref the call names instead of its bytes.
    refs: Vec<Option<String>>,
    /// Whether the script imports packages (judged against 2× native).
    import_heavy: bool,
}

impl Case {
    /// The `run_script` arguments.
    fn arguments(&self) -> serde_json::Map<String, Value> {
        let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
        let files: Vec<Value> = self
            .inputs
            .iter()
            .zip(&self.refs)
            .map(|((name, bytes), r)| match r {
                Some(r) => json!({"name": name, "ref": r}),
                None => json!({"name": name, "content_base64": b64(bytes)}),
            })
            .collect();
        let v = json!({"script": self.script, "args": self.args, "files": files});
        v.as_object().cloned().unwrap_or_default()
    }

    fn tool(&self) -> String {
        format!("{}.run_script", self.skill)
    }
}

/// How much to measure.
struct Plan {
    cold_starts: usize,
    warm: usize,
    trivial_warm: usize,
}

impl Plan {
    fn from_env() -> Plan {
        if std::env::var_os("SKILLHOST_BENCH_QUICK").is_some_and(|v| v != "0") {
            Plan {
                cold_starts: 2,
                warm: 8,
                trivial_warm: 30,
            }
        } else {
            Plan {
                cold_starts: 5,
                warm: 40,
                trivial_warm: 200,
            }
        }
    }
}

fn main() -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let result = rt.block_on(run());
    rt.shutdown_timeout(STOP_TIMEOUT);
    result
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

async fn run() -> anyhow::Result<()> {
    let plan = Plan::from_env();
    let only: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let exe = std::env::var_os("SKILLHOST_BENCH_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_skillhost")));
    let work = tempfile::tempdir()?;
    let data = work.path().join("data");
    let wheels = std::env::var_os("SKILLHOST_BENCH_WHEELS")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("target/peers/wheels"));
    let wheels = if wheels.is_dir() {
        Ok(wheels)
    } else {
        Err(format!(
            "{} is missing (tests/peers/install.sh fetches the fixtures' wheels)",
            wheels.display()
        ))
    };
    let python = native_python();
    println!(
        "scripts through serve --stdio: skillhost binary {}, native {}, {} CPUs, load average {}",
        exe.display(),
        python
            .as_ref()
            .map_or_else(|why| format!("n/a ({why})"), |v| v.version.clone()),
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .split(' ')
            .take(3)
            .collect::<Vec<_>>()
            .join(" "),
    );
    let started = Instant::now();
    let sources = prepare(&exe, work.path(), &data, wheels.as_ref().ok()).await?;
    line(
        "prepare_s",
        format!(
            "{:.1} (keygen, pack --wheels, install with byte-compiling, approve, grant)",
            started.elapsed().as_secs_f64()
        ),
    );
    if let Err(why) = &wheels {
        println!("pdf_fields, office_unpack, office_pack, validate: skipped: {why}");
    }
    // The native packages: the same wheels, unpacked into a folder of
    // their own (as pack unpacks them for the sandbox).
    let site = work.path().join("native-site");
    let native = match (&python, &wheels) {
        (Ok(p), Ok(w)) => unpack_wheels(w, &site).map(|()| Native {
            python: p.path.clone(),
            site: Some(site.clone()),
        }),
        (Ok(p), Err(_)) => Ok(Native {
            python: p.path.clone(),
            site: None,
        }),
        (Err(why), _) => Err(anyhow::anyhow!("{why}")),
    };
    let native = native.map_err(|e| format!("{e:#}"));

    let mut cases = vec![Case {
        name: "trivial",
        skill: "hello",
        script: "scripts/hello.py",
        args: Vec::new(),
        inputs: Vec::new(),
        refs: Vec::new(),
        import_heavy: false,
    }];
    if wheels.is_ok() {
        let docx = docx()?;
        cases.extend([
            Case {
                name: "pdf_fields",
                skill: "pdf-forms",
                script: "scripts/extract_form_field_info.py",
                args: vec!["form.pdf".into(), "out/fields.json".into()],
                inputs: vec![("form.pdf".into(), form_pdf())],
                refs: vec![None],
                import_heavy: true,
            },
            Case {
                name: "office_unpack",
                skill: "office-docs",
                script: "scripts/office/unpack.py",
                args: vec!["document.docx".into(), "out/unpacked".into()],
                inputs: vec![("document.docx".into(), docx)],
                refs: vec![None],
                import_heavy: true,
            },
            Case {
                name: "validate",
                skill: "skill-validator",
                script: "scripts/quick_validate.py",
                args: vec!["my-skill".into()],
                inputs: vec![("my-skill/SKILL.md".into(), SKILL_MD.as_bytes().to_vec())],
                refs: vec![None],
                import_heavy: true,
            },
        ]);
        // pack takes what an unpack call made, by its refs.
        let pack = office_pack_case(&exe, &data, &cases[2]).await?;
        cases.insert(3, pack);
    }
    cases.retain(|c| only.is_empty() || only.iter().any(|o| c.name.contains(o.as_str())));

    let mut judged = Vec::new();
    for case in &cases {
        let figures = measure(&exe, &data, case, &plan, &native, &sources).await?;
        judged.push((case, figures));
    }

    println!();
    let met = |ok: bool| if ok { "met" } else { "NOT met" };
    if let Some((_, f)) = judged.iter().find(|(c, _)| c.name == "trivial") {
        let p50 = ms(f.warm_p50);
        println!(
            "target_trivial_warm_p50_ms {TARGET_TRIVIAL_P50_MS:.0} {} ({p50:.2})",
            met(p50 <= TARGET_TRIVIAL_P50_MS)
        );
    }
    let worst = judged
        .iter()
        .filter(|(c, _)| c.import_heavy)
        .filter_map(|(c, f)| f.native_p50.map(|n| (c.name, ms(f.warm_p50) / ms(n))))
        .max_by(|a, b| a.1.total_cmp(&b.1));
    match worst {
        Some((name, x)) => println!(
            "target_import_heavy_warm_vs_native_x {TARGET_VS_NATIVE_X:.0} {} (highest {x:.2}x, \
             {name})",
            met(x <= TARGET_VS_NATIVE_X)
        ),
        None => println!(
            "target_import_heavy_warm_vs_native_x {TARGET_VS_NATIVE_X:.0} not judged (no native \
             run or no packaged script)"
        ),
    }
    Ok(())
}

/// Where the bench's skills' sources are (for the native runs).
struct Sources {
    dirs: Vec<(String, PathBuf)>,
}

impl Sources {
    fn dir(&self, skill: &str) -> anyhow::Result<&Path> {
        self.dirs
            .iter()
            .find(|(n, _)| n == skill)
            .map(|(_, d)| d.as_path())
            .ok_or_else(|| anyhow::anyhow!("no source folder for {skill}"))
    }
}

/// The data dir: a key trusted, persona `bench` (client approval on), the
/// trivial skill and (with `wheels`) the fixtures packed, installed,
/// approved and granted.
async fn prepare(
    exe: &Path,
    work: &Path,
    data: &Path,
    wheels: Option<&PathBuf>,
) -> anyhow::Result<Sources> {
    std::fs::create_dir_all(data)?;
    let key = work.join("bench");
    let s = |p: &Path| p.to_string_lossy().into_owned();
    skillhost_ok(exe, data, &["keygen", "--out", &s(&key)]).await?;
    let public = work.join("bench.pub");
    skillhost_ok(exe, data, &["trust", "add", &s(&public), "--name", "bench"]).await?;
    skillhost_ok(exe, data, &["personas", "add", PERSONA]).await?;
    skillhost_ok(
        exe,
        data,
        &["personas", "set", PERSONA, "--client-approval", "on"],
    )
    .await?;
    let src = work.join("src");
    let hello = src.join("hello");
    std::fs::create_dir_all(hello.join("scripts"))?;
    std::fs::write(hello.join("skill.yaml"), HELLO_MANIFEST)?;
    std::fs::write(hello.join("scripts/hello.py"), "print(\"hi\")\n")?;
    let mut dirs = vec![("hello".to_string(), hello)];
    if wheels.is_some() {
        for name in FIXTURES {
            let dir = src.join(name);
            copy_tree(&repo_root().join("plugins/script-skills").join(name), &dir)?;
            dirs.push((name.to_string(), dir));
        }
    }
    let key_file = work.join("bench.key");
    for (name, dir) in &dirs {
        let bundle = work.join(format!("{name}.skill"));
        let mut args = vec![
            "pack".to_string(),
            s(dir),
            "--key".into(),
            s(&key_file),
            "--out".into(),
            s(&bundle),
        ];
        if let Some(w) = wheels
            && name != "hello"
        {
            args.extend(["--wheels".into(), s(w)]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        skillhost_ok(exe, data, &args).await?;
        skillhost_ok(exe, data, &["install", &s(&bundle)]).await?;
        skillhost_ok(exe, data, &["skills", "approve", name]).await?;
        skillhost_ok(exe, data, &["grants", "skill", PERSONA, name, "on"]).await?;
    }
    Ok(Sources { dirs })
}

/// The `office_pack` case: an unpack call made once, through `serve`; its
/// out files (`unpacked/…`) are pack's inputs, by their refs.
async fn office_pack_case(exe: &Path, data: &Path, unpack: &Case) -> anyhow::Result<Case> {
    let mut server = Served::start(exe, data, false).await?;
    let result = server.call(unpack).await;
    server.stop().await?;
    let result = result?.1;
    let files = result["files"]
        .as_array()
        .ok_or_else(|| anyhow::anyhow!("unpack returned no files: {result}"))?;
    let mut inputs = Vec::new();
    let mut refs = Vec::new();
    for f in files {
        let (Some(name), Some(r)) = (f["name"].as_str(), f["ref"].as_str()) else {
            anyhow::bail!("a file without a name or ref: {f}");
        };
        // The call names the refs; a native run takes the parts a native
        // unpack of the same docx makes (`native_inputs`).
        inputs.push((name.to_string(), Vec::new()));
        refs.push(Some(r.to_string()));
    }
    anyhow::ensure!(!inputs.is_empty(), "unpack made no files");
    Ok(Case {
        name: "office_pack",
        skill: "office-docs",
        script: "scripts/office/pack.py",
        args: vec!["unpacked".into(), "out/document.docx".into()],
        inputs,
        refs,
        import_heavy: true,
    })
}

/// What one case measured.
struct Figures {
    warm_p50: Duration,
    native_p50: Option<Duration>,
}

/// The native interpreter and the folder of the packages.
struct Native {
    python: PathBuf,
    site: Option<PathBuf>,
}

/// Every figure of one case (see the module docs).
async fn measure(
    exe: &Path,
    data: &Path,
    case: &Case,
    plan: &Plan,
    native: &Result<Native, String>,
    sources: &Sources,
) -> anyhow::Result<Figures> {
    let name = case.name;
    println!();
    // Cold, with the compiled-code cache emptied first.
    let cache = data.join("cache").join("components");
    if cache.exists() {
        std::fs::remove_dir_all(&cache)?;
    }
    let (start, first) = cold(exe, data, case).await?;
    line(
        &format!("{name}_cold_empty_cache_ms"),
        format!(
            "{} (the runtime compiled in the call; serve started in {} ms)",
            fmt_ms(first),
            fmt_ms(start)
        ),
    );
    // Cold, with the cache warm.
    let mut starts = Vec::new();
    let mut firsts = Vec::new();
    for _ in 0..plan.cold_starts {
        let (s, f) = cold(exe, data, case).await?;
        starts.push(s);
        firsts.push(f);
    }
    let cold_p50 = percentile(&firsts, 0.5);
    line(
        &format!("{name}_start_p50_ms"),
        fmt_ms(percentile(&starts, 0.5)),
    );
    line(&format!("{name}_cold_p50_ms"), fmt_ms(cold_p50));

    // Native: the first run (no byte-code written yet), then repeated.
    let native_dir = sources.dir(case.skill)?;
    let native_inputs = native_inputs(case, native, native_dir)?;
    let (native_cold, mut native_runs) = match (native, &native_inputs) {
        (Ok(n), Ok(inputs)) => {
            // A fresh copy of the packages: no __pycache__ in it yet.
            let site = match &n.site {
                Some(site) => {
                    let fresh = site.with_file_name(format!("native-site-{name}"));
                    copy_tree(site, &fresh)?;
                    Some(fresh)
                }
                None => None,
            };
            let n = Native {
                python: n.python.clone(),
                site,
            };
            let (took, out) = run_native(&n, native_dir, case, inputs)?;
            (Some((n, took, out)), Vec::new())
        }
        _ => (None, Vec::new()),
    };

    // Warm: one session, a native run between two calls.
    let warm_n = if name == "trivial" {
        plan.trivial_warm
    } else {
        plan.warm
    };
    let mut server = Served::start(exe, data, true).await?;
    let mut warm = Vec::with_capacity(warm_n);
    let mut checked = false;
    let measured = async {
        // Two calls first: the script's files read, the instance made.
        for _ in 0..2 {
            server.call(case).await?;
        }
        for _ in 0..warm_n {
            let (took, result) = server.call(case).await?;
            warm.push(took);
            if let Some((n, _, native_out)) = &native_cold {
                let (t, _) = run_native(n, native_dir, case, native_inputs.as_ref().map_err(|e| anyhow::anyhow!("{e}"))?)?;
                native_runs.push(t);
                if !checked {
                    anyhow::ensure!(
                        result["stdout"].as_str() == Some(native_out.as_str()),
                        "{name}: stdout differs from native python3's:\nsandbox: {}\nnative:  {native_out}",
                        result["stdout"]
                    );
                    checked = true;
                }
            } else {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        anyhow::Ok(())
    }
    .await;
    let stages = server.stop().await;
    measured?;
    let stages = stages?;
    let warm_p50 = percentile(&warm, 0.5);
    line(&format!("{name}_warm_p50_ms"), fmt_ms(warm_p50));
    line(
        &format!("{name}_warm_p95_ms"),
        fmt_ms(percentile(&warm, 0.95)),
    );
    if name == "trivial" {
        let mut server = Served::start(exe, data, false).await?;
        let mut b2b = Vec::with_capacity(warm_n);
        let measured = async {
            for _ in 0..warm_n {
                b2b.push(server.call(case).await?.0);
            }
            anyhow::Ok(())
        }
        .await;
        server.stop().await?;
        measured?;
        line(
            &format!("{name}_back_to_back_p50_ms"),
            fmt_ms(percentile(&b2b, 0.5)),
        );
    }
    let native_p50 = match (&native_cold, native, &native_inputs) {
        (Some((_, first, _)), _, _) => {
            let p50 = percentile(&native_runs, 0.5);
            line(&format!("{name}_native_cold_ms"), fmt_ms(*first));
            line(&format!("{name}_native_p50_ms"), fmt_ms(p50));
            line(
                &format!("{name}_native_p95_ms"),
                fmt_ms(percentile(&native_runs, 0.95)),
            );
            line(&format!("{name}_warm_vs_native"), ratio(warm_p50, p50));
            line(&format!("{name}_cold_vs_native"), ratio(cold_p50, *first));
            Some(p50)
        }
        (None, Err(why), _) | (None, Ok(_), Err(why)) => {
            line(&format!("{name}_native_p50_ms"), format!("n/a ({why})"));
            None
        }
        (None, Ok(_), Ok(_)) => None,
    };
    line(
        &format!("{name}_stages_p50_us"),
        stages_line(stages.as_ref()),
    );
    Ok(Figures {
        warm_p50,
        native_p50,
    })
}

/// The inputs of a native run: the case's, or for pack the parts a
/// native unpack of the same docx makes.
fn native_inputs(
    case: &Case,
    native: &Result<Native, String>,
    skill: &Path,
) -> anyhow::Result<Result<Vec<Input>, String>> {
    if case.name != "office_pack" {
        return Ok(Ok(case.inputs.clone()));
    }
    let Ok(n) = native else {
        return Ok(Err("no native python3".into()));
    };
    let unpack = Case {
        name: "office_unpack",
        skill: "office-docs",
        script: "scripts/office/unpack.py",
        args: vec!["document.docx".into(), "out/unpacked".into()],
        inputs: vec![("document.docx".into(), docx()?)],
        refs: vec![None],
        import_heavy: true,
    };
    let cwd = tempfile::tempdir()?;
    std::fs::create_dir_all(cwd.path().join("out"))?;
    let (_, out) = run_native_in(n, skill, &unpack, &unpack.inputs, cwd.path())?;
    anyhow::ensure!(out.starts_with("Unpacked"), "native unpack: {out}");
    let mut parts = Vec::new();
    for (name, _) in &case.inputs {
        let bytes = std::fs::read(cwd.path().join("out").join(name))?;
        parts.push((name.clone(), bytes));
    }
    Ok(Ok(parts))
}

/// One cold start: `serve` spawned, handshaken, one call; the start's and
/// the call's time.
async fn cold(exe: &Path, data: &Path, case: &Case) -> anyhow::Result<(Duration, Duration)> {
    let t = Instant::now();
    let mut server = Served::start(exe, data, false).await?;
    let start = t.elapsed();
    let called = server.call(case).await;
    server.stop().await?;
    Ok((start, called?.0))
}

/// A `serve --stdio` and the bench's MCP session with it.
struct Served {
    service: Option<RunningService<RoleClient, Approver>>,
    child: Child,
    /// Its stderr, read to the end by a task.
    stderr: tokio::task::JoinHandle<String>,
}

impl Served {
    async fn start(exe: &Path, data: &Path, stage_times: bool) -> anyhow::Result<Served> {
        let mut cmd = skillhost(exe, data);
        cmd.args(["serve", "--stdio", "--persona", PERSONA]);
        if stage_times {
            cmd.env("SKILLHOST_STAGE_TIMES", "1");
        }
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        let (Some(stdout), Some(stdin), Some(mut err)) =
            (child.stdout.take(), child.stdin.take(), child.stderr.take())
        else {
            anyhow::bail!("serve has no stdio pipes");
        };
        let stderr = tokio::spawn(async move {
            let mut s = String::new();
            let _ = err.read_to_string(&mut s).await;
            s
        });
        // The `initialize` handshake: a confirmation is then the server's
        // `elicitation/create` request within the call, which rmcp's
        // client answers through `Approver` (its 2026-07-28 era client
        // has no answer for a call that asks for input).
        let service = match tokio::time::timeout(
            START_TIMEOUT,
            Approver.serve_with_lifecycle((stdout, stdin), ClientLifecycleMode::Initialize),
        )
        .await
        {
            Ok(Ok(s)) => s,
            other => {
                let why = match other {
                    Ok(Err(e)) => e.to_string(),
                    _ => format!("none within {START_TIMEOUT:?}"),
                };
                let _ = child.kill().await;
                let err = stderr.await.unwrap_or_default();
                anyhow::bail!("serve --stdio: no handshake: {why}\n{err}");
            }
        };
        Ok(Served {
            service: Some(service),
            child,
            stderr,
        })
    }

    /// One call of `case`: its time and `structuredContent`, checked.
    async fn call(&mut self, case: &Case) -> anyhow::Result<(Duration, Value)> {
        let Some(service) = &self.service else {
            anyhow::bail!("the session has ended");
        };
        let params = CallToolRequestParams::new(case.tool()).with_arguments(case.arguments());
        let t = Instant::now();
        let result = tokio::time::timeout(CALL_TIMEOUT, service.peer().call_tool(params))
            .await
            .map_err(|_| anyhow::anyhow!("{}: a call took over {CALL_TIMEOUT:?}", case.name))??;
        let took = t.elapsed();
        let content = result.structured_content.clone().unwrap_or_default();
        anyhow::ensure!(
            result.is_error != Some(true) && content["exit_code"] == 0,
            "{}: the call failed: {}",
            case.name,
            serde_json::to_string(&result).unwrap_or_default()
        );
        Ok((took, content))
    }

    /// Ends the session (serve exits when its stdin closes); the stage
    /// times it printed, if it was asked to.
    async fn stop(mut self) -> anyhow::Result<Option<Value>> {
        if let Some(service) = self.service.take() {
            let _ = tokio::time::timeout(STOP_TIMEOUT, service.cancel()).await;
        }
        match tokio::time::timeout(STOP_TIMEOUT, self.child.wait()).await {
            Ok(status) => {
                let status = status?;
                anyhow::ensure!(status.success(), "serve exited with {status}");
            }
            Err(_) => {
                let _ = self.child.kill().await;
                anyhow::bail!("serve did not stop within {STOP_TIMEOUT:?} of its stdin closing");
            }
        }
        let err = self.stderr.await.unwrap_or_default();
        Ok(err
            .lines()
            .find_map(|l| l.split_once("stage-times ").map(|(_, j)| j.to_string()))
            .and_then(|j| serde_json::from_str(&j).ok()))
    }
}

/// The bench's MCP client: it confirms every call it is asked to, at once.
#[derive(Clone)]
struct Approver;

impl ClientHandler for Approver {
    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        capabilities.elicitation =
            Some(ElicitationCapability::new().with_form(FormElicitationCapability::new()));
        ClientConfig::new(capabilities, Implementation::new("scripts-bench", "1"))
            .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }

    async fn create_elicitation(
        &self,
        _request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        Ok(ElicitResult::new(ElicitationAction::Accept).with_content(json!({"approve": true})))
    }
}

/// The stages' p50 in µs, in path order, as `name value` pairs.
fn stages_line(stages: Option<&Value>) -> String {
    let order = skillhost::stages::ALL.map(skillhost::stages::Stage::name);
    let Some(map) = stages.and_then(Value::as_object) else {
        return "n/a (serve printed no stage times)".into();
    };
    order
        .iter()
        .filter_map(|n| {
            map.get(*n).map(|s| {
                format!(
                    "{n} {:.0}",
                    s["p50_ns"].as_f64().unwrap_or_default() / 1000.0
                )
            })
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// `python3`, its version, if it runs here.
struct Python {
    path: PathBuf,
    version: String,
}

fn native_python() -> Result<Python, String> {
    let out = std::process::Command::new("python3")
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("python3 does not run here: {e}"))?;
    if !out.status.success() {
        return Err(format!("python3 --version failed: {}", out.status));
    }
    Ok(Python {
        path: PathBuf::from("python3"),
        version: String::from_utf8_lossy(&out.stdout).trim().to_string(),
    })
}

/// Unpacks every wheel of `wheels` into `site`: the packages' files as a
/// wheel installs them. A wheel's native part built for another Python
/// (PyYAML's, for the sandbox's CPython) is not importable natively, and
/// the package falls back to its pure-Python code, as in the sandbox.
fn unpack_wheels(wheels: &Path, site: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(site)?;
    for e in std::fs::read_dir(wheels)? {
        let path = e?.path();
        if path.extension().is_none_or(|x| x != "whl") {
            continue;
        }
        let mut zip = zip::ZipArchive::new(std::fs::File::open(&path)?)?;
        zip.extract(site)?;
    }
    Ok(())
}

/// Runs `case` natively in a fresh working folder holding `inputs`: its
/// time and stdout.
fn run_native(
    n: &Native,
    skill: &Path,
    case: &Case,
    inputs: &[Input],
) -> anyhow::Result<(Duration, String)> {
    let cwd = tempfile::tempdir()?;
    std::fs::create_dir_all(cwd.path().join("out"))?;
    run_native_in(n, skill, case, inputs, cwd.path())
}

fn run_native_in(
    n: &Native,
    skill: &Path,
    case: &Case,
    inputs: &[Input],
    cwd: &Path,
) -> anyhow::Result<(Duration, String)> {
    for (name, bytes) in inputs {
        let at = cwd.join(name);
        if let Some(parent) = at.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(at, bytes)?;
    }
    let mut cmd = std::process::Command::new(&n.python);
    cmd.arg(skill.join(case.script))
        .args(&case.args)
        .current_dir(cwd)
        .env_clear()
        .stdin(Stdio::null());
    if let Some(site) = &n.site {
        cmd.env("PYTHONPATH", site);
    }
    let t = Instant::now();
    let out = cmd.output()?;
    let took = t.elapsed();
    anyhow::ensure!(
        out.status.success(),
        "native {}: {}",
        case.script,
        String::from_utf8_lossy(&out.stderr)
    );
    Ok((took, String::from_utf8_lossy(&out.stdout).into_owned()))
}

/// A one-page PDF form with two text fields and a checkbox (the scripts
/// test's, which pypdf writes), written here so no Python is needed.
fn form_pdf() -> Vec<u8> {
    let widget = |name: &str, kind: &str, i: usize, extra: &str| {
        let y = 700 - 50 * i;
        format!(
            "<< /Type /Annot /Subtype /Widget /FT /{kind} /T ({name}) /Rect [72 {y} 320 {}] /F 4 \
             /P 3 0 R{extra} >>",
            y + 20
        )
    };
    let objects = [
        "<< /Type /Catalog /Pages 2 0 R /AcroForm << /Fields [4 0 R 5 0 R 6 0 R] >> >>".to_string(),
        "<< /Type /Pages /Kids [3 0 R] /Count 1 >>".to_string(),
        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << >> \
         /Annots [4 0 R 5 0 R 6 0 R] >>"
            .to_string(),
        widget("full_name", "Tx", 0, ""),
        widget("email", "Tx", 1, ""),
        widget(
            "agree",
            "Btn",
            2,
            " /AP << /N << /On << >> /Off << >> >> >>",
        ),
    ];
    let mut pdf = b"%PDF-1.7\n".to_vec();
    let mut offsets = Vec::new();
    for (i, o) in objects.iter().enumerate() {
        offsets.push(pdf.len());
        pdf.extend(format!("{} 0 obj\n{o}\nendobj\n", i + 1).as_bytes());
    }
    let xref = pdf.len();
    pdf.extend(format!("xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1).as_bytes());
    for off in offsets {
        pdf.extend(format!("{off:010} 00000 n \n").as_bytes());
    }
    pdf.extend(
        format!(
            "trailer\n<< /Size {} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n",
            objects.len() + 1
        )
        .as_bytes(),
    );
    pdf
}

/// A minimal docx (the scripts test's parts), written with zip.
fn docx() -> anyhow::Result<Vec<u8>> {
    let mut z = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    for (name, text) in DOCX_PARTS {
        z.start_file(name, options)?;
        z.write_all(text.as_bytes())?;
    }
    Ok(z.finish()?.into_inner())
}

fn copy_tree(from: &Path, to: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(to)?;
    for e in std::fs::read_dir(from)? {
        let e = e?;
        let target = to.join(e.file_name());
        if e.file_type()?.is_dir() {
            copy_tree(&e.path(), &target)?;
        } else {
            std::fs::copy(e.path(), &target)?;
        }
    }
    Ok(())
}

fn skillhost(exe: &Path, data: &Path) -> Command {
    let mut cmd = command::skillhost(exe, data);
    cmd.env_remove("SKILLHOST_DATABASE")
        .env_remove("SKILLHOST_COMPILE_CACHE");
    cmd
}

/// Runs `skillhost ARGS…` to the end; its stdout.
async fn skillhost_ok(exe: &Path, data: &Path, args: &[&str]) -> anyhow::Result<String> {
    command::output_ok(skillhost(exe, data), args, Some(CALL_TIMEOUT)).await
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn fmt_ms(d: Duration) -> String {
    format!("{:.2}", ms(d))
}
