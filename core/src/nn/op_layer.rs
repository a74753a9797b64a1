//! Any op with one tensor input as a layer, by its registry name and PyTorch keyword
//! parameters: `OpLayer::new("hardsigmoid")`,
//! `OpLayer::new("softmax")?.with(&[("dim", ParamValue::Int(-1))])`.
//! A new op registered in [`OpSpec::ALL`](crate::ops::registry::OpSpec) is a layer of
//! [`Sequential`](super::Sequential) and a layer name of the wasm spec without any
//! code here. Stored inline (no heap) and `Copy`, like every [`Layer`](super::Layer).

use crate::error::{Error, Result};
use crate::graph::{Graph, Tensor};
use crate::ops::registry::{Attrs, OpInfo, OpSpec};
use crate::scalar::Scalar;

/// Most elements of a list parameter of an [`OpLayer`].
pub const MAX_LIST_LEN: usize = 4;
/// Most bytes of a string parameter (a mode name) of an [`OpLayer`].
pub const MAX_WORD_LEN: usize = 15;

/// A keyword parameter's value, held inline.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ParamValue {
    /// An integer (`dim`, `start_dim`).
    Int(i64),
    /// A list of up to [`MAX_LIST_LEN`] integers (`output_size`, `dims`): the values
    /// and how many there are.
    Ints([i64; MAX_LIST_LEN], u8),
    /// A real number (`negative_slope`).
    Float(f64),
    /// A boolean (`ceil_mode`).
    Flag(bool),
    /// A short string (`mode`): its bytes and length.
    Word([u8; MAX_WORD_LEN], u8),
}

impl ParamValue {
    /// A list parameter; more than [`MAX_LIST_LEN`] values is an error.
    pub fn ints(values: &[i64]) -> Result<Self> {
        let mut v = [0; MAX_LIST_LEN];
        let dst = v.get_mut(..values.len()).ok_or(Error::InvalidParam {
            op: "nn::OpLayer",
            what: "list parameter too long; length",
            value: values.len() as i64,
        })?;
        dst.copy_from_slice(values);
        Ok(ParamValue::Ints(v, values.len() as u8))
    }

    /// A string parameter; more than [`MAX_WORD_LEN`] bytes is an error.
    pub fn word(s: &str) -> Result<Self> {
        let mut v = [0; MAX_WORD_LEN];
        let dst = v.get_mut(..s.len()).ok_or(Error::InvalidParam {
            op: "nn::OpLayer",
            what: "string parameter too long; bytes",
            value: s.len() as i64,
        })?;
        dst.copy_from_slice(s.as_bytes());
        Ok(ParamValue::Word(v, s.len() as u8))
    }

    fn list(&self) -> Option<&[i64]> {
        match self {
            ParamValue::Int(v) => Some(core::slice::from_ref(v)),
            ParamValue::Ints(v, n) => v.get(..*n as usize),
            _ => None,
        }
    }
}

impl From<i64> for ParamValue {
    fn from(v: i64) -> Self {
        ParamValue::Int(v)
    }
}
impl From<f64> for ParamValue {
    fn from(v: f64) -> Self {
        ParamValue::Float(v)
    }
}
impl From<bool> for ParamValue {
    fn from(v: bool) -> Self {
        ParamValue::Flag(v)
    }
}

/// A registered op with one tensor input, and its keyword parameters: four words, so
/// that every [`Layer`](super::Layer) stays small; the parameters live in a `'static`
/// slice (a constant in the program, or leaked once by a front end that builds layers
/// at run time).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OpLayer {
    name: &'static str,
    params: &'static [(&'static str, ParamValue)],
}

impl OpLayer {
    /// The op called `name` (`torch.nn.functional`'s name), with PyTorch's defaults.
    /// Errors if no op has that name or the op takes more than one tensor input.
    pub fn new(name: &str) -> Result<Self> {
        let s = OpInfo::find(name).ok_or(Error::Unsupported {
            op: "nn::OpLayer: no op has this name",
        })?;
        if s.inputs.len() != 1 {
            return Err(Error::InvalidParam {
                op: s.name,
                what: "a layer takes one tensor input; this op's tensor inputs",
                value: s.inputs.len() as i64,
            });
        }
        Ok(OpLayer {
            name: s.name,
            params: &[],
        })
    }

