//! A skill's `assets/` folder, as its calls read it at `/assets`.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use super::tree::{self, OnEscape, RoDir};

/// A skill's assets folder (`permissions.assets`), shown read-only at
/// `/assets` to the calls of a component loaded with the `assets`
/// capability. Read into host memory at the first call that shows it,
/// then shared by every call (the folder is read once: a change on disk
/// shows with the next registry, as the skill's manifest and component
/// do). A symbolic link that leads out of the folder is left out, as if
/// absent; one inside reads as what it points to. At most
/// `MAX_SKILL_TREE_BYTES` and `MAX_SKILL_TREE_FILES`.
///
/// ```
/// let assets = skillhost::AssetsFolder::new("plugins/weather/assets");
/// assert!(assets.dir().ends_with("assets"));
/// ```
#[derive(Debug)]
pub struct AssetsFolder {
    dir: PathBuf,
    tree: OnceLock<Result<Arc<RoDir>, String>>,
}

impl AssetsFolder {
    /// The assets folder at `dir` (not read yet).
    ///
    /// ```
    /// let assets = skillhost::AssetsFolder::new("/nonexistent/assets");
    /// ```
    pub fn new(dir: impl Into<PathBuf>) -> Arc<AssetsFolder> {
        Arc::new(AssetsFolder {
            dir: dir.into(),
            tree: OnceLock::new(),
        })
    }

    /// Where it is on disk.
    ///
    /// ```
    /// let assets = skillhost::AssetsFolder::new("a");
    /// assert_eq!(assets.dir(), std::path::Path::new("a"));
    /// ```
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Its tree, read at the first call; or why it cannot be read.
    pub(crate) fn tree(&self) -> Result<Arc<RoDir>, String> {
        self.tree
            .get_or_init(|| tree::read_folder(&self.dir, OnEscape::Skip).map_err(|e| e.to_string()))
            .clone()
    }
}
