//! Building the clock shim (`shim.c`) into a shared object, once per process.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use crate::TestkitError;
use crate::locate::c_compiler;

/// The shim's C source, compiled at run time with the system C compiler.
const SHIM_SOURCE: &str = include_str!("shim.c");

/// The path of the compiled shim, building it on first use.
///
/// The result (success or failure) is computed once per process. The shared object is
/// cached in a per-user directory under the system temporary directory, named after a hash
/// of the source, so concurrent test binaries reuse it; it is written to a unique name and
/// renamed into place, so nobody ever loads a half-written file.
pub(crate) fn shim_library() -> Result<PathBuf, TestkitError> {
    static SHIM: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    match SHIM.get_or_init(|| build().map_err(|e| e.to_string())) {
        Ok(path) => Ok(path.clone()),
        Err(message) => Err(TestkitError::ShimCompile {
            compiler: c_compiler().unwrap_or_else(|_| PathBuf::from("cc")),
            stderr: message.clone(),
        }),
    }
}

fn build() -> Result<PathBuf, TestkitError> {
    let compiler = c_compiler()?;
    let mut hasher = DefaultHasher::new();
    SHIM_SOURCE.hash(&mut hasher);
    let uid = current_uid()?;
    let dir = std::env::temp_dir().join(format!(
        "redquorum-testkit-shim-{uid}-{:016x}",
        hasher.finish()
    ));
    private_dir(&dir)?;
    let library = dir.join("clock-shim.so");
    if library.is_file() {
        return Ok(library);
    }
    let unique = format!("{}-{:?}", std::process::id(), std::thread::current().id());
    let unique: String = unique.chars().filter(char::is_ascii_alphanumeric).collect();
    let source = dir.join(format!("shim-{unique}.c"));
    let partial = dir.join(format!("clock-shim-{unique}.so.partial"));
    std::fs::write(&source, SHIM_SOURCE)
        .map_err(|e| TestkitError::os(format!("writing {}", source.display()), e))?;
    let output = Command::new(&compiler)
        .args(["-shared", "-fPIC", "-O2", "-o"])
        .arg(&partial)
        .arg(&source)
        .output()
        .map_err(|e| TestkitError::os(format!("running {}", compiler.display()), e))?;
    let _ = std::fs::remove_file(&source);
    if !output.status.success() {
        let _ = std::fs::remove_file(&partial);
        return Err(TestkitError::ShimCompile {
            compiler,
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        });
    }
    std::fs::rename(&partial, &library)
        .map_err(|e| TestkitError::os(format!("renaming into {}", library.display()), e))?;
    Ok(library)
}

/// Creates `dir` readable only by us, or checks that an existing one is ours and not
/// writable by others: a shared temporary directory must not let another user plant the
/// library we preload into redis-server.
fn private_dir(dir: &Path) -> Result<(), TestkitError> {
    let what = || format!("preparing the shim cache directory {}", dir.display());
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => return Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(TestkitError::os(what(), e)),
    }
    let meta = std::fs::symlink_metadata(dir).map_err(|e| TestkitError::os(what(), e))?;
    let ours = meta.is_dir() && meta.uid() == current_uid()?;
    if ours && meta.permissions().mode() & 0o022 == 0 {
        Ok(())
    } else {
        Err(TestkitError::os(
            what(),
            std::io::Error::other("it exists but is not a private directory owned by this user"),
        ))
    }
}

/// Our effective uid: `/proc/self` is owned by it (this avoids an `unsafe` libc call).
fn current_uid() -> Result<u32, TestkitError> {
    std::fs::metadata("/proc/self")
        .map(|m| m.uid())
        .map_err(|e| TestkitError::os("reading /proc/self to learn our uid", e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_once_and_reuses_the_library() -> Result<(), TestkitError> {
        let first = shim_library()?;
        let second = shim_library()?;
        assert_eq!(first, second);
        assert!(first.is_file());
        Ok(())
    }
}
