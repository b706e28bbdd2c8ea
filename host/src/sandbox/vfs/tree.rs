//! Read-only trees: folders and files held in host memory, never changed
//! once built, shared between calls (`Arc`) and shown to a call's guest
//! through read-only mounts (the standard library, a skill's folder and
//! byte-code, a skill's assets).
//!
//! A tree is built from a folder on disk ([`read_folder`], through
//! `cap_std` so nothing outside the folder is read), from a zip archive
//! ([`read_archive`]: the runtime's standard library, a byte-code tree
//! kept beside an install), or file by file ([`TreeBuilder`]).

use std::collections::BTreeMap;
use std::io::{Read as _, Seek, Write as _};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;

use super::name::{self, NameError};
use crate::limits::{MAX_SKILL_TREE_BYTES, MAX_SKILL_TREE_DEPTH, MAX_SKILL_TREE_FILES};

/// A file's or folder's times, as WASI gives them: seconds and
/// nanoseconds since the Unix epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub(crate) struct Stamp {
    pub seconds: u64,
    pub nanoseconds: u32,
}

impl Stamp {
    /// Now, by the host's wall clock.
    pub fn now() -> Stamp {
        Stamp::from_system(SystemTime::now())
    }

    /// `t`, or the epoch for a time before it.
    pub fn from_system(t: SystemTime) -> Stamp {
        let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
        Stamp {
            seconds: d.as_secs(),
            nanoseconds: d.subsec_nanos(),
        }
    }

    /// The time every file of an archive gets: 2000-01-01, after zip's
    /// earliest (1980), so a script that zips one can.
    pub const ARCHIVE: Stamp = Stamp {
        seconds: 946_684_800,
        nanoseconds: 0,
    };
}

/// Inode numbers of read-only nodes: unique in the process, so two nodes
/// of any two trees never look like the same file. Scratch nodes number
/// from [`SCRATCH_INODES`] up.
static NEXT_INODE: AtomicU64 = AtomicU64::new(1);

/// Where the scratch folder's inode numbers start (see `scratch.rs`).
pub(crate) const SCRATCH_INODES: u64 = 1 << 62;

fn next_inode() -> u64 {
    NEXT_INODE.fetch_add(1, Ordering::Relaxed)
}

/// A read-only folder.
#[derive(Debug)]
pub(crate) struct RoDir {
    /// Its entries, by name.
    pub entries: BTreeMap<Box<str>, RoEntry>,
    /// Its inode number.
    pub ino: u64,
    /// When it was last modified.
    pub mtime: Stamp,
}

/// A read-only file.
#[derive(Debug)]
pub(crate) struct RoFile {
    /// Its bytes.
    pub data: Bytes,
    /// Its inode number.
    pub ino: u64,
    /// When it was last modified.
    pub mtime: Stamp,
}

/// An entry of a read-only folder.
#[derive(Debug, Clone)]
pub(crate) enum RoEntry {
    /// A folder.
    Dir(Arc<RoDir>),
    /// A file.
    File(Arc<RoFile>),
}

impl RoDir {
    /// An empty folder.
    pub fn empty() -> Arc<RoDir> {
        Arc::new(RoDir {
            entries: BTreeMap::new(),
            ino: next_inode(),
            mtime: Stamp::ARCHIVE,
        })
    }

