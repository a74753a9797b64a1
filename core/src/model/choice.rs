//! Which of a model file's tensors train: the fine-tuning choices of TinyTL and the
//! Tiny Training Engine (MCUNetV3), by tensor name, for any model.
//!
//! A [`Trained`] answers per tensor; [`Trained::placement`] turns it into the
//! [`Placement`] function that [`Model::with_placement`](super::Model::with_placement)
//! and [`Model::in_place`](super::Model::in_place) take, and [`Trained::build`] builds
//! the model as a fine-tuning step runs it (the one builder of `torchlet plan
//! --choices` and of the firmware's `finetune_w2`). Frozen layers cost what the
//! ops need of them: a frozen convolution keeps nothing of its input for backward, and
//! no input gradient is computed below the lowest tensor that trains (see
//! `graph/memory.rs`). Buffers never train.

use super::error::ModelResult;
use super::file::{ModelFile, TensorRecord};
use super::run::{Model, Placement};
use super::{TensorKind, ValueRef};
use crate::graph::Graph;
use crate::scalar::Scalar;

/// Which parameters train.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trained<'p> {
    /// Every trainable parameter (the file's default).
    All,
    /// Only the classifier: the tensors the last node reads.
    Head,
    /// Biases (names ending in `bias`) and the classifier: TinyTL's bias-only update
    /// in its strict sense. A normalisation trains its shift, not its scale, so it
    /// keeps nothing of its input.
    Biases,
    /// Biases, the affine weights of normalisations (`batch_norm`, `group_norm`) and
    /// the classifier. A normalisation whose scale trains keeps its input.
    BiasesAndNorms,
    /// The parameters whose names match one of these patterns (`*` matches any run of
    /// characters), for example the last block and the classifier:
    /// `["blocks.4.*", "fc.*"]`.
    Matching(&'p [&'p str]),
}

/// The ops whose input 1 is an affine scale (and input 2 a shift).
const NORMS: [&str; 2] = ["batch_norm", "group_norm"];

impl Trained<'_> {
    /// Whether tensor `t` of `file` trains under this choice.
    pub fn trains(&self, file: &ModelFile<'_>, t: &TensorRecord<'_>) -> bool {
        if !matches!(t.kind, TensorKind::Param { .. }) || t.int8 {
            return false;
        }
        let bias = t.name.ends_with("bias");
        match *self {
            Trained::All => matches!(t.kind, TensorKind::Param { trainable: true }),
            Trained::Head => read_by_last_node(file, t.index),
            Trained::Biases => bias || read_by_last_node(file, t.index),
            Trained::BiasesAndNorms => bias || norm_scale(file, t.index) || read_by_last_node(file, t.index),
            Trained::Matching(patterns) => patterns.iter().any(|p| name_matches(p, t.name)),
        }
    }

    /// The placement of each tensor: [`Placement::Train`] where it trains, `frozen`
    /// elsewhere (buffers included: pass [`Placement::InPlace`] only when the running
    /// statistics are not updated, i.e. the graph runs in eval mode).
    pub fn placement<'f>(
        self,
        file: ModelFile<'f>,
        frozen: Placement,
    ) -> impl Fn(&TensorRecord<'_>) -> Placement + 'f
    where
        Self: 'f,
    {
        move |t| match self.trains(&file, t) {
            true => Placement::Train,
            false => frozen,
        }
    }

    /// `file`'s model in `g` as a fine-tuning step runs it under this choice, with the
    /// graph's mode set:
    /// - [`Trained::All`], the full update: training mode (BatchNorm on batch
    ///   statistics, its running statistics updated), every tensor in the arena
    ///   ([`Model::new`]);
    /// - any other choice: eval mode (BatchNorm's statistics frozen, its affine
    ///   parameters may train), the tensors that train in the arena and every other one
    ///   read in place from the file's bytes ([`Model::in_place`]), so they take no
    ///   arena bytes.
    pub fn build<'m, const N: usize>(
        self,
        g: &mut Graph<'m, f32, N>,
        file: ModelFile<'m>,
    ) -> ModelResult<'m, Model<'m>>
    where
        Self: 'm,
    {
        let all = self == Trained::All;
        g.set_training(all);
        match all {
            true => Model::new(g, file),
            false => Model::in_place(g, file, self.placement(file, Placement::InPlace)),
        }
    }

    /// `file`'s model in `g` for a training-mode step under this choice, as PyTorch's
    /// `model.train()` with the other parameters frozen runs it (a federated round,
    /// where the server averages the running statistics too): BatchNorm on batch
    /// statistics with its running statistics updated, the tensors that train as
    /// parameters, every other one a frozen copy in the arena. For
    /// [`Trained::All`] this is [`Trained::build`].
    pub fn build_training<'m, S: Scalar, const N: usize>(
        self,
        g: &mut Graph<'m, S, N>,
        file: ModelFile<'m>,
    ) -> ModelResult<'m, Model<'m>>
    where
        Self: 'm,
    {
        g.set_training(true);
        Model::with_placement(g, file, self.placement(file, Placement::Frozen))
    }
}

