//! The console's cookie reaches any listener on another loopback port
//! (cookies are scoped by host, not port): a page the operator opens on
//! another local port receives it with its own requests, and its server
//! replays it to the console. Here a real Chromium signs in, opens a page
//! served by a second loopback listener, and the test, as that listener's
//! owner, replays the cookie it received: it can neither read a CSRF token
//! (nor the waiting calls) nor approve a waiting call, and the refusal is
//! audited.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{skillhost, stdout};
use crate::console::{
    Chromium, admin_token, data_dir, persona_call, refusals, request, sign_in_browser, start,
    wait_for,
};

/// A web page on another loopback port (another local app the operator
/// opens): `/` is a page with an image of its own, and every `Cookie`
/// header the browser sends is recorded. Serves until dropped.
struct ForeignPage {
    port: u16,
    cookies: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl ForeignPage {
    fn start() -> ForeignPage {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        listener.set_nonblocking(true).expect("nonblocking");
        let cookies = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (seen, stopped) = (cookies.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            while !stopped.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((s, _)) => serve_one(s, &seen),
                    Err(_) => std::thread::sleep(Duration::from_millis(20)),
                }
            }
        });
        ForeignPage {
            port,
            cookies,
            stop,
            thread: Some(thread),
        }
    }

    /// The console's cookie as this page received it (waits, bounded).
    fn stolen_cookie(&self) -> String {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let found = self
                .cookies
                .lock()
                .expect("cookies")
                .iter()
                .flat_map(|c| c.split(';'))
                .map(str::trim)
                .find(|c| c.starts_with("skillhost_console="))
                .map(str::to_string);
            if let Some(c) = found {
                return c;
            }
            assert!(
                Instant::now() < deadline,
                "the browser sent the page on another port no console cookie: {:?}",
                self.cookies.lock().expect("cookies")
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for ForeignPage {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Answers one request of the foreign page, recording its cookie.
fn serve_one(mut s: TcpStream, seen: &Mutex<Vec<String>>) {
    let _ = s.set_nonblocking(false);
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 64 << 10 {
        match s.read(&mut buf) {
            Ok(n) if n > 0 => head.extend_from_slice(&buf[..n]),
            _ => break,
        }
    }
    let head = String::from_utf8_lossy(&head);
    for line in head.lines() {
        if let Some((k, v)) = line.split_once(':')
            && k.eq_ignore_ascii_case("cookie")
        {
            seen.lock().expect("cookies").push(v.trim().to_string());
        }
    }
    let body = if head.starts_with("GET / ") {
        "<!doctype html><title>another local app</title><p>Nothing here.</p><img src=\"/pixel.png\" alt=\"\">"
    } else {
        ""
    };
    let _ = write!(
        s,
        "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
}

/// Every run of 64 lower-case hex digits in `text`: what a CSRF token (or
/// a session id) looks like.
fn hex_tokens(text: &str) -> Vec<String> {
    let bytes = text.as_bytes();
    let mut found = Vec::new();
    let mut run = 0;
    for (i, b) in bytes.iter().enumerate() {
        if b.is_ascii_digit() || (b'a'..=b'f').contains(b) {
            run += 1;
        } else {
            if run == 64 {
                found.push(text[i - 64..i].to_string());
            }
            run = 0;
        }
    }
    if run == 64 {
        found.push(text[bytes.len() - 64..].to_string());
    }
    found
}

#[test]
fn a_cookie_replayed_from_another_loopback_port_neither_reads_nor_approves() {
    let work = tempfile::tempdir().expect("tempdir");
    let (data, persona_token) = data_dir(work.path());
    let server = start(&data);
    let port = server.port;
    let admin = admin_token(&data);
    let origin = format!("http://127.0.0.1:{port}");
    let waiting = persona_call(
        port,
        &persona_token,
        json!({"text": "secret-argument-value", "pattern": "a", "replacement": "#"}),
    );
    let foreign = ForeignPage::start();
    let chromium = Chromium::start(work.path());
    let kept_token = chromium.rt.block_on(async {
        use fantoccini::Locator;
        let c = chromium.open().await;
        let base = format!("http://127.0.0.1:{port}");
        sign_in_browser(&c, &base, &admin).await;
        wait_for(&c, Locator::Id(&waiting), 10)
            .await
            .expect("the waiting call in the operator's queue");
        let kept = c
            .execute("return JSON.stringify(localStorage)", vec![])
            .await
            .expect("read the console's storage");
        // The operator opens another local app's page, on another port.
        c.goto(&format!("http://127.0.0.1:{}/", foreign.port))
            .await
            .expect("the other page");
        c.close().await.expect("close the browser");
        kept.as_str().unwrap_or_default().to_string()
    });
    let stolen = foreign.stolen_cookie();
    drop(foreign);

    // The attacker replays the cookie with whatever headers it likes: our
    // Host, our Origin. Nothing it reads holds a CSRF token or the
    // waiting call.
    let headers = [("Cookie", stolen.as_str()), ("Origin", origin.as_str())];
    let mut pages = Vec::new();
    for path in [
        "/".to_string(),
        "/sign-in".to_string(),
        "/approvals".to_string(),
        "/approvals/queue".to_string(),
        format!("/runs/{waiting}"),
        "/runs".to_string(),
        "/skills".to_string(),
        "/grants".to_string(),
        "/servers".to_string(),
        "/personas".to_string(),
    ] {
        let r = request(port, "GET", &path, &headers, None);
        pages.push((path, r.body));
    }
    // Every token-looking string found, and none: each tried as the CSRF
    // token of an approval.
    let mut tokens: Vec<String> = pages.iter().flat_map(|(_, b)| hex_tokens(b)).collect();
    tokens.sort();
    tokens.dedup();
    tokens.push(String::new());
    for t in &tokens {
        let r = request(
            port,
            "POST",
            &format!("/approvals/{waiting}/approve"),
            &headers,
            Some(&format!("csrf={t}")),
        );
        assert_eq!(
            r.status, 403,
            "a replayed cookie approved the call: {}",
            r.body
        );
    }
    for (path, body) in &pages {
        assert!(
            hex_tokens(body).iter().all(|t| !kept_token.contains(t)),
            "{path} hands a replayed cookie the console's CSRF token"
        );
        assert!(
            !body.contains("secret-argument-value") && !body.contains(&waiting),
            "{path} shows the waiting call to a replayed cookie: {body}"
        );
    }
    let o = skillhost(&data, &["runs", "show", &waiting, "--json"]);
    let run: Value = serde_json::from_str(&stdout(&o)).expect("run JSON");
    assert_eq!(run["approval"], "pending", "{run}");
    assert_eq!(run["outcome"], "waiting_approval", "{run}");
    assert!(
        refusals(&data, "console approve", tokens.len()).len() >= tokens.len(),
        "every refused approval is audited"
    );
    drop(server);
}
