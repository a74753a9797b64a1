//! The README's main command: trains W1 on the real MNIST digits (8,000 training,
//! 2,000 held out) on the host and prints per-epoch progress, held-out accuracy, the
//! arena's high-water mark and the time per step.
//!
//! `cargo run --release -p torchlet-tests --example train_digits [-- EPOCHS BATCH]`

use torchlet_tests::digits::Digits;
use torchlet_tests::train::{plan_bytes, train_w1, Recipe, RECIPE};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let epochs = args.first().map_or(Ok(RECIPE.epochs), |s| s.parse())?;
    let batch = args.get(1).map_or(Ok(RECIPE.batch), |s| s.parse())?;
    let digits = Digits::load()?;
    let (train, test) = digits.split();
    let recipe = Recipe {
        epochs,
        batch,
        ..RECIPE
    };
    println!(
        "W1 digits-fcn on {} training / {} held-out MNIST digits, {recipe:?}",
        train.len(),
        test.len()
    );
    println!(
        "arena plan: {} bytes per step at batch {batch}, {} bytes at batch 1 (28x28)",
        plan_bytes(batch, 28, 28)?,
        plan_bytes(1, 28, 28)?
    );
    let (_, high_water) = train_w1(train, test, recipe, |r| {
        println!(
            "epoch {:2}  loss {:.4}  held-out accuracy {:.2}%  {:.0} us/step",
            r.epoch,
            r.loss,
            r.accuracy * 100.0,
            r.us_per_step
        );
    })?;
    println!("arena high-water mark: {high_water} bytes");
    Ok(())
}
