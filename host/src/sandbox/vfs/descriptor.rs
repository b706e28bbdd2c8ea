//! The `wasi:filesystem/types` host: descriptors on the nodes of the
//! in-memory filesystem, and what a guest may do with them.
//!
//! A descriptor is a folder or file of a read-only tree (every mutation
//! `not-permitted`) or of the call's scratch folder (mutations checked
//! against its caps, `scratch.rs`). Paths are resolved here, from the
//! descriptor's folder: an absolute path is `not-permitted`, `..` never
//! goes above that folder (`not-permitted`), and there are no symbolic
//! links (`readlink-at` finds none, `symlink-at` and `link-at` are
//! `not-permitted`).

use std::collections::VecDeque;
use std::sync::Arc;

use wasmtime::component::Resource;
use wasmtime_wasi_io::streams::{DynInputStream, DynOutputStream};

use super::Errno;
use super::VfsView;
use super::bindings::types::{
    self, Advice, DescriptorFlags, DescriptorStat, DescriptorType, DirectoryEntry, ErrorCode,
    Filesize, MetadataHashValue, NewTimestamp, OpenFlags, PathFlags,
};
use super::scratch::{self, Handle, NodeStat};
use super::streams::{RoReader, ScratchReader, ScratchWriter, StreamFsError};
use super::tree::{RoDir, RoEntry, RoFile, Stamp};
use crate::limits::MAX_FILE_READ_BYTES;
use wasmtime_wasi::p2::bindings::clocks::wall_clock::Datetime;

type FsResult<T> = wasmtime::Result<Result<T, ErrorCode>>;

/// What a descriptor refers to.
#[derive(Clone)]
enum Node {
    RoDir(Arc<RoDir>),
    RoFile(Arc<RoFile>),
    Scratch { file: Handle, is_dir: bool },
}

/// An open file or folder of the in-memory filesystem.
pub struct Descriptor {
    node: Node,
    /// Whether it was opened to read (files).
    read: bool,
    /// Whether it was opened to write (scratch files only).
    write: bool,
}

impl Descriptor {
    /// A mount's root folder.
    pub(crate) fn root(root: &super::MountRoot) -> Descriptor {
        let node = match root {
            super::MountRoot::ReadOnly(dir) => Node::RoDir(dir.clone()),
            super::MountRoot::Scratch(s) => Node::Scratch {
                file: s.handle(scratch::ROOT),
                is_dir: true,
            },
        };
        Descriptor {
            node,
            read: true,
            write: false,
        }
    }

    fn is_dir(&self) -> bool {
        match &self.node {
            Node::RoDir(_) => true,
            Node::RoFile(_) => false,
            Node::Scratch { is_dir, .. } => *is_dir,
        }
    }

    fn stat(&self) -> Result<NodeStat, Errno> {
        Ok(match &self.node {
            Node::RoDir(d) => ro_dir_stat(d),
            Node::RoFile(f) => ro_file_stat(f),
            Node::Scratch { file, .. } => file.scratch().stat(file.id())?,
        })
    }

    /// The file this descriptor reads, if it is one opened to read.
    fn readable(&self) -> Result<&Node, Errno> {
        if self.is_dir() {
            return Err(Errno::IsDirectory);
        }
        if !self.read {
            return Err(Errno::BadDescriptor);
        }
        Ok(&self.node)
    }

    /// The scratch file this descriptor writes.
    fn writable(&self) -> Result<&Handle, Errno> {
        match &self.node {
            Node::RoDir(_) | Node::RoFile(_) => Err(Errno::NotPermitted),
            Node::Scratch { is_dir: true, .. } => Err(Errno::IsDirectory),
            Node::Scratch { file, .. } if self.write => Ok(file),
            Node::Scratch { .. } => Err(Errno::BadDescriptor),
        }
    }

    /// The scratch folder this descriptor is, for a change inside it.
    fn mutable_dir(&self) -> Result<&Handle, Errno> {
        match &self.node {
            Node::RoDir(_) | Node::RoFile(_) => Err(Errno::NotPermitted),
            Node::Scratch { is_dir: false, .. } => Err(Errno::NotDirectory),
            Node::Scratch { file, .. } => Ok(file),
        }
    }

    /// What `path` from this folder is.
    fn resolve(&self, path: &str) -> Result<Node, Errno> {
        match &self.node {
            Node::RoDir(d) => Ok(match ro_lookup(d, path)? {
                RoEntry::Dir(d) => Node::RoDir(d),
                RoEntry::File(f) => Node::RoFile(f),
            }),
            Node::RoFile(_) => Err(Errno::NotDirectory),
            Node::Scratch { is_dir: false, .. } => Err(Errno::NotDirectory),
            Node::Scratch { file, .. } => {
                let s = file.scratch();
                let id = s.lookup(file.id(), path)?;
                let is_dir = s.stat(id)?.is_dir;
                Ok(Node::Scratch {
                    file: s.handle(id),
                    is_dir,
                })
            }
        }
    }
}

