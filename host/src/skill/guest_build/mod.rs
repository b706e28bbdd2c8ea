//! `skillhost build`: builds a skill's guest with its language's standard
//! toolchain and places the component where `skill.yaml`'s `component`
//! field says.
//!
//! | the folder has | language | toolchain |
//! |---|---|---|
//! | `Cargo.toml` | Rust | `cargo build --release --target wasm32-wasip2` |
//! | `app.py` | Python | componentize-py ([`COMPONENTIZE_PY_VERSION`]) |
//! | `app.js` | JavaScript | componentize-js ([`COMPONENTIZE_JS_VERSION`]) |
//!
//! The WIT world and the Python and JS SDKs are built into this binary, so
//! a skill folder needs neither (a folder's own `skillhost.py` or
//! `skillhost.js`, as `skillhost new` writes, takes precedence). A missing
//! toolchain is named with the one command that installs it.
//!
//! Every component it writes records what it was built from (`record.rs`:
//! the digest of each source, the toolchain), so `check` and `pack` tell a
//! component older than its sources; with `SKILLHOST_BUILD_CACHE` set, a
//! build of sources built before takes that component from the cache
//! (`cache.rs`) instead of running the toolchain again.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::skill::manifest::{ManifestError, SkillManifest};

mod cache;
mod diagnose;
mod record;
mod vendor;

pub use cache::BUILD_CACHE_ENV;
use cache::BuildCache;
pub use diagnose::SourceProblem;
pub use record::{BUILD_RECORD_SECTION, BuildRecord, Freshness, SourceDigest, freshness};
pub use vendor::PYTHON_VENDOR_DIR;

/// The componentize-py version skills are built and tested with.
pub const COMPONENTIZE_PY_VERSION: &str = "0.25.1";
/// The componentize-js version skills are built and tested with.
pub const COMPONENTIZE_JS_VERSION: &str = "0.23.0";

/// The `skillhost:plugin` WIT package guests are built against.
pub const SKILL_WIT: &str = include_str!("../../../../wit/skill.wit");
/// The Python guest SDK (`skillhost.py`).
pub const PYTHON_SDK: &str = include_str!("../../../../guest-sdk/python/skillhost.py");
/// The JavaScript guest SDK (`skillhost.js`).
pub const JS_SDK: &str = include_str!("../../../../guest-sdk/js/skillhost.js");

/// Why a skill could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// The manifest is malformed or invalid.
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    /// A toolchain the guest's language needs is not installed here (or
    /// not where it was named).
    #[error("build of {dir}: {toolchain} is not installed: {install}")]
    MissingToolchain {
        /// The skill folder.
        dir: PathBuf,
        /// What is missing (`componentize-py`, `cargo`, …).
        toolchain: &'static str,
        /// What installs it, as a sentence naming the command.
        install: String,
    },
    /// The toolchain found something wrong in the skill's sources (a
    /// syntax error, a failed import, an exception while the component
    /// was made): where, and what.
    #[error("build of {dir}: {problem}")]
    InSource {
        /// The skill folder.
        dir: PathBuf,
        /// The place in its sources, and what is wrong there.
        problem: SourceProblem,
    },
    /// Something about the folder or the build is wrong; the message says what.
    #[error("build of {dir}: {message}")]
    Failed {
        /// The skill folder.
        dir: PathBuf,
        /// What went wrong and what to do.
        message: String,
    },
}

/// The language of a skill's guest, told by the files in its folder.
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// std::fs::write(dir.path().join("app.py"), "").unwrap();
/// assert_eq!(skillhost::GuestLanguage::of(dir.path()), Some(skillhost::GuestLanguage::Python));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GuestLanguage {
    /// A Rust crate (`Cargo.toml`) on the `skillhost-guest` SDK.
    Rust,
    /// A Python module `app.py` on `skillhost.py`.
    Python,
    /// A JavaScript module `app.js` on `skillhost.js`.
    JavaScript,
}

