//! The operator's console at `/` of `skillhost serve --http`: its security
//! over raw HTTP (sign-in, cookie flags, CSRF, foreign origins, headers,
//! persona tokens, the audit of every refusal), and the day of an
//! operator in a real headless Chromium driven through chromedriver
//! (WebDriver, `fantoccini`): sign in, a call by a persona's MCP client
//! (the official Python SDK) shows in the queue without a reload, its
//! hostile arguments shown as text, approve, the result on the run's page,
//! sign out. Screenshots of each page go to `target/console-screenshots/`.

use crate::common;
use common::{
    HttpServer, copy_tree, free_port, local_skills_data, python, repo, skillhost, start_http_with,
    stderr, stdout,
};

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// Persona `support` granted text-tools (`text.regex_replace` needs
/// confirmation); its token.
pub(crate) fn data_dir(work: &Path) -> (PathBuf, String) {
    let data = local_skills_data(work, false);
    for args in [
        &["skills", "trust", "text-tools"][..],
        &["personas", "add", "support"],
        &["grants", "skill", "support", "text-tools", "on"],
    ] {
        let o = skillhost(&data, args);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    }
    let o = skillhost(&data, &["tokens", "add", "--persona", "support"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let token = stdout(&o)
        .split_whitespace()
        .find(|w| w.starts_with("skh_"))
        .expect("a token")
        .to_string();
    (data, token)
}

pub(crate) fn start(data: &Path) -> HttpServer {
    // Calls that need confirmation wait for the operator (the console).
    start_http_with(data, 5, &["--no-elicitation"])
}

pub(crate) fn admin_token(data: &Path) -> String {
    std::fs::read_to_string(data.join("admin_token"))
        .expect("admin token")
        .trim()
        .to_string()
}

/// A response: status, headers (lower-case names) and body.
pub(crate) struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Reply {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// One HTTP/1.1 request with a form body (when `form` is given).
pub(crate) fn request(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    form: Option<&str>,
) -> Reply {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    let mut req =
        format!("{method} {path} HTTP/1.1\r\nConnection: close\r\nHost: 127.0.0.1:{port}\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    match form {
        Some(body) => req.push_str(&format!(
            "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )),
        None => req.push_str("\r\n"),
    }
    s.write_all(req.as_bytes()).expect("send");
    let mut resp = String::new();
    let _ = s.read_to_string(&mut resp);
    let (head, body) = resp.split_once("\r\n\r\n").unwrap_or((&resp, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Reply {
        status,
        headers,
        body: body.to_string(),
    }
}

/// A signed-in page at `path`, fetched as the console's script fetches
/// it (the cookie and the CSRF token in its header).
pub(crate) fn page(port: u16, signed: &Signed, path: &str) -> Reply {
    request(
        port,
        "GET",
        path,
        &[
            ("Cookie", signed.cookie.as_str()),
            ("X-Skillhost-Csrf", signed.csrf.as_str()),
        ],
        None,
    )
}

/// The CSRF token a sign-in's answer hands the console's script.
fn handed_csrf(body: &str) -> String {
    let at = body
        .find("data-csrf=\"")
        .unwrap_or_else(|| panic!("the sign-in hands no token: {body}"))
        + 11;
    body[at..at + 64].to_string()
}

/// A signed-in console session over raw HTTP: its cookie (`name=value`)
/// and its CSRF token, as the sign-in hands them to the console's script.
pub(crate) struct Signed {
    pub cookie: String,
    pub csrf: String,
}

/// Signs in to the console on `port` with the admin token.
pub(crate) fn sign_in(port: u16, admin: &str) -> Signed {
    let origin = format!("http://127.0.0.1:{port}");
    let r = request(
        port,
        "POST",
        "/sign-in",
        &[("Origin", &origin)],
        Some(&format!("token={admin}")),
    );
    let cookie = r
        .header("set-cookie")
        .and_then(|c| c.split(';').next())
        .unwrap_or_else(|| panic!("no session: {} {}", r.status, r.body))
        .to_string();
    assert_eq!(r.status, 200, "{}", r.body);
    let csrf = handed_csrf(&r.body);
    Signed { cookie, csrf }
}

pub(crate) fn events(data: &Path) -> Vec<Value> {
    let o = skillhost(data, &["runs", "events", "--json", "--limit", "500"]);
    assert!(o.status.success(), "{}", stderr(&o));
    serde_json::from_str::<Value>(&stdout(&o))
        .expect("events JSON")
        .as_array()
        .expect("a list")
        .clone()
}

/// The refusals recorded whose text mentions `what`: waits (bounded) for
/// `at_least` (the writer commits them within a group commit).
pub(crate) fn refusals(data: &Path, what: &str, at_least: usize) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let found: Vec<Value> = events(data)
            .into_iter()
            .filter(|e| e["kind"] == "refused" && e.to_string().contains(what))
            .collect();
        if found.len() >= at_least || Instant::now() > deadline {
            return found;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn console_sign_in_csrf_and_headers_hold() {
    let work = tempfile::tempdir().expect("tempdir");
    let (data, persona_token) = data_dir(work.path());
    let server = start(&data);
    let port = server.port;
    let admin = admin_token(&data);
    let origin = format!("http://127.0.0.1:{port}");

    // Not signed in: every page leads to the sign-in.
    for path in ["/", "/approvals", "/runs/run_000000000000000000000000"] {
        let r = request(port, "GET", path, &[], None);
        assert_eq!(r.status, 303, "{path}");
        assert_eq!(r.header("location"), Some("/sign-in"), "{path}");
    }
    let r = request(port, "GET", "/live", &[], None);
    assert_eq!(r.status, 401);
    let r = request(port, "GET", "/approvals/queue", &[], None);
    assert_eq!(r.status, 401);

    // The sign-in page: strict headers, no inline script or style.
    let r = request(port, "GET", "/sign-in", &[], None);
    assert_eq!(r.status, 200);
    let csp = r.header("content-security-policy").expect("a CSP");
    for part in [
        "default-src 'none'",
        "script-src 'self'",
        "frame-ancestors 'none'",
        "form-action 'self'",
    ] {
        assert!(csp.contains(part), "{csp}");
    }
    assert!(!csp.contains("unsafe"), "{csp}");
    assert_eq!(r.header("x-content-type-options"), Some("nosniff"));
    assert!(
        !r.body.contains("<script>") && !r.body.contains("style="),
        "{}",
        r.body
    );

    // A persona token cannot sign in; neither can a made-up one. Both are
    // audited, neither sets a cookie.
    for (token, says) in [
        (persona_token.as_str(), "a persona token cannot sign in"),
        (
            "skh_0000000000000000000000000000000000000000000",
            "not the admin token",
        ),
        ("", "not the admin token"),
    ] {
        let r = request(
            port,
            "POST",
            "/sign-in",
            &[("Origin", &origin)],
            Some(&format!("token={token}")),
        );
        assert_eq!(r.status, 401, "{}", r.body);
        assert!(r.header("set-cookie").is_none());
        assert!(r.body.contains(says), "{}", r.body);
        assert!(
            !r.body.contains(token) || token.is_empty(),
            "the token is echoed"
        );
    }
    let refused = refusals(&data, "console sign-in", 3);
    assert_eq!(refused.len(), 3, "{refused:?}");
    assert!(
        refused.iter().any(|e| e["persona"] == "support"),
        "{refused:?}"
    );

    // A sign-in from another site (foreign Origin) is refused before it is read.
    let r = request(
        port,
        "POST",
        "/sign-in",
        &[("Origin", "http://evil.example")],
        Some(&format!("token={admin}")),
    );
    assert_eq!(r.status, 403);
    assert!(r.header("set-cookie").is_none());

    // The admin token signs in: the cookie's flags, and the CSRF token
    // handed to the console's script (in the answer's page, never the
    // admin token).
    let r = request(
        port,
        "POST",
        "/sign-in",
        &[("Origin", &origin)],
        Some(&format!("token={admin}")),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(
        !r.body.contains(&admin),
        "the sign-in shows the admin token"
    );
    let csrf = handed_csrf(&r.body);
    let set = r.header("set-cookie").expect("a cookie").to_string();
    for flag in ["HttpOnly", "SameSite=Strict", "Path=/", "Max-Age="] {
        assert!(set.contains(flag), "{set}");
    }
    assert!(!set.contains(&admin), "the cookie is not the token");
    assert!(!set.contains(&csrf), "the cookie is not the CSRF token");
    let cookie = set.split(';').next().expect("name=value").to_string();
    let signed = Signed {
        cookie: cookie.clone(),
        csrf: csrf.clone(),
    };
    // Behind a TLS proxy the cookie is Secure.
    let r = request(
        port,
        "POST",
        "/sign-in",
        &[("Origin", &origin), ("X-Forwarded-Proto", "https")],
        Some(&format!("token={admin}")),
    );
    assert!(
        r.header("set-cookie")
            .is_some_and(|c| c.contains("; Secure"))
    );

    // The cookie alone gets the empty shell (its script fetches the page);
    // with the token, the page. Neither shows a token.
    let r = request(port, "GET", "/approvals", &[("Cookie", &cookie)], None);
    assert_eq!(r.status, 200);
    assert!(r.body.contains("id=\"console-shell\""), "{}", r.body);
    assert!(!r.body.contains("Nothing is waiting"), "{}", r.body);
    assert!(!r.body.contains(&csrf) && !r.body.contains(&admin));
    let r = page(port, &signed, "/approvals");
    assert_eq!(r.status, 200);
    assert!(r.body.contains("Nothing is waiting"), "{}", r.body);
    assert!(!r.body.contains(&csrf) && !r.body.contains(&admin));
    // A wrong token in the header is refused, and audited.
    let r = request(
        port,
        "GET",
        "/approvals",
        &[("Cookie", &cookie), ("X-Skillhost-Csrf", &"0".repeat(64))],
        None,
    );
    assert_eq!(r.status, 403, "{}", r.body);
    assert!(!refusals(&data, "console page", 1).is_empty());

    // A waiting call to decide.
    let waiting = persona_call(
        port,
        &persona_token,
        json!({"text": "a", "pattern": "a", "replacement": "#"}),
    );

    // Forms without the session's CSRF token, or from another site, do
    // nothing.
    for (headers, form) in [
        (
            vec![("Cookie", cookie.as_str()), ("Origin", origin.as_str())],
            String::new(),
        ),
        (
            vec![("Cookie", cookie.as_str()), ("Origin", origin.as_str())],
            format!("csrf={}", "0".repeat(64)),
        ),
        (vec![("Origin", origin.as_str())], format!("csrf={csrf}")),
    ] {
        for action in ["approve", "deny"] {
            let r = request(
                port,
                "POST",
                &format!("/approvals/{waiting}/{action}"),
                &headers,
                Some(&form),
            );
            assert_eq!(r.status, 403, "{action} {headers:?} {form}: {}", r.body);
        }
    }
    let r = request(
        port,
        "POST",
        &format!("/approvals/{waiting}/approve"),
        &[("Cookie", &cookie), ("Origin", "http://evil.example")],
        Some(&format!("csrf={csrf}")),
    );
    assert_eq!(r.status, 403);
    assert!(refusals(&data, "console approve", 3).len() >= 3);
    let o = skillhost(&data, &["runs", "show", &waiting, "--json"]);
    let run: Value = serde_json::from_str(&stdout(&o)).expect("run JSON");
    assert_eq!(run["approval"], "pending", "{run}");

    // A reason too long, or with a control character: refused, the run
    // still waits.
    for reason in ["x".repeat(501), "a%1B%5B2Jb".to_string()] {
        let r = request(
            port,
            "POST",
            &format!("/approvals/{waiting}/deny"),
            &[("Cookie", &cookie), ("Origin", &origin)],
            Some(&format!("csrf={csrf}&reason={reason}")),
        );
        assert_eq!(r.status, 400, "{}", r.body);
        assert!(r.body.contains("nothing was decided"), "{}", r.body);
    }
    let o = skillhost(&data, &["runs", "show", &waiting, "--json"]);
    let run: Value = serde_json::from_str(&stdout(&o)).expect("run JSON");
    assert_eq!(run["approval"], "pending", "{run}");

    // With the token: denied, by the console.
    let r = request(
        port,
        "POST",
        &format!("/approvals/{waiting}/deny"),
        &[("Cookie", &cookie), ("Origin", &origin)],
        Some(&format!("csrf={csrf}")),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r.body.contains("operator:console"), "{}", r.body);
    // Twice: already decided.
    let r = request(
        port,
        "POST",
        &format!("/approvals/{waiting}/deny"),
        &[("Cookie", &cookie), ("Origin", &origin)],
        Some(&format!("csrf={csrf}")),
    );
    assert_eq!(r.status, 409, "{}", r.body);
    // A run that does not exist.
    let r = page(port, &signed, "/runs/run_%3Cscript%3E");
    assert_eq!(r.status, 404);
    assert!(!r.body.contains("<script>"), "{}", r.body);

    // Sign out ends the session on the server: the old cookie opens nothing.
    let r = request(
        port,
        "POST",
        "/sign-out",
        &[("Cookie", &cookie), ("Origin", &origin)],
        Some(&format!("csrf={csrf}")),
    );
    assert_eq!(r.status, 303);
    assert!(
        r.header("set-cookie")
            .is_some_and(|c| c.contains("Max-Age=0"))
    );
    assert_eq!(r.header("clear-site-data"), Some("\"storage\""));
    let r = request(port, "GET", "/approvals", &[("Cookie", &cookie)], None);
    assert_eq!(r.status, 303);
    assert_eq!(r.header("location"), Some("/sign-in"));
    assert_eq!(page(port, &signed, "/approvals").status, 401);
    drop(server);
}

/// Calls `text.regex_replace` as persona `support` with the Python SDK
/// client; the call waits for approval: its run id.
pub(crate) fn persona_call(port: u16, token: &str, args: Value) -> String {
    persona_call_tool(port, token, "text.regex_replace", args)
}

/// [`persona_call`] of `tool`.
pub(crate) fn persona_call_tool(port: u16, token: &str, tool: &str, args: Value) -> String {
    let calls = json!([{"tool": tool, "args": args}]);
    let o = Command::new(python())
        .arg(repo().join("tests/peers/http_calls.py"))
        .arg(format!("http://127.0.0.1:{port}/mcp"))
        .arg(token)
        .arg("legacy")
        .arg(calls.to_string())
        .output()
        .expect("run the Python client");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let report: Value = serde_json::from_str(out.lines().last().unwrap_or_default()).expect("JSON");
    let result = &report[0]["result"];
    assert_eq!(
        result["structuredContent"]["status"], "waiting_approval",
        "{report}"
    );
    result["structuredContent"]["run_id"]
        .as_str()
        .expect("a run id")
        .to_string()
}

/// chromedriver on a free loopback port, in a process group of its own
/// with the Chromium it starts; the whole group is killed when dropped, so
/// a test that fails before closing its session leaves no browser behind.
struct Driver {
    child: Child,
    port: u16,
}

impl Drop for Driver {
    fn drop(&mut self) {
        if let Ok(pgid) = i32::try_from(self.child.id()) {
            // SAFETY: killpg on the group this test created; its leader is
            // not reaped yet, so the id is still ours.
            unsafe { libc::killpg(pgid, libc::SIGKILL) };
        }
        let _ = self.child.wait();
    }
}

fn start_driver() -> Driver {
    let exe = ["/usr/bin/chromedriver", "/usr/lib/chromium/chromedriver"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .expect(
            "chromedriver is not installed: tests/peers/install.sh installs Debian's chromium and \
             chromium-driver (as root, or with sudo)",
        );
    let port = free_port();
    let child = Command::new(exe)
        .arg(format!("--port={port}"))
        .arg("--allowed-ips=127.0.0.1")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .expect("start chromedriver");
    let deadline = Instant::now() + Duration::from_secs(30);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "chromedriver did not listen within 30 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    Driver { child, port }
}

/// chromedriver, a runtime to drive it from, and a fresh Chromium profile
/// under the test's work folder.
pub(crate) struct Chromium {
    driver: Driver,
    pub rt: tokio::runtime::Runtime,
    profile: PathBuf,
}

impl Chromium {
    pub(crate) fn start(work: &Path) -> Chromium {
        Chromium {
            driver: start_driver(),
            rt: tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime"),
            profile: work.join("chromium-profile"),
        }
    }

    /// A new browser session.
    pub(crate) async fn open(&self) -> fantoccini::Client {
        browser(&self.driver, &self.profile).await
    }
}

async fn browser(driver: &Driver, profile: &Path) -> fantoccini::Client {
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".into(),
        json!({
            "binary": "/usr/bin/chromium",
            "args": [
                "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic",
                "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync",
                "--window-size=1100,900",
                format!("--user-data-dir={}", profile.display()),
            ],
        }),
    );
    fantoccini::ClientBuilder::rustls()
        .expect("a TLS connector")
        .capabilities(caps)
        .connect(&format!("http://127.0.0.1:{}", driver.port))
        .await
        .expect("a Chromium session")
}

fn screenshots() -> PathBuf {
    let dir = repo().join("target/console-screenshots");
    std::fs::create_dir_all(&dir).expect("screenshot dir");
    dir
}

async fn shot(c: &fantoccini::Client, name: &str) {
    let png = c.screenshot().await.expect("screenshot");
    assert!(png.starts_with(b"\x89PNG"), "not a PNG");
    std::fs::write(screenshots().join(format!("{name}.png")), png).expect("save screenshot");
}

#[test]
fn an_operator_approves_in_chromium() {
    let work = tempfile::tempdir().expect("tempdir");
    let (data, persona_token) = data_dir(work.path());
    // A SKILL.md skill with scripts (the word-report fixture), its scripts
    // approved and granted to support: a script call waits for the
    // operator like any call that may write.
    let word_report = work.path().join("word-report");
    copy_tree(
        &repo().join("plugins/script-skills/word-report"),
        &word_report,
    );
    for args in [
        &["sources", "add", word_report.to_str().expect("utf-8")][..],
        &["skills", "trust", "word-report"],
        &["skills", "approve", "word-report"],
        &["grants", "skill", "support", "word-report", "on"],
    ] {
        let o = skillhost(&data, args);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    }
    let server = start(&data);
    let port = server.port;
    let admin = admin_token(&data);
    let chromium = Chromium::start(work.path());
    chromium.rt.block_on(async {
        use fantoccini::Locator;
        let c = chromium.open().await;
        let base = format!("http://127.0.0.1:{port}");

        // Sign in.
        goto(&c, &format!("{base}/")).await;
        assert!(c.current_url().await.expect("url").path().ends_with("/sign-in"));
        shot(&c, "sign-in").await;
        let token = c.find(Locator::Css("#token")).await.expect("the token field");
        token.send_keys(&admin).await.expect("type the token");
        c.find(Locator::Css("form.sign-in button")).await.expect("button").click().await.expect("sign in");
        let empty = wait_for(&c, Locator::Css("p.empty"), 10).await;
        if empty.is_err() {
            shot(&c, "failed-sign-in").await;
            panic!(
                "no empty queue after signing in: at {:?}: {}",
                c.current_url().await.map(|u| u.to_string()),
                c.source().await.unwrap_or_default()
            );
        }
        assert_eq!(c.current_url().await.expect("url").path(), "/approvals");
        // The token is nowhere in the browser's storage or the page.
        let kept = c
            .execute("return document.documentElement.outerHTML + JSON.stringify(localStorage) + document.cookie", vec![])
            .await
            .expect("read the page");
        assert!(!kept.to_string().contains(&admin), "the token stays in the browser");
        // Nothing waits: no badge reading 0.
        let badge = c.find(Locator::Id("pending-badge")).await.expect("badge");
        assert!(!badge.is_displayed().await.expect("displayed?"), "a badge shows while nothing waits");

        // A persona calls a tool that needs confirmation, with arguments
        // that would run script if inserted as HTML.
        let hostile = "<img src=x onerror=\"document.title='pwned'\"><script>document.title='pwned'</script>a";
        let run_id = persona_call(port, &persona_token, json!({"text": hostile, "pattern": "a", "replacement": "#"}));
        let called = Instant::now();
        let card = wait_for(&c, Locator::Id(&run_id), 5)
            .await
            .expect("the call shows in the queue without a reload");
        let shown_after = called.elapsed();
        assert!(shown_after < Duration::from_secs(1), "the queue took {shown_after:?}");
        let badge = c.find(Locator::Id("pending-badge")).await.expect("badge").text().await.expect("text");
        assert_eq!(badge.trim(), "1");
        let args = card.find(Locator::Css("pre.args")).await.expect("args").text().await.expect("text");
        assert!(args.contains("<img src=x onerror="), "{args}");
        let images = c.execute("return document.images.length + document.querySelectorAll('#queue script').length", vec![]).await.expect("count");
        assert_eq!(images, json!(0), "the arguments became markup");
        assert_ne!(c.title().await.expect("title"), "pwned");
        let card_text = card.text().await.expect("card text");
        assert!(card_text.contains("support") && card_text.contains("text.regex_replace"), "{card_text}");
        shot(&c, "approvals").await;

        // Approve: the run executes once, its result on its page.
        card.find(Locator::Css("button.approve")).await.expect("approve").click().await.expect("click");
        let outcome = wait_for(&c, Locator::Id("outcome"), 20).await
            .expect("the run's page");
        assert_eq!(outcome.text().await.expect("outcome"), "ok");
        let decided = c.find(Locator::Id("decided-by")).await.expect("decider").text().await.expect("text");
        assert_eq!(decided, "operator:console");
        let output = c.find(Locator::Id("run-output")).await.expect("result").text().await.expect("text");
        assert!(output.contains("\"replacements\""), "{output}");
        assert_ne!(c.title().await.expect("title"), "pwned");
        let timeline = c.find(Locator::Id("timeline")).await.expect("timeline").text().await.expect("text");
        assert!(timeline.contains("approved by operator:console"), "{timeline}");
        assert!(timeline.contains("ended ok after"), "{timeline}");
        shot(&c, "run").await;

        // Deny with a reason, typed while the queue redraws itself live.
        let second = persona_call(port, &persona_token, json!({"text": "b", "pattern": "b", "replacement": "#"}));
        goto(&c, &format!("{base}/approvals")).await;
        wait_for(&c, Locator::Id(&second), 5).await
            .expect("the second call waits");
        let why = text_of(&c, &second).await;
        assert!(why.contains("its skill.yaml"), "why it waits names the manifest: {why}");
        let reason = "<img src=x onerror=\"document.title='pwned'\"> not today";
        let reason_box = format!("reason-{second}");
        c.execute("document.getElementById(arguments[0]).focus()", vec![json!(reason_box)]).await.expect("focus");
        c.active_element().await.expect("the reason field").send_keys(reason).await.expect("type");
        let third = persona_call(port, &persona_token, json!({"text": "c", "pattern": "c", "replacement": "#"}));
        wait_for(&c, Locator::Id(&third), 5).await
            .expect("the third call shows live");
        let kept = c
            .execute("return document.getElementById(arguments[0]).value", vec![json!(reason_box)])
            .await
            .expect("read the field");
        assert_eq!(kept, json!(reason), "the live update lost the typed reason");
        click_live(&c, &format!("deny-{second}")).await;
        let outcome = wait_for(&c, Locator::Id("outcome"), 20).await
            .expect("the denied run's page");
        assert_eq!(outcome.text().await.expect("outcome"), "denied");
        let error = c.find(Locator::Id("run-error")).await.expect("error").text().await.expect("text");
        assert_eq!(error, format!("denied (operator:console): {reason}"));
        let timeline = c.find(Locator::Id("timeline")).await.expect("timeline").text().await.expect("text");
        assert!(timeline.contains(&format!("denied by operator:console: {reason}")), "{timeline}");
        let images = c.execute("return document.images.length", vec![]).await.expect("count");
        assert_eq!(images, json!(0), "the reason became markup");
        assert_ne!(c.title().await.expect("title"), "pwned");
        shot(&c, "run-denied").await;
        // The third, denied without a reason.
        goto(&c, &format!("{base}/approvals")).await;
        click_live(&c, &format!("deny-{third}")).await;
        let error = wait_for(&c, Locator::Id("run-error"), 20).await
            .expect("the third run's page")
            .text()
            .await
            .expect("text");
        assert_eq!(error, "denied (operator:console)");

        // A skill's script: queued, approved and run like any other tool.
        let script_run = persona_call_tool(
            port,
            &persona_token,
            "word-report.run_script",
            json!({"script": "scripts/count_words.py", "args": ["notes.txt"],
                   "files": [{"name": "notes.txt", "text": "one two two"}]}),
        );
        goto(&c, &format!("{base}/approvals")).await;
        let card = wait_for(&c, Locator::Id(&script_run), 20).await
            .expect("the script call waits");
        let card_text = card.text().await.expect("card text");
        assert!(
            card_text.contains("word-report.run_script") && card_text.contains("scripts/count_words.py"),
            "{card_text}"
        );
        card.find(Locator::Css("button.approve")).await.expect("approve").click().await.expect("click");
        // The runtime may be compiled in this call (once per test run).
        let outcome = wait_for(&c, Locator::Id("outcome"), 120).await
            .expect("the script run's page");
        assert_eq!(outcome.text().await.expect("outcome"), "ok");
        let output = c.find(Locator::Id("run-output")).await.expect("result").text().await.expect("text");
        assert!(output.contains("notes.txt: 3 words"), "{output}");

        // The runs page: the calls in the last hour's chart and the list.
        goto(&c, &format!("{base}/runs")).await;
        let bars = c.find_all(Locator::Css("svg.minutes rect.ok")).await.expect("bars");
        // The regex call and the script's: one minute, or two when the
        // script's call came in the next.
        assert!((1..=2).contains(&bars.len()), "{} minutes with ok calls", bars.len());
        let denied = c.find_all(Locator::Css("svg.minutes rect.denied")).await.expect("bars");
        assert!(!denied.is_empty(), "the two denials are drawn");
        let latency = c.find(Locator::Css("table.latency")).await.expect("latency table").text().await.expect("text");
        assert!(latency.contains("text.regex_replace"), "{latency}");
        let listed = c.find(Locator::Css("table.runs")).await.expect("runs table").text().await.expect("text");
        assert!(listed.contains("text.regex_replace") && listed.contains("ok"), "{listed}");
        // The script run: its tool, which script, its outcome and duration.
        let script_row = c
            .find(Locator::XPath(&format!("//table[@class='runs']//tr[.//a[@href='/runs/{script_run}']]")))
            .await
            .expect("the script run's row")
            .text()
            .await
            .expect("text");
        assert!(
            script_row.contains("support word-report.run_script scripts/count_words.py ok"),
            "{script_row}"
        );
        assert!(script_row.trim_end().ends_with(" ms") || script_row.trim_end().ends_with(" s"), "{script_row}");
        shot(&c, "runs-activity").await;

        // The queue empties, live.
        goto(&c, &format!("{base}/approvals")).await;
        wait_for(&c, Locator::Css("p.empty"), 5).await.expect("empty queue");
        let badge = c.find(Locator::Id("pending-badge")).await.expect("badge");
        assert!(!badge.is_displayed().await.expect("displayed?"), "the badge still shows with nothing waiting");

        // A narrow window still reads: nothing wider than the viewport.
        c.set_window_size(380, 800).await.expect("resize");
        let wide = c
            .execute("return document.documentElement.scrollWidth <= window.innerWidth + 1", vec![])
            .await
            .expect("measure");
        assert_eq!(wide, json!(true), "the page scrolls sideways on a narrow window");
        shot(&c, "approvals-narrow").await;

        // Sign out: back to the sign-in, and the pages are closed again.
        c.find(Locator::Css("form.sign-out button")).await.expect("sign out").click().await.expect("click");
        wait_for(&c, Locator::Css("#token"), 10).await.expect("the sign-in page");
        let kept = c.execute("return localStorage.length", vec![]).await.expect("read the storage");
        assert_eq!(kept, json!(0), "the session's token outlives the sign-out");
        goto(&c, &format!("{base}/approvals")).await;
        assert!(c.current_url().await.expect("url").path().ends_with("/sign-in"));
        c.close().await.expect("close the browser");
    });

    // Executed exactly once, decided by the console; the approval event
    // names the operator.
    let o = skillhost(
        &data,
        &["runs", "list", "--json", "--tool", "text.regex_replace"],
    );
    let runs: Value = serde_json::from_str(&stdout(&o)).expect("runs JSON");
    let runs = runs.as_array().expect("runs");
    assert_eq!(runs.len(), 3, "{runs:?}");
    let ran: Vec<&Value> = runs.iter().filter(|r| r["outcome"] == "ok").collect();
    assert_eq!(ran.len(), 1, "{runs:?}");
    assert!(
        runs.iter().all(|r| r["decided_by"] == "operator:console"),
        "{runs:?}"
    );
    let approvals: Vec<Value> = events(&data)
        .into_iter()
        .filter(|e| e["kind"] == "approval")
        .collect();
    // The three text.regex_replace calls and the script's.
    assert_eq!(approvals.len(), 4, "{approvals:?}");
    assert!(
        approvals
            .iter()
            .all(|a| a["detail"]["decided_by"] == "operator:console"),
        "{approvals:?}"
    );
    assert_eq!(
        approvals
            .iter()
            .filter(|a| a["detail"]["reason"]
                .as_str()
                .is_some_and(|r| r.ends_with("not today")))
            .count(),
        1,
        "{approvals:?}"
    );
    drop(server);
}

/// `tests/peers/console_watch.py`: a persona's MCP client that prints its
/// tools on connecting and after each `list_changed`; stopped when dropped.
struct Watcher {
    child: Child,
    lines: std::sync::mpsc::Receiver<Value>,
}

impl Watcher {
    fn start(port: u16, token: &str) -> Watcher {
        let mut child = Command::new(python())
            .arg(repo().join("tests/peers/console_watch.py"))
            .arg(format!("http://127.0.0.1:{port}/mcp"))
            .arg(token)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the watching client");
        let out = child.stdout.take().expect("stdout");
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
                if let Ok(v) = serde_json::from_str::<Value>(&line) {
                    let _ = tx.send(v);
                }
            }
        });
        Watcher { child, lines }
    }

    /// The next line (at most 15 s away).
    fn next(&self) -> Value {
        self.lines
            .recv_timeout(Duration::from_secs(15))
            .expect("the client reports within 15 s")
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn tools_of(v: &Value) -> Vec<String> {
    v["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t.as_str().map(str::to_string))
        .collect()
}

pub(crate) async fn sign_in_browser(c: &fantoccini::Client, base: &str, admin: &str) {
    use fantoccini::Locator;
    goto(c, &format!("{base}/sign-in")).await;
    c.find(Locator::Css("#token"))
        .await
        .expect("field")
        .send_keys(admin)
        .await
        .expect("type");
    c.find(Locator::Css("form.sign-in button"))
        .await
        .expect("button")
        .click()
        .await
        .expect("click");
    wait_for(c, Locator::Css("#queue"), 10)
        .await
        .expect("signed in");
}

#[test]
fn grants_and_tokens_change_from_chromium() {
    let work = tempfile::tempdir().expect("tempdir");
    let (data, persona_token) = data_dir(work.path());
    let server = start(&data);
    let port = server.port;
    let admin = admin_token(&data);
    let chromium = Chromium::start(work.path());
    let watcher = Watcher::start(port, &persona_token);
    let first = tools_of(&watcher.next());
    assert!(first.iter().any(|t| t == "text.word_count"), "{first:?}");
    assert!(!first.iter().any(|t| t.starts_with("json.")), "{first:?}");
    chromium.rt.block_on(async {
        use fantoccini::Locator;
        let c = chromium.open().await;
        let base = format!("http://127.0.0.1:{port}");
        sign_in_browser(&c, &base, &admin).await;

        // The matrix: support has text-tools, not json-tools.
        goto(&c, &format!("{base}/grants")).await;
        let cell = |name: &'static str| {
            let c = c.clone();
            async move {
                c.find(Locator::Css(&format!(
                    "#persona-support td[data-kind=skill][data-name=\"{name}\"]"
                )))
                .await
                .expect("the cell")
            }
        };
        assert!(
            cell("text-tools")
                .await
                .attr("class")
                .await
                .expect("class")
                .unwrap_or_default()
                .contains("granted")
        );
        let json_cell = cell("json-tools").await;
        assert!(
            json_cell
                .attr("class")
                .await
                .expect("class")
                .unwrap_or_default()
                .contains("denied")
        );
        shot(&c, "grants").await;

        // Grant json-tools: the connected client hears list_changed and
        // lists the new tools.
        // The grant leads back to the same page: wait for it to load, or
        // the check below could read the page being left.
        let grant = json_cell.find(Locator::Css("button")).await.expect("grant");
        submit(&c, grant).await;
        wait_for(&c, Locator::Css("table.grants"), 10)
            .await
            .expect("the matrix again");
        assert!(
            cell("json-tools")
                .await
                .attr("class")
                .await
                .expect("class")
                .unwrap_or_default()
                .contains("granted")
        );
        let changed = watcher.next();
        assert!(changed["changed"].as_u64().is_some(), "{changed}");
        assert!(
            tools_of(&changed).iter().any(|t| t.starts_with("json.")),
            "{changed}"
        );

        // Revoke it: gone from the client's list.
        let revoke = cell("json-tools")
            .await
            .find(Locator::Css("button"))
            .await
            .expect("revoke");
        submit(&c, revoke).await;
        wait_for(&c, Locator::Css("table.grants"), 10)
            .await
            .expect("the matrix again");
        let changed = watcher.next();
        assert!(
            !tools_of(&changed).iter().any(|t| t.starts_with("json.")),
            "{changed}"
        );

        // Personas: create one, mint its token (shown once), revoke it.
        goto(&c, &format!("{base}/personas")).await;
        c.find(Locator::Id("new-persona"))
            .await
            .expect("field")
            .send_keys("ana")
            .await
            .expect("type");
        c.find(Locator::Id("new-description"))
            .await
            .expect("field")
            .send_keys("<i>reviews</i>")
            .await
            .expect("type");
        c.find(Locator::Css("form[action='/personas'] button"))
            .await
            .expect("create")
            .click()
            .await
            .expect("click");
        let row = wait_for(&c, Locator::Id("persona-ana"), 10)
            .await
            .expect("the new persona");
        assert!(
            row.text().await.expect("text").contains("<i>reviews</i>"),
            "the description is shown as text"
        );
        c.find(Locator::Css("#token-persona option[value=ana]"))
            .await
            .expect("option")
            .click()
            .await
            .expect("choose");
        c.find(Locator::Id("token-label"))
            .await
            .expect("label")
            .send_keys("laptop")
            .await
            .expect("type");
        c.find(Locator::Css("form[action='/tokens'] button"))
            .await
            .expect("mint")
            .click()
            .await
            .expect("click");
        let minted = wait_for(&c, Locator::Id("minted-token"), 10)
            .await
            .expect("the token");
        let token = minted.text().await.expect("token");
        assert!(token.starts_with("skh_"), "{token}");
        assert!(
            !c.current_url()
                .await
                .expect("url")
                .as_str()
                .contains(&token),
            "the token is in the URL"
        );
        shot(&c, "personas").await;
        // Shown once: the page again does not have it.
        goto(&c, &format!("{base}/personas")).await;
        assert!(!c.source().await.expect("source").contains(&token));
        let o = skillhost(&data, &["tokens", "list", "--json"]);
        let tokens: Value = serde_json::from_str(&stdout(&o)).expect("tokens JSON");
        let ana: Vec<&Value> = tokens
            .as_array()
            .expect("list")
            .iter()
            .filter(|t| t["persona"] == "ana")
            .collect();
        assert_eq!(ana.len(), 1, "{tokens}");
        let id = ana[0]["id"].as_i64().expect("id");
        // Revoking leads back to the same page, where `persona-ana` is
        // already present: wait for the new page to load, not for it.
        let revoke = c
            .find(Locator::Css(&format!("#token-{id} button")))
            .await
            .expect("revoke");
        submit(&c, revoke).await;
        wait_for(&c, Locator::Id("persona-ana"), 10)
            .await
            .expect("back");
        assert!(
            c.find(Locator::Id(&format!("token-{id}"))).await.is_err(),
            "the token is still listed"
        );

        // The runs list and its filter.
        goto(&c, &format!("{base}/runs?outcome=ok&persona=%3Cscript%3E")).await;
        assert!(c.find(Locator::Css("p.empty")).await.is_ok());
        shot(&c, "runs").await;
        c.close().await.expect("close the browser");
    });
    // The revoked token no longer works.
    let o = skillhost(&data, &["tokens", "list", "--json"]);
    assert!(!stdout(&o).contains("\"ana\""), "{}", stdout(&o));
    drop(watcher);
    drop(server);
}

/// Clicks the element of id `id` in the live queue, finding it again when
/// a live update replaced it between finding and clicking.
async fn click_live(c: &fantoccini::Client, id: &str) {
    use fantoccini::error::{CmdError, ErrorStatus};
    for _ in 0..20 {
        let found = wait_for(c, fantoccini::Locator::Id(id), 5)
            .await
            .unwrap_or_else(|e| panic!("no #{id}: {e}"));
        match found.click().await {
            Ok(_) => return,
            Err(CmdError::Standard(e)) if e.error == ErrorStatus::StaleElementReference => {}
            Err(e) => panic!("click #{id}: {e}"),
        }
    }
    panic!("#{id} stayed stale through 20 tries");
}

/// The text of the element of id `id`, read in the page (no element
/// reference a live update could make stale).
async fn text_of(c: &fantoccini::Client, id: &str) -> String {
    c.execute(
        "const e = document.getElementById(arguments[0]); return e ? e.innerText : null",
        vec![json!(id)],
    )
    .await
    .expect("read the page")
    .as_str()
    .unwrap_or_else(|| panic!("no #{id}"))
    .to_string()
}

/// Opens a console page and waits (bounded) until its script has shown
/// it: a navigation gets the empty shell first.
/// Waits at most `secs` seconds for an element, asking every 20 ms. A page that is
/// being navigated away from (a form just submitted, a redirect) answers a find
/// with an error such as "aborted by navigation" rather than "no such element":
/// every error counts as "not yet" until the deadline, which returns the last one.
pub(crate) async fn wait_for(
    c: &fantoccini::Client,
    locator: fantoccini::Locator<'_>,
    secs: u64,
) -> Result<fantoccini::elements::Element, fantoccini::error::CmdError> {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        match c.find(locator).await {
            Ok(found) => return Ok(found),
            Err(e) if Instant::now() >= deadline => return Err(e),
            Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
}

pub(crate) async fn goto(c: &fantoccini::Client, url: &str) {
    c.goto(url)
        .await
        .unwrap_or_else(|e| panic!("open {url}: {e}"));
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let ready = c
            .execute(
                "return document.readyState === 'complete' && \
                 document.documentElement.dataset.console === 'ready'",
                vec![],
            )
            .await
            .unwrap_or(json!(false));
        if ready == json!(true) {
            return;
        }
        assert!(Instant::now() < deadline, "{url} was not shown within 30 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Clicks a form's button and waits (bounded) until the page it leads to
/// has loaded: a navigation right after a click could cancel the POST,
/// and a check right after it could read the page it leaves.
async fn submit(c: &fantoccini::Client, button: fantoccini::elements::Element) {
    c.execute("window.__before_submit = true", vec![])
        .await
        .expect("mark the page");
    button.click().await.expect("click");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let done = c
            .execute(
                "return window.__before_submit === undefined && document.readyState === 'complete' \
                 && document.documentElement.dataset.console === 'ready'",
                vec![],
            )
            .await
            .unwrap_or(json!(false));
        if done == json!(true) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the form's page did not load within 30 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[test]
fn servers_show_failure_stderr_and_drift_in_chromium() {
    let work = tempfile::tempdir().expect("tempdir");
    let (data, _) = data_dir(work.path());
    let description = work.path().join("description.txt");
    std::fs::write(&description, "Echoes its text.").expect("description");
    let broken = work.path().join("broken_server.py");
    std::fs::write(
        &broken,
        "import sys\nsys.stderr.write('<script>document.title=\"pwned\"</script> boom\\n')\nsys.exit(3)\n",
    )
    .expect("broken server");
    let config = work.path().join("mcp.json");
    std::fs::write(
        &config,
        json!({"mcpServers": {
            "drift": {
                "command": python(),
                "args": [repo().join("tests/peers/drift_server.py"), description],
            },
            "broken": {
                "command": python(),
                "args": [broken],
            },
        }})
        .to_string(),
    )
    .expect("mcp config");
    for args in [
        &["mcp", "import", config.to_str().expect("utf-8")][..],
        &["mcp", "enable", "drift"],
        &["mcp", "enable", "broken"],
    ] {
        let o = skillhost(&data, args);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    }
    let server = start(&data);
    let port = server.port;
    let admin = admin_token(&data);
    let chromium = Chromium::start(work.path());
    chromium.rt.block_on(async {
        use fantoccini::Locator;
        let c = chromium.open().await;
        let base = format!("http://127.0.0.1:{port}");
        sign_in_browser(&c, &base, &admin).await;

        // Reloads /servers until `check` holds for the page (bounded).
        async fn until(
            c: &fantoccini::Client,
            base: &str,
            what: &str,
            check: impl Fn(&str) -> bool,
        ) -> String {
            let deadline = Instant::now() + Duration::from_secs(30);
            loop {
                goto(c, &format!("{base}/servers")).await;
                let html = c.source().await.expect("source");
                if check(&html) {
                    return html;
                }
                assert!(
                    Instant::now() < deadline,
                    "{what} did not show within 30 s:\n{html}"
                );
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
        }

        // The broken server fails, its stderr shown as text.
        until(&c, &base, "the broken server's failure", |h| {
            h.contains("id=\"server-broken\"")
                && (h.contains(">backing off<") || h.contains(">failed<"))
                && h.contains("boom")
        })
        .await;
        let card = c.find(Locator::Id("server-broken")).await.expect("card");
        let stderr_text = card
            .find(Locator::Css("pre.stderr"))
            .await
            .expect("stderr")
            .text()
            .await
            .expect("text");
        assert!(
            stderr_text.contains("<script>document.title=\"pwned\"</script> boom"),
            "{stderr_text}"
        );
        let scripts = c
            .execute(
                "return document.querySelectorAll('main script').length",
                vec![],
            )
            .await
            .expect("count");
        assert_eq!(scripts, json!(0));
        assert_ne!(c.title().await.expect("title"), "pwned");
        until(&c, &base, "the drift server running", |h| {
            h.contains("drift.echo") && h.contains(">running<")
        })
        .await;
        shot(&c, "servers").await;

        // The definition changes; a restart shows the drift.
        std::fs::write(&description, "Echoes its text. Also sends it elsewhere.")
            .expect("description");
        let restart = c
            .find(Locator::Css(
                "#server-drift form[action='/servers/drift/restart'] button",
            ))
            .await
            .expect("restart");
        submit(&c, restart).await;
        until(&c, &base, "the drift", |h| {
            h.contains("class=\"drift\"") && h.contains("changed since pinned")
        })
        .await;
        shot(&c, "servers-drift").await;

        // Accepting the new definitions ends the drift.
        let accept = c
            .find(Locator::Css(
                "#server-drift form[action='/servers/drift/enable'] button",
            ))
            .await
            .expect("accept");
        submit(&c, accept).await;
        until(&c, &base, "the accepted definitions", |h| {
            h.contains("Also sends it elsewhere")
                && !h.contains("class=\"drift\"")
                && h.contains(">running<")
        })
        .await;
        c.close().await.expect("close the browser");
    });
    drop(server);
}

#[test]
fn skills_page_acts_through_the_host_and_refuses_what_it_cannot() {
    let work = tempfile::tempdir().expect("tempdir");
    let (data, _) = data_dir(work.path());
    let server = start(&data);
    let port = server.port;
    let origin = format!("http://127.0.0.1:{port}");
    let signed = sign_in(port, &admin_token(&data));
    let (cookie, csrf) = (signed.cookie.clone(), signed.csrf.clone());
    let skills = page(port, &signed, "/skills");
    assert!(
        skills.body.contains("id=\"skill-json-tools\"")
            && skills.body.contains("id=\"skill-text-tools\""),
        "{}",
        skills.body
    );
    let post = |path: &str, form: String| {
        request(
            port,
            "POST",
            path,
            &[("Cookie", cookie.as_str()), ("Origin", origin.as_str())],
            Some(&form),
        )
    };

    // Disable, through the host: the CLI sees it.
    let r = post("/skills/json-tools/disable", format!("csrf={csrf}"));
    assert_eq!(r.status, 303, "{}", r.body);
    let o = skillhost(&data, &["skills", "list", "--json"]);
    let skills: Value = serde_json::from_str(&stdout(&o)).expect("skills JSON");
    let json_tools = skills
        .as_array()
        .expect("list")
        .iter()
        .find(|s| s["name"] == "json-tools")
        .expect("json-tools")
        .clone();
    assert_eq!(json_tools["enabled"], false, "{json_tools}");
    assert_eq!(
        post("/skills/json-tools/enable", format!("csrf={csrf}")).status,
        303
    );

    // What cannot be done is refused with the reason, and nothing changes.
    let r = post("/skills/json-tools/uninstall", format!("csrf={csrf}"));
    assert_eq!(r.status, 409, "{}", r.body);
    assert!(r.body.contains("not a managed install"), "{}", r.body);
    let r = post(
        "/skills/json-tools/rollback",
        format!("csrf={csrf}&version=1.0.0"),
    );
    assert_eq!(r.status, 409, "{}", r.body);
    let r = post("/skills/json-tools/explode", format!("csrf={csrf}"));
    assert_eq!(r.status, 404, "{}", r.body);
    let r = post("/skills/%3Cscript%3E/enable", format!("csrf={csrf}"));
    assert_eq!(r.status, 404, "{}", r.body);
    assert!(!r.body.contains("<script>"), "{}", r.body);
    // Without the CSRF token nothing happens.
    let r = post("/skills/json-tools/disable", "csrf=".to_string());
    assert_eq!(r.status, 403);
    let o = skillhost(&data, &["skills", "list", "--json"]);
    assert!(
        !stdout(&o).contains("\"enabled\": false") && !stdout(&o).contains("\"enabled\":false"),
        "{}",
        stdout(&o)
    );
    drop(server);
}

/// The hostile test skill (not a built-in) packed, unsigned, at `version`.
pub(crate) fn hostile_bundle(work: &Path, version: &str) -> PathBuf {
    use skillhost_test_plugins as art;
    let dir = work.join(format!("hostile-{version}"));
    std::fs::create_dir_all(&dir).expect("mkdir");
    let manifest =
        std::fs::read_to_string(Path::new(art::HOSTILE_DIR).join("skill.yaml")).expect("manifest");
    let manifest = manifest.replacen("version: 0.1.0", &format!("version: {version}"), 1);
    std::fs::write(dir.join("skill.yaml"), manifest).expect("write manifest");
    std::fs::copy(art::HOSTILE_WASM_PATH, dir.join("hostile.wasm")).expect("component");
    let (bytes, _) = skillhost::pack_dir(&dir, None).expect("pack");
    let path = work.join(format!("hostile-{version}.skill"));
    std::fs::write(&path, bytes).expect("write bundle");
    path
}

#[test]
fn a_bundle_is_verified_installed_rolled_back_and_uninstalled_from_chromium() {
    let work = tempfile::tempdir().expect("tempdir");
    let (data, _) = data_dir(work.path());
    let v1 = hostile_bundle(work.path(), "0.1.0");
    let v2 = hostile_bundle(work.path(), "0.2.0");
    let tampered = work.path().join("tampered.skill");
    let mut bytes = std::fs::read(&v2).expect("bundle");
    let at = bytes.len() / 2;
    bytes[at] ^= 0xff;
    std::fs::write(&tampered, bytes).expect("tampered");
    let server = start(&data);
    let port = server.port;
    let admin = admin_token(&data);
    let chromium = Chromium::start(work.path());
    chromium.rt.block_on(async {
        use fantoccini::Locator;
        let c = chromium.open().await;
        let base = format!("http://127.0.0.1:{port}");
        sign_in_browser(&c, &base, &admin).await;

        async fn upload(c: &fantoccini::Client, base: &str, file: &Path) {
            goto(c, &format!("{base}/skills")).await;
            c.find(Locator::Id("bundle"))
                .await
                .expect("file field")
                .send_keys(&file.display().to_string())
                .await
                .expect("choose the file");
            let verify = c
                .find(Locator::Css("form.upload button"))
                .await
                .expect("verify");
            submit(c, verify).await;
        }
        async fn install(c: &fantoccini::Client) {
            c.find(Locator::Id("allow-untrusted"))
                .await
                .expect("checkbox")
                .click()
                .await
                .expect("tick");
            let button = c
                .find(Locator::Css("form[action='/skills/install'] button"))
                .await
                .expect("install");
            submit(c, button).await;
        }
        async fn card_text(c: &fantoccini::Client) -> String {
            match c.find(Locator::Id("skill-hostile")).await {
                Ok(card) => card.text().await.expect("text"),
                Err(_) => String::new(),
            }
        }

        // A tampered bundle is refused, saying why; nothing is installed.
        upload(&c, &base, &tampered).await;
        let source = c.source().await.expect("source");
        assert!(source.contains("the bundle was refused"), "{source}");
        goto(&c, &format!("{base}/skills")).await;
        assert!(card_text(&c).await.is_empty());

        // Verify, see what it is, then install.
        upload(&c, &base, &v1).await;
        assert_eq!(
            c.find(Locator::Id("verified-name"))
                .await
                .expect("name")
                .text()
                .await
                .expect("t"),
            "hostile"
        );
        assert_eq!(
            c.find(Locator::Id("verified-signer"))
                .await
                .expect("signer")
                .text()
                .await
                .expect("t"),
            "unsigned"
        );
        shot(&c, "skills-verify").await;
        install(&c).await;
        let text = card_text(&c).await;
        assert!(
            text.contains("0.1.0") && text.contains("untrusted"),
            "{text}"
        );

        // A newer version, then a rollback to the first.
        upload(&c, &base, &v2).await;
        install(&c).await;
        let text = card_text(&c).await;
        assert!(
            text.contains("0.2.0 · managed") && text.contains("Roll back to 0.1.0"),
            "{text}"
        );
        shot(&c, "skills").await;
        let rollback = c
            .find(Locator::Css(
                "#skill-hostile form[action='/skills/hostile/rollback'] button",
            ))
            .await
            .expect("rollback");
        submit(&c, rollback).await;
        let text = card_text(&c).await;
        assert!(
            text.contains("0.1.0 · managed") && !text.contains("Roll back"),
            "{text}"
        );

        // Uninstall: gone.
        let uninstall = c
            .find(Locator::Css(
                "#skill-hostile form[action='/skills/hostile/uninstall'] button",
            ))
            .await
            .expect("uninstall");
        submit(&c, uninstall).await;
        assert!(card_text(&c).await.is_empty());
        c.close().await.expect("close the browser");
    });
    let o = skillhost(&data, &["skills", "list", "--json"]);
    assert!(!stdout(&o).contains("\"hostile\""), "{}", stdout(&o));
    drop(server);
}

/// A signed-in page's live stream ends when its session does: at sign-out
/// (a copy of the cookie kept elsewhere hears nothing more).
#[test]
fn the_live_stream_ends_at_sign_out() {
    let work = tempfile::tempdir().expect("tempdir");
    let (data, _) = data_dir(work.path());
    let server = start(&data);
    let port = server.port;
    let origin = format!("http://127.0.0.1:{port}");
    let signed = sign_in(port, &admin_token(&data));
    let mut live = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    write!(
        live,
        "GET /live HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nCookie: {}\r\nX-Skillhost-Csrf: {}\r\n\
         Connection: close\r\n\r\n",
        signed.cookie, signed.csrf
    )
    .expect("send");
    live.set_read_timeout(Some(Duration::from_millis(200)))
        .expect("timeout");
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = Instant::now() + Duration::from_secs(10);
    while !String::from_utf8_lossy(&seen).contains("event: approvals") {
        assert!(
            Instant::now() < deadline,
            "no live event within 10 s: {}",
            String::from_utf8_lossy(&seen)
        );
        if let Ok(n) = live.read(&mut buf) {
            assert!(n > 0, "the stream ended before its first event");
            seen.extend_from_slice(&buf[..n]);
        }
    }
    assert!(String::from_utf8_lossy(&seen).starts_with("HTTP/1.1 200"));

    let r = request(
        port,
        "POST",
        "/sign-out",
        &[("Cookie", &signed.cookie), ("Origin", &origin)],
        Some(&format!("csrf={}", signed.csrf)),
    );
    assert_eq!(r.status, 303, "{}", r.body);
    let signed_out = Instant::now();
    loop {
        match live.read(&mut buf) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => break,
        }
        assert!(
            signed_out.elapsed() < Duration::from_secs(3),
            "the live stream still runs 3 s after its session signed out"
        );
    }
    drop(server);
}

/// `serve --http` says where the console is, and that address opens it.
#[test]
fn serve_http_names_the_console() {
    use std::io::BufRead as _;
    let work = tempfile::tempdir().expect("tempdir");
    let (data, _) = data_dir(work.path());
    let mut child = common::command(
        &data,
        &["serve", "--http", "127.0.0.1:0", "--grace-secs", "1"],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::null())
    .spawn()
    .expect("start serve --http");
    let out = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut printed = Vec::new();
    while let Ok(line) = rx.recv_timeout(Duration::from_secs(60)) {
        let last = line.starts_with("client configuration");
        printed.push(line);
        if last {
            break;
        }
    }
    let port = printed
        .iter()
        .find_map(|l| l.strip_prefix("listening on http://127.0.0.1:"))
        .and_then(|p| p.parse::<u16>().ok())
        .unwrap_or_else(|| panic!("no address in {printed:#?}"));
    let server = HttpServer { child, port };
    let console = printed
        .iter()
        .find(|l| l.starts_with("console: "))
        .unwrap_or_else(|| panic!("serve --http does not mention the console: {printed:#?}"));
    let url = format!("http://127.0.0.1:{port}/");
    assert!(
        console.contains(&url) && console.contains("admin token"),
        "{console}"
    );
    // The address it names is the console's: unsigned, it leads to the
    // sign-in.
    let r = request(port, "GET", "/", &[], None);
    assert_eq!(r.status, 303);
    assert_eq!(r.header("location"), Some("/sign-in"));
    drop(server);
}

/// A trusted key's name on the Skills page (not only its key id), the
/// approvals badge hidden while nothing waits, and no run "0 ms".
#[test]
fn pages_say_what_an_operator_reads() {
    let work = tempfile::tempdir().expect("tempdir");
    let (data, _) = data_dir(work.path());
    // A skill signed by a key the operator trusts as `alice`.
    let (secret, public) = skillhost::SecretKey::generate().expect("a key");
    secret
        .write_pair(&work.path().join("alice"))
        .expect("the key files");
    let bundle = work.path().join("hostile.skill");
    let dir = work.path().join("hostile");
    std::fs::create_dir_all(&dir).expect("mkdir");
    {
        use skillhost_test_plugins as art;
        std::fs::copy(
            Path::new(art::HOSTILE_DIR).join("skill.yaml"),
            dir.join("skill.yaml"),
        )
        .expect("manifest");
        std::fs::copy(art::HOSTILE_WASM_PATH, dir.join("hostile.wasm")).expect("component");
    }
    let (bytes, _) = skillhost::pack_dir(&dir, Some(&secret)).expect("pack");
    std::fs::write(&bundle, bytes).expect("write the bundle");
    let alice_pub = work.path().join("alice.pub");
    for args in [
        &[
            "trust",
            "add",
            alice_pub.to_str().unwrap(),
            "--name",
            "alice",
        ][..],
        &["install", bundle.to_str().unwrap()],
        &[
            "call",
            "text.word_count",
            "--persona",
            "support",
            "--args",
            r#"{"text": "quick"}"#,
        ],
    ] {
        let o = skillhost(&data, args);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    }
    let server = start(&data);
    let port = server.port;
    let signed = sign_in(port, &admin_token(&data));

    let skills = page(port, &signed, "/skills");
    assert_eq!(skills.status, 200, "{}", skills.body);
    let card = skills
        .body
        .split("id=\"skill-hostile\"")
        .nth(1)
        .and_then(|rest| rest.split("</li>\n").next())
        .unwrap_or_else(|| panic!("no hostile card: {}", skills.body));
    let signer = card
        .split("<dt>Signer</dt><dd>")
        .nth(1)
        .and_then(|s| s.split("</dd>").next())
        .unwrap_or_else(|| panic!("no signer: {card}"));
    assert!(
        signer.starts_with("alice") && signer.contains(&public.key_id()),
        "the trusted key's name, then its id: {signer}"
    );

    // Nothing waits: the badge is there for the live updates, hidden.
    let badge = skills
        .body
        .split("id=\"pending-badge\"")
        .next()
        .and_then(|before| before.rsplit('<').next())
        .unwrap_or_default();
    let tag = skills
        .body
        .split("id=\"pending-badge\"")
        .nth(1)
        .and_then(|after| after.split('>').next())
        .unwrap_or_default();
    assert!(
        badge.starts_with("span") && tag.contains(" hidden"),
        "a badge reading 0 shows: <{badge}id=\"pending-badge\"{tag}>"
    );

    // A call that took less than a millisecond does not read "0 ms".
    let runs = page(port, &signed, "/runs");
    assert_eq!(runs.status, 200, "{}", runs.body);
    assert!(runs.body.contains("text.word_count"), "{}", runs.body);
    for zero in [">0 ms<", "<td>0</td>"] {
        assert!(!runs.body.contains(zero), "{zero} in {}", runs.body);
    }
    drop(server);
}
