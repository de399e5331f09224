//! A stream over TLS read and written by the stream's own threads, with
//! no pump between: the writing thread encrypts what it writes, the reading
//! thread decrypts what it reads.
//!
//! Rules:
//! - One rustls session per connection, behind one lock, held only to
//!   encrypt or decrypt: never across a system call. A writer blocked by a
//!   full socket (its peer not reading) must not keep this side's reader
//!   from the session, or two peers writing to each other deadlock.
//! - Ciphertext reaches the socket in the order it was made: writers take
//!   the send lock first, then the session, and write what they made
//!   before letting the send lock go. What the reading side makes (the
//!   answer to a key update) waits in the session for the next write.
//! - A read returns plaintext the session holds before it touches the
//!   socket, and after a read, ciphertext the session could take is taken:
//!   so "the socket is not readable and [`TlsSocket::pending`] is false"
//!   means there is nothing to read, which the poller's readiness relies on.
//! - The end of the connection without the peer's `close_notify` is an end
//!   like any other: the stream's frames and acknowledgements tell a cut
//!   message from a whole one.
//!
//! Measured against the pump it replaced (a task copying between the
//! session and a socket pair): see docs/performance.md.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::net::tls::Wire;

/// Ciphertext queued in the session before a write returns (rustls's
/// default is 64 KiB: a 16 MiB message would take 256 turns).
const QUEUE: usize = 256 * 1024;
/// Ciphertext read from the socket in one system call.
const READ: usize = 64 * 1024;

struct Session {
    conn: rustls::Connection,
    /// Ciphertext read from the socket that the session has not taken yet.
    cipher: Vec<u8>,
    taken: usize,
}

struct Shared {
    session: Mutex<Session>,
    /// Held while ciphertext is made and written: writes keep their order.
    send: Mutex<Vec<u8>>,
    /// The reading thread's socket buffer (one reader at a time).
    recv: Mutex<Vec<u8>>,
}

pub struct TlsSocket {
    tcp: TcpStream,
    shared: Arc<Shared>,
}

fn broken(e: rustls::Error) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("TLS: {e}"))
}

impl Session {
    /// Plaintext into `buf` from what the session holds and the ciphertext
    /// read before; Ok(0) at the end; WouldBlock when the socket must be read.
    fn pull(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        // A session that failed says so at every read (`pending` says true
        // for it: the read must not then wait on the socket).
        self.conn.process_new_packets().map_err(broken)?;
        let mut got = 0;
        loop {
            if got == buf.len() {
                self.take()?; // what can be taken now, for `pending`
                return Ok(got);
            }
            match self.conn.reader().read(&mut buf[got..]) {
                Ok(0) => return Ok(got), // the peer's close_notify
                Ok(n) => {
                    got += n;
                    continue;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(got),
                Err(e) => return Err(e),
            }
            if self.taken == self.cipher.len() {
                return if got > 0 { Ok(got) } else { Err(io::ErrorKind::WouldBlock.into()) };
            }
            self.take_some()?;
        }
    }

    /// Feed the session one read's worth of the ciphertext held.
    fn take_some(&mut self) -> io::Result<()> {
        let n = self.conn.read_tls(&mut &self.cipher[self.taken..])?;
        self.taken += n;
        // n == 0: the session takes nothing more (after the peer's
        // close_notify): what follows is dropped, never looped on.
        if n == 0 || self.taken == self.cipher.len() {
            self.cipher.clear();
            self.taken = 0;
        }
        self.conn.process_new_packets().map_err(broken)?;
        Ok(())
    }

    /// Feed the session what it takes of the ciphertext held, until its
    /// plaintext buffer is full.
    fn take(&mut self) -> io::Result<()> {
        while self.taken < self.cipher.len() {
            match self.conn.read_tls(&mut &self.cipher[self.taken..]) {
                Ok(0) => break, // nothing more is taken (see `take_some`)
                Ok(n) => self.taken += n,
                Err(e) if e.kind() == io::ErrorKind::Other => return Ok(()), // plaintext buffer full
                Err(e) => return Err(e),
            }
            self.conn.process_new_packets().map_err(broken)?;
        }
        self.cipher.clear();
        self.taken = 0;
        Ok(())
    }

    /// Whether plaintext can be read without reading the socket.
    fn pending(&mut self) -> bool {
        self.conn.process_new_packets().map_or(true, |s| s.plaintext_bytes_to_read() > 0 || s.peer_has_closed())
    }
}

/// Take over a session tokio-rustls made (its handshake done): the
/// connection's ciphertext read ahead goes with it.
pub fn take_over<C: Into<rustls::Connection>>((wire, conn): (Wire, C)) -> io::Result<TlsSocket> {
    let early = wire.buffer().to_vec();
    TlsSocket::new(wire.into_inner().into_std()?, conn, &early)
}

impl TlsSocket {
    /// Take over a session whose handshake is done: `tcp` (blocking from
    /// now on) carries it, `early` is ciphertext already read from it.
    pub fn new(tcp: TcpStream, conn: impl Into<rustls::Connection>, early: &[u8]) -> io::Result<TlsSocket> {
        let mut conn = conn.into();
        conn.set_buffer_limit(Some(QUEUE));
        tcp.set_nonblocking(false)?;
        let session = Session { conn, cipher: early.to_vec(), taken: 0 };
        let shared = Arc::new(Shared { session: Mutex::new(session), send: Mutex::default(), recv: Mutex::default() });
        let socket = TlsSocket { tcp, shared };
        socket.flush_queued()?; // what the handshake's owner left unsent
        Ok(socket)
    }