impl GuestLanguage {
    /// The language of the guest in `dir`: `Cargo.toml`, else `app.py`,
    /// else `app.js`; `None` when there is none of them.
    pub fn of(dir: &Path) -> Option<GuestLanguage> {
        if dir.join("Cargo.toml").is_file() {
            Some(GuestLanguage::Rust)
        } else if dir.join("app.py").is_file() {
            Some(GuestLanguage::Python)
        } else if dir.join("app.js").is_file() {
            Some(GuestLanguage::JavaScript)
        } else {
            None
        }
    }
}

/// Builds the guest in `dir` with its language's toolchain (see the module
/// docs) and writes the component to the path named by the manifest's
/// `component` field. Toolchain output goes to stderr. Returns where the
/// component was written.
///
/// ```no_run
/// let wasm = skillhost::build_skill(std::path::Path::new("plugins/text-tools")).unwrap();
/// println!("built {}", wasm.display());
/// ```
pub fn build_skill(dir: &Path) -> Result<PathBuf, BuildError> {
    build_skill_with(dir, &Toolchains::default())
}

/// Where the guest toolchains are, when not where [`build_skill`] looks
/// (the `SKILLHOST_COMPONENTIZE_*` variables, the skill folder, `PATH`).
///
/// ```
/// let tools = skillhost::Toolchains { componentize_py: Some("/opt/cpy/bin/componentize-py".into()), ..Default::default() };
/// ```
#[derive(Debug, Clone, Default)]
pub struct Toolchains {
    /// componentize-py, for Python skills.
    pub componentize_py: Option<PathBuf>,
    /// componentize-js, for JavaScript skills.
    pub componentize_js: Option<PathBuf>,
    /// The Node.js that runs componentize-js (a Node.js script), when
    /// `node` on `PATH` should not.
    pub node: Option<PathBuf>,
}

/// [`build_skill`] with toolchains named explicitly (each taking
/// precedence over where [`build_skill`] looks).
///
/// ```no_run
/// let tools = skillhost::Toolchains { componentize_py: Some("venv/bin/componentize-py".into()), ..Default::default() };
/// skillhost::build_skill_with(std::path::Path::new("plugins/py-stats"), &tools).unwrap();
/// ```
pub fn build_skill_with(dir: &Path, tools: &Toolchains) -> Result<PathBuf, BuildError> {
    // Errors name the folder as the caller named it, not the absolute path
    // the toolchains are handed.
    build_in(dir, tools, Rebuild::WhenChanged).map_err(|e| e.of(dir))
}

/// [`build_skill_with`] that runs the toolchain even when the component in
/// place was built from the same sources (`skillhost build --force`; a
/// build cache, when one is set, still answers).
///
/// ```no_run
/// skillhost::rebuild_skill(std::path::Path::new("plugins/py-stats"), &Default::default()).unwrap();
/// ```
pub fn rebuild_skill(dir: &Path, tools: &Toolchains) -> Result<PathBuf, BuildError> {
    build_in(dir, tools, Rebuild::Always).map_err(|e| e.of(dir))
}

/// Whether a build runs when the component in place is the build of the
/// same sources.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rebuild {
    /// Only when something it reads changed.
    WhenChanged,
    /// Whatever is in place.
    Always,
}

impl BuildError {
    /// This error, naming `dir` as the skill folder.
    fn of(self, dir: &Path) -> BuildError {
        let dir = dir.to_path_buf();
        match self {
            BuildError::Manifest(e) => BuildError::Manifest(e),
            BuildError::MissingToolchain {
                toolchain, install, ..
            } => BuildError::MissingToolchain {
                dir,
                toolchain,
                install,
            },
            BuildError::InSource { problem, .. } => BuildError::InSource { dir, problem },
            BuildError::Failed { message, .. } => BuildError::Failed { dir, message },
        }
    }
}

