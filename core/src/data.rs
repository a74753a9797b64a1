//! Batching samples of different sizes without a heap: bucketing by shape.
//!
//! - The caller keeps its samples wherever it likes and hands over a slice of sample
//!   indices (shuffled, if it wants randomness) and a function giving each sample's
//!   `(h, w)`.
//! - [`sort_by_shape`] groups equal shapes together in that slice (in place);
//!   [`Buckets`] then yields runs of at most `max_batch` indices that all share one
//!   shape, so each run can be one batch tensor `[B, C, h, w]` (what PyTorch users
//!   do by hand with a sampler that groups by size).
//! - Exact shapes can be too many for full batches (the cropped digits have about 150
//!   shapes, so most exact buckets hold a handful of samples). [`coarse_shape`] rounds
//!   a shape up to a grid of bins; bucketing by it gives fewer, fuller batches, and
//!   each batch is then padded to its largest member (dynamic padding).

/// Groups indices with equal `(h, w)` next to each other (ascending size), in place.
pub fn sort_by_shape(order: &mut [usize], shape: impl Fn(usize) -> (usize, usize)) {
    order.sort_unstable_by_key(|&i| shape(i));
}

/// `(h, w)` rounded up to multiples of `bin` (`[bin_h, bin_w]`; a bin of 0 is taken as
/// 1, i.e. the exact size): a key for bucketing by coarse shape. Saturates instead of
/// overflowing.
pub fn coarse_shape((h, w): (usize, usize), bin: [usize; 2]) -> (usize, usize) {
    let up = |v: usize, b: usize| {
        let b = b.max(1);
        v.div_ceil(b).saturating_mul(b)
    };
    (up(h, bin[0]), up(w, bin[1]))
}

/// Batches of at most `max_batch` indices of one shape, from a slice that
/// [`sort_by_shape`] ordered.
pub struct Buckets<'o, F> {
    order: &'o [usize],
    shape: F,
    max_batch: usize,
}

impl<'o, F: Fn(usize) -> (usize, usize)> Buckets<'o, F> {
    /// Batches over `order`; a `max_batch` of 0 is taken as 1.
    pub fn new(order: &'o [usize], max_batch: usize, shape: F) -> Self {
        Buckets {
            order,
            shape,
            max_batch: max_batch.max(1),
        }
    }
}

impl<'o, F: Fn(usize) -> (usize, usize)> Iterator for Buckets<'o, F> {
    /// The shape of the batch and its sample indices.
    type Item = ((usize, usize), &'o [usize]);

    fn next(&mut self) -> Option<Self::Item> {
        let first = *self.order.first()?;
        let key = (self.shape)(first);
        let run = self
            .order
            .iter()
            .take(self.max_batch)
            .take_while(|&&i| (self.shape)(i) == key)
            .count();
        let (batch, rest) = self.order.split_at(run);
        self.order = rest;
        Some((key, batch))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_share_one_shape_and_respect_the_limit() {
        let shapes = [(3, 4), (5, 5), (3, 4), (3, 4), (5, 5), (2, 9), (3, 4)];
        let mut order = [6, 5, 4, 3, 2, 1, 0];
        sort_by_shape(&mut order, |i| shapes[i]);
        let mut seen = [false; 7];
        let mut count = 0;
        for (key, batch) in Buckets::new(&order, 3, |i| shapes[i]) {
            assert!(!batch.is_empty() && batch.len() <= 3);
            for &i in batch {
                assert_eq!(shapes[i], key);
                assert!(!seen[i]);
                seen[i] = true;
            }
            count += 1;
        }
        assert!(seen.iter().all(|&s| s));
        // (2,9): 1 batch; (3,4) x4: 2 batches; (5,5) x2: 1 batch.
        assert_eq!(count, 4);
    }

    #[test]
    fn coarse_shapes_round_up_to_the_bin() {
        assert_eq!(coarse_shape((12, 5), [4, 4]), (12, 8));
        assert_eq!(coarse_shape((13, 9), [4, 3]), (16, 9));
        assert_eq!(coarse_shape((7, 7), [0, 1]), (7, 7));
        assert_eq!(coarse_shape((usize::MAX, 1), [2, 2]), (usize::MAX, 2));
    }

    #[test]
    fn coarse_buckets_hold_several_exact_shapes() {
        let shapes = [(12, 5), (12, 7), (13, 8), (16, 9), (15, 12)];
        let key = |i: usize| coarse_shape(shapes[i], [4, 4]);
        let mut order = [0, 1, 2, 3, 4];
        sort_by_shape(&mut order, key);
        let batches: Vec<_> = Buckets::new(&order, 8, key).map(|(k, b)| (k, b.len())).collect();
        // (12,8): samples 0, 1; (16,8): sample 2; (16,12): samples 3, 4.
        assert_eq!(batches, [((12, 8), 2), ((16, 8), 1), ((16, 12), 2)]);
    }
}
