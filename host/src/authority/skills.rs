//! Bundle installs through the host (the HTTP API): `crate::bundle::install` with
//! the host's sandbox, and the registry rebuilt after.

use serde::Serialize;

use super::{Host, lock};
use crate::bundle::install::{InstallError, InstallOptions, InstallOutcome};
use crate::registry::SkillState;
use crate::registry::catalog::SkillSource;

/// Why an install through the host was refused; nothing was changed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum InstallRefusal {
    /// This name and version is installed already.
    #[error("{0}")]
    Conflict(String),
    /// The bundle was refused (unreadable, badly signed, untrusted, a
    /// rollback, a component that does not load, …).
    #[error("{0}")]
    Refused(String),
}

impl Host {
    /// Installs a bundle from its bytes (atomic: on any refusal nothing is
    /// left of it).
    pub(crate) async fn install_bundle(
        &self,
        bytes: &[u8],
        options: InstallOptions,
    ) -> Result<InstallOutcome, InstallRefusal> {
        let bundle = crate::bundle::install::verify(&self.inner.data, bytes)
            .map_err(|e| InstallRefusal::Refused(format!("{e:#}")))?;
        let st = &bundle.statement;
        let installed = lock(&self.inner.store)
            .installed()
            .map_err(|e| InstallRefusal::Refused(format!("cannot read the installs: {e}")))?;
        if installed
            .iter()
            .any(|r| r.name == st.name && r.version == st.version)
        {
            return Err(InstallRefusal::Conflict(format!(
                "{}@{} is already installed; uninstall it first, or install a higher version",
                st.name, st.version
            )));
        }
        let out =
            crate::bundle::install::install(&self.inner.data, &self.inner.sandbox, bytes, options)
                .await
                .map_err(|InstallError(m)| InstallRefusal::Refused(m))?;
        self.inner.changed();
        Ok(out)
    }

    /// Uninstalls every installed version of skill `name`; returns them.
    pub(crate) fn uninstall_skill(&self, name: &str) -> Result<Vec<semver::Version>, InstallError> {
        let removed = crate::bundle::install::uninstall(&self.inner.data, name)?;
        self.inner.changed();
        Ok(removed)
    }
}

/// A skill as the registry sees it: source, trust, enablement and state.
///
/// ```no_run
/// # fn f(host: skillhost::Host) -> anyhow::Result<()> {
/// for s in host.skills()? { println!("{} {:?}", s.name, s.state); }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SkillStatus {
    /// The skill.
    pub name: String,
    /// Its version.
    pub version: String,
    /// Where it comes from.
    pub source: SkillSource,
    /// Whether it is trusted.
    pub trusted: bool,
    /// Whether it is enabled.
    pub enabled: bool,
    /// Whether its tools are registered, and if not, why.
    #[serde(flatten)]
    pub state: SkillState,
    /// The tools it implements.
    pub tools: Vec<String>,
    /// Its `tool_names`.
    pub tool_names: Vec<String>,
    /// What it shadows.
    pub shadows: Vec<String>,
}

impl Host {
    /// Every effective skill with its state (`ready`, `unresolved` with the
    /// missing names, `untrusted`, `disabled`, `invalid`).
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) -> anyhow::Result<()> {
    /// for s in host.skills()? { println!("{}: {:?}", s.name, s.state); }
    /// # Ok(()) }
    /// ```
    pub fn skills(&self) -> anyhow::Result<Vec<SkillStatus>> {
        let reg = self.inner.registry()?;
        Ok(reg
            .skills
            .iter()
            .map(|(name, info)| SkillStatus {
                name: name.clone(),
                version: info.entry.version.to_string(),
                source: info.entry.source.clone(),
                trusted: info.entry.trusted,
                enabled: info.entry.enabled,
                state: info.state.clone(),
                tools: info
                    .manifest
                    .as_ref()
                    .map(|m| m.tools.iter().map(|t| t.name.clone()).collect())
                    .unwrap_or_default(),
                tool_names: info
                    .manifest
                    .as_ref()
                    .map(|m| m.tool_names.clone())
                    .unwrap_or_default(),
                shadows: info.entry.shadows.clone(),
            })
            .collect())
    }

    /// Enables or disables a skill by name.
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) -> anyhow::Result<()> {
    /// host.set_skill_enabled("text-tools", false)?;
    /// # Ok(()) }
    /// ```
    pub fn set_skill_enabled(&self, name: &str, enabled: bool) -> anyhow::Result<()> {
        self.known_skill(name)?;
        lock(&self.inner.store).set_enabled(name, enabled)?;
        self.inner.changed();
        Ok(())
    }

    /// Trusts an untrusted install or local folder of this name.
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) -> anyhow::Result<()> {
    /// host.trust_skill("my-skill")?;
    /// # Ok(()) }
    /// ```
    pub fn trust_skill(&self, name: &str) -> anyhow::Result<()> {
        self.known_skill(name)?;
        lock(&self.inner.store).set_trusted(name)?;
        self.inner.changed();
        Ok(())
    }

    fn known_skill(&self, name: &str) -> anyhow::Result<()> {
        let reg = self.inner.registry()?;
        if reg.skills.contains_key(name) {
            Ok(())
        } else {
            anyhow::bail!("no skill named `{name}` (see `skillhost skills list`)")
        }
    }
}
