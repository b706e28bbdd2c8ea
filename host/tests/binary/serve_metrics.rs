//! `GET /metrics` of `skillhost serve --http`: the operator's token only,
//! the Prometheus text format, and counters that move by exactly the calls
//! made through `/mcp` (the official MCP Python SDK client,
//! tests/peers/http_calls.py): WASM calls that succeed, fail, trap (fuel,
//! panic), time out, are cancelled, are denied, wait for approval; MCP
//! calls (tests/peers/py_server.py, and tests/peers/hostile_server.py in
//! `crash-mid-call` mode, which the supervisor then restarts).

use crate::common;
use common::{HttpServer, python, repo, skillhost, start_http, stderr, stdout};

use std::collections::{BTreeMap, HashMap};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use skillhost_test_plugins as art;

fn start(data: &Path) -> HttpServer {
    start_http(data, 2)
}

/// A response: status, headers (lower-case names), body.
struct Response {
    status: u16,
    headers: HashMap<String, String>,
    body: String,
}

fn get(port: u16, path: &str, token: Option<&str>) -> Response {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let mut req = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n");
    if let Some(t) = token {
        req.push_str(&format!("Authorization: Bearer {t}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).expect("send");
    let mut resp = String::new();
    s.read_to_string(&mut resp).expect("read the response");
    let (head, body) = resp.split_once("\r\n\r\n").expect("a header block");
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())
        .expect("a status line");
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect::<HashMap<_, _>>();
    assert!(
        !headers
            .get("transfer-encoding")
            .is_some_and(|v| v.contains("chunked")),
        "this reader expects a whole body"
    );
    Response {
        status,
        headers,
        body: body.to_string(),
    }
}

fn ok(data: &Path, args: &[&str]) -> String {
    let o = skillhost(data, args);
    assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    stdout(&o)
}

/// A skill folder at `dir/name` holding `plugin`'s manifest (edited by
/// `edit`) and its built component.
fn skill_folder(dir: &Path, name: &str, plugin: &str, wasm: &str, edit: &dyn Fn(String) -> String) {
    let folder = dir.join(name);
    std::fs::create_dir_all(&folder).expect("mkdir");
    let manifest =
        edit(std::fs::read_to_string(Path::new(plugin).join("skill.yaml")).expect("manifest"));
    std::fs::write(folder.join("skill.yaml"), &manifest).expect("write manifest");
    let component = skillhost::SkillManifest::parse(&manifest)
        .expect("valid manifest")
        .component
        .expect("component path");
    std::fs::copy(wasm, folder.join(component)).expect("copy component");
}

fn peer(file: &str) -> String {
    repo()
        .join("tests/peers")
        .join(file)
        .to_str()
        .expect("a UTF-8 path")
        .to_string()
}

/// A data dir with persona `support` granted text-tools (a local copy
/// whose `text.regex_replace` mutates data, so it waits for approval), the
/// hostile skill (a small fuel budget and a 3 s deadline), and two MCP
/// servers granted to every persona: `py` (the SDK peer, read-only tools
/// time out after 1 s) and `crashy` (exits on any call; `boom` needs no
/// confirmation).
fn data_dir(work: &Path) -> PathBuf {
    let skills = work.join("skills");
    skill_folder(
        &skills,
        "text-tools",
        art::TEXT_TOOLS_DIR,
        art::TEXT_TOOLS_WASM_PATH,
        &|m| {
            let at = m.find("- name: text.regex_replace").expect("regex_replace");
            let ro = at + m[at..].find("read_only: true").expect("read_only");
            format!("{}read_only: false{}", &m[..ro], &m[ro + 15..])
        },
    );
    skill_folder(
        &skills,
        "hostile",
        art::HOSTILE_DIR,
        art::HOSTILE_WASM_PATH,
        &|m| format!("{m}\nlimits: {{fuel: 20000000, timeout_ms: 3000}}\n"),
    );
    let data = work.join("data");
    std::fs::create_dir_all(&data).expect("mkdir");
    std::fs::write(
        data.join("settings.json"),
        json!({"skill_dirs": [skills.join("text-tools"), skills.join("hostile")]}).to_string(),
    )
    .expect("settings");
    let servers = json!({"servers": [
        {"name": "py", "transport": "stdio", "command": python(),
         "args": [peer("py_server.py"), "--transport", "stdio"],
         "enabled": false, "allowed_persona_ids": ["*"],
         "timeouts": {"read_only_secs": 1}},
        {"name": "crashy", "transport": "stdio", "command": python(),
         "args": [peer("hostile_server.py"), "crash-mid-call"],
         "enabled": false, "allowed_persona_ids": ["*"],
         "tools": {"boom": {"requires_confirmation": false}}},
    ]});
    std::fs::write(data.join("mcp_servers.json"), servers.to_string()).expect("servers");
    for args in [
        &["skills", "trust", "text-tools"][..],
        &["skills", "trust", "hostile"],
        &["personas", "add", "support"],
        &["grants", "skill", "support", "text-tools", "on"],
        &["grants", "skill", "support", "hostile", "on"],
        // Pins each server's tools, so the server registers them before
        // its first call.
        &["mcp", "enable", "py"],
        &["mcp", "enable", "crashy"],
    ] {
        ok(&data, args);
    }
    data
}

fn calls(port: u16, token: &str, calls: &Value) -> Vec<Value> {
    let report = common::python_peer(
        "http_calls.py",
        &[
            &format!("http://127.0.0.1:{port}/mcp"),
            token,
            "legacy",
            &calls.to_string(),
        ],
    );
    serde_json::from_value(report).expect("a list of call reports")
}

// --- the exposition format -------------------------------------------------

/// One sample line.
#[derive(Debug)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// A parsed exposition: the samples, and each family's type.
#[derive(Debug)]
struct Exposition {
    samples: Vec<Sample>,
    types: HashMap<String, String>,
}

fn metric_name(s: &str) -> bool {
    let mut c = s.chars();
    c.next()
        .is_some_and(|f| f.is_ascii_alphabetic() || f == '_' || f == ':')
        && c.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

fn label_name(s: &str) -> bool {
    let mut c = s.chars();
    c.next()
        .is_some_and(|f| f.is_ascii_alphabetic() || f == '_')
        && c.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Parses `{name="value",…}` (escapes `\\`, `\"`, `\n`); returns the labels
/// and the rest of the line.
fn parse_labels(s: &str) -> Result<(BTreeMap<String, String>, &str), String> {
    let mut labels = BTreeMap::new();
    let mut rest = s.strip_prefix('{').ok_or("no `{`")?;
    loop {
        if let Some(r) = rest.strip_prefix('}') {
            return Ok((labels, r));
        }
        let (name, r) = rest.split_once("=\"").ok_or("a label without =\"")?;
        if !label_name(name) {
            return Err(format!("bad label name {name:?}"));
        }
        let mut value = String::new();
        let mut chars = r.char_indices();
        let end = loop {
            match chars.next() {
                Some((_, '\\')) => match chars.next() {
                    Some((_, '\\')) => value.push('\\'),
                    Some((_, '"')) => value.push('"'),
                    Some((_, 'n')) => value.push('\n'),
                    other => return Err(format!("bad escape {other:?}")),
                },
                Some((i, '"')) => break i,
                Some((_, c)) => value.push(c),
                None => return Err("an unterminated label value".into()),
            }
        };
        if labels.insert(name.to_string(), value).is_some() {
            return Err(format!("label {name} twice"));
        }
        rest = &r[end + 1..];
        rest = rest.strip_prefix(',').unwrap_or(rest);
    }
}

fn parse_value(s: &str) -> Result<f64, String> {
    match s {
        "+Inf" => Ok(f64::INFINITY),
        "-Inf" => Ok(f64::NEG_INFINITY),
        "NaN" => Ok(f64::NAN),
        _ => s.parse().map_err(|e| format!("bad value {s:?}: {e}")),
    }
}

/// Checks every line against the text format 0.0.4 grammar and the rules
/// between lines (one TYPE per family, before its samples; samples of a
/// family together; histogram buckets cumulative and ending at +Inf =
/// count), and parses it.
fn parse(text: &str) -> Result<Exposition, String> {
    let mut samples = Vec::new();
    let mut types: HashMap<String, String> = HashMap::new();
    let mut helps: HashMap<String, String> = HashMap::new();
    let mut done_families: Vec<String> = Vec::new();
    let mut current: Option<String> = None;
    if !text.ends_with('\n') {
        return Err("the text does not end with a newline".into());
    }
    for (n, line) in text.lines().enumerate() {
        let at = |e: String| format!("line {}: {e}: {line:?}", n + 1);
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest
                .split_once(' ')
                .ok_or_else(|| at("no help text".into()))?;
            if !metric_name(name) {
                return Err(at("bad metric name".into()));
            }
            let mut chars = help.chars();
            while let Some(c) = chars.next() {
                if c == '\\' && !matches!(chars.next(), Some('\\' | 'n')) {
                    return Err(at("bad escape in HELP".into()));
                }
            }
            if helps.insert(name.into(), help.into()).is_some() {
                return Err(at("HELP twice".into()));
            }
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, ty) = rest.split_once(' ').ok_or_else(|| at("no type".into()))?;
            if !metric_name(name) {
                return Err(at("bad metric name".into()));
            }
            if !matches!(
                ty,
                "counter" | "gauge" | "histogram" | "summary" | "untyped"
            ) {
                return Err(at("unknown type".into()));
            }
            if types.insert(name.into(), ty.into()).is_some() {
                return Err(at("TYPE twice".into()));
            }
            if samples
                .iter()
                .any(|s: &Sample| family_of(&s.name, &types) == name)
            {
                return Err(at("TYPE after the family's samples".into()));
            }
            continue;
        }
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let name_end = line.find(['{', ' ']).ok_or_else(|| at("no value".into()))?;
        let name = &line[..name_end];
        if !metric_name(name) {
            return Err(at("bad metric name".into()));
        }
        let (labels, rest) = if line[name_end..].starts_with('{') {
            parse_labels(&line[name_end..]).map_err(at)?
        } else {
            (BTreeMap::new(), &line[name_end..])
        };
        let mut fields = rest
            .strip_prefix(' ')
            .ok_or_else(|| at("no space before the value".into()))?
            .split(' ');
        let value = parse_value(fields.next().unwrap_or_default()).map_err(at)?;
        if let Some(ts) = fields.next()
            && ts.parse::<i64>().is_err()
        {
            return Err(at("bad timestamp".into()));
        }
        if fields.next().is_some() {
            return Err(at("trailing fields".into()));
        }
        let family = family_of(name, &types);
        if !types.contains_key(&family) {
            return Err(at(format!("no TYPE for family {family}")));
        }
        if current.as_deref() != Some(family.as_str()) {
            if done_families.contains(&family) {
                return Err(at("a family's samples are not together".into()));
            }
            if let Some(c) = current.take() {
                done_families.push(c);
            }
            current = Some(family);
        }
        samples.push(Sample {
            name: name.into(),
            labels,
            value,
        });
    }
    let exposition = Exposition { samples, types };
    check_histograms(&exposition)?;
    Ok(exposition)
}

/// The family a sample belongs to: a histogram's `_bucket`, `_sum` and
/// `_count` belong to it, anything else to its own name.
fn family_of(name: &str, types: &HashMap<String, String>) -> String {
    for suffix in ["_bucket", "_sum", "_count"] {
        if let Some(base) = name.strip_suffix(suffix)
            && types.get(base).is_some_and(|t| t == "histogram")
        {
            return base.to_string();
        }
    }
    name.to_string()
}

fn check_histograms(e: &Exposition) -> Result<(), String> {
    for (name, ty) in &e.types {
        if ty != "histogram" {
            continue;
        }
        let bucket = format!("{name}_bucket");
        let mut series: BTreeMap<BTreeMap<String, String>, Vec<(f64, f64)>> = BTreeMap::new();
        for s in e.samples.iter().filter(|s| s.name == bucket) {
            let mut labels = s.labels.clone();
            let le = labels
                .remove("le")
                .ok_or_else(|| format!("{bucket} without le"))?;
            series
                .entry(labels)
                .or_default()
                .push((parse_value(&le)?, s.value));
        }
        for (labels, buckets) in series {
            let mut last = (f64::NEG_INFINITY, 0.0);
            for &(le, v) in &buckets {
                if le <= last.0 || v < last.1 {
                    return Err(format!("{bucket}{labels:?}: not cumulative: {buckets:?}"));
                }
                last = (le, v);
            }
            if last.0 != f64::INFINITY {
                return Err(format!("{bucket}{labels:?}: no +Inf bucket"));
            }
            let count = e
                .samples
                .iter()
                .find(|s| s.name == format!("{name}_count") && s.labels == labels)
                .ok_or_else(|| format!("{name}_count{labels:?} missing"))?;
            if count.value != last.1 {
                return Err(format!(
                    "{name}: +Inf bucket {} != count {}",
                    last.1, count.value
                ));
            }
        }
    }
    Ok(())
}

impl Exposition {
    /// The value of the sample `name` with exactly `labels`.
    fn value(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let want: BTreeMap<String, String> = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        self.samples
            .iter()
            .find(|s| s.name == name && s.labels == want)
            .map(|s| s.value)
    }

    /// The histogram `name`'s bucket `le` (compared as a number) of `kind`.
    fn bucket(&self, name: &str, kind: &str, le: f64) -> Option<f64> {
        let bucket = format!("{name}_bucket");
        self.samples
            .iter()
            .find(|s| {
                s.name == bucket
                    && s.labels.get("kind").map(String::as_str) == Some(kind)
                    && s.labels.get("le").and_then(|v| parse_value(v).ok()) == Some(le)
            })
            .map(|s| s.value)
    }

    fn calls(&self, kind: &str, outcome: &str) -> f64 {
        self.value(
            "skillhost_tool_calls_total",
            &[("kind", kind), ("outcome", outcome)],
        )
        .unwrap_or(-1.0)
    }

    fn total_calls(&self) -> f64 {
        self.samples
            .iter()
            .filter(|s| s.name == "skillhost_tool_calls_total")
            .map(|s| s.value)
            .sum()
    }
}

fn scrape(port: u16, admin: &str) -> Exposition {
    let r = get(port, "/metrics", Some(admin));
    assert_eq!(r.status, 200, "{}", r.body);
    parse(&r.body).unwrap_or_else(|e| panic!("not the exposition format: {e}\n{}", r.body))
}

// --- the test ----------------------------------------------------------------

#[test]
fn metrics_count_the_calls_made_through_mcp() {
    let work = tempfile::tempdir().expect("tempdir");
    let data = data_dir(work.path());
    let token = ok(
        &data,
        &[
            "tokens",
            "add",
            "--persona",
            "support",
            "--label",
            "metrics",
        ],
    )
    .trim()
    .to_string();
    let server = start(&data);
    let port = server.port;
    let admin = std::fs::read_to_string(data.join("admin_token")).expect("admin token");
    let admin = admin.trim();

    // The operator's token only.
    let r = get(port, "/metrics", None);
    assert_eq!(r.status, 401, "{}", r.body);
    assert!(
        r.headers
            .get("www-authenticate")
            .is_some_and(|v| v.starts_with("Bearer")),
        "{:?}",
        r.headers
    );
    assert!(!r.body.contains("skillhost_"), "{}", r.body);
    let r = get(port, "/metrics", Some(&token));
    assert_eq!(r.status, 401, "a persona token: {}", r.body);
    let r = get(port, "/metrics", Some("skh_wrong"));
    assert_eq!(r.status, 401, "{}", r.body);
    let r = get(port, "/metrics", Some(admin));
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        r.headers.get("content-type").map(String::as_str),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );

    // Before any call: every call series is there, at zero.
    let before = parse(&r.body).unwrap_or_else(|e| panic!("{e}\n{}", r.body));
    assert_eq!(before.total_calls(), 0.0, "{}", r.body);
    assert_eq!(before.calls("wasm", "ok"), 0.0);
    assert_eq!(before.calls("mcp", "cancelled"), 0.0);
    assert_eq!(
        before.value("skillhost_approvals_pending", &[]),
        Some(0.0),
        "{}",
        r.body
    );
    for (name, ty) in [
        ("skillhost_tool_calls_total", "counter"),
        ("skillhost_tool_call_duration_seconds", "histogram"),
        ("skillhost_traps_total", "counter"),
        ("skillhost_timeouts_total", "counter"),
        ("skillhost_approvals_pending", "gauge"),
        ("skillhost_mcp_servers", "gauge"),
        ("skillhost_mcp_restarts_total", "counter"),
        ("skillhost_build_info", "gauge"),
    ] {
        assert_eq!(
            before.types.get(name).map(String::as_str),
            Some(ty),
            "{name}"
        );
    }

    let report = calls(
        port,
        &token,
        &json!([
            {"tool": "text.word_count", "args": {"text": "one two three"}},
            {"tool": "text.word_count", "args": {"text": "four"}},
            {"tool": "text.word_count", "args": {"text": 5}},
            {"tool": "hostile.spin"},
            {"tool": "hostile.panic"},
            {"tool": "hostile.sleep"},
            // Cancelled by the client long before the 3 s deadline.
            {"tool": "hostile.sleep", "timeout": 0.5},
            // Not in hostile's tool_names: the inner call is denied, and
            // so the outer one.
            {"tool": "hostile.invoke", "args": {"tool": "json.query", "args": {}}},
            {"tool": "text.regex_replace", "args": {"text": "a1", "pattern": "[0-9]", "replacement": "#"}},
            {"tool": "py.lookup", "args": {"key": "k"}},
            {"tool": "py.slow", "args": {"seconds": 20}},
            {"tool": "py.write_note", "args": {"text": "n"}},
            {"tool": "crashy.boom"},
        ]),
    );
    let status = |i: usize| report[i]["result"]["structuredContent"]["status"].clone();
    assert_eq!(
        report[0]["result"]["structuredContent"]["words"], 3,
        "{report:?}"
    );
    assert_eq!(status(2), "error", "{}", report[2]);
    assert_eq!(status(3), "trapped", "{}", report[3]);
    assert_eq!(status(4), "trapped", "{}", report[4]);
    assert_eq!(status(5), "timeout", "{}", report[5]);
    assert!(report[6]["error"].is_string(), "{}", report[6]);
    assert_eq!(status(7), "denied", "{}", report[7]);
    assert_eq!(status(8), "waiting_approval", "{}", report[8]);
    assert_ne!(report[9]["result"]["isError"], true, "{}", report[9]);
    assert_eq!(
        report[11]["result"]["structuredContent"]["status"], "waiting_approval",
        "{}",
        report[11]
    );
    assert_eq!(report[12]["result"]["isError"], true, "{}", report[12]);

    // What the server counted. The cancelled call and the crashed
    // server's restart finish after their replies: wait for them
    // (bounded), then check every figure.
    let deadline = Instant::now() + Duration::from_secs(30);
    let m = loop {
        let m = scrape(port, admin);
        let settled = m.calls("wasm", "cancelled") >= 1.0
            && m.value("skillhost_mcp_restarts_total", &[("server", "crashy")]) >= Some(1.0)
            && m.value("skillhost_mcp_servers", &[("state", "ready")]) == Some(2.0);
        if settled || Instant::now() > deadline {
            break m;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let counted: Vec<(&str, &str, f64)> = [
        ("wasm", "ok", 2.0),
        ("wasm", "error", 1.0),
        ("wasm", "trapped", 2.0),
        ("wasm", "timeout", 1.0),
        ("wasm", "cancelled", 1.0),
        ("wasm", "denied", 2.0),
        ("wasm", "waiting_approval", 1.0),
        ("mcp", "ok", 1.0),
        ("mcp", "timeout", 1.0),
        ("mcp", "waiting_approval", 1.0),
        ("mcp", "error", 1.0),
    ]
    .into_iter()
    .map(|(k, o, want)| (k, o, want - m.calls(k, o)))
    .filter(|(_, _, diff)| *diff != 0.0)
    .collect();
    assert!(
        counted.is_empty(),
        "off by (kind, outcome, expected - counted): {counted:?}"
    );
    assert_eq!(m.total_calls(), 14.0, "no other call counted");
    let traps = |reason: &str| m.value("skillhost_traps_total", &[("reason", reason)]);
    assert_eq!(traps("fuel"), Some(1.0));
    assert_eq!(traps("panic"), Some(1.0));
    assert_eq!(traps("deadline"), Some(1.0));
    assert_eq!(traps("memory"), Some(0.0));
    let timeouts = |kind: &str| m.value("skillhost_timeouts_total", &[("kind", kind)]);
    assert_eq!(timeouts("wasm"), Some(1.0));
    assert_eq!(timeouts("mcp"), Some(1.0));
    // Every executed call has a duration; the waiting ones not yet.
    let h = "skillhost_tool_call_duration_seconds";
    assert_eq!(
        m.value(&format!("{h}_count"), &[("kind", "wasm")]),
        Some(9.0)
    );
    assert_eq!(
        m.value(&format!("{h}_count"), &[("kind", "mcp")]),
        Some(3.0)
    );
    // The wasm deadline (3 s) and the MCP timeout (1 s) are in the sums.
    assert!(m.value(&format!("{h}_sum"), &[("kind", "wasm")]) >= Some(3.0));
    assert!(m.value(&format!("{h}_sum"), &[("kind", "mcp")]) >= Some(1.0));
    // The 3 s deadline lies above the 2.5 s bucket (the other calls may
    // too on a slow machine: a component's first load compiles it).
    assert!(
        m.bucket(h, "wasm", 2.5) <= Some(8.0),
        "{:?}",
        m.bucket(h, "wasm", 2.5)
    );
    assert_eq!(m.bucket(h, "wasm", f64::INFINITY), Some(9.0));
    assert_eq!(m.value("skillhost_approvals_pending", &[]), Some(2.0));
    assert_eq!(
        m.value("skillhost_mcp_restarts_total", &[("server", "crashy")]),
        Some(1.0)
    );
    assert_eq!(
        m.value("skillhost_mcp_restarts_total", &[("server", "py")]),
        Some(0.0)
    );
    assert_eq!(
        m.value("skillhost_mcp_servers", &[("state", "ready")]),
        Some(2.0)
    );
    assert_eq!(
        m.value("skillhost_mcp_servers", &[("state", "failed")]),
        Some(0.0)
    );

    // A decision is not a call: denying a waiting run leaves the call
    // counters alone and takes it off the pending gauge.
    let pending = ok(&data, &["runs", "list", "--pending", "--json"]);
    let pending: Value = serde_json::from_str(&pending).expect("JSON");
    let run_id = pending[0]["run_id"].as_str().expect("a pending run");
    ok(&data, &["runs", "deny", run_id]);
    let after = scrape(port, admin);
    assert_eq!(after.value("skillhost_approvals_pending", &[]), Some(1.0));
    assert_eq!(after.total_calls(), 14.0);
    drop(server);
}

#[test]
fn the_grammar_check_refuses_what_prometheus_would() {
    let good = "# HELP a_total A.\n# TYPE a_total counter\na_total{k=\"v\\\"\"} 1\n";
    assert!(parse(good).is_ok(), "{:?}", parse(good));
    for bad in [
        "a_total 1\n",                                       // no TYPE
        "# TYPE a counter\na{k=\"v} 1\n",                    // unterminated value
        "# TYPE a counter\na{1k=\"v\"} 1\n",                 // bad label name
        "# TYPE a counter\na 1 2 3\n",                       // trailing fields
        "# TYPE a counter\na one\n",                         // bad value
        "# TYPE a counter\na 1",                             // no final newline
        "# TYPE a counter\n# TYPE b gauge\na 1\nb 1\na 2\n", // family split
        "# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_count 1\nh_sum 0\n",
        "# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_count 1\nh_sum 0\n", // no +Inf
    ] {
        assert!(parse(bad).is_err(), "accepted {bad:?}");
    }
}
