//! Property tests of FlowTransport framing: arbitrary packet sequences (with and without
//! checksums, with and without a leading ConnectPacket) encoded with `encode_packet` /
//! `ConnectPacket::encode` come out of `FrameDecoder` unchanged however the byte stream is
//! chunked; a flipped payload byte in a checksummed stream is a `ChecksumMismatch`; a flipped
//! byte anywhere never panics and never goes unnoticed; hostile input never panics.

use std::ops::Range;

use bytes::{Bytes, BytesMut};
use fdb_protocol::framing::{
    checksum, encode_packet, ConnectPacket, FrameDecoder, FrameError, Incoming, Packet,
    CHECKSUM_WIDTH, MIN_PACKET_LEN, PACKET_LEN_WIDTH,
};
use fdb_protocol::Uid;
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::Index;

fn uid() -> impl Strategy<Value = Uid> {
    any::<(u64, u64)>().prop_map(|(a, b)| Uid::new(a, b))
}

fn connect_packet() -> impl Strategy<Value = ConnectPacket> {
    (
        any::<u64>(),
        any::<u16>(),
        any::<u64>(),
        any::<u32>(),
        any::<u16>(),
        any::<[u8; 16]>(),
    )
        .prop_map(
            |(
                protocol_version,
                canonical_remote_port,
                connection_id,
                canonical_remote_ip4,
                flags,
                canonical_remote_ip6,
            )| ConnectPacket {
                protocol_version,
                canonical_remote_port,
                connection_id,
                canonical_remote_ip4,
                flags,
                canonical_remote_ip6,
            },
        )
}

fn packet() -> impl Strategy<Value = Packet> {
    let message = prop_oneof![
        1 => Just(Bytes::new()),
        4 => vec(any::<u8>(), 0..2000).prop_map(Bytes::from),
        // Large enough for the decoder to give it a buffer of its own.
        1 => vec(any::<u8>(), 16_000..40_000).prop_map(Bytes::from),
    ];
    (uid(), message).prop_map(|(token, message)| Packet { token, message })
}

/// A direction of a connection as a sender produces it.
#[derive(Clone, Debug)]
struct Stream {
    connect: Option<ConnectPacket>,
    packets: Vec<Packet>,
    with_checksum: bool,
}

/// At least `min_packets` packets (at most 7), perhaps after a connect packet.
fn stream(
    min_packets: usize,
    with_checksum: impl Strategy<Value = bool>,
) -> impl Strategy<Value = Stream> {
    (of_connect(), vec(packet(), min_packets..8), with_checksum).prop_map(
        |(connect, packets, with_checksum)| Stream {
            connect,
            packets,
            with_checksum,
        },
    )
}

fn of_connect() -> impl Strategy<Value = Option<ConnectPacket>> {
    proptest::option::of(connect_packet())
}

/// Chunk sizes, used cyclically; sometimes one byte at a time, sometimes all at once.
fn chunking() -> impl Strategy<Value = Vec<usize>> {
    prop_oneof![
        1 => Just(vec![1]),
        1 => Just(vec![usize::MAX]),
        6 => vec(1usize..600, 1..12),
    ]
}

/// Where one encoded packet sits in the stream.
struct Placed {
    /// The 4-byte length field.
    len: Range<usize>,
    /// The checksum, when there is one.
    sum: Option<Range<usize>>,
    /// Token and message: what the checksum covers.
    payload: Range<usize>,
}

/// Encodes a stream; returns its bytes, the frames a decoder must yield, and where each
/// packet's fields are.
fn encode_stream(s: &Stream) -> (Vec<u8>, Vec<Incoming>, Vec<Placed>) {
    let mut b = BytesMut::new();
    let mut frames = Vec::new();
    let mut placed = Vec::new();
    if let Some(c) = &s.connect {
        c.encode(&mut b);
        frames.push(Incoming::Connect(*c));
    }
    for p in &s.packets {
        let start = b.len();
        encode_packet(&mut b, p.token, &p.message, s.with_checksum);
        let header = PACKET_LEN_WIDTH + if s.with_checksum { CHECKSUM_WIDTH } else { 0 };
        placed.push(Placed {
            len: start..start + PACKET_LEN_WIDTH,
            sum: s
                .with_checksum
                .then_some(start + PACKET_LEN_WIDTH..start + header),
            payload: start + header..b.len(),
        });
        frames.push(Incoming::Packet(p.clone()));
    }
    (b.to_vec(), frames, placed)
}

/// The offset just past each frame of the encoded stream.
fn frame_ends(s: &Stream) -> Vec<usize> {
    let header = PACKET_LEN_WIDTH + if s.with_checksum { CHECKSUM_WIDTH } else { 0 };
    let mut at = 0;
    let mut ends = Vec::new();
    if s.connect.is_some() {
        at += 44;
        ends.push(at);
    }
    for p in &s.packets {
        at += header + 16 + p.message.len();
        ends.push(at);
    }
    ends
}

/// What came out of a decoder fed `bytes` in `chunks`.
struct Outcome {
    frames: Vec<Incoming>,
    error: Option<FrameError>,
    buffered: usize,
}

