//! Memory follows the choice of trained parameters, on W2 ("mobile-fcn") from its model
//! file (`firmware/assets/w2_pretrained.tlm`, the one `finetune_w2` runs):
//! - for every choice (all, biases + norm scales + head with exact or 16-bit norm
//!   saves, biases + head, head only, last block + head) and many input sizes, a real
//!   step in an arena of exactly the planned bytes reaches exactly the plan;
//! - the gradients of the trained tensors do not depend on what else trains (frozen
//!   layers keep nothing, run in place, and still pass the right gradients);
//! - freezing saves what it should: biases + head, and biases + norm scales + head with
//!   16-bit norm saves, need at least 4x less than the full update at 28x28, and each
//!   smaller choice needs less;
//! - with BatchNorm statistics frozen, backward needs (almost) nothing beyond the
//!   forward's peak: each BatchNorm scales its output's gradient in place into its
//!   input's.

use torchlet::model::{Model, ModelFile, Placement, Trained};
use torchlet::optim::Sgd;
use torchlet::{Graph, Tensor};

#[repr(C, align(4))]
struct Aligned<const L: usize>([u8; L]);
const LEN: usize = include_bytes!("../../firmware/assets/w2_pretrained.tlm").len();
static FILE: Aligned<LEN> = Aligned(*include_bytes!("../../firmware/assets/w2_pretrained.tlm"));

const TAPE: usize = 160;
const LAST_BLOCK: &[&str] = &["blocks.4.*", "fc.*"];
/// The choices, each with whether norm saves are 16-bit (`Graph::set_compact_saves`).
const CHOICES: [(Trained<'static>, bool); 6] = [
    (Trained::All, false),
    (Trained::BiasesAndNorms, false),
    (Trained::BiasesAndNorms, true),
    (Trained::Biases, false),
    (Trained::Head, false),
    (Trained::Matching(LAST_BLOCK), false),
];

fn file() -> ModelFile<'static> {
    ModelFile::parse(&FILE.0).unwrap()
}

/// W2 in `g` as `finetune_w2` builds it ([`Trained::build`]: the full update in
/// training mode with every tensor in the arena, the others with frozen statistics and
/// frozen tensors in place), norm saves 16-bit with `compact`.
fn build(g: &mut Graph<'static, f32, TAPE>, (trained, compact): (Trained<'static>, bool)) -> Model<'static> {
    g.set_compact_saves(compact);
    trained.build(g, file()).unwrap()
}

/// One step as `finetune_w2` runs it: forward, the input freed, cross-entropy,
/// backward, SGD with momentum. Returns the loss and the arena's high water before
/// backward (the forward's peak).
fn step(
    g: &mut Graph<'static, f32, TAPE>,
    m: &Model<'static>,
    sgd: &mut Sgd,
    h: usize,
    w: usize,
) -> (Tensor, usize) {
    g.zero_grad();
    let x = g
        .input_with(&[1, 1, h, w], |d| {
            for (i, v) in d.iter_mut().enumerate() {
                *v = ((i * 37 % 101) as f32 / 101.0).sin();
            }
        })
        .unwrap();
    let y = m.forward(g, &[x]).unwrap();
    g.free(x).unwrap();
    let loss = g.cross_entropy(y, &[3]).unwrap();
    let forward = g.arena().high_water_bytes();
    g.backward(loss).unwrap();
    sgd.step(g).unwrap();
    (loss, forward)
}

