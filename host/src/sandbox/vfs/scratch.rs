//! The scratch folder: the one writable tree a call's guest sees, in host
//! memory, made empty for each call and dropped with it. Nothing in it
//! ever reaches the host's disk.
//!
//! Every create, write and resize is checked against the caps before it
//! happens: the total bytes of the files (a sparse write counts the size
//! it gives the file, so `seek(2**40); write(b"1")` is refused before
//! anything is allocated), the number of files and folders, each name's
//! length and characters, each path's length and depth
//! ([`name`](super::name)). Over a cap the guest gets `ENOSPC` (or
//! `ENAMETOOLONG`, `EINVAL` for a name) and the folder remembers the first
//! cap it ran into ([`ScratchLimit`]), so the call's error can name it.
//!
//! Nodes are kept by number. A file or folder open in a descriptor or a
//! stream is held by a [`Handle`]: removing it unlinks it, and it is
//! freed (its bytes given back) once the last handle is dropped, as on a
//! POSIX filesystem.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;

use super::Errno;
use super::name::{self, NameError};
use super::tree::{RoDir, SCRATCH_INODES, Stamp, TreeBuilder};
use crate::limits::{
    MAX_SCRATCH_BYTES, MAX_SCRATCH_BYTES_IN_FLIGHT, MAX_SCRATCH_DEPTH, MAX_SCRATCH_FILES,
    MAX_SCRATCH_NAME_BYTES, MAX_SCRATCH_PATH_BYTES,
};

/// A cap of the scratch folder a script ran into.
///
/// ```
/// let limit = skillhost::ScratchLimit::Files { cap: 4096 };
/// assert_eq!(limit.to_string(), "the scratch folder's cap of 4096 files and folders");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(tag = "limit", rename_all = "kebab-case")]
pub enum ScratchLimit {
    /// The total bytes of its files (`MAX_SCRATCH_BYTES`).
    Bytes {
        /// The cap, in bytes.
        cap: u64,
    },
    /// How many files and folders it holds (`MAX_SCRATCH_FILES`).
    Files {
        /// The cap.
        cap: u64,
    },
    /// A name's length (`MAX_SCRATCH_NAME_BYTES`).
    NameBytes {
        /// The cap, in bytes.
        cap: u64,
    },
    /// A name holding NUL, a newline, another control character or an
    /// invisible one.
    NameCharacters,
    /// A path's length from the folder's root (`MAX_SCRATCH_PATH_BYTES`).
    PathBytes {
        /// The cap, in bytes.
        cap: u64,
    },
    /// How deep folders nest (`MAX_SCRATCH_DEPTH`).
    Depth {
        /// The cap, in names.
        cap: u64,
    },
}

impl std::fmt::Display for ScratchLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ScratchLimit::Bytes { cap } => write!(f, "the scratch folder's cap of {cap} bytes"),
            ScratchLimit::Files { cap } => {
                write!(f, "the scratch folder's cap of {cap} files and folders")
            }
            ScratchLimit::NameBytes { cap } => {
                write!(f, "the scratch folder's cap of {cap} bytes per name")
            }
            ScratchLimit::NameCharacters => f.write_str(
                "the scratch folder's rule that a name holds no NUL, newline, other control \
                 character or invisible one",
            ),
            ScratchLimit::PathBytes { cap } => {
                write!(f, "the scratch folder's cap of {cap} bytes per path")
            }
            ScratchLimit::Depth { cap } => {
                write!(f, "the scratch folder's cap of {cap} nested folders")
            }
        }
    }
}

/// The caps of one scratch folder (names, paths and depth are always
/// `limits.rs`'s).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ScratchCaps {
    /// Total bytes of its files.
    pub bytes: u64,
    /// Files and folders.
    pub files: usize,
}

impl Default for ScratchCaps {
    fn default() -> Self {
        ScratchCaps {
            bytes: MAX_SCRATCH_BYTES,
            files: MAX_SCRATCH_FILES,
        }
    }
}

/// A budget of scratch bytes the calls in flight share.
#[derive(Debug)]
pub(crate) struct Budget {
    held: AtomicU64,
    cap: u64,
}

/// The process's budget: [`MAX_SCRATCH_BYTES_IN_FLIGHT`].
pub(crate) static IN_FLIGHT: Budget = Budget::new(MAX_SCRATCH_BYTES_IN_FLIGHT);

impl Budget {
    /// A budget of `cap` bytes.
    pub const fn new(cap: u64) -> Budget {
        Budget {
            held: AtomicU64::new(0),
            cap,
        }
    }

    /// Reserves `bytes` if the calls in flight leave that much of the
    /// budget; `None` otherwise (the call is busy).
    pub fn reserve(&'static self, bytes: u64) -> Option<Reservation> {
        self.held
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |held| {
                held.checked_add(bytes).filter(|&t| t <= self.cap)
            })
            .ok()
            .map(|_| Reservation {
                budget: self,
                bytes,
            })
    }
}

/// A call's share of a [`Budget`], given back when dropped (with its
/// scratch folder).
#[derive(Debug)]
pub(crate) struct Reservation {
    budget: &'static Budget,
    bytes: u64,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.budget.held.fetch_sub(self.bytes, Ordering::AcqRel);
    }
}

/// The number of the root folder.
pub(crate) const ROOT: u64 = 1;

/// What a node is.
#[derive(Debug)]
enum Kind {
    Dir(BTreeMap<Box<str>, u64>),
    File(Vec<u8>),
}

#[derive(Debug)]
struct Node {
    /// Its name in its folder (empty for the root).
    name: Box<str>,
    /// Its folder (the root's is itself).
    parent: u64,
    kind: Kind,
    /// Whether a folder lists it (false once removed).
    linked: bool,
    /// Descriptors and streams open on it.
    handles: u32,
    mtime: Stamp,
    atime: Stamp,
    ctime: Stamp,
}

