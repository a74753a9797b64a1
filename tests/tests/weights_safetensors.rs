//! PyTorch interop through safetensors, against fixtures made by
//! `tests/golden/make_safetensors.py` (torch is not needed here):
//! - `w1_torch.safetensors`: PyTorch's W1 (`torch.manual_seed(0)`), with inputs and
//!   PyTorch's logits in `w1_inputs.safetensors`;
//! - `w1_torchlet.safetensors`: W1 trained by torchlet (`weights export-w1`, 3 epochs)
//!   and `w1_torchlet_torch_logits.safetensors`: PyTorch's logits with those weights
//!   (`make_safetensors.py --from-torchlet`).

use std::collections::BTreeMap;
use torchlet::init::Rng;
use torchlet::io::{self, DIGITS_FCN_NAMES};
use torchlet::nn::{digits_fcn, Sequential};
use torchlet::Graph;
use torchlet_tests::safetensors::{self, StTensor};

const TAPE: usize = 32;
const INPUTS: [&str; 3] = ["x28", "x12x20", "x13x17"];

fn fixture(name: &str) -> Vec<u8> {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("golden")
        .join(name);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn tensors(name: &str) -> BTreeMap<String, StTensor> {
    safetensors::parse(&fixture(name)).unwrap()
}

fn params(g: &Graph<'_, f32, TAPE>) -> Vec<Vec<f32>> {
    (0..g.num_params())
        .map(|i| g.data(g.param_handle(i).unwrap()).unwrap().to_vec())
        .collect()
}

fn logits(g: &mut Graph<'_, f32, TAPE>, model: &Sequential<12>, x: &StTensor) -> Vec<f32> {
    g.set_grad_enabled(false);
    let t = g.input(&x.shape, &x.data).unwrap();
    let y = model.forward(g, t).unwrap();
    let out = g.data(y).unwrap().to_vec();
    g.end_step();
    out
}

/// Largest absolute difference between torchlet's and PyTorch's logits over all inputs.
fn max_logit_error(weights: &str, torch_logits: &str) -> f32 {
    let mut arena = vec![0.0f32; 64 * 1024];
    let mut g: Graph<f32, TAPE> = Graph::new(&mut arena);
    let model = digits_fcn(&mut g, &mut Rng::new(0)).unwrap();
    safetensors::import(&mut g, &DIGITS_FCN_NAMES, &tensors(weights)).unwrap();
    let xs = tensors("w1_inputs.safetensors");
    let want = tensors(torch_logits);
    let mut worst = 0.0f32;
    for name in INPUTS {
        let got = logits(&mut g, &model, &xs[name]);
        let w = &want[&format!("logits_{name}")];
        assert_eq!(got.len(), w.data.len());
        for (a, b) in got.iter().zip(&w.data) {
            worst = worst.max((a - b).abs());
        }
    }
    worst
}

#[test]
fn pytorch_weights_give_pytorch_logits_in_torchlet() {
    let err = max_logit_error("w1_torch.safetensors", "w1_inputs.safetensors");
    eprintln!("max |torchlet - torch| = {err:e}");
    assert!(err < 1e-5, "max |torchlet - torch| = {err}");
}

#[test]
fn torchlet_trained_weights_give_the_same_logits_in_pytorch() {
    let err = max_logit_error("w1_torchlet.safetensors", "w1_torchlet_torch_logits.safetensors");
    eprintln!("max |torchlet - torch| = {err:e}");
    assert!(err < 1e-5, "max |torchlet - torch| = {err}");
    // The fixture is what torchlet's exporter writes: load it and export it again.
    let mut arena = vec![0.0f32; 64 * 1024];
    let mut g: Graph<f32, TAPE> = Graph::new(&mut arena);
    digits_fcn(&mut g, &mut Rng::new(0)).unwrap();
    safetensors::import(&mut g, &DIGITS_FCN_NAMES, &tensors("w1_torchlet.safetensors")).unwrap();
    let again = safetensors::write(
        &safetensors::export(&g, &DIGITS_FCN_NAMES).unwrap(),
        &BTreeMap::new(),
    )
    .unwrap();
    assert!(again == fixture("w1_torchlet.safetensors"));
}

#[test]
fn writer_matches_the_python_library_byte_for_byte() {
    let file = fixture("w1_torch.safetensors");
    let back = safetensors::write(&safetensors::parse(&file).unwrap(), &BTreeMap::new()).unwrap();
    assert!(
        back == file,
        "re-written file differs from safetensors.torch.save_file's"
    );
    // Through the device format and back.
    let tlw = safetensors::to_device(&file, None).unwrap();
    assert!(safetensors::to_safetensors(&tlw, None).unwrap() == file);
}

#[test]
fn device_file_from_the_converter_gives_pytorch_logits() {
    let tlw = safetensors::to_device(&fixture("w1_torch.safetensors"), None).unwrap();
    let mut arena = vec![0.0f32; 64 * 1024];
    let mut g: Graph<f32, TAPE> = Graph::new(&mut arena);
    let model = digits_fcn(&mut g, &mut Rng::new(0)).unwrap();
    io::load(&mut g, &tlw).unwrap();
    let xs = tensors("w1_inputs.safetensors");
    let got = logits(&mut g, &model, &xs["x28"]);
    for (a, b) in got.iter().zip(&xs["logits_x28"].data) {
        assert!((a - b).abs() < 1e-5, "{a} vs {b}");
    }
    let names: Vec<&str> = io::Weights::parse(&tlw)
        .unwrap()
        .records()
        .map(|r| r.name)
        .collect();
    assert_eq!(names, DIGITS_FCN_NAMES);
}

/// Imports `t` into a fresh W1 and returns the error, checking nothing changed.
fn import_error(t: &BTreeMap<String, StTensor>) -> String {
    let mut arena = vec![0.0f32; 64 * 1024];
    let mut g: Graph<f32, TAPE> = Graph::new(&mut arena);
    digits_fcn(&mut g, &mut Rng::new(3)).unwrap();
    let before = params(&g);
    let e = safetensors::import(&mut g, &DIGITS_FCN_NAMES, t).unwrap_err();
    assert_eq!(
        params(&g),
        before,
        "import changed parameters before failing: {e}"
    );
    e
}

#[test]
fn missing_tensor_is_named() {
    let mut t = tensors("w1_torch.safetensors");
    t.remove("c2.bias");
    let e = import_error(&t);
    assert!(e.contains("`c2.bias`") && e.contains("missing"), "{e}");
}

#[test]
fn misshapen_tensor_is_named_with_both_shapes() {
    let mut t = tensors("w1_torch.safetensors");
    t.get_mut("fc.weight").unwrap().shape = vec![32, 10];
    let e = import_error(&t);
    assert!(
        e.contains("`fc.weight`") && e.contains("[32, 10]") && e.contains("[10, 32]"),
        "{e}"
    );
    let e = safetensors::to_device(&safetensors::write(&t, &BTreeMap::new()).unwrap(), None).unwrap_err();
    assert!(e.contains("`fc.weight`"), "{e}");
}

#[test]
fn malformed_safetensors_are_errors_not_panics() {
    let file = fixture("w1_torch.safetensors");
    for n in 0..file.len() {
        assert!(
            safetensors::parse(&file[..n]).is_err(),
            "prefix of {n} bytes accepted"
        );
    }
    let header_len = u64::from_le_bytes(file[..8].try_into().unwrap()) as usize;
    let header = std::str::from_utf8(&file[8..8 + header_len]).unwrap();
    for (from, to) in [
        ("\"F32\"", "\"F16\""),
        ("[0,32]", "[0,36]"),
        ("[32,320]", "[28,316]"),
        ("\"shape\":[8]", "\"shape\":[9]"),
    ] {
        let mut bad = file.clone();
        let h = header.replacen(from, to, 1);
        assert_eq!(h.len(), header_len, "edit must keep the header length");
        bad[8..8 + header_len].copy_from_slice(h.as_bytes());
        let e = safetensors::parse(&bad).unwrap_err();
        assert!(e.contains("safetensors:"), "{e}");
    }
    let mut huge = file.clone();
    huge[..8].copy_from_slice(&u64::MAX.to_le_bytes());
    assert!(safetensors::parse(&huge).is_err());
}
