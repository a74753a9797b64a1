//! The external data of `Model.fromOnnx`, by name. An ONNX initializer stored outside
//! the model names its file (`location`, e.g. `model.onnx.data`); in the page there is
//! no folder to read it from, so the caller hands the files over by name and a
//! location that is not among them is refused, naming it. The names are compared as
//! they are: nothing is resolved against anything, so `../secret` is only a name that
//! was not given.
//!
//! - `undefined` or `null`: no external data.
//! - a `Uint8Array`: the one file of a model that has one (the dynamo exporter's
//!   `model.onnx.data`), whatever its name; a model naming two files is refused.
//! - an object (`{ "model.onnx.data": bytes, ... }`) or a `Map` from file names to
//!   `Uint8Array`s: each location is looked up by its exact name.

use crate::limits;
use core::cell::RefCell;
use js_sys::{Map, Reflect, Uint8Array};
use torchlet::model::spec::GraphSpec;
use wasm_bindgen::{JsCast, JsValue};

/// The files an ONNX model's external initializers may be read from.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum External {
    /// None: every initializer must be inline.
    #[default]
    None,
    /// The bytes of the model's one external file, whatever it is called.
    One(Vec<u8>),
    /// Files by name.
    Named(Vec<(String, Vec<u8>)>),
}

impl External {
    /// Imports `onnx`, reading its external initializers from these files; a location
    /// that is not among them is refused with its name and the names given.
    pub fn import(&self, onnx: &[u8]) -> Result<GraphSpec, String> {
        let asked: RefCell<Vec<String>> = RefCell::new(Vec::new());
        let lookup = |location: &str| -> Option<&[u8]> {
            let mut a = asked.borrow_mut();
            if !a.iter().any(|l| l == location) {
                a.push(location.to_string());
            }
            match self {
                External::None => None,
                External::One(bytes) => (a.len() == 1).then_some(bytes.as_slice()),
                External::Named(files) => files
                    .iter()
                    .find(|(name, _)| name == location)
                    .map(|(_, bytes)| bytes.as_slice()),
            }
        };
        let r = torchlet_onnx::import_with(onnx, &lookup, &Default::default());
        r.map_err(|e| self.refusal(&asked.into_inner()).unwrap_or_else(|| e.to_string()))
    }

    /// The error for the locations a failed import asked for, when one of them was
    /// not given.
    fn refusal(&self, asked: &[String]) -> Option<String> {
        let quoted = |names: &mut dyn Iterator<Item = &String>| {
            names.map(|n| format!("{n:?}")).collect::<Vec<_>>().join(", ")
        };
        match self {
            External::None => asked.first().map(|l| {
                format!(
                    "fromOnnx: the model's initializers are stored in {l:?}, which was not given \
                     (pass externalData: its bytes, or {{ {l:?}: bytes }})"
                )
            }),
            External::One(_) if asked.len() > 1 => Some(format!(
                "fromOnnx: the model stores its initializers in {} files ({}); one Uint8Array \
                 is one file: pass them by name, {{ \"name\": bytes, ... }}",
                asked.len(),
                quoted(&mut asked.iter())
            )),
            External::One(_) => None,
            External::Named(files) => {
                let missing = asked.iter().find(|l| !files.iter().any(|(n, _)| n == *l))?;
                Some(format!(
                    "fromOnnx: external data {missing:?} is not among those given ({})",
                    quoted(&mut files.iter().map(|(n, _)| n))
                ))
            }
        }
    }

    /// The files as JavaScript gives them (see the module docs).
    pub fn from_js(v: &JsValue) -> Result<External, String> {
        const WHAT: &str = "externalData must be undefined, a Uint8Array, or an object or a Map \
                            from file names to Uint8Arrays";
        if v.is_undefined() || v.is_null() {
            return Ok(External::None);
        }
        if let Some(a) = v.dyn_ref::<Uint8Array>() {
            return Ok(External::One(copy("externalData", a)?));
        }
        let mut files = Vec::new();
        if v.is_instance_of::<Map>() {
            let entries = js_sys::try_iter(v)
                .map_err(|_| WHAT.to_string())?
                .ok_or_else(|| WHAT.to_string())?;
            for entry in entries {
                let entry = entry.map_err(|_| WHAT.to_string())?;
                let key = Reflect::get(&entry, &JsValue::from(0)).map_err(|_| WHAT.to_string())?;
                let value = Reflect::get(&entry, &JsValue::from(1)).map_err(|_| WHAT.to_string())?;
                files.push(file(&key, &value)?);
            }
        } else if v.is_object() && !v.is_function() && !js_sys::Array::is_array(v) {
            let keys = Reflect::own_keys(v).map_err(|_| WHAT.to_string())?;
            for key in keys.iter().filter(JsValue::is_string) {
                let value = Reflect::get(v, &key).map_err(|_| WHAT.to_string())?;
                files.push(file(&key, &value)?);
            }
        } else {
            return Err(WHAT.to_string());
        }
        Ok(External::Named(files))
    }
}

/// One named file: a string key and a `Uint8Array`.
fn file(key: &JsValue, value: &JsValue) -> Result<(String, Vec<u8>), String> {
    let name = key
        .as_string()
        .ok_or_else(|| "externalData: every file name must be a string".to_string())?;
    let bytes = value
        .dyn_ref::<Uint8Array>()
        .ok_or_else(|| format!("externalData[{name:?}] must be a Uint8Array"))?;
    let bytes = copy(&format!("externalData[{name:?}]"), bytes)?;
    Ok((name, bytes))
}

/// A copy of `a` in the module's memory, allocated fallibly.
fn copy(what: &str, a: &Uint8Array) -> Result<Vec<u8>, String> {
    let n = a.length() as usize;
    let mut v = limits::vec_for(what, n)?;
    v.resize(n, 0);
    a.copy_to(&mut v);
    Ok(v)
}