/// What a node is, for `stat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NodeStat {
    pub is_dir: bool,
    pub size: u64,
    pub ino: u64,
    pub mtime: Stamp,
    pub atime: Stamp,
    pub ctime: Stamp,
}

struct Inner {
    nodes: HashMap<u64, Node>,
    next: u64,
    bytes: u64,
    caps: ScratchCaps,
    hit: Option<ScratchLimit>,
    _reservation: Option<Reservation>,
}

/// A scratch folder; clones share it.
#[derive(Clone)]
pub(crate) struct Scratch(Arc<Mutex<Inner>>);

impl std::fmt::Debug for Scratch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let inner = self.lock();
        f.debug_struct("Scratch")
            .field("nodes", &inner.nodes.len())
            .field("bytes", &inner.bytes)
            .finish()
    }
}

/// A file or folder held open (by a descriptor or a stream).
pub(crate) struct Handle {
    scratch: Scratch,
    id: u64,
}

impl Handle {
    /// The scratch folder.
    pub fn scratch(&self) -> &Scratch {
        &self.scratch
    }

    /// The node's number.
    pub fn id(&self) -> u64 {
        self.id
    }
}

impl Clone for Handle {
    fn clone(&self) -> Handle {
        self.scratch.handle(self.id)
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        let mut inner = self.scratch.lock();
        let free = match inner.nodes.get_mut(&self.id) {
            Some(node) => {
                node.handles = node.handles.saturating_sub(1);
                node.handles == 0 && !node.linked
            }
            None => false,
        };
        if free {
            inner.free(self.id);
        }
    }
}

/// How a path's last name ended: a plain name, or `.`/`..`/nothing.
enum Last<'p> {
    Name(&'p str),
    Node(u64),
}

