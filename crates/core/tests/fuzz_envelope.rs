//! Fuzz targets for a store's envelope and payload (`wire::frame`):
//! `Envelope::from_headers` on any header map and body length, and the
//! `mpiws-parts` splitting (`Payload::split_parts` / `into_parts`) on any
//! table and chunking. Properties: no panic, what is accepted keeps the
//! length rules, no allocation beyond the payload, and an envelope survives
//! its trip through headers.

mod fuzz_support;

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue};
use mpiws_core::wire::frame::{
    parts_fit, parts_total, Envelope, Payload, H_CONTEXT, H_FORWARD, H_PARTS, H_SEQ, H_SOURCE, H_SYNC, H_TAG, MAX_PARTS,
};
use proptest::prelude::*;

#[global_allocator]
static ALLOC: fuzz_support::Watching = fuzz_support::Watching;

const NAMES: [&str; 8] = [H_SOURCE, H_CONTEXT, H_TAG, H_SEQ, H_SYNC, H_PARTS, H_FORWARD, "content-length"];

/// A number as text the way a client might write it, or mangle it.
fn number() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<u64>().prop_map(|n| n.to_string()),
        any::<i64>().prop_map(|n| n.to_string()),
        (0..1000u32).prop_map(|n| n.to_string()),
        (0..1024u64).prop_map(|d| (u64::MAX - d).to_string()),
        Just("18446744073709551616".to_string()),
        "[-+ 0-9a-fx.e]{0,24}",
    ]
}

/// A header value: numbers, lists of them, or any bytes a header may hold
/// (control characters moved into the visible range).
fn value() -> impl Strategy<Value = HeaderValue> {
    let visible = |b: Vec<u8>| b.into_iter().map(|c| if (c < 0x20 && c != b'\t') || c == 0x7f { c ^ 0x40 } else { c }).collect::<Vec<u8>>();
    prop_oneof![
        number(),
        proptest::collection::vec(number(), 0..6).prop_map(|v| v.join(",")),
        Just("0,".to_string()),
        Just(",".repeat(MAX_PARTS as usize + 1)),
    ]
    .prop_map(|s| HeaderValue::from_str(&s).unwrap())
    .boxed()
    .prop_union(proptest::collection::vec(any::<u8>(), 0..48).prop_map(move |b| HeaderValue::from_bytes(&visible(b)).unwrap()).boxed())
}

fn headers() -> impl Strategy<Value = HeaderMap> {
    let name = prop_oneof![
        4 => proptest::sample::select(&NAMES[..]).prop_map(HeaderName::from_static),
        1 => "[a-z-]{1,12}".prop_map(|n| HeaderName::from_bytes(n.as_bytes()).unwrap()),
    ];
    // Appended, not inserted: a name may come twice.
    proptest::collection::vec((name, value()), 0..12).prop_map(|pairs| {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(k, v);
        }
        h
    })
}

fn body_length() -> impl Strategy<Value = Option<u64>> {
    proptest::option::of(prop_oneof![0..4096u64, any::<u64>(), (0..16u64).prop_map(|d| u64::MAX - d)])
}

fn envelope() -> impl Strategy<Value = Envelope> {
    (
        (any::<u32>(), any::<u64>(), 0..=i32::MAX, proptest::option::of(any::<u64>()), any::<bool>()),
        proptest::collection::vec(any::<u32>().prop_map(u64::from), 0..8),
        proptest::collection::vec(any::<u32>(), 0..8),
    )
        .prop_map(|((source, context, tag, seq, sync), parts, forward)| Envelope { source, context, tag, seq, sync, parts, forward })
}

/// A payload in chunks, and a part table: one that fits it, or anything.
fn payload_and_table() -> impl Strategy<Value = (Vec<Vec<u8>>, Vec<u64>)> {
    let chunks = proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..64), 0..6);
    let part = prop_oneof![0..80u64, any::<u64>(), (0..8u64).prop_map(|d| u64::MAX - d), Just(1u64 << 40)];
    (chunks, proptest::collection::vec(part, 0..8), any::<bool>()).prop_map(|(chunks, table, fit)| {
        let len: usize = chunks.iter().map(Vec::len).sum();
        let table = if fit && !table.is_empty() {
            // Scale the table down to one that adds up to the payload.
            let mut left = len as u64;
            let mut t: Vec<u64> = table
                .iter()
                .map(|&p| {
                    let p = p % (left + 1);
                    left -= p;
                    p
                })
                .collect();
            *t.last_mut().unwrap() += left;
            t
        } else {
            table
        };
        (chunks, table)
    })
}

