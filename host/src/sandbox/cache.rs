//! On-disk caches of compiled code: whole components, keyed by the
//! component's sha256 and the engine's compatibility hash (a second load
//! skips compilation), and single functions, keyed by Cranelift's hash of
//! the function and the compiler's settings (a component that shares code
//! with one compiled before compiles only what is new: every Python skill
//! carries the same CPython, every JavaScript skill the same engine).
//!
//! The cache folder is trusted like the host's own files: a compiled
//! artifact is native code. It lives in the data dir, files mode 0600.

use std::borrow::Cow;
use std::hash::{Hash, Hasher};
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};

use cap_std::fs::{Dir, OpenOptions};
use wasmtime::Engine;
use wasmtime::component::Component;

pub(crate) struct CompileCache {
    dir: Dir,
    engine_hash: String,
}

static TMP_COUNTER: AtomicU64 = AtomicU64::new(0);

impl CompileCache {
    pub fn new(dir: Dir, engine: &Engine) -> CompileCache {
        // SipHash with fixed keys: stable across runs of the same build.
        #[allow(deprecated)]
        let mut h = std::hash::SipHasher::new();
        engine.precompile_compatibility_hash().hash(&mut h);
        CompileCache {
            dir,
            engine_hash: format!("{:016x}", h.finish()),
        }
    }

    fn file_name(&self, sha256: &str) -> String {
        format!("{sha256}-{}.cwasm", self.engine_hash)
    }

    /// A cached compilation, if there is a valid one.
    pub fn load(&self, engine: &Engine, sha256: &str) -> Option<Component> {
        let name = self.file_name(sha256);
        let bytes = self.dir.read(&name).ok()?;
        // SAFETY: the cache folder is written only by this host (see the
        // module docs), and wasmtime checks the artifact header and engine
        // compatibility before use.
        match unsafe { Component::deserialize(engine, &bytes) } {
            Ok(c) => Some(c),
            Err(e) => {
                tracing::warn!("discarding unusable cached component {name}: {e}");
                let _ = self.dir.remove_file(&name);
                None
            }
        }
    }

    /// Stores a compilation; failures are logged, never fatal.
    pub fn store(&self, sha256: &str, component: &Component) {
        if let Err(e) = self.try_store(sha256, component) {
            tracing::warn!("could not cache compiled component {sha256}: {e}");
        }
    }

    fn try_store(&self, sha256: &str, component: &Component) -> anyhow::Result<()> {
        let bytes = component.serialize().map_err(|e| anyhow::anyhow!("{e}"))?;
        let tmp = format!(
            ".tmp-{}-{}-{}",
            std::process::id(),
            TMP_COUNTER.fetch_add(1, Ordering::Relaxed),
            sha256
        );
        let mut opts = OpenOptions::new();
        opts.write(true).create_new(true);
        #[cfg(unix)]
        {
            use cap_std::fs::OpenOptionsExt;
            opts.mode(0o600);
        }
        let result = (|| -> anyhow::Result<()> {
            let mut f = self.dir.open_with(&tmp, &opts)?;
            f.write_all(&bytes)?;
            f.sync_all()?;
            self.dir.rename(&tmp, &self.dir, self.file_name(sha256))?;
            Ok(())
        })();
        if result.is_err() {
            let _ = self.dir.remove_file(&tmp);
        }
        result
    }
}

/// The folder of [`FunctionCache`] inside the compile cache's folder.
pub(crate) const FUNCTIONS_DIR: &str = "functions";

/// Cranelift's incremental compilation cache on disk: one file per
/// compiled function, named by the hex of its 32-byte key under a folder
/// of the key's first byte (so no folder holds more than a few hundred
/// files). Cranelift checks its own version in every entry it reads, and
/// an entry it cannot read is compiled again; entries are written whole
/// (a temporary file renamed), so processes compiling at once share it.
#[derive(Debug)]
pub(crate) struct FunctionCache {
    dir: Dir,
}

impl FunctionCache {
    /// The function cache in `dir` (made private if it is new).
    pub fn open(dir: &Dir) -> anyhow::Result<FunctionCache> {
        use cap_std::fs::DirBuilderExt as _;
        let mut b = cap_std::fs::DirBuilder::new();
        b.recursive(true).mode(0o700);
        dir.create_dir_with(FUNCTIONS_DIR, &b)?;
        Ok(FunctionCache {
            dir: dir.open_dir(FUNCTIONS_DIR)?,
        })
    }

    fn path(key: &[u8]) -> Option<(String, String)> {
        let (first, _) = key.split_first()?;
        Some((format!("{first:02x}"), hex::encode(key)))
    }

    fn try_insert(&self, key: &[u8], value: &[u8]) -> anyhow::Result<()> {
        let (folder, name) = Self::path(key).ok_or_else(|| anyhow::anyhow!("empty key"))?;
        if !self.dir.exists(&folder) {
            use cap_std::fs::DirBuilderExt as _;
            let mut b = cap_std::fs::DirBuilder::new();
            b.recursive(true).mode(0o700);
            self.dir.create_dir_with(&folder, &b)?;
        }
        let sub = self.dir.open_dir(&folder)?;
        let tmp = format!(
            ".tmp-{}-{}",
            std::process::id(),
            TMP_COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        let mut opts = OpenOptions::new();
        opts.write(true).create_new(true);
        {
            use cap_std::fs::OpenOptionsExt;
            opts.mode(0o600);
        }
        let result = (|| -> anyhow::Result<()> {
            let mut f = sub.open_with(&tmp, &opts)?;
            f.write_all(value)?;
            sub.rename(&tmp, &sub, &name)?;
            Ok(())
        })();
        if result.is_err() {
            let _ = sub.remove_file(&tmp);
        }
        result
    }
}

impl wasmtime::CacheStore for FunctionCache {
    fn get(&self, key: &[u8]) -> Option<Cow<'_, [u8]>> {
        let (folder, name) = Self::path(key)?;
        self.dir
            .read(format!("{folder}/{name}"))
            .ok()
            .map(Cow::Owned)
    }

    fn insert(&self, key: &[u8], value: Vec<u8>) -> bool {
        match self.try_insert(key, &value) {
            Ok(()) => true,
            Err(e) => {
                tracing::debug!("could not cache a compiled function: {e}");
                false
            }
        }
    }
}
