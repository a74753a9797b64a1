//! The `conformance` binary as an outside reference uses it: a document on stdin, a
//! document on stdout, exit 0 whatever the cases did, exit 2 only for a non-document.

use std::io::Write;
use std::process::{Command, Stdio};

fn run(input: &str) -> (i32, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_conformance"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[test]
fn cases_in_results_out_with_errors_as_results() {
    let doc = r#"{"cases": [
      {"id": "ok", "op": "relu", "dtype": "f32", "params": {},
       "inputs": {"input": {"shape": [2], "data": [-1.0, 2.0]}},
       "grad_output": {"shape": [2], "data": [1.0, 1.0]}},
      {"id": "bad-channels", "op": "conv2d", "params": {"padding": 1},
       "inputs": {"input": {"shape": [1, 3, 4, 4], "data": [0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0]},
                  "weight": {"shape": [1, 2, 3, 3], "data": [0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0]}}},
      {"id": "huge", "op": "relu", "inputs": {"input": {"shape": [100000, 100000], "data": [1.0]}}},
      {"id": "nope", "op": "fft", "inputs": {}}
    ]}"#;
    let (code, out, _) = run(doc);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let r = v["results"].as_array().unwrap();
    assert_eq!(r.len(), 4);
    assert_eq!(r[0]["id"], "ok");
    assert_eq!(r[0]["output"]["data"], serde_json::json!([0.0, 2.0]));
    assert_eq!(r[0]["grads"]["input"]["data"], serde_json::json!([0.0, 1.0]));
    assert_eq!(r[1]["error"]["kind"], "ShapeMismatch");
    assert!(r[1]["error"]["message"].as_str().unwrap().starts_with("conv2d:"));
    assert_eq!(r[2]["error"]["kind"], "ArenaExhausted");
    assert_eq!(r[3]["error"]["kind"], "Unsupported");
}

#[test]
fn a_non_document_exits_2() {
    let (code, out, err) = run("this is not json");
    assert_eq!(code, 2);
    assert!(out.is_empty());
    assert!(err.contains("not a cases document"));
}
