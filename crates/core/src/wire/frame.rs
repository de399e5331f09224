//! The seam between bytes on the wire and meaning: a message's envelope as
//! HTTP headers, and its payload as a list of byte chunks (the raw HTTP body).
//!
//! A store request is `POST /domains/{domain}/ranks/{dest}/messages` with the
//! headers below; nothing about the payload is encoded (no base64, no XML).

use std::io::Read;

use bytes::Bytes;
use http::HeaderMap;

use crate::error::{err, Error, ErrorClass, Result};

pub const H_SOURCE: &str = "mpiws-source";
pub const H_CONTEXT: &str = "mpiws-context";
pub const H_TAG: &str = "mpiws-tag";
pub const H_SEQ: &str = "mpiws-seq";
pub const H_SYNC: &str = "mpiws-sync";
pub const H_PARTS: &str = "mpiws-parts";
pub const H_FORWARD: &str = "mpiws-forward";

/// Context of COMM_WORLD: the default when a store names none.
pub const WORLD_CONTEXT: u64 = 1;

/// Largest tag a sender may use (MPI requires at least 32767).
pub const TAG_UB: i32 = i32::MAX;

/// Everything about a message except its payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Envelope {
    /// Sender's rank in the domain (its world rank).
    pub source: u32,
    /// Communicator context: messages only match receives of the same context.
    pub context: u64,
    pub tag: i32,
    /// Per (sender, receiver) sequence number; `None` for messages from plain
    /// HTTP clients, which are filed in arrival order.
    pub seq: Option<u64>,
    /// Synchronous send: the store is acknowledged only once a receive matched it.
    pub sync: bool,
    /// Lengths of the logical parts of the body (pickled object + out-of-band
    /// buffers); empty means one part.
    pub parts: Vec<u64>,
    /// A broadcast tree to pass the message on in: the world ranks of the
    /// receiver's subtree, the receiver first. Its endpoint forwards the
    /// message to the subtrees at once, whatever its application is doing.
    pub forward: Vec<u32>,
}

/// The payload as it came off the wire: chunks are kept, never concatenated.
#[derive(Debug, Clone, Default)]
pub struct Payload {
    pub chunks: Vec<Bytes>,
}

impl Payload {
    pub fn from_chunks(chunks: Vec<Bytes>) -> Self {
        Payload { chunks }
    }

    pub fn len(&self) -> usize {
        self.chunks.iter().map(|c| c.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Copy the payload into `dest`, which must be at least `self.len()` long.
    pub fn copy_to(&self, dest: &mut [u8]) {
        let mut at = 0;
        for c in &self.chunks {
            dest[at..at + c.len()].copy_from_slice(c);
            at += c.len();
        }
    }

    /// Split the payload into its logical parts as shared slices: no copy
    /// where a part lies within one chunk (the usual case off a stream).
    pub fn into_parts(self, parts: &[u64]) -> Vec<Bytes> {
        if self.chunks.len() == 1 {
            let lens = self.part_lengths(parts);
            let whole = self.chunks.into_iter().next().unwrap_or_default();
            let mut at = 0usize;
            return lens
                .into_iter()
                .map(|l| {
                    let b = whole.slice(at..at + l);
                    at += l;
                    b
                })
                .collect();
        }
        self.split_parts(parts).into_iter().map(Bytes::from).collect()
    }

    /// Split the payload into its logical parts, copying each into one buffer.
    pub fn split_parts(&self, parts: &[u64]) -> Vec<Vec<u8>> {
        let lens = self.part_lengths(parts);
        let mut out: Vec<Vec<u8>> = lens.iter().map(|&l| Vec::with_capacity(l)).collect();
        let mut part = 0;
        for c in &self.chunks {
            let mut c = &c[..];
            while !c.is_empty() && part < out.len() {
                let room = lens[part] - out[part].len();
                let n = room.min(c.len());
                out[part].extend_from_slice(&c[..n]);
                c = &c[n..];
                if out[part].len() == lens[part] {
                    part += 1;
                }
            }
        }
        out
    }

    /// The length of each part, cut to the bytes the payload really has:
    /// a table from the wire never makes us allocate beyond the payload
    /// (the receiver checks it adds up, `parts_fit`; this is the backstop).
    /// An empty table is one part, the whole payload.
    fn part_lengths(&self, parts: &[u64]) -> Vec<usize> {
        let mut left = self.len();
        if parts.is_empty() {
            return vec![left];
        }
        parts
            .iter()
            .map(|&p| {
                let l = usize::try_from(p).unwrap_or(usize::MAX).min(left);
                left -= l;
                l
            })
            .collect()
    }
}

/// The sum of a part table, or None if it overflows a u64: a table that
/// wraps round must never pass for one that adds up.
pub fn parts_total(parts: &[u64]) -> Option<u64> {
    parts.iter().try_fold(0u64, |sum, &p| sum.checked_add(p))
}

/// Whether a part table describes a payload of `len` bytes (an empty table
/// is one part, so it always does).
pub fn parts_fit(parts: &[u64], len: u64) -> bool {
    parts.is_empty() || parts_total(parts) == Some(len)
}

fn header<'a>(h: &'a HeaderMap, name: &str) -> Result<Option<&'a str>> {
    match h.get(name) {
        None => Ok(None),
        Some(v) => match v.to_str() {
            Ok(s) => Ok(Some(s.trim())),
            Err(_) => err(ErrorClass::Arg, format!("header {name} is not ASCII")),
        },
    }
}

