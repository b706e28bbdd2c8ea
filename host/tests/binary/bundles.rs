//! Hostile bundles against the real `skillhost` binary: every crafted
//! archive, statement and signature is refused with one stderr line naming
//! the entry and the reason, and the data dir is byte-for-byte unchanged
//! afterwards (every path with its size and sha256, plus the output of
//! `skillhost skills list --json`).
//!
//! Archives are built with the `zip` crate's writer, then patched byte by
//! byte where the writer cannot produce the hostile form.

use crate::common;
use common::{skillhost, stderr, stdout};

use std::collections::BTreeMap;
use std::io::{Cursor, Read, Write};
use std::path::{Path, PathBuf};
use std::process::Output;

use base64::Engine as _;
use sha2::{Digest, Sha256};
use skillhost::{FileEntry, PublicKey, SIGNATURE_PATH, STATEMENT_PATH, SecretKey, Statement};
use skillhost_test_plugins as art;
use zip::write::SimpleFileOptions;
use zip::{CompressionMethod, DateTime, ZipWriter};

/// The skill every bundle here carries (the json-tools plugin).
const SKILL: &str = "json-tools";
/// Its component, as named by its manifest.
const COMPONENT: &str = "json_tools.wasm";
const LIMIT: u64 = 25 << 20;

// ---------------------------------------------------------------------------
// Running the binary against a temp data dir.
// ---------------------------------------------------------------------------

/// Everything observable about a data dir: every path under it (symlinks
/// not followed) with its size and sha256 (or link target), and what
/// `skills list --json` prints.
#[derive(Debug, PartialEq, Eq)]
struct Snapshot {
    paths: BTreeMap<String, String>,
    list: String,
}

fn walk(root: &Path, rel: &Path, out: &mut BTreeMap<String, String>) {
    let dir = root.join(rel);
    let mut entries: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .map(|e| e.expect("dir entry"))
        .collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let rel = rel.join(e.file_name());
        let key = rel.to_string_lossy().into_owned();
        if matches!(
            key.as_str(),
            "skillhost.db-wal" | "skillhost.db-shm" | "skills/.lock"
        ) {
            continue;
        }
        let meta = std::fs::symlink_metadata(e.path()).expect("metadata");
        let value = if meta.file_type().is_symlink() {
            format!(
                "symlink -> {}",
                std::fs::read_link(e.path()).expect("readlink").display()
            )
        } else if meta.is_dir() {
            walk(root, &rel, out);
            "dir".to_string()
        } else {
            let bytes = std::fs::read(e.path()).expect("read file");
            format!(
                "{} bytes sha256 {}",
                bytes.len(),
                hex::encode(Sha256::digest(&bytes))
            )
        };
        out.insert(key, value);
    }
}

/// A temp data dir, plus a work folder for bundle and key files.
struct Host {
    _tmp: tempfile::TempDir,
    data: PathBuf,
    work: PathBuf,
}

impl Host {
    /// A fresh, initialised data dir.
    fn new() -> Host {
        let tmp = tempfile::tempdir().expect("tempdir");
        let data = tmp.path().join("data");
        let work = tmp.path().join("work");
        std::fs::create_dir(&work).expect("work dir");
        let host = Host {
            _tmp: tmp,
            data,
            work,
        };
        let o = host.run(&["skills", "list", "--json"]);
        assert!(o.status.success(), "{}", stderr(&o));
        host
    }

    /// A fresh data dir trusting `publisher`.
    fn trusting(publisher: &Publisher) -> Host {
        let host = Host::new();
        host.trust(publisher, "alice", None);
        host
    }

    fn run(&self, args: &[&str]) -> Output {
        skillhost(&self.data, args)
    }

    fn trust(&self, p: &Publisher, label: &str, for_skill: Option<&str>) {
        let file = self.work.join(format!("{label}.pub"));
        std::fs::write(&file, p.public.to_file_text()).expect("write .pub");
        let mut args = vec!["trust", "add", file.to_str().unwrap(), "--name", label];
        if let Some(s) = for_skill {
            args.extend(["--for", s]);
        }
        let o = self.run(&args);
        assert!(o.status.success(), "trust add: {}", stderr(&o));
    }

    fn write_bundle(&self, bytes: &[u8]) -> PathBuf {
        let file = self.work.join("bundle.skill");
        std::fs::write(&file, bytes).expect("write bundle");
        file
    }

    fn install(&self, bytes: &[u8], flags: &[&str]) -> Output {
        let file = self.write_bundle(bytes);
        let mut args = vec!["install", file.to_str().unwrap()];
        args.extend_from_slice(flags);
        self.run(&args)
    }

    fn verify(&self, bytes: &[u8]) -> Output {
        let file = self.write_bundle(bytes);
        self.run(&["verify", file.to_str().unwrap()])
    }

    fn snapshot(&self) -> Snapshot {
        let mut paths = BTreeMap::new();
        walk(&self.data, Path::new(""), &mut paths);
        let o = self.run(&["skills", "list", "--json"]);
        assert!(o.status.success(), "skills list: {}", stderr(&o));
        Snapshot {
            paths,
            list: stdout(&o),
        }
    }

