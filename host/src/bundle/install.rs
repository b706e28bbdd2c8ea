//! Managed installs: atomic, serialised, never writing outside the data dir.
//!
//! An install extracts into `skills/.staging/<id>/`, verifies everything
//! there (statement, digests of the bytes read back from disk, manifest,
//! component imports and `implemented()`), renames the folder to
//! `skills/<name>/<version>/` (keeping the signed statement there, as
//! `.skillhost/statement.json`), and then records it in the database: the
//! database commit is the commit point. At start, staging leftovers, folders
//! without a record and records without a folder are removed, so a kill -9
//! at any point leaves either the old state or the new one.

use std::io::{Read, Write};
use std::sync::atomic::{AtomicU64, Ordering};

use cap_std::fs::{Dir, OpenOptions};
use sha2::{Digest, Sha256};

use crate::bundle::trust::PublicKey;
use crate::bundle::{OpenedBundle, STATEMENT_PATH, Signer, open_bundle};
use crate::error::CatalogError;
use crate::sandbox::Sandbox;
use crate::skill::Skill;
use crate::skill::manifest::SkillManifest;
use crate::state::Store;
use crate::state::data_dir::{
    DataDir, PRIVATE_FILE_MODE, private_dir, private_dirs, private_new_file,
};
use crate::state::skills::InstalledRecord;

const SKILLS: &str = "skills";
const STAGING: &str = "skills/.staging";
const LOCK: &str = "skills/.lock";
/// The folder of [`STATEMENT_PATH`] inside an install.
const STATEMENT_DIR: &str = ".skillhost";

/// Options of an install.
///
/// ```
/// let o = skillhost::InstallOptions { allow_untrusted: true, ..Default::default() };
/// assert!(!o.allow_downgrade);
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct InstallOptions {
    /// Accept an unsigned bundle or one signed by an unknown key, recording
    /// it as untrusted.
    pub allow_untrusted: bool,
    /// Accept a version lower than one already installed.
    pub allow_downgrade: bool,
    /// Accept a skill named like a built-in skill, which it then shadows
    /// (the built-in's tools are gone while the install is there).
    pub replace_builtin: bool,
}

/// What an install did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct InstallOutcome {
    /// Name of the skill installed.
    pub name: String,
    /// Its version.
    pub version: semver::Version,
    /// Hex sha256 of the signed statement.
    pub digest: String,
    /// Who signed it.
    pub signer: Signer,
    /// Whether it was recorded as trusted.
    pub trusted: bool,
}

/// A refusal of the bundle or request; nothing was changed.
fn err(m: impl Into<String>) -> CatalogError {
    CatalogError::Refused(m.into())
}

/// The host's state could not be read or written.
fn state(e: impl std::fmt::Display) -> CatalogError {
    CatalogError::State(anyhow::anyhow!("{e}").into())
}

static STAGING_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Holds the install lock (an exclusive lock on `skills/.lock`) while alive.
struct InstallLock(std::fs::File);

impl InstallLock {
    fn acquire(data: &DataDir) -> Result<InstallLock, CatalogError> {
        let mut opts = OpenOptions::new();
        opts.create(true).write(true).truncate(false);
        {
            use cap_std::fs::OpenOptionsExt as _;
            opts.mode(PRIVATE_FILE_MODE);
        }
        let file = data
            .dir
            .open_with(LOCK, &opts)
            .map_err(|e| state(format!("cannot open the install lock: {e}")))?
            .into_std();
        file.lock()
            .map_err(|e| state(format!("cannot take the install lock: {e}")))?;
        Ok(InstallLock(file))
    }
}

impl Drop for InstallLock {
    fn drop(&mut self) {
        let _ = self.0.unlock();
    }
}

fn trusted_key_lookup(
    store: &Store,
) -> Result<impl Fn(&str) -> Option<PublicKey> + use<>, CatalogError> {
    let keys = store
        .trusted_keys()
        .map_err(|e| state(format!("cannot read the trust store: {e}")))?;
    Ok(move |id: &str| {
        keys.iter()
            .find(|k| k.key_id == id)
            .and_then(|k| PublicKey::from_base64(&k.public_key).ok())
    })
}

