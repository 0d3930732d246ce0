//! Node URLs: parsing without I/O, and redaction of passwords for messages and logs.

use redis::{Client, ErrorKind};

use crate::error::ConfigError;

/// `url` with the password of its userinfo (if any) replaced by `***`: how redquorum shows
/// node URLs in messages, logs and `Debug` output.
///
/// `redis://user:secret@host:6379/0` becomes `redis://user:***@host:6379/0`; a URL that
/// cannot be split is returned whole only when it has no `@` (otherwise everything before
/// the `@` is hidden).
///
/// ```
/// assert_eq!(
///     redquorum::redact_url("redis://app:hunter2@10.0.0.1:6379/0"),
///     "redis://app:***@10.0.0.1:6379/0"
/// );
/// ```
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return match url.rsplit_once('@') {
            Some((_, host)) => format!("***@{host}"),
            None => url.to_owned(),
        };
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let (authority, path) = rest.split_at(authority_end);
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => {
            let user = userinfo.split_once(':').map_or("", |(user, _)| user);
            if userinfo.contains(':') {
                format!("{scheme}://{user}:***@{host}{path}")
            } else {
                // `redis://password@host` is read as a bare password by some clients.
                format!("{scheme}://***@{host}{path}")
            }
        }
        None => url.to_owned(),
    }
}

/// Parses node `index`'s URL into a client (no I/O).
pub(crate) fn parse(index: usize, url: &str) -> Result<Client, ConfigError> {
    let shown = redact(url);
    match Client::open(url) {
        Ok(client) => Ok(client),
        Err(err)
            if err.kind() == ErrorKind::InvalidClientConfig
                && err.to_string().contains("TLS")
                && url.starts_with("rediss://") =>
        {
            Err(ConfigError::TlsNotEnabled { index, url: shown })
        }
        Err(err) => {
            let mut reason = err.to_string();
            if let Some(secret) = password_of(url) {
                reason = reason.replace(secret, "***");
            }
            Err(ConfigError::InvalidUrl {
                index,
                url: shown,
                reason,
            })
        }
    }
}

fn password_of(url: &str) -> Option<&str> {
    let rest = url.split_once("://")?.1;
    let authority = &rest[..rest.find('/').unwrap_or(rest.len())];
    let userinfo = authority.rsplit_once('@')?.0;
    let password = userinfo.split_once(':').map_or(userinfo, |(_, p)| p);
    (!password.is_empty()).then_some(password)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_redacted() {
        assert_eq!(
            redact("redis://user:hunter2@db:6379/1"),
            "redis://user:***@db:6379/1"
        );
        assert_eq!(redact("redis://:hunter2@db:6379"), "redis://:***@db:6379");
        assert_eq!(redact("redis://hunter2@db"), "redis://***@db");
        assert_eq!(redact("redis://db:6379"), "redis://db:6379");
        assert_eq!(redact("hunter2@db"), "***@db");
    }

    #[test]
    fn malformed_urls_are_reported_by_index_without_the_password() {
        let err = parse(3, "redis://:hunter2@").expect_err("no host");
        match &err {
            ConfigError::InvalidUrl { index, url, .. } => {
                assert_eq!(*index, 3);
                assert!(!url.contains("hunter2"));
            }
            other => panic!("unexpected {other:?}"),
        }
        assert!(!err.to_string().contains("hunter2"));
        assert!(matches!(
            parse(0, "http://example.com"),
            Err(ConfigError::InvalidUrl { index: 0, .. })
        ));
    }

    #[cfg(not(feature = "tls-rustls"))]
    #[test]
    fn tls_urls_need_the_feature() {
        assert!(matches!(
            parse(1, "rediss://db:6380"),
            Err(ConfigError::TlsNotEnabled { index: 1, .. })
        ));
    }
}
