//! Proof on real data: the `sequence_digits` example's conv1d network reads the cropped
//! MNIST digits as sequences of rows (8 to 24 steps of 28 features, batches padded to
//! their longest) and classifies held-out digits at their own lengths: at least 90%
//! after 8 epochs (measured 94.80%; 10 epochs: 95.80%).

#[allow(dead_code)]
#[path = "../examples/sequence_digits.rs"]
mod sequence_digits;

#[test]
fn conv1d_network_reads_digits_as_sequences() {
    let acc = sequence_digits::run(8).unwrap();
    let last = *acc.last().unwrap();
    assert!(last >= 0.90, "held-out accuracy {last} ({acc:?})");
}
