//! ShuffleNet's channel shuffle as exporters write it, `Reshape` of `[N, C, H, W]` to
//! `[N, g, C/g, H, W]`, `Transpose` with perm `[0, 2, 1, 3, 4]`, `Reshape` back to
//! `[N, C, H, W]` (an Identity, `.contiguous()`, may come between): one torchlet
//! `channel_shuffle` node. The rank-5 tensors in between
//! exist only here; anything else reading them is refused.

use crate::fold::attr_ints;
use crate::import::Importer;
use crate::tensor::{Dim, Value};
use onnx_protobuf::NodeProto;
use torchlet::model::spec::{AttrValue, ValueRef};

/// A channel shuffle under way: its input, the input's `[N, C, H, W]`, the groups, and
/// whether the Transpose was seen.
#[derive(Clone, Debug)]
pub(crate) struct Shuffle {
    r: ValueRef,
    shape: Vec<Dim>,
    groups: i64,
    transposed: bool,
}

const REFUSED: &str = "it reads a rank-5 Reshape, which torchlet takes only as a channel shuffle \
    (Reshape [N, C, H, W] to [N, g, C/g, H, W], Transpose [0, 2, 1, 3, 4], Reshape back)";

/// Whether target dim `t` names input dim `s` (the same known size or free dim; 0 copies
/// the input's dim at the same position, `same_place`).
fn names(t: &Dim, s: &Dim, same_place: bool) -> bool {
    match t {
        Dim::Known(0) => same_place,
        Dim::Unknown => false,
        t => t == s,
    }
}

/// Whether spatial target dim `t` may be input dim `s`: `names`, or a size the import
/// cannot tell (the dynamo exporter recomputes H and W from the input's size rather than
/// reading them off the tensor). Either way the Transpose moves only the two channel
/// dims, and each sample's and channel's H x W block moves whole, so the result is the
/// channel shuffle whatever H' x W' the block is viewed as, and the Reshape back takes
/// the input's `[N, C, H, W]` again (the engine checks the element count at run time).
fn spatial(t: &Dim, s: &Dim, same_place: bool) -> bool {
    *t == Dim::Unknown || names(t, s, same_place)
}

/// The Reshape's target, when it folded to integers.
fn target(v: Option<&Value>) -> Option<Vec<Dim>> {
    v.and_then(Value::ints)
}

impl Importer<'_> {
    /// Starts a shuffle at a Reshape of a computed `[N, C, H, W]` to `[N, g, C/g, H, W]`;
    /// `false` for any other Reshape (mapped as usual).
    pub(crate) fn shuffle_start(&mut self, n: &NodeProto, ins: &[Option<Value>]) -> Result<bool, String> {
        let (Some(Value::Run { r, shape }), Some(t)) = (
            ins.first().and_then(Option::as_ref),
            target(ins.get(1).and_then(Option::as_ref)),
        ) else {
            return Ok(false);
        };
        if shape.len() != 4 || t.len() != 5 {
            return Ok(false);
        }
        let (Some(c), Some(g), Some(per)) = (shape[1].known(), t[1].known(), t[2].known()) else {
            return Err(format!("a Reshape of {shape:?} to {t:?}: {REFUSED}"));
        };
        let fits = names(&t[0], &shape[0], true)
            && g >= 1
            && g.checked_mul(per) == Some(c)
            && spatial(&t[3], &shape[2], false)
            && spatial(&t[4], &shape[3], false);
        if !fits {
            return Err(format!("a Reshape of {shape:?} to {t:?}: {REFUSED}"));
        }
        let out = n.output.first().ok_or("a node without outputs")?;
        let s = Shuffle {
            r: *r,
            shape: shape.clone(),
            groups: g,
            transposed: false,
        };
        self.shuffles.insert(out.clone(), s);
        Ok(true)
    }

    /// The Transpose and the Reshape back of a shuffle under way (anything else that
    /// reads one is refused).
    pub(crate) fn shuffle_step(&mut self, n: &NodeProto) -> Result<(), String> {
        let s = n.input.first().and_then(|i| self.shuffles.get(i)).cloned();
        let out = n.output.first().ok_or("a node without outputs")?.clone();
        match (n.op_type.as_str(), s) {
            // `.contiguous()` of the transposed view (the dynamo exporter's clone).
            ("Identity", Some(s)) => {
                self.shuffles.insert(out, s);
                Ok(())
            }
            ("Transpose", Some(s))
                if !s.transposed && attr_ints(n, "perm").as_deref() == Some(&[0, 2, 1, 3, 4]) =>
            {
                let s = Shuffle {
                    transposed: true,
                    ..s
                };
                self.shuffles.insert(out, s);
                Ok(())
            }
            ("Reshape", Some(s)) if s.transposed => {
                let t = target(n.input.get(1).and_then(|i| self.values.get(i)));
                let t = t.ok_or("its target shape must fold to constants")?;
                let c = s.shape[1].clone();
                let back = t.len() == 4
                    && names(&t[0], &s.shape[0], true)
                    && (t[1] == c || t[1] == Dim::Known(-1))
                    && spatial(&t[2], &s.shape[2], true)
                    && spatial(&t[3], &s.shape[3], true);
                if !back {
                    return Err(format!(
                        "a Reshape to {t:?} after a channel shuffle's Transpose: {REFUSED}"
                    ));
                }
                let attrs = vec![("groups", AttrValue::Int(s.groups))];
                let v = self.emit("channel_shuffle", n, vec![Some(s.r)], attrs, s.shape.clone());
                self.values.insert(out, v);
                Ok(())
            }
            _ => Err(REFUSED.into()),
        }
    }
}