/// Opens a bundle against the trust store of `data` without installing it.
pub(crate) fn verify(data: &DataDir, bytes: &[u8]) -> Result<OpenedBundle, CatalogError> {
    let store = Store::open(data).map_err(state)?;
    let lookup = trusted_key_lookup(&store)?;
    let bundle = open_bundle(bytes, lookup).map_err(|e| err(e.to_string()))?;
    // The manifest is checked as install checks it (permissions included),
    // so verify refuses what install would.
    let label = format!("{}@{}", bundle.statement.name, bundle.statement.version);
    let manifest = match (
        bundle.files.get(crate::skill::manifest::MANIFEST_FILE),
        bundle.files.get(crate::skill::manifest::AGENT_SKILL_FILE),
    ) {
        (Some(y), _) => SkillManifest::parse(&String::from_utf8_lossy(y)),
        (None, Some(md)) => SkillManifest::parse_skill_md(&String::from_utf8_lossy(md)),
        (None, None) => {
            return Err(err(format!(
                "{label}: the bundle has neither skill.yaml nor SKILL.md"
            )));
        }
    };
    manifest.map_err(|e| err(format!("{label}: {e}")))?;
    Ok(bundle)
}

/// The file in an install's folder naming the bundle it was unpacked from
/// (on a database replicas share).
const BUNDLE_MARK: &str = ".skillhost/bundle.sha256";

fn mark_bundle(data: &DataDir, folder: &str, sha256: &str) -> Result<(), CatalogError> {
    let path = format!("{folder}/{BUNDLE_MARK}");
    data.dir
        .open_with(&path, &private_new_file())
        .and_then(|mut f| {
            f.write_all(sha256.as_bytes())?;
            f.sync_all()
        })
        .map_err(|e| err(format!("cannot write `{BUNDLE_MARK}`: {e}")))
}

/// Whether this replica's folder of `r` holds the bundle the record names.
fn holds_bundle(data: &DataDir, r: &InstalledRecord) -> bool {
    let Some(want) = &r.bundle_sha256 else {
        return data
            .dir
            .is_dir(format!("{SKILLS}/{}/{}", r.name, r.version));
    };
    data.dir
        .read_to_string(format!("{SKILLS}/{}/{}/{BUNDLE_MARK}", r.name, r.version))
        .is_ok_and(|got| got.trim() == want)
}

/// On a database replicas share: unpacks every install recorded there
/// that this replica's data dir lacks (or holds from another bundle: a
/// version uninstalled and installed again), from the bundle the database
/// keeps, verified by its sha256 and by the digest of its signed
/// statement. The check is a file read per install; the unpacking, under
/// the install lock, happens once per install and replica. A record whose
/// bundle cannot be had is reported and left (its skill does not load
/// here) rather than forgotten: it is another replica's install.
pub(crate) fn materialize(data: &DataDir, store: &Store) -> anyhow::Result<()> {
    let records = store.installed()?;
    if records.iter().all(|r| holds_bundle(data, r)) {
        return Ok(());
    }
    let _lock = InstallLock::acquire(data)?;
    for r in &records {
        if holds_bundle(data, r) {
            continue;
        }
        let label = format!("{}@{}", r.name, r.version);
        let Some(sha256) = &r.bundle_sha256 else {
            tracing::warn!("{label} is recorded without its bundle: it cannot be unpacked here");
            continue;
        };
        let Some(bytes) = store.blob(sha256)? else {
            tracing::warn!("{label}: its bundle {sha256} is missing from the database");
            continue;
        };
        if hex::encode(Sha256::digest(&bytes)) != *sha256 {
            tracing::warn!(
                "{label}: the stored bundle does not match its sha256 {sha256}: not unpacked"
            );
            continue;
        }
        let bundle = match open_bundle(&bytes, trusted_key_lookup(store)?) {
            Ok(b) if b.digest == r.digest => b,
            Ok(_) => {
                tracing::warn!("{label}: the stored bundle's statement is not the recorded one");
                continue;
            }
            Err(e) => {
                tracing::warn!("{label}: the stored bundle does not open: {e}");
                continue;
            }
        };
        let staging = stage(data, &bundle)?;
        let placed = mark_bundle(data, &staging, sha256).and_then(|()| {
            ensure_real_dir(&data.dir, SKILLS, &r.name)?;
            let target = format!("{SKILLS}/{}/{}", r.name, r.version);
            if data.dir.symlink_metadata(&target).is_ok() {
                data.dir
                    .remove_dir_all(&target)
                    .map_err(|e| err(format!("cannot replace {target}: {e}")))?;
            }
            data.dir
                .rename(&staging, &data.dir, &target)
                .map_err(|e| err(format!("cannot move {label} into place: {e}")))
        });
        if let Err(e) = placed {
            let _ = data.dir.remove_dir_all(&staging);
            tracing::warn!("{label}: {e}");
        }
    }
    Ok(())
}

