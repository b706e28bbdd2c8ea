//! The blob store for input refs: files handed to tool calls by an opaque id.
//!
//! Blobs live in the data dir under `refs/`, one file per blob, named by its
//! id (`ref_` + 32 lowercase hex). Every file operation goes through a
//! `cap_std::fs::Dir` opened on `refs/`, and every id is checked with
//! [`RefBlobs::valid_id`] before it touches the filesystem, so no path can be
//! formed from input.
//!
//! A blob is written to `.tmp-<id>` first (created exclusively), fsynced,
//! renamed to `<id>` and the folder fsynced, so a stored blob is always
//! complete. A crash mid-write can leave a `.tmp-*` file behind;
//! [`RefBlobs::sweep_temp`] removes those.

use std::io::{ErrorKind, Read, Seek, SeekFrom, Write};

use anyhow::{Context, anyhow, bail};
use cap_std::fs::{Dir, OpenOptions};
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::error::RefError;
use crate::state::Store;
use crate::state::data_dir::{PRIVATE_FILE_MODE, private_dirs, private_new_file};
use crate::state::db::{self, Dialect, params};

/// A stored ref.
///
/// ```
/// let r = skillhost::RefInfo { ref_id: "ref_0".into(), sha256: String::new(), size: 0, label: "a.txt".into(), created_at: 0 };
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RefInfo {
    /// The opaque id.
    pub ref_id: String,
    /// sha256 of the content.
    pub sha256: String,
    /// Size in bytes.
    pub size: u64,
    /// A label (the file's name, never its path).
    pub label: String,
    /// Unix seconds.
    pub created_at: i64,
}

/// Largest blob accepted by [`RefBlobs::put`]: 64 MiB.
pub(crate) const MAX_REF_BYTES: u64 = 64 << 20;

/// Largest read [`RefBlobs::read_at`] returns at once: 1 MiB.
pub(crate) const MAX_READ: u32 = 1 << 20;

/// Name of the blob folder inside the data dir.
pub(crate) const REFS_DIR: &str = "refs";

/// `refs.made_by` of a ref the operator's call of a script made (a
/// persona id never holds a space).
const OPERATOR_MAKER: &str = "(operator)";

/// Prefix of every ref id.
const ID_PREFIX: &str = "ref_";

/// Prefix of a blob being written (followed by its id).
const TEMP_PREFIX: &str = ".tmp-";

/// The lock file in the refs folder: adding a ref holds it shared (put and
/// record), cleaning up holds it exclusive, so one process's cleanup never
/// removes another's blob in the making.
const LOCK_FILE: &str = ".lock";

/// A lock on the refs folder (see [`RefBlobs::lock_shared`]); released on
/// drop.
pub(crate) struct RefsLock(std::fs::File);

impl Drop for RefsLock {
    fn drop(&mut self) {
        let _ = self.0.unlock();
    }
}

/// Size of the copy buffer used by [`RefBlobs::put`].
const COPY_BUF: usize = 64 << 10;

/// The opened `refs/` folder of a data dir.
#[derive(Debug)]
pub(crate) struct RefBlobs {
    /// The `refs/` folder; all blob file work goes through it.
    dir: Dir,
}

/// What [`RefBlobs::put`] stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StoredBlob {
    /// The new blob's id (`ref_` + 32 lowercase hex).
    pub id: String,
    /// Lowercase hex SHA-256 of the blob's bytes.
    pub sha256: String,
    /// The blob's size in bytes.
    pub size: u64,
}

impl RefBlobs {
    /// Opens (creating) `refs/` inside the data dir `data`.
    pub fn open(data: &Dir) -> anyhow::Result<RefBlobs> {
        data.create_dir_with(REFS_DIR, &private_dirs())
            .map_err(|e| {
                anyhow!(
                    "cannot create the `{REFS_DIR}` folder in the data dir: {e}; \
                 check that the data dir is writable"
                )
            })?;
        let dir = data.open_dir(REFS_DIR).map_err(|e| {
            anyhow!(
                "cannot open the `{REFS_DIR}` folder in the data dir: {e}; \
                 check that it is a folder and readable"
            )
        })?;
        Ok(RefBlobs { dir })
    }