/// The entries of a folder, as `read-directory` listed them.
pub struct DirEntries(VecDeque<DirectoryEntry>);

fn ro_dir_stat(d: &RoDir) -> NodeStat {
    NodeStat {
        is_dir: true,
        size: 0,
        ino: d.ino,
        mtime: d.mtime,
        atime: d.mtime,
        ctime: d.mtime,
    }
}

fn ro_file_stat(f: &RoFile) -> NodeStat {
    NodeStat {
        is_dir: false,
        size: f.data.len() as u64,
        ino: f.ino,
        mtime: f.mtime,
        atime: f.mtime,
        ctime: f.mtime,
    }
}

/// The entry at `path` from the read-only folder `base`: `.` stays, `..`
/// goes up but never above `base`.
fn ro_lookup(base: &Arc<RoDir>, path: &str) -> Result<RoEntry, Errno> {
    if path.is_empty() {
        return Err(Errno::NoEntry);
    }
    if path.starts_with('/') {
        return Err(Errno::NotPermitted);
    }
    let mut stack: Vec<Arc<RoDir>> = vec![base.clone()];
    let mut file: Option<Arc<RoFile>> = None;
    for name in path.split('/') {
        if file.is_some() {
            // Anything after a file, a trailing `/` too.
            return Err(Errno::NotDirectory);
        }
        match name {
            "" | "." => {}
            ".." => {
                if stack.len() == 1 {
                    return Err(Errno::NotPermitted);
                }
                stack.pop();
            }
            name => {
                let here = stack.last().ok_or(Errno::NoEntry)?;
                match here.entries.get(name).ok_or(Errno::NoEntry)? {
                    RoEntry::Dir(d) => stack.push(d.clone()),
                    RoEntry::File(f) => file = Some(f.clone()),
                }
            }
        }
    }
    match file {
        Some(f) => Ok(RoEntry::File(f)),
        None => Ok(RoEntry::Dir(stack.pop().ok_or(Errno::NoEntry)?)),
    }
}

fn datetime(s: Stamp) -> Datetime {
    Datetime {
        seconds: s.seconds,
        nanoseconds: s.nanoseconds,
    }
}

fn descriptor_stat(s: NodeStat) -> DescriptorStat {
    DescriptorStat {
        type_: if s.is_dir {
            DescriptorType::Directory
        } else {
            DescriptorType::RegularFile
        },
        link_count: 1,
        size: s.size,
        data_access_timestamp: Some(datetime(s.atime)),
        data_modification_timestamp: Some(datetime(s.mtime)),
        status_change_timestamp: Some(datetime(s.ctime)),
    }
}

fn metadata_hash(s: NodeStat) -> MetadataHashValue {
    // The inode alone: stable while the file changes, so the guest's
    // `st_ino` (derived from it) names the same file on every `stat`.
    MetadataHashValue {
        lower: s.ino,
        upper: 0,
    }
}

/// A new timestamp, as a time to set (`None`: keep).
fn new_time(t: NewTimestamp) -> Option<Stamp> {
    match t {
        NewTimestamp::NoChange => None,
        NewTimestamp::Now => Some(Stamp::now()),
        NewTimestamp::Timestamp(d) => Some(Stamp {
            seconds: d.seconds,
            nanoseconds: d.nanoseconds,
        }),
    }
}

impl From<Errno> for ErrorCode {
    fn from(e: Errno) -> ErrorCode {
        match e {
            Errno::NotPermitted => ErrorCode::NotPermitted,
            Errno::NoEntry => ErrorCode::NoEntry,
            Errno::Exist => ErrorCode::Exist,
            Errno::NotDirectory => ErrorCode::NotDirectory,
            Errno::IsDirectory => ErrorCode::IsDirectory,
            Errno::NotEmpty => ErrorCode::NotEmpty,
            Errno::Invalid => ErrorCode::Invalid,
            Errno::NameTooLong => ErrorCode::NameTooLong,
            Errno::InsufficientSpace => ErrorCode::InsufficientSpace,
            Errno::BadDescriptor => ErrorCode::BadDescriptor,
            Errno::CrossDevice => ErrorCode::CrossDevice,
        }
    }
}

fn ok<T>(r: Result<T, Errno>) -> FsResult<T> {
    Ok(r.map_err(ErrorCode::from))
}

impl VfsView<'_> {
    fn get(&self, fd: &Resource<Descriptor>) -> wasmtime::Result<&Descriptor> {
        Ok(self.table.get(fd)?)
    }

    /// Pushes a new descriptor on `node`.
    fn push(
        &mut self,
        node: Node,
        read: bool,
        write: bool,
    ) -> wasmtime::Result<Resource<Descriptor>> {
        Ok(self.table.push(Descriptor { node, read, write })?)
    }
}

