//! A hostile skill tries to exfiltrate its secret (`hostile-secrets`). It
//! never holds it: the host adds it as a header to requests to the bound
//! origin. So it has the bound API echo it back, then tries every way out:
//! `config`, a second approved origin, an unlisted origin, the host log,
//! stdout/stderr, its result, its error, and a call that would wait for
//! approval with it. Only the second approved origin (which the
//! operator approved) may see it; the host's records, logs, data files and
//! responses hold it nowhere.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use axum::http::HeaderMap;
use skillhost_test_plugins as art;

use crate::common::{command, skillhost, stderr, stdout};

const SECRET: &str = "sk-exfil-7d93c1e0b2a4f5";

/// What one loopback server received: headers and bodies, as text.
type Seen = Arc<Mutex<Vec<String>>>;

/// A server on loopback that records every request and answers with the
/// `authorization` header it received (the echo a hostile skill wants).
async fn server() -> (u16, Seen, tokio::task::JoinHandle<()>) {
    let seen: Seen = Arc::default();
    let s = seen.clone();
    let app = axum::Router::new().fallback(move |headers: HeaderMap, body: String| {
        let s = s.clone();
        async move {
            let mut all = format!("{headers:?}");
            all.push_str(&body);
            s.lock().unwrap().push(all);
            headers
                .get("authorization")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_string()
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (port, seen, task)
}

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            files(&p, out);
        } else {
            out.push(p);
        }
    }
}

fn ok(data: &Path, args: &[&str]) -> String {
    let o = skillhost(data, args);
    assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    stdout(&o)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_skill_cannot_leak_its_secret_into_anything_the_host_keeps_or_answers() {
    let (bound, bound_seen, t1) = server().await;
    let (other, other_seen, t2) = server().await;
    let (unlisted, unlisted_seen, t3) = server().await;
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let dir = tmp.path().join("hostile-secrets");
    std::fs::create_dir_all(&dir).unwrap();
    let manifest = std::fs::read_to_string(Path::new(art::HOSTILE_SECRETS_DIR).join("skill.yaml"))
        .unwrap()
        .replace("http://bound.invalid", &format!("http://127.0.0.1:{bound}"))
        .replace("http://other.invalid", &format!("http://127.0.0.1:{other}"));
    std::fs::write(dir.join("skill.yaml"), manifest).unwrap();
    std::fs::copy(
        art::HOSTILE_SECRETS_WASM_PATH,
        dir.join("hostile_secrets.wasm"),
    )
    .unwrap();
    let (bundle, _) = skillhost::pack_dir(&dir, None).unwrap();
    let file = tmp.path().join("hostile.skill");
    std::fs::write(&file, bundle).unwrap();

    ok(
        &data,
        &["install", file.to_str().unwrap(), "--allow-untrusted"],
    );
    ok(&data, &["skills", "trust", "hostile-secrets"]);
    ok(&data, &["skills", "approve", "hostile-secrets"]);
    let mut set = command(&data, &["secrets", "set", "hostile-secrets", "token"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    set.stdin
        .take()
        .unwrap()
        .write_all(SECRET.as_bytes())
        .unwrap();
    let o = set.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    ok(&data, &["personas", "add", "agent"]);
    ok(
        &data,
        &["grants", "skill", "agent", "hostile-secrets", "on"],
    );

    let mut printed = Vec::new();
    for fail in [false, true] {
        let args = serde_json::json!({
            "bound": format!("http://127.0.0.1:{bound}/echo"),
            "other": format!("http://127.0.0.1:{other}/collect"),
            "unlisted": format!("http://127.0.0.1:{unlisted}/collect"),
            "fail": fail,
        })
        .to_string();
        let o = command(
            &data,
            &[
                "call",
                "steal.try",
                "--persona",
                "agent",
                "--args",
                &args,
                "--json",
            ],
        )
        .env("RUST_LOG", "trace")
        .output()
        .unwrap();
        let (out, err) = (stdout(&o), stderr(&o));
        if !fail {
            assert!(o.status.success(), "{err}");
            let v: serde_json::Value = serde_json::from_str(&out).expect("JSON report");
            let loot = &v["output"];
            assert!(
                loot["from_config"].is_null(),
                "config gave the secret: {loot}"
            );
            assert_eq!(loot["echoed"], "[redacted]", "{loot}");
            assert_eq!(loot["sent_to_other"], 200, "{loot}");
            // A skill cannot park it in a call waiting for approval: it
            // may not invoke a tool that needs confirmation at all.
            assert!(
                loot["stash"]
                    .as_str()
                    .is_some_and(|s| s.contains("requires confirmation")),
                "{loot}"
            );
            assert!(
                loot["sent_to_unlisted"]
                    .as_str()
                    .is_some_and(|s| s.starts_with("refused")),
                "{loot}"
            );
            assert!(
                err.contains("stolen: [redacted]"),
                "the guest's log line is kept, redacted: {err}"
            );
        } else {
            assert!(!o.status.success());
            assert!(
                out.contains("failing with [redacted]") || err.contains("failing with [redacted]"),
                "{out} {err}"
            );
        }
        printed.push(out);
        printed.push(err);
    }

    // The bound origin got the header; the second approved origin got what
    // the skill sent it (the operator approved it); the unlisted one nothing.
    assert!(
        bound_seen
            .lock()
            .unwrap()
            .iter()
            .all(|r| r.contains(SECRET))
    );
    assert!(
        other_seen
            .lock()
            .unwrap()
            .iter()
            .any(|r| r.contains(SECRET))
    );
    assert!(
        unlisted_seen.lock().unwrap().is_empty(),
        "a request reached an unlisted origin"
    );

    // Nothing the host prints, keeps or answers holds the value.
    for args in [
        &["runs", "list", "--json"][..],
        &["runs", "list", "--pending", "--json"],
        &["runs", "events", "--json", "--limit", "500"],
        &["secrets", "list", "--json"],
        &["skills", "show", "hostile-secrets", "--json"],
    ] {
        printed.push(ok(&data, args));
    }
    for text in &printed {
        assert!(!text.contains(SECRET), "printed: {text}");
    }
    let mut all = Vec::new();
    files(&data, &mut all);
    for f in &all {
        let bytes = std::fs::read(f).unwrap();
        assert!(
            !bytes.windows(SECRET.len()).any(|w| w == SECRET.as_bytes()),
            "{} holds the secret",
            f.display()
        );
    }
    for t in [t1, t2, t3] {
        t.abort();
    }
}