fn build_in(dir: &Path, tools: &Toolchains, rebuild: Rebuild) -> Result<PathBuf, BuildError> {
    let fail = |message: String| BuildError::Failed {
        dir: dir.to_path_buf(),
        message,
    };
    let manifest = SkillManifest::load_dir(dir)?;
    let Some(component) = &manifest.component else {
        return Err(fail(
            "skill.yaml names no `component`: this skill has no code to build".into(),
        ));
    };
    // Toolchains run in the skill folder: every path handed to them is
    // absolute.
    let dir =
        &std::path::absolute(dir).map_err(|e| fail(format!("cannot resolve the folder: {e}")))?;
    let dest = dir.join(component);
    if let Some(parent) = dest.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| fail(format!("cannot create {}: {e}", parent.display())))?;
    }
    let tmp = dest.with_extension("wasm.tmp");
    let Some(language) = GuestLanguage::of(dir) else {
        return Err(fail(
            "no guest to build: a skill folder has a `Cargo.toml` (Rust), an `app.py` (Python) \
             or an `app.js` (JavaScript); `skillhost new NAME --lang rust|python|js` makes one"
                .into(),
        ));
    };
    // What the build reads, recorded in the component (and the cache's
    // key); a folder whose sources cannot be read is built unrecorded.
    let read_sources = || match SourceDigest::of(dir, language) {
        Ok(s) => Some(s),
        Err(e) => {
            tracing::warn!("{}: the build is not recorded: {e}", dir.display());
            None
        }
    };
    // What no build of this folder can take, whatever is in place.
    if language == GuestLanguage::Python
        && let Some(native) = vendor::native_extension(dir)
    {
        return Err(fail(format!(
            "{native} is a native extension module, built for a machine: the skill's CPython \
             runs in WebAssembly and cannot load it; use a pure-Python package instead (a \
             `py3-none-any` wheel), or remove the file"
        )));
    }
    let mut sources = None;
    if language != GuestLanguage::Rust {
        sources = read_sources();
    }
    let built = match language {
        GuestLanguage::Rust => build_rust(dir, &fail).and_then(|artifact| {
            // Read after cargo ran: a first build writes `Cargo.lock`.
            sources = read_sources();
            let bytes = std::fs::read(&artifact)
                .map_err(|e| fail(format!("cannot read {}: {e}", artifact.display())))?;
            Ok(Built {
                bytes,
                toolchain: rustc_version(dir),
                from: BuiltFrom::Toolchain,
            })
        }),
        GuestLanguage::Python | GuestLanguage::JavaScript => build_with_toolchain(
            dir,
            language,
            (rebuild == Rebuild::WhenChanged).then_some(dest.as_path()),
            &tmp,
            tools,
            sources.as_ref(),
            &fail,
        ),
    };
    if let Ok(Built {
        from: BuiltFrom::InPlace,
        ..
    }) = built
    {
        return Ok(dest);
    }
    let placed = built.and_then(|built| {
        let bytes = match &sources {
            // A component from the cache carries its record already.
            Some(s) if built.from == BuiltFrom::Toolchain => {
                let mut record = BuildRecord::new(s, &built.toolchain);
                if language != GuestLanguage::Rust {
                    record.key = Some(BuildCache::key(language, &built.toolchain, s));
                }
                let bytes = record.append_to(built.bytes);
                if let Some(key) = &record.key
                    && let Some(cache) = BuildCache::from_env()
                {
                    cache.put(key, &bytes);
                }
                bytes
            }
            _ => built.bytes,
        };
        std::fs::write(&tmp, &bytes)
            .map_err(|e| fail(format!("cannot write {}: {e}", tmp.display())))
    });
    if let Err(e) = placed {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    std::fs::rename(&tmp, &dest).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        fail(format!(
            "cannot place the component at {}: {e}",
            dest.display()
        ))
    })?;
    Ok(dest)
}

/// What a toolchain (or the build cache) made.
struct Built {
    /// The component.
    bytes: Vec<u8>,
    /// The toolchain's name and version.
    toolchain: String,
    /// Where it came from.
    from: BuiltFrom,
}

/// Where a build's component came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BuiltFrom {
    /// The toolchain ran (the record is to be added).
    Toolchain,
    /// The build cache had it, with its record.
    Cache,
    /// The component in place is the build of these sources: nothing to do.
    InPlace,
}

