//! Replicas: three `skillhost serve --http` processes, each with a data dir
//! of its own, sharing one PostgreSQL database, behind a real load balancer
//! (Debian's haproxy, round robin; sessions of the stateful transport kept
//! on one replica by their `Mcp-Session-Id`), serving the official MCP
//! Python SDK client (tests/peers/http_calls.py).
//!
//! What is checked: calls through the balancer land on every replica and
//! all are recorded in the one database; a grant revoked on one replica is
//! seen by another within 1 s (its change feed); a call waiting for
//! approval, made through one replica, is approved on another and runs
//! there, once, its outcome read on the third; two replicas racing to
//! approve one run execute it once; a skill installed through one replica
//! is called through another (unpacked there from the database, verified
//! by digest); a replica killed with `kill -9` in the middle of an approved
//! call leaves the run `interrupted`, marked by another replica once its
//! lease expired; a stateful session works through the balancer.
//!
//! Skipped, saying why, where no PostgreSQL test server is configured
//! (see tests/peers/database.rs); CI always has one.

use crate::common;
use common::{HttpServer, database, free_port, skill_folder, skillhost, start_http_with, stderr};

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use skillhost::SecretKey;
use skillhost_test_plugins as art;

/// Runs `skillhost ARGS` on `data`, failing the test with its stderr.
fn ok(data: &Path, args: &[&str]) -> String {
    let o = skillhost(data, args);
    assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// haproxy in front of the replicas, killed (by its own pid) when dropped.
struct Balancer {
    child: Child,
    port: u16,
}

impl Drop for Balancer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// haproxy on `port`, round robin over `replicas`.
fn balancer(work: &Path, port: u16, replicas: &[u16]) -> Balancer {
    let servers: String = replicas
        .iter()
        .enumerate()
        .map(|(i, p)| format!("  server r{i} 127.0.0.1:{p}\n"))
        .collect();
    let config = format!(
        "global\n  maxconn 512\n\
         defaults\n  mode http\n  timeout connect 5s\n  timeout client 120s\n  timeout server 120s\n\
         frontend mcp\n  bind 127.0.0.1:{port}\n  default_backend replicas\n\
         backend replicas\n  balance roundrobin\n\
         \x20 stick-table type string len 128 size 10k expire 30m\n\
         \x20 stick on req.hdr(mcp-session-id)\n\
         \x20 stick store-response res.hdr(mcp-session-id)\n{servers}"
    );
    let file = work.join("haproxy.cfg");
    std::fs::write(&file, config).expect("write haproxy.cfg");
    let child = Command::new(haproxy())
        .arg("-f")
        .arg(&file)
        .arg("-db")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start haproxy");
    let lb = Balancer { child, port };
    let deadline = Instant::now() + Duration::from_secs(20);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "haproxy did not listen on {port}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    lb
}

fn haproxy() -> PathBuf {
    ["/usr/sbin/haproxy", "/usr/bin/haproxy"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .expect("haproxy is installed (tests/peers/install.sh installs Debian's)")
}

/// The calls of http_calls.py through `url`, in `mode` (`auto`: the
/// stateless 2026-07-28 transport; `legacy`: a session).
fn mcp_calls(url: &str, token: &str, mode: &str, calls: &Value) -> Vec<Value> {
    let report = common::python_peer("http_calls.py", &[url, token, mode, &calls.to_string()]);
    serde_json::from_value(report).expect("a list of call reports")
}

/// One replica: its data dir, its server, its admin API.
struct Replica {
    data: PathBuf,
    server: HttpServer,
    admin: String,
    http: reqwest::blocking::Client,
}

impl Replica {
    /// `serve --http` on `data`, accepting requests addressed to the
    /// balancer at `balancer`.
    fn start(data: &Path, balancer: &str) -> Replica {
        let server = start_http_with(data, 2, &["--allowed-host", balancer]);
        let admin = std::fs::read_to_string(data.join("admin_token"))
            .expect("admin token")
            .trim()
            .to_string();
        Replica {
            data: data.to_path_buf(),
            server,
            admin,
            http: reqwest::blocking::Client::builder()
                .timeout(Duration::from_secs(60))
                .build()
                .expect("client"),
        }
    }

    fn port(&self) -> u16 {
        self.server.port
    }

    fn api(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        api(&self.http, self.port(), &self.admin, method, path, body)
    }

    /// Ok WASM calls this replica counted (`/metrics`).
    fn ok_wasm_calls(&self) -> u64 {
        let text = self
            .http
            .get(format!("http://127.0.0.1:{}/metrics", self.port()))
            .bearer_auth(&self.admin)
            .send()
            .and_then(|r| r.text())
            .expect("metrics");
        text.lines()
            .filter(|l| {
                l.starts_with("skillhost_tool_calls_total{")
                    && l.contains("kind=\"wasm\"")
                    && l.contains("outcome=\"ok\"")
            })
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .map(|v| v as u64)
            .sum()
    }
}

fn api(
    http: &reqwest::blocking::Client,
    port: u16,
    token: &str,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let method = reqwest::Method::from_bytes(method.as_bytes()).expect("method");
    let mut req = http
        .request(method, format!("http://127.0.0.1:{port}/api{path}"))
        .bearer_auth(token);
    if let Some(b) = body {
        req = req.json(&b);
    }
    let resp = req.send().expect("the replica answers");
    let status = resp.status().as_u16();
    let text = resp.text().expect("body");
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

/// The structured result of a call from http_calls.py's report.
fn structured(entry: &Value) -> &Value {
    &entry["result"]["structuredContent"]
}

/// A data dir `name` under `work` whose `settings.json` is `settings`.
fn data_dir(work: &Path, name: &str, settings: Value) -> PathBuf {
    let data = work.join(name);
    std::fs::create_dir_all(&data).expect("data dir");
    std::fs::write(data.join("settings.json"), settings.to_string()).expect("settings");
    data
}

/// Polls `check` every 10 ms for at most `limit`; how long it took.
fn within(limit: Duration, what: &str, mut check: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    while !check() {
        assert!(start.elapsed() < limit, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
    start.elapsed()
}

/// Local skill folders every replica lists: text-tools with
/// `text.regex_replace` needing confirmation, and the hostile skill with
/// `hostile.sleep` needing it too (a long approved call to kill a replica
/// in the middle of).
fn skills(work: &Path) -> Vec<PathBuf> {
    let dir = work.join("skills");
    skill_folder(
        &dir,
        "text-tools",
        art::TEXT_TOOLS_DIR,
        art::TEXT_TOOLS_WASM_PATH,
        &common::regex_replace_mutates,
    );
    skill_folder(
        &dir,
        "hostile",
        art::HOSTILE_DIR,
        art::HOSTILE_WASM_PATH,
        &|m: String| {
            m.replace(
                "- {name: hostile.sleep, description: Sleeps for an hour in WASI., read_only: true,",
                "- {name: hostile.sleep, description: Sleeps for an hour in WASI., read_only: false,",
            )
        },
    );
    vec![dir.join("text-tools"), dir.join("hostile")]
}

#[test]
fn replicas_share_one_database_behind_a_balancer() {
    let Some(db) = database::fresh("replicas") else {
        return;
    };
    let work = tempfile::tempdir().expect("tempdir");
    let skill_dirs = skills(work.path());
    let datas: Vec<PathBuf> = (0..3)
        .map(|i| {
            data_dir(
                work.path(),
                &format!("r{i}"),
                json!({ "skill_dirs": skill_dirs, "database": db.url }),
            )
        })
        .collect();
    // The operator's setup, through replica 0's data dir.
    for step in [
        &["skills", "trust", "text-tools"][..],
        &["skills", "trust", "hostile"],
        &["personas", "add", "ana"],
        &["grants", "skill", "ana", "text-tools", "on"],
        &["grants", "skill", "ana", "hostile", "on"],
    ] {
        ok(&datas[0], step);
    }
    let token = ok(&datas[0], &["tokens", "add", "--persona", "ana"])
        .trim()
        .to_string();
    let lb_port = free_port();
    let lb_addr = format!("127.0.0.1:{lb_port}");
    // Every replica seals under the same key (`secrets.key`): one without
    // it, or with another, is refused with what to do, and changes nothing.
    let o = skillhost(&datas[1], &["personas", "list"]);
    assert!(!o.status.success(), "a replica without the key");
    assert!(
        stderr(&o).contains("copy `secrets.key` from another replica"),
        "{}",
        stderr(&o)
    );
    assert!(
        !datas[1].join("secrets.key").exists(),
        "no key of its own made"
    );
    std::fs::write(datas[1].join("secrets.key"), [7u8; 32]).expect("another key");
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(
            datas[1].join("secrets.key"),
            std::fs::Permissions::from_mode(0o600),
        )
        .expect("0600");
    }
    let o = skillhost(&datas[1], &["personas", "list"]);
    assert!(!o.status.success(), "a replica with another key");
    assert!(
        stderr(&o).contains("is not the key the database's secrets are sealed under"),
        "{}",
        stderr(&o)
    );
    for data in &datas[1..] {
        std::fs::copy(datas[0].join("secrets.key"), data.join("secrets.key")).expect("the key");
    }
    let replicas: Vec<Replica> = datas.iter().map(|d| Replica::start(d, &lb_addr)).collect();
    let lb = balancer(
        work.path(),
        lb_port,
        &replicas.iter().map(Replica::port).collect::<Vec<_>>(),
    );
    let through_lb = format!("http://127.0.0.1:{}/mcp", lb.port);

    // Stateless calls through the balancer: every replica answers some,
    // every one is recorded in the one database.
    let before: Vec<u64> = replicas.iter().map(Replica::ok_wasm_calls).collect();
    let calls: Vec<Value> = (0..6)
        .map(|i| json!({"tool": "text.word_count", "args": {"text": "a b ".repeat(i + 1)}}))
        .collect();
    let report = mcp_calls(&through_lb, &token, "auto", &json!(calls));
    for (i, r) in report.iter().enumerate() {
        assert_eq!(structured(r)["words"], json!(2 * (i + 1)), "{r}");
    }
    let served: Vec<u64> = replicas
        .iter()
        .zip(&before)
        .map(|(r, b)| r.ok_wasm_calls() - b)
        .collect();
    assert_eq!(served.iter().sum::<u64>(), 6, "{served:?}");
    assert!(
        served.iter().filter(|n| **n > 0).count() >= 2,
        "round robin spread the calls: {served:?}"
    );
    within(Duration::from_secs(10), "every call recorded", || {
        let (_, runs) = replicas[2].api("GET", "/runs?tool=text.word_count&limit=50", None);
        runs.as_array().map_or(0, Vec::len) == 6
    });

    // A stateful session through the balancer stays on one replica.
    let report = mcp_calls(
        &through_lb,
        &token,
        "legacy",
        &json!([
            {"tool": "text.word_count", "args": {"text": "one"}},
            {"tool": "text.word_count", "args": {"text": "one two"}},
            {"tool": "text.word_count", "args": {"text": "one two three"}},
        ]),
    );
    for (i, r) in report.iter().enumerate() {
        assert_eq!(structured(r)["words"], json!(i + 1), "{r}");
    }

    // A grant revoked through replica 0 reaches replica 1 within 1 s.
    let sees_regex = |r: &Replica| {
        let (status, body) = r.api("GET", "/personas/ana/tools", None);
        assert_eq!(status, 200, "{body}");
        body.to_string().contains("text.regex_replace")
    };
    assert!(sees_regex(&replicas[1]));
    let revoked = Instant::now();
    ok(&datas[0], &["grants", "skill", "ana", "text-tools", "off"]);
    let took = revoked.elapsed()
        + within(
            Duration::from_secs(1),
            "the revocation on replica 1",
            || !sees_regex(&replicas[1]),
        );
    eprintln!("grant revoked on replica 0, seen by replica 1 after {took:?} (CLI included)");
    ok(&datas[0], &["grants", "skill", "ana", "text-tools", "on"]);
    within(Duration::from_secs(1), "the grant on replica 2", || {
        sees_regex(&replicas[2])
    });

    // An MCP server added, enabled and granted through replica 0's data
    // dir is every replica's (the configuration is the database's): a
    // call through replica 2 runs it in a process of replica 2's own.
    let py_server = common::repo().join("tests/peers/py_server.py");
    let python = common::python();
    for step in [
        &[
            "mcp",
            "add",
            "py",
            "--",
            python.to_str().expect("path"),
            py_server.to_str().expect("path"),
            "--transport",
            "stdio",
        ][..],
        &["mcp", "enable", "py"],
        &["grants", "mcp", "ana", "py", "on"],
    ] {
        ok(&datas[0], step);
    }
    within(Duration::from_secs(1), "py.lookup on replica 2", || {
        let (_, body) = replicas[2].api("GET", "/personas/ana/tools", None);
        body.to_string().contains("py.lookup")
    });
    let report = mcp_calls(
        &format!("http://127.0.0.1:{}/mcp", replicas[2].port()),
        &token,
        "auto",
        &json!([{"tool": "py.lookup", "args": {"key": "k"}}]),
    );
    assert!(report[0].to_string().contains("value-of-k"), "{report:?}");
    assert!(
        !datas[2].join("mcp_servers.json").exists(),
        "the configuration is not in the data dir"
    );
    ok(&datas[1], &["grants", "mcp", "ana", "py", "off"]);
    within(
        Duration::from_secs(1),
        "the MCP revocation on replica 0",
        || {
            let (_, body) = replicas[0].api("GET", "/personas/ana/tools", None);
            !body.to_string().contains("py.lookup")
        },
    );

    // A call through replica 1 waits for approval; approved on replica 0,
    // it runs there, once; replica 2 reads its outcome.
    let waiting = |r: &Replica| -> String {
        let report = mcp_calls(
            &format!("http://127.0.0.1:{}/mcp", r.port()),
            &token,
            "auto",
            &json!([{"tool": "text.regex_replace",
                     "args": {"text": "a1 b22", "pattern": "[0-9]+", "replacement": "#"}}]),
        );
        let s = structured(&report[0]);
        assert_eq!(s["status"], "waiting_approval", "{report:?}");
        s["run_id"].as_str().expect("run id").to_string()
    };
    let run = waiting(&replicas[1]);
    let before: u64 = replicas.iter().map(Replica::ok_wasm_calls).sum();
    let (status, body) = replicas[0].api("POST", &format!("/runs/{run}/approve"), Some(json!({})));
    assert_eq!(status, 200, "{body}");
    let (status, body) = replicas[2].api("GET", &format!("/runs/{run}"), None);
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["outcome"], "ok", "{body}");
    assert_eq!(body["approval"], "approved", "{body}");
    let after: u64 = replicas.iter().map(Replica::ok_wasm_calls).sum();
    assert_eq!(after - before, 1, "the approved call ran once");
    // Approving it again anywhere is refused.
    let (status, body) = replicas[1].api("POST", &format!("/runs/{run}/approve"), Some(json!({})));
    assert_eq!(status, 409, "{body}");

    // Two replicas race to approve one run: it runs once.
    for _ in 0..3 {
        let run = waiting(&replicas[2]);
        let before: u64 = replicas.iter().map(Replica::ok_wasm_calls).sum();
        let answers: Vec<u16> = std::thread::scope(|s| {
            let racers: Vec<_> = [&replicas[0], &replicas[1]]
                .into_iter()
                .map(|r| {
                    let run = run.clone();
                    s.spawn(move || {
                        r.api("POST", &format!("/runs/{run}/approve"), Some(json!({})))
                            .0
                    })
                })
                .collect();
            racers
                .into_iter()
                .map(|t| t.join().expect("racer"))
                .collect()
        });
        let mut sorted = answers.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, [200, 409], "one approval wins: {answers:?}");
        let after: u64 = replicas.iter().map(Replica::ok_wasm_calls).sum();
        assert_eq!(after - before, 1, "the raced run ran once");
    }

    // A skill installed through replica 0 is called through replica 2.
    let (key, _) = SecretKey::generate().expect("key");
    let bytes = common::json_tools_bundle(work.path(), &key, "0.2.0");
    let resp = replicas[0]
        .http
        .post(format!(
            "http://127.0.0.1:{}/api/skills?allow_untrusted=true&replace_builtin=true",
            replicas[0].port()
        ))
        .bearer_auth(&replicas[0].admin)
        .header("content-type", "application/octet-stream")
        .body(bytes)
        .send()
        .expect("upload");
    assert_eq!(resp.status().as_u16(), 201, "{:?}", resp.text());
    let (status, body) = replicas[0].api("POST", "/skills/json-tools/trust", Some(json!({})));
    assert_eq!(status, 200, "{body}");
    ok(&datas[0], &["grants", "skill", "ana", "json-tools", "on"]);
    within(
        Duration::from_secs(5),
        "json-tools@0.2.0 on replica 2",
        || {
            let (_, body) = replicas[2].api("GET", "/skills", None);
            body.as_array().is_some_and(|skills| {
                skills.iter().any(|s| {
                    s["name"] == "json-tools" && s["version"] == "0.2.0" && s["source"] == "managed"
                })
            })
        },
    );
    let report = mcp_calls(
        &format!("http://127.0.0.1:{}/mcp", replicas[2].port()),
        &token,
        "auto",
        &json!([{"tool": "json.query", "args": {"document": {"a": [1, 2]}, "pointer": "/a/1"}}]),
    );
    assert!(
        report[0].to_string().contains('2') && report[0].get("error").is_none(),
        "{report:?}"
    );
    let mark = replicas[2]
        .data
        .join("skills/json-tools/0.2.0/.skillhost/bundle.sha256");
    assert!(
        mark.exists(),
        "replica 2 unpacked the bundle from the database"
    );

    // kill -9 of the replica running an approved call: another replica
    // marks the run interrupted once the lease expired.
    let report = mcp_calls(
        &format!("http://127.0.0.1:{}/mcp", replicas[0].port()),
        &token,
        "auto",
        &json!([{"tool": "hostile.sleep", "args": {}}]),
    );
    let s = structured(&report[0]);
    assert_eq!(s["status"], "waiting_approval", "{report:?}");
    let run = s["run_id"].as_str().expect("run id").to_string();
    let mut replicas = replicas;
    let victim = replicas.remove(1);
    let approving = {
        let http = victim.http.clone();
        let (port, admin, run) = (victim.port(), victim.admin.clone(), run.clone());
        std::thread::spawn(move || {
            // The connection drops when the replica dies.
            let _ = http
                .post(format!("http://127.0.0.1:{port}/api/runs/{run}/approve"))
                .bearer_auth(admin)
                .json(&json!({}))
                .send();
        })
    };
    within(Duration::from_secs(10), "the approved call running", || {
        let (_, body) = replicas[0].api("GET", &format!("/runs/{run}"), None);
        body["outcome"] == "running"
    });
    let Replica { mut server, .. } = victim;
    server.child.kill().expect("kill -9 the replica");
    let _ = server.child.wait();
    approving.join().expect("approver");
    let killed = Instant::now();
    let took = killed.elapsed()
        + within(
            Duration::from_secs(30),
            "the run marked interrupted",
            || {
                let (_, body) = replicas[1].api("GET", &format!("/runs/{run}"), None);
                body["outcome"] == "interrupted"
            },
        );
    eprintln!("run interrupted {took:?} after its replica was killed");
    let (_, body) = replicas[0].api("GET", &format!("/runs/{run}"), None);
    assert!(
        body["error"].as_str().is_some_and(|e| e.contains("lease")),
        "{body}"
    );
    // The survivors serve on.
    let report = mcp_calls(
        &format!("http://127.0.0.1:{}/mcp", replicas[1].port()),
        &token,
        "auto",
        &json!([{"tool": "text.word_count", "args": {"text": "still here"}}]),
    );
    assert_eq!(structured(&report[0])["words"], 2, "{report:?}");
    drop(lb);
}

/// `skillhost migrate --to`: a data dir populated on SQLite (a persona, a
/// grant, a token, runs, a ref, a signed install) copied into an empty
/// PostgreSQL database; a fresh data dir on that database then lists the
/// same personas, tokens, runs and refs, unpacks the install from the
/// database and calls it, and reads the ref another data dir stored. A
/// second migration into the now populated database is refused, changing
/// nothing.
#[test]
fn migrate_copies_a_sqlite_data_dir_into_postgres() {
    let Some(db) = database::fresh("migrate") else {
        return;
    };
    let work = tempfile::tempdir().expect("tempdir");
    let w = |name: &str| work.path().join(name).to_string_lossy().into_owned();
    let src = work.path().join("src");
    ok(&src, &["personas", "add", "ana"]);
    ok(&src, &["grants", "skill", "ana", "text-tools", "on"]);
    ok(
        &src,
        &["tokens", "add", "--persona", "ana", "--label", "laptop"],
    );
    ok(
        &src,
        &[
            "call",
            "text.word_count",
            "--persona",
            "ana",
            "--args",
            r#"{"text": "a b c"}"#,
        ],
    );
    std::fs::write(w("notes.txt"), "one two three four").expect("ref file");
    let ref_id = ok(&src, &["refs", "add", &w("notes.txt")])
        .trim()
        .to_string();
    // A signed install.
    ok(&src, &["keygen", "--out", &w("alice")]);
    let skill = work.path().join("json-tools-src");
    std::fs::create_dir_all(&skill).expect("dir");
    let manifest = std::fs::read_to_string(Path::new(art::JSON_TOOLS_DIR).join("skill.yaml"))
        .expect("manifest")
        .replace("version: 0.1.0", "version: 0.3.0");
    std::fs::write(skill.join("skill.yaml"), manifest).expect("manifest");
    std::fs::copy(art::JSON_TOOLS_WASM_PATH, skill.join("json_tools.wasm")).expect("wasm");
    ok(
        &src,
        &[
            "pack",
            &w("json-tools-src"),
            "--key",
            &w("alice.key"),
            "--out",
            &w("j.skill"),
        ],
    );
    ok(&src, &["trust", "add", &w("alice.pub"), "--name", "alice"]);
    ok(&src, &["install", &w("j.skill")]);
    ok(
        &src,
        &[
            "mcp",
            "add",
            "py",
            "--",
            common::python().to_str().expect("path"),
            common::repo()
                .join("tests/peers/py_server.py")
                .to_str()
                .expect("path"),
            "--transport",
            "stdio",
        ],
    );

    let listed = |data: &Path, what: &[&str]| -> Value {
        serde_json::from_str(&ok(data, what)).expect("JSON")
    };
    let before: Vec<Value> = [
        &["personas", "list", "--json"][..],
        &["tokens", "list", "--json"],
        &["runs", "list", "--json"],
        &["refs", "list", "--json"],
    ]
    .iter()
    .map(|a| listed(&src, a))
    .collect();

    let report: Value =
        serde_json::from_str(&ok(&src, &["migrate", "--to", &db.url, "--json"])).expect("report");
    let rows = |table: &str| {
        report["tables"]
            .as_array()
            .and_then(|t| t.iter().find(|e| e[0] == table))
            .map_or(-1, |e| e[1].as_i64().unwrap_or(-1))
    };
    assert_eq!(rows("personas"), 1, "{report}");
    assert_eq!(rows("api_tokens"), 1, "{report}");
    assert_eq!(rows("installed_skills"), 1, "{report}");
    assert!(rows("runs") >= 1, "{report}");
    assert_eq!(report["refs"], 1, "{report}");
    assert_eq!(report["blobs"], 2, "the bundle and the ref: {report}");
    assert_eq!(report["installs_without_bundle"], json!([]), "{report}");

    // A data dir on the database sees the same state.
    let dst = data_dir(work.path(), "dst", json!({ "database": db.url }));
    // It needs the source's key (the MCP configuration went sealed under it).
    let o = skillhost(&dst, &["personas", "list"]);
    assert!(
        stderr(&o).contains("copy `secrets.key` from another replica"),
        "{}",
        stderr(&o)
    );
    std::fs::copy(src.join("secrets.key"), dst.join("secrets.key")).expect("the key");
    let servers = listed(&dst, &["mcp", "list", "--json"]);
    assert!(servers.to_string().contains("py_server.py"), "{servers}");
    let after: Vec<Value> = [
        &["personas", "list", "--json"][..],
        &["tokens", "list", "--json"],
        &["runs", "list", "--json"],
        &["refs", "list", "--json"],
    ]
    .iter()
    .map(|a| listed(&dst, a))
    .collect();
    assert_eq!(before, after);
    // The install, unpacked from the database, checked and called.
    let out = ok(
        &dst,
        &[
            "call",
            "json.query",
            "--args",
            r#"{"document": {"a": [5, 6]}, "pointer": "/a/1"}"#,
        ],
    );
    assert!(out.contains('6'), "{out}");
    assert!(
        dst.join("skills/json-tools/0.3.0/.skillhost/bundle.sha256")
            .exists()
    );
    // The ref, read from the database.
    let out = ok(
        &dst,
        &[
            "call",
            "text.count_ref",
            "--ref",
            &ref_id,
            "--args",
            &json!({"ref": ref_id}).to_string(),
        ],
    );
    let counted: Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(counted["words"], 4, "{out}");

    // Migrating again is refused, and changes nothing.
    let o = skillhost(&src, &["migrate", "--to", &db.url]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("already holds skillhost state"),
        "{}",
        stderr(&o)
    );
    assert_eq!(listed(&dst, &["personas", "list", "--json"]), before[0]);
}

/// While a replica's change feed is cut (its connection ended by the
/// server), the replica asks the database on every check again: a change
/// made meanwhile, whose notification it never gets, applies at once, not
/// when the feed returns or a second later. The feed reconnects by itself,
/// and changes reach the replica through it again.
#[test]
fn a_replica_whose_change_feed_is_cut_still_sees_every_change() {
    let Some(db) = database::fresh("feed_cut") else {
        return;
    };
    let work = tempfile::tempdir().expect("tempdir");
    let skill_dirs = skills(work.path());
    let data = data_dir(
        work.path(),
        "r0",
        json!({ "skill_dirs": skill_dirs, "database": db.url }),
    );
    ok(&data, &["skills", "trust", "text-tools"]);
    ok(&data, &["personas", "add", "ana"]);
    let replica = Replica::start(&data, "127.0.0.1:1");
    let sees_regex = || {
        let (status, body) = replica.api("GET", "/personas/ana/tools", None);
        assert_eq!(status, 200, "{body}");
        body.to_string().contains("text.regex_replace")
    };
    let feeds = || {
        db.sql(
            "SELECT count(*) FROM pg_stat_activity \
             WHERE application_name = 'skillhost-feed' AND datname = current_database()",
        )
    };
    within(Duration::from_secs(10), "the feed listening", || {
        feeds() == "1"
    });
    assert!(!sees_regex());
    ok(&data, &["grants", "skill", "ana", "text-tools", "on"]);
    within(
        Duration::from_secs(1),
        "the grant, through the feed",
        &sees_regex,
    );

    db.sql(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
         WHERE application_name = 'skillhost-feed' AND datname = current_database()",
    );
    ok(&data, &["grants", "skill", "ana", "text-tools", "off"]);
    // Not a notification's doing (the feed is away, and comes back
    // only after DB_FEED_RETRY) nor the feed's one-second recheck.
    within(
        Duration::from_millis(200),
        "the revocation while the feed is away",
        || !sees_regex(),
    );

    within(Duration::from_secs(10), "the feed back", || feeds() == "1");
    ok(&data, &["grants", "skill", "ana", "text-tools", "on"]);
    within(
        Duration::from_secs(1),
        "the grant, through the feed again",
        &sees_regex,
    );
}

/// Two replicas' operators changing the shared MCP configuration at once
/// lose nothing: each change is a read-modify-write under the documents'
/// lock, and every server added through either data dir is listed by both.
#[test]
fn concurrent_mcp_changes_on_two_replicas_lose_nothing() {
    let Some(db) = database::fresh("mcp_concurrent") else {
        return;
    };
    let work = tempfile::tempdir().expect("tempdir");
    let datas: Vec<PathBuf> = (0..2)
        .map(|i| data_dir(work.path(), &format!("r{i}"), json!({ "database": db.url })))
        .collect();
    ok(&datas[0], &["personas", "add", "ana"]);
    std::fs::copy(datas[0].join("secrets.key"), datas[1].join("secrets.key")).expect("the key");
    std::thread::scope(|s| {
        for (i, data) in datas.iter().enumerate() {
            s.spawn(move || {
                for n in 0..6 {
                    let name = format!("s{i}x{n}");
                    ok(data, &["mcp", "add", &name, "--", "node", "server.js"]);
                    ok(data, &["grants", "mcp", "ana", &name, "on"]);
                }
            });
        }
    });
    for data in &datas {
        let listed: Value =
            serde_json::from_str(&ok(data, &["mcp", "list", "--json"])).expect("JSON");
        let servers = listed.as_array().expect("a list");
        assert_eq!(servers.len(), 12, "{listed}");
        for s in servers {
            assert_eq!(s["allowed_persona_ids"], json!(["ana"]), "{s}");
        }
    }
    // The database holds the configuration sealed: no server's command in
    // the clear.
    let stored = db.sql("SELECT encode(sealed, 'escape') FROM sealed_documents");
    assert!(
        !stored.is_empty() && !stored.contains("server.js"),
        "{stored}"
    );
}

/// A replica reaches PostgreSQL over TLS when its URL says
/// `sslmode=require`, verifying the server's certificate: against the CA
/// `sslrootcert` names (every connection it makes, the change feed's too,
/// is encrypted), and refusing, saying why, a server whose certificate it
/// cannot verify (the platform's roots do not know the test CA; another
/// CA's file).
#[test]
fn a_replica_reaches_postgres_over_verified_tls() {
    let Some(db) = database::fresh("tls") else {
        return;
    };
    let Some(ca) = database::ca_file() else {
        eprintln!("skipped: the tests' PostgreSQL server has no test CA (tests/peers/postgres.sh)");
        return;
    };
    let work = tempfile::tempdir().expect("tempdir");
    let data_on = |name: &str, url: &str| data_dir(work.path(), name, json!({ "database": url }));
    let tls_url = format!("{}?sslmode=require&sslrootcert={}", db.url, ca.display());
    let data = data_on("tls", &tls_url);
    ok(&data, &["personas", "add", "ana"]);
    let replica = Replica::start(&data, "127.0.0.1:1");
    let (status, body) = replica.api("GET", "/personas", None);
    assert_eq!(status, 200, "{body}");
    assert!(body.to_string().contains("ana"), "{body}");
    let connections = |ssl: bool| {
        db.sql(&format!(
            "SELECT count(*) FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) \
             WHERE a.datname = current_database() AND a.application_name LIKE 'skillhost%' \
             AND s.ssl = {ssl}"
        ))
    };
    within(Duration::from_secs(10), "the feed's connection", || {
        connections(true).parse::<u32>().unwrap_or(0) >= 2
    });
    assert_eq!(connections(false), "0", "a connection in the clear");

    // The platform's roots do not know the test CA: refused, saying so.
    let unverified = data_on("unverified", &format!("{}?sslmode=require", db.url));
    let o = skillhost(&unverified, &["personas", "list"]);
    assert!(!o.status.success());
    let e = stderr(&o);
    assert!(
        e.contains("could not be verified") && e.contains("sslrootcert=PATH"),
        "{e}"
    );
    // Another CA's certificate (a fresh one): refused too.
    let other_ca = work.path().join("other-ca.pem");
    let made = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=another CA",
            "-keyout",
        ])
        .arg(work.path().join("other-ca.key"))
        .arg("-out")
        .arg(&other_ca)
        .output()
        .expect("openssl");
    assert!(made.status.success(), "{}", stderr(&made));
    let wrong = data_on(
        "wrong-ca",
        &format!(
            "{}?sslmode=require&sslrootcert={}",
            db.url,
            other_ca.display()
        ),
    );
    let o = skillhost(&wrong, &["personas", "list"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("could not be verified"),
        "{}",
        stderr(&o)
    );
    // The replica went on serving.
    let (status, _) = replica.api("GET", "/personas", None);
    assert_eq!(status, 200);
}
