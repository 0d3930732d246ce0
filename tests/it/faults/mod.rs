//! The mutual-exclusion checker under faults.

mod clients;
mod clocks;
mod network;
mod node_failures;
mod nodes;
mod paused_clients;
mod resend_attack;
mod restart_resend;
