//! The socket a stream's frames cross: a TCP connection to the peer
//! (cleartext), a TLS session its threads encrypt and decrypt themselves
//! (`net::tls_socket`), one end of a local socket pair whose other end a
//! task pumps through a TLS session it cannot take over (`net::pump`: a
//! tunnel's, or one handed to an instance's process), or a same-host
//! stream's rings (`net::local`). Frame code
//! needs only what both have: a raw fd (polled reads and writes, epoll),
//! `try_clone` (reader and writer threads), `shutdown`, blocking mode.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;

use crate::net::local::LocalSocket;
use crate::net::tls_socket::TlsSocket;

pub enum Socket {
    Tcp(TcpStream),
    /// TLS over TCP, with no pump.
    Tls(TlsSocket),
    /// Local end of a pair pumped through TLS.
    Pumped(UnixStream),
    /// A same-host stream: shared-memory rings (`net::local`).
    Local(LocalSocket),
}

impl Socket {
    pub fn try_clone(&self) -> io::Result<Socket> {
        Ok(match self {
            Socket::Tcp(s) => Socket::Tcp(s.try_clone()?),
            Socket::Tls(s) => Socket::Tls(s.try_clone()?),
            Socket::Pumped(s) => Socket::Pumped(s.try_clone()?),
            Socket::Local(s) => Socket::Local(s.try_clone()?),
        })
    }

    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        match self {
            Socket::Tcp(s) => s.shutdown(how),
            Socket::Tls(s) => s.shutdown(how),
            Socket::Pumped(s) => s.shutdown(how),
            Socket::Local(s) => s.shutdown(how),
        }
    }

    pub fn set_nonblocking(&self, on: bool) -> io::Result<()> {
        match self {
            Socket::Tcp(s) => s.set_nonblocking(on),
            Socket::Tls(s) => s.set_nonblocking(on),
            Socket::Pumped(s) => s.set_nonblocking(on),
            Socket::Local(s) => s.set_nonblocking(on),
        }
    }

    /// How long a blocking read may wait (None: for ever).
    pub fn set_read_timeout(&self, limit: Option<std::time::Duration>) -> io::Result<()> {
        match self {
            Socket::Tcp(s) => s.set_read_timeout(limit),
            Socket::Tls(s) => s.set_read_timeout(limit),
            Socket::Pumped(s) => s.set_read_timeout(limit),
            Socket::Local(s) => s.set_read_timeout(limit),
        }
    }

    /// No Nagle delay on TCP; local sockets have none.
    pub fn set_nodelay(&self) {
        match self {
            Socket::Tcp(s) => {
                let _ = s.set_nodelay(true);
            }
            Socket::Tls(s) => s.set_nodelay(),
            _ => {}
        }
    }

    /// Whether bytes (or the end) can be read without reading the socket:
    /// a TLS session may hold plaintext already, which no readiness of
    /// the socket announces.
    pub fn pending(&self) -> bool {
        match self {
            Socket::Tls(s) => s.pending(),
            _ => false,
        }
    }
}

impl AsRawFd for Socket {
    fn as_raw_fd(&self) -> RawFd {
        match self {
            Socket::Tcp(s) => s.as_raw_fd(),
            Socket::Tls(s) => s.as_raw_fd(),
            Socket::Pumped(s) => s.as_raw_fd(),
            Socket::Local(s) => s.as_raw_fd(),
        }
    }
}

impl Read for Socket {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Socket::Tcp(s) => s.read(buf),
            Socket::Tls(s) => s.read(buf),
            Socket::Pumped(s) => s.read(buf),
            Socket::Local(s) => s.read(buf),
        }
    }
}

impl Write for Socket {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Socket::Tcp(s) => s.write(buf),
            Socket::Tls(s) => s.write(buf),
            Socket::Pumped(s) => s.write(buf),
            Socket::Local(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// TCP keep-alive probes on an idle connection (after 30 s, every 10 s,
/// given up after 3 unanswered): a peer that vanished without closing
/// (its host gone, a NAT that forgot the mapping) ends the connection in
/// about a minute instead of leaving it open forever; and the probes keep
/// a NAT's or firewall's mapping of a connection waiting idle alive.
pub fn keep_alive(tcp: &impl AsRawFd) {
    let fd = tcp.as_raw_fd();
    let set = |level, name, value: libc::c_int| {
        // SAFETY: a valid socket fd and a c_int option value of the right size.
        unsafe {
            libc::setsockopt(fd, level, name, (&value as *const libc::c_int).cast(), std::mem::size_of::<libc::c_int>() as libc::socklen_t)
        }
    };
    set(libc::SOL_SOCKET, libc::SO_KEEPALIVE, 1);
    set(libc::IPPROTO_TCP, libc::TCP_KEEPIDLE, 30);
    set(libc::IPPROTO_TCP, libc::TCP_KEEPINTVL, 10);
    set(libc::IPPROTO_TCP, libc::TCP_KEEPCNT, 3);
}
