//! `torchlet`: PyTorch models in, trained weights out, from the command line.
//!
//! ```text
//! torchlet convert MODEL.onnx OUT.tlm [--fold-bn] [--freeze PATTERN]... [--int8-frozen]
//! torchlet info MODEL.tlm [--input 1x1x28x28]
//! torchlet plan MODEL.tlm --input 1x1x40x32 [--train] [--budget 64KiB]
//! torchlet plan MODEL.tlm --input 1x1x28x28 --choices [--train-only 'blocks.4.*'] [--momentum 0.9]
//! torchlet run MODEL.tlm IN.safetensors OUT.safetensors
//! torchlet train MODEL.tlm DATA.safetensors --lr 0.1 [--steps N] [--batch B] [--momentum M] -o NEW.tlm
//!     [--choice all|head|biases|biases-norms] [--train-only 'blocks.4.*']... [--compact-saves]
//! torchlet export MODEL.tlm OUT.safetensors
//! torchlet fleet join MODEL.tlm DATA.safetensors --superlink http://HOST:PORT [--eval EVAL.safetensors]
//!     [--key NODE_KEY.pem] [--choice all|head|biases|biases-norms] [--train-only PATTERN]...
//! every command: [--max-memory 8GiB] [--max-macs 1e11]
//! ```
//!
//! The library holds the commands so that tests and fuzz targets ([`fuzzing`]) drive
//! the parser and the handlers in-process; `main.rs` only calls [`run`].
//!
//! Before a step allocates or runs, its meta plan is checked against [`Limits`]: a file
//! or a command line can make a command refuse, never abort the process or run for ever.

pub mod args;
mod choices;
mod convert;
mod export;
mod files;
mod fleet;
pub mod fuzzing;
mod info;
pub mod limits;
mod plan;
mod run;
mod train;

use clap::{Parser, Subcommand};
use limits::Limits;
use std::ffi::OsString;
use std::path::PathBuf;
use train::Choice;

/// torchlet: import PyTorch models (ONNX), plan their memory, run, train and export them.
#[derive(Parser)]
#[command(name = "torchlet", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// The most memory a step may allocate (e.g. 512MiB, 8GiB), checked with the meta
    /// plan before anything is allocated. Default: half of physical memory (MemTotal in
    /// /proc/meminfo), or 4 GiB where that cannot be read.
    #[arg(long, global = true, value_name = "SIZE", value_parser = limits::parse_bytes)]
    max_memory: Option<usize>,
    /// The most multiply-accumulates one step (a forward, or a training step) may take,
    /// checked with the meta plan before it starts (e.g. 1e11, 5000000). Default 1e11:
    /// about 200,000 W1 training steps at 28x28 and tens of seconds of one core, far
    /// beyond the models torchlet is for, but it stops a model that would run for hours.
    #[arg(long, global = true, value_name = "MACS", value_parser = limits::parse_count,
          default_value_t = limits::DEFAULT_MAX_MACS)]
    max_macs: u64,
}