/// Whether the last node reads tensor `k` (the classifier's weight and bias).
fn read_by_last_node(file: &ModelFile<'_>, k: usize) -> bool {
    file.nodes()
        .last()
        .is_some_and(|n| n.inputs().any(|r| r == Some(ValueRef::Tensor(k))))
}

/// Whether a normalisation reads tensor `k` as its scale (input 1).
fn norm_scale(file: &ModelFile<'_>, k: usize) -> bool {
    file.nodes()
        .filter(|n| NORMS.contains(&n.op))
        .any(|n| n.inputs().nth(1) == Some(Some(ValueRef::Tensor(k))))
}

/// Whether `name` matches `pattern`, where `*` matches any run of characters.
pub fn name_matches(pattern: &str, name: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == name,
        Some((head, rest)) => {
            let Some(tail) = name.strip_prefix(head) else {
                return false;
            };
            (0..=tail.len()).any(|i| tail.is_char_boundary(i) && name_matches(rest, &tail[i..]))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::name_matches as matches;
    use super::{ModelFile, Trained};
    use crate::graph::Graph;

    #[repr(C, align(4))]
    struct Aligned<const L: usize>([u8; L]);
    const LEN: usize = include_bytes!("../../../firmware/assets/w2_pretrained.tlm").len();
    /// W2 ("mobile-fcn": BatchNorm, biases, a classifier), as `finetune_w2` runs it.
    static W2: Aligned<LEN> = Aligned(*include_bytes!("../../../firmware/assets/w2_pretrained.tlm"));

    #[test]
    fn build_sets_the_mode_trains_the_choice_and_leaves_the_rest_in_the_file() {
        let file = ModelFile::parse(&W2.0).unwrap();
        let values = |t: Trained<'_>| -> usize {
            file.tensors()
                .filter(|r| t.trains(&file, r))
                .map(|r| r.shape.numel())
                .sum()
        };
        let every: usize = file.tensors().map(|r| r.shape.numel()).sum();
        let patterns = ["fc.*"];
        for t in [
            Trained::All,
            Trained::Biases,
            Trained::Head,
            Trained::Matching(&patterns),
        ] {
            let mut g: Graph<'_, f32, 160> = Graph::meta(usize::MAX);
            g.set_training(t != Trained::All);
            let m = t.build(&mut g, file).unwrap();
            assert_eq!(g.is_training(), t == Trained::All, "{t:?}");
            for r in file.tensors() {
                let grad = g.requires_grad(m.param(r.index).unwrap()).unwrap();
                assert_eq!(grad, t.trains(&file, &r), "{t:?}: {}", r.name);
            }
            // Values, and a gradient per trained value; in place, frozen ones take nothing.
            let copied = if t == Trained::All { every } else { values(t) };
            assert_eq!(g.arena().used_bytes(), 4 * (copied + values(t)), "{t:?}");
        }
        assert!(values(Trained::Biases) > values(Trained::Head) && values(Trained::Head) > 0);
    }

    #[test]
    fn build_training_trains_the_choice_in_training_mode_with_every_tensor_in_the_arena() {
        let file = ModelFile::parse(&W2.0).unwrap();
        let every: usize = file.tensors().map(|r| r.shape.numel()).sum();
        for t in [Trained::All, Trained::Biases, Trained::Head] {
            let mut g: Graph<'_, f32, 160> = Graph::meta(usize::MAX);
            g.set_training(false);
            let m = t.build_training(&mut g, file).unwrap();
            assert!(g.is_training(), "{t:?}");
            let mut trained = 0;
            for r in file.tensors() {
                let grad = g.requires_grad(m.param(r.index).unwrap()).unwrap();
                assert_eq!(grad, t.trains(&file, &r), "{t:?}: {}", r.name);
                trained += if grad { r.shape.numel() } else { 0 };
            }
            // Every value copied (running statistics are written), a gradient per trained one.
            assert_eq!(g.arena().used_bytes(), 4 * (every + trained), "{t:?}");
        }
    }

    #[test]
    fn patterns() {
        assert!(matches("features.*", "features.0.weight"));
        assert!(matches("*.bias", "fc.bias") && !matches("*.bias", "fc.weight"));
        assert!(matches("fc.weight", "fc.weight") && !matches("fc", "fc.weight"));
        assert!(matches("*", "") && matches("a*b*c", "aXbYc") && !matches("a*b*c", "aXbY"));
    }
}
