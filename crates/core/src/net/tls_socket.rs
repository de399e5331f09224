//! A stream over TLS read and written by the stream's own threads, with
//! no pump between: the writing thread encrypts what it writes, the reading
//! thread decrypts what it reads.
//!
//! Two stages. Until [`TlsSocket::own_records`], a rustls session does the
//! record layer (the stream's HTTP upgrade goes through it). From then on
//! the stream owns its records (`net::tls_records`) with the keys rustls
//! made: records are opened in place in the buffer the socket is read into
//! and sealed straight into the buffer that is written, where rustls's
//! buffered session copied each byte three times more. Nothing changes on
//! the wire: a peer that keeps its rustls session reads the same records.
//!
//! Rules:
//! - The session is fed whole records only, so that when the stream takes
//!   the records over the session holds no part of one: what it has not
//!   been given stays in this stream's buffer, what it decrypted and was
//!   not read yet is read first. A server takes over after its upgrade
//!   answer, which the client waits for before it sends.
//! - One lock per direction once records are owned (the reading side's
//!   state, the writing side's): a writer blocked by a full socket (its
//!   peer not reading) never keeps this side's reader from its keys, or
//!   two peers writing to each other deadlock. Before, the session has a
//!   lock of its own, held only to encrypt or decrypt, never across a
//!   system call. Order: recv, send, session.
//! - Ciphertext reaches the socket in the order it was made: writers hold
//!   the send lock from sealing to the end of the write.
//! - [`TlsSocket::pending`] is true while plaintext or the end can be read
//!   without reading the socket (a flag the reader sets as it leaves), so
//!   "the socket is not readable and nothing is pending" means there is
//!   nothing to read, which the poller's readiness relies on.
//! - The end of the connection without the peer's `close_notify` is an end
//!   like any other: the stream's frames and acknowledgements tell a cut
//!   message from a whole one.
//!
//! Measured against the pump it replaced and against the session doing the
//! records: see docs/performance.md.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::ops::Range;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::config::spin_budget;
use crate::engine::completion::poll_until;
use crate::net::tls::Wire;
use crate::net::tls_records::{self, Opened, Opener, Sealer, MAX_RECORD};

/// Plaintext sealed (or queued in the session) before a write returns
/// (rustls's default is 64 KiB: a 16 MiB message would take 256 turns).
const QUEUE: usize = 256 * 1024;
/// Ciphertext read from the socket in one system call, at least.
const READ: usize = 64 * 1024;

/// What was read from the socket and not yet given out.
struct Inbound {
    /// Socket bytes at `start..end`; its length is its capacity.
    buf: Vec<u8>,
    start: usize,
    end: usize,
    /// Owned records: the plaintext of the record opened last, in `buf`.
    plain: Range<usize>,
    /// Plaintext the session held when the stream took its records over.
    held: Vec<u8>,
    held_at: usize,
    opener: Option<Opener>,
    /// The socket's end was read.
    eof: bool,
    /// Owned records: the peer's close_notify was read.
    closed: bool,
    /// Owned records: why the stream broke.
    failed: Option<String>,
}

struct Outbound {
    out: Vec<u8>,
    sealer: Option<Sealer>,
}

struct Shared {
    /// Until the stream owns its records.
    session: Mutex<Option<rustls::Connection>>,
    /// Held while ciphertext is made and written: writes keep their order.
    send: Mutex<Outbound>,
    /// The reading side (one reader at a time).
    recv: Mutex<Inbound>,
    /// See [`TlsSocket::pending`].
    ready: AtomicBool,
}

pub struct TlsSocket {
    tcp: TcpStream,
    shared: Arc<Shared>,
}

/// The error of a stream whose TLS broke (the session's, or a record's).
fn broken(why: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("TLS: {why}"))
}

fn would_block() -> io::Error {
    io::ErrorKind::WouldBlock.into()
}

/// Copy what fits of `from` into `to`.
fn give(from: &[u8], to: &mut [u8]) -> usize {
    let n = from.len().min(to.len());
    to[..n].copy_from_slice(&from[..n]);
    n
}