impl types::Host for VfsView<'_> {
    fn filesystem_error_code(
        &mut self,
        err: Resource<wasmtime::Error>,
    ) -> wasmtime::Result<Option<ErrorCode>> {
        let err = self.table.get(&err)?;
        Ok(err
            .downcast_ref::<StreamFsError>()
            .map(|e| ErrorCode::from(e.0)))
    }
}

impl types::HostDescriptor for VfsView<'_> {
    fn read_via_stream(
        &mut self,
        fd: Resource<Descriptor>,
        offset: Filesize,
    ) -> FsResult<Resource<DynInputStream>> {
        let stream: DynInputStream = match self.get(&fd)?.readable() {
            Err(e) => return ok(Err(e)),
            Ok(Node::RoFile(f)) => Box::new(RoReader::new(f.data.clone(), offset)),
            Ok(Node::Scratch { file, .. }) => Box::new(ScratchReader::new(file.clone(), offset)),
            Ok(Node::RoDir(_)) => return ok(Err(Errno::IsDirectory)),
        };
        Ok(Ok(self.table.push(stream)?))
    }

    fn write_via_stream(
        &mut self,
        fd: Resource<Descriptor>,
        offset: Filesize,
    ) -> FsResult<Resource<DynOutputStream>> {
        let file = match self.get(&fd)?.writable() {
            Ok(f) => f.clone(),
            Err(e) => return ok(Err(e)),
        };
        let stream: DynOutputStream = Box::new(ScratchWriter::new(file, Some(offset)));
        Ok(Ok(self.table.push(stream)?))
    }

    fn append_via_stream(
        &mut self,
        fd: Resource<Descriptor>,
    ) -> FsResult<Resource<DynOutputStream>> {
        let file = match self.get(&fd)?.writable() {
            Ok(f) => f.clone(),
            Err(e) => return ok(Err(e)),
        };
        let stream: DynOutputStream = Box::new(ScratchWriter::new(file, None));
        Ok(Ok(self.table.push(stream)?))
    }

    fn advise(
        &mut self,
        fd: Resource<Descriptor>,
        _offset: Filesize,
        _length: Filesize,
        _advice: Advice,
    ) -> FsResult<()> {
        let d = self.get(&fd)?;
        ok(if d.is_dir() {
            Err(Errno::BadDescriptor)
        } else {
            Ok(())
        })
    }

    fn sync_data(&mut self, fd: Resource<Descriptor>) -> FsResult<()> {
        self.get(&fd)?;
        Ok(Ok(()))
    }

    fn get_flags(&mut self, fd: Resource<Descriptor>) -> FsResult<DescriptorFlags> {
        let d = self.get(&fd)?;
        let mut flags = DescriptorFlags::empty();
        if d.read || d.is_dir() {
            flags |= DescriptorFlags::READ;
        }
        if d.write {
            flags |= DescriptorFlags::WRITE;
        }
        if d.is_dir() && matches!(d.node, Node::Scratch { .. }) {
            flags |= DescriptorFlags::MUTATE_DIRECTORY;
        }
        Ok(Ok(flags))
    }

    fn get_type(&mut self, fd: Resource<Descriptor>) -> FsResult<DescriptorType> {
        let d = self.get(&fd)?;
        Ok(Ok(if d.is_dir() {
            DescriptorType::Directory
        } else {
            DescriptorType::RegularFile
        }))
    }

    fn set_size(&mut self, fd: Resource<Descriptor>, size: Filesize) -> FsResult<()> {
        let d = self.get(&fd)?;
        ok(d.writable()
            .and_then(|f| f.scratch().set_size(f.id(), size)))
    }

    fn set_times(
        &mut self,
        fd: Resource<Descriptor>,
        atime: NewTimestamp,
        mtime: NewTimestamp,
    ) -> FsResult<()> {
        let d = self.get(&fd)?;
        ok(match &d.node {
            Node::RoDir(_) | Node::RoFile(_) => Err(Errno::NotPermitted),
            Node::Scratch { file, .. } => {
                file.scratch()
                    .set_times(file.id(), new_time(atime), new_time(mtime))
            }
        })
    }

    fn read(
        &mut self,
        fd: Resource<Descriptor>,
        len: Filesize,
        offset: Filesize,
    ) -> FsResult<(Vec<u8>, bool)> {
        let len = usize::try_from(len)
            .unwrap_or(usize::MAX)
            .min(MAX_FILE_READ_BYTES);
        let d = self.get(&fd)?;
        let data = match d.readable() {
            Err(e) => return ok(Err(e)),
            Ok(Node::RoFile(f)) => {
                let start = usize::try_from(offset)
                    .unwrap_or(usize::MAX)
                    .min(f.data.len());
                let end = start.saturating_add(len).min(f.data.len());
                f.data[start..end].to_vec()
            }
            Ok(Node::Scratch { file, .. }) => match file.scratch().read(file.id(), offset, len) {
                Ok(b) => b.to_vec(),
                Err(e) => return ok(Err(e)),
            },
            Ok(Node::RoDir(_)) => return ok(Err(Errno::IsDirectory)),
        };
        let end = data.is_empty() && len > 0;
        Ok(Ok((data, end)))
    }

    fn write(
        &mut self,
        fd: Resource<Descriptor>,
        buffer: Vec<u8>,
        offset: Filesize,
    ) -> FsResult<Filesize> {
        let d = self.get(&fd)?;
        ok(d.writable().and_then(|f| {
            f.scratch()
                .write(f.id(), Some(offset), &buffer)
                .map(|_| buffer.len() as u64)
        }))
    }

    fn read_directory(&mut self, fd: Resource<Descriptor>) -> FsResult<Resource<DirEntries>> {
        let d = self.get(&fd)?;
        let entries: Result<VecDeque<DirectoryEntry>, Errno> = match &d.node {
            Node::RoFile(_) | Node::Scratch { is_dir: false, .. } => Err(Errno::NotDirectory),
            Node::RoDir(dir) => Ok(dir
                .entries
                .iter()
                .map(|(name, entry)| DirectoryEntry {
                    type_: match entry {
                        RoEntry::Dir(_) => DescriptorType::Directory,
                        RoEntry::File(_) => DescriptorType::RegularFile,
                    },
                    name: name.to_string(),
                })
                .collect()),
            Node::Scratch { file, .. } => file.scratch().list(file.id()).map(|list| {
                list.into_iter()
                    .map(|(name, is_dir)| DirectoryEntry {
                        type_: if is_dir {
                            DescriptorType::Directory
                        } else {
                            DescriptorType::RegularFile
                        },
                        name,
                    })
                    .collect()
            }),
        };
        match entries {
            Ok(entries) => Ok(Ok(self.table.push(DirEntries(entries))?)),
            Err(e) => ok(Err(e)),
        }
    }

    fn sync(&mut self, fd: Resource<Descriptor>) -> FsResult<()> {
        self.get(&fd)?;
        Ok(Ok(()))
    }

    fn create_directory_at(&mut self, fd: Resource<Descriptor>, path: String) -> FsResult<()> {
        let d = self.get(&fd)?;
        ok(d.mutable_dir()
            .and_then(|dir| dir.scratch().create_dir(dir.id(), &path)))
    }

    fn stat(&mut self, fd: Resource<Descriptor>) -> FsResult<DescriptorStat> {
        ok(self.get(&fd)?.stat().map(descriptor_stat))
    }

    fn stat_at(
        &mut self,
        fd: Resource<Descriptor>,
        _path_flags: PathFlags,
        path: String,
    ) -> FsResult<DescriptorStat> {
        let d = self.get(&fd)?;
        ok(d.resolve(&path).and_then(|node| {
            Descriptor {
                node,
                read: false,
                write: false,
            }
            .stat()
            .map(descriptor_stat)
        }))
    }

    fn set_times_at(
        &mut self,
        fd: Resource<Descriptor>,
        _path_flags: PathFlags,
        path: String,
        atime: NewTimestamp,
        mtime: NewTimestamp,
    ) -> FsResult<()> {
        let d = self.get(&fd)?;
        ok(d.resolve(&path).and_then(|node| match node {
            Node::RoDir(_) | Node::RoFile(_) => Err(Errno::NotPermitted),
            Node::Scratch { file, .. } => {
                file.scratch()
                    .set_times(file.id(), new_time(atime), new_time(mtime))
            }
        }))
    }

    fn link_at(
        &mut self,
        fd: Resource<Descriptor>,
        _old_path_flags: PathFlags,
        _old_path: String,
        new_fd: Resource<Descriptor>,
        _new_path: String,
    ) -> FsResult<()> {
        self.get(&fd)?;
        self.get(&new_fd)?;
        // No hard links: a file has one name.
        ok(Err(Errno::NotPermitted))
    }

    fn open_at(
        &mut self,
        fd: Resource<Descriptor>,
        _path_flags: PathFlags,
        path: String,
        open_flags: OpenFlags,
        flags: DescriptorFlags,
    ) -> FsResult<Resource<Descriptor>> {
        let create = open_flags.contains(OpenFlags::CREATE);
        let exclusive = open_flags.contains(OpenFlags::EXCLUSIVE);
        let directory = open_flags.contains(OpenFlags::DIRECTORY);
        let truncate = open_flags.contains(OpenFlags::TRUNCATE);
        let write = flags.contains(DescriptorFlags::WRITE) || create || truncate;
        let read = flags.contains(DescriptorFlags::READ) || !flags.contains(DescriptorFlags::WRITE);
        if directory && (create || exclusive || truncate) {
            return ok(Err(Errno::Invalid));
        }
        let d = self.get(&fd)?;
        let node = match &d.node {
            Node::RoFile(_) | Node::Scratch { is_dir: false, .. } => {
                return ok(Err(Errno::NotDirectory));
            }
            Node::RoDir(dir) => {
                if write {
                    return ok(Err(Errno::NotPermitted));
                }
                match ro_lookup(dir, &path) {
                    Ok(RoEntry::Dir(d)) => Node::RoDir(d),
                    Ok(RoEntry::File(_)) if directory => return ok(Err(Errno::NotDirectory)),
                    Ok(RoEntry::File(f)) => Node::RoFile(f),
                    Err(e) => return ok(Err(e)),
                }
            }
            Node::Scratch { file: dir, .. } => {
                let s = dir.scratch();
                let opened = s.open(
                    dir.id(),
                    &path,
                    scratch::OpenFlags {
                        create,
                        exclusive,
                        directory,
                        truncate,
                        write: flags.contains(DescriptorFlags::WRITE),
                    },
                );
                match opened.and_then(|id| Ok((id, s.stat(id)?.is_dir))) {
                    Ok((id, is_dir)) => Node::Scratch {
                        file: s.handle(id),
                        is_dir,
                    },
                    Err(e) => return ok(Err(e)),
                }
            }
        };
        Ok(Ok(self.push(node, read, write)?))
    }

    fn readlink_at(&mut self, fd: Resource<Descriptor>, path: String) -> FsResult<String> {
        let d = self.get(&fd)?;
        // Nothing is a symbolic link.
        ok(d.resolve(&path).and(Err(Errno::Invalid)))
    }

    fn remove_directory_at(&mut self, fd: Resource<Descriptor>, path: String) -> FsResult<()> {
        let d = self.get(&fd)?;
        ok(d.mutable_dir()
            .and_then(|dir| dir.scratch().remove_dir(dir.id(), &path)))
    }

    fn rename_at(
        &mut self,
        fd: Resource<Descriptor>,
        old_path: String,
        new_fd: Resource<Descriptor>,
        new_path: String,
    ) -> FsResult<()> {
        let old = self.get(&fd)?.mutable_dir().cloned();
        let new = self.get(&new_fd)?.mutable_dir().cloned();
        ok(match (old, new) {
            (Ok(old), Ok(new)) if old.scratch().same(new.scratch()) => {
                old.scratch()
                    .rename(old.id(), &old_path, new.id(), &new_path)
            }
            (Ok(_), Ok(_)) => Err(Errno::CrossDevice),
            (Err(e), _) | (_, Err(e)) => Err(e),
        })
    }

    fn symlink_at(
        &mut self,
        fd: Resource<Descriptor>,
        _old_path: String,
        _new_path: String,
    ) -> FsResult<()> {
        self.get(&fd)?;
        // No symbolic links: nothing may point elsewhere.
        ok(Err(Errno::NotPermitted))
    }

    fn unlink_file_at(&mut self, fd: Resource<Descriptor>, path: String) -> FsResult<()> {
        let d = self.get(&fd)?;
        ok(d.mutable_dir()
            .and_then(|dir| dir.scratch().unlink_file(dir.id(), &path)))
    }

    fn is_same_object(
        &mut self,
        fd: Resource<Descriptor>,
        other: Resource<Descriptor>,
    ) -> wasmtime::Result<bool> {
        let a = self.get(&fd)?.stat().map(|s| s.ino);
        let b = self.get(&other)?.stat().map(|s| s.ino);
        let same_tree = match (&self.get(&fd)?.node, &self.get(&other)?.node) {
            (Node::Scratch { file: x, .. }, Node::Scratch { file: y, .. }) => {
                x.scratch().same(y.scratch())
            }
            (Node::Scratch { .. }, _) | (_, Node::Scratch { .. }) => false,
            _ => true,
        };
        Ok(same_tree && matches!((a, b), (Ok(x), Ok(y)) if x == y))
    }

    fn metadata_hash(&mut self, fd: Resource<Descriptor>) -> FsResult<MetadataHashValue> {
        ok(self.get(&fd)?.stat().map(metadata_hash))
    }

    fn metadata_hash_at(
        &mut self,
        fd: Resource<Descriptor>,
        _path_flags: PathFlags,
        path: String,
    ) -> FsResult<MetadataHashValue> {
        let d = self.get(&fd)?;
        ok(d.resolve(&path).and_then(|node| {
            Descriptor {
                node,
                read: false,
                write: false,
            }
            .stat()
            .map(metadata_hash)
        }))
    }

    fn drop(&mut self, fd: Resource<Descriptor>) -> wasmtime::Result<()> {
        self.table.delete(fd)?;
        Ok(())
    }
}

