//! A skill's Python packages from its requirements to the folder its
//! scripts import from.
//!
//! - **check and pack** ([`prepare`]): with `--wheels DIR`, the declared
//!   requirements are resolved against the wheels there and the lock and
//!   the chosen wheels written into the skill folder's `.packages/` (a
//!   lock file, like any project's, packed and signed as the skill's
//!   files); without it, a lock already there is checked again (every
//!   wheel by its digest and the wheel checks, every requirement pinned);
//!   requirements with no lock are an error naming `--wheels`. The
//!   packages are unpacked into the folder's `.python/` (never packed) for
//!   the folder's own runs.
//! - **install** ([`unpacked_files`]): the bundle's lock and wheels checked
//!   again and unpacked into the install's `.python/`, which the scripts
//!   see at `/skill/.python`. Nothing is fetched at install or call time.
//!
//! Declared requirements: `scripts.python.requirements` in skill.yaml,
//! else `<scripts folder>/requirements.txt`, else `requirements.txt` at
//! the skill's root (the public skills use both).

use super::package_error::{PackageError, PackageErrorKind};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::requirements::{LOCK_PATH, Lock, WHEELS_DIR};
use super::resolve::{Requirement, lock_of, parse_requirements, resolve};
use super::wheel::{check_wheel, unpacked_path};
use crate::skill::manifest::SkillManifest;

/// Where a skill's packages are unpacked, relative to its folder (the
/// runner puts `/skill/.python` on `sys.path`).
pub const UNPACKED_DIR: &str = ".python";

/// The requirements file a skill declares, if it has one.
pub fn requirements_file(dir: &Path, manifest: &SkillManifest) -> Option<PathBuf> {
    let decl = manifest.scripts.clone().unwrap_or_default();
    if let Some(p) = decl.python.as_ref().and_then(|p| p.requirements.as_ref()) {
        return Some(dir.join(p));
    }
    [
        dir.join(decl.folder()).join("requirements.txt"),
        dir.join("requirements.txt"),
    ]
    .into_iter()
    .find(|p| p.is_file())
}

/// What [`prepare`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prepared {
    /// The packages pinned, `name==version`.
    pub packages: Vec<String>,
    /// Native files left out (`package: file`), for the author to read.
    pub dropped: Vec<String>,
}

