//! Objects built by Flower itself (data/objects.json, written by data/make_fixture.py with
//! flwr 1.42.0 and 64-byte array chunks): torchlet-fleet decodes them and, re-encoding the
//! decoded messages, produces the same objects, bytes and ids in the same order.

use std::collections::HashMap;
use torchlet_fleet::message::Record;
use torchlet_fleet::proto::{config_record_value, metric_record_value};
use torchlet_fleet::{Error, Message, Object, Values};

struct Case {
    name: String,
    message_id: String,
    objects: Vec<(String, String, Vec<u8>)>,
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn fixture() -> (serde_json::Value, Vec<Case>) {
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/objects.json")).unwrap();
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    let cases = json["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| Case {
            name: c["name"].as_str().unwrap().to_string(),
            message_id: c["message_id"].as_str().unwrap().to_string(),
            objects: c["objects"]
                .as_array()
                .unwrap()
                .iter()
                .map(|o| {
                    (
                        o["id"].as_str().unwrap().to_string(),
                        o["class"].as_str().unwrap().to_string(),
                        unhex(o["hex"].as_str().unwrap()),
                    )
                })
                .collect(),
        })
        .collect();
    (json, cases)
}

fn parsed(case: &Case) -> HashMap<String, Object> {
    case.objects
        .iter()
        .map(|(id, class, bytes)| {
            let object = Object::parse(id, bytes).unwrap();
            assert_eq!(&object.class, class);
            (id.clone(), object)
        })
        .collect()
}

#[test]
fn flower_objects_decode_and_reencode_byte_for_byte() {
    let (json, cases) = fixture();
    let chunk = json["chunk_size"].as_u64().unwrap() as usize;
    assert_eq!(cases.len(), 3);
    for case in &cases {
        let message = Message::inflate(&case.message_id, &parsed(case)).unwrap();
        assert_eq!(message.metadata.message_id, case.message_id);
        let deflated = message.deflate_with_chunks(chunk);
        assert_eq!(deflated.id, case.message_id, "{}", case.name);
        let ours: Vec<(&str, &[u8])> = deflated
            .objects
            .iter()
            .map(|(i, b)| (i.as_str(), &b[..]))
            .collect();
        let flowers: Vec<(&str, &[u8])> = case
            .objects
            .iter()
            .map(|(i, _, b)| (i.as_str(), &b[..]))
            .collect();
        assert_eq!(ours, flowers, "{}", case.name);
        // The tree lists every object once, the message at its root.
        fn count(t: &torchlet_fleet::proto::ObjectTree) -> usize {
            1 + t.children.iter().map(count).sum::<usize>()
        }
        assert_eq!(deflated.tree.object_id, case.message_id);
        assert!(count(&deflated.tree) >= case.objects.len());
    }
}

