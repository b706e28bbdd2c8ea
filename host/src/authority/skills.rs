//! The skill catalog through the host: every effective skill with its
//! state, enabling, disabling and trusting one, installing and uninstalling
//! signed bundles (`crate::bundle::install`, with the host's sandbox), and
//! the publisher keys bundles are checked against. Every change marks the
//! registry stale, so the next call sees it.

use std::path::PathBuf;

use serde::Serialize;

use super::{Host, lock};
use crate::authority::Caller;
use crate::bundle::install::{InstallOptions, InstallOutcome};
use crate::bundle::trust::PublicKey;
use crate::bundle::{BundleUpload, OpenedBundle};
use crate::error::{CatalogError, PersonaError, StateError};
use crate::registry::catalog::{HeldVersion, SkillSource};
use crate::registry::{SkillInfo, SkillState};
use crate::skill::manifest::Permissions;
use crate::state::skills::TrustedKey;

/// A skill as the registry sees it: source, identity, trust, enablement and
/// state.
///
/// ```no_run
/// # fn f(host: skillhost::Host) -> Result<(), skillhost::StateError> {
/// for s in host.skills()? { println!("{} {:?}", s.name, s.state); }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SkillStatus {
    /// Name of the skill (its manifest's `name`).
    pub name: String,
    /// Its version.
    pub version: String,
    /// Where it comes from.
    pub source: SkillSource,
    /// Its identity: the signed statement's sha256 for managed installs,
    /// the component's (or manifest's) otherwise.
    pub digest: String,
    /// The key id that signed it, for signed managed installs.
    pub signer: Option<String>,
    /// Whether it is trusted.
    pub trusted: bool,
    /// Whether it is enabled.
    pub enabled: bool,
    /// The folder it loads from (none for built-ins).
    pub path: Option<PathBuf>,
    /// Whether its tools are registered, and if not, why.
    #[serde(flatten)]
    pub state: SkillState,
    /// The tools it implements.
    pub tools: Vec<String>,
    /// Its `tool_names`.
    pub tool_names: Vec<String>,
    /// What it shadows, as `source:version`.
    pub shadows: Vec<String>,
    /// What it asks for beyond computing (network origins, secrets,
    /// assets).
    pub permissions: Permissions,
    /// sha256 of the permission set, as `skills approve --digest` and the
    /// API's approve route take it.
    pub permissions_digest: String,
    /// A newer version installed but waiting for approval of the
    /// permissions it adds.
    pub held: Option<HeldVersion>,
    /// What loaded but should be known: a `SKILL.md` description longer
    /// than the specification's, a script the sandbox cannot run.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<crate::ManifestWarning>,
    /// Its scripts (what `<skill>.run_script` runs), if it has any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scripts: Option<crate::ScriptSet>,
}

