//! On-disk cache of compiled components, keyed by the component's sha256 and
//! the engine's compatibility hash: a second load skips compilation.
//!
//! The cache folder is trusted like the host's own files: a compiled
//! artifact is native code. It lives in the data dir, files mode 0600.

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
