//! The conformance door in Q16.16 (`"dtype": "q16.16"`): every PyTorch golden case of
//! `golden/ops.json` rerun in fixed point, inputs converted by the engine's rounding
//! rule, results reported as reals; plus exact checks of that conversion.

use serde_json::json;
use torchlet_tests::conformance::{run_case, Case, Cases, JsonTensor};

fn load() -> Cases {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/golden/ops.json");
    let text = std::fs::read_to_string(path).expect("golden/ops.json is committed");
    serde_json::from_str(&text).expect("golden/ops.json parses")
}

/// Fixed point is within a few LSB per accumulated term: absolute 2e-3 (about 130 LSB,
/// for sums of up to a few hundred rounded terms) plus 1e-3 relative.
fn close(got: &JsonTensor, want: &JsonTensor) -> Option<String> {
    if got.shape != want.shape || got.data.len() != want.data.len() {
        return Some(format!("shape {:?} vs {:?}", got.shape, want.shape));
    }
    got.data
        .iter()
        .zip(&want.data)
        .enumerate()
        .find(|(_, (&g, &w))| (g - w).abs() > 2e-3 + 1e-3 * w.abs())
        .map(|(i, (g, w))| format!("[{i}] {g} vs {w}"))
}

#[test]
fn every_golden_case_runs_in_q16_close_to_pytorch() {
    let cases = load();
    let (mut failures, mut ran) = (Vec::new(), 0);
    for case in &cases.cases {
        let mut c = case.clone();
        c.dtype = Some("q16.16".into());
        let r = run_case(&c);
        // Ops the engine does not have yet are Unsupported in both dtypes alike.
        let in_f32 = run_case(case);
        if let (Some(ef), Some(eq)) = (&in_f32.error, &r.error) {
            if ef.kind == "Unsupported" {
                assert_eq!(ef.kind, eq.kind, "{}", case.id);
                continue;
            }
        }
        match (&case.expected_error, &case.expected, &r.outcome, &r.error) {
            (Some(kind), _, _, Some(e)) if &e.kind == kind => {}
            (Some(kind), _, _, _) => {
                failures.push(format!("{}: expected {kind}, got {:?}", case.id, r.error))
            }
            (None, Some(want), Some(got), _) => {
                ran += 1;
                if let Some(e) = close(&got.output, &want.output) {
                    failures.push(format!("{} output {e}", case.id));
                }
                for (name, w) in &want.grads {
                    match got.grads.get(name).map(|g| close(g, w)) {
                        Some(None) => {}
                        Some(Some(e)) => failures.push(format!("{} grad {name} {e}", case.id)),
                        None => failures.push(format!("{}: no gradient for {name}", case.id)),
                    }
                }
            }
            (None, _, _, e) => failures.push(format!("{}: error {e:?}", case.id)),
        }
    }
    assert!(ran > 20, "only {ran} cases ran");
    assert!(
        failures.is_empty(),
        "{} of {} cases differ:\n{}",
        failures.len(),
        ran,
        failures.join("\n")
    );
}

#[test]
fn the_door_rounds_inputs_by_the_engine_rule_and_reports_exact_reals() {
    // 0.1 -> 6553.6 LSB -> 6554; -0.3 -> -19660.8 -> -19661 (relu gives 0);
    // 1.5 LSB (a tie) -> 2 LSB. The door reports raw / 65536 exactly.
    let case: Case = serde_json::from_value(json!({
        "id": "q-relu", "op": "relu", "dtype": "q16.16",
        "inputs": { "input": { "shape": [3], "data": [0.1, -0.3, 1.5 / 65536.0] } },
        "grad_output": { "shape": [3], "data": [0.25, 0.25, 1e-9] }
    }))
    .unwrap();
    let r = run_case(&case);
    let out = r.outcome.expect("ran");
    assert_eq!(out.output.data, vec![6554.0 / 65536.0, 0.0, 2.0 / 65536.0]);
    assert_eq!(out.grads["input"].data, vec![0.25, 0.0, 0.0]);
    // mul: 0.1 * 0.1 = 6554^2 / 2^32 = 0.010001... -> raw 655.4 -> 655.
    let case: Case = serde_json::from_value(json!({
        "id": "q-mul", "op": "mul", "dtype": "q16.16",
        "inputs": { "input": { "shape": [1], "data": [0.1] }, "other": { "shape": [1], "data": [0.1] } },
        "grad_output": { "shape": [1], "data": [1.0] }
    }))
    .unwrap();
    let out = run_case(&case).outcome.expect("ran");
    assert_eq!(out.output.data, vec![655.0 / 65536.0]);
    assert_eq!(out.grads["input"].data, vec![6554.0 / 65536.0]);
    // Unknown dtypes stay an Unsupported error.
    let mut bad = case.clone();
    bad.dtype = Some("q8.8".into());
    assert_eq!(run_case(&bad).error.expect("rejected").kind, "Unsupported");
}
