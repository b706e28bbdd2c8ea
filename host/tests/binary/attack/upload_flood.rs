//! `/skills/verify` read the whole upload before it checked the session
//! and the CSRF token: twelve unauthenticated, never-finished 24 MiB
//! uploads took the server from 30 to 431 MiB. Here uploads without a
//! session or with a wrong token are answered before their bundle is sent,
//! a flood of them leaves the server's peak memory where it was, uploads
//! over the cap at once are refused saying so, their temporary files are
//! gone when their clients are, and a real bundle still verifies and
//! installs; uploads with the cookie alone, stalled before their token,
//! keep no one out.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::common::{skillhost, stdout};
use crate::console::{admin_token, data_dir, hostile_bundle, refusals, request, sign_in, start};

const BOUNDARY: &str = "skillhost-upload-test";

/// What an upload's body holds before the bundle's bytes: the CSRF token's
/// part and the bundle part's head.
fn body_head(csrf: &str) -> String {
    format!(
        "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"csrf\"\r\n\r\n{csrf}\r\n\
         --{BOUNDARY}\r\nContent-Disposition: form-data; name=\"bundle\"; filename=\"b.skill\"\r\n\
         Content-Type: application/octet-stream\r\n\r\n"
    )
}

fn body_tail() -> String {
    format!("\r\n--{BOUNDARY}--\r\n")
}

/// Opens an upload to `/skills/verify` of `bundle_len` bundle bytes and
/// sends its head and the CSRF token's part; the bundle's bytes are the
/// caller's to send.
fn begin_upload(port: u16, cookie: Option<&str>, csrf: &str, bundle_len: usize) -> TcpStream {
    let mut s = upload_head(port, cookie, csrf.len(), bundle_len);
    s.write_all(body_head(csrf).as_bytes())
        .expect("send the token's part");
    s
}

/// Opens an upload to `/skills/verify` and sends its HTTP head alone (a
/// body of a `csrf_len`-byte token and `bundle_len` bundle bytes to come).
fn upload_head(port: u16, cookie: Option<&str>, csrf_len: usize, bundle_len: usize) -> TcpStream {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let cookie = cookie
        .map(|c| format!("Cookie: {c}\r\n"))
        .unwrap_or_default();
    write!(
        s,
        "POST /skills/verify HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nOrigin: http://127.0.0.1:{port}\r\n\
         {cookie}Content-Type: multipart/form-data; boundary={BOUNDARY}\r\nContent-Length: {}\r\n\r\n",
        body_head(&"0".repeat(csrf_len)).len() + bundle_len + body_tail().len()
    )
    .expect("send the head");
    s
}

/// What the server answered on `s` within its read timeout (possibly
/// nothing).
fn answer(s: &mut TcpStream) -> String {
    let mut got = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match s.read(&mut buf) {
            Ok(n) if n > 0 => {
                got.extend_from_slice(&buf[..n]);
                let text = String::from_utf8_lossy(&got);
                if let Some((head, body)) = text.split_once("\r\n\r\n") {
                    let len = head
                        .lines()
                        .find_map(|l| {
                            let (k, v) = l.split_once(':')?;
                            k.eq_ignore_ascii_case("content-length")
                                .then(|| v.trim().parse::<usize>().ok())?
                        })
                        .unwrap_or(0);
                    if body.len() >= len {
                        return text.into_owned();
                    }
                }
            }
            _ => return String::from_utf8_lossy(&got).into_owned(),
        }
    }
}

/// A line of `/proc/PID/status` in KiB.
fn status_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .expect("the server's status")
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field}"))
}

/// The server's open files in the data dir's uploads folder.
fn upload_files(pid: u32, data: &Path) -> usize {
    let uploads = data
        .canonicalize()
        .expect("data dir")
        .join("uploads")
        .display()
        .to_string();
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| {
            d.filter_map(Result::ok)
                .filter_map(|e| std::fs::read_link(e.path()).ok())
                .filter(|t| t.display().to_string().starts_with(&uploads))
                .count()
        })
        .unwrap_or(0)
}

