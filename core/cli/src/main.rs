//! The `torchlet` command: see the library ([`torchlet_cli`]) for the commands.

use std::process::ExitCode;
use torchlet_cli::Failure;

fn main() -> ExitCode {
    match torchlet_cli::run(std::env::args_os()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Usage(e)) => e.exit(),
        Err(Failure::Command(e)) => {
            eprintln!("torchlet: {e}");
            ExitCode::FAILURE
        }
    }
}