    /// A new opaque id: `ref_` and 32 hex digits from 16 random bytes.
    fn try_new_id() -> anyhow::Result<String> {
        let mut bytes = [0u8; 16];
        getrandom::fill(&mut bytes).map_err(|e| {
            anyhow!(
                "no randomness available to make a ref id: {e}; \
                 the operating system's random source must be reachable"
            )
        })?;
        Ok(format!("{ID_PREFIX}{}", hex::encode(bytes)))
    }

    /// Whether `id` is a well-formed ref id: exactly `^ref_[0-9a-f]{32}$`.
    pub fn valid_id(id: &str) -> bool {
        match id.strip_prefix(ID_PREFIX) {
            Some(hex) => {
                hex.len() == 32 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
            }
            None => false,
        }
    }

    /// Errors unless `id` is a well-formed ref id.
    fn check_id(id: &str) -> anyhow::Result<()> {
        if Self::valid_id(id) {
            Ok(())
        } else {
            bail!(
                "invalid ref id {id:?}: a ref id is `ref_` followed by 32 lowercase \
                 hex digits; pass an id returned when the file was stored"
            )
        }
    }

    /// Copies everything from `reader` into a new blob and returns its id,
    /// hex SHA-256 and size. Refuses more than [`MAX_REF_BYTES`]. Never
    /// leaves a temp file behind on error.
    pub fn put(&self, reader: &mut dyn Read) -> Result<StoredBlob, RefError> {
        let id = Self::try_new_id()?;
        Self::check_id(&id)?;
        let temp = format!("{TEMP_PREFIX}{id}");
        let mut file = self
            .dir
            .open_with(&temp, &private_new_file())
            .map_err(|e| anyhow!("cannot create a new ref blob: {e}; check that the data dir's `{REFS_DIR}` folder is writable"))?;
        let written = (|| -> Result<(String, u64), RefError> {
            let mut hasher = Sha256::new();
            let mut size = 0u64;
            let mut buf = vec![0u8; COPY_BUF];
            loop {
                let n = match reader.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => n,
                    Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                    Err(e) => {
                        return Err(RefError::Invalid(format!(
                            "cannot read the input for a ref blob: {e}"
                        )));
                    }
                };
                size = size.saturating_add(n as u64);
                if size > MAX_REF_BYTES {
                    return Err(RefError::Invalid(format!(
                        "the input is larger than the limit of {MAX_REF_BYTES} bytes \
                         ({} MiB) for a ref; pass a smaller file",
                        MAX_REF_BYTES >> 20
                    )));
                }
                let chunk = buf
                    .get(..n)
                    .context("reader reported more bytes than its buffer")?;
                hasher.update(chunk);
                file.write_all(chunk).map_err(|e| {
                    anyhow!("cannot write a ref blob: {e}; check free space in the data dir")
                })?;
            }
            file.sync_all().map_err(|e| {
                anyhow!("cannot flush a ref blob to disk: {e}; check free space in the data dir")
            })?;
            Ok((hex::encode(hasher.finalize()), size))
        })();
        drop(file);
        let (sha256, size) = match written {
            Ok(v) => v,
            Err(e) => {
                let _ = self.dir.remove_file(&temp);
                return Err(e);
            }
        };
        if let Err(e) = self.dir.rename(&temp, &self.dir, &id) {
            let _ = self.dir.remove_file(&temp);
            return Err(anyhow!(
                "cannot move a new ref blob into place: {e}; check that the data dir's `{REFS_DIR}` folder is writable"
            )
            .into());
        }
        self.sync_dir()?;
        Ok(StoredBlob { id, sha256, size })
    }

    /// Fsyncs the `refs/` folder so renames and removals are durable (on
    /// Unix; elsewhere a folder cannot be fsynced and the blob itself is).
    fn sync_dir(&self) -> anyhow::Result<()> {
        #[cfg(unix)]
        // `Dir` may hold an `O_PATH` descriptor, which cannot be fsynced;
        // open the folder itself for reading instead.
        self.dir
            .open(".")
            .and_then(|d| d.sync_all())
            .map_err(|e| anyhow!("cannot flush the data dir's `{REFS_DIR}` folder to disk: {e}"))?;
        Ok(())
    }

    /// Reads up to `len` bytes (capped at [`MAX_READ`]) at `offset` of blob
    /// `id`; an empty vec at or past the end. An unknown or invalid id is an
    /// error naming it.
    pub fn read_at(&self, id: &str, offset: u64, len: u32) -> anyhow::Result<Vec<u8>> {
        Self::check_id(id)?;
        let mut file = match self.dir.open(id) {
            Ok(f) => f,
            Err(e) if e.kind() == ErrorKind::NotFound => bail!(
                "unknown ref id {id:?}: no such file is stored; \
                 it may have expired, store the file again"
            ),
            Err(e) => bail!("cannot open ref {id:?}: {e}"),
        };
        let total = file
            .metadata()
            .map_err(|e| anyhow!("cannot read the size of ref {id:?}: {e}"))?
            .len();
        if offset >= total {
            return Ok(Vec::new());
        }
        let want = u64::from(len.min(MAX_READ)).min(total - offset);
        file.seek(SeekFrom::Start(offset))
            .map_err(|e| anyhow!("cannot seek to offset {offset} in ref {id:?}: {e}"))?;
        let mut out = Vec::with_capacity(usize::try_from(want).unwrap_or(0));
        file.take(want)
            .read_to_end(&mut out)
            .map_err(|e| anyhow!("cannot read ref {id:?}: {e}"))?;
        Ok(out)
    }

    /// The whole of blob `id` (at most [`MAX_REF_BYTES`]).
    pub fn read_all(&self, id: &str) -> anyhow::Result<Vec<u8>> {
        Self::check_id(id)?;
        let file = self
            .dir
            .open(id)
            .map_err(|e| anyhow!("cannot open ref {id:?}: {e}"))?;
        let mut out = Vec::new();
        file.take(MAX_REF_BYTES + 1)
            .read_to_end(&mut out)
            .map_err(|e| anyhow!("cannot read ref {id:?}: {e}"))?;
        anyhow::ensure!(
            out.len() as u64 <= MAX_REF_BYTES,
            "ref {id:?} is larger than the limit of {MAX_REF_BYTES} bytes"
        );
        Ok(out)
    }

    /// Whether blob `id` is stored here.
    pub fn has(&self, id: &str) -> bool {
        Self::valid_id(id) && self.dir.is_file(id)
    }

    /// Stores `bytes` as blob `id` (a ref another replica stored, fetched
    /// from the shared database): written to a temp file, fsynced and
    /// renamed into place, as [`RefBlobs::put`] does.
    pub fn restore(&self, id: &str, bytes: &[u8]) -> anyhow::Result<()> {
        Self::check_id(id)?;
        let temp = format!("{TEMP_PREFIX}{id}");
        let _ = self.dir.remove_file(&temp);
        let written = (|| -> anyhow::Result<()> {
            let mut file = self.dir.open_with(&temp, &private_new_file())?;
            file.write_all(bytes)?;
            file.sync_all()?;
            self.dir.rename(&temp, &self.dir, id)?;
            Ok(())
        })();
        if let Err(e) = written {
            let _ = self.dir.remove_file(&temp);
            bail!("cannot store ref {id:?} here: {e}");
        }
        self.sync_dir()
    }

    /// Removes blob `id`; a missing blob is not an error.
    pub fn remove(&self, id: &str) -> anyhow::Result<()> {
        Self::check_id(id)?;
        match self.dir.remove_file(id) {
            Ok(()) => self.sync_dir(),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
            Err(e) => Err(anyhow!(
                "cannot remove ref {id:?}: {e}; check that the data dir's `{REFS_DIR}` folder is writable"
            )),
        }
    }

    fn lock_file(&self) -> anyhow::Result<std::fs::File> {
        use cap_std::fs::OpenOptionsExt as _;
        let mut opts = OpenOptions::new();
        opts.create(true)
            .write(true)
            .truncate(false)
            .mode(PRIVATE_FILE_MODE);
        Ok(self
            .dir
            .open_with(LOCK_FILE, &opts)
            .map_err(|e| {
                anyhow!(
                    "cannot open the refs lock in the data dir's `{REFS_DIR}` folder: {e}; \
                     check that it is writable"
                )
            })?
            .into_std())
    }

    /// Takes the refs lock shared, for adding one ref (blob and record):
    /// many adds run at once, a cleanup waits for none of them.
    pub fn lock_shared(&self) -> anyhow::Result<RefsLock> {
        let file = self.lock_file()?;
        file.lock_shared()
            .map_err(|e| anyhow!("cannot take the refs lock: {e}"))?;
        Ok(RefsLock(file))
    }

    /// Takes the refs lock exclusive if no add is running anywhere (in
    /// this or another process); `None` if one is.
    pub fn try_lock_exclusive(&self) -> anyhow::Result<Option<RefsLock>> {
        let file = self.lock_file()?;
        match file.try_lock() {
            Ok(()) => Ok(Some(RefsLock(file))),
            Err(std::fs::TryLockError::WouldBlock) => Ok(None),
            Err(std::fs::TryLockError::Error(e)) => Err(anyhow!("cannot take the refs lock: {e}")),
        }
    }

    /// Deletes leftover `.tmp-*` files (from a crash mid-put); returns how
    /// many. Hold [`RefBlobs::try_lock_exclusive`] while calling it, so no
    /// put is running.
    pub fn sweep_temp(&self) -> anyhow::Result<usize> {
        let mut removed = 0;
        for name in self.names()? {
            if !name.starts_with(TEMP_PREFIX) {
                continue;
            }
            match self.dir.remove_file(&name) {
                Ok(()) => removed += 1,
                Err(e) if e.kind() == ErrorKind::NotFound => {}
                Err(e) => bail!(
                    "cannot remove the leftover temp file {name:?} in the data dir's \
                     `{REFS_DIR}` folder: {e}; remove it by hand"
                ),
            }
        }
        if removed > 0 {
            self.sync_dir()?;
        }
        Ok(removed)
    }

    /// Ids of every stored blob, sorted (for garbage collection against the
    /// database). Names that are not ref ids are skipped.
    pub fn ids(&self) -> anyhow::Result<Vec<String>> {
        let mut ids: Vec<String> = self
            .names()?
            .into_iter()
            .filter(|n| Self::valid_id(n))
            .collect();
        ids.sort();
        Ok(ids)
    }

    /// UTF-8 names of the regular files in `refs/` (others are skipped).
    fn names(&self) -> anyhow::Result<Vec<String>> {
        let entries = self
            .dir
            .entries()
            .map_err(|e| anyhow!("cannot list the data dir's `{REFS_DIR}` folder: {e}"))?;
        let mut names = Vec::new();
        for entry in entries {
            let entry = entry
                .map_err(|e| anyhow!("cannot list the data dir's `{REFS_DIR}` folder: {e}"))?;
            let is_file = entry.file_type().map(|t| t.is_file()).unwrap_or(false);
            if !is_file {
                continue;
            }
            if let Ok(name) = entry.file_name().into_string() {
                names.push(name);
            }
        }
        Ok(names)
    }
}

