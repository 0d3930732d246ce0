//! The lock's contract on healthy masters.

mod api;
mod fencing;
mod health;
mod lock_basics;
mod own_keys;
mod release_cancel;
mod server_quirks;
mod waiting;
mod waiting_attack;
