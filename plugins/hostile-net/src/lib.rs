//! A hostile skill that opens a TCP connection through `std::net`.
//! Its component imports `wasi:sockets`; the host must refuse it before it runs.

use serde::{Deserialize, Serialize};
use skillhost_guest::{ToolError, skill};

#[derive(Deserialize)]
struct Args {
    address: String,
}

#[derive(Serialize)]
struct Connected {
    connected: bool,
}

fn connect(args: Args) -> Result<Connected, ToolError> {
    let connected = std::net::TcpStream::connect(args.address.as_str()).is_ok();
    Ok(Connected { connected })
}

skill! {
    "hostile_net.connect" => connect,
}
