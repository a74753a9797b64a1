//! The walk over an ONNX graph: initializers and inputs become values, each node is
//! either folded ([`crate::fold`]), mapped to torchlet ops ([`crate::ops`]) or refused.

#[cfg(feature = "engine-check")]
use crate::engine_check;
use crate::engine_check::Origin;
use crate::fold::fold;
use crate::tensor::{decode, Dim, Reader, Value};
use crate::{Error, Options};
use onnx_protobuf::{tensor_shape_proto::dimension, type_proto, GraphProto, ModelProto, NodeProto};
use std::collections::{HashMap, HashSet};
use torchlet::model::spec::{
    AttrValue, DimSpec, GraphSpec, InputSpec, NodeSpec, TensorKind, TensorSpec, ValueRef,
};

/// The import of one model.
pub(crate) struct Importer<'o> {
    pub(crate) spec: GraphSpec,
    pub(crate) values: HashMap<String, Value>,
    /// Tensor index by ONNX initializer name (or recovered name for folded constants).
    tensor_ids: HashMap<String, usize>,
    /// How many nodes (and graph outputs) read each value.
    pub(crate) uses: HashMap<String, usize>,
    pub(crate) options: &'o Options,
    pub(crate) opset: i64,
    /// Index of the node being imported, for names.
    pub(crate) index: usize,
    /// Elements of every constant folded so far.
    folded: usize,
    /// The ONNX node each node of `spec` comes from.
    origins: Vec<Origin>,
    /// The names of `spec`'s nodes.
    node_names: HashSet<String>,
    /// Sequences of computed tensors (`SplitToSequence`'s parts), by ONNX name.
    pub(crate) sequences: HashMap<String, Vec<Value>>,
    /// Channel shuffles under way (`shuffle.rs`), by the ONNX name of their last step.
    pub(crate) shuffles: HashMap<String, crate::shuffle::Shuffle>,
}

/// The largest fixed size of a graph input's dim: far past any tiny network's input, and
/// small enough that no shape computed from it overflows.
const MAX_INPUT_DIM: i64 = 1 << 24;

/// The most elements all folded constants of one import may hold together.
const MAX_FOLDED_TOTAL: usize = 4 * crate::arr::MAX_FOLDED;

impl<'o> Importer<'o> {
    pub(crate) fn run(
        proto: &ModelProto,
        read: &Reader<'_, '_>,
        options: &'o Options,
    ) -> Result<GraphSpec, Error> {
        let g = proto
            .graph
            .as_ref()
            .ok_or(Error::Model("the model has no graph".into()))?;
        let opset = proto
            .opset_import
            .iter()
            .find(|o| o.domain.is_empty() || o.domain == "ai.onnx")
            .map_or(0, |o| o.version);
        let mut im = Importer {
            spec: GraphSpec::default(),
            values: HashMap::new(),
            tensor_ids: HashMap::new(),
            uses: HashMap::new(),
            options,
            opset,
            index: 0,
            folded: 0,
            origins: Vec::new(),
            node_names: HashSet::new(),
            sequences: HashMap::new(),
            shuffles: HashMap::new(),
        };
        unique_names(g)?;
        for t in &g.initializer {
            let v = decode(t, read).map_err(Error::Model)?;
            im.values.insert(t.name.clone(), v);
        }
        for input in &g.input {
            if im.values.contains_key(&input.name) {
                continue; // old exporters list initializers as inputs too
            }
            let Some(type_proto::Value::TensorType(tt)) = input.type_.as_ref().and_then(|t| t.value.as_ref())
            else {
                return Err(Error::Model(format!(
                    "graph input {:?} is not a tensor",
                    input.name
                )));
            };
            if tt.elem_type != 1 {
                return Err(Error::Model(format!(
                    "graph input {:?} has element type {}, not float",
                    input.name, tt.elem_type
                )));
            }
            let dims = tt.shape.as_ref().map(|s| s.dim.as_slice()).unwrap_or_default();
            let (mut spec_dims, mut shape) = (Vec::new(), Vec::new());
            for (k, d) in dims.iter().enumerate() {
                match &d.value {
                    Some(dimension::Value::DimValue(v)) if *v > MAX_INPUT_DIM => {
                        return Err(Error::Model(format!(
                            "graph input {:?} has dim {k} of {v}, more than {MAX_INPUT_DIM}",
                            input.name
                        )));
                    }
                    Some(dimension::Value::DimValue(v)) if *v > 0 => {
                        spec_dims.push(DimSpec::Fixed(*v as usize));
                        shape.push(Dim::Known(*v));
                    }
                    other => {
                        spec_dims.push(DimSpec::Free { min: 1 });
                        shape.push(Dim::Sym(match other {
                            Some(dimension::Value::DimParam(p)) if !p.is_empty() => p.clone(),
                            _ => format!("{}:{k}", input.name),
                        }));
                    }
                }
            }
            let r = ValueRef::Input(im.spec.inputs.len());
            im.spec.inputs.push(InputSpec {
                name: input.name.clone(),
                dims: spec_dims,
            });
            im.values.insert(input.name.clone(), Value::Run { r, shape });
        }
        for name in g
            .node
            .iter()
            .flat_map(|n| n.input.iter())
            .chain(g.output.iter().map(|o| &o.name))
        {
            *im.uses.entry(name.clone()).or_default() += 1;
        }
        for (i, n) in g.node.iter().enumerate() {
            im.index = i;
            im.node(n).map_err(|why| Error::Node {
                index: i,
                op_type: n.op_type.clone(),
                name: n.name.clone(),
                why,
            })?;
        }
        for o in &g.output {
            match im.values.get(&o.name) {
                Some(Value::Run { r, .. }) => im.spec.outputs.push(*r),
                Some(_) => return Err(Error::Model(format!("graph output {:?} is a constant", o.name))),
                None => {
                    return Err(Error::Model(format!(
                        "graph output {:?} is computed by no node",
                        o.name
                    )))
                }
            }
        }
        if let Err(why) = crate::infer::set_min_sizes(&mut im.spec) {
            // No size fits: the engine names the node it refuses, if it does.
            #[cfg(feature = "engine-check")]
            engine_check::at(&mut im.spec, &im.origins, Some(crate::infer::SEARCH_LIMIT))?;
            return Err(Error::Model(why));
        }
        #[cfg(feature = "engine-check")]
        engine_check::check(&mut im.spec, &im.origins, crate::infer::SEARCH_LIMIT)?;
        Ok(im.spec)
    }