/// Removes staging leftovers and reconciles folders with records (on a
/// database replicas share, a record without a folder is unpacked from
/// its bundle instead of forgotten: see [`materialize`]).
pub(crate) fn recover(data: &DataDir, store: &mut Store) -> anyhow::Result<()> {
    let _lock = InstallLock::acquire(data)?;
    for e in data.dir.read_dir(STAGING)? {
        let name = e?.file_name();
        let _ = data
            .dir
            .remove_dir_all(format!("{STAGING}/{}", name.to_string_lossy()));
    }
    let records = store.installed()?;
    for e in data.dir.read_dir(SKILLS)? {
        let e = e?;
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        if !e.file_type()?.is_dir() {
            // Only our folders belong here; a planted file or symlink goes.
            let _ = data.dir.remove_file(format!("{SKILLS}/{name}"));
            continue;
        }
        for v in data.dir.read_dir(format!("{SKILLS}/{name}"))? {
            let v = v?.file_name().to_string_lossy().into_owned();
            if !records
                .iter()
                .any(|r| r.name == name && r.version.to_string() == v)
            {
                tracing::warn!(
                    "removing {SKILLS}/{name}/{v}: not recorded as installed (interrupted install?)"
                );
                let _ = data.dir.remove_dir_all(format!("{SKILLS}/{name}/{v}"));
            }
        }
    }
    if data.database.is_shared() {
        drop(_lock);
        return materialize(data, store);
    }
    for r in &records {
        if !data
            .dir
            .is_dir(format!("{SKILLS}/{}/{}", r.name, r.version))
        {
            tracing::warn!("forgetting {}@{}: its folder is missing", r.name, r.version);
            store.remove_installed(&r.name, Some(&r.version))?;
        }
    }
    Ok(())
}