impl Scratch {
    /// An empty scratch folder under `caps`, holding `reservation` (its
    /// share of the process's budget) until it is dropped.
    pub fn new(caps: ScratchCaps, reservation: Option<Reservation>) -> Scratch {
        let now = Stamp::now();
        let mut nodes = HashMap::new();
        nodes.insert(
            ROOT,
            Node {
                name: Box::from(""),
                parent: ROOT,
                kind: Kind::Dir(BTreeMap::new()),
                linked: true,
                handles: 0,
                mtime: now,
                atime: now,
                ctime: now,
            },
        );
        Scratch(Arc::new(Mutex::new(Inner {
            nodes,
            next: ROOT + 1,
            bytes: 0,
            caps,
            hit: None,
            _reservation: reservation,
        })))
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // Every change is made whole under the lock; a panic while it was
        // held leaves the tree as it was before that change.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Holds the node `id` open.
    pub fn handle(&self, id: u64) -> Handle {
        if let Some(node) = self.lock().nodes.get_mut(&id) {
            node.handles = node.handles.saturating_add(1);
        }
        Handle {
            scratch: self.clone(),
            id,
        }
    }

    /// Whether `other` is the same folder.
    pub fn same(&self, other: &Scratch) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// The first cap a guest (or the host, placing input files) ran into.
    pub fn limit_hit(&self) -> Option<ScratchLimit> {
        self.lock().hit
    }

    /// Bytes of files held, and files and folders (the root not counted).
    #[cfg(test)]
    pub fn usage(&self) -> (u64, usize) {
        let inner = self.lock();
        (inner.bytes, inner.nodes.len() - 1)
    }

    // --- what descriptors do -------------------------------------------------

    /// The node at `path` from the folder `base`.
    pub fn lookup(&self, base: u64, path: &str) -> Result<u64, Errno> {
        self.lock().lookup(base, path)
    }

    /// What `id` is.
    pub fn stat(&self, id: u64) -> Result<NodeStat, Errno> {
        self.lock().stat(id)
    }

    /// Opens (and with `create`, creates) the file or folder at `path` from
    /// `base`; `exclusive` refuses an existing one, `directory` asks for a
    /// folder, `truncate` empties a file. The node opened.
    pub fn open(&self, base: u64, path: &str, flags: OpenFlags) -> Result<u64, Errno> {
        let mut inner = self.lock();
        let (dir, last) = inner.parent_of(base, path)?;
        let existing = match last {
            Last::Node(id) => Some(id),
            Last::Name(name) => inner.dir(dir)?.get(name).copied(),
        };
        let id = match existing {
            Some(id) => {
                if flags.create && flags.exclusive {
                    return Err(Errno::Exist);
                }
                let is_dir = inner.is_dir(id)?;
                if flags.directory && !is_dir {
                    return Err(Errno::NotDirectory);
                }
                if is_dir && (flags.write || flags.truncate) {
                    return Err(Errno::IsDirectory);
                }
                if path.ends_with('/') && !is_dir {
                    return Err(Errno::NotDirectory);
                }
                if flags.truncate {
                    inner.resize(id, 0)?;
                }
                id
            }
            None => {
                let Last::Name(name) = last else {
                    return Err(Errno::NoEntry);
                };
                if !flags.create {
                    return Err(Errno::NoEntry);
                }
                if flags.directory || path.ends_with('/') {
                    return Err(Errno::Invalid);
                }
                inner.create(dir, name, Kind::File(Vec::new()))?
            }
        };
        Ok(id)
    }

    /// Creates the folder at `path` from `base`.
    pub fn create_dir(&self, base: u64, path: &str) -> Result<(), Errno> {
        let mut inner = self.lock();
        let (dir, last) = inner.parent_of(base, path)?;
        match last {
            Last::Node(_) => Err(Errno::Exist),
            Last::Name(name) => {
                if inner.dir(dir)?.contains_key(name) {
                    return Err(Errno::Exist);
                }
                inner.create(dir, name, Kind::Dir(BTreeMap::new()))?;
                Ok(())
            }
        }
    }

    /// Removes the file at `path` from `base`.
    pub fn unlink_file(&self, base: u64, path: &str) -> Result<(), Errno> {
        let mut inner = self.lock();
        let (dir, last) = inner.parent_of(base, path)?;
        let Last::Name(name) = last else {
            return Err(Errno::IsDirectory);
        };
        let id = *inner.dir(dir)?.get(name).ok_or(Errno::NoEntry)?;
        if inner.is_dir(id)? {
            return Err(Errno::IsDirectory);
        }
        if path.ends_with('/') {
            return Err(Errno::NotDirectory);
        }
        inner.unlink(dir, name, id);
        Ok(())
    }

    /// Removes the empty folder at `path` from `base`.
    pub fn remove_dir(&self, base: u64, path: &str) -> Result<(), Errno> {
        let mut inner = self.lock();
        let (dir, last) = inner.parent_of(base, path)?;
        let Last::Name(name) = last else {
            return Err(Errno::Invalid);
        };
        let id = *inner.dir(dir)?.get(name).ok_or(Errno::NoEntry)?;
        if !inner.dir(id).map(|d| d.is_empty())? {
            return Err(Errno::NotEmpty);
        }
        inner.unlink(dir, name, id);
        Ok(())
    }

    /// Moves `old` (from `old_base`) to `new` (from `new_base`), replacing
    /// a file there, or an empty folder by a folder.
    pub fn rename(&self, old_base: u64, old: &str, new_base: u64, new: &str) -> Result<(), Errno> {
        self.lock().rename(old_base, old, new_base, new)
    }

    /// The entries of the folder `id`, in name order, each with whether it
    /// is a folder.
    pub fn list(&self, id: u64) -> Result<Vec<(String, bool)>, Errno> {
        let inner = self.lock();
        let dir = inner.dir(id)?;
        Ok(dir
            .iter()
            .map(|(name, child)| {
                let is_dir = matches!(inner.nodes.get(child).map(|n| &n.kind), Some(Kind::Dir(_)));
                (name.to_string(), is_dir)
            })
            .collect())
    }

    /// Up to `len` bytes of the file `id` from `offset` (empty at or past
    /// its end).
    pub fn read(&self, id: u64, offset: u64, len: usize) -> Result<Bytes, Errno> {
        let mut inner = self.lock();
        let node = inner.nodes.get_mut(&id).ok_or(Errno::BadDescriptor)?;
        node.atime = Stamp::now();
        let Kind::File(data) = &node.kind else {
            return Err(Errno::IsDirectory);
        };
        let start = usize::try_from(offset)
            .unwrap_or(usize::MAX)
            .min(data.len());
        let end = start.saturating_add(len).min(data.len());
        Ok(Bytes::copy_from_slice(&data[start..end]))
    }

    /// Writes `bytes` into the file `id` at `offset` (`None`: at its end);
    /// the offset after them.
    pub fn write(&self, id: u64, offset: Option<u64>, bytes: &[u8]) -> Result<u64, Errno> {
        self.lock().write(id, offset, bytes)
    }

    /// Makes the file `id` `size` bytes long.
    pub fn set_size(&self, id: u64, size: u64) -> Result<(), Errno> {
        self.lock().resize(id, size)
    }

    /// Sets the times of `id` (`None` keeps one).
    pub fn set_times(
        &self,
        id: u64,
        atime: Option<Stamp>,
        mtime: Option<Stamp>,
    ) -> Result<(), Errno> {
        let mut inner = self.lock();
        let node = inner.nodes.get_mut(&id).ok_or(Errno::NoEntry)?;
        if let Some(a) = atime {
            node.atime = a;
        }
        if let Some(m) = mtime {
            node.mtime = m;
        }
        node.ctime = Stamp::now();
        Ok(())
    }

    // --- what the host does --------------------------------------------------

    /// Places a file at the relative, `/`-separated `path`, making the
    /// folders on the way: the host's own write (a call's input files), under
    /// the same rules and caps as the guest's.
    pub fn put_file(&self, path: &str, data: &[u8]) -> Result<(), PutError> {
        let names = name::check_path(path).map_err(PutError::Name)?;
        let mut inner = self.lock();
        let mut dir = ROOT;
        let (last, parents) = names
            .split_last()
            .ok_or(PutError::Name(NameError::NotAName))?;
        for n in parents {
            let existing = inner.dir(dir).map_err(PutError::Errno)?.get(*n).copied();
            dir = match existing {
                Some(id) if inner.is_dir(id).unwrap_or(false) => id,
                Some(_) => return Err(PutError::Errno(Errno::NotDirectory)),
                None => inner
                    .create(dir, n, Kind::Dir(BTreeMap::new()))
                    .map_err(|e| inner.put_error(e))?,
            };
        }
        if inner.dir(dir).map_err(PutError::Errno)?.contains_key(*last) {
            return Err(PutError::Errno(Errno::Exist));
        }
        let id = inner
            .create(dir, last, Kind::File(Vec::new()))
            .map_err(|e| inner.put_error(e))?;
        inner
            .write(id, Some(0), data)
            .map_err(|e| inner.put_error(e))?;
        Ok(())
    }

    /// Makes the folder at the relative path `path` (and those on the way).
    pub fn put_dir(&self, path: &str) -> Result<(), PutError> {
        let names = name::check_path(path).map_err(PutError::Name)?;
        let mut inner = self.lock();
        let mut dir = ROOT;
        for n in names {
            let existing = inner.dir(dir).map_err(PutError::Errno)?.get(n).copied();
            dir = match existing {
                Some(id) if inner.is_dir(id).unwrap_or(false) => id,
                Some(_) => return Err(PutError::Errno(Errno::NotDirectory)),
                None => inner
                    .create(dir, n, Kind::Dir(BTreeMap::new()))
                    .map_err(|e| inner.put_error(e))?,
            };
        }
        Ok(())
    }

    /// How many files are under the folder at the relative path `path`,
    /// and their bytes (none when there is no such folder), counted
    /// without copying them.
    pub fn count_under(&self, path: &str) -> (usize, u64) {
        let inner = self.lock();
        let Ok(id) = inner.lookup(ROOT, path) else {
            return (0, 0);
        };
        let mut count = (0usize, 0u64);
        let mut stack = vec![id];
        while let Some(at) = stack.pop() {
            match inner.nodes.get(&at).map(|n| &n.kind) {
                Some(Kind::File(data)) => {
                    count.0 += 1;
                    count.1 += data.len() as u64;
                }
                Some(Kind::Dir(entries)) => stack.extend(entries.values().copied()),
                None => {}
            }
        }
        count
    }

    /// Every file under the folder at the relative path `path`, with its
    /// path relative to it, in name order; empty when there is no such
    /// folder.
    pub fn files_under(&self, path: &str) -> Vec<(String, Bytes)> {
        let inner = self.lock();
        let Ok(id) = inner.lookup(ROOT, path) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        inner.collect(id, "", &mut out);
        out
    }

    /// The folder at the relative path `path` as a read-only tree (empty
    /// when there is none).
    pub fn tree_under(&self, path: &str) -> Arc<RoDir> {
        let mut builder = TreeBuilder::new();
        for (p, data) in self.files_under(path) {
            // Names in the scratch folder pass the tree's rules.
            let _ = builder.file(&p, data, Stamp::ARCHIVE);
        }
        builder.finish()
    }
}

/// Why the host could not place a file or folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PutError {
    /// The path breaks the name rules.
    Name(NameError),
    /// A cap (also noted as the folder's [`ScratchLimit`]).
    Limit(ScratchLimit),
    /// Another error (a file where a folder should be, an existing file).
    Errno(Errno),
}

