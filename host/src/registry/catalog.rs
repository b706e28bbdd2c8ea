//! Skill sources and the one rule that picks the effective skill of a name.
//!
//! Sources: **built-in** skills (shipped in the binary, trusted), **local**
//! development folders (listed in `settings.json`, untrusted unless the
//! operator runs `skills trust NAME`), and **managed** installs (signed
//! bundles in the data dir).
//!
//! The rule, never load order: for one name, a managed install shadows a
//! local folder, which shadows a built-in; among managed installs the
//! highest version is effective. Everything shadowed is listed with the
//! effective entry.

use std::path::PathBuf;

use sha2::{Digest, Sha256};

use crate::sandbox::Sandbox;
use crate::skill::builtin::{BuiltinSkill, builtin_skills};
use crate::skill::manifest::SkillManifest;
use crate::skill::{Skill, SkillError};
use crate::state::Store;
use crate::state::data_dir::DataDir;

/// Where a skill comes from.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SkillSource {
    /// Shipped in the binary.
    Builtin,
    /// A local development folder.
    Local,
    /// A managed install from a bundle.
    Managed,
}

impl SkillSource {
    /// Precedence in the shadowing rule: higher wins.
    fn rank(&self) -> u8 {
        match self {
            SkillSource::Builtin => 0,
            SkillSource::Local => 1,
            SkillSource::Managed => 2,
        }
    }
}

/// One skill from one source.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SkillEntry {
    /// Skill name.
    pub name: String,
    /// Version.
    pub version: semver::Version,
    /// Source.
    pub source: SkillSource,
    /// Identity digest: the signed statement's sha256 for managed installs,
    /// the component's (or manifest's) sha256 otherwise.
    pub digest: String,
    /// Signer key id, for signed managed installs.
    pub signer: Option<String>,
    /// Whether the operator trusts it.
    pub trusted: bool,
    /// Whether it is enabled.
    pub enabled: bool,
    /// Folder it loads from (none for built-ins).
    pub path: Option<PathBuf>,
    /// Entries of the same name this one shadows, as `source:version`.
    pub shadows: Vec<String>,
    #[serde(skip)]
    builtin: Option<&'static BuiltinSkill>,
}

impl SkillEntry {
    /// Reads the skill's manifest only: no component is compiled or loaded.
    pub(crate) fn manifest(&self) -> Result<SkillManifest, SkillError> {
        match (self.builtin, &self.path) {
            (Some(b), _) => Ok(SkillManifest::parse(b.manifest)?),
            (None, Some(p)) => Ok(SkillManifest::load_dir(p)?),
            (None, None) => Err(SkillError::Mismatch {
                skill: self.name.clone(),
                message: "no source to load from".into(),
            }),
        }
    }

    /// Loads the skill.
    pub(crate) fn load(&self, sandbox: &Sandbox) -> Result<Skill, SkillError> {
        match (self.builtin, &self.path) {
            (Some(b), _) => b.load(sandbox),
            (None, Some(p)) => Skill::load_dir(sandbox, p),
            (None, None) => Err(SkillError::Mismatch {
                skill: self.name.clone(),
                message: "no source to load from".into(),
            }),
        }
    }
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Every skill from every source, before the rule is applied. Local folders
/// that cannot be read are reported in the second list, not dropped silently.
fn all_entries(data: &DataDir, store: &Store) -> anyhow::Result<(Vec<SkillEntry>, Vec<String>)> {
    let mut out = Vec::new();
    let mut problems = Vec::new();
    for b in builtin_skills() {
        let m = SkillManifest::parse(b.manifest)?;
        out.push(SkillEntry {
            enabled: store.enabled(&m.name)?,
            name: m.name,
            version: m.version,
            source: SkillSource::Builtin,
            digest: sha256_hex(b.component),
            signer: None,
            trusted: true,
            path: None,
            shadows: Vec::new(),
            builtin: Some(b),
        });
    }
    for dir in data.settings()?.skill_dirs {
        match SkillManifest::load_dir(&dir) {
            Ok(m) => {
                let digest = m
                    .component
                    .as_ref()
                    .and_then(|c| std::fs::read(dir.join(c)).ok())
                    .map(|b| sha256_hex(&b))
                    .unwrap_or_else(|| "-".into());
                out.push(SkillEntry {
                    enabled: store.enabled(&m.name)?,
                    trusted: store.trusted_local(&m.name)?,
                    name: m.name,
                    version: m.version,
                    source: SkillSource::Local,
                    digest,
                    signer: None,
                    path: Some(dir),
                    shadows: Vec::new(),
                    builtin: None,
                });
            }
            Err(e) => problems.push(format!("local skill folder {}: {e}", dir.display())),
        }
    }
    for r in store.installed()? {
        out.push(SkillEntry {
            enabled: store.enabled(&r.name)?,
            path: Some(
                data.root
                    .join("skills")
                    .join(&r.name)
                    .join(r.version.to_string()),
            ),
            name: r.name,
            version: r.version,
            source: SkillSource::Managed,
            digest: r.digest,
            signer: r.signer,
            trusted: r.trusted,
            shadows: Vec::new(),
            builtin: None,
        });
    }
    Ok((out, problems))
}

/// The effective skill of every name, each listing what it shadows, sorted
/// by name; plus problems with local folders.
pub(crate) fn effective(
    data: &DataDir,
    store: &Store,
) -> anyhow::Result<(Vec<SkillEntry>, Vec<String>)> {
    let (mut all, problems) = all_entries(data, store)?;
    all.sort_by(|a, b| {
        a.name
            .cmp(&b.name)
            .then(b.source.rank().cmp(&a.source.rank()))
            .then(b.version.cmp(&a.version))
    });
    let mut out: Vec<SkillEntry> = Vec::new();
    for e in all {
        match out.last_mut() {
            Some(top) if top.name == e.name => {
                let source = serde_json::to_value(&e.source)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default();
                top.shadows.push(format!("{source}:{}", e.version));
            }
            _ => out.push(e),
        }
    }
    Ok((out, problems))
}
