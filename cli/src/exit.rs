//! Exit codes, and the one-line error every subcommand fails with.
//!
//! The numbers follow BSD `sysexits.h` where one fits, so that shell scripts and cron
//! wrappers can tell "try again later" (75) from "fix the command" (64) from "the masters
//! are down" (69).

use std::fmt;
use std::process::ExitCode;

/// Success; for `run`, the child's own status (0..=125) is passed through instead.
pub(crate) const OK: u8 = 0;
/// `probe`: every master is usable, but some problem was found (a warning line per problem).
pub(crate) const WARNINGS: u8 = 1;
/// The command line is wrong: unknown flag, bad value, malformed or duplicate node URL,
/// no node given (`EX_USAGE`).
pub(crate) const USAGE: u8 = 64;
/// Masters unavailable: no quorum could be reached, or `probe` found a master unreachable or a
/// replica (`EX_UNAVAILABLE`).
pub(crate) const UNAVAILABLE: u8 = 69;
/// The operating system refused something: starting local masters, signals (`EX_OSERR`).
pub(crate) const OS_ERROR: u8 = 71;
/// `bench`: a simulated link's round trip is off its profile by more than the tolerance,
/// so nothing was measured (`EX_SOFTWARE`: the test kit's network did not do as asked).
pub(crate) const LINK_CHECK: u8 = 70;
/// An output file could not be written (`EX_IOERR`).
pub(crate) const IO_ERROR: u8 = 74;
/// `run`: the lock is held by another client and `--wait` ran out (`EX_TEMPFAIL`).
pub(crate) const NOT_ACQUIRED: u8 = 75;
/// `run`: the lock was lost while the command ran; the command was stopped.
pub(crate) const LOCK_LOST: u8 = 76;
/// The options are valid one by one but the lock client refuses the combination, e.g. a ttl
/// too short for the node timeout (`EX_CONFIG`).
pub(crate) const CONFIG: u8 = 78;
/// `run`: the command was found but could not be executed (as in shells).
pub(crate) const CANNOT_EXECUTE: u8 = 126;
/// `run`: the command was not found (as in shells).
pub(crate) const NOT_FOUND: u8 = 127;

/// The exit-code section of `--help`.
pub(crate) const HELP: &str = "\
Exit codes:
  0        success (run: the command's own status, 0..=125, is passed through)
  1        probe: every master is usable but problems were found
  64       usage: unknown flag, bad value, malformed or duplicate node URL, no node
  69       masters unavailable: no quorum (probe: a master is unreachable or a replica)
  70       bench: a simulated link is off its profile by more than --link-tolerance
  71       operating-system error (starting local masters, signals)
  74       an output file could not be written
  75       run: not acquired, the lock is held by another client
  76       run: the lock was lost while the command ran; the command was stopped
  78       configuration refused by the lock client (e.g. ttl too short)
  126/127  run: the command could not be executed / was not found
  128+N    run: the command died of signal N";

/// A failure of a subcommand: a one-line, full-sentence message and its exit code.
#[derive(Debug)]
pub(crate) struct Failure {
    code: u8,
    message: String,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl Failure {
    pub(crate) fn new(code: u8, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    pub(crate) fn usage(message: impl Into<String>) -> Self {
        Self::new(USAGE, message)
    }

    pub(crate) fn os(message: impl Into<String>) -> Self {
        Self::new(OS_ERROR, message)
    }

    pub(crate) fn io(message: impl Into<String>) -> Self {
        Self::new(IO_ERROR, message)
    }

    pub(crate) fn unavailable(message: impl Into<String>) -> Self {
        Self::new(UNAVAILABLE, message)
    }

    /// The same failure, its message prefixed with what was being done.
    pub(crate) fn context(self, doing: &str) -> Self {
        Self::new(self.code, format!("{doing}: {}", self.message))
    }

    /// A configuration error of the lock client: the node list is part of the command line
    /// (64); any other refused option combination is configuration (78).
    pub(crate) fn from_config(err: &redquorum::ConfigError) -> Self {
        use redquorum::ConfigError as C;
        let code = match err {
            C::NoNodes | C::InvalidUrl { .. } | C::DuplicateNode { .. } => USAGE,
            C::TlsNotEnabled { .. } => USAGE,
            _ => CONFIG,
        };
        Self::new(code, sentence(&err.to_string()))
    }

    /// A lock error: contention (75), no quorum (69), configuration (78), lost (76).
    pub(crate) fn from_lock(err: &redquorum::Error) -> Self {
        let code = if let redquorum::Error::Config(c) = err {
            return Self::from_config(c);
        } else if err.is_contended() {
            NOT_ACQUIRED
        } else if err.is_lost() {
            LOCK_LOST
        } else {
            UNAVAILABLE
        };
        Self::new(code, sentence(&err.to_string()))
    }

    /// Prints `redquorum: <message>` on one line of stderr and returns the exit code.
    pub(crate) fn report(&self) -> ExitCode {
        eprintln!("redquorum: {}", one_line(&self.message));
        ExitCode::from(self.code)
    }
}

/// Ends `message` with a full stop unless it already ends a sentence.
pub(crate) fn sentence(message: &str) -> String {
    let trimmed = message.trim_end();
    if trimmed.ends_with(['.', '!', '?']) {
        trimmed.to_owned()
    } else {
        format!("{trimmed}.")
    }
}

fn one_line(message: &str) -> String {
    message.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Reports a command-line parsing error as one line and exit code 64; `--help` and
/// `--version` print as usual and succeed.
pub(crate) fn usage_error(err: &clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    match err.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            let _ = err.print();
            ExitCode::from(OK)
        }
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = err.print();
            ExitCode::from(USAGE)
        }
        _ => {
            // clap's message, without its usage block and tips, on one line.
            let rendered = err.render().to_string();
            let message: Vec<&str> = rendered
                .lines()
                .map(str::trim)
                .take_while(|l| !l.starts_with("Usage:") && !l.starts_with("For more information"))
                .filter(|l| !l.is_empty() && !l.starts_with("tip:"))
                .collect();
            let message = message.join(" ");
            let message = message.strip_prefix("error:").unwrap_or(&message).trim();
            Failure::usage(format!(
                "{}; see `redquorum --help`.",
                message.trim_end_matches(['.', ':'])
            ))
            .report()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_become_one_sentence() {
        assert_eq!(sentence("no quorum"), "no quorum.");
        assert_eq!(sentence("done."), "done.");
        assert_eq!(one_line("a\n  b\tc"), "a b c");
    }
}
