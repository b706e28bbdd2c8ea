//! Skill scripts: the built-in Python runtime, and one script of a skill
//! run per call inside the sandbox, as `python3 script args…` would run it
//! on a machine with no Python.
//!
//! The runtime (`runtime/`: CPython 3.14 from componentize-py and the
//! project's runner, built by `host/build/script_runtime.rs`) is embedded in
//! the binary with the standard library it was built with, byte-compiled.
//! A [`Sandbox`] loads it once ([`Sandbox::script_runtime`]), through the
//! compiled-code cache. Every call is a fresh instance under the call's
//! [`Limits`](crate::Limits) and sees, through the in-memory filesystem
//! (`vfs/`), exactly:
//!
//! | path | what | |
//! |---|---|---|
//! | `/python` | the standard library | read-only, one tree per process |
//! | `/pycache` | byte-code: `python/` the library's, `skill/` the skill's ([`PycTree`]) | read-only |
//! | `/skill` | the skill's folder ([`SkillFiles`]) | read-only |
//! | `/scratch` | the working folder: the call's input files, `out/` (what comes back), `.tmp/` (`TMPDIR`) | in memory, capped, dropped with the call |
//!
//! and nothing else: no environment but `TMPDIR`, no program to start, no
//! socket (`runtime/python/policy.py` names what the sandbox does not
//! offer in each refusal).

use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use wasmtime::Store;

use super::component::{
    bind_spare, check_header, classify, compile, deadline_of, new_store, take_stdio, timed_out,
};
use super::outcome::{CallError, CallFailure, ToolError, TrapReason};
use super::spare::{Held, MakesSpares, Making, Spares};
use super::state::{CallBinding, CallIdentity, CallReach, CallState};
use super::vfs::name;
use super::vfs::scratch::{IN_FLIGHT, PutError, Scratch, ScratchCaps};
use super::vfs::tree::{self, OnEscape, RoDir, RoEntry, TreeError};
use super::vfs::{Mount, MountRoot, ScratchLimit, Vfs};
use super::{CallOptions, LoadError, Sandbox, SandboxInner, imports};
use crate::limits::{
    Limits, MAX_SCRATCH_BYTES, MAX_SCRATCH_FILES, MAX_SCRIPT_ARG_BYTES, MAX_SCRIPT_ARGS,
    MAX_SCRIPT_INPUT_BYTES, MAX_SCRIPT_INPUT_FILES, MAX_SCRIPT_OUTPUT_BYTES,
    MAX_SCRIPT_OUTPUT_FILES, MAX_SCRIPT_STDIN_BYTES, SCRIPT_STDOUT_KEPT_BYTES,
};

mod wit {
    wasmtime::component::bindgen!({
        world: "skillhost:script/script-runtime",
        path: "../runtime/wit",
        exports: { default: async },
    });
}

mod embedded {
    /// The embedded runtime: its component and the standard library's
    /// archive, both zstd-compressed.
    pub(crate) struct Embedded {
        pub component: &'static [u8],
        pub stdlib: &'static [u8],
        /// The uncompressed component's sha256 (hex): its compiled code
        /// is looked up by it before anything is unpacked.
        pub sha256: &'static str,
    }

    include!(concat!(env!("OUT_DIR"), "/script_runtime.rs"));
}

/// Where the guest finds each part of its filesystem.
const PYTHON: &str = "/python";
const PYCACHE: &str = "/pycache";
const SKILL: &str = "/skill";
const SCRATCH: &str = "/scratch";
/// The folder of the scratch folder whose files come back.
const OUT: &str = "out";
/// The scratch folder's `TMPDIR`.
const TMP: &str = ".tmp";
/// The label the runtime is loaded and compiled under.
const RUNTIME_LABEL: &str = "script-runtime";

/// Why the script runtime, or a skill's files for it, could not be had.
///
/// ```
/// let e = skillhost::ScriptRuntimeError::SymlinkOut {
///     dir: "skills/pdf".into(),
///     path: "scripts/data".into(),
/// };
/// assert!(e.to_string().contains("scripts/data"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScriptRuntimeError {
    /// This binary was built without the runtime (no componentize-py at
    /// build time). The message names the command that adds it.
    #[error("{message}")]
    NotBuilt {
        /// What happened and what to run.
        message: String,
    },
    /// The embedded runtime could not be loaded.
    #[error("the script runtime cannot be loaded: {message}")]
    Load {
        /// Why.
        message: String,
    },
    /// A symbolic link in a skill's folder leads out of it: its scripts
    /// would read what the operator did not approve.
    #[error(
        "the skill folder {dir} has a symbolic link that leads out of it: {path}; its scripts \
         cannot run until it is removed or made a file"
    )]
    SymlinkOut {
        /// The folder.
        dir: String,
        /// The link, relative to it.
        path: String,
    },
    /// A skill's folder is over a cap of the in-memory filesystem.
    #[error("the skill folder {dir} is too large for its scripts: {detail}")]
    FolderTooLarge {
        /// The folder.
        dir: String,
        /// Which cap.
        detail: String,
    },
    /// A skill's folder could not be read (or holds a name that cannot be
    /// shown to a script).
    #[error("the skill folder {dir} cannot be read: {message}")]
    FolderUnreadable {
        /// The folder.
        dir: String,
        /// Why.
        message: String,
    },
    /// A byte-code archive could not be read.
    #[error("the byte-code archive cannot be read: {message}")]
    PycArchive {
        /// Why.
        message: String,
    },
}

/// A skill's folder as its scripts see it at `/skill`: read once into a
/// read-only tree in host memory, shared by every call that runs one of
/// its scripts. Cheap to clone behind its `Arc`.
///
/// ```no_run
/// let files = skillhost::SkillFiles::from_dir(std::path::Path::new("skills/pdf")).unwrap();
/// assert!(files.has_file("scripts/check_fillable_fields.py"));
/// ```
#[derive(Debug)]
pub struct SkillFiles {
    label: String,
    tree: Arc<RoDir>,
    pyc: Option<Arc<RoDir>>,
}

