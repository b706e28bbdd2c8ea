//! A host process for the attack suite's tests that kill the host itself:
//! `attack_host DATA_DIR` builds a [`skillhost::Host`] on the data dir with
//! every enabled MCP server started (as `skillhost serve` does), prints
//! `ready` on stdout once they are settled, and then runs until it is
//! killed or its stdin closes (then it shuts down in order).
//!
//! It exits 2 with a message on stderr for a missing argument, 1 when the
//! host cannot be built.

use std::io::Read;
use std::process::ExitCode;

#[tokio::main]
async fn main() -> ExitCode {
    let Some(data) = std::env::args().nth(1) else {
        eprintln!("usage: attack_host DATA_DIR");
        return ExitCode::from(2);
    };
    let host = match skillhost::HostBuilder::new(data)
        .connect_mcp(true)
        .build()
        .await
    {
        Ok(h) => h,
        Err(e) => {
            eprintln!("attack_host: cannot build the host: {e}");
            return ExitCode::from(1);
        }
    };
    println!("ready");
    // Until stdin closes (a test that means to kill the host keeps it open).
    let _ = tokio::task::spawn_blocking(|| {
        let mut sink = Vec::new();
        std::io::stdin().read_to_end(&mut sink)
    })
    .await;
    host.shutdown().await;
    ExitCode::SUCCESS
}
