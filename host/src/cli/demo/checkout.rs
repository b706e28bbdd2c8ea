//! The skillhost checkout the demo runs from, if any: where the example
//! plugins' sources are, and the test peers `tests/peers/install.sh`
//! installs (server-everything, Node.js 22, componentize-py and
//! componentize-js). Found around the running binary (`target/*/skillhost`
//! of a checkout), else around the folder it runs in; a binary copied
//! elsewhere has none, and the demo runs what needs no sources.

use std::path::{Path, PathBuf};

/// A skillhost checkout (the folder holding `Cargo.toml`, `host/` and
/// `plugins/`).
pub(super) struct Checkout {
    root: PathBuf,
}

impl Checkout {
    /// The checkout around this binary, else around the current folder.
    pub(super) fn find() -> Option<Checkout> {
        let exe = std::env::current_exe().ok();
        let cwd = std::env::current_dir().ok();
        [exe, cwd]
            .into_iter()
            .flatten()
            .find_map(|start| {
                start
                    .ancestors()
                    .find(|d| is_checkout(d))
                    .map(Path::to_path_buf)
            })
            .map(|root| Checkout { root })
    }

    /// The example plugins' workspace (`plugins/`).
    pub(super) fn plugins(&self) -> PathBuf {
        self.root.join("plugins")
    }

    /// A file under the test peers' folder (`target/peers/`), if it is
    /// there.
    pub(super) fn peer(&self, path: &str) -> Option<PathBuf> {
        let p = self.root.join("target/peers").join(path);
        p.is_file().then_some(p)
    }
}

/// Whether `dir` is the root of a skillhost checkout.
fn is_checkout(dir: &Path) -> bool {
    dir.join("Cargo.toml").is_file()
        && dir.join("host/Cargo.toml").is_file()
        && dir.join("plugins/Cargo.toml").is_file()
}