impl SkillFiles {
    /// Reads the folder `dir`: symbolic links that stay inside are read as
    /// what they point to; one that leads out refuses the folder, naming
    /// it; `.git` and `__pycache__` folders are left out; at most
    /// `MAX_SKILL_TREE_BYTES` and `MAX_SKILL_TREE_FILES`. Labelled with
    /// the folder's name until [`labelled`](Self::labelled).
    ///
    /// ```
    /// let err = skillhost::SkillFiles::from_dir(std::path::Path::new("/nonexistent")).unwrap_err();
    /// assert!(matches!(err, skillhost::ScriptRuntimeError::FolderUnreadable { .. }));
    /// ```
    pub fn from_dir(dir: &Path) -> Result<Arc<SkillFiles>, ScriptRuntimeError> {
        let shown = dir.display().to_string();
        let tree = tree::read_folder(dir, OnEscape::Refuse).map_err(|e| match e {
            TreeError::SymlinkOut { path } => ScriptRuntimeError::SymlinkOut { dir: shown, path },
            TreeError::TooLarge { .. } | TreeError::TooMany { .. } | TreeError::TooDeep { .. } => {
                ScriptRuntimeError::FolderTooLarge {
                    dir: shown,
                    detail: e.to_string(),
                }
            }
            other => ScriptRuntimeError::FolderUnreadable {
                dir: shown,
                message: other.to_string(),
            },
        })?;
        let label = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "skill".into());
        Ok(Arc::new(SkillFiles {
            label,
            tree,
            pyc: None,
        }))
    }

    /// The same files under `label` (`name@version`), which errors name.
    ///
    /// ```no_run
    /// # let files = skillhost::SkillFiles::from_dir(std::path::Path::new("skills/pdf")).unwrap();
    /// let files = files.labelled("pdf@1.0.0");
    /// assert_eq!(files.label(), "pdf@1.0.0");
    /// ```
    pub fn labelled(self: &Arc<Self>, label: &str) -> Arc<SkillFiles> {
        Arc::new(SkillFiles {
            label: label.into(),
            tree: self.tree.clone(),
            pyc: self.pyc.clone(),
        })
    }

    /// The same files with `pyc`, the byte-code [`ScriptRuntime::compile`]
    /// made of them, mounted at `/pycache/skill` so no call compiles their
    /// sources again.
    ///
    /// ```no_run
    /// # async fn f(rt: skillhost::ScriptRuntime, files: std::sync::Arc<skillhost::SkillFiles>) {
    /// let pyc = rt.compile(&files).await.unwrap();
    /// let files = files.with_pyc(&pyc);
    /// # }
    /// ```
    pub fn with_pyc(self: &Arc<Self>, pyc: &PycTree) -> Arc<SkillFiles> {
        Arc::new(SkillFiles {
            label: self.label.clone(),
            tree: self.tree.clone(),
            pyc: Some(pyc.tree.clone()),
        })
    }

    /// The label errors name.
    ///
    /// ```no_run
    /// # let files = skillhost::SkillFiles::from_dir(std::path::Path::new("skills/pdf")).unwrap();
    /// assert_eq!(files.label(), "pdf");
    /// ```
    pub fn label(&self) -> &str {
        &self.label
    }

    /// Whether the folder holds a file at the relative, `/`-separated
    /// `path`.
    ///
    /// ```no_run
    /// # let files = skillhost::SkillFiles::from_dir(std::path::Path::new("skills/pdf")).unwrap();
    /// assert!(!files.has_file("../etc/passwd"));
    /// ```
    pub fn has_file(&self, path: &str) -> bool {
        name::check_path(path).is_ok() && matches!(self.tree.lookup(path), Some(RoEntry::File(_)))
    }

    /// Every file's relative path, in name order.
    ///
    /// ```no_run
    /// # let files = skillhost::SkillFiles::from_dir(std::path::Path::new("skills/pdf")).unwrap();
    /// for path in files.paths() { println!("{path}"); }
    /// ```
    pub fn paths(&self) -> Vec<String> {
        self.tree.files().into_iter().map(|(p, _)| p).collect()
    }

    /// The bytes of the file at `path`, if there is one.
    ///
    /// ```no_run
    /// # let files = skillhost::SkillFiles::from_dir(std::path::Path::new("skills/pdf")).unwrap();
    /// let md = files.read("SKILL.md");
    /// ```
    pub fn read(&self, path: &str) -> Option<Bytes> {
        match self.tree.lookup(path) {
            Some(RoEntry::File(f)) if name::check_path(path).is_ok() => Some(f.data.clone()),
            _ => None,
        }
    }
}

/// The byte-code of a skill's Python files, made by the runtime's own
/// CPython at install ([`ScriptRuntime::compile`]): unchecked-hash `.pyc`
/// files, by the path of their source under `/skill`
/// (`scripts/x.cpython-314.pyc` for `scripts/x.py`). Kept beside an install
/// as an archive ([`to_archive`](Self::to_archive)) and mounted read-only
/// on later runs ([`SkillFiles::with_pyc`]).
#[derive(Debug, Clone)]
pub struct PycTree {
    tree: Arc<RoDir>,
    failed: Vec<(String, String)>,
}

impl PycTree {
    /// The tree as a zip archive of stored entries: the same tree always
    /// gives the same bytes.
    ///
    /// ```no_run
    /// # fn f(pyc: skillhost::PycTree) {
    /// let bytes = pyc.to_archive();
    /// let back = skillhost::PycTree::from_archive(&bytes).unwrap();
    /// assert_eq!(back.paths(), pyc.paths());
    /// # }
    /// ```
    pub fn to_archive(&self) -> Vec<u8> {
        tree::write_archive(&self.tree)
    }

