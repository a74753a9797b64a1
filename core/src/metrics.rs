//! Predictions and accuracy from logits: `argmax` per row and the count of rows whose
//! argmax equals the label, as a training loop needs them after each forward.
//!
//! - Ties go to the lowest index, as `torch.argmax` does.
//! - A NaN anywhere in a row makes that row's prediction `None` (never counted as
//!   correct): a diverged model cannot look accurate.

use crate::error::{Error, Result};
use crate::graph::{Graph, Tensor};
use crate::scalar::Scalar;

/// The index of the largest value of `row`; `None` for an empty row or one holding a
/// NaN.
pub fn argmax<S: Scalar>(row: &[S]) -> Option<usize> {
    let mut best: Option<(usize, S)> = None;
    for (i, &v) in row.iter().enumerate() {
        // Only NaN is unordered with itself.
        v.partial_cmp(&v)?;
        match best {
            Some((_, b)) if v <= b => {}
            _ => best = Some((i, v)),
        }
    }
    best.map(|(i, _)| i)
}

/// How many rows of `logits` (row-major `[labels.len(), classes]`) have their argmax
/// equal to their label. Refused when the sizes disagree.
pub fn count_correct<S: Scalar>(logits: &[S], classes: usize, labels: &[u32]) -> Result<usize> {
    let want = classes
        .checked_mul(labels.len())
        .ok_or(Error::Overflow { op: "count_correct" })?;
    if classes == 0 || logits.len() != want {
        return Err(Error::ShapeMismatch {
            op: "count_correct",
            what: "logits elements vs labels x classes",
            expected: want,
            found: logits.len(),
        });
    }
    Ok(logits
        .chunks_exact(classes)
        .zip(labels)
        .filter(|(row, &label)| argmax(row) == Some(label as usize))
        .count())
}

impl<S: Scalar, const N: usize> Graph<'_, S, N> {
    /// [`count_correct`] of a `[batch, classes]` tensor (for example a model's logits)
    /// against `labels`. A meta graph has no values and answers 0.
    pub fn count_correct(&self, logits: Tensor, labels: &[u32]) -> Result<usize> {
        let shape = self.shape(logits)?;
        let dims = shape.dims();
        if dims.len() != 2 || dims[0] != labels.len() {
            return Err(Error::ShapeMismatch {
                op: "count_correct",
                what: "logits must be [labels, classes]; rows",
                expected: labels.len(),
                found: dims.first().copied().unwrap_or(0),
            });
        }
        if self.is_meta() {
            return Ok(0);
        }
        count_correct(self.data(logits)?, dims[1], labels)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Q16;

    #[test]
    fn argmax_first_of_ties_and_nan() {
        assert_eq!(argmax(&[1.0f32, 3.0, 3.0, -1.0]), Some(1));
        assert_eq!(argmax(&[f32::NEG_INFINITY, f32::NEG_INFINITY]), Some(0));
        assert_eq!(argmax::<f32>(&[]), None);
        assert_eq!(argmax(&[0.0f32, f32::NAN, 5.0]), None);
        assert_eq!(argmax(&[Q16::from_f32(-1.0), Q16::from_f32(2.0)]), Some(1));
    }

    #[test]
    fn counts_rows_and_refuses_bad_sizes() {
        let logits = [0.1f32, 0.9, 0.8, 0.2, f32::NAN, 0.0];
        assert_eq!(count_correct(&logits, 2, &[1, 0, 0]), Ok(2));
        assert_eq!(count_correct(&logits, 2, &[0, 0, 0]), Ok(1));
        assert!(count_correct(&logits, 4, &[1, 0]).is_err());
        assert!(count_correct(&logits, 0, &[]).is_err());
    }

    #[test]
    fn graph_counts_a_tensor() {
        let mut arena = vec![0.0f32; 64];
        let mut g: Graph<f32, 8> = Graph::new(&mut arena);
        let x = g.input(&[2, 3], &[0.0, 1.0, 0.5, 2.0, 1.0, 0.0]).unwrap();
        assert_eq!(g.count_correct(x, &[1, 0]), Ok(2));
        assert!(g.count_correct(x, &[1]).is_err());
    }
}
