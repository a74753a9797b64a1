//! Shapes: up to [`MAX_RANK`] dimensions, stored inline, with checked arithmetic.

use crate::error::{Error, Result};

/// The largest rank a tensor may have (NCHW images are rank 4).
pub const MAX_RANK: usize = 4;

/// A tensor shape, row-major. Rank 0 is a scalar with one element.
#[derive(Clone, Copy, PartialEq, Eq, Default)]
pub struct Shape {
    dims: [usize; MAX_RANK],
    rank: u8,
}

impl Shape {
    /// A shape from a slice of dimensions; errors on rank above [`MAX_RANK`] or a
    /// number of elements that overflows `usize`.
    pub fn new(dims: &[usize]) -> Result<Shape> {
        if dims.len() > MAX_RANK {
            return Err(Error::InvalidParam {
                op: "shape",
                what: "rank above the maximum of 4",
                value: dims.len() as i64,
            });
        }
        let mut s = Shape {
            dims: [0; MAX_RANK],
            rank: dims.len() as u8,
        };
        s.dims[..dims.len()].copy_from_slice(dims);
        // The product of the non-zero dims, so that no product of some of the dims
        // overflows either, even in an empty shape (`dims[2..]`, flatten's tail; found
        // by fuzzing).
        let nonzero = dims
            .iter()
            .filter(|&&d| d > 0)
            .try_fold(1usize, |a, &d| a.checked_mul(d));
        nonzero.ok_or(Error::Overflow { op: "shape" })?;
        Ok(s)
    }

    /// The scalar shape `[]`.
    pub const fn scalar() -> Shape {
        Shape {
            dims: [0; MAX_RANK],
            rank: 0,
        }
    }

    /// A rank-4 NCHW shape.
    pub fn nchw(n: usize, c: usize, h: usize, w: usize) -> Result<Shape> {
        Shape::new(&[n, c, h, w])
    }

    /// The dimensions.
    pub fn dims(&self) -> &[usize] {
        // `min`: the rank never exceeds MAX_RANK; saying so drops a panic path
        // from every inlined caller.
        &self.dims[..(self.rank as usize).min(MAX_RANK)]
    }

    /// Number of dimensions.
    pub fn rank(&self) -> usize {
        self.rank as usize
    }

    /// Number of elements (checked at construction, so it cannot overflow).
    pub fn numel(&self) -> usize {
        self.dims().iter().product()
    }

    /// The dimensions as stored and the rank, for a tape record that keeps them apart
    /// (so the rank shares a word with the record's flags).
    pub(crate) fn raw(&self) -> ([usize; MAX_RANK], u8) {
        (self.dims, self.rank)
    }

    /// A shape back from [`Shape::raw`]'s parts.
    pub(crate) fn from_raw(dims: [usize; MAX_RANK], rank: u8) -> Shape {
        Shape { dims, rank }
    }

    /// The shape of `a op b` under NumPy/PyTorch broadcasting (dims aligned from the
    /// right, each pair equal or one of them 1), or `None` when the two do not
    /// broadcast or the result's size overflows.
    pub fn broadcast(&self, other: &Shape) -> Option<Shape> {
        let rank = self.rank().max(other.rank());
        let mut dims = [1usize; MAX_RANK];
        for i in 0..rank {
            let (a, b) = (self.dim_from_end(i), other.dim_from_end(i));
            dims[rank - 1 - i] = match (a, b) {
                _ if a == b => a,
                (1, b) => b,
                (a, 1) => a,
                _ => return None,
            };
        }
        Shape::new(&dims[..rank]).ok()
    }

    /// Dimension `i` counted from the last (0 is the last), 1 past the rank.
    pub(crate) fn dim_from_end(&self, i: usize) -> usize {
        let r = self.rank();
        if i < r {
            self.dims[r - 1 - i]
        } else {
            1
        }
    }

    /// Dimension `i`, or 0 past the rank.
    pub fn dim(&self, i: usize) -> usize {
        if i < self.rank as usize {
            self.dims[i]
        } else {
            0
        }
    }
}

impl core::fmt::Debug for Shape {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_list().entries(self.dims()).finish()
    }
}

#[cfg(feature = "defmt")]
impl defmt::Format for Shape {
    fn format(&self, f: defmt::Formatter) {
        defmt::write!(f, "{=[?]}", self.dims())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rank_and_overflow_are_errors() {
        assert!(Shape::new(&[1, 2, 3, 4, 5]).is_err());
        assert_eq!(Shape::new(&[usize::MAX, 2]), Err(Error::Overflow { op: "shape" }));
        // Empty, but a product of its other dims would overflow.
        let huge = 1usize << (usize::BITS / 2);
        assert_eq!(Shape::new(&[0, huge, huge]), Err(Error::Overflow { op: "shape" }));
        assert_eq!(Shape::new(&[0, huge, 2]).unwrap().numel(), 0);
        let s = Shape::new(&[2, 3, 4]).unwrap();
        assert_eq!(s.numel(), 24);
        assert_eq!(Shape::scalar().numel(), 1);
    }

    #[test]
    fn broadcasting_follows_numpy() {
        let s = |d: &[usize]| Shape::new(d).unwrap();
        assert_eq!(
            s(&[2, 3, 4, 5]).broadcast(&s(&[2, 3, 1, 1])),
            Some(s(&[2, 3, 4, 5]))
        );
        assert_eq!(s(&[3, 1]).broadcast(&s(&[4])), Some(s(&[3, 4])));
        assert_eq!(Shape::scalar().broadcast(&s(&[2, 2])), Some(s(&[2, 2])));
        assert_eq!(s(&[0, 1]).broadcast(&s(&[1, 5])), Some(s(&[0, 5])));
        assert_eq!(s(&[3]).broadcast(&s(&[4])), None);
        assert_eq!(s(&[2, 3]).broadcast(&s(&[3, 2])), None);
        let huge = 1usize << (usize::BITS / 2);
        assert_eq!(s(&[huge, 1]).broadcast(&s(&[1, huge])), None);
    }
}