    /// A tree read back from [`to_archive`](Self::to_archive)'s bytes.
    ///
    /// ```
    /// assert!(skillhost::PycTree::from_archive(b"not a zip").is_err());
    /// ```
    pub fn from_archive(bytes: &[u8]) -> Result<PycTree, ScriptRuntimeError> {
        let tree = tree::read_archive(bytes).map_err(|e| ScriptRuntimeError::PycArchive {
            message: e.to_string(),
        })?;
        Ok(PycTree {
            tree,
            failed: Vec::new(),
        })
    }

    /// Every `.pyc` file's relative path, in name order.
    ///
    /// ```no_run
    /// # fn f(pyc: skillhost::PycTree) { assert!(pyc.paths().iter().all(|p| p.ends_with(".pyc"))); }
    /// ```
    pub fn paths(&self) -> Vec<String> {
        self.tree.files().into_iter().map(|(p, _)| p).collect()
    }

    /// The files that did not compile, each with CPython's error (a script
    /// importing one gets the same error); empty for a tree read back from
    /// an archive.
    ///
    /// ```no_run
    /// # fn f(pyc: skillhost::PycTree) { for (path, error) in pyc.failed() { println!("{path}: {error}"); } }
    /// ```
    pub fn failed(&self) -> &[(String, String)] {
        &self.failed
    }
}

/// One script call.
///
/// ```no_run
/// # fn f(files: std::sync::Arc<skillhost::SkillFiles>) {
/// let request = skillhost::ScriptRequest {
///     skill: files,
///     script: "scripts/extract_form_field_info.py".into(),
///     args: vec!["form.pdf".into(), "out/fields.json".into()],
///     stdin: Vec::new(),
///     inputs: vec![("form.pdf".into(), bytes::Bytes::from_static(b"%PDF-1.7"))],
/// };
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct ScriptRequest {
    /// The skill's files.
    pub skill: Arc<SkillFiles>,
    /// Path of the script in the skill folder, `/`-separated
    /// (`scripts/x.py`). Only `.py` runs; any other extension is a refusal
    /// naming the interpreter it would need ([`Interpreter`]).
    pub script: String,
    /// Its arguments (`sys.argv[1:]`).
    pub args: Vec<String>,
    /// What it reads on stdin.
    pub stdin: Vec<u8>,
    /// Files placed in the scratch folder before the script runs, by
    /// relative `/`-separated name (sub-folders allowed; the names are
    /// checked again here).
    pub inputs: Vec<(String, Bytes)>,
}

/// What a script call gave back.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ScriptRun {
    /// Its exit code (0 when it ended without `sys.exit`; 1 after an
    /// uncaught exception, whose traceback is on stderr).
    pub exit_code: i32,
    /// Its stdout: the first `SCRIPT_STDOUT_KEPT_BYTES`, control characters
    /// escaped, secrets redacted (as a tool's stdio is).
    pub stdout: String,
    /// Its stderr, kept the same way.
    pub stderr: String,
    /// Whether stdout went on past what is kept.
    pub stdout_truncated: bool,
    /// Whether stderr went on past what is kept.
    pub stderr_truncated: bool,
    /// Every file the script left under `out/` in the scratch folder
    /// (relative to `out/`), in name order.
    #[serde(skip)]
    pub outputs: Vec<(String, Bytes)>,
    /// The scratch cap the script ran into, if any (so an error can name
    /// it).
    pub scratch_limit: Option<ScratchLimit>,
    /// Fuel used.
    pub fuel_consumed: u64,
    /// Wall-clock time of the call, instantiation included.
    #[serde(skip)]
    pub duration: Duration,
}

