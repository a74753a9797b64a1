//! Every op against PyTorch: `golden/ops.json` holds cases and the values PyTorch
//! computed for them (made by `golden/make_golden.py`, see `golden/README.md`). Each
//! case goes through the conformance door, exactly as an outside reference would.

use torchlet_tests::conformance::{run_case, Cases, JsonTensor};

fn load() -> Cases {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/golden/ops.json");
    let text = std::fs::read_to_string(path).expect("golden/ops.json is committed");
    serde_json::from_str(&text).expect("golden/ops.json parses")
}

fn close(id: &str, what: &str, got: &JsonTensor, want: &JsonTensor) -> Result<(), String> {
    if got.shape != want.shape {
        return Err(format!("{id} {what}: shape {:?} != {:?}", got.shape, want.shape));
    }
    for (i, (&g, &w)) in got.data.iter().zip(&want.data).enumerate() {
        let tol = 1e-5 + 1e-4 * w.abs();
        if (g - w).abs() > tol || g.is_nan() != w.is_nan() {
            return Err(format!("{id} {what}[{i}]: {g} != {w}"));
        }
    }
    if got.data.len() != want.data.len() {
        return Err(format!(
            "{id} {what}: {} values != {}",
            got.data.len(),
            want.data.len()
        ));
    }
    Ok(())
}

#[test]
fn every_op_matches_pytorch() {
    let cases = load();
    let mut failures = Vec::new();
    let mut ops = std::collections::BTreeSet::new();
    for case in &cases.cases {
        let r = run_case(case);
        ops.insert(case.op.clone());
        match (&case.expected_error, &case.expected, &r.outcome, &r.error) {
            (Some(kind), _, _, Some(e)) if &e.kind == kind => {}
            (Some(kind), _, _, _) => {
                failures.push(format!("{}: expected error {kind}, got {:?}", case.id, r.error))
            }
            (None, Some(want), Some(got), _) => {
                if let Err(e) = close(&case.id, "output", &got.output, &want.output) {
                    failures.push(e);
                }
                for (name, w) in &want.grads {
                    match got.grads.get(name) {
                        Some(g) => {
                            if let Err(e) = close(&case.id, name, g, w) {
                                failures.push(e);
                            }
                        }
                        None => failures.push(format!("{}: no gradient for {name}", case.id)),
                    }
                }
            }
            (None, _, _, err) => failures.push(format!("{}: failed with {err:?}", case.id)),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases differ:\n{}",
        failures.len(),
        cases.cases.len(),
        failures.join("\n")
    );
    for op in [
        "conv2d",
        "max_pool2d",
        "avg_pool2d",
        "adaptive_avg_pool2d",
        "linear",
        "relu",
        "leaky_relu",
        "sigmoid",
        "tanh",
        "add",
        "mul",
        "flatten",
        "cross_entropy",
        "mse_loss",
    ] {
        assert!(ops.contains(op), "no golden case for {op}");
    }
}