proptest! {
    #![proptest_config(fuzz_support::config())]

    /// Any headers, any body length: an envelope or an error, never a panic;
    /// an accepted one keeps the rules the receiver relies on.
    #[test]
    fn envelope_from_any_headers(h in headers(), len in body_length()) {
        if let Ok(e) = Envelope::from_headers(&h, len) {
            prop_assert!(e.tag >= 0);
            prop_assert!(e.parts.len() <= MAX_PARTS as usize && e.forward.len() <= MAX_PARTS as usize);
            prop_assert!(parts_total(&e.parts).is_some());
            if let Some(len) = len {
                prop_assert!(parts_fit(&e.parts, len));
            }
        }
    }

    /// An envelope's headers read back as the same envelope.
    #[test]
    fn envelope_round_trips_through_headers(e in envelope()) {
        let mut h = HeaderMap::new();
        for (k, v) in e.to_headers() {
            h.insert(k, HeaderValue::from_str(&v).unwrap());
        }
        let len = parts_total(&e.parts).unwrap();
        prop_assert_eq!(Envelope::from_headers(&h, Some(len)).unwrap(), e.clone());
        prop_assert_eq!(Envelope::from_headers(&h, None).unwrap(), e);
    }

    /// Any table on any chunking: no panic, no allocation beyond the
    /// payload, the parts are the payload's bytes in order, and a table
    /// that fits splits it exactly.
    #[test]
    fn parts_split_within_the_payload((chunks, table) in payload_and_table()) {
        let data: Vec<u8> = chunks.concat();
        let payload = Payload::from_chunks(chunks.into_iter().map(Bytes::from).collect());
        let (split, largest) = fuzz_support::largest_allocation(|| payload.split_parts(&table));
        // Beyond the payload, only the lists of parts (a few words per entry).
        let lists = 64 * (table.len() + 1);
        prop_assert!(largest <= data.len().max(lists), "allocated {largest} for {} bytes", data.len());
        let joined: Vec<u8> = split.concat();
        prop_assert!(data.starts_with(&joined));
        prop_assert_eq!(split.len(), table.len().max(1));
        if parts_fit(&table, data.len() as u64) {
            prop_assert_eq!(&joined, &data);
            if !table.is_empty() {
                prop_assert!(split.iter().zip(&table).all(|(s, &t)| s.len() as u64 == t));
            }
        }
        let payload = payload.clone();
        let (shared, largest) = fuzz_support::largest_allocation(move || payload.into_parts(&table));
        prop_assert!(largest <= data.len().max(lists), "allocated {largest} for {} bytes", data.len());
        prop_assert_eq!(shared.iter().map(|b| b.to_vec()).collect::<Vec<_>>(), split);
    }
}

/// Finding 4 through headers: a table that wraps round to the body length.
#[test]
fn a_parts_header_that_wraps_round_is_refused() {
    let huge = 1u64 << 40;
    let mut h = HeaderMap::new();
    h.insert(H_SOURCE, HeaderValue::from_static("1"));
    h.insert(H_PARTS, HeaderValue::from_str(&format!("{huge},{}", 0u64.wrapping_sub(huge) + 1)).unwrap());
    for len in [Some(1), None] {
        let e = Envelope::from_headers(&h, len).unwrap_err();
        assert_eq!(e.class, mpiws_core::ErrorClass::Arg);
        assert!(e.message.contains("2^64"), "{}", e.message);
    }
}

/// The receiver's backstop: a table that claims terabytes splits a 1-byte
/// payload without asking for them (the old code aborted here).
#[test]
fn a_table_claiming_terabytes_allocates_only_the_payload() {
    let p = Payload::from_chunks(vec![Bytes::from_static(b"x"), Bytes::new()]);
    let (split, largest) = fuzz_support::largest_allocation(|| p.split_parts(&[1 << 40, 0u64.wrapping_sub(1 << 40) + 1]));
    assert_eq!(split, vec![b"x".to_vec(), vec![]]);
    assert!(largest < 1024, "{largest}");
}

/// `into_parts` and `split_parts` agree on an empty table: one part.
#[test]
fn an_empty_table_is_one_part_either_way() {
    let p = Payload::from_chunks(vec![Bytes::from_static(b"abc")]);
    assert_eq!(p.split_parts(&[]), vec![b"abc".to_vec()]);
    assert_eq!(p.into_parts(&[]), vec![Bytes::from_static(b"abc")]);
}