/// The interpreter a script needs, by its file's extension.
///
/// ```
/// use skillhost::Interpreter;
/// assert_eq!(Interpreter::of("scripts/x.py"), Interpreter::Python);
/// assert_eq!(Interpreter::of("scripts/init.sh"), Interpreter::Shell("sh"));
/// assert!(Interpreter::of("x.sh").refusal("x.sh").unwrap().contains("shell script"));
/// assert!(Interpreter::Python.refusal("x.py").is_none());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(tag = "interpreter", content = "name", rename_all = "kebab-case")]
pub enum Interpreter {
    /// Python (`.py`): the one the sandbox runs.
    Python,
    /// A shell (`.sh`, `.bash`, `.zsh`): which one.
    Shell(&'static str),
    /// JavaScript or TypeScript (`.js`, `.mjs`, `.cjs`, `.ts`).
    JavaScript,
    /// Another interpreter the sandbox does not have (Ruby, Perl,
    /// PowerShell, Windows batch): its name.
    Other(&'static str),
    /// No extension the sandbox knows.
    Unknown,
}

impl Interpreter {
    /// The interpreter `path` needs.
    pub fn of(path: &str) -> Interpreter {
        let file = path.rsplit('/').next().unwrap_or(path);
        let ext = match file.rsplit_once('.') {
            Some((stem, ext)) if !stem.is_empty() => ext.to_ascii_lowercase(),
            _ => return Interpreter::Unknown,
        };
        match ext.as_str() {
            "py" => Interpreter::Python,
            "sh" => Interpreter::Shell("sh"),
            "bash" => Interpreter::Shell("bash"),
            "zsh" => Interpreter::Shell("zsh"),
            "ksh" => Interpreter::Shell("ksh"),
            "js" | "mjs" | "cjs" | "ts" => Interpreter::JavaScript,
            "rb" => Interpreter::Other("Ruby"),
            "pl" => Interpreter::Other("Perl"),
            "ps1" => Interpreter::Other("PowerShell"),
            "bat" | "cmd" => Interpreter::Other("Windows batch (cmd.exe)"),
            _ => Interpreter::Unknown,
        }
    }

    /// The interpreter the script at `path` whose file starts with `head`
    /// needs: its extension decides, and for a shell script its `#!` line
    /// names which shell.
    ///
    /// ```
    /// use skillhost::Interpreter;
    /// assert_eq!(Interpreter::of_script("init.sh", b"#!/bin/bash\nset -e\n"), Interpreter::Shell("bash"));
    /// assert_eq!(Interpreter::of_script("run.sh", b"#!/usr/bin/env zsh\n"), Interpreter::Shell("zsh"));
    /// assert_eq!(Interpreter::of_script("x.py", b"#!/bin/bash\n"), Interpreter::Python);
    /// ```
    pub fn of_script(path: &str, head: &[u8]) -> Interpreter {
        let by_name = Interpreter::of(path);
        let Interpreter::Shell(_) = by_name else {
            return by_name;
        };
        let line = head.split(|b| *b == b'\n').next().unwrap_or_default();
        let Some(line) = line.strip_prefix(b"#!") else {
            return by_name;
        };
        let line = String::from_utf8_lossy(line);
        let mut words = line.split_whitespace();
        let mut program = words
            .next()
            .unwrap_or_default()
            .rsplit('/')
            .next()
            .unwrap_or_default();
        if program == "env" {
            program = words.next().unwrap_or_default();
        }
        for shell in ["bash", "zsh", "dash", "ksh", "sh"] {
            if program == shell {
                return Interpreter::Shell(shell);
            }
        }
        by_name
    }

    /// Why `script` cannot run in the sandbox, or `None` for Python.
    pub fn refusal(self, script: &str) -> Option<String> {
        match self {
            Interpreter::Python => None,
            Interpreter::Shell(shell) => Some(format!(
                "{script} is a shell script ({shell}): the sandbox runs Python only, and a shell \
                 script needs a shell and other programs it cannot start"
            )),
            Interpreter::JavaScript => Some(format!(
                "{script} is a JavaScript file: the sandbox runs Python scripts only (JavaScript \
                 is not supported yet)"
            )),
            Interpreter::Other(name) => Some(format!(
                "{script} needs {name}, which the sandbox does not have: it runs Python scripts \
                 only"
            )),
            Interpreter::Unknown => Some(format!(
                "{script} is not a Python script (`.py`): the sandbox runs Python scripts only"
            )),
        }
    }
}

/// The standard library, unpacked once per process.
struct Stdlib {
    /// `/python`.
    python: Arc<RoDir>,
    /// `/pycache/python`.
    pyc: Arc<RoDir>,
}

static STDLIB: OnceLock<Result<Arc<Stdlib>, String>> = OnceLock::new();

fn stdlib(packed: &[u8]) -> Result<Arc<Stdlib>, ScriptRuntimeError> {
    STDLIB
        .get_or_init(|| {
            let zip = zstd::decode_all(packed).map_err(|e| format!("cannot unpack: {e}"))?;
            let tree = tree::read_archive(&zip).map_err(|e| e.to_string())?;
            let dir = |path: &str| match tree.lookup(path) {
                Some(RoEntry::Dir(d)) => Ok(d),
                _ => Err(format!("the archive has no `{path}` folder")),
            };
            Ok(Arc::new(Stdlib {
                python: dir("python")?,
                pyc: dir("pycache/python")?,
            }))
        })
        .clone()
        .map_err(|message| ScriptRuntimeError::Load { message })
}

/// The runtime as a sandbox loaded it.
pub(crate) struct LoadedRuntime {
    pre: wit::ScriptRuntimePre<CallState>,
    stdlib: Arc<Stdlib>,
    sha256: String,
    from_cache: bool,
    spares: Arc<Spares<wit::ScriptRuntime>>,
}

/// Loads the embedded runtime into `sandbox` (see [`Sandbox::script_runtime`]).
pub(crate) fn load(sandbox: &SandboxInner) -> Result<Arc<LoadedRuntime>, ScriptRuntimeError> {
    load_from(sandbox, embedded::EMBEDDED)
}

/// Loads `embedded`, or says why this build has none.
fn load_from(
    sandbox: &SandboxInner,
    embedded: Result<embedded::Embedded, &str>,
) -> Result<Arc<LoadedRuntime>, ScriptRuntimeError> {
    let embedded = embedded.map_err(|message| ScriptRuntimeError::NotBuilt {
        message: message.to_string(),
    })?;
    let load_err = |e: LoadError| ScriptRuntimeError::Load { message: e.message };
    let stdlib = stdlib(embedded.stdlib)?;
    // Compiled code the cache holds for these very bytes was checked when
    // it was compiled: nothing is unpacked for it.
    let cached = sandbox
        .cache
        .as_ref()
        .and_then(|c| c.load(&sandbox.engine, embedded.sha256));
    let (component, sha256, from_cache) = match cached {
        Some(c) => (c, embedded.sha256.to_string(), true),
        None => {
            let wasm =
                zstd::decode_all(embedded.component).map_err(|e| ScriptRuntimeError::Load {
                    message: format!("cannot unpack the component: {e}"),
                })?;
            check_header(RUNTIME_LABEL, &wasm).map_err(load_err)?;
            imports::check_script_runtime(&wasm).map_err(|e| ScriptRuntimeError::Load {
                message: match e {
                    imports::SurfaceError::Malformed(m) | imports::SurfaceError::Refused(m) => m,
                },
            })?;
            compile(sandbox, RUNTIME_LABEL, &wasm).map_err(load_err)?
        }
    };
    let pre = sandbox
        .linker
        .instantiate_pre(&component)
        .and_then(wit::ScriptRuntimePre::new)
        .map_err(|e| ScriptRuntimeError::Load {
            message: format!("cannot link: {e}"),
        })?;
    Ok(Arc::new(LoadedRuntime {
        pre,
        stdlib,
        sha256,
        from_cache,
        spares: Arc::default(),
    }))
}

impl Sandbox {
    /// The built-in Python script runtime, loaded once per sandbox (the
    /// first call compiles it, tens of seconds, or takes it from the
    /// compiled-code cache in milliseconds; later calls are free). Errors
    /// are kept too: [`ScriptRuntimeError::NotBuilt`] when this binary was
    /// built without componentize-py (its message names the command that
    /// adds it).
    ///
    /// ```no_run
    /// let sandbox = skillhost::SandboxBuilder::new().build().unwrap();
    /// match sandbox.script_runtime() {
    ///     Ok(rt) => println!("runtime {}", rt.sha256()),
    ///     Err(e) => eprintln!("{e}"),
    /// }
    /// ```
    pub fn script_runtime(&self) -> Result<ScriptRuntime, ScriptRuntimeError> {
        let loaded = self
            .inner
            .script_runtime
            .get_or_init(|| load(&self.inner))
            .clone()?;
        Ok(ScriptRuntime {
            sandbox: self.inner.clone(),
            loaded,
        })
    }
}

/// The built-in Python script runtime of a [`Sandbox`]. Cheap to clone.
#[derive(Clone)]
pub struct ScriptRuntime {
    sandbox: Arc<SandboxInner>,
    loaded: Arc<LoadedRuntime>,
}

impl std::fmt::Debug for ScriptRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptRuntime")
            .field("sha256", &self.loaded.sha256)
            .finish_non_exhaustive()
    }
}

