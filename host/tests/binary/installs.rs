//! Installs under stress: kill -9 at random points, concurrent installers,
//! planted symlinks. Real processes, real bundles.

use crate::common;
use common::skillhost;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use skillhost::{SecretKey, pack_dir};
use skillhost_test_plugins as art;

fn ok(o: Output) -> String {
    assert!(
        o.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A bundle of a json-tools copy named `name` at `version`, with `extra_mb`
/// MiB of incompressible padding so that an install takes a while.
fn bundle(work: &Path, key: &SecretKey, name: &str, version: &str, extra_mb: usize) -> PathBuf {
    let dir = work.join(format!("{name}-{version}"));
    std::fs::create_dir_all(&dir).unwrap();
    let manifest = std::fs::read_to_string(Path::new(art::JSON_TOOLS_DIR).join("skill.yaml"))
        .unwrap()
        .replace("name: json-tools", &format!("name: {name}"))
        .replace("version: 0.1.0", &format!("version: {version}"));
    std::fs::write(dir.join("skill.yaml"), manifest).unwrap();
    std::fs::copy(art::JSON_TOOLS_WASM_PATH, dir.join("json_tools.wasm")).unwrap();
    if extra_mb > 0 {
        // xorshift bytes: incompressible, deterministic.
        let mut x: u64 = 0x9E3779B97F4A7C15;
        let mut pad = Vec::with_capacity(extra_mb << 20);
        while pad.len() < extra_mb << 20 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            pad.extend_from_slice(&x.to_le_bytes());
        }
        for i in 0..4 {
            let quarter = pad.len() / 4;
            std::fs::write(
                dir.join(format!("pad{i}.bin")),
                &pad[i * quarter..(i + 1) * quarter],
            )
            .unwrap();
        }
    }
    let (bytes, _) = pack_dir(&dir, Some(key)).expect("pack");
    let file = work.join(format!("{name}-{version}.skill"));
    std::fs::write(&file, bytes).unwrap();
    file
}

fn trusted_data_dir(work: &Path, key: &SecretKey) -> PathBuf {
    let data = work.join("data");
    let pubfile = work.join("publisher.pub");
    std::fs::write(&pubfile, key.public().to_file_text()).unwrap();
    ok(skillhost(
        &data,
        &[
            "trust",
            "add",
            pubfile.to_str().unwrap(),
            "--name",
            "publisher",
        ],
    ));
    data
}

fn installed(data: &Path) -> Vec<(String, String, String)> {
    let out = ok(skillhost(data, &["skills", "list", "--json"]));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    v.as_array()
        .unwrap()
        .iter()
        .filter(|e| e["source"] == "managed")
        .map(|e| {
            (
                e["name"].as_str().unwrap().into(),
                e["version"].as_str().unwrap().into(),
                e["digest"].as_str().unwrap().into(),
            )
        })
        .collect()
}

/// Every folder under `data/skills` (besides dot-entries) and whether each
/// installed version's files are complete.
fn skill_folders(data: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let skills = data.join("skills");
    for e in std::fs::read_dir(&skills).unwrap() {
        let e = e.unwrap();
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        for v in std::fs::read_dir(e.path()).unwrap() {
            out.push(format!(
                "{name}/{}",
                v.unwrap().file_name().to_string_lossy()
            ));
        }
    }
    out.sort();
    out
}

#[test]
fn kill_9_at_random_points_leaves_old_or_new_state() {
    let work = tempfile::tempdir().unwrap();
    let (key, _) = SecretKey::generate().unwrap();
    let data = trusted_data_dir(work.path(), &key);
    let file = bundle(work.path(), &key, "crashy", "1.0.0", 12);
    // How long a full install takes here, to spread the kills over it.
    let t = Instant::now();
    ok(skillhost(&data, &["install", file.to_str().unwrap()]));
    let full = t.elapsed();
    ok(skillhost(&data, &["uninstall", "crashy"]));
    let mut seen_installed = 0;
    let mut seen_absent = 0;
    let mut seed: u64 = 0x2545F4914F6CDD1D;
    for round in 0..12 {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let delay = Duration::from_micros(seed % (full.as_micros() as u64 + 1));
        let mut child = Command::new(env!("CARGO_BIN_EXE_skillhost"))
            .arg("--data-dir")
            .arg(&data)
            .args(["install", file.to_str().unwrap()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(delay);
        let _ = child.kill(); // SIGKILL
        let _ = child.wait();
        // Any command recovers; then the state is either old or new.
        let list = installed(&data);
        let folders = skill_folders(&data);
        let staging: Vec<_> = std::fs::read_dir(data.join("skills/.staging"))
            .unwrap()
            .collect();
        assert!(
            staging.is_empty(),
            "round {round}: staging leftovers after recovery"
        );
        match list.as_slice() {
            [] => {
                assert!(
                    folders.is_empty(),
                    "round {round}: folders without a record: {folders:?}"
                );
                seen_absent += 1;
            }
            [(name, version, _)] => {
                assert_eq!((name.as_str(), version.as_str()), ("crashy", "1.0.0"));
                assert_eq!(folders, vec!["crashy/1.0.0".to_string()], "round {round}");
                // The installed copy is complete and callable.
                let out = ok(skillhost(
                    &data,
                    &[
                        "call",
                        "json.query",
                        "--args",
                        r#"{"document":[7],"pointer":"/0"}"#,
                    ],
                ));
                assert_eq!(out.trim(), "7");
                for i in 0..4 {
                    assert_eq!(
                        std::fs::metadata(data.join(format!("skills/crashy/1.0.0/pad{i}.bin")))
                            .unwrap()
                            .len(),
                        3 << 20
                    );
                }
                seen_installed += 1;
                ok(skillhost(&data, &["uninstall", "crashy"]));
            }
            other => panic!("round {round}: unexpected state {other:?}"),
        }
    }
    eprintln!("kill -9 rounds: {seen_absent} left the old state, {seen_installed} the new one");
}

#[test]
fn concurrent_installs_are_serialised() {
    let work = tempfile::tempdir().unwrap();
    let (key, _) = SecretKey::generate().unwrap();
    let data = trusted_data_dir(work.path(), &key);
    let files: Vec<PathBuf> = (0..3)
        .map(|i| bundle(work.path(), &key, &format!("para{i}"), "1.0.0", 2))
        .chain(std::iter::repeat_n(
            bundle(work.path(), &key, "same", "1.0.0", 2),
            3,
        ))
        .collect();
    let children: Vec<_> = files
        .iter()
        .map(|f| {
            Command::new(env!("CARGO_BIN_EXE_skillhost"))
                .arg("--data-dir")
                .arg(&data)
                .args(["install", f.to_str().unwrap()])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let outputs: Vec<Output> = children
        .into_iter()
        .map(|c| c.wait_with_output().unwrap())
        .collect();
    for o in &outputs[..3] {
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let same_ok = outputs[3..].iter().filter(|o| o.status.success()).count();
    assert_eq!(same_ok, 1, "exactly one of three identical installs wins");
    for o in outputs[3..].iter().filter(|o| !o.status.success()) {
        assert!(
            String::from_utf8_lossy(&o.stderr).contains("already installed"),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    let list = installed(&data);
    assert_eq!(list.len(), 4, "{list:?}");
    assert_eq!(skill_folders(&data).len(), 4);
}

#[cfg(unix)]
#[test]
fn a_planted_symlink_at_the_install_path_is_refused() {
    let work = tempfile::tempdir().unwrap();
    let (key, _) = SecretKey::generate().unwrap();
    let data = trusted_data_dir(work.path(), &key);
    let file = bundle(work.path(), &key, "planted", "1.0.0", 0);
    let outside = work.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::os::unix::fs::symlink(&outside, data.join("skills/planted")).unwrap();
    let o = skillhost(&data, &["install", file.to_str().unwrap()]);
    // Recovery removes the planted link first, or the install refuses it;
    // either way nothing is written outside the data dir.
    assert!(
        std::fs::read_dir(&outside).unwrap().next().is_none(),
        "something was written outside the data dir"
    );
    if o.status.success() {
        assert!(
            std::fs::symlink_metadata(data.join("skills/planted"))
                .unwrap()
                .is_dir()
        );
    } else {
        assert!(
            String::from_utf8_lossy(&o.stderr).contains("not a folder"),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
}

#[test]
fn uninstall_of_one_version_keeps_the_others() {
    let work = tempfile::tempdir().unwrap();
    let (key, _) = SecretKey::generate().unwrap();
    let data = trusted_data_dir(work.path(), &key);
    for v in ["1.0.0", "1.1.0"] {
        ok(skillhost(
            &data,
            &[
                "install",
                bundle(work.path(), &key, "multi", v, 0).to_str().unwrap(),
            ],
        ));
    }
    let list = installed(&data);
    assert_eq!(
        list.iter().map(|e| e.1.as_str()).collect::<Vec<_>>(),
        vec!["1.1.0"],
        "the highest version is effective"
    );
    let o = skillhost(&data, &["skills", "list", "--json"]);
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("managed:1.0.0"),
        "the older one is shown as shadowed"
    );
    ok(skillhost(&data, &["uninstall", "multi@1.1.0"]));
    assert_eq!(
        installed(&data)
            .iter()
            .map(|e| e.1.as_str())
            .collect::<Vec<_>>(),
        vec!["1.0.0"]
    );
    let o = skillhost(&data, &["uninstall", "multi@9.9.9"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("not installed"));
}
