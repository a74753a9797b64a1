//! Row-major constant arrays for import-time folding: the element moves (gather,
//! slice, transpose, concat, broadcast) shared by integer and float constants.

use crate::tensor::{Dim, Value};

/// The most elements one folded constant may have: shape arithmetic needs a few dozen,
/// and a crafted file must not make the importer build huge tensors (a Gather of a
/// large constant by a large index list would be their product).
pub(crate) const MAX_FOLDED: usize = 1 << 20;

/// The element count of `dims`, `None` when it overflows.
pub(crate) fn elements(dims: &[usize]) -> Option<usize> {
    dims.iter().try_fold(1usize, |a, &d| a.checked_mul(d))
}

/// The element count of `dims` when it is at most [`MAX_FOLDED`].
pub(crate) fn foldable(dims: &[usize]) -> Result<usize, String> {
    elements(dims).filter(|&c| c <= MAX_FOLDED).ok_or(format!(
        "a constant of dims {dims:?} is more than the {MAX_FOLDED} elements shape arithmetic may fold"
    ))
}

/// Row-major elements with their dims: the one shape both constant kinds share here.
#[derive(Clone)]
pub(crate) struct Arr<T> {
    pub(crate) dims: Vec<usize>,
    pub(crate) data: Vec<T>,
}

fn strides(dims: &[usize]) -> Vec<usize> {
    let mut s = vec![1; dims.len()];
    for k in (0..dims.len().saturating_sub(1)).rev() {
        s[k] = s[k + 1] * dims[k + 1];
    }
    s
}

pub(crate) fn axis(a: i64, rank: usize) -> Result<usize, String> {
    let r = rank as i64;
    let v = if a < 0 { a + r } else { a };
    if (0..r.max(1)).contains(&v) {
        Ok(v as usize)
    } else {
        Err(format!("axis {a} is out of range for rank {rank}"))
    }
}

impl<T: Clone> Arr<T> {
    /// `out[idx] = self[map(idx)]` over the output dims `dims` (at most
    /// [`MAX_FOLDED`] elements).
    pub(crate) fn gather_by(
        &self,
        dims: Vec<usize>,
        map: impl Fn(&[usize]) -> usize,
    ) -> Result<Arr<T>, String> {
        let count = foldable(&dims)?;
        let os = strides(&dims);
        let mut idx = vec![0; dims.len()];
        let mut data = Vec::with_capacity(count);
        for flat in 0..count {
            for (k, (&s, &d)) in os.iter().zip(&dims).enumerate() {
                idx[k] = flat / s % d.max(1);
            }
            data.push(self.data[map(&idx)].clone());
        }
        Ok(Arr { dims, data })
    }

    pub(crate) fn transpose(&self, perm: &[usize]) -> Result<Arr<T>, String> {
        let dims = perm.iter().map(|&p| self.dims[p]).collect();
        let s = strides(&self.dims);
        // Output dim `k` steps through source dim `perm[k]`.
        let step: Vec<usize> = perm.iter().map(|&p| s[p]).collect();
        self.gather_by(dims, |o| o.iter().zip(&step).map(|(i, s)| i * s).sum())
    }

    pub(crate) fn gather(&self, ax: usize, indices: &[i64], idims: &[usize]) -> Result<Arr<T>, String> {
        let n = self.dims[ax] as i64;
        let idx: Vec<usize> = indices
            .iter()
            .map(|&i| {
                let j = if i < 0 { i + n } else { i };
                (0..n)
                    .contains(&j)
                    .then_some(j as usize)
                    .ok_or(format!("index {i} out of range {n}"))
            })
            .collect::<Result<_, _>>()?;
        let mut dims = self.dims[..ax].to_vec();
        dims.extend_from_slice(idims);
        dims.extend_from_slice(&self.dims[ax + 1..]);
        let ir = idims.len();
        let (s, is) = (strides(&self.dims), strides(idims));
        self.gather_by(dims, |o| {
            let flat_i: usize = is.iter().zip(&o[ax..ax + ir]).map(|(s, i)| s * i).sum();
            let before: usize = o[..ax].iter().zip(&s).map(|(i, s)| i * s).sum();
            let after: usize = o[ax + ir..].iter().zip(&s[ax + 1..]).map(|(i, s)| i * s).sum();
            before + idx[flat_i] * s[ax] + after
        })
    }