/// Why a request was refused before anything ran.
fn invalid(label: &str, script: &str, message: String) -> CallError {
    CallError::new(
        label,
        script,
        CallFailure::Tool {
            error: ToolError::InvalidInput(message),
        },
    )
}

/// A scratch folder reserved from the process's budget, or `busy`.
fn reserve_scratch(label: &str, tool: &str) -> Result<Scratch, CallError> {
    let reservation = IN_FLIGHT.reserve(MAX_SCRATCH_BYTES).ok_or_else(|| {
        CallError::new(
            label,
            tool,
            CallFailure::Busy {
                detail: format!(
                    "the script calls in flight hold the host's budget of {} bytes of scratch \
                     folders",
                    crate::limits::MAX_SCRATCH_BYTES_IN_FLIGHT
                ),
            },
        )
    })?;
    Ok(Scratch::new(
        ScratchCaps {
            bytes: MAX_SCRATCH_BYTES,
            files: MAX_SCRATCH_FILES,
        },
        Some(reservation),
    ))
}

/// A binding for a script call (or a spare): no `host` interface, the
/// filesystem `fs`, stdin `stdin`.
fn script_binding(
    label: &str,
    tool: &str,
    opts: &CallOptions,
    deadline: Instant,
    fs: Vfs,
    stdin: Bytes,
) -> CallBinding {
    CallBinding {
        identity: CallIdentity {
            skill: label.into(),
            tool: tool.into(),
        },
        deadline,
        config: Arc::default(),
        invoker: None,
        depth: opts.depth,
        refs: None,
        reach: CallReach {
            // The runtime imports no `wasi:http`: a script's network is
            // refused by its sockets (and named by the runner).
            outbound: super::outbound::OutboundHooks::new(None, opts.limits.outbound, deadline),
            fs,
            redact: opts.redact.clone(),
            notices: super::Notices::new(None, None),
            ask: None,
            client_reach: Default::default(),
        },
        stdin,
    }
}

impl ScriptRuntime {
    /// Hex sha256 of the runtime's component: what byte-code made by
    /// [`compile`](Self::compile) was made with.
    ///
    /// ```no_run
    /// # fn f(rt: skillhost::ScriptRuntime) { assert_eq!(rt.sha256().len(), 64); }
    /// ```
    pub fn sha256(&self) -> &str {
        &self.loaded.sha256
    }

    /// Whether loading took the compiled code from the cache.
    ///
    /// ```no_run
    /// # fn f(rt: skillhost::ScriptRuntime) { println!("{}", rt.loaded_from_cache()); }
    /// ```
    pub fn loaded_from_cache(&self) -> bool {
        self.loaded.from_cache
    }

    /// How many calls ran in a spare instance (made ahead of them).
    ///
    /// ```no_run
    /// # fn f(rt: skillhost::ScriptRuntime) { println!("{}", rt.spares_used()); }
    /// ```
    pub fn spares_used(&self) -> u64 {
        self.loaded.spares.used()
    }

    /// Whether a spare instance is ready for the next call.
    ///
    /// ```no_run
    /// # fn f(rt: skillhost::ScriptRuntime) { println!("{}", rt.spare_ready()); }
    /// ```
    pub fn spare_ready(&self) -> bool {
        self.loaded.spares.ready()
    }

    /// The script's path checked, and the request's sizes: a refusal
    /// names what was wrong.
    fn check(&self, request: &ScriptRequest) -> Result<(), String> {
        let script = &request.script;
        name::check_path(script).map_err(|e| format!("script `{script}`: {e}"))?;
        let head = request.skill.read(script).unwrap_or_default();
        let head = &head[..head.len().min(128)];
        if let Some(why) = Interpreter::of_script(script, head).refusal(script) {
            return Err(why);
        }
        if !request.skill.has_file(script) {
            return Err(format!("the skill has no script `{script}`"));
        }
        if request.args.len() > MAX_SCRIPT_ARGS {
            return Err(format!(
                "{} arguments, over the cap of {MAX_SCRIPT_ARGS}",
                request.args.len()
            ));
        }
        for (i, arg) in request.args.iter().enumerate() {
            if arg.len() > MAX_SCRIPT_ARG_BYTES {
                return Err(format!(
                    "argument {} is {} bytes, over the cap of {MAX_SCRIPT_ARG_BYTES}",
                    i + 1,
                    arg.len()
                ));
            }
            if arg.contains('\0') {
                return Err(format!("argument {} holds a NUL character", i + 1));
            }
        }
        if request.stdin.len() > MAX_SCRIPT_STDIN_BYTES {
            return Err(format!(
                "stdin is {} bytes, over the cap of {MAX_SCRIPT_STDIN_BYTES}",
                request.stdin.len()
            ));
        }
        if request.inputs.len() > MAX_SCRIPT_INPUT_FILES {
            return Err(format!(
                "{} input files, over the cap of {MAX_SCRIPT_INPUT_FILES}",
                request.inputs.len()
            ));
        }
        let total: u64 = request.inputs.iter().map(|(_, b)| b.len() as u64).sum();
        if total > MAX_SCRIPT_INPUT_BYTES {
            return Err(format!(
                "the input files hold {total} bytes, over the cap of {MAX_SCRIPT_INPUT_BYTES}"
            ));
        }
        for (path, _) in &request.inputs {
            let names = name::check_path(path).map_err(|e| {
                format!(
                    "input file `{}`: {e}",
                    crate::escape::escape_control(path, 256, false)
                )
            })?;
            if names.first().is_some_and(|n| *n == OUT || *n == TMP) {
                return Err(format!(
                    "input file `{path}`: `{OUT}/` and `{TMP}/` are the script's own folders"
                ));
            }
        }
        Ok(())
    }