/// Builds a Python or JavaScript guest into `tmp` with its toolchain,
/// unless the component at `dest` (when given) was built from these same sources by
/// the same toolchain, SDK and WIT (its record's key says so), or the
/// build cache has it. A toolchain's build of the same sources differs
/// from the last (componentize-js's snapshot of the JS engine does, by a
/// few bytes), so building again only when something changed is what
/// keeps a component, and the compiled code cached for it, as they are.
fn build_with_toolchain(
    dir: &Path,
    language: GuestLanguage,
    dest: Option<&Path>,
    tmp: &Path,
    tools: &Toolchains,
    sources: Option<&SourceDigest>,
    fail: &dyn Fn(String) -> BuildError,
) -> Result<Built, BuildError> {
    let (tool, name) = match language {
        GuestLanguage::Python => (python_tool(dir, tools)?, "componentize-py"),
        _ => (js_tool(dir, tools)?, "componentize-js"),
    };
    let toolchain = tool_version(&tool, name);
    if let (Some(s), Some(dest)) = (sources, dest) {
        let key = BuildCache::key(language, &toolchain, s);
        if let Ok(bytes) = std::fs::read(dest)
            && BuildRecord::read(&bytes)
                .is_some_and(|r| r.sources == s.all && r.key.as_deref() == Some(key.as_str()))
        {
            tracing::info!(
                "{}: {} is up to date with its sources ({toolchain}); not built again \
                 (`skillhost build --force` builds it again)",
                dir.display(),
                dest.display()
            );
            return Ok(Built {
                bytes,
                toolchain,
                from: BuiltFrom::InPlace,
            });
        }
    }
    let cache = sources.and_then(|s| {
        let cache = BuildCache::from_env()?;
        Some((BuildCache::key(language, &toolchain, s), cache, s))
    });
    if let Some((key, cache, s)) = &cache
        && let Some(bytes) = cache.get(key, s)
    {
        tracing::info!(
            "{}: the component of these sources was built before ({BUILD_CACHE_ENV})",
            dir.display()
        );
        return Ok(Built {
            bytes,
            toolchain,
            from: BuiltFrom::Cache,
        });
    }
    match language {
        GuestLanguage::Python => build_python(dir, tmp, &tool, fail)?,
        _ => build_js(dir, tmp, &tool, fail)?,
    }
    let bytes =
        std::fs::read(tmp).map_err(|e| fail(format!("cannot read {}: {e}", tmp.display())))?;
    Ok(Built {
        bytes,
        toolchain,
        from: BuiltFrom::Toolchain,
    })
}

/// A toolchain program, and the Node.js that runs it when it is a Node.js
/// script run by a `node` not on `PATH`.
struct Tool {
    program: PathBuf,
    node: Option<PathBuf>,
}

impl Tool {
    /// The command that runs the program.
    fn command(&self) -> Command {
        match &self.node {
            Some(node) => {
                let mut cmd = Command::new(node);
                cmd.arg(&self.program);
                cmd
            }
            None => Command::new(&self.program),
        }
    }
}

/// `NAME VERSION` of a toolchain program, from its `--version` (just the
/// name when it does not say).
fn tool_version(tool: &Tool, name: &str) -> String {
    let version = tool
        .command()
        .arg("--version")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    let version = version.strip_prefix(name).unwrap_or(&version).trim();
    if version.is_empty() {
        name.to_string()
    } else {
        format!("{name} {version}")
    }
}

/// The Rust compiler that builds in `dir` (`rustc 1.95.0 (…)`).
fn rustc_version(dir: &Path) -> String {
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    Command::new(rustc)
        .current_dir(dir)
        .arg("-V")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "rustc".into())
}

/// Whether the toolchain `dir` builds with has the `wasm32-wasip2` target
/// (its library folder in the sysroot); `None` when rustc cannot tell.
fn wasip2_installed(dir: &Path) -> Option<bool> {
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let out = Command::new(rustc)
        .current_dir(dir)
        .args(["--print", "sysroot"])
        .stderr(Stdio::null())
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let sysroot = String::from_utf8_lossy(&out.stdout).trim().to_string();
    Some(
        Path::new(&sysroot)
            .join("lib/rustlib/wasm32-wasip2")
            .is_dir(),
    )
}

