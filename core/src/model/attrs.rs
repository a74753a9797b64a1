//! A node's attributes read in place from the file's bytes: the [`Attrs`] source that
//! [`Model`](super::Model) hands to every op it calls by name.

use super::format::*;
use crate::error::{Error, Result};
use crate::ops::registry::Attrs;

/// A list of 8-byte little-endian numbers (`i64` or `f64`) in the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct List<'m> {
    bytes: &'m [u8],
}

impl List<'_> {
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.bytes.len() / 8
    }

    /// Whether the list is empty.
    pub fn is_empty(&self) -> bool {
        self.bytes.len() < 8
    }

    fn word(&self, k: usize) -> Option<u64> {
        u64_at(self.bytes, k.checked_mul(8)?)
    }

    /// Element `k` of a list of integers.
    pub fn int(&self, k: usize) -> Option<i64> {
        self.word(k).map(|w| w as i64)
    }

    /// Element `k` of a list of reals.
    pub fn float(&self, k: usize) -> Option<f64> {
        self.word(k).map(f64::from_bits)
    }
}

/// An attribute's value, viewed in place.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Attr<'m> {
    /// An integer (`dim`, `groups`).
    Int(i64),
    /// A list of integers (`stride`, `padding`).
    Ints(List<'m>),
    /// A real number (`eps`, `negative_slope`).
    Float(f64),
    /// A list of real numbers (`scale_factor`).
    Floats(List<'m>),
    /// A boolean (`ceil_mode`).
    Flag(bool),
    /// A string (`mode`).
    Str(&'m str),
}

/// One attribute: its PyTorch name and value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AttrRecord<'m> {
    /// The keyword parameter's PyTorch name.
    pub name: &'m str,
    /// Its value.
    pub value: Attr<'m>,
}

/// A node's attributes, viewed in place (checked when the file was parsed).
#[derive(Clone, Copy, Debug)]
pub struct NodeAttrs<'m> {
    bytes: &'m [u8],
    count: usize,
}

/// The attribute record at `off` of `b` and the offset after it.
fn attr_at(b: &[u8], off: usize) -> core::result::Result<(AttrRecord<'_>, usize), &'static str> {
    let head = b
        .get(off..off.checked_add(8).ok_or(BAD_RECORD)?)
        .ok_or(BAD_RECORD)?;
    let (ty, name_len) = (head[0], head[1] as usize);
    if head[2] != 0 || head[3] != 0 {
        return Err(BAD_RECORD);
    }
    let len = u32_at(head, 4).ok_or(BAD_RECORD)? as usize;
    let name_at = off + 8;
    let name = b.get(name_at..name_at + name_len).ok_or(BAD_RECORD)?;
    let name = core::str::from_utf8(name).map_err(|_| BAD_NAME)?;
    let at = name_at + name_len;
    let end = at.checked_add(len).ok_or(BAD_RECORD)?;
    let v = b.get(at..end).ok_or(BAD_RECORD)?;
    let next = pad4(end).ok_or(BAD_RECORD)?;
    if b.get(end..next).is_none_or(|z| z.iter().any(|&x| x != 0)) {
        return Err(BAD_RECORD);
    }
    let value = match (ty, len) {
        (T_INT, 8) => Attr::Int(u64_at(v, 0).ok_or(BAD_ATTR)? as i64),
        (T_FLOAT, 8) => Attr::Float(f64::from_bits(u64_at(v, 0).ok_or(BAD_ATTR)?)),
        (T_INTS, n) if n % 8 == 0 => Attr::Ints(List { bytes: v }),
        (T_FLOATS, n) if n % 8 == 0 => Attr::Floats(List { bytes: v }),
        (T_FLAG, 1) if v[0] <= 1 => Attr::Flag(v[0] == 1),
        (T_STR, _) => Attr::Str(core::str::from_utf8(v).map_err(|_| BAD_ATTR)?),
        _ => return Err(BAD_ATTR),
    };
    Ok((AttrRecord { name, value }, next))
}

impl<'m> NodeAttrs<'m> {
    /// The `count` attribute records at `off` of `body` and the offset after them;
    /// with `check`, also refuses a name given twice.
    pub(crate) fn walk(
        body: &'m [u8],
        off: usize,
        count: usize,
        check: bool,
    ) -> core::result::Result<(Self, usize), &'static str> {
        let mut at = off;
        for k in 0..count {
            let (r, next) = attr_at(body, at)?;
            if check {
                let this = NodeAttrs {
                    bytes: body.get(off..at).ok_or(BAD_RECORD)?,
                    count: k,
                };
                if this.get(r.name).is_some() {
                    return Err(DUP_ATTR);
                }
            }
            at = next;
        }
        let bytes = body.get(off..at).ok_or(BAD_RECORD)?;
        Ok((NodeAttrs { bytes, count }, at))
    }

    /// Number of attributes.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether the node has no attribute.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The attributes, in file order.
    pub fn iter(&self) -> impl Iterator<Item = AttrRecord<'m>> + '_ {
        let mut off = 0;
        let bytes = self.bytes;
        (0..self.count).map_while(move |_| {
            let (r, next) = attr_at(bytes, off).ok()?;
            off = next;
            Some(r)
        })
    }

    /// The value of the attribute called `name`.
    pub fn get(&self, name: &str) -> Option<Attr<'m>> {
        self.iter().find(|r| r.name == name).map(|r| r.value)
    }
}

