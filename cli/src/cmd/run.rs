//! `redquorum run`: `flock(1)` across masters. Acquire, run the command with the lock kept
//! alive, release when it exits; stop it if the lock is lost.

mod child;

use std::ffi::OsString;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::Args;
use redquorum::{Lock, LockOptions, RetryPolicy};

use self::child::{Child, Signals};
use crate::args::{self, MasterArgs, parse_duration};
use crate::exit::{self, Failure};

/// Run a command while holding a lock, like flock(1) across masters.
///
/// The lock is acquired (waiting up to --wait while another client holds it), kept alive
/// while the command runs, and released when it exits; redquorum then exits with the
/// command's status (128+N if it died of signal N). If the lock is lost, the command gets
/// SIGTERM, SIGKILL after --grace, and redquorum exits 76. SIGINT, SIGTERM, SIGHUP and
/// SIGQUIT sent to redquorum are forwarded to the command.
///
/// With --read, --write or --permits K, shell jobs share a resource: readers run together,
/// a writer alone; at most K jobs hold a permit at once.
///
/// The command's environment gets REDQUORUM_RESOURCE, REDQUORUM_DEADLINE_MS (the lock's
/// deadline at start, in Unix epoch milliseconds: renewals push it back while redquorum
/// runs, so it is the latest moment the command may rely on the lock without them) and,
/// with --fencing, REDQUORUM_FENCING_TOKEN.
#[derive(Debug, Args)]
#[command(after_long_help = exit::HELP)]
pub(crate) struct RunArgs {
    #[command(flatten)]
    masters: MasterArgs,

    /// The resource to lock (the Redis key is `redquorum:lock:RESOURCE`).
    #[arg(long, value_name = "RESOURCE")]
    resource: String,

    /// Lock time-to-live; renewals every third of it keep the lock while the command runs,
    /// so a lost lock is noticed within a ttl.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    ttl: Duration,

    /// How long to keep trying while another client holds the lock (0: one attempt).
    #[arg(long, value_name = "DURATION", default_value = "0", value_parser = parse_duration)]
    wait: Duration,

    /// Take a fencing token (one more round trip) and export it as REDQUORUM_FENCING_TOKEN
    /// (writers and permits; readers get none).
    #[arg(long)]
    fencing: bool,

    /// Take a read hold of the resource's read-write lock: shared with other readers
    /// (`--read`), never with a writer (`--write`).
    #[arg(long, conflicts_with_all = ["write", "permits"])]
    read: bool,

    /// Take the write hold of the resource's read-write lock: exclusive of readers and
    /// writers.
    #[arg(long, conflicts_with = "permits")]
    write: bool,

    /// With --write: while readers hold the lock, keep new readers out so that the writer
    /// gets in.
    #[arg(long, requires = "write")]
    prefer_writers: bool,

    /// Take one of K permits of the resource's semaphore: at most K commands run at once
    /// (every caller of a resource must give the same K).
    #[arg(long, value_name = "K", value_parser = clap::value_parser!(u64).range(1..))]
    permits: Option<u64>,

    /// After the lock is lost, how long the command has to exit after SIGTERM before
    /// SIGKILL.
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = parse_duration)]
    grace: Duration,

    /// The command and its arguments, after `--`.
    #[arg(last = true, required = true, value_name = "COMMAND")]
    command: Vec<OsString>,
}

/// How long a cancelled acquisition is given to send its cleanup before we exit.
const CLEANUP_GRACE: Duration = Duration::from_millis(100);

pub(crate) async fn main(args: RunArgs) -> Result<u8, Failure> {
    let urls = args.masters.urls()?;
    let client = args::build(args.masters.builder(urls, args.ttl))?;
    let mut signals = Signals::new()?;
    let retry = if args.wait.is_zero() {
        RetryPolicy::once()
    } else {
        RetryPolicy::new().unlimited_attempts().timeout(args.wait)
    };
    let mut options = LockOptions::new().retry(retry).fencing(args.fencing);
    if args.read {
        options = options.read();
    } else if args.write {
        options = options.write().prefer_writers(args.prefer_writers);
    } else if let Some(k) = args.permits {
        options = options.permits(usize::try_from(k).unwrap_or(usize::MAX));
    }
    let resource = &args.resource;
    let lock = tokio::select! {
        locked = client.lock_with([resource], options) => locked.map_err(|e| {
            Failure::from_lock(&e).context(&format!("could not lock `{resource}`"))
        })?,
        signal = signals.recv() => {
            // The dropped attempt releases what it got from a background task.
            tokio::time::sleep(CLEANUP_GRACE).await;
            return Ok(child::signal_code(signal));
        }
    };
    let keep = lock
        .keep_alive()
        .map_err(|e| Failure::from_lock(&e).context("could not keep the lock alive"))?;
    let lease = keep.lease();
    let env = environment(&lock, resource);
    let mut child = match Child::spawn(&args.command, env) {
        Ok(child) => child,
        Err(failure) => {
            keep.stop().await;
            let _ = lock.release().await;
            return Err(failure);
        }
    };
    let lost = tokio::select! {
        status = child.supervise(&mut signals) => {
            keep.stop().await;
            return Ok(finish(lock, resource, child::status_code(status?)).await);
        }
        reason = lease.lost() => reason,
    };
    eprintln!(
        "redquorum: the lock on `{resource}` was lost ({lost}); stopping the command with SIGTERM, SIGKILL after {:?}.",
        args.grace
    );
    drop(keep);
    let status = child.terminate(args.grace).await?;
    tracing::info!(?status, "command stopped after the lock was lost");
    let _ = lock.release().await;
    Ok(exit::LOCK_LOST)
}

/// Releases the lock after the command exited with `code`; a lock that turned out lost or
/// expired by then means the command may have outlived it.
async fn finish(lock: Lock, resource: &str, code: u8) -> u8 {
    let quorum = lock_quorum(&lock);
    match lock.release().await {
        Ok(outcome) => {
            if outcome.released() < quorum {
                eprintln!(
                    "redquorum: warning: the lock on `{resource}` was released on {} master(s) only; the others let it expire within its ttl.",
                    outcome.released()
                );
            }
            code
        }
        Err(e) if e.is_lost() => {
            eprintln!(
                "redquorum: the lock on `{resource}` was no longer held when the command exited: {e}"
            );
            exit::LOCK_LOST
        }
        Err(e) => {
            eprintln!("redquorum: warning: releasing the lock on `{resource}` failed: {e}");
            code
        }
    }
}

fn lock_quorum(lock: &Lock) -> usize {
    lock.stats().quorum()
}

/// The variables the command gets: resource, deadline (epoch ms), fencing token.
fn environment(lock: &Lock, resource: &str) -> Vec<(&'static str, String)> {
    let deadline = SystemTime::now() + lock.remaining();
    let deadline_ms = deadline
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let mut env = vec![
        ("REDQUORUM_RESOURCE", resource.to_owned()),
        ("REDQUORUM_DEADLINE_MS", deadline_ms.to_string()),
    ];
    if let Some(token) = lock.fencing_token() {
        env.push(("REDQUORUM_FENCING_TOKEN", token.to_string()));
    }
    env
}