fn build_rust(dir: &Path, fail: &dyn Fn(String) -> BuildError) -> Result<PathBuf, BuildError> {
    if wasip2_installed(dir) == Some(false) {
        return Err(BuildError::MissingToolchain {
            dir: dir.to_path_buf(),
            toolchain: "the Rust target `wasm32-wasip2`",
            install: "run `rustup target add wasm32-wasip2` (in the skill folder, so its \
                      toolchain gets it)"
                .into(),
        });
    }
    let cargo_toml = dir.join("Cargo.toml");
    let cargo_toml = cargo_toml
        .canonicalize()
        .map_err(|e| fail(format!("no Cargo.toml for the guest crate ({e})")))?;
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut child = Command::new(cargo)
        .current_dir(dir)
        .args([
            "build",
            "--release",
            "--target",
            "wasm32-wasip2",
            "--message-format=json-render-diagnostics",
        ])
        .arg("--manifest-path")
        .arg(&cargo_toml)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => BuildError::MissingToolchain {
                dir: dir.to_path_buf(),
                toolchain: "cargo",
                install: "install Rust with rustup, then run `rustup target add wasm32-wasip2`"
                    .into(),
            },
            _ => fail(format!("cannot run cargo: {e}")),
        })?;
    let mut artifact: Option<PathBuf> = None;
    if let Some(stdout) = child.stdout.take() {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let Ok(msg) = serde_json::from_str::<serde_json::Value>(&line) else {
                continue;
            };
            if msg["reason"] != "compiler-artifact" {
                continue;
            }
            let same_crate = msg["manifest_path"]
                .as_str()
                .and_then(|p| Path::new(p).canonicalize().ok())
                .is_some_and(|p| p == cargo_toml);
            if !same_crate {
                continue;
            }
            if let Some(files) = msg["filenames"].as_array() {
                for f in files.iter().filter_map(|f| f.as_str()) {
                    if f.ends_with(".wasm") {
                        artifact = Some(PathBuf::from(f));
                    }
                }
            }
        }
    }
    let status = child
        .wait()
        .map_err(|e| fail(format!("cargo did not finish: {e}")))?;
    if !status.success() {
        return Err(fail(format!(
            "cargo build failed ({status}); see the compiler output above"
        )));
    }
    let Some(artifact) = artifact else {
        return Err(fail(
            "cargo produced no .wasm for this crate: it must be a `cdylib` (`[lib] crate-type = [\"cdylib\"]`)".into(),
        ));
    };
    Ok(artifact)
}

/// Finds a toolchain program: `explicit` if given, else `env` if set, else
/// `local` (inside the skill folder), else `name` on `PATH`.
fn find_tool(explicit: Option<&PathBuf>, env: &str, local: &Path, name: &str) -> Option<PathBuf> {
    if let Some(p) = explicit {
        return Some(p.clone());
    }
    if let Some(p) = std::env::var_os(env) {
        return Some(PathBuf::from(p));
    }
    if local.is_file() {
        return Some(local.to_path_buf());
    }
    on_path(name)
}

/// The program `name` in a folder of `PATH`.
fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// Runs a toolchain command to its end, its output kept (and logged at
/// debug level) rather than shown: a failure is said in one line, by
/// `diagnose` (the toolchain's output and exit status go to it).
fn run_toolchain(
    mut cmd: Command,
    what: &str,
    fail: &dyn Fn(String) -> BuildError,
    diagnose: impl FnOnce(&str) -> Option<BuildError>,
) -> Result<(), BuildError> {
    let (status, output) =
        diagnose::run_captured(&mut cmd).map_err(|e| fail(format!("cannot run {what}: {e}")))?;
    tracing::debug!("{what}: {}", output.trim_end());
    if status.success() {
        return Ok(());
    }
    Err(diagnose(&output).unwrap_or_else(|| {
        fail(format!(
            "{what} failed ({status}): {}",
            diagnose::last_words(&output, 6)
        ))
    }))
}

