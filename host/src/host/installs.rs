//! Bundle installs through the host (the HTTP API): `crate::installs` with
//! the host's sandbox, and the registry rebuilt after.

use super::{Host, lock};
use crate::installs::{InstallError, InstallOptions, InstallOutcome};

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
        let bundle = crate::installs::verify(&self.inner.data, bytes)
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
        let out = crate::installs::install(&self.inner.data, &self.inner.sandbox, bytes, options)
            .await
            .map_err(|InstallError(m)| InstallRefusal::Refused(m))?;
        self.inner.changed();
        Ok(out)
    }

    /// Uninstalls every installed version of skill `name`; returns them.
    pub(crate) fn uninstall_skill(&self, name: &str) -> Result<Vec<semver::Version>, InstallError> {
        let removed = crate::installs::uninstall(&self.inner.data, name)?;
        self.inner.changed();
        Ok(removed)
    }
}
