//! External data through the library's three doors ([`import_with`]'s whole files by
//! location, as the wasm package passes them; [`import_from_folder`], as `torchlet
//! convert` reads them; [`import`]'s single file) on the zoo's W1 (dynamo export, one
//! `w1.dyn.onnx.data`), and on the same model with its initializers spread over two
//! files: all give the same graph.

use crate::{import, import_from_folder, import_with, Error, Options};
use onnx_protobuf::{Message, ModelProto};
use std::path::PathBuf;

fn golden(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/golden/onnx")
        .join(name)
}

fn w1() -> (Vec<u8>, Vec<u8>) {
    let bytes = std::fs::read(golden("w1.dyn.onnx")).unwrap();
    let data = std::fs::read(golden("w1.dyn.onnx.data")).unwrap();
    (bytes, data)
}

/// W1 with every other external initializer moved to `second.bin` (its bytes copied
/// there, its location and offset rewritten): the model's bytes and the two files.
fn split_over_two_files() -> (Vec<u8>, Vec<u8>, Vec<u8>) {
    let (bytes, data) = w1();
    let mut m = ModelProto::parse_from_bytes(&bytes).unwrap();
    let mut second = Vec::new();
    let mut moved = 0;
    let g = m.graph.as_mut().unwrap();
    for t in g
        .initializer
        .iter_mut()
        .filter(|t| !t.external_data.is_empty())
        .step_by(2)
    {
        let get = |k: &str| {
            t.external_data
                .iter()
                .find(|e| e.key == k)
                .map(|e| e.value.parse::<usize>().unwrap())
        };
        let (offset, length) = (get("offset").unwrap_or(0), get("length").unwrap());
        let at = second.len();
        second.extend_from_slice(&data[offset..offset + length]);
        for e in &mut t.external_data {
            match e.key.as_str() {
                "location" => e.value = "second.bin".into(),
                "offset" => e.value = at.to_string(),
                _ => {}
            }
        }
        moved += 1;
    }
    assert!(moved >= 2, "only {moved} initializers moved");
    (m.write_to_bytes().unwrap(), data, second)
}

#[test]
fn initializers_over_two_files_import_as_from_one() {
    let (bytes, data) = w1();
    let want = import(&bytes, Some(&data), &Options::default()).unwrap();
    let (split, first, second) = split_over_two_files();
    let lookup = |loc: &str| match loc {
        "w1.dyn.onnx.data" => Some(&first[..]),
        "second.bin" => Some(&second[..]),
        _ => None,
    };
    assert_eq!(import_with(&split, &lookup, &Options::default()).unwrap(), want);
    let dir = std::env::temp_dir().join(format!("torchlet-onnx-two-files-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("w1.dyn.onnx.data"), &first).unwrap();
    std::fs::write(dir.join("second.bin"), &second).unwrap();
    assert_eq!(
        import_from_folder(&split, &dir, &Options::default()).unwrap(),
        want
    );
    assert_eq!(
        import_from_folder(&bytes, &golden(""), &Options::default()).unwrap(),
        want
    );
}

#[test]
fn a_location_the_lookup_does_not_give_is_an_error_naming_it_and_the_tensor() {
    let (split, first, _) = split_over_two_files();
    let lookup = |loc: &str| (loc == "w1.dyn.onnx.data").then_some(&first[..]);
    let Err(Error::Model(e)) = import_with(&split, &lookup, &Options::default()) else {
        panic!("imported without second.bin");
    };
    assert!(
        e.starts_with("tensor \"") && e.contains("external data \"second.bin\""),
        "{e}"
    );
    assert!(e.contains("not given"), "{e}");
}

#[test]
fn a_declared_length_other_than_the_tensors_is_refused_before_the_lookup() {
    let (bytes, data) = w1();
    let mut m = ModelProto::parse_from_bytes(&bytes).unwrap();
    let t = m
        .graph
        .as_mut()
        .unwrap()
        .initializer
        .iter_mut()
        .find(|t| !t.external_data.is_empty());
    let t = t.unwrap();
    let length = t.external_data.iter_mut().find(|e| e.key == "length").unwrap();
    let want = length.value.clone();
    length.value = (1u64 << 62).to_string();
    let asked = std::cell::Cell::new(0);
    let lookup = |_: &str| {
        asked.set(asked.get() + 1);
        Some(&data[..])
    };
    let e = import_with(&m.write_to_bytes().unwrap(), &lookup, &Options::default()).unwrap_err();
    let e = e.to_string();
    assert!(
        e.contains("declares 4611686018427387904 bytes") && e.contains(&format!("take {want}")),
        "{e}"
    );
    assert_eq!(
        asked.get(),
        0,
        "the lookup was asked before the length was checked"
    );
}
