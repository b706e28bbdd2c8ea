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
    /// The name used in listings and messages (`builtin`, `local`, `managed`).
    pub fn as_str(&self) -> &'static str {
        match self {
            SkillSource::Builtin => "builtin",
            SkillSource::Local => "local",
            SkillSource::Managed => "managed",
        }
    }

    /// Precedence in the shadowing rule: higher wins.
    fn rank(&self) -> u8 {
        match self {
            SkillSource::Builtin => 0,
            SkillSource::Local => 1,
            SkillSource::Managed => 2,
        }
    }
}

/// Who a skill of a name is: what a persona's grant of it is bound to, so
/// that a grant given to one skill never applies to another installed later
/// under the same name.
///
/// ```
/// use skillhost::SkillIdentity;
/// let id = SkillIdentity::Signer("ed25519:abcd".into());
/// assert_eq!(SkillIdentity::parse(&id.stored()), Some(id));
/// assert_eq!(SkillIdentity::parse("builtin"), Some(SkillIdentity::Builtin));
/// assert_eq!(SkillIdentity::parse("somebody"), None);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum SkillIdentity {
    /// The built-in skill of that name, shipped in the binary.
    Builtin,
    /// A local development folder the operator listed.
    Local,
    /// A managed install signed by this key id: its later versions keep
    /// the grant.
    Signer(String),
    /// An unsigned managed install, by the sha256 of its statement: no
    /// other install is the same skill.
    Unsigned(String),
}

impl SkillIdentity {
    /// The form kept in the database (`builtin`, `local`, `signer:KEY`,
    /// `unsigned:DIGEST`).
    pub fn stored(&self) -> String {
        match self {
            SkillIdentity::Builtin => "builtin".into(),
            SkillIdentity::Local => "local".into(),
            SkillIdentity::Signer(k) => format!("signer:{k}"),
            SkillIdentity::Unsigned(d) => format!("unsigned:{d}"),
        }
    }

    /// Reads [`SkillIdentity::stored`]'s form back; `None` for anything else.
    pub fn parse(s: &str) -> Option<SkillIdentity> {
        match s {
            "builtin" => Some(SkillIdentity::Builtin),
            "local" => Some(SkillIdentity::Local),
            _ => match s.split_once(':')? {
                ("signer", k) if !k.is_empty() => Some(SkillIdentity::Signer(k.into())),
                ("unsigned", d) if !d.is_empty() => Some(SkillIdentity::Unsigned(d.into())),
                _ => None,
            },
        }
    }
}

impl std::fmt::Display for SkillIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SkillIdentity::Builtin => f.write_str("the built-in skill"),
            SkillIdentity::Local => f.write_str("a local folder"),
            SkillIdentity::Signer(k) => write!(f, "an install signed by `{k}`"),
            SkillIdentity::Unsigned(d) => write!(
                f,
                "the unsigned install {}",
                d.get(..12).unwrap_or(d.as_str())
            ),
        }
    }
}

/// One skill from one source.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SkillEntry {
    /// The skill's name, shared by every source that provides it.
    pub name: String,
    /// This entry's version, from its manifest.
    pub version: semver::Version,
    /// Where this entry comes from (which decides shadowing).
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
    /// Who this skill is, for grants (see [`SkillIdentity`]).
    pub fn identity(&self) -> SkillIdentity {
        match (&self.source, &self.signer) {
            (SkillSource::Builtin, _) => SkillIdentity::Builtin,
            (SkillSource::Local, _) => SkillIdentity::Local,
            (SkillSource::Managed, Some(k)) => SkillIdentity::Signer(k.clone()),
            (SkillSource::Managed, None) => SkillIdentity::Unsigned(self.digest.clone()),
        }
    }

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
