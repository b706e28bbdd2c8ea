//! Builds the Python script runtime the host embeds (`runtime/`): the
//! runner (`runtime/python/`, world `script-runtime` of
//! `runtime/wit/script.wit`) linked and pre-initialised by the pinned
//! componentize-py, and the standard library it was built with,
//! byte-compiled by its own CPython.
//!
//! Two componentize-py runs go side by side (and beside the plugins'
//! cargo build): one makes the runtime; the other, given a folder holding
//! a marker file as a second `-p` folder, makes the runner write the
//! standard library there as `stdlib.zip` while it is pre-initialised
//! (`runtime/python/stdlib_export.py`), and its component is thrown away:
//! exporting in the runtime's own run would leave the work's garbage in
//! the memory image every instance maps (20.7 MB component without it,
//! 25.6 MB with it). Both outputs are compressed with zstd into
//! `$OUT_DIR` and embedded by `script_runtime.rs` there.
//!
//! The build's inputs are named file by file (`rerun-if-changed` on the
//! folder would make cargo scan it, and componentize-py writes
//! `__pycache__` into it while it runs, so every next cargo command built
//! the runtime, and the host, again). The outputs are kept in
//! `<target>/script-runtime/<key>`, the key a digest of every input and of
//! the tool's version: a build of the host with other features (CI's
//! embedder check, an embedder's `--no-default-features`) reuses them
//! instead of running componentize-py twice more.
//!
//! componentize-py is found as the test suites find it:
//! `SKILLHOST_COMPONENTIZE_PY`, else `target/peers/venv/bin/componentize-py`
//! (`tests/peers/install.sh`), else `PATH`. Without it (or with another
//! version) the build still succeeds: a warning says the binary has no
//! script runtime and which command adds it, and the host answers every
//! script call with that.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// The componentize-py the runtime is built with (the same as
/// `COMPONENTIZE_PY_VERSION` in `skill/guest_build`).
const COMPONENTIZE_PY_VERSION: &str = "0.25.1";
/// The environment variable naming componentize-py.
const TOOL_ENV: &str = "SKILLHOST_COMPONENTIZE_PY";
/// The marker file that makes the runner export the standard library.
const EXPORT_MARKER: &str = "skillhost-export";
/// zstd level of the embedded files: 6.2 MB for each of the two at 9,
/// against 7.2 MB at 3 (a second of the build) and 5.5 MB at 19 (half a
/// minute).
const ZSTD_LEVEL: i32 = 9;

/// The command that installs what the runtime is built with.
fn install_hint() -> String {
    format!(
        "run tests/peers/install.sh (it installs componentize-py {COMPONENTIZE_PY_VERSION} into \
         target/peers), or `pip install componentize-py=={COMPONENTIZE_PY_VERSION}` and set \
         {TOOL_ENV} to it, then build again"
    )
}

/// The runtime: taken from the cache, or its two componentize-py runs,
/// going.
pub enum Building {
    /// Built earlier from the same inputs by the same tool: the folder in
    /// the cache and the component's sha256.
    Cached { dir: PathBuf, sha256: String },
    /// Being built; `cache` is where the outputs are kept once made.
    Running {
        runtime: Child,
        export: Child,
        work: PathBuf,
        tool: PathBuf,
        cache: PathBuf,
    },
}

/// The files the runtime is built from, relative to the workspace root:
/// the runner's Python sources (without byte-code caches), its WIT world
/// and this build step.
fn inputs(root: &Path) -> Result<Vec<PathBuf>, String> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), String> {
        let entries = std::fs::read_dir(root.join(dir))
            .map_err(|e| format!("cannot read {}: {e}", root.join(dir).display()))?;
        for entry in entries {
            let entry = entry.map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
            let name = entry.file_name();
            let rel = dir.join(&name);
            let kind = entry
                .file_type()
                .map_err(|e| format!("cannot read {}: {e}", rel.display()))?;
            if kind.is_dir() {
                if name != "__pycache__" {
                    walk(root, &rel, out)?;
                }
            } else if rel.extension().is_none_or(|ext| ext != "pyc") {
                out.push(rel);
            }
        }
        Ok(())
    }
    let mut files = Vec::new();
    walk(root, Path::new("runtime/python"), &mut files)?;
    files.sort();
    files.push(PathBuf::from("runtime/wit/script.wit"));
    files.push(PathBuf::from("host/build/script_runtime.rs"));
    Ok(files)
}