    /// The managed entry of `name` in `skills list --json`, if any.
    fn listed(&self, name: &str) -> Option<serde_json::Value> {
        let o = self.run(&["skills", "list", "--json"]);
        assert!(o.status.success(), "{}", stderr(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("list is JSON");
        v.as_array()
            .expect("list is an array")
            .iter()
            .find(|e| e["name"] == name && e["source"] == "managed")
            .cloned()
    }

    fn installed_ok(&self, bytes: &[u8], flags: &[&str]) {
        let o = self.install(bytes, flags);
        assert!(o.status.success(), "install failed: {}", stderr(&o));
    }
}

/// Asserts a refusal: exit 1, nothing on stdout, one stderr line holding
/// every one of `words`.
fn assert_refused(o: &Output, words: &[&str]) {
    let err = stderr(o);
    assert_eq!(
        o.status.code(),
        Some(1),
        "stdout: {} stderr: {err}",
        stdout(o)
    );
    assert!(o.stdout.is_empty(), "stdout: {}", stdout(o));
    assert_eq!(err.trim_end().lines().count(), 1, "not one line: {err}");
    for w in words {
        assert!(err.contains(w), "`{w}` not in: {err}");
    }
}

/// `skillhost install BUNDLE FLAGS` is refused with `words` and changes
/// nothing in the data dir.
fn install_refused(host: &Host, bundle: &[u8], flags: &[&str], words: &[&str]) {
    let before = host.snapshot();
    let o = host.install(bundle, flags);
    assert_refused(&o, words);
    assert_eq!(before, host.snapshot(), "the data dir changed");
}

/// `skillhost verify BUNDLE` is refused with `words` and changes nothing.
fn verify_refused(host: &Host, bundle: &[u8], words: &[&str]) {
    let before = host.snapshot();
    let o = host.verify(bundle);
    assert_refused(&o, words);
    assert_eq!(before, host.snapshot(), "the data dir changed");
}

/// Both the library (`open_bundle`) and `skillhost install` refuse.
fn refused_everywhere(bundle: &[u8], words: &[&str]) {
    let p = Publisher::new();
    let lib = match skillhost::open_bundle(bundle, |id| (id == p.id()).then(|| p.public.clone())) {
        Ok(b) => panic!(
            "open_bundle accepted a hostile bundle: {}@{} with files {:?}",
            b.statement.name,
            b.statement.version,
            b.files.keys().collect::<Vec<_>>()
        ),
        Err(e) => e.to_string(),
    };
    for w in words {
        assert!(lib.contains(w), "`{w}` not in the library error: {lib}");
    }
    let host = Host::trusting(&p);
    install_refused(&host, bundle, &[], words);
    verify_refused(&host, bundle, words);
}

// ---------------------------------------------------------------------------
// Publishers, skill folders and bundles.
// ---------------------------------------------------------------------------

struct Publisher {
    secret: SecretKey,
    public: PublicKey,
}

impl Publisher {
    fn new() -> Publisher {
        let (secret, public) = SecretKey::generate().expect("keygen");
        Publisher { secret, public }
    }
    fn id(&self) -> String {
        self.public.key_id()
    }
}

/// The json-tools skill's files (manifest with `version` set, component).
fn skill_files(version: &str) -> Vec<(String, Vec<u8>)> {
    let manifest = std::fs::read_to_string(Path::new(art::JSON_TOOLS_DIR).join("skill.yaml"))
        .expect("plugin manifest");
    let m = skillhost::SkillManifest::parse(&manifest).expect("valid manifest");
    assert_eq!(m.component.as_deref(), Some(COMPONENT));
    let manifest = manifest.replacen(
        &format!("version: {}", m.version),
        &format!("version: {version}"),
        1,
    );
    assert!(manifest.contains(&format!("version: {version}\n")));
    let wasm = std::fs::read(art::JSON_TOOLS_WASM_PATH).expect("built component");
    vec![
        ("skill.yaml".to_string(), manifest.into_bytes()),
        (COMPONENT.to_string(), wasm),
    ]
}

/// A valid bundle from `skillhost::pack_dir` over a copy of the plugin
/// folder at `version`.
fn pack(version: &str, key: Option<&Publisher>) -> Vec<u8> {
    let dir = tempfile::tempdir().expect("tempdir");
    for (name, bytes) in skill_files(version) {
        std::fs::write(dir.path().join(name), bytes).expect("write skill file");
    }
    let (bytes, statement) = skillhost::pack_dir(dir.path(), key.map(|p| &p.secret)).expect("pack");
    assert_eq!(statement.version.to_string(), version);
    bytes
}

/// The entries of a (valid) zip, in order.
fn unzip(bytes: &[u8]) -> Vec<(String, Vec<u8>)> {
    let mut z = zip::ZipArchive::new(Cursor::new(bytes)).expect("valid zip");
    (0..z.len())
        .map(|i| {
            let mut f = z.by_index(i).expect("entry");
            let mut data = Vec::new();
            f.read_to_end(&mut data).expect("inflate");
            (f.name().expect("utf-8 name").to_string(), data)
        })
        .collect()
}

fn opts() -> SimpleFileOptions {
    SimpleFileOptions::default()
        .compression_method(CompressionMethod::Deflated)
        .last_modified_time(DateTime::default())
        .unix_permissions(0o644)
}

fn stored() -> SimpleFileOptions {
    opts().compression_method(CompressionMethod::Stored)
}

/// Rebuilds a zip from (name, bytes), deflated, in the given order.
fn zip_entries(entries: &[(String, Vec<u8>)]) -> Vec<u8> {
    zip_with(entries, |_| {})
}

/// `entries` (deflated), then whatever `more` writes.
fn zip_with(
    entries: &[(String, Vec<u8>)],
    more: impl FnOnce(&mut ZipWriter<Cursor<Vec<u8>>>),
) -> Vec<u8> {
    let mut z = ZipWriter::new(Cursor::new(Vec::new()));
    for (name, data) in entries {
        z.start_file(name.as_str(), opts()).expect("start_file");
        z.write_all(data).expect("write");
    }
    more(&mut z);
    z.finish().expect("finish").into_inner()
}

/// A valid signed bundle's entries, then one hostile entry written by
/// `hostile`: whatever goes wrong is the hostile entry's fault.
fn with_hostile(hostile: impl FnOnce(&mut ZipWriter<Cursor<Vec<u8>>>)) -> Vec<u8> {
    let p = Publisher::new();
    zip_with(&unzip(&pack("1.0.0", Some(&p))), hostile)
}

fn add(z: &mut ZipWriter<Cursor<Vec<u8>>>, name: &str, data: &[u8], o: SimpleFileOptions) {
    z.start_file(name, o).expect("start_file");
    z.write_all(data).expect("write");
}

/// Statement + signature for `files`, built by hand (for manifests that
/// `pack_dir` itself would refuse, or statements that lie).
fn signed_entries(
    files: &[(String, Vec<u8>)],
    name: &str,
    version: &str,
    signer: Option<&str>,
    key: Option<&SecretKey>,
) -> Vec<(String, Vec<u8>)> {
    let listed = files
        .iter()
        .map(|(p, d)| FileEntry {
            path: p.clone(),
            size: d.len() as u64,
            sha256: hex::encode(Sha256::digest(d)),
        })
        .collect();
    let st = Statement::new(
        name,
        version.parse().expect("semver"),
        signer.map(str::to_string),
        listed,
    );
    let bytes = st.to_canonical_bytes();
    let mut all = files.to_vec();
    if let Some(k) = key {
        let sig = base64::engine::general_purpose::STANDARD.encode(k.sign(&bytes));
        all.push((SIGNATURE_PATH.to_string(), format!("{sig}\n").into_bytes()));
    }
    all.push((STATEMENT_PATH.to_string(), bytes));
    all
}

/// A bundle of json-tools 1.0.0 whose `skill.yaml` is `yaml`, validly
/// signed by `p`.
fn bundle_with_manifest(p: &Publisher, yaml: &str) -> Vec<u8> {
    let mut files = skill_files("1.0.0");
    files[0].1 = yaml.as_bytes().to_vec();
    zip_entries(&signed_entries(
        &files,
        SKILL,
        "1.0.0",
        Some(&p.id()),
        Some(&p.secret),
    ))
}

fn replace_entry(entries: &mut [(String, Vec<u8>)], name: &str, data: Vec<u8>) {
    entries
        .iter_mut()
        .find(|(n, _)| n == name)
        .unwrap_or_else(|| panic!("no entry {name}"))
        .1 = data;
}

/// Deterministic incompressible bytes.
fn noise(len: usize) -> Vec<u8> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

// ---------------------------------------------------------------------------
// Raw zip surgery.
// ---------------------------------------------------------------------------

const EOCD_SIG: u32 = 0x0605_4b50;
const CDFH_SIG: u32 = 0x0201_4b50;
const LFH_SIG: u32 = 0x0403_4b50;

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}
fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}
fn put16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_le_bytes());
}
fn put32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

/// Offsets of one entry's headers.
#[derive(Debug, Clone, Copy)]
struct Raw {
    /// Central directory header.
    central: usize,
    /// Local file header.
    local: usize,
}

/// Where the end record, central directory and entries are (the archive
/// must have no comment).
fn layout(b: &[u8]) -> (usize, Vec<Raw>) {
    let eocd = b.len() - 22;
    assert_eq!(u32_at(b, eocd), EOCD_SIG, "no end record at the end");
    let count = u16_at(b, eocd + 10) as usize;
    let mut at = u32_at(b, eocd + 16) as usize;
    let mut out = Vec::new();
    for _ in 0..count {
        assert_eq!(u32_at(b, at), CDFH_SIG);
        let local = u32_at(b, at + 42) as usize;
        assert_eq!(u32_at(b, local), LFH_SIG);
        out.push(Raw { central: at, local });
        at += 46
            + u16_at(b, at + 28) as usize
            + u16_at(b, at + 30) as usize
            + u16_at(b, at + 32) as usize;
    }
    (eocd, out)
}

fn entry_named(b: &[u8], name: &str) -> Raw {
    let (_, entries) = layout(b);
    *entries
        .iter()
        .find(|r| {
            let n = u16_at(b, r.central + 28) as usize;
            &b[r.central + 46..r.central + 46 + n] == name.as_bytes()
        })
        .unwrap_or_else(|| panic!("no entry {name}"))
}

/// Renames an entry in place (same length) in the local and/or central
/// header.
fn rename(b: &mut [u8], from: &str, to: &[u8], local: bool, central: bool) {
    assert_eq!(from.len(), to.len(), "renames keep the length");
    let r = entry_named(b, from);
    if local {
        b[r.local + 30..r.local + 30 + to.len()].copy_from_slice(to);
    }
    if central {
        b[r.central + 46..r.central + 46 + to.len()].copy_from_slice(to);
    }
}

