//! `redquorum guard`: an operator's word to the restart guard about masters — commission new
//! ones so that every client counts them at once, or reset the epoch of one whose data can no
//! longer be trusted.

use clap::{Args, Subcommand};

use crate::args::{self, MasterArgs};
use crate::exit::{self, Failure};

/// Tell the restart guard about masters: commission new ones, or reset an epoch.
///
/// Give every master of the deployment with --node (or REDQUORUM_NODES): commissioning asks
/// the others whether they remember a master in service. Acts on the masters named with
/// --member, or on every master given. A master first seen by the guard (no epoch marker)
/// is kept out of every quorum, because it may be a master whose data was deleted;
/// `commission` tells every client it is new instead, so it counts at once. `reset` is for a
/// master restored from a backup, or replaced, or whose data may have been lost unseen: every
/// client then keeps it out for the longest ttl from now.
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
        #[command(flatten)]
        members: Members,
        /// Commission even a master that is in service (has an epoch marker, or another
        /// master remembers it), or one with no other master to ask. Unsafe while any lock
        /// may be held on it.
        #[arg(long)]
        force: bool,
    },
    /// Reset the epoch of masters whose data can no longer be trusted (restored from a
    /// backup): every client keeps them out for the deployment's longest ttl from now.
    Reset {
        #[command(flatten)]
        masters: MasterArgs,
        #[command(flatten)]
        members: Members,
    },
}

/// Which of the deployment's masters to act on.
#[derive(Debug, Args)]
struct Members {
    /// A master to act on, one of the --node URLs; repeat for several [default: every master
    /// given].
    #[arg(long = "member", value_name = "URL")]
    members: Vec<String>,
}

impl Members {
    /// The indices of the chosen masters among `urls`.
    fn pick(&self, urls: &[String]) -> Result<Vec<usize>, Failure> {
        if self.members.is_empty() {
            return Ok((0..urls.len()).collect());
        }
        self.members
            .iter()
            .map(|m| {
                let m = m.trim();
                urls.iter().position(|u| u == m).ok_or_else(|| {
                    Failure::usage(format!(
                        "--member {} is not one of the masters given with --node (or REDQUORUM_NODES): give the deployment's masters, then name the ones to act on.",
                        args::redact(m)
                    ))
                })
            })
            .collect()
    }
}

pub(crate) async fn main(args: GuardArgs) -> Result<u8, Failure> {
    let (masters, members, force, verb) = match &args.action {
        Action::Commission {
            masters,
            members,
            force,
        } => (masters, members, Some(*force), "commissioned"),
        Action::Reset { masters, members } => (masters, members, None, "reset"),
    };
    let urls = masters.urls()?;
    let chosen = members.pick(&urls)?;
    // The guard must be on to act; the masters' own list is the deployment's here.
    let client = args::build(
        masters
            .builder(urls.clone(), redquorum::DEFAULT_TTL)
            .restart_guard(true),
    )?;
    for node in chosen {
        let url = args::redact(&urls[node]);
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
