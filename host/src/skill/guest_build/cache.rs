//! The build cache: components by the digest of everything their build
//! read (language, toolchain and version, the SDK and WIT compiled into
//! this binary, the skill's sources), in the folder `SKILLHOST_BUILD_CACHE`
//! names. A build of sources built before hands back the same bytes in
//! milliseconds instead of running componentize-py or componentize-js
//! again (tens of seconds), and two builds of one source are identical.
//!
//! Off unless the variable is set. The folder is trusted like the sources:
//! what it holds is signed by `pack` as the skill's component. It is made
//! private (0700), and every entry is written whole (a temporary file
//! renamed), so builds running at once share it safely.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::GuestLanguage;
use super::record::{BuildRecord, SourceDigest};

/// The environment variable naming the build cache's folder.
pub const BUILD_CACHE_ENV: &str = "SKILLHOST_BUILD_CACHE";

/// A build cache folder (see the module docs).
pub(super) struct BuildCache {
    dir: PathBuf,
}

impl BuildCache {
    /// The cache `SKILLHOST_BUILD_CACHE` names, if set and usable (a
    /// folder that cannot be made is warned about and not used).
    pub fn from_env() -> Option<BuildCache> {
        let dir = PathBuf::from(std::env::var_os(BUILD_CACHE_ENV)?);
        use std::os::unix::fs::DirBuilderExt as _;
        match std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
        {
            Ok(()) => Some(BuildCache { dir }),
            Err(e) => {
                tracing::warn!(
                    "{BUILD_CACHE_ENV}: cannot use {}: {e}; building without the cache",
                    dir.display()
                );
                None
            }
        }
    }

    /// The key of a build of `sources` in `language` by `toolchain`.
    pub fn key(language: GuestLanguage, toolchain: &str, sources: &SourceDigest) -> String {
        let mut h = Sha256::new();
        for part in [
            format!("{language:?}").as_str(),
            toolchain,
            super::SKILL_WIT,
            match language {
                GuestLanguage::Python => super::PYTHON_SDK,
                GuestLanguage::JavaScript => super::JS_SDK,
                GuestLanguage::Rust => "",
            },
            sources.all.as_str(),
        ] {
            h.update((part.len() as u64).to_le_bytes());
            h.update(part.as_bytes());
        }
        hex::encode(h.finalize())
    }

    fn path(&self, key: &str) -> PathBuf {
        self.dir.join(format!("{key}.wasm"))
    }

    /// The component cached under `key`, if there is one built from
    /// `sources` (its record says so, and records the key: one from before
    /// records had keys is built again).
    pub fn get(&self, key: &str, sources: &SourceDigest) -> Option<Vec<u8>> {
        let bytes = std::fs::read(self.path(key)).ok()?;
        BuildRecord::read(&bytes)
            .filter(|r| r.sources == sources.all && r.key.as_deref() == Some(key))
            .map(|_| bytes)
    }

    /// Keeps `component` under `key`; a failure is logged, never fatal.
    pub fn put(&self, key: &str, component: &[u8]) {
        if let Err(e) = write_whole(&self.path(key), component) {
            tracing::warn!("could not keep a build in {}: {e}", self.dir.display());
        }
    }
}

/// Writes `bytes` to `path` through a temporary file beside it, renamed.
fn write_whole(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    let written = std::fs::write(&tmp, bytes).and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}