/// Sets a 16-bit field in both headers (local offset, central offset).
fn patch16_both(b: &mut [u8], name: &str, local_off: usize, central_off: usize, v: u16) {
    let r = entry_named(b, name);
    put16(b, r.local + local_off, v);
    put16(b, r.central + central_off, v);
}

/// Sets a 32-bit field in both headers.
fn patch32_both(b: &mut [u8], name: &str, local_off: usize, central_off: usize, v: u32) {
    let r = entry_named(b, name);
    put32(b, r.local + local_off, v);
    put32(b, r.central + central_off, v);
}

/// Gives an entry a unix file mode (made by unix, mode in the high half of
/// the external attributes).
fn set_mode(b: &mut [u8], name: &str, mode: u32) {
    let r = entry_named(b, name);
    b[r.central + 5] = 3; // made by: unix
    put32(b, r.central + 38, mode << 16);
}

// ---------------------------------------------------------------------------
// The positive path, trust, rollback and publisher pinning.
// ---------------------------------------------------------------------------

#[test]
fn a_valid_signed_bundle_installs_trusted() {
    let alice = Publisher::new();
    let host = Host::trusting(&alice);
    let bundle = pack("1.0.0", Some(&alice));
    // The library agrees with itself on the packed bundle.
    let opened = skillhost::open_bundle(&bundle, |id| {
        (id == alice.id()).then(|| alice.public.clone())
    })
    .expect("valid bundle");
    assert_eq!(
        opened.signer,
        skillhost::Signer::Trusted { key_id: alice.id() }
    );
    let o = host.verify(&bundle);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("trusted, signature verified"),
        "{}",
        stdout(&o)
    );
    let before = host.snapshot();
    let o = host.install(&bundle, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("installed json-tools@1.0.0"),
        "{}",
        stdout(&o)
    );
    // The snapshot sees an install, so equal snapshots after the refusals
    // mean something.
    let after = host.snapshot();
    assert_ne!(before.list, after.list);
    assert!(
        after
            .paths
            .contains_key("skills/json-tools/1.0.0/json_tools.wasm")
    );
    let e = host.listed(SKILL).expect("listed as managed");
    assert_eq!(e["version"], "1.0.0");
    assert_eq!(e["trusted"], true);
    assert_eq!(e["signer"], alice.id());
    assert_eq!(e["digest"], opened.digest);
    assert!(
        host.data
            .join("skills/json-tools/1.0.0")
            .join(COMPONENT)
            .is_file()
    );
    // The same version again is refused and changes nothing.
    install_refused(
        &host,
        &bundle,
        &[],
        &["json-tools@1.0.0 is already installed"],
    );
}

#[test]
fn unsigned_bundle_needs_allow_untrusted_and_is_recorded_untrusted() {
    let host = Host::new();
    let bundle = pack("1.0.0", None);
    install_refused(
        &host,
        &bundle,
        &[],
        &[
            "json-tools@1.0.0: refused because it is unsigned",
            "--allow-untrusted",
        ],
    );
    host.installed_ok(&bundle, &["--allow-untrusted", "--replace-builtin"]);
    let e = host.listed(SKILL).expect("listed");
    assert_eq!(e["trusted"], false);
    assert_eq!(e["signer"], serde_json::Value::Null);
}