    /// The call's filesystem: the library, byte-code, the skill, and the
    /// scratch folder.
    fn mounts(&self, skill: &SkillFiles, scratch: &Scratch) -> Vfs {
        Vfs::new(vec![
            Mount {
                path: PYTHON.into(),
                root: MountRoot::ReadOnly(self.loaded.stdlib.python.clone()),
            },
            Mount {
                path: PYCACHE.into(),
                root: MountRoot::ReadOnly(RoDir::of([
                    ("python", self.loaded.stdlib.pyc.clone()),
                    ("skill", skill.pyc.clone().unwrap_or_else(RoDir::empty)),
                ])),
            },
            Mount {
                path: SKILL.into(),
                root: MountRoot::ReadOnly(skill.tree.clone()),
            },
            Mount {
                path: SCRATCH.into(),
                root: MountRoot::Scratch(scratch.clone()),
            },
        ])
    }

    /// A store for the call: the spare (given the call's binding) if one
    /// made under these limits is ready, else a fresh one.
    fn store_for(
        &self,
        limits: Limits,
        binding: CallBinding,
    ) -> (Store<CallState>, Option<wit::ScriptRuntime>) {
        if let Some(spare) = self.loaded.spares.take(&limits) {
            let (mut store, instance, fuel_used) = spare.into_parts();
            bind_spare(&self.sandbox, &mut store, binding, limits.fuel, fuel_used);
            return (store, Some(instance));
        }
        let store = new_store(&self.sandbox, limits, binding, SCRIPT_STDOUT_KEPT_BYTES);
        (store, None)
    }

    /// Instantiates the runtime in `store`; if the pool is full and spares
    /// hold slots, they are dropped and the instantiation tried once more.
    async fn instantiate(
        &self,
        store: &mut Store<CallState>,
    ) -> wasmtime::Result<wit::ScriptRuntime> {
        match self.instantiate_timed(store).await {
            Ok(i) => Ok(i),
            Err(e)
                if e.is::<wasmtime::PoolConcurrencyLimitError>() && self.sandbox.spares.evict() =>
            {
                self.loaded.pre.instantiate_async(&mut *store).await
            }
            Err(e) => Err(e),
        }
    }

    async fn instantiate_timed(
        &self,
        store: &mut Store<CallState>,
    ) -> wasmtime::Result<wit::ScriptRuntime> {
        let started = Instant::now();
        let instance = self.loaded.pre.instantiate_async(&mut *store).await?;
        self.loaded.spares.instantiated(started.elapsed());
        Ok(instance)
    }

    /// Runs one script under `options` (the same [`CallOptions`] a
    /// component call takes; only its limits, deadline and redaction
    /// apply: a script reaches no `host` interface, no network and no
    /// assets). A refused request is an `invalid-input` tool error naming
    /// what was wrong; the process's scratch budget spent, `busy`; a trap
    /// (fuel, memory, deadline, output cap) the usual [`CallError`] with
    /// its [`TrapReason`]. A script that ends with a non-zero exit code is
    /// a [`ScriptRun`], not an error.
    ///
    /// ```no_run
    /// # async fn f(rt: skillhost::ScriptRuntime, files: std::sync::Arc<skillhost::SkillFiles>) {
    /// let run = rt
    ///     .run(
    ///         skillhost::ScriptRequest {
    ///             skill: files,
    ///             script: "scripts/hello.py".into(),
    ///             args: vec![],
    ///             stdin: vec![],
    ///             inputs: vec![],
    ///         },
    ///         skillhost::CallOptions::default(),
    ///     )
    ///     .await
    ///     .unwrap();
    /// println!("{} {}", run.exit_code, run.stdout);
    /// # }
    /// ```
    pub async fn run(
        &self,
        request: ScriptRequest,
        options: CallOptions,
    ) -> Result<ScriptRun, CallError> {
        let result = self.run_once(request, &options).await;
        super::spare::refill(self, options.limits);
        result
    }