fn parse<T: std::str::FromStr>(name: &str, v: &str) -> Result<T> {
    v.parse::<T>().or_else(|_| err(ErrorClass::Arg, format!("header {name}: cannot parse {v:?}")))
}

/// A comma-separated header of numbers (`mpiws-parts`, `mpiws-forward`):
/// empty if absent, at most `MAX_PARTS` of them (as on a stream).
fn list<T: std::str::FromStr>(h: &HeaderMap, name: &str) -> Result<Vec<T>> {
    let v = match header(h, name)? {
        None | Some("") => return Ok(Vec::new()),
        Some(v) => v,
    };
    if v.split(',').nth(MAX_PARTS as usize).is_some() {
        return err(ErrorClass::Arg, format!("header {name}: more than {MAX_PARTS} entries"));
    }
    v.split(',').map(|p| parse::<T>(name, p.trim())).collect()
}

impl Envelope {
    /// Read an envelope from a store request's headers. `body_len` checks `mpiws-parts`.
    pub fn from_headers(h: &HeaderMap, body_len: Option<u64>) -> Result<Envelope> {
        let source = match header(h, H_SOURCE)? {
            Some(v) => parse::<u32>(H_SOURCE, v)?,
            None => return err(ErrorClass::Arg, format!("missing header {H_SOURCE}")),
        };
        let context = match header(h, H_CONTEXT)? {
            Some(v) => parse::<u64>(H_CONTEXT, v)?,
            None => WORLD_CONTEXT,
        };
        let tag = match header(h, H_TAG)? {
            Some(v) => parse::<i32>(H_TAG, v)?,
            None => 0,
        };
        if tag < 0 {
            return err(ErrorClass::Tag, format!("invalid tag {tag}: must be 0..={TAG_UB}"));
        }
        let seq = match header(h, H_SEQ)? {
            Some(v) => Some(parse::<u64>(H_SEQ, v)?),
            None => None,
        };
        let sync = match header(h, H_SYNC)? {
            None | Some("0") | Some("false") => false,
            Some("1") | Some("true") => true,
            Some(v) => return err(ErrorClass::Arg, format!("header {H_SYNC}: expected 0 or 1, got {v:?}")),
        };
        let parts = list::<u64>(h, H_PARTS)?;
        if parts_total(&parts).is_none() {
            return err(ErrorClass::Arg, format!("header {H_PARTS} adds up to more than 2^64 bytes"));
        }
        if let Some(len) = body_len {
            if !parts_fit(&parts, len) {
                return err(ErrorClass::Arg, format!("header {H_PARTS} does not add up to the body length {len}"));
            }
        }
        let forward = list::<u32>(h, H_FORWARD)?;
        Ok(Envelope { source, context, tag, seq, sync, parts, forward })
    }

