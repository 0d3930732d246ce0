//! Scoped locks: [`Redlock::with_lock`] acquires, keeps the lock alive while a body runs, and
//! releases it on every path — return, error, loss, cancellation.

use std::future::Future;
use std::time::Duration;

use crate::api::client::{LockOptions, Redlock};
use crate::error::{ConfigError, Error};
use crate::hold::keepalive::KeepAliveOptions;
use crate::hold::lease::Lease;

/// What [`Redlock::with_lock`] does to the body when the lock is lost.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum LossPolicy {
    /// Drop (cancel) the body at once and return [`Error::Lost`]. The default: work that
    /// goes on without the lock is what corrupts data.
    #[default]
    Abort,
    /// Only signal, through [`Lease::lost`] and [`Lease::check`]; the body runs to its end
    /// and its value is returned.
    Signal,
}

/// Options of a scoped lock ([`Redlock::scoped`], [`Owner::scoped`](crate::Owner::scoped)).
///
/// ```
/// use std::time::Duration;
/// use redquorum::{LockOptions, LossPolicy, ScopeOptions};
///
/// let options = ScopeOptions::new()
///     .lock(LockOptions::new().wait(Duration::from_secs(3)).ttl(Duration::from_secs(30)))
///     .margin(Duration::from_secs(2))
///     .on_loss(LossPolicy::Abort);
/// # let _ = options;
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ScopeOptions {
    pub(crate) lock: LockOptions,
    pub(crate) keep_alive: KeepAliveOptions,
    pub(crate) margin: Option<Duration>,
    pub(crate) on_loss: LossPolicy,
}

impl ScopeOptions {
    /// The defaults: the client's ttl and retry policy, renewal at a third of the ttl, a
    /// safety margin of a tenth of the ttl, [`LossPolicy::Abort`].
    pub const fn new() -> Self {
        Self {
            lock: LockOptions::new(),
            keep_alive: KeepAliveOptions::new(),
            margin: None,
            on_loss: LossPolicy::Abort,
        }
    }

    /// How to acquire: ttl, how long to wait, retry policy, fencing.
    pub const fn lock(mut self, lock: LockOptions) -> Self {
        self.lock = lock;
        self
    }

    /// How to renew.
    pub const fn keep_alive(mut self, keep_alive: KeepAliveOptions) -> Self {
        self.keep_alive = keep_alive;
        self
    }

    /// The lease's safety margin (below the ttl minus the drift allowance). Default: a
    /// tenth of the ttl.
    pub const fn margin(mut self, margin: Duration) -> Self {
        self.margin = Some(margin);
        self
    }

    /// What to do when the lock is lost. Default [`LossPolicy::Abort`].
    pub const fn on_loss(mut self, policy: LossPolicy) -> Self {
        self.on_loss = policy;
        self
    }
}

// Scoped locking; the rest of `Redlock` is in `client.rs` (and `health` in `health.rs`).
impl Redlock {
    /// Runs `body` under a lock on `resources`, with the client's defaults: acquired (with
    /// the client's retry policy), kept alive while the body runs, released on every path.
    /// The body returns `Result<T, E>` for any error type that a redquorum [`Error`]
    /// converts into, so one `?` handles both the lock's errors and the body's. The body's
    /// [`Lease`] tells it how long it may still rely on the lock, checks before side
    /// effects, and carries the fencing token when the lock is fenced.
    ///
    /// ```no_run
    /// # async fn run(redlock: redquorum::Redlock) -> Result<(), redquorum::Error> {
    /// let left = redlock
    ///     .with_lock(["stock:4711"], |lease| async move {
    ///         let stock = 17; // read …
    ///         lease.check()?; // still ours, with margin to spare: write
    ///         Ok::<_, redquorum::Error>(stock - 1)
    ///     })
    ///     .await?;
    /// # let _ = left; Ok(()) }
    /// ```
    ///
    /// [`scoped`](Redlock::scoped) is the same with options, and keeps the lock's error and
    /// the body's apart.
    pub async fn with_lock<I, S, F, Fut, T, E>(&self, resources: I, body: F) -> Result<T, E>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
        F: FnOnce(Lease) -> Fut,
        Fut: Future<Output = Result<T, E>>,
        E: From<Error>,
    {
        self.scoped(resources, ScopeOptions::new(), body).await?
    }