/// The planned bytes of the forward and of the whole step.
fn plan_both(trained: (Trained<'static>, bool), h: usize, w: usize) -> [usize; 2] {
    let mut g: Graph<'static, f32, TAPE> = Graph::meta(usize::MAX);
    let m = build(&mut g, trained);
    let mut sgd = Sgd::new(&mut g, 0.01, 0.9, 0.0).unwrap();
    let (_, forward) = step(&mut g, &m, &mut sgd, h, w);
    [forward, g.arena().high_water_bytes()]
}

fn plan(trained: (Trained<'static>, bool), h: usize, w: usize) -> usize {
    plan_both(trained, h, w)[1]
}

#[test]
fn every_choice_reaches_exactly_its_plan_at_many_sizes() {
    for trained in CHOICES {
        for (h, w) in [(28, 28), (22, 22), (20, 14), (16, 16), (22, 6), (9, 13)] {
            let bytes = plan(trained, h, w);
            let arena: &'static mut [f32] = vec![0.0; bytes / 4].leak();
            let mut g: Graph<'static, f32, TAPE> = Graph::new(arena);
            let m = build(&mut g, trained);
            let mut sgd = Sgd::new(&mut g, 0.01, 0.9, 0.0).unwrap();
            let (loss, _) = step(&mut g, &m, &mut sgd, h, w);
            assert!(g.data(loss).unwrap()[0].is_finite());
            assert_eq!(
                g.arena().high_water_bytes(),
                bytes,
                "{trained:?} at {h}x{w}: real high-water differs from the plan"
            );
        }
    }
}

/// The trained tensors' gradients after one step (no optimizer update), by name.
fn grads(trained: Trained<'static>) -> Vec<(String, Vec<f32>)> {
    grads_with(trained, false)
}

/// [`grads`], norm saves 16-bit with `compact`.
fn grads_with(trained: Trained<'static>, compact: bool) -> Vec<(String, Vec<f32>)> {
    let arena: &'static mut [f32] = vec![0.0; 1 << 20].leak();
    let mut g: Graph<'static, f32, TAPE> = Graph::new(arena);
    g.set_compact_saves(compact);
    let f = file();
    // Eval mode for every choice: the same function, whatever trains.
    g.set_training(false);
    let m = match trained {
        Trained::All => Model::new(&mut g, f),
        t => Model::in_place(&mut g, f, t.placement(f, Placement::InPlace)),
    }
    .unwrap();
    let x = g
        .input_with(&[1, 1, 22, 18], |d| {
            d.iter_mut()
                .enumerate()
                .for_each(|(i, v)| *v = (i % 7) as f32 * 0.3)
        })
        .unwrap();
    let y = m.forward(&mut g, &[x]).unwrap();
    let loss = g.cross_entropy(y, &[5]).unwrap();
    g.backward(loss).unwrap();
    f.tensors()
        .filter(|t| trained.trains(&f, t))
        .map(|t| {
            let h = m.param(t.index).unwrap();
            (t.name.to_string(), g.grad(h).unwrap().unwrap().to_vec())
        })
        .collect()
}

#[test]
fn gradients_do_not_depend_on_what_else_trains() {
    let all = grads(Trained::All);
    for trained in [
        Trained::Biases,
        Trained::BiasesAndNorms,
        Trained::Head,
        Trained::Matching(LAST_BLOCK),
    ] {
        let some = grads(trained);
        assert!(!some.is_empty());
        for (name, gv) in &some {
            let full = &all.iter().find(|(n, _)| n == name).unwrap().1;
            for (a, b) in gv.iter().zip(full) {
                assert!(
                    (a - b).abs() <= 1e-6 * (1.0 + b.abs()),
                    "{trained:?} {name}: {a} vs {b}"
                );
            }
        }
    }
}

/// 16-bit norm saves change only the BatchNorm scales' gradients, and only by rounding.
#[test]
fn compact_norm_saves_round_only_the_scale_gradients() {
    let exact = grads_with(Trained::BiasesAndNorms, false);
    let compact = grads_with(Trained::BiasesAndNorms, true);
    assert_eq!(exact.len(), compact.len());
    let mut scales = 0;
    for ((name, e), (n2, c)) in exact.iter().zip(&compact) {
        assert_eq!(name, n2);
        if name.ends_with("bias") || name.starts_with("fc.") {
            assert_eq!(e, c, "{name}: not a scale, so bit for bit the same");
            continue;
        }
        scales += 1;
        let norm = e.iter().map(|v| v.abs()).fold(0.0f32, f32::max);
        for (a, b) in c.iter().zip(e) {
            assert!((a - b).abs() <= 1e-2 * norm + 1e-6, "{name}: {a} vs {b}");
        }
    }
    assert_eq!(scales, 15, "W2 has 15 BatchNorm scales");
}

#[test]
fn freezing_saves_memory_in_order() {
    let [all, norms, norms16, biases, head, last] = CHOICES.map(|t| plan(t, 28, 28));
    assert!(biases * 4 <= all, "biases + head {biases} vs all {all}");
    assert!(
        norms16 * 4 <= all,
        "biases + norm scales (16-bit saves) + head {norms16} vs all {all}"
    );
    assert!(head < biases && biases < norms16 && norms16 < norms && norms < all);
    assert!(last < all);
}

#[test]
fn in_place_relu6_and_batch_norm_match_and_refuse_what_they_cannot_do() {
    use torchlet::ops::batch_norm::BatchNormParams;
    let mut buf = vec![0.0f32; 4096];
    let mut g: Graph<'_, f32, 64> = Graph::new(&mut buf);
    let w = g.buffer(&[2]).unwrap();
    let b = g.param(&[2]).unwrap();
    let (m, v) = (g.buffer(&[2]).unwrap(), g.buffer(&[2]).unwrap());
    let trained_w = g.param(&[2]).unwrap();
    g.param_data_mut(w).unwrap().copy_from_slice(&[1.5, -0.5]);
    g.param_data_mut(b).unwrap().copy_from_slice(&[0.25, 1.0]);
    g.param_data_mut(m).unwrap().copy_from_slice(&[0.1, -0.2]);
    g.param_data_mut(v).unwrap().copy_from_slice(&[2.0, 0.5]);
    let vals: Vec<f32> = (0..16).map(|i| i as f32 * 0.9 - 6.0).collect();
    let eval = BatchNormParams::default();
    let train = BatchNormParams {
        training: true,
        ..eval
    };
    let mut outs = Vec::new();
    for in_place in [false, true] {
        let x = g.input_with_grad(&[2, 2, 2, 2], &vals).unwrap();
        let a = g.mul_scalar(x, 1.0).unwrap();
        if in_place {
            // Refused, `a` intact: training mode, a weight that trains.
            assert!(g
                .batch_norm_(a, Some(w), Some(b), Some(m), Some(v), train)
                .is_err());
            assert!(g
                .batch_norm_(a, Some(trained_w), Some(b), Some(m), Some(v), eval)
                .is_err());
            assert_eq!(g.data(a).unwrap(), &vals[..]);
        }
        let y = match in_place {
            true => g
                .batch_norm_(a, Some(w), Some(b), Some(m), Some(v), eval)
                .unwrap(),
            false => g.batch_norm(a, Some(w), Some(b), Some(m), Some(v), eval).unwrap(),
        };
        let z = match in_place {
            true => g.relu6_(y).unwrap(),
            false => g.relu6(y).unwrap(),
        };
        if in_place {
            assert!(
                g.data(a).is_err() && g.data(y).is_err(),
                "consumed handles are refused"
            );
        }
        let s = g.sum(z, &[0, 1, 2, 3], false).unwrap();
        g.backward(s).unwrap();
        outs.push((
            g.data(z).unwrap().to_vec(),
            g.grad(x).unwrap().unwrap().to_vec(),
            g.grad(b).unwrap().unwrap().to_vec(),
        ));
        g.end_step();
        g.zero_grad();
    }
    assert_eq!(outs[0], outs[1]);
    // relu6_ of a parameter is refused.
    assert!(g.relu6_(b).is_err());
}

#[test]
fn frozen_statistics_pass_gradients_down_in_place() {
    // Before BatchNorm's backward with frozen statistics computed its parameters'
    // gradients first and then handed the output's gradient down, it allocated a
    // buffer for its input's gradient: 17,332 bytes above the forward's peak for
    // biases + head at 28x28.
    for trained in [CHOICES[1], CHOICES[2], CHOICES[3]] {
        for (h, w) in [(28, 28), (20, 14)] {
            let [forward, step] = plan_both(trained, h, w);
            assert!(
                step <= forward + 256,
                "{:?} at {h}x{w}: step {step} bytes, forward {forward}",
                trained.0
            );
        }
    }
}
