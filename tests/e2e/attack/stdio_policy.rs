//! Finding A: the stdio policy let inline code and code-loading
//! environment variables through.
//!
//! Each attack is a server entry whose command is on the default allowlist
//! (`python3`, `node`, `npx`) but which runs code that is in the entry
//! itself: an inline-code flag in a form the old check missed (`-Ic`,
//! `-cCODE`, `-pe`, `npx -c`, `npx node -e`), or a variable that makes the
//! runtime load code (`PYTHONPATH`, `NODE_OPTIONS`, `PATH`). The code, if it
//! ran, would create a marker file; the test asserts that it never does,
//! that the refusal names the offending argument or variable, and that the
//! host refuses the code-loading variables when the entry is added.
//!
//! The paths taken are the real ones: [`McpManager`] starting the server
//! (what `skillhost serve` and every call do), [`test_server`] (`skillhost
//! mcp test`), and [`skillhost::Host::add_mcp_server`] (`skillhost mcp add`
//! and `POST /api/mcp-servers` call it).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use skillhost_mcp::{
    ManagerOptions, McpManager, RestartPolicy, Secret, ServerConfig, ServerState, StdioPolicy,
    Timeouts, test_server,
};

/// How long a refused server may take to settle (it never starts, so this
/// is only a bound for a broken build).
const SETTLE: Duration = Duration::from_secs(20);

/// One attack: a server entry and the text its refusal must contain.
struct Attack {
    name: &'static str,
    command: &'static str,
    args: Vec<String>,
    env: BTreeMap<String, String>,
    /// The offending argument or variable, as the refusal names it.
    names: &'static str,
}

/// A scratch folder holding the markers, an empty script per runtime,
/// a `sitecustomize.py`, a preload module and a fake `python3`.
struct Lab {
    tmp: tempfile::TempDir,
}

impl Lab {
    fn new() -> Lab {
        let tmp = tempfile::tempdir().expect("temp dir");
        let lab = Lab { tmp };
        std::fs::write(lab.path("empty.py"), "").unwrap();
        std::fs::write(lab.path("empty.js"), "").unwrap();
        std::fs::create_dir_all(lab.path("site")).unwrap();
        std::fs::write(
            lab.path("site/sitecustomize.py"),
            python_touch(&lab.marker("pythonpath")),
        )
        .unwrap();
        std::fs::write(
            lab.path("preload.js"),
            js_touch(&lab.marker("node-options")),
        )
        .unwrap();
        std::fs::create_dir_all(lab.path("bin")).unwrap();
        let fake = lab.path("bin/python3");
        std::fs::write(
            &fake,
            format!("#!/bin/sh\n: > '{}'\n", lab.marker("path").display()),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        lab
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.tmp.path().join(rel)
    }

    /// The file the attack named `name` creates if its code runs.
    fn marker(&self, name: &str) -> PathBuf {
        self.path(&format!("ran-{name}"))
    }

    fn arg(&self, rel: &str) -> String {
        self.path(rel).to_str().expect("UTF-8 temp path").to_owned()
    }

    fn attacks(&self) -> Vec<Attack> {
        let env = |k: &str, v: String| BTreeMap::from([(k.to_owned(), v)]);
        vec![
            Attack {
                name: "python-cluster",
                command: "python3",
                args: vec!["-Ic".into(), python_touch(&self.marker("python-cluster"))],
                env: BTreeMap::new(),
                names: "\"-Ic\"",
            },
            Attack {
                name: "python-attached",
                command: "python3",
                args: vec![format!(
                    "-c{}",
                    python_touch(&self.marker("python-attached"))
                )],
                env: BTreeMap::new(),
                names: "\"-cimport os",
            },
            Attack {
                name: "node-pe",
                command: "node",
                args: vec!["-pe".into(), js_touch(&self.marker("node-pe"))],
                env: BTreeMap::new(),
                names: "\"-pe\"",
            },
            Attack {
                name: "npx-call",
                command: "npx",
                args: vec![
                    "-c".into(),
                    format!("touch '{}'", self.marker("npx-call").display()),
                ],
                env: BTreeMap::new(),
                names: "\"-c\"",
            },
            Attack {
                name: "npx-node",
                command: "npx",
                args: vec![
                    "node".into(),
                    "-e".into(),
                    js_touch(&self.marker("npx-node")),
                ],
                env: BTreeMap::new(),
                names: "\"-e\"",
            },
            Attack {
                name: "pythonpath",
                command: "python3",
                args: vec![self.arg("empty.py")],
                env: env("PYTHONPATH", self.arg("site")),
                names: "PYTHONPATH",
            },
            Attack {
                name: "node-options",
                command: "node",
                args: vec![self.arg("empty.js")],
                env: env(
                    "NODE_OPTIONS",
                    format!("--require {}", self.arg("preload.js")),
                ),
                names: "NODE_OPTIONS",
            },
            Attack {
                name: "path",
                command: "python3",
                args: vec![self.arg("empty.py")],
                env: env("PATH", self.arg("bin")),
                names: "PATH",
            },
        ]
    }
}

/// Python that creates `marker`.
fn python_touch(marker: &Path) -> String {
    format!(
        "import os; open({:?}, 'w').close()\n",
        marker.display().to_string()
    )
}

/// JavaScript that creates `marker`.
fn js_touch(marker: &Path) -> String {
    format!(
        "require('fs').writeFileSync({:?}, '')",
        marker.display().to_string()
    )
}

fn config(a: &Attack) -> ServerConfig {
    let mut s = ServerConfig::stdio(a.name, a.command, a.args.clone());
    s.env = a
        .env
        .iter()
        .map(|(k, v)| (k.clone(), Secret::new(v.clone())))
        .collect();
    s.timeouts = Timeouts {
        connect_secs: Some(5.0),
        ..Default::default()
    };
    s
}

/// A manager that gives up on a server at its first failure.
fn manager(root: &Path, policy: StdioPolicy) -> McpManager {
    let mut opts = ManagerOptions::new(root.to_path_buf());
    opts.policy = policy;
    opts.restart = RestartPolicy {
        max_restarts: 0,
        ..RestartPolicy::default()
    };
    opts.stop_grace = Duration::from_millis(200);
    McpManager::new(opts)
}

fn assert_not_run(lab: &Lab, a: &Attack, path: &str) {
    assert!(
        !lab.marker(a.name).exists(),
        "{}: the attack's code ran when the server was started by {path}",
        a.name
    );
}

/// Every attack, started by the manager and by `test_server`, under the
/// default policy and under an operator allowlist naming the launchers
/// themselves: refused before anything runs, the refusal naming the
/// offending argument or variable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inline_code_and_code_loading_env_are_refused_before_anything_runs() {
    let lab = Lab::new();
    let root = lab.path("data");
    let policies = [
        ("the default policy", StdioPolicy::default()),
        (
            "an allowlist naming the launchers",
            StdioPolicy {
                allow_arbitrary: false,
                extra_allowed: vec!["python3".into(), "node".into(), "npx".into()],
            },
        ),
    ];
    for (which, policy) in policies {
        let m = manager(&root, policy.clone());
        for a in lab.attacks() {
            let s = config(&a);
            m.start(s.clone());
            let st = m
                .wait_settled(a.name, SETTLE)
                .await
                .expect("the server is registered");
            let why = st.last_error.clone().unwrap_or_default();
            assert_eq!(st.state, ServerState::Failed, "{}, {which}: {st:?}", a.name);
            assert!(
                why.contains(a.names) && (why.contains("instead") || why.contains("`allow_env`")),
                "{}, {which}: the refusal must name {} and say what to do: {why}",
                a.name,
                a.names
            );
            assert_not_run(&lab, &a, "the manager");

            let report = test_server(
                &s,
                &policy,
                &root,
                &skillhost_mcp::TokenHome::Files(root.clone()),
            )
            .await;
            assert!(!report.ok, "{}, {which}: {report:?}", a.name);
            let connect = report.steps.first().and_then(|s| s.error.clone());
            assert!(
                connect.as_deref().is_some_and(|e| e.contains(a.names)),
                "{}, {which}: test_server must refuse at connect: {report:?}",
                a.name
            );
            assert_not_run(&lab, &a, "test_server");
        }
        m.shutdown().await;
    }
}

