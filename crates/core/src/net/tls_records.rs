//! TLS 1.3 record protection (RFC 8446 section 5) for a stream that owns
//! its records once rustls has made the session's keys: pure code, no I/O.
//!
//! Rules:
//! - A record is a 5-byte header (outer type application data, version
//!   0x0303, length) and AEAD ciphertext of `plaintext || inner type ||
//!   zero padding`, sealed with the header as additional data and a nonce
//!   of the key's IV xor the record's sequence number (section 5.3).
//! - A length over 2^14 + 256 is refused before anything is read for it;
//!   every length is checked arithmetic.
//! - Opening happens in place, in the buffer the socket was read into;
//!   sealing copies the plaintext once, into the buffer that is written.
//! - After the switch the stream carries application data and alerts only:
//!   close_notify ends it; a session ticket (a server may send more) is
//!   dropped (it only means no resumption with it); any other handshake
//!   message, a key update among them, is an error that ends the stream
//!   (the link reconnects with a new session). Neither side of a stream
//!   updates its keys: a writer stops at the suite's confidentiality limit,
//!   with an error, instead (2^24 records of AES-GCM: 256 GiB).

use std::ops::Range;

use ring::aead;
use rustls::ConnectionTrafficSecrets;

pub const HEADER: usize = 5;
/// Plaintext in one record at most.
pub const MAX_PLAIN: usize = 1 << 14;
/// A record's ciphertext at most (section 5.2).
const MAX_CIPHER: usize = MAX_PLAIN + 256;
/// A whole record at most, header included.
pub const MAX_RECORD: usize = HEADER + MAX_CIPHER;
const TAG: usize = 16;

const ALERT: u8 = 21;
const HANDSHAKE: u8 = 22;
const APP_DATA: u8 = 23;
const CLOSE_NOTIFY: u8 = 0;
const NEW_SESSION_TICKET: u8 = 4;

/// One direction's key, IV and next sequence number.
struct Keys {
    key: aead::LessSafeKey,
    iv: [u8; aead::NONCE_LEN],
    seq: u64,
    /// Records this key may protect at most.
    limit: u64,
}

impl Keys {
    fn new((seq, secrets): (u64, ConnectionTrafficSecrets), limit: u64) -> Result<Keys, String> {
        let (alg, key, iv) = match secrets {
            ConnectionTrafficSecrets::Aes128Gcm { key, iv } => (&aead::AES_128_GCM, key, iv),
            ConnectionTrafficSecrets::Aes256Gcm { key, iv } => (&aead::AES_256_GCM, key, iv),
            ConnectionTrafficSecrets::Chacha20Poly1305 { key, iv } => (&aead::CHACHA20_POLY1305, key, iv),
            _ => return Err("a cipher suite this stream cannot protect records of".into()),
        };
        let key = aead::UnboundKey::new(alg, key.as_ref()).map_err(|_| "a key of the wrong length".to_string())?;
        let iv: [u8; aead::NONCE_LEN] = iv.as_ref().try_into().map_err(|_| "an IV of the wrong length".to_string())?;
        Ok(Keys { key: aead::LessSafeKey::new(key), iv, seq, limit })
    }

    /// The next record's nonce; the sequence number moves on.
    fn next_nonce(&mut self) -> Result<aead::Nonce, String> {
        if self.seq >= self.limit {
            return Err("the TLS key's record limit is reached: the stream ends (a new one gets new keys)".into());
        }
        let mut nonce = self.iv;
        for (n, s) in nonce[aead::NONCE_LEN - 8..].iter_mut().zip(self.seq.to_be_bytes()) {
            *n ^= s;
        }
        self.seq += 1;
        Ok(aead::Nonce::assume_unique_for_key(nonce))
    }
}

fn header(len: usize) -> [u8; HEADER] {
    let [hi, lo] = (len as u16).to_be_bytes();
    [APP_DATA, 3, 3, hi, lo]
}

/// The sending direction.
pub struct Sealer(Keys);

impl Sealer {
    pub fn new(secrets: (u64, ConnectionTrafficSecrets), limit: u64) -> Result<Sealer, String> {
        Keys::new(secrets, limit).map(Sealer)
    }

    /// Append records carrying `plain` as application data to `out`.
    pub fn seal(&mut self, plain: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
        for chunk in plain.chunks(MAX_PLAIN) {
            self.record(APP_DATA, chunk, out)?;
        }
        Ok(())
    }

    /// Append the close_notify alert to `out`.
    pub fn close_notify(&mut self, out: &mut Vec<u8>) -> Result<(), String> {
        self.record(ALERT, &[1, CLOSE_NOTIFY], out)
    }