    /// The layer with keyword parameters `params` (PyTorch's names, each one of the
    /// op's; a later entry for the same name wins), e.g.
    /// `OpLayer::new("softmax")?.with(&[("dim", ParamValue::Int(1))])`.
    pub fn with(self, params: &'static [(&'static str, ParamValue)]) -> Result<Self> {
        Self::check_keys(self.name, params.iter().map(|(k, _)| *k))?;
        Ok(OpLayer { params, ..self })
    }

    /// The op's own name for parameter `key`, or an error naming the op.
    pub fn param_name(&self, key: &str) -> Result<&'static str> {
        let s = OpInfo::find(self.name).ok_or(Error::Unsupported { op: self.name })?;
        s.params
            .iter()
            .find(|p| **p == key)
            .copied()
            .ok_or(Error::InvalidParam {
                op: s.name,
                what: "unknown keyword parameter for this op; number of parameters it has",
                value: s.params.len() as i64,
            })
    }

    fn check_keys<'k>(name: &'static str, keys: impl Iterator<Item = &'k str>) -> Result<()> {
        let l = OpLayer { name, params: &[] };
        for k in keys {
            l.param_name(k)?;
        }
        Ok(())
    }

    /// The op's registry name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Applies the op to `x`.
    pub fn forward<S: Scalar, const N: usize>(&self, g: &mut Graph<'_, S, N>, x: Tensor) -> Result<Tensor> {
        let s = OpSpec::<S, N>::find(self.name).ok_or(Error::Unsupported { op: self.name })?;
        (s.call)(g, &[Some(x)], self)
    }

    fn get(&self, key: &str) -> Option<&ParamValue> {
        self.params.iter().rev().find(|(k, _)| *k == key).map(|(_, v)| v)
    }

    fn wrong_kind(&self, what: &'static str) -> Error {
        Error::InvalidParam {
            op: self.name,
            what,
            value: 0,
        }
    }
}

impl Attrs for OpLayer {
    fn int(&self, name: &str) -> Result<Option<i64>> {
        match self.get(name) {
            None => Ok(None),
            Some(ParamValue::Int(v)) => Ok(Some(*v)),
            Some(_) => Err(self.wrong_kind("parameter must be an integer")),
        }
    }

    fn ints(&self, name: &str, out: &mut [i64]) -> Result<Option<usize>> {
        let Some(v) = self.get(name) else {
            return Ok(None);
        };
        let list = v
            .list()
            .ok_or(self.wrong_kind("parameter must be an integer list"))?;
        for (o, x) in out.iter_mut().zip(list) {
            *o = *x;
        }
        Ok(Some(list.len()))
    }

    fn float(&self, name: &str) -> Result<Option<f64>> {
        match self.get(name) {
            None => Ok(None),
            Some(ParamValue::Float(v)) => Ok(Some(*v)),
            Some(ParamValue::Int(v)) => Ok(Some(*v as f64)),
            Some(_) => Err(self.wrong_kind("parameter must be a number")),
        }
    }

    fn float_at(&self, name: &str, k: usize) -> Result<Option<f64>> {
        match self.get(name) {
            None => Ok(None),
            Some(v) => {
                let list = v
                    .list()
                    .ok_or(self.wrong_kind("parameter must be a number list"))?;
                Ok(list.get(k).map(|x| *x as f64))
            }
        }
    }

    fn flag(&self, name: &str) -> Result<Option<bool>> {
        match self.get(name) {
            None => Ok(None),
            Some(ParamValue::Flag(v)) => Ok(Some(*v)),
            Some(_) => Err(self.wrong_kind("parameter must be a boolean")),
        }
    }

    fn string(&self, name: &str) -> Result<Option<&str>> {
        match self.get(name) {
            None => Ok(None),
            Some(ParamValue::Word(b, n)) => {
                let bytes = b.get(..*n as usize).unwrap_or(&[]);
                core::str::from_utf8(bytes)
                    .map(Some)
                    .map_err(|_| self.wrong_kind("parameter must be a UTF-8 string"))
            }
            Some(_) => Err(self.wrong_kind("parameter must be a string")),
        }
    }
}