    pub fn try_clone(&self) -> io::Result<TlsSocket> {
        Ok(TlsSocket { tcp: self.tcp.try_clone()?, shared: self.shared.clone() })
    }

    /// Whether plaintext (or the end) can be read without reading the socket.
    pub fn pending(&self) -> bool {
        self.shared.session.lock().pending()
    }

    /// Write the ciphertext the session holds (send lock taken).
    fn flush_queued(&self) -> io::Result<()> {
        let mut out = self.shared.send.lock();
        self.shared.session.lock().conn.write_tls(&mut *out)?;
        write_all(&self.tcp, &mut out)
    }

    /// End the connection. Never waits: a writer stuck on a peer that does
    /// not read holds the send lock, and the TCP shutdown is what frees it;
    /// so the peer's clean end (`close_notify`) goes only if it can go now.
    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        if how != Shutdown::Read {
            if let Some(mut out) = self.shared.send.try_lock() {
                {
                    let mut s = self.shared.session.lock();
                    s.conn.send_close_notify();
                    let _ = s.conn.write_tls(&mut *out);
                }
                // SAFETY: `out` is valid for its length during the call.
                let _ =
                    unsafe { libc::send(self.tcp.as_raw_fd(), out.as_ptr().cast(), out.len(), libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL) };
                out.clear();
            }
        }
        self.tcp.shutdown(how)
    }

    pub fn set_nonblocking(&self, on: bool) -> io::Result<()> {
        self.tcp.set_nonblocking(on)
    }

    pub fn set_read_timeout(&self, limit: Option<std::time::Duration>) -> io::Result<()> {
        self.tcp.set_read_timeout(limit)
    }

    pub fn set_nodelay(&self) {
        let _ = self.tcp.set_nodelay(true);
    }
}

/// Write all of `out` to `tcp` and empty it: ciphertext cannot be dropped
/// halfway, so a socket that is not ready is waited for.
fn write_all(tcp: &TcpStream, out: &mut Vec<u8>) -> io::Result<()> {
    let mut done = 0;
    while done < out.len() {
        match (&*tcp).write(&out[done..]) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => wait_writable(tcp.as_raw_fd()),
            Err(e) => {
                out.clear();
                return Err(e);
            }
        }
    }
    out.clear();
    Ok(())
}

