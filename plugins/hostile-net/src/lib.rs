//! A hostile skill that opens a TCP connection through `std::net`.
//! Its component imports `wasi:sockets`; the host links refusing sockets,
//! so the connection fails inside the sandbox and the skill reports why.

use serde::{Deserialize, Serialize};
use skillhost_guest::{ToolError, skill};

#[derive(Deserialize)]
struct Args {
    address: String,
}

#[derive(Serialize)]
struct Connected {
    connected: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

fn connect(args: Args) -> Result<Connected, ToolError> {
    Ok(match std::net::TcpStream::connect(args.address.as_str()) {
        Ok(_) => Connected { connected: true, error: None },
        Err(e) => Connected { connected: false, error: Some(e.to_string()) },
    })
}

skill! {
    "hostile_net.connect" => connect,
}