#[test]
fn decoded_train_message_has_flowers_values() {
    let (_, cases) = fixture();
    let message = Message::inflate(&cases[0].message_id, &parsed(&cases[0])).unwrap();
    assert_eq!(message.metadata.run_id, 7);
    assert_eq!(message.metadata.message_type, "train");
    assert_eq!(message.metadata.ttl, 3600.5);
    let Some(Record::Arrays(arrays)) = message.record("arrays") else {
        panic!("no arrays")
    };
    let names: Vec<&str> = arrays.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "conv.weight",
            "conv.bias",
            "bn.num_batches_tracked",
            "bn2.num_batches_tracked",
            "zeros",
            "head.weight"
        ]
    );
    assert_eq!(
        arrays[1].1.values("conv.bias").unwrap(),
        Values::F32(vec![0.5, -1.25])
    );
    assert_eq!(arrays[2].1.shape, Vec::<usize>::new());
    assert_eq!(arrays[2].1.values("n").unwrap(), Values::I64(vec![3]));
    let Values::F32(w) = arrays[0].1.values("conv.weight").unwrap() else {
        panic!()
    };
    assert_eq!(w.len(), 24);
    assert_eq!(w[23], 23.0f32 / 7.0);
    assert_eq!(arrays[4].1.values("zeros").unwrap(), Values::F32(vec![0.0; 64]));
    let Values::F64(h) = arrays[5].1.values("head.weight").unwrap() else {
        panic!()
    };
    assert_eq!(h[0], -1.0);
    let Some(Record::Config(config)) = message.record("config") else {
        panic!("no config")
    };
    let get = |k: &str| {
        config
            .items
            .iter()
            .find(|i| i.key == k)
            .and_then(|i| i.value.clone()?.value)
    };
    assert_eq!(get("lr"), Some(config_record_value::Value::Double(0.05)));
    assert_eq!(get("local-steps"), Some(config_record_value::Value::Sint64(5)));
    assert_eq!(get("name"), Some(config_record_value::Value::String("é".into())));
    let reply = Message::inflate(&cases[1].message_id, &parsed(&cases[1])).unwrap();
    let Some(Record::Metrics(metrics)) = reply.record("metrics") else {
        panic!("no metrics")
    };
    assert_eq!(metrics.items[0].key, "num-examples");
    assert_eq!(
        metrics.items[0].value.clone().and_then(|v| v.value),
        Some(metric_record_value::Value::Sint64(40))
    );
    let error = Message::inflate(&cases[2].message_id, &parsed(&cases[2])).unwrap();
    assert!(error.content.is_none());
    assert_eq!(error.metadata.reply_to_message_id, cases[0].message_id);
    assert!(error.error.unwrap().reason.contains("conv.bias"));
}

#[test]
fn arrays_encode_as_numpy_saves_them() {
    let (_, cases) = fixture();
    let message = Message::inflate(&cases[0].message_id, &parsed(&cases[0])).unwrap();
    let Some(Record::Arrays(arrays)) = message.record("arrays") else {
        panic!("no arrays")
    };
    for (name, array) in arrays {
        let values = array.values(name).unwrap();
        let again = torchlet_fleet::Array::from_values(name, &array.shape, &values).unwrap();
        assert_eq!(&again, array, "{name}");
    }
    assert!(torchlet_fleet::Array::from_values("x", &[2, 2], &Values::F32(vec![1.0; 3])).is_err());
}

#[test]
fn tampered_or_missing_objects_are_refused_by_name() {
    let (_, cases) = fixture();
    let (id, _, bytes) = &cases[0].objects[0];
    let mut bad = bytes.clone();
    let last = bad.len() - 1;
    bad[last] ^= 1;
    assert!(matches!(Object::parse(id, &bad), Err(Error::IdMismatch { .. })));
    let mut objects = parsed(&cases[0]);
    objects.remove(id);
    assert_eq!(
        Message::inflate(&cases[0].message_id, &objects),
        Err(Error::MissingObject(id.clone()))
    );
    // An object whose head lies about its body's length.
    let lying = b"ArrayChunk  5\0abc".to_vec();
    let lying_id = torchlet_fleet::object::object_id(&lying);
    assert!(matches!(
        Object::parse(&lying_id, &lying),
        Err(Error::Malformed { .. })
    ));
    // A chunk index past the array's children.
    let array = Object::new(
        "Array",
        vec![],
        br#"{"dtype": "float32", "shape": [1], "stype": "numpy.ndarray", "arraychunk_ids": [3]}"#.to_vec(),
    );
    let array_id = array.id();
    let record = Object::new(
        "ArrayRecord",
        vec![array_id.clone()],
        format!(r#"{{"a": "{array_id}"}}"#).into_bytes(),
    );
    let dict = Object::new(
        "RecordDict",
        vec![record.id()],
        format!(r#"{{"arrays": "{}"}}"#, record.id()).into_bytes(),
    );
    let root = Object::new("Message", vec![dict.id()], vec![10, 0]);
    let map: HashMap<String, Object> = [array, record, dict, root.clone()]
        .into_iter()
        .map(|o| (o.id(), o))
        .collect();
    let err = Message::inflate(&root.id(), &map).unwrap_err().to_string();
    assert!(err.contains("chunk index 3"), "{err}");
}
