//! Finding the external programs the test kit runs: `redis-server`, a C compiler, and
//! `openssl` for TLS certificates.

use std::ffi::OsStr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::TestkitError;

/// Environment variable naming the `redis-server` binary to run.
pub const REDIS_SERVER_ENV: &str = "REDQUORUM_REDIS_SERVER";

/// The `redis-server` to run: `explicit` if given, else `$REDQUORUM_REDIS_SERVER`, else
/// `redis-server` on `PATH`.
pub(crate) fn redis_server(explicit: Option<&Path>) -> Result<PathBuf, TestkitError> {
    if let Some(path) = explicit {
        return checked(path, || {
            format!("the configured path {} does not exist", path.display())
        });
    }
    if let Some(path) = std::env::var_os(REDIS_SERVER_ENV).filter(|p| !p.is_empty()) {
        let path = PathBuf::from(path);
        return checked(&path, || {
            format!(
                "{REDIS_SERVER_ENV}={} is not an executable file",
                path.display()
            )
        });
    }
    on_path(OsStr::new("redis-server")).ok_or_else(|| TestkitError::RedisServerNotFound {
        searched: "it is not on PATH and REDQUORUM_REDIS_SERVER is not set".to_owned(),
    })
}

/// Environment variable naming the `openssl` program that generates TLS certificates.
pub const OPENSSL_ENV: &str = "REDQUORUM_OPENSSL";

/// The `openssl` command-line program: `$REDQUORUM_OPENSSL` if set, else `openssl` on
/// `PATH`. A missing program is an I/O error of kind `NotFound` that says how to install it.
pub(crate) fn openssl() -> Result<PathBuf, TestkitError> {
    let not_found = |why: String| {
        TestkitError::os(
            "looking for the openssl program to generate TLS certificates",
            std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("{why}; install it with `apt-get install -y openssl` or set {OPENSSL_ENV}"),
            ),
        )
    };
    if let Some(path) = std::env::var_os(OPENSSL_ENV).filter(|p| !p.is_empty()) {
        let path = PathBuf::from(path);
        return if is_executable(&path) {
            Ok(path)
        } else {
            Err(not_found(format!(
                "{OPENSSL_ENV}={} is not an executable file",
                path.display()
            )))
        };
    }
    on_path(OsStr::new("openssl")).ok_or_else(|| not_found("it is not on PATH".to_owned()))
}

/// The C compiler to build the clock shim with: `$CC`, else `cc`, else `gcc` on `PATH`.
pub(crate) fn c_compiler() -> Result<PathBuf, TestkitError> {
    if let Some(cc) = std::env::var_os("CC").filter(|c| !c.is_empty()) {
        let cc = PathBuf::from(cc);
        if cc.components().count() > 1 {
            return is_executable(&cc)
                .then_some(cc)
                .ok_or(TestkitError::CompilerNotFound);
        }
        if let Some(found) = on_path(cc.as_os_str()) {
            return Ok(found);
        }
    }
    ["cc", "gcc"]
        .iter()
        .find_map(|name| on_path(OsStr::new(name)))
        .ok_or(TestkitError::CompilerNotFound)
}

fn checked(path: &Path, why: impl FnOnce() -> String) -> Result<PathBuf, TestkitError> {
    if is_executable(path) {
        Ok(path.to_path_buf())
    } else {
        Err(TestkitError::RedisServerNotFound { searched: why() })
    }
}

/// The first executable file called `name` in a `PATH` directory.
fn on_path(name: &OsStr) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_sh_on_path() {
        assert!(on_path(OsStr::new("sh")).is_some());
        assert!(on_path(OsStr::new("surely-not-a-program-xyz")).is_none());
    }
}
