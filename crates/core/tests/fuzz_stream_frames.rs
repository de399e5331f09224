//! Fuzz targets for the stream channel's binary frames (`wire::frame`):
//! the message header decoder, a whole stream of frames read the way an
//! instance's reader reads it (`read_frame`, then the payload), and the
//! acknowledgement decoder. Properties: no panic, nothing accepted that
//! breaks the length rules, no allocation beyond the table bound, and
//! encode then decode gives back what was sent.

mod fuzz_support;

use std::io::{Cursor, Read};

use mpiws_core::wire::frame::{
    decode_ack_header, decode_message_header, encode_ack, encode_ack_request, encode_message, parts_total, read_frame, Envelope, Frame,
    MessageHeader, ACK_HEADER, MAX_PARTS, MSG_HEADER,
};
use proptest::prelude::*;

#[global_allocator]
static ALLOC: fuzz_support::Watching = fuzz_support::Watching;

/// The largest message the fuzzed reader accepts (an endpoint's `max_message`).
const MAX: u64 = 1 << 20;
/// The most a frame's tables may take: `MAX_PARTS` part lengths and ranks.
const TABLE_BOUND: usize = 12 * MAX_PARTS as usize;

/// What a reader took off a stream, frame by frame.
#[derive(Debug, PartialEq)]
enum Taken {
    AckRequest,
    Message { env: Envelope, payload: Vec<u8>, ack_now: bool },
}

/// Read frames as `net::reader::Reader::step` does, until the stream ends or a
/// frame is refused (after which the reader closes the stream). Checks, for
/// every message accepted, the rules the reader relies on.
fn drive(bytes: &[u8], source: u32) -> (Vec<Taken>, Option<Frame>) {
    let mut r = Cursor::new(bytes);
    let mut got = Vec::new();
    loop {
        let (frame, largest) = fuzz_support::largest_allocation(|| read_frame(&mut r, source, MAX, false));
        assert!(largest <= TABLE_BOUND, "read_frame allocated {largest} bytes");
        match frame {
            Err(_) => return (got, None), // closed, or cut off
            Ok(Frame::AckRequest) => got.push(Taken::AckRequest),
            Ok(refused @ Frame::Refused { .. }) => return (got, Some(refused)),
            Ok(Frame::Message(MessageHeader { env, length, ack_now, .. })) => {
                assert!(length <= MAX, "accepted a message of {length} bytes");
                assert!(
                    env.parts.is_empty() || parts_total(&env.parts) == Some(length),
                    "accepted a table that does not add up: {env:?} {length}"
                );
                assert!(env.tag >= 0 && env.source == source);
                let mut payload = Vec::new();
                match (&mut r).take(length).read_to_end(&mut payload) {
                    Ok(n) if n as u64 == length => got.push(Taken::Message { env, payload, ack_now }),
                    _ => return (got, None), // cut off mid-payload
                }
            }
        }
    }
}

/// Part lengths that add up to `len`: `cuts` points in 0..=len.
fn table_of(len: usize, mut cuts: Vec<usize>) -> Vec<u64> {
    cuts.iter_mut().for_each(|c| *c %= len + 1);
    cuts.sort_unstable();
    let mut at = 0;
    let mut parts: Vec<u64> = cuts
        .iter()
        .map(|&c| {
            let p = c - at;
            at = c;
            p as u64
        })
        .collect();
    if !parts.is_empty() {
        parts.push((len - at) as u64);
    }
    parts
}

/// A message (envelope and payload) as a sender makes it.
fn message(source: u32) -> impl Strategy<Value = (Envelope, Vec<u8>, bool)> {
    (
        (any::<u64>(), 0..=i32::MAX, proptest::option::of(any::<u64>()), any::<bool>(), any::<bool>()),
        proptest::collection::vec(any::<u8>(), 0..300),
        proptest::collection::vec(any::<usize>(), 0..6),
        proptest::collection::vec(any::<u32>(), 0..6),
    )
        .prop_map(move |((context, tag, seq, sync, ack_now), payload, cuts, forward)| {
            let parts = table_of(payload.len(), cuts);
            (Envelope { source, context, tag, seq, sync, parts, forward }, payload, ack_now)
        })
}

/// A stream's bytes: messages and ack requests, as senders write them.
fn stream(source: u32) -> impl Strategy<Value = (Vec<u8>, Vec<Taken>)> {
    proptest::collection::vec(prop_oneof![1 => Just(None), 6 => message(source).prop_map(Some)], 0..8).prop_map(|frames| {
        let mut bytes = Vec::new();
        let mut expect = Vec::new();
        for f in frames {
            match f {
                None => {
                    bytes.extend_from_slice(&encode_ack_request());
                    expect.push(Taken::AckRequest);
                }
                Some((env, payload, ack_now)) => {
                    bytes.extend(encode_message(&env, payload.len() as u64, ack_now));
                    bytes.extend_from_slice(&payload);
                    expect.push(Taken::Message { env, payload, ack_now });
                }
            }
        }
        (bytes, expect)
    })
}

