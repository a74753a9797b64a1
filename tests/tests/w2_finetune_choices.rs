//! `finetune_w2`'s fine-tuning on the host, for the choices it could run: W2 from
//! `firmware/assets/w2_pretrained.tlm`, the committed cropped digits at native size
//! (`firmware/assets/digits_cropped.bin`), the device's recipe (one sample per step,
//! SGD lr 0.002, momentum 0.9, 3 epochs, BatchNorm statistics frozen). Each choice must
//! raise held-out accuracy by the device's margin of 20 points; the figures are
//! printed (`--nocapture`) for tests/RESULTS.md.

use torchlet::model::{Model, ModelFile, Trained};
use torchlet::optim::Sgd;
use torchlet::{Graph, Result};
use torchlet_tests::samples_file::assets::{Sample, Samples};

#[repr(C, align(4))]
struct Aligned<const L: usize>([u8; L]);
const LEN: usize = include_bytes!("../../firmware/assets/w2_pretrained.tlm").len();
static FILE: Aligned<LEN> = Aligned(*include_bytes!("../../firmware/assets/w2_pretrained.tlm"));
static SAMPLES: &[u8] = include_bytes!("../../firmware/assets/digits_cropped.bin");

const TAPE: usize = 160;
const EPOCHS: usize = 3;
const MARGIN_POINTS: usize = 20;

fn predict(g: &mut Graph<'static, f32, TAPE>, m: &Model<'static>, s: &Sample<'_>) -> Result<usize> {
    g.set_grad_enabled(false);
    let x = g.input_with(&[1, 1, s.h, s.w], |d| s.fill(d))?;
    let y = m.forward(g, &[x]).map_err(torchlet::Error::from)?;
    let row = g.data(y)?;
    let best = (0..row.len())
        .max_by(|&a, &b| row[a].total_cmp(&row[b]))
        .unwrap_or(0);
    g.end_step();
    g.set_grad_enabled(true);
    Ok(best)
}

fn correct(g: &mut Graph<'static, f32, TAPE>, m: &Model<'static>, samples: &Samples<'_>) -> usize {
    samples
        .heldout()
        .filter(|s| predict(g, m, s).unwrap() == s.label as usize)
        .count()
}

/// Held-out correct answers (of 100) before and after fine-tuning under `trained`.
fn finetune(trained: Trained<'static>, compact: bool) -> (usize, usize) {
    let samples = Samples::parse(SAMPLES).unwrap();
    let arena: &'static mut [f32] = vec![0.0; 1 << 18].leak();
    let mut g: Graph<'static, f32, TAPE> = Graph::new(arena);
    g.set_compact_saves(compact);
    let file = ModelFile::parse(&FILE.0).unwrap();
    let m = trained.build(&mut g, file).unwrap();
    let mut sgd = Sgd::new(&mut g, 0.002, 0.9, 0.0).unwrap();
    let before = correct(&mut g, &m, &samples);
    for _ in 0..EPOCHS {
        for s in samples.finetune() {
            g.zero_grad();
            let x = g.input_with(&[1, 1, s.h, s.w], |d| s.fill(d)).unwrap();
            let y = m.forward(&mut g, &[x]).unwrap();
            g.free(x).unwrap();
            let loss = g.cross_entropy(y, &[s.label as usize]).unwrap();
            g.backward(loss).unwrap();
            sgd.step(&mut g).unwrap();
            g.end_step();
        }
    }
    (before, correct(&mut g, &m, &samples))
}

#[test]
fn every_bias_choice_gains_the_devices_margin_on_cropped_digits() {
    for (what, trained, compact) in [
        ("biases + head", Trained::Biases, false),
        ("biases + norm scales + head", Trained::BiasesAndNorms, false),
        (
            "biases + norm scales + head, 16-bit norm saves",
            Trained::BiasesAndNorms,
            true,
        ),
    ] {
        let (before, after) = finetune(trained, compact);
        println!("{what}: held-out accuracy before {before}/100, after {after}/100");
        assert!(after >= before + MARGIN_POINTS, "{what}: {before} -> {after}");
    }
}
