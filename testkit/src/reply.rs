//! `Reply`: a Redis reply in a form that is easy to assert on in tests.

/// One Redis reply (RESP2, plus the RESP3 null).
///
/// Binary bulk strings are converted to text lossily; the test kit is for assertions, not
/// for round-tripping arbitrary bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// A null bulk string or null array (`GET` of a missing key).
    Nil,
    /// An integer reply (`:`).
    Int(i64),
    /// A bulk string (`$`).
    Bulk(String),
    /// A simple string (`+OK`, `+PONG`).
    Simple(String),
    /// An array of replies (`*`).
    Array(Vec<Reply>),
    /// An error reply (`-ERR ...`), without the leading `-`.
    Error(String),
}

impl Reply {
    /// The integer value: an `Int`, or a `Bulk`/`Simple` string that parses as an `i64`
    /// (as the elements of `TIME` do).
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Self::Int(i) => Some(*i),
            Self::Bulk(s) | Self::Simple(s) => s.trim().parse().ok(),
            _ => None,
        }
    }

    /// The text of a `Bulk` or `Simple` string.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Self::Bulk(s) | Self::Simple(s) => Some(s),
            _ => None,
        }
    }

    /// The elements of an `Array`.
    pub fn as_array(&self) -> Option<&[Reply]> {
        match self {
            Self::Array(items) => Some(items),
            _ => None,
        }
    }

    /// True for `Nil`.
    pub fn is_nil(&self) -> bool {
        matches!(self, Self::Nil)
    }

    /// The message of an `Error`.
    pub fn as_error(&self) -> Option<&str> {
        match self {
            Self::Error(e) => Some(e),
            _ => None,
        }
    }

    /// One `field:value` line of an `INFO` reply, e.g. `info_field("process_id")`.
    pub fn info_field(&self, field: &str) -> Option<&str> {
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
        assert_eq!(Reply::Int(3).as_int(), Some(3));
        assert_eq!(Reply::Bulk("42".into()).as_int(), Some(42));
        assert_eq!(Reply::Simple("OK".into()).as_str(), Some("OK"));
        assert!(Reply::Nil.is_nil());
        assert_eq!(Reply::Error("ERR x".into()).as_error(), Some("ERR x"));
        let info = Reply::Bulk("# Server\r\nprocess_id:123\r\ntcp_port:7\r\n".into());
        assert_eq!(info.info_field("process_id"), Some("123"));
        assert_eq!(info.info_field("missing"), None);
    }
}