    pub(crate) fn slice(
        &self,
        starts: &[i64],
        ends: &[i64],
        axes: &[usize],
        steps: &[i64],
    ) -> Result<Arr<T>, String> {
        let rank = self.dims.len();
        let (mut start, mut step) = (vec![0i64; rank], vec![1i64; rank]);
        let mut dims = self.dims.clone();
        for (k, &a) in axes.iter().enumerate() {
            let n = self.dims[a] as i64;
            let st = steps.get(k).copied().unwrap_or(1);
            if st == 0 {
                return Err("slice step 0".into());
            }
            if n == 0 {
                // Nothing to take, whatever the bounds.
                dims[a] = 0;
                continue;
            }
            // A step past the axis takes one element at most, as a step of `n` does;
            // clamped, the arithmetic below cannot overflow.
            let st = st.clamp(-n, n);
            let clamp = |v: i64, lo: i64, hi: i64| {
                let v = if v < 0 { v.saturating_add(n) } else { v };
                v.clamp(lo, hi)
            };
            let (s, e) = if st > 0 {
                (clamp(starts[k], 0, n), clamp(ends[k], 0, n))
            } else {
                (clamp(starts[k], 0, n - 1), clamp(ends[k], -1, n - 1))
            };
            let len = if st > 0 {
                (e - s + st - 1) / st
            } else {
                (s - e - st - 1) / -st
            };
            dims[a] = len.max(0) as usize;
            start[a] = s;
            step[a] = st;
        }
        let s = strides(&self.dims);
        self.gather_by(dims, |o| {
            (0..rank)
                .map(|k| (start[k] + o[k] as i64 * step[k]) as usize * s[k])
                .sum()
        })
    }
}

pub(crate) fn arr_of(v: &Value) -> Option<Result<Arr<Dim>, Arr<f32>>> {
    match v {
        Value::Int { dims, data } => Some(Ok(Arr {
            dims: dims.clone(),
            data: data.clone(),
        })),
        Value::Float { dims, data, .. } => Some(Err(Arr {
            dims: dims.clone(),
            data: data.clone(),
        })),
        Value::Run { .. } => None,
    }
}

#[cfg(test)]
mod tests {
    use super::Arr;

    /// `0, 1, 2, ...` in dims `dims`.
    fn iota(dims: &[usize]) -> Arr<u32> {
        let n = dims.iter().product::<usize>() as u32;
        Arr {
            dims: dims.to_vec(),
            data: (0..n).collect(),
        }
    }

    #[test]
    fn transpose_gather_and_slice_pick_the_right_elements() {
        let a = iota(&[2, 3, 4]);
        let t = a.transpose(&[2, 0, 1]).unwrap();
        assert_eq!(t.dims, [4, 2, 3]);
        // t[k][i][j] = a[i][j][k] = 12 i + 4 j + k.
        assert_eq!(&t.data[..7], [0, 4, 8, 12, 16, 20, 1]);
        assert_eq!(t.data[23], 23);
        let g = a.gather(1, &[2, -3, 1, 2], &[2, 2]).unwrap();
        assert_eq!(g.dims, [2, 2, 2, 4]);
        // g[i][p][q][k] = a[i][idx[2p + q]][k], indices 2, 0, 1, 2.
        assert_eq!(&g.data[..8], [8, 9, 10, 11, 0, 1, 2, 3]);
        assert_eq!(&g.data[28..], [20, 21, 22, 23]);
        let s = a.slice(&[-1, 3], &[-4, 0], &[1, 2], &[-1, -2]).unwrap();
        assert_eq!(s.dims, [2, 3, 2]);
        // s[i][j][k] = a[i][2 - j][3 - 2 k].
        assert_eq!(&s.data[..4], [11, 9, 7, 5]);
        assert_eq!(&s.data[6..8], [23, 21]);
    }
}