/// A scratch folder holding the WIT package (in `wit/`) and the SDK.
fn scratch(sdk_name: &str, sdk: &str) -> std::io::Result<tempfile::TempDir> {
    let d = tempfile::Builder::new()
        .prefix("skillhost-build-")
        .tempdir()?;
    std::fs::create_dir(d.path().join("wit"))?;
    std::fs::write(d.path().join("wit/skill.wit"), SKILL_WIT)?;
    std::fs::create_dir(d.path().join("sdk"))?;
    std::fs::write(d.path().join("sdk").join(sdk_name), sdk)?;
    Ok(d)
}

/// componentize-py, where [`build_skill_with`] looks for it.
fn python_tool(dir: &Path, tools: &Toolchains) -> Result<Tool, BuildError> {
    let program = find_tool(
        tools.componentize_py.as_ref(),
        "SKILLHOST_COMPONENTIZE_PY",
        &dir.join(".venv/bin/componentize-py"),
        "componentize-py",
    )
    .ok_or_else(|| BuildError::MissingToolchain {
        dir: dir.to_path_buf(),
        toolchain: "componentize-py",
        install: format!(
            "run `python3 -m pip install componentize-py=={COMPONENTIZE_PY_VERSION}` (in a \
             venv: `python3 -m venv .venv` in the skill folder, then `.venv/bin/pip install \
             componentize-py=={COMPONENTIZE_PY_VERSION}`), or point SKILLHOST_COMPONENTIZE_PY at it"
        ),
    })?;
    Ok(Tool {
        program,
        node: None,
    })
}

fn build_python(
    dir: &Path,
    out: &Path,
    tool: &Tool,
    fail: &dyn Fn(String) -> BuildError,
) -> Result<(), BuildError> {
    let scratch = scratch("skillhost.py", PYTHON_SDK)
        .map_err(|e| fail(format!("cannot make a scratch folder: {e}")))?;
    let sdk = scratch.path().join("sdk");
    let vendored = vendor::python_vendor(dir);
    // The module path, in order: the skill folder, its vendor/, the SDK.
    // Each is the guest's `/N` in a traceback at build time (`diagnose`).
    let mut roots = vec![diagnose::PythonRoot {
        dir,
        shown: Some(""),
    }];
    if let Some(v) = &vendored {
        roots.push(diagnose::PythonRoot {
            dir: v,
            shown: Some(vendor::VENDOR_SHOWN),
        });
    }
    roots.push(diagnose::PythonRoot {
        dir: &sdk,
        shown: None,
    });
    let mut cmd = tool.command();
    cmd.current_dir(dir)
        .env("RUST_BACKTRACE", "0")
        .env("RUST_LIB_BACKTRACE", "0")
        .arg("-d")
        .arg(scratch.path().join("wit"))
        .args(["-w", "skill", "componentize", "app"]);
    for root in &roots {
        cmd.arg("-p").arg(root.dir);
    }
    cmd.arg("-o").arg(out);
    run_toolchain(
        cmd,
        &format!("componentize-py ({})", tool.program.display()),
        fail,
        |output| {
            let problem = diagnose::python(output, &roots)?;
            Some(BuildError::InSource {
                dir: dir.to_path_buf(),
                problem,
            })
        },
    )
}

/// componentize-js, where [`build_skill_with`] looks for it, and the
/// Node.js that runs it.
fn js_tool(dir: &Path, tools: &Toolchains) -> Result<Tool, BuildError> {
    let missing = |toolchain, install: String| BuildError::MissingToolchain {
        dir: dir.to_path_buf(),
        toolchain,
        install,
    };
    let program = find_tool(
        tools.componentize_js.as_ref(),
        "SKILLHOST_COMPONENTIZE_JS",
        &dir.join("node_modules/.bin/componentize-js"),
        "componentize-js",
    )
    .ok_or_else(|| {
        missing(
            "componentize-js",
            format!(
                "run `npm install --save-dev \
                 @bytecodealliance/componentize-js@{COMPONENTIZE_JS_VERSION}` in the skill folder \
                 (Node.js 20 or later), or point SKILLHOST_COMPONENTIZE_JS at it"
            ),
        )
    })?;
    // componentize-js is a Node.js script (`#!/usr/bin/env node`): without
    // a `node` to run it, say so rather than let the shell's words stand.
    let node = match &tools.node {
        Some(node) => Some(node.clone()),
        None if runs_on_node(&program) && on_path("node").is_none() => {
            return Err(missing(
                "Node.js (`node`, which runs componentize-js)",
                "install Node.js 20 or later, so that `node` is on PATH".into(),
            ));
        }
        None => None,
    };
    Ok(Tool { program, node })
}

