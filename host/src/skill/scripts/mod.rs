//! A skill's scripts: which files of its scripts folder an agent may ask
//! to run, what each needs, and the digest an operator approves.
//!
//! Runnable: a `.py` file under the folder (not `__init__.py`) that has a
//! `__main__` guard or that the skill's instructions name by its path.
//! Listed but refused when called, naming the interpreter and why: shell
//! scripts, JavaScript (not yet), other interpreters' files. Everything
//! else (helpers, data, READMEs) is neither: a script may import or read
//! it.
//!
//! One file per concept: `names.rs` the rules for input file names,
//! `tool.rs` the `<skill>.run_script` tool (schema, description, the
//! arguments read), `requirements.rs` a skill's declared packages.

pub mod mime;
pub mod names;
pub mod package_error;
pub mod packages;
pub mod requirements;
pub mod resolve;
pub mod tool;
pub mod wheel;

use std::sync::Arc;

use package_error::PackageError;
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::sandbox::{Interpreter, ScriptRuntimeError, SkillFiles};
use crate::skill::manifest::{ManifestWarning, ScriptsDecl, ScriptsPermission, SkillManifest};

/// Where an install keeps its scripts' byte-code made by the runtime of
/// digest `runtime` (hex), relative to its folder: a zip of `.pyc` files
/// (`PycTree::to_archive`), made again by an install after the runtime
/// changed, else compiled at the first call.
pub fn pycache_path(runtime: &str) -> String {
    format!(
        ".skillhost/pycache-{}.zip",
        runtime.get(..16).unwrap_or(runtime)
    )
}

/// How much of a script's head is read for its docstring and `__main__`
/// guard: 64 KiB, more than any script's preamble.
const HEAD_BYTES: usize = 64 << 10;

/// Longest first docstring line kept for the tool's description.
const MAX_SUMMARY_CHARS: usize = 160;

/// One file of the scripts folder an agent may name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Script {
    /// Its path in the skill folder (`scripts/x.py`), as the agent names it.
    pub path: String,
    /// The interpreter it needs: only Python runs.
    #[serde(flatten)]
    pub interpreter: Interpreter,
    /// The first line of its docstring, if it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// Whether the skill declares it read-only (its calls need no
    /// confirmation).
    pub read_only: bool,
}

impl Script {
    /// Why it cannot run in the sandbox, or `None`.
    pub fn refusal(&self) -> Option<String> {
        self.interpreter.refusal(&self.path)
    }
}

/// The scripts of one skill, as read from its folder.
///
/// ```no_run
/// let m = skillhost::SkillManifest::load_dir(std::path::Path::new("plugins/script-skills/pdf-forms")).unwrap();
/// let set = m.script_set().unwrap();
/// for s in &set.scripts { println!("{} {:?}", s.path, s.summary); }
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ScriptSet {
    /// The scripts folder, relative to the skill folder.
    pub folder: String,
    /// Every script an agent may name, by path.
    pub scripts: Vec<Script>,
    /// The Python packages the lock pins, as `name==version`.
    pub packages: Vec<String>,
    /// sha256 (hex) over the sorted `(path, sha256)` of every file of the
    /// scripts folder, the package lock and the wheels: what an operator
    /// approves.
    pub digest: String,
}

/// Why a skill's scripts could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScriptsError {
    /// The folder could not be read into the sandbox's filesystem.
    #[error(transparent)]
    Folder(#[from] ScriptRuntimeError),
    /// The declared scripts folder is missing.
    #[error("`scripts.folder`: `{0}` is not a folder of the skill")]
    NoFolder(String),
    /// A script declared read-only is not one of the scripts.
    #[error("`scripts.read_only`: `{0}` is not a script of the scripts folder")]
    UnknownReadOnly(String),
    /// The package lock is unreadable.
    #[error(transparent)]
    Lock(PackageError),
}