/// One read of up to `READ` bytes from `tcp` into `buf` (emptied first; its
/// memory is reused, never zeroed).
fn read_into(tcp: &TcpStream, buf: &mut Vec<u8>) -> io::Result<usize> {
    buf.clear();
    buf.reserve(READ);
    // SAFETY: the kernel writes at most `READ` bytes into the reserved
    // capacity; exactly the `n` it wrote become the vector's length.
    let n = unsafe { libc::recv(tcp.as_raw_fd(), buf.as_mut_ptr().cast(), READ, 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: see above; n <= READ <= capacity.
    unsafe { buf.set_len(n as usize) };
    Ok(n as usize)
}

fn wait_writable(fd: RawFd) {
    let mut p = libc::pollfd { fd, events: libc::POLLOUT, revents: 0 };
    // SAFETY: one valid pollfd for the duration of the call.
    unsafe { libc::poll(&mut p, 1, 100) };
}

impl Read for TlsSocket {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let mut recv = self.shared.recv.lock();
        loop {
            match self.shared.session.lock().pull(buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                done => return done,
            }
            // Read outside the session's lock (writers go on meanwhile), into
            // a buffer the session then takes from without another copy.
            let n = read_into(&self.tcp, &mut recv)?; // blocks, or WouldBlock / TimedOut as the socket is set
            let mut s = self.shared.session.lock();
            if n == 0 {
                let _ = s.conn.read_tls(&mut &[][..]); // the session sees the end
                return match s.pull(buf) {
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(0),
                    done => done,
                };
            }
            // The session's held ciphertext is empty here (`pull` took it all):
            // swap buffers instead of copying.
            debug_assert!(s.cipher.is_empty());
            std::mem::swap(&mut s.cipher, &mut *recv);
            s.taken = 0;
        }
    }
}

impl Write for TlsSocket {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut out = self.shared.send.lock();
        let n = {
            let mut s = self.shared.session.lock();
            let n = s.conn.writer().write(buf)?;
            while s.conn.wants_write() {
                s.conn.write_tls(&mut *out)?;
            }
            n
        };
        write_all(&self.tcp, &mut out)?;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl AsRawFd for TlsSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.tcp.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
    use std::net::TcpListener;
    use std::time::Duration;

    /// A server's and a client's configuration (the client trusts the server).
    fn configs() -> (Arc<rustls::ServerConfig>, Arc<rustls::ClientConfig>) {
        let provider = crate::net::tls::provider();
        let made = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        let cert = CertificateDer::from(made.cert.der().to_vec());
        let key = PrivateKeyDer::try_from(made.key_pair.serialize_der()).unwrap();
        let server = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![cert.clone()], key)
            .unwrap();
        let mut roots = rustls::RootCertStore::empty();
        roots.add(cert).unwrap();
        let client = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        (Arc::new(server), Arc::new(client))
    }

    /// A client and a server socket over loopback, handshake done.
    fn pair() -> (TlsSocket, TlsSocket) {
        let (server, client) = configs();
        connect(&server, &client)
    }

    fn connect(server_config: &Arc<rustls::ServerConfig>, client_config: &Arc<rustls::ClientConfig>) -> (TlsSocket, TlsSocket) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut tcp_c = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut tcp_s, _) = listener.accept().unwrap();
        let server_config = server_config.clone();
        let server = std::thread::spawn(move || {
            let mut conn = rustls::ServerConnection::new(server_config).unwrap();
            while conn.is_handshaking() {
                conn.complete_io(&mut tcp_s).unwrap();
            }
            TlsSocket::new(tcp_s, conn, &[]).unwrap()
        });
        let name = ServerName::try_from("localhost").unwrap();
        let mut conn = rustls::ClientConnection::new(client_config.clone(), name).unwrap();
        while conn.is_handshaking() {
            conn.complete_io(&mut tcp_c).unwrap();
        }
        (TlsSocket::new(tcp_c, conn, &[]).unwrap(), server.join().unwrap())
    }

    /// The session tickets a server sends after the handshake are read by
    /// the stream's reader like any record: the next connection to that
    /// server resumes (no certificate exchange, no signature).
    #[test]
    fn a_second_connection_resumes_the_session() {
        let (server, client) = configs();
        let (mut c, mut s) = connect(&server, &client);
        assert_eq!(c.shared.session.lock().conn.handshake_kind(), Some(rustls::HandshakeKind::Full));
        s.write_all(b"x").unwrap(); // the tickets were sent before it
        let mut got = [0u8; 1];
        c.read_exact(&mut got).unwrap();
        let (c2, _s2) = connect(&server, &client);
        assert_eq!(c2.shared.session.lock().conn.handshake_kind(), Some(rustls::HandshakeKind::Resumed));
    }

    #[test]
    fn bytes_cross_both_ways_in_order() {
        let (mut c, mut s) = pair();
        let suite = c.shared.session.lock().conn.negotiated_cipher_suite().map(|s| s.suite());
        assert_eq!(suite, Some(rustls::CipherSuite::TLS13_AES_128_GCM_SHA256), "the faster suite is chosen");
        c.write_all(b"hello").unwrap();
        let mut got = [0u8; 5];
        s.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"hello");
        s.write_all(b"back").unwrap();
        let mut got = [0u8; 4];
        c.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"back");
    }

    /// Both sides write 8 MiB at once, each from its own thread while another
    /// reads: no side's blocked writer keeps its reader from the session.
    #[test]
    fn both_sides_writing_large_messages_at_once_do_not_deadlock() {
        let (c, s) = pair();
        let data: Vec<u8> = (0..8 << 20).map(|i: u32| (i * 7 % 251) as u8).collect();
        let run = |sock: TlsSocket, data: Vec<u8>| {
            let mut w = sock.try_clone().unwrap();
            let sent = data.clone();
            let writer = std::thread::spawn(move || w.write_all(&sent).unwrap());
            let mut r = sock;
            let mut got = vec![0u8; data.len()];
            r.read_exact(&mut got).unwrap();
            writer.join().unwrap();
            assert!(got == data, "bytes differ");
        };
        let d2 = data.clone();
        let a = std::thread::spawn(move || run(c, d2));
        run(s, data);
        a.join().unwrap();
    }

    /// Plaintext the session holds beyond what a read took is reported
    /// pending although the socket has nothing more: a poller must not wait.
    #[test]
    fn plaintext_held_in_the_session_is_pending() {
        let (mut c, mut s) = pair();
        c.write_all(&[5u8; 40_000]).unwrap();
        std::thread::sleep(Duration::from_millis(50));
        let mut first = [0u8; 10];
        s.read_exact(&mut first).unwrap();
        assert!(s.pending(), "the rest is in the session");
        let mut rest = vec![0u8; 40_000 - 10];
        s.read_exact(&mut rest).unwrap();
        assert!(rest.iter().all(|&b| b == 5));
        assert!(!s.pending());
    }

    #[test]
    fn the_end_reads_as_zero_after_the_last_bytes() {
        let (mut c, mut s) = pair();
        c.write_all(b"last").unwrap();
        c.shutdown(Shutdown::Write).unwrap();
        let mut got = Vec::new();
        s.read_to_end(&mut got).unwrap();
        assert_eq!(got, b"last");
    }

    /// Bytes after the peer's close_notify are dropped: the read ends, it
    /// does not spin on what the session will not take.
    #[test]
    fn bytes_after_close_notify_end_the_stream_without_a_spin() {
        let (c, mut s) = pair();
        let mut out = Vec::new();
        {
            let mut session = c.shared.session.lock();
            session.conn.writer().write_all(b"bye").unwrap();
            session.conn.send_close_notify();
            session.conn.write_tls(&mut out).unwrap();
        }
        out.extend_from_slice(&[0x17, 3, 3, 0, 40]);
        out.extend_from_slice(&[0u8; 40]);
        (&c.tcp).write_all(&out).unwrap();
        let mut got = Vec::new();
        s.read_to_end(&mut got).unwrap();
        assert_eq!(got, b"bye");
    }

    /// A writer blocked by a peer that does not read is freed by a shutdown
    /// from another thread, which itself does not wait.
    #[test]
    fn shutdown_frees_a_writer_stuck_on_a_peer_that_does_not_read() {
        let (c, _s) = pair();
        let mut w = c.try_clone().unwrap();
        let writer = std::thread::spawn(move || w.write_all(&vec![1u8; 64 << 20]));
        std::thread::sleep(Duration::from_millis(300)); // the socket's buffers are full by now
        let t = std::time::Instant::now();
        c.shutdown(Shutdown::Both).unwrap();
        assert!(t.elapsed() < Duration::from_secs(1), "shutdown waited {:?}", t.elapsed());
        assert!(writer.join().unwrap().is_err(), "the stuck write must fail");
    }

    /// Bytes changed on the wire break the stream with an error, never
    /// turn into different plaintext.
    #[test]
    fn tampered_ciphertext_is_an_error() {
        let (c, mut s) = pair();
        let mut out = Vec::new();
        {
            let mut session = c.shared.session.lock();
            session.conn.writer().write_all(b"secret message").unwrap();
            session.conn.write_tls(&mut out).unwrap();
        }
        let last = out.len() - 1;
        out[last] ^= 1;
        (&c.tcp).write_all(&out).unwrap();
        let mut got = [0u8; 14];
        let e = s.read_exact(&mut got).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{e}");
    }
}
