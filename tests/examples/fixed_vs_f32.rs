//! Trains W1 on the real MNIST digits twice in one run, in `f32` and in Q16.16 fixed
//! point ([`torchlet::Q16`]), with the same recipe, initialisation and shuffles, and
//! prints both held-out accuracies and their difference.
//!
//! `cargo run --release -p torchlet-tests --example fixed_vs_f32 [-- EPOCHS BATCH TRAIN_N LOSS_SCALE LR]`

use torchlet::Q16;
use torchlet_tests::train::{train_w1_in, EpochReport, Recipe, FIXED_LOSS_SCALE, RECIPE};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let epochs = args.first().map_or(Ok(RECIPE.epochs), |s| s.parse())?;
    let batch = args.get(1).map_or(Ok(RECIPE.batch), |s| s.parse())?;
    let digits = torchlet_tests::digits::Digits::load()?;
    let (train, test) = digits.split();
    let scale = args.get(3).map_or(Ok(FIXED_LOSS_SCALE), |s| s.parse())?;
    let n = args
        .get(2)
        .map_or(Ok(train.len()), |s| s.parse())?
        .min(train.len());
    let train = &train[..n];
    let recipe = Recipe {
        epochs,
        batch,
        lr: args.get(4).map_or(Ok(RECIPE.lr), |s| s.parse())?,
        ..RECIPE
    };
    println!(
        "W1 on {} training / {} held-out MNIST digits, {recipe:?}, q16.16 loss scale {scale}",
        train.len(),
        test.len()
    );
    let show = |name: &str| {
        let name = name.to_string();
        move |r: &EpochReport| {
            println!(
                "{name:6} epoch {:2}  loss {:.4}  held-out accuracy {:.2}%  {:.0} us/step  saturated steps {}",
                r.epoch,
                r.loss,
                r.accuracy * 100.0,
                r.us_per_step,
                r.saturated_steps
            )
        }
    };
    let (f, _) = train_w1_in::<f32>(train, test, recipe, 1.0, show("f32"))?;
    let (q, _) = train_w1_in::<Q16>(train, test, recipe, scale, show("q16.16"))?;
    let (fa, qa) = (
        f.last().map_or(0.0, |r| r.accuracy),
        q.last().map_or(0.0, |r| r.accuracy),
    );
    println!(
        "final held-out accuracy: f32 {:.2}%  q16.16 {:.2}%  difference {:+.2} points",
        fa * 100.0,
        qa * 100.0,
        (qa - fa) * 100.0
    );
    Ok(())
}
