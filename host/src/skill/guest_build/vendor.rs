//! The packages a Python skill carries. The component's CPython imports
//! only what the build hands componentize-py: the skill folder, its
//! `vendor/` folder (where `pip install --target vendor` puts pure-Python
//! packages) and the SDK. A native extension module built for this
//! machine (an ELF, Mach-O or PE shared object: a platform wheel's
//! `.so`/`.pyd`) cannot load in a WebAssembly CPython, so a folder holding
//! one is refused before anything is built, naming the file; one built for
//! WebAssembly (its bytes start as a module's do) is componentize-py's to
//! link.

use std::io::Read as _;
use std::path::{Path, PathBuf};

use crate::limits::MAX_BUILD_SOURCE_FILES;

/// The folder of a Python skill whose packages are on the module path
/// after the skill folder itself.
pub const PYTHON_VENDOR_DIR: &str = "vendor";

/// How the build names the files of [`PYTHON_VENDOR_DIR`] to the author.
pub(super) const VENDOR_SHOWN: &str = "vendor/";

/// Folders never searched: build output, environments, caches.
const SKIPPED: &[&str] = &[
    "target",
    "node_modules",
    "__pycache__",
    ".venv",
    "venv",
    "assets",
];

/// The `vendor/` folder of `dir`, when it has one.
pub(super) fn python_vendor(dir: &Path) -> Option<PathBuf> {
    let v = dir.join(PYTHON_VENDOR_DIR);
    v.is_dir().then_some(v)
}

/// The first native extension module for another machine than a
/// WebAssembly one under `dir` (`/`-separated, relative to it), if any.
pub(super) fn native_extension(dir: &Path) -> Option<String> {
    let mut seen = 0;
    find(dir, dir, 0, &mut seen)
}

fn find(root: &Path, dir: &Path, depth: usize, seen: &mut usize) -> Option<String> {
    if depth > 16 {
        return None;
    }
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        *seen += 1;
        if *seen > MAX_BUILD_SOURCE_FILES {
            return None;
        }
        let name = entry.file_name().to_string_lossy().into_owned();
        let Ok(ty) = entry.file_type() else { continue };
        let path = entry.path();
        if ty.is_dir() {
            if !name.starts_with('.')
                && !SKIPPED.contains(&name.as_str())
                && let Some(found) = find(root, &path, depth + 1, seen)
            {
                return Some(found);
            }
        } else if ty.is_file() && is_extension_name(&name) && is_native(&path) {
            let rel = path.strip_prefix(root).unwrap_or(&path);
            return Some(
                rel.components()
                    .map(|c| c.as_os_str().to_string_lossy())
                    .collect::<Vec<_>>()
                    .join("/"),
            );
        }
    }
    None
}

/// Whether a file is named as a Python extension module is.
fn is_extension_name(name: &str) -> bool {
    [".so", ".pyd", ".dylib"].iter().any(|x| name.ends_with(x))
}

/// Whether the file at `path` is a shared object of a machine (ELF, Mach-O,
/// PE), not a WebAssembly module.
fn is_native(path: &Path) -> bool {
    let mut head = [0u8; 4];
    let n = std::fs::File::open(path)
        .and_then(|mut f| f.read(&mut head))
        .unwrap_or(0);
    let head = &head[..n];
    head.starts_with(b"\x7fELF")
        || head.starts_with(b"MZ")
        || [
            [0xfe, 0xed, 0xfa, 0xce],
            [0xfe, 0xed, 0xfa, 0xcf],
            [0xce, 0xfa, 0xed, 0xfe],
            [0xcf, 0xfa, 0xed, 0xfe],
            [0xca, 0xfe, 0xba, 0xbe],
        ]
        .iter()
        .any(|m| head == m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vendored_files_are_named_by_their_folder() {
        assert_eq!(VENDOR_SHOWN, format!("{PYTHON_VENDOR_DIR}/"));
    }

    #[test]
    fn a_machine_s_shared_object_is_found_a_wasm_one_is_not() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("vendor/pkg")).unwrap();
        std::fs::write(d.path().join("vendor/pkg/__init__.py"), "").unwrap();
        std::fs::write(
            d.path().join("vendor/pkg/_w.cpython-314-wasm32-wasi.so"),
            b"\0asm\x01\0\0\0",
        )
        .unwrap();
        assert_eq!(native_extension(d.path()), None);
        std::fs::create_dir_all(d.path().join(".venv/lib")).unwrap();
        std::fs::write(d.path().join(".venv/lib/x.so"), b"\x7fELF").unwrap();
        assert_eq!(
            native_extension(d.path()),
            None,
            "an environment is not the skill's"
        );
        std::fs::write(
            d.path()
                .join("vendor/pkg/_n.cpython-311-x86_64-linux-gnu.so"),
            b"\x7fELF\x02",
        )
        .unwrap();
        assert_eq!(
            native_extension(d.path()).as_deref(),
            Some("vendor/pkg/_n.cpython-311-x86_64-linux-gnu.so")
        );
    }
}