/// How [`Scratch::open`] opens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct OpenFlags {
    pub create: bool,
    pub exclusive: bool,
    pub directory: bool,
    pub truncate: bool,
    pub write: bool,
}

impl Inner {
    fn note(&mut self, limit: ScratchLimit) {
        self.hit.get_or_insert(limit);
    }

    fn put_error(&self, e: Errno) -> PutError {
        match (e, self.hit) {
            (Errno::InsufficientSpace | Errno::NameTooLong | Errno::Invalid, Some(limit)) => {
                PutError::Limit(limit)
            }
            _ => PutError::Errno(e),
        }
    }

    fn node(&self, id: u64) -> Result<&Node, Errno> {
        self.nodes.get(&id).ok_or(Errno::NoEntry)
    }

    fn dir(&self, id: u64) -> Result<&BTreeMap<Box<str>, u64>, Errno> {
        match &self.node(id)?.kind {
            Kind::Dir(entries) => Ok(entries),
            Kind::File(_) => Err(Errno::NotDirectory),
        }
    }

    fn is_dir(&self, id: u64) -> Result<bool, Errno> {
        Ok(matches!(self.node(id)?.kind, Kind::Dir(_)))
    }

    fn stat(&self, id: u64) -> Result<NodeStat, Errno> {
        let node = self.node(id)?;
        let (is_dir, size) = match &node.kind {
            Kind::Dir(_) => (true, 0),
            Kind::File(data) => (false, data.len() as u64),
        };
        Ok(NodeStat {
            is_dir,
            size,
            ino: SCRATCH_INODES | id,
            mtime: node.mtime,
            atime: node.atime,
            ctime: node.ctime,
        })
    }

