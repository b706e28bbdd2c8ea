//! A Python wheel checked before anything of it is kept: pure Python only
//! (or, for a package the skill lets drop its native parts, those parts
//! left out), every path inside the package's folders, no `.pth` file
//! (it runs code when the interpreter starts), every file listed in
//! `RECORD` with its digest. An sdist is refused: building it would run
//! its setup code.

use super::package_error::PackageError;
use std::io::{Cursor, Read};

use base64::Engine as _;
use sha2::{Digest, Sha256};

use super::requirements::normalize_package_name;
use crate::limits::{MAX_WHEEL_BYTES, MAX_WHEEL_FILES, MAX_WHEEL_UNPACKED_BYTES};

/// File endings of native code the sandbox cannot load.
const NATIVE: &[&str] = &[
    ".so", ".pyd", ".dylib", ".dll", ".a", ".lib", ".wasm", ".exe",
];

/// A wheel's file name, read: `NAME-VERSION(-BUILD)?-PY-ABI-PLATFORM.whl`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WheelName {
    /// The package's normalized name.
    pub name: String,
    /// Its version.
    pub version: String,
    /// Whether its tags say pure Python (`py3-none-any`,
    /// `py2.py3-none-any`, `py3X-none-any`, `cp314-none-any`).
    pub pure: bool,
}

impl WheelName {
    /// Reads a wheel's file name; an sdist or anything else is an error
    /// that says why.
    ///
    /// ```
    /// let w = skillhost::WheelName::parse("pypdf-5.1.0-py3-none-any.whl").unwrap();
    /// assert!(w.pure);
    /// let err = skillhost::WheelName::parse("pypdf-5.1.0.tar.gz").unwrap_err();
    /// assert!(err.to_string().contains("setup code"));
    /// ```
    pub fn parse(file: &str) -> Result<WheelName, PackageError> {
        if file.ends_with(".tar.gz") || file.ends_with(".zip") || file.ends_with(".tar.bz2") {
            return Err(PackageError::wheel(format!(
                "{file} is a source distribution: building it would run its setup code, so only \
                 wheels are taken"
            )));
        }
        let stem = file
            .strip_suffix(".whl")
            .ok_or_else(|| PackageError::wheel(format!("{file} is not a wheel (`.whl`)")))?;
        let parts: Vec<&str> = stem.split('-').collect();
        let (name, version, py, abi, plat) = match parts.as_slice() {
            [n, v, py, abi, plat] | [n, v, _, py, abi, plat] => (*n, *v, *py, *abi, *plat),
            _ => {
                return Err(PackageError::wheel(format!(
                    "{file}: not a wheel's file name"
                )));
            }
        };
        if !super::requirements::valid_package_name(name) || version.is_empty() {
            return Err(PackageError::wheel(format!(
                "{file}: not a wheel's file name"
            )));
        }
        let pure_py = py.split('.').all(|t| {
            t == "py3"
                || t == "py2"
                || t == "cp314"
                || t.strip_prefix("py3")
                    .and_then(|minor| minor.parse::<u32>().ok())
                    .is_some_and(|m| m <= 14)
        }) && py.split('.').any(|t| t != "py2");
        Ok(WheelName {
            name: normalize_package_name(name),
            version: version.to_string(),
            pure: pure_py && abi == "none" && plat == "any",
        })
    }
}

/// A wheel that passed every check: its files to unpack, by path.
#[derive(Debug, Clone)]
pub struct CheckedWheel {
    /// Its name, version, tags.
    pub name: WheelName,
    /// Every file to unpack (native files dropped when allowed), by path.
    pub files: Vec<(String, Vec<u8>)>,
    /// The native files dropped (with `drop_native`).
    pub dropped: Vec<String>,
    /// The `Requires-Dist` lines of its metadata.
    pub requires: Vec<String>,
}