    async fn run_once(
        &self,
        request: ScriptRequest,
        opts: &CallOptions,
    ) -> Result<ScriptRun, CallError> {
        let label = request.skill.label.clone();
        let tool = request.script.clone();
        self.check(&request)
            .map_err(|m| invalid(&label, &tool, m))?;
        let start = Instant::now();
        let mut clock = crate::stages::start();
        let deadline = deadline_of(&opts.limits, opts.not_after, start);
        let scratch = reserve_scratch(&label, &tool)?;
        for dir in [OUT, TMP] {
            scratch
                .put_dir(dir)
                .map_err(|e| invalid(&label, &tool, format!("cannot make `{dir}/`: {e}")))?;
        }
        for (path, data) in &request.inputs {
            scratch.put_file(path, data).map_err(|e| {
                invalid(
                    &label,
                    &tool,
                    match e {
                        PutError::Limit(limit) => format!("input file `{path}` is over {limit}"),
                        PutError::Name(e) => format!("input file `{path}`: {e}"),
                        PutError::Errno(e) => format!("input file `{path}`: {e}"),
                    },
                )
            })?;
        }
        let fs = self.mounts(&request.skill, &scratch);
        let binding = script_binding(
            &label,
            &tool,
            opts,
            deadline,
            fs,
            Bytes::from(request.stdin),
        );
        let (mut store, spare) = self.store_for(opts.limits, binding);
        crate::stages::lap(crate::stages::Stage::Store, &mut clock);
        let script = format!("{SKILL}/{}", request.script);
        let run = async {
            let instance = match spare {
                Some(i) => i,
                None => self.instantiate(&mut store).await?,
            };
            crate::stages::lap(crate::stages::Stage::Instantiate, &mut clock);
            let r = instance
                .skillhost_script_runner()
                .call_run(&mut store, &script, &request.args)
                .await;
            crate::stages::lap(crate::stages::Stage::Guest, &mut clock);
            r
        };
        let result = tokio::time::timeout_at(deadline.into(), run).await;
        let duration = start.elapsed();
        let exit_code = match result {
            Ok(Ok(code)) => code,
            Ok(Err(e)) => match e.downcast_ref::<wasmtime_wasi::I32Exit>() {
                // `os._exit(n)`: the process's status, as natively.
                Some(exit) if store.data().host_trap.is_none() => exit.0 & 0xFF,
                _ => return Err(classify(&label, &tool, &mut store, e)),
            },
            Err(_) => return Err(timed_out(&label, &tool, &store, start)),
        };
        let fuel_consumed = opts
            .limits
            .fuel
            .saturating_sub(store.get_fuel().unwrap_or(0));
        let (stdout, stderr) = take_stdio(&label, &tool, &store);
        let (stdout_truncated, stderr_truncated) = {
            let state = store.data();
            let cut = |c: &super::state::CapturedOutput| {
                let c = c.lock();
                c.total > c.kept.len() as u64
            };
            (cut(&state.stdout), cut(&state.stderr))
        };
        super::teardown::after_answer(store);
        // Counted before anything is copied out of the scratch folder.
        let (out_files, out_bytes) = scratch.count_under(OUT);
        let over = if out_files > MAX_SCRIPT_OUTPUT_FILES {
            Some(format!(
                "the script left {out_files} files under {OUT}/, over the cap of \
                 {MAX_SCRIPT_OUTPUT_FILES}: write an archive instead"
            ))
        } else if out_bytes > MAX_SCRIPT_OUTPUT_BYTES {
            Some(format!(
                "the script left {out_bytes} bytes under {OUT}/, over the cap of \
                 {MAX_SCRIPT_OUTPUT_BYTES}"
            ))
        } else {
            None
        };
        if let Some(detail) = over {
            return Err(CallError {
                stderr: crate::escape::escape_control(&stderr, 2048, true),
                ..CallError::new(
                    &label,
                    &tool,
                    CallFailure::Trapped {
                        reason: TrapReason::OutputTooLarge,
                        detail,
                    },
                )
            });
        }
        let outputs = scratch.files_under(OUT);
        crate::stages::lap(crate::stages::Stage::Output, &mut clock);
        Ok(ScriptRun {
            exit_code,
            stdout,
            stderr,
            stdout_truncated,
            stderr_truncated,
            outputs,
            scratch_limit: scratch.limit_hit(),
            fuel_consumed,
            duration,
        })
    }

    /// Byte-compiles every `.py` file of `files` (a skill's scripts and
    /// packages) with the runtime's own CPython, for install time: the
    /// byte-code tree to keep beside the install and mount on later runs
    /// ([`SkillFiles::with_pyc`]). A file that does not compile is listed
    /// in [`PycTree::failed`], not an error. Runs under the sandbox
    /// policy's [`compile_limits`](crate::LimitsPolicy::compile_limits)
    /// (a package of a few hundred files needs several times a script's
    /// fuel: pypdf's 61 files took 4.9 × 10⁹); [`compile_with`](Self::compile_with)
    /// takes other options.
    ///
    /// ```no_run
    /// # async fn f(rt: skillhost::ScriptRuntime, files: std::sync::Arc<skillhost::SkillFiles>) {
    /// let pyc = rt.compile(&files).await.unwrap();
    /// std::fs::write("pyc.zip", pyc.to_archive()).unwrap();
    /// # }
    /// ```
    pub async fn compile(&self, files: &SkillFiles) -> Result<PycTree, CallError> {
        let options = CallOptions {
            limits: self.sandbox.policy.compile_limits(),
            ..Default::default()
        };
        self.compile_with(files, options).await
    }

    /// [`compile`](Self::compile) under `options` (only their limits,
    /// deadline and redaction apply).
    ///
    /// ```no_run
    /// # async fn f(rt: skillhost::ScriptRuntime, files: std::sync::Arc<skillhost::SkillFiles>) {
    /// let opts = skillhost::CallOptions { limits: skillhost::LimitsPolicy::default().compile_limits(), ..Default::default() };
    /// let pyc = rt.compile_with(&files, opts).await.unwrap();
    /// # }
    /// ```
    pub async fn compile_with(
        &self,
        files: &SkillFiles,
        options: CallOptions,
    ) -> Result<PycTree, CallError> {
        const TOOL: &str = "(compile)";
        let label = files.label.clone();
        let start = Instant::now();
        let deadline = deadline_of(&options.limits, options.not_after, start);
        let out = reserve_scratch(&label, TOOL)?;
        let fs = Vfs::new(vec![
            Mount {
                path: PYTHON.into(),
                root: MountRoot::ReadOnly(self.loaded.stdlib.python.clone()),
            },
            Mount {
                path: SKILL.into(),
                root: MountRoot::ReadOnly(files.tree.clone()),
            },
            Mount {
                path: PYCACHE.into(),
                root: MountRoot::Scratch(out.clone()),
            },
        ]);
        let binding = script_binding(&label, TOOL, &options, deadline, fs, Bytes::new());
        let mut store = new_store(
            &self.sandbox,
            options.limits,
            binding,
            SCRIPT_STDOUT_KEPT_BYTES,
        );
        let run = async {
            let instance = self.instantiate(&mut store).await?;
            instance
                .skillhost_script_runner()
                .call_compile(&mut store, SKILL)
                .await
        };
        let compiled = match tokio::time::timeout_at(deadline.into(), run).await {
            Ok(Ok(c)) => c,
            Ok(Err(e)) => return Err(classify(&label, TOOL, &mut store, e)),
            Err(_) => return Err(timed_out(&label, TOOL, &store, start)),
        };
        super::teardown::after_answer(store);
        if let Some(limit) = out.limit_hit() {
            return Err(CallError::new(
                &label,
                TOOL,
                CallFailure::Trapped {
                    reason: TrapReason::OutputTooLarge,
                    detail: format!("the byte-code is over {limit}"),
                },
            ));
        }
        let prefix = format!("{SKILL}/");
        Ok(PycTree {
            tree: out.tree_under("skill"),
            failed: compiled
                .failed
                .into_iter()
                .map(|(p, e)| (p.strip_prefix(&prefix).unwrap_or(&p).to_string(), e))
                .collect(),
        })
    }

