//! Models from elsewhere: a model as host data (`spec`, with `std`), which an
//! importer produces and the model file encoder writes.

#[cfg(feature = "std")]
pub mod spec;