/// Writes the bundle's files into a fresh staging folder and checks the
/// bytes read back from disk against the statement.
fn stage(data: &DataDir, bundle: &OpenedBundle) -> Result<String, CatalogError> {
    let id = format!(
        "{}-{}-{}",
        std::process::id(),
        STAGING_COUNTER.fetch_add(1, Ordering::Relaxed),
        &bundle.digest[..16]
    );
    let rel = format!("{STAGING}/{id}");
    data.dir
        .create_dir_with(&rel, &private_dir())
        .map_err(|e| err(format!("cannot create staging folder: {e}")))?;
    let staging = data
        .dir
        .open_dir(&rel)
        .map_err(|e| err(format!("cannot open staging folder: {e}")))?;
    let result = (|| -> Result<(), CatalogError> {
        for (path, bytes) in &bundle.files {
            if let Some((parent, _)) = path.rsplit_once('/') {
                staging
                    .create_dir_with(parent, &private_dirs())
                    .map_err(|e| err(format!("cannot create `{parent}`: {e}")))?;
            }
            let mut f = staging
                .open_with(path, &private_new_file())
                .map_err(|e| err(format!("cannot create `{path}`: {e}")))?;
            f.write_all(bytes)
                .and_then(|()| f.sync_all())
                .map_err(|e| err(format!("cannot write `{path}`: {e}")))?;
        }
        // The scripts' packages: the signed lock's wheels checked again
        // and unpacked where the scripts import them from.
        let file = |path: &str| bundle.files.get(path).cloned();
        if let Some(lock) = file(crate::skill::scripts::requirements::LOCK_PATH) {
            use crate::skill::scripts::{packages, requirements};
            let lock = requirements::Lock::parse(&String::from_utf8_lossy(&lock))
                .map_err(|e| err(e.to_string()))?;
            let unpacked = packages::unpacked_files(&lock, &|wheel| {
                file(&format!("{}/{wheel}", requirements::WHEELS_DIR))
            })
            .map_err(|e| err(e.to_string()))?;
            for (path, bytes) in &unpacked.files {
                let path = format!("{}/{path}", packages::UNPACKED_DIR);
                if let Some((parent, _)) = path.rsplit_once('/') {
                    staging
                        .create_dir_with(parent, &private_dirs())
                        .map_err(|e| err(format!("cannot create `{parent}`: {e}")))?;
                }
                let mut f = staging
                    .open_with(&path, &private_new_file())
                    .map_err(|e| err(format!("cannot create `{path}`: {e}")))?;
                f.write_all(bytes)
                    .and_then(|()| f.sync_all())
                    .map_err(|e| err(format!("cannot write `{path}`: {e}")))?;
            }
        }
        // The signed statement stays with the install: it lists every file
        // with its digest (served to MCP clients as the skill's files).
        staging
            .create_dir_with(STATEMENT_DIR, &private_dirs())
            .and_then(|()| {
                let mut f = staging.open_with(STATEMENT_PATH, &private_new_file())?;
                f.write_all(&bundle.statement.to_canonical_bytes())?;
                f.sync_all()
            })
            .map_err(|e| err(format!("cannot write `{STATEMENT_PATH}`: {e}")))?;
        for entry in &bundle.statement.files {
            let mut f = staging
                .open(&entry.path)
                .map_err(|e| err(format!("cannot reopen `{}`: {e}", entry.path)))?;
            let mut h = Sha256::new();
            let mut buf = vec![0u8; 64 << 10];
            let mut size = 0u64;
            loop {
                let n = f
                    .read(&mut buf)
                    .map_err(|e| err(format!("cannot read back `{}`: {e}", entry.path)))?;
                if n == 0 {
                    break;
                }
                size += n as u64;
                h.update(&buf[..n]);
            }
            if size != entry.size || hex::encode(h.finalize()) != entry.sha256 {
                return Err(err(format!(
                    "`{}` on disk does not match the signed statement",
                    entry.path
                )));
            }
        }
        Ok(())
    })();
    match result {
        Ok(()) => Ok(rel),
        Err(e) => {
            let _ = data.dir.remove_dir_all(&rel);
            Err(e)
        }
    }
}

