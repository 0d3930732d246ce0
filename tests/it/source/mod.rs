//! Checks on the sources themselves.

mod claims_ledger;
mod module_graph;