impl types::HostDirectoryEntryStream for VfsView<'_> {
    fn read_directory_entry(
        &mut self,
        stream: Resource<DirEntries>,
    ) -> FsResult<Option<DirectoryEntry>> {
        let entries = self.table.get_mut(&stream)?;
        Ok(Ok(entries.0.pop_front()))
    }

    fn drop(&mut self, stream: Resource<DirEntries>) -> wasmtime::Result<()> {
        self.table.delete(stream)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use types::{Host as _, HostDescriptor as _, HostDirectoryEntryStream as _};
    use wasmtime::component::ResourceTable;

    use super::super::bindings::preopens::Host as _;
    use super::super::scratch::{Scratch, ScratchCaps};
    use super::super::tree::TreeBuilder;
    use super::super::{Mount, MountRoot, Vfs};
    use super::*;

    fn ro_tree() -> Arc<RoDir> {
        let mut b = TreeBuilder::new();
        b.file("a.txt", Bytes::from_static(b"hello"), Stamp::ARCHIVE)
            .unwrap();
        b.file("d/b.txt", Bytes::from_static(b"b"), Stamp::ARCHIVE)
            .unwrap();
        b.finish()
    }

    /// A filesystem of a read-only mount `/ro` and a scratch mount
    /// `/scratch` (100 bytes, 10 files), and its table.
    fn setup() -> (Vfs, ResourceTable, Scratch) {
        let scratch = Scratch::new(
            ScratchCaps {
                bytes: 100,
                files: 10,
            },
            None,
        );
        let fs = Vfs::new(vec![
            Mount {
                path: "/ro".into(),
                root: MountRoot::ReadOnly(ro_tree()),
            },
            Mount {
                path: "/scratch".into(),
                root: MountRoot::Scratch(scratch.clone()),
            },
        ]);
        (fs, ResourceTable::new(), scratch)
    }

    fn borrow(fd: &Resource<Descriptor>) -> Resource<Descriptor> {
        Resource::new_borrow(fd.rep())
    }

    fn roots(v: &mut VfsView<'_>) -> (Resource<Descriptor>, Resource<Descriptor>) {
        let mut dirs = v.get_directories().unwrap();
        assert_eq!(dirs[0].1, "/ro");
        assert_eq!(dirs[1].1, "/scratch");
        let scratch = dirs.pop().unwrap().0;
        let ro = dirs.pop().unwrap().0;
        (ro, scratch)
    }

    fn open(
        v: &mut VfsView<'_>,
        dir: &Resource<Descriptor>,
        path: &str,
        oflags: OpenFlags,
        flags: DescriptorFlags,
    ) -> Result<Resource<Descriptor>, ErrorCode> {
        v.open_at(borrow(dir), PathFlags::empty(), path.into(), oflags, flags)
            .unwrap()
    }

    #[test]
    fn a_read_only_mount_refuses_every_change() {
        let (mut fs, mut table, _) = setup();
        let mut v = VfsView {
            fs: &mut fs,
            table: &mut table,
        };
        let (ro, _) = roots(&mut v);
        let np = Err(ErrorCode::NotPermitted);
        for (oflags, flags) in [
            (OpenFlags::CREATE, DescriptorFlags::READ),
            (
                OpenFlags::CREATE | OpenFlags::EXCLUSIVE,
                DescriptorFlags::WRITE,
            ),
            (OpenFlags::TRUNCATE, DescriptorFlags::READ),
            (OpenFlags::empty(), DescriptorFlags::WRITE),
        ] {
            for path in ["a.txt", "new.txt", "d/b.txt"] {
                assert_eq!(
                    open(&mut v, &ro, path, oflags, flags).err(),
                    np.err(),
                    "{path} {oflags:?} {flags:?}"
                );
            }
        }
        let p = || PathFlags::empty();
        assert_eq!(v.create_directory_at(borrow(&ro), "x".into()).unwrap(), np);
        assert_eq!(v.unlink_file_at(borrow(&ro), "a.txt".into()).unwrap(), np);
        assert_eq!(v.remove_directory_at(borrow(&ro), "d".into()).unwrap(), np);
        assert_eq!(
            v.rename_at(borrow(&ro), "a.txt".into(), borrow(&ro), "b".into())
                .unwrap(),
            np
        );
        assert_eq!(
            v.symlink_at(borrow(&ro), "a.txt".into(), "l".into())
                .unwrap(),
            np
        );
        assert_eq!(
            v.link_at(borrow(&ro), p(), "a.txt".into(), borrow(&ro), "l".into())
                .unwrap(),
            np
        );
        assert_eq!(
            v.set_times_at(
                borrow(&ro),
                p(),
                "a.txt".into(),
                NewTimestamp::Now,
                NewTimestamp::Now
            )
            .unwrap(),
            np
        );
        assert_eq!(
            v.set_times(borrow(&ro), NewTimestamp::Now, NewTimestamp::Now)
                .unwrap(),
            np
        );
        let f = open(
            &mut v,
            &ro,
            "a.txt",
            OpenFlags::empty(),
            DescriptorFlags::READ,
        )
        .unwrap();
        assert_eq!(
            v.write(borrow(&f), b"x".to_vec(), 0).unwrap(),
            Err(ErrorCode::NotPermitted)
        );
        assert_eq!(
            v.set_size(borrow(&f), 0).unwrap(),
            Err(ErrorCode::NotPermitted)
        );
        assert!(matches!(
            v.write_via_stream(borrow(&f), 0).unwrap(),
            Err(ErrorCode::NotPermitted)
        ));
        assert!(matches!(
            v.append_via_stream(borrow(&f)).unwrap(),
            Err(ErrorCode::NotPermitted)
        ));
        assert_eq!(
            v.set_times(borrow(&f), NewTimestamp::Now, NewTimestamp::Now)
                .unwrap(),
            np
        );
        // Reading still works, and the file is as it was.
        assert_eq!(
            v.read(borrow(&f), 100, 0).unwrap(),
            Ok((b"hello".to_vec(), false))
        );
        assert_eq!(v.read(borrow(&f), 100, 5).unwrap(), Ok((Vec::new(), true)));
    }

    #[test]
    fn dot_dot_and_absolute_paths_stop_at_each_root() {
        let (mut fs, mut table, _) = setup();
        let mut v = VfsView {
            fs: &mut fs,
            table: &mut table,
        };
        let (ro, scratch) = roots(&mut v);
        v.create_directory_at(borrow(&scratch), "d".into())
            .unwrap()
            .unwrap();
        for root in [&ro, &scratch] {
            for path in [
                "..",
                "../scratch",
                "d/../..",
                "./../ro/a.txt",
                "/etc/passwd",
                "/ro/a.txt",
            ] {
                let r = v
                    .stat_at(borrow(root), PathFlags::empty(), path.into())
                    .unwrap();
                assert_eq!(r.err(), Some(ErrorCode::NotPermitted), "{path}");
                let r = open(
                    &mut v,
                    root,
                    path,
                    OpenFlags::empty(),
                    DescriptorFlags::READ,
                );
                assert_eq!(r.err(), Some(ErrorCode::NotPermitted), "{path}");
            }
            let back = v
                .stat_at(borrow(root), PathFlags::empty(), "d/..".into())
                .unwrap()
                .unwrap();
            assert_eq!(back.type_, DescriptorType::Directory);
            // From a folder below the root, `..` may not go above that
            // folder either.
            let d = open(
                &mut v,
                root,
                "d",
                OpenFlags::DIRECTORY,
                DescriptorFlags::READ,
            )
            .unwrap();
            let r = v
                .stat_at(borrow(&d), PathFlags::empty(), "..".into())
                .unwrap();
            assert_eq!(r.err(), Some(ErrorCode::NotPermitted));
        }
        assert_eq!(
            open(
                &mut v,
                &scratch,
                "../escape",
                OpenFlags::CREATE,
                DescriptorFlags::WRITE
            )
            .err(),
            Some(ErrorCode::NotPermitted)
        );
        assert_eq!(
            v.readlink_at(borrow(&ro), "a.txt".into()).unwrap(),
            Err(ErrorCode::Invalid)
        );
        assert_eq!(
            v.readlink_at(borrow(&ro), "none".into()).unwrap(),
            Err(ErrorCode::NoEntry)
        );
        assert_eq!(
            v.symlink_at(borrow(&scratch), "/etc/passwd".into(), "l".into())
                .unwrap(),
            Err(ErrorCode::NotPermitted)
        );
    }

    #[test]
    fn inodes_are_stable_and_distinct() {
        let (mut fs, mut table, _) = setup();
        let mut v = VfsView {
            fs: &mut fs,
            table: &mut table,
        };
        let (ro, scratch) = roots(&mut v);
        let hash = |v: &mut VfsView<'_>, dir: &Resource<Descriptor>, p: &str| {
            let h = v
                .metadata_hash_at(borrow(dir), PathFlags::empty(), p.into())
                .unwrap()
                .unwrap();
            (h.lower, h.upper)
        };
        let a = hash(&mut v, &ro, "a.txt");
        assert_eq!(a, hash(&mut v, &ro, "a.txt"));
        assert_eq!(a, hash(&mut v, &ro, "d/../a.txt"));
        assert_ne!(a, hash(&mut v, &ro, "d/b.txt"));
        let f = open(
            &mut v,
            &scratch,
            "f",
            OpenFlags::CREATE,
            DescriptorFlags::WRITE,
        )
        .unwrap();
        let before = hash(&mut v, &scratch, "f");
        assert_eq!(v.write(borrow(&f), b"12345".to_vec(), 0).unwrap(), Ok(5));
        let after = hash(&mut v, &scratch, "f");
        assert_eq!(before, after, "writing keeps the inode");
        let h = v.metadata_hash(borrow(&f)).unwrap().unwrap();
        assert_eq!((h.lower, h.upper), after);
        assert_ne!(after, a);
        let stat = v.stat(borrow(&f)).unwrap().unwrap();
        assert_eq!((stat.type_, stat.size), (DescriptorType::RegularFile, 5));
        let again = open(
            &mut v,
            &scratch,
            "f",
            OpenFlags::empty(),
            DescriptorFlags::READ,
        )
        .unwrap();
        assert!(v.is_same_object(borrow(&f), borrow(&again)).unwrap());
        let ro_a = open(
            &mut v,
            &ro,
            "a.txt",
            OpenFlags::empty(),
            DescriptorFlags::READ,
        )
        .unwrap();
        assert!(!v.is_same_object(borrow(&f), borrow(&ro_a)).unwrap());
        v.rename_at(borrow(&scratch), "f".into(), borrow(&scratch), "g".into())
            .unwrap()
            .unwrap();
        assert_eq!(
            hash(&mut v, &scratch, "g"),
            after,
            "a rename keeps the inode"
        );
    }

    #[test]
    fn a_stream_write_over_the_cap_fails_with_insufficient_space() {
        use wasmtime_wasi_io::streams::StreamError;
        let (mut fs, mut table, scratch) = setup();
        let mut v = VfsView {
            fs: &mut fs,
            table: &mut table,
        };
        let (ro, root) = roots(&mut v);
        let f = open(
            &mut v,
            &root,
            "out.bin",
            OpenFlags::CREATE | OpenFlags::TRUNCATE,
            DescriptorFlags::WRITE,
        )
        .unwrap();
        let w = v.write_via_stream(borrow(&f), 0).unwrap().unwrap();
        let stream = v.table.get_mut(&w).unwrap();
        stream.write(Bytes::from(vec![1u8; 100])).unwrap();
        let err = stream.write(Bytes::from_static(b"x")).unwrap_err();
        let StreamError::LastOperationFailed(e) = err else {
            panic!("not a failed operation: {err:?}");
        };
        let e = v.table.push(e).unwrap();
        assert_eq!(
            v.filesystem_error_code(e).unwrap(),
            Some(ErrorCode::InsufficientSpace)
        );
        assert_eq!(
            scratch.limit_hit(),
            Some(crate::ScratchLimit::Bytes { cap: 100 })
        );
        // The ro mount's streams read what the file holds.
        let a = open(
            &mut v,
            &ro,
            "a.txt",
            OpenFlags::empty(),
            DescriptorFlags::READ,
        )
        .unwrap();
        let r = v.read_via_stream(borrow(&a), 1).unwrap().unwrap();
        let stream = v.table.get_mut(&r).unwrap();
        assert_eq!(&stream.read(100).unwrap()[..], b"ello");
        assert!(matches!(stream.read(100), Err(StreamError::Closed)));
    }

    #[test]
    fn folders_list_in_name_order() {
        let (mut fs, mut table, _) = setup();
        let mut v = VfsView {
            fs: &mut fs,
            table: &mut table,
        };
        let (ro, scratch) = roots(&mut v);
        for (dir, want) in [(&ro, vec!["a.txt", "d"])] {
            let s = v.read_directory(borrow(dir)).unwrap().unwrap();
            let mut names = Vec::new();
            while let Some(e) = v
                .read_directory_entry(Resource::new_borrow(s.rep()))
                .unwrap()
                .unwrap()
            {
                names.push(e.name);
            }
            assert_eq!(names, want);
        }
        open(
            &mut v,
            &scratch,
            "z",
            OpenFlags::CREATE,
            DescriptorFlags::WRITE,
        )
        .unwrap();
        v.create_directory_at(borrow(&scratch), "a".into())
            .unwrap()
            .unwrap();
        let s = v.read_directory(borrow(&scratch)).unwrap().unwrap();
        let first = v
            .read_directory_entry(Resource::new_borrow(s.rep()))
            .unwrap()
            .unwrap()
            .unwrap();
        assert_eq!(
            (first.name.as_str(), first.type_),
            ("a", DescriptorType::Directory)
        );
        let flags = v.get_flags(borrow(&scratch)).unwrap().unwrap();
        assert!(flags.contains(DescriptorFlags::MUTATE_DIRECTORY));
        let flags = v.get_flags(borrow(&ro)).unwrap().unwrap();
        assert!(!flags.contains(DescriptorFlags::MUTATE_DIRECTORY));
    }

    #[test]
    fn an_empty_filesystem_has_no_folder() {
        let mut fs = Vfs::default();
        let mut table = ResourceTable::new();
        let mut v = VfsView {
            fs: &mut fs,
            table: &mut table,
        };
        assert!(v.get_directories().unwrap().is_empty());
        assert!(fs.touched());
    }
}
