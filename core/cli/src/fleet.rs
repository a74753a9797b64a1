//! `torchlet fleet join`: this machine as a Flower SuperNode (flwr 1.42, issue 42).
//!
//! `torchlet fleet join MODEL.tlm DATA.safetensors --superlink http://HOST:PORT
//! [--eval EVAL.safetensors] [--key NODE_KEY.pem] [--choice all|head|biases|biases-norms]
//! [--train-only PATTERN]...`
//!
//! - Registers, activates, sends heartbeats, answers "train" and "evaluate" messages until
//!   the run ends, then leaves (deactivate, unregister) and exits 0. Ctrl-C leaves too.
//! - Without `--key`, a P-384 key is made on first use and kept in
//!   `$XDG_CONFIG_HOME/torchlet/fleet-node.pem` (else `~/.config/torchlet/fleet-node.pem`).
//! - One line per round on stderr: round, local loss, seconds.
//! - What travels: arrays and metrics, never a sample.

mod local;

use crate::choices::{plan_choice, StepMode};
use crate::files;
use crate::limits::Limits;
use crate::plan::{plan_at, within};
use crate::train::Choice;
use local::{Data, Round};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::Instant;
use torchlet::model::{ModelFile, Trained};
use torchlet_fleet::records::{config_f64, config_u64};
use torchlet_fleet::sign::Identity;
use torchlet_fleet::{Client, NodeOptions, Reply};

/// `torchlet fleet ...`
#[derive(clap::Subcommand)]
pub enum FleetCommand {
    /// Join a Flower SuperLink as a SuperNode and train on DATA until the run ends.
    Join {
        /// The model file.
        model: PathBuf,
        /// Training data: safetensors with `x` f32 [N, ...] and `y` int64 [N].
        data: PathBuf,
        /// The SuperLink's Fleet API, http://HOST:PORT.
        #[arg(long)]
        superlink: String,
        /// Evaluation data (default: the training data).
        #[arg(long)]
        eval: Option<PathBuf>,
        /// The node's P-384 private key (PEM); made and kept on first use without it.
        #[arg(long)]
        key: Option<PathBuf>,
        /// Which parameters train (the others go back unchanged).
        #[arg(long, value_enum, default_value_t = Choice::All)]
        choice: Choice,
        /// Train only the parameters whose names match (`*` matches any run); repeatable.
        #[arg(long, value_name = "PATTERN", conflicts_with = "choice")]
        train_only: Vec<String>,
    },
}

pub fn run(command: FleetCommand, limits: Limits) -> Result<(), String> {
    let FleetCommand::Join {
        model,
        data,
        superlink,
        eval,
        key,
        choice,
        train_only,
    } = command;
    let bytes: &'static [u8] = files::read(&model)?.leak();
    let file: ModelFile<'static> = files::model(&model, bytes)?;
    let trained = trained(choice, &train_only);
    let train_data = read_data(&data)?;
    let eval_data = match &eval {
        Some(path) => read_data(path)?,
        None => read_data(&data)?,
    };
    let identity = identity(key.as_deref())?;
    let client = Client::new(&superlink, identity).map_err(|e| e.to_string())?;
    let options = NodeOptions::default();
    let stop = options.stop.clone();
    ctrlc::set_handler(move || stop.store(true, Ordering::SeqCst))
        .map_err(|e| format!("Ctrl-C handler: {e}"))?;
    let mut spec = file.to_spec();
    // Arena sizes by input size (the plan depends on shapes only, which stay the model's).
    // Planned with momentum (its buffers) so that one size fits every round's config;
    // evaluation holds every tensor in the arena, as `Trained::All` does.
    let mut arenas: Vec<((Vec<usize>, bool), usize)> = Vec::new();
    let mut arena_for = |dims: Vec<usize>, train: bool| -> Result<usize, String> {
        let key = (dims, train);
        if let Some((_, words)) = arenas.iter().find(|(k, _)| *k == key) {
            return Ok(*words);
        }
        let plan = match (train, trained) {
            (true, Trained::All) | (false, _) => plan_at(file, &key.0, 0.9)?,
            (true, t) => plan_choice(file, &key.0, t, 0.9, false, StepMode::Training)?,
        };
        // The round's sizes come from the server's config: within the budgets first.
        within(limits, &plan, &key.0, key.1)?;
        let words = plan.step_bytes.max(plan.inference_bytes).div_ceil(4) + 16;
        arenas.push((key, words));
        Ok(words)
    };
    let summary = torchlet_fleet::run(&client, &options, |task| {
        let started = Instant::now();
        let round_no = config_u64(task.config, "server-round").unwrap_or(0);
        let received = local::load(&spec, task.arrays)?;
        if task.kind == "evaluate" {
            let batch = config_u64(task.config, "batch-size").unwrap_or(32) as usize;
            let mut dims = eval_data.x.shape.clone();
            dims[0] = batch.clamp(1, eval_data.n());
            let words = arena_for(dims, false)?;
            let (eval_loss, eval_acc) = local::evaluate(&received, words, &eval_data, batch)?;
            eprintln!(
                "round {round_no}: eval loss {eval_loss:.4}, accuracy {eval_acc:.4} ({:.1} s)",
                started.elapsed().as_secs_f64()
            );
            return Ok(Reply::Evaluate {
                num_examples: eval_data.n() as u64,
                eval_loss,
                eval_acc,
            });
        }
        let round = round_settings(task.config)?;
        let mut dims = train_data.x.shape.clone();
        dims[0] = round.batch.clamp(1, train_data.n());
        let words = arena_for(dims, true)?;
        let (updated, train_loss) = local::train(&received, trained, words, &train_data, &round)?;
        let counted = round.steps as i64;
        let arrays = local::reply_arrays(&updated, task.arrays, counted)?;
        eprintln!(
            "round {round_no}: train loss {train_loss:.4} ({:.1} s)",
            started.elapsed().as_secs_f64()
        );
        if train_loss.is_finite()
            && updated
                .tensors
                .iter()
                .all(|t| t.data.iter().all(|v| v.is_finite()))
        {
            spec = updated;
        }
        Ok(Reply::Train {
            arrays,
            num_examples: train_data.n() as u64,
            train_loss,
        })
    })
    .map_err(|e| e.to_string())?;
    eprintln!(
        "fleet: node {} left after {} replies ({} errors), {} HTTP requests",
        summary.node_id,
        summary.replies,
        summary.error_replies,
        client.requests()
    );
    Ok(())
}