/// Checks the wheel `file` (its bytes `bytes`); `drop_native` lets a
/// platform wheel in with its native files left out. An error names the
/// package, version and file at fault.
pub fn check_wheel(
    file: &str,
    bytes: &[u8],
    drop_native: bool,
) -> Result<CheckedWheel, PackageError> {
    let name = WheelName::parse(file)?;
    let who = format!("{} {}", name.name, name.version);
    if bytes.len() as u64 > MAX_WHEEL_BYTES {
        return Err(PackageError::wheel(format!(
            "{who}: the wheel is {} bytes, over the cap of {MAX_WHEEL_BYTES}",
            bytes.len()
        )));
    }
    if !name.pure && !drop_native {
        return Err(PackageError::wheel(format!(
            "{who} has no pure-Python wheel ({file} is built for one platform): the sandbox runs \
             pure Python only (a package whose native part is optional may be let in with \
             `scripts.python.drop_native: [{}]`)",
            name.name
        )));
    }
    let mut zip = zip::ZipArchive::new(Cursor::new(bytes))
        .map_err(|e| PackageError::wheel(format!("{who}: {file} is not a zip archive: {e}")))?;
    if zip.len() > MAX_WHEEL_FILES {
        return Err(PackageError::wheel(format!(
            "{who}: {} files, over the cap of {MAX_WHEEL_FILES}",
            zip.len()
        )));
    }
    let mut files: Vec<(String, Vec<u8>)> = Vec::new();
    let mut total: u64 = 0;
    for i in 0..zip.len() {
        let mut entry = zip
            .by_index(i)
            .map_err(|e| PackageError::wheel(format!("{who}: cannot read entry {i}: {e}")))?;
        let path = entry
            .name()
            .map_err(|e| {
                PackageError::wheel(format!("{who}: entry {i} has no readable name: {e}"))
            })?
            .to_string();
        if entry.is_dir() {
            continue;
        }
        check_path(&who, &path)?;
        if entry.is_symlink() {
            return Err(PackageError::wheel(format!(
                "{who}: `{path}` is a symbolic link"
            )));
        }
        let mut data = Vec::new();
        (&mut entry)
            .take(MAX_WHEEL_UNPACKED_BYTES.saturating_sub(total) + 1)
            .read_to_end(&mut data)
            .map_err(|e| PackageError::wheel(format!("{who}: cannot read `{path}`: {e}")))?;
        total += data.len() as u64;
        if total > MAX_WHEEL_UNPACKED_BYTES {
            return Err(PackageError::wheel(format!(
                "{who}: unpacks to more than the cap of {MAX_WHEEL_UNPACKED_BYTES} bytes"
            )));
        }
        if files.iter().any(|(p, _)| *p == path) {
            return Err(PackageError::wheel(format!(
                "{who}: `{path}` is in the wheel twice"
            )));
        }
        files.push((path, data));
    }
    let dist_info = files
        .iter()
        .find_map(|(p, _)| {
            let (dir, rest) = p.split_once('/')?;
            (dir.ends_with(".dist-info") && rest == "RECORD").then(|| dir.to_string())
        })
        .ok_or_else(|| {
            PackageError::wheel(format!("{who}: the wheel has no `*.dist-info/RECORD`"))
        })?;
    let read = |suffix: &str| {
        files
            .iter()
            .find(|(p, _)| *p == format!("{dist_info}/{suffix}"))
            .map(|(_, d)| String::from_utf8_lossy(d).into_owned())
    };
    let record = read("RECORD").unwrap_or_default();
    let wheel_meta = read("WHEEL")
        .ok_or_else(|| PackageError::wheel(format!("{who}: no `{dist_info}/WHEEL`")))?;
    let purelib = wheel_meta.lines().any(|l| {
        l.replace(' ', "")
            .eq_ignore_ascii_case("Root-Is-Purelib:true")
    });
    if !purelib && !drop_native {
        return Err(PackageError::wheel(format!(
            "{who}: its WHEEL says `Root-Is-Purelib: false` (built for one platform): the \
             sandbox runs pure Python only"
        )));
    }
    // RECORD: every file listed, with its digest (RECORD itself and
    // signatures listed without one).
    let mut listed = std::collections::BTreeMap::new();
    for line in record.lines().filter(|l| !l.trim().is_empty()) {
        let mut cols = line.rsplitn(3, ',');
        let (_size, hash, path) = (cols.next(), cols.next(), cols.next());
        let (Some(hash), Some(path)) = (hash, path) else {
            return Err(PackageError::wheel(format!(
                "{who}: a RECORD line is not `path,hash,size`: {line}"
            )));
        };
        listed.insert(path.trim_matches('"').to_string(), hash.to_string());
    }
    let mut requires = Vec::new();
    if let Some(meta) = read("METADATA") {
        for l in meta.lines() {
            if l.is_empty() {
                break;
            }
            if let Some(r) = l.strip_prefix("Requires-Dist:") {
                requires.push(r.trim().to_string());
            }
        }
    }
    let mut kept = Vec::new();
    let mut dropped = Vec::new();
    for (path, data) in files {
        let unsigned = path == format!("{dist_info}/RECORD")
            || path.starts_with(&format!("{dist_info}/RECORD."));
        match listed.get(&path) {
            None if !unsigned => {
                return Err(PackageError::wheel(format!(
                    "{who}: `{path}` is not listed in RECORD"
                )));
            }
            Some(hash) if !unsigned => {
                let want = hash.strip_prefix("sha256=").ok_or_else(|| {
                    PackageError::wheel(format!("{who}: RECORD gives `{path}` no sha256 digest"))
                })?;
                let got =
                    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(Sha256::digest(&data));
                if want != got {
                    return Err(PackageError::wheel(format!(
                        "{who}: `{path}` does not match its RECORD digest (the wheel was altered)"
                    )));
                }
            }
            _ => {}
        }
        let lower = path.to_ascii_lowercase();
        if lower.ends_with(".pth") {
            return Err(PackageError::wheel(format!(
                "{who} ships `{path}`, a .pth file (it runs code whenever Python starts): refused"
            )));
        }
        if NATIVE.iter().any(|n| lower.ends_with(n)) || lower.contains(".so.") {
            if drop_native {
                dropped.push(path);
                continue;
            }
            return Err(PackageError::wheel(format!(
                "{who} ships native code ({path}): the sandbox runs pure Python only"
            )));
        }
        if let Some(rest) = path.strip_prefix(&format!(
            "{}-{}.data/",
            wheel_dir_name(&dist_info),
            name.version
        )) {
            let kind = rest.split('/').next().unwrap_or_default();
            if kind != "purelib" && kind != "platlib" {
                return Err(PackageError::wheel(format!(
                    "{who} installs `{path}` outside the package folders ({kind}): refused"
                )));
            }
        }
        kept.push((path, data));
    }
    Ok(CheckedWheel {
        name,
        files: kept,
        dropped,
        requires,
    })
}

