//! Why one member's vote failed: [`NodeFailure`], and the mapping of every redis error to it.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use redis::{ErrorKind, RedisError, Value};

/// Why one master's vote failed. A failure counts as a "no" and never aborts the round.
///
/// Failures that came from the redis client keep its [`RedisError`] as their
/// [`source`](std::error::Error::source); [`kind`](NodeFailure::kind) gives its
/// [`ErrorKind`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NodeFailure {
    /// No answer within `node_timeout`.
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    /// The connection could not be made or broke.
    #[error("connection failed: {0}")]
    Connection(#[source] Cause),
    /// The master refused our credentials (wrong password, unknown user, no permission).
    #[error("authentication failed: {0}")]
    Auth(#[source] Cause),
    /// The master answered with an error, such as `READONLY` (a replica), `OOM`,
    /// `WRONGTYPE` (the key is not a lock), `NOSCRIPT` or `BUSY`.
    #[error("server error {code}: {message}")]
    Server {
        /// The error code, such as `READONLY`.
        code: String,
        /// The rest of the server's message.
        message: String,
        /// The redis error behind it.
        #[source]
        cause: Cause,
    },
    /// The answer had a type the script never returns: the master is probably not Redis.
    #[error("unexpected reply: {0}")]
    UnexpectedReply(String),
    /// A key redquorum keeps for itself (the restart guard's epoch marker or ttl records, a
    /// fencing counter) holds data redquorum did not write; nothing was changed. Choose a
    /// [`key_prefix`](crate::RedlockBuilder::key_prefix) no application uses.
    #[error(
        "the key `{key}` holds data redquorum did not write, and was left alone; choose a key_prefix that no application uses"
    )]
    ForeignKey {
        /// The key.
        key: String,
    },
    /// A group's primary granted, but fewer replicas than asked for
    /// ([`wait_replicas`](crate::Group::wait_replicas)) acknowledged it in time.
    #[error(
        "only {acknowledged} of the {needed} replicas asked for acknowledged the grant in time"
    )]
    NotReplicated {
        /// Replicas that acknowledged.
        acknowledged: usize,
        /// Replicas asked for.
        needed: usize,
    },
    /// The master cannot run Lua scripts: the command (`EVALSHA`, `EVAL`, `SCRIPT`) is
    /// unknown (a server built without Lua, a `rename-command`) or denied by its ACL.
    /// redquorum needs scripting on every master; nothing else was tried there.
    #[error(
        "the server cannot run Lua scripts ({message}): redquorum needs EVAL, EVALSHA and SCRIPT; use a Redis or Valkey built with Lua and allow those commands (ACL, rename-command)"
    )]
    ScriptingUnavailable {
        /// The scripting command the server refused, lower case (`evalsha`, `eval`, `script`).
        command: String,
        /// What the server said.
        message: String,
    },
    /// The master granted, but its grants do not count for now: the restart guard keeps it
    /// out (it is new, restarted, or lost its data less than the deployment's longest ttl
    /// ago), or a strict health check found it unsafe (a misbehaving clock).
    #[error("quarantined: {reason}{}", .remaining.map_or_else(String::new, |r| format!(" ({r:?} left)")))]
    Quarantined {
        /// Why.
        reason: String,
        /// How long until its grants count again, when known.
        remaining: Option<Duration>,
    },
}

impl NodeFailure {
    /// True for [`NodeFailure::Timeout`].
    pub fn is_timeout(&self) -> bool {
        matches!(self, Self::Timeout(_))
    }

    /// True for [`NodeFailure::ScriptingUnavailable`]: the master cannot run scripts.
    pub fn is_scripting_unavailable(&self) -> bool {
        matches!(self, Self::ScriptingUnavailable { .. })
    }

    /// The kind of the redis error behind this failure, when there was one.
    pub fn kind(&self) -> Option<ErrorKind> {
        self.cause()?.kind()
    }

    /// The redis error behind this failure, when there was one.
    pub fn redis_error(&self) -> Option<&RedisError> {
        self.cause()?.redis_error()
    }

    fn cause(&self) -> Option<&Cause> {
        match self {
            Self::Connection(c) | Self::Auth(c) | Self::Server { cause: c, .. } => Some(c),
            _ => None,
        }
    }

    /// A connection failure with a message of ours (no redis error behind it).
    pub(crate) fn connection(message: impl Into<String>) -> Self {
        Self::Connection(Cause::from(message.into()))
    }
}

/// What lies under a [`NodeFailure`]: a message, and the redis error it came from, if any
/// (shared, so failures stay cheap to clone). Two causes are equal when their messages are.
#[derive(Debug, Clone)]
pub struct Cause {
    message: String,
    error: Option<Arc<RedisError>>,
}

impl Cause {
    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The redis error, when the failure came from the redis client.
    pub fn redis_error(&self) -> Option<&RedisError> {
        self.error.as_deref()
    }

    /// The kind of the redis error, when there is one.
    pub fn kind(&self) -> Option<ErrorKind> {
        self.error.as_ref().map(|e| e.kind())
    }
}

impl From<String> for Cause {
    fn from(message: String) -> Self {
        Self {
            message,
            error: None,
        }
    }
}

impl From<&str> for Cause {
    fn from(message: &str) -> Self {
        Self::from(message.to_owned())
    }
}

impl From<RedisError> for Cause {
    fn from(err: RedisError) -> Self {
        Self {
            message: err.to_string(),
            error: Some(Arc::new(err)),
        }
    }
}

impl PartialEq for Cause {
    fn eq(&self, other: &Self) -> bool {
        self.message == other.message
    }
}

