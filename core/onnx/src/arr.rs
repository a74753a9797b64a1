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

    fn offset(&self, idx: &[usize]) -> usize {
        strides(&self.dims).iter().zip(idx).map(|(s, i)| s * i).sum()
    }

    pub(crate) fn transpose(&self, perm: &[usize]) -> Result<Arr<T>, String> {
        let dims = perm.iter().map(|&p| self.dims[p]).collect();
        self.gather_by(dims, |o| {
            let mut src = vec![0; perm.len()];
            for (k, &p) in perm.iter().enumerate() {
                src[p] = o[k];
            }
            self.offset(&src)
        })
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
        self.gather_by(dims, |o| {
            let mut src = o[..ax].to_vec();
            let flat_i: usize = strides(idims)
                .iter()
                .zip(&o[ax..ax + ir])
                .map(|(s, i)| s * i)
                .sum();
            src.push(idx[flat_i]);
            src.extend_from_slice(&o[ax + ir..]);
            self.offset(&src)
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
        self.gather_by(dims, |o| {
            let src: Vec<usize> = (0..rank)
                .map(|k| (start[k] + o[k] as i64 * step[k]) as usize)
                .collect();
            self.offset(&src)
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