impl Inbound {
    fn new(early: &[u8]) -> Inbound {
        let mut buf = vec![0; (READ + MAX_RECORD).max(early.len() + READ)];
        buf[..early.len()].copy_from_slice(early);
        let (start, end) = (0, early.len());
        Inbound { buf, start, end, plain: 0..0, held: Vec::new(), held_at: 0, opener: None, eof: false, closed: false, failed: None }
    }

    /// One read from the socket after what is held (blocks, or WouldBlock /
    /// TimedOut as the socket is set). Called with no whole record held, so
    /// moving the part held to the front leaves room for `READ` at least.
    fn fill(&mut self, tcp: &TcpStream, flags: libc::c_int) -> io::Result<usize> {
        if self.start == self.end {
            (self.start, self.end) = (0, 0);
        } else if self.buf.len() - self.end < MAX_RECORD {
            self.buf.copy_within(self.start..self.end, 0);
            (self.start, self.end) = (0, self.end - self.start);
        }
        let room = &mut self.buf[self.end..];
        // SAFETY: `room` is valid for writes of its length during the call.
        let n = unsafe { libc::recv(tcp.as_raw_fd(), room.as_mut_ptr().cast(), room.len(), flags) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        self.end += n as usize; // n <= room.len()
        Ok(n as usize)
    }

    fn whole_record(&self) -> io::Result<Option<usize>> {
        tls_records::whole_record(&self.buf[self.start..self.end]).map_err(broken)
    }

    /// Give the session the next whole record held; false if none is (or
    /// the session takes no more now: its plaintext buffer is full).
    fn feed_one(&mut self, conn: &mut rustls::Connection) -> io::Result<bool> {
        let Some(len) = self.whole_record()? else { return Ok(false) };
        let record = self.start..self.start + len;
        let mut fed = record.start;
        while fed < record.end {
            match conn.read_tls(&mut &self.buf[fed..record.end]) {
                Ok(0) => {
                    // The session takes nothing more (after the peer's
                    // close_notify): what follows is dropped, never looped on.
                    self.start = self.end;
                    return Ok(false);
                }
                Ok(n) => fed += n,
                Err(e) if e.kind() == io::ErrorKind::Other && fed == record.start => return Ok(false), // plaintext buffer full
                Err(e) => return Err(e),
            }
        }
        self.start = record.end;
        conn.process_new_packets().map_err(broken)?;
        Ok(true)
    }

    /// Plaintext through the session into `dst`; Ok(0) at the end;
    /// WouldBlock when the socket must be read.
    fn read_session(&mut self, conn: &mut rustls::Connection, dst: &mut [u8]) -> io::Result<usize> {
        // A session that failed says so at every read (`pending` says true
        // for it: the read must not then wait on the socket).
        conn.process_new_packets().map_err(broken)?;
        loop {
            match conn.reader().read(dst) {
                Ok(0) => return Ok(0), // the peer's close_notify
                Ok(n) => {
                    while self.feed_one(conn)? {} // what can be taken now, for `pending`
                    return Ok(n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(0),
                Err(e) => return Err(e),
            }
            if !self.feed_one(conn)? {
                return Err(would_block());
            }
        }
    }

    /// Plaintext from owned records into `dst`, opened in place; Ok(0) at
    /// the end; WouldBlock when the socket must be read.
    fn read_own(&mut self, dst: &mut [u8]) -> io::Result<usize> {
        if let Some(why) = &self.failed {
            return Err(broken(why));
        }
        if self.held_at < self.held.len() {
            let n = give(&self.held[self.held_at..], dst);
            self.held_at += n;
            return Ok(n);
        }
        let mut got = 0;
        loop {
            let n = give(&self.buf[self.plain.clone()], &mut dst[got..]);
            self.plain.start += n;
            got += n;
            if got == dst.len() || self.closed {
                return Ok(got);
            }
            let opener = self.opener.as_mut().expect("records are owned");
            match opener.open(&mut self.buf[self.start..self.end]) {
                Ok(Opened::Need(_)) => return if got > 0 { Ok(got) } else { Err(would_block()) },
                Ok(Opened::Data { len, plain }) => {
                    self.plain = self.start + plain.start..self.start + plain.end;
                    self.start += len;
                }
                Ok(Opened::Skip { len }) => self.start += len,
                Ok(Opened::Closed) => {
                    self.closed = true;
                    self.start = self.end; // what follows is dropped
                }
                Err(why) => {
                    let e = broken(&why);
                    self.failed = Some(why);
                    return if got > 0 { Ok(got) } else { Err(e) };
                }
            }
        }
    }

    /// Owned records, a large read, no whole record held: the socket is
    /// read straight into `dst` and its records opened there, their
    /// plaintext moved together to its front (the copy out of the buffer
    /// saved); a record cut at the end goes back to the buffer. Some(n):
    /// plaintext; None: none yet (or the end, or a failure, now noted).
    fn read_direct(&mut self, tcp: &TcpStream, dst: &mut [u8], flags: libc::c_int) -> io::Result<Option<usize>> {
        let part = self.end - self.start; // less than a record
        dst[..part].copy_from_slice(&self.buf[self.start..self.end]);
        (self.start, self.end) = (0, 0);
        let room = &mut dst[part..];
        // SAFETY: `room` is valid for writes of its length during the call.
        let n = unsafe { libc::recv(tcp.as_raw_fd(), room.as_mut_ptr().cast(), room.len(), flags) };
        if n <= 0 {
            let e = io::Error::last_os_error();
            self.buf[..part].copy_from_slice(&dst[..part]);
            self.end = part;
            return if n == 0 {
                self.eof = true;
                Ok(None)
            } else {
                Err(e)
            };
        }
        let filled = part + n as usize; // n <= room.len()
        let opener = self.opener.as_mut().expect("records are owned");
        let (mut at, mut to) = (0, 0);
        while !self.closed && self.failed.is_none() {
            match opener.open_at(&mut dst[..filled], at, to) {
                Ok(Opened::Need(_)) => break,
                Ok(Opened::Data { len, plain }) => (at, to) = (at + len, plain.end),
                Ok(Opened::Skip { len }) => at += len,
                Ok(Opened::Closed) => self.closed = true, // what follows is dropped
                Err(why) => self.failed = Some(why),
            }
        }
        if !self.closed && self.failed.is_none() {
            let cut = filled - at;
            self.buf[..cut].copy_from_slice(&dst[at..filled]);
            self.end = cut;
        }
        Ok((to > 0).then_some(to))
    }

    /// Whether plaintext or the end can be read without the socket.
    fn ready(&self, session: Option<&mut rustls::Connection>) -> bool {
        if self.eof {
            return true;
        }
        match session {
            Some(conn) => conn.process_new_packets().map_or(true, |s| s.plaintext_bytes_to_read() > 0 || s.peer_has_closed()),
            None => {
                self.held_at < self.held.len()
                    || !self.plain.is_empty()
                    || self.closed
                    || self.failed.is_some()
                    || !matches!(self.whole_record(), Ok(None))
            }
        }
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
    /// now on) carries it, `early` is ciphertext already read from it (from
    /// a record's start: the handshake's last flight is read whole).
    pub fn new(tcp: TcpStream, conn: impl Into<rustls::Connection>, early: &[u8]) -> io::Result<TlsSocket> {
        let mut conn = conn.into();
        conn.set_buffer_limit(Some(QUEUE));
        tcp.set_nonblocking(false)?;
        let mut inbound = Inbound::new(early);
        while inbound.feed_one(&mut conn)? {}
        let ready = AtomicBool::new(inbound.ready(Some(&mut conn)));
        let shared = Arc::new(Shared {
            session: Mutex::new(Some(conn)),
            send: Mutex::new(Outbound { out: Vec::new(), sealer: None }),
            recv: Mutex::new(inbound),
            ready,
        });
        let socket = TlsSocket { tcp, shared };
        socket.flush_queued()?; // what the handshake's owner left unsent
        Ok(socket)
    }

    pub fn try_clone(&self) -> io::Result<TlsSocket> {
        Ok(TlsSocket { tcp: self.tcp.try_clone()?, shared: self.shared.clone() })
    }

    /// From now on this stream seals and opens its own records with the
    /// session's keys (TLS 1.3; a TLS 1.2 session stays with rustls). A
    /// client calls it once the upgrade's answer is read (the server's
    /// session tickets came before it), a server once it has answered.
    pub fn own_records(&self) -> io::Result<()> {
        let mut inbound = self.shared.recv.lock();
        let mut outbound = self.shared.send.lock();
        let mut session = self.shared.session.lock();
        let Some(conn) = session.as_mut() else { return Ok(()) };
        if conn.is_handshaking() || conn.protocol_version() != Some(rustls::ProtocolVersion::TLSv1_3) {
            return Ok(());
        }
        let Some(rustls::SupportedCipherSuite::Tls13(suite)) = conn.negotiated_cipher_suite() else { return Ok(()) };
        conn.process_new_packets().map_err(broken)?;
        let mut held = Vec::new();
        inbound.closed = loop {
            let mut chunk = [0u8; 4096];
            match conn.reader().read(&mut chunk) {
                Ok(0) => break true,
                Ok(n) => held.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break false,
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => break true,
                Err(e) => return Err(e),
            }
        };
        if conn.wants_write() {
            conn.write_tls(&mut outbound.out)?;
            write_all(&self.tcp, &mut outbound.out)?;
        }
        let conn = session.take().expect("checked above");
        let secrets = conn.dangerous_extract_secrets().map_err(broken)?;
        inbound.opener = Some(Opener::new(secrets.rx, u64::MAX).map_err(broken)?);
        outbound.sealer = Some(Sealer::new(secrets.tx, suite.common.confidentiality_limit).map_err(broken)?);
        (inbound.held, inbound.held_at) = (held, 0);
        self.shared.ready.store(inbound.ready(None), Ordering::Release);
        Ok(())
    }

    /// Whether plaintext (or the end) can be read without reading the socket.
    pub fn pending(&self) -> bool {
        self.shared.ready.load(Ordering::Acquire)
    }

    /// Write the ciphertext the session holds (send lock taken).
    fn flush_queued(&self) -> io::Result<()> {
        let mut out = self.shared.send.lock();
        if let Some(conn) = self.shared.session.lock().as_mut() {
            conn.write_tls(&mut out.out)?;
        }
        write_all(&self.tcp, &mut out.out)
    }

    /// End the connection. Never waits: a writer stuck on a peer that does
    /// not read holds the send lock, and the TCP shutdown is what frees it;
    /// so the peer's clean end (`close_notify`) goes only if it can go now.
    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        if how != Shutdown::Read {
            if let Some(mut outbound) = self.shared.send.try_lock() {
                let Outbound { out, sealer } = &mut *outbound;
                match sealer {
                    Some(sealer) => {
                        let _ = sealer.close_notify(out);
                    }
                    None => {
                        if let Some(conn) = self.shared.session.lock().as_mut() {
                            conn.send_close_notify();
                            let _ = conn.write_tls(out);
                        }
                    }
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
/// halfway, so a socket that is not ready is waited for, polled first for
/// up to the spin budget (as `net::polled` does for cleartext).
fn write_all(tcp: &TcpStream, out: &mut Vec<u8>) -> io::Result<()> {
    let mut done = 0;
    let result = loop {
        if done == out.len() {
            break Ok(());
        }
        let sent = || {
            // SAFETY: `out[done..]` is valid for its length during the call.
            let n = unsafe {
                libc::send(tcp.as_raw_fd(), out[done..].as_ptr().cast(), out.len() - done, libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL)
            };
            if n >= 0 {
                Ok(n as usize)
            } else {
                Err(io::Error::last_os_error())
            }
        };
        let mut got = sent();
        if matches!(&got, Err(e) if e.kind() == io::ErrorKind::WouldBlock) {
            poll_until(spin_budget(), || {
                got = sent();
                !matches!(&got, Err(e) if e.kind() == io::ErrorKind::WouldBlock)
            });
        }
        match got {
            Ok(0) => break Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => wait_writable(tcp.as_raw_fd()),
            Err(e) => break Err(e),
        }
    };
    out.clear();
    result
}

fn wait_writable(fd: RawFd) {
    let mut p = libc::pollfd { fd, events: libc::POLLOUT, revents: 0 };
    // SAFETY: one valid pollfd for the duration of the call.
    unsafe { libc::poll(&mut p, 1, 100) };
}

impl Read for TlsSocket {
    fn read(&mut self, dst: &mut [u8]) -> io::Result<usize> {
        self.read_with(dst, 0)
    }
}

impl TlsSocket {
    /// A read that does not wait for the socket: WouldBlock if it must.
    pub fn try_read(&self, dst: &mut [u8]) -> io::Result<usize> {
        self.read_with(dst, libc::MSG_DONTWAIT)
    }

    /// A read; `flags` for the socket's receive calls.
    fn read_with(&self, dst: &mut [u8], flags: libc::c_int) -> io::Result<usize> {
        if dst.is_empty() {
            return Ok(0);
        }
        let mut inbound = self.shared.recv.lock();
        let got = self.read_locked(&mut inbound, dst, flags);
        // Whatever the read ended with (a ticket skipped before the socket
        // would block changes what is held too).
        let ready = inbound.ready(self.shared.session.lock().as_mut());
        self.shared.ready.store(ready, Ordering::Release);
        got
    }

    fn read_locked(&self, inbound: &mut Inbound, dst: &mut [u8], flags: libc::c_int) -> io::Result<usize> {
        loop {
            let mut session = self.shared.session.lock();
            let got = match session.as_mut() {
                Some(conn) => inbound.read_session(conn, dst),
                None => inbound.read_own(dst),
            };
            match got {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                done => return done,
            }
            if inbound.eof {
                return Ok(0);
            }
            let owned = session.is_none();
            drop(session);
            // Read outside the session's lock (writers go on meanwhile).
            if owned && dst.len() >= READ {
                if let Some(n) = inbound.read_direct(&self.tcp, dst, flags)? {
                    return Ok(n);
                }
            } else if inbound.fill(&self.tcp, flags)? == 0 {
                inbound.eof = true;
                if let Some(conn) = self.shared.session.lock().as_mut() {
                    let _ = conn.read_tls(&mut &[][..]); // the session sees the end
                }
            }
        }
    }
}

impl Write for TlsSocket {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut outbound = self.shared.send.lock();
        let Outbound { out, sealer } = &mut *outbound;
        let n = match sealer {
            Some(sealer) => {
                let n = buf.len().min(QUEUE);
                sealer.seal(&buf[..n], out).map_err(broken)?;
                n
            }
            None => {
                let mut session = self.shared.session.lock();
                let conn = session.as_mut().expect("a session until records are owned");
                let n = conn.writer().write(buf)?;
                while conn.wants_write() {
                    conn.write_tls(out)?;
                }
                n
            }
        };
        write_all(&self.tcp, out)?;
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
        let mut server = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![cert.clone()], key)
            .unwrap();
        server.enable_secret_extraction = true;
        let mut roots = rustls::RootCertStore::empty();
        roots.add(cert).unwrap();
        let mut client = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        client.enable_secret_extraction = true;
        (Arc::new(server), Arc::new(client))
    }

    /// A client and a server socket over loopback, handshake done, records
    /// still done by their sessions.
    fn pair() -> (TlsSocket, TlsSocket) {
        let (server, client) = configs();
        connect(&server, &client)
    }

    /// `pair`, then the exchange a stream's upgrade makes (the client asks,
    /// the server answers and owns its records, the client reads the answer
    /// and owns its records).
    fn upgraded() -> (TlsSocket, TlsSocket) {
        let (mut c, mut s) = pair();
        c.write_all(b"upgrade?").unwrap();
        let mut asked = [0u8; 8];
        s.read_exact(&mut asked).unwrap();
        s.write_all(b"101").unwrap();
        s.own_records().unwrap();
        s.write_all(b"first").unwrap(); // the server's stream begins at once
        let mut answer = [0u8; 3];
        c.read_exact(&mut answer).unwrap();
        c.own_records().unwrap();
        let mut first = [0u8; 5];
        c.read_exact(&mut first).unwrap();
        assert_eq!((&answer, &first), (b"101", b"first"));
        assert!(owns(&c) && owns(&s));
        (c, s)
    }

    /// `pair`, the server's records its own or not (the client's session
    /// does them either way).
    fn server_owning(owned: bool) -> (TlsSocket, TlsSocket) {
        let (c, s) = pair();
        if owned {
            s.own_records().unwrap();
        }
        (c, s)
    }

    fn owns(s: &TlsSocket) -> bool {
        s.shared.session.lock().is_none()
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

    /// Records a socket's session makes, not written.
    fn sealed_by_session(sock: &TlsSocket, plain: &[u8], close: bool) -> Vec<u8> {
        let mut out = Vec::new();
        let mut session = sock.shared.session.lock();
        let conn = session.as_mut().unwrap();
        conn.writer().write_all(plain).unwrap();
        if close {
            conn.send_close_notify();
        }
        while conn.wants_write() {
            conn.write_tls(&mut out).unwrap();
        }
        out
    }

    /// The session tickets a server sends after the handshake are read by
    /// the client's session before it owns its records: the next
    /// connection to that server resumes (no certificate exchange, no
    /// signature).
    #[test]
    fn a_second_connection_resumes_the_session() {
        let (server, client) = configs();
        let (mut c, mut s) = connect(&server, &client);
        let kind = |t: &TlsSocket| t.shared.session.lock().as_ref().unwrap().handshake_kind();
        assert_eq!(kind(&c), Some(rustls::HandshakeKind::Full));
        s.own_records().unwrap();
        s.write_all(b"x").unwrap(); // the tickets were sent before it
        let mut got = [0u8; 1];
        c.read_exact(&mut got).unwrap();
        c.own_records().unwrap();
        let (c2, _s2) = connect(&server, &client);
        assert_eq!(kind(&c2), Some(rustls::HandshakeKind::Resumed));
    }

    /// Every pairing: both sessions, both owning their records, and each
    /// side owning them against a peer whose session does the records.
    #[test]
    fn bytes_cross_both_ways_in_order_whoever_does_the_records() {
        let mixed = |client_owns: bool| {
            let (mut c, mut s) = pair();
            c.write_all(b"?").unwrap();
            s.read_exact(&mut [0u8; 1]).unwrap();
            if client_owns { c.own_records() } else { s.own_records() }.unwrap();
            (c, s)
        };
        for (mut c, mut s) in [pair(), upgraded(), mixed(true), mixed(false)] {
            let suite = |t: &TlsSocket| t.shared.session.lock().as_ref().and_then(|c| c.negotiated_cipher_suite()).map(|s| s.suite());
            if let Some(suite) = suite(&c).or(suite(&s)) {
                assert_eq!(suite, rustls::CipherSuite::TLS13_AES_128_GCM_SHA256, "the faster suite is chosen");
            }
            let data: Vec<u8> = (0..100_000u32).map(|i| (i % 253) as u8).collect();
            c.write_all(&data).unwrap();
            let mut got = vec![0u8; data.len()];
            s.read_exact(&mut got).unwrap();
            assert!(got == data, "client to server");
            s.write_all(b"back").unwrap();
            let mut got = [0u8; 4];
            c.read_exact(&mut got).unwrap();
            assert_eq!(&got, b"back");
        }
    }

    /// Both sides write 8 MiB at once, each from its own thread while another
    /// reads: no side's blocked writer keeps its reader from the keys.
    #[test]
    fn both_sides_writing_large_messages_at_once_do_not_deadlock() {
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
        for (c, s) in [pair(), upgraded()] {
            let d2 = data.clone();
            let a = std::thread::spawn(move || run(c, d2));
            run(s, data.clone());
            a.join().unwrap();
        }
    }

    /// Plaintext held beyond what a read took (in the session, or in a
    /// record opened) is reported pending although the socket has nothing
    /// more: a poller must not wait.
    #[test]
    fn plaintext_held_is_pending() {
        for (mut c, mut s) in [pair(), upgraded()] {
            c.write_all(&[5u8; 40_000]).unwrap();
            std::thread::sleep(Duration::from_millis(50));
            let mut first = [0u8; 10];
            s.read_exact(&mut first).unwrap();
            assert!(s.pending(), "the rest is held");
            let mut rest = vec![0u8; 40_000 - 10];
            s.read_exact(&mut rest).unwrap();
            assert!(rest.iter().all(|&b| b == 5));
            assert!(!s.pending());
        }
    }

    /// Taking the records over in the middle of a record (the answer read,
    /// the stream's first bytes half arrived): what the session decrypted
    /// is read first, the half record is completed and opened by the
    /// stream, nothing is lost or read twice.
    #[test]
    fn taking_the_records_over_keeps_what_was_read_ahead() {
        let (c, mut s) = pair();
        let mut wire = sealed_by_session(&c, b"answer|", false);
        let stream: Vec<u8> = (0..50_000u32).map(|i| (i % 249) as u8).collect();
        wire.extend(sealed_by_session(&c, &stream[..20_000], false));
        let cut = wire.len() + 1000; // within the next record
        wire.extend(sealed_by_session(&c, &stream[20_000..], false));
        (&c.tcp).write_all(&wire[..cut]).unwrap();
        std::thread::sleep(Duration::from_millis(50));
        let mut answer = [0u8; 7];
        s.read_exact(&mut answer).unwrap();
        assert_eq!(&answer, b"answer|");
        s.own_records().unwrap();
        assert!(owns(&s));
        (&c.tcp).write_all(&wire[cut..]).unwrap();
        let mut got = vec![0u8; stream.len()];
        s.read_exact(&mut got).unwrap();
        assert!(got == stream);
    }

    #[test]
    fn the_end_reads_as_zero_after_the_last_bytes() {
        for (mut c, mut s) in [pair(), upgraded()] {
            c.write_all(b"last").unwrap();
            c.shutdown(Shutdown::Write).unwrap();
            let mut got = Vec::new();
            s.read_to_end(&mut got).unwrap();
            assert_eq!(got, b"last");
        }
    }

    /// Bytes after the peer's close_notify are dropped: the read ends, it
    /// does not spin on what will not be taken (by a session, or by a
    /// stream that owns its records).
    #[test]
    fn bytes_after_close_notify_end_the_stream_without_a_spin() {
        for owned in [false, true] {
            let (c, mut s) = server_owning(owned);
            let mut out = sealed_by_session(&c, b"bye", true);
            out.extend_from_slice(&[0x17, 3, 3, 0, 40]);
            out.extend_from_slice(&[0u8; 40]);
            (&c.tcp).write_all(&out).unwrap();
            let mut got = Vec::new();
            s.read_to_end(&mut got).unwrap();
            assert_eq!(got, b"bye");
        }
    }

    /// A writer blocked by a peer that does not read is freed by a shutdown
    /// from another thread, which itself does not wait.
    #[test]
    fn shutdown_frees_a_writer_stuck_on_a_peer_that_does_not_read() {
        for (c, _s) in [pair(), upgraded()] {
            let mut w = c.try_clone().unwrap();
            let writer = std::thread::spawn(move || w.write_all(&vec![1u8; 64 << 20]));
            std::thread::sleep(Duration::from_millis(300)); // the socket's buffers are full by now
            let t = std::time::Instant::now();
            c.shutdown(Shutdown::Both).unwrap();
            assert!(t.elapsed() < Duration::from_secs(1), "shutdown waited {:?}", t.elapsed());
            assert!(writer.join().unwrap().is_err(), "the stuck write must fail");
        }
    }

    /// Bytes changed on the wire break the stream with an error, never
    /// turn into different plaintext; so does a key update, which a
    /// stream that owns its records does not follow.
    #[test]
    fn tampered_ciphertext_or_a_key_update_is_an_error() {
        for owned in [false, true] {
            let (c, mut s) = server_owning(owned);
            let mut out = sealed_by_session(&c, b"secret message", false);
            let last = out.len() - 1;
            out[last] ^= 1;
            (&c.tcp).write_all(&out).unwrap();
            let mut got = [0u8; 14];
            let e = s.read_exact(&mut got).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{e}");
            assert!(s.read(&mut got).is_err(), "and stays broken");
        }
        let (mut c, mut s) = server_owning(true);
        c.shared.session.lock().as_mut().unwrap().refresh_traffic_keys().unwrap();
        c.write_all(b"after").unwrap();
        let e = s.read_exact(&mut [0u8; 5]).unwrap_err();
        assert!(e.to_string().contains("key update"), "{e}");
    }
}
