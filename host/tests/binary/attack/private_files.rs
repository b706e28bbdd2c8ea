//! Finding 7: the data dir was created 0755, and `skillhost.db`, its
//! `-wal`/`-shm`, ref blobs and server `stderr.log` files were 0644.
//!
//! Now the data dir is 0700 and every file in it 0600, created so; an
//! existing data dir that others can read draws a warning.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use serde_json::json;

use crate::common::{python, raw_command, repo, skillhost, start_http, stderr};

/// Every folder and file under `root` whose mode is wider than private,
/// with its mode.
fn shared(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(p) = stack.pop() {
        let meta = std::fs::symlink_metadata(&p).expect("metadata");
        let mode = meta.permissions().mode() & 0o777;
        if meta.is_dir() {
            if mode != 0o700 {
                out.push(format!("{} {mode:o}", p.display()));
            }
            for e in std::fs::read_dir(&p).expect("read_dir") {
                stack.push(e.expect("entry").path());
            }
        } else if mode & 0o077 != 0 {
            out.push(format!("{} {mode:o}", p.display()));
        }
    }
    out
}

#[test]
fn every_file_of_the_data_dir_is_private() {
    let work = tempfile::tempdir().unwrap();
    let data = work.path().join("data");
    let ok = |args: &[&str]| {
        let o = skillhost(&data, args);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        o
    };
    ok(&["personas", "add", "ana"]);
    let file = work.path().join("notes.txt");
    std::fs::write(&file, "one two").unwrap();
    ok(&["refs", "add", file.to_str().unwrap()]);
    ok(&["tokens", "add", "--persona", "ana"]);
    ok(&["call", "text.word_count", "--args", r#"{"text": "a b"}"#]);
    // A bundle installed (its files extracted), untrusted.
    let skill = work.path().join("skill");
    let art = skillhost_test_plugins::HOSTILE_DIR;
    crate::common::skill_folder(
        work.path(),
        "skill",
        art,
        skillhost_test_plugins::HOSTILE_WASM_PATH,
        &|m| m,
    );
    let bundle = work.path().join("hostile.skill");
    ok(&[
        "pack",
        skill.to_str().unwrap(),
        "--out",
        bundle.to_str().unwrap(),
    ]);
    ok(&["install", bundle.to_str().unwrap(), "--allow-untrusted"]);
    // An MCP server's folder and stderr log.
    let config = work.path().join("mcp.json");
    std::fs::write(
        &config,
        json!({"mcpServers": {"py": {
            "command": python(),
            "args": [repo().join("tests/peers/py_server.py"), "--transport", "stdio"],
        }}})
        .to_string(),
    )
    .unwrap();
    ok(&["mcp", "import", config.to_str().unwrap()]);
    ok(&["mcp", "test", "py"]);
    // The admin token, and a server that writes while it runs.
    let server = start_http(&data, 2);
    drop(server);

    assert!(data.join("skillhost.db").exists());
    assert!(data.join("mcp/py").exists(), "the server's folder");
    assert!(data.join("admin_token").exists());
    let wide = shared(&data);
    assert!(wide.is_empty(), "not private: {wide:#?}");
}

#[test]
fn a_data_dir_others_can_read_draws_a_warning() {
    let work = tempfile::tempdir().unwrap();
    let data = work.path().join("data");
    std::fs::create_dir(&data).unwrap();
    std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o755)).unwrap();
    let o = raw_command(&data, &["personas", "list"]).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("can be read by other users") && err.contains("chmod 700"),
        "{err}"
    );
    // Left as the operator made it: warned, not changed.
    let mode = std::fs::metadata(&data).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o755);
    std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o700)).unwrap();
    let o = raw_command(&data, &["personas", "list"]).output().unwrap();
    assert!(!stderr(&o).contains("other users"), "{}", stderr(&o));
}