    /// The headers that carry this envelope.
    pub fn to_headers(&self) -> Vec<(&'static str, String)> {
        let mut v = vec![(H_SOURCE, self.source.to_string()), (H_CONTEXT, self.context.to_string()), (H_TAG, self.tag.to_string())];
        if let Some(s) = self.seq {
            v.push((H_SEQ, s.to_string()));
        }
        if self.sync {
            v.push((H_SYNC, "1".into()));
        }
        if !self.parts.is_empty() {
            let p: Vec<String> = self.parts.iter().map(|p| p.to_string()).collect();
            v.push((H_PARTS, p.join(",")));
        }
        if !self.forward.is_empty() {
            let f: Vec<String> = self.forward.iter().map(|w| w.to_string()).collect();
            v.push((H_FORWARD, f.join(",")));
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn envelope_round_trips_through_headers() {
        let e = Envelope { source: 3, context: 77, tag: 9, seq: Some(12), sync: true, parts: vec![4, 6], forward: vec![5, 6, 7] };
        let mut h = HeaderMap::new();
        for (k, v) in e.to_headers() {
            h.insert(k, HeaderValue::from_str(&v).unwrap());
        }
        assert_eq!(Envelope::from_headers(&h, Some(10)).unwrap(), e);
    }

    #[test]
    fn plain_client_needs_only_a_source() {
        let e = Envelope::from_headers(&headers(&[(H_SOURCE, "1")]), Some(5)).unwrap();
        assert_eq!((e.source, e.context, e.tag, e.seq, e.sync), (1, WORLD_CONTEXT, 0, None, false));
    }

    #[test]
    fn malformed_headers_are_rejected_with_a_class() {
        assert!(Envelope::from_headers(&headers(&[]), None).is_err());
        let e = Envelope::from_headers(&headers(&[(H_SOURCE, "x")]), None).unwrap_err();
        assert_eq!(e.class, ErrorClass::Arg);
        let e = Envelope::from_headers(&headers(&[(H_SOURCE, "0"), (H_TAG, "-4")]), None).unwrap_err();
        assert_eq!(e.class, ErrorClass::Tag);
        let e = Envelope::from_headers(&headers(&[(H_SOURCE, "0"), (H_PARTS, "1,2")]), Some(5)).unwrap_err();
        assert_eq!(e.class, ErrorClass::Arg);
    }

    #[test]
    fn part_tables_that_wrap_round_do_not_add_up() {
        let huge = 1u64 << 40;
        let wraps = [huge, 0u64.wrapping_sub(huge) + 1]; // sums to 1 mod 2^64
        assert_eq!(parts_total(&wraps), None);
        assert!(!parts_fit(&wraps, 1) && parts_fit(&[], 7) && parts_fit(&[3, 4], 7) && !parts_fit(&[3, 4], 8));
        let h = headers(&[(H_SOURCE, "0"), (H_PARTS, &format!("{},{}", wraps[0], wraps[1]))]);
        assert_eq!(Envelope::from_headers(&h, Some(1)).unwrap_err().class, ErrorClass::Arg);
    }

    #[test]
    fn payload_splits_across_chunk_boundaries() {
        let p = Payload::from_chunks(vec![Bytes::from_static(b"abc"), Bytes::from_static(b"defgh")]);
        assert_eq!(p.split_parts(&[2, 5, 1]), vec![b"ab".to_vec(), b"cdefg".to_vec(), b"h".to_vec()]);
        let mut all = vec![0u8; 8];
        p.copy_to(&mut all);
        assert_eq!(&all, b"abcdefgh");
    }
}

// ---- the stream channel's binary frames ------------------------------------
//
// After `POST .../stream` is upgraded (101), the connection carries message
// frames one way and acknowledgement frames the other. Little-endian.
//
// message: kind=1 u8, flags u8 (1=sync, 2=has seq, 4=acknowledge storing
//          at once, 8=by reference), nrefs u16 (0 unless by reference),
//          tag i32, context u64, seq u64, length u64, nparts u32,
//          nforward u32, nparts x u64 part lengths, nforward x u32 world
//          ranks (the broadcast subtree to forward to), then `length`
//          payload bytes; by reference (same-host streams that negotiated
//          it, `net::local`), nrefs x (address u64, length u64) of the
//          payload in the sender's memory instead, for the receiver to copy
//          (`process_vm_readv`) before it acknowledges.
// ack request: kind=5 u8, then 39 zero bytes (answered by a stored ack).
// ack:     kind u8 (2=stored, 3=matched, 4=error), 0 u8 x3, class i32,
//          seq u64, text length u32, 0 u32, then the error text (UTF-8).
//          "stored" is cumulative: every message up to `seq` was filed.

pub const MSG_HEADER: usize = 40;
pub const ACK_HEADER: usize = 24;
pub const KIND_MESSAGE: u8 = 1;
pub const ACK_STORED: u8 = 2;
pub const ACK_MATCHED: u8 = 3;
pub const ACK_ERROR: u8 = 4;
pub const KIND_ACK_REQUEST: u8 = 5;
const FLAG_SYNC: u8 = 1;
const FLAG_SEQ: u8 = 2;
const FLAG_ACK_NOW: u8 = 4;
const FLAG_BY_REF: u8 = 8;
/// More parts than this in one message is not a real message.
pub const MAX_PARTS: u32 = 1 << 16;

/// Where a message's payload lies in its sender's memory: (address, length) runs.
pub type Refs = Vec<(u64, u64)>;

/// Header (and part table) of a message frame; the payload follows it.
/// `ack_now`: the receiver acknowledges storing it at once, not lazily.
pub fn encode_message(env: &Envelope, length: u64, ack_now: bool) -> Vec<u8> {
    let mut h = Vec::with_capacity(MSG_HEADER + 8 * env.parts.len() + 4 * env.forward.len());
    let flags =
        if env.sync { FLAG_SYNC } else { 0 } | if env.seq.is_some() { FLAG_SEQ } else { 0 } | if ack_now { FLAG_ACK_NOW } else { 0 };
    h.extend_from_slice(&[KIND_MESSAGE, flags, 0, 0]);
    h.extend_from_slice(&env.tag.to_le_bytes());
    h.extend_from_slice(&env.context.to_le_bytes());
    h.extend_from_slice(&env.seq.unwrap_or(0).to_le_bytes());
    h.extend_from_slice(&length.to_le_bytes());
    h.extend_from_slice(&(env.parts.len() as u32).to_le_bytes());
    h.extend_from_slice(&(env.forward.len() as u32).to_le_bytes());
    for p in &env.parts {
        h.extend_from_slice(&p.to_le_bytes());
    }
    for w in &env.forward {
        h.extend_from_slice(&w.to_le_bytes());
    }
    h
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// The fixed part of a message frame.
#[derive(Debug)]
pub struct MessageHeader {
    /// The envelope without its parts and forward list (read next).
    pub env: Envelope,
    pub length: u64,
    pub nparts: u32,
    pub nforward: u32,
    pub ack_now: bool,
    /// By reference: the payload's runs in the sender's memory (read with
    /// the tables); empty when the payload follows in the stream.
    pub refs: Refs,
    nrefs: u16,
}

impl MessageHeader {
    /// Whether the payload is left in the sender's memory for the receiver to copy.
    pub fn by_reference(&self) -> bool {
        self.nrefs > 0
    }
}

/// A message frame's header and tables (`encode_message`) made to send its
/// payload by reference: the runs `refs` (at most `u16::MAX`) of the
/// sender's memory, which must stay as they are until the receiver
/// acknowledges the message (stored or matched), are named instead of
/// written. None when there are too many runs (then send it by value).
pub fn by_reference(header: &[u8], refs: &[(u64, u64)]) -> Option<Vec<u8>> {
    let n = u16::try_from(refs.len()).ok().filter(|&n| n > 0)?;
    let mut h = Vec::with_capacity(header.len() + 16 * refs.len());
    h.extend_from_slice(header);
    h[1] |= FLAG_BY_REF;
    h[2..4].copy_from_slice(&n.to_le_bytes());
    for (at, len) in refs {
        h.extend_from_slice(&at.to_le_bytes());
        h.extend_from_slice(&len.to_le_bytes());
    }
    Some(h)
}

/// A message frame's tag and context, read from its header.
pub fn tag_and_context(header: &[u8]) -> Option<(i32, u64)> {
    (header.len() >= MSG_HEADER && header[0] == KIND_MESSAGE)
        .then(|| (i32::from_le_bytes(header[4..8].try_into().unwrap()), u64_at(header, 8)))
}

/// Whether a message frame's header asks for its acknowledgement before
/// the sender completes it (synchronous, or not eager): only such a
/// message's payload may be left in the sender's memory.
pub fn acknowledged_first(header: &[u8]) -> bool {
    header.len() >= 2 && header[0] == KIND_MESSAGE && header[1] & (FLAG_SYNC | FLAG_ACK_NOW) != 0
}

pub fn decode_message_header(h: &[u8; MSG_HEADER], source: u32) -> Result<MessageHeader> {
    if h[0] != KIND_MESSAGE {
        return err(ErrorClass::Arg, format!("stream: expected a message frame, got kind {}", h[0]));
    }
    let tag = i32::from_le_bytes(h[4..8].try_into().unwrap());
    if tag < 0 {
        return err(ErrorClass::Tag, format!("invalid tag {tag}"));
    }
    let (nparts, nforward) = (u32_at(h, 32), u32_at(h, 36));
    if nparts > MAX_PARTS || nforward > MAX_PARTS {
        return err(ErrorClass::Arg, format!("stream: {nparts} parts, {nforward} forward ranks in one message"));
    }
    let env = Envelope {
        source,
        context: u64_at(h, 8),
        tag,
        seq: if h[1] & FLAG_SEQ != 0 { Some(u64_at(h, 16)) } else { None },
        sync: h[1] & FLAG_SYNC != 0,
        parts: Vec::new(),
        forward: Vec::new(),
    };
    let nrefs = if h[1] & FLAG_BY_REF != 0 { u16::from_le_bytes([h[2], h[3]]).max(1) } else { 0 };
    Ok(MessageHeader { env, length: u64_at(h, 24), nparts, nforward, ack_now: h[1] & FLAG_ACK_NOW != 0, refs: Vec::new(), nrefs })
}

/// A frame asking the receiver to acknowledge what it has stored so far.
pub fn encode_ack_request() -> [u8; MSG_HEADER] {
    let mut h = [0u8; MSG_HEADER];
    h[0] = KIND_ACK_REQUEST;
    h
}

pub fn decode_ranks(b: &[u8]) -> Vec<u32> {
    b.chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())).collect()
}

pub fn decode_parts(b: &[u8]) -> Vec<u64> {
    b.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap())).collect()
}

