//! Batching samples of different sizes without a heap: bucketing by shape.
//!
//! - The caller keeps its samples wherever it likes and hands over a slice of sample
//!   indices (shuffled, if it wants randomness) and a function giving each sample's
//!   `(h, w)`.
//! - [`sort_by_shape`] groups equal shapes together in that slice (in place);
//!   [`Buckets`] then yields runs of at most `max_batch` indices that all share one
//!   shape, so each run can be one batch tensor `[B, C, h, w]` (what PyTorch users
//!   do by hand with a sampler that groups by size).

/// Groups indices with equal `(h, w)` next to each other (ascending size), in place.
pub fn sort_by_shape(order: &mut [usize], shape: impl Fn(usize) -> (usize, usize)) {
    order.sort_unstable_by_key(|&i| shape(i));
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
}