    /// The scoped lock with options — ttl, how long to wait, retries, fencing and kind
    /// (through [`ScopeOptions::lock`]), renewal, the lease's safety margin, and what happens
    /// to the body when the lock is lost — and the two kinds of failure kept apart: `Err` is
    /// the lock's ([`Error`]: not acquired, lost under [`LossPolicy::Abort`]), `Ok` holds
    /// whatever the body returned (its own `Result`, if it returns one; `.await?` gives
    /// [`with_lock`](Redlock::with_lock)'s shape).
    ///
    /// Acquires a lock on `resources` (as the options say), keeps it alive while `body`
    /// runs, and releases it on every path: when the body returns, when the lock is lost,
    /// and when this future is dropped (the release is then sent from a background task,
    /// after any extension in flight).
    ///
    /// ```no_run
    /// # async fn run(redlock: redquorum::Redlock) -> Result<(), redquorum::Error> {
    /// use std::time::Duration;
    /// use redquorum::{LockOptions, ScopeOptions};
    ///
    /// let options = ScopeOptions::new()
    ///     .lock(LockOptions::new().wait(Duration::from_secs(3)).fencing(true));
    /// redlock
    ///     .scoped(["ledger"], options, |lease| async move {
    ///         let token = lease.fencing_token().expect("fenced");
    ///         // … write with `token` …
    ///         # let _ = token;
    ///         Ok::<_, redquorum::Error>(())
    ///     })
    ///     .await??;
    /// # Ok(()) }
    /// ```
    ///
    /// ```no_run
    /// # async fn run(redlock: redquorum::Redlock) {
    /// use redquorum::ScopeOptions;
    ///
    /// match redlock
    ///     .scoped(["report"], ScopeOptions::new(), |_lease| async { std::fs::read("in") })
    ///     .await
    /// {
    ///     Err(lock_error) => eprintln!("not locked: {lock_error}"),
    ///     Ok(Err(io_error)) => eprintln!("locked, but the work failed: {io_error}"),
    ///     Ok(Ok(bytes)) => println!("{} bytes", bytes.len()),
    /// }
    /// # }
    /// ```
    pub async fn scoped<I, S, F, Fut>(
        &self,
        resources: I,
        options: ScopeOptions,
        body: F,
    ) -> Result<Fut::Output, Error>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
        F: FnOnce(Lease) -> Fut,
        Fut: Future,
    {
        // Validate everything before taking the lock.
        let timing = self.core().config.timing(options.lock.ttl_or(self.ttl()))?;
        options.keep_alive.plan(timing)?;
        let margin = options.margin.unwrap_or(timing.ttl / 10);
        if margin >= timing.ttl - timing.drift {
            return Err(ConfigError::OutOfRange {
                option: "margin",
                reason: format!(
                    "the safety margin {margin:?} must be below the ttl minus the drift allowance"
                ),
            }
            .into());
        }
        let lock = self.lock_with(resources, options.lock).await?;
        let keep = lock.keep_alive_with(options.keep_alive)?;
        let outcome = run(keep.lease().with_margin(margin), options.on_loss, body).await;
        drop(keep);
        // `release` hands the deletes to a task of its own before its first await, so they
        // go out even if this future is dropped here; its own error (the lock ran out while
        // the body finished) is already reflected in `outcome` or was signalled to the body.
        let _ = lock.release().await;
        outcome
    }
}

/// Runs `body` with `lease` as `on_loss` says: cancelled with [`Error::Lost`] the moment the
/// lock is lost ([`LossPolicy::Abort`]), or to its end ([`LossPolicy::Signal`]). Every scope
/// ([`Redlock::scoped`], [`Owner::scoped`](crate::Owner::scoped)) runs its body here.
pub(crate) async fn run<F, Fut>(
    lease: Lease,
    on_loss: LossPolicy,
    body: F,
) -> Result<Fut::Output, Error>
where
    F: FnOnce(Lease) -> Fut,
    Fut: Future,
{
    match on_loss {
        LossPolicy::Abort => {
            let watcher = lease.clone();
            tokio::select! {
                biased;
                value = body(lease) => Ok(value),
                reason = watcher.lost() => Err(Error::Lost { reason }),
            }
        }
        LossPolicy::Signal => Ok(body(lease).await),
    }
}