/// What the operator allows still runs: a variable listed in the entry's
/// `allow_env` (the host accepts the entry, the manager starts it and the
/// variable takes effect), and everything under `mcp_allow_arbitrary_stdio`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allow_env_and_allow_arbitrary_still_let_the_operator_decide() {
    let lab = Lab::new();
    let attacks = lab.attacks();
    let by_name = |n: &str| attacks.iter().find(|a| a.name == n).expect("attack");

    let pythonpath = by_name("pythonpath");
    let mut allowed = config(pythonpath);
    allowed.allow_env = vec!["PYTHONPATH".into()];
    let host = skillhost::HostBuilder::new(lab.path("host"))
        .build()
        .await
        .expect("host");
    host.add_mcp_server(allowed.clone())
        .expect("an allowed variable is accepted");
    host.shutdown().await;
    let m = manager(&lab.path("data"), StdioPolicy::default());
    m.start(allowed);
    m.wait_settled(pythonpath.name, SETTLE).await;
    m.shutdown().await;
    assert!(
        lab.marker(pythonpath.name).exists(),
        "PYTHONPATH, allowed by `allow_env`, took effect"
    );

    let arbitrary = StdioPolicy {
        allow_arbitrary: true,
        extra_allowed: Vec::new(),
    };
    let m = manager(&lab.path("data"), arbitrary);
    for name in ["python-cluster", "node-pe"] {
        m.start(config(by_name(name)));
        m.wait_settled(name, SETTLE).await;
        assert!(
            lab.marker(name).exists(),
            "{name} runs under mcp_allow_arbitrary_stdio"
        );
    }
    m.shutdown().await;
}

/// The host refuses a server entry that sets a code-loading variable when
/// it is added (the path of `skillhost mcp add`, the HTTP API and imports),
/// naming the variable and how to allow it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_host_refuses_code_loading_env_when_a_server_is_added() {
    let lab = Lab::new();
    let host = skillhost::HostBuilder::new(lab.path("host"))
        .build()
        .await
        .expect("host");
    let mut attacks: Vec<Attack> = lab
        .attacks()
        .into_iter()
        .filter(|a| !a.env.is_empty())
        .collect();
    attacks.push(Attack {
        name: "ld-preload",
        command: "python3",
        args: vec![lab.arg("empty.py")],
        env: BTreeMap::from([("LD_PRELOAD".to_owned(), lab.arg("evil.so"))]),
        names: "LD_PRELOAD",
    });
    for a in &attacks {
        let err = host
            .add_mcp_server(config(a))
            .expect_err(&format!("{}: a code-loading variable was accepted", a.name));
        let msg = err.to_string();
        assert!(
            matches!(err, skillhost::ServerError::Invalid(_))
                && msg.contains(a.names)
                && msg.contains("allow_env"),
            "{}: the refusal must name {} and `allow_env`: {msg}",
            a.name,
            a.names
        );
    }
    assert!(
        host.mcp_servers().expect("config").servers.is_empty(),
        "nothing was added"
    );
    host.shutdown().await;
}
