//! W2 ("mobile-fcn", `nn::mobile_fcn`) against PyTorch: the model of
//! tests/golden/make_w2.py, pretrained there on the 28x28 digits, loaded by position
//! (torchlet creates parameters and buffers in `state_dict` order) gives PyTorch's
//! eval-mode logits at 28x28 and at a 20x14 size never trained on; and it trains.

use safetensors::{Dtype, SafeTensors};
use torchlet::init::Rng;
use torchlet::nn::{mobile_fcn, Block};
use torchlet::{Graph, Q16};

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/golden/w2/");

/// W2's state_dict names without `num_batches_tracked`, in PyTorch's order.
fn names() -> Vec<String> {
    let bn = |p: &str| ["weight", "bias", "running_mean", "running_var"].map(|k| format!("{p}.{k}"));
    let mut v = vec!["stem.0.weight".to_string()];
    v.extend(bn("stem.1"));
    for b in 0..5 {
        // Block 0 has no expansion conv: its layers are dw(0) bn(1) relu project(3) bn(4).
        let convs: &[(usize, usize)] = if b == 0 {
            &[(0, 1), (3, 4)]
        } else {
            &[(0, 1), (3, 4), (6, 7)]
        };
        for (c, n) in convs {
            v.push(format!("blocks.{b}.conv.{c}.weight"));
            v.extend(bn(&format!("blocks.{b}.conv.{n}")));
        }
    }
    v.push("fc.weight".into());
    v.push("fc.bias".into());
    v
}

fn read(file: &str) -> Vec<(String, Vec<usize>, Vec<f32>)> {
    let bytes = std::fs::read(format!("{DIR}{file}")).unwrap();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    st.iter()
        .filter(|(_, v)| v.dtype() == Dtype::F32)
        .map(|(n, v)| {
            let d = v
                .data()
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
                .collect();
            (n.to_string(), v.shape().to_vec(), d)
        })
        .collect()
}

fn get<'a>(t: &'a [(String, Vec<usize>, Vec<f32>)], name: &str) -> &'a (String, Vec<usize>, Vec<f32>) {
    t.iter().find(|x| x.0 == name).unwrap_or_else(|| panic!("{name}"))
}

#[test]
fn pretrained_w2_gives_pytorchs_logits_in_f32_and_q16() {
    let weights = read("w2_pretrained.safetensors");
    let refs = read("w2_reference.safetensors");
    let names = names();
    let mut arena = vec![0.0f32; 256 * 1024];
    let mut g: Graph<f32, 256> = Graph::new(&mut arena);
    let net = mobile_fcn(&mut g, &mut Rng::new(0)).unwrap();
    assert_eq!(g.num_param_tensors(), names.len());
    let trainable: usize = (0..g.num_params())
        .filter(|&i| !names[i].contains("running"))
        .map(|i| g.shape(g.param_handle(i).unwrap()).unwrap().numel())
        .sum();
    assert_eq!(trainable, 18_602);
    for (i, n) in names.iter().enumerate() {
        let (_, shape, data) = get(&weights, n);
        let p = g.param_handle(i).unwrap();
        assert_eq!(g.shape(p).unwrap().dims(), &shape[..], "{n}");
        g.param_data_mut(p).unwrap().copy_from_slice(data);
    }
    g.set_training(false);
    g.set_grad_enabled(false);
    for size in ["28x28", "20x14"] {
        let (_, shape, x) = get(&refs, &format!("input_{size}"));
        let (_, _, want) = get(&refs, &format!("logits_{size}"));
        let xt = g.input(shape, x).unwrap();
        let y = net.forward(&mut g, xt).unwrap();
        let got = g.data(y).unwrap();
        for (a, b) in got.iter().zip(want) {
            assert!((a - b).abs() < 1e-4 * (1.0 + b.abs()), "{size}: {a} vs {b}");
        }
        g.end_step();
    }
    // Q16.16 within its resolution's reach of the same logits (eval mode).
    let mut qa = vec![Q16(0); 256 * 1024];
    let mut q: Graph<Q16, 256> = Graph::new(&mut qa);
    let qnet = mobile_fcn(&mut q, &mut Rng::new(0)).unwrap();
    for (i, n) in names.iter().enumerate() {
        let p = q.param_handle(i).unwrap();
        for (d, v) in q.param_data_mut(p).unwrap().iter_mut().zip(&get(&weights, n).2) {
            *d = Q16::from_f32(*v);
        }
    }
    q.set_training(false);
    q.set_grad_enabled(false);
    let (_, shape, x) = get(&refs, "input_28x28");
    let (_, _, want) = get(&refs, "logits_28x28");
    let xq: Vec<Q16> = x.iter().map(|v| Q16::from_f32(*v)).collect();
    let xt = q.input(shape, &xq).unwrap();
    let y = qnet.forward(&mut q, xt).unwrap();
    let got: Vec<f32> = q.data(y).unwrap().iter().map(|v| v.to_f32()).collect();
    let worst = got
        .iter()
        .zip(want)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max);
    assert!(worst < 0.05, "Q16 logits differ from PyTorch's by up to {worst}");
    let argmax = |v: &[f32]| (0..v.len()).max_by(|&i, &j| v[i].total_cmp(&v[j])).unwrap();
    for (a, b) in got.chunks(10).zip(want.chunks(10)) {
        assert_eq!(argmax(a), argmax(b));
    }
}
