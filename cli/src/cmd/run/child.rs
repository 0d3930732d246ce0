//! The command run under the lock: spawning it, forwarding signals, stopping it.

use std::ffi::OsString;
use std::io::{ErrorKind, IsTerminal};
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::time::Duration;

use nix::sys::signal::{self, Signal};
use nix::unistd::Pid;
use tokio::signal::unix::{SignalKind, signal};

use crate::exit::{self, Failure};

/// The signals redquorum forwards to the command.
pub(super) struct Signals {
    int: tokio::signal::unix::Signal,
    term: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
    quit: tokio::signal::unix::Signal,
}

impl Signals {
    /// Installs the handlers: from now on these signals no longer end redquorum itself.
    pub(super) fn new() -> Result<Self, Failure> {
        let install = |kind: SignalKind| {
            signal(kind)
                .map_err(|e| Failure::os(format!("could not install a signal handler: {e}.")))
        };
        Ok(Self {
            int: install(SignalKind::interrupt())?,
            term: install(SignalKind::terminate())?,
            hup: install(SignalKind::hangup())?,
            quit: install(SignalKind::quit())?,
        })
    }

    /// The next signal received.
    pub(super) async fn recv(&mut self) -> Signal {
        tokio::select! {
            _ = self.int.recv() => Signal::SIGINT,
            _ = self.term.recv() => Signal::SIGTERM,
            _ = self.hup.recv() => Signal::SIGHUP,
            _ = self.quit.recv() => Signal::SIGQUIT,
        }
    }
}

/// The running command.
///
/// When redquorum's stdin is not a terminal (scripts, cron), the command gets its own
/// process group and every signal goes to the whole group, so that stopping it after a lost
/// lock also stops what it started (a shell script's current command). On a terminal the
/// command stays in the foreground group so it can read the terminal; Ctrl-C and Ctrl-\ then
/// reach it from the terminal directly and are not forwarded a second time.
pub(super) struct Child {
    process: tokio::process::Child,
    pid: Pid,
    group: bool,
}

impl Child {
    pub(super) fn spawn(
        command: &[OsString],
        env: Vec<(&'static str, String)>,
    ) -> Result<Self, Failure> {
        let (program, rest) = command
            .split_first()
            .ok_or_else(|| Failure::usage("no command was given after `--`."))?;
        let shown = program.to_string_lossy();
        let group = !std::io::stdin().is_terminal();
        let mut cmd = tokio::process::Command::new(program);
        cmd.args(rest).envs(env);
        if group {
            cmd.process_group(0);
        }
        let process = cmd.spawn().map_err(|e| match e.kind() {
            ErrorKind::NotFound => {
                Failure::new(exit::NOT_FOUND, format!("command not found: `{shown}`."))
            }
            _ => Failure::new(
                exit::CANNOT_EXECUTE,
                format!("could not execute `{shown}`: {e}."),
            ),
        })?;
        let pid = process
            .id()
            .and_then(|id| i32::try_from(id).ok())
            .map(Pid::from_raw)
            .ok_or_else(|| Failure::os("the command started but has no process id."))?;
        Ok(Self {
            process,
            pid,
            group,
        })
    }

    /// Waits for the command to exit, forwarding the signals redquorum receives.
    pub(super) async fn supervise(&mut self, signals: &mut Signals) -> Result<ExitStatus, Failure> {
        loop {
            tokio::select! {
                status = self.process.wait() => {
                    return status.map_err(|e| Failure::os(format!("could not wait for the command: {e}.")));
                }
                sig = signals.recv() => {
                    let from_terminal = matches!(sig, Signal::SIGINT | Signal::SIGQUIT);
                    if self.group || !from_terminal {
                        tracing::info!(signal = %sig, "forwarding to the command");
                        self.send(sig);
                    }
                }
            }
        }
    }

    /// SIGTERM, then SIGKILL if the command has not exited after `grace`.
    pub(super) async fn terminate(&mut self, grace: Duration) -> Result<ExitStatus, Failure> {
        self.send(Signal::SIGTERM);
        if let Ok(status) = tokio::time::timeout(grace, self.process.wait()).await {
            return status
                .map_err(|e| Failure::os(format!("could not wait for the command: {e}.")));
        }
        eprintln!(
            "redquorum: the command did not exit within {grace:?} of SIGTERM; sending SIGKILL."
        );
        self.send(Signal::SIGKILL);
        self.process
            .wait()
            .await
            .map_err(|e| Failure::os(format!("could not wait for the command: {e}.")))
    }

    fn send(&self, sig: Signal) {
        let sent = if self.group {
            signal::killpg(self.pid, sig)
        } else {
            signal::kill(self.pid, sig)
        };
        // ESRCH: the command (or its group) is already gone; nothing to stop.
        if let Err(e) = sent {
            tracing::debug!(signal = %sig, error = %e, "signal not delivered");
        }
    }
}

/// The exit code that reports `status`: the command's own code, or 128 + its signal.
pub(super) fn status_code(status: ExitStatus) -> u8 {
    match (status.code(), status.signal()) {
        (Some(code), _) => u8::try_from(code & 0xff).unwrap_or(u8::MAX),
        (None, Some(sig)) => u8::try_from(128 + (sig & 0x7f)).unwrap_or(u8::MAX),
        (None, None) => exit::OS_ERROR,
    }
}

/// The exit code of being stopped by `sig`: 128 + its number.
pub(super) fn signal_code(sig: Signal) -> u8 {
    u8::try_from(128 + sig as i32).unwrap_or(u8::MAX)
}