/// The cache key: a digest of every input's path and bytes, the tool's
/// version line and the compression level.
fn cache_key(root: &Path, files: &[PathBuf], version: &str) -> Result<String, String> {
    use sha2::Digest as _;
    let mut digest = sha2::Sha256::new();
    for file in files {
        let bytes = std::fs::read(root.join(file))
            .map_err(|e| format!("cannot read {}: {e}", root.join(file).display()))?;
        let path = file.to_string_lossy();
        for part in [path.as_bytes(), &bytes] {
            digest.update((part.len() as u64).to_le_bytes());
            digest.update(part);
        }
    }
    digest.update(version.trim().as_bytes());
    digest.update(ZSTD_LEVEL.to_le_bytes());
    Ok(hex::encode(digest.finalize()))
}

/// The two compressed outputs, as named in a cache folder and `$OUT_DIR`.
const OUTPUTS: [&str; 2] = ["script_runtime.wasm.zst", "stdlib.zip.zst"];
/// The file of a cache folder holding the component's sha256.
const SHA256_FILE: &str = "sha256";

/// Starts building the runtime (or finds it in the cache), or says why it
/// cannot be (the reason goes into the binary and a build warning).
pub fn start(root: &Path, out_dir: &Path) -> Result<Building, String> {
    println!("cargo:rerun-if-env-changed={TOOL_ENV}");
    let files = inputs(root)?;
    for file in &files {
        println!("cargo:rerun-if-changed={}", root.join(file).display());
    }
    let tool = find_tool(root)?;
    // Built again when the tool is replaced.
    println!("cargo:rerun-if-changed={}", tool.display());
    let version = Command::new(&tool)
        .arg("--version")
        .output()
        .map_err(|e| format!("componentize-py ({}) does not run: {e}", tool.display()))?;
    let version = String::from_utf8_lossy(&version.stdout);
    if version.split_whitespace().nth(1) != Some(COMPONENTIZE_PY_VERSION) {
        return Err(format!(
            "{} is `{}`, not componentize-py {COMPONENTIZE_PY_VERSION}",
            tool.display(),
            version.trim()
        ));
    }
    // OUT_DIR is <target>[/<triple>]/<profile>/build/<package>/out.
    let caches = out_dir
        .ancestors()
        .nth(4)
        .unwrap_or(out_dir)
        .join("script-runtime");
    let cache = caches.join(cache_key(root, &files, &version)?);
    if let Ok(sha256) = std::fs::read_to_string(cache.join(SHA256_FILE)) {
        return Ok(Building::Cached { dir: cache, sha256 });
    }
    let work = out_dir.join("script-runtime");
    let export_dir = work.join("export");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&export_dir)
        .map_err(|e| format!("cannot create {}: {e}", export_dir.display()))?;
    std::fs::write(export_dir.join(EXPORT_MARKER), b"")
        .map_err(|e| format!("cannot write the export marker: {e}"))?;
    let run = |extra: Option<&Path>, output: &Path| -> Result<Child, String> {
        let mut cmd = Command::new(&tool);
        cmd.current_dir(&work)
            .arg("-q")
            .arg("-d")
            .arg(root.join("runtime/wit"))
            .args(["-w", "script-runtime", "componentize", "runner", "-p"])
            .arg(root.join("runtime/python"));
        if let Some(dir) = extra {
            cmd.arg("-p").arg(dir);
        }
        // No virtual environment's packages on the runtime's path.
        cmd.arg("-o")
            .arg(output)
            .env_remove("VIRTUAL_ENV")
            .env_remove("PYTHONPATH")
            .stdin(Stdio::null());
        cmd.spawn()
            .map_err(|e| format!("cannot run componentize-py ({}): {e}", tool.display()))
    };
    let runtime = run(None, &work.join("runtime.wasm"))?;
    let export = run(Some(&export_dir), &work.join("export.wasm"))?;
    Ok(Building::Running {
        runtime,
        export,
        work,
        tool,
        cache,
    })
}

/// componentize-py: the environment variable's, else `target/peers`'s,
/// else the first on `PATH`.
fn find_tool(root: &Path) -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os(TOOL_ENV) {
        let path = PathBuf::from(path);
        return if path.is_file() {
            Ok(path)
        } else {
            Err(format!(
                "{TOOL_ENV} names {}, which is not a file",
                path.display()
            ))
        };
    }
    let peers = root.join("target/peers/venv/bin/componentize-py");
    if peers.is_file() {
        return Ok(peers);
    }
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join("componentize-py"))
        .find(|p| p.is_file())
        .ok_or_else(|| "componentize-py is not installed".to_string())
}

