//! The `skillhost` binary.

fn main() -> std::process::ExitCode {
    skillhost::cli::main()
}
