//! The console's sign-in was not throttled and every wrong attempt wrote
//! an audit row (300 at 270 a second). Here a flood of wrong tokens from
//! one peer gets a few checked refusals, then refusals that check nothing
//! (not even the right token: no guessing through the throttle) and say
//! when to retry; the audit holds the checked ones and one event counting
//! the rest, not a row each; the host answers throughout.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::console::{admin_token, data_dir, events, request, start};

/// Wrong sign-ins a peer may make in a window before it is throttled
/// (`CONSOLE_SIGN_IN_ATTEMPTS`).
const ATTEMPTS: usize = 10;

#[test]
fn a_sign_in_flood_is_throttled_and_audited_in_one_event() {
    let work = tempfile::tempdir().expect("tempdir");
    let (data, _) = data_dir(work.path());
    let mut server = start(&data);
    let port = server.port;
    let origin = format!("http://127.0.0.1:{port}");
    let admin = admin_token(&data);

    const FLOOD: usize = 300;
    let started = Instant::now();
    let threads: Vec<_> = (0..6)
        .map(|t| {
            let origin = origin.clone();
            std::thread::spawn(move || {
                (0..FLOOD / 6)
                    .map(|i| {
                        let r = request(
                            port,
                            "POST",
                            "/sign-in",
                            &[("Origin", &origin)],
                            Some(&format!("token=skh_wrong_{t}_{i}")),
                        );
                        (r.status, r.header("retry-after").map(str::to_string))
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let answers: Vec<(u16, Option<String>)> = threads
        .into_iter()
        .flat_map(|t| t.join().expect("a flooding thread"))
        .collect();
    let took = started.elapsed();
    let checked = answers.iter().filter(|(s, _)| *s == 401).count();
    let throttled: Vec<&(u16, Option<String>)> =
        answers.iter().filter(|(s, _)| *s == 429).collect();
    println!(
        "sign-in flood: {FLOOD} attempts in {:.2} s ({:.0}/s): {checked} checked, {} throttled",
        took.as_secs_f64(),
        FLOOD as f64 / took.as_secs_f64(),
        throttled.len()
    );
    assert_eq!(checked + throttled.len(), FLOOD, "{answers:?}");
    assert!(
        checked <= ATTEMPTS,
        "{checked} wrong sign-ins were checked (at most {ATTEMPTS} a window)"
    );
    assert!(
        throttled.iter().all(|(_, after)| after
            .as_deref()
            .and_then(|a| a.parse::<u64>().ok())
            .is_some()),
        "a throttled answer without Retry-After"
    );

    // Throttled, even the right token is not checked; it says why.
    let r = request(
        port,
        "POST",
        "/sign-in",
        &[("Origin", &origin)],
        Some(&format!("token={admin}")),
    );
    assert_eq!(r.status, 429, "{}", r.body);
    assert!(r.header("set-cookie").is_none());
    assert!(r.body.contains("too many sign-in attempts"), "{}", r.body);
    assert!(!r.body.contains(&admin));
    // The host answers meanwhile.
    assert_eq!(request(port, "GET", "/healthz", &[], None).status, 200);

    // A graceful stop writes the window's count now rather than at its end.
    // SAFETY: a signal to the server this test started.
    unsafe { libc::kill(server.child.id() as i32, libc::SIGTERM) };
    let deadline = Instant::now() + Duration::from_secs(20);
    while server.child.try_wait().expect("wait").is_none() {
        assert!(Instant::now() < deadline, "the server did not stop");
        std::thread::sleep(Duration::from_millis(50));
    }
    let refused: Vec<Value> = events(&data)
        .into_iter()
        .filter(|e| e["kind"] == "refused" && e.to_string().contains("console sign-in"))
        .collect();
    assert!(
        refused.len() <= ATTEMPTS + 1,
        "{} audit rows for one flood: {refused:?}",
        refused.len()
    );
    let counted: Vec<&Value> = refused
        .iter()
        .filter(|e| e["detail"]["count"].as_u64().is_some())
        .collect();
    assert_eq!(counted.len(), 1, "{refused:?}");
    assert_eq!(
        counted[0]["detail"]["count"].as_u64(),
        Some(throttled.len() as u64 + 1),
        "{refused:?}"
    );
    assert_eq!(counted[0]["detail"]["peer"], "127.0.0.1", "{refused:?}");
    drop(server);
}