    /// A folder holding `entries` (a mount made of other trees).
    pub fn of(entries: impl IntoIterator<Item = (&'static str, Arc<RoDir>)>) -> Arc<RoDir> {
        Arc::new(RoDir {
            entries: entries
                .into_iter()
                .map(|(n, d)| (Box::from(n), RoEntry::Dir(d)))
                .collect(),
            ino: next_inode(),
            mtime: Stamp::ARCHIVE,
        })
    }

    /// The entry at the relative, `/`-separated `path`, if there is one.
    pub fn lookup(&self, path: &str) -> Option<RoEntry> {
        let mut names = path.split('/').filter(|n| !n.is_empty());
        let first = names.next()?;
        let mut entry = self.entries.get(first)?.clone();
        for name in names {
            entry = match entry {
                RoEntry::Dir(d) => d.entries.get(name)?.clone(),
                RoEntry::File(_) => return None,
            };
        }
        Some(entry)
    }

    /// Every file under this folder, with its relative `/`-separated path,
    /// in name order.
    pub fn files(&self) -> Vec<(String, Arc<RoFile>)> {
        fn walk(dir: &RoDir, prefix: &str, out: &mut Vec<(String, Arc<RoFile>)>) {
            for (name, entry) in &dir.entries {
                let path = if prefix.is_empty() {
                    name.to_string()
                } else {
                    format!("{prefix}/{name}")
                };
                match entry {
                    RoEntry::Dir(d) => walk(d, &path, out),
                    RoEntry::File(f) => out.push((path, f.clone())),
                }
            }
        }
        let mut out = Vec::new();
        walk(self, "", &mut out);
        out
    }

    /// How many files and folders are under this folder, and their bytes.
    #[cfg(test)]
    pub fn size(&self) -> (usize, u64) {
        let mut count = 0usize;
        let mut bytes = 0u64;
        for entry in self.entries.values() {
            count += 1;
            match entry {
                RoEntry::Dir(d) => {
                    let (c, b) = d.size();
                    count += c;
                    bytes += b;
                }
                RoEntry::File(f) => bytes += f.data.len() as u64,
            }
        }
        (count, bytes)
    }
}

/// Why a tree could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum TreeError {
    /// A symbolic link leads out of the folder (or to an absolute path).
    #[error("{path} is a symbolic link that leads out of the folder")]
    SymlinkOut {
        /// The link, relative to the folder.
        path: String,
    },
    /// Over [`MAX_SKILL_TREE_BYTES`].
    #[error("the folder holds more than {cap} bytes of files")]
    TooLarge {
        /// The cap.
        cap: u64,
    },
    /// Over [`MAX_SKILL_TREE_FILES`].
    #[error("the folder holds more than {cap} files and folders")]
    TooMany {
        /// The cap.
        cap: usize,
    },
    /// Deeper than [`MAX_SKILL_TREE_DEPTH`].
    #[error("{path} is nested more than {cap} folders deep (a symbolic link loop?)")]
    TooDeep {
        /// The folder, relative.
        path: String,
        /// The cap.
        cap: usize,
    },
    /// A name that is not UTF-8.
    #[error("{path} has a name that is not UTF-8")]
    NotUtf8 {
        /// The path as far as it reads.
        path: String,
    },
    /// A path an archive holds that a tree cannot (absolute, `..`, a
    /// control character, a file where a folder is).
    #[error("`{path}`: {why}")]
    BadPath {
        /// The path.
        path: String,
        /// Why.
        why: String,
    },
    /// The folder or archive could not be read.
    #[error("{path}: {message}")]
    Io {
        /// What could not be read.
        path: String,
        /// Why.
        message: String,
    },
}

/// What reading a folder does with a symbolic link that leads out of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OnEscape {
    /// The folder is refused, naming the link (a skill's folder: its
    /// scripts must not read what the operator did not approve).
    Refuse,
    /// The link is left out, as if absent (a skill's assets, which always
    /// read that way).
    Skip,
}

/// Names a folder's tree leaves out wherever they are: version-control
/// data and byte-code a native Python wrote (the runtime reads its own).
const SKIPPED_NAMES: &[&str] = &[".git", "__pycache__"];

