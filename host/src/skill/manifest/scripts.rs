//! `scripts` in `skill.yaml`: how the skill's scripts folder is run. The
//! block is optional: a skill (a `SKILL.md` one too) with a `scripts/`
//! folder gets the defaults.
//!
//! ```yaml
//! scripts:
//!   folder: scripts                   # the default
//!   read_only: [check_fillable_fields.py]   # or `true` for every script
//!   python:
//!     requirements: requirements.txt  # default: scripts/requirements.txt, else ./requirements.txt
//!     drop_native: [pyyaml]           # packages whose optional native parts pack may drop
//!   limits: {fuel: 60000000000, memory_mb: 256, timeout_ms: 60000}   # capped by policy
//! ```

use serde::{Deserialize, Serialize};

use super::ManifestLimits;

/// The default scripts folder.
pub const DEFAULT_SCRIPTS_FOLDER: &str = "scripts";

/// The scripts block. The default is what a skill without one gets.
///
/// ```
/// let d: skillhost::ScriptsDecl = serde_yaml::from_str("read_only: true").unwrap();
/// assert_eq!(d.folder(), "scripts");
/// assert!(d.is_read_only("scripts/x.py"));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "`scripts` as a mapping of `folder`, `read_only`, `python` and `limits`"
)]
pub struct ScriptsDecl {
    /// The folder holding the scripts, relative to the skill folder
    /// (default `scripts`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub folder: Option<String>,
    /// Scripts (by name relative to the folder) whose calls change nothing
    /// outside their scratch folder, so need no confirmation; `true` for
    /// every one.
    #[serde(default, skip_serializing_if = "ReadOnlyScripts::is_none")]
    pub read_only: ReadOnlyScripts,
    /// The Python packages the scripts import.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub python: Option<PythonDecl>,
    /// Limits a script call asks for; the host policy caps them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<ManifestLimits>,
}

/// Which scripts are declared read-only.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    untagged,
    expecting = "`read_only` as `true`, `false` or a list of script names"
)]
pub enum ReadOnlyScripts {
    /// `true`: every script; `false`: none.
    All(bool),
    /// These scripts, by name relative to the folder.
    Listed(Vec<String>),
    /// Not written: none.
    #[default]
    #[serde(skip)]
    None,
}

impl ReadOnlyScripts {
    /// Whether nothing was written.
    pub fn is_none(&self) -> bool {
        matches!(self, ReadOnlyScripts::None)
    }
}

/// `scripts.python`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "`scripts.python` as a mapping of `requirements` and `drop_native`"
)]
pub struct PythonDecl {
    /// The requirements file, relative to the skill folder.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requirements: Option<String>,
    /// Packages with no pure-Python wheel whose native accelerator is
    /// optional: pack takes a platform wheel and drops its native files.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub drop_native: Vec<String>,
}

impl ScriptsDecl {
    /// The scripts folder, relative to the skill folder.
    pub fn folder(&self) -> &str {
        self.folder.as_deref().unwrap_or(DEFAULT_SCRIPTS_FOLDER)
    }

    /// Whether the script at `path` (relative to the skill folder) is
    /// declared read-only.
    ///
    /// ```
    /// let d: skillhost::ScriptsDecl = serde_yaml::from_str("read_only: [a.py]").unwrap();
    /// assert!(d.is_read_only("scripts/a.py"));
    /// assert!(!d.is_read_only("scripts/b.py"));
    /// ```
    pub fn is_read_only(&self, path: &str) -> bool {
        match &self.read_only {
            ReadOnlyScripts::All(all) => *all,
            ReadOnlyScripts::None => false,
            ReadOnlyScripts::Listed(names) => {
                let folder = self.folder().trim_end_matches('/');
                let within = path
                    .strip_prefix(folder)
                    .and_then(|r| r.strip_prefix('/'))
                    .unwrap_or(path);
                names.iter().any(|n| n == within)
            }
        }
    }

    /// Every problem of the block, each naming its field.
    pub(super) fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if let Some(f) = &self.folder
            && !super::contained_relative_path(f)
        {
            problems.push(format!(
                "`scripts.folder`: `{}` must be a relative path inside the skill folder",
                f.escape_debug()
            ));
        }
        if let ReadOnlyScripts::Listed(names) = &self.read_only {
            for (i, n) in names.iter().enumerate() {
                if !super::contained_relative_path(n) {
                    problems.push(format!(
                        "`scripts.read_only[{i}]`: `{}` must be a script's path inside the \
                         scripts folder",
                        n.escape_debug()
                    ));
                }
            }
        }
        if let Some(p) = &self.python {
            if let Some(r) = &p.requirements
                && !super::contained_relative_path(r)
            {
                problems.push(format!(
                    "`scripts.python.requirements`: `{}` must be a relative path inside the \
                     skill folder",
                    r.escape_debug()
                ));
            }
            for (i, n) in p.drop_native.iter().enumerate() {
                if !crate::skill::scripts::requirements::valid_package_name(n) {
                    problems.push(format!(
                        "`scripts.python.drop_native[{i}]`: `{}` is not a Python package name",
                        n.escape_debug()
                    ));
                }
            }
        }
        if let Some(l) = &self.limits {
            for (name, v) in [
                ("fuel", l.fuel),
                ("memory_mb", l.memory_mb),
                ("timeout_ms", l.timeout_ms),
            ] {
                if v == Some(0) {
                    problems.push(format!("`scripts.limits.{name}` must be greater than 0"));
                }
            }
        }
        problems
    }
}
