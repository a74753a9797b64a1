//! End to end: W1 trained on the real MNIST digits (first 8,000 of
//! `data/mnist10k.bin`) reaches at least 95% on the 2,000 held-out digits, with the
//! README's recipe and a fixed seed. The full run with per-epoch output is
//! `cargo run --release -p torchlet-tests --example train_digits`.

use torchlet_tests::digits::Digits;
use torchlet_tests::train::{train_w1, Recipe, RECIPE};

#[test]
fn w1_reaches_95_percent_on_held_out_mnist() {
    let digits = Digits::load().unwrap();
    let (train, test) = digits.split();
    assert_eq!((train.len(), test.len()), (8000, 2000));
    let recipe = Recipe { ..RECIPE };
    let (reports, high_water) = train_w1(train, test, recipe, |r| {
        eprintln!(
            "epoch {} loss {:.4} held-out {:.2}% {:.0} us/step",
            r.epoch,
            r.loss,
            r.accuracy * 100.0,
            r.us_per_step
        )
    })
    .unwrap();
    let last = reports.last().unwrap();
    assert!(
        last.accuracy >= 0.95,
        "held-out accuracy {:.2}% after {} epochs",
        last.accuracy * 100.0,
        last.epoch
    );
    assert!(high_water > 0);
}
