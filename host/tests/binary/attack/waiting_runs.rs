//! Finding 4: 25 calls of a confirmation tool with 3.9 MB arguments each
//! made the database 94 MB; `GET /api/approvals` returned 97.5 MB in one
//! response; nothing was ever deleted.
//!
//! Now the arguments a waiting call keeps are capped, a caller's waiting
//! calls are capped, listings come a page at a time, and `gc` (or
//! `serve --retention`) forgets old runs, events and unreferenced refs and
//! gives the space back.

use serde_json::{Value, json};

use super::client::{Api, Mcp};
use crate::common::{local_skills_data, skillhost, start_http, stderr, stdout};

const TOOL: &str = "text.regex_replace";

fn setup(work: &std::path::Path) -> (std::path::PathBuf, String) {
    let data = local_skills_data(work, false);
    for args in [
        &["skills", "trust", "text-tools"][..],
        &["personas", "add", "ana"],
        &["grants", "skill", "ana", "text-tools", "on"],
    ] {
        let o = skillhost(&data, args);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    }
    let o = skillhost(&data, &["tokens", "add", "--persona", "ana"]);
    (data, stdout(&o).trim().to_string())
}

fn db_bytes(data: &std::path::Path) -> u64 {
    ["skillhost.db", "skillhost.db-wal"]
        .iter()
        .filter_map(|f| std::fs::metadata(data.join(f)).ok())
        .map(|m| m.len())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_calls_cannot_fill_the_disk() {
    let work = tempfile::tempdir().unwrap();
    let (data, token) = setup(work.path());
    let server = start_http(&data, 2);
    let api = Api::new(server.port, &data);
    let ana = Mcp::new(server.port, &token);
    let before = db_bytes(&data);

    // Huge arguments on a call that would wait: refused, nothing kept.
    // 3.9 MB, under the 4 MiB body limit: the attack as it was seen.
    let huge = "x".repeat(3_900_000);
    for _ in 0..5 {
        let v = ana
            .call(
                TOOL,
                json!({"text": huge, "pattern": "x", "replacement": "y"}),
                None,
                None,
            )
            .await;
        let text = v["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default();
        assert!(
            text.contains("too large to keep while the call waits"),
            "{}",
            &text[..text.len().min(300)]
        );
    }
    assert!(
        db_bytes(&data) < before + (1 << 20),
        "the database grew by {} bytes",
        db_bytes(&data) - before
    );

    // A caller's waiting calls are capped.
    let small = json!({"text": "a1", "pattern": "[0-9]", "replacement": "#"});
    for i in 0..32 {
        let v = ana.call(TOOL, small.clone(), None, None).await;
        assert_eq!(
            v["result"]["structuredContent"]["status"], "waiting_approval",
            "call {i}: {v}"
        );
    }
    let v = ana.call(TOOL, small.clone(), None, None).await;
    let text = v["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.contains("the most it may have"), "{v}");

    // Listings come a page at a time.
    let (status, page) = api.send("GET", "/approvals?limit=20", None).await;
    assert_eq!(status, 200);
    assert_eq!(page.as_array().unwrap().len(), 20);
    let (all, pages) = walk(&api, "/approvals?limit=20").await;
    assert_eq!((all.len(), pages), (32, 2));
    let (runs, _) = walk(&api, "/runs?limit=7").await;
    assert_eq!(
        runs.len(),
        38,
        "every run once: 5 refused, 32 waiting, 1 refused"
    );
    let mut ids: Vec<&str> = runs.iter().filter_map(|r| r["run_id"].as_str()).collect();
    ids.dedup();
    assert_eq!(ids.len(), 38);
    let (events, _) = walk(&api, "/events?limit=10").await;
    assert!(events.len() >= 38, "{}", events.len());
    let (status, body) = api.send("GET", "/runs?limit=5000", None).await;
    assert_eq!(status, 400, "{body}");
    drop(server);
    // Events and refs are stamped in whole seconds.
    std::thread::sleep(std::time::Duration::from_millis(1100));

    // gc forgets the decided runs and the events, keeps the waiting ones.
    let o = skillhost(&data, &["gc", "--older-than", "0s", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let done: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(done["runs"], 6, "{done}");
    assert!(done["events"].as_u64().unwrap() >= 38, "{done}");
    let o = skillhost(&data, &["runs", "list", "--json", "--limit", "100"]);
    let left: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(left.as_array().unwrap().len(), 32);
    assert!(
        left.as_array()
            .unwrap()
            .iter()
            .all(|r| r["approval"] == "pending")
    );
    let o = skillhost(&data, &["gc", "--older-than", "1x"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("unit"), "{}", stderr(&o));
}

/// Every item of a paged listing, following `x-next-cursor`; and the
/// number of pages.
async fn walk(api: &Api, first: &str) -> (Vec<Value>, usize) {
    let mut items = Vec::new();
    let mut pages = 0;
    let mut path = first.to_string();
    loop {
        let (status, page, next) = api.send_paged(&path).await;
        assert_eq!(status, 200, "{page}");
        items.extend(page.as_array().unwrap().iter().cloned());
        pages += 1;
        let Some(next) = next else { break };
        let base = first.split('?').next().unwrap();
        let query = first.split_once('?').map(|(_, q)| q).unwrap_or("");
        path = format!("{base}?{query}&cursor={next}");
        assert!(pages < 100, "no end to the pages");
    }
    (items, pages)
}

/// Unreferenced refs go too; one a waiting run names stays.
#[test]
fn gc_forgets_unreferenced_refs_only() {
    let work = tempfile::tempdir().unwrap();
    let (data, _) = setup(work.path());
    let file = work.path().join("a.txt");
    std::fs::write(&file, "one two").unwrap();
    let add = || {
        let o = skillhost(&data, &["refs", "add", file.to_str().unwrap()]);
        assert!(o.status.success(), "{}", stderr(&o));
        stdout(&o).split_whitespace().next().unwrap().to_string()
    };
    let (kept, gone) = (add(), add());
    // A waiting run that names `kept`.
    let o = skillhost(
        &data,
        &[
            "call",
            TOOL,
            "--persona",
            "ana",
            "--ref",
            &kept,
            "--args",
            r##"{"text": "a1", "pattern": "[0-9]", "replacement": "#"}"##,
        ],
    );
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    // Refs are stamped in whole seconds.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let o = skillhost(&data, &["gc", "--older-than", "0s", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = skillhost(&data, &["refs", "list", "--json"]);
    let refs: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let ids: Vec<&str> = refs
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["ref_id"].as_str())
        .collect();
    assert!(!ids.contains(&gone.as_str()), "{ids:?}");
    assert!(ids.contains(&kept.as_str()), "{ids:?}");
    assert!(data.join("refs").join(&kept).exists());
    assert!(!data.join("refs").join(&gone).exists());
}
