//! The in-memory filesystem every component's `wasi:filesystem` is linked
//! to, in place of wasmtime-wasi's (which maps host folders, with no cap
//! on what a guest writes into them).
//!
//! A call's filesystem ([`Vfs`]) is a list of mounts, each a folder the
//! guest finds by its path (`get-directories`):
//!
//! - read-only trees ([`tree`]), built once and shared by every call that
//!   shows them: a skill's assets at `/assets` ([`AssetsFolder`]), and for
//!   a script call the standard library at `/python`, the skill's folder
//!   at `/skill`, byte-code at `/pycache`. Every change is `not-permitted`;
//! - the call's scratch folder ([`scratch`]) at `/scratch`: writable, in
//!   host memory, made for the call and dropped with it, every create,
//!   write and resize checked against its caps.
//!
//! No path leads out of a mount: an absolute path is resolved by the
//! guest's libc against the mounts, a relative one from a folder
//! descriptor, `..` never goes above that folder, and there are no
//! symbolic links. Nothing any guest does reaches the host's disk.
//!
//! One file per concept: `name.rs` (the name rules), `tree.rs`,
//! `scratch.rs`, `descriptor.rs` (the `wasi:filesystem/types` host),
//! `streams.rs` (file streams), `preopens.rs`, `assets.rs`,
//! `bindings.rs` (generated from `wit/`).

mod assets;
mod bindings;
mod descriptor;
pub(crate) mod name;
mod preopens;
pub(crate) mod scratch;
mod streams;
pub(crate) mod tree;

use std::sync::Arc;

use wasmtime::component::{HasData, Linker, ResourceTable};

pub use assets::AssetsFolder;
pub(crate) use scratch::Scratch;
pub use scratch::ScratchLimit;
pub(crate) use tree::RoDir;

/// A filesystem error a guest gets (a subset of `wasi:filesystem`'s
/// `error-code`, named as POSIX names them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Errno {
    /// `EPERM`: a change to a read-only mount, `..` above a folder, an
    /// absolute path, a link.
    NotPermitted,
    /// `ENOENT`.
    NoEntry,
    /// `EEXIST`.
    Exist,
    /// `ENOTDIR`.
    NotDirectory,
    /// `EISDIR`.
    IsDirectory,
    /// `ENOTEMPTY`.
    NotEmpty,
    /// `EINVAL` (a name with a control character among others).
    Invalid,
    /// `ENAMETOOLONG`.
    NameTooLong,
    /// `ENOSPC`: a scratch cap.
    InsufficientSpace,
    /// `EBADF`: a descriptor not opened for what is asked.
    BadDescriptor,
    /// `EXDEV`: a rename between two mounts.
    CrossDevice,
}

impl std::fmt::Display for Errno {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Errno::NotPermitted => "not permitted",
            Errno::NoEntry => "no such file or folder",
            Errno::Exist => "already there",
            Errno::NotDirectory => "a file where a folder should be",
            Errno::IsDirectory => "a folder where a file should be",
            Errno::NotEmpty => "the folder is not empty",
            Errno::Invalid => "invalid",
            Errno::NameTooLong => "the name is too long",
            Errno::InsufficientSpace => "no space left",
            Errno::BadDescriptor => "not opened for that",
            Errno::CrossDevice => "another mount",
        })
    }
}

impl std::fmt::Display for scratch::PutError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            scratch::PutError::Name(e) => write!(f, "{e}"),
            scratch::PutError::Limit(l) => write!(f, "over {l}"),
            scratch::PutError::Errno(e) => write!(f, "{e}"),
        }
    }
}

/// One folder of a call's filesystem.
#[derive(Clone)]
pub(crate) struct Mount {
    /// Where the guest finds it (`/assets`).
    pub path: String,
    /// What it is.
    pub root: MountRoot,
}

/// What a mount shows.
#[derive(Clone)]
pub(crate) enum MountRoot {
    /// A read-only tree.
    ReadOnly(Arc<RoDir>),
    /// The call's scratch folder.
    Scratch(Scratch),
}

/// A call's filesystem: its mounts. `Vfs::default()` has none (an empty
/// filesystem).
#[derive(Clone, Default)]
pub(crate) struct Vfs {
    mounts: Vec<Mount>,
    /// Whether the guest asked for the mounts (so it may hold descriptors
    /// on them).
    touched: bool,
}

impl Vfs {
    /// A filesystem of `mounts`.
    pub fn new(mounts: Vec<Mount>) -> Vfs {
        Vfs {
            mounts,
            touched: false,
        }
    }

    /// Whether the guest has asked for the mounts: until then it holds no
    /// descriptor, and another call's filesystem may replace this one.
    pub fn touched(&self) -> bool {
        self.touched
    }
}

/// What the filesystem's host functions see of a call's store.
pub(crate) struct VfsView<'a> {
    /// The call's filesystem.
    pub fs: &'a mut Vfs,
    /// The store's resource table.
    pub table: &'a mut ResourceTable,
}

/// Selects [`VfsView`] as what the generated bindings act on.
pub(crate) struct VfsHost;

impl HasData for VfsHost {
    type Data<'a> = VfsView<'a>;
}

/// Links `wasi:filesystem/{types,preopens}` to this filesystem.
pub(crate) fn add_to_linker<T: Send + 'static>(
    linker: &mut Linker<T>,
    view: fn(&mut T) -> VfsView<'_>,
) -> wasmtime::Result<()> {
    bindings::types::add_to_linker::<T, VfsHost>(linker, view)?;
    bindings::preopens::add_to_linker::<T, VfsHost>(linker, view)?;
    Ok(())
}
