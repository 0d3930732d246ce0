//! What operators see: the metrics (`recorded`, with the `metrics` feature) and a master
//! that cannot run scripts (`scripting`).

#[cfg(feature = "metrics")]
mod recorded;
mod scripting;
