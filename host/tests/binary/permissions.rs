//! Permissions end to end through the real binary: a skill that asks for
//! network origins, a secret or its assets is off until an operator
//! approves exactly that set; an upgrade asking for more installs but
//! waits while the approved version runs; one asking for less is active at
//! once; secrets are set from standard input, never stored or shown in the
//! clear, and bound to the skill that declares them.

use crate::common;
use common::{command, skillhost, stderr, stdout};

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

use serde_json::Value;
use skillhost::SecretKey;
use skillhost_test_plugins as art;

/// A skill that is not built in (a built-in of the name would run while
/// an install waits for approval).
const SKILL: &str = "conformance-fixtures";
const SECRET: &str = "tok-SECRET-4f1e2d3c-never-recorded";

struct Env {
    _tmp: tempfile::TempDir,
    data: PathBuf,
    work: PathBuf,
    key: SecretKey,
}

impl Env {
    fn new() -> Env {
        let tmp = tempfile::tempdir().expect("tempdir");
        let data = tmp.path().join("data");
        let work = tmp.path().join("work");
        std::fs::create_dir_all(&work).expect("work dir");
        let (key, public) = SecretKey::generate().expect("keygen");
        let env = Env {
            data,
            work,
            key,
            _tmp: tmp,
        };
        let pubf = env.work.join("alice.pub");
        std::fs::write(&pubf, public.to_file_text()).expect("write .pub");
        env.ok(&["trust", "add", pubf.to_str().unwrap(), "--name", "alice"]);
        env.ok(&["personas", "add", "agent", "--description", "the agent"]);
        env
    }

    fn run(&self, args: &[&str]) -> Output {
        skillhost(&self.data, args)
    }

    fn ok(&self, args: &[&str]) -> String {
        let o = self.run(args);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        stdout(&o)
    }

    /// A signed bundle of the skill at `version` asking for `permissions`
    /// (YAML, indented under `permissions:`).
    fn bundle(&self, version: &str, permissions: &str) -> PathBuf {
        let dir = self.work.join(format!("src-{version}"));
        std::fs::create_dir_all(&dir).expect("skill dir");
        let manifest =
            std::fs::read_to_string(Path::new(art::CONFORMANCE_FIXTURES_DIR).join("skill.yaml"))
                .expect("plugin manifest");
        let m = skillhost::SkillManifest::parse(&manifest).expect("valid manifest");
        let manifest = manifest.replacen(
            &format!("version: {}", m.version),
            &format!("version: {version}"),
            1,
        ) + &format!("permissions:\n{permissions}");
        std::fs::write(dir.join("skill.yaml"), manifest).expect("manifest");
        std::fs::copy(
            art::CONFORMANCE_FIXTURES_WASM_PATH,
            dir.join("conformance_fixtures.wasm"),
        )
        .expect("component");
        common::copy_fixture_files(&dir);
        let (bytes, _) = skillhost::pack_dir(&dir, Some(&self.key)).expect("pack");
        let file = self.work.join(format!("{SKILL}-{version}.skill"));
        std::fs::write(&file, bytes).expect("bundle");
        file
    }

    fn install(&self, version: &str, permissions: &str) -> String {
        let file = self.bundle(version, permissions);
        let out = self.ok(&["install", file.to_str().unwrap()]);
        self.ok(&["grants", "skill", "agent", SKILL, "on"]);
        out
    }

    fn skill(&self) -> Value {
        let out = self.ok(&["skills", "show", SKILL, "--json"]);
        serde_json::from_str(&out).expect("skills show --json is JSON")
    }

    fn call(&self) -> Output {
        self.run(&[
            "call",
            "test_simple_text",
            "--persona",
            "agent",
            "--args",
            "{}",
        ])
    }

    fn why(&self) -> String {
        let o = self.run(&["why", "--persona", "agent", "test_simple_text"]);
        stdout(&o) + &stderr(&o)
    }

    fn set_secret(&self, name: &str, value: &str) -> Output {
        let mut child = command(&self.data, &["secrets", "set", SKILL, name])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(value.as_bytes())
            .expect("write the value");
        child.wait_with_output().expect("wait")
    }
}

const A: &str = "  network: [https://a.example.com]\n";
const AB: &str = "  network: [https://a.example.com, https://b.example.com]\n";

#[test]
fn a_new_skill_asking_for_permissions_is_off_until_approved() {
    let env = Env::new();
    let out = env.install("1.0.0", A);
    assert!(out.contains("network  https://a.example.com"), "{out}");
    assert!(
        out.contains("skillhost skills approve conformance-fixtures"),
        "{out}"
    );
    let s = env.skill();
    assert_eq!(s["state"], "unapproved", "{s}");
    assert_eq!(s["version"], "1.0.0");
    let call = env.call();
    assert!(!call.status.success());
    let why = env.why();
    assert!(
        why.contains("no operator approved") && why.contains("skills approve conformance-fixtures"),
        "{why}"
    );
    // A digest that is not the shown set's approves nothing.
    let wrong = env.run(&["skills", "approve", SKILL, "--digest", "0000"]);
    assert!(!wrong.status.success());
    assert!(
        stderr(&wrong).contains("not the set you approved"),
        "{}",
        stderr(&wrong)
    );
    assert_eq!(env.skill()["state"], "unapproved");
    let digest = env.skill()["permissions_digest"]
        .as_str()
        .expect("digest")
        .to_string();
    env.ok(&["skills", "approve", SKILL, "--digest", &digest]);
    assert_eq!(env.skill()["state"], "ready");
    let call = env.call();
    assert!(call.status.success(), "{}", stderr(&call));
    // Approving again has nothing to approve.
    let again = env.run(&["skills", "approve", SKILL]);
    assert!(!again.status.success());
    assert!(
        stderr(&again).contains("waits for no approval"),
        "{}",
        stderr(&again)
    );
}