impl Eq for Cause {}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Cause {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.error
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

/// The code a script uses to refuse a key that holds data redquorum did not write
/// (`REDQUORUM_FOREIGN <key>`).
pub(crate) const FOREIGN_CODE: &str = "REDQUORUM_FOREIGN";

/// Maps a redis error to the failure it means for this master's vote.
pub(crate) fn classify(err: RedisError) -> NodeFailure {
    // A pipeline's error carries its commands' server errors; the first one says why.
    let server = err.clone().into_server_errors().and_then(|errors| {
        errors.first().map(|(_, e)| {
            (
                e.code().to_owned(),
                e.details().unwrap_or_default().to_owned(),
            )
        })
    });
    let code = server.as_ref().map(|(code, _)| code.clone());
    if let Some((code, details)) = &server
        && let Some(command) = scripting_refused(code, details)
    {
        return NodeFailure::ScriptingUnavailable {
            command,
            message: format!("{code} {details}"),
        };
    }
    if err.kind() == ErrorKind::AuthenticationFailed
        || matches!(code.as_deref(), Some("WRONGPASS" | "NOAUTH" | "NOPERM"))
    {
        return NodeFailure::Auth(err.into());
    }
    if err.is_timeout() {
        let message = format!("timed out: {err}");
        return NodeFailure::Connection(Cause {
            message,
            error: Some(Arc::new(err)),
        });
    }
    if let Some((code, message)) = server {
        if code == FOREIGN_CODE {
            return NodeFailure::ForeignKey {
                key: message.trim().to_owned(),
            };
        }
        return NodeFailure::Server {
            code,
            message,
            cause: err.into(),
        };
    }
    match err.kind() {
        ErrorKind::Parse | ErrorKind::UnexpectedReturnType => {
            NodeFailure::UnexpectedReply(err.to_string())
        }
        _ => NodeFailure::Connection(err.into()),
    }
}

/// The scripting command a server error refuses, if it is one: `ERR unknown command
/// 'evalsha'` (no Lua, or renamed away) or `NOPERM … the 'eval' command` (an ACL). Decided on
/// the error, never on `redis_version` (Valkey reports 7.2.4 whatever it supports).
fn scripting_refused(code: &str, details: &str) -> Option<String> {
    const SCRIPTING: [&str; 6] = [
        "evalsha",
        "eval",
        "evalsha_ro",
        "eval_ro",
        "script",
        "fcall",
    ];
    let lower = details.to_ascii_lowercase();
    let refused = (code == "ERR" && lower.starts_with("unknown command"))
        || (code == "NOPERM" && lower.contains("command"));
    if !refused {
        return None;
    }
    // The command is the first quoted word: 'evalsha' or `evalsha` (servers differ).
    let quoted = lower
        .split(['\'', '`'])
        .nth(1)?
        .split(['|', ' '])
        .next()?
        .to_owned();
    SCRIPTING.contains(&quoted.as_str()).then_some(quoted)
}

/// A reply of a type the call never returns, summarised (at most 80 bytes, cut on a
/// character boundary: replies may hold any bytes).
pub(crate) fn unexpected(value: &Value) -> NodeFailure {
    let mut shown = format!("{value:?}");
    if shown.len() > 80 {
        let mut end = 80;
        while !shown.is_char_boundary(end) {
            end -= 1;
        }
        shown.truncate(end);
    }
    NodeFailure::UnexpectedReply(shown)
}

/// A reply as text, for replies that are strings or numbers.
pub(crate) fn text_of(value: &Value) -> String {
    match value {
        Value::BulkString(bytes) => String::from_utf8_lossy(bytes).into_owned(),
        Value::SimpleString(s) => s.clone(),
        Value::VerbatimString { text, .. } => text.clone(),
        Value::Int(n) => n.to_string(),
        other => format!("{other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unexpected_replies_are_cut_on_a_character_boundary() {
        let reply = Value::SimpleString("é".repeat(100));
        let NodeFailure::UnexpectedReply(shown) = unexpected(&reply) else {
            panic!("not an unexpected reply");
        };
        assert!(shown.len() <= 80 && shown.len() > 70, "{shown}");
        assert!(shown.contains('é'), "{shown}");
    }

    #[test]
    fn scripting_refusals_are_recognised_by_the_error_not_the_version() {
        let cases = [
            (
                "ERR",
                "unknown command 'evalsha', with args beginning with: 'abc' '1'",
                Some("evalsha"),
            ),
            (
                "ERR",
                "unknown command `EVAL`, with args beginning with: ",
                Some("eval"),
            ),
            (
                "NOPERM",
                "User app has no permissions to run the 'evalsha' command",
                Some("evalsha"),
            ),
            (
                "NOPERM",
                "this user has no permissions to run the 'script|load' command",
                Some("script"),
            ),
            (
                "ERR",
                "unknown command 'getdel', with args beginning with: ",
                None,
            ),
            (
                "NOPERM",
                "this user has no permissions to access one of the keys",
                None,
            ),
            ("ERR", "Error running script", None),
        ];
        for (code, details, want) in cases {
            assert_eq!(
                scripting_refused(code, details).as_deref(),
                want,
                "{code} {details}"
            );
        }
    }

    #[test]
    fn redis_errors_stay_reachable_as_the_source() {
        use std::error::Error as _;
        let err = RedisError::from(std::io::Error::new(
            std::io::ErrorKind::ConnectionReset,
            "reset by peer",
        ));
        let failure = classify(err);
        assert!(matches!(failure, NodeFailure::Connection(_)), "{failure:?}");
        assert_eq!(failure.kind(), Some(ErrorKind::Io));
        let source = failure.source().expect("a cause");
        assert!(
            source.source().is_some(),
            "the redis error is under the cause"
        );
        assert!(failure.redis_error().is_some());
    }
}