impl Store {
    /// Records a stored ref.
    pub(crate) fn add_ref_record(&self, r: &RefInfo) -> db::Result<()> {
        self.db().execute(
            "INSERT INTO refs (ref_id, sha256, size, label, created_at) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![r.ref_id, r.sha256, r.size as i64, r.label, r.created_at],
        )?;
        Ok(())
    }

    /// One ref's record.
    pub(crate) fn ref_record(&self, id: &str) -> db::Result<Option<RefInfo>> {
        self.db().query_opt(
            "SELECT ref_id, sha256, size, label, created_at FROM refs WHERE ref_id = ?1",
            params![id],
            ref_from_row,
        )
    }

    /// Every ref, newest first.
    pub(crate) fn ref_records(&self) -> db::Result<Vec<RefInfo>> {
        // Newest first; within one second, the last recorded first (SQLite
        // keeps the order of insertion in `rowid`; PostgreSQL has none, and
        // orders those by id).
        let sql = match self.db().dialect() {
            Dialect::Sqlite => {
                "SELECT ref_id, sha256, size, label, created_at FROM refs
                 ORDER BY created_at DESC, rowid DESC"
            }
            Dialect::Postgres => {
                "SELECT ref_id, sha256, size, label, created_at FROM refs
                 ORDER BY created_at DESC, ref_id DESC"
            }
        };
        self.db().query_map(sql, params![], ref_from_row)
    }

