//! Granted directories, opened once when a plugin version's settings are made, following
//! no symbolic link in any component, and handed to every instance as that open directory:
//! a plugin that swaps a directory for a link cannot redirect a grant made before.

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use crate::config::DirGrant;

/// One grant and the directory it names, as opened at load.
#[derive(Debug, Clone)]
pub struct GrantedDir {
    pub grant: DirGrant,
    opened: Result<Arc<OwnedFd>, String>,
}

impl GrantedDir {
    /// Opens `grant.host` (absolute and canonical, as the config made it) without
    /// following links; a failure is kept and reported by each instance that needs it.
    pub fn open(grant: &DirGrant) -> GrantedDir {
        let opened = open_no_follow(&grant.host).map(Arc::new).map_err(|e| {
            if e.raw_os_error() == Some(libc::ELOOP) || e.raw_os_error() == Some(libc::ENOTDIR) {
                format!(
                    "cannot open granted directory {}: a component of the path is no longer a \
                     directory (a symbolic link put in its place is not followed)",
                    grant.host.display()
                )
            } else {
                format!(
                    "cannot open granted directory {}: {e}",
                    grant.host.display()
                )
            }
        });
        GrantedDir {
            grant: grant.clone(),
            opened,
        }
    }

    /// A path that opens exactly the directory opened at load, whatever has been renamed or
    /// replaced since: the process's own link to its descriptor.
    pub fn instance_path(&self) -> Result<PathBuf, String> {
        match &self.opened {
            Ok(fd) => Ok(PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()))),
            Err(why) => Err(why.clone()),
        }
    }
}

/// Opens the directory at the absolute `path` one component at a time, refusing a symbolic
/// link anywhere (`O_NOFOLLOW` on each step), as an `O_PATH` descriptor.
pub fn open_no_follow(path: &Path) -> std::io::Result<OwnedFd> {
    use std::os::fd::FromRawFd;
    let flags = libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    let open_at = |dir: libc::c_int, name: &std::ffi::CStr| -> std::io::Result<OwnedFd> {
        // SAFETY: `name` is a valid C string and `dir` an open descriptor or AT_FDCWD.
        let fd = unsafe { libc::openat(dir, name.as_ptr(), flags) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `fd` was just returned by openat and is owned by no one else.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    };
    if !path.is_absolute() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not an absolute path",
        ));
    }
    let mut dir = open_at(libc::AT_FDCWD, c"/")?;
    for component in path.components() {
        match component {
            Component::RootDir => {}
            Component::Normal(name) => {
                use std::os::unix::ffi::OsStrExt;
                let name = std::ffi::CString::new(name.as_bytes()).map_err(|_| {
                    std::io::Error::new(std::io::ErrorKind::InvalidInput, "NUL in path")
                })?;
                dir = open_at(dir.as_raw_fd(), &name)?;
            }
            // The config's paths are canonical: `..` or `.` would mean a path made elsewhere.
            _ => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    "the path is not canonical",
                ));
            }
        }
    }
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::{GrantedDir, open_no_follow};
    use crate::config::DirGrant;
    use crate::test_support::TempDir;

    /// A link in any component is refused; the grant opened before a swap keeps naming the
    /// directory it opened, not what the path names now.
    #[test]
    fn links_are_not_followed_and_a_grant_outlives_a_swap() {
        let tmp = TempDir::new("wasmgate-grants-");
        let root = tmp.path().canonicalize().unwrap();
        let real = root.join("real");
        std::fs::create_dir_all(real.join("sub")).unwrap();
        std::fs::write(real.join("sub/inside.txt"), "inside").unwrap();
        let secret = root.join("secret");
        std::fs::create_dir_all(&secret).unwrap();
        std::fs::write(secret.join("key.txt"), "secret").unwrap();
        std::os::unix::fs::symlink(&real, root.join("link")).unwrap();
        assert!(open_no_follow(&root.join("link/sub")).is_err());
        assert!(open_no_follow(&root.join("link")).is_err());
        assert!(open_no_follow(&real.join("sub")).is_ok());

        let granted = GrantedDir::open(&DirGrant {
            host: real.join("sub"),
            guest: "/sub".into(),
            read_only: true,
            expose_gateway_files: false,
        });
        let path = granted.instance_path().unwrap();
        // The attack: the directory moves away and a link to the secret takes its place.
        std::fs::rename(real.join("sub"), real.join("moved")).unwrap();
        std::os::unix::fs::symlink(&secret, real.join("sub")).unwrap();
        assert_eq!(
            std::fs::read_to_string(path.join("inside.txt")).unwrap(),
            "inside"
        );
        assert!(!path.join("key.txt").exists());
        // Opened again now, the grant is refused rather than following the link.
        let again = GrantedDir::open(&granted.grant);
        let why = again.instance_path().unwrap_err();
        assert!(why.contains("symbolic link"), "{why}");
    }
}