/// Resolves (with `wheels`) or checks again (without) the packages of the
/// skill in `dir`, writes its `.packages/` and unpacks `.python/`; `None`
/// when it has no scripts, or declares no requirements and has no lock. An error names the
/// package, version and file at fault.
pub fn prepare(dir: &Path, wheels: Option<&Path>) -> Result<Option<Prepared>, PackageError> {
    let manifest = SkillManifest::load_dir(dir)
        .map_err(|e| PackageError::new(PackageErrorKind::Manifest, e.to_string()))?;
    // Only scripts take packages this way (a component's are vendored).
    if manifest.script_set().is_none() {
        return Ok(None);
    }
    let drop_native: Vec<String> = manifest
        .scripts
        .as_ref()
        .and_then(|s| s.python.as_ref())
        .map(|p| p.drop_native.clone())
        .unwrap_or_default();
    let requirements: Vec<Requirement> = match requirements_file(dir, &manifest) {
        Some(path) => {
            let text = std::fs::read_to_string(&path)
                .map_err(|e| PackageError::io(format!("cannot read {}: {e}", path.display())))?;
            parse_requirements(&text)
                .map_err(|e| PackageError::new(e.kind(), format!("{}: {e}", path.display())))?
        }
        None => Vec::new(),
    };
    let lock_path = dir.join(LOCK_PATH);
    let (lock, wheel_bytes) = match wheels {
        Some(from) => {
            if requirements.is_empty() {
                return Ok(None);
            }
            let resolved = resolve(&requirements, from, &drop_native)?;
            let lock = lock_of(&resolved);
            let bytes: Vec<(String, Vec<u8>)> = resolved
                .into_iter()
                .map(|r| (r.pin.wheel.clone(), r.bytes))
                .collect();
            let wheels_dir = dir.join(WHEELS_DIR);
            if wheels_dir.exists() {
                std::fs::remove_dir_all(&wheels_dir).map_err(|e| {
                    PackageError::io(format!("cannot clear {}: {e}", wheels_dir.display()))
                })?;
            }
            std::fs::create_dir_all(&wheels_dir).map_err(|e| {
                PackageError::io(format!("cannot create {}: {e}", wheels_dir.display()))
            })?;
            for (file, b) in &bytes {
                std::fs::write(wheels_dir.join(file), b)
                    .map_err(|e| PackageError::io(format!("cannot write {file}: {e}")))?;
            }
            std::fs::write(&lock_path, lock.to_text()).map_err(|e| {
                PackageError::io(format!("cannot write {}: {e}", lock_path.display()))
            })?;
            (lock, bytes)
        }
        None => {
            if !lock_path.is_file() {
                if requirements.is_empty() {
                    return Ok(None);
                }
                return Err(PackageError::lock(format!(
                    "the scripts declare Python requirements but {} has no {LOCK_PATH}: resolve \
                     them with `--wheels DIR` (a folder of the wheels, fetched with `pip download \
                     --only-binary=:all: --platform any --python-version 3.14 --implementation py \
                     --abi none -d DIR PACKAGE`)",
                    dir.display()
                )));
            }
            let lock = Lock::parse(&std::fs::read_to_string(&lock_path).map_err(|e| {
                PackageError::io(format!("cannot read {}: {e}", lock_path.display()))
            })?)?;
            for r in &requirements {
                let pinned = lock.pins.iter().find(|p| p.name == r.name);
                if !pinned.is_some_and(|p| r.allows(&p.version)) {
                    return Err(PackageError::lock(format!(
                        "{LOCK_PATH} does not pin `{}` as the requirements ask: resolve again \
                         with `--wheels DIR`",
                        r.name
                    )));
                }
            }
            let mut bytes = Vec::new();
            for p in &lock.pins {
                let path = dir.join(WHEELS_DIR).join(&p.wheel);
                let b = std::fs::read(&path).map_err(|e| {
                    PackageError::lock(format!(
                        "{LOCK_PATH} names {}, which cannot be read: {e}",
                        p.wheel
                    ))
                })?;
                bytes.push((p.wheel.clone(), b));
            }
            (lock, bytes)
        }
    };
    let files = unpacked_files(&lock, &|file| {
        wheel_bytes
            .iter()
            .find(|(f, _)| f == file)
            .map(|(_, b)| b.clone())
    })?;
    let target = dir.join(UNPACKED_DIR);
    if target.exists() {
        std::fs::remove_dir_all(&target)
            .map_err(|e| PackageError::io(format!("cannot clear {}: {e}", target.display())))?;
    }
    let mut dropped = Vec::new();
    for (path, data) in &files.files {
        let at = target.join(path);
        if let Some(parent) = at.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| PackageError::io(format!("cannot create {path}: {e}")))?;
        }
        std::fs::write(&at, data)
            .map_err(|e| PackageError::io(format!("cannot write {path}: {e}")))?;
    }
    dropped.extend(files.dropped);
    Ok(Some(Prepared {
        packages: lock
            .pins
            .iter()
            .map(|p| format!("{}=={}", p.name, p.version))
            .collect(),
        dropped,
    }))
}

/// The files a lock's wheels unpack to, relative to [`UNPACKED_DIR`].
#[derive(Debug, Clone, Default)]
pub struct Unpacked {
    /// Every file, by path.
    pub files: Vec<(String, Vec<u8>)>,
    /// Native files left out, `package: file`.
    pub dropped: Vec<String>,
}

/// Unpacks `lock`'s wheels (their bytes by file name from `wheel`): each
/// checked against its pinned digest and by the wheel checks again. Two
/// wheels writing one path is an error.
pub fn unpacked_files(
    lock: &Lock,
    wheel: &dyn Fn(&str) -> Option<Vec<u8>>,
) -> Result<Unpacked, PackageError> {
    let mut out = Unpacked::default();
    for p in &lock.pins {
        let bytes = wheel(&p.wheel).ok_or_else(|| {
            PackageError::lock(format!(
                "{LOCK_PATH} pins {} {}, but {}/{} is missing",
                p.name, p.version, WHEELS_DIR, p.wheel
            ))
        })?;
        if hex::encode(Sha256::digest(&bytes)) != p.sha256 {
            return Err(PackageError::lock(format!(
                "{}/{} is not the wheel {LOCK_PATH} pins for {} {} (its sha256 differs)",
                WHEELS_DIR, p.wheel, p.name, p.version
            )));
        }
        let checked = check_wheel(&p.wheel, &bytes, p.drop_native)?;
        if checked.name.name != p.name || checked.name.version != p.version {
            return Err(PackageError::lock(format!(
                "{}/{} is {} {}, but {LOCK_PATH} pins {} {}",
                WHEELS_DIR, p.wheel, checked.name.name, checked.name.version, p.name, p.version
            )));
        }
        for d in checked.dropped {
            out.dropped.push(format!("{}: {d}", p.name));
        }
        for (path, data) in checked.files {
            let path = unpacked_path(&path);
            if out.files.iter().any(|(q, _)| *q == path) {
                return Err(PackageError::lock(format!(
                    "{}: `{path}` is also in another package",
                    p.name
                )));
            }
            out.files.push((path, data));
        }
    }
    Ok(out)
}