/// The `NAME` of `NAME-VERSION.dist-info`.
fn wheel_dir_name(dist_info: &str) -> &str {
    dist_info
        .strip_suffix(".dist-info")
        .and_then(|s| s.rsplit_once('-'))
        .map(|(n, _)| n)
        .unwrap_or(dist_info)
}

/// A wheel entry's path stays inside: relative, `/`-separated, no empty,
/// `.` or `..` component, no NUL or control character.
fn check_path(who: &str, path: &str) -> Result<(), PackageError> {
    let bad = path.is_empty()
        || path.starts_with('/')
        || path.contains('\\')
        || path.contains(':')
        || path
            .split('/')
            .any(|c| c.is_empty() || c == "." || c == "..")
        || path.chars().any(|c| c.is_control());
    if bad {
        return Err(PackageError::wheel(format!(
            "{who}: the entry `{}` would land outside the package folder: refused",
            crate::escape::escape_control(path, 200, false)
        )));
    }
    Ok(())
}

/// Where a checked wheel's files go in the packages folder: `.data/purelib/`
/// and `.data/platlib/` at its root, everything else as it is.
pub fn unpacked_path(path: &str) -> String {
    if let Some((dir, rest)) = path.split_once('/')
        && dir.ends_with(".data")
        && let Some(inner) = rest
            .strip_prefix("purelib/")
            .or_else(|| rest.strip_prefix("platlib/"))
    {
        return inner.to_string();
    }
    path.to_string()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::io::Write as _;

    /// A wheel holding `files` (a RECORD made for them unless `record`).
    pub(crate) fn wheel(files: &[(&str, &[u8])], record: Option<&str>, purelib: bool) -> Vec<u8> {
        let mut zip = zip::ZipWriter::new(Cursor::new(Vec::new()));
        let opts = zip::write::SimpleFileOptions::default();
        let mut lines = String::new();
        let mut all: Vec<(String, Vec<u8>)> = files
            .iter()
            .map(|(p, d)| (p.to_string(), d.to_vec()))
            .collect();
        all.push((
            "demo-1.0.dist-info/WHEEL".into(),
            format!("Wheel-Version: 1.0\nRoot-Is-Purelib: {purelib}\nTag: py3-none-any\n")
                .into_bytes(),
        ));
        all.push((
            "demo-1.0.dist-info/METADATA".into(),
            b"Metadata-Version: 2.1\nName: demo\nVersion: 1.0\nRequires-Dist: other>=1\n\nbody\n"
                .to_vec(),
        ));
        for (p, d) in &all {
            let h = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(Sha256::digest(d));
            lines.push_str(&format!("{p},sha256={h},{}\n", d.len()));
        }
        lines.push_str("demo-1.0.dist-info/RECORD,,\n");
        all.push((
            "demo-1.0.dist-info/RECORD".into(),
            record.map(str::to_string).unwrap_or(lines).into_bytes(),
        ));
        for (p, d) in &all {
            zip.start_file(p.as_str(), opts).unwrap();
            zip.write_all(d).unwrap();
        }
        zip.finish().unwrap().into_inner()
    }

    #[test]
    fn a_pure_wheel_passes_with_its_requirements() {
        let w = wheel(&[("demo/__init__.py", b"x = 1\n")], None, true);
        let c = check_wheel("demo-1.0-py3-none-any.whl", &w, false).unwrap();
        assert_eq!(c.requires, vec!["other>=1".to_string()]);
        assert!(c.files.iter().any(|(p, _)| p == "demo/__init__.py"));
    }

    #[test]
    fn every_bad_wheel_is_refused_naming_package_and_file() {
        let so: &[u8] = b"\x7fELF";
        for (file, bytes, drop, want) in [
            (
                "demo-1.0-py3-none-any.whl",
                wheel(
                    &[("demo/_speed.cpython-314-x86_64-linux-gnu.so", so)],
                    None,
                    true,
                ),
                false,
                "demo 1.0 ships native code (demo/_speed.cpython-314-x86_64-linux-gnu.so)",
            ),
            (
                "demo-1.0-py3-none-any.whl",
                wheel(&[("demo-init.pth", b"import os")], None, true),
                false,
                "a .pth file",
            ),
            (
                "demo-1.0-py3-none-any.whl",
                wheel(&[("../evil.py", b"x")], None, true),
                false,
                "outside the package folder",
            ),
            (
                "demo-1.0-py3-none-any.whl",
                wheel(&[("/abs.py", b"x")], None, true),
                false,
                "outside the package folder",
            ),
            (
                "demo-1.0-py3-none-any.whl",
                wheel(
                    &[("demo/a.py", b"x")],
                    Some("demo/a.py,sha256=AAAA,1\n"),
                    true,
                ),
                false,
                "does not match its RECORD digest",
            ),
            (
                "demo-1.0-py3-none-any.whl",
                wheel(
                    &[("demo/a.py", b"x")],
                    Some("demo-1.0.dist-info/RECORD,,\n"),
                    true,
                ),
                false,
                "is not listed in RECORD",
            ),
            (
                "demo-1.0-cp314-cp314-manylinux_2_17_x86_64.whl",
                wheel(&[("demo/a.py", b"x")], None, false),
                false,
                "has no pure-Python wheel",
            ),
            (
                "demo-1.0-py3-none-any.whl",
                wheel(&[("demo-1.0.data/scripts/run", b"#!/bin/sh")], None, true),
                false,
                "outside the package folders (scripts)",
            ),
            ("demo-1.0.tar.gz", Vec::new(), false, "source distribution"),
            (
                "demo-1.0-py3-none-any.whl",
                b"not a zip".to_vec(),
                false,
                "not a zip",
            ),
        ] {
            let err = check_wheel(file, &bytes, drop).unwrap_err().to_string();
            assert!(err.contains(want), "{file}: {err}");
        }
    }

    #[test]
    fn drop_native_leaves_the_native_files_out() {
        let w = wheel(
            &[
                ("yaml/__init__.py", b"x = 1\n"),
                ("yaml/_yaml.cpython-314-x86_64-linux-gnu.so", b"\x7fELF"),
            ],
            None,
            false,
        );
        let file = "pyyaml-6.0.4-cp314-cp314-manylinux2014_x86_64.whl";
        assert!(check_wheel(file, &w, false).is_err());
        let c = check_wheel(file, &w, true).unwrap();
        assert_eq!(
            c.dropped,
            vec!["yaml/_yaml.cpython-314-x86_64-linux-gnu.so".to_string()]
        );
        assert!(c.files.iter().all(|(p, _)| !p.ends_with(".so")));
    }

    #[test]
    fn wheel_names_and_tags() {
        for (file, pure) in [
            ("pypdf-7.1.1-py3-none-any.whl", true),
            ("defusedxml-0.7.1-py2.py3-none-any.whl", true),
            ("x-1-py311-none-any.whl", true),
            ("x-1-1build-py3-none-any.whl", true),
            ("x-1-py2-none-any.whl", false),
            ("x-1-py315-none-any.whl", false),
            ("x-1-cp314-cp314-win_amd64.whl", false),
        ] {
            assert_eq!(WheelName::parse(file).unwrap().pure, pure, "{file}");
        }
        assert_eq!(unpacked_path("x-1.data/purelib/x/a.py"), "x/a.py");
        assert_eq!(unpacked_path("x/a.py"), "x/a.py");
    }
}
