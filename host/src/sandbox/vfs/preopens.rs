//! The `wasi:filesystem/preopens` host: the call's mounts, each a folder
//! descriptor named by its path in the guest (`/assets`, `/python`,
//! `/skill`, `/pycache`, `/scratch`). A call without mounts has an empty
//! filesystem: every absolute path is not found.

use wasmtime::component::Resource;

use super::VfsView;
use super::bindings::preopens;
use super::descriptor::Descriptor;

impl preopens::Host for VfsView<'_> {
    fn get_directories(&mut self) -> wasmtime::Result<Vec<(Resource<Descriptor>, String)>> {
        self.fs.touched = true;
        let mut out = Vec::with_capacity(self.fs.mounts.len());
        for mount in &self.fs.mounts {
            let fd = self.table.push(Descriptor::root(&mount.root))?;
            out.push((fd, mount.path.clone()));
        }
        Ok(out)
    }
}
