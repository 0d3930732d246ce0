//! Negative controls: each mechanism switched off (or replaced by the design it fixed) must
//! produce the overlap or the loss it prevents, so that the checker is known to see it. Each
//! control sits beside the scenario it reuses, named for it; those that need an unsafe knob
//! (`RUSTFLAGS="--cfg redquorum_unsafe"`) are built only with it, and `make test` runs them.

mod controls;
mod renewal;

#[cfg(redquorum_unsafe)]
mod groups;
#[cfg(redquorum_unsafe)]
mod guard_losses;
#[cfg(redquorum_unsafe)]
mod guard_two_losses;
#[cfg(redquorum_unsafe)]
mod kinds;
#[cfg(redquorum_unsafe)]
mod sentinel_failback;
#[cfg(redquorum_unsafe)]
mod sentinel_reader;
#[cfg(redquorum_unsafe)]
mod sentinel_split_brain;