    fn node(&mut self, n: &NodeProto) -> Result<(), String> {
        if !(n.domain.is_empty() || n.domain == "ai.onnx") {
            return Err(format!("op domain {:?} is not supported", n.domain));
        }
        if n.op_type == "SequenceAt" {
            return self.sequence_at(n);
        }
        if n.input.iter().any(|i| self.shuffles.contains_key(i)) {
            return self.shuffle_step(n);
        }
        let value = |name: &String| {
            self.values
                .get(name)
                .ok_or(format!("input {name:?} is not computed before this node"))
        };
        let refs = n
            .input
            .iter()
            .map(|name| (!name.is_empty()).then(|| value(name)).transpose())
            .collect::<Result<Vec<Option<&Value>>, String>>()?;
        let first = n.output.first().ok_or("a node without outputs")?;
        let out = match fold(n, &refs) {
            // The TorchScript exporter shares equal initializers (a fresh BatchNorm's
            // ones and zeros) through Identity nodes named like the parameter.
            Some(Ok(Value::Float { dims, data, .. })) if n.op_type == "Identity" => Value::Float {
                dims,
                data,
                init: Some(first.clone()),
            },
            Some(r) => {
                let v = r?;
                // A `Constant`'s values are in the file; computed ones count.
                self.check_folded(&v, n.op_type != "Constant")?;
                v
            }
            None if n.op_type == "Reshape" => {
                let inputs: Vec<Option<Value>> = refs.into_iter().map(|v| v.cloned()).collect();
                if self.shuffle_start(n, &inputs)? {
                    return Ok(());
                }
                self.map(n, &inputs)?
            }
            None if n.op_type == "SplitToSequence" => {
                let inputs: Vec<Option<Value>> = refs.into_iter().map(|v| v.cloned()).collect();
                let parts = self.split_to_sequence(n, &inputs)?;
                self.sequences.insert(first.clone(), parts);
                return Ok(());
            }
            None if n.op_type == "Split" => {
                // The one op of several outputs torchlet maps: a slice each.
                let inputs: Vec<Option<Value>> = refs.into_iter().map(|v| v.cloned()).collect();
                let parts = self.split(n, &inputs)?;
                for (name, v) in n.output.iter().zip(parts) {
                    self.values.insert(name.clone(), v);
                }
                return Ok(());
            }
            None => {
                let inputs: Vec<Option<Value>> = refs.into_iter().map(|v| v.cloned()).collect();
                self.map(n, &inputs)?
            }
        };
        self.values.insert(first.clone(), out);
        Ok(())
    }

