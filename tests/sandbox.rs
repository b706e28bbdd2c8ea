use serde_json::json;
use skillhost::{LimitsRequest, TrapReason};
use skillhost_e2e::*;

#[tokio::test]
async fn smoke() {
    let sb = sandbox();
    let t = text_tools(&sb);
    t.verify_implemented().await.unwrap();
    let out = t.call("text.word_count", &json!({"text": "a b c\nd"}), &LimitsRequest::default()).await.unwrap();
    println!("{out:?}");
    let h = hostile(&sb);
    for tool in ["hostile.spin", "hostile.alloc", "hostile.recurse", "hostile.flood_stdout", "hostile.panic", "hostile.snoop", "hostile.huge_output"] {
        let start = std::time::Instant::now();
        let r = h.call(tool, &json!({}), &LimitsRequest::default()).await;
        println!("{tool} [{:?}]: {:?}", start.elapsed(), r.map(|o| o.output.to_string().chars().take(200).collect::<String>()).map_err(|e| e.to_string()));
    }
    let r = h.call("hostile.sleep", &json!({}), &LimitsRequest{timeout_ms: Some(300), ..Default::default()}).await;
    println!("sleep: {:?}", r.map_err(|e| e.to_string()));
    let _ = TrapReason::Fuel;
}