    /// A fresh instance under `limits` with nothing of a call bound to it.
    async fn make_spare(&self, limits: Limits, held: Held) -> Making<wit::ScriptRuntime> {
        let opts = CallOptions {
            limits,
            ..Default::default()
        };
        let deadline = deadline_of(&limits, None, Instant::now());
        let binding = script_binding(
            RUNTIME_LABEL,
            "(spare instance)",
            &opts,
            deadline,
            Vfs::default(),
            Bytes::new(),
        );
        let mut store = new_store(&self.sandbox, limits, binding, SCRIPT_STDOUT_KEPT_BYTES);
        let made =
            tokio::time::timeout_at(deadline.into(), self.instantiate_timed(&mut store)).await;
        Making::settle(made, store, limits, held, RUNTIME_LABEL)
    }
}

impl MakesSpares for ScriptRuntime {
    type Instance = wit::ScriptRuntime;

    fn spares(&self) -> &Arc<Spares<wit::ScriptRuntime>> {
        &self.loaded.spares
    }

    fn sandbox(&self) -> &SandboxInner {
        &self.sandbox
    }

    fn make(
        &self,
        limits: Limits,
        held: Held,
    ) -> impl Future<Output = Making<wit::ScriptRuntime>> + Send {
        self.make_spare(limits, held)
    }
}

#[allow(dead_code)]
fn _assert_send(rt: ScriptRuntime, r: ScriptRequest, o: CallOptions) {
    fn is_send<T: Send>(_: T) {}
    is_send(async move { rt.run(r, o).await });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_build_without_the_runtime_names_the_command_that_adds_it() {
        let sandbox = crate::SandboxBuilder::new().build().unwrap();
        let err = load_from(
            &sandbox.inner,
            Err(
                "this skillhost was built without its script runtime (componentize-py is not \
                 installed): run tests/peers/install.sh",
            ),
        )
        .err()
        .expect("no runtime");
        assert!(matches!(err, ScriptRuntimeError::NotBuilt { .. }));
        assert!(
            err.to_string().contains("run tests/peers/install.sh"),
            "{err}"
        );
    }

    #[test]
    fn a_call_that_cannot_reserve_its_scratch_folder_is_busy() {
        let budget = crate::limits::MAX_SCRATCH_BYTES_IN_FLIGHT;
        let mut held = Vec::new();
        while let Some(r) = IN_FLIGHT.reserve(MAX_SCRATCH_BYTES) {
            held.push(r);
        }
        assert_eq!(held.len() as u64, budget / MAX_SCRATCH_BYTES);
        let err = reserve_scratch("s@1.0.0", "scripts/x.py").unwrap_err();
        assert!(matches!(err.failure, CallFailure::Busy { .. }), "{err}");
        assert!(err.to_string().contains("scratch folders"), "{err}");
        held.pop();
        assert!(reserve_scratch("s@1.0.0", "scripts/x.py").is_ok());
    }

    #[test]
    fn interpreters_by_extension_and_shebang() {
        for (path, want) in [
            ("scripts/x.py", Interpreter::Python),
            ("scripts/X.PY", Interpreter::Python),
            ("a/b.bash", Interpreter::Shell("bash")),
            ("run.mjs", Interpreter::JavaScript),
            ("tool.ts", Interpreter::JavaScript),
            ("make.pl", Interpreter::Other("Perl")),
            ("Makefile", Interpreter::Unknown),
            (".py", Interpreter::Unknown),
            ("notes.txt", Interpreter::Unknown),
        ] {
            assert_eq!(Interpreter::of(path), want, "{path}");
        }
        assert_eq!(
            Interpreter::of_script("init.sh", b"#!/usr/bin/env bash\n"),
            Interpreter::Shell("bash")
        );
        assert_eq!(
            Interpreter::of_script("init.sh", b"echo no shebang\n"),
            Interpreter::Shell("sh")
        );
        let why = Interpreter::of("scripts/init-artifact.sh")
            .refusal("scripts/init-artifact.sh")
            .unwrap();
        assert!(
            why.starts_with("scripts/init-artifact.sh is a shell script (sh)"),
            "{why}"
        );
    }

    #[test]
    fn a_skill_folder_with_a_symlink_out_is_refused_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("scripts")).unwrap();
        std::fs::write(dir.path().join("scripts/x.py"), "print(1)").unwrap();
        let files = SkillFiles::from_dir(dir.path()).unwrap();
        assert!(files.has_file("scripts/x.py"));
        assert!(!files.has_file("scripts"));
        assert!(!files.has_file("scripts/../scripts/x.py"));
        assert_eq!(
            files.read("scripts/x.py").unwrap(),
            Bytes::from_static(b"print(1)")
        );
        assert_eq!(files.labelled("x@1.0.0").label(), "x@1.0.0");
        std::os::unix::fs::symlink(outside.path(), dir.path().join("scripts/up")).unwrap();
        let err = SkillFiles::from_dir(dir.path()).unwrap_err();
        assert_eq!(
            err,
            ScriptRuntimeError::SymlinkOut {
                dir: dir.path().display().to_string(),
                path: "scripts/up".into()
            }
        );
    }
}
