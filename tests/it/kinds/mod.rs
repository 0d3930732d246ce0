//! Read-write locks and semaphores.

mod chaos;
mod lock_kinds;
