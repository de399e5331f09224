//! The wire between an endpoint and an instance's child process: two socket
//! pairs, inherited by the child at fixed descriptors ([`CHILD_FDS`]).
//!
//! - *hand-over* (endpoint to child): a stream socket the endpoint accepted
//!   for the instance, as a descriptor (`SCM_RIGHTS`) with a 9-byte header
//!   `[kind u8][source u32 LE][early u32 LE]`, then `early` bytes the
//!   endpoint read past the upgrade (the stream's first bytes).
//! - *reports* (child to endpoint): lines, `ready <url>` once the child's
//!   instance exists, `traffic <json>` (`rank::traffic::Counts`) now and
//!   then, then the instance's final status as JSON.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;

use crate::net::descriptor::{recv_with_fd, send_with_fds};
use crate::net::socket::Socket;

/// Where a child finds the hand-over wire and the reports wire.
pub const CHILD_FDS: (RawFd, RawFd) = (3, 4);

/// Most bytes read past an upgrade that are handed over with its socket.
const MAX_EARLY: u32 = 16 << 20;

const HEADER: usize = 9;
const TCP: u8 = 0;
const LOCAL: u8 = 1;

/// Hand `socket` (a stream from rank `source`) and its `early` bytes over.
pub fn send(wire: &UnixStream, source: u32, socket: &Socket, early: &[u8]) -> io::Result<()> {
    let (kind, fd) = match socket {
        Socket::Tcp(s) => (TCP, s.as_raw_fd()),
        Socket::Pumped(s) => (LOCAL, s.as_raw_fd()),
        Socket::Local(_) | Socket::Tls(_) => {
            return Err(io::Error::other("a same-host or TLS stream is not handed over: its state is in this process"))
        }
    };
    let len = u32::try_from(early.len()).ok().filter(|&l| l <= MAX_EARLY).ok_or_else(|| io::Error::other("too many early bytes"))?;
    let mut header = [0u8; HEADER];
    header[0] = kind;
    header[1..5].copy_from_slice(&source.to_le_bytes());
    header[5..9].copy_from_slice(&len.to_le_bytes());
    send_with_fds(wire, &header, &[fd])?;
    (&*wire).write_all(early)
}

/// The next socket handed over: (source, socket, early bytes); None at the end of the wire.
pub fn receive(wire: &UnixStream) -> io::Result<Option<(u32, Socket, Vec<u8>)>> {
    let mut header = [0u8; HEADER];
    let (n, fd) = recv_with_fd(wire, &mut header)?;
    if n == 0 {
        return Ok(None);
    }
    let fd = fd.ok_or_else(|| io::Error::other("hand-over without a socket"))?;
    (&*wire).read_exact(&mut header[n..])?;
    let source = u32::from_le_bytes(header[1..5].try_into().expect("4 bytes"));
    let len = u32::from_le_bytes(header[5..9].try_into().expect("4 bytes"));
    if len > MAX_EARLY {
        return Err(io::Error::other("too many early bytes"));
    }
    let socket = match header[0] {
        TCP => Socket::Tcp(TcpStream::from(fd)),
        LOCAL => Socket::Pumped(UnixStream::from(fd)),
        k => return Err(io::Error::other(format!("unknown socket kind {k}"))),
    };
    let mut early = vec![0u8; len as usize];
    (&*wire).read_exact(&mut early)?;
    Ok(Some((source, socket, early)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn a_socket_and_its_early_bytes_cross_the_wire() {
        let (a, b) = UnixStream::pair().unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (served, _) = listener.accept().unwrap();
        send(&a, 7, &Socket::Tcp(served), b"early").unwrap();
        let (source, socket, early) = receive(&b).unwrap().unwrap();
        assert_eq!((source, early.as_slice()), (7, &b"early"[..]));
        // The descriptor received is the same connection.
        client.write_all(b"ping").unwrap();
        let Socket::Tcp(mut got) = socket else { panic!("expected a TCP socket") };
        let mut buf = [0u8; 4];
        got.read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"ping");
        drop(a);
        assert!(receive(&b).unwrap().is_none(), "the end of the wire is the end");
    }

    #[test]
    fn a_header_without_a_socket_is_refused() {
        let (a, b) = UnixStream::pair().unwrap();
        (&a).write_all(&[TCP, 0, 0, 0, 0, 0, 0, 0, 0]).unwrap();
        assert!(receive(&b).is_err());
    }
}
