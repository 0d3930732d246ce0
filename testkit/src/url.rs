//! Building and reading the `redis://[:password@]127.0.0.1:PORT` URLs the test kit hands out
//! (and building the `rediss://` URLs of its TLS servers).

use std::fmt::Write as _;

use crate::TestkitError;

/// The URL of a server on loopback, with the password (percent-encoded) if there is one.
pub(crate) fn redis_url(port: u16, password: Option<&str>) -> String {
    match password {
        Some(pw) => format!("redis://:{}@127.0.0.1:{port}", encode(pw)),
        None => format!("redis://127.0.0.1:{port}"),
    }
}

/// A `rediss://` (TLS) URL of a server on loopback, with the user name and password
/// (percent-encoded) when given: `rediss://user:password@127.0.0.1:PORT`.
pub(crate) fn rediss_url(port: u16, user: Option<&str>, password: Option<&str>) -> String {
    match (user, password) {
        (Some(user), Some(pw)) => {
            format!("rediss://{}:{}@127.0.0.1:{port}", encode(user), encode(pw))
        }
        (None, Some(pw)) => format!("rediss://:{}@127.0.0.1:{port}", encode(pw)),
        (Some(user), None) => format!("rediss://{}@127.0.0.1:{port}", encode(user)),
        (None, None) => format!("rediss://127.0.0.1:{port}"),
    }
}

/// The parts of a URL the test kit understands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ParsedUrl {
    pub(crate) host: String,
    pub(crate) port: u16,
    pub(crate) username: Option<String>,
    pub(crate) password: Option<String>,
}

/// Parses `redis://[[user]:password@]host:port[/db]`; `db` is ignored.
pub(crate) fn parse(url: &str) -> Result<ParsedUrl, TestkitError> {
    let bad = || TestkitError::InvalidUrl { url: redact(url) };
    let rest = url.strip_prefix("redis://").ok_or_else(bad)?;
    let authority = rest.split('/').next().unwrap_or(rest);
    let (userinfo, hostport) = match authority.rsplit_once('@') {
        Some((userinfo, hostport)) => (Some(userinfo), hostport),
        None => (None, authority),
    };
    let (host, port) = hostport.rsplit_once(':').ok_or_else(bad)?;
    let port = port.parse().map_err(|_| bad())?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() {
        return Err(bad());
    }
    let (username, password) = match userinfo {
        None => (None, None),
        Some(info) => match info.split_once(':') {
            Some((user, pw)) => (
                Some(decode(user)).filter(|u| !u.is_empty()),
                Some(decode(pw)),
            ),
            None => (Some(decode(info)).filter(|u| !u.is_empty()), None),
        },
    };
    Ok(ParsedUrl {
        host: host.to_owned(),
        port,
        username,
        password,
    })
}

/// The URL with any password replaced by `***`, safe to print.
pub(crate) fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme_end), Some(at)) if at > scheme_end => {
            let userinfo = &url[scheme_end + 3..at];
            let user = userinfo.split(':').next().unwrap_or("");
            format!("{}{user}:***{}", &url[..scheme_end + 3], &url[at..])
        }
        _ => url.to_owned(),
    }
}

/// Percent-encodes everything but RFC 3986 unreserved characters.
fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(v)) => {
                out.push(v);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_a_password_with_special_characters() -> Result<(), TestkitError> {
        let url = redis_url(6390, Some("p@ss:w/rd %"));
        assert_eq!(url, "redis://:p%40ss%3Aw%2Frd%20%25@127.0.0.1:6390");
        let parsed = parse(&url)?;
        assert_eq!(parsed.password.as_deref(), Some("p@ss:w/rd %"));
        assert_eq!(parsed.port, 6390);
        assert_eq!(parsed.host, "127.0.0.1");
        assert_eq!(parsed.username, None);
        Ok(())
    }

    #[test]
    fn parses_plain_urls_and_rejects_others() -> Result<(), TestkitError> {
        let parsed = parse("redis://localhost:7/0")?;
        assert_eq!((parsed.host.as_str(), parsed.port), ("localhost", 7));
        assert_eq!(parsed.password, None);
        assert!(parse("http://x:1").is_err());
        assert!(parse("redis://x").is_err());
        Ok(())
    }

    #[test]
    fn builds_tls_urls_with_a_user() {
        assert_eq!(
            rediss_url(7, Some("al ice"), Some("p@ss")),
            "rediss://al%20ice:p%40ss@127.0.0.1:7"
        );
        assert_eq!(rediss_url(7, None, Some("pw")), "rediss://:pw@127.0.0.1:7");
        assert_eq!(rediss_url(7, None, None), "rediss://127.0.0.1:7");
    }

    #[test]
    fn redacts_passwords() {
        assert_eq!(redact("redis://:pw@h:1"), "redis://:***@h:1");
        assert_eq!(redact("redis://h:1"), "redis://h:1");
    }
}
