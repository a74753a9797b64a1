//! What a JavaScript caller may ask for, checked before it becomes a size, an
//! allocation or work.
//!
//! - **Numbers.** A JS number reaches Rust as an `f64` and is checked here: a whole
//!   number in the stated range, or a finite real in the stated interval. (wasm-bindgen
//!   would turn a number into a `u32` by wrapping it modulo 2^32: `2**32 + 28` became
//!   28, `-1` became 4294967295, `NaN` and `Infinity` 0, `2.5` 2, so a wrong number
//!   silently meant another one.)
//! - **Memory.** An arena is allocated only when it fits what the module can still
//!   reach ([`reachable_bytes`]), and then with a fallible allocation, so that a
//!   browser that gives less than that is an error too, never a trap.
//! - **Work.** A step whose meta plan counts more multiply-accumulates than the
//!   model's `maxMacs` ([`DEFAULT_MAX_MACS`] unless the caller sets another) is refused
//!   before it starts.

use core::fmt;
use torchlet::plan::Thousands;

/// Bytes of a wasm page.
pub const PAGE_BYTES: u64 = 65_536;
/// Pages a wasm32 memory may have at most (4 GiB).
pub const MAX_PAGES: u64 = 65_536;

/// Multiply-accumulates a step may take unless the model's `maxMacs` says otherwise:
/// 10^10, a few seconds of one browser thread. W1's training step at batch 32 and
/// 28x28 takes about 0.05 x 10^9.
pub const DEFAULT_MAX_MACS: u64 = 10_000_000_000;

/// The largest integer a JS number holds exactly (`Number.MAX_SAFE_INTEGER`).
pub const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

/// Pages of linear memory the module has now.
pub fn memory_pages() -> u64 {
    #[cfg(target_arch = "wasm32")]
    let pages = core::arch::wasm32::memory_size::<0>() as u64;
    #[cfg(not(target_arch = "wasm32"))]
    let pages = 0;
    pages
}

/// Bytes the module can still reach: the 65,536-page maximum of wasm32 (4 GiB) less
/// the pages its memory already has. Free blocks inside that memory are not counted
/// (a memory never shrinks, and what is free in it is the allocator's business), so
/// a request this refuses might have fit, and one it lets through cannot be more than
/// the module can reach; whether the browser gives that much is the allocation's to
/// say ([`zeroed_f32s`]).
pub fn reachable_bytes() -> u64 {
    MAX_PAGES.saturating_sub(memory_pages()) * PAGE_BYTES
}

/// A JS number as it would print (`NaN`, `Infinity`, `2.5`, `4294967296`, `1e+300`).
pub struct JsNumber(pub f64);

impl fmt::Display for JsNumber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = self.0;
        if v.is_nan() {
            f.write_str("NaN")
        } else if v.is_infinite() {
            f.write_str(if v > 0.0 { "Infinity" } else { "-Infinity" })
        } else if v.abs() >= 1e21 {
            let s = format!("{v:e}");
            f.write_str(&s.replacen('e', "e+", 1).replace("e+-", "e-"))
        } else {
            write!(f, "{v}")
        }
    }
}

/// `v` as a whole number from `min` to `max`, or an error naming `name`, the range and
/// what it got.
pub fn whole(name: &str, v: f64, min: u64, max: u64) -> Result<u64, String> {
    if v.fract() == 0.0 && v >= min as f64 && v <= max as f64 {
        return Ok(v as u64);
    }
    Err(format!(
        "{name} must be a whole number from {min} to {max}, got {}",
        JsNumber(v)
    ))
}

/// A size (batch, height, width, channels): a whole number from `min` to 2^32 - 1.
pub fn size(name: &str, v: f64, min: u64) -> Result<usize, String> {
    let n = whole(name, v, min, u32::MAX as u64)?;
    usize::try_from(n).map_err(|_| format!("{name} {n} does not fit this platform's sizes"))
}

/// A learning rate: finite and at least 0 (PyTorch's SGD refuses a negative one).
pub fn learning_rate(v: f64) -> Result<f32, String> {
    if v.is_finite() && v >= 0.0 && (v as f32).is_finite() {
        return Ok(v as f32);
    }
    Err(format!(
        "lr must be a finite number of at least 0, got {}",
        JsNumber(v)
    ))
}

/// An SGD momentum: in [0, 1).
pub fn momentum(v: f64) -> Result<f32, String> {
    if (0.0..1.0).contains(&v) {
        // Just below 1 rounds to 1 as an f32: the f32 below 1 instead.
        return Ok((v as f32).min(f32::from_bits(1.0f32.to_bits() - 1)));
    }
    Err(format!("momentum must be in [0, 1), got {}", JsNumber(v)))
}

/// Class labels as the engine takes them: each a whole number from 0 to 2^32 - 1
/// (the engine then checks it against the number of classes).
pub fn labels(v: &[f64]) -> Result<Vec<u32>, String> {
    v.iter()
        .enumerate()
        .map(|(i, &l)| {
            whole("", l, 0, u32::MAX as u64).map(|n| n as u32).map_err(|_| {
                format!(
                    "labels[{i}] must be a class index (a whole number from 0), got {}",
                    JsNumber(l)
                )
            })
        })
        .collect()
}