    /// Checks a folded constant: its dims hold exactly its values (so that the folds
    /// reading it index inside them), and where `counts` its elements count against
    /// [`MAX_FOLDED_TOTAL`] (shape arithmetic in real exports folds a few hundred; a
    /// crafted file must not fill the host's memory with many large ones).
    fn check_folded(&mut self, v: &Value, counts: bool) -> Result<(), String> {
        let (dims, n) = match v {
            Value::Float { dims, data, .. } => (dims, data.len()),
            Value::Int { dims, data } => (dims, data.len()),
            Value::Run { .. } => return Ok(()),
        };
        if crate::arr::elements(dims) != Some(n) {
            return Err(format!("folding gave {n} values for dims {dims:?}"));
        }
        if counts {
            self.folded = self.folded.saturating_add(n);
        }
        if self.folded > MAX_FOLDED_TOTAL {
            return Err(format!(
                "constant folding would hold more than {MAX_FOLDED_TOTAL} elements in all"
            ));
        }
        Ok(())
    }

    /// Adds (once) the tensor for constant `v`, read by `node` as its `role`.
    pub(crate) fn tensor(
        &mut self,
        v: &Value,
        node: &NodeProto,
        role: &str,
        kind: TensorKind,
    ) -> Result<ValueRef, String> {
        let Value::Float { dims, data, init } = v else {
            return Err(format!("its {role} must be a real constant"));
        };
        let key = init.clone().unwrap_or_else(|| format!("{}#{role}", node.name));
        if let Some(&k) = self.tensor_ids.get(&key) {
            return Ok(ValueRef::Tensor(k));
        }
        let mut name = torch_name(init.as_deref(), &node.name, role, self.index);
        while self.spec.tensors.iter().any(|t| t.name == name) {
            name.push('_');
        }
        Ok(self.push_tensor(key, name, kind, dims.clone(), data.clone()))
    }

    pub(crate) fn push_tensor(
        &mut self,
        key: String,
        name: String,
        kind: TensorKind,
        dims: Vec<usize>,
        data: Vec<f32>,
    ) -> ValueRef {
        let k = self.spec.tensors.len();
        self.spec.tensors.push(TensorSpec {
            name,
            kind,
            dims,
            data,
            int8: None,
        });
        self.tensor_ids.insert(key, k);
        ValueRef::Tensor(k)
    }

    /// Appends a node; its output has `shape`.
    pub(crate) fn emit(
        &mut self,
        op: &str,
        n: &NodeProto,
        inputs: Vec<Option<ValueRef>>,
        attrs: Vec<(&str, AttrValue)>,
        shape: Vec<Dim>,
    ) -> Value {
        let k = self.spec.nodes.len();
        let mut name = if n.name.is_empty() {
            format!("{}_{}", n.op_type, self.index)
        } else {
            n.name.clone()
        };
        // One ONNX node may become several (a pad before a conv), and a made-up name
        // may be a real one: node names in the model file are unique.
        if self.node_names.contains(&name) {
            name = format!("{name}/{op}");
            while self.node_names.contains(&name) {
                name.push('_');
            }
        }
        self.node_names.insert(name.clone());
        self.origins.push(Origin {
            index: self.index,
            op_type: n.op_type.clone(),
            name: n.name.clone(),
        });
        self.spec.nodes.push(NodeSpec {
            op: op.into(),
            name,
            inputs,
            attrs: attrs.into_iter().map(|(a, v)| (a.to_string(), v)).collect(),
        });
        Value::Run {
            r: ValueRef::Node(k),
            shape,
        }
    }
}

