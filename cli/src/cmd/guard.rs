//! `redquorum guard`: an operator's word to the restart guard about masters — commission new
//! ones so that every client counts them at once, or reset the epoch of one whose data can no
//! longer be trusted.

use clap::{Args, Subcommand};

use crate::args::{self, MasterArgs};
use crate::exit::{self, Failure};

/// Tell the restart guard about masters: commission new ones, or reset an epoch.
///
/// Acts on every master given with --node. A master first seen by the guard (no epoch
/// marker) is kept out of every quorum for the deployment's longest ttl, because it may be
/// a master whose data was deleted; `commission` tells every client it is new instead, so it
/// counts at once. `reset` is for a master restored from a backup (or whose data may have
/// been lost unseen): every client then keeps it out for the longest ttl from now.
///
/// Exits 0 when every master was done, 78 when the guard refused one (it says why), 69 when
/// one could not be reached.
#[derive(Debug, Args)]
#[command(after_long_help = exit::HELP)]
pub(crate) struct GuardArgs {
    #[command(subcommand)]
    action: Action,
}

#[derive(Debug, Subcommand)]
enum Action {
    /// Commission new masters: they count toward quorums at once, for every client.
    /// Refused for a master that holds any lock key, or that is already in service (has an
    /// epoch marker) unless --force.
    Commission {
        #[command(flatten)]
        masters: MasterArgs,
        /// Commission even a master that already has an epoch marker.
        #[arg(long)]
        force: bool,
    },
    /// Reset the epoch of masters whose data can no longer be trusted (restored from a
    /// backup): every client keeps them out for the deployment's longest ttl from now.
    Reset {
        #[command(flatten)]
        masters: MasterArgs,
    },
}

pub(crate) async fn main(args: GuardArgs) -> Result<u8, Failure> {
    let (masters, force, verb) = match &args.action {
        Action::Commission { masters, force } => (masters, Some(*force), "commissioned"),
        Action::Reset { masters } => (masters, None, "reset"),
    };
    let urls = masters.urls()?;
    // The guard must be on to act; the masters' own list is the deployment's here.
    let client = args::build(
        masters
            .builder(urls.clone(), redquorum::DEFAULT_TTL)
            .restart_guard(true),
    )?;
    for (node, url) in urls.iter().enumerate() {
        let url = args::redact(url);
        let done = match force {
            Some(force) => client.commission(node, force).await,
            None => client.reset_epoch(node).await,
        };
        match done {
            Ok(()) => println!("{url}: {verb}"),
            Err(e @ redquorum::Error::GuardRefused { .. }) => {
                return Err(Failure::new(
                    exit::CONFIG,
                    exit::sentence(&format!("{url}: {e}")),
                ));
            }
            Err(e) => {
                return Err(Failure::unavailable(exit::sentence(&format!("{url}: {e}"))));
            }
        }
    }
    Ok(exit::OK)
}
