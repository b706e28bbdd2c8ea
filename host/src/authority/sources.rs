//! Local skill folders (`skill_dirs` in `settings.json`): the folders a
//! skill author develops in, loaded as local skills (untrusted until
//! trusted). `skillhost sources add|remove|list`.

use std::path::{Path, PathBuf};

use super::{Host, lock};
use crate::error::CatalogError;
use crate::skill::manifest::SkillManifest;

/// # Skill sources
///
/// Folders of skills the host loads beside its installed ones.
impl Host {
    /// The local skill folders, in the order they are read.
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) -> Result<(), skillhost::CatalogError> {
    /// for dir in host.sources()? { println!("{}", dir.display()); }
    /// # Ok(()) }
    /// ```
    pub fn sources(&self) -> Result<Vec<PathBuf>, CatalogError> {
        Ok(self.inner.data.settings()?.skill_dirs)
    }

    /// Adds `dir` (made absolute) as a local skill folder. It must hold a
    /// valid `skill.yaml` or `SKILL.md`, and not be a source already.
    /// Returns the path as stored.
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) -> Result<(), skillhost::CatalogError> {
    /// host.add_source(std::path::Path::new("plugins/py-stats"))?;
    /// # Ok(()) }
    /// ```
    pub fn add_source(&self, dir: &Path) -> Result<PathBuf, CatalogError> {
        let path = dir
            .canonicalize()
            .map_err(|e| CatalogError::NotFound(format!("no folder {}: {e}", dir.display())))?;
        if !path.is_dir() {
            return Err(CatalogError::Refused(format!(
                "{} is not a folder",
                path.display()
            )));
        }
        let manifest = SkillManifest::load_dir(&path).map_err(|e| {
            CatalogError::Refused(format!("{} is not a skill folder: {e}", path.display()))
        })?;
        let mut settings = self.inner.data.settings()?;
        if settings
            .skill_dirs
            .iter()
            .any(|d| d == &path || d.canonicalize().is_ok_and(|c| c == path))
        {
            return Err(CatalogError::Conflict(format!(
                "{} is a source already",
                path.display()
            )));
        }
        settings.skill_dirs.push(path.clone());
        self.inner.data.save_settings(&settings)?;
        self.changed_sources()?;
        tracing::info!(skill = %manifest.name, dir = %path.display(), "added a local skill folder");
        Ok(path)
    }

    /// Removes `dir` from the local skill folders (as stored, or as it
    /// resolves now). Returns the path that was removed.
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) -> Result<(), skillhost::CatalogError> {
    /// host.remove_source(std::path::Path::new("plugins/py-stats"))?;
    /// # Ok(()) }
    /// ```
    pub fn remove_source(&self, dir: &Path) -> Result<PathBuf, CatalogError> {
        let resolved = dir.canonicalize().ok();
        let absolute = std::path::absolute(dir).ok();
        let mut settings = self.inner.data.settings()?;
        let Some(at) = settings.skill_dirs.iter().position(|d| {
            d == dir
                || Some(d) == absolute.as_ref()
                || resolved
                    .as_ref()
                    .is_some_and(|r| d == r || d.canonicalize().is_ok_and(|c| &c == r))
        }) else {
            return Err(CatalogError::NotFound(format!(
                "{} is not a source (`skillhost sources list` shows them)",
                dir.display()
            )));
        };
        let removed = settings.skill_dirs.remove(at);
        self.inner.data.save_settings(&settings)?;
        self.changed_sources()?;
        Ok(removed)
    }

    /// The registry is rebuilt on the next read, in this process and in
    /// every other one on the same data dir.
    fn changed_sources(&self) -> Result<(), CatalogError> {
        lock(&self.inner.store).bump_generation()?;
        self.inner.changed();
        Ok(())
    }
}
