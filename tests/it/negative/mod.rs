//! Negative controls: each mechanism switched off (or replaced by the design it fixed) must
//! produce the overlap or the loss it prevents, so that the checker is known to see it. Each
//! control sits beside the scenario it reuses, named for it; those that need an unsafe knob
//! (`--features internals`) are built only with it, and `make test` runs them.

mod controls;
mod renewal;

#[cfg(feature = "internals")]
mod groups;
#[cfg(feature = "internals")]
mod guard_losses;
#[cfg(feature = "internals")]
mod guard_two_losses;
#[cfg(feature = "internals")]
mod kinds;
#[cfg(feature = "internals")]
mod sentinel_split_brain;
