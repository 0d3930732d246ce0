//! `ReplyExt`: what tests ask of a reply (redis-rs's `Value`), in one line each.
//!
//! redis-rs's conversions (`FromRedisValue`) are strict and fallible, which is right for a
//! client and noisy in an assertion; these accessors answer `None` instead, read a number
//! from a string as `TIME` sends it, and read one field of an `INFO` text.

use redis::{ServerError, Value};

/// Accessors on a [`Value`] for assertions and for the kit's own waits.
///
/// ```
/// use redis::Value;
/// use redquorum_testkit::ReplyExt;
///
/// assert_eq!(Value::Okay.as_str(), Some("OK"));
/// assert_eq!(Value::BulkString(b"42".to_vec()).as_int(), Some(42));
/// let info = Value::BulkString(b"# Server\r\nprocess_id:123\r\n".to_vec());
/// assert_eq!(info.info_field("process_id"), Some("123"));
/// ```
pub trait ReplyExt {
    /// The text of a string reply (`+OK` included, as `"OK"`); `None` for other kinds and
    /// for bulk strings that are not UTF-8.
    fn as_str(&self) -> Option<&str>;

    /// The integer value: an integer reply, or a string reply that parses as an `i64` (as
    /// the elements of `TIME` do).
    fn as_int(&self) -> Option<i64>;

    /// The error of an error reply (`code()` is e.g. `"NOAUTH"`, `"MOVED"`).
    fn as_error(&self) -> Option<&ServerError>;

    /// One `field:value` line of an `INFO` reply, e.g. `info_field("process_id")`.
    fn info_field(&self, field: &str) -> Option<&str>;
}

impl ReplyExt for Value {
    fn as_str(&self) -> Option<&str> {
        match self {
            Value::Okay => Some("OK"),
            Value::SimpleString(s) => Some(s),
            Value::BulkString(bytes) => std::str::from_utf8(bytes).ok(),
            Value::VerbatimString { text, .. } => Some(text),
            _ => None,
        }
    }

    fn as_int(&self) -> Option<i64> {
        match self {
            Value::Int(i) => Some(*i),
            other => other.as_str()?.trim().parse().ok(),
        }
    }

    fn as_error(&self) -> Option<&ServerError> {
        match self {
            Value::ServerError(e) => Some(e),
            _ => None,
        }
    }

    fn info_field(&self, field: &str) -> Option<&str> {
        self.as_str()?.lines().find_map(|line| {
            let (name, value) = line.split_once(':')?;
            (name == field).then(|| value.trim())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accessors() {
        assert_eq!(Value::Int(3).as_int(), Some(3));
        assert_eq!(Value::BulkString(b"42".to_vec()).as_int(), Some(42));
        assert_eq!(Value::SimpleString("PONG".into()).as_str(), Some("PONG"));
        assert_eq!(Value::Okay.as_str(), Some("OK"));
        assert_eq!(Value::BulkString(vec![0xff]).as_str(), None);
        assert_eq!(Value::Nil.as_str(), None);
        let info = Value::BulkString(b"# Server\r\nprocess_id:123\r\ntcp_port:7\r\n".to_vec());
        assert_eq!(info.info_field("process_id"), Some("123"));
        assert_eq!(info.info_field("missing"), None);
    }
}
