//! The test kit's own tokio runtime, on which every proxy runs, and its timer thread.

use std::sync::OnceLock;

use tokio::runtime::{Builder, Handle, Runtime};

use super::outbound::Release;
use super::timer::Timer;
use crate::TestkitError;

/// Worker threads of the proxy runtime: two, so one busy connection cannot starve the rest
/// on a 2-core machine, and no more, so tests do not compete with a crowd of threads.
const WORKERS: usize = 2;

/// A handle to the proxy runtime, created on first use and never shut down.
///
/// Proxies do not run on the caller's runtime so that a test under
/// `#[tokio::test(start_paused = true)]` (whose clock only advances when it is idle), or a
/// test runtime blocked in synchronous code, cannot stall or speed up the network, and so
/// that the cluster API can stay synchronous. The runtime lives in a static and its worker
/// threads end with the process.
pub(crate) fn handle() -> Result<Handle, TestkitError> {
    static RUNTIME: OnceLock<Result<Runtime, String>> = OnceLock::new();
    let runtime = RUNTIME.get_or_init(|| {
        Builder::new_multi_thread()
            .worker_threads(WORKERS)
            .thread_name("redquorum-testkit-proxy")
            .enable_all()
            .build()
            .map_err(|e| e.to_string())
    });
    match runtime {
        Ok(rt) => Ok(rt.handle().clone()),
        Err(message) => Err(TestkitError::os(
            "starting the proxy runtime",
            std::io::Error::other(message.clone()),
        )),
    }
}

/// The proxy runtime's clock: the thread that releases delayed chunks when due (see
/// `timer`), started on first use and never stopped.
pub(crate) fn timer() -> Result<&'static Timer<Release>, TestkitError> {
    static TIMER: OnceLock<Result<Timer<Release>, String>> = OnceLock::new();
    let timer = TIMER.get_or_init(|| Timer::start("proxy-timer").map_err(|e| e.to_string()));
    match timer {
        Ok(timer) => Ok(timer),
        Err(message) => Err(TestkitError::os(
            "starting the proxy's timer thread",
            std::io::Error::other(message.clone()),
        )),
    }
}