    /// Records who made ref `id`: the run `run` of `persona` (none: the
    /// operator) whose script wrote it.
    pub(crate) fn set_ref_maker(
        &self,
        id: &str,
        persona: Option<&str>,
        run: &str,
    ) -> db::Result<()> {
        self.db().execute(
            "UPDATE refs SET made_by = ?2, made_by_run = ?3 WHERE ref_id = ?1",
            params![id, persona.unwrap_or(OPERATOR_MAKER), run],
        )?;
        Ok(())
    }

    /// Who made ref `id` through a script: `Some(Some(persona))`,
    /// `Some(None)` for the operator, `None` when no script made it (or
    /// there is no such ref).
    pub(crate) fn ref_maker(&self, id: &str) -> db::Result<Option<Option<String>>> {
        let made: Option<Option<String>> = self.db().query_opt(
            "SELECT made_by FROM refs WHERE ref_id = ?1",
            params![id],
            |r| r.get(0),
        )?;
        Ok(made.flatten().map(|m| (m != OPERATOR_MAKER).then_some(m)))
    }

    /// Forgets a ref; false if it was not there.
    pub(crate) fn remove_ref_record(&self, id: &str) -> db::Result<bool> {
        Ok(self
            .db()
            .execute("DELETE FROM refs WHERE ref_id = ?1", params![id])?
            == 1)
    }
}

