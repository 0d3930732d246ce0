//! One module per subcommand.

pub(crate) mod bench;
pub(crate) mod guard;
pub(crate) mod locks;
pub(crate) mod probe;
pub(crate) mod run;
