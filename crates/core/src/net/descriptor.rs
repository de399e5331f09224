//! Descriptors passed between processes over a Unix socket (`SCM_RIGHTS`):
//! a stream handed to an instance's child process (`service::sandbox`),
//! a same-host channel's shared memory (`net::local`), a new child's wires
//! to the fork server (`service::sandbox::forks`).

use std::io::{self, Write};
use std::mem::{size_of, MaybeUninit};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;

/// Send `bytes`, the descriptors `fds` with the first of them.
pub fn send_with_fds(wire: &UnixStream, bytes: &[u8], fds: &[RawFd]) -> io::Result<()> {
    let mut iov = libc::iovec { iov_base: bytes.as_ptr() as *mut _, iov_len: bytes.len() };
    let mut control = vec![0u8; control_space(fds.len())];
    let msg = header(&mut iov, &mut control);
    // SAFETY: the control buffer has room for fds.len() descriptors (CMSG_SPACE),
    // so CMSG_FIRSTHDR is within it; msg points at buffers that outlive the call.
    let sent = unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(std::mem::size_of_val(fds) as u32) as _;
        std::ptr::copy_nonoverlapping(fds.as_ptr() as *const u8, libc::CMSG_DATA(cmsg), std::mem::size_of_val(fds));
        retrying(|| libc::sendmsg(wire.as_raw_fd(), &msg, libc::MSG_NOSIGNAL))?
    };
    // The descriptor went with the first byte; the rest is plain data.
    (&*wire).write_all(&bytes[sent..])
}

/// Read up to `buf.len()` bytes and the descriptor that came with them.
pub fn recv_with_fd(wire: &UnixStream, buf: &mut [u8]) -> io::Result<(usize, Option<OwnedFd>)> {
    let mut iov = libc::iovec { iov_base: buf.as_mut_ptr() as *mut _, iov_len: buf.len() };
    let mut control = vec![0u8; control_space(1)];
    let mut msg = header(&mut iov, &mut control);
    // SAFETY: msg points at buffers that outlive the call; a descriptor is
    // read only from a control message the kernel filled in.
    unsafe {
        let n = retrying(|| libc::recvmsg(wire.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC))?;
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        let fd = (!cmsg.is_null() && (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS)
            .then(|| OwnedFd::from_raw_fd(std::ptr::read_unaligned(libc::CMSG_DATA(cmsg) as *const RawFd)));
        Ok((n, fd))
    }
}

/// Room for `n` descriptors in a control message.
fn control_space(n: usize) -> usize {
    // SAFETY: a pure size computation.
    unsafe { libc::CMSG_SPACE((n * size_of::<RawFd>()) as u32) as usize }
}

/// A message header over one buffer, with a control buffer.
fn header(iov: &mut libc::iovec, control: &mut [u8]) -> libc::msghdr {
    // SAFETY: msghdr is plain data; all-zero is a valid empty header.
    let mut msg: libc::msghdr = unsafe { MaybeUninit::zeroed().assume_init() };
    msg.msg_iov = iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr() as *mut _;
    msg.msg_controllen = control.len() as _;
    msg
}

/// A system call's byte count, tried again when a signal interrupted it.
fn retrying(mut call: impl FnMut() -> isize) -> io::Result<usize> {
    loop {
        let r = call();
        if r >= 0 {
            return Ok(r as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}
