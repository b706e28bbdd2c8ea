//! An upstream MCP server's log lines during a call reach the calling
//! client that asked for them: `skillhost serve --stdio` between the
//! official Python SDK (client and server, `tests/peers/py_server.py`'s
//! `chatty` tool), at the client's level, with configured secrets redacted.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;
use serde_json::{Value, json};

/// A secret configured for the server (an env value), which its log line
/// echoes: it must reach the client redacted.
const SECRET: &str = "sk-upstream-7d6c5b4a39281706";

fn data_dir(work: &Path) -> PathBuf {
    let data = work.join("data");
    std::fs::create_dir_all(&data).expect("mkdir");
    std::fs::write(
        data.join("mcp_servers.json"),
        json!({"servers": [{
            "name": "py",
            "transport": "stdio",
            "command": python(),
            "args": [repo().join("tests/peers/py_server.py"), "--transport", "stdio"],
            "env": {"PEER_TOKEN": SECRET},
            "enabled": false,
            "allowed_persona_ids": ["*"],
        }]})
        .to_string(),
    )
    .expect("servers");
    std::fs::write(
        data.join("settings.json"),
        json!({"mcp_stdio_allowlist": [python()]}).to_string(),
    )
    .expect("settings");
    for args in [
        &["personas", "add", "support"][..],
        &["mcp", "enable", "py"],
        &["grants", "mcp", "support", "py", "on"],
    ] {
        let o = skillhost(&data, args);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    }
    data
}

const CLIENT: &str = r##"
import json, os, sys
import anyio
from mcp import Client, StdioServerParameters
from mcp.client.stdio import get_default_environment

async def main():
    skillhost, data, level = sys.argv[1:4]
    lines = []
    async def on_log(params):
        lines.append(params.model_dump(mode="json", exclude_none=True))
    env = {**get_default_environment(), **{k: v for k, v in os.environ.items() if k == "SKILLHOST_DATABASE"}}
    params = StdioServerParameters(command=skillhost, args=["--data-dir", data, "serve", "--stdio", "--persona", "support"], env=env)
    with anyio.fail_after(60):
        async with Client(params, mode="legacy", logging_callback=on_log) as client:
            if level != "none":
                await client.set_logging_level(level)
            for _ in range(150):
                names = [t.name for t in (await client.list_tools()).tools]
                if "py.chatty" in names:
                    break
                await anyio.sleep(0.2)
            r = await client.call_tool("py.chatty", {"text": "sunny", "tail": sys.argv[4]})
    print(json.dumps({"lines": lines, "result": r.model_dump(mode="json", exclude_none=True)}))

anyio.run(main)
"##;

fn run(data: &Path, level: &str) -> Value {
    let mut cmd = Command::new(python());
    cmd.arg("-c")
        .arg(CLIENT)
        .arg(env!("CARGO_BIN_EXE_skillhost"))
        .arg(data)
        .arg(level)
        .arg(SECRET);
    with_database(&mut cmd, data);
    let o = cmd.output().expect("run python");
    assert!(
        o.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let out = String::from_utf8_lossy(&o.stdout);
    serde_json::from_str(out.lines().last().unwrap_or_default()).expect("client JSON")
}

#[test]
fn server_log_lines_reach_the_client_at_its_level_redacted() {
    let work = tempfile::tempdir().expect("tempdir");
    let data = data_dir(work.path());

    let report = run(&data, "info");
    assert_ne!(report["result"]["isError"], true, "{report}");
    let lines = report["lines"].as_array().expect("lines");
    let texts: Vec<String> = lines.iter().map(|l| l["data"].to_string()).collect();
    // info and warning, not debug; in order; the warning keeps its logger.
    assert_eq!(lines.len(), 2, "{report}");
    assert_eq!(lines[0]["level"], "info", "{report}");
    assert!(texts[0].contains("info sunny"), "{texts:?}");
    assert_eq!(lines[1]["level"], "warning", "{report}");
    assert!(texts[1].contains("py.chatty: warning sunny"), "{texts:?}");
    assert_eq!(
        lines[1]["logger"], "py",
        "the source is the server: {report}"
    );
    // The configured secret the server echoed is redacted.
    assert!(!report.to_string().contains(SECRET), "{report}");

    // A client that asked for nothing gets nothing.
    let report = run(&data, "none");
    assert_eq!(report["lines"], json!([]), "{report}");
}