fn decode_chunked(
    bytes: &[u8],
    chunks: &[usize],
    expect_connect: bool,
    with_checksum: bool,
) -> Outcome {
    let mut d = FrameDecoder::new(expect_connect, with_checksum);
    let mut frames = Vec::new();
    let mut error = None;
    let mut at = 0;
    let mut sizes = chunks.iter().cycle();
    'feed: while at < bytes.len() {
        let n = (*sizes.next().unwrap()).min(bytes.len() - at);
        d.feed(&bytes[at..at + n]);
        at += n;
        loop {
            match d.next_frame() {
                Ok(Some(f)) => frames.push(f),
                Ok(None) => break,
                Err(e) => {
                    error = Some(e);
                    break 'feed;
                }
            }
        }
    }
    if let Some(e) = &error {
        // A failed decoder stays failed, and holds nothing.
        d.feed(b"more bytes");
        assert_eq!(d.next_frame(), Err(e.clone()));
        assert_eq!(d.buffered(), 0);
    } else if bytes.is_empty() {
        assert_eq!(d.next_frame(), Ok(None));
    }
    Outcome {
        frames,
        error,
        buffered: d.buffered(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(384))]

    #[test]
    fn frames_survive_any_chunking(s in stream(0, any::<bool>()), chunks in chunking()) {
        let (bytes, want, _) = encode_stream(&s);
        let out = decode_chunked(&bytes, &chunks, s.connect.is_some(), s.with_checksum);
        prop_assert_eq!(out.error, None);
        prop_assert_eq!(out.frames, want);
        prop_assert_eq!(out.buffered, 0);
    }

    #[test]
    fn a_stream_cut_short_waits_for_more(
        s in stream(1, any::<bool>()),
        chunks in chunking(),
        cut in any::<Index>(),
    ) {
        let (bytes, want, _) = encode_stream(&s);
        let ends = frame_ends(&s);
        let cut = cut.index(bytes.len());
        let out = decode_chunked(&bytes[..cut], &chunks, s.connect.is_some(), s.with_checksum);
        prop_assert_eq!(out.error, None);
        // Exactly the frames wholly before the cut come out; the rest is held, not lost.
        let k = ends.iter().take_while(|&&e| e <= cut).count();
        prop_assert_eq!(&out.frames[..], &want[..k]);
        let framed = if k == 0 { 0 } else { ends[k - 1] };
        prop_assert_eq!(out.buffered, cut - framed);
    }

    #[test]
    fn a_flipped_payload_byte_is_a_checksum_mismatch(
        s in stream(1, Just(true)),
        chunks in chunking(),
        which in any::<Index>(),
        at in any::<Index>(),
        mask in 1u8..=255,
    ) {
        let (mut bytes, want, placed) = encode_stream(&s);
        let j = which.index(placed.len());
        let payload = placed[j].payload.clone();
        let i = payload.start + at.index(payload.len());
        let sent = u64::from_le_bytes(
            bytes[placed[j].sum.clone().unwrap()].try_into().unwrap(),
        );
        bytes[i] ^= mask;
        let computed = checksum(&bytes[payload]);
        let out = decode_chunked(&bytes, &chunks, s.connect.is_some(), true);
        let before = j + usize::from(s.connect.is_some());
        prop_assert_eq!(&out.frames[..], &want[..before]);
        prop_assert_eq!(out.error, Some(FrameError::ChecksumMismatch { expected: sent, computed }));
        prop_assert_eq!(out.buffered, 0);
    }

    #[test]
    fn a_flipped_byte_anywhere_is_noticed(
        s in stream(1, Just(true)),
        chunks in chunking(),
        at in any::<Index>(),
        mask in 1u8..=255,
    ) {
        let (mut bytes, want, placed) = encode_stream(&s);
        let i = at.index(bytes.len());
        bytes[i] ^= mask;
        let out = decode_chunked(&bytes, &chunks, s.connect.is_some(), true);
        let unnoticed = out.error.is_none() && out.buffered == 0 && out.frames == want;
        prop_assert!(!unnoticed, "flip at {} of {} went unnoticed", i, bytes.len());
        // Where the flip landed decides how it is noticed.
        if let Some(p) = placed.iter().find(|p| p.len.contains(&i) || p.payload.contains(&i)
            || p.sum.as_ref().is_some_and(|r| r.contains(&i)))
        {
            if !p.len.contains(&i) {
                prop_assert!(
                    matches!(out.error, Some(FrameError::ChecksumMismatch { .. })),
                    "flip at {} gave {:?}", i, out.error
                );
            }
        }
    }

    #[test]
    fn packets_over_the_limit_are_refused(
        p in packet(),
        limit in MIN_PACKET_LEN..3000,
        with_checksum in any::<bool>(),
    ) {
        let mut b = BytesMut::new();
        encode_packet(&mut b, p.token, &p.message, with_checksum);
        let mut d = FrameDecoder::new(false, with_checksum).with_limit(limit);
        d.feed(&b);
        let len = (16 + p.message.len()) as u32;
        if len > limit {
            prop_assert_eq!(d.next_frame(), Err(FrameError::PacketTooLarge { len, limit }));
        } else {
            prop_assert_eq!(d.next_frame(), Ok(Some(Incoming::Packet(p))));
        }
    }

    #[test]
    fn connect_packets_roundtrip(c in connect_packet()) {
        let mut b = BytesMut::new();
        c.encode(&mut b);
        prop_assert_eq!(b.len(), 44);
        prop_assert_eq!(ConnectPacket::decode(&b), Ok(c));
        for cut in 0..b.len() {
            prop_assert!(ConnectPacket::decode(&b[..cut]).is_err());
        }
    }

    #[test]
    fn hostile_bytes_never_panic(
        bytes in vec(any::<u8>(), 0..300),
        chunks in chunking(),
        expect_connect in any::<bool>(),
        with_checksum in any::<bool>(),
    ) {
        let _ = ConnectPacket::decode(&bytes);
        let out = decode_chunked(&bytes, &chunks, expect_connect, with_checksum);
        prop_assert!(out.buffered <= bytes.len());
    }
}