/// The product of `dims` (an input's element count), or an error naming them.
pub fn product(what: &str, dims: &[usize]) -> Result<usize, String> {
    dims.iter()
        .try_fold(1usize, |p, &d| p.checked_mul(d))
        .ok_or_else(|| format!("{what}: {dims:?} has more elements than this platform can count"))
}

/// Refuses `bytes` for `what` when they exceed what the module can still reach.
pub fn check_reachable(what: &str, bytes: u64) -> Result<(), String> {
    let reachable = reachable_bytes();
    if bytes <= reachable {
        return Ok(());
    }
    Err(format!(
        "{what} of {} bytes is more than the wasm module can still reach, {} bytes \
         (wasm32's 65,536 pages of 64 KiB less the {} it has)",
        Thousands64(bytes),
        Thousands64(reachable),
        memory_pages()
    ))
}

/// An empty `Vec` with room for `n` values for `what`, checked against
/// [`reachable_bytes`] and allocated fallibly: an error, never a trap, when the module
/// cannot get the memory.
pub fn vec_for<T>(what: &str, n: usize) -> Result<Vec<T>, String> {
    let bytes = n as u64 * core::mem::size_of::<T>() as u64;
    check_reachable(what, bytes)?;
    let mut v: Vec<T> = Vec::new();
    v.try_reserve_exact(n).map_err(|_| {
        format!(
            "{what} of {} bytes: the allocation failed (the browser gave the wasm module no \
             more memory; it has {} pages of 64 KiB)",
            Thousands64(bytes),
            memory_pages()
        )
    })?;
    Ok(v)
}

/// `n` zeroed `f32`s for `what`, as [`vec_for`] allocates them.
pub fn zeroed_f32s(what: &str, n: usize) -> Result<Box<[f32]>, String> {
    let mut v = vec_for(what, n)?;
    // Within the capacity just reserved: no further allocation. `Vec` keeps exactly
    // the requested capacity, so the boxed slice takes the buffer as it is.
    v.resize(n, 0.0);
    Ok(v.into_boxed_slice())
}

/// Refuses a step whose meta plan counts more multiply-accumulates than `max`.
pub fn check_macs(what: &str, macs: u64, max: u64) -> Result<(), String> {
    if macs <= max {
        return Ok(());
    }
    Err(format!(
        "{what} takes {} multiply-accumulates (its meta plan), more than maxMacs, {} \
         (raise model.maxMacs to run it)",
        Thousands64(macs),
        Thousands64(max)
    ))
}

/// A `u64` with thousands separators (as [`Thousands`]).
struct Thousands64(u64);

impl fmt::Display for Thousands64 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (hi, lo) = (self.0 / 1_000_000_000, self.0 % 1_000_000_000);
        if hi == 0 {
            return write!(f, "{}", Thousands(lo as usize));
        }
        write!(
            f,
            "{},{:03},{:03},{:03}",
            Thousands(hi as usize),
            lo / 1_000_000,
            lo / 1000 % 1000,
            lo % 1000
        )
    }
}

/// What one call at one input size costs, from its meta plan.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cost {
    /// Arena bytes of the step (parameters and optimizer state included).
    pub bytes: usize,
    /// Its multiply-accumulates.
    pub macs: u64,
    /// For a training step: whether anything trains (a model without parameters
    /// only predicts).
    pub trains: bool,
}

/// A call's input size and whether it trains: what a [`Cost`] is kept under.
pub type CallKey = (bool, usize, usize, usize);

/// The costs of the calls a model was asked for, so that each step is checked against
/// its plan without planning the same size again (at most [`Costs::MAX`] are kept;
/// then the table starts over).
#[derive(Debug, Default)]
pub struct Costs(Vec<(CallKey, Cost)>);

impl Costs {
    /// Sizes kept.
    pub const MAX: usize = 256;

    /// The cost of a call, if it was planned.
    pub fn find(&self, key: CallKey) -> Option<Cost> {
        self.0.iter().find(|(k, _)| *k == key).map(|&(_, c)| c)
    }

    /// Keeps the cost of a call.
    pub fn insert(&mut self, key: CallKey, cost: Cost) {
        if self.0.len() >= Self::MAX {
            self.0.clear();
        }
        self.0.push((key, cost));
    }

    /// Forgets every cost (the model's memory choices changed).
    pub fn clear(&mut self) {
        self.0.clear();
    }
}

/// Refuses a step (`training`, or a prediction) at `dims` that has nothing to train,
/// or whose plan needs more bytes than the `arena` has or more multiply-accumulates
/// than `max_macs`.
pub fn check_step(
    training: bool,
    dims: &[usize],
    cost: Cost,
    arena: usize,
    max_macs: u64,
) -> Result<(), String> {
    if training && !cost.trains {
        return Err("trainStep: nothing to train: no parameter of the model trains \
                    (predict, evaluate and plan work)"
            .to_string());
    }
    let what = if training {
        "a training step"
    } else {
        "a prediction"
    };
    if cost.bytes > arena {
        return Err(format!(
            "arena exhausted: {what} at {dims:?} needs {} bytes (its meta plan), the arena has {}",
            Thousands(cost.bytes),
            Thousands(arena)
        ));
    }
    check_macs(&format!("{what} at {dims:?}"), cost.macs, max_macs)
}