/// # Skills and bundles
///
/// Installing, trusting, enabling and approving skills; publisher keys.
impl Host {
    /// Every effective skill with its state (`ready`, `unresolved` with the
    /// missing names, `untrusted`, `disabled`, `invalid`), by name.
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) -> Result<(), skillhost::StateError> {
    /// for s in host.skills()? { println!("{}: {:?}", s.name, s.state); }
    /// # Ok(()) }
    /// ```
    pub fn skills(&self) -> Result<Vec<SkillStatus>, StateError> {
        let reg = self.inner.registry()?;
        Ok(reg
            .skills
            .iter()
            .map(|(name, info)| SkillStatus {
                name: name.clone(),
                version: info.entry.version.to_string(),
                source: info.entry.source.clone(),
                digest: info.entry.digest.clone(),
                signer: info.entry.signer.clone(),
                trusted: info.entry.trusted,
                enabled: info.entry.enabled,
                path: info.entry.path.clone(),
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
                permissions: info.entry.permissions.clone(),
                permissions_digest: info.entry.permissions.digest(),
                held: info.entry.held.clone(),
                warnings: info
                    .manifest
                    .as_ref()
                    .map(|m| m.warnings.clone())
                    .unwrap_or_default(),
                scripts: info.manifest.as_ref().and_then(|m| m.script_set().cloned()),
            })
            .collect())
    }

    /// Problems with the skill sources: local folders that cannot be read
    /// (each such folder is left out of [`Host::skills`]).
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) -> Result<(), skillhost::StateError> {
    /// for p in host.skill_source_problems()? { eprintln!("warning: {p}"); }
    /// # Ok(()) }
    /// ```
    pub fn skill_source_problems(&self) -> Result<Vec<String>, StateError> {
        Ok(self.inner.registry()?.source_problems.clone())
    }

    /// Every installed bundle version (managed installs), by name then
    /// version: what a rollback can return to.
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) -> Result<(), skillhost::StateError> {
    /// for r in host.installed_skills()? { println!("{}@{}", r.name, r.version); }
    /// # Ok(()) }
    /// ```
    pub fn installed_skills(&self) -> Result<Vec<crate::InstalledRecord>, StateError> {
        Ok(lock(&self.inner.store).installed()?)
    }

    /// Enables or disables a skill by name.
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) -> Result<(), skillhost::CatalogError> {
    /// host.set_skill_enabled("text-tools", false)?;
    /// # Ok(()) }
    /// ```
    pub fn set_skill_enabled(&self, name: &str, enabled: bool) -> Result<(), CatalogError> {
        self.known_skill(name)?;
        lock(&self.inner.store).set_enabled(name, enabled)?;
        self.inner.changed();
        Ok(())
    }

    /// Trusts an untrusted install or local folder of this name.
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) -> Result<(), skillhost::CatalogError> {
    /// host.trust_skill("my-skill")?;
    /// # Ok(()) }
    /// ```
    pub fn trust_skill(&self, name: &str) -> Result<(), CatalogError> {
        self.known_skill(name)?;
        lock(&self.inner.store).set_trusted(name)?;
        self.inner.changed();
        Ok(())
    }

    /// Approves exactly the permission set the skill `name` waits for (a
    /// held newer version's, else the effective one's) and returns the
    /// skill as it stands after. With `expected`, the set's digest (shown
    /// by [`Host::skills`] as `permissions_digest`, or in `held`) must
    /// match, so a set that changed after it was shown is not approved.
    /// Every approval is an audit event (`permissions_approved`).
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) -> Result<(), skillhost::CatalogError> {
    /// let s = host.approve_permissions("weather", None, &skillhost::Decider::operator("cli"))?;
    /// # Ok(()) }
    /// ```
    pub fn approve_permissions(
        &self,
        name: &str,
        expected: Option<&str>,
        by: &super::Decider,
    ) -> Result<SkillStatus, CatalogError> {
        let reg = self.inner.registry()?;
        let Some(info) = reg.skills.get(name) else {
            return Err(CatalogError::NotFound(format!(
                "no skill named `{name}` (see `skillhost skills list`)"
            )));
        };
        let entry = &info.entry;
        let (version, set, identity) = match &entry.held {
            Some(h) => (h.version.clone(), h.permissions.clone(), h.identity.clone()),
            None if !entry.unapproved.is_empty() => (
                entry.version.clone(),
                entry.permissions.clone(),
                entry.identity(),
            ),
            None => {
                return Err(CatalogError::Conflict(format!(
                    "skill `{name}` waits for no approval: everything it asks for is approved \
                     (`skillhost skills show {name}` shows it)"
                )));
            }
        };
        let digest = set.digest();
        if let Some(want) = expected
            && want != digest
        {
            return Err(CatalogError::Conflict(format!(
                "the permissions of `{name}` {version} are not the set you approved (digest \
                 {digest}, you gave {}): look again with `skillhost skills show {name}`",
                crate::escape::escape_control(want, 80, false)
            )));
        }
        lock(&self.inner.store).approve_permissions(
            name,
            &identity.stored(),
            &set.canonical_json(),
            &digest,
            &by.to_string(),
        )?;
        self.inner.changed();
        self.inner.emit(crate::state::runs::HostEvent {
            at_ms: crate::state::runs::now_ms(),
            kind: "permissions_approved".into(),
            run_id: None,
            persona: None,
            tool: None,
            server: Some(format!("skill:{name}")),
            outcome: None,
            duration_ms: None,
            detail: serde_json::json!({
                "skill": name,
                "version": version.to_string(),
                "identity": identity.stored(),
                "digest": digest,
                "permissions": set,
                "decided_by": by.to_string(),
            }),
        });
        self.skills()?
            .into_iter()
            .find(|s| s.name == name)
            .ok_or_else(|| CatalogError::NotFound(format!("skill `{name}` vanished")))
    }

    fn known_skill(&self, name: &str) -> Result<(), CatalogError> {
        let reg = self.inner.registry()?;
        if reg.skills.contains_key(name) {
            Ok(())
        } else {
            Err(CatalogError::NotFound(format!(
                "no skill named `{name}` (see `skillhost skills list`)"
            )))
        }
    }

    /// Opens a bundle against this host's trusted keys without installing
    /// it: its statement, digest, signer (trusted or not) and files.
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) -> Result<(), skillhost::CatalogError> {
    /// let bundle = host.verify_bundle(&std::fs::read("greeter.skill").unwrap_or_default())?;
    /// println!("{}@{}", bundle.statement.name, bundle.statement.version);
    /// # Ok(()) }
    /// ```
    pub fn verify_bundle(&self, bytes: &[u8]) -> Result<OpenedBundle, CatalogError> {
        crate::bundle::install::verify(&self.inner.data, bytes)
    }

    /// A new, empty bundle upload: a private file in the data dir with no
    /// name, written a piece at a time as the bundle arrives and gone with
    /// its last handle (see [`BundleUpload`]). Verify it with
    /// [`Host::verify_upload`], install it with [`Host::install_upload`].
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) -> Result<(), skillhost::CatalogError> {
    /// let mut upload = host.bundle_upload()?;
    /// upload.write(&std::fs::read("greeter.skill").unwrap_or_default())?;
    /// # Ok(()) }
    /// ```
    pub fn bundle_upload(&self) -> Result<BundleUpload, CatalogError> {
        BundleUpload::create(&self.inner.data)
    }

    /// [`Host::verify_bundle`] of an upload.
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host, upload: skillhost::BundleUpload) -> Result<(), skillhost::CatalogError> {
    /// let bundle = host.verify_upload(&upload)?;
    /// println!("{}", bundle.digest);
    /// # Ok(()) }
    /// ```
    pub fn verify_upload(&self, upload: &BundleUpload) -> Result<OpenedBundle, CatalogError> {
        self.verify_bundle(&upload.bytes()?)
    }

    /// [`Host::install_bundle`] of an upload.
    ///
    /// ```no_run
    /// # async fn f(host: skillhost::Host, upload: skillhost::BundleUpload) -> Result<(), skillhost::CatalogError> {
    /// let out = host.install_upload(&upload, Default::default()).await?;
    /// println!("installed {}@{}", out.name, out.version);
    /// # Ok(()) }
    /// ```
    pub async fn install_upload(
        &self,
        upload: &BundleUpload,
        options: InstallOptions,
    ) -> Result<InstallOutcome, CatalogError> {
        self.install_bundle(&upload.bytes()?, options).await
    }

    /// Installs a bundle from its bytes (atomic: on any refusal nothing is
    /// left of it). A name and version installed already is a
    /// [`CatalogError::Conflict`]; every other refusal (unreadable, badly
    /// signed, untrusted without `allow_untrusted`, a rollback without
    /// `allow_downgrade`, a new signer, a component that does not load) is
    /// [`CatalogError::Refused`].
    ///
    /// ```no_run
    /// # async fn f(host: skillhost::Host) -> Result<(), skillhost::CatalogError> {
    /// let bytes = std::fs::read("greeter.skill").unwrap_or_default();
    /// let out = host.install_bundle(&bytes, Default::default()).await?;
    /// println!("installed {}@{}", out.name, out.version);
    /// # Ok(()) }
    /// ```
    pub async fn install_bundle(
        &self,
        bytes: &[u8],
        options: InstallOptions,
    ) -> Result<InstallOutcome, CatalogError> {
        let out =
            crate::bundle::install::install(&self.inner.data, &self.inner.sandbox, bytes, options)
                .await?;
        self.inner.changed();
        Ok(out)
    }

    /// Uninstalls `NAME` (every installed version) or `NAME@VERSION`;
    /// returns the versions removed.
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) -> Result<(), skillhost::CatalogError> {
    /// for v in host.uninstall_skill("greeter")? { println!("uninstalled greeter@{v}"); }
    /// # Ok(()) }
    /// ```
    pub fn uninstall_skill(&self, spec: &str) -> Result<Vec<semver::Version>, CatalogError> {
        let removed = crate::bundle::install::uninstall(&self.inner.data, spec)?;
        self.inner.changed();
        Ok(removed)
    }

    /// Trusts a publisher key under `label`, and for `skills` even where
    /// another key signed their earlier versions. Trusting a key again
    /// relabels it.
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host, key: skillhost::PublicKey) -> Result<(), skillhost::CatalogError> {
    /// host.trust_key(&key, "alice", &[])?;
    /// # Ok(()) }
    /// ```
    pub fn trust_key(
        &self,
        key: &PublicKey,
        label: &str,
        skills: &[String],
    ) -> Result<(), CatalogError> {
        lock(&self.inner.store).add_trusted_key(&key.key_id(), label, &key.to_base64(), skills)?;
        self.inner.changed();
        Ok(())
    }

    /// Every trusted publisher key, by label.
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) -> Result<(), skillhost::StateError> {
    /// for k in host.trusted_keys()? { println!("{} {}", k.key_id, k.label); }
    /// # Ok(()) }
    /// ```
    pub fn trusted_keys(&self) -> Result<Vec<TrustedKey>, StateError> {
        Ok(lock(&self.inner.store).trusted_keys()?)
    }

    /// Stops trusting the key with this id or label.
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) -> Result<(), skillhost::CatalogError> {
    /// host.untrust_key("alice")?;
    /// # Ok(()) }
    /// ```
    pub fn untrust_key(&self, id_or_label: &str) -> Result<(), CatalogError> {
        if lock(&self.inner.store).remove_trusted_key(id_or_label)? == 0 {
            return Err(CatalogError::NotFound(format!(
                "no trusted key has the id or label `{id_or_label}`"
            )));
        }
        self.inner.changed();
        Ok(())
    }

    /// The skills `caller` may see, by name: a persona's trusted, enabled
    /// and granted skills whose tools are registered; for the operator,
    /// every skill whose tools are registered (what the MCP front serves as
    /// skills and prompts).
    pub(crate) fn visible_skills(&self, caller: &Caller) -> Result<Vec<SkillInfo>, PersonaError> {
        let reg = self.inner.registry()?;
        let persona = caller.persona_id();
        if let Some(p) = persona
            && !reg.personas.contains(p)
        {
            return Err(PersonaError::NotFound(format!(
                "there is no persona `{p}` (`skillhost personas list` shows them)"
            )));
        }
        Ok(reg
            .skills
            .iter()
            .filter(|(_, info)| info.state.registers_tools())
            .filter(|(name, _)| match persona {
                None => true,
                Some(p) => reg.grants.get(p).is_some_and(|g| g.contains(*name)),
            })
            .map(|(_, info)| info.clone())
            .collect())
    }
}
