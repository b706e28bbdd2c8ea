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

/// The two componentize-py runs, going.
pub struct Building {
    runtime: Child,
    export: Child,
    work: PathBuf,
    tool: PathBuf,
}

/// Starts building the runtime, or says why it cannot be (the reason goes
/// into the binary and a build warning).
pub fn start(root: &Path, out_dir: &Path) -> Result<Building, String> {
    println!("cargo:rerun-if-env-changed={TOOL_ENV}");
    for path in [
        "runtime/python",
        "runtime/wit/script.wit",
        "host/build/script_runtime.rs",
    ] {
        println!("cargo:rerun-if-changed={}", root.join(path).display());
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
    Ok(Building {
        runtime,
        export,
        work,
        tool,
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
    /// Waits for both runs and compresses their outputs into `out_dir`:
    /// `script_runtime.wasm.zst` and `stdlib.zip.zst`; the runtime's sha256
    /// (hex), which keys its compiled code.
    pub fn finish(mut self, out_dir: &Path) -> Result<String, String> {
        let tool = self.tool.display().to_string();
        for (child, what) in [
            (&mut self.runtime, "the script runtime"),
            (&mut self.export, "the standard library's export"),
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
        let stdlib = self.work.join("export").join("stdlib.zip");
        let mut sha256 = String::new();
        for (from, to) in [
            (self.work.join("runtime.wasm"), "script_runtime.wasm.zst"),
            (stdlib, "stdlib.zip.zst"),
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
        let _ = std::fs::remove_dir_all(&self.work);
        Ok(sha256)
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