fn ref_from_row(r: &db::Row<'_>) -> db::Result<RefInfo> {
    Ok(RefInfo {
        ref_id: r.get(0)?,
        sha256: r.get(1)?,
        size: r.get::<i64>(2)? as u64,
        label: r.get(3)?,
        created_at: r.get(4)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    /// A temp data dir plus the store opened in it.
    fn store() -> (tempfile::TempDir, Dir, RefBlobs) {
        let tmp = tempfile::tempdir().expect("temp dir");
        let data = Dir::open_ambient_dir(tmp.path(), cap_std::ambient_authority()).expect("open");
        let blobs = RefBlobs::open(&data).expect("open refs");
        (tmp, data, blobs)
    }

    /// Names of all entries in `refs/`.
    fn listing(tmp: &tempfile::TempDir) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(tmp.path().join(REFS_DIR))
            .expect("read_dir")
            .map(|e| e.expect("entry").file_name().into_string().expect("utf8"))
            .collect();
        v.sort();
        v
    }

    #[test]
    fn new_ids_are_valid_and_distinct() {
        let a = RefBlobs::try_new_id().unwrap();
        let b = RefBlobs::try_new_id().unwrap();
        assert!(RefBlobs::valid_id(&a), "{a}");
        assert!(RefBlobs::valid_id(&b), "{b}");
        assert_ne!(a, b);
        assert_eq!(a.len(), 36);
    }

    #[test]
    fn valid_id_is_exact() {
        assert!(RefBlobs::valid_id(&format!(
            "ref_{}",
            "0123456789abcdef".repeat(2)
        )));
        for bad in [
            "",
            "ref_",
            "../x",
            "ref_../../etc/passwd",
            "ref_0123456789abcdef",
            &format!("ref_{}", "ABCDEF0123456789".repeat(2)),
            &format!("ref_{}0", "0123456789abcdef".repeat(2)),
            &format!("REF_{}", "0123456789abcdef".repeat(2)),
            &format!(".tmp-ref_{}", "0123456789abcdef".repeat(2)),
            &format!("ref_{}/", &"0123456789abcdef".repeat(2)[..31]),
            &format!("ref_{}g", &"0123456789abcdef".repeat(2)[..31]),
        ] {
            assert!(!RefBlobs::valid_id(bad), "{bad:?} accepted");
        }
    }

    #[test]
    fn put_read_round_trip() {
        let (tmp, _data, blobs) = store();
        let content: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        let stored = blobs.put(&mut content.as_slice()).expect("put");
        assert!(RefBlobs::valid_id(&stored.id));
        assert_eq!(stored.size, content.len() as u64);
        assert_eq!(stored.sha256, hex::encode(Sha256::digest(&content)));
        assert_eq!(listing(&tmp), vec![stored.id.clone()]);

        let all = blobs.read_at(&stored.id, 0, u32::MAX).expect("read all");
        assert_eq!(all, content);
        let mid = blobs.read_at(&stored.id, 1000, 10).expect("read mid");
        assert_eq!(mid, &content[1000..1010]);
        let tail = blobs.read_at(&stored.id, 199_995, 100).expect("read tail");
        assert_eq!(tail, &content[199_995..]);
        assert!(
            blobs
                .read_at(&stored.id, 200_000, 10)
                .expect("at end")
                .is_empty()
        );
        assert!(
            blobs
                .read_at(&stored.id, 200_001, 10)
                .expect("past end")
                .is_empty()
        );
        assert!(
            blobs
                .read_at(&stored.id, u64::MAX, 10)
                .expect("far past")
                .is_empty()
        );
        assert!(
            blobs
                .read_at(&stored.id, 5, 0)
                .expect("zero len")
                .is_empty()
        );
    }

    #[test]
    fn read_is_capped_at_max_read() {
        let (_tmp, _data, blobs) = store();
        let size = u64::from(MAX_READ) + 100;
        let stored = blobs.put(&mut std::io::repeat(3).take(size)).expect("put");
        let got = blobs.read_at(&stored.id, 0, u32::MAX).expect("read");
        assert_eq!(got.len(), MAX_READ as usize);
        let rest = blobs
            .read_at(&stored.id, u64::from(MAX_READ), u32::MAX)
            .expect("read rest");
        assert_eq!(rest.len(), 100);
    }

    #[test]
    fn empty_blob() {
        let (_tmp, _data, blobs) = store();
        let stored = blobs.put(&mut std::io::empty()).expect("put");
        assert_eq!(stored.size, 0);
        assert_eq!(stored.sha256, hex::encode(Sha256::digest(b"")));
        assert!(blobs.read_at(&stored.id, 0, 10).expect("read").is_empty());
    }

    #[test]
    fn too_large_is_refused_without_leftovers() {
        let (tmp, _data, blobs) = store();
        let mut reader = std::io::repeat(7).take(MAX_REF_BYTES + 1);
        let err = blobs.put(&mut reader).expect_err("must refuse");
        let msg = format!("{err:#}");
        assert!(msg.contains("larger than the limit"), "{msg}");
        assert!(listing(&tmp).is_empty(), "{:?}", listing(&tmp));
        assert!(blobs.ids().expect("ids").is_empty());
    }

    #[test]
    fn exactly_max_is_accepted() {
        let (_tmp, _data, blobs) = store();
        let stored = blobs
            .put(&mut std::io::repeat(7).take(MAX_REF_BYTES))
            .expect("put");
        assert_eq!(stored.size, MAX_REF_BYTES);
    }

    #[test]
    fn failing_reader_leaves_nothing() {
        struct Failing(usize);
        impl Read for Failing {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                if self.0 == 0 {
                    return Err(std::io::Error::other("boom"));
                }
                self.0 -= 1;
                let n = buf.len().min(10);
                buf[..n].fill(1);
                Ok(n)
            }
        }
        let (tmp, _data, blobs) = store();
        let err = blobs.put(&mut Failing(3)).expect_err("must fail");
        assert!(format!("{err:#}").contains("boom"));
        assert!(listing(&tmp).is_empty());
    }

    #[test]
    fn invalid_ids_are_refused() {
        let (tmp, _data, blobs) = store();
        std::fs::write(tmp.path().join("secret"), b"x").expect("write");
        let upper = format!("ref_{}", "ABCDEF0123456789".repeat(2));
        for bad in ["../x", "../secret", upper.as_str(), "ref_abc", ""] {
            let e = blobs.read_at(bad, 0, 10).expect_err("read must refuse");
            let msg = format!("{e:#}");
            assert!(msg.contains("invalid ref id"), "{msg}");
            assert!(msg.contains(&format!("{bad:?}")), "{msg}");
            assert!(blobs.remove(bad).is_err(), "remove accepted {bad:?}");
        }
        assert!(tmp.path().join("secret").exists());
    }

    #[test]
    fn unknown_id_is_an_error_naming_it() {
        let (_tmp, _data, blobs) = store();
        let id = RefBlobs::try_new_id().expect("id");
        let msg = format!("{:#}", blobs.read_at(&id, 0, 1).expect_err("unknown"));
        assert!(msg.contains(&id) && msg.contains("unknown ref id"), "{msg}");
    }

    #[test]
    fn remove_is_idempotent() {
        let (_tmp, _data, blobs) = store();
        let stored = blobs.put(&mut &b"hello"[..]).expect("put");
        blobs.remove(&stored.id).expect("remove");
        blobs.remove(&stored.id).expect("remove again");
        assert!(blobs.read_at(&stored.id, 0, 1).is_err());
        assert!(blobs.ids().expect("ids").is_empty());
    }

    #[test]
    fn sweep_temp_removes_only_temp_files() {
        let (tmp, _data, blobs) = store();
        let stored = blobs.put(&mut &b"keep"[..]).expect("put");
        let refs = tmp.path().join(REFS_DIR);
        std::fs::write(
            refs.join(format!(".tmp-{}", RefBlobs::try_new_id().expect("id"))),
            b"a",
        )
        .expect("w");
        std::fs::write(refs.join(".tmp-whatever"), b"b").expect("w");
        std::fs::write(refs.join("other"), b"c").expect("w");
        assert_eq!(blobs.sweep_temp().expect("sweep"), 2);
        assert_eq!(blobs.sweep_temp().expect("sweep again"), 0);
        let mut want = vec![stored.id.clone(), "other".to_string()];
        want.sort();
        assert_eq!(listing(&tmp), want);
    }

    #[test]
    fn ids_lists_blobs_sorted() {
        let (tmp, _data, blobs) = store();
        let mut want: Vec<String> = (0..5u8)
            .map(|i| blobs.put(&mut &[i][..]).expect("put").id)
            .collect();
        want.sort();
        let refs = tmp.path().join(REFS_DIR);
        std::fs::write(refs.join(".tmp-x"), b"a").expect("w");
        std::fs::write(refs.join("notes.txt"), b"a").expect("w");
        std::fs::create_dir(refs.join(RefBlobs::try_new_id().expect("id"))).expect("mkdir");
        assert_eq!(blobs.ids().expect("ids"), want);
    }

    #[test]
    fn reopen_sees_existing_blobs() {
        let (_tmp, data, blobs) = store();
        let stored = blobs.put(&mut &b"persist"[..]).expect("put");
        drop(blobs);
        let again = RefBlobs::open(&data).expect("reopen");
        assert_eq!(again.read_at(&stored.id, 0, 100).expect("read"), b"persist");
    }

    #[test]
    fn concurrent_puts_are_distinct() {
        let (tmp, _data, blobs) = store();
        let stored: Vec<StoredBlob> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..8u8)
                .map(|i| {
                    let blobs = &blobs;
                    s.spawn(move || {
                        let content = vec![i; 10_000 + usize::from(i)];
                        blobs.put(&mut content.as_slice()).expect("put")
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("join"))
                .collect()
        });
        let ids: HashSet<&str> = stored.iter().map(|b| b.id.as_str()).collect();
        assert_eq!(ids.len(), 8);
        for (i, b) in stored.iter().enumerate() {
            let want = vec![i as u8; 10_000 + i];
            assert_eq!(b.size, want.len() as u64);
            assert_eq!(blobs.read_at(&b.id, 0, u32::MAX).expect("read"), want);
        }
        assert_eq!(listing(&tmp).len(), 8);
        assert_eq!(blobs.ids().expect("ids").len(), 8);
    }
}
