//! A test skill for outbound HTTP and read-only assets: it makes exactly
//! the requests and file accesses its arguments ask for, and reports what
//! happened (a refused request is a result, not a tool error, so tests can
//! look at it). Loops are bounded by the arguments, themselves capped.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use skillhost_guest::http::{self, HttpError, Request, Response};
use skillhost_guest::{ToolError, skill};

/// The most URLs `probe.fetch_many` takes, and hops `probe.follow` makes.
const MAX_URLS: usize = 256;
const MAX_HOPS: usize = 16;

#[derive(Deserialize)]
struct FetchArgs {
    url: String,
    #[serde(default = "get")]
    method: String,
    /// Bytes of body to send (`x` repeated).
    #[serde(default)]
    body_size: usize,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    /// Response headers to return.
    #[serde(default)]
    echo_headers: Vec<String>,
}

fn get() -> String {
    "GET".into()
}

/// What one request came to.
#[derive(Serialize, Default)]
struct Fetched {
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<u16>,
    body_len: usize,
    /// The first 256 bytes of the body, as text.
    body: String,
    headers: BTreeMap<String, String>,
    /// The headers of the request as the skill built it (what it could
    /// read back).
    sent_headers: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    kind: Option<String>,
}

fn outcome(
    result: Result<Response, HttpError>,
    echo: &[String],
    sent: &Request,
) -> Fetched {
    let sent_headers = sent.headers.iter().cloned().collect();
    match result {
        Ok(r) => Fetched {
            status: Some(r.status),
            body_len: r.body.len(),
            body: String::from_utf8_lossy(&r.body[..r.body.len().min(256)]).into_owned(),
            headers: echo
                .iter()
                .filter_map(|h| Some((h.clone(), r.header(h)?.to_string())))
                .collect(),
            sent_headers,
            ..Default::default()
        },
        Err(e) => Fetched {
            error: Some(e.message),
            kind: Some(format!("{:?}", e.kind)),
            sent_headers,
            ..Default::default()
        },
    }
}

fn request_of(args: &FetchArgs) -> Request {
    let mut req = Request::new(&args.method, &args.url);
    req.body = vec![b'x'; args.body_size];
    for (k, v) in &args.headers {
        req = req.header(k, v);
    }
    req
}

fn fetch(args: FetchArgs) -> Result<Fetched, ToolError> {
    let req = request_of(&args);
    let result = http::send(req.clone());
    Ok(outcome(result, &args.echo_headers, &req))
}

#[derive(Deserialize)]
struct FetchManyArgs {
    urls: Vec<String>,
    #[serde(default)]
    concurrent: bool,
}

#[derive(Serialize)]
struct FetchedMany {
    results: Vec<Fetched>,
}

fn fetch_many(args: FetchManyArgs) -> Result<FetchedMany, ToolError> {
    if args.urls.len() > MAX_URLS {
        return Err(ToolError::InvalidInput(format!(
            "field `urls`: at most {MAX_URLS}"
        )));
    }
    let requests: Vec<Request> = args.urls.iter().map(|u| Request::get(u)).collect();
    let results = if args.concurrent {
        http::send_all(requests.clone())
    } else {
        requests.iter().cloned().map(http::send).collect()
    };
    Ok(FetchedMany {
        results: results
            .into_iter()
            .zip(&requests)
            .map(|(r, req)| outcome(r, &[], req))
            .collect(),
    })
}

#[derive(Deserialize)]
struct FollowArgs {
    url: String,
}

#[derive(Serialize)]
struct Hop {
    url: String,
    #[serde(flatten)]
    fetched: Fetched,
}

#[derive(Serialize)]
struct Followed {
    hops: Vec<Hop>,
}

/// Follows redirects by hand: each hop is a new request.
fn follow(args: FollowArgs) -> Result<Followed, ToolError> {
    let mut hops = Vec::new();
    let mut url = args.url;
    for _ in 0..MAX_HOPS {
        let req = Request::get(&url);
        let result = http::send(req.clone());
        let next = match &result {
            Ok(r) if (300..400).contains(&r.status) => r.header("location").map(|l| {
                if l.starts_with("http://") || l.starts_with("https://") {
                    l.to_string()
                } else {
                    // A path on the same origin.
                    let origin_end = url[8..].find('/').map(|i| i + 8).unwrap_or(url.len());
                    format!("{}{l}", &url[..origin_end])
                }
            }),
            _ => None,
        };
        hops.push(Hop {
            url: url.clone(),
            fetched: outcome(result, &["location".to_string()], &req),
        });
        match next {
            Some(n) => url = n,
            None => break,
        }
    }
    Ok(Followed { hops })
}

#[derive(Deserialize)]
struct PathArgs {
    path: String,
}

#[derive(Serialize)]
struct FileResult {
    ok: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    text: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

fn read_asset(args: PathArgs) -> Result<FileResult, ToolError> {
    Ok(match std::fs::read(&args.path) {
        Ok(bytes) => FileResult {
            ok: true,
            text: Some(String::from_utf8_lossy(&bytes[..bytes.len().min(4096)]).into_owned()),
            error: None,
        },
        Err(e) => FileResult {
            ok: false,
            text: None,
            error: Some(e.to_string()),
        },
    })
}

fn write_asset(args: PathArgs) -> Result<FileResult, ToolError> {
    Ok(match std::fs::write(&args.path, b"written by a skill") {
        Ok(()) => FileResult {
            ok: true,
            text: None,
            error: None,
        },
        Err(e) => FileResult {
            ok: false,
            text: None,
            error: Some(e.to_string()),
        },
    })
}

skill! {
    "probe.fetch" => fetch,
    "probe.fetch_many" => fetch_many,
    "probe.follow" => follow,
    "probe.read_asset" => read_asset,
    "probe.write_asset" => write_asset,
}