fn wait_until(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(15);
    while !check() {
        assert!(Instant::now() < deadline, "{what}: not within 15 s");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn uploads_are_checked_before_their_bytes_are_read_and_capped() {
    let work = tempfile::tempdir().expect("tempdir");
    let (data, _) = data_dir(work.path());
    let server = start(&data);
    let port = server.port;
    let pid = server.child.id();
    let signed = sign_in(port, &admin_token(&data));
    const BIG: usize = 24 << 20;

    // Without a session, or with a wrong token: answered at once, before
    // any of the bundle's 24 MiB is sent.
    let zeros = "0".repeat(64);
    for (cookie, csrf) in [
        (None, signed.csrf.as_str()),
        (Some(signed.cookie.as_str()), zeros.as_str()),
        (Some(signed.cookie.as_str()), ""),
    ] {
        let mut s = begin_upload(port, cookie, csrf, BIG);
        let got = answer(&mut s);
        assert!(
            got.starts_with("HTTP/1.1 403"),
            "an upload without {} was not refused before its body: {got:?}",
            if cookie.is_none() {
                "a session"
            } else {
                "the CSRF token"
            }
        );
    }
    assert!(refusals(&data, "console verify bundle", 3).len() >= 3);

    // Twelve unauthenticated 24 MiB uploads at once, each sending all it
    // can: the server's peak memory stays where it was.
    let before = status_kib(pid, "VmHWM:");
    let flood: Vec<_> = (0..12)
        .map(|_| {
            std::thread::spawn(move || {
                let mut s = begin_upload(port, None, "", BIG);
                let chunk = vec![0u8; 64 << 10];
                let mut sent = 0;
                while sent < BIG && s.write_all(&chunk).is_ok() {
                    sent += chunk.len();
                }
                let _ = answer(&mut s);
                sent
            })
        })
        .collect();
    let sent: usize = flood.into_iter().map(|t| t.join().expect("sender")).sum();
    let after = status_kib(pid, "VmHWM:");
    println!(
        "upload flood: {} MiB offered, the server's peak RSS {} -> {} MiB",
        sent >> 20,
        before >> 10,
        after >> 10
    );
    assert!(
        after.saturating_sub(before) < 48 << 10,
        "twelve unauthenticated uploads grew the server's peak memory from {before} to {after} KiB"
    );

    // Uploads at once: the cap's worth, signed in and stalled mid-bundle,
    // each held in a temporary file with no name. Uploads with the cookie
    // alone (a replayed one), stalled before their token, hold no place.
    const CAP: usize = 2;
    let replayed: Vec<TcpStream> = (0..CAP)
        .map(|_| upload_head(port, Some(&signed.cookie), 64, BIG))
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let held: Vec<TcpStream> = (0..CAP)
        .map(|_| {
            let mut s = begin_upload(port, Some(&signed.cookie), &signed.csrf, BIG);
            s.write_all(&vec![0u8; 256 << 10])
                .expect("the bundle's start");
            s
        })
        .collect();
    wait_until("the held uploads' files", || {
        upload_files(pid, &data) == CAP
    });
    let named = std::fs::read_dir(data.join("uploads"))
        .map(|d| d.count())
        .unwrap_or(0);
    assert_eq!(named, 0, "an upload's file has a name in the data dir");
    // One more is refused, saying why.
    let mut s = begin_upload(port, Some(&signed.cookie), &signed.csrf, BIG);
    let got = answer(&mut s);
    assert!(got.starts_with("HTTP/1.1 503"), "{got:?}");
    assert!(got.contains("uploads at once"), "{got}");
    assert!(!refusals(&data, "uploads at once", 1).is_empty());
    // Their clients gone, so are their files.
    drop(replayed);
    drop(held);
    drop(s);
    wait_until("the held uploads' files closed", || {
        upload_files(pid, &data) == 0
    });

    // A real bundle still verifies, then installs.
    let bundle = std::fs::read(hostile_bundle(work.path(), "0.1.0")).expect("bundle");
    let mut s = begin_upload(port, Some(&signed.cookie), &signed.csrf, bundle.len());
    s.write_all(&bundle).expect("the bundle");
    s.write_all(body_tail().as_bytes()).expect("the end");
    s.set_read_timeout(Some(Duration::from_secs(60)))
        .expect("timeout");
    let got = answer(&mut s);
    assert!(got.starts_with("HTTP/1.1 200"), "{got}");
    assert!(got.contains("Verified: hostile 0.1.0"), "{got}");
    let at = got.find("name=\"digest\" value=\"").expect("the digest") + 21;
    let digest = &got[at..at + 64];
    let r = request(
        port,
        "POST",
        "/skills/install",
        &[
            ("Cookie", &signed.cookie),
            ("Origin", &format!("http://127.0.0.1:{port}")),
        ],
        Some(&format!(
            "csrf={}&digest={digest}&allow_untrusted=on",
            signed.csrf
        )),
    );
    assert_eq!(r.status, 303, "{}", r.body);
    let o = skillhost(&data, &["skills", "list", "--json"]);
    assert!(stdout(&o).contains("\"hostile\""), "{}", stdout(&o));
    assert_eq!(upload_files(pid, &data), 0);
    drop(server);
}