/// One frame as a stream's reader sees it, its tables read and checked.
#[derive(Debug)]
pub enum Frame {
    /// The sender asks for a (cumulative) acknowledgement.
    AckRequest,
    /// A message: its envelope, parts and forward list filled in; exactly
    /// `length` payload bytes follow, and `length` fits a `usize`.
    Message(MessageHeader),
    /// A frame to refuse: the stream is out of step after it, so only
    /// closing is safe. `env` is None when even its header was malformed.
    Refused { env: Option<Envelope>, error: Error },
}

/// Bytes of a message's part and forward tables: counted, never wrapped.
fn table_len(nparts: u32, nforward: u32) -> Option<usize> {
    let parts = usize::try_from(nparts).ok()?.checked_mul(8)?;
    let forward = usize::try_from(nforward).ok()?.checked_mul(4)?;
    parts.checked_add(forward)
}

/// Read the next frame's header and tables off a stream (not its payload).
/// `max` is the largest message accepted; `by_reference`: whether this
/// stream may carry payloads by reference. An I/O error means the stream
/// is closed or cut off.
pub fn read_frame(r: &mut impl Read, source: u32, max: u64, by_reference: bool) -> std::io::Result<Frame> {
    let mut h = [0u8; MSG_HEADER];
    r.read_exact(&mut h)?;
    if h[0] == KIND_ACK_REQUEST {
        return Ok(Frame::AckRequest);
    }
    let mut head = match decode_message_header(&h, source) {
        Ok(head) => head,
        Err(error) => return Ok(Frame::Refused { env: None, error }),
    };
    let Some(len) = table_len(head.nparts, head.nforward) else {
        let error = Error::new(ErrorClass::Arg, "stream: the part and forward tables are larger than memory");
        return Ok(Frame::Refused { env: Some(head.env), error });
    };
    let mut table = vec![0u8; len];
    r.read_exact(&mut table)?;
    let (parts, forward) = table.split_at(8 * head.nparts as usize);
    head.env.parts = decode_parts(parts);
    head.env.forward = decode_ranks(forward);
    if head.by_reference() {
        if !by_reference {
            let error = Error::new(ErrorClass::Arg, "stream: a payload by reference on a stream that did not negotiate it");
            return Ok(Frame::Refused { env: Some(head.env), error });
        }
        let mut table = vec![0u8; 16 * head.nrefs as usize];
        r.read_exact(&mut table)?;
        head.refs = table.chunks_exact(16).map(|c| (u64_at(c, 0), u64_at(c, 8))).collect();
    }
    let length = head.length;
    let refs_total = head.refs.iter().try_fold(0u64, |sum, &(_, len)| sum.checked_add(len));
    let error = if head.by_reference() && refs_total != Some(length) {
        Error::new(ErrorClass::Arg, "stream: the payload's runs do not add up to the message length")
    } else if length > max || usize::try_from(length).is_err() {
        Error::new(ErrorClass::Count, format!("message of {length} bytes larger than this endpoint's limit of {max} bytes"))
    } else if !parts_fit(&head.env.parts, length) {
        Error::new(ErrorClass::Arg, "part lengths do not add up to the message length")
    } else {
        return Ok(Frame::Message(head));
    };
    Ok(Frame::Refused { env: Some(head.env), error })
}

