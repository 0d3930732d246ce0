//! The restart guard on real masters.

mod attacks;
mod chaos;
mod clients;
mod commission;
mod durability;
pub(crate) mod losses;
mod restart_guard;
pub(crate) mod two_losses;
