//! What `torchlet convert` tells a user about how a model was exported, beside the
//! conversion itself: things that import fine but are probably not what they wanted.

use onnx_protobuf::{Message, ModelProto};

/// A note when `model` looks exported with constant folding (the default of
/// `torch.onnx.export`): no BatchNormalization node left, and convolution weights
/// that the TorchScript exporter's folding made (`onnx::Conv_53`): BatchNorm was fused
/// into them, so there is nothing of it to fine-tune and its `state_dict` names are
/// gone. `None` for anything else (bytes that do not parse included: the import says
/// why).
pub fn fused_batch_norm(model: &[u8]) -> Option<String> {
    let m = ModelProto::parse_from_bytes(model).ok()?;
    let g = m.graph.as_ref()?;
    if g.node.iter().any(|n| n.op_type == "BatchNormalization") {
        return None;
    }
    let folded: Vec<&str> = g
        .node
        .iter()
        .filter(|n| n.op_type == "Conv")
        .filter_map(|n| n.input.get(1))
        .filter(|w| w.starts_with("onnx::Conv_"))
        .map(String::as_str)
        .collect();
    let first = folded.first()?;
    Some(format!(
        "note: no BatchNormalization is left and {} convolution weights have names the \
         exporter's constant folding made ({first}, ...): BatchNorm was probably fused into \
         them, leaving nothing of it to fine-tune and no state_dict names. To train it, export \
         with torch.onnx.export(..., do_constant_folding=False) (TorchScript exporter) or \
         torch.onnx.export(..., dynamo=True, optimize=False)",
        folded.len()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use onnx_protobuf::{GraphProto, NodeProto};

    fn model(ops: &[(&str, &str)]) -> Vec<u8> {
        let mut g = GraphProto::new();
        for (op, weight) in ops {
            let mut n = NodeProto::new();
            n.op_type = op.to_string();
            n.input = vec!["x".into(), weight.to_string()];
            g.node.push(n);
        }
        let mut m = ModelProto::new();
        m.graph = Some(g).into();
        m.write_to_bytes().unwrap()
    }

    #[test]
    fn a_folded_export_gets_the_note_and_others_do_not() {
        let note = fused_batch_norm(&model(&[("Conv", "onnx::Conv_53"), ("Conv", "onnx::Conv_56")])).unwrap();
        assert!(
            note.contains("2 convolution weights") && note.contains("onnx::Conv_53"),
            "{note}"
        );
        assert!(note.contains("do_constant_folding=False"), "{note}");
        assert_eq!(fused_batch_norm(&model(&[("Conv", "stem.0.weight")])), None);
        let kept = model(&[("Conv", "onnx::Conv_53"), ("BatchNormalization", "bn.weight")]);
        assert_eq!(fused_batch_norm(&kept), None);
        assert_eq!(fused_batch_norm(b"not onnx"), None);
    }
}