    fn record(&mut self, inner: u8, plain: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
        let nonce = self.0.next_nonce()?;
        let head = header(plain.len() + 1 + TAG);
        out.reserve(HEADER + plain.len() + 1 + TAG);
        out.extend_from_slice(&head);
        let body = out.len();
        out.extend_from_slice(plain);
        out.push(inner);
        let tag = self.0.key.seal_in_place_separate_tag(nonce, aead::Aad::from(head), &mut out[body..]).map_err(|_| "sealing failed")?;
        out.extend_from_slice(tag.as_ref());
        Ok(())
    }
}

/// What the start of a buffer holds.
#[derive(Debug, PartialEq, Eq)]
pub enum Opened {
    /// Not a whole record yet: this many bytes in all are needed.
    Need(usize),
    /// Application data at `plain` (within the buffer); the record took `len` bytes.
    Data { len: usize, plain: Range<usize> },
    /// The peer's close_notify: the stream's end.
    Closed,
    /// A record that carries nothing for the reader (a session ticket).
    Skip { len: usize },
}

/// The receiving direction.
pub struct Opener(Keys);

impl Opener {
    pub fn new(secrets: (u64, ConnectionTrafficSecrets), limit: u64) -> Result<Opener, String> {
        Keys::new(secrets, limit).map(Opener)
    }

    /// Open the record at the start of `buf`, in place.
    pub fn open(&mut self, buf: &mut [u8]) -> Result<Opened, String> {
        self.open_at(buf, 0, HEADER)
    }

    /// Open the record at `buf[at..]` with its plaintext put at `buf[to..]`
    /// (`to <= at + HEADER`: a record's plaintext is never longer than it),
    /// decrypted as it moves.
    pub fn open_at(&mut self, buf: &mut [u8], at: usize, to: usize) -> Result<Opened, String> {
        assert!(to <= at + HEADER, "plaintext is put at or before the record's body");
        let rest = &buf[at..];
        let len = declared(rest)?.unwrap_or(HEADER);
        if rest.len() < len {
            return Ok(Opened::Need(len));
        }
        if rest[0] != APP_DATA {
            return Err(format!("a TLS record of type {} after the handshake", rest[0]));
        }
        let head: [u8; HEADER] = rest[..HEADER].try_into().expect("a whole record has a header");
        let nonce = self.0.next_nonce()?;
        let opened = self
            .0
            .key
            .open_within(nonce, aead::Aad::from(head), &mut buf[to..at + len], at + HEADER - to..)
            .map_err(|_| "a TLS record failed its integrity check")?;
        // The inner type is the last nonzero byte; zeros after it are padding.
        let Some(end) = opened.iter().rposition(|&b| b != 0) else { return Err("a TLS record without a content type".into()) };
        let plain = to..to + end;
        match opened[end] {
            APP_DATA => Ok(Opened::Data { len, plain }),
            ALERT if opened[..end] == [1, CLOSE_NOTIFY] || opened[..end] == [2, CLOSE_NOTIFY] => Ok(Opened::Closed),
            ALERT => Err(format!("the peer's TLS alert {:?}", &opened[..end])),
            HANDSHAKE if only_tickets(&opened[..end]) => Ok(Opened::Skip { len }),
            HANDSHAKE => Err("a TLS handshake message (a key update?) on a stream that owns its records".into()),
            other => Err(format!("a TLS record of inner type {other}")),
        }
    }
}

/// The length of the whole record at the start of `buf`, if it is all there;
/// an error for a length no record may have.
pub fn whole_record(buf: &[u8]) -> Result<Option<usize>, String> {
    Ok(declared(buf)?.filter(|&len| buf.len() >= len))
}

/// The length (header included) the record at the start of `buf` declares,
/// once its header is there; an error for a length no record may have.
fn declared(buf: &[u8]) -> Result<Option<usize>, String> {
    let Some(&[_, _, _, hi, lo]) = buf.get(..HEADER) else { return Ok(None) };
    let body = usize::from(u16::from_be_bytes([hi, lo]));
    if body > MAX_CIPHER {
        return Err(format!("a TLS record of {body} bytes (at most {MAX_CIPHER})"));
    }
    Ok(Some(HEADER + body))
}