/// A part length worth trying: small, near a power of two, or near the top
/// of a u64 (where sums wrap).
fn length() -> impl Strategy<Value = u64> {
    prop_oneof![
        0..1024u64,
        (0..64u32, -2..3i64).prop_map(|(s, d)| (1u64 << s).wrapping_add(d as u64)),
        (0..1024u64).prop_map(|d| u64::MAX - d),
        any::<u64>()
    ]
}

proptest! {
    #![proptest_config(fuzz_support::config())]

    /// Any 40 bytes: decoded or refused, and what is decoded is in bounds.
    #[test]
    fn message_header_decoder(h in proptest::array::uniform32(any::<u8>()), tail in any::<[u8; 8]>(), source in any::<u32>()) {
        let mut fixed = [0u8; MSG_HEADER];
        fixed[..32].copy_from_slice(&h);
        fixed[32..].copy_from_slice(&tail);
        if let Ok(m) = decode_message_header(&fixed, source) {
            prop_assert!(fixed[0] == 1 && m.env.tag >= 0 && m.nparts <= MAX_PARTS && m.nforward <= MAX_PARTS);
            prop_assert!(m.env.parts.is_empty() && m.env.forward.is_empty() && m.env.source == source);
        }
    }

    /// What senders write is read back, frame for frame, byte for byte.
    #[test]
    fn stream_frames_round_trip((bytes, expect) in stream(3)) {
        let (got, refused) = drive(&bytes, 3);
        prop_assert!(refused.is_none(), "refused {refused:?}");
        prop_assert_eq!(got, expect);
    }

    /// A stream damaged anywhere (bytes changed, cut short, part lengths
    /// replaced by ones that overflow): read without panic; whatever is
    /// accepted keeps the rules (`drive` checks them).
    #[test]
    fn damaged_streams((bytes, _) in stream(1),
                       flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..6),
                       lengths in proptest::collection::vec((any::<usize>(), length()), 0..4),
                       cut in any::<usize>()) {
        let mut bytes = bytes;
        if !bytes.is_empty() {
            for (at, b) in flips {
                let i = at % bytes.len();
                bytes[i] = b;
            }
            for (at, l) in lengths {
                let i = at % bytes.len();
                let n = (bytes.len() - i).min(8);
                bytes[i..i + n].copy_from_slice(&l.to_le_bytes()[..n]);
            }
            bytes.truncate(cut % (bytes.len() + 1));
        }
        drive(&bytes, 1);
    }

    /// One message frame with any part table and length (the attack of
    /// finding 4: a table whose sum wraps round to the length).
    #[test]
    fn message_with_any_part_table(parts in proptest::collection::vec(length(), 1..5), length_ in length(), wrap in any::<bool>()) {
        let length_ = if wrap { parts.iter().fold(0u64, |a, &p| a.wrapping_add(p)) } else { length_ };
        let env = Envelope { source: 0, context: 1, tag: 0, seq: Some(0), sync: false, parts: parts.clone(), forward: vec![] };
        let mut bytes = encode_message(&env, length_, true);
        let payload = if length_ <= MAX { length_ as usize } else { 0 };
        bytes.extend(std::iter::repeat_n(7u8, payload));
        let (got, refused) = drive(&bytes, 0);
        let fits = parts_total(&parts) == Some(length_) && length_ <= MAX;
        prop_assert_eq!(got.len() == 1, fits);
        prop_assert_eq!(refused.is_some(), !fits);
    }

    /// Any 24 bytes decode; an ack with zero padding re-encodes to itself;
    /// every ack a receiver writes decodes to what it meant.
    #[test]
    fn ack_decoder(h in any::<[u8; 24]>(), kind in any::<u8>(), seq in any::<u64>(), class in any::<i32>(), text in ".{0,64}") {
        let (k, s, c, tlen) = decode_ack_header(&h);
        if h[1..4] == [0, 0, 0] && h[20..24] == [0, 0, 0, 0] && tlen <= 4096 {
            let again = encode_ack(k, s, c, &"x".repeat(tlen as usize));
            prop_assert_eq!(&again[..ACK_HEADER], &h[..]);
        }
        let a = encode_ack(kind, seq, class, &text);
        let fixed: [u8; ACK_HEADER] = a[..ACK_HEADER].try_into().unwrap();
        prop_assert_eq!(decode_ack_header(&fixed), (kind, seq, class, text.len() as u32));
        prop_assert_eq!(&a[ACK_HEADER..], text.as_bytes());
    }
}

/// Finding 4's frame, exactly: 1 TiB plus what wraps round to 1 byte.
#[test]
fn a_part_table_that_wraps_round_is_refused() {
    let huge = 1u64 << 40;
    let env = Envelope {
        source: 1,
        context: 1,
        tag: 1,
        seq: Some(0),
        sync: false,
        parts: vec![huge, 0u64.wrapping_sub(huge) + 1],
        forward: vec![],
    };
    let mut bytes = encode_message(&env, 1, true);
    bytes.push(b'x');
    match read_frame(&mut Cursor::new(bytes), 1, MAX, false).unwrap() {
        Frame::Refused { env: Some(e), error } => {
            assert_eq!((e.seq, error.class), (Some(0), mpiws_core::ErrorClass::Arg));
            assert!(error.message.contains("part lengths"), "{}", error.message);
        }
        other => panic!("accepted: {other:?}"),
    }
}