pub fn encode_ack(kind: u8, seq: u64, class: i32, text: &str) -> Vec<u8> {
    let mut a = Vec::with_capacity(ACK_HEADER + text.len());
    a.extend_from_slice(&[kind, 0, 0, 0]);
    a.extend_from_slice(&class.to_le_bytes());
    a.extend_from_slice(&seq.to_le_bytes());
    a.extend_from_slice(&(text.len() as u32).to_le_bytes());
    a.extend_from_slice(&0u32.to_le_bytes());
    a.extend_from_slice(text.as_bytes());
    a
}

/// (kind, seq, error class, text length) of an ack header.
pub fn decode_ack_header(h: &[u8; ACK_HEADER]) -> (u8, u64, i32, u32) {
    (h[0], u64_at(h, 8), i32::from_le_bytes(h[4..8].try_into().unwrap()), u32_at(h, 16))
}

#[cfg(test)]
mod stream_frame_tests {
    use super::*;

    #[test]
    fn message_frames_round_trip() {
        let env = Envelope { source: 4, context: 99, tag: 7, seq: Some(31), sync: true, parts: vec![3, 5], forward: vec![4, 9, 2] };
        let h = encode_message(&env, 8, true);
        assert_eq!(h.len(), MSG_HEADER + 16 + 12);
        let fixed: [u8; MSG_HEADER] = h[..MSG_HEADER].try_into().unwrap();
        let MessageHeader { env: mut got, length, nparts, nforward, ack_now, .. } = decode_message_header(&fixed, 4).unwrap();
        got.parts = decode_parts(&h[MSG_HEADER..MSG_HEADER + 16]);
        got.forward = decode_ranks(&h[MSG_HEADER + 16..]);
        assert_eq!((got, length, nparts, nforward, ack_now), (env, 8, 2, 3, true));
    }

