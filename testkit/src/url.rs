//! Building the `redis://[:password@]127.0.0.1:PORT` URLs the test kit hands out (and the
//! `rediss://` URLs of its TLS servers); redis-rs reads them.

use std::fmt::Write as _;

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redis_rs_reads_back_a_password_with_special_characters() -> Result<(), redis::RedisError> {
        use redis::IntoConnectionInfo;
        let url = redis_url(6390, Some("p@ss:w/rd %"));
        assert_eq!(url, "redis://:p%40ss%3Aw%2Frd%20%25@127.0.0.1:6390");
        let info = url.as_str().into_connection_info()?;
        assert_eq!(info.redis_settings().password(), Some("p@ss:w/rd %"));
        assert_eq!(info.redis_settings().username(), None);
        assert_eq!(info.addr().to_string(), "127.0.0.1:6390");
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