/// Whether handshake bytes are whole NewSessionTicket messages only.
fn only_tickets(mut msgs: &[u8]) -> bool {
    while let [kind, a, b, c, rest @ ..] = msgs {
        let len = u32::from_be_bytes([0, *a, *b, *c]) as usize;
        if *kind != NEW_SESSION_TICKET || rest.len() < len {
            return false;
        }
        msgs = &rest[len..];
    }
    msgs.is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::crypto::cipher::{AeadKey, Iv};

    fn secrets(byte: u8) -> ConnectionTrafficSecrets {
        ConnectionTrafficSecrets::Aes256Gcm { key: AeadKey::from([byte; 32]), iv: Iv::from([byte; 12]) }
    }

    fn pair(seq: u64) -> (Sealer, Opener) {
        (Sealer::new((seq, secrets(7)), 1 << 24).unwrap(), Opener::new((seq, secrets(7)), 1 << 24).unwrap())
    }

    fn open_all(opener: &mut Opener, mut buf: Vec<u8>) -> Vec<u8> {
        let mut plain = Vec::new();
        let mut at = 0;
        while at < buf.len() {
            match opener.open(&mut buf[at..]).unwrap() {
                Opened::Data { len, plain: r } => {
                    plain.extend_from_slice(&buf[at + r.start..at + r.end]);
                    at += len;
                }
                other => panic!("{other:?}"),
            }
        }
        plain
    }

    #[test]
    fn plaintext_crosses_in_records_of_at_most_16_kib() {
        let (mut s, mut o) = pair(3);
        let data: Vec<u8> = (0..40_000u32).map(|i| (i % 251) as u8).collect();
        let mut out = Vec::new();
        s.seal(&data, &mut out).unwrap();
        assert_eq!(out.len(), data.len() + 3 * (HEADER + 1 + TAG), "three records");
        assert_eq!(open_all(&mut o, out), data);
    }

    /// Records read back to back into one buffer are opened with their
    /// plaintext moved together at its front, as a large read does.
    #[test]
    fn records_opened_into_the_front_of_their_buffer() {
        let (mut s, mut o) = pair(9);
        let data: Vec<u8> = (0..50_000u32).map(|i| (i % 241) as u8).collect();
        let mut buf = Vec::new();
        s.seal(&data, &mut buf).unwrap();
        let (mut at, mut to) = (0, 0);
        while at < buf.len() {
            match o.open_at(&mut buf, at, to).unwrap() {
                Opened::Data { len, plain } => {
                    assert_eq!(plain.start, to);
                    (at, to) = (at + len, plain.end);
                }
                other => panic!("{other:?}"),
            }
        }
        assert!(buf[..to] == data[..]);
    }

    #[test]
    fn a_partial_record_asks_for_the_rest() {
        let (mut s, mut o) = pair(0);
        let mut out = Vec::new();
        s.seal(b"hello", &mut out).unwrap();
        assert_eq!(o.open(&mut out[..3]).unwrap(), Opened::Need(HEADER));
        assert_eq!(o.open(&mut out[..7]).unwrap(), Opened::Need(out.len()));
        assert_eq!(o.open(&mut out).unwrap(), Opened::Data { len: out.len(), plain: HEADER..HEADER + 5 });
    }

    #[test]
    fn tampered_reordered_or_oversized_records_are_errors() {
        let (mut s, mut o) = pair(0);
        let mut out = Vec::new();
        s.seal(b"one", &mut out).unwrap();
        let first = out.len();
        s.seal(b"two", &mut out).unwrap();
        // The second record first: its nonce is not the one expected.
        assert!(o.open(&mut out[first..]).is_err());
        let (mut s, mut o) = pair(0);
        let mut out = Vec::new();
        s.seal(b"one", &mut out).unwrap();
        out[HEADER] ^= 1;
        assert!(o.open(&mut out).is_err());
        let mut huge = vec![APP_DATA, 3, 3, 0xff, 0xff];
        assert!(o.open(&mut huge).unwrap_err().contains("at most"));
    }

    #[test]
    fn close_notify_ends_and_the_limit_stops_a_writer() {
        let (mut s, mut o) = pair(0);
        let mut out = Vec::new();
        s.close_notify(&mut out).unwrap();
        assert_eq!(o.open(&mut out).unwrap(), Opened::Closed);
        let mut s = Sealer::new((5, secrets(1)), 6).unwrap();
        s.seal(b"x", &mut Vec::new()).unwrap();
        assert!(s.seal(b"y", &mut Vec::new()).unwrap_err().contains("limit"));
    }

    #[test]
    fn tickets_are_skipped_other_handshake_messages_refused() {
        assert!(only_tickets(&[4, 0, 0, 2, 9, 9, 4, 0, 0, 0]));
        assert!(!only_tickets(&[24, 0, 0, 1, 0])); // key update
        assert!(!only_tickets(&[4, 0, 0, 5, 9])); // cut
    }
}
