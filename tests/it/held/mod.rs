//! Locks kept alive: scopes, leases, batched renewal.

mod held_locks;
mod many_locks;