/// Refuses a graph whose names are not unique, as the ONNX checker does (a graph is in
/// single static assignment form): two initializers, two graph inputs or two node
/// outputs of one name, a node output that redefines an initializer or an input, or
/// two nodes of one (non-empty) name. Without it a later definition would silently
/// replace an earlier one, and errors naming a node could name two.
fn unique_names(g: &GraphProto) -> Result<(), Error> {
    let ssa = |name: &str, what: &str| {
        format!(
            "the graph must be in single static assignment form, but {name:?} is used as {what} more than once"
        )
    };
    let mut defined: HashMap<&str, String> = HashMap::new();
    for t in &g.initializer {
        if defined.insert(&t.name, "an initializer".into()).is_some() {
            return Err(Error::Model(ssa(&t.name, "an initializer name")));
        }
    }
    let mut inputs = HashSet::new();
    for i in &g.input {
        if !inputs.insert(i.name.as_str()) {
            return Err(Error::Model(ssa(&i.name, "a graph input name")));
        }
        // Old exporters list initializers as inputs too.
        defined.entry(&i.name).or_insert_with(|| "a graph input".into());
    }
    let mut nodes: HashMap<&str, usize> = HashMap::new();
    for (index, n) in g.node.iter().enumerate() {
        let refuse = |why: String| Error::Node {
            index,
            op_type: n.op_type.clone(),
            name: n.name.clone(),
            why,
        };
        if !n.name.is_empty() {
            if let Some(k) = nodes.insert(&n.name, index) {
                return Err(refuse(format!("node {k} has the same name")));
            }
        }
        for o in n.output.iter().filter(|o| !o.is_empty()) {
            if let Some(by) = defined.insert(o, format!("the output of node {index}")) {
                return Err(refuse(format!(
                    "its output {o:?} is already {by} (the graph must be in single static assignment form)"
                )));
            }
        }
    }
    Ok(())
}

/// The PyTorch `state_dict` name of a parameter: the initializer's own name when it
/// looks like one (both exporters keep `features.0.weight`), else the module path the
/// TorchScript exporter puts in node names (`/features/features.0/Conv` -> `features.0`)
/// with the role (`weight`), else `node{index}.{role}`.
fn torch_name(init: Option<&str>, node: &str, role: &str, index: usize) -> String {
    if let Some(n) = init.filter(|n| !made_up(n)) {
        return n.to_string();
    }
    match module_path(node) {
        Some(path) => format!("{path}.{role}"),
        None => format!("node{index}.{role}"),
    }
}

/// Whether an initializer's name is one an exporter made (constant folding's
/// `onnx::Conv_53`, the dynamo exporter's `val_12`, a node output `/conv/Constant_output_0`)
/// rather than a `state_dict` name, which may hold any character PyTorch allows
/// (RegNet's `block1-0`).
fn made_up(name: &str) -> bool {
    name.is_empty()
        || ["onnx::", "onnx_", "val_", "_val_"]
            .iter()
            .any(|p| name.starts_with(p))
        || name.contains('/')
}

/// The module path of a TorchScript-exported node (`/block/conv/conv.0/Conv` ->
/// `block.conv.0`): each scope is the child's name as its parent printed it (`conv.0`
/// inside `conv`), so a scope that extends the one before replaces it.
fn module_path(node: &str) -> Option<String> {
    let scopes: Vec<&str> = node.split('/').filter(|s| !s.is_empty()).collect();
    let (_, modules) = scopes.split_last()?;
    let mut path: Vec<&str> = Vec::new();
    for s in modules {
        match path.last() {
            Some(prev) if s.strip_prefix(prev).is_some_and(|rest| rest.starts_with('.')) => {
                *path.last_mut()? = s;
            }
            _ => path.push(s),
        }
    }
    (!path.is_empty()).then(|| path.join("."))
}

#[cfg(test)]
mod name_tests {
    use super::{module_path, torch_name};

    #[test]
    fn names_are_state_dict_names() {
        // Any character PyTorch allows in a module name survives.
        let regnet = "trunk_output.block1.block1-0.proj.0.weight";
        assert_eq!(torch_name(Some(regnet), "/x/Conv", "weight", 0), regnet);
        assert_eq!(torch_name(Some("köpf.weight"), "", "weight", 0), "köpf.weight");
        // Folded tensors are named by the module that owns the node.
        assert_eq!(
            torch_name(Some("onnx::Conv_53"), "/block/conv/conv.0/Conv", "weight", 3),
            "block.conv.0.weight"
        );
        assert_eq!(torch_name(None, "Conv_7", "bias", 7), "node7.bias");
        assert_eq!(
            module_path("/features/features.1/features.1.0/block/block.0/block.0.0/Conv").as_deref(),
            Some("features.1.0.block.0.0")
        );
        assert_eq!(module_path("/stem/stem.0/Conv").as_deref(), Some("stem.0"));
        assert_eq!(module_path("/conv/Conv").as_deref(), Some("conv"));
        assert_eq!(module_path("/Conv"), None);
    }
}