fn round_settings(config: &torchlet_fleet::proto::ConfigRecord) -> Result<Round, String> {
    let need = |key: &str| config_f64(config, key).ok_or_else(|| format!("config has no number {key:?}"));
    let round = Round {
        lr: need("lr")? as f32,
        momentum: config_f64(config, "momentum").unwrap_or(0.0) as f32,
        weight_decay: config_f64(config, "weight-decay").unwrap_or(0.0) as f32,
        steps: config_u64(config, "local-steps").ok_or("config has no integer \"local-steps\"")? as usize,
        batch: config_u64(config, "batch-size").ok_or("config has no integer \"batch-size\"")? as usize,
    };
    if !(round.lr.is_finite() && round.momentum.is_finite() && round.weight_decay.is_finite())
        || round.batch == 0
        || round.steps == 0
        || round.steps > 1_000_000
    {
        return Err(format!(
            "config lr {} momentum {} weight-decay {} local-steps {} batch-size {}: need finite numbers, 1 <= local-steps <= 1e6, batch-size >= 1",
            round.lr, round.momentum, round.weight_decay, round.steps, round.batch
        ));
    }
    Ok(round)
}

fn trained(choice: Choice, train_only: &[String]) -> Trained<'static> {
    if !train_only.is_empty() {
        let patterns: Vec<&'static str> = train_only.iter().map(|p| &*p.clone().leak()).collect();
        return Trained::Matching(patterns.leak());
    }
    match choice {
        Choice::All => Trained::All,
        Choice::Head => Trained::Head,
        Choice::Biases => Trained::Biases,
        Choice::BiasesNorms => Trained::BiasesAndNorms,
    }
}

fn read_data(path: &Path) -> Result<Data, String> {
    let mut tensors = files::read_tensors(path)?;
    let mut take = |name: &str| match tensors.iter().position(|t| t.name == name) {
        Some(i) => Ok(tensors.swap_remove(i)),
        None => Err(format!(
            "{}: no tensor {name:?} (x: f32 [N, ...], y: int64 [N])",
            path.display()
        )),
    };
    let (x, y) = (take("x")?, take("y")?);
    let n = x.shape.first().copied().unwrap_or(0);
    if n == 0 || y.shape.first() != Some(&n) || !(2..=4).contains(&x.shape.len()) {
        return Err(format!(
            "{}: x has shape {:?} and y {:?}: need x [N, features], NCL or NCHW and the same N >= 1",
            path.display(),
            x.shape,
            y.shape
        ));
    }
    // Non-finite samples are not refused here: a round on them gives a non-finite loss or
    // array, which is answered with an error reply (nothing non-finite is ever sent).
    let labels = y.data.iter().map(|v| *v as i64).collect();
    Ok(Data { x, labels })
}

/// The node key: `--key`, or the kept one (made on first use).
fn identity(key: Option<&Path>) -> Result<Identity, String> {
    let path = match key {
        Some(p) => p.to_path_buf(),
        None => default_key_path()?,
    };
    if key.is_some() || path.exists() {
        let pem = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        return Identity::from_pem(&pem).map_err(|e| format!("{}: {e}", path.display()));
    }
    let identity = Identity::generate(&mut rand_core::OsRng).map_err(|e| e.to_string())?;
    let pem = identity.to_pem().map_err(|e| e.to_string())?;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    write_private(&path, pem.as_bytes())?;
    eprintln!("fleet: made a node key, kept in {}", path.display());
    Ok(identity)
}

fn default_key_path() -> Result<PathBuf, String> {
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))
        .ok_or("no --key, and neither XDG_CONFIG_HOME nor HOME is set to keep one in")?;
    Ok(base.join("torchlet").join("fleet-node.pem"))
}

fn write_private(path: &Path, bytes: &[u8]) -> Result<(), String> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut f = options
        .open(path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    f.write_all(bytes).map_err(|e| format!("{}: {e}", path.display()))
}