/// Whether `program` is a script whose first line asks for `node`.
fn runs_on_node(program: &Path) -> bool {
    use std::io::Read as _;
    let mut head = [0u8; 128];
    let n = std::fs::File::open(program)
        .and_then(|mut f| f.read(&mut head))
        .unwrap_or(0);
    let first = head[..n].split(|b| *b == b'\n').next().unwrap_or_default();
    first.starts_with(b"#!") && String::from_utf8_lossy(first).contains("node")
}

fn build_js(
    dir: &Path,
    out: &Path,
    tool: &Tool,
    fail: &dyn Fn(String) -> BuildError,
) -> Result<(), BuildError> {
    let scratch = scratch("skillhost.js", JS_SDK)
        .map_err(|e| fail(format!("cannot make a scratch folder: {e}")))?;
    // The sources are staged beside the SDK, so `./skillhost.js` resolves
    // whether or not the folder has its own copy (its own wins).
    let stage = scratch.path().join("sdk");
    copy_sources(dir, &stage, 0).map_err(|e| fail(format!("cannot stage the sources: {e}")))?;
    let mut cmd = tool.command();
    cmd.current_dir(dir)
        .arg(stage.join("app.js"))
        .arg("--wit")
        .arg(scratch.path().join("wit"))
        .args(["-n", "skill", "-o"])
        .arg(out);
    let in_source = |problem| BuildError::InSource {
        dir: dir.to_path_buf(),
        problem,
    };
    run_toolchain(
        cmd,
        &format!("componentize-js ({})", tool.program.display()),
        fail,
        |output| {
            if let Some(problem) = diagnose::javascript(output, &stage) {
                return Some(in_source(problem));
            }
            if let Some(words) = diagnose::javascript_words(output, &stage) {
                return Some(fail(words));
            }
            // componentize-js's parse of app.js says only how many errors
            // it found: ask its parser where.
            if output.contains("failed to parse JS source") {
                return js_syntax_errors(tool, scratch.path(), &stage.join("app.js"))
                    .map(in_source);
            }
            None
        },
    )
}

/// The first syntax error componentize-js's own parser finds in `file`,
/// asked through the Node.js that runs componentize-js; `None` when it
/// cannot be asked.
fn js_syntax_errors(tool: &Tool, scratch: &Path, file: &Path) -> Option<SourceProblem> {
    let check = scratch.join("js_syntax.cjs");
    std::fs::write(&check, diagnose::JS_SYNTAX_CHECK).ok()?;
    let node = tool.node.clone().unwrap_or_else(|| "node".into());
    let mut cmd = Command::new(node);
    cmd.arg(&check).arg(&tool.program).arg(file);
    let (_, output) = diagnose::run_captured(&mut cmd).ok()?;
    diagnose::js_syntax(&output, file.parent()?)
}

/// Copies the `.js`/`.mjs`/`.json` files of `from` (and its folders, but
/// not `node_modules`, build output or hidden ones) into `to`.
fn copy_sources(from: &Path, to: &Path, depth: usize) -> std::io::Result<()> {
    if depth > 16 {
        return Ok(());
    }
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let name = entry.file_name();
        let name_s = name.to_string_lossy();
        let ty = entry.file_type()?;
        if ty.is_dir() {
            if name_s.starts_with('.') || matches!(&*name_s, "node_modules" | "target" | "assets") {
                continue;
            }
            std::fs::create_dir_all(to.join(&name))?;
            copy_sources(&entry.path(), &to.join(&name), depth + 1)?;
        } else if ty.is_file() && [".js", ".mjs", ".json"].iter().any(|x| name_s.ends_with(x)) {
            std::fs::copy(entry.path(), to.join(&name))?;
        }
    }
    Ok(())
}