/// Reads the folder `dir` into a tree, following symbolic links that stay
/// inside it (each read as what it points to) and doing with the others as
/// `escape` says; a dangling link is left out. Other kinds of files
/// (devices, sockets, pipes) are left out. At most
/// [`MAX_SKILL_TREE_FILES`] files and folders, [`MAX_SKILL_TREE_BYTES`]
/// bytes, [`MAX_SKILL_TREE_DEPTH`] deep.
pub(crate) fn read_folder(dir: &Path, escape: OnEscape) -> Result<Arc<RoDir>, TreeError> {
    let io = |path: &Path, e: std::io::Error| TreeError::Io {
        path: path.display().to_string(),
        message: e.to_string(),
    };
    let root = cap_std::fs::Dir::open_ambient_dir(dir, cap_std::ambient_authority())
        .map_err(|e| io(dir, e))?;
    let mut count = Counts::default();
    let mut builder = TreeBuilder::new();
    walk_folder(&root, Path::new(""), 0, escape, &mut count, &mut builder)?;
    Ok(builder.finish())
}

#[derive(Default)]
struct Counts {
    files: usize,
    bytes: u64,
}

impl Counts {
    fn one(&mut self) -> Result<(), TreeError> {
        self.files += 1;
        if self.files > MAX_SKILL_TREE_FILES {
            return Err(TreeError::TooMany {
                cap: MAX_SKILL_TREE_FILES,
            });
        }
        Ok(())
    }

    fn bytes(&mut self, n: u64) -> Result<(), TreeError> {
        self.bytes = self.bytes.saturating_add(n);
        if self.bytes > MAX_SKILL_TREE_BYTES {
            return Err(TreeError::TooLarge {
                cap: MAX_SKILL_TREE_BYTES,
            });
        }
        Ok(())
    }
}

fn rel_string(rel: &Path) -> String {
    rel.display().to_string()
}

fn walk_folder(
    root: &cap_std::fs::Dir,
    rel: &Path,
    depth: usize,
    escape: OnEscape,
    count: &mut Counts,
    builder: &mut TreeBuilder,
) -> Result<(), TreeError> {
    let io = |path: &Path, e: std::io::Error| TreeError::Io {
        path: rel_string(path),
        message: e.to_string(),
    };
    if depth > MAX_SKILL_TREE_DEPTH {
        return Err(TreeError::TooDeep {
            path: rel_string(rel),
            cap: MAX_SKILL_TREE_DEPTH,
        });
    }
    let dir = if rel.as_os_str().is_empty() {
        root.try_clone().map_err(|e| io(rel, e))?
    } else {
        root.open_dir(rel).map_err(|e| io(rel, e))?
    };
    let mut entries: Vec<(String, PathBuf)> = Vec::new();
    for entry in dir.entries().map_err(|e| io(rel, e))? {
        let entry = entry.map_err(|e| io(rel, e))?;
        let file_name = entry.file_name();
        let Some(name) = file_name.to_str() else {
            match escape {
                OnEscape::Refuse => {
                    return Err(TreeError::NotUtf8 {
                        path: rel_string(&rel.join(&file_name)),
                    });
                }
                OnEscape::Skip => continue,
            }
        };
        if SKIPPED_NAMES.contains(&name) {
            continue;
        }
        if let Err(e) = name::check_name(name) {
            match escape {
                OnEscape::Refuse => {
                    return Err(TreeError::BadPath {
                        path: rel_string(&rel.join(name)),
                        why: e.to_string(),
                    });
                }
                OnEscape::Skip => continue,
            }
        }
        entries.push((name.to_string(), rel.join(name)));
    }
    entries.sort();
    for (_, child) in entries {
        let lstat = root.symlink_metadata(&child).map_err(|e| io(&child, e))?;
        let meta = if lstat.file_type().is_symlink() {
            // Followed by cap_std, which refuses a link that leads out of
            // the folder (or to an absolute path) with an error.
            match root.metadata(&child) {
                Ok(m) => m,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(_) => match escape {
                    OnEscape::Refuse => {
                        return Err(TreeError::SymlinkOut {
                            path: rel_string(&child),
                        });
                    }
                    OnEscape::Skip => continue,
                },
            }
        } else {
            lstat
        };
        let mtime = meta
            .modified()
            .map(|t| Stamp::from_system(t.into_std()))
            .unwrap_or(Stamp::ARCHIVE);
        let path = child.to_string_lossy().replace('\\', "/");
        if meta.is_dir() {
            count.one()?;
            builder.dir(&path, mtime)?;
            walk_folder(root, &child, depth + 1, escape, count, builder)?;
        } else if meta.is_file() {
            count.one()?;
            count.bytes(meta.len())?;
            let data = root.read(&child).map_err(|e| io(&child, e))?;
            // The file may have grown since it was measured.
            count.bytes((data.len() as u64).saturating_sub(meta.len()))?;
            builder.file(&path, Bytes::from(data), mtime)?;
        }
        // Devices, sockets and pipes are left out.
    }
    Ok(())
}