fn wrong(what: &'static str) -> Error {
    Error::InvalidParam {
        op: "model attribute",
        what,
        value: 0,
    }
}

impl Attrs for NodeAttrs<'_> {
    fn int(&self, name: &str) -> Result<Option<i64>> {
        match self.get(name) {
            None => Ok(None),
            Some(Attr::Int(v)) => Ok(Some(v)),
            Some(_) => Err(wrong("parameter must be an integer")),
        }
    }

    fn ints(&self, name: &str, out: &mut [i64]) -> Result<Option<usize>> {
        match self.get(name) {
            None => Ok(None),
            Some(Attr::Int(v)) => {
                if let Some(o) = out.first_mut() {
                    *o = v;
                }
                Ok(Some(1))
            }
            Some(Attr::Ints(l)) => {
                for (k, o) in out.iter_mut().enumerate().take(l.len()) {
                    *o = l.int(k).unwrap_or(0);
                }
                Ok(Some(l.len()))
            }
            // Asked only for its length (`out` empty), as the targets of a loss are.
            Some(Attr::Floats(l)) if out.is_empty() || l.is_empty() => Ok(Some(l.len())),
            Some(_) => Err(wrong("parameter must be an integer or a list of integers")),
        }
    }

    fn float(&self, name: &str) -> Result<Option<f64>> {
        match self.get(name) {
            None => Ok(None),
            Some(Attr::Float(v)) => Ok(Some(v)),
            Some(Attr::Int(v)) => Ok(Some(v as f64)),
            Some(_) => Err(wrong("parameter must be a number")),
        }
    }

    fn float_at(&self, name: &str, k: usize) -> Result<Option<f64>> {
        match self.get(name) {
            None => Ok(None),
            Some(Attr::Floats(l)) => Ok(l.float(k)),
            Some(Attr::Ints(l)) => Ok(l.int(k).map(|v| v as f64)),
            Some(_) => Err(wrong("parameter must be a list of numbers")),
        }
    }

    fn flag(&self, name: &str) -> Result<Option<bool>> {
        match self.get(name) {
            None => Ok(None),
            Some(Attr::Flag(b)) => Ok(Some(b)),
            Some(_) => Err(wrong("parameter must be a boolean")),
        }
    }

    /// Anything but a string counts as absent (the op's default mode), as in the
    /// conformance door.
    fn string(&self, name: &str) -> Result<Option<&str>> {
        Ok(match self.get(name) {
            Some(Attr::Str(s)) => Some(s),
            _ => None,
        })
    }
}