impl ScriptSet {
    /// The scripts of the skill whose manifest is `manifest` in `dir`, or
    /// `None` when it has no scripts folder (and declares no `scripts`).
    pub fn scan(
        dir: &std::path::Path,
        manifest: &SkillManifest,
    ) -> Result<Option<(ScriptSet, Arc<SkillFiles>)>, ScriptsError> {
        let decl = manifest.scripts.clone().unwrap_or_default();
        let folder = decl.folder().trim_end_matches('/').to_string();
        if !dir.join(&folder).is_dir() {
            return match manifest.scripts {
                Some(_) => Err(ScriptsError::NoFolder(folder)),
                None => Ok(None),
            };
        }
        let files = SkillFiles::from_dir(dir)?;
        let set = ScriptSet::of_files(&files, &decl, &manifest.instructions)?;
        Ok(Some((set, files)))
    }

    /// The scripts among `files` (a skill folder read for the sandbox).
    pub fn of_files(
        files: &SkillFiles,
        decl: &ScriptsDecl,
        instructions: &str,
    ) -> Result<ScriptSet, ScriptsError> {
        let folder = decl.folder().trim_end_matches('/').to_string();
        let prefix = format!("{folder}/");
        let mut scripts = Vec::new();
        for path in files.paths() {
            let Some(within) = path.strip_prefix(&prefix) else {
                continue;
            };
            let head = files.read(&path).unwrap_or_default();
            let head = &head[..head.len().min(HEAD_BYTES)];
            let interpreter = Interpreter::of_script(&path, head);
            let runnable = match interpreter {
                Interpreter::Python => {
                    let file = within.rsplit('/').next().unwrap_or(within);
                    file != "__init__.py"
                        && (has_main_guard(head) || instructions.contains(path.as_str()))
                }
                Interpreter::Unknown => false,
                _ => true,
            };
            if !runnable {
                continue;
            }
            scripts.push(Script {
                summary: (interpreter == Interpreter::Python)
                    .then(|| first_docstring_line(head))
                    .flatten(),
                read_only: decl.is_read_only(&path),
                interpreter,
                path,
            });
        }
        if let crate::skill::manifest::ReadOnlyScripts::Listed(names) = &decl.read_only {
            for n in names {
                let path = format!("{prefix}{n}");
                if !scripts.iter().any(|s| s.path == path) {
                    return Err(ScriptsError::UnknownReadOnly(n.clone()));
                }
            }
        }
        let lock = files.read(requirements::LOCK_PATH);
        let packages = match lock {
            Some(bytes) => requirements::Lock::parse(&String::from_utf8_lossy(&bytes))
                .map_err(ScriptsError::Lock)?
                .pins
                .iter()
                .map(|p| format!("{}=={}", p.name, p.version))
                .collect(),
            None => Vec::new(),
        };
        Ok(ScriptSet {
            digest: digest_of(files, &folder),
            folder,
            scripts,
            packages,
        })
    }

    /// The script an agent named, if it is one of the set.
    pub fn get(&self, path: &str) -> Option<&Script> {
        self.scripts.iter().find(|s| s.path == path)
    }

    /// Whether every script is declared read-only.
    pub fn all_read_only(&self) -> bool {
        self.scripts.iter().all(|s| s.read_only)
    }

    /// What `permissions.scripts` holds for this set.
    pub fn permission(&self) -> ScriptsPermission {
        ScriptsPermission {
            digest: self.digest.clone(),
            scripts: self.scripts.iter().map(|s| s.path.clone()).collect(),
            packages: self.packages.clone(),
        }
    }

    /// The warnings `check`, `skills show` and the console show: each
    /// script the sandbox cannot run.
    pub fn warnings(&self) -> Vec<ManifestWarning> {
        self.scripts
            .iter()
            .filter_map(|s| {
                s.refusal().map(|why| ManifestWarning::NotRunnable {
                    script: s.path.clone(),
                    why,
                })
            })
            .collect()
    }
}