impl Building {
    /// Waits for both runs (unless cached) and leaves the compressed
    /// outputs in `out_dir`: `script_runtime.wasm.zst` and `stdlib.zip.zst`;
    /// returns the runtime's sha256 (hex), which keys its compiled code.
    pub fn finish(self, out_dir: &Path) -> Result<String, String> {
        let (mut runtime, mut export, work, tool, cache) = match self {
            Building::Cached { dir, sha256 } => {
                for name in OUTPUTS {
                    std::fs::copy(dir.join(name), out_dir.join(name))
                        .map_err(|e| format!("cannot copy {name} from {}: {e}", dir.display()))?;
                }
                return Ok(sha256);
            }
            Building::Running {
                runtime,
                export,
                work,
                tool,
                cache,
            } => (runtime, export, work, tool, cache),
        };
        let tool = tool.display().to_string();
        for (child, what) in [
            (&mut runtime, "the script runtime"),
            (&mut export, "the standard library's export"),
        ] {
            let status = child
                .wait()
                .map_err(|e| format!("componentize-py ({tool}) for {what}: {e}"))?;
            if !status.success() {
                return Err(format!(
                    "componentize-py ({tool}) failed building {what} ({status}); see its output \
                     above"
                ));
            }
        }
        let stdlib = work.join("export").join("stdlib.zip");
        let mut sha256 = String::new();
        for (from, to) in [
            (work.join("runtime.wasm"), OUTPUTS[0]),
            (stdlib, OUTPUTS[1]),
        ] {
            let bytes = std::fs::read(&from)
                .map_err(|e| format!("{} was not made: {e}", from.display()))?;
            if sha256.is_empty() {
                use sha2::Digest as _;
                sha256 = hex::encode(sha2::Sha256::digest(&bytes));
            }
            let packed = zstd::bulk::compress(&bytes, ZSTD_LEVEL)
                .map_err(|e| format!("cannot compress {}: {e}", from.display()))?;
            std::fs::write(out_dir.join(to), packed)
                .map_err(|e| format!("cannot write {to}: {e}"))?;
        }
        // Only the compressed files stay.
        let _ = std::fs::remove_dir_all(&work);
        keep(out_dir, &cache, &sha256);
        Ok(sha256)
    }
}

/// Keeps the outputs in the cache: written into a folder of their own,
/// then renamed into place, so a build running beside this one sees all of
/// them or none; other keys' folders (older inputs) are removed. A cache
/// that cannot be written costs the next build its time, nothing else.
fn keep(out_dir: &Path, cache: &Path, sha256: &str) {
    let Some(caches) = cache.parent() else {
        return;
    };
    let staging = caches.join(format!(".staging-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&staging);
    let written = std::fs::create_dir_all(&staging).is_ok()
        && OUTPUTS
            .iter()
            .all(|name| std::fs::copy(out_dir.join(name), staging.join(name)).is_ok())
        && std::fs::write(staging.join(SHA256_FILE), sha256).is_ok();
    if !written || std::fs::rename(&staging, cache).is_err() {
        let _ = std::fs::remove_dir_all(&staging);
        return;
    }
    if let Ok(entries) = std::fs::read_dir(caches) {
        for entry in entries.flatten() {
            let stale =
                entry.path() != cache && !entry.file_name().to_string_lossy().starts_with('.');
            if stale {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
    }
}

/// The generated `script_runtime.rs`: the embedded runtime, or why this
/// build has none.
pub fn generated(out_dir: &Path, built: Result<String, String>) -> String {
    let mut out = String::from("// Generated by host/build/script_runtime.rs. Do not edit.\n");
    match built {
        Ok(sha256) => {
            out.push_str(&format!(
                "/// The built-in script runtime: the component and the standard library\n\
                 /// archive, zstd-compressed, and the component's sha256.\n\
                 pub(crate) const EMBEDDED: Result<Embedded, &str> = Ok(Embedded {{\n    \
                 component: include_bytes!({component:?}),\n    \
                 stdlib: include_bytes!({stdlib:?}),\n    \
                 sha256: {sha256:?},\n}});\n",
                component = out_dir
                    .join("script_runtime.wasm.zst")
                    .display()
                    .to_string(),
                stdlib = out_dir.join("stdlib.zip.zst").display().to_string(),
            ));
        }
        Err(why) => {
            println!(
                "cargo:warning=this build has no script runtime (skill scripts will not run): \
                 {why}; {}",
                install_hint()
            );
            out.push_str(&format!(
                "/// Why this build has no script runtime, and what adds it.\n\
                 pub(crate) const EMBEDDED: Result<Embedded, &str> = Err({:?});\n",
                format!(
                    "this skillhost was built without its script runtime ({why}): {}",
                    install_hint()
                )
            ));
        }
    }
    out
}