/// Installs a bundle. See the module docs for the guarantees.
pub(crate) async fn install(
    data: &DataDir,
    sandbox: &Sandbox,
    bytes: &[u8],
    options: InstallOptions,
) -> Result<InstallOutcome, CatalogError> {
    let _lock = InstallLock::acquire(data)?;
    let mut store = Store::open(data).map_err(state)?;
    let lookup = trusted_key_lookup(&store)?;
    let bundle = open_bundle(bytes, lookup).map_err(|e| err(e.to_string()))?;
    let st = &bundle.statement;
    let label = format!("{}@{}", st.name, st.version);

    let installed = store.installed().map_err(state)?;
    let same_name: Vec<&InstalledRecord> = installed.iter().filter(|r| r.name == st.name).collect();
    if same_name.iter().any(|r| r.version == st.version) {
        return Err(CatalogError::Conflict(format!(
            "{label} is already installed; uninstall it first, or install a higher version"
        )));
    }

    // Trust.
    let trusted = matches!(bundle.signer, Signer::Trusted { .. });
    if !trusted && !options.allow_untrusted {
        let why = match &bundle.signer {
            Signer::Unsigned => "it is unsigned".to_string(),
            Signer::Unknown { key_id } => format!("its signer key `{key_id}` is not trusted"),
            Signer::Trusted { .. } => String::new(),
        };
        return Err(err(format!(
            "{label}: refused because {why}; add the publisher's key with `skillhost trust add`, or install with --allow-untrusted (it is then visible to no persona until `skillhost skills trust {}`)",
            st.name
        )));
    }

    // An untrusted bundle under a built-in's name would take its place
    // (and, untrusted, leave its tools to nobody).
    if !trusted
        && !options.replace_builtin
        && crate::skill::builtin::builtin_skills()
            .iter()
            .any(|b| b.name == st.name)
    {
        return Err(err(format!(
            "{label}: refused because `{}` is the name of a built-in skill, which this untrusted \
             install would shadow (its tools would be this bundle's); install with \
             --replace-builtin (API: replace_builtin=true) to mean it",
            st.name
        )));
    }

    // Rollback and signer pinning against what is installed.
    if let Some(max) = same_name.iter().map(|r| &r.version).max()
        && st.version < *max
        && !options.allow_downgrade
    {
        return Err(err(format!(
            "{label}: refused because {} {max} is installed (rollback); use --allow-downgrade to install an older version",
            st.name
        )));
    }
    let new_signer = bundle.signer.key_id().map(str::to_string);
    if let Some(previous) = same_name.iter().rev().find_map(|r| r.signer.clone())
        && new_signer.as_deref() != Some(previous.as_str())
    {
        let keys = store.trusted_keys().map_err(state)?;
        let explicitly = new_signer.as_deref().is_some_and(|id| {
            keys.iter()
                .any(|k| k.key_id == id && k.skills.contains(&st.name))
        });
        if !explicitly {
            return Err(err(format!(
                "{label}: refused because earlier versions were signed by key `{previous}` and this one by {}; \
                 trust the new key for this skill with `skillhost trust add KEY.pub --name LABEL --for {}`",
                new_signer
                    .as_deref()
                    .map(|k| format!("key `{k}`"))
                    .unwrap_or_else(|| "no key".into()),
                st.name
            )));
        }
    }

    // Stage, then check the skill as it will run. The bundle goes into the
    // database with the record (so `migrate --to` can carry it, and
    // replicas sharing a database unpack it); on a shared database the
    // folder says which bundle it holds.
    let shared = data.database.is_shared();
    let bundle_sha256 = hex::encode(Sha256::digest(bytes));
    let staging = stage(data, &bundle)?;
    if shared {
        mark_bundle(data, &staging, &bundle_sha256)?;
    }
    let checked = async {
        let staging_path = data.root.join(&staging);
        let manifest =
            SkillManifest::load_dir(&staging_path).map_err(|e| err(format!("{label}: {e}")))?;
        if manifest.name != st.name || manifest.version != st.version {
            return Err(err(format!(
                "{label}: the manifest says {}@{} but the signed statement says {label}",
                manifest.name, manifest.version
            )));
        }
        let skill = Skill::load_dir(sandbox, &staging_path).map_err(|e| err(e.to_string()))?;
        skill
            .verify_implemented()
            .await
            .map_err(|e| err(e.to_string()))?;
        // The scripts and their packages byte-compiled now, by the
        // sandbox's own CPython, so no call parses their sources. A build
        // without the runtime skips it (its calls say why they cannot run).
        if manifest.script_set().is_some()
            && let Ok(runtime) = sandbox.script_runtime()
        {
            let files = crate::SkillFiles::from_dir(&staging_path)
                .map_err(|e| err(format!("{label}: {e}")))?;
            let pyc = runtime
                .compile(&files)
                .await
                .map_err(|e| err(format!("{label}: byte-compiling its scripts: {e}")))?;
            data.dir
                .write(
                    format!(
                        "{staging}/{}",
                        crate::skill::scripts::pycache_path(runtime.sha256())
                    ),
                    pyc.to_archive(),
                )
                .map_err(|e| err(format!("{label}: cannot keep its byte-code: {e}")))?;
        }
        Ok(())
    }
    .await;
    let commit = checked.and_then(|()| {
        ensure_real_dir(&data.dir, SKILLS, &st.name)?;
        let target = format!("{SKILLS}/{}/{}", st.name, st.version);
        if data.dir.symlink_metadata(&target).is_ok() {
            return Err(err(format!(
                "{target} already exists in the data dir; remove it or run any command to clean up"
            )));
        }
        data.dir
            .rename(&staging, &data.dir, &target)
            .map_err(|e| err(format!("cannot move the install into place: {e}")))?;
        let record = InstalledRecord {
            name: st.name.clone(),
            version: st.version.clone(),
            digest: bundle.digest.clone(),
            signer: new_signer.clone(),
            trusted,
            installed_at: 0,
            bundle_sha256: Some(bundle_sha256.clone()),
        };
        if let Err(e) = store.add_installed(&record, Some(bytes)) {
            let _ = data.dir.remove_dir_all(&target);
            return Err(state(format!("cannot record the install: {e}")));
        }
        Ok(())
    });
    if let Err(e) = commit {
        let _ = data.dir.remove_dir_all(&staging);
        return Err(e);
    }
    Ok(InstallOutcome {
        name: st.name.clone(),
        version: st.version.clone(),
        digest: bundle.digest.clone(),
        signer: bundle.signer.clone(),
        trusted,
    })
}