    #[test]
    fn a_payload_by_reference_is_read_as_its_runs_only_where_the_stream_allows_it() {
        let env = Envelope { source: 2, context: 1, tag: 3, seq: Some(9), sync: false, parts: vec![], forward: vec![] };
        let header = encode_message(&env, 300, true);
        assert!(acknowledged_first(&header) && !acknowledged_first(&encode_message(&env, 300, false)));
        let framed = by_reference(&header, &[(0x1000, 100), (0x9000, 200)]).unwrap();
        let read = |bytes: &[u8], allowed| read_frame(&mut std::io::Cursor::new(bytes.to_vec()), 2, 1 << 20, allowed).unwrap();
        match read(&framed, true) {
            Frame::Message(m) => {
                assert!(m.by_reference());
                assert_eq!((m.refs, m.length, m.env.seq), (vec![(0x1000, 100), (0x9000, 200)], 300, Some(9)));
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(read(&framed, false), Frame::Refused { .. }), "not negotiated");
        let short = by_reference(&header, &[(0x1000, 100)]).unwrap();
        assert!(matches!(read(&short, true), Frame::Refused { .. }), "runs must add up to the length");
        let wraps = by_reference(&header, &[(0, u64::MAX), (0, 301)]).unwrap();
        assert!(matches!(read(&wraps, true), Frame::Refused { .. }), "the sum is checked, never wrapped");
        assert!(by_reference(&header, &[]).is_none());
        match read(&header, false) {
            Frame::Message(m) => assert!(!m.by_reference() && m.refs.is_empty()),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn ack_frames_round_trip_and_bad_frames_are_refused() {
        let a = encode_ack(ACK_ERROR, 12, 6, "bad rank");
        let fixed: [u8; ACK_HEADER] = a[..ACK_HEADER].try_into().unwrap();
        assert_eq!(decode_ack_header(&fixed), (ACK_ERROR, 12, 6, 8));
        assert_eq!(&a[ACK_HEADER..], b"bad rank");
        let mut h = [0u8; MSG_HEADER];
        assert!(decode_message_header(&h, 0).is_err());
        h[0] = KIND_MESSAGE;
        h[4..8].copy_from_slice(&(-1i32).to_le_bytes());
        assert_eq!(decode_message_header(&h, 0).unwrap_err().class, ErrorClass::Tag);
    }
}