/// Reads a zip archive (stored or deflated entries) into a tree: every
/// entry's path must be relative, without `..` or control characters.
pub(crate) fn read_archive(bytes: &[u8]) -> Result<Arc<RoDir>, TreeError> {
    let bad = |message: String| TreeError::Io {
        path: "(archive)".into(),
        message,
    };
    let mut zip = zip::ZipArchive::new(std::io::Cursor::new(bytes))
        .map_err(|e| bad(format!("not a zip archive: {e}")))?;
    let mut builder = TreeBuilder::new();
    for i in 0..zip.len() {
        let mut entry = zip
            .by_index(i)
            .map_err(|e| bad(format!("entry {i}: {e}")))?;
        let name = entry
            .name()
            .map_err(|e| bad(format!("entry {i}: {e}")))?
            .into_owned();
        if entry.is_dir() {
            builder.dir(name.trim_end_matches('/'), Stamp::ARCHIVE)?;
            continue;
        }
        let mut data = Vec::with_capacity(usize::try_from(entry.size()).unwrap_or(0).min(64 << 20));
        entry
            .read_to_end(&mut data)
            .map_err(|e| bad(format!("{name}: {e}")))?;
        builder.file(&name, Bytes::from(data), Stamp::ARCHIVE)?;
    }
    Ok(builder.finish())
}

/// Writes `dir` as a zip archive of stored entries, in name order, every
/// entry at [`Stamp::ARCHIVE`]: the same tree always gives the same bytes.
pub(crate) fn write_archive(dir: &RoDir) -> Vec<u8> {
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Stored)
        .last_modified_time(zip::DateTime::default())
        .unix_permissions(0o644);
    for (path, file) in dir.files() {
        // Writing into memory cannot fail but for a name zip cannot hold,
        // which a tree never has.
        if zip.start_file(path.as_str(), options).is_ok() {
            let _ = zip.write_all(&file.data);
        }
    }
    let mut cursor = match zip.finish() {
        Ok(c) => c,
        Err(_) => return Vec::new(),
    };
    let _ = cursor.rewind();
    cursor.into_inner()
}

/// Builds a tree file by file: each path relative and `/`-separated; the
/// folders on the way are made as needed.
pub(crate) struct TreeBuilder {
    root: BuildDir,
}

#[derive(Default)]
struct BuildDir {
    entries: BTreeMap<Box<str>, BuildNode>,
    mtime: Option<Stamp>,
}

enum BuildNode {
    Dir(BuildDir),
    File(Bytes, Stamp),
}

impl TreeBuilder {
    /// An empty tree.
    pub fn new() -> TreeBuilder {
        TreeBuilder {
            root: BuildDir::default(),
        }
    }

    fn names(path: &str) -> Result<Vec<&str>, TreeError> {
        let names: Vec<&str> = path.split('/').collect();
        for n in &names {
            name::check_name(n).map_err(|e: NameError| TreeError::BadPath {
                path: path.into(),
                why: e.to_string(),
            })?;
        }
        Ok(names)
    }