    /// Walks the names of `path` from the folder `base`: `.` stays, `..`
    /// goes up but never above `base` (`ENOTPERM`), every step but the
    /// last must be a folder.
    fn walk<'p>(&self, base: u64, names: impl Iterator<Item = &'p str>) -> Result<Vec<u64>, Errno> {
        self.dir(base)?;
        let mut stack = vec![base];
        for n in names {
            match n {
                "" | "." => {}
                ".." => {
                    if stack.len() == 1 {
                        return Err(Errno::NotPermitted);
                    }
                    stack.pop();
                }
                n => {
                    let here = *stack.last().unwrap_or(&base);
                    let child = *self.dir(here)?.get(n).ok_or(Errno::NoEntry)?;
                    stack.push(child);
                }
            }
        }
        Ok(stack)
    }

    fn lookup(&self, base: u64, path: &str) -> Result<u64, Errno> {
        if path.is_empty() {
            return Err(Errno::NoEntry);
        }
        if path.starts_with('/') {
            return Err(Errno::NotPermitted);
        }
        let stack = self.walk(base, path.split('/'))?;
        let id = *stack.last().unwrap_or(&base);
        if path.ends_with('/') && !self.is_dir(id)? {
            return Err(Errno::NotDirectory);
        }
        Ok(id)
    }

    /// The folder holding the last name of `path` (trailing `/` ignored),
    /// and that name, or the node itself when the path ends in `.` or `..`.
    fn parent_of<'p>(&self, base: u64, path: &'p str) -> Result<(u64, Last<'p>), Errno> {
        if path.is_empty() {
            return Err(Errno::NoEntry);
        }
        if path.starts_with('/') {
            return Err(Errno::NotPermitted);
        }
        let trimmed = path.trim_end_matches('/');
        let (head, last) = match trimmed.rsplit_once('/') {
            Some((h, l)) => (h, l),
            None => ("", trimmed),
        };
        let stack = self.walk(base, head.split('/'))?;
        let dir = *stack.last().unwrap_or(&base);
        self.dir(dir)?;
        match last {
            "" | "." => Ok((dir, Last::Node(dir))),
            ".." => {
                if stack.len() == 1 {
                    return Err(Errno::NotPermitted);
                }
                Ok((dir, Last::Node(stack[stack.len() - 2])))
            }
            name => Ok((dir, Last::Name(name))),
        }
    }

    /// Length of the path of `id` from the root, and its depth.
    fn place(&self, id: u64) -> (usize, usize) {
        let mut len = 0usize;
        let mut depth = 0usize;
        let mut at = id;
        while at != ROOT {
            let Some(node) = self.nodes.get(&at) else {
                break;
            };
            len += node.name.len() + usize::from(depth > 0);
            depth += 1;
            at = node.parent;
        }
        (len, depth)
    }

    /// Whether a node named `name` may be placed in `dir` with a subtree
    /// of `below` (extra path bytes, extra depth) under it.
    fn check_place(&mut self, dir: u64, name: &str, below: (usize, usize)) -> Result<(), Errno> {
        match name::check_name(name) {
            Ok(()) => {}
            Err(NameError::NameTooLong) => {
                self.note(ScratchLimit::NameBytes {
                    cap: MAX_SCRATCH_NAME_BYTES as u64,
                });
                return Err(Errno::NameTooLong);
            }
            Err(NameError::Control) => {
                self.note(ScratchLimit::NameCharacters);
                return Err(Errno::Invalid);
            }
            Err(_) => return Err(Errno::Invalid),
        }
        let (len, depth) = self.place(dir);
        let path = len + usize::from(len > 0) + name.len() + below.0;
        if path > MAX_SCRATCH_PATH_BYTES {
            self.note(ScratchLimit::PathBytes {
                cap: MAX_SCRATCH_PATH_BYTES as u64,
            });
            return Err(Errno::NameTooLong);
        }
        if depth + 1 + below.1 > MAX_SCRATCH_DEPTH {
            self.note(ScratchLimit::Depth {
                cap: MAX_SCRATCH_DEPTH as u64,
            });
            return Err(Errno::InsufficientSpace);
        }
        Ok(())
    }

    fn create(&mut self, dir: u64, name: &str, kind: Kind) -> Result<u64, Errno> {
        if !self.node(dir)?.linked {
            return Err(Errno::NoEntry);
        }
        self.check_place(dir, name, (0, 0))?;
        if self.nodes.len() > self.caps.files {
            self.note(ScratchLimit::Files {
                cap: self.caps.files as u64,
            });
            return Err(Errno::InsufficientSpace);
        }
        let id = self.next;
        self.next += 1;
        let now = Stamp::now();
        self.nodes.insert(
            id,
            Node {
                name: Box::from(name),
                parent: dir,
                kind,
                linked: true,
                handles: 0,
                mtime: now,
                atime: now,
                ctime: now,
            },
        );
        if let Some(Node {
            kind: Kind::Dir(entries),
            mtime,
            ..
        }) = self.nodes.get_mut(&dir)
        {
            entries.insert(Box::from(name), id);
            *mtime = now;
        }
        Ok(id)
    }

    fn resize(&mut self, id: u64, size: u64) -> Result<(), Errno> {
        let len = match &self.node(id)?.kind {
            Kind::File(data) => data.len() as u64,
            Kind::Dir(_) => return Err(Errno::IsDirectory),
        };
        let total = self.bytes - len;
        if total.saturating_add(size) > self.caps.bytes {
            self.note(ScratchLimit::Bytes {
                cap: self.caps.bytes,
            });
            return Err(Errno::InsufficientSpace);
        }
        let new_len = usize::try_from(size).map_err(|_| Errno::InsufficientSpace)?;
        if let Some(Node {
            kind: Kind::File(data),
            mtime,
            ctime,
            ..
        }) = self.nodes.get_mut(&id)
        {
            data.resize(new_len, 0);
            if new_len < data.capacity() / 2 {
                data.shrink_to_fit();
            }
            let now = Stamp::now();
            *mtime = now;
            *ctime = now;
        }
        self.bytes = total + size;
        Ok(())
    }

    fn write(&mut self, id: u64, offset: Option<u64>, bytes: &[u8]) -> Result<u64, Errno> {
        let len = match &self.node(id)?.kind {
            Kind::File(data) => data.len() as u64,
            Kind::Dir(_) => return Err(Errno::IsDirectory),
        };
        let start = offset.unwrap_or(len);
        let end = start
            .checked_add(bytes.len() as u64)
            .ok_or(Errno::InsufficientSpace)?;
        if end > len {
            self.resize(id, end)?;
        }
        if let Some(Node {
            kind: Kind::File(data),
            mtime,
            ..
        }) = self.nodes.get_mut(&id)
        {
            // `end` fits: the file is at least `end` bytes now.
            let (s, e) = (start as usize, end as usize);
            data[s..e].copy_from_slice(bytes);
            *mtime = Stamp::now();
        }
        Ok(end)
    }

    /// Takes `id` (named `name`) out of `dir`; frees it unless held open.
    fn unlink(&mut self, dir: u64, name: &str, id: u64) {
        let now = Stamp::now();
        if let Some(Node {
            kind: Kind::Dir(entries),
            mtime,
            ..
        }) = self.nodes.get_mut(&dir)
        {
            entries.remove(name);
            *mtime = now;
        }
        let free = match self.nodes.get_mut(&id) {
            Some(node) => {
                node.linked = false;
                node.ctime = now;
                node.handles == 0
            }
            None => false,
        };
        if free {
            self.free(id);
        }
    }

    fn free(&mut self, id: u64) {
        if id == ROOT {
            return;
        }
        if let Some(node) = self.nodes.remove(&id)
            && let Kind::File(data) = node.kind
        {
            self.bytes = self.bytes.saturating_sub(data.len() as u64);
        }
    }

    /// The longest path under `id` (bytes past its own name) and the
    /// deepest nesting under it.
    fn below(&self, id: u64) -> (usize, usize) {
        let Ok(entries) = self.dir(id) else {
            return (0, 0);
        };
        let mut most = (0, 0);
        for (name, child) in entries {
            let (len, depth) = self.below(*child);
            most.0 = most.0.max(1 + name.len() + len);
            most.1 = most.1.max(1 + depth);
        }
        most
    }

    fn rename(&mut self, old_base: u64, old: &str, new_base: u64, new: &str) -> Result<(), Errno> {
        let (old_dir, old_last) = self.parent_of(old_base, old)?;
        let Last::Name(old_name) = old_last else {
            return Err(Errno::Invalid);
        };
        let id = *self.dir(old_dir)?.get(old_name).ok_or(Errno::NoEntry)?;
        let moving_dir = self.is_dir(id)?;
        if old.ends_with('/') && !moving_dir {
            return Err(Errno::NotDirectory);
        }
        let (new_dir, new_last) = self.parent_of(new_base, new)?;
        let Last::Name(new_name) = new_last else {
            return Err(Errno::Invalid);
        };
        if new.ends_with('/') && !moving_dir {
            return Err(Errno::NotDirectory);
        }
        // A folder cannot move into itself or below itself.
        let mut at = new_dir;
        loop {
            if at == id {
                return Err(Errno::Invalid);
            }
            if at == ROOT {
                break;
            }
            at = self.node(at)?.parent;
        }
        let existing = self.dir(new_dir)?.get(new_name).copied();
        if existing == Some(id) {
            return Ok(());
        }
        if let Some(target) = existing {
            match (moving_dir, self.is_dir(target)?) {
                (true, true) => {
                    if !self.dir(target)?.is_empty() {
                        return Err(Errno::NotEmpty);
                    }
                }
                (true, false) => return Err(Errno::NotDirectory),
                (false, true) => return Err(Errno::IsDirectory),
                (false, false) => {}
            }
        }
        let below = self.below(id);
        self.check_place(new_dir, new_name, below)?;
        if let Some(target) = existing {
            self.unlink(new_dir, new_name, target);
        }
        let now = Stamp::now();
        if let Some(Node {
            kind: Kind::Dir(entries),
            mtime,
            ..
        }) = self.nodes.get_mut(&old_dir)
        {
            entries.remove(old_name);
            *mtime = now;
        }
        if let Some(Node {
            kind: Kind::Dir(entries),
            mtime,
            ..
        }) = self.nodes.get_mut(&new_dir)
        {
            entries.insert(Box::from(new_name), id);
            *mtime = now;
        }
        if let Some(node) = self.nodes.get_mut(&id) {
            node.name = Box::from(new_name);
            node.parent = new_dir;
            node.ctime = now;
        }
        Ok(())
    }

    fn collect(&self, id: u64, prefix: &str, out: &mut Vec<(String, Bytes)>) {
        let Some(node) = self.nodes.get(&id) else {
            return;
        };
        match &node.kind {
            Kind::File(data) => out.push((prefix.to_string(), Bytes::copy_from_slice(data))),
            Kind::Dir(entries) => {
                for (name, child) in entries {
                    let path = if prefix.is_empty() {
                        name.to_string()
                    } else {
                        format!("{prefix}/{name}")
                    };
                    self.collect(*child, &path, out);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small(bytes: u64, files: usize) -> Scratch {
        Scratch::new(ScratchCaps { bytes, files }, None)
    }

    fn file(s: &Scratch, path: &str) -> Result<u64, Errno> {
        s.open(
            ROOT,
            path,
            OpenFlags {
                create: true,
                write: true,
                ..Default::default()
            },
        )
    }

    #[test]
    fn bytes_at_the_cap_and_one_past() {
        let s = small(100, 10);
        let f = file(&s, "a").unwrap();
        assert_eq!(s.write(f, Some(0), &[1; 100]), Ok(100));
        assert_eq!(s.limit_hit(), None);
        assert_eq!(s.write(f, None, &[1]), Err(Errno::InsufficientSpace));
        assert_eq!(s.limit_hit(), Some(ScratchLimit::Bytes { cap: 100 }));
        assert_eq!(s.usage(), (100, 1));
        // Another file shares the cap; shrinking gives room back.
        let g = file(&s, "b").unwrap();
        assert_eq!(s.write(g, Some(0), &[2]), Err(Errno::InsufficientSpace));
        s.set_size(f, 40).unwrap();
        assert_eq!(s.write(g, Some(0), &[2; 60]), Ok(60));
        assert_eq!(s.set_size(g, 61), Err(Errno::InsufficientSpace));
        assert_eq!(s.usage(), (100, 2));
    }

    #[test]
    fn a_sparse_write_counts_its_logical_size_before_allocating() {
        let s = small(1 << 20, 10);
        let f = file(&s, "sparse").unwrap();
        assert_eq!(
            s.write(f, Some(1 << 40), b"1"),
            Err(Errno::InsufficientSpace)
        );
        assert_eq!(
            s.write(f, Some(u64::MAX), b"1"),
            Err(Errno::InsufficientSpace)
        );
        assert_eq!(s.stat(f).unwrap().size, 0);
        assert_eq!(s.write(f, Some((1 << 20) - 1), b"1"), Ok(1 << 20));
        assert_eq!(s.read(f, 0, 4).unwrap(), Bytes::from_static(&[0, 0, 0, 0]));
        assert_eq!(s.usage().0, 1 << 20);
    }

    #[test]
    fn files_and_folders_at_the_cap_and_one_past() {
        let s = small(1 << 20, 3);
        s.create_dir(ROOT, "d").unwrap();
        file(&s, "d/a").unwrap();
        file(&s, "b").unwrap();
        assert_eq!(file(&s, "c"), Err(Errno::InsufficientSpace));
        assert_eq!(s.create_dir(ROOT, "e"), Err(Errno::InsufficientSpace));
        assert_eq!(s.limit_hit(), Some(ScratchLimit::Files { cap: 3 }));
        // Removing one makes room again.
        s.unlink_file(ROOT, "b").unwrap();
        file(&s, "c").unwrap();
    }

    #[test]
    fn names_with_nul_newline_or_4000_bytes_are_refused_and_noted() {
        let s = small(1 << 20, 100);
        assert_eq!(file(&s, &"n".repeat(255)).map(|_| ()), Ok(()));
        assert_eq!(file(&s, &"n".repeat(256)), Err(Errno::NameTooLong));
        assert_eq!(s.limit_hit(), Some(ScratchLimit::NameBytes { cap: 255 }));
        assert_eq!(file(&s, &"n".repeat(4000)), Err(Errno::NameTooLong));
        let s = small(1 << 20, 100);
        assert_eq!(file(&s, "a\nb"), Err(Errno::Invalid));
        assert_eq!(file(&s, "a\0b"), Err(Errno::Invalid));
        assert_eq!(s.create_dir(ROOT, "x\ty"), Err(Errno::Invalid));
        assert_eq!(s.limit_hit(), Some(ScratchLimit::NameCharacters));
        assert_eq!(s.usage(), (0, 0), "nothing was created");
    }

    #[test]
    fn paths_and_depth_at_the_cap_and_one_past() {
        let s = small(1 << 20, 100);
        let mut path = String::new();
        for i in 0..MAX_SCRATCH_DEPTH {
            if i > 0 {
                path.push('/');
            }
            path.push('d');
            s.create_dir(ROOT, &path).unwrap();
        }
        assert_eq!(
            s.create_dir(ROOT, &format!("{path}/d")),
            Err(Errno::InsufficientSpace)
        );
        assert_eq!(
            file(&s, &format!("{path}/f")),
            Err(Errno::InsufficientSpace)
        );
        assert_eq!(s.limit_hit(), Some(ScratchLimit::Depth { cap: 32 }));

        let s = small(1 << 20, 100);
        let name = "n".repeat(254);
        s.create_dir(ROOT, &name).unwrap();
        s.create_dir(ROOT, &format!("{name}/{name}")).unwrap();
        s.create_dir(ROOT, &format!("{name}/{name}/{name}"))
            .unwrap();
        s.create_dir(ROOT, &format!("{name}/{name}/{name}/{name}"))
            .unwrap();
        let deep = format!("{name}/{name}/{name}/{name}");
        // 1019 bytes so far: a 4-byte name makes 1024, a 5-byte one 1025.
        file(&s, &format!("{deep}/abcd")).unwrap();
        assert_eq!(file(&s, &format!("{deep}/abcde")), Err(Errno::NameTooLong));
        assert_eq!(s.limit_hit(), Some(ScratchLimit::PathBytes { cap: 1024 }));
    }

    #[test]
    fn dot_dot_never_goes_above_the_base() {
        let s = small(1 << 20, 100);
        s.create_dir(ROOT, "a").unwrap();
        file(&s, "a/x").unwrap();
        let a = s.lookup(ROOT, "a").unwrap();
        assert_eq!(s.lookup(ROOT, "a/../a/x"), s.lookup(a, "x"));
        assert_eq!(s.lookup(ROOT, ".."), Err(Errno::NotPermitted));
        assert_eq!(s.lookup(ROOT, "a/../.."), Err(Errno::NotPermitted));
        assert_eq!(s.lookup(a, ".."), Err(Errno::NotPermitted));
        assert_eq!(s.lookup(a, "../a/x"), Err(Errno::NotPermitted));
        assert_eq!(s.lookup(ROOT, "/a"), Err(Errno::NotPermitted));
        assert_eq!(file(&s, "../escape"), Err(Errno::NotPermitted));
        assert_eq!(s.create_dir(a, "../b"), Err(Errno::NotPermitted));
        assert_eq!(s.rename(a, "x", a, "../y"), Err(Errno::NotPermitted));
        assert_eq!(s.lookup(ROOT, "a/x/"), Err(Errno::NotDirectory));
        assert_eq!(s.lookup(ROOT, "a/x/y"), Err(Errno::NotDirectory));
        assert_eq!(s.lookup(ROOT, ""), Err(Errno::NoEntry));
    }

    #[test]
    fn rename_within_the_caps() {
        let s = small(100, 10);
        let f = file(&s, "a").unwrap();
        s.write(f, Some(0), b"hello").unwrap();
        let g = file(&s, "b").unwrap();
        s.write(g, Some(0), b"world!").unwrap();
        // Over an existing file: replaced, its bytes given back.
        s.rename(ROOT, "a", ROOT, "b").unwrap();
        assert_eq!(s.usage(), (5, 1));
        assert_eq!(s.lookup(ROOT, "a"), Err(Errno::NoEntry));
        let b = s.lookup(ROOT, "b").unwrap();
        assert_eq!(s.read(b, 0, 100).unwrap(), Bytes::from_static(b"hello"));
        assert_eq!(
            s.stat(b).unwrap().ino,
            SCRATCH_INODES | f,
            "the inode moves with it"
        );
        s.create_dir(ROOT, "d").unwrap();
        s.create_dir(ROOT, "d/e").unwrap();
        assert_eq!(s.rename(ROOT, "d", ROOT, "d/e/f"), Err(Errno::Invalid));
        assert_eq!(s.rename(ROOT, "b", ROOT, "d"), Err(Errno::IsDirectory));
        assert_eq!(s.rename(ROOT, "d", ROOT, "b"), Err(Errno::NotDirectory));
        s.create_dir(ROOT, "full").unwrap();
        file(&s, "full/x").unwrap();
        assert_eq!(s.rename(ROOT, "d", ROOT, "full"), Err(Errno::NotEmpty));
        // A bad new name is refused like a create.
        assert_eq!(s.rename(ROOT, "b", ROOT, "new\nline"), Err(Errno::Invalid));
        s.rename(ROOT, "b", ROOT, "d/e/b").unwrap();
        assert!(s.lookup(ROOT, "d/e/b").is_ok());
    }

    #[test]
    fn rename_moves_a_subtree_only_within_the_depth_cap() {
        let s = small(1 << 20, 100);
        let mut path = String::from("t");
        s.create_dir(ROOT, "t").unwrap();
        for _ in 1..MAX_SCRATCH_DEPTH - 1 {
            path.push_str("/t");
            s.create_dir(ROOT, &path).unwrap();
        }
        // `t` is 31 deep; under `u` it would be 32: fits. Under `u/v`: not.
        s.create_dir(ROOT, "u").unwrap();
        s.create_dir(ROOT, "u/v").unwrap();
        assert_eq!(
            s.rename(ROOT, "t", ROOT, "u/v/t"),
            Err(Errno::InsufficientSpace)
        );
        s.rename(ROOT, "t", ROOT, "u/t").unwrap();
    }

    #[test]
    fn removed_while_open_is_freed_when_closed() {
        let s = small(100, 10);
        let f = file(&s, "a").unwrap();
        s.write(f, Some(0), &[7; 50]).unwrap();
        let held = s.handle(f);
        s.unlink_file(ROOT, "a").unwrap();
        assert_eq!(s.lookup(ROOT, "a"), Err(Errno::NoEntry));
        assert_eq!(s.read(f, 0, 2).unwrap(), Bytes::from_static(&[7, 7]));
        assert_eq!(s.usage(), (50, 1), "still held");
        drop(held);
        assert_eq!(s.usage(), (0, 0));
    }

    #[test]
    fn folders_and_files_keep_their_kind() {
        let s = small(100, 10);
        s.create_dir(ROOT, "d/").unwrap();
        assert_eq!(s.create_dir(ROOT, "d"), Err(Errno::Exist));
        assert_eq!(s.create_dir(ROOT, "."), Err(Errno::Exist));
        file(&s, "d/f").unwrap();
        assert_eq!(s.remove_dir(ROOT, "d"), Err(Errno::NotEmpty));
        assert_eq!(s.unlink_file(ROOT, "d"), Err(Errno::IsDirectory));
        assert_eq!(s.remove_dir(ROOT, "d/f"), Err(Errno::NotDirectory));
        assert_eq!(s.remove_dir(ROOT, "."), Err(Errno::Invalid));
        let excl = OpenFlags {
            create: true,
            exclusive: true,
            ..Default::default()
        };
        assert_eq!(s.open(ROOT, "d/f", excl), Err(Errno::Exist));
        let write_dir = OpenFlags {
            write: true,
            ..Default::default()
        };
        assert_eq!(s.open(ROOT, "d", write_dir), Err(Errno::IsDirectory));
        assert_eq!(
            s.open(ROOT, "nothing", OpenFlags::default()),
            Err(Errno::NoEntry)
        );
        s.unlink_file(ROOT, "d/f").unwrap();
        s.remove_dir(ROOT, "d").unwrap();
        assert_eq!(s.usage(), (0, 0));
        let listing = {
            file(&s, "b").unwrap();
            s.create_dir(ROOT, "a").unwrap();
            s.list(ROOT).unwrap()
        };
        assert_eq!(listing, vec![("a".into(), true), ("b".into(), false)]);
    }

    #[test]
    fn the_host_places_files_under_the_same_rules() {
        let s = small(10, 4);
        s.put_dir("out").unwrap();
        s.put_file("in/a.txt", b"12345").unwrap();
        assert_eq!(
            s.put_file("in/a.txt", b"x"),
            Err(PutError::Errno(Errno::Exist))
        );
        assert_eq!(
            s.put_file("../x", b""),
            Err(PutError::Name(NameError::NotAName))
        );
        assert_eq!(
            s.put_file("big", b"123456"),
            Err(PutError::Limit(ScratchLimit::Bytes { cap: 10 }))
        );
        assert_eq!(
            s.files_under("in"),
            vec![("a.txt".to_string(), Bytes::from_static(b"12345"))]
        );
        assert!(s.files_under("nothing").is_empty());
        assert_eq!(s.count_under("in"), (1, 5));
        assert_eq!(s.count_under(""), (0, 0));
        assert_eq!(s.count_under("nothing"), (0, 0));
    }

    #[test]
    fn a_budget_is_shared_by_the_calls_in_flight() {
        static BUDGET: Budget = Budget::new(300);
        let a = BUDGET.reserve(100).expect("room");
        let b = BUDGET.reserve(100).expect("room");
        let c = BUDGET.reserve(100).expect("room");
        assert!(BUDGET.reserve(1).is_none(), "past the budget");
        drop((a, b, c));
        assert!(BUDGET.reserve(300).is_some());
        assert!(BUDGET.reserve(301).is_none());
    }
}