/// Makes sure `parent/name` is a real folder, never a planted symlink or file.
fn ensure_real_dir(dir: &Dir, parent: &str, name: &str) -> Result<(), CatalogError> {
    let path = format!("{parent}/{name}");
    match dir.symlink_metadata(&path) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(err(format!(
            "{path} in the data dir is not a folder (a planted symlink or file?); remove it"
        ))),
        Err(_) => dir
            .create_dir_with(&path, &private_dir())
            .map_err(|e| err(format!("cannot create {path}: {e}"))),
    }
}

/// Installs a bundle into the data dir at `data_dir` (created if missing),
/// after cleaning up any interrupted install. See [`InstallOptions`] for what
/// is accepted; every refusal leaves the data dir as it was.
///
/// ```no_run
/// # async fn f() -> anyhow::Result<()> {
/// let sandbox = skillhost::SandboxBuilder::new().build()?;
/// let bytes = std::fs::read("greeter.skill")?;
/// let out = skillhost::install_bundle(std::path::Path::new("data"), &sandbox, &bytes, Default::default()).await?;
/// println!("installed {}@{}", out.name, out.version);
/// # Ok(()) }
/// ```
pub async fn install_bundle(
    data_dir: &std::path::Path,
    sandbox: &Sandbox,
    bytes: &[u8],
    options: InstallOptions,
) -> Result<InstallOutcome, CatalogError> {
    let data = DataDir::open(data_dir).map_err(state)?;
    let mut store = Store::open(&data).map_err(state)?;
    recover(&data, &mut store).map_err(state)?;
    drop(store);
    install(&data, sandbox, bytes, options).await
}

/// Uninstalls `name` (every version) or `name@version`.
pub(crate) fn uninstall(data: &DataDir, spec: &str) -> Result<Vec<semver::Version>, CatalogError> {
    let (name, version) = match spec.split_once('@') {
        Some((n, v)) => (
            n,
            Some(
                semver::Version::parse(v)
                    .map_err(|e| err(format!("`{v}` is not a version: {e}")))?,
            ),
        ),
        None => (spec, None),
    };
    let _lock = InstallLock::acquire(data)?;
    let mut store = Store::open(data).map_err(state)?;
    let removed = store
        .remove_installed(name, version.as_ref())
        .map_err(state)?;
    if removed.is_empty() {
        return Err(CatalogError::NotFound(format!("`{spec}` is not installed")));
    }
    for v in &removed {
        let _ = data.dir.remove_dir_all(format!("{SKILLS}/{name}/{v}"));
    }
    if data
        .dir
        .read_dir(format!("{SKILLS}/{name}"))
        .map(|mut d| d.next().is_none())
        .unwrap_or(false)
    {
        let _ = data.dir.remove_dir(format!("{SKILLS}/{name}"));
    }
    Ok(removed)
}