    fn folder<'a>(&'a mut self, path: &str, names: &[&str]) -> Result<&'a mut BuildDir, TreeError> {
        let mut dir = &mut self.root;
        for n in names {
            let node = dir
                .entries
                .entry(Box::from(*n))
                .or_insert_with(|| BuildNode::Dir(BuildDir::default()));
            dir = match node {
                BuildNode::Dir(d) => d,
                BuildNode::File(..) => {
                    return Err(TreeError::BadPath {
                        path: path.into(),
                        why: format!("`{n}` is a file and a folder"),
                    });
                }
            };
        }
        Ok(dir)
    }

    /// Adds the folder at `path`.
    pub fn dir(&mut self, path: &str, mtime: Stamp) -> Result<(), TreeError> {
        let names = Self::names(path)?;
        let dir = self.folder(path, &names)?;
        dir.mtime = Some(mtime);
        Ok(())
    }

    /// Adds the file at `path` (a second file at the same path replaces
    /// the first).
    pub fn file(&mut self, path: &str, data: Bytes, mtime: Stamp) -> Result<(), TreeError> {
        let names = Self::names(path)?;
        let (last, parents) = names.split_last().ok_or_else(|| TreeError::BadPath {
            path: path.into(),
            why: "empty".into(),
        })?;
        let dir = self.folder(path, parents)?;
        if let Some(BuildNode::Dir(_)) = dir.entries.get(*last) {
            return Err(TreeError::BadPath {
                path: path.into(),
                why: format!("`{last}` is a file and a folder"),
            });
        }
        dir.entries
            .insert(Box::from(*last), BuildNode::File(data, mtime));
        Ok(())
    }

    /// The tree.
    pub fn finish(self) -> Arc<RoDir> {
        fn freeze(dir: BuildDir) -> Arc<RoDir> {
            let entries = dir
                .entries
                .into_iter()
                .map(|(name, node)| {
                    let entry = match node {
                        BuildNode::Dir(d) => RoEntry::Dir(freeze(d)),
                        BuildNode::File(data, mtime) => RoEntry::File(Arc::new(RoFile {
                            data,
                            ino: next_inode(),
                            mtime,
                        })),
                    };
                    (name, entry)
                })
                .collect();
            Arc::new(RoDir {
                entries,
                ino: next_inode(),
                mtime: dir.mtime.unwrap_or(Stamp::ARCHIVE),
            })
        }
        freeze(self.root)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(files: &[(&str, &str)]) -> Arc<RoDir> {
        let mut b = TreeBuilder::new();
        for (p, d) in files {
            b.file(p, Bytes::from(d.to_string()), Stamp::ARCHIVE)
                .unwrap();
        }
        b.finish()
    }

    #[test]
    fn a_built_tree_finds_its_files_and_counts_them() {
        let t = tree(&[("a/b.txt", "b"), ("a/c/d.txt", "dd"), ("e", "")]);
        assert!(matches!(t.lookup("a/b.txt"), Some(RoEntry::File(f)) if &f.data[..] == b"b"));
        assert!(matches!(t.lookup("a/c"), Some(RoEntry::Dir(_))));
        assert!(t.lookup("a/b.txt/x").is_none());
        assert!(t.lookup("zz").is_none());
        assert_eq!(t.size(), (5, 3));
        let names: Vec<String> = t.files().into_iter().map(|(p, _)| p).collect();
        assert_eq!(names, ["a/b.txt", "a/c/d.txt", "e"]);
    }

    #[test]
    fn inode_numbers_are_unique_and_stable() {
        let t = tree(&[("a", "1"), ("b", "2")]);
        let ino = |p: &str| match t.lookup(p).unwrap() {
            RoEntry::File(f) => f.ino,
            RoEntry::Dir(d) => d.ino,
        };
        assert_ne!(ino("a"), ino("b"));
        assert_ne!(ino("a"), t.ino);
        assert_eq!(ino("a"), ino("a"));
        assert!(ino("a") < SCRATCH_INODES);
    }

    #[test]
    fn bad_paths_are_refused() {
        let mut b = TreeBuilder::new();
        for bad in ["/etc/passwd", "../x", "a/../b", "a//b", "a\nb", ""] {
            assert!(
                b.file(bad, Bytes::new(), Stamp::ARCHIVE).is_err(),
                "{bad:?}"
            );
        }
        b.file("a", Bytes::new(), Stamp::ARCHIVE).unwrap();
        assert!(b.file("a/b", Bytes::new(), Stamp::ARCHIVE).is_err());
    }

    #[test]
    fn an_archive_reads_back_to_the_same_tree() {
        let t = tree(&[("x/y.pyc", "code"), ("z", "zz")]);
        let bytes = write_archive(&t);
        assert_eq!(bytes, write_archive(&t), "the same tree, the same bytes");
        let back = read_archive(&bytes).unwrap();
        let files: Vec<(String, Vec<u8>)> = back
            .files()
            .into_iter()
            .map(|(p, f)| (p, f.data.to_vec()))
            .collect();
        assert_eq!(
            files,
            [
                ("x/y.pyc".into(), b"code".to_vec()),
                ("z".into(), b"zz".to_vec())
            ]
        );
        assert!(read_archive(b"not a zip").is_err());
    }

    #[test]
    fn a_folder_reads_with_its_inner_links_and_without_the_outer_ones() {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "s").unwrap();
        let d = root.path();
        std::fs::create_dir_all(d.join("scripts/lib")).unwrap();
        std::fs::write(d.join("scripts/x.py"), "print(1)").unwrap();
        std::fs::write(d.join("scripts/lib/m.py"), "m").unwrap();
        std::fs::create_dir_all(d.join("__pycache__")).unwrap();
        std::fs::write(d.join("__pycache__/x.pyc"), "native").unwrap();
        std::os::unix::fs::symlink("x.py", d.join("scripts/alias.py")).unwrap();
        std::os::unix::fs::symlink("lib", d.join("scripts/libs")).unwrap();
        std::os::unix::fs::symlink("nowhere", d.join("dangling")).unwrap();
        let t = read_folder(d, OnEscape::Refuse).unwrap();
        assert!(
            matches!(t.lookup("scripts/alias.py"), Some(RoEntry::File(f)) if &f.data[..] == b"print(1)")
        );
        assert!(matches!(
            t.lookup("scripts/libs/m.py"),
            Some(RoEntry::File(_))
        ));
        assert!(t.lookup("dangling").is_none());
        assert!(t.lookup("__pycache__").is_none());

        std::os::unix::fs::symlink(outside.path().join("secret"), d.join("scripts/out")).unwrap();
        assert_eq!(
            read_folder(d, OnEscape::Refuse).unwrap_err(),
            TreeError::SymlinkOut {
                path: "scripts/out".into()
            }
        );
        let skipped = read_folder(d, OnEscape::Skip).unwrap();
        assert!(skipped.lookup("scripts/out").is_none());
        assert!(skipped.lookup("scripts/x.py").is_some());
        std::fs::remove_file(d.join("scripts/out")).unwrap();

        // A link to a folder above it nests without end: refused by depth.
        std::os::unix::fs::symlink("..", d.join("scripts/up")).unwrap();
        assert!(matches!(
            read_folder(d, OnEscape::Refuse),
            Err(TreeError::TooDeep { .. } | TreeError::TooMany { .. })
        ));
    }

    #[test]
    fn a_folder_over_the_caps_is_refused() {
        let root = tempfile::tempdir().unwrap();
        let f = std::fs::File::create(root.path().join("big")).unwrap();
        f.set_len(MAX_SKILL_TREE_BYTES + 1).unwrap();
        assert_eq!(
            read_folder(root.path(), OnEscape::Skip).unwrap_err(),
            TreeError::TooLarge {
                cap: MAX_SKILL_TREE_BYTES
            }
        );
        std::fs::remove_file(root.path().join("big")).unwrap();
        for i in 0..=MAX_SKILL_TREE_FILES {
            std::fs::write(root.path().join(format!("f{i}")), "").unwrap();
        }
        assert_eq!(
            read_folder(root.path(), OnEscape::Skip).unwrap_err(),
            TreeError::TooMany {
                cap: MAX_SKILL_TREE_FILES
            }
        );
    }
}