/// sha256 (hex) over `path NUL sha256 LF` of every file under `folder/`,
/// the package lock, the wheels and the packages unpacked from them
/// (`.python/`, what the scripts import), in path order.
pub(crate) fn digest_of(files: &SkillFiles, folder: &str) -> String {
    let folder = format!("{folder}/");
    let wheels = format!("{}/", requirements::WHEELS_DIR);
    let unpacked = format!("{}/", packages::UNPACKED_DIR);
    let mut h = Sha256::new();
    for path in files.paths() {
        let counted = path.starts_with(&folder)
            || path.starts_with(&wheels)
            || path.starts_with(&unpacked)
            || path == requirements::LOCK_PATH;
        if !counted {
            continue;
        }
        let bytes = files.read(&path).unwrap_or_default();
        h.update(path.as_bytes());
        h.update([0]);
        h.update(hex::encode(Sha256::digest(&bytes)).as_bytes());
        h.update(b"\n");
    }
    hex::encode(h.finalize())
}

/// Whether a Python source has an `if __name__ == "__main__":` guard.
fn has_main_guard(src: &[u8]) -> bool {
    let text = String::from_utf8_lossy(src);
    text.lines().any(|l| {
        let l: String = l.split_whitespace().collect();
        l.starts_with("if__name__==\"__main__\"") || l.starts_with("if__name__=='__main__'")
    })
}