/// Name squatting: an untrusted bundle named like a built-in would take the
/// built-in's place. It is refused unless the operator says
/// --replace-builtin, and `why` then says the built-in is shadowed.
#[test]
fn an_untrusted_bundle_named_like_a_builtin_needs_replace_builtin() {
    let host = Host::new();
    let bundle = pack("1.0.0", None);
    install_refused(
        &host,
        &bundle,
        &["--allow-untrusted"],
        &[
            "json-tools@1.0.0",
            "`json-tools` is the name of a built-in skill",
            "--replace-builtin",
        ],
    );
    // Nothing shadows the built-in: it is listed and no managed copy is.
    assert!(host.listed(SKILL).is_none());
    host.installed_ok(&bundle, &["--allow-untrusted", "--replace-builtin"]);
    let o = host.run(&["personas", "add", "ana"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = host.run(&["grants", "skill", "ana", "json-tools", "on"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = host.run(&["why", "--persona", "ana", "json.query", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).expect("why is JSON");
    let text = report.to_string();
    assert!(
        text.contains("shadows the built-in skill")
            && text.contains("skillhost uninstall json-tools"),
        "{report}"
    );
    // A trusted install of the same name needs no flag: the operator trusts
    // its signer.
    let alice = Publisher::new();
    let trusted = Host::trusting(&alice);
    trusted.installed_ok(&pack("1.0.0", Some(&alice)), &[]);
}

#[test]
fn unknown_key_needs_allow_untrusted_and_is_recorded_untrusted() {
    let mallory = Publisher::new();
    let host = Host::trusting(&Publisher::new());
    let bundle = pack("1.0.0", Some(&mallory));
    install_refused(
        &host,
        &bundle,
        &[],
        &[&format!("its signer key `{}` is not trusted", mallory.id())],
    );
    host.installed_ok(&bundle, &["--allow-untrusted", "--replace-builtin"]);
    let e = host.listed(SKILL).expect("listed");
    assert_eq!(e["trusted"], false);
    assert_eq!(e["signer"], mallory.id());
}

#[test]
fn rollback_is_refused_unless_allowed() {
    let alice = Publisher::new();
    let host = Host::trusting(&alice);
    host.installed_ok(&pack("1.0.0", Some(&alice)), &[]);
    let older = pack("0.9.0", Some(&alice));
    install_refused(
        &host,
        &older,
        &[],
        &[
            "json-tools@0.9.0: refused because json-tools 1.0.0 is installed (rollback)",
            "--allow-downgrade",
        ],
    );
    host.installed_ok(&older, &["--allow-downgrade"]);
    // 1.0.0 stays the effective version; 0.9.0 is installed beside it.
    let e = host.listed(SKILL).expect("listed");
    assert_eq!(e["version"], "1.0.0");
    assert!(host.data.join("skills/json-tools/0.9.0").is_dir());
}

#[test]
fn another_publisher_needs_to_be_trusted_for_the_skill() {
    let alice = Publisher::new();
    let bob = Publisher::new();
    let host = Host::trusting(&alice);
    host.installed_ok(&pack("1.0.0", Some(&alice)), &[]);
    host.trust(&bob, "bob", None);
    let by_bob = pack("1.1.0", Some(&bob));
    install_refused(
        &host,
        &by_bob,
        &[],
        &[&format!(
            "json-tools@1.1.0: refused because earlier versions were signed by key `{}` and this one by key `{}`",
            alice.id(),
            bob.id()
        )],
    );
    // Unsigned (even allowed untrusted) cannot replace a signed skill either.
    install_refused(
        &host,
        &pack("1.2.0", None),
        &["--allow-untrusted", "--replace-builtin"],
        &["this one by no key"],
    );
    host.trust(&bob, "bob", Some(SKILL));
    host.installed_ok(&by_bob, &[]);
    let e = host.listed(SKILL).expect("listed");
    assert_eq!(e["version"], "1.1.0");
    assert_eq!(e["signer"], bob.id());
    assert_eq!(e["trusted"], true);
}

#[test]
fn a_planted_symlink_at_the_install_path_is_never_followed() {
    let alice = Publisher::new();
    let host = Host::trusting(&alice);
    let outside = tempfile::tempdir().expect("tempdir");
    std::fs::write(outside.path().join("precious"), b"keep me").unwrap();
    let outside_before = {
        let mut m = BTreeMap::new();
        walk(outside.path(), Path::new(""), &mut m);
        m
    };
    // data/skills/json-tools -> outside the data dir.
    std::os::unix::fs::symlink(outside.path(), host.data.join("skills").join(SKILL)).unwrap();
    host.installed_ok(&pack("1.0.0", Some(&alice)), &[]);
    // And data/skills/json-tools/1.1.0 -> outside the data dir.
    std::os::unix::fs::symlink(outside.path(), host.data.join("skills/json-tools/1.1.0")).unwrap();
    host.installed_ok(&pack("1.1.0", Some(&alice)), &[]);
    for v in ["1.0.0", "1.1.0"] {
        let p = host.data.join("skills/json-tools").join(v);
        let m = std::fs::symlink_metadata(&p).unwrap();
        assert!(m.is_dir() && !m.file_type().is_symlink(), "{}", p.display());
    }
    assert!(
        !std::fs::symlink_metadata(host.data.join("skills").join(SKILL))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    let mut outside_after = BTreeMap::new();
    walk(outside.path(), Path::new(""), &mut outside_after);
    assert_eq!(
        outside_before, outside_after,
        "something was written outside"
    );
}

#[test]
fn a_skills_folder_symlinked_outside_is_refused() {
    let alice = Publisher::new();
    let host = Host::trusting(&alice);
    let outside = tempfile::tempdir().expect("tempdir");
    // Move the real skills folder out and leave a symlink to it.
    std::fs::remove_dir_all(host.data.join("skills")).unwrap();
    std::fs::create_dir_all(outside.path().join(".staging")).unwrap();
    std::os::unix::fs::symlink(outside.path(), host.data.join("skills")).unwrap();
    let mut before = BTreeMap::new();
    walk(&host.data, Path::new(""), &mut before);
    let o = host.install(&pack("1.0.0", Some(&alice)), &[]);
    assert_refused(
        &o,
        &[
            "cannot create skills/.staging in the data dir",
            "a path led outside of the filesystem",
        ],
    );
    let mut after = BTreeMap::new();
    walk(&host.data, Path::new(""), &mut after);
    assert_eq!(before, after, "the data dir changed");
    let mut outside_after = BTreeMap::new();
    walk(outside.path(), Path::new(""), &mut outside_after);
    assert_eq!(
        outside_after.keys().collect::<Vec<_>>(),
        vec![".staging"],
        "something was written outside the data dir"
    );
}

// ---------------------------------------------------------------------------
// Statement and signature.
// ---------------------------------------------------------------------------

#[test]
fn extra_file_not_in_the_statement() {
    let alice = Publisher::new();
    let mut e = unzip(&pack("1.0.0", Some(&alice)));
    e.push(("notes.txt".into(), b"smuggled".to_vec()));
    let host = Host::trusting(&alice);
    install_refused(
        &host,
        &zip_entries(&e),
        &[],
        &["entry `notes.txt`: is not listed in the signed statement"],
    );
}

#[test]
fn file_missing_from_the_archive() {
    let alice = Publisher::new();
    let mut e = unzip(&pack("1.0.0", Some(&alice)));
    e.retain(|(n, _)| n != COMPONENT);
    let host = Host::trusting(&alice);
    install_refused(
        &host,
        &zip_entries(&e),
        &[],
        &[
            "entry `json_tools.wasm`: is listed in the signed statement but missing from the archive",
        ],
    );
}

#[test]
fn altered_file_same_size_and_other_size() {
    let alice = Publisher::new();
    let host = Host::trusting(&alice);
    let e = unzip(&pack("1.0.0", Some(&alice)));
    let mut wasm = e.iter().find(|(n, _)| n == COMPONENT).unwrap().1.clone();
    let last = wasm.len() - 1;
    wasm[last] ^= 0x55;
    let mut same = e.clone();
    replace_entry(&mut same, COMPONENT, wasm.clone());
    install_refused(
        &host,
        &zip_entries(&same),
        &[],
        &["entry `json_tools.wasm`: sha256 does not match the signed statement"],
    );
    let mut longer = e.clone();
    wasm.push(0);
    replace_entry(&mut longer, COMPONENT, wasm.clone());
    install_refused(
        &host,
        &zip_entries(&longer),
        &[],
        &[&format!(
            "entry `json_tools.wasm`: is {} bytes but the statement says {}",
            wasm.len(),
            wasm.len() - 1
        )],
    );
}

#[test]
fn edited_statement() {
    let alice = Publisher::new();
    let host = Host::trusting(&alice);
    let e = unzip(&pack("1.0.0", Some(&alice)));
    let statement = e
        .iter()
        .find(|(n, _)| n == STATEMENT_PATH)
        .unwrap()
        .1
        .clone();
    // Still canonical, but says 9.9.9: the signature no longer verifies.
    let mut bumped = e.clone();
    let text = String::from_utf8(statement.clone()).unwrap();
    replace_entry(
        &mut bumped,
        STATEMENT_PATH,
        text.replace("\"1.0.0\"", "\"9.9.9\"").into_bytes(),
    );
    install_refused(
        &host,
        &zip_entries(&bumped),
        &[],
        &[&format!(
            "entry `.skillhost/signature`: invalid: signature does not verify with key {}",
            alice.id()
        )],
    );
    // Re-serialised (a space added): refused before any signature check.
    let mut spaced = e.clone();
    replace_entry(
        &mut spaced,
        STATEMENT_PATH,
        text.replacen("{\"format\":1", "{\"format\": 1", 1)
            .into_bytes(),
    );
    install_refused(
        &host,
        &zip_entries(&spaced),
        &[],
        &["entry `.skillhost/statement.json`: the statement is not in canonical form"],
    );
    // An unknown field.
    let mut extra = e.clone();
    replace_entry(
        &mut extra,
        STATEMENT_PATH,
        text.replacen("{\"format\":1", "{\"format\":1,\"trust_me\":true", 1)
            .into_bytes(),
    );
    install_refused(
        &host,
        &zip_entries(&extra),
        &[],
        &["entry `.skillhost/statement.json`: malformed statement: unknown field `trust_me`"],
    );
}

#[test]
fn statement_names_a_trusted_key_but_another_key_signed() {
    let alice = Publisher::new();
    let mallory = Publisher::new();
    let host = Host::trusting(&alice);
    let files = skill_files("1.0.0");
    let forged = zip_entries(&signed_entries(
        &files,
        SKILL,
        "1.0.0",
        Some(&alice.id()),
        Some(&mallory.secret),
    ));
    install_refused(
        &host,
        &forged,
        &[],
        &[&format!(
            "entry `.skillhost/signature`: invalid: signature does not verify with key {}",
            alice.id()
        )],
    );
    // Even with --allow-untrusted: a bad signature by a known key is not
    // "untrusted", it is forged.
    install_refused(
        &host,
        &forged,
        &["--allow-untrusted", "--replace-builtin"],
        &["invalid"],
    );
    verify_refused(&host, &forged, &["signature does not verify"]);
}

#[test]
fn signature_and_signer_must_come_together() {
    let alice = Publisher::new();
    let host = Host::trusting(&alice);
    let files = skill_files("1.0.0");
    // Signer named, signature file dropped.
    let mut e = signed_entries(
        &files,
        SKILL,
        "1.0.0",
        Some(&alice.id()),
        Some(&alice.secret),
    );
    e.retain(|(n, _)| n != SIGNATURE_PATH);
    install_refused(
        &host,
        &zip_entries(&e),
        &["--allow-untrusted", "--replace-builtin"],
        &[&format!(
            "entry `.skillhost/statement.json`: names signer `{}` but the bundle has no signature",
            alice.id()
        )],
    );
    // A signature without a signer.
    let mut e = signed_entries(&files, SKILL, "1.0.0", None, None);
    e.push((SIGNATURE_PATH.into(), b"AAAA\n".to_vec()));
    install_refused(
        &host,
        &zip_entries(&e),
        &["--allow-untrusted", "--replace-builtin"],
        &["entry `.skillhost/signature`: a signature without a signer in the statement"],
    );
    // A signature that is not base64.
    let mut e = signed_entries(
        &files,
        SKILL,
        "1.0.0",
        Some(&alice.id()),
        Some(&alice.secret),
    );
    replace_entry(&mut e, SIGNATURE_PATH, b"not base64!\n".to_vec());
    install_refused(
        &host,
        &zip_entries(&e),
        &[],
        &["entry `.skillhost/signature`: is not base64"],
    );
}

#[test]
fn unexpected_file_under_skillhost() {
    let alice = Publisher::new();
    let mut e = unzip(&pack("1.0.0", Some(&alice)));
    e.push((".skillhost/trusted-keys".into(), b"mallory".to_vec()));
    refused_everywhere(
        &zip_entries(&e),
        &["entry `.skillhost/trusted-keys`: unexpected file in `.skillhost/`"],
    );
}

#[test]
fn statement_listing_a_file_twice() {
    let alice = Publisher::new();
    let host = Host::trusting(&alice);
    let mut files = skill_files("1.0.0");
    let dup = files[0].clone();
    let mut e = signed_entries(
        &files,
        SKILL,
        "1.0.0",
        Some(&alice.id()),
        Some(&alice.secret),
    );
    // Re-sign a statement that lists skill.yaml twice.
    files.push(dup);
    let twice = signed_entries(
        &files,
        SKILL,
        "1.0.0",
        Some(&alice.id()),
        Some(&alice.secret),
    );
    for name in [STATEMENT_PATH, SIGNATURE_PATH] {
        let data = twice.iter().find(|(n, _)| n == name).unwrap().1.clone();
        replace_entry(&mut e, name, data);
    }
    install_refused(
        &host,
        &zip_entries(&e),
        &[],
        &["entry `.skillhost/statement.json`: lists a file twice"],
    );
}

#[test]
fn manifest_disagreeing_with_the_statement() {
    let alice = Publisher::new();
    let host = Host::trusting(&alice);
    // Signed as json-tools 1.0.0, but the manifest says 2.0.0.
    let files = skill_files("2.0.0");
    let bundle = zip_entries(&signed_entries(
        &files,
        SKILL,
        "1.0.0",
        Some(&alice.id()),
        Some(&alice.secret),
    ));
    install_refused(
        &host,
        &bundle,
        &[],
        &[
            "json-tools@1.0.0: the manifest says json-tools@2.0.0 but the signed statement says json-tools@1.0.0",
        ],
    );
}

// ---------------------------------------------------------------------------
// skill.yaml.
// ---------------------------------------------------------------------------

#[test]
fn yaml_alias_bomb() {
    let alice = Publisher::new();
    let host = Host::trusting(&alice);
    let mut yaml = String::from("a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
    for i in 1..10 {
        let p = i - 1;
        yaml.push_str(&format!(
            "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
        ));
    }
    yaml.push_str("name: json-tools\nversion: 1.0.0\ndescription: *a9\n");
    install_refused(
        &host,
        &bundle_with_manifest(&alice, &yaml),
        &[],
        &["json-tools@1.0.0: skill.yaml: repetition limit exceeded"],
    );
}

#[test]
fn yaml_deep_nesting() {
    let alice = Publisher::new();
    let host = Host::trusting(&alice);
    let deep = format!("{}1{}", "[".repeat(40), "]".repeat(40));
    let yaml = format!("name: json-tools\nversion: 1.0.0\ndescription: d\nmetadata: {deep}\n");
    install_refused(
        &host,
        &bundle_with_manifest(&alice, &yaml),
        &[],
        &[
            "json-tools@1.0.0: skill.yaml: `metadata[0][0]",
            "nested deeper than 32 levels (line 4, column",
        ],
    );
    // Past the parser's own recursion limit: refused at the same depth.
    let deeper = format!("{}1{}", "[".repeat(5000), "]".repeat(5000));
    let yaml = format!("name: json-tools\nversion: 1.0.0\ndescription: d\nmetadata: {deeper}\n");
    install_refused(
        &host,
        &bundle_with_manifest(&alice, &yaml),
        &[],
        &[
            "json-tools@1.0.0: skill.yaml: `metadata[0][0]",
            "nested deeper than 32 levels (line 4, column",
        ],
    );
}

#[test]
fn yaml_duplicate_keys() {
    let alice = Publisher::new();
    let host = Host::trusting(&alice);
    let manifest = String::from_utf8(skill_files("1.0.0")[0].1.clone()).unwrap();
    let yaml = format!("{manifest}component: ../../evil.wasm\n");
    install_refused(
        &host,
        &bundle_with_manifest(&alice, &yaml),
        &[],
        &["json-tools@1.0.0: skill.yaml: duplicate entry with key \"component\""],
    );
}

#[test]
fn yaml_unknown_field() {
    let alice = Publisher::new();
    let host = Host::trusting(&alice);
    let manifest = String::from_utf8(skill_files("1.0.0")[0].1.clone()).unwrap();
    let yaml = format!("{manifest}capabilities: [filesystem, network]\n");
    install_refused(
        &host,
        &bundle_with_manifest(&alice, &yaml),
        &[],
        &["json-tools@1.0.0: skill.yaml: `capabilities`: unknown field `capabilities`"],
    );
}

#[test]
fn malformed_permissions_are_refused_by_verify_and_install_naming_the_field() {
    let alice = Publisher::new();
    let host = Host::trusting(&alice);
    let manifest = String::from_utf8(skill_files("1.0.0")[0].1.clone()).unwrap();
    for (permissions, words) in [
        (
            "permissions: [filesystem, network]\n",
            &[
                "`permissions` as a mapping of `network`, `secrets`, `assets`, `sampling` and `roots`",
            ][..],
        ),
        (
            "permissions:\n  network: [\"*\"]\n",
            &["`permissions.network[0]`", "a bare `*`"][..],
        ),
        (
            "permissions:\n  network: [https://api.example.com/v1]\n",
            &["`permissions.network[0]`", "cannot have a path"][..],
        ),
        (
            "permissions:\n  network: [https://a.example.com]\n  secrets:\n    - name: t\n      origins: [https://b.example.com]\n",
            &[
                "`permissions.secrets[0].origins[0]`",
                "not in `permissions.network`",
            ][..],
        ),
    ] {
        let bundle = bundle_with_manifest(&alice, &format!("{manifest}{permissions}"));
        verify_refused(&host, &bundle, words);
        install_refused(&host, &bundle, &[], words);
        assert!(host.listed(SKILL).is_none(), "nothing installed");
    }
}

// ---------------------------------------------------------------------------
// Sizes and counts.
// ---------------------------------------------------------------------------

#[test]
fn archive_over_25_mb() {
    let big = with_hostile(|z| add(z, "padding.bin", &noise(LIMIT as usize + 1024), stored()));
    assert!(big.len() as u64 > LIMIT);
    let alice = Publisher::new();
    let host = Host::trusting(&alice);
    install_refused(
        &host,
        &big,
        &[],
        &[&format!("bytes, over the bundle limit of {LIMIT}")],
    );
    verify_refused(&host, &big, &[&format!("over the bundle limit of {LIMIT}")]);
    let lib = skillhost::open_bundle(&big, |_| None)
        .unwrap_err()
        .to_string();
    assert!(
        lib.contains(&format!("bytes, over the {LIMIT}-byte limit")),
        "{lib}"
    );
}

#[test]
fn deflate_bomb_past_25_mb() {
    let zeros = vec![0u8; 30 << 20];
    let bomb = with_hostile(|z| add(z, "bomb.bin", &zeros, opts()));
    assert!(bomb.len() < 1 << 20, "{} bytes", bomb.len());
    refused_everywhere(
        &bomb,
        &[&format!(
            "entry `bomb.bin`: the extracted content exceeds the {LIMIT}-byte limit"
        )],
    );
}

#[test]
fn many_files_together_past_25_mb() {
    let zeros = vec![0u8; 9 << 20];
    let bomb = with_hostile(|z| {
        for name in ["a.bin", "b.bin", "c.bin"] {
            add(z, name, &zeros, opts());
        }
    });
    refused_everywhere(
        &bomb,
        &[&format!(
            "entry `c.bin`: the extracted content exceeds the {LIMIT}-byte limit"
        )],
    );
}

#[test]
fn declared_size_smaller_than_inflated() {
    let mut b = with_hostile(|z| add(z, "liar.bin", &vec![7u8; 1 << 20], opts()));
    // Uncompressed size: local +22, central +24.
    patch32_both(&mut b, "liar.bin", 22, 24, 1000);
    refused_everywhere(
        &b,
        &["entry `liar.bin`: cannot inflate: File is larger than its declared uncompressed size"],
    );
}

#[test]
fn declared_size_larger_than_inflated() {
    let mut b = with_hostile(|z| add(z, "liar.bin", &[7u8; 1000], opts()));
    patch32_both(&mut b, "liar.bin", 22, 24, 5000);
    refused_everywhere(
        &b,
        &["entry `liar.bin`: declared size 5000 but the data inflates to 1000 bytes"],
    );
}

#[test]
fn crc_mismatch() {
    let mut b = with_hostile(|z| add(z, "flipped.txt", b"hello, world", stored()));
    let r = entry_named(&b, "flipped.txt");
    let data = r.local + 30 + "flipped.txt".len() + u16_at(&b, r.local + 28) as usize;
    b[data] ^= 1;
    refused_everywhere(
        &b,
        &["entry `flipped.txt`: cannot inflate: Invalid checksum"],
    );
}

#[test]
fn more_than_500_entries() {
    let b = with_hostile(|z| {
        // The bundle holds 4 entries; 497 more makes 501.
        for i in 0..497 {
            add(z, &format!("f/{i:03}.txt"), b"x", stored());
        }
    });
    refused_everywhere(&b, &["501 entries, over the limit of 500"]);
}

// ---------------------------------------------------------------------------
// Entry names.
// ---------------------------------------------------------------------------

fn hostile_name(name: &str, words: &[&str]) {
    let b = with_hostile(|z| add(z, name, b"#!/bin/sh\n", opts()));
    refused_everywhere(&b, words);
}

#[test]
fn absolute_path() {
    hostile_name(
        "/etc/cron.d/evil",
        &["entry `/etc/cron.d/evil`: absolute path"],
    );
}

#[test]
fn dot_dot() {
    hostile_name(
        "../../.bashrc",
        &["entry `../../.bashrc`: `.` or `..` path component"],
    );
    hostile_name(
        "docs/../../escape",
        &["entry `docs/../../escape`: `.` or `..` path component"],
    );
}

#[test]
fn backslash() {
    hostile_name(
        "..\\..\\evil.bat",
        &["entry `..\\\\..\\\\evil.bat`: backslash in the name"],
    );
}

#[test]
fn drive_prefix() {
    hostile_name(
        "C:/Windows/evil.dll",
        &["entry `C:/Windows/evil.dll`: `:` in the name (drive prefix"],
    );
}

#[test]
fn nul_in_name() {
    let mut b = with_hostile(|z| add(z, "evil.txt_.wasm", b"x", opts()));
    rename(&mut b, "evil.txt_.wasm", b"evil.txt\0.wasm", true, true);
    refused_everywhere(&b, &["entry `evil.txt\\0.wasm`: NUL in the name"]);
}

#[test]
fn control_characters_and_depth_and_length() {
    hostile_name(
        "readme\x1b[2J.md",
        &["entry `readme\\u{1b}[2J.md`: control character in the name"],
    );
    hostile_name("a//b", &["entry `a//b`: empty path component"]);
    let deep = "d/".repeat(17) + "f";
    hostile_name(&deep, &["nested deeper than 16 folders"]);
    let long = "x".repeat(256);
    hostile_name(&long, &["path component longer than 255 bytes"]);
}

#[test]
fn non_utf8_name() {
    let mut b = with_hostile(|z| add(z, "ab.txt", b"x", opts()));
    rename(&mut b, "ab.txt", b"\xff\xfe.txt", true, true);
    refused_everywhere(&b, &["the name is not UTF-8"]);
}

// ---------------------------------------------------------------------------
// Entry types.
// ---------------------------------------------------------------------------

#[test]
fn symlink_entry() {
    let b = with_hostile(|z| {
        z.add_symlink("docs", "/etc", opts()).expect("symlink");
    });
    refused_everywhere(
        &b,
        &["entry `docs`: a symlink; only regular files and folders are allowed"],
    );
}

#[test]
fn symlink_by_mode_bits() {
    let mut b = with_hostile(|z| add(z, "link", b"../../../../etc/passwd", stored()));
    set_mode(&mut b, "link", 0o120777);
    refused_everywhere(
        &b,
        &["entry `link`: a symlink; only regular files and folders are allowed"],
    );
}

#[test]
fn hard_link_two_names_one_local_header() {
    // Zip has no hard-link entry type; the zip equivalent is two central
    // directory entries sharing one local header and its data.
    let mut b = with_hostile(|z| {
        add(z, "first.txt", b"shared bytes", stored());
        add(z, "other.txt", b"other bytes!", stored());
    });
    let first = entry_named(&b, "first.txt");
    let other = entry_named(&b, "other.txt");
    put32(&mut b, other.central + 42, first.local as u32);
    refused_everywhere(
        &b,
        &["bundle: inconsistent archive", "header inconsistency"],
    );
}

#[test]
fn devices_fifos_and_sockets() {
    for (mode, what) in [
        (0o020644, "a device"),
        (0o060644, "a device"),
        (0o010644, "a FIFO"),
        (0o140644, "a socket"),
    ] {
        let mut b = with_hostile(|z| add(z, "dev/node", b"", stored()));
        set_mode(&mut b, "dev/node", mode);
        refused_everywhere(
            &b,
            &[&format!(
                "entry `dev/node`: {what}; only regular files and folders are allowed"
            )],
        );
    }
}

#[test]
fn folder_mode_on_a_file_name() {
    let mut b = with_hostile(|z| add(z, "notadir", b"", stored()));
    set_mode(&mut b, "notadir", 0o040755);
    refused_everywhere(&b, &["entry `notadir`: a directory with a file name"]);
}

// ---------------------------------------------------------------------------
// Name collisions.
// ---------------------------------------------------------------------------

#[test]
fn duplicate_names() {
    // The second central entry (and its local header) renamed to the first.
    let mut b = with_hostile(|z| {
        add(z, "twin-a.txt", b"one", opts());
        add(z, "twin-b.txt", b"two", opts());
    });
    rename(&mut b, "twin-b.txt", b"twin-a.txt", true, true);
    refused_everywhere(&b, &["two entries have the same name"]);
}

#[test]
fn duplicate_of_the_signed_manifest() {
    // A second skill.yaml after the signed one.
    let mut b = with_hostile(|z| add(z, "skill.yamX", b"name: evil\n", opts()));
    rename(&mut b, "skill.yamX", b"skill.yaml", true, true);
    refused_everywhere(&b, &["two entries have the same name"]);
}

#[test]
fn names_equal_ignoring_case() {
    let b = with_hostile(|z| add(z, "SKILL.yaml", b"name: evil\n", opts()));
    refused_everywhere(
        &b,
        &["entry `SKILL.yaml`: same name as `skill.yaml` ignoring case or Unicode normalisation"],
    );
}

#[test]
fn names_equal_after_unicode_normalisation() {
    let b = with_hostile(|z| {
        add(z, "caf\u{e9}.md", b"nfc", opts());
        add(z, "cafe\u{301}.md", b"nfd", opts());
    });
    refused_everywhere(
        &b,
        &[
            "entry `cafe\u{301}.md`: same name as `caf\u{e9}.md` ignoring case or Unicode normalisation",
        ],
    );
}

#[test]
fn file_and_folder_of_the_same_name() {
    let b = with_hostile(|z| {
        add(z, "docs", b"a file", opts());
        add(z, "docs/readme.md", b"in a folder", opts());
    });
    refused_everywhere(
        &b,
        &["entry `docs/readme.md`: `docs` is both a file and a folder"],
    );
    let b = with_hostile(|z| {
        add(z, "docs", b"a file", opts());
        z.add_directory("docs/", opts()).expect("dir");
    });
    refused_everywhere(&b, &["entry `docs`: same name as `docs`"]);
}

// ---------------------------------------------------------------------------
// Encryption and compression.
// ---------------------------------------------------------------------------

#[test]
fn encrypted_entry() {
    let mut b = with_hostile(|z| add(z, "secret.txt", b"xxxxxxxxxxxxxxxxxxxxxxxx", stored()));
    // General purpose flags: local +6, central +8; bit 0 = encrypted.
    let r = entry_named(&b, "secret.txt");
    let flags = u16_at(&b, r.central + 8) | 1;
    patch16_both(&mut b, "secret.txt", 6, 8, flags);
    refused_everywhere(
        &b,
        &["entry `secret.txt`: encrypted entries are not allowed"],
    );
}

#[test]
fn compression_other_than_stored_or_deflate() {
    for method in [12u16, 14, 93, 99] {
        let mut b = with_hostile(|z| add(z, "packed.bin", b"not really compressed", stored()));
        // Compression method: local +8, central +10.
        patch16_both(&mut b, "packed.bin", 8, 10, method);
        refused_everywhere(
            &b,
            &[
                "entry `packed.bin`: compression method",
                "is not allowed (only stored or deflate)",
            ],
        );
    }
}

// ---------------------------------------------------------------------------
// Archive structure.
// ---------------------------------------------------------------------------

#[test]
fn overlapping_entries() {
    // `outer.bin`'s compressed size grows to swallow `inner.txt`'s local
    // header and data.
    let mut b = with_hostile(|z| {
        add(z, "outer.bin", b"outer data", stored());
        add(z, "inner.txt", b"inner data", stored());
    });
    let inner = entry_named(&b, "inner.txt");
    let outer = entry_named(&b, "outer.bin");
    let data_start = outer.local + 30 + "outer.bin".len() + u16_at(&b, outer.local + 28) as usize;
    let swallow = (inner.local + 30 + "inner.txt".len() + 10 - data_start) as u32;
    // Compressed size: local +18, central +20.
    patch32_both(&mut b, "outer.bin", 18, 20, swallow);
    refused_everywhere(&b, &["bundle: inconsistent archive", "overlapping entries"]);
}

#[test]
fn local_header_name_differs_from_central_name() {
    // The local header says `evil.wasm`, the central directory `good.wasm`.
    let mut b = with_hostile(|z| add(z, "good.wasm", b"\0asm", opts()));
    rename(&mut b, "good.wasm", b"evil.wasm", true, false);
    refused_everywhere(
        &b,
        &[
            "bundle: inconsistent archive",
            "Local file header filename mismatch",
        ],
    );
}

#[test]
fn prepended_garbage() {
    let alice = Publisher::new();
    let good = pack("1.0.0", Some(&alice));
    let mut b = b"#!/bin/sh\nexec evil\n".to_vec();
    let garbage = b.len();
    b.extend_from_slice(&good);
    refused_everywhere(
        &b,
        &[&format!("{garbage} bytes of data before the archive")],
    );
}

#[test]
fn prepended_garbage_with_offsets_rewritten() {
    // A polyglot: the garbage is prepended and every offset is moved so the
    // archive is self-consistent.
    let alice = Publisher::new();
    let good = pack("1.0.0", Some(&alice));
    let pre = b"#!/bin/sh\nexec evil\n";
    let mut b = pre.to_vec();
    b.extend_from_slice(&good);
    let (eocd, entries) = layout(&good);
    let shift = pre.len() as u32;
    for r in entries {
        let at = pre.len() + r.central + 42;
        let v = u32_at(&b, at);
        put32(&mut b, at, v + shift);
    }
    let at = pre.len() + eocd + 16;
    let v = u32_at(&b, at);
    put32(&mut b, at, v + shift);
    refused_everywhere(&b, &["bytes of data before the archive"]);
}

#[test]
fn archive_comment() {
    let alice = Publisher::new();
    let e = unzip(&pack("1.0.0", Some(&alice)));
    let b = zip_with(&e, |z| z.set_comment("innocent").expect("comment"));
    refused_everywhere(&b, &["archive comments are not allowed"]);
}

#[test]
fn fake_end_record_in_the_comment() {
    // The real end record carries a 22-byte comment that is itself an end
    // record (comment length 0), pointing at the same central directory: a
    // reader that takes the last end record sees no comment at all.
    let alice = Publisher::new();
    let good = pack("1.0.0", Some(&alice));
    let eocd = good.len() - 22;
    let fake = good[eocd..].to_vec();
    let mut b = good.clone();
    put16(&mut b, eocd + 20, 22);
    b.extend_from_slice(&fake);
    refused_everywhere(
        &b,
        &["bundle: two end-of-central-directory records end the archive"],
    );
}

#[test]
fn fake_end_record_pointing_at_a_hidden_directory() {
    // The comment holds a second central directory (listing only an evil
    // entry) and an end record for it.
    let alice = Publisher::new();
    let good = pack("1.0.0", Some(&alice));
    let evil = zip_entries(&[("evil.txt".to_string(), b"evil".to_vec())]);
    let (evil_eocd, _) = layout(&evil);
    let eocd = good.len() - 22;
    // Layout: good body+CD, good EOCD (with comment = evil local+CD+EOCD).
    let mut b = good.clone();
    let base = b.len() as u32;
    let mut hidden = evil.clone();
    // Move the evil offsets to where they will land.
    let (_, hidden_entries) = layout(&hidden);
    for r in hidden_entries {
        let v = u32_at(&hidden, r.central + 42);
        put32(&mut hidden, r.central + 42, v + base);
    }
    let v = u32_at(&hidden, evil_eocd + 16);
    put32(&mut hidden, evil_eocd + 16, v + base);
    put16(&mut b, eocd + 20, hidden.len() as u16);
    b.extend_from_slice(&hidden);
    refused_everywhere(
        &b,
        &["bundle: two end-of-central-directory records end the archive"],
    );
}

#[test]
fn fake_zip64_record_counts() {
    // The bundle has 4 entries.
    let eocd64 = "bundle: not a valid zip archive: invalid Zip archive: Invalid EOCD64";
    let hidden = "bundle: inconsistent archive: invalid Zip archive: header inconsistency detected: local file header missing from central directory";
    for (count_on_disk, count_total, words) in [
        (1u64 << 40, 1u64 << 40, eocd64),
        (u64::MAX, u64::MAX, eocd64),
        (5, 5, "bundle: not a valid zip archive: invalid Zip archive"),
        (
            4,
            1 << 20,
            "bundle: not a valid zip archive: invalid Zip archive",
        ),
        // Fewer than there are: the last entry would be hidden.
        (3, 3, hidden),
    ] {
        let alice = Publisher::new();
        let good = pack("1.0.0", Some(&alice));
        let eocd = good.len() - 22;
        let cd_size = u32_at(&good, eocd + 12) as u64;
        let cd_offset = u32_at(&good, eocd + 16) as u64;
        let mut b = good[..eocd].to_vec();
        let z64 = b.len() as u64;
        // Zip64 end of central directory record.
        b.extend_from_slice(&0x0606_4b50u32.to_le_bytes());
        b.extend_from_slice(&44u64.to_le_bytes());
        b.extend_from_slice(&45u16.to_le_bytes());
        b.extend_from_slice(&45u16.to_le_bytes());
        b.extend_from_slice(&0u32.to_le_bytes());
        b.extend_from_slice(&0u32.to_le_bytes());
        b.extend_from_slice(&count_on_disk.to_le_bytes());
        b.extend_from_slice(&count_total.to_le_bytes());
        b.extend_from_slice(&cd_size.to_le_bytes());
        b.extend_from_slice(&cd_offset.to_le_bytes());
        // Zip64 locator.
        b.extend_from_slice(&0x0706_4b50u32.to_le_bytes());
        b.extend_from_slice(&0u32.to_le_bytes());
        b.extend_from_slice(&z64.to_le_bytes());
        b.extend_from_slice(&1u32.to_le_bytes());
        // End record deferring to zip64.
        b.extend_from_slice(&EOCD_SIG.to_le_bytes());
        b.extend_from_slice(&0u16.to_le_bytes());
        b.extend_from_slice(&0u16.to_le_bytes());
        b.extend_from_slice(&0xffffu16.to_le_bytes());
        b.extend_from_slice(&0xffffu16.to_le_bytes());
        b.extend_from_slice(&0xffff_ffffu32.to_le_bytes());
        b.extend_from_slice(&0xffff_ffffu32.to_le_bytes());
        b.extend_from_slice(&0u16.to_le_bytes());
        refused_everywhere(&b, &[words]);
    }
}

#[test]
fn truncated_central_directory() {
    let alice = Publisher::new();
    let good = pack("1.0.0", Some(&alice));
    let eocd = good.len() - 22;
    // Drop the last 20 bytes of the central directory, keep the end record.
    let mut b = good[..eocd - 20].to_vec();
    b.extend_from_slice(&good[eocd..]);
    refused_everywhere(&b, &["bundle: ", "invalid Zip archive"]);
    // Cut the file in the middle of the central directory.
    let cd = u32_at(&good, eocd + 16) as usize;
    refused_everywhere(
        &good[..cd + 30],
        &["bundle: not a valid zip archive: invalid Zip archive"],
    );
}

#[test]
fn data_after_the_end_record() {
    let alice = Publisher::new();
    let mut b = pack("1.0.0", Some(&alice));
    b.extend_from_slice(b"trailing junk");
    refused_everywhere(&b, &["bundle: data after the end of the archive"]);
}

#[test]
fn not_a_zip_at_all() {
    refused_everywhere(b"skill.yaml: hello", &["bundle: not a valid zip archive"]);
}

/// CRC-32 (IEEE), for the Unicode Path extra field.
fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xedb8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

#[test]
fn unicode_path_extra_field_renaming_an_entry() {
    // The header says `innocent.txt`; an Info-ZIP Unicode Path field (0x7075)
    // with a matching CRC renames it for readers that honour it. The zip
    // crate refuses any such rename, so readers cannot disagree on the name.
    let raw = "innocent.txt";
    let cases: [(&str, bool, &[&str]); 3] = [
        (
            "../../evil.sh",
            false,
            &[
                "bundle: inconsistent archive",
                "UnicodePath (0x7075) changes file name path components",
            ],
        ),
        // In the central directory only: the headers disagree.
        (
            "../../evil.sh",
            true,
            &["bundle: inconsistent archive", "header inconsistency"],
        ),
        // Renamed onto the signed manifest's name, ignoring case.
        (
            "SKILL.yaml",
            false,
            &[
                "bundle: inconsistent archive",
                "UnicodePath (0x7075) changes file name",
            ],
        ),
    ];
    for (target, central_only, words) in cases {
        let mut field = vec![1u8];
        field.extend_from_slice(&crc32(raw.as_bytes()).to_le_bytes());
        field.extend_from_slice(target.as_bytes());
        let b = with_hostile(|z| {
            let mut o = zip::write::FullFileOptions::default()
                .compression_method(CompressionMethod::Deflated)
                .last_modified_time(DateTime::default())
                .unix_permissions(0o644);
            o.add_extra_field(0x7075, &field, central_only)
                .expect("extra field");
            z.start_file(raw, o).expect("start_file");
            z.write_all(b"#!/bin/sh\n").expect("write");
        });
        refused_everywhere(&b, words);
    }
}

/// The tool names `persona` sees (`tools list --persona P --json`).
fn visible_tools(host: &Host, persona: &str) -> Vec<String> {
    let o = host.run(&["tools", "list", "--persona", persona, "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("tools list is JSON");
    v.as_array()
        .expect("an array")
        .iter()
        .filter_map(|t| t["name"].as_str().map(str::to_string))
        .collect()
}

/// The `grants` step of `why --persona P json.query`.
fn why_grants(host: &Host, persona: &str) -> serde_json::Value {
    let o = host.run(&["why", "--persona", persona, "json.query", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("why is JSON");
    v["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .find(|s| s["step"] == "grants")
        .cloned()
        .expect("a grants step")
}

/// A grant is bound to the skill it was given to (name and signer): it
/// survives an upgrade by the same signer, and is suspended (not applied)
/// when the name is later held by another skill, after an uninstall, until
/// the operator grants again. `why` and `grants show` say so.
#[test]
fn a_grant_does_not_pass_to_another_skill_of_the_same_name() {
    let alice = Publisher::new();
    let mallory = Publisher::new();
    let host = Host::trusting(&alice);
    host.installed_ok(&pack("1.0.0", Some(&alice)), &[]);
    let o = host.run(&["personas", "add", "ana"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = host.run(&["grants", "skill", "ana", SKILL, "on"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(visible_tools(&host, "ana").contains(&"json.query".to_string()));

    // An upgrade by the same signer keeps the grant.
    host.installed_ok(&pack("1.1.0", Some(&alice)), &[]);
    assert!(visible_tools(&host, "ana").contains(&"json.query".to_string()));

    // Uninstalled: the built-in json-tools is back, which is not what ana
    // was granted.
    let o = host.run(&["uninstall", SKILL]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!visible_tools(&host, "ana").contains(&"json.query".to_string()));
    let g = why_grants(&host, "ana");
    assert_eq!(g["ok"], false, "{g}");
    let d = g["detail"].as_str().unwrap_or_default();
    assert!(
        d.contains("suspended")
            && d.contains(&alice.id())
            && d.contains("the built-in skill")
            && d.contains("skillhost grants skill ana json-tools on"),
        "{d}"
    );

    // Another publisher, trusted for other reasons, installs a skill of the
    // same name: ana's grant does not pass to it.
    host.trust(&mallory, "mallory", None);
    host.installed_ok(&pack("2.0.0", Some(&mallory)), &[]);
    assert!(!visible_tools(&host, "ana").contains(&"json.query".to_string()));
    let d = why_grants(&host, "ana")["detail"].to_string();
    assert!(d.contains(&alice.id()) && d.contains(&mallory.id()), "{d}");
    let o = host.run(&["grants", "show", "ana", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let shown: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    let row = shown["skills"]
        .as_array()
        .expect("skills")
        .iter()
        .find(|s| s["name"] == SKILL)
        .cloned()
        .expect("json-tools listed");
    assert_eq!(row["granted"], false, "{row}");
    assert!(
        row["suspended"]
            .as_str()
            .is_some_and(|s| s.contains(&alice.id())),
        "{row}"
    );

    // The operator grants again: now bound to mallory's skill.
    let o = host.run(&["grants", "skill", "ana", SKILL, "on"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(visible_tools(&host, "ana").contains(&"json.query".to_string()));
    assert_eq!(why_grants(&host, "ana")["ok"], true);
}

#[test]
fn pack_refuses_a_component_inside_a_folder_bundles_never_hold() {
    // `target/`, `node_modules/`, `.venv/`… are never packed: a manifest
    // naming its component there would pack into a bundle without it.
    for folder in ["target", "node_modules", ".venv"] {
        let dir = tempfile::tempdir().expect("tempdir");
        for (name, bytes) in skill_files("1.0.0") {
            let (name, bytes) = if name == "skill.yaml" {
                let text = String::from_utf8(bytes).unwrap().replace(
                    &format!("component: {COMPONENT}"),
                    &format!("component: {folder}/{COMPONENT}"),
                );
                (name, text.into_bytes())
            } else {
                (format!("{folder}/{name}"), bytes)
            };
            let at = dir.path().join(&name);
            std::fs::create_dir_all(at.parent().unwrap()).unwrap();
            std::fs::write(at, bytes).unwrap();
        }
        let err = skillhost::pack_dir(dir.path(), None).expect_err("must be refused");
        assert!(
            err.to_string().contains(&format!("inside `{folder}/`")),
            "{err}"
        );
    }
}