#[test]
fn an_upgrade_asking_for_more_waits_and_one_asking_for_less_is_active_at_once() {
    let env = Env::new();
    env.install("1.0.0", A);
    env.ok(&["skills", "approve", SKILL]);
    assert_eq!(env.skill()["state"], "ready");

    // v2 asks for one more origin: installed, but v1 keeps running.
    let out = env.install("2.0.0", AB);
    assert!(out.contains("keeps running"), "{out}");
    let s = env.skill();
    assert_eq!(s["version"], "1.0.0", "{s}");
    assert_eq!(s["state"], "ready");
    assert_eq!(s["held"]["version"], "2.0.0");
    assert_eq!(
        s["held"]["unapproved"],
        serde_json::json!(["network https://b.example.com"])
    );
    let why = env.why();
    assert!(
        why.contains("version 2.0.0 is installed but waits for approval")
            && why.contains("https://b.example.com"),
        "{why}"
    );
    let call = env.call();
    assert!(call.status.success(), "v1 still answers: {}", stderr(&call));

    env.ok(&["skills", "approve", SKILL]);
    let s = env.skill();
    assert_eq!(
        (s["version"].as_str(), s["state"].as_str()),
        (Some("2.0.0"), Some("ready"))
    );
    assert!(s["held"].is_null(), "{s}");

    // v3 asks for less: active at once, no approval.
    env.install("3.0.0", A);
    let s = env.skill();
    assert_eq!(
        (s["version"].as_str(), s["state"].as_str()),
        (Some("3.0.0"), Some("ready"))
    );

    // Every approval is an audit event naming the set and who decided.
    let events = env.ok(&["runs", "events", "--json"]);
    let approvals = events.matches("permissions_approved").count();
    assert_eq!(approvals, 2, "{events}");
    assert!(events.contains("operator:cli"), "{events}");
}

#[test]
fn secrets_are_read_from_stdin_sealed_and_never_shown() {
    let env = Env::new();
    let with_secret = "  network: [https://a.example.com]\n  secrets:\n    - name: token\n      origins: [https://a.example.com]\n";
    env.install("1.0.0", with_secret);
    env.ok(&["skills", "approve", SKILL]);
    let s = env.skill();
    assert_eq!(s["state"], "secrets_missing", "{s}");
    let why = env.why();
    assert!(why.contains("secrets set conformance-fixtures"), "{why}");

    // Undeclared names and values a header cannot carry are refused.
    let o = env.set_secret("other", "x");
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("declares no secret `other` (it declares: token)"),
        "{}",
        stderr(&o)
    );
    let o = env.set_secret("token", "a\r\nX-Evil: 1");
    assert!(!o.status.success());
    assert!(stderr(&o).contains("cannot carry"), "{}", stderr(&o));
    assert!(
        !stderr(&o).contains("X-Evil"),
        "the message repeats no value"
    );

    let o = env.set_secret("token", &format!("{SECRET}\n"));
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(env.skill()["state"], "ready");
    let listed = env.ok(&["secrets", "list", SKILL]);
    assert!(
        listed.contains("token") && !listed.contains(SECRET),
        "{listed}"
    );
    let call = env.call();
    assert!(call.status.success(), "{}", stderr(&call));

    // Nothing the host keeps or prints holds the value.
    let mut seen = vec![listed];
    for args in [
        vec!["skills", "show", SKILL, "--json"],
        vec!["skills", "list", "--json"],
        vec!["runs", "events", "--json"],
        vec!["runs", "list", "--json"],
    ] {
        seen.push(env.ok(&args));
    }
    for text in &seen {
        assert!(!text.contains(SECRET), "printed: {text}");
    }
    let mut files = Vec::new();
    collect(&env.data, &mut files);
    assert!(files.iter().any(|f| f.ends_with("secrets.key")));
    for f in &files {
        let bytes = std::fs::read(f).expect("read data file");
        assert!(
            !bytes.windows(SECRET.len()).any(|w| w == SECRET.as_bytes()),
            "{} holds the secret in the clear",
            f.display()
        );
    }
    use std::os::unix::fs::PermissionsExt as _;
    let mode = std::fs::metadata(env.data.join("secrets.key"))
        .expect("key")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);

    env.ok(&["secrets", "remove", SKILL, "token"]);
    assert_eq!(env.skill()["state"], "secrets_missing");
    let events = env.ok(&["runs", "events", "--json"]);
    assert!(
        events.contains("secret_set") && events.contains("secret_removed"),
        "{events}"
    );
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).expect("read dir").flatten() {
        let p = e.path();
        if p.is_dir() {
            collect(&p, out);
        } else {
            out.push(p);
        }
    }
}