#[derive(Subcommand)]
enum Command {
    /// ONNX model (as torch.onnx.export writes it) -> torchlet model file.
    Convert {
        /// The ONNX file; external data files it names are read from its folder only.
        model: PathBuf,
        /// The model file to write.
        out: PathBuf,
        /// Fold each BatchNorm into the convolution before it (inference-only models).
        #[arg(long)]
        fold_bn: bool,
        /// Freeze the parameters whose names match (`*` matches any run of characters,
        /// e.g. `features.*`); repeatable.
        #[arg(long, value_name = "PATTERN")]
        freeze: Vec<String>,
        /// Store the frozen convolution weights as int8, one scale per output channel
        /// (symmetric, scale = max|w| / 127); they stay in the file when run in place.
        #[arg(long)]
        int8_frozen: bool,
    },
    /// Inputs, parameters, and with --input each node's output shape and the bytes of a step.
    Info {
        /// The model file.
        model: PathBuf,
        /// An input size, e.g. 1x1x28x28 (NCHW), 1x40x100 (NCL) or 1x64 (N, features).
        #[arg(long)]
        input: Option<String>,
    },
    /// Exact arena bytes of a step at an input size, and the largest input within a budget.
    Plan {
        /// The model file.
        model: PathBuf,
        /// The input size, e.g. 1x1x40x32.
        #[arg(long)]
        input: String,
        /// Plan a training step (forward, cross-entropy, backward, SGD); default: inference.
        #[arg(long)]
        train: bool,
        /// A memory budget (e.g. 64KiB, 1MiB, 20000): the largest input that fits.
        #[arg(long)]
        budget: Option<String>,
        /// One line per choice of trained parameters (all, biases + norm scales + head,
        /// biases + head, head only, and --train-only), frozen tensors read in place.
        #[arg(long)]
        choices: bool,
        /// With --choices: one more choice, the parameters whose names match (`*`
        /// matches any run of characters, e.g. `blocks.4.*`); repeatable.
        #[arg(long, value_name = "PATTERN")]
        train_only: Vec<String>,
        /// With --choices: SGD momentum, in [0, 1) (its velocity takes memory).
        #[arg(long, default_value_t = 0.0, allow_negative_numbers = true)]
        momentum: f32,
    },
    /// Forward (eval mode) of every tensor in IN (f32, NCHW, NCL or [N, features]); outputs under the same names.
    Run {
        /// The model file.
        model: PathBuf,
        /// Input tensors (safetensors).
        input: PathBuf,
        /// Output tensors (safetensors).
        output: PathBuf,
    },
    /// Train with cross-entropy and SGD on x (f32 [N, ...]) and y (int64 [N]) of DATA.
    Train {
        /// The model file.
        model: PathBuf,
        /// Training data (safetensors with `x` and `y`).
        data: PathBuf,
        /// Learning rate (finite, at least 0).
        #[arg(long, allow_negative_numbers = true)]
        lr: f32,
        /// Steps, 1 to 4,294,967,295 (default: one pass over the data).
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
        steps: Option<u32>,
        /// Batch size, 1 to 4,294,967,295.
        #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..))]
        batch: u32,
        /// SGD momentum, in [0, 1) (default: plain SGD).
        #[arg(long, default_value_t = 0.0, allow_negative_numbers = true)]
        momentum: f32,
        /// Seed of the sample order and of dropout.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// The trained model file to write.
        #[arg(short, long)]
        output: PathBuf,
        /// Which parameters train. `all`: training mode (BatchNorm on batch statistics).
        /// Any other choice fine-tunes as a device does: BatchNorm statistics frozen,
        /// the tensors that do not train read in place and written back unchanged.
        #[arg(long, value_enum, default_value_t = Choice::All)]
        choice: Choice,
        /// Train only the parameters whose names match (`*` matches any run of
        /// characters, e.g. `blocks.4.*`), as a fine-tuning choice; repeatable.
        #[arg(long, value_name = "PATTERN", conflicts_with = "choice")]
        train_only: Vec<String>,
        /// Keep the normalised input of each trained BatchNorm scale in 16 bits (less
        /// memory; the scales' gradients are rounded). Fine-tuning choices only.
        #[arg(long)]
        compact_saves: bool,
    },
    /// Parameters and buffers under their PyTorch state_dict names (safetensors).
    Export {
        /// The model file.
        model: PathBuf,
        /// The safetensors file to write.
        out: PathBuf,
    },
    /// Federated fine-tuning: this machine as a Flower (flwr 1.42) SuperNode.
    #[command(subcommand)]
    Fleet(fleet::FleetCommand),
}

/// Why a command did not run: its arguments (clap's error, which also carries
/// `--help` and `--version`, to print as clap does), or the command's own error.
#[derive(Debug)]
pub enum Failure {
    /// The command line did not parse (or asked for help or the version).
    Usage(clap::Error),
    /// The command refused or failed; the message names what was wrong.
    Command(String),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Usage(e) => write!(f, "{e}"),
            Failure::Command(e) => f.write_str(e),
        }
    }
}

/// Parses `args` (the program name first, as `std::env::args_os` gives them) and runs
/// the command.
pub fn run(args: impl IntoIterator<Item = impl Into<OsString> + Clone>) -> Result<(), Failure> {
    run_within(
        args,
        Limits {
            max_bytes: usize::MAX,
            max_macs: u64::MAX,
        },
    )
}

/// [`run`] with budgets no larger than `cap`, whatever `--max-memory` and `--max-macs`
/// say (the fuzz targets run under an RSS limit).
pub fn run_within(
    args: impl IntoIterator<Item = impl Into<OsString> + Clone>,
    cap: Limits,
) -> Result<(), Failure> {
    let cli = Cli::try_parse_from(args).map_err(Failure::Usage)?;
    let asked = Limits::new(cli.max_memory, cli.max_macs);
    let limits = Limits {
        max_bytes: asked.max_bytes.min(cap.max_bytes),
        max_macs: asked.max_macs.min(cap.max_macs),
    };
    dispatch(cli.command, limits).map_err(Failure::Command)
}

fn dispatch(command: Command, limits: Limits) -> Result<(), String> {
    match command {
        Command::Convert {
            model,
            out,
            fold_bn,
            freeze,
            int8_frozen,
        } => convert::run(&model, &out, fold_bn, &freeze, int8_frozen),
        Command::Info { model, input } => info::run(&model, input.as_deref(), limits),
        Command::Plan {
            model,
            input,
            choices: true,
            train_only,
            momentum,
            ..
        } => plan::run_choices(&model, &input, train_only, momentum, limits),
        Command::Plan {
            model,
            input,
            train,
            budget,
            ..
        } => plan::run(&model, &input, train, budget.as_deref(), limits),
        Command::Run { model, input, output } => run::run(&model, &input, &output, limits),
        Command::Train {
            model,
            data,
            lr,
            steps,
            batch,
            momentum,
            seed,
            output,
            choice,
            train_only,
            compact_saves,
        } => train::run(
            train::Settings {
                model,
                data,
                lr,
                steps: steps.map(|s| s as usize),
                batch: batch as usize,
                momentum,
                seed,
                output,
                choice,
                train_only,
                compact_saves,
            },
            limits,
        ),
        Command::Export { model, out } => export::run(&model, &out, limits),
        Command::Fleet(command) => fleet::run(command, limits),
    }
}
