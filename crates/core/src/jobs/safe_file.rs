//! Opening the files of jobs and uploads without trusting what a job left
//! in its directory: a program runs there and may replace any of its files
//! with a symlink (to `/etc/shadow`, say) or a FIFO. So a file is read only
//! through `O_NOFOLLOW` and only if it is a regular file; sizes are taken
//! without following links; new files are created exclusively; and a name
//! is one plain component, so it never leads out of its directory.

use std::fs::Metadata;
use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Component, Path, PathBuf};

/// `name` inside `dir`, if `name` is one plain path component (no `/`,
/// `.`, `..`): what a job's or an upload's file may be called.
pub fn inside(dir: &Path, name: &str) -> Option<PathBuf> {
    let mut parts = Path::new(name).components();
    match (parts.next(), parts.next()) {
        (Some(Component::Normal(_)), None) => Some(dir.join(name)),
        _ => None,
    }
}

/// Open `path` for reading if it is a regular file, never through a
/// symlink and without blocking on a FIFO.
pub async fn open_regular(path: &Path) -> io::Result<(tokio::fs::File, Metadata)> {
    let file =
        tokio::fs::OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC).open(path).await?;
    let meta = file.metadata().await?;
    if !meta.is_file() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("{} is not a regular file", path.display())));
    }
    Ok((file, meta))
}

/// Create `path` for writing; it must not exist (not even as a symlink).
pub async fn create_new(path: &Path) -> io::Result<tokio::fs::File> {
    tokio::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC).open(path).await
}

/// The size of a regular file at `path`, not following a symlink.
pub fn size_of(path: &Path) -> Option<u64> {
    std::fs::symlink_metadata(path).ok().filter(|m| m.is_file()).map(|m| m.len())
}

/// Make directory `path`, private to this user; it must not exist yet.
pub fn make_private_dir(path: &Path) -> io::Result<()> {
    std::fs::DirBuilder::new().mode(0o700).create(path)
}

/// The bytes the regular files under `dir` hold (links are not followed,
/// so nothing outside `dir` is counted).
pub fn bytes_under(dir: &Path) -> u64 {
    let mut total = 0u64;
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for entry in entries.flatten() {
            match entry.metadata() {
                Ok(m) if m.is_dir() => todo.push(entry.path()),
                Ok(m) if m.is_file() => total = total.saturating_add(m.len()),
                _ => {}
            }
        }
    }
    total
}

/// Open `rel` (a path of plain components, `a/b/c`) under the trusted
/// directory `root` for reading, if it is a regular file: each directory on
/// the way is opened with `openat(O_NOFOLLOW)`, so a job that swaps one of
/// them for a symlink (even while it is read) leads nowhere outside.
pub fn open_beneath(root: &Path, rel: &str) -> io::Result<std::fs::File> {
    use std::ffi::CString;
    use std::os::unix::io::{AsRawFd, FromRawFd};
    let parts: Vec<&str> = rel.split('/').collect();
    if parts.iter().any(|p| p.is_empty() || *p == "." || *p == "..") {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("{rel:?} is not a path of plain names")));
    }
    let open_at = |dir: &std::fs::File, name: &str, flags: libc::c_int| -> io::Result<std::fs::File> {
        let name = CString::new(name).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte in a file name"))?;
        // SAFETY: a valid directory descriptor and a NUL-terminated name; the new descriptor is owned by the File.
        let fd = unsafe { libc::openat(dir.as_raw_fd(), name.as_ptr(), flags | libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(unsafe { std::fs::File::from_raw_fd(fd) })
    };
    let mut dir = std::fs::File::open(root)?;
    for p in &parts[..parts.len() - 1] {
        dir = open_at(&dir, p, libc::O_DIRECTORY)?;
    }
    let file = open_at(&dir, parts[parts.len() - 1], libc::O_NONBLOCK)?;
    if !file.metadata()?.is_file() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("{rel} is not a regular file")));
    }
    Ok(file)
}
