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
use crate::skill::manifest::{Permissions, SkillManifest};
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
    /// What its manifest asks for (network origins, secrets, assets).
    pub permissions: Permissions,
    /// What it asks for beyond what an operator approved for it, one line
    /// each; not empty means it does not run until `skills approve`.
    pub unapproved: Vec<String>,
    /// Declared secrets with no value set for this skill.
    pub missing_secrets: Vec<String>,
    /// A newer version of the name, installed but waiting for approval of
    /// the permissions it adds (this entry runs meanwhile).
    pub held: Option<HeldVersion>,
    #[serde(skip)]
    builtin: Option<&'static BuiltinSkill>,
    /// The manifest as read when the entry was listed, so it is not read
    /// and parsed again for the registry.
    #[serde(skip)]
    parsed: Option<SkillManifest>,
}

/// A version that is installed but not in force because it asks for
/// permissions no operator approved yet, as browser extensions wait.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct HeldVersion {
    /// The waiting version.
    pub version: semver::Version,
    /// Where it comes from.
    pub source: SkillSource,
    /// What it asks for beyond the approved set, one line each.
    pub unapproved: Vec<String>,
    /// Everything it asks for: what `skills approve` approves.
    pub permissions: Permissions,
    /// Who it is: the approval of its set is recorded for this identity.
    #[serde(skip)]
    pub identity: SkillIdentity,
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
        if let Some(m) = &self.parsed {
            return Ok(m.clone());
        }
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
            name: m.name.clone(),
            version: m.version.clone(),
            source: SkillSource::Builtin,
            digest: sha256_hex(b.component),
            signer: None,
            trusted: true,
            path: None,
            shadows: Vec::new(),
            permissions: m.permissions.clone(),
            unapproved: Vec::new(),
            missing_secrets: Vec::new(),
            held: None,
            builtin: Some(b),
            parsed: Some(m),
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
                    name: m.name.clone(),
                    version: m.version.clone(),
                    source: SkillSource::Local,
                    digest,
                    signer: None,
                    path: Some(dir),
                    shadows: Vec::new(),
                    permissions: m.permissions.clone(),
                    unapproved: Vec::new(),
                    missing_secrets: Vec::new(),
                    held: None,
                    builtin: None,
                    parsed: Some(m),
                });
            }
            Err(e) => problems.push(format!("local skill folder {}: {e}", dir.display())),
        }
    }
    for r in store.installed()? {
        let path = data
            .root
            .join("skills")
            .join(&r.name)
            .join(r.version.to_string());
        // An unreadable manifest asks for nothing here; reading it again
        // for the registry reports it as invalid.
        let parsed = SkillManifest::load_dir(&path).ok();
        let permissions = parsed
            .as_ref()
            .map(|m| m.permissions.clone())
            .unwrap_or_default();
        out.push(SkillEntry {
            parsed,
            enabled: store.enabled(&r.name)?,
            path: Some(path),
            permissions,
            unapproved: Vec::new(),
            missing_secrets: Vec::new(),
            held: None,
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
    // One group of candidates per name, best first.
    let mut groups: Vec<Vec<SkillEntry>> = Vec::new();
    for e in all {
        match groups.last_mut() {
            Some(g) if g[0].name == e.name => g.push(e),
            _ => groups.push(vec![e]),
        }
    }
    let mut out = Vec::with_capacity(groups.len());
    for group in groups {
        out.push(pick(group, store)?);
    }
    Ok((out, problems))
}

/// The effective entry of one name's candidates (best first): the best one
/// whose permissions an operator approved (for its identity); a better one
/// that asks for more is held until approved. When none is approved, the
/// best is effective and lists what it waits for.
fn pick(group: Vec<SkillEntry>, store: &Store) -> anyhow::Result<SkillEntry> {
    let mut held: Option<HeldVersion> = None;
    let mut chosen: Option<SkillEntry> = None;
    let mut rest = Vec::new();
    let mut first_unapproved = None;
    for mut e in group {
        if chosen.is_some() {
            rest.push(e);
            continue;
        }
        let approved = match store.approval(&e.name, &e.identity().stored())? {
            Some(a) => serde_json::from_str::<Permissions>(&a.permissions).unwrap_or_default(),
            None => Permissions::default(),
        };
        e.unapproved = e.permissions.beyond(&approved);
        if e.unapproved.is_empty() {
            chosen = Some(e);
        } else if first_unapproved.is_none() {
            first_unapproved = Some(e);
        } else {
            rest.push(e);
        }
    }
    let mut top = match (chosen, first_unapproved) {
        (Some(c), Some(h)) => {
            held = Some(HeldVersion {
                version: h.version.clone(),
                source: h.source.clone(),
                unapproved: h.unapproved.clone(),
                permissions: h.permissions.clone(),
                identity: h.identity(),
            });
            rest.insert(0, h);
            c
        }
        (Some(c), None) => c,
        (None, Some(h)) => h,
        (None, None) => anyhow::bail!("a skill name with no candidate"),
    };
    top.held = held;
    rest.sort_by(|a, b| {
        b.source
            .rank()
            .cmp(&a.source.rank())
            .then(b.version.cmp(&a.version))
    });
    for e in rest {
        top.shadows
            .push(format!("{}:{}", e.source.as_str(), e.version));
    }
    let identity = top.identity().stored();
    for s in &top.permissions.secrets {
        let set = store
            .sealed_secret(&top.name, &s.name)?
            .is_some_and(|sealed| sealed.identity == identity);
        if !set {
            top.missing_secrets.push(s.name.clone());
        }
    }
    Ok(top)
}