/// The first non-blank line of a Python module's docstring, if it has one.
fn first_docstring_line(src: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(src);
    let mut lines = text.lines();
    let mut start = None;
    for line in lines.by_ref() {
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        start = Some(t.to_string());
        break;
    }
    let start = start?;
    let body = start.trim_start_matches(['r', 'R', 'u', 'U']);
    let quote = ["\"\"\"", "'''", "\"", "'"]
        .into_iter()
        .find(|q| body.starts_with(q))?;
    let first = &body[quote.len()..];
    let candidate = match first.find(quote) {
        Some(end) => first[..end].trim().to_string(),
        None if first.trim().is_empty() => lines
            .map(str::trim)
            .find(|l| !l.is_empty())?
            .split(quote)
            .next()?
            .trim()
            .to_string(),
        None => first.trim().to_string(),
    };
    if candidate.is_empty() {
        return None;
    }
    let shown = crate::escape::escape_control(&candidate, MAX_SUMMARY_CHARS * 4, false);
    Some(shown.chars().take(MAX_SUMMARY_CHARS).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn folder(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (path, text) in files {
            let at = dir.path().join(path);
            std::fs::create_dir_all(at.parent().unwrap()).unwrap();
            std::fs::write(at, text).unwrap();
        }
        dir
    }

    fn set_of(dir: &std::path::Path, decl: &ScriptsDecl, instructions: &str) -> ScriptSet {
        let files = SkillFiles::from_dir(dir).unwrap();
        ScriptSet::of_files(&files, decl, instructions).unwrap()
    }

    #[test]
    fn runnable_scripts_by_guard_or_mention_helpers_left_out_others_listed() {
        let dir = folder(&[
            (
                "scripts/check.py",
                "#!/usr/bin/env python3\n\"\"\"Checks a form.\n\nMore.\"\"\"\nif __name__ == '__main__':\n    pass\n",
            ),
            (
                "scripts/named.py",
                "'''\n  Named by the instructions.\n'''\nprint(1)\n",
            ),
            ("scripts/helper.py", "def f(): pass\n"),
            (
                "scripts/pkg/__init__.py",
                "if __name__ == \"__main__\": pass\n",
            ),
            ("scripts/init-artifact.sh", "#!/bin/bash\necho hi\n"),
            ("scripts/build.mjs", "console.log(1)\n"),
            ("scripts/README.md", "# readme\n"),
            ("other/x.py", "if __name__ == '__main__': pass\n"),
        ]);
        let set = set_of(
            dir.path(),
            &ScriptsDecl::default(),
            "Run `python scripts/named.py form.pdf`.",
        );
        let paths: Vec<&str> = set.scripts.iter().map(|s| s.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "scripts/build.mjs",
                "scripts/check.py",
                "scripts/init-artifact.sh",
                "scripts/named.py"
            ]
        );
        let check = set.get("scripts/check.py").unwrap();
        assert_eq!(check.summary.as_deref(), Some("Checks a form."));
        assert!(check.refusal().is_none());
        assert_eq!(
            set.get("scripts/named.py").unwrap().summary.as_deref(),
            Some("Named by the instructions.")
        );
        let sh = set.get("scripts/init-artifact.sh").unwrap();
        assert_eq!(sh.interpreter, Interpreter::Shell("bash"));
        let warnings = set.warnings();
        assert_eq!(warnings.len(), 2);
        assert!(
            warnings[1]
                .to_string()
                .starts_with("scripts/init-artifact.sh is a shell script (bash)"),
            "{}",
            warnings[1]
        );
        assert!(!set.all_read_only());
    }

    #[test]
    fn the_digest_covers_the_scripts_folder_and_the_lock_only() {
        let dir = folder(&[
            ("scripts/a.py", "if __name__ == '__main__': print(1)\n"),
            ("SKILL.md", "---\nname: a\ndescription: d\n---\n"),
        ]);
        let first = set_of(dir.path(), &ScriptsDecl::default(), "").digest;
        std::fs::write(
            dir.path().join("SKILL.md"),
            "---\nname: a\ndescription: e\n---\n",
        )
        .unwrap();
        assert_eq!(
            set_of(dir.path(), &ScriptsDecl::default(), "").digest,
            first
        );
        std::fs::write(dir.path().join("scripts/data.txt"), "x").unwrap();
        let with_data = set_of(dir.path(), &ScriptsDecl::default(), "").digest;
        assert_ne!(with_data, first, "any file a script may read counts");
        std::fs::create_dir_all(dir.path().join(".skillhost")).unwrap();
        std::fs::write(dir.path().join(".skillhost/statement.json"), "{}").unwrap();
        assert_eq!(
            set_of(dir.path(), &ScriptsDecl::default(), "").digest,
            with_data,
            "the bundle's statement is not the scripts'"
        );
        std::fs::create_dir_all(dir.path().join(".packages")).unwrap();
        std::fs::write(dir.path().join(".packages/python.lock"), "").unwrap();
        assert_ne!(
            set_of(dir.path(), &ScriptsDecl::default(), "").digest,
            with_data
        );
        std::fs::write(
            dir.path().join("scripts/a.py"),
            "if __name__ == '__main__': print(2)\n",
        )
        .unwrap();
        let edited = set_of(dir.path(), &ScriptsDecl::default(), "").digest;
        assert_ne!(edited, with_data);
        assert_eq!(edited.len(), 64);
    }

    #[test]
    fn read_only_declarations_name_scripts_of_the_set() {
        let dir = folder(&[
            ("scripts/a.py", "if __name__ == '__main__': pass\n"),
            ("scripts/b.py", "if __name__ == '__main__': pass\n"),
        ]);
        let decl: ScriptsDecl = serde_yaml::from_str("read_only: [a.py]").unwrap();
        let set = set_of(dir.path(), &decl, "");
        assert!(set.get("scripts/a.py").unwrap().read_only);
        assert!(!set.get("scripts/b.py").unwrap().read_only);
        let all: ScriptsDecl = serde_yaml::from_str("read_only: true").unwrap();
        assert!(set_of(dir.path(), &all, "").all_read_only());
        let wrong: ScriptsDecl = serde_yaml::from_str("read_only: [c.py]").unwrap();
        let files = SkillFiles::from_dir(dir.path()).unwrap();
        assert_eq!(
            ScriptSet::of_files(&files, &wrong, "").unwrap_err(),
            ScriptsError::UnknownReadOnly("c.py".into())
        );
    }

    #[test]
    fn docstrings_first_line() {
        for (src, want) in [
            ("\"\"\"One.\"\"\"\n", Some("One.")),
            ("# comment\n\nr'''Raw one.\nTwo.'''\n", Some("Raw one.")),
            ("\"\"\"\n\n   Later.\n\"\"\"\n", Some("Later.")),
            ("import os\n\"\"\"Not a docstring.\"\"\"\n", None),
            ("\"\"\"\"\"\"\n", None),
            (
                "\"\"\"Bidi \u{202e}here.\"\"\"\n",
                Some("Bidi \\u{202e}here."),
            ),
        ] {
            assert_eq!(
                first_docstring_line(src.as_bytes()).as_deref(),
                want,
                "{src:?}"
            );
        }
    }
}
